/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-vdisk.c - virtual disks: MS_VDISK_ALLOC, _LOOKUP, _RELEASE, _LIST,
 * _GROW (see store.h and stripe.x).
 *
 * An allocation locks each extent with a row in allocations holding the
 * disk id and the extent's place in the disk (column, extent, replica);
 * the answer to an allocation and to every later lookup is read back from
 * those rows by one function (build_vdisk), so a repeated allocation
 * returns exactly what the first one returned.
 *
 * MS_REPLICA_STATE sets the stale flag of one of those rows; lookups and
 * listings report it.
 *
 * Failure domains (issue #19): placement reports per extent the domain its
 * replicas reached; the extents below the widest the labels offered get a
 * row in spread_notes, answered in ms_vdisk.spread by every lookup.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/server/placement.h"
#include "master/server/store-int.h"

/* 1 found (*shape filled), 0 not, -errno. */
static int vdisk_get(struct master_store *st, const char *id,
		     struct master_shape *shape)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_VDISK_GET);
	int rc;

	master_store_bind_text(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return master_store_sql_fail(st, "vdisk lookup", rc);
	shape->columns = (u_int)sqlite3_column_int64(s, 0);
	shape->extents_per_column = (u_int)sqlite3_column_int64(s, 1);
	shape->replicas = (u_int)sqlite3_column_int64(s, 2);
	sqlite3_reset(s);
	return 1;
}

int master_store_vdisk_exists(struct master_store *st, const char *id)
{
	struct master_shape shape;

	return vdisk_get(st, id, &shape);
}

static int build_extents(struct master_store *st, const char *id, size_t n,
			 ms_vdisk *v)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_VDISK_EXTENTS);
	ms_extent *e = calloc(n, sizeof(*e));
	size_t got = 0;
	int rc;

	if (!(v->extents.extents_val = e))
		return -ENOMEM;
	master_store_bind_text(s, 1, id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && got < n) {
		e[got].server_id = (u_int)sqlite3_column_int64(s, 0);
		e[got].offset_bytes =
			(u_quad_t)sqlite3_column_int64(s, 1) * st->extent_bytes;
		e[got].stale = sqlite3_column_int(s, 2) != 0;
		v->extents.extents_len = (u_int)++got;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return master_store_sql_fail(st, "vdisk extents", rc);
	if (got != n || rc == SQLITE_ROW) {
		td_err("vdisk %s owns %s than its %zu extents: run "
		       "stripe-master --check",
		       id, got < n ? "fewer" : "more", n);
		return -EIO;
	}
	return 0;
}

static int cmp_u_int(const void *a, const void *b)
{
	u_int x = *(const u_int *)a, y = *(const u_int *)b;

	return (x > y) - (x < y);
}

/* Append server id's description, and its id to failed_servers when it
 * failed. */
static int add_server(struct master_store *st, u_int id, ms_vdisk *v)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_BY_ID);
	ms_server *out = &v->servers.servers_val[v->servers.servers_len];
	bool failed = false;
	int rc, ret;

	sqlite3_bind_int64(s, 1, id);
	if ((rc = sqlite3_step(s)) != SQLITE_ROW)
		ret = master_store_sql_fail(st, "vdisk server", rc);
	else
		ret = master_store_fill_server(s, 0, out);
	v->servers.servers_len++;
	sqlite3_reset(s);
	if (!ret && (ret = master_store_server_failed(st, id, &failed)) == 1)
		ret = 0;
	if (!ret && failed)
		v->failed_servers.failed_servers_val
			[v->failed_servers.failed_servers_len++] = id;
	return ret;
}

/* Describe every server the extents and moves name, in id order. */
static int build_servers(struct master_store *st, ms_vdisk *v)
{
	u_int n = v->extents.extents_len + v->moves.moves_len;
	u_int *ids = malloc(n * sizeof(*ids));
	ms_server *list = calloc(n, sizeof(*list));
	u_int *failed = calloc(n, sizeof(*failed));
	int ret = ids && list && failed ? 0 : -ENOMEM;

	v->servers.servers_val = list;
	v->failed_servers.failed_servers_val = failed;
	for (u_int i = 0; !ret && i < v->extents.extents_len; i++)
		ids[i] = v->extents.extents_val[i].server_id;
	for (u_int i = 0; !ret && i < v->moves.moves_len; i++)
		ids[v->extents.extents_len + i] =
			v->moves.moves_val[i].new_server_id;
	if (!ret)
		qsort(ids, n, sizeof(*ids), cmp_u_int);
	for (u_int i = 0; !ret && i < n; i++)
		if (!i || ids[i] != ids[i - 1])
			ret = add_server(st, ids[i], v);
	free(ids);
	return ret;
}

