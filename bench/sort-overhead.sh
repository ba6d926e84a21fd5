#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# sort-overhead.sh - what the sort filter costs: the same fio jobs (nbd
# engine) against `tapdisk -a aio:FILE` and `tapdisk -a 'sort|aio:FILE'`,
# one backing file, one run.  Issue #4 asks for sort to cost at most 5 %
# of throughput on sequential 4 KiB I/O at depth 32.
#
# usage: bench/sort-overhead.sh [--dir DIR] [--size SIZE] [--runtime S]
#                               [--reps N] [--limit PCT] [--json FILE]
#                               [--quick]
#   --dir DIR      where the backing file goes (default /dev/shm: the
#                  servers' CPU cost alone, no disk in the way)
#   --size SIZE    backing file size (default 1G)
#   --runtime S    seconds per fio run (default 10)
#   --reps N       repetitions; medians are reported (default 5)
#   --limit PCT    the overhead allowed, for the verdict (default 5)
#   --json FILE    also write every figure there
#   --quick        --size 256M --runtime 3 --reps 3
#
# Each repetition runs both configurations, in an order rotated per
# repetition, so that a drift of the machine's load favours neither.
# Prints per job and configuration the median IOPS, MiB/s, the spread
# (max-min)/median, the server's CPU time per request and, for sort, the
# share of requests it merged; then sort/aio and the overhead against the
# limit.  Exits 0 (the verdict is printed, not enforced: the machine is
# shared and noisy).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"
BUILDDIR=${BUILDDIR:-$here/..}
TAPDISK=${TAPDISK:-$BUILDDIR/bin/tapdisk}
TAPCTL=${TAPCTL:-$BUILDDIR/bin/tap-ctl}
DIR=/dev/shm SIZE=1G RUNTIME=10 REPS=5 LIMIT=5 JSON=

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--limit) LIMIT=$2; shift ;;
	--json) JSON=$2; shift ;;
	--quick) SIZE=256M RUNTIME=3 REPS=3 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "sort-overhead.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

for tool in fio python3; do
	command -v $tool >/dev/null || { echo "sort-overhead.sh: $tool missing (apt-get install fio python3)" >&2; exit 1; }
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "sort-overhead.sh: this fio has no nbd engine" >&2; exit 1; }
for prog in "$TAPDISK" "$TAPCTL"; do
	[ -x "$prog" ] || { echo "sort-overhead.sh: $prog not built (run make, or set TAPDISK= TAPCTL=)" >&2; exit 1; }
done

work=$(mktemp -d "$DIR/td-sort.XXXXXX") || exit 1
results=$work/results
server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

img=$work/disk.img
sock=$work/nbd.sock
echo "# backing file: $SIZE in $DIR ($(df -T "$DIR" | awk 'NR==2 {print $2}')), $REPS reps of ${RUNTIME}s"
fio --name=fill --filename="$img" --size="$SIZE" --rw=write --bs=1M \
	--ioengine=libaio --direct=1 --iodepth=8 --output=/dev/null || exit 1

# name rw bs iodepth
JOBS="seqwrite4k write 4k 32
seqread4k read 4k 32"
CONFIGS=(aio sort)

counter() { # NAME: a driver counter of the running server
	"$TAPCTL" --run-dir "$work" stats -i "$server_pid" |
		awk -v n="$1" '$1 == n {print $2}'
}

start_server() { # config
	local chain="aio:$img"
	[ "$1" = sort ] && chain="sort|aio:$img"
	rm -f "$sock"
	"$TAPDISK" --foreground -a "$chain" --nbd "unix:$sock" \
		--run-dir "$work" --log-level warn 2>>"$work/server.log" &
	server_pid=$!
	bench_wait_up "sort-overhead.sh: tapdisk ($chain)" "$work/server.log" test -S "$sock"
}

stop_server() {
	bench_stop "$server_pid"
	server_pid=
}

run_fio() { # rw bs qd out.json
	fio --name=job --rw="$1" --bs="$2" --iodepth="$3" --size="$SIZE" \
		--time_based --runtime="$RUNTIME" --ramp_time=1 \
		--output-format=json --output="$4" \
		--ioengine=nbd --uri="nbd+unix:///?socket=$sock"
}

