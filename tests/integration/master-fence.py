#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""master-fence.py - raw fencing calls for master-fence.sh (issue #18).

Usage: master-fence.py PORT fenced|takeover VDISK HOST EPOCH
       master-fence.py PORT bad VDISK
       master-fence.py PORT loop VDISK HOST OTHER COUNT OUT
       master-fence.py PORT check VDISK OUT_A OUT_B

"fenced" sends one MS_LEASE_FENCED (the confirmation the fence executor
of stripe-ctl sends; no stripe-ctl command sends it alone), "takeover" one
MS_LEASE_TAKEOVER with fence (the master's side alone, without touching
any LUN); each prints the status name, changed (0/1) and fence_pending
(0/1, "-" without a lease body).  "loop" makes COUNT calls as HOST
(acquire, fenced takeover, fenced, release, re-admit OTHER, in turn) and
appends a JSON line to OUT before each call and after each answer; it
stops when the master goes away.  "check", after the master restarted,
checks those files against the master: no epoch acknowledged to two
holders, the last acknowledged epoch kept, and each host fenced or not
as the last acknowledged call about it left it (either way when the call
after it was in flight).  "bad" sends MS_LEASE_FENCED, MS_HOST_LIST and MS_HOST_READMIT with
bad arguments (an unknown disk, malformed host ids, undecodable records)
and expects the master's own refusals or GARBAGE_ARGS; exit 1 with a
message when the master answers otherwise.

The RPC framing is master-hostile.py's.
"""
import importlib.util
import json
import os
import struct
import sys

_spec = importlib.util.spec_from_file_location(
    "hostile", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "master-hostile.py"))
H = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(H)

LEASE_FENCED, HOST_LIST, HOST_READMIT = 17, 18, 19
BODY_LEASE, BODY_HOSTS = 8, 9
NAMES = ["OK", "EINVAL", "ENOENT", "EEXIST", "ENOSPC", "EPERM", "EBUSY",
         "EIO", "EHELD", "ESTALE", "EFENCED"]


def xdr_skip_string(data, pos):
    n = struct.unpack(">I", data[pos:pos + 4])[0]
    return pos + 4 + n + (4 - n % 4) % 4


def xdr_string_at(data, pos):
    n = struct.unpack(">I", data[pos:pos + 4])[0]
    return data[pos + 4:pos + 4 + n].decode(), xdr_skip_string(data, pos)


def u32_at(data, pos):
    return struct.unpack(">I", data[pos:pos + 4])[0], pos + 4


def u64_at(data, pos):
    return struct.unpack(">Q", data[pos:pos + 8])[0], pos + 8


def lease_body(results):
    """The LEASE body of a reply as a dict, or None."""
    pos = xdr_skip_string(results, 4) + 4  # status, message, changed
    kind, pos = u32_at(results, pos)
    if kind != BODY_LEASE:
        return None
    l = {}
    l["vdisk"], pos = xdr_string_at(results, pos)
    l["holder"], pos = xdr_string_at(results, pos)
    l["epoch"], pos = u64_at(results, pos)
    l["previous"], pos = xdr_string_at(results, pos)
    l["fence"], pos = u32_at(results, pos)
    l["since"], pos = u64_at(results, pos)
    nr, pos = u32_at(results, pos)
    for _ in range(nr):  # ms_server
        pos += 4
        for _ in range(3):
            pos = xdr_skip_string(results, pos)
        pos += 4 + 8 + 4 + 4 + 4 + 4
        for _ in range(3):  # host, rack, site labels (issue #19)
            pos = xdr_skip_string(results, pos)
    l["fence_pending"], pos = u32_at(results, pos)
    return l


def fence_pending(results):
    """fence_pending of a reply's LEASE body, or None."""
    l = lease_body(results)
    return None if l is None else l["fence_pending"]


def hosts_body(results):
    """{host: by} of a reply's HOSTS body."""
    pos = xdr_skip_string(results, 4) + 4
    kind, pos = u32_at(results, pos)
    if kind != BODY_HOSTS:
        raise H.Misbehaved("not a HOSTS body: %d" % kind)
    nr, pos = u32_at(results, pos)
    hosts = {}
    for _ in range(nr):
        host, pos = xdr_string_at(results, pos)
        by, pos = xdr_string_at(results, pos)
        pos = xdr_skip_string(results, pos) + 16
        hosts[host] = by
    return hosts


def call(conn, proc, args):
    conn.send(H.record(H.call_body(proc, args)))
    _, acc, st, results = conn.reply(results=True)
    if (acc, st) != (True, H.SUCCESS):
        raise H.Misbehaved("proc %d: accepted=%s stat=%d" % (proc, acc, st))
    return results


def one_call(port, proc, vdisk, host, epoch):
    c = H.Conn(port)
    results = call(c, proc, H.lease_args(vdisk, host, epoch,
                                         fence=int(proc == H.LEASE_TAKEOVER)))
    status, _, changed = H.ms_reply(results)
    pending = fence_pending(results)
    print(NAMES[status], changed, "-" if pending is None else pending)
    c.close()


def loop_call(c, i, vdisk, host, other, epoch):
    """(op, proc, args) of call i of host's loop."""
    ops = [("acquire", H.LEASE_ACQUIRE, H.lease_args(vdisk, host)),
           ("takeover", H.LEASE_TAKEOVER, H.lease_args(vdisk, host, epoch,
                                                       fence=1)),
           ("fenced", LEASE_FENCED, H.lease_args(vdisk, host, epoch)),
           ("release", H.LEASE_RELEASE, H.lease_args(vdisk, host, epoch)),
           ("readmit", HOST_READMIT, H.xdr_string(other))]
    return ops[i % len(ops)]


