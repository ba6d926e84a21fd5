/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-lease.c - a lease per virtual disk (issue #18): MS_LEASE_ACQUIRE,
 * _RELEASE, _HANDOVER, _TAKEOVER, _SHOW, _FENCED (see stripe.x for what
 * each does).
 *
 * One row of leases per disk ever leased: holder ("" when free), epoch,
 * previous (the holder before the last change), fence (the last change
 * was a takeover asked to fence), since (Unix time of the last change),
 * fence_pending (a fenced takeover not yet confirmed by its holder).  A
 * disk never leased has no row and reads as holder "", epoch 0.  One row
 * per disk makes two holders impossible; every change of holder is one
 * row rewritten with epoch + 1, inside the caller's transaction, so it is
 * durable before the reply leaves (see server.h).
 *
 * Idempotency: each call first asks whether the store already shows its
 * effect (a retry after a success) and then answers that state unchanged.
 *
 * Fencing: a takeover with fence from another holder marks the lease
 * fence_pending and that holder fenced (store-host.c), both in the
 * transaction that moves the lease.  A fenced host may release what it
 * holds, but acquire, take over or be handed nothing until re-admitted.
 * A release or a hand-over ends a pending fence: the lease then goes to
 * a holder that did not ask for it (see doc/striped-disks.md "Leases").
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "master/hostid.h"
#include "master/server/store-int.h"

#define HOST_BUF (MS_HOST_ID_MAX + 1)

struct lease {
	char holder[HOST_BUF];
	uint64_t epoch;
	char previous[HOST_BUF];
	bool fence;
	uint64_t since;
	bool fence_pending;
};

static void copy_host(char *dst, const unsigned char *src)
{
	snprintf(dst, HOST_BUF, "%s", src ? (const char *)src : "");
}

/* The disk's lease (zeroed when it has no row); 0 or -errno. */
static int lease_get(struct master_store *st, const char *id, struct lease *l)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_LEASE_GET);
	int rc;

	memset(l, 0, sizeof(*l));
	master_store_bind_text(s, 1, id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		copy_host(l->holder, sqlite3_column_text(s, 0));
		l->epoch = (uint64_t)sqlite3_column_int64(s, 1);
		copy_host(l->previous, sqlite3_column_text(s, 2));
		l->fence = sqlite3_column_int(s, 3) != 0;
		l->since = (uint64_t)sqlite3_column_int64(s, 4);
		l->fence_pending = sqlite3_column_int(s, 5) != 0;
	}
	sqlite3_reset(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return master_store_sql_fail(st, "lease", rc);
	return 0;
}

/* Store the lease as *l says (the caller stamps since). */
static int lease_put(struct master_store *st, const char *id, struct lease *l)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_LEASE_PUT);

	master_store_bind_text(s, 1, id);
	master_store_bind_text(s, 2, l->holder);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)l->epoch);
	master_store_bind_text(s, 4, l->previous);
	sqlite3_bind_int(s, 5, l->fence);
	sqlite3_bind_int64(s, 6, (sqlite3_int64)l->since);
	sqlite3_bind_int(s, 7, l->fence_pending);
	return master_store_exec(st, s, "lease");
}

int master_store_lease_drop(struct master_store *st, const char *id)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_LEASE_FREE);

	master_store_bind_text(s, 1, id);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)time(NULL));
	return master_store_exec(st, s, "lease free");
}

/* Every server the disk has extents on, into the lease body. */
static int lease_servers(struct master_store *st, const char *id, ms_lease *b)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_LEASE_SERVERS);
	ms_server *list = NULL;
	u_int n = 0, cap = 0;
	int rc, ret = 0;

	master_store_bind_text(s, 1, id);
	while (!ret && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (n == cap) {
			ms_server *l;

			cap = cap ? cap * 2 : 8;
			if (!(l = reallocarray(list, cap, sizeof(*l)))) {
				ret = -ENOMEM;
				break;
			}
			list = l;
		}
		b->servers.servers_val = list;
		ret = master_store_fill_server(s, 0, &list[n]);
		b->servers.servers_len = ++n;
	}
	sqlite3_reset(s);
	if (!ret && rc != SQLITE_DONE)
		ret = master_store_sql_fail(st, "lease servers", rc);
	return ret;
}

/* The reply's body: the lease as l says. */
static int lease_body(ms_reply *rep, const char *id, const struct lease *l)
{
	ms_lease *b = &rep->body.ms_body_u.lease;

	rep->body.kind = MS_BODY_LEASE;
	b->vdisk = master_strdup(id);
	b->holder = master_strdup(l->holder);
	b->previous = master_strdup(l->previous);
	b->epoch = l->epoch;
	b->fence = l->fence;
	b->since = l->since;
	b->fence_pending = l->fence_pending;
	return b->vdisk && b->holder && b->previous ? 0 : -ENOMEM;
}

