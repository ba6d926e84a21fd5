#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-scaling.sh - striped disks over iSCSI servers capped in bandwidth:
# scaling with the number of servers, against fio's libiscsi engine, the
# thesis's figure 6.1, and the cost of a second replica.
#
# usage: bench/stripe-scaling.sh [--quick] [--reps N] [--runtime S]
#                                [--rate R] [--qd N] [--parts a,b,c]
#                                [--json FILE] [--fio PATH]
#   --reps N       repetitions; medians are reported with their spread (3)
#   --runtime S    seconds per timed run (8)
#   --rate R       every server's bandwidth cap, MiB/s each way (100); 50
#                  is the documented fallback for a machine that cannot
#                  move 4 x 100 MiB/s through iSCSI on its CPUs
#   --qd N         I/Os in flight for parts a and c (16)
#   --parts LIST   which parts, of a, b, c (default all)
#   --json FILE    also write every figure there (format below)
#   --fio PATH     a fio with the libiscsi engine (default: the one
#                  bench/build-fio.sh builds or finds in its cache)
#   --quick        --runtime 3 --reps 1
#
# Needs root (the lab: network namespaces, tc), tgt, python3, and the
# programs: $TAPDISK, $TDFRONT, $STRIPECTL if set, else BUILDDIR/bin/
# (BUILDDIR defaults to the directory above this script), else PATH;
# stripe-master too (for the lab); LAB= names tests/lab/lab.sh elsewhere.  It brings up its own lab of 4
# servers (tests/lab/lab.sh, LAB_NET=auto, a state directory of its own,
# LUNs in /dev/shm) and takes it down on exit, with every tapdisk, fio and
# td-front it started (by PID).  Every disk is DISK_SIZE (256M) large.
#
# tapstripe is driven by td-front over the shm blkif ring (ring order 2,
# 256 segments: a 1 MiB I/O is one request): the most direct path into
# tapdisk, with no NBD client or socket copy in the way, so what is
# measured is tapdisk's stripe driver and its iSCSI sessions.  "fio" is
# fio's libiscsi engine (built by bench/build-fio.sh, its iodepth made
# real) talking to the LUNs itself: the same servers without tapdisk.
#
# a  1 MiB sequential writes and reads at QD 16 (--qd): tapstripe on a
#    1-column disk (server 1), on a 4-column disk (servers 1-4), stripe
#    unit 1 MiB (each 1 MiB I/O is one iSCSI command to one server, the
#    same commands fio sends), and fio with one job per LUN at QD/4 each.
#    Targets: 4 columns / 1 column >= 3.8; tapstripe / fio >= 0.95.
# b  The thesis's figure 6.1, direct writes of 512 KiB and sequential
#    4 KiB, at QD 1 (the thesis's dd) and deeper (QD 8, QD 32): "physical"
#    = fio libiscsi on server 1's LUN; tapstripe on 1 server; tapstripe
#    striped over 2 servers; stripe unit 256 KiB (a 512 KiB write is one
#    command per server); chain sort|stripe: (the sort driver merges
#    adjacent writes as the guest's page cache did for the thesis's dd),
#    and the 2-server disk with plain stripe: as well.  Target: the striped
#    disk beats physical at 512 KiB (QD 1 and 8) and at 4 KiB QD 32.  4 KiB
#    at QD 1 is shown but not counted: one 4 KiB write at a time touches
#    one server, so striping cannot help a latency-bound stream.
# c  The cost of R = 2 when the servers are the bottleneck: 1 MiB writes
#    at QD 16, 2 columns x R = 2 on 4 servers (each column's two replicas
#    on servers of their own) against 2 columns x R = 1 on 2 servers: the
#    same load per server, so the difference is what replication costs
#    the client (twice the bytes sent, waiting for the slower replica).
#    Target: R2 / R1 >= 0.90.  Reads are shown too (R = 2 reads from both).
#
# Each repetition runs every group's targets back to back, in an order
# rotated per repetition.  Prints Markdown tables (MiB/s = 2^20 bytes/s,
# medians, spread = (max - min) / median), a verdict line per target.
# The client's CPU time per MiB moved is recorded too (tapstripe: td-front
# + tapdisk, as td-front reports them; fio: its jobs' usr + sys): at
# 4 x 100 MiB/s a 2-core machine is near its limit, and that is where the
# tapstripe path and fio would part.
# Exit status: 0 every target met, 1 one missed (figures still written),
# 2 bad command line, 3 could not measure.
#
# --json FILE writes (td-bench's "stripe" suite reads it; keep it stable):
#   {"scaling": [{"servers": N, "op": OP, "mib_s": X, "reps": [...]}, ...],
#        OP "write"/"read" (part a, tapstripe, 1 and 4 servers) and
#        "fig61-write512k-qd1" etc. (part b, sort|stripe, 1 and 2 servers)
#    "ratios": {NAME: X},  medians' ratios (below), compared by regress
#    "targets": [{"name", "value", "min", "met": bool, "counted": bool}],
#    "groups": {GROUP: {"op", "bs", "qd", "targets": {TARGET: {"mib_s",
#               "spread_pct", "reps": [...], "cpu_us_per_mib"}}}},
#    "settings": {"rate_mib_s", "runtime_s", "reps", "qd", "disk_size",
#                 "busy_pct", "fio"},
#    "met": bool}
#   ratios: a.write.4col_vs_1col, a.read.4col_vs_1col,
#   a.write.tapstripe_vs_fio, a.read.tapstripe_vs_fio,
#   b.<workload>.striped2_vs_physical and b.<workload>.plain2_vs_physical
#   (workloads write512k-qd1, write512k-qd8, write4k-qd1, write4k-qd32),
#   c.write.r2_vs_r1, c.read.r2_vs_r1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILDDIR=${BUILDDIR:-$top}
BUILDDIR=$(cd "$BUILDDIR" && pwd)
LAB=${LAB:-$top/tests/lab/lab.sh}
REPS=3 RUNTIME=8 RATE=100 QD=16 PARTS=a,b,c JSON='' FIO=''
DISK_SIZE=${DISK_SIZE:-256M}