/* The disk's moves in progress, in slot order (at most max). */
static int build_moves(struct master_store *st, const char *id, size_t max,
		       ms_vdisk *v)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_VDISK_MOVES);
	ms_move *m = NULL, *grown;
	size_t got = 0, cap = 0;
	int rc = SQLITE_DONE, ret = 0;

	master_store_bind_text(s, 1, id);
	while (!ret && got < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (got == cap) {
			cap = cap ? cap * 2 : 8;
			if (!(grown = realloc(m, cap * sizeof(*m)))) {
				ret = -ENOMEM;
				break;
			}
			m = grown;
		}
		ret = master_store_fill_move(st, s, &m[got++]);
	}
	sqlite3_reset(s);
	v->moves.moves_val = m;
	v->moves.moves_len = (u_int)got;
	if (!ret && got < max && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "vdisk moves", rc);
	return ret;
}

/* The disk's spread notes, in (column, extent) order. */
static int build_spread(struct master_store *st, const char *id, size_t max,
			ms_vdisk *v)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SPREAD_GET);
	ms_spread_note *n = NULL, *grown;
	size_t got = 0, cap = 0;
	int rc, ret = 0;

	master_store_bind_text(s, 1, id);
	while (!ret && got < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (got == cap) {
			cap = cap ? cap * 2 : 16;
			if (!(grown = realloc(n, cap * sizeof(*n)))) {
				ret = -ENOMEM;
				break;
			}
			n = grown;
		}
		n[got].column = (u_int)sqlite3_column_int64(s, 0);
		n[got].extent = (u_int)sqlite3_column_int64(s, 1);
		n[got].reached = (ms_domain)sqlite3_column_int(s, 2);
		n[got].wanted = (ms_domain)sqlite3_column_int(s, 3);
		n[got++].room = (u_int)sqlite3_column_int64(s, 4);
	}
	sqlite3_reset(s);
	v->spread.spread_val = n;
	v->spread.spread_len = (u_int)got;
	if (!ret && got < max && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "vdisk spread", rc);
	return ret;
}

/* The body of a lookup: the disk as its extents' rows say. */
static int build_vdisk(struct master_store *st, const char *id,
		       const struct master_shape *shape, ms_reply *rep)
{
	ms_vdisk *v = &rep->body.ms_body_u.vdisk;
	size_t n = (size_t)shape->columns * shape->extents_per_column *
		   shape->replicas;
	int ret;

	rep->body.kind = MS_BODY_VDISK;
	v->columns = shape->columns;
	v->extents_per_column = shape->extents_per_column;
	v->replicas = shape->replicas;
	v->extent_size_bytes = st->extent_bytes;
	if (!(v->id = master_strdup(id)))
		return -ENOMEM;
	if ((ret = build_extents(st, id, n, v)) ||
	    (ret = build_spread(st, id, n / shape->replicas, v)) ||
	    (ret = build_moves(st, id, n, v)))
		return ret;
	return build_servers(st, v);
}

/* --- allocation ----------------------------------------------------------- */

/*
 * Every server, in id order (struct master_pool); a draining one with no
 * free extent (its labels still count for the widest failure domain
 * wanted, so that a disk made while a site drains is reported as not
 * spread over sites); a failed one gone (no labels, no extents).
 */
void master_store_pool_free(struct master_pool *p)
{
	for (u_int i = 0; p->srv && i < p->n; i++) {
		free((char *)p->srv[i].host);
		free((char *)p->srv[i].rack);
		free((char *)p->srv[i].site);
	}
	free(p->id);
	free(p->next_fresh);
	free(p->srv);
}

/* Make room for one more server in the pool. */
static int pool_grow(struct master_pool *p, u_int *cap)
{
	u_int n = *cap ? *cap * 2 : 16;
	int64_t *id = realloc(p->id, n * sizeof(*id));
	int64_t *fresh;
	struct master_place_server *srv;

	if (!id)
		return -ENOMEM;
	p->id = id;
	if (!(fresh = realloc(p->next_fresh, n * sizeof(*fresh))))
		return -ENOMEM;
	p->next_fresh = fresh;
	if (!(srv = realloc(p->srv, n * sizeof(*srv))))
		return -ENOMEM;
	p->srv = srv;
	*cap = n;
	return 0;
}

