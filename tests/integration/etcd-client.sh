#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# etcd-client.sh - the master's etcd client (master/etcd/etcd.h) against a
# real 3-member etcd cluster on loopback (tests/lab/etcd-lib.sh), through
# tests/integration/etcd-cli: binary keys and values, compare-and-swap
# that holds and that fails (the failure branch's range returned),
# create-if-absent, mod_revision compares, a prefix range with a limit,
# fail-over when the member of the first endpoint is killed with kill -9,
# and clear errors when the endpoint is not etcd, does not answer, and
# when every member is down.
#
# Exits 0 when it passes, 1 when not, 77 (automake's skip) without etcd
# (apt-get install etcd-server) or python3.  Stops only what it started,
# by PID.
set -u

BUILDDIR=${BUILDDIR:-$(pwd)}
CLI=$BUILDDIR/tests/integration/etcd-cli
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/lab/etcd-lib.sh
. "$top/tests/lab/etcd-lib.sh"

if ! etcd_lib_have; then
	echo "SKIP: etcd or python3 not found (apt-get install etcd-server python3)"
	exit 77
fi
if [ ! -x "$CLI" ]; then
	echo "FAIL: $CLI not built"
	exit 1
fi

WORK=$(mktemp -d /tmp/etcd-client.XXXXXX)
OTHER_PIDS=
PASSED=0
FAILED=0
cleanup() {
	local pid
	etcd_cluster_stop
	for pid in $OTHER_PIDS; do
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

pass() {
	echo "PASS: $1"
	PASSED=$((PASSED + 1))
}
fail() {
	echo "FAIL: $1${2:+ ($2)}"
	FAILED=$((FAILED + 1))
}

# cli ARGS...: etcd-cli on the cluster; stdout in $OUT, stderr in $ERR.
cli() {
	"$CLI" --endpoints "$ETCD_ENDPOINTS" --timeout 2000 "$@" \
		>"$WORK/out" 2>"$WORK/err"
	local rc=$?
	OUT=$(cat "$WORK/out")
	ERR=$(cat "$WORK/err")
	return $rc
}

jq_() { # EXPR over j, the JSON in $OUT
	python3 -c "import json, sys; j = json.loads(sys.argv[1]); print($1)" "$OUT"
}

check() { # NAME EXPR: pass when EXPR over $OUT prints True
	if [ "$(jq_ "$2" 2>/dev/null)" = True ]; then
		pass "$1"
	else
		fail "$1" "got: $OUT $ERR"
	fi
}

# A TCP listener that is not etcd: MODE garbage (answers a line of text and
# closes), http404 (an HTTP server that knows no /v3), silent (accepts,
# never answers).  Prints its port.
fake_server() { # MODE
	python3 - "$1" >"$WORK/fake-$1.port" 2>/dev/null <<'PY' &
import http.server, socket, sys, time
mode = sys.argv[1]
if mode == "http404":
    srv = http.server.HTTPServer(("127.0.0.1", 0),
                                 http.server.BaseHTTPRequestHandler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True:
    c, _ = s.accept()
    if mode == "garbage":
        c.recv(65536)
        c.sendall(b"SSH-2.0-OpenSSH_9.2 not what you want\r\n")
        c.close()
    else:
        held.append(c)
PY
	OTHER_PIDS="$OTHER_PIDS $!"
	for _ in $(seq 50); do
		[ -s "$WORK/fake-$1.port" ] && break
		sleep 0.1
	done
	cat "$WORK/fake-$1.port"
}

etcd_cluster_start "$WORK" 3 || {
	echo "FAIL: the etcd cluster did not start"
	tail -n 5 "$WORK"/etcd-*.log
	exit 1
}

# --- binary keys and values ---------------------------------------------------
cli put x:00ff0a2f x:00fffe0000 && cli get x:00ff0a2f
check "put/get of binary bytes" \
	'j["found"] and j["value_hex"] == "00fffe0000" and j["mod_revision"] > 0'
cli get x:00ff0a2e
check "get of a missing key" 'not j["found"]'
cli put empty x: && cli get empty
check "an empty value is found, empty" 'j["found"] and j["value_hex"] == ""'

# --- compare-and-swap -----------------------------------------------------------
cli put head 7 >/dev/null
cli cas head 7 8 log/ 0
check "cas on the right value succeeds" 'j["succeeded"] and j["ranges"] == []'
cli put log/1 x:01 && cli put log/2 x:02 && cli put logx x:ff
cli cas head 7 9 log/ 0
check "cas on a stale value fails, returning the failure range" \
	'not j["succeeded"] and [k["key_hex"] for k in j["ranges"][0]["kvs"]] == ["6c6f672f31", "6c6f672f32"]'
cli get head
check "the failed cas changed nothing" 'j["value_hex"] == "38"'
rev=$(jq_ 'j["mod_revision"]')
cli cas-rev head "$rev" 10
check "cas on the right mod_revision succeeds" 'j["succeeded"]'
cli cas-rev head "$rev" 11
check "cas on a stale mod_revision fails" 'not j["succeeded"]'
cli create id cluster-a
check "create of an absent key succeeds" 'j["succeeded"]'
cli create id cluster-b
check "create of a present key fails and returns it" \
	'not j["succeeded"] and j["ranges"][0]["kvs"][0]["value_hex"] == "636c75737465722d61"'

# --- prefix ranges with a limit ------------------------------------------------
for i in 1 2 3 4 5; do cli put "p/$i" "v$i"; done
cli put q/1 other
cli range p/ 2
check "a prefix range with limit 2 of 5" \
	'j["ranges"][0]["count"] == 5 and j["ranges"][0]["more"] and [k["key_hex"] for k in j["ranges"][0]["kvs"]] == ["702f31", "702f32"]'
cli range p/ 0
check "a prefix range without limit stops at the prefix" \
	'len(j["ranges"][0]["kvs"]) == 5 and not j["ranges"][0]["more"]'
cli range x:ffff 0
check "a prefix of 0xff bytes ranges to the end" 'j["ranges"][0]["count"] == 0'
cli delete p/ && cli range p/ 0
check "a prefix delete" 'j["ranges"][0]["count"] == 0'

# --- etcd's own refusal, its message passed on -------------------------------
cli puts 3
check "a txn of 3 puts" 'j["succeeded"]'
cli puts 200
rc=$?
if [ $rc -eq 1 ] && [[ $ERR == *"EINVAL"*"etcdserver: too many operations in txn request"* ]]; then
	pass "etcd refuses a txn of 200 ops: EINVAL with etcd's message"
else
	fail "a txn past etcd's op limit" "rc $rc: $ERR"
fi

# --- fail-over -------------------------------------------------------------------
# An election may follow (member 0 may have led): etcd holds the request
# until a leader is there, so these calls get a longer timeout.
etcd_member_kill 0 KILL
cli --timeout 8000 get head
check "get after kill -9 of the first endpoint's member" 'j["value_hex"] == "3130"'
cli --timeout 8000 cas head 10 11 log/ 0
check "cas after kill -9 of the first endpoint's member" 'j["succeeded"]'

# --- not etcd, no answer -----------------------------------------------------
port=$(fake_server garbage)
"$CLI" --endpoints "http://127.0.0.1:$port" get head >/dev/null 2>"$WORK/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "EPROTO.*127.0.0.1:$port.*not etcd's JSON gateway" "$WORK/err"; then
	pass "an endpoint that is not HTTP: EPROTO, named"
else
	fail "an endpoint that is not HTTP" "rc $rc: $(cat "$WORK/err")"
fi
port404=$(fake_server http404)
"$CLI" --endpoints "http://127.0.0.1:$port404" get head >/dev/null 2>"$WORK/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "EPROTO.*HTTP 501, not etcd's JSON gateway" "$WORK/err"; then
	pass "an HTTP server that is not etcd: EPROTO, named"
else
	fail "an HTTP server that is not etcd" "rc $rc: $(cat "$WORK/err")"
fi
"$CLI" --endpoints "http://127.0.0.1:$port,$ETCD_ENDPOINTS" get head >"$WORK/out" 2>"$WORK/err"
OUT=$(cat "$WORK/out")
check "a wrong endpoint first is passed over" 'j["value_hex"] == "3131"'
portq=$(fake_server silent)
start=$(date +%s%N)
"$CLI" --endpoints "http://127.0.0.1:$portq" --timeout 500 get head >/dev/null 2>"$WORK/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [ $rc -eq 1 ] && [ $ms -lt 5000 ] && grep -q "ETIMEDOUT.*no answer within 500 ms" "$WORK/err"; then
	pass "an endpoint that never answers: ETIMEDOUT after the timeout"
else
	fail "an endpoint that never answers" "rc $rc, $ms ms: $(cat "$WORK/err")"
fi
"$CLI" --endpoints "127.0.0.1:2379" get head >/dev/null 2>"$WORK/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "is not http://HOST:PORT" "$WORK/err"; then
	pass "an endpoint without http:// is refused"
else
	fail "an endpoint without http://" "rc $rc: $(cat "$WORK/err")"
fi

# --- a member without quorum, then every member down ---------------------------
etcd_member_kill 1 KILL
start=$(date +%s%N)
"$CLI" --endpoints "${ETCD_URLS[2]}" --timeout 1000 put head 99 >/dev/null 2>"$WORK/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [ $rc -eq 1 ] && [ $ms -lt 5000 ] && grep -Eq "(ETIMEDOUT|EHOSTUNREACH).*${ETCD_URLS[2]}" "$WORK/err"; then
	pass "a member without quorum refuses a put within the timeout"
else
	fail "a member without quorum" "rc $rc, $ms ms: $(cat "$WORK/err")"
fi
etcd_member_kill 2 KILL
cli get head
rc=$?
n=0
for u in "${ETCD_URLS[@]}"; do
	case $ERR in *"$u (Couldn't connect to server)"*) n=$((n + 1)) ;; esac
done
if [ $rc -eq 1 ] && [ $n -eq 3 ] && [[ $ERR == *"ECONNREFUSED: no etcd endpoint answered"* ]]; then
	pass "every member down: ECONNREFUSED naming the 3 endpoints"
else
	fail "every member down" "rc $rc: $ERR"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
