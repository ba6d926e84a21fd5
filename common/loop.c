/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loop.c - epoll event loop with timers, deferred calls and pass-end hooks.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "common/loop.h"
#include "common/poll-gate.h"

#define LOOP_MAX_EVENTS 64

TAILQ_HEAD(td_timer_list, td_timer);
TAILQ_HEAD(td_defer_list, td_defer);
TAILQ_HEAD(td_hook_list, td_hook);
TAILQ_HEAD(td_poller_list, td_poller);

struct td_loop {
	int epfd;
	bool stop;
	uint64_t passes;
	/* Stage timing (tapdisk/stages.c): when set, woke_ns is taken as
	 * each pass's epoll_wait returns. */
	bool stamp_wake;
	uint64_t woke_ns;
	struct td_timer_list timers; /* sorted by deadline */
	struct td_defer_list deferred;
	struct td_hook_list hooks;
	/* The batch being dispatched, so that td_loop_del_fd can drop it. */
	struct epoll_event *batch;
	int batch_len;
	/* Last deferred call of the running step; later ones wait a pass. */
	struct td_defer *defer_last;
	/* Next hook of the running step: td_loop_del_hook moves it on. */
	struct td_hook *hook_next;
	/* Last timer due in the running step; later ones wait a pass. */
	struct td_timer *timer_last;
	/* Busy polling (td_loop_set_poll_budget). */
	struct td_poller_list pollers;
	struct td_poller *poller_next; /* td_loop_del_poller moves it on */
	uint32_t budget_us, window_us;
	bool polling;
	bool arm_work; /* an arm saw work: the next step polls for it */
	uint64_t rounds, hits, sleeps, poll_ns;
	/* The back-off on a contended CPU (common/poll-gate.h). */
	struct td_poll_gate gate;
	uint64_t slept_ns;		 /* time spent in sleeping passes */
	uint64_t (*cpu_clock)(void);	 /* td_thread_cpu_ns; tests inject */
	uint32_t (*host_runnable)(void); /* td_host_runnable; likewise */
};

int td_loop_create(struct td_loop **out)
{
	struct td_loop *loop = calloc(1, sizeof(*loop));

	if (!loop)
		return -ENOMEM;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		int err = -errno;

		free(loop);
		return err;
	}
	TAILQ_INIT(&loop->timers);
	TAILQ_INIT(&loop->deferred);
	TAILQ_INIT(&loop->hooks);
	TAILQ_INIT(&loop->pollers);
	loop->cpu_clock = td_thread_cpu_ns;
	loop->host_runnable = td_host_runnable;
	td_poll_gate_init(&loop->gate, td_host_cpus());
	*out = loop;
	return 0;
}

void td_loop_destroy(struct td_loop *loop)
{
	if (!loop)
		return;
	close(loop->epfd);
	free(loop);
}

int td_loop_add_fd(struct td_loop *loop, struct td_fd *fde, int fd,
		   uint32_t events, td_fd_cb cb, void *opaque)
{
	struct epoll_event ev = {.events = events, .data.ptr = fde};

	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	fde->loop = loop;
	fde->fd = fd;
	fde->events = events;
	fde->cb = cb;
	fde->opaque = opaque;
	return 0;
}

int td_loop_mod_fd(struct td_fd *fde, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = fde};

	if (!fde->loop)
		return -EINVAL;
	if (events == fde->events)
		return 0;
	if (epoll_ctl(fde->loop->epfd, EPOLL_CTL_MOD, fde->fd, &ev) < 0)
		return -errno;
	fde->events = events;
	return 0;
}

void td_loop_del_fd(struct td_fd *fde)
{
	if (!fde->loop)
		return;
	struct td_loop *loop = fde->loop;

	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fde->fd, NULL);
	/* The owner may free fde now: forget it in the batch being run. */
	for (int i = 0; i < loop->batch_len; i++)
		if (loop->batch[i].data.ptr == fde)
			loop->batch[i].data.ptr = NULL;
	fde->loop = NULL;
}

