#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-block-status.sh - structured replies, meta contexts and BLOCK_STATUS
# of tapdisk's NBD export, with real clients (issue #21 item 3).
#
# A sparse file with three known data regions is served by
# `tapdisk -a aio:FILE --nbd unix:SOCK --nbd tcp:127.0.0.1:PORT`:
#   - `nbdinfo --map` (base:allocation) lists exactly those regions as
#     data and the rest as hole,zero;
#   - `qemu-img map --output=json` over nbd:// agrees;
#   - `nbdinfo --map=qemu:dirty-bitmap:nosuch` fails (the context is not
#     selected) and the export goes on serving;
#   - nbdcopy (structured replies, block status) copies it byte-exact;
#   - a raw client that does not ask for structured replies gets simple
#     replies: its reads are byte-exact, BLOCK_STATUS gets EINVAL.
#
# Exits 0 when all pass, 1 when one fails, 77 when a client is missing.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"

nbd_need nbdinfo nbdcopy qemu-img python3 cmp
nbd_built "$TAPDISK"
nbd_workdir nbd-block-status
DISK=$WORK/disk.img
PORT=$(nbd_free_port)
UNIX_URI=$URI
TCP_URI="nbd://127.0.0.1:$PORT/"

truncate -s 16M "$DISK"
dd if=/dev/urandom of="$DISK" bs=64K seek=2 count=3 conv=notrunc status=none
dd if=/dev/urandom of="$DISK" bs=1M seek=10 count=1 conv=notrunc status=none
dd if=/dev/urandom of="$DISK" bs=64K seek=255 count=1 conv=notrunc status=none
# start length, one data region a line
WANT_DATA="131072 196608
10485760 1048576
16711680 65536"

# The file system must report those holes itself (SEEK_DATA), or the
# test proves nothing about tapdisk.
if ! python3 - "$DISK" "$WANT_DATA" <<'EOF'; then
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
got, off = [], 0
while off < size:
    try:
        d = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        break
    h = os.lseek(fd, d, os.SEEK_HOLE)
    got.append("%d %d" % (d, h - d))
    off = h
sys.exit(0 if "\n".join(got) == sys.argv[2] else 1)
EOF
	echo "SKIP: the file system under $WORK does not report these holes"
	exit 77
fi

nbd_start "aio:$DISK" --nbd "tcp:127.0.0.1:$PORT" --name nbdbs || exit 1

# data_of: "start length" of the runs with data in a map given as
# "start length type" lines (type bit 0: hole), adjacent runs joined.
data_of() {
	awk '{ if ($3 % 2 == 0) { if (n && s + l == $1) { l += $2 }
	       else { if (n) print s, l; s = $1; l = $2; n = 1 } } }
	     END { if (n) print s, l }'
}

# --- nbdinfo --map: base:allocation ------------------------------------------
if ! nbdinfo --map "$UNIX_URI" >"$WORK/map.txt" 2>"$WORK/err.txt"; then
	fail "nbdinfo --map" "$(head -2 "$WORK/err.txt" | tr '\n' ' ')"
else
	got=$(data_of <"$WORK/map.txt")
	holes=$(awk '$3 != 0 && $3 != 3' "$WORK/map.txt")
	total=$(awk '{ t += $2 } END { print t }' "$WORK/map.txt")
	if [ "$got" = "$WANT_DATA" ] && [ -z "$holes" ] &&
		[ "$total" = $((16 << 20)) ]; then
		pass "nbdinfo --map: exactly the data regions"
	else
		fail "nbdinfo --map" "got $(tr '\n' ' ' <"$WORK/map.txt")"
	fi
fi

# --- qemu-img map over nbd:// agrees -------------------------------------------
if ! qemu-img map --output=json "$TCP_URI" >"$WORK/qmap.json" 2>"$WORK/err.txt"; then
	fail "qemu-img map" "$(head -2 "$WORK/err.txt" | tr '\n' ' ')"
