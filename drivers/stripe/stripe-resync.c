/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-resync.c - online resync of stale replicas, driven by a control
 * command ("tap-ctl driver -i ID stripe resync [RATE]").
 *
 * One stale replica (the target) at a time, among those whose stale mark
 * is durable and whose extent has a live replica.  Its extent is copied
 * from a live replica in chunks of resync_chunk bytes (at most E), in
 * order; [0, cursor) is copied.  Each chunk:
 *   1. lock [cursor, cursor + len) (stripe-lock.c): writes to the extent
 *      that overlap it and arrive now wait; writes already in flight that
 *      overlap it are waited for, so that the copy reads data no write is
 *      still changing;
 *   2. read the chunk from a live replica (another one on error), write it
 *      to the target;
 *   3. cursor += len, unlock: the waiting writes are routed again;
 *   4. pause so that the copy stays under resync_rate bytes per second.
 * Writes to the extent below the cursor go to the target too
 * (stripe_resync_route_write), so the copied part stays exact; writes
 * above it do not, the copy picks them up later.  A failed write to the
 * target abandons the slot (it stays stale).
 * At the end the whole extent is locked, in-flight writes drain, the
 * target's server gets a SYNCHRONIZE CACHE (the copy must be durable
 * before the file calls the replica ok), and the slot is made live in
 * memory and its mark cleared in the file (stripe-stale.c; the master is
 * told once that is durable).
 * A slot that fails is counted and skipped for the rest of the run; the
 * run ends when no candidate is left, as "done" or "failed".
 *
 * Memory: one chunk buffer and a per-slot "tried" array, allocated when a
 * run starts (control path), freed when it ends.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "drivers/stripe/stripe-int.h"

#define NS_PER_S	 1000000000ull
#define NS_PER_US	 1000ull
#define RESYNC_BUF_ALIGN 4096
/* On its own: how often to look, and the pause after a run that failed. */
#define AUTO_POLL_US	1000000ull
#define AUTO_BACKOFF_NS (10 * NS_PER_S)

const char *stripe_resync_state_name(enum stripe_resync_state s)
{
	switch (s) {
	case STRIPE_RESYNC_RUNNING:
		return "running";
	case STRIPE_RESYNC_DONE:
		return "done";
	case STRIPE_RESYNC_FAILED:
		return "failed";
	case STRIPE_RESYNC_STOPPED:
		return "stopped";
	default:
		return "idle";
	}
}

/* The server a run's target for slot is on: the move target's, if any. */
static struct stripe_server *target_server(struct stripe_dev *dev, size_t slot)
{
	const struct stripe_map *m = &dev->map;

	return &dev->servers[m->moves[slot].active ? m->moves[slot].server
						   : m->slots[slot].server];
}

static bool candidate(struct stripe_dev *dev, size_t slot)
{
	const struct stripe_map *m = &dev->map;
	const struct stripe_server *srv = target_server(dev, slot);

	if (dev->resync.tried && dev->resync.tried[slot])
		return false;
	if (srv->gate == STRIPE_GATE_BAD ||
	    (dev->resync.auto_run && srv->ops->state(srv->be) != ISCSI_CONN_UP))
		return false;	   /* on its own, only to a server that is up */
	if (m->moves[slot].active) /* a move: the whole extent, from any */
		return true;
	return m->slots[slot].stale && stripe_stale_durable(dev, slot) &&
	       stripe_slot_has_source(dev, slot);
}

/* Dirty regions of the candidates, for the log line. */
static uint64_t count_dirty(struct stripe_dev *dev)
{
	const struct stripe_map *m = &dev->map;
	size_t nr = stripe_map_nr_slots(m);
	uint64_t n = 0;

	for (size_t i = 0; i < nr; i++)
		if (candidate(dev, i))
			n += stripe_map_bits_count(stripe_map_slot_dirty(m, i),
						   stripe_map_region_count(m));
	return n;
}

