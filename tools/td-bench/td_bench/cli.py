# SPDX-License-Identifier: BSD-3-Clause
"""cli.py - td-bench's command line: one subcommand per suite, plus regress,
compare and plot."""
import argparse
import datetime
import glob
import json
import os
import signal
import sys
import textwrap

from . import core, mix, plot, quick, regress, scripts, sweep
from .core import BenchError, Env, InputError, Progress, Results, parse_size
from .targets import Lab

EXIT_OK, EXIT_REGRESSION, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3

DESCRIPTION = """\
td-bench - tapstripe's built-in throughput regression.

Suites (each has --help):
  sweep    dd block-size sweep 512 B..1 MiB and data-size sweep: direct
           read, direct write, buffered write; physical vs virtual
  mix      seq/rand read/write and 70/30 mix, 4 KiB and 64 KiB, QD 1 and 32:
           the loss table, virtual vs physical
  ring     bench/ring.sh: blkif ring costs, ring vs fio, the thesis's table
  sort     bench/sort-experiment.sh: interleaved writes with and without sort
  stripe   bench/stripe-scaling.sh: throughput against the number of servers
  peers    bench/nbd-peers.sh: tapstripe's NBD export vs qemu-nbd vs physical
  regress  run a set of suites, compare every ratio with a baseline, verdict
  compare  compare a saved result file with a baseline
  baseline make a baseline from several saved results (medians)
  plot     draw a result file's plots again, or ratios over time (--history)

Every run first checks that the machine is quiet (CPU used by others over
1.5 s), prints Markdown tables of medians with their spread, and writes a
JSON result (machine, kernel, commit, every figure with its repetitions)
and SVG/PNG plots into --results-dir.  MiB/s means 2^20 bytes per second.

Exit status: 0 done (regress: no regression), 1 regression (or a script's
own check failed), 2 bad command line or a missing or malformed result or
baseline file (one line says which and why), 3 could not measure.
"""


# --- options ---------------------------------------------------------------------

def size_arg(text):
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def size_list(text):
    return [size_arg(t) for t in text.split(",") if t]


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError("want a positive integer, not %r" % text)
    return v


def poll_us_arg(text):
    """A polling budget: 0 (off) to 100000 microseconds, as tapdisk takes."""
    try:
        v = int(text)
    except ValueError:
        v = -1
    if not 0 <= v <= 100000:
        raise argparse.ArgumentTypeError("want microseconds from 0 (off) to 100000, not %r"
                                         % text)
    return v


