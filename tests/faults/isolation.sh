#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# isolation.sh - a slow NBD client and a shm frontend that stops consuming
# its responses must not delay another client of the same tapdisk (issue
# #10); isolation.py runs the cases and says how each bound was met.
#
# Prints one line per case; exits 0 when all pass, 1 when one fails, 77
# (automake's skip) when python3 (3.9 or later) is missing.  BUILDDIR (set
# by make check) is where bin/tapdisk and bin/td-front were built.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
HERE=$(cd "$(dirname "$0")" && pwd)

if ! python3 -c 'import random; random.Random(1).randbytes(1)' 2>/dev/null; then
	echo "SKIP: python3 3.9 or later not found"
	exit 77
fi
for bin in tapdisk td-front; do
	if [ ! -x "$BUILDDIR/bin/$bin" ]; then
		echo "FAIL: $BUILDDIR/bin/$bin not built"
		exit 1
	fi
done

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/isolation.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
timeout 300 python3 "$HERE/isolation.py" "$BUILDDIR/bin/tapdisk" \
	"$BUILDDIR/bin/td-front" "$WORK" || {
	tail -5 "$WORK/tapdisk.log" 2>/dev/null
	exit 1
}
