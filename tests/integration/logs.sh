#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# logs.sh - where a real tapdisk (aio) logs, as an operator sees it.
#
# Cases: --log syslog:SOCKET sends syslog lines (priority, the ident
# tapdisk/NAME[PID], the disk's name) to a datagram socket this test
# listens on; tap-ctl stats --json counts no dropped line; a clean
# destroy leaves no RUN_DIR/tapdisk-PID.log behind (with --log and with
# the default); a reader that stops reading does not hold up a destroy;
# SIGHUP after a rotation (mv) makes --log-file append to a new file.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 when python3 is missing.  BUILDDIR (set by
# make check) is where bin/ was built.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
MASTER=$BUILDDIR/bin/stripe-master
PASSED=0
FAILED=0

command -v python3 >/dev/null || {
	echo "SKIP: python3 not found"
	exit 77
}
for prog in "$TAPDISK" "$TAPCTL" "$MASTER"; do
	[ -x "$prog" ] || {
		echo "FAIL: $prog not built"
		exit 1
	}
done

WORK=$(mktemp -d /tmp/logs-test.XXXXXX)
RUNDIR=$WORK/run
export TAPSTRIPE_RUNDIR=$RUNDIR TAPDISK
SOCK=$WORK/syslog.sock
LINES=$WORK/syslog.txt
LISTENER=
MASTER_PID=
IDS=()

cleanup() {
	if [ -n "$MASTER_PID" ] && kill -0 "$MASTER_PID" 2>/dev/null; then
		kill -KILL "$MASTER_PID"
		wait "$MASTER_PID" 2>/dev/null
	fi
	for id in "${IDS[@]}"; do
		kill -0 "$id" 2>/dev/null && kill -KILL "$id" 2>/dev/null
	done
	if [ -n "$LISTENER" ]; then
		kill -CONT "$LISTENER" 2>/dev/null
		kill "$LISTENER" 2>/dev/null
		wait "$LISTENER" 2>/dev/null
	fi
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

# wait_for SECONDS COMMAND...: until the command succeeds.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.1
	done
}

gone() { ! kill -0 "$1" 2>/dev/null; }

# A fake syslogd: every datagram on SOCK, one per line, into LINES.
python3 - "$SOCK" "$LINES" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as out:
    while True:
        out.write(s.recv(4096).decode(errors="replace") + "\n")
        out.flush()
EOF
LISTENER=$!
wait_for 10 test -S "$SOCK" || {
	echo "FAIL: the fake syslogd did not start"
	exit 1
}

truncate -s 16M "$WORK/disk.img"
# A sanitizer build keeps RUN_DIR/tapdisk-PID.log: the leak report is
# written there after main returns.
SAN=0
ldd "$TAPDISK" 2>/dev/null | grep -q libasan && SAN=1

# no_run_log ID: the tapdisk left no RUN_DIR/tapdisk-ID.log (or, in a
# sanitizer build, one with no report).
no_run_log() {
	if [ $SAN = 1 ]; then
		! grep -q "Sanitizer\|runtime error:" "$RUNDIR/tapdisk-$1.log" 2>/dev/null
	else
		[ ! -e "$RUNDIR/tapdisk-$1.log" ]
	fi
}

# --- syslog: priority, ident and name ------------------------------------------
id=$("$TAPCTL" create -a "aio:$WORK/disk.img" --name logdisk --xen off \
	--log "syslog:$SOCK" 2>"$WORK/create.err")
if [ -z "$id" ]; then
	fail "create with --log syslog:SOCKET" "$(cat "$WORK/create.err")"
else
	IDS+=("$id")
	if wait_for 10 grep -q "^<30>.* tapdisk/logdisk\[$id\]: .*serving aio:" "$LINES"; then
		pass "syslog line: priority info, ident tapdisk/logdisk[$id]"
	else
		fail "syslog line" "$(head -3 "$LINES")"
	fi
	if grep -q ' \[logdisk\]: \| logdisk' "$LINES"; then
		pass "the disk's name is in the lines"
	else
		fail "the disk's name is in the lines" "$(head -3 "$LINES")"
	fi
	dropped=$("$TAPCTL" stats -i "$id" --json | python3 -c \
		'import json,sys; print(json.load(sys.stdin)["log_lines_dropped"])')
	[ "$dropped" = 0 ] && pass "stats: log_lines_dropped 0" ||
		fail "stats: log_lines_dropped" "$dropped"
	"$TAPCTL" destroy -i "$id" >/dev/null 2>&1
	wait_for 10 gone "$id"
	if wait_for 5 grep -q "tapdisk/logdisk\[$id\]: .*stop" "$LINES" &&
		no_run_log "$id"; then
		pass "clean destroy: stop logged, no $RUNDIR/tapdisk-$id.log"
	else
		fail "clean destroy" "$(ls "$RUNDIR"; tail -3 "$LINES")"
	fi
fi

# --- the default (no --log): nothing left in the run directory ----------------
id=$("$TAPCTL" create -a "aio:$WORK/disk.img" --name plain --xen off 2>"$WORK/create.err")
if [ -z "$id" ]; then
	fail "create without --log" "$(cat "$WORK/create.err")"
else
	IDS+=("$id")
	"$TAPCTL" destroy -i "$id" >/dev/null 2>&1
	wait_for 10 gone "$id"
	if no_run_log "$id"; then
		pass "default log: no $RUNDIR/tapdisk-$id.log after a clean exit"
	else
		fail "default log left behind" "$(cat "$RUNDIR/tapdisk-$id.log")"
	fi
