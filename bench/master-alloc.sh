#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# master-alloc.sh - durable allocations per second of stripe-master, and
# their latency, from concurrent clients (issue #5).
#
#   bench/master-alloc.sh [BUILDDIR]
#
# Starts stripe-master on 127.0.0.1 (a free port) with a fresh database in
# $BENCH_DIR (default /var/tmp: it must be a real disk, the point is the
# fsync), registers 4 servers of 256 GiB cut into 1 MiB extents, warms up,
# then runs bench/master-alloc: CLIENTS clients (default 4) each allocate
# COUNT disks (default 5000) of 2 columns x 1 extent x 2 replicas, ROUNDS
# times (default 3), and once with a single client for reference.  Every
# answer arrives only after the master committed (WAL, synchronous=FULL).
# Target on the development machines: >= 3000 allocations/s, p99 < 2 ms.
#
# ETCD_MEMBERS=N (issue #23): the master keeps its state in an N-member
# etcd cluster started on loopback (tests/lab/etcd-lib.sh, data in the
# work directory: etcd fsyncs too), `stripe-master --store`: an answer
# arrives after etcd's quorum commit, the file being a cache of etcd's log
# (synchronous=NORMAL).  Target with 3 members: >= 1000 allocations/s,
# p99 < 20 ms.  Figures: bench/README.md.
set -eu

BUILDDIR=${1:-${BUILDDIR:-$(pwd)}}
MASTER=$BUILDDIR/bin/stripe-master
CTL=$BUILDDIR/bin/stripe-ctl
ALLOC=$BUILDDIR/bench/master-alloc
CLIENTS=${CLIENTS:-4}
COUNT=${COUNT:-5000}
ROUNDS=${ROUNDS:-3}
SHAPE=${SHAPE:-2,1,2}

for bin in "$MASTER" "$CTL" "$ALLOC"; do
	[ -x "$bin" ] || { echo "$bin not built: run make in $BUILDDIR" >&2; exit 1; }
done
WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/master-bench.XXXXXX")
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ADDR=127.0.0.1:$PORT
PID=
STORE=()

cleanup() {
	set +e # the exit statuses of what is killed here end nothing
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ ${#STORE[@]} = 0 ] || etcd_cluster_stop
	rm -rf "$WORK"
}
trap cleanup EXIT

if [ -n "${ETCD_MEMBERS:-}" ]; then
	# shellcheck source=tests/lab/etcd-lib.sh
	. "$(cd "$(dirname "$0")/.." && pwd)/tests/lab/etcd-lib.sh"
	ETCD_LIB_DATA_ROOT=$WORK etcd_cluster_start "$WORK" "$ETCD_MEMBERS"
	STORE=(--store "etcd://${ETCD_ENDPOINTS//http:\/\//}/bench")
	echo "store: ${STORE[1]}"
fi

"$MASTER" -f --db "$WORK/master.db" --listen "$ADDR" --extent-size 1M \
	--log-file "$WORK/master.log" "${STORE[@]}" &
PID=$!
for _ in $(seq 50); do "$CTL" --master "$ADDR" info >/dev/null 2>&1 && break; sleep 0.1; done
for i in 1 2 3 4; do
	"$CTL" --master "$ADDR" server add --portal 10.77.$i.2 \
		--target iqn.2024-01.org.tapstripe:bench$i --lun 1 --size 256G >/dev/null
done

echo "stripe-master on $ADDR, database in $WORK ($(df -T "$WORK" | awk 'NR == 2 { print $2 }')), $(nproc) CPUs"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$ALLOC" --master "$ADDR" --clients "$CLIENTS" --count 500 --shape "$SHAPE" \
	--prefix warm >/dev/null
echo "1 client:   $("$ALLOC" --master "$ADDR" --clients 1 --count "$COUNT" --shape "$SHAPE" --prefix one)"
for r in $(seq "$ROUNDS"); do
	echo "$CLIENTS clients: $("$ALLOC" --master "$ADDR" --clients "$CLIENTS" --count "$COUNT" \
		--shape "$SHAPE" --prefix "r$r")"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
kill "$PID" && wait "$PID"
PID=
tail -n 1 "$WORK/master.log" | sed 's/^.*stopping: /master: /'
"$MASTER" --check --db "$WORK/master.db" "${STORE[@]}"
