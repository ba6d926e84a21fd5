#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-etcd-snapshot.sh - the etcd store's snapshots and the migration
# between the back ends (issue #23), against a real 3-member etcd cluster
# on loopback (tests/lab/etcd-lib.sh):
#  - compaction: a master with --compact-every 5 writes snapshots and cuts
#    the log; a master started afterwards loads the newest snapshot, then
#    replays the log, and serves the same state; two masters compacting
#    under concurrent load agree, and every replica checks clean;
#  - kill -9 of a master that snapshots after every round (in the middle
#    of writing one, now and then) and a snapshot's chunks left without a
#    pointer leave a store that a new master opens;
#  - migration: a SQLite store with servers, disks and leases moved into
#    etcd (stripe-master --migrate to-etcd) is served alike by an etcd
#    master (stripe-ctl --json listings compared), then moved back into a
#    new SQLite file (--migrate to-sqlite) alike again; kill -9 of either
#    migration at various instants, then a run again, finishes; bad input
#    (a cluster with state, a target file that exists, etcd down, a
#    cluster that does not exist, a store in use) is refused clearly; a
#    store of 30,720 extents (a 1.4 MiB snapshot, above etcd's request
#    limit: 2 chunks) moved and snapshotted alike.
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without etcd
# (apt-get install etcd-server) or python3.  Stops only what it started,
# by PID.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
MASTER_LIB_WORK=master-etcd-snap
MASTER_STORE=etcd # 3 etcd members, started and stopped by master-lib.sh
MASTER_ETCD_MEMBERS=3
# shellcheck source=tests/integration/master-lib.sh
. "$top/tests/integration/master-lib.sh"

PID_A=
PID_B=
cleanup() {
	local pid
	for pid in $PID_A $PID_B; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	master_lib_cleanup
}
trap cleanup EXIT

PORT_B=$(free_port)
ADDR_A=$ADDR
ADDR_B=127.0.0.1:$PORT_B

ctl_a() { "$CTL_BIN" --master "$ADDR_A" "$@"; }
ctl_b() { "$CTL_BIN" --master "$ADDR_B" "$@"; }

# master NAME ADDR URL [OPTIONS]: a master on the store URL (none: SQLite
# alone), its file $WORK/NAME.db
master() {
	local name=$1 addr=$2 url=$3
	shift 3
	"$MASTER_BIN" --foreground --db "$WORK/$name.db" --listen "$addr" \
		--extent-size 4M ${url:+--store "$url"} \
		--log-file "$WORK/$name.log" "$@" &
}

start_a() { # NAME URL [OPTIONS]
	master "$1" "$ADDR_A" "${@:2}"
	PID_A=$!
	wait_master "$ADDR_A"
}

start_b() {
	master "$1" "$ADDR_B" "${@:2}"
	PID_B=$!
	wait_master "$ADDR_B"
}

stop_a() {
	[ -n "$PID_A" ] && kill -TERM "$PID_A" 2>/dev/null && wait "$PID_A" 2>/dev/null
	PID_A=
}

stop_b() {
	[ -n "$PID_B" ] && kill -TERM "$PID_B" 2>/dev/null && wait "$PID_B" 2>/dev/null
	PID_B=
}

# Everything a master serves, as stripe-ctl --json lists it.
listing() { # ctl function
	{
		"$1" --json server list
		"$1" --json vdisk list
		"$1" --json extents list --allocated
		"$1" --json host list
		for d in m1 m2 m3; do
			"$1" --json vdisk lease show "$d" 2>&1
		done
		"$1" --json info | json_get '{k: v for k, v in j.items() if k != "master"}'
	} 2>&1
}

# The count of keys under /tapstripe/CLUSTER/PART (etcd's JSON gateway).
etcd_count() { # CLUSTER PART
	python3 - "${ETCD_URLS[0]}" "/tapstripe/$1/$2" <<'PY'
import base64, json, sys, urllib.request
def b(s): return base64.b64encode(s.encode()).decode()
key = sys.argv[2]
end = key[:-1] + chr(ord(key[-1]) + 1)
req = urllib.request.Request(sys.argv[1] + "/v3/kv/range",
    data=json.dumps({"key": b(key), "range_end": b(end), "count_only": True}).encode())
print(json.load(urllib.request.urlopen(req, timeout=5)).get("count", 0))
PY
}

