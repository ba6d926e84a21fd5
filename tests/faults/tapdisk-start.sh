#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# tapdisk-start.sh - disks that cannot open, or whose open hangs (issue #17):
#   - a FIFO given as a stripe map or as aio's file, and a directory, are
#     refused at once with an error naming the file (tap-ctl create
#     --timeout 3), and no tapdisk is left;
#   - a tapdisk stuck opening its disk (a FUSE file whose open never
#     answers, as a dead NFS server's: tests/faults/hangfs.c) ends on
#     SIGTERM, and tap-ctl create --timeout 2 stops it and says how;
#   - the first line of a refused corrupt map (checksum mismatch, NUL
#     byte) is the driver's reason with the file and the line and no
#     advice on -a, which an unknown driver still gets.
#
# One PASS:/FAIL: line per check; exits 0 when all pass, 1 when one fails,
# 77 when python3 or timeout is missing.  The FUSE cases are skipped
# (SKIP: lines) without hangfs (libfuse3-dev), /dev/fuse or fusermount3.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
HANGFS=$BUILDDIR/tests/faults/hangfs
STEP_TIMEOUT=20

for tool in python3 timeout; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not found"
		exit 77
	fi
done
for prog in "$TAPDISK" "$TAPCTL"; do
	if [ ! -x "$prog" ]; then
		echo "FAIL: $prog not built"
		exit 1
	fi
done

TMP=$(mktemp -d /tmp/tapdisk-start.XXXXXX)
RUNDIR=$TMP/run
MNT=$TMP/mnt
export TAPSTRIPE_RUNDIR=$RUNDIR TAPDISK
PIDS=()
HANG_PID=
status=0

# The tapdisks of this run dir still there (zombies do not count).
tapdisks_left() {
	local pid
	for pid in $(pgrep -f -- "--run-dir $RUNDIR" 2>/dev/null); do
		[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] ||
			echo "$pid"
	done
}

