# SPDX-License-Identifier: BSD-3-Clause
"""regress.py - compare a run's ratios with a baseline, and say so plainly.

A baseline (bench/baselines/*.json) holds, per metric, the value of a
previous run, which way is better, and a tolerance: the relative change
allowed in the worse direction before the metric counts as a regression.
Only "ratio" figures are compared (virtual/physical, requests per I/O,
...): both sides of a ratio were measured in the same run, so a busy
machine moves them far less than it moves IOPS or MiB/s.  Absolute
figures are kept in the result file for the record and never compared.

A metric in the baseline that the run should have produced (its suite
ran) but did not is MISSING, and fails the comparison.  A better value
beyond the tolerance is flagged as "better": a chance to tighten the
baseline with --update-baseline.
"""
import datetime
import fnmatch
import json
import os

from .core import InputError, fmt_num

BASELINE_FORMAT = "td-bench-baseline 1"
DEFAULT_TOLERANCE = 0.25


def _read_json(path, what):
    """The JSON object in path, or InputError saying in one line why not."""
    try:
        with open(path) as f:
            d = json.load(f)
    except OSError as e:
        raise InputError("cannot read the %s %s: %s" % (what, path, e.strerror or e))
    except ValueError as e:  # bad JSON, or not UTF-8
        raise InputError("the %s %s is not valid JSON: %s" % (what, path, e))
    if not isinstance(d, dict):
        raise InputError("the %s %s is not a JSON object" % (what, path))
    return d


def _check_entries(path, what, table, keys):
    if not isinstance(table, dict) or not all(
            isinstance(v, dict) and all(k in v for k in keys) for v in table.values()):
        raise InputError("the %s %s is malformed: each entry needs %s"
                         % (what, path, ", ".join(keys)))


def load(path):
    """A baseline file, checked; InputError when it is missing or malformed."""
    b = _read_json(path, "baseline")
    if b.get("format") != BASELINE_FORMAT:
        raise InputError("%s is not a td-bench baseline (format %r, want %r)"
                         % (path, b.get("format"), BASELINE_FORMAT))
    _check_entries(path, "baseline", b.get("metrics"), ("value", "better", "tolerance"))
    return b


def load_result(path):
    """A result file (td-bench --json-out), checked; InputError when it is
    missing or malformed."""
    d = _read_json(path, "result file")
    if "figures" not in d:
        raise InputError("%s is not a td-bench result file (no \"figures\")" % path)
    _check_entries(path, "result file", d["figures"], ("kind", "value"))
    return d


def write(path, data, old=None, keep_others=False):
    """The ratio figures of data as a baseline; tolerances an operator set by
    hand in the old baseline are kept, and with keep_others its metrics that
    data does not have.  Returns the number of metrics written."""
    old_m = (old or {}).get("metrics", {})
    metrics = {}
    for name, f in sorted(data["figures"].items()):
        if f["kind"] != "ratio":
            continue
        tol = old_m.get(name, {}).get("tolerance", f.get("tolerance", DEFAULT_TOLERANCE))
        metrics[name] = {"value": round(f["value"], 4), "better": f["better"],
                         "tolerance": tol, "spread_pct": round(f.get("spread_pct") or 0, 1),
                         "reps": [round(r, 4) for r in f["reps"]]}
    if keep_others:
        for name, m in old_m.items():
            metrics.setdefault(name, m)
        metrics = dict(sorted(metrics.items()))
    base = {"format": BASELINE_FORMAT,
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "from": {"suite": data["suite"], "command": data["command"],
                     "machine": data["machine"], "quiet": data.get("quiet")},
            "comment": "tolerance: the relative change allowed in the worse direction; "
                       "edit by hand, --update-baseline keeps it",
            "metrics": metrics}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(base, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return len(metrics)


def _judge(v, base, better, tol):
    if base == 0:
        worse = v > tol if better == "lower" else v < -tol
        return "REGRESSION" if worse else "ok", 0.0
    change = v / base - 1.0
    worse = -change if better == "higher" else change
    if worse > tol:
        return "REGRESSION", change
    if -worse > tol:
        return "better", change
    return "ok", change


def compare(data, baseline, suites, only=None):
    """Rows of the verdict table, and the names that regressed or vanished."""
    rows, bad, better = [], [], []
    figs = data["figures"]
    for name, b in sorted(baseline["metrics"].items()):
        if name.split(".")[0] not in suites:
            continue
        if only and not any(fnmatch.fnmatch(name, p) for p in only):
            continue
        f = figs.get(name)
        sign = "-" if b["better"] == "higher" else "+"
        allowed = "%s%.0f%%" % (sign, 100 * b["tolerance"])
        if f is None:
            rows.append([name, b["better"], fmt_num(b["value"], 2), "-", "-", "-", allowed,
                         "MISSING"])
            bad.append(name)
            continue
        verdict, change = _judge(f["value"], b["value"], b["better"], b["tolerance"])
        rows.append([name, b["better"], fmt_num(b["value"], 2), fmt_num(f["value"], 2),
                     "±%.0f%%" % (f["spread_pct"] / 2) if f.get("spread_pct") is not None
                     and len(f["reps"]) > 1 else "-",
                     "%+.1f%%" % (100 * change), allowed,
                     "**REGRESSION**" if verdict == "REGRESSION" else verdict])
        if verdict == "REGRESSION":
            bad.append(name)
        elif verdict == "better":
            better.append(name)
    new = [n for n, f in figs.items() if f["kind"] == "ratio" and n not in baseline["metrics"]
           and (not only or any(fnmatch.fnmatch(n, p) for p in only))]
    return rows, bad, better, new


def verdict_text(baseline_path, baseline, rows, bad, better, new, figs):
    src = baseline.get("from", {})
    m = src.get("machine", {})
    lines = ["baseline: %s (made %s on %s, commit %s)" % (
        baseline_path, baseline.get("created", "?"), m.get("host", "?"), m.get("commit", "?"))]
    if better:
        lines.append("better than the baseline beyond its tolerance: %s (if that holds over "
                     "several runs on a quiet machine, make a new baseline)" % ", ".join(better))
    if new:
        lines.append("%d ratio(s) not in the baseline, not compared: %s" % (
            len(new), ", ".join(sorted(new)[:8]) + (" ..." if len(new) > 8 else "")))
    if bad:
        lines.append("VERDICT: REGRESSION in %d of %d metrics:" % (len(bad), len(rows)))
        base = baseline["metrics"]
        for n in bad:
            f = figs.get(n)
            if f is None:
                lines.append("  %s: MISSING (the run did not produce it)" % n)
            else:
                lines.append("  %s: %s -> %s (%s is better; allowed %s%.0f%%)" % (
                    n, fmt_num(base[n]["value"], 2), fmt_num(f["value"], 2), base[n]["better"],
                    "-" if base[n]["better"] == "higher" else "+", 100 * base[n]["tolerance"]))
    else:
        lines.append("VERDICT: PASS: %d metrics within their tolerance" % len(rows))
    return "\n".join(lines)
