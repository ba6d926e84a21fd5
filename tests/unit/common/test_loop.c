/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_loop.c - the epoll event loop: fds, timers, deferred calls, hooks.
 *
 * Every test drives the loop by hand with td_loop_run_once().  The fixture
 * registers a timerfd as a watchdog: if a broken loop blocks for
 * WATCHDOG_MS, the watchdog's callback fails the test instead of letting it
 * hang (a timerfd, not a td_timer, so that it works even when the loop's
 * own timers do not).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "common/log.h"
#include "common/loop.h"
#include "common/poll-gate.h"

#define NS_PER_MS 1000000ull
#define US_PER_MS 1000ull
/* Far beyond any delay the tests expect. */
#define WATCHDOG_MS  5000ull
#define FAR_DELAY_US (2 * WATCHDOG_MS * US_PER_MS)

/* --- an event log shared by the callbacks ------------------------------- */

#define TRACE_MAX 64

struct trace {
	char ev[TRACE_MAX][16];
	unsigned int n;
};

static struct trace trace;

static void trace_reset(void)
{
	memset(&trace, 0, sizeof(trace));
}

static void trace_add(const char *ev)
{
	assert_true(trace.n < TRACE_MAX);
	snprintf(trace.ev[trace.n], sizeof(trace.ev[0]), "%s", ev);
	trace.n++;
}

/* Compare the trace with the expected events, in order. */
static void trace_expect(unsigned int n, ...)
{
	va_list ap;

	assert_int_equal(trace.n, n);
	va_start(ap, n);
	for (unsigned int i = 0; i < n; i++)
		assert_string_equal(trace.ev[i], va_arg(ap, const char *));
	va_end(ap);
}

/* --- fixture ------------------------------------------------------------- */

struct fixture {
	struct td_loop *loop;
	int pipe_a[2];
	int pipe_b[2];
	int watchdog_fd;
	struct td_fd watchdog;
};

static void watchdog_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	fail_msg("the loop blocked for %llu ms", WATCHDOG_MS);
}

static uint64_t cpu_clock_full(void);
static uint32_t runnable_one(void);

static int setup(void **state)
{
	struct itimerspec expiry = {0};
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	if (td_loop_create(&f->loop) || pipe2(f->pipe_a, O_CLOEXEC) ||
	    pipe2(f->pipe_b, O_CLOEXEC)) {
		free(f);
		return -1;
	}
	/*
	 * The polling tests judge the window by wall time: a loaded host
	 * (CI's) must not close the back-off's gate under them.  The
	 * back-off's own tests inject other probes.
	 */
	td_loop_set_gate_probes(f->loop, cpu_clock_full, runnable_one);
	expiry.it_value.tv_sec = WATCHDOG_MS / 1000;
	f->watchdog_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (f->watchdog_fd < 0 ||
	    timerfd_settime(f->watchdog_fd, 0, &expiry, NULL) ||
	    td_loop_add_fd(f->loop, &f->watchdog, f->watchdog_fd, EPOLLIN,
			   watchdog_cb, NULL)) {
		free(f);
		return -1;
	}
	trace_reset();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	td_loop_del_fd(&f->watchdog);
	close(f->watchdog_fd);
	close(f->pipe_a[0]);
	close(f->pipe_a[1]);
	close(f->pipe_b[0]);
	close(f->pipe_b[1]);
	td_loop_destroy(f->loop);
	free(f);
	return 0;
}

static void write_byte(int fd)
{
	char c = 'x';

	assert_int_equal(write(fd, &c, 1), 1);
}

static uint64_t elapsed_ms(uint64_t start_ns)
{
	return (td_now_ns() - start_ns) / NS_PER_MS;
}

/* --- file descriptors ----------------------------------------------------- */

struct fd_seen {
	unsigned int calls;
	uint32_t events;
	void *opaque;
	struct td_fd *fde;
};

static void fd_record_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct fd_seen *seen = opaque;

	seen->calls++;
	seen->events = events;
	seen->opaque = opaque;
	seen->fde = fde;
}

static void test_fd_readable(void **state)
{
	struct fixture *f = *state;
	struct fd_seen seen = {0};
	struct td_fd fde = {0};

	assert_int_equal(td_loop_add_fd(f->loop, &fde, f->pipe_a[0], EPOLLIN,
					fd_record_cb, &seen),
			 0);
	assert_ptr_equal(fde.loop, f->loop);

	/* Nothing written yet: no callback. */
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 0);

	write_byte(f->pipe_a[1]);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.events, EPOLLIN);
	assert_ptr_equal(seen.opaque, &seen);
	assert_ptr_equal(seen.fde, &fde);

	/* Level-triggered: still readable, called again. */
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 2);

	td_loop_del_fd(&fde);
	assert_null(fde.loop);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 2);
}

static void test_fd_writable_and_hangup(void **state)
{
	struct fixture *f = *state;
	struct fd_seen seen = {0};
	struct td_fd fde = {0};

	assert_int_equal(td_loop_add_fd(f->loop, &fde, f->pipe_a[1], EPOLLOUT,
					fd_record_cb, &seen),
			 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.events, EPOLLOUT);
	td_loop_del_fd(&fde);

	/* The reader sees EPOLLHUP once the writer is gone. */
	memset(&seen, 0, sizeof(seen));
	assert_int_equal(td_loop_add_fd(f->loop, &fde, f->pipe_a[0], EPOLLIN,
					fd_record_cb, &seen),
			 0);
	close(f->pipe_a[1]);
	f->pipe_a[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(f->pipe_a[1] >= 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.events, EPOLLHUP);
	td_loop_del_fd(&fde);
}

static void test_fd_two_fds_each_own_opaque(void **state)
{
	struct fixture *f = *state;
	struct fd_seen seen_a = {0}, seen_b = {0};
	struct td_fd fde_a = {0}, fde_b = {0};

	assert_int_equal(td_loop_add_fd(f->loop, &fde_a, f->pipe_a[0], EPOLLIN,
					fd_record_cb, &seen_a),
			 0);
	assert_int_equal(td_loop_add_fd(f->loop, &fde_b, f->pipe_b[0], EPOLLIN,
					fd_record_cb, &seen_b),
			 0);
	write_byte(f->pipe_b[1]);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen_a.calls, 0);
	assert_int_equal(seen_b.calls, 1);
	assert_ptr_equal(seen_b.fde, &fde_b);
	assert_ptr_equal(seen_b.opaque, &seen_b);
	td_loop_del_fd(&fde_a);
	td_loop_del_fd(&fde_b);
}

