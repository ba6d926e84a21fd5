/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-io.c - the request path of the stripe driver: route a request to
 * its extent's replicas, fan writes out, read from one replica with
 * fallback, run flush rounds, and pass every command through its server's
 * gate.
 *
 * A request never crosses a stripe unit (the core splits at the driver's
 * boundary), so it lies in one column and one extent.  A write is
 * acknowledged only once every live replica answered and the replicas
 * that failed are durably marked stale; it fails only when no live replica
 * took it.  The rules for writes, reads, flush rounds, the gate and
 * degraded servers (degraded_grace_ms) are in doc/stripe-driver.md.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "drivers/stripe/stripe-int.h"

const char *stripe_gate_name(enum stripe_gate g)
{
	switch (g) {
	case STRIPE_GATE_OK:
		return "ok";
	case STRIPE_GATE_BAD:
		return "bad-geometry";
	default:
		return "unchecked";
	}
}

/* --- the gate ------------------------------------------------------------------ */

enum gate_action { GATE_ISSUE, GATE_HOLD, GATE_FAIL };

static void gate_check(struct stripe_dev *dev, struct stripe_server *srv)
{
	const struct stripe_map_server *ms = &dev->map.servers[srv->index];
	uint32_t bs = srv->ops->block_size(srv->be);
	uint64_t nr = srv->ops->nr_blocks(srv->be);

	srv->gate = STRIPE_GATE_OK;
	if (bs != srv->block_size) {
		td_vbd_err(dev->drv->vbd,
			   "stripe: server %u (%s %s lun %u%s%s): the LUN's "
			   "block size is %u bytes, %s says %u; I/O to "
			   "this server fails with EIO",
			   srv->index, ms->portal, ms->target, ms->lun,
			   ms->device[0] ? " device " : "", ms->device, bs,
			   dev->path, srv->block_size);
		srv->gate = STRIPE_GATE_BAD;
	} else if (nr < srv->need_blocks) {
		td_vbd_err(dev->drv->vbd,
			   "stripe: server %u (%s %s lun %u%s%s): the LUN "
			   "has %llu blocks of %u bytes, the extents of %s "
			   "need %llu; I/O to this server fails with EIO",
			   srv->index, ms->portal, ms->target, ms->lun,
			   ms->device[0] ? " device " : "", ms->device,
			   (unsigned long long)nr, bs, dev->path,
			   (unsigned long long)srv->need_blocks);
		srv->gate = STRIPE_GATE_BAD;
	}
	if (srv->gate == STRIPE_GATE_BAD)
		dev->gate_failures++;
}

static enum gate_action gate_action(struct stripe_dev *dev,
				    struct stripe_server *srv)
{
	if (srv->gate == STRIPE_GATE_UNCHECKED) {
		switch (srv->ops->state(srv->be)) {
		case ISCSI_CONN_CONNECTING:
		case ISCSI_CONN_ADMITTING:
			return GATE_HOLD;
		case ISCSI_CONN_DOWN:
			return GATE_ISSUE; /* fails at once with -EIO */
		case ISCSI_CONN_FENCED:
			return GATE_ISSUE; /* fails at once with -EACCES */
		case ISCSI_CONN_UP:
			gate_check(dev, srv);
			break;
		}
	}
	return srv->gate == STRIPE_GATE_OK ? GATE_ISSUE : GATE_FAIL;
}

static void fail_run(struct td_defer *d, void *opaque)
{
	struct stripe_dev *dev = opaque;
	struct stripe_cmd_list list = TAILQ_HEAD_INITIALIZER(list);
	struct stripe_cmd *sc;

	/* Commands failed by the callbacks below wait for the next run. */
	TAILQ_CONCAT(&list, &dev->failed, link);
	while ((sc = TAILQ_FIRST(&list))) {
		TAILQ_REMOVE(&list, sc, link);
		sc->done(sc, sc->gate_err);
	}
}

/* Complete sc with err from the loop (fail_run), never right here. */
static void gate_fail(struct stripe_dev *dev, struct stripe_cmd *sc, int err)
{
	sc->gate_err = err;
	TAILQ_INSERT_TAIL(&dev->failed, sc, link);
	td_loop_defer(dev->drv->loop, &dev->fail_defer, fail_run, dev);
}

static void gate_poll_arm(struct stripe_dev *dev);

static void gate_dispatch(struct stripe_dev *dev, struct stripe_cmd *sc,
			  enum gate_action a)
{
	struct stripe_server *srv = sc->srv;

