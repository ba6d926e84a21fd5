#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""master-hostile.py - a misbehaving Sun RPC client, for master.sh.

Usage: master-hostile.py PORT SCENARIO [COUNT | VDISK]

Each scenario misbehaves in one way against stripe-master on 127.0.0.1:PORT
and checks that the master answers as RFC 5531 says (an error reply) or
closes that one connection.  Exit status 0 when the master behaved, 1 with
a message when not.  "storm" sends COUNT undecodable calls, cycling through
the kinds of bad arguments, over a few connections.  "replica-state" sends
well-formed MS_REPLICA_STATE calls with out-of-range values about the
existing disk VDISK (2 columns x 2 extents x 2 replicas, replica 0 of
extent 0 of column 0 ok), expects the master's refusals, then marks that
replica stale and ok again.  "lease" sends bad lease calls (issue #18)
about VDISK, which host "hostA" holds: an unknown disk, malformed host ids,
stale epochs, another host's acquire, and host ids over their bound; it
expects the master's own refusals (or GARBAGE_ARGS for what cannot be
decoded), none of which changes anything.

Constants are RFC 5531's and master/stripe.x's.
"""
import socket
import struct
import sys
import time

PROG, VERS = 0x20007700, 1
NULL, INFO, SERVER_ADD, VDISK_ALLOC, VDISK_LOOKUP, EXTENT_LIST = 0, 1, 2, 6, 7, 10
REPLICA_STATE = 11
LEASE_ACQUIRE, LEASE_RELEASE, LEASE_HANDOVER, LEASE_TAKEOVER, LEASE_SHOW = range(12, 17)
MS_OK, MS_EINVAL, MS_ENOENT = 0, 1, 2
MS_EHELD, MS_ESTALE = 8, 9
HOST_ID_MAX = 63
CALL, REPLY = 0, 1
MSG_ACCEPTED, MSG_DENIED = 0, 1
SUCCESS, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS = 0, 1, 2, 3, 4
AUTH_ERROR = 1
AUTH_NONE, AUTH_DES = 0, 3
LAST = 0x80000000
VDISK_ID_MAX, MAX_FILTER, MAX_RECORD = 63, 64, 64 << 10


class Misbehaved(Exception):
    """The master did not answer as the protocol says."""


def u32(v):
    return struct.pack(">I", v)


def xdr_string(s, claimed=None):
    data = s.encode()
    pad = (4 - len(data) % 4) % 4
    return u32(len(data) if claimed is None else claimed) + data + b"\0" * pad


def call_body(proc, args=b"", xid=0x1234, rpcvers=2, prog=PROG, vers=VERS,
              cred=(AUTH_NONE, b"")):
    flavor, body = cred
    return (u32(xid) + u32(CALL) + u32(rpcvers) + u32(prog) + u32(vers) +
            u32(proc) + u32(flavor) + u32(len(body)) + body +
            u32(AUTH_NONE) + u32(0) + args)


def record(body):
    return u32(LAST | len(body)) + body


class Conn:
    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout)

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def reply(self, results=False):
        """(xid, accepted?, stat) of the next reply record, and with
        results the bytes after the accept status (an ms_reply)."""
        body = b""
        while True:
            mark = struct.unpack(">I", self.recv_exact(4))[0]
            body += self.recv_exact(mark & ~LAST)
            if mark & LAST:
                break
        xid, direction, rstat = struct.unpack(">III", body[:12])
        if direction != REPLY:
            raise Misbehaved("not a reply")
        if rstat == MSG_DENIED:
            return xid, False, struct.unpack(">I", body[12:16])[0]
        verf_len = struct.unpack(">I", body[16:20])[0]
        pos = 20 + verf_len + (4 - verf_len % 4) % 4
        stat = struct.unpack(">I", body[pos:pos + 4])[0]
        if results:
            return xid, True, stat, body[pos + 4:]
        return xid, True, stat

    def closed(self):
        """True when the master closed this connection."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:  # closed with our bytes unread
            return True
        except socket.timeout:
            return False


def expect(conn, body, accepted, stat, what):
    conn.send(record(body))
    _, acc, st = conn.reply()
    if (acc, st) != (accepted, stat):
        raise Misbehaved("%s: got accepted=%s stat=%d" % (what, acc, st))