static void test_fd_add_errors(void **state)
{
	struct fixture *f = *state;
	struct fd_seen seen = {0};
	struct td_fd fde = {0}, dup_fde = {0};
	int closed_fd = dup(f->pipe_a[0]);
	FILE *regular = tmpfile();

	assert_true(closed_fd >= 0);
	close(closed_fd);
	assert_int_equal(td_loop_add_fd(f->loop, &fde, closed_fd, EPOLLIN,
					fd_record_cb, &seen),
			 -EBADF);
	assert_null(fde.loop);

	/* A regular file cannot be polled. */
	assert_non_null(regular);
	assert_int_equal(td_loop_add_fd(f->loop, &fde, fileno(regular), EPOLLIN,
					fd_record_cb, &seen),
			 -EPERM);
	assert_null(fde.loop);
	fclose(regular);

	assert_int_equal(td_loop_add_fd(f->loop, &fde, f->pipe_a[0], EPOLLIN,
					fd_record_cb, &seen),
			 0);
	assert_int_equal(td_loop_add_fd(f->loop, &dup_fde, f->pipe_a[0],
					EPOLLIN, fd_record_cb, &seen),
			 -EEXIST);
	assert_null(dup_fde.loop);
	td_loop_del_fd(&fde);
	/* Removing twice, or an fd never added, is harmless. */
	td_loop_del_fd(&fde);
	td_loop_del_fd(&dup_fde);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 0);
}

static void test_fd_mod(void **state)
{
	struct fixture *f = *state;
	struct fd_seen seen = {0};
	struct td_fd fde = {0};

	/* A pipe's write end never becomes readable. */
	assert_int_equal(td_loop_add_fd(f->loop, &fde, f->pipe_a[1], EPOLLIN,
					fd_record_cb, &seen),
			 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 0);

	assert_int_equal(td_loop_mod_fd(&fde, EPOLLOUT), 0);
	assert_int_equal(fde.events, EPOLLOUT);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.events, EPOLLOUT);

	/* Same mask: nothing to do, still succeeds. */
	assert_int_equal(td_loop_mod_fd(&fde, EPOLLOUT), 0);

	assert_int_equal(td_loop_mod_fd(&fde, EPOLLIN), 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(seen.calls, 1);
	td_loop_del_fd(&fde);

	/* Not registered. */
	assert_int_equal(td_loop_mod_fd(&fde, EPOLLOUT), -EINVAL);
}

static void test_fd_mod_error_keeps_events(void **state)
{
	struct fixture *f = *state;
	struct fd_seen seen = {0};
	struct td_fd fde = {0};
	int fd = dup(f->pipe_a[1]);

	assert_true(fd >= 0);
	assert_int_equal(
		td_loop_add_fd(f->loop, &fde, fd, EPOLLIN, fd_record_cb, &seen),
		0);
	/* Closing the only descriptor of the file drops it from epoll. */
	close(fd);
	assert_int_equal(td_loop_mod_fd(&fde, EPOLLOUT), -EBADF);
	assert_int_equal(fde.events, EPOLLIN);
	td_loop_del_fd(&fde);
	assert_null(fde.loop);
}

/*
 * Two fds ready in the same batch; whichever callback runs first removes
 * and frees the other one, whose callback must then not run.  Under
 * valgrind or ASan this also proves the loop does not touch the freed
 * td_fd.
 */
struct pair {
	struct td_fd *fde[2];
	unsigned int calls[2];
};

static void pair_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct pair *p = opaque;
	int self = fde == p->fde[0] ? 0 : 1;
	int other = !self;

	assert_ptr_equal(fde, p->fde[self]);
	p->calls[self]++;
	if (p->fde[other]) {
		td_loop_del_fd(p->fde[other]);
		free(p->fde[other]);
		p->fde[other] = NULL;
	}
}

static void test_fd_del_other_in_same_batch(void **state)
{
	struct fixture *f = *state;
	struct pair p = {0};
	int survivor;

	p.fde[0] = calloc(1, sizeof(struct td_fd));
	p.fde[1] = calloc(1, sizeof(struct td_fd));
	assert_non_null(p.fde[0]);
	assert_non_null(p.fde[1]);
	assert_int_equal(td_loop_add_fd(f->loop, p.fde[0], f->pipe_a[0],
					EPOLLIN, pair_cb, &p),
			 0);
	assert_int_equal(td_loop_add_fd(f->loop, p.fde[1], f->pipe_b[0],
					EPOLLIN, pair_cb, &p),
			 0);
	write_byte(f->pipe_a[1]);
	write_byte(f->pipe_b[1]);

	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(p.calls[0] + p.calls[1], 1);
	survivor = p.fde[0] ? 0 : 1;
	assert_non_null(p.fde[survivor]);
	assert_null(p.fde[!survivor]);
	assert_int_equal(p.calls[survivor], 1);

	td_loop_del_fd(p.fde[survivor]);
	free(p.fde[survivor]);
}

/* A callback that removes and frees its own td_fd. */
static void del_self_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	unsigned int *calls = opaque;

	(*calls)++;
	td_loop_del_fd(fde);
	free(fde);
}

static void test_fd_del_self(void **state)
{
	struct fixture *f = *state;
	struct td_fd *fde = calloc(1, sizeof(*fde));
	unsigned int calls = 0;

	assert_non_null(fde);
	assert_int_equal(td_loop_add_fd(f->loop, fde, f->pipe_a[0], EPOLLIN,
					del_self_cb, &calls),
			 0);
	write_byte(f->pipe_a[1]);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(calls, 1);
}

/* --- timers ----------------------------------------------------------------- */

static void timer_trace_cb(struct td_timer *t, void *opaque)
{
	assert_false(td_timer_armed(t));
	trace_add(opaque);
}

static void far_cb(struct td_timer *t, void *opaque)
{
	trace_add("far");
}

static void run_until_traced(struct td_loop *loop, unsigned int n)
{
	uint64_t start = td_now_ns();

	while (trace.n < n) {
		assert_int_equal(td_loop_run_once(loop, -1), 0);
		assert_true(elapsed_ms(start) < WATCHDOG_MS);
	}
}

static void test_timer_deadline_order(void **state)
{
	struct fixture *f = *state;
	struct td_timer t30 = {0}, t10 = {0}, t20 = {0};

	td_loop_timer_arm(f->loop, &t30, 30 * US_PER_MS, timer_trace_cb, "t30");
	td_loop_timer_arm(f->loop, &t10, 10 * US_PER_MS, timer_trace_cb, "t10");
	td_loop_timer_arm(f->loop, &t20, 20 * US_PER_MS, timer_trace_cb, "t20");
	assert_true(td_timer_armed(&t10));
	run_until_traced(f->loop, 3);
	trace_expect(3, "t10", "t20", "t30");
	assert_false(td_timer_armed(&t10));
	assert_false(td_timer_armed(&t20));
	assert_false(td_timer_armed(&t30));
}

static void test_timer_cancel(void **state)
{
	struct fixture *f = *state;
	struct td_timer t1 = {0}, t2 = {0}, never = {0};

	td_loop_timer_arm(f->loop, &t1, 10 * US_PER_MS, timer_trace_cb, "t1");
	td_loop_timer_arm(f->loop, &t2, 20 * US_PER_MS, timer_trace_cb, "t2");
	td_loop_timer_cancel(&t1);
	assert_false(td_timer_armed(&t1));
	/* Cancelling again, or a timer never armed, is harmless. */
	td_loop_timer_cancel(&t1);
	td_loop_timer_cancel(&never);
	run_until_traced(f->loop, 1);
	trace_expect(1, "t2");
	/* Nothing left: a short wait fires nothing. */
	assert_int_equal(td_loop_run_once(f->loop, 30), 0);
	trace_expect(1, "t2");
}

