#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-scrub.sh - stripe-ctl vdisk verify: the scrub of a striped disk's
# replicas (issue #19 item 5), against the lab's real tgtd servers.
#
# A lab of 3 servers; disk v2: S=1, U=64K, R=2, 16 MiB (4 extents of
# 4 MiB); disk v3: S=2, U=64K, R=3, 16 MiB (2 extents per column).
#   - R = 2, one byte flipped in one replica's LUN file: verify reports it
#     at its place (hand-computed: extent 2, extent offset 1 MiB + 12345,
#     disk offset 8 MiB + 1 MiB + 12345), exit 1; --repair cannot decide
#     (two replicas, no majority): reported as undecided, nothing changed;
#   - R = 3, one byte flipped: --repair rewrites it from the majority,
#     a second verify is clean, every extent's replicas are byte-equal in
#     the LUN files (column 1 extent 0 offset 200000 is disk offset
#     7 * 64K + 3392: unit 3 of column 1 is disk unit 7);
#   - online, through the tapdisk that serves v3, while a writer rewrites
#     the disk through NBD: no false mismatch, and the scrub's read rate
#     stays under --rate (the figure is printed);
#   - a server down: v2's extents on it are reported as not compared,
#     exit 1.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About 30 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

lab_up 3
mapfile -t LUNS < <(luns)
M2=$WORK/v2.map
M3=$WORK/v3.map
make_disk v2 16M 1 64K 2 || { summary; exit 1; }
make_disk v3 16M 2 64K 3 || { summary; exit 1; }

# json_get KEYS...: fields of the --json on stdin, space-separated.
json_get() {
	"$PY" -c '
import json, sys
d = json.load(sys.stdin)
out = []
for k in sys.argv[1:]:
    v = d
    for p in k.split("."):
        v = v[int(p)] if isinstance(v, list) else v[p]
    out.append(str(v))
print(" ".join(out))' "$@"
}

# --- the command line ---------------------------------------------------------
out=$("$CTL" vdisk verify --help 2>&1) && grep -q -- "--repair" <<<"$out" &&
	pass "vdisk verify --help" || fail "vdisk verify --help" "$out"
"$CTL" vdisk verify >/dev/null 2>&1
[ $? = 2 ] && pass "no NAME|FILE: exit 2" || fail "vdisk verify without NAME|FILE exits 2"
out=$("$CTL" vdisk verify "$M2" --rate 1K 2>&1)
[ $? = 2 ] && grep -q "at least 64K" <<<"$out" && pass "--rate 1K refused: exit 2" ||
	fail "--rate below 64K is refused" "$out"
out=$("$CTL" vdisk verify no-such-disk 2>&1)
# The directory is configure's (/var/lib/tapstripe with setup.sh's flags).
[ $? = 1 ] && grep -q "/lib/tapstripe/no-such-disk.map: No such file" <<<"$out" &&
	pass "a NAME is STATEDIR/NAME.map: '$out'" ||
	fail "verify of an unknown NAME" "$out"

# --- clean disks ----------------------------------------------------------------
out=$("$CTL" vdisk verify "$M2" 2>&1) && grep -q "0 mismatches, 0 repaired" <<<"$out" &&
	grep -q "verifying offline" <<<"$out" &&
	pass "v2 clean, offline: $(grep '^vdisk v2' <<<"$out")" || fail "verify of a clean v2" "$out"

# --- R = 2: found at its place, undecided, nothing changed ----------------------
"$PY" "$STRIPE_IO" flip "$M2" 0 2 1 1060921 "${LUNS[@]}" >/dev/null &&
	pass "v2: byte 1 MiB + 12345 of extent 2 replica 1 flipped" || fail "flip a byte of v2"
out=$("$CTL" vdisk verify "$M2" --json 2>"$WORK/v2.err")
rc=$?
[ $rc = 1 ] && [ "$(json_get state mismatch_count undecided mismatches.0.column mismatches.0.extent \
	mismatches.0.extent_offset mismatches.0.disk_offset mismatches.0.replicas mismatches.0.good \
	<<<"$out" 2>&1)" = "done 1 1 0 2 1060921 9449529 0,1 -1" ] &&
	pass "R=2: the mismatch at column 0 extent 2 offset 1060921, disk 9449529, exit 1" ||
	fail "R=2: verify reports the flipped byte (exit $rc)" "$out$(cat "$WORK/v2.err")"
