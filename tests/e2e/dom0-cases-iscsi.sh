#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# dom0-cases-iscsi.sh - kernel iSCSI sessions (open-iscsi) under a striped
# disk (issue #6, item 4).  Sourced by dom0-cases.sh as /e2e/cases-iscsi.sh;
# lib.sh's e2e_rootfs_iscsi puts what it needs in the initramfs: Debian's
# iscsi_tcp and SCSI disk modules, the host's open-iscsi (iscsiadm,
# iscsid) and tgt (tgtd, tgtadm), this build's stripe-master and
# stripe-ctl.  The development machines have no iscsi_tcp module; this
# dom0's Debian 6.1 kernel has.
#
# stripe-kernel-iscsi:
#   - two tgtd in dom0 (portals 127.0.0.1:3260 and 127.0.0.2:3260), each
#     exporting a 64 MiB file, registered with a stripe-master; a disk of
#     16 MiB, one column, 64 KiB unit, 2 replicas (every extent on both);
#   - stripe-ctl session login MAP SERVER for the second server only:
#     iscsiadm logs a kernel session in, stripe-ctl finds its sd device in
#     sysfs, checks it and writes it into the map's device key (the sd
#     node: dom0 has no udev); with the by-path link udev would make
#     added, a second login reuses the session and names the link;
#   - tapdisk serves stripe:MAP (server 1 through its own libiscsi session,
#     server 2 through the kernel's sd device, libaio O_DIRECT), attached
#     to dom0 as xvdc: 16 MiB of 1 MiB O_DIRECT writes read back, and found
#     byte for byte in both LUN files at every extent's place; the stripe
#     status shows the device up and written, and both servers registered
#     under this host's SCSI-3 key (the device through SG_IO; issue #18);
#   - server 1's target deleted: the 16 MiB read back through xvdc again
#     come from the kernel session's device alone;
#   - another host id takes the disk over with fencing (stripe-ctl vdisk
#     lease takeover --fence: server 2's LUN fenced): a write through xvdc
#     fails (tgtd's RESERVATION CONFLICT through the kernel session), the
#     device server shows fenced, none of its replicas marked stale;
#   - tapdisk destroyed (its final flush refused: destroy says EACCES, the
#     process ends), stripe-ctl session logout MAP: the device key is
#     gone from the map and no iSCSI session is left in sysfs.
# In the default list, after the Xen cases (26 s in a run of its own).
CASES="$CASES stripe-kernel-iscsi"
ISCSI_E2E_IQN=iqn.2026-11.org.tapstripe.e2e
ISCSI_E2E_MAP=/tmp/kd.map
ISCSI_E2E_EXTENT_MIB=4

# Undo everything the case started, whatever state it got to.
iscsi_e2e_undo() {
	local i
	[ -n "${ISCSI_TD_ID:-}" ] && {
		tap-ctl detach -i "$ISCSI_TD_ID" --domid 0 --vdev xvdc >/dev/null 2>&1
		tap-ctl destroy -i "$ISCSI_TD_ID" >/dev/null 2>&1
	}
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	[ -n "${ISCSID_PID:-}" ] && kill "$ISCSID_PID" 2>/dev/null
	for i in 1 2; do
		tgtadm -C "$i" --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1
		tgtadm -C "$i" --op delete --mode system >/dev/null 2>&1
	done
	[ -n "${MASTER_PID:-}" ] && kill "$MASTER_PID" 2>/dev/null
	[ -n "${ISCSI_BY_PATH:-}" ] && rm -f "$ISCSI_BY_PATH"
	rm -f /tmp/lun1.img /tmp/lun2.img /tmp/master.db* /tmp/replica /tmp/expect
}

