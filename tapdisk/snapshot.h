/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot.h - a point-in-time copy of a vbd onto another chain, made in
 * the background while the vbd serves I/O, with copy-before-write: a
 * write, write-zeroes or discard to a chunk not yet copied waits until
 * the chunk's old data is in the target and the job file says so.
 * doc/snapshots.md tells the whole story.  Event-loop thread only.
 */
#ifndef TAPSTRIPE_SNAPSHOT_H
#define TAPSTRIPE_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/json.h"
#include "tapdisk/vbd.h"

/* The job file of the vbd named name: DIR/snapshots/NAME.job, where DIR
 * is $TAPSTRIPE_STATE_DIR or configure's TAPSTRIPE_STATEDIR. */
int td_snap_job_path(const char *name, char *out, size_t size);

#define TD_SNAP_SPEED_KEEP UINT64_MAX

/* The instant is marked (err 0) or the start failed (err, why). */
typedef void (*td_snap_started_cb)(struct td_vbd *vbd, int err, const char *why,
				   void *opaque);

/*
 * Start a copy of vbd onto target (a chain, opened as a second stack
 * with no frontend): refuse at once (-errno, reason in why) when a job
 * runs or its file exists, the target cannot be opened or is smaller,
 * or the vbd is paused; else return 0 and call cb once, from the event
 * loop, when every acknowledged write is durable, the job file written
 * and copy-before-write active (the instant), or with the error.
 *
 * opts (NULL: copy-before-write, default speeds).  opts->row:
 * redirect-on-write instead (doc/snapshots.md): the disk's file
 * stays as it is at the instant, writes go to the target, which is
 * filled from the disk in the background, and at the end the two files
 * exchange names, so the target's name holds the snapshot.  Only for a
 * writable disk served by aio: (under sort: filters at most) and an
 * aio: target file of the same size on the same file system.
 */
struct td_snap_opts {
	bool row;
	/* The cursor's limits from the start (td_vbd_snapshot_set_speed's;
	 * TD_SNAP_SPEED_KEEP: the default). */
	uint64_t speed;
	uint64_t busy_speed;
};
int td_vbd_snapshot_start(struct td_vbd *vbd, const char *target,
			  const struct td_snap_opts *opts,
			  td_snap_started_cb cb, void *opaque,
			  struct td_strbuf *why);

/* A redirect-on-write job pauses the disk to exchange its files (the
 * disk resumes on its own: an operator's resume must wait). */
bool td_vbd_snapshot_pausing(const struct td_vbd *vbd);

/*
 * At open, before any frontend: resume the job whose file is at path.
 * -ENOENT: none.  Any other error (reason in why) means the job file is
 * there and cannot be resumed: the vbd must not serve writes.
 */
int td_vbd_snapshot_resume(struct td_vbd *vbd, const char *path,
			   struct td_strbuf *why);

/* Drop the running job: the job file goes, the target stays incomplete.
 * -ENOENT with why when no job runs. */
int td_vbd_snapshot_cancel(struct td_vbd *vbd, struct td_strbuf *why);

/*
 * Limit the background copy to bytes_per_s (0: no limit, the default),
 * and to busy_bytes_per_s while the disk serves its own I/O (default
 * 16 MiB/s; 0: not slowed; TD_SNAP_SPEED_KEEP: unchanged);
 * copy-before-write is never limited.  For the running job only: a job
 * resumed by the next tapdisk starts with the defaults.  -ENOENT with
 * why when no job is copying.
 */
int td_vbd_snapshot_set_speed(struct td_vbd *vbd, uint64_t bytes_per_s,
			      uint64_t busy_bytes_per_s, struct td_strbuf *why);

/* "snapshot status [json]" text or JSON object. */
void td_vbd_snapshot_status(struct td_vbd *vbd, bool json,
			    struct td_strbuf *out);

/*
 * The vbd is shutting down: the background copy starts no more chunks
 * (so the vbd can drain and close; the job file stays for the next
 * tapdisk), copy-before-write goes on for the writes still coming.
 */
void td_vbd_snapshot_stop_cursor(struct td_vbd *vbd);

/* A job is copying (grow is refused meanwhile). */
bool td_vbd_snapshot_running(const struct td_vbd *vbd);

#endif
