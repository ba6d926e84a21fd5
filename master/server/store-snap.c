/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-snap.c - snapshots of a store replicated through etcd (issue #23):
 * a full image of a replica at log entry I under snap/NAME/, the pointer
 * "snap" switched to it by one txn that also deletes the log up to I
 * (compaction), and loading one into a replica that fell behind it (see
 * store.h, "Log compaction").
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "master/etcd/etcd.h"
#include "master/server/store-int.h"

#define SNAP_TOKEN_BYTES  8
#define SNAP_READ_BATCH	  8 /* chunks per range: 8 MiB answers */
#define SNAP_LOAD_RETRIES 8 /* a newer snapshot replaced the one read */
#define SNAP_CHUNK_DIGITS 6
#define SNAP_HEADER_WRITE 18 /* SQLite's header: file format versions */
#define SNAP_HEADER_READ  19
#define SNAP_HEADER_MIN	  100

void master_repl_snap_name(uint64_t index, const char *token, char *out)
{
	snprintf(out, REPL_NAME_MAX, "%020" PRIu64 "-%s", index, token);
}

int master_repl_snap_value(const char *name, uint32_t chunks, uint64_t bytes,
			   char *out, size_t len)
{
	int n = snprintf(out, len, "%s %" PRIu32 " %" PRIu64, name, chunks,
			 bytes);

	return n > 0 && (size_t)n < len ? n : -EINVAL;
}

static int snap_parse(const char *text, struct repl_snap *s)
{
	char name[REPL_NAME_MAX];

	if (sscanf(text, "%47s %" SCNu32 " %" SCNu64, name, &s->chunks,
		   &s->bytes) != 3 ||
	    sscanf(name, "%20" SCNu64 "-", &s->index) != 1)
		return -EPROTO;
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->raw, sizeof(s->raw), "%s", text);
	return 0;
}

int master_repl_snap_get(struct master_repl *r, struct repl_snap *s,
			 bool *found)
{
	char key[REPL_KEY_MAX], text[sizeof(s->raw)];
	struct etcd_kv kv;
	size_t n;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = etcd_get(r->etcd, key, master_repl_key(r, "snap", key), &kv,
		       found, NULL);
	if (ret || !*found)
		return ret;
	n = kv.value_len < sizeof(text) - 1 ? kv.value_len : sizeof(text) - 1;
	memcpy(text, kv.value, n);
	text[n] = '\0';
	etcd_kv_clear(&kv);
	if ((ret = snap_parse(text, s)))
		td_err("%ssnap holds '%s', not a snapshot's name", r->prefix,
		       text);
	return ret;
}

static size_t snap_chunk_key(const struct master_repl *r, const char *name,
			     uint32_t i, char *out)
{
	return (size_t)snprintf(out, REPL_KEY_MAX, "%ssnap/%s/%0*" PRIu32,
				r->prefix, name, SNAP_CHUNK_DIGITS, i);
}

/* [snap/NAME/, its end) */
static void snap_range(const struct master_repl *r, const char *name,
		       char *from, size_t *from_len, char *to, size_t *to_len)
{
	*from_len = (size_t)snprintf(from, REPL_KEY_MAX, "%ssnap/%s/",
				     r->prefix, name);
	etcd_prefix_end(from, *from_len, (uint8_t *)to, to_len);
}

int master_repl_snap_write(struct master_repl *r, const char *name,
			   const void *image, size_t size, uint32_t *chunks)
{
	const uint8_t *p = image;
	uint32_t i = 0;
	int ret = 0;

	for (size_t off = 0; off < size && !ret;
	     off += MASTER_SNAP_CHUNK_BYTES) {
		char key[REPL_KEY_MAX];
		size_t n = size - off < MASTER_SNAP_CHUNK_BYTES
				   ? size - off
				   : MASTER_SNAP_CHUNK_BYTES;
		struct etcd_op put = {.kind = ETCD_OP_PUT,
				      .key = key,
				      .key_len =
					      snap_chunk_key(r, name, i++, key),
				      .value = p + off,
				      .value_len = n};
		struct etcd_txn_result res;

		if (!(ret = etcd_txn(r->etcd, NULL, 0, &put, 1, NULL, 0, &res)))
			etcd_txn_result_clear(&res);
	}
	*chunks = i;
	return ret;
}

