#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# ring.sh - the blkif ring over shm, measured with td-front against tapdisk.
#
# usage: bench/ring.sh [--dirs "DIR..."] [--size SIZE] [--runtime S]
#                      [--reps N] [--only null|aio|thesis|queues] [--json FILE]
#                      [--quick]
#   --dirs "DIR..."  where the 1 GiB backing files go (default
#                    "/dev/shm /var/tmp": memory, then a real disk)
#   --size SIZE      backing file size (default 1G)
#   --runtime S      seconds per timed run (default 10)
#   --reps N         repetitions; medians are reported with their spread
#                    (default 3)
#   --only PART      run one part: null, aio, thesis or queues (queues
#                    runs only when asked for)
#   --json FILE      also write every figure there
#   --quick          --size 256M --runtime 3 --reps 1
#
# Parts:
#   null    null: driver, 4 KiB random reads, QD 32: IOPS and tapdisk's CPU
#           time per request (user + system from /proc/PID/stat over the
#           run, divided by the requests tapdisk counted).  Target: at most
#           3 us.
#   aio     aio: driver on a file in each DIR, against fio's libaio
#           O_DIRECT on the same file: 4 KiB random read QD 32 (target
#           ratio >= 0.9), 1 MiB sequential read and write QD 8 (>= 0.97).
#           Each repetition runs both targets, in an order rotated per
#           repetition; the ratio is of the medians of this run.
#   thesis  1 MiB O_DIRECT writes (QD 1, sequential) on an aio: file in
#           each DIR for max segments 11, 32, 256, 4096 and ring orders
#           0..4: requests per I/O, segments per request and backend
#           submissions per I/O from tapdisk's own counters, and MiB/s.
#           Fails unless a 1 MiB write arrives as one request once max
#           segments >= 256.  Prints a Markdown table per DIR.
#   queues  null: driver, 4 KiB random reads, QD 32 per ring over 1, 2 and
#           4 rings of one connection (td-front --queues), in an order
#           rotated per repetition: IOPS, ratio to 1 ring (issue #22
#           target: 2 rings >= 1.6 x 1 ring), tapdisk CPU per request.
# Only figures of one run compare: the machine is shared and noisy.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"
BUILDDIR=${BUILDDIR:-$here/..}
TAPDISK=${TAPDISK:-$BUILDDIR/bin/tapdisk}
TDFRONT=${TDFRONT:-$BUILDDIR/bin/td-front}
DIRS="/dev/shm /var/tmp" SIZE=1G RUNTIME=10 REPS=3 ONLY= JSON=
THESIS_BYTES=512M

usage() { sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--dirs) DIRS=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--only) ONLY=$2; shift ;;
	--json) JSON=$2; shift ;;
	--quick) SIZE=256M RUNTIME=3 REPS=1 THESIS_BYTES=128M ;;
	-h|--help) usage; exit 0 ;;
	*) echo "ring.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

for tool in fio python3; do
	command -v $tool >/dev/null || { echo "ring.sh: $tool missing (apt-get install fio python3)" >&2; exit 1; }
