/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-repl.c - the store replicated through a log in etcd (issue #23):
 * every round's changes (an sqlite3session changeset) become the next
 * entry of /tapstripe/CLUSTER/log/ by one compare-and-swap on
 * /tapstripe/CLUSTER/head; the local SQLite file is a replica of the log
 * (see store.h, "Replication").
 */
#include "config.h"

#define SQLITE_ENABLE_SESSION
#define SQLITE_ENABLE_PREUPDATE_HOOK

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/log.h"
#include "master/etcd/etcd.h"
#include "master/server/store-int.h"

#define REPL_SCHEME	   "etcd://"
#define REPL_TIMEOUT_MS	   2000 /* per etcd endpoint and request */
#define REPL_CATCHUP_BATCH 256	/* log entries fetched per request */
#define REPL_INDEX_DIGITS  20	/* zero-padded: keys sort as numbers */
#define REPL_CLUSTER_MAX   63
#define REPL_ENDPOINTS_MAX 1024
#define REPL_NUMBER_MAX	   24

static const char local_sql[] =
	"CREATE TABLE IF NOT EXISTS replication ("
	" id INTEGER PRIMARY KEY CHECK (id = 1),"
	" cluster_id TEXT NOT NULL,"
	" applied INTEGER NOT NULL CHECK (applied >= 0))";

/* --- keys --------------------------------------------------------------------- */

size_t master_repl_key(const struct master_repl *r, const char *name, char *out)
{
	return (size_t)snprintf(out, REPL_KEY_MAX, "%s%s", r->prefix, name);
}

size_t master_repl_log_key(const struct master_repl *r, uint64_t index,
			   char *out)
{
	return (size_t)snprintf(out, REPL_KEY_MAX, "%slog/%0*" PRIu64,
				r->prefix, REPL_INDEX_DIGITS, index);
}

#define repl_key     master_repl_key
#define repl_log_key master_repl_log_key

int master_repl_random_hex(char *out, size_t bytes)
{
	uint8_t raw[REPL_ID_BYTES];

	if (bytes > sizeof(raw) || getrandom(raw, bytes, 0) != (ssize_t)bytes)
		return -EIO;
	for (size_t i = 0; i < bytes; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

int master_repl_local_table(sqlite3 *db)
{
	return sqlite3_exec(db, local_sql, NULL, NULL, NULL) == SQLITE_OK
		       ? 0
		       : -EIO;
}

/* [log/, its prefix end): every log entry. */
static void repl_log_end(const struct master_repl *r, char *out, size_t *len)
{
	char base[REPL_KEY_MAX];

	repl_key(r, "log/", base);
	etcd_prefix_end(base, strlen(base), (uint8_t *)out, len);
}

/* etcd://HOST:PORT[,HOST:PORT...]/CLUSTER into endpoints and prefix. */
static int repl_parse(struct master_repl *r, const char *url, char *endpoints,
		      char *msg, size_t len)
{
	const char *hosts = url + strlen(REPL_SCHEME), *slash, *cluster, *p;
	size_t used = 0;

	if (strncmp(url, REPL_SCHEME, strlen(REPL_SCHEME)) ||
	    !(slash = strchr(hosts, '/')) || slash == hosts)
		goto bad;
	cluster = slash + 1;
	if (!*cluster || strlen(cluster) > REPL_CLUSTER_MAX ||
	    !master_store_label_ok(cluster, false))
		goto bad;
	for (p = hosts; p < slash;) {
		const char *end = memchr(p, ',', (size_t)(slash - p));
		size_t n = (size_t)((end ? end : slash) - p);
		int w;

		if (!n)
			goto bad;
		w = snprintf(endpoints + used, REPL_ENDPOINTS_MAX - used,
			     "%shttp://%.*s", used ? "," : "", (int)n, p);
		if (w < 0 || (size_t)w >= REPL_ENDPOINTS_MAX - used)
			goto bad;
		used += (size_t)w;
		p += n + (end ? 1 : 0);
	}
	snprintf(r->url, sizeof(r->url), "%s", url);
	snprintf(r->prefix, sizeof(r->prefix), "/tapstripe/%s/", cluster);
	return 0;
bad:
	snprintf(msg, len,
		 "--store '%s' is not etcd://HOST:PORT[,HOST:PORT...]/CLUSTER "
		 "(CLUSTER: 1-%d of [A-Za-z0-9._-])",
		 url, REPL_CLUSTER_MAX);
	return -EINVAL;
}

/* --- applying the log --------------------------------------------------------- */

static int repl_conflict(void *ctx, int kind, sqlite3_changeset_iter *it)
{
	const char *table = "?";
	int nr_cols, op, indirect;

	sqlite3changeset_op(it, &table, &nr_cols, &op, &indirect);
	td_err("log entry %" PRIu64 " conflicts with the local replica "
	       "(table %s, conflict %d, op %d): the replica diverged from "
	       "the log, a bug; this master refuses every call",
	       *(uint64_t *)ctx + 1, table, kind, op);
	return SQLITE_CHANGESET_ABORT;
}

static int repl_set_applied(struct master_store *st, uint64_t applied)
{
	char sql[96];
	int rc;

	snprintf(sql, sizeof(sql), "UPDATE replication SET applied = %" PRIu64,
		 applied);
	rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : master_store_sql_fail(st, "applied", rc);
}

/* Apply one log entry (the next one) in a local transaction of its own. */
static int repl_apply(struct master_store *st, const struct etcd_kv *kv)
{
	struct master_repl *r = st->repl;
	char key[REPL_KEY_MAX];
	size_t n = repl_log_key(r, r->applied + 1, key);
	int rc, ret;

	if (kv->key_len != n || memcmp(kv->key, key, n)) {
		td_err("the log in etcd skips entry %s (got %.*s): refusing "
		       "every call",
		       key, (int)kv->key_len, (const char *)kv->key);
		r->diverged = true;
		return -EUCLEAN;
	}
	if ((rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL)))
		return master_store_sql_fail(st, "begin (catch up)", rc);
	rc = sqlite3changeset_apply(st->db, (int)kv->value_len, kv->value, NULL,
				    repl_conflict, &r->applied);
	if (rc != SQLITE_OK) {
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		r->diverged = true;
		td_err("log entry %" PRIu64 " does not apply (sqlite %d)",
		       r->applied + 1, rc);
		return -EUCLEAN;
	}
	if ((ret = repl_set_applied(st, r->applied + 1)) ||
	    (rc = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL))) {
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
		return ret ? ret : master_store_sql_fail(st, "commit", rc);
	}
	r->applied++;
	return 0;
}

static int repl_apply_range(struct master_store *st,
			    const struct etcd_range *rg)
{
	int ret = 0;

	for (size_t i = 0; i < rg->nr_kvs && !ret; i++)
		ret = repl_apply(st, &rg->kvs[i]);
	return ret;
}

static int repl_etcd_fail(struct master_repl *r, const char *what, int ret)
{
	td_err("%s on %s: %s", what, r->url, etcd_client_error(r->etcd));
	return ret;
}

/* Does rg start with the entry after the applied one? */
static bool repl_starts_next(const struct master_repl *r,
			     const struct etcd_range *rg)
{
	char key[REPL_KEY_MAX];
	size_t n = repl_log_key(r, r->applied + 1, key);

	return rg->nr_kvs && rg->kvs[0].key_len == n &&
	       !memcmp(rg->kvs[0].key, key, n);
}

/*
 * One step of catching up: the entries after the applied one, and head.
 * When a compaction deleted the next entry, the newest snapshot bridges
 * the gap.  *more: call again.
 */
static int repl_catch_up_step(struct master_store *st, bool *more)
{
	struct master_repl *r = st->repl;
	char from[REPL_KEY_MAX], to[REPL_KEY_MAX], head[REPL_KEY_MAX];
	char text[REPL_NUMBER_MAX];
	struct etcd_txn_result res;
	size_t to_len;
	int ret = 0;

	repl_log_end(r, to, &to_len);
	struct etcd_op op[2] = {
		{.kind = ETCD_OP_RANGE,
		 .key = from,
		 .key_len = repl_log_key(r, r->applied + 1, from),
		 .range_end = to,
		 .range_end_len = to_len,
		 .limit = REPL_CATCHUP_BATCH},
		{.kind = ETCD_OP_RANGE,
		 .key = head,
		 .key_len = repl_key(r, "head", head)},
	};

	if ((ret = etcd_txn(r->etcd, NULL, 0, op, 2, NULL, 0, &res)))
		return repl_etcd_fail(r, "catching up", ret);
	*more = false;
	if (res.nr_ranges == 2 && repl_starts_next(r, &res.ranges[0])) {
		ret = repl_apply_range(st, &res.ranges[0]);
		*more = res.ranges[0].more;
	} else if (res.nr_ranges == 2) {
		master_repl_kv_text(&res.ranges[1], text, sizeof(text));
		if (strtoull(text, NULL, 10) > r->applied) {
			ret = master_repl_snap_load(st);
			*more = true;
		}
	}
	etcd_txn_result_clear(&res);
	return ret;
}

/* Fetch and apply every log entry after the applied one. */
static int repl_catch_up(struct master_store *st)
{
	bool more = true;
	int ret = 0;

	while (more && !ret)
		ret = repl_catch_up_step(st, &more);
	return ret;
}

/* --- rounds ------------------------------------------------------------------- */

static int repl_filter(void *ctx, const char *table)
{
	(void)ctx;
	return strcmp(table, "replication") && strncmp(table, "sqlite_", 7);
}

int master_repl_round_begin(struct master_store *st)
{
	struct master_repl *r = st->repl;
	int rc;

	if (r->diverged)
		return -EUCLEAN;
	if ((rc = sqlite3session_create(st->db, "main", &r->session)))
		return master_store_sql_fail(st, "session", rc);
	sqlite3session_table_filter(r->session, repl_filter, NULL);
	if ((rc = sqlite3session_attach(r->session, NULL))) {
		master_repl_round_end(st);
		return master_store_sql_fail(st, "session attach", rc);
	}
	return 0;
}

void master_repl_round_end(struct master_store *st)
{
	if (st->repl && st->repl->session) {
		sqlite3session_delete(st->repl->session);
		st->repl->session = NULL;
	}
}

/* The local COMMIT of a round etcd took as entry applied + 1 (or, when
 * nothing changed, confirmed as current). */
static int repl_commit_local(struct master_store *st, bool changed)
{
	struct master_repl *r = st->repl;
	int ret = 0;

	if (changed)
		ret = repl_set_applied(st, r->applied + 1);
	if (!ret)
		ret = master_store_exec(st, master_store_stmt(st, ST_COMMIT),
					"commit");
	if (ret) {
		/* etcd has the entry: the next round applies it again. */
		master_store_rollback(st);
		return ret;
	}
	if (changed) {
		r->applied++;
		master_repl_maybe_compact(st);
	}
	return 0;
}

/*
 * The etcd txn of a round: if head is still applied, put the changeset
 * as entry applied + 1 and move head (nothing when the round changed
 * nothing: the compare alone makes its reads linearizable); else range
 * the entries after applied, to catch up.
 */
static int repl_txn(struct master_repl *r, const void *cs, int cs_len,
		    struct etcd_txn_result *res)
{
	char head[REPL_KEY_MAX], entry[REPL_KEY_MAX], end[REPL_KEY_MAX];
	char cur[REPL_NUMBER_MAX], next[REPL_NUMBER_MAX];
	size_t head_len = repl_key(r, "head", head), end_len;
	struct etcd_cmp cmp = {.kind = ETCD_CMP_VALUE,
			       .key = head,
			       .key_len = head_len,
			       .value = cur,
			       .value_len = (size_t)snprintf(cur, sizeof(cur),
							     "%" PRIu64,
							     r->applied)};
	size_t entry_len = repl_log_key(r, r->applied + 1, entry);
	struct etcd_op put[2] = {
		{.kind = ETCD_OP_PUT,
		 .key = entry,
		 .key_len = entry_len,
		 .value = cs,
		 .value_len = (size_t)cs_len},
		{.kind = ETCD_OP_PUT,
		 .key = head,
		 .key_len = head_len,
		 .value = next,
		 .value_len = (size_t)snprintf(next, sizeof(next), "%" PRIu64,
					       r->applied + 1)},
	};
	struct etcd_op range = {.kind = ETCD_OP_RANGE,
				.key = entry,
				.key_len = entry_len,
				.range_end = end,
				.limit = REPL_CATCHUP_BATCH};

	repl_log_end(r, end, &end_len);
	range.range_end_len = end_len;
	return etcd_txn(r->etcd, &cmp, 1, put, cs_len ? 2 : 0, &range, 1, res);
}

int master_repl_commit(struct master_store *st)
{
	struct master_repl *r = st->repl;
	struct etcd_txn_result res;
	void *cs = NULL;
	int cs_len = 0, rc, ret;

	rc = r->session ? sqlite3session_changeset(r->session, &cs_len, &cs)
			: SQLITE_MISUSE;
	master_repl_round_end(st);
	if (rc != SQLITE_OK) {
		master_store_rollback(st);
		return master_store_sql_fail(st, "changeset", rc);
	}
	ret = repl_txn(r, cs, cs_len, &res);
	sqlite3_free(cs);
	if (ret) {
		/* It may have been applied: the next round's compare says;
		 * but not when etcd refused it (too large, say). */
		master_store_rollback(st);
		repl_etcd_fail(r, "replicating a round", ret);
		return ret == -EINVAL ? -E2BIG : ret;
	}
	if (res.succeeded) {
		etcd_txn_result_clear(&res);
		return repl_commit_local(st, cs_len > 0);
	}
	master_store_rollback(st);
	if (res.nr_ranges && repl_starts_next(r, &res.ranges[0])) {
		ret = repl_apply_range(st, &res.ranges[0]);
		if (!ret && res.ranges[0].more)
			ret = repl_catch_up(st);
	} else {
		ret = repl_catch_up(st); /* a gap: a compaction */
	}
	etcd_txn_result_clear(&res);
	return ret ? ret : -EAGAIN;
}

/* --- attaching ---------------------------------------------------------------- */

/* The local replica's cluster id and applied index; 1 when it has them. */
static int repl_local_get(struct master_store *st, char *id, size_t len)
{
	sqlite3_stmt *s;
	int found = 0;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT cluster_id, applied FROM replication",
			       -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	if (sqlite3_step(s) == SQLITE_ROW) {
		snprintf(id, len, "%s",
			 (const char *)sqlite3_column_text(s, 0));
		st->repl->applied = (uint64_t)sqlite3_column_int64(s, 1);
		found = 1;
	}
	sqlite3_finalize(s);
	return found;
}

/* A local file with state but no replication row holds a SQLite store. */
static bool repl_local_empty(struct master_store *st)
{
	sqlite3_stmt *s;
	bool empty = false;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT (SELECT count(*) FROM servers) +"
			       " (SELECT count(*) FROM vdisks) +"
			       " (SELECT count(*) FROM leases)",
			       -1, &s, NULL) != SQLITE_OK)
		return false;
	empty = sqlite3_step(s) == SQLITE_ROW && !sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return empty;
}

