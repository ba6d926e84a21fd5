/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-move.c - re-homing one replica slot (issue #19): MS_MOVE_BEGIN,
 * _COMMIT, _ABORT and _LIST (see stripe.x, ms_move_args).
 *
 * A move is one row in moves, keyed by its slot (vdisk, column, extent,
 * replica).  Begin places and locks NEW (taken from its server's free
 * extents like an allocation) and inserts the row; commit points the
 * slot's allocation row at NEW, frees OLD and deletes the row; abort frees
 * NEW and deletes the row.  Each runs in the caller's transaction, so a
 * master killed at any point leaves either the whole step or none of it:
 * NEW is always owned by exactly one of the move and the slot, OLD by the
 * slot until commit.
 *
 * A freed extent of a failed server goes back to its free ones as any
 * other, and placement never gives a failed server anything: it is
 * dropped, until the server is removed (which forgets its extents).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "master/server/store-int.h"

int master_store_fill_move(struct master_store *st, sqlite3_stmt *s,
			   ms_move *out)
{
	memset(out, 0, sizeof(*out));
	out->vdisk = master_strdup((const char *)sqlite3_column_text(s, 0));
	out->column = (u_int)sqlite3_column_int64(s, 1);
	out->extent = (u_int)sqlite3_column_int64(s, 2);
	out->replica = (u_int)sqlite3_column_int64(s, 3);
	out->old_server_id = (u_int)sqlite3_column_int64(s, 4);
	out->old_offset_bytes =
		(u_quad_t)sqlite3_column_int64(s, 5) * st->extent_bytes;
	out->new_server_id = (u_int)sqlite3_column_int64(s, 6);
	out->new_offset_bytes =
		(u_quad_t)sqlite3_column_int64(s, 7) * st->extent_bytes;
	out->reason = (ms_move_reason)sqlite3_column_int(s, 8);
	out->since = (u_quad_t)sqlite3_column_int64(s, 9);
	out->reached = (ms_domain)sqlite3_column_int(s, 10);
	out->wanted = (ms_domain)sqlite3_column_int(s, 11);
	return out->vdisk ? 0 : -ENOMEM;
}

static void bind_slot(sqlite3_stmt *s, const ms_move_args *a)
{
	master_store_bind_text(s, 1, a->vdisk);
	sqlite3_bind_int64(s, 2, a->column);
	sqlite3_bind_int64(s, 3, a->extent);
	sqlite3_bind_int64(s, 4, a->replica);
}

/* The slot's move: 1 (*m filled, *room too when not NULL), 0 none, -errno. */
static int move_get(struct master_store *st, const ms_move_args *a, ms_move *m,
		    int64_t *room)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_MOVE_GET);
	int rc, ret;

	bind_slot(s, a);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(s);
		return rc == SQLITE_DONE
			       ? 0
			       : master_store_sql_fail(st, "move", rc);
	}
	ret = master_store_fill_move(st, s, m);
	if (room)
		*room = sqlite3_column_int64(s, 12);
	sqlite3_reset(s);
	return ret ? ret : 1;
}

/* The slot's replica: its server and extent index; -errno. */
static int slot_get(struct master_store *st, const ms_move_args *a,
		    int64_t *server, int64_t *idx)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_REPLICA_GET);
	int rc;

	bind_slot(s, a);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*server = sqlite3_column_int64(s, 0);
		*idx = sqlite3_column_int64(s, 1);
	}
	sqlite3_reset(s);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc != SQLITE_DONE)
		return master_store_sql_fail(st, "move slot", rc);
	td_err("vdisk %s has no row for column %u extent %u replica %u: run "
	       "stripe-master --check",
	       a->vdisk, a->column, a->extent, a->replica);
	return -EIO;
}

/* Describe server id into *out. */
static int server_by_id(struct master_store *st, int64_t id, ms_server *out)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_BY_ID);
	int rc, ret;

	sqlite3_bind_int64(s, 1, id);
	if ((rc = sqlite3_step(s)) != SQLITE_ROW)
		ret = master_store_sql_fail(st, "move server", rc);
	else
		ret = master_store_fill_server(s, 0, out);
	sqlite3_reset(s);
	return ret;
}

/* Fill the MOVE body's servers from its move's ids. */
static int answer(struct master_store *st, ms_reply *rep, bool done,
		  bool changed)
{
	ms_move_result *r = &rep->body.ms_body_u.move;
	int ret;

	r->done = done;
	if ((ret = server_by_id(st, r->move.old_server_id, &r->old_server)) ||
	    (ret = server_by_id(st, r->move.new_server_id, &r->new_server)))
		return ret;
	return master_reply_ok(rep, changed);
}

