# SPDX-License-Identifier: BSD-3-Clause
"""quick.py - the probes of `td-bench regress --quick`: a minute or two, in CI.

Chosen to be stable on a noisy, shared 2-core machine and yet to catch a
crippled configuration:

 counters (deterministic: tapdisk's own counters, read by td-front)
  quick.ring.write1m-seg256.requests_per_io      1 MiB O_DIRECT writes, QD 1,
        256 segments, ring order 4: requests tapdisk received per write (1;
        24 when tapdisk or the frontend is held to 11 segments)
  quick.ring.write1m-seg256.segments_per_request  (256; 10.67 at 11 segments)
  quick.ring.write1m-seg11.requests_per_io       the same at 11 segments:
        blkfront's split into 24 direct requests (23 x 44 KiB + 12 KiB)
  quick.ring.write1m-seg11.submits_per_io        backend submissions per
        write: aio joins the 24 pieces into one (1; 24 if merging breaks)
  quick.sort.interleave.submits_per_round        28 interleaved 4 KiB writes
        per round through sort|aio:...,merge=off (1; 28 without sort's merging)
  quick.sort.interleave.merge_factor             requests per backend
        submission in those rounds (28; 1 without merging)
 throughput ratios (same run, targets in rotated order, medians of --reps)
  quick.ring.seqwrite1m-qd8.ratio    td-front through the ring / fio libaio
                                     O_DIRECT on the same file
  quick.ring.randread4k-qd32.ratio   the same, 4 KiB random reads
  quick.nbd.randread4k-qd32.ratio    fio's nbd engine on tapdisk's NBD export /
                                     fio libaio O_DIRECT
 The counters have tight tolerances (10 % on the request shapes, where any
 change is a real one).  The throughput ratios have generous ones (60 %:
 they fail below 0.4 x the baseline): on a 2-core machine shared with
 compilers and QEMU, the per-repetition ratio of 4 KiB random reads on
 tmpfs was seen anywhere from 0.8 to 2.2, because a one-process target
 (fio) and a two-process one (td-front + tapdisk) lose CPU to others
 differently.  They catch a virtual path that became several times slower,
 not one that lost 10 %: measure that with `td-bench mix` on a quiet
 machine.
"""
import fnmatch

from .core import KIB, MIB, BenchError, fmt_num, fmt_size, fmt_spread
from .targets import Backing, Tapdisk, fio, td_front, td_front_workload

COUNTER_BYTES = 32 * MIB
SORT_ROUNDS = 50
THROUGHPUT_TOLERANCE = 0.6
COUNTER_TOLERANCE = 0.1

JOBS = [  # name, workload, block size, QD, virtual targets
    ("seqwrite1m-qd8", "seqwrite", MIB, 8, ("ring",)),
    ("randread4k-qd32", "randread", 4 * KIB, 32, ("ring", "nbd")),
]


def _write1m(ctx, td, segs, rep):
    r = td_front(ctx.lab, td, ["--pattern", "seq", "--rw", "write", "--bs", "1m", "--qd", "1",
                               "--bytes", str(COUNTER_BYTES), "--max-segments", str(segs),
                               "--ring-order", "4"], seed=rep + 1)
    b = r.backend
    if not b or not r.ios:
        raise BenchError("td-front got no backend counters from tapdisk")
    return (b["requests_total"] / r.ios, b["ring_segments"] / max(1, b["ring_requests"]),
            b["backend_submits"] / r.ios)


def _interleave(ctx, td, rep):
    r = td_front(ctx.lab, td, ["--pattern", "interleave", "--rounds", str(SORT_ROUNDS)],
                 seed=rep + 1)
    b = r.backend
    return b["backend_submits"] / SORT_ROUNDS, b["requests_total"] / max(1, b["backend_submits"])


def _wanted(a, *names):
    """regress --only GLOB: probes none of whose metrics match are not run."""
    return not a.only or any(fnmatch.fnmatch(n, p) for n in names for p in a.only)


