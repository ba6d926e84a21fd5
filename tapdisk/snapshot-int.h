/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot-int.h - the snapshot job's private state, shared by snapshot.c
 * (the job, copy-before-write, the cursor, group commit) and
 * snapshot-row.c (redirect-on-write: I/O served from two places, the
 * exchange of names at the end).  Nothing else includes it.
 */
#ifndef TAPSTRIPE_SNAPSHOT_INT_H
#define TAPSTRIPE_SNAPSHOT_INT_H

#include <limits.h>

#include "tapdisk/fsync-async.h"
#include "tapdisk/snapshot-state.h"
#include "tapdisk/snapshot.h"
#include "tapdisk/vbd-int.h"

/* The cursor copies runs of up to SNAP_RUN_BYTES (256 chunks of 4 KiB)
 * in one I/O and one job-file sync; a held write copies the run of
 * chunks it touches, up to SNAP_CBW_BYTES per slot. */
#define SNAP_RUN_BYTES (1u << 20)
#define SNAP_CBW_BYTES TD_SNAP_CHUNK_MAX_BYTES
/* The cursor's slots (runs), then copy-before-write's: as many as a
 * queue depth of 32 has writes waiting, so none waits for a slot
 * (bench/snapshot.sh). */
#define SNAP_BG_SLOTS  2
#define SNAP_CBW_SLOTS 32
/* Redirect-on-write: a write that covers the chunks it is the first to
 * touch goes to the target in a slot of these (no buffer: the
 * frontend's own), up to a queue depth of 64 at once. */
#define SNAP_ROW_SLOTS 64
#define SNAP_BUF_SLOTS (SNAP_BG_SLOTS + SNAP_CBW_SLOTS)
#define SNAP_SLOTS     (SNAP_BUF_SLOTS + SNAP_ROW_SLOTS)
/* Redirect-on-write's pieces of frontend I/O (a read split between the
 * disk and the target, or I/O sent to the target), each with room for
 * a slice of the frontend's iovecs. */
#define ROW_SUBS      64
#define ROW_SUB_IOV   64
#define SNAP_RETRY_US 50000 /* look again while the vbd is paused */
/* Commits in flight at once: a copy that becomes durable in the target
 * while one commit runs starts the next at once rather than waiting for
 * it (bench/snapshot.sh, doc/snapshots.md "Costs"). */
#define SNAP_COMMITS 4
/* The cursor's speed while the disk serves its own I/O (as Linux md's
 * speed_limit_min), and how long after its last I/O a disk is idle. */
#define SNAP_BUSY_SPEED_DEFAULT (16ull << 20)
#define SNAP_IDLE_NS		(100 * 1000000ull)
#define SNAP_ALIGN		4096 /* buffers for O_DIRECT targets */
#define SNAP_ERR_MAX		256

enum snap_state {
	SNAP_STARTING,
	SNAP_COPYING,
	SNAP_DONE,
	SNAP_FAILED,
	SNAP_CANCELLED
};

static const char *const snap_state_names[] = {"starting", "copying", "done",
					       "failed", "cancelled"};

struct snap_slot {
	struct td_snap_job *job;
	bool busy;
	bool cbw; /* for a held write, not the cursor */
	/* Redirect-on-write: this frontend write, sent to the target as
	 * it is, is answered once its bits are durable. */
	struct td_vbd_io *guest;
	int err; /* failed before its commit: no bits, answered then */
	/* Redirect-on-write, a write that is neither FUA nor a flush: its
	 * bits go to the job file (no sync) when the target has its data,
	 * and it is answered then; a flush makes them durable. */
	bool lazy;
	uint64_t chunk;
	uint32_t nr_chunks; /* a run, up to snap_run_max() */
	bool marking;	    /* durable in the target; waits for the commit */
	struct snap_commit *commit; /* in this commit (flush, bits, sync) */
	void *buf;
	struct iovec iov;
	struct td_vbd_io io; /* the read, then the write */
};

TAILQ_HEAD(snap_held_list, td_vbd_io);

/* A piece of a frontend I/O that redirect-on-write serves. */
struct row_sub {
	struct td_snap_job *job;
	bool busy;
	struct td_vbd_io *parent;
	struct td_vbd_io io;
	struct iovec iov[ROW_SUB_IOV];
};

/* One group commit: its flush of the target, then its job-file sync. */
struct snap_commit {
	struct td_snap_job *job;
	bool busy;
	struct td_fsync fsync; /* the job file's, off the loop */
	struct td_vbd_io io;   /* the flush of the target */
};

