/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-io.c - the Xen transport's data path: the frontend's ring mapped
 * with libxengnttab, its event channel bound with libxenevtchn, and the
 * data moved by grant copy between the guest's pages and an arena of our
 * own, which tapdisk/blkif's copying ops drive.
 *
 * The arena.  One per ring, nr_pages pages, filled in ring order: each
 * request reserves, from the head, as many consecutive pages as it can
 * carry segments, and its segments take them one by one, each at its
 * in-page offset.  So a request of whole pages is one iovec, and the next
 * request's buffer starts where it ends: the contiguous ring mapping of
 * the 2012 thesis, which lets the sort driver merge neighbours into one
 * backend I/O.  Requests finish out of order; the tail advances past
 * pages once nothing holds them, and a request that does not fit before
 * the end of the arena starts again at page 0.  When it does not fit at
 * all, blkif leaves it on the ring until a release.  Untouched pages cost
 * nothing (MAP_NORESERVE) and an emptied arena starts again at page 0, so
 * a light load keeps using the same few pages.
 *
 * Grant copy.  Each segment is one xengnttab_grant_copy_segment_t; the
 * writes of a whole consumption pass go in one call (copy_in), the reads
 * of a whole response batch in another (copy_out).  A segment the
 * hypervisor refuses fails only its request.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xenevtchn.h>
#include <xengnttab.h>

#include "frontends/xen/xen-int.h"

/* An arena holds at most this much, and always one largest request. */
#define XEN_ARENA_MAX_BYTES (32u << 20)

/* What one arena page holds: a segment, and where it goes or comes from. */
struct xen_page {
	uint32_t gref;
	uint16_t offset;
	uint16_t len;
	bool to_guest; /* BLKIF_MAP_RW: the guest reads it */
};

/* A request's pages: [first, first + count). */
struct xen_tag {
	uint32_t first;
	uint32_t count;
};

struct xen_ring {
	struct td_loop *loop;
	struct td_vbd *vbd;
	uint32_t domid;
	struct td_xen_stats *stats;
	uint32_t queue; /* index in stats->queues */
	uint64_t kicks; /* events the frontend sent */
	void (*fatal_cb)(void *opaque);
	void *opaque;
	struct td_defer fatal_defer;

	xengnttab_handle *xgt;
	xenevtchn_handle *xce;
	void *sring;
	uint32_t nr_ring_pages;
	xenevtchn_port_or_error_t port; /* ours; -1 when not bound */
	struct td_fd evfde;
	struct blkif_ring *blkif;

	char *arena;
	uint32_t nr_pages;
	struct xen_page *pages;
	uint8_t *busy;
	uint32_t head, tail, window; /* window: pages in [tail, head) */
	struct xen_tag *tags;	     /* one per ring slot */
	uint32_t cur_tag, cur_left;  /* the request being mapped */
	xengnttab_grant_copy_segment_t *batch;
	uint32_t *batch_owner; /* index into the tags of the call */

	void (*done)(void *opaque);
	void *done_opaque;
};

/* --- the arena ------------------------------------------------------------- */

/* Room for need pages from head, wrapping to 0 if the end is short. */
static int arena_reserve(struct xen_ring *r, uint32_t need)
{
	if (!need)
		return 0;
	if (!r->window)
		r->head = r->tail = 0;
	if (r->window == r->nr_pages)
		return -EAGAIN;
	if (r->head >= r->tail) {
		if (r->nr_pages - r->head >= need)
			return 0;
		if (r->tail < need)
			return -EAGAIN;
		/* The skipped end counts as held until the tail passes. */
		r->window += r->nr_pages - r->head;
		r->head = 0;
		return 0;
	}
	return r->tail - r->head >= need ? 0 : -EAGAIN;
}

static int xr_reserve(void *opaque, uint32_t tag, size_t max_bytes)
{
	struct xen_ring *r = opaque;
	uint32_t need = (uint32_t)(max_bytes / BLKIF_PAGE_SIZE);
	int err = arena_reserve(r, need);

	if (err)
		return err;
	r->tags[tag].first = r->head;
	r->tags[tag].count = 0;
	r->cur_tag = tag;
	r->cur_left = need;
	return 0;
}

