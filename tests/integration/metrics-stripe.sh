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
# stripe-ctl metrics (the master's) parses too, and says what stripe-ctl
# server list and vdisk list --json say: free extents, states, 4 stale
# replicas of the disk.
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

# The master's metrics: once the master knows of the 4 stale replicas,
# they and every server's free extents equal stripe-ctl's JSON.
for ((t = 0; t < 50; t++)); do
	"$CTL" --master "$LAB_MASTER" metrics -o "$WORK/master.prom" 2>"$WORK/err" ||
		{ fail "stripe-ctl metrics -o" "$(cat "$WORK/err")"; break; }
	grep -q '^tapstripe_master_disk_stale_replicas{disk="ms"} 4$' "$WORK/master.prom" && break
	sleep 0.2
done
"$CTL" --master "$LAB_MASTER" --json server list >"$WORK/servers.json"
"$CTL" --master "$LAB_MASTER" --json vdisk list >"$WORK/vdisks.json"
out=$("$PROM_PY" - "$WORK/master.prom" "$WORK/servers.json" "$WORK/vdisks.json" <<'PY' 2>&1
import json, sys
from prometheus_client.parser import text_string_to_metric_families
fams = list(text_string_to_metric_families(open(sys.argv[1]).read()))
servers = json.load(open(sys.argv[2]))
vdisks = json.load(open(sys.argv[3]))
names = [f.name for f in fams]
assert len(names) == len(set(names)), names
assert all(f.name.startswith("tapstripe_master_") and f.documentation and f.type == "gauge"
           for f in fams), [(f.name, f.type) for f in fams]
got = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in fams for s in f.samples}
for srv in servers:
    key = (("server", str(srv["id"])),)
    assert got[("tapstripe_master_server_free_extents", key)] == srv["free_extents"], srv
    assert got[("tapstripe_master_server_extents", key)] == srv["extents"], srv
    assert got[("tapstripe_master_server_stale_replicas", key)] == srv["stale_replicas"], srv
    assert got[("tapstripe_master_server_state", key + (("state", srv["state"]),))] == 1, srv
for v in vdisks:
    key = (("disk", v["vdisk"]),)
    assert got[("tapstripe_master_disk_stale_replicas", key)] == v["stale_replicas"], v
    assert got[("tapstripe_master_disk_under_replicated_extents", key)] == v["under_replicated"], v
    assert got[("tapstripe_master_disk_moves", key)] == v["moves"], v
assert got[("tapstripe_master_disk_stale_replicas", (("disk", "ms"),))] == 4
print("ok %d families, %d servers, %d disks" % (len(fams), len(servers), len(vdisks)))
PY
)
[[ $out == ok* ]] && pass "stripe-ctl metrics: parsed, equal to server list and vdisk list ($out)" ||
	fail "stripe-ctl metrics" "$out"
[ "$(ls "$WORK" | grep -c 'master.prom.tmp')" = 0 ] && pass "stripe-ctl metrics -o: no temporary file left" ||
	fail "stripe-ctl metrics -o left a temporary file"

"$LAB" revive 2 >/dev/null 2>&1
unserve "$TD_PID" ms
summary
