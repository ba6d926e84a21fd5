/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-migrate.c - moving a store between the back ends (issue #23):
 * a SQLite store into etcd as the first snapshot of a new cluster, and a
 * cluster's state into a new SQLite file; the consistency check on both
 * sides (see store.h, "Migration").
 *
 * Killed at any step, a run may simply be started again:
 *  - to etcd: nothing is visible to masters before the last txn, which
 *    creates the cluster's id, head, extent size, snapshot pointer and
 *    origin at once, if id is still absent.  A run finding the cluster
 *    without an id deletes what an interrupted run left (snapshot chunks);
 *    one finding the id with its own origin (this file, these bytes) only
 *    says it is done.
 *  - to SQLite: the file is built as PATH.migrating (removed first when
 *    an interrupted run left it) and renamed to PATH at the end.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/log.h"
#include "master/etcd/etcd.h"
#include "master/server/store-int.h"

#define MIG_ORIGIN_MAX	   (PATH_MAX_MIG + 64)
#define PATH_MAX_MIG	   4096
#define MIG_NUMBER_MAX	   24
#define MIG_TMP_SUFFIX	   ".migrating"
#define MIG_CHECK_SUFFIX   ".migrate-check"
#define FNV_OFFSET	   0xcbf29ce484222325ull
#define FNV_PRIME	   0x100000001b3ull
#define MIG_CHECK_MSG_SIZE 512

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
	uint64_t h = FNV_OFFSET;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * FNV_PRIME;
	return h;
}

/* Remove path and SQLite's -wal and -shm beside it. */
static void mig_unlink_db(const char *path)
{
	char side[PATH_MAX_MIG + 64];

	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
}

static bool mig_is_replica(sqlite3 *db)
{
	sqlite3_stmt *s;
	bool yes = false;

	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM replication", -1, &s,
			       NULL) != SQLITE_OK)
		return false; /* no such table */
	yes = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return yes;
}

/* master_store_check of a store, its words in msg. */
static int mig_check(struct master_store *st, const char *side, char *msg,
		     size_t len)
{
	char why[MIG_CHECK_MSG_SIZE] = "";
	int ret = master_store_check(st, why, sizeof(why));

	if (ret)
		snprintf(msg, len, "%s is not consistent: %s", side,
			 ret == -EUCLEAN ? why : strerror(-ret));
	return ret;
}

static int mig_unreachable(struct master_repl *r, int ret, char *msg,
			   size_t len)
{
	snprintf(msg, len,
		 "cannot reach the store %s: %s: start etcd there or give the "
		 "right --store",
		 r->url, etcd_client_error(r->etcd));
	return ret;
}

/* Delete everything under the cluster's prefix. */
static int mig_wipe(struct master_repl *r)
{
	char to[REPL_KEY_MAX];
	struct etcd_op del = {.kind = ETCD_OP_DELETE,
			      .key = r->prefix,
			      .key_len = strlen(r->prefix),
			      .range_end = to};
	struct etcd_txn_result res;
	int ret;

	etcd_prefix_end(r->prefix, del.key_len, (uint8_t *)to,
			&del.range_end_len);
	if (!(ret = etcd_txn(r->etcd, NULL, 0, &del, 1, NULL, 0, &res)))
		etcd_txn_result_clear(&res);
	return ret;
}

/* What the cluster holds: its id, origin, head and how many keys. */
struct mig_state {
	char id[2 * REPL_ID_BYTES + 1];
	char origin[MIG_ORIGIN_MAX];
	char head[MIG_NUMBER_MAX];
	char extent[MIG_NUMBER_MAX];
	int64_t keys;
};

