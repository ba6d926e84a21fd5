#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rpc-limits.sh - stripe-master's connection limit (back-pressure in the
# listen queue), its idle timeout, and slow RPC clients that must not delay
# another (issue #10); rpc-limits.py runs the cases.
#
# Prints one line per case; exits 0 when all pass, 1 when one fails, 77
# (automake's skip) when python3 is missing.  BUILDDIR (set by make check)
# is where bin/stripe-master and bin/stripe-ctl were built.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
HERE=$(cd "$(dirname "$0")" && pwd)

if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not found"
	exit 77
fi
for bin in stripe-master stripe-ctl; do
	if [ ! -x "$BUILDDIR/bin/$bin" ]; then
		echo "FAIL: $BUILDDIR/bin/$bin not built"
		exit 1
	fi
done

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/rpc-limits.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
timeout 300 python3 "$HERE/rpc-limits.py" "$BUILDDIR/bin/stripe-master" \
	"$BUILDDIR/bin/stripe-ctl" "$WORK" || {
	tail -5 "$WORK/master.log" 2>/dev/null
	exit 1
}
