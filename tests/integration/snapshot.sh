#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# snapshot.sh - point-in-time snapshots with copy-before-write (issue #21
# item 2, the tapdisk copy job): `tap-ctl snapshot -i ID start
# aio:TARGET` on an aio disk served over NBD while qemu-io writes to it.
#
# The writer's log is the list of writes it made (offset, length,
# pattern byte), before the snapshot and during the copy; the expected
# images are the original file with the logged writes applied.  A qos:
# filter (read_bps) slows the copy's reads so the writes land mid-copy.
#
# Cases: the target equals the source at the instant (writes before
# present, writes during the copy absent) and the source has them all;
# kill -9 of tapdisk mid-copy leaves the job file, a new tapdisk resumes
# the job, copy-before-write holds after the restart and the target is
# right; a graceful destroy mid-copy keeps the job for the next
# tapdisk; a second start, a start onto a small or missing target, and a
# resize while copying are refused with the reason; cancel drops the job
# file; a damaged job file stops tapdisk from serving, clearly.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when a client is missing.
# BUILDDIR (set by make check) is where bin/ was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
. "$(cd "$(dirname "$0")" && pwd)/snapshot-lib.sh"
MIB=48

nbd_need qemu-io nbdinfo python3
nbd_built "$TAPDISK" "$TAPCTL"
snapshot_workdir snapshot

