#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-lease.sh - tapdisk takes a striped disk's lease at open (issue #18),
# against the lab's tgtd servers and master, with hosts as the lab's
# network namespaces (lab.sh host add: host-a, host-b, host-c, each its
# own address, host id and initiator name, and its own copy of the map):
#   - host A opens and serves; tap-ctl info and "stripe lease" show host-a
#     at epoch N; the master shows the same;
#   - host B's open is refused naming host-a while A serves on undisturbed;
#   - A's tapdisk restarted keeps epoch N;
#   - hand-over under a writer (4 KiB, QD 8, lease-writer.py): A's
#     "stripe handover host-b" while the writer writes; the writer moves to
#     a tapdisk of host B; every acknowledged write reads back byte-exact
#     from B; A refuses I/O; the writer's longest stall is printed;
#   - the master killed: B serves on; a new open (host C) fails saying the
#     master is unreachable.
# Runs in about 20 s.

LAB_SERVERS=2
. "$(dirname "$0")/stripe-lib.sh"

WRITER=$HERE/lease-writer.py
lab_up 2
make_disk ls 64M 2 64K 2 || { summary; exit 1; }
MAP=$WORK/ls.map
cp "$MAP" "$WORK/ls-b.map"
cp "$MAP" "$WORK/ls-c.map"

tdctl() { "$TAPCTL" driver -i "$1" stripe "${@:2}" 2>&1; }
lease_epoch() { # the master's epoch of ls
	"$CTL" --master "$LAB_MASTER" --json vdisk lease show ls 2>/dev/null |
		"$PY" -c 'import json, sys; d = json.load(sys.stdin); print(d["holder"], d["epoch"])'
}

for h in host-a host-b host-c; do
	"$LAB" host add "$h" >/dev/null || { fail "lab.sh host add $h"; summary; exit 1; }
	# tapdisk run inside host h (the PID is tapdisk's: each step execs)
	printf '#!/bin/sh\nexec "%s" host exec %s "%s" "$@"\n' "$LAB" "$h" "$TAPDISK" >"$WORK/tapdisk-$h"
	chmod +x "$WORK/tapdisk-$h"
done

# serve_as HOST NAME MAPFILE: serve as HOST, from its namespace, with its
# initiator name (TD_PID, URI).
serve_as() {
	TAPDISK=$WORK/tapdisk-$1 serve "$2" "stripe:$3,initiator=iqn.2026-11.org.tapstripe:$1"
}

# refused_as HOST MAPFILE WHAT PATTERN: a tapdisk as HOST must fail to open,
# its first line matching PATTERN.
refused_as() {
	local out rc
	out=$(timeout 30 "$WORK/tapdisk-$1" --foreground -a "stripe:$2" \
		--name "refused-$1" --nbd "unix:$WORK/refused.nbd" 2>&1 </dev/null)
	rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && grep -q -- "$4" <<<"$out" &&
		pass "$3: $(grep -m1 -- "$4" <<<"$out" | cut -c1-220)" ||
		fail "$3 (exit $rc)" "$out"
}

# --- host A serves ----------------------------------------------------------
serve_as host-a a "$MAP" || { summary; exit 1; }
A_PID=$TD_PID A_URI=$URI
read -r holder epoch <<<"$(lease_epoch)"
[ "$holder" = host-a ] && [ -n "$epoch" ] && [ "$epoch" -ge 1 ] &&
	pass "the master shows host-a holding ls at epoch $epoch" ||
	fail "the master shows host-a as the holder" "$holder $epoch"
out=$(tdctl "$A_PID" lease)
grep -q "lease: held, holder host-a, epoch $epoch" <<<"$out" &&
	pass "stripe lease: $(head -1 <<<"$out")" || fail "stripe lease shows host-a at $epoch" "$out"
out=$("$TAPCTL" info -i "$A_PID" 2>&1)
grep -q "lease: held, holder host-a, epoch $epoch" <<<"$out" &&
	pass "tap-ctl info shows holder and epoch" || fail "tap-ctl info shows the lease" "$out"
out=$("$TAPCTL" info -i "$A_PID" --json 2>&1)
"$PY" -c 'import json, sys; l = json.load(sys.stdin)["drivers"]["stripe"]["lease"]; sys.exit(not (l["holder"] == "host-a" and l["state"] == "held" and l["epoch"] == int(sys.argv[1])))' \
	"$epoch" <<<"$out" && pass "tap-ctl info --json: drivers.stripe.lease" ||
	fail "tap-ctl info --json shows the lease" "$out"

