#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# setup.sh - install what is missing, build, and run the demo or every test.
#
#   ./setup.sh demo    install, build, serve a file over NBD with tap-ctl,
#                      write and read it back with nbdcopy, verify, print stats;
#                      then (as root) a lab of 4 iSCSI servers capped at
#                      50 MiB/s each and a stripe master (tests/lab/lab.sh), a
#                      disk striped over them and one on a single server,
#                      verified and timed through tapdisk; DEMO_SERVERS (2-4),
#                      DEMO_RATE (MiB/s), DEMO_SECONDS change it
#   ./setup.sh test    install, build, run every test: unit, integration and
#                      fault tests (plain and under ASan+UBSan; the unit tests
#                      and nine others under valgrind), the format check, the end-to-end test
#                      (Xen 4.17 booted under QEMU, tests/e2e/run.sh: about
#                      5 minutes, needs root; E2E=0 leaves it out), the
#                      fuzzers for a bounded time (FUZZ_SECONDS, default 30
#                      each), the quick throughput regression (td-bench
#                      regress --quick), make distcheck, and (as root)
#                      the Debian packages: built, lintian, installed,
#                      the demo run with the installed programs, purged
#                      (tests/packages/run.sh; PACKAGES_TEST=0 leaves it out)
#   ./setup.sh deps    only install the Debian packages (all of them)
#   ./setup.sh build   only install the build packages and build (in ./build)
#
# Only `demo` and `test` install tgt and open-iscsi (and `test`
# etcd-server), and never start or enable their services (an iSCSI target
# on port 3260 has no place on a host that serves disks): the demo's and
# the tests' tgtd and etcd run in the foreground, started and stopped by
# tests/lab/lab.sh, tests/lab/etcd-lib.sh and the tests.
#
# Needs Debian 12 (bookworm) and root (or sudo) for apt-get.  Build trees go
# to ./build (and ./build-san for the sanitizer build); nothing is installed
# system-wide by this script except Debian packages (the package test
# installs tapstripe's own and purges them).
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)

# What `build` needs: compilers and libraries (configure names each; the
# Build-Depends of debian/control are these).  A host that only serves
# disks needs none of the packages below.
BUILD_PACKAGES="build-essential autoconf automake pkg-config python3
libaio-dev libcmocka-dev libxen-dev libtirpc-dev rpcsvc-proto libsqlite3-dev
libiscsi-dev libgnutls28-dev libsystemd-dev libcurl4-openssl-dev"
# What `demo` adds: NBD clients, and for the striped part the lab's tgtd
# servers (tests/lab/lab.sh runs tgtd itself, in network namespaces).
DEMO_PACKAGES="libnbd-bin qemu-utils procps tgt iproute2"
# What `test` adds.
TEST_PACKAGES="fio valgrind clang clang-format libclang-rt-14-dev
python3-libnbd qemu-system-x86 cpio bc gnuplot-nox libiscsi-bin open-iscsi
libfuse3-dev fuse3 gnutls-bin python3-prometheus-client man-db groff-base
debhelper lintian systemd etcd-server etcd-client"
# Packages that enable a service at boot when installed: tgt (an iSCSI
# target on port 3260), open-iscsi (iscsid) and etcd-server (a member on
# ports 2379/2380).  The demo and the tests start the daemons they need
# themselves, so when this script installs these it neither starts nor
# enables their services.
SERVICE_PACKAGES="tgt open-iscsi etcd-server"
# service_units PACKAGE: the units its installation enables.
service_units() {
	case $1 in
	tgt) echo tgt.service ;;
	open-iscsi) echo open-iscsi.service iscsid.service iscsid.socket ;;
	etcd-server) echo etcd.service ;;
	esac
}

say() { printf '\n== %s\n' "$*"; }