/* Re-arming an armed timer moves it: it fires once, at the new deadline. */
static void test_timer_rearm_moves(void **state)
{
	struct fixture *f = *state;
	struct td_timer t1 = {0}, t2 = {0};

	td_loop_timer_arm(f->loop, &t1, 10 * US_PER_MS, timer_trace_cb, "t1");
	td_loop_timer_arm(f->loop, &t2, 20 * US_PER_MS, timer_trace_cb, "t2");
	td_loop_timer_arm(f->loop, &t1, 40 * US_PER_MS, timer_trace_cb, "t1");
	run_until_traced(f->loop, 2);
	trace_expect(2, "t2", "t1");
	assert_int_equal(td_loop_run_once(f->loop, 30), 0);
	assert_int_equal(trace.n, 2);
}

/* Both timers expired in the same pass; the first cancels the second. */
struct cancel_other {
	struct td_timer first, second;
};

static void cancel_other_cb(struct td_timer *t, void *opaque)
{
	struct cancel_other *c = opaque;

	trace_add("first");
	td_loop_timer_cancel(&c->second);
}

static void test_timer_cancel_expired_from_callback(void **state)
{
	struct fixture *f = *state;
	struct cancel_other c = {0};

	td_loop_timer_arm(f->loop, &c.first, 0, cancel_other_cb, &c);
	td_loop_timer_arm(f->loop, &c.second, 0, timer_trace_cb, "second");
	usleep(2 * US_PER_MS);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(1, "first");
	assert_false(td_timer_armed(&c.second));
	assert_int_equal(td_loop_run_once(f->loop, 5), 0);
	trace_expect(1, "first");
}

struct periodic {
	struct td_timer t;
	unsigned int fired;
	uint64_t passes_at_fire[4];
};

static struct td_loop *periodic_loop;

static void periodic_cb(struct td_timer *t, void *opaque)
{
	struct periodic *p = opaque;

	assert_false(td_timer_armed(t));
	p->passes_at_fire[p->fired] = td_loop_passes(periodic_loop);
	p->fired++;
	if (p->fired < 3)
		td_loop_timer_arm(periodic_loop, t, 1 * US_PER_MS, periodic_cb,
				  p);
}

static void test_timer_rearm_from_callback(void **state)
{
	struct fixture *f = *state;
	struct periodic p = {.fired = 0};
	uint64_t start = td_now_ns();

	periodic_loop = f->loop;
	td_loop_timer_arm(f->loop, &p.t, 1 * US_PER_MS, periodic_cb, &p);
	while (p.fired < 3) {
		assert_int_equal(td_loop_run_once(f->loop, -1), 0);
		assert_true(elapsed_ms(start) < WATCHDOG_MS);
	}
	assert_int_equal(p.fired, 3);
	assert_false(td_timer_armed(&p.t));
	/* A re-armed timer lies in the future: at most one firing a pass. */
	assert_true(p.passes_at_fire[0] < p.passes_at_fire[1]);
	assert_true(p.passes_at_fire[1] < p.passes_at_fire[2]);
}

/* A timer re-armed with no delay from its callback fires once per pass. */
static int zero_fired;

static void zero_rearm_cb(struct td_timer *t, void *opaque)
{
	zero_fired++;
	td_loop_timer_arm(opaque, t, 0, zero_rearm_cb, opaque);
}

static void test_timer_zero_rearm_once_per_pass(void **state)
{
	struct fixture *f = *state;
	struct td_timer t;

	memset(&t, 0, sizeof(t));
	zero_fired = 0;
	td_loop_timer_arm(f->loop, &t, 0, zero_rearm_cb, f->loop);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(zero_fired, 1);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(zero_fired, 2);
	td_loop_timer_cancel(&t);
}

/* A delay of centuries neither wraps into the past nor overflows the wait. */
static void test_timer_huge_delay(void **state)
{
	struct fixture *f = *state;
	struct td_timer t;
	uint64_t start = td_now_ns();

	memset(&t, 0, sizeof(t));
	zero_fired = 0;
	td_loop_timer_arm(f->loop, &t, UINT64_MAX / 2, zero_rearm_cb, f->loop);
	assert_int_equal(td_loop_run_once(f->loop, 20), 0);
	assert_int_equal(zero_fired, 0);
	assert_true(elapsed_ms(start) >= 15); /* waited for the 20 ms bound */
	td_loop_timer_cancel(&t);
}

/* run_once(-1) waits for the nearest timer, and one pass fires it. */
static void test_timer_bounds_infinite_wait(void **state)
{
	struct fixture *f = *state;
	struct td_timer far = {0}, near = {0};
	uint64_t start, ms;

	td_loop_timer_arm(f->loop, &far, FAR_DELAY_US, far_cb, NULL);
	td_loop_timer_arm(f->loop, &near, 50 * US_PER_MS, timer_trace_cb,
			  "near");
	start = td_now_ns();
	assert_int_equal(td_loop_run_once(f->loop, -1), 0);
	ms = elapsed_ms(start);
	trace_expect(1, "near");
	assert_true(ms >= 50);
	assert_true(ms < WATCHDOG_MS / 2);
	assert_true(td_timer_armed(&far));
	td_loop_timer_cancel(&far);
}

/* A timeout longer than the nearest timer is cut short by it... */
static void test_timer_bounds_long_timeout(void **state)
{
	struct fixture *f = *state;
	struct td_timer near = {0};
	uint64_t start, ms;

	td_loop_timer_arm(f->loop, &near, 30 * US_PER_MS, timer_trace_cb,
			  "near");
	start = td_now_ns();
	assert_int_equal(td_loop_run_once(f->loop, (int)FAR_DELAY_US / 1000),
			 0);
	ms = elapsed_ms(start);
	trace_expect(1, "near");
	assert_true(ms >= 30);
	assert_true(ms < WATCHDOG_MS / 2);
}

/* ...and a shorter timeout wins over a later timer. */
static void test_timer_short_timeout_wins(void **state)
{
	struct fixture *f = *state;
	struct td_timer later = {0};
	uint64_t start, ms;

	td_loop_timer_arm(f->loop, &later, 500 * US_PER_MS, timer_trace_cb,
			  "later");
	start = td_now_ns();
	assert_int_equal(td_loop_run_once(f->loop, 20), 0);
	ms = elapsed_ms(start);
	assert_int_equal(trace.n, 0);
	assert_true(ms >= 20);
	assert_true(ms < 500);
	assert_true(td_timer_armed(&later));
	td_loop_timer_cancel(&later);
}

/* --- deferred calls ---------------------------------------------------------- */

static void defer_trace_cb(struct td_defer *d, void *opaque)
{
	assert_false(d->queued);
	trace_add(opaque);
}

