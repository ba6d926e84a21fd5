#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# lun-shrink.sh - a LUN shrinks under a served disk (issue #10).
#
# A disk of S=1, U=64 KiB, R=2, 32 MiB (8 extents of 4 MiB per replica)
# on a lab of 2 servers, filled with random data through NBD.  The server
# of replica 1 then gets, while tapdisk is connected, its LUN made again
# (lab.sh lun) on a copy of its file cut just before that replica's
# extent 4, so extents 4-7 are beyond the new end.  Then:
#   - the whole disk reads back as written, every read succeeding (reads
#     of the lost extents fall back to replica 0), and tapdisk's log names
#     the server and the error (LBA out of range -> ENXIO);
#   - 32 MiB of new data are written: no write fails, a flush succeeds,
#     everything reads back; exactly that server's extents 4-7 are marked
#     stale, no other replica; every live replica holds the new data;
#   - tapdisk stops cleanly.
#
# One PASS/FAIL line per check, then "N passed, N failed"; exit 0, 1, or
# 77 (skip).  About 15 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"

lab_up 2
make_disk s 32M 1 64K 2 || { summary; exit 1; }
MAP=$WORK/s.map
serve s "stripe:$MAP,cmd_timeout_ms=5000" || { summary; exit 1; }
head -c 32M /dev/urandom >"$WORK/s.data"
out=$(nbdcopy "$WORK/s.data" "$URI" 2>&1) && pass "32 MiB of random data written" || fail "nbdcopy" "$out"

VSRV=$(slot_server "$MAP" 0 0 1)
VICTIM=$(lab_of "$MAP" "$VSRV")
VTARGET=$(awk -v n="$VSRV" '$1 == "server" && $2 == n { for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$MAP")
BS=$(awk -v n="$VSRV" '$1 == "server" && $2 == n { for (i = 3; i < NF; i++) if ($i == "block-size") print $(i + 1) }' "$MAP")
CUT_LBA=$(awk '$1 == "extent" && $2 == 0 && $3 == 4 && $4 == 1 { print $8 }' "$MAP")
LUNVAR=LAB_SRV${VICTIM}_LUN
cp --sparse=always "${!LUNVAR}" "$WORK/shrunk.img" && truncate -s $((CUT_LBA * BS)) "$WORK/shrunk.img"
out=$("$LAB" lun "$VICTIM" "$WORK/shrunk.img" 2>&1) &&
	pass "server $VICTIM's LUN shrunk under tapdisk to $((CUT_LBA * BS >> 20)) MiB (replica 1's extents 4-7 beyond its end)" ||
	{ fail "lab.sh lun $VICTIM" "$out"; summary; exit 1; }
mapfile -t LUNS < <(luns | sed "s|^$VTARGET=.*|$VTARGET=$WORK/shrunk.img|")

T0=$EPOCHREALTIME
fault_io read "$URI" "$WORK/s.data" --bs 262144
fb=$(stripe_field "$TD_PID" read_fallbacks)
[ "${fb:-0}" -gt 0 ] 2>/dev/null && pass "tapdisk counted $fb read fallbacks to the other replica" ||
	fail "read fallbacks counted" "read_fallbacks=$fb"
line=$(grep -m1 "\[server $VSRV\].*LBA_OUT_OF_RANGE" "$WORK/s.log")
[ -n "$line" ] && grep -q "No such device or address" <<<"$line" &&
	pass "tapdisk's log names the server and the error: ${line#* * }" ||
	fail "a log line: server $VSRV, LBA out of range, ENXIO" "$(grep -i err "$WORK/s.log" | head -5)"

head -c 32M /dev/urandom >"$WORK/s.data2"
fault_io write "$URI" "$WORK/s.data2" --bs 262144 --qd 8
stale=$("$PY" "$STRIPE_IO" stale "$MAP" | sort)
want=$(for j in 4 5 6 7; do echo "$VTARGET 0 $j 1"; done)
[ "$stale" = "$want" ] && pass "exactly the 4 replicas beyond the new end are stale" ||
	fail "stale replicas = server $VICTIM's extents 4-7" "got: ${stale:-none}"
check_py "every live replica holds the new data" backing "$MAP" "$WORK/s.data2" "${LUNS[@]}"
echo "(after the shrink: $(elapsed "$T0") s)"
unserve "$TD_PID" s && pass "tapdisk stopped cleanly"
summary
