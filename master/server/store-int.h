/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-int.h - what the store's files share: the connection, its prepared
 * statements and small helpers.  Only master/store*.c include it.
 */
#ifndef TAPSTRIPE_MASTER_STORE_INT_H
#define TAPSTRIPE_MASTER_STORE_INT_H

#include <sqlite3.h>

#include "master/reply.h"
#include "master/server/placement.h"
#include "master/server/store.h"

/* The statements prepared once at open (SQL in store.c). */
enum master_store_stmt {
	ST_BEGIN = 0,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_SAVEPOINT,
	ST_RELEASE,
	ST_ROLLBACK_TO,
	ST_SERVER_BY_KEY,
	ST_SERVER_INSERT,
	ST_SERVER_COUNT,
	ST_SERVER_DRAIN,
	ST_SERVER_VDISKS,
	ST_SERVER_DELETE_RELEASED,
	ST_SERVER_DELETE,
	ST_SERVERS_ALL,
	ST_PLACE_SERVERS,
	ST_RELEASED_LOWEST,
	ST_RELEASED_TAKE,
	ST_SERVER_TAKE,
	ST_ALLOC_INSERT,
	ST_VDISK_GET,
	ST_VDISK_INSERT,
	ST_VDISK_EXTENTS,
	ST_SERVER_BY_ID,
	ST_VDISK_GIVE_BACK, /* these three run in this order on release */
	ST_VDISK_TO_RELEASED,
	ST_VDISK_FREE,
	ST_VDISK_DELETE,
	ST_VDISK_LIST,
	ST_SERVER_ALLOCS_FROM,
	ST_INFO,
	ST_REPLICA_GET,
	ST_REPLICA_SET,
	ST_LEASE_GET,
	ST_LEASE_PUT,
	ST_LEASE_FREE,
	ST_LEASE_SERVERS,
	ST_FENCED_GET,
	ST_FENCED_PUT,
	ST_FENCED_DELETE,
	ST_FENCED_ALL,
	ST_SERVER_LABEL,
	ST_LABEL_CLASH,
	ST_SPREAD_INSERT,
	ST_SPREAD_GET,
	ST_SPREAD_DELETE,
	ST_SERVER_FAIL,
	ST_SERVER_STATE,
	ST_SERVER_FAILED,
	ST_SERVER_STATS,
	ST_MOVE_GET,
	ST_MOVE_INSERT,
	ST_MOVE_DELETE,
	ST_MOVE_SIBLINGS,
	ST_MOVE_LIST,
	ST_REPLICA_MOVE,
	ST_EXTENT_FREE,
	ST_RELEASED_PUT,
	ST_SPREAD_DELETE_ONE,
	ST_VDISK_MOVES_GIVE_BACK, /* these three run in this order */
	ST_VDISK_MOVES_TO_RELEASED,
	ST_VDISK_MOVES_DELETE,
	ST_VDISK_MOVES,
	ST_SERVER_CHAP_GET,
	ST_SERVER_CHAP_SET,
	ST_VDISK_GROW,
	ST_VDISK_SNAP_GET,
	ST_VDISK_SNAP_SET,
	ST_VDISK_SNAP_DONE,
	ST_COUNT
};

/* The invariants master_store_check queries (store-check.c). */
#define STORE_NR_INVARIANTS 19

/* The columns of ms_server, in order, as fill_server reads them. */
#define STORE_SERVER_COLS                                            \
	"id, address, portal, target, lun, size_bytes, block_size, " \
	"nr_extents, free_extents, draining, host, rack, site"

struct master_store {
	sqlite3 *db;
	char *path;
	int lock_fd; /* flock: one master per database */
	uint64_t extent_bytes;
	uint32_t max_alloc_extents; /* master_store_set_max_alloc */
	sqlite3_stmt *stmt[ST_COUNT];
	/* master_store_check's queries, prepared at their first use. */
	sqlite3_stmt *check_stmt[STORE_NR_INVARIANTS];
	struct master_repl *repl; /* NULL: SQLite alone (store-repl.c) */
};

/*
 * Replication on etcd (store-repl.c), called by the transactions of
 * store.c when st->repl is set.  round_begin attaches a session to the
 * round's transaction (just begun); commit replaces COMMIT: 0 committed,
 * -EAGAIN rolled back and caught up with the log (run the round again),
 * other -errno rolled back.  round_end drops the session.
 */
