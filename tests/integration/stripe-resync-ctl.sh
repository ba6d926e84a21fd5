#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-resync-ctl.sh - stripe-ctl vdisk resync FILE, offline and online.
#
# A disk of S=1 column, U=64 KiB, R=2 (16 MiB, 4 extents of 4 MiB) on a
# lab of 2 tgtd servers, so that every extent has a replica on each.
#   - nothing stale: resync says so and succeeds;
#   - served by tapdisk over NBD, written with server 2 dead (its replicas
#     become stale in the mapping file), server 2 revived, tapdisk
#     stopped; then stripe-ctl vdisk resync FILE with no tapdisk serving
#     (offline: stripe-ctl serves the disk itself): no stale replica left,
#     the replicas of every extent byte-identical in the LUN files and
#     holding the data, the master told;
#   - served again, written with server 1 dead, server 1 revived; then
#     stripe-ctl vdisk resync FILE --rate 8M --json while tapdisk serves
#     the disk (online: the tapdisk is found in the run directory and
#     does the copy): the same checks, and NBD reads the data back;
#   - what users get wrong: a missing file, a bad --rate, a disk locked by
#     a tapdisk of another run directory, a stale replica whose server is
#     down (resync fails, the replica stays stale), a bad command line;
#   - the lease (issue #18): offline, stripe-ctl serves the disk as this
#     host.  A lease this host holds is kept; a lease another host holds
#     refuses the resync naming that host, with no byte written (the
#     stale replicas stay stale); a free lease is taken for the copy and
#     released again at the end (free, its epoch grown by one), also
#     when the resync is stopped by SIGINT; the master unreachable, the
#     driver's own message.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About 30 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

lab_up 2
mapfile -t LUNS < <(luns)
MAP=$WORK/rs.map
make_disk rs 16M 1 64K 2 || { summary; exit 1; }

# master_stale N: wait (10 s at most) until the master lists N stale
# replicas of rs; prints the count it last saw.
master_stale() {
	local n t
	for ((t = 0; t < 50; t++)); do
		n=$("$CTL" --master "$LAB_MASTER" extents list --vdisk rs --json 2>/dev/null |
			"$PY" -c 'import json, sys; print(sum(bool(e.get("stale")) for e in json.load(sys.stdin)))')
		[ "$n" = "$1" ] && break
		sleep 0.2
	done
	echo "$n"
	[ "$n" = "$1" ]
}

# degrade VICTIM DATA: serve the disk, write DATA with server VICTIM dead,
# revive it; tapdisk keeps serving (TD_PID, URI).  Every extent is written,
# so each has its replica on VICTIM stale.
degrade() {
	local victim=$1 data=$2 out stale
	serve rs "stripe:$MAP" || return 1
	"$LAB" kill "$victim" >/dev/null 2>&1 || { fail "lab.sh kill $victim"; return 1; }
	out=$(nbdcopy --flush "$data" "$URI" 2>&1) &&
		pass "16 MiB written through NBD with server $victim dead" ||
		{ fail "write with server $victim dead" "$out"; return 1; }
	stale=$("$PY" "$STRIPE_IO" stale "$MAP")
	[ "$(grep -c "srv$victim " <<<"$stale")" = 4 ] && [ "$(grep -c . <<<"$stale")" = 4 ] &&
		pass "the mapping file marks the 4 replicas on server $victim stale" ||
		{ fail "4 stale replicas on server $victim" "${stale:-none}"; return 1; }
	"$LAB" revive "$victim" >/dev/null 2>&1 && pass "server $victim revived" ||
		{ fail "lab.sh revive $victim"; return 1; }
}

# in_step WHAT DATA: no stale replica in the file, identical replicas that
# hold DATA, and the master told.
in_step() {
	local stale out
	stale=$("$PY" "$STRIPE_IO" stale "$MAP")
	[ -z "$stale" ] && pass "$1: no stale replica left in the mapping file" ||
		fail "$1: no stale replica left" "$stale"
	check_py "$1: the replicas of every extent are byte-identical" replicas "$MAP" "${LUNS[@]}"
	check_py "$1: every replica holds the data" backing "$MAP" "$2" "${LUNS[@]}"
	out=$(master_stale 0) && pass "$1: the master was told: no stale replica of rs" ||
		fail "$1: the master lists no stale replica of rs" "it lists ${out:-none}"
}

