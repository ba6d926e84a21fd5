#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-admission.sh - clients that hold NBD slots cannot keep a newcomer
# from the disk (issue #17, item 1).
#
# tapdisk serves a null disk on 127.0.0.1:PORT (a port free at run time)
# with short deadlines (--nbd-handshake-timeout 2, --nbd-io-timeout 2).
# For each hold (nbd-admission.py: 16 and 1000 clients left idle after
# NBD_OPT_GO, in the middle of a WRITE's payload, in the middle of a
# request header, or in the handshake), a newcomer (`nbdinfo
# nbd://127.0.0.1:PORT`, retried every 0.2 s) must be served within the
# timeout plus a second; a client refused meanwhile must have been told
# why (NBD_REP_ERR_POLICY with a message, which nbdinfo prints).  Then
# `tap-ctl nbd list [--json]` shows the connections and `tap-ctl nbd
# drop` closes one; the --nbd-* options are checked at start and passed
# on by `tap-ctl create`.
#
# Prints one line per check and "N passed, N failed"; exits 0, 1, or 77
# (automake's skip) when nbdinfo or python3 is missing.  BUILDDIR (set by
# make check) is where bin/tapdisk was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
HOLD=$(cd "$(dirname "$0")" && pwd)/nbd-admission.py
TIMEOUT_S=2

nbd_need nbdinfo python3
nbd_built "$TAPDISK" "$TAPCTL"
nbd_workdir nbd-admission
HOLD_PID= OPTS_PID=
nbd_cleanup_more() {
	[ -n "$OPTS_PID" ] && kill -KILL "$OPTS_PID" 2>/dev/null
	[ -n "$HOLD_PID" ] && kill "$HOLD_PID" 2>/dev/null && wait "$HOLD_PID" 2>/dev/null
}

PORT=$(nbd_free_port) || { echo "FAIL: no free port"; exit 1; }
ADDR=tcp:127.0.0.1:$PORT
URI=nbd://127.0.0.1:$PORT
"$TAPDISK" --foreground -a null:size=64M --nbd "$ADDR" --run-dir "$WORK" \
	--name admission --nbd-handshake-timeout $TIMEOUT_S \
	--nbd-io-timeout $TIMEOUT_S --log-file "$WORK/tapdisk.log" &
TD_PID=$!
nbd_wait "$URI" "$TD_PID"
if ! nbdinfo --size "$URI" >/dev/null 2>&1; then
	echo "FAIL: tapdisk did not start"
	cat "$WORK/tapdisk.log"
	exit 1
fi

# start_hold KIND COUNT: the holder runs until stop_hold; its first line
# ("held N told M") is in $WORK/hold.out once it is ready.
start_hold() {
	rm -f "$WORK/hold.out"
	mkfifo "$WORK/hold.in" 2>/dev/null
	python3 "$HOLD" "$ADDR" hold "$1" "$2" <"$WORK/hold.in" >"$WORK/hold.out" 2>&1 &
	HOLD_PID=$!
	exec 9>"$WORK/hold.in"
	for _ in $(seq 300); do
		grep -q "^held" "$WORK/hold.out" 2>/dev/null && return 0
		kill -0 "$HOLD_PID" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}

stop_hold() {
	exec 9>&-
	wait "$HOLD_PID" 2>/dev/null
	HOLD_PID=
	rm -f "$WORK/hold.in"
}

# newcomer: nbdinfo until it is served, at most TIMEOUT_S + 1 s; prints
# the seconds it took and the first refusal: libnbd's error, and the
# server's message (nbdinfo shows it with LIBNBD_DEBUG=1).
newcomer() {
	python3 - "$URI" $((TIMEOUT_S + 1)) <<'PY'
import os, re, subprocess, sys, time
uri, limit = sys.argv[1], float(sys.argv[2])
start, first = time.time(), ""
env = dict(os.environ, LIBNBD_DEBUG="1")
while True:
    r = subprocess.run(["nbdinfo", "--size", uri], capture_output=True, text=True, timeout=30, env=env)
    took = time.time() - start
    if r.returncode == 0:
        print("%.1f %s" % (took, first))
        sys.exit(0)
    if not first:
        msgs = re.findall(r"server error message: (.*)", r.stderr)
        last = r.stderr.strip().splitlines()[-1:] or ["(nothing)"]
        first = " ".join((last + [m for m in msgs if "not supported" not in m])[:2])
    if took > limit:
        print("%.1f %s" % (took, first))
        sys.exit(1)
    time.sleep(0.2)
PY
}

