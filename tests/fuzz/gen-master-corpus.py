#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""gen-master-corpus.py [DIR] - write the seed corpus of fuzz_master.

Each seed is an input in the layout fuzz_master.c documents: a mode byte,
then records (procedure, flags, length, XDR arguments), or with mode 0x80
an ms_reply as a master sends it.  The XDR follows master/stripe.x.
"""
import os
import struct
import sys

MiB = 1 << 20
FOREIGN, END_ROUND = 0x01, 0x02
(NULL, INFO, SERVER_ADD, SERVER_DRAIN, SERVER_REMOVE, SERVER_LIST,
 VDISK_ALLOC, VDISK_LOOKUP, VDISK_RELEASE, VDISK_LIST, EXTENT_LIST,
 REPLICA_STATE, LEASE_ACQUIRE, LEASE_RELEASE, LEASE_HANDOVER, LEASE_TAKEOVER,
 LEASE_SHOW, LEASE_FENCED, HOST_LIST, HOST_READMIT, SERVER_LABEL,
 SERVER_FAIL, SERVER_STATUS, MOVE_BEGIN, MOVE_COMMIT, MOVE_ABORT,
 MOVE_LIST, SERVER_CHAP_SET, SERVER_CHAP_GET, VDISK_GROW, VDISK_SNAPSHOT,
 VDISK_SNAPSHOT_DONE) = range(32)
UNKNOWN = 32  # taken modulo the procedures found (32, then the unknown one)
BODY_LEASE, BODY_HOSTS, BODY_MOVE, BODY_SERVER_STATS = 8, 9, 10, 12
BODY_CHAP = 13
EVACUATE, FAIL = 0, 1


def u32(v):
    return struct.pack(">I", v)


def u64(v):
    return struct.pack(">Q", v)


def string(s):
    b = s.encode()
    return u32(len(b)) + b + b"\0" * (-len(b) % 4)


def server_add(n, size=16 * MiB, block=512, host="", rack="", site=""):
    return (string(f"10.0.0.{n}") + string(f"10.0.0.{n}:3260") +
            string(f"iqn.2024-01.t:s{n}") + u32(1) + u64(size) + u32(block) +
            string(host) + string(rack) + string(site))


def server_label(n, host=None, rack=None, site=None):
    """MS_SERVER_LABEL's arguments: None leaves that label."""
    out = string(f"iqn.2024-01.t:s{n}") + u32(1)
    for label in (host, rack, site):
        out += u32(label is not None) + string(label or "")
    return out


def server_chap(n, user, secret):
    """MS_SERVER_CHAP_SET's arguments (issue #20)."""
    return (string(f"iqn.2024-01.t:s{n}") + u32(1) + string(user) +
            string(secret))


def server_key(n):
    return string(f"iqn.2024-01.t:s{n}") + u32(1)


def alloc(vid, columns=2, per_column=2, replicas=2, extent=MiB):
    return (string(vid) + u32(columns) + u32(per_column) + u32(replicas) +
            u64(extent))


def grow(vid, per_column):
    return string(vid) + u32(per_column)


def vdisk_list(after="", limit=10):
    return string(after) + u32(limit)


def extent_list(ids=(), vdisk="", allocated=0, cursor=None, limit=100):
    after = cursor or (0, 0)
    return (u32(len(ids)) + b"".join(u32(i) for i in ids) + string(vdisk) +
            u32(allocated) + u32(cursor is not None) + u32(after[0]) +
            u32(after[1]) + u32(limit))


def replica_state(vid, c, x, r, stale):
    return string(vid) + u32(c) + u32(x) + u32(r) + u32(stale)


def move(vid, c, x, r, n, offset=0, reason=EVACUATE):
    """MS_MOVE_*'s arguments: server n (begin: the old one; commit and
    abort: the new one at offset)."""
    return (string(vid) + u32(c) + u32(x) + u32(r) +
            string("iqn.2024-01.t:s%d" % n) + u32(1) + u64(offset) +
            u32(reason))


def move_list(vid="", n=None, cursor=None, limit=10):
    out = string(vid) + u32(n is not None)
    out += string("iqn.2024-01.t:s%d" % (n or 0)) + u32(1)
    out += u32(cursor is not None)
    c = cursor or ("", 0, 0, 0)
    return out + string(c[0]) + u32(c[1]) + u32(c[2]) + u32(c[3]) + u32(limit)


def lease(vid, host, epoch=0, to="", fence=0):
    return string(vid) + string(host) + u64(epoch) + string(to) + u32(fence)