int master_store_pool_load(struct master_store *st, struct master_pool *p)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_PLACE_SERVERS);
	int rc = SQLITE_DONE, ret = 0;
	u_int cap = 0;

	memset(p, 0, sizeof(*p));
	while (!ret && p->n < MS_MAX_SERVERS &&
	       (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (p->n == cap && (ret = pool_grow(p, &cap)))
			break;
		struct master_place_server *srv = &p->srv[p->n];

		p->id[p->n++] = sqlite3_column_int64(s, 0);
		srv->host =
			master_strdup((const char *)sqlite3_column_text(s, 1));
		srv->free = (uint32_t)sqlite3_column_int64(s, 2);
		p->next_fresh[p->n - 1] = sqlite3_column_int64(s, 3);
		srv->rack =
			master_strdup((const char *)sqlite3_column_text(s, 4));
		srv->site =
			master_strdup((const char *)sqlite3_column_text(s, 5));
		srv->gone = sqlite3_column_int(s, 7) != 0;
		if (!sqlite3_column_int(s, 6) && !srv->gone)
			p->active++;
		if (!srv->host || !srv->rack || !srv->site)
			ret = -ENOMEM;
	}
	sqlite3_reset(s);
	if (!ret && rc != SQLITE_DONE && rc != SQLITE_ROW)
		ret = master_store_sql_fail(st, "placement servers", rc);
	return ret;
}

/*
 * k free extents of pool server i into idx[]: released ones first (lowest
 * first), then never used ones from next_fresh up.  Updates the server's
 * counters.
 */
int master_store_take_free(struct master_store *st, struct master_pool *p,
			   u_int i, uint32_t k, int64_t *idx)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_RELEASED_LOWEST);
	uint32_t got = 0, reused;
	int rc = SQLITE_DONE, ret;

	sqlite3_bind_int64(s, 1, p->id[i]);
	sqlite3_bind_int64(s, 2, k);
	while (got < k && (rc = sqlite3_step(s)) == SQLITE_ROW)
		idx[got++] = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return master_store_sql_fail(st, "released extents", rc);
	s = master_store_stmt(st, ST_RELEASED_TAKE);
	sqlite3_bind_int64(s, 1, p->id[i]);
	for (reused = 0; reused < got; reused++) {
		sqlite3_bind_int64(s, 2, idx[reused]);
		if ((ret = master_store_exec(st, s, "released take")))
			return ret;
	}
	while (got < k)
		idx[got++] = p->next_fresh[i]++;
	s = master_store_stmt(st, ST_SERVER_TAKE);
	sqlite3_bind_int64(s, 1, p->id[i]);
	sqlite3_bind_int64(s, 2, k);
	sqlite3_bind_int64(s, 3, p->next_fresh[i]);
	return master_store_exec(st, s, "server take");
}

static int insert_allocation(struct master_store *st, const char *vdisk,
			     const uint32_t at[3], int64_t server, int64_t idx)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_ALLOC_INSERT);

	master_store_bind_text(s, 1, vdisk);
	sqlite3_bind_int64(s, 2, at[0]);
	sqlite3_bind_int64(s, 3, at[1]);
	sqlite3_bind_int64(s, 4, at[2]);
	sqlite3_bind_int64(s, 5, server);
	sqlite3_bind_int64(s, 6, idx);
	return master_store_exec(st, s, "allocation insert");
}

/*
 * Lock the placed extents, in slot order, as extents first_ext.. of their
 * columns (0 for a new disk; the old extents_per_column for a grow).
 * base[i] is where pool server i's extent indices start in idx[].
 */
static int take_all(struct master_store *st, const char *vdisk,
		    const struct master_shape *sh, uint32_t first_ext,
		    struct master_pool *p, const uint32_t *slots, size_t n)
{
	int64_t *idx = malloc(n * sizeof(*idx));
	size_t *base = calloc(p->n + 1, sizeof(*base));
	int ret = idx && base ? 0 : -ENOMEM;

	for (size_t i = 0; !ret && i < n; i++)
		base[slots[i] + 1]++;
	for (u_int i = 0; !ret && i < p->n; i++) {
		uint32_t k = (uint32_t)base[i + 1];

		base[i + 1] += base[i];
		if (k)
			ret = master_store_take_free(st, p, i, k,
						     &idx[base[i]]);
	}
	for (size_t i = 0; !ret && i < n; i++) {
		uint32_t at[3] = {
			(uint32_t)(i / sh->replicas / sh->extents_per_column),
			first_ext + (uint32_t)(i / sh->replicas %
					       sh->extents_per_column),
			(uint32_t)(i % sh->replicas)};

		ret = insert_allocation(st, vdisk, at, p->id[slots[i]],
					idx[base[slots[i]]++]);
	}
	free(idx);
	free(base);
	return ret;
}

static int refuse_nospc(const struct master_pool *p, const ms_alloc_args *a,
			ms_reply *rep)
{
	uint64_t free_extents = 0;

	for (u_int i = 0; i < p->n; i++)
		free_extents += p->srv[i].free;
	return master_reply_fail(
		rep, MS_ENOSPC,
		"vdisk %s needs %u x %u x %u extents, each extent's %u "
		"replicas on distinct hosts; the %u servers that are not "
		"draining have %" PRIu64 " free extents: add servers "
		"(stripe-ctl server add) or ask for fewer replicas",
		a->id, a->columns, a->extents_per_column, a->replicas,
		a->replicas, p->active, free_extents);
}

