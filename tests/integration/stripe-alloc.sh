#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-alloc.sh - NBD BLOCK_STATUS base:allocation of a striped disk
# (issue #21 item 3): regions never written are holes, the rest data.
#
# A disk of S=2 columns, U=64 KiB, R=2 on 2 thin tgtd LUNs (LAB_THIN=1:
# READ CAPACITY(16) says LBPME and LBPRZ, GET LBA STATUS answers from the
# sparse LUN files), served over NBD.  Then:
#   - a new disk maps as one hole (nbdinfo --map);
#   - after writes of a known set of regions through NBD, `nbdinfo --map`
#     lists exactly those (rounded to 64 KiB) as data, the rest hole,zero;
#   - a new tapdisk on the same disk (the scan asks the servers) gives the
#     same map, and qemu-img map agrees;
#   - the server of a region's replica 0 is killed, the region written
#     (that replica goes stale and keeps a hole there), the server revived:
#     a new tapdisk (auto_resync=off) reports that region as data, from
#     the fresh replica;
#   - nbdcopy of the disk is byte-exact.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 when root, tgt, libnbd or qemu-img is
# missing.  About 20 s.
set -u
export LAB_THIN=1 LAB_SIZE=64M
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

for tool in nbdinfo qemu-img; do
	command -v "$tool" >/dev/null || skip "$tool not found (apt-get install libnbd-bin qemu-utils)"
done

lab_up 2
mapfile -t LUNS < <(luns)
MAP=$WORK/a1.map
SIZE=$((32 << 20))
make_disk a1 32M 2 64K 2 || { summary; exit 1; }

# data_of: "start length" of the data runs of an `nbdinfo --map` listing
# ("start length type ..."; type bit 0: hole), adjacent runs joined.
data_of() {
	awk '{ if ($3 % 2 == 0) { if (n && s + l == $1) { l += $2 }
	       else { if (n) print s, l; s = $1; l = $2; n = 1 } } }
	     END { if (n) print s, l }'
}

