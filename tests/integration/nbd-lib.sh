#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-lib.sh - what the NBD integration tests share, sourced by them:
# the programs, PASS/FAIL lines and the summary, the clients a test
# needs (exit 77 without them), a work directory removed at exit with
# every process the test started, and a tapdisk serving a chain over
# NBD on a Unix socket.
#
#   . "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
#   nbd_need nbdinfo qemu-io fio   # exit 77 unless found (fio: its nbd engine)
#   nbd_built "$TAPDISK" "$TAPCTL" # exit 1 unless built
#   nbd_workdir cbt                # WORK=/tmp/cbt.XXXXXX, SOCK, URI, trap
#   nbd_start "aio:$DISK" --name x # TD_PID; 0 once $URI answers
#   nbd_serve SOCKET CHAIN ...     # another one: NBD_STARTED
#   nbd_stop                       # SIGTERM, wait: tapdisk's exit status
#   nbd_summary                    # "N passed, N failed"; 0 when none failed
#
# KEEP=1 in the environment keeps WORK.  A test adds the pids of other processes it starts to NBD_PIDS (killed at
# exit) and may define nbd_cleanup_more (called at exit before WORK goes).

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
PASSED=0
FAILED=0
TD_PID=
NBD_PIDS=
WORK=

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}

fail() {
	echo "FAIL: $1${2:+ ($2)}"
	FAILED=$((FAILED + 1))
}

nbd_summary() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" = 0 ]
}

# nbd_need TOOL...: exit 77 unless every TOOL is found; fio must have
# its nbd engine (Debian's has).
nbd_need() {
	local tool
	for tool in "$@"; do
		if ! command -v "$tool" >/dev/null; then
			echo "SKIP: $tool not found (apt-get install libnbd-bin" \
				"qemu-utils fio)"
			exit 77
		fi
		if [ "$tool" = fio ] && ! fio --enghelp=nbd >/dev/null 2>&1; then
			echo "SKIP: this fio has no nbd engine"
			exit 77
		fi
	done
}

# nbd_built PROGRAM...: exit 1 unless every PROGRAM is built.
nbd_built() {
	local prog
	for prog in "$@"; do
		if [ ! -x "$prog" ]; then
			echo "FAIL: $prog not built"
			exit 1
		fi
	done
}

# At exit: every process of the test killed, then WORK removed.
nbd_cleanup() {
	local p
	[ "$(type -t nbd_cleanup_more)" = function ] && nbd_cleanup_more
	for p in $TD_PID $NBD_PIDS; do
		if kill -0 "$p" 2>/dev/null; then
			kill -KILL "$p" 2>/dev/null
			wait "$p" 2>/dev/null
		fi
	done
	if [ -n "${KEEP:-}" ]; then
		echo "kept $WORK"
	elif [ -n "$WORK" ]; then
		rm -rf "$WORK"
	fi
}

# nbd_workdir NAME: WORK (/tmp/NAME.XXXXXX), SOCK and URI (its NBD
# socket), nbd_cleanup at exit.
nbd_workdir() {
	WORK=$(mktemp -d "/tmp/$1.XXXXXX")
	SOCK=$WORK/nbd.sock
	URI="nbd+unix:///?socket=$SOCK"
	trap nbd_cleanup EXIT
}

# A TCP port of 127.0.0.1 free now.
nbd_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# nbd_wait URI [PID]: 0 once URI answers, within 10 s; 1 when it does
# not, or PID exited.
nbd_wait() {
	local i
	for ((i = 0; i < 100; i++)); do
		nbdinfo --can connect "$1" 2>/dev/null && return 0
		[ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && return 1
		sleep 0.1
	done
	return 1
}

# nbd_serve SOCKET CHAIN [TAPDISK OPTIONS...]: a tapdisk serving CHAIN
# over NBD on the Unix socket SOCKET, its control socket in WORK, its log
# in WORK/tapdisk.log (unless the options give --log-file), in the
# background: its pid in NBD_STARTED.  0 once the socket answers; 1 with
# the log printed when it does not (the tapdisk killed, NBD_STARTED empty).
nbd_serve() {
	local sock=$1 chain=$2 log=$WORK/tapdisk.log a prev=
	shift 2
	for a in "$@"; do
		[ "$prev" = --log-file ] && log=$a
		prev=$a
	done
	[ "$log" = "$WORK/tapdisk.log" ] && set -- --log-file "$log" "$@"
	"$TAPDISK" --foreground -a "$chain" --nbd "unix:$sock" \
		--run-dir "$WORK" "$@" &
	NBD_STARTED=$!
	nbd_wait "nbd+unix:///?socket=$sock" "$NBD_STARTED" && return 0
	kill -KILL "$NBD_STARTED" 2>/dev/null
	wait "$NBD_STARTED" 2>/dev/null
	NBD_STARTED=
	echo "FAIL: tapdisk did not start on $chain"
	cat "$log" 2>/dev/null
	return 1
}

# nbd_start CHAIN [TAPDISK OPTIONS...]: nbd_serve on SOCK (URI), the
# tapdisk's pid in TD_PID.
nbd_start() {
	local rc=0
	nbd_serve "$SOCK" "$@" || rc=$?
	TD_PID=$NBD_STARTED
	return $rc
}

# nbd_stop [SIGNAL]: the tapdisk of nbd_start sent SIGNAL (TERM) and
# waited for; its exit status.
nbd_stop() {
	local rc=0
	kill -"${1:-TERM}" "$TD_PID" 2>/dev/null
	wait "$TD_PID" 2>/dev/null || rc=$?
	TD_PID=
	return $rc
}
