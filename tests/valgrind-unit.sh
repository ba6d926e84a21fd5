#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# valgrind-unit.sh BUILDDIR - run every unit test binary under valgrind
# memcheck; any error or definite leak fails.
set -u
b=${1:?usage: valgrind-unit.sh BUILDDIR}
command -v valgrind >/dev/null || { echo "valgrind missing (apt-get install valgrind)" >&2; exit 1; }
fail=0 n=0
for t in $(find "$b/tests/unit" -type f -name 'test_*' -perm -u+x | sort); do
	case $t in *.o|*.log|*.trs) continue ;; esac
	n=$((n + 1))
	if valgrind -q --leak-check=full --errors-for-leak-kinds=definite \
		--error-exitcode=99 "$t" >"$t.valgrind" 2>&1; then
		echo "valgrind ok: $(basename "$t")"
	else
		echo "valgrind FAILED: $(basename "$t") (see $t.valgrind)"
		grep -E '==[0-9]+==' "$t.valgrind" | head -30
		fail=1
	fi
done
echo "valgrind: $n binaries, $([ $fail -eq 0 ] && echo clean || echo errors)"
exit $fail