else
	got=$(python3 -c '
import json, sys
for e in json.load(open(sys.argv[1])):
    print(e["start"], e["length"], 0 if e["data"] else 3)' "$WORK/qmap.json" | data_of)
	if [ "$got" = "$WANT_DATA" ]; then
		pass "qemu-img map --output=json: the same regions"
	else
		fail "qemu-img map" "got $(echo "$got" | tr '\n' ' ')"
	fi
fi

# --- a context that does not exist: not selected, the export goes on -----------
if nbdinfo --map=qemu:dirty-bitmap:nosuch "$UNIX_URI" >"$WORK/out.txt" 2>&1; then
	fail "unknown bitmap refused" "nbdinfo succeeded: $(head -2 "$WORK/out.txt")"
elif ! grep -q 'does not support metadata context' "$WORK/out.txt"; then
	fail "unknown bitmap refused" "$(head -2 "$WORK/out.txt" | tr '\n' ' ')"
elif ! nbdinfo --map "$UNIX_URI" >"$WORK/map2.txt" 2>&1 ||
	! cmp -s "$WORK/map.txt" "$WORK/map2.txt"; then
	fail "unknown bitmap refused" "the export broke afterwards"
else
	pass "nbdinfo --map=qemu:dirty-bitmap:nosuch: not selected, export unharmed"
fi
if nbdinfo --json "$UNIX_URI" >"$WORK/meta.txt"; then
	if grep -q 'base:allocation' "$WORK/meta.txt"; then
		pass "base:allocation listed (LIST_META_CONTEXT)"
	else
		fail "base:allocation listed" "$(tr '\n' ' ' <"$WORK/meta.txt" | head -c 300)"
	fi
else
	fail "base:allocation listed" "nbdinfo failed"
fi

# --- nbdcopy: structured reads and block status, byte-exact ------------------
if nbdcopy "$TCP_URI" "$WORK/copy.img" 2>"$WORK/err.txt" &&
	cmp -s "$DISK" "$WORK/copy.img"; then
	pass "nbdcopy: byte-exact copy"
else
	fail "nbdcopy" "$(head -2 "$WORK/err.txt" | tr '\n' ' ')"
fi

# --- a client without structured replies: simple replies as before -----------
if python3 - "$SOCK" "$DISK" <<'EOF' >"$WORK/raw.txt" 2>&1; then
import socket, struct, sys

sock_path, disk = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.connect(sock_path)

def recv(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("server closed")
        b += c
    return b

magic, opt, flags = struct.unpack(">QQH", recv(18))
assert magic == 0x4E42444D41474943 and opt == 0x49484156454F5054, "greeting"
s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
# NBD_OPT_GO (7), empty name, no information requests
s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) + struct.pack(">IH", 0, 0))
size = None
while True:
    rmagic, ropt, rtype, rlen = struct.unpack(">QIII", recv(20))
    data = recv(rlen)
    if rtype == 3 and struct.unpack(">H", data[:2])[0] == 0:
        size = struct.unpack(">Q", data[2:10])[0]
    if rtype == 1:
        break
    assert rtype == 3, "GO refused: %x" % rtype
img = open(disk, "rb").read()
assert size == len(img), "size %s" % size
chunk, handle = 1 << 20, 1
for off in range(0, size, chunk):
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, handle, off, chunk))
    m, err, h = struct.unpack(">IIQ", recv(16))
    assert m == 0x67446698, "reply magic %x (not a simple reply)" % m
    assert err == 0 and h == handle, "READ error %d" % err
    assert recv(chunk) == img[off:off + chunk], "data differs at %d" % off
    handle += 1
# BLOCK_STATUS (7) without structured replies: simple EINVAL (22)
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 7, handle, 0, 4096))
m, err, h = struct.unpack(">IIQ", recv(16))
assert m == 0x67446698 and err == 22 and h == handle, "BLOCK_STATUS %x %d" % (m, err)
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 0, 0, 0))  # DISC
s.close()
EOF
	pass "simple-reply client: byte-exact reads, BLOCK_STATUS refused (EINVAL)"
else
	fail "simple-reply client" "$(tail -2 "$WORK/raw.txt" | tr '\n' ' ')"
fi

if kill -0 "$TD_PID" 2>/dev/null; then
	pass "tapdisk still serving"
else
	fail "tapdisk still serving" "it exited"
fi
nbd_stop

nbd_summary
