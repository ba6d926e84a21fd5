# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# master-lib.sh - what the tests of the real stripe-master share (sourced by
# master.sh, master-domains.sh, master-fence.sh, master-move.sh and the
# etcd tests, not run).
#
# Before sourcing, a test may set MASTER_LIB_BINS (more programs that must
# be built) and MASTER_LIB_WORK (the prefix of its work directory).  It gets:
# a skip (77) without python3; BUILDDIR, MASTER_BIN, CTL_BIN; WORK, DB and
# LOG in a fresh directory removed on exit with every process in
# MASTER_PID and OTHER_PIDS (SIGKILL, by PID); PASSED/FAILED and pass,
# fail; PORT and ADDR (a free port on 127.0.0.1); ctl (stripe-ctl against
# it); wait_master ADDR, start_master [OPTIONS], stop_master [SIGNAL],
# check_master [OPTIONS] (the consistency check of DB); json_get EXPR.
#
# The store (issue #23): MASTER_STORE=sqlite (the default) or etcd.  With
# etcd, MASTER_ETCD_MEMBERS (default 1) real etcd members are started with
# tests/lab/etcd-lib.sh on free loopback ports (data in /dev/shm, logs in
# WORK), before the test runs, and stopped (by PID) at exit; a skip (77)
# without etcd.  Every master a test starts with store_opts is on that
# etcd, restarts included; each SQLite file a test names is a cluster of
# its own on it (store_opts FILE: --store etcd://EPS/NAME, NAME the file's
# name without .db; nothing on SQLite), and DB stays the master's local
# replica.  ETCD_EPS (HOST:PORT,...) and the etcd-lib.sh functions are
# there for tests that stop or inspect members.  on_etcd says which store
# runs.

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

MASTER_STORE=${MASTER_STORE:-sqlite}
MASTER_ETCD_MEMBERS=${MASTER_ETCD_MEMBERS:-1}
case $MASTER_STORE in
sqlite) ;;
etcd)
	# shellcheck source=tests/lab/etcd-lib.sh
	. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../lab" && pwd)/etcd-lib.sh"
	if ! etcd_lib_have; then
		echo "SKIP: etcd not found (apt-get install etcd-server)"
		exit 77
	fi
	;;
*)
	echo "FAIL: MASTER_STORE=$MASTER_STORE is not sqlite or etcd"
	exit 1
	;;
esac

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
	[ "$MASTER_STORE" = etcd ] && etcd_cluster_stop
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

on_etcd() {
	[ "$MASTER_STORE" = etcd ]
}

# The options that put the master of FILE (default DB) on the test's store.
store_opts() { # [FILE]
	local name
	on_etcd || return 0
	name=$(basename "${1:-$DB}" .db)
	echo "--store etcd://$ETCD_EPS/$name"
}

ETCD_EPS=
if on_etcd; then
	if ! etcd_cluster_start "$WORK" "$MASTER_ETCD_MEMBERS"; then
		echo "FAIL: $MASTER_ETCD_MEMBERS etcd member(s) did not start: $(tail -3 "$WORK"/etcd-*.log)"
		exit 1
	fi
	ETCD_EPS=${ETCD_ENDPOINTS//http:\/\//}
fi

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
	# shellcheck disable=SC2046 # store_opts: whole words
	"$MASTER_BIN" --foreground --db "$DB" --listen "$ADDR" --extent-size 4M \
		--log-file "$LOG" $(store_opts) "$@" &
	MASTER_PID=$!
	wait_master "$ADDR"
}

# The consistency check of $DB (on etcd: its replica, caught up first).
check_master() { # [OPTIONS]
	# shellcheck disable=SC2046 # store_opts: whole words
	"$MASTER_BIN" --check --db "$DB" $(on_etcd && echo --extent-size 4M) \
		$(store_opts) "$@"
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
