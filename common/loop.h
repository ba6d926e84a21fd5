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

#endif
