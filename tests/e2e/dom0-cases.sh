#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# dom0-cases.sh - the cases run inside the test dom0 (as /e2e/cases.sh).
#
#   cases.sh         run every case (or those listed in /e2e/only), each in
#                    its own bash with a time limit, and print
#                    "E2E-RESULT PASS|FAIL|SKIP NAME DETAIL" for each
#   cases.sh NAME    run one case: exit 0 passed, 77 skipped, else failed;
#                    its last "detail" line becomes the result's DETAIL
#
# A case cleans up what it made (processes, loop devices, Xen devices) even
# when it fails, so that the next one starts from a clean dom0.
CASES="dom0-boot xenstored tapdisk-nbd xl-block-attach-phy tapdisk-xen-attach
       tapdisk-xen-1mib tapdisk-xen-read-only tapdisk-xen-thesis
       tapdisk-xen-pause tapdisk-xen-grow tapdisk-xen-restart tapdisk-xen-frontend-close
       tapdisk-xen-bad-frontend tapdisk-xen-domu tapdisk-xen-driver-domain
       tapstripe-xenwatch-dom0 patched-modules tapdisk-xen-multiqueue"
CASE_TIMEOUT=240
MiB=1048576
PATTERN_MIB=16

log() { echo "E2E-LOG [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
detail() { echo "$*" >"/tmp/e2e-detail-$CASE"; }
fail() {
	detail "$*"
	log "$CASE: $*"
	# The log of the tapdisk under test, when the case named one.
	[ -n "${TD_LOG:-}" ] && [ -f "$TD_LOG" ] && tail -20 "$TD_LOG" | sed 's/^/E2E-LOG   /'
	exit 1
}
skip() {
	detail "$*"
	exit 77
}

# wait_for SECONDS TEST...: poll TEST every 0.5 s.  TEST's words are
# expanded once, by the caller: a condition on a value that changes needs
# eval and single quotes (wait_for 30 eval '[ "$(cat F)" = 2 ]').
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

# Run a Xen tool again when it died of a signal (status > 128): xl and
# the xenstore tools now and then abort at start-up under TCG
# (libxentoolcore's handlereg.c lock assertion, an ld.so version check),
# before doing anything.  Any other status is the tool's answer.
xtool() {
	local rc
	for _ in 1 2 3; do
		"$@"
		rc=$?
		[ $rc -le 128 ] && return $rc
		log "$1 died with status $rc; running it again" >/dev/console
	done
	return $rc
}

pattern() {
	[ -f /tmp/pattern ] ||
		dd if=/dev/urandom of=/tmp/pattern bs=$MiB count=$PATTERN_MIB 2>/dev/null
}

# same_prefix FILE: the first PATTERN_MIB MiB of FILE are the pattern.
same_prefix() {
	head -c $((PATTERN_MIB * MiB)) "$1" | cmp -s - /tmp/pattern
}

# A zeroed file of $2 MiB behind a loop device; prints the device.  aio
# opens with O_DIRECT, which tmpfs files refuse in Linux 6.1 and block
# devices accept.
loop_disk() {
	dd if=/dev/zero of="$1" bs=$MiB count="$2" 2>/dev/null
	losetup -f --show "$1"
}

# write_read DEV: the pattern in 1 MiB O_DIRECT writes, read back the same.
write_read() {
	local dev=$1
	pattern
	dd if=/tmp/pattern of="$dev" bs=$MiB count=$PATTERN_MIB oflag=direct \
		2>/tmp/dd-write.log || fail "O_DIRECT write to $dev: $(tail -1 /tmp/dd-write.log)"
	dd if="$dev" of=/tmp/readback bs=$MiB count=$PATTERN_MIB iflag=direct \
		2>/tmp/dd-read.log || fail "O_DIRECT read of $dev: $(tail -1 /tmp/dd-read.log)"
	cmp -s /tmp/pattern /tmp/readback || fail "read back from $dev differs"
}

# The "requests" column of tap-ctl stats for op $2 of tapdisk $1.
td_requests() {
	tap-ctl stats -i "$1" | awk -v op="$2" '$1 == op {print $2; exit}'
}

# --- the cases -----------------------------------------------------------------

case_dom0-boot() {
	[ -d /proc/xen ] && [ -e /proc/xen/capabilities ] ||
		fail "/proc/xen is not mounted: not a Xen dom0?"
	grep -q control_d /proc/xen/capabilities || fail "not the control domain"
	for d in gntdev evtchn xenbus_backend privcmd; do
		[ -e /dev/xen/$d ] || fail "/dev/xen/$d missing"
	done
	detail "Linux $(uname -r), $(xtool xl info 2>/dev/null | awk -F': ' '/^xen_version/ {print "Xen " $2}')"
}

case_xenstored() {
	local name
	[ -f /run/xen/xenstored.pid ] && kill -0 "$(cat /run/xen/xenstored.pid)" ||
		fail "xenstored is not running"
	name=$(xtool xenstore-read /local/domain/0/name) || fail "cannot read the name of dom0"
	[ "$name" = Domain-0 ] || fail "dom0's name is '$name'"
	xtool xenstore-write /local/domain/0/data/e2e hello || fail "xenstore-write"
	[ "$(xtool xenstore-read /local/domain/0/data/e2e)" = hello ] || fail "xenstore read-back"
	xtool xenstore-rm /local/domain/0/data/e2e
	xtool xl list 0 >/dev/null 2>&1 || fail "xl list 0 failed"
	detail "dom0 is $name; xl list works"
}

# tapdisk serving an aio disk over NBD: the control socket answers, the
# NBD server greets ("NBDMAGIC" then "IHAVEOPT", fixed newstyle), and with
# nbdcopy in the initramfs (TAPSTRIPE_E2E_NBDCOPY=1) data goes through.
case_tapdisk-nbd() {
	# dev and pid are globals: the EXIT trap runs after this returns.
	local sock=/run/td-nbd.sock greeting w=0
	ip link set lo up
	dev=$(loop_disk /tmp/nbd.img 32) || fail "losetup"
	tapdisk --foreground -a "aio:$dev" --nbd "unix:$sock" \
		--nbd tcp:127.0.0.1:10809 --name e2e-nbd >/tmp/tapdisk-nbd.log 2>&1 &
	pid=$!
	trap 'kill $pid 2>/dev/null; wait $pid; losetup -d $dev' EXIT
	wait_for 30 test -S "/run/tapstripe/tapdisk-$pid.sock" ||
		fail "no control socket: $(tail -2 /tmp/tapdisk-nbd.log)"
	tap-ctl list | grep -q "$pid" || fail "tap-ctl list does not show tapdisk $pid"
	tap-ctl info -i "$pid" | grep -q "size_bytes: $((32 * MiB))" ||
		fail "tap-ctl info: wrong size"
	greeting=$(exec 3<>/dev/tcp/127.0.0.1/10809 && head -c 16 <&3)
	[ "$greeting" = NBDMAGICIHAVEOPT ] || fail "NBD greeting was '$greeting'"
	if command -v nbdcopy >/dev/null; then
		pattern
		nbdcopy /tmp/pattern "nbd+unix:///?socket=$sock" ||
			fail "nbdcopy to tapdisk failed"
		nbdcopy "nbd+unix:///?socket=$sock" /tmp/nbd-back ||
			fail "nbdcopy from tapdisk failed"
		same_prefix /tmp/nbd-back || fail "NBD read back differs"
		same_prefix /tmp/nbd.img || fail "backing file differs"
		rm -f /tmp/nbd-back
		w=$(td_requests "$pid" write)
		[ "${w:-0}" -gt 0 ] || fail "tap-ctl stats shows no write"
	fi
	tap-ctl stats -i "$pid" | grep -q '^total' || fail "tap-ctl stats has no total"
	kill -TERM "$pid"
	wait "$pid" || fail "tapdisk exited with status $?: $(tail -2 /tmp/tapdisk-nbd.log)"
	trap 'losetup -d $dev' EXIT
	if command -v nbdcopy >/dev/null; then
		detail "16 MiB through NBD (nbdcopy), checked in the backing file; $w write requests"
	else
		detail "aio over a loop device; NBD greets on TCP; tap-ctl list, info, stats; clean exit on SIGTERM"
	fi
}

# The stock path: blkback in dom0 serving a loop device, blkfront in dom0.
case_xl-block-attach-phy() {
	local st wr # dev is global, for the EXIT trap
	dev=$(loop_disk /tmp/phy.img 64) || fail "losetup"
	trap 'xl block-detach 0 xvdb >/dev/null 2>&1; losetup -d $dev' EXIT
	xtool xl block-attach 0 "format=raw, vdev=xvdb, access=rw, target=$dev" \
		>/tmp/xl-attach.log 2>&1 || fail "xl block-attach: $(tail -1 /tmp/xl-attach.log)"
	wait_for 60 test -b /dev/xvdb || fail "no /dev/xvdb after 60 s"
	write_read /dev/xvdb
	same_prefix /tmp/phy.img || fail "backing file differs"
	st=$(ls -d /sys/bus/xen-backend/devices/vbd-0-*/statistics | head -1)
	wr=$(cat "$st/wr_req" 2>/dev/null)
	xtool xl block-detach 0 xvdb >/tmp/xl-detach.log 2>&1 ||
		fail "xl block-detach: $(tail -1 /tmp/xl-detach.log)"
	wait_for 30 test ! -b /dev/xvdb || fail "/dev/xvdb still there after detach"
	detail "16 MiB in 1 MiB O_DIRECT writes = $wr blkback write requests; data checked"
}

# tapdisk as the backend: tap-ctl writes the xenstore nodes, tapdisk runs
# the xenbus state machine and serves the ring; blkfront in dom0.
case_tapdisk-xen-attach() {
	local w wb # dev and id are globals, for the EXIT trap
	tap-ctl attach --help >/dev/null 2>&1 || skip "tap-ctl has no attach command yet (#7)"
	dev=$(loop_disk /tmp/xen.img 64) || fail "losetup"
	id=$(tap-ctl create -a "aio:$dev" --name e2e-xen --log-level debug \
		--log-file /tmp/td-e2e-xen.log 2>/tmp/tap-ctl.log) ||
		fail "tap-ctl create: $(tail -1 /tmp/tap-ctl.log)"
	TD_LOG=/tmp/td-e2e-xen.log
	trap 'tap-ctl detach -i $id --domid 0 --vdev xvdc >/dev/null 2>&1; tap-ctl destroy -i $id >/dev/null 2>&1; losetup -d $dev' EXIT
	tap-ctl attach -i "$id" --domid 0 --vdev xvdc 2>/tmp/tap-ctl.log ||
		fail "tap-ctl attach: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 60 test -b /dev/xvdc || {
		xtool xenstore-ls -f /local/domain/0/backend/vbd3 2>&1 | head -30
		xtool xenstore-ls -f /local/domain/0/device/vbd 2>&1 | head -20
		fail "no /dev/xvdc after 60 s"
	}
	write_read /dev/xvdc
	same_prefix /tmp/xen.img || fail "backing file differs"
	w=$(td_requests "$id" write)
	wb=$(tap-ctl stats -i "$id" | awk '$1 == "write" {print $3, $4; exit}')
	tap-ctl stats -i "$id" | sed 's/^/E2E-LOG   /'
	tap-ctl detach -i "$id" --domid 0 --vdev xvdc 2>/tmp/tap-ctl.log ||
		fail "tap-ctl detach: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 30 test ! -b /dev/xvdc || fail "/dev/xvdc still there after detach"
	tap-ctl destroy -i "$id" >/dev/null || fail "tap-ctl destroy"
	trap 'losetup -d $dev' EXIT
	grep -E 'state|connected|ring closed|warn|err' "$TD_LOG" | tail -12 | sed 's/^/E2E-LOG   /'
	! grep -q ' err ' "$TD_LOG" || fail "tapdisk logged errors"
	# Stock blkfront: 32 segments per request, so 1 MiB = 8 requests.
	[ "$w" = $((PATTERN_MIB * 8)) ] ||
		fail "$w write requests ($wb) for $PATTERN_MIB MiB; stock blkfront makes $((PATTERN_MIB * 8)) of 128 KiB"
	detail "16 MiB checked in the backing file; $w write requests of 128 KiB ($wb)"
}