# iscsi_e2e_targets: tgtd I on 127.0.0.I:3260, control port I, LUN 1 a
# 64 MiB file; registered with the master.
iscsi_e2e_targets() {
	local i
	for i in 1 2; do
		truncate -s 64M "/tmp/lun$i.img" 2>/dev/null ||
			dd if=/dev/zero of="/tmp/lun$i.img" bs=$MiB count=64 2>/dev/null
		setsid tgtd -f -C "$i" --iscsi "portal=127.0.0.$i:3260" >"/tmp/tgtd$i.log" 2>&1 &
		wait_for 20 tgtadm -C "$i" --op show --mode system >/dev/null 2>&1 ||
			fail "tgtd $i did not start: $(tail -2 "/tmp/tgtd$i.log")"
		tgtadm -C "$i" --lld iscsi --op new --mode target --tid 1 \
			-T "$ISCSI_E2E_IQN:srv$i" &&
			tgtadm -C "$i" --lld iscsi --op new --mode logicalunit --tid 1 \
				--lun 1 -b "/tmp/lun$i.img" &&
			tgtadm -C "$i" --lld iscsi --op bind --mode target --tid 1 -I ALL ||
			fail "tgtadm: cannot export /tmp/lun$i.img"
		stripe-ctl server add --portal "127.0.0.$i:3260" \
			--target "$ISCSI_E2E_IQN:srv$i" --lun 1 --size 64M \
			--address "127.0.0.$i" >/tmp/ctl.log 2>&1 ||
			fail "stripe-ctl server add $i: $(tail -1 /tmp/ctl.log)"
	done
}

# iscsi_e2e_check_replicas: every extent replica of the map holds its
# part of the pattern in the LUN file of its server.
iscsi_e2e_check_replicas() {
	local c j r srv lba target n=0 e=$((ISCSI_E2E_EXTENT_MIB * MiB))
	while read -r _ c j r _ srv _ lba _; do
		target=$(awk -v s="$srv" '$1 == "server" && $2 == s {
			for (i = 3; i < NF; i++) if ($i == "target") print $(i + 1) }' "$ISCSI_E2E_MAP")
		dd if="/tmp/lun${target##*srv}.img" of=/tmp/replica bs=$MiB \
			iflag=skip_bytes,count_bytes skip=$((lba * 512)) count=$e 2>/dev/null
		dd if=/tmp/pattern of=/tmp/expect bs=$MiB skip=$((j * ISCSI_E2E_EXTENT_MIB)) \
			count=$ISCSI_E2E_EXTENT_MIB 2>/dev/null
		cmp -s /tmp/replica /tmp/expect ||
			fail "extent $c $j replica $r (server $srv, $target, lba $lba) differs from the data written"
		n=$((n + 1))
	done < <(grep '^extent ' "$ISCSI_E2E_MAP")
	[ "$n" = 8 ] || fail "$n extent replicas in the map, 8 expected (4 extents x 2)"
}

