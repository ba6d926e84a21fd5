#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# units.sh - the systemd units as `make install` installs them (issue #20).
# systemd is not PID 1 on the test machines, so nothing is started with
# systemctl: the units are checked by systemd-analyze and their command run
# the way systemd would run it (tests/integration/units-run.py).
#
# Cases:
#   installed  make install DESTDIR=... puts every unit of data/systemd/ in
#              the unit directory, and /etc/default/stripe-master
#   verify     `systemd-analyze verify` passes on each installed unit (a
#              template as NAME@test.service), on a copy whose program paths
#              point into DESTDIR and with MANPATH there, so that a missing
#              program or man page fails it
#   tapdisk@web1  ExecStart of the installed tapdisk@.service with %i =
#              web1, the registry entry web1.conf in TAPSTRIPE_DISKDIR, a
#              fake /dev/log: READY=1 only once the NBD socket listens
#              (checked with the process frozen inside its send of
#              READY=1: units-run.py says how), nbdinfo reads
#              the disk, SIGTERM gives STOPPING=1 and exit 0; its log lines
#              reach syslog as tapdisk/web1
#   tapdisk@gone  an entry whose image is missing: exit 1, no READY=1, and
#              the reason on stderr (the journal)
#   stripe-master  the same for stripe-master.service with its defaults
#              file (STRIPE_MASTER_OPTS) and a temporary state directory:
#              READY=1 once the RPC port listens, stripe-ctl server list
#              answers, SIGTERM gives STOPPING=1 and exit 0
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all pass,
# 1 when one fails, 77 (automake's skip) when systemd-analyze, python3 or
# nbdinfo is missing; the tapdisk case needs root and unshare for its
# /dev/log (skipped alone without them).  BUILDDIR is the build tree.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
here=$(cd "$(dirname "$0")" && pwd)
PASSED=0
FAILED=0
for tool in systemd-analyze python3 nbdinfo; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool not found (apt-get install systemd python3 libnbd-bin)"
		exit 77
	fi
done

tmp=$(mktemp -d /tmp/units.XXXXXX)
SYSLOG_PID=
cleanup() {
	[ -n "$SYSLOG_PID" ] && kill "$SYSLOG_PID" 2>/dev/null
	# The /dev of tapdisk's namespace was bound there, never here: remove
	# nothing if a mount under tmp shows up in this namespace after all.
	if grep -q " $tmp/" /proc/self/mounts; then
		echo "units.sh: a mount under $tmp is left; not removing it"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

pass() {
	echo "PASS: $*"
	PASSED=$((PASSED + 1))
}
fail() {
	echo "FAIL: $*"
	FAILED=$((FAILED + 1))
}
# The lines units-run.py printed, counted.
count() {
	local line
	while IFS= read -r line; do
		echo "$line"
		case $line in
		PASS:*) PASSED=$((PASSED + 1)) ;;
		FAIL:*) FAILED=$((FAILED + 1)) ;;
		esac
	done
}

# --- installed -------------------------------------------------------------------
root=$tmp/root
if ! make -s -C "$BUILDDIR" install DESTDIR="$root" >"$tmp/install" 2>&1; then
	fail "installed: make install DESTDIR: $(tail -3 "$tmp/install")"
	echo "$PASSED passed, $FAILED failed"
	exit 1
fi
unitdir=$root$(sed -n 's/^systemdsystemunitdir = //p' "$BUILDDIR/Makefile")
srcdir=$(sed -n 's/^abs_top_srcdir = //p' "$BUILDDIR/Makefile")
missing=
for in in "$srcdir"/data/systemd/*.in; do
	unit=$(basename "$in" .in)
	[ -f "$unitdir/$unit" ] || missing="$missing $unit"
done
defaults=$(find "$root" -path '*/default/stripe-master' -type f | head -1)
if [ -z "$missing" ] && [ -n "$defaults" ]; then
	pass "installed: $(cd "$unitdir" && echo *) in ${unitdir#"$root"}, ${defaults#"$root"}"
else
	fail "installed: missing:${missing:- none} defaults:${defaults:-missing}"
fi
mandir=$(dirname "$(find "$root" -name tapdisk.8 | head -1)")
mandir=${mandir%/man8}