def rec(proc, args=b"", flags=0):
    return bytes([proc, flags]) + struct.pack(">H", len(args)) + args


def calls(*recs):
    return b"\0" + b"".join(recs)


def lifecycle(flags):
    return calls(
        rec(SERVER_ADD, server_add(1), flags),
        rec(SERVER_ADD, server_add(2), flags),
        rec(SERVER_ADD, server_add(3, 8 * MiB, 4096), flags),
        rec(VDISK_ALLOC, alloc("d1"), flags),
        rec(VDISK_ALLOC, alloc("d1"), flags),  # a retry: same extents
        rec(VDISK_LOOKUP, string("d1"), flags),
        rec(VDISK_GROW, grow("d1", 3), flags),
        rec(VDISK_GROW, grow("d1", 3), flags),  # a retry: same extents
        rec(VDISK_GROW, grow("d1", 1), flags),  # smaller: the disk as it is
        rec(VDISK_GROW, grow("d9", 3), flags),  # no such disk
        rec(VDISK_LIST, vdisk_list(), flags),
        rec(EXTENT_LIST, extent_list((1, 3), "d1", 1), flags),
        rec(REPLICA_STATE, replica_state("d1", 1, 1, 1, 1), flags),
        rec(REPLICA_STATE, replica_state("d1", 1, 1, 1, 0), flags),
        rec(SERVER_DRAIN, server_key(2), flags),
        rec(SERVER_REMOVE, server_key(2), flags),  # busy
        rec(VDISK_RELEASE, string("d1"), flags),
        rec(SERVER_REMOVE, server_key(2), flags),
        rec(SERVER_LIST, b"", flags),
        rec(INFO, b"", flags))


def leases(flags):
    return calls(
        rec(SERVER_ADD, server_add(1), flags),
        rec(VDISK_ALLOC, alloc("d1"), flags),
        rec(LEASE_ACQUIRE, lease("d1", "hostA"), flags),
        rec(LEASE_ACQUIRE, lease("d1", "hostA"), flags),  # a retry
        rec(LEASE_ACQUIRE, lease("d1", "hostB"), flags),  # held
        rec(LEASE_HANDOVER, lease("d1", "hostA", 1, "hostB"), flags),
        rec(LEASE_HANDOVER, lease("d1", "hostA", 1, "hostB"), flags),
        rec(LEASE_RELEASE, lease("d1", "hostB", 1), flags),  # stale
        rec(LEASE_TAKEOVER, lease("d1", "hostA", 2, "", 1), flags),
        rec(LEASE_RELEASE, lease("d1", "hostA", 3), flags),
        rec(LEASE_SHOW, string("d1"), flags),
        rec(LEASE_ACQUIRE, lease("d1", "bad id"), flags),
        rec(LEASE_ACQUIRE, lease("nope", "hostA"), flags),
        rec(VDISK_RELEASE, string("d1"), flags),
        rec(LEASE_SHOW, string("d1"), flags))


def fencing(flags):
    """A fenced takeover, the fenced host refused, the confirmation, the
    re-admission (issue #18)."""
    return calls(
        rec(SERVER_ADD, server_add(1), flags),
        rec(VDISK_ALLOC, alloc("d1", 1, 1, 1), flags),
        rec(VDISK_ALLOC, alloc("d2", 1, 1, 1), flags),
        rec(LEASE_ACQUIRE, lease("d1", "hostA"), flags),
        rec(LEASE_ACQUIRE, lease("d2", "hostA"), flags),
        rec(LEASE_TAKEOVER, lease("d1", "hostB", 1, "", 1), flags),
        rec(LEASE_TAKEOVER, lease("d1", "hostB", 1, "", 1), flags),  # retry
        rec(HOST_LIST, b"", flags),
        rec(LEASE_ACQUIRE, lease("d1", "hostA"), flags),  # fenced
        rec(LEASE_HANDOVER, lease("d1", "hostB", 2, "hostA"), flags),
        rec(LEASE_RELEASE, lease("d2", "hostA", 1), flags),
        rec(LEASE_FENCED, lease("d1", "hostC", 2), flags),  # held
        rec(LEASE_FENCED, lease("d1", "hostB", 1), flags),  # stale
        rec(LEASE_FENCED, lease("d1", "hostB", 2), flags),
        rec(LEASE_FENCED, lease("d1", "hostB", 2), flags),  # unchanged
        rec(HOST_READMIT, string("hostA"), flags),
        rec(HOST_READMIT, string("hostA"), flags),  # unchanged
        rec(HOST_READMIT, string("a b"), flags),
        rec(LEASE_ACQUIRE, lease("d2", "hostA"), flags),
        rec(HOST_LIST, b"", flags))


