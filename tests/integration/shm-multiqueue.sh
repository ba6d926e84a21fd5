#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# shm-multiqueue.sh - several rings on one shm connection, end to end
# (multi-queue-max-queues / multi-queue-num-queues, doc/shm-protocol.md).
#
#  1. td-front --verify --queues 1, 2 and 4 over aio:FILE, for ring orders
#     0, 3 and 8 and 11, 32 and 4096 segments per request, random and
#     sequential order, mixed block sizes: each case writes its own region
#     through all its rings (I/O k on ring k mod N, each ring with its own
#     pool) and reads it back byte for byte; then shm-pattern.py reads the
#     backing file directly.
#  2. The same through sort|aio at QD 32 per ring over 2 and 4 rings.
#  3. Counters exact: 4 rings writing 1024 x 4 KiB are 1024 requests in
#     tapdisk's vbd and ring counters, and ring by ring (tap-ctl stats
#     shm.queues) every ring carried writes and the rings add up to the
#     disk's counts; a frontend asking for 16 rings gets the 8 tapdisk
#     offers.
#  4. One ring of a 2-ring frontend broken (its producer index far ahead):
#     that frontend is dropped, a 4-ring td-front running beside it goes
#     on undisturbed (tap-ctl stats: 1 frontend, 4 rings), and tapdisk
#     counts one protocol error.
#
# Prints one line per case and "N passed, N failed"; exits 0 when all
# pass, 1 otherwise, 77 (automake's skip) when python3 is missing.
# BUILDDIR (set by make check) is where the programs were built.
set -u

SHM_TEST=shm-multiqueue
REGION=$((1 << 20)) # bytes per aio case
# shellcheck source=tests/integration/shm-lib.sh
. "$(cd "$(dirname "$0")" && pwd)/shm-lib.sh"

# --- 1. verify over 1, 2 and 4 rings ------------------------------------------

echo "# 1. td-front --verify --queues 1, 2, 4 over aio"
DISK=$WORK/disk.img
truncate -s $((3 * 3 * 3 * 2 * REGION)) "$DISK"
start_tapdisk aio "aio:$DISK"
AIO_PID=$TD_PID
regions=()
k=0
for queues in 1 2 4; do
	for order in 0 3 8; do
		for segs in 11 32 4096; do
			for pattern in rand seq; do
				what="$queues ring(s), order $order, $segs segments, $pattern"
				gen=$((k % 7 + 1)) seed=$((k + 100)) offset=$((k * REGION))
				if front "$WORK/aio.sock" --verify --pattern "$pattern" \
					--bs "$SIZES" --qd 8 --queues $queues \
					--ring-order $order --max-segments $segs \
					--offset $offset --size $REGION --generation $gen \
					--seed $seed --no-backend-stats --json &&
					[ "$(json_get queues)" = $queues ]; then
					pass "aio: $what"
					regions+=("$offset:$REGION:$gen:$seed")
				else
					fail "aio: $what" "$OUT"
				fi
				k=$((k + 1))
			done
		done
	done
done
stop_tapdisk "$AIO_PID" aio
if out=$(python3 "$PATTERN" "$DISK" "${regions[@]}" 2>&1); then
	pass "the backing file, read directly, holds every pattern ($out)"
else
	fail "the backing file, read directly, holds every pattern" "$out"
fi

# --- 2. through sort -------------------------------------------------------------

echo "# 2. td-front --verify --queues 2, 4 through sort|aio, QD 32 per ring"
SDISK=$WORK/sort.img
truncate -s $((4 * 2 * REGION)) "$SDISK"
start_tapdisk sort "sort|aio:$SDISK"
SORT_PID=$TD_PID
sregions=()
k=0
for queues in 2 4; do
	for pattern in rand seq; do
		gen=$((k % 7 + 1)) seed=$((k + 500)) offset=$((k * 2 * REGION))
		if front "$WORK/sort.sock" --verify --pattern $pattern --bs "$SIZES" \
			--qd 32 --queues $queues --offset $offset --size $((2 * REGION)) \
			--generation $gen --seed $seed --passes 2; then
			pass "sort: verify $pattern over $queues rings"
			sregions+=("$offset:$((2 * REGION)):$((gen + 1)):$seed")
		else
			fail "sort: verify $pattern over $queues rings" "$OUT"
		fi
		k=$((k + 1))
	done
done
stop_tapdisk "$SORT_PID" sort
if out=$(python3 "$PATTERN" "$SDISK" "${sregions[@]}" 2>&1); then
	pass "sort: the backing file holds every pattern ($out)"
else
	fail "sort: the backing file holds every pattern" "$out"
fi

# --- 3. counters ------------------------------------------------------------------

echo "# 3. counters over 4 rings"
start_tapdisk null "null:size=1G"
NULL_PID=$TD_PID
front "$WORK/null.sock" --queues 4 --rw write --pattern rand --bs 4k \
	--bytes 4m --qd 4 --json
