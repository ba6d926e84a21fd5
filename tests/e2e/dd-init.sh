#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dd-init.sh - /init of the storage driver domain that the case
# tapdisk-xen-driver-domain starts: a PV guest (not dom0) with
# driver_domain=1 whose own disk, xvda, dom0 gives it.  It loads the
# modules a backend needs (evtchn, gntdev; blkfront for its own disk),
# starts a tapdisk named dd-disk over aio:/dev/xvda, and then serves
# whatever disk xl makes in this domain with
#   backend=e2e-dd, backendtype=qdisk, target=tapstripe:dd-disk
# tapdisk takes those backend/qdisk nodes itself: no xl devd, no QEMU.
# Everything meant for dom0 goes to the console as "DD ..." lines
# (dom0's xenconsoled logs them), tapdisk's log included.  When dom0
# writes a guest's domid into this domain's data/e2e-restart, it
# restarts tapdisk under that guest (restart, below) and answers there.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p /run/tapstripe
echo 1 >/proc/sys/kernel/printk
say() { echo "DD [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
say "running: $(uname -r)"
for m in xen-evtchn xen-gntdev xen-blkfront; do
	insmod "/modules/$m.ko" || say "insmod $m failed"
done
i=0
while [ ! -b /dev/xvda ] && [ $i -lt 60 ]; do
	sleep 0.5
	i=$((i + 1))
done
for d in /dev/xvda /dev/xen/gntdev /dev/xen/evtchn /dev/xen/xenbus; do
	[ -e $d ] || say "missing $d"
done
# The command an operator runs in a storage driver domain (the log in a
# file of its own: a tapdisk that ends cleanly leaves none in /run, and
# this console shows it).
gen=0
cur_log=/tmp/td-dd-disk-$gen.log
if id=$(tap-ctl create -a aio:/dev/xvda --name dd-disk --log-file "$cur_log" 2>/tmp/tap-ctl.log); then
	say "tapdisk $id: $(tap-ctl info -i "$id" | grep -E '^(frontend|size_bytes)' | tr '\n' ' ')"
	tail -f "$cur_log" | sed 's/^/DD tapdisk: /' &
	say "ready: tapdisk $id serves aio:/dev/xvda as tapstripe:dd-disk"
else
	say "tap-ctl create failed: $(tail -1 /tmp/tap-ctl.log)"
fi
# A tapdisk restart under a running guest, as an operator upgrading
# tapdisk does it: hand the disk over (tap-ctl release: the guest stays
# connected), stop the old tapdisk, leave the guest's I/O waiting on the
# ring for 3 s, start the new one and name it in the disk (tap-ctl attach
# resumes the ring).  $1: the guest's domid.
restart() {
	local g=$1 old=$id new got i old_log=$cur_log
	say "restart: tap-ctl release -i $old --domid $g --vdev xvda"
	tap-ctl release -i "$old" --domid "$g" --vdev xvda 2>/tmp/tap-ctl.log || {
		answer "failed: tap-ctl release -i $old --domid $g: $(tr "\n" " " </tmp/tap-ctl.log)"
		return
	}
	tap-ctl destroy -i "$old" >/dev/null 2>/tmp/tap-ctl.log ||
		say "tap-ctl destroy -i $old: $(tail -1 /tmp/tap-ctl.log)"
	say "restart: tapdisk $old gone; no tapdisk for 3 s"
	sleep 3
	gen=$((gen + 1))
	cur_log=/tmp/td-dd-disk-$gen.log
	new=$(tap-ctl create -a aio:/dev/xvda --name dd-disk --log-file "$cur_log" \
		2>/tmp/tap-ctl.log) || {
		answer "failed: tap-ctl create: $(tail -1 /tmp/tap-ctl.log)"
		return
	}
	tail -f "$cur_log" | sed 's/^/DD tapdisk: /' &
	tap-ctl attach -i "$new" --domid "$g" --vdev xvda >/dev/null 2>/tmp/tap-ctl.log || {
		answer "failed: tap-ctl attach: $(tail -1 /tmp/tap-ctl.log)"
		return
	}
	id=$new
	# What the logs say, read here: the console can drop a line.
	got=
	grep -q ': handed over' "$old_log" && got=" handed-over"
	i=0
	while ! grep -q ': resumed, ring order' "$cur_log" &&
		[ $i -lt 20 ]; do
		sleep 0.5
		i=$((i + 1))
	done
	grep -q ': resumed, ring order' "$cur_log" && got="$got resumed"
	say "restart: tapdisk $new serves the guest's disk;$got"
	answer "done $old $new$got"
}
# dom0 writes a guest's domid into data/e2e-restart; the answer goes there.
me=/local/domain/$(xenstore-read domid)
answer() { xenstore-write "$me/data/e2e-restart" "$*"; }
answer idle
# dom0 destroys this domain when its case ends.
while :; do
	xenstore-watch -n 2 "$me/data/e2e-restart" >/dev/null 2>&1 || sleep 1
	g=$(xenstore-read "$me/data/e2e-restart" 2>/dev/null)
	say "data/e2e-restart is '$g' (tapdisk $id)"
	case $g in
	[0-9]*) restart "$g" ;;
	esac
done
