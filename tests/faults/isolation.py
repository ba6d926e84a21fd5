#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""isolation.py - one stuck client must not delay another (issue #10).

Usage: isolation.py TAPDISK TD_FRONT WORKDIR

Starts `TAPDISK -a aio:WORKDIR/disk.img --nbd unix:A --shm S` and measures
a good NBD client on its own connection: PROBES reads and writes of 4 KiB
at queue depth 1, timed as a whole.  Baseline first (the median of three
probes on the idle disk), then the same probe while
  1. a slow NBD client on another connection sends 1 MiB reads and never
     reads a reply (tapdisk must stop reading it, not stall everyone);
  2. a td-front with a full ring (256 slots, 64 KiB I/Os) is stopped with
     SIGSTOP: it consumes no more responses;
  3. both at once.
Verdict per case: the probe finishes, every read returns what was written,
and it takes at most RATIO times the baseline plus SLACK_S seconds: generous
bounds, which only a client that waits on another (seconds, or forever)
breaks, not the noise of a shared machine.  tapdisk must still exit 0 on
SIGTERM at the end.
"""
import os
import random
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

PROBES = 400
RATIO = 5.0
SLACK_S = 1.0
BLOCK = 4096
DISK_BYTES = 64 << 20
CMD_WRITE = 1

failed = 0


def verdict(ok, what, detail=""):
    global failed
    failed += not ok
    print("%s: %s%s" % ("PASS" if ok else "FAIL", what,
                        " (%s)" % detail if detail else ""))


def wait_socket(path, proc, log):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit("exited at start (%d): see %s" % (proc.returncode, log))
        if os.path.exists(path):
            return
        time.sleep(0.05)
    sys.exit("%s did not appear: see %s" % (path, log))


def probe(path, rng):
    """PROBES writes and reads back of 4 KiB at QD 1; seconds taken."""
    c = nbd.Client(path, timeout=60)
    c.connect()
    start = time.monotonic()
    for i in range(PROBES // 2):
        off = rng.randrange(0, DISK_BYTES // BLOCK) * BLOCK
        data = rng.randbytes(BLOCK)
        c.req(CMD_WRITE, 1, off, BLOCK, payload=data)
        if c.reply(1):
            raise nbd.Misbehaved("probe write failed")
        if c.read_ok(off, BLOCK) != data:
            raise nbd.Misbehaved("probe read back other data at %d" % off)
    took = time.monotonic() - start
    c.close()
    return took


def slow_reader(path):
    """Send 1 MiB reads until tapdisk stops taking them; never read."""
    c = nbd.Client(path)
    c.connect()
    c.sock.setblocking(False)
    req = struct.pack(">IHHQQI", nbd.REQUEST_MAGIC, 0, nbd.CMD_READ, 1, 0,
                      1 << 20)
    sent, deadline = 0, time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            sent += c.sock.send(req * 16)
        except BlockingIOError:
            time.sleep(0.3)
            try:
                sent += c.sock.send(req)
            except BlockingIOError:
                break
    else:
        raise nbd.Misbehaved("tapdisk kept reading commands it cannot answer")
    return c, sent // len(req)


def stopped_front(td_front, shm, work):
    log = open(os.path.join(work, "td-front.log"), "w")
    p = subprocess.Popen([td_front, "--shm", shm, "--ring-order", "3",
                          "--rw", "read", "--pattern", "rand", "--bs", "64k",
                          "--qd", "256", "--time", "60"],
                         stdout=log, stderr=subprocess.STDOUT)
    time.sleep(1.0)
    if p.poll() is not None:
        raise nbd.Misbehaved("td-front exited early: see td-front.log")
    p.send_signal(signal.SIGSTOP)
    time.sleep(0.3)  # its last batch completes into a ring nobody reads
    return p


def end_front(p):
    p.send_signal(signal.SIGKILL)
    p.send_signal(signal.SIGCONT)
    p.wait()


def case(name, path, rng, base):
    try:
        took = probe(path, rng)
    except (nbd.Misbehaved, EOFError, OSError) as e:
        verdict(False, name, str(e))
        return
    bound = RATIO * base + SLACK_S
    verdict(took <= bound, "%s: the good client's probe took %.2f s "
            "(baseline %.2f s, bound %.2f s)" % (name, took, base, bound))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    tapdisk, td_front, work = sys.argv[1:]
    disk = os.path.join(work, "disk.img")
    sock = os.path.join(work, "nbd.sock")
    shm = os.path.join(work, "shm.sock")
    log = os.path.join(work, "tapdisk.log")
    with open(disk, "wb") as f:
        f.truncate(DISK_BYTES)
    td = subprocess.Popen([tapdisk, "--foreground", "-a", "aio:" + disk,
                           "--nbd", "unix:" + sock, "--shm", shm,
                           "--run-dir", work, "--log-level", "warn",
                           "--log-file", log])
    wait_socket(sock, td, log)
    wait_socket(shm, td, log)
    rng = random.Random(1)
    base = sorted(probe(sock, rng) for _ in range(3))[1]
    print("  baseline: %d probes in %.2f s" % (PROBES, base))

    slow, n = slow_reader(sock)
    print("  slow NBD client: tapdisk stopped reading it after %d reads" % n)
    case("a slow NBD client on another connection", sock, rng, base)
    slow.close()

    front = stopped_front(td_front, shm, work)
    case("a stopped shm frontend with a full ring", sock, rng, base)

    slow, n = slow_reader(sock)
    case("both at once", sock, rng, base)
    slow.close()
    end_front(front)

    case("after both left", sock, rng, base)
    td.send_signal(signal.SIGTERM)
    rc = td.wait(timeout=60)
    verdict(rc == 0, "tapdisk exits 0 on SIGTERM afterwards", "exit %d" % rc)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
