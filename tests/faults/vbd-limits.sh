#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# vbd-limits.sh - a vbd's limits seen from outside (issue #10; README
# "Limits"): --max-inflight out of range is refused at start; with
# --max-inflight 2, a td-front at queue depth 64 is held back by the pool
# (tapdisk's "waits" counter grows) and still verifies every byte; with
# 16 NBD connections idle, a 17th takes the place of the one idle longest
# (the limits of a busy export: tests/integration/nbd-admission.sh).
#
# Prints one line per check; exits 0 when all pass, 1 when one fails, 77
# (automake's skip) when python3 is missing.  BUILDDIR (set by make check)
# is where the programs were built.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
TDFRONT=$BUILDDIR/bin/td-front
INTEGRATION=$(cd "$(dirname "$0")/../integration" && pwd)
NBD_MAX_CLIENTS=16 # TD_NBD_DEFAULT_MAX_CLIENTS
PASSED=0
FAILED=0

if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not found"
	exit 77
fi
for bin in "$TAPDISK" "$TAPCTL" "$TDFRONT"; do
	if [ ! -x "$bin" ]; then
		echo "FAIL: $bin not built"
		exit 1
	fi
done

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/vbd-limits.XXXXXX")
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

stat_of() { # KEY: a number from tap-ctl stats --json (a.b for nested ones)
	"$TAPCTL" --run-dir "$WORK" stats -i "$TD_PID" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    v = v[k]
print(v)' "$1"
}

# --- out of range: refused at start, with the range -------------------------
for n in 0 65537; do
	out=$("$TAPDISK" --foreground -a null:size=1M --max-inflight $n 2>&1)
	rc=$?
	[ $rc -eq 2 ] && grep -q "from 1 to 65536" <<<"$out" &&
		pass "--max-inflight $n refused: $(head -1 <<<"$out")" ||
		fail "--max-inflight $n refused" "exit $rc: $out"
done

# --- the pool: back-pressure, not failures --------------------------------------
truncate -s 64M "$WORK/disk.img"
"$TAPDISK" --foreground -a "aio:$WORK/disk.img" --max-inflight 2 \
	--shm "$WORK/shm.sock" --nbd "unix:$WORK/nbd.sock" --run-dir "$WORK" \
	--log-level warn --log-file "$WORK/tapdisk.log" &
TD_PID=$!
for _ in $(seq 100); do
	[ -S "$WORK/shm.sock" ] && [ -S "$WORK/nbd.sock" ] && break
	sleep 0.05
done
if TAPSTRIPE_RUNDIR=$WORK timeout 120 "$TDFRONT" --shm "$WORK/shm.sock" \
	--verify --pattern rand --bs 4k,64k --qd 64 --size 16M \
	>"$WORK/front.out" 2>&1; then
	waits=$(stat_of waits)
	inflight=$(stat_of inflight)
	[ "$waits" -gt 0 ] && [ "$inflight" = 0 ] &&
		pass "--max-inflight 2 under queue depth 64: verified, $waits waits for the pool, nothing left in flight" ||
		fail "--max-inflight 2 back-pressure" "waits $waits, inflight $inflight"
else
	fail "td-front --verify with --max-inflight 2" "$(tail -3 "$WORK/front.out")"
fi

# --- NBD connections: 16; a 17th takes the slot of the one idle longest -----
out=$(python3 - "$INTEGRATION" "$WORK/nbd.sock" $NBD_MAX_CLIENTS <<'PY'
import sys, time
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from importlib import import_module
nbd = import_module("nbd-hostile")
path, limit = sys.argv[2], int(sys.argv[3])
held = []
for _ in range(limit):
    c = nbd.Client(path)
    c.connect()
    held.append(c)
    time.sleep(0.01)  # the first is the one idle longest
extra = nbd.Client(path, timeout=10)
extra.connect()
extra.read_ok(0, 4096)
held[0].expect_eof()
for c in held[1:]:
    c.read_ok(0, 4096)
print("ok")
PY
)
evicted=$(stat_of nbd.evicted)
[ "$out" = ok ] && [ "$evicted" = 1 ] &&
	pass "NBD: connection $((NBD_MAX_CLIENTS + 1)) served in the place of the one idle longest (evicted $evicted), the others still served" ||
	fail "NBD connection limit" "$out; evicted $evicted"

kill -TERM "$TD_PID"
wait "$TD_PID"
rc=$?
TD_PID=
[ $rc -eq 0 ] && pass "tapdisk exits 0 on SIGTERM" || fail "SIGTERM" "exit $rc"

echo "$PASSED passed, $FAILED failed"
[ $FAILED -eq 0 ]