/* Common checks: the slot, the server named; *srv filled when *ok. */
static int check_move_args(struct master_store *st, const ms_move_args *a,
			   ms_reply *rep, ms_server *srv, u_int *replicas,
			   bool *ok)
{
	struct master_shape shape;
	int ret = master_store_check_slot(st, a->vdisk, a->column, a->extent,
					  a->replica, &shape, rep, ok);

	if (ret || !*ok)
		return ret;
	*ok = false;
	*replicas = shape.replicas;
	if (!master_store_token_ok(a->target, MS_TARGET_MAX) ||
	    (a->reason != MS_MOVE_EVACUATE && a->reason != MS_MOVE_FAIL))
		return master_reply_fail(rep, MS_EINVAL,
					 "a target is 1-%d printable bytes "
					 "without spaces; a reason evacuate or "
					 "fail",
					 MS_TARGET_MAX);
	if ((ret = master_store_server_by_key(st, a->target, a->lun, srv)) < 0)
		return ret;
	if (!ret)
		return master_reply_fail(rep, MS_ENOENT,
					 "no server has target %s lun %u: see "
					 "'stripe-ctl server list'",
					 a->target, a->lun);
	*ok = true;
	return 0;
}

/* --- begin ----------------------------------------------------------------- */

/* Pool index of server id, or UINT32_MAX. */
static uint32_t pool_index(const struct master_pool *p, int64_t id)
{
	for (u_int i = 0; i < p->n; i++)
		if (p->id[i] == id)
			return i;
	return UINT32_MAX;
}

/* The servers of the extent's other replicas and of their move targets. */
static int load_siblings(struct master_store *st, const ms_move_args *a,
			 const struct master_pool *p, uint32_t *fixed,
			 uint32_t *nr)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_MOVE_SIBLINGS);
	int rc;

	*nr = 0;
	bind_slot(s, a);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW &&
	       *nr < MASTER_PLACE_MAX_FIXED) {
		uint32_t i = pool_index(p, sqlite3_column_int64(s, 0));

		if (i != UINT32_MAX)
			fixed[(*nr)++] = i;
	}
	sqlite3_reset(s);
	/* R-1 other replicas and their move targets: at most 2R-2 */
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return master_store_sql_fail(st, "move siblings", rc);
	return 0;
}

static int insert_move(struct master_store *st, const ms_move_args *a,
		       const ms_move *m, int64_t old_idx, int64_t new_idx,
		       const struct master_place_spread *sp)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_MOVE_INSERT);

	bind_slot(s, a);
	sqlite3_bind_int64(s, 5, m->old_server_id);
	sqlite3_bind_int64(s, 6, old_idx);
	sqlite3_bind_int64(s, 7, m->new_server_id);
	sqlite3_bind_int64(s, 8, new_idx);
	sqlite3_bind_int(s, 9, a->reason);
	sqlite3_bind_int64(s, 10, (sqlite3_int64)m->since);
	sqlite3_bind_int(s, 11, sp->reached);
	sqlite3_bind_int(s, 12, sp->wanted);
	sqlite3_bind_int64(s, 13, sp->room);
	return master_store_exec(st, s, "move insert");
}

/* Place and lock NEW for the slot whose replica is (old, old_idx). */
static int place_new(struct master_store *st, const ms_move_args *a,
		     u_int replicas, int64_t old, int64_t old_idx,
		     ms_reply *rep)
{
	ms_move *m = &rep->body.ms_body_u.move.move;
	struct master_place_spread sp = {0};
	struct master_pool pool;
	uint32_t fixed[MASTER_PLACE_MAX_FIXED], nr, chosen;
	int64_t new_idx;
	int ret = master_store_pool_load(st, &pool);

	if (!ret)
		ret = load_siblings(st, a, &pool, fixed, &nr);
	if (!ret)
		ret = master_place_one(
			pool.srv, pool.n, fixed, nr,
			nr + 1 > MS_MAX_REPLICAS ? MS_MAX_REPLICAS : nr + 1,
			pool_index(&pool, old), &chosen, &sp);
	if (ret == -ENOSPC)
		ret = master_reply_fail(
			rep, MS_ENOSPC,
			"no server may take a new replica of extent %u of "
			"column %u of vdisk %s: every server that is not "
			"draining or failed is full or on a host of another "
			"replica: add a server (stripe-ctl server add)",
			a->extent, a->column, a->vdisk);
	else if (!ret && !(ret = master_store_take_free(st, &pool, chosen, 1,
							&new_idx))) {
		m->old_server_id = (u_int)old;
		m->old_offset_bytes = (u_quad_t)old_idx * st->extent_bytes;
		m->new_server_id = (u_int)pool.id[chosen];
		m->new_offset_bytes = (u_quad_t)new_idx * st->extent_bytes;
		m->since = (u_quad_t)time(NULL);
		m->reached = (ms_domain)sp.reached;
		m->wanted = (ms_domain)sp.wanted;
		ret = insert_move(st, a, m, old_idx, new_idx, &sp);
	}
	master_store_pool_free(&pool);
	return ret;
}

