/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vbd.c - request lifecycle: validate, split, submit, complete once.
 *
 * Memory: one pool of requests per chain layer, allocated at open.  A
 * request's driver state and its iovec slab sit in two arrays beside it.
 * Completions go through a done list drained by one deferred call, so no
 * completion ever runs inside the stack of the call that submitted it.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapdisk/vbd-int.h"

static struct td_request *pool_get(struct vbd_pool *pool)
{
	struct td_request *req = pool->free;

	if (!req)
		return NULL;
	pool->free = req->next;
	pool->nr_free--;
	req->next = NULL;
	req->iov = req->iov_slab;
	req->iovcnt = 0;
	req->flags = 0;
	req->cb = NULL;
	req->cb_opaque = NULL;
	req->error = 0;
	req->completing = false;
	req->timed_io = NULL;
	return req;
}

static void pool_put(struct vbd_pool *pool, struct td_request *req)
{
	req->drv = NULL;
	req->next = pool->free;
	pool->free = req;
	pool->nr_free++;
}

static void req_put(struct td_request *req)
{
	pool_put(req->pool, req);
}

/* --- completion ------------------------------------------------------------ */

static void vbd_kick(struct td_vbd *vbd);

/*
 * Completions that callbacks produce (a filter completing its own request
 * when the lower one finishes) are run in the same pass, up to this many
 * rounds, so a chain of N layers costs one pass, not N; the bound keeps a
 * driver that completes inline from starving the fds.
 */
#define VBD_DONE_ROUNDS 4

static void vbd_run_done(struct td_defer *d, void *opaque)
{
	struct td_vbd *vbd = opaque;

	vbd->in_done = true;
	for (int round = 0; round < VBD_DONE_ROUNDS && vbd->done_head;
	     round++) {
		struct td_request *req = vbd->done_head;

		vbd->done_head = NULL;
		vbd->done_tail = &vbd->done_head;
		while (req) {
			struct td_request *next = req->next;

			req->cb(req, req->error, req->cb_opaque);
			req_put(req);
			req = next;
		}
	}
	vbd->in_done = false;
	/* Whatever is left was queued again by vbd_queue_done. */
	if (!vbd->done_head)
		td_loop_defer_cancel(vbd->loop, &vbd->done_defer);
	vbd_kick(vbd);
}

static void vbd_queue_done(struct td_vbd *vbd, struct td_request *req, int err)
{
	req->completing = true;
	req->error = err;
	req->next = NULL;
	*vbd->done_tail = req;
	vbd->done_tail = &req->next;
	td_loop_defer(vbd->loop, &vbd->done_defer, vbd_run_done, vbd);
}

void td_complete(struct td_request *req, int err)
{
	struct td_vbd *vbd = req->vbd;

	if (req->completing) {
		td_vbd_err(vbd, "driver %s completed a request twice (ignored)",
			   req->drv->ops->name);
		return;
	}
	if (err > 0) {
		td_vbd_err(vbd, "driver %s completed with positive error %d",
			   req->drv->ops->name, err);
		err = -EIO;
	}
	if (req->timed_io)
		vbd_stages_reaped(vbd, req->timed_io);
	vbd_queue_done(vbd, req, err);
}

static void vbd_submit_req(struct td_vbd *vbd, struct td_driver *drv,
			   struct td_request *req)
{
	int err;

	req->drv = drv;
	vbd->unplug_mask |= 1u << drv->layer;
	err = drv->ops->submit(drv, req);
	if (err) {
		if (req->completing) {
			td_vbd_err(vbd,
				   "driver %s failed a request it completed",
				   drv->ops->name);
			return;
		}
		vbd_queue_done(vbd, req, err < 0 ? err : -EIO);
	}
}

struct td_request *td_request_get(struct td_driver *filter)
{
	struct td_vbd *vbd = filter->vbd;

	if (!filter->lower)
		return NULL;
	return pool_get(&vbd->pools[filter->lower->layer]);
}

void td_request_put(struct td_request *req)
{
	req_put(req);
}

void td_forward(struct td_driver *filter, struct td_request *req,
		td_request_cb cb, void *opaque)
{
	req->cb = cb;
	req->cb_opaque = opaque;
	vbd_submit_req(filter->vbd, filter->lower, req);
}

