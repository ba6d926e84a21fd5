#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-etcd-partition.sh - a minority etcd member cut off (issue #23):
# 3 etcd members, m0 and m1 on this host, m2 in a network namespace of its
# own joined to this host by a veth pair; master A on this host attached to
# m0 and m1, master C inside m2's namespace attached to m2 only.  When m2's
# link goes down, C's changes (server add, vdisk create) are refused with
# an error that says the store did not confirm them and why (etcd did not
# answer in time: cut off from the majority), within a few seconds,
# while A keeps working on the majority; nothing is half written (what C
# was refused is wholly there or wholly absent afterwards, A and C agree,
# the consistency check is clean on both replicas); when the link is up
# again C catches up and its changes are taken again.  Then m2 is cut from
# its peers only (blackhole routes for the peer addresses, which are not
# the client ones): master D on this host, attached to m2 alone, still
# reaches m2 through the veth but is refused its changes with the same
# clear error, A keeps working, and after the heal D catches up, nothing
# half written, A, C and D agree and D's replica checks clean.
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without etcd
# (apt-get install etcd-server), python3, root or network namespaces.
# Stops only what it started, by PID, and removes its namespace, veth and
# route by name.
set -u

top=$(cd "$(dirname "$0")/../.." && pwd)
MASTER_LIB_WORK=master-etcd-partition
# shellcheck source=tests/integration/master-lib.sh
. "$top/tests/integration/master-lib.sh"
# shellcheck source=tests/lab/etcd-lib.sh
. "$top/tests/lab/etcd-lib.sh"

if ! etcd_lib_have; then
	echo "SKIP: etcd not found (apt-get install etcd-server)"
	exit 77
fi
NS=tsep$$
VH=tsep$$h # this host's end of the veth
VN=tsep$$n # m2's end, in $NS
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns add "$NS" 2>/dev/null; then
	echo "SKIP: needs root and network namespaces (ip netns add)"
	exit 77
fi

PIDS=() # every etcd member and master, by PID
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	ip netns del "$NS" 2>/dev/null # its end of the veth goes too
	ip link del "$VH" 2>/dev/null
	[ -n "${NIP2:-}" ] && ip route del blackhole "$NIP2/32" 2>/dev/null
	rm -rf "${DATA[@]}"
	master_lib_cleanup
}
trap cleanup EXIT

# A /30 of 10.251.X.0/24 that this host does not use.
NET=
for x in $(seq $(($$ % 200)) 255) $(seq 0 $(($$ % 200))); do
	ip -4 -o addr show | grep -q " 10\.251\.$x\." || {
		NET=10.251.$x
		break
	}
done
[ -n "$NET" ] || { echo "FAIL: no free 10.251.X.0/24"; exit 1; }
# HIP and NIP carry the clients' traffic (the primary addresses: the
# source of every connection the masters make), HIP2 and NIP2 the etcd
# members' peer traffic alone, so that routes can cut one and not the other.
HIP=$NET.1 NIP=$NET.2 HIP2=$NET.3 NIP2=$NET.4
ip link add "$VH" type veth peer name "$VN" &&
	ip link set "$VN" netns "$NS" &&
	ip addr add "$HIP/24" dev "$VH" && ip addr add "$HIP2/24" dev "$VH" &&
	ip link set "$VH" up &&
	ip -n "$NS" addr add "$NIP/24" dev "$VN" &&
	ip -n "$NS" addr add "$NIP2/24" dev "$VN" && ip -n "$NS" link set "$VN" up &&
	ip -n "$NS" link set lo up || { echo "FAIL: cannot make the veth"; exit 1; }

in_ns() { ip netns exec "$NS" "$@"; }

# --- 3 etcd members: m0, m1 here, m2 in $NS ------------------------------------

