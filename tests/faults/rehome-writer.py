#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""rehome-writer.py - a write stream over NBD while replicas are re-homed.

Usage:
  rehome-writer.py write URI DATA --stop FILE [--rate BPS] [--bs N]
                   [--reconnect SECONDS]
  rehome-writer.py owned MAP EXTENTS_JSON SERVERS_JSON

write: DATA holds the disk's content as it is now (the caller filled the
disk with it).  Writes blocks of BS bytes (default 64 KiB) of fresh random
data at random aligned places, one at a time, at about BPS bytes per
second (default 4 MiB/s), and keeps DATA's image up to date with every
acknowledged write, until FILE exists; then flushes, reads the whole disk
back through NBD and compares it with the image, and writes the image to
DATA (for stripe-io.py backing).  Without --reconnect any failed write is
a failure (the disk must never stop).  With --reconnect, a failed write
(tapdisk killed) makes it connect again for up to SECONDS and write the
block again (an unacknowledged write may have landed or not: rewriting
it makes it known); the count of such interruptions is printed.
Prints "PASS: ..." / "FAIL: ..." lines; exit 1 when one failed.

owned: every replica the mapping file names is an extent the master
(stripe-ctl --json extents list --allocated, server list) has allocated to
that very slot, not free and not a move's target: no map names a freed or
foreign extent.
"""
import json
import os
import random
import sys
import time

import nbd

MIB = 1 << 20


def connect(uri, deadline):
    while True:
        try:
            h = nbd.NBD()
            h.connect_uri(uri)
            return h
        except nbd.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def opts_of(args):
    return dict(zip(args[0::2], args[1::2]))


def cmd_write(args):
    uri, data_path = args[0], args[1]
    o = opts_of(args[2:])
    stop, bs = o["--stop"], int(o.get("--bs", 64 * 1024))
    rate = float(o.get("--rate", 4 * MIB))
    reconnect = float(o.get("--reconnect", 0))
    image = bytearray(open(data_path, "rb").read())
    blocks = len(image) // bs
    h = connect(uri, time.monotonic() + 10)
    writes = interrupted = 0
    errors = []
    t0 = time.monotonic()
    while not os.path.exists(stop):
        off = random.randrange(blocks) * bs
        buf = os.urandom(bs)
        while True:
            try:
                h.pwrite(buf, off)
                break
            except nbd.Error as e:
                if not reconnect:
                    errors.append((off, str(e)))
                    break
                interrupted += 1
                try:
                    h.close()
                except Exception:  # noqa: BLE001 - the old handle is dead
                    pass
                h = connect(uri, time.monotonic() + reconnect)
        if errors:
            break
        image[off:off + bs] = buf
        writes += 1
        ahead = writes * bs / rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    elapsed = time.monotonic() - t0
    ok = True
    if errors:
        ok = False
        print("FAIL: a write failed at byte %d: %s" % errors[0])
    elif reconnect:
        print("PASS: %d writes of %d KiB in %.1f s; %d interrupted by the "
              "kill and written again after the restart"
              % (writes, bs // 1024, elapsed, interrupted))
    else:
        print("PASS: the writer saw no error: %d writes of %d KiB in %.1f s"
              % (writes, bs // 1024, elapsed))
    h.flush()
    back = bytearray()
    for off in range(0, len(image), MIB):
        back += h.pread(min(MIB, len(image) - off), off)
    h.shutdown()
    if back == image:
        print("PASS: every acknowledged write reads back through NBD")
    else:
        ok = False
        first = next(i for i in range(len(image)) if back[i] != image[i])
        print("FAIL: the disk differs from the writes, first at byte %d" % first)
    with open(data_path, "wb") as f:
        f.write(image)
    return 0 if ok else 1


def cmd_owned(args):
    slots = []
    servers = {}
    for line in open(args[0]):
        w = line.split()
        if w and w[0] == "server":
            kv = dict(zip(w[2::2], w[3::2]))
            servers[int(w[1])] = (kv["target"], int(kv["lun"]), int(kv["block-size"]))
        elif w and w[0] == "vdisk":
            vdisk = w[1]
        elif w and w[0] == "extent":
            slots.append((int(w[1]), int(w[2]), int(w[3]), int(w[5]), int(w[7])))
    ids = {(s["target"], s["lun"]): s["id"] for s in json.load(open(args[2]))}
    owner = {}
    for e in json.load(open(args[1])):
        owner[(e["server"], e["offset_bytes"])] = e
    bad = pending = 0
    for c, j, r, n, lba in slots:
        target, lun, bsz = servers[n]
        e = owner.get((ids.get((target, lun)), lba * bsz))
        if not e or e["vdisk"] != vdisk or (e["column"], e["extent"], e["replica"]) != (c, j, r):
            bad += 1
            print("vdisk %s column %d extent %d replica %d: %s lun %d byte %d is %s"
                  % (vdisk, c, j, r, target, lun, lba * bsz,
                     "free" if not e else "owned by %s" % json.dumps(e)))
        elif e.get("move_target"):
            pending += 1  # swapped in the map, the commit not yet made
    print("%s: %d replicas, %d not owned by their slot at the master%s"
          % (vdisk, len(slots), bad,
             ", %d the new extent of their slot's move (commit pending)" % pending
             if pending else ""))
    return 1 if bad else 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("write", "owned"):
        sys.exit(__doc__)
    return (cmd_write if sys.argv[1] == "write" else cmd_owned)(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
