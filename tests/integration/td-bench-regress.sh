#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# td-bench-regress.sh - `td-bench regress --quick` passes on a clean tree and
# fails on a deliberately crippled configuration.
#
# Cases, each against the committed baseline bench/baselines/quick.json and
# limited (--only) to the probes read from tapdisk's own counters, which are
# deterministic (the throughput ratios are left to ./setup.sh test, which
# runs the whole quick set):
#   clean        exits 0 with "VERDICT: PASS"
#   segments     every tapdisk started with --max-indirect-segments 11: a
#                1 MiB write arrives as 24 requests; exits 1 naming
#                quick.ring.write1m-seg256.requests_per_io
#   sort         the sort driver's merging cut off (max_merge=4k): 28
#                backend submissions per round instead of 1; exits 1 naming
#                quick.sort.interleave.submits_per_round
#   polling      the QD 1 probe's polling tapdisk given --poll-us=0 (polling
#                silently off): its poller takes none of the requests
#                instead of ~0.9; exits 1 naming both
#                quick.ring.d*4k-qd1-poll.polled_fraction
#   result       the JSON result holds the machine, kernel, commit and every
#                figure with its repetitions
#   baseline     --update-baseline writes a baseline (a scratch file) that
#                `td-bench compare` then passes
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all pass,
# 1 when one fails, 77 (automake's skip) when python3 or fio is missing.
# BUILDDIR (set by make check) is where bin/ was built.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
here=$(cd "$(dirname "$0")" && pwd)
TDBENCH=$here/../../tools/td-bench/td-bench
BASELINE=$here/../../bench/baselines/quick.json
PASSED=0
FAILED=0

for tool in python3 fio; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool not found (apt-get install python3 fio)"
		exit 77
	fi
done
for prog in "$BUILDDIR/bin/tapdisk" "$BUILDDIR/bin/td-front" "$TDBENCH"; do
	if [ ! -x "$prog" ]; then
		echo "FAIL: $prog not built"
		exit 1
	fi
done

WORK=$(mktemp -d /tmp/td-bench-regress.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}

fail() {
	echo "FAIL: $1"
	[ -f "$WORK/out" ] && sed 's/^/    /' "$WORK/out"
	FAILED=$((FAILED + 1))
}

# regress [td-bench options...]: the counter probes of the quick set, once.
# Leaves the output in $WORK/out and returns td-bench's exit status.
regress() {
	BUILDDIR=$BUILDDIR "$TDBENCH" regress --quick --reps 1 --size 64M \
		--only 'quick.ring.write1m-*' --only 'quick.sort.*' \
		--no-quiet-check --no-progress --no-plots \
		--results-dir "$WORK/results" --dir "$WORK" "$@" >"$WORK/out" 2>&1
}

regress --baseline "$BASELINE"
rc=$?
# Keep the clean run's result aside: result files are named by the second,
# and the next run may land in the same one.
clean_result=$(ls -t "$WORK"/results/*-regress.json 2>/dev/null | head -1)
[ -n "$clean_result" ] && cp "$clean_result" "$WORK/clean-result.json"
if [ $rc -eq 0 ] && grep -q '^VERDICT: PASS' "$WORK/out"; then
	pass "clean: regress --quick passes against $(basename "$BASELINE")"
else
	fail "clean: exit $rc, expected 0 and VERDICT: PASS"
fi

regress --baseline "$BASELINE" --tapdisk-opt=--max-indirect-segments=11
rc=$?
if [ $rc -eq 1 ] && grep -q '^VERDICT: REGRESSION' "$WORK/out" &&
	grep -q '^  quick.ring.write1m-seg256.requests_per_io: 1.00 -> 24.00' "$WORK/out"; then
	pass "segments: max 11 segments (24 requests per 1 MiB write) is a regression"
else
	fail "segments: exit $rc, expected 1 naming quick.ring.write1m-seg256.requests_per_io"
fi

regress --baseline "$BASELINE" --sort-opts max_merge=4k
rc=$?
if [ $rc -eq 1 ] && grep -q '^  quick.sort.interleave.submits_per_round: 1.00 -> 28.00' "$WORK/out"; then
	pass "sort: sort without merging (28 submissions per round) is a regression"
else
	fail "sort: exit $rc, expected 1 naming quick.sort.interleave.submits_per_round"
fi

# Polling silently off: the tapdisk of the QD 1 probe is asked for
# --poll-us 200, and --poll-us=0 after it (--tapdisk-opt comes last) wins.
regress --baseline "$BASELINE" --only 'quick.ring.*polled_fraction' --tapdisk-opt=--poll-us=0
rc=$?
if [ $rc -eq 1 ] &&
	grep -Eq '^  quick.ring.dread4k-qd1-poll.polled_fraction: [0-9.]+ -> 0.00' "$WORK/out" &&
	grep -Eq '^  quick.ring.dwrite4k-qd1-poll.polled_fraction: [0-9.]+ -> 0.00' "$WORK/out"; then
	pass "polling: tapdisk not polling (no request taken by its poller at QD 1) is a regression"
else
	fail "polling: exit $rc, expected 1 naming quick.ring.d*4k-qd1-poll.polled_fraction"
fi

result=
[ -s "$WORK/clean-result.json" ] && result=$WORK/clean-result.json
if [ -n "$result" ] && python3 - "$result" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))
m = d["machine"]
assert m["kernel"] and m["cpus"] and m["commit"], m
f = d["figures"]["quick.ring.write1m-seg256.requests_per_io"]
assert f["kind"] == "ratio" and f["reps"] == [1.0] and f["value"] == 1.0, f
EOF
	pass "result: machine, kernel, commit and figures with repetitions in $(basename "$result")"
else
	fail "result: no result file, or it lacks the machine or the figures"
fi

regress --baseline "$WORK/new.json" --update-baseline
rc=$?
last=$(ls -t "$WORK"/results/*-regress.json | head -1)
if [ $rc -eq 0 ] && [ -s "$WORK/new.json" ] &&
	"$TDBENCH" compare "$last" --baseline "$WORK/new.json" >"$WORK/out" 2>&1 &&
	grep -q '^VERDICT: PASS' "$WORK/out"; then
	pass "baseline: --update-baseline writes one that compare passes"
else
	fail "baseline: exit $rc, or compare against the new baseline did not pass"
fi

echo "$PASSED passed, $FAILED failed"
[ $FAILED -eq 0 ]
