#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rss-verify.sh - tapdisk's memory stays flat over a long verify run
# (issue #10).
#
# Three targets, each a tapdisk of its own: aio over a 64 MiB file driven
# over the shm ring (td-front --verify: random order, 4k/64k/1m blocks, QD
# 16, ring order 2, 256 segments, a new connection and generation per
# run), the same file over NBD (nbdcopy writes the whole 64 MiB, reads it back,
# cmp), and a striped disk (S=2, U=64 KiB, R=2, 64 MiB on a lab of 2
# tgtd servers) over the shm ring as the first.  For each: a warm-up of
# 3 s, tapdisk's RSS (VmRSS), RSS_SECONDS of verify runs, its RSS again.
# Every run must verify, and the RSS may grow by at most RSS_BOUND_KIB.
#
#   RSS_SECONDS=12 (default; about 55 s in all)   RSS_BOUND_KIB=2048
#   The longer run of the README: RSS_SECONDS=300 (about 16 min).
#
# One PASS/FAIL line per target with the figures, then "N passed, N
# failed"; exit 0, 1, or 77 (skip: not root, no tgt or libnbd, or a
# sanitizer build).
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"

# ASan's quarantine holds freed memory by design (256 MiB), so RSS says
# nothing about leaks there: the sanitizer build's leak check does.
if ldd "$BUILDDIR/bin/tapdisk" 2>/dev/null | grep -q libasan; then
	echo "SKIP: tapdisk is built with AddressSanitizer; its RSS is measured in the plain build"
	exit 77
fi

RUN_S=${RSS_SECONDS:-12}
BOUND_KIB=${RSS_BOUND_KIB:-2048}
WARM_S=3

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }

# verify_for NAME KIND SECONDS: verify runs until the time is up; prints
# "RUNS FAILURES MIB_MOVED".
GEN=1
verify_for() {
	local name=$1 kind=$2 end=$((SECONDS + $3)) runs=0 fails=0 moved=0
	while [ $SECONDS -lt $end ]; do
		if [ "$kind" = shm ]; then
			"$TDFRONT" --shm "$WORK/$name.shm" --verify --pattern rand --bs 4k,64k,1m \
				--qd 16 --size 32M --ring-order 2 --max-segments 256 --generation $GEN \
				--seed $GEN --no-progress -q >>"$WORK/$name.front" 2>&1 || fails=$((fails + 1))
		else
			{ nbdcopy "$WORK/rss.data$((GEN % 2))" "$URI" && nbdcopy "$URI" "$WORK/rss.back" &&
				cmp -s "$WORK/rss.data$((GEN % 2))" "$WORK/rss.back"; } >>"$WORK/$name.front" 2>&1 ||
				fails=$((fails + 1))
		fi
		GEN=$((GEN + 1)) runs=$((runs + 1))
		moved=$((moved + $([ "$kind" = shm ] && echo 64 || echo 128)))
	done
	echo "$runs $fails $moved"
}

# settle: a striped disk's resync (it starts on its own when a loaded
# machine made a server miss writes) holds copy buffers: wait (30 s at
# most) until none runs, so that RSS is sampled at rest; say if one ran.
STRIPED=
settle() {
	local t st
	[ -n "$STRIPED" ] || return 0
	for ((t = 0; t < 150; t++)); do
		st=$("$TAPCTL" driver -i "$TD_PID" stripe status 2>/dev/null | grep '^resync:')
		grep -q '^resync: running' <<<"$st" || break
		sleep 0.2
	done
	grep -q '^resync: idle' <<<"$st" || echo "    (a resync ran: $st)" >&2
}

# measure NAME KIND WHAT: warm up, sample, run, sample, judge.
measure() {
	local name=$1 kind=$2 what=$3 before after runs fails moved growth
	read -r runs fails _ < <(verify_for "$name" "$kind" $WARM_S)
	settle
	before=$(rss_kib "$TD_PID")
	read -r runs fails moved < <(verify_for "$name" "$kind" "$RUN_S")
	settle
	after=$(rss_kib "$TD_PID")
	growth=$((after - before))
	[ "$fails" = 0 ] && [ "$runs" -gt 0 ] && [ "$growth" -le "$BOUND_KIB" ] &&
		pass "$what: $runs verify runs in $RUN_S s ($moved MiB moved), tapdisk RSS $(mib "$before") before, $(mib "$after") after (${growth} KiB, bound $BOUND_KIB KiB)" ||
		fail "$what: $runs runs, $fails failed; RSS $before KiB -> $after KiB (${growth} KiB, bound $BOUND_KIB KiB)" \
			"$(tail -5 "$WORK/$name.front")"
}

truncate -s 64M "$WORK/rss.img"
head -c 64M /dev/urandom >"$WORK/rss.data0"
head -c 64M /dev/urandom >"$WORK/rss.data1"
serve a "aio:$WORK/rss.img" || { summary; exit 1; }
measure a shm "aio over the shm ring"
measure a nbd "aio over NBD"
unserve "$TD_PID" a && pass "tapdisk (aio) stopped cleanly"

lab_up 2
make_disk r 64M 2 64K 2 || { summary; exit 1; }
serve r "stripe:$WORK/r.map" || { summary; exit 1; }
STRIPED=1
measure r shm "stripe (S=2, R=2) over the shm ring"
unserve "$TD_PID" r && pass "tapdisk (stripe) stopped cleanly"
summary