def healthy(port):
    c = Conn(port)
    expect(c, call_body(NULL), True, SUCCESS, "NULL call")
    c.close()


def alloc_args(vdisk_id, claimed=None):
    return xdr_string(vdisk_id, claimed) + u32(1) + u32(1) + u32(1) + u32(0) + u32(1 << 20)


def extent_list_args(nr_ids, claimed=None, vdisk=""):
    ids = b"".join(u32(i + 1) for i in range(nr_ids))
    return (u32(nr_ids if claimed is None else claimed) + ids +
            xdr_string(vdisk) + u32(0) + u32(0) + u32(0) + u32(0) + u32(10))


def replica_args(vdisk, column, extent, replica, stale, claimed=None):
    return (xdr_string(vdisk, claimed) + u32(column) + u32(extent) +
            u32(replica) + u32(stale))


def bad_args():
    """Undecodable arguments of every kind."""
    return [
        (REPLICA_STATE, replica_args("z" * (VDISK_ID_MAX + 1), 0, 0, 0, 1)),  # id over its bound
        (REPLICA_STATE, replica_args("d1", 0, 0, 0, 1, claimed=0x7fffffff)),  # id claims 2 GiB
        (REPLICA_STATE, replica_args("d1", 0, 0, 0, 1)[:-4]),                # no stale flag
        (REPLICA_STATE, b""),                                                # no arguments
        (VDISK_ALLOC, alloc_args("x" * (VDISK_ID_MAX + 1))),      # string over its bound
        (VDISK_ALLOC, alloc_args("abcd", claimed=1000)),          # string claims more than sent
        (VDISK_ALLOC, alloc_args("d1")[:6]),                      # arguments cut short
        (EXTENT_LIST, extent_list_args(MAX_FILTER + 1)),          # array over its bound
        (EXTENT_LIST, extent_list_args(2, claimed=0x7fffffff)),   # array claims 2^31 entries
        (EXTENT_LIST, extent_list_args(3, vdisk="y" * 40)[:-8]),  # decoded half-way, then short
        (SERVER_ADD, xdr_string("a") + xdr_string("b", claimed=0xffffffff)),
    ]


def scenario_garbage(port):
    c = Conn(port)
    c.send(b"\0\0\0\0" + b"GET / HTTP/1.0\r\n\r\n")  # a zero-length fragment
    if not c.closed():
        raise Misbehaved("a zero-length fragment did not close the connection")


def scenario_huge_record(port):
    c = Conn(port)
    c.send(u32(LAST | 0x7fffffff) + b"x" * 1000)
    if not c.closed():
        raise Misbehaved("a 2 GiB record header did not close the connection")


def scenario_over_maxrec(port):
    c = Conn(port)
    body = call_body(NULL) + b"\0" * MAX_RECORD
    try:
        c.send(record(body))
    except (BrokenPipeError, ConnectionResetError):
        return
    if not c.closed():
        raise Misbehaved("a record above the limit did not close the connection")


def scenario_truncated(port):
    c = Conn(port)
    c.send(record(call_body(INFO))[:10])
    c.close()


