#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# evacuate.sh - how fast `stripe-ctl server evacuate` re-homes replicas
# and what the disk keeps meanwhile (issue #19, item 3).
#
# usage: bench/evacuate.sh [--seconds S] [--rate RATE]
#   --seconds S  length of each foreground measurement alone (8)
#   --rate RATE  the limit of the rate measurement, bytes/s (32M)
#
# A lab of 6 servers (tmpfs LUNs, no rate cap) with 64 MiB extents; disk
# eb: 256 MiB, S=1, R=2, filled, served by one tapdisk.
#   1. foreground alone: 1 MiB random reads at QD 8 for S s, then writes;
#   2. rate: the server holding the most replicas evacuated with --rate
#      RATE, nothing else running: stripe-ctl's bytes copied / copy time
#      (from "move add" to the swap seen in the map, per replica), and
#      the driver's own (its resync stats: bytes / elapsed, the last run),
#      against RATE;
#   3. the next server evacuated at the default rate (the chain's
#      resync_rate, 64M) while the foreground reads run, then the next
#      one while the writes run: their MB/s against step 1's.
#
# Needs root (tests/lab/lab.sh), tgt, python3 with libnbd; programs from
# BUILDDIR/bin (default: build/ above this script).  Brings up a lab of
# its own and takes it down on exit, with its tapdisk (by PID).  About
# 60 s.
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
	-h | --help) sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "evacuate.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
for p in tapdisk tap-ctl stripe-ctl stripe-master; do
	[ -x "$BUILDDIR/bin/$p" ] || { echo "evacuate.sh: $BUILDDIR/bin/$p not built" >&2; exit 1; }
done
PY=
for p in python3 /usr/bin/python3; do
	command -v "$p" >/dev/null && "$p" -c 'import nbd' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "evacuate.sh: python3-libnbd missing" >&2; exit 1; }

work=$(mktemp -d /tmp/evacuate-bench.XXXXXX)
export TAPSTRIPE_RUNDIR=$work/run BUILDDIR
mkdir -p "$TAPSTRIPE_RUNDIR"
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	LAB_STATE=$work/lab bash "$LAB" down >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
lab() { LAB_STATE=$work/lab LAB_NET=auto LAB_RATE=0 LAB_SIZE=512M LAB_EXTENT=64M LAB_DIR=$work/luns bash "$LAB" "$@"; }
lab up 6 >"$work/lab.out" 2>&1 || { cat "$work/lab.out" >&2; exit 1; }
eval "$(lab env)"
CTL="$BUILDDIR/bin/stripe-ctl --master $LAB_MASTER"
$CTL vdisk create eb --size 256M --stripes 1 --stripe-unit 64K --replicas 2 \
	-o "$work/eb.map" >/dev/null || exit 1
"$BUILDDIR/bin/tapdisk" --foreground -a "stripe:$work/eb.map,cmd_timeout_ms=3000" --name eb \
	--nbd "unix:$work/eb.nbd" --log-level info --log-file "$work/eb.log" </dev/null &
pid=$!
for ((t = 0; t < 400; t++)); do [ -S "$work/eb.nbd" ] && break; sleep 0.025; done
URI="nbd+unix:///?socket=$work/eb.nbd"
head -c 256M /dev/urandom | nbdcopy - "$URI" || exit 1

"$PY" - "$URI" "$BUILDDIR/bin/tap-ctl" "$pid" "$work" "$SECONDS_FG" "$RATE" \
	"$BUILDDIR/bin/stripe-ctl" "$LAB_MASTER" <<'EOF'
import json, os, random, subprocess, sys, time
import nbd
uri, tapctl, pid, work = sys.argv[1:5]
secs, rate_arg, ctl, master = float(sys.argv[5]), sys.argv[6], sys.argv[7], sys.argv[8]
MIB = 1 << 20
SIZE = 256 * MIB

def sh(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

def busiest():
    """The target of the server (state ok) holding the most replicas."""
    s = json.loads(sh(ctl, "--master", master, "--json", "server", "list"))
    s = [x for x in s if x["state"] == "ok" and x["replicas"]]
    return max(s, key=lambda x: x["replicas"])["target"]

def evacuate(target, rate=None):
    cmd = [ctl, "--master", master, "--json", "server", "evacuate", "--target", target,
           "--lun", "1", work + "/eb.map"] + (["--rate", rate] if rate else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

def finish(p):
    out, err = p.communicate()
    if p.returncode:
        sys.exit("evacuate failed: " + err)
    return json.loads(out)

def driver_run():
    j = json.loads(sh(tapctl, "stats", "-i", pid, "--json"))
    stack = [j]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            if "resync" in o and "stale_replicas" in o:
                return o["resync"]
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
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds and not (until and until()):
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

print("foreground alone, 1 MiB random, QD 8, %.0f s each:" % secs)
base = {False: foreground(False, secs)[0], True: foreground(True, secs)[0]}
print("  reads  %8.1f MB/s" % base[False])
print("  writes %8.1f MB/s" % base[True])

j = finish(evacuate(busiest(), rate_arg))
rs = driver_run()
limit = float(rs["rate_bytes_per_s"])
got = j["copy_rate_bytes_per_s"]
drv = rs["bytes_copied"] / (rs["elapsed_us"] / 1e6) if rs["elapsed_us"] else 0
print("evacuation at --rate %s: %d replicas, %d bytes in %.2f s (copy time), %.2f s in all: "
      "%.1f MB/s = %.3f x the limit; the driver's last run: %d bytes in %.2f s = %.3f x"
      % (rate_arg, j["moved"], j["bytes_copied"], j["copy_ms"] / 1e3, j["elapsed_ms"] / 1e3,
         got / 1e6, got / limit, rs["bytes_copied"], rs["elapsed_us"] / 1e6, drv / limit))

for write in (False, True):
    p = evacuate(busiest())
    mbs, dt = foreground(write, 600, until=lambda: p.poll() is not None)
    j = finish(p)
    print("during an evacuation at the default rate (%d replicas, %.1f MB/s copied, %.1f s): "
          "%s %.1f MB/s over %.1f s = %.2f of alone"
          % (j["moved"], j["copy_rate_bytes_per_s"] / 1e6, j["elapsed_ms"] / 1e3,
             "writes" if write else "reads", mbs, dt, mbs / base[write]))
EOF
