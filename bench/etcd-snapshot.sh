#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# etcd-snapshot.sh - what a snapshot of the master's state in etcd costs
# (issue #23, stripe-master --compact-every, --migrate): a SQLite store
# with DISKS disks of 2,048 extents each (4 servers, 4 MiB extents) is
# moved into a 3-member etcd cluster on this machine (--migrate to-etcd,
# the consistency check of both sides included), copied back (--migrate
# to-sqlite), then an etcd master with --compact-every 2 writes snapshots
# of it.  Prints the image's size, its chunks and the times.  Figures from
# a shared machine vary: compare runs made in the same conditions.  The
# members' data live on /dev/shm unless ETCD_LIB_DATA_ROOT says otherwise.
#
# Usage: BUILDDIR=build bench/etcd-snapshot.sh [DISKS] (default 5: 10,240
# extents; at most 32)
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
BIN=$BUILDDIR/bin
DISKS=${1:-5}
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/lab/etcd-lib.sh
. "$top/tests/lab/etcd-lib.sh"

if ! etcd_lib_have; then
	echo "etcd-snapshot: etcd or python3 not found (apt-get install etcd-server python3)" >&2
	exit 77
fi
if [ ! -x "$BIN/stripe-master" ] || [ ! -x "$BIN/stripe-ctl" ]; then
	echo "etcd-snapshot: build stripe-master and stripe-ctl first (make)" >&2
	exit 1
fi
WORK=$(mktemp -d /tmp/etcd-snapshot.XXXXXX)
MP=
cleanup() {
	if [ -n "$MP" ]; then
		kill -KILL "$MP" 2>/dev/null
		wait "$MP" 2>/dev/null
	fi
	etcd_cluster_stop
	rm -rf "$WORK"
}
trap cleanup EXIT

ms() { python3 -c 'import time; print(int(time.monotonic() * 1000))'; }

etcd_cluster_start "$WORK" 3 || exit 1
URL=etcd://${ETCD_ENDPOINTS//http:\/\//}/bench
PORT=$(etcd_lib_free_ports 1)
CTL="$BIN/stripe-ctl --master 127.0.0.1:$PORT"
master() { # DB [OPTIONS]
	local db=$1
	shift
	"$BIN/stripe-master" -f --db "$WORK/$db" --listen "127.0.0.1:$PORT" \
		--extent-size 4M --log-file "$WORK/$db.log" "$@" &
	MP=$!
	for _ in $(seq 100); do
		$CTL info >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "etcd-snapshot: the master did not start: $(tail -2 "$WORK/$db.log")" >&2
	exit 1
}
stop() {
	kill -TERM "$MP" && wait "$MP"
	MP=
}

master src.db
for i in 1 2 3 4; do
	$CTL server add --portal 10.9.$i.2 --target iqn.2024-01.org.tapstripe:b$i \
		--lun 1 --size 256G --host h$i >/dev/null || exit 1
done
for d in $(seq "$DISKS"); do
	$CTL vdisk create d$d --size 8G --stripes 4 --replicas 1 -o "$WORK/d$d.map" >/dev/null || exit 1
done
EXTENTS=$($CTL --json info | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["extents"] - j["free_extents"])')
stop

t0=$(ms)
"$BIN/stripe-master" --migrate to-etcd --db "$WORK/src.db" --store "$URL" >/dev/null || exit 1
t1=$(ms)
"$BIN/stripe-master" --migrate to-sqlite --store "$URL" --db "$WORK/back.db" >/dev/null || exit 1
t2=$(ms)
master e.db --store "$URL" --compact-every 2
for d in 1 2 3 4; do
	$CTL vdisk create s$d --size 16M --stripes 2 -o "$WORK/s$d.map" >/dev/null || exit 1
done
stop
snap=$(grep -h "snapshot .* written" "$WORK/e.db.log" | tail -1 |
	sed 's/.*written (\([0-9]*\) bytes in \([0-9]*\) chunks, \([0-9]*\) ms).*/\1 \2 \3/')
read -r bytes chunks snap_ms <<<"$snap"
echo "extents allocated: $EXTENTS"
echo "snapshot: $bytes bytes in $chunks chunks, written in $snap_ms ms"
echo "migrate to-etcd: $((t1 - t0)) ms, to-sqlite: $((t2 - t1)) ms (checks of both sides included)"
printf '{"extents": %s, "snapshot_bytes": %s, "chunks": %s, "snapshot_ms": %s, "to_etcd_ms": %s, "to_sqlite_ms": %s}\n' \
	"$EXTENTS" "$bytes" "$chunks" "$snap_ms" "$((t1 - t0))" "$((t2 - t1))"
