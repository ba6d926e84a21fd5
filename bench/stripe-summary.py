#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""stripe-summary.py RESULTS [JSON_OUT] [KEY=VALUE...]: the tables, ratios,
verdicts and JSON of bench/stripe-scaling.sh (its header documents them).

RESULTS holds one line per run: GROUP TARGET OP BS QD REP MIB_S
CPU_US_PER_MIB (the client's CPU time per MiB moved).  Medians
of the repetitions, spread = (max - min) / median, ratios of medians.
Exit status 1 when a counted target is missed, else 0."""
import json
import statistics
import sys

LABELS = {
    "a1": "tapstripe, 1 column on 1 server",
    "a4": "tapstripe, 4 columns on 4 servers",
    "fio4": "fio libiscsi, 4 LUNs",
    "physical": "physical (fio libiscsi, 1 LUN)",
    "b1": "tapstripe, 1 server",
    "b2": "tapstripe, striped over 2",
    "b2p": "striped over 2, plain stripe:",
    "c1": "2 columns x R=1 on 2 servers",
    "c2": "2 columns x R=2 on 4 servers",
}
FIG61 = [("write512k-qd1", "512 KiB direct write", 1),
         ("write512k-qd8", "512 KiB direct write", 8),
         ("write4k-qd1", "4 KiB sequential write", 1),
         ("write4k-qd32", "4 KiB sequential write", 32)]
# b workloads whose verdict counts; 4 KiB at QD 1 is latency-bound (one
# write touches one server at a time): shown, not counted.
FIG61_COUNTED = {"write512k-qd1", "write512k-qd8", "write4k-qd32"}


def main():
    path, out = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    settings = {}
    for kv in sys.argv[3:]:
        k, v = kv.split("=", 1)
        try:
            settings[k] = int(v)
        except ValueError:
            try:
                settings[k] = float(v)
            except ValueError:
                settings[k] = v
    groups = {}
    for line in open(path):
        g, t, op, bs, qd, rep, mib, cpu = line.split()
        grp = groups.setdefault(g, {"op": op, "bs": bs, "qd": int(qd), "targets": {}})
        d = grp["targets"].setdefault(t, {"reps": [], "cpu_reps": []})
        d["reps"].append(float(mib))
        d["cpu_reps"].append(float(cpu))
    for grp in groups.values():
        for d in grp["targets"].values():
            r = d["reps"]
            d["mib_s"] = statistics.median(r)
            d["spread_pct"] = 100.0 * (max(r) - min(r)) / d["mib_s"] if d["mib_s"] else 0.0
            d["cpu_us_per_mib"] = statistics.median(d.pop("cpu_reps"))

    def med(g, t):
        try:
            return groups[g]["targets"][t]["mib_s"]
        except KeyError:
            return None

    def spread(g, t):
        d = groups.get(g, {}).get("targets", {}).get(t)
        if not d or len(d["reps"]) < 2:
            return "-"
        return "%.0f%%" % d["spread_pct"]

    def cpu(g, t):
        d = groups.get(g, {}).get("targets", {}).get(t)
        return "-" if not d else "%.0f" % d["cpu_us_per_mib"]

    def fmt(x):
        return "-" if x is None else "%.1f" % x

    ratios, targets = {}, []

    def ratio(name, g, num, den, minimum=None, counted=True):
        a, b = med(g, num), med(g, den)
        if a is None or b is None or not b:
            return None
        ratios[name] = a / b
        if minimum is not None:
            targets.append({"name": name, "value": a / b, "min": minimum,
                            "met": a / b >= minimum, "counted": counted})
        return a / b

    def r2(x):
        return "-" if x is None else "**%.2f**" % x

    rate = settings.get("rate_mib_s", "?")
    # --- part a
    if "a.write" in groups or "a.read" in groups:
        qd = (groups.get("a.write") or groups.get("a.read"))["qd"]
        print("\n### a) 1 MiB sequential I/O, QD %d, servers capped at %s MiB/s "
              "(stripe unit 1 MiB; fio: one job per LUN at QD %d)\n" % (qd, rate, qd // 4))
        print("| op | 1 column, 1 server | spread | 4 columns, 4 servers | spread | "
              "fio libiscsi, 4 LUNs | spread | 4 col / 1 col (>= 3.8) | "
              "tapstripe / fio (>= 0.95) | client CPU us/MiB: 4 col | fio |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for op in ("write", "read"):
            g = "a." + op
            if g not in groups:
                continue
            s = ratio("a.%s.4col_vs_1col" % op, g, "a4", "a1", 3.8)
            f = ratio("a.%s.tapstripe_vs_fio" % op, g, "a4", "fio4", 0.95)
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                op, fmt(med(g, "a1")), spread(g, "a1"), fmt(med(g, "a4")), spread(g, "a4"),
                fmt(med(g, "fio4")), spread(g, "fio4"), r2(s), r2(f), cpu(g, "a4"),
                cpu(g, "fio4")))
    # --- part b
    if any(g.startswith("b.") for g in groups):
        print("\n### b) The thesis's figure 6.1: writes, servers capped at %s MiB/s "
              "(stripe unit 256 KiB; tapstripe = sort|stripe:)\n" % rate)
        print("| workload | QD | physical (fio, 1 LUN) | spread | tapstripe, 1 server | spread | "
              "tapstripe, striped over 2 | spread | striped / physical | "
              "striped over 2, plain stripe: | plain / physical |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for key, what, qd in FIG61:
            g = "b." + key
            if g not in groups:
                continue
            counted = key in FIG61_COUNTED
            s = ratio("b.%s.striped2_vs_physical" % key, g, "b2", "physical", 1.0, counted)
            p = ratio("b.%s.plain2_vs_physical" % key, g, "b2p", "physical")
            print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                what, qd, fmt(med(g, "physical")), spread(g, "physical"), fmt(med(g, "b1")),
                spread(g, "b1"), fmt(med(g, "b2")), spread(g, "b2"), r2(s),
                fmt(med(g, "b2p")), "-" if p is None else "%.2f" % p))
    # --- part c
    if "c.write" in groups or "c.read" in groups:
        qd = (groups.get("c.write") or groups.get("c.read"))["qd"]
        print("\n### c) R = 2 against R = 1 at equal load per server: 1 MiB sequential, "
              "QD %d, servers capped at %s MiB/s\n" % (qd, rate))
        print("| op | 2 columns x R=1 on 2 servers | spread | 2 columns x R=2 on 4 servers | "
              "spread | R=2 / R=1 | cost |")
        print("|---|---|---|---|---|---|---|")
        for op in ("write", "read"):
            g = "c." + op
            if g not in groups:
                continue
            x = ratio("c.%s.r2_vs_r1" % op, g, "c2", "c1", 0.90 if op == "write" else None)
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                op, fmt(med(g, "c1")), spread(g, "c1"), fmt(med(g, "c2")), spread(g, "c2"),
                r2(x), "-" if x is None else "%+.1f%%" % (100 * (1 - x)) if op == "write"
                else "- (R=2 reads both replicas)"))

    print()
    for t in targets:
        print("VERDICT %-34s %6.3f >= %-4g %s" % (
            t["name"], t["value"], t["min"],
            ("met" if t["met"] else "MISSED") + ("" if t["counted"] else
                                                 " (not counted: QD 1 4 KiB is latency-bound)")))
    met = all(t["met"] for t in targets if t["counted"])
    print("VERDICT overall: %s" % ("every target met" if met else "a target was MISSED"))

    scaling = []
    for op in ("write", "read"):
        for t, n in (("a1", 1), ("a4", 4)):
            d = groups.get("a." + op, {}).get("targets", {}).get(t)
            if d:
                scaling.append({"servers": n, "op": op, "mib_s": d["mib_s"], "reps": d["reps"]})
    for key, _, _ in FIG61:
        for t, n in (("b1", 1), ("b2", 2)):
            d = groups.get("b." + key, {}).get("targets", {}).get(t)
            if d:
                scaling.append({"servers": n, "op": "fig61-" + key, "mib_s": d["mib_s"],
                                "reps": d["reps"]})
    if out:
        with open(out, "w") as f:
            json.dump({"scaling": scaling, "ratios": ratios, "targets": targets,
                       "groups": groups, "settings": settings, "met": met}, f, indent=2)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
