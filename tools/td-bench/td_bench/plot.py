# SPDX-License-Identifier: BSD-3-Clause
"""plot.py - SVG and PNG pictures with gnuplot (Debian: gnuplot-nox).

A plot spec (stored in the result file, so that `td-bench plot` can draw
it again later) is {"name", "title", "xlabel", "ylabel", "logx": base or
absent, "logy": base or absent (a block-size sweep spans three decades),
"xtime": bool, "series": [{"title", "points": [[x, y], ...], "dashed": bool,
"color": "#rrggbb"}]}.
"""
import datetime
import fnmatch
import json
import os
import shutil
import subprocess

MAX_HISTORY_SERIES = 12


def available():
    return shutil.which("gnuplot") is not None


def _png_terminal():
    p = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    return "pngcairo" if "pngcairo" in (p.stdout + p.stderr) else "png"


def _quote(s):
    return '"%s"' % str(s).replace("\\", "\\\\").replace('"', '\\"')


def _script(spec, terminal, out):
    lines = []
    if terminal == "svg":
        lines.append("set terminal svg size 900,540 dynamic enhanced font 'sans,11' background '#ffffff'")
    else:
        lines.append("set terminal %s size 900,540 enhanced font 'sans,10'" % terminal)
    lines += ["set output %s" % _quote(out), "set title %s noenhanced" % _quote(spec["title"]),
              "set xlabel %s noenhanced" % _quote(spec["xlabel"]),
              "set ylabel %s noenhanced" % _quote(spec["ylabel"]),
              "set grid", "set key outside right top noenhanced", "set yrange [0:*]"]
    if spec.get("logx"):
        lines.append("set logscale x %d" % spec["logx"])
    if spec.get("logy"):
        lines += ["set logscale y %d" % spec["logy"], "set yrange [*:*]"]
    if spec.get("xtime"):
        lines += ["set xdata time", "set timefmt '%s'", "set format x '%Y-%m-%d %H:%M'",
                  "set xtics rotate by -30", "set yrange [*:*]"]
    plots = []
    for i, s in enumerate(spec["series"]):
        lines.append("$D%d << EOD" % i)
        lines += ["%r %r" % (float(x), float(y)) if not spec.get("xtime") else "%d %r" % (x, y)
                  for x, y in s["points"]]
        lines.append("EOD")
        style = "linespoints lw 2 pt %d" % (i % 7 + 1)
        if s.get("dashed"):
            style += " dt 2"
        if s.get("color"):
            style += " lc rgb %s" % _quote(s["color"])
        plots.append("$D%d using 1:2 with %s title %s" % (i, style, _quote(s["title"])))
    lines.append("plot " + ", \\\n     ".join(plots))
    return "\n".join(lines) + "\n"


def render(spec, out_base):
    """out_base.svg and out_base.png; returns the paths made."""
    if not spec["series"] or not any(s["points"] for s in spec["series"]):
        return []
    made = []
    for term, ext in (("svg", "svg"), (_png_terminal(), "png")):
        out = "%s.%s" % (out_base, ext)
        p = subprocess.run(["gnuplot"], input=_script(spec, term, out), capture_output=True,
                           text=True)
        if p.returncode:
            raise RuntimeError("gnuplot failed on %s: %s" % (out, p.stderr[-500:]))
        made.append(out)
    return made


def history_spec(paths, patterns=None, absolute=False):
    """Ratios over time across result files (or baselines): each relative to
    its first value (1.0 = unchanged), so that requests per I/O (1) and
    segments per request (256) fit one picture; absolute=True plots them
    as they are."""
    points = {}
    for path in paths:
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue
        if "figures" in d:
            when, figs = d.get("started"), {n: f["value"] for n, f in d["figures"].items()
                                            if f.get("kind") == "ratio"}
        elif "metrics" in d:
            when, figs = d.get("created"), {n: m["value"] for n, m in d["metrics"].items()}
        else:
            continue
        if not when:
            continue
        t = datetime.datetime.fromisoformat(when).timestamp()
        for n, v in figs.items():
            if patterns and not any(fnmatch.fnmatch(n, p) for p in patterns):
                continue
            points.setdefault(n, []).append((int(t), v))
    names = sorted(n for n, p in points.items() if len(p) >= 1)
    dropped = names[MAX_HISTORY_SERIES:]
    series = []
    for n in names[:MAX_HISTORY_SERIES]:
        pts = sorted(points[n])
        first = pts[0][1]
        if not absolute and first:
            pts = [(t, v / first) for t, v in pts]
        series.append({"title": n, "points": pts})
    return ({"name": "history", "xlabel": "date", "xtime": True, "series": series,
             "title": "td-bench ratios over time" + ("" if absolute else
                                                      ", each relative to its first value"),
             "ylabel": "ratio" if absolute else "ratio / its first value"}, dropped)


def render_all(data, out_prefix):
    made = []
    for spec in data.get("plots", []):
        made += render(spec, "%s-%s" % (out_prefix, spec["name"]))
    return made


def default_prefix(result_path):
    base, _ = os.path.splitext(result_path)
    return base
