# SPDX-License-Identifier: BSD-3-Clause
# dom0-cases-xen.sh - the Xen transport's life-cycle, hostile-frontend and
# request-count cases; sourced by dom0-cases.sh (as /e2e/cases-xen.sh),
# whose helpers they use: log, detail, fail, skip, wait_for, xtool,
# pattern, same_prefix, loop_disk, write_read, td_requests, xen_attach,
# xen_detach.

# The frontend directory of dom0's VDEV and tapdisk's backend directory.
fe_dir() { echo "/local/domain/0/device/vbd/$1"; }
be_dir() { echo "/local/domain/0/backend/vbd3/0/$1"; }

# devid of xvdX for the first 16 disks: 202 << 8 | index << 4.
vdev_id() {
	local i
	i=$(printf '%d' "'${1#xvd}")
	echo $(((202 << 8) | ((i - 97) << 4)))
}

# td_json_op ID OP FIELD: a number from tap-ctl stats --json ("ops" object).
td_json_op() {
	tap-ctl stats -i "$1" --json | awk -v op="\"$2\":" -v f="\"$3\":" '
		$1 == op { inop = 1; next }
		inop && $1 == f { gsub(/,/, "", $2); print $2; exit }
		inop && /}/ { inop = 0 }'
}

# td_json_xen_rings ID: from one tap-ctl stats --json, the Xen section's
# ring requests_total then each queue's (xen.queues[N].requests_total):
# "TOTAL Q0 Q1 ...".  Depth counted by brackets: ring's key sits at 2,
# a queue's at 3 (the JSON has one member a line).
td_json_xen_rings() {
	tap-ctl stats -i "$1" --json | awk '
		!inx && /"xen": \{/ { inx = 1 }
		!inx { next }
		$1 == "\"ring\":" && d == 1 { sect = "ring" }
		$1 == "\"queues\":" && d == 1 { sect = "queues" }
		$1 == "\"requests_total\":" {
			v = $2; gsub(/,/, "", v)
			if (sect == "ring" && d == 2) total = v
			if (sect == "queues" && d == 3) q = q " " v
		}
		{ d += split($0, a, /[{[]/) - split($0, b, /[]}]/) }
		d <= 0 { exit }
		END { print total q }'
}

# mq_rings_check WHEN: tap-ctl stats --json shows 2 Xen rings, each
# with requests, adding up to the ring counters.  Sets MQ_RINGS.
mq_rings_check() {
	local when=$1 r n t sum=0
	r=$(td_json_xen_rings "$id")
	set -- $r
	t=${1:-}
	[ -n "$t" ] || fail "$when: no Xen ring counters in tap-ctl stats --json"
	shift
	[ $# = 2 ] || fail "$when: tap-ctl stats --json shows $# Xen rings (want 2): xen.queues requests_total $*"
	for n in "$@"; do
		[ "$n" -gt 0 ] || fail "$when: a ring carried no request per tap-ctl stats --json: $*"
		sum=$((sum + n))
	done
	[ "$sum" = "$t" ] ||
		fail "$when: the rings' requests ($*) add up to $sum, not the disk's $t"
	MQ_RINGS="$* of $t"
}

# The segments-per-request bucket holding most requests: "min-max count".
td_json_seg_mode() {
	tap-ctl stats -i "$1" --json | awk '
		/"segments_per_request"/ { in_h = 1; next }
		in_h && /"min":/ { gsub(/,/, "", $2); lo = $2 }
		in_h && /"max":/ { gsub(/,/, "", $2); hi = $2 }
		in_h && /"count":/ { gsub(/,/, "", $2); if ($2 + 0 > best) { best = $2 + 0; m = lo "-" hi } }
		in_h && /\]/ { in_h = 0 }
		END { print m, best + 0 }'
}

# blkfront again, with these parameters (read-only once loaded).
reload_blkfront() {
	rmmod xen_blkfront 2>/dev/null
	modprobe xen-blkfront "$@" || fail "modprobe xen-blkfront $*"
}

# sectors written to the loop device $1 since boot (/sys/block/*/stat).
loop_written() {
	awk '{print $7}' "/sys/block/$(basename "$1")/stat"
}

# --- the thesis's tables 3.5 and 4.1 ----------------------------------------------

# 4096 buffered 4 KiB writes, then sync, through blkfront to tapdisk, with
# blkfront's ring order 0 and 3 (stock segments: 32 per request): how many
# requests and how many segments each reach the backend (tapdisk's own
# counters).  One "E2E-TABLE" line per setting; run.sh prints them as a
# table.  A setting takes about a minute under TCG; THESIS_SEGS in
# /e2e/thesis-segs (e.g. "11 32 256") adds segment limits.
case_tapdisk-xen-thesis() {
	local order segs w bytes mode got_order rows=0 kib
	rmmod xen_blkfront || skip "xen-blkfront is built in or busy"
	trap 'rmmod xen_blkfront 2>/dev/null; modprobe xen-blkfront' EXIT
	pattern
	echo "E2E-TABLE | ring order | max segments (blkfront) | write requests | segments per request | KiB per request | most requests in bucket |"
	echo "E2E-TABLE |---|---|---|---|---|---|"
	for order in 0 3; do
		for segs in $(cat /e2e/thesis-segs 2>/dev/null || echo 32); do
			reload_blkfront max_ring_page_order=$order max_indirect_segments=$segs
			xen_attach /tmp/thesis.img 32 xvdh
			trap "$XEN_UNDO; rmmod xen_blkfront; modprobe xen-blkfront" EXIT
			dd if=/tmp/pattern of=/dev/xvdh bs=4096 count=4096 2>/tmp/dd.log ||
				fail "buffered write: $(tail -1 /tmp/dd.log)"
			sync
			w=$(td_json_op "$id" write requests)
			bytes=$(td_json_op "$id" write bytes)
			mode=$(td_json_seg_mode "$id")
			got_order=$(xtool xenstore-read "$(fe_dir "$(vdev_id xvdh)")/ring-page-order" 2>/dev/null || echo 0)
			xen_detach xvdh
			same_prefix /tmp/thesis.img || fail "order $order, $segs segments: backing file differs"
			[ "$bytes" = $((16 * MiB)) ] ||
				fail "order $order, $segs segments: $bytes bytes written, not 16 MiB"
			[ "$got_order" = "$order" ] ||
				fail "blkfront asked for ring order $order, the ring has order $got_order"
			[ "${w:-0}" -gt 0 ] || fail "no write request counted"
			# A request never carries more than blkfront's limit.
			[ $((bytes / 4096)) -le $((w * segs)) ] ||
				fail "order $order: $w requests for 4096 pages, more than $segs segments each"
			kib=$(awk -v b="$bytes" -v w="$w" 'BEGIN {printf "%.1f", b / w / 1024}')
			echo "E2E-TABLE | $order | $segs | $w | $(awk -v b="$bytes" -v w="$w" 'BEGIN {printf "%.2f", b / 4096 / w}') | $kib | ${mode% *} segments: ${mode#* } |"
			rows=$((rows + 1))
			losetup -d "$dev"
			trap 'rmmod xen_blkfront 2>/dev/null; modprobe xen-blkfront' EXIT
		done
	done
	reload_blkfront
	trap - EXIT
	detail "$rows settings, 16 MiB each in 4096 buffered 4 KiB writes + sync, checked in the backing file (table above)"
}

# --- life cycle ------------------------------------------------------------------

# tap-ctl pause while the guest writes: pause returns with nothing in
# flight, nothing reaches the disk while paused, the guest's writes go on
# after resume, and the data are whole.
case_tapdisk-xen-pause() {
	local writer w0 s0 s1 s2 n=0
	xen_attach /tmp/pause.img 32 xvdf
	pattern
	# The guest writes the pattern again and again until told to stop.
	rm -f /tmp/stop-writer /tmp/writer-failed
	w0=$(loop_written "$dev") # a reused loop device counts from boot
	(while [ ! -e /tmp/stop-writer ]; do
		dd if=/tmp/pattern of=/dev/xvdf bs=64k count=128 oflag=direct 2>/tmp/writer.log ||
			{ echo "write failed" >/tmp/writer-failed; break; }
		n=$((n + 1))
	done) &
	writer=$!
	trap "touch /tmp/stop-writer; kill $writer 2>/dev/null; $XEN_UNDO" EXIT
	wait_for 30 eval '[ "$(loop_written "$dev")" -gt "$w0" ]' ||
		fail "the guest's writes do not arrive ($(cat /tmp/writer-failed /tmp/writer.log 2>/dev/null | tr '\n' ' '); $(tap-ctl stats -i "$id" | grep -E '^(write|read) '); $dev wrote $(loop_written "$dev") sectors)"
	timeout 60 tap-ctl pause -i "$id" 2>/tmp/tap-ctl.log || fail "tap-ctl pause: $(tail -1 /tmp/tap-ctl.log)"
	s0=$(loop_written "$dev")
	sleep 3
	s1=$(loop_written "$dev")
	[ "$s0" = "$s1" ] || fail "$((s1 - s0)) sectors reached the disk while paused"
	kill -0 "$writer" 2>/dev/null || fail "the writer ended while paused"
	tap-ctl resume -i "$id" 2>/tmp/tap-ctl.log || fail "tap-ctl resume: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 30 eval '[ "$(loop_written "$dev")" -gt "$s1" ]' || fail "no write reached the disk after resume"
	s2=$(loop_written "$dev")
	touch /tmp/stop-writer
	wait "$writer"
	[ -e /tmp/writer-failed ] && fail "a guest write failed"
	sync
	head -c $((8 * MiB)) /tmp/pause.img | cmp -s - <(head -c $((8 * MiB)) /tmp/pattern) ||
		fail "backing file differs after pause and resume"
	xen_detach xvdf
	detail "guest writing: pause drained, 0 sectors written in 3 s paused, $((s2 - s1)) sectors within a poll after resume; data checked"
}

# Online grow under a writing guest (issue #21): the loop device under
# tapdisk's aio grows (file made larger, losetup -c), `tap-ctl resize`
# takes the new size, and the Xen frontend writes the new `sectors` and
# switches the backend to Connected again in one xenstore transaction (as
# blkback's xen_vbd_resize does): blkfront must show the new size in
# /sys/block/xvdg/size without a re-attach while the writer keeps going,
# and 16 MiB written beyond the old end must read back and be found in the
# backing file.
case_tapdisk-xen-grow() {
	local writer w0 s0 s1 be
	xen_attach /tmp/grow.img 16 xvdg
	be=$(be_dir "$(vdev_id xvdg)")
	s0=$(cat /sys/block/xvdg/size)
	[ "$s0" = $((16 * 2048)) ] || fail "xvdg has $s0 sectors, not 16 MiB"
	pattern
	rm -f /tmp/stop-writer /tmp/writer-failed
	w0=$(loop_written "$dev") # a reused loop device counts from boot
	(while [ ! -e /tmp/stop-writer ]; do
		dd if=/tmp/pattern of=/dev/xvdg bs=64k count=128 oflag=direct 2>/tmp/writer.log ||
			{ echo "write failed" >/tmp/writer-failed; break; }
	done) &
	writer=$!
	trap "touch /tmp/stop-writer; kill $writer 2>/dev/null; $XEN_UNDO" EXIT
	wait_for 30 eval '[ "$(loop_written "$dev")" -gt "$w0" ]' ||
		fail "the guest's writes do not arrive ($(cat /tmp/writer-failed /tmp/writer.log 2>/dev/null | tr '\n' ' '); $(tap-ctl stats -i "$id" | grep -E '^(write|read) '))"
	truncate -s 48M /tmp/grow.img || fail "truncate -s 48M"
	losetup -c "$dev" || fail "losetup -c $dev"
	tap-ctl resize -i "$id" 2>/tmp/tap-ctl.log >/tmp/resize.out ||
		fail "tap-ctl resize: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 30 eval '[ "$(cat /sys/block/xvdg/size)" = $((48 * 2048)) ]' ||
		fail "xvdg shows $(cat /sys/block/xvdg/size) sectors after tap-ctl resize, not $((48 * 2048)) (sectors in xenstore: $(xtool xenstore-read "$be/sectors"))"
	s1=$(cat /sys/block/xvdg/size)
	touch /tmp/stop-writer
	wait "$writer"
	[ -e /tmp/writer-failed ] && fail "a guest write failed across the grow"
	[ "$(xtool xenstore-read "$be/state")" = 4 ] || fail "the backend is not Connected after the grow"
	dd if=/tmp/pattern of=/dev/xvdg bs=$MiB seek=32 count=16 oflag=direct 2>/tmp/dd.log ||
		fail "write beyond the old end: $(tail -1 /tmp/dd.log)"
	dd if=/dev/xvdg of=/tmp/readback bs=$MiB skip=32 count=16 iflag=direct 2>/tmp/dd.log ||
		fail "read beyond the old end: $(tail -1 /tmp/dd.log)"
	cmp -s /tmp/pattern /tmp/readback || fail "data beyond the old end read back differs"
	sync
	tail -c +$((32 * MiB + 1)) /tmp/grow.img | head -c $((16 * MiB)) | cmp -s - /tmp/pattern ||
		fail "the backing file beyond the old end differs"
	xen_detach xvdg
	detail "xvdg grew from $s0 to $s1 sectors under a writing guest without a re-attach ($(dmesg | grep -c 'xvdg.*capacity change') capacity-change line in dmesg); 16 MiB beyond the old end checked"
}

# A new tapdisk takes over a connected guest's disk: the old one hands
# the ring over (tap-ctl release), exits, and the guest's write waits with
# no tapdisk at all until the new one resumes the ring.
case_tapdisk-xen-restart() {
	local writer w be
	# old and new are globals: the EXIT trap runs after this returns.
	xen_attach /tmp/restart.img 32 xvdi
	old=$id
	be=$(be_dir "$(vdev_id xvdi)")
	pattern
	dd if=/tmp/pattern of=/dev/xvdi bs=$MiB count=4 oflag=direct 2>/dev/null ||
		fail "first write"
	tap-ctl release -i "$old" --domid 0 --vdev xvdi 2>/tmp/tap-ctl.log ||
		fail "tap-ctl release: $(tail -1 /tmp/tap-ctl.log)"
	[ "$(xtool xenstore-read "$be/state")" = 4 ] || fail "the backend left Connected on release"
	grep -q "handed over" "$TD_LOG" || fail "the old tapdisk did not log the hand-over"
	tap-ctl destroy -i "$old" >/dev/null || fail "tap-ctl destroy of the old tapdisk"
	# No tapdisk now: the guest's write must wait, not fail.
	dd if=/tmp/pattern of=/dev/xvdi bs=$MiB skip=4 seek=4 count=4 oflag=direct \
		2>/tmp/dd-wait.log &
	writer=$!
	trap "kill $writer 2>/dev/null; tap-ctl detach -i \${new:-0} --domid 0 --vdev xvdi >/dev/null 2>&1; tap-ctl destroy -i \${new:-0} >/dev/null 2>&1; losetup -d $dev" EXIT
	sleep 3
	kill -0 "$writer" 2>/dev/null || fail "the guest's write ended with no tapdisk: $(tail -1 /tmp/dd-wait.log)"
	new=$(tap-ctl create -a "aio:$dev" --name e2e-xvdi-new \
		--log-file /tmp/td-e2e-xvdi-new.log 2>/tmp/tap-ctl.log) ||
		fail "tap-ctl create (new): $(tail -1 /tmp/tap-ctl.log)"
	id=$new
	TD_LOG=/tmp/td-e2e-xvdi-new.log
	tap-ctl attach -i "$new" --domid 0 --vdev xvdi 2>/tmp/tap-ctl.log ||
		fail "tap-ctl attach (take over): $(tail -1 /tmp/tap-ctl.log)"
	wait_for 60 sh -c "! kill -0 $writer 2>/dev/null" || fail "the guest's write still waits after the take-over"
	wait "$writer" || fail "the guest's write failed: $(tail -1 /tmp/dd-wait.log)"
	grep -q "resuming at index" "$TD_LOG" || fail "the new tapdisk did not resume the ring"
	w=$(td_requests "$new" write)
	dd if=/dev/xvdi of=/tmp/readback bs=$MiB count=8 iflag=direct 2>/dev/null || fail "read back"
	head -c $((8 * MiB)) /tmp/pattern | cmp -s - /tmp/readback || fail "read back through the new tapdisk differs"
	head -c $((8 * MiB)) /tmp/restart.img | cmp -s - /tmp/readback || fail "backing file differs"
	xen_detach xvdi
	detail "old tapdisk handed the connected ring over and exited; the guest's 4 MiB write waited, then completed through the new tapdisk ($w write requests); 8 MiB checked"
}

# The frontend goes away, as a guest's kernel does when it reboots in
# place: dom0's blkfront is unbound from the device (frontend Closed).
# tapdisk must close that ring (its I/O drained), go back to InitWait for
# a frontend that comes back with a new ring (a rebooted kernel's fresh
# blkfront connects from there; Linux 6.1 keeps an unbound device's
# in-memory state Closed, so binding it again cannot show the reconnect:
# test_xen-backend's test_frontend_closes does, with a hand-made
# frontend), keep the data, and detach cleanly.
case_tapdisk-xen-frontend-close() {
	local be xdev drv=/sys/bus/xen/drivers/vbd
	xen_attach /tmp/reconnect.img 32 xvdg
	be=$(be_dir "$(vdev_id xvdg)")
	xdev=vbd-$(vdev_id xvdg)
	[ -e "$drv/unbind" ] || skip "no $drv/unbind"
	pattern
	dd if=/tmp/pattern of=/dev/xvdg bs=$MiB count=4 oflag=direct 2>/dev/null || fail "write"
	echo "$xdev" >"$drv/unbind" || fail "cannot unbind $xdev from blkfront"
	wait_for 30 grep -q ': disconnected' "$TD_LOG" ||
		fail "tapdisk did not close the ring when the frontend closed"
	wait_for 30 eval '[ "$(xtool xenstore-read "$be/state")" = 2 ]' ||
		fail "backend state $(xtool xenstore-read "$be/state") after the frontend closed, not InitWait (2)"
	wait_for 10 test ! -b /dev/xvdg || fail "/dev/xvdg still there after unbind"
	head -c $((4 * MiB)) /tmp/pattern | cmp -s - <(head -c $((4 * MiB)) /tmp/reconnect.img) ||
		fail "backing file differs"
	xen_detach xvdg
	detail "frontend closed: ring drained and closed, backend back in InitWait for a returning frontend, data kept, clean detach"
}

# --- a hostile frontend --------------------------------------------------------------

# One tapdisk serves dom0's blkfront (xvdc) and a hostile frontend
# (xen-badfront: a real ring shared by gntshr, an event channel, the
# xenstore keys).  Malformed requests are answered with errors; a
# corrupted producer index gets that ring given up (Closing, "error"
# node); the blkfront disk goes on working throughout.
case_tapdisk-xen-bad-frontend() {
	local devid fe be out rc
	command -v xen-badfront >/dev/null || skip "xen-badfront is not in this initramfs"
	devid=$(vdev_id xvdn)
	xen_attach /tmp/good.img 32 xvdc
	fe=$(fe_dir $devid)
	be=$(be_dir $devid)
	trap "xenstore-rm $fe 2>/dev/null; xenstore-rm $be 2>/dev/null; $XEN_UNDO" EXIT
	pattern
	dd if=/tmp/pattern of=/dev/xvdc bs=$MiB count=2 oflag=direct 2>/dev/null || fail "write before"
	# tap-ctl attach's nodes, without virtual-device: dom0's blkfront
	# fails its probe and leaves the device to xen-badfront.
	xtool xenstore-write "$fe/backend" "$be" "$fe/backend-id" 0 \
		"$fe/device-type" disk "$fe/state" 1 \
		"$be/frontend" "$fe" "$be/frontend-id" 0 "$be/dev" "$devid" \
		"$be/mode" w "$be/type" tapstripe "$be/device-type" disk \
		"$be/online" 1 "$be/tapstripe-pid" "$id" "$be/state" 1 ||
		fail "xenstore-write of the hostile frontend's nodes"
	out=$(timeout 90 xen-badfront "$fe" "$be" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/E2E-LOG   /'
	[ $rc -eq 0 ] || fail "xen-badfront: $(echo "$out" | tail -1)"
	grep -q 'protocol error, ring given up' "$TD_LOG" || fail "tapdisk did not log the protocol error"
	dd if=/tmp/pattern of=/dev/xvdc bs=$MiB skip=2 seek=2 count=2 oflag=direct 2>/dev/null ||
		fail "write to the good disk after the bad ring died"
	dd if=/dev/xvdc of=/tmp/readback bs=$MiB count=4 iflag=direct 2>/dev/null || fail "read back"
	head -c $((4 * MiB)) /tmp/pattern | cmp -s - /tmp/readback || fail "good disk: data differ"
	xtool xenstore-write "$be/online" 0
	wait_for 30 eval '[ "$(xtool xenstore-read "$be/state")" = 6 ]' || fail "the bad device did not close"
	xtool xenstore-rm "$fe"
	xtool xenstore-rm "$be"
	trap "$XEN_UNDO" EXIT
	# The errors this case provoked; xen_detach accepts no other.
	ERR_EXPECTED='protocol error, ring given up|broke the ring protocol'
	xen_detach xvdc
	detail "bad requests answered BLKIF_RSP_ERROR; corrupted req_prod: that ring given up (Closing, error node); the blkfront disk on the same tapdisk kept working (4 MiB checked)"
}

# --- a storage driver domain ---------------------------------------------------------


# Absent from xenstore (status 1 of xenstore-exists, not a crash).
xs_gone() {
	xtool xenstore-exists "$1" 2>/dev/null
	[ $? -eq 1 ]
}

# What the driver-domain case saw, for a failure: the domains, Xen's free
# memory, xl's logs, the consoles of the guest and of e2e-dd.
dd_diagnose() {
	xtool xl list 2>&1 | sed 's/^/E2E-LOG   xl list: /'
	xtool xl info 2>/dev/null | grep -E '^(total|free)_memory' | sed 's/^/E2E-LOG   /'
	tail -6 /var/log/xen/xl-e2e-dd.log 2>/dev/null | sed 's/^/E2E-LOG   xl-e2e-dd: /'
	tail -10 /var/log/xen/xl-e2e-ddguest.log 2>/dev/null | sed 's/^/E2E-LOG   xl-e2e-ddguest: /'
	grep -a DOMU "$con" 2>/dev/null | tail -6 | sed 's/^/E2E-LOG   guest: /'
	grep -a 'DD ' "$ddcon" 2>/dev/null | tail -12 | sed 's/^/E2E-LOG   dd: /'
}

# The driver-domain deployment, and a guest's reboot and destruction on it:
# a PV storage driver domain (e2e-dd, driver_domain=1, not dom0) runs
# tapdisk over its own disk (xvda, a loop device dom0's blkback gives it)
# with --name dd-disk; a PV guest whose xl config names the disk
#   disk = ['backend=e2e-dd, backendtype=qdisk, vdev=xvda, target=tapstripe:dd-disk']
# is made with plain xl create.  xl in dom0 writes the backend/qdisk nodes
# in e2e-dd's xenstore tree (no QEMU: the backend is not dom0); the tapdisk
# in e2e-dd claims them because params names it and serves the ring across
# two domUs (grant copy, interdomain event channel).
#   boot 1   writes 4 MiB with O_DIRECT, reads it back, writes a mark and
#            reboots (domu-init.sh, e2e_reboot): its blkfront closes the
#            ring at shutdown, xl destroys the domain and makes it again
#            with a new domid, so libxl removes the old disk's nodes and
#            writes new ones; tapdisk removes the old device and claims
#            the new one
#   boot 2   finds the mark, reads the 4 MiB back and checks them, waits
#   xl destroy  of that running guest, whose frontend never closes its
#            ring: tapdisk drains it and removes the nodes
# Checked: the guest's checksums on both boots, the same bytes in dom0's
# backing file, tapdisk's log in e2e-dd (claimed, connected and removed,
# for each domid), no backend node left, no timeout in xl's log.
case_tapdisk-xen-driver-domain() {
	local ddcon=/var/log/xen/console/guest-e2e-dd.log
	local con=/var/log/xen/console/guest-e2e-ddguest.log
	local xllog=/var/log/xen/xl-e2e-ddguest.log ddid gid gid2 root be be2 p e r b
	local ask a p2 slow mon tails stops ddid2 gid3 be3 root2 n0 r3
	[ -f /boot/dd.cpio.gz ] && [ -f /etc/domu.cfg ] ||
		skip "no driver domain or guest in this initramfs"
	log "domains before: $(xtool xl list 2>/dev/null | awk 'NR > 1 {printf "%s(%s) ", $1, $3}')" \
		"Xen free MiB: $(xtool xl info 2>/dev/null | awk '/^free_memory/ {print $3}')"
	dev=$(loop_disk /tmp/dd.img 16) || fail "losetup"
	# A live view for the serial log (--keep): the domains every 15 s,
	# the lines of e2e-dd and the guest (their kernels' messages left out:
	# the serial line is slow), kernel errors in dom0.  A domU's console
	# reaches its log file late, never out of its own order: a check on
	# what a tapdisk logged asks e2e-dd (restart) or waits.
	echo 4 >/proc/sys/kernel/printk
	(while :; do
		log "domains: $(xtool xl list 2>/dev/null | awk 'NR > 1 {printf "%s(%s) %s %ss; ", $1, $2, $5, $6}')"
		sleep 15
	done) &
	mon=$!
	trap 'kill $mon $tails 2>/dev/null; echo 1 >/proc/sys/kernel/printk; xl destroy e2e-ddguest >/dev/null 2>&1; xl destroy e2e-dd >/dev/null 2>&1; losetup -d $dev' EXIT
	printf '%s\n' 'name="e2e-dd"' 'type="pv"' 'kernel="/boot/vmlinuz"' \
		'ramdisk="/boot/dd.cpio.gz"' 'extra="console=hvc0"' \
		'memory=256' 'vcpus=1' 'driver_domain=1' \
		"disk=['format=raw, vdev=xvda, access=rw, target=$dev']" \
		'on_poweroff="destroy"' 'on_crash="destroy"' >/tmp/dd.cfg
	# Its own name: xenconsoled appends to a log per name, and
	# tapdisk-xen-domu's guest wrote in e2e-domu's.
	sed -e '/^disk=/d' -e '/^extra=/d' -e '/^name=/d' /etc/domu.cfg >/tmp/guest.cfg
	rm -f "$con" "$xllog"
	printf '%s\n' 'name="e2e-ddguest"' 'extra="console=hvc0 e2e_reboot"' 'on_reboot="restart"' \
		"disk=['backend=e2e-dd, backendtype=qdisk, vdev=xvda, target=tapstripe:dd-disk']" \
		>>/tmp/guest.cfg
	xtool xl create /tmp/dd.cfg >/tmp/xl-create-dd.log 2>&1 || {
		sed 's/^/E2E-LOG   xl: /' /tmp/xl-create-dd.log | tail -8
		dd_diagnose
		fail "xl create of the driver domain: $(tail -1 /tmp/xl-create-dd.log)"
	}
	ddid=$(xtool xl domid e2e-dd) || fail "no domid for the driver domain"
	tail -F "$ddcon" 2>/dev/null | sed -n 's/^\(DD .*\)/E2E-LOG   live dd: \1/p' &
	tails=$!
	root=/local/domain/$ddid/backend/qdisk
	ask=/local/domain/$ddid/data/e2e-restart
	log "driver domain $ddid created"
	wait_for 150 grep -aq 'DD .*ready: tapstripe-xenwatch' "$ddcon" || {
		dd_diagnose
		fail "the driver domain has no tapstripe-xenwatch after 150 s"
	}
	grep -a 'DD \[' "$ddcon" | sed 's/^/E2E-LOG   dd: /'
	xtool xl create /tmp/guest.cfg >/tmp/xl-create.log 2>&1 || {
		sed 's/^/E2E-LOG   xl: /' /tmp/xl-create.log | tail -8
		dd_diagnose
		fail "xl create of the guest: $(tail -1 /tmp/xl-create.log)"
	}
	gid=$(xtool xl domid e2e-ddguest) || fail "no domid for the guest"
	tail -F "$con" 2>/dev/null | sed -n 's/^\(DOMU .*\)/E2E-LOG   live guest: \1/p' &
	tails="$tails $!"
	be=$root/$gid/51712
	log "guest $gid created; its disk: $be"
	# Boot 1: the pattern, the mark, the reboot.
	wait_for 150 grep -aq 'DOMU .*\(rebooting\|done\)' "$con" || {
		dd_diagnose
		fail "the guest's first boot did not reboot within 150 s"
	}
	p=$(grep -a -o 'md5 pattern=[0-9a-f]*' "$con" | tail -1 | cut -d= -f2)
	[ -n "$p" ] || {
		dd_diagnose
		fail "the guest wrote nothing on its first boot"
	}
	grep -aq "md5 pattern=$p readback=$p" "$con" ||
		fail "the guest did not read back its pattern on its first boot"
	grep -aq 'DOMU .*rebooting' "$con" ||
		fail "the guest did not reboot: $(grep -a DOMU "$con" | tail -1)"
	log "guest $gid wrote its pattern and rebooted"
	# Boot 2: a new domain of the same name, the same disk.
	wait_for 180 grep -aq 'DOMU .*after reboot: md5' "$con" || {
		dd_diagnose
		fail "the rebooted guest did not check its disk within 180 s"
	}
	gid2=$(xtool xl domid e2e-ddguest) || fail "no domid for the rebooted guest"
	[ "$gid2" != "$gid" ] || fail "the guest kept domid $gid: not restarted by xl?"
	be2=$root/$gid2/51712
	log "guest restarted as $gid2; its disk: $be2"
	e=$(grep -a -o 'after reboot: md5 expected=[0-9a-f]*' "$con" | tail -1 | cut -d= -f2)
	r=$(grep -a -o 'after reboot: md5 expected=[0-9a-f]* readback=[0-9a-f]*' "$con" |
		tail -1 | sed 's/.*readback=//')
	[ "$e" = "$p" ] || fail "the rebooted guest's mark names $e, not the pattern $p"
	[ "$r" = "$p" ] || fail "after the reboot the guest read $r, not its pattern $p"
	wait_for 15 xs_gone "$be" || {
		dd_diagnose
		fail "$be (the first boot's disk) is still there after the reboot"
	}
	# The guest writes its second pattern; e2e-dd restarts its tapdisk.
	xtool xenstore-write "$ask" "$gid2" || fail "cannot write $ask"
	wait_for 90 sh -c "xenstore-read $ask 2>/dev/null | grep -q '^done\|^failed'" || {
		dd_diagnose
		fail "the driver domain did not restart its tapdisk within 90 s"
	}
	a=$(xtool xenstore-read "$ask")
	[ "${a%% *}" = done ] || {
		dd_diagnose
		fail "tapdisk restart in the driver domain: $a"
	}
	log "driver domain: tapdisk restarted under guest $gid2 ($a)"
	wait_for 120 grep -aq 'DOMU .*second pattern: md5' "$con" || {
		dd_diagnose
		fail "the guest did not finish its writes across the tapdisk restart"
	}
	! grep -aq 'DOMU .*failed' "$con" || fail "guest: $(grep -a 'DOMU .*failed' "$con" | tail -1)"
	p2=$(grep -a -o 'second pattern: md5 pattern=[0-9a-f]*' "$con" | tail -1 | sed 's/.*=//')
	grep -aq "second pattern: md5 pattern=$p2 readback=$p2" "$con" ||
		fail "the guest read back another second pattern than it wrote"
	# The write issued while no tapdisk ran waited for the new one.
	slow=$(grep -a 'DOMU .*chunk [0-9]* written, started' "$con" | tr -d '[]s,' |
		awk '{d = $2 - $NF; if (d > m) m = d} END {printf "%.1f", m}')
	awk -v s="$slow" 'BEGIN {exit !(s >= 2)}' ||
		fail "no guest write waited across the restart (slowest ${slow}s): it missed the writer"
	# e2e-dd read these in the tapdisks' logs (answer "done OLD NEW ...").
	[[ " $a " == *" handed-over "* ]] || fail "the old tapdisk did not log that it handed $be2 over: $a"
	[[ " $a " == *" resumed "* ]] || fail "the new tapdisk did not log that it resumed the ring of guest $gid2: $a"
	# Destroyed while its ring is connected: no frontend to close it.
	stops=$(grep -ac 'DD xenwatch:.*dd-disk: no device left: stopped its tapdisk' "$ddcon")
	xtool xl destroy e2e-ddguest >/tmp/xl-destroy.log 2>&1 ||
		fail "xl destroy of the guest: $(tail -1 /tmp/xl-destroy.log)"
	wait_for 60 domu_gone "$gid2" || fail "guest $gid2 still there 60 s after xl destroy"
	log "guest $gid2 destroyed"
	wait_for 15 xs_gone "$be2" || {
		dd_diagnose
		fail "$be2 is still there after the guest was destroyed"
	}
	grep -a 'DD tapdisk:' "$ddcon" | grep -E 'serving|connected|closed|removing|err' |
		sed 's/^/E2E-LOG   dd: /'
	grep -a 'DD xenwatch:' "$ddcon" | sed 's/^/E2E-LOG   dd: /'
	# The watcher stops the tapdisk it started once the last device went.
	wait_for 60 sh -c "[ \$(grep -ac 'DD xenwatch:.*dd-disk: no device left: stopped its tapdisk' $ddcon) -gt $stops ]" || {
		dd_diagnose
		fail "tapstripe-xenwatch did not stop dd-disk's tapdisk after the guest went"
	}
	grep -aq 'DD xenwatch:.*dd-disk: started tapdisk' "$ddcon" ||
		fail "tapstripe-xenwatch did not say it started dd-disk's tapdisk"
	grep -aq 'DD xenwatch:.*handed the released .* to tapdisk' "$ddcon" ||
		fail "tapstripe-xenwatch did not hand the released device to the new tapdisk"
	# The first tapdisk's log, as e2e-dd's console carried it (the second
	# one's removal of $be2 is seen in xenstore, above).
	for b in "$be" "$be2"; do
		grep -aq "DD tapdisk:.*$b.*params names this tapdisk" "$ddcon" ||
			fail "the tapdisk in the driver domain did not take $b"
	done
	grep -aq "DD tapdisk:.*$be: closed; removing it" "$ddcon" ||
		fail "the tapdisk in the driver domain did not remove $be"
	for b in "$gid" "$gid2"; do
		grep -aq "DD tapdisk:.*/local/domain/$b/device/vbd/51712: connected, ring order" "$ddcon" ||
			fail "no ring of guest $b connected in the driver domain"
	done
	# No device left behind in the driver domain's tree.
	b=$(xtool xenstore-ls -f "$root" 2>/dev/null | grep -c '/51712/state ')
	[ "$b" = 0 ] || fail "$b qdisk devices left under $root"
	! grep -aq 'timed out' "$xllog" 2>/dev/null ||
		fail "xl: $(grep -a 'timed out' "$xllog" | tail -1)"
	! grep -aq 'DD tapdisk:.* err ' "$ddcon" ||
		fail "tapdisk logged errors: $(grep -a 'DD tapdisk:.* err ' "$ddcon" | tail -1)"
	xtool xl destroy e2e-dd || fail "xl destroy of the driver domain"
	b=$(head -c 4194304 /tmp/dd.img | md5sum | cut -c1-32)
	[ "$p" = "$b" ] || fail "dom0's backing file lacks the guest's pattern"
	b=$(tail -c +$((8 * MiB + 1)) /tmp/dd.img | head -c $((4 * MiB)) | md5sum | cut -c1-32)
	[ "$p2" = "$b" ] || fail "dom0's backing file lacks the guest's second pattern"
	dd_reboot
	trap 'losetup -d $dev' EXIT
	detail "driver domain $ddid: tapstripe-xenwatch started dd-disk's tapdisk for guest $gid's xl disk (backendtype=qdisk, target=tapstripe:dd-disk): 4 MiB written and checked; guest rebooted as $gid2 (old device removed, new one claimed, pattern read back); tapdisk released and destroyed under it, the watcher started the next and handed the disk over (a write waited ${slow} s, 4 MiB more checked); guest destroyed: no backend node left, the watcher stopped the tapdisk; both patterns in dom0's backing file; driver domain made again as $ddid2 with the device of guest $gid3 before its watcher ran: the watcher's first scan started the tapdisk and the guest read its pattern back"
}

# The driver domain's reboot (part of tapdisk-xen-driver-domain, sharing
# its variables): e2e-dd made again with the same disk and e2e_watch_wait,
# so that its watcher starts only when dom0 says; the guest made again
# with plain xl create (a running frontend cannot follow a backend domain
# that changed its domid), whose disk's nodes xl writes in the new
# driver domain's tree before the watcher runs; then the watcher starts:
# its first scan finds the device and starts the tapdisk, and the guest
# (its mark on the disk) reads back the pattern of its first boot.
dd_reboot() {
	sed 's/^extra=.*/extra="console=hvc0 e2e_watch_wait"/' /tmp/dd.cfg >/tmp/dd2.cfg
	xtool xl create /tmp/dd2.cfg >/tmp/xl-create-dd2.log 2>&1 || {
		dd_diagnose
		fail "xl create of the driver domain again: $(tail -1 /tmp/xl-create-dd2.log)"
	}
	ddid2=$(xtool xl domid e2e-dd) || fail "no domid for the new driver domain"
	root2=/local/domain/$ddid2/backend/qdisk
	log "driver domain made again as $ddid2"
	wait_for 150 grep -aq "DD .*waiting for /local/domain/$ddid2/data/e2e-watch" "$ddcon" || {
		dd_diagnose
		fail "the new driver domain did not come up within 150 s"
	}
	n0=$(grep -ac 'DOMU .*after reboot: md5' "$con")
	xtool xl create /tmp/guest.cfg >/tmp/xl-create3.log 2>&1 || {
		sed 's/^/E2E-LOG   xl: /' /tmp/xl-create3.log | tail -8
		dd_diagnose
		fail "xl create of the guest on the new driver domain: $(tail -1 /tmp/xl-create3.log)"
	}
	gid3=$(xtool xl domid e2e-ddguest) || fail "no domid for the guest made again"
	be3=$root2/$gid3/51712
	xtool xenstore-exists "$be3/params" || fail "xl wrote no $be3"
	log "guest made again as $gid3; its disk $be3 waits; starting the watcher"
	xtool xenstore-write "/local/domain/$ddid2/data/e2e-watch" go ||
		fail "cannot write data/e2e-watch"
	wait_for 180 sh -c "[ \$(grep -ac 'DOMU .*after reboot: md5' $con) -gt $n0 ]" || {
		dd_diagnose
		fail "the guest on the new driver domain did not read its disk within 180 s"
	}
	r3=$(grep -a -o 'after reboot: md5 expected=[0-9a-f]* readback=[0-9a-f]*' "$con" |
		tail -1 | sed 's/.*readback=//')
	[ "$r3" = "$p" ] || fail "after the driver domain's reboot the guest read $r3, not its pattern $p"
	grep -aq 'DD .*backend/qdisk before the watcher: 1 device' "$ddcon" ||
		fail "the guest's device was not there before the watcher: $(grep -a 'before the watcher' "$ddcon" | tail -1)"
	grep -aq "DD tapdisk:.*$be3.*params names this tapdisk" "$ddcon" ||
		fail "the tapdisk in the new driver domain did not take $be3"
	log "guest $gid3 read its pattern back through driver domain $ddid2"
	xtool xl destroy e2e-ddguest >/dev/null 2>&1 || fail "xl destroy of guest $gid3"
	wait_for 60 domu_gone "$gid3" || fail "guest $gid3 still there 60 s after xl destroy"
	wait_for 15 xs_gone "$be3" || {
		dd_diagnose
		fail "$be3 is still there after the guest was destroyed"
	}
	xtool xl destroy e2e-dd || fail "xl destroy of the new driver domain"
}

# --- dom0: a guest made with plain xl create boots from a tapstripe disk --------
# xl 4.17 gives a backendtype=qdisk disk served by dom0 to a device model
# (libxl__need_xenpv_qemu): without one xl create fails ("device model
# /usr/libexec/xen-qemu-system-i386 is not executable"; this dom0 has no
# QEMU).  The guest's config names tapstripe-xenwatch, linked as
# tapstripe-xenpv-dm, as its device_model_override: it answers libxl as
# the device model would and serves nothing; tapstripe-xenwatch, running
# in dom0 with the disk d0disk in its registry, starts the tapdisk that
# serves the disk.  The guest's initramfs mounts xvda (an ext2 image
# made on the host, mounted with Debian's ext4 modules) and switch_roots
# into the /init there, which prints the image's mark and powers off;
# then the watcher stops the tapdisk.
case_tapstripe-xenwatch-dom0() {
	local reg=/tmp/xw-reg xwlog=/tmp/xw-dom0.log mark got
	local con=/var/log/xen/console/guest-e2e-xw0.log dm=/usr/libexec/tapstripe/tapstripe-xenpv-dm
	[ -f /etc/domu.cfg ] || skip "no guest in this initramfs"
	[ -f /boot/xw-root.img ] || skip "no root file system image (mke2fs on the host)"
	cp /boot/xw-root.img /tmp/xw0.img
	dev=$(losetup -f --show /tmp/xw0.img) || fail "losetup"
	mkdir -p $reg
	echo "CHAIN=aio:$dev" >$reg/d0disk.conf
	echo "OPTIONS=--log-file /tmp/td-d0disk.log" >>$reg/d0disk.conf
	tapstripe-xenwatch -f --start-with spawn --disk-dir $reg --stop-delay 3 \
		--log-file $xwlog 2>>$xwlog &
	# Globals: the EXIT trap runs after the function's locals are gone.
	XW0_PID=$!
	trap 'kill $XW0_PID 2>/dev/null; xl destroy e2e-xw0 >/dev/null 2>&1; sleep 1; losetup -d $dev' EXIT
	sed -e '/^disk=/d' -e '/^name=/d' -e '/^extra=/d' /etc/domu.cfg >/tmp/xw0.cfg
	printf '%s\n' 'name="e2e-xw0"' 'extra="console=hvc0 e2e_rootdisk"' \
		"device_model_override=\"$dm\"" \
		"disk=['backendtype=qdisk, vdev=xvda, target=tapstripe:d0disk']" >>/tmp/xw0.cfg
	rm -f "$con"
	xtool xl create /tmp/xw0.cfg >/tmp/xl-xw0.log 2>&1 || {
		sed 's/^/E2E-LOG   xl: /' /tmp/xl-xw0.log | tail -12
		sed 's/^/E2E-LOG   xenwatch: /' $xwlog
		tail -5 /var/log/xen/qemu-dm-e2e-xw0.log 2>/dev/null | sed 's/^/E2E-LOG   dm: /'
		fail "xl create of a guest with a dom0 qdisk disk: $(tail -1 /tmp/xl-xw0.log)"
	}
	log "guest e2e-xw0 created with plain xl create"
	wait_for 120 grep -aqE 'DOMU-ROOT|DOMU .*(cannot mount|done)' "$con"
	grep -aq 'DOMU-ROOT' "$con" || {
		grep -a 'DOMU' "$con" | tail -5 | sed 's/^/E2E-LOG   guest: /'
		sed 's/^/E2E-LOG   xenwatch: /' $xwlog
		tail -5 /tmp/td-d0disk.log 2>/dev/null | sed 's/^/E2E-LOG   tapdisk: /'
		fail "the guest did not run the /init of its tapstripe disk within 120 s"
	}
	got=$(grep -a 'DOMU-ROOT' "$con" | tail -1)
	log "guest: $got"
	grep -a 'DOMU' "$con" | sed 's/^/E2E-LOG   guest: /'
	sed 's/^/E2E-LOG   dm: /' /var/log/xen/qemu-dm-e2e-xw0.log 2>/dev/null | tail -8
	wait_for 60 sh -c '! xl domid e2e-xw0 >/dev/null 2>&1' || fail "the guest did not power off"
	wait_for 30 grep -q 'd0disk: no device left: stopped its tapdisk' $xwlog || {
		sed 's/^/E2E-LOG   xenwatch: /' $xwlog
		fail "tapstripe-xenwatch did not stop d0disk's tapdisk after the guest went"
	}
	sed 's/^/E2E-LOG   xenwatch: /' $xwlog
	grep -q 'd0disk: started tapdisk' $xwlog || fail "tapstripe-xenwatch did not start the tapdisk"
	grep -q 'params names this tapdisk' /tmp/td-d0disk.log ||
		fail "the tapdisk did not take the guest's qdisk device"
	[[ "$got" == *"$(cat /boot/xw-root.mark)"* ]] ||
		fail "the guest's /init printed another mark: $got (want $(cat /boot/xw-root.mark))"
	[[ "$got" == *"/dev/xvda / ext"* ]] || fail "the guest's root is not xvda: $got"
	b=$(xtool xenstore-ls -f /local/domain/0/backend/qdisk 2>/dev/null | grep -c '/state ')
	[ "$b" = 0 ] || fail "$b qdisk devices left in dom0"
	kill "$XW0_PID"
	wait "$XW0_PID"
	losetup -d "$dev"
	trap - EXIT
	detail "plain xl create of a PV guest with disk=['backendtype=qdisk, vdev=xvda, target=tapstripe:d0disk'] in dom0 (device_model_override=tapstripe-xenpv-dm): tapstripe-xenwatch started the tapdisk, the guest switch_rooted into its tapstripe disk (ext2 root, $got) and ran its /init; the tapdisk stopped after the guest went"
}

# --- a guest of 2 vCPUs on 2 rings (issue #22) ------------------------------------
# A PV guest with vcpus=2 (domu-init.sh, e2e_mq): its blkfront opens one
# ring per vCPU, as many as tapdisk offers (multi-queue-max-queues) and
# its max_queues allows, so 2 here.  Seen from tapdisk's side: the
# frontend's multi-queue-num-queues and queue-0/queue-1 keys read while
# it is connected, tapdisk's "connected ... 2 ring(s)" log line, its
# counters (the guest's writes and flushes).  The guest writes 8 MiB
# from both vCPUs at once (a writer pinned to each: blk-mq sends CPU n's
# requests to ring n; each ends with an fsync, a flush on its ring),
# reads them back the same way, prints how many interrupts each ring's
# event channel brought (tapdisk's responses on that ring) and the
# checksums; then it writes on both rings until dom0 destroys it, and
# tapdisk must let both rings go and keep answering.  dom0 finds the
# pattern in the backing file.
mq_keys() {
	local fe=$1 n
	n=$(xtool xenstore-read "$fe/multi-queue-num-queues" 2>/dev/null) || return 1
	echo "multi-queue-num-queues=$n;" \
		"queue-0: $(xtool xenstore-list "$fe/queue-0" 2>/dev/null | tr '\n' ' ' | sed 's/ $//');" \
		"queue-1: $(xtool xenstore-list "$fe/queue-1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')" >/tmp/mq-keys
}

td_writes_above() { [ "$(td_requests "$id" write)" -gt "$1" ]; }

# mq_destroy DOMID: xl destroy of the guest while it writes on both
# rings; tapdisk must let both go ("disconnected") and keep answering.
# Sets MQ_DESTROYED.
mq_destroy() {
	local w0 w1
	w0=$(td_requests "$id" write)
	wait_for 30 td_writes_above "$w0" ||
		fail "no write reached tapdisk in 30 s after the guest's last phase began"
	log "writes arrive on the guest's last phase; xl destroy"
	xtool xl destroy e2e-mq >/tmp/xl-destroy.log 2>&1 ||
		fail "xl destroy: $(tail -1 /tmp/xl-destroy.log)"
	wait_for 60 domu_gone "$1" || fail "the guest is still there 60 s after xl destroy"
	wait_for 30 grep -q ': disconnected' "$TD_LOG" ||
		fail "tapdisk did not disconnect the rings of the destroyed guest"
	w1=$(td_requests "$id" write) || fail "tapdisk does not answer after the guest's destruction"
	MQ_DESTROYED="$((w1 - w0)) writes after the last check, rings disconnected, $(grep -c 'grant copy of' "$TD_LOG") failed grant copies"
	log "destroyed: $MQ_DESTROYED"
}

case_tapdisk-xen-multiqueue() {
	local domid w con=/var/log/xen/console/guest-e2e-mq.log p b fe be keys line irqs n f errs order rings_up
	[ -f /etc/domu-mq.cfg ] || skip "no guest in this initramfs"
	dev=$(loop_disk /tmp/mq.img 16) || fail "losetup"
	id=$(tap-ctl create -a "aio:$dev" --name e2e-mq \
		--log-file /tmp/td-e2e-mq.log 2>/tmp/tap-ctl.log) ||
		fail "tap-ctl create: $(tail -1 /tmp/tap-ctl.log)"
	TD_LOG=/tmp/td-e2e-mq.log
	trap 'xl destroy e2e-mq >/dev/null 2>&1; tap-ctl destroy -i $id >/dev/null 2>&1; losetup -d $dev' EXIT
	rm -f "$con" /tmp/mq-keys
	xtool xl create -p /etc/domu-mq.cfg >/tmp/xl-create.log 2>&1 ||
		fail "xl create: $(tail -1 /tmp/xl-create.log)"
	domid=$(xtool xl domid e2e-mq) || fail "no domid for the guest"
	tap-ctl attach -i "$id" --domid "$domid" --vdev xvda 2>/tmp/tap-ctl.log ||
		fail "tap-ctl attach: $(tail -1 /tmp/tap-ctl.log)"
	fe=/local/domain/$domid/device/vbd/51712
	be=/local/domain/0/backend/vbd3/$domid/51712
	xtool xl unpause e2e-mq || fail "xl unpause"
	# The frontend's keys while it is connected (the guest's directory
	# goes with it).
	wait_for 120 sh -c "[ \"\$(xenstore-read $be/state 2>/dev/null)\" = 4 ]" &&
		mq_keys "$fe"
	wait_for 180 grep -aq 'mq: writing on both rings until destroyed' "$con" || {
		tail -5 "$con" | sed 's/^/E2E-LOG   /'
		fail "the guest did not reach its last phase in 180 s"
	}
	w=$(td_requests "$id" write)
	f=$(td_requests "$id" flush)
	mq_rings_check connected
	rings_up=$MQ_RINGS
	log "requests per ring, connected: $rings_up"
	mq_destroy "$domid"
	mq_rings_check closed
	log "requests per ring, closed: $MQ_RINGS"
	grep -a 'DOMU' "$con" | sed 's/^/E2E-LOG   guest: /'
	keys=$(cat /tmp/mq-keys 2>/dev/null)
	log "frontend keys: ${keys:-not read while connected}"
	line=$(grep -a 'connected, ring order' "$TD_LOG" | head -1)
	log "tapdisk: $line"
	p=$(grep -a -o 'md5 pattern=[0-9a-f]*' "$con" | tail -1 | cut -d= -f2)
	[ -n "$p" ] || {
		tail -15 "$con" 2>&1 | sed 's/^/E2E-LOG   console: /'
		fail "the guest wrote nothing (its console is above)"
	}
	grep -aq 'DOMU .*mq: 2 CPUs' "$con" || fail "the guest does not have 2 vCPUs"
	grep -aq 'DOMU .*failed' "$con" && fail "a write or read failed in the guest: $(grep -a 'DOMU .*failed' "$con" | head -1)"
	grep -aq "md5 pattern=$p readback=$p" "$con" ||
		fail "the guest did not read back its pattern"
	b=$(head -c $((8 * MiB)) /tmp/mq.img | md5sum | cut -c1-32)
	[ "$p" = "$b" ] || fail "the backing file lacks the guest's pattern"
	[[ "$line" == *"; 2 ring(s)" ]] ||
		fail "tapdisk connected ${line##*; } (want 2 rings): $line"
	order=$(grep -o 'e2e_ring_order=[0-9]*' /etc/domu-mq.cfg | cut -d= -f2)
	[[ "$line" == *"ring order ${order:-0},"* ]] ||
		fail "tapdisk connected rings of another order (want ${order:-0}): $line"
	[[ "$keys" == "multi-queue-num-queues=2; queue-0: "*event-channel*"queue-1: "*event-channel* ]] ||
		fail "the frontend's keys while connected: ${keys:-not read}"
	grep -aqE 'hardware queues of xvda: 0 1 [^0-9]*$' "$con" ||
		fail "the guest's xvda does not have 2 hardware queues"
	# Both rings' event channels brought responses.
	irqs=$(grep -a -o 'mq: ring irq [0-9]*: [0-9]* interrupts' "$con" | awk '{print $5}' | tr '\n' ' ')
	irqs=${irqs% }
	[ "$(echo "$irqs" | wc -w)" = 2 ] || fail "the guest has $(echo "$irqs" | wc -w) blkif interrupts (want 2): $irqs"
	for n in $irqs; do
		[ "$n" -gt 0 ] || fail "a ring brought no interrupt: $irqs"
	done
	[ "${w:-0}" -ge 128 ] || fail "$w write requests reached tapdisk; 8 MiB in 64 KiB writes is 128"
	[ "${f:-0}" -ge 2 ] || fail "$f flushes reached tapdisk; each writer's fsync makes one"
	tap-ctl detach -i "$id" --domid "$domid" --vdev xvda 2>/tmp/tap-ctl.log ||
		fail "tap-ctl detach after the guest died: $(tail -1 /tmp/tap-ctl.log)"
	tap-ctl destroy -i "$id" >/dev/null || fail "tap-ctl destroy"
	trap 'losetup -d $dev' EXIT
	# The guest's grants go with it: a copy under way may fail.
	errs=$(grep ' err ' "$TD_LOG" | grep -v 'grant copy of')
	[ -z "$errs" ] || fail "tapdisk logged errors: $(echo "$errs" | head -1)"
	detail "guest $domid with 2 vCPUs: tapdisk connected 2 rings of order ${order:-0} ($keys), interrupts per ring: $irqs; requests per ring (tap-ctl stats --json xen.queues) $rings_up connected, $MQ_RINGS once closed; 8 MiB written from both vCPUs at once (tapdisk had $w writes and $f flushes by then), read back on both and found in the backing file; destroyed while writing on both rings: $MQ_DESTROYED"
}
