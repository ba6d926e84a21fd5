#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""check-layers.py - fail if a source file includes a header of a folder it
may not use (an upward arrow), or if the allowed table has a cycle.

The folders are the modules; ALLOWED says which modules each may include
(besides itself).  tools/, tests/ and bench/ sit on top and may use
everything.  doc/architecture.md draws the same graph."""
import os
import re
import subprocess
import sys

ALLOWED = {
    "common": [],
    "master": ["common"],
    "master/client": ["master", "common"],
    "master/server": ["master", "master/etcd", "common"],
    "master/etcd": ["common"],
    "tapdisk": ["common"],
    "tapdisk/control": ["tapdisk", "common"],
    "frontends/blkif": ["tapdisk", "common"],
    "frontends/nbd": ["tapdisk", "common"],
    "frontends/shm": ["frontends/blkif", "tapdisk", "common"],
    "frontends/xen": ["frontends/blkif", "tapdisk", "common"],
    "drivers": ["tapdisk", "common"],
    "drivers/aio": ["drivers", "tapdisk", "common"],
    "drivers/null": ["drivers", "tapdisk", "common"],
    "drivers/sort": ["drivers", "tapdisk", "common"],
    "drivers/qos": ["drivers", "tapdisk", "common"],
    "drivers/cbt": ["drivers", "tapdisk", "common"],
    "drivers/stripe/map": ["common"],
    "drivers/stripe/iscsi": ["common"],
    "drivers/stripe": ["drivers/stripe/map", "drivers/stripe/iscsi",
                       "drivers", "tapdisk", "master/client", "master",
                       "common"],
}
TOP = ("tools/", "tests/", "bench/")
GENERATED = {"config.h", "master/stripe.h"}


def acyclic():
    state = {}

    def visit(m, path):
        if state.get(m) == 1:
            return path[path.index(m):] + [m]
        if state.get(m) == 2:
            return None
        state[m] = 1
        for d in ALLOWED.get(m, []):
            cyc = visit(d, path + [m])
            if cyc:
                return cyc
        state[m] = 2
        return None

    for m in ALLOWED:
        cyc = visit(m, [])
        if cyc:
            return cyc
    return None


def main():
    top = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    os.chdir(top)
    cyc = acyclic()
    if cyc:
        print("check-layers: the allowed table has a cycle: " + " -> ".join(cyc))
        return 1
    files = subprocess.run(["git", "ls-files", "*.c", "*.h"], capture_output=True,
                           text=True, check=True).stdout.split()
    bad = 0
    for f in files:
        if f.startswith(TOP):
            continue
        mod = os.path.dirname(f)
        if mod not in ALLOWED:
            print("check-layers: %s: folder %s is not a known module "
                  "(add it to tests/check-layers.py)" % (f, mod))
            bad = 1
            continue
        with open(f, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m or m.group(1) in GENERATED:
                    continue
                hmod = os.path.dirname(m.group(1))
                if hmod != mod and hmod not in ALLOWED[mod]:
                    print("check-layers: %s:%d includes %s: %s may not use %s"
                          % (f, n, m.group(1), mod, hmod))
                    bad = 1
    if not bad:
        print("check-layers: %d modules, every include points down" % len(ALLOWED))
    return bad


if __name__ == "__main__":
    sys.exit(main())
