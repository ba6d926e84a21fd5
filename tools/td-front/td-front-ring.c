/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-ring.c - the frontend library's I/O path: I/Os queued, cut into
 * blkif requests as blkfront cuts them, pushed in batches; responses
 * taken and matched to their I/O through the ring slot's shadow.
 *
 * A request's id is its shadow's index, so a response that names a slot
 * with no request in it (a confused or hostile backend) is caught, and
 * the device refuses all further work (-EPROTO) rather than complete an
 * I/O twice.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "tools/td-front/td-front-int.h"

#define TDF_KICK_VALUE 1
#define TDF_LAST_SECT  (TDF_PAGE_SIZE / TDF_SECTOR_SIZE - 1)

static uint32_t div_up(uint32_t a, uint32_t b)
{
	return a / b + (a % b != 0);
}

int tdf_ring_init(struct tdf_ring *r)
{
	uint32_t n = RING_SIZE(&r->front);

	r->shadow = calloc(n, sizeof(*r->shadow));
	if (!r->shadow)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		r->shadow[i].next_free = i + 1;
	r->free_head = 0;
	return 0;
}

uint32_t tdf_split(uint32_t len, uint32_t max_segments,
		   struct tdf_piece *pieces, uint32_t max_pieces)
{
	uint32_t chunk = max_segments * TDF_PAGE_SIZE, off = 0, n = 0;

	while (off < len) {
		uint32_t piece = len - off < chunk ? len - off : chunk;
		uint32_t segs = div_up(piece, TDF_PAGE_SIZE);

		if (n < max_pieces)
			pieces[n] = (struct tdf_piece){
				.offset = off,
				.len = piece,
				.segments = segs,
				.indirect = segs > TDF_DIRECT_SEGMENTS,
			};
		n++;
		off += piece;
	}
	return n;
}

/* --- submitting --------------------------------------------------------------- */

static int check_range(const struct tdf_dev *dev, const struct tdf_io *io)
{
	uint32_t align = dev->info.backend.sector_size;

	if (!io->len || io->offset % align || io->len % align)
		return -EINVAL;
	if (io->offset > dev->info.size_bytes ||
	    io->len > dev->info.size_bytes - io->offset)
		return -ERANGE;
	return 0;
}

static int check_io(const struct tdf_dev *dev, const struct tdf_io *io)
{
	const struct shm_backend_msg *b = &dev->info.backend;
	bool ro = b->info & SHM_INFO_READONLY;

	if (!io->cb || io->queue >= dev->info.nr_queues)
		return -EINVAL;
	switch (io->op) {
	case TDF_OP_READ:
	case TDF_OP_WRITE:
		if (io->op == TDF_OP_WRITE && ro)
			return -EROFS;
		if (io->page > dev->info.data_pages ||
		    div_up(io->len, TDF_PAGE_SIZE) >
			    dev->info.data_pages - io->page)
			return -EINVAL;
		return check_range(dev, io);
	case TDF_OP_FLUSH:
		return !b->flush_cache ? -EOPNOTSUPP : io->len ? -EINVAL : 0;
	case TDF_OP_DISCARD:
		if (!b->discard)
			return -EOPNOTSUPP;
		return ro ? -EROFS : check_range(dev, io);
	default:
		return -EINVAL;
	}
}

int tdf_submit(struct tdf_dev *dev, struct tdf_io *io)
{
	int err;

	if (dev->broken)
		return -EPROTO;
	if ((err = check_io(dev, io)))
		return err;
	io->issued = 0;
	io->requests = 0;
	io->pending = 0;
	io->error = 0;
	TAILQ_INSERT_TAIL(&dev->rings[io->queue].queue, io, link);
	return 0;
}

static bool all_issued(const struct tdf_io *io)
{
	if (io->op == TDF_OP_READ || io->op == TDF_OP_WRITE)
		return io->issued == io->len;
	return io->requests == 1;
}

