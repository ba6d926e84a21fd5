#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rehome.sh - re-homing replicas off a server: stripe-ctl server fail
# --rehome and server evacuate (issue #19, item 3), with the lab's real
# tgtd servers, master and tapdisk.
#
# A lab of 8 servers with 4 MiB extents; disk d1: 32 MiB, S=2, R=2, filled
# with random data and served by a tapdisk.  Cases:
#  1. fail: under a write stream, the server of one replica dies for good
#     (lab.sh kill); `server fail` re-homes every replica it held
#     from the surviving ones: the writer sees no error, the disk reads back
#     as written, every live replica holds the data (stripe-io.py backing),
#     the replicas agree, the failed server holds nothing, the master's
#     --check is clean, every extent the map names is its slot's.
#  2. evacuate under load, tapdisk killed (-9) in the middle of a copy:
#     the command fails, tapdisk is started again, the rerun finishes.
#  3. evacuate under load, the master killed (-9) in the middle: the
#     command fails, the master is started again, the rerun finishes.
#     The writer of 2 and 3 loses nothing; no leaked or doubly owned
#     extent (--check), no map names a freed extent.
#  4. offline: no tapdisk serves d1: stripe-ctl copies itself; killed
#     (-9) in the middle, it finishes when run again.
#  5. bad input: an unknown server; failing a server twice (the second
#     finishes, exit 0); a disk whose map is missing (refused for that disk,
#     nothing moved, then done once the map is back); the last server of a
#     site (a note, moved to a distinct host); no distinct host left
#     (refused, nothing lost).
# Figures: the copy rate of the evacuations against --rate.
#
# One PASS/FAIL line per check, then "N passed, N failed"; exit 0, 1, or
# 77 (skip: not root, no tgt, libnbd or stripe driver).  About 90 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"
WRITER=$HERE/rehome-writer.py
RATE=4M

lab_up 8
mapfile -t LUNS < <(luns)
MASTER_BIN=$BUILDDIR/bin/stripe-master
ctl() { "$CTL" --master "$LAB_MASTER" "$@"; }
target_of() { local t=LAB_SRV${1}_TARGET; echo "${!t}"; }
json_get() { "$PY" -c "import json, sys; j = json.load(sys.stdin); print($1)"; }

# server_of_slot MAP C J R: the lab number of a replica's server
server_of_slot() { lab_of "$1" "$(slot_server "$1" "$2" "$3" "$4")"; }

# A lab server holding a replica of d1 that is still in service.
pick_server() { # EXCLUDED...
	local c j r n
	for c in 0 1; do
		for j in 0 1 2 3; do
			for r in 0 1; do
				n=$(server_of_slot "$WORK/d1.map" $c $j $r)
				[[ " $* " == *" $n "* ]] || { echo "$n"; return; }
			done
		done
	done
}

# holds N: how many extents of disks server N holds at the master
holds() {
	ctl --json server list | json_get "[s['replicas'] + s['moves_to'] for s in j if s['target'] == '$(target_of "$1")'][0]"
}

# names N MAP: how many extent lines of MAP name lab server N
names() {
	local n=0 c j r
	for c in $(awk '$1 == "extent" { print $2 "," $3 "," $4 }' "$2"); do
		IFS=, read -r c j r <<<"$c"
		[ "$(server_of_slot "$2" "$c" "$j" "$r")" = "$1" ] && n=$((n + 1))
	done
	echo $n
}

# The master's database checked (stripe-master --check of a copy of it)
# and every map's replicas owned by their slots.
check_master() { # WHAT MAPS...
	local what=$1 out map
	shift
	# a copy: --check refuses a database a running master holds
	rm -rf "$WORK/dbcopy" && mkdir "$WORK/dbcopy"
	cp "$LAB_STATE"/master.db* "$WORK/dbcopy/"
	out=$("$MASTER_BIN" --check --db "$WORK/dbcopy/master.db" 2>&1) &&
		pass "$what: stripe-master --check: $(tail -1 <<<"$out")" ||
		fail "$what: stripe-master --check" "$out"
	ctl --json extents list --allocated >"$WORK/extents.json"
	ctl --json server list >"$WORK/servers.json"
	for map in "$@"; do
		out=$("$PY" "$WRITER" owned "$map" "$WORK/extents.json" "$WORK/servers.json" 2>&1) &&
			pass "$what: $(tail -1 <<<"$out")" || fail "$what: a map names an extent not its own" "$out"
	done
}

