#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/packages/run.sh - the Debian packages as an operator gets them.
#
# Builds the packages from a copy of the tree (dpkg-buildpackage -us -uc -b,
# DEB_BUILD_OPTIONS=nocheck: make check runs the unit tests elsewhere),
# runs lintian (an error fails), installs them with dpkg -i, and runs the
# demo with the INSTALLED programs and their default paths: a file served
# over NBD by /usr/sbin/tap-ctl (sockets in /run/tapstripe), the same disk
# by name from the disk registry (/etc/tapstripe/disks/NAME.conf), and a
# striped disk made by /usr/sbin/stripe-ctl (map in /var/lib/tapstripe)
# from a /usr/sbin/stripe-master keeping its default database
# (/var/lib/tapstripe/master.db) over a tgtd server of tests/lab/lab.sh;
# the installed units run as systemd would (tests/integration/units-run.py,
# when the units are there): tapdisk@pkgdemo and stripe-master.  Then
# systemd-analyze verify on every installed unit, man -l (with
# warnings on) on every installed page, dpkg --purge, and a check that no
# file of the packages is left.
#
# Needs root, dpkg-buildpackage, lintian (setup.sh test installs them),
# nbdcopy, tgtd, iproute2.  Takes 1 to 2 minutes on 2 cores, most of it
# the package build.  TAPSTRIPE_PKG_WORK: the work directory (default a
# new one under /tmp, removed at the end).  Exit 0 when every step passed,
# 1 otherwise.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
PKGS="tapstripe stripe-master stripe-ctl td-bench"
passed=0
failed=0

say() { printf '\n== packages: %s\n' "$*"; }
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() {
	failed=$((failed + 1))
	echo "FAIL - $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | tail -n 40 | sed 's/^/    /'
	return 0
}

[ "$(id -u)" -eq 0 ] || { echo "tests/packages/run.sh: needs root (dpkg -i)" >&2; exit 1; }
for tool in dpkg-buildpackage lintian nbdcopy tgtd ip; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "tests/packages/run.sh: $tool missing (./setup.sh deps installs it)" >&2
		exit 1
	}
done
for p in $PKGS; do
	if dpkg -s "$p" >/dev/null 2>&1; then
		echo "tests/packages/run.sh: $p is installed already; dpkg --purge $PKGS first" >&2
		exit 1
	fi
done

work=${TAPSTRIPE_PKG_WORK:-$(mktemp -d /tmp/tapstripe-pkg.XXXXXX)}
src=$work/src/tapstripe
# What the demo starts (by PID or id) and makes, for the EXIT trap.
td_ids=()
master_pid=
syslog_pid=
lab=
made_files=()
made_dirs=()
policy_rc=

