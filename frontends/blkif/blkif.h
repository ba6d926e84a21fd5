/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blkif.h - the blkif request path: a Xen block ring served by a vbd.
 *
 * One module for every transport that carries Xen's blkif protocol
 * (xen/io/blkif.h): the shm transport (a frontend process, the ring and a
 * data pool in POSIX shared memory) and the Xen transport (a guest's
 * blkfront, the ring mapped through gntdev).  The transport negotiates the
 * ring (order, protocol ABI), maps it, and calls blkif_ring_kick() when the
 * frontend signals; this module copies each request out of the shared ring,
 * validates the copy (every field is hostile), turns it into td_vbd_io
 * submissions and writes the responses back, in completion order, batched
 * once per event-loop pass with at most one notification per batch.
 *
 * What a blkif operation becomes (TD_OP_* in tapdisk/driver.h):
 *   READ, WRITE            READ, WRITE (direct: 1..11 segments)
 *   INDIRECT               READ or WRITE, 1..max_indirect_segments segments
 *                          described in up to 8 indirect pages
 *   FLUSH_DISKCACHE        FLUSH; with segments, FLUSH then WRITE
 *   WRITE_BARRIER          once every earlier request of the ring has
 *                          completed: FLUSH, then WRITE with TD_REQ_FUA (or
 *                          WRITE then FLUSH when the disk has no FUA); no
 *                          later request starts before it completes.  With
 *                          no segment it is a drained FLUSH.
 *   DISCARD                DISCARD over nr_sectors (cut into pieces of at
 *                          most 2^31 sectors);
 *   DISCARD + SECURE       refused (BLKIF_RSP_EOPNOTSUPP) unless
 *                          feature_secure_discard: then WRITE_ZEROES with
 *                          TD_REQ_NO_HOLE, so the old blocks are overwritten
 *                          rather than unmapped.
 *   anything else          BLKIF_RSP_EOPNOTSUPP.
 * A request that breaks a rule (a count, a sector range, a page reference)
 * is answered BLKIF_RSP_ERROR; a backend error -EOPNOTSUPP becomes
 * BLKIF_RSP_EOPNOTSUPP, any other BLKIF_RSP_ERROR.  A response echoes the
 * request's id and operation (an indirect request's indirect_op, as Linux
 * blkback answers and blkfront expects).  Only a frontend that corrupts
 * the ring itself gets no answer: a producer index more than a ring ahead
 * of the responses (which includes more than a ring ahead of req_cons)
 * kills the ring, and the transport is told (ops->fatal).
 *
 * Everything runs in the event-loop thread of the vbd.
 */
#ifndef TAPSTRIPE_BLKIF_H
#define TAPSTRIPE_BLKIF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/json.h"
#include "frontends/blkif/xen-ring.h"
#include "tapdisk/vbd.h"

/* Ring orders: Xen guests stop at 4 (XENBUS_MAX_RING_GRANT_ORDER). */
#define BLKIF_MAX_RING_ORDER	     8
#define BLKIF_XEN_MAX_RING_ORDER     4
#define BLKIF_DEFAULT_MAX_RING_ORDER BLKIF_XEN_MAX_RING_ORDER

/* Segment descriptors one indirect page holds: 4096 / 8 = 512. */
#define BLKIF_SEGS_PER_INDIRECT_PAGE \
	(BLKIF_PAGE_SIZE / sizeof(struct blkif_request_segment))
/* The protocol's limit: 8 indirect pages of 512 = 4096 (16 MiB). */
#define BLKIF_MAX_INDIRECT_SEGMENTS \
	(BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * BLKIF_SEGS_PER_INDIRECT_PAGE)
/* max_indirect_segments at this value turns indirect requests off. */
#define BLKIF_NO_INDIRECT BLKIF_MAX_SEGMENTS_PER_REQUEST

/* Indirect buffers per ring when blkif_config.indirect_buffers is 0. */
#define BLKIF_DEFAULT_INDIRECT_BUFFERS 64

/*
 * What the backend supports; the transport advertises it (xenstore keys,
 * or the shm handshake) and tells the module what was negotiated.
 */
