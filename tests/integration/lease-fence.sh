#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# lease-fence.sh - stripe-ctl vdisk lease takeover NAME --fence fences the
# old holder on the storage servers themselves (issue #18), against a lab
# of 3 tgtd servers and its master.  Host ids and initiator names stand for
# hosts: one machine, no namespaces needed for the initiators.
#
#   - host A holds disk lf's lease and is registered (its key, a WERO
#     reservation) on every LUN of lf, each from a session it keeps open;
#   - host B: takeover lf --fence.  Every LUN lists B's key and not A's
#     (READ KEYS), B's WERO reservation; A's next write on each of its
#     registered sessions fails with RESERVATION CONFLICT; the lease says
#     holder host-b, fence_pending false; the time to fence is printed;
#   - the same command again changes nothing (every LUN already_done,
#     PRgeneration unchanged on every LUN);
#   - disk lc held by host C, server 2's network cut: the fence fails
#     (exit 1) naming server 2's LUN, fence_pending stays true, the other
#     LUNs are fenced; after the restore a rerun completes;
#   - disk lk held by host D, server 3 cut so the fence hangs there:
#     stripe-ctl killed with SIGKILL in the middle leaves fence_pending
#     true; after the restore a rerun resumes and completes;
#   - --initiator without --fence, --map with and without a file.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About 30 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

HARNESS=$BUILDDIR/tests/integration/iscsi-conn-harness
[ -x "$HARNESS" ] || { echo "FAIL: $HARNESS not built"; exit 1; }
IQN_PREFIX=iqn.2026-11.org.tapstripe
FENCE_TIMEOUT=3 # seconds per LUN when a server is cut

lab_up 3

ctl() { "$CTL" --master "$LAB_MASTER" "$@"; }
jget() { "$PY" -c "import json, sys; j = json.load(sys.stdin); print($1)"; }
keyof() { "$HARNESS" --host-id "$1" keyof; }
srv() { local v=LAB_SRV$1_$2; echo "${!v}"; }

# harness I CASE [ARGS...]: the harness on server I's LUN.
harness() {
	local i=$1
	shift
	"$HARNESS" --portal "$(srv "$i" ADDR):3260" --target "$(srv "$i" TARGET)" \
		--lun 1 --timeout-ms 5000 "$@"
}

# keys I: "generation G", "key 0x..." lines, "reservation 0xKEY TYPE|none".
keys() {
	harness "$1" --initiator "$IQN_PREFIX:lease-fence-probe" keys 2>&1 |
		grep -E '^(generation|key|reservation) '
}

# register I HOST: HOST's key registered on server I's LUN (WERO reserved).
register() {
	harness "$1" --initiator "$IQN_PREFIX:$2" --host-id "$2" register \
		>"$WORK/register-$2-$1.log" 2>&1
}

# fenced_on HOST I...: every LUN lists B's key and not HOST's.
fenced_on() {
	local host=$1 i k out ok=1 kh
	shift
	kh=$(keyof "$host")
	for i in "$@"; do
		out=$(keys "$i")
		grep -qx "key $KB" <<<"$out" && ! grep -qx "key $kh" <<<"$out" || {
			ok=0
			echo "server $i: $out"
		}
	done
	[ $ok = 1 ]
}

make_disk lf 12M 3 64K 1 || { summary; exit 1; }
KA=$(keyof host-a)
KB=$(keyof host-b)

# --- host A holds lf, registered on every LUN from live sessions ---------------
out=$(ctl --host-id host-a vdisk lease acquire lf 2>&1) &&
	pass "host A holds lf's lease" || fail "lease acquire by A" "$out"
HOLD_PIDS=()
for i in 1 2 3; do
	mkdir -p "$WORK/hold$i"
	harness "$i" --initiator "$IQN_PREFIX:host-a" --host-id host-a --dir "$WORK/hold$i" \
		--seconds 50 --expect fenced hold >"$WORK/hold$i.log" 2>&1 &
	HOLD_PIDS+=($!)
	TD_PIDS+=($!)
done
for ((t = 0; t < 150; t++)); do
	[ -e "$WORK/hold1/ready" ] && [ -e "$WORK/hold2/ready" ] && [ -e "$WORK/hold3/ready" ] && break
	sleep 0.1
done
ok=1
for i in 1 2 3; do
	out=$(keys "$i")
	grep -qx "key $KA" <<<"$out" && grep -qx "reservation $KA 5" <<<"$out" || {
		ok=0
		fail "host A registered and reserved on server $i" "$out $(tail -5 "$WORK/hold$i.log")"
	}
done
[ $ok = 1 ] && pass "host A registered, WERO reservation on all 3 LUNs, sessions open"

