# SPDX-License-Identifier: BSD-3-Clause
"""scripts.py - the experiments that live in bench/, run from td-bench.

  ring    bench/ring.sh: the null driver's CPU per request, td-front through
          the ring against fio on the same file, and the thesis's table
          (1 MiB writes by max segments and ring order, from tapdisk's
          counters)
  sort    bench/sort-experiment.sh: 28 interleaved 4 KiB writes per round,
          with and without sort, on a file and an IOPS-throttled disk
  peers   bench/nbd-peers.sh: tapstripe's NBD export, qemu-nbd --cache=none
          --aio=native and fio's libaio O_DIRECT on one backing file
  stripe  bench/stripe-scaling.sh, when it exists: throughput against the
          number of storage servers

Each script writes its figures with --json FILE; td-bench turns them into
its figures, tables and plots.  The script's own output goes to the log
next to the result file; its progress line to stderr as usual.

The contract for bench/stripe-scaling.sh (written with the stripe driver):
it takes --json FILE, --quick, and any further arguments given after "--"
on td-bench's command line, exits non-zero when it could not measure, and
writes
  {"scaling": [{"servers": N, "op": "write"|"read"|..., "mib_s": X,
                "reps": [X1, X2, ...]}, ...],
   "ratios": {"NAME": X, ...}}        (optional, compared by regress)
"""
import json
import os
import subprocess

from .core import BenchError, fmt_num, fmt_spread, spread_pct

STRIPE_SCRIPT = "stripe-scaling.sh"


def _run_script(ctx, name, argv):
    script = ctx.env.script(name)
    if not os.path.exists(script):
        return None
    out = ctx.lab.path(name + ".json")
    log = ctx.log_path(name)
    ctx.progress.note("td-bench: running bench/%s %s (its output: %s)" % (
        name, " ".join(argv), log))
    with open(log, "a") as lf:
        p = subprocess.run(["bash", script, "--json", out] + argv, stdout=lf,
                           env=ctx.env.program_env(), cwd=ctx.lab.work)
    with open(log) as lf:
        ctx.script_output[name] = lf.read()
    if not os.path.exists(out):
        raise BenchError("bench/%s failed (exit %d) and wrote no figures; its output is in %s"
                         % (name, p.returncode, log))
    with open(out) as f:
        data = json.load(f)
    if p.returncode:
        ctx.results.note("bench/%s exited %d (see %s): its figures are shown, and its "
                         "check failed" % (name, p.returncode, log))
        ctx.failed_checks.append("bench/%s exited %d" % (name, p.returncode))
    return data


def _tag(part):
    """'aio:/dev/shm' -> 'dev_shm': a name fit for a figure."""
    return part.split(":", 1)[1].strip("/").replace("/", "_") or "root"


# --- ring --------------------------------------------------------------------------