static uint64_t count_candidates(struct stripe_dev *dev)
{
	size_t nr = stripe_map_nr_slots(&dev->map);
	uint64_t n = 0;

	for (size_t i = 0; i < nr; i++)
		n += candidate(dev, i);
	return n;
}

/* --- the write path ------------------------------------------------------------ */

void stripe_resync_route_write(struct stripe_dev *dev, struct stripe_req *sr)
{
	struct stripe_resync *rs = &dev->resync;

	if (rs->state != STRIPE_RESYNC_RUNNING || !rs->have_slot ||
	    rs->is_move || sr->column != rs->column || sr->extent != rs->extent)
		return; /* a move target gets every write anyway */
	/* Every write: the target's clean regions must stay clean, and
	 * the copied ones exact. */
	sr->target_mask = 1u << rs->replica;
}

void stripe_resync_move_failed(struct stripe_dev *dev, size_t slot, int err)
{
	const struct stripe_resync *rs = &dev->resync;

	if (rs->state == STRIPE_RESYNC_RUNNING && rs->have_slot &&
	    rs->is_move && rs->slot == slot)
		stripe_resync_target_failed(dev, err);
}

void stripe_resync_target_failed(struct stripe_dev *dev, int err)
{
	struct stripe_resync *rs = &dev->resync;

	if (!rs->target_failed)
		snprintf(rs->last_error, sizeof(rs->last_error),
			 "a write to the target replica failed: %s",
			 strerror(-err));
	rs->target_failed = true;
}

/* --- the run ------------------------------------------------------------------- */

static void slot_begin(struct stripe_dev *dev);
static void chunk_begin(struct stripe_dev *dev);

static void finish(struct stripe_dev *dev, enum stripe_resync_state state)
{
	struct stripe_resync *rs = &dev->resync;

	rs->state = state;
	rs->step = RESYNC_STEP_NONE;
	rs->have_slot = false;
	rs->ended_ns = td_now_ns();
	if (rs->auto_run && state == STRIPE_RESYNC_FAILED)
		rs->auto_after_ns = rs->ended_ns + AUTO_BACKOFF_NS;
	free(rs->buf);
	free(rs->tried);
	rs->buf = NULL;
	rs->tried = NULL;
	td_vbd_info(dev->drv->vbd,
		    "stripe: %sresync %s: %" PRIu64 " of %" PRIu64
		    " replicas resynchronised, %" PRIu64 " failed, %" PRIu64
		    " bytes copied",
		    rs->auto_run ? "automatic " : "",
		    stripe_resync_state_name(state), rs->slots_done,
		    rs->slots_total, rs->slots_failed, rs->bytes_copied);
}

static void slot_fail(struct stripe_dev *dev, const char *why, int err)
{
	struct stripe_resync *rs = &dev->resync;

	if (!rs->target_failed || !rs->last_error[0])
		snprintf(rs->last_error, sizeof(rs->last_error), "%s: %s", why,
			 strerror(-err));
	td_vbd_err(dev->drv->vbd,
		   "stripe: resync of column %u extent %u replica %u "
		   "abandoned (%s); it stays stale",
		   rs->column, rs->extent, rs->replica, rs->last_error);
	rs->slots_failed++;
	rs->have_slot = false;
	stripe_lock_release(dev);
	slot_begin(dev);
}

static void slot_done(struct stripe_dev *dev)
{
	struct stripe_resync *rs = &dev->resync;

	if (rs->is_move) {
		stripe_move_swap(dev, rs->slot); /* logs it */
	} else {
		stripe_stale_set(dev, rs->slot, false);
		stripe_stale_commit(dev);
		td_vbd_info(dev->drv->vbd,
			    "stripe: column %u extent %u replica %u "
			    "resynchronised",
			    rs->column, rs->extent, rs->replica);
	}
	rs->slots_done++;
	rs->have_slot = false;
	stripe_lock_release(dev);
	slot_begin(dev);
}

