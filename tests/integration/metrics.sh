#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# metrics.sh - the machine interfaces of issue #20 item 6.
#
# Two tapdisks over aio: files in a private run directory, written and
# read over NBD with qemu-io; then
#   - tap-ctl list --json: a JSON array, one object per tapdisk with the
#     keys doc/tapdisk.md documents;
#   - tap-ctl stats --all (text and --json);
#   - tap-ctl metrics --output FILE: written atomically (no temporary file
#     left), parsed by prometheus_client's text-format parser, every
#     family with HELP and TYPE, and every value equal to what tap-ctl
#     stats --all --json says (metrics-check.py); the write counted;
#   - what users get wrong: --output in a missing directory, -i with
#     --all, an empty run directory;
#   - td-bench compare with a missing and with a garbage result or
#     baseline file: exit 2 and one line, never a traceback.
#
# Needs BUILDDIR (make check sets it), qemu-io (qemu-utils) and the
# system Python's prometheus_client (python3-prometheus-client); exits 77
# when one is missing.  About 5 s.
set -u

BUILDDIR=${BUILDDIR:-${abs_top_builddir:-.}}
HERE=$(cd "$(dirname "$0")" && pwd)
TAPCTL=$BUILDDIR/bin/tap-ctl
TDBENCH=$HERE/../../tools/td-bench/td-bench
CHECK=$HERE/metrics-check.py
STEP_TIMEOUT=30

command -v qemu-io >/dev/null || { echo "SKIP: qemu-io not found (qemu-utils)"; exit 77; }
# prometheus_client is the system Python's (a pyenv python3 on PATH lacks it)
PY=
for p in python3 /usr/bin/python3; do
	command -v "$p" >/dev/null && "$p" -c 'import prometheus_client' 2>/dev/null &&
		{ PY=$p; break; }
done
[ -n "$PY" ] || { echo "SKIP: no python3 with prometheus_client (python3-prometheus-client)"; exit 77; }
for prog in "$BUILDDIR/bin/tapdisk" "$TAPCTL"; do
	[ -x "$prog" ] || { echo "SKIP: $prog not built (set BUILDDIR)"; exit 77; }
done

TMP=$(mktemp -d /tmp/metrics-test.XXXXXX)
export TAPSTRIPE_RUNDIR=$TMP/run
export TAPDISK=$BUILDDIR/bin/tapdisk
mkdir -p "$TAPSTRIPE_RUNDIR" "$TMP/textfile"
IDS=()
passed=0
failed=0

cleanup() {
	local id
	for id in "${IDS[@]}"; do
		kill -KILL "$id" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

ok() {
	passed=$((passed + 1))
	echo "PASS: $1"
}

not_ok() {
	failed=$((failed + 1))
	echo "FAIL: $1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | head -20 | sed 's/^/    /'
}

# run WHAT...: sets OUT, ERR, RC.
run() {
	OUT=$(timeout "$STEP_TIMEOUT" "$@" 2>"$TMP/stderr")
	RC=$?
	ERR=$(cat "$TMP/stderr")
}

# The Python checker's PASS/FAIL lines are counted as ours.
count_lines() {
	local line
	while IFS= read -r line; do
		case $line in
		PASS:*) ok "${line#PASS: }" ;;
		FAIL:*) not_ok "${line#FAIL: }" ;;
		esac
	done <<<"$1"
}

# An empty run directory: nothing to say, and no error.
run "$TAPCTL" metrics
[ "$RC" = 0 ] && [ -z "$OUT" ] && ok "metrics with no tapdisk: empty, exit 0" ||
	not_ok "metrics with no tapdisk" "rc $RC; $OUT $ERR"
run "$TAPCTL" list --json
[ "$RC" = 0 ] && [ "$("$PY" -c 'import json,sys; print(json.load(sys.stdin))' <<<"$OUT")" = "[]" ] &&
	ok "list --json with no tapdisk: []" || not_ok "list --json with no tapdisk" "rc $RC; $OUT $ERR"

for d in d1 d2; do
	truncate -s 64M "$TMP/$d.img"
	run "$TAPCTL" create -a "aio:$TMP/$d.img" --name "$d" --nbd "unix:$TMP/$d.sock"
	if [ "$RC" = 0 ]; then
		IDS+=("$OUT")
	else
		not_ok "tap-ctl create $d" "$ERR"
		echo "$passed passed, $failed failed"
		exit 1
	fi
done

run qemu-io -f raw -c 'write -P 0x5a 0 1M' -c 'write -P 0x5b 4M 64k' -c 'read -P 0x5a 0 1M' \
	-c flush "nbd+unix:///?socket=$TMP/d1.sock"
[ "$RC" = 0 ] && ok "qemu-io wrote and read d1" || not_ok "qemu-io on d1" "$OUT $ERR"
run qemu-io -f raw -r -c 'read 0 512k' "nbd+unix:///?socket=$TMP/d2.sock"
[ "$RC" = 0 ] && ok "qemu-io read d2" || not_ok "qemu-io on d2" "$OUT $ERR"

