/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * poll-gate.h - when busy polling must stop because the CPU is wanted
 * elsewhere (issue #22): the back-off of tapdisk's loop and td-front's spin.
 *
 * A polling thread on a host with no CPU to spare takes it from a thread
 * that has real work (often the other side of the very ring it polls).
 * Once every TD_POLL_GATE_PERIOD_US of polling the gate looks at two
 * things: the CPU time the thread got against the wall time it wanted the
 * CPU (wall time minus the time it slept), and the threads runnable on the
 * host against its CPUs (blktap3's test).  When the thread got less than
 * TD_POLL_GATE_MIN_PCT percent (it was kept waiting for a CPU), or more
 * threads are runnable than there are CPUs (someone waits for one, maybe
 * because of this spin) at TD_POLL_GATE_CROWDED_PERIODS measurements in a
 * row, the CPU is contended and the gate closes: no
 * polling for a hold time, doubled at every period found
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

#define TD_POLL_GATE_PERIOD_US	 5000u
#define TD_POLL_GATE_MIN_PCT	 80u
#define TD_POLL_GATE_HOLD_MIN_MS 50u
#define TD_POLL_GATE_HOLD_MAX_MS 1000u
/*
 * Periods in a row that must find the host crowded before the gate
 * closes: the runnable count is one sample, and with both sides of a ring
 * spinning on a 2-CPU host one short-lived kernel worker would make it
 * exceed the CPUs.
 */
#define TD_POLL_GATE_CROWDED_PERIODS 2u

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
	uint32_t cpus;		  /* online CPUs; 0: runnable not compared */
	uint32_t last_runnable;	  /* host's runnable threads, last measured */
	uint32_t crowded;	  /* periods in a row that found it crowded */
};

/*
 * Reset g (open, no history); cpus is the host's online CPUs (0: do not
 * compare the runnable threads with them).  A zeroed gate is valid too.
 */
void td_poll_gate_init(struct td_poll_gate *g, uint32_t cpus);

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
 * spent sleeping (blocked in epoll_wait or poll) so far, runnable the
 * threads runnable on the host now (td_host_runnable; 0: unknown).  The
 * first call (or the first after a hold) only takes the baseline.
 * Returns true when the gate closed.
 */
bool td_poll_gate_measure(struct td_poll_gate *g, uint64_t now_ns,
			  uint64_t cpu_ns, uint64_t sleep_ns,
			  uint32_t runnable);

/*
 * The adaptive polling window, as KVM's halt polling adapts its own: the
 * window a poller spins for before it sleeps, judged by the wait that
 * followed.  A wait of waited_ns that a spin of budget_us would have
 * caught doubles the window (from TD_POLL_WINDOW_GROW_US, at most
 * budget_us); a longer one halves it, so a wait the budget never catches
 * (a disk slower than the budget) soon costs no spinning at all.  Returns
 * the next window.  tapdisk's loop judges its sleeps in epoll_wait by it,
 * td-front its whole wait for a response (spin and sleep).
 */
#define TD_POLL_WINDOW_GROW_US 10u
uint32_t td_poll_window_next(uint32_t window_us, uint32_t budget_us,
			     uint64_t waited_ns);

/* The calling thread's CPU time in ns (0 when the clock fails). */
uint64_t td_thread_cpu_ns(void);

/*
 * Threads runnable on the host now, the caller's included (the fourth
 * field of /proc/loadavg, kept open: one pread); 0 when unknown.
 */
uint32_t td_host_runnable(void);

/* Online CPUs (at least 1). */
uint32_t td_host_cpus(void);

#endif