void td_driver_stat_add(struct td_driver *drv, enum td_stat stat, uint64_t n)
{
	drv->vbd->stats.counters[stat] += n;
}

void vbd_unplug(struct td_hook *h, void *opaque)
{
	struct td_vbd *vbd = opaque;

	/* Top first: what a filter releases reaches the lower driver's batch. */
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (!(vbd->unplug_mask & (1u << i)))
			continue;
		vbd->unplug_mask &= ~(1u << i);
		if (drv->ops->unplug)
			drv->ops->unplug(drv);
	}
}

/* --- I/O: validate, split, complete ----------------------------------------- */

#define VBD_IO_FLAGS (TD_REQ_FUA | TD_REQ_NO_HOLE)

static int vbd_check_iov(const struct td_vbd_io *io, uint32_t align)
{
	uint64_t total = 0;

	if (!io->iov || io->iovcnt <= 0)
		return -EINVAL;
	for (int i = 0; i < io->iovcnt; i++) {
		size_t len = io->iov[i].iov_len;

		if (len % align || len > UINT32_MAX)
			return -EINVAL;
		if (len && !io->iov[i].iov_base)
			return -EINVAL;
		total += len; /* at most INT_MAX * 2^32: no overflow */
	}
	if (total != (uint64_t)io->nr_sectors << TD_SECTOR_SHIFT)
		return -EINVAL;
	return 0;
}

static int vbd_validate(const struct td_vbd *vbd, const struct td_vbd_io *io)
{
	const struct td_disk_info *info = &vbd->info;
	uint32_t align = info->sector_size >> TD_SECTOR_SHIFT; /* sectors */
	uint32_t need = 0;
	int err;

	if (!io->cb || (io->flags & ~VBD_IO_FLAGS))
		return -EINVAL;
	switch (io->op) {
	case TD_OP_READ:
	case TD_OP_WRITE:
		if ((err = vbd_check_iov(io, info->sector_size)))
			return err;
		break;
	case TD_OP_FLUSH:
		need = TD_FEAT_FLUSH;
		break;
	case TD_OP_DISCARD:
		need = TD_FEAT_DISCARD;
		break;
	case TD_OP_WRITE_ZEROES:
		need = TD_FEAT_WRITE_ZEROES;
		break;
	default:
		return -EINVAL;
	}
	if (io->op != TD_OP_READ && io->op != TD_OP_FLUSH && info->read_only)
		return -EROFS;
	if (need && !(info->features & need))
		return -EOPNOTSUPP;
	if ((io->flags & TD_REQ_FUA) &&
	    (!(info->features & TD_FEAT_FUA) ||
	     (io->op != TD_OP_WRITE && io->op != TD_OP_WRITE_ZEROES)))
		return io->op == TD_OP_WRITE ? -EOPNOTSUPP : -EINVAL;
	if (io->op == TD_OP_FLUSH)
		return 0;
	if (!io->nr_sectors || io->sector % align || io->nr_sectors % align)
		return -EINVAL;
	/* Written so that it cannot overflow: sector + nr <= size. */
	if (io->sector > info->size_sectors ||
	    io->nr_sectors > info->size_sectors - io->sector)
		return -ERANGE;
	return 0;
}

static uint64_t io_end(const struct td_vbd_io *io)
{
	return io->op == TD_OP_FLUSH ? 1 : io->sector + io->nr_sectors;
}

/* Sectors of the next piece, before the iovec capacity is applied. */
static uint32_t vbd_piece_sectors(const struct td_vbd *vbd,
				  const struct td_vbd_io *io)
{
	uint64_t left = io_end(io) - io->next_sector;
	uint64_t b = vbd->info.boundary_sectors;

	if (io->op == TD_OP_FLUSH)
		return 0;
	if (b) {
		uint64_t to_boundary = b - io->next_sector % b;

		if (to_boundary < left)
			left = to_boundary;
	}
	if ((io->op == TD_OP_READ || io->op == TD_OP_WRITE) &&
	    left > vbd->max_io_sectors)
		left = vbd->max_io_sectors;
	if (left > UINT32_MAX)
		left = UINT32_MAX & ~7u;
	return (uint32_t)left;
}