# What the demo made in the default paths: files, then the directories
# that were not there before (when empty).
cleanup_demo_files() {
	local f d
	for f in "${made_files[@]}"; do rm -f "$f" "$f"-wal "$f"-shm "$f".al "$f".log; done
	for ((d = ${#made_dirs[@]} - 1; d >= 0; d--)); do rmdir "${made_dirs[d]}" 2>/dev/null; done
	return 0
}

cleanup() {
	local id pid
	for id in "${td_ids[@]}"; do
		/usr/sbin/tap-ctl destroy -i "$id" >/dev/null 2>&1 || kill -KILL "$id" 2>/dev/null
	done
	[ -n "$lab" ] && LAB_STATE=$work/lab "$lab" down >/dev/null 2>&1
	for pid in $master_pid $syslog_pid; do
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	cleanup_demo_files
	[ -n "$policy_rc" ] && rm -f /usr/sbin/policy-rc.d
	[ -z "${TAPSTRIPE_PKG_WORK:-}" ] && rm -rf "$work"
	return 0
}
trap cleanup EXIT

# The directories the programs make at run time: those that did not exist
# before are removed again (when empty) after the demo.
for d in /run/tapstripe /var/lib/tapstripe /etc/tapstripe /etc/tapstripe/disks; do
	[ -e "$d" ] || made_dirs+=("$d")
done

# --- the demo's parts ---------------------------------------------------------------
# destroy_td ID: tap-ctl destroy, and forget the id.
destroy_td() {
	local out
	if out=$(/usr/sbin/tap-ctl destroy -i "$1" 2>&1); then
		ok "tap-ctl destroy -i $1"
	else
		not_ok "tap-ctl destroy -i $1" "$out"
	fi
	td_ids=("${td_ids[@]/$1/}")
}

# verify_nbd SOCKET DATA BYTES: write DATA through the NBD socket, read it
# back, compare.
verify_nbd() {
	local url="nbd+unix:///?socket=$1"
	nbdcopy "$2" "$url" && nbdcopy "$url" "$work/back" &&
		cmp -n "$3" "$2" "$work/back"
}

# A file over NBD, as README's demo: sockets in /run/tapstripe.
demo_nbd() {
	local id out
	truncate -s 64M "$work/disk.img"
	head -c 64M /dev/urandom >"$work/data"
	if ! id=$(/usr/sbin/tap-ctl create -a "aio:$work/disk.img" --nbd "unix:$work/nbd.sock" 2>&1); then
		not_ok "tap-ctl create -a aio:FILE --nbd unix:SOCK" "$id"
		return
	fi
	td_ids+=("$id")
	[ -S "/run/tapstripe/tapdisk-$id.sock" ] &&
		ok "tapdisk $id: its control socket is /run/tapstripe/tapdisk-$id.sock" ||
		not_ok "tapdisk $id: control socket in /run/tapstripe" "$(ls -la /run/tapstripe 2>&1)"
	out=$(/usr/sbin/tap-ctl list 2>&1)
	grep -q "$id" <<<"$out" && ok "tap-ctl list shows $id" || not_ok "tap-ctl list shows $id" "$out"
	if verify_nbd "$work/nbd.sock" "$work/data" 64M && cmp -s "$work/data" "$work/disk.img"; then
		ok "64 MiB written with nbdcopy and read back: identical, and the file too"
	else
		not_ok "64 MiB through NBD, read back identical"
	fi
	out=$(/usr/sbin/tap-ctl stats -i "$id" 2>&1) && ok "tap-ctl stats -i $id" ||
		not_ok "tap-ctl stats -i $id" "$out"
	destroy_td "$id"
}

# The same file by name from the disk registry, /etc/tapstripe/disks.
demo_registry() {
	local conf=/etc/tapstripe/disks/pkgdemo.conf id
	if [ -e "$conf" ]; then
		not_ok "$conf exists already: not overwritten (remove it)"
		return
	fi
	mkdir -p /etc/tapstripe/disks
	made_files+=("$conf")
	echo "CHAIN=aio:$work/disk.img" >"$conf"
	if ! id=$(/usr/sbin/tap-ctl create --disk pkgdemo --nbd "unix:$work/reg.sock" 2>&1); then
		not_ok "tap-ctl create --disk pkgdemo ($conf)" "$id"
		return
	fi
	td_ids+=("$id")
	nbdcopy "nbd+unix:///?socket=$work/reg.sock" "$work/back" &&
		cmp -s "$work/back" "$work/data" &&
		ok "tap-ctl create --disk pkgdemo ($conf): the same 64 MiB" ||
		not_ok "tap-ctl create --disk pkgdemo: the same 64 MiB"
	destroy_td "$id"
}

# free_port FIRST: the first TCP port from FIRST nothing listens on.
free_port() {
	local p=$1
	while ss -Htln "sport = :$p" | grep -q .; do p=$((p + 1)); done
	echo "$p"
}

# A striped disk: the installed master with its default database, a tgtd
# server of tests/lab/lab.sh (the copy's, so that it finds the installed
# programs), the map in /var/lib/tapstripe.
demo_striped() {
	local db=/var/lib/tapstripe/master.db map=/var/lib/tapstripe/pkgdemo.map
	local port addr id out t
	if [ -e "$db" ] || [ -e "$map" ]; then
		not_ok "$db or $map exists already: not touched (remove them)"
		return
	fi
	made_files+=("$db" "$map")
	port=$(free_port 7790)
	addr=127.0.0.1:$port
	/usr/sbin/stripe-master -f --listen "$addr" --extent-size 16M \
		--log "file:$work/master.log" </dev/null &
	master_pid=$!
	for ((t = 0; t < 100; t++)); do
		/usr/sbin/stripe-ctl --master "$addr" server list >/dev/null 2>&1 && break
		sleep 0.1
	done
	[ -f "$db" ] && ok "stripe-master: its database is $db" ||
		not_ok "stripe-master: database in $db" "$(cat "$work/master.log" 2>&1)"
	lab=$src/tests/lab/lab.sh
	if ! out=$(LAB_STATE=$work/lab LAB_NET=auto LAB_RATE=0 LAB_SIZE=1G \
		MASTER=$addr "$lab" up 1 2>&1); then
		not_ok "tests/lab/lab.sh up 1 (one tgtd server)" "$out"
		return
	fi
	if out=$(/usr/sbin/stripe-ctl --master "$addr" vdisk create pkgdemo --size 64M \
		--stripes 1 2>&1) && [ -f "$map" ]; then
		ok "stripe-ctl vdisk create pkgdemo: the map is $map"
	else
		not_ok "stripe-ctl vdisk create pkgdemo -> $map" "$out"
		return
	fi
	if ! id=$(/usr/sbin/tap-ctl create -a "stripe:$map" --nbd "unix:$work/s.sock" 2>&1); then
		not_ok "tap-ctl create -a stripe:$map" "$id"
		return
	fi
	td_ids+=("$id")
	head -c 32M "$work/data" >"$work/data32"
	verify_nbd "$work/s.sock" "$work/data32" 32M &&
		ok "striped disk: 32 MiB written and read back through NBD, identical" ||
		not_ok "striped disk: 32 MiB through NBD, identical"
	destroy_td "$id"
	LAB_STATE=$work/lab "$lab" down >/dev/null 2>&1
	lab=
	kill "$master_pid" 2>/dev/null
	wait "$master_pid" 2>/dev/null
	master_pid=
}

# The installed units run the way systemd would (tests/integration/
# units-run.py: ExecStart with the unit's specifiers and EnvironmentFile,
# Runtime/StateDirectory under WORK, readiness through NOTIFY_SOCKET): the
# registry's disk by tapdisk@pkgdemo.service, and stripe-master.service
# with its installed defaults file.  Either unit missing is a failure.
demo_units() {
	local runner=$top/tests/integration/units-run.py td_unit master_unit out t port
	local conf=/etc/tapstripe/disks/pkgdemo.conf defaults=/etc/default/stripe-master
	td_unit=$(grep -E '/systemd/system/tapdisk@\.service$' <<<"$owned")
	master_unit=$(grep -E '/systemd/system/stripe-master\.service$' <<<"$owned")
	if [ ! -f "$runner" ] || [ -z "$td_unit" ] || [ -z "$master_unit" ]; then
		not_ok "the units tapdisk@.service and stripe-master.service are installed (and tests/integration/units-run.py is there)"
		return
	fi
	mkdir -p /etc/tapstripe/disks "$work/units/td" "$work/units/master"
	made_files+=("$conf")
	printf 'CHAIN=aio:%s\nOPTIONS=--nbd unix:%s --xen off\n' \
		"$work/disk.img" "$work/unit.sock" >"$conf"
	# The journal's /dev/log, for the unit's --log syslog.
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
while s.recv(65536): pass' "$work/units/syslog.sock" &
	syslog_pid=$!
	for ((t = 0; t < 50; t++)); do [ -S "$work/units/syslog.sock" ] && break; sleep 0.1; done
	if out=$(python3 "$runner" "$td_unit" --instance pkgdemo --root / \
		--work "$work/units/td" --syslog "$work/units/syslog.sock" \
		--listening "unix:$work/unit.sock" \
		--probe nbdinfo --size "nbd+unix:///?socket=$work/unit.sock" 2>&1); then
		ok "tapdisk@pkgdemo.service ($conf): ready, serves, stops"
	else
		not_ok "tapdisk@pkgdemo.service run as systemd would" "$out"
	fi
	kill "$syslog_pid" 2>/dev/null
	wait "$syslog_pid" 2>/dev/null
	syslog_pid=
	# A port free now: the readiness check probes it.
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	echo "STRIPE_MASTER_OPTS=\"--listen 127.0.0.1:$port --extent-size 16M\"" >"$defaults"
	if out=$(python3 "$runner" "$master_unit" --root / --work "$work/units/master" \
		--listening "tcp:127.0.0.1:$port" \
		--probe /usr/sbin/stripe-ctl --master "127.0.0.1:$port" server list 2>&1); then
		ok "stripe-master.service ($defaults): ready, serves, stops"
	else
		not_ok "stripe-master.service run as systemd would" "$out"
	fi
}

# --- build ------------------------------------------------------------------------
say "dpkg-buildpackage -us -uc -b from a copy of the tree"
rm -rf "$work/src"
mkdir -p "$src"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$top" && git ls-files -co --exclude-standard -z | grep -zv '^build' |
		tar --null -cf - -T -) | tar -xf - -C "$src"
else
	(cd "$top" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$src"
fi
start=$(date +%s)
if (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$jobs" \
	dpkg-buildpackage -us -uc -b >"$work/build.log" 2>&1); then
	ok "dpkg-buildpackage -us -uc -b ($(($(date +%s) - start)) s)"
else
	not_ok "dpkg-buildpackage -us -uc -b" "$(tail -n 40 "$work/build.log")"
	exit 1
fi
debs=()
for p in $PKGS; do
	f=$(ls "$work"/src/"${p}"_*.deb 2>/dev/null | head -n 1)
	[ -n "$f" ] && debs+=("$f") || not_ok "package $p built"
done
[ ${#debs[@]} -eq 4 ] && ok "four packages: $(cd "$work/src" && ls ./*.deb | tr '\n' ' ')"

say "lintian (errors fail; warnings are listed)"
lintian --fail-on error --tag-display-limit 0 "$work"/src/tapstripe_*.changes \
	>"$work/lintian.out" 2>&1
rc=$?
out=$(grep -v '^running with root privileges is not recommended' "$work/lintian.out")
[ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/    /'
[ $rc -eq 0 ] && ok "lintian: no error" || not_ok "lintian: no error" "$out"

# --- install ------------------------------------------------------------------------
say "dpkg -i (services not started: policy-rc.d)"
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	policy_rc=yes
fi
if out=$(dpkg -i "${debs[@]}" 2>&1); then
	ok "dpkg -i ${PKGS// /, }"
else
	not_ok "dpkg -i" "$out"
	dpkg --purge $PKGS >/dev/null 2>&1
	exit 1
fi
[ -n "$policy_rc" ] && rm -f /usr/sbin/policy-rc.d && policy_rc=
# Every file of the packages, for the purge check.
owned=$(dpkg -L $PKGS | sort -u)
for prog in /usr/sbin/tapdisk /usr/sbin/tap-ctl /usr/sbin/stripe-master \
	/usr/sbin/stripe-ctl /usr/bin/td-front /usr/bin/td-bench; do
	if out=$("$prog" --version 2>&1); then
		ok "$prog --version: $out"
	else
		not_ok "$prog --version" "$out"
	fi
done

# td-bench (in /usr/bin) finds the installed tapdisk and tap-ctl in
# /usr/sbin, td-front beside it, its scripts in /usr/share/tapstripe.
out=$(env -u BUILDDIR PATH=/usr/bin:/bin python3 -c 'import sys
sys.path.insert(0, "/usr/share/tapstripe")
from td_bench.core import Env
e = Env("/usr/bin/td-bench")
print(e.program("tapdisk"), e.program("tap-ctl"), e.program("td-front"), e.scripts)' 2>&1)
if [ "$out" = "/usr/sbin/tapdisk /usr/sbin/tap-ctl /usr/bin/td-front /usr/share/tapstripe/bench" ]; then
	ok "td-bench finds /usr/sbin/tapdisk, /usr/sbin/tap-ctl, /usr/bin/td-front and its scripts"
else
	not_ok "td-bench finds the installed programs and scripts" "$out"
fi

# --- the demo with the installed programs and their default paths ----------
say "the demo: installed programs, default paths"
unset TAPSTRIPE_RUNDIR TAPSTRIPE_DISKDIR BUILDDIR TAPDISK MASTER STRIPE_MASTER
demo_nbd
demo_registry
demo_striped

# --- units, man pages ------------------------------------------------------------------
say "the installed units, run as systemd would"
demo_units

say "systemd-analyze verify, every installed unit"
units=$(grep -E '^/(usr/)?lib/systemd/system/[^/]+\.(service|socket|timer)$' <<<"$owned")
if [ -z "$units" ]; then
	echo "    (the packages install no unit yet)"
elif ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "    (no systemd-analyze here: not checked)"
else
	for u in $units; do
		f=$u
		if [[ $u == *@.service ]]; then # a template: verify an instance
			f=$work/$(basename "${u%@.service}")@demo.service
			cp "$u" "$f"
		fi
		if out=$(systemd-analyze verify "$f" 2>&1) && [ -z "$out" ]; then
			ok "systemd-analyze verify $(basename "$u")"
		else
			not_ok "systemd-analyze verify $(basename "$u")" "$out"
		fi
	done
fi

say "man -l, every installed page, warnings on"
for page in $(grep -E '^/usr/share/man/man[1-8]/[^/]+\.[1-8](\.gz)?$' <<<"$owned"); do
	out=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	if [ -z "$out" ] && MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q .; then
		ok "man -l $page"
	else
		not_ok "man -l $page renders without a warning" "$out"
	fi
done

# --- purge --------------------------------------------------------------------------
say "dpkg --purge; nothing of the packages left"
if out=$(dpkg --purge $PKGS 2>&1); then
	ok "dpkg --purge ${PKGS// /, }"
else
	not_ok "dpkg --purge" "$out"
fi
left=()
for f in $owned; do
	# Directories other packages share (/usr/sbin, /usr/share/man/...,
	# /lib, a symbolic link on a merged-/usr system).
	[ -d "$f" ] && continue
	[ -e "$f" ] || [ -L "$f" ] && left+=("$f")
done
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 && left+=("package $p")
done
for f in /etc/default/stripe-master /etc/systemd/system/*.wants/stripe-master.service \
	/etc/systemd/system/*.wants/tapstripe-xenwatch.service; do
	[ -e "$f" ] || [ -L "$f" ] && left+=("$f")
done
cleanup_demo_files
for d in "${made_dirs[@]}"; do [ -e "$d" ] && left+=("$d (made by the demo)"); done
[ ${#left[@]} -eq 0 ] && ok "nothing left" || not_ok "nothing left" "$(printf '%s\n' "${left[@]}")"

echo "# packages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