	switch (a) {
	case GATE_ISSUE:
		srv->in_flight++;
		srv->ops->submit(srv->be, &sc->io);
		break;
	case GATE_HOLD:
		TAILQ_INSERT_TAIL(&srv->held, sc, link);
		gate_poll_arm(dev);
		break;
	case GATE_FAIL:
		gate_fail(dev, sc, -EIO);
		break;
	}
}

static void gate_release(struct stripe_dev *dev, struct stripe_server *srv,
			 enum gate_action a)
{
	struct stripe_cmd *sc;

	while ((sc = TAILQ_FIRST(&srv->held))) {
		TAILQ_REMOVE(&srv->held, sc, link);
		gate_dispatch(dev, sc, a);
	}
}

static bool park_poll(struct stripe_dev *dev, struct stripe_server *srv);

static void gate_poll(struct td_timer *t, void *opaque)
{
	struct stripe_dev *dev = opaque;
	bool again = false;

	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		struct stripe_server *srv = &dev->servers[i];
		enum gate_action a;

		if (park_poll(dev, srv))
			again = true;
		if (TAILQ_EMPTY(&srv->held))
			continue;
		a = gate_action(dev, srv);
		if (a == GATE_HOLD)
			again = true;
		else
			gate_release(dev, srv, a);
	}
	if (again && !td_timer_armed(&dev->gate_timer))
		td_loop_timer_arm(dev->drv->loop, &dev->gate_timer,
				  STRIPE_GATE_POLL_US, gate_poll, dev);
}

static void gate_poll_arm(struct stripe_dev *dev)
{
	if (!td_timer_armed(&dev->gate_timer))
		td_loop_timer_arm(dev->drv->loop, &dev->gate_timer,
				  STRIPE_GATE_POLL_US, gate_poll, dev);
}

static void cmd_done(struct iscsi_cmd *io, int err)
{
	struct stripe_cmd *sc = io->opaque;

	sc->srv->in_flight--;
	sc->done(sc, err);
}

/* stripe_cmd_submit without a look at the parked commands. */
static void cmd_submit(struct stripe_dev *dev, struct stripe_cmd *sc)
{
	struct stripe_server *srv = sc->srv;
	enum gate_action a = gate_action(dev, srv);

	sc->io.done = cmd_done;
	sc->io.opaque = sc;
	/* Held commands go first: a server sees commands in order. */
	if (a != GATE_HOLD && !TAILQ_EMPTY(&srv->held))
		gate_release(dev, srv, a);
	gate_dispatch(dev, sc, a);
}

void stripe_cmd_submit(struct stripe_dev *dev, struct stripe_cmd *sc)
{
	/* Parked commands go first once their server is back. */
	park_poll(dev, sc->srv);
	cmd_submit(dev, sc);
}

/* --- degraded servers (see the top) ------------------------------------------ */

bool stripe_server_degraded(struct stripe_dev *dev, struct stripe_server *srv)
{
	enum iscsi_conn_state s = srv->ops->state(srv->be);
	struct iscsi_conn_stats st;

	/* A FENCED server is not degraded: its commands go and fail with
	 * -EACCES, which fails the request (never skipped, never stale). */
	if (s == ISCSI_CONN_UP || s == ISCSI_CONN_FENCED ||
	    srv->gate == STRIPE_GATE_BAD ||
	    ((s == ISCSI_CONN_CONNECTING || s == ISCSI_CONN_ADMITTING) &&
	     srv->gate == STRIPE_GATE_UNCHECKED)) {
		srv->degraded_ns = 0;
		return false;
	}
	/* A reconnect since it was first seen means it was UP in between,
	 * unseen: this is a new outage, with a grace of its own. */
	srv->ops->get_stats(srv->be, &st);
	if (!srv->degraded_ns || st.reconnects != srv->degraded_reconnects) {
		srv->degraded_ns = td_now_ns();
		srv->degraded_reconnects = st.reconnects;
	}
	return true;
}

/* A degraded server's parked commands wait no more: DOWN, or grace over. */
static bool park_expired(const struct stripe_dev *dev,
			 const struct stripe_server *srv)
{
	uint64_t grace_ns = dev->opts.degraded_grace_ms * 1000000ull;

	return srv->ops->state(srv->be) == ISCSI_CONN_DOWN ||
	       td_now_ns() - srv->degraded_ns >= grace_ns;
}

