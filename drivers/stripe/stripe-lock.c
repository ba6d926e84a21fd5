/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-lock.c - the chunk lock that the resync (stripe-resync.c) and the
 * scrub (stripe-scrub.c) take on a byte range of one extent: writes that
 * overlap it and arrive wait, writes in flight that overlap it drain, then
 * ready runs.  One lock per disk: a resync and a scrub never run at once.
 */
#include "config.h"

#include "drivers/stripe/stripe-int.h"

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t bend)
{
	return a < bend && b < a + alen;
}

void stripe_lock_take(struct stripe_dev *dev, uint32_t column, uint32_t extent,
		      uint64_t start, uint64_t end,
		      void (*ready)(struct stripe_dev *dev))
{
	struct stripe_lock *lk = &dev->lock;
	struct stripe_req *sr;

	lk->column = column;
	lk->extent = extent;
	lk->start = start;
	lk->end = end;
	lk->ready = ready;
	lk->locked = true;
	lk->blockers = 0;
	TAILQ_FOREACH(sr, &dev->writes, link)
	{
		if (sr->column != column || sr->extent != extent ||
		    !overlaps(sr->ext_off, sr->bytes, start, end))
			continue;
		sr->lock_blocker = true;
		lk->blockers++;
	}
	if (!lk->blockers)
		ready(dev);
}

void stripe_lock_release(struct stripe_dev *dev)
{
	struct stripe_lock *lk = &dev->lock;
	struct stripe_req_list list = TAILQ_HEAD_INITIALIZER(list);
	struct stripe_req *sr;

	lk->locked = false;
	lk->blockers = 0;
	TAILQ_FOREACH(sr, &dev->writes, link)
	sr->lock_blocker = false;
	TAILQ_CONCAT(&list, &lk->waiting, wait_link);
	while ((sr = TAILQ_FIRST(&list))) {
		TAILQ_REMOVE(&list, sr, wait_link);
		stripe_io_restart(dev, sr);
	}
}

void stripe_lock_blocker_done(struct stripe_dev *dev)
{
	struct stripe_lock *lk = &dev->lock;

	if (lk->locked && lk->blockers && --lk->blockers == 0)
		lk->ready(dev);
}

bool stripe_lock_route_write(struct stripe_dev *dev, struct stripe_req *sr)
{
	struct stripe_lock *lk = &dev->lock;

	if (!lk->locked || sr->column != lk->column ||
	    sr->extent != lk->extent ||
	    !overlaps(sr->ext_off, sr->bytes, lk->start, lk->end))
		return false;
	TAILQ_INSERT_TAIL(&lk->waiting, sr, wait_link);
	return true;
}