static int xr_map_segment(void *opaque, uint32_t gref, uint32_t offset,
			  uint32_t len, enum blkif_map_access access,
			  void **addr)
{
	struct xen_ring *r = opaque;
	uint32_t page = r->head;

	/* blkif bounds the segments by the bytes it reserved. */
	if (!r->cur_left)
		return -ENOSPC;
	r->cur_left--;
	r->pages[page] = (struct xen_page){
		.gref = gref,
		.offset = (uint16_t)offset,
		.len = (uint16_t)len,
		.to_guest = access == BLKIF_MAP_RW,
	};
	r->busy[page] = 1;
	r->head = (page + 1) % r->nr_pages;
	r->window++;
	r->tags[r->cur_tag].count++;
	*addr = r->arena + (size_t)page * BLKIF_PAGE_SIZE + offset;
	return 0;
}

static void xr_release(void *opaque, uint32_t tag)
{
	struct xen_ring *r = opaque;
	const struct xen_tag *t = &r->tags[tag];

	for (uint32_t i = 0; i < t->count; i++)
		r->busy[t->first + i] = 0;
	while (r->window && !r->busy[r->tail]) {
		r->tail = (r->tail + 1) % r->nr_pages;
		r->window--;
	}
}

/* --- grant copy ----------------------------------------------------------- */

static void copy_seg(struct xen_ring *r, uint32_t page,
		     xengnttab_grant_copy_segment_t *seg)
{
	const struct xen_page *pg = &r->pages[page];
	void *local = r->arena + (size_t)page * BLKIF_PAGE_SIZE + pg->offset;

	memset(seg, 0, sizeof(*seg));
	seg->len = pg->len;
	if (pg->to_guest) {
		seg->flags = GNTCOPY_dest_gref;
		seg->source.virt = local;
		seg->dest.foreign.ref = pg->gref;
		seg->dest.foreign.offset = pg->offset;
		seg->dest.foreign.domid = (uint16_t)r->domid;
	} else {
		seg->flags = GNTCOPY_source_gref;
		seg->source.foreign.ref = pg->gref;
		seg->source.foreign.offset = pg->offset;
		seg->source.foreign.domid = (uint16_t)r->domid;
		seg->dest.virt = local;
	}
}

/* Copy the pages of tags[0..n-1] going the one way, in one call. */
static void xr_copy(struct xen_ring *r, const uint32_t *tags, int *errs,
		    uint32_t n, bool to_guest)
{
	uint32_t nseg = 0;
	int err;

	for (uint32_t i = 0; i < n; i++) {
		const struct xen_tag *t = &r->tags[tags[i]];

		for (uint32_t p = t->first; p < t->first + t->count; p++) {
			if (r->pages[p].to_guest != to_guest)
				continue;
			copy_seg(r, p, &r->batch[nseg]);
			r->batch_owner[nseg++] = i;
		}
	}
	if (!nseg)
		return;
	if (to_guest)
		r->stats->copy_out_segs += nseg;
	else
		r->stats->copy_in_segs += nseg;
	if (xengnttab_grant_copy(r->xgt, nseg, r->batch)) {
		/* A failure must fail the requests even without an errno. */
		err = errno ? -errno : -EIO;
		td_vbd_err(r->vbd, "grant copy of %" PRIu32 " segments: %s",
			   nseg, strerror(-err));
		for (uint32_t i = 0; i < n; i++)
			errs[i] = err;
		return;
	}
	for (uint32_t s = 0; s < nseg; s++) {
		if (r->batch[s].status == GNTST_okay)
			continue;
		r->stats->copy_errors++;
		errs[r->batch_owner[s]] = -EIO;
		td_vbd_warn(r->vbd,
			    "grant copy of page %" PRIu32 " refused (%d)",
			    to_guest ? r->batch[s].dest.foreign.ref
				     : r->batch[s].source.foreign.ref,
			    r->batch[s].status);
	}
}

static void xr_copy_in(void *opaque, const uint32_t *tags, int *errs,
		       uint32_t n)
{
	xr_copy(opaque, tags, errs, n, false);
}

static void xr_copy_out(void *opaque, const uint32_t *tags, int *errs,
			uint32_t n)
{
	xr_copy(opaque, tags, errs, n, true);
}

static int xr_copy_indirect(void *opaque, uint32_t gref, void *dst, size_t len)
{
	struct xen_ring *r = opaque;
	xengnttab_grant_copy_segment_t seg = {
		.flags = GNTCOPY_source_gref,
		.len = (uint16_t)len,
	};

	seg.source.foreign.ref = gref;
	seg.source.foreign.domid = (uint16_t)r->domid;
	seg.dest.virt = dst;
	if (xengnttab_grant_copy(r->xgt, 1, &seg))
		return -errno;
	return seg.status == GNTST_okay ? 0 : -EIO;
}

/* --- the event channel --------------------------------------------------- */

