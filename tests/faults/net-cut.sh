#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# net-cut.sh - a server's network cut (its link down inside its namespace:
# packets dropped, no reset) under I/O, then restored (issue #10).
#
# A lab of 3 servers; tapdisk runs with cmd_timeout_ms=3000.
#   R = 1 (disk c1: S=2, U=64 KiB, 8 MiB of random data): the server of
#     column 1 is cut; a read of column 1 fails within the command timeout
#     (+ 2 s) and a write too; while the read waits, column 0 keeps
#     answering reads and writes (each < 1 s) and so does tapdisk's control
#     socket; after "lab.sh restore" column 1 reads its data and takes
#     writes again within 30 s; the whole disk reads back as written.
#   R = 2 (disk c2: S=1, U=64 KiB): 32 MiB written at QD 8 in 256 KiB
#     writes; at 30 % the server of replica 1 is cut.  No write fails; the
#     whole stream takes less than 2 command timeouts (the writes in
#     flight when the cut comes wait for one timeout; after it the server
#     is degraded and later writes do not wait for it; before that rule
#     each extent reached paid a timeout: 12.4 s); a flush
#     succeeds, everything reads back; the stale replicas are all on
#     the cut server; after the restore tapdisk reconnects, an online
#     resync ends with no stale replica, and the replicas of every extent
#     are byte-identical and hold the data.
#   tapdisk stops cleanly (exit 0).
#
# One PASS/FAIL line per check, then "N passed, N failed"; exit 0, 1, or
# 77 (skip: not root, no tgt, libnbd or stripe driver).  About 45 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"

TIMEOUT_MS=3000
lab_up 3
mapfile -t LUNS < <(luns)

# --- R = 1 -------------------------------------------------------------------
make_disk c1 8M 2 64K 1 || { summary; exit 1; }
serve c1 "stripe:$WORK/c1.map,cmd_timeout_ms=$TIMEOUT_MS" || { summary; exit 1; }
head -c 8M /dev/urandom >"$WORK/c1.data"
out=$(nbdcopy "$WORK/c1.data" "$URI" 2>&1) && pass "c1 (R=1): 8 MiB written" || fail "nbdcopy to c1" "$out"
CUT=$(lab_of "$WORK/c1.map" "$(slot_server "$WORK/c1.map" 1 0 0)")
echo "c1: column 1 is on server $CUT"
T0=$EPOCHREALTIME
fault_io cut "$URI" "$WORK/c1.map" "$WORK/c1.data" --column 1 --live-column 0 \
	--cut "'$LAB' cut $CUT" --restore "'$LAB' restore $CUT" --timeout-ms $TIMEOUT_MS \
	--probe "'$TAPCTL' stats -i $TD_PID"
echo "(R=1 scenario: $(elapsed "$T0") s)"
out=$(nbdcopy "$URI" "$WORK/c1.back" 2>&1) && cmp -s "$WORK/c1.data" "$WORK/c1.back" &&
	pass "c1 reads back as written after the restore" ||
	fail "c1 reads back as written" "$out$(cmp "$WORK/c1.data" "$WORK/c1.back" 2>&1)"
grep -E "no answer within|DOWN after" "$WORK/c1.log" | head -2 | sed 's/^/    log: /'
unserve "$TD_PID" c1 && pass "tapdisk (c1) stopped cleanly"

# --- R = 2 -------------------------------------------------------------------
make_disk c2 32M 1 64K 2 || { summary; exit 1; }
serve c2 "stripe:$WORK/c2.map,cmd_timeout_ms=$TIMEOUT_MS" || { summary; exit 1; }
VSRV=$(slot_server "$WORK/c2.map" 0 0 1)
VICTIM=$(lab_of "$WORK/c2.map" "$VSRV")
VTARGET=$(awk -v n="$VSRV" '$1 == "server" && $2 == n { for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$WORK/c2.map")
echo "c2: replica 1 is on server $VICTIM"
head -c 32M /dev/urandom >"$WORK/c2.data"
T0=$EPOCHREALTIME
fault_io write "$URI" "$WORK/c2.data" --bs 262144 --qd 8 --at 0.3 \
	--run "'$LAB' cut $VICTIM" --timeout-ms $TIMEOUT_MS --max-timeouts 2
stale=$("$PY" "$STRIPE_IO" stale "$WORK/c2.map")
[ -n "$stale" ] && ! grep -qv "^$VTARGET " <<<"$stale" &&
	pass "$(grep -c . <<<"$stale") replicas marked stale, all on the cut server" ||
	fail "stale replicas on the cut server only" "${stale:-none}"
check_py "the live replicas hold the data" backing "$WORK/c2.map" "$WORK/c2.data" "${LUNS[@]}"
"$LAB" restore "$VICTIM" 2>/dev/null && pass "server $VICTIM's link restored" || fail "lab.sh restore $VICTIM"
T1=$EPOCHREALTIME
server_up "$TD_PID" "$VSRV" && pass "tapdisk reconnected to server $VICTIM $(elapsed "$T1") s after the restore" ||
	fail "tapdisk reconnects within 30 s" "$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1)"
T1=$EPOCHREALTIME
out=$(resync_all "$TD_PID" "$WORK/c2.map") && pass "online resync: no stale replica left ($(elapsed "$T1") s)" ||
	fail "online resync" "$out"
check_py "replicas byte-identical after the resync" replicas "$WORK/c2.map" "${LUNS[@]}"
check_py "every replica holds the data" backing "$WORK/c2.map" "$WORK/c2.data" "${LUNS[@]}"
echo "(R=2 scenario: $(elapsed "$T0") s)"
unserve "$TD_PID" c2 && pass "tapdisk (c2) stopped cleanly"
summary
