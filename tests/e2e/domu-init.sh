#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# domu-init.sh - /init of the test's PV guest: load blkfront, write 4 MiB
# of random data to xvda with O_DIRECT, read it back, print the checksums
# on the console ("DOMU ..." lines, in dom0's console log: dom0 checks
# the backing file against them), power off.
#
# With e2e_reboot on the kernel command line (tapdisk-xen-driver-domain),
# the guest reboots instead, and its next boot checks the disk: the first
# boot writes the pattern and then, in the 4 KiB block at 4 MiB, a mark
# holding the pattern's md5, and reboots (xl restarts the domain: a new
# domid, new backend nodes); a boot that finds the mark reads the 4 MiB
# back, prints "after reboot: md5 expected=X readback=Y", writes a second
# pattern at 8 MiB in eight 512 KiB O_DIRECT writes a second apart (dom0
# restarts the driver domain's tapdisk meanwhile), reads it back, prints
# "second pattern: md5 pattern=X readback=Y" and waits for dom0 to
# destroy it.
#
# With e2e_rootdisk (tapstripe-xenwatch-dom0) it mounts xvda and
# switch_roots into the /init found there.
#
# With e2e_mq (tapdisk-xen-multiqueue, a guest of 2 vCPUs) it writes and
# reads back 8 MiB from both vCPUs at once (mq_test below).
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 >/proc/sys/kernel/printk
say() { echo "DOMU [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
say "running: $(uname -r)"
# e2e_ring_order=N (tapdisk-xen-multiqueue, TAPSTRIPE_E2E_MQ_ORDER):
# rings of 2^N pages.
order=$(grep -o 'e2e_ring_order=[0-9]*' /proc/cmdline | cut -d= -f2)
insmod /xen-blkfront.ko ${order:+max_ring_page_order=$order}
i=0
while [ ! -b /dev/xvda ] && [ $i -lt 60 ]; do
	sleep 0.5
	i=$((i + 1))
done
reboot_test=
grep -q e2e_reboot /proc/cmdline && reboot_test=1
# e2e_rootdisk (tapstripe-xenwatch-dom0): boot from the disk, as a guest
# whose root file system is its tapstripe disk: mount it, switch to it.
if grep -q e2e_rootdisk /proc/cmdline && [ -b /dev/xvda ]; then
	mkdir -p /newroot
	for m in crc32c_generic crc16 mbcache jbd2 ext4; do
		insmod /$m.ko || say "insmod $m failed"
	done
	if mount -t ext4 -o ro /dev/xvda /newroot 2>/mount.err; then
		say "xvda mounted; switch_root to its /init"
		umount /proc /sys 2>/dev/null
		exec switch_root /newroot /init
	fi
	say "cannot mount xvda: $(cat /mount.err); $(dmesg | tail -3 | tr '\n' '|')"
	sync
	poweroff -f
fi
# e2e_mq: blkfront opens one ring per vCPU (its max_queues, default 4,
# capped by the CPUs and by the backend's multi-queue-max-queues), one
# blk-mq hardware queue each, and blk-mq sends CPU n's requests to queue
# n.  One writer pinned to each vCPU writes its 4 MiB half of the
# pattern in 64 KiB O_DIRECT writes and an fsync (a flush on its own
# ring), both at once; then one reader on each reads its half back.
# Prints the hardware queues and the CPUs each serves, the interrupts
# each ring's event channel brought ("mq: ring irq N: COUNT
# interrupts": tapdisk's responses on that ring) and "md5 pattern=X
# readback=Y" of the 8 MiB; then writes on both vCPUs until dom0
# destroys it.
mq_test() {
	local q n w0 w1 r0 r1
	say "mq: $(nproc) CPUs; hardware queues of xvda: $(ls /sys/block/xvda/mq | tr '\n' ' ')"
	for q in /sys/block/xvda/mq/*; do
		say "mq: queue ${q##*/} serves CPUs $(cat "$q/cpu_list")"
	done
	dd if=/dev/urandom of=/pattern bs=64K count=128 2>/dev/null
	taskset 1 dd if=/pattern of=/dev/xvda bs=64K count=64 oflag=direct \
		conv=fsync 2>/w0.err &
	w0=$!
	taskset 2 dd if=/pattern of=/dev/xvda bs=64K skip=64 seek=64 count=64 \
		oflag=direct conv=fsync 2>/w1.err &
	w1=$!
	wait $w0 || say "write failed on CPU 0: $(tail -1 /w0.err)"
	wait $w1 || say "write failed on CPU 1: $(tail -1 /w1.err)"
	taskset 1 dd if=/dev/xvda of=/r0 bs=64K count=64 iflag=direct 2>/r0.err &
	r0=$!
	taskset 2 dd if=/dev/xvda of=/r1 bs=64K skip=64 count=64 iflag=direct 2>/r1.err &
	r1=$!
	wait $r0 || say "read failed on CPU 0: $(tail -1 /r0.err)"
	wait $r1 || say "read failed on CPU 1: $(tail -1 /r1.err)"
	cat /r0 /r1 >/readback
	grep blkif /proc/interrupts | awk '{ n = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) n += $i; else break; sub(":", "", $1); print $1, n }' >/irqs
	while read -r q n; do
		say "mq: ring irq $q: $n interrupts"
	done </irqs
	say "md5 pattern=$(md5sum </pattern | cut -c1-32) readback=$(md5sum </readback | cut -c1-32)"
	# Then I/O on both rings, beyond the pattern (8-12 and 12-16 MiB),
	# until dom0 destroys the guest.
	mq_writer 1 128 &
	mq_writer 2 192 &
	say "mq: writing on both rings until destroyed"
	while :; do
		sleep 3600
	done
}

