#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-etcd-crash.sh - kill -9 of a stripe-master on an etcd store (issue
# #23) while its group commit is in flight: 4 clients create disks through
# one master (so its rounds carry several calls in one etcd txn), which is
# killed 4 times under that load, twice while every etcd member is stopped
# (SIGSTOP), so that the round's txn is surely sent and unanswered when the
# master dies; it is started again each time and the clients retry what
# got no answer.  Then every create that was answered is there, none twice
# (each name one disk of its own extents, the free extents what the disks
# leave), and the consistency check is clean on the master's replica and
# on a fresh one.
#
#   BUILDDIR=$PWD/build tests/integration/master-etcd-crash.sh
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without etcd
# (apt-get install etcd-server) or python3.  Stops only what it started,
# by PID.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
MASTER_LIB_WORK=master-etcd-crash
# shellcheck source=tests/integration/master-lib.sh
. "$top/tests/integration/master-lib.sh"
# shellcheck source=tests/lab/etcd-lib.sh
. "$top/tests/lab/etcd-lib.sh"

if ! etcd_lib_have; then
	echo "SKIP: etcd not found (apt-get install etcd-server)"
	exit 77
fi

CLIENTS=4
PER_CLIENT=100
EXTENTS_PER_DISK=8 # 16M in 4M extents (2 columns of 2) x 2 replicas
SERVER_EXTENTS=1024 # 4G in 4M extents
WRITERS=

cleanup() {
	local pid
	for pid in "${ETCD_PIDS[@]}"; do
		[ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null
	done
	for pid in $WRITERS; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	etcd_cluster_stop
	master_lib_cleanup
}
trap cleanup EXIT

start() {
	start_master --store "$URL"
}

# writer K: create wK-1..wK-N in turn, each retried (0.2 s apart, 60 s at
# most) until answered; an answered name goes to $WORK/acked.K, and to
# $WORK/again.K when a retry found it done (its first try committed, but
# its answer was lost with the master).
writer() {
	local k=$1 i n out
	for i in $(seq "$PER_CLIENT"); do
		for n in $(seq 300); do
			out=$("$CTL_BIN" --master "$ADDR" --timeout 2 --retries 0 \
				vdisk create "w$k-$i" --size 16M --stripes 2 \
				--replicas 2 -o "$WORK/w$k-$i.map" 2>&1) && break
			[ "$n" = 300 ] && return 1
			sleep 0.2
		done
		echo "w$k-$i" >>"$WORK/acked.$k"
		if grep -q "allocated before" <<<"$out"; then
			echo "w$k-$i" >>"$WORK/again.$k"
		fi
	done
}

etcd_signal() { # SIGNAL: every member
	local pid
	for pid in "${ETCD_PIDS[@]}"; do
		kill -"$1" "$pid"
	done
}

# crash FREEZE: kill -9 of the master under load (FREEZE 1: while etcd is
# stopped, its round's txn sent and unanswered), then start it again; 1
# when no writer was left to load it.
crash() {
	local pid busy=0
	sleep 0.5
	for pid in $WRITERS; do
		kill -0 "$pid" 2>/dev/null && busy=1
	done
	[ "$busy" = 1 ] || return 1
	if [ "$1" = 1 ]; then
		etcd_signal STOP
		sleep 0.3
	fi
	stop_master KILL
	[ "$1" = 1 ] && etcd_signal CONT
	start
	return 0
}

case_crashes() {
	local k pid ok=1 acked kills=0
	for k in $(seq "$CLIENTS"); do
		writer "$k" &
		WRITERS="$WRITERS $!"
	done
	for k in 0 1 0 1; do
		crash "$k" && wait_master "$ADDR" && kills=$((kills + 1))
	done
	[ "$kills" = 4 ] ||
		{ fail "4 kill -9 under load, the master started again each time" "$kills; $(tail -3 "$LOG")"; return 1; }
	for pid in $WRITERS; do
		wait "$pid" || ok=0
	done
	WRITERS=
	acked=$(cat "$WORK"/acked.* 2>/dev/null | wc -l)
	[ "$ok" = 1 ] && [ "$acked" = $((CLIENTS * PER_CLIENT)) ] &&
		pass "4 kill -9 of the master under 4 clients (2 with etcd stopped): every create answered after retries" ||
		fail "every create answered after retries" "$acked of $((CLIENTS * PER_CLIENT))"
}

# Every answered name is one disk; no extent twice; nothing leaked.
case_after() {
	local out disks
	out=$(ctl vdisk list --json | json_get 'sorted(d["vdisk"] for d in j)' 2>&1)
	disks=$(cat "$WORK"/acked.* | sort | python3 -c 'import sys; print(sorted(l.strip() for l in sys.stdin))')
	[ "$out" = "$disks" ] &&
		pass "every answered create is there, and nothing else ($(cat "$WORK"/again.* 2>/dev/null | wc -l) answered on a retry as done: their first try committed, its answer lost)" ||
		fail "every answered create is there, and nothing else" "listed $(wc -w <<<"$out"), answered $(wc -w <<<"$disks")"
	out=$(ctl extents list --allocated --json | json_get \
		'len(j), len({(e["server"], e["index"]) for e in j}), sorted(set(__import__("collections").Counter(e["vdisk"] for e in j).values()))' 2>&1)
	[ "$out" = "$((CLIENTS * PER_CLIENT * EXTENTS_PER_DISK)) $((CLIENTS * PER_CLIENT * EXTENTS_PER_DISK)) [$EXTENTS_PER_DISK]" ] &&
		pass "each disk holds its $EXTENTS_PER_DISK extents, none twice" ||
		fail "each disk holds its $EXTENTS_PER_DISK extents, none twice" "$out"
	out=$(ctl info --json | json_get 'j["free_extents"]' 2>&1)
	[ "$out" = $((4 * SERVER_EXTENTS - CLIENTS * PER_CLIENT * EXTENTS_PER_DISK)) ] &&
		pass "the free extents are what the disks leave" ||
		fail "the free extents are what the disks leave" "$out free"
	stop_master
	for db in "$DB" "$WORK/fresh.db"; do
		out=$("$MASTER_BIN" --check --db "$db" --extent-size 4M --store "$URL" 2>&1) &&
			grep -q "consistent" <<<"$out" &&
			pass "consistency check of $(basename "$db")" ||
			fail "consistency check of $(basename "$db")" "$out"
	done
}

etcd_cluster_start "$WORK" 3 || {
	fail "start 3 etcd members"
	exit 1
}
URL=etcd://${ETCD_ENDPOINTS//http:\/\//}/crash
if start; then
	for i in 1 2 3 4; do
		ctl server add --portal 10.77.$i.2 --target iqn.2024-01.org.tapstripe:srv$i \
			--lun 1 --size 4G >/dev/null || fail "server $i added"
	done
	case_crashes && case_after
else
	fail "the master starts on the store" "$(tail -3 "$LOG")"
fi

echo "master-etcd-crash: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
