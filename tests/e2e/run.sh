#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh - the end-to-end test bed: Debian's Xen 4.17 and 6.1 kernel booted
# under qemu-system-x86_64 -accel tcg (no KVM), a PV dom0 from a small
# initramfs that carries this build's tapdisk and tap-ctl, and the cases of
# dom0-cases.sh run inside that dom0.  Results come back over the serial
# console.
#
#   tests/e2e/run.sh [--keep] [--verbose] [CASE...]
#
#   --keep      keep the work directory (initramfs, serial log) and say where
#   --verbose   print the serial console as it arrives
#   CASE...     run only these cases (names as printed); default: all
#
# Environment:
#   BUILDDIR               the build tree holding bin/tapdisk and
#                          bin/tap-ctl (default: $abs_top_builddir, else
#                          ../../build from this script)
#   TAPSTRIPE_E2E_CACHE    where the Debian packages and their extracted
#                          files are kept between runs
#                          (default /var/cache/tapstripe-e2e)
#   TAPSTRIPE_E2E_TIMEOUT  seconds before the boot is given up (default 1500)
#   TAPSTRIPE_E2E_THESIS_SEGS  blkfront segment limits of the thesis table
#                          (default "32"; e.g. "11 32 256", a minute each)
#   TAPSTRIPE_E2E_KERNEL   the linux-image package to boot (default: what
#                          linux-image-amd64 depends on)
#   TAPSTRIPE_E2E_MQ_ORDER the ring order (max_ring_page_order) of the
#                          blkfront of tapdisk-xen-multiqueue's guest
#                          (default: blkfront's, 0)
#
# Prints one line per case and "N passed, N failed[, N skipped]".  Exit
# status: 0 when every case passed (or was skipped), 1 when one failed or
# the boot did not finish, 77 when qemu-system-x86 cannot be installed,
# 2 for a bad command line.  Needs root (apt-get) on Debian 12.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# losetup and depmod live in sbin, which a CI shell may leave out.
export PATH="$PATH:/usr/sbin:/sbin"
# shellcheck source=tests/e2e/lib.sh
. "$here/lib.sh"

keep=
verbose=
only=()
while [ $# -gt 0 ]; do
	case $1 in
	--keep) keep=1 ;;
	--verbose) verbose=1 ;;
	-h | --help)
		sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "run.sh: unknown option '$1' (--keep, --verbose, --help)" >&2
		exit 2
		;;
	*) only+=("$1") ;;
	esac
	shift
done

BUILDDIR=${BUILDDIR:-${abs_top_builddir:-$here/../../build}}
E2E_CACHE=${TAPSTRIPE_E2E_CACHE:-/var/cache/tapstripe-e2e}
E2E_TIMEOUT=${TAPSTRIPE_E2E_TIMEOUT:-1500}
export BUILDDIR E2E_CACHE E2E_TIMEOUT

for prog in bin/tapdisk bin/tap-ctl; do
	if [ ! -x "$BUILDDIR/$prog" ]; then
		echo "run.sh: $BUILDDIR/$prog not found: build first, or set" \
			"BUILDDIR to the build tree" >&2
		exit 1
	fi
done

E2E_WORK=$(mktemp -d "${TMPDIR:-/tmp}/tapstripe-e2e.XXXXXX")
export E2E_WORK
qemu_pid=
cleanup() {
	if [ -n "$qemu_pid" ]; then
		kill "$qemu_pid" 2>/dev/null || true
		wait "$qemu_pid" 2>/dev/null || true
	fi
	if [ -n "$keep" ]; then
		echo "work directory kept: $E2E_WORK (serial log: $E2E_WORK/serial.log)"
	else
		rm -rf "$E2E_WORK"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

e2e_host_tools || exit 77
e2e_fetch_debs
e2e_extract
e2e_patched_modules "${only[*]:-}"
e2e_build_initrd "${only[*]:-}"
e2e_boot
e2e_report
