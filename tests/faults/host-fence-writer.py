#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""host-fence-writer.py - the writer of host A in host-fence.sh (issue #18).

    host-fence-writer.py URI REGION_BYTES OUT STARTED

Writes 4 KiB blocks over [0, REGION_BYTES) of the NBD export URI, round
after round, 8 at a time (QD 8), each block holding "A", its round and its
offset, until a whole round has failed, the server has gone, or 120 s have
passed.  Touches STARTED after the first round.  One line per completed
write goes to OUT, flushed as it goes (the test reads it while it runs):
"ack T OFFSET ROUND SUBMITTED" or "err T OFFSET ERROR SUBMITTED", T and
SUBMITTED (when the write was sent) in CLOCK_REALTIME seconds.
Exit 0; the test judges the lines.
"""
import sys
import time

import nbd

BS = 4096
QD = 8


def block(rnd, off):
    head = b"A round %08d offset %012d\n" % (rnd, off)
    return bytearray(head + b"a" * (BS - len(head)))


def one_round(h, rnd, region, log):
    offs = list(range(0, region, BS))
    inflight = {}
    oks = 0
    while offs or inflight:
        while offs and len(inflight) < QD:
            off = offs.pop(0)
            buf = nbd.Buffer.from_bytearray(block(rnd, off))
            sent = time.time()
            inflight[h.aio_pwrite(buf, off)] = (off, buf, sent)
        h.poll(-1)
        for cookie in list(inflight):
            off, _, sent = inflight[cookie]
            try:
                if not h.aio_command_completed(cookie):
                    continue
                log.write("ack %.6f %d %d %.6f\n" % (time.time(), off, rnd, sent))
                oks += 1
            except nbd.Error as e:
                log.write("err %.6f %d %s %.6f\n" % (time.time(), off,
                                                    e.errno or "EIO", sent))
            del inflight[cookie]
    return oks


def main():
    uri, region, out, started = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    h = nbd.NBD()
    h.connect_uri(uri)
    t_end = time.time() + 120
    rnd = 0
    with open(out, "w", buffering=1) as log:
        while time.time() < t_end:
            rnd += 1
            try:
                oks = one_round(h, rnd, region, log)
            except nbd.Error as e:  # the connection went
                log.write("gone %.6f 0 %s 0\n" % (time.time(), e.errno or "EIO"))
                break
            if rnd == 1:
                open(started, "w").close()
            if oks == 0:
                break


if __name__ == "__main__":
    main()
