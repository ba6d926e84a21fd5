/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_poll-gate.c - the back-off of busy polling (common/poll-gate.c):
 * clock readings injected from hand-written tables.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/poll-gate.h"

#define MS 1000000ull /* ns */
#define US 1000ull    /* ns */

/* One measurement and what the gate must say after it. */
struct step {
	uint64_t now_ms, cpu_us, sleep_us;
	bool closed;	   /* td_poll_gate_measure's answer */
	uint64_t backoffs; /* after it */
	uint64_t periods;
	uint32_t pct;
};

static void run_steps(struct td_poll_gate *g, const struct step *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool closed = td_poll_gate_measure(g, s[i].now_ms * MS,
						   s[i].cpu_us * US,
						   s[i].sleep_us * US, 0);

		assert_int_equal(closed, s[i].closed);
		assert_int_equal(g->backoffs, s[i].backoffs);
		assert_int_equal(g->periods, s[i].periods);
		assert_int_equal(g->last_pct, s[i].pct);
	}
}

/* A thread that got all, or 90 %, of the CPU it wanted keeps polling. */
static void test_free_cpu_stays_open(void **state)
{
	static const struct step steps[] = {
		{1000, 0, 0, false, 0, 0, 0},	    /* baseline only */
		{1010, 10000, 0, false, 0, 1, 100}, /* all of it */
		{1020, 19000, 0, false, 0, 2, 90},  /* 9 of 10 ms */
		{1030, 27000, 0, false, 0, 3, 80},  /* the limit */
	};
	struct td_poll_gate g;

	(void)state;
	td_poll_gate_init(&g, 0);
	run_steps(&g, steps, sizeof(steps) / sizeof(steps[0]));
	assert_true(td_poll_gate_open(&g, 1030 * MS));
}

/*
 * Half a CPU: the gate closes for 50 ms, then 100, 200, ... up to 1 s while
 * the CPU stays contended; each reopening first takes a baseline.
 */
static void test_contended_cpu_backs_off_doubling(void **state)
{
	static const struct {
		uint64_t closed_at_ms, hold_ms;
	} holds[] = {
		{1010, 50},  {1080, 100},  {1200, 200},	 {1420, 400},
		{1840, 800}, {2660, 1000}, {3680, 1000}, {4700, 1000},
	};
	struct td_poll_gate g;
	uint64_t cpu_us = 0;

	(void)state;
	td_poll_gate_init(&g, 0);
	assert_false(td_poll_gate_measure(&g, 1000 * MS, 0, 0, 0));
	for (size_t i = 0; i < sizeof(holds) / sizeof(holds[0]); i++) {
		uint64_t t = holds[i].closed_at_ms,
			 until = t + holds[i].hold_ms;

		cpu_us += 5000; /* 5 of the last 10 ms */
		assert_true(
			td_poll_gate_measure(&g, t * MS, cpu_us * US, 0, 0));
		assert_int_equal(g.backoffs, i + 1);
		assert_int_equal(g.last_pct, 50);
		assert_false(td_poll_gate_open(&g, t * MS));
		assert_false(td_poll_gate_open(&g, until * MS - 1));
		assert_true(td_poll_gate_open(&g, until * MS));
		/* Reopened: the next measurement is a baseline. */
		assert_true(td_poll_gate_due(&g, until * MS));
		assert_false(td_poll_gate_measure(&g, until * MS + 10 * MS,
						  cpu_us * US, 0, 0));
	}
}

/*
 * A free period after back-offs halves the next hold (200 -> 100 ms), so
 * a load that comes and goes does not make the gate probe every 50 ms;
 * free periods in a row bring it back to the minimum.
 */