# Put KEY VALUE under /tapstripe/.
etcd_put() {
	python3 - "${ETCD_URLS[0]}" "/tapstripe/$1" "$2" <<'PY'
import base64, json, sys, urllib.request
def b(s): return base64.b64encode(s.encode()).decode()
req = urllib.request.Request(sys.argv[1] + "/v3/kv/put",
    data=json.dumps({"key": b(sys.argv[2]), "value": b(sys.argv[3])}).encode())
urllib.request.urlopen(req, timeout=5).read()
PY
}

check() { # NAME URL
	"$MASTER_BIN" --check --db "$WORK/$1.db" --extent-size 4M \
		${2:+--store "$2"} 2>&1
}

servers() { # ctl function, first
	local i
	for i in 1 2 3 4; do
		"$1" server add --portal 10.77.$i.2 --target iqn.2024-01.org.tapstripe:srv$i \
			--lun 1 --size 4G --host h$i >/dev/null || return 1
	done
}

# load CTL PREFIX N: create N disks, destroy every third; failures on stdout.
load() {
	local ctl=$1 prefix=$2 n=$3 i bad=0
	for i in $(seq "$n"); do
		"$ctl" vdisk create "$prefix$i" --size 16M --stripes 2 \
			--replicas 2 -o "$WORK/$prefix$i.map" >/dev/null 2>&1 ||
			bad=$((bad + 1))
		if [ $((i % 3)) = 0 ]; then
			"$ctl" vdisk destroy --name "$prefix$i" >/dev/null 2>&1 ||
				bad=$((bad + 1))
		fi
	done
	echo "$bad"
}

state() { "$1" info --json | json_get 'j["vdisks"], j["free_extents"]'; }

# --- compaction --------------------------------------------------------------------

case_compact() {
	local url=$URL_BASE/c1 out
	start_a a1 "$url" --compact-every 5 || { fail "a master on c1" "$(tail -3 "$WORK/a1.log")"; return; }
	servers ctl_a || { fail "servers on c1"; return; }
	out=$(load ctl_a d 12)
	[ "$out" = 0 ] || fail "12 creates on c1" "$out failed"
	out=$(etcd_count c1 log/)
	[ "$(etcd_count c1 snap)" -ge 2 ] && [ "$out" -lt 5 ] &&
		grep -q "snapshot .* written" "$WORK/a1.log" &&
		pass "a master with --compact-every 5 writes snapshots and cuts the log ($out entries left)" ||
		fail "a master with --compact-every 5 writes snapshots and cuts the log" "$out log entries"
	start_b b1 "$url" || { fail "a master started after compaction" "$(tail -3 "$WORK/b1.log")"; return; }
	grep -q "loaded the snapshot" "$WORK/b1.log" && [ "$(state ctl_a)" = "$(state ctl_b)" ] &&
		[ "$(listing ctl_a)" = "$(listing ctl_b)" ] &&
		pass "a master started after compaction loads the snapshot, replays the log, serves the same state" ||
		fail "a master started after compaction loads the snapshot and catches up" "A $(state ctl_a), B $(state ctl_b)"
	stop_b
	# B fell behind a compaction while stopped.
	out=$(load ctl_a e 9)
	start_b b1 "$url" --compact-every 3 || { fail "B starts again behind a compaction"; return; }
	[ "$(listing ctl_a)" = "$(listing ctl_b)" ] &&
		pass "a master that fell behind a compaction catches up through the snapshot" ||
		fail "a master that fell behind a compaction catches up through the snapshot"
	# A, running and idle, falls behind B's compactions.
	out=$(load ctl_b f 7)
	ctl_a vdisk show --name f7 >/dev/null 2>&1 &&
		grep -q "a1.db: loaded the snapshot" "$WORK/a1.log" &&
		[ "$(listing ctl_a)" = "$(listing ctl_b)" ] &&
		pass "a running master that fell behind the other's compaction loads its snapshot" ||
		fail "a running master that fell behind the other's compaction loads its snapshot" "$out; $(grep -c snapshot "$WORK/a1.log")"
	# Both compacting under concurrent load.
	load ctl_a ra 15 >"$WORK/load-a" &
	local la=$!
	load ctl_b rb 15 >"$WORK/load-b" &
	local lb=$!
	wait $la
	wait $lb
	[ "$(cat "$WORK/load-a") $(cat "$WORK/load-b")" = "0 0" ] &&
		[ "$(listing ctl_a)" = "$(listing ctl_b)" ] &&
		grep -q "snapshot .* written" "$WORK/b1.log" &&
		pass "two masters compacting under concurrent load: every call succeeds, they agree" ||
		fail "two masters compacting under concurrent load" "$(cat "$WORK/load-a") $(cat "$WORK/load-b") failed"
	stop_a
	stop_b
	for name in a1 b1 fresh1; do
		out=$(check $name "$url") && grep -q consistent <<<"$out" &&
			pass "consistency check of replica $name after compactions" ||
			fail "consistency check of replica $name after compactions" "$out"
	done
}

