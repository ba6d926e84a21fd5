#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""fault-io.py - the NBD side of the lab fault cases (tests/faults/).

Usage:
  fault-io.py write URI DATA [--bs N] [--qd N] [--at F --run CMD]
                  [--timeout-ms T --max-timeouts K]
      write DATA from byte 0 at queue depth N; once a fraction F of the
      writes is acknowledged, run CMD (the fault); then a flush, and every
      byte must read back as written.  With T and K: the whole stream,
      less the time CMD itself took, must take under K command timeouts
  fault-io.py read URI DATA [--bs N]
      read the whole disk: no read may fail, every byte as DATA
  fault-io.py cut URI MAP DATA --column C --live-column L --cut CMD
                  --restore CMD --timeout-ms T [--probe CMD]
      R = 1: cut column C's server off (CMD), then: a read of C fails or
      waits no longer than the command timeout T (+ 2 s); while it waits,
      reads and writes of column L answer, each within 1 s, with the right
      data, and PROBE (tapdisk's control socket) answers within 1 s; a
      write to C fails within T + 2 s; after RESTORE, C reads DATA and
      takes writes again within 30 s

One "PASS: ..." or "FAIL: ..." line per check; exit 1 if one failed.
Builds on tests/integration/stripe-io.py (the same NBD queue and map).
"""
import errno
import importlib.util
import os
import subprocess
import sys
import time

_spec = importlib.util.spec_from_file_location(
    "stripe_io", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "..", "integration", "stripe-io.py"))
sio = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sio)


def opts_of(args):
    return dict(zip(args[0::2], args[1::2]))


def ename(code):
    return errno.errorcode.get(code, str(code))


def run(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: %s" % (cmd, (r.stderr or r.stdout).strip()), flush=True)
        sys.exit(1)


def cmd_write(args):
    uri, data = args[0], open(args[1], "rb").read()
    o = opts_of(args[2:])
    bs, qd = int(o.get("--bs", 256 * 1024)), int(o.get("--qd", 8))
    at, fault = float(o.get("--at", 0)), o.get("--run")
    timeout_s = int(o.get("--timeout-ms", 0)) / 1000.0
    max_timeouts = float(o.get("--max-timeouts", 0))
    res = sio.Result()
    h = sio.nbd_open(uri)
    ops = [("w", off, data[off:off + bs]) for off in range(0, len(data), bs)]
    st = {"acked": 0, "fired": fault is None, "at": 0, "t": 0.0}

    def done(i, err):
        if not err:
            st["acked"] += 1
        if not st["fired"] and st["acked"] >= at * len(ops):
            st["fired"] = True
            st["at"] = st["acked"]
            t = time.monotonic()
            run(fault)
            st["t"] = time.monotonic() - t
    t0 = time.monotonic()
    errors, max_lat = sio.run_queue(h, ops, qd, on_done=done)
    took = time.monotonic() - t0
    if fault:
        res.check(st["fired"], "the fault (%s) came after %d of %d writes were acknowledged"
                  % (fault.split("/")[-1].replace("'", ""), st["at"], len(ops)))
    res.check(not errors, "no write failed: %d writes of %d KiB at QD %d in %.1f s, slowest %.2f s%s"
              % (len(ops), bs // 1024, qd, took, max_lat,
                 "" if not errors else "; %d failed, the first at byte %d with %s"
                 % (len(errors), errors[0][0] * bs, ename(errors[0][1]))))
    if timeout_s and max_timeouts:
        stream = took - st["t"]
        res.check(stream < max_timeouts * timeout_s,
                  "the degraded stream takes under %g command timeouts: %.1f s = %.2f x %.1f s "
                  "(without the %.1f s the fault command took)"
                  % (max_timeouts, stream, stream / timeout_s, timeout_s, st["t"]))
    try:
        h.flush()
        res.check(True, "a flush after the writes succeeds")
    except Exception as e:  # noqa: BLE001 - the failure is the finding
        res.check(False, "a flush after the writes succeeds: %s" % e)
    back = sio.read_all(h, len(data))
    res.check(back == data, "every acknowledged write reads back (%d MiB)" % (len(data) >> 20))
    h.shutdown()
    return 1 if res.failed else 0


def cmd_read(args):
    uri, data = args[0], open(args[1], "rb").read()
    bs = int(opts_of(args[2:]).get("--bs", 256 * 1024))
    res = sio.Result()
    h = sio.nbd_open(uri)
    ops = [("r", off, min(bs, len(data) - off)) for off in range(0, len(data), bs)]
    t0 = time.monotonic()
    errors, max_lat = sio.run_queue(h, ops, 8)
    took = time.monotonic() - t0
    res.check(not errors, "every read of the disk succeeds: %d reads of %d KiB in %.1f s, "
              "slowest %.2f s%s" % (len(ops), bs // 1024, took, max_lat,
                                   "" if not errors else "; %d failed, the first at byte %d with %s"
                                   % (len(errors), errors[0][0] * bs, ename(errors[0][1]))))
    back = sio.read_all(h, len(data)) if not errors else b""
    res.check(back == data, "the disk reads back as written (%d MiB)" % (len(data) >> 20))
    h.shutdown()
    return 1 if res.failed else 0


def cmd_cut(args):
    uri, m, data = args[0], sio.Map(args[1]), open(args[2], "rb").read()
    o = opts_of(args[3:])
    dead, live = int(o["--column"]), int(o["--live-column"])
    limit = int(o["--timeout-ms"]) / 1000.0 + 2.0
    res = sio.Result()
    h = sio.nbd_open(uri)
    import nbd
    off_dead = sio.column_offsets(m, dead, 1, 4096, start_unit=1)[0]
    live_offs = sio.column_offsets(m, live, 16, 4096)
    run(o["--cut"])
    t0 = time.monotonic()
    buf = nbd.Buffer(4096)
    cookie = h.aio_pread(buf, off_dead)

    def outcome():
        """None while the read waits, else 0 or its errno."""
        try:
            return 0 if h.aio_command_completed(cookie) else None
        except nbd.Error as e:
            return sio.err_code(e) or -1
    worst, ok, n_live, probe_worst = 0.0, True, 0, 0.0
    err = None
    # while the cut server's read waits, the other column answers
    while err is None and time.monotonic() - t0 < limit + 5:
        for off in live_offs[:4]:
            t = time.monotonic()
            try:
                got = h.pread(4096, off)
                h.pwrite(got, off)
            except Exception as e:  # noqa: BLE001
                print("live column byte %d: %s" % (off, e))
                got = None
            worst = max(worst, time.monotonic() - t)
            ok = ok and got == data[off:off + 4096]
            n_live += 1
        if o.get("--probe"):
            t = time.monotonic()
            r = subprocess.run(o["--probe"], shell=True, capture_output=True)
            probe_worst = max(probe_worst, time.monotonic() - t)
            ok = ok and r.returncode == 0
        h.poll(100)
        err = outcome()
    done = err is not None
    t_read = time.monotonic() - t0
    res.check(done and err != 0 and t_read <= limit,
              "a read of the cut server's column fails after %.1f s with %s (command timeout %.1f s; "
              "limit %.1f s)" % (t_read, ename(err) if done else "no answer",
                                 limit - 2.0, limit))
    res.check(ok and n_live > 0 and worst < 1.0 and probe_worst < 1.0,
              "meanwhile %d reads+writes of the other column answered with the right data "
              "(slowest %.2f s) and tapdisk's control socket answered (slowest %.2f s)"
              % (n_live, worst, probe_worst))
    err, t = sio.timed(lambda: h.pwrite(b"\x5a" * 4096, off_dead))
    res.check(err != 0 and t <= limit,
              "a write to the cut server's column fails with %s after %.1f s (limit %.1f s)"
              % (ename(err), t, limit))
    run(o["--restore"])
    t0 = time.monotonic()
    got = None
    while time.monotonic() - t0 < 30:
        try:
            got = h.pread(4096, off_dead)
            break
        except Exception:  # noqa: BLE001
            time.sleep(0.2)
    res.check(got == data[off_dead:off_dead + 4096],
              "after the restore the column reads its data again (%.1f s after the restore)"
              % (time.monotonic() - t0))
    err, _ = sio.timed(lambda: h.pwrite(data[off_dead:off_dead + 4096], off_dead))
    res.check(err == 0, "after the restore the column takes writes again")
    h.flush()
    h.shutdown()
    return 1 if res.failed else 0


COMMANDS = {"write": cmd_write, "read": cmd_read, "cut": cmd_cut}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
