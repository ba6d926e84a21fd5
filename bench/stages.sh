#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stages.sh - where a QD 1 request's time goes: dd, td-front and tapdisk's
# stage timing (tap-ctl stages) for 4 KiB O_DIRECT reads and writes.
#
# usage: bench/stages.sh [--dir DIR] [--size SIZE] [--runtime S] [--reps N]
#                        [--poll-us US] [--backing written|fallocated]
#                        [--syscalls] [--json FILE]
#   --dir DIR        where the backing file goes (default /var/tmp)
#   --size SIZE      its size (default 256M)
#   --runtime S      seconds per td-front run (default 5)
#   --reps N         repetitions; medians with min-max (default 3)
#   --poll-us US     the budget of the polled runs, both sides (default 200)
#   --backing KIND   written: filled with dd first (as td-bench sweep does,
#                    the default); fallocated: unwritten extents before
#                    every case (holes punched and allocated again), so
#                    that each write converts its extent and reads read
#                    no disk
#   --syscalls       also count tapdisk's system calls per request over one
#                    extra run of each case (perf trace -s), and the host's
#                    workqueue items (perf record -a: iomap_dio_complete_work
#                    is a direct write completed by a kworker); needs perf
#                    and the right to trace
#   --json FILE      every figure, one object per run
#
# Each repetition runs, in an order rotated per repetition: dd on the file
# (the disk's own time per request: dd's time / count), fio's libaio at
# QD 1 on it (the kernel's AIO path alone: mean latency), and td-front
# sequential 4 KiB QD 1 reads and writes through tapdisk -a aio:FILE over
# the shm ring, with polling off and on.  tapdisk times its stages
# (tap-ctl stages on, reset before each run).  The Markdown table shows
# per op and mode, in us per request: dd, td-front's interval (1/IOPS)
# and mean latency, tapdisk's residence (ring read -> frontend notified)
# and its stages, and "legs": td-front latency - residence, the
# notification and wake-up each way.  Only figures of one run compare.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"
BUILDDIR=${BUILDDIR:-$here/..}
TAPDISK=${TAPDISK:-$BUILDDIR/bin/tapdisk}
TDFRONT=${TDFRONT:-$BUILDDIR/bin/td-front}
TAPCTL=${TAPCTL:-$BUILDDIR/bin/tap-ctl}
DIR=/var/tmp SIZE=256M RUNTIME=5 REPS=3 POLL=200 BACKING=written
SYSCALLS= JSON=

usage() { sed -n '3,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--poll-us) POLL=$2; shift ;;
	--backing) BACKING=$2; shift ;;
	--syscalls) SYSCALLS=1 ;;
	--json) JSON=$2; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "stages.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
command -v fio >/dev/null || { echo "stages.sh: fio missing (apt-get install fio)" >&2; exit 1; }
case $BACKING in written|fallocated) ;; *)
	echo "stages.sh: --backing written or fallocated" >&2; exit 2 ;;