struct blkif_config {
	/* Largest ring order accepted (max-ring-page-order), 0..8. */
	uint32_t max_ring_order;
	/*
	 * Most segments of an indirect request
	 * (feature-max-indirect-segments), 11..4096; 11 (BLKIF_NO_INDIRECT)
	 * refuses BLKIF_OP_INDIRECT.
	 */
	uint32_t max_indirect_segments;
	/*
	 * Indirect requests in flight per ring, 0: the smaller of
	 * BLKIF_DEFAULT_INDIRECT_BUFFERS and the ring size.  Each holds a
	 * buffer of max_indirect_segments * 24 bytes, preallocated; when all
	 * are busy the ring waits for one (the request stays on the ring).
	 */
	uint32_t indirect_buffers;
	/* Honour BLKIF_DISCARD_SECURE (discard-secure). */
	bool feature_secure_discard;
	/*
	 * The frontend was given the disk read-only: writes, barriers with
	 * data and discards are answered BLKIF_RSP_ERROR, whatever the vbd
	 * allows (a Xen device attached with mode r).
	 */
	bool read_only;
};

/* Fill in the defaults: order 4, 4096 indirect segments. */
void blkif_config_init(struct blkif_config *cfg);
/* Returns 0, or -EINVAL (logged) when a field is out of range. */
int blkif_config_check(const struct blkif_config *cfg);

/* The values of the keys a transport advertises for a vbd. */
struct blkif_features {
	uint32_t max_ring_page_order;	/* max-ring-page-order */
	uint32_t max_indirect_segments; /* 0: do not advertise the key */
	bool flush_cache;		/* feature-flush-cache */
	bool discard;			/* feature-discard */
	bool discard_secure;		/* discard-secure */
};

void blkif_get_features(const struct blkif_config *cfg,
			const struct td_vbd *vbd, struct blkif_features *out);

/*
 * The layout of the shared ring, from the frontend's "protocol" key
 * (xen/io/protocols.h).  On x86_64 the x86_64-abi is the native one; a
 * 32-bit x86 guest's slots are copied into the native request and its
 * responses written back in its own layout (blkif-abi.c).
 */
enum blkif_protocol {
	BLKIF_PROTOCOL_NATIVE = 0, /* this machine's layout (shm, same ABI) */
	BLKIF_PROTOCOL_X86_32 = 1, /* x86_32-abi: 108-byte slots */
};

/* How the backend will use a segment's memory. */
enum blkif_map_access {
	BLKIF_MAP_RO, /* read it: the guest writes to the disk */
	BLKIF_MAP_RW, /* fill it: the guest reads from the disk */
};

/*
 * What a transport provides.  opaque is blkif_ring_params.opaque.  Every op
 * runs in the event-loop thread, from inside blkif_ring_kick() or the
 * module's pass-end hook; none may call blkif_ring_destroy().
 */
struct blkif_transport_ops {
	/*
	 * Required.  Set *addr to the backend's address of bytes
	 * [offset, offset + len) of the page the frontend calls gref, to be
	 * used for access.  The module has checked that offset + len <=
	 * BLKIF_PAGE_SIZE and that both are multiples of 512.  Returns 0, or
	 * -errno when gref names no page this frontend may use that way (the
	 * request is answered BLKIF_RSP_ERROR).  The memory must stay valid
	 * until the ring is destroyed (shm: the data pool).
	 */
	int (*map_segment)(void *opaque, uint32_t gref, uint32_t offset,
			   uint32_t len, enum blkif_map_access access,
			   void **addr);
	/*
	 * Required unless indirect requests are off.  Copy the first len
	 * bytes (<= BLKIF_PAGE_SIZE) of the indirect page gref into dst, the
	 * request's private buffer: the module parses only that copy.
	 * Returns 0 or -errno (the request is answered BLKIF_RSP_ERROR).
	 */
	int (*copy_indirect)(void *opaque, uint32_t gref, void *dst,
			     size_t len);
	/*
	 * Required.  Wake the frontend: responses were pushed and the ring's
	 * rsp_event asked for a notification.  At most once per pass.
	 */
	void (*notify)(void *opaque);
	/*
	 * Required.  The frontend broke the ring protocol (err is -EPROTO).
	 * The module has logged it and will never read or write the shared
	 * ring again; the transport disconnects this ring (blkif_ring_stop,
	 * then blkif_ring_destroy from the drained callback).  Called once.
	 */
	void (*fatal)(void *opaque, int err);

