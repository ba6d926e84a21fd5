#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-verify.sh - striped disks over a lab of 4 tgtd servers, verified
# byte for byte through NBD, through the shm ring, and in the LUN files.
#
# For each geometry (together they cover S = 1..4 columns, stripe units of
# 4 KiB..1 MiB and R = 1..3 replicas; the master's extents are 4 MiB, so
# every column has several):
#   - stripe-ctl vdisk create, tapdisk serving stripe:MAP or sort|stripe:MAP
#     over NBD and shm;
#   - nbdinfo sees the disk's size; random data written with nbdcopy reads
#     back identical with nbdcopy and with qemu-img compare;
#   - every replica of every stripe unit in the LUN files holds that data
#     at the place DESIGN.md's layout gives (stripe-io.py backing: its own
#     map parser and layout), and, for S=3 U=1M, at the places of a
#     hand-written table (stripe-io.py table);
#   - td-front --verify (random order, 4 KiB..1 MiB I/Os, indirect
#     requests) over the whole disk through the shm ring;
#   - tap-ctl stats shows every server of the map up, without errors;
#   - the mapping file is locked while served: a second tapdisk is refused;
#   - tapdisk stops cleanly (exit 0: every write flushed).
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when root, tgt, libnbd or
# the stripe driver is missing.  About a minute.
set -u
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

command -v qemu-img >/dev/null || skip "qemu-img not found (apt-get install qemu-utils)"
command -v nbdinfo >/dev/null || skip "nbdinfo not found (apt-get install libnbd-bin)"

lab_up 4
mapfile -t LUNS < <(luns)

# name size S U R chain-prefix
GEOMETRIES=(
	"v1 8M 1 4K 1 "
	"v2 16M 2 64K 2 sort|"
	"v3 24M 3 1M 2 "
	"v4 16M 4 16K 3 "
	"v5 32M 4 256K 1 sort|"
)

bytes() { numfmt --from=iec "$1"; }

verify_geometry() {
	local name=$1 size=$2 s=$3 u=$4 r=$5 prefix=${6:-} what map data out got
	what="S=$s U=$u R=$r ${prefix}stripe"
	map=$WORK/$name.map data=$WORK/$name.data
	make_disk "$name" "$size" "$s" "$u" "$r" || return
	serve "$name" "${prefix}stripe:$map" || return

	got=$(nbdinfo --size "$URI" 2>&1)
	[ "$got" = "$(bytes "$size")" ] && pass "$what: nbdinfo size $got" ||
		fail "$what: nbdinfo size" "$got"

	head -c "$(bytes "$size")" /dev/urandom >"$data"
	if out=$(nbdcopy "$data" "$URI" 2>&1 && nbdcopy "$URI" "$WORK/back" 2>&1) &&
		cmp -s "$data" "$WORK/back"; then
		pass "$what: $size of random data written and read back with nbdcopy"
	else
		fail "$what: nbdcopy write and read back" "$out$(cmp "$data" "$WORK/back" 2>&1)"
	fi
	out=$(qemu-img compare -f raw -F raw "$data" "$URI" 2>&1) &&
		pass "$what: qemu-img compare: identical" || fail "$what: qemu-img compare" "$out"
	rm -f "$WORK/back"

	check_py "$what: every replica in the LUN files" backing "$map" "$data" "${LUNS[@]}"
	[ "$name" = v3 ] &&
		check_py "$what: hand-written placement table" table "$map" "$data" "${LUNS[@]}"

	out=$(timeout 120 "$TDFRONT" --shm "$WORK/$name.shm" --quiet --no-progress --verify \
		--pattern rand --bs 4k,64k,1m --qd 16 --ring-order 2 --max-segments 256 \
		--seed "$s$r" --flush 2>&1) &&
		pass "$what: td-front --verify over the whole disk (4k,64k,1m, QD 16)" ||
		fail "$what: td-front --verify" "$out"

	out=$("$TAPCTL" stats -i "$TD_PID" 2>&1)
	got=$(grep -cE '^server [0-9]+ .*: up, .* 0 errors, 0 timeouts' <<<"$out")
	[ "$got" = "$(grep -c '^server ' "$map")" ] &&
		pass "$what: tap-ctl stats: $got servers up, no error" ||
		fail "$what: tap-ctl stats shows every server up" "$out"

	if [ "$name" = v1 ]; then
		out=$(timeout 20 "$TAPDISK" --foreground -a "stripe:$map" \
			--nbd "unix:$WORK/second.nbd" 2>&1)
		[ $? -ne 0 ] && grep -q "$map" <<<"$out" &&
			pass "a second tapdisk on the same mapping file is refused: ${out##*: }" ||
			fail "a second tapdisk on the same mapping file is refused" "$out"
	fi

	unserve "$TD_PID" "$name" && pass "$what: tapdisk stopped cleanly"
	got=$("$PY" "$STRIPE_IO" stale "$map")
	[ -z "$got" ] && pass "$what: no replica marked stale" ||
		fail "$what: replicas marked stale" "$got"
	rm -f "$data"
}

for g in "${GEOMETRIES[@]}"; do
	# shellcheck disable=SC2086
	verify_geometry $g
done

summary
