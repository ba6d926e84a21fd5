#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""rpc-limits.py - stripe-master's connection limits and slow RPC clients.

Usage: rpc-limits.py STRIPE_MASTER STRIPE_CTL WORKDIR

Starts `STRIPE_MASTER --foreground --max-connections 4 --idle-timeout 3`
on a free loopback port and checks (issue #10):
  1. a slow RPC client that sent half a record, and one that sends calls
     but never reads the replies, do not delay another client: its
     `stripe-ctl info` takes at most RATIO times the baseline plus SLACK_S;
  2. with 4 connections held open, a fifth client waits in the listen
     queue (back-pressure: its call times out, nothing is refused or lost)
     and is served as soon as one of the 4 goes away;
  3. idle connections are closed after --idle-timeout, which frees their
     places: a client waiting behind 4 idle ones is served without any of
     them closing on its own;
  4. the master still answers and exits 0 on SIGTERM.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

RATIO = 5.0
SLACK_S = 1.0
MAX_CONN = 4
IDLE_S = 3
PROG, VERS, PROC_SERVER_LIST = 0x20007700, 1, 5

failed = 0


def verdict(ok, what, detail=""):
    global failed
    failed += not ok
    print("%s: %s%s" % ("PASS" if ok else "FAIL", what,
                        " (%s)" % detail if detail else ""))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ctl(ctl_bin, addr, timeout_s=10, *args):
    """stripe-ctl info (or args); (ok, seconds)."""
    start = time.monotonic()
    r = subprocess.run([ctl_bin, "--master", addr, "--timeout", str(timeout_s),
                        "--retries", "0"] + list(args or ["info"]),
                       capture_output=True, timeout=60)
    return r.returncode == 0, time.monotonic() - start


def call_record(xid, proc):
    """A whole RPC call with no arguments, record-marked."""
    body = struct.pack(">IIIIII", xid, 0, 2, PROG, VERS, proc)
    body += struct.pack(">IIII", 0, 0, 0, 0)  # AUTH_NONE cred and verf
    return struct.pack(">I", 0x80000000 | len(body)) + body


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    master_bin, ctl_bin, work = sys.argv[1:]
    port = free_port()
    addr = "127.0.0.1:%d" % port
    log = os.path.join(work, "master.log")
    m = subprocess.Popen([master_bin, "--foreground", "--db",
                          os.path.join(work, "master.db"), "--listen", addr,
                          "--max-connections", str(MAX_CONN), "--idle-timeout",
                          str(IDLE_S), "--log-file", log])
    for _ in range(300):
        if ctl(ctl_bin, addr, 1)[0]:
            break
        time.sleep(0.1)
    else:
        sys.exit("stripe-master did not start: see %s" % log)
    base = sorted(ctl(ctl_bin, addr)[1] for _ in range(3))[1]
    print("  baseline: stripe-ctl info in %.2f s" % base)

    # 1. slow clients: half a record; calls whose replies are never read
    half = connect(port)
    half.sendall(struct.pack(">I", 0x80000000 | 1000) + b"x" * 10)
    deaf = connect(port)
    deaf.setblocking(False)
    sent = 0
    try:
        for i in range(20000):
            sent += deaf.send(call_record(i + 1, PROC_SERVER_LIST))
    except BlockingIOError:
        pass
    ok, took = ctl(ctl_bin, addr)
    bound = RATIO * base + SLACK_S
    verdict(ok and took <= bound, "half a record and a client that reads no "
            "reply: another client's call took %.2f s (bound %.2f s)"
            % (took, bound))
    half.close()
    deaf.close()
    time.sleep(0.5)  # the master notices both are gone

    # 2. the connection limit: back-pressure, then served
    held = [connect(port) for _ in range(MAX_CONN)]
    time.sleep(0.5)  # accepted by the master
    waiting = subprocess.Popen([ctl_bin, "--master", addr, "--timeout",
                                "20", "--retries", "0", "info"],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    queued = waiting.poll() is None
    start = time.monotonic()
    held.pop().close()
    rc = waiting.wait(timeout=30)
    took = time.monotonic() - start
    verdict(queued and rc == 0 and took <= bound,
            "%d connections held: a fifth client waits (%s), then is served "
            "%.2f s after one closed" % (MAX_CONN, "yes" if queued else "no",
                                         took))
    for s in held:
        s.close()
    time.sleep(0.5)

    # 3. idle connections are closed after --idle-timeout
    held = [connect(port) for _ in range(MAX_CONN)]
    time.sleep(0.5)
    ok, took = ctl(ctl_bin, addr, 20)
    closed = 0
    for s in held:
        s.settimeout(1)
        try:
            closed += s.recv(1) == b""
        except (socket.timeout, ConnectionResetError):
            pass
        s.close()
    verdict(ok and IDLE_S - 1 <= took <= IDLE_S * 4 and closed == MAX_CONN,
            "%d idle connections: closed after --idle-timeout %d s (%d of %d),"
            " the waiting client served after %.2f s"
            % (MAX_CONN, IDLE_S, closed, MAX_CONN, took))

    # 4. still healthy
    ok, took = ctl(ctl_bin, addr)
    verdict(ok, "the master answers afterwards")
    m.send_signal(signal.SIGTERM)
    rc = m.wait(timeout=60)
    verdict(rc == 0, "stripe-master exits 0 on SIGTERM", "exit %d" % rc)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