struct td_snap_job {
	struct td_vbd *vbd;
	struct td_vbd *target; /* NULL once closed */
	enum snap_state state;
	struct td_snap_state st;
	char path[PATH_MAX];
	char error[SNAP_ERR_MAX];
	struct snap_slot slots[SNAP_SLOTS];
	unsigned int nr_busy;
	unsigned int nr_bg;
	uint64_t cursor;
	bool cursor_stopped; /* the vbd shuts down: copy-before-write only */
	uint64_t cbw_chunks;
	struct snap_held_list held;
	struct td_timer retry;
	struct td_defer release_defer; /* held I/O goes, the job ended */
	struct td_defer close_defer;   /* close the target */
	struct td_defer commit_defer;  /* the marking slots' bits: one sync */
	struct snap_commit commits[SNAP_COMMITS];
	unsigned int nr_commits; /* busy ones */
	uint64_t speed;		 /* the cursor's bytes/s; 0: no limit */
	uint64_t busy_speed;	 /* ... while the disk is busy; 0: same */
	uint64_t cursor_next_ns; /* speed lets the next run go */
	uint64_t busy_next_ns;	 /* busy_speed lets the next run go */
	uint64_t fg_seen;	 /* the disk's own I/Os completed, last look */
	uint64_t fg_last_ns;	 /* when the disk's own I/O was last seen */
	td_snap_started_cb started_cb;
	void *started_opaque;
	struct td_vbd_io flush_io;

	/* Redirect-on-write (st.row): the live disk is the target over the
	 * disk's file; the disk's own chain is only read. */
	struct row_sub subs[ROW_SUBS];
	unsigned int nr_subs;		/* busy ones */
	struct snap_held_list row_wait; /* routed, waiting for a sub */
	struct snap_held_list row_fail; /* answered -EIO from a defer */
	struct td_defer row_fail_defer;
	struct td_timer row_finish_retry;
	bool row_finishing;    /* the disk pauses for the exchange */
	bool row_wanted;       /* start: make a redirect-on-write job */
	uint64_t row_retry_ns; /* the exchange failed: not before then */
	uint64_t row_dev, row_lower_ino, row_upper_ino; /* row_check's */
	uint64_t row_redirected; /* writes that went to the target first */
};

/* snapshot.c, for snapshot-row.c */
bool snap_chunk_done(const struct td_snap_job *job, uint64_t c);
bool snap_chunk_in_flight(const struct td_snap_job *job, uint64_t c);
bool snap_io_ready(struct td_snap_job *job, struct td_vbd_io *io);
bool snap_io_writes(const struct td_vbd_io *io);
void snap_end(struct td_snap_job *job, enum snap_state state);
/*
 * A free redirect slot (NULL: none) and its start: io goes to the
 * target with chunks first..last in flight.  lazy: their bits are
 * written to the job file (not synced) once the target has the data and
 * io is answered then; else they are marked by the next commit (a flush
 * of the target, then the job file's sync) and io answered after it.  A
 * flush (nr 0 chunks) only waits for the next commit.
 */
struct snap_slot *snap_row_slot_free(struct td_snap_job *job);
void snap_row_slot_start(struct snap_slot *slot, struct td_vbd_io *io,
			 uint64_t first, uint64_t last, bool lazy);
void snap_row_flush_start(struct snap_slot *slot, struct td_vbd_io *io);

/*
 * snapshot-row.c.  row_gate: the vbd's gate for a redirect-on-write job
 * (it takes every frontend I/O); row_serve: held writes whose chunks
 * are ready go, waiting ones get their pieces; row_fail_all: the job
 * failed, every I/O it holds or gets is answered -EIO; row_finish: every
 * chunk is in the target: pause, exchange the names, reopen, resume;
 * row_check: may vbd and the target chain take redirect-on-write (fills
 * the row fields of st); row_resume_check: at start-up, before the job
 * resumes: 1 when the names were exchanged already (the job file is
 * dropped, nothing to resume), 0 to resume, -errno with why.
 */
bool row_gate(struct td_snap_job *job, struct td_vbd_io *io);
void row_serve(struct td_snap_job *job);
void row_fail_all(struct td_snap_job *job);
void row_finish(struct td_snap_job *job);
int row_check(struct td_snap_job *job, const char *target,
	      struct td_strbuf *why);
int row_resume_check(struct td_vbd *vbd, struct td_snap_state *st,
		     struct td_strbuf *why);
bool row_busy(const struct td_snap_job *job);

#endif
