#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-fence.sh - the master's side of fencing (issue #18) with the real
# stripe-master and the real stripe-ctl: a fenced takeover leaves the lease
# fence_pending and the old holder fenced (host list); the fenced host's
# acquire and a hand-over to it are refused with EFENCED and a message
# saying who fenced it and how to re-admit it (exit 1, the lease under
# --json); the holder's confirmation (MS_LEASE_FENCED: only the holder, at
# its epoch, idempotent); re-admission (idempotent, then the host acquires);
# bad input; kill -9 during two hosts' loops of these calls (the store
# checks, never two holders of an epoch, a fenced host stays fenced until
# re-admitted); and 'vdisk map' (the file 'vdisk create -o' wrote, byte for
# byte; a file a tapdisk holds is refused).
#
# The takeovers and confirmations are raw RPC calls (master-fence.py): the
# master's side alone, without the LUNs stripe-ctl's takeover fences.
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when python3 is missing.
set -u

RAW=$(cd "$(dirname "$0")" && pwd)/master-fence.py
LOOP_CALLS=${LOOP_CALLS:-400}
MASTER_LIB_WORK=master-fence
. "$(cd "$(dirname "$0")" && pwd)/master-lib.sh"

raw() {
	python3 "$RAW" "$PORT" "$@"
}

lease() { # HOST OP... : a lease call as HOST, JSON on stdout
	local host=$1
	shift
	ctl --json vdisk lease "$@" --host-id "$host"
}

setup() {
	local i
	for i in 1 2 3 4; do
		ctl server add --portal 10.77.$i.2 --target iqn.2024-01.org.tapstripe:srv$i \
			--lun 1 --size 64M >/dev/null || return 1
	done
	ctl vdisk create f1 --size 16M --stripes 2 --replicas 2 -o "$WORK/f1.map" >/dev/null &&
		ctl vdisk create f2 --size 8M --stripes 1 -o "$WORK/f2.map" >/dev/null &&
		lease hostA acquire f1 >/dev/null && lease hostA acquire f2 >/dev/null
}

case_fenced_takeover() {
	local out
	out="$(raw takeover f1 hostB 1) / $(raw takeover f1 hostB 1)"
	[ "$out" = "OK 1 1 / OK 0 1" ] &&
		pass "fenced takeover of f1 by B from A: fence pending; a retry unchanged" ||
		fail "fenced takeover" "$out"
	out=$(ctl --json vdisk lease show f1 | json_get 'j["holder"], j["epoch"], j["fence_pending"]')
	[ "$out" = "hostB 2 True" ] && ctl vdisk lease show f1 | grep -q "fence pending: yes" &&
		[ "$(ctl vdisk show --name f1 --json | json_get 'j["lease"]["fence_pending"]')" = True ] &&
		ctl vdisk show --name f1 | grep -q "fence pending: yes" &&
		pass "lease show and vdisk show --name print fence_pending (text and --json)" ||
		fail "fence_pending shown" "$out"
	out=$(ctl host list --json | json_get '[(h["host"], h["by"], h["vdisk"], h["epoch"]) for h in j["fenced"]]')
	[ "$out" = "[('hostA', 'hostB', 'f1', 2)]" ] && ctl host list | grep -q "^hostA  *hostB  *f1  *2 " &&
		pass "host list: A fenced by B for f1 at epoch 2" || fail "host list" "$out"
	out=$(lease hostB acquire f1 | json_get 'j["holder"], j["changed"], j["fence_pending"]')
	[ "$out" = "hostB False True" ] &&
		pass "the holder's acquire while the fence is pending: OK, fence_pending in the answer" ||
		fail "holder acquire while pending" "$out"
}

