#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# control-hold.sh - clients that try to hold a tapdisk's control socket
# shut (issue #17):
#   - 16 connections that each sent part of a line ("sta") and wait:
#     tap-ctl stats, pause, resume and destroy still answer within a few
#     seconds (a newcomer takes the place of a quiet one);
#   - a partial line is answered ERR ETIMEDOUT and closed about 5 s after
#     its first byte, more bytes or not;
#   - 16 connections that keep trickling bytes of a line (active, so not
#     displaced): tap-ctl prints the tapdisk's refusal (ERR EBUSY ...), not
#     "Broken pipe", and with a longer --timeout gets its answer once the
#     partial lines time out;
#   - the socket stays owner-only (0600).
#
# One PASS:/FAIL: line per check; exits 0 when all pass, 1 when one fails,
# 77 when python3 or timeout is missing.  About 20 s.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
STEP_TIMEOUT=30

for tool in python3 timeout; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not found"
		exit 77
	fi
done
for prog in "$TAPDISK" "$TAPCTL"; do
	if [ ! -x "$prog" ]; then
		echo "FAIL: $prog not built"
		exit 1
	fi
done

TMP=$(mktemp -d /tmp/control-hold.XXXXXX)
RUNDIR=$TMP/run
export TAPSTRIPE_RUNDIR=$RUNDIR TAPDISK
PIDS=()
status=0

cleanup() {
	for pid in "${PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

pass() { echo "PASS: $1"; }
fail() {
	echo "FAIL: $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    /'
	status=1
}

# ctl ARGS...: tap-ctl; sets RC, OUT, ERR, MS (elapsed).
ctl() {
	local t0
	t0=$(date +%s%N)
	OUT=$(timeout "$STEP_TIMEOUT" "$TAPCTL" "$@" 2>"$TMP/err")
	RC=$?
	MS=$((($(date +%s%N) - t0) / 1000000))
	ERR=$(cat "$TMP/err")
}

# hold MODE SECONDS: 16 connections in the background, each sending "sta"
# once (MODE partial) or one byte every 0.2 s (MODE trickle), for SECONDS;
# returns once all are connected and have sent their first byte.
hold() {
	rm -f "$TMP/held"
	python3 - "$SOCK" "$1" "$2" "$TMP/held" <<'EOF' &
import socket, sys, time
path, mode, secs, flag = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
conns = []
for _ in range(16):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"sta" if mode == "partial" else b"s")
    conns.append(s)
open(flag, "w").close()
end = time.time() + secs
while time.time() < end:
    time.sleep(0.2)
    if mode == "trickle":
        for s in conns:
            try:
                s.send(b"s", socket.MSG_DONTWAIT)
            except OSError:
                pass
EOF
	HOLDER=$!
	PIDS+=("$HOLDER")
	for _ in $(seq 100); do
		[ -e "$TMP/held" ] && return 0
		sleep 0.05
	done
	return 1
}

ctl create -a null:size=64M --xen off --name hold
if [ "$RC" -ne 0 ] || ! [[ "$OUT" =~ ^[0-9]+$ ]]; then
	fail "create a tapdisk" "$RC $OUT $ERR"
	exit 1
fi
ID=$OUT
PIDS+=("$ID")
SOCK=$RUNDIR/tapdisk-$ID.sock

# --- 16 partial lines, held -------------------------------------------------------------

hold partial 30 || fail "16 connections with a partial line each"
sleep 1.2
for cmd in stats pause resume; do
	ctl "$cmd" -i "$ID" --timeout 10
	if [ "$RC" -eq 0 ] && [ "$MS" -lt 3000 ]; then
		pass "tap-ctl $cmd answers within 3 s while 16 partial lines are held ($MS ms)"
	else
		fail "tap-ctl $cmd answers within 3 s while 16 partial lines are held" \
			"status $RC after $MS ms: $ERR"
	fi
done
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null

# --- a partial line times out in seconds ------------------------------------------------------

reply=$(python3 - "$SOCK" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
t0 = time.time()
s.sendall(b"sta")
time.sleep(2)
s.sendall(b"ts")
s.settimeout(15)
data = b""
try:
    while True:
        chunk = s.recv(512)
        if not chunk:
            break
        data += chunk
except OSError as e:
    data += b" (" + str(e).encode() + b")"
print("%.1f %s" % (time.time() - t0, data.decode().strip()))
EOF
)
secs=${reply%% *}
if grep -q "ERR ETIMEDOUT request line not finished within 5000 ms" <<<"$reply" &&
	python3 -c "import sys; sys.exit(not 4.5 <= float(sys.argv[1]) <= 6.5)" "$secs"; then
	pass "a partial line is answered ETIMEDOUT and closed 5 s after its first byte ($secs s)"
else
	fail "a partial line is answered ETIMEDOUT and closed 5 s after its first byte" "$reply"
fi

# --- 16 active partial lines: the refusal is printed, then the answer -----------------------

hold trickle 8 || fail "16 connections trickling a line each"
ctl stats -i "$ID" --timeout 1
if [ "$RC" -eq 1 ] && grep -q "too many control connections" <<<"$ERR" &&
	grep -q "EBUSY" <<<"$ERR" && ! grep -q "Broken pipe" <<<"$ERR"; then
	pass "tap-ctl prints the tapdisk's refusal (EBUSY), not EPIPE"
else
	fail "tap-ctl prints the tapdisk's refusal (EBUSY), not EPIPE" "status $RC: $ERR"
fi
ctl stats -i "$ID" --timeout 15
if [ "$RC" -eq 0 ] && [ "$MS" -lt 7000 ] &&
	grep -q "too many control connections.*trying again" <<<"$ERR" &&
	grep -q "^write " <<<"$OUT"; then
	pass "tap-ctl stats says it was refused, then answers once the lines time out ($MS ms)"
else
	fail "tap-ctl stats says it was refused, then answers once the lines time out" \
		"status $RC after $MS ms: $ERR"
fi
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null

mode=$(stat -c %a "$SOCK")
[ "$mode" = 600 ] && pass "the control socket stays 0600" ||
	fail "the control socket stays 0600" "$mode"

hold partial 30 || fail "16 connections with a partial line each, again"
sleep 1.2
ctl destroy -i "$ID" --timeout 10
if [ "$RC" -eq 0 ] && [ "$MS" -lt 3000 ]; then
	pass "tap-ctl destroy works while 16 partial lines are held ($MS ms)"
else
	fail "tap-ctl destroy works while 16 partial lines are held" "status $RC after $MS ms: $ERR"
fi
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
exit $status
