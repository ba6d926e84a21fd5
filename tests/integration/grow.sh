#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# grow.sh - online grow (issue #21 item 1): `tap-ctl resize` of an aio disk
# served over NBD while nbdcopy writes to it.
#
# Cases: the file made larger is not served before resize (the old size
# on a new connection); resize under a running writer grows it and the
# writer's data is intact; a new connection sees the new size and writes
# and reads back beyond the old end; --json answers; a shrink is refused
# with the reason and the size served does not change; a chain that
# cannot grow (null) is refused clearly; filters pass the size on; a
# frontend connected over shm (td-front --wait-resize) is told the new
# size on its socket and writes and verifies beyond the old end without
# reconnecting.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when a client is missing.
# BUILDDIR (set by make check) is where bin/ was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
OLD_MIB=32
NEW_MIB=48

nbd_need nbdinfo nbdcopy qemu-io cmp
nbd_built "$TAPDISK" "$TAPCTL"
nbd_workdir grow
DISK=$WORK/disk.img
SRC=$WORK/src.img
NULL_PID=
FILT_PID=
SHM_PID=
FRONT_PID=
COPY_PID=
nbd_cleanup_more() {
	NBD_PIDS="$COPY_PID $NULL_PID $FILT_PID $FRONT_PID $SHM_PID"
}

# start NAME CHAIN SOCKET: a tapdisk in the background, its PID in STARTED.
start() {
	nbd_serve "$3" "$2" --name "$1" --log-file "$WORK/$1.log" || exit 1
	STARTED=$NBD_STARTED
}

size_of() {
	nbdinfo --size "nbd+unix:///?socket=$1"
}

truncate -s ${OLD_MIB}M "$DISK"
head -c $((OLD_MIB << 20)) /dev/urandom >"$SRC"
start grow "aio:$DISK" "$SOCK"
TD_PID=$STARTED

# --- the larger file is not served before resize ------------------------
truncate -s ${NEW_MIB}M "$DISK"
if [ "$(size_of "$SOCK")" = $((OLD_MIB << 20)) ]; then
	pass "grown file not served before resize"
else
	fail "grown file not served before resize" "$(size_of "$SOCK")"
fi

# --- resize under a running writer ---------------------------------------
nbdcopy --request-size=65536 --requests=8 "$SRC" "$URI" \
	>"$WORK/copy.log" 2>&1 &
COPY_PID=$!
sleep 0.05
if "$TAPCTL" --run-dir "$WORK" resize -i "$TD_PID" >"$WORK/resize.out" \
	2>&1 && grep -q "grown to $((NEW_MIB << 20)) bytes" "$WORK/resize.out"; then
	pass "resize under a writer"
else
	fail "resize under a writer" "$(tr '\n' ' ' <"$WORK/resize.out")"
fi
if wait "$COPY_PID"; then
	COPY_PID=
	if cmp -s -n $((OLD_MIB << 20)) "$SRC" "$DISK"; then
		pass "writer's data intact"
	else
		fail "writer's data intact" "$(cmp -n $((OLD_MIB << 20)) "$SRC" "$DISK" 2>&1 | head -1)"
	fi
else
	COPY_PID=
	fail "writer's data intact" "nbdcopy: $(tail -2 "$WORK/copy.log" | tr '\n' ' ')"
fi

# --- a new connection sees the new size and uses it ----------------------
if [ "$(size_of "$SOCK")" = $((NEW_MIB << 20)) ]; then
	pass "new connection sees the new size"
else
	fail "new connection sees the new size" "$(size_of "$SOCK")"
fi
OFF=$(((OLD_MIB << 20) + 4096))
if qemu-io -f raw -c "write -P 0xa5 $OFF 1M" -c "read -P 0xa5 $OFF 1M" \
	"$URI" >"$WORK/qio.log" 2>&1 && ! grep -q -i "fail\|error" "$WORK/qio.log"; then
	pass "write and read back beyond the old end"
else
	fail "write and read back beyond the old end" "$(tail -2 "$WORK/qio.log" | tr '\n' ' ')"
fi

# --- --json, unchanged -----------------------------------------------------
J=$("$TAPCTL" --run-dir "$WORK" resize -i "$TD_PID" --json 2>&1)
if python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(not (d["old_bytes"] == d["new_bytes"] == int(sys.argv[2]) and d["grown"] is False))' "$J" $((NEW_MIB << 20)); then
	pass "--json, nothing to grow"