def scenario_half_record(port):
    """One client stalls half-way; another is served at once."""
    stall = Conn(port)
    full = record(call_body(INFO))
    stall.send(full[:len(full) // 2])
    t0 = time.monotonic()
    healthy(port)
    if time.monotonic() - t0 > 1.0:
        raise Misbehaved("a half record stalled another client")
    stall.send(full[len(full) // 2:])
    _, acc, st = stall.reply()
    if (acc, st) != (True, SUCCESS):
        raise Misbehaved("the completed record was not answered")
    stall.close()


def scenario_bad_headers(port):
    c = Conn(port)
    # libtirpc cannot parse a call of another RPC version: it drops the
    # connection rather than answer RPC_MISMATCH.
    c.send(record(call_body(NULL, rpcvers=3)))
    if not c.closed():
        raise Misbehaved("rpc version 3 was not refused")
    c.close()
    c = Conn(port)
    expect(c, call_body(NULL, prog=0x20007701), True, PROG_UNAVAIL, "other program")
    expect(c, call_body(NULL, vers=2), True, PROG_MISMATCH, "version 2")
    expect(c, call_body(99), True, PROC_UNAVAIL, "procedure 99")
    expect(c, call_body(NULL, cred=(AUTH_DES, b"\1\2\3\4")), False, AUTH_ERROR,
           "AUTH_DES garbage")
    c.close()


def scenario_bad_args(port):
    c = Conn(port)
    for proc, args in bad_args():
        expect(c, call_body(proc, args), True, GARBAGE_ARGS, "proc %d bad args" % proc)
    c.close()


def scenario_pipelined(port):
    """Ten calls in one send, answered at once (NULL) or after the round's
    commit (INFO): ten answers, in order, each with its own xid."""
    c = Conn(port)
    c.send(b"".join(record(call_body(NULL if i % 2 else INFO, xid=100 + i))
                    for i in range(10)))
    for i in range(10):
        xid, acc, st = c.reply()
        if (xid, acc, st) != (100 + i, True, SUCCESS):
            raise Misbehaved("pipelined call %d: xid %d stat %d" % (i, xid, st))
    c.close()


def ms_reply(results):
    """(status, message, changed) of an encoded ms_reply."""
    status, length = struct.unpack(">II", results[:8])
    message = results[8:8 + length].decode()
    pos = 8 + length + (4 - length % 4) % 4
    return status, message, struct.unpack(">I", results[pos:pos + 4])[0]


def replica_call(conn, args, what):
    conn.send(record(call_body(REPLICA_STATE, args)))
    _, acc, st, results = conn.reply(results=True)
    if (acc, st) != (True, SUCCESS):
        raise Misbehaved("%s: accepted=%s stat=%d" % (what, acc, st))
    return ms_reply(results)


def scenario_replica_state(port, vdisk):
    """Out-of-range values are refused with the master's own errors and
    change nothing; a real change is made once and then is a no-op."""
    c = Conn(port)
    refused = [
        (("no-such-disk", 0, 0, 0, 1), MS_ENOENT),
        (("bad/id", 0, 0, 0, 1), MS_EINVAL),
        (("", 0, 0, 0, 1), MS_EINVAL),
        ((vdisk, 2, 0, 0, 1), MS_EINVAL),
        ((vdisk, 0, 2, 0, 1), MS_EINVAL),
        ((vdisk, 0, 0, 2, 1), MS_EINVAL),
        ((vdisk, 0xffffffff, 0xffffffff, 0xffffffff, 1), MS_EINVAL),
        ((vdisk, 0x80000000, 0, 0, 0), MS_EINVAL),
    ]
    for args, want in refused:
        status, message, changed = replica_call(c, replica_args(*args), str(args))
        if status != want or changed or not message:
            raise Misbehaved("%s: status %d changed %d message %r" %
                             (args, status, changed, message))
    for stale, want_changed in ((1, 1), (1, 0), (0, 1), (0, 0)):
        status, message, changed = replica_call(
            c, replica_args(vdisk, 0, 0, 0, stale), "mark %d" % stale)
        if (status, changed) != (MS_OK, want_changed):
            raise Misbehaved("mark %d: status %d changed %d: %s" %
                             (stale, status, changed, message))
    c.close()


def lease_args(vdisk, host, epoch=0, to="", fence=0, claimed=None):
    return (xdr_string(vdisk) + xdr_string(host, claimed) +
            struct.pack(">Q", epoch) + xdr_string(to) + u32(fence))


def scenario_lease(port, vdisk):
    """Bad lease calls are refused with the master's own errors."""
    c = Conn(port)
    refused = [
        (LEASE_ACQUIRE, lease_args("no-such-disk", "hostA"), MS_ENOENT),
        (LEASE_RELEASE, lease_args("no-such-disk", "hostA", 1), MS_ENOENT),
        (LEASE_TAKEOVER, lease_args("no-such-disk", "hostA", 1), MS_ENOENT),
        (LEASE_SHOW, xdr_string("no-such-disk"), MS_ENOENT),
        (LEASE_ACQUIRE, lease_args("bad/id", "hostA"), MS_EINVAL),
        (LEASE_ACQUIRE, lease_args(vdisk, ""), MS_EINVAL),
        (LEASE_ACQUIRE, lease_args(vdisk, "a b"), MS_EINVAL),
        (LEASE_ACQUIRE, lease_args(vdisk, "h\u00e9"), MS_EINVAL),
        (LEASE_HANDOVER, lease_args(vdisk, "hostA", 3, "x/y"), MS_EINVAL),
        (LEASE_HANDOVER, lease_args(vdisk, "hostA", 3, "hostA"), MS_EINVAL),
        (LEASE_ACQUIRE, lease_args(vdisk, "intruder"), MS_EHELD),
        (LEASE_RELEASE, lease_args(vdisk, "intruder", 3), MS_EHELD),
        (LEASE_RELEASE, lease_args(vdisk, "hostA", 99), MS_ESTALE),
        (LEASE_RELEASE, lease_args(vdisk, "hostA", 2**64 - 1), MS_ESTALE),
        (LEASE_HANDOVER, lease_args(vdisk, "hostA", 0, "hostB"), MS_ESTALE),
        (LEASE_TAKEOVER, lease_args(vdisk, "intruder", 0, fence=1), MS_ESTALE),
        (LEASE_TAKEOVER, lease_args(vdisk, "intruder", 2**64 - 1), MS_ESTALE),
    ]
    for proc, args, want in refused:
        c.send(record(call_body(proc, args)))
        _, acc, st, results = c.reply(results=True)
        if (acc, st) != (True, SUCCESS):
            raise Misbehaved("lease %d: accepted=%s stat=%d" % (proc, acc, st))
        status, message, changed = ms_reply(results)
        if status != want or changed or not message:
            raise Misbehaved("lease %d %r: status %d changed %d message %r" %
                             (proc, args[:40], status, changed, message))
    undecodable = [
        (LEASE_ACQUIRE, lease_args(vdisk, "h" * (HOST_ID_MAX + 1))),
        (LEASE_ACQUIRE, lease_args(vdisk, "h", claimed=0x7fffffff)),
        (LEASE_HANDOVER, lease_args(vdisk, "hostA", 3, "t" * 4096)),
        (LEASE_TAKEOVER, lease_args(vdisk, "hostA", 3)[:-6]),
        (LEASE_SHOW, xdr_string("v" * (VDISK_ID_MAX + 1))),
    ]
    for proc, args in undecodable:
        expect(c, call_body(proc, args), True, GARBAGE_ARGS, "lease %d" % proc)
    # still held by hostA at epoch 3, as before
    c.send(record(call_body(LEASE_ACQUIRE, lease_args(vdisk, "hostA"))))
    _, acc, st, results = c.reply(results=True)
    status, message, changed = ms_reply(results)
    if (acc, st, status, changed) != (True, SUCCESS, MS_OK, 0):
        raise Misbehaved("lease of %s changed: %d %d %s" % (vdisk, status, changed, message))
    c.close()


def scenario_storm(port, count):
    kinds = bad_args()
    per_conn = 500
    sent = 0
    while sent < count:
        c = Conn(port)
        for _ in range(min(per_conn, count - sent)):
            proc, args = kinds[sent % len(kinds)]
            expect(c, call_body(proc, args, xid=sent), True, GARBAGE_ARGS, "storm")
            sent += 1
        c.close()


SCENARIOS = {
    "garbage": scenario_garbage,
    "huge-record": scenario_huge_record,
    "over-maxrec": scenario_over_maxrec,
    "truncated": scenario_truncated,
    "half-record": scenario_half_record,
    "bad-headers": scenario_bad_headers,
    "bad-args": scenario_bad_args,
    "pipelined": scenario_pipelined,
}


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    port, name = int(sys.argv[1]), sys.argv[2]
    try:
        if name == "storm":
            scenario_storm(port, int(sys.argv[3]))
        elif name == "replica-state":
            scenario_replica_state(port, sys.argv[3])
        elif name == "lease":
            scenario_lease(port, sys.argv[3])
        else:
            SCENARIOS[name](port)
        healthy(port)
    except (Misbehaved, EOFError, OSError) as e:
        print("%s: %s" % (name, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
