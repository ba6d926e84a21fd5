/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-server.c - servers and their extents: MS_SERVER_ADD, _DRAIN,
 * _REMOVE, _LIST, _LABEL and MS_EXTENT_LIST (see store.h and stripe.x).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/hostid.h"
#include "master/server/store-int.h"

static const char *lbl(const char *label)
{
	return label ? label : "";
}

bool master_store_label_ok(const char *label, bool may_be_empty)
{
	label = lbl(label);
	return label[0] ? master_host_id_ok(label) : may_be_empty;
}

static bool label_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/*
 * The host label of a new server: the one given, else its address with
 * the characters a label may not hold ('[', ']', ':', '%' of IPv6, ...)
 * as '-'.  Two addresses may then share a label: that only narrows where
 * replicas may go.
 */
static void host_label(const ms_server_add_args *a, char out[MS_LABEL_MAX + 1])
{
	size_t i;

	if (lbl(a->host)[0]) {
		snprintf(out, MS_LABEL_MAX + 1, "%s", a->host);
		return;
	}
	for (i = 0; a->address[i] && i < MS_LABEL_MAX; i++)
		out[i] = label_char_ok(a->address[i]) ? a->address[i] : '-';
	out[i] = '\0';
}

int master_store_server_by_key(struct master_store *st, const char *target,
			       u_int lun, ms_server *out)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_BY_KEY);
	int rc, ret;

	master_store_bind_text(s, 1, target);
	sqlite3_bind_int64(s, 2, lun);
	rc = sqlite3_step(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return master_store_sql_fail(st, "server lookup", rc);
	ret = master_store_fill_server(s, 0, out);
	sqlite3_reset(s);
	return ret ? ret : 1;
}

static bool block_size_ok(u_int b)
{
	return b == 512 || b == 1024 || b == 2048 || b == 4096;
}

/* The arguments of MS_SERVER_ADD, or a reply saying which is wrong. */
static int check_add_args(struct master_store *st, const ms_server_add_args *a,
			  ms_reply *rep, bool *ok)
{
	uint64_t n = a->size_bytes / st->extent_bytes;

	*ok = false;
	if (!master_store_token_ok(a->address, MS_ADDRESS_MAX) ||
	    !master_store_token_ok(a->portal, MS_PORTAL_MAX) ||
	    !master_store_token_ok(a->target, MS_TARGET_MAX))
		return master_reply_fail(rep, MS_EINVAL,
					 "address, portal and target must be "
					 "printable, without spaces, within "
					 "%d, %d and %d bytes",
					 MS_ADDRESS_MAX, MS_PORTAL_MAX,
					 MS_TARGET_MAX);
	if (!master_store_label_ok(a->host, true) ||
	    !master_store_label_ok(a->rack, true) ||
	    !master_store_label_ok(a->site, true))
		return master_reply_fail(rep, MS_EINVAL,
					 "host, rack and site labels are 1-%d "
					 "of [A-Za-z0-9._-] (or none)",
					 MS_LABEL_MAX);
	if (a->lun > 65535 || !block_size_ok(a->block_size))
		return master_reply_fail(rep, MS_EINVAL,
					 "lun %u or block size %u out of range "
					 "(lun 0-65535; block size 512, 1024, "
					 "2048 or 4096)",
					 a->lun, a->block_size);
	if (!n || n > MASTER_MAX_SERVER_EXTENTS)
		return master_reply_fail(
			rep, MS_EINVAL,
			"a LUN of %" PRIu64 " bytes holds %" PRIu64
			" extents of %" PRIu64 " bytes: it must hold 1 to %u",
			(uint64_t)a->size_bytes, n, st->extent_bytes,
			MASTER_MAX_SERVER_EXTENTS);
	*ok = true;
	return 0;
}

/* Labels count only when given: a re-run without them matches a server
 * relabelled since. */