/* A spread note for every extent placed below the level wanted; sh and
 * first_ext as for take_all. */
static int insert_spread(struct master_store *st, const char *id,
			 const struct master_shape *sh, uint32_t first_ext,
			 const struct master_place_spread *sp)
{
	size_t n = (size_t)sh->columns * sh->extents_per_column;
	sqlite3_stmt *s;
	int ret = 0;

	for (size_t i = 0; !ret && i < n; i++) {
		if (sp[i].reached >= sp[i].wanted)
			continue;
		s = master_store_stmt(st, ST_SPREAD_INSERT);
		master_store_bind_text(s, 1, id);
		sqlite3_bind_int64(s, 2,
				   (sqlite3_int64)(i / sh->extents_per_column));
		sqlite3_bind_int64(
			s, 3,
			first_ext +
				(sqlite3_int64)(i % sh->extents_per_column));
		sqlite3_bind_int(s, 4, sp[i].reached);
		sqlite3_bind_int(s, 5, sp[i].wanted);
		sqlite3_bind_int64(s, 6, sp[i].room);
		ret = master_store_exec(st, s, "spread note");
	}
	return ret;
}

static int insert_vdisk(struct master_store *st, const ms_alloc_args *a)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_VDISK_INSERT);

	master_store_bind_text(s, 1, a->id);
	sqlite3_bind_int64(s, 2, a->columns);
	sqlite3_bind_int64(s, 3, a->extents_per_column);
	sqlite3_bind_int64(s, 4, a->replicas);
	return master_store_exec(st, s, "vdisk insert");
}

/* Place and lock a new disk's extents; the caller answers with them. */
static int allocate(struct master_store *st, const ms_alloc_args *a,
		    const struct master_shape *sh, ms_reply *rep, bool *placed)
{
	size_t n = (size_t)a->columns * a->extents_per_column * a->replicas;
	uint32_t *slots = malloc(n * sizeof(*slots));
	struct master_place_spread *sp = calloc(n / a->replicas, sizeof(*sp));
	struct master_pool pool;
	int ret = slots && sp ? master_store_pool_load(st, &pool) : -ENOMEM;

	*placed = false;
	if (!ret) {
		ret = master_place_spread(pool.srv, pool.n, a->columns,
					  a->extents_per_column, a->replicas,
					  slots, sp);
		if (ret == -ENOSPC)
			ret = refuse_nospc(&pool, a, rep);
		else if (!ret && !(ret = insert_vdisk(st, a)) &&
			 !(ret = take_all(st, a->id, sh, 0, &pool, slots, n)))
			ret = insert_spread(st, a->id, sh, 0, sp);
		*placed = !ret && rep->status == MS_OK;
	}
	if (slots && sp)
		master_store_pool_free(&pool);
	free(slots);
	free(sp);
	return ret;
}

static int check_alloc_args(const struct master_store *st,
			    const ms_alloc_args *a, ms_reply *rep, bool *ok)
{
	uint64_t n = (uint64_t)a->columns * a->extents_per_column * a->replicas;

	*ok = false;
	if (!master_vdisk_id_ok(a->id))
		return master_reply_fail(rep, MS_EINVAL,
					 "a vdisk id is 1-%d of "
					 "[A-Za-z0-9._-]",
					 MS_VDISK_ID_MAX);
	if (!a->columns || a->columns > MS_MAX_COLUMNS || !a->replicas ||
	    a->replicas > MS_MAX_REPLICAS || !a->extents_per_column ||
	    n > MS_MAX_SLOTS)
		return master_reply_fail(
			rep, MS_EINVAL,
			"%u columns x %u extents x %u replicas: columns must "
			"be 1-%d, replicas 1-%d, and the product at most %d",
			a->columns, a->extents_per_column, a->replicas,
			MS_MAX_COLUMNS, MS_MAX_REPLICAS, MS_MAX_SLOTS);
	if (a->extent_size_bytes != st->extent_bytes)
		return master_reply_fail(rep, MS_EINVAL,
					 "the master's extent size is %" PRIu64
					 " bytes, not %" PRIu64
					 ": lay the disk out again with it",
					 st->extent_bytes,
					 (uint64_t)a->extent_size_bytes);
	*ok = true;
	return 0;
}