# --- host B takes lf over with fencing ---------------------------------------------
t0=$(date +%s%N)
out=$(ctl --host-id host-b --json vdisk lease takeover lf --fence 2>"$WORK/fence1.err")
rc=$?
t1=$(date +%s%N)
echo "fence of 3 LUNs: $(((t1 - t0) / 1000000)) ms for the whole command, $(jget 'j.get("fence_time_ms")' <<<"$out" 2>/dev/null) ms fencing"
sum=$(jget 'j["holder"], j["previous"], j["fence_pending"], j["fencing_performed"], len(j["fence"]), sorted(set(l["result"] for l in j["fence"]))' <<<"$out" 2>&1)
[ $rc = 0 ] && [ "$sum" = "host-b host-a False True 3 ['fenced']" ] &&
	pass "takeover lf --fence by host B: 3 LUNs fenced, fence_pending false" ||
	fail "takeover --fence (exit $rc)" "$sum $(cat "$WORK/fence1.err")"
[ "$(grep -c '^stripe-ctl: fence [123]/3: .*fenced in' "$WORK/fence1.err")" = 3 ] &&
	pass "a progress line per LUN on stderr" || fail "progress lines" "$(cat "$WORK/fence1.err")"
if grep -q "PREEMPT, not PREEMPT AND ABORT" "$WORK/fence1.err" &&
	[ "$(jget 'all(l["plain_preempt"] for l in j["fence"])' <<<"$out")" = True ]; then
	pass "tgtd's PREEMPT fallback said in the output (plain_preempt)"
else
	fail "PREEMPT fallback reported" "$(cat "$WORK/fence1.err")"
fi
fenced_on host-a 1 2 3 && pass "READ KEYS on every LUN: host B's key, not host A's" ||
	fail "keys after the fence"
ok=1
for i in 1 2 3; do
	keys "$i" | grep -qx "reservation $KB 5" || ok=0
done
[ $ok = 1 ] && pass "every LUN's WERO reservation is host B's (taken with A's)" ||
	fail "reservations after the fence" "$(for i in 1 2 3; do keys "$i"; done)"
for i in 1 2 3; do touch "$WORK/hold$i/go"; done
ok=1
for i in 0 1 2; do
	wait "${HOLD_PIDS[$i]}" || {
		ok=0
		fail "host A's write on server $((i + 1)) after the fence" "$(grep -E '^(ok|FAILED)' "$WORK/hold$((i + 1)).log")"
	}
done
[ $ok = 1 ] && pass "host A's writes from its registered sessions: RESERVATION CONFLICT on all 3"
out=$(ctl --json vdisk lease show lf | jget 'j["holder"], j["fence_pending"]')
[ "$out" = "host-b False" ] && pass "lease show: holder host-b, fence_pending false" ||
	fail "lease show after the fence" "$out"

# --- the same command again changes nothing ------------------------------------------
before=$(for i in 1 2 3; do keys "$i" | grep '^generation'; done)
out=$(ctl --host-id host-b --json vdisk lease takeover lf --fence 2>"$WORK/fence2.err")
rc=$?
after=$(for i in 1 2 3; do keys "$i" | grep '^generation'; done)
sum=$(jget 'j["holder"], j["changed"], j["fence_pending"], all(l["already_done"] and l["result"] == "fenced" for l in j["fence"])' <<<"$out" 2>&1)
[ $rc = 0 ] && [ "$sum" = "host-b False False True" ] && [ "$before" = "$after" ] &&
	pass "a rerun: unchanged, every LUN already done, PR generations unchanged" ||
	fail "rerun (exit $rc)" "$sum; generations before: $before; after: $after $(cat "$WORK/fence2.err")"

# --- a LUN unreachable: the fence fails, stays pending, a rerun completes ------------
make_disk lc 12M 3 64K 1 || { summary; exit 1; }
ctl --host-id host-c vdisk lease acquire lc >/dev/null 2>&1 &&
	register 1 host-c && register 2 host-c && register 3 host-c &&
	pass "host C holds lc, registered on all 3 LUNs" || fail "host C set-up" "$(cat "$WORK"/register-host-c-*.log)"
"$LAB" cut 2 >/dev/null 2>&1
out=$(ctl --host-id host-b --json --timeout $FENCE_TIMEOUT vdisk lease takeover lc --fence 2>"$WORK/fence3.err")
rc=$?
T2=$(srv 2 TARGET)
sum=$(jget 'j["holder"], j["fence_pending"], j["fencing_performed"], sorted((l["target"], l["result"]) for l in j["fence"])' <<<"$out" 2>&1)
want="host-b True False [('$(srv 1 TARGET)', 'fenced'), ('$T2', 'failed'), ('$(srv 3 TARGET)', 'fenced')]"
[ $rc = 1 ] && [ "$sum" = "$want" ] && grep -q "NOT fenced from 1 of 3 LUNs" "$WORK/fence3.err" &&
	grep -q "^    .* $T2 lun 1: no answer within $FENCE_TIMEOUT s" "$WORK/fence3.err" &&
	grep -q "stays unserved (fence pending" "$WORK/fence3.err" &&
	pass "server 2 cut: exit 1, its LUN named as not fenced, the others fenced, fence pending" ||
	fail "fence with server 2 cut (exit $rc)" "$sum $(cat "$WORK/fence3.err")"