: >"$results"
total=$(( $(echo "$JOBS" | wc -l) * ${#CONFIGS[@]} * REPS ))
n=0
for rep in $(seq "$REPS"); do
	for k in $(seq 0 $(( ${#CONFIGS[@]} - 1 ))); do
		config=${CONFIGS[$(( (k + rep - 1) % ${#CONFIGS[@]} ))]}
		start_server "$config"
		while read -r job rw bs qd; do
			n=$((n + 1))
			printf '\r# [%d/%d] rep %d %-5s %-11s ' $n $total "$rep" "$config" "$job" >&2
			t0=$(bench_cpu_ticks "$server_pid")
			in0=$(counter sort_in) merges0=$(counter sort_merges)
			run_fio "$rw" "$bs" "$qd" "$work/fio.json" || { echo "fio failed" >&2; exit 1; }
			t1=$(bench_cpu_ticks "$server_pid")
			in1=$(counter sort_in) merges1=$(counter sort_merges)
			echo "$(python3 "$here/fio-summary.py" "$work/fio.json" "$config" "$job" "$rep" "$((t1 - t0))")" \
				"$((in1 - in0)) $((merges1 - merges0))" >>"$results"
		done <<<"$JOBS"
		stop_server
	done
done
echo >&2

python3 - "$results" "$(getconf CLK_TCK)" "$LIMIT" "${JSON:-}" <<'EOF'
import json, statistics, sys
path, hz, limit, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = {}
for line in open(path):
    c, job, rep, iops, bw, ios, ticks, sin, smerges = line.split()
    rows.setdefault((c, job), []).append(
        (float(iops), float(bw), int(ios), int(ticks), int(sin), int(smerges), int(rep)))
jobs = []
for (c, job) in rows:
    if job not in jobs:
        jobs.append(job)
def med(c, job, k):
    return statistics.median(r[k] for r in rows[(c, job)])
def cpu_us(c, job):
    r = rows[(c, job)]
    return 1e6 * sum(x[3] for x in r) / hz / max(1, sum(x[2] for x in r))
print("%-11s %-5s %10s %9s %9s %11s %9s" % ("job", "chain", "IOPS", "MiB/s",
      "spread", "CPU us/req", "merged"))
report = {}
for job in jobs:
    for c in ("aio", "sort"):
        r = rows[(c, job)]
        iops = med(c, job, 0)
        vals = [x[0] for x in r]
        spread = (max(vals) - min(vals)) / iops * 100 if iops else 0
        sin = sum(x[4] for x in r)
        merged = 100.0 * sum(x[5] for x in r) / sin if sin else 0.0
        print("%-11s %-5s %10.0f %9.1f %8.1f%% %11.2f %8.1f%%" % (job, c, iops,
              med(c, job, 1), spread, cpu_us(c, job), merged))
        report.setdefault(job, {})[c] = {"iops": iops, "mib_s": med(c, job, 1),
              "spread_pct": spread, "cpu_us_per_req": cpu_us(c, job),
              "sort_merged_pct": merged, "reps": vals}
    # The ratio of medians, and the median of the per-repetition ratios
    # (each pair ran back to back, so it cancels slow drifts).
    ratio = med("sort", job, 0) / med("aio", job, 0)
    by_rep = {}
    for c in ("aio", "sort"):
        for x in rows[(c, job)]:
            by_rep.setdefault(x[6], {})[c] = x[0]
    paired = statistics.median(v["sort"] / v["aio"] for v in by_rep.values()
                               if "aio" in v and "sort" in v)
    overhead = (1 - ratio) * 100
    verdict = "within" if overhead <= limit else "OVER"
    print("%-11s sort/aio %.3f (paired median %.3f): overhead %.1f%%, %s the %.0f%% limit"
          % (job, ratio, paired, overhead, verdict, limit))
    report[job]["sort_over_aio"] = ratio
    report[job]["sort_over_aio_paired"] = paired
    report[job]["overhead_pct"] = overhead
if out:
    json.dump(report, open(out, "w"), indent=2)
EOF