static int fill_slot_keys(ms_move *m, const ms_move_args *a)
{
	m->vdisk = master_strdup(a->vdisk);
	m->column = a->column;
	m->extent = a->extent;
	m->replica = a->replica;
	m->reason = a->reason;
	return m->vdisk ? 0 : -ENOMEM;
}

int master_store_move_begin(struct master_store *st, const ms_move_args *a,
			    ms_reply *rep)
{
	ms_move *m = &rep->body.ms_body_u.move.move;
	int64_t server, idx;
	u_int replicas;
	ms_server old;
	bool ok;
	int ret = check_move_args(st, a, rep, &old, &replicas, &ok);

	if (ret || !ok)
		return ret;
	rep->body.kind = MS_BODY_MOVE;
	if ((ret = move_get(st, a, m, NULL)) < 0)
		goto out;
	if (ret && m->old_server_id == old.id) { /* a retry, or a re-run */
		ret = answer(st, rep, false, false);
		goto out;
	}
	if (ret) {
		ret = master_reply_fail(rep, MS_EEXIST,
					"column %u extent %u replica %u of "
					"vdisk %s is moving from server %u to "
					"server %u already: commit or abort "
					"that move first",
					a->column, a->extent, a->replica,
					a->vdisk, m->old_server_id,
					m->new_server_id);
		goto out;
	}
	if ((ret = fill_slot_keys(m, a)) ||
	    (ret = slot_get(st, a, &server, &idx)))
		goto out;
	if (server != old.id) { /* moved off old already: done */
		m->old_server_id = old.id;
		m->new_server_id = (u_int)server;
		m->new_offset_bytes = (u_quad_t)idx * st->extent_bytes;
		ret = answer(st, rep, true, false);
		goto out;
	}
	if ((ret = place_new(st, a, replicas, server, idx, rep)) ||
	    rep->status != MS_OK)
		goto out;
	td_info("vdisk %s column %u extent %u replica %u: moving from server "
		"%u extent %" PRId64 " to server %u extent %" PRIu64 " (%s)",
		a->vdisk, a->column, a->extent, a->replica, old.id, idx,
		m->new_server_id,
		(uint64_t)(m->new_offset_bytes / st->extent_bytes),
		a->reason == MS_MOVE_FAIL ? "server failed" : "evacuation");
	ret = answer(st, rep, false, true);
out:
	xdr_free((xdrproc_t)xdr_ms_server, (char *)&old);
	return ret;
}

/* --- commit and abort -------------------------------------------------------- */

/* The spread note of the slot's extent after commit. */
static int renote(struct master_store *st, const ms_move_args *a,
		  const ms_move *m, int64_t room)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SPREAD_DELETE_ONE);
	int ret;

	master_store_bind_text(s, 1, a->vdisk);
	sqlite3_bind_int64(s, 2, a->column);
	sqlite3_bind_int64(s, 3, a->extent);
	if ((ret = master_store_exec(st, s, "spread note delete")) ||
	    m->reached >= m->wanted)
		return ret;
	s = master_store_stmt(st, ST_SPREAD_INSERT);
	master_store_bind_text(s, 1, a->vdisk);
	sqlite3_bind_int64(s, 2, a->column);
	sqlite3_bind_int64(s, 3, a->extent);
	sqlite3_bind_int(s, 4, m->reached);
	sqlite3_bind_int(s, 5, m->wanted);
	sqlite3_bind_int64(s, 6, room);
	return master_store_exec(st, s, "spread note");
}

static int move_delete(struct master_store *st, const ms_move_args *a)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_MOVE_DELETE);

	bind_slot(s, a);
	return master_store_exec(st, s, "move delete");
}