/* The next piece of a READ or WRITE, at ring slot id. */
static void fill_rw(struct tdf_ring *r, struct tdf_io *io, uint32_t id,
		    blkif_request_t *req)
{
	struct tdf_dev *dev = r->dev;
	uint32_t chunk = dev->info.max_segments * TDF_PAGE_SIZE;
	uint32_t piece =
		io->len - io->issued < chunk ? io->len - io->issued : chunk;
	uint32_t segs = div_up(piece, TDF_PAGE_SIZE);
	uint32_t page = io->page + io->issued / TDF_PAGE_SIZE;
	uint8_t op = io->op == TDF_OP_READ ? BLKIF_OP_READ : BLKIF_OP_WRITE;
	uint8_t last =
		(uint8_t)(((piece - 1) % TDF_PAGE_SIZE) / TDF_SECTOR_SIZE);
	uint64_t sector = (io->offset + io->issued) / TDF_SECTOR_SIZE;
	struct blkif_request_segment *seg = req->seg;

	if (segs > TDF_DIRECT_SEGMENTS) {
		blkif_request_indirect_t *ind = (blkif_request_indirect_t *)req;
		uint32_t desc = dev->info.data_pages + id * dev->pages_per_ibuf;

		ind->operation = BLKIF_OP_INDIRECT;
		ind->indirect_op = op;
		ind->nr_segments = (uint16_t)segs;
		ind->sector_number = sector;
		ind->handle = 0;
		for (uint32_t p = 0;
		     p < div_up(segs, TDF_SEGS_PER_INDIRECT_PAGE); p++)
			ind->indirect_grefs[p] = desc + p;
		/* The slot's descriptor pages are consecutive. */
		seg = (struct blkif_request_segment *)(r->pool +
						       (size_t)desc *
							       TDF_PAGE_SIZE);
		dev->stats.indirect_requests++;
	} else {
		req->operation = op;
		req->nr_segments = (uint8_t)segs;
		req->handle = 0;
		req->sector_number = sector;
	}
	for (uint32_t i = 0; i < segs; i++)
		seg[i] = (struct blkif_request_segment){
			.gref = page + i,
			.first_sect = 0,
			.last_sect = i + 1 == segs ? last : TDF_LAST_SECT,
		};
	io->issued += piece;
	dev->stats.segments += segs;
}

/* Put io's next request on the ring (which has room). */
static void make_request(struct tdf_ring *r, struct tdf_io *io)
{
	uint32_t id = r->free_head;
	blkif_request_t *req =
		RING_GET_REQUEST(&r->front, r->front.req_prod_pvt);

	r->free_head = r->shadow[id].next_free;
	r->shadow[id].io = io;
	r->inflight++;
	memset(req, 0, sizeof(*req));
	if (io->op == TDF_OP_FLUSH) {
		req->operation = BLKIF_OP_FLUSH_DISKCACHE;
	} else if (io->op == TDF_OP_DISCARD) {
		blkif_request_discard_t *d = (blkif_request_discard_t *)req;

		d->operation = BLKIF_OP_DISCARD;
		d->sector_number = io->offset / TDF_SECTOR_SIZE;
		d->nr_sectors = io->len / TDF_SECTOR_SIZE;
		io->issued = io->len;
	} else {
		fill_rw(r, io, id, req);
	}
	req->id = id; /* the same place in every layout */
	r->front.req_prod_pvt++;
	io->requests++;
	io->pending++;
	r->dev->stats.requests++;
}

