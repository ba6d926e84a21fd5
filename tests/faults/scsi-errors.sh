#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# scsi-errors.sh - a server answers chosen reads and writes with SCSI
# errors (issue #10).
#
# Server 2's LUN is a file on failfs (tests/faults/failfs.c, FUSE), which
# fails the reads and writes of chosen byte ranges with EIO; tgtd answers
# them with CHECK CONDITION, MEDIUM ERROR.  A disk of S=1, U=64 KiB, R=2,
# 16 MiB (4 extents of 4 MiB) has replica 1 there.  After 16 MiB of random
# data are written (no failure yet), failfs fails the reads of replica 1's
# extent 0 and the writes of its extent 1.  Then:
#   - the whole disk reads back as written, every read succeeding: the
#     failed reads fell back to replica 0 (counted by tapdisk and failfs);
#     tapdisk's log names the server, the sense and the errno (EIO); reads
#     marked nothing stale;
#   - 16 MiB of new data are written: no write fails, a flush succeeds,
#     everything reads back; exactly replica 1 of extent 1 is stale; the
#     live replicas hold the new data;
#   - failfs stops failing; an online resync ends with no stale replica;
#     the replicas are byte-identical and hold the new data; tapdisk stops
#     cleanly.
#
# One PASS/FAIL line per check, then "N passed, N failed"; exit 0, 1, or
# 77 (skip: also when failfs was not built: libfuse3-dev).  About 15 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"

FAILFS=$BUILDDIR/tests/faults/failfs
[ -x "$FAILFS" ] || skip "failfs not built (apt-get install libfuse3-dev fuse3, then configure again)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
IMG=$WORK/failfs.img
MNT=$WORK/failfs
mkdir -p "$MNT"
truncate -s "$LAB_SIZE" "$IMG"
"$FAILFS" "$IMG" "$MNT" -f >"$WORK/failfs.log" 2>&1 &
FFS_PID=$!
FAULT_CLEANUP+=("umount -l '$MNT'" "kill $FFS_PID" "wait $FFS_PID")
for ((t = 0; t < 100; t++)); do
	[ -e "$MNT/fail" ] && break
	kill -0 "$FFS_PID" 2>/dev/null || break
	sleep 0.05
done
[ -e "$MNT/fail" ] || { fail "failfs mounted on $MNT" "$(cat "$WORK/failfs.log")"; summary; exit 1; }
lab_up 2
make_disk e 16M 1 64K 2 || { summary; exit 1; }
MAP=$WORK/e.map
VSRV=$(slot_server "$MAP" 0 0 1)
VICTIM=$(lab_of "$MAP" "$VSRV")
VTARGET=$(awk -v n="$VSRV" '$1 == "server" && $2 == n { for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$MAP")
BS=$(awk -v n="$VSRV" '$1 == "server" && $2 == n { for (i = 3; i < NF; i++) if ($i == "block-size") print $(i + 1) }' "$MAP")
E=$(awk '$1 == "extent-size-bytes" { print $2 }' "$MAP")
out=$("$LAB" lun "$VICTIM" "$MNT/lun" 2>&1) && pass "server $VICTIM (replica 1) serves its LUN from failfs" ||
	{ fail "lab.sh lun $VICTIM $MNT/lun" "$out"; summary; exit 1; }
mapfile -t LUNS < <(luns | sed "s|^$VTARGET=.*|$VTARGET=$IMG|")
serve e "stripe:$MAP,cmd_timeout_ms=5000" || { summary; exit 1; }
head -c 16M /dev/urandom >"$WORK/e.data"
out=$(nbdcopy "$WORK/e.data" "$URI" 2>&1) && pass "16 MiB of random data written, no failure set yet" ||
	fail "nbdcopy" "$out"

lba() { awk -v j="$1" '$1 == "extent" && $2 == 0 && $3 == j && $4 == 1 { print $8 }' "$MAP"; }
R0=$(($(lba 0) * BS)) W1=$(($(lba 1) * BS))
echo "read $R0 $E" >"$MNT/fail" && echo "write $W1 $E" >"$MNT/fail" &&
	pass "failfs fails reads of replica 1's extent 0 (bytes $R0+$E) and writes of its extent 1 ($W1+$E)" ||
	fail "failfs rules"

T0=$EPOCHREALTIME
fault_io read "$URI" "$WORK/e.data" --bs 262144
fb=$(stripe_field "$TD_PID" read_fallbacks)
ffr=$(awk '$1 == "read_errors" { print $2 }' "$MNT/fail")
[ "${fb:-0}" -gt 0 ] 2>/dev/null && [ "${ffr:-0}" -gt 0 ] &&
	pass "failed reads fell back to replica 0: $fb fallbacks (tapdisk), $ffr reads failed (failfs)" ||
	fail "read fallbacks" "tapdisk read_fallbacks=$fb, failfs read_errors=$ffr"
line=$(grep -m1 "\[server $VSRV\].*op 0 .*MEDIUM_ERROR.*Input/output error" "$WORK/e.log")
[ -n "$line" ] && pass "tapdisk's log names the server, the sense and the errno: ${line#* * }" ||
	fail "a log line: server $VSRV, MEDIUM ERROR, EIO" "$(grep -i err "$WORK/e.log" | head -5)"
stale=$("$PY" "$STRIPE_IO" stale "$MAP")
[ -z "$stale" ] && pass "failed reads marked no replica stale" || fail "no stale replica after reads" "$stale"

head -c 16M /dev/urandom >"$WORK/e.data2"
fault_io write "$URI" "$WORK/e.data2" --bs 262144 --qd 8
stale=$("$PY" "$STRIPE_IO" stale "$MAP")
ffw=$(awk '$1 == "write_errors" { print $2 }' "$MNT/fail")
[ "$stale" = "$VTARGET 0 1 1" ] && [ "${ffw:-0}" -gt 0 ] &&
	pass "exactly replica 1 of extent 1 is stale ($ffw writes failed in failfs)" ||
	fail "stale: replica 1 of extent 1 only" "got: ${stale:-none}; failfs write_errors=$ffw"
grep -m1 "marking it stale" "$WORK/e.log" | sed 's/^/    log: /'
check_py "every live replica holds the new data" backing "$MAP" "$WORK/e.data2" "${LUNS[@]}"
echo "(with the errors: $(elapsed "$T0") s)"

echo clear >"$MNT/fail" && pass "failfs stops failing" || fail "failfs clear"
T1=$EPOCHREALTIME
out=$(resync_all "$TD_PID" "$MAP") && pass "online resync: no stale replica left ($(elapsed "$T1") s)" ||
	fail "online resync" "$out"
check_py "replicas byte-identical after the resync" replicas "$MAP" "${LUNS[@]}"
check_py "every replica holds the new data" backing "$MAP" "$WORK/e.data2" "${LUNS[@]}"
unserve "$TD_PID" e && pass "tapdisk stopped cleanly"
summary