# no_moves WHAT: nothing left in progress at the master
no_moves() {
	local n
	n=$(ctl --json extent move list | json_get "len(j)")
	[ "$n" = 0 ] && pass "$1: no move left at the master" ||
		fail "$1: moves left at the master" "$(ctl extent move list)"
}

# data_checks WHAT [PID]: the dirty regions a kill left resynchronised
# (online by tapdisk PID, else offline), then the LUN files against the
# image and the replicas equal
data_checks() {
	local out
	if [ -n "$("$PY" "$STRIPE_IO" stale "$WORK/d1.map")" ]; then
		if [ -n "${2:-}" ]; then
			out=$(resync_all "$2" "$WORK/d1.map" 2>&1)
		else
			out=$(ctl vdisk resync "$WORK/d1.map" 2>&1)
		fi
		[ -z "$("$PY" "$STRIPE_IO" stale "$WORK/d1.map")" ] &&
			pass "$1: the dirty regions resynchronised first" ||
			fail "$1: resync of the dirty regions" "$out"
	fi
	check_py "$1: every live replica holds the data (LUN files)" backing \
		"$WORK/d1.map" "$WORK/d1.img" "${LUNS[@]}"
	check_py "$1: each extent's replicas are byte-identical" replicas "$WORK/d1.map" "${LUNS[@]}"
}

start_writer() { # [--reconnect S]
	rm -f "$WORK/stop"
	"$PY" "$WRITER" write "$URI" "$WORK/d1.img" --stop "$WORK/stop" \
		--rate $((2 << 20)) "$@" >"$WORK/writer.out" 2>&1 &
	WRITER_PID=$!
	sleep 1
}

stop_writer() { # WHAT
	local line
	touch "$WORK/stop"
	wait "$WRITER_PID"
	while IFS= read -r line; do
		case $line in PASS:*) pass "$1: ${line#PASS: }" ;; FAIL:*) fail "$1: ${line#FAIL: }" ;; esac
	done <"$WORK/writer.out"
	grep -q '^PASS: every acknowledged' "$WORK/writer.out" || fail "$1: the writer" "$(cat "$WORK/writer.out")"
}

# wait_copying PID: until tapdisk PID copies a move (some bytes done)
wait_copying() {
	local t
	for ((t = 0; t < 100; t++)); do
		"$TAPCTL" driver -i "$1" stripe move status 2>/dev/null |
			grep -qE ': copying, [1-9][0-9]* of' && return 0
		sleep 0.1
	done
	return 1
}

# rate_figure JSON LIMIT: the copy rate of a run against the limit
rate_figure() {
	json_get "'copied %.1f MiB in %.2f s: %.2f MiB/s (limit $2)' % (j['bytes_copied'] / 1048576, j['copy_ms'] / 1000, j['copy_rate_bytes_per_s'] / 1048576)" <"$1"
}

