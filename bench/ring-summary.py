#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""ring-summary.py RESULTS CLK_TCK [JSON] - the tables of bench/ring.sh.

RESULTS has one line per run:
  part config target rep iops mib_s ios backend_requests backend_submits
  frontend_segments frontend_requests tapdisk_ticks frontend_cpu_us
  seg_histogram
Prints medians (with the spread, (max - min) / median, of the
repetitions), ratios of medians of this run, and the thesis table in
Markdown.  Exits 1 when a 1 MiB write with 256 or more segments did not
arrive at tapdisk as exactly one request.
"""
import json
import statistics
import sys

CPU_TARGET_US = 3.0
RATIO_TARGETS = {"randread4k-qd32": 0.9, "seqread1m-qd8": 0.97,
                 "seqwrite1m-qd8": 0.97}
ONE_REQUEST_FROM = 256


def load(path):
    rows = {}
    for line in open(path):
        f = line.split()
        r = {"iops": float(f[4]), "mib_s": float(f[5]), "ios": int(f[6]),
             "be_reqs": int(f[7]), "be_submits": int(f[8]),
             "fe_segs": int(f[9]), "fe_reqs": int(f[10]),
             "ticks": int(f[11]), "fe_cpu_us": int(f[12]), "hist": f[13]}
        rows.setdefault((f[0], f[1], f[2]), []).append(r)
    return rows


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def spread(runs, key):
    vals = [r[key] for r in runs]
    m = statistics.median(vals)
    return 100.0 * (max(vals) - min(vals)) / m if m else 0.0


def td_cpu_us(runs, hz):
    """tapdisk's CPU per request: median over the repetitions."""
    return statistics.median(1e6 * r["ticks"] / hz / max(1, r["be_reqs"])
                             for r in runs)


def fe_cpu_us(runs):
    return statistics.median(r["fe_cpu_us"] / max(1, r["ios"]) for r in runs)


def null_part(rows, hz, report):
    runs = rows.get(("null", "randread4k-qd32", "ring"))
    if not runs:
        return
    cpu = td_cpu_us(runs, hz)
    print("## null: driver, 4 KiB random read, QD 32, %d repetitions" % len(runs))
    print("%10s %9s %16s %16s" % ("IOPS", "spread", "tapdisk us/req", "td-front us/I/O"))
    print("%10.0f %8.1f%% %16.2f %16.2f" % (med(runs, "iops"), spread(runs, "iops"),
                                             cpu, fe_cpu_us(runs)))
    print("tapdisk CPU per request: %.2f us, target <= %.1f us: %s\n"
          % (cpu, CPU_TARGET_US, "met" if cpu <= CPU_TARGET_US else "NOT met"))
    report["null"] = {"iops": med(runs, "iops"), "spread_pct": spread(runs, "iops"),
                      "tapdisk_cpu_us_per_request": cpu,
                      "td_front_cpu_us_per_io": fe_cpu_us(runs),
                      "reps": [r["iops"] for r in runs]}


def aio_part(rows, hz, report):
    parts = sorted({k[0] for k in rows if k[0].startswith("aio:")})
    for part in parts:
        print("## %s: td-front through the ring vs fio libaio O_DIRECT" % part)
        print("%-16s %10s %9s %8s %10s %9s %8s %7s %7s %13s" % (
            "job", "fio IOPS", "MiB/s", "spread", "ring IOPS", "MiB/s",
            "spread", "ratio", "target", "tapdisk us/req"))
        for job in ("randread4k-qd32", "seqread1m-qd8", "seqwrite1m-qd8"):
            fio = rows.get((part, job, "fio"))
            ring = rows.get((part, job, "ring"))
            if not fio or not ring:
                continue
            ratio = med(ring, "iops") / med(fio, "iops")
            target = RATIO_TARGETS[job]
            print("%-16s %10.0f %9.1f %7.1f%% %10.0f %9.1f %7.1f%% %7.3f %6.2f%s %13.2f" % (
                job, med(fio, "iops"), med(fio, "mib_s"), spread(fio, "iops"),
                med(ring, "iops"), med(ring, "mib_s"), spread(ring, "iops"),
                ratio, target, " " if ratio >= target else "!", td_cpu_us(ring, hz)))
            report.setdefault(part, {})[job] = {
                "fio_iops": med(fio, "iops"), "ring_iops": med(ring, "iops"),
                "fio_mib_s": med(fio, "mib_s"), "ring_mib_s": med(ring, "mib_s"),
                "ratio": ratio, "target": target,
                "fio_reps": [r["iops"] for r in fio],
                "ring_reps": [r["iops"] for r in ring],
                "tapdisk_cpu_us_per_request": td_cpu_us(ring, hz)}
        print("(\"!\": below target)\n")


def thesis_cells(rows, part):
    cells = {}
    for (p, config, target), runs in rows.items():
        if p == part:
            segs, order = (int(x) for x in config.split(":"))
            cells[(segs, order)] = runs
    return cells


