#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""kill-verify.py - tapdisk killed with SIGKILL under write load, restarted.

Usage: kill-verify.py TAPDISK CHAIN DISK WORKDIR [ROUNDS [SEED]]

Each round starts `TAPDISK --foreground -a CHAIN --nbd unix:WORKDIR/nbd.sock`
on the same disk, reads back and checks every block the earlier round
wrote, flushes, then writes at queue depth QD (1-8 blocks of 4 KiB each,
random places in the first NBLOCKS blocks, a flush after every FLUSH_EVERY
acknowledged writes, at most one flush in flight) and after a random
0.3-1.5 s kills tapdisk with SIGKILL while writes are in flight.  A last
start checks the last round and stops tapdisk with SIGTERM (exit 0).

The model.  A block is never written by two requests at once, and every
write to it carries the next generation: a block's 4 KiB hold a header
(magic, block number, generation) and a filler derived from it, so a block
reads back as exactly one generation or as garbage.  For each block the
model keeps
  issued   the last generation sent,
  acked    the last generation acknowledged,
  durable  the last generation acknowledged before a flush was sent whose
           own acknowledgement arrived before the kill (NBD: a flush
           covers every write completed before it was sent).
After the restart each block must hold a generation g with
  durable <= g <= issued          the promise: nothing flushed is lost,
                                  nothing appears that was never written;
and, separately reported and checked,
  acked <= g                      nothing acknowledged is lost (a process
                                  kill, not a power cut: the kernel holds
                                  every write tapdisk completed).
Replies that arrive after the kill are not counted as acknowledged.

