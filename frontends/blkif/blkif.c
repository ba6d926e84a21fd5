/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blkif.c - the blkif request path: consume requests, run them on the
 * vbd, answer.  Creating, stopping and quiescing a ring: blkif-ring.c.
 *
 * Consumption (blkif_ring_kick): read req_prod once, then a read barrier,
 * then copy each slot once into a local request (blkif_abi_copy_request) and
 * hand only that copy to blkif-parse.c.  A slot of ours (struct
 * blkif_slot, one per ring slot, preallocated) carries the request until
 * its response is written; since a well-behaved frontend never has more
 * than a ring of requests without responses, free slots cannot run out,
 * and a producer index that claims more is a protocol error that kills
 * the ring.
 *
 * Responses: a finished slot goes on the done list, in completion order;
 * the pass-end hook writes the whole list into the ring, pushes it once
 * and notifies the frontend at most once.
 *
 * Waiting: consumption stops, leaving requests on the ring, while a
 * barrier drains or runs, while an indirect request finds no free
 * indirect buffer and while a copying transport has no room for a
 * request's data; it resumes by a deferred kick when that ends.
 *
 * Starting: the requests of one consumption pass are parsed first and
 * started together at its end (ring_start_ready), so that a copying
 * transport fetches the data of the whole pass in one batch (copy_in);
 * reads are stored back in one batch per response batch (copy_out).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/blkif/blkif-int.h"

/* --- the shared ring, by protocol ABI ------------------------------------- */

/* Slot layouts by protocol ABI are in blkif-abi.c. */
static void blkif_put_response(struct blkif_ring *ring,
			       const struct blkif_slot *slot)
{
	blkif_abi_put_response(ring, ring->back.rsp_prod_pvt, slot->id,
			       slot->operation, slot->status);
	ring->back.rsp_prod_pvt++;
}

/* The tag a copying transport knows a request by: its slot's index. */
static uint32_t slot_tag(const struct blkif_ring *ring,
			 const struct blkif_slot *slot)
{
	return (uint32_t)(slot - ring->slots);
}

static bool ring_live(const struct blkif_ring *ring)
{
	return !ring->dead && !ring->stopped;
}

static void ring_kick_deferred(struct td_defer *d, void *opaque)
{
	blkif_ring_kick(opaque);
}

/* Take requests again, from the event loop, after a wait ended. */
static void ring_resume(struct blkif_ring *ring)
{
	if (ring_live(ring))
		td_loop_defer(ring->loop, &ring->kick_defer, ring_kick_deferred,
			      ring);
}

/* --- a request's life ----------------------------------------------------- */

static void slot_submit(struct blkif_slot *slot);

/* Queue the response; the pass-end hook writes it. */
void blkif_slot_done(struct blkif_slot *slot, int16_t status)
{
	struct blkif_ring *ring = slot->ring;

	slot->status = status;
	if (ring->barrier == slot) {
		ring->barrier = NULL;
		ring_resume(ring);
	}
	TAILQ_INSERT_TAIL(&ring->done, slot, link);
}

static void slot_fail(struct blkif_slot *slot, int err)
{
	slot->ring->stats.io_errors++;
	blkif_slot_done(slot, err == -EOPNOTSUPP ? BLKIF_RSP_EOPNOTSUPP
						 : BLKIF_RSP_ERROR);
}

/* A barrier starts once nothing else of its ring is in the vbd. */
static void ring_start_barrier(struct blkif_ring *ring)
{
	if (ring->barrier && !ring->nr_active)
		slot_submit(ring->barrier);
}

/* After a stage succeeded: true when there is more to submit. */
static bool slot_advance(struct blkif_slot *slot)
{
	enum td_op op = slot->stages[slot->stage].op;

	if (op == TD_OP_DISCARD || op == TD_OP_WRITE_ZEROES) {
		slot->done_sectors += slot->io.nr_sectors;
		if (slot->done_sectors < slot->nr_sectors)
			return true;
	}
	return ++slot->stage < slot->nr_stages;
}

static void slot_io_done(struct td_vbd_io *io, int err)
{
	struct blkif_slot *slot = io->opaque;
	struct blkif_ring *ring = slot->ring;

	ring->nr_active--;
	if (err)
		slot_fail(slot, err);
	else if (slot_advance(slot))
		slot_submit(slot);
	else
		blkif_slot_done(slot, BLKIF_RSP_OKAY);
	ring_start_barrier(ring);
}