	/*
	 * Optional, all four or none: a transport that moves data by copy
	 * (Xen grant copy into buffers of its own) rather than by mapping
	 * the frontend's pages.  A request is named by tag, the index of its
	 * slot (0..ring size - 1), from reserve to release; a tag is not
	 * reused before its release.
	 *
	 * reserve: before the request at req_cons is taken, room for
	 * max_bytes of data (the most its segments can carry; 0 for a
	 * request without segments).  The map_segment calls that follow,
	 * up to the next reserve, are for this tag.  Returns 0, or -EAGAIN
	 * to leave the request on the ring: consumption stops and is tried
	 * again after the next release.  A transport must be able to hold
	 * one request of the largest size when nothing else is reserved, or
	 * the ring waits forever.
	 */
	int (*reserve)(void *opaque, uint32_t tag, size_t max_bytes);
	/*
	 * copy_in: once per consumption pass, after the requests taken in
	 * that pass were parsed and before any of them is submitted: fill the
	 * memory of their BLKIF_MAP_RO segments from the frontend, in as few
	 * operations as it can.  tags[0..n-1] in ring order; set errs[i] to 0
	 * or -errno (the request is then answered BLKIF_RSP_ERROR).
	 */
	void (*copy_in)(void *opaque, const uint32_t *tags, int *errs,
			uint32_t n);
	/*
	 * copy_out: once per batch of responses, before they are written:
	 * store the memory of the BLKIF_MAP_RW segments of the requests
	 * tags[0..n-1] (reads that succeeded) into the frontend's pages;
	 * errs as for copy_in.
	 */
	void (*copy_out)(void *opaque, const uint32_t *tags, int *errs,
			 uint32_t n);
	/*
	 * release: the request's response was written or dropped: the
	 * memory of its segments may be reused.  Called once per reserve
	 * that returned 0.
	 */
	void (*release)(void *opaque, uint32_t tag);
};

struct blkif_ring_params {
	/* The mapped shared ring: BLKIF_PAGE_SIZE << ring_order bytes. */
	void *sring;
	uint32_t ring_order; /* negotiated; <= cfg->max_ring_order */
	enum blkif_protocol protocol;
	uint32_t queue; /* queue index (multi-queue), for logs */
	/*
	 * false: a fresh ring (SHARED_RING_INIT), taken from index 0.
	 * true: a ring another backend served and quiesced
	 * (blkif_ring_quiesce): taken from its rsp_prod, where the requests
	 * nobody took begin.
	 */
	bool resume;
	const struct blkif_transport_ops *ops;
	void *opaque;
};

struct blkif_ring;

/* Requests by blkif operation: [0..6] BLKIF_OP_*, then anything else. */
#define BLKIF_STAT_OP_OTHER (BLKIF_OP_INDIRECT + 1)
#define BLKIF_STAT_OPS	    (BLKIF_STAT_OP_OTHER + 1)

struct blkif_ring_stats {
	/* Requests taken off the ring, by operation (an indirect request
	 * counts under its indirect_op). */
	uint64_t reqs[BLKIF_STAT_OPS];
	uint64_t indirect_reqs; /* of those, how many came indirect */
	uint64_t segments;	/* segments of the requests submitted */
	uint64_t bad_reqs;	/* answered BLKIF_RSP_ERROR by validation */
	uint64_t unsupported;	/* answered BLKIF_RSP_EOPNOTSUPP unsubmitted */
	uint64_t io_errors;	/* submitted and failed by the vbd */
	uint64_t protocol_errors; /* fatal: the ring was given up */
	uint64_t notifications;	  /* ops->notify calls */
	uint64_t indirect_waits;  /* times the ring waited for a buffer */
	uint64_t data_waits;	  /* times it waited for ops->reserve */
	uint64_t copy_batches;	  /* ops->copy_in and copy_out calls */
	/* Requests taken by the loop's poller rather than after a
	 * notification (tapdisk --poll-us). */
	uint64_t polled_reqs;
};

/*
 * One ring of a frontend that opened several (multi-queue), as "stats"
 * shows it: its counters, the requests it holds now, and the
 * notifications the frontend sent on it (counted by the transport).
 */
struct blkif_queue_report {
	uint32_t queue;
	uint64_t in_flight;
	uint64_t kicks;
	struct blkif_ring_stats ring;
};

