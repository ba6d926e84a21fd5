#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""nbd-admission.py - clients that hold NBD slots, for nbd-admission.sh and
tests/faults/nbd-rss.sh.

Usage:
  nbd-admission.py ADDR hold KIND COUNT
      Open COUNT connections and leave each in the state KIND, then print
      "held N told M" (M: connections whose GO was refused with a reason)
      and keep them until stdin closes.  KIND is
        handshake  greeting read, nothing sent
        idle       handshake done (GO), nothing sent
        header     GO, then 10 bytes of a request header
        payload    GO, then a 1 MiB WRITE's header and 4 KiB of its data
  nbd-admission.py ADDR sessions COUNT PARALLEL
      COUNT hostile sessions, PARALLEL at a time: GO, READs of 4 KiB to
      1 MiB whose replies are never read, a WRITE abandoned mid-payload,
      then a close.  Prints "sessions N refused M".
ADDR is a unix socket path or tcp:HOST:PORT.  Exit status 1 with a message
when the server does not behave as the protocol says.
"""
import multiprocessing
import os
import random
import resource
import socket
import struct
import sys
from importlib import import_module

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
nbd = import_module("nbd-hostile")

REP_ERR_POLICY = 0x80000002
CMD_READ, CMD_WRITE = 0, 1
READ_SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20]


def try_go(c):
    """GO; returns None when in, else the refusal's message."""
    c.opt(nbd.OPT_GO, struct.pack(">IH", 0, 0))
    while True:
        _, rtype, data = c.opt_reply()
        if rtype == nbd.REP_ACK:
            return None
        if rtype == REP_ERR_POLICY:
            return data.decode(errors="replace") or "(no message)"
        if rtype != nbd.REP_INFO:
            raise nbd.Misbehaved("GO answered 0x%x %r" % (rtype, data))


def hold_one(addr, kind):
    """One connection left in state kind; returns (client, refusal)."""
    c = nbd.Client(addr, timeout=30)
    if kind == "handshake":
        c.recv_exact(18)
        return c, None
    c.greeting()
    why = try_go(c)
    if why is not None:
        return c, why
    if kind == "header":
        c.send(struct.pack(">IHH", nbd.REQUEST_MAGIC, 0, CMD_WRITE) + b"\0\0")
    elif kind == "payload":
        c.req(CMD_WRITE, 1, 0, 1 << 20, payload=bytes(4096))
    return c, None


def hold(addr, kind, count):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 256)), hard))
    held, told, reasons = [], 0, set()
    for _ in range(count):
        try:
            c, why = hold_one(addr, kind)
        except (EOFError, ConnectionResetError, BrokenPipeError):
            continue  # made room for a later one: that is the point
        held.append(c)
        if why is not None:
            told += 1
            reasons.add(why)
    print("held %d told %d" % (len(held), told), flush=True)
    for why in sorted(reasons):
        print("reason: %s" % why, flush=True)
    sys.stdin.read()


def session(addr, rng):
    """One hostile session; returns True when GO was refused."""
    c = nbd.Client(addr, timeout=30)
    try:
        c.greeting()
        if try_go(c) is not None:
            return True
        for i in range(rng.randint(1, 4)):
            c.req(CMD_READ, i, 0, rng.choice(READ_SIZES))
        n = rng.choice(READ_SIZES)
        c.req(CMD_WRITE, 9, 0, n, payload=bytes(rng.randint(0, n - 1)))
    except (EOFError, ConnectionResetError, BrokenPipeError):
        pass
    finally:
        c.close()
    return False


def worker(args):
    addr, count, seed = args
    rng = random.Random(seed)
    return sum(session(addr, rng) for _ in range(count))


def sessions(addr, count, parallel):
    per = [count // parallel + (i < count % parallel) for i in range(parallel)]
    with multiprocessing.Pool(parallel) as pool:
        refused = sum(pool.map(worker, [(addr, n, i) for i, n in enumerate(per)]))
    print("sessions %d refused %d" % (count, refused))


def main():
    if len(sys.argv) != 5 or sys.argv[2] not in ("hold", "sessions"):
        sys.exit(__doc__)
    addr, mode = sys.argv[1], sys.argv[2]
    try:
        if mode == "hold":
            hold(addr, sys.argv[3], int(sys.argv[4]))
        else:
            sessions(addr, int(sys.argv[3]), int(sys.argv[4]))
    except (nbd.Misbehaved, EOFError, OSError) as e:
        print("  %s: %s" % (mode, e))
        sys.exit(1)


if __name__ == "__main__":
    main()