/* Point the slot at NEW, forget the move, free OLD. */
static int apply_commit(struct master_store *st, const ms_move_args *a,
			const ms_move *m, int64_t room)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_REPLICA_MOVE);
	int ret;

	bind_slot(s, a);
	sqlite3_bind_int64(s, 5, m->new_server_id);
	sqlite3_bind_int64(
		s, 6, (sqlite3_int64)(m->new_offset_bytes / st->extent_bytes));
	if ((ret = move_delete(st, a)) ||
	    (ret = master_store_exec(st, s, "move commit")) ||
	    (ret = master_store_extent_free(
		     st, m->old_server_id,
		     (int64_t)(m->old_offset_bytes / st->extent_bytes))))
		return ret;
	return renote(st, a, m, room);
}

/*
 * No move for the slot: 1 when the slot's replica is the NEW given (the
 * move was committed), 0 when not; *m holds the slot's keys and replica.
 */
static int slot_is(struct master_store *st, const ms_move_args *a,
		   const ms_server *srv, ms_move *m)
{
	int64_t server, idx;
	int ret;

	if ((ret = fill_slot_keys(m, a)) ||
	    (ret = slot_get(st, a, &server, &idx)))
		return ret;
	m->old_server_id = (u_int)server;
	m->old_offset_bytes = (u_quad_t)idx * st->extent_bytes;
	m->new_server_id = (u_int)server;
	m->new_offset_bytes = m->old_offset_bytes;
	return server == srv->id && m->new_offset_bytes == a->offset_bytes;
}

static int refuse_other(const ms_move_args *a, const ms_move *m, ms_reply *rep)
{
	return master_reply_fail(rep, MS_EEXIST,
				 "column %u extent %u replica %u of vdisk %s "
				 "moves to server %u at offset %" PRIu64
				 ", not to %s lun %u at offset %" PRIu64
				 ": see 'stripe-ctl extent move list'",
				 a->column, a->extent, a->replica, a->vdisk,
				 m->new_server_id,
				 (uint64_t)m->new_offset_bytes, a->target,
				 a->lun, (uint64_t)a->offset_bytes);
}

/* The move the args name: 1 found (*m), 0 none (*m: the slot), -errno;
 * *same: the NEW given is the move's (or, without a move, the slot's). */
static int find_move(struct master_store *st, const ms_move_args *a,
		     const ms_server *srv, ms_move *m, int64_t *room,
		     bool *same)
{
	int ret = move_get(st, a, m, room);

	if (ret == 1)
		*same = m->new_server_id == srv->id &&
			m->new_offset_bytes == a->offset_bytes;
	else if (!ret && (ret = slot_is(st, a, srv, m)) >= 0) {
		*same = ret == 1;
		ret = 0;
	}
	return ret;
}

int master_store_move_commit(struct master_store *st, const ms_move_args *a,
			     ms_reply *rep)
{
	ms_move *m = &rep->body.ms_body_u.move.move;
	int64_t held, targets, room = 0;
	bool ok, same = false, failed = false;
	u_int replicas;
	ms_server srv;
	int ret = check_move_args(st, a, rep, &srv, &replicas, &ok);

	if (ret || !ok)
		return ret;
	rep->body.kind = MS_BODY_MOVE;
	if ((ret = find_move(st, a, &srv, m, &room, &same)) < 0)
		goto out;
	if (!ret && same) { /* committed already */
		ret = answer(st, rep, true, false);
		goto out;
	}
	if (!ret) {
		ret = master_reply_fail(rep, MS_ENOENT,
					"column %u extent %u replica %u of "
					"vdisk %s has no move in progress (its "
					"replica is on server %u): see "
					"'stripe-ctl extent move list'",
					a->column, a->extent, a->replica,
					a->vdisk, m->new_server_id);
		goto out;
	}
	if (!same) {
		ret = refuse_other(a, m, rep);
		goto out;
	}
	if ((ret = master_store_server_state(st, srv.id, &failed, &held,
					     &targets)) < 0)
		goto out;
	if (failed) {
		ret = master_reply_fail(rep, MS_EINVAL,
					"server %u, the move's new server, "
					"failed: abort the move and begin it "
					"again",
					srv.id);
		goto out;
	}
	if ((ret = apply_commit(st, a, m, room)))
		goto out;
	td_info("vdisk %s column %u extent %u replica %u: moved from server "
		"%u to server %u",
		a->vdisk, a->column, a->extent, a->replica, m->old_server_id,
		m->new_server_id);
	ret = answer(st, rep, true, true);
out:
	xdr_free((xdrproc_t)xdr_ms_server, (char *)&srv);
	return ret;
}