int master_store_vdisk_alloc(struct master_store *st, const ms_alloc_args *a,
			     ms_reply *rep)
{
	struct master_shape want = {a->columns, a->extents_per_column,
				    a->replicas};
	struct master_shape have;
	bool ok, placed;
	int ret = check_alloc_args(st, a, rep, &ok);

	if (ret || !ok)
		return ret;
	if ((ret = vdisk_get(st, a->id, &have)) < 0)
		return ret;
	if (ret && memcmp(&have, &want, sizeof(want)))
		return master_reply_fail(
			rep, MS_EEXIST,
			"vdisk %s exists with %u columns x %u extents x %u "
			"replicas; this call asks for %u x %u x %u: destroy it "
			"first or choose another name",
			a->id, have.columns, have.extents_per_column,
			have.replicas, want.columns, want.extents_per_column,
			want.replicas);
	if (ret) /* the same allocation again: answer what it got */
		return (ret = build_vdisk(st, a->id, &have, rep))
			       ? ret
			       : master_reply_ok(rep, false);
	if ((uint64_t)a->columns * a->extents_per_column * a->replicas >
	    st->max_alloc_extents)
		return master_reply_fail(
			rep, MS_EINVAL,
			"vdisk %s needs %u x %u x %u = %" PRIu64
			" extents; this master allocates at most %u in one "
			"call (stripe-master --max-alloc-extents, up to %d: "
			"the single-threaded master answers nobody else "
			"meanwhile, ~4 us per extent): use fewer, larger "
			"extents (a master with a larger --extent-size)",
			a->id, a->columns, a->extents_per_column, a->replicas,
			(uint64_t)a->columns * a->extents_per_column *
				a->replicas,
			st->max_alloc_extents, MS_MAX_SLOTS);
	if ((ret = allocate(st, a, &want, rep, &placed)) || !placed)
		return ret;
	if ((ret = build_vdisk(st, a->id, &want, rep)))
		return ret;
	td_dbg("vdisk %s allocated: %u x %u x %u extents", a->id, a->columns,
	       a->extents_per_column, a->replicas);
	return master_reply_ok(rep, true);
}

/* --- grow (issue #21) ------------------------------------------------------- */

/*
 * Place and lock the extents that take disk id from have to want extents
 * per column: the added ones are placed as a disk of their own (same
 * columns and replicas, want - have extents each), so the spread rule puts
 * each (column, replica) on the server it prefers for the old extents.
 */
static int grow_place(struct master_store *st, const char *id,
		      const struct master_shape *have, u_int want,
		      ms_reply *rep, bool *placed)
{
	struct master_shape add = {
		have->columns, want - have->extents_per_column, have->replicas};
	size_t n = (size_t)add.columns * add.extents_per_column * add.replicas;
	uint32_t *slots = malloc(n * sizeof(*slots));
	struct master_place_spread *sp = calloc(n / add.replicas, sizeof(*sp));
	struct master_pool pool;
	ms_alloc_args a = {(char *)id, add.columns, add.extents_per_column,
			   add.replicas, st->extent_bytes};
	int ret = slots && sp ? master_store_pool_load(st, &pool) : -ENOMEM;

	*placed = false;
	if (!ret) {
		ret = master_place_spread(pool.srv, pool.n, add.columns,
					  add.extents_per_column, add.replicas,
					  slots, sp);
		if (ret == -ENOSPC)
			ret = refuse_nospc(&pool, &a, rep);
		else if (!ret && !(ret = take_all(st, id, &add,
						  have->extents_per_column,
						  &pool, slots, n)))
			ret = insert_spread(st, id, &add,
					    have->extents_per_column, sp);
		*placed = !ret && rep->status == MS_OK;
	}
	if (slots && sp)
		master_store_pool_free(&pool);
	free(slots);
	free(sp);
	return ret;
}

/* Refuse a grow the caps forbid; *ok true when it may go ahead. */
static int grow_check(const struct master_store *st, const char *id,
		      const struct master_shape *have, u_int want,
		      ms_reply *rep, bool *ok)
{
	uint64_t total = (uint64_t)have->columns * want * have->replicas;
	uint64_t added = (uint64_t)have->columns *
			 (want - have->extents_per_column) * have->replicas;

	*ok = false;
	if (total > MS_MAX_SLOTS)
		return master_reply_fail(
			rep, MS_EINVAL,
			"vdisk %s would have %u columns x %u extents x %u "
			"replicas = %" PRIu64 " extents, more than %d: use a "
			"new disk with larger extents",
			id, have->columns, want, have->replicas, total,
			MS_MAX_SLOTS);
	if (added > st->max_alloc_extents)
		return master_reply_fail(
			rep, MS_EINVAL,
			"growing vdisk %s adds %" PRIu64 " extents; this "
			"master allocates at most %u in one call "
			"(stripe-master --max-alloc-extents): grow it in "
			"smaller steps",
			id, added, st->max_alloc_extents);
	*ok = true;
	return 0;
}

