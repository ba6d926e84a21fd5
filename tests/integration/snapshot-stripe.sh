#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# snapshot-stripe.sh - stripe-ctl vdisk snapshot of a striped disk in use
# (issue #21 item 2), on a lab of 2 tgtd servers.
#
#   - SRC (16 MiB, 2 columns, 2 replicas) served over NBD holds pattern A;
#     `stripe-ctl vdisk snapshot SRC NEW` under a qos-throttled tapdisk
#     (so that the copy is still running) while a writer puts pattern B
#     over SRC; stripe-ctl killed with -9 mid-copy leaves NEW incomplete,
#     and the same command again follows the copy to its end, NEW
#     complete;
#   - while the copy ran, NEW's map had its .incomplete marker and a
#     tapdisk asked to serve NEW refused it (an incomplete snapshot);
#   - NEW served afterwards reads exactly pattern A (the instant), SRC
#     reads pattern B where the writer wrote it;
#   - `vdisk list` shows NEW as snapshot-of=SRC, complete;
#   - a snapshot onto an existing complete file, onto SRC itself:
#     refused, nothing changed;
#   - SRC served by no tapdisk: stripe-ctl serves it itself for the copy
#     (--json "mode": "offline"), NEW equals SRC byte for byte; a larger
#     one with stripe-ctl (the process serving it) killed with -9 mid-copy
#     stays incomplete, is not servable, and the same command again
#     finishes it, byte for byte; SRC leased by another host: refused,
#     nothing changed.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 when root, tgt or libnbd is missing.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

command -v nbdinfo >/dev/null || skip "nbdinfo not found (apt-get install libnbd-bin)"
command -v nbdcopy >/dev/null || skip "nbdcopy not found (apt-get install libnbd-bin)"
command -v qemu-io >/dev/null || skip "qemu-io not found (apt-get install qemu-utils)"

lab_up 2
# The tapdisks' snapshot job files (doc/snapshots.md) go here.
export TAPSTRIPE_STATE_DIR=$WORK
SRC=$WORK/s1.map
NEW=$WORK/n1.map
snap() { "$CTL" --master "$LAB_MASTER" --timeout 10 --retries 0 vdisk snapshot "$@" 2>&1; }

make_disk s1 16M 2 64K 2 || { summary; exit 1; }
# A slow disk: the copy reads it at 2 MiB/s, so it runs for seconds.
serve s1 "qos:read_bps=2M,burst_ms=50|stripe:$SRC" || { summary; exit 1; }
SRC_PID=$TD_PID
SRC_URI=$URI
head -c $((16 << 20)) /dev/urandom >"$WORK/a.data"
out=$(nbdcopy "$WORK/a.data" "$SRC_URI" 2>&1) &&
	pass "pattern A written to SRC" || fail "nbdcopy A" "$out"

# Not through snap(): $! must be stripe-ctl's own pid, not a subshell's.
"$CTL" --master "$LAB_MASTER" --timeout 10 --retries 0 vdisk snapshot "$SRC" n1 \
	-o "$NEW" >"$WORK/snap.out" 2>&1 &
SNAP_PID=$!
for _ in $(seq 100); do
	[ -e "$NEW.incomplete" ] && [ -e "$NEW" ] && break
	sleep 0.05
done
[ -e "$NEW.incomplete" ] && pass "NEW's map has its .incomplete marker during the copy" ||
	fail "the .incomplete marker" "$(ls "$WORK")"
# The instant is marked once the tapdisk says copying: write B then.
for _ in $(seq 100); do
	"$TAPCTL" snapshot -i "$SRC_PID" status 2>/dev/null | grep -q "state copying" && break
	sleep 0.05
done
head -c $((4 << 20)) /dev/urandom >"$WORK/b.data"
out=$(qemu-io -f raw -c "write -P 0x5a 0 4M" "$SRC_URI" 2>&1) &&
	pass "pattern B written over SRC's first 4 MiB during the copy" || fail "qemu-io B" "$out"