# deps PACKAGES...: install those missing.
deps() {
	local missing=() p sudo= services=() quiet= units
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	for p in "${missing[@]}"; do
		[[ " $SERVICE_PACKAGES " = *" $p "* ]] && services+=("$p")
	done
	say "installing: ${missing[*]}"
	$sudo apt-get update -qq
	if [ ${#services[@]} -gt 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
		# invoke-rc.d asks policy-rc.d first: 101 = do not start.
		printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
		$sudo chmod 755 /usr/sbin/policy-rc.d
		quiet=yes
	fi
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" ||
		{ [ -n "$quiet" ] && $sudo rm -f /usr/sbin/policy-rc.d; return 1; }
	[ -n "$quiet" ] && $sudo rm -f /usr/sbin/policy-rc.d
	[ ${#services[@]} -eq 0 ] && return 0
	units=$(for p in "${services[@]}"; do service_units "$p"; done)
	say "not started, not enabled at boot (the demo and the tests run their own daemons):" $units
	for p in $units; do
		$sudo deb-systemd-helper disable "$p" >/dev/null 2>&1 || true
	done
}

build() { # dir [configure args...]
	local dir=$1
	shift
	[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] ||
		autoreconf -fi
	mkdir -p "$dir"
	# The running host's paths, as the Debian package has them: sockets in
	# /run/tapstripe, maps and the master's store in /var/lib/tapstripe,
	# the disk registry in /etc/tapstripe.  A build tree configured
	# without them (before issue #20) is configured again.
	(cd "$dir" && { grep -qx 'runstatedir = /run' Makefile 2>/dev/null ||
		"$top/configure" -q --runstatedir=/run --localstatedir=/var \
			--sysconfdir=/etc "$@"; } && make -j"$jobs" >/dev/null)
}

demo() {
	local b=$top/build
	# Globals, not locals: the EXIT trap runs after demo() has returned.
	demo_tmp=$(mktemp -d /tmp/tapstripe-demo.XXXXXX)
	demo_id=
	demo_ids=
	demo_lab=
	trap demo_cleanup EXIT
	local tmp=$demo_tmp id=
	local img=$tmp/disk.img sock=$tmp/nbd.sock
	say "a 64 MiB disk image, served over NBD by a background tapdisk"
	truncate -s 64M "$img"
	id=$("$b/bin/tap-ctl" create -a "aio:$img" --nbd "unix:$sock")
	demo_id=$id
	echo "tap-ctl create -a aio:$img --nbd unix:$sock  ->  tapdisk $id"
	"$b/bin/tap-ctl" list
	say "write 64 MiB of random data with nbdcopy, read it back, compare"
	head -c 64M /dev/urandom >"$tmp/data"
	nbdcopy "$tmp/data" "nbd+unix:///?socket=$sock"
	nbdcopy "nbd+unix:///?socket=$sock" "$tmp/back"
	cmp "$tmp/data" "$tmp/back" && echo "read back through NBD: identical"
	cmp "$tmp/data" "$img" && echo "backing file: identical"
	say "tapdisk's statistics"
	"$b/bin/tap-ctl" stats -i "$id"
	"$b/bin/tap-ctl" destroy -i "$id"
	demo_id=
	demo_stripe
	say "demo passed"
}

# The EXIT trap of the demo: what it started, by id, and its files.
demo_cleanup() {
	local id
	for id in ${demo_id:-} ${demo_ids:-}; do
		"$top/build/bin/tap-ctl" destroy -i "$id" >/dev/null 2>&1
	done
	[ -n "${demo_lab:-}" ] && LAB_STATE=$demo_tmp/lab "$demo_lab" down >/dev/null 2>&1
	rm -rf "${demo_tmp:-/nonexistent}"
}

# demo_rate DISK RW: MiB/s of 1 MiB sequential I/O at QD 16 through the
# shm ring of the tapdisk serving DISK.
demo_rate() {
	"$top/build/bin/td-front" --shm "$demo_tmp/$1.shm" --rw "$2" --bs 1m --qd 16 \
		--ring-order 2 --max-segments 256 --size 256M --time "${DEMO_SECONDS:-5}" \
		--json --quiet --no-progress |
		python3 -c 'import json, sys; j = json.load(sys.stdin)
assert j["io_errors"] == 0, "I/O errors"
print("%.1f" % (j["bytes_per_s"] / 1048576))'
}

# The striped part: a lab of iSCSI servers with a bandwidth cap each, a
# disk striped over all of them and a one-column disk on one of them.
demo_stripe() {
	local b=$top/build n=${DEMO_SERVERS:-4} rate=${DEMO_RATE:-50} d id w r
	local -A mibs
	if [ "$(id -u)" -ne 0 ]; then
		say "striped disk: skipped (the lab of iSCSI servers needs root)"
		return 0
	fi
	if "$b/bin/tapdisk" -f -a stripe:/nonexistent.map 2>&1 | grep -q "unknown driver 'stripe'"; then
		say "striped disk: skipped (this build has no stripe driver yet)"
		return 0
	fi
	export LAB_STATE=$demo_tmp/lab LAB_NET=auto LAB_RATE=$rate LAB_SIZE=2G \
		LAB_EXTENT=64M BUILDDIR=$b
	demo_lab=$top/tests/lab/lab.sh
	say "a stripe master and $n iSCSI servers (tgtd in network namespaces), each capped at $rate MiB/s"
	"$demo_lab" up "$n" >/dev/null
	eval "$("$demo_lab" env)"
	"$b/bin/stripe-ctl" --master "$LAB_MASTER" server list

	say "a 1 GiB disk striped over $n servers and one on a single server, served by tapdisk"
	"$b/bin/stripe-ctl" --master "$LAB_MASTER" vdisk create striped --size 1G \
		--stripes "$n" --stripe-unit 1M -o "$demo_tmp/striped.map"
	"$b/bin/stripe-ctl" --master "$LAB_MASTER" vdisk create single --size 1G \
		--stripes 1 -o "$demo_tmp/single.map"
	for d in striped single; do
		id=$("$b/bin/tap-ctl" create -a "stripe:$demo_tmp/$d.map" --name "$d" \
			--nbd "unix:$demo_tmp/$d.nbd" --shm "$demo_tmp/$d.shm")
		demo_ids="$demo_ids $id"
		echo "tap-ctl create -a stripe:$demo_tmp/$d.map  ->  tapdisk $id"
		[ $d = striped ] && demo_striped_id=$id
	done

	say "verify the striped disk: td-front --verify (random 4 KiB..1 MiB I/O over 64 MiB), nbdcopy"
	"$b/bin/td-front" --shm "$demo_tmp/striped.shm" --verify --pattern rand \
		--bs 4k,64k,1m --qd 16 --size 64M --ring-order 2 --max-segments 256 --quiet \
		--no-progress | sed -n 's/^I\/O: */td-front --verify: /p'
	head -c 32M /dev/urandom >"$demo_tmp/data"
	nbdcopy "$demo_tmp/data" "nbd+unix:///?socket=$demo_tmp/striped.nbd"
	qemu-img dd -f raw -O raw bs=1M count=32 of="$demo_tmp/back" \
		if="nbd+unix:///?socket=$demo_tmp/striped.nbd"
	cmp "$demo_tmp/back" "$demo_tmp/data" &&
		echo "32 MiB written with nbdcopy and read back with qemu-img: identical"

	say "throughput: 1 MiB sequential I/O at QD 16, ${DEMO_SECONDS:-5} s each"
	for d in single striped; do
		for w in write read; do
			mibs[$d.$w]=$(demo_rate "$d" "$w")
		done
	done
	printf '%-28s %12s %12s\n' disk "write MiB/s" "read MiB/s" \
		"one server (1 column)" "${mibs[single.write]}" "${mibs[single.read]}" \
		"striped over $n servers" "${mibs[striped.write]}" "${mibs[striped.read]}"
	w=$(awk -v a="${mibs[striped.write]}" -v b="${mibs[single.write]}" 'BEGIN { printf "%.2f", a / b }')
	r=$(awk -v a="${mibs[striped.read]}" -v b="${mibs[single.read]}" 'BEGIN { printf "%.2f", a / b }')
	printf '%-28s %11sx %11sx\n' "striped / one server" "$w" "$r"

	say "tapdisk's statistics of the striped disk (tap-ctl stats)"
	"$b/bin/tap-ctl" stats -i "$demo_striped_id"
	say "the servers (tests/lab/lab.sh status)"
	"$demo_lab" status
	for id in $demo_ids; do "$b/bin/tap-ctl" destroy -i "$id"; done
	demo_ids=
	"$demo_lab" down
	demo_lab=
	awk -v w="$w" -v r="$r" 'BEGIN { exit !(w > 1.5 && r > 1.5) }' ||
		{ echo "the striped disk did not outrun the single server" >&2; return 1; }
}

# failed_logs DIR: the log of each test automake counted as failed (its
# .trs says FAIL or ERROR), the last 120 lines of each.
failed_logs() {
	local trs
	for trs in $(find "$1/tests" -name '*.trs' -exec grep -lE '^:test-result: (FAIL|ERROR)' {} + 2>/dev/null); do
		echo "==> ${trs%.trs}.log (last 120 lines) <=="
		tail -n 120 "${trs%.trs}.log"
	done
}

# sanitized_check DIR: make check in the sanitizer build DIR.  Every
# process the tests start (tapdisk, tap-ctl, stripe-master, td-front...)
# writes its ASan/LSan/UBSan report to DIR/sanitizer-reports/ instead of a
# stderr that a test may not look at; one report there fails the step.
sanitized_check() {
	local s=$1 reports=$1/sanitizer-reports f rc=0
	rm -rf "$reports"
	mkdir -p "$reports"
	(cd "$s" && ASAN_OPTIONS="log_path=$reports/asan" \
		UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1" \
		make -j"$jobs" check) || { failed_logs "$s"; rc=1; }
	for f in "$reports"/*; do
		[ -e "$f" ] || continue
		echo "sanitizer report $f:"
		head -n 60 "$f"
		rc=1
	done
	return $rc
}

run_tests() {
	local b=$top/build s=$top/build-san failed=0 fails=()
	# fail STEP: note that STEP failed; the list is printed at the end.
	fail() { failed=1; fails+=("$1"); }
	say "format check (clang-format, .clang-format)"
	"$top/tests/check-format.sh" || fail "format check"
	"$top/tests/check-layers.py" || fail "layer check"
	say "unit and integration tests (make check)"
	(cd "$b" && make -j"$jobs" check) || { failed_logs "$b"; fail "make check"; }
	if [ "${E2E:-1}" = 0 ]; then
		say "end-to-end test under Xen: LEFT OUT (E2E=0)"
	else
		say "end-to-end test: Xen 4.17 and a dom0 under QEMU (tests/e2e/run.sh)"
		# 77 (qemu could not be installed) is a failure here: deps
		# installed it, and CI must boot Xen every run.
		BUILDDIR=$b "$top/tests/e2e/run.sh" || fail "e2e under Xen"
	fi
	say "unit, integration and fault tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	build "$s" --enable-sanitizers
	sanitized_check "$s" || fail "make check under ASan+UBSan"
	say "unit tests under valgrind memcheck"
	"$top/tests/valgrind-unit.sh" "$b" || fail "unit tests under valgrind"
	say "integration and fault tests with tapdisk, stripe-master and the tools under valgrind"
	"$top/tests/valgrind-integration.sh" "$b" || fail "integration tests under valgrind"
	say "fuzzers, ${FUZZ_SECONDS:-30} s each (libFuzzer + ASan + UBSan)"
	FUZZ_OUT=$top/build-fuzz FUZZ_CONFIG_H=$b/config.h \
		"$top/tests/fuzz/run.sh" "${FUZZ_SECONDS:-30}" || fail "fuzzers"
	say "throughput regression, quick (td-bench regress --quick, ~1.5 minutes)"
	BUILDDIR=$b "$top/tools/td-bench/td-bench" regress --quick \
		--results-dir "$b/td-bench-results" || fail "td-bench regress"
	say "Linux patches: apply, build, modinfo, checkpatch (patches/verify)"
	"$top/patches/verify" || fail "Linux patches"
	say "make distcheck"
	(cd "$b" && make -j"$jobs" distcheck >"$b/distcheck.out" 2>&1) || { tail -60 "$b/distcheck.out"; fail "make distcheck"; }
	if [ "${PACKAGES_TEST:-1}" = 0 ]; then
		say "Debian packages: LEFT OUT (PACKAGES_TEST=0)"
	elif [ "$(id -u)" -ne 0 ]; then
		say "Debian packages: LEFT OUT (dpkg -i needs root)"
	else
		say "Debian packages: build, lintian, dpkg -i, the demo with the installed programs, units, man pages, purge (tests/packages/run.sh, about 1 minute)"
		"$top/tests/packages/run.sh" || fail "Debian packages"
	fi
	if [ $failed -ne 0 ]; then
		# CI keeps only the end of the output: repeat what failed here.
		say "what failed (details above)"
		printf '  - %s\n' "${fails[@]}"
		{ failed_logs "$b"; failed_logs "$s"; } | tail -n 80
	fi
	[ $failed -eq 0 ] && say "all tests passed" || say "SOME TESTS FAILED"
	return $failed
}

case ${1:-} in
deps) deps $BUILD_PACKAGES $DEMO_PACKAGES $TEST_PACKAGES ;;
build) deps $BUILD_PACKAGES; build build ;;
demo) deps $BUILD_PACKAGES $DEMO_PACKAGES; build build; demo ;;
test) deps $BUILD_PACKAGES $DEMO_PACKAGES $TEST_PACKAGES; build build; run_tests ;;
-h|--help|"") sed -n '3,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ] ;;
*) echo "setup.sh: unknown command '$1' (demo, test, deps, build)" >&2; exit 2 ;;
esac