void td_loop_timer_arm(struct td_loop *loop, struct td_timer *t,
		       uint64_t delay_us, td_timer_cb cb, void *opaque)
{
	struct td_timer *pos;

	uint64_t now = td_now_ns();

	td_loop_timer_cancel(t);
	t->loop = loop;
	/* Saturate: a delay of centuries is "never", not a wrap to the past. */
	t->deadline_ns = delay_us > (UINT64_MAX - now) / 1000ull
				 ? UINT64_MAX
				 : now + delay_us * 1000ull;
	t->cb = cb;
	t->opaque = opaque;
	TAILQ_FOREACH(pos, &loop->timers, link)
	{
		if (pos->deadline_ns > t->deadline_ns) {
			TAILQ_INSERT_BEFORE(pos, t, link);
			return;
		}
	}
	TAILQ_INSERT_TAIL(&loop->timers, t, link);
}

void td_loop_timer_cancel(struct td_timer *t)
{
	if (!t->loop)
		return;
	if (t->loop->timer_last == t)
		t->loop->timer_last = TAILQ_PREV(t, td_timer_list, link);
	TAILQ_REMOVE(&t->loop->timers, t, link);
	t->loop = NULL;
}

void td_loop_defer(struct td_loop *loop, struct td_defer *d, td_defer_cb cb,
		   void *opaque)
{
	if (d->queued)
		return;
	d->queued = true;
	d->cb = cb;
	d->opaque = opaque;
	TAILQ_INSERT_TAIL(&loop->deferred, d, link);
}

void td_loop_defer_cancel(struct td_loop *loop, struct td_defer *d)
{
	if (!d->queued)
		return;
	if (loop->defer_last == d)
		loop->defer_last = TAILQ_PREV(d, td_defer_list, link);
	TAILQ_REMOVE(&loop->deferred, d, link);
	d->queued = false;
}

void td_loop_add_hook(struct td_loop *loop, struct td_hook *h, td_hook_cb cb,
		      void *opaque)
{
	h->loop = loop;
	h->cb = cb;
	h->opaque = opaque;
	TAILQ_INSERT_TAIL(&loop->hooks, h, link);
}

void td_loop_del_hook(struct td_hook *h)
{
	if (!h->loop)
		return;
	/* The owner may free h now: the running step must not reach it. */
	if (h->loop->hook_next == h)
		h->loop->hook_next = TAILQ_NEXT(h, link);
	TAILQ_REMOVE(&h->loop->hooks, h, link);
	h->loop = NULL;
}

/* Milliseconds until the first timer, rounded up; -1 when none. */
static int loop_timer_timeout_ms(struct td_loop *loop)
{
	struct td_timer *t = TAILQ_FIRST(&loop->timers);
	uint64_t now;

	if (!t)
		return -1;
	now = td_now_ns();
	if (t->deadline_ns <= now)
		return 0;
	if ((t->deadline_ns - now) / 1000000 >= INT_MAX)
		return INT_MAX;
	return (int)((t->deadline_ns - now + 999999) / 1000000);
}

static void loop_run_timers(struct td_loop *loop)
{
	uint64_t now = td_now_ns();
	struct td_timer *t;

	/*
	 * Fire the timers due now, and only those: one re-armed from its
	 * callback with a zero delay may be due again at once, and waits for
	 * the next pass instead of spinning here.
	 */
	loop->timer_last = NULL;
	TAILQ_FOREACH(t, &loop->timers, link)
	{
		if (t->deadline_ns > now)
			break;
		loop->timer_last = t;
	}
	while (loop->timer_last && (t = TAILQ_FIRST(&loop->timers))) {
		if (t == loop->timer_last)
			loop->timer_last = NULL;
		TAILQ_REMOVE(&loop->timers, t, link);
		t->loop = NULL;
		t->cb(t, t->opaque);
	}
}