out=$(ctl --json vdisk lease show lc | jget 'j["holder"], j["fence_pending"]')
[ "$out" = "host-b True" ] && ctl vdisk lease show lc | grep -q "lease fence pending: yes" &&
	pass "lease show: fence_pending true, said so" || fail "lease show with the fence pending" "$out"
"$LAB" restore 2 >/dev/null 2>&1
out=$(ctl --host-id host-b --json vdisk lease takeover lc --fence 2>"$WORK/fence4.err")
rc=$?
sum=$(jget 'j["resumed"], j["fence_pending"], sorted((l["target"], l["already_done"]) for l in j["fence"])' <<<"$out" 2>&1)
want="True False [('$(srv 1 TARGET)', True), ('$T2', False), ('$(srv 3 TARGET)', True)]"
[ $rc = 0 ] && [ "$sum" = "$want" ] && fenced_on host-c 1 2 3 &&
	pass "after the restore a rerun resumes: server 2 fenced now, fence_pending false" ||
	fail "rerun after the restore (exit $rc)" "$sum $(cat "$WORK/fence4.err")"

# --- kill -9 in the middle, then a rerun --------------------------------------------
make_disk lk 12M 3 64K 1 || { summary; exit 1; }
ctl --host-id host-d vdisk lease acquire lk >/dev/null 2>&1 &&
	register 1 host-d && register 2 host-d && register 3 host-d &&
	pass "host D holds lk, registered on all 3 LUNs" || fail "host D set-up" "$(cat "$WORK"/register-host-d-*.log)"
"$LAB" cut 3 >/dev/null 2>&1
"$CTL" --master "$LAB_MASTER" --host-id host-b --timeout 30 vdisk lease takeover lk --fence >"$WORK/fence5.out" 2>"$WORK/fence5.err" &
KPID=$!
for ((t = 0; t < 100; t++)); do
	[ "$(grep -c '^stripe-ctl: fence [12]/3' "$WORK/fence5.err")" = 2 ] && break
	sleep 0.1
done
kill -KILL $KPID 2>/dev/null
wait $KPID 2>/dev/null
out=$(ctl --json vdisk lease show lk | jget 'j["holder"], j["fence_pending"]')
[ "$out" = "host-b True" ] && grep -q "^stripe-ctl: fence 2/3" "$WORK/fence5.err" &&
	pass "stripe-ctl killed (SIGKILL) with 2 of 3 LUNs fenced: fence_pending stays true" ||
	fail "kill -9 in the middle" "$out $(cat "$WORK/fence5.err")"
"$LAB" restore 3 >/dev/null 2>&1
out=$(ctl --host-id host-b vdisk lease takeover lk --fence 2>"$WORK/fence6.err")
rc=$?
[ $rc = 0 ] && grep -q "resuming the fencing of host-d" "$WORK/fence6.err" &&
	grep -q "host host-d fenced on 3 LUNs in .*the master knows" <<<"$out" &&
	[ "$(ctl --json vdisk lease show lk | jget 'j["fence_pending"]')" = False ] &&
	fenced_on host-d 1 2 3 &&
	pass "the rerun resumes and completes: host D fenced everywhere, fence_pending false" ||
	fail "rerun after the kill (exit $rc)" "$out $(cat "$WORK/fence6.err")"

# --- what users get wrong --------------------------------------------------------------
out=$(ctl vdisk lease takeover lf --initiator x 2>&1)
[ $? = 2 ] && grep -q "goes with --fence" <<<"$out" && pass "--initiator without --fence: usage error" ||
	fail "--initiator without --fence" "$out"
out=$(ctl --host-id host-b vdisk lease takeover lf --fence --map "$WORK/lf.map" 2>&1)
[ $? = 0 ] && pass "--map FILE (no CHAP in it): the rerun with it succeeds" || fail "--map FILE" "$out"
out=$(ctl --host-id host-b vdisk lease takeover lf --fence --map "$WORK/none.map" 2>&1)
[ $? = 1 ] && grep -q "none.map" <<<"$out" && pass "--map of a missing file: refused, naming it" ||
	fail "--map missing" "$out"

summary