int master_store_vdisk_grow(struct master_store *st, const ms_grow_args *a,
			    ms_reply *rep)
{
	struct master_shape have;
	sqlite3_stmt *s;
	bool ok, placed;
	int ret;

	if (!master_vdisk_id_ok(a->id))
		return master_reply_fail(rep, MS_EINVAL,
					 "a vdisk id is 1-%d of "
					 "[A-Za-z0-9._-]",
					 MS_VDISK_ID_MAX);
	if ((ret = vdisk_get(st, a->id, &have)) <= 0)
		return ret < 0 ? ret
			       : master_reply_fail(rep, MS_ENOENT,
						   "no vdisk %s: see "
						   "'stripe-ctl vdisk list'",
						   a->id);
	if (a->extents_per_column <= have.extents_per_column) /* a retry */
		return (ret = build_vdisk(st, a->id, &have, rep))
			       ? ret
			       : master_reply_ok(rep, false);
	if ((ret = grow_check(st, a->id, &have, a->extents_per_column, rep,
			      &ok)) ||
	    !ok)
		return ret;
	if ((ret = grow_place(st, a->id, &have, a->extents_per_column, rep,
			      &placed)) ||
	    !placed)
		return ret;
	s = master_store_stmt(st, ST_VDISK_GROW);
	master_store_bind_text(s, 1, a->id);
	sqlite3_bind_int64(s, 2, a->extents_per_column);
	if ((ret = master_store_exec(st, s, "vdisk grow")))
		return ret;
	td_info("vdisk %s grown: %u -> %u extents per column", a->id,
		have.extents_per_column, a->extents_per_column);
	have.extents_per_column = a->extents_per_column;
	return (ret = build_vdisk(st, a->id, &have, rep))
		       ? ret
		       : master_reply_ok(rep, true);
}

/* --- lookup, release, list ------------------------------------------------- */

int master_store_vdisk_lookup(struct master_store *st, const char *id,
			      ms_reply *rep)
{
	struct master_shape have;
	int ret;

	if (!master_vdisk_id_ok(id))
		return master_reply_fail(rep, MS_EINVAL, "bad vdisk id");
	if ((ret = vdisk_get(st, id, &have)) <= 0)
		return ret < 0 ? ret
			       : master_reply_fail(rep, MS_ENOENT,
						   "no vdisk %s: see "
						   "'stripe-ctl vdisk list'",
						   id);
	ret = build_vdisk(st, id, &have, rep);
	return ret ? ret : master_reply_ok(rep, false);
}

int master_store_vdisk_release(struct master_store *st, const char *id,
			       ms_reply *rep)
{
	struct master_shape have;
	sqlite3_stmt *s;
	int ret;

	if (!master_vdisk_id_ok(id))
		return master_reply_fail(rep, MS_EINVAL, "bad vdisk id");
	if ((ret = vdisk_get(st, id, &have)) <= 0) /* released already */
		return ret < 0 ? ret : master_reply_ok(rep, false);
	/*
	 * Counters first: they read the rows the next two statements move.
	 * Moves in progress first: their new extents are freed too.
	 */
	for (enum master_store_stmt k = ST_VDISK_MOVES_GIVE_BACK;
	     k <= ST_VDISK_MOVES_DELETE; k++) {
		s = master_store_stmt(st, k);
		master_store_bind_text(s, 1, id);
		if ((ret = master_store_exec(st, s, "vdisk moves release")))
			return ret;
	}
	for (enum master_store_stmt k = ST_VDISK_GIVE_BACK; k <= ST_VDISK_FREE;
	     k++) {
		s = master_store_stmt(st, k);
		master_store_bind_text(s, 1, id);
		if ((ret = master_store_exec(st, s, "vdisk release")))
			return ret;
	}
	s = master_store_stmt(st, ST_SPREAD_DELETE);
	master_store_bind_text(s, 1, id);
	if ((ret = master_store_exec(st, s, "spread delete")))
		return ret;
	s = master_store_stmt(st, ST_VDISK_DELETE);
	master_store_bind_text(s, 1, id);
	if ((ret = master_store_exec(st, s, "vdisk delete")) ||
	    (ret = master_store_lease_drop(st, id)))
		return ret;
	td_dbg("vdisk %s released", id);
	return master_reply_ok(rep, true);
}