if [ "$(json_get queues)" = 4 ] &&
	[ "$(json_get backend.requests_total)" = 1024 ] &&
	[ "$(json_get backend.ring_requests)" = 1024 ] &&
	[ "$(json_get ios)" = 1024 ]; then
	pass "1024 writes over 4 rings: 1024 requests in tapdisk's counters"
else
	fail "1024 writes over 4 rings: 1024 requests in tapdisk's counters" "$OUT"
fi
# Ring by ring (tap-ctl stats: shm.queues): every ring carried writes, and
# the rings add up to the disk's ring counters and the vbd's requests.
OUT=$("$TAPCTL" stats -i "$NULL_PID" --json 2>&1)
per_ring=$(python3 -c 'import json, sys
j = json.loads(sys.stdin.read())
q, ring = j["shm"]["queues"], j["shm"]["ring"]
sums = {k: sum(x[k] for x in q) for k in ("requests_total", "write", "segments", "kicks")}
bad = [w for w, ok in (
    ("4 rings", len(q) == 4),
    ("every ring wrote", all(x["write"] > 0 for x in q)),
    ("requests add up", sums["requests_total"] == ring["requests_total"] == 1024),
    ("the vbd counted as many", j["requests_total"] == 1024),
    ("writes add up", sums["write"] == ring["requests"]["write"]),
    ("segments add up", sums["segments"] == ring["segments"]),
    ("kicks add up", sums["kicks"] == j["shm"]["kicks"]),
    ("nothing in flight", all(x["in_flight"] == 0 for x in q))) if not ok]
print("not " + ", ".join(bad) if bad else
      "ok: " + " + ".join(str(x["requests_total"]) for x in q))' <<<"$OUT" 2>&1)
case $per_ring in
ok:*) pass "per-ring counters: every ring carried writes, they add up to 1024 (${per_ring#ok: })" ;;
*) fail "per-ring counters: every ring carried writes, they add up to 1024" "$per_ring
$OUT" ;;
esac
front "$WORK/null.sock" --queues 16 --bs 4k --bytes 1m --json
if [ "$(json_get queues)" = 8 ]; then
	pass "16 rings asked for, the 8 offered set up"
else
	fail "16 rings asked for, the 8 offered set up" "$OUT"
fi

# --- 4. one ring broken ----------------------------------------------------------

echo "# 4. one broken ring drops its frontend only"
"$TDFRONT" --shm "$WORK/null.sock" --quiet --no-progress --queues 4 \
	--pattern rand --bs 4k --qd 8 --time 4 \
	>"$WORK/good.out" 2>&1 &
good=$!
PIDS+=("$good")
sleep 0.3
hostile_out=$(timeout 20 python3 - "$WORK/null.sock" <<'EOF' 2>&1
import mmap, os, socket, struct, sys

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.settimeout(5)
offer = s.recv(512)
assert b"multi-queue-max-queues=8" in offer, offer
s.sendall(b"connect version=1 ring-page-order=0 data-pages=1 "
          b"multi-queue-num-queues=2\n")
msg, fds, _, _ = socket.recv_fds(s, 512, 16)
assert msg.startswith(b"connected ") and b"multi-queue-num-queues=2" in msg, msg
assert len(fds) == 8, len(fds)
ring1 = mmap.mmap(fds[4], 4096)
ring1[0:4] = struct.pack("<I", 1000)  # req_prod far beyond 32 slots
os.write(fds[6], struct.pack("<Q", 1))  # ring 1's kick
if s.recv(1) != b"":
    sys.exit("the frontend was not dropped")
print("ok")
EOF
)
if [ "$hostile_out" = ok ]; then
	pass "a 2-ring frontend with one broken ring dropped"
else
	fail "a 2-ring frontend with one broken ring dropped" "$hostile_out"
fi
OUT=$("$TAPCTL" stats -i "$NULL_PID" --json 2>&1)
if [ "$(json_get shm.clients)" = 1 ] && [ "$(json_get shm.rings)" = 4 ]; then
	pass "tap-ctl stats: 1 frontend connected, 4 rings"
else
	fail "tap-ctl stats: 1 frontend connected, 4 rings" "clients $(json_get shm.clients), rings $(json_get shm.rings)"
fi
if wait "$good"; then
	pass "a 4-ring td-front beside it went on undisturbed"
else
	fail "a 4-ring td-front beside it went on undisturbed" "$(cat "$WORK/good.out")"
fi
OUT=$("$TAPCTL" stats -i "$NULL_PID" --json 2>&1)
if [ "$(json_get shm.protocol_errors)" = 1 ]; then
	pass "tapdisk counted one protocol error"
else
	fail "tapdisk counted one protocol error" "$OUT"
fi
stop_tapdisk "$NULL_PID" null

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
