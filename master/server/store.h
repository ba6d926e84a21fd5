/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store.h - the master's durable store: servers, their extents and the
 * virtual disks that own them, in SQLite (issue #5).
 *
 * Durability.  The database runs in WAL mode with synchronous=FULL and
 * locking_mode=EXCLUSIVE.  The caller groups calls into one transaction
 * (master_store_begin .. master_store_commit), each call under its own
 * savepoint, and sends no reply before the commit has returned: a master
 * killed at any instant restarts with every acknowledged call applied, and
 * SQLite's atomic commit keeps all or none of a batch.  One master per
 * database: it holds an flock on the file, and a second one gets -EBUSY
 * at open.
 *
 * Idempotency.  Every mutating call is keyed: a server by (target, lun), a
 * disk by its id.  Repeating a call that already took effect changes
 * nothing and answers what the first one did (ms_reply.changed false); a
 * repeat with different values is refused with MS_EEXIST.
 *
 * Schema (SQL and its reasons in store.c): servers (one row per registered
 * LUN: its extents are the implicit array 0 .. nr_extents-1), vdisks (id,
 * geometry), allocations (one row per locked extent, holding the disk and
 * the extent's place in it and whether that replica is stale; UNIQUE
 * (server_id, idx) means one owner per extent), released (extents handed
 * out once and free again), leases (one row per disk ever leased: holder,
 * epoch, fence_pending; see store-lease.c), fenced_hosts (one row per
 * host fenced and not re-admitted; store-host.c), each server's failure-
 * domain labels (host, rack, site) and spread_notes (the extents placed
 * below the widest failure domain available; issue #19), whether a
 * server failed for good, and moves (replica slots being re-homed to a
 * new extent; store-move.c).  A database of
 * an older schema is upgraded
 * when opened, in one transaction.
 *
 * Procedures fill an ms_reply: status, message, body.  They return 0 when
 * the reply is set, whatever its status, and -errno when the store itself
 * failed (the caller then answers MS_EIO and rolls back).  Every call runs
 * in the single master thread.
 */
#ifndef TAPSTRIPE_MASTER_STORE_H
#define TAPSTRIPE_MASTER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/stripe.h"

#define MASTER_DEFAULT_EXTENT_BYTES (256ull << 20)
#define MASTER_MIN_EXTENT_BYTES	    (1ull << 20) /* multiple of this */
#define MASTER_MAX_EXTENT_BYTES	    (1ull << 40) /* 1 TiB */
#define MASTER_MAX_SERVER_EXTENTS   (1u << 24)	 /* cut from one LUN */
#define MASTER_SCHEMA_VERSION	    8
/*
 * Extents one allocation may lock (columns x extents per column x
 * replicas), at most MS_MAX_SLOTS.  The master is single-threaded and an
 * allocation costs ~4 us per extent (SQLite inserts, measured on the
 * development machines), during which no other client is answered: the
 * cap bounds that wait (65,536: ~0.2 s; 262,144: ~1 s).  A disk that needs
 * more is refused with MS_EINVAL and a message: use larger extents or
 * raise the cap (stripe-master --max-alloc-extents).
 */
#define MASTER_DEFAULT_MAX_ALLOC_EXTENTS 65536u

struct master_store;

/*
 * Open (creating when absent) the database at path.  extent_bytes is E for
 * a new database; for an existing one it must be 0 or equal to the stored
 * E.  0, or -errno with msg saying what to do (-EBUSY: another master holds
 * it; -EINVAL: E mismatch or not a master database; -EIO).
 */
int master_store_open(const char *path, uint64_t extent_bytes,
		      struct master_store **out, char *msg, size_t msg_len);

/* Close; a transaction still open is rolled back. */
void master_store_close(struct master_store *st);

uint64_t master_store_extent_size(const struct master_store *st);

/* The cap on one allocation's extents (1..MS_MAX_SLOTS; see above);
 * -EINVAL out of range.  New allocations only: one already made is
 * answered again whatever its size. */
int master_store_set_max_alloc(struct master_store *st, uint32_t extents);

/*
 * Replication (issue #23): keep the store in etcd, the file at path being
 * this master's replica of it.  url is etcd://HOST:PORT[,HOST:PORT...]/
 * CLUSTER; the store lives under /tapstripe/CLUSTER/ in etcd: id (the
 * cluster's, made when absent), extent_bytes, head (the index of the last
 * log entry) and log/<index> (20 zero-padded digits), each entry the
 * sqlite3session changeset of one round.  Several masters may serve one
 * CLUSTER, each with a file of its own: a round commits only if its
 * compare-and-swap of head from the index its file holds (a table
 * "replication", outside the changesets) succeeds; else it is rolled back,
 * the file catches up with the entries it lacked and the round runs
 * again (master_store_commit's -EAGAIN).  A round that changed nothing
 * makes the compare too, so that reads are linearizable.  The log is
 * compacted into snapshots (below).
 *
 * Call right after master_store_open: checks the file against the store
 * (the same cluster id and extent size; a file holding a SQLite store's
 * state is refused) and catches up.  0, or -errno with msg saying what to
 * do (-ECONNREFUSED, -ETIMEDOUT, ...: etcd did not answer; -EINVAL).
 */
int master_store_attach_etcd(struct master_store *st, const char *url,
			     char *msg, size_t msg_len);

/* Attached to etcd? */
bool master_store_replicated(const struct master_store *st);

/*
 * Log compaction (store-snap.c): after the round that makes its log
 * entry I a multiple of entries past the newest snapshot, a master takes
 * its file as a snapshot at I (sqlite3_serialize) and a thread of its own
 * writes it (in chunks of MASTER_SNAP_CHUNK_BYTES under snap/NAME/,
 * NAME = I-TOKEN) while the master serves on, then in one
 * txn, if the pointer "snap" is still what it read, points "snap" at it
 * and deletes the log entries up to I and every older snapshot.  A master
 * whose next entry is gone loads the snapshot the pointer names, then
 * replays the log after it.  A snapshot written but never pointed at (a
 * master killed while writing it, or one that lost the race) is garbage
 * the next compaction deletes.  entries 0: never compact
 * (MASTER_DEFAULT_COMPACT_EVERY by default).  -EINVAL when not attached.
 */
#define MASTER_DEFAULT_COMPACT_EVERY 1000u
#define MASTER_SNAP_CHUNK_BYTES	     (1u << 20)
int master_store_set_compact_every(struct master_store *st,
				   unsigned int entries);

/*
 * Migration between the back ends (store-migrate.c); both check the
 * store on both sides with master_store_check, and may run again after
 * being killed at any step (see doc/striped-disks.md).
 *
 * to_etcd: the SQLite store at db_path (no master may hold it) becomes
 * the first snapshot (log entry 1) of a new cluster at url.  Refused
 * (-EEXIST) when the cluster already has state, unless force (which
 * deletes that state first); run again after it finished, it answers 0
 * and says so in msg.  to_sqlite: the cluster's state (its newest
 * snapshot and log) becomes a new SQLite store at db_path, written as
 * db_path.migrating and renamed; -EEXIST when db_path exists, unless
 * force.  0, or -errno with msg saying what to do; msg also tells what
 * was done on success.
 */
int master_store_migrate_to_etcd(const char *db_path, const char *url,
				 bool force, char *msg, size_t msg_len);
int master_store_migrate_to_sqlite(const char *url, const char *db_path,
				   bool force, char *msg, size_t msg_len);

/*
 * The batch transaction (BEGIN IMMEDIATE / COMMIT / ROLLBACK).  With
 * replication, commit returns -EAGAIN when other masters changed the
 * store first: the transaction was rolled back and the file caught up,
 * run the batch again; -E2BIG when etcd refused it (above its
 * --max-request-bytes, 1.5 MiB by default: ~60 bytes per extent
 * allocated, about 18,000 extents per batch).  After any other error of
 * commit the batch is rolled back; with replication it may still have
 * reached etcd (a timeout): then the next round applies it from the log.
 */
int master_store_begin(struct master_store *st);
int master_store_commit(struct master_store *st);
void master_store_rollback(struct master_store *st);

/* Still inside the transaction begun last?  (SQLite may abort one on I/O
 * errors; then nothing of the batch survives.) */
bool master_store_in_transaction(const struct master_store *st);

/*
 * One call inside the batch: a savepoint, so that a call that fails undoes
 * only its own changes.  call_end(ok false) rolls back to the savepoint.
 */
int master_store_call_begin(struct master_store *st);
int master_store_call_end(struct master_store *st, bool ok);

/* The procedures of stripe.x (see there for what each does). */
int master_store_info(struct master_store *st, ms_reply *rep);
int master_store_server_add(struct master_store *st,
			    const ms_server_add_args *a, ms_reply *rep);
int master_store_server_drain(struct master_store *st, const ms_server_key *k,
			      ms_reply *rep);
int master_store_server_remove(struct master_store *st, const ms_server_key *k,
			       ms_reply *rep);
int master_store_server_list(struct master_store *st, ms_reply *rep);
int master_store_server_label(struct master_store *st,
			      const ms_server_label_args *a, ms_reply *rep);
int master_store_server_chap_set(struct master_store *st,
				 const ms_server_chap_args *a, ms_reply *rep);
int master_store_server_chap_get(struct master_store *st,
				 const ms_server_key *k, ms_reply *rep);
int master_store_vdisk_alloc(struct master_store *st, const ms_alloc_args *a,
			     ms_reply *rep);
/* MS_VDISK_GROW: in store-vdisk.c. */
int master_store_vdisk_grow(struct master_store *st, const ms_grow_args *a,
			    ms_reply *rep);
int master_store_vdisk_lookup(struct master_store *st, const char *id,
			      ms_reply *rep);
int master_store_vdisk_release(struct master_store *st, const char *id,
			       ms_reply *rep);
int master_store_vdisk_list(struct master_store *st,
			    const ms_vdisk_list_args *a, ms_reply *rep);
/* MS_VDISK_SNAPSHOT and MS_VDISK_SNAPSHOT_DONE (store-vdisk.c). */
int master_store_vdisk_snapshot(struct master_store *st,
				const ms_snapshot_args *a, ms_reply *rep);
int master_store_vdisk_snapshot_done(struct master_store *st, const char *id,
				     ms_reply *rep);
int master_store_extent_list(struct master_store *st,
			     const ms_extent_list_args *a, ms_reply *rep);
int master_store_replica_state(struct master_store *st,
			       const ms_replica_state_args *a, ms_reply *rep);
int master_store_lease_acquire(struct master_store *st, const ms_lease_args *a,
			       ms_reply *rep);
int master_store_lease_release(struct master_store *st, const ms_lease_args *a,
			       ms_reply *rep);
int master_store_lease_handover(struct master_store *st, const ms_lease_args *a,
				ms_reply *rep);
int master_store_lease_takeover(struct master_store *st, const ms_lease_args *a,
				ms_reply *rep);
int master_store_lease_show(struct master_store *st, const char *id,
			    ms_reply *rep);
int master_store_lease_fenced(struct master_store *st, const ms_lease_args *a,
			      ms_reply *rep);
int master_store_host_list(struct master_store *st, ms_reply *rep);
int master_store_host_readmit(struct master_store *st, const char *host,
			      ms_reply *rep);
int master_store_server_fail(struct master_store *st, const ms_server_key *k,
			     ms_reply *rep);
int master_store_server_status(struct master_store *st, ms_reply *rep);
int master_store_move_begin(struct master_store *st, const ms_move_args *a,
			    ms_reply *rep);
int master_store_move_commit(struct master_store *st, const ms_move_args *a,
			     ms_reply *rep);
int master_store_move_abort(struct master_store *st, const ms_move_args *a,
			    ms_reply *rep);
int master_store_move_list(struct master_store *st, const ms_move_list_args *a,
			   ms_reply *rep);

/*
 * Check every invariant the schema cannot express alone, and the ones it
 * does (in case the file was edited): SQLite's quick_check, foreign keys,
 * free counts, one owner per extent, S·J·R extents per disk, replicas on
 * distinct host labels, every server labelled (a host label; host, rack
 * and site labels well-formed), spread notes inside their disk's
 * geometry, no lease held on a disk that does not exist, no fence pending
 * on a free lease; moves (issue #19): a move's new extent owned by nothing
 * else and counted as taken, its old extent still its slot's replica
 * until commit, its disk existing, its new extent on a server other than
 * the old one and on a host none of the extent's other replicas is on.  0 when all hold; -EUCLEAN with msg naming the first
 * broken one; -EIO.
 */
int master_store_check(struct master_store *st, char *msg, size_t msg_len);

/* True for 1-MS_VDISK_ID_MAX of [A-Za-z0-9._-]. */
bool master_vdisk_id_ok(const char *id);

#endif