read -r -a P <<<"$(etcd_lib_free_ports 4)"
DATA=()
CLUSTER=m0=http://$HIP2:${P[1]},m1=http://$HIP2:${P[3]},m2=http://$NIP2:2380
TOKEN=tapstripe-partition-$$
member() { # I CLIENT_URL PEER_URL [ip netns exec NS] (it execs: $! is etcd)
	local i=$1 curl=$2 purl=$3
	shift 3
	DATA[i]=$(mktemp -d "/dev/shm/etcd-part-m$i.XXXXXX")
	"$@" etcd --name "m$i" --data-dir "${DATA[i]}" \
		--listen-client-urls "$curl" --advertise-client-urls "$curl" \
		--listen-peer-urls "$purl" --initial-advertise-peer-urls "$purl" \
		--initial-cluster "$CLUSTER" --initial-cluster-token "$TOKEN" \
		--initial-cluster-state new >"$WORK/etcd-$i.log" 2>&1 &
	PIDS+=($!)
}
member 0 "http://127.0.0.1:${P[0]}" "http://$HIP2:${P[1]}"
member 1 "http://127.0.0.1:${P[2]}" "http://$HIP2:${P[3]}"
member 2 "http://$NIP:2379" "http://$NIP2:2380" ip netns exec "$NS"
M2=http://$NIP:2379