cleanup() {
	local pid
	for pid in "${PIDS[@]}" $(tapdisks_left); do
		kill -KILL "$pid" 2>/dev/null
	done
	if [ -n "$HANG_PID" ]; then
		# Its death aborts the mount's requests: an open still stuck
		# (a tapdisk that ignored SIGTERM) ends with its SIGKILL.
		kill -KILL "$HANG_PID" 2>/dev/null
		wait "$HANG_PID" 2>/dev/null
		fusermount3 -u -z "$MNT" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

pass() { echo "PASS: $1"; }
fail() {
	echo "FAIL: $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    /'
	status=1
}

# create ARGS...: tap-ctl create; sets RC, ERR (stderr), SECS (elapsed).
create() {
	local t0=$SECONDS
	timeout "$STEP_TIMEOUT" "$TAPCTL" create "$@" >"$TMP/out" 2>"$TMP/err"
	RC=$?
	SECS=$((SECONDS - t0))
	ERR=$(cat "$TMP/err")
	HEAD=$(head -1 "$TMP/err")
}

# refused WHAT PATTERN ARGS...: create fails at once, its first line says
# PATTERN, and no tapdisk is left.
refused() {
	local what=$1 pattern=$2
	shift 2
	create "$@"
	local left
	left=$(tapdisks_left)
	if [ "$RC" -eq 1 ] && [ "$SECS" -lt 3 ] && [ -z "$left" ] &&
		grep -q -- "$pattern" <<<"$HEAD"; then
		pass "$what"
	else
		fail "$what" "status $RC after $SECS s, tapdisks left: '$left'; stderr: $ERR"
	fi
}

# --- files that would block the open, or are no disk --------------------------------

mkfifo "$TMP/x.map" "$TMP/disk.fifo"
mkdir "$TMP/dir.img"
refused "a FIFO as the map: refused at once, named, no tapdisk left" \
	"stripe: $TMP/x.map is a FIFO, not a mapping file" \
	--timeout 3 -a "stripe:$TMP/x.map"
refused "a FIFO as aio's file: refused at once" \
	"aio: $TMP/disk.fifo is a FIFO, not a disk image" \
	--timeout 3 -a "aio:$TMP/disk.fifo"
refused "a FIFO as aio's file, read-only: refused at once" \
	"aio: $TMP/disk.fifo is a FIFO, not a disk image" \
	--timeout 3 -r -a "aio:$TMP/disk.fifo"
refused "a directory as aio's file: refused" \
	"aio: $TMP/dir.img is a directory, not a disk image" \
	--timeout 3 -a "aio:$TMP/dir.img"
refused "a character device as aio's file: refused" \
	"aio: /dev/null is a character device, not a disk image" \
	--timeout 3 -a "aio:/dev/null"

# --- corrupt maps: the driver's reason with file and line is the headline ----------

python3 - "$TMP" <<'EOF'
import sys

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

body = (b"tapstripe-map 1\n"
        b"vdisk a\nsize-bytes 1048576\nstripe-unit-bytes 4096\ncolumns 1\n"
        b"extents-per-column 1\nreplicas 1\nextent-size-bytes 1048576\n"
        b"master 127.0.0.1:7700\n"
        b"server 0 address host1 portal host1:3260 target iqn.2024-01.t:x "
        b"lun 1 block-size 4096\n"
        b"extent 0 0 0 server 0 lba 0 ok\n")
seal = b"checksum crc32c %08x\n" % crc32c(body)
out = sys.argv[1]
open(out + "/sum.map", "wb").write(body.replace(b"vdisk a", b"vdisk b") + seal)
open(out + "/nul.map", "wb").write(body.replace(b"lun 1", b"lun \0") + seal)
EOF
refused "checksum mismatch: file and line first, no -a advice" \
	"^tap-ctl: cannot create the tapdisk: stripe: $TMP/sum.map: line 12: checksum mismatch" \
	-a "stripe:$TMP/sum.map"
refused "a NUL byte: file and line first" \
	"^tap-ctl: cannot create the tapdisk: stripe: $TMP/nul.map: line 10: the file holds a NUL byte" \
	-a "stripe:$TMP/nul.map"
create -a "stripe:$TMP/sum.map"
if grep -q "check the syntax of -a" <<<"$ERR"; then
	fail "a corrupt map gets no advice on -a" "$ERR"
else
	pass "a corrupt map gets no advice on -a"
fi
if [ "$(grep -c "checksum mismatch" <<<"$ERR")" -eq 1 ]; then
	pass "the reason is printed once (not again from the log)"
else
	fail "the reason is printed once (not again from the log)" "$ERR"
fi
refused "an unknown driver still gets the advice on -a" \
	"unknown driver 'foo'.*; check the syntax of -a, e.g." -a foo:bar

# --- a tapdisk stuck in its open ends on SIGTERM -----------------------------------------

if [ ! -x "$HANGFS" ] || [ ! -c /dev/fuse ] ||
	! command -v fusermount3 >/dev/null 2>&1; then
	echo "SKIP: hangfs (libfuse3-dev), /dev/fuse or fusermount3 missing: no hung opens"
	exit $status
fi
mkdir "$MNT"
"$HANGFS" "$MNT" -f -o auto_unmount 2>"$TMP/hangfs.err" &
HANG_PID=$!
for _ in $(seq 100); do
	[ -e "$MNT/opens" ] && break
	sleep 0.05
done
if [ ! -e "$MNT/opens" ]; then
	echo "SKIP: cannot mount hangfs: $(cat "$TMP/hangfs.err")"
	exit $status
fi

# opens_reach N: wait until hangfs has seen N opens of its disk.
opens_reach() {
	for _ in $(seq 100); do
		[ "$(cat "$MNT/opens")" = "opens $1" ] && return 0
		sleep 0.05
	done
	return 1
}

"$TAPDISK" --foreground -a "aio:$MNT/disk" --run-dir "$RUNDIR" \
	--log-file "$TMP/fg.log" &
FG=$!
PIDS+=("$FG")
if opens_reach 1 && sleep 0.3 && kill -0 "$FG" 2>/dev/null; then
	kill -TERM "$FG"
	gone=0
	for _ in $(seq 50); do
		kill -0 "$FG" 2>/dev/null || { gone=1; break; }
		sleep 0.1
	done
	if [ $gone -eq 1 ]; then
		pass "SIGTERM ends a tapdisk stuck opening its disk (within 5 s)"
	else
		fail "SIGTERM ends a tapdisk stuck opening its disk (within 5 s)" \
			"$(ps -o pid,stat,wchan:32,cmd -p "$FG")"
	fi
else
	fail "a tapdisk over hangfs is stuck in its open" "$(cat "$TMP/fg.log")"
fi

create --timeout 2 -a "aio:$MNT/disk"
left=$(tapdisks_left)
if [ "$RC" -eq 1 ] && [ -z "$left" ] && [ "$SECS" -lt 6 ] &&
	grep -q "did not report ready within 2 s; stopped it with SIGTERM" <<<"$HEAD"; then
	pass "tap-ctl create --timeout 2: stops the stuck tapdisk with SIGTERM, says so, none left"
else
	fail "tap-ctl create --timeout 2: stops the stuck tapdisk with SIGTERM, says so, none left" \
		"status $RC after $SECS s, tapdisks left: '$left'; stderr: $ERR"
fi
exit $status