void master_repl_kv_text(const struct etcd_range *rg, char *out, size_t len)
{
	size_t n = rg->nr_kvs ? rg->kvs[0].value_len : 0;

	if (n >= len)
		n = len - 1;
	if (n)
		memcpy(out, rg->kvs[0].value, n);
	out[n] = '\0';
}

/*
 * The store's id and extent size: created with a new id (and head 0) when
 * the cluster is new, read when not.
 */
static int repl_identity(struct master_store *st, char *id, size_t id_len,
			 uint64_t *extent_bytes, char *msg, size_t len)
{
	struct master_repl *r = st->repl;
	char kid[REPL_KEY_MAX], khead[REPL_KEY_MAX], kext[REPL_KEY_MAX];
	char ext[REPL_NUMBER_MAX], fresh[2 * REPL_ID_BYTES + 1];
	struct etcd_txn_result res;
	int ret;

	if ((ret = master_repl_random_hex(fresh, REPL_ID_BYTES)))
		return ret;
	snprintf(ext, sizeof(ext), "%" PRIu64, st->extent_bytes);
	struct etcd_cmp cmp = {.kind = ETCD_CMP_ABSENT,
			       .key = kid,
			       .key_len = repl_key(r, "id", kid)};
	struct etcd_op put[3] = {
		{.kind = ETCD_OP_PUT,
		 .key = kid,
		 .key_len = cmp.key_len,
		 .value = fresh,
		 .value_len = strlen(fresh)},
		{.kind = ETCD_OP_PUT,
		 .key = khead,
		 .key_len = repl_key(r, "head", khead),
		 .value = "0",
		 .value_len = 1},
		{.kind = ETCD_OP_PUT,
		 .key = kext,
		 .key_len = repl_key(r, "extent_bytes", kext),
		 .value = ext,
		 .value_len = strlen(ext)},
	};
	struct etcd_op get[2] = {
		{.kind = ETCD_OP_RANGE, .key = kid, .key_len = cmp.key_len},
		{.kind = ETCD_OP_RANGE, .key = kext, .key_len = put[2].key_len},
	};

	if ((ret = etcd_txn(r->etcd, &cmp, 1, put, 3, get, 2, &res))) {
		snprintf(msg, len,
			 "cannot reach the store %s: %s: start etcd there or "
			 "give the right --store",
			 r->url, etcd_client_error(r->etcd));
		return ret;
	}
	if (res.succeeded) {
		snprintf(id, id_len, "%s", fresh);
		*extent_bytes = st->extent_bytes;
		td_info("%s: a new cluster, id %s", r->url, id);
	} else {
		master_repl_kv_text(&res.ranges[0], id, id_len);
		master_repl_kv_text(&res.ranges[1], ext, sizeof(ext));
		*extent_bytes = strtoull(ext, NULL, 10);
	}
	etcd_txn_result_clear(&res);
	return 0;
}