def positive_float(text):
    try:
        v = float(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError("want a positive number of seconds, not %r" % text)
    return v


def common_options(p):
    g = p.add_argument_group("common options")
    g.add_argument("--build-dir", metavar="DIR",
                   help="where bin/tapdisk, bin/td-front, bin/tap-ctl were built "
                        "(default $BUILDDIR, else next to td-bench, else $PATH)")
    g.add_argument("--results-dir", metavar="DIR", default="td-bench-results",
                   help="where result files, logs and plots go (default ./td-bench-results)")
    g.add_argument("--no-plots", action="store_true", help="do not draw plots")
    g.add_argument("--no-quiet-check", action="store_true",
                   help="skip the check that the machine is quiet")
    g.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    g.add_argument("--keep-work", action="store_true",
                   help="keep the work directory (sockets, logs) for a post-mortem")


def io_options(p, default_dir, default_size, default_reps, runtime=None):
    g = p.add_argument_group("what to measure")
    g.add_argument("--dir", metavar="DIR", default=default_dir,
                   help="where the backing file is created (default %s)" % default_dir)
    g.add_argument("--backing", metavar="PATH",
                   help="use this existing file or block device instead (its data is "
                        "overwritten: needs --destroy-data)")
    g.add_argument("--destroy-data", action="store_true",
                   help="allow writing over --backing")
    g.add_argument("--size", type=size_arg, default=parse_size(default_size),
                   help="data size per run / backing file size (default %s; K/M/G binary)"
                        % default_size)
    g.add_argument("--reps", type=positive_int, default=default_reps,
                   help="repetitions; medians are reported (default %d)" % default_reps)
    if runtime is not None:
        g.add_argument("--runtime", type=positive_float, default=runtime,
                       help="seconds per timed run (default %g)" % runtime)
    g.add_argument("--via", choices=("shm", "nbd"), default="shm",
                   help="the virtual path: shm ring with td-front (default) or NBD with "
                        "fio's nbd engine")
    g.add_argument("--ring-order", type=int, default=4, metavar="N",
                   help="td-front's ring order (default 4: 512 slots)")
    g.add_argument("--max-segments", type=int, default=256, metavar="N",
                   help="td-front's max segments per request (default 256: a 1 MiB I/O is "
                        "one request)")
    g.add_argument("--tapdisk-opt", action="append", default=[], metavar="ARG",
                   help="an extra argument for every tapdisk td-bench starts (repeatable), "
                        "e.g. --tapdisk-opt=--max-indirect-segments=11")
    g.add_argument("--poll-us", type=poll_us_arg, default=0, metavar="US",
                   help="busy polling on both sides of the shm ring: tapdisk --poll-us US "
                        "and td-front --poll-us US (default 0: off, both sleep until "
                        "notified); the tables then show the CPU each side spent per "
                        "request either way")


def script_options(p, quick_help, runtime=True, dirs=False):
    g = p.add_argument_group("passed to the script")
    g.add_argument("--quick", action="store_true", help=quick_help)
    if dirs:
        g.add_argument("--dirs", metavar='"DIR..."', help="where the backing files go")
    else:
        g.add_argument("--dir", metavar="DIR", help="where the backing file goes")
    g.add_argument("--size", dest="size_text", metavar="SIZE", help="backing file size")
    if runtime:
        g.add_argument("--runtime", type=positive_float, metavar="S", help="seconds per run")
    g.add_argument("--reps", type=positive_int, metavar="N", help="repetitions")


def doc(module):
    """A module's docstring as help text, without its 'name.py - ' prefix."""
    text = textwrap.dedent(module.__doc__ or "")
    head, sep, rest = text.partition(" - ")
    return rest if sep and head.endswith(".py") else text


def build_parser():
    fmt = argparse.RawDescriptionHelpFormatter
    top = argparse.ArgumentParser(prog="td-bench", description=DESCRIPTION, formatter_class=fmt)
    top.add_argument("-V", "--version", action="version", version="td-bench (tapstripe) " + core.PACKAGE_VERSION)
    sub = top.add_subparsers(dest="suite", metavar="SUITE")
    sub.required = True

    p = sub.add_parser("sweep", help="dd block-size and data-size sweeps",
                       description=doc(sweep), formatter_class=fmt)
    io_options(p, "/var/tmp", "1G", 3)
    p.add_argument("--bs", type=size_list, metavar="LIST",
                   help="block sizes (default 512,1k,2k,...,1m)")
    p.add_argument("--modes", type=lambda t: t.split(","), default=["dwrite", "dread", "bwrite"],
                   metavar="LIST", help="of dwrite,dread,bwrite (default all three)")
    p.add_argument("--data-sizes", type=size_list, metavar="LIST",
                   help="the data-size sweep at 1 MiB (default 16M, 64M, ... up to --size); "
                        "'--data-sizes ,' skips it")
    common_options(p)

    p = sub.add_parser("mix", help="the workload mix, virtual vs physical (loss table)",
                       description=doc(mix), formatter_class=fmt)
    io_options(p, "/var/tmp", "1G", 3, runtime=5)
    p.add_argument("--bs", type=size_list, metavar="LIST", help="block sizes (default 4k,64k)")
    p.add_argument("--qd", type=lambda t: [positive_int(x) for x in t.split(",")],
                   metavar="LIST", help="queue depths (default 1,32)")
    p.add_argument("--workloads", type=lambda t: t.split(","), metavar="LIST",
                   help="of %s (default all)" % ",".join(mix.WORKLOADS))
    common_options(p)

    p = sub.add_parser("ring", help="bench/ring.sh", description=doc(scripts) + "\n" +
                       "ring: see bench/ring.sh --help for its parts.", formatter_class=fmt)
    script_options(p, "ring.sh --quick: 256 MiB, 3 s, one repetition", dirs=True)
    p.add_argument("--only", choices=("null", "aio", "thesis"), help="one part of ring.sh")
    common_options(p)

    p = sub.add_parser("sort", help="bench/sort-experiment.sh (root, cgroup v1 blkio)",
                       description=doc(scripts), formatter_class=fmt)
    g = p.add_argument_group("passed to the script")
    g.add_argument("--rounds", type=positive_int, help="rounds per run (default 100)")
    g.add_argument("--iops", type=positive_int, help="the throttled disk's IOPS (default 200)")
    g.add_argument("--dir", metavar="DIR", help="where the backing files go")
    common_options(p)

    p = sub.add_parser("stripe", help="bench/stripe-scaling.sh (when it exists)",
                       description=doc(scripts), formatter_class=fmt)
    p.add_argument("--quick", action="store_true", help="passed to the script")
    p.add_argument("script_args", nargs="*", metavar="-- ARGS",
                   help="further arguments for bench/stripe-scaling.sh")
    common_options(p)

    p = sub.add_parser("peers", help="bench/nbd-peers.sh: tapstripe vs qemu-nbd vs physical",
                       description=doc(scripts), formatter_class=fmt)
    script_options(p, "nbd-peers.sh --quick: 256 MiB, 4 s, one repetition")
    common_options(p)

    p = sub.add_parser("regress", help="run suites, compare ratios with a baseline",
                       description=doc(regress) + "\n" + doc(quick), formatter_class=fmt)
    p.add_argument("--quick", action="store_true",
                   help="the quick probes only (a minute or two; for CI), against "
                        "bench/baselines/quick.json")
    p.add_argument("--suites", type=lambda t: t.split(","), metavar="LIST",
                   help="suites to run (default mix,ring,peers, plus sort as root and stripe "
                        "once it exists; sweep on request)")
    p.add_argument("--baseline", metavar="FILE",
                   help="default bench/baselines/quick.json or full.json")
    p.add_argument("--update-baseline", action="store_true",
                   help="write this run's ratios as the new baseline (keeps tolerances)")
    p.add_argument("--only", action="append", metavar="GLOB",
                   help="compare only metrics matching GLOB (repeatable)")
    p.add_argument("--sort-opts", metavar="OPTS",
                   help="options of the sort driver in the quick probes (e.g. max_merge=4k)")
    g = p.add_argument_group("passed to every suite that takes them (else its defaults)")
    g.add_argument("--dir", metavar="DIR",
                   help="where backing files go (quick default: /dev/shm, else /var/tmp)")
    g.add_argument("--size", metavar="SIZE",
                   help="backing file / data size (quick default 256M)")
    g.add_argument("--runtime", type=positive_float,
                   help="seconds per timed run (quick default 2)")
    g.add_argument("--reps", type=positive_int,
                   help="repetitions (quick default 5)")
    g.add_argument("--tapdisk-opt", action="append", default=[], metavar="ARG",
                   help="an extra argument for every tapdisk the quick probes start: "
                        "--tapdisk-opt=--max-indirect-segments=11 cripples it")
    common_options(p)

    p = sub.add_parser("compare", help="compare a saved result with a baseline",
                       description=doc(regress), formatter_class=fmt)
    p.add_argument("result", help="a td-bench result file (JSON)")
    p.add_argument("--baseline", metavar="FILE", required=True)
    p.add_argument("--only", action="append", metavar="GLOB")

    p = sub.add_parser("baseline", help="make a baseline from saved results",
                       description="Write a baseline whose value for each ratio is the "
                       "median of its values in the result files (several runs of one "
                       "suite set on a quiet machine make a steadier baseline than one). "
                       "Tolerances of an existing FILE are kept.", formatter_class=fmt)
    p.add_argument("results", nargs="+", help="td-bench result files (JSON)")
    p.add_argument("--baseline", metavar="FILE", required=True, help="the baseline to write")
    p.add_argument("--merge", action="store_true",
                   help="keep the metrics of the existing FILE that no result file has, "
                        "values and all (to add or remake some metrics, e.g. from runs of "
                        "regress --only GLOB, and leave the others as they were)")

    p = sub.add_parser("plot", help="draw plots again, or ratios over time",
                       description=doc(plot), formatter_class=fmt)
    p.add_argument("files", nargs="*", help="result files (or, with --history, result files, "
                   "baselines or directories of them)")
    p.add_argument("--history", action="store_true", help="ratios over time across files")
    p.add_argument("--metric", action="append", metavar="GLOB",
                   help="with --history: only these metrics (repeatable)")
    p.add_argument("--absolute", action="store_true",
                   help="with --history: the ratios as they are, not relative to their "
                        "first value")
    p.add_argument("--out", metavar="PREFIX", help="output name without .svg/.png")
    return top


# --- running a suite --------------------------------------------------------------------

class Context:
    def __init__(self, args, env, lab, results, progress, log_base):
        self.args, self.env, self.lab = args, env, lab
        self.results, self.progress = results, progress
        self.log_base = log_base
        self.frontend = []
        if hasattr(args, "max_segments"):
            self.frontend = ["--max-segments", str(args.max_segments),
                             "--ring-order", str(args.ring_order)]
        if getattr(args, "poll_us", 0):
            self.frontend += ["--poll-us", str(args.poll_us)]
        self.script_output = {}
        self.failed_checks = []
        self.prefix = ""
        self.cache_dropped = True

    def setting(self, key, value):
        self.results.data["settings"][self.prefix + key] = value

    def log_path(self, name):
        return "%s-%s.log" % (self.log_base, name)


SUITES = {"sweep": sweep.run, "mix": mix.run, "ring": scripts.ring, "sort": scripts.sort,
          "stripe": scripts.stripe, "peers": scripts.peers, "quick": quick.run}
WRITES = ("sweep", "mix", "quick")


def check_args(a):
    if getattr(a, "backing", None):
        if not os.path.exists(a.backing):
            raise BenchError("--backing %s does not exist" % a.backing)
        if not a.destroy_data:
            raise BenchError("--backing %s would be overwritten: add --destroy-data if that is "
                             "what you want" % a.backing)
    if getattr(a, "modes", None):
        bad = [m for m in a.modes if m not in sweep.MODES]
        if bad:
            raise BenchError("--modes: unknown %s (dwrite, dread, bwrite)" % ",".join(bad))
    if getattr(a, "workloads", None):
        bad = [w for w in a.workloads if w not in mix.WORKLOADS]
        if bad:
            raise BenchError("--workloads: unknown %s (%s)" % (",".join(bad),
                                                              ",".join(mix.WORKLOADS)))
    for name in ("bs", "data_sizes"):
        for v in getattr(a, name, None) or []:
            if v % 512:
                raise BenchError("--%s: %d is not a multiple of 512" % (name.replace("_", "-"), v))
    if any(v > a.size for v in getattr(a, "data_sizes", None) or []):
        raise BenchError("--data-sizes: each must be at most --size (%d bytes)" % a.size)
    if getattr(a, "dir", None) and not os.path.isdir(a.dir):
        raise BenchError("--dir %s is not a directory" % a.dir)


def stamp():
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def start(a, suite, argv):
    env = Env(sys.argv[0], a.build_dir)
    os.makedirs(a.results_dir, exist_ok=True)
    base = os.path.join(a.results_dir, "%s-%s" % (stamp(), suite))
    n = 1
    while os.path.exists(base + ".json"):  # two runs in one second
        n += 1
        base = os.path.join(a.results_dir, "%s-%d-%s" % (stamp(), n, suite))
    results = Results(suite, env, "td-bench " + " ".join(argv))
    if not a.no_quiet_check:
        sys.stderr.write("td-bench: checking that the machine is quiet (%.1f s) ...\n"
                         % core.QUIET_SAMPLE_S)
        q = core.quiet_check()
        results.data["quiet"] = q
        sys.stderr.write("td-bench: %s\n" % core.quiet_text(q))
    return env, results, base


def run_suite(suite, a, env, results, base, prefix=""):
    """Run one suite into results; returns the script checks that failed."""
    for tool, pkg in (("fio", "fio"), ("dd", "coreutils")):
        if suite in WRITES:
            core.need_tool(tool, pkg)
    if suite == "peers":
        core.need_tool("qemu-nbd", "qemu-utils")
    check_args(a)
    tapdisk_opts = list(getattr(a, "tapdisk_opt", []))
    if getattr(a, "poll_us", 0):
        tapdisk_opts.append("--poll-us=%d" % a.poll_us)
    lab = Lab(env, None, tapdisk_opts, keep=a.keep_work)
    progress = Progress(1, enabled=not a.no_progress)
    ctx = Context(a, env, lab, results, progress, base)
    ctx.prefix = prefix
    try:
        SUITES[suite](ctx)
    finally:
        progress.clear()
        lab.close()
        if a.keep_work:
            sys.stderr.write("td-bench: work directory kept: %s\n" % lab.work)
    return ctx.failed_checks


def finish(a, results, base, out=sys.stdout):
    if not a.no_quiet_check:
        q = core.quiet_check(0.5)
        results.data["quiet_after"] = q
        if q["busy"] and not (results.data.get("quiet") or {}).get("busy"):
            results.note("The machine became busy during the run (%s)." % core.quiet_text(q))
    path = base + ".json"
    if not a.no_plots and results.data["plots"]:
        if plot.available():
            try:
                made = plot.render_all(results.data, base)
                results.data["plot_files"] = made
            except RuntimeError as e:
                results.note("plots: %s" % e)
        else:
            results.note("No plots: gnuplot is not installed (apt-get install gnuplot-nox).")
    results.save(path)
    core.render_header(results.data, out)
    for t in results.data["tables"]:
        core.render_table(t, out)
    out.write("\n")
    for s in results.data["skipped"]:
        out.write("skipped: %s\n" % s)
    for n in results.data["notes"]:
        out.write("note: %s\n" % n)
    if results.data.get("quiet", {}) and results.data["quiet"]["busy"]:
        out.write("note: the machine was busy when the run started (see above): absolute "
                  "figures are noisy\n")
    out.write("result: %s\n" % path)
    for f in results.data.get("plot_files", []):
        out.write("plot: %s\n" % f)
    out.flush()
    return path


def cmd_suite(a, argv):
    check_args(a)
    env, results, base = start(a, a.suite, argv)
    failed = run_suite(a.suite, a, env, results, base)
    finish(a, results, base)
    return EXIT_REGRESSION if failed else EXIT_OK


# --- regress ------------------------------------------------------------------------------

def default_suites(env):
    s = ["mix", "ring", "peers"]
    if os.geteuid() == 0:
        s.append("sort")
    if scripts.stripe_available(env):
        s.append("stripe")
    return s


def suite_args(parser, suite, a):
    """A suite's own defaults, with regress's common options."""
    argv = [suite]
    for opt in ("build_dir", "results_dir"):
        v = getattr(a, opt)
        if v:
            argv += ["--" + opt.replace("_", "-"), v]
    for flag in ("no_plots", "no_quiet_check", "no_progress", "keep_work"):
        if getattr(a, flag):
            argv.append("--" + flag.replace("_", "-"))
    # Each suite's spelling of the options regress passes on.
    takes = {"sweep": ("dir", "size", "reps"), "mix": ("dir", "size", "runtime", "reps"),
             "ring": ("dirs", "size", "runtime", "reps"), "sort": ("dir",),
             "peers": ("dir", "size", "runtime", "reps"), "stripe": ()}
    for opt in takes[suite]:
        v = getattr(a, "dir" if opt == "dirs" else opt)
        if v is not None:
            argv += ["--" + opt, str(v)]
    s = parser.parse_args(argv)
    if suite in WRITES:
        s.tapdisk_opt = list(a.tapdisk_opt)
    return s


def quick_args(a):
    d = a.dir
    if not d:
        d = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) \
            else "/var/tmp"
    try:
        size = parse_size(a.size or "256M")
    except ValueError as e:
        raise BenchError("--size: %s" % e)
    return argparse.Namespace(dir=d, size=size, runtime=a.runtime or 2.0, reps=a.reps or 5,
                              sort_opts=a.sort_opts, only=a.only, tapdisk_opt=a.tapdisk_opt,
                              backing=None, destroy_data=False, keep_work=a.keep_work,
                              no_progress=a.no_progress)