static int mig_read(struct master_repl *r, struct mig_state *m)
{
	char kid[REPL_KEY_MAX], korg[REPL_KEY_MAX], khead[REPL_KEY_MAX];
	char kext[REPL_KEY_MAX], to[REPL_KEY_MAX];
	struct etcd_op ops[5] = {
		{.kind = ETCD_OP_RANGE,
		 .key = kid,
		 .key_len = master_repl_key(r, "id", kid)},
		{.kind = ETCD_OP_RANGE,
		 .key = korg,
		 .key_len = master_repl_key(r, "origin", korg)},
		{.kind = ETCD_OP_RANGE,
		 .key = khead,
		 .key_len = master_repl_key(r, "head", khead)},
		{.kind = ETCD_OP_RANGE,
		 .key = kext,
		 .key_len = master_repl_key(r, "extent_bytes", kext)},
		{.kind = ETCD_OP_RANGE,
		 .key = r->prefix,
		 .key_len = strlen(r->prefix),
		 .range_end = to,
		 .limit = 1},
	};
	struct etcd_txn_result res;
	int ret;

	etcd_prefix_end(r->prefix, ops[4].key_len, (uint8_t *)to,
			&ops[4].range_end_len);
	if ((ret = etcd_txn(r->etcd, NULL, 0, ops, 5, NULL, 0, &res)))
		return ret;
	if (res.nr_ranges != 5) {
		etcd_txn_result_clear(&res);
		return -EPROTO;
	}
	master_repl_kv_text(&res.ranges[0], m->id, sizeof(m->id));
	master_repl_kv_text(&res.ranges[1], m->origin, sizeof(m->origin));
	master_repl_kv_text(&res.ranges[2], m->head, sizeof(m->head));
	master_repl_kv_text(&res.ranges[3], m->extent, sizeof(m->extent));
	m->keys = res.ranges[4].count;
	etcd_txn_result_clear(&res);
	return 0;
}

/*
 * May the move into r go on?  0 yes (the prefix empty now), 1 it was done
 * before (msg says so), -errno no (msg says why).
 */
static int mig_prepare(struct master_repl *r, const char *origin, bool force,
		       char *msg, size_t len)
{
	struct mig_state m;
	int ret;

	if ((ret = mig_read(r, &m)))
		return mig_unreachable(r, ret, msg, len);
	if (*m.id && !strcmp(m.origin, origin)) {
		snprintf(r->id, sizeof(r->id), "%s", m.id);
		return 1;
	}
	if (*m.id && !force) {
		snprintf(msg, len,
			 "the store %s already holds a cluster (id %s, at log "
			 "entry %s): give a CLUSTER name that is new, or "
			 "--force to replace its state (lost)",
			 r->url, m.id, m.head);
		return -EEXIST;
	}
	if (*m.id)
		td_warn("--force: deleting cluster %s of %s", m.id, r->url);
	else if (m.keys)
		td_info("%s: deleting %" PRId64 " keys an interrupted move "
			"left",
			r->url, m.keys);
	if (m.keys && (ret = mig_wipe(r)))
		return mig_unreachable(r, ret, msg, len);
	return 0;
}

/* The image of the SQLite store with the replication row of cluster id
 * at entry 1: what a replica holds after loading it. */
static unsigned char *mig_replica_image(const unsigned char *image, size_t size,
					const char *id, size_t *out_size)
{
	unsigned char *copy = sqlite3_malloc64(size), *out = NULL;
	char sql[128];
	sqlite3 *mem;

	if (!copy)
		return NULL;
	memcpy(copy, image, size);
	if (master_repl_image_open(copy, size, &mem))
		return NULL;
	snprintf(sql, sizeof(sql),
		 "INSERT INTO replication VALUES (1, '%s', 1)", id);
	if (!master_repl_local_table(mem) &&
	    sqlite3_exec(mem, sql, NULL, NULL, NULL) == SQLITE_OK)
		out = master_repl_image(mem, out_size);
	sqlite3_close(mem);
	return out;
}

/* The last txn: the cluster appears, if nobody made one meanwhile. */
static int mig_publish(struct master_repl *r, const char *snap_value,
		       uint64_t extent_bytes, const char *origin, char *msg,
		       size_t len)
{
	char kid[REPL_KEY_MAX], kext[REPL_KEY_MAX], khead[REPL_KEY_MAX];
	char ksnap[REPL_KEY_MAX], korg[REPL_KEY_MAX], ext[MIG_NUMBER_MAX];
	struct etcd_cmp cmp = {.kind = ETCD_CMP_ABSENT,
			       .key = kid,
			       .key_len = master_repl_key(r, "id", kid)};
	struct etcd_op put[5] = {
		{.key = kid, .value = r->id},
		{.key = kext, .value = ext},
		{.key = khead, .value = "1"},
		{.key = ksnap, .value = snap_value},
		{.key = korg, .value = origin},
	};
	const char *names[5] = {"id", "extent_bytes", "head", "snap", "origin"};
	struct etcd_txn_result res;
	int ret;

	snprintf(ext, sizeof(ext), "%" PRIu64, extent_bytes);
	for (int i = 0; i < 5; i++) {
		put[i].kind = ETCD_OP_PUT;
		put[i].key_len =
			master_repl_key(r, names[i], (char *)put[i].key);
		put[i].value_len = strlen(put[i].value);
	}
	if ((ret = etcd_txn(r->etcd, &cmp, 1, put, 5, NULL, 0, &res)))
		return mig_unreachable(r, ret, msg, len);
	ret = res.succeeded ? 0 : -EEXIST;
	etcd_txn_result_clear(&res);
	if (ret)
		snprintf(msg, len,
			 "a cluster appeared at %s while moving (a master "
			 "started on it?): stop it and run again with --force",
			 r->url);
	return ret;
}

