/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * poll-gate.h - when busy polling must stop because the CPU is wanted
 * elsewhere (issue #22): the back-off of tapdisk's loop and td-front's spin.
 *
 * A polling thread that is preempted takes the CPU from a thread that has
 * real work (on a loaded host, often the other side of the very ring it
 * polls).  The gate measures, over periods of TD_POLL_GATE_PERIOD_US, the
 * CPU time the thread got against the wall time it wanted the CPU (wall
 * time minus the time it slept); when it got less than
 * TD_POLL_GATE_MIN_PCT percent, it was kept waiting for a CPU, and the gate
 * closes: no polling for a hold time, doubled at every period found
 * contended again (from TD_POLL_GATE_HOLD_MIN_MS to TD_POLL_GATE_HOLD_MAX_MS)
 * and halved by one found free.  doc/tapdisk.md says why this signal.
 *
 * Pure logic: the caller passes every clock reading in, so tests inject
 * them.  One gate per polling thread, not thread-safe.
 */
#ifndef TAPSTRIPE_POLL_GATE_H
#define TAPSTRIPE_POLL_GATE_H

#include <stdbool.h>
#include <stdint.h>

#define TD_POLL_GATE_PERIOD_US	 10000u
#define TD_POLL_GATE_MIN_PCT	 80u
#define TD_POLL_GATE_HOLD_MIN_MS 20u
#define TD_POLL_GATE_HOLD_MAX_MS 1000u

struct td_poll_gate {
	bool based;	       /* a baseline was taken */
	uint64_t base_wall_ns; /* readings at the baseline */
	uint64_t base_cpu_ns;
	uint64_t base_sleep_ns;
	uint64_t closed_until_ns; /* 0: open */
	uint32_t hold_ms;	  /* the next hold */
	uint32_t last_pct;	  /* CPU share of the last period measured */
	uint64_t backoffs;	  /* times the gate closed */
	uint64_t periods;	  /* periods measured */
};

/* A zeroed gate is valid too; this resets one (open, no history). */
void td_poll_gate_init(struct td_poll_gate *g);

/*
 * May the thread poll at now_ns (CLOCK_MONOTONIC)?  False while closed;
 * when the hold has run out the gate opens and forgets its baseline (the
 * time it did not poll is not measured).
 */
bool td_poll_gate_open(struct td_poll_gate *g, uint64_t now_ns);

/*
 * True when a period has passed since the baseline (or there is none):
 * the caller then reads its thread's CPU clock and calls
 * td_poll_gate_measure.  Cheap: call it as often as the clock is read.
 */
bool td_poll_gate_due(const struct td_poll_gate *g, uint64_t now_ns);

/*
 * A measurement while polling: cpu_ns is the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), sleep_ns the total time the caller has
 * spent sleeping (blocked in epoll_wait or poll) so far.  The first call
 * (or the first after a hold) only takes the baseline.  Returns true when
 * the gate closed.
 */
bool td_poll_gate_measure(struct td_poll_gate *g, uint64_t now_ns,
			  uint64_t cpu_ns, uint64_t sleep_ns);

/* The calling thread's CPU time in ns (0 when the clock fails). */
uint64_t td_thread_cpu_ns(void);

#endif