static void test_defer_fifo(void **state)
{
	struct fixture *f = *state;
	struct td_defer a = {0}, b = {0}, c = {0};

	td_loop_defer(f->loop, &a, defer_trace_cb, "a");
	td_loop_defer(f->loop, &b, defer_trace_cb, "b");
	td_loop_defer(f->loop, &c, defer_trace_cb, "c");
	/* Never inside the caller's stack. */
	assert_int_equal(trace.n, 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(3, "a", "b", "c");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(trace.n, 3);
}

/* Pending deferred calls make run_once(-1) return at once. */
static void test_defer_pending_does_not_wait(void **state)
{
	struct fixture *f = *state;
	struct td_defer a = {0};
	uint64_t start;

	td_loop_defer(f->loop, &a, defer_trace_cb, "a");
	start = td_now_ns();
	assert_int_equal(td_loop_run_once(f->loop, -1), 0);
	assert_true(elapsed_ms(start) < WATCHDOG_MS / 2);
	trace_expect(1, "a");
}

struct chain {
	struct td_loop *loop;
	struct td_defer first, second;
};

static void chain_first_cb(struct td_defer *d, void *opaque)
{
	struct chain *c = opaque;

	trace_add("first");
	td_loop_defer(c->loop, &c->second, defer_trace_cb, "second");
}

static void test_defer_queued_while_running_waits(void **state)
{
	struct fixture *f = *state;
	struct chain c = {.loop = f->loop};

	td_loop_defer(f->loop, &c.first, chain_first_cb, &c);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(1, "first");
	assert_true(c.second.queued);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(2, "first", "second");
}

/* A call that queues itself again runs once per pass, not forever. */
struct self_requeue {
	struct td_loop *loop;
	struct td_defer d;
	unsigned int runs, max_runs;
};

static void self_requeue_cb(struct td_defer *d, void *opaque)
{
	struct self_requeue *s = opaque;

	/* Fail, rather than spin forever, when it runs twice in a pass. */
	if (++s->runs > s->max_runs)
		fail_msg("ran %u times in %u passes", s->runs, s->max_runs);
	td_loop_defer(s->loop, d, self_requeue_cb, s);
}

static void test_defer_self_requeue(void **state)
{
	struct fixture *f = *state;
	struct self_requeue s = {.loop = f->loop};

	td_loop_defer(f->loop, &s.d, self_requeue_cb, &s);
	for (unsigned int pass = 1; pass <= 3; pass++) {
		s.max_runs = pass;
		assert_int_equal(td_loop_run_once(f->loop, 0), 0);
		assert_int_equal(s.runs, pass);
	}
	td_loop_defer_cancel(f->loop, &s.d);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(s.runs, 3);
}

static void test_defer_twice_runs_once(void **state)
{
	struct fixture *f = *state;
	struct td_defer a = {0}, b = {0};

	td_loop_defer(f->loop, &a, defer_trace_cb, "a");
	td_loop_defer(f->loop, &b, defer_trace_cb, "b");
	/* Already queued: ignored, keeps its place, its cb and its opaque. */
	td_loop_defer(f->loop, &a, defer_trace_cb, "a-again");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(2, "a", "b");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(trace.n, 2);
}

static void test_defer_cancel_outside_pass(void **state)
{
	struct fixture *f = *state;
	struct td_defer a = {0}, b = {0}, c = {0}, never = {0};

	td_loop_defer(f->loop, &a, defer_trace_cb, "a");
	td_loop_defer(f->loop, &b, defer_trace_cb, "b");
	td_loop_defer(f->loop, &c, defer_trace_cb, "c");
	td_loop_defer_cancel(f->loop, &b);
	assert_false(b.queued);
	td_loop_defer_cancel(f->loop, &b);
	td_loop_defer_cancel(f->loop, &never);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(2, "a", "c");
}

/*
 * Cancelling from inside the running batch.  ctl->cancel lists what the
 * first call cancels, ctl->queue what it queues (before cancelling).
 */
struct batch {
	struct td_loop *loop;
	struct td_defer d[5];
	const char *names[5];
	int cancel[4]; /* indexes, -1 terminated */
	int queue[4];
	int actor;   /* index of the call that acts */
	int requeue; /* queued again after the cancels, or -1 */
};

static void batch_cb(struct td_defer *d, void *opaque)
{
	struct batch *b = opaque;
	int self = (int)(d - b->d);

	trace_add(b->names[self]);
	if (self != b->actor)
		return;
	for (int i = 0; b->queue[i] >= 0; i++)
		td_loop_defer(b->loop, &b->d[b->queue[i]], batch_cb, b);
	for (int i = 0; b->cancel[i] >= 0; i++)
		td_loop_defer_cancel(b->loop, &b->d[b->cancel[i]]);
	if (b->requeue >= 0)
		td_loop_defer(b->loop, &b->d[b->requeue], batch_cb, b);
}

static void batch_init(struct batch *b, struct td_loop *loop, int actor)
{
	static const char *const names[5] = {"a", "b", "c", "d", "e"};

	memset(b, 0, sizeof(*b));
	b->loop = loop;
	b->actor = actor;
	memcpy(b->names, names, sizeof(names));
	b->cancel[0] = -1;
	b->queue[0] = -1;
	b->requeue = -1;
}

/* Queue b->d[0..n-1] and run one pass. */
static void batch_run(struct batch *b, int n)
{
	for (int i = 0; i < n; i++)
		td_loop_defer(b->loop, &b->d[i], batch_cb, b);
	assert_int_equal(td_loop_run_once(b->loop, 0), 0);
}

/* Afterwards the queue must still work: two fresh calls, in order. */
static void expect_queue_sane(struct td_loop *loop)
{
	struct td_defer x = {0}, y = {0};
	unsigned int before = trace.n;

	td_loop_defer(loop, &x, defer_trace_cb, "x");
	td_loop_defer(loop, &y, defer_trace_cb, "y");
	assert_int_equal(td_loop_run_once(loop, 0), 0);
	assert_int_equal(trace.n, before + 2);
	assert_string_equal(trace.ev[before], "x");
	assert_string_equal(trace.ev[before + 1], "y");
	assert_int_equal(td_loop_run_once(loop, 0), 0);
	assert_int_equal(trace.n, before + 2);
}

/* [a b c], a cancels b (in the middle). */
static void test_defer_cancel_middle_of_batch(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 0);
	b.cancel[0] = 1;
	b.cancel[1] = -1;
	batch_run(&b, 3);
	trace_expect(2, "a", "c");
	expect_queue_sane(f->loop);
}

/* [a b c], a cancels c, the batch's last call (the defer_last marker). */
static void test_defer_cancel_batch_last_from_first(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 0);
	b.cancel[0] = 2;
	b.cancel[1] = -1;
	batch_run(&b, 3);
	trace_expect(2, "a", "b");
	assert_false(b.d[2].queued);
	expect_queue_sane(f->loop);
}

