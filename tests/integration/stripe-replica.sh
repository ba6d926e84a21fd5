#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-replica.sh - a replica server dies in the middle of a write
# stream, and an online resync makes the replicas exact again.
#
# A disk of S=2 columns, U=64 KiB, R=2 on a lab of 4 servers, served over
# NBD.  A stream of 64 MiB of random data in 256 KiB writes at QD 8 runs;
# when 30 % of them are acknowledged, the server holding replica 1 of
# column 0's first extent is killed (SIGKILL to its tgtd).  Then:
#   - no write failed, a flush succeeds, and every byte reads back as
#     written (served by the live replicas);
#   - the mapping file (still valid for stripe-ctl vdisk show) marks stale
#     replicas, all of them on the killed server;
#   - every live replica in the LUN files holds the data;
#   - the server is revived; once tapdisk has reconnected to it, a resync
#     runs (stripe-ctl vdisk resync FILE --rate 16M, which has the tapdisk
#     serving the file do it online; tap-ctl driver -i ID stripe resync
#     with a stripe-ctl that has no resync), while a second stream
#     overwrites the whole disk with other data;
#   - once the resync ends, no replica is stale, the replicas of every
#     extent are byte-identical over the whole extent in the LUN files, and
#     they and NBD hold the second stream's data;
#   - tapdisk stops cleanly.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About 30 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

RESYNC_TIMEOUT=${RESYNC_TIMEOUT:-120}
lab_up 4
mapfile -t LUNS < <(luns)
MAP=$WORK/r1.map
DATA=$WORK/r1.data
DATA2=$WORK/r1.data2
make_disk r1 64M 2 64K 2 || { summary; exit 1; }
serve r1 "stripe:$MAP" || { summary; exit 1; }