void master_repl_snap_drop(struct master_repl *r, const char *name)
{
	char from[REPL_KEY_MAX], to[REPL_KEY_MAX];
	struct etcd_op del = {
		.kind = ETCD_OP_DELETE, .key = from, .range_end = to};
	struct etcd_txn_result res;

	snap_range(r, name, from, &del.key_len, to, &del.range_end_len);
	if (!etcd_txn(r->etcd, NULL, 0, &del, 1, NULL, 0, &res))
		etcd_txn_result_clear(&res);
}

unsigned char *master_repl_image(sqlite3 *db, size_t *size)
{
	sqlite3_int64 n = 0;
	unsigned char *image = sqlite3_serialize(db, "main", &n, 0);

	if (!image || n < SNAP_HEADER_MIN) {
		sqlite3_free(image);
		return NULL;
	}
	/* WAL (2) to rollback journal (1): an in-memory database cannot
	 * open a WAL file. */
	image[SNAP_HEADER_WRITE] = 1;
	image[SNAP_HEADER_READ] = 1;
	*size = (size_t)n;
	return image;
}

int master_repl_image_open(unsigned char *image, size_t size, sqlite3 **out)
{
	sqlite3 *mem = NULL;
	int rc = sqlite3_open_v2(":memory:", &mem,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
				 NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_deserialize(mem, "main", image,
					 (sqlite3_int64)size,
					 (sqlite3_int64)size,
					 SQLITE_DESERIALIZE_FREEONCLOSE |
						 SQLITE_DESERIALIZE_RESIZEABLE);
	else
		sqlite3_free(image);
	if (rc != SQLITE_OK) {
		sqlite3_close(mem);
		return -EIO;
	}
	*out = mem;
	return 0;
}

/* --- loading ------------------------------------------------------------------- */

/* The chunks of s, read into one buffer (sqlite3_malloc'd); -EAGAIN when
 * they are not all there (a newer snapshot replaced it). */
static int snap_read(struct master_repl *r, const struct repl_snap *s,
		     unsigned char **out)
{
	char from[REPL_KEY_MAX], to[REPL_KEY_MAX];
	unsigned char *buf = sqlite3_malloc64(s->bytes ? s->bytes : 1);
	size_t from_len, to_len, got = 0;
	uint32_t next = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	snap_range(r, s->name, from, &from_len, to, &to_len);
	while (!ret && next < s->chunks) {
		struct etcd_op op = {
			.kind = ETCD_OP_RANGE,
			.key = from,
			.key_len = snap_chunk_key(r, s->name, next, from),
			.range_end = to,
			.range_end_len = to_len,
			.limit = SNAP_READ_BATCH};
		struct etcd_txn_result res;

		if ((ret = etcd_txn(r->etcd, NULL, 0, &op, 1, NULL, 0, &res)))
			break;
		const struct etcd_range *rg =
			res.nr_ranges ? &res.ranges[0] : NULL;

		if (!rg || !rg->nr_kvs)
			ret = -EAGAIN;
		for (size_t i = 0; !ret && i < rg->nr_kvs; i++, next++) {
			char key[REPL_KEY_MAX];
			size_t n = snap_chunk_key(r, s->name, next, key);

			if (rg->kvs[i].key_len != n ||
			    memcmp(rg->kvs[i].key, key, n) ||
			    rg->kvs[i].value_len > s->bytes - got)
				ret = -EAGAIN;
			else
				memcpy(buf + got, rg->kvs[i].value,
				       rg->kvs[i].value_len);
			got += ret ? 0 : rg->kvs[i].value_len;
		}
		etcd_txn_result_clear(&res);
	}
	if (!ret && got != s->bytes)
		ret = -EAGAIN;
	if (ret)
		sqlite3_free(buf);
	else
		*out = buf;
	return ret;
}

/* The image replaces the file's content (SQLite's backup API). */
static int snap_install(struct master_store *st, unsigned char *image,
			size_t size)
{
	sqlite3_backup *b;
	sqlite3 *mem;
	int rc;

	if (master_repl_image_open(image, size, &mem))
		return -EIO;
	if (!(b = sqlite3_backup_init(st->db, "main", mem, "main"))) {
		td_err("loading a snapshot into %s: %s", st->path,
		       sqlite3_errmsg(st->db));
		sqlite3_close(mem);
		return -EIO;
	}
	rc = sqlite3_backup_step(b, -1);
	sqlite3_backup_finish(b);
	sqlite3_close(mem);
	if (rc != SQLITE_DONE) {
		td_err("loading a snapshot into %s: %s", st->path,
		       sqlite3_errstr(rc));
		return -EIO;
	}
	return 0;
}

/* The replication row the snapshot brought: its cluster and index. */
static int snap_loaded(struct master_store *st, const struct repl_snap *s)
{
	struct master_repl *r = st->repl;
	sqlite3_stmt *q;
	int ret = -EUCLEAN;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT cluster_id, applied FROM replication",
			       -1, &q, NULL) != SQLITE_OK)
		return -EIO;
	if (sqlite3_step(q) == SQLITE_ROW &&
	    !strcmp((const char *)sqlite3_column_text(q, 0), r->id) &&
	    (uint64_t)sqlite3_column_int64(q, 1) == s->index)
		ret = 0;
	sqlite3_finalize(q);
	if (ret)
		td_err("the snapshot %s in %s is not of cluster %s at entry "
		       "%" PRIu64 ": refusing every call",
		       s->name, r->url, r->id, s->index);
	return ret;
}

