#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# al-kill.sh - a striped disk's tapdisk killed with SIGKILL under writes
# at queue depth 32, restarted: the activity log makes the replicas agree
# again (issue #19).
#
# A write in flight when tapdisk dies may have reached one replica and not
# the other: unacknowledged, so either content is allowed, but the
# replicas then differ with no stale mark, and reads could return one
# then the other.  The activity log (NAME.map.al) names every region a
# write may be in flight on; the next open marks those regions on every
# replica but one, and the resync (on its own) copies them.
#
# A lab of 3 servers; disk k1: 32 MiB, S=2, U=64 KiB, R=2, regions of
# 64 KiB.  kill-verify.py (the aio kill test's verifier) runs ROUNDS
# rounds of writes at QD 32 killed with SIGKILL; after each restart every
# flushed and every acknowledged block reads back.  Then (informational)
# how many extents' replicas differ on the LUN files; then tapdisk is
# started once more: its log names the recovered regions, the resync runs
# by itself, and every extent's replicas are byte-identical.  Last, the
# same kill with al_regions=0 (no log) is reported, not checked: whether
# the replicas then differ depends on timing.
#
# One PASS/FAIL line per check, then "N passed, N failed"; exit 0, 1, or
# 77 (skip).  About 40 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"
ROUNDS=${ROUNDS:-3}

lab_up 3
mapfile -t LUNS < <(luns)

out=$("$CTL" --master "$LAB_MASTER" vdisk create k1 --size 32M --stripes 2 \
	--stripe-unit 64K --replicas 2 --region-size 64K -o "$WORK/k1.map" 2>&1) ||
	{ fail "vdisk create k1 --region-size 64K" "$out"; summary; exit 1; }
CHAIN="stripe:$WORK/k1.map,cmd_timeout_ms=3000"
mkdir -p "$WORK/kv"
out=$(timeout 300 "$PY" "$HERE/kill-verify.py" "$TAPDISK" "$CHAIN" "$WORK/none" \
	"$WORK/kv" "$ROUNDS" 7 2>&1) &&
	pass "$ROUNDS kills at QD 32: every flushed and acknowledged block read back after each restart" ||
	fail "kill-verify.py on $CHAIN" "$(tail -15 <<<"$out")"
grep -E "^round|blocks" <<<"$out" | head -4 | sed 's/^/    /'
hot=$(grep -c "not closed cleanly" "$WORK/kv/tapdisk.log" 2>/dev/null)
[ "${hot:-0}" -ge 1 ] &&
	pass "tapdisk found the activity log unclean after the kills ($hot times): $(grep -m1 -o 'not closed cleanly: [0-9]* regions' "$WORK/kv/tapdisk.log")" ||
	fail "an unclean activity log after SIGKILL" "$(tail -5 "$WORK/kv/tapdisk.log")"

# One last kill, then look at the LUN files before the log is read.
serve k1 "$CHAIN" || { summary; exit 1; }
"$PY" - "$URI" 2>/dev/null <<'PYEOF' &
import random, sys, nbd
h = nbd.NBD(); h.connect_uri(sys.argv[1])
rng = random.Random(3); buf = nbd.Buffer(65536)
while True:
    while h.aio_in_flight() < 32:
        h.aio_pwrite(buf, rng.randrange(512) * 65536)
    h.poll(-1)
PYEOF
WPID=$!
sleep 1.5
kill -KILL "$TD_PID"
wait "$TD_PID" 2>/dev/null
kill "$WPID" 2>/dev/null
wait "$WPID" 2>/dev/null
diff=$("$PY" "$STRIPE_IO" replicas "$WORK/k1.map" "${LUNS[@]}" 2>&1 | tail -1)
echo "    after the last kill, before the restart: $diff"
serve k1 "$CHAIN" || { summary; exit 1; }
rec=$(stripe_field "$TD_PID" recovered)
[ "${rec:-0}" -ge 1 ] && pass "the restart recovered $rec hot regions from the activity log" ||
	fail "regions recovered at the restart" "${rec:-none}"
for ((t = 0; t < 150; t++)); do
	[ -z "$("$PY" "$STRIPE_IO" stale "$WORK/k1.map")" ] &&
		"$TAPCTL" driver -i "$TD_PID" stripe status 2>/dev/null | grep -q '^resync: \(done\|idle\)' && break
	sleep 0.2
done
[ -z "$("$PY" "$STRIPE_IO" stale "$WORK/k1.map")" ] &&
	pass "the resync ran on its own: no stale replica left" ||
	fail "the automatic resync after the restart" "$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1 | grep -E '^(resync|stale)')"
check_py "every extent's replicas are byte-identical" replicas "$WORK/k1.map" "${LUNS[@]}"
unserve "$TD_PID" k1 && pass "tapdisk (k1) stopped cleanly"
[ -s "$WORK/k1.map.al" ] && pass "the activity log file exists next to the map ($(stat -c %s "$WORK/k1.map.al") bytes)" ||
	fail "the activity log file" "$(ls -l "$WORK")"
summary
