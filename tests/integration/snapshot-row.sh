#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# snapshot-row.sh - redirect-on-write snapshots (issue #21 item 2, the
# fast mode): `tap-ctl snapshot -i ID start aio:TARGET row` on an aio
# disk served over NBD while qemu-io writes to it.
#
# The writer's log is the list of writes it made (offset, length,
# pattern byte); the expected images are the original file with the
# logged writes applied.  The merge (the cursor) is held back with
# `snapshot speed 1 1` so the writes land while the disk is two files.
#
# Cases: while the disk is two files, the disk's own file stays exactly
# as it was at the instant, and the disk read over NBD has every write
# (reads split between the files; unaligned writes copy their chunks
# first); at the end the names are exchanged: the disk's name holds every
# write, the target's the instant, the job file is gone and the reopened
# disk takes more writes; kill -9 mid-merge, then a new tapdisk resumes
# the job (its speed limits kept, right reads, more writes, the same
# end); a tapdisk killed
# just before the exchange and one killed just after it (fail points,
# SIGKILL) both end right when started again; a reopen after the
# exchange that fails (a fail point) fails the job, the disk answers
# errors, and the next tapdisk serves every write; an exchange refused (the
# files' folder immutable) is tried again and ends once allowed; the
# target's file system filling up fails the job, which a new tapdisk
# resumes once there is room; refused with the reason:
# a chain other than aio:, a target of another size, cancel.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when a client is missing.
# BUILDDIR (set by make check) is where bin/ was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
. "$(cd "$(dirname "$0")" && pwd)/snapshot-lib.sh"
MIB=32

nbd_need qemu-io qemu-img nbdinfo python3
nbd_built "$TAPDISK" "$TAPCTL"
snapshot_workdir snapshot-row
IMMUTABLE=
nbd_cleanup_more() { [ -z "$IMMUTABLE" ] || chattr -i "$IMMUTABLE"; }

