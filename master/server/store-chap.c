/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-chap.c - a server's CHAP account (issue #20): MS_SERVER_CHAP_SET
 * and MS_SERVER_CHAP_GET (see stripe.x).  The secret goes in by SET and
 * out by GET alone; nothing here logs it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/server/store-int.h"

static const char *str(const char *s)
{
	return s ? s : "";
}

bool master_store_chap_ok(const char *s)
{
	size_t len = strnlen(str(s), MS_CHAP_MAX + 1);

	if (!len || len > MS_CHAP_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '#')
			return false;
	return true;
}

static int check_chap_args(const ms_server_chap_args *a, ms_reply *rep,
			   bool *ok)
{
	bool user = str(a->user)[0], secret = str(a->secret)[0];

	*ok = false;
	if (user != secret)
		return master_reply_fail(rep, MS_EINVAL,
					 "give both a CHAP user and a secret, "
					 "or neither (to clear them)");
	if (user && (!master_store_chap_ok(a->user) ||
		     !master_store_chap_ok(a->secret)))
		return master_reply_fail(rep, MS_EINVAL,
					 "a CHAP user and secret are 1-%u "
					 "printable ASCII bytes, without "
					 "spaces or '#'",
					 MS_CHAP_MAX);
	*ok = true;
	return 0;
}

/* The server's account into user and secret (both malloc'd); 0/-errno. */
static int chap_read(struct master_store *st, u_int id, char **user,
		     char **secret)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_SERVER_CHAP_GET);
	int rc;

	sqlite3_bind_int64(s, 1, id);
	if ((rc = sqlite3_step(s)) != SQLITE_ROW)
		return master_store_sql_fail(st, "server chap",
					     rc == SQLITE_DONE ? SQLITE_CORRUPT
							       : rc);
	*user = master_strdup((const char *)sqlite3_column_text(s, 0));
	*secret = master_strdup((const char *)sqlite3_column_text(s, 1));
	sqlite3_reset(s);
	return *user && *secret ? 0 : -ENOMEM;
}

static void chap_wipe(char *secret)
{
	if (secret)
		memset(secret, 0, strlen(secret));
	free(secret);
}

static int find_server(struct master_store *st, const char *target, u_int lun,
		       ms_server *srv, ms_reply *rep)
{
	int ret = master_store_server_by_key(st, target, lun, srv);

	if (ret < 0)
		return ret;
	if (!ret)
		master_reply_fail(rep, MS_ENOENT,
				  "no server has target %s lun %u: see "
				  "'stripe-ctl server list'",
				  target, lun);
	return ret;
}

int master_store_server_chap_set(struct master_store *st,
				 const ms_server_chap_args *a, ms_reply *rep)
{
	ms_server *srv = &rep->body.ms_body_u.server;
	char *user = NULL, *secret = NULL;
	sqlite3_stmt *s;
	bool ok, same;
	int ret = check_chap_args(a, rep, &ok);

	if (ret || !ok ||
	    (ret = find_server(st, a->target, a->lun, srv, rep)) <= 0)
		return ret < 0 ? ret : 0;
	rep->body.kind = MS_BODY_SERVER;
	if ((ret = chap_read(st, srv->id, &user, &secret)))
		goto out;
	same = !strcmp(user, str(a->user)) && !strcmp(secret, str(a->secret));
	if (same) {
		ret = master_reply_ok(rep, false);
		goto out;
	}
	s = master_store_stmt(st, ST_SERVER_CHAP_SET);
	sqlite3_bind_int64(s, 1, srv->id);
	master_store_bind_text(s, 2, str(a->user));
	master_store_bind_text(s, 3, str(a->secret));
	if ((ret = master_store_exec(st, s, "server chap")))
		goto out;
	/* The user name is no secret; the secret is never logged. */
	td_info("server %u (%s lun %u): CHAP %s%s", srv->id, a->target, a->lun,
		str(a->user)[0] ? "user " : "cleared", str(a->user));
	ret = master_reply_ok(rep, true);
out:
	free(user);
	chap_wipe(secret);
	return ret;
}

int master_store_server_chap_get(struct master_store *st,
				 const ms_server_key *k, ms_reply *rep)
{
	ms_server srv;
	ms_chap *c = &rep->body.ms_body_u.chap;
	int ret;

	memset(&srv, 0, sizeof(srv));
	ret = find_server(st, k->target, k->lun, &srv, rep);
	xdr_free((xdrproc_t)xdr_ms_server, (char *)&srv);
	if (ret <= 0)
		return ret;
	rep->body.kind = MS_BODY_CHAP;
	c->server_id = srv.id;
	if ((ret = chap_read(st, srv.id, &c->user, &c->secret)))
		return ret;
	return master_reply_ok(rep, false);
}