int master_store_vdisk_list(struct master_store *st,
			    const ms_vdisk_list_args *a, ms_reply *rep)
{
	ms_vdisk_page *page = &rep->body.ms_body_u.vdisks;
	sqlite3_stmt *s;
	int rc = SQLITE_DONE, ret = 0;

	if (!a->limit || a->limit > MS_MAX_PAGE)
		return master_reply_fail(rep, MS_EINVAL, "limit must be 1-%d",
					 MS_MAX_PAGE);
	rep->body.kind = MS_BODY_VDISKS;
	if (!(page->vdisks.vdisks_val =
		      calloc(a->limit, sizeof(*page->vdisks.vdisks_val))))
		return -ENOMEM;
	s = master_store_stmt(st, ST_VDISK_LIST);
	master_store_bind_text(s, 1, a->after ? a->after : "");
	sqlite3_bind_int64(s, 2, (sqlite3_int64)a->limit + 1);
	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		ms_vdisk_summary *v;

		if (page->vdisks.vdisks_len == a->limit) {
			page->more = true;
			break;
		}
		v = &page->vdisks.vdisks_val[page->vdisks.vdisks_len++];
		v->id = master_strdup((const char *)sqlite3_column_text(s, 0));
		v->columns = (u_int)sqlite3_column_int64(s, 1);
		v->extents_per_column = (u_int)sqlite3_column_int64(s, 2);
		v->replicas = (u_int)sqlite3_column_int64(s, 3);
		v->stale_replicas = (u_int)sqlite3_column_int64(s, 4);
		v->under_replicated = (u_int)sqlite3_column_int64(s, 5);
		v->moves = (u_int)sqlite3_column_int64(s, 6);
		v->source =
			master_strdup((const char *)sqlite3_column_text(s, 7));
		v->complete = sqlite3_column_int64(s, 8) != 0;
		ret = v->id && v->source ? 0 : -ENOMEM;
	}
	sqlite3_reset(s);
	if (!ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "vdisk list", rc);
	return ret ? ret : master_reply_ok(rep, false);
}

/* --- snapshots (issue #21) ------------------------------------------------ */

/* 1 and the source ("" none) and completeness of id, 0 no such disk. */
static int snap_get(struct master_store *st, const char *id, char *source,
		    size_t size, bool *complete)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_VDISK_SNAP_GET);
	int rc;

	master_store_bind_text(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return master_store_sql_fail(st, "vdisk snapshot get", rc);
	snprintf(source, size, "%s", (const char *)sqlite3_column_text(s, 0));
	*complete = sqlite3_column_int64(s, 1) != 0;
	sqlite3_reset(s);
	return 1;
}

/* NEW exists: the same snapshot again (answer it) or something else. */
static int snapshot_again(struct master_store *st, const ms_snapshot_args *a,
			  const struct master_shape *src, ms_reply *rep)
{
	char source[MS_VDISK_ID_MAX + 1];
	struct master_shape have;
	bool complete;
	int ret;

	if ((ret = vdisk_get(st, a->id, &have)) < 0 ||
	    (ret = snap_get(st, a->id, source, sizeof(source), &complete)) < 0)
		return ret;
	if (strcmp(source, a->source) || memcmp(&have, src, sizeof(have)))
		return master_reply_fail(
			rep, MS_EEXIST,
			"vdisk %s exists already as %s%s: a snapshot needs "
			"a new name (or release %s first)",
			a->id,
			source[0] ? "a snapshot of " : "a disk of its own",
			source, a->id);
	ret = build_vdisk(st, a->id, &have, rep);
	return ret ? ret : master_reply_ok(rep, false);
}

int master_store_vdisk_snapshot(struct master_store *st,
				const ms_snapshot_args *a, ms_reply *rep)
{
	struct master_shape src;
	ms_alloc_args aa;
	sqlite3_stmt *s;
	int ret;

	if (!master_vdisk_id_ok(a->source) || !master_vdisk_id_ok(a->id) ||
	    !strcmp(a->source, a->id))
		return master_reply_fail(rep, MS_EINVAL,
					 "a snapshot needs two different "
					 "vdisk ids of 1-%d [A-Za-z0-9._-]",
					 MS_VDISK_ID_MAX);
	if ((ret = vdisk_get(st, a->source, &src)) <= 0)
		return ret < 0 ? ret
			       : master_reply_fail(rep, MS_ENOENT,
						   "no vdisk %s to take a "
						   "snapshot of",
						   a->source);
	if ((ret = vdisk_get(st, a->id, &(struct master_shape){0})) < 0)
		return ret;
	if (ret)
		return snapshot_again(st, a, &src, rep);
	aa = (ms_alloc_args){.id = a->id,
			     .columns = src.columns,
			     .extents_per_column = src.extents_per_column,
			     .replicas = src.replicas,
			     .extent_size_bytes = st->extent_bytes};
	if ((ret = master_store_vdisk_alloc(st, &aa, rep)) ||
	    rep->status != MS_OK)
		return ret;
	s = master_store_stmt(st, ST_VDISK_SNAP_SET);
	master_store_bind_text(s, 1, a->id);
	master_store_bind_text(s, 2, a->source);
	return master_store_exec(st, s, "vdisk snapshot set");
}