static void park_skip(struct stripe_dev *dev, struct stripe_cmd *sc)
{
	dev->degraded_skips++;
	gate_fail(dev, sc, STRIPE_SKIPPED_ERR);
}

/*
 * Issue srv's parked commands, in order, once it is no longer degraded;
 * skip them once they have waited long enough.  true: some stay parked.
 */
static bool park_poll(struct stripe_dev *dev, struct stripe_server *srv)
{
	struct stripe_cmd *sc;
	bool degraded;

	if (TAILQ_EMPTY(&srv->parked))
		return false;
	degraded = stripe_server_degraded(dev, srv);
	if (degraded && !park_expired(dev, srv))
		return true;
	while ((sc = TAILQ_FIRST(&srv->parked))) {
		TAILQ_REMOVE(&srv->parked, sc, link);
		if (degraded)
			park_skip(dev, sc);
		else
			cmd_submit(dev, sc);
	}
	return false;
}

/*
 * Instead of stripe_cmd_submit, for a command that need not wait for its
 * server, which stripe_server_degraded has just called degraded.  Never
 * completes sc inside the call.
 */
static void cmd_park(struct stripe_dev *dev, struct stripe_cmd *sc)
{
	struct stripe_server *srv = sc->srv;

	sc->io.done = cmd_done;
	sc->io.opaque = sc;
	if (park_expired(dev, srv)) {
		park_skip(dev, sc);
		return;
	}
	TAILQ_INSERT_TAIL(&srv->parked, sc, link);
	gate_poll_arm(dev);
}

/* --- children ------------------------------------------------------------------ */

static struct stripe_map_replica *
req_slot(struct stripe_dev *dev, const struct stripe_req *sr, uint32_t r)
{
	return stripe_map_slot(&dev->map, sr->column, sr->extent, r);
}

/* Child idx of sr: op on server srv from block lba of its extent. */
static void child_prep_at(struct stripe_req *sr, uint32_t idx,
			  struct stripe_server *srv, uint64_t lba,
			  enum iscsi_cmd_op op,
			  void (*done)(struct stripe_cmd *, int))
{
	struct stripe_child *ch = &sr->child[idx];
	struct td_request *req = sr->req;

	memset(&ch->sc.io, 0, sizeof(ch->sc.io));
	ch->sc.srv = srv;
	ch->sc.done = done;
	ch->sr = sr;
	ch->replica = idx;
	ch->err = 0;
	ch->sc.io.op = op;
	ch->sc.io.lba = lba + sr->ext_off / srv->block_size;
	ch->sc.io.nr_blocks = (uint32_t)(sr->bytes / srv->block_size);
	if (op == ISCSI_CMD_READ || op == ISCSI_CMD_WRITE) {
		ch->sc.io.iov = req->iov;
		ch->sc.io.iovcnt = req->iovcnt;
	}
	ch->sc.io.fua = op != ISCSI_CMD_READ && (req->flags & TD_REQ_FUA);
	ch->sc.io.no_hole =
		op == ISCSI_CMD_WRITE_ZEROES && (req->flags & TD_REQ_NO_HOLE);
}

static void child_prep(struct stripe_dev *dev, struct stripe_req *sr,
		       uint32_t r, enum iscsi_cmd_op op,
		       void (*done)(struct stripe_cmd *, int))
{
	const struct stripe_map_replica *rep = req_slot(dev, sr, r);

	child_prep_at(sr, r, &dev->servers[rep->server], rep->lba, op, done);
}

static struct stripe_child *child_of(struct stripe_cmd *sc)
{
	return (struct stripe_child *)sc; /* sc is its first member */
}

/* --- reads --------------------------------------------------------------------- */

bool stripe_req_clean_on(const struct stripe_dev *dev,
			 const struct stripe_req *sr, uint32_t r)
{
	const struct stripe_map *m = &dev->map;
	const uint64_t *bits = stripe_map_slot_dirty(
		m, stripe_map_slot_index(m, sr->column, sr->extent, r));
	uint32_t k0 = (uint32_t)(sr->ext_off / m->region_bytes);
	uint32_t k1 =
		(uint32_t)((sr->ext_off + (sr->bytes ? sr->bytes : 1) - 1) /
			   m->region_bytes);

	return stripe_map_bits_next(bits, k1 + 1, k0) > k1;
}

/* UP, then connecting for the first time, then degraded (DOWN too). */
static unsigned int state_rank(struct stripe_dev *dev,
			       struct stripe_server *srv)
{
	if (stripe_server_degraded(dev, srv))
		return 2;
	return srv->ops->state(srv->be) == ISCSI_CONN_UP ? 0 : 1;
}

