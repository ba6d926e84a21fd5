/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-host.c - fenced hosts (issue #18): MS_HOST_LIST, MS_HOST_READMIT,
 * and the lookups store-lease.c makes (see stripe.x).
 *
 * One row per fenced host in fenced_hosts: by whom, for which disk at
 * which epoch, since when (the last fence when several).  A fenced
 * takeover writes the row in the transaction that moves the lease; only
 * an explicit re-admission removes it, never a lease call.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "master/hostid.h"
#include "master/server/store-int.h"

static void copy_text(char *dst, size_t size, const unsigned char *src)
{
	snprintf(dst, size, "%s", src ? (const char *)src : "");
}

int master_store_fenced_get(struct master_store *st, const char *host,
			    struct master_fence *f)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_FENCED_GET);
	int rc;

	memset(f, 0, sizeof(*f));
	master_store_bind_text(s, 1, host);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		copy_text(f->by, sizeof(f->by), sqlite3_column_text(s, 0));
		copy_text(f->vdisk, sizeof(f->vdisk),
			  sqlite3_column_text(s, 1));
		f->epoch = (uint64_t)sqlite3_column_int64(s, 2);
		f->since = (uint64_t)sqlite3_column_int64(s, 3);
	}
	sqlite3_reset(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return master_store_sql_fail(st, "fenced host", rc);
	return rc == SQLITE_ROW;
}

int master_store_fenced_put(struct master_store *st, const char *host,
			    const char *by, const char *vdisk, uint64_t epoch)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_FENCED_PUT);

	master_store_bind_text(s, 1, host);
	master_store_bind_text(s, 2, by);
	master_store_bind_text(s, 3, vdisk);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)epoch);
	sqlite3_bind_int64(s, 5, (sqlite3_int64)time(NULL));
	return master_store_exec(st, s, "fence host");
}

static int fill_fenced(sqlite3_stmt *s, ms_fenced_host *h)
{
	h->host = master_strdup((const char *)sqlite3_column_text(s, 0));
	h->by = master_strdup((const char *)sqlite3_column_text(s, 1));
	h->vdisk = master_strdup((const char *)sqlite3_column_text(s, 2));
	h->epoch = (u_quad_t)sqlite3_column_int64(s, 3);
	h->since = (u_quad_t)sqlite3_column_int64(s, 4);
	return h->host && h->by && h->vdisk ? 0 : -ENOMEM;
}

/* Every fenced host (at most MS_MAX_HOSTS) into the reply's body. */
static int hosts_body(struct master_store *st, ms_reply *rep)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_FENCED_ALL);
	ms_fenced_host *list = NULL;
	u_int n = 0, cap = 0;
	int rc, ret = 0;

	rep->body.kind = MS_BODY_HOSTS;
	sqlite3_bind_int(s, 1, MS_MAX_HOSTS);
	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (n == cap) {
			ms_fenced_host *l;

			cap = cap ? cap * 2 : 8;
			if (!(l = reallocarray(list, cap, sizeof(*l)))) {
				ret = -ENOMEM;
				break;
			}
			list = l;
		}
		rep->body.ms_body_u.hosts.hosts_val = list;
		ret = fill_fenced(s, &list[n]);
		rep->body.ms_body_u.hosts.hosts_len = ++n;
	}
	sqlite3_reset(s);
	if (!ret && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "fenced hosts", rc);
	return ret;
}

int master_store_host_list(struct master_store *st, ms_reply *rep)
{
	int ret = master_reply_ok(rep, false);

	return ret ? ret : hosts_body(st, rep);
}

int master_store_host_readmit(struct master_store *st, const char *host,
			      ms_reply *rep)
{
	sqlite3_stmt *s;
	bool changed;
	int ret;

	if (!master_host_id_ok(host))
		return master_reply_fail(rep, MS_EINVAL,
					 "a host id is 1-%d of [A-Za-z0-9._-] "
					 "(see 'stripe-ctl host list')",
					 MS_HOST_ID_MAX);
	s = master_store_stmt(st, ST_FENCED_DELETE);
	master_store_bind_text(s, 1, host);
	if ((ret = master_store_exec(st, s, "readmit host")))
		return ret;
	changed = sqlite3_changes(st->db) > 0;
	if (changed)
		td_warn("host %s re-admitted: it may acquire leases again",
			host);
	if ((ret = master_reply_ok(rep, changed)))
		return ret;
	return hosts_body(st, rep);
}