# writes LOG SEED N BIG: N writes (BIG 0: of at most 256 KiB) at random 4 KiB-aligned offsets, each a
# distinct pattern byte, appended to LOG ("offset length byte") and made
# through one qemu-io connection; every logged write was acknowledged.
writes() {
	python3 - "$1" "$2" "$3" $((MIB << 20)) "$4" >"$WORK/cmds" <<'PY'
import random, sys
log, seed, n, size, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
r = random.Random(seed)
sizes = [4096, 65536, 262144] + ([1 << 20, 3 << 20] if big else [])
with open(log, "a") as f:
    for i in range(n):
        length = r.choice(sizes)
        off = r.randrange(0, (size - length) // 4096 + 1) * 4096
        byte = 1 + (seed * 37 + i) % 255
        f.write(f"{off} {length} {byte}\n")
        print(f"-c\nwrite -P {byte} {off} {length}")
PY
	local args=()
	while IFS= read -r line; do args+=("$line"); done <"$WORK/cmds"
	qemu-io -f raw "${args[@]}" "$URI" >"$WORK/qio.log" 2>&1 &&
		! grep -qi "error\|fail" "$WORK/qio.log"
}

head -c $((MIB << 20)) /dev/urandom >"$ORIG"
cp "$ORIG" "$SRC"
truncate -s $((MIB << 20)) "$TGT"
: >"$WORK/before.log"
: >"$WORK/during.log"
: >"$WORK/after.log"

# --- the target holds the instant ------------------------------------------
if ! start s1 "qos:read_bps=8M|aio:$SRC"; then
	echo "FAIL: tapdisk did not start"
	cat "$WORK/s1.log"
	exit 1
fi
writes "$WORK/before.log" 1 40 1 || fail "writes before" "$(tail -2 "$WORK/qio.log")"
if OUT=$(ctl start "aio:$TGT" 2>&1) && grep -q "instant is marked" <<<"$OUT"; then
	pass "snapshot start"
else
	fail "snapshot start" "$OUT"
fi
# The copy takes 6 s at 8 MiB/s: these run while it copies.
OUT=$(ctl start "aio:$TGT" 2>&1) && fail "second start refused" "exit 0: $OUT"
grep -q "is copying" <<<"$OUT" && pass "second start refused" ||
	fail "second start refused" "$OUT"
OUT=$("$TAPCTL" --run-dir "$WORK" resize -i "$TD_PID" 2>&1) &&
	fail "resize refused while copying" "exit 0: $OUT"
grep -q "snapshot job is copying" <<<"$OUT" &&
	pass "resize refused while copying" || fail "resize refused while copying" "$OUT"
# The background copy's speed limit: a bad value changes nothing.
OUT=$(ctl speed fast 2>&1) && fail "speed fast refused" "exit 0: $OUT"
grep -q "is not a speed" <<<"$OUT" && [ "$(status_field speed)" = 0 ] &&
	pass "speed fast refused" || fail "speed fast refused" "$OUT"
[ "$(status_field busy_speed)" = 16777216 ] && pass "busy speed 16M by default" ||
	fail "busy speed 16M by default" "$(status_field busy_speed)"
if ctl speed 64M 8M >/dev/null && [ "$(status_field speed)" = 67108864 ] &&
	[ "$(status_field busy_speed)" = 8388608 ] &&
	ctl speed 0 >/dev/null && [ "$(status_field speed)" = 0 ] &&
	[ "$(status_field busy_speed)" = 8388608 ]; then
	pass "speed set and lifted"
else
	fail "speed set and lifted" "$(ctl status 2>&1 | tr '\n' ' ')"
fi
[ -f "$TAPSTRIPE_STATE_DIR/snapshots/s1.job" ] && pass "job file while copying" ||
	fail "job file while copying" "$(ls -R "$TAPSTRIPE_STATE_DIR" 2>&1)"
writes "$WORK/during.log" 2 12 0 || fail "writes during" "$(tail -2 "$WORK/qio.log")"

if wait_state done; then
	pass "copy done"
else
	fail "copy done" "$(ctl status 2>&1 | tr '\n' ' ')"
fi
OUT=$(ctl speed 1M 2>&1) && fail "speed refused once done" "exit 0: $OUT"
grep -q "no snapshot job is copying" <<<"$OUT" && pass "speed refused once done" ||
	fail "speed refused once done" "$OUT"
[ ! -e "$TAPSTRIPE_STATE_DIR/snapshots/s1.job" ] && pass "job file removed when done" ||
	fail "job file removed when done"
CBW=$(status_field cbw_chunks)
[ "$CBW" -gt 0 ] && pass "copy-before-write happened ($CBW chunks)" ||
	fail "copy-before-write happened" "cbw_chunks $CBW"
expect "$WORK/exp-target" "$WORK/before.log"
same "target = source at the instant" "$WORK/exp-target" "$TGT"
expect "$WORK/exp-source" "$WORK/before.log" "$WORK/during.log"
same "source has every write" "$WORK/exp-source" "$SRC"

# --- bad targets -------------------------------------------------------------
truncate -s 1M "$WORK/small.img"
OUT=$(ctl start "aio:$WORK/small.img" 2>&1) && fail "small target refused" "exit 0"
grep -q "at least as large" <<<"$OUT" && pass "small target refused" ||
	fail "small target refused" "$OUT"
OUT=$(ctl start "aio:$WORK/missing.img" 2>&1) && fail "missing target refused" "exit 0"
grep -q "cannot open the target" <<<"$OUT" && pass "missing target refused" ||
	fail "missing target refused" "$OUT"

# --- cancel ------------------------------------------------------------------
truncate -s $((MIB << 20)) "$WORK/tgt2.img"
ctl start "aio:$WORK/tgt2.img" >/dev/null 2>&1
if OUT=$(ctl cancel 2>&1) && [ "$(status_field state)" = cancelled ] &&
	[ ! -e "$TAPSTRIPE_STATE_DIR/snapshots/s1.job" ]; then
	pass "cancel drops the job"
else
	fail "cancel drops the job" "$OUT"
fi
OUT=$(ctl cancel 2>&1) && fail "cancel with no job refused" "exit 0"
grep -q "no snapshot job is copying" <<<"$OUT" && pass "cancel with no job refused" ||
	fail "cancel with no job refused" "$OUT"
nbd_stop KILL

# --- kill -9 mid-copy, then resume --------------------------------------------
cp "$ORIG" "$SRC"
rm -f "$TGT"
truncate -s $((MIB << 20)) "$TGT"
: >"$WORK/before.log"
: >"$WORK/during.log"
start s2 "qos:read_bps=4M|aio:$SRC" || fail "tapdisk s2 started"
writes "$WORK/before.log" 3 30 1 || fail "writes before (s2)"
ctl start "aio:$TGT" >/dev/null 2>&1 || fail "snapshot start (s2)"
writes "$WORK/during.log" 4 4 0 || fail "writes during (s2)"
COPIED=$(status_field chunks_copied)
TOTAL=$(status_field chunks_total)
nbd_stop KILL
if [ -f "$TAPSTRIPE_STATE_DIR/snapshots/s2.job" ] && [ "$COPIED" -lt "$TOTAL" ]; then
	pass "kill -9 mid-copy leaves the job file ($COPIED of $TOTAL chunks)"
else
	fail "kill -9 mid-copy leaves the job file" "copied $COPIED"
fi
start s2 "qos:read_bps=24M|aio:$SRC" ||
	fail "tapdisk s2 restarted" "$(tail -3 "$WORK/s2.log")"
RESUMED=$(status_field state)
if OUT=$(ctl start "aio:$WORK/tgt2.img" 2>&1); then
	fail "start while the resumed job copies refused" "exit 0"
else
	pass "start while the resumed job copies refused"
fi
writes "$WORK/after.log" 5 8 0 || fail "writes after the restart"
[ "$RESUMED" = copying ] || [ "$RESUMED" = done ] &&
	pass "job resumed at start-up ($RESUMED)" || fail "job resumed at start-up" "$RESUMED"
wait_state done && pass "resumed copy done" ||
	fail "resumed copy done" "$(ctl status 2>&1 | tr '\n' ' ')"
expect "$WORK/exp-target" "$WORK/before.log"
same "target after kill -9 and resume = source at the instant" "$WORK/exp-target" "$TGT"
expect "$WORK/exp-source" "$WORK/before.log" "$WORK/during.log" "$WORK/after.log"
same "source has every write (s2)" "$WORK/exp-source" "$SRC"
nbd_stop KILL

# --- a graceful stop mid-copy keeps the job for the next tapdisk ----------------
rm -f "$WORK/tgt2.img"
truncate -s $((MIB << 20)) "$WORK/tgt2.img"
start s4 "qos:read_bps=4M|aio:$SRC" || fail "tapdisk s4 started"
ctl start "aio:$WORK/tgt2.img" >/dev/null 2>&1 || fail "snapshot start (s4)"
if "$TAPCTL" --run-dir "$WORK" destroy -i "$TD_PID" >/dev/null 2>&1 &&
	[ -f "$TAPSTRIPE_STATE_DIR/snapshots/s4.job" ]; then
	pass "destroy mid-copy keeps the job file"
else
	fail "destroy mid-copy keeps the job file" "$(tail -2 "$WORK/s4.log")"
fi
wait "$TD_PID" 2>/dev/null
start s4 "aio:$SRC" || fail "tapdisk s4 restarted"
if wait_state done && cmp -s "$SRC" "$WORK/tgt2.img"; then
	pass "resumed after destroy, target = source"
else
	fail "resumed after destroy, target = source" "$(ctl status 2>&1 | tr '\n' ' ')"
fi
nbd_stop KILL

# --- a damaged job file: tapdisk does not serve the disk -----------------------
printf 'garbage\n' >"$TAPSTRIPE_STATE_DIR/snapshots/s3.job"
"$TAPDISK" --foreground -a "aio:$SRC" --nbd "unix:$SOCK" --run-dir "$WORK" \
	--name s3 --log-file "$WORK/s3.log" >"$WORK/s3.out" 2>&1 &
TD_PID=$!
for _ in $(seq 50); do kill -0 "$TD_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$TD_PID" 2>/dev/null; then
	fail "damaged job file refused" "tapdisk runs"
elif grep -q "not a snapshot job file" "$WORK/s3.out" "$WORK/s3.log" &&
	grep -q "drop the job" "$WORK/s3.out" "$WORK/s3.log"; then
	pass "damaged job file refused clearly"
else
	fail "damaged job file refused clearly" "$(cat "$WORK/s3.out" | head -3)"
fi
wait "$TD_PID" 2>/dev/null
TD_PID=

nbd_summary
