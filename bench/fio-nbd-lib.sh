# SPDX-License-Identifier: BSD-3-Clause
# fio-nbd-lib.sh - sourced by the chain benchmarks (qos.sh, cbt.sh): one
# fio run of 4 KiB random writes at depth 32 (nbd engine) against a fresh
# tapdisk serving a chain.  The caller sets WORK, RUNTIME and TAPDISK and
# calls fio_nbd_cleanup from its EXIT trap.
TD_PID=

fio_nbd_cleanup() {
	if [ -n "$TD_PID" ] && kill -0 "$TD_PID" 2>/dev/null; then
		kill "$TD_PID"
		wait "$TD_PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}

# fio_nbd_run CHAIN [HOOK]: prints the IOPS of one fio run against a
# fresh tapdisk of CHAIN; HOOK (a command) runs once it serves, with
# $TD_PID set.
fio_nbd_run() {
	local sock=$WORK/nbd.sock
	"$TAPDISK" --foreground -a "$1" --nbd "unix:$sock" --run-dir "$WORK" \
		--name bench --log-file "$WORK/tapdisk.log" &
	TD_PID=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		sleep 0.1
	done
	[ -n "${2:-}" ] && $2 >/dev/null 2>&1
	(cd "$WORK" && fio --output-format=json --output="$WORK/fio.json" \
		--ioengine=nbd \
		--uri="nbd+unix:///?socket=$sock" --name=job --rw=randwrite \
		--bs=4k --iodepth=32 --size=1G --time_based \
		--runtime="$RUNTIME" >/dev/null)
	python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["jobs"][0]["write"]["iops"]))' "$WORK/fio.json"
	kill "$TD_PID"
	wait "$TD_PID" 2>/dev/null
	TD_PID=
}