static int lease_ok(ms_reply *rep, const char *id, const struct lease *l,
		    bool changed)
{
	int ret = master_reply_ok(rep, changed);

	return ret ? ret : lease_body(rep, id, l);
}

/* An error reply that carries the lease as it is. */
static int lease_refuse(ms_reply *rep, ms_status status, const char *id,
			const struct lease *l, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int lease_refuse(ms_reply *rep, ms_status status, const char *id,
			const struct lease *l, const char *fmt, ...)
{
	char msg[MS_MESSAGE_MAX + 1];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if ((ret = master_reply_fail(rep, status, "%s", msg)))
		return ret;
	return lease_body(rep, id, l);
}

/*
 * The disk exists, the host ids are well formed (to too when need_to), or
 * a reply says why not (*ok false).  Then *l is the disk's lease.
 */
static int check_lease_args(struct master_store *st, const ms_lease_args *a,
			    bool need_to, struct lease *l, ms_reply *rep,
			    bool *ok)
{
	int ret;

	*ok = false;
	if (!master_vdisk_id_ok(a->vdisk))
		return master_reply_fail(rep, MS_EINVAL,
					 "a vdisk id is 1-%d of "
					 "[A-Za-z0-9._-]",
					 MS_VDISK_ID_MAX);
	if (!master_host_id_ok(a->host) ||
	    (need_to && !master_host_id_ok(a->to)))
		return master_reply_fail(rep, MS_EINVAL,
					 "a host id is 1-%d of [A-Za-z0-9._-] "
					 "(see /etc/tapstripe/host-id or "
					 "--host-id)",
					 MS_HOST_ID_MAX);
	if ((ret = master_store_vdisk_exists(st, a->vdisk)) < 0)
		return ret;
	if (!ret)
		return master_reply_fail(rep, MS_ENOENT,
					 "no vdisk %s: see 'stripe-ctl vdisk "
					 "list'",
					 a->vdisk);
	if ((ret = lease_get(st, a->vdisk, l)))
		return ret;
	if (l->epoch >= INT64_MAX)
		return master_reply_fail(rep, MS_EIO,
					 "the lease of %s has no epoch left",
					 a->vdisk);
	*ok = true;
	return 0;
}

/*
 * Move the lease to holder at epoch + 1 (previous: the old holder), now;
 * pending: the old holder is being fenced.
 */
static int lease_move(struct master_store *st, const char *id, struct lease *l,
		      const char *holder, bool fence, bool pending)
{
	snprintf(l->previous, HOST_BUF, "%s", l->holder);
	snprintf(l->holder, HOST_BUF, "%s", holder);
	l->epoch++;
	l->fence = fence;
	l->fence_pending = pending;
	l->since = (uint64_t)time(NULL);
	return lease_put(st, id, l);
}

static int refuse_held(ms_reply *rep, const ms_lease_args *a,
		       const struct lease *l)
{
	return lease_refuse(
		rep, MS_EHELD, a->vdisk, l,
		"vdisk %s is held by host %s (epoch %" PRIu64
		"), not by %s: stop it there and release it, or hand it over "
		"from there (stripe-ctl vdisk lease handover %s --to %s); if "
		"host %s is dead, take it over (stripe-ctl vdisk lease "
		"takeover %s --fence)",
		a->vdisk, l->holder, l->epoch, a->host, a->vdisk, a->host,
		l->holder, a->vdisk);
}

static int refuse_stale(ms_reply *rep, const ms_lease_args *a,
			const struct lease *l)
{
	if (!*l->holder && l->epoch == a->epoch)
		return lease_refuse(rep, MS_ESTALE, a->vdisk, l,
				    "vdisk %s is not held by %s: its lease is "
				    "free at epoch %" PRIu64
				    " (last held by %s); acquire it first",
				    a->vdisk, a->host, l->epoch,
				    *l->previous ? l->previous : "nobody");
	return lease_refuse(
		rep, MS_ESTALE, a->vdisk, l,
		"the lease of vdisk %s is at epoch %" PRIu64
		" (%s%s), not %" PRIu64 ": it changed meanwhile; look again "
		"(stripe-ctl vdisk lease show %s)",
		a->vdisk, l->epoch, *l->holder ? "held by " : "free", l->holder,
		a->epoch, a->vdisk);
}

/*
 * host may get a lease only when not fenced: *refused true and an
 * MS_EFENCED reply (body: the lease as it is) when it is.  what says the
 * act refused ("acquire", "be handed", "take over").
 */
static int check_fenced(struct master_store *st, ms_reply *rep,
			const ms_lease_args *a, const struct lease *l,
			const char *host, const char *what, bool *refused)
{
	struct master_fence f;
	char when[32] = "?";
	time_t t;
	struct tm tm;
	int ret;

	*refused = false;
	if ((ret = master_store_fenced_get(st, host, &f)) <= 0)
		return ret;
	*refused = true;
	t = (time_t)f.since;
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	return lease_refuse(rep, MS_EFENCED, a->vdisk, l,
			    "host %s may not %s vdisk %s: it was fenced by "
			    "host %s at %s (takeover of vdisk %s at epoch "
			    "%" PRIu64 "); make sure host %s's tapdisks of "
			    "disk %s are stopped, then re-admit it: "
			    "stripe-ctl host readmit %s",
			    host, what, a->vdisk, f.by, when, f.vdisk, f.epoch,
			    host, f.vdisk, host);
}

/*
 * While a fenced takeover is not confirmed (fence_pending), the old
 * holder may still write to some LUN: the lease must not move on (a
 * release or hand-over would let a third host serve beside it, and a
 * takeover by a third host would fence only the pending holder).  Only
 * the pending holder finishes the fence (stripe-ctl vdisk lease takeover
 * --fence again, or with --host-id HOLDER from any host when it is gone).
 */
static int refuse_pending(ms_reply *rep, const ms_lease_args *a,
			  const struct lease *l, const char *what)
{
	return master_reply_fail(
		rep, MS_EBUSY,
		"vdisk %s cannot be %s: host %s took it over from %s at epoch "
		"%" PRIu64 " and has not finished fencing %s on its LUNs; "
		"finish it first: stripe-ctl --host-id %s vdisk lease takeover "
		"%s --fence (from any host, if %s is gone)",
		a->vdisk, what, l->holder, l->previous, l->epoch, l->previous,
		l->holder, a->vdisk, l->holder);
}

int master_store_lease_acquire(struct master_store *st, const ms_lease_args *a,
			       ms_reply *rep)
{
	struct lease l;
	bool ok;
	int ret = check_lease_args(st, a, false, &l, rep, &ok);

	if (ret || !ok)
		return ret;
	if ((ret = check_fenced(st, rep, a, &l, a->host, "acquire", &ok)) || ok)
		return ret;
	if (!strcmp(l.holder, a->host)) /* held already: a retry, a reopen */
		return lease_ok(rep, a->vdisk, &l, false);
	if (*l.holder)
		return refuse_held(rep, a, &l);
	if ((ret = lease_move(st, a->vdisk, &l, a->host, false, false)))
		return ret;
	td_info("vdisk %s: lease acquired by %s, epoch %" PRIu64, a->vdisk,
		a->host, l.epoch);
	return lease_ok(rep, a->vdisk, &l, true);
}

int master_store_lease_release(struct master_store *st, const ms_lease_args *a,
			       ms_reply *rep)
{
	struct lease l;
	bool ok;
	int ret = check_lease_args(st, a, false, &l, rep, &ok);

	if (ret || !ok)
		return ret;
	if (!*l.holder && !strcmp(l.previous, a->host) && l.epoch == a->epoch)
		return lease_ok(rep, a->vdisk, &l, false); /* released */
	if (*l.holder && strcmp(l.holder, a->host))
		return refuse_held(rep, a, &l);
	if (!*l.holder || l.epoch != a->epoch)
		return refuse_stale(rep, a, &l);
	if (l.fence_pending)
		return refuse_pending(rep, a, &l, "released");
	snprintf(l.previous, HOST_BUF, "%s", l.holder);
	l.holder[0] = '\0';
	l.fence = false;
	l.fence_pending = false;
	l.since = (uint64_t)time(NULL);
	if ((ret = lease_put(st, a->vdisk, &l)))
		return ret;
	td_info("vdisk %s: lease released by %s at epoch %" PRIu64, a->vdisk,
		a->host, l.epoch);
	return lease_ok(rep, a->vdisk, &l, true);
}

int master_store_lease_handover(struct master_store *st, const ms_lease_args *a,
				ms_reply *rep)
{
	struct lease l;
	bool ok;
	int ret = check_lease_args(st, a, true, &l, rep, &ok);

	if (ret || !ok)
		return ret;
	if (!strcmp(a->host, a->to))
		return master_reply_fail(rep, MS_EINVAL,
					 "a hand-over goes to another host, "
					 "not to %s itself",
					 a->host);
	if (!strcmp(l.holder, a->to) && !strcmp(l.previous, a->host) &&
	    a->epoch < INT64_MAX && l.epoch == a->epoch + 1)
		return lease_ok(rep, a->vdisk, &l, false); /* a retry */
	if (*l.holder && strcmp(l.holder, a->host))
		return refuse_held(rep, a, &l);
	if (!*l.holder || l.epoch != a->epoch)
		return refuse_stale(rep, a, &l);
	if (l.fence_pending)
		return refuse_pending(rep, a, &l, "handed over");
	if ((ret = check_fenced(st, rep, a, &l, a->to, "be handed", &ok)) || ok)
		return ret;
	if ((ret = lease_move(st, a->vdisk, &l, a->to, false, false)))
		return ret;
	td_info("vdisk %s: lease handed over from %s to %s, epoch %" PRIu64,
		a->vdisk, a->host, a->to, l.epoch);
	return lease_ok(rep, a->vdisk, &l, true);
}

static int takeover_ok(struct master_store *st, ms_reply *rep, const char *id,
		       const struct lease *l, bool changed)
{
	int ret = lease_ok(rep, id, l, changed);

	return ret ? ret : lease_servers(st, id, &rep->body.ms_body_u.lease);
}

/* The takeover that moves the lease, fencing its old holder when asked. */
static int takeover_move(struct master_store *st, const ms_lease_args *a,
			 struct lease *l)
{
	bool fencing = a->fence && *l->holder && strcmp(l->holder, a->host);
	int ret = lease_move(st, a->vdisk, l, a->host, a->fence, fencing);

	if (!ret && fencing)
		ret = master_store_fenced_put(st, l->previous, a->host,
					      a->vdisk, l->epoch);
	if (ret)
		return ret;
	td_warn("vdisk %s: lease taken over by %s from %s, epoch %" PRIu64 "%s",
		a->vdisk, a->host, *l->previous ? l->previous : "nobody",
		l->epoch,
		fencing	   ? ", old holder fenced"
		: a->fence ? ", nobody to fence"
			   : "");
	return 0;
}

int master_store_lease_takeover(struct master_store *st, const ms_lease_args *a,
				ms_reply *rep)
{
	struct lease l;
	bool ok;
	int ret = check_lease_args(st, a, false, &l, rep, &ok);

	if (ret || !ok)
		return ret;
	if (!strcmp(l.holder, a->host) &&
	    (l.epoch == a->epoch ||
	     (a->epoch < INT64_MAX && l.epoch == a->epoch + 1)))
		return takeover_ok(st, rep, a->vdisk, &l, false); /* a retry */
	if ((ret = check_fenced(st, rep, a, &l, a->host, "take over", &ok)) ||
	    ok)
		return ret;
	if (l.epoch != a->epoch)
		return refuse_stale(rep, a, &l);
	if (l.fence_pending)
		return refuse_pending(rep, a, &l, "taken over");
	if ((ret = takeover_move(st, a, &l)))
		return ret;
	return takeover_ok(st, rep, a->vdisk, &l, true);
}

int master_store_lease_fenced(struct master_store *st, const ms_lease_args *a,
			      ms_reply *rep)
{
	struct lease l;
	bool ok;
	int ret = check_lease_args(st, a, false, &l, rep, &ok);

	if (ret || !ok)
		return ret;
	if (*l.holder && strcmp(l.holder, a->host))
		return refuse_held(rep, a, &l);
	if (!*l.holder || l.epoch != a->epoch)
		return refuse_stale(rep, a, &l);
	if (!l.fence_pending) /* confirmed already, or nothing to fence */
		return lease_ok(rep, a->vdisk, &l, false);
	l.fence_pending = false;
	if ((ret = lease_put(st, a->vdisk, &l)))
		return ret;
	td_info("vdisk %s: %s confirmed host %s fenced, epoch %" PRIu64,
		a->vdisk, a->host, l.previous, l.epoch);
	return lease_ok(rep, a->vdisk, &l, true);
}

int master_store_lease_show(struct master_store *st, const char *id,
			    ms_reply *rep)
{
	ms_lease_args a = {.vdisk = (char *)id, .host = (char *)"show"};
	struct lease l;
	bool ok;
	int ret = check_lease_args(st, &a, false, &l, rep, &ok);

	if (ret || !ok)
		return ret;
	return lease_ok(rep, id, &l, false);
}