static void xr_notify(void *opaque)
{
	struct xen_ring *r = opaque;

	if (xenevtchn_notify(r->xce, (evtchn_port_t)r->port))
		td_vbd_warn(r->vbd, "event channel notify: %s",
			    strerror(errno));
}

static void xr_fatal_deferred(struct td_defer *d, void *opaque)
{
	struct xen_ring *r = opaque;

	r->fatal_cb(r->opaque);
}

/* Inside blkif's call stack: disconnect from the event loop. */
static void xr_fatal(void *opaque, int err)
{
	struct xen_ring *r = opaque;

	td_loop_defer(r->loop, &r->fatal_defer, xr_fatal_deferred, r);
}

static void xr_event(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct xen_ring *r = opaque;
	xenevtchn_port_or_error_t port = xenevtchn_pending(r->xce);

	if (port < 0)
		return;
	r->kicks++;
	xenevtchn_unmask(r->xce, (evtchn_port_t)port);
	blkif_ring_kick(r->blkif);
}

static const struct blkif_transport_ops xen_ring_ops = {
	.map_segment = xr_map_segment,
	.copy_indirect = xr_copy_indirect,
	.notify = xr_notify,
	.fatal = xr_fatal,
	.reserve = xr_reserve,
	.copy_in = xr_copy_in,
	.copy_out = xr_copy_out,
	.release = xr_release,
};

/* --- connect and disconnect ----------------------------------------------- */

static uint32_t arena_pages(const struct blkif_config *cfg, uint32_t slots)
{
	uint64_t per_req = cfg->max_indirect_segments;
	uint64_t pages = per_req * slots;
	uint64_t cap = XEN_ARENA_MAX_BYTES / BLKIF_PAGE_SIZE;

	if (pages > cap)
		pages = cap;
	return (uint32_t)(pages < per_req ? per_req : pages);
}

static int xr_alloc(struct xen_ring *r, const struct blkif_config *cfg)
{
	uint32_t slots = blkif_ring_size(r->blkif);

	r->nr_pages = arena_pages(cfg, slots);
	r->arena = mmap(NULL, (size_t)r->nr_pages * BLKIF_PAGE_SIZE,
			PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r->arena == MAP_FAILED) {
		r->arena = NULL;
		return -ENOMEM;
	}
	r->pages = calloc(r->nr_pages, sizeof(*r->pages));
	r->busy = calloc(r->nr_pages, sizeof(*r->busy));
	r->tags = calloc(slots, sizeof(*r->tags));
	r->batch = calloc(r->nr_pages, sizeof(*r->batch));
	r->batch_owner = calloc(r->nr_pages, sizeof(*r->batch_owner));
	if (!r->pages || !r->busy || !r->tags || !r->batch || !r->batch_owner)
		return -ENOMEM;
	return 0;
}

/* Undo what connect did; the blkif ring must be destroyed already. */
static void xr_free(struct xen_ring *r)
{
	td_loop_del_fd(&r->evfde);
	td_loop_defer_cancel(r->loop, &r->fatal_defer);
	if (r->port >= 0)
		xenevtchn_unbind(r->xce, (evtchn_port_t)r->port);
	if (r->xce)
		xenevtchn_close(r->xce);
	if (r->sring)
		xengnttab_unmap(r->xgt, r->sring, r->nr_ring_pages);
	if (r->xgt)
		xengnttab_close(r->xgt);
	if (r->arena)
		munmap(r->arena, (size_t)r->nr_pages * BLKIF_PAGE_SIZE);
	free(r->pages);
	free(r->busy);
	free(r->tags);
	free(r->batch);
	free(r->batch_owner);
	free(r);
}

static int xr_map_ring(struct xen_ring *r, const struct xen_frontend_keys *k)
{
	r->xgt = xengnttab_open(NULL, 0);
	if (!r->xgt)
		return -errno;
	r->nr_ring_pages = k->nr_ring_refs;
	r->sring = xengnttab_map_domain_grant_refs(
		r->xgt, k->nr_ring_refs, r->domid, (uint32_t *)k->ring_refs,
		PROT_READ | PROT_WRITE);
	return r->sring ? 0 : -errno;
}

static int xr_bind(struct xen_ring *r, const struct xen_frontend_keys *k)
{
	r->xce = xenevtchn_open(NULL, 0);
	if (!r->xce)
		return -errno;
	r->port =
		xenevtchn_bind_interdomain(r->xce, r->domid, k->event_channel);
	if (r->port < 0)
		return -errno;
	return td_loop_add_fd(r->loop, &r->evfde, xenevtchn_fd(r->xce), EPOLLIN,
			      xr_event, r);
}