int master_repl_round_begin(struct master_store *st);
int master_repl_commit(struct master_store *st);
void master_repl_round_end(struct master_store *st);
void master_repl_free(struct master_store *st);

/* --- replication's parts (store-repl.c, store-snap.c, store-migrate.c) --- */

#define REPL_KEY_MAX		   160
#define REPL_ID_BYTES		   16 /* a cluster id: 32 hex digits */
#define REPL_NAME_MAX		   48 /* a snapshot's name: INDEX-TOKEN */
#define REPL_DEFAULT_COMPACT_EVERY MASTER_DEFAULT_COMPACT_EVERY

struct etcd_client;
struct etcd_range;
struct repl_snap_job;

struct master_repl {
	struct etcd_client *etcd;
	char url[1024];
	char prefix[80];		/* /tapstripe/CLUSTER/ */
	char id[2 * REPL_ID_BYTES + 1]; /* the cluster's */
	uint64_t applied;		/* log entries in the local file */
	uint64_t snap_index;	    /* the newest snapshot's, as last seen */
	unsigned int compact_every; /* 0: never */
	struct sqlite3_session *session; /* the open round's changes */
	bool diverged; /* a log entry did not apply: refuse everything */
	struct repl_snap_job *snap_job; /* store-snap.c; NULL before one */
};

/* A snapshot as the pointer key "snap" names it: "NAME CHUNKS BYTES". */
struct repl_snap {
	char name[REPL_NAME_MAX]; /* 20-digit index, '-', 16 hex digits */
	uint64_t index;
	uint32_t chunks;
	uint64_t bytes;
	char raw[REPL_NAME_MAX + 48]; /* the pointer's value as read */
};

/* Parse url (etcd://HOSTS/CLUSTER) and make the client: a new *out. */
int master_repl_new(const char *url, struct master_repl **out, char *msg,
		    size_t len);
void master_repl_destroy(struct master_repl *r);
size_t master_repl_key(const struct master_repl *r, const char *name,
		       char *out);
size_t master_repl_log_key(const struct master_repl *r, uint64_t index,
			   char *out);
/* A fresh random id or token of bytes random bytes in hex. */
int master_repl_random_hex(char *out, size_t bytes);
/* Copy the first pair's value of rg as text ("" when none). */
void master_repl_kv_text(const struct etcd_range *rg, char *out, size_t len);
/* The table "replication" made in st's file when missing. */
int master_repl_local_table(sqlite3 *db);

/* Snapshots (store-snap.c). */
int master_repl_snap_get(struct master_repl *r, struct repl_snap *s,
			 bool *found);
/* Write image under snap/NAME/ in chunks below etcd's request limit. */
int master_repl_snap_write(struct master_repl *r, const char *name,
			   const void *image, size_t size, uint32_t *chunks);
/* Delete snap/NAME/ (a snapshot that never became current). */
void master_repl_snap_drop(struct master_repl *r, const char *name);
void master_repl_snap_name(uint64_t index, const char *token, char *out);
/* The pointer's value for a snapshot. */
int master_repl_snap_value(const char *name, uint32_t chunks, uint64_t bytes,
			   char *out, size_t len);
/* Load the newest snapshot into st's file (when it is past applied). */
int master_repl_snap_load(struct master_store *st);
/*
 * After a commit: when a snapshot is due, take the image of the file and
 * start a thread that writes it and cuts the log (none while one runs);
 * reap a finished one.  Event loop only.
 */
void master_repl_maybe_compact(struct master_store *st);
/* Wait for the snapshot being written, if any; free its client. */
void master_repl_snap_job_free(struct master_repl *r);
/* sqlite3_serialize of db's main, the header's WAL marks cleared (an image
 * that an in-memory database can read); sqlite3_free it. */
unsigned char *master_repl_image(sqlite3 *db, size_t *size);
/* A connection to an in-memory database holding image (taken over). */
int master_repl_image_open(unsigned char *image, size_t size, sqlite3 **out);

/* The columns of a move, in order, as master_store_fill_move reads them. */
#define STORE_MOVE_COLS                                                  \
	"vdisk_id, col, ext, replica, old_server, old_idx, new_server, " \
	"new_idx, reason, since, reached, wanted, room"

/* Fill *out from a row of STORE_MOVE_COLS from column 0 (store-move.c). */
int master_store_fill_move(struct master_store *st, sqlite3_stmt *s,
			   ms_move *out);

/* The shape of a disk (store-vdisk.c). */
struct master_shape {
	u_int columns;
	u_int extents_per_column;
	u_int replicas;
};

