# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# stripe-lib.sh - what the stripe integration tests share (sourced, not run).
#
# A test sets LAB_SERVERS and sources this file; it gets a private lab
# (tests/lab/lab.sh with its own state directory, a free 10.X network, its
# own master with 4 MiB extents, no rate caps, LUNs of 256 MiB in tmpfs),
# a work directory, PASS/FAIL counting and clean-up on exit: every tapdisk
# it started is stopped by PID and the lab is taken down.
#
# Skips (exit 77) when not root, when tgt, libnbd-bin or python3-libnbd is
# missing, or when this build's tapdisk has no stripe driver yet.
# BUILDDIR (set by make check) is where the programs were built.

BUILDDIR=${BUILDDIR:-$(pwd)}
export BUILDDIR
HERE=$(cd "$(dirname "$0")" && pwd)
LAB=$HERE/../lab/lab.sh
STRIPE_IO=$HERE/stripe-io.py
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
TDFRONT=$BUILDDIR/bin/td-front
CTL=$BUILDDIR/bin/stripe-ctl
PASSED=0
FAILED=0
TD_PIDS=()
T_START=$(date +%s)

skip() {
	echo "SKIP: $*"
	exit 77
}

[ "$(id -u)" = 0 ] || skip "the lab needs root (network namespaces, tc)"
command -v tgtd >/dev/null || skip "tgtd not found (apt-get install tgt)"
command -v nbdcopy >/dev/null || skip "nbdcopy not found (apt-get install libnbd-bin)"
# libnbd's Python module is the system Python's (a pyenv python3 on PATH lacks it)
PY=
for p in python3 /usr/bin/python3; do
	command -v "$p" >/dev/null && "$p" -c 'import nbd' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || skip "python3 with libnbd not found (apt-get install python3-libnbd)"
for prog in "$TAPDISK" "$TAPCTL" "$TDFRONT" "$CTL" "$BUILDDIR/bin/stripe-master"; do
	[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
done
if "$TAPDISK" --foreground -a stripe:/nonexistent/x.map 2>&1 | grep -q "unknown driver 'stripe'"; then
	skip "this tapdisk has no stripe driver yet"
fi

WORK=$(mktemp -d /tmp/stripe-test.XXXXXX)
export TAPSTRIPE_RUNDIR=$WORK/run
export LAB_STATE=$WORK/lab LAB_NET=auto LAB_RATE=0 LAB_SIZE=${LAB_SIZE:-256M}
export LAB_EXTENT=4M LAB_DIR=$WORK/luns LAB_MTU=9000
unset MASTER
mkdir -p "$TAPSTRIPE_RUNDIR"

stripe_cleanup() {
	local pid
	for pid in "${TD_PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	"$LAB" down >/dev/null 2>&1 || echo "lab.sh down failed; state in $LAB_STATE" >&2
	rm -rf "$WORK"
}
trap stripe_cleanup EXIT

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}

fail() {
	echo "FAIL: $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | head -20 | sed 's/^/    /'
	FAILED=$((FAILED + 1))
}

# check_py WHAT ARGS...: run stripe-io.py; PASS/FAIL lines of its own are
# counted, and its exit status decides WHAT when it prints none.
check_py() {
	local what=$1 out rc line own=0
	shift
	out=$("$PY" "$STRIPE_IO" "$@" 2>&1)
	rc=$?
	while IFS= read -r line; do
		case $line in
		PASS:*) pass "${line#PASS: }"; own=1 ;;
		FAIL:*) fail "${line#FAIL: }"; own=1 ;;
		esac
	done <<<"$out"
	if [ $own = 0 ]; then
		[ $rc = 0 ] && pass "$what: $(tail -1 <<<"$out")" || fail "$what" "$out"
	elif [ $rc != 0 ] && ! grep -q '^FAIL:' <<<"$out"; then
		fail "$what" "$out"
	fi
	return $rc
}

summary() {
	echo "$PASSED passed, $FAILED failed ($(($(date +%s) - T_START)) s)"
	[ "$FAILED" -eq 0 ]
}

lab_up() { # N
	local out
	out=$("$LAB" up "$1" 2>&1) || { echo "FAIL: lab.sh up $1"; echo "$out"; exit 1; }
	eval "$("$LAB" env)"
}

# luns: TARGET=PATH for every server of the lab (stripe-io.py's LUN args).
luns() {
	local i t l
	for ((i = 1; i <= LAB_N; i++)); do
		t=LAB_SRV${i}_TARGET l=LAB_SRV${i}_LUN
		echo "${!t}=${!l}"
	done
}

# lab_index TARGET: the lab's number of the server with that target.
lab_index() { echo "${1##*-srv}"; }

# make_disk NAME SIZE S U R: a striped disk; its mapping file is $WORK/NAME.map.
make_disk() {
	local out
	out=$("$CTL" --master "$LAB_MASTER" vdisk create "$1" --size "$2" --stripes "$3" \
		--stripe-unit "$4" --replicas "$5" -o "$WORK/$1.map" 2>&1) ||
		{ fail "vdisk create $1 (S=$3 U=$4 R=$5)" "$out"; return 1; }
}

# serve NAME CHAIN [TAPDISK OPTIONS...]: a foreground tapdisk with NBD on
# $WORK/NAME.nbd (URI in $URI) and shm on $WORK/NAME.shm; TD_PID.
serve() {
	local name=$1 chain=$2 t
	shift 2
	rm -f "$WORK/$name.nbd" "$WORK/$name.shm"
	"$TAPDISK" --foreground -a "$chain" --name "$name" --nbd "unix:$WORK/$name.nbd" \
		--shm "$WORK/$name.shm" --log-level info --log-file "$WORK/$name.log" "$@" \
		</dev/null >>"$WORK/$name.log" 2>&1 &
	TD_PID=$!
	TD_PIDS+=("$TD_PID")
	URI="nbd+unix:///?socket=$WORK/$name.nbd" # used by the tests
	for ((t = 0; t < 200; t++)); do
		[ -S "$WORK/$name.nbd" ] && [ -S "$WORK/$name.shm" ] && return 0
		kill -0 "$TD_PID" 2>/dev/null || break
		sleep 0.05
	done
	fail "tapdisk serving $chain" "$(tail -5 "$WORK/$name.log")"
	return 1
}

# unserve PID NAME: SIGTERM; tapdisk must exit 0 (every write flushed).
unserve() {
	local rc pid keep=()
	kill -TERM "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	rc=$?
	for pid in "${TD_PIDS[@]}"; do [ "$pid" = "$1" ] || keep+=("$pid"); done
	TD_PIDS=("${keep[@]}")
	[ $rc -eq 0 ] || fail "tapdisk $2 stopped cleanly" "exit $rc; $(tail -5 "$WORK/$2.log")"
	return $rc
}
