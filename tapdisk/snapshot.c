/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot.c - the snapshot copy job of a vbd (snapshot.h): copy slots
 * with their own buffers, a background cursor, and the copy-before-write
 * gate the vbd asks for every write.  A chunk counts as copied only once
 * its data is durable in the target and its bit durable in the job file;
 * held writes are released only then.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tapdisk/fsync-async.h"
#include "tapdisk/snapshot-int.h"

static void snap_pump(struct td_snap_job *job);
static bool snap_disk_busy(struct td_snap_job *job, uint64_t now);
static void snap_serve_held(struct td_snap_job *job);

int td_snap_job_path(const char *name, char *out, size_t size)
{
	const char *dir = getenv("TAPSTRIPE_STATE_DIR");
	int n;

	if (!dir || !*dir)
		dir = TAPSTRIPE_STATEDIR;
	n = snprintf(out, size, "%s/snapshots/%s.job", dir, name);
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

/* mkdir -p of the folder of path, two levels (DIR and DIR/snapshots). */
static int make_job_dir(const char *path)
{
	char dir[PATH_MAX];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	if (!(slash = strrchr(dir, '/')))
		return 0;
	*slash = '\0';
	if (!mkdir(dir, 0700) || errno == EEXIST)
		return 0;
	if (errno != ENOENT || !(slash = strrchr(dir, '/')))
		return -errno;
	*slash = '\0';
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	*slash = '/';
	return mkdir(dir, 0700) && errno != EEXIST ? -errno : 0;
}

/* --- life of the job ------------------------------------------------------- */

static void snap_free(struct td_snap_job *job)
{
	td_loop_timer_cancel(&job->retry);
	td_loop_defer_cancel(td_vbd_loop(job->vbd), &job->release_defer);
	td_loop_defer_cancel(td_vbd_loop(job->vbd), &job->close_defer);
	td_loop_defer_cancel(td_vbd_loop(job->vbd), &job->commit_defer);
	td_loop_defer_cancel(td_vbd_loop(job->vbd), &job->row_fail_defer);
	td_loop_timer_cancel(&job->row_finish_retry);
	for (unsigned int i = 0; i < SNAP_COMMITS; i++)
		td_fsync_close(&job->commits[i].fsync);
	for (unsigned int i = 0; i < SNAP_SLOTS; i++)
		free(job->slots[i].buf);
	td_snap_state_fini(&job->st);
	free(job);
}

static void snap_close_target(struct td_defer *d, void *opaque)
{
	struct td_snap_job *job = opaque;

	if (job->target && td_vbd_close(job->target) == 0)
		job->target = NULL;
	else if (job->target) /* inside its callbacks still: next pass */
		td_loop_defer(td_vbd_loop(job->vbd), &job->close_defer,
			      snap_close_target, job);
}

/* The job ended (done, failed, cancelled): close once nothing is busy. */
static void snap_maybe_close(struct td_snap_job *job)
{
	if (job->state <= SNAP_COPYING || job->nr_busy || !job->target)
		return;
	td_loop_defer(td_vbd_loop(job->vbd), &job->close_defer,
		      snap_close_target, job);
}

static void snap_release_all(struct td_defer *d, void *opaque)
{
	struct td_snap_job *job = opaque;
	struct td_vbd_io *io;

	while ((io = TAILQ_FIRST(&job->held))) {
		TAILQ_REMOVE(&job->held, io, held_link);
		vbd_io_release(job->vbd, io);
	}
	snap_maybe_close(job);
}

/*
 * End the job in state, dropping its file; held writes go through.  A
 * redirect-on-write job that fails keeps its file (the disk's newest
 * data is in both files: the next tapdisk resumes the job) and answers
 * every I/O it holds or gets with an error.
 */
void snap_end(struct td_snap_job *job, enum snap_state state)
{
	int err;

	job->state = state;
	td_loop_timer_cancel(&job->retry);
	if (job->st.row && state == SNAP_FAILED) {
		row_fail_all(job);
		return;
	}
	err = td_snap_state_remove(&job->st);
	if (err)
		td_vbd_err(job->vbd, "removing the job file %s: %s", job->path,
			   strerror(-err));
	/* Maybe inside vbd_issue of a write the gate looks at: defer. */
	td_loop_defer(td_vbd_loop(job->vbd), &job->release_defer,
		      snap_release_all, job);
}

static void snap_fail(struct td_snap_job *job, int err, const char *what,
		      uint64_t chunk)
{
	if (job->state != SNAP_COPYING)
		return;
	snprintf(job->error, sizeof(job->error),
		 job->st.row ? "%s chunk %" PRIu64
			       ": %s; the disk answers errors until a "
			       "tapdisk resumes the job"
			     : "%s chunk %" PRIu64
			       ": %s; the target is incomplete",
		 what, chunk, strerror(-err));
	td_vbd_err(job->vbd, "snapshot onto %s failed: %s", job->st.target,
		   job->error);
	snap_end(job, SNAP_FAILED);
}

static void snap_complete(struct td_snap_job *job)
{
	td_vbd_info(job->vbd,
		    "snapshot onto %s complete: %" PRIu64 " chunks, %" PRIu64
		    " copied before a write",
		    job->st.target, job->st.nr_chunks, job->cbw_chunks);
	snap_end(job, SNAP_DONE);
}

/* --- one chunk copy: read the source, write the target, mark ------------- */

/* The most chunks one slot copies: its buffer over the chunk size. */
static uint32_t snap_run_max(const struct td_snap_job *job, bool cbw)
{
	uint32_t bytes = job->st.chunk_sectors << TD_SECTOR_SHIFT;

	return (cbw ? SNAP_CBW_BYTES : SNAP_RUN_BYTES) / bytes;
}

static void slot_io(struct snap_slot *slot, enum td_op op, uint32_t flags,
		    td_vbd_io_cb cb)
{
	struct td_snap_state *st = &slot->job->st;
	uint64_t last = slot->chunk + slot->nr_chunks - 1;
	uint32_t nr = (uint32_t)((last - slot->chunk) * st->chunk_sectors) +
		      td_snap_chunk_len(st, last);

	memset(&slot->io, 0, sizeof(slot->io));
	slot->io.op = op;
	slot->io.flags = flags;
	if (op != TD_OP_FLUSH) {
		slot->io.sector = slot->chunk * st->chunk_sectors;
		slot->io.nr_sectors = nr;
		slot->iov.iov_base = slot->buf;
		slot->iov.iov_len = (size_t)nr << TD_SECTOR_SHIFT;
		slot->io.iov = &slot->iov;
		slot->io.iovcnt = 1;
	}
	slot->io.cb = cb;
	slot->io.opaque = slot;
}

/* The slot is free again; the caller then calls snap_slots_freed. */
static void slot_free_up(struct snap_slot *slot, int err, const char *what)
{
	struct td_snap_job *job = slot->job;

	struct td_vbd_io *guest = slot->guest;

	slot->busy = false;
	slot->marking = false;
	slot->commit = NULL;
	slot->guest = NULL;
	slot->err = 0;
	slot->lazy = false;
	job->nr_busy--;
	if (!slot->cbw && !guest)
		job->nr_bg--;
	if (err)
		snap_fail(job, err, what, slot->chunk);
	else if (slot->cbw)
		job->cbw_chunks += slot->nr_chunks;
	if (guest) {
		job->row_redirected++;
		vbd_io_complete(job->vbd, guest, err);
	}
}

/* n slots were freed: held writes they covered go, the cursor moves on. */
static void snap_slots_freed(struct td_snap_job *job, unsigned int n)
{
	struct td_vbd *vbd = job->vbd;

	if (job->state == SNAP_COPYING) {
		snap_serve_held(job);
		snap_pump(job);
	} else {
		snap_maybe_close(job);
	}
	while (n--)
		vbd_active_put(vbd); /* last: a drain may now finish */
}

static void slot_done(struct snap_slot *slot, int err, const char *what)
{
	slot_free_up(slot, err, what);
	snap_slots_freed(slot->job, 1);
}

static void snap_commit(struct td_defer *d, void *opaque);

/*
 * A commit's job-file sync ended: the slots whose bits it covered are
 * done together (their held writes go), and the slots that became ready
 * meanwhile get the next commit.
 */
static void snap_synced(struct td_fsync *f, int err, void *opaque)
{
	struct snap_commit *c = opaque;
	struct td_snap_job *job = c->job;
	unsigned int n = 0;

	(void)f;
	c->busy = false;
	job->nr_commits--;
	for (unsigned int i = 0; i < SNAP_SLOTS; i++) {
		struct snap_slot *slot = &job->slots[i];

		if (slot->busy && slot->commit == c) {
			slot_free_up(slot, slot->err ? slot->err : err,
				     slot->err ? "writing the target at"
					       : "marking");
			n++;
		}
	}
	snap_commit(NULL, job);
	snap_slots_freed(job, n);
}

/* A commit's flush of the target ended: write its bits, sync them. */
static void snap_commit_flushed(struct td_vbd_io *io, int err)
{
	struct snap_commit *c = io->opaque;
	struct td_snap_job *job = c->job;

	for (unsigned int i = 0; i < SNAP_SLOTS && !err; i++) {
		struct snap_slot *slot = &job->slots[i];

		if (slot->busy && slot->commit == c && !slot->err &&
		    slot->nr_chunks && job->state == SNAP_COPYING)
			err = td_snap_state_set_run(&job->st, slot->chunk,
						    slot->nr_chunks);
	}
	if (!err && job->state == SNAP_COPYING && job->st.fd >= 0) {
		job->st.nr_syncs++;
		err = td_fsync_start(&c->fsync, job->st.fd, snap_synced, c);
		if (!err)
			return;
	}
	/* Nothing to sync (the job ended, or in memory), or it failed. */
	snap_synced(&c->fsync, err, c);
}

/* A commit not running, or NULL when SNAP_COMMITS run. */
static struct snap_commit *snap_commit_free(struct td_snap_job *job)
{
	for (unsigned int i = 0; i < SNAP_COMMITS; i++)
		if (!job->commits[i].busy)
			return &job->commits[i];
	return NULL;
}

/*
 * Group commit: the slots whose copies were written to the target since
 * the last commit started get one flush of the target (their copies
 * durable), then their bits in the job file and one fdatasync of it,
 * which runs off the event loop (fsync-async.h); only then are the slots
 * done (their held writes go).  The slots stay busy (their chunks in
 * flight, writes on them held) until then.  Up to SNAP_COMMITS commits
 * run at once, each over its own slots: a bit reaches the job file only
 * after its own commit's flush, so the commits need no order among them.
 */
static void snap_commit(struct td_defer *d, void *opaque)
{
	struct td_snap_job *job = opaque;
	struct snap_commit *c = snap_commit_free(job);
	const struct td_disk_info *ti;
	unsigned int n = 0;
	int err;

	(void)d;
	if (!c)
		return; /* snap_synced commits them */
	for (unsigned int i = 0; i < SNAP_SLOTS; i++) {
		struct snap_slot *slot = &job->slots[i];

		if (slot->busy && slot->marking && !slot->commit) {
			slot->commit = c;
			n++;
		}
	}
	if (!n)
		return;
	c->busy = true;
	job->nr_commits++;
	ti = job->target ? td_vbd_get_info(job->target) : NULL;
	if (job->state != SNAP_COPYING || !(ti->features & TD_FEAT_FLUSH)) {
		c->io.opaque = c;
		snap_commit_flushed(&c->io, 0);
		return;
	}
	memset(&c->io, 0, sizeof(c->io));
	c->io.op = TD_OP_FLUSH;
	c->io.cb = snap_commit_flushed;
	c->io.opaque = c;
	err = td_vbd_submit(job->target, &c->io);
	if (err)
		snap_commit_flushed(&c->io, err);
}

/* The chunks are durable in the target: mark them at the next commit. */
static void slot_mark(struct snap_slot *slot)
{
	struct td_snap_job *job = slot->job;

	slot->marking = true;
	td_loop_defer(td_vbd_loop(job->vbd), &job->commit_defer, snap_commit,
		      job);
}

/* A redirect slot's write was refused at once: it ends at the next
 * commit, from the event loop, not in the stack that submitted it. */
static void slot_mark_failed(struct snap_slot *slot, int err)
{
	slot->err = err;
	slot_mark(slot);
}

/* Written (not durable yet: the commit's one flush makes it so). */
static void slot_written(struct td_vbd_io *io, int err)
{
	struct snap_slot *slot = io->opaque;

	if (err) {
		slot_done(slot, err, "writing the target at");
	} else if (slot->lazy) {
		/* In the job file before the write is answered: a kill -9
		 * loses no answered write; a flush makes the bits durable. */
		err = slot->job->state == SNAP_COPYING
			      ? td_snap_state_set_run(&slot->job->st,
						      slot->chunk,
						      slot->nr_chunks)
			      : -EIO;
		slot_done(slot, err, "marking");
	} else
		slot_mark(slot);
}

static void slot_read(struct td_vbd_io *io, int err)
{
	struct snap_slot *slot = io->opaque;
	struct td_snap_job *job = slot->job;
	const struct td_disk_info *ti;

	if (err || job->state != SNAP_COPYING) {
		slot_done(slot, err, "reading the source at");
		return;
	}
	/* Made durable by the commit's flush; FUA only for a target that
	 * takes no flush. */
	ti = td_vbd_get_info(job->target);
	slot_io(slot, TD_OP_WRITE,
		!(ti->features & TD_FEAT_FLUSH) && (ti->features & TD_FEAT_FUA)
			? TD_REQ_FUA
			: 0,
		slot_written);
	err = td_vbd_submit(job->target, &slot->io);
	if (err)
		slot_done(slot, err, "writing the target at");
}

static struct snap_slot *slot_free(struct td_snap_job *job, bool cbw)
{
	for (unsigned int i = cbw ? SNAP_BG_SLOTS : 0;
	     i < (cbw ? SNAP_BUF_SLOTS : SNAP_BG_SLOTS); i++)
		if (!job->slots[i].busy)
			return &job->slots[i];
	return NULL;
}

struct snap_slot *snap_row_slot_free(struct td_snap_job *job)
{
	for (unsigned int i = SNAP_BUF_SLOTS; i < SNAP_SLOTS; i++)
		if (!job->slots[i].busy)
			return &job->slots[i];
	return NULL;
}

bool snap_chunk_in_flight(const struct td_snap_job *job, uint64_t c)
{
	for (unsigned int i = 0; i < SNAP_SLOTS; i++)
		if (job->slots[i].busy && c >= job->slots[i].chunk &&
		    c < job->slots[i].chunk + job->slots[i].nr_chunks)
			return true;
	return false;
}

static void slot_start(struct snap_slot *slot, uint64_t chunk, uint32_t nr,
		       bool cbw)
{
	struct td_snap_job *job = slot->job;
	int err;

	slot->busy = true;
	slot->marking = false;
	slot->cbw = cbw;
	slot->chunk = chunk;
	slot->nr_chunks = nr;
	job->nr_busy++;
	if (!cbw)
		job->nr_bg++;
	vbd_active_get(job->vbd);
	slot_io(slot, TD_OP_READ, 0, slot_read);
	err = vbd_submit_internal(job->vbd, &slot->io);
	if (err) {
		/* Only a bug gets here (the range is the disk's own). */
		td_vbd_err(job->vbd, "reading chunk %" PRIu64 ": %s", chunk,
			   strerror(-err));
		slot->busy = false;
		job->nr_busy--;
		if (!cbw)
			job->nr_bg--;
		job->vbd->active--;
		snap_fail(job, err, "reading the source at", chunk);
	}
}

/* Redirect-on-write's first write to chunks: straight to the target with
 * the frontend's buffers, then marked by the next commit (slot_mark),
 * and io is answered when the slot is done (slot_free_up). */
static void row_slot_take(struct snap_slot *slot, struct td_vbd_io *io)
{
	slot->busy = true;
	slot->marking = false;
	slot->cbw = false;
	slot->guest = io;
	slot->job->nr_busy++;
	vbd_active_get(slot->job->vbd);
}

void snap_row_flush_start(struct snap_slot *slot, struct td_vbd_io *io)
{
	row_slot_take(slot, io);
	slot->chunk = 0;
	slot->nr_chunks = 0;
	slot_mark(slot);
}

void snap_row_slot_start(struct snap_slot *slot, struct td_vbd_io *io,
			 uint64_t first, uint64_t last, bool lazy)
{
	struct td_snap_job *job = slot->job;
	int err;

	row_slot_take(slot, io);
	slot->lazy = lazy;
	slot->chunk = first;
	slot->nr_chunks = (uint32_t)(last - first + 1);
	memset(&slot->io, 0, sizeof(slot->io));
	slot->io.op = io->op;
	slot->io.flags = io->flags;
	slot->io.sector = io->sector;
	slot->io.nr_sectors = io->nr_sectors;
	slot->io.iov = io->iov;
	slot->io.iovcnt = io->iovcnt;
	slot->io.cb = slot_written;
	slot->io.opaque = slot;
	err = td_vbd_submit(job->target, &slot->io);
	if (err) /* answered from the commit's defer, not this stack */
		slot_mark_failed(slot, err);
}

/* --- copy-before-write and the cursor ------------------------------------ */

/*
 * May a write to chunk c go?  Only once its bit is durable.  A commit
 * sets the bits of its slots in memory when the target's flush ends,
 * before the job file's sync: until that sync ends the slots stay busy
 * and a write to their chunks waits (snap_synced lets it go), or a power
 * loss could keep the write on the disk and lose the bit, and the
 * resumed copy would take the write's data.
 */
bool snap_chunk_done(const struct td_snap_job *job, uint64_t c)
{
	return td_snap_copied(&job->st, c) &&
	       !(job->nr_commits && snap_chunk_in_flight(job, c));
}

bool snap_io_writes(const struct td_vbd_io *io)
{
	return io->op == TD_OP_WRITE || io->op == TD_OP_WRITE_ZEROES ||
	       io->op == TD_OP_DISCARD;
}

/* The run of chunks from c (uncopied, not in flight) up to last that one
 * slot copies: those neither copied nor in flight, up to its buffer. */
static uint32_t snap_run_len(const struct td_snap_job *job, uint64_t c,
			     uint64_t last, bool cbw)
{
	uint32_t max = snap_run_max(job, cbw), nr = 1;

	while (nr < max && c + nr <= last &&
	       !td_snap_copied(&job->st, c + nr) &&
	       !snap_chunk_in_flight(job, c + nr))
		nr++;
	return nr;
}

/* Does io cover chunk c whole? */
static bool io_covers(const struct td_snap_job *job, const struct td_vbd_io *io,
		      uint64_t c)
{
	uint64_t start = c * job->st.chunk_sectors;

	return io->sector <= start &&
	       io->sector + io->nr_sectors >=
		       start + td_snap_chunk_len(&job->st, c);
}

/*
 * Start the copies io waits for; true when none is missing.  For
 * redirect-on-write a chunk that io covers whole needs no copy (io
 * writes it all in the target), only the chunks it covers in part.
 */
bool snap_io_ready(struct td_snap_job *job, struct td_vbd_io *io)
{
	uint64_t first, last;
	bool ready = true;

	td_snap_chunk_range(&job->st, io->sector, io->nr_sectors, &first,
			    &last);
	for (uint64_t c = first; c <= last; c++) {
		struct snap_slot *slot;
		uint32_t nr;

		if (snap_chunk_done(job, c))
			continue;
		if (job->st.row && !td_snap_copied(&job->st, c) &&
		    !snap_chunk_in_flight(job, c) && io_covers(job, io, c))
			continue;
		ready = false;
		if (snap_chunk_in_flight(job, c))
			continue;
		if (!(slot = slot_free(job, true)))
			break;
		nr = job->st.row ? 1 : snap_run_len(job, c, last, true);
		slot_start(slot, c, nr, true);
		if (job->state != SNAP_COPYING)
			break;
		c += nr - 1;
	}
	return ready;
}

static void snap_serve_held(struct td_snap_job *job)
{
	struct td_vbd_io *io = TAILQ_FIRST(&job->held);

	if (job->st.row) {
		row_serve(job);
		return;
	}
	while (io && job->state == SNAP_COPYING) {
		struct td_vbd_io *next = TAILQ_NEXT(io, held_link);

		if (snap_io_ready(job, io)) {
			TAILQ_REMOVE(&job->held, io, held_link);
			vbd_io_release(job->vbd, io);
		}
		io = next;
	}
}

bool vbd_snap_gate(struct td_snap_job *job, struct td_vbd_io *io)
{
	uint64_t first, last;

	if (job->st.row)
		return row_gate(job, io);
	if (job->state != SNAP_COPYING || !snap_io_writes(io))
		return false;
	td_snap_chunk_range(&job->st, io->sector, io->nr_sectors, &first,
			    &last);
	for (uint64_t c = first; c <= last; c++) {
		if (snap_chunk_done(job, c))
			continue;
		TAILQ_INSERT_TAIL(&job->held, io, held_link);
		snap_io_ready(job, io);
		return true;
	}
	return false;
}

static void snap_retry(struct td_timer *t, void *opaque)
{
	snap_pump(opaque);
}

/*
 * Has the disk served its own I/O (not the job's reads) within the last
 * SNAP_IDLE_NS?  Its completions changed since the last look, or some
 * are in flight.
 */
static bool snap_disk_busy(struct td_snap_job *job, uint64_t now)
{
	const struct td_vbd_stats *s = &job->vbd->stats;
	uint64_t done = 0, inflight;

	/* The job's own I/O is not in the disk's statistics. */
	for (int op = 0; op < TD_OP_COUNT; op++)
		done += s->reqs[op];
	inflight = s->inflight;
	if (done != job->fg_seen || inflight) {
		job->fg_seen = done;
		job->fg_last_ns = now;
	}
	return job->fg_last_ns && now - job->fg_last_ns < SNAP_IDLE_NS;
}

/*
 * The cursor's speed limits (copy-before-write is never limited: a
 * write waits for it).  speed holds always; busy_speed while the disk
 * serves its own I/O, so that a busy disk keeps most of the machine and
 * an idle one is copied at full speed (Linux md's resync does the same
 * with speed_limit_min and _max).  A run may start once the runs before
 * it are paid for at the speed in force; if not, the retry timer looks
 * again then, or when the disk may have become idle.
 */
static bool snap_cursor_may_go(struct td_snap_job *job)
{
	uint64_t now = td_now_ns(), until = now;

	if (job->speed && job->cursor_next_ns > until)
		until = job->cursor_next_ns;
	if (job->busy_speed && job->busy_next_ns > now &&
	    snap_disk_busy(job, now)) {
		uint64_t idle = job->fg_last_ns + SNAP_IDLE_NS;

		until = job->busy_next_ns < idle ? job->busy_next_ns : idle;
		if (job->speed && job->cursor_next_ns > until)
			until = job->cursor_next_ns;
	}
	if (until <= now)
		return true;
	td_loop_timer_arm(td_vbd_loop(job->vbd), &job->retry,
			  (until - now + 999) / 1000, snap_retry, job);
	return false;
}

/* Pay for a run of nr chunks at each speed (no credit for idle time
 * beyond one run: no burst after a pause). */
static void snap_cursor_charge(struct td_snap_job *job, uint32_t nr)
{
	uint64_t bytes = ((uint64_t)nr * job->st.chunk_sectors)
			 << TD_SECTOR_SHIFT;
	uint64_t now = td_now_ns();

	if (job->speed) {
		if (job->cursor_next_ns < now)
			job->cursor_next_ns = now;
		job->cursor_next_ns += bytes * 1000000000ull / job->speed;
	}
	if (job->busy_speed) {
		/* An idle disk's runs leave no debt for when it is busy. */
		if (job->busy_next_ns < now || !snap_disk_busy(job, now))
			job->busy_next_ns = now;
		job->busy_next_ns += bytes * 1000000000ull / job->busy_speed;
	}
}

/* Keep the cursor's limits next to the job file; a failure only costs
 * a resumed job its limits. */
static void snap_save_speed(struct td_snap_job *job)
{
	int err = td_snap_speed_save(job->path, job->speed, job->busy_speed);

	if (err)
		td_vbd_warn(job->vbd,
			    "snapshot onto %s: cannot keep the speed limits "
			    "next to %s: %s (a resumed job starts with the "
			    "defaults)",
			    job->st.target, job->path, strerror(-err));
}

int td_vbd_snapshot_set_speed(struct td_vbd *vbd, uint64_t bytes_per_s,
			      uint64_t busy_bytes_per_s, struct td_strbuf *why)
{
	struct td_snap_job *job = vbd->snap;

	if (!job || job->state > SNAP_COPYING) {
		td_strbuf_puts(why, "no snapshot job is copying this disk");
		return -ENOENT;
	}
	job->speed = bytes_per_s;
	if (busy_bytes_per_s != TD_SNAP_SPEED_KEEP)
		job->busy_speed = busy_bytes_per_s;
	job->cursor_next_ns = 0;
	job->busy_next_ns = 0;
	if (job->state == SNAP_COPYING) /* STARTING: kept once it copies */
		snap_save_speed(job);
	snap_pump(job);
	return 0;
}

/* Keep SNAP_BG_SLOTS copies going from the cursor; finish at the end. */
static void snap_pump(struct td_snap_job *job)
{
	struct td_snap_state *st = &job->st;
	struct snap_slot *slot;
	uint32_t nr;

	if (job->state != SNAP_COPYING || job->cursor_stopped)
		return;
	if (job->vbd->state != VBD_RUNNING) {
		td_loop_timer_arm(td_vbd_loop(job->vbd), &job->retry,
				  SNAP_RETRY_US, snap_retry, job);
		return;
	}
	while (snap_cursor_may_go(job) && (slot = slot_free(job, false))) {
		uint64_t c = td_snap_next_uncopied(st, job->cursor);

		while (c < st->nr_chunks && snap_chunk_in_flight(job, c))
			c = td_snap_next_uncopied(st, c + 1);
		job->cursor = c;
		if (c >= st->nr_chunks)
			break;
		nr = snap_run_len(job, c, st->nr_chunks - 1, false);
		job->cursor = c + nr;
		snap_cursor_charge(job, nr);
		slot_start(slot, c, nr, false);
		if (job->state != SNAP_COPYING)
			return;
	}
	if (st->nr_copied == st->nr_chunks && !job->nr_busy) {
		if (job->st.row)
			row_finish(job);
		else
			snap_complete(job);
	}
}

/* --- start, resume, cancel, status ---------------------------------------- */

/* A job copying vbd onto an opened target; -errno with why. */
static int snap_new(struct td_vbd *vbd, const char *target_chain,
		    struct td_snap_job **out, struct td_strbuf *why)
{
	struct td_vbd_open_error oe;
	char name[TD_VBD_NAME_MAX];
	struct td_vbd_params vp = {
		.name = name, .chain = target_chain, .error = &oe};
	struct td_snap_job *job = calloc(1, sizeof(*job));
	int err;

	if (!job)
		return -ENOMEM;
	memset(&oe, 0, sizeof(oe));
	job->vbd = vbd;
	job->st.fd = -1;
	job->busy_speed = SNAP_BUSY_SPEED_DEFAULT;
	TAILQ_INIT(&job->held);
	TAILQ_INIT(&job->row_wait);
	TAILQ_INIT(&job->row_fail);
	for (unsigned int i = 0; i < ROW_SUBS; i++)
		job->subs[i].job = job;
	for (unsigned int i = 0; i < SNAP_COMMITS; i++) {
		job->commits[i].job = job;
		td_fsync_open(&job->commits[i].fsync, td_vbd_loop(vbd));
	}
	snprintf(name, sizeof(name), "%.50s-snap", td_vbd_name(vbd));
	for (unsigned int i = 0; i < SNAP_SLOTS; i++) {
		job->slots[i].job = job;
		if (i >= SNAP_BUF_SLOTS)
			continue; /* redirect slots use the frontend's */
		if (posix_memalign(&job->slots[i].buf, SNAP_ALIGN,
				   i < SNAP_BG_SLOTS ? SNAP_RUN_BYTES
						     : SNAP_CBW_BYTES)) {
			snap_free(job);
			return -ENOMEM;
		}
	}
	err = td_vbd_open(td_vbd_loop(vbd), vbd->table, &vp, &job->target);
	if (err) {
		td_strbuf_printf(why, "cannot open the target %s: %s",
				 target_chain,
				 oe.reason[0] ? oe.reason : strerror(-err));
		snap_free(job);
		return err;
	}
	*out = job;
	return 0;
}

static int snap_check_target(struct td_snap_job *job, struct td_strbuf *why)
{
	const struct td_disk_info *ti = td_vbd_get_info(job->target);
	uint64_t need = job->vbd->info.size_sectors;

	if (ti->read_only) {
		td_strbuf_puts(why, "the target is read-only");
		return -EROFS;
	}
	if (ti->size_sectors < need) {
		td_strbuf_printf(why,
				 "the target holds %" PRIu64 " bytes, "
				 "the disk %" PRIu64 ": give a target "
				 "at least as large",
				 ti->size_sectors << TD_SECTOR_SHIFT,
				 need << TD_SECTOR_SHIFT);
		return -ENOSPC;
	}
	return 0;
}

/* Drop a job that never started (the target has no I/O in flight). */
static void snap_discard(struct td_snap_job *job)
{
	if (job->target)
		td_vbd_close(job->target);
	snap_free(job);
}

/* A previous job that ended: forget it, or -EBUSY while it winds down. */
static int snap_forget_ended(struct td_vbd *vbd, struct td_strbuf *why)
{
	struct td_snap_job *job = vbd->snap;

	if (!job)
		return 0;
	if (job->state <= SNAP_COPYING || job->nr_busy || job->target ||
	    !TAILQ_EMPTY(&job->held)) {
		td_strbuf_printf(why,
				 "a snapshot job onto %s is %s: wait for "
				 "it or cancel it (snapshot cancel)",
				 job->st.target, snap_state_names[job->state]);
		return -EBUSY;
	}
	snap_free(job);
	vbd->snap = NULL;
	return 0;
}

static void snap_started(struct td_snap_job *job, int err, const char *why)
{
	struct td_vbd *vbd = job->vbd;
	td_snap_started_cb cb = job->started_cb;
	void *opaque = job->started_opaque;

	if (err) {
		vbd->snap = NULL;
		snap_discard(job);
	} else {
		job->state = SNAP_COPYING;
		td_vbd_info(vbd, "snapshot onto %s: %" PRIu64 " chunks to copy",
			    job->st.target, job->st.nr_chunks);
		/* The instant's own flush is no sign of a busy disk. */
		snap_disk_busy(job, td_now_ns());
		job->fg_last_ns = 0;
	}
	td_vbd_resume(vbd);
	if (!err)
		snap_pump(job);
	if (cb)
		cb(vbd, err, why, opaque);
}

/* Every acknowledged write is durable: the instant.  Write the job file. */
static void snap_instant(struct td_snap_job *job)
{
	struct td_strbuf why;
	int err;

	td_strbuf_init(&why);
	err = make_job_dir(job->path);
	if (err)
		td_strbuf_printf(&why, "cannot make the folder of %s: %s",
				 job->path, strerror(-err));
	if (!err)
		err = td_snap_state_init(&job->st, td_vbd_chain(job->target),
					 job->vbd->info.size_sectors,
					 TD_SNAP_CHUNK_BYTES >> TD_SECTOR_SHIFT,
					 &why);
	if (!err && job->row_wanted) {
		job->st.row = true;
		job->st.row_dev = job->row_dev;
		job->st.row_lower_ino = job->row_lower_ino;
		job->st.row_upper_ino = job->row_upper_ino;
	}
	if (!err)
		err = td_snap_state_create(&job->st, job->path, &why);
	if (!err)
		snap_save_speed(job);
	snap_started(job, err, td_strbuf_str(&why));
	td_strbuf_free(&why);
}

static void snap_flushed(struct td_vbd_io *io, int err)
{
	struct td_snap_job *job = io->opaque;

	if (err)
		snap_started(job, err,
			     "flushing the disk before the snapshot failed");
	else
		snap_instant(job);
}

static void snap_drained(struct td_vbd *vbd, void *opaque)
{
	struct td_snap_job *job = opaque;
	int err;

	if (vbd->info.read_only || !(vbd->info.features & TD_FEAT_FLUSH)) {
		snap_instant(job);
		return;
	}
	memset(&job->flush_io, 0, sizeof(job->flush_io));
	job->flush_io.op = TD_OP_FLUSH;
	job->flush_io.cb = snap_flushed;
	job->flush_io.opaque = job;
	err = vbd_submit_internal(vbd, &job->flush_io);
	if (err)
		snap_started(job, err, "cannot flush the disk");
}

int td_vbd_snapshot_start(struct td_vbd *vbd, const char *target,
			  const struct td_snap_opts *opts,
			  td_snap_started_cb cb, void *opaque,
			  struct td_strbuf *why)
{
	bool row = opts && opts->row;
	struct td_snap_job *job;
	char path[PATH_MAX];
	int err = snap_forget_ended(vbd, why);

	if (err)
		return err;
	if ((err = td_snap_job_path(td_vbd_name(vbd), path, sizeof(path))))
		return err;
	if (!access(path, F_OK)) {
		td_strbuf_printf(why,
				 "a snapshot job file %s exists: resume "
				 "that job (restart tapdisk) or drop it "
				 "(remove the file)",
				 path);
		return -EEXIST;
	}
	if (vbd->state != VBD_RUNNING) {
		td_strbuf_puts(why, "the disk is paused: resume it first");
		return -EBUSY;
	}
	if ((err = snap_new(vbd, target, &job, why)))
		return err;
	if ((err = snap_check_target(job, why)) ||
	    (row && (err = row_check(job, target, why)))) {
		snap_discard(job);
		return err;
	}
	job->row_wanted = row;
	if (opts && opts->speed != TD_SNAP_SPEED_KEEP)
		job->speed = opts->speed;
	if (opts && opts->busy_speed != TD_SNAP_SPEED_KEEP)
		job->busy_speed = opts->busy_speed;
	snprintf(job->path, sizeof(job->path), "%s", path);
	snprintf(job->st.target, sizeof(job->st.target), "%s", target);
	job->started_cb = cb;
	job->started_opaque = opaque;
	job->state = SNAP_STARTING;
	vbd->snap = job;
	return td_vbd_pause(vbd, snap_drained, job); /* RUNNING: cannot fail */
}

/* A resumed job takes the limits its operator gave (the defaults when
 * none were kept, or the file is not one). */
static void snap_load_speed(struct td_snap_job *job)
{
	uint64_t speed, busy;
	int err = td_snap_speed_load(job->path, &speed, &busy);

	if (!err) {
		job->speed = speed;
		job->busy_speed = busy;
	} else if (err != -ENOENT) {
		td_vbd_warn(job->vbd,
			    "snapshot onto %s: the speed limits kept next to "
			    "%s cannot be read (%s): the defaults hold until "
			    "`snapshot speed` is given",
			    job->st.target, job->path, strerror(-err));
	}
}

int td_vbd_snapshot_resume(struct td_vbd *vbd, const char *path,
			   struct td_strbuf *why)
{
	struct td_snap_state st;
	struct td_snap_job *job;
	int err = td_snap_state_load(&st, path, why);

	if (err)
		return err;
	if (st.size_sectors != vbd->info.size_sectors) {
		td_strbuf_printf(why,
				 "snapshot job file %s: the disk had %" PRIu64
				 " sectors when the job began, "
				 "now %" PRIu64 "; drop the job",
				 path, st.size_sectors, vbd->info.size_sectors);
		td_snap_state_fini(&st);
		return -EINVAL;
	}
	if (st.chunk_sectors > TD_SNAP_CHUNK_MAX_BYTES >> TD_SECTOR_SHIFT) {
		td_strbuf_printf(why,
				 "snapshot job file %s: chunks of %" PRIu64
				 " bytes, this tapdisk copies chunks of at "
				 "most %u; drop the job",
				 path,
				 (uint64_t)st.chunk_sectors << TD_SECTOR_SHIFT,
				 TD_SNAP_CHUNK_MAX_BYTES);
		td_snap_state_fini(&st);
		return -EINVAL;
	}
	if (st.row && (err = row_resume_check(vbd, &st, why)) != 0) {
		if (err == 1) /* exchanged already: only the file was left */
			err = td_snap_state_remove(&st) ?: -ENOENT;
		else
			td_snap_state_fini(&st);
		return err;
	}
	err = snap_new(vbd, st.target, &job, why);
	if (!err && (err = snap_check_target(job, why)))
		snap_discard(job);
	if (err) {
		td_snap_state_fini(&st);
		return err;
	}
	job->st = st;
	snprintf(job->path, sizeof(job->path), "%s", path);
	job->state = SNAP_COPYING;
	vbd->snap = job;
	snap_load_speed(job);
	td_vbd_info(vbd,
		    "snapshot onto %s resumed: %" PRIu64 " of %" PRIu64
		    " chunks copied, speed %" PRIu64 " busy_speed %" PRIu64
		    " bytes/s (0: no limit)",
		    st.target, st.nr_copied, st.nr_chunks, job->speed,
		    job->busy_speed);
	td_loop_timer_arm(td_vbd_loop(vbd), &job->retry, 0, snap_retry, job);
	return 0;
}

int td_vbd_snapshot_cancel(struct td_vbd *vbd, struct td_strbuf *why)
{
	struct td_snap_job *job = vbd->snap;

	if (!job || job->state != SNAP_COPYING) {
		td_strbuf_puts(why, job && job->state == SNAP_STARTING
					    ? "the snapshot is starting: "
					      "cancel it once it copies"
					    : "no snapshot job is copying");
		return job ? -EBUSY : -ENOENT;
	}
	if (job->st.row) {
		td_strbuf_puts(why,
			       "a redirect-on-write snapshot cannot be "
			       "cancelled: the disk's newest data is in both "
			       "files until the merge ends; let it finish "
			       "(snapshot speed 0 0 runs it at full speed)");
		return -EBUSY;
	}
	td_vbd_info(vbd,
		    "snapshot onto %s cancelled at %" PRIu64 " of %" PRIu64
		    " chunks; the target is incomplete",
		    job->st.target, job->st.nr_copied, job->st.nr_chunks);
	snap_end(job, SNAP_CANCELLED);
	return 0;
}

void td_vbd_snapshot_stop_cursor(struct td_vbd *vbd)
{
	if (!vbd->snap)
		return;
	vbd->snap->cursor_stopped = true;
	td_loop_timer_cancel(&vbd->snap->retry);
}

bool td_vbd_snapshot_running(const struct td_vbd *vbd)
{
	return vbd->snap && vbd->snap->state <= SNAP_COPYING;
}

bool vbd_snap_busy(const struct td_snap_job *job)
{
	return job->nr_busy || !TAILQ_EMPTY(&job->held) || row_busy(job);
}

bool vbd_snap_row(const struct td_snap_job *job)
{
	return job->st.row &&
	       (job->state == SNAP_COPYING || job->state == SNAP_FAILED);
}

bool td_vbd_snapshot_pausing(const struct td_vbd *vbd)
{
	return vbd->snap && vbd->snap->row_finishing;
}

void vbd_snap_close(struct td_vbd *vbd)
{
	struct td_snap_job *job = vbd->snap;

	if (!job)
		return;
	if (job->state == SNAP_COPYING)
		td_vbd_info(vbd,
			    "snapshot onto %s stopped at %" PRIu64
			    " of %" PRIu64 " chunks; %s resumes it",
			    job->st.target, job->st.nr_copied,
			    job->st.nr_chunks, job->path);
	if (job->target)
		td_vbd_close(job->target);
	vbd->snap = NULL;
	snap_free(job); /* closes the job file, leaves it */
}

static uint64_t snap_bytes_copied(const struct td_snap_state *st)
{
	uint64_t b = st->nr_copied * st->chunk_sectors;

	return (b < st->size_sectors ? b : st->size_sectors) << TD_SECTOR_SHIFT;
}

void td_vbd_snapshot_status(struct td_vbd *vbd, bool json,
			    struct td_strbuf *out)
{
	struct td_snap_job *job = vbd->snap;
	const struct td_snap_state *st = job ? &job->st : NULL;
	const char *state = job ? snap_state_names[job->state] : "none";
	struct td_json j;

	if (!json) {
		td_strbuf_printf(out, "state %s\n", state);
		if (!job)
			return;
		td_strbuf_printf(out, "mode %s\n", st->row ? "row" : "cbw");
		if (st->row)
			td_strbuf_printf(out, "row_redirected %" PRIu64 "\n",
					 job->row_redirected);
		td_strbuf_printf(
			out,
			"target %s\nchunk_bytes %" PRIu64
			"\nchunks_copied %" PRIu64 "\nchunks_total %" PRIu64
			"\nbytes_copied %" PRIu64 "\nbytes_total %" PRIu64
			"\ncbw_chunks %" PRIu64 "\njob_syncs %" PRIu64
			"\nspeed %" PRIu64 "\nbusy_speed %" PRIu64
			"\njob_file %s\n",
			st->target,
			(uint64_t)st->chunk_sectors << TD_SECTOR_SHIFT,
			st->nr_copied, st->nr_chunks, snap_bytes_copied(st),
			st->size_sectors << TD_SECTOR_SHIFT, job->cbw_chunks,
			st->nr_syncs, job->speed, job->busy_speed, job->path);
		if (job->error[0])
			td_strbuf_printf(out, "error %s\n", job->error);
		return;
	}
	td_json_init(&j, out);
	td_json_begin_object(&j, NULL);
	td_json_str(&j, "state", state);
	if (job) {
		td_json_str(&j, "mode", st->row ? "row" : "cbw");
		td_json_u64(&j, "row_redirected", job->row_redirected);
		td_json_str(&j, "target", st->target);
		td_json_u64(&j, "chunk_bytes",
			    (uint64_t)st->chunk_sectors << TD_SECTOR_SHIFT);
		td_json_u64(&j, "chunks_copied", st->nr_copied);
		td_json_u64(&j, "chunks_total", st->nr_chunks);
		td_json_u64(&j, "bytes_copied", snap_bytes_copied(st));
		td_json_u64(&j, "bytes_total",
			    st->size_sectors << TD_SECTOR_SHIFT);
		td_json_u64(&j, "cbw_chunks", job->cbw_chunks);
		td_json_u64(&j, "job_syncs", st->nr_syncs);
		td_json_u64(&j, "speed", job->speed);
		td_json_u64(&j, "busy_speed", job->busy_speed);
		td_json_str(&j, "job_file", job->path);
		td_json_str(&j, "error", job->error);
	}
	td_json_end_object(&j);
	td_json_finish(&j);
}
