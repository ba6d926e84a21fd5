#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-move.sh - failed servers, under-replicated extents and re-homing
# one replica at a time (issue #19, items 3 and 6: the master's side) with
# the real stripe-master and stripe-ctl.
#
# Four servers, disk d of 2 columns x 4 extents x 2 replicas.  `server
# fail` of one (twice: "already failed"; an unknown one: refused) makes
# its 4 extents under-replicated in `vdisk list`, `vdisk show --name` and
# `server list` (text and --json), and so does a stale mark; `server add`
# of it again is refused.  Its replicas are re-homed with `extent move
# begin|commit`, the master killed with SIGKILL after half of the begins
# and again after half of the commits: rerunning the same commands
# finishes the job (repeats change nothing), `extent move list` shows what
# is in progress (and `extents list` marks the new extents as move
# targets), no extent leaks or is owned twice (free counts, and
# `stripe-master --check` on the database after each kill).  Then an
# abort frees its new extent, the failed server, empty, is removed and
# added again.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 when python3 is missing.  BUILDDIR (set by
# make check) is where the programs were built.
set -u

MASTER_LIB_WORK=master-move
. "$(cd "$(dirname "$0")" && pwd)/master-lib.sh"

IQN=iqn.2024-01.org.tapstripe:mv

# 4 servers of 64M (16 extents of 4M each: 64 in all), disk d (16 slots).
setup() {
	local i
	for i in 0 1 2 3; do
		ctl server add --portal 10.79.$i.2 --target $IQN$i --lun 1 --size 64M \
			--host h$i >/dev/null || return 1
	done
	ctl vdisk create d --size 32M --stripes 2 --replicas 2 --stripe-unit 1M \
		-o "$WORK/d.map" >/dev/null
}

vdisk_field() { # KEY: disk d's value in vdisk list --json
	ctl --json vdisk list | json_get "[v['$1'] for v in j if v['vdisk'] == 'd'][0]"
}

server_field() { # ID KEY: a server's value in server list --json
	ctl --json server list | json_get "[s['$2'] for s in j if s['id'] == $1][0]"
}

free_extents() {
	ctl --json info | json_get 'j["free_extents"]'
}

# The master killed by SIGKILL, its database checked, the master started
# again; 0 when all went well.
kill_check_restart() {
	local out
	stop_master KILL
	out=$(check_master 2>&1) || { echo "$out"; return 1; }
	start_master --allow 127.0.0.1
}

case_fresh() {
	[ "$(vdisk_field under_replicated) $(vdisk_field moves)" = "0 0" ] &&
		[ "$(server_field 1 state) $(server_field 1 replicas) $(server_field 1 stale_replicas)" = "ok 4 0" ] &&
		ctl vdisk list | grep -q "UNDER-REPLICATED" &&
		ctl server list | grep -q "MOVES OUT/IN" &&
		pass "a new disk: nothing under-replicated; servers ok, 4 replicas each" ||
		fail "a new disk" "$(ctl vdisk list; ctl server list)"
}