/* The live, untried replica to read from; -1 when none is left. */
static int pick_replica(struct stripe_dev *dev, struct stripe_req *sr)
{
	/* Only a request's first pick moves the turn: fallbacks do not. */
	uint32_t nr = dev->map.replicas,
		 start = (sr->issued_mask ? dev->rr : dev->rr++) % nr;
	uint64_t best_rank = UINT64_MAX;
	int best = -1;

	for (uint32_t i = 0; i < nr; i++) {
		uint32_t r = (start + i) % nr;
		const struct stripe_map_replica *rep = req_slot(dev, sr, r);
		struct stripe_server *srv = &dev->servers[rep->server];
		uint64_t rank;

		if ((sr->issued_mask & (1u << r)) ||
		    (rep->stale && !stripe_req_clean_on(dev, sr, r)) ||
		    srv->gate == STRIPE_GATE_BAD)
			continue;
		rank = ((uint64_t)state_rank(dev, srv) << 32) | srv->in_flight;
		if (rank < best_rank) {
			best_rank = rank;
			best = (int)r;
		}
	}
	return best;
}

static void read_done(struct stripe_cmd *sc, int err);

static void read_issue(struct stripe_dev *dev, struct stripe_req *sr)
{
	int r = pick_replica(dev, sr);

	if (r < 0) {
		td_vbd_err(dev->drv->vbd,
			   "stripe: read at sector %llu (column %u extent "
			   "%u): %s",
			   (unsigned long long)sr->req->sector, sr->column,
			   sr->extent,
			   sr->issued_mask ? "every live replica failed"
					   : "no live replica");
		td_complete(sr->req, sr->err ? sr->err : -EIO);
		return;
	}
	if (sr->issued_mask)
		dev->read_fallbacks++;
	sr->issued_mask |= 1u << r;
	child_prep(dev, sr, (uint32_t)r, ISCSI_CMD_READ, read_done);
	stripe_cmd_submit(dev, &sr->child[r].sc);
}

static void read_done(struct stripe_cmd *sc, int err)
{
	struct stripe_child *ch = child_of(sc);
	struct stripe_req *sr = ch->sr;
	struct stripe_dev *dev = sr->dev;

	if (!err) {
		td_complete(sr->req, 0);
		return;
	}
	if (dev->closing) {
		td_complete(sr->req, err);
		return;
	}
	if (err == -EACCES) {
		/* Fenced: the request fails, as writes do (no fallback). */
		stripe_fence_conflict(dev, sc->srv);
		dev->reservation_conflicts++;
		td_complete(sr->req, -EACCES);
		return;
	}
	if (!sr->err)
		sr->err = err;
	td_vbd_warn(dev->drv->vbd,
		    "stripe: read of column %u extent %u replica %u (server "
		    "%u) failed: %s; trying another replica",
		    sr->column, sr->extent, ch->replica, sc->srv->index,
		    strerror(-err));
	read_issue(dev, sr);
}

/* --- writes -------------------------------------------------------------------- */

static enum iscsi_cmd_op write_op(const struct td_request *req)
{
	switch (req->op) {
	case TD_OP_DISCARD:
		return ISCSI_CMD_UNMAP;
	case TD_OP_WRITE_ZEROES:
		return ISCSI_CMD_WRITE_ZEROES;
	default:
		return ISCSI_CMD_WRITE;
	}
}

/*
 * A discard is only worth sending when every replica can unmap: one that
 * unmaps while another keeps the data would make the replicas differ.
 * Discarded data may read back as anything, so skipping is correct.
 */
static bool discard_useful(struct stripe_dev *dev, const struct stripe_req *sr)
{
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		const struct stripe_server *srv =
			&dev->servers[req_slot(dev, sr, r)->server];

		if (srv->gate == STRIPE_GATE_OK &&
		    !srv->ops->can_unmap(srv->be))
			return false;
	}
	return true;
}

static void write_done(struct stripe_cmd *sc, int err);

/*
 * The replicas of mask on degraded servers, when a live replica of sr is
 * on a server that is neither degraded nor refused by the gate (that copy
 * carries the write); 0 otherwise: then the write waits as it always did.
 */
