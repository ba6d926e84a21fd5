#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# stripe-chap.sh - CHAP through the supported path (issue #20): a lab of 2
# tgtd servers whose targets need a CHAP account (LAB_CHAP), registered
# with 'stripe-ctl server add --chap-user U --chap-secret-file F'.
#   - a disk created on them is served by tapdisk: 16 MiB written through
#     NBD (nbdcopy) read back the same; its mapping file is mode 0600 and
#     carries the account;
#   - 'server chap' to a wrong secret, 'vdisk map' again: tapdisk's login
#     to that LUN fails (it goes down) with an error naming CHAP and the
#     target's "Authentication failure", and reading the disk fails;
#   - 'server chap' back to the right secret, 'vdisk map': served again;
#   - 'server chap --none' leaves no account in a new map;
#   - the secrets (right and wrong) appear in no output of stripe-ctl
#     (text and --json), not in the master's log, not in tapdisk's logs;
#   - the master refuses MS_SERVER_CHAP_GET to a caller outside --allow.
#
# Prints one line per check and "N passed, N failed"; exits 0 when all
# pass, 1 when one fails, 77 when root, tgt, libnbd or the stripe driver
# is missing.  About 20 s.
set -u -o pipefail
SECRET=right-$RANDOM$RANDOM-secret
WRONG=wrong-$RANDOM$RANDOM-secret
export LAB_CHAP=tsuser:$SECRET
. "$(cd "$(dirname "$0")" && pwd)/stripe-lib.sh"

OUT=$WORK/outputs # every stripe-ctl output of the test, for the grep
ctl() { "$CTL" --master "$LAB_MASTER" "$@" 2>&1 | tee -a "$OUT"; }
key1=(--target "" --lun 1)

lab_up 2
key1=(--target "$LAB_SRV1_TARGET" --lun 1)
MAP=$WORK/dc.map
GEOM=(--size 16M --stripe-unit 64K)

# --- the lab registered both servers with CHAP; listings hide the secret ---
ctl server list >/dev/null
ctl --json server list >/dev/null
ctl --json server status >/dev/null
ctl info >/dev/null
umask 077
printf '%s\n' "$SECRET" >"$WORK/right.secret"
printf '%s\n' "$WRONG" >"$WORK/wrong.secret"
umask 022
out=$(ctl server add --portal "$LAB_SRV1_ADDR:3260" "${key1[@]}" --size 256M \
	--address "$LAB_SRV1_ADDR" --chap-user tsuser --chap-secret-file "$WORK/right.secret")
[ $? = 0 ] && grep -q "already registered" <<<"$out" &&
	pass "server add again with the same CHAP account: nothing changed" ||
	fail "server add again with the same CHAP account" "$out"
out=$(ctl server add --portal "$LAB_SRV1_ADDR:3260" "${key1[@]}" --size 256M \
	--chap-user tsuser)
[ $? != 0 ] && grep -q "together" <<<"$out" &&
	pass "--chap-user without --chap-secret-file is refused" ||
	fail "--chap-user without --chap-secret-file" "$out"

# --- a disk on them works ------------------------------------------------------
out=$(ctl --json vdisk create dc "${GEOM[@]}" --stripes 2 --replicas 1 -o "$MAP")
[ $? = 0 ] && pass "vdisk create on CHAP servers" || fail "vdisk create" "$out"
mode=$(stat -c %a "$MAP" 2>/dev/null)
[ "$mode" = 600 ] && pass "the mapping file is mode 0600" || fail "map mode" "mode $mode"
[ "$(grep -c "chap-user tsuser chap-secret $SECRET" "$MAP")" = 2 ] &&
	pass "the mapping file carries both servers' CHAP account" ||
	fail "CHAP account in the map" "$(grep '^server' "$MAP")"
ctl vdisk show dc >/dev/null
ctl --json vdisk show dc >/dev/null

head -c 16M /dev/urandom >"$WORK/in.img"
if serve dc "stripe:$MAP"; then
	if nbdcopy "$WORK/in.img" "$URI" && nbdcopy "$URI" "$WORK/back.img" &&
		cmp -s "$WORK/in.img" "$WORK/back.img"; then
		pass "16 MiB through NBD to CHAP targets read back the same"
	else
		fail "nbdcopy round trip" "$(tail -5 "$WORK/dc.log")"
	fi
	"$TAPCTL" list >>"$OUT" 2>&1
	unserve "$TD_PID" dc
fi

# --- a wrong secret: tapdisk refuses, naming CHAP ---------------------------------
out=$(ctl server chap "${key1[@]}" --chap-user tsuser --chap-secret-file "$WORK/wrong.secret")
[ $? = 0 ] && pass "server chap to another secret" || fail "server chap" "$out"
out=$(ctl --json server chap "${key1[@]}" --chap-user tsuser --chap-secret-file - <"$WORK/wrong.secret")
[ $? = 0 ] && grep -q '"changed": *false' <<<"$out" &&
	pass "server chap again (secret on stdin): nothing changed" ||
	fail "server chap again" "$out"