static bool same_server(const ms_server *s, const ms_server_add_args *a)
{
	return !strcmp(s->address, a->address) &&
	       !strcmp(s->portal, a->portal) &&
	       s->size_bytes == a->size_bytes &&
	       s->block_size == a->block_size &&
	       (!lbl(a->host)[0] || !strcmp(s->host, a->host)) &&
	       (!lbl(a->rack)[0] || !strcmp(s->rack, a->rack)) &&
	       (!lbl(a->site)[0] || !strcmp(s->site, a->site));
}

/* Insert the server row: its extents are implicit, all free. */
static int insert_server(struct master_store *st, const ms_server_add_args *a,
			 int64_t *id)
{
	uint64_t n = a->size_bytes / st->extent_bytes;
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_INSERT);
	char host[MS_LABEL_MAX + 1];
	int ret;

	host_label(a, host);

	master_store_bind_text(s, 1, a->address);
	master_store_bind_text(s, 2, a->portal);
	master_store_bind_text(s, 3, a->target);
	sqlite3_bind_int64(s, 4, a->lun);
	sqlite3_bind_int64(s, 5, (sqlite3_int64)a->size_bytes);
	sqlite3_bind_int64(s, 6, a->block_size);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)n);
	master_store_bind_text(s, 8, host);
	master_store_bind_text(s, 9, lbl(a->rack));
	master_store_bind_text(s, 10, lbl(a->site));
	if ((ret = master_store_exec(st, s, "server insert")))
		return ret;
	*id = sqlite3_last_insert_rowid(st->db);
	return 0;
}

static int server_count(struct master_store *st, int64_t *n)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_COUNT);
	int rc = sqlite3_step(s);

	if (rc != SQLITE_ROW)
		return master_store_sql_fail(st, "server count", rc);
	*n = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return 0;
}

int master_store_server_state(struct master_store *st, int64_t id, bool *failed,
			      int64_t *replicas, int64_t *move_targets)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_STATE);
	int rc;

	sqlite3_bind_int64(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*failed = sqlite3_column_int(s, 0) != 0;
		*replicas = sqlite3_column_int64(s, 1);
		*move_targets = sqlite3_column_int64(s, 2);
	}
	sqlite3_reset(s);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return rc == SQLITE_ROW;
	return master_store_sql_fail(st, "server state", rc);
}

int master_store_server_failed(struct master_store *st, int64_t id,
			       bool *failed)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_FAILED);
	int rc;

	sqlite3_bind_int64(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*failed = sqlite3_column_int(s, 0) != 0;
	sqlite3_reset(s);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return rc == SQLITE_ROW;
	return master_store_sql_fail(st, "server failed", rc);
}

/*
 * A failed server is not added again (MS_EBUSY, 1): its data is gone and
 * its replicas are re-homed (or still to be); 0 when it has not failed.
 */
static int refuse_failed(struct master_store *st, const ms_server *srv,
			 ms_reply *rep)
{
	int64_t held = 0, targets = 0;
	bool failed = false;
	int ret = master_store_server_state(st, srv->id, &failed, &held,
					    &targets);

	if (ret <= 0 || !failed)
		return ret < 0 ? ret : 0;
	if (held)
		master_reply_fail(
			rep, MS_EBUSY,
			"server %u (%s lun %u) failed and still "
			"holds %" PRId64 " replicas: re-home them "
			"('stripe-ctl server evacuate', or "
			"'stripe-ctl extent move'), then 'stripe-ctl "
			"server remove' it and add it again as a new, "
			"empty server",
			srv->id, srv->target, srv->lun, held);
	else
		master_reply_fail(rep, MS_EBUSY,
				  "server %u (%s lun %u) failed: 'stripe-ctl "
				  "server remove' it first (it holds no "
				  "replica), then add it again as a new, empty "
				  "server",
				  srv->id, srv->target, srv->lun);
	return 1;
}

int master_store_extent_free(struct master_store *st, int64_t server,
			     int64_t idx)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_RELEASED_PUT);
	int ret;

	sqlite3_bind_int64(s, 1, server);
	sqlite3_bind_int64(s, 2, idx);
	if ((ret = master_store_exec(st, s, "extent free")))
		return ret;
	s = master_store_stmt(st, ST_EXTENT_FREE);
	sqlite3_bind_int64(s, 1, server);
	return master_store_exec(st, s, "extent free count");
}