def run(ctx):
    a = ctx.args
    res = ctx.results
    segs_run = [s for s in (256, 11) if _wanted(a, *[
        "quick.ring.write1m-seg%d.%s" % (s, k) for k in ("requests_per_io",
                                                         "segments_per_request",
                                                         "submits_per_io")])]
    sort_run = _wanted(a, "quick.sort.interleave.submits_per_round",
                       "quick.sort.interleave.merge_factor")
    jobs = [j for j in JOBS if _wanted(a, *["quick.%s.%s.ratio" % ("nbd" if t == "nbd" else "ring",
                                                                 j[0]) for t in j[4]])]
    backing = Backing(ctx.lab, a.dir, a.size, None)
    sort_file = Backing(ctx.lab, a.dir, 8 * MIB, None, fill=False)
    sort_chain = "sort%s|aio:%s,merge=off" % (":" + a.sort_opts if a.sort_opts else "",
                                               sort_file.path)
    ctx.setting("backing", "%s (%s), %s" % (backing.path, backing.fs, fmt_size(backing.size)))
    ctx.setting("sort chain", sort_chain)
    ctx.setting("throughput runs", "%g s each, %d repetitions, rotated" % (a.runtime, a.reps))
    if ctx.lab.tapdisk_opts:
        ctx.setting("tapdisk options", " ".join(ctx.lab.tapdisk_opts))
    per_rep = len(segs_run) + sort_run + sum(1 + len(v) for *_, v in jobs)
    ctx.progress.total = a.reps * per_rep
    td = Tapdisk(ctx.lab, "aio:" + backing.path, name="aio")
    tds = Tapdisk(ctx.lab, sort_chain, name="sort")
    c = {}
    thr = {}
    try:
        for rep in range(a.reps):
            for segs in segs_run:
                ctx.progress.step("quick rep %d/%d: 1 MiB writes, %d segments" % (
                    rep + 1, a.reps, segs))
                for k, v in zip(("requests_per_io", "segments_per_request", "submits_per_io"),
                                _write1m(ctx, td, segs, rep)):
                    c.setdefault(("write1m-seg%d" % segs, k), []).append(v)
            if sort_run:
                ctx.progress.step("quick rep %d/%d: sort, interleaved writes" % (rep + 1, a.reps))
                for k, v in zip(("submits_per_round", "merge_factor"), _interleave(ctx, tds, rep)):
                    c.setdefault(("interleave", k), []).append(v)
            for name, w, bs, qd, virt in jobs:
                targets = ("physical",) + virt
                k = rep % len(targets)
                for t in targets[k:] + targets[:k]:
                    ctx.progress.step("quick rep %d/%d: %s %s" % (rep + 1, a.reps, name, t))
                    if t == "physical":
                        r = fio(ctx.lab, w, bs, qd, backing.size, runtime=a.runtime,
                                path=backing.path)
                    elif t == "nbd":
                        r = fio(ctx.lab, w, bs, qd, backing.size, runtime=a.runtime,
                                uri=td.nbd_uri)
                    else:
                        r = td_front(ctx.lab, td, td_front_workload(
                            w, bs, qd, runtime=a.runtime,
                            frontend=["--max-segments", "256", "--ring-order", "4"]),
                            seed=rep + 1)
                    thr.setdefault((name, t), []).append(r.iops)
    finally:
        td.stop()
        tds.stop()
        backing.remove()
        sort_file.remove()
    ctx.progress.clear()
    _report(res, c, thr, jobs)


COUNTERS = [  # (probe, key): better, tolerance, text
    (("write1m-seg256", "requests_per_io"), "lower", COUNTER_TOLERANCE,
     "1 MiB write, 256 segments: requests per write"),
    (("write1m-seg256", "segments_per_request"), "higher", COUNTER_TOLERANCE,
     "1 MiB write, 256 segments: segments per request"),
    (("write1m-seg11", "requests_per_io"), "lower", COUNTER_TOLERANCE,
     "1 MiB write, 11 segments: requests per write"),
    (("write1m-seg11", "submits_per_io"), "lower", 0.5,
     "1 MiB write, 11 segments: backend submissions per write"),
    (("interleave", "submits_per_round"), "lower", 1.0,
     "sort, 28 interleaved 4 KiB writes: backend submissions per round"),
    (("interleave", "merge_factor"), "higher", 0.5,
     "sort, 28 interleaved 4 KiB writes: requests per backend submission"),
]


def _report(res, c, thr, jobs):
    rows = []
    for (probe, key), better, tol, text in COUNTERS:
        if (probe, key) not in c:
            continue
        section = "sort" if probe == "interleave" else "ring"
        f = res.add("quick.%s.%s.%s" % (section, probe, key), c[(probe, key)], key,
                    kind="ratio", better=better, tolerance=tol)
        rows.append([text, "%.2f" % f["value"], "/".join("%g" % round(v, 2)
                                                          for v in sorted(set(f["reps"])))])
    if rows:
        res.table("quick: request shapes from tapdisk's counters",
                  ["probe", "median", "values seen"], rows)
    rows = []
    for name, _w, _bs, _qd, virt in jobs:
        phys = thr[(name, "physical")]
        for t in virt:
            f = res.ratio("quick.%s.%s.ratio" % ("nbd" if t == "nbd" else "ring", name),
                          thr[(name, t)], phys, tolerance=THROUGHPUT_TOLERANCE)
            rows.append([name, "shm ring (td-front)" if t == "ring" else "NBD (fio nbd)",
                         fmt_num(sorted(phys)[len(phys) // 2], 0),
                         fmt_num(sorted(thr[(name, t)])[len(phys) // 2], 0),
                         "**%.2f**" % f["value"], fmt_spread(f)])
    if not rows:
        return
    res.table("quick: virtual against physical (fio libaio O_DIRECT), same file",
              ["job", "virtual", "physical IOPS", "virtual IOPS", "virtual/physical", "±"], rows,
              ["Medians; ± is half the spread of the per-repetition ratios."])
