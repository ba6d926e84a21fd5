#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# tap-ctl.sh - tapdisk and tap-ctl end to end, with real NBD clients.
#
# Creates tapdisks over null: and aio: chains in a temporary run directory,
# lists them, reads their stats (text and JSON), pauses one while a
# qemu-io read waits on it, destroys them, checks the error messages and
# exit codes a user sees, and stops a foreground tapdisk with SIGTERM.
#
# Needs: BUILDDIR (the build tree; make check sets it), nbdinfo (libnbd-bin),
# qemu-io (qemu-utils), python3.  Exits 77 (skipped) when one is missing.
set -u

BUILDDIR=${BUILDDIR:-${abs_top_builddir:-.}}
TAPDISK=$BUILDDIR/bin/tapdisk
TAPCTL=$BUILDDIR/bin/tap-ctl
STEP_TIMEOUT=30

for tool in nbdinfo qemu-io python3 timeout; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not found (nbdinfo: libnbd-bin, qemu-io: qemu-utils)"
		exit 77
	fi
done
for prog in "$TAPDISK" "$TAPCTL"; do
	if [ ! -x "$prog" ]; then
		echo "SKIP: $prog not built (set BUILDDIR to the build tree)"
		exit 77
	fi
done

TMP=$(mktemp -d /tmp/tap-ctl-test.XXXXXX)
RUNDIR=$TMP/run
export TAPSTRIPE_RUNDIR=$RUNDIR
export TAPDISK
PIDS=()
passed=0
failed=0

cleanup() {
	for pid in "${PIDS[@]}"; do
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

ok() {
	passed=$((passed + 1))
	echo "ok $((passed + failed)) - $1"
}

not_ok() {
	failed=$((failed + 1))
	echo "FAIL $((passed + failed)) - $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    /'
}

# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
	local what=$1
	shift
	if out=$("$@" 2>&1); then ok "$what"; else not_ok "$what" "$out"; fi
}

# run_ctl: tap-ctl with a time limit; sets OUT, ERR and RC.
run_ctl() {
	OUT=$(timeout "$STEP_TIMEOUT" "$TAPCTL" "$@" 2>"$TMP/stderr")
	RC=$?
	ERR=$(cat "$TMP/stderr")
}

# expect_fail DESCRIPTION STATUS PATTERN ARGS...: tap-ctl ARGS exits with
# STATUS and says PATTERN on stderr.
expect_fail() {
	local what=$1 status=$2 pattern=$3
	shift 3
	run_ctl "$@"
	if [ "$RC" -eq "$status" ] && grep -q -- "$pattern" <<<"$ERR"; then
		ok "$what"
	else
		not_ok "$what" "status $RC (want $status), stderr: $ERR"
	fi
}

