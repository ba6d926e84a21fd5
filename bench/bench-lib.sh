# SPDX-License-Identifier: BSD-3-Clause
# bench-lib.sh - sourced by the benchmarks that start a server of their
# own (ring.sh, stages.sh, sort-overhead.sh, nbd-peers.sh): wait for it,
# stop it, read its CPU time.  Installed next to them (td-bench package).

# bench_wait_up WHAT LOG TEST...: poll TEST every 50 ms for up to 5 s;
# when it never holds, print that WHAT did not start, then LOG, and exit 1.
bench_wait_up() {
	local what=$1 log=$2
	shift 2
	for _ in $(seq 100); do
		"$@" && return 0
		sleep 0.05
	done
	echo "$what did not start; its log:" >&2
	cat "$log" >&2
	exit 1
}

# bench_stop PID: stop a process this script started (if any) and reap it.
bench_stop() {
	[ -n "$1" ] || return 0
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# bench_cpu_ticks PID: user + system clock ticks PID has used.
bench_cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