static void slot_fill_io(struct blkif_slot *slot, struct td_vbd_io *io)
{
	const struct blkif_stage *st = &slot->stages[slot->stage];
	uint64_t left;

	memset(io, 0, sizeof(*io));
	io->op = st->op;
	io->flags = st->flags;
	io->cb = slot_io_done;
	io->opaque = slot;
	switch (st->op) {
	case TD_OP_READ:
	case TD_OP_WRITE:
		io->sector = slot->sector;
		/* At most 4096 segments of 8 sectors: fits. */
		io->nr_sectors = (uint32_t)slot->nr_sectors;
		io->iov = slot->iov;
		io->iovcnt = slot->iovcnt;
		io->nr_segments = slot->nr_segments;
		break;
	case TD_OP_DISCARD:
	case TD_OP_WRITE_ZEROES:
		left = slot->nr_sectors - slot->done_sectors;
		io->sector = slot->sector + slot->done_sectors;
		io->nr_sectors = left < BLKIF_DISCARD_CHUNK_SECTORS
					 ? (uint32_t)left
					 : BLKIF_DISCARD_CHUNK_SECTORS;
		break;
	default:
		break;
	}
}

/* Submit the slot's current stage to the vbd. */
static void slot_submit(struct blkif_slot *slot)
{
	struct blkif_ring *ring = slot->ring;
	int err;

	slot_fill_io(slot, &slot->io);
	slot->io.stamp_ns[TD_STAMP_SEEN] = slot->seen_ns;
	err = td_vbd_submit(ring->vbd, &slot->io);
	if (err) {
		slot_fail(slot, err);
		return;
	}
	ring->nr_active++;
}

static void slot_start(struct blkif_slot *slot)
{
	struct blkif_ring *ring = slot->ring;

	if (!slot->barrier) {
		slot_submit(slot);
		return;
	}
	/* Consumption waits until blkif_slot_done clears ring->barrier. */
	ring->barrier = slot;
	ring_start_barrier(ring);
}

static struct blkif_slot *slot_get(struct blkif_ring *ring)
{
	struct blkif_slot *slot = TAILQ_FIRST(&ring->free);

	if (slot) {
		TAILQ_REMOVE(&ring->free, slot, link);
		ring->nr_busy++;
	}
	return slot;
}

static void slot_put(struct blkif_ring *ring, struct blkif_slot *slot)
{
	if (slot->reserved) {
		slot->reserved = false;
		ring->ops->release(ring->opaque, slot_tag(ring, slot));
		if (ring->wait_data) {
			ring->wait_data = false;
			ring_resume(ring);
		}
	}
	if (slot->ibuf) {
		slot->ibuf->next = ring->ibuf_free;
		ring->ibuf_free = slot->ibuf;
		slot->ibuf = NULL;
		if (ring->wait_ibuf) {
			ring->wait_ibuf = false;
			ring_resume(ring);
		}
	}
	TAILQ_INSERT_HEAD(&ring->free, slot, link);
	ring->nr_busy--;
}

/* --- consuming --------------------------------------------------------------- */

static void ring_fatal(struct blkif_ring *ring, RING_IDX prod)
{
	ring->dead = true;
	ring->stats.protocol_errors++;
	td_vbd_err(ring->vbd,
		   "queue %" PRIu32 ": producer index %u is more than a ring "
		   "(%u) ahead of the responses (%u): protocol error, ring "
		   "given up",
		   ring->queue, prod, RING_SIZE(&ring->back),
		   ring->back.rsp_prod_pvt);
	ring->ops->fatal(ring->opaque, -EPROTO);
}

