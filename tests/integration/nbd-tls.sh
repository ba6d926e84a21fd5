#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-tls.sh - TLS and the allow-list of tapdisk's NBD export, with real
# clients that speak TLS (issue #17).
#
# PSK (a key file from psktool) and X.509 (a CA and a server certificate
# made here by certtool): nbdinfo and nbdcopy with nbds:// URIs (libnbd's
# tls-psk-file= and tls-certificates=), qemu-img with --object
# tls-creds-psk / tls-creds-x509.  Under --nbd-tls require a plaintext
# client is refused, so is a wrong key; nbdcopy over TLS must write and
# read back random data byte for byte; --nbd-tls on serves both; a peer
# outside --nbd-allow is closed before the greeting; a plaintext TCP
# export on a non-loopback address is named in a warning.
#
# Prints one line per case and "N passed, N failed".  Exits 0 when all
# pass, 1 when one fails, 77 (automake's skip) when a client is missing.
# BUILDDIR (set by make check) is where bin/tapdisk was built.
set -u

. "$(cd "$(dirname "$0")" && pwd)/nbd-lib.sh"
DISK_MIB=32

nbd_need nbdinfo nbdcopy qemu-img psktool certtool python3 cmp
nbd_built "$TAPDISK"
nbd_workdir nbd-tls
DISK=$WORK/disk.img

# The TLS cases' own stop: SIGTERM, SIGKILL after 5 s.
stop_tapdisk() {
	if [ -n "$TD_PID" ] && kill -0 "$TD_PID" 2>/dev/null; then
		kill -TERM "$TD_PID" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$TD_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$TD_PID" 2>/dev/null
		wait "$TD_PID" 2>/dev/null
	fi
	TD_PID=
}
nbd_cleanup_more() { stop_tapdisk; }

# check NAME COMMAND...: the command must succeed.
check() {
	local name=$1
	shift
	if "$@" >"$WORK/out.log" 2>&1; then
		pass "$name"
	else
		fail "$name" "$(tail -3 "$WORK/out.log" | tr '\n' ' ')"
	fi
}

# refused NAME COMMAND...: the command must fail.
refused() {
	local name=$1
	shift
	if "$@" >"$WORK/out.log" 2>&1; then
		fail "$name" "the client was served"
	else
		pass "$name"
	fi
}

# logged NAME TEXT: tapdisk's log must hold TEXT (grep -F).
logged() {
	if grep -qF -- "$2" "$WORK/tapdisk.log"; then
		pass "$1"
	else
		fail "$1" "no '$2' in the log: $(tail -2 "$WORK/tapdisk.log" | tr '\n' ' ')"
	fi
}

# start_tapdisk NAME ADDR OPTIONS...: serve DISK on ADDR (tcp:...).
start_tapdisk() {
	local name=$1 addr=$2 port=${2##*:}
	shift 2
	: >"$WORK/tapdisk.log"
	"$TAPDISK" --foreground -a "aio:$DISK" --nbd "$addr" --run-dir "$WORK" \
		--name "$name" --log-file "$WORK/tapdisk.log" "$@" &
	TD_PID=$!
	for _ in $(seq 100); do
		if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1).close()" 2>/dev/null; then
			return 0
		fi
		kill -0 "$TD_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "FAIL: tapdisk $* did not start"
	cat "$WORK/tapdisk.log"
	exit 1
}

truncate -s ${DISK_MIB}M "$DISK"

# --- credentials -----------------------------------------------------------------
psktool -u alice -p "$WORK/keys.psk" >/dev/null
psktool -u alice -p "$WORK/wrong.psk" >/dev/null
mkdir "$WORK/qpsk" && cp "$WORK/keys.psk" "$WORK/qpsk/keys.psk"

