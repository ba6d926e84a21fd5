#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# cut-resync.sh - a replica's server cut for 5 s under writes, then back:
# the resync starts by itself and copies only the regions that missed
# writes (issue #19).
#
# A lab of 3 servers with 64 MiB extents; disk d1: 128 MiB, S=1, R=2,
# regions of 1 MiB.  cut-resync.py writes 1 MiB blocks at random places at
# 4 MiB/s; the server of replica 1 of extent 0 is cut (its link down) for
# 5 s, then restored.  Checks: the resync starts on its own, ends with no
# stale replica, copies at most 2 x the bytes written from the cut to its
# start (rounded up to the region size) -- not the 2 x 64 MiB extents a
# whole-extent resync copies; the disk reads back as written; the replicas
# of every extent are byte-identical; with auto_resync=off nothing starts
# (a second disk, cut the same way), until "stripe resync auto on".
#
# One PASS/FAIL line per check, then "N passed, N failed"; exit 0, 1, or
# 77 (skip: not root, no tgt, libnbd or stripe driver).  About 50 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"
export LAB_EXTENT=64M

lab_up 3
mapfile -t LUNS < <(luns)

make_disk d1 128M 1 64K 2 || { summary; exit 1; }
serve d1 "stripe:$WORK/d1.map,cmd_timeout_ms=3000" || { summary; exit 1; }
VSRV=$(slot_server "$WORK/d1.map" 0 0 1)
VICTIM=$(lab_of "$WORK/d1.map" "$VSRV")
echo "d1: replica 1 of extent 0 is on server $VICTIM"
T0=$EPOCHREALTIME
out=$("$PY" "$HERE/cut-resync.py" "$URI" $((128 << 20)) $((1 << 20)) \
	--cut "'$LAB' cut $VICTIM" --restore "'$LAB' restore $VICTIM" \
	--stats "'$TAPCTL' stats -i $TD_PID --json" --cut-s 5 --rate $((4 << 20)) 2>&1)
rc=$?
while IFS= read -r line; do
	case $line in PASS:*) pass "${line#PASS: }" ;; FAIL:*) fail "${line#FAIL: }" ;; figures:*) echo "    $line" ;; esac
done <<<"$out"
[ $rc = 0 ] || grep -q '^FAIL:' <<<"$out" || fail "cut-resync.py" "$out"
echo "(cut scenario: $(elapsed "$T0") s)"
grep -E "resync (started|done)" "$WORK/d1.log" | sed 's/^/    log: /' | head -4
check_py "replicas byte-identical after the automatic resync" replicas "$WORK/d1.map" "${LUNS[@]}"
unserve "$TD_PID" d1 && pass "tapdisk (d1) stopped cleanly"

# --- the switch --------------------------------------------------------------
make_disk d2 64M 1 64K 2 || { summary; exit 1; }
serve d2 "stripe:$WORK/d2.map,cmd_timeout_ms=3000,auto_resync=off" || { summary; exit 1; }
VSRV=$(slot_server "$WORK/d2.map" 0 0 1)
VICTIM=$(lab_of "$WORK/d2.map" "$VSRV")
"$LAB" cut "$VICTIM" >/dev/null 2>&1
out=$(head -c 4M /dev/urandom | nbdcopy - "$URI" 2>&1) || fail "4 MiB written to d2 with a server cut" "$out"
"$LAB" restore "$VICTIM" >/dev/null 2>&1
server_up "$TD_PID" "$VSRV" || fail "tapdisk reconnects to server $VICTIM" ""
sleep 3
state=$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1 | grep '^resync:')
[ -n "$("$PY" "$STRIPE_IO" stale "$WORK/d2.map")" ] && grep -q '^resync: idle' <<<"$state" &&
	pass "auto_resync=off: the server is back, its replicas stay stale, no resync ($state)" ||
	fail "auto_resync=off leaves the stale replicas alone" "$state"
out=$("$TAPCTL" driver -i "$TD_PID" stripe resync auto on 2>&1) && grep -q "auto resync on" <<<"$out" &&
	pass "tap-ctl driver stripe resync auto on: $out" || fail "stripe resync auto on" "$out"
for ((t = 0; t < 100; t++)); do
	[ -z "$("$PY" "$STRIPE_IO" stale "$WORK/d2.map")" ] && break
	sleep 0.2
done
[ -z "$("$PY" "$STRIPE_IO" stale "$WORK/d2.map")" ] &&
	pass "switched on: resynchronised without a resync command" ||
	fail "a resync after auto on" "$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1 | grep '^resync')"
check_py "d2's replicas byte-identical" replicas "$WORK/d2.map" "${LUNS[@]}"
unserve "$TD_PID" d2 && pass "tapdisk (d2) stopped cleanly"
summary