# Started as lab.sh starts it (not this shell's child), recorded for
# lab.sh down.
restart_master() {
	local pid st t
	pid=$( (setsid "$MASTER_BIN" --foreground --db "$LAB_STATE/master.db" --listen "$LAB_MASTER" \
		--allow 127.0.0.0/8 --allow "$LAB_NET.0.0/16" --extent-size 4M \
		>>"$LAB_STATE/master.log" 2>&1 </dev/null & echo $!))
	st=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$pid/stat")
	echo "$pid $st" >"$LAB_STATE/master.pid" # lab.sh down stops it
	for ((t = 0; t < 50; t++)); do
		ctl --timeout 1 --retries 0 info >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# --- the disk ----------------------------------------------------------------
make_disk d1 32M 2 1M 2 || { summary; exit 1; }
head -c 32M /dev/urandom >"$WORK/d1.img"
serve d1 "stripe:$WORK/d1.map,cmd_timeout_ms=3000" || { summary; exit 1; }
nbdcopy "$WORK/d1.img" "$URI" || fail "d1 filled" ""

# --- 1. a server dies for good under writes: server fail (re-homes) ----------
T0=$EPOCHREALTIME
DEAD=$(server_of_slot "$WORK/d1.map" 0 0 1)
BEFORE=$(holds "$DEAD")
start_writer
"$LAB" kill "$DEAD" >/dev/null
sleep 1
out=$(ctl --json server fail --target "$(target_of "$DEAD")" --lun 1 \
	"$WORK/d1.map" 2>"$WORK/fail.err")
rc=$?
echo "$out" >"$WORK/fail.json"
[ $rc = 0 ] && [ "$(json_get "j['left'], j['failed'], j['moved']" <<<"$out")" = "0 0 $BEFORE" ] &&
	pass "server fail: the $BEFORE replicas of server $DEAD re-homed, none left ($(elapsed "$T0") s)" ||
	fail "server fail (exit $rc)" "$(cat "$WORK/fail.err"; echo "$out" | head -40)"
grep -c -- '-> server' "$WORK/fail.err" | grep -qx "$BEFORE" &&
	pass "a progress line per replica on stderr" || fail "progress lines" "$(cat "$WORK/fail.err")"
stop_writer "fail under writes"
[ "$(holds "$DEAD") $(names "$DEAD" "$WORK/d1.map")" = "0 0" ] &&
	pass "the failed server holds nothing; the map names it nowhere" ||
	fail "the failed server still holds replicas" "$(holds "$DEAD") $(names "$DEAD" "$WORK/d1.map")"
data_checks "after fail" "$TD_PID"
no_moves "after fail"
check_master "after fail" "$WORK/d1.map"
echo "    figures: fail: $(rate_figure "$WORK/fail.json" "64M, the default")"

# --- 2. evacuate under load, tapdisk killed in the middle ----------------------
T0=$EPOCHREALTIME
EVAC=$(pick_server "$DEAD")
BEFORE=$(holds "$EVAC")
start_writer --reconnect 30
ctl --json server evacuate --target "$(target_of "$EVAC")" --lun 1 --rate $RATE \
	"$WORK/d1.map" >"$WORK/evac1.json" 2>"$WORK/evac1.err" &
EVAC_PID=$!
wait_copying "$TD_PID" || fail "a copy under way before the kill" "$(cat "$WORK/evac1.err")"
kill -KILL "$TD_PID"
wait "$TD_PID" 2>/dev/null
wait "$EVAC_PID" && fail "evacuate went on with tapdisk killed" "$(cat "$WORK/evac1.err")" ||
	pass "evacuate fails when tapdisk is killed -9 mid-copy: $(grep -m1 'lost the driver' "$WORK/evac1.err" | cut -c1-100)"
serve d1 "stripe:$WORK/d1.map,cmd_timeout_ms=3000" || { summary; exit 1; }
out=$(ctl --json server evacuate --target "$(target_of "$EVAC")" --lun 1 --rate $RATE \
	"$WORK/d1.map" 2>"$WORK/evac2.err")
rc=$?
echo "$out" >"$WORK/evac2.json"
[ $rc = 0 ] && [ "$(json_get "j['left'], j['failed']" <<<"$out")" = "0 0" ] &&
	pass "rerun after the restart: server $EVAC evacuated ($BEFORE replicas, $(json_get "j['moved'], j['committed'], j['already']" <<<"$out") moved/committed/already; $(elapsed "$T0") s)" ||
	fail "evacuate rerun after the tapdisk restart (exit $rc)" "$(cat "$WORK/evac2.err"; echo "$out" | head -30)"
[ "$(holds "$EVAC") $(names "$EVAC" "$WORK/d1.map")" = "0 0" ] &&
	pass "the evacuated server holds nothing" || fail "server $EVAC still holds replicas" "$(holds "$EVAC")"
check_master "after the tapdisk kill" "$WORK/d1.map"
echo "    figures: evacuate (rerun after the tapdisk kill): $(rate_figure "$WORK/evac2.json" $RATE)"

# --- 3. evacuate under load, the master killed in the middle --------------------
T0=$EPOCHREALTIME
EVAC2=$(pick_server "$DEAD" "$EVAC")
ctl --timeout 2 --retries 0 --json server evacuate --target "$(target_of "$EVAC2")" --lun 1 \
	--rate $RATE "$WORK/d1.map" >"$WORK/evac3.json" 2>"$WORK/evac3.err" &
EVAC_PID=$!
wait_copying "$TD_PID" || fail "a copy under way before the master's kill" "$(cat "$WORK/evac3.err")"
read -r MPID _ <"$LAB_STATE/master.pid"
kill -KILL "$MPID"
wait "$EVAC_PID" && fail "evacuate went on with the master killed" "$(cat "$WORK/evac3.err")" ||
	pass "evacuate fails when the master is killed -9 mid-run"
restart_master || fail "the master started again" "$(tail -3 "$LAB_STATE/master.log")"
check_master "after the master's kill (before the rerun)" "$WORK/d1.map"
out=$(ctl --json server evacuate --target "$(target_of "$EVAC2")" --lun 1 --rate $RATE \
	"$WORK/d1.map" 2>"$WORK/evac4.err")
rc=$?
echo "$out" >"$WORK/evac4.json"
[ $rc = 0 ] && [ "$(json_get "j['left'], j['failed']" <<<"$out")" = "0 0" ] &&
	pass "rerun after the master's restart: server $EVAC2 evacuated ($(elapsed "$T0") s)" ||
	fail "evacuate rerun after the master restart (exit $rc)" "$(cat "$WORK/evac4.err"; echo "$out" | head -30)"
stop_writer "evacuations under writes"
data_checks "after the evacuations" "$TD_PID"
no_moves "after the evacuations"
check_master "after the evacuations" "$WORK/d1.map"

# --- 4. offline: no tapdisk serves d1 -------------------------------------------
unserve "$TD_PID" d1 && pass "tapdisk (d1) stopped cleanly"
EVAC3=$(pick_server "$DEAD" "$EVAC" "$EVAC2")
# stripe-ctl itself killed (-9) while it copies: the map keeps the moves
"$CTL" --master "$LAB_MASTER" server evacuate --target "$(target_of "$EVAC3")" --lun 1 \
	--rate $RATE "$WORK/d1.map" >/dev/null 2>"$WORK/evac5k.err" &
EVAC_PID=$!
for ((t = 0; t < 100; t++)); do grep -q '^move ' "$WORK/d1.map" && break; sleep 0.1; done
sleep 0.3
kill -KILL "$EVAC_PID"
wait "$EVAC_PID" 2>/dev/null
grep -q '^move ' "$WORK/d1.map" &&
	pass "offline: stripe-ctl killed -9 mid-copy, its moves stay in the map ($(grep -c '^move ' "$WORK/d1.map"))" ||
	fail "offline: a move line in the map when stripe-ctl is killed" "$(cat "$WORK/evac5k.err")"
out=$(ctl --json server evacuate --target "$(target_of "$EVAC3")" --lun 1 --rate $RATE \
	"$WORK/d1.map" 2>"$WORK/evac5.err")
rc=$?
echo "$out" >"$WORK/evac5.json"
[ $rc = 0 ] && [ "$(json_get "j['left'], j['failed'], sorted({m['mode'] for m in j['moves']})" <<<"$out")" = "0 0 ['offline']" ] &&
	pass "offline evacuation rerun: stripe-ctl copied itself, server $EVAC3 holds nothing" ||
	fail "offline evacuation (exit $rc)" "$(cat "$WORK/evac5.err"; echo "$out" | head -30)"
data_checks "after the offline evacuation"
no_moves "after the offline evacuation"
check_master "after the offline evacuation" "$WORK/d1.map"
echo "    figures: offline evacuate: $(rate_figure "$WORK/evac5.json" $RATE)"

# --- 5. bad input -----------------------------------------------------------------
out=$(ctl server evacuate --target iqn.2000-01.nowhere:x --lun 1 "$WORK/d1.map" 2>&1)
[ $? = 1 ] && grep -q "no server iqn.2000-01.nowhere:x lun 1" <<<"$out" &&
	pass "an unknown server: refused ($(cut -c1-90 <<<"$out"))" || fail "an unknown server" "$out"
out=$(ctl server fail --target "$(target_of "$DEAD")" --lun 1 --rehome "$WORK/d1.map" 2>&1)
[ $? = 0 ] && grep -q "failed already; finishing" <<<"$out" && grep -q "holds no replica" <<<"$out" &&
	pass "failing a server twice: the second says so, finds nothing left, exit 0" ||
	fail "server fail --rehome twice" "$out"

# A disk of its own whose map is missing.
make_disk d2 8M 1 1M 2 || { summary; exit 1; }
MISS=$(server_of_slot "$WORK/d2.map" 0 0 0)
mkdir -p "$WORK/hidden" && mv "$WORK/d2.map" "$WORK/hidden/"
D2=$(names "$MISS" "$WORK/hidden/d2.map")
out=$(ctl server evacuate --target "$(target_of "$MISS")" --lun 1 --map-dir "$WORK" 2>&1)
[ $? = 1 ] && grep -q "vdisk d2: its mapping file $WORK/d2.map is missing" <<<"$out" &&
	[ "$(holds "$MISS")" = "$D2" ] &&
	pass "a disk whose map is missing: refused for it, its $D2 replicas stay (d1's moved)" ||
	fail "a missing map" "$out"
check_master "after the missing map" "$WORK/d1.map"
mv "$WORK/hidden/d2.map" "$WORK/"
out=$(ctl server evacuate --target "$(target_of "$MISS")" --lun 1 --map-dir "$WORK" 2>&1)
[ $? = 0 ] && [ "$(holds "$MISS")" = 0 ] &&
	pass "the map back: the rerun evacuates server $MISS" || fail "evacuate with the map back" "$out"
check_master "after the map came back" "$WORK/d1.map" "$WORK/d2.map"

# Failure domains: the servers in service get sites: one alone in site a.
mapfile -t LIVE < <(ctl --json server list | json_get "'\n'.join(s['target'] for s in j if s['state'] == 'ok')")
ctl server label --target "${LIVE[0]}" --lun 1 --site a >/dev/null
for t in "${LIVE[@]:1}"; do ctl server label --target "$t" --lun 1 --site b >/dev/null; done
make_disk d3 8M 1 1M 2 || { summary; exit 1; }
LONE=$(lab_index "${LIVE[0]}")
out=$(ctl server evacuate --target "${LIVE[0]}" --lun 1 --map-dir "$WORK" 2>&1)
[ $? = 0 ] && grep -q "distinct hosts only, distinct sites wanted" <<<"$out" && [ "$(holds "$LONE")" = 0 ] &&
	pass "the last server of site a: a note ($(grep -m1 -o 'keeps the.*wanted' <<<"$out")), moved to distinct hosts" ||
	fail "evacuating the last server of a site" "$out"
# Now every live replica is on the servers of site b; with one of them
# drained, an extent on the two others has no distinct host to go to.
mapfile -t LIVE < <(ctl --json server list | json_get "'\n'.join(s['target'] for s in j if s['state'] == 'ok')")
out=$(ctl server evacuate --target "${LIVE[0]}" --lun 1 --map-dir "$WORK" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q "no server may take a new replica" <<<"$out" &&
	pass "no distinct host left: refused ($(grep -m1 -o 'no server may take[^:]*' <<<"$out")), nothing lost" ||
	fail "evacuating with no distinct host left (exit $rc)" "$out"
check_master "after the refusals" "$WORK/d1.map" "$WORK/d2.map" "$WORK/d3.map"
echo "(all cases: $(($(date +%s) - T_START)) s)"
summary
