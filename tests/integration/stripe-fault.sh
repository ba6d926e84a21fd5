#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-fault.sh - a server of a disk without replicas dies and comes back.
#
# A disk of S=3 columns, U=64 KiB, R=1 on a lab of 3 servers, filled with
# random data through NBD.  Then the server of column 1 is killed (its
# tgtd gets SIGKILL: connections are reset) and, through NBD:
#   - reads and a write of that server's extents fail with EIO, each within
#     10 s (the iSCSI connection gives up after its login retries);
#   - reads and writes of the other servers' extents go on, with the right
#     data, each within 10 s;
#   - after lab.sh revive, that server's extents read (their old data) and
#     take writes again within 30 s (the connection's background attempts);
#   - the whole disk reads back as written (the failed write changed
#     nothing); tapdisk stops cleanly.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About 20 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

lab_up 3
MAP=$WORK/f1.map
DATA=$WORK/f1.data
make_disk f1 12M 3 64K 1 || { summary; exit 1; }
serve f1 "stripe:$MAP" || { summary; exit 1; }

head -c 12M /dev/urandom >"$DATA"
out=$(nbdcopy "$DATA" "$URI" 2>&1) && pass "12 MiB of random data written" ||
	fail "nbdcopy write" "$out"

# the server of column 1 (R=1: one server per column)
DEAD=$(lab_index "$("$PY" "$STRIPE_IO" columns "$MAP" | awk '$1 == 1 { print $2 }')")
echo "column 1 is on server $DEAD"
check_py "fault scenario" fault "$URI" "$MAP" "$DATA" --dead-column 1 \
	--kill "'$LAB' kill $DEAD" --revive "'$LAB' revive $DEAD" --limit 10

out=$(nbdcopy "$URI" "$WORK/back" 2>&1) && cmp -s "$DATA" "$WORK/back" &&
	pass "the whole disk reads back as written after the revive" ||
	fail "the whole disk reads back as written" "$out$(cmp "$DATA" "$WORK/back" 2>&1)"

unserve "$TD_PID" f1 && pass "tapdisk stopped cleanly"
summary