case_stripe-kernel-iscsi() {
	local srv dev out status sessions p live
	for p in iscsiadm iscsid tgtd tgtadm stripe-ctl stripe-master; do
		command -v "$p" >/dev/null ||
			skip "no $p in this initramfs (tests/e2e/lib.sh e2e_rootfs_iscsi)"
	done
	trap iscsi_e2e_undo EXIT
	ip link set lo up
	# iscsi_tcp allocates a crc32c hash for every connection (digests or
	# not): without the algorithm its connections fail with ENOMEM.
	modprobe crc32c_generic && modprobe iscsi_tcp && modprobe sd_mod ||
		fail "modprobe crc32c_generic iscsi_tcp sd_mod failed"
	[ -e /sys/class/iscsi_transport/tcp ] || fail "no /sys/class/iscsi_transport/tcp after modprobe"

	setsid stripe-master --foreground --db /tmp/master.db --listen 127.0.0.1:7700 \
		--extent-size ${ISCSI_E2E_EXTENT_MIB}M >/tmp/master.log 2>&1 &
	MASTER_PID=$!
	wait_for 20 stripe-ctl --timeout 1 --retries 0 info >/dev/null 2>&1 ||
		fail "stripe-master does not answer: $(tail -2 /tmp/master.log)"
	iscsi_e2e_targets
	stripe-ctl vdisk create kd --size 16M --stripes 1 --stripe-unit 64K \
		--replicas 2 -o "$ISCSI_E2E_MAP" >/tmp/ctl.log 2>&1 ||
		fail "stripe-ctl vdisk create: $(tail -1 /tmp/ctl.log)"

	# open-iscsi's initiator daemon, as its systemd unit would start it.
	mkdir -p /etc/iscsi /run/lock/iscsi /var/lib/iscsi
	# iscsid serves only users it can name (peeruser_unix: getpwuid).
	grep -q '^root:' /etc/passwd 2>/dev/null ||
		echo 'root:x:0:0:root:/root:/bin/sh' >>/etc/passwd
	echo "InitiatorName=$ISCSI_E2E_IQN:dom0" >/etc/iscsi/initiatorname.iscsi
	: >/etc/iscsi/iscsid.conf
	# Its own session: a daemon of the case must not signal the runner's
	# process group.
	setsid iscsid -f -d 4 >/tmp/iscsid.log 2>&1 &
	ISCSID_PID=$!
	sleep 1
	kill -0 "$ISCSID_PID" 2>/dev/null || fail "iscsid died: $(tail -3 /tmp/iscsid.log)"

	# The second server only: one replica through each kind of session.
	srv=$(awk -v t="$ISCSI_E2E_IQN:srv2" '$1 == "server" {
		for (i = 3; i < NF; i++) if ($i == "target" && $(i + 1) == t) print $2 }' "$ISCSI_E2E_MAP")
	[ -n "$srv" ] || fail "no server with target $ISCSI_E2E_IQN:srv2 in the map"
	out=$(stripe-ctl --timeout 60 session login "$ISCSI_E2E_MAP" "$srv" 2>&1) || {
		tail -30 /tmp/iscsid.log | sed 's/^/E2E-LOG   iscsid: /'
		fail "stripe-ctl session login: $(echo "$out" | tr '\n' ' ')"
	}
	log "session login: $out"
	dev=$(awk -v s="$srv" '$1 == "server" && $2 == s {
		for (i = 3; i < NF; i++) if ($i == "device") print $(i + 1) }' "$ISCSI_E2E_MAP")
	[ -b "$dev" ] || fail "the map names '$dev' for server $srv: not a block device"
	sessions=$(ls -d /sys/class/iscsi_session/session* 2>/dev/null | wc -l)
	[ "$sessions" = 1 ] || fail "$sessions kernel iSCSI sessions, 1 expected"

	# dom0 has no udev: make the by-path link udev would, and log in
	# again: the session is reused and the map names the stable link.
	ISCSI_BY_PATH=/dev/disk/by-path/ip-127.0.0.2:3260-iscsi-$ISCSI_E2E_IQN:srv2-lun-1
	mkdir -p /dev/disk/by-path
	ln -sfn "../../${dev#/dev/}" "$ISCSI_BY_PATH"
	out=$(stripe-ctl session login "$ISCSI_E2E_MAP" "$srv" 2>&1) ||
		fail "second stripe-ctl session login: $(echo "$out" | tr '\n' ' ')"
	dev=$(awk -v s="$srv" '$1 == "server" && $2 == s {
		for (i = 3; i < NF; i++) if ($i == "device") print $(i + 1) }' "$ISCSI_E2E_MAP")
	[ "$dev" = "$ISCSI_BY_PATH" ] ||
		fail "after the second login the map names '$dev', not $ISCSI_BY_PATH"
	sessions=$(ls -d /sys/class/iscsi_session/session* 2>/dev/null | wc -l)
	[ "$sessions" = 1 ] || fail "$sessions sessions after the second login, 1 expected"
	stripe-ctl session list "$ISCSI_E2E_MAP" | sed 's/^/E2E-LOG   /'

	# tapdisk takes the disk's lease from the master above (issue #18); the
	# initramfs dom0 may have no host name ("(none)" is no host id), so it
	# gets one (tap-ctl create passes its environment on to tapdisk).
	ISCSI_TD_ID=$(TAPSTRIPE_HOST_ID=e2e-dom0 tap-ctl create -a "stripe:$ISCSI_E2E_MAP" \
		--name e2e-kd --log-file /tmp/td-e2e-kd.log 2>/tmp/tap-ctl.log) ||
		fail "tap-ctl create stripe: $(tail -1 /tmp/tap-ctl.log)"
	TD_LOG=/tmp/td-e2e-kd.log
	tap-ctl attach -i "$ISCSI_TD_ID" --domid 0 --vdev xvdc 2>/tmp/tap-ctl.log ||
		fail "tap-ctl attach: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 60 test -b /dev/xvdc || fail "no /dev/xvdc after 60 s"
	write_read /dev/xvdc
	status=$(tap-ctl driver -i "$ISCSI_TD_ID" stripe status 2>&1)
	echo "$status" | sed 's/^/E2E-LOG   /'
	echo "$status" | grep -q "(device $dev): up," ||
		fail "tapdisk does not serve server $srv through $dev"
	echo "$status" | grep "(device $dev)" | grep -q " 0 writes" &&
		fail "no write went to $dev"
	echo "$status" | grep -q "(iscsi): up," || fail "the libiscsi server is not up"
	# issue #18: both sessions admitted under this host's SCSI-3 key, the
	# kernel session's through SG_IO on its sd device
	echo "$status" | grep "(device $dev)" | grep -q "fence registered" ||
		fail "the kernel session's server is not registered (SG_IO persistent reservations)"
	echo "$status" | grep "(iscsi)" | grep -q "fence registered" ||
		fail "the libiscsi server is not registered"
	iscsi_e2e_check_replicas

	# Server 1's target gone: the reads come from the kernel session.
	tgtadm -C 1 --lld iscsi --op delete --mode target --tid 1 --force ||
		fail "tgtadm: cannot delete target 1"
	dd if=/dev/xvdc of=/tmp/readback bs=$MiB count=$PATTERN_MIB iflag=direct \
		2>/tmp/dd-read.log || fail "read with server 1 gone: $(tail -1 /tmp/dd-read.log)"
	cmp -s /tmp/pattern /tmp/readback || fail "read back with server 1 gone differs"
	status=$(tap-ctl driver -i "$ISCSI_TD_ID" stripe status 2>&1)
	echo "$status" | sed 's/^/E2E-LOG   /'
	live=$(echo "$status" | grep "(device $dev)" | sed -n 's/.* \([0-9]*\) live replicas.*/\1/p')

	# issue #18: another host takes the disk over with fencing (server 1's
	# target is gone, so only server 2's LUN is fenced and stripe-ctl says
	# the other is not: exit 1).  This host's writes through its kernel
	# session are then refused by tgtd (RESERVATION CONFLICT, EBADE from
	# the block layer, EACCES in tapdisk), its replicas there not marked
	# stale, and the fenced tapdisk still stops cleanly.
	out=$(stripe-ctl --host-id e2e-other --timeout 5 vdisk lease takeover kd --fence 2>&1)
	log "takeover --fence: $(echo "$out" | tr '\n' ' ' | cut -c1-400)"
	dd if=/tmp/pattern of=/dev/xvdc bs=64k count=1 oflag=direct 2>/tmp/dd-fenced.log &&
		fail "a write of the fenced host succeeded"
	status=$(tap-ctl driver -i "$ISCSI_TD_ID" stripe status 2>&1)
	echo "$status" | sed 's/^/E2E-LOG   /'
	echo "$status" | grep "(device $dev)" | grep -q "fence fenced" ||
		fail "the kernel session's server is not fenced after the takeover"
	echo "$status" | grep "(device $dev)" | grep -q " $live live replicas" ||
		fail "the fenced server's replicas were marked stale ($live live before)"

	tap-ctl detach -i "$ISCSI_TD_ID" --domid 0 --vdev xvdc 2>/tmp/tap-ctl.log ||
		fail "tap-ctl detach: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 30 test ! -b /dev/xvdc || fail "/dev/xvdc still there after detach"
	# fenced: its final flush cannot reach server 2, and destroy says so
	tap-ctl destroy -i "$ISCSI_TD_ID" >/tmp/destroy.log 2>&1 &&
		fail "tap-ctl destroy of the fenced tapdisk reported a good final flush"
	grep -q "final flush failed.*EACCES" /tmp/destroy.log ||
		fail "tap-ctl destroy: $(tail -1 /tmp/destroy.log)"
	wait_for 10 sh -c "! kill -0 $ISCSI_TD_ID 2>/dev/null" ||
		fail "the fenced tapdisk still runs after tap-ctl destroy"
	ISCSI_TD_ID=

	out=$(stripe-ctl session logout "$ISCSI_E2E_MAP" 2>&1) ||
		fail "stripe-ctl session logout: $out"
	log "session logout: $out"
	! grep -q " device " "$ISCSI_E2E_MAP" || fail "the map still names a device after logout"
	sessions=$(ls -d /sys/class/iscsi_session/session* 2>/dev/null | wc -l)
	[ "$sessions" = 0 ] || fail "$sessions kernel iSCSI sessions left after logout"
	detail "server $srv on its kernel session's device (${dev##*/}), the other on libiscsi, both registered (SG_IO, PR OUT): 16 MiB through xvdc found on both replicas; read from the device alone with the other target gone; fenced by another host's takeover: writes refused, nothing marked stale; logout clean"
}