/* Take the request at req_cons.  false: it waits on the ring, or died. */
static bool ring_take(struct blkif_ring *ring, RING_IDX prod)
{
	struct blkif_request req;
	struct blkif_slot *slot;
	int16_t status;
	bool indirect;

	/* Cannot happen after the producer check (see ring_consume). */
	if (TAILQ_EMPTY(&ring->free)) {
		ring_fatal(ring, prod);
		return false;
	}
	blkif_abi_copy_request(ring, ring->back.req_cons, &req);
	indirect = blkif_wants_ibuf(ring, &req);
	if (indirect && !ring->ibuf_free) {
		ring->wait_ibuf = true;
		ring->stats.indirect_waits++;
		return false;
	}
	/* slot_get below takes this same first free slot. */
	if (ring->copying &&
	    ring->ops->reserve(ring->opaque,
			       slot_tag(ring, TAILQ_FIRST(&ring->free)),
			       blkif_max_data_bytes(ring, &req))) {
		ring->wait_data = true;
		ring->stats.data_waits++;
		return false;
	}
	ring->back.req_cons++;
	if (ring->polled)
		ring->stats.polled_reqs++;
	/* Slot, indirect buffer and reservation go back in slot_put, after
	 * the response. */
	slot = slot_get(ring);
	slot->seen_ns = td_vbd_stages_seen(ring->vbd);
	slot->reserved = ring->copying;
	if (indirect) {
		slot->ibuf = ring->ibuf_free;
		ring->ibuf_free = slot->ibuf->next;
	}
	status = blkif_parse_request(ring, &req, slot);
	if (status != BLKIF_RSP_OKAY) {
		blkif_slot_done(slot, status);
	} else {
		/* Started by ring_start_ready at the end of the pass. */
		TAILQ_INSERT_TAIL(&ring->ready, slot, link);
		ring->ready_barrier = slot->barrier;
	}
	return true;
}

/* A barrier waiting on the ready list stops consumption as one running. */
static bool ring_can_take(const struct blkif_ring *ring)
{
	return ring_live(ring) && !ring->quiescing && !ring->barrier &&
	       !ring->ready_barrier;
}

/*
 * Requests held (slots busy) are req_cons - rsp_prod_pvt, so the producer
 * check below guarantees a free slot for every request up to prod.
 */
static void ring_consume(struct blkif_ring *ring)
{
	int more;

	if (!ring_can_take(ring))
		return;
	do {
		RING_IDX prod =
			*(volatile RING_IDX *)&ring->back.sring->req_prod;

		xen_rmb(); /* the slots up to prod are read after prod */
		/*
		 * prod - rsp_prod_pvt > size also catches prod - req_cons >
		 * size, and is what bounds the requests we hold by the slots.
		 */
		if (RING_REQUEST_PROD_OVERFLOW(&ring->back, prod)) {
			ring_fatal(ring, prod);
			return;
		}
		while (ring->back.req_cons != prod) {
			if (!ring_can_take(ring) || !ring_take(ring, prod))
				return;
		}
		/*
		 * While the loop polls, req_event is left behind so that the
		 * frontend need not notify: the poller sees req_prod move, and
		 * arms req_event again before the loop sleeps.
		 */
		if (!ring_can_take(ring) || td_loop_polling(ring->loop))
			return;
		RING_FINAL_CHECK_FOR_REQUESTS(&ring->back, more);
	} while (more);
}

/* Poller: requests the frontend produced without notifying. */
bool blkif_ring_poll(struct td_poller *p, void *opaque)
{
	struct blkif_ring *ring = opaque;
	RING_IDX cons = ring->back.req_cons;

	(void)p;
	if (!ring_can_take(ring) ||
	    *(volatile RING_IDX *)&ring->back.sring->req_prod == cons)
		return false;
	ring->polled = true;
	blkif_ring_kick(ring);
	ring->polled = false;
	return ring->back.req_cons != cons;
}

/* Before the loop sleeps: ask for notifications again, look once more. */
bool blkif_ring_arm(struct td_poller *p, void *opaque)
{
	struct blkif_ring *ring = opaque;
	int more = 0;

	(void)p;
	if (!ring_can_take(ring))
		return false;
	RING_FINAL_CHECK_FOR_REQUESTS(&ring->back, more);
	return more;
}

/* copy_in for every request of the ready list; errors in batch_errs. */
static void ring_copy_in(struct blkif_ring *ring)
{
	struct blkif_slot *slot;
	uint32_t n = 0;

	TAILQ_FOREACH(slot, &ring->ready, link)
	{
		ring->batch_tags[n] = slot_tag(ring, slot);
		ring->batch_errs[n++] = 0;
	}
	ring->stats.copy_batches++;
	ring->ops->copy_in(ring->opaque, ring->batch_tags, ring->batch_errs, n);
}

