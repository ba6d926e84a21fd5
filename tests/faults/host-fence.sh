#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# host-fence.sh - a host cut off while it writes is fenced by the host that
# takes its disk over; its queued and later writes are refused by the
# storage servers themselves (issue #18).
#
# Two Xen hosts on one machine (lab.sh host add: a network namespace each,
# its own host id and initiator name), a lab of 2 tgtd servers, a disk of
# 2 columns x 2 replicas:
#   1. host A serves the disk (tapdisk in A's namespace); host B's open is
#      refused naming host-a;
#   2. a writer writes 4 KiB blocks at QD 8 over the first 4 MiB through
#      A; A's network is cut while it writes (its packets dropped: its
#      writes hang);
#   3. host B takes the disk over with fencing (stripe-ctl vdisk lease
#      takeover --fence, from B's namespace): every LUN fenced, the lease
#      B's, fence_pending false, host-a listed as fenced;
#   4. B serves and writes its own pattern over the whole disk, flushes,
#      reads it back;
#   5. A's network comes back: A's queued and new writes fail (reservation
#      conflicts counted by A, no write of A acknowledged after the
#      take-over began, no replica marked stale by A), A's log says fenced;
#   6. the whole disk read through B is byte for byte what B wrote (A's
#      late writes reached no LUN);
#   7. A opens the disk again: refused (EFENCED, naming host-b's take-over);
#      after "stripe-ctl host readmit host-a" and a hand-over from B, A
#      serves again and reads B's data.
# One PASS/FAIL line per check; exit 0, 1, or 77 (skip).  About 40 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/fault-lib.sh"

WRITER=$HERE/host-fence-writer.py
IQN=iqn.2026-11.org.tapstripe
REGION=$((4 << 20))

lab_up 2
make_disk hf 32M 2 64K 2 || { summary; exit 1; }
cp "$WORK/hf.map" "$WORK/hf-b.map"
cp "$WORK/hf.map" "$WORK/hf-a2.map"
for h in host-a host-b; do
	"$LAB" host add "$h" >/dev/null || { fail "lab.sh host add $h"; summary; exit 1; }
