#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# metrics-stripe.sh - tap-ctl metrics of a striped disk (issue #20 item 6).
#
# A disk of 1 column, R=2, on a lab of 2 tgtd servers, served by a
# tapdisk in this test's run directory; written through NBD with server 2
# dead, so its 4 replicas become stale.  tap-ctl metrics must then show
# tapstripe_stripe_stale_replicas 4 for the disk, every value equal to
# tap-ctl stats --all --json (metrics-check.py, prometheus_client's
# parser), and tap-ctl driver stripe status --json the same stripe object.
#
# Exits 77 when root, tgt, libnbd, prometheus_client or the stripe driver
# is missing.  About 15 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

PROM_PY=
for p in python3 /usr/bin/python3; do
	command -v "$p" >/dev/null && "$p" -c 'import prometheus_client' 2>/dev/null &&
		{ PROM_PY=$p; break; }
done
[ -n "$PROM_PY" ] || skip "no python3 with prometheus_client (python3-prometheus-client)"

lab_up 2
make_disk ms 16M 1 64K 2 || { summary; exit 1; }
serve ms "stripe:$WORK/ms.map" || { summary; exit 1; }
# serve runs tapdisk in the foreground: its socket is in the run directory
for ((t = 0; t < 100; t++)); do
	[ -S "$TAPSTRIPE_RUNDIR/tapdisk-$TD_PID.sock" ] && break
	sleep 0.05
done

"$LAB" kill 2 >/dev/null 2>&1 || fail "lab.sh kill 2"
head -c 16M /dev/urandom >"$WORK/data"
out=$(nbdcopy --flush "$WORK/data" "$URI" 2>&1) &&
	pass "16 MiB written with server 2 dead" || fail "write with server 2 dead" "$out"

"$TAPCTL" metrics --output "$WORK/ms.prom" 2>"$WORK/err" &&
	"$TAPCTL" stats --all --json >"$WORK/stats.json" 2>>"$WORK/err" ||
	fail "tap-ctl metrics and stats --all --json" "$(cat "$WORK/err")"
grep -q '^tapstripe_stripe_stale_replicas{disk="ms"} 4$' "$WORK/ms.prom" &&
	pass "tapstripe_stripe_stale_replicas{disk=\"ms\"} 4" ||
	fail "4 stale replicas in the metrics" "$(grep stripe "$WORK/ms.prom")"
out=$("$PROM_PY" "$HERE/metrics-check.py" "$WORK/ms.prom" "$WORK/stats.json" ms 2>&1)
while IFS= read -r line; do
	case $line in
	PASS:*) pass "${line#PASS: }" ;;
	*) fail "metrics-check.py" "$out" ;;
	esac
done <<<"$out"

json=$("$TAPCTL" driver -i "$TD_PID" stripe status --json 2>&1)
out=$("$PY" - "$WORK/stats.json" <<EOF 2>&1
import json, sys
status = json.loads('''$json''')
stats = json.load(open(sys.argv[1]))[0]["drivers"]["stripe"]
assert status["stale_replicas"] == 4, status["stale_replicas"]
assert status["resync"]["state"] == stats["resync"]["state"]
assert status["vdisk"] == "ms" and len(status["servers"]) == 2
assert [s["state"] for s in status["servers"]][0] == "up", status["servers"]
print("ok")
EOF
)
[ "$out" = ok ] && pass "driver stripe status --json: the stats' object, servers' states" ||
	fail "driver stripe status --json" "$out"
"$TAPCTL" driver -i "$TD_PID" stripe status | grep -q "^stale replicas: 4 " &&
	pass "driver stripe status: the text unchanged" || fail "driver stripe status text"

"$LAB" revive 2 >/dev/null 2>&1
unserve "$TD_PID" ms
summary
