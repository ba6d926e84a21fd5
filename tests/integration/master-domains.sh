#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-domains.sh - failure domains (issue #19, item 4) with the real
# stripe-master and stripe-ctl.
#
# Registers 8 servers labelled as 2 sites x 2 racks x 2 hosts, relabels
# one (changed, repeated, refused: bad labels, an empty host label, an
# unknown server, a host label that would put two replicas of one extent
# on one host), creates disks and checks every extent's replicas from the
# servers' labels: R = 2 spans both sites, R = 3 three racks; with one
# site drained, R = 2 falls back to distinct racks of the other site and
# `vdisk create` and `vdisk show --name` say so (text and --json); then
# `stripe-master --check` passes on the database.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 when python3 is missing.  BUILDDIR (set by
# make check) is where the programs were built.
set -u

MASTER_LIB_WORK=master-domains
. "$(cd "$(dirname "$0")" && pwd)/master-lib.sh"

IQN=iqn.2024-01.org.tapstripe:dom

# Server i (0-7): site s(i/4), rack r((i/2)%2), host h(i).
add_lab() {
	local i
	for i in 0 1 2 3 4 5 6 7; do
		ctl server add --portal 10.78.$i.2 --target $IQN$i --lun 1 --size 64M \
			--host h$i --rack r$(((i / 2) % 2)) --site s$((i / 4)) >/dev/null ||
			return 1
	done
}