/* [a b c], b cancels c: the last of the batch, right after the runner. */
static void test_defer_cancel_batch_last_from_prev(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 1);
	b.cancel[0] = 2;
	b.cancel[1] = -1;
	batch_run(&b, 3);
	trace_expect(2, "a", "b");
	expect_queue_sane(f->loop);
}

/*
 * [a b c], a queues d (next pass), then cancels c: the batch now ends at
 * b, and d must still wait for the next pass.
 */
static void test_defer_cancel_last_then_new_waits(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 0);
	b.queue[0] = 3;
	b.queue[1] = -1;
	b.cancel[0] = 2;
	b.cancel[1] = -1;
	batch_run(&b, 3);
	trace_expect(2, "a", "b");
	assert_true(b.d[3].queued);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(3, "a", "b", "d");
	expect_queue_sane(f->loop);
}

/*
 * [a b], a queues c, then cancels b: b was both the head of the list and
 * the batch's last call, so nothing else may run in this pass.
 */
static void test_defer_cancel_only_rest_then_new_waits(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 0);
	b.queue[0] = 2;
	b.queue[1] = -1;
	b.cancel[0] = 1;
	b.cancel[1] = -1;
	batch_run(&b, 2);
	trace_expect(1, "a");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(2, "a", "c");
	expect_queue_sane(f->loop);
}

/* [a b c d], a cancels d then c: the marker moves back twice. */
static void test_defer_cancel_two_from_the_end(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 0);
	b.cancel[0] = 3;
	b.cancel[1] = 2;
	b.cancel[2] = -1;
	batch_run(&b, 4);
	trace_expect(2, "a", "b");
	expect_queue_sane(f->loop);
}

/*
 * [a b c], a cancels c and queues it again: it is now a call queued during
 * the step, so it runs once, in the next pass.
 */
static void test_defer_cancel_and_requeue_last(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 0);
	b.cancel[0] = 2;
	b.cancel[1] = -1;
	b.requeue = 2;
	batch_run(&b, 3);
	trace_expect(2, "a", "b");
	assert_true(b.d[2].queued);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(3, "a", "b", "c");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(3, "a", "b", "c");
	expect_queue_sane(f->loop);
}

/* [a b c], a cancels b and queues it again: c ends the pass, b is next. */
static void test_defer_cancel_and_requeue_middle(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 0);
	b.cancel[0] = 1;
	b.cancel[1] = -1;
	b.requeue = 1;
	batch_run(&b, 3);
	trace_expect(2, "a", "c");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(3, "a", "c", "b");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(3, "a", "c", "b");
	expect_queue_sane(f->loop);
}

/* The last call of the batch cancels a call queued during the step. */
static void test_defer_last_cancels_new(void **state)
{
	struct fixture *f = *state;
	struct batch b;

	batch_init(&b, f->loop, 1);
	b.queue[0] = 2;
	b.queue[1] = 3;
	b.queue[2] = -1;
	b.cancel[0] = 2;
	b.cancel[1] = -1;
	batch_run(&b, 2);
	trace_expect(2, "a", "b");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(3, "a", "b", "d");
	expect_queue_sane(f->loop);
}

/* --- pass-end hooks ------------------------------------------------------------ */

struct hooks {
	struct td_hook *h[3];
	const char *names[3];
	/* h[actor] deletes h[victim] (and frees it when victim != actor) */
	int actor, victim;
	bool acted;
};

static void hook_cb(struct td_hook *h, void *opaque)
{
	struct hooks *hs = opaque;
	int self = -1;

	for (int i = 0; i < 3; i++)
		if (hs->h[i] == h)
			self = i;
	assert_true(self >= 0);
	trace_add(hs->names[self]);
	if (self != hs->actor || hs->acted)
		return;
	hs->acted = true;
	td_loop_del_hook(hs->h[hs->victim]);
	free(hs->h[hs->victim]);
	hs->h[hs->victim] = NULL;
}

static void hooks_init(struct hooks *hs, struct td_loop *loop, int actor,
		       int victim)
{
	static const char *const names[3] = {"h0", "h1", "h2"};

	memset(hs, 0, sizeof(*hs));
	memcpy(hs->names, names, sizeof(names));
	hs->actor = actor;
	hs->victim = victim;
	for (int i = 0; i < 3; i++) {
		hs->h[i] = calloc(1, sizeof(struct td_hook));
		assert_non_null(hs->h[i]);
		td_loop_add_hook(loop, hs->h[i], hook_cb, hs);
	}
}

static void hooks_fini(struct hooks *hs)
{
	for (int i = 0; i < 3; i++) {
		if (!hs->h[i])
			continue;
		td_loop_del_hook(hs->h[i]);
		free(hs->h[i]);
	}
}

static void test_hooks_every_pass_in_order(void **state)
{
	struct fixture *f = *state;
	struct hooks hs;

	hooks_init(&hs, f->loop, -1, -1);
	/* Passes with nothing else to do run the hooks too. */
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(6, "h0", "h1", "h2", "h0", "h1", "h2");
	hooks_fini(&hs);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(trace.n, 6);
}

static void test_hook_deletes_itself(void **state)
{
	struct fixture *f = *state;
	struct hooks hs;

	hooks_init(&hs, f->loop, 1, 1);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(5, "h0", "h1", "h2", "h0", "h2");
	hooks_fini(&hs);
}

/* A hook deletes (and frees) the next one: it must not run, even once. */
static void test_hook_deletes_next(void **state)
{
	struct fixture *f = *state;
	struct hooks hs;

	hooks_init(&hs, f->loop, 0, 1);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(4, "h0", "h2", "h0", "h2");
	hooks_fini(&hs);
}

/* The last hook deletes the first: this pass is complete already. */
static void test_hook_deletes_earlier(void **state)
{
	struct fixture *f = *state;
	struct hooks hs;

	hooks_init(&hs, f->loop, 2, 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(5, "h0", "h1", "h2", "h1", "h2");
	hooks_fini(&hs);
}

static void test_hook_del_unregistered_is_harmless(void **state)
{
	struct td_hook h = {0};

	(void)state;
	td_loop_del_hook(&h);
	assert_null(h.loop);
}

/* --- one pass, all steps -------------------------------------------------------- */

struct pass_order {
	struct td_loop *loop;
	struct td_fd fde;
	struct td_timer timer;
	struct td_defer from_fd, from_timer, from_hook;
	struct td_hook hook;
};

static void order_fd_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct pass_order *o = opaque;
	char c;

	assert_int_equal(read(fde->fd, &c, 1), 1);
	trace_add("fd");
	td_loop_defer(o->loop, &o->from_fd, defer_trace_cb, "defer-fd");
}

static void order_timer_cb(struct td_timer *t, void *opaque)
{
	struct pass_order *o = opaque;

	trace_add("timer");
	td_loop_defer(o->loop, &o->from_timer, defer_trace_cb, "defer-timer");
}

static void order_hook_cb(struct td_hook *h, void *opaque)
{
	struct pass_order *o = opaque;

	trace_add("hook");
	/* Queued after the deferred step: runs in the next pass. */
	if (!o->from_hook.cb)
		td_loop_defer(o->loop, &o->from_hook, defer_trace_cb,
			      "defer-hook");
}