/* The local replica belongs to the store's cluster (or becomes its). */
static int repl_adopt(struct master_store *st, const char *id,
		      uint64_t extent_bytes, char *msg, size_t len)
{
	char local[2 * REPL_ID_BYTES + 1] = "";
	int found = repl_local_get(st, local, sizeof(local)), rc;
	char sql[160];

	if (found < 0)
		return found;
	if (found && strcmp(local, id)) {
		snprintf(msg, len,
			 "%s is a replica of the cluster with id %s, but the "
			 "store %s has id %s: give the --store of its cluster, "
			 "or a new --db",
			 st->path, local, st->repl->url, id);
		return -EINVAL;
	}
	if (extent_bytes != st->extent_bytes) {
		snprintf(msg, len,
			 "the store %s has extents of %" PRIu64 " bytes, %s of "
			 "%" PRIu64 ": give --extent-size %" PRIu64
			 " and a new --db",
			 st->repl->url, extent_bytes, st->path,
			 st->extent_bytes, extent_bytes);
		return -EINVAL;
	}
	if (found)
		return 0;
	if (!repl_local_empty(st)) {
		snprintf(msg, len,
			 "%s holds a SQLite store's state: it cannot become a "
			 "replica of %s; give a new --db, or move the store "
			 "into etcd first (stripe-master --migrate to-etcd)",
			 st->path, st->repl->url);
		return -EINVAL;
	}
	snprintf(sql, sizeof(sql),
		 "INSERT INTO replication VALUES (1, '%s', 0)", id);
	rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : master_store_sql_fail(st, "replica", rc);
}

