#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""gen-blkif-corpus.py [DIR] - write the seed corpus of fuzz_blkif.

Each seed is a valid input in the layout fuzz_blkif.c documents: a config
byte, the pool bytes (indirect descriptor pages), then rounds of ring
slots.  The structures follow xen/io/blkif.h (native x86_64 layout).
"""
import os
import struct
import sys

PAGE = 4096
SLOT = 112  # sizeof(union blkif_sring_entry)
OP_READ, OP_WRITE, OP_BARRIER, OP_FLUSH, OP_DISCARD, OP_INDIRECT = 0, 1, 2, 3, 5, 6
DISCARD_SECURE = 1


def seg(gref, first=0, last=7):
    return struct.pack("<IBB2x", gref, first, last)


def rw(op, rid, sector, segs):
    body = struct.pack("<BBH4xQQ", op, len(segs), 0, rid, sector)
    body += b"".join(segs)
    return body.ljust(SLOT, b"\0")


def discard(rid, sector, nr, flag=0):
    return struct.pack("<BBH4xQQQ", OP_DISCARD, flag, 0, rid, sector,
                       nr).ljust(SLOT, b"\0")


def indirect(op, rid, sector, nseg, grefs):
    grefs = (list(grefs) + [0] * 8)[:8]
    body = struct.pack("<BBH4xQQH2x8I", OP_INDIRECT, op, nseg, rid, sector,
                       0, *grefs)
    return body.ljust(SLOT, b"\0")


def seed(config, pool, rounds):
    out = struct.pack("<BH", config, len(pool)) + pool
    for slots, mode in rounds:
        out += struct.pack("<BB", len(slots), mode) + b"".join(slots)
    return out


def descriptors(nseg, first_gref):
    return b"".join(seg(first_gref + i % 40, 0, 1) for i in range(nseg))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "blkif")
    os.makedirs(out, exist_ok=True)
    seeds = {
        "read-write": seed(0, b"", [([
            rw(OP_READ, 1, 0, [seg(1)]),
            rw(OP_WRITE, 2, 8, [seg(2 + i) for i in range(11)]),
            rw(OP_READ, 3, 100, [seg(3, 2, 5)]),
        ], 0)]),
        "indirect-300": seed(1, descriptors(300, 8), [([
            indirect(OP_READ, 4, 16, 300, [0, 1]),
            indirect(OP_WRITE, 5, 0, 2, [0]),
        ], 0)]),
        "flush-barrier-discard": seed(8, b"", [([
            rw(OP_FLUSH, 6, 0, []),
            rw(OP_BARRIER, 7, 8, [seg(4)]),
            rw(OP_READ, 8, 8, [seg(5)]),
            discard(9, 64, 128),
            discard(10, 0, 8, DISCARD_SECURE),
        ], 0)]),
        "two-rounds": seed(2, b"", [
            ([rw(OP_READ, 11 + i, i * 8, [seg(i)]) for i in range(20)], 0),
            ([rw(OP_WRITE, 40 + i, i * 8, [seg(i)]) for i in range(20)], 0),
        ]),
        "producer-overflow": seed(0, b"", [
            ([rw(OP_READ, 60, 0, [seg(1)])], 1),
        ]) + struct.pack("<H", 40),
        "indirect-wait": seed(0x10 | 1, descriptors(1024, 8), [([
            indirect(OP_READ, 70, 0, 512, [0]),
            indirect(OP_WRITE, 71, 8, 512, [1]),
            indirect(OP_READ, 72, 0, 1024, [0, 1]),
        ], 0)]),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
