#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# grow-stripe.sh - stripe-ctl vdisk resize of a striped disk on a lab of 2
# tgtd servers (issue #21 item 1), checked through NBD and in the LUN files.
#
#   - a disk of 16 MiB (2 columns, 64 KiB unit, 2 replicas, 4 MiB extents:
#     2 extents per column) served over NBD gets 16 MiB of random data;
#   - a shrink, a disk with no mapping file and a disk the master does not
#     know (destroyed there, its file kept) are refused, the file and the
#     master unchanged;
#   - kill -9 between the master's grant and the file's rewrite, made
#     exactly: the resize runs on a copy of the file (the master grants,
#     the copy is rewritten, the original is the file a killed stripe-ctl
#     leaves); the same resize of the original then finishes the job
#     (the master answers with the same extents: both files identical);
#   - resize to 48 MiB (--json), again (nothing to do), then served again:
#     nbdinfo sees 48 MiB, the old 16 MiB read back intact, data written
#     over the whole disk reads back, and every replica of every stripe
#     unit, the new extents' too, is in the LUN files where the layout
#     says (stripe-io.py backing);
#   - served again, resize to 64 MiB while nbdcopy writes: the tapdisk
#     takes it at once (stripe-ctl asks it: --json taken,
#     served_size_bytes), a new NBD connection sees 64 MiB without a
#     restart, the map rewritten and MAP.grow gone, the writer's data
#     intact, data beyond the old end reads back and is in every replica;
#   - a resize while a resync runs (server 2 killed under a write, then
#     revived, resync at 64 KiB/s): the tapdisk refuses (EBUSY, said),
#     keeps 64 MiB, the map unchanged, MAP.grow kept; kill -9, served
#     again: MAP.grow taken at open (80 MiB, the unclean activity log of
#     the old geometry re-indexed), online resync, data intact;
#   - a served resize whose tapdisk cannot be reached (another
#     --run-dir): MAP.grow written; the tapdisk stopped, the next resize
#     takes it; a MAP.grow of another disk is removed at open, the size
#     kept.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 when root, tgt or libnbd is missing.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

command -v nbdinfo >/dev/null || skip "nbdinfo not found (apt-get install libnbd-bin)"

lab_up 2
mapfile -t LUNS < <(luns)
MAP=$WORK/g1.map
OLD=$((16 << 20))
NEW=$((48 << 20))

resize() { "$CTL" --master "$LAB_MASTER" --timeout 5 --retries 0 vdisk resize "$@" 2>&1; }

make_disk g1 16M 2 64K 2 || { summary; exit 1; }
serve g1 "stripe:$MAP" || { summary; exit 1; }
head -c $OLD /dev/urandom >"$WORK/old.data"
out=$(nbdcopy "$WORK/old.data" "$URI" 2>&1) &&
	pass "16 MiB of random data written over NBD" || fail "nbdcopy write" "$out"

cp "$MAP" "$WORK/before.map"
unserve "$TD_PID" g1

out=$(resize "$MAP" --size 8M)
rc=$?
[ $rc -ne 0 ] && grep -q "shrink" <<<"$out" && cmp -s "$MAP" "$WORK/before.map" &&
	pass "a shrink refused: ${out##*: }" || fail "a shrink refused" "rc $rc: $out"
out=$(resize nosuch-disk --size 48M)
[ $? -ne 0 ] && grep -q "nosuch-disk" <<<"$out" &&
	pass "resize of a disk without a mapping file refused: $out" ||
	fail "resize of a disk without a mapping file refused" "$out"

make_disk g2 16M 2 64K 2
cp "$WORK/g2.map" "$WORK/g2.kept"
"$CTL" --master "$LAB_MASTER" vdisk destroy --name g2 >/dev/null 2>&1
out=$(resize "$WORK/g2.kept" --size 48M)
rc=$?
[ $rc -ne 0 ] && grep -q "no vdisk g2" <<<"$out" && cmp -s "$WORK/g2.kept" "$WORK/g2.map" &&
	pass "resize of a disk the master does not know refused; file unchanged" ||
	fail "resize of a disk the master does not know refused" "rc $rc: $out"
out=$("$CTL" --master "$LAB_MASTER" vdisk list 2>&1)
! grep -q "^g2 " <<<"$out" && pass "the master still has no disk g2" ||
	fail "the master still has no disk g2" "$out"

# kill -9 between the master's grant and the rewrite, made exactly.
cp "$MAP" "$WORK/copy.map"
out=$(resize "$WORK/copy.map" --size 48M) &&
	pass "resize of a copy of the file (the master grants)" || fail "resize of a copy" "$out"
cmp -s "$MAP" "$WORK/before.map" && grep -q "^extents-per-column 6" "$WORK/copy.map" &&
	pass "the original file is the old one, the master holds 6 extents per column" ||
	fail "state after the grant" "$(grep extents-per-column "$MAP" "$WORK/copy.map")"

