#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-move-on-etcd.sh - master-move.sh, the same cases, with the master's
# state in a real etcd member started for the test (issue #23: the
# master's suite that runs on SQLite passes on etcd; MASTER_STORE=etcd,
# see master-lib.sh).  Exits as master-move.sh does; 77 (automake's skip)
# also without etcd (apt-get install etcd-server).
MASTER_STORE=etcd exec "$(dirname "$0")/master-move.sh" "$@"