int vbd_iov_take(struct td_vbd_io *io, struct iovec *dst, int cap,
		 uint64_t bytes, uint64_t *out)
{
	uint64_t mapped = 0;
	int n = 0;

	while (mapped < bytes && n < cap && io->iov_idx < io->iovcnt) {
		const struct iovec *src = &io->iov[io->iov_idx];
		size_t avail = src->iov_len - io->iov_off;
		size_t take = avail < bytes - mapped ? avail
						     : (size_t)(bytes - mapped);

		if (take) {
			dst[n].iov_base = (char *)src->iov_base + io->iov_off;
			dst[n].iov_len = take;
			n++;
		}
		mapped += take;
		io->iov_off += take;
		if (io->iov_off == src->iov_len) {
			io->iov_idx++;
			io->iov_off = 0;
		}
	}
	*out = mapped;
	return n;
}

/* Point req's slab at the next bytes of io's iovecs; returns bytes mapped. */
static uint64_t vbd_map_iov(struct td_vbd_io *io, struct td_request *req,
			    uint64_t bytes)
{
	uint64_t mapped;

	req->iovcnt = vbd_iov_take(io, req->iov_slab, (int)td_request_iov_cap(),
				   bytes, &mapped);
	req->iov = req->iov_slab;
	return mapped;
}

static void vbd_io_finish(struct td_vbd *vbd, struct td_vbd_io *io)
{
	uint64_t now = td_now_ns(), us = (now - io->start_ns) / 1000;

	if (io->timed)
		vbd_stages_done(vbd, io, now);
	if (!io->internal) {
		vbd->stats.reqs[io->op]++;
		vbd->stats.bytes[io->op] += (uint64_t)io->nr_sectors
					    << TD_SECTOR_SHIFT;
		if (io->error)
			vbd->stats.errors[io->op]++;
		vbd->stats.lat_hist[td_lat_bucket(us)]++;
		vbd->stats.inflight--;
	}
	vbd->active--;
	io->cb(io, io->error);
}

void vbd_io_complete(struct td_vbd *vbd, struct td_vbd_io *io, int err)
{
	if (err && !io->error)
		io->error = err;
	io->next_sector = io_end(io);
	io->pending = 0;
	vbd_io_finish(vbd, io);
	vbd_kick(vbd);
}

static void vbd_piece_done(struct td_request *req, int err, void *opaque)
{
	struct td_vbd_io *io = opaque;
	struct td_vbd *vbd = req->vbd;

	if (err && !io->error)
		io->error = err;
	io->pending--;
	if (!io->pending && io->next_sector == io_end(io))
		vbd_io_finish(vbd, io);
}

/* Issue pieces of io until it is all issued (true) or the pool is empty. */
static bool vbd_issue(struct td_vbd *vbd, struct td_vbd_io *io)
{
	struct vbd_pool *pool = &vbd->pools[0];
	uint64_t end = io_end(io);

	if (!io->started) {
		io->started = true;
		vbd->active++;
		if (vbd->snap && !io->internal && vbd_snap_gate(vbd->snap, io))
			return true; /* given back by vbd_io_release */
	}
	while (io->next_sector < end) {
		struct td_request *req = pool_get(pool);
		uint32_t nr;

		if (!req) {
			vbd->stats.waits++;
			return false;
		}
		nr = vbd_piece_sectors(vbd, io);
		req->op = io->op;
		req->flags = io->flags;
		req->sector = io->op == TD_OP_FLUSH ? 0 : io->next_sector;
		if (io->op == TD_OP_READ || io->op == TD_OP_WRITE)
			nr = (uint32_t)(vbd_map_iov(
						io, req,
						(uint64_t)nr
							<< TD_SECTOR_SHIFT) >>
					TD_SECTOR_SHIFT);
		req->nr_sectors = nr;
		req->cb = vbd_piece_done;
		req->cb_opaque = io;
		io->next_sector =
			io->op == TD_OP_FLUSH ? 1 : io->next_sector + nr;
		io->pending++;
		vbd->stats.pieces++;
		req->timed_io = io->timed ? io : NULL;
		if (io->timed && !io->stamp_ns[TD_STAMP_DRIVER])
			io->stamp_ns[TD_STAMP_DRIVER] = td_now_ns();
		vbd_submit_req(vbd, &vbd->drivers[0], req);
	}
	return true;
}