static void resync_cmd_prep(struct stripe_dev *dev, uint32_t r,
			    enum iscsi_cmd_op op,
			    void (*done)(struct stripe_cmd *, int))
{
	struct stripe_resync *rs = &dev->resync;
	const struct stripe_map_replica *rep =
		stripe_map_slot(&dev->map, rs->column, rs->extent, r);
	struct stripe_server *srv = &dev->servers[rep->server];
	uint64_t lba = rep->lba;

	if (r == rs->replica && op != ISCSI_CMD_READ && rs->is_move) {
		const struct stripe_map_move *mv = &dev->map.moves[rs->slot];

		srv = &dev->servers[mv->server]; /* the new place */
		lba = mv->lba;
	}
	memset(&rs->cmd.io, 0, sizeof(rs->cmd.io));
	rs->cmd.srv = srv;
	rs->cmd.done = done;
	rs->cmd.io.op = op;
	if (op == ISCSI_CMD_SYNC)
		return;
	rs->iov.iov_base = rs->buf;
	rs->iov.iov_len = rs->chunk_len;
	rs->cmd.io.lba = lba + rs->cursor / srv->block_size;
	rs->cmd.io.nr_blocks = (uint32_t)(rs->chunk_len / srv->block_size);
	rs->cmd.io.iov = &rs->iov;
	rs->cmd.io.iovcnt = 1;
}

static void pause_over(struct td_timer *t, void *opaque)
{
	chunk_begin(opaque);
}

static void chunk_written(struct stripe_cmd *sc, int err)
{
	struct stripe_dev *dev = sc->srv->dev;
	struct stripe_resync *rs = &dev->resync;
	uint64_t want_ns, spent_ns;

	if (dev->closing)
		return;
	if (err) {
		slot_fail(dev, "cannot write the target replica", err);
		return;
	}
	rs->bytes_copied += rs->chunk_len;
	rs->bytes_copied_all += rs->chunk_len;
	rs->cursor += rs->chunk_len;
	stripe_lock_release(dev);
	/* The rate limit: this chunk may not take less than len / rate. */
	want_ns = rs->chunk_len * NS_PER_S / rs->rate_bytes_per_s;
	spent_ns = td_now_ns() - rs->chunk_start_ns;
	if (spent_ns >= want_ns) {
		chunk_begin(dev);
		return;
	}
	rs->step = RESYNC_STEP_PAUSE;
	td_loop_timer_arm(dev->drv->loop, &rs->timer,
			  (want_ns - spent_ns) / NS_PER_US, pause_over, dev);
}

static void read_source(struct stripe_dev *dev);

static void chunk_read(struct stripe_cmd *sc, int err)
{
	struct stripe_dev *dev = sc->srv->dev;
	struct stripe_resync *rs = &dev->resync;

	if (dev->closing)
		return;
	if (err) {
		td_vbd_warn(dev->drv->vbd,
			    "stripe: resync: reading column %u extent %u "
			    "from server %u failed: %s; trying another "
			    "replica",
			    rs->column, rs->extent, sc->srv->index,
			    strerror(-err));
		snprintf(rs->last_error, sizeof(rs->last_error),
			 "cannot read a live replica: %s", strerror(-err));
		read_source(dev);
		return;
	}
	rs->step = RESYNC_STEP_WRITE;
	resync_cmd_prep(dev, rs->replica, ISCSI_CMD_WRITE, chunk_written);
	stripe_cmd_submit(dev, &rs->cmd);
}