int master_store_server_add(struct master_store *st,
			    const ms_server_add_args *a, ms_reply *rep)
{
	ms_server *srv = &rep->body.ms_body_u.server;
	int64_t id, count = 0;
	bool ok;
	int ret = check_add_args(st, a, rep, &ok);

	if (ret || !ok)
		return ret;
	if ((ret = master_store_server_by_key(st, a->target, a->lun, srv)) < 0)
		return ret;
	rep->body.kind = MS_BODY_SERVER;
	if (ret == 1 && (ret = refuse_failed(st, srv, rep)))
		return ret < 0 ? ret : 0; /* ret 0: found, not failed */
	if (srv->target && same_server(srv, a))
		return master_reply_ok(rep, false); /* a retry, or a re-run */
	if (srv->target)
		return master_reply_fail(
			rep, MS_EEXIST,
			"target %s lun %u is already server %u (address %s, "
			"portal %s, %" PRIu64 " bytes, block size %u, host "
			"%s, rack %s, site %s): to change its labels, use "
			"'stripe-ctl server label'; anything else, remove it "
			"first",
			srv->target, srv->lun, srv->id, srv->address,
			srv->portal, (uint64_t)srv->size_bytes, srv->block_size,
			srv->host, srv->rack[0] ? srv->rack : "-",
			srv->site[0] ? srv->site : "-");
	if ((ret = server_count(st, &count)))
		return ret;
	if (count >= MS_MAX_SERVERS)
		return master_reply_fail(rep, MS_ENOSPC,
					 "the master already has %d servers, "
					 "its most",
					 MS_MAX_SERVERS);
	if ((ret = insert_server(st, a, &id)) ||
	    (ret = master_store_server_by_key(st, a->target, a->lun, srv)) < 0)
		return ret;
	td_info("server %" PRId64 " added: %s lun %u at %s (%s; host %s, "
		"rack %s, site %s), %u extents",
		id, a->target, a->lun, a->portal, a->address, srv->host,
		srv->rack, srv->site, srv->nr_extents);
	return master_reply_ok(rep, true);
}

int master_store_server_drain(struct master_store *st, const ms_server_key *k,
			      ms_reply *rep)
{
	ms_server *srv = &rep->body.ms_body_u.server;
	sqlite3_stmt *s;
	int ret = master_store_server_by_key(st, k->target, k->lun, srv);

	if (ret < 0)
		return ret;
	rep->body.kind = MS_BODY_SERVER;
	if (!ret)
		return master_reply_fail(rep, MS_ENOENT,
					 "no server has target %s lun %u: see "
					 "'stripe-ctl server list'",
					 k->target, k->lun);
	if (srv->draining)
		return master_reply_ok(rep, false);
	s = master_store_stmt(st, ST_SERVER_DRAIN);
	sqlite3_bind_int64(s, 1, srv->id);
	if ((ret = master_store_exec(st, s, "server drain")))
		return ret;
	srv->draining = true;
	td_info("server %u (%s lun %u) draining", srv->id, k->target, k->lun);
	return master_reply_ok(rep, true);
}

int master_store_server_fail(struct master_store *st, const ms_server_key *k,
			     ms_reply *rep)
{
	ms_server *srv = &rep->body.ms_body_u.server;
	int64_t held = 0, targets = 0;
	bool failed = false;
	sqlite3_stmt *s;
	int ret = master_store_server_by_key(st, k->target, k->lun, srv);

	if (ret < 0)
		return ret;
	rep->body.kind = MS_BODY_SERVER;
	if (!ret)
		return master_reply_fail(rep, MS_ENOENT,
					 "no server has target %s lun %u: see "
					 "'stripe-ctl server list'",
					 k->target, k->lun);
	if ((ret = master_store_server_state(st, srv->id, &failed, &held,
					     &targets)) < 0)
		return ret;
	if (failed)
		return master_reply_ok(rep, false);
	s = master_store_stmt(st, ST_SERVER_FAIL);
	sqlite3_bind_int64(s, 1, srv->id);
	if ((ret = master_store_exec(st, s, "server fail")))
		return ret;
	td_info("server %u (%s lun %u) failed: %" PRId64 " replicas lost, "
		"%" PRId64 " move targets on it",
		srv->id, k->target, k->lun, held, targets);
	return master_reply_ok(rep, true);
}

