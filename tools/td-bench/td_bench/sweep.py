# SPDX-License-Identifier: BSD-3-Clause
"""sweep.py - Giacobbi & Vardanega's dd sweeps, physical against virtual.

Block sizes 512 B .. 1 MiB at a fixed data size, for
  dwrite  direct write (O_DIRECT)
  dread   direct read  (O_DIRECT)
  bwrite  buffered write, timed with its fdatasync, the page cache dropped
          before each run (root only): only where the path has a page cache,
          which is the physical file; the shm ring and NBD paths have none
          (tapdisk's aio is O_DIRECT), so its virtual column is empty
physical: dd on the backing file or device, as the paper ran it (QD 1).
virtual:  the same I/O sizes, QD 1, through tapdisk -a aio:BACKING: over the
          shm blkif ring with td-front (--via shm), or NBD with fio's nbd
          engine (--via nbd).
Then a data-size sweep at 1 MiB blocks, to show where the figures settle.
The block-size tables also show the CPU time tapdisk and td-front spent
per request on the shm path (utime + stime over each run / requests): with
--poll-us both sides poll instead of sleeping, which buys latency with CPU.
Every repetition runs every cell; targets alternate their order.
"""
from .core import (MIB, drop_caches, fmt_num, fmt_size, fmt_spread, median,
                   short_size)
from .targets import Backing, Tapdisk, dd, fio, td_front

MODES = {"dwrite": "direct write", "dread": "direct read",
         "bwrite": "buffered write (+ fdatasync)"}
DEFAULT_BS = [512 << i for i in range(12)]  # 512 B .. 1 MiB


def data_sizes(size, explicit):
    if explicit is not None:
        return explicit
    out, s = [], 16 * MIB
    while s < size:
        out.append(s)
        s *= 4
    return out + [size]


def _measure(ctx, td, backing, mode, target, bs, nbytes, rep):
    if target == "physical":
        if mode == "bwrite":
            ctx.cache_dropped &= drop_caches()
            return dd(backing.path, "write", bs, nbytes, direct=False, fdatasync=True)
        return dd(backing.path, "write" if mode == "dwrite" else "read", bs, nbytes)
    op = "write" if mode == "dwrite" else "read"
    if ctx.args.via == "nbd":
        return fio(ctx.lab, "seq" + op, bs, 1, backing.size, uri=td.nbd_uri, nbytes=nbytes)
    return td_front(ctx.lab, td, ["--pattern", "seq", "--rw", op, "--bs", short_size(bs),
                                  "--qd", "1", "--bytes", str(nbytes)] + ctx.frontend,
                    seed=rep + 1)


def _cells(ctx, bss, sizes):
    cells = []
    for mode in ctx.args.modes:
        targets = ["physical"] if mode == "bwrite" else ["physical", "virtual"]
        cells += [("bs", mode, t, bs, ctx.args.size) for bs in bss for t in targets]
        cells += [("size", mode, t, MIB, s) for s in sizes for t in targets]
    return cells


def run(ctx):
    a = ctx.args
    bss = a.bs or DEFAULT_BS
    sizes = data_sizes(a.size, a.data_sizes)
    backing = Backing(ctx.lab, a.dir, a.size, a.backing)
    ctx.results.data["settings"].update({
        "backing": "%s (%s), %s" % (backing.path, backing.fs, fmt_size(backing.size)),
        "virtual": "tapdisk -a aio:BACKING over %s" % (
            "the shm ring (td-front %s)" % " ".join(ctx.frontend) if a.via == "shm"
            else "NBD (fio nbd engine)"),
        "data size": fmt_size(a.size), "repetitions": a.reps,
        "polling": "--poll-us %d (tapdisk and td-front)" % a.poll_us if a.poll_us
        else "off"})
    ctx.cache_dropped = True
    td = Tapdisk(ctx.lab, "aio:" + backing.path)
    cells = _cells(ctx, bss, sizes)
    got = {}
    ctx.progress.total = len(cells) * a.reps
    try:
        for rep in range(a.reps):
            # Alternate which target of a cell goes first, repetition by repetition.
            for kind, mode, target, bs, nbytes in _rotated(cells, rep):
                ctx.progress.step("sweep rep %d/%d: %s %s %s, %s" % (
                    rep + 1, a.reps, target, MODES[mode].split(" (")[0], fmt_size(bs),
                    fmt_size(nbytes)))
                r = _measure(ctx, td, backing, mode, target, bs, nbytes, rep)
                got.setdefault((kind, mode, target, bs, nbytes), []).append(r)
    finally:
        td.stop()
        backing.remove()
    ctx.progress.clear()
    _report(ctx, got, bss, sizes)