# xen_attach IMG MiB VDEV [MODE]: a tapdisk over a loop device of IMG,
# attached to dom0 as VDEV; sets id, dev and TD_LOG, and a trap that
# undoes it all.
xen_attach() {
	local vdev=$3 mode=${4:-w}
	tap-ctl attach --help >/dev/null 2>&1 || skip "tap-ctl has no attach command yet (#7)"
	dev=$(loop_disk "$1" "$2") || fail "losetup"
	id=$(tap-ctl create -a "aio:$dev" --name "e2e-$vdev" \
		--log-file "/tmp/td-e2e-$vdev.log" 2>/tmp/tap-ctl.log) ||
		fail "tap-ctl create: $(tail -1 /tmp/tap-ctl.log)"
	TD_LOG=/tmp/td-e2e-$vdev.log
	XEN_UNDO="tap-ctl detach -i $id --domid 0 --vdev $vdev >/dev/null 2>&1; tap-ctl destroy -i $id >/dev/null 2>&1; losetup -d $dev"
	trap "$XEN_UNDO" EXIT
	tap-ctl attach -i "$id" --domid 0 --vdev "$vdev" --mode "$mode" 2>/tmp/tap-ctl.log ||
		fail "tap-ctl attach: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 60 test -b "/dev/$vdev" || fail "no /dev/$vdev after 60 s"
}