case_fail() {
	local out
	out=$(ctl server fail --target ${IQN}0 --lun 1 --mark-only 2>&1) &&
		echo "$out" | grep -q "failed: no new extents" &&
		out=$(ctl server fail --target ${IQN}0 --lun 1 --mark-only 2>&1) &&
		echo "$out" | grep -q "already failed" &&
		[ "$(ctl --json server fail --target ${IQN}0 --lun 1 --mark-only |
			json_get 'j["changed"], j["state"]')" = "False failed" ] &&
		pass "server fail: failed, then 'already failed' (exit 0, --json state)" ||
		fail "server fail" "$out"
	out=$(ctl server fail --target ${IQN}9 --lun 1 --mark-only 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "no server" &&
		pass "server fail of an unknown server: refused" ||
		fail "server fail unknown" "$out"
	out=$(ctl vdisk show --name d)
	[ "$(vdisk_field under_replicated)" = 4 ] &&
		[ "$(server_field 1 state)" = failed ] &&
		[ "$(echo "$out" | grep -c "\[lost: server failed\]  \[under-replicated: 1 of 2 live\]")" = 4 ] &&
		echo "$out" | grep -q "under-replicated:    4 extents" &&
		[ "$(ctl --json vdisk show --name d | json_get 'j["under_replicated"], j["failed_servers"], sum(e["under_replicated"] for e in j["extents"])')" = "4 [1] 8" ] &&
		pass "its 4 extents under-replicated in vdisk list, vdisk show --name, server list" ||
		fail "under-replicated after server fail" "$out"
	out=$(ctl server add --portal 10.79.0.2 --target ${IQN}0 --lun 1 --size 64M --host h0 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "failed and still holds 4 replicas: re-home them" &&
		pass "server add of the failed server: refused, saying what to do" ||
		fail "server add of a failed server" "$out"
}

case_stale() {
	ctl vdisk mark --name d 1 0 0 stale >/dev/null &&
		[ "$(vdisk_field under_replicated)" = 5 ] &&
		[ "$(server_field 3 stale_replicas)" = 1 ] &&
		ctl vdisk mark --name d 1 0 0 ok >/dev/null &&
		[ "$(vdisk_field under_replicated)" = 4 ] &&
		pass "a stale mark makes one more extent under-replicated, and ok again" ||
		fail "stale marks" "$(ctl vdisk list; ctl server list)"
}

# The slots (COLUMN EXTENT REPLICA) of d on server 1, one per line.
slots_on_failed() {
	ctl --json vdisk show --name d | python3 -c '
import json, sys
j = json.load(sys.stdin)
for e in j["extents"]:
    if e["server"] == 1:
        print(e["column"], e["extent"], e["replica"])
'
}

begin_all() { # the moves off server 1, from the slots in $WORK/slots
	local c x r
	while read -r c x r; do
		ctl --json extent move begin d "$c" "$x" "$r" --target ${IQN}0 \
			--lun 1 --reason fail >>"$WORK/begins" || return 1
	done <"$WORK/slots"
}

commit_listed() { # commit every move in progress, the first $1 only
	local n=0 c x r new off
	ctl --json extent move list | json_get \
		'"\n".join("%d %d %d %d %d" % (m["column"], m["extent"], m["replica"], m["new_server"], m["new_offset_bytes"]) for m in j)' \
		>"$WORK/listed"
	while read -r c x r new off; do
		[ -n "$c" ] || continue
		[ "$n" -lt "$1" ] || break
		ctl extent move commit d "$c" "$x" "$r" --target "$IQN$((new - 1))" \
			--lun 1 --offset "$off" >/dev/null || return 1
		n=$((n + 1))
	done <"$WORK/listed"
}

case_rehome() {
	local before out
	slots_on_failed >"$WORK/slots"
	before=$(free_extents)
	head -2 "$WORK/slots" >"$WORK/half"
	cp "$WORK/slots" "$WORK/all"
	cp "$WORK/half" "$WORK/slots"
	begin_all && [ "$(ctl --json extent move list | json_get 'len(j)')" = 2 ] &&
		[ "$(vdisk_field moves)" = 2 ] &&
		[ "$(ctl --json extents list --allocated | json_get 'sum(e["move_target"] for e in j)')" = 2 ] &&
		[ "$(ctl --json extents list | json_get 'sum(e.get("move_target", False) for e in j)')" = 2 ] &&
		[ "$(ctl extents list --vdisk d | grep -c " move-target$")" = 2 ] &&
		ctl vdisk show --name d | grep -q "\[moving to server [0-9]* offset [0-9]*, fail\]" ||
		{ fail "two moves begun" "$(cat "$WORK/begins")"; return; }
	kill_check_restart || { fail "kill -9 after two begins: check"; return; }
	cp "$WORK/all" "$WORK/slots"
	: >"$WORK/begins"
	begin_all &&
		[ "$(json_get_lines changed <"$WORK/begins")" = "False False True True" ] &&
		[ "$(ctl --json extent move list --target ${IQN}0 --lun 1 | json_get 'len(j)')" = 4 ] &&
		[ "$(free_extents)" = $((before - 4)) ] &&
		pass "kill -9 after 2 of 4 begins: rerun gives the same 2 moves and begins 2 more" ||
		{ fail "begins rerun" "$(cat "$WORK/begins")"; return; }
	commit_listed 2 || { fail "two commits"; return; }
	kill_check_restart || { fail "kill -9 after two commits: check"; return; }
	[ "$(ctl --json extent move list | json_get 'len(j)')" = 2 ] &&
		commit_listed 4 &&
		[ "$(ctl --json extent move list | json_get 'len(j)')" = 0 ] &&
		[ "$(vdisk_field under_replicated) $(vdisk_field moves)" = "0 0" ] &&
		[ "$(server_field 1 replicas)" = 0 ] &&
		[ "$(free_extents)" = "$before" ] &&
		pass "kill -9 after 2 of 4 commits: the rest committed; none under-replicated, no leak" ||
		fail "commits rerun" "$(ctl extent move list; ctl vdisk list; ctl info)"
	# a commit and a begin again: done, unchanged
	read -r c x r < <(head -1 "$WORK/all")
	out=$(ctl --json extent move begin d $c $x $r --target ${IQN}0 --lun 1 --reason fail)
	[ "$(echo "$out" | json_get 'j["done"], j["changed"]')" = "True False" ] &&
		new=$(echo "$out" | json_get 'j["move"]["new_server"]') &&
		off=$(echo "$out" | json_get 'j["move"]["new_offset_bytes"]') &&
		[ "$(ctl --json extent move commit d $c $x $r --target "$IQN$((new - 1))" --lun 1 \
			--offset "$off" | json_get 'j["changed"]')" = False ] &&
		pass "begin after commit: done; commit again: unchanged" ||
		fail "begin/commit repeated" "$out"
}

json_get_lines() { # KEY of each JSON document on stdin, in order
	python3 -c '
import json, sys
text, pos, out = sys.stdin.read(), 0, []
dec = json.JSONDecoder()
while text[pos:].strip():
    while text[pos].isspace():
        pos += 1
    doc, pos = dec.raw_decode(text, pos)
    out.append(str(doc["'"$1"'"]))
print(*out)'
}

case_abort() {
	local before out new off
	before=$(free_extents)
	out=$(ctl --json extent move begin d 1 0 0 --target ${IQN}2 --lun 1) &&
		new=$(echo "$out" | json_get 'j["move"]["new_server"]') &&
		off=$(echo "$out" | json_get 'j["move"]["new_offset_bytes"]') &&
		[ "$new" != 1 ] && [ "$new" != 3 ] && [ "$new" != 4 ] &&
		[ "$(free_extents)" = $((before - 1)) ] &&
		out=$(ctl extent move abort d 1 0 0 --target "$IQN$((new - 1))" --lun 1 --offset "$off") &&
		echo "$out" | grep -q "aborted: the new extent is freed" &&
		out=$(ctl extent move abort d 1 0 0 --target "$IQN$((new - 1))" --lun 1 --offset "$off") &&
		echo "$out" | grep -q "aborted already" &&
		[ "$(free_extents)" = "$before" ] &&
		pass "begin (never on the failed server), abort frees the new extent; abort again: unchanged" ||
		fail "abort" "$out"
	out=$(ctl extent move commit d 1 0 0 --target ${IQN}1 --lun 1 --offset 0 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "no move in progress" &&
		out=$(ctl extent move begin d 9 0 0 --target ${IQN}2 --lun 1 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "is not one of them" &&
		out=$(ctl extent move begin d x 0 0 --target ${IQN}2 --lun 1 2>&1)
	[ $? -eq 2 ] && echo "$out" | grep -q "COLUMN wants a number" &&
		pass "commit without a move, a slot outside the disk, a bad number: refused" ||
		fail "move refusals" "$out"
}

case_remove() {
	ctl server remove --target ${IQN}0 --lun 1 >/dev/null &&
		ctl server add --portal 10.79.0.2 --target ${IQN}0 --lun 1 --size 64M \
			--host h0 >/dev/null &&
		[ "$(ctl --json server list | json_get '[s["state"] for s in j if s["target"] == "'${IQN}0'"][0]')" = ok ] &&
		pass "the failed server, empty: removed, then added again as a new one" ||
		fail "remove and re-add" "$(ctl server list)"
}

case_check() {
	local out status
	stop_master TERM
	status=$?
	out=$(check_master 2>&1) && [ "$status" -eq 0 ] &&
		pass "SIGTERM: exit 0; stripe-master --check: consistent" ||
		fail "stripe-master --check" "exit $status: $out"
}

start_master --allow 127.0.0.1 || { echo "FAIL: the master did not start"; exit 1; }
setup || { echo "FAIL: setup"; exit 1; }
case_fresh
case_fail
case_stale
case_rehome
case_abort
case_remove
case_check

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