healthy() { # [in_ns] URL: waits up to 20 s for a linearizable answer
	local t
	for t in $(seq 200); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
for u in "http://127.0.0.1:${P[0]}" "http://127.0.0.1:${P[2]}"; do
	healthy etcd_lib_healthy "$u" || { echo "FAIL: etcd member $u did not come up"; exit 1; }
done
healthy in_ns python3 -c "
import json, sys, urllib.request
with urllib.request.urlopen('$M2/health', timeout=1) as r:
    sys.exit(0 if json.load(r).get('health') == 'true' else 1)" ||
	{ echo "FAIL: etcd member m2 did not come up"; exit 1; }

URL_A=etcd://127.0.0.1:${P[0]},127.0.0.1:${P[2]}/t1
URL_C=etcd://$NIP:2379/t1
ADDR_A=$ADDR
ADDR_C=127.0.0.1:7799 # inside $NS
ADDR_D=127.0.0.1:$(free_port)

ctl_a() { "$CTL_BIN" --master "$ADDR_A" "$@"; }
ctl_c() { in_ns "$CTL_BIN" --master "$ADDR_C" "$@"; }
ctl_d() { "$CTL_BIN" --master "$ADDR_D" "$@"; }

"$MASTER_BIN" --foreground --db "$WORK/a.db" --listen "$ADDR_A" --extent-size 4M \
	--store "$URL_A" --log-file "$WORK/a.log" &
PID_A=$!
PIDS+=("$PID_A")
ip netns exec "$NS" "$MASTER_BIN" --foreground --db "$WORK/c.db" --listen "$ADDR_C" --extent-size 4M \
	--store "$URL_C" --log-file "$WORK/c.log" &
PID_C=$!
PIDS+=("$PID_C")
# D: on this host, attached to m2 alone (through the veth)
"$MASTER_BIN" --foreground --db "$WORK/d.db" --listen "$ADDR_D" --extent-size 4M \
	--store "$URL_C" --log-file "$WORK/d.log" &
PID_D=$!
PIDS+=("$PID_D")
wait_master "$ADDR_A" && wait_master "$ADDR_D" && in_ns bash -c "$(declare -f wait_master); CTL_BIN=$CTL_BIN; wait_master $ADDR_C" ||
	{ echo "FAIL: the masters did not start: $(tail -3 "$WORK"/*.log)"; exit 1; }

state() { # ctl function: what a master says of the store
	"$1" info --json | json_get 'j["vdisks"], j["free_extents"], j["servers"]'
}

server_add() { # ctl function I
	"$1" server add --portal "10.77.$2.2" --target "iqn.2024-01.org.tapstripe:srv$2" \
		--lun 1 --size 4G 2>&1
}

# --- before the cut ----------------------------------------------------------------

for i in 1 2; do server_add ctl_a $i >/dev/null; done
for i in 3 4; do server_add ctl_c $i >/dev/null; done
out=$(ctl_c vdisk create before --size 64M --stripes 2 --replicas 2 -o "$WORK/before.map" 2>&1)
[ $? = 0 ] && [ "$(state ctl_a)" = "$(state ctl_c)" ] &&
	[ "$(ctl_a server list --json | json_get 'len(j)')" = 4 ] &&
	pass "before the cut: A and C share 4 servers and a disk" ||
	fail "before the cut: A and C share 4 servers and a disk" "$out; A $(state ctl_a), C $(state ctl_c)"

# --- the cut -----------------------------------------------------------------------

ip link set "$VH" down
sleep 1.5 # past etcd's election timeout (1 s): m2 knows it has no leader

t0=$(date +%s%N)
out=$(server_add ctl_c 5)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "C's server add during the cut: exit $rc after $ms ms: $out"
[ $rc != 0 ] && grep -q "the replicated store did not confirm this call (etcd did not answer in time: the etcd members this master uses may be cut off" <<<"$out" &&
	[ $ms -lt 15000 ] &&
	pass "cut off: C refuses a server add with a clear error in ${ms} ms" ||
	fail "cut off: C refuses a server add with a clear error" "exit $rc, $ms ms: $out"
out=$(ctl_c vdisk create during --size 64M --stripes 2 --replicas 2 -o "$WORK/during.map" 2>&1)
rc=$?
echo "C's vdisk create during the cut: exit $rc: $out"
[ $rc != 0 ] && grep -q "the replicated store did not confirm this call (etcd did not answer in time: the etcd members this master uses may be cut off" <<<"$out" &&
	pass "cut off: C refuses a vdisk create with a clear error" ||
	fail "cut off: C refuses a vdisk create with a clear error" "exit $rc: $out"
out=$(server_add ctl_a 6) && out=$(ctl_a vdisk create majority --size 64M --stripes 2 \
	--replicas 2 -o "$WORK/majority.map" 2>&1) &&
	pass "cut off: A on the majority keeps taking changes" ||
	fail "cut off: A on the majority keeps taking changes" "$out"
kill -0 "$PID_C" 2>/dev/null && pass "cut off: C stays up" || fail "cut off: C stays up"

# --- the heal ----------------------------------------------------------------------

ip link set "$VH" up
healthy in_ns python3 -c "
import json, sys, urllib.request
with urllib.request.urlopen('$M2/health', timeout=1) as r:
    sys.exit(0 if json.load(r).get('health') == 'true' else 1)" ||
	fail "m2 rejoins after the heal"

# C's first call after the heal may still fail while m2 catches up;
# stripe-ctl's own retries cover a few seconds.
ok=
for t in $(seq 10); do
	out=$(server_add ctl_c 7) && { ok=1; break; }
	sleep 1
done
[ -n "$ok" ] && pass "healed: C takes changes again (try $t)" ||
	fail "healed: C takes changes again" "$out"
out=$(ctl_c vdisk create after --size 64M --stripes 2 --replicas 2 -o "$WORK/after.map" 2>&1) &&
	ctl_a vdisk show --name after >/dev/null 2>&1 && ctl_c vdisk show --name majority >/dev/null 2>&1 &&
	pass "healed: C's new disk is seen by A, A's disk of the cut by C" ||
	fail "healed: C's new disk is seen by A, A's disk of the cut by C" "$out"

# --- the second cut: m2 cut from its peers, reachable by its masters ------

# No route to the other side's peer address, on either side: every peer
# connection needs both ways, so m2 hears nothing from m0 and m1 while D
# (this host, HIP -> NIP) and C still reach it.
ip route add blackhole "$NIP2/32" && ip -n "$NS" route add blackhole "$HIP2/32" ||
	fail "blackhole routes for the peer addresses"
sleep 1.5 # past etcd's election timeout (1 s): m2 knows it has no leader

python3 -c "import urllib.request; urllib.request.urlopen('$M2/version', timeout=2).read()" &&
	pass "peers cut: m2 still answers this host's clients" ||
	fail "peers cut: m2 still answers this host's clients"
# One call is enough here (each refusal takes stripe-ctl's retries, ~9 s):
# the create, whose half-written state would show.
t0=$(date +%s%N)
out=$(ctl_d vdisk create during2 --size 64M --stripes 2 --replicas 2 -o "$WORK/during2.map" 2>&1)
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
echo "D's vdisk create with m2 cut from its peers: exit $rc after $ms ms: $out"
[ $rc != 0 ] && grep -q "the replicated store did not confirm this call (etcd did not answer in time: the etcd members this master uses may be cut off" <<<"$out" &&
	[ $ms -lt 15000 ] && [ ! -e "$WORK/during2.map" ] &&
	pass "peers cut: D refuses a vdisk create with a clear error in ${ms} ms, no mapping file" ||
	fail "peers cut: D refuses a vdisk create with a clear error" "exit $rc, $ms ms: $out"
out=$(server_add ctl_a 10) && out=$(ctl_a vdisk create majority2 --size 64M --stripes 2 \
	--replicas 2 -o "$WORK/majority2.map" 2>&1) &&
	pass "peers cut: A on the majority keeps taking changes" ||
	fail "peers cut: A on the majority keeps taking changes" "$out"
kill -0 "$PID_D" 2>/dev/null && pass "peers cut: D stays up" || fail "peers cut: D stays up"

ip route del blackhole "$NIP2/32"
ip -n "$NS" route del blackhole "$HIP2/32"
healthy etcd_lib_healthy "$M2" || fail "m2 rejoins after the peers' heal"
ok=
for t in $(seq 10); do
	out=$(server_add ctl_d 9) && { ok=1; break; }
	sleep 1
done
[ -n "$ok" ] && ctl_d vdisk show --name majority2 >/dev/null 2>&1 &&
	pass "peers healed: D takes changes again (try $t) and sees A's disk of the cut" ||
	fail "peers healed: D takes changes again" "$out"
n=$(ctl_a extents list --allocated --json | json_get 'sum(e["vdisk"] == "during2" for e in j)')
if ctl_a vdisk show --name during2 >/dev/null 2>&1; then
	[ "$n" = 32 ] && pass "D's refused create took effect late, whole (32 extents)" ||
		fail "D's refused create is whole" "$n extents"
else
	[ "$n" = 0 ] && pass "D's refused create left nothing" ||
		fail "D's refused create left nothing" "$n extents of a disk that does not exist"
fi
[ "$(state ctl_a)" = "$(state ctl_d)" ] &&
	pass "peers healed: A and D agree ($(state ctl_d))" ||
	fail "peers healed: A and D agree" "A $(state ctl_a), D $(state ctl_d)"

# Nothing half written: what C was refused is wholly there or wholly
# absent, the same through both.
[ "$(state ctl_a)" = "$(state ctl_c)" ] &&
	pass "healed: A and C agree ($(state ctl_a))" ||
	fail "healed: A and C agree" "A $(state ctl_a), C $(state ctl_c)"
n=$(ctl_a extents list --allocated --json | json_get 'sum(e["vdisk"] == "during" for e in j)')
if ctl_a vdisk show --name during >/dev/null 2>&1; then
	[ "$n" = 32 ] && pass "the refused create took effect late, whole (32 extents)" ||
		fail "the refused create is whole" "$n extents"
else
	[ "$n" = 0 ] && pass "the refused create left nothing" ||
		fail "the refused create left nothing" "$n extents of a disk that does not exist"
fi
out=$(ctl_c extents list --allocated --json |
	json_get 'len(j) == len({(e["server"], e["index"]) for e in j})' 2>&1)
[ "$out" = True ] && pass "no extent listed twice" || fail "no extent listed twice" "$out"

# --- the consistency check of both replicas ------------------------------------------

for pid in "$PID_A" "$PID_C" "$PID_D"; do
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
done
out=$("$MASTER_BIN" --check --db "$WORK/a.db" --extent-size 4M --store "$URL_A" 2>&1) &&
	grep -q consistent <<<"$out" && pass "consistency check of A's replica" ||
	fail "consistency check of A's replica" "$out"
out=$(in_ns "$MASTER_BIN" --check --db "$WORK/c.db" --extent-size 4M --store "$URL_C" 2>&1) &&
	grep -q consistent <<<"$out" && pass "consistency check of C's replica" ||
	fail "consistency check of C's replica" "$out"
out=$("$MASTER_BIN" --check --db "$WORK/d.db" --extent-size 4M --store "$URL_C" 2>&1) &&
	grep -q consistent <<<"$out" && pass "consistency check of D's replica" ||
	fail "consistency check of D's replica" "$out"
grep -i "etcd\|replicat" "$WORK/c.log" | tail -4

echo "master-etcd-partition: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
