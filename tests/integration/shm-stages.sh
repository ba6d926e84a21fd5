#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# shm-stages.sh - stage timing (tap-ctl stages) end to end, over the shm
# ring and aio on a file (doc/tapdisk.md "Where a QD 1 request's time
# goes").  No timed assertion: only that the figures appear and add up.
#
#  1. Off by default: tap-ctl stages --json says on false and counts 0
#     after I/O; stats --json carries the same "stages" object.
#  2. On: td-front writes 8 MiB in 4 KiB at QD 1, then (reset between)
#     reads them; each time the op's count is the I/Os td-front made, the
#     stages' sums add up to the residence, the aio driver stamped
#     io_submit (submit > 0), the sum of stages <= residence <= td-front's
#     latency (mean, to its 1 us rounding), and the wake-ups were timed.
#     The same with polling on both sides.
#  3. reset clears the sums and keeps timing on; off stops counting; a
#     wrong word is refused with the usage; stats' text shows the table.
#
# Prints one line per case and "N passed, N failed"; exits 0 when all
# pass, 1 otherwise, 77 (automake's skip) when python3 is missing.
# BUILDDIR (set by make check) is where the programs were built.
set -u

SHM_TEST=shm-stages
# shellcheck source=tests/integration/shm-lib.sh
. "$(cd "$(dirname "$0")" && pwd)/shm-lib.sh"

IOS=2048

check() { # NAME PYTHON-EXPR-ON-s(stages)-AND-f(td-front)
	local name=$1 expr=$2
	if python3 - "$WORK/stages.json" "$WORK/front.json" "$expr" <<'EOF'; then
import json, sys
s = json.load(open(sys.argv[1]))["stages"]
try:
    f = json.load(open(sys.argv[2]))
except ValueError:
    f = {}
sys.exit(0 if eval("(" + sys.argv[3] + ")") else 1)
EOF
		pass "$name"
	else
		fail "$name" "$(cat "$WORK/stages.json")"
	fi
}

stages() { # ARGS...: tap-ctl stages -i $TD_PID --json ARGS into stages.json
	"$TAPCTL" stages -i "$TD_PID" --json "$@" >"$WORK/stages.json"
}

DISK=$WORK/disk.img
truncate -s 64M "$DISK"

# --- 1. off by default ----------------------------------------------------------

echo "# 1. off by default"
start_tapdisk aio "aio:$DISK"
front "$WORK/aio.sock" --rw write --bs 4k --qd 1 --bytes 1M
stages
echo '{}' >"$WORK/front.json"
check "stages off by default, nothing counted" \
	'not s["on"] and s["write"]["count"] == 0 and s["ring_wakes"] == 0'
"$TAPCTL" stats -i "$TD_PID" --json >"$WORK/stats.json"
if python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["stages"]; sys.exit(s["on"])' "$WORK/stats.json"; then
	pass "stats --json carries the stages object"
else
	fail "stats --json carries the stages object" "$(head -c 600 "$WORK/stats.json")"
fi

# --- 2. on: counts exact, stages add up -------------------------------------------

# run_op OP MODE: one td-front run of $IOS 4 KiB I/Os, then the checks.
run_op() {
	local op=$1 mode=$2 poll=0
	[ "$mode" = polled ] && poll=200
	stages reset
	front "$WORK/aio.sock" --rw "$op" --pattern seq --bs 4k --qd 1 \
		--bytes $((IOS * 4096)) --poll-us "$poll" --json
	printf '%s\n' "$OUT" >"$WORK/front.json"
	stages
	check "$op, $mode: $IOS timed, the stages add up to the residence" \
		"s['on'] and s['$op']['count'] == $IOS and
		 sum(s['$op']['sum_ns'].values()) == s['$op']['residence_sum_ns']"
	check "$op, $mode: io_submit, disk and notify stamped; wake-ups timed" \
		"all(s['$op']['sum_ns'][k] > 0 for k in ('submit', 'disk', 'notify'))
		 and s['ring_wakes'] > 0 and s['reap_wakes'] > 0"
	check "$op, $mode: stages <= residence <= td-front latency" \
		"f['ios'] == $IOS and
		 s['$op']['residence_mean_ns'] <= (f['latency_us']['mean'] + 1) * 1000
		 and max(s['$op']['mean_ns'].values()) <= s['$op']['residence_mean_ns']"
}

echo "# 2. on: counts exact, the stages add up"
stages on
check "stages on" 's["on"]'
run_op write sleeping
run_op read sleeping
stop_tapdisk "$TD_PID" aio
start_tapdisk aio "aio:$DISK" --poll-us 200
stages on
run_op write polled
run_op read polled

# --- 3. reset, off, usage, text ---------------------------------------------------

echo "# 3. reset, off, usage, text"
stages reset
check "reset clears the sums, timing stays on" \
	's["on"] and s["read"]["count"] == 0 and s["read"]["residence_sum_ns"] == 0'
front "$WORK/aio.sock" --rw read --bs 4k --qd 1 --bytes 1M
OUT=$("$TAPCTL" stats -i "$TD_PID")
if grep -q "^stages (on; mean us per I/O)" <<<"$OUT" &&
	grep -q "^  read  *256 " <<<"$OUT"; then
	pass "stats' text shows the stage table"
else
	fail "stats' text shows the stage table" "$OUT"
fi
stages off
front "$WORK/aio.sock" --rw read --bs 4k --qd 1 --bytes 1M
stages
check "off: timing stops, the sums stay" \
	'not s["on"] and s["read"]["count"] == 256'
if OUT=$("$TAPCTL" stages -i "$TD_PID" sometimes 2>&1); then
	fail "a wrong word is refused" "$OUT"
elif grep -q "on, off or reset" <<<"$OUT"; then
	pass "a wrong word is refused"
else
	fail "a wrong word is refused" "$OUT"
fi
stop_tapdisk "$TD_PID" aio

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