def cmd_regress(a, argv, parser):
    env, results, base = start(a, "regress", argv)
    suites = ["quick"] if a.quick else (a.suites or default_suites(env))
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise BenchError("--suites: unknown %s (of %s)" % (",".join(unknown), ",".join(SUITES)))
    bpath = a.baseline or env.baseline("quick.json" if a.quick else "full.json")
    old = None
    if os.path.exists(bpath):
        old = regress.load(bpath)
    elif not a.update_baseline:
        raise BenchError("no baseline %s: make one on a quiet machine with "
                         "td-bench regress%s --update-baseline" % (bpath, " --quick" * a.quick))
    results.data["settings"]["suites"] = ",".join(suites)
    failed = []
    for s in suites:
        sa = quick_args(a) if s == "quick" else suite_args(parser, s, a)
        failed += run_suite(s, sa, env, results, base, prefix=(s + ": ") if len(suites) > 1 else "")
    if a.update_baseline:
        n = regress.write(bpath, results.data, old)
        finish(a, results, base)
        print("baseline: %d ratios written to %s" % (n, bpath))
        return EXIT_OK
    rows, bad, better, new = regress.compare(results.data, old, set(suites), a.only)
    results.table("regress: this run against the baseline",
                  ["metric", "better", "baseline", "now", "± now", "change", "allowed",
                   "verdict"], rows)
    text = regress.verdict_text(bpath, old, rows, bad, better, new, results.data["figures"])
    results.data["regress"] = {"baseline": bpath, "regressions": bad, "better": better,
                               "failed_checks": failed, "passed": not bad and not failed}
    finish(a, results, base)
    print(text)
    for f in failed:
        print("FAILED CHECK: %s" % f)
    return EXIT_REGRESSION if bad or failed else EXIT_OK


