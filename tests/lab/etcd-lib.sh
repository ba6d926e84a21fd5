# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# etcd-lib.sh - start and stop a local etcd cluster on free loopback ports
# (sourced by tests/integration/etcd-client.sh, bench/etcd-txn.sh and, for
# issue #23, the lab; not run).  Needs etcd (Debian's etcd-server) and
# python3; etcd_lib_have says whether they are there.
#
#   etcd_cluster_start DIR N   N members (data under $ETCD_LIB_DATA_ROOT,
#                              default /dev/shm when it exists, else DIR),
#                              logs in DIR/etcd-I.log; waits until every
#                              member answers.  Sets ETCD_PIDS[I],
#                              ETCD_URLS[I] (client URLs, I = 0..N-1) and
#                              ETCD_ENDPOINTS (them, comma-separated).
#   etcd_member_kill I [SIG]   kill member I (default KILL) and reap it
#   etcd_cluster_stop          kill every member still running (by PID) and
#                              remove the data directories: call it from
#                              the caller's EXIT trap
#   etcd_leader                the index of the current leader (or fails)

ETCD_PIDS=()
ETCD_URLS=()
ETCD_ENDPOINTS=
ETCD_LIB_DATA_DIRS=()

etcd_lib_have() {
	command -v etcd >/dev/null && command -v python3 >/dev/null
}

etcd_lib_free_ports() { # N: N distinct free TCP ports on 127.0.0.1
	python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Does the member at URL answer a linearizable range?  (etcd's /health.)
etcd_lib_healthy() { # URL
	python3 - "$1" <<'PY'
import json, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1] + "/health", timeout=1) as r:
        sys.exit(0 if json.load(r).get("health") == "true" else 1)
except Exception:
    sys.exit(1)
PY
}

etcd_cluster_start() { # DIR N
	local dir=$1 n=$2 i ports root cluster= token
	root=${ETCD_LIB_DATA_ROOT:-$dir}
	[ -z "${ETCD_LIB_DATA_ROOT:-}" ] && [ -d /dev/shm ] && root=/dev/shm
	read -r -a ports <<<"$(etcd_lib_free_ports $((2 * n)))"
	token=tapstripe-test-$$-$RANDOM
	for ((i = 0; i < n; i++)); do
		cluster+="${cluster:+,}m$i=http://127.0.0.1:${ports[2 * i + 1]}"
	done
	for ((i = 0; i < n; i++)); do
		ETCD_LIB_DATA_DIRS[i]=$(mktemp -d "$root/etcd-m$i.XXXXXX")
		ETCD_URLS[i]=http://127.0.0.1:${ports[2 * i]}
		etcd --name "m$i" --data-dir "${ETCD_LIB_DATA_DIRS[i]}" \
			--listen-client-urls "${ETCD_URLS[i]}" \
			--advertise-client-urls "${ETCD_URLS[i]}" \
			--listen-peer-urls "http://127.0.0.1:${ports[2 * i + 1]}" \
			--initial-advertise-peer-urls "http://127.0.0.1:${ports[2 * i + 1]}" \
			--initial-cluster "$cluster" --initial-cluster-token "$token" \
			--initial-cluster-state new >"$dir/etcd-$i.log" 2>&1 &
		ETCD_PIDS[i]=$!
	done
	ETCD_ENDPOINTS=$(
		IFS=,
		echo "${ETCD_URLS[*]}"
	)
	for ((i = 0; i < n; i++)); do
		etcd_lib_wait "$i" || return 1
	done
}

etcd_lib_wait() { # I: up to 20 s for member I to be healthy
	local t
	for t in $(seq 200); do
		etcd_lib_healthy "${ETCD_URLS[$1]}" && return 0
		kill -0 "${ETCD_PIDS[$1]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "etcd member $1 did not come up (log: its etcd-$1.log)" >&2
	return 1
}

etcd_member_kill() { # I [SIGNAL]
	local pid=${ETCD_PIDS[$1]}
	[ -n "$pid" ] || return 0
	kill -"${2:-KILL}" "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	ETCD_PIDS[$1]=
}

etcd_cluster_stop() {
	local i
	for i in "${!ETCD_PIDS[@]}"; do
		etcd_member_kill "$i"
	done
	for i in "${!ETCD_LIB_DATA_DIRS[@]}"; do
		rm -rf "${ETCD_LIB_DATA_DIRS[i]}"
	done
	ETCD_LIB_DATA_DIRS=()
}

etcd_leader() {
	local i
	for i in "${!ETCD_URLS[@]}"; do
		[ -n "${ETCD_PIDS[i]}" ] || continue
		python3 - "${ETCD_URLS[i]}" <<'PY' && { echo "$i"; return 0; }
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v3/maintenance/status",
                             data=b"{}", method="POST")
with urllib.request.urlopen(req, timeout=2) as r:
    st = json.load(r)
sys.exit(0 if st.get("leader") == st["header"].get("member_id") else 1)
PY
	done
	return 1
}
