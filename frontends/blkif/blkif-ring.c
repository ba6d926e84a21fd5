/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blkif-ring.c - the life of a blkif ring: configuration and features,
 * create (fresh, or resumed where another backend left it), stop,
 * quiesce, destroy.  The request path itself (consume, submit, respond)
 * is in blkif.c.
 *
 * Stop and quiesce both end with the drained callback, from the event
 * loop, once no slot is busy; they differ in what the frontend gets:
 *   stop      the shared ring is never touched again: I/O in flight
 *             completes without a response (the frontend is gone, or broke
 *             the protocol);
 *   quiesce   no request is taken any more, but every request taken is
 *             answered: the ring is left consistent (rsp_prod == req_cons)
 *             for a backend that resumes it (blkif_ring_params.resume), as
 *             tapdisk does when it hands a Xen device over to another
 *             tapdisk.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/blkif/blkif-int.h"

/* --- configuration ------------------------------------------------------- */

void blkif_config_init(struct blkif_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_ring_order = BLKIF_DEFAULT_MAX_RING_ORDER;
	cfg->max_indirect_segments = BLKIF_MAX_INDIRECT_SEGMENTS;
}

int blkif_config_check(const struct blkif_config *cfg)
{
	if (cfg->max_ring_order > BLKIF_MAX_RING_ORDER) {
		td_err("blkif: max ring order %" PRIu32 " is above %d",
		       cfg->max_ring_order, BLKIF_MAX_RING_ORDER);
		return -EINVAL;
	}
	if (cfg->max_indirect_segments < BLKIF_NO_INDIRECT ||
	    cfg->max_indirect_segments > BLKIF_MAX_INDIRECT_SEGMENTS) {
		td_err("blkif: max indirect segments %" PRIu32
		       " is not in %d..%zu (%d: no indirect requests)",
		       cfg->max_indirect_segments, BLKIF_NO_INDIRECT,
		       BLKIF_MAX_INDIRECT_SEGMENTS, BLKIF_NO_INDIRECT);
		return -EINVAL;
	}
	return 0;
}

void blkif_get_features(const struct blkif_config *cfg,
			const struct td_vbd *vbd, struct blkif_features *out)
{
	const struct td_disk_info *info = td_vbd_get_info(vbd);

	memset(out, 0, sizeof(*out));
	out->max_ring_page_order = cfg->max_ring_order;
	if (cfg->max_indirect_segments > BLKIF_NO_INDIRECT)
		out->max_indirect_segments = cfg->max_indirect_segments;
	out->flush_cache = info->features & TD_FEAT_FLUSH;
	out->discard = (info->features & TD_FEAT_DISCARD) && !info->read_only;
	out->discard_secure = out->discard && cfg->feature_secure_discard &&
			      (info->features & TD_FEAT_WRITE_ZEROES);
}

/* --- life of a ring ------------------------------------------------------- */

static int ring_check_params(const struct blkif_config *cfg,
			     const struct blkif_ring_params *p)
{
	const struct blkif_transport_ops *ops = p->ops;

	if (blkif_config_check(cfg))
		return -EINVAL;
	if (p->ring_order > cfg->max_ring_order) {
		td_err("blkif: ring order %" PRIu32 " is above the %" PRIu32
		       " offered",
		       p->ring_order, cfg->max_ring_order);
		return -EINVAL;
	}
	if (p->protocol != BLKIF_PROTOCOL_NATIVE &&
	    p->protocol != BLKIF_PROTOCOL_X86_32) {
		td_err("blkif: unknown protocol %d", (int)p->protocol);
		return -EINVAL;
	}
	if (ops &&
	    (!ops->reserve + !ops->copy_in + !ops->copy_out + !ops->release) %
		    4) {
		td_err("blkif: reserve, copy_in, copy_out and release go "
		       "together: all four or none");
		return -EINVAL;
	}
	if (!p->sring || !ops || !ops->map_segment || !ops->notify ||
	    !ops->fatal ||
	    (cfg->max_indirect_segments > BLKIF_NO_INDIRECT &&
	     !ops->copy_indirect)) {
		td_err("blkif: no shared ring or a required transport op");
		return -EINVAL;
	}
	return 0;
}

static int ring_alloc_slots(struct blkif_ring *ring)
{
	uint32_t size = RING_SIZE(&ring->back);

	ring->slots = calloc(size, sizeof(*ring->slots));
	if (!ring->slots)
		return -ENOMEM;
	TAILQ_INIT(&ring->free);
	TAILQ_INIT(&ring->done);
	TAILQ_INIT(&ring->ready);
	if (ring->copying) {
		ring->batch_tags = calloc(size, sizeof(*ring->batch_tags));
		ring->batch_errs = calloc(size, sizeof(*ring->batch_errs));
		if (!ring->batch_tags || !ring->batch_errs)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < size; i++) {
		ring->slots[i].ring = ring;
		TAILQ_INSERT_TAIL(&ring->free, &ring->slots[i], link);
	}
	return 0;
}

/* One block: for each buffer, its descriptors then its iovecs. */
static int ring_alloc_ibufs(struct blkif_ring *ring, uint32_t count)
{
	size_t nsegs = ring->max_indirect_segments;
	size_t stride = nsegs * (sizeof(struct blkif_request_segment) +
				 sizeof(struct iovec));
	char *mem;

	if (!nsegs)
		return 0;
	ring->ibufs = calloc(count, sizeof(*ring->ibufs));
	ring->ibuf_mem = calloc(count, stride);
	if (!ring->ibufs || !ring->ibuf_mem)
		return -ENOMEM;
	mem = ring->ibuf_mem;
	for (uint32_t i = count; i-- > 0;) {
		struct blkif_ibuf *b = &ring->ibufs[i];

		b->segs = (struct blkif_request_segment *)(mem + i * stride);
		b->iov = (struct iovec *)(mem + i * stride +
					  nsegs * sizeof(*b->segs));
		b->next = ring->ibuf_free;
		ring->ibuf_free = b;
	}
	return 0;
}

