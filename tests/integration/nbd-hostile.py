#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""nbd-hostile.py - a misbehaving NBD client, for nbd-hostile.sh.

Usage: nbd-hostile.py SOCKET SCENARIO [COUNT]

SOCKET is a unix socket path, or tcp:HOST:PORT for Client (the
scenarios below use unix sockets; nbd-admission.py uses both).

Each scenario misbehaves in one way against the NBD server listening on
the unix socket SOCKET and checks that the server answers as the protocol
says (an error reply, or closing this one connection).  Exit status 0
when the server behaved, 1 (with a message) when not.  "storm" runs COUNT
connections cycling through the quick scenarios.

The constants are the NBD protocol's (NetworkBlockDevice doc/proto.md).
"""
import os
import random
import socket
import struct
import subprocess
import sys
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REP_MAGIC = 0x0003E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698

OPT_EXPORT_NAME, OPT_ABORT, OPT_LIST, OPT_INFO, OPT_GO = 1, 2, 3, 6, 7
REP_ACK, REP_INFO = 1, 3
REP_ERR_UNSUP, REP_ERR_INVALID, REP_ERR_TOO_BIG = 0x80000001, 0x80000003, 0x80000009
INFO_EXPORT, INFO_BLOCK_SIZE = 0, 3
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2
EINVAL, ENOSPC = 22, 28

MAX_REQUEST = 32 << 20  # tapdisk's default maximum block size


class Misbehaved(Exception):
    """The server did not answer as the protocol says."""


class Client:
    def __init__(self, path, timeout=10.0):
        self.path = path
        if path.startswith("tcp:"):
            host, port = path[4:].rsplit(":", 1)
            self.sock = socket.create_connection((host, int(port)), timeout)
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(path)
        self.size = None

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError("server closed after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def greeting(self, flags=3):
        magic, opts, hflags = struct.unpack(">QQH", self.recv_exact(18))
        if magic != NBDMAGIC or opts != IHAVEOPT or hflags != 3:
            raise Misbehaved("bad greeting %x %x %x" % (magic, opts, hflags))
        if flags is not None:
            self.send(struct.pack(">I", flags))

    def opt(self, option, data=b"", length=None):
        n = len(data) if length is None else length
        self.send(struct.pack(">QII", IHAVEOPT, option, n) + data)

    def opt_reply(self):
        magic, option, rtype, n = struct.unpack(">QIII", self.recv_exact(20))
        if magic != REP_MAGIC:
            raise Misbehaved("bad option reply magic %x" % magic)
        return option, rtype, self.recv_exact(n)

    def go(self, name=b""):
        self.opt(OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">HH", 1, INFO_BLOCK_SIZE))
        while True:
            option, rtype, data = self.opt_reply()
            if rtype == REP_ACK:
                break
            if rtype != REP_INFO:
                raise Misbehaved("GO refused: 0x%x %r" % (rtype, data))
            if struct.unpack(">H", data[:2])[0] == INFO_EXPORT:
                self.size = struct.unpack(">Q", data[2:10])[0]
        if self.size is None:
            raise Misbehaved("GO without NBD_INFO_EXPORT")

    def connect(self):
        self.greeting()
        self.go()

    def req(self, cmd, handle, offset, length, flags=0, payload=b""):
        self.send(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, handle, offset, length) + payload)

    def reply(self, handle=None):
        magic, err, h = struct.unpack(">IIQ", self.recv_exact(16))
        if magic != SIMPLE_REPLY_MAGIC:
            raise Misbehaved("bad reply magic %x" % magic)
        if handle is not None and h != handle:
            raise Misbehaved("reply for handle %d, expected %d" % (h, handle))
        return err

    def expect_error(self, cmd, offset, length, want, payload=b"", flags=0):
        self.req(cmd, 7, offset, length, flags, payload)
        err = self.reply(7)
        if err != want:
            raise Misbehaved("command %d at %d+%d: error %d, want %d" % (cmd, offset, length, err, want))

    def read_ok(self, offset=0, length=4096):
        self.req(CMD_READ, 8, offset, length)
        err = self.reply(8)
        if err:
            raise Misbehaved("a good READ failed with %d" % err)
        return self.recv_exact(length)

    def expect_eof(self, timeout=10.0):
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 16)
        except ConnectionResetError:
            return
        except socket.timeout:
            raise Misbehaved("the server did not close the connection")
        if data:
            raise Misbehaved("unexpected %d bytes instead of a close" % len(data))


def send_quietly(c, data):
    """Send what the server takes; it may close on us halfway."""
    try:
        c.send(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


# --- scenarios -------------------------------------------------------------


def garbage(path, rng):
    c = Client(path)
    c.recv_exact(18)
    send_quietly(c, rng.randbytes(4096))
    c.expect_eof()


def truncated(path, rng):
    c = Client(path)
    c.greeting(flags=None)
    c.send(b"\0\0")
    c.sock.shutdown(socket.SHUT_WR)
    c.expect_eof()


def truncated_option(path, rng):
    c = Client(path)
    c.greeting()
    c.opt(OPT_GO, b"\0" * 10, length=100)
    c.sock.shutdown(socket.SHUT_WR)
    c.expect_eof()


def bad_magic(path, rng):
    c = Client(path)
    c.greeting()
    c.send(struct.pack(">QII", IHAVEOPT ^ 1, OPT_GO, 0))
    c.expect_eof()


def bad_flags(path, rng):
    c = Client(path)
    c.greeting(flags=0xFFFFFFFF)
    c.expect_eof()


def bad_option_lengths(path, rng):
    c = Client(path)
    c.greeting()
    # Longer than the server buffers: skipped, then refused.
    c.opt(OPT_GO, rng.randbytes(100 << 10))
    if c.opt_reply()[1] != REP_ERR_TOO_BIG:
        raise Misbehaved("oversized GO not refused with TOO_BIG")
    # A name length past the end of the option.
    c.opt(OPT_GO, struct.pack(">I", 1000) + b"ab" + struct.pack(">H", 0))
    if c.opt_reply()[1] != REP_ERR_INVALID:
        raise Misbehaved("bad GO name length not refused")
    # An unknown option with 1 MiB of data.
    c.opt(0x4242, rng.randbytes(1 << 20))
    if c.opt_reply()[1] != REP_ERR_UNSUP:
        raise Misbehaved("unknown option not refused")
    # Still negotiating: a good GO works and so does I/O.
    c.go()
    c.read_ok()
    c.req(CMD_DISC, 0, 0, 0)
    c.expect_eof()


def huge_option(path, rng):
    """An option announcing 4 GiB, then a hang-up halfway through."""
    c = Client(path)
    c.greeting()
    c.opt(0x77, rng.randbytes(256 << 10), length=0xFFFFFFFF)
    c.close()


def huge_export_name(path, rng):
    c = Client(path)
    c.greeting()
    c.opt(OPT_EXPORT_NAME, b"x" * 10000)
    c.expect_eof()


def oversized_write(path, rng):
    """WRITE over the maximum: its payload is read and dropped, EINVAL."""
    c = Client(path)
    c.connect()
    n = MAX_REQUEST + 4096
    c.req(CMD_WRITE, 7, 0, n)
    chunk = bytes(1 << 20)
    for _ in range(n // len(chunk)):
        c.send(chunk)
    c.send(bytes(n % len(chunk)))
    if c.reply(7) != EINVAL:
        raise Misbehaved("oversized WRITE not refused with EINVAL")
    c.read_ok()
    c.expect_error(CMD_READ, 0, MAX_REQUEST + 512, EINVAL)
    c.read_ok()


def endless_write(path, rng):
    """A 4 GiB WRITE, abandoned after 1 MiB."""
    c = Client(path)
    c.connect()
    c.req(CMD_WRITE, 7, 0, 0xFFFFFE00)
    send_quietly(c, bytes(1 << 20))
    c.close()


def out_of_range(path, rng):
    c = Client(path)
    c.connect()
    c.expect_error(CMD_READ, c.size, 4096, EINVAL)
    c.expect_error(CMD_READ, c.size - 512, 1024, EINVAL)
    c.expect_error(CMD_READ, (1 << 64) - 512, 512, EINVAL)
    c.expect_error(CMD_WRITE, c.size, 512, ENOSPC, bytes(512))
    c.expect_error(CMD_WRITE, 100, 512, EINVAL, bytes(512))
    c.expect_error(6, c.size, 4096, ENOSPC)  # WRITE_ZEROES
    c.expect_error(4, (1 << 64) - 4096, 4096, ENOSPC)  # TRIM
    c.expect_error(CMD_READ, 0, 0, EINVAL)
    c.read_ok()


def unknown_command(path, rng):
    c = Client(path)
    c.connect()
    for cmd in (5, 7, 8, 99, 0xFFFF):
        c.expect_error(cmd, 0, 512, EINVAL)
    c.expect_error(CMD_READ, 0, 512, EINVAL, flags=0x8000)
    c.read_ok()


def bad_request_magic(path, rng):
    c = Client(path)
    c.connect()
    c.send(rng.randbytes(28))
    c.expect_eof()


def after_disc(path, rng):
    c = Client(path)
    c.connect()
    c.req(CMD_DISC, 0, 0, 0)
    send_quietly(c, struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, 1, 0, 512))
    c.expect_eof()


def disconnect_inflight(path, rng):
    """Many commands in flight, then gone without reading a reply."""
    c = Client(path)
    c.connect()
    for i in range(16):
        c.req(CMD_READ, i, (i % 8) << 20, 1 << 20)
        c.req(CMD_WRITE, 100 + i, (8 + i % 8) << 20, 65536, payload=rng.randbytes(65536))
    c.close()


def check_good_client(uri):
    """A well-behaved client, from outside, while we misbehave."""
    r = subprocess.run(["qemu-io", "-f", "raw", "-c", "read -P 0x5a 0 64k", uri],
                       capture_output=True, timeout=20)
    if r.returncode or b"read 65536/65536" not in r.stdout:
        raise Misbehaved("good client not served: %r" % (r.stdout + r.stderr))


def slow_reader(path, rng):
    """Reads by the hundred, replies never read: the server must push back
    (stop reading us) and keep serving others."""
    c = Client(path)
    c.connect()
    c.sock.setblocking(False)
    sent = 0
    req = struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, 1, 0, 1 << 20)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            sent += c.sock.send(req * 64)
        except BlockingIOError:
            time.sleep(0.2)
            try:
                sent += c.sock.send(req)
            except BlockingIOError:
                break
    if time.time() >= deadline:
        raise Misbehaved("the server kept reading commands it could not answer")
    check_good_client("nbd+unix:///?socket=" + path)
    print("  slow reader: stopped after %d commands (%d MiB of replies owed)"
          % (sent // len(req), sent // len(req)))
    c.close()


def stall(path, rng):
    """Connect and say nothing: closed by the handshake timeout."""
    c = Client(path, timeout=20)
    c.recv_exact(18)
    check_good_client("nbd+unix:///?socket=" + path)
    start = time.time()
    c.expect_eof(timeout=20)
    print("  stalled client closed after %.1f s" % (time.time() - start))


QUICK = [garbage, truncated, truncated_option, bad_magic, bad_flags, huge_option,
         huge_export_name, endless_write, out_of_range, unknown_command,
         bad_request_magic, after_disc, disconnect_inflight]
SCENARIOS = {f.__name__.replace("_", "-"): f for f in QUICK + [
    bad_option_lengths, oversized_write, slow_reader, stall]}


def storm(path, count, rng):
    for i in range(count):
        QUICK[i % len(QUICK)](path, rng)


def main():
    if len(sys.argv) < 3 or (sys.argv[2] not in SCENARIOS and sys.argv[2] != "storm"):
        sys.exit("usage: nbd-hostile.py SOCKET SCENARIO [COUNT]\nscenarios: %s, storm"
                 % ", ".join(sorted(SCENARIOS)))
    path, name = sys.argv[1], sys.argv[2]
    rng = random.Random(int(os.environ.get("SEED", "1")))
    try:
        if name == "storm":
            storm(path, int(sys.argv[3]) if len(sys.argv) > 3 else 1000, rng)
        else:
            SCENARIOS[name](path, rng)
    except (Misbehaved, EOFError, OSError, subprocess.TimeoutExpired) as e:
        print("  %s: %s" % (name, e))
        sys.exit(1)


if __name__ == "__main__":
    main()