int master_repl_new(const char *url, struct master_repl **out, char *msg,
		    size_t len)
{
	char endpoints[REPL_ENDPOINTS_MAX];
	struct master_repl *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->compact_every = REPL_DEFAULT_COMPACT_EVERY;
	if ((ret = repl_parse(r, url, endpoints, msg, len)) ||
	    (ret = etcd_client_new(endpoints, REPL_TIMEOUT_MS, &r->etcd, msg,
				   len))) {
		free(r);
		return ret;
	}
	*out = r;
	return 0;
}

void master_repl_destroy(struct master_repl *r)
{
	if (!r)
		return;
	master_repl_snap_job_free(r);
	if (r->session)
		sqlite3session_delete(r->session);
	etcd_client_free(r->etcd);
	free(r);
}

/*
 * The replica is a cache of the log: an acknowledged round is in etcd
 * (quorum-committed) before the local COMMIT, and a replica that lost
 * its last commits (power lost: synchronous = NORMAL keeps the WAL
 * consistent, not durable) holds an older applied index with the state
 * of that index, since both change in one transaction; on restart
 * repl_catch_up applies the entries after it (or the snapshot that
 * bridges a compacted gap).  So the local COMMIT need not wait for an
 * fsync: it took 1-2 ms of each round (issue #23).  kill -9 loses
 * nothing either way (the page cache survives).
 */