static void loop_run_deferred(struct td_loop *loop)
{
	struct td_defer *d;

	/* Calls queued from here on belong to the next pass. */
	loop->defer_last = TAILQ_LAST(&loop->deferred, td_defer_list);
	while (loop->defer_last && (d = TAILQ_FIRST(&loop->deferred))) {
		if (d == loop->defer_last)
			loop->defer_last = NULL;
		TAILQ_REMOVE(&loop->deferred, d, link);
		d->queued = false;
		d->cb(d, d->opaque);
	}
	loop->defer_last = NULL;
}

static void loop_run_hooks(struct td_loop *loop)
{
	struct td_hook *h;

	for (h = TAILQ_FIRST(&loop->hooks); h; h = loop->hook_next) {
		loop->hook_next = TAILQ_NEXT(h, link);
		h->cb(h, h->opaque);
	}
}

/* Every poller's poll (or arm); true when one of them said so. */
static bool loop_call_pollers(struct td_loop *loop, bool arm)
{
	struct td_poller *p;
	bool any = false;

	for (p = TAILQ_FIRST(&loop->pollers); p; p = loop->poller_next) {
		td_poller_cb cb = arm ? p->arm : p->poll;

		loop->poller_next = TAILQ_NEXT(p, link);
		if (cb && cb(p, p->opaque))
			any = true;
	}
	return any;
}

/*
 * One pass: wait at most timeout_ms, dispatch the fds, then (while
 * polling) the pollers, then timers, deferred calls and hooks.  *work is
 * true when an fd or a poller had something.
 */
static int loop_pass(struct td_loop *loop, int timeout_ms, bool *work)
{
	struct epoll_event events[LOOP_MAX_EVENTS];
	int timer_ms = loop_timer_timeout_ms(loop);
	int n;

	if (!TAILQ_EMPTY(&loop->deferred))
		timeout_ms = 0;
	else if (timer_ms >= 0 && (timeout_ms < 0 || timer_ms < timeout_ms))
		timeout_ms = timer_ms;

	n = epoll_wait(loop->epfd, events, LOOP_MAX_EVENTS, timeout_ms);
	if (n < 0) {
		if (errno != EINTR)
			return -errno;
		n = 0;
	}
	if (loop->stamp_wake)
		loop->woke_ns = td_now_ns();
	loop->passes++;
	loop->batch = events;
	loop->batch_len = n;
	for (int i = 0; i < n; i++) {
		/* NULL when an earlier callback of this pass removed it. */
		struct td_fd *fde = events[i].data.ptr;

		if (fde)
			fde->cb(fde, events[i].events, fde->opaque);
	}
	loop->batch = NULL;
	loop->batch_len = 0;
	*work = n > 0;
	if (loop->polling && loop_call_pollers(loop, false))
		*work = true;
	loop_run_timers(loop);
	loop_run_deferred(loop);
	loop_run_hooks(loop);
	return 0;
}

int td_loop_run_once(struct td_loop *loop, int timeout_ms)
{
	bool work;

	return loop_pass(loop, timeout_ms, &work);
}

/*
 * Once a period while polling: measure the CPU the thread got; true when
 * the gate closed (the window ends: polling takes a CPU others wait for).
 */
static bool loop_gate_closed(struct td_loop *loop, uint64_t now)
{
	if (!td_poll_gate_due(&loop->gate, now))
		return false;
	return td_poll_gate_measure(&loop->gate, now, loop->cpu_clock(),
				    loop->slept_ns, loop->host_runnable());
}

/*
 * A polling window (non-blocking passes until window_us pass without
 * work), then, unless a poller saw work while arming, one sleeping pass;
 * the window adapts to what the sleep shows.  While the gate is closed
 * the window is 0.
 */