SUMS=$(md5sum "${LUNS[@]#*=}")
out=$("$CTL" vdisk verify "$M2" --repair 2>&1)
rc=$?
[ $rc = 1 ] && grep -q "replicas 0,1 differ, no majority: undecided, not repaired" <<<"$out" &&
	grep -q "1 mismatches, 0 repaired, 1 undecided" <<<"$out" &&
	[ "$SUMS" = "$(md5sum "${LUNS[@]#*=}")" ] &&
	pass "R=2 --repair: undecided, no LUN changed, exit 1: '$(grep '^mismatch' <<<"$out")'" ||
	fail "R=2 --repair leaves an undecidable chunk alone (exit $rc)" "$out"
"$PY" "$STRIPE_IO" flip "$M2" 0 2 1 1060921 "${LUNS[@]}" >/dev/null # flipped back

# --- R = 3: repaired from the majority -------------------------------------------
"$PY" "$STRIPE_IO" flip "$M3" 1 0 2 200000 "${LUNS[@]}" >/dev/null &&
	pass "v3: byte 200000 of column 1 extent 0 replica 2 flipped" || fail "flip a byte of v3"
out=$("$CTL" vdisk verify "$M3" --repair 2>&1)
rc=$?
[ $rc = 0 ] && grep -q "mismatch: column 1 extent 0, extent offset 200000, disk offset 462144 (chunk 0+1048576): replica 2 differs from replica 0 (the majority): repaired" <<<"$out" &&
	pass "R=3 --repair: repaired from the majority, exit 0: '$(grep '^mismatch' <<<"$out")'" ||
	fail "R=3 --repair (exit $rc)" "$out"
check_py "R=3: every extent's replicas are byte-equal in the LUN files" replicas "$M3" "${LUNS[@]}"
out=$("$CTL" vdisk verify "$M3" --json 2>/dev/null)
rc=$?
[ $rc = 0 ] && [ "$(json_get mismatch_count chunks_checked chunks_total <<<"$out")" = "0 16 16" ] &&
	pass "R=3: a second verify is clean (16 of 16 chunks)" || fail "a second verify of v3 (exit $rc)" "$out"

# --- online, under writes --------------------------------------------------------
head -c 16M /dev/urandom >"$WORK/d1"
if serve v3 "stripe:$M3"; then
	touch "$WORK/writing"
	(while [ -e "$WORK/writing" ]; do nbdcopy --flush "$WORK/d1" "$URI" || exit 1; done) \
		>"$WORK/writer.log" 2>&1 &
	W_PID=$!
	sleep 0.5
	out=$("$CTL" vdisk verify "$M3" --rate 8M --json 2>"$WORK/online.err")
	rc=$?
	rm -f "$WORK/writing"
	wait "$W_PID"
	wrc=$?
	read -r mode state mm bytes ms <<<"$(json_get mode state mismatch_count bytes_read elapsed_ms <<<"$out" 2>/dev/null)"
	[ $rc = 0 ] && [ "$mode $state $mm" = "online done 0" ] &&
		grep -q "served by tapdisk $TD_PID: verifying online" "$WORK/online.err" &&
		pass "online under a writer: no mismatch, $bytes bytes read in $ms ms" ||
		fail "online verify under writes (exit $rc)" "$out$(cat "$WORK/online.err")"
	[ "$wrc" = 0 ] && pass "the writer went on during the scrub" ||
		fail "the writer" "$(cat "$WORK/writer.log")"
	if [ -n "${bytes:-}" ] && [ -n "${ms:-}" ] && [ "$ms" -gt 0 ]; then
		rate=$((bytes * 1000 / ms))
		echo "scrub rate: $rate bytes/s for a limit of $((8 << 20)) ($((rate * 100 / (8 << 20))) %)"
		[ "$rate" -le $(((8 << 20) * 11 / 10)) ] && pass "the scrub read at most --rate (+10 %)" ||
			fail "the scrub's rate $rate is over 8M"
	fi
	grep -q "^verify: " "$WORK/online.err" && pass "progress lines on stderr" ||
		fail "progress lines on stderr" "$(cat "$WORK/online.err")"
	out=$("$CTL" vdisk verify "$M3" --json 2>/dev/null) &&
		read -r bytes ms lim <<<"$(json_get bytes_read elapsed_ms rate_limit_bytes_per_s <<<"$out")" &&
		pass "online, idle, the default rate: clean; $bytes bytes read in $ms ms (limit $lim bytes/s)" ||
		fail "online verify, idle" "$out"
	unserve "$TD_PID" v3 && pass "tapdisk stopped"
	check_py "online: the disk holds the last data written" backing "$M3" "$WORK/d1" "${LUNS[@]}"
fi

# --- a server down: a clearly reported partial result ---------------------------
# the server of extent 0 replica 0, and how many extents have a replica on it
read -r SRV DOWN NEXT <<<"$(awk '$1 == "server" { for (i = 3; i < NF; i++) if ($i == "target") t[$2] = $(i + 1) }
	$1 == "extent" && $2 == 0 && $3 == 0 && $4 == 0 { s = $6 }
	$1 == "extent" { on[$6] = on[$6] " " $3 }
	END { n = split(on[s], a, " "); u = 0
	      for (i = 1; i <= n; i++) if (!seen[a[i]]++) u++
	      print s, t[s], u }' "$M2")"
N=$(lab_index "$DOWN")
"$LAB" kill "$N" >/dev/null 2>&1 && pass "server $N ($DOWN) killed" || fail "lab.sh kill $N"
out=$("$CTL" vdisk verify "$M2" 2>&1)
rc=$?
[ $rc = 1 ] && [ "$(grep -c '^not compared: column 0 extent [0-3]: replica' <<<"$out")" = "$NEXT" ] &&
	grep -q "$NEXT extents of $M2 were not fully compared" <<<"$out" &&
	pass "a server down: the $NEXT extents on it not compared, exit 1: '$(tail -1 <<<"$out")'" ||
	fail "verify with a server down (exit $rc)" "$out"
"$LAB" revive "$N" >/dev/null 2>&1
summary