static uint32_t write_skippable(struct stripe_dev *dev,
				const struct stripe_req *sr, uint32_t mask)
{
	uint32_t degraded = 0;
	bool carried = false;

	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		struct stripe_server *srv =
			&dev->servers[req_slot(dev, sr, r)->server];

		if (!(mask & (1u << r)))
			continue;
		if (stripe_server_degraded(dev, srv))
			degraded |= 1u << r;
		else if ((sr->issued_mask & (1u << r)) &&
			 srv->gate != STRIPE_GATE_BAD)
			carried = true;
	}
	return carried ? degraded : 0;
}

/* The replicas of sr's extent with a move target (written too). */
static uint32_t move_targets(struct stripe_dev *dev,
			     const struct stripe_req *sr)
{
	uint32_t mask = 0;

	for (uint32_t r = 0; r < dev->map.replicas; r++)
		if (dev->map.moves[stripe_map_slot_index(&dev->map, sr->column,
							 sr->extent, r)]
			    .active)
			mask |= 1u << r;
	return mask;
}

/* A write's child to the move target of replica r. */
static void child_prep_move(struct stripe_dev *dev, struct stripe_req *sr,
			    uint32_t r, enum iscsi_cmd_op op)
{
	const struct stripe_map_move *mv =
		&dev->map.moves[stripe_map_slot_index(&dev->map, sr->column,
						      sr->extent, r)];

	child_prep_at(sr, STRIPE_MAX_REPLICAS + r, &dev->servers[mv->server],
		      mv->lba, op, write_done);
}

void stripe_io_restart(struct stripe_dev *dev, struct stripe_req *sr)
{
	enum iscsi_cmd_op op = write_op(sr->req);
	uint32_t live = 0, mask, skippable;
	uint64_t gen = 0;

	sr->issued_mask = sr->target_mask = sr->move_mask = 0;
	sr->err = 0;
	sr->lock_blocker = false;
	if (stripe_lock_route_write(dev, sr))
		return; /* waits for the chunk lock */
	stripe_resync_route_write(dev, sr);
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		size_t slot = stripe_map_slot_index(&dev->map, sr->column,
						    sr->extent, r);
		uint64_t g;

		if (!dev->map.slots[slot].stale ||
		    stripe_req_clean_on(dev, sr, r)) {
			/* Clean where it writes: written, to stay clean. */
			live++;
			sr->issued_mask |= 1u << r;
		} else if (!(sr->target_mask & (1u << r)) &&
			   (g = stripe_stale_mark_range(dev, slot, sr->ext_off,
							sr->bytes)) > gen) {
			/* Not written: its regions must say so first. */
			gen = g;
		}
	}
	if (!live) {
		td_vbd_err(dev->drv->vbd,
			   "stripe: %s at sector %llu: column %u extent %u "
			   "has no live replica",
			   td_op_name(sr->req->op),
			   (unsigned long long)sr->req->sector, sr->column,
			   sr->extent);
		stripe_req_complete(dev, sr, -EIO);
		return;
	}
	if (op == ISCSI_CMD_UNMAP && !discard_useful(dev, sr)) {
		stripe_req_complete(dev, sr, 0);
		return;
	}
	sr->wait_gen = gen;
	mask = sr->issued_mask | sr->target_mask;
	skippable = write_skippable(dev, sr, mask);
	sr->move_mask = move_targets(dev, sr);
	sr->pending = (uint32_t)__builtin_popcount(mask) +
		      (uint32_t)__builtin_popcount(sr->move_mask);
	TAILQ_INSERT_TAIL(&dev->writes, sr, link);
	sr->in_writes = true;
	/* No child completes inside stripe_cmd_submit or cmd_park: the count
	 * is safe. */
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		if (!(mask & (1u << r)))
			continue;
		child_prep(dev, sr, r, op, write_done);
		if (skippable & (1u << r))
			cmd_park(dev, &sr->child[r].sc);
		else
			stripe_cmd_submit(dev, &sr->child[r].sc);
	}
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		if (!(sr->move_mask & (1u << r)))
			continue;
		child_prep_move(dev, sr, r, op);
		stripe_cmd_submit(dev, &sr->child[STRIPE_MAX_REPLICAS + r].sc);
	}
}

