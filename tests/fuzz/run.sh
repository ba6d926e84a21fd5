#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh [SECONDS [NAME...]] - build every libFuzzer harness of tests/fuzz
# with clang (-fsanitize=fuzzer,address,undefined) and run each one (or
# only the NAMEs: blkif, master, ...) for SECONDS (default 30) over its
# seed corpus in tests/fuzz/corpus/<name>/.  Exits non-zero when a harness
# does not build or any run finds a crash, a leak, a timeout or a
# sanitizer error (the reproducer is left in the output directory).
#
# Environment: FUZZ_OUT, where binaries, the growing corpus and crash
# artifacts go (default /tmp/tapstripe-fuzz); FUZZ_RUNS, stop each run
# after that many executions instead (SECONDS still bounds it: give a
# large one); FUZZ_FORK, run each harness as libFuzzer's -fork=N, N
# worker processes whose executions add up (-runs counts them all;
# timeouts and out-of-memory still fail the run, as without it);
# FUZZ_CONFIG_H, a configured build's config.h (default: a
# minimal one).  Needs clang, libFuzzer, rpcgen, libtirpc and SQLite
# (Debian: clang, libclang-rt-14-dev, rpcsvc-proto, libtirpc-dev,
# libsqlite3-dev).  `make fuzz` runs this.
set -eu
secs=${1:-30}
shift || true
only=" $* "
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_OUT:-/tmp/tapstripe-fuzz}
cc=$(command -v clang-14 || command -v clang) ||
	{ echo "clang missing (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
case $secs in '' | *[!0-9]*) echo "usage: $0 [SECONDS [NAME...]]" >&2; exit 2 ;; esac
for name in "$@"; do
	[ -f "$top/tests/fuzz/fuzz_$name.c" ] ||
		{ echo "$0: no harness tests/fuzz/fuzz_$name.c" >&2; exit 2; }
done

mkdir -p "$out"
if [ -n "${FUZZ_CONFIG_H:-}" ] && [ -f "$FUZZ_CONFIG_H" ]; then
	cp "$FUZZ_CONFIG_H" "$out/config.h"
else
	printf '#define _GNU_SOURCE 1\n' >"$out/config.h"
fi

# The warnings of configure.ac's WARN_CFLAGS.
WARN="-Wall -Wextra -Wshadow -Wpointer-arith -Wformat=2 -Wmissing-prototypes
	-Wstrict-prototypes -Wno-unused-parameter -Werror"
SAN="address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# The configure paths Makefile.am passes (AM_CPPFLAGS), Debian's values.
PATHS='-DTAPSTRIPE_RUNDIR="/run/tapstripe" -DTAPSTRIPE_STATEDIR="/var/lib/tapstripe"'
LIBFLAGS="-g -O1 -fsanitize=fuzzer-no-link,$SAN $WARN $PATHS -I$top -I$out"
EXEFLAGS="-g -O1 -fsanitize=fuzzer,$SAN $WARN $PATHS -I$top -I$out"