# mq_writer MASK SEEK: 4 MiB at 64 KiB block SEEK, over and over, on the
# CPUs of MASK.
mq_writer() {
	while :; do
		taskset "$1" dd if=/pattern of=/dev/xvda bs=64K count=64 seek="$2" \
			oflag=direct 2>/dev/null
	done
}

MARK_BLOCK=1024 # 4 KiB blocks: the mark lives at 4 MiB
if [ ! -b /dev/xvda ]; then
	say "no /dev/xvda"
elif grep -q e2e_mq /proc/cmdline; then
	mq_test
elif [ -n "$reboot_test" ] &&
	dd if=/dev/xvda of=/mark bs=4096 skip=$MARK_BLOCK count=1 iflag=direct 2>/dev/null &&
	expect=$(head -c 64 /mark | grep -o '^E2E-REBOOT-MARK [0-9a-f]*' | cut -d' ' -f2) &&
	[ -n "$expect" ]; then
	say "xvda: $(cat /sys/block/xvda/size) sectors; the mark of the boot before is there"
	dd if=/dev/xvda of=/readback bs=1M count=4 iflag=direct 2>/dev/null || say "read failed"
	say "after reboot: md5 expected=$expect readback=$(md5sum </readback | cut -c1-32)"
	# Meanwhile dom0 has the driver domain restart its tapdisk: a
	# second pattern goes to 8 MiB in 512 KiB O_DIRECT writes a second
	# apart, and the write issued while no tapdisk runs waits.
	dd if=/dev/urandom of=/pattern2 bs=512K count=8 2>/dev/null
	n=0
	while [ $n -lt 8 ]; do
		t0=$(cut -d' ' -f1 /proc/uptime)
		dd if=/pattern2 of=/dev/xvda bs=512K skip=$n seek=$((16 + n)) count=1 \
			oflag=direct 2>/dev/null || say "write of chunk $n failed"
		say "chunk $n written, started $t0"
		n=$((n + 1))
		sleep 1
	done
	dd if=/dev/xvda of=/readback2 bs=512K skip=16 count=8 iflag=direct 2>/dev/null ||
		say "read of the second pattern failed"
	say "second pattern: md5 pattern=$(md5sum </pattern2 | cut -c1-32) readback=$(md5sum </readback2 | cut -c1-32)"
	say "waiting to be destroyed"
	while :; do
		sleep 3600
	done
else
	say "xvda: $(cat /sys/block/xvda/size) sectors"
	dd if=/dev/urandom of=/pattern bs=1M count=4 2>/dev/null
	dd if=/pattern of=/dev/xvda bs=1M oflag=direct 2>/dev/null || say "write failed"
	dd if=/dev/xvda of=/readback bs=1M count=4 iflag=direct 2>/dev/null || say "read failed"
	p=$(md5sum </pattern | cut -c1-32)
	say "md5 pattern=$p readback=$(md5sum </readback | cut -c1-32)"
	if [ -n "$reboot_test" ]; then
		{
			echo "E2E-REBOOT-MARK $p"
			dd if=/dev/zero bs=4096 count=1 2>/dev/null
		} | head -c 4096 >/mark
		dd if=/mark of=/dev/xvda bs=4096 seek=$MARK_BLOCK count=1 oflag=direct \
			2>/dev/null || say "writing the mark failed"
		say "rebooting"
		sync
		reboot -f
	fi
fi
say "done"
sync
poweroff -f