# scanned N: wait (20 s at most) until the log says the Nth allocation
# scan is done.
scanned() {
	local t
	for ((t = 0; t < 200; t++)); do
		[ "$(grep -c 'allocation scan done' "$WORK/a1.log")" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# check_map WHAT WANT: nbdinfo --map's data runs are WANT, the rest holes
# that read as zeroes (type 3), covering the whole disk.
check_map() {
	local got bad total
	if ! nbdinfo --map "$URI" >"$WORK/map.txt" 2>"$WORK/err.txt"; then
		fail "$1: nbdinfo --map" "$(cat "$WORK/err.txt")"
		return
	fi
	got=$(data_of <"$WORK/map.txt")
	bad=$(awk '$3 != 0 && $3 != 3' "$WORK/map.txt")
	total=$(awk '{ t += $2 } END { print t }' "$WORK/map.txt")
	if [ "$got" = "$2" ] && [ -z "$bad" ] && [ "$total" = "$SIZE" ]; then
		pass "$1: nbdinfo --map lists exactly the data regions"
	else
		fail "$1: nbdinfo --map" "want data: $(tr '\n' ' ' <<<"$2"); got: $(cat "$WORK/map.txt")"
	fi
}

# write_regions OFF:LEN...: random data through NBD, then a flush.
write_regions() {
	"$PY" - "$URI" "$@" <<'EOF'
import os, sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for r in sys.argv[2:]:
    off, ln = (int(x) for x in r.split(":"))
    h.pwrite(os.urandom(ln), off)
h.flush()
h.shutdown()
EOF
}

serve a1 "stripe:$MAP" || { summary; exit 1; }
scanned 1 || fail "the first allocation scan ends" "$(tail -5 "$WORK/a1.log")"
check_map "new disk" ""

# 128 KiB at 1 MiB; 4 KiB at 5 MiB + 4 KiB (its 64 KiB chunk is data);
# the last 64 KiB.
write_regions $((1 << 20)):131072 $(((5 << 20) + 4096)):4096 $((SIZE - 65536)):65536 ||
	fail "writes through NBD"
WANT="1048576 131072
5242880 65536
33488896 65536"
check_map "after writes (same tapdisk)" "$WANT"
unserve "$TD_PID" a1

serve a1 "stripe:$MAP" || { summary; exit 1; }
scanned 2 || fail "the second allocation scan ends" "$(tail -5 "$WORK/a1.log")"
check_map "a new tapdisk (the servers asked)" "$WANT"
if qemu-img map --output=json "$URI" >"$WORK/qmap.json" 2>"$WORK/err.txt"; then
	got=$("$PY" -c '
import json, sys
for e in json.load(open(sys.argv[1])):
    print(e["start"], e["length"], 0 if e["data"] else 3)' "$WORK/qmap.json" | data_of)
	[ "$got" = "$WANT" ] && pass "qemu-img map agrees" ||
		fail "qemu-img map" "$(cat "$WORK/qmap.json")"
else
	fail "qemu-img map" "$(cat "$WORK/err.txt")"
fi

# A region past 8 MiB and the server of its replica 0 (the victim):
# "V C J X TARGET" (virtual offset, column, extent, offset in the extent).
read -r V C J X VICTIM_TARGET < <("$PY" - "$MAP" "$(dirname "$STRIPE_IO")" <<'EOF'
import sys
from importlib.machinery import SourceFileLoader
m = SourceFileLoader("stripe_io", sys.argv[2] + "/stripe-io.py").load_module().Map(sys.argv[1])
for v, _, c, j, x in m.units():
    if v >= 8 << 20:
        print(v, c, j, x, m.servers[m.slots[(c, j, 0)][0]]["target"])
        break
EOF
)
[ -n "${VICTIM_TARGET:-}" ] || { fail "a region past 8 MiB in the map"; summary; exit 1; }
VICTIM=$(lab_index "$VICTIM_TARGET")
"$LAB" kill "$VICTIM" >/dev/null 2>&1 || fail "lab.sh kill $VICTIM"
write_regions "$V:65536" || fail "write at $V with server $VICTIM down"
stale=$("$PY" "$STRIPE_IO" stale "$MAP")
grep -q "^$VICTIM_TARGET $C $J 0\$" <<<"$stale" &&
	pass "replica 0 of extent ($C, $J) on server $VICTIM is stale" ||
	fail "replica 0 of extent ($C, $J) is stale" "${stale:-none stale}"
unserve "$TD_PID" a1
"$LAB" revive "$VICTIM" >/dev/null 2>&1 || fail "lab.sh revive $VICTIM"
# The stale replica must hold a hole there, or this proves nothing.
"$PY" - "$MAP" "$C" "$J" "$X" "$(dirname "$STRIPE_IO")" "${LUNS[@]}" <<'EOF' &&
import os, sys
from importlib.machinery import SourceFileLoader
m = SourceFileLoader("stripe_io", sys.argv[5] + "/stripe-io.py").load_module().Map(sys.argv[1])
c, j, x = (int(a) for a in sys.argv[2:5])
luns = dict(a.split("=", 1) for a in sys.argv[6:])
srv, off = m.lun_offset(c, j, 0, x)
fd = os.open(luns[m.servers[srv]["target"]], os.O_RDONLY)
try:
    d = os.lseek(fd, off, os.SEEK_DATA)
except OSError:
    d = os.fstat(fd).st_size
sys.exit(0 if d >= off + 65536 else 1)
EOF
	pass "the stale replica holds a hole at the region" ||
	fail "the stale replica holds a hole at the region"

serve a1 "stripe:$MAP,auto_resync=off" || { summary; exit 1; }
scanned 3 || fail "the third allocation scan ends" "$(tail -5 "$WORK/a1.log")"
WANT2=$(printf '%s\n%s 65536\n' "$WANT" "$V" | sort -n)
check_map "one replica stale (reported from the fresh one)" "$WANT2"

if nbdcopy "$URI" "$WORK/copy.img" &&
	"$PY" - "$URI" "$WORK/copy.img" <<'EOF'; then
import sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = h.get_size()
with open(sys.argv[2], "rb") as f:
    for off in range(0, size, 1 << 20):
        if h.pread(1 << 20, off) != f.read(1 << 20):
            sys.exit(1)
EOF
	pass "nbdcopy (which skips holes) copies the disk byte-exact"
else
	fail "nbdcopy copies the disk byte-exact"
fi
unserve "$TD_PID" a1
summary
