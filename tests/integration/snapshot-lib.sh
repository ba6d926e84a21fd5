# SPDX-License-Identifier: BSD-3-Clause
# snapshot-lib.sh - sourced by snapshot.sh and snapshot-row.sh (after
# nbd-lib.sh and nbd_workdir): a tapdisk of theirs, its snapshot
# commands and status, and the expected images built from a writer's log.
# ORIG is the disk's content before any logged write.

# snapshot_workdir NAME: nbd_workdir NAME, the job files under WORK/state,
# the disk SRC, its content before any logged write ORIG, the target TGT.
snapshot_workdir() {
	nbd_workdir "$1"
	export TAPSTRIPE_STATE_DIR=$WORK/state
	SRC=$WORK/src.img
	ORIG=$WORK/orig.img
	TGT=$WORK/tgt.img
}

# start NAME CHAIN: a tapdisk in the background, its PID in TD_PID.
start() {
	nbd_start "$2" --name "$1" --log-file "$WORK/$1.log"
}

ctl() {
	"$TAPCTL" --run-dir "$WORK" snapshot -i "$TD_PID" "$@"
}

status_field() {
	ctl status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

# wait_state STATE: up to 30 s.
wait_state() {
	for _ in $(seq 300); do
		[ "$(status_field state 2>/dev/null)" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# expect OUT LOG...: ORIG with the writes of the LOGs ("offset length
# byte" lines) applied, in order.
expect() {
	python3 - "$ORIG" "$@" <<'PY'
import sys
img = bytearray(open(sys.argv[1], "rb").read())
for log in sys.argv[3:]:
    for line in open(log):
        off, length, byte = map(int, line.split())
        img[off:off + length] = bytes([byte]) * length
open(sys.argv[2], "wb").write(img)
PY
}

# same WHAT EXPECTED FILE: pass or fail with the first differing byte.
same() {
	if cmp -s "$2" "$3"; then
		pass "$1"
	else
		fail "$1" "$(cmp "$2" "$3" 2>&1 | head -1)"
	fi
}