case_refusals() {
	local out status
	out=$(lease hostA acquire f1 2>"$WORK/err")
	status=$?
	[ $status -eq 1 ] &&
		[ "$(echo "$out" | json_get 'j["error"], j["holder"], j["fence_pending"]')" = "EFENCED hostB True" ] &&
		echo "$out" | json_get 'j["message"]' | grep -q "fenced by host hostB at .* (takeover of vdisk f1 at epoch 2)" &&
		grep -q "make sure host hostA's tapdisks of disk f1 are stopped, then re-admit it: stripe-ctl host readmit hostA" "$WORK/err" &&
		pass "the fenced host's acquire: EFENCED, exit 1, the lease and the message under --json" ||
		fail "fenced acquire" "status $status $out $(cat "$WORK/err")"
	out=$(lease hostA acquire f2 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q '"EFENCED"' &&
		pass "the fenced host's acquire of a disk it holds: EFENCED too" ||
		fail "fenced acquire of its own disk" "$out"
	out=$(ctl vdisk lease handover f1 --to hostC --host-id hostB 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "has not finished fencing hostA on its LUNs; finish it first" &&
		[ "$(ctl --json vdisk lease show f1 | json_get 'j["holder"], j["epoch"]')" = "hostB 2" ] &&
		pass "a hand-over while the fence is pending: refused, the lease unchanged" ||
		fail "hand-over while the fence is pending" "$out"
	out=$(lease hostA release f2 | json_get 'j["holder"], j["changed"]')
	[ "$out" = " True" ] && pass "the fenced host may still release" ||
		fail "fenced release" "$out"
}

case_confirm() {
	local out
	out="$(raw fenced f1 hostC 2) / $(raw fenced f1 hostB 1) / $(raw fenced f1 hostB 3)"
	[ "$out" = "EHELD 0 1 / ESTALE 0 1 / ESTALE 0 1" ] &&
		pass "fenced by another host: EHELD; at another epoch: ESTALE (with the lease)" ||
		fail "fenced refusals" "$out"
	out="$(raw fenced f1 hostB 2) / $(raw fenced f1 hostB 2)"
	[ "$out" = "OK 1 0 / OK 0 0" ] &&
		[ "$(ctl --json vdisk lease show f1 | json_get 'j["fence_pending"]')" = False ] &&
		pass "fenced by the holder at its epoch: pending false; repeated: unchanged" ||
		fail "fenced confirmation" "$out"
	[ "$(ctl host list --json | json_get 'len(j["fenced"])')" = 1 ] &&
		pass "the confirmation does not re-admit the old holder" ||
		fail "host still fenced after the confirmation"
	out=$(ctl vdisk lease handover f1 --to hostA --host-id hostB 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "host hostA may not be handed vdisk f1: it was fenced" &&
		[ "$(ctl --json vdisk lease show f1 | json_get 'j["holder"], j["epoch"]')" = "hostB 2" ] &&
		pass "a hand-over to the fenced host: EFENCED, the lease unchanged" ||
		fail "hand-over to a fenced host" "$out"
}

case_readmit() {
	local out
	out=$(ctl host readmit hostA --json | json_get 'j["host"], j["changed"], j["fenced"]')
	[ "$out" = "hostA True []" ] && pass "host readmit: A forgotten, no fenced host left" ||
		fail "readmit" "$out"
	out=$(ctl host readmit hostA)
	[ "$out" = "host hostA: not fenced, unchanged" ] && ctl host list | grep -q "no fenced host" &&
		pass "host readmit repeated: unchanged" || fail "readmit repeated" "$out"
	out=$(lease hostA acquire f2 | json_get 'j["holder"], j["changed"]')
	[ "$out" = "hostA True" ] && pass "the re-admitted host acquires again" ||
		fail "acquire after readmit" "$out"
}

case_bad_input() {
	local out
	out=$(ctl host readmit 'a b' 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "not a host id" &&
		pass "host readmit of a malformed id: refused" || fail "readmit bad id" "$out"
	out=$(ctl vdisk lease show nope 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "no vdisk nope" ||
		{ fail "unknown disk" "$out"; return; }
	if out=$(raw bad f1 2>&1) && kill -0 "$MASTER_PID"; then
		pass "bad fenced/host calls (unknown disk, malformed ids, undecodable): refused, master unharmed"
	else
		fail "bad fenced/host calls" "$out"
	fi
	out=$("$CTL_BIN" host list --master "$ADDR" --json --name x 2>&1)
	[ $? -eq 2 ] && pass "host list with a foreign option: usage error" ||
		fail "host list usage" "$out"
}

case_map() {
	local holder out
	ctl vdisk map f1 --size 16M -o "$WORK/f1-b.map" >/dev/null &&
		cmp -s "$WORK/f1.map" "$WORK/f1-b.map" &&
		pass "vdisk map writes the file vdisk create -o wrote, byte for byte" ||
		fail "vdisk map equals create's file" "$(diff "$WORK/f1.map" "$WORK/f1-b.map")"
	out=$(ctl vdisk map f1 --size 16M -o "$WORK/f1-b.map" --json | json_get 'j["vdisk"], j["changed"]') &&
		cmp -s "$WORK/f1.map" "$WORK/f1-b.map" && [ "$out" = "f1 True" ] &&
		pass "vdisk map over an existing unlocked file: rewritten, the same" ||
		fail "vdisk map again" "$out"
	python3 -c 'import fcntl, sys, time
f = open(sys.argv[1])
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)' "$WORK/f1-b.map" >"$WORK/holder.out" &
	holder=$!
	OTHER_PIDS="$OTHER_PIDS $holder"
	for _ in $(seq 50); do grep -q locked "$WORK/holder.out" && break; sleep 0.1; done
	out=$(ctl vdisk map f1 --size 16M -o "$WORK/f1-b.map" 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "is locked by a tapdisk: the disk is being served" &&
		cmp -s "$WORK/f1.map" "$WORK/f1-b.map" &&
		pass "vdisk map over a file a tapdisk holds: refused, saying it is served" ||
		fail "vdisk map of a locked file" "$out"
	kill "$holder" && wait "$holder" 2>/dev/null
	out=$(ctl vdisk map f1 --size 8M -o "$WORK/x.map" 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "give the values 'vdisk create' was given" &&
		[ ! -e "$WORK/x.map" ] &&
		pass "vdisk map with a size that does not fit the disk: refused" ||
		fail "vdisk map wrong size" "$out"
	out=$(ctl vdisk map nope --size 8M -o "$WORK/x.map" 2>&1)
	[ $? -eq 1 ] && echo "$out" | grep -q "no vdisk nope" && [ ! -e "$WORK/x.map" ] &&
		pass "vdisk map of an unknown disk: refused" || fail "vdisk map unknown" "$out"
	ctl vdisk mark --name f1 0 1 1 stale >/dev/null &&
		ctl vdisk map f1 --size 16M -o "$WORK/f1-c.map" >/dev/null &&
		[ "$(grep -c ' stale$' "$WORK/f1-c.map")" = 1 ] &&
		pass "vdisk map writes the master's replica states" ||
		fail "vdisk map stale states" "$(grep stale "$WORK/f1-c.map")"
}

case_crash() {
	local pid_a pid_b n out
	ctl vdisk create fz --size 8M --stripes 1 -o "$WORK/fz.map" >/dev/null ||
		{ fail "crash: vdisk create"; return; }
	: >"$WORK/loop-a"
	: >"$WORK/loop-b"
	raw loop fz hostA hostB "$LOOP_CALLS" "$WORK/loop-a" &
	pid_a=$!
	raw loop fz hostB hostA "$LOOP_CALLS" "$WORK/loop-b" &
	pid_b=$!
	OTHER_PIDS="$OTHER_PIDS $pid_a $pid_b"
	for _ in $(seq 600); do
		n=$(cat "$WORK/loop-a" "$WORK/loop-b" | grep -c '"acked": true')
		[ "$n" -ge 300 ] && break
		sleep 0.05
	done
	stop_master KILL
	wait "$pid_a" "$pid_b" 2>/dev/null
	out=$(check_master 2>&1) &&
		pass "kill -9 during fencing calls: the store is consistent" ||
		fail "store check after kill -9" "$out"
	start_master || { fail "restart after kill -9"; return; }
	out=$(raw check fz "$WORK/loop-a" "$WORK/loop-b" 2>&1)
	case $out in
	ok*) pass "kill -9 during two hosts' fencing calls: never two holders, every acknowledged change and fence kept ($out)" ;;
	*) fail "fencing state after kill -9" "$out" ;;
	esac
}

start_master || { echo "FAIL: stripe-master did not start: $(cat "$LOG")"; exit 1; }
setup || { echo "FAIL: setup"; exit 1; }
case_fenced_takeover
case_refusals
case_confirm
case_readmit
case_bad_input
case_map
case_crash

echo "$PASSED passed, $FAILED failed"
[ $FAILED -eq 0 ]
