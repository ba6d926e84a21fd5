/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot-row.c - redirect-on-write snapshots of an aio disk
 * (doc/snapshots.md): from the instant on, the disk's file is the
 * snapshot and is only read; the live disk is the target over it.  A
 * chunk whose bit is set lives in the target, any other in the disk's
 * file.  A write that covers the chunks it is first to touch goes to the
 * target and is answered once its bits are durable (the same group
 * commit as copy-before-write's); a write that covers such a chunk in
 * part waits for the chunk's copy first; reads are split between the two
 * files by the bits.  The cursor copies the chunks left, and when every
 * bit is set the two files exchange names (renameat2 RENAME_EXCHANGE),
 * the disk's chain is opened again under its name (now the live data)
 * and the job file goes: the target's name holds the snapshot.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tapdisk/snapshot-int.h"

#define ROW_FINISH_RETRY_US 100000 /* the disk is paused by someone else */
#define ROW_RENAME_RETRY_US 10000000

static void row_pump_waiting(struct td_snap_job *job);

/* --- the files ------------------------------------------------------------- */

/* The file of an aio: chain element (options such as ",merge=off" cut). */
static int aio_path(const char *elem, char *out, size_t size)
{
	char *comma;

	if (strncmp(elem, "aio:", 4) || strchr(elem, '|') || !elem[4])
		return -EINVAL;
	if (snprintf(out, size, "%s", elem + 4) >= (int)size)
		return -ENAMETOOLONG;
	while ((comma = strrchr(out, ',')) &&
	       (!strncmp(comma, ",merge=", 7) ||
		!strncmp(comma, ",submit_batch=", 14)))
		*comma = '\0';
	return 0;
}

/* The disk's file, when its chain is aio: under sort: filters at most. */
static int row_disk_path(const struct td_vbd *vbd, char *out, size_t size)
{
	const char *chain = td_vbd_chain(vbd), *last = strrchr(chain, '|');

	for (unsigned int i = 0; i + 1 < vbd->nr_layers; i++)
		if (strcmp(vbd->drivers[i].ops->name, "sort"))
			return -EINVAL;
	return aio_path(last ? last + 1 : chain, out, size);
}

static int row_paths(const struct td_vbd *vbd, const char *target, char *lower,
		     char *upper, struct td_strbuf *why)
{
	if (row_disk_path(vbd, lower, PATH_MAX)) {
		td_strbuf_printf(why,
				 "redirect-on-write needs a disk served by "
				 "aio: (under sort: at most), not '%s': use "
				 "copy-before-write (without row)",
				 td_vbd_chain(vbd));
		return -EINVAL;
	}
	if (aio_path(target, upper, PATH_MAX)) {
		td_strbuf_printf(why,
				 "redirect-on-write needs an aio:FILE target, "
				 "not '%s'",
				 target);
		return -EINVAL;
	}
	return 0;
}

int row_check(struct td_snap_job *job, const char *target,
	      struct td_strbuf *why)
{
	const struct td_disk_info *di = &job->vbd->info;
	const struct td_disk_info *ti = td_vbd_get_info(job->target);
	uint32_t feats = TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			 TD_FEAT_WRITE_ZEROES;
	char lower[PATH_MAX], upper[PATH_MAX];
	struct stat ls, us;
	int err = row_paths(job->vbd, target, lower, upper, why);

	if (err)
		return err;
	if (di->read_only) {
		td_strbuf_puts(why,
			       "the disk is read-only: nothing to redirect");
		return -EROFS;
	}
	if (stat(lower, &ls) || stat(upper, &us)) {
		err = -errno;
		td_strbuf_printf(why, "cannot stat %s or %s: %s", lower, upper,
				 strerror(-err));
		return err;
	}
	if (!S_ISREG(ls.st_mode) || !S_ISREG(us.st_mode) ||
	    ls.st_dev != us.st_dev || ls.st_ino == us.st_ino) {
		td_strbuf_printf(why,
				 "redirect-on-write needs two different "
				 "files on one file system (%s, %s): their "
				 "names are exchanged at the end",
				 lower, upper);
		return -EXDEV;
	}
	if ((uint64_t)us.st_size != di->size_sectors << TD_SECTOR_SHIFT ||
	    ti->sector_size != di->sector_size ||
	    !(ti->features & TD_FEAT_FLUSH) ||
	    (di->features & feats & ~ti->features)) {
		td_strbuf_printf(
			why,
			"the target %s must be a file of the disk's size "
			"(%" PRIu64 " bytes) and take what the disk takes: "
			"it becomes the disk's file at the end",
			upper, di->size_sectors << TD_SECTOR_SHIFT);
		return -EINVAL;
	}
	job->row_dev = (uint64_t)ls.st_dev;
	job->row_lower_ino = (uint64_t)ls.st_ino;
	job->row_upper_ino = (uint64_t)us.st_ino;
	return 0;
}

int row_resume_check(struct td_vbd *vbd, struct td_snap_state *st,
		     struct td_strbuf *why)
{
	char lower[PATH_MAX], upper[PATH_MAX];
	struct stat ls, us;
	int err = row_paths(vbd, st->target, lower, upper, why);

	if (err)
		return err;
	if (stat(lower, &ls) || stat(upper, &us)) {
		err = -errno;
		td_strbuf_printf(why, "cannot stat %s or %s: %s", lower, upper,
				 strerror(-err));
		return err;
	}
	if ((uint64_t)ls.st_dev == st->row_dev &&
	    (uint64_t)ls.st_ino == st->row_upper_ino &&
	    (uint64_t)us.st_ino == st->row_lower_ino) {
		td_vbd_info(vbd,
			    "redirect-on-write snapshot onto %s: the files "
			    "were exchanged already; dropping the job file",
			    st->target);
		return 1;
	}
	if ((uint64_t)ls.st_dev != st->row_dev ||
	    (uint64_t)ls.st_ino != st->row_lower_ino ||
	    (uint64_t)us.st_ino != st->row_upper_ino) {
		td_strbuf_printf(why,
				 "%s and %s are not the files the "
				 "redirect-on-write snapshot began with "
				 "(the disk's newest data is split between "
				 "those): put them back",
				 lower, upper);
		return -ESTALE;
	}
	return 0;
}

/* --- pieces of frontend I/O --------------------------------------------- */

static uint64_t io_end(const struct td_vbd_io *io)
{
	return io->op == TD_OP_FLUSH ? 1 : io->sector + io->nr_sectors;
}

static struct row_sub *sub_get(struct td_snap_job *job)
{
	for (unsigned int i = 0; i < ROW_SUBS; i++)
		if (!job->subs[i].busy) {
			job->subs[i].busy = true;
			job->nr_subs++;
			return &job->subs[i];
		}
	return NULL;
}

/* Point sub at the next bytes of io's buffers, at most bytes of them;
 * returns the sectors mapped (fewer when ROW_SUB_IOV are not enough). */
static uint64_t sub_slice(struct td_vbd_io *io, struct row_sub *sub,
			  uint64_t bytes)
{
	uint64_t mapped;

	sub->io.iovcnt =
		vbd_iov_take(io, sub->iov, ROW_SUB_IOV, bytes, &mapped);
	sub->io.iov = sub->iov;
	return mapped >> TD_SECTOR_SHIFT;
}

/* Sectors from io's next one that live in one place (target: *up). */
static uint64_t row_run(const struct td_snap_job *job,
			const struct td_vbd_io *io, bool *up)
{
	const struct td_snap_state *st = &job->st;
	uint64_t end = io_end(io), c = io->next_sector / st->chunk_sectors;
	uint64_t run_end;

	if (io->op != TD_OP_READ) { /* writes were made ready for it */
		*up = true;
		return end - io->next_sector;
	}
	*up = td_snap_copied(st, c);
	while (++c * st->chunk_sectors < end && td_snap_copied(st, c) == *up)
		;
	run_end = c * st->chunk_sectors;
	return (run_end < end ? run_end : end) - io->next_sector;
}

/* The io's error once all its pieces are back, else 0. */
static void sub_done(struct td_vbd_io *sio, int err)
{
	struct row_sub *sub = sio->opaque;
	struct td_snap_job *job = sub->job;
	struct td_vbd_io *io = sub->parent;

	sub->busy = false;
	sub->parent = NULL;
	job->nr_subs--;
	if (err && !io->error)
		io->error = err;
	io->pending--;
	if (!io->pending && io->next_sector == io_end(io))
		vbd_io_complete(job->vbd, io, io->error);
	row_pump_waiting(job);
}

/* Give io's pieces to the disk or the target; false: out of pieces. */
static bool row_issue(struct td_snap_job *job, struct td_vbd_io *io)
{
	while (io->next_sector < io_end(io)) {
		struct row_sub *sub = sub_get(job);
		uint64_t nr;
		bool up;
		int err;

		if (!sub)
			return false;
		nr = row_run(job, io, &up);
		memset(&sub->io, 0, sizeof(sub->io));
		sub->parent = io;
		sub->io.op = io->op;
		sub->io.flags = io->flags;
		sub->io.sector = io->op == TD_OP_FLUSH ? 0 : io->next_sector;
		if (io->op == TD_OP_READ || io->op == TD_OP_WRITE)
			nr = sub_slice(io, sub, nr << TD_SECTOR_SHIFT);
		sub->io.nr_sectors = io->op == TD_OP_FLUSH ? 0 : (uint32_t)nr;
		sub->io.cb = sub_done;
		sub->io.opaque = sub;
		io->next_sector += io->op == TD_OP_FLUSH ? 1 : nr;
		io->pending++;
		err = up ? td_vbd_submit(job->target, &sub->io)
			 : vbd_submit_internal(job->vbd, &sub->io);
		if (err) { /* only a bug: the geometry was checked */
			sub->busy = false;
			job->nr_subs--;
			io->pending--;
			if (!io->error)
				io->error = err;
		}
	}
	if (!io->pending) /* every piece refused: answer from a defer */
		TAILQ_INSERT_TAIL(&job->row_fail, io, held_link);
	return true;
}

static void row_fail_run(struct td_defer *d, void *opaque)
{
	struct td_snap_job *job = opaque;
	struct td_vbd_io *io;

	(void)d;
	while ((io = TAILQ_FIRST(&job->row_fail))) {
		TAILQ_REMOVE(&job->row_fail, io, held_link);
		vbd_io_complete(job->vbd, io, io->error ? io->error : -EIO);
	}
}

static void row_pump_waiting(struct td_snap_job *job)
{
	struct td_vbd_io *io;

	while ((io = TAILQ_FIRST(&job->row_wait))) {
		if (!row_issue(job, io))
			break;
		TAILQ_REMOVE(&job->row_wait, io, held_link);
	}
	if (!TAILQ_EMPTY(&job->row_fail))
		td_loop_defer(td_vbd_loop(job->vbd), &job->row_fail_defer,
			      row_fail_run, job);
}

/* --- the gate -------------------------------------------------------------- */

/* The first and last chunk of io not in the target yet; false: none. */
static bool row_uncopied(const struct td_snap_job *job,
			 const struct td_vbd_io *io, uint64_t *first,
			 uint64_t *last)
{
	uint64_t lo, hi;
	bool any = false;

	td_snap_chunk_range(&job->st, io->sector, io->nr_sectors, &lo, &hi);
	for (uint64_t c = lo; c <= hi; c++) {
		if (td_snap_copied(&job->st, c))
			continue;
		if (!any)
			*first = c;
		*last = c;
		any = true;
	}
	return any;
}

/* Route io if it may go now (true); false: it waits for copies/slots. */
static bool row_try(struct td_snap_job *job, struct td_vbd_io *io)
{
	uint64_t first = 0, last = 0;

	struct snap_slot *slot;

	if (io->op == TD_OP_FLUSH) { /* the target's flush, then the bits' */
		if (!(slot = snap_row_slot_free(job)))
			return false;
		snap_row_flush_start(slot, io);
		return true;
	}
	if (snap_io_writes(io)) {
		bool fua = io->flags & TD_REQ_FUA;

		if (!snap_io_ready(job, io))
			return false;
		if (fua) /* durable when answered: its chunks' bits too */
			td_snap_chunk_range(&job->st, io->sector,
					    io->nr_sectors, &first, &last);
		if (fua || row_uncopied(job, io, &first, &last)) {
			if (!(slot = snap_row_slot_free(job)))
				return false;
			snap_row_slot_start(slot, io, first, last, !fua);
			return true;
		}
	}
	if (!row_issue(job, io))
		TAILQ_INSERT_TAIL(&job->row_wait, io, held_link);
	else if (!TAILQ_EMPTY(&job->row_fail))
		td_loop_defer(td_vbd_loop(job->vbd), &job->row_fail_defer,
			      row_fail_run, job);
	return true;
}

bool row_gate(struct td_snap_job *job, struct td_vbd_io *io)
{
	if (job->state == SNAP_FAILED) {
		TAILQ_INSERT_TAIL(&job->row_fail, io, held_link);
		td_loop_defer(td_vbd_loop(job->vbd), &job->row_fail_defer,
			      row_fail_run, job);
		return true;
	}
	if (job->state != SNAP_COPYING)
		return false; /* done: the disk's chain is the live data */
	if (!row_try(job, io))
		TAILQ_INSERT_TAIL(&job->held, io, held_link);
	return true;
}

void row_serve(struct td_snap_job *job)
{
	struct td_vbd_io *io = TAILQ_FIRST(&job->held);

	while (io && job->state == SNAP_COPYING) {
		struct td_vbd_io *next = TAILQ_NEXT(io, held_link);

		TAILQ_REMOVE(&job->held, io, held_link);
		if (!row_try(job, io)) {
			/* back in its place: order among held I/O kept */
			if (next)
				TAILQ_INSERT_BEFORE(next, io, held_link);
			else
				TAILQ_INSERT_TAIL(&job->held, io, held_link);
		}
		io = next;
	}
	row_pump_waiting(job);
}

void row_fail_all(struct td_snap_job *job)
{
	struct td_vbd_io *io;

	while ((io = TAILQ_FIRST(&job->held))) {
		TAILQ_REMOVE(&job->held, io, held_link);
		TAILQ_INSERT_TAIL(&job->row_fail, io, held_link);
	}
	td_loop_defer(td_vbd_loop(job->vbd), &job->row_fail_defer, row_fail_run,
		      job);
}

bool row_busy(const struct td_snap_job *job)
{
	return job->nr_subs || !TAILQ_EMPTY(&job->row_wait) ||
	       !TAILQ_EMPTY(&job->row_fail);
}

/* --- the end: exchange the names ---------------------------------------- */

/* TAPSTRIPE_FAILPOINT=NAME: die here as kill -9 would (the crash tests). */
static void row_failpoint(struct td_snap_job *job, const char *name)
{
	const char *fp = getenv("TAPSTRIPE_FAILPOINT");

	if (fp && !strcmp(fp, name)) {
		td_vbd_err(job->vbd, "fail point %s: killed", name);
		raise(SIGKILL);
	}
}

static int sync_dir(const char *path)
{
	char dir[PATH_MAX], *slash;
	int fd, err = 0;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	return err;
}

static void row_finish_retry(struct td_timer *t, void *opaque)
{
	(void)t;
	row_finish(opaque);
}

/* The names are exchanged: serve the disk's chain again, drop the job. */
static void row_reopen(struct td_snap_job *job)
{
	struct td_vbd *vbd = job->vbd;
	int err = vbd_reopen_layers(vbd);

	if (err) {
		snprintf(job->error, sizeof(job->error),
			 "reopening the disk after the exchange: %s; restart "
			 "tapdisk (it finds the files exchanged and serves "
			 "the disk)",
			 strerror(-err));
		td_vbd_err(vbd, "snapshot onto %s: %s", job->st.target,
			   job->error);
		snap_end(job, SNAP_FAILED);
		return;
	}
	if (job->target && td_vbd_close(job->target) == 0)
		job->target = NULL;
	td_vbd_info(vbd,
		    "redirect-on-write snapshot onto %s complete: %" PRIu64
		    " chunks, %" PRIu64 " writes redirected, %" PRIu64
		    " chunks copied before a write in part",
		    job->st.target, job->st.nr_chunks, job->row_redirected,
		    job->cbw_chunks);
	snap_end(job, SNAP_DONE);
}

static void row_drained(struct td_vbd *vbd, void *opaque)
{
	struct td_snap_job *job = opaque;
	char lower[PATH_MAX], upper[PATH_MAX];
	struct td_strbuf why;
	int err;

	td_strbuf_init(&why);
	row_failpoint(job, "snapshot-row-merged");
	err = row_paths(vbd, job->st.target, lower, upper, &why);
	if (!err &&
	    renameat2(AT_FDCWD, lower, AT_FDCWD, upper, RENAME_EXCHANGE))
		err = -errno;
	if (!err && !(err = sync_dir(lower)))
		err = sync_dir(upper);
	td_strbuf_free(&why);
	job->row_finishing = false;
	if (err) {
		/* Both names stay as they were: serve on, try again. */
		td_vbd_err(vbd, "exchanging %s and %s: %s; retrying", lower,
			   upper, strerror(-err));
		job->row_retry_ns = td_now_ns() + ROW_RENAME_RETRY_US * 1000ull;
		td_loop_timer_arm(td_vbd_loop(vbd), &job->row_finish_retry,
				  ROW_RENAME_RETRY_US, row_finish_retry, job);
	} else {
		row_failpoint(job, "snapshot-row-exchanged");
		row_reopen(job);
	}
	td_vbd_resume(vbd);
}

void row_finish(struct td_snap_job *job)
{
	if (job->row_finishing || job->state != SNAP_COPYING ||
	    td_now_ns() < job->row_retry_ns)
		return;
	if (job->vbd->state != VBD_RUNNING) { /* paused by its operator */
		td_loop_timer_arm(td_vbd_loop(job->vbd), &job->row_finish_retry,
				  ROW_FINISH_RETRY_US, row_finish_retry, job);
		return;
	}
	job->row_finishing = true;
	td_vbd_pause(job->vbd, row_drained, job);
}