static int repl_cache_sync(sqlite3 *db)
{
	return sqlite3_exec(db, "PRAGMA synchronous = NORMAL", NULL, NULL,
			    NULL) == SQLITE_OK
		       ? 0
		       : -EIO;
}

int master_store_attach_etcd(struct master_store *st, const char *url,
			     char *msg, size_t len)
{
	char *id;
	uint64_t extent_bytes = 0;
	int ret;

	if ((ret = master_repl_new(url, &st->repl, msg, len)))
		return ret;
	id = st->repl->id;
	if (master_repl_local_table(st->db) || repl_cache_sync(st->db)) {
		snprintf(msg, len, "%s: %s", st->path, sqlite3_errmsg(st->db));
		return -EIO;
	}
	if ((ret = repl_identity(st, id, sizeof(st->repl->id), &extent_bytes,
				 msg, len)) ||
	    (ret = repl_adopt(st, id, extent_bytes, msg, len)))
		return ret;
	if ((ret = repl_catch_up(st))) {
		snprintf(msg, len, "cannot catch up with the log in %s: %s",
			 url,
			 ret == -EUCLEAN ? "the local replica diverged (see "
					   "the log)"
					 : etcd_client_error(st->repl->etcd));
		return ret;
	}
	td_info("%s: replica of %s (cluster id %s) at log entry %" PRIu64,
		st->path, url, id, st->repl->applied);
	return 0;
}

int master_store_set_compact_every(struct master_store *st,
				   unsigned int entries)
{
	if (!st->repl)
		return -EINVAL;
	st->repl->compact_every = entries;
	return 0;
}

bool master_store_replicated(const struct master_store *st)
{
	return st->repl != NULL;
}

void master_repl_free(struct master_store *st)
{
	if (!st->repl)
		return;
	master_repl_destroy(st->repl);
	st->repl = NULL;
}
