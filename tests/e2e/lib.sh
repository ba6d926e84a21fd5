# SPDX-License-Identifier: BSD-3-Clause
# lib.sh - the steps of run.sh: host tools, Debian packages, the dom0
# initramfs, the boot under QEMU and the report.  Sourced, not run.
#
# Inputs (set by run.sh): BUILDDIR, E2E_CACHE, E2E_WORK, E2E_TIMEOUT,
# verbose; qemu_pid is set by e2e_boot so that run.sh's trap can kill it.

XEN_VERSION=4.17
E2E_T0=$EPOCHREALTIME

e2e_say() {
	local t
	t=$(echo "$EPOCHREALTIME - $E2E_T0" | bc)
	printf '[e2e %6.1fs] %s\n' "$t" "$*"
}

# qemu and the tools the initramfs is made with.  Returns 1 when qemu
# cannot be installed (run.sh turns that into exit 77, "skipped").
e2e_host_tools() {
	local need=() cmd pkg
	# dom0 gets the host's bash, dd, stat, flock and losetup.
	for cmd in qemu-system-x86_64:qemu-system-x86 cpio:cpio bc:bc \
		gzip:gzip losetup:mount flock:util-linux stat:coreutils; do
		command -v "${cmd%%:*}" >/dev/null || need+=("${cmd#*:}")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	e2e_say "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -qq &&
		apt-get install -y -qq --no-install-recommends "${need[@]}"; } \
		>"$E2E_WORK/apt-install.log" 2>&1; then
		tail -5 "$E2E_WORK/apt-install.log" >&2
		echo "run.sh: cannot install ${need[*]}: skipping" >&2
		return 1
	fi
	for pkg in qemu-system-x86_64 cpio bc losetup flock; do
		command -v "$pkg" >/dev/null || return 1
	done
}

