#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# al-cost.sh - what the activity log costs a write (issue #19): 4 KiB
# random writes at QD 1 through NBD on a striped disk, with the log on
# (al_regions=1024 entries of 4 MiB) and off (al_regions=0), in turns.
#
# usage: bench/al-cost.sh [--seconds S] [--rounds N] [--size SIZE]
#   --seconds S  length of each measurement (4)
#   --rounds N   on/off pairs, interleaved (3)
#   --size SIZE  the disk (4G): writes land anywhere in it; up to 4 GiB
#                (1024 entries of 4 MiB) the whole disk fits the log, and
#                only the first write to each entry pays; with 16G about
#                3 writes in 4 need an entry not in the log (the worst
#                case: one fdatasync of the log file each)
#
# Prints each run's writes/s and median and p99 latency, then the ratio
# on/off of the medians of the runs.  Needs root (tests/lab/lab.sh), tgt,
# python3 with libnbd; programs from BUILDDIR/bin (default: build/ above
# this script).  Brings up a lab of 3 servers of its own and takes it down
# on exit, with its tapdisks (by PID).  About 40 s.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILDDIR=${BUILDDIR:-$HERE/../build}
LAB=$HERE/../tests/lab/lab.sh
SECS=4
ROUNDS=3
SIZE=4G
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) SECS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	-h | --help) sed -n '3,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "al-cost.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
for p in tapdisk stripe-ctl stripe-master; do
	[ -x "$BUILDDIR/bin/$p" ] || { echo "al-cost.sh: $BUILDDIR/bin/$p not built" >&2; exit 1; }
done
PY=
for p in python3 /usr/bin/python3; do
	command -v "$p" >/dev/null && "$p" -c 'import nbd' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "al-cost.sh: python3-libnbd missing" >&2; exit 1; }

work=$(mktemp -d /var/tmp/al-bench.XXXXXX)
export TAPSTRIPE_RUNDIR=$work/run BUILDDIR
mkdir -p "$TAPSTRIPE_RUNDIR"
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	LAB_STATE=$work/lab bash "$LAB" down >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
lab() { LAB_STATE=$work/lab LAB_NET=auto LAB_RATE=0 LAB_SIZE=24G LAB_EXTENT=256M LAB_DIR=$work/luns bash "$LAB" "$@"; }
lab up 3 >"$work/lab.out" 2>&1 || { cat "$work/lab.out" >&2; exit 1; }
eval "$(lab env)"
"$BUILDDIR/bin/stripe-ctl" --master "$LAB_MASTER" vdisk create ab --size "$SIZE" --stripes 1 \
	--stripe-unit 64K --replicas 2 -o "$work/ab.map" >/dev/null || exit 1

run() { # OPTS: one measurement, prints "writes/s median p99"
	rm -f "$work/ab.nbd"
	"$BUILDDIR/bin/tapdisk" --foreground -a "stripe:$work/ab.map$1" --name ab \
		--nbd "unix:$work/ab.nbd" --log-level warn --log-file "$work/ab.log" </dev/null &
	pid=$!
	for ((t = 0; t < 400; t++)); do [ -S "$work/ab.nbd" ] && break; sleep 0.025; done
	"$PY" - "nbd+unix:///?socket=$work/ab.nbd" "$SECS" <<'EOF'
import random, statistics, sys, time
import nbd
h = nbd.NBD()
for _ in range(100):
    try:
        h.connect_uri(sys.argv[1])
        break
    except nbd.Error:
        time.sleep(0.02)
size, secs = h.get_size(), float(sys.argv[2])
rng, buf, lat = random.Random(9), bytes(4096), []
t_end = time.monotonic() + secs
while time.monotonic() < t_end:
    off = rng.randrange(size // 4096) * 4096
    t0 = time.perf_counter()
    h.pwrite(buf, off)
    lat.append(time.perf_counter() - t0)
h.shutdown()
lat.sort()
print("%.0f %.1f %.1f" % (len(lat) / secs, statistics.median(lat) * 1e6,
                          lat[int(0.99 * (len(lat) - 1))] * 1e6))
EOF
	kill -TERM "$pid"
	wait "$pid"
	pid=
}

echo "4 KiB random writes at QD 1 over $SIZE, R=2, $SECS s each (writes/s, median us, p99 us):"
on=()
off=()
for ((i = 1; i <= ROUNDS; i++)); do
	r=$(run ",al_regions=1024") || exit 1
	echo "  log on  (1024 x 4 MiB): $r"
	on+=("$(cut -d' ' -f2 <<<"$r")")
	r=$(run ",al_regions=0") || exit 1
	echo "  log off:               $r"
	off+=("$(cut -d' ' -f2 <<<"$r")")
done
printf '%s\n' "${on[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' >"$work/on"
printf '%s\n' "${off[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' >"$work/off"
awk -v on="$(cat "$work/on")" -v off="$(cat "$work/off")" \
	'BEGIN { printf "median latency: log on %.1f us, off %.1f us: %.2f x (%+.1f us per write)\n", on, off, on / off, on - off }'