/*
 * A ring's counters for "tap-ctl stats" (blkif-report.c): text lines, and
 * a JSON object "ring" added to the object that is open.
 */
void blkif_ring_report_text(const struct blkif_ring_stats *ring,
			    struct td_strbuf *sb);
void blkif_ring_report_json(const struct blkif_ring_stats *ring,
			    struct td_json *j);
/*
 * The rings of a frontend one by one: a line each, and a JSON array
 * "queues" of objects added to the object that is open.
 */
void blkif_queue_report_text(const struct blkif_queue_report *q, uint32_t n,
			     struct td_strbuf *sb);
void blkif_queue_report_json(const struct blkif_queue_report *q, uint32_t n,
			     struct td_json *j);
/*
 * The same as Prometheus families tapstripe_ring_* (doc/metrics.md), each
 * sample labelled {labels,frontend="FRONTEND",ring="N"}; nothing when n
 * is 0.
 */
void blkif_queue_report_metrics(const struct blkif_queue_report *q, uint32_t n,
				const char *labels, const char *frontend,
				struct td_strbuf *sb);
/* Requests of every operation in ring. */
uint64_t blkif_ring_stats_requests(const struct blkif_ring_stats *ring);
/* Add every counter of s to *sum (all are uint64_t). */
void blkif_ring_stats_add(struct blkif_ring_stats *sum,
			  const struct blkif_ring_stats *s);
/* Add q's counters, kicks and in_flight to *sum (its queue untouched). */
void blkif_queue_report_add(struct blkif_queue_report *sum,
			    const struct blkif_queue_report *q);

/*
 * Attach to a shared ring the frontend has initialised (SHARED_RING_INIT)
 * and start serving it with vbd, which must outlive the ring.  Returns 0
 * and *out, or -EINVAL (bad order, protocol, ops or config; logged) or
 * -ENOMEM.  The caller keeps sring and the segment memory mapped until
 * blkif_ring_stop() or blkif_ring_destroy().
 */
int blkif_ring_create(struct td_vbd *vbd, const struct blkif_config *cfg,
		      const struct blkif_ring_params *params,
		      struct blkif_ring **out);

/*
 * The frontend signalled: take every request on the ring, then re-arm
 * req_event (RING_FINAL_CHECK_FOR_REQUESTS) so that a request produced
 * after the last look brings a new signal.  Does nothing on a stopped or
 * dead ring.
 */
void blkif_ring_kick(struct blkif_ring *ring);

/*
 * Stop touching the shared ring (the transport may unmap it once this
 * returns; the segment memory must stay until cb runs).  I/O already
 * submitted completes without a response; cb(ring, opaque) then runs once,
 * from the event loop.  Returns -EALREADY when already stopped.
 */
typedef void (*blkif_drained_cb)(struct blkif_ring *ring, void *opaque);
int blkif_ring_stop(struct blkif_ring *ring, blkif_drained_cb cb, void *opaque);

/*
 * Stop taking requests but answer every one already taken; cb(ring,
 * opaque) runs once, from the event loop, when the last response is
 * pushed.  The shared ring is then consistent (rsp_prod == req_cons) and
 * the requests still on it are untouched: another backend can resume it
 * (blkif_ring_params.resume).  The transport keeps the ring mapped and its
 * notifications working until cb.  Returns -EALREADY when already stopped
 * or quiescing.  blkif_ring_stop() still works on a quiescing ring (the
 * frontend went away meanwhile): no more responses, the same cb.
 */
int blkif_ring_quiesce(struct blkif_ring *ring, blkif_drained_cb cb,
		       void *opaque);

/* Free the ring.  Returns -EBUSY while a request is in flight. */
int blkif_ring_destroy(struct blkif_ring *ring);

/* Slots of the ring: 32 << ring_order. */
uint32_t blkif_ring_size(const struct blkif_ring *ring);
/* True once the ring was given up for a protocol error. */
bool blkif_ring_dead(const struct blkif_ring *ring);
void blkif_ring_get_stats(const struct blkif_ring *ring,
			  struct blkif_ring_stats *out);
/* Requests taken off the ring and not answered yet. */
uint32_t blkif_ring_in_flight(const struct blkif_ring *ring);

#endif