static void test_pass_step_order(void **state)
{
	struct fixture *f = *state;
	struct pass_order o = {.loop = f->loop};

	assert_int_equal(td_loop_add_fd(f->loop, &o.fde, f->pipe_a[0], EPOLLIN,
					order_fd_cb, &o),
			 0);
	td_loop_timer_arm(f->loop, &o.timer, 0, order_timer_cb, &o);
	td_loop_add_hook(f->loop, &o.hook, order_hook_cb, &o);
	write_byte(f->pipe_a[1]);
	usleep(1 * US_PER_MS);

	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(5, "fd", "timer", "defer-fd", "defer-timer", "hook");
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	trace_expect(7, "fd", "timer", "defer-fd", "defer-timer", "hook",
		     "defer-hook", "hook");
	td_loop_del_hook(&o.hook);
	td_loop_del_fd(&o.fde);
}

/* --- run, stop, passes ----------------------------------------------------------- */

struct stopper {
	struct td_loop *loop;
	struct td_timer t;
	unsigned int fired, stop_at;
	uint64_t step_us; /* between firings; 0: 1 ms */
};

static void stopper_cb(struct td_timer *t, void *opaque)
{
	struct stopper *s = opaque;

	if (++s->fired == s->stop_at)
		td_loop_stop(s->loop);
	else
		td_loop_timer_arm(s->loop, t, s->step_us ?: 1 * US_PER_MS,
				  stopper_cb, s);
}

static void test_run_until_stop_from_timer(void **state)
{
	struct fixture *f = *state;
	struct stopper s = {.loop = f->loop, .stop_at = 3};

	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	assert_int_equal(s.fired, 3);
	assert_true(td_loop_passes(f->loop) >= 3);
}

static void stop_fd_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct td_loop *loop = opaque;

	trace_add("fd");
	td_loop_stop(loop);
}

static void test_run_until_stop_from_fd(void **state)
{
	struct fixture *f = *state;
	struct td_fd fde = {0};

	assert_int_equal(td_loop_add_fd(f->loop, &fde, f->pipe_a[0], EPOLLIN,
					stop_fd_cb, f->loop),
			 0);
	write_byte(f->pipe_a[1]);
	assert_int_equal(td_loop_run(f->loop), 0);
	/* Stopped after the pass that called td_loop_stop. */
	trace_expect(1, "fd");
	assert_int_equal(td_loop_passes(f->loop), 1);

	/* td_loop_run can be entered again after a stop. */
	assert_int_equal(td_loop_run(f->loop), 0);
	trace_expect(2, "fd", "fd");
	assert_int_equal(td_loop_passes(f->loop), 2);
	td_loop_del_fd(&fde);
}

static void test_passes_count(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(td_loop_passes(f->loop), 0);
	for (unsigned int i = 1; i <= 5; i++) {
		assert_int_equal(td_loop_run_once(f->loop, 0), 0);
		assert_int_equal(td_loop_passes(f->loop), i);
	}
}

/* An interrupted wait is a pass like any other: returns 0, not -EINTR. */
static void on_sigalrm(int sig)
{
	(void)sig;
}

static void test_run_once_eintr_is_not_an_error(void **state)
{
	struct fixture *f = *state;
	struct itimerval every_10ms = {
		.it_interval = {.tv_usec = 10 * US_PER_MS},
		.it_value = {.tv_usec = 10 * US_PER_MS},
	};
	struct itimerval off = {0};
	struct sigaction sa = {.sa_handler = on_sigalrm}, old_sa;
	uint64_t start;
	int ret;

	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, &old_sa), 0);
	assert_int_equal(setitimer(ITIMER_REAL, &every_10ms, NULL), 0);
	start = td_now_ns();
	ret = td_loop_run_once(f->loop, -1);
	assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
	assert_int_equal(sigaction(SIGALRM, &old_sa, NULL), 0);

	assert_int_equal(ret, 0);
	assert_int_equal(td_loop_passes(f->loop), 1);
	/* Woken by the signal, long before the watchdog. */
	assert_true(elapsed_ms(start) < WATCHDOG_MS / 2);
}

static void test_destroy_null_is_harmless(void **state)
{
	(void)state;
	td_loop_destroy(NULL);
}

/* --- busy polling (td_loop_set_poll_budget) ------------------------------- */

struct poll_probe {
	struct td_loop *loop;
	struct td_poller p;
	unsigned int polls, arms, work; /* work: polls left that find work */
	unsigned int arm_work;		/* arms left that find work */
	bool del_self;
	uint32_t max_window_us; /* the widest window a poll ran in */
};

static bool probe_poll(struct td_poller *p, void *opaque)
{
	struct poll_probe *pr = opaque;

	assert_true(td_loop_polling(pr->loop));
	pr->polls++;
	{
		struct td_loop_poll_stats st;

		td_loop_get_poll_stats(pr->loop, &st);
		if (st.window_us > pr->max_window_us)
			pr->max_window_us = st.window_us;
	}
	if (pr->del_self)
		td_loop_del_poller(p);
	if (!pr->work)
		return false;
	pr->work--;
	return true;
}

static bool probe_arm(struct td_poller *p, void *opaque)
{
	struct poll_probe *pr = opaque;

	(void)p;
	assert_false(td_loop_polling(pr->loop));
	pr->arms++;
	if (!pr->arm_work)
		return false;
	pr->arm_work--;
	return true;
}

/* Budget 0 (the default): pollers are never called, the loop sleeps. */
static void test_poll_off_never_polls(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop, .work = 100};
	struct stopper s = {.loop = f->loop, .stop_at = 3};
	struct td_loop_poll_stats st;

	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	assert_int_equal(pr.polls, 0);
	assert_int_equal(pr.arms, 0);
	td_loop_get_poll_stats(f->loop, &st);
	assert_int_equal(st.rounds, 0);
	assert_int_equal(st.sleeps, 0);
	td_loop_del_poller(&pr.p);
}

/*
 * A poller that finds work 50 times in a row keeps the loop awake (no
 * sleep while it does), then the window runs out, arm is called, and the
 * loop sleeps until the stopper's timer.
 */
static void test_poll_work_keeps_polling(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop, .work = 50};
	struct stopper s = {.loop = f->loop, .stop_at = 2};
	struct td_loop_poll_stats st;

	assert_int_equal(td_loop_set_poll_budget(f->loop, 200), 0);
	assert_int_equal(td_loop_poll_budget(f->loop), 200);
	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	td_loop_timer_arm(f->loop, &s.t, 20 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	td_loop_get_poll_stats(f->loop, &st);
	assert_true(pr.polls > 50);
	assert_true(st.hits >= 50);
	assert_true(st.rounds >= pr.polls);
	assert_true(pr.arms >= 1);
	assert_true(st.sleeps >= 1);
	assert_true(st.poll_ns > 0);
	td_loop_del_poller(&pr.p);
}