static void ring_free(struct blkif_ring *ring)
{
	free(ring->slots);
	free(ring->batch_tags);
	free(ring->batch_errs);
	free(ring->ibufs);
	free(ring->ibuf_mem);
	free(ring);
}

static uint32_t ring_ibuf_count(const struct blkif_config *cfg, uint32_t size)
{
	uint32_t n = cfg->indirect_buffers ? cfg->indirect_buffers
					   : BLKIF_DEFAULT_INDIRECT_BUFFERS;

	return n < size ? n : size;
}

/*
 * Resume a ring another backend quiesced: it answered every request it
 * took, so the requests from rsp_prod on are the ones nobody took yet.
 * rsp_prod is the frontend's to corrupt: any value is only a starting
 * point, and the producer check of every pass (ring_consume) still bounds
 * what we take by the ring's size.
 */
static void ring_resume_at_responses(struct blkif_ring *ring)
{
	RING_IDX start = *(volatile RING_IDX *)&ring->back.sring->rsp_prod;

	ring->back.req_cons = start;
	ring->back.rsp_prod_pvt = start;
	td_vbd_info(ring->vbd, "queue %" PRIu32 ": resuming at index %u",
		    ring->queue, start);
}

int blkif_ring_create(struct td_vbd *vbd, const struct blkif_config *cfg,
		      const struct blkif_ring_params *params,
		      struct blkif_ring **out)
{
	struct blkif_ring *ring;
	int err = ring_check_params(cfg, params);

	if (err)
		return err;
	ring = calloc(1, sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	ring->vbd = vbd;
	ring->loop = td_vbd_loop(vbd);
	ring->ops = params->ops;
	ring->opaque = params->opaque;
	ring->queue = params->queue;
	ring->protocol = params->protocol;
	ring->copying = params->ops->reserve != NULL;
	if (cfg->max_indirect_segments > BLKIF_NO_INDIRECT)
		ring->max_indirect_segments = cfg->max_indirect_segments;
	ring->secure_discard = cfg->feature_secure_discard;
	ring->read_only = cfg->read_only;
	BACK_RING_INIT(&ring->back, (blkif_sring_t *)params->sring,
		       (size_t)BLKIF_PAGE_SIZE << params->ring_order);
	if (params->resume)
		ring_resume_at_responses(ring);
	/* The indices are the same in every ABI; the slot count is not. */
	ring->back.nr_ents = blkif_abi_ring_size(params->protocol,
						 (size_t)BLKIF_PAGE_SIZE
							 << params->ring_order);
	err = ring_alloc_slots(ring);
	if (!err)
		err = ring_alloc_ibufs(
			ring, ring_ibuf_count(cfg, RING_SIZE(&ring->back)));
	if (err) {
		ring_free(ring);
		return err;
	}
	td_loop_add_hook(ring->loop, &ring->respond_hook, blkif_ring_respond,
			 ring);
	td_loop_add_poller(ring->loop, &ring->poller, blkif_ring_poll,
			   blkif_ring_arm, ring);
	*out = ring;
	return 0;
}

int blkif_ring_stop(struct blkif_ring *ring, blkif_drained_cb cb, void *opaque)
{
	if (ring->stopped)
		return -EALREADY;
	ring->stopped = true;
	ring->drained_cb = cb;
	ring->drained_opaque = opaque;
	td_loop_defer_cancel(ring->loop, &ring->kick_defer);
	/* A barrier still draining never reached the vbd: drop it. */
	if (ring->barrier && !ring->nr_active)
		blkif_slot_done(ring->barrier, BLKIF_RSP_ERROR);
	blkif_ring_check_drained(ring);
	return 0;
}

int blkif_ring_quiesce(struct blkif_ring *ring, blkif_drained_cb cb,
		       void *opaque)
{
	if (ring->stopped || ring->quiescing)
		return -EALREADY;
	ring->quiescing = true;
	ring->drained_cb = cb;
	ring->drained_opaque = opaque;
	/* A pending kick would find nothing to take: cancel it. */
	td_loop_defer_cancel(ring->loop, &ring->kick_defer);
	blkif_ring_check_drained(ring);
	return 0;
}

int blkif_ring_destroy(struct blkif_ring *ring)
{
	if (ring->nr_busy)
		return -EBUSY;
	td_loop_del_hook(&ring->respond_hook);
	td_loop_del_poller(&ring->poller);
	td_loop_defer_cancel(ring->loop, &ring->kick_defer);
	td_loop_defer_cancel(ring->loop, &ring->drained_defer);
	ring_free(ring);
	return 0;
}

uint32_t blkif_ring_size(const struct blkif_ring *ring)
{
	return RING_SIZE(&ring->back);
}

bool blkif_ring_dead(const struct blkif_ring *ring)
{
	return ring->dead;
}

void blkif_ring_get_stats(const struct blkif_ring *ring,
			  struct blkif_ring_stats *out)
{
	*out = ring->stats;
}

uint32_t blkif_ring_in_flight(const struct blkif_ring *ring)
{
	return ring->nr_busy;
}