static int snap_load_once(struct master_store *st, const struct repl_snap *s)
{
	struct master_repl *r = st->repl;
	unsigned char *image;
	int ret;

	if ((ret = snap_read(r, s, &image)))
		return ret;
	if ((ret = snap_install(st, image, (size_t)s->bytes)) ||
	    (ret = snap_loaded(st, s)))
		return ret == -EUCLEAN ? ret : -EIO;
	r->applied = s->index;
	r->snap_index = s->index;
	td_info("%s: loaded the snapshot %s of %s (%" PRIu64 " bytes)",
		st->path, s->name, r->url, s->bytes);
	return 0;
}

int master_repl_snap_load(struct master_store *st)
{
	struct master_repl *r = st->repl;
	struct repl_snap s;
	bool found;
	int ret = -EAGAIN;

	for (int i = 0; i < SNAP_LOAD_RETRIES && ret == -EAGAIN; i++) {
		if ((ret = master_repl_snap_get(r, &s, &found)))
			break;
		if (!found || s.index <= r->applied) {
			td_err("the log in %s lacks entry %" PRIu64
			       " and no snapshot covers it: refusing every "
			       "call",
			       r->url, r->applied + 1);
			ret = -EUCLEAN;
			break;
		}
		ret = snap_load_once(st, &s);
	}
	if (ret == -EUCLEAN || ret == -EAGAIN)
		r->diverged = true;
	return ret == -EAGAIN ? -EUCLEAN : ret;
}

/* --- compaction ---------------------------------------------------------------- */

/*
 * Point "snap" at the new snapshot if it still holds what cur says (absent
 * when !found); delete the log up to its index and every snapshot below
 * it.  *won false when another master moved the pointer first.
 */
