#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-fence.sh - a tapdisk's sessions are admitted with SCSI-3
# persistent reservations (drivers/stripe/stripe-fence.c; issue #18).
#
# A disk of S=2 columns, U=64 KiB, R=2 on a lab of 2 servers (every server
# holds a replica of every extent), served by a tapdisk of host "host-a"
# that holds the disk's lease at the lab's master.  Checked:
#   - every LUN shows host-a's key (READ KEYS through the harness) and a
#     Write Exclusive - Registrants Only reservation; tap-ctl stats says
#     "fence": "registered" for every server; writes go through;
#   - server 1 killed and revived (tgtd loses every registration): the
#     tapdisk re-admits its new session through the master (key absent),
#     the key is back on the LUN and writes go on, nothing marked stale;
#   - host "host-b" preempts host-a's key on server 2 (the harness, as a
#     fenced takeover would): the tapdisk's writes fail, no replica is
#     marked stale, tap-ctl stats counts the reservation conflicts and
#     says "fenced", the log says the host was fenced;
#   - the LUN holds no byte of the refused writes.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About 20 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

HARNESS=$BUILDDIR/tests/integration/iscsi-conn-harness
[ -x "$HARNESS" ] || { echo "FAIL: $HARNESS not built"; exit 1; }
export TAPSTRIPE_HOST_ID=host-a

# key HOST: the reservation key of a host (iscsi_conn_pr_key: FNV-1a 64).
key() {
	"$PY" -c 'import sys
h = 0xcbf29ce484222325
for b in sys.argv[1].encode():
    h = ((h ^ b) * 0x100000001b3) % 2**64
print("0x%016x" % (h or 1))' "$1"
}
KEY_A=$(key host-a)

# harness I CASE [ARGS...]: the harness against server I's LUN.
harness() {
	local i=$1 what=$2 a t
	shift 2
	a=LAB_SRV${i}_ADDR t=LAB_SRV${i}_TARGET
	timeout 30 "$HARNESS" --portal "${!a}:3260" --target "${!t}" --lun 1 \
		--initiator "iqn.2026-11.org.tapstripe:fence-test-$what" \
		--timeout-ms 5000 "$@" "$what" 2>&1
}

# stat KEY [SERVER]: a value of tap-ctl stats --json (the stripe driver's,
# or server SERVER's), "" when absent.
stat() {
	"$TAPCTL" stats -i "$TD_PID" --json 2>/dev/null | "$PY" -c '
import json, sys
want, srv = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
def walk(o):
    if isinstance(o, dict):
        if srv is None and want in o and "servers" in o:
            print(o[want]); sys.exit(0)
        if srv is not None and o.get("index") == int(srv) and want in o:
            print(o[want]); sys.exit(0)
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(json.load(sys.stdin))' "$@"
}

# nbd_write SEED: write 64 KiB of SEED at every 64 KiB of the disk, flush;
# prints "ok" or the first error.
nbd_write() {
	"$PY" -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri(sys.argv[1])
buf = bytes([int(sys.argv[2])]) * 65536
try:
    for off in range(0, h.get_size(), 65536):
        h.pwrite(buf, off)
    h.flush()
    print("ok")
except nbd.Error as e:
    print("error", e.errno, e.string)' "$URI" "$1" 2>&1
}

# wait_for SECONDS CMD...: until CMD succeeds.
wait_for() {
	local end=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -ge "$end" ] && return 1
		sleep 0.2
	done
}

# idx L: the stats index of lab server L (the map's server order).
idx() {
	"$TAPCTL" stats -i "$TD_PID" --json 2>/dev/null | "$PY" -c '
import json, sys
def walk(o):
    if isinstance(o, dict):
        if "index" in o and str(o.get("target", "")).endswith("-srv" + sys.argv[1]):
            print(o["index"]); sys.exit(0)
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(json.load(sys.stdin))' "$1"
}

registered() { [ "$(stat fence "$1")" = registered ]; }
has_key() { harness "$1" pr-keys | grep -q "^keys:.*$KEY_A"; }

lab_up 2
MAP=$WORK/e1.map
make_disk e1 8M 2 64K 2 || { summary; exit 1; }
serve e1 "stripe:$MAP" || { summary; exit 1; }

# --- admitted at open ---------------------------------------------------------
S1=$(idx 1) S2=$(idx 2)
[ -n "$S1" ] && [ -n "$S2" ] || fail "the map's servers in tap-ctl stats" "$S1 $S2"
for i in "$S1" "$S2"; do
	wait_for 15 registered "$i" && pass "server $i: \"fence\": \"registered\"" ||
		fail "server $i registered" "fence: $(stat fence "$i"); $(tail -5 "$WORK/e1.log")"
