# SPDX-License-Identifier: BSD-3-Clause
"""core.py - what every td-bench suite shares.

Programs and scripts are found the same way whether td-bench runs from a
source tree, a build tree or an installation (see Env).  A suite records
its figures in a Results: each figure is the median of its repetitions,
kept with the repetitions themselves and their spread, and is either a
"ratio" (two things measured in the same run: virtual / physical, requests
per I/O, ...), which regress compares with a baseline, or "absolute"
(MiB/s, IOPS), which is recorded but never compared: the machines are
shared and noisy.  Units: binary multiples only (KiB, MiB/s), never MB/s.
"""
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time

VERSION = "1"
PACKAGE_VERSION = "unknown"  # tapstripe's: set by the td-bench script
RESULT_FORMAT = "td-bench-result 1"
MIB = 1 << 20
KIB = 1 << 10
QUIET_SAMPLE_S = 1.5
BUSY_PCT = 10.0  # more CPU than this used by others: "busy"


class BenchError(Exception):
    """A measurement could not be made (a program missing or failing)."""


class InputError(BenchError):
    """A file named on the command line is missing or malformed (exit 2)."""


# --- units ------------------------------------------------------------------

_SUFFIX = {"": 1, "B": 1, "K": KIB, "M": MIB, "G": 1 << 30, "T": 1 << 40}


