#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""shm-pattern.py FILE OFFSET:LENGTH:GENERATION:SEED...

Check, without tapdisk or td-front's code, that bytes [OFFSET, OFFSET +
LENGTH) of FILE hold td-front's verification pattern of GENERATION and
SEED, for every region given: each 512-byte sector is, little-endian, the
magic "TDFRONT1", the
sector's byte offset, the generation, the seed, then the 60 words w, w + 1,
... w + 59 (mod 2^64) with w = mix(offset + GAMMA * (generation + 1) +
mix(seed)) and mix splitmix64's finaliser (tools/td-front/td-front-lib.h).

Prints "ok N sectors" and exits 0, or names the first bad sectors and
exits 1.  Numbers may be decimal or 0x hexadecimal.
"""
import array
import struct
import sys

MASK = (1 << 64) - 1
MAGIC = 0x31544E4F52464454
GAMMA = 0x9E3779B97F4A7C15
SECTOR = 512


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def expected(offset, gen, seed):
    w = mix((offset + GAMMA * (gen + 1) + mix(seed)) & MASK)
    head = struct.pack("<4Q", MAGIC, offset, gen, seed)
    if sys.byteorder == "little" and w + 59 <= MASK:
        return head + array.array("Q", range(w, w + 60)).tobytes()
    return head + struct.pack("<60Q", *((w + i) & MASK for i in range(60)))


def check(f, offset, length, gen, seed):
    """The number of bad sectors in one region; the first few printed."""
    bad = 0
    f.seek(offset)
    for off in range(offset, offset + length, SECTOR):
        got = f.read(SECTOR)
        if got != expected(off, gen, seed):
            bad += 1
            if bad <= 5:
                m, o, g, s = struct.unpack("<4Q", got[:32].ljust(32, b"\0"))
                print("bad sector at %d: magic %#x offset %d generation %d "
                      "seed %d (want generation %d seed %d)"
                      % (off, m, o, g, s, gen, seed))
    return bad


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bad = sectors = 0
    with open(sys.argv[1], "rb") as f:
        for region in sys.argv[2:]:
            offset, length, gen, seed = (int(a, 0) for a in region.split(":"))
            bad += check(f, offset, length, gen, seed)
            sectors += length // SECTOR
    if bad:
        print("%d bad sectors of %d" % (bad, sectors))
        sys.exit(1)
    print("ok %d sectors" % sectors)


if __name__ == "__main__":
    main()
