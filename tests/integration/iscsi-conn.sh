#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# iscsi-conn.sh - the async iSCSI connection (drivers/iscsi-conn.h) against
# a real tgtd, through tests/integration/iscsi-conn-harness.
#
# Starts its own tgtd on 127.0.0.1 with a free port (and a control socket
# of the same number), file-backed LUNs in /dev/shm: target 1 LUN 1 plain,
# LUN 2 thin-provisioned (UNMAP), target 2 behind a CHAP account.  Cases:
#   verify        byte-exact write/read with many commands in flight and
#                 iovecs of several entries, FUA, SYNC, WRITE_ZEROES,
#                 UNMAP -> -EOPNOTSUPP, max_in_flight == queue depth (8)
#   verify-thin   the same at queue depth 32 with UNMAP done
#   down          a portal nobody listens on: DOWN and -EIO within 2 s
#   chap          the right secret logs in; a wrong one and none -> DOWN
#                 with "Authentication failure"
#   kill-restart  tgtd killed (SIGKILL) in the middle of a write stream and
#                 started again on the same portal: no command fails,
#                 every write reads back, reconnects and reissues counted
#   stall         tgtd stopped (SIGSTOP): commands end with -ETIMEDOUT
#                 within 1 s of their 1 s timeout, logins time out, the
#                 connection goes DOWN; after SIGCONT a revive brings it
#                 back and a verified write/read passes
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) without root or tgt.
# KEEP=1 keeps the work directory (logs of every case) in /dev/shm.
# Stops only the tgtd it started: tgtadm (it ignores SIGTERM), then
# SIGKILL to that PID if it is still there.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
HARNESS=$BUILDDIR/tests/integration/iscsi-conn-harness
IQN=iqn.2026-11.org.tapstripe:iscsi-conn-test
IQN_CHAP=$IQN-chap
CHAP_USER=tapstripe
CHAP_SECRET=tapstripe-secret-1
PASSED=0
FAILED=0

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: tgtd needs root"
	exit 77
fi
for tool in tgtd tgtadm ss; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool not found (apt-get install tgt iproute2)"
		exit 77
	fi
done
if [ ! -x "$HARNESS" ]; then
	echo "FAIL: $HARNESS not built"
	exit 1
fi

WORK=$(mktemp -d /dev/shm/iscsi-conn.XXXXXX)
TGT_PID=
H_PID=