# xen_detach VDEV: detach, destroy, and the device must be gone; tapdisk
# must have logged no error but those matching $ERR_EXPECTED (an ERE).
xen_detach() {
	local errs
	tap-ctl detach -i "$id" --domid 0 --vdev "$1" 2>/tmp/tap-ctl.log ||
		fail "tap-ctl detach: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 30 test ! -b "/dev/$1" || fail "/dev/$1 still there after detach"
	tap-ctl destroy -i "$id" >/dev/null || fail "tap-ctl destroy"
	trap 'losetup -d $dev' EXIT
	errs=$(grep ' err ' "$TD_LOG" | grep -Ev "${ERR_EXPECTED:-^\$}")
	[ -z "$errs" ] || fail "tapdisk logged errors: $(echo "$errs" | tail -1)"
}

# blkfront asking for 256 segments and a 16-page ring (it must be loaded
# again: its parameters are read-only once loaded).  Our backend offers
# no persistent grants, so no bounce pages are reserved (FACTS.md).
case_tapdisk-xen-1mib() {
	local w hist
	rmmod xen_blkfront || skip "xen-blkfront is built in or busy"
	modprobe xen-blkfront max_indirect_segments=256 max_ring_page_order=4 ||
		fail "modprobe xen-blkfront with parameters"
	xen_attach /tmp/xen1m.img 64 xvdd
	trap "$XEN_UNDO; rmmod xen_blkfront; modprobe xen-blkfront" EXIT
	write_read /dev/xvdd
	same_prefix /tmp/xen1m.img || fail "backing file differs"
	w=$(td_requests "$id" write)
	hist=$(tap-ctl stats -i "$id" | awk '$1 == "129-256" {print $2}')
	xtool xenstore-read /local/domain/0/device/vbd/51760/ring-page-order >/tmp/order 2>&1 ||
		echo "?" >/tmp/order
	xen_detach xvdd
	rmmod xen_blkfront && modprobe xen-blkfront || fail "reloading stock xen-blkfront"
	trap 'losetup -d $dev' EXIT
	[ "$w" = $PATTERN_MIB ] ||
		fail "$w write requests for $PATTERN_MIB MiB in 1 MiB writes; expected $PATTERN_MIB of 1 MiB"
	detail "1 MiB O_DIRECT writes = $w requests of 1 MiB (256 segments: $hist reads and writes); ring order $(cat /tmp/order)"
}