usage() { sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--reps) REPS=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--rate) RATE=$2; shift ;;
	--qd) QD=$2; shift ;;
	--parts) PARTS=$2; shift ;;
	--json) JSON=$2; shift ;;
	--fio) FIO=$2; shift ;;
	--quick) RUNTIME=3 REPS=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "stripe-scaling.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || { echo "stripe-scaling.sh: --reps N, N >= 1" >&2; exit 2; }
[[ $RUNTIME =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "stripe-scaling.sh: --runtime SECONDS" >&2; exit 2; }
[[ $RATE =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "stripe-scaling.sh: --rate MiB/s" >&2; exit 2; }
[[ $QD =~ ^[0-9]+$ ]] && [ "$QD" -ge 4 ] && [ $((QD % 4)) -eq 0 ] ||
	{ echo "stripe-scaling.sh: --qd N, a multiple of 4 (fio gets QD/4 per LUN)" >&2; exit 2; }
[[ $PARTS =~ ^[abc](,[abc])*$ ]] || { echo "stripe-scaling.sh: --parts a,b,c" >&2; exit 2; }
[ -n "$JSON" ] && JSON=$(cd "$(dirname "$JSON")" && pwd)/$(basename "$JSON")
part() { [[ ,$PARTS, == *,$1,* ]]; }

die3() { echo "stripe-scaling.sh: $*" >&2; exit 3; }
[ "$(id -u)" = 0 ] || die3 "needs root (the lab of iSCSI servers: network namespaces, tc)"
command -v python3 >/dev/null || die3 "python3 missing (apt-get install python3)"
command -v tgtd >/dev/null || die3 "tgtd missing (apt-get install tgt)"
# A program: $VAR (as td-bench sets them), else BUILDDIR/tools, else PATH.
tool() { # NAME VAR
	local p=${!2:-}
	[ -n "$p" ] || p=$BUILDDIR/bin/$1
	[ -x "$p" ] || p=$(command -v "$1") || die3 "$1 not found (run make, set BUILDDIR= or $2=)"
	echo "$p"
}
TAPDISK=$(tool tapdisk TAPDISK) || exit 3
TDFRONT=$(tool td-front TDFRONT) || exit 3
STRIPECTL=$(tool stripe-ctl STRIPECTL) || exit 3
# the lab finds stripe-ctl and stripe-master in BUILDDIR/bin, else PATH
[ -x "$BUILDDIR/bin/stripe-master" ] || command -v stripe-master >/dev/null ||
	die3 "stripe-master not found (run make, or set BUILDDIR=)"
[ -x "$LAB" ] || [ -f "$LAB" ] || die3 "$LAB missing"
if [ -z "$FIO" ]; then
	FIO=$(bash "$here/build-fio.sh") || die3 "no fio with the libiscsi engine (bench/build-fio.sh failed)"
fi
"$FIO" --enghelp 2>/dev/null | grep -qx '[[:space:]]*libiscsi' || die3 "$FIO has no libiscsi engine"

work=$(mktemp -d /tmp/stripe-bench.XXXXXX) || exit 3
results=$work/results
: >"$results"
export TAPSTRIPE_RUNDIR=$work/run
mkdir -p "$TAPSTRIPE_RUNDIR"
td_pids=() cur_pid='' lab_up=''
cleanup() {
	local p t
	trap - EXIT INT TERM
	[ -n "$cur_pid" ] && kill "$cur_pid" 2>/dev/null && wait "$cur_pid" 2>/dev/null
	for p in "${td_pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${td_pids[@]}"; do
		for ((t = 0; t < 100; t++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[ -n "$lab_up" ] && LAB_STATE=$work/lab bash "$LAB" down >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The machine's load before we start: share of CPU time others used.
busy=$(python3 - <<'EOF'
import time
def s():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f), f[3] + f[4]
a = s(); time.sleep(1.5); b = s()
print("%.0f" % (100.0 * (1 - (b[1] - a[1]) / max(1, b[0] - a[0]))))
EOF
)
echo "# $(nproc) CPUs, ${busy}% busy before the run$([ "$busy" -gt 10 ] && echo ' (BUSY: absolute figures are noisy, ratios of this run less so)')"
echo "# servers capped at $RATE MiB/s each way; ${RUNTIME} s x $REPS repetitions; fio: $FIO"

# --- the lab and the disks ----------------------------------------------------------

lab() { LAB_STATE=$work/lab LAB_NET=auto LAB_RATE=$RATE LAB_SIZE=2G BUILDDIR=$BUILDDIR bash "$LAB" "$@"; }
lab_up=1
lab up 4 >"$work/lab.out" 2>&1 || { cat "$work/lab.out" >&2; die3 "the lab did not come up"; }
eval "$(lab env)" || die3 "lab.sh env failed"

# mkdisk NAME COLUMNS UNIT REPLICAS SERVERS CHAIN: a disk, checked to lie on
# exactly SERVERS distinct servers, served by a tapdisk over shm.
mkdisk() {
	local name=$1 cols=$2 unit=$3 repl=$4 nserv=$5 chain=$6 used pid t
	"$STRIPECTL" --master "$LAB_MASTER" vdisk create "$name" --size "$DISK_SIZE" \
		--stripes "$cols" --stripe-unit "$unit" --replicas "$repl" -o "$work/$name.map" \
		>>"$work/disks.log" 2>&1 || { cat "$work/disks.log" >&2; die3 "stripe-ctl vdisk create $name failed"; }
	used=$(awk '$1 == "extent" { print $6 }' "$work/$name.map" | sort -u | wc -l)
	[ "$used" = "$nserv" ] || die3 "disk $name lies on $used servers, not $nserv (placement changed?)"
	"$TAPDISK" --foreground -a "${chain}stripe:$work/$name.map" --name "$name" \
		--shm "$work/$name.shm" --log-level warn --log-file "$work/tapdisk-$name.log" \
		--run-dir "$TAPSTRIPE_RUNDIR" </dev/null &
	pid=$!
	td_pids+=("$pid")
	for ((t = 0; t < 100; t++)); do
		[ -S "$work/$name.shm" ] && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$work/tapdisk-$name.log" >&2
	die3 "tapdisk for $name did not start"
}

# The iSCSI URL of the LUN of map server line INDEX (fio's filename syntax:
# colons escaped).
map_url() { # MAP INDEX
	awk -v i="$2" '$1 == "server" && $2 == i { print "iscsi://" $6 "/" $8 "/" $10 }' "$1"
}
lab_url() { # I
	local a t
	a=LAB_SRV$1_ADDR t=LAB_SRV$1_TARGET
	echo "iscsi://${!a}:3260/${!t}/1"
}
esc() { local u=$1; echo "${u//:/\\:}"; }

if part a; then
	mkdisk a1 1 1M 1 1 ""
	mkdisk a4 4 1M 1 4 ""
fi
if part b; then
	mkdisk b1 1 256K 1 1 "sort|"
	mkdisk b2 2 256K 1 2 "sort|"
	mkdisk b2p 2 256K 1 2 ""
	# physical: the LUN of the server the 1-server disk is on
	srv=$(awk '$1 == "extent" { print $6; exit }' "$work/b1.map")
	PHYS_URL=$(map_url "$work/b1.map" "$srv")
fi
if part c; then
	mkdisk c1 2 1M 1 2 ""
	mkdisk c2 2 1M 2 4 ""
fi

# --- one measurement ----------------------------------------------------------------

# record GROUP TARGET OP BS QD REP MIB_S CPU_US_PER_MIB
record() { echo "$*" >>"$results"; }

# run_tdfront and run_fio run in this shell (not in $(...)), so that the
# EXIT trap knows the PID of what runs; each leaves MiB/s in $work/value.
run_tdfront() { # DISK RW BS QD
	"$TDFRONT" --shm "$work/$1.shm" --rw "$2" --pattern seq --bs "$3" --qd "$4" \
		--ring-order 2 --max-segments 256 --time "$RUNTIME" --json --quiet --no-progress \
		>"$work/run.json" 2>"$work/run.err" &
	cur_pid=$!
	wait "$cur_pid" || { cur_pid=; cat "$work/run.err" >&2; die3 "td-front on $1 failed"; }
	cur_pid=
	python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
assert j["io_errors"] == 0, "I/O errors"
mib = (j["read_bytes"] + j["write_bytes"]) / 1048576
cpu = j["frontend"]["cpu_us"] + ((j.get("backend") or {}).get("cpu_us") or 0)
print("%.3f %.1f" % (j["bytes_per_s"] / 1048576, cpu / max(mib, 1)))' "$work/run.json" >"$work/value" ||
		die3 "td-front on $1: bad report"
}

run_fio() { # RW BS QD_PER_JOB URL...
	local rw=$1 bs=$2 qd=$3 u i=0 jobs=()
	shift 3
	for u in "$@"; do
		i=$((i + 1))
		jobs+=(--name="lun$i" --filename="$(esc "$u")")
	done
	"$FIO" --ioengine=libiscsi --rw="$rw" --bs="$bs" --iodepth="$qd" --size="$DISK_SIZE" \
		--time_based --runtime="$RUNTIME" --output-format=json \
		--output="$work/fio.json" "${jobs[@]}" >"$work/fio.out" 2>&1 &
	cur_pid=$!
	wait "$cur_pid" || { cur_pid=; cat "$work/fio.out" >&2; die3 "fio failed"; }
	cur_pid=
	python3 -c 'import json, sys
t = open(sys.argv[1]).read()
jobs = json.loads(t[t.index("{"):])["jobs"]
bw = mib = cpu = 0
for j in jobs:
    assert j["error"] == 0, "fio error %d" % j["error"]
    bw += (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1048576
    mib += (j["read"]["io_bytes"] + j["write"]["io_bytes"]) / 1048576
    cpu += (j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] * 1000
print("%.3f %.1f" % (bw, cpu / max(mib, 1)))' "$work/fio.json" \
		>"$work/value" || die3 "fio: bad report"
}

# measure GROUP TARGET OP BS QD REP
measure() {
	local g=$1 t=$2 op=$3 bs=$4 qd=$5 rep=$6 v cpu
	n=$((n + 1))
	printf '# [%d/%d] rep %d %-16s %-10s' "$n" "$total" "$rep" "$g" "$t" >&2
	rm -f "$work/value"
	case $t in
	fio4) run_fio "$op" "$bs" $((qd / 4)) "$(lab_url 1)" "$(lab_url 2)" "$(lab_url 3)" "$(lab_url 4)" ;;
	physical) run_fio "$op" "$bs" "$qd" "$PHYS_URL" ;;
	*) run_tdfront "$t" "$op" "$bs" "$qd" ;;
	esac
	read -r v cpu <"$work/value" || exit 3
	printf ' %8.1f MiB/s %8.1f CPU us/MiB\n' "$v" "$cpu" >&2
	record "$g" "$t" "$op" "$bs" "$qd" "$rep" "$v" "$cpu"
}

# GROUP OP BS QD TARGET...
GROUPS_LIST=()
part a && GROUPS_LIST+=("a.write write 1m $QD a1 a4 fio4" "a.read read 1m $QD a1 a4 fio4")
part b && GROUPS_LIST+=("b.write512k-qd1 write 512k 1 physical b1 b2 b2p"
	"b.write512k-qd8 write 512k 8 physical b1 b2 b2p"
	"b.write4k-qd1 write 4k 1 physical b1 b2 b2p"
	"b.write4k-qd32 write 4k 32 physical b1 b2 b2p")
part c && GROUPS_LIST+=("c.write write 1m $QD c1 c2" "c.read read 1m $QD c1 c2")

total=0
for grp in "${GROUPS_LIST[@]}"; do
	set -- $grp
	total=$((total + ($# - 4) * REPS))
done
n=0
for rep in $(seq "$REPS"); do
	for grp in "${GROUPS_LIST[@]}"; do
		# shellcheck disable=SC2086
		set -- $grp
		g=$1 op=$2 bs=$3 qd=$4
		shift 4
		targets=("$@")
		k=${#targets[@]}
		for ((i = 0; i < k; i++)); do
			measure "$g" "${targets[$(((i + rep - 1) % k))]}" "$op" "$bs" "$qd" "$rep"
		done
	done
done

python3 "$here/stripe-summary.py" "$results" "${JSON:-}" "rate_mib_s=$RATE" "runtime_s=$RUNTIME" \
	"reps=$REPS" "qd=$QD" "disk_size=$DISK_SIZE" "busy_pct=$busy" "fio=$FIO"
