#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# tapdisk-kill.sh - tapdisk killed with SIGKILL under write load and
# restarted (issue #10): every write acknowledged before a completed flush
# is present afterwards, and (a process kill, not a power cut) so is every
# acknowledged write.  kill-verify.py drives the load, the kills and the
# checks; this runs it over aio:FILE and sort|aio:FILE, ROUNDS kills each,
# then once with a flushed block zeroed behind tapdisk's back, which the
# verifier must report (its self-test).
#
# Prints one line per round and per chain; exits 0 when every check held,
# 1 when one failed, 77 (automake's skip) when python3 is missing.
# BUILDDIR (set by make check) is where bin/tapdisk was built; the disk
# lives under TMPDIR (default /var/tmp: a real file system, O_DIRECT).
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${ROUNDS:-5}
SEED=${SEED:-1}

if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not found"
	exit 77
fi
if [ ! -x "$TAPDISK" ]; then
	echo "FAIL: $TAPDISK not built"
	exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/tapdisk-kill.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
status=0
for chain in "aio:$WORK/disk.img" "sort|aio:$WORK/disk.img"; do
	rm -f "$WORK/disk.img"
	truncate -s 64M "$WORK/disk.img"
	timeout 600 python3 "$HERE/kill-verify.py" "$TAPDISK" "$chain" \
		"$WORK/disk.img" "$WORK" "$ROUNDS" "$SEED" || {
		status=1
		tail -5 "$WORK/tapdisk.log" 2>/dev/null
	}
done
# The verifier itself: a flushed write lost behind its back must be seen.
rm -f "$WORK/disk.img"
truncate -s 64M "$WORK/disk.img"
if out=$(DROP_FLUSHED=1 timeout 600 python3 "$HERE/kill-verify.py" "$TAPDISK" \
	"aio:$WORK/disk.img" "$WORK/disk.img" "$WORK" 1 "$SEED" 2>&1); then
	echo "FAIL: the verifier missed a lost flushed write: $out"
	status=1
elif echo "$out" | grep -q "1 blocks break the flush promise"; then
	echo "PASS: the verifier notices a lost flushed write (self-test)"
else
	echo "FAIL: verifier self-test: $out"
	status=1
fi
exit $status