def cmd_compare(a):
    data = regress.load_result(a.result)
    base = regress.load(a.baseline)
    suites = {n.split(".")[0] for n in data["figures"]}
    rows, bad, better, new = regress.compare(data, base, suites, a.only)
    core.render_table({"title": "%s against %s" % (a.result, a.baseline),
                       "columns": ["metric", "better", "baseline", "now", "± now", "change",
                                   "allowed", "verdict"], "rows": rows, "notes": []})
    print()
    print(regress.verdict_text(a.baseline, base, rows, bad, better, new, data["figures"]))
    return EXIT_REGRESSION if bad else EXIT_OK


def cmd_baseline(a):
    runs = []
    for path in a.results:
        runs.append(regress.load_result(path))
    merged = dict(runs[-1], figures={})
    for name in sorted({n for r in runs for n, f in r["figures"].items() if f["kind"] == "ratio"}):
        # A run of older code may hold the name as another kind; the last
        # run's figure gives the unit, direction and tolerance.
        figs = [r["figures"][name] for r in runs
                if r["figures"].get(name, {}).get("kind") == "ratio"]
        merged["figures"][name] = dict(figs[-1], value=core.median([f["value"] for f in figs]),
                                       reps=[f["value"] for f in figs],
                                       spread_pct=core.spread_pct([f["value"] for f in figs]))
    merged["command"] = "td-bench baseline " + " ".join(a.results)
    old = regress.load(a.baseline) if os.path.exists(a.baseline) else None
    if a.merge and not old:
        raise InputError("baseline --merge: there is no baseline %s to merge into" % a.baseline)
    n = regress.write(a.baseline, merged, old, keep_others=a.merge)
    print("baseline: %d ratios, each the median of %d run(s)%s, written to %s"
          % (n, len(runs), ", the others kept" if a.merge else "", a.baseline))
    return EXIT_OK


