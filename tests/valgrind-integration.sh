#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# valgrind-integration.sh BUILDDIR [TEST...] - run integration and fault
# tests with the daemons and control tools under valgrind memcheck.
#
# The tests find their programs through BUILDDIR (and tap-ctl its tapdisk
# through TAPDISK, which they set from BUILDDIR).  This script makes a
# shadow of BUILDDIR, BUILDDIR/valgrind-shadow, where everything is a
# symbolic link to the build except the programs of WRAPPED, which are
# scripts that exec the real program under
#   valgrind --leak-check=full --errors-for-leak-kinds=definite
# with its report in BUILDDIR/valgrind-reports/PROGRAM.PID.log.  Each TEST
# (default: the list below, paths under tests/) runs with BUILDDIR set to
# the shadow; it fails when it fails, and the run fails when any report
# holds an error or a definite leak.  A process killed with SIGKILL (some
# cases do that on purpose) ends without a leak check; its memory errors
# up to then are still reported.
#
# Left out of the default list: the cases that measure time or memory
# (isolation, the limits, stripe-slow, rss-verify) or drive gigabytes
# (net-cut, the resync cases), where valgrind's 20-50x slowdown is the
# fault; they run under ASan+UBSan (setup.sh test).
#
# Prints a line per test and per report; exits 0 when every test passed
# and every report is clean, 1 otherwise.
set -u
b=${1:?usage: valgrind-integration.sh BUILDDIR [TEST...]}
shift
b=$(cd "$b" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
WRAPPED="tapdisk stripe-master tap-ctl stripe-ctl"
# master.sh's kill -9 during lease calls runs each call as a stripe-ctl
# under valgrind (about half a second each): 200 calls here, the full
# 1000 in the plain and sanitizer runs.
export LEASE_CALLS=${LEASE_CALLS:-200}
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(integration/tap-ctl.sh
	integration/nbd-clients.sh integration/nbd-hostile.sh
	integration/shm-verify.sh integration/master.sh
	integration/stripe-verify.sh integration/stripe-fault.sh
	faults/tapdisk-kill.sh faults/scsi-errors.sh)
command -v valgrind >/dev/null ||
	{ echo "valgrind missing (apt-get install valgrind)" >&2; exit 1; }

shadow=$b/valgrind-shadow
reports=$b/valgrind-reports
rm -rf "$shadow" "$reports"
mkdir -p "$shadow/bin" "$reports"
for f in "$b"/* "$b"/.[!.]*; do
	[ -e "$f" ] || continue
	case ${f##*/} in bin | valgrind-shadow | valgrind-reports) continue ;; esac
	ln -s "$f" "$shadow/${f##*/}"
done
for f in "$b"/bin/*; do
	ln -s "$f" "$shadow/bin/${f##*/}"
done
for p in $WRAPPED; do
	[ -x "$b/bin/$p" ] || { echo "no $b/bin/$p: build first" >&2; exit 1; }
	rm -f "$shadow/bin/$p"
	cat >"$shadow/bin/$p" <<EOF
#!/bin/sh
exec valgrind -q --leak-check=full --errors-for-leak-kinds=definite \\
	--show-leak-kinds=definite --log-file="$reports/$p.%p.log" \\
	"$b/bin/$p" "\$@"
EOF
	chmod +x "$shadow/bin/$p"
done

fail=0
for t in "${TESTS[@]}"; do
	log=$reports/${t//\//-}.out
	start=$SECONDS
	BUILDDIR=$shadow "$top/tests/$t" >"$log" 2>&1
	rc=$?
	case $rc in
	0) echo "PASS: $t under valgrind [$((SECONDS - start))s]" ;;
	77) echo "SKIP: $t ($(grep -m1 SKIP "$log"))" ;;
	*)
		echo "FAIL: $t under valgrind (exit $rc; see $log)"
		grep -E 'FAIL' "$log" | head -10
		fail=1
		;;
	esac
done

n=0
for r in "$reports"/*.log; do
	[ -e "$r" ] || continue
	n=$((n + 1))
	if [ -s "$r" ]; then
		echo "valgrind report $r:"
		head -n 40 "$r"
		fail=1
	fi
done
echo "valgrind: $n processes of $WRAPPED, $([ $fail -eq 0 ] && echo clean || echo errors)"
rm -rf "$shadow"
exit $fail
