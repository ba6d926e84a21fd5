/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-bdev.c - the stripe driver's device backend: a server of the map
 * whose LUN is a local block device of a kernel (open-iscsi) session (the
 * map's "device PATH" key), read and written with O_DIRECT through libaio
 * instead of a libiscsi session of tapdisk's own.
 *
 * It takes the commands of iscsi-conn.h (struct iscsi_cmd) with the same
 * contract: done runs exactly once, from the event loop, never inside
 * submit; destroy completes what is left with -ECANCELED.  It uses the
 * command's private fields link (its queues), start_ns (latency) and
 * result (a failure waiting for the deferred call).
 *
 *   READ, WRITE     preadv / pwritev (RWF_DSYNC for FUA) of the iovecs;
 *                   a short transfer is -EIO
 *   SYNC            an aio fdsync (Linux >= 4.18), so it never blocks
 *   WRITE_ZEROES    pwrites of a zeroed buffer, STRIPE_BDEV_ZERO_CHUNK
 *                   bytes at a time, one after the other
 *   UNMAP           -EOPNOTSUPP (can_unmap is false, so the stripe driver
 *                   skips discards that would reach this replica)
 *   GET_LBA_STATUS  -EOPNOTSUPP (the stripe driver then reports the
 *                   replica's extents allocated)
 *
 * At most queue_depth iocbs (the driver's option) are in the kernel at once;
 * the rest wait in FIFO order.  Submissions of one loop pass are handed to
 * the kernel together by a deferred call (one io_submit), completions come
 * back on an eventfd watched by the loop.
 *
 * State.  UP once the device is open: the block size and size come from
 * BLKSSZGET and BLKGETSIZE64 (the stripe driver's gate checks them against
 * the map).  A regular file is accepted too (for tests, and a LUN copied
 * to a file): its block size is the map's.  DOWN when the device cannot be
 * opened (the session is not logged in yet, or its device node is not
 * there): every command fails with -EIO, so the replica is marked stale by
 * the first write, and the open is tried again after
 * STRIPE_BDEV_REOPEN_MIN_MS, the wait doubling up to
 * STRIPE_BDEV_REOPEN_MAX_MS.  Once open it is UP for good (the stripe
 * driver's gate then checks its geometry; its stale replicas wait for a
 * resync): a kernel session keeps its device node across reconnects
 * (open-iscsi's replacement_timeout decides when I/O on it fails).  There
 * is no deadline per command: the kernel's SCSI timeouts apply.
 *
 * Admission (fencing, cfg.admit set by stripe-fence.c when the disk's
 * lease is on).  Once open the device is ADMITTING: commands are taken
 * and checked but wait in the queue, and admit runs from the loop; the
 * owner runs its PR commands with stripe_bdev_pr (SG_IO, stripe-sgio.c,
 * on this backend's worker thread: SG_IO blocks) and answers with
 * stripe_bdev_admitted: UP (what waited goes out) or FENCED (it and every
 * later command fail with -EACCES).  A command that completes with -EBADE
 * (the kernel's BLK_STS_NEXUS: the LUN said RESERVATION CONFLICT,
 * block/blk-core.c blk_errors[]) fails with -EACCES, never -EBADE, and
 * the device is ADMITTING again (a kernel session that reinstated on tgtd
 * may have lost its registration); a second conflict with no command done
 * well since the last admission makes it FENCED.  A command held while
 * ADMITTING fails with -ETIMEDOUT after cfg.hold_timeout_ms (the disk's
 * cmd_timeout_ms), as a session's held command does.  Without cfg.admit an
 * EBADE is passed on as it is.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/aio-ring.h"
#include "drivers/stripe/stripe-int.h"
#include "drivers/stripe/stripe-sgio.h"

#define STRIPE_BDEV_ZERO_CHUNK	  (1u << 20)
#define STRIPE_BDEV_RETRY_US	  1000 /* after io_submit said EAGAIN */
#define STRIPE_BDEV_ALIGN	  4096
#define STRIPE_BDEV_REOPEN_MIN_MS 1000u	 /* first retry of a failed open */
#define STRIPE_BDEV_REOPEN_MAX_MS 30000u /* the wait doubles up to this */
#define STRIPE_BDEV_HOLD_CHECK_MS 1000u	 /* ADMITTING: held commands' check */

TAILQ_HEAD(bdev_cmd_list, iscsi_cmd);

/*
 * The persistent-reservation worker: one SG_IO at a time, off the loop
 * (stripe-sgio.c), its end told through efd.  Shared with the thread
 * under lock: want (a command to run), stop; the thread fills err and
 * the command's answer, then sets want false.
 */
struct bdev_pr {
	bool started;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int efd;
	struct td_fd efd_event;
	int fd; /* the device's, set before each command */
	bool want, stop;
	struct iscsi_pr_cmd *cmd; /* the caller's, until done */
	enum iscsi_pr_action action;
	uint64_t key;
	int err;
};

/* One iocb of the device: the command it carries out. */
struct bdev_slot {
	struct iocb iocb;
	struct iscsi_cmd *cmd;
	struct iovec zero_iov; /* WRITE_ZEROES: the chunk in flight */
	uint64_t bytes;	       /* what the iocb must move */
	uint64_t zeroed;       /* WRITE_ZEROES: bytes done before it */
};

struct stripe_bdev {
	struct td_loop *loop;
	char *path;
	char name[32];
	int fd;
	enum iscsi_conn_state state;
	uint32_t block_size;
	uint64_t nr_blocks;
	struct aio_ring ring; /* completions reaped by the loop */
	uint32_t depth;
	struct bdev_slot *slots;
	struct bdev_slot **free_slots;
	uint32_t nr_free;
	struct bdev_cmd_list waiting; /* not yet in the kernel, FIFO */
	struct bdev_cmd_list failed;  /* completed by the deferred call */
	struct td_defer defer;
	struct td_timer retry;
	struct td_timer reopen; /* DOWN: the next open attempt */
	uint32_t reopen_ms;	/* the wait before it */
	bool read_only;
	uint32_t map_block_size;
	void *zero_buf;
	struct iscsi_conn_stats st;
	char error[160];

	/* admission (cfg.admit; see the top) */
	void (*admit)(void *be, void *opaque);
	void *admit_opaque;
	struct td_defer admit_defer;
	struct td_timer hold_timer; /* ADMITTING: held commands' deadline */
	uint64_t hold_ns;
	bool conflict_readmit;	 /* a conflict's re-admission is under way */
	uint64_t ok_since_admit; /* commands done well since the admission */
	struct bdev_pr pr;
};

/* --- completion -------------------------------------------------------------- */

static void bdev_count(struct stripe_bdev *b, const struct iscsi_cmd *cmd,
		       int err)
{
	uint64_t bytes = (uint64_t)cmd->nr_blocks * b->block_size;
	uint64_t us = (td_now_ns() - cmd->start_ns) / 1000;

	if (err) {
		b->st.errors++;
		return;
	}
	switch (cmd->op) {
	case ISCSI_CMD_READ:
		b->st.reads++;
		b->st.read_bytes += bytes;
		break;
	case ISCSI_CMD_WRITE:
		b->st.writes++;
		b->st.write_bytes += bytes;
		break;
	case ISCSI_CMD_SYNC:
		b->st.syncs++;
		return;
	case ISCSI_CMD_WRITE_ZEROES:
		b->st.write_zeroes++;
		return;
	default:
		return;
	}
	b->st.latency_sum_us += us;
	if (us > b->st.latency_max_us)
		b->st.latency_max_us = us;
}

static void bdev_finish(struct stripe_bdev *b, struct iscsi_cmd *cmd, int err)
{
	bdev_count(b, cmd, err);
	if (!err)
		b->ok_since_admit++;
	cmd->done(cmd, err);
}

static void bdev_fail_later(struct stripe_bdev *b, struct iscsi_cmd *cmd,
			    int err);

/* --- issue ------------------------------------------------------------------- */

/* 0, or the error to complete cmd with (it is not issued). */
static int bdev_check(const struct stripe_bdev *b, const struct iscsi_cmd *cmd)
{
	uint64_t bytes = 0;

	if (cmd->op == ISCSI_CMD_SYNC)
		return 0;
	if (cmd->op == ISCSI_CMD_UNMAP || cmd->op == ISCSI_CMD_GET_LBA_STATUS)
		return -EOPNOTSUPP;
	if (!cmd->nr_blocks || cmd->lba > b->nr_blocks ||
	    cmd->nr_blocks > b->nr_blocks - cmd->lba)
		return -EINVAL;
	if (cmd->op == ISCSI_CMD_WRITE_ZEROES)
		return 0;
	if (cmd->iovcnt < 1 || cmd->iovcnt > ISCSI_CONN_MAX_IOV)
		return -EINVAL;
	for (int i = 0; i < cmd->iovcnt; i++)
		bytes += cmd->iov[i].iov_len;
	return bytes == (uint64_t)cmd->nr_blocks * b->block_size ? 0 : -EINVAL;
}

/* Point the slot's iocb at the next piece of zeroes. */
static void bdev_prep_zeroes(struct stripe_bdev *b, struct bdev_slot *s)
{
	const struct iscsi_cmd *cmd = s->cmd;
	uint64_t total = (uint64_t)cmd->nr_blocks * b->block_size;
	uint64_t left = total - s->zeroed;

	s->bytes =
		left < STRIPE_BDEV_ZERO_CHUNK ? left : STRIPE_BDEV_ZERO_CHUNK;
	s->zero_iov.iov_base = b->zero_buf;
	s->zero_iov.iov_len = s->bytes;
	io_prep_pwritev2(&s->iocb, b->fd, &s->zero_iov, 1,
			 (long long)(cmd->lba * b->block_size + s->zeroed),
			 cmd->fua ? RWF_DSYNC : 0);
}

static void bdev_prep(struct stripe_bdev *b, struct bdev_slot *s)
{
	struct iscsi_cmd *cmd = s->cmd;
	long long off = (long long)(cmd->lba * b->block_size);

	s->bytes = (uint64_t)cmd->nr_blocks * b->block_size;
	s->zeroed = 0;
	switch (cmd->op) {
	case ISCSI_CMD_READ:
		io_prep_preadv2(&s->iocb, b->fd, cmd->iov, cmd->iovcnt, off, 0);
		break;
	case ISCSI_CMD_WRITE:
		io_prep_pwritev2(&s->iocb, b->fd, cmd->iov, cmd->iovcnt, off,
				 cmd->fua ? RWF_DSYNC : 0);
		break;
	case ISCSI_CMD_WRITE_ZEROES:
		bdev_prep_zeroes(b, s);
		break;
	default:
		io_prep_fdsync(&s->iocb, b->fd);
		s->bytes = 0;
		break;
	}
	aio_ring_prep(&b->ring, &s->iocb, s);
}

static void bdev_put_slot(struct stripe_bdev *b, struct bdev_slot *s)
{
	s->cmd = NULL;
	b->free_slots[b->nr_free++] = s;
	b->st.in_flight--;
}

static void bdev_retry(struct td_timer *t, void *opaque);

/*
 * Move waiting commands into free slots and hand them to the kernel in one
 * io_submit.  What the kernel does not take goes back to the front.
 */
static void bdev_push(struct stripe_bdev *b)
{
	struct iocb *iocbs[STRIPE_MAX_QUEUE_DEPTH];
	struct iscsi_cmd *cmd;
	long nr = 0, done = 0;

	while (b->nr_free && (cmd = TAILQ_FIRST(&b->waiting))) {
		struct bdev_slot *s = b->free_slots[--b->nr_free];

		TAILQ_REMOVE(&b->waiting, cmd, link);
		b->st.queued--;
		b->st.in_flight++;
		s->cmd = cmd;
		bdev_prep(b, s);
		iocbs[nr++] = &s->iocb;
	}
	if (b->st.in_flight > b->st.max_in_flight)
		b->st.max_in_flight = b->st.in_flight;
	while (done < nr) {
		int n = io_submit(b->ring.ctx, nr - done, &iocbs[done]);
		struct bdev_slot *s;

		if (n > 0) {
			done += n;
			continue;
		}
		if (n == -EAGAIN || n == 0)
			break;
		/* The first iocb is refused: fail its command, go on. */
		s = iocbs[done++]->data;
		cmd = s->cmd;
		snprintf(b->error, sizeof(b->error), "io_submit: %s",
			 strerror(-n));
		bdev_put_slot(b, s);
		bdev_fail_later(b, cmd, n);
	}
	/* Not taken (EAGAIN): back to the front, in order. */
	for (long i = nr - 1; i >= done; i--) {
		struct bdev_slot *s = iocbs[i]->data;

		cmd = s->cmd;
		bdev_put_slot(b, s);
		TAILQ_INSERT_HEAD(&b->waiting, cmd, link);
		b->st.queued++;
	}
	if (done < nr && !td_timer_armed(&b->retry))
		td_loop_timer_arm(b->loop, &b->retry, STRIPE_BDEV_RETRY_US,
				  bdev_retry, b);
}

static void bdev_run(struct td_defer *d, void *opaque)
{
	struct stripe_bdev *b = opaque;
	struct bdev_cmd_list list = TAILQ_HEAD_INITIALIZER(list);
	struct iscsi_cmd *cmd;

	/* Failed by the callbacks below: they wait for the next run. */
	TAILQ_CONCAT(&list, &b->failed, link);
	while ((cmd = TAILQ_FIRST(&list))) {
		TAILQ_REMOVE(&list, cmd, link);
		bdev_finish(b, cmd, cmd->result);
	}
	if (!td_timer_armed(&b->retry) && b->state == ISCSI_CONN_UP)
		bdev_push(b);
}

static void bdev_retry(struct td_timer *t, void *opaque)
{
	bdev_push(opaque);
}

static void bdev_fail_later(struct stripe_bdev *b, struct iscsi_cmd *cmd,
			    int err)
{
	cmd->result = err;
	TAILQ_INSERT_TAIL(&b->failed, cmd, link);
	td_loop_defer(b->loop, &b->defer, bdev_run, b);
}

static void bdev_submit(void *be, struct iscsi_cmd *cmd)
{
	struct stripe_bdev *b = be;
	int err = b->state == ISCSI_CONN_UP || b->state == ISCSI_CONN_ADMITTING
			  ? bdev_check(b, cmd)
		  : b->state == ISCSI_CONN_FENCED ? -EACCES
						  : -EIO;

	cmd->start_ns = td_now_ns();
	if (err) {
		bdev_fail_later(b, cmd, err);
		return;
	}
	/* ADMITTING: it waits in the queue until admitted. */
	TAILQ_INSERT_TAIL(&b->waiting, cmd, link);
	b->st.queued++;
	td_loop_defer(b->loop, &b->defer, bdev_run, b);
}

/* --- admission (see the top) ----------------------------------------------- */

static void bdev_admit_cb(struct td_defer *d, void *opaque)
{
	struct stripe_bdev *b = opaque;

	if (b->state == ISCSI_CONN_ADMITTING)
		b->admit(b, b->admit_opaque);
}

/*
 * ADMITTING: a command held longer than hold_ns fails with -ETIMEDOUT, as
 * a session's held command past its deadline (the master may be away for
 * long: a running disk does not wait on it; the replica goes stale).
 */
static void bdev_hold_check(struct td_timer *t, void *opaque)
{
	struct stripe_bdev *b = opaque;
	uint64_t now = td_now_ns();
	struct iscsi_cmd *cmd, *next;

	if (b->state != ISCSI_CONN_ADMITTING)
		return;
	for (cmd = TAILQ_FIRST(&b->waiting); cmd; cmd = next) {
		next = TAILQ_NEXT(cmd, link);
		if (now - cmd->start_ns < b->hold_ns)
			continue;
		TAILQ_REMOVE(&b->waiting, cmd, link);
		b->st.queued--;
		b->st.timeouts++;
		bdev_fail_later(b, cmd, -ETIMEDOUT);
	}
	td_loop_timer_arm(b->loop, &b->hold_timer,
			  STRIPE_BDEV_HOLD_CHECK_MS * 1000ull, bdev_hold_check,
			  b);
}

/* Hold new commands and ask the admission hook (from the loop). */
static void bdev_begin_admission(struct stripe_bdev *b)
{
	b->state = ISCSI_CONN_ADMITTING;
	td_loop_defer(b->loop, &b->admit_defer, bdev_admit_cb, b);
	if (!td_timer_armed(&b->hold_timer))
		td_loop_timer_arm(b->loop, &b->hold_timer,
				  STRIPE_BDEV_HOLD_CHECK_MS * 1000ull,
				  bdev_hold_check, b);
}

/* Refused: what waits and every later command fail with -EACCES. */
static void bdev_fence(struct stripe_bdev *b)
{
	struct iscsi_cmd *cmd;
	uint64_t held = 0;

	b->state = ISCSI_CONN_FENCED;
	td_loop_defer_cancel(b->loop, &b->admit_defer);
	td_loop_timer_cancel(&b->hold_timer);
	while ((cmd = TAILQ_FIRST(&b->waiting))) {
		TAILQ_REMOVE(&b->waiting, cmd, link);
		b->st.queued--;
		held++;
		bdev_fail_later(b, cmd, -EACCES);
	}
	snprintf(b->error, sizeof(b->error),
		 "fenced: this host's key is not admitted");
	td_err("stripe: %s: %s: this host was fenced from the device's LUN: "
	       "%llu held commands and every later one fail with EACCES; "
	       "it stays fenced until re-admitted by an explicit command, "
	       "once it no longer holds the disk (doc/stripe-driver.md, "
	       "\"Fencing\")",
	       b->name, b->path, (unsigned long long)held);
}

int stripe_bdev_admitted(void *be, int err)
{
	struct stripe_bdev *b = be;

	if (b->state == ISCSI_CONN_FENCED)
		return -EINVAL;
	if (err == -EACCES) {
		bdev_fence(b);
		return 0;
	}
	if (err)
		return -EINVAL;
	if (b->state != ISCSI_CONN_ADMITTING)
		return -ESTALE;
	b->state = ISCSI_CONN_UP;
	b->ok_since_admit = 0;
	td_loop_timer_cancel(&b->hold_timer);
	td_loop_defer(b->loop, &b->defer, bdev_run, b);
	return 0;
}

/*
 * A command got RESERVATION CONFLICT (-EBADE): the registration may have
 * been lost (a kernel session reinstated on tgtd) or preempted.  The first
 * conflict since the device last did a command well admits it again
 * through the decision; a second one with nothing done well in between
 * fences it.
 */
static void bdev_conflict(struct stripe_bdev *b)
{
	b->st.reservation_conflicts++;
	if (b->state != ISCSI_CONN_UP)
		return; /* admitting again already, or fenced */
	if (b->conflict_readmit && !b->ok_since_admit) {
		bdev_fence(b);
		return;
	}
	td_warn("stripe: %s: %s: RESERVATION CONFLICT (EBADE): the command "
		"fails with EACCES and the device is admitted again (its "
		"registration may have been lost or preempted); its commands "
		"wait meanwhile",
		b->name, b->path);
	b->conflict_readmit = true;
	bdev_begin_admission(b);
}

/* One kernel completion; true when the slot was issued again. */
static bool bdev_event(struct stripe_bdev *b, const struct io_event *ev)
{
	struct bdev_slot *s = ev->data;
	struct iscsi_cmd *cmd = s->cmd;
	long res = (long)ev->res;
	int err = 0;

	if (res == -EBADE && b->admit) {
		/* BLK_STS_NEXUS: the LUN said RESERVATION CONFLICT. */
		err = -EACCES;
		bdev_conflict(b);
	} else if (res < 0) {
		err = (int)res;
	} else if ((uint64_t)res != s->bytes) {
		err = -EIO; /* a short transfer: the device shrank or failed */
		res = -EIO;
	}
	if (err)
		snprintf(b->error, sizeof(b->error), "%s at block %llu: %s",
			 cmd->op == ISCSI_CMD_READ ? "read" : "write",
			 (unsigned long long)cmd->lba, strerror(-err));
	if (!err && cmd->op == ISCSI_CMD_WRITE_ZEROES) {
		struct iocb *one = &s->iocb;

		s->zeroed += s->bytes;
		if (s->zeroed < (uint64_t)cmd->nr_blocks * b->block_size) {
			bdev_prep_zeroes(b, s);
			aio_ring_prep(&b->ring, &s->iocb, s);
			err = io_submit(b->ring.ctx, 1, &one);
			if (err == 1)
				return true;
			err = err < 0 ? err : -EIO;
		}
	}
	bdev_put_slot(b, s);
	bdev_finish(b, cmd, err);
	return false;
}

static void bdev_ring_event(void *opaque, struct io_event *ev)
{
	bdev_event(opaque, ev);
}

/* Room in the kernel queue again: push what waited. */
static void bdev_drained(void *opaque)
{
	struct stripe_bdev *b = opaque;

	if (!TAILQ_EMPTY(&b->waiting) && !td_timer_armed(&b->retry) &&
	    b->state == ISCSI_CONN_UP)
		bdev_push(b);
}

/* --- the persistent-reservation worker (see struct bdev_pr) ------------------- */

static void *bdev_pr_worker(void *arg)
{
	struct bdev_pr *w = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct iscsi_pr_cmd *cmd;
		enum iscsi_pr_action a;
		uint64_t key;
		int fd, err;

		while (!w->stop && !w->want)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		cmd = w->cmd;
		a = w->action;
		key = w->key;
		fd = w->fd;
		pthread_mutex_unlock(&w->lock);
		err = stripe_sgio_run(fd, a, key, cmd); /* blocks */
		pthread_mutex_lock(&w->lock);
		w->err = err;
		w->want = false;
		if (write(w->efd, &one, sizeof(one)) < 0)
			abort(); /* an eventfd write fails only on overflow */
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void bdev_pr_efd_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct bdev_pr *w = opaque;
	struct iscsi_pr_cmd *cmd = NULL;
	uint64_t count;
	int err;

	if (read(w->efd, &count, sizeof(count)) != sizeof(count))
		return;
	pthread_mutex_lock(&w->lock);
	if (!w->want) {
		cmd = w->cmd;
		w->cmd = NULL;
	}
	err = w->err;
	pthread_mutex_unlock(&w->lock);
	if (cmd)
		cmd->done(cmd, err, cmd->opaque);
}

static int bdev_pr_start(struct stripe_bdev *b)
{
	struct bdev_pr *w = &b->pr;
	int err;

	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0)
		return -errno;
	err = td_loop_add_fd(b->loop, &w->efd_event, w->efd, EPOLLIN,
			     bdev_pr_efd_cb, w);
	if (err)
		return err;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	err = td_thread_create(&w->thread, bdev_pr_worker, w);
	if (err) {
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
		return err;
	}
	w->started = true;
	return 0;
}

/* Stop the worker (waits for an SG_IO under way) and cancel its command. */
static void bdev_pr_stop(struct bdev_pr *w)
{
	struct iscsi_pr_cmd *cmd = w->cmd;

	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
		w->started = false;
	}
	td_loop_del_fd(&w->efd_event);
	if (w->efd >= 0)
		close(w->efd);
	w->efd = -1;
	w->cmd = NULL;
	if (cmd)
		cmd->done(cmd, -ECANCELED, cmd->opaque);
}

int stripe_bdev_pr(void *be, struct iscsi_pr_cmd *pr, enum iscsi_pr_action a,
		   uint64_t key, iscsi_pr_done_fn done, void *opaque)
{
	struct stripe_bdev *b = be;
	struct bdev_pr *w = &b->pr;

	if (!done || !w->started || w->cmd || b->fd < 0 ||
	    a == ISCSI_PR_PREEMPT_ABORT ||
	    ((a == ISCSI_PR_REGISTER || a == ISCSI_PR_RESERVE) && !key))
		return -EINVAL;
	pr->action = a;
	pr->key = key;
	pr->done = done;
	pr->opaque = opaque;
	pthread_mutex_lock(&w->lock);
	w->cmd = pr;
	w->action = a;
	w->key = key;
	w->fd = b->fd;
	w->want = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

/* --- open and close ------------------------------------------------------------ */

/* The device's geometry; a regular file has the map's block size. */
static int bdev_probe(struct stripe_bdev *b, uint32_t map_block_size)
{
	struct stat st;
	uint64_t bytes;
	int ssz;

	if (fstat(b->fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(b->fd, BLKGETSIZE64, &bytes) < 0 ||
		    ioctl(b->fd, BLKSSZGET, &ssz) < 0)
			return -errno;
		b->block_size = (uint32_t)ssz;
	} else if (S_ISREG(st.st_mode)) {
		bytes = (uint64_t)st.st_size;
		b->block_size = map_block_size;
	} else {
		return -ENOTBLK;
	}
	b->nr_blocks = b->block_size ? bytes / b->block_size : 0;
	return 0;
}

static void bdev_reopen(struct td_timer *t, void *opaque);

/* Open and probe the device: UP, or DOWN with the next try armed. */
static void bdev_open_device(struct stripe_bdev *b)
{
	bool retry = b->reopen_ms != 0;
	mode_t mode;
	int err;

	/* Without waiting on it (this runs in the event loop too): a FIFO
	 * or a tty named as the device is refused. */
	err = td_open_file(b->path, b->read_only ? O_RDONLY : O_RDWR, O_DIRECT,
			   TD_OPEN_REGULAR | TD_OPEN_BLOCK_DEVICE, &b->fd,
			   &mode);
	if (err)
		b->fd = -1;
	else
		err = bdev_probe(b, b->map_block_size);
	if (!err) {
		b->state = ISCSI_CONN_UP;
		if (b->admit)
			bdev_begin_admission(b);
		if (retry)
			td_info("stripe: %s: %s is open now (%u-byte blocks, "
				"%llu of them)",
				b->name, b->path, b->block_size,
				(unsigned long long)b->nr_blocks);
		return;
	}
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
	if (mode)
		snprintf(b->error, sizeof(b->error),
			 "cannot open %s: it is %s, not a block device",
			 b->path, td_file_kind(mode));
	else
		snprintf(b->error, sizeof(b->error), "cannot open %s: %s",
			 b->path,
			 err == -ENOTBLK ? "not a block device"
					 : strerror(-err));
	/* Said once; the retries are counted in login_failures. */
	if (!retry)
		td_err("stripe: %s: %s; I/O to it fails with EIO until it "
		       "opens, tried again every %u-%u s (log the kernel "
		       "session in with 'stripe-ctl session login MAPFILE', "
		       "or drop the device key with '... session logout')",
		       b->name, b->error, STRIPE_BDEV_REOPEN_MIN_MS / 1000,
		       STRIPE_BDEV_REOPEN_MAX_MS / 1000);
	b->state = ISCSI_CONN_DOWN;
	b->st.login_failures++;
	b->reopen_ms = !retry ? STRIPE_BDEV_REOPEN_MIN_MS
		       : b->reopen_ms >= STRIPE_BDEV_REOPEN_MAX_MS / 2
			       ? STRIPE_BDEV_REOPEN_MAX_MS
			       : b->reopen_ms * 2;
	td_loop_timer_arm(b->loop, &b->reopen, (uint64_t)b->reopen_ms * 1000,
			  bdev_reopen, b);
}

static void bdev_reopen(struct td_timer *t, void *opaque)
{
	bdev_open_device(opaque);
}

static void bdev_destroy(void *be);

int stripe_bdev_create(struct td_loop *loop, const struct stripe_bdev_cfg *cfg,
		       void **out)
{
	struct stripe_bdev *b = calloc(1, sizeof(*b));
	int err;

	if (!b)
		return -ENOMEM;
	b->loop = loop;
	b->fd = b->ring.efd = b->pr.efd = -1;
	b->admit = cfg->admit;
	b->admit_opaque = cfg->admit_opaque;
	b->hold_ns = (uint64_t)(cfg->hold_timeout_ms
					? cfg->hold_timeout_ms
					: ISCSI_CONN_DEFAULT_CMD_TIMEOUT_MS) *
		     1000000ull;
	b->depth = cfg->queue_depth ? cfg->queue_depth
				    : ISCSI_CONN_DEFAULT_QUEUE_DEPTH;
	snprintf(b->name, sizeof(b->name), "%s", cfg->name ? cfg->name : "");
	TAILQ_INIT(&b->waiting);
	TAILQ_INIT(&b->failed);
	err = b->depth > STRIPE_MAX_QUEUE_DEPTH ? -EINVAL : 0;
	if (!err && (!(b->path = strdup(cfg->path)) ||
		     !(b->slots = calloc(b->depth, sizeof(*b->slots))) ||
		     !(b->free_slots = calloc(b->depth, sizeof(void *))) ||
		     posix_memalign(&b->zero_buf, STRIPE_BDEV_ALIGN,
				    STRIPE_BDEV_ZERO_CHUNK)))
		err = -ENOMEM;
	if (!err)
		err = aio_ring_open(&b->ring, loop, b->depth, bdev_ring_event,
				    bdev_drained, b, b->name);
	if (!err && b->admit)
		err = bdev_pr_start(b);
	if (err) {
		bdev_destroy(b);
		return err;
	}
	memset(b->zero_buf, 0, STRIPE_BDEV_ZERO_CHUNK);
	for (uint32_t i = 0; i < b->depth; i++)
		b->free_slots[b->nr_free++] = &b->slots[b->depth - 1 - i];
	b->read_only = cfg->read_only;
	b->map_block_size = cfg->block_size;
	bdev_open_device(b);
	*out = b;
	return 0;
}

static void bdev_cancel_list(struct stripe_bdev *b, struct bdev_cmd_list *l)
{
	struct iscsi_cmd *cmd;

	while ((cmd = TAILQ_FIRST(l))) {
		TAILQ_REMOVE(l, cmd, link);
		cmd->done(cmd, -ECANCELED);
	}
}

static void bdev_destroy(void *be)
{
	struct stripe_bdev *b = be;

	if (!b)
		return;
	td_loop_timer_cancel(&b->retry);
	td_loop_timer_cancel(&b->reopen);
	td_loop_defer_cancel(b->loop, &b->defer);
	td_loop_defer_cancel(b->loop, &b->admit_defer);
	td_loop_timer_cancel(&b->hold_timer);
	bdev_pr_stop(&b->pr);
	/* io_destroy waits for the iocbs in the kernel to finish. */
	aio_ring_close(&b->ring);
	for (uint32_t i = 0; b->slots && i < b->depth; i++)
		if (b->slots[i].cmd)
			b->slots[i].cmd->done(b->slots[i].cmd, -ECANCELED);
	bdev_cancel_list(b, &b->failed);
	bdev_cancel_list(b, &b->waiting);
	if (b->fd >= 0)
		close(b->fd);
	free(b->zero_buf);
	free(b->free_slots);
	free(b->slots);
	free(b->path);
	free(b);
}

/* --- the backend's ops --------------------------------------------------------- */

static enum iscsi_conn_state bdev_state(const void *be)
{
	return ((const struct stripe_bdev *)be)->state;
}

static uint32_t bdev_block_size(const void *be)
{
	const struct stripe_bdev *b = be;

	return b->state == ISCSI_CONN_UP ? b->block_size : 0;
}

static uint64_t bdev_nr_blocks(const void *be)
{
	const struct stripe_bdev *b = be;

	return b->state == ISCSI_CONN_UP ? b->nr_blocks : 0;
}

static bool bdev_can_unmap(const void *be)
{
	return false;
}

static void bdev_get_stats(const void *be, struct iscsi_conn_stats *st)
{
	const struct stripe_bdev *b = be;

	*st = b->st;
	st->state = b->state;
}

static void bdev_report(const void *be, struct td_json *j)
{
	const struct stripe_bdev *b = be;
	const struct iscsi_conn_stats *st = &b->st;

	td_json_begin_object(j, "device");
	td_json_str(j, "path", b->path);
	td_json_str(j, "state", iscsi_conn_state_name(b->state));
	td_json_u64(j, "block_size_bytes", bdev_block_size(b));
	td_json_u64(j, "size_blocks", bdev_nr_blocks(b));
	td_json_u64(j, "queue_depth", b->depth);
	td_json_u64(j, "reads", st->reads);
	td_json_u64(j, "writes", st->writes);
	td_json_u64(j, "syncs", st->syncs);
	td_json_u64(j, "write_zeroes", st->write_zeroes);
	td_json_u64(j, "read_bytes", st->read_bytes);
	td_json_u64(j, "write_bytes", st->write_bytes);
	td_json_u64(j, "errors", st->errors);
	td_json_u64(j, "reservation_conflicts", st->reservation_conflicts);
	td_json_u64(j, "in_flight", st->in_flight);
	td_json_u64(j, "queued", st->queued);
	td_json_u64(j, "max_in_flight", st->max_in_flight);
	td_json_u64(j, "latency_sum_us", st->latency_sum_us);
	td_json_u64(j, "latency_max_us", st->latency_max_us);
	td_json_str(j, "last_error", b->error);
	td_json_end_object(j);
}

const struct stripe_backend_ops stripe_backend_device = {
	.kind = "device",
	.submit = bdev_submit,
	.state = bdev_state,
	.block_size = bdev_block_size,
	.nr_blocks = bdev_nr_blocks,
	.can_unmap = bdev_can_unmap,
	.get_stats = bdev_get_stats,
	.report = bdev_report,
	.destroy = bdev_destroy,
};
