#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-sort.sh - the sort filter end to end: `tapdisk -a 'sort|aio:DISK'`
# served over NBD, driven by qemu-io and fio.
#
# Cases: interleaved 4 KiB writes issued together (the thesis pattern),
# overlapping writes to one block issued together (the last must win), a
# flush between them, fio random writes of mixed sizes at depth 32 with
# crc32c verification, fio sequential 4 KiB writes at depth 32 with a
# pattern; the backing file must equal EXPECTED (built with dd and
# python) after each case that it covers, and tap-ctl stats must show
# sort's counters moving.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when a client is missing.
# BUILDDIR (set by make check) is where bin/ was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
DISK_MIB=64

nbd_need nbdinfo qemu-io fio python3 cmp
nbd_built "$TAPDISK" "$TAPCTL"
nbd_workdir nbd-sort
DISK=$WORK/disk.img
EXPECTED=$WORK/expected.img

# check NAME COMMAND...: the command must succeed and the disk must equal
# EXPECTED afterwards.
check() {
	local name=$1
	shift
	if ! "$@" >"$WORK/out.log" 2>&1; then
		fail "$name" "$(tail -3 "$WORK/out.log" | tr '\n' ' ')"
	elif ! cmp -s "$DISK" "$EXPECTED"; then
		fail "$name" "backing file differs: $(cmp "$DISK" "$EXPECTED" 2>&1 | head -1)"
	else
		pass "$name"
	fi
}

# fill OFFSET_BYTES LENGTH_BYTES BYTE: what qemu-io -P BYTE writes there.
fill() {
	python3 -c "
import sys
with open(sys.argv[1], 'r+b') as f:
    f.seek($1)
    f.write(bytes([$3]) * $2)" "$EXPECTED"
}

# counter NAME: a driver counter from tap-ctl stats.
counter() {
	"$TAPCTL" --run-dir "$WORK" stats -i "$TD_PID" |
		awk -v n="$1" '$1 == n {print $2}'
}

truncate -s ${DISK_MIB}M "$DISK"
truncate -s ${DISK_MIB}M "$EXPECTED"
nbd_start "sort|aio:$DISK" --name nbdsort || exit 1

# --- qemu-io: requests issued together (aio_write), then checked -----------
# Blocks 0, 2, ..., 26 then 1, 3, ..., 27 of 4 KiB, block k filled with
# byte k + 1: sort may merge them all into one write.
cmds=()
for k in $(seq 0 2 26) $(seq 1 2 27); do
	cmds+=(-c "aio_write -P $((k + 1)) $((k * 4096)) 4k")
	fill $((k * 4096)) 4096 $((k + 1))
done
cmds+=(-c "aio_flush")
for k in $(seq 0 27); do
	cmds+=(-c "read -P $((k + 1)) $((k * 4096)) 4k")
done
check "qemu-io interleaved 4 KiB aio writes" qemu-io -f raw "${cmds[@]}" "$URI"

# Three writes to one block in flight together, a flush, two more: each
# must land in the order issued (sort never reorders overlapping writes).
fill $((1 << 20)) 8192 0x33
fill $((1 << 20)) 4096 0x55
check "qemu-io overlapping aio writes land in order" qemu-io -f raw \
	-c "aio_write -P 0x11 1M 8k" -c "aio_write -P 0x22 1M 4k" \
	-c "aio_write -P 0x33 1M 8k" -c "aio_flush" \
	-c "aio_write -P 0x44 1M 4k" -c "aio_write -P 0x55 1M 4k" \
	-c "aio_flush" -c "read -P 0x55 1M 4k" -c "read -P 0x33 1028k 4k" \
	"$URI"

# --- fio, nbd engine ----------------------------------------------------------
fio_run() {
	# fio keeps verify state files in its working directory: use $WORK.
	(cd "$WORK" && fio --output="$WORK/fio.log" --ioengine=nbd \
		--uri="$URI" --name=job "$@")
}
copy_back() { # copy the disk's MiB range [$1, $1 + $2) into EXPECTED
	dd if="$DISK" of="$EXPECTED" bs=1M skip="$1" seek="$1" count="$2" \
		conv=notrunc status=none
}
if fio_run --rw=randwrite --bsrange=4k-64k --iodepth=32 --offset=16M \
	--size=16M --verify=crc32c --do_verify=1 --verify_fatal=1 \
	>"$WORK/out.log" 2>&1; then
	copy_back 16 16
	pass "fio randwrite 4k-64k depth 32 + verify crc32c"
else
	fail "fio randwrite 4k-64k depth 32 + verify crc32c" \
		"$(tail -3 "$WORK/fio.log" | tr '\n' ' ')"
fi
python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex('deadbeef') * (4 << 20))" |
	dd of="$EXPECTED" bs=1M seek=32 conv=notrunc status=none
check "fio write 4k depth 32 + verify_pattern" fio_run --rw=write --bs=4k \
	--iodepth=32 --offset=32M --size=16M --verify=pattern \
	--verify_pattern=0xdeadbeef --do_verify=1 --verify_fatal=1

# --- the server's counters, and a clean stop ---------------------------------
in=$(counter sort_in)
merges=$(counter sort_merges)
if [ "${in:-0}" -gt 0 ] && [ "${merges:-0}" -gt 0 ]; then
	pass "tap-ctl stats: sort_in $in, sort_merges $merges"
else
	fail "tap-ctl stats: sort counters" "sort_in '$in' sort_merges '$merges'"
fi
RC=0
nbd_stop || RC=$?
if [ "$RC" = 0 ] && cmp -s "$DISK" "$EXPECTED"; then
	pass "SIGTERM: exit 0, backing file as expected"
else
	fail "SIGTERM: exit 0, backing file as expected" "rc $RC"
fi

nbd_summary