def domains(flags):
    """Failure domains (issue #19): labelled servers, relabels (a no-op, a
    clash, bad labels), an allocation spread over sites and one that
    cannot be."""
    return calls(
        rec(SERVER_ADD, server_add(1, 8 * MiB, 512, "h1", "r1", "s1"), flags),
        rec(SERVER_ADD, server_add(2, 8 * MiB, 512, "h2", "r2", "s1"), flags),
        rec(SERVER_ADD, server_add(3, 2 * MiB, 512, "h3", "r1", "s2"), flags),
        rec(SERVER_ADD, server_add(3, 2 * MiB, 512, "h3", "r9"), flags),
        rec(SERVER_ADD, server_add(4, 8 * MiB, 512, "bad label"), flags),
        rec(VDISK_ALLOC, alloc("d1", 1, 3, 2), flags),
        rec(VDISK_LOOKUP, string("d1"), flags),
        rec(SERVER_LABEL, server_label(2, None, "r3"), flags),
        rec(SERVER_LABEL, server_label(2, None, "r3"), flags),  # unchanged
        rec(SERVER_LABEL, server_label(2, "h1"), flags),  # clash
        rec(SERVER_LABEL, server_label(2, ""), flags),  # empty host
        rec(SERVER_LABEL, server_label(1, None, "", "s/1"), flags),
        rec(SERVER_LABEL, server_label(9, "h9"), flags),  # no server
        rec(SERVER_LIST, b"", flags),
        rec(VDISK_RELEASE, string("d1"), flags),
        rec(SERVER_LABEL, server_label(2, "h1"), flags))


def moves(flags):
    """Re-homing (issue #19): a server fails, its replicas move to the
    others (begin twice, commit twice, begin after commit), one move is
    aborted, one is left for a release, moves listed, states listed."""
    return calls(
        rec(SERVER_ADD, server_add(1, 4 * MiB), flags),
        rec(SERVER_ADD, server_add(2, 4 * MiB), flags),
        rec(SERVER_ADD, server_add(3, 4 * MiB), flags),
        rec(SERVER_ADD, server_add(4, 4 * MiB), flags),
        rec(VDISK_ALLOC, alloc("d1", 1, 2, 2), flags),
        rec(SERVER_FAIL, server_key(1), flags),
        rec(SERVER_FAIL, server_key(1), flags),  # already failed
        rec(SERVER_STATUS, b"", flags),
        rec(VDISK_LIST, vdisk_list(), flags),
        rec(MOVE_BEGIN, move("d1", 0, 0, 0, 1, 0, FAIL), flags),
        rec(MOVE_BEGIN, move("d1", 0, 0, 0, 1, 0, FAIL), flags),  # same
        rec(MOVE_LIST, move_list("", 1), flags),
        rec(MOVE_COMMIT, move("d1", 0, 0, 0, 3, 0), flags),
        rec(MOVE_COMMIT, move("d1", 0, 0, 0, 3, 0), flags),  # unchanged
        rec(MOVE_BEGIN, move("d1", 0, 0, 0, 1, 0, FAIL), flags),  # done
        rec(MOVE_BEGIN, move("d1", 0, 1, 0, 1, 0, FAIL), flags),
        rec(MOVE_ABORT, move("d1", 0, 1, 0, 3, MiB), flags),
        rec(MOVE_ABORT, move("d1", 0, 1, 0, 3, MiB), flags),  # unchanged
        rec(MOVE_BEGIN, move("d1", 0, 1, 1, 2), flags),
        rec(MOVE_COMMIT, move("d1", 0, 1, 1, 4, 2 * MiB), flags),  # other
        rec(MOVE_BEGIN, move("d1", 9, 0, 0, 1), flags),  # outside
        rec(MOVE_LIST, move_list("d1", None, ("d1", 0, 0, 0), 1), flags),
        rec(VDISK_LOOKUP, string("d1"), flags),
        rec(SERVER_ADD, server_add(1, 4 * MiB), flags),  # failed: refused
        rec(VDISK_RELEASE, string("d1"), flags),
        rec(SERVER_REMOVE, server_key(1), flags),
        rec(SERVER_ADD, server_add(1, 4 * MiB), flags))