# Attached with --mode r: blkfront makes the disk read-only; reads work.
case_tapdisk-xen-read-only() {
	local w
	xen_attach /tmp/xenro.img 16 xvde r
	dd if=/dev/zero of=/dev/xvde bs=$MiB count=1 oflag=direct 2>/dev/null &&
		fail "a write to the read-only disk succeeded"
	dd if=/dev/xvde of=/dev/null bs=$MiB count=4 iflag=direct 2>/tmp/dd.log ||
		fail "read: $(tail -1 /tmp/dd.log)"
	w=$(td_requests "$id" write)
	xen_detach xvde
	[ "$w" = 0 ] || fail "$w writes reached tapdisk"
	detail "blkfront refuses writes (info = VDISK_READONLY), reads work, no write reached tapdisk"
}

# Gone once xenstore says its directory is absent (status 1).  Not xl:
# "xl domid" crashes on a dying domain; and the xenstore tools now and
# then abort at start-up here (libxentoolcore's handlereg.c lock
# assertion), which must not count as "gone".
domu_gone() {
	xtool xenstore-exists "/local/domain/$1" 2>/dev/null
	[ $? -eq 1 ]
}

# A separate PV guest whose blkfront tapdisk serves: grants and event
# channel of another domain, xenstore permissions, the guest's death.
case_tapdisk-xen-domu() {
	local domid w con=/var/log/xen/console/guest-e2e-domu.log p b
	[ -f /etc/domu.cfg ] || skip "no guest in this initramfs"
	tap-ctl attach --help >/dev/null 2>&1 || skip "tap-ctl has no attach command yet (#7)"
	dev=$(loop_disk /tmp/domu.img 16) || fail "losetup"
	id=$(tap-ctl create -a "aio:$dev" --name e2e-domu \
		--log-file /tmp/td-e2e-domu.log 2>/tmp/tap-ctl.log) ||
		fail "tap-ctl create: $(tail -1 /tmp/tap-ctl.log)"
	TD_LOG=/tmp/td-e2e-domu.log
	trap 'xl destroy e2e-domu >/dev/null 2>&1; tap-ctl destroy -i $id >/dev/null 2>&1; losetup -d $dev' EXIT
	xtool xl create -p /etc/domu.cfg >/tmp/xl-create.log 2>&1 ||
		fail "xl create: $(tail -1 /tmp/xl-create.log)"
	domid=$(xtool xl domid e2e-domu) || fail "no domid for the guest"
	tap-ctl attach -i "$id" --domid "$domid" --vdev xvda 2>/tmp/tap-ctl.log ||
		fail "tap-ctl attach: $(tail -1 /tmp/tap-ctl.log)"
	xtool xl unpause e2e-domu || fail "xl unpause"
	wait_for 180 domu_gone "$domid" || {
		tail -5 "$con" | sed 's/^/E2E-LOG   /'
		fail "the guest still runs after 180 s"
	}
	grep -a DOMU "$con" | tail -4 | sed 's/^/E2E-LOG   /'
	p=$(grep -a -o 'md5 pattern=[0-9a-f]*' "$con" | tail -1 | cut -d= -f2)
	b=$(head -c 4194304 /tmp/domu.img | md5sum | cut -c1-32)
	if [ -z "$p" ]; then
		tail -15 "$con" 2>&1 | sed 's/^/E2E-LOG   console: /'
		xtool xl dmesg 2>&1 | tail -15 | sed 's/^/E2E-LOG   xl dmesg: /'
		fail "the guest wrote nothing (its console and Xen's are above)"
	fi
	grep -aq "md5 pattern=$p readback=$p" "$con" ||
		fail "the guest did not read back its pattern"
	[ "$p" = "$b" ] || fail "the backing file lacks the guest's pattern"
	w=$(td_requests "$id" write)
	tap-ctl detach -i "$id" --domid "$domid" --vdev xvda 2>/tmp/tap-ctl.log ||
		fail "tap-ctl detach after the guest died: $(tail -1 /tmp/tap-ctl.log)"
	tap-ctl destroy -i "$id" >/dev/null || fail "tap-ctl destroy"
	trap 'losetup -d $dev' EXIT
	! grep -q ' err ' "$TD_LOG" || fail "tapdisk logged errors"
	detail "guest $domid wrote 4 MiB through tapdisk ($w write requests), read it back; checked in the backing file"
}