# the server of replica 1 of extent 0 of column 0
VICTIM_SRV=$(awk '$1 == "extent" && $2 == 0 && $3 == 0 && $4 == 1 { print $6 }' "$MAP")
VICTIM_TARGET=$(awk -v n="$VICTIM_SRV" '$1 == "server" && $2 == n {
	for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$MAP")
VICTIM=$(lab_index "$VICTIM_TARGET")
echo "victim: server $VICTIM ($VICTIM_TARGET)"

# master_stale N: wait (10 s at most) until the master lists N stale
# replicas of r1; prints the count it last saw.
master_stale() {
	local n t
	for ((t = 0; t < 50; t++)); do
		n=$("$CTL" --master "$LAB_MASTER" extents list --vdisk r1 --json 2>/dev/null |
			"$PY" -c 'import json, sys; print(sum(bool(e.get("stale")) for e in json.load(sys.stdin)))')
		[ "$n" = "$1" ] && break
		sleep 0.2
	done
	echo "$n"
	[ "$n" = "$1" ]
}

# server_up N: wait (30 s at most) until tapdisk's connection to server
# N of the mapping file is up again (it retries a dead server every 2 s).
server_up() {
	local t
	for ((t = 0; t < 150; t++)); do
		"$TAPCTL" driver -i "$TD_PID" stripe status 2>/dev/null |
			grep -q "^server $1 .*: up," && return 0
		sleep 0.2
	done
	return 1
}

head -c 64M /dev/urandom >"$DATA"
check_py "write stream with a replica killed" stream "$URI" "$DATA" --kill-at 0.3 \
	--run "'$LAB' kill $VICTIM" --bs 262144 --qd 8

stale=$("$PY" "$STRIPE_IO" stale "$MAP")
n_stale=$(grep -c . <<<"$stale")
[ -n "$stale" ] && ! grep -qv "^$VICTIM_TARGET " <<<"$stale" &&
	pass "the mapping file marks $n_stale replicas stale, all on the killed server" ||
	fail "stale replicas in the mapping file" "${stale:-none}"
out=$("$CTL" vdisk show "$MAP" --json 2>&1) &&
	[ "$(python3 -c 'import json, sys; print(sum(e["stale"] for e in json.load(sys.stdin)["extents"]))' <<<"$out")" = "$n_stale" ] &&
	pass "stripe-ctl vdisk show reads the rewritten file: $n_stale stale" ||
	fail "stripe-ctl vdisk show of the rewritten file" "$out"
check_py "the live replicas hold the data" backing "$MAP" "$DATA" "${LUNS[@]}"
out=$(master_stale "$n_stale") && pass "the master was told: it lists $out stale replicas of r1" ||
	fail "the master lists $n_stale stale replicas of r1" "it lists ${out:-none}"

"$LAB" revive "$VICTIM" 2>/dev/null && pass "server $VICTIM revived" || fail "lab.sh revive $VICTIM"
T0=$EPOCHREALTIME
server_up "$VICTIM_SRV" &&
	pass "tapdisk reconnected to server $VICTIM in $(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s" ||
	fail "tapdisk reconnects to server $VICTIM within 30 s" \
		"$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1)"

# start_resync: stripe-ctl vdisk resync in the background (it follows the
# resync to its end: RESYNC_PID), or tapdisk's control command when this
# stripe-ctl has no resync.
RESYNC_PID=
start_resync() {
	local out
	if "$CTL" vdisk resync --help >/dev/null 2>&1; then
		"$CTL" --master "$LAB_MASTER" vdisk resync "$MAP" --rate 16M \
			--run-dir "$TAPSTRIPE_RUNDIR" >"$WORK/resync.out" 2>&1 &
		RESYNC_PID=$!
	elif out=$("$TAPCTL" driver -i "$TD_PID" stripe resync 16M 2>&1); then
		pass "resync started: tap-ctl driver -i ID stripe resync 16M: $out"
	else
		fail "start a resync" "$out"
		return 1
	fi
}

head -c 64M /dev/urandom >"$DATA2"
T0=$(date +%s)
if start_resync; then
	{
		nbdcopy "$DATA2" "$URI" >"$WORK/copy2.out" 2>&1
		rc=$?
		"$TAPCTL" driver -i "$TD_PID" stripe status >"$WORK/resync-at-end" 2>&1
		exit $rc
	} &
	COPY_PID=$!
	for ((t = 0; t < RESYNC_TIMEOUT * 5; t++)); do
		[ -z "$("$PY" "$STRIPE_IO" stale "$MAP")" ] && break
		"$TAPCTL" driver -i "$TD_PID" stripe status 2>/dev/null | grep -q '^resync: failed' && break
		sleep 0.2
	done
	if wait "$COPY_PID"; then
		pass "a second stream of 64 MiB written during the resync (the resync was$(grep -q '^resync: running' "$WORK/resync-at-end" 2>/dev/null || echo " not") still running when it ended)"
	else
		fail "the second stream during the resync" "$(cat "$WORK/copy2.out")"
	fi
	if [ -n "$RESYNC_PID" ]; then
		wait "$RESYNC_PID" &&
			pass "stripe-ctl vdisk resync FILE --rate 16M (online, through tapdisk): $(tail -1 "$WORK/resync.out")" ||
			fail "stripe-ctl vdisk resync" "$(cat "$WORK/resync.out")"
	fi
	stale=$("$PY" "$STRIPE_IO" stale "$MAP")
	[ -z "$stale" ] && pass "resync done: no stale replica left ($(($(date +%s) - T0)) s)" ||
		fail "resync within $RESYNC_TIMEOUT s" "still stale: $stale; $("$TAPCTL" stats -i "$TD_PID" 2>&1 | grep -i resync)"
	out=$(master_stale 0) && pass "the master was told: no stale replica of r1 left" ||
		fail "the master lists no stale replica of r1" "it lists ${out:-none}"
	check_py "replicas identical after the resync" replicas "$MAP" "${LUNS[@]}"
	check_py "every replica holds the second stream's data" backing "$MAP" "$DATA2" "${LUNS[@]}"
	out=$(nbdcopy "$URI" "$WORK/back" 2>&1) && cmp -s "$DATA2" "$WORK/back" &&
		pass "the disk reads back the second stream through NBD" ||
		fail "read back after the resync" "$out$(cmp "$DATA2" "$WORK/back" 2>&1)"
fi

unserve "$TD_PID" r1 && pass "tapdisk stopped cleanly"
summary