PKI=$WORK/pki
mkdir -p "$PKI/server" "$PKI/client" "$PKI/other"
# make_ca DIR: a CA key and self-signed certificate in DIR.
make_ca() {
	certtool --generate-privkey --key-type=ecdsa --outfile "$1/ca-key.pem" 2>/dev/null
	printf 'cn = tapstripe test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$1/ca.info"
	certtool --generate-self-signed --load-privkey "$1/ca-key.pem" \
		--template "$1/ca.info" --outfile "$1/ca-cert.pem" 2>/dev/null
}
make_ca "$PKI"
make_ca "$PKI/other"
certtool --generate-privkey --key-type=ecdsa --outfile "$PKI/server/server-key.pem" 2>/dev/null
printf '%s\n' 'organization = tapstripe test' 'cn = localhost' \
	'dns_name = localhost' 'ip_address = 127.0.0.1' tls_www_server \
	signing_key encryption_key 'expiration_days = 2' >"$PKI/server.info"
certtool --generate-certificate --load-privkey "$PKI/server/server-key.pem" \
	--load-ca-certificate "$PKI/ca-cert.pem" --load-ca-privkey "$PKI/ca-key.pem" \
	--template "$PKI/server.info" --outfile "$PKI/server/server-cert.pem" 2>/dev/null
cp "$PKI/ca-cert.pem" "$PKI/server/"
cp "$PKI/ca-cert.pem" "$PKI/client/"
if [ ! -s "$PKI/server/server-cert.pem" ]; then
	echo "FAIL: certtool did not make the test certificates"
	exit 1
fi

# --- PSK, TLS required -----------------------------------------------------------
PORT=$(nbd_free_port)
start_tapdisk tlspsk "tcp:127.0.0.1:$PORT" --nbd-tls require \
	--nbd-tls-psk "$WORK/keys.psk"
PSK_URI="nbds://alice@127.0.0.1:$PORT/?tls-psk-file=$WORK/keys.psk"
check "nbdinfo over TLS (PSK)" bash -c \
	"nbdinfo '$PSK_URI' | grep -q 'newstyle-fixed with TLS'"
logged "the log names the PSK user" "PSK user alice"
refused "a plaintext nbdinfo is refused under require" \
	nbdinfo "nbd://127.0.0.1:$PORT/"
logged "the refusal is logged" "refused: TLS required"
refused "a plaintext NBD_OPT_EXPORT_NAME is closed under require" \
	python3 - "$PORT" <<'EOF'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.settimeout(5)
greeting = b""
while len(greeting) < 18:
    greeting += s.recv(18 - len(greeting))
s.sendall(struct.pack(">I", 1) + b"IHAVEOPT" + struct.pack(">II", 1, 0))
# Served: 8 bytes of size, 2 of flags.  Closed: end of stream.
sys.exit(0 if len(s.recv(10)) else 1)
EOF
refused "a wrong PSK is refused" \
	nbdinfo "nbds://alice@127.0.0.1:$PORT/?tls-psk-file=$WORK/wrong.psk"
logged "the wrong key is logged" "TLS handshake"

python3 -c "import os, sys; sys.stdout.buffer.write(os.urandom(24 << 20))" >"$WORK/random.img"
check "nbdcopy over TLS: write random data" \
	nbdcopy --connections=2 --flush "$WORK/random.img" "$PSK_URI"
check "nbdcopy over TLS: read back byte for byte" bash -c \
	"nbdcopy '$PSK_URI' '$WORK/back.img' &&
	 cmp -n $((24 << 20)) '$WORK/random.img' '$WORK/back.img' &&
	 cmp -n $((24 << 20)) '$WORK/random.img' '$DISK'"

QPSK="tls-creds-psk,id=tls0,endpoint=client,dir=$WORK/qpsk,username=alice"
check "qemu-img compare over TLS (tls-creds-psk)" \
	qemu-img compare --object "$QPSK" --image-opts "driver=file,filename=$DISK" \
	"driver=nbd,host=127.0.0.1,port=$PORT,tls-creds=tls0"
refused "a plaintext qemu-img is refused under require" \
	qemu-img info "nbd://127.0.0.1:$PORT/"
stop_tapdisk

# --- TLS optional: both kinds of client ------------------------------------------------
PORT=$(nbd_free_port)
start_tapdisk tlson "tcp:127.0.0.1:$PORT" --nbd-tls on \
	--nbd-tls-psk "$WORK/keys.psk"