def cmd_plot(a):
    if not plot.available():
        raise BenchError("gnuplot is not installed (apt-get install gnuplot-nox)")
    if a.history:
        paths = []
        for f in a.files or ["td-bench-results"]:
            paths += sorted(glob.glob(os.path.join(f, "*.json"))) if os.path.isdir(f) else [f]
        spec, dropped = plot.history_spec(paths, a.metric, a.absolute)
        if not spec["series"]:
            raise BenchError("no ratios found in %d file(s)" % len(paths))
        made = plot.render(spec, a.out or "td-bench-history")
        if dropped:
            print("note: %d more metrics not drawn (choose with --metric GLOB): %s" % (
                len(dropped), ", ".join(dropped[:6])))
    else:
        if not a.files:
            raise BenchError("plot: name result files, or use --history")
        made = []
        for f in a.files:
            made += plot.render_all(regress.load_result(f), a.out or plot.default_prefix(f))
    for m in made:
        print("plot: %s" % m)
    return EXIT_OK


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # SIGTERM unwinds like ^C, so that every process td-bench started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        if a.suite == "regress":
            return cmd_regress(a, argv, parser)
        if a.suite == "compare":
            return cmd_compare(a)
        if a.suite == "plot":
            return cmd_plot(a)
        if a.suite == "baseline":
            return cmd_baseline(a)
        return cmd_suite(a, argv)
    except InputError as e:
        sys.stderr.write("td-bench: %s\n" % e)
        return EXIT_USAGE
    except BenchError as e:
        sys.stderr.write("\ntd-bench: %s\n" % e)
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("\ntd-bench: interrupted; every process it started is stopped\n")
        return 130

