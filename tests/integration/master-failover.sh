#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-failover.sh - clients that fail over between masters (issue #23
# item 3): 3 etcd members (tests/lab/etcd-lib.sh), 2 masters on them
# (stripe-master --store), 4 clients (stripe-ctl --master A,B, each call
# once, no retry by the script) making 1,000 allocations and releases,
# lease calls, grows and lease hand-overs (re-homing) while master A (the
# one every client asks first) and then the etcd leader are killed with
# kill -9.  Every call must succeed by
# failing over; afterwards every acknowledged call is present (the disks
# kept exist with their lease, the destroyed ones are gone), no extent is
# owned twice, and the consistency check is clean on both replicas.  Also:
# a list whose every master is down fails within its bound, naming each;
# $STRIPE_MASTER and the config file take lists; a malformed list is a
# usage error.
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without etcd
# (apt-get install etcd-server) or python3.  Stops only what it started,
# by PID.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
MASTER_LIB_WORK=master-failover
MASTER_STORE=etcd # 3 etcd members, started and stopped by master-lib.sh
MASTER_ETCD_MEMBERS=3
# shellcheck source=tests/integration/master-lib.sh
. "$top/tests/integration/master-lib.sh"

CLIENTS=4
ROUNDS=${FAILOVER_ROUNDS:-140} # per client: a create, then a destroy or a lease
PID_A=
PID_B=
CLIENT_PIDS=
cleanup() {
	local pid
	for pid in $CLIENT_PIDS $PID_A $PID_B; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	master_lib_cleanup
}
trap cleanup EXIT

ADDR_A=$ADDR
ADDR_B=127.0.0.1:$(free_port)
LIST=$ADDR_A,$ADDR_B

# master NAME ADDR: a master on the store, replica $WORK/NAME.db
master() {
	"$MASTER_BIN" --foreground --db "$WORK/$1.db" --listen "$2" \
		--extent-size 4M --store "$URL" --log-file "$WORK/$1.log" &
}

# One client: ROUNDS disks; every 5th is kept and leased, the others
# destroyed.  Logs each acknowledged call ("create NAME", "lease NAME
# HOST", "destroy NAME") to $WORK/client-I.ok, each failure to .fail.
client() { # I
	local i=$1 r name ok=$WORK/client-$1.ok bad=$WORK/client-$1.fail
	: >"$ok"
	: >"$bad"
	for r in $(seq "$ROUNDS"); do
		name=c$i-$r
		if "$CTL_BIN" --master "$LIST" --timeout 3 --retries 6 vdisk create "$name" \
			--size 8M --stripes 2 --replicas 2 -o "$WORK/$name.map" \
			>/dev/null 2>>"$bad.log"; then
			echo "create $name" >>"$ok"
		else
			echo "create $name" >>"$bad"
			continue
		fi
		if [ $((r % 5)) = 0 ]; then
			"$CTL_BIN" --master "$LIST" --timeout 3 --retries 6 vdisk lease \
				acquire "$name" --host-id "host-$i" >/dev/null 2>>"$bad.log" &&
				echo "lease $name host-$i" >>"$ok" ||
				echo "lease $name" >>"$bad"
			# every 10th kept disk also grows and moves to another
			# host: growth and re-homing fail over like the rest
			[ $((r % 10)) = 0 ] || continue
			"$CTL_BIN" --master "$LIST" --timeout 3 --retries 6 vdisk resize \
				"$WORK/$name.map" --size 16M >/dev/null 2>>"$bad.log" &&
				echo "resize $name" >>"$ok" ||
				echo "resize $name" >>"$bad"
			"$CTL_BIN" --master "$LIST" --timeout 3 --retries 6 vdisk lease \
				handover "$name" --to "host-$i-b" --host-id "host-$i" \
				>/dev/null 2>>"$bad.log" &&
				echo "handover $name host-$i-b" >>"$ok" ||
				echo "handover $name" >>"$bad"
		else
			"$CTL_BIN" --master "$LIST" --timeout 3 --retries 6 vdisk destroy \
				--name "$name" >/dev/null 2>>"$bad.log" &&
				echo "destroy $name" >>"$ok" ||
				echo "destroy $name" >>"$bad"
		fi
	done
}

acked() { cat "$WORK"/client-*.ok 2>/dev/null | wc -l; }

