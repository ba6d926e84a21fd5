#!/bin/sh
# dd-init.sh - /init of the storage driver domain that the case
# tapdisk-xen-driver-domain starts: a PV guest (not dom0) with
# driver_domain=1 whose own disk, xvda, dom0 gives it.  It loads the
# modules a backend needs (evtchn, gntdev; blkfront for its own disk),
# starts a tapdisk named dd-disk over aio:/dev/xvda, and then serves
# whatever disk xl makes in this domain with
#   backend=e2e-dd, backendtype=qdisk, target=tapstripe:dd-disk
# tapdisk takes those backend/qdisk nodes itself: no xl devd, no QEMU.
# Everything meant for dom0 goes to the console as "DD ..." lines
# (dom0's xenconsoled logs them), tapdisk's log included.
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
# The command an operator runs in a storage driver domain.
if id=$(tap-ctl create -a aio:/dev/xvda --name dd-disk 2>/tmp/tap-ctl.log); then
	say "tapdisk $id: $(tap-ctl info -i "$id" | grep -E '^(frontend|size_bytes)' | tr '\n' ' ')"
	tail -f "/run/tapstripe/tapdisk-$id.log" | sed 's/^/DD tapdisk: /' &
	say "ready: tapdisk $id serves aio:/dev/xvda as tapstripe:dd-disk"
else
	say "tap-ctl create failed: $(tail -1 /tmp/tap-ctl.log)"
fi
# dom0 destroys this domain when its case ends.
while :; do
	sleep 3600
done
