/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loop.h - the single-threaded epoll event loop of a tapdisk process.
 *
 * One pass of the loop:
 *   1. epoll_wait (no wait when deferred calls are pending, otherwise until
 *      the nearest timer);
 *   2. callbacks of ready file descriptors;
 *   3. expired timers;
 *   4. deferred calls queued before this step began (calls queued while it
 *      runs wait for the next pass, so a completion that submits again
 *      cannot recurse or starve the fds);
 *   5. pass-end hooks, in registration order (where batched work is
 *      released: the sort driver's plug, aio's io_submit, the frontends'
 *      batched responses).
 *
 * Nothing here blocks except epoll_wait.  All objects are owned by the
 * caller, embedded in its structures and zeroed before first use: registering an fd, a timer, a
 * deferred call or a hook never allocates, so the I/O path can use them
 * freely.  Callbacks may add and remove any registration, their own
 * included.
 */
#ifndef TAPSTRIPE_LOOP_H
#define TAPSTRIPE_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/queue.h>

#include "common/poll-gate.h"

struct td_loop;

/* --- file descriptors ---------------------------------------------------- */

struct td_fd;
/* events is the EPOLL* mask that fired. */
typedef void (*td_fd_cb)(struct td_fd *fde, uint32_t events, void *opaque);

struct td_fd {
	struct td_loop *loop; /* NULL when not registered */
	int fd;
	uint32_t events;
	td_fd_cb cb;
	void *opaque;
};

/*
 * Watch fd for events (EPOLLIN, EPOLLOUT, ...).  Level-triggered.
 * Returns 0 or -errno (from epoll_ctl).  The paired removal is
 * td_loop_del_fd(), which must be called before fd is closed.
 */
int td_loop_add_fd(struct td_loop *loop, struct td_fd *fde, int fd,
		   uint32_t events, td_fd_cb cb, void *opaque);
/* Change the watched events.  Returns 0 or -errno. */
int td_loop_mod_fd(struct td_fd *fde, uint32_t events);
/* Stop watching; harmless on an unregistered td_fd. */
void td_loop_del_fd(struct td_fd *fde);

/* --- timers (one-shot; re-arm from the callback for periodic work) ------- */

struct td_timer;
typedef void (*td_timer_cb)(struct td_timer *t, void *opaque);

struct td_timer {
	TAILQ_ENTRY(td_timer) link;
	struct td_loop *loop; /* NULL when not armed */
	uint64_t deadline_ns;
	td_timer_cb cb;
	void *opaque;
};

/* Arm (or re-arm) t to fire once after delay_us microseconds. */
void td_loop_timer_arm(struct td_loop *loop, struct td_timer *t,
		       uint64_t delay_us, td_timer_cb cb, void *opaque);
/* Disarm; harmless when not armed. */
void td_loop_timer_cancel(struct td_timer *t);
static inline bool td_timer_armed(const struct td_timer *t)
{
	return t->loop != NULL;
}

/* --- deferred calls ------------------------------------------------------- */

struct td_defer;
typedef void (*td_defer_cb)(struct td_defer *d, void *opaque);

struct td_defer {
	TAILQ_ENTRY(td_defer) link;
	bool queued;
	td_defer_cb cb;
	void *opaque;
};

/*
 * Run cb(d, opaque) later in this pass or the next one, never inside the
 * caller's stack.  Queuing an already queued d does nothing (its callback
 * runs once).
 */
void td_loop_defer(struct td_loop *loop, struct td_defer *d, td_defer_cb cb,
		   void *opaque);
/* Remove d from the queue if it is there. */
void td_loop_defer_cancel(struct td_loop *loop, struct td_defer *d);

/* --- pass-end hooks ------------------------------------------------------- */

struct td_hook;
typedef void (*td_hook_cb)(struct td_hook *h, void *opaque);

struct td_hook {
	TAILQ_ENTRY(td_hook) link;
	struct td_loop *loop;
	td_hook_cb cb;
	void *opaque;
};

/* Call cb at the end of every pass until td_loop_del_hook(). */
void td_loop_add_hook(struct td_loop *loop, struct td_hook *h, td_hook_cb cb,
		      void *opaque);
void td_loop_del_hook(struct td_hook *h);

/* --- pollers: busy polling instead of sleeping (issue #22) ------------------ */

/*
 * A poller looks for work where no file descriptor would say there is
 * some: a shared ring's producer index, a completion ring in user memory.
 * While the loop polls (td_loop_polling), its owner may leave the
 * notifications it would otherwise ask for unarmed (blkif's req_event), so
 * that the other side need not make a system call to wake it.
 *
 *   poll(p, opaque): find and do work without a system call; true when
 *                    there was some.
 *   arm(p, opaque):  the loop is about to sleep in epoll_wait: ask for
 *                    the notifications polling let lapse, then look once
 *                    more; true when work arrived meanwhile (the loop
 *                    then polls again instead of sleeping).
 * Either may be NULL.  Both run in the loop's thread.
 */