int master_store_vdisk_snapshot_done(struct master_store *st, const char *id,
				     ms_reply *rep)
{
	char source[MS_VDISK_ID_MAX + 1];
	bool complete;
	sqlite3_stmt *s;
	int ret;

	if (!master_vdisk_id_ok(id))
		return master_reply_fail(rep, MS_EINVAL, "bad vdisk id");
	if ((ret = snap_get(st, id, source, sizeof(source), &complete)) <= 0)
		return ret < 0 ? ret
			       : master_reply_fail(rep, MS_ENOENT,
						   "no vdisk %s", id);
	if (!source[0])
		return master_reply_fail(rep, MS_EINVAL,
					 "vdisk %s is no snapshot", id);
	if (complete)
		return master_reply_ok(rep, false);
	s = master_store_stmt(st, ST_VDISK_SNAP_DONE);
	master_store_bind_text(s, 1, id);
	ret = master_store_exec(st, s, "vdisk snapshot done");
	return ret ? ret : master_reply_ok(rep, true);
}

/* --- replica state ---------------------------------------------------------- */

static void bind_replica(sqlite3_stmt *s, const ms_replica_state_args *a)
{
	master_store_bind_text(s, 1, a->vdisk);
	sqlite3_bind_int64(s, 2, a->column);
	sqlite3_bind_int64(s, 3, a->extent);
	sqlite3_bind_int64(s, 4, a->replica);
}

/* The replica's row as the reply's body; 1 found, 0 not, -errno. */
static int replica_get(struct master_store *st, const ms_replica_state_args *a,
		       ms_extent_entry *e)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_REPLICA_GET);
	int rc;

	bind_replica(s, a);
	if ((rc = sqlite3_step(s)) != SQLITE_ROW) {
		sqlite3_reset(s);
		return rc == SQLITE_DONE
			       ? 0
			       : master_store_sql_fail(st, "replica", rc);
	}
	e->server_id = (u_int)sqlite3_column_int64(s, 0);
	e->index = (u_int)sqlite3_column_int64(s, 1);
	e->offset_bytes = (u_quad_t)e->index * st->extent_bytes;
	e->stale = sqlite3_column_int(s, 2) != 0;
	e->column = a->column;
	e->extent = a->extent;
	e->replica = a->replica;
	sqlite3_reset(s);
	return (e->vdisk = master_strdup(a->vdisk)) ? 1 : -ENOMEM;
}

int master_store_check_slot(struct master_store *st, const char *vdisk,
			    u_int column, u_int extent, u_int replica,
			    struct master_shape *shape, ms_reply *rep, bool *ok)
{
	struct master_shape have;
	int ret;

	*ok = false;
	if (!master_vdisk_id_ok(vdisk))
		return master_reply_fail(rep, MS_EINVAL,
					 "a vdisk id is 1-%d of "
					 "[A-Za-z0-9._-]",
					 MS_VDISK_ID_MAX);
	if ((ret = vdisk_get(st, vdisk, &have)) < 0)
		return ret;
	if (!ret)
		return master_reply_fail(rep, MS_ENOENT,
					 "no vdisk %s: see 'stripe-ctl vdisk "
					 "list'",
					 vdisk);
	if (column >= have.columns || extent >= have.extents_per_column ||
	    replica >= have.replicas)
		return master_reply_fail(
			rep, MS_EINVAL,
			"vdisk %s has %u columns x %u extents x %u replicas: "
			"column %u extent %u replica %u is not one of them "
			"(they count from 0)",
			vdisk, have.columns, have.extents_per_column,
			have.replicas, column, extent, replica);
	*shape = have;
	*ok = true;
	return 0;
}

int master_store_replica_state(struct master_store *st,
			       const ms_replica_state_args *a, ms_reply *rep)
{
	ms_extent_entry *e = &rep->body.ms_body_u.replica;
	sqlite3_stmt *s;
	bool ok;
	struct master_shape shape;
	int ret = master_store_check_slot(st, a->vdisk, a->column, a->extent,
					  a->replica, &shape, rep, &ok);

	if (ret || !ok)
		return ret;
	rep->body.kind = MS_BODY_REPLICA;
	if ((ret = replica_get(st, a, e)) <= 0) {
		if (!ret)
			td_err("vdisk %s has no row for column %u extent %u "
			       "replica %u: run stripe-master --check",
			       a->vdisk, a->column, a->extent, a->replica);
		return ret ? ret : -EIO;
	}
	if (e->stale == (a->stale != 0)) /* a retry, or a repeat */
		return master_reply_ok(rep, false);
	s = master_store_stmt(st, ST_REPLICA_SET);
	bind_replica(s, a);
	sqlite3_bind_int(s, 5, a->stale != 0);
	if ((ret = master_store_exec(st, s, "replica state")))
		return ret;
	e->stale = a->stale != 0;
	td_info("vdisk %s column %u extent %u replica %u (server %u extent "
		"%u): %s",
		a->vdisk, a->column, a->extent, a->replica, e->server_id,
		e->index, e->stale ? "stale" : "ok");
	return master_reply_ok(rep, true);
}
