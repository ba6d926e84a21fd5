#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""fio-summary.py FIO.json TARGET JOB REP CPU_TICKS

Prints one line: TARGET JOB REP IOPS MiB/s IOS CPU_TICKS, read + write
summed, from fio's JSON output.  Used by the benchmark scripts in bench/.
"""
import json
import sys

path, target, job, rep, ticks = sys.argv[1:6]
j = json.load(open(path))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
iops = j["read"]["iops"] + j["write"]["iops"]
mib_s = (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1048576
print(target, job, rep, iops, mib_s, ios, ticks)