done
for i in 1 2; do
	out=$(harness "$i" pr-keys)
	grep -q "^keys:.*$KEY_A" <<<"$out" && grep -q "^reservation: 0x.* type 5" <<<"$out" &&
		pass "lab server $i: host-a's key $KEY_A registered, WERO reservation" ||
		fail "lab server $i: host-a's key and a WERO reservation" "$(grep -E '^(keys|reservation|FAILED)' <<<"$out")"
done
out=$(nbd_write 1)
[ "$out" = ok ] && pass "writes go through" || fail "writes go through" "$out"

# --- a server restart loses every registration: re-admitted via the master -----
ADM0=$(stat fence_admissions "$S1")
"$LAB" kill 1 >/dev/null 2>&1 && "$LAB" revive 1 >/dev/null 2>&1 ||
	fail "lab.sh kill/revive 1"
# The revived tgtd has no registration, unless tapdisk already made its
# new one (it reconnects on its own: then its admissions went up).
out=$(harness 1 pr-keys)
grep -q "$KEY_A" <<<"$out" && [ "$(stat fence_admissions "$S1")" = "$ADM0" ] &&
	fail "the revived tgtd lost its registrations" "$out"
readmitted() { [ "$(stat fence_admissions "$S1")" != "$ADM0" ]; }
if wait_for 30 has_key 1 && wait_for 10 registered "$S1" && wait_for 10 readmitted; then
	pass "server 1 revived: host-a's key registered again (admissions $(stat fence_admissions "$S1"))"
else
	fail "server 1 re-admitted within 30 s" "fence: $(stat fence "$S1"); $(grep -i fence "$WORK/e1.log" | tail -5)"
fi
out=$(nbd_write 2)
[ "$out" = ok ] && pass "writes go on after the re-admission" || fail "writes after the re-admission" "$out"
[ "$(stat stale_replicas)" = 0 ] && pass "no replica stale" ||
	fail "no replica stale" "stale_replicas: $(stat stale_replicas)"

# --- host-b preempts host-a on server 2: fenced, cleanly -------------------------
out=$(harness 2 pr-preempt --pr-host host-b --pr-victim host-a)
grep -q "^FAILED" <<<"$out" && fail "host-b preempts host-a on server 2" "$(grep -E '^(ok|FAILED)' <<<"$out")"
cp "$LAB_SRV2_LUN" "$WORK/lun2.before" 2>/dev/null
out=$(nbd_write 3)
[[ $out == error* ]] && pass "a fenced host's writes fail ($out)" ||
	fail "a fenced host's writes fail" "$out"
[ "$(stat stale_replicas)" = 0 ] && pass "no replica marked stale by the refusals" ||
	fail "no replica marked stale by the refusals" "stale_replicas: $(stat stale_replicas)"
n=$(stat reservation_conflicts)
[ "${n:-0}" -ge 1 ] && pass "reservation_conflicts counted ($n; lab server 2: $(stat reservation_conflicts "$S2"))" ||
	fail "reservation_conflicts counted" "$n"
[ "$(stat fence "$S2")" = fenced ] && pass "lab server 2: \"fence\": \"fenced\"" ||
	fail "lab server 2 fenced in tap-ctl stats" "$(stat fence "$S2")"
grep -q "this host was fenced from LUN" "$WORK/e1.log" && pass "the log says this host was fenced" ||
	fail "the log says this host was fenced" "$(tail -5 "$WORK/e1.log")"
if [ -f "$WORK/lun2.before" ]; then
	cmp -s "$WORK/lun2.before" "$LAB_SRV2_LUN" &&
		pass "server 2's LUN holds no byte of the refused writes" ||
		fail "server 2's LUN unchanged by the refused writes"
fi

# A fenced tapdisk cannot flush: it stops on SIGTERM, whatever its status.
kill -TERM "$TD_PID" 2>/dev/null
wait_for 20 eval '! kill -0 "$TD_PID" 2>/dev/null' && pass "tapdisk stopped" ||
	fail "tapdisk stopped within 20 s"
grep -q "Sanitizer\|runtime error" "$WORK/e1.log" &&
	fail "no sanitizer report in the tapdisk log" "$(grep -A5 "Sanitizer\|runtime error" "$WORK/e1.log")"
summary
