#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-slow.sh - a slow server does not stall I/O to the other servers.
#
# A disk of S=2 columns, U=1 MiB, R=1 on a lab of 2 servers; the server of
# column 1 is capped at 2 MiB/s (lab.sh slow I 2), the other is not.  One
# NBD connection writes 8 MiB to column 1 (QD 4); once its first write is
# acknowledged, a second connection reads 64 x 64 KiB from column 0, one
# at a time.  Every one of those reads must complete while the slow write
# is still running (compared with each other, no absolute timing), and
# the slow write must take over 2 s (the cap worked; tc's counters show
# it).  No rate cap otherwise.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About 15 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

lab_up 2
MAP=$WORK/s1.map
make_disk s1 64M 2 1M 1 || { summary; exit 1; }
serve s1 "stripe:$MAP" || { summary; exit 1; }

SLOW=$(lab_index "$("$PY" "$STRIPE_IO" columns "$MAP" | awk '$1 == 1 { print $2 }')")
FAST=$(lab_index "$("$PY" "$STRIPE_IO" columns "$MAP" | awk '$1 == 0 { print $2 }')")
if [ "$SLOW" = "$FAST" ]; then
	fail "the two columns are on distinct servers" "both on server $SLOW"
	summary
	exit 1
fi
"$LAB" slow "$SLOW" 2 || fail "lab.sh slow $SLOW 2"
echo "column 1 on server $SLOW (2 MiB/s), column 0 on server $FAST (no cap)"

check_py "slow server scenario" slow "$URI" "$MAP" --slow-column 1 --fast-column 0 \
	--bytes $((8 << 20))

status=$("$LAB" status)
grep -A1 "^srv$SLOW " <<<"$status" | grep -q 'overlimits [1-9]' &&
	pass "lab.sh status: the slow server's qdisc held packets back" ||
	fail "lab.sh status shows the cap at work" "$status"
"$LAB" slow "$SLOW" 0 || fail "lab.sh slow $SLOW 0"

unserve "$TD_PID" s1 && pass "tapdisk stopped cleanly"
summary
