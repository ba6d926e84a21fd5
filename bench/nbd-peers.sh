#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# nbd-peers.sh - the same fio jobs against tapstripe's NBD export,
# qemu-nbd --cache=none --aio=native, and fio's own libaio O_DIRECT on the
# backing file (the physical limit), all on one file in one run.
#
# usage: bench/nbd-peers.sh [--dir DIR] [--size SIZE] [--runtime S] [--reps N]
#                           [--json FILE] [--quick] [--tls]
#   --dir DIR      where the backing file goes (default /var/tmp: a real disk;
#                  /dev/shm measures the servers' CPU cost alone)
#   --size SIZE    backing file size (default 1G)
#   --runtime S    seconds per fio run (default 15)
#   --reps N       repetitions per job and target; the median is reported (3)
#   --json FILE    also write every figure there
#   --quick        --size 256M --runtime 4 --reps 1
#   --tls          both servers on TCP loopback with TLS required: tapdisk
#                  --nbd-tls-x509, qemu-nbd --tls-creds with a tls-creds-x509
#                  object, one certificate made here by certtool (gnutls-bin);
#                  jobs randread4k, seqread1m.  X.509, not PSK: fio's nbd
#                  engine refuses URIs that name a local file (tls-psk-file=),
#                  while libnbd finds a CA in $HOME/.pki/libnbd by itself
#                  (HOME is the work directory for fio).  The record layer,
#                  what the figures measure, is the same with PSK.
#
# Prints per job: IOPS and MiB/s of each target, tapstripe / qemu-nbd and
# tapstripe / physical ratios, and each server's CPU time per request
# (user+sys of the server process over the run, divided by the requests fio
# completed).  Only ratios measured in this run mean anything: the machine
# is shared and noisy.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/bench-lib.sh
. "$here/bench-lib.sh"
BUILDDIR=${BUILDDIR:-$here/..}
TAPDISK=${TAPDISK:-$BUILDDIR/bin/tapdisk}
DIR=/var/tmp SIZE=1G RUNTIME=15 REPS=3 JSON= TLS=

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--runtime) RUNTIME=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--json) JSON=$2; shift ;;
	--quick) SIZE=256M RUNTIME=4 REPS=1 ;;
	--tls) TLS=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "nbd-peers.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

for tool in fio qemu-nbd python3 ${TLS:+certtool}; do
	command -v $tool >/dev/null || { echo "nbd-peers.sh: $tool missing (apt-get install fio qemu-utils python3)" >&2; exit 1; }
done
[ -x "$TAPDISK" ] || { echo "nbd-peers.sh: $TAPDISK not built (run make, or set TAPDISK=)" >&2; exit 1; }

work=$(mktemp -d "$DIR/td-bench.XXXXXX") || exit 1
results=$work/results
server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

img=$work/disk.img
sock=$work/nbd.sock
echo "# backing file: $SIZE in $DIR ($(df -T "$DIR" | awk 'NR==2 {print $2}'))"
fio --name=fill --filename="$img" --size="$SIZE" --rw=write --bs=1M \
	--ioengine=libaio --direct=1 --iodepth=8 --output=/dev/null || exit 1

# name rw bs iodepth
JOBS="randread4k randread 4k 32
seqwrite1m write 1M 8
seqread1m read 1M 8"

URI="nbd+unix:///?socket=$sock"
if [ -n "$TLS" ]; then
	JOBS="randread4k randread 4k 32
seqread1m read 1M 8"
	pki=$work/pki
	mkdir -p "$pki" "$work/.pki/libnbd"
	certtool --generate-privkey --key-type=ecdsa --outfile "$pki/ca-key.pem" 2>/dev/null
	printf 'cn = bench CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$work/ca.info"
	certtool --generate-self-signed --load-privkey "$pki/ca-key.pem" \
		--template "$work/ca.info" --outfile "$pki/ca-cert.pem" 2>/dev/null
	certtool --generate-privkey --key-type=ecdsa --outfile "$pki/server-key.pem" 2>/dev/null
	printf 'cn = localhost\nip_address = 127.0.0.1\ntls_www_server\nsigning_key\nencryption_key\nexpiration_days = 2\n' >"$work/server.info"
	certtool --generate-certificate --load-privkey "$pki/server-key.pem" \
		--load-ca-certificate "$pki/ca-cert.pem" --load-ca-privkey "$pki/ca-key.pem" \
		--template "$work/server.info" --outfile "$pki/server-cert.pem" 2>/dev/null
	cp "$pki/ca-cert.pem" "$work/.pki/libnbd/" || exit 1
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	URI="nbds://127.0.0.1:$port/"
	echo "# TLS: X.509 over TCP 127.0.0.1:$port, both servers"
fi

server_up() {
	if [ -n "$TLS" ]; then
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1).close()" 2>/dev/null
	else
		[ -S "$sock" ]
	fi
}