int master_store_server_status(struct master_store *st, ms_reply *rep)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_STATS);
	ms_server_stat *list = calloc(MS_MAX_SERVERS, sizeof(*list));
	u_int n = 0;
	int rc = SQLITE_DONE;

	if (!list)
		return -ENOMEM;
	rep->body.kind = MS_BODY_SERVER_STATS;
	rep->body.ms_body_u.stats.stats_val = list;
	while (n < MS_MAX_SERVERS && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		ms_server_stat *x = &list[n++];

		x->id = (u_int)sqlite3_column_int64(s, 0);
		x->draining = sqlite3_column_int(s, 1) != 0;
		x->failed = sqlite3_column_int(s, 2) != 0;
		x->replicas = (u_int)sqlite3_column_int64(s, 3);
		x->stale = (u_int)sqlite3_column_int64(s, 4);
		x->moves_from = (u_int)sqlite3_column_int64(s, 5);
		x->moves_to = (u_int)sqlite3_column_int64(s, 6);
	}
	rep->body.ms_body_u.stats.stats_len = n;
	sqlite3_reset(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return master_store_sql_fail(st, "server status", rc);
	return master_reply_ok(rep, false);
}

/* MS_EBUSY naming (up to four of) the disks that still own extents. */
static int refuse_busy(struct master_store *st, const ms_server *srv,
		       ms_reply *rep)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_VDISKS);
	char names[MS_MESSAGE_MAX / 2] = "";
	size_t len = 0;
	int rc;

	sqlite3_bind_int64(s, 1, srv->id);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && len < sizeof(names))
		len += (size_t)snprintf(names + len, sizeof(names) - len,
					"%s%s", len ? ", " : "",
					sqlite3_column_text(s, 0));
	sqlite3_reset(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return master_store_sql_fail(st, "server disks", rc);
	return master_reply_fail(rep, MS_EBUSY,
				 "server %u still holds %u allocated extents "
				 "(disks %s%s; or new extents of moves in "
				 "progress: 'stripe-ctl extent move list'): "
				 "destroy those disks, or move their replicas "
				 "elsewhere, first",
				 srv->id, srv->nr_extents - srv->free_extents,
				 names, rc == SQLITE_ROW ? ", ..." : "");
}

int master_store_server_remove(struct master_store *st, const ms_server_key *k,
			       ms_reply *rep)
{
	ms_server srv;
	sqlite3_stmt *s;
	int ret = master_store_server_by_key(st, k->target, k->lun, &srv);

	if (ret <= 0) /* gone already: a retry, or never there */
		return ret < 0 ? ret : master_reply_ok(rep, false);
	if (srv.free_extents != srv.nr_extents)
		ret = refuse_busy(st, &srv, rep);
	else {
		s = master_store_stmt(st, ST_SERVER_DELETE_RELEASED);
		sqlite3_bind_int64(s, 1, srv.id);
		ret = master_store_exec(st, s, "server released delete");
		s = master_store_stmt(st, ST_SERVER_DELETE);
		sqlite3_bind_int64(s, 1, srv.id);
		if (!ret &&
		    !(ret = master_store_exec(st, s, "server delete"))) {
			td_info("server %u (%s lun %u) removed", srv.id,
				k->target, k->lun);
			ret = master_reply_ok(rep, true);
		}
	}
	xdr_free((xdrproc_t)xdr_ms_server, (char *)&srv);
	return ret;
}