static void test_free_period_halves_hold(void **state)
{
	static const struct step steps[] = {
		{0, 0, 0, false, 0, 0, 0},
		{10, 5000, 0, true, 1, 1, 50},	   /* 50 ms: until 60 */
		{60, 5000, 0, false, 1, 1, 50},	   /* baseline */
		{70, 10000, 0, true, 2, 2, 50},	   /* 100 ms: until 170 */
		{170, 10000, 0, false, 2, 2, 50},  /* baseline */
		{180, 20000, 0, false, 2, 3, 100}, /* free: next 200 -> 100 */
		{190, 25000, 0, true, 3, 4, 50},   /* 100 ms: until 290 */
		{290, 25000, 0, false, 3, 4, 50},  /* baseline; next 200 */
		{300, 35000, 0, false, 3, 5, 100}, /* -> 100 */
		{310, 45000, 0, false, 3, 6, 100}, /* -> 50 */
		{320, 55000, 0, false, 3, 7, 100}, /* -> the minimum */
		{330, 60000, 0, true, 4, 8, 50},   /* 50 ms: until 380 */
	};
	struct td_poll_gate g;

	(void)state;
	td_poll_gate_init(&g, 0);
	run_steps(&g, steps, 7);
	assert_false(td_poll_gate_open(&g, 289 * MS));
	assert_true(td_poll_gate_open(&g, 290 * MS));
	run_steps(&g, steps + 7, 5);
	assert_false(td_poll_gate_open(&g, 379 * MS));
	assert_true(td_poll_gate_open(&g, 380 * MS));
}

/*
 * Time slept is not time the thread wanted the CPU: 4.5 ms of CPU in a
 * 10 ms period with 5 ms asleep is 90 %, not 45 %.  A period spent mostly
 * asleep (busy under a quarter of a 5 ms period) is not judged at all;
 * 3 ms busy is, and 1 ms of CPU in it closes the gate.
 */
static void test_sleep_is_not_wanted_cpu(void **state)
{
	static const struct step steps[] = {
		{0, 0, 0, false, 0, 0, 0},
		{10, 4500, 5000, false, 0, 1, 90},
		{20, 4600, 14000, false, 0, 1, 90}, /* 1 ms busy: unjudged */
		{30, 5600, 21000, true, 1, 2, 33},  /* 1 of 3 ms: closed */
	};
	struct td_poll_gate g;

	(void)state;
	td_poll_gate_init(&g, 0);
	run_steps(&g, steps, sizeof(steps) / sizeof(steps[0]));
}

/* due: with no baseline at once; then a whole period after it. */
static void test_due_once_a_period(void **state)
{
	struct td_poll_gate g;

	(void)state;
	td_poll_gate_init(&g, 0);
	assert_true(td_poll_gate_due(&g, 5 * MS));
	assert_false(td_poll_gate_measure(&g, 5 * MS, 0, 0, 0));
	assert_false(td_poll_gate_due(&g, 5 * MS));
	assert_false(
		td_poll_gate_due(&g, 5 * MS + TD_POLL_GATE_PERIOD_US * US - 1));
	assert_true(td_poll_gate_due(&g, 5 * MS + TD_POLL_GATE_PERIOD_US * US));
	assert_true(td_poll_gate_open(&g, 0));
}

/* A clock that went back (a new thread's CPU clock): a new baseline. */
static void test_clock_backwards_rebases(void **state)
{
	static const struct step steps[] = {
		{100, 50000, 0, false, 0, 0, 0},
		{110, 1000, 0, false, 0, 0, 0}, /* CPU clock went back */
		{120, 1000, 0, false, 0, 0, 0}, /* 0 of 10 ms: would close */
	};
	struct td_poll_gate g;

	(void)state;
	td_poll_gate_init(&g, 0);
	run_steps(&g, steps, 2);
	/* The third is contended indeed: judged against the new base. */
	assert_true(td_poll_gate_measure(&g, steps[2].now_ms * MS,
					 steps[2].cpu_us * US, 0, 0));
	assert_int_equal(g.last_pct, 0);
}

/*
 * More threads runnable than CPUs (blktap3's test) at two measurements in
 * a row (the baseline's included) closes the gate even when this thread
 * got all its CPU: someone else waits for one.  As many as the CPUs, or an
 * unknown count (0), does not; nor does any count when the gate was given
 * no CPUs to compare with.
 */
