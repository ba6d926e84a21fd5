/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot-state.h - the job file of a snapshot copy: which chunks of the
 * source are already in the target, kept on disk so a job resumes after a
 * crash (doc/snapshots.md has the format and the ordering argument).
 */
#ifndef TAPSTRIPE_SNAPSHOT_STATE_H
#define TAPSTRIPE_SNAPSHOT_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/json.h"

/* The copy unit of a new job (one bit each): a write waits only for the
 * 4 KiB blocks it touches.  Job files of older tapdisks name 64 KiB in
 * their header (chunk_sectors) and resume as they are; a job file naming
 * more than TD_SNAP_CHUNK_MAX_BYTES is refused. */
#define TD_SNAP_CHUNK_BYTES	4096u
#define TD_SNAP_CHUNK_MAX_BYTES (64u << 10)
#define TD_SNAP_HEADER_BYTES	4096u /* the bitmap starts here */
#define TD_SNAP_CHAIN_MAX	1024  /* a target chain, NUL included */

struct td_snap_state {
	int fd;	    /* -1: in memory only (tests) */
	char *path; /* the job file */
	char target[TD_SNAP_CHAIN_MAX];
	uint64_t size_sectors;	/* the source's, at the instant */
	uint32_t chunk_sectors; /* a power of two */
	uint64_t nr_chunks;
	uint64_t nr_copied;
	uint8_t *bits;	   /* bit i set: chunk i is in the target, durably */
	uint64_t nr_syncs; /* fdatasyncs of the job file so far */
	/* Redirect-on-write (doc/snapshots.md): bit i set means the live
	 * disk's chunk i is in the target; the disk's file (row_lower_ino)
	 * is the snapshot until the two names are exchanged. */
	bool row;
	uint64_t row_dev;	/* the file system of both files */
	uint64_t row_lower_ino; /* the disk's file at the instant */
	uint64_t row_upper_ino; /* the target's */
};

/* Chunks of a disk of size_sectors cut in chunk_sectors. */
uint64_t td_snap_nr_chunks(uint64_t size_sectors, uint32_t chunk_sectors);

/* The first and last chunk that [sector, sector + nr) touches (nr > 0). */
void td_snap_chunk_range(const struct td_snap_state *st, uint64_t sector,
			 uint64_t nr, uint64_t *first, uint64_t *last);

/* The sectors of chunk i: chunk_sectors, less for the last one. */
uint32_t td_snap_chunk_len(const struct td_snap_state *st, uint64_t i);

bool td_snap_copied(const struct td_snap_state *st, uint64_t i);

/* The first chunk not copied from i on; nr_chunks when none. */
uint64_t td_snap_next_uncopied(const struct td_snap_state *st, uint64_t i);

/*
 * Set up st in memory (fd -1), no chunk copied.  0, or -EINVAL with the
 * reason in why (chunk size not a power of two, empty disk, chain too
 * long), -ENOMEM.
 */
int td_snap_state_init(struct td_snap_state *st, const char *target,
		       uint64_t size_sectors, uint32_t chunk_sectors,
		       struct td_strbuf *why);

/*
 * Write st as a new job file at path, durably (a temporary file, fsync,
 * rename, fsync of the folder); st keeps the file open.  -EEXIST when a
 * job file is there already.
 */
int td_snap_state_create(struct td_snap_state *st, const char *path,
			 struct td_strbuf *why);

/*
 * Read the job file at path into st (kept open for td_snap_state_mark).
 * -ENOENT: no file; -EINVAL with the reason in why: the file is not a job
 * file, or is cut short, or names bits beyond the last chunk.
 */
int td_snap_state_load(struct td_snap_state *st, const char *path,
		       struct td_strbuf *why);

/*
 * Chunk i is in the target, durably: set its bit and make the file say so
 * (pwrite of its byte, fdatasync) before returning.  Blocks for one
 * fdatasync, once per chunk and job.
 */
int td_snap_state_mark(struct td_snap_state *st, uint64_t i);

/*
 * Chunks first .. first + nr - 1 are in the target, durably: set their
 * bits and sync once (td_snap_state_mark for a run of chunks).
 */
int td_snap_state_mark_run(struct td_snap_state *st, uint64_t first,
			   uint64_t nr);

/*
 * Group commit: set the bits of chunks first .. first + nr - 1 and write
 * their bytes in place, without a sync; then one td_snap_state_sync for
 * all the runs set.  Until that returns the bits are not durable: the
 * caller lets no write through on them before.
 */
int td_snap_state_set_run(struct td_snap_state *st, uint64_t first,
			  uint64_t nr);
int td_snap_state_sync(struct td_snap_state *st);

/* Remove the job file (done or dropped) and free st. */
int td_snap_state_remove(struct td_snap_state *st);

/*
 * The cursor's speed limits (bytes/s, 0 none), kept next to the job file
 * in PATH.speed ("speed S busy_speed B") so that a resumed job keeps
 * them.  Written to a temporary file and renamed over, not synced: after
 * a power loss a job may resume with the defaults, as it did before the
 * file existed.  td_snap_state_remove removes it.  0 or -errno.
 */
int td_snap_speed_save(const char *job_path, uint64_t speed,
		       uint64_t busy_speed);

/* 0 and both limits; -ENOENT: none kept; -EINVAL: not such a file. */
int td_snap_speed_load(const char *job_path, uint64_t *speed,
		       uint64_t *busy_speed);

/* Close the file, leave it there (for a resume), free st. */
void td_snap_state_fini(struct td_snap_state *st);

#endif