With DROP_FLUSHED=1 in the environment, a flushed block is zeroed in DISK
after each kill: the checks must then fail (the verifier's self-test).

Prints one line per round and a verdict; exit 0 when every round held.
"""
import hashlib
import os
import random
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
from importlib import import_module  # noqa: E402

nbd = import_module("nbd-hostile")

BLOCK = 4096
NBLOCKS = 4096  # 16 MiB: rewritten often
QD = 32
FLUSH_EVERY = 64
MAX_BLOCKS_PER_WRITE = 8
MAGIC = b"TSKILL01"
CMD_WRITE, CMD_FLUSH = 1, 3


def content(block, gen):
    head = struct.pack(">8sQQ", MAGIC, block, gen)
    fill = hashlib.blake2b(head).digest()  # 64 bytes
    return head + (fill * (BLOCK // 64))[len(head):]


def generation(block, data):
    """The generation a block holds: 0 for zeroes, None for garbage."""
    if data == bytes(BLOCK):
        return 0
    magic, b, gen = struct.unpack(">8sQQ", data[:24])
    if magic != MAGIC or b != block or content(block, gen) != data:
        return None
    return gen


class Model:
    def __init__(self):
        self.issued = [0] * NBLOCKS
        self.acked = [0] * NBLOCKS
        self.durable = [0] * NBLOCKS


def start_tapdisk(args, sock, log):
    try:
        os.unlink(sock)
    except FileNotFoundError:
        pass
    proc = subprocess.Popen([args.tapdisk, "--foreground", "-a", args.chain,
                             "--nbd", "unix:" + sock, "--run-dir", args.work,
                             "--log-level", "warn", "--log-file", log])
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit("tapdisk exited at start (%d): see %s" % (proc.returncode, log))
        try:
            c = nbd.Client(sock, timeout=30)
            c.connect()
            return proc, c
        except (FileNotFoundError, ConnectionRefusedError):
            time.sleep(0.05)
    sys.exit("tapdisk did not start: see %s" % log)


def verify(c, model):
    """Read every block back; returns (broken promises, lost acked writes)."""
    broken, lost, chunk = [], 0, 256
    for first in range(0, NBLOCKS, chunk):
        c.req(nbd.CMD_READ, first, first * BLOCK, chunk * BLOCK)
        if c.reply(first):
            raise nbd.Misbehaved("read at block %d failed" % first)
        data = c.recv_exact(chunk * BLOCK)
        for i in range(chunk):
            b = first + i
            g = generation(b, data[i * BLOCK:(i + 1) * BLOCK])
            if g is None:
                broken.append("block %d holds garbage" % b)
            elif not model.durable[b] <= g <= model.issued[b]:
                broken.append("block %d holds generation %d; durable %d, issued %d"
                              % (b, g, model.durable[b], model.issued[b]))
            else:
                lost += g < model.acked[b]
                # what is there now is the new baseline
                model.issued[b] = max(model.issued[b], g)
                model.acked[b] = model.durable[b] = g
    return broken, lost


def drop_flushed(disk, model):
    """The verifier's self-test: lose a flushed write behind its back."""
    b = max(range(NBLOCKS), key=lambda i: model.durable[i])
    with open(disk, "r+b") as f:
        f.seek(b * BLOCK)
        f.write(bytes(BLOCK))
    print("  (self-test: zeroed block %d, flushed at generation %d)"
          % (b, model.durable[b]))


def flush(c):
    c.req(CMD_FLUSH, 1, 0, 0)
    if c.reply(1):
        raise nbd.Misbehaved("flush failed")


class Load:
    """QD writes in flight, a flush every FLUSH_EVERY acknowledged writes."""

    def __init__(self, c, model, rng):
        self.c, self.m, self.rng = c, model, rng
        self.sock = c.sock
        self.sock.setblocking(False)
        self.out = bytearray()
        self.inp = bytearray()
        self.busy = [False] * NBLOCKS
        self.writes = {}  # handle -> [(block, gen)]
        self.flush_handle = None
        self.flush_covers = []  # (block, gen) acked before the flush left
        self.acked_since_flush = []
        self.next_handle = 2
        self.stats = {"writes": 0, "flushes": 0}

    def submit_write(self):
        for _ in range(8):
            n = self.rng.randint(1, MAX_BLOCKS_PER_WRITE)
            first = self.rng.randrange(0, NBLOCKS - n + 1)
            if not any(self.busy[first:first + n]):
                break
        else:
            return False
        blocks = []
        payload = bytearray()
        for b in range(first, first + n):
            self.busy[b] = True
            self.m.issued[b] += 1
            blocks.append((b, self.m.issued[b]))
            payload += content(b, self.m.issued[b])
        h = self.next_handle
        self.next_handle += 1
        self.writes[h] = blocks
        self.out += struct.pack(">IHHQQI", nbd.REQUEST_MAGIC, 0, CMD_WRITE, h,
                                first * BLOCK, n * BLOCK) + payload
        return True

    def submit_flush(self):
        self.flush_handle = self.next_handle
        self.next_handle += 1
        self.flush_covers = self.acked_since_flush
        self.acked_since_flush = []
        self.out += struct.pack(">IHHQQI", nbd.REQUEST_MAGIC, 0, CMD_FLUSH,
                                self.flush_handle, 0, 0)

    def on_reply(self, handle, err):
        if err:
            raise nbd.Misbehaved("request %d failed with %d" % (handle, err))
        if handle == self.flush_handle:
            for b, g in self.flush_covers:
                self.m.durable[b] = max(self.m.durable[b], g)
            self.flush_handle = None
            self.stats["flushes"] += 1
            return
        for b, g in self.writes.pop(handle):
            self.busy[b] = False
            self.m.acked[b] = max(self.m.acked[b], g)
            self.acked_since_flush.append((b, g))
        self.stats["writes"] += 1

    def run(self, seconds):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            while len(self.writes) < QD and self.submit_write():
                pass
            if (self.flush_handle is None and
                    len(self.acked_since_flush) >= FLUSH_EVERY):
                self.submit_flush()
            for _, ev in sel.select(0.1):
                if ev & selectors.EVENT_WRITE and self.out:
                    try:
                        n = self.sock.send(self.out)
                        del self.out[:n]
                    except BlockingIOError:
                        pass
                if ev & selectors.EVENT_READ:
                    data = self.sock.recv(1 << 16)
                    if not data:
                        raise EOFError("tapdisk closed the connection")
                    self.inp += data
                    while len(self.inp) >= 16:
                        magic, err, h = struct.unpack(">IIQ", self.inp[:16])
                        if magic != nbd.SIMPLE_REPLY_MAGIC:
                            raise nbd.Misbehaved("bad reply magic %x" % magic)
                        del self.inp[:16]
                        self.on_reply(h, err)
        sel.close()


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.split("\n\n")[1])

    class Args:
        pass
    args = Args()
    args.tapdisk, args.chain, disk, args.work = sys.argv[1:5]
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    rng = random.Random(int(sys.argv[6]) if len(sys.argv) > 6 else 1)
    sock = os.path.join(args.work, "nbd.sock")
    log = os.path.join(args.work, "tapdisk.log")
    model = Model()
    failed = 0
    for r in range(rounds + 1):
        proc, c = start_tapdisk(args, sock, log)
        if r:
            broken, lost = verify(c, model)
            for line in broken[:5]:
                print("  " + line)
            ok = not broken and not lost
            failed += not ok
            print("%s: round %d: %d acknowledged writes, %d flushes before "
                  "the kill; after the restart %d blocks break the flush "
                  "promise, %d acknowledged writes are lost"
                  % ("PASS" if ok else "FAIL", r, load.stats["writes"],
                     load.stats["flushes"], len(broken), lost))
        if r == rounds:
            c.close()
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=60)
            failed += rc != 0
            print("%s: SIGTERM after the last check: exit %d"
                  % ("PASS" if rc == 0 else "FAIL", rc))
            break
        flush(c)  # what was read back is durable from here on
        load = Load(c, model, rng)
        load.run(rng.uniform(0.3, 1.5))
        inflight = len(load.writes)
        proc.kill()
        proc.wait()
        c.close()
        if os.environ.get("DROP_FLUSHED"):
            drop_flushed(disk, model)
        if not inflight:
            print("  (round %d: no write was in flight at the kill)" % (r + 1))
    print("%s: %s, %d kills: %s" % ("PASS" if not failed else "FAIL", args.chain,
                                    rounds, "every flushed and every acknowledged "
                                    "write survived" if not failed else
                                    "%d checks failed" % failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