check "--nbd-tls on: a plaintext client is served" \
	nbdinfo --size "nbd://127.0.0.1:$PORT/"
check "--nbd-tls on: a TLS client is served" bash -c \
	"nbdinfo 'nbds://alice@127.0.0.1:$PORT/?tls-psk-file=$WORK/keys.psk' | grep -q 'with TLS'"
stop_tapdisk

# --- X.509 ---------------------------------------------------------------------------------
PORT=$(nbd_free_port)
start_tapdisk tlsx509 "tcp:127.0.0.1:$PORT" --nbd-tls-x509 "$PKI/server"
X509_URI="nbds://127.0.0.1:$PORT/?tls-certificates=$PKI/client"
check "nbdinfo over TLS (X.509, CA made by certtool)" bash -c \
	"nbdinfo '$X509_URI' | grep -q 'with TLS'"
check "nbdcopy over TLS (X.509) reads the disk back" bash -c \
	"nbdcopy '$X509_URI' '$WORK/back509.img' && cmp '$DISK' '$WORK/back509.img'"
check "qemu-img compare over TLS (tls-creds-x509)" \
	qemu-img compare \
	--object "tls-creds-x509,id=tls0,endpoint=client,dir=$PKI/client" \
	--image-opts "driver=file,filename=$DISK" \
	"driver=nbd,host=127.0.0.1,port=$PORT,tls-creds=tls0"
refused "a client trusting another CA does not connect" \
	nbdinfo "nbds://127.0.0.1:$PORT/?tls-certificates=$PKI/other"
refused "a plaintext client is refused (X.509, require by default)" \
	nbdinfo "nbd://127.0.0.1:$PORT/"
stop_tapdisk

# --- allow-list ------------------------------------------------------------------------------
PORT=$(nbd_free_port)
start_tapdisk allow "tcp:127.0.0.1:$PORT" --nbd-allow 127.0.0.1/32 \
	--nbd-allow 10.0.0.0/8
# peer SOURCE: the server's first bytes to a client bound to SOURCE.
peer() {
	python3 - "$PORT" "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.bind((sys.argv[2], 0))
s.settimeout(5)
s.connect(("127.0.0.1", int(sys.argv[1])))
data = s.recv(8)
sys.exit(0 if data == b"NBDMAGIC" else 1)
EOF
}
check "a peer inside --nbd-allow gets the greeting" peer 127.0.0.1
refused "a peer outside --nbd-allow is closed" peer 127.0.0.2
logged "the refused peer is logged" "127.0.0.2"
logged "with the reason" "not in the allowed addresses"
stop_tapdisk

# --- the plaintext warning -------------------------------------------------------------------
PORT=$(nbd_free_port)
start_tapdisk lo "tcp:127.0.0.1:$PORT"
if grep -q "reachable from the network" "$WORK/tapdisk.log"; then
	fail "no warning for plaintext on loopback"
else
	pass "no warning for plaintext on loopback"
fi
stop_tapdisk
PORT=$(nbd_free_port)
# Every address, but only loopback peers let in, for the test's sake.
start_tapdisk plainnet "tcp::$PORT" --nbd-allow 127.0.0.1/32
logged "plaintext TCP on every address is warned about" \
	"reachable from the network without TLS"
logged "the warning names the disk" "[plainnet]"
stop_tapdisk

# --- refused credentials: the first line says why, naming the file ----------------------
printf 'alice:not-hex\n' >"$WORK/bad.psk"
PORT=$(nbd_free_port)
first=$("$TAPDISK" --foreground -a "aio:$DISK" --nbd "tcp:127.0.0.1:$PORT" \
	--run-dir "$WORK" --nbd-tls-psk "$WORK/bad.psk" 2>&1 >/dev/null |
	grep -v '^[0-9-]* [0-9:.]* err ' | head -n 1)
case $first in
"tapdisk: cannot start the NBD server: nbd: $WORK/bad.psk: line 1: the key"*)
	pass "a bad PSK file's first line names the file and the line" ;;
*) fail "a bad PSK file's first line names the file and the line (got: $first)" ;;
esac

nbd_summary