int master_store_move_abort(struct master_store *st, const ms_move_args *a,
			    ms_reply *rep)
{
	ms_move *m = &rep->body.ms_body_u.move.move;
	bool ok, same = false;
	u_int replicas;
	ms_server srv;
	int ret = check_move_args(st, a, rep, &srv, &replicas, &ok);

	if (ret || !ok)
		return ret;
	rep->body.kind = MS_BODY_MOVE;
	if ((ret = find_move(st, a, &srv, m, NULL, &same)) < 0)
		goto out;
	if (!ret && same)
		ret = master_reply_fail(rep, MS_EEXIST,
					"column %u extent %u replica %u of "
					"vdisk %s was committed to server %u "
					"already: nothing to abort",
					a->column, a->extent, a->replica,
					a->vdisk, srv.id);
	else if (!ret) /* aborted already, or never begun */
		ret = answer(st, rep, true, false);
	else if (!same)
		ret = refuse_other(a, m, rep);
	else if (!(ret = move_delete(st, a)) &&
		 !(ret = master_store_extent_free(
			   st, m->new_server_id,
			   (int64_t)(m->new_offset_bytes /
				     st->extent_bytes)))) {
		td_info("vdisk %s column %u extent %u replica %u: move to "
			"server %u aborted",
			a->vdisk, a->column, a->extent, a->replica,
			m->new_server_id);
		ret = answer(st, rep, true, true);
	}
out:
	xdr_free((xdrproc_t)xdr_ms_server, (char *)&srv);
	return ret;
}

/* --- list ------------------------------------------------------------------- */

static int bind_list(struct master_store *st, const ms_move_list_args *a,
		     sqlite3_stmt *s, ms_reply *rep, bool *ok)
{
	ms_server srv;
	int ret;

	*ok = false;
	master_store_bind_text(s, 1, a->vdisk);
	sqlite3_bind_int(s, 2, a->has_server);
	sqlite3_bind_int(s, 4, a->has_cursor);
	master_store_bind_text(s, 5, a->after_vdisk ? a->after_vdisk : "");
	sqlite3_bind_int64(s, 6, a->after_column);
	sqlite3_bind_int64(s, 7, a->after_extent);
	sqlite3_bind_int64(s, 8, a->after_replica);
	sqlite3_bind_int64(s, 9, (sqlite3_int64)a->limit + 1);
	if (!a->has_server) {
		*ok = true;
		return 0;
	}
	if (!master_store_token_ok(a->target, MS_TARGET_MAX))
		return master_reply_fail(rep, MS_EINVAL, "bad target");
	if ((ret = master_store_server_by_key(st, a->target, a->lun, &srv)) <=
	    0)
		return ret < 0 ? ret
			       : master_reply_fail(rep, MS_ENOENT,
						   "no server has target %s "
						   "lun %u",
						   a->target, a->lun);
	sqlite3_bind_int64(s, 3, srv.id);
	xdr_free((xdrproc_t)xdr_ms_server, (char *)&srv);
	*ok = true;
	return 0;
}

int master_store_move_list(struct master_store *st, const ms_move_list_args *a,
			   ms_reply *rep)
{
	ms_move_page *page = &rep->body.ms_body_u.moves;
	sqlite3_stmt *s = master_store_stmt(st, ST_MOVE_LIST);
	int rc = SQLITE_DONE, ret;
	bool ok;

	if (!a->limit || a->limit > MS_MAX_PAGE || !a->vdisk ||
	    (a->vdisk[0] && !master_vdisk_id_ok(a->vdisk)))
		return master_reply_fail(rep, MS_EINVAL,
					 "limit must be 1-%d and vdisk a "
					 "valid id or empty",
					 MS_MAX_PAGE);
	if ((ret = bind_list(st, a, s, rep, &ok)) || !ok)
		return ret;
	rep->body.kind = MS_BODY_MOVES;
	if (!(page->moves.moves_val = calloc(a->limit, sizeof(ms_move))))
		return -ENOMEM;
	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (page->moves.moves_len == a->limit) {
			page->more = true;
			break;
		}
		ret = master_store_fill_move(
			st, s, &page->moves.moves_val[page->moves.moves_len++]);
	}
	sqlite3_reset(s);
	if (!ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "move list", rc);
	return ret ? ret : master_reply_ok(rep, false);
}
