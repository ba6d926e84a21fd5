#!/bin/bash
# setup.sh - install what is missing, build, and run the demo or every test.
#
#   ./setup.sh demo    install, build, serve a file over NBD with tap-ctl,
#                      write and read it back with nbdcopy, verify, print stats
#   ./setup.sh test    install, build, run every test: unit tests (plain, under
#                      ASan+UBSan, under valgrind), integration tests with real
#                      NBD clients, the format check, the fuzzers for a bounded
#                      time (FUZZ_SECONDS, default 30 each), and make distcheck
#   ./setup.sh deps    only install the Debian packages
#   ./setup.sh build   only build (in ./build)
#
# Needs Debian 12 (bookworm) and root (or sudo) for apt-get.  Build trees go
# to ./build (and ./build-san for the sanitizer build); nothing is installed
# system-wide by this script except Debian packages.
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)

PACKAGES="build-essential autoconf automake pkg-config libaio-dev
libcmocka-dev libnbd-bin qemu-utils fio valgrind clang clang-format
libclang-rt-14-dev python3 procps libxen-dev libtirpc-dev rpcsvc-proto
libsqlite3-dev"

say() { printf '\n== %s\n' "$*"; }

deps() {
	local missing=() p sudo=
	for p in $PACKAGES; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	say "installing: ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
}

build() { # dir [configure args...]
	local dir=$1
	shift
	[ -x configure ] && [ configure -nt configure.ac ] && [ Makefile.in -nt Makefile.am ] ||
		autoreconf -fi
	mkdir -p "$dir"
	(cd "$dir" && { [ -f Makefile ] || "$top/configure" -q "$@"; } && make -j"$jobs" >/dev/null)
}

demo() {
	local b=$top/build
	# Globals, not locals: the EXIT trap runs after demo() has returned.
	demo_tmp=$(mktemp -d /tmp/tapstripe-demo.XXXXXX)
	demo_id=
	trap '[ -n "${demo_id:-}" ] && "$top/build/tools/tap-ctl" destroy -i "$demo_id" >/dev/null 2>&1; rm -rf "${demo_tmp:-/nonexistent}"' EXIT
	local tmp=$demo_tmp id=
	local img=$tmp/disk.img sock=$tmp/nbd.sock
	say "a 64 MiB disk image, served over NBD by a background tapdisk"
	truncate -s 64M "$img"
	id=$("$b/tools/tap-ctl" create -a "aio:$img" --nbd "unix:$sock")
	demo_id=$id
	echo "tap-ctl create -a aio:$img --nbd unix:$sock  ->  tapdisk $id"
	"$b/tools/tap-ctl" list
	say "write 64 MiB of random data with nbdcopy, read it back, compare"
	head -c 64M /dev/urandom >"$tmp/data"
	nbdcopy "$tmp/data" "nbd+unix:///?socket=$sock"
	nbdcopy "nbd+unix:///?socket=$sock" "$tmp/back"
	cmp "$tmp/data" "$tmp/back" && echo "read back through NBD: identical"
	cmp "$tmp/data" "$img" && echo "backing file: identical"
	say "tapdisk's statistics"
	"$b/tools/tap-ctl" stats -i "$id"
	"$b/tools/tap-ctl" destroy -i "$id"
	demo_id=
	say "demo passed"
}

run_tests() {
	local b=$top/build s=$top/build-san failed=0
	say "format check (clang-format, .clang-format)"
	"$top/tests/check-format.sh" || failed=1
	say "unit and integration tests (make check)"
	(cd "$b" && make -j"$jobs" check) || { cat "$b"/tests/*/*.log 2>/dev/null | tail -80; failed=1; }
	say "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	build "$s" --enable-sanitizers
	(cd "$s" && make -j"$jobs" check TESTS='$(UNIT_TESTS)') || { cat "$s"/tests/unit/*.log | tail -80; failed=1; }
	say "unit tests under valgrind memcheck"
	"$top/tests/valgrind-unit.sh" "$b" || failed=1
	say "fuzzers, ${FUZZ_SECONDS:-30} s each (libFuzzer + ASan + UBSan)"
	FUZZ_OUT=$top/build-fuzz FUZZ_CONFIG_H=$b/config.h \
		"$top/tests/fuzz/run.sh" "${FUZZ_SECONDS:-30}" || failed=1
	say "make distcheck"
	(cd "$b" && make -j"$jobs" distcheck >"$b/distcheck.out" 2>&1) || { tail -60 "$b/distcheck.out"; failed=1; }
	[ $failed -eq 0 ] && say "all tests passed" || say "SOME TESTS FAILED"
	return $failed
}

case ${1:-} in
deps) deps ;;
build) deps; build build ;;
demo) deps; build build; demo ;;
test) deps; build build; run_tests ;;
-h|--help|"") sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; [ -n "${1:-}" ] ;;
*) echo "setup.sh: unknown command '$1' (demo, test, deps, build)" >&2; exit 2 ;;
esac
