#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# shm-verify.sh - the shm transport end to end: tapdisk, td-front, a file.
#
#  1. td-front --verify over aio:FILE and null: for every ring order 0..8,
#     max segments 11, 32, 256 and 4096, random and sequential order, mixed
#     block sizes (4k,44k,128k,1m): each aio case writes its own region
#     with its own generation and seed, reads it back and checks it; then
#     the backing file is read directly by shm-pattern.py, an independent
#     implementation of the pattern, region by region.
#  1b. The same through sort|aio: random and sequential at QD 1 and 32,
#     interleaved rounds (merged by sort), overlapping passes; then the
#     backing file is checked the same way.
#  2. Requests as negotiated: a 1 MiB write is 1 request with 256 segments
#     and 24 with 11 (tapdisk --max-indirect-segments 11), per tapdisk's
#     own counters.
#  3. A td-front killed with SIGKILL in the middle of its I/O: tapdisk
#     frees its ring (descriptors and mappings back to what they were) and
#     serves a second td-front.
#  4. Garbage on the shm socket, before and after negotiating, is dropped
#     while another td-front keeps working; tapdisk counts it.
#  5. tap-ctl create --shm, info, stats, destroy.
#  6. Busy polling (tapdisk --poll-us, td-front --poll-us): --verify over
#     aio: and sort|aio: with both sides polling, one side only, and the
#     budget switched off and on again (tap-ctl poll) while a td-front
#     runs; tap-ctl poll shows the polling found work; the backing file is
#     checked directly.
#
# Prints one line per case and "N passed, N failed"; exits 0 when all
# pass, 1 otherwise, 77 (automake's skip) when python3 is missing.
# BUILDDIR (set by make check) is where the programs were built.
set -u

SHM_TEST=shm-verify
REGION=$((2 << 20)) # bytes per aio case
# shellcheck source=tests/integration/shm-lib.sh
. "$(cd "$(dirname "$0")" && pwd)/shm-lib.sh"

open_fds() { ls "/proc/$1/fd" | wc -l; }
shm_maps() { grep -c tapstripe-shm "/proc/$1/maps"; }

# --- 1. verify over null: and aio: -------------------------------------------

echo "# 1. td-front --verify, every ring order and segment limit"
DISK=$WORK/disk.img
truncate -s $((9 * 4 * 2 * REGION)) "$DISK"
start_tapdisk null "null:size=1G"
NULL_PID=$TD_PID
start_tapdisk aio "aio:$DISK"
AIO_PID=$TD_PID
regions=()
k=0
for order in 0 1 2 3 4 5 6 7 8; do
	for segs in 11 32 256 4096; do
		for pattern in rand seq; do
			what="order $order, $segs segments, $pattern"
			common=(--verify --pattern "$pattern" --bs "$SIZES"
				--qd 16 --ring-order "$order" --max-segments "$segs"
				--no-backend-stats)
			if front "$WORK/null.sock" "${common[@]}" --size 8m \
				--verify-zeroes --seed $((k + 1)); then
				pass "null: $what"
			else
				fail "null: $what" "$OUT"
			fi
			gen=$((k % 7 + 1)) seed=$((k + 100)) offset=$((k * REGION))
			if front "$WORK/aio.sock" "${common[@]}" --offset $offset \
				--size $REGION --generation $gen --seed $seed; then
				pass "aio: $what"
				regions+=("$offset:$REGION:$gen:$seed")
			else
				fail "aio: $what" "$OUT"
			fi
			k=$((k + 1))
		done
	done
done
stop_tapdisk "$AIO_PID" aio
if out=$(python3 "$PATTERN" "$DISK" "${regions[@]}" 2>&1); then
	pass "the backing file, read directly, holds every pattern ($out)"
else
	fail "the backing file, read directly, holds every pattern" "$out"
fi

# --- 1b. the sort driver ---------------------------------------------------------