# kill -9 while snapshots are written; chunks without a pointer.
case_compact_kill() {
	local url=$URL_BASE/c2 out i
	start_a a2 "$url" --compact-every 1 || { fail "a master on c2"; return; }
	servers ctl_a || { fail "servers on c2"; return; }
	for i in 1 2 3; do
		load ctl_a k$i 6 >/dev/null &
		local l=$!
		sleep 0.$((3 * i))
		kill -KILL "$PID_A"
		wait "$PID_A" 2>/dev/null
		wait $l 2>/dev/null
		start_a a2 "$url" --compact-every 1 ||
			{ fail "the master starts again after kill -9 while snapshotting ($i)" "$(tail -3 "$WORK/a2.log")"; return; }
	done
	pass "kill -9 of a master snapshotting after every round, 3 times: it starts again each time"
	# What a writer killed between its chunks and its switch leaves: the
	# chunks of a snapshot no pointer names.
	etcd_put "c2/snap/00000000000000000002-00000000deadbeef/000000" garbage
	stop_a
	start_b b2 "$url" --compact-every 1 ||
		{ fail "a new master beside a snapshot left unfinished" "$(tail -3 "$WORK/b2.log")"; return; }
	ctl_b vdisk create after --size 16M --stripes 2 -o "$WORK/after.map" >/dev/null
	out=$(check fresh2 "$url") && grep -q consistent <<<"$out" &&
		[ "$(etcd_count c2 snap/00000000000000000002-00000000deadbeef/)" = 0 ] &&
		pass "a snapshot's chunks without a pointer: a new master opens the store, the next compaction deletes them" ||
		fail "a snapshot's chunks without a pointer: a new master opens the store, the next compaction deletes them" "$out"
	stop_b
}

# --- migration -----------------------------------------------------------------------

# A SQLite store with servers, disks and leases: $WORK/src.db
make_sqlite() {
	local out
	start_a src "" || { fail "a SQLite master"; return 1; }
	servers ctl_a || return 1
	for d in m1 m2 m3; do
		ctl_a vdisk create $d --size 32M --stripes 2 --replicas 2 -o "$WORK/$d.map" >/dev/null || return 1
	done
	ctl_a vdisk lease acquire m1 --host-id hostA >/dev/null &&
		ctl_a vdisk lease acquire m2 --host-id hostB >/dev/null &&
		ctl_a vdisk lease handover m2 --to hostC --host-id hostB >/dev/null || return 1
	listing ctl_a >"$WORK/src.listing"
	stop_a
}

migrate() { "$MASTER_BIN" --migrate "$@" 2>&1; }