/* Read the chunk from a live replica not tried yet for it. */
static void read_source(struct stripe_dev *dev)
{
	struct stripe_resync *rs = &dev->resync;

	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		const struct stripe_map_replica *rep =
			stripe_map_slot(&dev->map, rs->column, rs->extent, r);

		if ((r == rs->replica && !rs->is_move) ||
		    (rep->stale &&
		     stripe_map_bits_test(
			     stripe_map_slot_dirty(
				     &dev->map, stripe_map_slot_index(
							&dev->map, rs->column,
							rs->extent, r)),
			     (uint32_t)(rs->cursor / dev->map.region_bytes))) ||
		    (rs->src_tried & (1u << r)) ||
		    dev->servers[rep->server].gate == STRIPE_GATE_BAD)
			continue;
		rs->src_tried |= 1u << r;
		rs->step = RESYNC_STEP_READ;
		resync_cmd_prep(dev, r, ISCSI_CMD_READ, chunk_read);
		stripe_cmd_submit(dev, &rs->cmd);
		return;
	}
	slot_fail(dev, "no live replica could be read", -EIO);
}

static void target_synced(struct stripe_cmd *sc, int err)
{
	struct stripe_dev *dev = sc->srv->dev;
	struct stripe_resync *rs = &dev->resync;

	if (dev->closing)
		return;
	if (err)
		slot_fail(dev, "SYNCHRONIZE CACHE on the target failed", err);
	else if (rs->target_failed)
		slot_fail(dev, "a write to the target failed", -EIO);
	else
		slot_done(dev);
}

/* The lock holds and nothing it covers is in flight. */
static void lock_ready(struct stripe_dev *dev)
{
	struct stripe_resync *rs = &dev->resync;

	if (rs->target_failed) {
		slot_fail(dev, "a write to the target failed", -EIO);
		return;
	}
	if (rs->cursor >= dev->map.extent_size_bytes) {
		rs->step = RESYNC_STEP_SYNC;
		resync_cmd_prep(dev, rs->replica, ISCSI_CMD_SYNC,
				target_synced);
		stripe_cmd_submit(dev, &rs->cmd);
		return;
	}
	rs->src_tried = 0;
	read_source(dev);
}

/* The regions the target misses: its dirty ones, or a move's to copy. */
static const uint64_t *target_bits(struct stripe_dev *dev)
{
	const struct stripe_map *m = &dev->map;
	const struct stripe_resync *rs = &dev->resync;

	return rs->is_move ? stripe_map_move_dirty(m, rs->slot)
			   : stripe_map_slot_dirty(m, rs->slot);
}

/* Move the cursor over the regions the target does not miss. */
static void skip_clean(struct stripe_dev *dev)
{
	struct stripe_resync *rs = &dev->resync;
	const struct stripe_map *m = &dev->map;
	uint32_t n = stripe_map_region_count(m);
	uint32_t k = (uint32_t)(rs->cursor / m->region_bytes);

	if (rs->cursor >= m->extent_size_bytes ||
	    stripe_map_bits_test(target_bits(dev), k))
		return;
	k = stripe_map_bits_next(target_bits(dev), n, k);
	rs->cursor = (uint64_t)k * m->region_bytes;
}

/* How much of [cursor, cursor + max) is dirty on the target, from cursor. */
static uint64_t dirty_run(struct stripe_dev *dev, uint64_t max)
{
	struct stripe_resync *rs = &dev->resync;
	const struct stripe_map *m = &dev->map;
	const uint64_t *bits = target_bits(dev);
	uint64_t end = rs->cursor, stop = rs->cursor + max;

	while (end < stop &&
	       stripe_map_bits_test(bits, (uint32_t)(end / m->region_bytes)))
		end = (end / m->region_bytes + 1) * m->region_bytes;
	return (end < stop ? end : stop) - rs->cursor;
}