struct td_poller;
typedef bool (*td_poller_cb)(struct td_poller *p, void *opaque);

struct td_poller {
	TAILQ_ENTRY(td_poller) link;
	struct td_loop *loop;
	td_poller_cb poll;
	td_poller_cb arm;
	void *opaque;
};

void td_loop_add_poller(struct td_loop *loop, struct td_poller *p,
			td_poller_cb poll, td_poller_cb arm, void *opaque);
/* Harmless on a poller never added or already removed. */
void td_loop_del_poller(struct td_poller *p);

/*
 * The polling budget: after a pass that did work, td_loop_run keeps
 * running non-blocking passes (epoll_wait with a zero timeout, then every
 * poller) for up to a window of budget_us before it sleeps.  The window
 * adapts, as KVM's halt polling does (td_poll_window_next): it doubles
 * (from TD_LOOP_POLL_GROW_US up to the budget) after a sleep shorter than
 * the budget, which polling would have caught, and is halved after a sleep
 * longer than the budget or a window that ended with nothing found, so an
 * idle or slow disk costs almost no CPU.  And it backs off when the CPU
 * is wanted elsewhere: while polling, once every TD_POLL_GATE_PERIOD_US,
 * the loop compares the CPU time its thread got with the time it wanted
 * one, and the host's runnable threads with its CPUs (common/poll-gate.h);
 * when either says the CPU is contended polling stops for a hold time
 * that doubles while it stays so.  0 (the
 * default) never polls:
 * the loop is then exactly the event loop it always was.
 */
#define TD_LOOP_POLL_MAX_US  100000u
#define TD_LOOP_POLL_GROW_US TD_POLL_WINDOW_GROW_US
int td_loop_set_poll_budget(struct td_loop *loop, uint32_t budget_us);
uint32_t td_loop_poll_budget(const struct td_loop *loop);

/* True while td_loop_run is in a polling window (see td_poller). */
bool td_loop_polling(const struct td_loop *loop);

struct td_loop_poll_stats {
	uint32_t budget_us;
	uint32_t window_us; /* the adaptive window now */
	uint64_t rounds;    /* non-blocking passes run while polling */
	uint64_t hits;	    /* of which found work */
	uint64_t sleeps;    /* times the loop slept in epoll_wait */
	uint64_t poll_ns;   /* time spent in polling windows */
	/* The back-off (common/poll-gate.h): times polling was suspended
	 * because the loop's thread got less than TD_POLL_GATE_MIN_PCT of
	 * a CPU while it polled or more threads were runnable than there
	 * are CPUs, whether it is suspended now, the CPU share (percent)
	 * and the host's runnable threads last measured, its CPUs. */
	uint64_t backoffs;
	bool backoff;
	uint32_t cpu_pct;
	uint32_t runnable;
	uint32_t cpus;
};
void td_loop_get_poll_stats(const struct td_loop *loop,
			    struct td_loop_poll_stats *out);

/*
 * What the back-off reads: the thread's CPU time (default
 * td_thread_cpu_ns) and the host's runnable threads (default
 * td_host_runnable); NULL restores the default.  For tests.
 */
void td_loop_set_gate_probes(struct td_loop *loop, uint64_t (*cpu_clock)(void),
			     uint32_t (*host_runnable)(void));

/* --- the loop ------------------------------------------------------------- */

/* Returns 0 and *out, or -errno. */
int td_loop_create(struct td_loop **out);
/* Every registration must have been removed. */
void td_loop_destroy(struct td_loop *loop);

/*
 * One pass.  timeout_ms bounds the wait (-1: until an fd or timer is due).
 * Returns 0 or -errno from epoll_wait (-EINTR is not an error: returns 0).
 */
int td_loop_run_once(struct td_loop *loop, int timeout_ms);

/* Run passes until td_loop_stop().  Returns 0 or -errno. */
int td_loop_run(struct td_loop *loop);
void td_loop_stop(struct td_loop *loop);

/* Passes run so far (for tests and stats). */
uint64_t td_loop_passes(const struct td_loop *loop);

/*
 * Stage timing (tap-ctl stages): while on, every pass reads the clock as
 * its epoll_wait returns, and td_loop_woke_ns gives that time (0 before
 * the first such pass).  Off by default: then a pass costs one branch.
 */
void td_loop_set_wake_stamps(struct td_loop *loop, bool on);
uint64_t td_loop_woke_ns(const struct td_loop *loop);

#endif