# writes LOG SEED N KIND: N writes through one qemu-io connection,
# appended to LOG ("offset length byte"); KIND aligned: 4 KiB-aligned,
# 4 KiB to 256 KiB; unaligned: 512-byte aligned, 512 B to 12 KiB (they
# cover chunks in part); fua: aligned ones with FUA, then a flush.
writes() {
	python3 - "$1" "$2" "$3" $((MIB << 20)) "$4" >"$WORK/cmds" <<'PY'
import random, sys
log, seed, n, size, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
r = random.Random(seed)
with open(log, "a") as f:
    for i in range(n):
        if kind in ("aligned", "fua"):
            length = r.choice([4096, 65536, 262144])
            off = r.randrange(0, (size - length) // 4096 + 1) * 4096
        else:
            length = r.randrange(1, 25) * 512
            off = r.randrange(0, (size - length) // 512 + 1) * 512
        byte = 1 + (seed * 37 + i) % 255
        f.write(f"{off} {length} {byte}\n")
        fua = "-f " if kind == "fua" else ""
        print(f"-c\nwrite {fua}-P {byte} {off} {length}")
    if kind == "fua":
        print("-c\nflush")
PY
	local args=()
	while IFS= read -r line; do args+=("$line"); done <"$WORK/cmds"
	qemu-io -t writeback -f raw "${args[@]}" "$URI" >"$WORK/qio.log" 2>&1 &&
		! grep -qi "error\|fail" "$WORK/qio.log"
}

# read_disk OUT: the disk as its NBD clients read it.
read_disk() {
	rm -f "$1"
	qemu-img convert -f raw -O raw "$URI" "$1" 2>"$WORK/convert.err"
}

fresh() {
	cp "$ORIG" "$SRC"
	rm -f "$TGT"
	truncate -s $((MIB << 20)) "$TGT"
	: >"$WORK/before.log"
	: >"$WORK/during.log"
	: >"$WORK/after.log"
}

head -c $((MIB << 20)) /dev/urandom >"$ORIG"
fresh

# --- two files, then one again -------------------------------------------
start r1 "aio:$SRC" || { echo "FAIL: tapdisk did not start"; exit 1; }
writes "$WORK/before.log" 1 30 aligned || fail "writes before" "$(tail -2 "$WORK/qio.log")"
# The merge held back from its first chunk (speed 1 B/s, busy or not).
if OUT=$(ctl start "aio:$TGT" row 1 1 2>&1) && grep -q "instant is marked" <<<"$OUT"; then
	pass "row snapshot start"
else
	fail "row snapshot start" "$OUT"
fi
[ "$(status_field speed)" = 1 ] && [ "$(status_field busy_speed)" = 1 ] &&
	pass "start's speeds hold" || fail "start's speeds hold" "$(ctl status 2>&1 | tr '\n' ' ')"
[ "$(status_field mode)" = row ] && pass "status says mode row" ||
	fail "status says mode row" "$(status_field mode)"
writes "$WORK/during.log" 2 40 aligned || fail "aligned writes during" "$(tail -2 "$WORK/qio.log")"
writes "$WORK/during.log" 3 40 unaligned || fail "unaligned writes during" "$(tail -2 "$WORK/qio.log")"
expect "$WORK/exp-instant" "$WORK/before.log"
expect "$WORK/exp-live" "$WORK/before.log" "$WORK/during.log"
same "the disk's file stays as at the instant" "$WORK/exp-instant" "$SRC"
read_disk "$WORK/read.img" || fail "read the disk" "$(cat "$WORK/convert.err")"
same "the disk reads every write (two files)" "$WORK/exp-live" "$WORK/read.img"
SYNCS=$(status_field job_syncs)
writes "$WORK/during.log" 11 10 fua || fail "FUA writes and a flush during" "$(tail -2 "$WORK/qio.log")"
[ "$(status_field job_syncs)" -gt "$SYNCS" ] &&
	pass "FUA writes and a flush sync the job file" ||
	fail "FUA writes and a flush sync the job file" "job_syncs $SYNCS -> $(status_field job_syncs)"
expect "$WORK/exp-live" "$WORK/before.log" "$WORK/during.log"
read_disk "$WORK/read.img"
same "the disk reads the FUA writes" "$WORK/exp-live" "$WORK/read.img"
RED=$(status_field row_redirected)
CBW=$(status_field cbw_chunks)
[ "$RED" -gt 0 ] && [ "$CBW" -gt 0 ] &&
	pass "writes redirected ($RED) and partial chunks copied first ($CBW)" ||
	fail "writes redirected and partial chunks copied" "redirected $RED cbw $CBW"
OUT=$(ctl cancel 2>&1) && fail "cancel refused" "exit 0: $OUT"
grep -q "cannot be cancelled" <<<"$OUT" && [ "$(status_field state)" = copying ] &&
	pass "cancel refused" || fail "cancel refused" "$OUT"
[ -f "$TAPSTRIPE_STATE_DIR/snapshots/r1.job" ] && pass "job file while two files" ||
	fail "job file while two files"
ctl speed 0 0 >/dev/null
if wait_state done; then
	pass "merge done"
else
	fail "merge done" "$(ctl status 2>&1 | tr '\n' ' ')"
fi
[ ! -e "$TAPSTRIPE_STATE_DIR/snapshots/r1.job" ] && pass "job file removed" ||
	fail "job file removed"
same "the disk's name holds every write" "$WORK/exp-live" "$SRC"
same "the target's name holds the instant" "$WORK/exp-instant" "$TGT"
writes "$WORK/after.log" 4 20 aligned || fail "writes after the exchange"
expect "$WORK/exp-live" "$WORK/before.log" "$WORK/during.log" "$WORK/after.log"
read_disk "$WORK/read.img"
same "the reopened disk takes writes" "$WORK/exp-live" "$WORK/read.img"
# A second snapshot of the reopened disk.
truncate -s $((MIB << 20)) "$WORK/tgt2.img"
if ctl start "aio:$WORK/tgt2.img" row >/dev/null 2>&1 && wait_state done; then
	pass "a second row snapshot of the reopened disk"
else
	fail "a second row snapshot of the reopened disk" "$(ctl status 2>&1 | tr '\n' ' ')"
fi
nbd_stop TERM
same "... into the disk's name" "$WORK/exp-live" "$SRC"
same "... and not the snapshot" "$WORK/exp-instant" "$TGT"
same "the second snapshot holds its instant" "$WORK/exp-live" "$WORK/tgt2.img"

# --- refusals -------------------------------------------------------------
fresh
start r2 "qos:read_bps=800M|aio:$SRC" || fail "tapdisk r2 started"
OUT=$(ctl start "aio:$TGT" row 2>&1) && fail "row on a qos chain refused" "exit 0"
grep -q "needs a disk served by" <<<"$OUT" && pass "row on a qos chain refused" ||
	fail "row on a qos chain refused" "$OUT"
nbd_stop KILL
start r2 "aio:$SRC" || fail "tapdisk r2 restarted"
truncate -s $(((MIB + 1) << 20)) "$WORK/big.img"
OUT=$(ctl start "aio:$WORK/big.img" row 2>&1) && fail "larger target refused" "exit 0"
grep -q "of the disk's size" <<<"$OUT" && [ "$(status_field state)" = none ] &&
	pass "larger target refused, nothing started" || fail "larger target refused" "$OUT"
OUT=$("$TAPCTL" --run-dir "$WORK" snapshot -i "$TD_PID" start "aio:$TGT" fast 2>&1) &&
	fail "bad mode refused" "exit 0"
grep -q "is not a mode" <<<"$OUT" && pass "bad mode refused" || fail "bad mode refused" "$OUT"
OUT=$(ctl start "aio:$TGT" row fast 2>&1) && fail "bad start speed refused" "exit 0"
grep -q "is not a speed" <<<"$OUT" && [ "$(status_field state)" = none ] &&
	pass "bad start speed refused" || fail "bad start speed refused" "$OUT"
nbd_stop KILL

# --- kill -9 mid-merge, then resume -----------------------------------------
fresh
start r3 "aio:$SRC" || fail "tapdisk r3 started"
writes "$WORK/before.log" 5 20 aligned || fail "writes before (r3)"
ctl start "aio:$TGT" row 1 1 >/dev/null 2>&1 || fail "row start (r3)"
writes "$WORK/during.log" 6 30 aligned || fail "writes during (r3)"
writes "$WORK/during.log" 7 20 unaligned || fail "unaligned writes during (r3)"
nbd_stop KILL
[ -f "$TAPSTRIPE_STATE_DIR/snapshots/r3.job" ] && pass "kill -9 mid-merge leaves the job file" ||
	fail "kill -9 mid-merge leaves the job file"
start r3 "aio:$SRC" || fail "tapdisk r3 restarted" "$(tail -3 "$WORK/r3.log")"
# The speed limits are kept next to the job file: the resumed merge is
# still held back (1 byte/s) until the operator lifts them.
[ "$(status_field mode)" = row ] && [ "$(status_field state)" = copying ] &&
	[ "$(status_field speed)" = 1 ] && [ "$(status_field busy_speed)" = 1 ] &&
	grep -q "resumed" "$WORK/r3.log" &&
	pass "job resumed at start-up, its speed limits kept" ||
	fail "job resumed at start-up, its speed limits kept" "$(ctl status 2>&1 | tr '\n' ' ')"
expect "$WORK/exp-instant" "$WORK/before.log"
expect "$WORK/exp-live" "$WORK/before.log" "$WORK/during.log"
read_disk "$WORK/read.img"
same "after kill -9 the disk reads every acknowledged write" "$WORK/exp-live" "$WORK/read.img"
writes "$WORK/after.log" 8 20 unaligned || fail "writes after the restart"
ctl speed 0 0 >/dev/null
wait_state done && [ ! -e "$TAPSTRIPE_STATE_DIR/snapshots/r3.job.speed" ] &&
	pass "resumed merge done, its limits' file gone" ||
	fail "resumed merge done, its limits' file gone" "$(ctl status 2>&1 | tr '\n' ' ')"
nbd_stop TERM
expect "$WORK/exp-live" "$WORK/before.log" "$WORK/during.log" "$WORK/after.log"
same "after kill -9 and resume: the disk's name has every write" "$WORK/exp-live" "$SRC"
same "after kill -9 and resume: the target's name has the instant" "$WORK/exp-instant" "$TGT"

# --- killed at the exchange, on either side of it ------------------------------
for fp in snapshot-row-merged snapshot-row-exchanged; do
	fresh
	TAPSTRIPE_FAILPOINT=$fp start "r-$fp" "aio:$SRC" || fail "tapdisk ($fp) started"
	writes "$WORK/before.log" 9 20 aligned || fail "writes before ($fp)"
	ctl start "aio:$TGT" row 1 1 >/dev/null 2>&1 || fail "row start ($fp)"
	writes "$WORK/during.log" 10 30 aligned || fail "writes during ($fp)"
	ctl speed 0 0 >/dev/null
	for _ in $(seq 300); do kill -0 "$TD_PID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$TD_PID" 2>/dev/null; then
		fail "killed at $fp" "tapdisk still runs"
		nbd_stop KILL
		continue
	fi
	wait "$TD_PID" 2>/dev/null
	TD_PID=
	[ -f "$TAPSTRIPE_STATE_DIR/snapshots/r-$fp.job" ] &&
		pass "killed at $fp: the job file is there" ||
		fail "killed at $fp: the job file is there"
	start "r-$fp" "aio:$SRC" || fail "tapdisk ($fp) restarted" "$(tail -3 "$WORK/r-$fp.log")"
	wait_state done || [ "$(status_field state)" = none ] ||
		fail "finished after $fp" "$(ctl status 2>&1 | tr '\n' ' ')"
	[ ! -e "$TAPSTRIPE_STATE_DIR/snapshots/r-$fp.job" ] &&
		pass "after $fp: the job file is gone" || fail "after $fp: the job file is gone"
	expect "$WORK/exp-instant" "$WORK/before.log"
	expect "$WORK/exp-live" "$WORK/before.log" "$WORK/during.log"
	read_disk "$WORK/read.img"
	same "after $fp: the disk reads every write" "$WORK/exp-live" "$WORK/read.img"
	nbd_stop TERM
	same "after $fp: the disk's name has every write" "$WORK/exp-live" "$SRC"
	same "after $fp: the target's name has the instant" "$WORK/exp-instant" "$TGT"
done

# --- the reopen after the exchange fails: errors, then a restart serves it ---
# TAPSTRIPE_FAILPOINT=vbd-reopen fails the reopen as an open error would
# (every layer closed).  The job fails and keeps its file, the disk
# answers errors, tapdisk stops on SIGTERM (exit 1: its final flush
# failed); the next tapdisk finds the
# names exchanged, drops the job file and serves every write.
fresh
TAPSTRIPE_FAILPOINT=vbd-reopen start r7 "aio:$SRC" || fail "tapdisk r7 started"
writes "$WORK/before.log" 14 10 aligned || fail "writes before (r7)"
ctl start "aio:$TGT" row 1 1 >/dev/null 2>&1 || fail "row start (r7)"
writes "$WORK/during.log" 15 20 aligned || fail "writes during (r7)"
ctl speed 0 0 >/dev/null
if wait_state failed && grep -q "reopening the disk after the exchange" <<<"$(ctl status)" &&
	[ -f "$TAPSTRIPE_STATE_DIR/snapshots/r7.job" ]; then
	pass "reopen failed: the job fails, keeps its file and says to restart"
else
	fail "reopen failed: the job fails" "$(ctl status 2>&1 | tr '\n' ' ')"
fi
qemu-io -f raw -c "read 0 4096" -c "write -P 7 0 4096" "$URI" >"$WORK/qio2.log" 2>&1
[ "$(grep -c "read failed\|write failed" "$WORK/qio2.log")" = 2 ] &&
	kill -0 "$TD_PID" 2>/dev/null &&
	pass "reopen failed: reads and writes answer errors, tapdisk runs on" ||
	fail "reopen failed: reads and writes answer errors" "$(cat "$WORK/qio2.log")"
# It stops, and exits non-zero: its final flush has no layer to go to.
nbd_stop TERM
grep -q "the final flush failed" "$WORK/r7.log" &&
	pass "reopen failed: tapdisk stops on SIGTERM, saying its flush failed" ||
	fail "reopen failed: tapdisk stops on SIGTERM" "$(tail -3 "$WORK/r7.log")"
start r7 "aio:$SRC" || fail "tapdisk r7 restarted" "$(tail -3 "$WORK/r7.log")"
[ "$(status_field state)" = none ] && [ ! -e "$TAPSTRIPE_STATE_DIR/snapshots/r7.job" ] &&
	[ ! -e "$TAPSTRIPE_STATE_DIR/snapshots/r7.job.speed" ] &&
	pass "after the failed reopen: the next tapdisk drops the job file" ||
	fail "after the failed reopen: the job file is dropped" "$(ctl status 2>&1 | tr '\n' ' ')"
expect "$WORK/exp-instant" "$WORK/before.log"
expect "$WORK/exp-live" "$WORK/before.log" "$WORK/during.log"
read_disk "$WORK/read.img"
same "after the failed reopen: the disk reads every write" "$WORK/exp-live" "$WORK/read.img"
nbd_stop TERM
same "after the failed reopen: the disk's name has every write" "$WORK/exp-live" "$SRC"
same "after the failed reopen: the target's name has the instant" "$WORK/exp-instant" "$TGT"

# --- the exchange fails (the files' folder immutable): the disk goes on ------
# Serving from both files with every chunk in the target; tapdisk tries
# the exchange again every 10 s and ends once it can.
mkdir -p "$WORK/im"
SRC=$WORK/im/src.img TGT=$WORK/im/tgt.img
fresh
start r6 "aio:$SRC" || fail "tapdisk r6 started"
ctl start "aio:$TGT" row 1 1 >/dev/null 2>&1 || fail "row start (r6)"
if chattr +i "$WORK/im" 2>/dev/null; then
	IMMUTABLE=$WORK/im
	writes "$WORK/during.log" 12 20 aligned || fail "writes during (r6)"
	ctl speed 0 0 >/dev/null
	for _ in $(seq 100); do
		grep -q "retrying" "$WORK/r6.log" && break
		sleep 0.1
	done
	expect "$WORK/exp-live" "$WORK/during.log"
	read_disk "$WORK/read.img"
	grep -q "exchanging .*Operation not permitted; retrying" "$WORK/r6.log" &&
		[ "$(status_field state)" = copying ] &&
		[ "$(status_field chunks_copied)" = "$(status_field chunks_total)" ] &&
		pass "exchange refused: logged, the job stays, every chunk in the target" ||
		fail "exchange refused: logged" "$(grep -i exchang "$WORK/r6.log" | tail -2)"
	same "exchange refused: the disk reads every write" "$WORK/exp-live" "$WORK/read.img"
	chattr -i "$WORK/im"
	IMMUTABLE=
	wait_state done && pass "exchange allowed again: done on the next try" ||
		fail "exchange allowed again: done on the next try" "$(ctl status 2>&1 | tr '\n' ' ')"
	nbd_stop TERM
	same "... the disk's name has every write" "$WORK/exp-live" "$SRC"
	same "... the target's name has the instant" "$ORIG" "$TGT"
else
	echo "SKIP: chattr +i refused here: the failed exchange case"
	nbd_stop KILL
fi

# --- the target's file system fills up: the job fails, nothing is lost ----------
# A 40 MiB tmpfs holds the disk's 32 MiB and a sparse target: writes to
# the target fail with ENOSPC after ~8 MiB.  The job fails, keeps its
# file, the disk answers errors; once there is room a new tapdisk
# resumes it and every acknowledged write is there.
FULL=$WORK/full
mkdir -p "$FULL"
if mount -t tmpfs -o size=40m tapstripe-row-full "$FULL" 2>/dev/null; then
	nbd_cleanup_more() {
		[ -z "${IMMUTABLE:-}" ] || chattr -i "$IMMUTABLE"
		umount -l "$FULL" 2>/dev/null
	}
	SRC=$FULL/src.img TGT=$FULL/tgt.img
	fresh
	start r5 "aio:$SRC" || fail "tapdisk r5 started"
	ctl start "aio:$TGT" row 1 1 >/dev/null 2>&1 || fail "row start (r5)"
	python3 - $((MIB << 20)) >"$WORK/cmds" <<'PY'
import sys
size = int(sys.argv[1])
for i in range(64):  # 16 MiB of 256 KiB writes, each at its own offset
    print(f"-c\nwrite -P {1 + i} {i * 512 * 1024} 262144")
PY
	args=()
	while IFS= read -r line; do args+=("$line"); done <"$WORK/cmds"
	qemu-io -t writeback -f raw "${args[@]}" "$URI" >"$WORK/qio.log" 2>&1
	# The acknowledged writes: qemu-io's "wrote" lines.
	python3 - "$WORK/qio.log" >"$WORK/during.log" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r"wrote (\d+)/\d+ bytes at offset (\d+)", line)
    if m:
        off = int(m.group(2))
        print(off, int(m.group(1)), 1 + off // (512 * 1024))
PY
	ACKED=$(wc -l <"$WORK/during.log")
	ST=$(status_field state)
	if [ "$ST" = failed ] && [ "$ACKED" -gt 0 ] && [ "$ACKED" -lt 64 ] &&
		grep -q "No space left" "$WORK/qio.log"; then
		pass "target full: the job fails ($ACKED of 64 writes acknowledged)"
	else
		fail "target full: the job fails" "state $ST, $ACKED acknowledged"
	fi
	grep -q "answers errors until a tapdisk resumes" <<<"$(ctl status)" &&
		[ -f "$TAPSTRIPE_STATE_DIR/snapshots/r5.job" ] &&
		pass "the failed job keeps its file and says what to do" ||
		fail "the failed job keeps its file" "$(ctl status 2>&1 | tr '\n' ' ')"
	qemu-io -f raw -c "read 0 4096" "$URI" >"$WORK/qio2.log" 2>&1
	grep -q "read failed" "$WORK/qio2.log" && pass "the disk answers errors meanwhile" ||
		fail "the disk answers errors meanwhile" "$(head -2 "$WORK/qio2.log")"
	nbd_stop TERM
	mount -o remount,size=100m "$FULL" || fail "remount $FULL"
	start r5 "aio:$SRC" || fail "tapdisk r5 restarted" "$(tail -3 "$WORK/r5.log")"
	expect "$WORK/exp-live" "$WORK/during.log"
	read_disk "$WORK/read.img"
	same "room again: the resumed disk has every acknowledged write" "$WORK/exp-live" "$WORK/read.img"
	ctl speed 0 0 >/dev/null # the kept limits (1 byte/s) lifted
	wait_state done && pass "room again: the merge ends" ||
		fail "room again: the merge ends" "$(ctl status 2>&1 | tr '\n' ' ')"
	nbd_stop TERM
	same "room again: the disk's name has every acknowledged write" "$WORK/exp-live" "$SRC"
	same "room again: the target's name has the instant" "$ORIG" "$TGT"
else
	echo "SKIP: cannot mount a tmpfs (not root): the full target case"
fi

nbd_summary
