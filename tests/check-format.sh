#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# check-format.sh - fail if any C file differs from what clang-format makes
# of it with the repository's .clang-format.  Prints the files and a diff.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
cf=$(command -v clang-format-14 || command -v clang-format) ||
	{ echo "clang-format missing (apt-get install clang-format)" >&2; exit 1; }
bad=0
for f in $(git ls-files '*.c' '*.h' 2>/dev/null || find tapdisk drivers master tools tests -name '*.[ch]'); do
	if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
		echo "not formatted: $f (run: clang-format -i $f)"
		"$cf" --style=file "$f" | diff -u "$f" - | head -20
		bad=1
	fi
done
[ $bad -eq 0 ] && echo "format: all C files match .clang-format"

# Every source file and script names its licence on an SPDX line near its
# top (LICENSE says which: BSD-3-Clause, GPL-2.0-only for patches/).
for f in $(git ls-files '*.c' '*.h' '*.x' '*.sh' '*.py' Makefile.am configure.ac \
	setup.sh .ci/run tools/td-bench/td-bench patches/verify 2>/dev/null); do
	if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier: \(BSD-3-Clause\|GPL-2.0-only\)'; then
		echo "no SPDX licence line in the first 3 lines: $f"
		bad=1
	fi
done
[ $bad -eq 0 ] && echo "licence: every source file and script has its SPDX line"
exit $bad