static int xr_start(struct xen_ring *r, const struct xen_ring_params *p)
{
	struct blkif_ring_params bp = {
		.ring_order = p->keys->ring_order,
		.protocol = p->keys->protocol,
		.resume = p->resume,
		.ops = &xen_ring_ops,
		.opaque = r,
	};
	int err = xr_map_ring(r, p->keys);

	if (err)
		return err;
	bp.sring = r->sring;
	err = blkif_ring_create(p->vbd, p->cfg, &bp, &r->blkif);
	if (!err)
		err = xr_alloc(r, p->cfg);
	if (!err)
		err = xr_bind(r, p->keys);
	return err;
}

static int xr_connect(const struct xen_ring_params *p, struct xen_ring **out)
{
	struct xen_ring *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->loop = td_vbd_loop(p->vbd);
	r->vbd = p->vbd;
	r->domid = p->frontend_domid;
	r->stats = p->stats;
	r->queue = p->queue < XEN_MAX_QUEUES ? p->queue : XEN_MAX_QUEUES - 1;
	r->fatal_cb = p->fatal;
	r->opaque = p->opaque;
	r->port = -1;
	err = xr_start(r, p);
	if (err) {
		if (r->blkif)
			blkif_ring_destroy(r->blkif);
		xr_free(r);
		return err;
	}
	/* Requests the frontend queued before we bound the channel. */
	blkif_ring_kick(r->blkif);
	*out = r;
	return 0;
}

/* A closing ring's counters into the server's, in its queue's too. */
static void xr_stats_close(struct xen_ring *r, const struct blkif_ring_stats *s)
{
	struct blkif_queue_report *q = &r->stats->queues[r->queue];

	blkif_ring_stats_add(&r->stats->ring, s);
	blkif_ring_stats_add(&q->ring, s);
	q->kicks += r->kicks;
	if (r->stats->nr_queues <= r->queue)
		r->stats->nr_queues = r->queue + 1;
}

static void xr_drained(struct blkif_ring *ring, void *opaque)
{
	struct xen_ring *r = opaque;
	struct blkif_ring_stats s;
	void (*done)(void *) = r->done;
	void *done_opaque = r->done_opaque;

	blkif_ring_get_stats(ring, &s);
	xr_stats_close(r, &s);
	td_vbd_info(r->vbd,
		    "ring closed: %" PRIu64 " reads, %" PRIu64
		    " writes, %" PRIu64 " indirect, %" PRIu64
		    " segments, %" PRIu64 " copy batches, %" PRIu64
		    " waits for the arena",
		    s.reqs[BLKIF_OP_READ], s.reqs[BLKIF_OP_WRITE],
		    s.indirect_reqs, s.segments, s.copy_batches, s.data_waits);
	blkif_ring_destroy(ring);
	r->blkif = NULL;
	xr_free(r);
	done(done_opaque);
}

static void xr_disconnect(struct xen_ring *r, void (*done)(void *),
			  void *opaque)
{
	r->done = done;
	r->done_opaque = opaque;
	td_loop_del_fd(&r->evfde);
	td_loop_defer_cancel(r->loop, &r->fatal_defer);
	/* After stop blkif never touches the shared ring again. */
	blkif_ring_stop(r->blkif, xr_drained, r);
	xengnttab_unmap(r->xgt, r->sring, r->nr_ring_pages);
	r->sring = NULL;
}

/*
 * The event channel stays bound while the ring drains: the last responses
 * still notify the frontend.  Unmapped and unbound in xr_drained.
 */
static void xr_quiesce(struct xen_ring *r, void (*done)(void *), void *opaque)
{
	r->done = done;
	r->done_opaque = opaque;
	td_loop_defer_cancel(r->loop, &r->fatal_defer);
	blkif_ring_quiesce(r->blkif, xr_drained, r);
}

static void xr_add_stats(const struct xen_ring *r,
			 struct blkif_queue_report *sum)
{
	struct blkif_ring_stats s;

	if (!r->blkif)
		return;
	blkif_ring_get_stats(r->blkif, &s);
	blkif_ring_stats_add(&sum->ring, &s);
	sum->kicks += r->kicks;
	sum->in_flight += blkif_ring_in_flight(r->blkif);
}

const struct xen_io_ops xen_io_real = {
	.connect = xr_connect,
	.disconnect = xr_disconnect,
	.quiesce = xr_quiesce,
	.add_stats = xr_add_stats,
};
