#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# e2e-modules.sh - everything the end-to-end test bed (tests/e2e) needs to
# load the patched Xen block drivers in its dom0 and guest and compare them
# with Debian's, in one directory:
#
#   patches/e2e-modules.sh DIR
#
#   DIR/xen-blkfront.ko, DIR/xen-blkback.ko   the series of linux-6.1/
#                        applied and built (by ./verify) for the kernel the
#                        test bed boots, the one in $TAPSTRIPE_E2E_CACHE/root
#   DIR/case.sh          patches/e2e/dom0-patched.sh, to run in dom0
#   DIR/vmlinuz, DIR/domU.cpio.gz   a PV guest: busybox, /init =
#                        patches/e2e/domu-init.sh, Debian's and the patched
#                        xen-blkfront.ko (chosen by blkfront= on its
#                        command line)
#   DIR/verify.log       what ./verify said
#   DIR/mode             $TAPSTRIPE_E2E_PATCHED: full (default) or quick,
#                        how much case.sh measures (see its header)
#
# Run it after tests/e2e/run.sh's extract step (it reads the kernel version,
# busybox and the kernel from $TAPSTRIPE_E2E_CACHE/root, default
# /var/cache/tapstripe-e2e/root).  Exit status 0 when DIR is complete, 1
# otherwise.  See patches/README.md, "In the end-to-end test".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: e2e-modules.sh DIR}
root=${TAPSTRIPE_E2E_CACHE:-/var/cache/tapstripe-e2e}/root

kver=$(ls "$root/lib/modules" 2>/dev/null | head -1)
if [ -z "$kver" ] || [ ! -f "$root/boot/vmlinuz-$kver" ]; then
	echo "e2e-modules.sh: no kernel in $root: run tests/e2e/run.sh (its extract step) first" >&2
	exit 1
fi
mkdir -p "$dir"
if ! "$here/verify" --kernel "$kver" --out "$dir" >"$dir/verify.log" 2>&1; then
	echo "e2e-modules.sh: patches/verify failed for $kver:" >&2
	grep -E '^FAIL|passed,' "$dir/verify.log" >&2
	exit 1
fi
# Debug information is of no use in the test bed's initramfs.
strip --strip-debug "$dir/xen-blkfront.ko" "$dir/xen-blkback.ko"
cp "$here/e2e/dom0-patched.sh" "$dir/case.sh"
chmod +x "$dir/case.sh"
cp "$root/boot/vmlinuz-$kver" "$dir/vmlinuz"
echo "${TAPSTRIPE_E2E_PATCHED:-full}" >"$dir/mode"

g=$(mktemp -d "${TMPDIR:-/tmp}/tapstripe-domu.XXXXXX")
trap 'rm -rf "$g"' EXIT
mkdir -p "$g"/{bin,dev,proc,sys}
cp "$root/bin/busybox" "$g/bin/"
for a in sh mount cat cut ls sleep dd md5sum insmod echo sync poweroff uname; do
	ln -s busybox "$g/bin/$a"
done
cp "$root/lib/modules/$kver/kernel/drivers/block/xen-blkfront.ko" "$g/xen-blkfront-stock.ko"
cp "$dir/xen-blkfront.ko" "$g/xen-blkfront-patched.ko"
cp "$here/e2e/domu-init.sh" "$g/init"
chmod +x "$g/init"
(cd "$g" && find . | cpio -H newc -o --quiet | gzip -1) >"$dir/domU.cpio.gz"
echo "e2e-modules.sh: $dir ready for $kver ($(grep 'passed,' "$dir/verify.log"))"
