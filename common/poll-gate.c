/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * poll-gate.c - the back-off of busy polling on a contended CPU.
 */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/poll-gate.h"

#define NS_PER_US 1000ull
#define NS_PER_MS 1000000ull
/* A period in which the thread wanted the CPU for less than this share of
 * it says little (it mostly slept): it is not judged. */
#define GATE_MIN_BUSY_DIV 4u

void td_poll_gate_init(struct td_poll_gate *g, uint32_t cpus)
{
	memset(g, 0, sizeof(*g));
	g->cpus = cpus;
}

bool td_poll_gate_open(struct td_poll_gate *g, uint64_t now_ns)
{
	if (!g->closed_until_ns)
		return true;
	if (now_ns < g->closed_until_ns)
		return false;
	g->closed_until_ns = 0;
	g->based = false;
	return true;
}

bool td_poll_gate_due(const struct td_poll_gate *g, uint64_t now_ns)
{
	return !g->based ||
	       now_ns - g->base_wall_ns >= TD_POLL_GATE_PERIOD_US * NS_PER_US;
}

static void gate_base(struct td_poll_gate *g, uint64_t now_ns, uint64_t cpu_ns,
		      uint64_t sleep_ns)
{
	g->based = true;
	g->base_wall_ns = now_ns;
	g->base_cpu_ns = cpu_ns;
	g->base_sleep_ns = sleep_ns;
}

/* Close for the hold time, and double the next one. */
static void gate_close(struct td_poll_gate *g, uint64_t now_ns)
{
	uint32_t hold = g->hold_ms ? g->hold_ms : TD_POLL_GATE_HOLD_MIN_MS;

	g->closed_until_ns = now_ns + hold * NS_PER_MS;
	g->hold_ms = hold * 2 < TD_POLL_GATE_HOLD_MAX_MS
			     ? hold * 2
			     : TD_POLL_GATE_HOLD_MAX_MS;
	g->backoffs++;
	g->based = false;
	g->crowded = 0;
}

bool td_poll_gate_measure(struct td_poll_gate *g, uint64_t now_ns,
			  uint64_t cpu_ns, uint64_t sleep_ns, uint32_t runnable)
{
	uint64_t wall, slept, busy, cpu;

	if (!g->based || now_ns < g->base_wall_ns || cpu_ns < g->base_cpu_ns ||
	    sleep_ns < g->base_sleep_ns) {
		gate_base(g, now_ns, cpu_ns, sleep_ns);
		/* The baseline's sample counts: a probe after a hold (or a
		 * td-front run's start) then costs one period, not two. */
		g->crowded = g->cpus && runnable > g->cpus;
		return false;
	}
	wall = now_ns - g->base_wall_ns;
	slept = sleep_ns - g->base_sleep_ns;
	cpu = cpu_ns - g->base_cpu_ns;
	busy = wall > slept ? wall - slept : 0;
	gate_base(g, now_ns, cpu_ns, sleep_ns);
	if (busy < TD_POLL_GATE_PERIOD_US * NS_PER_US / GATE_MIN_BUSY_DIV)
		return false;
	g->periods++;
	g->last_pct = cpu >= busy ? 100u : (uint32_t)(cpu * 100 / busy);
	g->last_runnable = runnable;
	g->crowded = g->cpus && runnable > g->cpus ? g->crowded + 1 : 0;
	if (g->last_pct >= TD_POLL_GATE_MIN_PCT &&
	    g->crowded < TD_POLL_GATE_CROWDED_PERIODS) {
		/* Halved, not reset, by a free period: a load that comes
		 * and goes keeps the holds long enough that probing costs
		 * little. */
		if (!g->crowded)
			g->hold_ms = g->hold_ms / 2 < TD_POLL_GATE_HOLD_MIN_MS
					     ? 0
					     : g->hold_ms / 2;
		return false;
	}
	gate_close(g, now_ns);
	return true;
}

uint32_t td_poll_window_next(uint32_t window_us, uint32_t budget_us,
			     uint64_t waited_ns)
{
	uint32_t w;

	if (waited_ns > (uint64_t)budget_us * 1000)
		return window_us / 2;
	w = window_us ? window_us * 2 : TD_POLL_WINDOW_GROW_US;
	return w < budget_us ? w : budget_us;
}

uint64_t td_thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t td_host_runnable(void)
{
	/* One descriptor for the process, opened on first use and kept:
	 * the callers are the polling threads, once a period each. */
	static int fd = -2;
	char buf[128], *p;
	ssize_t n;

	if (fd == -2)
		fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "0.52 0.58 0.59 3/131 4567": runnable/threads is the fourth. */
	p = buf;
	for (int field = 0; field < 3 && p; field++)
		if ((p = strchr(p, ' ')))
			p++;
	return p ? (uint32_t)strtoul(p, NULL, 10) : 0;
}

uint32_t td_host_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (uint32_t)n : 1;
}
