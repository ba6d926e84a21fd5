#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-session.sh - a replica served through a local block device (the
# mapping file's "device" key) and the stripe-ctl session commands, on
# this machine, which has no iscsi_tcp module.
#
# A disk of S=1, U=64 KiB, R=2 (16 MiB) on a lab of 2 tgtd servers.  What
# a kernel (open-iscsi) session would give, a block device holding server
# 2's LUN, is a loop device over server 2's LUN file here; its path goes
# into server 2's "device" key (the test rewrites the file and its
# checksum itself).  Then:
#   - tapdisk serves the disk: server 1 through libiscsi, server 2 through
#     the device (libaio, O_DIRECT); 16 MiB written through NBD land on both
#     replicas byte for byte, and tap-ctl shows the device's writes;
#   - with server 1 killed, the data read back through NBD comes from the
#     device alone; no replica is marked stale;
#   - stripe-ctl session list shows the device; session login is refused
#     while tapdisk holds the file, and without iscsi_tcp says so plainly;
#     session logout removes the device key (the real iscsiadm finds no
#     session to end) and the disk is served by iSCSI again.
# The kernel sessions themselves (iscsiadm login, the by-path device) are
# tested in the Xen-under-QEMU dom0: tests/e2e/dom0-cases-iscsi.sh.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 when root, tgt, libnbd, losetup or the stripe
# driver is missing.  About 15 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

command -v losetup >/dev/null || skip "losetup not found (util-linux)"
command -v iscsiadm >/dev/null || skip "iscsiadm not found (apt-get install open-iscsi)"

lab_up 2
mapfile -t LUNS < <(luns)
MAP=$WORK/ks.map
make_disk ks 16M 1 64K 2 || { summary; exit 1; }

LOOP=$(losetup -f --show "$LAB_SRV2_LUN" 2>&1) || skip "losetup: $LOOP"
loop_cleanup() {
	losetup -d "$LOOP" 2>/dev/null
	stripe_cleanup
}
trap loop_cleanup EXIT

# set_device TARGET PATH: put "device PATH" on that server's line, reseal.
set_device() {
	"$PY" - "$MAP" "$1" "$2" <<'EOF'
import sys
path, target, device = sys.argv[1:]
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
lines = open(path).read().splitlines(keepends=True)[:-1]
for i, l in enumerate(lines):
    if l.startswith("server ") and (" target %s " % target) in l:
        lines[i] = l.rstrip("\n") + " device %s\n" % device
body = "".join(lines)
open(path + ".new", "w").write(body + "checksum crc32c %08x\n" % crc32c(body.encode()))
EOF
	mv "$MAP.new" "$MAP"
}

set_device "$LAB_SRV2_TARGET" "$LOOP"
out=$("$CTL" vdisk show "$MAP" 2>&1) && grep -q "device $LOOP" <<<"$out" &&
	pass "the mapping file names $LOOP for server 2 (vdisk show)" ||
	fail "vdisk show of the edited map" "$out"
out=$("$CTL" session list "$MAP" 2>&1) && grep -q "$LOOP" <<<"$out" &&
	pass "session list shows the device" || fail "session list" "$out"

# --- served: one replica by libiscsi, one by the device ---------------------
DATA=$WORK/data
head -c 16M /dev/urandom >"$DATA"
serve ks "stripe:$MAP" || { summary; exit 1; }
out=$(nbdcopy --flush "$DATA" "$URI" 2>&1) && pass "16 MiB written through NBD" ||
	fail "nbdcopy write" "$out"
check_py "every replica holds the data" backing "$MAP" "$DATA" "${LUNS[@]}"
check_py "the replicas of every extent are byte-identical" replicas "$MAP" "${LUNS[@]}"
status=$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1)
dev_line=$(grep "(device $LOOP)" <<<"$status")
[ -n "$dev_line" ] && grep -q ": up," <<<"$dev_line" && ! grep -q " 0 writes" <<<"$dev_line" &&
	pass "tapdisk serves server 2 through the device: $(sed 's/^ *//' <<<"$dev_line" | cut -c1-120)" ||
	fail "the stripe status shows the device up with writes" "$status"

"$LAB" kill 1 >/dev/null 2>&1 || fail "lab.sh kill 1"
out=$(nbdcopy "$URI" "$WORK/back" 2>&1) && cmp -s "$DATA" "$WORK/back" &&
	pass "with server 1 dead, 16 MiB read back through NBD from the device" ||
	fail "read back from the device alone" "$out"
stale=$("$PY" "$STRIPE_IO" stale "$MAP")
[ -z "$stale" ] && pass "no replica marked stale by reads" || fail "no stale replica" "$stale"
"$LAB" revive 1 >/dev/null 2>&1 || fail "lab.sh revive 1"

# --- the session commands ------------------------------------------------------
out=$("$CTL" session login "$MAP" 2>&1) && fail "session login while served" "$out" ||
	{ grep -q "open (locked) by a tapdisk" <<<"$out" &&
		pass "session login refused while tapdisk serves the file: $out" ||
		fail "session login while served: the message" "$out"; }
unserve "$TD_PID" ks

if [ ! -e /sys/class/iscsi_transport/tcp ]; then
	out=$("$CTL" session login "$MAP" 0 2>&1)
	rc=$?
	[ $rc = 1 ] && grep -q "iSCSI driver tcp is not loaded" <<<"$out" &&
		pass "no iscsi_tcp here: session login says so (exit 1)" ||
		fail "session login without iscsi_tcp" "exit $rc: $out"
fi
out=$("$CTL" session list "$MAP" 5 2>&1)
[ $? = 2 ] && grep -q "bad SERVER '5'" <<<"$out" &&
	pass "a server number beyond the map is a usage error" || fail "session list MAP 5" "$out"

out=$("$CTL" session logout "$MAP" 2>&1) && grep -q "$LAB_SRV2_TARGET lun [0-9]*: logged out" <<<"$out" &&
	pass "session logout: $out" || fail "session logout" "$out"
out=$("$CTL" vdisk show "$MAP" 2>&1)
! grep -q "device" <<<"$out" && pass "the device key is gone from the mapping file" ||
	fail "no device key after logout" "$out"

# served again, by iSCSI only: the data is still there
serve ks "stripe:$MAP" || { summary; exit 1; }
out=$(nbdcopy "$URI" "$WORK/back2" 2>&1) && cmp -s "$DATA" "$WORK/back2" &&
	pass "after logout the disk is served by iSCSI again, data intact" ||
	fail "read back after logout" "$out"
grep -q "(iscsi)" <<<"$("$TAPCTL" driver -i "$TD_PID" stripe status 2>&1)" &&
	pass "tapdisk uses libiscsi for both servers" || fail "stripe status after logout"
unserve "$TD_PID" ks

summary