def check_one_request(segs, order, runs):
    """A 1 MiB write must be one request of 129-256 segments from 256 on."""
    ok = True
    for r in runs:
        if segs >= ONE_REQUEST_FROM and (r["be_reqs"] != r["ios"] or
                                         r["hist"] != "129-256:%d" % r["ios"]):
            print("FAIL: %d segments, ring order %d: %d requests for %d "
                  "writes, histogram %s" % (segs, order, r["be_reqs"],
                                            r["ios"], r["hist"]),
                  file=sys.stderr)
            ok = False
    return ok


def thesis_part(rows, report, part):
    cells = thesis_cells(rows, part)
    ok = True
    orders = sorted({o for _, o in cells})
    print("## %s: 1 MiB O_DIRECT writes, QD 1 (tapdisk's own counters)\n"
          % part)
    print("| max segments | requests per 1 MiB write | segments per request | "
          "backend submissions per write | "
          + " | ".join("MiB/s, ring order %d" % o for o in orders) + " |")
    print("|---|---|---|---|" + "---|" * len(orders))
    for segs in sorted({s for s, _ in cells}):
        per_io, per_req, subs, line = set(), set(), set(), []
        for order in orders:
            runs = cells.get((segs, order))
            if not runs:
                line.append("-")
                continue
            for r in runs:
                per_io.add(r["be_reqs"] / max(1, r["ios"]))
                per_req.add(round(r["fe_segs"] / max(1, r["fe_reqs"]), 2))
                subs.add(round(r["be_submits"] / max(1, r["ios"]), 2))
            ok &= check_one_request(segs, order, runs)
            line.append("%.0f (±%.0f%%)" % (med(runs, "mib_s"),
                                            spread(runs, "mib_s") / 2))
            report.setdefault(part, {})["%d:%d" % (segs, order)] = {
                "requests_per_io": med(runs, "be_reqs") / max(1, med(runs, "ios")),
                "backend_submits_per_io": med(runs, "be_submits") / max(1, med(runs, "ios")),
                "mib_s": med(runs, "mib_s"), "reps": [r["mib_s"] for r in runs]}
        print("| %d | %s | %s | %s | %s |" % (
            segs, "/".join("%g" % v for v in sorted(per_io)),
            "/".join("%.2f" % v for v in sorted(per_req)),
            "/".join("%g" % v for v in sorted(subs)), " | ".join(line)))
    print("\nMiB/s: median of the repetitions (± half their spread).  A 1 MiB "
          "write as one request from %d segments: %s\n"
          % (ONE_REQUEST_FROM, "yes" if ok else "NO"))
    return ok


QUEUES_TARGET = 1.6  # issue #22: 2 rings >= 1.6 x 1 ring


def queues_part(rows, hz, report):
    base = rows.get(("queues", "randread4k-qd32-q1", "ring"))
    if not base:
        return
    print("## queues: null: driver, 4 KiB random read, QD 32 per ring, "
          "%d repetitions" % len(base))
    print("%6s %10s %9s %8s %16s %16s" % ("rings", "IOPS", "spread", "x 1 ring",
                                         "tapdisk us/req", "td-front us/I/O"))
    one = med(base, "iops")
    for q in (1, 2, 4):
        runs = rows.get(("queues", "randread4k-qd32-q%d" % q, "ring"))
        if not runs:
            continue
        ratio = med(runs, "iops") / one if one else 0.0
        print("%6d %10.0f %8.1f%% %8.2f %16.2f %16.2f"
              % (q, med(runs, "iops"), spread(runs, "iops"), ratio,
                 td_cpu_us(runs, hz), fe_cpu_us(runs)))
        report.setdefault("queues", {})[str(q)] = {
            "iops": med(runs, "iops"), "spread_pct": spread(runs, "iops"),
            "ratio_to_one_ring": ratio,
            "tapdisk_cpu_us_per_request": td_cpu_us(runs, hz),
            "td_front_cpu_us_per_io": fe_cpu_us(runs),
            "reps": [r["iops"] for r in runs]}
    two = report.get("queues", {}).get("2")
    if two:
        print("2 rings / 1 ring: %.2f, target >= %.1f: %s\n"
              % (two["ratio_to_one_ring"], QUEUES_TARGET,
                 "met" if two["ratio_to_one_ring"] >= QUEUES_TARGET
                 else "NOT met"))


def main():
    rows = load(sys.argv[1])
    hz = int(sys.argv[2])
    report = {}
    null_part(rows, hz, report)
    queues_part(rows, hz, report)
    aio_part(rows, hz, report)
    ok = True
    for part in sorted({k[0] for k in rows if k[0].startswith("thesis:")}):
        ok &= thesis_part(rows, report, part)
    if len(sys.argv) > 3 and sys.argv[3]:
        json.dump(report, open(sys.argv[3], "w"), indent=2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
