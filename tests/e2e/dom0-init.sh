#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dom0-init.sh - /init of the test dom0: mount, load the Xen modules, start
# xenstored and xenconsoled as xencommons would, run the cases of
# /e2e/cases.sh, power off.  Every line meant for run.sh starts with
# "E2E-": E2E-LOG (progress), E2E-RESULT (one per case), E2E-DONE.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
# devtmpfs lacks these; the hotplug scripts' locking.sh stats /dev/stdin.
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p /run/xen /run/xenstored /run/tapstripe /var/lib/xen /var/log/xen/console
# Keep the kernel's messages off the console the results travel on.
echo 1 >/proc/sys/kernel/printk

e2e_log() { echo "E2E-LOG [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
e2e_log "dom0 init running: kernel $(uname -r)"

depmod -a 2>/dev/null
for m in xenfs xen-privcmd xen-evtchn xen-gntdev xen-gntalloc xen-blkback \
	xen-blkfront; do
	modprobe "$m" || e2e_log "modprobe $m failed"
done
# Every case takes a loop device or more; 8 (the default) ran out by the
# last case.
modprobe loop max_loop=64 || e2e_log "modprobe loop failed"
mount -t xenfs xenfs /proc/xen || e2e_log "mount xenfs failed"

xenstored --pid-file /run/xen/xenstored.pid
for i in $(seq 1 30); do
	[ -f /run/xen/xenstored.pid ] && break
	sleep 1
done
xen-init-dom0 >/tmp/xen-init-dom0.log 2>&1 || e2e_log "xen-init-dom0 failed"
xenconsoled --pid-file=/run/xen/xenconsoled.pid --log=guest \
	--log-dir=/var/log/xen/console &
e2e_log "xenstored up"

/bin/bash /e2e/cases.sh
e2e_log "dom0 free MiB: $(free -m | awk '/Mem:/ {print $2 " total, " $3 " used"}')"
# The console shows no kernel warnings (printk 1): say when the OOM
# killer ran, which ends a case (or the runner) without a word.
dmesg | grep -i -E 'out of memory|oom-kill|killed process' | tail -5 |
	sed 's/^/E2E-LOG dom0 kernel: /'
# A runner that died leaves cases without a result: fail the run.
[ -f /tmp/e2e-runner-done ] ||
	echo "E2E-RESULT FAIL case-runner cases.sh died before its last case (killed? see the log above)"
echo "E2E-DONE"
sync
echo "E2E-POWEROFF"
poweroff -f