echo "# 1b. td-front --verify through sort|aio"
SDISK=$WORK/sort.img
truncate -s $((16 * REGION)) "$SDISK"
start_tapdisk sort "sort|aio:$SDISK"
SORT_PID=$TD_PID
sregions=()
for pattern in rand seq; do
	for qd in 1 32; do
		k=$((k + 1))
		gen=$((k % 7 + 1)) seed=$((k + 500)) offset=$(( ${#sregions[@]} * REGION))
		if front "$WORK/sort.sock" --verify --pattern $pattern --bs "$SIZES" \
			--qd $qd --offset $offset --size $REGION --generation $gen \
			--seed $seed --no-backend-stats; then
			pass "sort: verify $pattern, QD $qd"
			sregions+=("$offset:$REGION:$gen:$seed")
		else
			fail "sort: verify $pattern, QD $qd" "$OUT"
		fi
	done
done
# Interleaved rounds (28 x 4 KiB in the order 0, 2, ..., 1, 3, ...), then
# overlapping passes: B overwrites the second half of A and more, so the
# file must hold A's first half and all of B, each with its own pattern.
ioff=$(( ${#sregions[@]} * REGION))
if front "$WORK/sort.sock" --pattern interleave --rounds 16 --offset $ioff \
	--generation 3 --seed 77 --json; then
	merges=$(json_get backend.sort_merges)
	if [ "$merges" -gt 0 ]; then
		pass "sort: interleaved rounds merged ($merges merges)"
		# round i writes its 112 KiB with generation 3 + i
		for i in $(seq 0 15); do
			sregions+=("$((ioff + i * 114688)):114688:$((3 + i)):77")
		done
	else
		fail "sort: interleaved rounds merged" "sort_merges=$merges"
	fi
else
	fail "sort: interleaved rounds" "$OUT"
fi
aoff=$((ioff + REGION)) half=$((REGION / 2))
if front "$WORK/sort.sock" --verify --pattern rand --bs "$SIZES" --qd 32 \
	--offset $aoff --size $REGION --generation 1 --seed 901 \
	--no-backend-stats &&
	front "$WORK/sort.sock" --verify --pattern rand --bs 4k,64k --qd 32 \
		--offset $((aoff + half)) --size $REGION --generation 2 \
		--seed 902 --no-backend-stats; then
	pass "sort: overlapping passes"
	sregions+=("$aoff:$half:1:901" "$((aoff + half)):$REGION:2:902")
else
	fail "sort: overlapping passes" "$OUT"
fi
stop_tapdisk "$SORT_PID" sort
if out=$(python3 "$PATTERN" "$SDISK" "${sregions[@]}" 2>&1); then
	pass "sort: the backing file holds every pattern ($out)"
else
	fail "sort: the backing file holds every pattern" "$out"
fi

# --- 2. requests as negotiated ---------------------------------------------------

echo "# 2. a 1 MiB write as one request, or 24"
check_requests() { # SOCK SEGS WANT
	front "$1" --rw write --bs 1m --bytes 16m --max-segments "$2" --json
	local got
	got=$(json_get backend.requests_total 2>/dev/null)
	if [ "$got" = $((16 * $3)) ]; then
		pass "1 MiB writes with $2 segments: $3 request(s) each"
	else
		fail "1 MiB writes with $2 segments: $3 request(s) each" \
			"backend requests: $got; $OUT"
	fi
}
check_requests "$WORK/null.sock" 256 1
check_requests "$WORK/null.sock" 4096 1
check_requests "$WORK/null.sock" 32 8
start_tapdisk direct "null:size=1G" --max-indirect-segments 11
check_requests "$WORK/direct.sock" 256 24
stop_tapdisk "$TD_PID" direct
stop_tapdisk "$NULL_PID" null

# --- 3. a frontend killed in the middle of its I/O ----------------------------------

echo "# 3. SIGKILL mid-I/O"
start_tapdisk kill "aio:$DISK"
KILL_PID=$TD_PID
sleep 0.2
fds0=$(open_fds "$KILL_PID")
"$TDFRONT" --shm "$WORK/kill.sock" --quiet --no-progress --rw write \
	--pattern rand --bs 4k,64k --qd 64 --ring-order 4 --max-segments 256 \
	--time 30 --no-backend-stats >/dev/null 2>&1 &
victim=$!
PIDS+=("$victim")
# Kill it once its ring is mapped (a slow start under ASan or load must
# not meet the kill before the handshake), and in the middle of its I/O.
for _ in $(seq 300); do
	[ "$(shm_maps "$KILL_PID")" -ge 2 ] && break
	kill -0 "$victim" 2>/dev/null || break
	sleep 0.1
done
sleep 0.5
maps_during=$(shm_maps "$KILL_PID")
{
	kill -KILL "$victim"
	wait "$victim"
} 2>/dev/null
for _ in $(seq 50); do
	[ "$(shm_maps "$KILL_PID")" = 0 ] && break
	sleep 0.1
done
fds1=$(open_fds "$KILL_PID") maps1=$(shm_maps "$KILL_PID")
if [ "$maps_during" -ge 2 ] && [ "$maps1" = 0 ] && [ "$fds1" = "$fds0" ]; then
	pass "killed frontend's ring freed (mappings $maps_during -> 0, fds $fds1)"
else
	fail "killed frontend's ring freed" "mappings $maps_during -> $maps1, fds $fds0 -> $fds1"
fi
if front "$WORK/kill.sock" --verify --pattern rand --bs "$SIZES" --qd 8 \
	--offset 0 --size 4m --seed 7 --generation 9; then
	pass "tapdisk serves a second td-front after the SIGKILL"
else
	fail "tapdisk serves a second td-front after the SIGKILL" "$OUT"
fi
kill -0 "$KILL_PID" 2>/dev/null && pass "tapdisk still runs" ||
	fail "tapdisk still runs"
stop_tapdisk "$KILL_PID" kill

# --- 4. garbage on the socket ----------------------------------------------------------

echo "# 4. hostile clients beside a working one"
start_tapdisk hostile "null:size=1G"
HOSTILE_PID=$TD_PID
"$TDFRONT" --shm "$WORK/hostile.sock" --quiet --no-progress --verify-zeroes \
	--pattern rand --bs "$SIZES" --size 64m --passes 20 --qd 8 \
	--no-backend-stats >"$WORK/good.out" 2>&1 &
good=$!
PIDS+=("$good")
sleep 0.3
hostile_out=$(python3 - "$WORK/hostile.sock" <<'EOF' 2>&1
import os, random, socket, sys

path = sys.argv[1]

def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    offer = s.recv(512)
    assert offer.startswith(b"tapstripe-shm version=1 "), offer
    return s

def dropped(s, want):
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    assert data.startswith(want), data
    s.close()

rnd = random.Random(3)
for i in range(50):  # garbage before negotiating
    s = conn()
    s.sendall(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 600))) + b"\n")
    dropped(s, b"error ")
s = conn()  # a good negotiation, then garbage
s.sendall(b"connect version=1 ring-page-order=0 data-pages=4\n")
msg, fds, _, _ = socket.recv_fds(s, 512, 4)
assert msg.startswith(b"connected ") and len(fds) == 4, (msg, fds)
for fd in fds:
    os.close(fd)
s.sendall(b"garbage after connecting")
dropped(s, b"")
print("ok")
EOF
)
if [ "$hostile_out" = ok ]; then
	pass "51 hostile clients dropped"
else
	fail "51 hostile clients dropped" "$hostile_out"
fi
if wait "$good"; then
	pass "the well-behaved td-front went on undisturbed"
else
	fail "the well-behaved td-front went on undisturbed" "$(cat "$WORK/good.out")"
fi
OUT=$("$TAPCTL" stats -i "$HOSTILE_PID" --json 2>&1)
errors=$(json_get shm.protocol_errors 2>/dev/null)
if [ "$errors" = 51 ]; then
	pass "tapdisk counted 51 protocol errors"
else
	fail "tapdisk counted 51 protocol errors" "got $errors"
fi
stop_tapdisk "$HOSTILE_PID" hostile

# --- 5. tap-ctl create --shm ----------------------------------------------------------------

echo "# 5. tap-ctl"
if id=$("$TAPCTL" create -a "aio:$DISK" --shm "$WORK/ctl.sock" \
	--max-indirect-segments 32 2>&1); then
	PIDS+=("$id")
	pass "tap-ctl create --shm --max-indirect-segments"
	if "$TAPCTL" info -i "$id" | grep -qx "frontend: shm $WORK/ctl.sock"; then
		pass "tap-ctl info shows the shm frontend"
	else
		fail "tap-ctl info shows the shm frontend" "$("$TAPCTL" info -i "$id" 2>&1)"
	fi
	front "$WORK/ctl.sock" --rw write --bs 1m --bytes 8m --max-segments 256 \
		--id "$id" --json
	if [ "$(json_get max_segments)" = 32 ] &&
		[ "$(json_get backend.requests_total)" = 64 ]; then
		pass "td-front --id reads the backend's counters (32 segments)"
	else
		fail "td-front --id reads the backend's counters (32 segments)" "$OUT"
	fi
	if "$TAPCTL" stats -i "$id" | grep -q "^shm: 0 frontends connected"; then
		pass "tap-ctl stats shows the shm counters"
	else
		fail "tap-ctl stats shows the shm counters" "$("$TAPCTL" stats -i "$id")"
	fi
	if "$TAPCTL" destroy -i "$id" >/dev/null && [ ! -e "$WORK/ctl.sock" ]; then
		pass "tap-ctl destroy removes the shm socket"
	else
		fail "tap-ctl destroy removes the shm socket"
	fi
else
	fail "tap-ctl create --shm --max-indirect-segments" "$id"
fi

# --- 6. busy polling ------------------------------------------------------------

echo "# 6. busy polling"
PDISK=$WORK/poll.img
truncate -s $((8 * REGION)) "$PDISK"
start_tapdisk poll "aio:$PDISK" --poll-us 200
POLL_PID=$TD_PID
start_tapdisk pollsort "sort|aio:$PDISK" --poll-us 50
PSORT_PID=$TD_PID
pregions=()
n=0
for cfg in "poll 200 rand 1" "poll 200 seq 16" "poll 0 rand 4" \
	"pollsort 50 seq 1" "pollsort 0 rand 32"; do
	read -r name fpoll pattern qd <<<"$cfg"
	what="$name: verify $pattern, QD $qd, td-front --poll-us $fpoll"
	gen=$((n % 7 + 1)) seed=$((n + 900)) offset=$((n * REGION))
	if front "$WORK/$name.sock" --verify --pattern "$pattern" --bs "$SIZES" \
		--qd "$qd" --offset $offset --size $REGION --generation $gen \
		--seed $seed --poll-us "$fpoll" --max-segments 256 \
		--ring-order 4 --no-backend-stats; then
		pass "$what"
		pregions+=("$offset:$REGION:$gen:$seed")
	else
		fail "$what" "$OUT"
	fi
	n=$((n + 1))
done
# The budget switched off, then on, while a td-front verifies.
gen=$((n % 7 + 1)) seed=$((n + 900)) offset=$((n * REGION))
front_bg_out=$WORK/poll-switch.out
timeout 120 "$TDFRONT" --shm "$WORK/poll.sock" --quiet --no-progress --verify \
	--pattern rand --bs 4k --qd 2 --offset $offset --size $REGION \
	--generation $gen --seed $seed --passes 16 --poll-us 100 \
	--no-backend-stats >"$front_bg_out" 2>&1 &
fpid=$!
sleep 0.2
off=$("$TAPCTL" poll -i "$POLL_PID" 0 2>&1)
sleep 0.2
on=$("$TAPCTL" poll -i "$POLL_PID" 200 2>&1)
kill -0 $fpid 2>/dev/null || echo "note: td-front ended before the switch" >&2
if wait $fpid && grep -qx "budget_us: 0" <<<"$off" &&
	grep -qx "budget_us: 200" <<<"$on"; then
	pass "poll: budget switched off and on during a verify"
	pregions+=("$offset:$REGION:$((gen + 15)):$seed") # the last pass's
else
	fail "poll: budget switched off and on during a verify" \
		"$(cat "$front_bg_out"); $off; $on"
fi
# --json after the budget, as the synopsis writes it ("poll -i ID [US]
# [--json]"): sets the budget it already has and answers in JSON.
OUT=$("$TAPCTL" poll -i "$POLL_PID" 200 --json 2>&1)
hits=$(json_get hits 2>/dev/null)
if [ "${hits:-0}" -gt 0 ] && [ "$(json_get budget_us)" = 200 ]; then
	pass "tap-ctl poll: polling found work ($hits hits)"
else
	fail "tap-ctl poll: polling found work" "$OUT"
fi
stop_tapdisk "$POLL_PID" poll
stop_tapdisk "$PSORT_PID" pollsort
if out=$(python3 "$PATTERN" "$PDISK" "${pregions[@]}" 2>&1); then
	pass "polling: the backing file holds every pattern ($out)"
else
	fail "polling: the backing file holds every pattern" "$out"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