# lease_field KEY: the lease of rs at the master, one field of its --json.
lease_field() {
	"$CTL" --master "$LAB_MASTER" --json vdisk lease show rs 2>/dev/null |
		"$PY" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# --- nothing to do, and a bad command line ---------------------------------
out=$("$CTL" vdisk resync "$MAP" 2>&1) && grep -q "nothing to resync" <<<"$out" &&
	pass "nothing stale: '$out'" || fail "resync of a disk with nothing stale" "$out"
out=$("$CTL" vdisk resync "$MAP" --json 2>&1) &&
	[ "$("$PY" -c 'import json, sys; d = json.load(sys.stdin); print(d["state"], d["stale_left"])' <<<"$out")" = "nothing 0" ] &&
	pass "nothing stale, --json: state nothing" || fail "resync --json of a disk with nothing stale" "$out"
out=$("$CTL" vdisk resync --help 2>&1) && grep -q "online" <<<"$out" &&
	pass "vdisk resync --help" || fail "vdisk resync --help" "$out"
"$CTL" vdisk resync >/dev/null 2>&1
[ $? = 2 ] && pass "no FILE: exit 2" || fail "vdisk resync without FILE exits 2"
"$CTL" vdisk resync "$MAP" --name rs >/dev/null 2>&1
[ $? = 2 ] && pass "--name is refused: exit 2" || fail "vdisk resync --name exits 2"
out=$("$CTL" vdisk resync "$MAP" --rate 1K 2>&1)
[ $? = 2 ] && grep -q "at least 64K" <<<"$out" && pass "--rate 1K refused: exit 2" ||
	fail "--rate below 64K is refused" "$out"
out=$("$CTL" vdisk resync "$WORK/none.map" 2>&1)
[ $? = 1 ] && grep -q "none.map: No such file" <<<"$out" &&
	pass "a missing file: '$out'" || fail "resync of a missing file" "$out"

# --- offline -----------------------------------------------------------------
head -c 16M /dev/urandom >"$WORK/d1"
head -c 16M /dev/urandom >"$WORK/d2"
if degrade 2 "$WORK/d1"; then
	unserve "$TD_PID" rs && pass "tapdisk stopped"
	ME=$(lease_field holder)
	EPOCH=$(lease_field epoch)
	out=$("$CTL" vdisk resync "$MAP" 2>&1)
	rc=$?
	[ $rc = 0 ] && grep -q "resynchronising offline" <<<"$out" &&
		grep -q "4 stale replicas resynchronised offline" <<<"$out" &&
		pass "offline resync: $(grep -v '^resync: ' <<<"$out" | tr '\n' ' ')" || fail "offline resync (exit $rc)" "$out"
	[ -n "$ME" ] && [ "$(lease_field holder) $(lease_field epoch)" = "$ME $EPOCH" ] &&
		grep -q "lease of vdisk rs is held by this host ($ME, epoch $EPOCH): kept" <<<"$out" &&
		pass "a lease this host holds is kept: holder $ME, epoch $EPOCH" ||
		fail "offline resync keeps this host's lease ($ME, epoch $EPOCH)" \
			"now $(lease_field holder) epoch $(lease_field epoch); $out"
	in_step "offline" "$WORK/d1"
	out=$("$CTL" vdisk resync "$MAP" 2>&1) && grep -q "nothing to resync" <<<"$out" &&
		pass "a second resync has nothing to do" || fail "a second resync" "$out"
fi

# --- online ------------------------------------------------------------------
if degrade 1 "$WORK/d2"; then
	mkdir -p "$WORK/other"
	out=$("$CTL" vdisk resync "$MAP" --run-dir "$WORK/other" 2>&1)
	[ $? = 1 ] && grep -q "locked by process $TD_PID, but no tapdisk in $WORK/other serves it" <<<"$out" &&
		pass "a tapdisk of another run directory: '$out'" ||
		fail "resync of a disk locked by a tapdisk the run directory lacks" "$out"
	out=$("$CTL" vdisk resync "$MAP" --rate 8M --json 2>"$WORK/online.err")
	rc=$?
	[ $rc = 0 ] && grep -q "served by tapdisk $TD_PID: resynchronising online" "$WORK/online.err" &&
		[ "$("$PY" -c 'import json, sys; d = json.load(sys.stdin); print(d["mode"], d["tapdisk"], d["state"], d["replicas_done"], d["bytes_copied"], d["stale_left"])' <<<"$out")" = "online $TD_PID done 4 16777216 0" ] &&
		pass "online resync by tapdisk $TD_PID: $out" ||
		fail "online resync (exit $rc)" "$out$(cat "$WORK/online.err")"
	grep -q "^resync: " "$WORK/online.err" && pass "progress lines on stderr: $(grep -c '^resync: ' "$WORK/online.err")" ||
		fail "progress lines on stderr" "$(cat "$WORK/online.err")"
	in_step "online" "$WORK/d2"
	out=$(nbdcopy "$URI" "$WORK/back" 2>&1) && cmp -s "$WORK/d2" "$WORK/back" &&
		pass "online: the disk reads back the data through NBD" ||
		fail "online: read back through NBD" "$out$(cmp "$WORK/d2" "$WORK/back" 2>&1)"

	# --- a replica that cannot be resynchronised: its server is down ----------
	"$LAB" kill 2 >/dev/null 2>&1
	out=$(nbdcopy --flush "$WORK/d1" "$URI" 2>&1) || fail "write with server 2 dead" "$out"
	out=$("$CTL" vdisk resync "$MAP" 2>&1)
	rc=$?
	stale=$("$PY" "$STRIPE_IO" stale "$MAP" | grep -c .)
	[ $rc = 1 ] && [ "$stale" = 4 ] && grep -q "4 replicas of $MAP are still stale" <<<"$out" &&
		pass "a server down: resync fails, 4 replicas stay stale: $(tail -1 <<<"$out")" ||
		fail "resync with the target's server down (exit $rc, $stale stale)" "$out"
	"$LAB" revive 2 >/dev/null 2>&1
	unserve "$TD_PID" rs && pass "tapdisk stopped cleanly"

	# --- offline, the lease held by another host: refused, nothing written --
	"$CTL" --master "$LAB_MASTER" vdisk lease release rs >/dev/null 2>&1 &&
		"$CTL" --master "$LAB_MASTER" --host-id other-host vdisk lease acquire rs >/dev/null 2>&1 &&
		pass "the lease of rs handed to other-host" || fail "lease of rs to other-host"
	EPOCH=$(lease_field epoch)
	SUMS=$(md5sum "${LUNS[@]}")
	out=$("$CTL" vdisk resync "$MAP" 2>&1)
	rc=$?
	stale=$("$PY" "$STRIPE_IO" stale "$MAP" | grep -c .)
	[ $rc = 1 ] && [ "$stale" = 4 ] && grep -q "held by host other-host" <<<"$out" &&
		! grep -q "locked by" <<<"$out" && [ "$SUMS" = "$(md5sum "${LUNS[@]}")" ] &&
		pass "held by other-host: refused, 4 replicas stay stale, no LUN changed: '$out'" ||
		fail "resync of a disk held by another host (exit $rc, $stale stale)" "$out"
	out=$("$CTL" vdisk resync "$MAP" --json 2>/dev/null)
	rc=$?
	[ $rc = 1 ] && [ "$("$PY" -c 'import json, sys; d = json.load(sys.stdin); print(d["error"], d["holder"], "held by host other-host" in d["message"])' <<<"$out" 2>&1)" = "EHELD other-host True" ] &&
		pass "held by other-host, --json: error EHELD, the holder, a message" ||
		fail "resync --json of a disk held by another host (exit $rc)" "$out"
	[ "$(lease_field holder) $(lease_field epoch)" = "other-host $EPOCH" ] &&
		pass "other-host keeps the lease, epoch $EPOCH" ||
		fail "other-host keeps the lease" "$(lease_field holder) $(lease_field epoch)"

	# --- offline, the master unreachable: the driver's own refusal -------
	# a copy of the file naming a master nobody listens at (checksum redone)
	"$PY" -c '
import re, sys
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xFFFFFFFF
body = open(sys.argv[1], "rb").read().rsplit(b"checksum ", 1)[0]
body = re.sub(rb"(?m)^master .*$", b"master 127.0.0.1:1", body)
open(sys.argv[2], "wb").write(body + b"checksum crc32c %08x\n" % crc32c(body))
' "$MAP" "$WORK/nomaster.map"
	out=$("$CTL" --timeout 2 vdisk resync "$WORK/nomaster.map" 2>&1)
	rc=$?
	[ $rc = 1 ] && grep -q "^stripe-ctl: stripe: $WORK/nomaster.map: cannot reach the master at 127.0.0.1:1" <<<"$out" &&
		! grep -q "locked by" <<<"$out" &&
		pass "the master unreachable: the driver's message: '$(tail -1 <<<"$out")'" ||
		fail "resync with the master unreachable (exit $rc)" "$out"

	# --- offline, the lease free: taken for the copy, released again -----
	"$CTL" --master "$LAB_MASTER" --host-id other-host vdisk lease release rs >/dev/null 2>&1 &&
		[ "$(lease_field holder)" = "" ] && pass "other-host released the lease" ||
		fail "other-host releases the lease"
	# stopped with Ctrl-C: the lease taken is released all the same
	EPOCH=$(lease_field epoch)
	"$CTL" vdisk resync "$MAP" --rate 1M >"$WORK/int.out" 2>"$WORK/int.err" &
	INT_PID=$!
	for ((t = 0; t < 50; t++)); do
		grep -q "^resync: " "$WORK/int.err" && break
		sleep 0.1
	done
	kill -INT "$INT_PID"
	wait "$INT_PID"
	rc=$?
	[ $rc = 1 ] && grep -q "the resync was stopped" "$WORK/int.err" &&
		grep -q "the lease of vdisk rs was free.*released again at epoch $((EPOCH + 1))" "$WORK/int.err" &&
		[ "$(lease_field holder) $(lease_field epoch)" = " $((EPOCH + 1))" ] &&
		pass "a free lease, the resync stopped by SIGINT: released again, free at epoch $((EPOCH + 1))" ||
		fail "a free lease, SIGINT (exit $rc): released again" \
			"holder '$(lease_field holder)' epoch $(lease_field epoch); $(cat "$WORK/int.out" "$WORK/int.err")"

	EPOCH=$(lease_field epoch)
	out=$("$CTL" vdisk resync "$MAP" --json 2>"$WORK/free.err")
	rc=$?
	[ $rc = 0 ] && [ "$("$PY" -c 'import json, sys; d = json.load(sys.stdin); print(d["mode"], d["state"], d["stale_left"], d["lease"], d["lease_epoch"])' <<<"$out" 2>&1)" = "offline done 0 released $((EPOCH + 1))" ] &&
		grep -q "the lease of vdisk rs was free.*released again at epoch $((EPOCH + 1))" "$WORK/free.err" &&
		pass "a free lease: taken and released again: $out" ||
		fail "offline resync of a disk whose lease is free (exit $rc)" "$out$(cat "$WORK/free.err")"
	[ "$(lease_field holder) $(lease_field epoch)" = " $((EPOCH + 1))" ] &&
		pass "the lease is free again, epoch $EPOCH + 1" ||
		fail "the lease is free again at epoch $((EPOCH + 1))" "holder '$(lease_field holder)' epoch $(lease_field epoch)"
	in_step "free lease" "$WORK/d1"
fi
summary