/* Work seen while arming: the loop polls again instead of sleeping. */
static void test_poll_arm_work_skips_sleep(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop, .arm_work = 3};
	struct stopper s = {.loop = f->loop, .stop_at = 1};
	struct td_loop_poll_stats st;

	assert_int_equal(td_loop_set_poll_budget(f->loop, 50), 0);
	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	td_loop_timer_arm(f->loop, &s.t, 30 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	td_loop_get_poll_stats(f->loop, &st);
	/* Three arms found work, the fourth let the loop sleep. */
	assert_true(pr.arms >= 4);
	assert_int_equal(st.sleeps, pr.arms - 3);
	td_loop_del_poller(&pr.p);
}

/*
 * Sleeps far longer than the budget halve the window until polling
 * stops; an idle loop then costs no poll at all.
 */
static void test_poll_window_shrinks_when_idle(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop};
	struct stopper s = {.loop = f->loop, .stop_at = 12};
	struct td_loop_poll_stats st;
	unsigned int polls;

	assert_int_equal(td_loop_set_poll_budget(f->loop, 64), 0);
	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	/* 1 ms apart: each sleep is 15 times the budget. */
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	td_loop_get_poll_stats(f->loop, &st);
	assert_int_equal(st.window_us, 0);
	polls = pr.polls;
	s.fired = 0;
	s.stop_at = 3;
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	assert_int_equal(pr.polls, polls);
	td_loop_del_poller(&pr.p);
}

/*
 * Work seen while arming with the window shrunk to 0: the loop polls for
 * it (once it spun between arms, never taking the work).
 */
static void test_poll_arm_work_with_no_window(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop};
	struct stopper s = {.loop = f->loop, .stop_at = 12};
	struct td_loop_poll_stats st;
	unsigned int polls;

	assert_int_equal(td_loop_set_poll_budget(f->loop, 64), 0);
	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	td_loop_get_poll_stats(f->loop, &st);
	assert_int_equal(st.window_us, 0);
	polls = pr.polls;
	pr.arm_work = 1;
	pr.work = 1;
	s.fired = 0;
	s.stop_at = 3;
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	assert_int_equal(pr.arm_work, 0);
	assert_int_equal(pr.work, 0);
	assert_true(pr.polls > polls);
	td_loop_del_poller(&pr.p);
}

/*
 * Long sleeps shrink the window to 0; sleeps shorter than the budget (a
 * timer 1 ms apart under a 4 ms budget) grow it again.
 */
static void test_poll_window_grows_on_short_sleeps(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop};
	struct stopper s = {.loop = f->loop, .stop_at = 16};
	struct td_loop_poll_stats st;

	assert_int_equal(td_loop_set_poll_budget(f->loop, 4000), 0);
	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	s.step_us = 10 * US_PER_MS;
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	td_loop_get_poll_stats(f->loop, &st);
	assert_int_equal(st.window_us, 0);
	/*
	 * On a loaded host a 1 ms sleep may last longer than the budget now
	 * and then, and the window halves again: judge by the widest window
	 * a poll ran in over 16 ticks, not by the last one.
	 */
	s.fired = 0;
	s.stop_at = 16;
	s.step_us = 1 * US_PER_MS;
	pr.max_window_us = 0;
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	assert_true(pr.max_window_us >= TD_LOOP_POLL_GROW_US);
	td_loop_del_poller(&pr.p);
}

static void test_poll_budget_bounds_and_self_delete(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop, .work = 5, .del_self = true};
	struct stopper s = {.loop = f->loop, .stop_at = 1};

	assert_int_equal(
		td_loop_set_poll_budget(f->loop, TD_LOOP_POLL_MAX_US + 1),
		-EINVAL);
	assert_int_equal(td_loop_poll_budget(f->loop), 0);
	assert_int_equal(td_loop_set_poll_budget(f->loop, 100), 0);
	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	td_loop_timer_arm(f->loop, &s.t, 5 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	/* It removed itself in its first poll: called once, armed never. */
	assert_int_equal(pr.polls, 1);
	assert_int_equal(pr.arms, 0);
	td_loop_del_poller(&pr.p); /* harmless again */
	assert_int_equal(td_loop_set_poll_budget(f->loop, 0), 0);
}

/* A timer that sets the polling budget, then stops the loop later. */
struct switcher {
	struct td_loop *loop;
	struct td_timer t;
	struct poll_probe *pr;
	uint32_t budget_us;
	unsigned int fired, polls_at_switch, arms_at_switch;
};

static void switcher_cb(struct td_timer *t, void *opaque)
{
	struct switcher *sw = opaque;

	if (++sw->fired == 1) {
		assert_int_equal(
			td_loop_set_poll_budget(sw->loop, sw->budget_us), 0);
		sw->polls_at_switch = sw->pr->polls;
		sw->arms_at_switch = sw->pr->arms;
		td_loop_timer_arm(sw->loop, t, 5 * US_PER_MS, switcher_cb, sw);
	} else {
		td_loop_stop(sw->loop);
	}
}

/*
 * Switched off at run time while a poller always finds work: the window
 * ends at once, the poller is armed (its notifications asked for again)
 * and never polled again; the loop sleeps until the stop timer.
 */
static void test_poll_switch_off_at_run_time(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop, .work = UINT32_MAX};
	struct switcher sw = {.loop = f->loop, .pr = &pr, .budget_us = 0};
	struct td_loop_poll_stats st;

	assert_int_equal(td_loop_set_poll_budget(f->loop, 500), 0);
	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	td_loop_timer_arm(f->loop, &sw.t, 2 * US_PER_MS, switcher_cb, &sw);
	assert_int_equal(td_loop_run(f->loop), 0);
	assert_true(sw.polls_at_switch > 0);
	assert_int_equal(sw.arms_at_switch, 0);
	assert_int_equal(pr.polls, sw.polls_at_switch);
	assert_int_equal(pr.arms, 1);
	td_loop_get_poll_stats(f->loop, &st);
	assert_int_equal(st.budget_us, 0);
	assert_int_equal(st.window_us, 0);
	td_loop_del_poller(&pr.p);
}

/* Switched on at run time: the next pass after the switch polls. */
static void test_poll_switch_on_at_run_time(void **state)
{
	struct fixture *f = *state;
	struct poll_probe pr = {.loop = f->loop, .work = 10};
	struct switcher sw = {.loop = f->loop, .pr = &pr, .budget_us = 100};

	td_loop_add_poller(f->loop, &pr.p, probe_poll, probe_arm, &pr);
	td_loop_timer_arm(f->loop, &sw.t, 2 * US_PER_MS, switcher_cb, &sw);
	assert_int_equal(td_loop_run(f->loop), 0);
	assert_int_equal(sw.polls_at_switch, 0);
	assert_true(pr.polls > 10);
	assert_true(pr.arms >= 1);
	td_loop_del_poller(&pr.p);
}

/* --- the back-off on a contended CPU (common/poll-gate.h) ---------------- */

