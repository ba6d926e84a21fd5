#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# cbt.sh - changed-block tracking end to end (issue #21 item 3): a tapdisk
# serving `cbt:dir=DIR|aio:FILE` over NBD, bitmaps made with `tap-ctl
# driver -i ID cbt ...`, read with nbdinfo --map=qemu:dirty-bitmap:NAME.
#
# Cases: after a known set of writes (qemu-io), the bitmap lists exactly
# those regions rounded out to the 64 KiB granularity, and `cbt show
# --json` agrees; kill -9 of tapdisk and a restart: never fewer (exactly
# the same); a full backup (nbdcopy) then an incremental one that copies
# only the dirty extents of the previous bitmap (qemu-img convert of each
# range) restores a byte-exact disk; malformed commands and an unknown
# bitmap are refused and change nothing; nbdinfo asked for a bitmap that
# does not exist fails cleanly.
#
# Exits 0 when all pass, 1 when one fails, 77 when a client is missing.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"

nbd_need nbdinfo nbdcopy qemu-io qemu-img python3 cmp
nbd_workdir cbt
DISK=$WORK/disk.img

start() {
	nbd_start "cbt:dir=$WORK/bitmaps|aio:$DISK" --name cbt || exit 1
}
cbt() { "$TAPCTL" --run-dir "$WORK" driver -i "$TD_PID" cbt "$@"; }
# dirty BITMAP: the dirty extents nbdinfo reads, "offset length" lines.
dirty() {
	nbdinfo --json --map="qemu:dirty-bitmap:$1" "$URI" |
		python3 -c 'import json, sys
for e in json.load(sys.stdin):
    if e["type"] & 1:
        print(e["offset"], e["length"])'
}
# writes OFF:LEN...: qemu-io writes of a fresh pattern byte each.
writes() {
	local args=() p=1 w
	for w in "$@"; do
		args+=(-c "write -P $p ${w%:*} ${w#*:}")
		p=$((p + 1))
	done
	qemu-io -f raw "${args[@]}" "$URI" >"$WORK/qio.log" 2>&1 &&
		! grep -qi "error\|fail" "$WORK/qio.log"
}

head -c 32M /dev/urandom >"$DISK"
start

# --- a known set of writes, exactly --------------------------------------------
cbt create b1 >/dev/null || fail "cbt create b1"
writes 4096:4096 $((1 << 20)):$((200 << 10)) $((20 << 20)):512 ||
	fail "qemu-io writes" "$(tail -2 "$WORK/qio.log")"
# 64 KiB granules: [0,64K), [1M,1M+256K), [20M,20M+64K).
want="0 65536
1048576 262144
20971520 65536"
got=$(dirty b1)
if [ "$got" = "$want" ]; then
	pass "nbdinfo --map=qemu:dirty-bitmap:b1 lists exactly the writes, rounded to 64 KiB"
else
	fail "dirty extents of b1" "got: $(echo "$got" | tr '\n' ';') want: $(echo "$want" | tr '\n' ';')"
fi
show=$(cbt show b1 json | python3 -c 'import json, sys
print("\n".join("%d %d" % (e["offset"], e["length"]) for e in json.load(sys.stdin)["dirty"]))')
[ "$show" = "$want" ] && pass "cbt show b1 json agrees" || fail "cbt show b1 json" "$show"

# --- kill -9: never fewer ------------------------------------------------------------
writes $((30 << 20)):4096 || fail "qemu-io write before the kill"
want="$want
31457280 65536"
nbd_stop KILL
start
got=$(dirty b1)
if [ "$got" = "$want" ]; then
	pass "after kill -9 and a restart b1 lists the same regions"
else
	fail "b1 after kill -9" "got: $(echo "$got" | tr '\n' ';')"
fi

# --- full then incremental backup, restored byte-exact ----------------------------
cbt create b2 >/dev/null || fail "cbt create b2"
nbdcopy "$URI" "$WORK/backup.img" || fail "full backup with nbdcopy"
writes $((5 << 20)):$((64 << 10)) $((12 << 20)):100 $((31 << 20)):$((300 << 10)) ||
	fail "writes after the full backup"
cbt create b3 >/dev/null || fail "cbt create b3"
n=0
copied=0
while read -r off len; do
	qemu-img convert -O raw --image-opts \
		"driver=raw,offset=$off,size=$len,file.driver=nbd,file.server.type=unix,file.server.path=$SOCK" \
		"$WORK/piece" && dd if="$WORK/piece" of="$WORK/backup.img" bs=64k \
		seek="$off" oflag=seek_bytes conv=notrunc status=none ||
		fail "copy of $off+$len"
	n=$((n + 1))
	copied=$((copied + len))
done < <(dirty b2)
cbt remove b2 >/dev/null || fail "cbt remove b2"
if cmp -s "$WORK/backup.img" <(nbdcopy "$URI" -) && cmp -s "$WORK/backup.img" "$DISK"; then
	pass "incremental backup: $n extents, $copied bytes of 32 MiB copied; restore byte-exact"
else
	fail "incremental backup restores the disk" "$(cmp "$WORK/backup.img" "$DISK" 2>&1 | head -1)"
fi
[ "$copied" -le $((512 << 10)) ] && pass "the incremental copied only what changed ($copied bytes)" ||
	fail "the incremental copied too much" "$copied bytes"

# --- bad input --------------------------------------------------------------------------
before=$(cbt list json)
ok=1
for bad in "create b1" "create .x" "create a/b" "create g granularity=3K" \
	"create g granularity=96K" "create g granularity=1G" "remove nosuch" \
	"clear nosuch" "show nosuch" "show b1 yaml" "frobnicate" "list yaml"; do
	# shellcheck disable=SC2086 # words on purpose
	if cbt $bad >"$WORK/bad.log" 2>&1 || ! [ -s "$WORK/bad.log" ]; then
		ok=0
		fail "cbt $bad refused with a reason" "$(cat "$WORK/bad.log")"
	fi
done
[ "$ok" = 1 ] && [ "$(cbt list json)" = "$before" ] &&
	pass "malformed cbt commands refused, bitmaps unchanged"
if nbdinfo --map=qemu:dirty-bitmap:nosuch "$URI" >"$WORK/ns.log" 2>&1; then
	fail "nbdinfo --map of an unknown bitmap fails" "it succeeded"
elif nbdinfo --can connect "$URI"; then
	pass "nbdinfo --map of an unknown bitmap fails: $(tail -1 "$WORK/ns.log")"
else
	fail "the export after an unknown bitmap" "gone"
fi

nbd_summary