esac
for prog in "$TAPDISK" "$TDFRONT" "$TAPCTL"; do
	[ -x "$prog" ] || { echo "stages.sh: $prog not built (run make, or set BUILDDIR=)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/stages-bench.XXXXXX) || exit 1
disk=$(mktemp -d "$DIR/stages-bench.XXXXXX") || exit 1
img=$disk/disk.img
td_pid=
cleanup() {
	[ -n "$td_pid" ] && kill "$td_pid" 2>/dev/null && wait "$td_pid" 2>/dev/null
	rm -rf "$work" "$disk"
}
trap cleanup EXIT INT TERM
export TAPSTRIPE_RUNDIR=$work/run
results=$work/results.json
: >"$results"

bytes=$(numfmt --from=iec "$SIZE")
count=$((bytes / 4096))
if [ "$BACKING" = written ]; then
	dd if=/dev/zero of="$img" bs=1M count=$((bytes >> 20)) oflag=direct status=none || exit 1
else
	fallocate -l "$bytes" "$img" || exit 1
fi

start_tapdisk() { # POLL_US
	rm -f "$work/shm.sock"
	"$TAPDISK" --foreground -a "aio:$img" --shm "$work/shm.sock" \
		--poll-us "$1" --log-level warn 2>>"$work/tapdisk.log" &
	td_pid=$!
	bench_wait_up "stages.sh: tapdisk" "$work/tapdisk.log" test -S "$work/shm.sock"
}

stop_tapdisk() {
	bench_stop "$td_pid"
	td_pid=
}

# dd_run OP REP: dd's own time per request, on the whole file.
dd_run() {
	local op=$1 rep=$2 args
	if [ "$op" = write ]; then
		args=(if=/dev/zero of="$img" oflag=direct conv=notrunc)
	else
		args=(if="$img" of=/dev/null iflag=direct)
	fi
	LC_ALL=C dd "${args[@]}" bs=4096 count=$count 2>"$work/dd.err" ||
		{ cat "$work/dd.err" >&2; exit 1; }
	python3 - "$work/dd.err" "$op" "$rep" "$count" >>"$results" <<'EOF'
import json, re, sys
m = re.search(r"copied, ([0-9.e+-]+) s", open(sys.argv[1]).read())
print(json.dumps({"target": "dd", "op": sys.argv[2], "rep": int(sys.argv[3]),
                  "us": float(m.group(1)) * 1e6 / int(sys.argv[4])}))
EOF
}

# fio_run OP REP: the same AIO without tapdisk (fio libaio, QD 1).
fio_run() {
	local op=$1 rep=$2
	fio --name=job --filename="$img" --ioengine=libaio --direct=1 \
		--rw="$op" --bs=4k --iodepth=1 --size="$bytes" --time_based \
		--runtime="$RUNTIME" --output-format=json >"$work/fio.json" \
		2>"$work/fio.err" || { cat "$work/fio.err" >&2; exit 1; }
	python3 - "$work/fio.json" "$op" "$rep" >>"$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0][sys.argv[2]]
print(json.dumps({"target": "fio", "op": sys.argv[2], "rep": int(sys.argv[3]),
                  "us": j["lat_ns"]["mean"] / 1000}))
EOF
}

# front_run OP MODE REP: one td-front run with the stages reset before.
front_run() {
	local op=$1 mode=$2 rep=$3 poll=0
	[ "$mode" = poll ] && poll=$POLL
	"$TAPCTL" stages -i "$td_pid" reset >/dev/null || exit 1
	"$TDFRONT" --shm "$work/shm.sock" --json --quiet --no-progress \
		--rw "$op" --pattern seq --bs 4k --qd 1 --time "$RUNTIME" \
		--poll-us "$poll" >"$work/run.json" 2>"$work/run.err" ||
		{ echo "stages.sh: td-front failed:" >&2; cat "$work/run.err" >&2; exit 1; }
	"$TAPCTL" stages -i "$td_pid" --json >"$work/stages.json" || exit 1
	python3 - "$work/run.json" "$work/stages.json" "$op" "$mode" "$rep" \
		>>"$results" <<'EOF'
import json, sys
run, st = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["stages"]
op = sys.argv[3]
s = st[op]
n = s["count"] or 1
out = {"target": "front", "op": op, "mode": sys.argv[4], "rep": int(sys.argv[5]),
       "interval_us": 1e6 / run["iops"], "latency_us": run["latency_us"]["mean"],
       "timed": s["count"], "residence_us": s["residence_sum_ns"] / n / 1000,
       "wake_to_ring_us": st["wake_to_ring_mean_ns"] / 1000,
       "wake_to_reap_us": st["wake_to_reap_mean_ns"] / 1000}
for k, v in s["sum_ns"].items():
    out[k + "_us"] = v / n / 1000
print(json.dumps(out))
EOF
}

# syscalls_run OP MODE: tapdisk's system calls per request, one run.
syscalls_run() {
	local op=$1 mode=$2 poll=0
	[ "$mode" = poll ] && poll=$POLL
	perf trace -s -p "$td_pid" -o "$work/trace.txt" &
	local perf_pid=$!
	perf record -q -a -e workqueue:workqueue_execute_start \
		-o "$work/wq.data" 2>/dev/null &
	local wq_pid=$!
	sleep 0.5
	"$TDFRONT" --shm "$work/shm.sock" --json --quiet --no-progress \
		--rw "$op" --pattern seq --bs 4k --qd 1 --time "$RUNTIME" \
		--poll-us "$poll" >"$work/run.json" 2>"$work/run.err"
	kill -INT "$perf_pid" "$wq_pid"
	wait "$perf_pid" "$wq_pid" 2>/dev/null
	perf script -i "$work/wq.data" 2>/dev/null |
		grep -o "function [a-z_0-9]*" | sort | uniq -c >"$work/wq.txt"
	python3 - "$work/trace.txt" "$work/run.json" "$op" "$mode" "$work/wq.txt" <<'EOF'
import json, re, sys
ios = json.load(open(sys.argv[2]))["ios"] or 1
calls = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s+(\w+)\s+(\d+)\s+\d+\s+[0-9.]+", line)
    if m and m.group(1) != "syscall":
        calls[m.group(1)] = calls.get(m.group(1), 0) + int(m.group(2))
top = sorted(calls.items(), key=lambda kv: -kv[1])[:6]
wq = {}
for line in open(sys.argv[5]):
    n, _, fn = line.split()
    wq[fn] = int(n)
print("%s %s: tapdisk syscalls per request: %s" % (sys.argv[3], sys.argv[4],
      ", ".join("%s %.2f" % (k, v / ios) for k, v in top)))
print("    work items per request, whole host: iomap_dio_complete_work %.2f, "
      "all %.2f" % (wq.get("iomap_dio_complete_work", 0) / ios,
                    sum(wq.values()) / ios))
EOF
}

cases=("dd read" "dd write" "fio read" "fio write"
	"front read off" "front write off"
	"front read poll" "front write poll")
for rep in $(seq "$REPS"); do
	n=${#cases[@]}
	for i in $(seq 0 $((n - 1))); do
		c=${cases[$(((i + rep - 1) % n))]}
		set -- $c
		# Every case finds the extents unwritten again.
		[ "$BACKING" = fallocated ] &&
			{ fallocate -p -o 0 -l "$bytes" "$img" &&
				fallocate -o 0 -l "$bytes" "$img" || exit 1; }
		if [ "$1" = dd ]; then
			dd_run "$2" "$rep"
		elif [ "$1" = fio ]; then
			fio_run "$2" "$rep"
		else
			[ "$3" = poll ] && start_tapdisk "$POLL" || start_tapdisk 0
			"$TAPCTL" stages -i "$td_pid" on >/dev/null || exit 1
			front_run "$2" "$3" "$rep"
			stop_tapdisk
		fi
	done
done
[ -n "$JSON" ] && cp "$results" "$JSON"
echo "4 KiB O_DIRECT QD 1 on $(df --output=fstype "$DIR" | tail -1) ($DIR, $SIZE, $BACKING), $REPS reps of ${RUNTIME} s; us per request, median (min-max)"
echo
python3 "$here/stages-summary.py" "$results"
if [ -n "$SYSCALLS" ]; then
	echo
	for m in off poll; do
		for op in read write; do
			[ "$m" = poll ] && start_tapdisk "$POLL" || start_tapdisk 0
			syscalls_run "$op" "$m"
			stop_tapdisk
		done
	done
fi