static void vbd_drained_cb(struct td_defer *d, void *opaque)
{
	struct td_vbd *vbd = opaque;

	if (vbd->state != VBD_PAUSING || vbd->active)
		return;
	vbd->state = VBD_PAUSED;
	vbd->drained_cb(vbd, vbd->drained_opaque);
}

/* Issue waiting I/O in order; note a finished drain. */
static void vbd_kick(struct td_vbd *vbd)
{
	struct td_vbd_io *io;

	while ((io = TAILQ_FIRST(&vbd->waiting))) {
		/* A paused vbd still finishes what it started. */
		if (vbd->state != VBD_RUNNING && !io->started)
			break;
		if (!vbd_issue(vbd, io))
			break;
		TAILQ_REMOVE(&vbd->waiting, io, link);
	}
	if (vbd->state == VBD_PAUSING && !vbd->active)
		td_loop_defer(vbd->loop, &vbd->drained_defer, vbd_drained_cb,
			      vbd);
}

static int vbd_io_start(struct td_vbd *vbd, struct td_vbd_io *io, bool internal)
{
	int err = vbd_validate(vbd, io);

	if (err)
		return err;
	io->internal = internal;
	if (io->op == TD_OP_FLUSH)
		io->sector = 0;
	io->next_sector = io->sector;
	io->iov_idx = 0;
	io->iov_off = 0;
	io->pending = 0;
	io->started = false;
	io->error = 0;
	io->start_ns = td_now_ns();
	io->timed = vbd->stages.on && !internal;
	if (io->timed)
		vbd_stages_start(io);
	if (internal)
		return 0;
	vbd->stats.inflight++;
	if (io->op == TD_OP_READ || io->op == TD_OP_WRITE)
		vbd->stats.seg_hist[td_seg_bucket(
			io->nr_segments ? io->nr_segments
					: (uint32_t)io->iovcnt)]++;
	return 0;
}

int td_vbd_submit(struct td_vbd *vbd, struct td_vbd_io *io)
{
	int err = vbd_io_start(vbd, io, false);

	if (err)
		return err;
	if (vbd->state != VBD_RUNNING || !TAILQ_EMPTY(&vbd->waiting) ||
	    !vbd_issue(vbd, io))
		TAILQ_INSERT_TAIL(&vbd->waiting, io, link);
	return 0;
}

int vbd_submit_internal(struct td_vbd *vbd, struct td_vbd_io *io)
{
	int err = vbd_io_start(vbd, io, true);

	if (err)
		return err;
	/* Started by vbd_issue, so a pausing vbd still finishes it. */
	if (!vbd_issue(vbd, io))
		TAILQ_INSERT_HEAD(&vbd->waiting, io, link);
	return 0;
}

void vbd_io_release(struct td_vbd *vbd, struct td_vbd_io *io)
{
	if (!vbd_issue(vbd, io))
		TAILQ_INSERT_HEAD(&vbd->waiting, io, link);
}

void vbd_active_get(struct td_vbd *vbd)
{
	vbd->active++;
}

void vbd_active_put(struct td_vbd *vbd)
{
	vbd->active--;
	vbd_kick(vbd);
}

/* --- pause --------------------------------------------------------------------- */

int td_vbd_pause(struct td_vbd *vbd, td_vbd_drained_cb cb, void *opaque)
{
	if (vbd->state != VBD_RUNNING)
		return -EALREADY;
	vbd->state = VBD_PAUSING;
	vbd->drained_cb = cb;
	vbd->drained_opaque = opaque;
	vbd_kick(vbd);
	return 0;
}

int td_vbd_resume(struct td_vbd *vbd)
{
	if (vbd->state == VBD_RUNNING)
		return -EALREADY;
	td_loop_defer_cancel(vbd->loop, &vbd->drained_defer);
	vbd->state = VBD_RUNNING;
	vbd_kick(vbd);
	return 0;
}

bool td_vbd_paused(const struct td_vbd *vbd)
{
	return vbd->state == VBD_PAUSED;
}