int master_store_server_list(struct master_store *st, ms_reply *rep)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVERS_ALL);
	ms_server *list = calloc(MS_MAX_SERVERS, sizeof(*list));
	u_int n = 0;
	int rc = SQLITE_DONE, ret = 0;

	if (!list)
		return -ENOMEM;
	rep->body.kind = MS_BODY_SERVERS;
	rep->body.ms_body_u.servers.servers_val = list;
	while (!ret && n < MS_MAX_SERVERS &&
	       (rc = sqlite3_step(s)) == SQLITE_ROW) {
		ret = master_store_fill_server(s, 0, &list[n]);
		rep->body.ms_body_u.servers.servers_len = ++n;
	}
	sqlite3_reset(s);
	if (!ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "server list", rc);
	return ret ? ret : master_reply_ok(rep, false);
}

/* --- MS_SERVER_LABEL ------------------------------------------------------- */

static int check_label_args(const ms_server_label_args *a, ms_reply *rep,
			    bool *ok)
{
	*ok = false;
	if (!master_store_token_ok(a->target, MS_TARGET_MAX))
		return master_reply_fail(rep, MS_EINVAL,
					 "a target is 1-%d printable bytes "
					 "without spaces",
					 MS_TARGET_MAX);
	if ((a->set_host && !master_store_label_ok(a->host, false)) ||
	    (a->set_rack && !master_store_label_ok(a->rack, true)) ||
	    (a->set_site && !master_store_label_ok(a->site, true)))
		return master_reply_fail(rep, MS_EINVAL,
					 "a host label is 1-%d of "
					 "[A-Za-z0-9._-]; a rack or site label "
					 "the same or empty (unknown)",
					 MS_LABEL_MAX);
	*ok = true;
	return 0;
}

/*
 * MS_EEXIST when another replica of one of server's extents is on a server
 * with host label host: the relabel would put two on one host.
 */
static int refuse_clash(struct master_store *st, const ms_server *srv,
			const char *host, ms_reply *rep, bool *clash)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_LABEL_CLASH);
	int rc;

	sqlite3_bind_int64(s, 1, srv->id);
	master_store_bind_text(s, 2, host);
	rc = sqlite3_step(s);
	*clash = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW)
		master_reply_fail(
			rep, MS_EEXIST,
			"server %u holds a replica of extent %lld of column "
			"%lld of vdisk %s whose other replica is on server "
			"%lld, host %s: two replicas would share a host; move "
			"or destroy that disk first",
			srv->id, (long long)sqlite3_column_int64(s, 2),
			(long long)sqlite3_column_int64(s, 1),
			(const char *)sqlite3_column_text(s, 0),
			(long long)sqlite3_column_int64(s, 3), host);
	sqlite3_reset(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE
		       ? 0
		       : master_store_sql_fail(st, "label clash", rc);
}

/* Replace *field by value when set and different; true when it changed. */
static int relabel_one(bool set, const char *value, char **field, bool *changed)
{
	char *copy;

	if (!set || !strcmp(*field, lbl(value)))
		return 0;
	if (!(copy = master_strdup(lbl(value))))
		return -ENOMEM;
	free(*field);
	*field = copy;
	*changed = true;
	return 0;
}

int master_store_server_label(struct master_store *st,
			      const ms_server_label_args *a, ms_reply *rep)
{
	ms_server *srv = &rep->body.ms_body_u.server;
	bool ok, changed = false, clash = false;
	sqlite3_stmt *s;
	int ret = check_label_args(a, rep, &ok);

	if (ret || !ok)
		return ret;
	if ((ret = master_store_server_by_key(st, a->target, a->lun, srv)) <= 0)
		return ret < 0 ? ret
			       : master_reply_fail(rep, MS_ENOENT,
						   "no server has target %s "
						   "lun %u: see 'stripe-ctl "
						   "server list'",
						   a->target, a->lun);
	rep->body.kind = MS_BODY_SERVER;
	if (a->set_host && strcmp(srv->host, a->host) &&
	    ((ret = refuse_clash(st, srv, a->host, rep, &clash)) || clash))
		return ret;
	if ((ret = relabel_one(a->set_host, a->host, &srv->host, &changed)) ||
	    (ret = relabel_one(a->set_rack, a->rack, &srv->rack, &changed)) ||
	    (ret = relabel_one(a->set_site, a->site, &srv->site, &changed)))
		return ret;
	if (!changed)
		return master_reply_ok(rep, false);
	s = master_store_stmt(st, ST_SERVER_LABEL);
	sqlite3_bind_int64(s, 1, srv->id);
	master_store_bind_text(s, 2, srv->host);
	master_store_bind_text(s, 3, srv->rack);
	master_store_bind_text(s, 4, srv->site);
	if ((ret = master_store_exec(st, s, "server label")))
		return ret;
	td_info("server %u (%s lun %u) labelled host %s, rack %s, site %s",
		srv->id, a->target, a->lun, srv->host, srv->rack, srv->site);
	return master_reply_ok(rep, true);
}