done
ctl() { "$CTL" --master "$LAB_MASTER" "$@"; }
lease_of() { ctl --json vdisk lease show hf | "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# serve_on HOST NAME MAP: a tapdisk of HOST (its namespace, its host id and
# initiator name) serving MAP over NBD at $WORK/NAME.nbd (URI, TD_PID).
serve_on() {
	local t
	rm -f "$WORK/$2.nbd"
	"$LAB" host exec "$1" "$TAPDISK" --foreground \
		-a "stripe:$3,initiator=$IQN:$1,cmd_timeout_ms=60000" --name "$2" \
		--nbd "unix:$WORK/$2.nbd" --log-level info --log-file "$WORK/$2.log" \
		</dev/null >>"$WORK/$2.log" 2>&1 &
	TD_PID=$!
	TD_PIDS+=("$TD_PID")
	URI="nbd+unix:///?socket=$WORK/$2.nbd"
	for ((t = 0; t < 300; t++)); do
		[ -S "$WORK/$2.nbd" ] && return 0
		kill -0 "$TD_PID" 2>/dev/null || break
		sleep 0.05
	done
	return 1
}

# --- 1. A serves; B is refused ---------------------------------------------------
serve_on host-a a "$WORK/hf.map" || { fail "host A serves" "$(tail -5 "$WORK/a.log")"; summary; exit 1; }
A_PID=$TD_PID A_URI=$URI
[ "$(lease_of 'd["holder"], d["epoch"]')" = "host-a 1" ] &&
	pass "host A holds the lease at epoch 1" || fail "A holds the lease" "$(lease_of 'd')"
if serve_on host-b refused "$WORK/hf-b.map"; then
	fail "host B's open while A serves is refused"
else
	grep -q "held by host host-a" "$WORK/refused.log" &&
		pass "host B's open is refused: $(grep -m1 -o 'vdisk hf is held by host host-a[^:]*' "$WORK/refused.log")" ||
		fail "host B's refusal names host-a" "$(tail -3 "$WORK/refused.log")"
fi

# --- 2. A writes; its network is cut -------------------------------------------------
rm -f "$WORK/started"
"$PY" "$WRITER" "$A_URI" "$REGION" "$WORK/a-writes" "$WORK/started" 2>"$WORK/writer.err" &
WRITER_PID=$!
for ((t = 0; t < 600; t++)); do [ -e "$WORK/started" ] && break; sleep 0.05; done
[ -e "$WORK/started" ] && pass "A's writer wrote a first round ($(grep -c '^ack' "$WORK/a-writes") writes)" ||
	fail "A's writer started" "$(cat "$WORK/writer.err")"
"$LAB" host cut host-a 2>/dev/null && pass "host A's network cut while it writes" ||
	fail "lab.sh host cut host-a"
T_CUT=$(date +%s.%N) # writes sent from now on can reach no server before the restore
sleep 1
ACKS_AT_CUT=$(grep -c '^ack' "$WORK/a-writes")

# --- 3. B takes over with fencing ------------------------------------------------------
T_FENCE=$(date +%s.%N)
out=$("$LAB" host exec host-b "$CTL" --master "$LAB_MASTER" --json vdisk lease takeover hf --fence \
	--initiator "$IQN:host-b" 2>"$WORK/fence.err")
rc=$?
"$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
ok = d["holder"] == "host-b" and d["epoch"] == 2 and not d["fence_pending"] \
    and d["fencing_performed"] and d["fence_confirmed"] and len(d["fence"]) == 2 \
    and all(l["result"] == "fenced" for l in d["fence"])
sys.exit(0 if ok else 1)' "$out" 2>/dev/null && [ $rc = 0 ] &&
	pass "B took over with fencing: both LUNs fenced, host-b at epoch 2, fence confirmed" ||
	fail "takeover --fence from host B (exit $rc)" "$out $(cat "$WORK/fence.err")"
ctl host list | grep -q "host-a.*host-b" &&
	pass "the master lists host-a as fenced by host-b" || fail "host-a fenced at the master" "$(ctl host list)"

# --- 4. B serves and writes everything -------------------------------------------------
serve_on host-b b "$WORK/hf-b.map" || { fail "host B serves" "$(tail -5 "$WORK/b.log")"; summary; exit 1; }
B_PID=$TD_PID B_URI=$URI
head -c 32M /dev/urandom >"$WORK/b-data"
out=$(nbdcopy --flush "$WORK/b-data" "$B_URI" 2>&1) &&
	pass "B wrote 32 MiB over the whole disk (flushed)" || fail "B's writes" "$out"

# --- 5. A's network back: its writes are refused -------------------------------------------
"$LAB" host restore host-a 2>/dev/null && pass "host A's network restored" || fail "lab.sh host restore host-a"
for ((t = 0; t < 600; t++)); do
	kill -0 "$WRITER_PID" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$WRITER_PID" 2>/dev/null && { fail "A's writer ends within 60 s of the restore"; kill "$WRITER_PID"; }
wait "$WRITER_PID" 2>/dev/null
# A write sent after the cut cannot have reached a LUN before the fence: it
# must fail.  One sent before may have reached it before the cut (its answer
# lost until the restore): acknowledged late, overwritten by B (checked below).
late=$(awk -v t="$T_CUT" '$1 == "ack" && $5 >= t' "$WORK/a-writes" | wc -l)
early=$(awk -v t="$T_FENCE" '$1 == "ack" && $2 >= t && $5 < '"$T_CUT" "$WORK/a-writes" | wc -l)
errs=$(grep -c '^err\|^gone' "$WORK/a-writes")
[ "$late" = 0 ] && [ "$errs" -gt 0 ] &&
	pass "no write A was sent after the cut was acknowledged; $errs of A's writes failed ($ACKS_AT_CUT acknowledged before the cut, $early sent before it acknowledged after the take-over)" ||
	fail "A's writes after the take-over" "late acks $late, errors $errs; $(tail -3 "$WORK/a-writes") $(tail -5 "$WORK/writer.err")"
conf=$(stripe_field "$A_PID" reservation_conflicts)
stale=$(stripe_field "$A_PID" stale_replicas)
[ "${conf:-0}" -gt 0 ] && [ "${stale:-1}" = 0 ] &&
	pass "A counts $conf reservation conflicts and marked no replica stale" ||
	fail "A's reservation conflicts and stale marks" "conflicts '$conf' stale '$stale'"
grep -q "fenced" "$WORK/a.log" && pass "A's log: $(grep -m1 -o 'this host was fenced[^;]*' "$WORK/a.log" | cut -c1-160)" ||
	fail "A's log says it was fenced" "$(tail -5 "$WORK/a.log")"

# --- 6. the disk holds exactly what B wrote ------------------------------------------------
out=$(nbdcopy "$B_URI" - 2>/dev/null | cmp - "$WORK/b-data" 2>&1) &&
	pass "the whole disk read through B is byte for byte B's data (A's late writes reached no LUN)" ||
	fail "the disk after A came back" "$out"
unserve "$B_PID" b
kill -TERM "$A_PID" 2>/dev/null
wait "$A_PID" 2>/dev/null
TD_PIDS=()

# --- 7. A refused until re-admitted; then it gets the disk back --------------------------------
if serve_on host-a a2 "$WORK/hf-a2.map"; then
	fail "host A's reopen after the fence is refused"
	kill "$TD_PID"
else
	grep -q "fenced by host host-b" "$WORK/a2.log" &&
		pass "host A's reopen is refused: $(grep -m1 -o 'host host-a may not acquire[^;]*' "$WORK/a2.log" | cut -c1-160)" ||
		fail "host A's refusal says it was fenced" "$(tail -3 "$WORK/a2.log")"
fi
ctl host readmit host-a >/dev/null && ctl --host-id host-b vdisk lease handover hf --to host-a >/dev/null &&
	pass "host-a re-admitted and handed the disk back" || fail "readmit and hand-over to host-a"
"$CTL" --master "$LAB_MASTER" vdisk map hf --size 32M --stripe-unit 64K -o "$WORK/hf-a3.map" >/dev/null 2>&1 ||
	cp "$WORK/hf-b.map" "$WORK/hf-a3.map"
if serve_on host-a a3 "$WORK/hf-a3.map"; then
	out=$(nbdcopy "$URI" - 2>/dev/null | cmp - "$WORK/b-data" 2>&1) &&
		pass "host A serves again and reads B's data" || fail "A reads B's data" "$out"
	unserve "$TD_PID" a3
else
	fail "host A serves after readmit and hand-over" "$(tail -3 "$WORK/a3.log")"
fi
summary
