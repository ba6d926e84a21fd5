#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# iscsi-pr.sh - SCSI-3 persistent reservations through iscsi_conn
# (drivers/stripe/iscsi/iscsi-pr.h) against a real tgtd LUN, two initiator
# names on one LUN: tests/integration/iscsi-conn-harness pr.
#
# Both register, A reserves Write Exclusive - Registrants Only, both write;
# B preempts-and-aborts A's key; A's next writes fail with RESERVATION
# CONFLICT (-EACCES) and never reach the LUN, B's succeed; READ KEYS shows
# only B.  Then the LUN's backing file is compared byte for byte with what
# B wrote where A tried to write.
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without root or
# tgt.  KEEP=1 keeps the work directory in /dev/shm.  Stops only the tgtd
# it started (tgtadm, then SIGKILL to that PID).
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
HARNESS=$BUILDDIR/tests/integration/iscsi-conn-harness
IQN=iqn.2026-11.org.tapstripe:iscsi-pr-test
INIT_A=iqn.2026-11.org.tapstripe:host-a
INIT_B=iqn.2026-11.org.tapstripe:host-b
REGION_BYTES=65536

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: tgtd needs root"
	exit 77
fi
for tool in tgtd tgtadm ss cmp dd; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool not found (apt-get install tgt iproute2)"
		exit 77
	fi
done
if [ ! -x "$HARNESS" ]; then
	echo "FAIL: $HARNESS not built"
	exit 1
fi

WORK=$(mktemp -d /dev/shm/iscsi-pr.XXXXXX)
TGT_PID=

# A TCP port nobody listens on and no tgtd control socket uses.
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 12000)) # tgtd -C takes 0..32767
		[ -e "/var/run/tgtd/socket.$p" ] && continue
		if [ -z "$(ss -Htan "sport = :$p")" ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

PORT=$(free_port) || { echo "FAIL: no free port"; exit 1; }
CTL=$PORT
PORTAL=127.0.0.1:$PORT

tgt() {
	tgtadm -C "$CTL" --lld iscsi "$@"
}

cleanup() {
	if [ -n "$TGT_PID" ]; then
		tgt --op delete --mode target --tid 1 --force >/dev/null 2>&1
		tgtadm -C "$CTL" --op delete --mode system >/dev/null 2>&1
		for _ in $(seq 50); do
			kill -0 "$TGT_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$TGT_PID" 2>/dev/null
		wait "$TGT_PID" 2>/dev/null
	fi
	if [ "${KEEP:-0}" = 1 ]; then
		echo "work directory kept: $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT

truncate -s 64M "$WORK/lun1.img"
tgtd -f -C "$CTL" --iscsi "portal=$PORTAL" >>"$WORK/tgtd.log" 2>&1 &
TGT_PID=$!
for _ in $(seq 100); do
	tgt --op show --mode target >/dev/null 2>&1 && break
	sleep 0.05
done
if ! { tgt --op new --mode target --tid 1 -T "$IQN" &&
	tgt --op new --mode logicalunit --tid 1 --lun 1 -b "$WORK/lun1.img" &&
	tgt --op bind --mode target --tid 1 -I ALL; }; then
	echo "FAIL: tgtd set-up (see $WORK/tgtd.log)"
	KEEP=1
	exit 1
fi

rc=0
timeout 60 "$HARNESS" --portal "$PORTAL" --target "$IQN" --lun 1 \
	--initiator "$INIT_A" --initiator2 "$INIT_B" --dir "$WORK" \
	--timeout-ms 5000 pr >"$WORK/harness.log" 2>&1 || rc=1
grep -E '^(ok|FAILED):' "$WORK/harness.log"
if [ "$rc" -ne 0 ]; then
	echo "FAIL: the harness (log: $WORK/harness.log)"
	tail -n 20 "$WORK/harness.log"
	KEEP=1
	exit 1
fi

# Region 1 of the LUN, read from tgtd's backing file: B's bytes, none of
# A's fenced write.
dd if="$WORK/lun1.img" of="$WORK/lun-region1.bin" bs=$REGION_BYTES skip=1 \
	count=1 status=none
if ! cmp -s "$WORK/lun-region1.bin" "$WORK/pr-region1.bin"; then
	echo "FAIL: the LUN's region 1 is not what B wrote (A's fenced write landed?)"
	KEEP=1
	exit 1
fi
echo "ok: the LUN's backing file holds B's region 1 byte for byte"
grep -c "reservation conflict: this host was fenced" "$WORK/harness.log" |
	sed 's/^/fenced-write log lines: /'
echo "iscsi-pr: passed"
exit 0