# A TCP port nobody listens on and no tgtd control socket uses.
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 12000)) # tgtd -C takes 0..32767
		[ -e "/var/run/tgtd/socket.$p" ] && continue
		[ "$p" = "${PORT:-}" ] && continue
		if [ -z "$(ss -Htan "sport = :$p")" ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

PORT=$(free_port) || { echo "FAIL: no free port"; exit 1; }
CTL=$PORT
DEAD_PORT=$(free_port) || { echo "FAIL: no free port"; exit 1; }
PORTAL=127.0.0.1:$PORT

tgt() {
	tgtadm -C "$CTL" --lld iscsi "$@"
}

start_tgtd() {
	tgtd -f -C "$CTL" --iscsi "portal=$PORTAL" >>"$WORK/tgtd.log" 2>&1 &
	TGT_PID=$!
	for _ in $(seq 100); do
		tgt --op show --mode target >/dev/null 2>&1 && break
		sleep 0.05
	done
	tgt --op new --mode target --tid 1 -T "$IQN" &&
		tgt --op new --mode logicalunit --tid 1 --lun 1 -b "$WORK/lun1.img" &&
		tgt --op new --mode logicalunit --tid 1 --lun 2 -b "$WORK/lun2.img" &&
		tgt --op update --mode logicalunit --tid 1 --lun 2 \
			--params thin_provisioning=1 &&
		tgt --op bind --mode target --tid 1 -I ALL &&
		tgt --op new --mode target --tid 2 -T "$IQN_CHAP" &&
		tgt --op new --mode logicalunit --tid 2 --lun 1 -b "$WORK/lun3.img" &&
		tgt --op bind --mode target --tid 2 -I ALL &&
		tgt --op new --mode account --user "$CHAP_USER" \
			--password "$CHAP_SECRET" &&
		tgt --op bind --mode account --tid 2 --user "$CHAP_USER"
}

stop_tgtd() {
	[ -n "$TGT_PID" ] || return 0
	kill -CONT "$TGT_PID" 2>/dev/null
	tgt --op delete --mode target --tid 1 --force >/dev/null 2>&1
	tgt --op delete --mode target --tid 2 --force >/dev/null 2>&1
	tgtadm -C "$CTL" --op delete --mode system >/dev/null 2>&1
	for _ in $(seq 50); do
		kill -0 "$TGT_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$TGT_PID" 2>/dev/null; then
		kill -KILL "$TGT_PID" 2>/dev/null
	fi
	wait "$TGT_PID" 2>/dev/null
	TGT_PID=
}

cleanup() {
	if [ -n "$H_PID" ] && kill -0 "$H_PID" 2>/dev/null; then
		kill -KILL "$H_PID" 2>/dev/null
		wait "$H_PID" 2>/dev/null
	fi
	stop_tgtd
	# tgtd leaves its control socket behind: remove ours only.
	rm -f "/var/run/tgtd/socket.$CTL" "/var/run/tgtd/socket.$CTL.lock"
	if [ -n "${KEEP:-}" ]; then
		echo "kept $WORK"
	else
		rm -rf "$WORK"
	fi
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

# harness NAME ARGS...: run the harness in the foreground, log to a file.
harness() {
	local name=$1
	shift
	if timeout 120 "$HARNESS" "$@" >"$WORK/$name.log" 2>&1; then
		pass "$name"
	else
		fail "$name"
		grep -v '^  "' "$WORK/$name.log" | tail -25
	fi
}

truncate -s 64M "$WORK/lun1.img" "$WORK/lun2.img"
truncate -s 16M "$WORK/lun3.img"
if ! start_tgtd; then
	echo "FAIL: tgtd set-up"
	cat "$WORK/tgtd.log"
	exit 1
fi

harness verify --portal "$PORTAL" --target "$IQN" --lun 1 --qd 8 \
	--expect-unmap no verify
harness verify-thin --portal "$PORTAL" --target "$IQN" --lun 2 --qd 32 \
	--expect-unmap yes verify
harness down --portal "127.0.0.1:$DEAD_PORT" --target "$IQN" --lun 1 \
	--retries 2 --backoff-ms 100 down
harness chap-right --portal "$PORTAL" --target "$IQN_CHAP" --lun 1 \
	--chap-user "$CHAP_USER" --chap-secret "$CHAP_SECRET" login
harness chap-wrong --portal "$PORTAL" --target "$IQN_CHAP" --lun 1 \
	--chap-user "$CHAP_USER" --chap-secret wrong-secret-99 --retries 1 \
	--expect down login
harness chap-none --portal "$PORTAL" --target "$IQN_CHAP" --lun 1 \
	--retries 1 --expect down login

# kill-restart: SIGKILL tgtd 2 s into a 7 s write stream, start it again
# 1 s later on the same portal.  The 2 s count from the harness's
# "streaming" line: a harness slow to start (ASan, a loaded machine) must
# not meet a tgtd killed before it logged in, which leaves nothing in
# flight to reissue (a CI failure: reconnects 0, reissued 0).
"$HARNESS" --portal "$PORTAL" --target "$IQN" --lun 1 --qd 16 \
	--timeout-ms 20000 --retries 10 --backoff-ms 100 --seconds 7 \
	stream >"$WORK/kill-restart.log" 2>&1 &
H_PID=$!
for _ in $(seq 600); do
	grep -q '^streaming for' "$WORK/kill-restart.log" && break
	kill -0 "$H_PID" 2>/dev/null || break
	sleep 0.05
done
if ! grep -q '^streaming for' "$WORK/kill-restart.log"; then
	echo "note: kill-restart: the harness did not start streaming in 30 s"
fi
sleep 2
{
	kill -KILL "$TGT_PID"
	wait "$TGT_PID"
} 2>/dev/null
TGT_PID=
sleep 1
if ! start_tgtd; then
	fail "kill-restart: tgtd did not start again"
fi
if wait "$H_PID"; then
	pass kill-restart
else
	fail kill-restart "the harness exited with status $?"
	grep -v '^  "' "$WORK/kill-restart.log" | tail -25
fi
H_PID=

# stall: SIGSTOP tgtd while commands are in flight, SIGCONT after they
# timed out.
mkdir -p "$WORK/stall"
"$HARNESS" --portal "$PORTAL" --target "$IQN" --lun 1 --qd 8 \
	--timeout-ms 1000 --retries 2 --backoff-ms 100 --revive-ms 500 \
	--dir "$WORK/stall" stall >"$WORK/stall.log" 2>&1 &
H_PID=$!
wait_file() {
	for _ in $(seq 300); do
		[ -e "$1" ] && return 0
		kill -0 "$H_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
if wait_file "$WORK/stall/ready"; then
	kill -STOP "$TGT_PID"
	touch "$WORK/stall/stopped"
	wait_file "$WORK/stall/timedout"
	# Long enough for the 3 login attempts (1 s each) to fail: DOWN,
	# then revives every 0.5 s until SIGCONT.
	sleep 5
	kill -CONT "$TGT_PID"
	touch "$WORK/stall/continued"
fi
if wait "$H_PID"; then
	pass stall
else
	fail stall
	grep -v '^  "' "$WORK/stall.log" | tail -25
fi
H_PID=

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
