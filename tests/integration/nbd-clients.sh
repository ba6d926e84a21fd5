#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-clients.sh - real NBD clients against tapdisk's NBD server.
#
# Starts `tapdisk --foreground -a aio:DISK --nbd unix:SOCK --nbd
# tcp:127.0.0.1:PORT` and drives it with nbdinfo and nbdcopy (libnbd-bin),
# qemu-img and qemu-io (qemu-utils) and fio's nbd engine.  Every case that
# writes also writes the same bytes into EXPECTED (with dd), and the
# backing file must then equal EXPECTED byte for byte.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when a client is missing.
# BUILDDIR (set by make check) is where bin/tapdisk was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
DISK_MIB=64

nbd_need nbdinfo nbdcopy qemu-img qemu-io fio python3 cmp
nbd_built "$TAPDISK"
nbd_workdir nbd-clients
DISK=$WORK/disk.img
EXPECTED=$WORK/expected.img
PORT=$(nbd_free_port)
UNIX_URI=$URI
TCP_URI="nbd://127.0.0.1:$PORT/"

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

# put FILE OFFSET_BYTES: write FILE into EXPECTED at OFFSET.
put() {
	dd if="$1" of="$EXPECTED" bs=4096 seek=$(($2 / 4096)) conv=notrunc \
		status=none
}

# zero OFFSET_BYTES LENGTH_BYTES in EXPECTED.
zero() {
	dd if=/dev/zero of="$EXPECTED" bs=4096 seek=$(($1 / 4096)) \
		count=$(($2 / 4096)) conv=notrunc status=none
}

pattern() { # pattern FILE MIB SEED: reproducible pseudo-random bytes
	python3 -c "
import random, sys
r = random.Random($3)
sys.stdout.buffer.write(r.randbytes($2 << 20))" >"$1"
}

start_tapdisk() {
	nbd_start "aio:$DISK" --nbd "tcp:127.0.0.1:$PORT" --name nbdclients ||
		exit 1
}

truncate -s ${DISK_MIB}M "$DISK"
truncate -s ${DISK_MIB}M "$EXPECTED"
start_tapdisk

