#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-etcd.sh - two stripe-master processes on one etcd store (issue
# #23, `stripe-master --store etcd://HOSTS/CLUSTER`), each with a local
# replica of its own, against a real 3-member etcd cluster on loopback
# (tests/lab/etcd-lib.sh): what one master does is seen through the other;
# concurrent allocations through both never give an extent twice (the
# consistency check on both replicas and on a fresh one); kill -9 of one
# master under load leaves the other serving, and the killed one catches
# up when it starts again; an allocation too large for one etcd request
# is refused and changes nothing; bad input (etcd down at start, a malformed
# --store, a replica of another cluster, another extent size, a SQLite
# store's file) is refused with a clear error.
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without etcd
# (apt-get install etcd-server) or python3.  Stops only what it started,
# by PID.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
MASTER_LIB_WORK=master-etcd
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

# master NAME ADDR [OPTIONS]: a master on the store, replica $WORK/NAME.db
master() {
	local name=$1 addr=$2
	shift 2
	"$MASTER_BIN" --foreground --db "$WORK/$name.db" --listen "$addr" \
		--extent-size 4M --store "$URL" --log-file "$WORK/$name.log" "$@" &
}

start_a() {
	master a "$ADDR_A"
	PID_A=$!
	wait_master "$ADDR_A"
}

start_b() {
	master b "$ADDR_B"
	PID_B=$!
	wait_master "$ADDR_B"
}