# Not in CASES: how often the Xen tools die of a signal at start-up here
# while a guest runs beside dom0 (run.sh tools-stress; compare
# TAPSTRIPE_E2E_CPU settings).  The guest has no disk: it waits 30 s for
# one and powers off.
case_tools-stress() {
	local n=0 died=0 rc domid
	[ -f /etc/domu.cfg ] || skip "no guest in this initramfs"
	for _ in 1 2 3; do
		xtool xl create /etc/domu.cfg >/dev/null 2>&1 || fail "xl create"
		domid=$(xtool xl domid e2e-domu) || fail "xl domid"
		while xenstore-exists "/local/domain/$domid" 2>/dev/null; rc=$?; [ $rc -ne 1 ]; do
			n=$((n + 1))
			[ $rc -gt 128 ] && died=$((died + 1))
		done
	done
	detail "$died of $n runs of xenstore-exists died of a signal"
	[ $died -eq 0 ]
}

# Debian's and the patched blkfront/blkback of patches/ side by side:
# request sizes with default parameters, the bounce reservation at connect.
case_patched-modules() {
	[ -x /e2e/patched/case.sh ] ||
		skip "no patched modules in this initramfs (patches/e2e-modules.sh)"
	log "loop devices in use: $(losetup -a 2>/dev/null | wc -l) of $(ls /dev/loop[0-9]* 2>/dev/null | wc -l)"
	/e2e/patched/case.sh "/tmp/e2e-detail-$CASE"
}