static int snap_switch(struct master_repl *r, const struct repl_snap *cur,
		       bool found, const char *name, const char *value,
		       bool *won)
{
	char kptr[REPL_KEY_MAX], logf[REPL_KEY_MAX], logt[REPL_KEY_MAX];
	char snapf[REPL_KEY_MAX], snapt[REPL_KEY_MAX];
	struct etcd_cmp cmp = {.kind = found ? ETCD_CMP_VALUE : ETCD_CMP_ABSENT,
			       .key = kptr,
			       .key_len = master_repl_key(r, "snap", kptr),
			       .value = cur->raw,
			       .value_len = strlen(cur->raw)};
	uint64_t index = strtoull(name, NULL, 10);
	struct etcd_op ops[3] = {
		{.kind = ETCD_OP_PUT,
		 .key = kptr,
		 .key_len = cmp.key_len,
		 .value = value,
		 .value_len = strlen(value)},
		{.kind = ETCD_OP_DELETE,
		 .key = logf,
		 .key_len = master_repl_key(r, "log/", logf),
		 .range_end = logt,
		 .range_end_len = master_repl_log_key(r, index + 1, logt)},
		{.kind = ETCD_OP_DELETE,
		 .key = snapf,
		 .key_len = master_repl_key(r, "snap/", snapf),
		 .range_end = snapt,
		 .range_end_len = (size_t)snprintf(
			 snapt, sizeof(snapt), "%ssnap/%s", r->prefix, name)},
	};
	struct etcd_txn_result res;
	int ret = etcd_txn(r->etcd, &cmp, 1, ops, 3, NULL, 0, &res);

	if (ret)
		return ret;
	*won = res.succeeded;
	etcd_txn_result_clear(&res);
	return 0;
}

static uint64_t snap_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/*
 * A snapshot written by a thread of its own (issue #23): writing its
 * chunks (each an etcd put, fsynced by a quorum) took 0.4-0.8 s of every
 * 1,000 rounds at 10 MB, during which the master answered nobody.  The
 * event loop takes the image between two rounds (the file at applied)
 * and goes on; the thread, with an etcd client of its own (io) and
 * nothing of SQLite, writes it and switches the pointer; the loop reaps
 * it after a later round (or when the store closes) and only then logs
 * and moves snap_index.  One job at a time: the round that makes the next
 * snapshot due waits for the job still writing the previous one (with the
 * default --compact-every 1000 it has long finished; with 1 every round
 * waits for the last one's), so the log stays bounded.  Killed at any
 * step, it leaves what a synchronous one left: chunks no pointer names,
 * deleted by the next compaction.
 */
struct repl_snap_job {
	struct master_repl *io; /* its client; kept from job to job */
	pthread_t thread;
	bool running;	  /* started, not reaped */
	atomic_bool done; /* set last by the thread (release) */
	unsigned char *image;
	size_t size;
	char name[REPL_NAME_MAX];
	uint64_t index, t0_us, took_us;
	uint64_t other; /* another master's snapshot at or past index */
	uint32_t chunks;
	bool won;
	int ret;
};

/* Write the image and switch the pointer to it if still cur; drop it
 * when that fails or another master came first. */
static int snap_publish(struct master_repl *r, const struct repl_snap *cur,
			bool found, struct repl_snap_job *j)
{
	char value[sizeof(cur->raw)];
	int ret = master_repl_snap_write(r, j->name, j->image, j->size,
					 &j->chunks);

	if (!ret && (ret = master_repl_snap_value(j->name, j->chunks, j->size,
						  value, sizeof(value))) > 0)
		ret = snap_switch(r, cur, found, j->name, value, &j->won);
	if (ret || !j->won)
		master_repl_snap_drop(r, j->name);
	return ret;
}

/* The job's thread: the newest snapshot read first (another master's may
 * be as new), then the image published.  Touches only *j and j->io. */
static void *snap_job_run(void *arg)
{
	struct repl_snap_job *j = arg;
	struct repl_snap cur;
	bool found = false;

	j->ret = master_repl_snap_get(j->io, &cur, &found);
	if (!j->ret && found && cur.index >= j->index) {
		j->other = cur.index;
		j->ret = -EALREADY;
	} else if (!j->ret) {
		j->ret = snap_publish(j->io, &cur, found, j);
	}
	j->took_us = snap_now_us() - j->t0_us;
	atomic_store_explicit(&j->done, true, memory_order_release);
	return NULL;
}