def _rotated(cells, rep):
    """Cells in order, but each physical/virtual pair swapped on odd reps."""
    if rep % 2 == 0:
        return cells
    out, i = [], 0
    while i < len(cells):
        if i + 1 < len(cells) and cells[i][:2] == cells[i + 1][:2] and \
                cells[i][3:] == cells[i + 1][3:]:
            out += [cells[i + 1], cells[i]]
            i += 2
        else:
            out.append(cells[i])
            i += 1
    return out


def _figs(ctx, got, prefix, key_p, key_v):
    res = ctx.results
    p = got.get(key_p)
    v = got.get(key_v)
    fp = res.add(prefix + ".physical_mib_s", [r.mib_s for r in p], "MiB/s") if p else None
    fv = res.add(prefix + ".virtual_mib_s", [r.mib_s for r in v], "MiB/s") if v else None
    fr = res.ratio(prefix + ".ratio", [r.mib_s for r in v], [r.mib_s for r in p]) \
        if p and v else None
    return p, v, fp, fv, fr


def _cpu_figs(ctx, prefix, v):
    """The CPU per request of each side of the shm ring, as table cells."""
    cells = []
    for who, key in (("tapdisk", "tapdisk_cpu_us_per_req"),
                     ("td-front", "td_front_cpu_us_per_req")):
        reps = [r.cpu_us_per_io(who) for r in v or []]
        if not reps or None in reps:
            cells.append("n/a")
            continue
        fig = ctx.results.add(prefix + "." + key, reps, "µs", better="lower")
        cells.append("%.1f" % fig["value"])
    return cells


