# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# fault-lib.sh - what the lab fault cases of tests/faults/ share (sourced).
#
# Builds on tests/integration/stripe-lib.sh (a private lab with
# LAB_NET=auto and its own LAB_STATE, PASS/FAIL counting, serve/unserve,
# skips with 77) and adds:
#   FAULT_CLEANUP   commands (strings, eval'd) run after tapdisk and the lab
#                   are stopped and before the work directory is removed:
#                   unmounting, stopping a FUSE daemon
#   lab_of MAP N    the lab's number of server N of a mapping file
#   slot_server MAP C J R   server number (in MAP) of a replica
#   server_up PID N  wait (30 s) until tapdisk PID's connection to map
#                   server N is up
#   stripe_field PID KEY   a number from tapdisk's stripe report (JSON)
#   resync_all PID MAP     an online resync to the end (60 s)
#   elapsed T0      seconds since $EPOCHREALTIME was T0, one decimal
#
# Mounts a case needs (tmpfs, FUSE) must exist before lab_up: tgtd runs in
# the mount namespace "ip netns exec" made, which does not see later ones.

. "$(cd "$(dirname "$0")" && pwd)/../integration/stripe-lib.sh"
STRIPE_IO=$HERE/../integration/stripe-io.py
FAULT_IO=$HERE/fault-io.py
FAULT_CLEANUP=()

fault_cleanup() {
	local pid c
	for pid in "${TD_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	"$LAB" down >/dev/null 2>&1 || echo "lab.sh down failed; state in $LAB_STATE" >&2
	for c in "${FAULT_CLEANUP[@]}"; do
		eval "$c" >/dev/null 2>&1
	done
	rm -rf "$WORK"
}
trap fault_cleanup EXIT

lab_of() { # MAP N
	lab_index "$(awk -v n="$2" '$1 == "server" && $2 == n {
		for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$1")"
}

slot_server() { # MAP C J R
	awk -v c="$2" -v j="$3" -v r="$4" \
		'$1 == "extent" && $2 == c && $3 == j && $4 == r { print $6 }' "$1"
}

server_up() { # PID N
	local t
	for ((t = 0; t < 150; t++)); do
		"$TAPCTL" driver -i "$1" stripe status 2>/dev/null |
			grep -q "^server $2 .*: up," && return 0
		sleep 0.2
	done
	return 1
}

stripe_field() { # PID KEY: a top-level number of the stripe report
	"$TAPCTL" stats -i "$1" --json 2>/dev/null | "$PY" -c '
import json, sys
def find(o, k):
    if isinstance(o, dict):
        if k in o and not isinstance(o[k], (dict, list)):
            return o[k]
        for v in o.values():
            r = find(v, k)
            if r is not None:
                return r
    elif isinstance(o, list):
        for v in o:
            r = find(v, k)
            if r is not None:
                return r
    return None
print(find(json.load(sys.stdin), sys.argv[1]))' "$2"
}

resync_all() { # PID MAP: start an online resync and wait for its end
	local t try out
	# A resync may have started on its own (auto_resync): wait for it.
	# One that started before the fault was repaired (a full filesystem
	# grown meanwhile) may fail: start a new one, as an operator would.
	for ((try = 0; try < 3; try++)); do
		out=$("$TAPCTL" driver -i "$1" stripe resync 64M 2>&1) ||
			grep -q "already running" <<<"$out" || { echo "$out"; return 1; }
		for ((t = 0; t < 300; t++)); do
			[ -z "$("$PY" "$STRIPE_IO" stale "$2")" ] && return 0
			"$TAPCTL" driver -i "$1" stripe status 2>/dev/null |
				grep -q '^resync: failed' && break
			sleep 0.2
		done
		"$TAPCTL" driver -i "$1" stripe status 2>&1 | grep -i resync
	done
	return 1
}

# fault_io ACTION ARGS...: run fault-io.py, relay its PASS:/FAIL: lines as
# this script's checks, and fail once more when it died without a verdict.
# Its output stays in $FAULT_OUT for the caller.
fault_io() {
	local rc line action=$1
	FAULT_OUT=$("$PY" "$FAULT_IO" "$@" 2>&1)
	rc=$?
	while IFS= read -r line; do
		case $line in PASS:*) pass "${line#PASS: }" ;; FAIL:*) fail "${line#FAIL: }" ;; esac
	done <<<"$FAULT_OUT"
	[ $rc = 0 ] || grep -q '^FAIL:' <<<"$FAULT_OUT" || fail "fault-io.py $action" "$FAULT_OUT"
}

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
