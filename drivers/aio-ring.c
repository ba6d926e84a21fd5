/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio-ring.c - a Linux AIO context reaped by the event loop (see
 * aio-ring.h).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#include "common/log.h"
#include "drivers/aio-ring.h"

/* Every finished event, by the user ring or else io_getevents: how many. */
static int aio_ring_take(struct aio_ring *r)
{
	struct io_event ev[AIO_RING_REAP_MAX];
	struct timespec zero = {0, 0};
	int n, total = 0;

	do {
		/* Valgrind does not see the kernel's mapping of the ring:
		 * every read of it would be an error there. */
		n = RUNNING_ON_VALGRIND
			    ? -EOPNOTSUPP
			    : aio_ring_user_reap(r->ctx, ev, AIO_RING_REAP_MAX);
		if (n == -EOPNOTSUPP)
			n = io_getevents(r->ctx, 0, AIO_RING_REAP_MAX, ev,
					 &zero);
		for (int i = 0; i < n; i++)
			r->event(r->opaque, &ev[i]);
		if (n > 0)
			total += n;
	} while (n == AIO_RING_REAP_MAX);
	if (n < 0)
		td_err("%s: io_getevents: %s", r->who, strerror(-n));
	if (total && r->drained)
		r->drained(r->opaque);
	return total;
}

/*
 * The eventfd said completions are in: take them from the user ring
 * (no system call beyond the eventfd's read; io_getevents only where the
 * ring cannot be read).
 */
static void aio_ring_reap(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct aio_ring *r = opaque;
	uint64_t count;

	if (read(r->efd, &count, sizeof(count)) != sizeof(count))
		return; /* EAGAIN: an earlier pass reaped them */
	aio_ring_take(r);
}

/* Poller: the eventfd out of epoll while polling; completions reaped. */
static bool aio_ring_poll(struct td_poller *p, void *opaque)
{
	struct aio_ring *r = opaque;

	(void)p;
	int n;

	if (!r->efd_off && !td_loop_mod_fd(&r->efd_event, 0))
		r->efd_off = true;
	n = aio_ring_take(r);
	r->polled += (uint64_t)n;
	return n > 0;
}

/*
 * Before the loop sleeps: the eventfd back in epoll and emptied, then the
 * ring once more (the kernel puts an event in the ring before it signals
 * the eventfd, so nothing finished after the read goes unnoticed).
 */
static bool aio_ring_arm(struct td_poller *p, void *opaque)
{
	struct aio_ring *r = opaque;
	uint64_t count;
	int n;

	(void)p;
	if (!r->efd_off)
		return false;
	if (td_loop_mod_fd(&r->efd_event, EPOLLIN))
		return true; /* cannot sleep on it: keep polling */
	r->efd_off = false;
	if (read(r->efd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		td_err("%s: eventfd read: %s", r->who, strerror(errno));
	n = aio_ring_take(r);
	r->polled += (uint64_t)n;
	return n > 0;
}

int aio_ring_open(struct aio_ring *r, struct td_loop *loop, uint32_t depth,
		  void (*event)(void *opaque, struct io_event *ev),
		  void (*drained)(void *opaque), void *opaque, const char *who)
{
	int err;

	memset(r, 0, sizeof(*r));
	r->efd = -1;
	r->event = event;
	r->drained = drained;
	r->opaque = opaque;
	r->who = who;
	err = io_setup((int)depth, &r->ctx);
	if (err < 0) {
		td_err("%s: io_setup(%u): %s (see /proc/sys/fs/aio-max-nr)",
		       who, depth, strerror(-err));
		r->ctx = 0;
		return err;
	}
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		err = -errno;
		aio_ring_close(r);
		return err;
	}
	err = td_loop_add_fd(loop, &r->efd_event, r->efd, EPOLLIN,
			     aio_ring_reap, r);
	if (err) {
		aio_ring_close(r);
		return err;
	}
	td_loop_add_poller(loop, &r->poller, aio_ring_poll, aio_ring_arm, r);
	return 0;
}

void aio_ring_close(struct aio_ring *r)
{
	td_loop_del_poller(&r->poller);
	td_loop_del_fd(&r->efd_event);
	if (r->efd >= 0)
		close(r->efd);
	r->efd = -1;
	if (r->ctx)
		io_destroy(r->ctx);
	r->ctx = 0;
}