/* Write image as the first snapshot of a new cluster in r. */
static int mig_write(struct master_repl *r, const unsigned char *image,
		     size_t size, uint64_t extent_bytes, const char *origin,
		     char *msg, size_t len)
{
	char token[REPL_ID_BYTES + 1], name[REPL_NAME_MAX];
	char value[sizeof(((struct repl_snap *)0)->raw)];
	unsigned char *rimage;
	size_t rsize = 0;
	uint32_t chunks = 0;
	int ret;

	if (master_repl_random_hex(r->id, REPL_ID_BYTES) ||
	    master_repl_random_hex(token, REPL_ID_BYTES / 2))
		return -EIO;
	master_repl_snap_name(1, token, name);
	if (!(rimage = mig_replica_image(image, size, r->id, &rsize))) {
		snprintf(msg, len, "cannot make the snapshot's image");
		return -EIO;
	}
	ret = master_repl_snap_write(r, name, rimage, rsize, &chunks);
	sqlite3_free(rimage);
	if (ret)
		return mig_unreachable(r, ret, msg, len);
	if ((ret = master_repl_snap_value(name, chunks, rsize, value,
					  sizeof(value))) < 0)
		return ret;
	return mig_publish(r, value, extent_bytes, origin, msg, len);
}

/* The etcd side checked: a fresh replica loads it and is consistent. */
static int mig_check_etcd(const char *db_path, const char *url,
			  uint64_t extent_bytes, char *msg, size_t len)
{
	char path[PATH_MAX_MIG + 32];
	struct master_store *st;
	int ret;

	snprintf(path, sizeof(path), "%s%s", db_path, MIG_CHECK_SUFFIX);
	mig_unlink_db(path);
	if (!(ret = master_store_open(path, extent_bytes, &st, msg, len))) {
		if (!(ret = master_store_attach_etcd(st, url, msg, len)))
			ret = mig_check(st, url, msg, len);
		master_store_close(st);
	}
	mig_unlink_db(path);
	return ret;
}

/* The SQLite store at db_path, open and checked; its image. */
static int mig_source(const char *db_path, struct master_store **st,
		      unsigned char **image, size_t *size, char *msg,
		      size_t len)
{
	int ret;

	if (access(db_path, F_OK)) {
		snprintf(msg, len,
			 "no SQLite store at %s: give the --db of the store "
			 "to move",
			 db_path);
		return -ENOENT;
	}
	if ((ret = master_store_open(db_path, 0, st, msg, len)))
		return ret;
	if (mig_is_replica((*st)->db)) {
		snprintf(msg, len,
			 "%s is a master's replica of an etcd store, not a "
			 "SQLite store: there is nothing to move",
			 db_path);
		ret = -EINVAL;
	} else if (!(ret = mig_check(*st, db_path, msg, len)) &&
		   !(*image = master_repl_image((*st)->db, size))) {
		snprintf(msg, len, "%s: cannot serialize it", db_path);
		ret = -EIO;
	}
	if (ret) {
		master_store_close(*st);
		*st = NULL;
	}
	return ret;
}

int master_store_migrate_to_etcd(const char *db_path, const char *url,
				 bool force, char *msg, size_t len)
{
	struct master_store *st = NULL;
	struct master_repl *r = NULL;
	char origin[MIG_ORIGIN_MAX];
	unsigned char *image = NULL;
	uint64_t extent_bytes;
	size_t size = 0;
	int ret;

	if ((ret = mig_source(db_path, &st, &image, &size, msg, len)))
		return ret;
	extent_bytes = st->extent_bytes;
	snprintf(origin, sizeof(origin), "sqlite %016" PRIx64 " %s",
		 fnv1a(image, size), db_path);
	if (!(ret = master_repl_new(url, &r, msg, len)) &&
	    !(ret = mig_prepare(r, origin, force, msg, len)))
		ret = mig_write(r, image, size, extent_bytes, origin, msg, len);
	sqlite3_free(image);
	master_store_close(st); /* held until here: no master on it */
	if (ret >= 0) {
		bool before = ret == 1;

		if (!(ret = mig_check_etcd(db_path, url, extent_bytes, msg,
					   len)))
			snprintf(msg, len,
				 "%s %s into %s as cluster id %s (a snapshot "
				 "at log entry 1, %zu bytes of SQLite); both "
				 "sides consistent",
				 before ? "already moved" : "moved", db_path,
				 url, r->id, size);
	}
	master_repl_destroy(r);
	return ret;
}

