#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# qos.sh - the qos filter end to end: `tapdisk -a 'qos:...|null:size=1G'`
# over NBD, driven by fio's nbd engine.
#
# Cases: 2000 4 KiB writes at depth 32 under write_iops=200 take at least
# the time the limit implies (a lower bound: it cannot fail on a slow
# machine) and the measured rate is at most 5 % over the limit; a limit
# raised at run time (`tap-ctl driver -i ID qos set`) lets a throttled
# run finish within a second or so; a malformed qos command is refused
# and changes nothing; tap-ctl stats shows qos's counters.
#
# Exits 0 when all pass, 1 when one fails, 77 when a client is missing.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
PASSED=0
FAILED=0

for tool in nbdinfo fio python3; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool not found (apt-get install libnbd-bin fio)"
		exit 77
	fi
done
if ! fio --enghelp=nbd >/dev/null 2>&1; then
	echo "SKIP: this fio has no nbd engine"
	exit 77
fi

WORK=$(mktemp -d /tmp/qos.XXXXXX)
SOCK=$WORK/nbd.sock
URI="nbd+unix:///?socket=$SOCK"
TD_PID=
FIO_PID=

cleanup() {
	for p in $FIO_PID $TD_PID; do
		if kill -0 "$p" 2>/dev/null; then
			kill -KILL "$p" 2>/dev/null
			wait "$p" 2>/dev/null
		fi
	done
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
now_ms() { echo $(($(date +%s%N) / 1000000)); }
qos() { "$TAPCTL" --run-dir "$WORK" driver -i "$TD_PID" qos "$@"; }
# fio_writes N: N random 4 KiB writes at depth 32.
fio_writes() {
	(cd "$WORK" && fio --output="$WORK/fio.log" --ioengine=nbd \
		--uri="$URI" --name=job --rw=randwrite --bs=4k --iodepth=32 \
		--size=64M --io_size=$(($1 * 4))k)
}

"$TAPDISK" --foreground -a "qos:write_iops=200,burst_ms=100|null:size=1G" \
	--nbd "unix:$SOCK" --run-dir "$WORK" --name qos \
	--log-file "$WORK/tapdisk.log" &
TD_PID=$!
for _ in $(seq 100); do
	nbdinfo --can connect "$URI" 2>/dev/null && break
	sleep 0.1
done
if ! nbdinfo --can connect "$URI" 2>/dev/null; then
	echo "FAIL: tapdisk did not start"
	cat "$WORK/tapdisk.log"
	exit 1
fi

# --- the limit holds: 2000 writes at 200 IOPS, burst 20 --------------------
N=2000
t0=$(now_ms)
if fio_writes $N >"$WORK/out.log" 2>&1; then
	ms=$(($(now_ms) - t0))
	# At most burst + rate * t requests by time t: t >= (N - 21) / 200.
	min_ms=$(((N - 21) * 1000 / 200))
	rate=$(python3 -c "print(round($N * 1000 / $ms, 1))")
	if [ "$ms" -lt "$min_ms" ]; then
		fail "write_iops=200: $N writes in $ms ms" "limit implies >= $min_ms ms"
	elif python3 -c "import sys; sys.exit(not $rate <= 210)"; then
		pass "write_iops=200: $N writes in $ms ms ($rate IOPS)"
	else
		fail "write_iops=200: $rate IOPS" "more than 5 % over 200"
	fi
else
	fail "fio under write_iops=200" "$(tail -3 "$WORK/out.log" | tr '\n' ' ')"
fi

# --- a malformed command is refused and changes nothing ----------------------
before=$(qos status json)
ok=1
for bad in "set write_iops=abc" "set" "set speed=3" "set iops=5 bps=x" \
	"frobnicate" "status yaml"; do
	# shellcheck disable=SC2086 # words on purpose
	if qos $bad >"$WORK/bad.log" 2>&1; then
		ok=0
		fail "qos $bad refused" "it succeeded"
	elif ! [ -s "$WORK/bad.log" ]; then
		ok=0
		fail "qos $bad refused" "no reason given"
	fi
done
after=$(qos status json)
if [ -z "$before" ] || [ "$before" != "$after" ]; then
	fail "malformed qos commands change nothing" "$before -> $after"
elif [ "$ok" = 1 ]; then
	pass "malformed qos commands refused, limits unchanged"
fi

# --- a run-time change takes effect within a second --------------------------
qos set write_iops=20 >/dev/null
fio_writes 400 >"$WORK/out.log" 2>&1 &
FIO_PID=$!
sleep 1
t0=$(now_ms)
if ! qos set write_iops=100000 >"$WORK/set.log" 2>&1; then
	fail "qos set write_iops=100000" "$(cat "$WORK/set.log")"
fi
wait "$FIO_PID"
rc=$?
FIO_PID=
ms=$(($(now_ms) - t0))
# At 20 IOPS the rest would take some 18 s; 2 s of slack for a busy CI.
if [ "$rc" = 0 ] && [ "$ms" -lt 3000 ]; then
	pass "write_iops raised at run time: fio done $ms ms later"
else
	fail "write_iops raised at run time" "fio rc $rc, $ms ms after the set"
fi

delayed=$("$TAPCTL" --run-dir "$WORK" stats -i "$TD_PID" |
	awk '$1 == "qos_delayed" {print $2}')
if [ "${delayed:-0}" -gt 0 ]; then
	pass "tap-ctl stats: qos_delayed $delayed"
else
	fail "tap-ctl stats: qos_delayed" "'$delayed'"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
