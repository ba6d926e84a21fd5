#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-failover.sh - tapdisk's calls to the master go through the list of
# masters of the disk's mapping file (issue #23 item 3), against the lab's
# tgtd servers and master: the disk is made with
# `stripe-ctl --master DEAD,LAB` (DEAD a port nobody listens on), so the
# map's master line holds both; tapdisk opens it (its lease acquire moves
# past DEAD to the lab's master), serves I/O, and when a server is killed
# during a write stream its notifier's stale marks reach the lab's master
# the same way.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 when not root or tgt/libnbd are missing.
# About 15 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

lab_up 2
MAP=$WORK/fo.map
DATA=$WORK/fo.data
DEAD=127.0.0.1:$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LIST=$DEAD,$LAB_MASTER

out=$("$CTL" --master "$LIST" vdisk create fo --size 64M --stripes 2 \
	--stripe-unit 64K --replicas 2 -o "$MAP" 2>&1) ||
	{ fail "vdisk create through $LIST" "$out"; summary; exit 1; }
grep -qx "master $LIST" "$MAP" &&
	pass "the mapping file's master line is the list: $LIST" ||
	fail "the mapping file's master line is the list" "$(grep '^master' "$MAP")"

serve fo "stripe:$MAP" || { summary; exit 1; }
holder=$("$CTL" --master "$LAB_MASTER" --json vdisk lease show fo 2>/dev/null |
	"$PY" -c 'import json, sys; print(json.load(sys.stdin)["holder"])')
[ -n "$holder" ] &&
	pass "tapdisk opened the disk: its lease taken through the list (holder $holder)" ||
	fail "tapdisk's lease through the list" "$(tail -5 "$WORK/fo.log")"

# Kill the server of replica 1 of extent 0 of column 0 during a write
# stream: the stale marks go to the master through the same list.
victim_srv=$(awk '$1 == "extent" && $2 == 0 && $3 == 0 && $4 == 1 { print $6 }' "$MAP")
victim_target=$(awk -v n="$victim_srv" '$1 == "server" && $2 == n {
	for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$MAP")
head -c 64M /dev/urandom >"$DATA"
check_py "write stream with a replica's server killed" stream "$URI" "$DATA" \
	--kill-at 0.3 --run "'$LAB' kill $(lab_index "$victim_target")" --bs 262144 --qd 8
for ((t = 0; t < 50; t++)); do
	n=$("$CTL" --master "$LAB_MASTER" extents list --vdisk fo --json 2>/dev/null |
		"$PY" -c 'import json, sys; print(sum(bool(e.get("stale")) for e in json.load(sys.stdin)))')
	[ "${n:-0}" -gt 0 ] && break
	sleep 0.2
done
[ "${n:-0}" -gt 0 ] &&
	pass "tapdisk's notifier told the master of $n stale replicas through the list" ||
	fail "the master was told of stale replicas" "$(grep -i master "$WORK/fo.log" | tail -5)"
grep -q "trying the next master" "$WORK/fo.log" &&
	pass "tapdisk's log says it moved past $DEAD" ||
	fail "tapdisk's log says it moved past $DEAD" "$(tail -5 "$WORK/fo.log")"
unserve "$TD_PID" fo
summary
