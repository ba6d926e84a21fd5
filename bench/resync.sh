#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# resync.sh - what a resync costs and how fast it goes (issue #19): its
# copy rate against the limit, the foreground I/O a disk keeps during a
# resync, and a resync after a 5 s cut against a whole-extent one.
#
# usage: bench/resync.sh [--seconds S] [--rate RATE]
#   --seconds S  length of each foreground measurement (8)
#   --rate RATE  the limit of the rate measurement, bytes/s (32M)
#
# A lab of 3 servers (tmpfs LUNs, no rate cap) with 64 MiB extents; disk
# rb: 128 MiB, S=1, R=2, regions of 1 MiB, served by one tapdisk with
# auto_resync=off (each resync is started by the script, but the last).
#   1. foreground alone: 1 MiB random reads at QD 8 for S s, then 1 MiB
#      random writes at QD 8 (MB/s): the reference, same run, same machine;
#   2. rate: a server cut while the whole disk is written (so its replicas
#      miss every region), restored; "stripe resync RATE" with nothing
#      else running: bytes copied / the driver's elapsed time, against
#      RATE (the servers' own bandwidth here is far above it);
#   3. the same stale state, a resync at the default rate (64M) while the
#      foreground reads (then, again, writes) of step 1 run: their MB/s
#      against step 1's;
#   4. a 5 s cut under 4 MiB/s of 1 MiB writes, then the automatic resync
#      (tests/faults/cut-resync.py): bytes written during the cut, bytes
#      copied and the resync's time, against what copying the two 64 MiB
#      extents at the same rate takes.
#
# Needs root (tests/lab/lab.sh: namespaces), tgt, python3 with libnbd;
# programs from BUILDDIR/bin (default: build/ above this script).  Brings
# up a lab of its own and takes it down on exit, with its tapdisk (by
# PID).  About 90 s.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILDDIR=${BUILDDIR:-$HERE/../build}
LAB=$HERE/../tests/lab/lab.sh
SECONDS_FG=8
RATE=32M
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) SECONDS_FG=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	-h | --help) sed -n '3,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "resync.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
for p in tapdisk tap-ctl stripe-ctl stripe-master; do
	[ -x "$BUILDDIR/bin/$p" ] || { echo "resync.sh: $BUILDDIR/bin/$p not built" >&2; exit 1; }
done
PY=
for p in python3 /usr/bin/python3; do
	command -v "$p" >/dev/null && "$p" -c 'import nbd' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "resync.sh: python3-libnbd missing" >&2; exit 1; }
TAPCTL=$BUILDDIR/bin/tap-ctl

work=$(mktemp -d /tmp/resync-bench.XXXXXX)
export TAPSTRIPE_RUNDIR=$work/run BUILDDIR
mkdir -p "$TAPSTRIPE_RUNDIR"
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	LAB_STATE=$work/lab bash "$LAB" down >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
lab() { LAB_STATE=$work/lab LAB_NET=auto LAB_RATE=0 LAB_SIZE=256M LAB_EXTENT=64M LAB_DIR=$work/luns bash "$LAB" "$@"; }
lab up 3 >"$work/lab.out" 2>&1 || { cat "$work/lab.out" >&2; exit 1; }
eval "$(lab env)"
"$BUILDDIR/bin/stripe-ctl" --master "$LAB_MASTER" vdisk create rb --size 128M --stripes 1 \
	--stripe-unit 64K --replicas 2 -o "$work/rb.map" >/dev/null || exit 1
"$BUILDDIR/bin/tapdisk" --foreground -a "stripe:$work/rb.map,auto_resync=off,cmd_timeout_ms=3000" --name rb \
	--nbd "unix:$work/rb.nbd" --log-level info --log-file "$work/rb.log" </dev/null &