# stripe-xen-grow (issue #21 item 1): a striped disk grown under a writing
# guest.  The two tgtd of iscsi_e2e_targets and a stripe-master; a disk of
# 16 MiB, 2 columns, 1 replica, served by tapdisk (its own libiscsi
# sessions) and attached to dom0 as xvdh; a writer loops 1 MiB O_DIRECT
# writes over the first 8 MiB while `stripe-ctl vdisk resize MAP --size
# 32M` grows the disk under the running tapdisk (the master hands out the
# new extents, the driver takes the grown map); dom0's blkfront must show
# 32 MiB in /sys/block/xvdh/size without a re-attach, the writer must not
# fail, and 8 MiB written beyond the old end must read back.
CASES="$CASES stripe-xen-grow"
GROW_E2E_MAP=/tmp/gd.map

grow_e2e_undo() {
	touch /tmp/stop-writer
	[ -n "${GROW_WRITER:-}" ] && kill "$GROW_WRITER" 2>/dev/null
	[ -n "${GROW_TD_ID:-}" ] && {
		tap-ctl detach -i "$GROW_TD_ID" --domid 0 --vdev xvdh >/dev/null 2>&1
		tap-ctl destroy -i "$GROW_TD_ID" >/dev/null 2>&1
	}
	iscsi_e2e_undo
	rm -f "$GROW_E2E_MAP" /tmp/gd-readback
}

