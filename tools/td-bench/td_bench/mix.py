# SPDX-License-Identifier: BSD-3-Clause
"""mix.py - Zhao & Tan's workload mix: what the virtual disk loses.

Sequential read, sequential write, random read, random write and a 70/30
random read/write mix, at 4 KiB and 64 KiB, QD 1 and 32, each for --runtime
seconds: physical is fio (libaio, O_DIRECT) on the backing file, virtual
is the same workload through tapdisk -a aio:BACKING (td-front over the shm
ring, or fio's nbd engine with --via nbd).  Random offsets are aligned to
the block size in both.  Loss = 1 - virtual/physical (IOPS).
"""
from .core import KIB, fmt_num, fmt_size, fmt_spread, median
from .targets import Backing, Tapdisk, fio, td_front, td_front_workload

WORKLOADS = ["seqread", "seqwrite", "randread", "randwrite", "randrw70"]
NAMES = {"seqread": "seq read", "seqwrite": "seq write", "randread": "rand read",
         "randwrite": "rand write", "randrw70": "rand 70/30 r/w"}
DEFAULT_BS = [4 * KIB, 64 * KIB]
DEFAULT_QD = [1, 32]


def job_name(w, bs, qd):
    return "%s-%dk-qd%d" % (w, bs // KIB, qd)


def measure(ctx, td, backing, target, w, bs, qd, runtime, rep):
    if target == "physical":
        return fio(ctx.lab, w, bs, qd, backing.size, runtime=runtime, path=backing.path)
    if ctx.args.via == "nbd":
        return fio(ctx.lab, w, bs, qd, backing.size, runtime=runtime, uri=td.nbd_uri)
    return td_front(ctx.lab, td, td_front_workload(w, bs, qd, runtime=runtime,
                                                   frontend=ctx.frontend), seed=rep + 1)


def run(ctx):
    a = ctx.args
    jobs = [(w, bs, qd) for bs in (a.bs or DEFAULT_BS) for qd in (a.qd or DEFAULT_QD)
            for w in (a.workloads or WORKLOADS)]
    backing = Backing(ctx.lab, a.dir, a.size, a.backing)
    ctx.results.data["settings"].update({
        "backing": "%s (%s), %s" % (backing.path, backing.fs, fmt_size(backing.size)),
        "virtual": "tapdisk -a aio:BACKING over %s" % (
            "the shm ring (td-front %s)" % " ".join(ctx.frontend) if a.via == "shm"
            else "NBD (fio nbd engine)"),
        "physical": "fio libaio O_DIRECT on the backing",
        "runtime": "%g s per run" % a.runtime, "repetitions": a.reps})
    td = Tapdisk(ctx.lab, "aio:" + backing.path)
    got = {}
    ctx.progress.total = len(jobs) * 2 * a.reps
    try:
        for rep in range(a.reps):
            for w, bs, qd in jobs:
                targets = ["physical", "virtual"] if rep % 2 == 0 else ["virtual", "physical"]
                for t in targets:
                    ctx.progress.step("mix rep %d/%d: %s %s QD%d %s" % (
                        rep + 1, a.reps, NAMES[w], fmt_size(bs), qd, t))
                    got.setdefault((w, bs, qd, t), []).append(
                        measure(ctx, td, backing, t, w, bs, qd, a.runtime, rep))
    finally:
        td.stop()
        backing.remove()
    ctx.progress.clear()
    report(ctx, got, jobs, "mix")


def report(ctx, got, jobs, prefix, title=None):
    res = ctx.results
    rows = []
    for w, bs, qd in jobs:
        p, v = got[(w, bs, qd, "physical")], got[(w, bs, qd, "virtual")]
        name = "%s.%s" % (prefix, job_name(w, bs, qd))
        fp = res.add(name + ".physical_iops", [r.iops for r in p], "IOPS")
        fv = res.add(name + ".virtual_iops", [r.iops for r in v], "IOPS")
        res.add(name + ".physical_mib_s", [r.mib_s for r in p], "MiB/s")
        res.add(name + ".virtual_mib_s", [r.mib_s for r in v], "MiB/s")
        fr = res.ratio(name + ".ratio", [r.iops for r in v], [r.iops for r in p])
        rows.append([NAMES[w], fmt_size(bs), str(qd), fmt_num(fp["value"], 0),
                     fmt_num(median([r.mib_s for r in p])), fmt_spread(fp),
                     fmt_num(fv["value"], 0), fmt_num(median([r.mib_s for r in v])),
                     fmt_spread(fv), "**%.2f**" % fr["value"],
                     "%+.0f%%" % (100 * (1 - fr["value"]))])
    res.table(title or "mix: virtual against physical (loss table)",
              ["workload", "block", "QD", "physical IOPS", "MiB/s", "±", "virtual IOPS",
               "MiB/s", "±", "virtual/physical", "loss"], rows,
              ["Medians of %d repetitions of %g s; ± is half the spread (max - min) / "
               "median; loss = 1 - virtual/physical (negative: the virtual disk is faster)."
               % (len(p), ctx.args.runtime)])