/*
 * The disk exists and (column, extent, replica) lies inside it, or a reply
 * says why not (*ok false); *shape filled when ok (store-vdisk.c).
 */
int master_store_check_slot(struct master_store *st, const char *vdisk,
			    u_int column, u_int extent, u_int replica,
			    struct master_shape *shape, ms_reply *rep,
			    bool *ok);

/*
 * Every server as placement sees it (store-vdisk.c): id order; draining
 * and failed ones with no free extent, failed ones gone.
 */
struct master_pool {
	u_int n;
	u_int active; /* not draining */
	int64_t *id;
	int64_t *next_fresh;
	struct master_place_server *srv;
};
int master_store_pool_load(struct master_store *st, struct master_pool *p);
void master_store_pool_free(struct master_pool *p);

/* k free extents of pool server i into idx[], counted as taken. */
int master_store_take_free(struct master_store *st, struct master_pool *p,
			   u_int i, uint32_t k, int64_t *idx);

/* Return extent (server, idx) to its server's free ones. */
int master_store_extent_free(struct master_store *st, int64_t server,
			     int64_t idx);

/* Look a server up by key; 1 found (*out filled), 0 not, -errno
 * (store-server.c). */
int master_store_server_by_key(struct master_store *st, const char *target,
			       u_int lun, ms_server *out);

/* A server's failed flag and what it holds; 1 found, 0 not, -errno. */
int master_store_server_state(struct master_store *st, int64_t id, bool *failed,
			      int64_t *replicas, int64_t *move_targets);

/*
 * A server's failed flag alone; 1 found, 0 not, -errno.  Every reply that
 * describes a disk asks it for each of the disk's servers: the counts of
 * master_store_server_state scan the server's allocations, which took
 * ~85 % of the master's CPU in bench/master-alloc.sh (issue #23).
 */
int master_store_server_failed(struct master_store *st, int64_t id,
			       bool *failed);

/* The statement, reset and with its bindings cleared. */
sqlite3_stmt *master_store_stmt(struct master_store *st,
				enum master_store_stmt id);

/*
 * Log a failed SQLite call and turn its code into -errno (-EBUSY, -ENOSPC,
 * -ENOMEM or -EIO).
 */
int master_store_sql_fail(struct master_store *st, const char *what, int rc);

/*
 * master_store_check without SQLite's quick_check: only the invariants of
 * the tables (for a caller that checks often, such as the fuzzer).
 */
int master_store_check_invariants(struct master_store *st, char *msg,
				  size_t msg_len);

/* Step a statement that returns no row; 0 or -errno. */
int master_store_exec(struct master_store *st, sqlite3_stmt *s,
		      const char *what);

/* Fill *out from the row at columns col .. col+12 (STORE_SERVER_COLS). */
int master_store_fill_server(sqlite3_stmt *s, int col, ms_server *out);

/* Bind a C string as text (copied by SQLite). */
int master_store_bind_text(sqlite3_stmt *s, int idx, const char *text);

/* 1 when disk id exists, 0 when not, -errno (store-vdisk.c). */
int master_store_vdisk_exists(struct master_store *st, const char *id);

/* Free the lease of disk id, being destroyed (store-lease.c); 0/-errno. */
int master_store_lease_drop(struct master_store *st, const char *id);

/*
 * A fenced host (store-host.c): 1 with *f filled when host is fenced, 0
 * when not, -errno.
 */
struct master_fence {
	char by[MS_HOST_ID_MAX + 1];
	char vdisk[MS_VDISK_ID_MAX + 1];
	uint64_t epoch;
	uint64_t since;
};
int master_store_fenced_get(struct master_store *st, const char *host,
			    struct master_fence *f);

/* Record host as fenced by `by` (disk, epoch after the takeover), now. */
int master_store_fenced_put(struct master_store *st, const char *host,
			    const char *by, const char *vdisk, uint64_t epoch);

/*
 * A failure-domain label: 0-MS_LABEL_MAX of [A-Za-z0-9._-] (NULL as "");
 * empty only when may_be_empty (a host label may not be).
 */
bool master_store_label_ok(const char *label, bool may_be_empty);

/* A CHAP user or secret: 1-MS_CHAP_MAX printable bytes, no space or '#'. */
bool master_store_chap_ok(const char *s);

/* Printable ASCII without spaces, 1..max bytes. */
bool master_store_token_ok(const char *s, size_t max);

#endif
