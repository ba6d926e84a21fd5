/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-int.h - what the frontend library's connection half
 * (td-front-lib.c: negotiation, mapping) and its I/O half
 * (td-front-ring.c: requests, responses) share.  Not for other files.
 */
#ifndef TAPSTRIPE_TD_FRONT_INT_H
#define TAPSTRIPE_TD_FRONT_INT_H

#include "common/poll-gate.h"
#include "frontends/blkif/xen-ring.h"
#include "tools/td-front/td-front-lib.h"

/* Segment descriptors in one indirect page: 512. */
#define TDF_SEGS_PER_INDIRECT_PAGE \
	(TDF_PAGE_SIZE / sizeof(struct blkif_request_segment))

TAILQ_HEAD(tdf_io_list, tdf_io);

/* One ring slot's request, from its push until its response. */
struct tdf_shadow {
	struct tdf_io *io; /* NULL: the slot is free */
	uint32_t next_free;
};

/*
 * One ring of the device (a "queue", as xenbus calls it), with its own
 * pool, eventfds and slots; a device has info.nr_queues of them.
 */
struct tdf_ring {
	struct tdf_dev *dev;
	int kick_fd, notify_fd;
	void *sring;
	size_t ring_bytes;
	unsigned char *pool;
	size_t pool_bytes;
	blkif_front_ring_t front;

	struct tdf_shadow *shadow; /* ring_slots of them */
	uint32_t free_head;	   /* first free shadow, ring_slots: none */
	uint32_t inflight;

	struct tdf_io_list queue; /* submitted, not wholly on the ring */
};

struct tdf_dev {
	struct tdf_info info;
	int sock;
	uint32_t pages_per_ibuf;  /* indirect descriptor pages per slot */
	bool broken;		  /* -EPROTO seen: refuse everything */
	uint32_t poll_us;	  /* tdf_config.poll_us: the budget */
	uint32_t window_us;	  /* the spin now (td_poll_window_next) */
	struct td_poll_gate gate; /* the spin's back-off */
	uint64_t slept_ns;	  /* time blocked in poll() */
	struct tdf_stats stats;	  /* over every ring */
	struct tdf_ring rings[SHM_MAX_QUEUES];
};

/* td-front-ring.c: set up the shadows once the ring is mapped. */
int tdf_ring_init(struct tdf_ring *r);

#endif