def parse_size(text):
    """'512', '4k', '1M', '2G' (binary multiples) -> bytes."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    num, suf = (t[:-1], t[-1]) if t and t[-1] in "KMGT" else (t, "")
    try:
        value = int(num) * _SUFFIX[suf]
    except ValueError:
        raise ValueError("not a size: %r (write 512, 4k, 1M or 1G)" % text)
    if value <= 0:
        raise ValueError("a size must be positive: %r" % text)
    return value


def fmt_size(n):
    """bytes -> '512 B', '4 KiB', '1 MiB', '1.5 GiB' (binary, exact if whole)."""
    for unit, mult in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", KIB)):
        if n >= mult:
            v = n / mult
            return ("%d %s" % (v, unit)) if v == int(v) else ("%.1f %s" % (v, unit))
    return "%d B" % n


def short_size(n):
    """bytes -> '512', '4k', '1m': the argument form fio and td-front take."""
    for suf, mult in (("g", 1 << 30), ("m", MIB), ("k", KIB)):
        if n % mult == 0:
            return "%d%s" % (n // mult, suf)
    return str(n)


# --- statistics ---------------------------------------------------------------

def median(values):
    return statistics.median(values) if values else float("nan")


def spread_pct(values):
    """(max - min) / median, in percent: how far the repetitions disagree."""
    m = median(values)
    return 100.0 * (max(values) - min(values)) / m if values and m else 0.0


# --- finding things -------------------------------------------------------------

class Env:
    """Where the programs, bench scripts and baselines are.

    Programs: $TAPDISK, $TDFRONT, $TAPCTL; else BUILD_DIR/bin/NAME
    (--build-dir or $BUILDDIR); else next to td-bench itself (an
    installation, or an in-tree build), or in ../sbin (an installation:
    tapdisk and tap-ctl go to sbin); else $PATH.  Scripts: $TD_BENCH_SCRIPTS;
    else ../../bench from td-bench (a source tree: tools/td-bench/); else
    ../share/tapstripe/bench (an installation).
    """

    PROGRAMS = {"tapdisk": "TAPDISK", "td-front": "TDFRONT", "tap-ctl": "TAPCTL"}

    def __init__(self, script_path, build_dir=None):
        self.here = os.path.dirname(os.path.realpath(script_path))
        self.build_dir = build_dir or os.environ.get("BUILDDIR") or None
        self.scripts = self._scripts_dir()
        top = os.path.realpath(os.path.join(self.here, "..", ".."))
        self.src_top = top if os.path.isdir(os.path.join(top, ".git")) else None

    def _scripts_dir(self):
        env = os.environ.get("TD_BENCH_SCRIPTS")
        if env:
            return env
        for cand in (os.path.join(self.here, "..", "..", "bench"),
                     os.path.join(self.here, "..", "share", "tapstripe", "bench")):
            if os.path.isdir(cand):
                return os.path.realpath(cand)
        return os.path.realpath(os.path.join(self.here, "..", "..", "bench"))

    def program(self, name):
        env = os.environ.get(self.PROGRAMS.get(name, ""), "")
        cands = [env] if env else []
        if self.build_dir:
            cands.append(os.path.join(self.build_dir, "bin", name))
        cands.append(os.path.join(self.here, name))
        # Installed: td-bench in $(bindir), tapdisk and tap-ctl in $(sbindir).
        cands.append(os.path.join(self.here, "..", "sbin", name))
        for c in cands:
            if c and os.path.isfile(c) and os.access(c, os.X_OK):
                return os.path.realpath(c)
        found = shutil.which(name)
        if found:
            return found
        raise BenchError("%s not found: build it (make) and give --build-dir "
                         "or BUILDDIR=, or set %s=" % (name, self.PROGRAMS.get(name, "PATH")))

    def script(self, name):
        return os.path.join(self.scripts, name)

    def baseline(self, name):
        return os.path.join(self.scripts, "baselines", name)

    def program_env(self):
        """The environment bench/*.sh need to use the same programs."""
        env = dict(os.environ)
        for name, var in self.PROGRAMS.items():
            env[var] = self.program(name)
        if self.build_dir:
            env["BUILDDIR"] = self.build_dir
        return env


def need_tool(name, package):
    if not shutil.which(name):
        raise BenchError("%s is missing (apt-get install %s)" % (name, package))


# --- the machine ------------------------------------------------------------------

def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def fs_type(path):
    """The file system holding path, from /proc/mounts (longest prefix)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    for line in _read("/proc/mounts").splitlines():
        f = line.split()
        if len(f) >= 3 and (path == f[1] or path.startswith(f[1].rstrip("/") + "/")) \
                and len(f[1]) >= len(best):
            best, kind = f[1], f[2]
    return kind


def commit(src_top):
    """The source commit (read only: no lock is taken on the index)."""
    if not src_top:
        return "unknown (not run from a source tree)"
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    try:
        head = subprocess.run(["git", "-C", src_top, "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, env=env).stdout.strip()
        dirty = subprocess.run(["git", "-C", src_top, "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, env=env).stdout.strip()
    except OSError:
        return "unknown (no git)"
    return (head + ("+changes" if dirty else "")) if head else "unknown"


def machine(env):
    model = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) * KIB
    osname = ""
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            osname = line.split("=", 1)[1].strip('"')
    return {"host": socket.gethostname(), "cpus": os.cpu_count(),
            "cpu_model": model, "memory_bytes": mem,
            "kernel": platform.release(), "os": osname,
            "python": platform.python_version(), "commit": commit(env.src_top)}


def _cpu_times():
    f = _read("/proc/stat").splitlines()[0].split()[1:]
    v = [int(x) for x in f[:8]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v), idle


def _proc_ticks():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        s = _read("/proc/%s/stat" % pid)
        if not s:
            continue
        comm = s[s.find("(") + 1:s.rfind(")")]
        f = s[s.rfind(")") + 2:].split()
        out[int(pid)] = (comm, int(f[11]) + int(f[12]))
    return out


def quiet_check(seconds=QUIET_SAMPLE_S):
    """CPU used by every process but ours over a short sample, from /proc/stat.

    Returns {"busy_pct", "seconds", "busy", "top": [[comm, pct], ...]}:
    the paper discarded measurements taken on a busy system; we measure
    anyway and say so."""
    total0, idle0 = _cpu_times()
    procs0 = _proc_ticks()
    time.sleep(seconds)
    total1, idle1 = _cpu_times()
    procs1 = _proc_ticks()
    dt = max(1, total1 - total0)
    busy = 100.0 * (dt - (idle1 - idle0)) / dt
    hz = os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    top = []
    for pid, (comm, t1) in procs1.items():
        if pid == os.getpid() or pid not in procs0:
            continue
        d = t1 - procs0[pid][1]
        if d > 0:
            top.append([comm, 100.0 * d / hz / seconds / ncpu])
    top.sort(key=lambda x: -x[1])
    return {"busy_pct": round(busy, 1), "seconds": seconds, "busy": busy > BUSY_PCT,
            "top": [[c, round(p, 1)] for c, p in top[:4]]}


def quiet_text(q):
    who = ", ".join("%s %.0f%%" % (c, p) for c, p in q["top"] if p >= 1)
    if q["busy"]:
        return ("BUSY: other processes used %.0f%% of the CPUs over %.1f s (%s). "
                "Absolute figures will be noisy; ratios of this run still compare, "
                "with a wider spread." % (q["busy_pct"], q["seconds"], who or "?"))
    return "quiet: %.0f%% of the CPUs busy over %.1f s%s" % (
        q["busy_pct"], q["seconds"], (" (%s)" % who) if who else "")


def drop_caches():
    """Write back and drop the page cache; False when not allowed (not root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


# --- progress ---------------------------------------------------------------------

class Progress:
    """One line on stderr: overwritten with \\r on a terminal, else one line
    per step."""

    def __init__(self, total, enabled=True):
        self.total, self.n, self.t0 = max(1, total), 0, time.monotonic()
        self.tty = sys.stderr.isatty()
        self.enabled = enabled
        self.width = 0

    def step(self, label):
        self.n += 1
        if not self.enabled:
            return
        el = time.monotonic() - self.t0
        eta = ""
        if self.n > 1:
            eta = ", ~%ds left" % (el / (self.n - 1) * (self.total - self.n + 1))
        line = "td-bench [%d/%d] %s (%ds%s)" % (self.n, self.total, label, el, eta)
        if self.tty:
            cols = shutil.get_terminal_size((100, 20)).columns - 1
            line = line[:cols]
            sys.stderr.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def note(self, text):
        """A message that must not be overwritten."""
        self.clear()
        sys.stderr.write(text + "\n")

    def clear(self):
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


# --- results -------------------------------------------------------------------------

class Results:
    """The figures, tables and plots of one td-bench run."""

    def __init__(self, suite, env, args_text):
        self.data = {"format": RESULT_FORMAT, "suite": suite,
                     "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                     "command": args_text, "machine": machine(env),
                     "quiet": None, "settings": {}, "figures": {},
                     "tables": [], "plots": [], "notes": [], "skipped": []}

    @property
    def figures(self):
        return self.data["figures"]

    def add(self, name, reps, unit, kind="absolute", better="higher",
            value=None, **extra):
        """A figure: the median of reps unless value is given (a ratio of
        medians, say)."""
        reps = [float(r) for r in reps]
        fig = {"value": float(value) if value is not None else median(reps),
               "unit": unit, "kind": kind, "better": better, "reps": reps,
               "spread_pct": round(spread_pct(reps), 1) if reps else None}
        fig.update(extra)
        self.figures[name] = fig
        return fig

    def ratio(self, name, num_reps, den_reps, unit="x", better="higher", **extra):
        """num / den, as the ratio of the medians; reps are the per-repetition
        ratios (each pair ran back to back)."""
        pairs = [a / b for a, b in zip(num_reps, den_reps) if b]
        den = median(den_reps)
        value = median(num_reps) / den if den else float("nan")
        fig = self.add(name, pairs, unit, kind="ratio", better=better,
                       value=value, **extra)
        return fig

    def table(self, title, columns, rows, notes=()):
        self.data["tables"].append({"title": title, "columns": columns,
                                    "rows": rows, "notes": list(notes)})

    def plot(self, spec):
        self.data["plots"].append(spec)

    def note(self, text):
        self.data["notes"].append(text)

    def save(self, path):
        self.data["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, path)


def render_table(t, out=sys.stdout):
    """A table as Markdown: readable in a terminal, pasteable in README."""
    out.write("\n### %s\n\n" % t["title"])
    cols = t["columns"]
    # A '|' inside a cell (a driver chain) would end the cell in Markdown.
    rows = [[str(c).replace("|", "\\|") for c in r] for r in t["rows"]]
    widths = [max([len(c)] + [len(r[i]) for r in rows if i < len(r)])
              for i, c in enumerate(cols)]
    out.write("| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths)) + " |\n")
    out.write("|" + "|".join("-" * (w + 2) for w in widths) + "|\n")
    for r in rows:
        out.write("| " + " | ".join(c.rjust(w) if i else c.ljust(w)
                                    for i, (c, w) in enumerate(zip(r, widths))) + " |\n")
    for n in t["notes"]:
        out.write("\n" + n + "\n")


def render_header(data, out=sys.stdout):
    m = data["machine"]
    out.write("td-bench %s: %s, %s, %d CPUs (%s), %s of memory, kernel %s, commit %s\n" % (
        data["suite"], data["started"], m["host"], m["cpus"] or 0, m["cpu_model"] or "?",
        fmt_size(m["memory_bytes"]), m["kernel"], m["commit"]))
    if data.get("quiet"):
        out.write("machine check: %s\n" % quiet_text(data["quiet"]))
    for k, v in data["settings"].items():
        out.write("  %s: %s\n" % (k, v))


def fmt_num(v, digits=1):
    if v is None or v != v:
        return "-"
    if abs(v) >= 1000:
        return "{:,.0f}".format(v)
    return "%.*f" % (digits, v)


def fmt_spread(fig):
    return "±%.0f%%" % (fig["spread_pct"] / 2) if fig and fig.get("spread_pct") is not None \
        and len(fig["reps"]) > 1 else "-"