case_stripe-xen-grow() {
	local p s0 s1 out
	for p in tgtd tgtadm stripe-ctl stripe-master; do
		command -v "$p" >/dev/null ||
			skip "no $p in this initramfs (tests/e2e/lib.sh e2e_rootfs_iscsi)"
	done
	trap grow_e2e_undo EXIT
	ip link set lo up
	setsid stripe-master --foreground --db /tmp/master.db --listen 127.0.0.1:7700 \
		--extent-size ${ISCSI_E2E_EXTENT_MIB}M >/tmp/master.log 2>&1 &
	MASTER_PID=$!
	wait_for 20 stripe-ctl --timeout 1 --retries 0 info >/dev/null 2>&1 ||
		fail "stripe-master does not answer: $(tail -2 /tmp/master.log)"
	iscsi_e2e_targets
	stripe-ctl vdisk create gd --size 16M --stripes 2 --stripe-unit 64K \
		--replicas 1 -o "$GROW_E2E_MAP" >/tmp/ctl.log 2>&1 ||
		fail "stripe-ctl vdisk create: $(tail -1 /tmp/ctl.log)"
	GROW_TD_ID=$(TAPSTRIPE_HOST_ID=e2e-dom0 tap-ctl create -a "stripe:$GROW_E2E_MAP" \
		--name e2e-gd --log-file /tmp/td-e2e-gd.log 2>/tmp/tap-ctl.log) ||
		fail "tap-ctl create stripe: $(tail -1 /tmp/tap-ctl.log)"
	TD_LOG=/tmp/td-e2e-gd.log
	tap-ctl attach -i "$GROW_TD_ID" --domid 0 --vdev xvdh 2>/tmp/tap-ctl.log ||
		fail "tap-ctl attach: $(tail -1 /tmp/tap-ctl.log)"
	wait_for 60 test -b /dev/xvdh || fail "no /dev/xvdh after 60 s"
	s0=$(cat /sys/block/xvdh/size)
	[ "$s0" = $((16 * 2048)) ] || fail "xvdh has $s0 sectors, not 16 MiB"
	pattern
	rm -f /tmp/stop-writer /tmp/writer-failed /tmp/writer-pass
	(while [ ! -e /tmp/stop-writer ]; do
		dd if=/tmp/pattern of=/dev/xvdh bs=$MiB count=8 oflag=direct 2>/tmp/writer.log ||
			{ echo "write failed" >/tmp/writer-failed; break; }
		: >/tmp/writer-pass
	done) &
	GROW_WRITER=$!
	wait_for 60 test -e /tmp/writer-pass ||
		fail "the guest's first 8 MiB did not complete ($(cat /tmp/writer-failed /tmp/writer.log 2>/dev/null | tr '\n' ' '))"
	out=$(stripe-ctl --timeout 60 vdisk resize "$GROW_E2E_MAP" --size 32M 2>&1) ||
		fail "stripe-ctl vdisk resize under the writer: $(echo "$out" | tr '\n' ' ')"
	log "vdisk resize: $out"
	wait_for 30 eval '[ "$(cat /sys/block/xvdh/size)" = $((32 * 2048)) ]' ||
		fail "xvdh shows $(cat /sys/block/xvdh/size) sectors after the resize, not $((32 * 2048))"
	s1=$(cat /sys/block/xvdh/size)
	sleep 1
	touch /tmp/stop-writer
	wait "$GROW_WRITER"
	GROW_WRITER=
	[ -e /tmp/writer-failed ] && fail "a guest write failed across the grow: $(cat /tmp/writer.log)"
	dd if=/dev/xvdh of=/tmp/gd-readback bs=$MiB count=8 iflag=direct 2>/dev/null ||
		fail "read back of the first 8 MiB"
	head -c $((8 * MiB)) /tmp/pattern | cmp -s - /tmp/gd-readback ||
		fail "the first 8 MiB differ after the grow"
	dd if=/tmp/pattern of=/dev/xvdh bs=$MiB seek=20 count=8 oflag=direct 2>/tmp/dd.log ||
		fail "write beyond the old end: $(tail -1 /tmp/dd.log)"
	dd if=/dev/xvdh of=/tmp/gd-readback bs=$MiB skip=20 count=8 iflag=direct 2>/tmp/dd.log ||
		fail "read beyond the old end: $(tail -1 /tmp/dd.log)"
	head -c $((8 * MiB)) /tmp/pattern | cmp -s - /tmp/gd-readback ||
		fail "data beyond the old end read back differs"
	tap-ctl detach -i "$GROW_TD_ID" --domid 0 --vdev xvdh 2>/tmp/tap-ctl.log ||
		fail "tap-ctl detach: $(tail -1 /tmp/tap-ctl.log)"
	detail "striped disk (2 columns) grew from $s0 to $s1 sectors under a writing guest, no re-attach; 8 MiB before and 8 MiB beyond the old end checked"
}