fi

# --- a syslog reader that stops reading does not hold up the disk ---------------
# Each SIGHUP without a log file logs a line: 40 of them overflow the socket
# (net.unix.max_dgram_qlen is often 10) while the reader is stopped.
id=$("$TAPCTL" create -a "aio:$WORK/disk.img" --name stalled --xen off \
	--log "syslog:$SOCK" 2>"$WORK/create.err")
if [ -z "$id" ]; then
	fail "create for the stalled reader" "$(cat "$WORK/create.err")"
else
	IDS+=("$id")
	wait_for 10 grep -q "tapdisk/stalled\[$id\]: .*serving" "$LINES"
	kill -STOP "$LISTENER"
	start=$SECONDS
	ok=1
	for i in $(seq 1 40); do
		kill -HUP "$id"
		sleep 0.02
	done
	for i in $(seq 1 20); do
		timeout 5 "$TAPCTL" stats -i "$id" >/dev/null 2>&1 || ok=0
	done
	drops() {
		d=$("$TAPCTL" stats -i "$id" --json | python3 -c \
			'import json,sys; print(json.load(sys.stdin)["log_lines_dropped"])')
		[ "${d:-0}" -gt 0 ]
	}
	wait_for 10 drops || ok=0
	timeout 10 "$TAPCTL" destroy -i "$id" >/dev/null 2>&1 || ok=0
	wait_for 10 gone "$id" || ok=0
	kill -CONT "$LISTENER"
	if [ $ok = 1 ] && [ $((SECONDS - start)) -lt 20 ]; then
		pass "a stopped syslog reader stalls neither control nor exit; $d lines dropped, counted in stats ($((SECONDS - start)) s)"
	else
		fail "stalled syslog reader" "ok=$ok dropped=${d:-?} after $((SECONDS - start)) s"
	fi
fi

# --- SIGHUP reopens --log-file after a rotation --------------------------------
LOG=$WORK/td.log
id=$("$TAPCTL" create -a "aio:$WORK/disk.img" --name hup --xen off \
	--log-file "$LOG" 2>"$WORK/create.err")
if [ -z "$id" ]; then
	fail "create with --log-file" "$(cat "$WORK/create.err")"
else
	IDS+=("$id")
	mv "$LOG" "$LOG.1"
	kill -HUP "$id"
	if wait_for 10 grep -q "log file opened again" "$LOG" && kill -0 "$id" &&
		grep -q "serving aio:" "$LOG.1" && ! grep -q "opened again" "$LOG.1"; then
		pass "SIGHUP: a new $LOG, the old one kept, tapdisk still running"
	else
		fail "SIGHUP reopen" "$(ls "$WORK"; cat "$LOG" 2>&1 | tail -3)"
	fi
	"$TAPCTL" destroy -i "$id" >/dev/null 2>&1
	wait_for 10 gone "$id"
	grep -q "stop" "$LOG" && ! grep -q "stop" "$LOG.1" &&
		pass "after SIGHUP later lines go to the new file" ||
		fail "later lines in the new file" "$(tail -3 "$LOG")"
fi

# --- the master: syslog, and SIGHUP after a rotation -----------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$MASTER" --foreground --db "$WORK/m.db" --listen "127.0.0.1:$port" \
	--extent-size 4M --log "syslog:$SOCK" 2>"$WORK/master.err" &
MASTER_PID=$!
if wait_for 30 grep -q "^<30>.* stripe-master\[$MASTER_PID\]: .*serving $WORK/m.db" "$LINES"; then
	pass "master: syslog line, priority info, ident stripe-master[$MASTER_PID]"
else
	fail "master: syslog line" "$(cat "$WORK/master.err"; tail -3 "$LINES")"
fi
kill -TERM "$MASTER_PID"
wait "$MASTER_PID"
rc=$?
MASTER_PID=
grep -q "stripe-master\[[0-9]*\]: .*stopping: " "$LINES" && [ $rc = 0 ] &&
	pass "master: its last line reaches syslog, exit 0" ||
	fail "master: last line" "rc $rc; $(tail -2 "$LINES")"

MLOG=$WORK/master.log
"$MASTER" --foreground --db "$WORK/m.db" --listen "127.0.0.1:$port" \
	--log-file "$MLOG" 2>"$WORK/master.err" &
MASTER_PID=$!
if wait_for 30 grep -qs "serving" "$MLOG"; then
	mv "$MLOG" "$MLOG.1"
	kill -HUP "$MASTER_PID"
	wait_for 10 test -e "$MLOG"
	sleep 0.2
	alive=0
	kill -0 "$MASTER_PID" 2>/dev/null && alive=1
	kill -TERM "$MASTER_PID"
	wait "$MASTER_PID"
	rc=$?
	MASTER_PID=
	if [ $alive = 1 ] && [ $rc = 0 ] && grep -q "stopping: " "$MLOG" &&
		! grep -q "stopping: " "$MLOG.1" && grep -q serving "$MLOG.1"; then
		pass "master: SIGHUP opens a new $MLOG, the rotated one kept"
	else
		fail "master: SIGHUP reopen" "alive $alive rc $rc; $(ls "$WORK")"
	fi
else
	fail "master with --log-file did not start" "$(cat "$WORK/master.err")"
fi

echo "$PASSED passed, $FAILED failed"
[ $FAILED -eq 0 ]
