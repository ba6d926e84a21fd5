#!/bin/sh
# domu-init.sh - /init of the test's PV guest: load blkfront, write 4 MiB
# of random data to xvda with O_DIRECT, read it back, print the checksums
# on the console ("DOMU ..." lines, in dom0's console log: dom0 checks
# the backing file against them), power off.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 >/proc/sys/kernel/printk
say() { echo "DOMU [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
say "running: $(uname -r)"
insmod /xen-blkfront.ko
i=0
while [ ! -b /dev/xvda ] && [ $i -lt 60 ]; do
	sleep 0.5
	i=$((i + 1))
done
if [ -b /dev/xvda ]; then
	say "xvda: $(cat /sys/block/xvda/size) sectors"
	dd if=/dev/urandom of=/pattern bs=1M count=4 2>/dev/null
	dd if=/pattern of=/dev/xvda bs=1M oflag=direct 2>/dev/null || say "write failed"
	dd if=/dev/xvda of=/readback bs=1M count=4 iflag=direct 2>/dev/null || say "read failed"
	say "md5 pattern=$(md5sum </pattern | cut -c1-32) readback=$(md5sum </readback | cut -c1-32)"
else
	say "no /dev/xvda"
fi
say "done"
sync
poweroff -f