# Wait until the clients have made $1 calls in all (or 30 s).
wait_calls() {
	for _ in $(seq 300); do
		[ "$(acked)" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

case_bad_lists() {
	local out dead t0 t1 st
	out=$("$CTL_BIN" --master "$ADDR_A,,$ADDR_B" info 2>&1)
	[ $? = 1 ] && grep -q "is not HOST\[:PORT\] or a list" <<<"$out" &&
		pass "a malformed list is refused" || fail "a malformed list is refused" "$out"
	out=$("$CTL_BIN" --master "$ADDR_A,$ADDR_A" info 2>&1)
	[ $? = 1 ] && grep -q "each once" <<<"$out" &&
		pass "a master named twice is refused" || fail "a master named twice is refused" "$out"
	dead=127.0.0.1:$(free_port)
	t0=$(date +%s%N)
	out=$("$CTL_BIN" --master "$dead,127.0.0.1:$(free_port)" --timeout 1 --retries 2 info 2>&1)
	st=$?
	t1=$(date +%s%N)
	[ $st = 1 ] && grep -q "no master of 2 answered (tried $dead: Connection refused; " <<<"$out" &&
		[ $(((t1 - t0) / 1000000)) -lt 5000 ] &&
		pass "every master down: one error naming each, within the bound" ||
		fail "every master down: one error naming each, within the bound" "$out"
}

case_env_and_conf() {
	local out
	out=$(STRIPE_MASTER="127.0.0.1:$(free_port),$ADDR_B" "$CTL_BIN" --json info 2>/dev/null)
	[ "$(json_get 'j["master"]' <<<"$out" 2>&1)" = "$ADDR_B" ] &&
		pass "\$STRIPE_MASTER takes a list; info names the master that answered" ||
		fail "\$STRIPE_MASTER takes a list; info names the master that answered" "$out"
	printf '# masters\nSTRIPE_MASTER="127.0.0.1:%s,%s"\n' "$(free_port)" "$ADDR_B" \
		>"$WORK/master.conf"
	out=$(env -u STRIPE_MASTER STRIPE_MASTER_CONF="$WORK/master.conf" "$CTL_BIN" --json info 2>/dev/null)
	[ "$(json_get 'j["master"]' <<<"$out" 2>&1)" = "$ADDR_B" ] &&
		pass "the config file's STRIPE_MASTER= list is used" ||
		fail "the config file's STRIPE_MASTER= list is used" "$out"
	"$CTL_BIN" --master "$LIST" vdisk create m1 --size 8M --stripes 2 --replicas 2 \
		-o "$WORK/m1.map" >/dev/null 2>&1 && grep -qx "master $LIST" "$WORK/m1.map" &&
		pass "a mapping file's master line holds the whole list" ||
		fail "a mapping file's master line holds the whole list" "$(grep master "$WORK/m1.map")"
	"$CTL_BIN" --master "$LIST" vdisk destroy --name m1 >/dev/null 2>&1
}

case_kills() {
	local i leader failed calls total what
	for i in $(seq 0 $((CLIENTS - 1))); do
		client "$i" &
		CLIENT_PIDS="$CLIENT_PIDS $!"
	done
	total=$((CLIENTS * (ROUNDS * 2 + ROUNDS / 10 * 2)))
	wait_calls $((total / 4)) || fail "the clients make progress" "$(acked) calls"
	kill -KILL "$PID_A"
	wait "$PID_A" 2>/dev/null
	PID_A=
	echo "# master A killed after $(acked) calls"
	wait_calls $((total / 2)) || fail "the clients go on through B" "$(acked) calls"
	leader=$(etcd_leader) || { fail "find the etcd leader"; return; }
	etcd_member_kill "$leader"
	echo "# etcd member $leader (the leader) killed after $(acked) calls"
	for i in $CLIENT_PIDS; do
		wait "$i"
	done
	CLIENT_PIDS=
	calls=$(acked)
	failed=$(cat "$WORK"/client-*.fail | wc -l)
	echo "# in the clients' logs: $(cat "$WORK"/client-*.fail.log | grep -c 'trying the next master') moves to the next master, $(cat "$WORK"/client-*.fail.log | grep -c 'retrying') turns retried"
	what="$CLIENTS clients, $calls calls ($(cat "$WORK"/client-*.ok | grep -c '^[cd]') allocations and releases, $(cat "$WORK"/client-*.ok | grep -c '^lease') lease acquires, $(cat "$WORK"/client-*.ok | grep -c '^resize') grows, $(cat "$WORK"/client-*.ok | grep -c '^handover') hand-overs) through kill -9 of A and of the etcd leader: every one answered"
	[ "$failed" = 0 ] && [ "$calls" = "$total" ] && pass "$what" || fail "$what" \
			"$failed failed: $(head -3 "$WORK"/client-*.fail.log)"
}

# Every acknowledged call is in the state, and nothing else.
case_acked() {
	local out
	cat "$WORK"/client-*.ok >"$WORK/acked"
	"$CTL_BIN" --master "$LIST" vdisk list --json >"$WORK/vdisks.json" &&
		"$CTL_BIN" --master "$LIST" extents list --allocated --json >"$WORK/extents.json" ||
		{ fail "list the state through B" "$(tail -2 "$WORK/b.log")"; return; }
	out=$(python3 - "$WORK" "$CTL_BIN" "$LIST" <<'PY'
import json, subprocess, sys
work, ctl, lst = sys.argv[1:4]
created, destroyed, leased, grown = set(), set(), {}, set()
for line in open(work + "/acked"):
    w = line.split()
    if w[0] == "create": created.add(w[1])
    elif w[0] == "destroy": destroyed.add(w[1])
    elif w[0] == "resize": grown.add(w[1])
    else: leased[w[1]] = w[2]  # lease or handover: the last holder
vdisks = json.load(open(work + "/vdisks.json"))
disks = {d["vdisk"] for d in vdisks}
bad = []
for d in vdisks:
    want = 2 if d["vdisk"] in grown else 1  # 8M or 16M in 4M extents, 2 columns
    if d["extents_per_column"] != want:
        bad.append("%s: %d extents per column, want %d" % (d["vdisk"], d["extents_per_column"], want))
if disks != created - destroyed:
    bad.append("disks: missing %s, extra %s" % (sorted(created - destroyed - disks)[:5],
                                                  sorted(disks - (created - destroyed))[:5]))
ext = json.load(open(work + "/extents.json"))
keys = [(e["server"], e["index"]) for e in ext]
if len(keys) != len(set(keys)):
    bad.append("an extent owned twice")
if {e["vdisk"] for e in ext} != disks:
    bad.append("extents of disks that do not exist")
handed = sorted(n for n in leased if leased[n].endswith("-b"))
for name in sorted(leased)[:10] + sorted(leased)[-10:] + handed:
    out = subprocess.run([ctl, "--master", lst, "--json", "vdisk", "lease", "show", name],
                         capture_output=True, text=True).stdout
    if json.loads(out)["holder"] != leased[name]:
        bad.append("lease of %s: %s" % (name, out))
print("; ".join(bad) if bad else "ok %d disks (%d grown), %d extents, %d leases (%d handed over)" % (len(disks), len(grown), len(ext), len(leased), len(handed)))
PY
)
	[ "${out%% *}" = ok ] &&
		pass "every acknowledged call is present, no extent owned twice ($out)" ||
		fail "every acknowledged call is present, no extent owned twice" "$out"
}

case_check() {
	local name out
	kill -TERM "$PID_B" 2>/dev/null
	wait "$PID_B" 2>/dev/null
	PID_B=
	for name in a b; do
		out=$("$MASTER_BIN" --check --db "$WORK/$name.db" --extent-size 4M \
			--store "$URL" 2>&1) && grep -q "consistent" <<<"$out" &&
			pass "stripe-master --check of replica $name (caught up)" ||
			fail "stripe-master --check of replica $name (caught up)" "$out"
	done
}

URL=etcd://$ETCD_EPS/fo
master a "$ADDR_A"
PID_A=$!
master b "$ADDR_B"
PID_B=$!
if wait_master "$ADDR_A" && wait_master "$ADDR_B"; then
	for i in 1 2 3 4; do
		"$CTL_BIN" --master "$LIST" server add --portal 10.77.$i.2 \
			--target iqn.2024-01.org.tapstripe:srv$i --lun 1 --size 8G >/dev/null ||
			fail "add server $i"
	done
	case_bad_lists
	case_env_and_conf
	case_kills
	case_acked
	case_check
else
	fail "two masters start on the store" "$(tail -3 "$WORK"/*.log)"
fi

echo "master-failover: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
