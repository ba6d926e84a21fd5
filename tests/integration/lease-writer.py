#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""lease-writer.py - a writer that follows a disk through a lease hand-over.

usage: lease-writer.py URI_A SWITCH_FILE STARTED_FILE COUNT [QD]

Writes COUNT 4 KiB blocks, each at its own offset (block i at i * 4 KiB)
with bytes of its own, QD in flight (default 8), through NBD to URI_A.
After 1/4 of them it creates STARTED_FILE (the test then hands the lease
over).  The first write A refuses stops new writes to A; once A has
nothing in flight, the writer waits for SWITCH_FILE to hold the URI of
the destination's tapdisk (at most 30 s), connects there and writes the
refused blocks and the rest.  Then it reads every acknowledged block back
from the destination (byte-exact) and checks that A refuses a write.

Prints PASS:/FAIL: lines, and "FIGURE: longest stall MS ms", the longest
time between two acknowledged writes (measured, never asserted).
"""
import os
import sys
import time

import nbd

BLOCK = 4096
SWITCH_WAIT_S = 30.0
RUN_TIMEOUT_S = 60.0


def block_bytes(i):
    head = (b"lease-writer block %08d " % i)
    return (head * (BLOCK // len(head) + 1))[:BLOCK]


class Writer:
    def __init__(self, h, count, qd):
        self.h = h
        self.count = count
        self.qd = qd
        self.pending = {}  # cookie -> (index, buffer)
        self.acked = set()
        self.refused = []
        self.last_ack = time.monotonic()
        self.longest = 0.0

    def issue(self, i):
        buf = nbd.Buffer.from_bytearray(bytearray(block_bytes(i)))
        self.pending[self.h.aio_pwrite(buf, i * BLOCK)] = (i, buf)

    def reap(self):
        self.h.poll(100)
        while self.pending:
            cookie = self.h.aio_peek_command_completed()
            if not cookie:
                break
            i, _ = self.pending.pop(cookie)
            try:
                self.h.aio_command_completed(cookie)
            except nbd.Error:
                self.refused.append(i)
                continue
            now = time.monotonic()
            self.longest = max(self.longest, now - self.last_ack)
            self.last_ack = now
            self.acked.add(i)

    def run(self, todo, started=None):
        """Write the indices of todo; stop issuing at the first refusal."""
        todo = list(todo)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while (todo and not self.refused) or self.pending:
            while todo and not self.refused and len(self.pending) < self.qd:
                self.issue(todo.pop(0))
            if time.monotonic() > deadline:
                raise TimeoutError("%d writes in flight" % len(self.pending))
            self.reap()
            if started and len(self.acked) >= self.count // 4:
                open(started, "w").close()
                started = None
        return todo


def wait_switch(path):
    deadline = time.monotonic() + SWITCH_WAIT_S
    while time.monotonic() < deadline:
        if os.path.exists(path):
            uri = open(path).read().strip()
            if uri:
                return uri
        time.sleep(0.01)
    return None


def main():
    uri_a, switch, started, count = sys.argv[1:5]
    count = int(count)
    qd = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    ha = nbd.NBD()
    ha.connect_uri(uri_a)
    w = Writer(ha, count, qd)
    left = w.run(range(count), started)
    if not w.refused:
        print("FAIL: A refused no write: the hand-over did not happen "
              "during the writes")
        return 1
    print("PASS: A refused writes after the hand-over (%d acknowledged "
          "before, %d refused)" % (len(w.acked), len(w.refused)))
    uri_b = wait_switch(switch)
    if not uri_b:
        print("FAIL: no destination tapdisk within %.0f s" % SWITCH_WAIT_S)
        return 1
    hb = nbd.NBD()
    hb.connect_uri(uri_b)
    w.h, redo = hb, sorted(w.refused)
    w.refused = []
    w.run(redo + left)
    if w.refused or len(w.acked) != count:
        print("FAIL: B refused %d writes; %d of %d acknowledged"
              % (len(w.refused), len(w.acked), count))
        return 1
    bad = [i for i in sorted(w.acked)
           if hb.pread(BLOCK, i * BLOCK) != block_bytes(i)]
    if bad:
        print("FAIL: %d acknowledged blocks differ on B, first %d"
              % (len(bad), bad[0]))
        return 1
    print("PASS: all %d acknowledged 4 KiB writes read back byte-exact "
          "from B" % count)
    try:
        ha.pwrite(block_bytes(0), 0)
        print("FAIL: A still took a write after the hand-over")
        return 1
    except nbd.Error as e:
        print("PASS: A refuses a write after the hand-over (%s)" % e)
    print("FIGURE: longest stall %.1f ms" % (w.longest * 1000))
    hb.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