# The life-cycle, hostile-frontend and request-count cases.
# shellcheck source=tests/e2e/dom0-cases-xen.sh
. /e2e/cases-xen.sh
# Kernel iSCSI sessions under a striped disk (stripe-kernel-iscsi).
# shellcheck source=tests/e2e/dom0-cases-iscsi.sh
[ -f /e2e/cases-iscsi.sh ] && . /e2e/cases-iscsi.sh

# --- the runner ------------------------------------------------------------------

if [ $# -eq 1 ]; then
	CASE=$1
	set -u
	"case_$1"
	exit $?
fi

# The cases named on run.sh's command line (extra ones included), else all.
only=$(cat /e2e/only 2>/dev/null)
for c in ${only:-$CASES}; do
	log "case $c"
	rm -f "/tmp/e2e-detail-$c"
	t0=$(cut -d' ' -f1 /proc/uptime)
	# Five PV boots (three domUs, the driver domain twice): more time.
	limit=$CASE_TIMEOUT
	[ "$c" = tapdisk-xen-driver-domain ] && limit=$((CASE_TIMEOUT * 4))
	[ "$c" = patched-modules ] && limit=900
	timeout $limit /bin/bash /e2e/cases.sh "$c" 2>"/tmp/e2e-stderr-$c"
	rc=$?
	t=$(awk -v t0="$t0" '{printf "%.0f", $1 - t0}' /proc/uptime)
	d="$(cat "/tmp/e2e-detail-$c" 2>/dev/null) [${t}s]"
	case $rc in
	0) echo "E2E-RESULT PASS $c $d" ;;
	77) echo "E2E-RESULT SKIP $c $d" ;;
	*)
		[ $rc -ge 124 ] && d="$d (exit status $rc: timed out after ${limit}s?)"
		tail -5 "/tmp/e2e-stderr-$c" | sed 's/^/E2E-LOG   /'
		echo "E2E-RESULT FAIL $c $d"
		;;
	esac
	# dom0's /tmp lives in its memory: the cases' disk images (16-64 MiB
	# each) filled it by the last case, whose losetup then failed.  A
	# loop device a case left keeps its image's memory (three cases did,
	# 160 MiB, and patched-modules' 543 MiB bounce reservation then ran
	# dom0 out of memory): say so and detach it.
	if [ -n "$(losetup -a 2>/dev/null)" ]; then
		log "$c left loop devices behind: $(losetup -a | tr '\n' ' ')"
		losetup -D
	fi
	rm -f /tmp/*.img /tmp/readback /tmp/pattern
	log "after $c: /tmp has $(df -m /tmp | awk 'NR == 2 {print $4}') MiB free;" \
		"dom0 has $(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo) MiB available"
done
touch /tmp/e2e-runner-done