def ring(ctx):
    a = ctx.args
    argv = []
    if a.quick:
        argv.append("--quick")
    for opt, val in (("--only", a.only), ("--dirs", a.dirs), ("--size", a.size_text),
                     ("--runtime", a.runtime), ("--reps", a.reps)):
        if val is not None:
            argv += [opt, str(val)]
    data = _run_script(ctx, "ring.sh", argv)
    if data is None:
        raise BenchError("bench/ring.sh is missing")
    res = ctx.results
    if "null" in data:
        n = data["null"]
        f = res.add("ring.null.randread4k-qd32.iops", n["reps"], "IOPS")
        res.add("ring.null.tapdisk_cpu_us_per_request", [n["tapdisk_cpu_us_per_request"]], "us")
        res.table("ring: null driver, 4 KiB random reads, QD 32 over the shm ring",
                  ["IOPS", "±", "tapdisk CPU us/request", "td-front CPU us/I/O"],
                  [[fmt_num(f["value"], 0), fmt_spread(f),
                    "%.2f" % n["tapdisk_cpu_us_per_request"],
                    "%.2f" % n["td_front_cpu_us_per_io"]]])
    rows = []
    for part in sorted(k for k in data if k.startswith("aio:")):
        for job, j in data[part].items():
            name = "ring.aio.%s.%s" % (_tag(part), job)
            fr = res.ratio(name + ".ratio", j["ring_reps"], j["fio_reps"], target=j["target"])
            res.add(name + ".fio_iops", j["fio_reps"], "IOPS")
            res.add(name + ".ring_iops", j["ring_reps"], "IOPS")
            rows.append([part[4:], job, fmt_num(j["fio_iops"], 0), fmt_num(j["ring_iops"], 0),
                         "**%.2f**" % fr["value"], fmt_spread(fr),
                         "%.2f" % j["target"], "%.1f" % j["tapdisk_cpu_us_per_request"]])
    if rows:
        res.table("ring: td-front through the ring against fio libaio O_DIRECT, same file",
                  ["file on", "job", "fio IOPS", "ring IOPS", "ring/fio", "±", "target",
                   "tapdisk us/req"], rows,
                  ["Medians; ± is half the spread of the per-repetition ratios."])
    for part in sorted(k for k in data if k.startswith("thesis:")):
        rows = []
        for cfg, c in sorted(data[part].items(),
                             key=lambda kv: tuple(int(x) for x in kv[0].split(":"))):
            segs, order = cfg.split(":")
            name = "ring.thesis.%s.seg%s.order%s" % (_tag(part), segs, order)
            res.add(name + ".requests_per_io", [c["requests_per_io"]], "requests",
                    kind="ratio", better="lower", tolerance=0.1)
            res.add(name + ".submits_per_io", [c["backend_submits_per_io"]], "submissions",
                    kind="ratio", better="lower", tolerance=0.5)
            f = res.add(name + ".mib_s", c["reps"], "MiB/s")
            rows.append([segs, order, "%g" % c["requests_per_io"],
                         "%g" % c["backend_submits_per_io"], fmt_num(f["value"], 0),
                         fmt_spread(f)])
        res.table("ring: thesis, 1 MiB O_DIRECT writes QD 1, file on %s (tapdisk's counters)"
                  % part[7:], ["max segments", "ring order", "requests per write",
                               "backend submissions per write", "MiB/s", "±"], rows)


# --- sort --------------------------------------------------------------------------

def sort(ctx):
    a = ctx.args
    argv = []
    for opt, val in (("--rounds", a.rounds), ("--iops", a.iops), ("--dir", a.dir)):
        if val is not None:
            argv += [opt, str(val)]
    data = _run_script(ctx, "sort-experiment.sh", argv)
    res = ctx.results
    rows = []
    chains = {"off": "aio:…,merge=off", "on": "sort|aio:…,merge=off", "aio-merge": "aio:…"}
    for target in ("file", "throttled"):
        t = data.get(target)
        if not t:
            continue
        res.add("sort.%s.speedup" % target, [t["speedup"]], "x", kind="ratio",
                better="higher", tolerance=0.5)
        for mode in ("off", "on", "aio-merge"):
            m = t[mode]
            name = "sort.%s.%s" % (target, mode)
            res.add(name + ".seconds", [m["seconds"]], "s", better="lower")
            res.add(name + ".submissions_per_round", [m["submissions_per_round"]],
                    "submissions", kind="ratio", better="lower", tolerance=1.0)
            rows.append([target, "`%s`" % chains[mode], "%.3f" % m["seconds"],
                         "%g" % m["requests_per_round"], "%g" % m["submissions_per_round"],
                         "%.2fx" % t["speedup"] if mode == "on" else ""])
    res.table("sort: 28 interleaved 4 KiB writes per round (the thesis's experiment)",
              ["disk", "chain", "time s", "requests/round", "backend submissions/round",
               "sort speed-up"], rows,
              ["One run each (the script's own design); speed-up = time without sort / with."])


# --- peers -------------------------------------------------------------------------