out=$("$TAPDISK" --foreground -a "stripe:$NEW,lease=off" --name probe \
	--nbd "unix:$WORK/probe.nbd" 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q "incomplete snapshot" <<<"$out" &&
	pass "serving NEW refused while incomplete" || fail "serving NEW refused while incomplete" "rc $rc: $out"
# stripe-ctl killed mid-copy: the same command again finishes the job.
kill -KILL "$SNAP_PID" 2>/dev/null
wait "$SNAP_PID" 2>/dev/null
[ -e "$NEW.incomplete" ] && pass "stripe-ctl killed mid-copy: NEW still incomplete" ||
	fail "NEW after stripe-ctl was killed" "the marker is gone"
if out=$(snap "$SRC" n1 -o "$NEW"); then
	pass "the same command again resumes and finishes: $(head -1 <<<"$out")"
else
	fail "vdisk snapshot, run again" "$out"
fi
[ ! -e "$NEW.incomplete" ] && pass "the marker removed" || fail "the marker removed"

out=$("$CTL" --master "$LAB_MASTER" vdisk list 2>&1)
grep "^n1 " <<<"$out" | grep -q "snapshot-of=s1" && ! grep "^n1 " <<<"$out" | grep -q incomplete &&
	pass "vdisk list: n1 snapshot-of=s1, complete" || fail "vdisk list" "$out"

serve n1 "stripe:$NEW" || { summary; exit 1; }
out=$(nbdcopy "$URI" "$WORK/n1.read" 2>&1) || fail "reading NEW" "$out"
cmp -s "$WORK/n1.read" "$WORK/a.data" && pass "NEW holds pattern A, the instant's content" ||
	fail "NEW holds pattern A" "$(cmp "$WORK/n1.read" "$WORK/a.data" 2>&1 | head -1)"
unserve "$TD_PID" n1
out=$(nbdcopy "$SRC_URI" "$WORK/s1.read" 2>&1) || fail "reading SRC" "$out"
python3 - "$WORK/s1.read" "$WORK/a.data" <<'PY' && pass "SRC holds B over its first 4 MiB, A after" || fail "SRC content"
import sys
s = open(sys.argv[1], "rb").read()
a = open(sys.argv[2], "rb").read()
sys.exit(not (s[:4 << 20] == b"\x5a" * (4 << 20) and s[4 << 20:] == a[4 << 20:]))
PY

out=$(snap "$SRC" n1 -o "$NEW")
[ $? -ne 0 ] && grep -q "no incomplete snapshot" <<<"$out" &&
	pass "a snapshot onto an existing complete file refused" || fail "onto an existing file" "$out"
out=$(snap "$SRC" s1 -o "$WORK/s1b.map")
[ $? -ne 0 ] && [ ! -e "$WORK/s1b.map" ] && pass "a disk as its own snapshot refused" ||
	fail "its own snapshot" "$out"
unserve "$SRC_PID" s1

# --- a disk no tapdisk serves: stripe-ctl serves it itself for the copy ---
out=$("$CTL" --master "$LAB_MASTER" --timeout 10 --retries 0 --json \
	vdisk snapshot "$SRC" n2 -o "$WORK/n2.map" 2>"$WORK/n2.err")
rc=$?
[ $rc -eq 0 ] && grep -q '"mode": *"offline"' <<<"$out" && [ ! -e "$WORK/n2.map.incomplete" ] &&
	pass "unserved SRC: copied offline, --json mode offline, NEW complete" ||
	fail "offline snapshot of unserved SRC" "rc $rc: $out $(cat "$WORK/n2.err")"
serve n2 "stripe:$WORK/n2.map" || { summary; exit 1; }
out=$(nbdcopy "$URI" "$WORK/n2.read" 2>&1) || fail "reading n2" "$out"
unserve "$TD_PID" n2
cmp -s "$WORK/n2.read" "$WORK/s1.read" && pass "offline NEW equals SRC byte for byte" ||
	fail "offline NEW equals SRC" "$(cmp "$WORK/n2.read" "$WORK/s1.read" 2>&1 | head -1)"

# A larger disk never served (its lease free), so that the copy lasts:
# stripe-ctl (the process serving it for the copy) killed with -9 at once.
make_disk s2 128M 2 64K 1 || { summary; exit 1; }
serve s2 "stripe:$WORK/s2.map" || { summary; exit 1; }
head -c $((128 << 20)) /dev/urandom >"$WORK/s2.data"
out=$(nbdcopy "$WORK/s2.data" "$URI" 2>&1) && pass "128 MiB written to s2" || fail "nbdcopy s2" "$out"
unserve "$TD_PID" s2
"$CTL" --master "$LAB_MASTER" vdisk lease release s2 >/dev/null 2>&1
JOB=$WORK/snapshots/stripe-ctl-snapshot-n3.job
"$CTL" --master "$LAB_MASTER" --timeout 10 --retries 0 vdisk snapshot "$WORK/s2.map" n3 \
	-o "$WORK/n3.map" >"$WORK/n3.out" 2>&1 &
SNAP_PID=$!
for _ in $(seq 1000); do
	[ -e "$JOB" ] && break
	kill -0 "$SNAP_PID" 2>/dev/null || break
	sleep 0.01
done
kill -KILL "$SNAP_PID" 2>/dev/null
wait "$SNAP_PID" 2>/dev/null
[ -e "$WORK/n3.map.incomplete" ] && pass "offline copy, stripe-ctl killed -9 mid-copy: NEW incomplete" ||
	fail "offline kill -9 mid-copy" "job file $([ -e "$JOB" ] && echo there || echo absent): $(cat "$WORK/n3.out")"
out=$("$TAPDISK" --foreground -a "stripe:$WORK/n3.map,lease=off" --name probe3 \
	--nbd "unix:$WORK/probe3.nbd" 2>&1)
rc=$?
[ $rc -ne 0 ] && grep -q "incomplete snapshot" <<<"$out" &&
	pass "the killed offline snapshot is not servable" || fail "serving n3 refused" "rc $rc: $out"
out=$("$CTL" --master "$LAB_MASTER" vdisk list 2>&1)
grep "^n3 " <<<"$out" | grep -q incomplete && pass "vdisk list: n3 (incomplete)" || fail "vdisk list n3" "$out"
if out=$(snap "$WORK/s2.map" n3 -o "$WORK/n3.map"); then
	pass "the same command again finishes it: $(grep -m1 "^vdisk" <<<"$out")"
else
	fail "offline snapshot, run again" "$out"
fi
[ ! -e "$WORK/n3.map.incomplete" ] && [ ! -e "$JOB" ] &&
	pass "marker and job file gone" || fail "marker and job file gone" "$(ls "$WORK" "$WORK/snapshots")"
serve n3 "stripe:$WORK/n3.map" || { summary; exit 1; }
out=$(nbdcopy "$URI" "$WORK/n3.read" 2>&1) || fail "reading n3" "$out"
unserve "$TD_PID" n3
cmp -s "$WORK/n3.read" "$WORK/s2.data" && pass "n3 equals s2 byte for byte" ||
	fail "n3 equals s2" "$(cmp "$WORK/n3.read" "$WORK/s2.data" 2>&1 | head -1)"

# Another host holds the lease: refused, nothing opened, NEW not made.
make_disk s3 8M 2 64K 1 || { summary; exit 1; }
"$CTL" --master "$LAB_MASTER" --host-id other-host vdisk lease acquire s3 >/dev/null 2>&1
out=$(snap "$WORK/s3.map" n4 -o "$WORK/n4.map")
rc=$?
lst=$("$CTL" --master "$LAB_MASTER" vdisk list 2>&1)
[ $rc -ne 0 ] && grep -q "held by host other-host" <<<"$out" && [ ! -e "$WORK/n4.map" ] &&
	! grep -q "^n4 " <<<"$lst" && pass "unserved SRC leased by another host refused: nothing changed" ||
	fail "SRC held by another host" "rc $rc: $out"
summary