case_migrate() {
	local url=$URL_BASE/m1 out
	make_sqlite || { fail "a SQLite store with servers, disks, leases"; return; }
	out=$(migrate to-etcd --db "$WORK/src.db" --store "$url") &&
		grep -q "moved .* into $url as cluster id [0-9a-f]*.*both sides consistent" <<<"$out" &&
		pass "--migrate to-etcd moves a SQLite store, both sides consistent" ||
		{ fail "--migrate to-etcd" "$out"; return; }
	start_a e1 "$url" || { fail "an etcd master on the moved store" "$(tail -3 "$WORK/e1.log")"; return; }
	[ "$(listing ctl_a)" = "$(cat "$WORK/src.listing")" ] &&
		pass "an etcd master serves what the SQLite master served (stripe-ctl --json)" ||
		fail "an etcd master serves what the SQLite master served" "$(diff <(listing ctl_a) "$WORK/src.listing" | head -5)"
	# It works on it: a change, then back.
	ctl_a vdisk create m4 --size 16M --stripes 2 --replicas 2 -o "$WORK/m4.map" >/dev/null
	listing ctl_a >"$WORK/e1.listing"
	stop_a
	out=$(migrate to-sqlite --store "$url" --db "$WORK/back.db") &&
		grep -q "moved cluster id .* into the SQLite store .*back.db; both sides consistent" <<<"$out" &&
		pass "--migrate to-sqlite copies the cluster into a new SQLite file" ||
		{ fail "--migrate to-sqlite" "$out"; return; }
	start_a back "" || { fail "a SQLite master on the file moved back"; return; }
	[ "$(listing ctl_a)" = "$(cat "$WORK/e1.listing")" ] &&
		pass "the SQLite master serves what the etcd master served" ||
		fail "the SQLite master serves what the etcd master served" "$(diff <(listing ctl_a) "$WORK/e1.listing" | head -5)"
	out=$(migrate to-sqlite --store "$url" --db "$WORK/back.db")
	[ $? = 1 ] && grep -q "back.db is in use by a stripe-master" <<<"$out" ||
		out=$(migrate to-sqlite --store "$url" --db "$WORK/back.db" --force)
	[ $? = 1 ] && grep -q "in use by a stripe-master\|exists: give the path of a new file" <<<"$out" &&
		pass "--migrate to-sqlite refuses a file that exists or is in use" ||
		fail "--migrate to-sqlite refuses a file that exists or is in use" "$out"
	out=$(migrate to-etcd --db "$WORK/back.db" --store "$URL_BASE/m9")
	[ $? = 1 ] && grep -q "in use by another stripe-master" <<<"$out" &&
		pass "--migrate to-etcd refuses a store a master serves" ||
		fail "--migrate to-etcd refuses a store a master serves" "$out"
	stop_a
	out=$(migrate to-sqlite --store "$url" --db "$WORK/back.db")
	[ $? = 1 ] && grep -q "back.db exists: give the path of a new file, or --force" <<<"$out" &&
		pass "--migrate to-sqlite refuses a file that exists" ||
		fail "--migrate to-sqlite refuses a file that exists" "$out"
	out=$(migrate to-etcd --db "$WORK/src.db" --store "$url") &&
		grep -q "already moved" <<<"$out" &&
		pass "--migrate to-etcd again: already done, says so" ||
		fail "--migrate to-etcd again: already done" "$out"
	out=$(migrate to-etcd --db "$WORK/back.db" --store "$url")
	[ $? = 1 ] && grep -q "already holds a cluster (id [0-9a-f]*, at log entry [0-9]*): give a CLUSTER name that is new, or --force" <<<"$out" &&
		pass "--migrate to-etcd refuses a cluster with state" ||
		fail "--migrate to-etcd refuses a cluster with state" "$out"
	out=$(migrate to-etcd --db "$WORK/back.db" --store "$url" --force) &&
		grep -q "moved" <<<"$out" &&
		pass "--migrate to-etcd --force replaces a cluster's state" ||
		fail "--migrate to-etcd --force replaces a cluster's state" "$out"
	out=$(migrate to-sqlite --store "$URL_BASE/nosuch" --db "$WORK/none.db")
	[ $? = 1 ] && grep -q "holds no cluster" <<<"$out" && [ ! -e "$WORK/none.db" ] &&
		pass "--migrate to-sqlite of a cluster that does not exist is refused" ||
		fail "--migrate to-sqlite of a cluster that does not exist" "$out"
	out=$(migrate to-etcd --db "$WORK/nosuch.db" --store "$url")
	[ $? = 1 ] && grep -q "no SQLite store at" <<<"$out" &&
		pass "--migrate to-etcd of a missing file is refused" ||
		fail "--migrate to-etcd of a missing file" "$out"
	out=$(migrate to-etcd --db "$WORK/e1.db" --store "$URL_BASE/m8")
	[ $? = 1 ] && grep -q "replica of an etcd store, not a SQLite store" <<<"$out" &&
		pass "--migrate to-etcd of a replica is refused" ||
		fail "--migrate to-etcd of a replica" "$out"
	out=$(migrate to-etcd --db "$WORK/src.db" --store "etcd://127.0.0.1:$(free_port)/m1")
	[ $? = 1 ] && grep -q "cannot reach the store.*start etcd" <<<"$out" &&
		pass "--migrate with etcd down: a clear error" ||
		fail "--migrate with etcd down" "$out"
	out=$("$MASTER_BIN" --migrate to-etcd --db "$WORK/src.db" 2>&1)
	[ $? = 2 ] && grep -q "wants --store" <<<"$out" &&
		pass "--migrate without --store is a usage error" ||
		fail "--migrate without --store is a usage error" "$out"
}