def _report(ctx, got, bss, sizes):
    a = ctx.args
    res = ctx.results
    notes = ["Medians of %d repetitions; ± is half the spread (max - min) / median. "
             "count = data size / block size; time in seconds; MiB/s = 2^20 bytes/s."
             % a.reps]
    series = {}
    for mode in a.modes:
        rows = []
        for bs in bss:
            p, v, fp, fv, fr = _figs(ctx, got, "sweep.%s.%s" % (mode, short_size(bs)),
                                     ("bs", mode, "physical", bs, a.size),
                                     ("bs", mode, "virtual", bs, a.size))
            cpu = _cpu_figs(ctx, "sweep.%s.%s" % (mode, short_size(bs)), v)
            rows.append([fmt_size(bs), "{:,}".format(a.size // bs),
                         "%.3f" % median([r.seconds for r in p]), fmt_num(fp["value"]),
                         fmt_spread(fp),
                         "%.3f" % median([r.seconds for r in v]) if v else "n/a",
                         fmt_num(fv["value"]) if fv else "n/a", fmt_spread(fv),
                         "**%.2f**" % fr["value"] if fr else "n/a"] + cpu)
            series.setdefault((mode, "physical"), []).append((bs / 1024, fp["value"]))
            if fv:
                series.setdefault((mode, "virtual"), []).append((bs / 1024, fv["value"]))
        n = list(notes)
        if mode != "bwrite" and a.via == "shm":
            n.append("CPU µs/req: utime + stime of tapdisk and of td-front over each "
                     "virtual run, divided by its requests (polling %s)." % (
                         "on, --poll-us %d on both sides" % a.poll_us if a.poll_us
                         else "off"))
        if mode == "bwrite":
            n.append("Virtual: n/a, the %s path has no page cache (tapdisk's aio is O_DIRECT). "
                     "Page cache %s before each run." % (
                         a.via, "dropped" if ctx.cache_dropped else
                         "NOT dropped (not root): the figure includes earlier dirty pages"))
        res.table("sweep: %s, %s per run (%s)" % (MODES[mode], fmt_size(a.size),
                                                 res.data["settings"]["backing"].split(",")[0]),
                  ["block size", "count", "physical s", "physical MiB/s", "±",
                   "virtual s", "virtual MiB/s", "±", "virtual/physical",
                   "tapdisk CPU µs/req", "td-front CPU µs/req"], rows, n)
    if sizes:
        rows = []
        for s in sizes:
            row = [fmt_size(s), "{:,}".format(s // MIB)]
            for mode in a.modes:
                p, v, fp, fv, fr = _figs(ctx, got, "sweep.size.%s.%s" % (mode, short_size(s)),
                                         ("size", mode, "physical", MIB, s),
                                         ("size", mode, "virtual", MIB, s))
                row += [fmt_num(fp["value"]) + " " + fmt_spread(fp)]
                series.setdefault(("size-" + mode, "physical"), []).append((s / MIB, fp["value"]))
                if mode != "bwrite":
                    row += [fmt_num(fv["value"]) + " " + fmt_spread(fv), "%.2f" % fr["value"]]
                    series.setdefault(("size-" + mode, "virtual"), []).append(
                        (s / MIB, fv["value"]))
            rows.append(row)
        cols = ["data size", "count"]
        for mode in a.modes:
            short = {"dwrite": "direct write", "dread": "direct read",
                     "bwrite": "buffered write"}[mode]
            cols += ["%s phys MiB/s" % short]
            if mode != "bwrite":
                cols += ["%s virt MiB/s" % short, "virt/phys"]
        res.table("sweep: data size at 1 MiB blocks", cols, rows,
                  ["Where the figures stop moving with the data size is the smallest "
                   "size worth measuring with."])
    _plots(ctx, series)


COLORS = {"dwrite": "#c0392b", "dread": "#2471a3", "bwrite": "#229954"}


def _line(mode, target, pts, title):
    """Physical solid, virtual dashed, one colour per mode."""
    return {"title": title, "points": pts, "dashed": target == "virtual",
            "color": COLORS[mode.replace("size-", "")]}


def _plots(ctx, series):
    label = {"dwrite": "direct write", "dread": "direct read", "bwrite": "buffered write"}
    direct = [_line(m, t, pts, "%s %s" % (t, label[m]))
              for (m, t), pts in series.items() if m in ("dwrite", "dread")]
    if direct:
        ctx.results.plot({"name": "sweep-direct", "title": "O_DIRECT throughput against block size",
                          "xlabel": "block size (KiB)", "ylabel": "MiB/s", "logx": 2,
                          "logy": 10,
                          "series": direct})
    buffered = [_line(m, t, pts, "%s %s" % (t, label[m]))
                for (m, t), pts in series.items() if m in ("bwrite", "dwrite")]
    if any(m == "bwrite" for m, _ in series):
        ctx.results.plot({"name": "sweep-buffered",
                          "title": "buffered (with fdatasync) against direct writes",
                          "xlabel": "block size (KiB)", "ylabel": "MiB/s", "logx": 2,
                          "logy": 10,
                          "series": buffered})
    sized = [_line(m, t, pts, "%s %s" % (t, label[m[5:]]))
             for (m, t), pts in series.items() if m.startswith("size-")]
    if sized:
        ctx.results.plot({"name": "sweep-size", "title": "1 MiB blocks against data size",
                          "xlabel": "data size (MiB)", "ylabel": "MiB/s", "logx": 2,
                          "series": sized})