# The kernel package: linux-image-amd64's dependency, e.g.
# linux-image-6.1.0-37-amd64.
e2e_kernel_pkg() {
	local k
	[ -n "${TAPSTRIPE_E2E_KERNEL:-}" ] && {
		echo "$TAPSTRIPE_E2E_KERNEL"
		return
	}
	k=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	if [ -z "$k" ]; then
		apt-get update -qq >/dev/null 2>&1 || true
		k=$(apt-cache depends linux-image-amd64 2>/dev/null |
			awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	fi
	[ -n "$k" ] || {
		echo "run.sh: cannot find the kernel package that" \
			"linux-image-amd64 depends on (apt-get update?)" >&2
		return 1
	}
	echo "$k"
}

# Debian's packages, downloaded once into $E2E_CACHE/debs.
e2e_fetch_debs() {
	local kpkg pkgs missing=() p
	kpkg=$(e2e_kernel_pkg)
	pkgs="$kpkg xen-hypervisor-$XEN_VERSION-amd64 xen-utils-$XEN_VERSION
	      xen-utils-common xenstore-utils busybox-static libxencall1
	      libxenevtchn1 libxenforeignmemory1 libxengnttab1
	      libxenmisc$XEN_VERSION libxenstore4 libxentoollog1
	      libxentoolcore1 libxenhypfs1 libxendevicemodel1 libyajl2"
	mkdir -p "$E2E_CACHE/debs"
	for p in $pkgs; do
		ls "$E2E_CACHE/debs/${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		e2e_say "downloading ${#missing[@]} Debian packages into $E2E_CACHE/debs"
		(cd "$E2E_CACHE/debs" && apt-get download -q "${missing[@]}" \
			>"$E2E_WORK/apt-download.log" 2>&1) || {
			apt-get update -qq >/dev/null 2>&1 || true
			(cd "$E2E_CACHE/debs" && apt-get download -q "${missing[@]}" \
				>"$E2E_WORK/apt-download.log" 2>&1)
		} || {
			tail -5 "$E2E_WORK/apt-download.log" >&2
			echo "run.sh: apt-get download failed" >&2
			return 1
		}
	fi
	E2E_KERNEL_PKG=$kpkg
	e2e_say "packages ready ($kpkg, Xen $XEN_VERSION)"
}

# dpkg-deb -x every package into $E2E_CACHE/root, once per set of debs.
e2e_extract() {
	local x=$E2E_CACHE/root stamp d want
	want=$(cd "$E2E_CACHE/debs" && ls ./*.deb | md5sum | cut -c1-32)
	stamp=$x/.tapstripe-extracted
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		E2E_ROOT=$x
		return 0
	fi
	rm -rf "$x"
	mkdir -p "$x"
	for d in "$E2E_CACHE"/debs/*.deb; do
		case $(basename "$d") in
		linux-image-*)
			# Only the kernel and the modules dom0 loads.
			dpkg-deb --fsys-tarfile "$d" | tar -x -C "$x" --wildcards \
				'./boot/vmlinuz-*' './lib/modules/*/modules.*' \
				'./lib/modules/*/kernel/drivers/xen/*' \
				'./lib/modules/*/kernel/drivers/block/xen-blk*' \
				'./lib/modules/*/kernel/drivers/block/loop.ko*'
			;;
		*) dpkg-deb -x "$d" "$x" ;;
		esac
	done
	# QEMU's -kernel wants the multiboot ELF uncompressed.
	zcat "$x/boot/xen-$XEN_VERSION-amd64.gz" >"$x/boot/xen.elf"
	echo "$want" >"$stamp"
	E2E_ROOT=$x
	e2e_say "packages extracted into $x"
}

# Copy binary $1 to $2 in the rootfs $R, with the libraries ldd names.
e2e_install_bin() {
	local src=$1 dst=$2 lib
	mkdir -p "$R/$(dirname "$dst")"
	cp -L "$src" "$R/$dst"
	LD_LIBRARY_PATH=$E2E_ROOT/usr/lib/x86_64-linux-gnu ldd "$src" |
		awk '/=>/ {print $3} /ld-linux/ {print $1}' |
		while read -r lib; do
			[ -f "$lib" ] || continue
			[ -f "$R/lib/x86_64-linux-gnu/$(basename "$lib")" ] && continue
			cp -L "$lib" "$R/lib/x86_64-linux-gnu/"
		done
}

e2e_rootfs_base() {
	local a
	rm -rf "$R"
	mkdir -p "$R"/{bin,sbin,etc,dev,proc,sys,tmp,run,mnt,root,lib64} \
		"$R"/usr/{bin,sbin} "$R"/lib/x86_64-linux-gnu \
		"$R"/var/{lib/xen,log/xen,lock} "$R/usr/lib/xen-$XEN_VERSION/bin"
	ln -sfn /run "$R/var/run"
	cp "$E2E_ROOT/bin/busybox" "$R/bin/busybox"
	for a in $("$E2E_ROOT/bin/busybox" --list); do
		[ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
	done
	cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
	# xl's pthread_cancel dlopens libgcc_s.
	cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$R/lib/x86_64-linux-gnu/"
	echo 'PATH=/usr/sbin:/usr/bin:/sbin:/bin' >"$R/etc/profile"
}

# The Xen tools from the packages, and the host programs that scripts need
# and busybox lacks: bash (hotplug scripts), coreutils dd (O_DIRECT flags),
# util-linux flock and losetup.
e2e_rootfs_xen() {
	local xb=$E2E_ROOT/usr/lib/xen-$XEN_VERSION/bin b t
	for b in xl xenstored xenconsoled xen-init-dom0; do
		e2e_install_bin "$xb/$b" "usr/lib/xen-$XEN_VERSION/bin/$b"
		ln -sf "/usr/lib/xen-$XEN_VERSION/bin/$b" "$R/usr/sbin/$b"
	done
	e2e_install_bin "$E2E_ROOT/usr/bin/xenstore" usr/bin/xenstore
	for t in read write ls list rm exists chmod watch; do
		ln -sf xenstore "$R/usr/bin/xenstore-$t"
	done
	rm -f "$R/bin/bash"
	e2e_install_bin /bin/bash bin/bash
	e2e_install_bin /bin/dd usr/bin/dd
	e2e_install_bin "$(command -v flock)" usr/bin/flock
	e2e_install_bin /usr/bin/stat usr/bin/stat
	e2e_install_bin "$(command -v losetup)" usr/sbin/losetup
	mkdir -p "$R/etc/xen"
	cp -a "$E2E_ROOT/etc/xen/scripts" "$R/etc/xen/"
	cp "$E2E_ROOT/etc/xen/xl.conf" "$R/etc/xen/"
}

e2e_rootfs_modules() {
	local kver md m
	kver=$(ls "$E2E_ROOT/lib/modules" | head -1)
	md=$E2E_ROOT/lib/modules/$kver
	for m in drivers/xen/xenfs/xenfs drivers/xen/xen-privcmd \
		drivers/xen/xen-evtchn drivers/xen/xen-gntdev \
		drivers/xen/xen-gntalloc drivers/block/xen-blkback/xen-blkback \
		drivers/block/xen-blkfront drivers/block/loop; do
		mkdir -p "$R/lib/modules/$kver/kernel/$(dirname $m)"
		cp "$md/kernel/$m".ko* "$R/lib/modules/$kver/kernel/$(dirname $m)/"
	done
	cp "$md"/modules.order "$md"/modules.builtin "$R/lib/modules/$kver/"
	# busybox's modprobe reads modules.dep; dom0-init.sh runs depmod.
}

# The hostile frontend of tapdisk-xen-bad-frontend, built against the
# host's Xen 4.17 libraries (libxen-dev, as tapdisk is).  Without a
# compiler or the headers the case skips.
e2e_badfront() {
	local cc=${CC:-cc}
	"$cc" -O2 -Wall -Wextra -Werror -I"$here/../.." \
		-o "$E2E_WORK/xen-badfront" "$here/xen-badfront.c" \
		-lxengnttab -lxenevtchn -lxenstore >"$E2E_WORK/badfront-cc.log" 2>&1 || {
		e2e_say "cannot build xen-badfront: $(tail -1 "$E2E_WORK/badfront-cc.log")"
		return 1
	}
}

# The patched xen-blkfront and xen-blkback of patches/ (issue #8), built for
# the test bed's kernel by patches/e2e-modules.sh, for the case
# patched-modules; without them that case skips (patches/verify, run by
# setup.sh test on its own, fails loudly when the series does not build).
# TAPSTRIPE_E2E_PATCHED=full|quick (default quick here: seven attaches and
# one guest instead of twelve and two).
e2e_patched_modules() {
	local p=${TAPSTRIPE_PATCHES_DIR:-$here/../../patches}
	if [ -n "${1:-}" ] && [[ " $1 " != *" patched-modules "* ]]; then
		return 0
	fi
	[ -x "$p/e2e-modules.sh" ] || return 0
	e2e_say "building the patched xen-blkfront and xen-blkback (patches/e2e-modules.sh)"
	if TAPSTRIPE_E2E_PATCHED=${TAPSTRIPE_E2E_PATCHED:-quick} \
		"$p/e2e-modules.sh" "$E2E_WORK/patched" >"$E2E_WORK/patched.log" 2>&1; then
		e2e_say "$(tail -1 "$E2E_WORK/patched.log" 2>/dev/null)"
	else
		e2e_say "patched modules not built, patched-modules will skip: $(tail -1 "$E2E_WORK/patched.log" 2>/dev/null)"
		rm -rf "$E2E_WORK/patched"
	fi
}

# This build's programs.  nbdcopy only on request
# (TAPSTRIPE_E2E_NBDCOPY=1): libnbd brings libxml2 and ICU, 25 MB more to
# unpack, and its copy takes a minute under TCG.
e2e_rootfs_project() {
	e2e_install_bin "$BUILDDIR/bin/tapdisk" usr/sbin/tapdisk
	e2e_install_bin "$BUILDDIR/bin/tap-ctl" usr/sbin/tap-ctl
	e2e_install_bin "$BUILDDIR/bin/tapstripe-xenwatch" usr/sbin/tapstripe-xenwatch
	if [ -x "$BUILDDIR/bin/td-front" ]; then
		e2e_install_bin "$BUILDDIR/bin/td-front" usr/bin/td-front
	fi
	if [ -n "${TAPSTRIPE_E2E_NBDCOPY:-}" ] && command -v nbdcopy >/dev/null; then
		e2e_install_bin "$(command -v nbdcopy)" usr/bin/nbdcopy
	fi
	e2e_badfront && e2e_install_bin "$E2E_WORK/xen-badfront" usr/bin/xen-badfront
	mkdir -p "$R/e2e"
	cp "$here/dom0-cases.sh" "$R/e2e/cases.sh"
	cp "$here/dom0-cases-xen.sh" "$R/e2e/cases-xen.sh"
	cp "$here/dom0-init.sh" "$R/init"
	chmod +x "$R/init"
	if [ -d "$E2E_WORK/patched" ]; then
		cp -r "$E2E_WORK/patched" "$R/e2e/patched"
	fi
}

# A PV guest for dom0 to start: the same kernel, a busybox initramfs with
# blkfront and domu-init.sh.
e2e_rootfs_domu() {
	local d=$E2E_WORK/domu-root a kver
	kver=$(ls "$E2E_ROOT/lib/modules" | head -1)
	rm -rf "$d"
	mkdir -p "$d"/{bin,dev,proc,sys} "$R/boot"
	cp "$E2E_ROOT/bin/busybox" "$d/bin/"
	for a in sh mount cat cut ls sleep dd md5sum insmod echo sync poweroff \
		uname head grep reboot; do
		ln -s busybox "$d/bin/$a"
	done
	cp "$E2E_ROOT/lib/modules/$kver/kernel/drivers/block/xen-blkfront.ko" "$d/"
	for a in switch_root mkdir umount dmesg tr tail; do
		ln -s busybox "$d/bin/$a"
	done
	for a in taskset nproc awk; do
		ln -s busybox "$d/bin/$a"
	done
	e2e_domu_ext4 "$d" "$kver"
	cp "$here/domu-init.sh" "$d/init"
	chmod +x "$d/init"
	(cd "$d" && find . | cpio -H newc -o --quiet | gzip -1) >"$R/boot/domU.cpio.gz"
	e2e_rootdisk
	cp "$E2E_KERNEL" "$R/boot/vmlinuz"
	printf '%s\n' 'name="e2e-domu"' 'type="pv"' 'kernel="/boot/vmlinuz"' \
		'ramdisk="/boot/domU.cpio.gz"' 'extra="console=hvc0"' \
		'memory=160' 'vcpus=1' 'on_poweroff="destroy"' \
		'on_crash="destroy"' >"$R/etc/domu.cfg"
	# tapdisk-xen-multiqueue: the same guest with 2 vCPUs, whose blkfront
	# opens 2 rings (of 2^TAPSTRIPE_E2E_MQ_ORDER pages each, when set).
	sed -e 's/^name=.*/name="e2e-mq"/' -e 's/^vcpus=.*/vcpus=2/' \
		-e "s/^extra=.*/extra=\"console=hvc0 e2e_mq${TAPSTRIPE_E2E_MQ_ORDER:+ e2e_ring_order=$TAPSTRIPE_E2E_MQ_ORDER}\"/" \
		"$R/etc/domu.cfg" >"$R/etc/domu-mq.cfg"
}

# The modules that mount an ext2 root (Debian's ext4 driver and its
# dependencies, all modules), extracted once into $E2E_CACHE/ext4, into
# the guest's initramfs root $1 (kernel $2).
E2E_EXT4_MODULES="crypto/crc32c_generic lib/crc16 fs/mbcache fs/jbd2/jbd2
	fs/ext4/ext4"
e2e_domu_ext4() {
	local d=$1 kver=$2 x=$E2E_CACHE/ext4 deb m members=()
	if [ ! -f "$x/.extracted-$kver-$(echo "$E2E_EXT4_MODULES" | md5sum | cut -c1-8)" ]; then
		deb=$(ls "$E2E_CACHE"/debs/linux-image-"$kver"_*.deb | head -1)
		for m in $E2E_EXT4_MODULES; do
			members+=("./lib/modules/$kver/kernel/$m.ko")
		done
		rm -rf "$x"
		mkdir -p "$x"
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$x" "${members[@]}" || {
			e2e_say "cannot extract the ext4 modules from $deb"
			return 0
		}
		touch "$x/.extracted-$kver-$(echo "$E2E_EXT4_MODULES" | md5sum | cut -c1-8)"
	fi
	for m in $E2E_EXT4_MODULES; do
		cp "$x/lib/modules/$kver/kernel/$m.ko" "$d/"
	done
}

# tapstripe-xenwatch-dom0's guest boots from its tapstripe disk: an ext2
# image (host's mke2fs -d) with a static busybox and an /init that prints
# a mark (kept in dom0 as /boot/xw-root.img); and the link that makes
# tapstripe-xenwatch the guest's xenpv device model.
e2e_rootdisk() {
	local d=$E2E_WORK/xw-root a
	rm -rf "$d"
	mkdir -p "$d"/{bin,proc,sys,dev}
	cp "$E2E_ROOT/bin/busybox" "$d/bin/"
	for a in sh echo cat mount sync poweroff grep cut; do
		ln -s busybox "$d/bin/$a"
	done
	printf '%s\n' '#!/bin/sh' 'mount -t proc proc /proc' \
		'echo "DOMU-ROOT running /init of xvda: $(cat /etc/mark), root $(grep " / " /proc/mounts | cut -d" " -f1-3)"' \
		'sync' 'poweroff -f' >"$d/init"
	chmod +x "$d/init"
	mkdir -p "$d/etc"
	echo "tapstripe-root-$$-$RANDOM" >"$d/etc/mark"
	cp "$d/etc/mark" "$R/boot/xw-root.mark"
	command -v mke2fs >/dev/null || {
		e2e_say "no mke2fs on this host (e2fsprogs): tapstripe-xenwatch-dom0 will skip"
		return 0
	}
	mke2fs -q -F -t ext2 -d "$d" "$R/boot/xw-root.img" 8M >/dev/null ||
		e2e_say "mke2fs failed: tapstripe-xenwatch-dom0 will skip"
	# Where make install puts the link (libexecdir/tapstripe).
	mkdir -p "$R/usr/libexec/tapstripe"
	ln -sf /usr/sbin/tapstripe-xenwatch "$R/usr/libexec/tapstripe/tapstripe-xenpv-dm"
}

# The storage driver domain of tapdisk-xen-driver-domain: the same
# kernel, a busybox initramfs with this build's tapdisk, tap-ctl and
# tapstripe-xenwatch and their libraries, the disk registry's dd-disk, the modules of a backend (evtchn, gntdev) and of its
# own disk (blkfront), and dd-init.sh.  Kept in dom0 as /boot/dd.cpio.gz.
e2e_rootfs_dd() {
	local dom0_root=$R kver md a m
	kver=$(ls "$E2E_ROOT/lib/modules" | head -1)
	md=$E2E_ROOT/lib/modules/$kver/kernel
	R=$E2E_WORK/dd-root
	rm -rf "$R"
	mkdir -p "$R"/{bin,dev,proc,sys,tmp,run,modules,lib64} \
		"$R"/usr/{bin,sbin} "$R"/lib/x86_64-linux-gnu
	cp "$E2E_ROOT/bin/busybox" "$R/bin/busybox"
	for a in $("$E2E_ROOT/bin/busybox" --list); do
		[ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
	done
	cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
	e2e_install_bin "$BUILDDIR/bin/tapdisk" usr/sbin/tapdisk
	e2e_install_bin "$BUILDDIR/bin/tap-ctl" usr/sbin/tap-ctl
	e2e_install_bin "$BUILDDIR/bin/tapstripe-xenwatch" usr/sbin/tapstripe-xenwatch
	# glibc loads it for pthread_cancel: without it a tapdisk that ends
	# aborts ("libgcc_s.so.1 must be installed").
	cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$R/lib/x86_64-linux-gnu/"
	# The disk registry: the watcher starts tapdisk --disk dd-disk.
	mkdir -p "$R/etc/tapstripe/disks"
	printf '%s\n' '# tapdisk-xen-driver-domain: e2e-dd serves its own xvda' \
		'CHAIN=aio:/dev/xvda' 'OPTIONS=--log-file /tmp/td-dd-disk.log' \
		>"$R/etc/tapstripe/disks/dd-disk.conf"
	# dom0 asks it for a tapdisk restart through xenstore.
	e2e_install_bin "$E2E_ROOT/usr/bin/xenstore" usr/bin/xenstore
	for a in read write watch ls; do
		ln -sf xenstore "$R/usr/bin/xenstore-$a"
	done
	for m in xen/xen-evtchn xen/xen-gntdev block/xen-blkfront; do
		cp "$md/drivers/$m.ko" "$R/modules/"
	done
	cp "$here/dd-init.sh" "$R/init"
	chmod +x "$R/init"
	(cd "$R" && find . | cpio -H newc -o --quiet | gzip -1) \
		>"$dom0_root/boot/dd.cpio.gz"
	R=$dom0_root
}

# --- kernel iSCSI sessions (dom0-cases-iscsi.sh, issue #6 item 4) -------------
# What case stripe-kernel-iscsi needs: Debian's iSCSI initiator and SCSI
# disk modules from the kernel package (extracted once into
# $E2E_CACHE/iscsi), the host's open-iscsi (iscsiadm, iscsid) and tgt
# (tgtd, tgtadm) with their libraries, this build's stripe-master and
# stripe-ctl.  Without open-iscsi or tgt on the host the case skips.
E2E_ISCSI_MODULES="drivers/scsi/scsi_common drivers/scsi/scsi_mod
	drivers/scsi/sd_mod drivers/scsi/scsi_transport_iscsi drivers/scsi/libiscsi
	drivers/scsi/libiscsi_tcp drivers/scsi/iscsi_tcp block/t10-pi
	lib/crc-t10dif crypto/crct10dif_common crypto/crct10dif_generic
	lib/crc64 lib/crc64-rocksoft crypto/crc64_rocksoft_generic
	crypto/crc32c_generic"
e2e_rootfs_iscsi() {
	local kver x=$E2E_CACHE/iscsi deb m b members=() stamp
	cp "$here/dom0-cases-iscsi.sh" "$R/e2e/cases-iscsi.sh"
	if [ -n "${1:-}" ] && [[ " $1 " != *" stripe-kernel-iscsi "* ]] &&
		[[ " $1 " != *" stripe-xen-grow "* ]]; then
		return 0
	fi
	kver=$(ls "$E2E_ROOT/lib/modules" | head -1)
	# Extracted again when the kernel or the list changes.
	stamp=$x/.extracted-$kver-$(echo "$E2E_ISCSI_MODULES" | md5sum | cut -c1-8)
	if [ ! -f "$stamp" ]; then
		deb=$(ls "$E2E_CACHE"/debs/linux-image-"$kver"_*.deb | head -1)
		for m in $E2E_ISCSI_MODULES; do
			members+=("./lib/modules/$kver/kernel/$m.ko")
		done
		rm -rf "$x"
		mkdir -p "$x"
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$x" "${members[@]}" || {
			e2e_say "cannot extract the iSCSI modules from $deb"
			return 0
		}
		touch "$stamp"
	fi
	for m in $E2E_ISCSI_MODULES; do
		mkdir -p "$R/lib/modules/$kver/kernel/$(dirname "$m")"
		cp "$x/lib/modules/$kver/kernel/$m.ko" "$R/lib/modules/$kver/kernel/$m.ko"
	done
	for b in iscsiadm iscsid tgtd tgtadm; do
		command -v "$b" >/dev/null || {
			e2e_say "no $b on this host (open-iscsi, tgt): stripe-kernel-iscsi will skip"
			return 0
		}
		e2e_install_bin "$(command -v "$b")" "usr/sbin/$b"
	done
	e2e_install_bin "$BUILDDIR/bin/stripe-master" usr/sbin/stripe-master
	e2e_install_bin "$BUILDDIR/bin/stripe-ctl" usr/sbin/stripe-ctl
	e2e_install_bin "$(command -v truncate)" usr/bin/truncate
}

# $1: the cases to run (space-separated; empty for all).
e2e_build_initrd() {
	R=$E2E_WORK/rootfs
	E2E_KERNEL=$(ls "$E2E_ROOT"/boot/vmlinuz-* | head -1)
	e2e_rootfs_base
	e2e_rootfs_xen
	e2e_rootfs_modules
	e2e_rootfs_project
	e2e_rootfs_iscsi "${1:-}"
	if [ -z "${1:-}" ] || [[ " $1 " == *" tapdisk-xen-domu "* ]] ||
		[[ " $1 " == *" tapdisk-xen-driver-domain "* ]] ||
		[[ " $1 " == *" tapstripe-xenwatch-dom0 "* ]] ||
		[[ " $1 " == *" tools-stress "* ]] ||
		[[ " $1 " == *" tapdisk-xen-multiqueue "* ]]; then
		e2e_rootfs_domu
	fi
	if [ -z "${1:-}" ] || [[ " $1 " == *" tapdisk-xen-driver-domain "* ]]; then
		e2e_rootfs_dd
	fi
	echo "${1:-}" >"$R/e2e/only"
	[ -n "${TAPSTRIPE_E2E_THESIS_SEGS:-}" ] &&
		echo "$TAPSTRIPE_E2E_THESIS_SEGS" >"$R/e2e/thesis-segs"
	(cd "$R" && find . | cpio -H newc -o --quiet | gzip -1) \
		>"$E2E_WORK/dom0.cpio.gz"
	e2e_say "initramfs built: $(du -h "$E2E_WORK/dom0.cpio.gz" | cut -f1)"
}

# Boot Xen and dom0; wait for dom0 to power off (qemu -no-reboot exits) or
# for the timeout.  -cpu qemu64: with max,-smap (plain max crashes PV
# dom0 under TCG) programs in dom0 and the driver domain died of a signal
# now and then while three domains ran (a segfaulting tap-ctl or sleep,
# a shell variable gone), none in five runs with qemu64
# (TAPSTRIPE_E2E_CPU overrides it).  One vCPU is faster than two on a
# 2-core host; bootscrub=false skips scrubbing memory nobody uses.  dom0
# has 1280 MiB: patched-modules' bounce reservation takes 543 of them.
E2E_CPU=${TAPSTRIPE_E2E_CPU:-qemu64}
e2e_boot() {
	local log=$E2E_WORK/serial.log deadline tail_pid=
	: >"$log"
	qemu-system-x86_64 -machine q35 -accel tcg -cpu "$E2E_CPU" -smp 1 \
		-m 2304 -display none -monitor none -no-reboot \
		-serial "file:$log" -kernel "$E2E_ROOT/boot/xen.elf" \
		-append "console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all bootscrub=false dom0_mem=1280M,max:1280M" \
		-initrd "$E2E_KERNEL console=hvc0 earlyprintk=xen loglevel=4,$E2E_WORK/dom0.cpio.gz" \
		</dev/null >"$E2E_WORK/qemu.out" 2>&1 &
	qemu_pid=$!
	e2e_say "booting Xen under qemu (pid $qemu_pid, timeout ${E2E_TIMEOUT}s)"
	[ -n "${verbose:-}" ] && {
		tail -f "$log" &
		tail_pid=$!
	}
	deadline=$((SECONDS + E2E_TIMEOUT))
	while kill -0 "$qemu_pid" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			e2e_say "timed out after ${E2E_TIMEOUT}s: stopping qemu"
			kill "$qemu_pid" 2>/dev/null || true
			break
		fi
		# dom0 says E2E-DONE just before it powers off.
		grep -q 'E2E-POWEROFF' "$log" && sleep 5 && break
		sleep 1
	done
	kill "$qemu_pid" 2>/dev/null || true
	wait "$qemu_pid" 2>/dev/null || true
	qemu_pid=
	[ -n "$tail_pid" ] && kill "$tail_pid" 2>/dev/null
	e2e_say "qemu finished"
}

# The results dom0 printed: "E2E-RESULT PASS|FAIL|SKIP NAME DETAIL".
e2e_report() {
	local log=$E2E_WORK/serial.log res pass=0 fail=0 skip=0 st name detail
	res=$(tr -d '\r' <"$log" | grep -a '^E2E-RESULT ' || true)
	while read -r _ st name detail; do
		[ -n "$st" ] || continue
		printf '%-4s %-28s %s\n' "$st" "$name" "$detail"
		case $st in
		PASS) pass=$((pass + 1)) ;;
		SKIP) skip=$((skip + 1)) ;;
		*) fail=$((fail + 1)) ;;
		esac
	done <<<"$res"
	if ! grep -aq 'E2E-DONE' "$log"; then
		printf '%-4s %-28s %s\n' FAIL boot-finished \
			"dom0 did not finish its cases; see the serial log (--keep)"
		fail=$((fail + 1))
		tr -d '\r' <"$log" | grep -av '^E2E-RESULT' | tail -25 | sed 's/^/  | /'
	fi
	# The thesis's request counts (tapdisk-xen-thesis), as dom0 printed them.
	if tr -d '\r' <"$log" | grep -aq '^E2E-TABLE '; then
		echo
		echo "4096 buffered 4 KiB writes + sync through blkfront, as tapdisk counted them:"
		tr -d '\r' <"$log" | grep -a '^E2E-TABLE ' | sed 's/^E2E-TABLE //'
		echo
	fi
	# Debian's and the patched blkfront/blkback side by side (patched-modules).
	if tr -d '\r' <"$log" | grep -aq '^E2E-PATCHES '; then
		echo
		echo "Debian's and the patched xen-blkfront/xen-blkback (patches/), as the backends counted:"
		tr -d '\r' <"$log" | grep -a '^E2E-PATCHES ' | sed 's/^E2E-PATCHES //'
		echo
	fi
	# Every run of a tool again after it died of a signal (xtool), so
	# that no retry goes unseen.
	if tr -d '\r' <"$log" | grep -aq 'died with status'; then
		echo "tools run again after dying of a signal at start-up (TCG flake, see README):"
		tr -d '\r' <"$log" | grep -a 'died with status' | sed 's/^/  | /'
	fi
	if [ $fail -gt 0 ] && [ -z "${keep:-}" ]; then
		echo "serial log tail (run with --keep to keep it all):"
		tr -d '\r' <"$log" | grep -a -E '^E2E-(LOG|RESULT)' | tail -40 | sed 's/^/  | /'
	fi
	e2e_say "done"
	if [ $skip -gt 0 ]; then
		echo "$pass passed, $fail failed, $skip skipped"
	else
		echo "$pass passed, $fail failed"
	fi
	[ $fail -eq 0 ]
}
