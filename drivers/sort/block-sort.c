/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * block-sort.c - the sort filter: batch the requests of an event-loop pass,
 * order them by sector and merge neighbours into one forwarded request.
 *
 * Chain: "sort|LOWER" or "sort:OPTIONS|LOWER" (window_us, max_merge,
 * max_reqs, max_bytes).  Guarantees: no request moves across a flush (a
 * flush is forwarded once everything before it completed), no write
 * overtakes an earlier overlapping request, no merge crosses the lower
 * driver's boundary or max_io_sectors; each child completes exactly once
 * with its group's error; nothing is allocated per I/O.  The plug, the
 * ordering rules and their proof sketch are in doc/driver-chains.md
 * ("Inside sort").
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "drivers/drivers.h"
#include "drivers/sort/sort-plan.h"

enum held_kind {
	HELD_READ,
	HELD_WRITE, /* WRITE, DISCARD, WRITE_ZEROES: they change data */
	HELD_FLUSH_WAITING,
	HELD_FLUSH_SENT,
};

/* One held request, compact for the scan every arrival makes. */
struct sort_held {
	uint64_t start; /* [start, end) in sectors; empty for a flush */
	uint64_t end;
	enum held_kind kind;
	struct sort_req *sr;
};

TAILQ_HEAD(sort_wait_list, sort_req);

struct sort_dev {
	struct sort_opts opts;
	uint32_t max_reqs; /* opts.max_reqs bounded by the queue depth */
	struct sort_limits lim;
	uint64_t next_seq;
	struct sort_held *held; /* queue_depth entries, unordered */
	uint32_t nr_held;
	struct sort_wait_list waiting; /* in arrival order */
	struct sort_req **plug;	       /* queue_depth entries */
	uint32_t nr_plug;
	uint64_t plug_bytes;
	struct sort_req **batch; /* the plug being released */
	struct td_timer window;	 /* armed while window_us holds the plug */
	bool unplug_due;	 /* ->submit ran: ->unplug ends this pass */
	/* Its counters (td_sort_ops.counters, tap-ctl stats). */
	uint64_t in;		  /* requests that entered sort */
	uint64_t out;		  /* requests sort forwarded */
	uint64_t merges;	  /* requests joined to another */
	uint64_t max_merge_bytes; /* the largest merged request */
};

static struct sort_dev *dev_of(struct td_driver *drv)
{
	return drv->data;
}

/* --- the held set and the ordering rules ----------------------------------- */

static enum held_kind held_kind_of(const struct td_request *req)
{
	if (req->op == TD_OP_FLUSH)
		return HELD_FLUSH_WAITING;
	return req->op == TD_OP_READ ? HELD_READ : HELD_WRITE;
}

/* Rule (a): ranges overlap and one writes.  A flush's range is empty. */
static bool held_conflict(const struct sort_held *a, const struct sort_held *b)
{
	return a->start < b->end && b->start < a->end &&
	       (a->kind == HELD_WRITE || b->kind == HELD_WRITE);
}

/* Waits of a request arriving as me, against everything held before it. */
static uint32_t sort_count_blockers(const struct sort_dev *dev,
				    const struct sort_held *me)
{
	uint32_t n = 0;

	if (me->kind == HELD_FLUSH_WAITING)
		return dev->nr_held; /* rule (b) */
	for (uint32_t i = 0; i < dev->nr_held; i++) {
		const struct sort_held *h = &dev->held[i];

		if (h->kind == HELD_FLUSH_WAITING || held_conflict(h, me))
			n++; /* rule (c), rule (a) */
	}
	return n;
}

static void held_add(struct sort_dev *dev, struct sort_req *sr)
{
	const struct td_request *req = sr->req;
	struct sort_held *h = &dev->held[dev->nr_held];

	h->kind = held_kind_of(req);
	h->start = h->kind == HELD_FLUSH_WAITING ? 0 : req->sector;
	h->end = h->kind == HELD_FLUSH_WAITING ? 0
					       : req->sector + req->nr_sectors;
	h->sr = sr;
	sr->blockers = sort_count_blockers(dev, h);
	sr->held_idx = dev->nr_held++;
}

