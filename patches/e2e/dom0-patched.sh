#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# dom0-patched.sh - runs in the end-to-end test's dom0: the request sizes
# that reach the backend with Debian's xen-blkfront and xen-blkback and with
# the patched ones of patches/linux-6.1, with default parameters, side by
# side; and the memory blkfront takes at connect with persistent grants.
#
#   dom0-patched.sh [DETAIL_FILE [full|quick]]
#
# full (the default; or what the file "mode" next to this script says) runs
# twelve attaches and two guests, about 8 to 14 minutes under TCG; quick
# runs six, all in dom0: Debian's and the patched blkfront over tapdisk,
# the patched one with 1024 segments, the patched blkback, the bounce
# reservation of both blkfronts (the guests run in full mode only).
#
# Expects next to itself what patches/e2e-modules.sh puts in its output
# directory: xen-blkfront.ko and xen-blkback.ko (patched, built for this
# kernel), vmlinuz and domU.cpio.gz (a guest whose /init is
# patches/e2e/domu-init.sh, with both blkfronts).  Debian's modules are
# loaded with modprobe.  Uses tapdisk, tap-ctl, xl, losetup and the
# xenstore tools of the dom0.
#
# Prints the table as "E2E-PATCHES |...|" lines, progress as "E2E-LOG"
# lines, and writes a one-line summary to DETAIL_FILE.  Exit status 0 when
# the patched modules loaded and brought the request sizes they promise,
# 77 when there is nothing to test (no modules, or built for another
# kernel), 1 otherwise.  Leaves Debian's modules loaded, as it found them.
# TAPSTRIPE_PATCHED_BOUNCE_STOCK=0 skips the stock blkfront's bounce
# reservation at ring order 4 (514 MiB of dom0's memory for a moment).
set -u
here=$(cd "$(dirname "$0")" && pwd)
detail_file=${1:-/dev/null}
mode=${2:-$(cat "$here/mode" 2>/dev/null)}
mode=${mode:-full}
full() { [ "$mode" = full ]; }
MiB=1048576
failed=0
summary=

log() { echo "E2E-LOG [$(cut -d' ' -f1 /proc/uptime)s] patched: $*"; }
row() { echo "E2E-PATCHES $*"; }
problem() {
	log "FAILED: $*"
	failed=1
}
finish() {
	local rc=$1
	shift
	echo "$*" >"$detail_file"
	log "$*"
	exit "$rc"
}

# Run a Xen tool again when it died of a signal (an emulation problem under
# TCG, see tests/e2e/README.md); any other status is the tool's answer.
xtool() {
	local rc
	for _ in 1 2 3; do
		"$@"
		rc=$?
		[ $rc -le 128 ] && return $rc
	done
	return $rc
}

wait_for() {
	local n=$(($1 * 2))
	shift
	while [ $n -gt 0 ]; do
		"$@" && return 0
		sleep 0.5
		n=$((n - 1))
	done
	return 1
}