static int ring_kick(struct tdf_ring *r)
{
	struct tdf_dev *dev = r->dev;
	uint64_t one = TDF_KICK_VALUE;
	struct tdf_io *io;
	int pushed = 0, notify;

	while ((io = TAILQ_FIRST(&r->queue)) && !RING_FULL(&r->front)) {
		make_request(r, io);
		pushed++;
		if (all_issued(io))
			TAILQ_REMOVE(&r->queue, io, link);
	}
	if (!pushed)
		return 0;
	dev->stats.pushes++;
	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&r->front, notify);
	if (notify) {
		/* EAGAIN: the counter is full, a kick is pending anyway. */
		if (write(r->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			return -errno;
		dev->stats.kicks++;
	}
	return pushed;
}

int tdf_kick(struct tdf_dev *dev)
{
	int pushed = 0;

	if (dev->broken)
		return -EPROTO;
	for (uint32_t q = 0; q < dev->info.nr_queues; q++) {
		int n = ring_kick(&dev->rings[q]);

		if (n < 0)
			return n;
		pushed += n;
	}
	return pushed;
}

/* --- completing ------------------------------------------------------------------ */

static int take_response(struct tdf_ring *r, const blkif_response_t *rsp)
{
	struct tdf_dev *dev = r->dev;
	struct tdf_shadow *sh;
	struct tdf_io *io;

	if (rsp->id >= RING_SIZE(&r->front) || !r->shadow[rsp->id].io) {
		dev->broken = true;
		return -EPROTO;
	}
	sh = &r->shadow[rsp->id];
	io = sh->io;
	sh->io = NULL;
	sh->next_free = r->free_head;
	r->free_head = (uint32_t)rsp->id;
	r->inflight--;
	if (rsp->status != BLKIF_RSP_OKAY) {
		dev->stats.errors++;
		if (!io->error)
			io->error = rsp->status == BLKIF_RSP_EOPNOTSUPP
					    ? -EOPNOTSUPP
					    : -EIO;
	}
	if (--io->pending || !all_issued(io))
		return 0;
	dev->stats.ios++;
	io->cb(io, io->error); /* may submit */
	return 1;
}

/*
 * Take the responses ring r has; with arm, ask for a notification
 * (rsp_event) and look once more, as blkfront does before it sleeps.
 */
static int ring_take(struct tdf_ring *r, bool arm)
{
	int done = 0, more;

	do {
		RING_IDX prod = *(volatile RING_IDX *)&r->front.sring->rsp_prod;

		xen_rmb(); /* the responses up to prod are read after it */
		if (prod - r->front.rsp_cons >
		    r->front.req_prod_pvt - r->front.rsp_cons) {
			r->dev->broken = true;
			return -EPROTO; /* more responses than requests */
		}
		while (r->front.rsp_cons != prod) {
			blkif_response_t rsp;
			int n;

			memcpy(&rsp,
			       RING_GET_RESPONSE(&r->front, r->front.rsp_cons),
			       sizeof(rsp));
			r->front.rsp_cons++;
			if ((n = take_response(r, &rsp)) < 0)
				return n;
			done += n;
		}
		if (!arm)
			return done;
		RING_FINAL_CHECK_FOR_RESPONSES(&r->front, more);
	} while (more);
	return done;
}

/* Every ring's responses (ring_take); -EPROTO once one broke. */
static int take_responses(struct tdf_dev *dev, bool arm)
{
	int done = 0;

	if (dev->broken)
		return -EPROTO;
	for (uint32_t q = 0; q < dev->info.nr_queues; q++) {
		int n = ring_take(&dev->rings[q], arm);

		if (n < 0)
			return n;
		done += n;
	}
	return done;
}

int tdf_poll(struct tdf_dev *dev)
{
	return take_responses(dev, true);
}

/* A hint to the CPU that this is a spin loop (none where there is none). */
static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/*
 * After a spin, once a period: measure the CPU the thread got while it
 * wanted one (common/poll-gate.h); a contended CPU closes the gate.
 */
static void poll_gate_measure(struct tdf_dev *dev, uint64_t now)
{
	if (td_poll_gate_due(&dev->gate, now) &&
	    td_poll_gate_measure(&dev->gate, now, td_thread_cpu_ns(),
				 dev->slept_ns, td_host_runnable()))
		dev->stats.poll_backoffs++;
}

/*
 * Spin on every ring's rsp_prod for the adaptive window (from now_ns),
 * unless it is 0 or the gate is closed: the I/Os completed, or 0.
 */
static int poll_responses(struct tdf_dev *dev, uint64_t now)
{
	uint64_t end = now + (uint64_t)dev->window_us * 1000;
	int n = 0;

	if (!dev->window_us || !td_poll_gate_open(&dev->gate, now))
		return 0;
	do {
		if ((n = take_responses(dev, false))) {
			dev->stats.poll_hits += n > 0;
			break;
		}
		spin_pause();
	} while ((now = td_now_ns()) < end);
	poll_gate_measure(dev, n ? td_now_ns() : now);
	return n;
}

/*
 * The socket became readable: the disk grew ("resized", taken), the
 * backend closed, or it spoke out of turn.
 */
static int check_socket(struct tdf_dev *dev)
{
	char why[TDF_WHY_MAX];
	int err = tdf_wait_resize(dev, 0, why, sizeof(why));

	if (!err || err == -ETIMEDOUT) /* a notice, or half of one */
		return 0;
	if (err == -ECONNRESET)
		return err;
	dev->broken = true;
	return -EPROTO;
}

/*
 * A wait that started at t0 ended, with got responses: the window adapts
 * to it, as tapdisk's loop does to its sleeps.  A response that comes
 * later than the budget (a 1 MiB write, say), or none within it, shrinks
 * the spin to nothing, and td-front then sleeps at once instead of
 * holding a CPU the backend may have been woken onto.  A wake-up that
 * brought nothing (a signal, the socket) says nothing about the backend.
 */
static void poll_adapt(struct tdf_dev *dev, uint64_t t0, int got)
{
	uint64_t waited = td_now_ns() - t0;

	if (got > 0 || waited > (uint64_t)dev->poll_us * 1000)
		dev->window_us = td_poll_window_next(dev->window_us,
						     dev->poll_us, waited);
}

/* Every ring's notify eventfd, then the socket (last). */
int tdf_wait(struct tdf_dev *dev, int timeout_ms)
{
	struct pollfd pfd[SHM_MAX_QUEUES + 1];
	uint32_t nq = dev->info.nr_queues;
	uint64_t count, t0 = dev->poll_us ? td_now_ns() : 0, s0;
	int rc, n = dev->poll_us ? poll_responses(dev, t0) : 0;

	if (!n)
		n = tdf_poll(dev);
	if (n && dev->poll_us)
		poll_adapt(dev, t0, n);
	if (n || !tdf_inflight(dev))
		return n;
	for (uint32_t q = 0; q < nq; q++)
		pfd[q] = (struct pollfd){.fd = dev->rings[q].notify_fd,
					 .events = POLLIN};
	pfd[nq] = (struct pollfd){.fd = dev->sock, .events = POLLIN};
	s0 = dev->poll_us ? td_now_ns() : 0;
	rc = poll(pfd, nq + 1, timeout_ms);
	if (dev->poll_us)
		dev->slept_ns += td_now_ns() - s0;
	if (rc < 0) {
		if (errno != EINTR)
			return -errno;
		if (dev->poll_us)
			poll_adapt(dev, t0, 0);
		return 0;
	}
	for (uint32_t q = 0; q < nq; q++) {
		if (!(pfd[q].revents & POLLIN))
			continue;
		/* Non-blocking (the backend's flag); EAGAIN is harmless. */
		(void)!read(dev->rings[q].notify_fd, &count, sizeof(count));
		dev->stats.wakeups++;
	}
	n = tdf_poll(dev);
	if (dev->poll_us)
		poll_adapt(dev, t0, n);
	if (n || !pfd[nq].revents)
		return n;
	return check_socket(dev);
}

uint32_t tdf_inflight(const struct tdf_dev *dev)
{
	uint32_t n = 0;

	for (uint32_t q = 0; q < dev->info.nr_queues; q++)
		n += dev->rings[q].inflight;
	return n;
}