out=$(ctl vdisk map dc "${GEOM[@]}" -o "$MAP")
[ $? = 0 ] && pass "vdisk map with the wrong secret" || fail "vdisk map" "$out"
# tapdisk serves what it can while a LUN is down: the LUN with the wrong
# secret goes DOWN with the target's refusal, and I/O on it fails.
if serve dw "stripe:$MAP"; then
	for ((t = 0; t < 100; t++)); do
		grep -q "DOWN after" "$WORK/dw.log" && break
		sleep 0.1
	done
	line=$(grep -m1 "DOWN after" "$WORK/dw.log")
	grep -q "Authentication failure" <<<"$line" && grep -q "CHAP" <<<"$line" &&
		pass "a wrong secret: the LUN is down, the error names CHAP: ${line#*DOWN}" ||
		fail "a wrong secret: an error naming CHAP" "$(tail -5 "$WORK/dw.log")"
	nbdcopy "$URI" "$WORK/bad.img" 2>>"$OUT" &&
		fail "a wrong secret: reading the disk fails" "nbdcopy read it" ||
		pass "a wrong secret: reading the disk fails"
	kill -KILL "$TD_PID"
	wait "$TD_PID" 2>/dev/null
	keep=()
	for p in "${TD_PIDS[@]}"; do [ "$p" = "$TD_PID" ] || keep+=("$p"); done
	TD_PIDS=("${keep[@]}")
fi

# --- right again; then none --------------------------------------------------------
out=$(ctl server chap "${key1[@]}" --chap-user tsuser --chap-secret-file "$WORK/right.secret")
[ $? = 0 ] || fail "server chap back" "$out"
ctl vdisk map dc "${GEOM[@]}" -o "$MAP" >/dev/null
if serve dc2 "stripe:$MAP"; then
	nbdcopy "$URI" "$WORK/back2.img" && cmp -s "$WORK/in.img" "$WORK/back2.img" &&
		pass "the right secret again: the disk is served, same data" ||
		fail "served again" "$(tail -5 "$WORK/dc2.log")"
	unserve "$TD_PID" dc2
fi
out=$(ctl server chap "${key1[@]}" --none)
[ $? = 0 ] && ctl vdisk map dc "${GEOM[@]}" -o "$WORK/none.map" >/dev/null &&
	[ "$(grep -c "chap-user" "$WORK/none.map")" = 1 ] &&
	pass "server chap --none: server 1 has no account in a new map" ||
	fail "server chap --none" "$out; $(grep '^server' "$WORK/none.map" 2>/dev/null)"
out=$(ctl server chap "${key1[@]}" --none --chap-user x)
[ $? != 0 ] && pass "server chap refuses --none with --chap-user" ||
	fail "server chap --none --chap-user" "$out"

# --- outside --allow: no secret --------------------------------------------------
if ip -4 -o addr show | grep -q ' inet 127\.'; then
	# the lab's master allows 127/8 and NET/16; a third address is outside
	ip addr add 192.0.2.77/32 dev lo 2>/dev/null
	out=$("$PY" - "$LAB_MASTER" "$LAB_SRV2_TARGET" <<'PYEOF' 2>&1
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
target = sys.argv[2].encode()
def xstr(b):
    return struct.pack(">I", len(b)) + b + b"\0" * ((4 - len(b) % 4) % 4)
# RPC call: xid, CALL, rpcvers 2, prog, vers 1, proc 28, AUTH_NONE x2
body = struct.pack(">IIIIII", 7, 0, 2, 0x20007700, 1, 28) + b"\0" * 16
body += xstr(target) + struct.pack(">I", 1)
s = socket.create_connection((host, int(port)), 5, ("192.0.2.77", 0))
s.sendall(struct.pack(">I", 0x80000000 | len(body)) + body)
data = b""
while len(data) < 4 or len(data) < 4 + (struct.unpack(">I", data[:4])[0] & 0x7fffffff):
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
# reply: mark, xid, REPLY, MSG_ACCEPTED, verf (2 words), SUCCESS, ms_status
status = struct.unpack(">I", data[28:32])[0]
print("status", status, "secret" if sys.argv[1] and b"right-" in data else "")
PYEOF
)
	ip addr del 192.0.2.77/32 dev lo 2>/dev/null
	grep -q "^status 5 *$" <<<"$out" &&
		pass "MS_SERVER_CHAP_GET from outside --allow: MS_EPERM, no secret" ||
		fail "MS_SERVER_CHAP_GET from outside --allow" "$out"
fi

# --- the secrets are nowhere ------------------------------------------------------
logs=("$OUT" "$LAB_STATE/master.log" "$WORK"/*.log)
hits=$(grep -l -e "$SECRET" -e "$WRONG" "${logs[@]}" 2>/dev/null)
[ -z "$hits" ] && pass "no secret in stripe-ctl's outputs, the master's log, tapdisk's logs (${#logs[@]} files)" ||
	fail "a secret leaked" "$hits"
grep -q "CHAP user tsuser" "$LAB_STATE/master.log" &&
	pass "the master logs the CHAP change with the user alone" ||
	fail "the master's log of CHAP changes" "$(tail -5 "$LAB_STATE/master.log")"

summary
