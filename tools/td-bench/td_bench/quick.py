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
 QD 1 latency (as `td-bench sweep` measures it: MiB/s of td-front through
 the ring / dd O_DIRECT on the same file, 4 KiB, QD 1, the same bytes)
  quick.ring.dread4k-qd1.ratio       direct reads, polling off
  quick.ring.dwrite4k-qd1.ratio      direct writes, polling off
  quick.ring.dread4k-qd1-poll.ratio  direct reads, tapdisk --poll-us and
                                     td-front --poll-us (QD1_POLL_US)
  quick.ring.dwrite4k-qd1-poll.ratio direct writes, the same
  quick.ring.dread4k-qd1-poll.polled_fraction   the share of those requests
  quick.ring.dwrite4k-qd1-poll.polled_fraction  tapdisk's poller took rather
        than a notification (tapdisk's shm.ring.polled_requests): ~0.9, and
        0 when tapdisk does not poll
 The counters have tight tolerances (10 % on the request shapes, where any
 change is a real one).  The throughput ratios have generous ones (60 %:
 they fail below 0.4 x the baseline): on a 2-core machine shared with
 compilers and QEMU, the per-repetition ratio of 4 KiB random reads on
 tmpfs was seen anywhere from 0.8 to 2.2, because a one-process target
 (fio) and a two-process one (td-front + tapdisk) lose CPU to others
 differently.  They catch a virtual path that became several times slower,
 not one that lost 10 %: measure that with `td-bench mix` on a quiet
 machine.  The QD 1 ratios are noisier still (QD1_TOLERANCE, 75 %): on
 tmpfs dd's 4 KiB O_DIRECT request takes 1-5 us, so any preemption moves
 the physical side, and the two processes of the virtual side wake each
 other once per request; their medians over 5 repetitions ranged
 0.08-0.67 on the busy machine (bench/README.md).  They catch a QD 1 path
 4 times slower.  Polling that silently stopped is caught by the polled fraction,
 which is exactly 0 without polling and was 0.79-0.96 under a load
 average of 6-11; its tolerance (POLLED_TOLERANCE, 90 %) leaves room for
 the back-off under contention (0.25 and 0.63 were seen while the tree
 was being compiled with make -j2 beside it).
"""
import fnmatch

from .core import KIB, MIB, BenchError, fmt_num, fmt_size, fmt_spread, median
from .targets import Backing, Tapdisk, dd, fio, td_front, td_front_workload

COUNTER_BYTES = 32 * MIB
SORT_ROUNDS = 50
THROUGHPUT_TOLERANCE = 0.6
COUNTER_TOLERANCE = 0.1
QD1_BYTES = 128 * MIB  # per run: 32768 requests of 4 KiB
QD1_POLL_US = 200
QD1_TOLERANCE = 0.75
POLLED_TOLERANCE = 0.9

JOBS = [  # name, workload, block size, QD, virtual targets
    ("seqwrite1m-qd8", "seqwrite", MIB, 8, ("ring",)),
    ("randread4k-qd32", "randread", 4 * KIB, 32, ("ring", "nbd")),
]

QD1_JOBS = [  # name, td-front --rw: 4 KiB O_DIRECT at QD 1, polling off and on
    ("dread4k-qd1", "read"),
    ("dwrite4k-qd1", "write"),
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


def _qd1(ctx, td, tdp, backing, op, target, rep):
    """One cell of the QD 1 probe: dd on the file, or td-front through td
    (polling off) or tdp (both sides polling)."""
    nbytes = min(QD1_BYTES, backing.size)
    if target == "physical":
        return dd(backing.path, op, 4 * KIB, nbytes)
    args = ["--pattern", "seq", "--rw", op, "--bs", "4k", "--qd", "1", "--bytes",
            str(nbytes), "--max-segments", "256", "--ring-order", "4"]
    if target == "poll":
        return td_front(ctx.lab, tdp, args + ["--poll-us", str(QD1_POLL_US)], seed=rep + 1)
    return td_front(ctx.lab, td, args, seed=rep + 1)


def _qd1_rep(ctx, qd1, td, tdp, backing, rep, got):
    for name, op in qd1:
        targets = ("physical", "off", "poll")
        k = rep % len(targets)
        for t in targets[k:] + targets[:k]:
            ctx.progress.step("quick rep %d/%d: %s %s" % (rep + 1, ctx.args.reps, name, t))
            got.setdefault((name, t), []).append(_qd1(ctx, td, tdp, backing, op, t, rep))


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
    qd1 = [j for j in QD1_JOBS if _wanted(a, "quick.ring.%s.ratio" % j[0],
                                          "quick.ring.%s-poll.ratio" % j[0],
                                          "quick.ring.%s-poll.polled_fraction" % j[0])]
    backing = Backing(ctx.lab, a.dir, a.size, None)
    sort_file = Backing(ctx.lab, a.dir, 8 * MIB, None, fill=False)
    sort_chain = "sort%s|aio:%s,merge=off" % (":" + a.sort_opts if a.sort_opts else "",
                                               sort_file.path)
    ctx.setting("backing", "%s (%s), %s" % (backing.path, backing.fs, fmt_size(backing.size)))
    ctx.setting("sort chain", sort_chain)
    ctx.setting("throughput runs", "%g s each, %d repetitions, rotated" % (a.runtime, a.reps))
    if ctx.lab.tapdisk_opts:
        ctx.setting("tapdisk options", " ".join(ctx.lab.tapdisk_opts))
    if qd1:
        ctx.setting("QD 1 runs", "4 KiB, %s each, polling off and --poll-us %d (both sides)"
                    % (fmt_size(min(QD1_BYTES, backing.size)), QD1_POLL_US))
    per_rep = len(segs_run) + sort_run + sum(1 + len(v) for *_, v in jobs) + 3 * len(qd1)
    ctx.progress.total = a.reps * per_rep
    td = Tapdisk(ctx.lab, "aio:" + backing.path, name="aio")
    tds = Tapdisk(ctx.lab, sort_chain, name="sort")
    tdp = Tapdisk(ctx.lab, "aio:" + backing.path, name="aiopoll",
                  opts=["--poll-us=%d" % QD1_POLL_US]) if qd1 else None
    c = {}
    thr = {}
    lat = {}
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
            _qd1_rep(ctx, qd1, td, tdp, backing, rep, lat)
    finally:
        td.stop()
        tds.stop()
        if tdp:
            tdp.stop()
        backing.remove()
        sort_file.remove()
    ctx.progress.clear()
    _report(res, c, thr, jobs)
    _report_qd1(res, lat, qd1)


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


def _report_qd1(res, lat, qd1):
    rows = []
    for name, _op in qd1:
        phys = [r.mib_s for r in lat[(name, "physical")]]
        for t, suffix in (("off", ""), ("poll", "-poll")):
            runs = lat[(name, t)]
            virt = [r.mib_s for r in runs]
            f = res.ratio("quick.ring.%s%s.ratio" % (name, suffix), virt, phys,
                          tolerance=QD1_TOLERANCE)
            cpu = []
            for who in ("tapdisk", "td-front"):
                fc = res.add("quick.ring.%s%s.%s_cpu_us_per_req" % (
                    name, suffix, who.replace("-", "_")), [r.cpu_us_per_io(who) for r in runs],
                    "us")
                cpu.append(fc["value"])
            polled = [r.backend.get("ring_polled_requests", 0) / max(1, r.backend.get(
                "ring_requests", 0)) for r in runs]
            # Compared with polling on only: with polling off it is 0.
            fp = res.add("quick.ring.%s%s.polled_fraction" % (name, suffix), polled,
                         "fraction", **({"kind": "ratio", "better": "higher",
                                         "tolerance": POLLED_TOLERANCE} if suffix else {}))
            rows.append([name, "off" if t == "off" else "--poll-us %d" % QD1_POLL_US,
                         fmt_num(median(phys), 1), fmt_num(median(virt), 1),
                         "**%.2f**" % f["value"], fmt_spread(f),
                         fmt_num(1e6 * 4 * KIB / (median(virt) * MIB), 1)
                         if median(virt) else "-",
                         "%.1f" % cpu[0], "%.1f" % cpu[1], "%.2f" % fp["value"]])
    if rows:
        res.table("quick: QD 1, 4 KiB O_DIRECT, virtual (td-front, shm ring) against "
                  "physical (dd), same file",
                  ["job", "polling", "physical MiB/s", "virtual MiB/s", "virtual/physical",
                   "±", "virtual us/req", "tapdisk CPU us/req", "td-front CPU us/req",
                   "polled"], rows,
                  ["Medians; ± is half the spread of the per-repetition ratios; CPU is "
                   "utime + stime over the run per request; polled: the share of requests "
                   "tapdisk's poller took (the rest came with a notification)."])