# Every harness links one archive of the core (common/, tapdisk/,
# frontends/, the null driver,
# the mapping file), instrumented; the linker takes the objects it needs.
# A file that does not build (work in progress elsewhere) is left out with
# a warning: the link says whether a harness needed it.
# archive NAME EXTRA_FLAGS SOURCES...: build SOURCES into $out/NAME.
archive() {
	local lib=$1 flags=$2 src obj objs=()
	shift 2
	mkdir -p "$out/obj"
	echo "== build $lib"
	for src in "$@"; do
		obj=$out/obj/$(basename "$(dirname "$src")")-$(basename "$src" .c).o
		# shellcheck disable=SC2086 # word splitting of the flags is wanted
		if "$cc" $LIBFLAGS $flags -c -o "$obj" "$src" 2>"$obj.log"; then
			objs+=("$obj")
		else
			echo "warning: ${src#"$top"/} does not build, left out" \
				"(see $obj.log)" >&2
		fi
	done
	rm -f "$out/$lib"
	ar rcs "$out/$lib" "${objs[@]}"
}
archive libcore.a "" "$top"/common/*.c "$top"/tapdisk/*.c \
	"$top"/tapdisk/control/*.c "$top"/frontends/*/*.c \
	"$top"/drivers/null/block-null.c "$top"/drivers/stripe/map/*.c

# The master (fuzz_master): rpcgen's protocol code as Makefile.am makes it,
# the store, the dispatcher, the etcd client of its replicated store;
# libtirpc, SQLite and libcurl come from the system.
RPC_CFLAGS="$(pkg-config --cflags libtirpc) $(pkg-config --cflags libcurl)"
RPC_LIBS="$(pkg-config --libs libtirpc) -lsqlite3 $(pkg-config --libs libcurl)"
mkdir -p "$out/master"
rpcgen -h <"$top/master/stripe.x" |
	sed 's/_STDIN_H_RPCGEN/TAPSTRIPE_STRIPE_H_RPCGEN/' >"$out/master/stripe.h"
{
	echo '#include "master/stripe.h"'
	rpcgen -c <"$top/master/stripe.x"
} >"$out/master/stripe_xdr.c"
archive libmaster.a "$RPC_CFLAGS -Wno-unused-variable -Wno-unused-parameter" \
	"$out/master/stripe_xdr.c" "$top"/master/*.c "$top"/master/server/*.c \
	"$top"/master/client/*.c "$top"/master/etcd/*.c

# libcore.a's control server reports the Xen transport's counters, so a
# harness that pulls in the control code needs Xen's libraries too; the
# NBD server's TLS needs GnuTLS (libgnutls28-dev).
# The snapshot job's commit (tapdisk/fsync-async.c) syncs through libaio.
XEN_LIBS="$(pkg-config --libs xenstore xengnttab xenevtchn) $(pkg-config --libs gnutls) -laio"
# fuzz_nbd-tls replaces GnuTLS's handshake and record layer with
# pass-through stubs, at the library boundary.
TLS_WRAP=-Wl
for f in handshake record_recv record_send record_cork record_uncork \
	record_check_pending record_get_direction bye; do
	TLS_WRAP=$TLS_WRAP,--wrap=gnutls_$f
done

fail=0
for h in "$top"/tests/fuzz/fuzz_*.c; do
	name=$(basename "$h" .c)
	name=${name#fuzz_}
	bin=$out/fuzz_$name
	[ "$only" = "  " ] || [[ $only == *" $name "* ]] || continue
	echo "== build $name"
	extra=
	[ "$name" = master ] && extra="$RPC_CFLAGS $out/libmaster.a $RPC_LIBS"
	[ "$name" = nbd-tls ] && extra=$TLS_WRAP
	# shellcheck disable=SC2086
	if ! "$cc" $EXEFLAGS -o "$bin" "$h" $extra "$out/libcore.a" $XEN_LIBS; then
		echo "FAILED to build $name" >&2
		fail=1
		continue
	fi
	mkdir -p "$out/corpus-$name" "$out/artifacts-$name"
	seeds=$top/tests/fuzz/corpus/$name
	[ -d "$seeds" ] || seeds=
	# The largest input.  A harness's time per input grows with its
	# size, and libFuzzer lets inputs grow to the limit, so the limit is
	# what the format needs: 64 KiB for an NBD client (handshake and
	# writes with their payloads), the shm negotiation, mapping files and
	# RPC calls; 16 KiB for the rings, which holds a full ring of order 2
	# (128 slots of 112 bytes) or several rounds of a smaller one, while
	# the indirect pages beyond the input read as zeroes, so requests of
	# 4096 segments are still made (at 64 KiB fuzz_blkif-xen fell to 750
	# inputs a second); 1 KiB for the control socket, twice its longest
	# line (TD_CTL_LINE_MAX) and already a hundred commands, each
	# formatting a reply (stats: kilobytes of JSON).
	case $name in
	blkif | blkif-xen) max_len=16384 ;;
	control) max_len=1024 ;;
	*) max_len=65536 ;;
	esac
	echo "== run $name for ${secs}s${FUZZ_RUNS:+ or $FUZZ_RUNS executions}"
	# shellcheck disable=SC2046 # the fork options are separate words
	if "$bin" -max_total_time="$secs" ${FUZZ_RUNS:+-runs="$FUZZ_RUNS"} \
		$([ -z "${FUZZ_FORK:-}" ] || echo "-fork=$FUZZ_FORK" \
			-ignore_timeouts=0 -ignore_ooms=0 -ignore_crashes=0) \
		-print_final_stats=1 \
		-max_len=$max_len -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$out/artifacts-$name/" \
		"$out/corpus-$name" ${seeds:+"$seeds"} >"$out/$name.log" 2>&1; then
		grep -E '^stat::(number_of_executed_units|average_exec_per_sec)|^INFO: (fuzzed for|exiting)' \
			"$out/$name.log" | sed "s/^/$name: /"
	else
		echo "FAILED: $name crashed; see $out/$name.log and" \
			"$out/artifacts-$name/" >&2
		grep -E 'ERROR|SUMMARY|check failed' "$out/$name.log" | head -5 >&2
		fail=1
	fi
done
exit $fail