def chap(flags):
    """CHAP accounts (issue #20): set, repeat, change, read, refusals
    (half an account, a space, a '#', no server), clear, read again; a
    caller outside --allow may neither set nor read one."""
    return calls(
        rec(SERVER_ADD, server_add(1), flags),
        rec(SERVER_ADD, server_add(2), flags),
        rec(SERVER_CHAP_GET, server_key(1), flags),
        rec(SERVER_CHAP_SET, server_chap(1, "alice", "s3cr3t"), flags),
        rec(SERVER_CHAP_SET, server_chap(1, "alice", "s3cr3t"), flags),
        rec(SERVER_CHAP_SET, server_chap(1, "alice", "other"), flags),
        rec(SERVER_CHAP_GET, server_key(1), flags),
        rec(SERVER_CHAP_GET, server_key(1), flags | FOREIGN),
        rec(SERVER_CHAP_SET, server_chap(2, "bob", "x"), flags | FOREIGN),
        rec(SERVER_CHAP_SET, server_chap(2, "bob", ""), flags),
        rec(SERVER_CHAP_SET, server_chap(2, "b ob", "x"), flags),
        rec(SERVER_CHAP_SET, server_chap(2, "bob", "#x"), flags),
        rec(SERVER_CHAP_SET, server_chap(9, "bob", "x"), flags),
        rec(SERVER_CHAP_SET, server_chap(2, "b" * 255, "x" * 255), flags),
        rec(SERVER_LIST, b"", flags),
        rec(SERVER_CHAP_SET, server_chap(1, "", ""), flags),
        rec(SERVER_CHAP_GET, server_key(1), flags),
        rec(SERVER_CHAP_GET, server_key(9), flags),
        rec(SERVER_REMOVE, server_key(2), flags),
        rec(SERVER_CHAP_GET, server_key(2), flags))


def reply_chap():
    return (b"\x80" + u32(0) + string("") + u32(0) + u32(BODY_CHAP) +
            u32(1) + string("alice") + string("s3cr3t"))


def reply_move():
    server = (u32(3) + string("10.0.0.3") + string("10.0.0.3:3260") +
              string("iqn.2024-01.t:s3") + u32(1) + u64(4 * MiB) +
              u32(512) + u32(4) + u32(3) + u32(0) + string("10.0.0.3") +
              string("") + string(""))
    mv = (string("d1") + u32(0) + u32(0) + u32(0) + u32(1) + u64(0) +
          u32(3) + u64(0) + u32(FAIL) + u64(1795690046) + u32(0) + u32(0))
    return (b"\x80" + u32(0) + string("") + u32(1) + u32(BODY_MOVE) + mv +
            u32(0) + server + server)


def reply_stats():
    stat = u32(1) + u32(0) + u32(1) + u32(2) + u32(0) + u32(2) + u32(0)
    return (b"\x80" + u32(0) + string("") + u32(0) +
            u32(BODY_SERVER_STATS) + u32(1) + stat)


def reply_hosts():
    host = (string("hostA") + string("hostB") + string("d1") + u64(2) +
            u64(1795690046))
    return (b"\x80" + u32(0) + string("") + u32(1) + u32(BODY_HOSTS) +
            u32(2) + host + host)


def reply_efenced():
    body = (string("d1") + string("hostB") + u64(2) + string("hostA") +
            u32(1) + u64(1795690046) + u32(0) + u32(1))
    return (b"\x80" + u32(10) + string("host hostA may not acquire") +
            u32(0) + u32(BODY_LEASE) + body)


def reply_vdisk():
    server = (u32(1) + string("10.0.0.1") + string("10.0.0.1:3260") +
              string("iqn.2024-01.t:s1") + u32(1) + u64(16 * MiB) +
              u32(512) + u32(16) + u32(15) + u32(0) + string("h1") +
              string("r1") + string("s1"))
    extent = u32(1) + u64(0) + u32(0)
    note = u32(0) + u32(0) + u32(1) + u32(2) + u32(1)
    mv = (string("d1") + u32(0) + u32(0) + u32(0) + u32(1) + u64(0) +
          u32(1) + u64(MiB) + u32(EVACUATE) + u64(1795690046) + u32(0) +
          u32(0))
    vdisk = (string("d1") + u32(1) + u32(1) + u32(1) + u64(MiB) + u32(1) +
             server + u32(1) + extent + u32(1) + note + u32(1) + u32(1) +
             u32(1) + mv)
    return (b"\x80" + u32(0) + string("") + u32(1) + u32(4) + vdisk)


