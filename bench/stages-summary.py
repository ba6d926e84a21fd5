#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""stages-summary.py RESULTS - bench/stages.sh's Markdown table.

RESULTS holds one JSON object per run (see stages.sh).  Rows: a figure;
columns: read and write with polling off and on; cells: the median over
the repetitions and its min-max.
"""
import json
import statistics
import sys

ROWS = [
    ("dd: the disk's own time", "dd", "us"),
    ("fio libaio QD 1 (AIO, no tapdisk)", "fio", "us"),
    ("td-front interval (1/IOPS)", "front", "interval_us"),
    ("td-front mean latency", "front", "latency_us"),
    ("tapdisk residence", "front", "residence_us"),
    ("- parse (ring read -> vbd)", "front", "parse_us"),
    ("- issue (vbd -> driver)", "front", "issue_us"),
    ("- submit (-> io_submit returned)", "front", "submit_us"),
    ("- disk (-> completion reaped)", "front", "disk_us"),
    ("- callback (-> vbd callback)", "front", "callback_us"),
    ("- wait (-> response hook)", "front", "wait_us"),
    ("- notify (push, eventfd write)", "front", "notify_us"),
    ("legs: latency - residence", "front", "legs_us"),
    ("latency - dd", "front", "over_dd_us"),
    ("latency - fio libaio", "front", "over_fio_us"),
    ("wake -> ring read (per pass)", "front", "wake_to_ring_us"),
    ("wake -> completion reaped", "front", "wake_to_reap_us"),
]
COLS = [("read", "off"), ("write", "off"), ("read", "poll"), ("write", "poll")]


def cell(values):
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return "%.1f" % med
    return "%.1f (%.1f-%.1f)" % (med, min(values), max(values))


def main():
    runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    dd, fio = {}, {}
    for r in runs:
        if r["target"] == "dd":
            dd.setdefault((r["op"], r["rep"]), r["us"])
        if r["target"] == "fio":
            fio.setdefault((r["op"], r["rep"]), r["us"])
    for r in runs:
        if r["target"] == "front":
            r["legs_us"] = r["latency_us"] - r["residence_us"]
            if (r["op"], r["rep"]) in dd:
                r["over_dd_us"] = r["latency_us"] - dd[(r["op"], r["rep"])]
            if (r["op"], r["rep"]) in fio:
                r["over_fio_us"] = r["latency_us"] - fio[(r["op"], r["rep"])]
    print("| us per request | " +
          " | ".join("%s, polling %s" % (op, "on" if m == "poll" else m)
                     for op, m in COLS) + " |")
    print("|---|" + "---|" * len(COLS))
    for label, target, key in ROWS:
        cells = []
        for op, mode in COLS:
            vals = [r[key] for r in runs if r["target"] == target and
                    r["op"] == op and r.get("mode", mode) == mode and key in r]
            cells.append(cell(vals))
        print("| %s | %s |" % (label, " | ".join(cells)))


if __name__ == "__main__":
    main()