# list --json: one object per tapdisk, with the documented keys.
run "$TAPCTL" list --json
out=$("$PY" - "${IDS[@]}" <<EOF 2>&1
import json, sys
disks = json.loads('''$OUT''')
ids = sorted(int(i) for i in sys.argv[1:])
assert sorted(d["pid"] for d in disks) == ids, disks
for d in disks:
    for key in ("pid", "name", "state", "chain", "size_bytes", "frontends"):
        assert key in d, (key, d)
    assert d["state"] == "running", d
    assert d["chain"] == "aio:$TMP/%s.img" % d["name"], d
    assert d["frontends"][0]["kind"] == "nbd", d
print("ok")
EOF
)
[ "$RC" = 0 ] && [ "$out" = ok ] && ok "list --json: both tapdisks, pid name state chain frontends" ||
	not_ok "list --json" "rc $RC; $out; $OUT $ERR"

run "$TAPCTL" stats --all
[ "$RC" = 0 ] && [ "$(grep -c '^tapdisk .*, vbd d[12] (running)' <<<"$OUT")" = 2 ] &&
	ok "stats --all: both tapdisks' tables" || not_ok "stats --all" "rc $RC; $OUT $ERR"

# metrics --output and stats --all --json, the disks idle in between.
PROM=$TMP/textfile/tapstripe.prom
run "$TAPCTL" metrics --output "$PROM"
rc_metrics=$RC err_metrics=$ERR
run "$TAPCTL" stats --all --json
echo "$OUT" >"$TMP/stats.json"
if [ "$rc_metrics" = 0 ] && [ "$RC" = 0 ] && [ -s "$PROM" ] &&
	[ "$(ls "$TMP/textfile")" = tapstripe.prom ]; then
	ok "metrics --output: the file written, no temporary file left"
else
	not_ok "metrics --output" "rc $rc_metrics $RC; $err_metrics $ERR; $(ls "$TMP/textfile")"
fi
count_lines "$("$PY" "$CHECK" "$PROM" "$TMP/stats.json" 2>&1 | sed 's/^Traceback/FAIL: Traceback/')"
grep -q '^tapstripe_io_requests_total{disk="d1",op="write"} 2$' "$PROM" &&
	grep -q '^tapstripe_io_bytes_total{disk="d1",op="write"} 1114112$' "$PROM" &&
	ok "d1's 2 writes (1 MiB + 64 KiB) counted" ||
	not_ok "d1's writes counted" "$(grep 'disk="d1",op="write"' "$PROM")"
run "$TAPCTL" metrics
[ "$RC" = 0 ] && [ "$(grep -v uptime <<<"$OUT")" = "$(grep -v uptime "$PROM")" ] &&
	ok "metrics on stdout: the same as the file" || not_ok "metrics on stdout" "rc $RC; $ERR"

# What users get wrong.
run "$TAPCTL" metrics --output "$TMP/nodir/x.prom"
[ "$RC" = 1 ] && grep -q "cannot create $TMP/nodir/x.prom.tmp" <<<"$ERR" &&
	ok "--output in a missing directory: exit 1, the file named" || not_ok "--output nodir" "rc $RC; $ERR"
run "$TAPCTL" stats -i "${IDS[0]}" --all
[ "$RC" = 2 ] && grep -q "not both" <<<"$ERR" && ok "stats -i ID --all: exit 2" ||
	not_ok "stats -i --all" "rc $RC; $ERR"
run "$TAPCTL" stats
[ "$RC" = 2 ] && grep -q -- "--all" <<<"$ERR" && ok "stats without -i or --all: exit 2" ||
	not_ok "stats alone" "rc $RC; $ERR"

for id in "${IDS[@]}"; do
	run "$TAPCTL" destroy -i "$id"
	[ "$RC" = 0 ] || not_ok "destroy $id" "$ERR"
done
IDS=()

# td-bench: a missing and a garbage file, exit 2 and one line.
if command -v python3 >/dev/null && [ -x "$TDBENCH" ]; then
	echo garbage >"$TMP/garbage.json"
	echo '{"figures": {"x": 1}}' >"$TMP/bad.json"
	for args in "compare $TMP/none.json --baseline $TMP/garbage.json" \
		"compare $TMP/garbage.json --baseline $TMP/garbage.json" \
		"compare $TMP/bad.json --baseline $TMP/garbage.json" \
		"compare $TMP/stats.json --baseline $TMP/none.json" \
		"baseline $TMP/garbage.json --baseline $TMP/b.json"; do
		# shellcheck disable=SC2086
		run "$TDBENCH" $args
		lines=$(grep -c . <<<"$ERR")
		if [ "$RC" = 2 ] && [ "$lines" = 1 ] && grep -q "^td-bench: .*json" <<<"$ERR" &&
			! grep -q Traceback <<<"$ERR"; then
			ok "td-bench ${args%% *} (${args#* }): exit 2, one line"
		else
			not_ok "td-bench $args" "rc $RC; $ERR"
		fi
	done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
