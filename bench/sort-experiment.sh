#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# sort-experiment.sh - the thesis's sort experiment, with and without the
# sort driver, on a local file and on an IOPS-throttled disk.
#
# usage: bench/sort-experiment.sh [--rounds N] [--iops N] [--dir DIR] [--json FILE]
#   --rounds N   rounds per run (default 100)
#   --iops N     the throttled disk's IOPS budget, each of read and write
#                (default 200)
#   --dir DIR    where the backing files go (default /var/tmp)
#   --json FILE  also write the figures there
#
# A round writes a fresh 112 KiB region as 28 x 4 KiB writes submitted in
# one batch in interleaved order (blocks 0, 2, 4, ... 26, then 1, 3, ...
# 27) and waits for all of them (td-front --pattern interleave).  Targets:
#   file       aio over a file on DIR
#   throttled  aio over a loop device (direct I/O) over a file on DIR, with
#              tapdisk in a cgroup v1 blkio group limited to --iops IOPS:
#              every backend I/O costs the same, like a seek-bound disk
# Each target runs three chains: "aio:DEV,merge=off" (no sort, no merging:
# the thesis's baseline), "sort|aio:DEV,merge=off" (the sort driver alone)
# and "aio:DEV" (no sort; aio's own merging of adjacent iocbs).  Printed
# per run: time, requests per round reaching tapdisk, backend submissions
# per round, and the speed-up of sort.  Needs root (losetup, cgroups).
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILDDIR=${BUILDDIR:-$here/..}
TAPDISK=${TAPDISK:-$BUILDDIR/bin/tapdisk}
TDFRONT=${TDFRONT:-$BUILDDIR/bin/td-front}
ROUNDS=100 IOPS=200 DIR=/var/tmp JSON=
CGROOT=/sys/fs/cgroup/blkio

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) ROUNDS=$2; shift ;;
	--iops) IOPS=$2; shift ;;
	--dir) DIR=$2; shift ;;
	--json) JSON=$2; shift ;;
	-h|--help) usage; exit 0 ;;
	*) echo "sort-experiment.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
die() { echo "sort-experiment.sh: $*" >&2; exit 1; }
[ -x "$TAPDISK" ] && [ -x "$TDFRONT" ] || die "build first: $TAPDISK and $TDFRONT are needed (or set TAPDISK=, TDFRONT=)"
[ -d "$CGROOT" ] || die "no cgroup v1 blkio controller at $CGROOT"
[ "$(id -u)" = 0 ] || die "needs root (losetup, cgroups)"

work=$(mktemp -d "$DIR/td-sortexp.XXXXXX") || exit 1
cg=$CGROOT/tapstripe-sortexp-$$
loopdev= server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	[ -n "$loopdev" ] && losetup -d "$loopdev"
	[ -d "$cg" ] && rmdir "$cg"
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

size_mib=$(( (ROUNDS * 112 + 1023) / 1024 + 4 ))
truncate -s "${size_mib}M" "$work/file.img" "$work/loop.img"
loopdev=$(losetup -f --show --direct-io=on "$work/loop.img") || die "losetup failed"
mkdir "$cg" || die "cannot create cgroup $cg"
majmin=$(lsblk -dno MAJ:MIN "$loopdev" | tr -d ' ')
echo "$majmin $IOPS" >"$cg/blkio.throttle.write_iops_device"
echo "$majmin $IOPS" >"$cg/blkio.throttle.read_iops_device"

run() { # target chain -> prints "secs requests submissions"
	local target=$1 chain=$2 sock=$work/shm.sock
	rm -f "$sock"
	"$TAPDISK" --foreground -a "$chain" --shm "$sock" --run-dir "$work" \
		--log-level warn 2>>"$work/tapdisk.log" &
	server_pid=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
	[ -S "$sock" ] || { cat "$work/tapdisk.log" >&2; die "tapdisk did not start"; }
	[ "$target" = throttled ] && echo "$server_pid" >"$cg/cgroup.procs"
	"$TDFRONT" --shm "$sock" --pattern interleave --rounds "$ROUNDS" \
		--control "$work/tapdisk-$server_pid.sock" --json >"$work/out.json" ||
		{ cat "$work/tapdisk.log" >&2; die "td-front failed ($target, $chain)"; }
	kill "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=
	python3 - "$work/out.json" "$ROUNDS" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1])); rounds = int(sys.argv[2])
b = j["backend"]
print(j["elapsed_us"] / 1e6, b["requests_total"] / rounds, b["backend_submits"] / rounds)
PYEOF
}

printf '%-10s %-14s %9s %14s %18s\n' target config seconds "requests/round" "submissions/round"
results=()
for target in file throttled; do
	dev=$work/file.img
	[ "$target" = throttled ] && dev=$loopdev
	for mode in off on aio-merge; do
		case $mode in
		off) chain="aio:$dev,merge=off" ;;
		on) chain="sort|aio:$dev,merge=off" ;;
		aio-merge) chain="aio:$dev" ;;
		esac
		printf '\r# %s, %s ...' "$target" "$mode" >&2
		read -r secs reqs subs < <(run "$target" "$chain")
		[ -n "$secs" ] || die "run failed ($target, $mode)"
		printf '\r%-10s %-14s %9.3f %14.1f %18.1f\n' "$target" "sort $mode" "$secs" "$reqs" "$subs"
		results+=("$target $mode $secs $reqs $subs")
	done
done
printf '%s\n' "${results[@]}" | python3 -c '
import json, sys
rows = [l.split() for l in sys.stdin if l.strip()]
t = {(r[0], r[1]): [float(x) for x in r[2:]] for r in rows}
out = {}
keys = ("seconds", "requests_per_round", "submissions_per_round")
for target in ("file", "throttled"):
    off, on = t[(target, "off")], t[(target, "on")]
    print("%-10s sort speed-up: %.2fx (%.3f s -> %.3f s)" % (target, off[0] / on[0], off[0], on[0]))
    out[target] = {m: dict(zip(keys, t[(target, m)])) for m in ("off", "on", "aio-merge")}
    out[target]["speedup"] = off[0] / on[0]
if len(sys.argv) > 1 and sys.argv[1]:
    json.dump(out, open(sys.argv[1], "w"), indent=2)
' "${JSON:-}"