/* Sort the children's results into replicas that succeeded and failed. */
static void write_results(struct stripe_dev *dev, struct stripe_req *sr,
			  uint32_t *ok, uint32_t *failed, uint64_t *target_gen)
{
	*ok = *failed = 0;
	*target_gen = 0;
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		int err = sr->child[STRIPE_MAX_REPLICAS + r].err;

		/* A move target is not a replica yet: its failure spoils only
		 * a copy under way (it is copied again from the start). */
		if ((sr->move_mask & (1u << r)) && err &&
		    !(err == -EOPNOTSUPP && sr->req->op == TD_OP_DISCARD))
			stripe_resync_move_failed(
				dev,
				stripe_map_slot_index(&dev->map, sr->column,
						      sr->extent, r),
				err);
	}
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		int err;

		if (!((sr->issued_mask | sr->target_mask) & (1u << r)))
			continue; /* its child was never prepared */
		err = sr->child[r].err;
		if (err == -EOPNOTSUPP && sr->req->op == TD_OP_DISCARD)
			err = 0;
		if ((sr->target_mask & (1u << r)) && err) {
			/* The target's regions under the write may differ
			 * now, even those the copy had not to do. */
			stripe_resync_target_failed(dev, err);
			*target_gen = stripe_stale_mark_range(
				dev,
				stripe_map_slot_index(&dev->map, sr->column,
						      sr->extent, r),
				sr->ext_off, sr->bytes);
		}
		if (!(sr->issued_mask & (1u << r)))
			continue; /* not written */
		/* A replica marked meanwhile carries the write only when
		 * its regions under it are still clean. */
		if (err)
			*failed |= 1u << r;
		else if (!req_slot(dev, sr, r)->stale ||
			 stripe_req_clean_on(dev, sr, r))
			*ok |= 1u << r;
	}
}

/* Mark the replicas in failed stale; the generation that makes it durable. */
static uint64_t write_mark(struct stripe_dev *dev, struct stripe_req *sr,
			   uint32_t failed)
{
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		size_t slot;

		if (!(failed & (1u << r)))
			continue;
		slot = stripe_map_slot_index(&dev->map, sr->column, sr->extent,
					     r);
		if (sr->child[r].err == STRIPE_SKIPPED_ERR)
			td_vbd_err(dev->drv->vbd,
				   "stripe: %s of column %u extent %u replica "
				   "%u not sent: server %u is degraded (down "
				   "or reconnecting); marking it stale",
				   td_op_name(sr->req->op), sr->column,
				   sr->extent, r, dev->map.slots[slot].server);
		else
			td_vbd_err(
				dev->drv->vbd,
				"stripe: %s of column %u extent %u replica "
				"%u (server %u) failed: %s; marking it stale",
				td_op_name(sr->req->op), sr->column, sr->extent,
				r, dev->map.slots[slot].server,
				strerror(-sr->child[r].err));
		dev->replica_write_errors++;
		/* Only the regions it missed: the rest of the replica is
		 * as good as the others. */
		stripe_stale_mark_range(dev, slot, sr->ext_off, sr->bytes);
	}
	return stripe_stale_commit(dev);
}

/*
 * EACCES from a server: this host was fenced from its LUN.  The request
 * fails with EACCES whatever the other replicas did; no replica is marked
 * stale (the host is out, not the server).  true when that was the case.
 */
static bool write_fenced(struct stripe_dev *dev, struct stripe_req *sr)
{
	bool fenced = false;

	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		struct stripe_child *ch = &sr->child[r];

		if (!((sr->issued_mask | sr->target_mask) & (1u << r)) ||
		    ch->err != -EACCES)
			continue;
		stripe_fence_conflict(dev, ch->sc.srv);
		fenced = true;
	}
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		struct stripe_child *ch = &sr->child[STRIPE_MAX_REPLICAS + r];

		if ((sr->move_mask & (1u << r)) && ch->err == -EACCES) {
			stripe_fence_conflict(dev, ch->sc.srv);
			fenced = true;
		}
	}
	if (fenced) {
		if (sr->target_mask)
			stripe_resync_target_failed(dev, -EACCES);
		dev->reservation_conflicts++;
		stripe_req_complete(dev, sr, -EACCES);
	}
	return fenced;
}

