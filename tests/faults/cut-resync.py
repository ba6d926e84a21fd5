#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""cut-resync.py - writes while a replica's server is cut, then the
automatic resync after it is back (issue #19).

Usage:
  cut-resync.py URI SIZE REGION --cut CMD --restore CMD --stats CMD
                [--cut-s S] [--rate BYTES_PER_S] [--bs N]

Reads the disk (SIZE bytes) as the model's start, then writes random
data in BS-byte blocks at BS-aligned random places at about RATE bytes
per second, keeping a model of the disk.  After 2 s it runs CMD (cuts a
server off), writes on for S seconds, runs RESTORE, and writes on until
the stripe driver's report (STATS: `tap-ctl stats -i PID --json`) shows a
resync that started on its own, then 2 s more, and stops.  Checks:
  - the resync started on its own within 30 s of the restore, and ends
    "done" with no stale replica left;
  - it copied at most 2 x the bytes written between the cut and its start,
    rounded up to REGION (the regions those writes dirtied);
  - the whole disk reads back as the model.
Prints the figures (bytes written during the cut, copied, time) and one
"PASS: ..." or "FAIL: ..." line per check; exit 1 if one failed.
"""
import json
import os
import random
import subprocess
import sys
import time

import nbd


def opts_of(args):
    return dict(zip(args[0::2], args[1::2]))


def run(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if r.returncode:
        print("FAIL: %s: %s" % (cmd, (r.stderr or r.stdout).strip()), flush=True)
        sys.exit(1)
    return r.stdout


def find(o, key):
    """The first value named key, depth first."""
    if isinstance(o, dict):
        if key in o:
            return o[key]
        o = list(o.values())
    if isinstance(o, list):
        for v in o:
            r = find(v, key)
            if r is not None:
                return r
    return None


def report(stats_cmd):
    """The stripe driver's report (the object that holds "resync")."""
    j = json.loads(run(stats_cmd))
    stack = [j]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            if "resync" in o and "stale_replicas" in o:
                return o
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    print("FAIL: no stripe report in %s" % stats_cmd)
    sys.exit(1)


class Writer:
    def __init__(self, uri, size, bs, rate, seed=19):
        self.h = nbd.NBD()
        self.h.connect_uri(uri)
        self.size, self.bs, self.rate = size, bs, rate
        self.model = bytearray()
        for off in range(0, size, 1 << 20):
            self.model += self.h.pread(min(1 << 20, size - off), off)
        self.rng = random.Random(seed)
        self.log = []  # (time, offset, length) of acknowledged writes
        self.t0 = time.monotonic()
        self.sent = 0

    def step(self):
        """One write, paced to the rate."""
        due = self.t0 + self.sent / self.rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        off = self.rng.randrange(self.size // self.bs) * self.bs
        buf = self.rng.randbytes(self.bs)
        self.h.pwrite(buf, off)
        self.model[off:off + self.bs] = buf
        self.log.append((time.monotonic(), off, self.bs))
        self.sent += self.bs

    def write_for(self, seconds, until=None):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.step()
            if until and until():
                return True
        return False


def main():
    uri, size, region = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    o = opts_of(sys.argv[4:])
    cut_s = float(o.get("--cut-s", 5))
    rate = int(o.get("--rate", 4 << 20))
    bs = int(o.get("--bs", 1 << 20))
    stats = o["--stats"]
    bad = 0

    w = Writer(uri, size, bs, rate)
    copied0 = report(stats)["resync"]["bytes_copied_since_open"]
    w.write_for(2)
    t_cut = time.monotonic()
    run(o["--cut"])
    w.write_for(cut_s)
    t_restore = time.monotonic()
    run(o["--restore"])

    def started():
        rs = report(stats)["resync"]
        return rs["bytes_copied_since_open"] > copied0 or (
            rs["state"] == "running" and rs.get("automatic"))
    ok = w.write_for(30, until=started)
    t_start = time.monotonic()
    if ok:
        print("PASS: a resync started on its own %.1f s after the restore"
              % (t_start - t_restore), flush=True)
    else:
        print("FAIL: no resync started on its own within 30 s of the restore: %s"
              % json.dumps(report(stats)["resync"]), flush=True)
        return 1
    w.write_for(2)
    w.h.flush()
    written = sum(n for t, _, n in w.log if t_cut <= t <= t_start)
    written_cut = sum(n for t, _, n in w.log if t_cut <= t <= t_restore)
    regions = {off // region for t, off, n in w.log if t_cut <= t <= t_start}
    rep = None
    for _ in range(600):
        rep = report(stats)
        if rep["resync"]["state"] != "running" and not rep["stale_replicas"]:
            break
        time.sleep(0.1)
    rs = rep["resync"]
    copied = rs["bytes_copied_since_open"] - copied0
    if rs["state"] == "done" and not rep["stale_replicas"]:
        print("PASS: the resync ended done, no stale replica left", flush=True)
    else:
        bad += 1
        print("FAIL: resync %s, %d stale replicas left: %s"
              % (rs["state"], rep["stale_replicas"], rs.get("last_error")), flush=True)
    bound = 2 * -(-written // region) * region
    print("figures: %d bytes written during the cut (%.1f s), %d from the cut to "
          "the resync's start (%d regions of %d), %d bytes copied, extent %d bytes"
          % (written_cut, t_restore - t_cut, written, len(regions), region,
             copied, rep["extent_size_bytes"]), flush=True)
    if 0 < copied <= bound:
        print("PASS: copied %d bytes <= 2 x %d written (rounded up to %d)"
              % (copied, written, region), flush=True)
    else:
        bad += 1
        print("FAIL: copied %d bytes, written %d: the bound is %d"
              % (copied, written, bound), flush=True)
    back = bytearray()
    for off in range(0, size, 1 << 20):
        back += w.h.pread(min(1 << 20, size - off), off)
    if back == w.model:
        print("PASS: the whole disk reads back as written", flush=True)
    else:
        bad += 1
        first = next(i for i in range(size) if back[i] != w.model[i])
        print("FAIL: the disk differs from the model, first at byte %d" % first,
              flush=True)
    w.h.shutdown()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
