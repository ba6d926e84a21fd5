#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# etcd-txn.sh - compare-and-swap txns per second and their p50/p99 latency
# against a 3-member etcd cluster on this machine (tests/lab/etcd-lib.sh),
# through the master's etcd client (tests/integration/etcd-cli bench), from
# 1 and 4 concurrent client processes, in two modes:
#   shared  every client increments one key by CAS, as masters appending to
#           one log head will (a lost race costs a retry: "conflicts");
#   own     each client its own key (etcd's raw rate for this client).
# A call's latency includes its retries.  The members' data live on
# /dev/shm unless ETCD_LIB_DATA_ROOT says otherwise: fsync is then cheap,
# so the figures are etcd's and the client's costs, not a disk's.
#
# Usage: BUILDDIR=build bench/etcd-txn.sh [CALLS_PER_CLIENT] (default 2000)
# Prints one line per run and a JSON summary on the last line.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
CLI=$BUILDDIR/tests/integration/etcd-cli
CALLS=${1:-2000}
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/lab/etcd-lib.sh
. "$top/tests/lab/etcd-lib.sh"

if ! etcd_lib_have; then
	echo "etcd-txn: etcd or python3 not found (apt-get install etcd-server python3)" >&2
	exit 77
fi
if [ ! -x "$CLI" ]; then
	echo "etcd-txn: $CLI not built (make tests/integration/etcd-cli)" >&2
	exit 1
fi
WORK=$(mktemp -d /tmp/etcd-txn.XXXXXX)
PIDS=
cleanup() {
	local pid
	for pid in $PIDS; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	etcd_cluster_stop
	rm -rf "$WORK"
}
trap cleanup EXIT
etcd_cluster_start "$WORK" 3 || exit 1

run() { # MODE CLIENTS
	local mode=$1 n=$2 i key start end rc=0 pid
	PIDS=
	start=$(date +%s%N)
	for ((i = 0; i < n; i++)); do
		key=bench/$mode-$n
		[ "$mode" = own ] && key=$key-$i
		"$CLI" --endpoints "$ETCD_ENDPOINTS" --timeout 5000 bench "$key" \
			"$CALLS" "$WORK/lat-$mode-$n-$i" >"$WORK/out-$mode-$n-$i" &
		PIDS="$PIDS $!"
	done
	for pid in $PIDS; do
		wait "$pid" || rc=1
	done
	PIDS=
	end=$(date +%s%N)
	[ $rc -eq 0 ] || {
		echo "etcd-txn: a client failed" >&2
		exit 1
	}
	python3 - "$mode" "$n" "$(((end - start) / 1000))" "$WORK" <<'PY'
import glob, json, sys
mode, n, wall_us, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
lat = sorted(int(l) for f in glob.glob("%s/lat-%s-%d-*" % (work, mode, n))
             for l in open(f))
conf = sum(json.load(open(f))["conflicts"]
           for f in glob.glob("%s/out-%s-%d-*" % (work, mode, n)))
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] / 1000.0
r = {"mode": mode, "clients": n, "calls": len(lat), "conflicts": conf,
     "calls_per_s": round(len(lat) / (wall_us / 1e6)),
     "p50_ms": round(pct(0.50), 3), "p99_ms": round(pct(0.99), 3)}
print("%(mode)-6s %(clients)d client(s): %(calls)d CAS calls, %(calls_per_s)d/s, "
      "p50 %(p50_ms).3f ms, p99 %(p99_ms).3f ms, %(conflicts)d conflicts" % r)
open("%s/result-%s-%d.json" % (work, mode, n), "w").write(json.dumps(r))
PY
}

for n in 1 4; do
	for mode in shared own; do
		run "$mode" "$n"
	done
done
python3 -c 'import glob, json, sys
print(json.dumps([json.load(open(f)) for f in sorted(glob.glob(sys.argv[1] + "/result-*.json"))]))' "$WORK"