case_add() {
	local out
	add_lab || { fail "register 8 labelled servers"; return; }
	ctl server list --json | json_get '[(s["host"], s["rack"], s["site"]) for s in j]' |
		grep -q "('h5', 'r0', 's1')" &&
		pass "register 8 servers labelled 2 sites x 2 racks x 2 hosts" ||
		fail "register 8 labelled servers" "$(ctl server list)"
	out=$(ctl server add --portal 10.78.5.2 --target ${IQN}5 --lun 1 --size 64M \
		--host h5 --rack r0 --site s1 2>&1) && echo "$out" | grep -q "already registered" &&
		out=$(ctl server add --portal 10.78.5.2 --target ${IQN}5 --lun 1 --size 64M 2>&1) &&
		pass "server add repeated with the same labels, or none: no change" ||
		fail "server add repeated" "$out"
	out=$(ctl server add --portal 10.78.5.2 --target ${IQN}5 --lun 1 --size 64M \
		--rack r1 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "server label" &&
		pass "server add with other labels: refused, pointing to 'server label'" ||
		fail "server add with other labels" "$out"
}

case_relabel() {
	local out
	out=$(ctl server label --target ${IQN}7 --lun 1 --rack r9 --site s9 2>&1) &&
		echo "$out" | grep -q "rack r9, site s9): labelled" &&
		[ "$(ctl --json server label --target ${IQN}7 --lun 1 --rack r9 |
			json_get 'j["changed"], j["server"]["rack"]')" = "False r9" ] &&
		pass "server label: changed, then a repeat changes nothing" ||
		fail "server label" "$out"
	for bad in "--host a:b" "--rack r/1" "--host ''" "--site $(printf 'x%.0s' $(seq 64))"; do
		out=$(eval "ctl server label --target ${IQN}7 --lun 1 $bad" 2>&1)
		[ $? -eq 1 ] && echo "$out" | grep -q "A-Za-z0-9" ||
			{ fail "bad label refused: $bad" "$out"; return; }
	done
	out=$(ctl server label --target ${IQN}99 --lun 1 --site s0 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "no server" || { fail "unknown server" "$out"; return; }
	out=$(ctl server label --target ${IQN}7 --lun 1 2>&1)
	[ $? -ne 0 ] || { fail "server label without a label" "$out"; return; }
	ctl server label --target ${IQN}7 --lun 1 --rack r1 --site s1 >/dev/null &&
		pass "bad labels, an unknown server, no label: refused; labels restored" ||
		fail "labels restored"
}

# Every extent of disk $1 (vdisk show --name --json): the replicas' labels
# checked here, and the domain stripe-ctl reports; prints the set of
# domains the extents reach by our own reckoning, then the reported ones.
domains_of() {
	ctl --json vdisk show --name "$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
srv = {s["id"]: s for s in j["servers"]}
ext = {}
for e in j["extents"]:
    ext.setdefault((e["column"], e["extent"]), []).append(e)
mine, theirs = set(), set()
for reps in ext.values():
    s = [srv[e["server"]] for e in reps]
    pairs = [(a, b) for i, a in enumerate(s) for b in s[i + 1:]]
    assert all(a["host"] != b["host"] for a, b in pairs)
    if all(a["site"] != b["site"] for a, b in pairs):
        mine.add("site")
    elif all((a["site"], a["rack"]) != (b["site"], b["rack"]) for a, b in pairs):
        mine.add("rack")
    else:
        mine.add("host")
    theirs |= {e["domain"] for e in reps}
print(",".join(sorted(mine)), ",".join(sorted(theirs)), len(j["spread"]["short"]))
'
}

case_spread() {
	local out
	ctl vdisk create d2 --size 64M --stripes 2 --replicas 2 --stripe-unit 1M \
		-o "$WORK/d2.map" >"$WORK/d2.out" 2>&1 &&
		[ "$(domains_of d2)" = "site site 0" ] &&
		grep -q "16 extents across sites, 0 across racks" "$WORK/d2.out" &&
		pass "R = 2: every extent's replicas in both sites (16 replicas checked)" ||
		fail "R = 2 across sites" "$(cat "$WORK/d2.out"; domains_of d2)"
	ctl vdisk create d3 --size 32M --stripes 2 --replicas 3 --stripe-unit 1M \
		-o "$WORK/d3.map" >/dev/null 2>&1 &&
		[ "$(domains_of d3)" = "rack rack 0" ] &&
		pass "R = 3 over 2 sites: every extent on 3 distinct racks, as wanted" ||
		fail "R = 3 across racks" "$(domains_of d3)"
}

case_site_full() {
	local i out
	for i in 4 5 6 7; do
		ctl server drain --target $IQN$i --lun 1 >/dev/null || { fail "drain s1"; return; }
	done
	ctl vdisk create n1 --size 16M --stripes 1 --replicas 2 --stripe-unit 1M \
		-o "$WORK/n1.map" >"$WORK/n1.out" 2>&1 &&
		[ "$(domains_of n1)" = "rack rack 4" ] &&
		grep -q "extent 3 of column 0: replicas share site s0 (distinct sites wanted; only 1 site had free extents)" "$WORK/n1.out" &&
		pass "site s1 drained: replicas fall back to distinct racks, and vdisk create says so" ||
		fail "site s1 drained" "$(cat "$WORK/n1.out"; domains_of n1)"
	out=$(ctl vdisk show --name n1 2>&1)
	echo "$out" | grep -q "0 extents across sites, 4 across racks" &&
		echo "$out" | grep -q "extent 0 of column 0: replicas share site s0" &&
		[ "$(ctl --json vdisk show --name n1 |
			json_get 'j["spread"]["short"][1]["reached"], j["spread"]["short"][1]["wanted"], j["spread"]["short"][1]["room"], j["spread"]["short"][1]["shared"]')" = "rack site 1 s0" ] &&
		[ "$(ctl --json vdisk create n1 --size 16M --stripes 1 --replicas 2 \
			--stripe-unit 1M -o "$WORK/n1.map" |
			json_get 'j["changed"], len(j["spread"]["short"])')" = "False 4" ] &&
		pass "vdisk show --name and --json report the 4 extents left in one site" ||
		fail "vdisk show reports the shortfall" "$out"
}

case_clash() {
	local out id partner
	# a server of d2 and the host of the other replica of its first extent
	read -r id partner < <(ctl --json vdisk show --name d2 | json_get \
		'j["extents"][0]["server"], [s["host"] for s in j["servers"] if s["id"] == j["extents"][1]["server"]][0]')
	out=$(ctl server label --target "$IQN$((id - 1))" --lun 1 --host "$partner" 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "share a host" &&
		pass "a relabel that would put two replicas on one host: refused" ||
		fail "relabel clash refused" "$out"
}

case_check() {
	local out status
	stop_master TERM
	status=$?
	out=$(check_master 2>&1) && [ "$status" -eq 0 ] &&
		pass "SIGTERM: exit 0; stripe-master --check: labels and spread notes consistent" ||
		fail "stripe-master --check" "exit $status: $out"
}

start_master --allow 127.0.0.1 || { echo "FAIL: the master did not start"; exit 1; }
case_add
case_relabel
case_spread
case_site_full
case_clash
case_check

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
