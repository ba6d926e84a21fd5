#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""stripe-io.py - the I/O and the checks of the stripe integration tests.

Usage:
  stripe-io.py backing MAP DATA LUN...     every live replica holds DATA
  stripe-io.py table MAP DATA LUN...       the hand-written placement rows
  stripe-io.py replicas MAP LUN...         the replicas of each extent are equal
  stripe-io.py stale MAP                   print "SERVER C X R" per stale replica
  stripe-io.py columns MAP                 print "COLUMN SERVER..." per column
  stripe-io.py flip MAP C J R X LUN...     invert the byte at offset X of
                                           extent (C, J) replica R in its LUN
  stripe-io.py stream URI DATA --kill-at F --run CMD [--bs N] [--qd N]
  stripe-io.py fault URI MAP DATA --dead-column C --kill CMD --revive CMD
  stripe-io.py slow URI MAP --slow-column C --fast-column C [--bytes N]

LUN is TARGET=PATH: the LUN file of the server whose target is TARGET.
The mapping file is parsed here again (not with tapstripe's reader), and
the layout is DESIGN.md's: k = v / U, c = k % S, off = (k / S) * U + v % U,
j = off / E, x = off % E.  The scenario commands talk NBD through libnbd
(python3-libnbd) and print one "PASS: ..." or "FAIL: ..." line per check;
the exit status is 1 when a check failed or the run could not go on.
"""
import errno
import os
import random
import subprocess
import sys
import time

MIB = 1 << 20


# --- the mapping file -------------------------------------------------------

class Map:
    """A mapping file: geometry, servers and extent replicas."""

    def __init__(self, path):
        self.servers = {}  # number -> {target, block_size, address}
        self.slots = {}  # (c, j, r) -> (server, lba, stale)
        head = {}
        with open(path) as f:
            for line in f:
                w = line.split()
                if not w or w[0].startswith("#"):
                    continue
                if w[0] == "server":
                    kv = dict(zip(w[2::2], w[3::2]))
                    self.servers[int(w[1])] = {
                        "target": kv["target"], "address": kv["address"],
                        "block_size": int(kv["block-size"])}
                elif w[0] == "extent":
                    c, j, r = int(w[1]), int(w[2]), int(w[3])
                    # "dirty HEX" (format 2): some regions missed writes
                    self.slots[(c, j, r)] = (int(w[5]), int(w[7]),
                                             w[8] in ("stale", "dirty"))
                elif len(w) == 2:
                    head[w[0]] = w[1]
        self.size = int(head["size-bytes"])
        self.unit = int(head["stripe-unit-bytes"])
        self.columns = int(head["columns"])
        self.per_column = int(head["extents-per-column"])
        self.replicas = int(head["replicas"])
        self.extent = int(head["extent-size-bytes"])
        self.region = int(head.get("region-bytes", 0))

    def locate(self, v):
        """(column, extent, offset in the extent) of virtual byte v."""
        k = v // self.unit
        c = k % self.columns
        off = (k // self.columns) * self.unit + v % self.unit
        return c, off // self.extent, off % self.extent

    def units(self):
        """(v, length, c, j, x) for every stripe unit of the disk."""
        for v in range(0, self.size, self.unit):
            c, j, x = self.locate(v)
            yield v, min(self.unit, self.size - v), c, j, x

    def lun_offset(self, c, j, r, x):
        server, lba, _ = self.slots[(c, j, r)]
        return server, lba * self.servers[server]["block_size"] + x


def open_luns(m, specs):
    """Server number -> open LUN file, from TARGET=PATH arguments."""
    by_target = dict(s.split("=", 1) for s in specs)
    files = {}
    for n, s in m.servers.items():
        if s["target"] not in by_target:
            sys.exit("no LUN file given for %s" % s["target"])
        files[n] = open(by_target[s["target"]], "rb")
    return files


def read_at(f, offset, length):
    f.seek(offset)
    data = f.read(length)
    return data.ljust(length, b"\0")  # a sparse file may end early


# --- checks on the backing files ----------------------------------------------

def cmd_backing(args):
    """Every replica that is not stale holds DATA where the layout says."""
    m = Map(args[0])
    luns = open_luns(m, args[2:])
    bad = checked = 0
    with open(args[1], "rb") as data:
        for v, n, c, j, x in m.units():
            want = read_at(data, v, n)
            for r in range(m.replicas):
                if m.slots[(c, j, r)][2]:
                    continue
                server, off = m.lun_offset(c, j, r, x)
                checked += 1
                if read_at(luns[server], off, n) != want:
                    bad += 1
                    if bad <= 5:
                        print("mismatch: virtual %d+%d -> column %d extent %d replica %d "
                              "server %d byte %d" % (v, n, c, j, r, server, off))
    print("%d stripe-unit replicas checked, %d differ" % (checked, bad))
    return 1 if bad else 0


# Hand-written rows for the geometry S=3, U=1 MiB, E=4 MiB, V=24 MiB
# (J = 2): virtual offset -> column, extent, offset in the extent.
TABLE_GEOMETRY = (3, MIB, 4 * MIB, 24 * MIB)
TABLE = [
    (0, 0, 0, 0),
    (MIB + 4096, 1, 0, 4096),
    (2 * MIB + 512 * 1024, 2, 0, 512 * 1024),
    (3 * MIB, 0, 0, MIB),
    (11 * MIB + 4096, 2, 0, 3 * MIB + 4096),
    (12 * MIB, 0, 1, 0),
    (13 * MIB + 8192, 1, 1, 8192),
    (22 * MIB, 1, 1, 3 * MIB),
    (23 * MIB + 1020 * 1024, 2, 1, 3 * MIB + 1020 * 1024),
]


def cmd_table(args):
    """4 KiB at each row's virtual offset are at the row's place on the LUN."""
    m = Map(args[0])
    if (m.columns, m.unit, m.extent, m.size) != TABLE_GEOMETRY:
        print("the table is for S=3 U=1M E=4M V=24M, not this map")
        return 1
    luns = open_luns(m, args[2:])
    bad = 0
    with open(args[1], "rb") as data:
        for v, c, j, x in TABLE:
            want = read_at(data, v, 4096)
            for r in range(m.replicas):
                server, off = m.lun_offset(c, j, r, x)
                if read_at(luns[server], off, 4096) != want:
                    bad += 1
                    print("row v=%d: not at column %d extent %d +%d (replica %d, "
                          "server %d byte %d)" % (v, c, j, x, r, server, off))
    print("%d rows, %d wrong" % (len(TABLE), bad))
    return 1 if bad else 0


def cmd_replicas(args):
    """Each extent's replicas are byte-identical over the whole extent."""
    m = Map(args[0])
    luns = open_luns(m, args[1:])
    bad = 0
    for c in range(m.columns):
        for j in range(m.per_column):
            first = None
            for r in range(m.replicas):
                server, off = m.lun_offset(c, j, r, 0)
                got = read_at(luns[server], off, m.extent)
                if first is None:
                    first = got
                elif got != first:
                    bad += 1
                    print("column %d extent %d: replica %d (server %d) differs from replica 0"
                          % (c, j, r, server))
    print("%d extents, %d with differing replicas" % (m.columns * m.per_column, bad))
    return 1 if bad else 0


def cmd_stale(args):
    m = Map(args[0])
    for (c, j, r), (server, _, stale) in sorted(m.slots.items()):
        if stale:
            print(m.servers[server]["target"], c, j, r)
    return 0


def cmd_flip(args):
    """Invert one byte of one replica in its LUN file (a silent corruption)."""
    m = Map(args[0])
    c, j, r, x = (int(a) for a in args[1:5])
    by_target = dict(s.split("=", 1) for s in args[5:])
    server, off = m.lun_offset(c, j, r, x)
    with open(by_target[m.servers[server]["target"]], "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xFF]))
    print("server %d byte %d: %02x -> %02x" % (server, off, b[0], b[0] ^ 0xFF))
    return 0


def cmd_columns(args):
    m = Map(args[0])
    for c in range(m.columns):
        servers = sorted({m.slots[(c, j, r)][0] for j in range(m.per_column)
                          for r in range(m.replicas)})
        print(c, " ".join(m.servers[s]["target"] for s in servers))
    return 0


# --- NBD scenarios ----------------------------------------------------------------

def err_code(e):
    """The errno of an exception (libnbd gives its name, e.g. "EIO")."""
    code = getattr(e, "errno", None)
    if isinstance(code, str):
        code = getattr(errno, code, None)
    return code or -1


def nbd_open(uri):
    import nbd  # python3-libnbd
    h = nbd.NBD()
    h.connect_uri(uri)
    return h


class Result:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        print("%s: %s" % ("PASS" if ok else "FAIL", what), flush=True)
        if not ok:
            self.failed += 1
        return ok


def run_queue(h, ops, qd, timeout=120.0, on_done=None):
    """Run (kind, offset, length_or_bytes) ops with qd in flight.

    Returns (errors, max_latency); on_done(index, err) after each.
    """
    import nbd
    pending = {}  # cookie -> (index, start)
    errors = []
    max_lat = 0.0
    it = iter(enumerate(ops))
    more = True
    deadline = time.monotonic() + timeout
    while more or pending:
        while more and len(pending) < qd:
            try:
                i, (kind, off, arg) = next(it)
            except StopIteration:
                more = False
                break
            if kind == "w":
                buf = nbd.Buffer.from_bytearray(bytearray(arg))
                cookie = h.aio_pwrite(buf, off)
            else:
                buf = nbd.Buffer(arg)
                cookie = h.aio_pread(buf, off)
            pending[cookie] = (i, time.monotonic(), buf)
        if time.monotonic() > deadline:
            raise TimeoutError("%d requests still in flight after %.0f s" % (len(pending), timeout))
        h.poll(200)
        while pending:  # peeking with nothing in flight is an error
            cookie = h.aio_peek_command_completed()
            if not cookie:
                break
            i, start, _ = pending.pop(cookie)
            err = 0
            try:
                h.aio_command_completed(cookie)
            except nbd.Error as e:
                err = err_code(e)
                errors.append((i, err))
            max_lat = max(max_lat, time.monotonic() - start)
            if on_done:
                on_done(i, err)
    return errors, max_lat


def read_all(h, size, chunk=MIB):
    out = bytearray()
    for off in range(0, size, chunk):
        out += h.pread(min(chunk, size - off), off)
    return bytes(out)


def cmd_stream(args):
    """Write DATA as a stream; run CMD once a fraction of it is acknowledged."""
    uri, data_path = args[0], args[1]
    opts = dict(zip(args[2::2], args[3::2]))
    bs, qd = int(opts.get("--bs", 256 * 1024)), int(opts.get("--qd", 8))
    kill_at = float(opts["--kill-at"])
    data = open(data_path, "rb").read()
    res = Result()
    h = nbd_open(uri)
    ops = [("w", off, data[off:off + bs]) for off in range(0, len(data), bs)]
    state = {"acked": 0, "fired": False, "at": 0}

    def done(i, err):
        if not err:
            state["acked"] += 1
        if not state["fired"] and state["acked"] >= kill_at * len(ops):
            state["fired"] = True
            state["at"] = state["acked"]
            r = subprocess.run(opts["--run"], shell=True, capture_output=True, text=True)
            if r.returncode:
                print("FAIL: %s: %s" % (opts["--run"], r.stderr.strip()))
                sys.exit(1)
    t0 = time.monotonic()
    errors, max_lat = run_queue(h, ops, qd, on_done=done)
    elapsed = time.monotonic() - t0
    res.check(state["fired"], "the server was killed after %d of %d writes were acknowledged"
              % (state["at"], len(ops)))
    res.check(not errors, "no write failed (%d writes of %d KiB at QD %d in %.1f s, slowest %.2f s)%s"
              % (len(ops), bs // 1024, qd, elapsed, max_lat,
                 "" if not errors else ": %d failed, first at byte %d: %s"
                 % (len(errors), errors[0][0] * bs, os.strerror(errors[0][1]))))
    try:
        h.flush()
        flushed = True
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        flushed = False
        print("flush: %s" % e)
    res.check(flushed, "a flush after the stream succeeds")
    back = read_all(h, len(data))
    res.check(back == data, "every acknowledged write reads back (from the live replicas)")
    h.shutdown()
    return 1 if res.failed else 0


def column_offsets(m, column, count, length, start_unit=0):
    """Virtual offsets of count pieces of length inside column's units."""
    offs = []
    k = column + start_unit * m.columns
    while len(offs) < count and k * m.unit < m.size:
        for o in range(0, m.unit, length):
            if len(offs) == count or k * m.unit + o + length > m.size:
                break
            offs.append(k * m.unit + o)
        k += m.columns
    return offs


def timed(fn):
    t = time.monotonic()
    try:
        fn()
        return 0, time.monotonic() - t
    except Exception as e:  # noqa: BLE001
        return err_code(e), time.monotonic() - t


def cmd_fault(args):
    """R=1: I/O to a dead server's column fails fast, the others go on."""
    uri, m, data = args[0], Map(args[1]), open(args[2], "rb").read()
    opts = dict(zip(args[3::2], args[4::2]))
    dead = int(opts["--dead-column"])
    limit = float(opts.get("--limit", 10))
    res = Result()
    h = nbd_open(uri)
    live = [c for c in range(m.columns) if c != dead]
    r = subprocess.run(opts["--kill"], shell=True, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: %s" % (opts["--kill"], r.stderr.strip()))
        return 1
    # reads of the dead column: EIO, each within the limit
    worst = 0.0
    codes = []
    for off in column_offsets(m, dead, 4, 4096, start_unit=1):
        err, t = timed(lambda: h.pread(4096, off))
        codes.append(err)
        worst = max(worst, t)
    res.check(all(c == errno.EIO for c in codes) and worst < limit,
              "reads of the dead server's extents fail with EIO (errors %s, slowest %.2f s, "
              "limit %.0f s)" % (sorted(errno.errorcode.get(c, c) for c in set(codes)), worst, limit))
    err, t = timed(lambda: h.pwrite(b"\xa5" * 4096, column_offsets(m, dead, 1, 4096)[0]))
    res.check(err == errno.EIO and t < limit,
              "a write to the dead server's extents fails with EIO (error %s in %.2f s)"
              % (errno.errorcode.get(err, err), t))
    # the other columns: reads and writes go on, with the right data
    ok = True
    worst = 0.0
    for c in live:
        for off in column_offsets(m, c, 8, 4096):
            t = time.monotonic()
            try:
                got = h.pread(4096, off)
                h.pwrite(got, off)
            except Exception as e:  # noqa: BLE001
                print("column %d byte %d: %s" % (c, off, e))
                got = None
            worst = max(worst, time.monotonic() - t)
            ok = ok and got == data[off:off + 4096]
    res.check(ok and worst < limit, "reads and writes of the other servers' extents go on "
              "(slowest %.2f s)" % worst)
    r = subprocess.run(opts["--revive"], shell=True, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: %s" % (opts["--revive"], r.stderr.strip()))
        return 1
    off = column_offsets(m, dead, 1, 4096, start_unit=1)[0]
    t0 = time.monotonic()
    got = None
    while time.monotonic() - t0 < 3 * limit:
        try:
            got = h.pread(4096, off)
            break
        except Exception:  # noqa: BLE001
            time.sleep(0.2)
    res.check(got == data[off:off + 4096], "after revive, the server's extents read again "
              "(%.1f s after the revive)" % (time.monotonic() - t0))
    pattern = bytes(random.Random(7).getrandbits(8) for _ in range(4096))
    err, _ = timed(lambda: h.pwrite(pattern, off))
    res.check(err == 0 and h.pread(4096, off) == pattern,
              "after revive, the server's extents take writes again")
    h.pwrite(data[off:off + 4096], off)  # as it was: the caller compares all
    h.flush()
    h.shutdown()
    return 1 if res.failed else 0


def cmd_slow(args):
    """Reads of fast columns complete while a slow column's write runs."""
    uri, m = args[0], Map(args[1])
    opts = dict(zip(args[2::2], args[3::2]))
    slow, fast = int(opts["--slow-column"]), int(opts["--fast-column"])
    nbytes = int(opts.get("--bytes", 8 * MIB))
    res = Result()
    piece = min(m.unit, 256 * 1024)
    writes = [("w", off, os.urandom(piece))
              for off in column_offsets(m, slow, nbytes // piece, piece)]
    reads = [("r", off, 64 * 1024) for off in column_offsets(m, fast, 64, 64 * 1024)]
    # The slow write runs in a child process on its own connection; it
    # says "go" once its first write is acknowledged, so the slow server's
    # queue is full before the fast reads start.
    rfd, wfd = os.pipe()
    t_start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        status = 1
        try:
            def go(i, err):
                if i == 0:
                    os.write(wfd, b"go")
            errors, _ = run_queue(nbd_open(uri), writes, 4, timeout=300, on_done=go)
            status = 1 if errors else 0
            if errors:
                print("slow write: %d errors, first %s" % (len(errors), os.strerror(errors[0][1])), flush=True)
        except Exception as e:  # noqa: BLE001 - reported, then the exit status
            print("slow write: %r" % e, flush=True)
        finally:
            os._exit(status)
    os.close(wfd)
    fast_h = nbd_open(uri)
    started = os.read(rfd, 2) == b"go"
    res.check(started, "the slow server's write started")
    lats = []
    t_fast0 = time.monotonic()
    for kind, off, n in reads:
        t = time.monotonic()
        fast_h.pread(n, off)
        lats.append(time.monotonic() - t)
    t_fast = time.monotonic() - t_fast0
    still_running = os.waitpid(pid, os.WNOHANG) == (0, 0)
    _, status = os.waitpid(pid, 0)
    t_slow = time.monotonic() - t_start
    res.check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
              "the slow server's write completed without error")
    res.check(t_slow > 2.0, "the capped server was slow: %d KiB took %.2f s"
              % (len(writes) * piece // 1024, t_slow))
    lats.sort()
    res.check(still_running,
              "%d reads of 64 KiB from a fast server finished while the slow write ran: "
              "%.2f s for all of them against %.2f s for the write (p50 %.1f ms, max %.1f ms)"
              % (len(reads), t_fast, t_slow, lats[len(lats) // 2] * 1000, lats[-1] * 1000))
    fast_h.shutdown()
    return 1 if res.failed else 0


COMMANDS = {
    "backing": cmd_backing, "table": cmd_table, "replicas": cmd_replicas,
    "stale": cmd_stale, "columns": cmd_columns, "stream": cmd_stream,
    "fault": cmd_fault, "slow": cmd_slow, "flip": cmd_flip,
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
