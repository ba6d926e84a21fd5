#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""metrics-check.py - check tap-ctl metrics output against tap-ctl stats.

Usage: metrics-check.py METRICS_FILE STATS_JSON_FILE [DISK=STRIPED ...]

METRICS_FILE is parsed with prometheus_client's text-format parser (the
one Prometheus' own Python client uses); STATS_JSON_FILE is what `tap-ctl
stats --all --json` printed at the same moment (the disks idle).  Every
family must have HELP and TYPE, a tapstripe_ name and appear once; every
sample of every disk must equal the number stats --json gives.  Prints
one PASS/FAIL line per check; exits 1 when one fails."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

failed = 0


def check(ok, what, detail=""):
    global failed
    print("%s: %s%s" % ("PASS" if ok else "FAIL", what, "" if ok else " (%s)" % detail))
    failed += not ok


def samples_by_disk(families):
    """{disk: {(sample name, other labels as a sorted tuple): value}}"""
    out = {}
    for fam in families:
        for s in fam.samples:
            labels = dict(s.labels)
            disk = labels.pop("disk", None)
            out.setdefault(disk, {})[(s.name, tuple(sorted(labels.items())))] = s.value
    return out


def expected(st):
    """The samples a disk's stats --json object says tap-ctl metrics shows."""
    want = {}
    for op, o in st["ops"].items():
        for key, name in (("requests", "requests"), ("bytes", "bytes"), ("errors", "errors")):
            want[("tapstripe_io_%s_total" % name, (("op", op),))] = o[key]
    want[("tapstripe_io_inflight", ())] = st["inflight"]
    for name, v in st["counters"].items():
        want[("tapstripe_driver_events_total", (("counter", name),))] = v
    want[("tapstripe_io_latency_seconds_count", ())] = st["latency_us"]["count"]
    want[("tapstripe_io_latency_seconds_bucket", (("le", "+Inf"),))] = st["latency_us"]["count"]
    stripe = (st.get("drivers") or {}).get("stripe")
    if stripe:
        want[("tapstripe_stripe_stale_replicas", ())] = stripe["stale_replicas"]
        want[("tapstripe_stripe_dirty_regions", ())] = stripe["dirty_regions"]
        want[("tapstripe_stripe_resync_bytes_total", ())] = \
            stripe["resync"]["bytes_copied_since_open"]
    return want


def check_buckets(disk, got, st):
    """Each finite bucket: the I/Os of stats' latency_buckets_us at most le."""
    hist = st["latency_buckets_us"]
    n = 0
    for (name, labels), v in got.items():
        if name != "tapstripe_io_latency_seconds_bucket" or labels == (("le", "+Inf"),):
            continue
        le_us = round(float(dict(labels)["le"]) * 1e6)
        cum = sum(b["count"] for b in hist if b["max_us"] <= le_us)
        if v != cum:
            check(False, "%s: latency bucket le=%s" % (disk, dict(labels)["le"]),
                  "metrics %s, stats %s" % (v, cum))
            return
        n += 1
    check(n >= 20, "%s: %d latency buckets equal stats' latency_buckets_us" % (disk, n))


def main():
    text = open(sys.argv[1]).read()
    stats = json.load(open(sys.argv[2]))
    striped = set(sys.argv[3:])
    families = list(text_string_to_metric_families(text))
    names = [f.name for f in families]
    check(len(names) == len(set(names)), "each family appears once", names)
    bad = [f.name for f in families
           if not f.name.startswith("tapstripe_") or f.type == "unknown" or not f.documentation]
    check(not bad, "%d families, each tapstripe_* with HELP and TYPE" % len(names), bad)
    # the parser drops a counter's _total from the family's name
    check(all(("# TYPE %s " % n) in text or ("# TYPE %s_total " % n) in text for n in names),
          "a TYPE line for each family")
    got = samples_by_disk(families)
    check(set(got) == {s["name"] for s in stats}, "disks: %s" % sorted(got),
          "stats has %s" % sorted(s["name"] for s in stats))
    for st in stats:
        disk, mine = st["name"], got.get(st["name"], {})
        want = expected(st)
        wrong = ["%s%s: metrics %s, stats %s" % (k[0], dict(k[1]), mine.get(k), v)
                 for k, v in want.items() if mine.get(k) != v]
        check(not wrong, "%s: %d samples equal tap-ctl stats --json" % (disk, len(want)),
              "; ".join(wrong[:5]))
        check_buckets(disk, mine, st)
        if disk in striped:
            check("stripe" in (st.get("drivers") or {}) and
                  ("tapstripe_stripe_stale_replicas", ()) in mine,
                  "%s: the stripe driver's gauges are there" % disk)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