static void test_runnable_above_cpus_closes(void **state)
{
	static const struct {
		uint32_t cpus, runnable;
		bool closed;
	} rows[] = {
		{2, 0, false}, {2, 1, false}, {2, 2, false}, {2, 3, true},
		{4, 4, false}, {4, 5, true},  {4, 9, true},  {0, 9, false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct td_poll_gate g;

		td_poll_gate_init(&g, rows[i].cpus);
		assert_false(
			td_poll_gate_measure(&g, 0, 0, 0, rows[i].runnable));
		/* All of the 10 ms on a CPU. */
		assert_int_equal(td_poll_gate_measure(&g, 10 * MS, 10 * MS, 0,
						      rows[i].runnable),
				 rows[i].closed);
		assert_int_equal(g.last_pct, 100);
		assert_int_equal(g.last_runnable, rows[i].runnable);
		assert_int_equal(g.backoffs, rows[i].closed);
	}
}

/* One uncrowded measurement between two crowded ones: the count starts
 * again (a kernel worker that ran at one sample is not a load); after a
 * hold, the baseline's crowded sample counts. */
static void test_crowded_must_be_in_a_row(void **state)
{
	static const struct {
		uint64_t now_ms, cpu_us;
		uint32_t runnable;
		bool closed;
	} rows[] = {
		{0, 0, 2, false},      {10, 10000, 3, false},
		{20, 20000, 2, false}, {30, 30000, 3, false},
		{40, 40000, 3, true},
	};
	struct td_poll_gate g;

	(void)state;
	td_poll_gate_init(&g, 2);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		assert_int_equal(td_poll_gate_measure(&g, rows[i].now_ms * MS,
						      rows[i].cpu_us * US, 0,
						      rows[i].runnable),
				 rows[i].closed);
	assert_int_equal(g.backoffs, 1);
	assert_false(td_poll_gate_open(&g, 89 * MS));
	assert_true(td_poll_gate_open(&g, 90 * MS));
	assert_false(td_poll_gate_measure(&g, 90 * MS, 50000 * US, 0, 3));
	assert_true(td_poll_gate_measure(&g, 100 * MS, 60000 * US, 0, 3));
	assert_int_equal(g.backoffs, 2);
}

/* The host's figures are there: at least this thread runs, on >= 1 CPU. */
/*
 * The window: waits the budget would have caught grow it (from the grow
 * step, doubling, capped at the budget), longer ones halve it to 0, and
 * it grows again from 0.  The edge: a wait of exactly the budget counts
 * as caught.
 */
static void test_window_adapts_to_waits(void **state)
{
	const uint32_t budget = 200;
	uint32_t w = budget;

	(void)state;
	/* A 1 MiB write: every wait longer than the budget. */
	for (int i = 0; i < 8; i++)
		w = td_poll_window_next(w, budget, 400 * 1000);
	assert_int_equal(w, 0);
	/* Small requests again: 10, 20, ..., then the budget. */
	w = td_poll_window_next(w, budget, 40 * 1000);
	assert_int_equal(w, TD_POLL_WINDOW_GROW_US);
	w = td_poll_window_next(w, budget, 40 * 1000);
	assert_int_equal(w, 2 * TD_POLL_WINDOW_GROW_US);
	for (int i = 0; i < 8; i++)
		w = td_poll_window_next(w, budget, 40 * 1000);
	assert_int_equal(w, budget);
	assert_int_equal(td_poll_window_next(w, budget, 200 * 1000), budget);
	assert_int_equal(td_poll_window_next(w, budget, 200 * 1000 + 1),
			 budget / 2);
	/* A budget of 0 (polling off) keeps the window at 0. */
	assert_int_equal(td_poll_window_next(0, 0, 0), 0);
	assert_int_equal(td_poll_window_next(0, 0, 1000), 0);
}

static void test_host_runnable_and_cpus(void **state)
{
	(void)state;
	assert_true(td_host_runnable() >= 1);
	assert_true(td_host_cpus() >= 1);
}

/* The thread's CPU clock moves when the thread spins. */
static void test_thread_cpu_clock(void **state)
{
	uint64_t a = td_thread_cpu_ns(), b;
	volatile uint64_t x = 0;

	(void)state;
	do {
		for (int i = 0; i < 100000; i++)
			x += i;
		b = td_thread_cpu_ns();
	} while (b == a);
	assert_true(b > a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_cpu_stays_open),
		cmocka_unit_test(test_contended_cpu_backs_off_doubling),
		cmocka_unit_test(test_free_period_halves_hold),
		cmocka_unit_test(test_sleep_is_not_wanted_cpu),
		cmocka_unit_test(test_due_once_a_period),
		cmocka_unit_test(test_clock_backwards_rebases),
		cmocka_unit_test(test_thread_cpu_clock),
		cmocka_unit_test(test_runnable_above_cpus_closes),
		cmocka_unit_test(test_crowded_must_be_in_a_row),
		cmocka_unit_test(test_host_runnable_and_cpus),
		cmocka_unit_test(test_window_adapts_to_waits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