# kill -9 of a migration at several instants, then a run again.
case_migrate_kill() {
	local i out ok=0 url
	for i in 1 2 3 4 5 6; do
		url=$URL_BASE/k$i
		"$MASTER_BIN" --migrate to-etcd --db "$WORK/src.db" --store "$url" >/dev/null 2>&1 &
		local p=$!
		sleep "0.0$((i * 15 / 10))"
		kill -KILL $p 2>/dev/null
		wait $p 2>/dev/null
		out=$(migrate to-etcd --db "$WORK/src.db" --store "$url") || { echo "$out"; continue; }
		start_a kk$i "$url" || continue
		[ "$(listing ctl_a)" = "$(cat "$WORK/src.listing")" ] && ok=$((ok + 1))
		stop_a
		rm -f "$WORK/back$i.db"
		"$MASTER_BIN" --migrate to-sqlite --store "$url" --db "$WORK/back$i.db" >/dev/null 2>&1 &
		p=$!
		sleep "0.0$((i * 15 / 10))"
		kill -KILL $p 2>/dev/null
		wait $p 2>/dev/null
		# Killed after its rename, the file is whole: --force replaces it.
		migrate to-sqlite --store "$url" --db "$WORK/back$i.db" --force >/dev/null || continue
		start_a back$i "" || continue
		[ "$(listing ctl_a)" = "$(cat "$WORK/src.listing")" ] && ok=$((ok + 1))
		stop_a
	done
	[ $ok = 12 ] &&
		pass "kill -9 of --migrate to-etcd and to-sqlite at 6 instants each: a run again finishes" ||
		fail "kill -9 of --migrate, then a run again" "$ok of 12"
}

# A snapshot above etcd's request limit: 30,720 extents allocated, a
# 1.4 MiB image in 2 chunks.
big_state() { # ctl function
	"$1" --json info | json_get '{k: v for k, v in j.items() if k != "master"}'
	"$1" --json extents list --allocated | md5sum
}

case_migrate_large() {
	local url=$URL_BASE/big out d
	start_a big "" || { fail "a SQLite master (large)"; return; }
	for d in 1 2 3 4; do
		ctl_a server add --portal 10.78.$d.2 --target iqn.2024-01.org.tapstripe:big$d \
			--lun 1 --size 64G --host h$d >/dev/null || { fail "large servers"; return; }
	done
	for d in 1 2 3; do
		ctl_a vdisk create big$d --size 40G --stripes 4 --replicas 1 -o "$WORK/big$d.map" >/dev/null ||
			{ fail "large disks"; return; }
	done
	big_state ctl_a >"$WORK/big.state"
	stop_a
	out=$(migrate to-etcd --db "$WORK/big.db" --store "$url") ||
		{ fail "--migrate to-etcd of 30,720 extents" "$out"; return; }
	start_a bige "$url" --compact-every 1 || { fail "an etcd master on the large store"; return; }
	ctl_a vdisk create small --size 16M --stripes 2 -o "$WORK/small.map" >/dev/null
	ctl_a vdisk destroy --name small >/dev/null
	[ "$(big_state ctl_a)" = "$(cat "$WORK/big.state")" ] &&
		grep -q "snapshot .* written ([0-9]* bytes in [2-9] chunks" "$WORK/bige.log" &&
		pass "30,720 extents moved into etcd, served alike; its snapshots written in chunks" ||
		fail "30,720 extents moved into etcd, served alike, snapshots in chunks" "$(grep "written" "$WORK/bige.log")"
	stop_a
	out=$(check bigfresh "$url") && grep -q consistent <<<"$out" &&
		pass "a fresh replica loads a snapshot of several chunks and checks clean" ||
		fail "a fresh replica loads a snapshot of several chunks" "$out"
}

EPS=$ETCD_EPS
URL_BASE=etcd://$EPS
case_compact
case_compact_kill
case_migrate
case_migrate_kill
case_migrate_large

echo "master-etcd-snapshot: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
