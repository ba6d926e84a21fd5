/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blkif-parse.c - one blkif request: validate the private copy, plan the
 * vbd I/Os it becomes, build its iovecs.
 *
 * Input is hostile.  Everything here reads the caller's private copy of
 * the ring slot (and of the indirect pages, copied by the transport into
 * the slot's buffer), never the shared ring, so a frontend that rewrites a
 * slot while we look at it changes nothing.  Every count is checked
 * against its bound and every range against the disk before it is used,
 * and no transport op runs before the numbers are known to be sane.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frontends/blkif/blkif-int.h"

#define REJECT_MSG_MAX 160

/* Log why a request is refused (rate-limited per vbd) and count it. */
static int16_t __attribute__((format(printf, 5, 6)))
refuse(const char *func, struct blkif_ring *ring, const struct blkif_slot *slot,
       int16_t status, const char *fmt, ...)
{
	char why[REJECT_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (status == BLKIF_RSP_EOPNOTSUPP)
		ring->stats.unsupported++;
	else
		ring->stats.bad_reqs++;
	td_log(TD_LOG_WARN, func, td_vbd_name(ring->vbd),
	       td_vbd_ratelimit(ring->vbd),
	       "queue %" PRIu32 ": request id %#" PRIx64 " op %u: %s",
	       ring->queue, slot->id, slot->operation, why);
	return status;
}

/* Log (as the calling function) and count a refusal; returns the status. */
#define reject(ring, slot, ...) \
	refuse(__func__, ring, slot, BLKIF_RSP_ERROR, __VA_ARGS__)
#define unsupported(ring, slot, ...) \
	refuse(__func__, ring, slot, BLKIF_RSP_EOPNOTSUPP, __VA_ARGS__)

static void plan(struct blkif_slot *slot, enum td_op op, uint32_t flags)
{
	slot->stages[slot->nr_stages].op = op;
	slot->stages[slot->nr_stages].flags = flags;
	slot->nr_stages++;
}

/* [sector, sector + nr) must lie inside the disk; no sum can overflow. */
static int16_t check_range(struct blkif_ring *ring,
			   const struct blkif_slot *slot, uint64_t sector,
			   uint64_t nr)
{
	uint64_t size = td_vbd_get_info(ring->vbd)->size_sectors;

	if (sector > size || nr > size - sector)
		return reject(ring, slot,
			      "sectors %" PRIu64 " + %" PRIu64
			      " run past the end of the disk (%" PRIu64 ")",
			      sector, nr, size);
	return BLKIF_RSP_OKAY;
}

/* Second pass, numbers known good: ask the transport for each page. */
static int16_t map_segments(struct blkif_ring *ring, struct blkif_slot *slot,
			    const struct blkif_request_segment *segs,
			    enum blkif_map_access access)
{
	struct iovec *iov = slot->iov;
	int n = 0;

	for (uint32_t i = 0; i < slot->nr_segments; i++) {
		uint32_t off = (uint32_t)segs[i].first_sect << TD_SECTOR_SHIFT;
		uint32_t len =
			(uint32_t)(segs[i].last_sect - segs[i].first_sect + 1)
			<< TD_SECTOR_SHIFT;
		void *addr = NULL;
		int err = ring->ops->map_segment(ring->opaque, segs[i].gref,
						 off, len, access, &addr);

		if (err)
			return reject(ring, slot,
				      "segment %" PRIu32 ": page %" PRIu32
				      " refused by the transport (%d)",
				      i, segs[i].gref, err);
		/* Pages adjacent in our memory make one iovec. */
		if (n && (char *)iov[n - 1].iov_base + iov[n - 1].iov_len ==
				 (char *)addr)
			iov[n - 1].iov_len += len;
		else
			iov[n++] = (struct iovec){addr, len};
	}
	slot->iovcnt = n;
	return BLKIF_RSP_OKAY;
}

/* Check nr segments (nr already bounded by the caller) and map them. */
static int16_t parse_segments(struct blkif_ring *ring, struct blkif_slot *slot,
			      const struct blkif_request_segment *segs,
			      uint32_t nr, uint64_t sector,
			      enum blkif_map_access access)
{
	uint64_t sectors = 0;
	int16_t status;

	for (uint32_t i = 0; i < nr; i++) {
		uint8_t first = segs[i].first_sect, last = segs[i].last_sect;

		if (first > last || last >= BLKIF_SECTORS_PER_PAGE)
			return reject(ring, slot,
				      "segment %" PRIu32 ": sectors %u..%u "
				      "not inside 0..%u",
				      i, first, last,
				      BLKIF_SECTORS_PER_PAGE - 1);
		sectors += (uint64_t)(last - first + 1);
	}
	status = check_range(ring, slot, sector, sectors);
	if (status != BLKIF_RSP_OKAY)
		return status;
	slot->sector = sector;
	slot->nr_sectors = sectors;
	slot->nr_segments = nr;
	return map_segments(ring, slot, segs, access);
}

/* READ, WRITE, WRITE_BARRIER and FLUSH_DISKCACHE: up to 11 segments. */
static int16_t parse_direct(struct blkif_ring *ring,
			    const struct blkif_request *req,
			    struct blkif_slot *slot)
{
	uint8_t op = req->operation;
	uint32_t nr = req->nr_segments;
	bool fua = td_vbd_get_info(ring->vbd)->features & TD_FEAT_FUA;

	ring->stats.reqs[op]++;
	if (nr > BLKIF_MAX_SEGMENTS_PER_REQUEST)
		return reject(ring, slot, "%" PRIu32 " segments, more than %u",
			      nr, BLKIF_MAX_SEGMENTS_PER_REQUEST);
	if (!nr && (op == BLKIF_OP_READ || op == BLKIF_OP_WRITE))
		return reject(ring, slot, "no segment");
	if (op == BLKIF_OP_READ) {
		plan(slot, TD_OP_READ, 0);
		return parse_segments(ring, slot, req->seg, nr,
				      req->sector_number, BLKIF_MAP_RW);
	}
	if (nr && ring->read_only)
		return reject(ring, slot, "write to a read-only disk");
	if (op == BLKIF_OP_WRITE_BARRIER || op == BLKIF_OP_FLUSH_DISKCACHE)
		plan(slot, TD_OP_FLUSH, 0);
	slot->barrier = op == BLKIF_OP_WRITE_BARRIER;
	if (!nr)
		return BLKIF_RSP_OKAY;
	if (op == BLKIF_OP_WRITE_BARRIER && fua) {
		plan(slot, TD_OP_WRITE, TD_REQ_FUA);
	} else {
		plan(slot, TD_OP_WRITE, 0);
		if (op == BLKIF_OP_WRITE_BARRIER)
			plan(slot, TD_OP_FLUSH, 0);
	}
	return parse_segments(ring, slot, req->seg, nr, req->sector_number,
			      BLKIF_MAP_RO);
}

static int16_t parse_discard(struct blkif_ring *ring,
			     const struct blkif_request *req,
			     struct blkif_slot *slot)
{
	struct blkif_request_discard d;
	int16_t status;

	memcpy(&d, req, sizeof(d));
	ring->stats.reqs[BLKIF_OP_DISCARD]++;
	if (d.flag & ~BLKIF_DISCARD_SECURE)
		return reject(ring, slot, "unknown discard flags %#x", d.flag);
	if (ring->read_only)
		return reject(ring, slot, "discard on a read-only disk");
	if ((d.flag & BLKIF_DISCARD_SECURE) && !ring->secure_discard)
		return unsupported(ring, slot, "secure discard not offered");
	if (!d.nr_sectors)
		return reject(ring, slot, "discard of no sector");
	status = check_range(ring, slot, d.sector_number, d.nr_sectors);
	if (status != BLKIF_RSP_OKAY)
		return status;
	if (d.flag & BLKIF_DISCARD_SECURE)
		plan(slot, TD_OP_WRITE_ZEROES, TD_REQ_NO_HOLE);
	else
		plan(slot, TD_OP_DISCARD, 0);
	slot->sector = d.sector_number;
	slot->nr_sectors = d.nr_sectors;
	return BLKIF_RSP_OKAY;
}

/* Copy the indirect pages nr segments need into the slot's buffer. */
static int16_t copy_indirect_pages(struct blkif_ring *ring,
				   struct blkif_slot *slot,
				   const struct blkif_request_indirect *ind,
				   uint32_t nr)
{
	uint32_t pages = (nr + BLKIF_SEGS_PER_INDIRECT_PAGE - 1) /
			 BLKIF_SEGS_PER_INDIRECT_PAGE;

	if (pages > BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST)
		return reject(ring, slot,
			      "%" PRIu32 " indirect pages, more than %u", pages,
			      BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST);
	for (uint32_t p = 0; p < pages; p++) {
		uint32_t first = p * BLKIF_SEGS_PER_INDIRECT_PAGE;
		uint32_t count = nr - first < BLKIF_SEGS_PER_INDIRECT_PAGE
					 ? nr - first
					 : BLKIF_SEGS_PER_INDIRECT_PAGE;
		int err = ring->ops->copy_indirect(
			ring->opaque, ind->indirect_grefs[p],
			&slot->ibuf->segs[first],
			count * sizeof(struct blkif_request_segment));

		if (err)
			return reject(ring, slot,
				      "indirect page %" PRIu32 " of %" PRIu32
				      " (page %" PRIu32 ") refused by the "
				      "transport (%d)",
				      p, pages, ind->indirect_grefs[p], err);
	}
	return BLKIF_RSP_OKAY;
}

static int16_t parse_indirect(struct blkif_ring *ring,
			      const struct blkif_request *req,
			      struct blkif_slot *slot)
{
	struct blkif_request_indirect ind;
	uint32_t nr;
	int16_t status;

	memcpy(&ind, req, sizeof(ind));
	nr = ind.nr_segments;
	/* blkfront matches responses by the operation it did, not by 6. */
	slot->operation = ind.indirect_op;
	ring->stats.indirect_reqs++;
	if (ind.indirect_op != BLKIF_OP_READ &&
	    ind.indirect_op != BLKIF_OP_WRITE) {
		ring->stats.reqs[BLKIF_STAT_OP_OTHER]++;
		return reject(ring, slot,
			      "indirect_op %u is neither read nor write",
			      ind.indirect_op);
	}
	ring->stats.reqs[ind.indirect_op]++;
	if (ind.indirect_op == BLKIF_OP_WRITE && ring->read_only)
		return reject(ring, slot, "write to a read-only disk");
	if (!ring->max_indirect_segments)
		return unsupported(ring, slot, "indirect requests not offered");
	if (!nr || nr > ring->max_indirect_segments)
		return reject(ring, slot,
			      "%" PRIu32
			      " indirect segments, not in 1..%" PRIu32,
			      nr, ring->max_indirect_segments);
	status = copy_indirect_pages(ring, slot, &ind, nr);
	if (status != BLKIF_RSP_OKAY)
		return status;
	slot->iov = slot->ibuf->iov;
	plan(slot, ind.indirect_op == BLKIF_OP_READ ? TD_OP_READ : TD_OP_WRITE,
	     0);
	return parse_segments(
		ring, slot, slot->ibuf->segs, nr, ind.sector_number,
		ind.indirect_op == BLKIF_OP_READ ? BLKIF_MAP_RW : BLKIF_MAP_RO);
}

size_t blkif_max_data_bytes(const struct blkif_ring *ring,
			    const struct blkif_request *req)
{
	uint32_t nr = req->nr_segments;

	switch (req->operation) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
	case BLKIF_OP_WRITE_BARRIER:
	case BLKIF_OP_FLUSH_DISKCACHE:
		if (nr > BLKIF_MAX_SEGMENTS_PER_REQUEST)
			nr = BLKIF_MAX_SEGMENTS_PER_REQUEST;
		break;
	case BLKIF_OP_INDIRECT:
		nr = ((const struct blkif_request_indirect *)req)->nr_segments;
		if (nr > ring->max_indirect_segments)
			nr = ring->max_indirect_segments;
		break;
	default:
		nr = 0;
		break;
	}
	return (size_t)nr * BLKIF_PAGE_SIZE;
}

bool blkif_wants_ibuf(const struct blkif_ring *ring,
		      const struct blkif_request *req)
{
	return req->operation == BLKIF_OP_INDIRECT &&
	       ring->max_indirect_segments;
}

static void slot_reset(struct blkif_slot *slot, const struct blkif_request *req)
{
	/* id sits at the same offset in all three request layouts. */
	slot->id = req->id;
	slot->operation = req->operation;
	slot->status = BLKIF_RSP_OKAY;
	slot->barrier = false;
	slot->nr_stages = 0;
	slot->stage = 0;
	slot->sector = 0;
	slot->nr_sectors = 0;
	slot->done_sectors = 0;
	slot->iov = slot->iov_direct;
	slot->iovcnt = 0;
	slot->nr_segments = 0;
}

int16_t blkif_parse_request(struct blkif_ring *ring,
			    const struct blkif_request *req,
			    struct blkif_slot *slot)
{
	int16_t status;

	slot_reset(slot, req);
	switch (req->operation) {
	case BLKIF_OP_READ:
	case BLKIF_OP_WRITE:
	case BLKIF_OP_WRITE_BARRIER:
	case BLKIF_OP_FLUSH_DISKCACHE:
		status = parse_direct(ring, req, slot);
		break;
	case BLKIF_OP_DISCARD:
		status = parse_discard(ring, req, slot);
		break;
	case BLKIF_OP_INDIRECT:
		status = parse_indirect(ring, req, slot);
		break;
	default:
		ring->stats.reqs[BLKIF_STAT_OP_OTHER]++;
		return unsupported(ring, slot, "unknown operation");
	}
	if (status == BLKIF_RSP_OKAY)
		ring->stats.segments += slot->nr_segments;
	return status;
}