# --- verify ------------------------------------------------------------------------
# Program paths (ExecStart= and the like) of the copy point into DESTDIR.
mkdir -p "$tmp/verify"
for unit in "$unitdir"/*.service; do
	name=$(basename "$unit")
	sed -E "s#^(Exec[A-Za-z]*=[-@+!:]*)(/[^ ]*)#\1$root\2#" "$unit" \
		>"$tmp/verify/$name"
	case $name in
	*@.service) target=${name%@.service}@test.service ;;
	*) target=$name ;;
	esac
	if (cd "$tmp/verify" && MANPATH=$mandir systemd-analyze verify \
		"./$target") >"$tmp/verify.out" 2>&1 &&
		! [ -s "$tmp/verify.out" ]; then
		pass "verify: $target"
	else
		fail "verify: $target: $(head -5 "$tmp/verify.out")"
	fi
done

# --- tapdisk@web1 ------------------------------------------------------------------
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null; then
	echo "SKIP: tapdisk@web1 (needs root and unshare for its /dev/log)"
else
	mkdir -p "$tmp/disks" "$tmp/td"
	truncate -s 64M "$tmp/web1.img"
	cat >"$tmp/disks/web1.conf" <<-EOF
		# a registry entry as an operator writes it
		CHAIN=aio:$tmp/web1.img
		OPTIONS=--nbd unix:$tmp/web1.sock --run-dir $tmp/run --xen off
	EOF
	python3 - "$tmp/syslog.sock" "$tmp/syslog.txt" <<-'EOF' &
		import socket, sys
		s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
		s.bind(sys.argv[1])
		with open(sys.argv[2], "ab", buffering=0) as f:
		    while True:
		        f.write(s.recv(65536) + b"\n")
	EOF
	SYSLOG_PID=$!
	for _ in $(seq 50); do
		[ -S "$tmp/syslog.sock" ] && break
		sleep 0.1
	done
	count < <(TAPSTRIPE_DISKDIR=$tmp/disks python3 "$here/units-run.py" \
		"$unitdir/tapdisk@.service" --instance web1 --root "$root" \
		--work "$tmp/td" --syslog "$tmp/syslog.sock" \
		--listening "unix:$tmp/web1.sock" \
		--probe nbdinfo --size "nbd+unix:///?socket=$tmp/web1.sock" 2>&1)
	# A disk whose image is gone: the start fails, without READY=1.
	mkdir -p "$tmp/td-gone"
	cat >"$tmp/disks/gone.conf" <<-EOF
		CHAIN=aio:$tmp/no-such.img
		OPTIONS=--nbd unix:$tmp/gone.sock --run-dir $tmp/run --xen off
	EOF
	count < <(TAPSTRIPE_DISKDIR=$tmp/disks python3 "$here/units-run.py" \
		"$unitdir/tapdisk@.service" --instance gone --root "$root" \
		--work "$tmp/td-gone" --syslog "$tmp/syslog.sock" \
		--expect-failure 2>&1)
	if grep -q 'tapdisk/web1\[[0-9]*\]: .*serving' "$tmp/syslog.txt" 2>/dev/null; then
		pass "tapdisk@web1: log lines in syslog as tapdisk/web1"
	else
		fail "tapdisk@web1: no syslog line from tapdisk/web1:" \
			"$(head -3 "$tmp/syslog.txt" 2>/dev/null; tail -3 "$tmp/td/"*.log)"
	fi
fi

# --- stripe-master -----------------------------------------------------------------
# The shipped defaults file sets STRIPE_MASTER_OPTS and nothing else.
if [ "$(grep -v -e '^#' -e '^$' "$defaults")" = 'STRIPE_MASTER_OPTS=""' ]; then
	pass "stripe-master: the defaults file sets an empty STRIPE_MASTER_OPTS"
else
	fail "stripe-master: the defaults file: $(grep -v '^#' "$defaults")"
fi
# A port free now (the readiness check needs it before STATUS= says it).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "STRIPE_MASTER_OPTS=\"--listen 127.0.0.1:$port --extent-size 4M\"" >"$defaults"
mkdir -p "$tmp/master"
count < <(python3 "$here/units-run.py" "$unitdir/stripe-master.service" \
	--root "$root" --work "$tmp/master" --listening "tcp:127.0.0.1:$port" \
	--probe "$BUILDDIR/bin/stripe-ctl" --master "127.0.0.1:$port" \
	server list 2>&1)
if [ -s "$tmp/master/StateDirectory/tapstripe/master.db" ]; then
	pass "stripe-master: the database in its StateDirectory"
else
	fail "stripe-master: no master.db in StateDirectory: $(ls -R "$tmp/master" | head)"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