static void held_remove(struct sort_dev *dev, struct sort_req *sr)
{
	uint32_t idx = sr->held_idx, last = --dev->nr_held;

	if (idx != last) {
		dev->held[idx] = dev->held[last];
		dev->held[idx].sr->held_idx = idx;
	}
}

/* done, no longer held, completed: release the later waiters it blocks. */
static void sort_unblock_done(struct sort_dev *dev,
			      const struct sort_held *done)
{
	struct sort_req *w;

	TAILQ_FOREACH(w, &dev->waiting, wait_link)
	{
		const struct sort_held *wh = &dev->held[w->held_idx];

		/*
		 * One that arrived first never counted done.  The rules
		 * imply it (done would have waited for it), the test keeps
		 * the count right without relying on that.
		 */
		if (w->seq < done->sr->seq)
			continue;
		if (wh->kind == HELD_FLUSH_WAITING || held_conflict(done, wh))
			w->blockers--;
	}
}

/* The flush that arrived as seq was forwarded: rule (c) is met. */
static void sort_unblock_flush_sent(struct sort_dev *dev, uint64_t seq)
{
	struct sort_req *w;

	TAILQ_FOREACH(w, &dev->waiting, wait_link)
	{
		if (w->seq > seq &&
		    dev->held[w->held_idx].kind != HELD_FLUSH_WAITING)
			w->blockers--;
	}
}

static void plug_push(struct sort_dev *dev, struct sort_req *sr)
{
	sr->state = SORT_PLUGGED;
	dev->plug[dev->nr_plug++] = sr;
	dev->plug_bytes += td_request_bytes(sr->req);
}

/* Move the waiters that wait for nothing more into the plug. */
static bool sort_wake(struct sort_dev *dev)
{
	struct sort_req *w, *next;
	bool woke = false;

	for (w = TAILQ_FIRST(&dev->waiting); w; w = next) {
		next = TAILQ_NEXT(w, wait_link);
		if (w->blockers)
			continue;
		TAILQ_REMOVE(&dev->waiting, w, wait_link);
		plug_push(dev, w);
		woke = true;
	}
	return woke;
}

/* Complete one child and let go of what it blocked. */
static void sort_finish(struct sort_dev *dev, struct sort_req *sr, int err)
{
	struct sort_held done = dev->held[sr->held_idx];

	held_remove(dev, sr);
	td_complete(sr->req, err);
	if (!TAILQ_EMPTY(&dev->waiting))
		sort_unblock_done(dev, &done);
}

/* --- release: plan and forward ---------------------------------------------- */

static void sort_group_done(struct td_request *lower, int err, void *opaque);

static void sort_count_group(struct td_driver *drv, const struct sort_group *g)
{
	struct sort_dev *dev = dev_of(drv);
	uint64_t bytes = (uint64_t)g->nr_sectors << TD_SECTOR_SHIFT;

	dev->out++;
	if (g->members < 2)
		return;
	dev->merges += g->members - 1;
	if (bytes > dev->max_merge_bytes)
		dev->max_merge_bytes = bytes;
	td_driver_stat_add(drv, TD_STAT_MERGED_IOV_ENTRIES,
			   (uint64_t)g->iovcnt);
}

/* Forward g as lower; a forwarded flush lets its followers go (rule c). */
static void sort_send(struct td_driver *drv, struct sort_group *g,
		      struct td_request *lower)
{
	struct sort_dev *dev = dev_of(drv);
	const struct td_request *first = g->first->req;
	bool flush = first->op == TD_OP_FLUSH;
	uint64_t seq = g->first->seq;