out=$("$CTL" --master "$LAB_MASTER" --json vdisk resize "$MAP" --size 48M 2>&1)
"$PY" - "$out" "$OLD" "$NEW" <<'EOF' && pass "resize --json of the original finishes the interrupted job (6 extents per column)" || fail "resize --json" "$out"
import json, sys
j = json.loads(sys.argv[1])
assert j["changed"] and j["vdisk"] == "g1", j
assert j["old_size_bytes"] == int(sys.argv[2]) and j["size_bytes"] == int(sys.argv[3]), j
assert j["old_extents_per_column"] == 2 and j["extents_per_column"] == 6, j
EOF
cmp -s "$MAP" "$WORK/copy.map" && pass "the same extents as the first grant (files identical)" ||
	fail "the same extents as the first grant" "$(diff "$MAP" "$WORK/copy.map" | head)"
out=$(resize "$MAP" --size 48M)
[ $? -eq 0 ] && grep -q "already" <<<"$out" && cmp -s "$MAP" "$WORK/copy.map" &&
	pass "resize again: $out" || fail "resize again says nothing to do" "$out"
out=$("$CTL" --master "$LAB_MASTER" vdisk show "$MAP" 2>&1) &&
	pass "vdisk show checks the grown file" || fail "vdisk show of the grown file" "$out"

serve g1 "stripe:$MAP" || { summary; exit 1; }
got=$(nbdinfo --size "$URI" 2>&1)
[ "$got" = "$NEW" ] && pass "a new NBD connection sees $got bytes" || fail "nbdinfo size" "$got"
out=$(nbdcopy "$URI" "$WORK/back" 2>&1) && cmp -s -n $OLD "$WORK/old.data" "$WORK/back" &&
	pass "the old 16 MiB read back intact" || fail "old data intact" "$out"
head -c $NEW /dev/urandom >"$WORK/new.data"
out=$(nbdcopy "$WORK/new.data" "$URI" 2>&1 && nbdcopy "$URI" "$WORK/back" 2>&1) &&
	cmp -s "$WORK/new.data" "$WORK/back" &&
	pass "48 MiB written and read back (beyond the old end too)" ||
	fail "write and read back beyond the old end" "$out"
unserve "$TD_PID" g1 && pass "tapdisk stopped cleanly"
check_py "every replica, the new extents' too, in the LUN files" backing "$MAP" \
	"$WORK/new.data" "${LUNS[@]}"

# Served: resize while a writer runs; the tapdisk takes it at once.
serve g1 "stripe:$MAP,auto_resync=off" || { summary; exit 1; }
nbdcopy "$WORK/new.data" "$URI" >"$WORK/writer.out" 2>&1 &
WRITER=$!
out=$("$CTL" --master "$LAB_MASTER" --json vdisk resize "$MAP" --size 64M 2>&1)
rc=$?
"$PY" - "$out" "$TD_PID" <<'EOF' && [ $rc -eq 0 ] &&
import json, sys
j = json.loads(sys.argv[1])
assert j["changed"] and j["size_bytes"] == 64 << 20, j
assert j["taken"] and j["served_size_bytes"] == 64 << 20, j
assert j["served_by_pid"] == int(sys.argv[2]) and "pending_file" not in j, j
EOF
	pass "resize of a served disk to 64 MiB while a writer runs: tapdisk $TD_PID serves 64 MiB at once" ||
	fail "resize of a served disk" "rc $rc: $out; $(grep -i grow "$WORK/g1.log" | tail -3)"
got=$(nbdinfo --size "$URI" 2>&1)
[ "$got" = $((64 << 20)) ] && pass "a new NBD connection sees $got bytes at once (no restart)" ||
	fail "size seen by a new NBD connection" "$got"
wait "$WRITER" && pass "the writer finished $(cat "$WORK/writer.out")" ||
	fail "the writer during the resize" "$(cat "$WORK/writer.out")"
[ ! -e "$MAP.grow" ] && grep -q "^extents-per-column 8" "$MAP" &&
	pass "the tapdisk rewrote the map (8 extents per column), no MAP.grow left" ||
	fail "the files after a served resize" "$(grep extents-per-column "$MAP" "$MAP.grow" 2>&1)"
out=$(nbdcopy "$URI" "$WORK/back" 2>&1) && cmp -s -n $NEW "$WORK/new.data" "$WORK/back" &&
	pass "the writer's 48 MiB read back intact" || fail "the writer's data intact" "$out"
head -c $((64 << 20)) /dev/urandom >"$WORK/big.data"
out=$(nbdcopy "$WORK/big.data" "$URI" 2>&1 && nbdcopy "$URI" "$WORK/back" 2>&1) &&
	cmp -s "$WORK/big.data" "$WORK/back" &&
	pass "64 MiB written and read back (beyond the old end too), no restart" ||
	fail "write and read back beyond the old end" "$out"
unserve "$TD_PID" g1 && pass "tapdisk stopped cleanly"
check_py "every replica of the 64 MiB, the new extents' too, in the LUN files" backing "$MAP" \
	"$WORK/big.data" "${LUNS[@]}"