static void write_finish(struct stripe_dev *dev, struct stripe_req *sr)
{
	bool blocker = sr->lock_blocker;
	uint32_t ok, failed;
	uint64_t gen = sr->wait_gen, tgen;

	TAILQ_REMOVE(&dev->writes, sr, link);
	sr->in_writes = false;
	sr->lock_blocker = false;
	if (write_fenced(dev, sr)) {
		if (blocker)
			stripe_lock_blocker_done(dev);
		return;
	}
	write_results(dev, sr, &ok, &failed, &tgen);
	gen = tgen > gen ? tgen : gen;
	if (!ok) {
		td_vbd_err(dev->drv->vbd,
			   "stripe: %s at sector %llu failed on every live "
			   "replica of column %u extent %u: %s",
			   td_op_name(sr->req->op),
			   (unsigned long long)sr->req->sector, sr->column,
			   sr->extent, strerror(sr->err ? -sr->err : EIO));
		stripe_req_complete(dev, sr, sr->err ? sr->err : -EIO);
	} else {
		if (failed) {
			uint64_t g = write_mark(dev, sr, failed);

			gen = g > gen ? g : gen;
		}
		if (failed || gen)
			dev->writes_degraded++;
		sr->err = 0;
		stripe_stale_wait(dev, sr, gen);
	}
	if (blocker)
		stripe_lock_blocker_done(dev);
}

static void write_done(struct stripe_cmd *sc, int err)
{
	struct stripe_child *ch = child_of(sc);
	struct stripe_req *sr = ch->sr;

	ch->err = err;
	if (err && !sr->err)
		sr->err = err;
	if (--sr->pending)
		return;
	if (sr->dev->closing) {
		/* Cut short: its regions stay hot in the activity log. */
		TAILQ_REMOVE(&sr->dev->writes, sr, link);
		sr->dev->al.aborted = true;
		td_complete(sr->req, sr->err);
		return;
	}
	write_finish(sr->dev, sr);
}

/* --- flush rounds -------------------------------------------------------------- */

static void round_end(struct stripe_dev *dev);

static void round_put(struct stripe_dev *dev)
{
	if (--dev->round_pending == 0)
		round_end(dev);
}

static void sync_done(struct stripe_cmd *sc, int err)
{
	sc->srv->sync_err = err;
	round_put(sc->srv->dev);
}

/*
 * Whether a round may go on without degraded server srv: every extent it
 * holds a live replica of has one on a server that is neither degraded
 * nor refused by the gate.
 */
static bool sync_skippable(struct stripe_dev *dev, struct stripe_server *srv)
{
	const struct stripe_map *m = &dev->map;

	for (uint32_t c = 0; c < m->columns; c++) {
		for (uint32_t j = 0; j < m->extents_per_column; j++) {
			bool mine = false, carried = false;

			for (uint32_t r = 0; r < m->replicas; r++) {
				const struct stripe_map_replica *rep =
					stripe_map_slot(m, c, j, r);
				struct stripe_server *other =
					&dev->servers[rep->server];

				if (!stripe_slot_usable(
					    m,
					    stripe_map_slot_index(m, c, j, r)))
					continue;
				if (other == srv)
					mine = true;
				else if (!rep->stale &&
					 other->gate != STRIPE_GATE_BAD &&
					 !stripe_server_degraded(dev, other))
					carried = true;
			}
			if (mine && !carried)
				return false;
		}
	}
	return true;
}

static void round_start(struct stripe_dev *dev)
{
	TAILQ_CONCAT(&dev->flush_cur, &dev->flush_next, wait_link);
	dev->round_active = true;
	dev->round_pending = 1; /* dropped below, after the loop */
	dev->flush_rounds++;
	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		struct stripe_server *srv = &dev->servers[i];

		srv->in_round = srv->live_slots > 0;
		srv->sync_err = 0;
		if (!srv->in_round)
			continue;
		memset(&srv->sync.io, 0, sizeof(srv->sync.io));
		srv->sync.io.op = ISCSI_CMD_SYNC;
		srv->sync.srv = srv;
		srv->sync.done = sync_done;
		dev->round_pending++;
		if (stripe_server_degraded(dev, srv) &&
		    sync_skippable(dev, srv))
			cmd_park(dev, &srv->sync);
		else
			stripe_cmd_submit(dev, &srv->sync);
	}
	round_put(dev);
}

/*
 * Some servers failed the round.  Returns 0 when every extent still has
 * a live replica on a server that succeeded (the others are marked stale,
 * *gen the generation to wait for), -EIO otherwise.
 */