pid=$!
for ((t = 0; t < 400; t++)); do [ -S "$work/rb.nbd" ] && break; sleep 0.025; done
URI="nbd+unix:///?socket=$work/rb.nbd"
VSRV=$(awk '$1 == "extent" && $2 == 0 && $3 == 0 && $4 == 1 { print $6 }' "$work/rb.map")
VTARGET=$(awk -v n="$VSRV" '$1 == "server" && $2 == n { for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$work/rb.map")
VICTIM=${VTARGET##*-srv}
head -c 128M /dev/urandom >"$work/data"
nbdcopy "$work/data" "$URI" || exit 1

"$PY" - "$URI" "$TAPCTL" "$pid" "$LAB" "$VICTIM" "$work" "$SECONDS_FG" "$RATE" <<'EOF'
import json, os, random, subprocess, sys, time
import nbd
uri, tapctl, pid, lab, victim, work = sys.argv[1:7]
secs, rate_arg = float(sys.argv[7]), sys.argv[8]
env = dict(os.environ, LAB_STATE=work + "/lab")
MIB = 1 << 20
SIZE = 128 * MIB

def sh(*cmd):
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout

def report():
    j = json.loads(sh(tapctl, "stats", "-i", pid, "--json"))
    stack = [j]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            if "resync" in o and "stale_replicas" in o:
                return o
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)

def foreground(write, seconds, until=None):
    """1 MiB random I/O at QD 8: MB/s."""
    h = nbd.NBD(); h.connect_uri(uri)
    rng = random.Random(5); buf = nbd.Buffer(MIB)
    done = [0]
    def cb(*a):
        done[0] += MIB
        return 1
    t0 = last = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if until and time.monotonic() - last > 0.2:
            last = time.monotonic()  # a tap-ctl call: not every pass
            if until():
                break
        while h.aio_in_flight() < 8:
            off = rng.randrange(SIZE // MIB) * MIB
            if write:
                h.aio_pwrite(buf, off, completion=cb)
            else:
                h.aio_pread(buf, off, completion=cb)
        h.poll(-1)
    while h.aio_in_flight():
        h.poll(-1)
    dt = time.monotonic() - t0
    h.shutdown()
    return done[0] / dt / 1e6, dt

def make_stale():
    """Cut the victim, write the whole disk, restore: every region dirty."""
    sh("bash", lab, "cut", victim)
    subprocess.run(["nbdcopy", work + "/data", uri], check=True)
    sh("bash", lab, "restore", victim)
    for _ in range(300):
        st = sh(tapctl, "driver", "-i", pid, "stripe", "status")
        if all(": up," in l for l in st.splitlines() if l.startswith("server ")):
            break
        time.sleep(0.2)
    r = report()
    return r["dirty_regions"]

def wait_resync():
    while True:
        rs = report()["resync"]
        if rs["state"] != "running":
            return rs
        time.sleep(0.05)

print("foreground alone, 1 MiB random, QD 8, %.0f s each:" % secs)
base_r, _ = foreground(False, secs)
base_w, _ = foreground(True, secs)
print("  reads  %8.1f MB/s" % base_r)
print("  writes %8.1f MB/s" % base_w)

dirty = make_stale()
sh(tapctl, "driver", "-i", pid, "stripe", "resync", rate_arg)
rs = wait_resync()
limit = float(rs["rate_bytes_per_s"])
got = rs["bytes_copied"] / (rs["elapsed_us"] / 1e6)
print("resync rate: %d dirty regions, %d bytes copied in %.2f s = %.1f MB/s, limit %.1f MB/s: %.3f x the limit"
      % (dirty, rs["bytes_copied"], rs["elapsed_us"] / 1e6, got / 1e6, limit / 1e6, got / limit))

for write in (False, True):
    make_stale()
    sh(tapctl, "driver", "-i", pid, "stripe", "resync")
    running = lambda: report()["resync"]["state"] != "running"
    mbs, dt = foreground(write, secs, until=running)
    rs = wait_resync()
    base = base_w if write else base_r
    print("during a resync at the default rate (%.0f MB/s, %s, %d bytes copied in %.2f s): "
          "%s %.1f MB/s over %.1f s = %.2f of alone"
          % (rs["rate_bytes_per_s"] / 1e6, rs["state"], rs["bytes_copied"],
             rs["elapsed_us"] / 1e6, "writes" if write else "reads", mbs, dt, mbs / base))
EOF
[ $? = 0 ] || exit 1

"$TAPCTL" driver -i "$pid" stripe resync auto on >/dev/null
out=$("$PY" "$HERE/../tests/faults/cut-resync.py" "$URI" $((128 << 20)) $((1 << 20)) \
	--cut "LAB_STATE=$work/lab bash '$LAB' cut $VICTIM" \
	--restore "LAB_STATE=$work/lab bash '$LAB' restore $VICTIM" \
	--stats "'$TAPCTL' stats -i $pid --json" --cut-s 5 --rate $((4 << 20)) 2>&1)
echo "a 5 s cut under 4 MiB/s of 1 MiB writes, then the automatic resync:"
grep -E "^(figures|PASS|FAIL)" <<<"$out" | sed 's/^/  /'
"$TAPCTL" stats -i "$pid" --json | "$PY" -c '
import json, sys
def find(o):
    if isinstance(o, dict):
        if "resync" in o and "stale_replicas" in o:
            return o
        o = list(o.values())
    for v in o if isinstance(o, list) else []:
        r = find(v)
        if r:
            return r
r = find(json.load(sys.stdin)); rs = r["resync"]
t = rs["elapsed_us"] / 1e6
whole = 2 * r["extent_size_bytes"] / rs["rate_bytes_per_s"]
print("  its resync: %d bytes in %.2f s; the two whole 64 MiB extents at %.0f MB/s: %.2f s (%.1f x longer)"
      % (rs["bytes_copied"], t, rs["rate_bytes_per_s"] / 1e6, whole, whole / t if t else 0))'