/* --- MS_EXTENT_LIST ---------------------------------------------------------- */

/*
 * Allocated extents only (filters: vdisk, servers): straight from the
 * allocations table.  Parameters: ?1 vdisk, ?2 server, ?3 index, ?4 limit.
 */
static int allocated_query(struct master_store *st,
			   const ms_extent_list_args *a, sqlite3_stmt **out)
{
	struct sql_text {
		char text[512 + 12 * MS_MAX_FILTER];
		size_t len;
	} q = {.len = 0};
	int rc;

#define SQL_ADD(...)                                                      \
	q.len += (size_t)snprintf(q.text + q.len, sizeof(q.text) - q.len, \
				  __VA_ARGS__)
	SQL_ADD("SELECT server_id, idx, vdisk_id, col, ext, replica, stale, "
		"mv FROM (SELECT server_id, idx, vdisk_id, col, ext, replica, "
		"stale, 0 AS mv FROM allocations UNION ALL SELECT new_server, "
		"new_idx, vdisk_id, col, ext, replica, 0, 1 FROM moves) "
		"WHERE 1");
	if (a->vdisk[0])
		SQL_ADD(" AND vdisk_id = ?1");
	if (a->has_cursor)
		SQL_ADD(" AND (server_id, idx) > (?2, ?3)");
	for (u_int i = 0; i < a->server_ids.server_ids_len; i++)
		SQL_ADD("%s%u", i ? ", " : " AND server_id IN (",
			a->server_ids.server_ids_val[i]);
	if (a->server_ids.server_ids_len)
		SQL_ADD(")");
	SQL_ADD(" ORDER BY server_id, idx LIMIT ?4");
#undef SQL_ADD
	rc = sqlite3_prepare_v2(st->db, q.text, -1, out, NULL);
	if (rc != SQLITE_OK)
		return master_store_sql_fail(st, "extent list", rc);
	master_store_bind_text(*out, 1, a->vdisk);
	sqlite3_bind_int64(*out, 2, a->after_server);
	sqlite3_bind_int64(*out, 3, a->after_index);
	sqlite3_bind_int64(*out, 4, (sqlite3_int64)a->limit + 1);
	return 0;
}

/*
 * Append one entry; false when the page is full (then more is set).  row
 * (when not NULL) holds the owner's column, extent, replica, stale flag
 * and move flag from column col on.
 */
static bool page_add(struct master_store *st, ms_extent_page *page, u_int limit,
		     u_int server, u_int idx, const char *vdisk,
		     sqlite3_stmt *row, int col, int *ret)
{
	ms_extent_entry *e;

	if (page->extents.extents_len == limit) {
		page->more = true;
		return false;
	}
	e = &page->extents.extents_val[page->extents.extents_len++];
	e->server_id = server;
	e->index = idx;
	e->offset_bytes = (u_quad_t)idx * st->extent_bytes;
	e->vdisk = master_strdup(vdisk);
	if (row) {
		e->column = (u_int)sqlite3_column_int64(row, col);
		e->extent = (u_int)sqlite3_column_int64(row, col + 1);
		e->replica = (u_int)sqlite3_column_int64(row, col + 2);
		e->stale = sqlite3_column_int(row, col + 3) != 0;
		e->move_target = sqlite3_column_int(row, col + 4) != 0;
	}
	if (!e->vdisk)
		*ret = -ENOMEM;
	return !*ret;
}