# A resize during a resync is refused: nothing changes, MAP.grow stays;
# kill -9, served again: MAP.grow taken at open.
serve g1 "stripe:$MAP,auto_resync=off" || { summary; exit 1; }
"$LAB" kill 2 >/dev/null 2>&1 || fail "lab.sh kill 2"
out=$(nbdcopy --flush "$WORK/big.data" "$URI" 2>&1) || fail "write with server 2 dead" "$out"
"$LAB" revive 2 >/dev/null 2>&1 || fail "lab.sh revive 2"
for ((t = 0; t < 300; t++)); do # its session back (a resync to it fails before)
	"$TAPCTL" driver -i "$TD_PID" stripe status 2>&1 | grep -q "srv2 lun 1 (iscsi): up" && break
	sleep 0.1
done
"$TAPCTL" driver -i "$TD_PID" stripe resync 64K >/dev/null 2>&1
out=$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1)
grep -q "resync: running" <<<"$out" && pass "a resync runs (64 KiB/s)" || fail "a resync runs" "$out"
cp "$MAP" "$WORK/served.map"
out=$(resize "$MAP" --size 80M)
rc=$?
got=$(nbdinfo --size "$URI" 2>&1)
[ $rc -eq 0 ] && grep -q "did not take it now.*EBUSY" <<<"$out" && [ "$got" = $((64 << 20)) ] &&
	grep -q "^extents-per-column 10" "$MAP.grow" && grep -q "^extents-per-column 8" "$MAP" &&
	grep -q "cannot grow now: a resync runs" "$WORK/g1.log" &&
	pass "a resize during a resync refused by the tapdisk: still $got bytes, MAP.grow kept" ||
	fail "a resize during a resync" "rc $rc: $out; $got; $(grep -i grow "$WORK/g1.log" | tail -2)"
grep -q "^extents-per-column 8" "$MAP" && pass "the served map keeps its size (8 extents per column)" ||
	fail "the served map after a refused resize" "$(grep extents-per-column "$MAP")"
kill -9 "$TD_PID"
wait "$TD_PID" 2>/dev/null
TD_PIDS=()
serve g1 "stripe:$MAP" || { summary; exit 1; }
got=$(nbdinfo --size "$URI" 2>&1)
[ "$got" = $((80 << 20)) ] && [ ! -e "$MAP.grow" ] && grep -q "^extents-per-column 10" "$MAP" &&
	pass "kill -9, served again: MAP.grow taken at open, $got bytes" ||
	fail "MAP.grow taken at open" "$got; $(grep -i grow "$WORK/g1.log" | tail -3)"
grep -q "does not match the map's geometry" "$WORK/g1.log" &&
	fail "the activity log of the old geometry" "$(grep "activity log" "$WORK/g1.log" | tail -3)" ||
	pass "the unclean activity log of the old geometry taken at the grown places (no full resync)"
out=$("$CTL" vdisk resync "$MAP" 2>&1) && pass "online resync of what server 2 missed" ||
	fail "online resync after the kill" "$out"
out=$(nbdcopy "$URI" "$WORK/back" 2>&1) && cmp -s -n $((64 << 20)) "$WORK/big.data" "$WORK/back" &&
	pass "the 64 MiB read back intact" || fail "the data intact" "$out"

# A served resize the tapdisk cannot be asked about (another run
# directory): MAP.grow written; the tapdisk gone, the next resize takes it.
mkdir -p "$WORK/other"
out=$(resize "$MAP" --size 96M --run-dir "$WORK/other") && [ -e "$MAP.grow" ] &&
	grep -q "cannot reach its control socket" <<<"$out" &&
	pass "resize to 96 MiB, the tapdisk not reached: MAP.grow written" || fail "unreached served resize" "$out"
unserve "$TD_PID" g1
out=$(resize "$MAP" --size 96M)
[ $? -eq 0 ] && grep -q "taken" <<<"$out" && grep -q "already" <<<"$out" && [ ! -e "$MAP.grow" ] &&
	grep -q "^extents-per-column 12" "$MAP" &&
	pass "the next resize takes MAP.grow: $(tail -1 <<<"$out")" || fail "resize takes MAP.grow" "$out"
check_py "every replica of the 64 MiB, after the resync, in the LUN files" backing "$MAP" \
	"$WORK/big.data" "${LUNS[@]}"

# A MAP.grow of another disk is removed at open, the disk keeps its size.
sed 's/^vdisk g1$/vdisk g9/' "$WORK/copy.map" >"$MAP.grow"
serve g1 "stripe:$MAP" || { summary; exit 1; }
got=$(nbdinfo --size "$URI" 2>&1)
[ "$got" = $((96 << 20)) ] && [ ! -e "$MAP.grow" ] &&
	pass "a MAP.grow that does not apply removed at open, size kept ($got)" ||
	fail "a MAP.grow that does not apply" "$got; $(grep -i grow "$WORK/g1.log" | tail -3)"
unserve "$TD_PID" g1

summary