	lower->op = first->op;
	lower->flags = first->flags;
	lower->sector = g->sector;
	lower->nr_sectors = (uint32_t)g->nr_sectors; /* <= max_sectors */
	lower->iov = g->members > 1 ? g->iov : first->iov;
	lower->iovcnt = g->members > 1 ? g->iovcnt : first->iovcnt;
	for (struct sort_req *sr = g->first; sr; sr = sr->next_child)
		sr->state = SORT_INFLIGHT;
	if (flush)
		dev->held[g->first->held_idx].kind = HELD_FLUSH_SENT;
	sort_count_group(drv, g);
	td_forward(drv, lower, sort_group_done, g->first);
	if (flush && !TAILQ_EMPTY(&dev->waiting)) {
		sort_unblock_flush_sent(dev, seq);
		sort_wake(dev);
	}
}

/* Forward the group starting at batch[i]; returns where the next starts. */
static uint32_t sort_forward_group(struct td_driver *drv,
				   struct sort_req **batch, uint32_t i,
				   uint32_t n)
{
	struct sort_dev *dev = dev_of(drv);
	struct td_request *lower = td_request_get(drv);
	struct sort_group g;

	if (!lower) {
		/* Cannot happen: sort forwards one request per request at
		 * most, from a pool as deep as its own. */
		td_vbd_err(drv->vbd, "sort: lower pool empty; failing a %s",
			   td_op_name(batch[i]->req->op));
		if (batch[i]->req->op == TD_OP_FLUSH) {
			dev->held[batch[i]->held_idx].kind = HELD_FLUSH_SENT;
			sort_unblock_flush_sent(dev, batch[i]->seq);
		}
		sort_finish(dev, batch[i], -EBUSY);
		sort_wake(dev);
		return i + 1;
	}
	sort_group_start(&g, batch[i++], lower->iov_slab);
	while (i < n && sort_group_add(&g, batch[i], &dev->lim))
		i++;
	sort_send(drv, &g, lower);
	return i;
}

/*
 * Forward everything plugged.  Forwarding a flush may free waiters into
 * the (emptied) plug: they are released by the next round of the loop,
 * after the flush, which is what rule (c) asks.
 */
static void sort_release(struct td_driver *drv)
{
	struct sort_dev *dev = dev_of(drv);

	td_loop_timer_cancel(&dev->window);
	while (dev->nr_plug) {
		struct sort_req **batch = dev->plug;
		uint32_t n = dev->nr_plug, i = 0;

		dev->plug = dev->batch;
		dev->batch = batch;
		dev->nr_plug = 0;
		dev->plug_bytes = 0;
		sort_plan_order(batch, n);
		while (i < n)
			i = sort_forward_group(drv, batch, i, n);
	}
}

static void sort_window_expired(struct td_timer *t, void *opaque)
{
	sort_release(opaque);
}

static bool sort_plug_full(const struct td_driver *drv,
			   const struct sort_dev *dev)
{
	return dev->nr_plug >= dev->max_reqs ||
	       dev->plug_bytes >= dev->opts.max_plug_bytes ||
	       dev->nr_held == drv->queue_depth;
}

/*
 * Lower completion of a group (from the vbd's deferred completions): every
 * child gets err, exactly once.  opaque is the group's first child.
 */
static void sort_group_done(struct td_request *lower, int err, void *opaque)
{
	struct sort_req *sr = opaque;
	struct td_driver *drv = sr->req->drv;
	struct sort_dev *dev = dev_of(drv);

	while (sr) {
		struct sort_req *next = sr->next_child;

		sort_finish(dev, sr, err);
		sr = next;
	}
	/* No ->unplug and no timer would release what woke: do it now. */
	if (sort_wake(dev) && !dev->unplug_due && !td_timer_armed(&dev->window))
		sort_release(drv);
}

/* --- driver ops --------------------------------------------------------------- */

