# SPDX-License-Identifier: BSD-3-Clause
# shm-lib.sh - sourced by the shm ring tests (shm-verify.sh,
# shm-multiqueue.sh): programs, a work directory under /var/tmp named
# after SHM_TEST (set by the caller, with REGION), cleanup of every
# tapdisk started, pass/fail, start_tapdisk, stop_tapdisk, front,
# json_get.
BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
TDFRONT=$BUILDDIR/bin/td-front
HERE=$(cd "$(dirname "$0")" && pwd)
PATTERN=$HERE/shm-pattern.py
SIZES=4k,44k,128k,1m
PASSED=0
FAILED=0

if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not found"
	exit 77
fi
for prog in "$TAPDISK" "$TAPCTL" "$TDFRONT"; do
	if [ ! -x "$prog" ]; then
		echo "FAIL: $prog not built"
		exit 1
	fi
done

WORK=$(mktemp -d "/var/tmp/$SHM_TEST.XXXXXX")
export TAPSTRIPE_RUNDIR=$WORK/run
PIDS=()

cleanup() {
	for pid in "${PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}

fail() {
	echo "FAIL: $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | head -20 | sed 's/^/    /'
	FAILED=$((FAILED + 1))
}

# start_tapdisk NAME CHAIN [OPTIONS...]: a foreground tapdisk on
# $WORK/NAME.sock; sets TD_PID.
start_tapdisk() {
	local name=$1 chain=$2
	shift 2
	rm -f "$WORK/$name.sock"
	"$TAPDISK" --foreground -a "$chain" --shm "$WORK/$name.sock" \
		--name "$name" --log-level warn "$@" 2>>"$WORK/$name.log" &
	TD_PID=$!
	PIDS+=("$TD_PID")
	for _ in $(seq 100); do
		[ -S "$WORK/$name.sock" ] && return 0
		sleep 0.05
	done
	echo "tapdisk $name did not start:" >&2
	cat "$WORK/$name.log" >&2
	exit 1
}

# stop_tapdisk PID NAME: SIGTERM; it must exit 0 (and, in a sanitizer
# build, without a leak report).
stop_tapdisk() {
	local rc
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	rc=$?
	if [ $rc -eq 0 ]; then
		pass "tapdisk $2 stopped cleanly"
	else
		fail "tapdisk $2 stopped cleanly" "exit $rc; $(tail -5 "$WORK/$2.log")"
	fi
}

front() { # SOCKET ARGS...: td-front, quiet, output in $OUT
	local sock=$1
	shift
	OUT=$(timeout 120 "$TDFRONT" --shm "$sock" --quiet --no-progress "$@" 2>&1)
}

# json_get KEY.PATH: a number from the JSON in $OUT.
json_get() {
	python3 -c 'import json, sys
v = json.loads(sys.stdin.read())
for k in sys.argv[1].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$1" <<<"$OUT"
}
