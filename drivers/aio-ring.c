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

#include "common/log.h"
#include "drivers/aio-ring.h"

static void aio_ring_reap(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct aio_ring *r = opaque;
	struct io_event ev[AIO_RING_REAP_MAX];
	struct timespec zero = {0, 0};
	uint64_t count;
	int n;

	if (read(r->efd, &count, sizeof(count)) != sizeof(count))
		return; /* EAGAIN: an earlier pass reaped them */
	do {
		n = io_getevents(r->ctx, 0, AIO_RING_REAP_MAX, ev, &zero);
		for (int i = 0; i < n; i++)
			r->event(r->opaque, &ev[i]);
	} while (n == AIO_RING_REAP_MAX);
	if (n < 0)
		td_err("%s: io_getevents: %s", r->who, strerror(-n));
	if (r->drained)
		r->drained(r->opaque);
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
	if (err)
		aio_ring_close(r);
	return err;
}

void aio_ring_close(struct aio_ring *r)
{
	td_loop_del_fd(&r->efd_event);
	if (r->efd >= 0)
		close(r->efd);
	r->efd = -1;
	if (r->ctx)
		io_destroy(r->ctx);
	r->ctx = 0;
}
