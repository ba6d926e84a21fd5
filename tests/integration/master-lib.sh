# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# master-lib.sh - what the tests of the real stripe-master share (sourced by
# master.sh and master-fence.sh, not run).
#
# Before sourcing, a test may set MASTER_LIB_BINS (more programs that must
# be built) and MASTER_LIB_WORK (the prefix of its work directory).  It gets:
# a skip (77) without python3; BUILDDIR, MASTER_BIN, CTL_BIN; WORK, DB and
# LOG in a fresh directory removed on exit with every process in
# MASTER_PID and OTHER_PIDS (SIGKILL, by PID); PASSED/FAILED and pass,
# fail; PORT and ADDR (a free port on 127.0.0.1); ctl (stripe-ctl against
# it); wait_master ADDR, start_master [OPTIONS], stop_master [SIGNAL];
# json_get EXPR.

BUILDDIR=${BUILDDIR:-$(pwd)}
MASTER_BIN=$BUILDDIR/bin/stripe-master
CTL_BIN=$BUILDDIR/bin/stripe-ctl
PASSED=0
FAILED=0

if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 not found (apt-get install python3)"
	exit 77
fi
for bin in "$MASTER_BIN" "$CTL_BIN" ${MASTER_LIB_BINS:-}; do
	if [ ! -x "$bin" ]; then
		echo "FAIL: $bin not built"
		exit 1
	fi
done

WORK=$(mktemp -d "/tmp/${MASTER_LIB_WORK:-master-test}.XXXXXX")
DB=$WORK/master.db
LOG=$WORK/master.log
MASTER_PID=
OTHER_PIDS=

master_lib_cleanup() {
	for pid in $MASTER_PID $OTHER_PIDS; do
		if kill -0 "$pid" 2>/dev/null; then
			kill -CONT "$pid" 2>/dev/null
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
		fi
	done
	rm -rf "$WORK"
}
trap master_lib_cleanup EXIT

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}

fail() {
	echo "FAIL: $1${2:+ ($2)}"
	FAILED=$((FAILED + 1))
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

PORT=$(free_port)
ADDR=127.0.0.1:$PORT

ctl() {
	"$CTL_BIN" --master "$ADDR" "$@"
}

# Wait until the master at $1 answers (or give up after 30 s: creating a
# database fsyncs, which takes long on a busy disk).
wait_master() {
	for _ in $(seq 300); do
		"$CTL_BIN" --master "$1" --timeout 1 --retries 0 info >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

start_master() { # [OPTIONS]: on $ADDR, database $DB, log $LOG
	"$MASTER_BIN" --foreground --db "$DB" --listen "$ADDR" --extent-size 4M \
		--log-file "$LOG" "$@" &
	MASTER_PID=$!
	wait_master "$ADDR"
}

stop_master() { # [SIGNAL]: its exit status
	[ -n "$MASTER_PID" ] || return 0
	kill -"${1:-TERM}" "$MASTER_PID" 2>/dev/null
	wait "$MASTER_PID" 2>/dev/null
	local status=$?
	MASTER_PID=
	return $status
}

json_get() { # EXPR over j, the JSON document on stdin
	python3 -c "import json, sys; j = json.load(sys.stdin); print(*($1,))"
}
