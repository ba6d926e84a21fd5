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
 */
#ifndef TAPSTRIPE_AIO_RING_H
#define TAPSTRIPE_AIO_RING_H

#include <libaio.h>
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

/* Make iocb report to the ring, with data as its io_event's data. */
static inline void aio_ring_prep(struct aio_ring *r, struct iocb *iocb,
				 void *data)
{
	io_set_eventfd(iocb, r->efd);
	iocb->data = data;
}

#endif