start_server() { # target
	rm -f "$sock"
	case $1${TLS:+-tls} in
	tapstripe) "$TAPDISK" --foreground -a "aio:$img" --nbd "unix:$sock" \
		--log-level warn 2>>"$work/server.log" & ;;
	qemu-nbd) qemu-nbd --cache=none --aio=native -f raw --shared=16 -t \
		-k "$sock" "$img" 2>>"$work/server.log" & ;;
	tapstripe-tls) "$TAPDISK" --foreground -a "aio:$img" \
		--nbd "tcp:127.0.0.1:$port" --nbd-tls require \
		--nbd-tls-x509 "$pki" \
		--log-level warn 2>>"$work/server.log" & ;;
	qemu-nbd-tls) qemu-nbd --cache=none --aio=native -f raw --shared=16 -t \
		-b 127.0.0.1 -p "$port" \
		--object "tls-creds-x509,id=tls0,endpoint=server,dir=$pki,verify-peer=off" \
		--tls-creds tls0 "$img" 2>>"$work/server.log" & ;;
	esac
	server_pid=$!
	bench_wait_up "nbd-peers.sh: $1" "$work/server.log" server_up
}

stop_server() {
	bench_stop "$server_pid"
	server_pid=
}

run_fio() { # target rw bs qd out.json
	local target=$1 rw=$2 bs=$3 qd=$4 out=$5
	local common=(--name=job --rw="$rw" --bs="$bs" --iodepth="$qd"
		--size="$SIZE" --time_based --runtime="$RUNTIME" --ramp_time=1
		--randrepeat=0 --norandommap --output-format=json --output="$out")
	if [ "$target" = physical ]; then
		fio "${common[@]}" --filename="$img" --ioengine=libaio --direct=1
	else
		HOME=$work fio "${common[@]}" --ioengine=nbd --uri="$URI"
	fi
}

: >"$results"
total=$(( $(echo "$JOBS" | wc -l) * 3 * REPS ))
n=0
targets=(physical tapstripe qemu-nbd)
# Each repetition runs every target, in an order rotated per repetition, so
# that a drift of the machine's load does not favour one target.
for rep in $(seq "$REPS"); do
	for k in 0 1 2; do
		target=${targets[$(( (k + rep - 1) % 3 ))]}
		[ "$target" != physical ] && start_server $target
		while read -r job rw bs qd; do
			n=$((n + 1))
			printf '\r# [%d/%d] rep %d %-9s %-11s ' $n $total "$rep" "$target" "$job" >&2
			t0=0
			[ -n "$server_pid" ] && t0=$(bench_cpu_ticks "$server_pid")
			run_fio "$target" "$rw" "$bs" "$qd" "$work/fio.json" || { echo "fio failed" >&2; exit 1; }
			t1=0
			[ -n "$server_pid" ] && t1=$(bench_cpu_ticks "$server_pid")
			python3 "$here/fio-summary.py" "$work/fio.json" "$target" "$job" "$rep" "$((t1 - t0))" >>"$results"
		done <<<"$JOBS"
		[ "$target" != physical ] && stop_server
	done
done
echo >&2

python3 - "$results" "$(getconf CLK_TCK)" "${JSON:-}" <<'EOF'
import json, statistics, sys
path, hz, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = {}
for line in open(path):
    t, job, rep, iops, bw, ios, ticks = line.split()
    rows.setdefault((t, job), []).append((float(iops), float(bw), int(ios), int(ticks)))
def med(t, job, k):
    return statistics.median(r[k] for r in rows[(t, job)])
def cpu_us(t, job):
    r = rows[(t, job)]
    return 1e6 * sum(x[3] for x in r) / hz / max(1, sum(x[2] for x in r))
jobs = []
for (t, job) in rows:
    if job not in jobs:
        jobs.append(job)
print("%-11s %-10s %10s %9s %10s %9s %9s %13s" % ("job", "target", "IOPS", "MiB/s",
      "spread", "vs qemu", "vs phys", "CPU us/req"))
report = {}
for job in jobs:
    for t in ("physical", "tapstripe", "qemu-nbd"):
        iops = med(t, job, 0); bw = med(t, job, 1)
        vals = [r[0] for r in rows[(t, job)]]
        spread = (max(vals) - min(vals)) / iops * 100 if iops else 0
        vq = iops / med("qemu-nbd", job, 0)
        vp = iops / med("physical", job, 0)
        cpu = cpu_us(t, job) if t != "physical" else float("nan")
        print("%-11s %-10s %10.0f %9.1f %9.1f%% %9.3f %9.3f %13.2f" % (job, t, iops, bw,
              spread, vq, vp, cpu))
        report.setdefault(job, {})[t] = {"iops": iops, "mib_s": bw, "spread_pct": spread,
              "ratio_vs_qemu_nbd": vq, "ratio_vs_physical": vp,
              "cpu_us_per_req": None if t == "physical" else cpu,
              "reps": [r[0] for r in rows[(t, job)]]}
if out:
    json.dump(report, open(out, "w"), indent=2)
EOF