static void chunk_begin(struct stripe_dev *dev)
{
	struct stripe_resync *rs = &dev->resync;
	uint64_t left;

	skip_clean(dev);
	left = dev->map.extent_size_bytes - rs->cursor;

	rs->step = RESYNC_STEP_NONE;
	if (rs->stop_requested) {
		rs->have_slot = false;
		finish(dev, STRIPE_RESYNC_STOPPED);
		return;
	}
	if (rs->target_failed) {
		slot_fail(dev, "a write to the target failed", -EIO);
		return;
	}
	rs->chunk_start_ns = td_now_ns();
	if (!left) { /* the end: the whole extent, then the target's cache */
		rs->step = RESYNC_STEP_DRAIN;
		stripe_lock_take(dev, rs->column, rs->extent, 0,
				 dev->map.extent_size_bytes, lock_ready);
		return;
	}
	rs->chunk_len =
		dirty_run(dev, left < rs->chunk_bytes ? left : rs->chunk_bytes);
	rs->step = RESYNC_STEP_DRAIN;
	stripe_lock_take(dev, rs->column, rs->extent, rs->cursor,
			 rs->cursor + rs->chunk_len, lock_ready);
}

static void slot_begin(struct stripe_dev *dev)
{
	struct stripe_resync *rs = &dev->resync;
	const struct stripe_map *m = &dev->map;
	size_t nr = stripe_map_nr_slots(m);

	if (rs->stop_requested) {
		finish(dev, STRIPE_RESYNC_STOPPED);
		return;
	}
	for (size_t i = 0; i < nr; i++) {
		if (!candidate(dev, i))
			continue;
		rs->tried[i] = true;
		rs->slot = i;
		rs->replica = (uint32_t)(i % m->replicas);
		rs->extent =
			(uint32_t)((i / m->replicas) % m->extents_per_column);
		rs->column = (uint32_t)(i / ((size_t)m->replicas *
					     m->extents_per_column));
		rs->cursor = 0;
		rs->target_failed = false;
		rs->is_move = m->moves[i].active;
		rs->have_slot = true;
		chunk_begin(dev);
		return;
	}
	finish(dev,
	       rs->slots_failed ? STRIPE_RESYNC_FAILED : STRIPE_RESYNC_DONE);
}

static int run_start(struct stripe_dev *dev, uint64_t rate, bool automatic,
		     struct td_strbuf *msg)
{
	struct stripe_resync *rs = &dev->resync;
	size_t nr = stripe_map_nr_slots(&dev->map);
	uint64_t n;

	if (rs->state == STRIPE_RESYNC_RUNNING) {
		td_strbuf_puts(msg, "a resync is already running; see "
				    "'stripe status', or 'stripe resync stop'");
		return -EALREADY;
	}
	if (dev->scrub.state == STRIPE_SCRUB_RUNNING) {
		td_strbuf_puts(msg, "a scrub (verify) is running: the resync "
				    "waits for its end (see 'stripe status', "
				    "or 'stripe verify stop')");
		return -EALREADY;
	}
	if (dev->drv->read_only) {
		td_strbuf_puts(msg, "the disk is open read-only: no resync");
		return -EROFS;
	}
	rs->auto_run = automatic;
	if (!(n = count_candidates(dev))) {
		td_strbuf_printf(msg,
				 "nothing to resync: %u stale marks are "
				 "still being written, no other replica is "
				 "stale\n",
				 stripe_stale_pending(dev));
		return 0;
	}
	rs->chunk_bytes = dev->opts.resync_chunk < dev->map.extent_size_bytes
				  ? dev->opts.resync_chunk
				  : dev->map.extent_size_bytes;
	if (posix_memalign(&rs->buf, RESYNC_BUF_ALIGN, rs->chunk_bytes) ||
	    !(rs->tried = calloc(nr, sizeof(*rs->tried)))) {
		free(rs->buf);
		rs->buf = NULL;
		td_strbuf_puts(msg, "out of memory");
		return -ENOMEM;
	}
	rs->rate_bytes_per_s = rate ? rate : dev->opts.resync_rate;
	rs->slots_total = n;
	rs->slots_done = rs->slots_failed = rs->bytes_copied = 0;
	rs->last_error[0] = '\0';
	rs->stop_requested = false;
	rs->started_ns = td_now_ns();
	rs->ended_ns = 0;
	rs->state = STRIPE_RESYNC_RUNNING;
	td_strbuf_printf(msg,
			 "resync started: %" PRIu64 " stale replicas, "
			 "%" PRIu64 " bytes each, at most %" PRIu64
			 " bytes/s\n",
			 n, dev->map.extent_size_bytes, rs->rate_bytes_per_s);
	td_vbd_info(dev->drv->vbd,
		    "stripe: %sresync started: %" PRIu64 " stale replicas "
		    "(%" PRIu64 " dirty regions of %" PRIu64 " bytes), at "
		    "most %" PRIu64 " bytes/s",
		    automatic ? "automatic " : "", n, count_dirty(dev),
		    dev->map.region_bytes, rs->rate_bytes_per_s);
	slot_begin(dev);
	return 0;
}