/*
 * Start the requests of this pass, in ring order.  A ring given up while
 * they waited starts none of them: they are dropped like the rest.
 */
static void ring_start_ready(struct blkif_ring *ring)
{
	bool live = ring_live(ring), barrier = ring->ready_barrier;
	struct blkif_slot *slot;
	uint32_t n = 0;

	if (TAILQ_EMPTY(&ring->ready))
		return;
	if (live && ring->copying)
		ring_copy_in(ring);
	ring->ready_barrier = false;
	while ((slot = TAILQ_FIRST(&ring->ready))) {
		TAILQ_REMOVE(&ring->ready, slot, link);
		if (!live)
			blkif_slot_done(slot, BLKIF_RSP_ERROR);
		else if (ring->copying && ring->batch_errs[n++])
			slot_fail(slot, ring->batch_errs[n - 1]);
		else
			slot_start(slot);
	}
	/* A barrier that failed its copy never started: take again. */
	if (barrier && !ring->barrier)
		ring_resume(ring);
}

void blkif_ring_kick(struct blkif_ring *ring)
{
	if (!ring_live(ring) || ring->consuming)
		return;
	ring->consuming = true;
	ring_consume(ring);
	ring_start_ready(ring);
	ring->consuming = false;
}

/* --- responding ------------------------------------------------------------ */

static void ring_drained(struct td_defer *d, void *opaque)
{
	struct blkif_ring *ring = opaque;
	blkif_drained_cb cb = ring->drained_cb;

	ring->drained_cb = NULL;
	if (cb)
		cb(ring, ring->drained_opaque); /* may destroy the ring */
}

void blkif_ring_check_drained(struct blkif_ring *ring)
{
	if ((ring->stopped || ring->quiescing) && ring->drained_cb &&
	    !ring->nr_busy)
		td_loop_defer(ring->loop, &ring->drained_defer, ring_drained,
			      ring);
}

static bool slot_read_ok(const struct blkif_slot *slot)
{
	return slot->status == BLKIF_RSP_OKAY && slot->nr_segments &&
	       slot->stages[0].op == TD_OP_READ;
}

/* copy_out for the reads of the done list; a failed copy fails the read. */
static void ring_copy_out(struct blkif_ring *ring)
{
	struct blkif_slot *slot;
	uint32_t n = 0, i = 0;

	TAILQ_FOREACH(slot, &ring->done, link)
	{
		if (slot_read_ok(slot)) {
			ring->batch_tags[n] = slot_tag(ring, slot);
			ring->batch_errs[n++] = 0;
		}
	}
	if (!n)
		return;
	ring->stats.copy_batches++;
	ring->ops->copy_out(ring->opaque, ring->batch_tags, ring->batch_errs,
			    n);
	TAILQ_FOREACH(slot, &ring->done, link)
	{
		if (slot_read_ok(slot) && ring->batch_errs[i++]) {
			ring->stats.io_errors++;
			slot->status = BLKIF_RSP_ERROR;
		}
	}
}

/* Pass-end hook: every response of this pass, one push, one notify. */
void blkif_ring_respond(struct td_hook *h, void *opaque)
{
	struct blkif_ring *ring = opaque;
	bool live = ring_live(ring);
	struct blkif_slot *slot;
	uint32_t timed[TD_OP_COUNT] = {0};
	uint64_t t0;
	int notify = 0;

	if (TAILQ_EMPTY(&ring->done))
		return;
	t0 = td_vbd_stages_clock(ring->vbd);
	if (live && ring->copying)
		ring_copy_out(ring);
	while ((slot = TAILQ_FIRST(&ring->done))) {
		TAILQ_REMOVE(&ring->done, slot, link);
		if (live)
			blkif_put_response(ring, slot);
		if (t0)
			td_vbd_stages_respond(ring->vbd, &slot->io, t0, timed);
		slot_put(ring, slot);
	}
	if (live) {
		RING_PUSH_RESPONSES_AND_CHECK_NOTIFY(&ring->back, notify);
		if (notify) {
			ring->stats.notifications++;
			ring->ops->notify(ring->opaque);
		}
	}
	if (t0)
		td_vbd_stages_notified(ring->vbd, timed, td_now_ns() - t0);
	blkif_ring_check_drained(ring);
}
