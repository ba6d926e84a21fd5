#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# domu-init.sh - /init of the guest that patches/e2e/dom0-patched.sh starts:
# load the blkfront named on the kernel command line (blkfront=stock or
# blkfront=patched, /xen-blkfront-NAME.ko), write 16 MiB of random data to
# xvda in 1 MiB O_DIRECT writes, read it back, print the checksums and the
# queue limits on the console ("DOMU ..." lines, which dom0 reads in the
# guest's console log), power off.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 >/proc/sys/kernel/printk
say() { echo "DOMU [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
# The MD5 of file $1.  Run again when it printed nothing: now and then a
# program dies at start-up under TCG (see tests/e2e/README.md).
md5() {
	for _ in 1 2 3; do
		s=$(md5sum <"$1" | cut -c1-32)
		[ -n "$s" ] && break
	done
	echo "$s"
}
which=stock
for a in $(cat /proc/cmdline); do
	case $a in blkfront=*) which=${a#blkfront=} ;; esac
done
say "running $(uname -r), blkfront=$which"
insmod "/xen-blkfront-$which.ko" || say "insmod /xen-blkfront-$which.ko failed"
i=0
while [ ! -b /dev/xvda ] && [ $i -lt 60 ]; do
	sleep 0.5
	i=$((i + 1))
done
if [ -b /dev/xvda ]; then
	q=/sys/block/xvda/queue
	say "limits max_sectors_kb=$(cat $q/max_sectors_kb) max_hw_sectors_kb=$(cat $q/max_hw_sectors_kb) max_segments=$(cat $q/max_segments) nr_requests=$(cat $q/nr_requests)"
	dd if=/dev/urandom of=/pattern bs=1M count=16 2>/dev/null
	dd if=/pattern of=/dev/xvda bs=1M oflag=direct 2>/dev/null || say "write failed"
	dd if=/dev/xvda of=/readback bs=1M count=16 iflag=direct 2>/dev/null || say "read failed"
	say "md5 pattern=$(md5 /pattern) readback=$(md5 /readback)"
else
	say "no /dev/xvda"
fi
say "done"
sync
poweroff -f