def loop(port, vdisk, host, other, count, out):
    epoch = 0
    with open(out, "a") as f:
        try:
            c = H.Conn(port)
            for i in range(count):
                op, proc, args = loop_call(c, i, vdisk, host, other, epoch)
                print(json.dumps({"op": op, "acked": False}), file=f,
                      flush=True)
                results = call(c, proc, args)
                status, _, changed = H.ms_reply(results)
                rec = {"op": op, "acked": True, "status": NAMES[status],
                       "changed": changed}
                l = lease_body(results)
                if l:
                    rec.update(l)
                    epoch = l["epoch"]
                print(json.dumps(rec), file=f, flush=True)
        except (H.Misbehaved, EOFError, OSError):
            pass  # the master was killed


def fenced_by_file(recs, victim, me):
    """(fenced?, in doubt?) of victim by the records of me's loop."""
    state, doubt = False, False
    for r in recs:
        if not r["acked"]:
            doubt = r["op"] in ("takeover", "readmit")
            continue
        doubt = False
        if r["op"] == "readmit" and r["status"] == "OK":
            state = False
        elif (r["op"] == "takeover" and r["status"] == "OK" and r["changed"]
              and r["previous"] == victim and r["fence_pending"]):
            state = True
    return state, doubt


def check(port, vdisk, out_a, out_b):
    files = {"hostA": out_a, "hostB": out_b}
    recs = {h: [json.loads(l) for l in open(f) if l.strip()]
            for h, f in files.items()}
    owner, top, holders = {}, 0, set()
    for h, rs in recs.items():
        for r in rs:
            if not r["acked"] or r["status"] != "OK" or "epoch" not in r:
                continue
            if r["changed"] and r["holder"]:
                if owner.setdefault(r["epoch"], r["holder"]) != r["holder"]:
                    raise H.Misbehaved("epoch %d acknowledged to two holders"
                                       % r["epoch"])
            if r["epoch"] > top:
                top, holders = r["epoch"], set()
            if r["epoch"] == top:
                holders.add(r["holder"])
    c = H.Conn(port)
    now = lease_body(call(c, H.LEASE_SHOW, H.xdr_string(vdisk)))
    fenced_now = hosts_body(call(c, HOST_LIST, b""))
    c.close()
    # A release keeps the epoch: the lease may be free at the top epoch
    # after a release by its holder whose answer the kill -9 swallowed.
    released = not now["holder"] and now["previous"] in holders
    if now["epoch"] < top or (now["epoch"] == top and
                              now["holder"] not in holders and not released):
        raise H.Misbehaved("lost: acknowledged epoch %d %s, now %d %s"
                           % (top, holders, now["epoch"], now["holder"]))
    if now["fence_pending"] and not now["holder"]:
        raise H.Misbehaved("a fence pending on a free lease")
    acked = sum(r["acked"] for rs in recs.values() for r in rs)
    for victim, me in (("hostA", "hostB"), ("hostB", "hostA")):
        want, doubt = fenced_by_file(recs[me], victim, me)
        if not doubt and (victim in fenced_now) != want:
            raise H.Misbehaved("%s should %sbe fenced" %
                               (victim, "" if want else "not "))
    print("ok", acked, top, sorted(fenced_now))


def bad(port, vdisk):
    c = H.Conn(port)
    refused = [
        (LEASE_FENCED, H.lease_args("no-such-disk", "hostA", 1), 2),
        (LEASE_FENCED, H.lease_args("bad/id", "hostA", 1), 1),
        (LEASE_FENCED, H.lease_args(vdisk, "", 1), 1),
        (LEASE_FENCED, H.lease_args(vdisk, "a b", 1), 1),
        (HOST_READMIT, H.xdr_string(""), 1),
        (HOST_READMIT, H.xdr_string("a b"), 1),
        (HOST_READMIT, H.xdr_string("h\u00e9"), 1),
    ]
    for proc, args, want in refused:
        status, message, changed = H.ms_reply(call(c, proc, args))
        if status != want or changed or not message:
            raise H.Misbehaved("proc %d %r: status %d changed %d message %r"
                               % (proc, args[:40], status, changed, message))
    undecodable = [
        (LEASE_FENCED, H.lease_args(vdisk, "h" * (H.HOST_ID_MAX + 1), 1)),
        (LEASE_FENCED, H.lease_args(vdisk, "hostA", 1)[:-6]),
        (HOST_READMIT, H.xdr_string("h" * (H.HOST_ID_MAX + 1))),
        (HOST_READMIT, H.xdr_string("h", claimed=0x7fffffff)),
        (HOST_READMIT, b""),
    ]
    for proc, args in undecodable:
        H.expect(c, H.call_body(proc, args), True, H.GARBAGE_ARGS,
                 "proc %d" % proc)
    status, _, changed = H.ms_reply(call(c, HOST_LIST, b""))
    if (status, changed) != (0, 0):
        raise H.Misbehaved("host list: status %d changed %d" % (status, changed))
    c.close()


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    port, name = int(sys.argv[1]), sys.argv[2]
    try:
        if name in ("fenced", "takeover") and len(sys.argv) == 6:
            one_call(port, LEASE_FENCED if name == "fenced" else
                     H.LEASE_TAKEOVER, sys.argv[3], sys.argv[4],
                     int(sys.argv[5]))
        elif name == "loop" and len(sys.argv) == 8:
            loop(port, sys.argv[3], sys.argv[4], sys.argv[5],
                 int(sys.argv[6]), sys.argv[7])
        elif name == "check" and len(sys.argv) == 6:
            check(port, sys.argv[3], sys.argv[4], sys.argv[5])
        elif name == "bad":
            bad(port, sys.argv[3])
            H.healthy(port)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (H.Misbehaved, EOFError, OSError) as e:
        print("%s: %s" % (name, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
