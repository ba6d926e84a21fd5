#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-hostile.sh - hostile NBD clients against tapdisk's NBD server.
#
# Starts `tapdisk --foreground -a aio:DISK --nbd unix:SOCK` and runs the
# misbehaving clients of nbd-hostile.py one by one: garbage, truncated
# handshakes, bad magic and flags, bad and huge option lengths, oversized
# and endless writes, out-of-range requests, unknown commands, commands
# after DISC, disconnects with commands in flight, a client that never
# reads its replies and one that never finishes the handshake.  After
# each, tapdisk must still run and a well-behaved client (nbdinfo,
# qemu-io) must still be served with the right data.  Then 1000 hostile
# connections in a row must not grow tapdisk's resident memory.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when a client is missing.
# BUILDDIR (set by make check) is where bin/tapdisk was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
HOSTILE=$(cd "$(dirname "$0")" && pwd)/nbd-hostile.py
STORM=${STORM:-1000}
RSS_SLACK_KIB=${RSS_SLACK_KIB:-4096}

nbd_need nbdinfo qemu-io python3
if ! python3 -c 'import random; random.Random(1).randbytes(1)' 2>/dev/null; then
	echo "SKIP: python3 is older than 3.9"
	exit 77
fi
nbd_built "$TAPDISK"
nbd_workdir nbd-hostile
DISK=$WORK/disk.img

# nbd_clients: connections tapdisk holds now (closed ones whose I/O or
# teardown is still under way included), from its control socket.
nbd_clients() {
	"$BUILDDIR/bin/tap-ctl" --run-dir "$WORK" stats -i "$TD_PID" --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["nbd"]["clients"])'
}

# settle: wait (at most 30 s) until every hostile connection is gone, so
# that RSS is compared with nothing in flight, however slow the machine.
settle() {
	for _ in $(seq 60); do
		[ "$(nbd_clients 2>/dev/null)" = 0 ] && return 0
		sleep 0.5
	done
	echo "  (connections still open after 30 s: $(nbd_clients 2>&1))"
}

rss_kib() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$TD_PID/status"
}

# The server is alive and a good client reads the known pattern.
healthy() {
	kill -0 "$TD_PID" 2>/dev/null || { echo "tapdisk died"; return 1; }
	nbdinfo --size "$URI" | grep -qx $((64 << 20)) ||
		{ echo "nbdinfo failed"; return 1; }
	qemu-io -f raw -c "read -P 0x5a 0 64k" "$URI" | grep -q "read 65536/65536" ||
		{ echo "qemu-io read failed"; return 1; }
}

# hostile SCENARIO: the scenario passes and the server stays healthy.
hostile() {
	local out health
	if ! out=$(timeout 120 python3 "$HOSTILE" "$SOCK" "$1" 2>&1); then
		fail "$1" "$(echo "$out" | tail -2 | tr '\n' ' ')"
	elif ! health=$(healthy 2>&1); then
		fail "$1" "afterwards: $health"
	else
		[ -n "$out" ] && echo "$out"
		pass "$1, then a good client is served"
	fi
}

truncate -s 64M "$DISK"
nbd_start "aio:$DISK" --name hostile
if ! qemu-io -f raw -c "write -P 0x5a 0 64k" "$URI" >/dev/null; then
	echo "FAIL: tapdisk did not start"
	cat "$WORK/tapdisk.log"
	exit 1
fi

for scenario in garbage truncated truncated-option bad-magic bad-flags \
	bad-option-lengths huge-option huge-export-name oversized-write \
	endless-write out-of-range unknown-command bad-request-magic \
	after-disc disconnect-inflight slow-reader stall; do
	hostile "$scenario"
done

# Resident memory across a storm of hostile connections: a first round
# warms the allocator up, the second must not grow it.
python3 "$HOSTILE" "$SOCK" storm 130 >/dev/null 2>&1
settle
BEFORE=$(rss_kib)
START=$(date +%s)
if ! out=$(python3 "$HOSTILE" "$SOCK" storm "$STORM" 2>&1); then
	fail "$STORM hostile connections" "$out"
fi
settle
AFTER=$(rss_kib)
echo "  RSS before $BEFORE KiB, after $STORM hostile connections $AFTER KiB" \
	"($(($(date +%s) - START)) s)"
if ! out=$(healthy 2>&1); then
	fail "$STORM hostile connections" "afterwards: $out"
elif ldd "$TAPDISK" 2>/dev/null | grep -q libasan; then
	# ASan's quarantine keeps freed memory on purpose; LeakSanitizer
	# checks for leaks when tapdisk exits (the clean exit case below).
	pass "$STORM hostile connections (RSS not compared under ASan)"
elif [ $((AFTER - BEFORE)) -gt "$RSS_SLACK_KIB" ]; then
	fail "RSS stable over $STORM hostile connections" \
		"grew by $((AFTER - BEFORE)) KiB"
else
	pass "RSS stable over $STORM hostile connections (+$((AFTER - BEFORE)) KiB)"
fi

# Every misbehaviour was logged, and rate-limited.
if grep -q "disconnecting" "$WORK/tapdisk.log" &&
	grep -q "suppressed" "$WORK/tapdisk.log"; then
	pass "hostile clients logged, rate-limited"
else
	fail "hostile clients logged, rate-limited"
fi

RC=0
nbd_stop || RC=$?
if [ "$RC" = 0 ]; then
	pass "SIGTERM: clean exit"
else
	fail "SIGTERM: clean exit" "rc $RC"
fi

nbd_summary
