#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# lease-open.sh - what the lease costs (issue #18): the open time of a
# striped disk with lease=on against lease=off, and the writer's stall
# during a hand-over.
#
# usage: bench/lease-open.sh [--opens N] [--writes N] [--handovers N]
#   --opens N      opens of each kind, interleaved on/off in one run (40)
#   --writes N     4 KiB writes of each hand-over's writer (3000)
#   --handovers N  hand-overs, back and forth between host-a and host-b (7)
#
# Open time: from starting a foreground tapdisk on the disk until a 4 KiB
# NBD read through it has completed (exec, map, lease, iSCSI logins,
# geometry checks, the first read): median and p99 of N opens of each
# kind.  lease=on asks the lab's master (same machine: a loopback round
# trip and a committed transaction when the lease changes; the lease of
# one host is kept, so after the first open each acquire changes
# nothing).  Hand-over: tests/integration/lease-writer.py writes 4 KiB
# blocks at QD 8 through host A's tapdisk; "stripe handover host-b"; the
# writer moves to a tapdisk of host B started once A has handed over;
# then back from B to A, N times in all.  Reported, median and worst of
# the N: the source's held time (the driver's own figure: drain,
# SYNCHRONIZE CACHE, the master's call) and the writer's longest stall
# (the destination's start included).
#
# Needs root (tests/lab/lab.sh: namespaces), tgt, python3 with libnbd;
# programs from BUILDDIR/bin (default: build/ above this script).  Brings
# up a lab of 2 servers of its own and takes it down on exit, with every
# tapdisk it started (by PID).  About 40 s.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILDDIR=${BUILDDIR:-$HERE/../build}
LAB=$HERE/../tests/lab/lab.sh
WRITER=$HERE/../tests/integration/lease-writer.py
OPENS=40
WRITES=3000
HANDOVERS=7
while [ $# -gt 0 ]; do
	case $1 in
	--opens) OPENS=$2; shift 2 ;;
	--writes) WRITES=$2; shift 2 ;;
	--handovers) HANDOVERS=$2; shift 2 ;;
	-h | --help) sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "lease-open.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
for p in tapdisk tap-ctl stripe-ctl stripe-master; do
	[ -x "$BUILDDIR/bin/$p" ] || { echo "lease-open.sh: $BUILDDIR/bin/$p not built" >&2; exit 1; }
done
# libnbd's Python module is the system Python's (a pyenv python3 may lack it)
PY=
for p in python3 /usr/bin/python3; do
	command -v "$p" >/dev/null && "$p" -c 'import nbd' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "lease-open.sh: python3-libnbd missing" >&2; exit 1; }

work=$(mktemp -d /tmp/lease-bench.XXXXXX)
export TAPSTRIPE_RUNDIR=$work/run BUILDDIR
mkdir -p "$TAPSTRIPE_RUNDIR"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	LAB_STATE=$work/lab bash "$LAB" down >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
lab() { LAB_STATE=$work/lab LAB_NET=auto LAB_RATE=0 LAB_SIZE=256M LAB_EXTENT=4M LAB_DIR=$work/luns bash "$LAB" "$@"; }
lab up 2 >"$work/lab.out" 2>&1 || { cat "$work/lab.out" >&2; exit 1; }
eval "$(lab env)"
"$BUILDDIR/bin/stripe-ctl" --master "$LAB_MASTER" vdisk create lb --size 64M --stripes 2 \
	--stripe-unit 64K --replicas 2 -o "$work/lb.map" >/dev/null || exit 1

# --- open times -----------------------------------------------------------------------
"$PY" - "$BUILDDIR/bin/tapdisk" "$work" "$OPENS" <<'EOF'
import os, statistics, subprocess, sys, time
import nbd
tapdisk, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ, TAPSTRIPE_HOST_ID="host-a")

