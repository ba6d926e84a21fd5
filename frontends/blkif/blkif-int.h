/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blkif-int.h - what blkif.c (the request path: consume, submit,
 * respond), blkif-ring.c (create, stop, quiesce, destroy) and blkif-parse.c
 * (one request: validate, plan, build iovecs) share.  Not for other
 * modules.
 */
#ifndef TAPSTRIPE_BLKIF_INT_H
#define TAPSTRIPE_BLKIF_INT_H

#include <sys/queue.h>
#include <sys/uio.h>

#include "frontends/blkif/blkif.h"

#define BLKIF_SECTORS_PER_PAGE (BLKIF_PAGE_SIZE >> TD_SECTOR_SHIFT)
/* Barrier without FUA: FLUSH, WRITE, FLUSH. */
#define BLKIF_MAX_STAGES 3
/* Discards are cut into vbd I/Os of at most this (nr_sectors is 32 bits). */
#define BLKIF_DISCARD_CHUNK_SECTORS (1u << 31)

/* One vbd I/O of a request's plan; the stages run one after another. */
struct blkif_stage {
	enum td_op op;
	uint32_t flags; /* TD_REQ_* */
};

/*
 * The private copy of an indirect request's segment descriptors and its
 * iovecs: max_indirect_segments of each.  A ring preallocates
 * cfg->indirect_buffers of them.
 */
struct blkif_ibuf {
	struct blkif_ibuf *next; /* free list */
	struct blkif_request_segment *segs;
	struct iovec *iov;
};

/* A request from the moment it leaves the ring until its response. */
struct blkif_slot {
	TAILQ_ENTRY(blkif_slot) link; /* ring's free list or done list */
	struct blkif_ring *ring;
	struct td_vbd_io io; /* the stage in flight */

	uint64_t id;	   /* echoed in the response */
	uint8_t operation; /* echoed: an indirect request's indirect_op */
	int16_t status;	   /* BLKIF_RSP_* once done */
	bool barrier;	   /* waits for the ring to drain first */
	bool reserved;	   /* ops->reserve said yes: release in slot_put */
	uint64_t seen_ns;  /* stage timing: read off the ring (0: off) */

	struct blkif_stage stages[BLKIF_MAX_STAGES];
	uint8_t nr_stages;
	uint8_t stage; /* the one in flight */

	uint64_t sector;
	uint64_t nr_sectors;	 /* of the whole request */
	uint64_t done_sectors;	 /* DISCARD/WRITE_ZEROES: issued so far */
	struct iovec *iov;	 /* iov_direct or ibuf->iov */
	int iovcnt;		 /* after joining neighbours */
	uint32_t nr_segments;	 /* as the frontend counts them */
	struct blkif_ibuf *ibuf; /* indirect requests only */
	struct iovec iov_direct[BLKIF_MAX_SEGMENTS_PER_REQUEST];
};

TAILQ_HEAD(blkif_slot_list, blkif_slot);

struct blkif_ring {
	struct td_vbd *vbd;
	struct td_loop *loop;
	struct td_poller poller; /* busy polling: req_prod seen moving */
	const struct blkif_transport_ops *ops;
	void *opaque;
	uint32_t queue;
	enum blkif_protocol protocol;
	/* Native layout.  Other ABIs will add their back ring here. */
	blkif_back_ring_t back;

	uint32_t max_indirect_segments; /* 0: indirect refused */
	bool secure_discard;
	bool read_only; /* cfg->read_only: refuse what writes */

	struct blkif_slot *slots; /* one per ring slot */
	struct blkif_slot_list free;
	struct blkif_slot_list done; /* completed, response not written */
	/* Parsed in this consumption pass, not yet started (copy_in). */
	struct blkif_slot_list ready;
	uint32_t nr_busy;   /* slots not on the free list */
	uint32_t nr_active; /* slots with an I/O in the vbd */

	struct blkif_ibuf *ibufs;
	struct blkif_ibuf *ibuf_free;
	void *ibuf_mem;
	bool wait_ibuf;	    /* a request waits on the ring for an ibuf */
	bool wait_data;	    /* a request waits on the ring for ops->reserve */
	bool ready_barrier; /* a barrier is on the ready list: stop taking */
	bool copying;	    /* the transport copies (ops->reserve set) */
	/* Arguments of copy_in/copy_out: one entry per slot. */
	uint32_t *batch_tags;
	int *batch_errs;

	/* A barrier draining the ring or running: consumption waits. */
	struct blkif_slot *barrier;

	/* Either one: the shared ring is never read or written again. */
	bool dead;    /* the frontend broke the protocol */
	bool stopped; /* blkif_ring_stop() */
	/* blkif_ring_quiesce(): take nothing more, answer what was taken. */
	bool quiescing;
	bool consuming; /* inside blkif_ring_kick: no re-entry */
	bool polled;	/* inside blkif_ring_poll: count polled_reqs */
	struct td_hook respond_hook;
	struct td_defer kick_defer;
	struct td_defer drained_defer;
	blkif_drained_cb drained_cb;
	void *drained_opaque;

	struct blkif_ring_stats stats;
};

/*
 * blkif-parse.c: validate req (the private copy of one ring slot, native
 * layout) and fill in slot: id, operation, stages, range, iovecs.  For an
 * indirect request slot->ibuf must be set.  Returns BLKIF_RSP_OKAY when
 * the slot is ready to run, BLKIF_RSP_ERROR or BLKIF_RSP_EOPNOTSUPP when it
 * must be answered at once (logged, counted).
 */
int16_t blkif_parse_request(struct blkif_ring *ring,
			    const struct blkif_request *req,
			    struct blkif_slot *slot);

/*
 * blkif.c, for blkif-ring.c.  blkif_slot_done queues the slot's response
 * for the pass-end hook, blkif_ring_respond (registered by create); after
 * a stop or quiesce, blkif_ring_check_drained defers the drained callback
 * once no slot is busy.
 */
void blkif_slot_done(struct blkif_slot *slot, int16_t status);
void blkif_ring_respond(struct td_hook *h, void *opaque);

/* The ring's poller (registered by create; td_loop_set_poll_budget). */
bool blkif_ring_poll(struct td_poller *p, void *opaque);
bool blkif_ring_arm(struct td_poller *p, void *opaque);
void blkif_ring_check_drained(struct blkif_ring *ring);

/*
 * blkif-abi.c: slots of the shared ring in the ring's protocol ABI.  The
 * number of slots in bytes of ring; copy slot idx, once, converted to the
 * native layout; write the response in slot idx.
 */
uint32_t blkif_abi_ring_size(enum blkif_protocol protocol, size_t bytes);
void blkif_abi_copy_request(struct blkif_ring *ring, RING_IDX idx,
			    struct blkif_request *out);
void blkif_abi_put_response(struct blkif_ring *ring, RING_IDX idx, uint64_t id,
			    uint8_t operation, int16_t status);

/*
 * The most bytes of data req's segments can carry, from its counts alone
 * (bounded by the ring's limits; the parse checks them exactly).
 */
size_t blkif_max_data_bytes(const struct blkif_ring *ring,
			    const struct blkif_request *req);

/* True when req is BLKIF_OP_INDIRECT and the ring accepts them. */
bool blkif_wants_ibuf(const struct blkif_ring *ring,
		      const struct blkif_request *req);

#endif