static int list_allocated(struct master_store *st, const ms_extent_list_args *a,
			  ms_extent_page *page)
{
	sqlite3_stmt *s;
	int rc = SQLITE_DONE, ret = allocated_query(st, a, &s);

	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW)
		if (!page_add(st, page, a->limit,
			      (u_int)sqlite3_column_int64(s, 0),
			      (u_int)sqlite3_column_int64(s, 1),
			      (const char *)sqlite3_column_text(s, 2), s, 3,
			      &ret))
			break;
	if (!ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "extent list", rc);
	sqlite3_finalize(s);
	return ret;
}

static bool wanted_server(const ms_extent_list_args *a, u_int id)
{
	for (u_int i = 0; i < a->server_ids.server_ids_len; i++)
		if (a->server_ids.server_ids_val[i] == id)
			return true;
	return !a->server_ids.server_ids_len;
}

/* Every extent of one server from index first: free ones too. */
static bool list_server(struct master_store *st, const ms_extent_list_args *a,
			u_int server, u_int nr, u_int first,
			ms_extent_page *page, int *ret)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_ALLOCS_FROM);
	bool room = true;
	int rc;

	sqlite3_bind_int64(s, 1, server);
	sqlite3_bind_int64(s, 2, first);
	rc = sqlite3_step(s);
	for (u_int idx = first; room && idx < nr; idx++) {
		bool owned = rc == SQLITE_ROW &&
			     (u_int)sqlite3_column_int64(s, 0) == idx;

		room = page_add(st, page, a->limit, server, idx,
				owned ? (const char *)sqlite3_column_text(s, 1)
				      : "",
				owned ? s : NULL, 2, ret);
		if (owned)
			rc = sqlite3_step(s);
	}
	if (!*ret && rc != SQLITE_ROW && rc != SQLITE_DONE)
		*ret = master_store_sql_fail(st, "extent list", rc);
	sqlite3_reset(s);
	return room && !*ret;
}

/* Every server's extents in id order, after the cursor. */
static int list_all(struct master_store *st, const ms_extent_list_args *a,
		    ms_extent_page *page)
{
	ms_reply servers;
	ms_server *list;
	int ret;

	master_reply_init(&servers);
	if ((ret = master_store_server_list(st, &servers)))
		goto out;
	list = servers.body.ms_body_u.servers.servers_val;
	for (u_int i = 0; i < servers.body.ms_body_u.servers.servers_len; i++) {
		u_int first = 0;

		if (a->has_cursor && list[i].id < a->after_server)
			continue;
		if (a->has_cursor && list[i].id == a->after_server)
			first = a->after_index + 1;
		if (wanted_server(a, list[i].id) &&
		    !list_server(st, a, list[i].id, list[i].nr_extents, first,
				 page, &ret))
			break;
	}
out:
	master_reply_free(&servers);
	return ret;
}

int master_store_extent_list(struct master_store *st,
			     const ms_extent_list_args *a, ms_reply *rep)
{
	ms_extent_page *page = &rep->body.ms_body_u.extents;
	int ret;

	if (!a->limit || a->limit > MS_MAX_PAGE || !a->vdisk ||
	    (a->vdisk[0] && !master_vdisk_id_ok(a->vdisk)))
		return master_reply_fail(rep, MS_EINVAL,
					 "limit must be 1-%d and vdisk a "
					 "valid id or empty",
					 MS_MAX_PAGE);
	rep->body.kind = MS_BODY_EXTENTS;
	page->extents.extents_val = calloc(a->limit, sizeof(ms_extent_entry));
	if (!page->extents.extents_val)
		return -ENOMEM;
	if (a->allocated_only || a->vdisk[0])
		ret = list_allocated(st, a, page);
	else
		ret = list_all(st, a, page);
	return ret ? ret : master_reply_ok(rep, false);
}
