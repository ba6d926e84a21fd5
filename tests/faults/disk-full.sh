#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# disk-full.sh - a server's LUN outgrows the filesystem it lives on
# (issue #10).
#
# Before the lab starts, an 8 MiB tmpfs is mounted; the server of replica 1
# of a disk (S=1, U=64 KiB, R=2, 32 MiB) gets its LUN on a sparse file of
# the LUN's full size there (lab.sh lun), so its writes beyond 8 MiB fail
# in tgtd (ENOSPC from pwrite, answered as a SCSI error).  Then:
#   - 32 MiB of random data are written at QD 8: no write fails, a flush
#     succeeds, everything reads back;
#   - tapdisk's log names the server and the error; the stale replicas
#     are all on the full server, and the live replicas hold the data;
#   - the filesystem is grown (remount, 64 MiB); an online resync ends
#     with no stale replica; the replicas are byte-identical and hold the
#     data; tapdisk stops cleanly.
#
# One PASS/FAIL line per check, then "N passed, N failed"; exit 0, 1, or
# 77 (skip).  About 20 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"

FULL=$WORK/full
mkdir -p "$FULL"
mount -t tmpfs -o size=8m tapstripe-full "$FULL" || skip "cannot mount a tmpfs on $FULL"
FAULT_CLEANUP+=("umount -l '$FULL'")
lab_up 2
make_disk f 32M 1 64K 2 || { summary; exit 1; }
MAP=$WORK/f.map
VSRV=$(slot_server "$MAP" 0 0 1)
VICTIM=$(lab_of "$MAP" "$VSRV")
VTARGET=$(awk -v n="$VSRV" '$1 == "server" && $2 == n { for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$MAP")
truncate -s "$LAB_SIZE" "$FULL/lun.img"
out=$("$LAB" lun "$VICTIM" "$FULL/lun.img" 2>&1) &&
	pass "server $VICTIM (replica 1) serves its LUN from a sparse $LAB_SIZE file on an 8 MiB tmpfs" ||
	{ fail "lab.sh lun $VICTIM" "$out"; summary; exit 1; }
mapfile -t LUNS < <(luns | sed "s|^$VTARGET=.*|$VTARGET=$FULL/lun.img|")
serve f "stripe:$MAP,cmd_timeout_ms=5000" || { summary; exit 1; }

head -c 32M /dev/urandom >"$WORK/f.data"
T0=$EPOCHREALTIME
fault_io write "$URI" "$WORK/f.data" --bs 262144 --qd 8
echo "(writes with a full server: $(elapsed "$T0") s; tmpfs: $(df -h --output=used,size "$FULL" | tail -1))"
line=$(grep -m1 "\[server $VSRV\].*op 1 " "$WORK/f.log")
[ -n "$line" ] && pass "tapdisk's log names the server and the error: ${line#* * }" ||
	fail "a log line naming server $VSRV's failed write" "$(grep -i err "$WORK/f.log" | head -5)"
grep -m1 "marking it stale" "$WORK/f.log" | sed 's/^/    log: /'
tgtline=$(grep -m1 -i "space\|bs_rdwr\|error" "$LAB_STATE/srv$VICTIM.log")
[ -n "$tgtline" ] && echo "    tgtd: $tgtline"
stale=$("$PY" "$STRIPE_IO" stale "$MAP")
n_stale=$(grep -c . <<<"$stale")
n_ext=$(grep -c '^extent 0 [0-9]* 1 ' "$MAP")
[ -n "$stale" ] && ! grep -qv "^$VTARGET " <<<"$stale" && [ "$n_stale" -lt "$n_ext" ] &&
	pass "$n_stale of the full server's $n_ext replicas marked stale (the others fit), none elsewhere" ||
	fail "stale replicas: some but not all on the full server, none elsewhere" "${stale:-none}"
check_py "the live replicas (the full server's that fit included) hold the data" \
	backing "$MAP" "$WORK/f.data" "${LUNS[@]}"

mount -o remount,size=64m "$FULL" && pass "the full filesystem grown to 64 MiB" || fail "remount $FULL"
T1=$EPOCHREALTIME
out=$(resync_all "$TD_PID" "$MAP") && pass "online resync: no stale replica left ($(elapsed "$T1") s)" ||
	fail "online resync" "$out"
check_py "replicas byte-identical after the resync" replicas "$MAP" "${LUNS[@]}"
check_py "every replica holds the data" backing "$MAP" "$WORK/f.data" "${LUNS[@]}"
out=$(nbdcopy "$URI" "$WORK/f.back" 2>&1) && cmp -s "$WORK/f.data" "$WORK/f.back" &&
	pass "the disk reads back as written" || fail "read back" "$out"
unserve "$TD_PID" f && pass "tapdisk stopped cleanly"
summary
