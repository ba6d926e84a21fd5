/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio-ring.h - a Linux AIO context whose completions the event loop
 * reaps: io_setup, an eventfd every iocb signals, the fd registered with
 * the loop.  Shared by the aio driver (block-aio.c) and the stripe
 * driver's device backend (stripe-bdev.c).
 *
 * The owner prepares its iocbs with aio_ring_prep (which points them at
 * the eventfd) and submits them with io_submit(ring->ctx, ...); when the
 * eventfd fires, the ring reaps every finished event and calls
 * event(opaque, ev) for each, then drained(opaque) once (room in the
 * kernel queue again: the owner pushes what waited).  Both run in the
 * event-loop thread.
 *
 * Busy polling (issue #22, td_loop_set_poll_budget): the ring is also a
 * loop poller.  While the loop polls, the eventfd is taken out of epoll
 * and the completions are read from the ring the kernel maps into user
 * memory (the io_context_t points at it), as fio's userspace_reap does:
 * a completion costs no system call and no wake-up.  Before the loop
 * sleeps the eventfd is put back and emptied, and the ring looked at once
 * more.  When the ring's header is not the layout this code knows (magic,
 * incompatible features), polling reaps with io_getevents instead.  With
 * polling off (the default) the poller is never called: completions take
 * the eventfd and io_getevents, as they always did.
 */
#ifndef TAPSTRIPE_AIO_RING_H
#define TAPSTRIPE_AIO_RING_H

#include <libaio.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/loop.h"

#define AIO_RING_REAP_MAX 128 /* events per io_getevents call */

struct aio_ring {
	io_context_t ctx;
	int efd;
	struct td_fd efd_event;
	void (*event)(void *opaque, struct io_event *ev);
	void (*drained)(void *opaque); /* may be NULL */
	void *opaque;
	const char *who; /* for log messages */
	struct td_poller poller;
	bool efd_off;	 /* polling: the eventfd is out of epoll */
	uint64_t polled; /* events reaped by the poller */
};

/*
 * Set the ring up for depth iocbs in flight.  0, or -errno (io_setup's
 * error logged with a hint about /proc/sys/fs/aio-max-nr); on an error
 * the ring is left closed (aio_ring_close is still safe).
 */
int aio_ring_open(struct aio_ring *r, struct td_loop *loop, uint32_t depth,
		  void (*event)(void *opaque, struct io_event *ev),
		  void (*drained)(void *opaque), void *opaque, const char *who);

/*
 * Undo aio_ring_open; safe on a zeroed or half-opened ring.  io_destroy
 * waits for the iocbs still in the kernel: their events are not reported.
 */
void aio_ring_close(struct aio_ring *r);

/*
 * Up to max finished events of ctx, read from the completion ring in user
 * memory without a system call: how many (0: none), or -EOPNOTSUPP when
 * the ring's header is not the kernel layout this code knows (the caller
 * then uses io_getevents).  Only one thread may reap a context.
 */
int aio_ring_user_reap(io_context_t ctx, struct io_event *ev, int max);

/* The kernel's struct aio_ring (fs/aio.c), the head of the mapped ring. */
struct aio_ring_user {
	unsigned int id;
	unsigned int nr; /* events the ring holds */
	unsigned int head;
	unsigned int tail;
	unsigned int magic;
	unsigned int compat_features;
	unsigned int incompat_features;
	unsigned int header_length; /* sizeof(struct aio_ring_user) */
	struct io_event io_events[];
};
#define AIO_RING_USER_MAGIC		0xa10a10a1u
#define AIO_RING_USER_INCOMPAT_FEATURES 0u

/* Make iocb report to the ring, with data as its io_event's data. */
static inline void aio_ring_prep(struct aio_ring *r, struct iocb *iocb,
				 void *data)
{
	io_set_eventfd(iocb, r->efd);
	iocb->data = data;
}

#endif