int stripe_resync_start(struct stripe_dev *dev, uint64_t rate,
			struct td_strbuf *msg)
{
	return run_start(dev, rate, false, msg);
}

/* Start a run when a server that missed writes is back. */
static void auto_poll(struct td_timer *t, void *opaque)
{
	struct stripe_dev *dev = opaque;
	struct stripe_resync *rs = &dev->resync;
	struct td_strbuf msg;

	if (dev->closing)
		return;
	td_strbuf_init(&msg);
	if (!dev->opts.auto_resync_off && rs->state != STRIPE_RESYNC_RUNNING &&
	    !dev->drv->read_only && !dev->lease.handed_over &&
	    td_now_ns() >= rs->auto_after_ns) {
		bool last = rs->auto_run; /* what the last run was */

		/* The candidates of a run on its own; a scrub running
		 * refuses it, and the next look retries. */
		rs->auto_run = true;
		if (count_candidates(dev))
			run_start(dev, 0, true, &msg);
		if (rs->state != STRIPE_RESYNC_RUNNING)
			rs->auto_run = last;
		td_strbuf_free(&msg);
	}
	td_loop_timer_arm(dev->drv->loop, &rs->auto_timer, AUTO_POLL_US,
			  auto_poll, dev);
}

void stripe_resync_kick(struct stripe_dev *dev)
{
	struct td_strbuf msg;

	if (dev->resync.state == STRIPE_RESYNC_RUNNING)
		return; /* the run takes the new target at its next slot */
	td_strbuf_init(&msg);
	run_start(dev, 0, false, &msg);
	td_strbuf_free(&msg);
}

void stripe_resync_auto_start(struct stripe_dev *dev)
{
	td_loop_timer_arm(dev->drv->loop, &dev->resync.auto_timer, AUTO_POLL_US,
			  auto_poll, dev);
}

int stripe_resync_stop(struct stripe_dev *dev, struct td_strbuf *msg)
{
	struct stripe_resync *rs = &dev->resync;

	if (rs->state != STRIPE_RESYNC_RUNNING) {
		td_strbuf_puts(msg, "no resync is running");
		return -EALREADY;
	}
	rs->stop_requested = true;
	if (rs->step == RESYNC_STEP_PAUSE) {
		td_loop_timer_cancel(&rs->timer);
		rs->have_slot = false;
		finish(dev, STRIPE_RESYNC_STOPPED);
		td_strbuf_puts(msg, "resync stopped\n");
	} else {
		td_strbuf_puts(msg, "resync stops after the chunk in "
				    "flight\n");
	}
	return 0;
}

void stripe_resync_close(struct stripe_dev *dev)
{
	struct stripe_resync *rs = &dev->resync;

	td_loop_timer_cancel(&rs->timer);
	td_loop_timer_cancel(&rs->auto_timer);
	free(rs->buf);
	free(rs->tried);
	rs->buf = NULL;
	rs->tried = NULL;
	rs->state = STRIPE_RESYNC_IDLE;
}