done
for prog in "$TAPDISK" "$TDFRONT"; do
	[ -x "$prog" ] || { echo "ring.sh: $prog not built (run make, or set BUILDDIR=)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/ring-bench.XXXXXX) || exit 1
results=$work/results
files=()
td_pid=
cleanup() {
	[ -n "$td_pid" ] && kill "$td_pid" 2>/dev/null && wait "$td_pid" 2>/dev/null
	rm -f "${files[@]}"
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
export TAPSTRIPE_RUNDIR=$work/run
: >"$results"

start_tapdisk() { # CHAIN
	rm -f "$work/shm.sock"
	"$TAPDISK" --foreground -a "$1" --shm "$work/shm.sock" \
		--log-level warn 2>>"$work/tapdisk.log" &
	td_pid=$!
	bench_wait_up "ring.sh: tapdisk" "$work/tapdisk.log" test -S "$work/shm.sock"
}

stop_tapdisk() {
	bench_stop "$td_pid"
	td_pid=
}

# ring PART CONFIG REP td-front-args...: one td-front run, one result line.
ring() {
	local part=$1 config=$2 rep=$3 t0 t1
	shift 3
	t0=$(bench_cpu_ticks "$td_pid")
	"$TDFRONT" --shm "$work/shm.sock" --json --quiet --no-progress "$@" \
		>"$work/run.json" 2>"$work/run.err" ||
		{ echo "ring.sh: td-front failed ($config):" >&2; cat "$work/run.err" >&2; exit 1; }
	t1=$(bench_cpu_ticks "$td_pid")
	python3 - "$work/run.json" "$part" "$config" "$rep" "$((t1 - t0))" >>"$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
b = j["backend"] or {}
hist = ",".join("%d-%d:%d" % (h["min"], h["max"], h["count"])
                for h in b.get("segments_per_request", []) if h["count"])
print(sys.argv[2], sys.argv[3], "ring", sys.argv[4], j["iops"],
      j["bytes_per_s"] / 1048576, j["ios"], b.get("requests_total", 0),
      b.get("backend_submits", 0), j["frontend"]["segments"],
      j["frontend"]["requests"], sys.argv[5], j["frontend"]["cpu_us"],
      hist or "-")
EOF
}

# fio_run PART CONFIG REP FILE fio-args...
fio_run() {
	local part=$1 config=$2 rep=$3 file=$4
	shift 4
	fio --name=job --filename="$file" --ioengine=libaio --direct=1 \
		--time_based --runtime="$RUNTIME" --ramp_time=1 --randrepeat=0 \
		--norandommap --output-format=json --output="$work/fio.json" "$@" ||
		{ echo "ring.sh: fio failed" >&2; exit 1; }
	python3 - "$work/fio.json" "$part" "$config" "$rep" >>"$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
iops = j["read"]["iops"] + j["write"]["iops"]
bw = (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1048576
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
print(sys.argv[2], sys.argv[3], "fio", sys.argv[4], iops, bw, ios, 0, 0, 0, 0, 0, 0, "-")
EOF
}

# --- parts ----------------------------------------------------------------------

part_null() {
	echo "# null: 4 KiB random read, QD 32, ${RUNTIME} s x $REPS" >&2
	start_tapdisk "null:size=$SIZE"
	for rep in $(seq "$REPS"); do
		ring null randread4k-qd32 "$rep" --pattern rand --bs 4k --qd 32 \
			--time "$RUNTIME"
	done
	stop_tapdisk
}

# name td-front-args | fio-args
AIO_JOBS="randread4k-qd32|--pattern rand --rw read --bs 4k --qd 32|--rw=randread --bs=4k --iodepth=32
seqread1m-qd8|--pattern seq --rw read --bs 1m --qd 8 --max-segments 256|--rw=read --bs=1M --iodepth=8
seqwrite1m-qd8|--pattern seq --rw write --bs 1m --qd 8 --max-segments 256|--rw=write --bs=1M --iodepth=8"

part_aio() {
	local dir file k rep name fargs oargs
	for dir in $DIRS; do
		file=$(mktemp "$dir/ring-bench.XXXXXX.img") || exit 1
		files+=("$file")
		echo "# aio on $dir ($(df -T "$dir" | awk 'NR==2 {print $2}')): filling $SIZE" >&2
		fio --name=fill --filename="$file" --size="$SIZE" --rw=write --bs=1M \
			--ioengine=libaio --direct=1 --iodepth=8 --output=/dev/null || exit 1
		start_tapdisk "aio:$file"
		for rep in $(seq "$REPS"); do
			while IFS='|' read -r name oargs fargs; do
				# Rotate which target goes first in each repetition.
				for k in 0 1; do
					if [ $(((k + rep) % 2)) -eq 0 ]; then
						echo "#   rep $rep $name fio" >&2
						# shellcheck disable=SC2086
						fio_run "aio:$dir" "$name" "$rep" "$file" $fargs
					else
						echo "#   rep $rep $name td-front" >&2
						# shellcheck disable=SC2086
						ring "aio:$dir" "$name" "$rep" $oargs --time "$RUNTIME"
					fi
				done
			done <<<"$AIO_JOBS"
		done
		stop_tapdisk
		rm -f "$file"
	done
}

part_thesis() {
	local dir file configs=() i rep n
	for segs in 11 32 256 4096; do
		for order in 0 1 2 3 4; do
			configs+=("$segs:$order")
		done
	done
	n=${#configs[@]}
	for dir in $DIRS; do
		file=$(mktemp "$dir/ring-thesis.XXXXXX.img") || exit 1
		files+=("$file")
		truncate -s "$SIZE" "$file"
		start_tapdisk "aio:$file"
		echo "# thesis on $dir: 1 MiB O_DIRECT writes, $n configurations x $REPS" >&2
		for rep in $(seq "$REPS"); do
			for i in $(seq 0 $((n - 1))); do
				c=${configs[$(((i + rep * 7) % n))]}
				ring "thesis:$dir" "$c" "$rep" --pattern seq --rw write \
					--bs 1m --qd 1 --bytes "$THESIS_BYTES" \
					--max-segments "${c%%:*}" --ring-order "${c##*:}"
			done
		done
		stop_tapdisk
		rm -f "$file"
	done
}

part_queues() {
	local rep i q
	echo "# queues: 4 KiB random read, QD 32 per ring, 1/2/4 rings, ${RUNTIME} s x $REPS" >&2
	start_tapdisk "null:size=$SIZE"
	for rep in $(seq "$REPS"); do
		for i in 0 1 2; do
			q=$((1 << ((i + rep) % 3)))
			ring queues "randread4k-qd32-q$q" "$rep" --pattern rand \
				--bs 4k --qd 32 --queues "$q" --time "$RUNTIME"
		done
	done
	stop_tapdisk
}

case $ONLY in
"") part_null; part_aio; part_thesis ;;
null|aio|thesis|queues) "part_$ONLY" ;;
*) echo "ring.sh: --only null, aio, thesis or queues" >&2; exit 2 ;;
esac

python3 "$here/ring-summary.py" "$results" "$(getconf CLK_TCK)" "${JSON:-}"