# --- nbdinfo: what the server advertises -------------------------------------
info_case() {
	local uri=$1
	nbdinfo --json "$uri" >"$WORK/info.json" || return 1
	python3 - "$WORK/info.json" $((DISK_MIB << 20)) <<'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
e = info["exports"][0]
want = {
    "export-size": int(sys.argv[2]), "is_read_only": False,
    "can_flush": True, "can_fua": True, "can_trim": True, "can_zero": True,
    "can_multi_conn": True, "can_df": False,
    "block_size_minimum": 512, "block_size_preferred": 4096,
    "block_size_maximum": 32 << 20,
}
bad = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
if bad:
    sys.exit("unexpected: %s" % bad)
if info.get("protocol") != "newstyle-fixed":
    sys.exit("protocol %s" % info.get("protocol"))
EOF
}
check "nbdinfo over unix: size, flags, block sizes" info_case "$UNIX_URI"
check "nbdinfo over tcp" info_case "$TCP_URI"
check "nbdinfo --list" bash -c "nbdinfo --list --json '$UNIX_URI' | python3 -c '
import json, sys
names = [e[\"export-name\"] for e in json.load(sys.stdin)[\"exports\"]]
sys.exit(0 if names == [\"\"] else \"exports %s\" % names)'"

# --- nbdcopy: whole-disk upload and download, 4 connections -----------------
pattern "$WORK/src.img" $DISK_MIB 1
# A zero stretch: nbdcopy sends it as WRITE_ZEROES.
dd if=/dev/zero of="$WORK/src.img" bs=1M seek=8 count=8 conv=notrunc status=none
cp "$WORK/src.img" "$EXPECTED"
check "nbdcopy upload (unix, 4 connections, flush)" \
	nbdcopy --connections=4 --requests=16 --flush "$WORK/src.img" "$UNIX_URI"
check "nbdcopy download (tcp)" bash -c \
	"nbdcopy '$TCP_URI' '$WORK/down.img' && cmp '$WORK/down.img' '$EXPECTED'"

# --- qemu-img -----------------------------------------------------------------
pattern "$WORK/qimg.img" 16 2
put "$WORK/qimg.img" $((16 << 20))
# Into 16..32 MiB of the export, through a raw offset.
check "qemu-img convert -n into the export (unix)" \
	qemu-img convert -n -f raw --target-image-opts "$WORK/qimg.img" \
	"driver=raw,offset=$((16 << 20)),size=$((16 << 20)),file.driver=nbd,file.path=$SOCK"
check "qemu-img compare (tcp)" qemu-img compare -f raw -F raw "$EXPECTED" "$TCP_URI"
check "qemu-img info (tcp)" bash -c \
	"qemu-img info --output=json '$TCP_URI' | grep -q '\"virtual-size\": $((DISK_MIB << 20))'"

# --- qemu-io: patterns, FUA, zeroes, discard, flush ---------------------------
qio() { qemu-io -f raw "$@"; }
printf '\xa5%.0s' $(seq 65536) >"$WORK/a5.bin"
printf '\x3c%.0s' $(seq 4096) >"$WORK/3c.bin"
put "$WORK/a5.bin" $((40 << 20))
put "$WORK/3c.bin" $((41 << 20))
zero $((42 << 20)) $((1 << 20))
check "qemu-io write -P, write -f (FUA), write -z, read -P (unix)" qio \
	-c "write -P 0xa5 40M 64k" -c "write -f -P 0x3c 41M 4k" \
	-c "write -z 42M 1M" -c "flush" \
	-c "read -P 0xa5 40M 64k" -c "read -P 0x3c 41M 4k" \
	-c "read -P 0 42M 1M" "$UNIX_URI"
# A discarded range may read back as anything until written again: the
# whole MiB is zeroed, then part of it rewritten.
zero $((44 << 20)) $((1 << 20))
put "$WORK/a5.bin" $((44 << 20))
check "qemu-io discard, write -z, rewrite (tcp)" qio \
	-c "discard 44M 1M" -c "write -z 44M 1M" -c "write -P 0xa5 44M 64k" \
	-c "read -P 0xa5 44M 64k" -c "read -P 0 $(( (45 << 20) - 4096 )) 4k" \
	"$TCP_URI"
check "qemu-io out-of-range read is refused" bash -c \
	"! qemu-io -f raw -c 'read $((DISK_MIB << 20)) 4k' '$UNIX_URI' 2>&1 | grep -q 'read 4096'"

# --- fio, nbd engine ---------------------------------------------------------
fio_run() {
	# fio keeps verify state files in its working directory: use $WORK,
	# never the build tree (make distcheck insists it stays clean).
	(cd "$WORK" && fio --output="$WORK/fio.log" --ioengine=nbd \
		--uri="$1" --name=job "${@:2}")
}
# Random 4 KiB writes at depth 32, verified by fio itself (crc32c).
check "fio randwrite depth 32 + verify (unix)" bash -c \
	"$(declare -f fio_run); WORK='$WORK'; fio_run '$UNIX_URI' \
	 --rw=randwrite --bs=4k --iodepth=32 --offset=48M --size=8M \
	 --verify=crc32c --do_verify=1 --verify_fatal=1 \
	 && dd if='$DISK' of='$EXPECTED' bs=1M skip=48 seek=48 count=8 \
	    conv=notrunc status=none"
# A known pattern, written sequentially, compared with cmp.
python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex('deadbeef') * (2 << 20))" \
	>"$WORK/beef.bin"
put "$WORK/beef.bin" $((56 << 20))
check "fio write 64k + verify_pattern (tcp)" fio_run "$TCP_URI" \
	--rw=write --bs=64k --iodepth=8 --offset=56M --size=8M \
	--verify=pattern --verify_pattern=0xdeadbeef --do_verify=1 \
	--verify_fatal=1
check "fio randread depth 16 (2 jobs, unix)" fio_run "$UNIX_URI" \
	--rw=randread --bs=16k --iodepth=16 --numjobs=2 --size=32M \
	--time_based=0

# --- the server's own view, and a clean stop ---------------------------------
if grep -q "protocol error\|disconnecting" "$WORK/tapdisk.log"; then
	fail "no protocol errors logged" \
		"$(grep -m1 'disconnecting' "$WORK/tapdisk.log")"
else
	pass "no protocol errors logged"
fi
RC=0
nbd_stop || RC=$?
if [ "$RC" = 0 ] && [ ! -e "$SOCK" ]; then
	pass "SIGTERM: exit 0, socket removed"
else
	fail "SIGTERM: exit 0, socket removed" "rc $RC"
fi
if cmp -s "$DISK" "$EXPECTED"; then
	pass "backing file after shutdown"
else
	fail "backing file after shutdown"
fi

nbd_summary
