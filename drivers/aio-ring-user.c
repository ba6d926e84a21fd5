/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio-ring-user.c - read completions off the ring the kernel maps into
 * user memory (see aio-ring.h).  A file of its own so that a test can
 * take it out of the way with --wrap (mock-sgio.c: the completions then
 * go through io_getevents, which that test rewrites).
 */
#include "config.h"

#include <errno.h>

#include "drivers/aio-ring.h"

int aio_ring_user_reap(io_context_t ctx, struct io_event *ev, int max)
{
	struct aio_ring_user *ring = (struct aio_ring_user *)ctx;
	unsigned int head, tail;
	int n = 0;

	if (!ring || ring->magic != AIO_RING_USER_MAGIC ||
	    ring->incompat_features != AIO_RING_USER_INCOMPAT_FEATURES ||
	    ring->header_length != sizeof(*ring) || !ring->nr)
		return -EOPNOTSUPP;
	head = ring->head;
	/* The kernel writes the event, then (release) the tail. */
	tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
	if (head >= ring->nr || tail >= ring->nr)
		return -EOPNOTSUPP;
	while (head != tail && n < max) {
		ev[n++] = ring->io_events[head];
		head = (head + 1) % ring->nr;
	}
	if (n)
		__atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);
	return n;
}