# case KIND COUNT: hold, then a newcomer must get in; refusals say why.
case_hold() {
	local kind=$1 count=$2 out took why held
	if ! start_hold "$kind" "$count"; then
		fail "$count $kind clients" "holder: $(tail -3 "$WORK/hold.out")"
		stop_hold
		return
	fi
	held=$(head -1 "$WORK/hold.out")
	if out=$(newcomer); then
		read -r took why <<<"$out"
		if [ -n "$why" ] && ! grep -q "policy prevents NBD_OPT_GO.*disk admission: all 16 connections are busy" <<<"$why"; then
			fail "$count $kind clients: the refusal says why" "$why"
		else
			pass "$count $kind clients ($held): newcomer served after $took s${why:+; refused first with: $why}"
		fi
	else
		fail "$count $kind clients: newcomer served within $((TIMEOUT_S + 1)) s" "$held; $out"
	fi
	stop_hold
}

for count in 16 1000; do
	for kind in idle payload header handshake; do
		case_hold $kind $count
	done
done

# The clients refused at GO were told, by NBD_REP_ERR_POLICY and a message.
start_hold payload 24
if grep -q "^held 24 told 8" "$WORK/hold.out" &&
	grep -q "^reason: disk admission: all 16 connections are busy" "$WORK/hold.out"; then
	pass "a refused GO gets NBD_REP_ERR_POLICY: $(grep -m1 ^reason: "$WORK/hold.out")"
else
	fail "a refused GO gets NBD_REP_ERR_POLICY" "$(tr '\n' ' ' <"$WORK/hold.out")"
fi
grep -q "admission\]: nbd 127.0.0.1:[0-9]*: refused: all 16 connections are busy" "$WORK/tapdisk.log" &&
	pass "the refusal is logged with the disk's name" ||
	fail "the refusal is logged"
stop_hold

# tap-ctl nbd list and drop, while 16 idle clients are held.
start_hold idle 16
list=$("$TAPCTL" --run-dir "$WORK" nbd -i "$TD_PID" list --json)
read -r nconn npayload id <<<"$(python3 -c '
import json, sys
c = json.load(sys.stdin)["connections"]
p = [x for x in c if x["state"] == "idle"]
print(len(c), len(p), p[0]["id"] if p else 0)' <<<"$list")"
text=$("$TAPCTL" --run-dir "$WORK" nbd -i "$TD_PID" list)
if [ "$npayload" = 16 ] && grep -q " idle " <<<"$text" &&
	grep -q "127.0.0.1:" <<<"$text"; then
	pass "tap-ctl nbd list: $nconn connections, $npayload idle"
else
	fail "tap-ctl nbd list" "$nconn/$npayload: $text"
fi
out=$("$TAPCTL" --run-dir "$WORK" nbd -i "$TD_PID" drop "$id")
after=$("$TAPCTL" --run-dir "$WORK" nbd -i "$TD_PID" list --json |
	python3 -c 'import json, sys; print(sum(x["id"] == int(sys.argv[1]) for x in json.load(sys.stdin)["connections"]))' "$id")
[ "$out" = "connection $id dropped" ] && [ "$after" = 0 ] &&
	pass "tap-ctl nbd drop $id: $out" || fail "tap-ctl nbd drop" "$out; still listed: $after"
out=$("$TAPCTL" --run-dir "$WORK" nbd -i "$TD_PID" drop 999999 2>&1)
[ $? = 1 ] && grep -q "no open connection 999999" <<<"$out" &&
	pass "tap-ctl nbd drop of an unknown id: $out" || fail "drop of an unknown id" "$out"
stop_hold

# The options: out of range refused at start; passed on by tap-ctl create.
out=$("$TAPDISK" --foreground -a null:size=1M --nbd-io-timeout 0 2>&1)
rc=$?
[ $rc = 2 ] && grep -q "from 1 to 86400" <<<"$out" &&
	pass "--nbd-io-timeout 0 refused: $(head -1 <<<"$out")" ||
	fail "--nbd-io-timeout 0 refused" "exit $rc: $out"
if id=$(TAPDISK=$TAPDISK "$TAPCTL" --run-dir "$WORK" create -a null:size=1M \
	--nbd unix --name opts --nbd-max-clients 3 --nbd-idle-timeout 7 \
	--nbd-handshake-timeout 4 --nbd-io-timeout 5 2>&1); then
	OPTS_PID=$id
	got=$("$TAPCTL" --run-dir "$WORK" nbd -i "$id" list --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["max_clients"], j["max_handshakes"], j["handshake_timeout_ms"], j["io_timeout_ms"], j["idle_timeout_ms"])')
	[ "$got" = "3 3 4000 5000 7000" ] &&
		pass "tap-ctl create passes the --nbd-* options on ($got)" ||
		fail "tap-ctl create passes the --nbd-* options on" "$got"
	"$TAPCTL" --run-dir "$WORK" destroy -i "$id" >/dev/null &&
		OPTS_PID= || fail "tap-ctl destroy -i $id"
else
	fail "tap-ctl create with --nbd-* options" "$id"
fi

RC=0
nbd_stop || RC=$?
[ "$RC" = 0 ] && pass "SIGTERM: clean exit" || fail "SIGTERM: clean exit" "rc $RC"

nbd_summary