# The xenstore device id of xvdX: 202 * 256 + 16 * (X - 'a').
devid() {
	local l=${1#xvd}
	echo $((202 * 256 + 16 * ($(printf '%d' "'$l") - 97)))
}

# front_load stock|patched [PARAM=VALUE...]: xen-blkfront loaded again.
front_load() {
	local which=$1
	shift
	lsmod | grep -q '^xen_blkfront ' && ! rmmod xen_blkfront && return 1
	if [ "$which" = stock ]; then
		modprobe xen-blkfront "$@"
	else
		insmod "$here/xen-blkfront.ko" "$@"
	fi
}

# back_load stock|patched [PARAM=VALUE...]: xen-blkback loaded again (it
# holds a reference for a while after its last device is gone).
back_load() {
	local which=$1
	shift
	if lsmod | grep -q '^xen_blkback '; then
		wait_for 20 rmmod xen_blkback 2>/dev/null || return 1
	fi
	if [ "$which" = stock ]; then
		modprobe xen-blkback "$@"
	else
		insmod "$here/xen-blkback.ko" "$@"
	fi
}

restore_stock() {
	front_load stock || log "cannot reload Debian's xen-blkfront"
	back_load stock || log "cannot reload Debian's xen-blkback"
}

# The segments-per-request histogram of tapdisk $1 as "LABEL:COUNT ...",
# buckets with requests only.
td_hist() {
	tap-ctl stats -i "$1" | awk '/^segments per request/ {f = 1; next}
		f && NF == 2 && $2 != 0 {printf "%s%s:%s", sep, $1, $2; sep = " "}
		f && NF != 2 {f = 0}'
}
td_writes() { tap-ctl stats -i "$1" | awk '$1 == "write" {print $2; exit}'; }
# KiB per request when $1 requests carried 16 MiB.
kib() {
	if [[ ${1:-} =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; then
		echo $((16384 / $1))
	else
		echo -
	fi
}

pattern=/tmp/patched-pattern
dd if=/dev/urandom of=$pattern bs=$MiB count=16 2>/dev/null

# td_run LABEL VDEV BS [buffered]: a tapdisk over a loop device attached to
# dom0 as VDEV; the 16 MiB pattern in O_DIRECT writes of BS, then (with
# "buffered") the same in buffered 4 KiB writes and an fsync; read back and
# checked.  Sets W (write requests, O_DIRECT), WB (write requests,
# buffered), HIST (O_DIRECT writes and the partition scan), ORDER, LIMITS.
td_run() {
	local label=$1 vdev=$2 bs=$3 buf=${4:-} img=/tmp/patched-$2.img dev id q w0
	W=- WB=- HIST=- ORDER=- LIMITS=-
	dd if=/dev/zero of="$img" bs=$MiB count=64 2>/dev/null
	dev=$(losetup -f --show "$img") || {
		problem "$label: losetup"
		return 1
	}
	id=$(tap-ctl create -a "aio:$dev" --name "patched-$vdev" 2>/tmp/patched-tapctl.log)
	if [ -z "$id" ] || ! tap-ctl attach -i "$id" --domid 0 --vdev "$vdev" >/dev/null 2>>/tmp/patched-tapctl.log ||
		! wait_for 60 test -b "/dev/$vdev"; then
		problem "$label: no /dev/$vdev: $(tail -1 /tmp/patched-tapctl.log)"
		[ -n "$id" ] && tap-ctl destroy -i "$id" >/dev/null 2>&1
		losetup -d "$dev"
		return 1
	fi
	q=/sys/block/$vdev/queue
	LIMITS="max_sectors_kb $(cat $q/max_sectors_kb), max_hw_sectors_kb $(cat $q/max_hw_sectors_kb)"
	ORDER=$(xtool xenstore-read "/local/domain/0/device/vbd/$(devid "$vdev")/ring-page-order" 2>/dev/null) ||
		ORDER=0
	dd if=$pattern of="/dev/$vdev" bs="$bs" count=$((16 * MiB / bs)) oflag=direct 2>/dev/null ||
		problem "$label: O_DIRECT write failed"
	W=$(td_writes "$id")
	HIST=$(td_hist "$id")
	if [ -n "$buf" ]; then
		w0=$W
		dd if=$pattern of="/dev/$vdev" bs=4096 conv=fsync 2>/dev/null ||
			problem "$label: buffered write failed"
		WB=$(($(td_writes "$id") - w0))
	fi
	dd if="/dev/$vdev" of=/tmp/patched-back bs="$bs" count=$((16 * MiB / bs)) iflag=direct 2>/dev/null
	cmp -s $pattern /tmp/patched-back || problem "$label: read back differs"
	head -c $((16 * MiB)) "$img" | cmp -s - $pattern || problem "$label: backing file differs"
	tap-ctl detach -i "$id" --domid 0 --vdev "$vdev" >/dev/null 2>&1 || problem "$label: tap-ctl detach"
	wait_for 30 test ! -b "/dev/$vdev" || problem "$label: /dev/$vdev still there"
	tap-ctl destroy -i "$id" >/dev/null 2>&1
	losetup -d "$dev"
	rm -f "$img" /tmp/patched-back
}

# bb_run LABEL VDEV BS: the same through blkback (xl block-attach phy), which
# counts requests and sectors in sysfs.  Sets W, KIB (KiB per request),
# ORDER, LIMITS, MEM (MiB of dom0's free memory gone between the attach and
# the disk's appearance: blkfront's reservation).
bb_run() {
	local label=$1 vdev=$2 bs=$3 img=/tmp/patched-$2.img dev st free0 sect
	W=- KIB=- ORDER=- LIMITS=- MEM=-
	dd if=/dev/zero of="$img" bs=$MiB count=64 2>/dev/null
	dev=$(losetup -f --show "$img") || {
		problem "$label: losetup"
		return 1
	}
	sync
	free0=$(awk '/^MemFree:/ {print $2}' /proc/meminfo)
	if ! xtool xl block-attach 0 "format=raw, vdev=$vdev, access=rw, target=$dev" \
		>/tmp/patched-xl.log 2>&1 || ! wait_for 60 test -b "/dev/$vdev"; then
		problem "$label: xl block-attach: $(tail -1 /tmp/patched-xl.log)"
		xtool xl block-detach 0 "$vdev" >/dev/null 2>&1
		losetup -d "$dev"
		return 1
	fi
	MEM=$(((free0 - $(awk '/^MemFree:/ {print $2}' /proc/meminfo)) / 1024))
	q=/sys/block/$vdev/queue
	LIMITS="max_sectors_kb $(cat $q/max_sectors_kb), max_hw_sectors_kb $(cat $q/max_hw_sectors_kb)"
	ORDER=$(xtool xenstore-read "/local/domain/0/device/vbd/$(devid "$vdev")/ring-page-order" 2>/dev/null) ||
		ORDER=0
	st=/sys/bus/xen-backend/devices/vbd-0-$(devid "$vdev")/statistics
	dd if=$pattern of="/dev/$vdev" bs="$bs" count=$((16 * MiB / bs)) oflag=direct 2>/dev/null ||
		problem "$label: O_DIRECT write failed"
	W=$(cat "$st/wr_req")
	sect=$(cat "$st/wr_sect")
	[ "${W:-0}" -gt 0 ] && KIB=$((sect / 2 / W))
	dd if="/dev/$vdev" of=/tmp/patched-back bs="$bs" count=$((16 * MiB / bs)) iflag=direct 2>/dev/null
	cmp -s $pattern /tmp/patched-back || problem "$label: read back differs"
	head -c $((16 * MiB)) "$img" | cmp -s - $pattern || problem "$label: backing file differs"
	xtool xl block-detach 0 "$vdev" >/dev/null 2>&1 || problem "$label: xl block-detach"
	wait_for 30 test ! -b "/dev/$vdev" || problem "$label: /dev/$vdev still there"
	losetup -d "$dev"
	rm -f "$img" /tmp/patched-back
}

domu_gone() {
	xtool xenstore-exists "/local/domain/$1" 2>/dev/null
	[ $? -eq 1 ]
}

# domu_run stock|patched: a PV guest loads that blkfront and writes 16 MiB
# in 1 MiB O_DIRECT writes to a tapdisk-served xvda.  Sets W and HIST.
domu_run() {
	local which=$1 img=/tmp/patched-domu.img dev id domid name=patched-$1 cfg p b
	local con=/var/log/xen/console/guest-patched-$1.log
	W=- HIST=-
	dd if=/dev/zero of="$img" bs=$MiB count=32 2>/dev/null
	dev=$(losetup -f --show "$img") || {
		problem "guest $which: losetup"
		return 1
	}
	cfg=/tmp/patched-$which.cfg
	printf '%s\n' "name=\"$name\"" 'type="pv"' "kernel=\"$here/vmlinuz\"" \
		"ramdisk=\"$here/domU.cpio.gz\"" "extra=\"console=hvc0 blkfront=$which\"" \
		'memory=192' 'vcpus=1' 'on_poweroff="destroy"' 'on_crash="destroy"' >"$cfg"
	id=$(tap-ctl create -a "aio:$dev" --name "$name" 2>/tmp/patched-tapctl.log)
	if [ -z "$id" ] || ! xtool xl create -p "$cfg" >/tmp/patched-xl.log 2>&1; then
		problem "guest $which: tap-ctl create or xl create: $(tail -1 /tmp/patched-xl.log)"
		[ -n "$id" ] && tap-ctl destroy -i "$id" >/dev/null 2>&1
		losetup -d "$dev"
		return 1
	fi
	domid=$(xtool xl domid "$name")
	if ! tap-ctl attach -i "$id" --domid "$domid" --vdev xvda >/dev/null 2>/tmp/patched-tapctl.log ||
		! xtool xl unpause "$name"; then
		problem "guest $which: attach or unpause: $(tail -1 /tmp/patched-tapctl.log)"
	elif ! wait_for 240 domu_gone "$domid"; then
		problem "guest $which: still running after 240 s"
		tail -5 "$con" 2>/dev/null | sed 's/^/E2E-LOG   /'
	fi
	xtool xl destroy "$name" >/dev/null 2>&1
	grep -a DOMU "$con" 2>/dev/null | sed 's/^/E2E-LOG   /'
	p=$(grep -a -o 'md5 pattern=[0-9a-f]*' "$con" 2>/dev/null | tail -1 | cut -d= -f2)
	b=$(head -c $((16 * MiB)) "$img" | md5sum | cut -c1-32)
	if [ -z "$p" ] || ! grep -aq "md5 pattern=$p readback=$p" "$con" || [ "$p" != "$b" ]; then
		problem "guest $which: data not written and read back (pattern ${p:-none}, backing file $b)"
	fi
	W=$(td_writes "$id")
	HIST=$(td_hist "$id")
	tap-ctl detach -i "$id" --domid "$domid" --vdev xvda >/dev/null 2>&1
	tap-ctl destroy -i "$id" >/dev/null 2>&1
	losetup -d "$dev"
	rm -f "$img"
}

# --- can we? ---------------------------------------------------------------------------

for f in xen-blkfront.ko xen-blkback.ko; do
	[ -f "$here/$f" ] || finish 77 "no $here/$f: run patches/e2e-modules.sh"
done
if ! modinfo "$here/xen-blkfront.ko" 2>/dev/null | grep -q "vermagic:.*$(uname -r) "; then
	finish 77 "the patched modules are not built for $(uname -r)"
fi
trap restore_stock EXIT

row "| disk | blkfront | backend | I/O, 16 MiB | write requests | KiB per request | segments per request (with reads) | ring order | queue limits |"
row "|---|---|---|---|---|---|---|---|---|"

# --- tapdisk as the backend, dom0's own blkfront ------------------------------------------

# Debian's blkfront, defaults; then the patched one, defaults.
declare -A direct buffered
for which in stock patched; do
	front_load "$which" || {
		problem "loading the $which xen-blkfront"
		continue
	}
	log "tapdisk backend, $which blkfront, defaults"
	td_run "tapdisk/$which" xvdf $MiB buffered
	direct[$which]=$W
	buffered[$which]=$WB
	row "| dom0 | $which, defaults | tapdisk | 1 MiB O_DIRECT writes | $W | $(kib "$W") | $HIST | $ORDER | $LIMITS |"
	row "| dom0 | $which, defaults | tapdisk | 4 KiB buffered writes + fsync | $WB | $(kib "$WB") | | $ORDER | |"
done

# 4 MiB O_DIRECT writes with 1024 segments (tapdisk offers 4096): the
# block layer's 1280 KiB soft limit splits them with Debian's blkfront.
for which in stock patched; do
	[ $which = stock ] && ! full && continue
	front_load "$which" max_indirect_segments=1024 || {
		problem "loading the $which xen-blkfront with 1024 segments"
		continue
	}
	log "tapdisk backend, $which blkfront, max_indirect_segments=1024, 4 MiB writes"
	td_run "tapdisk/$which/1024" xvdf $((4 * MiB))
	direct[$which-4m]=$W
	row "| dom0 | $which, max_indirect_segments=1024 | tapdisk | 4 MiB O_DIRECT writes | $W | $(kib "$W") | $HIST | $ORDER | $LIMITS |"
done

# --- blkback as the backend -------------------------------------------------------------------

for pair in stock:stock patched:stock patched:patched; do
	fw=${pair%:*} bw=${pair#*:}
	[ $pair != patched:patched ] && ! full && continue
	front_load "$fw" && back_load "$bw" || {
		problem "loading $fw blkfront and $bw blkback"
		continue
	}
	log "blkback ($bw), $fw blkfront, defaults"
	bb_run "blkback/$bw/$fw" xvdg $MiB
	direct[bb-$fw-$bw]=$W
	row "| dom0 | $fw, defaults | blkback ($bw), defaults | 1 MiB O_DIRECT writes | $W | $KIB | | $ORDER | $LIMITS |"
done
if full; then
	front_load patched max_indirect_segments=1024 && back_load patched max_indirect_segments=1024 ||
		problem "loading blkfront and blkback with 1024 segments"
	log "blkback (patched, 1024 segments), patched blkfront with 1024 segments, 4 MiB writes"
	bb_run "blkback/1024" xvdg $((4 * MiB))
	direct[bb-1024]=$W
	row "| dom0 | patched, max_indirect_segments=1024 | blkback (patched), max_indirect_segments=1024 | 4 MiB O_DIRECT writes | $W | $KIB | | $ORDER | $LIMITS |"
fi

# Memory at connect with persistent grants (blkback offers them), ring
# order 4 and 256 segments: Debian's blkfront reserves a bounce page per
# possible grant, 257 * 512 pages.
declare -A mem
back_load stock || problem "loading Debian's xen-blkback"
for which in stock patched; do
	if [ "$which" = stock ] && [ "${TAPSTRIPE_PATCHED_BOUNCE_STOCK:-1}" = 0 ]; then
		continue
	fi
	front_load "$which" max_ring_page_order=4 max_indirect_segments=256 || {
		problem "loading the $which xen-blkfront at ring order 4"
		continue
	}
	log "blkback (stock, persistent grants), $which blkfront, max_ring_page_order=4 max_indirect_segments=256"
	bb_run "bounce/$which" xvdg $MiB
	mem[$which]=$MEM
	row "| dom0 | $which, max_ring_page_order=4 max_indirect_segments=256 | blkback (stock), persistent grants | 1 MiB O_DIRECT writes; **$MEM MiB of dom0 taken at connect** (blkfront and blkback) | $W | $KIB | | $ORDER | $LIMITS |"
done

# --- a separate guest --------------------------------------------------------------------------

front_load stock || problem "reloading Debian's xen-blkfront"
if [ -f "$here/domU.cpio.gz" ] && [ -f "$here/vmlinuz" ]; then
	for which in stock patched; do
		# Full mode only: in CI's quick run a guest started after the
		# other cases' guests hung once under TCG (900 s, no output).
		! full && continue
		log "guest with the $which blkfront, tapdisk backend"
		domu_run "$which"
		direct[domu-$which]=$W
		row "| guest | $which, defaults | tapdisk | 1 MiB O_DIRECT writes | $W | $(kib "$W") | $HIST | | |"
	done
else
	log "no guest kernel or initramfs next to $0: guest runs skipped"
fi

# --- what the patches promise --------------------------------------------------------------

# expect NAME GOT WANT [full]: GOT must be WANT; rows of the full mode
# only are not expected in the quick one.
expect() {
	[ -n "${4:-}" ] && ! full && return 0
	[ "$2" = "$3" ] || problem "$1: ${2:-no} write requests, expected $3"
}
expect "patched blkfront, tapdisk, 1 MiB writes" "${direct[patched]:-}" 16
expect "patched blkfront, tapdisk, buffered writes" "${buffered[patched]:-}" 16
expect "patched blkfront, 1024 segments, tapdisk, 4 MiB writes" "${direct[patched-4m]:-}" 4
expect "patched blkfront and blkback, 1 MiB writes" "${direct[bb-patched-patched]:-}" 16
expect "patched blkfront, stock blkback, 1 MiB writes" "${direct[bb-patched-stock]:-}" 16 full
expect "patched blkfront and blkback, 1024 segments, 4 MiB writes" "${direct[bb-1024]:-}" 4 full
if [ -f "$here/domU.cpio.gz" ]; then
	expect "guest with the patched blkfront, tapdisk" "${direct[domu-patched]:-}" 16 full
fi
if [ -n "${mem[patched]:-}" ] && [ "${mem[patched]}" -gt 32 ]; then
	problem "the patched blkfront took ${mem[patched]} MiB at connect (ring order 4, persistent grants)"
fi

summary="$mode: 16 MiB in 1 MiB writes = ${direct[stock]:-?} requests (Debian's blkfront), ${direct[patched]:-?} (patched); 4 MiB writes at 1024 segments ${direct[stock-4m]:-?} vs ${direct[patched-4m]:-?}; guest ${direct[domu-stock]:-?} vs ${direct[domu-patched]:-?}; order-4 bounce reservation ${mem[stock]:-?} vs ${mem[patched]:-?} MiB"
[ $failed -eq 0 ] && finish 0 "$summary"
finish 1 "$summary"