/* Injected thread CPU clocks: all of the wall time, or half of it. */
static uint64_t cpu_clock_full(void)
{
	return td_now_ns();
}

static uint64_t cpu_clock_half(void)
{
	return td_now_ns() / 2;
}

/* The host's runnable threads: the loop's alone, or a crowd. */
static uint32_t runnable_one(void)
{
	return 1;
}

static uint32_t runnable_crowd(void)
{
	return 1000;
}

/* A poller that always finds work and notes the longest gap between two
 * of its polls across a back-off. */
struct gap_probe {
	struct td_loop *loop;
	struct td_poller p;
	unsigned int polls;
	uint64_t last_ns, backoffs, gap_ns;
};

static bool gap_poll(struct td_poller *p, void *opaque)
{
	struct gap_probe *g = opaque;
	struct td_loop_poll_stats st;
	uint64_t now = td_now_ns();

	(void)p;
	td_loop_get_poll_stats(g->loop, &st);
	if (st.backoffs != g->backoffs && g->last_ns) {
		if (!g->gap_ns || now - g->last_ns < g->gap_ns)
			g->gap_ns = now - g->last_ns;
	}
	g->backoffs = st.backoffs;
	g->last_ns = now;
	g->polls++;
	return true;
}

static void run_gap_probe(struct fixture *f, uint64_t (*clock)(void),
			  uint32_t (*runnable)(void), struct gap_probe *g,
			  struct td_loop_poll_stats *st)
{
	/*
	 * Ticks every 1 ms (shorter than the budget, so that the window does
	 * not shrink to 0) wake the loop while polling is held off.
	 */
	struct stopper s = {.loop = f->loop, .stop_at = 100};

	g->loop = f->loop;
	td_loop_set_gate_probes(f->loop, clock, runnable);
	assert_int_equal(td_loop_set_poll_budget(f->loop, 4000), 0);
	td_loop_add_poller(f->loop, &g->p, gap_poll, NULL, g);
	td_loop_timer_arm(f->loop, &s.t, 1 * US_PER_MS, stopper_cb, &s);
	assert_int_equal(td_loop_run(f->loop), 0);
	td_loop_get_poll_stats(f->loop, st);
	td_loop_del_poller(&g->p);
	td_loop_set_gate_probes(f->loop, cpu_clock_full, runnable_one);
}

/*
 * A thread that gets all the CPU it wants polls on and never backs off.
 */
static void test_poll_free_cpu_no_backoff(void **state)
{
	struct gap_probe g = {0};
	struct td_loop_poll_stats st;

	run_gap_probe(*state, cpu_clock_full, runnable_one, &g, &st);
	assert_int_equal(st.backoffs, 0);
	assert_false(st.backoff);
	assert_true(st.cpu_pct >= 99); /* the two clocks are read apart */
	assert_true(g.polls > 0);
}

/*
 * A thread that gets half the CPU it wants while polling stops polling
 * (poll_backoffs counts it) for at least the minimum hold, even though
 * its poller always has work; then it tries again.
 */
static void test_poll_contended_cpu_backs_off(void **state)
{
	struct gap_probe g = {0};
	struct td_loop_poll_stats st;

	run_gap_probe(*state, cpu_clock_half, runnable_one, &g, &st);
	assert_true(st.backoffs >= 1);
	assert_true(st.cpu_pct >= 49 && st.cpu_pct <= 51);
	/* It polled again after the hold, not before. */
	assert_true(g.gap_ns >= TD_POLL_GATE_HOLD_MIN_MS * NS_PER_MS);
	/* A new budget reopens the gate and keeps the count. */
	assert_int_equal(td_loop_set_poll_budget(g.loop, 100), 0);
	td_loop_get_poll_stats(g.loop, &st);
	assert_false(st.backoff);
	assert_true(st.backoffs >= 1);
}

/*
 * A thread that gets all its CPU on a host with more runnable threads than
 * CPUs backs off too: its spin may be what keeps one of them waiting.
 */
static void test_poll_crowded_host_backs_off(void **state)
{
	struct gap_probe g = {0};
	struct td_loop_poll_stats st;

	run_gap_probe(*state, cpu_clock_full, runnable_crowd, &g, &st);
	assert_true(st.backoffs >= 1);
	assert_true(st.cpu_pct >= 99);
	assert_int_equal(st.runnable, 1000);
	assert_true(st.cpus >= 1);
	assert_true(g.gap_ns >= TD_POLL_GATE_HOLD_MIN_MS * NS_PER_MS);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_timer_zero_rearm_once_per_pass),
		T(test_timer_huge_delay),
		T(test_fd_readable),
		T(test_fd_writable_and_hangup),
		T(test_fd_two_fds_each_own_opaque),
		T(test_fd_add_errors),
		T(test_fd_mod),
		T(test_fd_mod_error_keeps_events),
		T(test_fd_del_other_in_same_batch),
		T(test_fd_del_self),
		T(test_timer_deadline_order),
		T(test_timer_cancel),
		T(test_timer_rearm_moves),
		T(test_timer_cancel_expired_from_callback),
		T(test_timer_rearm_from_callback),
		T(test_timer_bounds_infinite_wait),
		T(test_timer_bounds_long_timeout),
		T(test_timer_short_timeout_wins),
		T(test_defer_fifo),
		T(test_defer_pending_does_not_wait),
		T(test_defer_queued_while_running_waits),
		T(test_defer_self_requeue),
		T(test_defer_twice_runs_once),
		T(test_defer_cancel_outside_pass),
		T(test_defer_cancel_middle_of_batch),
		T(test_defer_cancel_batch_last_from_first),
		T(test_defer_cancel_batch_last_from_prev),
		T(test_defer_cancel_last_then_new_waits),
		T(test_defer_cancel_only_rest_then_new_waits),
		T(test_defer_cancel_two_from_the_end),
		T(test_defer_cancel_and_requeue_last),
		T(test_defer_cancel_and_requeue_middle),
		T(test_defer_last_cancels_new),
		T(test_hooks_every_pass_in_order),
		T(test_hook_deletes_itself),
		T(test_hook_deletes_next),
		T(test_hook_deletes_earlier),
		T(test_hook_del_unregistered_is_harmless),
		T(test_pass_step_order),
		T(test_run_until_stop_from_timer),
		T(test_run_until_stop_from_fd),
		T(test_passes_count),
		T(test_run_once_eintr_is_not_an_error),
		T(test_destroy_null_is_harmless),
		T(test_poll_off_never_polls),
		T(test_poll_work_keeps_polling),
		T(test_poll_arm_work_skips_sleep),
		T(test_poll_window_shrinks_when_idle),
		T(test_poll_window_grows_on_short_sleeps),
		T(test_poll_budget_bounds_and_self_delete),
		T(test_poll_switch_off_at_run_time),
		T(test_poll_switch_on_at_run_time),
		T(test_poll_arm_work_with_no_window),
		T(test_poll_free_cpu_no_backoff),
		T(test_poll_contended_cpu_backs_off),
		T(test_poll_crowded_host_backs_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
