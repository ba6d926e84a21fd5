#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dd-init.sh - /init of the storage driver domain that the case
# tapdisk-xen-driver-domain starts: a PV guest (not dom0) with
# driver_domain=1 whose own disk, xvda, dom0 gives it.  It loads the
# modules a backend needs (evtchn, gntdev; blkfront for its own disk)
# and starts tapstripe-xenwatch, which starts the tapdisk of the registry's
# dd-disk (aio:/dev/xvda) for whatever disk xl makes in this domain with
#   backend=e2e-dd, backendtype=qdisk, target=tapstripe:dd-disk
# tapdisk takes those backend/qdisk nodes itself: no xl devd, no QEMU.
# Everything meant for dom0 goes to the console as "DD ..." lines
# (dom0's xenconsoled logs them), tapdisk's log included.  When dom0
# writes a guest's domid into this domain's data/e2e-restart, it
# restarts tapdisk under that guest (restart, below) and answers there.
# With e2e_watch_wait on its command line it starts the watcher only once
# dom0 writes its data/e2e-watch.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p /run/tapstripe
echo 1 >/proc/sys/kernel/printk
say() { echo "DD [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
# Each line of stdin to the console at once, after $1 (busybox sed keeps
# its output until its buffer fills).
relay() { while IFS= read -r l; do echo "$1$l"; done; }
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
# What an operator runs in a storage driver domain: the disk in the
# registry (this initramfs carries /etc/tapstripe/disks/dd-disk.conf:
# CHAIN=aio:/dev/xvda, its log in a file of its own that every tapdisk
# of the disk appends to) and tapstripe-xenwatch, which starts the
# tapdisk when xl makes a device naming tapstripe:dd-disk and stops it
# when the last one goes.  Both logs go to this console.
REG=/etc/tapstripe/disks
TD_LOG=/tmp/td-dd-disk.log
: >"$TD_LOG"
tail -f "$TD_LOG" | relay 'DD tapdisk: ' &
say "registry: $(tr '\n' ' ' <$REG/dd-disk.conf)"
me=/local/domain/$(xenstore-read domid)
# With e2e_watch_wait on the command line (the driver domain's reboot),
# the watcher starts only once dom0 writes data/e2e-watch: the guest's
# device is made before, and the watcher's first scan must find it.
if grep -q e2e_watch_wait /proc/cmdline; then
	say "waiting for $me/data/e2e-watch before starting tapstripe-xenwatch"
	until xenstore-read "$me/data/e2e-watch" >/dev/null 2>&1; do
		xenstore-watch -n 2 "$me/data/e2e-watch" >/dev/null 2>&1 || sleep 1
	done
	say "backend/qdisk before the watcher: $(xenstore-ls -f "$me/backend/qdisk" 2>/dev/null | grep -c '/params ') device(s)"
fi
# --restart-delay 3: a tapdisk restarted under a running guest leaves
# it 3 s without one (restart, below); --stop-delay 5: a guest that
# reboots may find a new tapdisk.
XW_LOG=/tmp/xenwatch.log
: >$XW_LOG
tail -f $XW_LOG | relay 'DD xenwatch: ' &
tapstripe-xenwatch --foreground --start-with spawn --disk-dir $REG \
	--restart-delay 3 --stop-delay 5 --log-file $XW_LOG 2>>$XW_LOG &
say "ready: tapstripe-xenwatch started (pid $!)"
# The tapdisk of dd-disk (the watcher's), or nothing.
td_id() { tap-ctl list | sed -n 's/^id=\([0-9]*\) name=dd-disk .*/\1/p' | head -1; }
# A tapdisk restart under a running guest, as an operator upgrading
# tapdisk does it under tapstripe-xenwatch: hand the disk over (tap-ctl
# release: the guest stays connected) and stop the old tapdisk; the
# watcher starts a new one 3 s later (the guest's I/O waits on the ring
# meanwhile) and hands the released device to it, which resumes the
# ring.  $1: the guest's domid.
restart() {
	local g=$1 old new got i
	old=$(td_id)
	[ -n "$old" ] || {
		answer "failed: no tapdisk of dd-disk runs"
		return
	}
	say "restart: tap-ctl release -i $old --domid $g --vdev xvda"
	tap-ctl release -i "$old" --domid "$g" --vdev xvda 2>/tmp/tap-ctl.log || {
		answer "failed: tap-ctl release -i $old --domid $g: $(tr "\n" " " </tmp/tap-ctl.log)"
		return
	}
	tap-ctl destroy -i "$old" >/dev/null 2>/tmp/tap-ctl.log ||
		say "tap-ctl destroy -i $old: $(tail -1 /tmp/tap-ctl.log)"
	say "restart: tapdisk $old gone; tapstripe-xenwatch starts the next"
	i=0
	new=$(td_id)
	while { [ -z "$new" ] || [ "$new" = "$old" ]; } && [ $i -lt 60 ]; do
		sleep 0.5
		i=$((i + 1))
		new=$(td_id)
	done
	[ -n "$new" ] && [ "$new" != "$old" ] || {
		answer "failed: no new tapdisk of dd-disk within 30 s"
		return
	}
	# What the log says, read here: the console can drop a line.
	got=
	grep -q ': handed over' "$TD_LOG" && got=" handed-over"
	i=0
	while ! grep -q ': resumed, ring order' "$TD_LOG" && [ $i -lt 40 ]; do
		sleep 0.5
		i=$((i + 1))
	done
	grep -q ': resumed, ring order' "$TD_LOG" && got="$got resumed"
	say "restart: tapdisk $new serves the guest's disk;$got"
	answer "done $old $new$got"
}
# dom0 writes a guest's domid into data/e2e-restart; the answer goes there.
answer() { xenstore-write "$me/data/e2e-restart" "$*"; }
answer idle
# dom0 destroys this domain when its case ends.
while :; do
	xenstore-watch -n 2 "$me/data/e2e-restart" >/dev/null 2>&1 || sleep 1
	g=$(xenstore-read "$me/data/e2e-restart" 2>/dev/null)
	say "data/e2e-restart is '$g' (tapdisk $(td_id))"
	case $g in
	[0-9]*) restart "$g" ;;
	esac
done