stop_one() { # PID
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# Everything a master says of the store, for comparing two of them.
state() { # ctl function
	"$1" info --json | json_get 'j["vdisks"], j["free_extents"]'
}

# check NAME: the consistency check of replica NAME, caught up first.
check() {
	"$MASTER_BIN" --check --db "$WORK/$1.db" --extent-size 4M \
		--store "$URL" 2>&1
}

# load CTL PREFIX N: create N disks, destroy every third; the count of
# failed calls on stdout.
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

# --- bad input before etcd runs ----------------------------------------------

case_etcd_down() {
	local out dead
	dead=$(free_port)
	out=$("$MASTER_BIN" --foreground --db "$WORK/down.db" --listen "$ADDR_A" \
		--store "etcd://127.0.0.1:$dead/c1" 2>&1)
	[ $? = 1 ] && grep -q "cannot reach the store etcd://127.0.0.1:$dead/c1" <<<"$out" &&
		grep -q "start etcd" <<<"$out" &&
		pass "etcd down at start: a clear error" ||
		fail "etcd down at start: a clear error" "$out"
	out=$("$MASTER_BIN" --foreground --db "$WORK/down.db" --store "etcd://127.0.0.1:1" 2>&1)
	[ $? = 1 ] && grep -q "is not etcd://HOST:PORT" <<<"$out" &&
		pass "a --store without CLUSTER is refused" ||
		fail "a --store without CLUSTER is refused" "$out"
	out=$("$MASTER_BIN" --foreground --db "$WORK/down.db" --store "http://127.0.0.1:1/c" 2>&1)
	[ $? = 2 ] && grep -q "wants etcd://" <<<"$out" &&
		pass "a --store of another scheme is a usage error" ||
		fail "a --store of another scheme is a usage error" "$out"
}

# --- two masters ---------------------------------------------------------------

case_shared() {
	local i out
	for i in 1 2 3 4; do
		ctl_a server add --portal 10.77.$i.2 --target iqn.2024-01.org.tapstripe:srv$i \
			--lun 1 --size 4G >/dev/null || { fail "servers through A" "server $i"; return; }
	done
	[ "$(ctl_b server list --json | json_get 'len(j)')" = 4 ] &&
		pass "4 servers added through A are listed by B" ||
		fail "4 servers added through A are listed by B"
	out=$(ctl_b vdisk create s1 --size 64M --stripes 2 --replicas 2 -o "$WORK/s1.map" 2>&1) ||
		{ fail "a disk created through B" "$out"; return; }
	out=$(ctl_a extents list --allocated --json 2>&1 | json_get 'sum(e["vdisk"] == "s1" for e in j)' 2>&1)
	[ "$out" = 32 ] &&
		pass "a disk created through B is listed by A" ||
		fail "a disk created through B is listed by A" "$out extents"
	# The same call through the other master is a repeat, not a new disk.
	out=$(ctl_a vdisk create s1 --size 64M --stripes 2 --replicas 2 -o "$WORK/s1b.map" 2>&1) &&
		grep -q "allocated before: the same extents" <<<"$out" &&
		pass "repeating the create through A answers B's disk" ||
		fail "repeating the create through A answers B's disk" "$out"
	# A call that fails part-way is rolled back to its savepoint: none
	# of its rows may reach the log.
	out=$(ctl_a vdisk create big --size 64G --stripes 4 --replicas 2 -o "$WORK/big.map" 2>&1)
	[ $? != 0 ] && [ "$(state ctl_a)" = "$(state ctl_b)" ] &&
		[ "$(ctl_b info --json | json_get 'j["vdisks"]')" = 1 ] &&
		pass "a create refused part-way leaves nothing in the log" ||
		fail "a create refused part-way leaves nothing in the log" "$out; A $(state ctl_a), B $(state ctl_b)"
}

case_concurrent() {
	local bad_a bad_b out
	load ctl_a ca 30 >"$WORK/load-a" &
	local la=$!
	load ctl_b cb 30 >"$WORK/load-b" &
	local lb=$!
	wait $la
	wait $lb
	bad_a=$(cat "$WORK/load-a")
	bad_b=$(cat "$WORK/load-b")
	[ "$bad_a" = 0 ] && [ "$bad_b" = 0 ] &&
		pass "60 creates and 20 destroys through A and B at once all succeed" ||
		fail "60 creates and 20 destroys through A and B at once all succeed" \
			"failed: $bad_a through A, $bad_b through B"
	[ "$(state ctl_a)" = "$(state ctl_b)" ] &&
		[ "$(ctl_a info --json | json_get 'j["vdisks"]')" = 41 ] &&
		pass "A and B agree: 41 disks, the same free extents" ||
		fail "A and B agree: 41 disks, the same free extents" "A $(state ctl_a), B $(state ctl_b)"
	# No extent twice across the disks, as B reports them.
	out=$(ctl_b extents list --allocated --json | json_get \
		'len(j) == len({(e["server"], e["index"]) for e in j})' 2>&1)
	[ "$out" = True ] && pass "no extent listed twice" || fail "no extent listed twice" "$out"
}

case_kill() {
	local bad_b out
	load ctl_a ka 40 >/dev/null &
	local la=$!
	OTHER_PIDS="$OTHER_PIDS $la"
	load ctl_b kb 20 >"$WORK/load-kb" &
	local lb=$!
	sleep 1
	kill -KILL "$PID_A"
	wait "$PID_A" 2>/dev/null
	PID_A=
	wait $lb
	wait $la 2>/dev/null
	bad_b=$(cat "$WORK/load-kb")
	[ "$bad_b" = 0 ] && ctl_b vdisk show --name kb20 >/dev/null 2>&1 &&
		pass "kill -9 of A under load: B keeps serving" ||
		fail "kill -9 of A under load: B keeps serving" "$bad_b calls failed through B"
	start_a || { fail "A starts again after kill -9" "$(tail -3 "$WORK/a.log")"; return; }
	[ "$(state ctl_a)" = "$(state ctl_b)" ] &&
		pass "A starts again and catches up with B" ||
		fail "A starts again and catches up with B" "A $(state ctl_a), B $(state ctl_b)"
}

# A round whose changeset etcd refuses (above its --max-request-bytes)
# fails with what to do, and changes nothing.
case_too_large() {
	local i out
	for i in 5 6 7 8; do
		ctl_b server add --portal 10.77.$i.2 --target iqn.2024-01.org.tapstripe:srv$i \
			--lun 1 --size 64G >/dev/null || { fail "large servers through B" "server $i"; return; }
	done
	out=$(ctl_a vdisk create huge --size 64G --stripes 4 --replicas 2 -o "$WORK/huge.map" 2>&1)
	[ $? != 0 ] && grep -q "etcd refused the changes" <<<"$out" &&
		[ "$(state ctl_a)" = "$(state ctl_b)" ] &&
		! ctl_b vdisk show --name huge >/dev/null 2>&1 &&
		pass "an allocation too large for one etcd request is refused, nothing changed" ||
		fail "an allocation too large for one etcd request is refused, nothing changed" "$out"
}

case_check() {
	local out name
	stop_one "$PID_A"
	stop_one "$PID_B"
	PID_A=
	PID_B=
	for name in a b fresh; do
		out=$(check $name) && grep -q "consistent" <<<"$out" &&
			pass "consistency check of replica $name" ||
			fail "consistency check of replica $name" "$out"
	done
}

# --- bad input with etcd up ------------------------------------------------------

case_refusals() {
	local out
	out=$("$MASTER_BIN" --check --db "$WORK/a.db" --extent-size 4M \
		--store "etcd://${EPS}/other" 2>&1)
	[ $? = 1 ] && grep -q "a.db is a replica of the cluster with id [0-9a-f]*, but the store etcd://.*/other has id [0-9a-f]*" <<<"$out" &&
		pass "a replica of another cluster is refused, naming both ids" ||
		fail "a replica of another cluster is refused, naming both ids" "$out"
	out=$("$MASTER_BIN" --check --db "$WORK/e8.db" --extent-size 8M --store "$URL" 2>&1)
	[ $? = 1 ] && grep -q "has extents of 4194304 bytes" <<<"$out" &&
		pass "another extent size is refused" ||
		fail "another extent size is refused" "$out"
	"$MASTER_BIN" --foreground --db "$WORK/sqlite.db" --listen "$ADDR_A" \
		--extent-size 4M --log-file "$WORK/sqlite.log" &
	PID_A=$!
	wait_master "$ADDR_A" && ctl_a server add --portal 10.77.9.2 --target iqn.x:s9 \
		--lun 1 --size 1G >/dev/null
	stop_one "$PID_A"
	PID_A=
	out=$("$MASTER_BIN" --check --db "$WORK/sqlite.db" --extent-size 4M --store "$URL" 2>&1)
	[ $? = 1 ] && grep -q "holds a SQLite store's state" <<<"$out" &&
		pass "a SQLite store's file is not taken as a replica" ||
		fail "a SQLite store's file is not taken as a replica" "$out"
}

case_etcd_down
EPS=$ETCD_EPS
URL=etcd://$EPS/t1
if start_a && start_b; then
	case_shared
	case_concurrent
	case_kill
	case_too_large
	case_check
	case_refusals
else
	fail "two masters start on the store" "$(tail -3 "$WORK"/*.log)"
fi

echo "master-etcd: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
