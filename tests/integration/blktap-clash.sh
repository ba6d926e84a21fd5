#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# blktap-clash.sh - Xen's block-tap hotplug script calls blktap's tap-ctl;
# tapstripe's refuses each of those command lines, exactly as the scripts
# write them (Xen 4.17's tools/hotplug/Linux/block-tap, and the one of
# 4.18 and later), with an error naming the clash, a non-zero status, and
# no tapdisk touched: the one running beside it still answers, none is
# started, none destroyed.
#
# Needs: BUILDDIR (the build tree; make check sets it).
set -u

BUILDDIR=${BUILDDIR:-${abs_top_builddir:-.}}
TAPCTL=$BUILDDIR/bin/tap-ctl
export TAPDISK=$BUILDDIR/bin/tapdisk
for prog in "$TAPDISK" "$TAPCTL"; do
	[ -x "$prog" ] || { echo "SKIP: $prog not built (set BUILDDIR)"; exit 77; }
done

TMP=$(mktemp -d /tmp/blktap-clash.XXXXXX)
export TAPSTRIPE_RUNDIR=$TMP/run
ID=
passed=0
failed=0
cleanup() {
	local sock pid
	[ -n "$ID" ] && kill -0 "$ID" 2>/dev/null && kill -KILL "$ID"
	# A tapdisk a regression would start here (create -a from the script).
	for sock in "$TAPSTRIPE_RUNDIR"/tapdisk-*.sock; do
		[ -e "$sock" ] || continue
		pid=${sock##*/tapdisk-}
		pid=${pid%.sock}
		kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() {
	failed=$((failed + 1))
	echo "FAIL - $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    /'
}

ID=$(timeout 30 "$TAPCTL" create -a null:size=16M --name beside --log stderr) ||
	{ echo "FAIL - cannot create the tapdisk beside"; exit 1; }
truncate -s 16M "$TMP/disk.img"
img=$TMP/disk.img
minor=0

# Each command line as the scripts write it ($pid and $minor as they would
# have read them; here the real tapdisk's pid, to show it is left alone).
lines=(
	# Xen 4.17: check_tools, find_device, add, remove
	"check"
	"list -t aio -f $img"
	"create -a aio:$img"
	"destroy -p $ID -m $minor"
	# Xen 4.18 and later: find_device, tap_create, remove
	"allocate"
	"spawn"
	"free -m $minor"
	"attach -p $ID -m $minor"
	"open -p $ID -m $minor -a aio:$img"
	"detach -p $ID -m $minor"
)
for line in "${lines[@]}"; do
	# The hotplug script's environment (libxl sets these).
	# shellcheck disable=SC2086 # the words of line are the arguments
	out=$(XENBUS_PATH=backend/vbd/5/51712 XENBUS_TYPE=vbd \
		XENBUS_BASE_PATH=backend timeout 30 "$TAPCTL" $line 2>&1 </dev/null)
	rc=$?
	if [ $rc -ne 0 ] && grep -q "blktap's tap-ctl" <<<"$out" &&
		grep -q "tapstripe's tap-ctl, not blktap's" <<<"$out" &&
		grep -q "backendtype=qdisk, vdev=xvda, target=tapstripe:NAME" <<<"$out"; then
		ok "tap-ctl $line: refused (status $rc), the clash named"
	else
		not_ok "tap-ctl $line: refused with the clash named" "status $rc: $out"
	fi
done

out=$(timeout 30 "$TAPCTL" list 2>&1)
n=$(grep -c . <<<"$out")
if kill -0 "$ID" 2>/dev/null && grep -q "$ID" <<<"$out" && [ "$n" -eq 1 ]; then
	ok "the tapdisk beside still runs and is the only one"
else
	not_ok "the tapdisk beside still runs and is the only one" "$out"
fi
out=$(timeout 30 "$TAPCTL" --help)
grep -q "XEN HOTPLUG SCRIPTS" <<<"$out" && grep -q "blktap-utils" <<<"$out" &&
	ok "tap-ctl --help describes the clash" ||
	not_ok "tap-ctl --help describes the clash" "$out"
timeout 30 "$TAPCTL" destroy -i "$ID" >/dev/null && ID=

echo "# $passed passed, $failed failed"
[ "$failed" -eq 0 ]
