#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# lab-ha.sh - the lab's HA layout (issue #23): `lab.sh up 2 --ha` brings up
# 2 iSCSI servers, 3 etcd members and 2 masters on them; `status` shows
# the members (one leader) and both masters; what is done through one
# master is seen through the other; `down` stops every process it started
# and removes its state.
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without root,
# tgt or etcd (apt-get install tgt etcd-server).  About 10 s.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
export BUILDDIR
HERE=$(cd "$(dirname "$0")" && pwd)
LAB=$HERE/../lab/lab.sh
CTL=$BUILDDIR/bin/stripe-ctl
# shellcheck source=tests/lab/etcd-lib.sh
. "$HERE/../lab/etcd-lib.sh"
PASSED=0
FAILED=0

skip() {
	echo "SKIP: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "the lab needs root (network namespaces, tc)"
command -v tgtd >/dev/null || skip "tgtd not found (apt-get install tgt)"
etcd_lib_have || skip "etcd not found (apt-get install etcd-server)"
for prog in "$CTL" "$BUILDDIR/bin/stripe-master"; do
	[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
done

WORK=$(mktemp -d /tmp/lab-ha.XXXXXX)
export LAB_STATE=$WORK/lab LAB_NET=auto LAB_RATE=0 LAB_SIZE=256M
export LAB_EXTENT=4M LAB_DIR=$WORK/luns
unset MASTER LAB_HA
cleanup() {
	"$LAB" down >/dev/null 2>&1 || echo "lab.sh down failed; state in $LAB_STATE" >&2
	rm -rf "$WORK"
}
trap cleanup EXIT

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}

fail() {
	echo "FAIL: $1${2:+ ($2)}"
	FAILED=$((FAILED + 1))
}

out=$("$LAB" up 2 --ha 2>&1) || { echo "FAIL: lab.sh up 2 --ha"; echo "$out"; exit 1; }
pass "lab.sh up 2 --ha"
eval "$("$LAB" env)"
M1=${LAB_MASTERS%%,*} M2=${LAB_MASTERS#*,}
[ "$M1" = "$LAB_MASTER" ] && [ -n "$M2" ] && [ "$M2" != "$M1" ] &&
	[[ $LAB_STORE == etcd://*/lab-* ]] &&
	pass "env: LAB_MASTERS $LAB_MASTERS, LAB_STORE $LAB_STORE" ||
	fail "env: two masters and the store" "LAB_MASTERS=$LAB_MASTERS LAB_STORE=$LAB_STORE"

st=$("$LAB" status)
[ "$(grep -c '^etcd m[0-2] .* alive' <<<"$st")" = 3 ] &&
	[ "$(grep -c 'LEADER' <<<"$st")" = 1 ] &&
	[ "$(grep -c '^master .* alive, .*store etcd://' <<<"$st")" = 2 ] &&
	pass "status: 3 etcd members alive, one leader, 2 masters on the store" ||
	fail "status: 3 etcd members alive, one leader, 2 masters on the store" "$st"
PIDS=$(awk '$1 == "etcd" || $1 == "master" { for (i = 1; i < NF; i++) if ($i == "pid") print $(i + 1) }' <<<"$st")

[ "$("$CTL" --master "$M2" server list --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" = 2 ] &&
	pass "the servers registered through the first master are listed by the second" ||
	fail "the servers registered through the first master are listed by the second"
out=$("$CTL" --master "$M2" vdisk create ha1 --size 16M --stripes 2 -o "$WORK/ha1.map" 2>&1) &&
	"$CTL" --master "$M1" vdisk show --name ha1 >/dev/null 2>&1 &&
	pass "a disk created through the second master is seen by the first" ||
	fail "a disk created through the second master is seen by the first" "$out"

"$LAB" down >/dev/null 2>&1 || fail "lab.sh down"
# running: PID exists and is not a zombie (the lab's processes are
# reaped by whoever adopted them, not by this script)
running() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]; }
for t in $(seq 20); do
	left=
	for pid in $PIDS; do running "$pid" && left="$left $pid"; done
	[ -z "$left" ] && break
	sleep 0.1
done
[ "$(wc -w <<<"$PIDS")" = 5 ] && [ -z "$left" ] && [ ! -e "$LAB_STATE" ] &&
	pass "down: the 3 etcd members and 2 masters stopped, the state removed" ||
	fail "down: the 3 etcd members and 2 masters stopped, the state removed" \
		"pids $PIDS; left:$left; $(ls "$LAB_STATE" 2>&1 | head -5)"

echo "lab-ha: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