/* Join a finished (or, wait: true, any) job; log it; move snap_index. */
static void snap_job_reap(struct master_repl *r, bool wait)
{
	struct repl_snap_job *j = r->snap_job;

	if (!j || !j->running ||
	    (!wait && !atomic_load_explicit(&j->done, memory_order_acquire)))
		return;
	pthread_join(j->thread, NULL);
	j->running = false;
	sqlite3_free(j->image);
	j->image = NULL;
	if (!j->ret && j->won) {
		if (j->index > r->snap_index)
			r->snap_index = j->index;
		td_info("%s: snapshot %s written (%zu bytes in %" PRIu32
			" chunks, %" PRIu64 " ms); log entries up to %" PRIu64
			" deleted",
			r->url, j->name, j->size, j->chunks, j->took_us / 1000,
			j->index);
	} else if (!j->ret) {
		td_info("%s: snapshot %s dropped: another master's came first",
			r->url, j->name);
	} else if (j->ret == -EALREADY) {
		if (j->other > r->snap_index)
			r->snap_index = j->other; /* another master did it */
	} else {
		td_warn("compacting the log of %s at entry %" PRIu64
			" failed (%s): tried again %u entries later",
			r->url, j->index, etcd_client_error(j->io->etcd),
			r->compact_every);
		r->snap_index = r->applied; /* not at every round */
	}
}

/* The job's state and client, made at the first snapshot. */
static int snap_job_get(struct master_repl *r, struct repl_snap_job **out)
{
	char msg[256];
	int ret;

	if (!r->snap_job) {
		if (!(r->snap_job = calloc(1, sizeof(*r->snap_job))))
			return -ENOMEM;
		atomic_init(&r->snap_job->done, false);
	}
	if (!r->snap_job->io && (ret = master_repl_new(r->url, &r->snap_job->io,
						       msg, sizeof(msg)))) {
		td_err("%s: %s", r->url, msg);
		return ret;
	}
	*out = r->snap_job;
	return 0;
}

/* Take the image of the file at applied and start the job's thread. */
static int snap_job_start(struct master_store *st)
{
	struct master_repl *r = st->repl;
	char token[2 * SNAP_TOKEN_BYTES + 1];
	struct repl_snap_job *j;
	int ret;

	if ((ret = snap_job_get(r, &j)) ||
	    (ret = master_repl_random_hex(token, SNAP_TOKEN_BYTES)))
		return ret;
	j->index = r->applied;
	j->t0_us = snap_now_us();
	j->won = false;
	j->other = 0;
	master_repl_snap_name(j->index, token, j->name);
	if (!(j->image = master_repl_image(st->db, &j->size)))
		return -EIO;
	atomic_store_explicit(&j->done, false, memory_order_relaxed);
	if ((ret = -pthread_create(&j->thread, NULL, snap_job_run, j))) {
		sqlite3_free(j->image);
		j->image = NULL;
		return ret;
	}
	j->running = true;
	return 0;
}

void master_repl_maybe_compact(struct master_store *st)
{
	struct master_repl *r = st->repl;
	bool running = r->snap_job && r->snap_job->running;
	uint64_t base = running ? r->snap_job->index : r->snap_index;
	bool due = !r->diverged && r->compact_every &&
		   r->applied >= base + r->compact_every;
	int ret;

	snap_job_reap(r, due);
	if (!due || r->applied < r->snap_index + r->compact_every)
		return;
	if ((ret = snap_job_start(st))) {
		td_warn("compacting the log of %s at entry %" PRIu64
			" failed (%s): tried again %u entries later",
			r->url, r->applied, strerror(-ret), r->compact_every);
		r->snap_index = r->applied;
	}
}

void master_repl_snap_job_free(struct master_repl *r)
{
	if (!r->snap_job)
		return;
	snap_job_reap(r, true);
	master_repl_destroy(r->snap_job->io);
	free(r->snap_job);
	r->snap_job = NULL;
}