# --- host B is refused while A serves on --------------------------------------
head -c 8M /dev/urandom >"$WORK/d1"
nbdcopy --flush "$WORK/d1" "$A_URI" &
COPY=$!
refused_as host-b "$WORK/ls-b.map" "host B's open is refused" "held by host host-a"
wait $COPY && pass "A wrote 8 MiB meanwhile" || fail "A's write during B's open"
out=$(nbdcopy "$A_URI" - 2>&1 | head -c 8M | cmp - "$WORK/d1" 2>&1) &&
	pass "A's data reads back byte-exact" || fail "A's data after B's refusal" "$out"

# --- a restart on the same host keeps the lease ------------------------------------
unserve "$A_PID" a
serve_as host-a a "$MAP" || { summary; exit 1; }
A_PID=$TD_PID A_URI=$URI
read -r holder epoch2 <<<"$(lease_epoch)"
[ "$holder" = host-a ] && [ "$epoch2" = "$epoch" ] &&
	pass "A's tapdisk restarted keeps the lease at epoch $epoch" ||
	fail "a restart keeps the epoch" "$holder $epoch2 (was $epoch)"

# --- hand-over under a writer ---------------------------------------------------------
rm -f "$WORK/switch" "$WORK/started"
"$PY" "$WRITER" "$A_URI" "$WORK/switch" "$WORK/started" 3000 8 >"$WORK/writer.out" 2>&1 &
WRITER_PID=$!
for ((t = 0; t < 300; t++)); do [ -e "$WORK/started" ] && break; sleep 0.02; done
out=$(tdctl "$A_PID" handover host-b)
grep -q "handing over vdisk ls to host-b\|handed over" <<<"$out" &&
	pass "stripe handover host-b: $(head -1 <<<"$out")" || fail "stripe handover host-b" "$out"
for ((t = 0; t < 200; t++)); do
	out=$(tdctl "$A_PID" handover host-b)
	grep -q "handed over" <<<"$out" && break
	sleep 0.05
done
grep -q "held by host-b at epoch $((epoch + 1))" <<<"$out" &&
	pass "A handed over: $(head -1 <<<"$out")" || fail "the hand-over completes" "$out"
serve_as host-b b "$WORK/ls-b.map" || { summary; exit 1; }
B_PID=$TD_PID
echo "$URI" >"$WORK/switch"
wait $WRITER_PID
rc=$?
while IFS= read -r line; do
	case $line in
	PASS:*) pass "${line#PASS: }" ;;
	FAIL:*) fail "${line#FAIL: }" ;;
	FIGURE:*) echo "$line (from the last write acknowledged by A to the first by B, B's start included)" ;;
	esac
done <"$WORK/writer.out"
[ $rc = 0 ] || fail "the writer (exit $rc)" "$(cat "$WORK/writer.out")"
out=$(tdctl "$A_PID" lease)
grep -q "handed-over, holder host-b, epoch $((epoch + 1))" <<<"$out" &&
	pass "A: $(head -1 <<<"$out")" || fail "A shows the lease handed over" "$out"
echo "FIGURE: A held writes for $(sed -n 's/.*writes were held \([0-9]*\) us.*/\1/p' <<<"$(tdctl "$A_PID" handover host-b)") us during the hand-over"
read -r holder epoch3 <<<"$(lease_epoch)"
[ "$holder" = host-b ] && [ "$epoch3" = $((epoch + 1)) ] &&
	pass "the master: host-b at epoch $epoch3" || fail "the master shows host-b" "$holder $epoch3"
refused_as host-a "$WORK/ls-c.map" "host A cannot open the disk again" "held by host host-b"

# --- the master killed: B serves on, a new open is refused ------------------------------
read -r MASTER_PID _ <"$LAB_STATE/master.pid" # "PID STARTTIME"
kill -KILL "$MASTER_PID" 2>/dev/null && pass "the master killed (kill -9)" ||
	fail "kill -9 the master ($MASTER_PID)"
head -c 4M /dev/urandom >"$WORK/d2"
out=$(nbdcopy --flush "$WORK/d2" "$URI" 2>&1) && cmp -s <(nbdcopy "$URI" - | head -c 4M) "$WORK/d2" &&
	pass "the master killed: B serves on (4 MiB written and read back)" ||
	fail "B serves with the master dead" "$out"
refused_as host-c "$WORK/ls-c.map" "a new open with the master dead" "cannot reach the master at"
unserve "$B_PID" b
summary