else
	fail "--json, nothing to grow" "$J"
fi

# --- a shrink is refused ------------------------------------------------------
truncate -s ${OLD_MIB}M "$DISK"
if OUT=$("$TAPCTL" --run-dir "$WORK" resize -i "$TD_PID" 2>&1); then
	fail "shrink refused" "exit 0: $OUT"
elif ! grep -q "never shrunk" <<<"$OUT"; then
	fail "shrink refused" "no reason: $OUT"
elif [ "$(size_of "$SOCK")" != $((NEW_MIB << 20)) ]; then
	fail "shrink refused" "size served changed: $(size_of "$SOCK")"
else
	pass "shrink refused, size unchanged"
fi
truncate -s ${NEW_MIB}M "$DISK"

# --- a chain that cannot grow ---------------------------------------------
start nullgrow "null:size=64M" "$WORK/null.sock"
NULL_PID=$STARTED
if OUT=$("$TAPCTL" --run-dir "$WORK" resize -i "$NULL_PID" 2>&1); then
	fail "null refused" "exit 0: $OUT"
elif grep -q "null driver cannot change size" <<<"$OUT"; then
	pass "null refused"
else
	fail "null refused" "$OUT"
fi

# --- filters pass their lower driver's new size on -------------------------
truncate -s 32M "$WORK/filt.img"
start filtgrow "sort|qos:iops=100000|aio:$WORK/filt.img" "$WORK/filt.sock"
FILT_PID=$STARTED
truncate -s 48M "$WORK/filt.img"
if OUT=$("$TAPCTL" --run-dir "$WORK" resize -i "$FILT_PID" 2>&1) &&
	[ "$(size_of "$WORK/filt.sock")" = $((48 << 20)) ]; then
	pass "sort|qos|aio grows"
else
	fail "sort|qos|aio grows" "$OUT; size $(size_of "$WORK/filt.sock")"
fi

# --- shm: the connected frontend is told, and uses the new end -------------
TDFRONT=$BUILDDIR/bin/td-front
truncate -s 32M "$WORK/shm.img"
"$TAPDISK" --foreground -a "aio:$WORK/shm.img" --shm "$WORK/shm.sock" \
	--nbd "unix:$WORK/shmnbd.sock" --run-dir "$WORK" --name shmgrow \
	--log-file "$WORK/shmgrow.log" &
SHM_PID=$!
for _ in $(seq 100); do
	[ -S "$WORK/shm.sock" ] && break
	sleep 0.1
done
"$TDFRONT" --shm "$WORK/shm.sock" --run-dir "$WORK" --wait-resize 30 \
	--rw write --verify --offset 32M --size 8M --bs 64k --qd 4 -q \
	>"$WORK/front.out" 2>&1 &
FRONT_PID=$!
# A second frontend busy on its ring while the notice arrives must take
# it in its stride.
"$TDFRONT" --shm "$WORK/shm.sock" --run-dir "$WORK" --time 3 --rw read \
	--pattern rand --qd 4 -q >"$WORK/busy.out" 2>&1 &
BUSY_PID=$!
for _ in $(seq 100); do
	"$TAPCTL" --run-dir "$WORK" stats -i "$SHM_PID" --json 2>/dev/null |
		python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["shm"]["rings"] != 2)' \
		2>/dev/null && break
	sleep 0.1
done
truncate -s 48M "$WORK/shm.img"
OUT=$("$TAPCTL" --run-dir "$WORK" resize -i "$SHM_PID" 2>&1)
if wait "$FRONT_PID"; then
	FRONT_PID=
	if grep -q "grew from $((32 << 20)) to $((48 << 20)) bytes" "$WORK/front.out" &&
		grep -q "shm: 2 frontends told" <<<"$OUT"; then
		pass "shm frontend told the new size; 8 MiB beyond the old end verified"
	else
		fail "shm frontend told the new size" "$OUT / $(tr '\n' ' ' <"$WORK/front.out")"
	fi
else
	FRONT_PID=
	fail "shm frontend told the new size" "td-front: $(tr '\n' ' ' <"$WORK/front.out"); resize: $OUT"
fi

if wait "$BUSY_PID"; then
	pass "a busy shm frontend takes the notice and goes on"
else
	fail "a busy shm frontend takes the notice and goes on" "$(tr '\n' ' ' <"$WORK/busy.out")"
fi

nbd_summary
