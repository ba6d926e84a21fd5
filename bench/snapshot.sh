#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# snapshot.sh - what a snapshot copy costs the writes it runs under: fio
# 4 KiB random writes at depth 32 (nbd engine) against `tapdisk -a
# aio:FILE`, once plain and once with `tap-ctl snapshot start` issued
# just before fio starts (copy-before-write on every first write to a
# chunk, the background copy at full speed).  Issue #21 asks for at
# least 70 % of the plain throughput.
#
# usage: bench/snapshot.sh [--dir DIR] [--size SIZE] [--runtime S] [--reps N]
#   --dir DIR      where the disk and the target go (default /dev/shm)
#   --size SIZE    disk size, truncate's syntax (default 4G)
#   --runtime S    seconds per fio run (default 5)
#   --reps N       repetitions of both runs, order alternated; medians
#                  are reported (default 3)
# Prints the median IOPS of each run, whether the copy was still going
# when fio ended, and during/plain.  Exits 0 (the verdict is printed,
# not enforced: the machine is shared and noisy).
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILDDIR=${BUILDDIR:-$here/..}
TAPDISK=${TAPDISK:-$BUILDDIR/bin/tapdisk}
TAPCTL=${TAPCTL:-$BUILDDIR/bin/tap-ctl}
DIR=/dev/shm SIZE=4G RUNTIME=5 REPS=3
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--reps) REPS=$2; shift ;;
	*) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
WORK=$(mktemp -d "$DIR/snap-bench.XXXXXX")
export TAPSTRIPE_STATE_DIR=$WORK/state
TD_PID=
cleanup() {
	if [ -n "$TD_PID" ] && kill -0 "$TD_PID" 2>/dev/null; then
		kill "$TD_PID"
		wait "$TD_PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

# run snap|plain: prints "IOPS STATE" of one fio run on a fresh tapdisk.
run() {
	local sock=$WORK/nbd.sock state=-
	rm -f "$WORK/disk.img" "$WORK/target.img"
	truncate -s "$SIZE" "$WORK/disk.img" "$WORK/target.img"
	"$TAPDISK" --foreground -a "aio:$WORK/disk.img" --nbd "unix:$sock" \
		--run-dir "$WORK" --name snapbench \
		--log-file "$WORK/tapdisk.log" &
	TD_PID=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		sleep 0.1
	done
	if [ "$1" = snap ]; then
		"$TAPCTL" --run-dir "$WORK" snapshot -i "$TD_PID" start \
			"aio:$WORK/target.img" >/dev/null || exit 1
	fi
	(cd "$WORK" && fio --output-format=json --output="$WORK/fio.json" \
		--ioengine=nbd \
		--uri="nbd+unix:///?socket=$sock" --name=job --rw=randwrite \
		--bs=4k --iodepth=32 --size="$SIZE" --time_based \
		--runtime="$RUNTIME" >/dev/null)
	if [ "$1" = snap ]; then
		state=$("$TAPCTL" --run-dir "$WORK" snapshot -i "$TD_PID" \
			status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%s:%d/%d" % (d["state"], d["chunks_copied"], d["chunks_total"]))')
	fi
	echo "$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["jobs"][0]["write"]["iops"]))' "$WORK/fio.json") $state"
	kill "$TD_PID"
	wait "$TD_PID" 2>/dev/null
	TD_PID=
}
plain=() snap=() states=()
for r in $(seq "$REPS"); do
	if [ $((r % 2)) = 1 ]; then
		plain+=("$(run plain | cut -d' ' -f1)")
		out=$(run snap)
	else
		out=$(run snap)
		plain+=("$(run plain | cut -d' ' -f1)")
	fi
	snap+=("${out%% *}") states+=("${out#* }")
done
python3 - "${plain[*]}" "${snap[*]}" "${states[*]}" <<'PY'
import statistics, sys
p = [int(x) for x in sys.argv[1].split()]
s = [int(x) for x in sys.argv[2].split()]
mp, ms = statistics.median(p), statistics.median(s)
print("plain:           IOPS %s, median %d" % (p, mp))
print("during snapshot: IOPS %s, median %d" % (s, ms))
print("copy state when fio ended (state:copied/total): %s" % sys.argv[3])
print("during/plain: %.3f (issue #21 asks >= 0.70)" % (ms / mp))
PY
