#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-rss.sh - tapdisk's memory after many hostile NBD sessions, several at
# once, as an attacker would run them (issue #17, item 5).
#
# tapdisk serves null:size=64M (--max-inflight 32) on a unix socket;
# nbd-admission.py runs SESSIONS hostile sessions, PARALLEL at a time:
# each negotiates, sends 1 to 4 READs of 4 KiB to 1 MiB whose replies it
# never reads, starts a WRITE of 4 KiB to 1 MiB, sends part of its data and
# hangs up.  tapdisk's RSS (VmRSS) is read when idle after start, and
# again once every connection is gone; it may grow by at most BOUND_KIB
# (doc/guarantees.md, "Memory per vbd": 1 MiB, plus the vbd's request
# pools as far as they are used, 32 × 16.5 KiB here).
#
#   NBD_RSS_SESSIONS=50000 (default; 5000 under ASan)  NBD_RSS_PARALLEL=8
#   NBD_RSS_BOUND_KIB=2048
#
# Prints PASS/FAIL lines and "N passed, N failed"; exits 0, 1, or 77
# (automake's skip) without python3.  Under ASan the sessions run (for its
# reports) but RSS is not judged: its quarantine keeps freed memory.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
SESSIONS_PY=$(cd "$(dirname "$0")/../integration" && pwd)/nbd-admission.py
PARALLEL=${NBD_RSS_PARALLEL:-8}
BOUND_KIB=${NBD_RSS_BOUND_KIB:-2048}
PASSED=0
FAILED=0

if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not found"
	exit 77
fi
for bin in "$TAPDISK" "$TAPCTL"; do
	[ -x "$bin" ] || { echo "FAIL: $bin not built"; exit 1; }
done
ASAN=
ldd "$TAPDISK" 2>/dev/null | grep -q libasan && ASAN=1
SESSIONS=${NBD_RSS_SESSIONS:-$([ -n "$ASAN" ] && echo 5000 || echo 50000)}

WORK=$(mktemp -d /tmp/nbd-rss.XXXXXX)
SOCK=$WORK/nbd.sock
TD_PID=
cleanup() {
	if [ -n "$TD_PID" ] && kill -0 "$TD_PID" 2>/dev/null; then
		kill -KILL "$TD_PID"
		wait "$TD_PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}

fail() {
	echo "FAIL: $1${2:+ ($2)}"
	FAILED=$((FAILED + 1))
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$TD_PID/status"; }

nbd_stat() { # KEY of the nbd object of tap-ctl stats --json
	"$TAPCTL" --run-dir "$WORK" stats -i "$TD_PID" --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["nbd"][sys.argv[1]])' "$1"
}

# settle: every connection gone (closed ones wait for their I/O), 30 s.
settle() {
	for _ in $(seq 150); do
		[ "$(nbd_stat clients 2>/dev/null)" = 0 ] &&
			[ "$(nbd_stat memory_bytes 2>/dev/null)" = 0 ] && return 0
		sleep 0.2
	done
	return 1
}

"$TAPDISK" --foreground -a null:size=64M --nbd "unix:$SOCK" --run-dir "$WORK" \
	--max-inflight 32 --name rss --log-level err --log-file "$WORK/tapdisk.log" &
TD_PID=$!
for _ in $(seq 100); do
	[ -S "$SOCK" ] && nbd_stat clients >/dev/null 2>&1 && break
	sleep 0.1
done
sleep 0.5
BEFORE=$(rss_kib)
START=$SECONDS
if ! out=$(python3 "$SESSIONS_PY" "$SOCK" sessions "$SESSIONS" "$PARALLEL" 2>&1); then
	fail "$SESSIONS hostile sessions, $PARALLEL at a time" "$out"
fi
TOOK=$((SECONDS - START))
settle || fail "connections gone after the sessions" "clients $(nbd_stat clients), memory_bytes $(nbd_stat memory_bytes)"
AFTER=$(rss_kib)
GROWTH=$((AFTER - BEFORE))
echo "  $out in $TOOK s; tapdisk RSS $BEFORE KiB idle, $AFTER KiB after (+$GROWTH KiB)"
if ! kill -0 "$TD_PID" 2>/dev/null; then
	fail "tapdisk alive after $SESSIONS sessions"
elif [ -n "$ASAN" ]; then
	pass "$SESSIONS hostile sessions, $PARALLEL at a time (RSS not judged under ASan)"
elif [ "$GROWTH" -le "$BOUND_KIB" ]; then
	pass "RSS after $SESSIONS hostile sessions, $PARALLEL at a time: +$GROWTH KiB (bound $BOUND_KIB KiB)"
else
	fail "RSS after $SESSIONS hostile sessions, $PARALLEL at a time" "grew by $GROWTH KiB, bound $BOUND_KIB KiB"
fi

kill -TERM "$TD_PID"
RC=0
wait "$TD_PID" || RC=$?
TD_PID=
[ "$RC" = 0 ] && pass "SIGTERM: clean exit" || fail "SIGTERM: clean exit" "rc $RC"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