def peers(ctx):
    a = ctx.args
    argv = ["--quick"] if a.quick else []
    for opt, val in (("--dir", a.dir), ("--size", a.size_text), ("--runtime", a.runtime),
                     ("--reps", a.reps)):
        if val is not None:
            argv += [opt, str(val)]
    data = _run_script(ctx, "nbd-peers.sh", argv)
    res = ctx.results
    rows = []
    for job, t in data.items():
        p, s, q = t["physical"], t["tapstripe"], t["qemu-nbd"]
        name = "peers.%s" % job
        for who, d in (("physical", p), ("tapstripe", s), ("qemu_nbd", q)):
            res.add("%s.%s_iops" % (name, who), d["reps"], "IOPS")
        fq = res.ratio(name + ".tapstripe_vs_qemu_nbd", s["reps"], q["reps"])
        fp = res.ratio(name + ".tapstripe_vs_physical", s["reps"], p["reps"])
        fqp = res.ratio(name + ".qemu_nbd_vs_physical", q["reps"], p["reps"])
        rows.append([job, fmt_num(p["iops"], 0), fmt_num(s["iops"], 0), fmt_num(q["iops"], 0),
                     "**%.2f**" % fq["value"], "%.2f" % fp["value"], "%.2f" % fqp["value"],
                     fmt_num(s["cpu_us_per_req"]), fmt_num(q["cpu_us_per_req"])])
    res.table("peers: the same fio job (nbd engine) against tapstripe and qemu-nbd, and "
              "fio libaio O_DIRECT on the backing (physical)",
              ["job", "physical IOPS", "tapstripe IOPS", "qemu-nbd IOPS", "tapstripe/qemu-nbd",
               "tapstripe/physical", "qemu-nbd/physical", "tapdisk CPU us/req",
               "qemu-nbd CPU us/req"], rows,
              ["Medians of the repetitions; targets ran in rotated order in each."])


# --- stripe ------------------------------------------------------------------------

def stripe_available(env):
    return os.path.exists(env.script(STRIPE_SCRIPT))


def stripe(ctx):
    if not stripe_available(ctx.env):
        msg = ("stripe: not available yet: bench/%s is missing (it comes with the stripe "
               "driver)" % STRIPE_SCRIPT)
        ctx.results.data["skipped"].append(msg)
        return
    argv = (["--quick"] if ctx.args.quick else []) + list(ctx.args.script_args or [])
    data = _run_script(ctx, STRIPE_SCRIPT, argv)
    res = ctx.results
    by_op = {}
    for row in data.get("scaling", []):
        by_op.setdefault(row["op"], []).append(row)
    rows, series = [], []
    for op, pts in sorted(by_op.items()):
        pts.sort(key=lambda r: r["servers"])
        base = pts[0]
        for r in pts:
            reps = r.get("reps") or [r["mib_s"]]
            f = res.add("stripe.%s.%d.mib_s" % (op, r["servers"]), reps, "MiB/s",
                        value=r["mib_s"])
            sp = r["mib_s"] / base["mib_s"] if base["mib_s"] else float("nan")
            if r is not base:
                res.add("stripe.%s.%d.speedup" % (op, r["servers"]), [sp], "x",
                        kind="ratio", tolerance=0.25,
                        per="%d servers over %d" % (r["servers"], base["servers"]))
            rows.append([op, str(r["servers"]), fmt_num(r["mib_s"]),
                         "±%.0f%%" % (spread_pct(reps) / 2) if len(reps) > 1 else "-",
                         "%.2f" % sp, "%.2f" % (sp / (r["servers"] / base["servers"]))])
        series.append({"title": op, "points": [(r["servers"], r["mib_s"]) for r in pts]})
        series.append({"title": "%s, linear" % op, "dashed": True,
                       "points": [(r["servers"], base["mib_s"] * r["servers"] / base["servers"])
                                  for r in pts]})
    for name, value in (data.get("ratios") or {}).items():
        res.add("stripe.%s" % name, [value], "x", kind="ratio", tolerance=0.25)
    res.table("stripe: throughput against the number of storage servers",
              ["op", "servers", "MiB/s", "±", "speed-up", "efficiency"], rows,
              ["speed-up: over the fewest servers measured; efficiency: speed-up / "
               "(servers ratio), 1.00 is linear."])
    if series:
        res.plot({"name": "stripe-scaling", "title": "striped disk: scaling with servers",
                  "xlabel": "storage servers", "ylabel": "MiB/s", "series": series})

