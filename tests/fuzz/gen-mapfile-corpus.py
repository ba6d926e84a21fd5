#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""gen-mapfile-corpus.py [DIR] - write the seed corpus of fuzz_mapfile.

Each seed is a mode byte and a mapping file's text (drivers/mapfile.h):
mode 1 seeds leave the checksum line to the harness (it appends the right
one), mode 0 seeds carry their own, right or wrong.
"""
import os
import sys

MiB = 1 << 20


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def header(size, unit, columns, j, replicas, extent, name="db1",
           region=None):
    """Version 2 when region (region-bytes) is given, else version 1."""
    return (f"tapstripe-map {2 if region else 1}\n"
            "# tapstripe mapping file (see drivers/mapfile.h); the last "
            "line checksums the rest\n"
            f"vdisk {name}\nsize-bytes {size}\nstripe-unit-bytes {unit}\n"
            f"columns {columns}\nextents-per-column {j}\n"
            f"replicas {replicas}\nextent-size-bytes {extent}\n"
            "master 127.0.0.1:7700\n" +
            (f"region-bytes {region}\n" if region else ""))


def server(n, addr, target, block=512, chap=None, device=None):
    line = (f"server {n} address {addr} portal {addr}:3260 target {target} "
            f"lun 1 block-size {block}")
    if chap:
        line += f" chap-user {chap[0]} chap-secret {chap[1]}"
    if device:
        line += f" device {device}"
    return line + "\n"


def extent(c, x, r, srv, lba, state="ok"):
    return f"extent {c} {x} {r} server {srv} lba {lba} {state}\n"


def base():
    """4 MiB, 64 KiB units, 2 columns, J = 2, 2 replicas, 4 servers."""
    text = header(4 * MiB, 64 << 10, 2, 2, 2, MiB)
    text += server(0, "10.0.0.1", "iqn.2024-01.t:a")
    text += server(1, "10.0.0.2", "iqn.2024-01.t:b")
    text += server(2, "10.0.0.3", "iqn.2024-01.t:c",
                   chap=("alice", "s3cret!"))
    text += server(3, "10.0.0.4", "iqn.2024-01.t:d", 4096)
    text += extent(0, 0, 0, 0, 0) + extent(0, 0, 1, 1, 0)
    text += extent(0, 1, 0, 0, 2048) + extent(0, 1, 1, 1, 2048)
    text += extent(1, 0, 0, 2, 0) + extent(1, 0, 1, 3, 0)
    text += extent(1, 1, 0, 2, 2048) + extent(1, 1, 1, 3, 256, "stale")
    return text


def single():
    """One column, one replica, one extent: the smallest map."""
    text = header(1 * MiB, 4096, 1, 1, 1, MiB, "a")
    text += server(0, "host1", "iqn.2024-01.t:x", 4096)
    return text + extent(0, 0, 0, 0, 0)


def wide():
    """3 columns, 3 replicas, odd size: J rounds up."""
    text = header(3 * MiB + 512, 1 << 20, 3, 2, 3, MiB, "wide.disk-1")
    for n in range(3):
        text += server(n, f"10.1.0.{n + 1}", f"iqn.2024-01.w:{n}")
    for c in range(3):
        for x in range(2):
            for r in range(3):
                srv = (c + r) % 3
                text += extent(c, x, r, srv, (c * 2 + x) * 2048)
    return text


def move(c, x, r, srv, lba, state="ok"):
    return f"move {c} {x} {r} server {srv} lba {lba} {state}\n"


def v2():
    """Version 2: 64 KiB regions (16 per 1 MiB extent), dirty marks and a
    move target on a fifth server."""
    text = header(4 * MiB, 64 << 10, 2, 2, 2, MiB, region=64 << 10)
    text += server(0, "10.0.0.1", "iqn.2024-01.t:a")
    text += server(1, "10.0.0.2", "iqn.2024-01.t:b")
    text += server(2, "10.0.0.3", "iqn.2024-01.t:c")
    text += server(3, "10.0.0.4", "iqn.2024-01.t:d", 4096)
    text += server(4, "10.0.0.5", "iqn.2024-01.t:e")
    text += extent(0, 0, 0, 0, 0) + extent(0, 0, 1, 1, 0, "dirty 1000")
    text += extent(0, 1, 0, 0, 2048) + extent(0, 1, 1, 1, 2048)
    text += extent(1, 0, 0, 2, 0) + extent(1, 0, 1, 3, 0, "stale")
    text += extent(1, 1, 0, 2, 2048, "dirty 0f0f")
    text += extent(1, 1, 1, 3, 256)
    text += move(0, 0, 1, 4, 0, "dirty ff7f")
    text += move(1, 1, 0, 4, 2048, "stale")
    return text


def v2_odd():
    """Version 2, 6 regions of 4 KiB per 24 KiB extent (a last digit with
    2 bits), the default region size, one move."""
    text = header(98304, 4096, 2, 2, 2, 24576, "odd", region=4096)
    for n in range(4):
        text += server(n, f"10.2.0.{n + 1}", f"iqn.2024-01.o:{n}")
    text += extent(0, 0, 0, 0, 0) + extent(0, 0, 1, 1, 0)
    text += extent(0, 1, 0, 1, 48) + extent(0, 1, 1, 2, 0, "dirty 21")
    text += extent(1, 0, 0, 2, 48, "stale") + extent(1, 0, 1, 0, 48)
    text += extent(1, 1, 0, 0, 96) + extent(1, 1, 1, 1, 96)
    return text + move(0, 0, 1, 3, 0, "dirty 30")


def v2_wide():
    """Version 2 with 2048 regions: 512 hex digits on a line."""
    text = header(8 * MiB, 4096, 1, 1, 2, 8 * MiB, "wide2", region=4096)
    for n in range(3):
        text += server(n, f"10.3.0.{n + 1}", f"iqn.2024-01.x:{n}")
    text += extent(0, 0, 0, 0, 0, "dirty " + "f" * 511 + "7")
    text += extent(0, 0, 1, 1, 0)
    return text + move(0, 0, 1, 2, 0, "dirty " + "0" * 500 + "1" * 12)


def sealed(text):
    return text + "checksum crc32c %08x\n" % crc32c(text.encode())


def seeds():
    yield "base", 1, base()
    yield "v2", 1, v2()
    yield "v2-odd", 1, v2_odd()
    yield "v2-wide", 1, v2_wide()
    yield "v2-sealed", 0, sealed(v2())
    yield "v2-in-v1", 1, v2().replace("tapstripe-map 2", "tapstripe-map 1")
    yield "v2-move-overlap", 1, v2().replace("lba 2048 stale", "lba 1 stale")
    yield "single", 1, single()
    yield "wide", 1, wide()
    yield "base-sealed", 0, sealed(base())
    yield "bad-checksum", 0, base() + "checksum crc32c 00000000\n"
    yield "truncated", 0, sealed(base())[:-7]
    yield "missing-extent", 1, base().rsplit("extent", 1)[0]
    yield "overlap", 1, base().replace("lba 2048 ok\nextent 0 1 1",
                                       "lba 0 ok\nextent 0 1 1", 1)
    yield "bad-j", 1, base().replace("extents-per-column 2",
                                     "extents-per-column 3")
    yield "big-numbers", 1, base().replace(
        "size-bytes 4194304", "size-bytes 18446744073709551615")
    yield "device", 1, base().replace(
        server(1, "10.0.0.2", "iqn.2024-01.t:b"),
        server(1, "10.0.0.2", "iqn.2024-01.t:b", device="/dev/disk/by-path/"
               "ip-10.0.0.2:3260-iscsi-iqn.2024-01.t:b-lun-1"))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "mapfile")
    os.makedirs(out, exist_ok=True)
    for name, mode, text in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([mode]) + text.encode())


if __name__ == "__main__":
    main()