/* --- back to SQLite ------------------------------------------------------------ */

/* Build the SQLite store at tmp from the cluster; *head gets its entry. */
static int mig_build(const char *tmp, const char *url, uint64_t extent_bytes,
		     uint64_t *head, char *msg, size_t len)
{
	struct master_store *st;
	int ret, rc;

	mig_unlink_db(tmp);
	if ((ret = master_store_open(tmp, extent_bytes, &st, msg, len)))
		return ret;
	if (!(ret = master_store_attach_etcd(st, url, msg, len)) &&
	    !(ret = mig_check(st, url, msg, len))) {
		*head = st->repl->applied;
		master_repl_free(st);
		/* A SQLite store again: its commits durable (the replica's
		 * were not, store-repl.c), this last one syncing them all. */
		rc = sqlite3_exec(st->db,
				  "PRAGMA synchronous = FULL;"
				  "DROP TABLE replication",
				  NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			snprintf(msg, len, "%s: %s", tmp,
				 sqlite3_errmsg(st->db));
			ret = -EIO;
		}
	}
	master_store_close(st);
	return ret;
}

/* No master holds path (an flock, as master_store_open takes). */
static int mig_not_in_use(const char *path, char *msg, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		snprintf(msg, len,
			 "%s is in use by a stripe-master: stop it first",
			 path);
		ret = -EBUSY;
	}
	close(fd);
	return ret;
}

/* rename tmp to path, durably. */
static int mig_rename(const char *tmp, const char *path, char *msg, size_t len)
{
	char dir[PATH_MAX_MIG];
	const char *slash = strrchr(path, '/');
	int fd, err;

	mig_unlink_db(path); /* --force, or nothing there */
	if (rename(tmp, path)) {
		err = errno;
		snprintf(msg, len, "cannot rename %s to %s: %s", tmp, path,
			 strerror(err));
		return -err;
	}
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1,
		 slash ? path : ".");
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
}

/* The SQLite side checked: the new file opens and is consistent. */
static int mig_check_sqlite(const char *path, char *msg, size_t len)
{
	struct master_store *st;
	int ret = master_store_open(path, 0, &st, msg, len);

	if (!ret) {
		ret = mig_check(st, path, msg, len);
		master_store_close(st);
	}
	return ret;
}

int master_store_migrate_to_sqlite(const char *url, const char *db_path,
				   bool force, char *msg, size_t len)
{
	char tmp[PATH_MAX_MIG + 16];
	struct master_repl *r = NULL;
	struct mig_state m;
	uint64_t head = 0;
	int ret;

	if (!force && !access(db_path, F_OK)) {
		snprintf(msg, len,
			 "%s exists: give the path of a new file, or --force "
			 "to replace it",
			 db_path);
		return -EEXIST;
	}
	if ((ret = mig_not_in_use(db_path, msg, len)) ||
	    (ret = master_repl_new(url, &r, msg, len)))
		return ret;
	if ((ret = mig_read(r, &m)))
		ret = mig_unreachable(r, ret, msg, len);
	else if (!*m.id) {
		snprintf(msg, len,
			 "the store %s holds no cluster (no %sid): check the "
			 "CLUSTER name",
			 url, r->prefix);
		ret = -ENOENT;
	}
	master_repl_destroy(r);
	if (ret)
		return ret;
	snprintf(tmp, sizeof(tmp), "%s%s", db_path, MIG_TMP_SUFFIX);
	if (!(ret = mig_build(tmp, url, strtoull(m.extent, NULL, 10), &head,
			      msg, len)) &&
	    !(ret = mig_rename(tmp, db_path, msg, len)) &&
	    !(ret = mig_check_sqlite(db_path, msg, len)))
		snprintf(msg, len,
			 "moved cluster id %s of %s (log entry %" PRIu64
			 ") into the SQLite store %s; both sides consistent",
			 m.id, url, head, db_path);
	if (ret)
		mig_unlink_db(tmp);
	return ret;
}