# gone PID: the process has exited (a zombie counts: in some containers
# nobody reaps the orphans that tap-ctl create leaves to init).
gone() {
	! kill -0 "$1" 2>/dev/null ||
		[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

nbd_url() {
	echo "nbd+unix:///?socket=$1"
}

create() {
	run_ctl create "$@"
	if [ "$RC" -eq 0 ] && [[ "$OUT" =~ ^[0-9]+$ ]]; then
		PIDS+=("$OUT")
		return 0
	fi
	echo "create $* failed ($RC): $OUT $ERR" >&2
	return 1
}

# --- help and usage -----------------------------------------------------------

run_ctl --help
[ "$RC" -eq 0 ] && grep -q SYNOPSIS <<<"$OUT" && ok "tap-ctl --help" ||
	not_ok "tap-ctl --help" "$RC $OUT"
ok_all=1
for sub in create list info stats pause resume destroy; do
	run_ctl "$sub" --help
	if [ "$RC" -ne 0 ] || ! grep -q "Usage: tap-ctl $sub" <<<"$OUT"; then
		ok_all=0
	fi
done
[ $ok_all -eq 1 ] && ok "every subcommand has --help" ||
	not_ok "every subcommand has --help"
if "$TAPDISK" --help | grep -q "EXIT STATUS"; then ok "tapdisk --help"; else
	not_ok "tapdisk --help"; fi
expect_fail "unknown subcommand is a usage error" 2 "unknown command" frob
expect_fail "create without -a is a usage error" 2 "give the disk with -a" create
expect_fail "info without -i is a usage error" 2 "give -i ID" info
expect_fail "bad -i is a usage error" 2 "wants a tapdisk id" pause -i abc
"$TAPDISK" -a null: >/dev/null 2>"$TMP/stderr"
rc=$?
if [ $rc -eq 2 ] && grep -q "tap-ctl create" "$TMP/stderr"; then
	ok "tapdisk without --foreground points to tap-ctl create"
else
	not_ok "tapdisk without --foreground points to tap-ctl create" "$rc"
fi

# --- a null: disk ---------------------------------------------------------------

if create -a null:size=1G --nbd unix --name t-null; then
	ok "create null:size=1G"
	NULL_ID=$OUT
else
	not_ok "create null:size=1G"
	echo "$passed passed, $failed failed"
	exit 1
fi
NULL_SOCK=$RUNDIR/nbd-t-null.sock

run_ctl list
if [ "$RC" -eq 0 ] && grep -qx "id=$NULL_ID name=t-null state=running chain=null:size=1G nbd=unix:$NULL_SOCK" <<<"$OUT"; then
	ok "list shows the tapdisk"
else
	not_ok "list shows the tapdisk" "$OUT $ERR"
fi

run_ctl info -i "$NULL_ID"
if [ "$RC" -eq 0 ] && grep -qx "size_bytes: 1073741824" <<<"$OUT" &&
	grep -qx "frontend: nbd unix:$NULL_SOCK" <<<"$OUT"; then
	ok "info"
else
	not_ok "info" "$OUT $ERR"
fi

size=$(timeout "$STEP_TIMEOUT" nbdinfo --size "$(nbd_url "$NULL_SOCK")" 2>&1)
[ "$size" = 1073741824 ] && ok "nbdinfo sees 1 GiB" || not_ok "nbdinfo sees 1 GiB" "$size"

check "qemu-io writes and reads over NBD" timeout "$STEP_TIMEOUT" qemu-io -f raw \
	-c 'write -P 0xab 0 1M' -c 'read -P 0 1M 64k' "$(nbd_url "$NULL_SOCK")"

run_ctl stats -i "$NULL_ID"
if [ "$RC" -eq 0 ] && grep -q "^write  *1  *1.00 MiB" <<<"$OUT" &&
	grep -q "segments per request" <<<"$OUT" && grep -q "p99.9" <<<"$OUT" &&
	grep -q "backend_submits" <<<"$OUT"; then
	ok "stats (text)"
else
	not_ok "stats (text)" "$OUT $ERR"
fi

run_ctl stats -i "$NULL_ID" --json
if [ "$RC" -eq 0 ] && python3 -m json.tool <<<"$OUT" >/dev/null &&
	python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
assert s["ops"]["write"]["requests"] == 1, s["ops"]
assert s["ops"]["write"]["bytes"] == 1 << 20
assert s["ops"]["read"]["requests"] == 1
assert s["inflight"] == 0
assert s["nbd"]["clients_total"] >= 2
assert "p99_9" in s["latency_us"]
assert s["cpu_us"]["user"] + s["cpu_us"]["sys"] >= 0
assert len(s["segments_per_request"]) == 13
assert "backend_submits" in s["counters"]
' <<<"$OUT"; then
	ok "stats --json is valid JSON with the counters"
else
	not_ok "stats --json is valid JSON with the counters" "$OUT $ERR"
fi

# --- pause holds I/O until resume -------------------------------------------------

run_ctl pause -i "$NULL_ID"
[ "$RC" -eq 0 ] && ok "pause" || not_ok "pause" "$ERR"
expect_fail "pause twice says already paused" 1 "already paused" pause -i "$NULL_ID"
: >"$TMP/order"
(
	timeout "$STEP_TIMEOUT" qemu-io -f raw -c 'read -P 0 0 64k' \
		"$(nbd_url "$NULL_SOCK")" >"$TMP/qemu-io.out" 2>&1
	echo "read-done $?" >>"$TMP/order"
) &
reader=$!
sleep 1
run_ctl list
if kill -0 "$reader" 2>/dev/null && [ ! -s "$TMP/order" ] &&
	grep -q "id=$NULL_ID .*state=paused" <<<"$OUT"; then
	ok "a read waits while paused"
else
	not_ok "a read waits while paused" "$(cat "$TMP/order") $OUT"
fi
run_ctl stats -i "$NULL_ID" --json
python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["inflight"] >= 1 and s["state"] == "paused", s' <<<"$OUT" 2>/dev/null &&
	ok "stats shows the held read in flight" || not_ok "stats shows the held read in flight" "$OUT"
echo resume >>"$TMP/order"
run_ctl resume -i "$NULL_ID"
wait "$reader"
if [ "$RC" -eq 0 ] && [ "$(cat "$TMP/order")" = "$(printf 'resume\nread-done 0')" ]; then
	ok "the read completes after resume, not before"
else
	not_ok "the read completes after resume, not before" "$(cat "$TMP/order" "$TMP/qemu-io.out")"
fi
expect_fail "resume twice says not paused" 1 "not paused" resume -i "$NULL_ID"

# --- the control socket survives garbage -------------------------------------------

reply=$(python3 - "$RUNDIR/tapdisk-$NULL_ID.sock" <<'EOF'
import socket, sys
out = []
for payload in (b"\x00\xff\xfe garbage\n", b"a" * 2000, b"frobnicate\n"):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(payload)
    s.settimeout(5)
    out.append(s.recv(4096).decode().split(" ")[1])
    s.close()
print(" ".join(out))
EOF
)
[ "$reply" = "EPROTO E2BIG ENOSYS" ] && ok "garbage, long and unknown requests get errors" ||
	not_ok "garbage, long and unknown requests get errors" "$reply"
run_ctl info -i "$NULL_ID"
[ "$RC" -eq 0 ] && ok "tapdisk still answers after garbage" ||
	not_ok "tapdisk still answers after garbage" "$ERR"

# --- destroy ---------------------------------------------------------------------

run_ctl pause -i "$NULL_ID"
run_ctl destroy -i "$NULL_ID"
if [ "$RC" -eq 0 ] && grep -q "all acknowledged writes flushed" <<<"$OUT" &&
	gone "$NULL_ID" && [ ! -e "$RUNDIR/tapdisk-$NULL_ID.sock" ] &&
	[ ! -e "$NULL_SOCK" ]; then
	ok "destroy (of a paused tapdisk) flushes, exits and removes its sockets"
else
	not_ok "destroy flushes, exits and removes its sockets" "$RC $OUT $ERR"
fi
run_ctl list
[ "$RC" -eq 0 ] && [ -z "$OUT" ] && ok "list is empty after destroy" ||
	not_ok "list is empty after destroy" "$OUT"
expect_fail "destroy of an unknown id" 1 "no tapdisk with id 999999" destroy -i 999999
expect_fail "stats of an unknown id" 1 "see 'tap-ctl list'" stats -i 999999

# --- an aio: disk: writes reach the file -----------------------------------------------

IMG=$TMP/disk.img
truncate -s 64M "$IMG"
if create -a "aio:$IMG" --nbd "unix:$TMP/aio.sock" --name t-aio; then
	AIO_ID=$OUT
	check "qemu-io writes through aio" timeout "$STEP_TIMEOUT" qemu-io -f raw \
		-c 'write -P 0xcd 4096 1M' "$(nbd_url "$TMP/aio.sock")"
	run_ctl destroy -i "$AIO_ID"
	[ "$RC" -eq 0 ] && ok "destroy the aio tapdisk" || not_ok "destroy the aio tapdisk" "$ERR"
	check "the data is in the file" qemu-io -f raw -c 'read -P 0xcd 4096 1M' \
		-c 'read -P 0 0 4096' "$IMG"
else
	not_ok "create aio:$IMG" "$ERR"
fi

# A write held by pause is finished, acknowledged and flushed by destroy.
if create -a "aio:$IMG" --nbd "unix:$TMP/aio2.sock"; then
	AIO_ID=$OUT
	run_ctl pause -i "$AIO_ID"
	timeout "$STEP_TIMEOUT" qemu-io -f raw -c 'write -P 0x5a 2M 1M' \
		"$(nbd_url "$TMP/aio2.sock")" >"$TMP/held.out" 2>&1 &
	writer=$!
	sleep 1
	run_ctl destroy -i "$AIO_ID"
	destroy_rc=$RC
	wait "$writer"
	writer_rc=$?
	if [ "$destroy_rc" -eq 0 ] && [ "$writer_rc" -eq 0 ] &&
		qemu-io -f raw -c 'read -P 0x5a 2M 1M' "$IMG" >/dev/null 2>&1; then
		ok "destroy of a paused tapdisk completes the held write into the file"
	else
		not_ok "destroy of a paused tapdisk completes the held write into the file" \
			"destroy $destroy_rc, writer $writer_rc: $(cat "$TMP/held.out")"
	fi
else
	not_ok "create aio:$IMG again" "$ERR"
fi

if create -a "aio:$IMG" --nbd "unix:$TMP/ro.sock" --read-only; then
	RO_ID=$OUT
	run_ctl info -i "$RO_ID"
	grep -qx "read_only: yes" <<<"$OUT" && ok "--read-only shows in info" ||
		not_ok "--read-only shows in info" "$OUT"
	ro=$(timeout "$STEP_TIMEOUT" nbdinfo "$(nbd_url "$TMP/ro.sock")" 2>&1)
	if grep -q "is_read_only: true" <<<"$ro" &&
		! timeout "$STEP_TIMEOUT" qemu-io -f raw -c 'write 0 4k' \
			"$(nbd_url "$TMP/ro.sock")" >/dev/null 2>&1; then
		ok "a read-only tapdisk says so over NBD and refuses writes"
	else
		not_ok "a read-only tapdisk says so over NBD and refuses writes" "$ro"
	fi
	run_ctl destroy -i "$RO_ID"
	[ "$RC" -eq 0 ] && ok "destroy the read-only tapdisk" ||
		not_ok "destroy the read-only tapdisk" "$ERR"
else
	not_ok "create --read-only"
fi

# --- create passes tapdisk's options on (one table, tools/tapdisk/tapdisk-options.h)

if create -a null:size=64M --log-file "$TMP/create.log" --xen off --name t-log; then
	LOG_ID=$OUT
	if grep -q "serving null:size=64M as t-log" "$TMP/create.log" 2>/dev/null; then
		ok "create --log-file: the log lands in the file"
	else
		not_ok "create --log-file: the log lands in the file" "$(cat "$TMP/create.log" 2>&1)"
	fi
	run_ctl destroy -i "$LOG_ID"
	[ "$RC" -eq 0 ] && ok "destroy the --log-file tapdisk" ||
		not_ok "destroy the --log-file tapdisk" "$ERR"
else
	not_ok "create --log-file --xen off" "$ERR"
fi
expect_fail "create passes --xen on: tapdisk's own usage error is shown" 1 \
	"xen wants auto, on or off" create -a null: --xen bogus
same=1
for opt in "-a, --chain" "--xen" "--log-file" "--max-inflight" "--nbd"; do
	a=$("$TAPCTL" create --help | grep -- "^    $opt ")
	b=$("$TAPDISK" --help | grep -- "^    $opt ")
	[ -n "$a" ] && [ "$a" = "$b" ] || same=0
done
[ $same -eq 1 ] && ok "create --help and tapdisk --help describe the options alike" ||
	not_ok "create --help and tapdisk --help describe the options alike"

# --- create errors carry tapdisk's own message --------------------------------------

expect_fail "bad chain: unknown driver" 1 "unknown driver 'foo'" create -a foo:bar --nbd unix
expect_fail "missing file" 1 "No such file or directory" create -a aio:$TMP/missing.img --nbd unix
expect_fail "bad null size" 1 "not a positive multiple of 512" create -a null:size=3
expect_fail "bad NBD address" 1 "bad --nbd address" create -a null: --nbd tcp:nohost
expect_fail "NBD address in use" 1 "cannot serve NBD" create -a null: --nbd "unix:$TMP/no-dir/x.sock"
leftover=$(ls "$RUNDIR"/tapdisk-*.sock 2>/dev/null)
[ -z "$leftover" ] && ok "failed creates leave no sockets" || not_ok "failed creates leave no sockets" "$leftover"

# --- stale sockets are skipped and removed ------------------------------------------------

stale=4194000
while kill -0 "$stale" 2>/dev/null; do stale=$((stale + 1)); done
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' \
	"$RUNDIR/tapdisk-$stale.sock"
run_ctl list
if [ "$RC" -eq 0 ] && [ -z "$OUT" ] && [ ! -e "$RUNDIR/tapdisk-$stale.sock" ]; then
	ok "list skips and removes a dead tapdisk's socket"
else
	not_ok "list skips and removes a dead tapdisk's socket" "$OUT $ERR"
fi

# --- tapdisk --foreground stops cleanly on SIGTERM -----------------------------------------

"$TAPDISK" --foreground -a null:size=64M --nbd "unix:$TMP/fg.sock" --name fg \
	--run-dir "$RUNDIR" --log-file "$TMP/fg.log" &
FG=$!
PIDS+=("$FG")
for _ in $(seq 100); do
	[ -S "$RUNDIR/tapdisk-$FG.sock" ] && break
	sleep 0.05
done
timeout "$STEP_TIMEOUT" qemu-io -f raw -c 'write 0 64k' "$(nbd_url "$TMP/fg.sock")" >/dev/null 2>&1
run_ctl info -i "$FG"
[ "$RC" -eq 0 ] && grep -qx "name: fg" <<<"$OUT" && ok "foreground tapdisk answers tap-ctl" ||
	not_ok "foreground tapdisk answers tap-ctl" "$ERR"
kill -TERM "$FG"
wait "$FG"
rc=$?
if [ $rc -eq 0 ] && [ ! -e "$RUNDIR/tapdisk-$FG.sock" ] && [ ! -e "$TMP/fg.sock" ] &&
	grep -q "all acknowledged writes flushed" "$TMP/fg.log"; then
	ok "SIGTERM: exit 0, flushed, sockets removed"
else
	not_ok "SIGTERM: exit 0, flushed, sockets removed" "status $rc; $(cat "$TMP/fg.log")"
fi

# Background tapdisks write to their logs: a sanitizer report lands there.
reports=$(grep -l "AddressSanitizer\|runtime error:\|LeakSanitizer" \
	"$RUNDIR"/*.log "$TMP"/*.log 2>/dev/null)
[ -z "$reports" ] && ok "no sanitizer reports in the tapdisk logs" ||
	not_ok "no sanitizer reports in the tapdisk logs" "$(cat $reports)"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