static int loop_poll_step(struct td_loop *loop)
{
	uint64_t start = td_now_ns(), last = start, now = start, t0;
	uint32_t window = loop->window_us;
	bool work, hit = false;
	int err = 0;

	if (!td_poll_gate_open(&loop->gate, start))
		window = 0;
	/* Work seen by an arm is taken by polling, even with no window. */
	if (loop->arm_work && !window)
		window = TD_LOOP_POLL_GROW_US;
	loop->arm_work = false;
	loop->polling = window > 0;
	/* budget_us: switched off (0) at run time, the window ends now. */
	while (loop->polling && loop->budget_us && !loop->stop && !err) {
		err = loop_pass(loop, 0, &work);
		now = td_now_ns();
		loop->rounds++;
		if (work) {
			loop->hits++;
			last = now;
			hit = true;
		} else if (now - last >= (uint64_t)window * 1000) {
			break;
		}
		if (loop_gate_closed(loop, now))
			break;
	}
	if (loop->polling) {
		loop->poll_ns += now - start;
		if (!hit)
			loop->window_us /= 2;
	}
	loop->polling = false;
	if (err || loop->stop)
		return err;
	if (loop_call_pollers(loop, true)) {
		loop->arm_work = true;
		return 0;
	}
	loop->sleeps++;
	t0 = td_now_ns();
	err = loop_pass(loop, -1, &work);
	now = td_now_ns();
	loop->slept_ns += now - t0;
	loop->window_us =
		td_poll_window_next(loop->window_us, loop->budget_us, now - t0);
	return err;
}

void td_loop_set_wake_stamps(struct td_loop *loop, bool on)
{
	loop->stamp_wake = on;
}

uint64_t td_loop_woke_ns(const struct td_loop *loop)
{
	return loop->woke_ns;
}

int td_loop_run(struct td_loop *loop)
{
	loop->stop = false;
	while (!loop->stop) {
		int err = loop->budget_us ? loop_poll_step(loop)
					  : td_loop_run_once(loop, -1);

		if (err)
			return err;
	}
	return 0;
}

void td_loop_add_poller(struct td_loop *loop, struct td_poller *p,
			td_poller_cb poll, td_poller_cb arm, void *opaque)
{
	p->loop = loop;
	p->poll = poll;
	p->arm = arm;
	p->opaque = opaque;
	TAILQ_INSERT_TAIL(&loop->pollers, p, link);
}

void td_loop_del_poller(struct td_poller *p)
{
	if (!p->loop)
		return;
	if (p->loop->poller_next == p)
		p->loop->poller_next = TAILQ_NEXT(p, link);
	TAILQ_REMOVE(&p->loop->pollers, p, link);
	p->loop = NULL;
}

int td_loop_set_poll_budget(struct td_loop *loop, uint32_t budget_us)
{
	uint64_t backoffs;

	if (budget_us > TD_LOOP_POLL_MAX_US)
		return -EINVAL;
	loop->budget_us = budget_us;
	loop->window_us = budget_us;
	/* A new budget starts unjudged: a hold is forgotten, not counted. */
	backoffs = loop->gate.backoffs;
	td_poll_gate_init(&loop->gate, loop->gate.cpus);
	loop->gate.backoffs = backoffs;
	return 0;
}

uint32_t td_loop_poll_budget(const struct td_loop *loop)
{
	return loop->budget_us;
}

bool td_loop_polling(const struct td_loop *loop)
{
	return loop->polling;
}

void td_loop_get_poll_stats(const struct td_loop *loop,
			    struct td_loop_poll_stats *out)
{
	out->budget_us = loop->budget_us;
	out->window_us = loop->window_us;
	out->rounds = loop->rounds;
	out->hits = loop->hits;
	out->sleeps = loop->sleeps;
	out->poll_ns = loop->poll_ns;
	out->backoffs = loop->gate.backoffs;
	out->backoff = loop->gate.closed_until_ns > td_now_ns();
	out->cpu_pct = loop->gate.last_pct;
	out->runnable = loop->gate.last_runnable;
	out->cpus = loop->gate.cpus;
}

void td_loop_set_gate_probes(struct td_loop *loop, uint64_t (*cpu_clock)(void),
			     uint32_t (*host_runnable)(void))
{
	loop->cpu_clock = cpu_clock ? cpu_clock : td_thread_cpu_ns;
	loop->host_runnable = host_runnable ? host_runnable : td_host_runnable;
}

void td_loop_stop(struct td_loop *loop)
{
	loop->stop = true;
}

uint64_t td_loop_passes(const struct td_loop *loop)
{
	return loop->passes;
}