static int round_failures(struct stripe_dev *dev, uint64_t *gen)
{
	const struct stripe_map *m = &dev->map;
	int ret = 0;

	for (uint32_t c = 0; c < m->columns; c++) {
		for (uint32_t j = 0; j < m->extents_per_column; j++) {
			bool good = false, bad = false;

			for (uint32_t r = 0; r < m->replicas; r++) {
				const struct stripe_map_replica *rep =
					stripe_map_slot(m, c, j, r);
				const struct stripe_server *srv =
					&dev->servers[rep->server];

				if (!stripe_slot_usable(
					    m, stripe_map_slot_index(m, c, j,
								     r)) ||
				    !srv->in_round)
					continue;
				/* Only a wholly clean replica vouches for
				 * every region of the extent. */
				if (srv->sync_err)
					bad = true;
				else if (!rep->stale)
					good = true;
			}
			if (bad && !good)
				ret = -EIO;
			if (!bad || !good)
				continue;
			for (uint32_t r = 0; r < m->replicas; r++) {
				size_t s = stripe_map_slot_index(m, c, j, r);

				if (stripe_slot_usable(m, s) &&
				    dev->servers[m->slots[s].server].sync_err)
					stripe_stale_set(dev, s, true);
			}
		}
	}
	*gen = stripe_stale_commit(dev);
	return ret;
}

/* A server refused the round with EACCES (fenced): count and log. */
static bool round_fenced(struct stripe_dev *dev)
{
	bool fenced = false;

	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		struct stripe_server *srv = &dev->servers[i];

		if (srv->in_round && srv->sync_err == -EACCES) {
			stripe_fence_conflict(dev, srv);
			fenced = true;
		}
	}
	if (fenced)
		dev->reservation_conflicts++;
	return fenced;
}

static void round_end(struct stripe_dev *dev)
{
	struct stripe_req *sr;
	uint64_t gen = 0;
	bool failed = false;
	int err = 0;

	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		struct stripe_server *srv = &dev->servers[i];

		if (!srv->in_round || !srv->sync_err)
			continue;
		failed = true;
		if (srv->sync_err == STRIPE_SKIPPED_ERR)
			td_vbd_err(dev->drv->vbd,
				   "stripe: SYNCHRONIZE CACHE not sent to "
				   "server %u: it is degraded (down or "
				   "reconnecting)",
				   i);
		else
			td_vbd_err(dev->drv->vbd,
				   "stripe: SYNCHRONIZE CACHE on server %u "
				   "failed: %s",
				   i, strerror(-srv->sync_err));
	}
	if (round_fenced(dev))
		err = -EACCES; /* no stale marks: the host is out */
	else if (failed && !dev->closing)
		err = round_failures(dev, &gen);
	dev->round_active = false;
	while ((sr = TAILQ_FIRST(&dev->flush_cur))) {
		TAILQ_REMOVE(&dev->flush_cur, sr, wait_link);
		sr->err = err;
		if (err)
			td_complete(sr->req, err);
		else
			stripe_stale_wait(dev, sr, gen);
	}
	if (!TAILQ_EMPTY(&dev->flush_next))
		round_start(dev);
}

/* --- submit -------------------------------------------------------------------- */

int stripe_io_submit(struct td_driver *drv, struct td_request *req)
{
	struct stripe_dev *dev = drv->data;
	struct stripe_req *sr = req->priv;
	struct stripe_loc loc;

	sr->req = req;
	sr->dev = dev;
	sr->err = 0;
	sr->issued_mask = 0;
	sr->al_held = false;
	if (req->op == TD_OP_FLUSH) {
		TAILQ_INSERT_TAIL(&dev->flush_next, sr, wait_link);
		if (!dev->round_active)
			round_start(dev);
		return 0;
	}
	if (req->op >= TD_OP_COUNT)
		return -EOPNOTSUPP;
	stripe_layout_locate(&dev->layout, req->sector << TD_SECTOR_SHIFT,
			     &loc);
	sr->column = loc.column;
	sr->extent = loc.extent;
	sr->ext_off = loc.extent_offset;
	sr->bytes = td_request_bytes(req);
	if (req->op != TD_OP_READ)
		stripe_alloc_write(dev, req->sector,
				   sr->bytes >> TD_SECTOR_SHIFT);
	if (req->op == TD_OP_READ)
		read_issue(dev, sr);
	else if (!stripe_al_enter(dev, sr))
		stripe_io_restart(dev, sr);
	return 0;
}

void stripe_io_close(struct stripe_dev *dev)
{
	td_loop_timer_cancel(&dev->gate_timer);
	if (dev->drv && dev->drv->loop)
		td_loop_defer_cancel(dev->drv->loop, &dev->fail_defer);
	TAILQ_INIT(&dev->failed);
	for (uint32_t i = 0; dev->servers && i < dev->nr_servers; i++) {
		TAILQ_INIT(&dev->servers[i].held);
		TAILQ_INIT(&dev->servers[i].parked);
	}
}
