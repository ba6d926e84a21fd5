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
#                          [--speed BPS] [--mode cbw|row]
#   --dir DIR      where the disk and the target go (default /dev/shm)
#   --size SIZE    disk size, truncate's syntax (default 4G)
#   --runtime S    seconds per fio run (default 5)
#   --reps N       repetitions of both runs, order alternated; medians
#                  are reported (default 3)
#   --speed BPS    limit the background copy (`tap-ctl snapshot speed`;
#                  default none): 1 leaves copy-before-write alone
#   --mode M       cbw (copy-before-write, the default) or row
#                  (redirect-on-write: writes go to the target, the
#                  disk's file keeps the instant)
# Prints the median IOPS of each run over the whole fio run, and over the
# copy alone (fio's IOPS log, 250 ms samples, up to the copy's duration
# in tapdisk's log; the plain run over the same seconds), and the ratios.
# Random writes over the whole disk make copy-before-write copy most of it
# at once: over the copy, the writes share the machine with a copy of the
# whole disk.  Exits 0 (the verdict is printed, not enforced: the
# machine is shared and noisy).
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILDDIR=${BUILDDIR:-$here/..}
TAPDISK=${TAPDISK:-$BUILDDIR/bin/tapdisk}
TAPCTL=${TAPCTL:-$BUILDDIR/bin/tap-ctl}
DIR=/dev/shm SIZE=4G RUNTIME=5 REPS=3 SPEED=0 MODE=cbw
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--speed) SPEED=$2; shift ;;
	--mode) MODE=$2; shift ;;
	*) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
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
	# A job the last snapshot run left (it is killed mid-copy) would
	# resume in this one: every run starts without one.
	rm -rf "$TAPSTRIPE_STATE_DIR"
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
			"aio:$WORK/target.img" "$MODE" >/dev/null || exit 1
		[ "$SPEED" = 0 ] || "$TAPCTL" --run-dir "$WORK" snapshot \
			-i "$TD_PID" speed "$SPEED" >/dev/null || exit 1
	fi
	(cd "$WORK" && fio --output-format=json --output="$WORK/fio.json" \
		--ioengine=nbd \
		--uri="nbd+unix:///?socket=$sock" --name=job --rw=randwrite \
		--bs=4k --iodepth=32 --size="$SIZE" --time_based \
		--write_iops_log="$WORK/iops" --log_avg_msec=250 \
		--runtime="$RUNTIME" >/dev/null)
	if [ "$1" = snap ]; then
		state=$("$TAPCTL" --run-dir "$WORK" snapshot -i "$TD_PID" \
			status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%s:%d/%d" % (d["state"], d["chunks_copied"], d["chunks_total"]))')
	fi
	kill "$TD_PID"
	wait "$TD_PID" 2>/dev/null
	TD_PID=
	# IOPS over the whole run, and over the first WINDOW_MS (the copy's
	# duration, from the snapshot run's log; the plain run uses the
	# last snapshot run's) of fio's IOPS log.
	[ "$1" = snap ] && WINDOW_MS=$(python3 - "$WORK/tapdisk.log" <<'PY'
import datetime, sys
t = {}
for line in open(sys.argv[1]):
    for key in ("chunks to copy", "complete:"):
        if "snapshot onto" in line and key in line:
            t[key] = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S.%f")
print(int((t["complete:"] - t["chunks to copy"]).total_seconds() * 1000) if len(t) == 2 else 10**9)
PY
)
	python3 - "$WORK/fio.json" "$WORK"/iops_iops.*.log "$WINDOW_MS" "$state" <<'PY'
import json, sys
total = int(json.load(open(sys.argv[1]))["jobs"][0]["write"]["iops"])
limit = int(sys.argv[3])
samples = [int(l.split(",")[1]) for l in open(sys.argv[2])
           if int(l.split(",")[0]) <= max(limit, 250)]
print(total, int(sum(samples) / len(samples)) if samples else 0, limit, sys.argv[4])
PY
	rm -f "$WORK"/iops_iops.*.log "$WORK/tapdisk.log"
}
plain=() snap=() pwin=() swin=() states=() copies=()
for r in $(seq "$REPS"); do
	# The snapshot run first: the plain run's window is its copy's.
	WINDOW_MS=1000000000
	read -r tot win WINDOW_MS st <<<"$(run snap)"
	snap+=("$tot") swin+=("$win") states+=("$st") copies+=("$WINDOW_MS")
	read -r tot win _ _ <<<"$(run plain)"
	plain+=("$tot") pwin+=("$win")
done
python3 - "${plain[*]}" "${snap[*]}" "${pwin[*]}" "${swin[*]}" "${states[*]}" "${copies[*]}" <<'PY'
import statistics, sys
p, s, pw, sw = ([int(x) for x in a.split()] for a in sys.argv[1:5])
med = statistics.median
print("whole run  plain: IOPS %s, median %d" % (p, med(p)))
print("whole run  snap:  IOPS %s, median %d" % (s, med(s)))
print("copy window (ms): %s; copy state at fio's end: %s" % (sys.argv[6], sys.argv[5]))
print("copy window plain: IOPS %s, median %d" % (pw, med(pw)))
print("copy window snap:  IOPS %s, median %d" % (sw, med(sw)))
print("whole run during/plain: %.3f" % (med(s) / med(p)))
print("copy window during/plain: %.3f (issue #21 asks >= 0.70)" % (med(sw) / med(pw)))
PY