def one(opts):
    sock = "%s/open.nbd" % work
    if os.path.exists(sock):
        os.unlink(sock)
    t0 = time.monotonic()
    p = subprocess.Popen([tapdisk, "--foreground", "-a", "stripe:%s/lb.map%s" % (work, opts),
                          "--name", "open", "--nbd", "unix:" + sock, "--log-level", "warn",
                          "--log-file", work + "/open.log"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    try:
        while not os.path.exists(sock):
            if p.poll() is not None:
                sys.exit("tapdisk exited %d: see %s/open.log" % (p.returncode, work))
            time.sleep(0.0005)
        while True:  # the socket file appears at bind, before listen
            h = nbd.NBD()
            try:
                h.connect_uri("nbd+unix:///?socket=" + sock)
                break
            except nbd.Error:
                if p.poll() is not None:
                    raise
                time.sleep(0.0005)
        h.pread(4096, 0)
        dt = time.monotonic() - t0
        h.shutdown()
    finally:
        p.terminate()
        p.wait()
    return dt * 1000

res = {",lease=on": [], ",lease=off": []}
for i in range(n):
    for opts in res:
        res[opts].append(one(opts))
def p99(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
print("open until the first 4 KiB read completes, %d opens each, interleaved:" % n)
for opts, v in res.items():
    print("  %-11s median %7.2f ms   p99 %7.2f ms" % (opts[1:], statistics.median(v), p99(v)))
on, off = res[",lease=on"], res[",lease=off"]
print("  the lease adds: median %+.2f ms, p99 %+.2f ms"
      % (statistics.median(on) - statistics.median(off), p99(on) - p99(off)))
EOF
[ $? = 0 ] || exit 1

# --- hand-over stall ------------------------------------------------------------------------
serve() { # HOST NAME MAP: a foreground tapdisk with NBD on $work/NAME.nbd
	TAPSTRIPE_HOST_ID=$1 "$BUILDDIR/bin/tapdisk" --foreground -a "stripe:$3" --name "$2" \
		--nbd "unix:$work/$2.nbd" --log-level warn --log-file "$work/$2.log" </dev/null &
	pids+=($!)
	for ((t = 0; t < 400; t++)); do [ -S "$work/$2.nbd" ] && return 0; sleep 0.025; done
	echo "lease-open.sh: tapdisk $2 did not start: $(tail -2 "$work/$2.log")" >&2
	exit 1
}
# handover_once FROM TO: FROM's tapdisk ($src_pid) hands over to TO under a
# writer, and TO's tapdisk starts on a copy of the map; appends "HELD_US
# STALL_MS" to $work/handovers; leaves TO's tapdisk in $src_pid.
handover_once() {
	local from=$1 to=$2 out held stall t
	rm -f "$work/switch" "$work/started"
	"$PY" "$WRITER" "nbd+unix:///?socket=$work/$from.nbd" "$work/switch" "$work/started" \
		"$WRITES" 8 >"$work/writer.out" 2>&1 &
	w_pid=$!
	for ((t = 0; t < 500; t++)); do [ -e "$work/started" ] && break; sleep 0.01; done
	"$BUILDDIR/bin/tap-ctl" driver -i "$src_pid" stripe handover "$to" >/dev/null
	for ((t = 0; t < 400; t++)); do
		out=$("$BUILDDIR/bin/tap-ctl" driver -i "$src_pid" stripe handover "$to" 2>&1)
		grep -q "handed over\|failed" <<<"$out" && break
		sleep 0.005
	done
	cp "$work/lb.map" "$work/lb-$to.map"
	serve "$to" "$to" "$work/lb-$to.map"
	echo "nbd+unix:///?socket=$work/$to.nbd" >"$work/switch"
	wait "$w_pid" || { cat "$work/writer.out" >&2; exit 1; }
	held=$(sed -n 's/.*writes were held \([0-9]*\) us.*/\1/p' <<<"$out")
	stall=$(sed -n 's/^FIGURE: longest stall \([0-9.]*\) ms.*/\1/p' "$work/writer.out")
	kill -TERM "$src_pid" 2>/dev/null
	wait "$src_pid" 2>/dev/null
	src_pid=${pids[-1]}
	echo "${held:-0} ${stall:-0}" >>"$work/handovers"
}
cp "$work/lb.map" "$work/lb-host-a.map"
serve host-a host-a "$work/lb-host-a.map"
src_pid=${pids[-1]}
from=host-a to=host-b
: >"$work/handovers"
for ((i = 0; i < HANDOVERS; i++)); do
	handover_once "$from" "$to"
	tmp=$from from=$to to=$tmp
done
"$PY" - "$work/handovers" <<'EOF'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
held = [r[0] / 1000 for r in rows]
stall = [r[1] for r in rows]
print("hand-over under a 4 KiB QD 8 write stream, %d hand-overs back and forth:" % len(rows))
print("  the source held writes:     median %6.1f ms, worst %6.1f ms (drain, SYNCHRONIZE CACHE, the master's call)"
      % (statistics.median(held), max(held)))
print("  the writer's longest stall: median %6.1f ms, worst %6.1f ms (the destination's start included)"
      % (statistics.median(stall), max(stall)))
EOF