static int sort_submit(struct td_driver *drv, struct td_request *req)
{
	struct sort_dev *dev = dev_of(drv);
	struct sort_req *sr = req->priv;

	if (dev->nr_held == drv->queue_depth)
		return -EBUSY; /* cannot happen: sort's pool is that deep */
	sr->req = req;
	sr->seq = dev->next_seq++;
	sr->next_child = NULL;
	held_add(dev, sr);
	dev->in++;
	dev->unplug_due = true;
	if (sr->blockers) {
		sr->state = SORT_WAITING;
		TAILQ_INSERT_TAIL(&dev->waiting, sr, wait_link);
		return 0;
	}
	plug_push(dev, sr);
	/* A flush is alone in its plug: holding it would merge nothing. */
	if (dev->opts.window_us && req->op != TD_OP_FLUSH &&
	    !td_timer_armed(&dev->window))
		td_loop_timer_arm(drv->loop, &dev->window, dev->opts.window_us,
				  sort_window_expired, drv);
	if (sort_plug_full(drv, dev))
		sort_release(drv);
	return 0;
}

static void sort_unplug(struct td_driver *drv)
{
	struct sort_dev *dev = dev_of(drv);

	dev->unplug_due = false;
	if (dev->nr_plug && !td_timer_armed(&dev->window))
		sort_release(drv);
}

static void sort_close(struct td_driver *drv)
{
	struct sort_dev *dev = dev_of(drv);

	td_loop_timer_cancel(&dev->window);
	free(dev->held);
	free(dev->plug);
	free(dev->batch);
	memset(dev, 0, sizeof(*dev));
}

static void sort_set_limits(struct td_driver *drv, struct sort_dev *dev)
{
	const struct td_disk_info *lower = &drv->lower->info;
	uint64_t max = dev->opts.max_merge_bytes >> TD_SECTOR_SHIFT;

	if (lower->max_io_sectors && lower->max_io_sectors < max)
		max = lower->max_io_sectors;
	dev->lim.max_sectors = max;
	dev->lim.boundary_sectors = lower->boundary_sectors;
	dev->lim.iov_cap = (int)td_request_iov_cap();
	dev->max_reqs =
		dev->opts.max_reqs && dev->opts.max_reqs < drv->queue_depth
			? dev->opts.max_reqs
			: drv->queue_depth;
}

static int sort_open(struct td_driver *drv, const char *args)
{
	struct sort_dev *dev = dev_of(drv);
	uint32_t depth = drv->queue_depth;
	char why[SORT_WHY_MAX];
	int err;

	if ((err = sort_opts_parse(args, &dev->opts, why, sizeof(why))))
		return td_driver_fail(drv, err, "%s", why);
	dev->held = calloc(depth, sizeof(*dev->held));
	dev->plug = calloc(depth, sizeof(*dev->plug));
	dev->batch = calloc(depth, sizeof(*dev->batch));
	if (!dev->held || !dev->plug || !dev->batch) {
		sort_close(drv);
		return -ENOMEM;
	}
	TAILQ_INIT(&dev->waiting);
	sort_set_limits(drv, dev);
	/* drv->info stays the lower driver's: sort changes no limit. */
	return 0;
}

static const struct td_driver_counter sort_counters[] = {
	{"sort_in", offsetof(struct sort_dev, in), false},
	{"sort_out", offsetof(struct sort_dev, out), false},
	{"sort_merges", offsetof(struct sort_dev, merges), false},
	{"sort_max_merge_bytes", offsetof(struct sort_dev, max_merge_bytes),
	 true},
};

/* A filter serves its lower driver's size: *sectors, unchanged. */
static int sort_refresh_size(struct td_driver *drv, uint64_t *sectors)
{
	return 0;
}

const struct td_driver_ops td_sort_ops = {
	.name = "sort",
	.flags = TD_DRV_FILTER,
	.dev_size = sizeof(struct sort_dev),
	.req_size = sizeof(struct sort_req),
	.open = sort_open,
	.close = sort_close,
	.refresh_size = sort_refresh_size,
	.submit = sort_submit,
	.unplug = sort_unplug,
	.counters = sort_counters,
	.nr_counters = sizeof(sort_counters) / sizeof(sort_counters[0]),
};