def seeds():
    yield "null-info", calls(rec(NULL), rec(INFO), rec(SERVER_LIST))
    yield "lifecycle-one-round", lifecycle(0)
    yield "lifecycle-rounds", lifecycle(END_ROUND)
    yield "leases-one-round", leases(0)
    yield "leases-rounds", leases(END_ROUND)
    yield "fencing-one-round", fencing(0)
    yield "fencing-rounds", fencing(END_ROUND)
    yield "domains-one-round", domains(0)
    yield "domains-rounds", domains(END_ROUND)
    yield "moves-one-round", moves(0)
    yield "moves-rounds", moves(END_ROUND)
    yield "chap-one-round", chap(0)
    yield "chap-rounds", chap(END_ROUND)
    yield "client-reply-chap", reply_chap()
    yield "foreign", calls(rec(SERVER_ADD, server_add(1), FOREIGN),
                           rec(VDISK_LIST, vdisk_list(), FOREIGN))
    yield "garbage-args", calls(rec(SERVER_ADD, server_add(1)[:9]),
                                rec(VDISK_ALLOC, u32(0xFFFFFFFF)),
                                rec(EXTENT_LIST, u32(65)))
    yield "unknown-proc", calls(rec(UNKNOWN, b"\0" * 8))
    yield "alloc-no-space", calls(
        rec(SERVER_ADD, server_add(1, 2 * MiB)),
        rec(VDISK_ALLOC, alloc("big", 4, 4, 1)),
        rec(VDISK_ALLOC, alloc("x", 1, 1, 1, 2 * MiB)))
    yield "pages", calls(
        rec(SERVER_ADD, server_add(1, 4 * MiB)),
        rec(SERVER_ADD, server_add(2, 4 * MiB)),
        rec(VDISK_ALLOC, alloc("a", 1, 1, 2)),
        rec(VDISK_ALLOC, alloc("b", 2, 1, 1)),
        rec(VDISK_LIST, vdisk_list("", 1)),
        rec(VDISK_LIST, vdisk_list("a", 1)),
        rec(EXTENT_LIST, extent_list((), "", 0, (1, 1), 2)))
    # The largest allocation the protocol allows (257,032 extents): now
    # refused at once by the master's per-call cap (65,536 by default,
    # stripe-master --max-alloc-extents); before the cap it ran past the
    # harness's store budget (MS_EIO, nothing kept) and once took 31 s
    # under ASan (a libFuzzer timeout).
    yield "huge-alloc", calls(
        rec(SERVER_ADD, server_add(1, 200 << 30)),
        rec(SERVER_ADD, server_add(2, 200 << 30)),
        rec(SERVER_ADD, server_add(3, 200 << 30)),
        rec(VDISK_ALLOC, alloc("d0", 2, 64258, 2)),
        rec(VDISK_LOOKUP, string("d0")))
    # The same in a round of its own, then rounds after it: the store must
    # take new rounds after one that failed part-way.
    yield "huge-alloc-rounds", calls(
        rec(SERVER_ADD, server_add(1, 200 << 30)),
        rec(SERVER_ADD, server_add(2, 200 << 30)),
        rec(SERVER_ADD, server_add(3, 200 << 30), END_ROUND),
        rec(VDISK_ALLOC, alloc("d0", 2, 64258, 2), END_ROUND),
        rec(INFO, b"", END_ROUND),
        rec(VDISK_ALLOC, alloc("d1", 1, 1, 2), END_ROUND),
        rec(VDISK_LOOKUP, string("d1")))
    # Allocations within the harness's cap (512 extents) that together
    # run past its store budget: the round is interrupted like an I/O
    # error (store_sql_fail, rollback, every call MS_EIO, nothing kept),
    # then a later round must still work.  The single allocation past the
    # budget above is now refused before it reaches the store.
    big = [rec(SERVER_ADD, server_add(n, 200 << 30)) for n in (1, 2, 3)]
    yield "budget", calls(
        *big, *[rec(VDISK_ALLOC, alloc("d%d" % i, 2, 128, 2))
                for i in range(12)])
    yield "budget-rounds", calls(
        *big[:2], rec(SERVER_ADD, server_add(3, 200 << 30), END_ROUND),
        *[rec(VDISK_ALLOC, alloc("d%d" % i, 2, 128, 2)) for i in range(12)],
        rec(INFO, b"", END_ROUND),
        rec(VDISK_ALLOC, alloc("e", 1, 1, 2), END_ROUND),
        rec(VDISK_LOOKUP, string("e")))
    yield "client-reply-vdisk", reply_vdisk()
    yield "client-reply-hosts", reply_hosts()
    yield "client-reply-move", reply_move()
    yield "client-reply-stats", reply_stats()
    yield "client-reply-efenced", reply_efenced()
    yield "client-reply-error", (b"\x80" + u32(3) + string("exists") +
                                 u32(0) + u32(0))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "master")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
