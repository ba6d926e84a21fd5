/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-cmd.c - the command half of an iSCSI connection: submission, the
 * FIFO and the queue-depth bound, checks, the libiscsi task of each op,
 * status and sense to errno, retries, deadlines and the deferred
 * completions.  The session is in iscsi-conn.c; the contract in
 * iscsi-conn.h.
 *
 * A command is in exactly one place (cmd->state): c->waiting (FIFO, with
 * commands handed back by a lost session first), c->in_flight (a libiscsi
 * task exists), or c->done (result set, its done callback deferred).
 * From submission to completion it is also in c->by_age: every command
 * gets the same timeout, so that list is in deadline order and the
 * deadline timer only ever looks at its head.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "drivers/stripe/iscsi/iscsi-int.h"

/* DATA PROTECT: SPACE ALLOCATION FAILED WRITE PROTECT (ASC 27h ASCQ 07h),
 * which libiscsi does not name. */
#define SCSI_SENSE_ASCQ_SPACE_ALLOCATION_FAILED 0x2707

int iscsi_conn_status_errno(int status, int sense_key, int ascq, bool *retry)
{
	*retry = false;
	switch (status) {
	case SCSI_STATUS_GOOD:
	case SCSI_STATUS_CONDITION_MET:
		return 0;
	case SCSI_STATUS_RESERVATION_CONFLICT:
		/* Fenced: a persistent reservation keeps this session out
		 * (iscsi-pr.h).  Retrying or reconnecting cannot help. */
		return -EACCES;
	case SCSI_STATUS_BUSY:
	case SCSI_STATUS_TASK_SET_FULL:
		*retry = true;
		return -EAGAIN;
	case SCSI_STATUS_CHECK_CONDITION:
		break;
	default:
		return -EIO;
	}
	switch (sense_key) {
	case SCSI_SENSE_RECOVERED_ERROR:
		return 0;
	case SCSI_SENSE_ILLEGAL_REQUEST:
		switch (ascq) {
		case SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE:
		case SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB:
		case SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST:
			return -EOPNOTSUPP;
		case SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE:
			/* The range was checked against READ CAPACITY before
			 * it was sent: the LUN shrank under us. */
			return -ENXIO;
		case SCSI_SENSE_ASCQ_LOGICAL_UNIT_NOT_SUPPORTED:
			return -ENODEV; /* the LUN is gone */
		default:
			return -EINVAL;
		}
	case SCSI_SENSE_DATA_PROTECTION:
		/* A thin pool out of space (SBC-3 4.7.3.6). */
		return ascq == SCSI_SENSE_ASCQ_SPACE_ALLOCATION_FAILED ? -ENOSPC
								       : -EROFS;
	case SCSI_SENSE_NOT_READY:
	case SCSI_SENSE_UNIT_ATTENTION:
	case SCSI_SENSE_COMMAND_ABORTED:
		*retry = true;
		return -EIO;
	default:
		return -EIO;
	}
}

/* --- completion ---------------------------------------------------------- */

static void cmd_account(struct iscsi_conn *c, struct iscsi_cmd *cmd, int err)
{
	struct iscsi_conn_stats *st = &c->stats;
	uint64_t bytes = (uint64_t)cmd->nr_blocks * c->block_size;
	uint64_t us = (td_now_ns() - cmd->start_ns) / 1000;

	if (err) {
		/* Not asked of a LUN without LBPRZ: not an error. */
		if (cmd->op != ISCSI_CMD_GET_LBA_STATUS || err != -EOPNOTSUPP)
			st->errors++;
		return;
	}
	switch (cmd->op) {
	case ISCSI_CMD_READ:
		st->reads++;
		st->read_bytes += bytes;
		break;
	case ISCSI_CMD_WRITE:
		st->writes++;
		st->write_bytes += bytes;
		break;
	case ISCSI_CMD_SYNC:
		st->syncs++;
		return;
	case ISCSI_CMD_UNMAP:
		st->unmaps++;
		return;
	case ISCSI_CMD_WRITE_ZEROES:
		st->write_zeroes++;
		return;
	case ISCSI_CMD_PR_IN:
	case ISCSI_CMD_PR_OUT:
		st->pr_commands++;
		return;
	case ISCSI_CMD_GET_LBA_STATUS:
		st->lba_status++;
		return;
	}
	st->latency_sum_us += us;
	if (us > st->latency_max_us)
		st->latency_max_us = us;
}

void iscsi_conn_complete(struct iscsi_conn *c, struct iscsi_cmd *cmd, int err)
{
	TAILQ_REMOVE(&c->by_age, cmd, age_link);
	cmd_account(c, cmd, err);
	cmd->result = err;
	cmd->state = ISCSI_CMD_DONE;
	TAILQ_INSERT_TAIL(&c->done, cmd, link);
	c->nr_done++;
	/* iscsi_conn_destroy runs the callbacks itself. */
	if (!c->destroyed)
		td_loop_defer(c->loop, &c->done_defer, iscsi_conn_dispatch_done,
			      c);
}

void iscsi_conn_dispatch_done(struct td_defer *d, void *opaque)
{
	struct iscsi_conn *c = opaque;
	/* Only those done before this call: a callback that submits to a
	 * DOWN connection must not keep this loop going forever. */
	uint32_t n = c->nr_done;
	struct iscsi_cmd *cmd;

	c->dispatching++;
	while (n-- && (cmd = TAILQ_FIRST(&c->done))) {
		TAILQ_REMOVE(&c->done, cmd, link);
		c->nr_done--;
		cmd->state = ISCSI_CMD_IDLE;
		cmd->done(cmd, cmd->result);
		if (c->destroyed)
			break;
	}
	c->dispatching--;
	if (c->destroyed) {
		/* iscsi_conn_destroy ran inside a callback and left c to us. */
		if (!c->dispatching)
			iscsi_conn_free(c);
		return;
	}
	if (!TAILQ_EMPTY(&c->done))
		td_loop_defer(c->loop, &c->done_defer, iscsi_conn_dispatch_done,
			      c);
}

void iscsi_conn_fail_waiting(struct iscsi_conn *c, int err)
{
	struct iscsi_cmd *cmd;

	while ((cmd = TAILQ_FIRST(&c->waiting))) {
		TAILQ_REMOVE(&c->waiting, cmd, link);
		c->nr_waiting--;
		iscsi_conn_complete(c, cmd, err);
	}
}

void iscsi_conn_requeue_front(struct iscsi_conn *c, struct iscsi_cmd_list *list)
{
	struct iscsi_cmd *cmd;

	while ((cmd = TAILQ_LAST(list, iscsi_cmd_list))) {
		TAILQ_REMOVE(list, cmd, link);
		cmd->state = ISCSI_CMD_WAITING;
		TAILQ_INSERT_HEAD(&c->waiting, cmd, link);
		c->nr_waiting++;
	}
}

static void cmd_requeue(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	cmd->state = ISCSI_CMD_WAITING;
	TAILQ_INSERT_HEAD(&c->waiting, cmd, link);
	c->nr_waiting++;
}

static void cmd_time_out(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	c->stats.timeouts++;
	iscsi_conn_complete(c, cmd, -ETIMEDOUT);
}

void iscsi_conn_cmd_lost(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	if (cmd->expired) {
		cmd_time_out(c, cmd);
		return;
	}
	cmd->reissued = true;
	cmd->state = ISCSI_CMD_WAITING;
	TAILQ_INSERT_TAIL(&c->lost, cmd, link);
}

/* --- deadlines and BUSY pauses ------------------------------------------ */

static void cmd_deadline_cb(struct td_timer *t, void *opaque)
{
	struct iscsi_conn *c = opaque;
	uint64_t now = td_now_ns();
	struct iscsi_cmd *cmd, *next;
	bool drop = false;

	for (cmd = TAILQ_FIRST(&c->by_age); cmd && cmd->deadline_ns <= now;
	     cmd = next) {
		next = TAILQ_NEXT(cmd, age_link);
		if (cmd->state == ISCSI_CMD_ISSUED) {
			/* Its answer may still come: only dropping the
			 * session makes sure it never lands (conn_drop_ctx
			 * completes it with -ETIMEDOUT). */
			cmd->expired = true;
			drop = true;
		} else if (cmd->state == ISCSI_CMD_WAITING) {
			TAILQ_REMOVE(&c->waiting, cmd, link);
			c->nr_waiting--;
			cmd_time_out(c, cmd);
		}
	}
	if (drop) {
		iscsi_conn_set_error(c, "a command had no answer within %u ms",
				     c->cmd_timeout_ms);
		iscsi_conn_lose_session(c, c->error);
	}
	iscsi_conn_arm_deadline(c);
	iscsi_conn_settle(c);
}

void iscsi_conn_arm_deadline(struct iscsi_conn *c)
{
	struct iscsi_cmd *head = TAILQ_FIRST(&c->by_age);
	uint64_t now = td_now_ns();

	if (!head) {
		td_loop_timer_cancel(&c->deadline_timer);
		return;
	}
	td_loop_timer_arm(c->loop, &c->deadline_timer,
			  head->deadline_ns > now
				  ? (head->deadline_ns - now + 999) / 1000
				  : 0,
			  cmd_deadline_cb, c);
}

static void cmd_busy_end_cb(struct td_timer *t, void *opaque)
{
	struct iscsi_conn *c = opaque;

	c->busy_paused = false;
	iscsi_conn_settle(c);
}

/* --- issuing ---------------------------------------------------------- */

/*
 * GET LBA STATUS is asked only of a LUN that says a deallocated block
 * reads as zeroes (LBPME and LBPRZ in READ CAPACITY(16)): without LBPRZ a
 * hole's content is not known, and reporting it as a hole could make a
 * backup skip data.
 */
static int cmd_check_lba_status(const struct iscsi_conn *c,
				const struct iscsi_cmd *cmd)
{
	const struct iscsi_lba_answer *a = cmd->lba_status;

	if (!a || !a->ext || a->room == 0 ||
	    a->room > ISCSI_CONN_MAX_LBA_EXTENTS || cmd->nr_blocks == 0 ||
	    cmd->lba >= c->nr_blocks ||
	    cmd->nr_blocks > c->nr_blocks - cmd->lba)
		return -EINVAL;
	if (!c->lbpme || !c->lbprz)
		return -EOPNOTSUPP;
	return 0;
}

/* The checks that need the block size; 0 or the errno to complete with. */
static int cmd_check(const struct iscsi_conn *c, const struct iscsi_cmd *cmd)
{
	uint64_t bytes = 0;

	if (cmd->op == ISCSI_CMD_PR_IN || cmd->op == ISCSI_CMD_PR_OUT)
		return iscsi_pr_check(cmd);
	if (cmd->op == ISCSI_CMD_SYNC)
		return 0;
	if (cmd->op == ISCSI_CMD_GET_LBA_STATUS)
		return cmd_check_lba_status(c, cmd);
	if (cmd->op > ISCSI_CMD_WRITE_ZEROES || cmd->nr_blocks == 0 ||
	    cmd->lba > c->nr_blocks || cmd->nr_blocks > c->nr_blocks - cmd->lba)
		return -EINVAL;
	if (cmd->op == ISCSI_CMD_UNMAP && !c->lbpu)
		return -EOPNOTSUPP;
	if (cmd->op != ISCSI_CMD_READ && cmd->op != ISCSI_CMD_WRITE)
		return 0;
	if (!cmd->iov || cmd->iovcnt < 1 || cmd->iovcnt > ISCSI_CONN_MAX_IOV)
		return -EINVAL;
	for (int i = 0; i < cmd->iovcnt; i++)
		bytes += cmd->iov[i].iov_len;
	if (bytes != (uint64_t)cmd->nr_blocks * c->block_size ||
	    bytes > UINT32_MAX)
		return -EINVAL;
	return 0;
}

static void cmd_task_cb(struct iscsi_context *ctx, int status, void *data,
			void *opaque);

static struct scsi_task *cmd_zeroes_task(struct iscsi_conn *c,
					 struct iscsi_cmd *cmd)
{
	uint32_t chunk = ISCSI_CONN_ZERO_CHUNK_BYTES / c->block_size;
	uint32_t n;

	if (cmd->step == ISCSI_STEP_MAIN && c->no_write_same)
		cmd->step = ISCSI_STEP_ZERO_WRITE;
	switch (cmd->step) {
	case ISCSI_STEP_MAIN:
		return iscsi_writesame16_task(
			c->ctx, c->lun, cmd->lba, c->zero_buf, c->block_size,
			cmd->nr_blocks, 0,
			c->lbpws && c->lbprz && !cmd->no_hole, 0, 0,
			cmd_task_cb, cmd);
	case ISCSI_STEP_ZERO_WRITE:
		n = cmd->nr_blocks - cmd->zeroed;
		n = n < chunk ? n : chunk;
		return iscsi_write16_task(c->ctx, c->lun,
					  cmd->lba + cmd->zeroed, c->zero_buf,
					  n * c->block_size, c->block_size, 0,
					  0, cmd->fua, 0, 0, cmd_task_cb, cmd);
	default:
		return iscsi_synchronizecache16_task(c->ctx, c->lun, cmd->lba,
						     cmd->nr_blocks, 0, 0,
						     cmd_task_cb, cmd);
	}
}

/* Blocks per piece of a READ/WRITE above the maximum (see the header). */
static uint32_t cmd_piece_limit(const struct iscsi_conn *c)
{
	uint32_t max = c->max_xfer_blocks, opt = c->opt_xfer_blocks;

	if (max && opt && opt <= max)
		max -= max % opt; /* whole optimal lengths */
	return max;
}

/* Drop the last cut bytes of the piece's entries. */
static void cmd_piece_trim(struct iscsi_cmd *cmd, uint64_t cut)
{
	while (cut && cmd->piece_iovcnt) {
		struct iovec *last = &cmd->piece_iov[cmd->piece_iovcnt - 1];

		if (last->iov_len > cut) {
			last->iov_len -= cut;
			return;
		}
		cut -= last->iov_len;
		cmd->piece_iovcnt--;
	}
}

/*
 * Build the next piece of a READ/WRITE: from block cmd->piece_done, at
 * most limit blocks and ISCSI_CONN_PIECE_IOV entries of cmd->iov, ending on
 * a block boundary.  Returns its blocks (0: the entries are too small for
 * one block in ISCSI_CONN_PIECE_IOV of them).
 */
static uint32_t cmd_piece(const struct iscsi_conn *c, struct iscsi_cmd *cmd,
			  uint32_t limit)
{
	uint32_t left = cmd->nr_blocks - cmd->piece_done;
	uint64_t skip = (uint64_t)cmd->piece_done * c->block_size;
	uint64_t want = (uint64_t)(left < limit ? left : limit) * c->block_size;
	uint64_t got = 0;
	int i = 0;

	while (i < cmd->iovcnt && skip >= cmd->iov[i].iov_len)
		skip -= cmd->iov[i++].iov_len;
	cmd->piece_iovcnt = 0;
	for (; i < cmd->iovcnt && got < want &&
	       cmd->piece_iovcnt < ISCSI_CONN_PIECE_IOV;
	     i++, skip = 0) {
		uint64_t len = cmd->iov[i].iov_len - skip;

		len = len < want - got ? len : want - got;
		cmd->piece_iov[cmd->piece_iovcnt].iov_base =
			(char *)cmd->iov[i].iov_base + skip;
		cmd->piece_iov[cmd->piece_iovcnt++].iov_len = (size_t)len;
		got += len;
	}
	cmd_piece_trim(cmd, got % c->block_size);
	cmd->piece_blocks = (uint32_t)(got / c->block_size);
	return cmd->piece_blocks;
}

static struct scsi_task *cmd_rw_task(struct iscsi_conn *c,
				     struct iscsi_cmd *cmd)
{
	/* struct scsi_iovec is struct iovec by libiscsi's promise. */
	struct scsi_iovec *iov = (struct scsi_iovec *)cmd->iov;
	uint32_t limit = cmd_piece_limit(c), blocks = cmd->nr_blocks;
	uint64_t lba = cmd->lba;
	int iovcnt = cmd->iovcnt;

	cmd->piece_blocks = 0;
	if (c->max_xfer_blocks && cmd->nr_blocks > c->max_xfer_blocks) {
		if (!(blocks = cmd_piece(c, cmd, limit))) {
			iscsi_conn_set_error(
				c,
				"cannot cut a command into pieces of "
				"%u blocks: its iovec entries are too "
				"small",
				limit);
			return NULL;
		}
		iov = (struct scsi_iovec *)cmd->piece_iov;
		iovcnt = cmd->piece_iovcnt;
		lba += cmd->piece_done;
	}
	if (cmd->op == ISCSI_CMD_READ)
		return iscsi_read16_iov_task(c->ctx, c->lun, lba,
					     blocks * c->block_size,
					     c->block_size, 0, 0, 0, 0, 0,
					     cmd_task_cb, cmd, iov, iovcnt);
	return iscsi_write16_iov_task(c->ctx, c->lun, lba, NULL,
				      blocks * c->block_size, c->block_size, 0,
				      0, cmd->fua, 0, 0, cmd_task_cb, cmd, iov,
				      iovcnt);
}

/* After a piece succeeded: true when the command has more. */
static bool cmd_piece_next(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	if (!cmd->piece_blocks)
		return false;
	cmd->piece_done += cmd->piece_blocks;
	cmd->piece_blocks = 0;
	if (cmd->piece_done < cmd->nr_blocks)
		return true;
	c->stats.splits++;
	return false;
}

static struct scsi_task *cmd_new_task(struct iscsi_conn *c,
				      struct iscsi_cmd *cmd)
{
	struct unmap_list range = {.lba = cmd->lba, .num = cmd->nr_blocks};

	switch (cmd->op) {
	case ISCSI_CMD_READ:
	case ISCSI_CMD_WRITE:
		return cmd_rw_task(c, cmd);
	case ISCSI_CMD_SYNC:
		return iscsi_synchronizecache16_task(c->ctx, c->lun, 0, 0, 0, 0,
						     cmd_task_cb, cmd);
	case ISCSI_CMD_UNMAP:
		return iscsi_unmap_task(c->ctx, c->lun, 0, 0, &range, 1,
					cmd_task_cb, cmd);
	case ISCSI_CMD_WRITE_ZEROES:
		return cmd_zeroes_task(c, cmd);
	case ISCSI_CMD_PR_IN:
	case ISCSI_CMD_PR_OUT:
		return iscsi_pr_new_task(c, cmd, cmd_task_cb);
	case ISCSI_CMD_GET_LBA_STATUS:
		/* 8 bytes of header, 16 per descriptor (SBC-3 5.6). */
		return iscsi_get_lba_status_task(c->ctx, c->lun, cmd->lba,
						 8 + 16 * cmd->lba_status->room,
						 cmd_task_cb, cmd);
	}
	return NULL;
}

/* The next command that may go out: while ADMITTING, admission ones only. */
static struct iscsi_cmd *cmd_next(struct iscsi_conn *c)
{
	struct iscsi_cmd *cmd;

	if (c->state == ISCSI_CONN_UP)
		return TAILQ_FIRST(&c->waiting);
	TAILQ_FOREACH(cmd, &c->waiting, link)
	if (cmd->admission)
		return cmd;
	return NULL;
}

void iscsi_conn_issue_waiting(struct iscsi_conn *c)
{
	struct iscsi_cmd *cmd;
	struct scsi_task *task;
	int err;

	while (iscsi_conn_has_session(c) && c->ctx && !c->busy_paused &&
	       !c->session_lost && c->nr_in_flight < c->queue_depth &&
	       (cmd = cmd_next(c))) {
		TAILQ_REMOVE(&c->waiting, cmd, link);
		c->nr_waiting--;
		err = cmd_check(c, cmd);
		if (err) {
			iscsi_conn_complete(c, cmd, err);
			continue;
		}
		task = cmd_new_task(c, cmd);
		if (!task) {
			conn_err(c, "cannot issue a command: %s",
				 iscsi_get_error(c->ctx));
			iscsi_conn_complete(c, cmd, -EIO);
			continue;
		}
		cmd->task = task;
		cmd->state = ISCSI_CMD_ISSUED;
		TAILQ_INSERT_TAIL(&c->in_flight, cmd, link);
		c->nr_in_flight++;
		if (c->nr_in_flight > c->stats.max_in_flight)
			c->stats.max_in_flight = c->nr_in_flight;
		if (cmd->reissued) {
			cmd->reissued = false;
			c->stats.reissued++;
		}
	}
}

/* --- answers (inside iscsi_service or iscsi_destroy_context) --------------- */

static bool cmd_moves_data(const struct iscsi_cmd *cmd)
{
	return cmd->op == ISCSI_CMD_READ || cmd->op == ISCSI_CMD_WRITE ||
	       cmd->step == ISCSI_STEP_ZERO_WRITE;
}

/*
 * Names for the log: libiscsi's, and ours for what it leaves unnamed (it
 * returns NULL for MEDIUM ERROR, the error of a failing disk).
 */
static const char *sense_key_name(int key)
{
	const char *s = scsi_sense_key_str(key);

	if (s)
		return s;
	switch (key) {
	case SCSI_SENSE_MEDIUM_ERROR:
		return "MEDIUM_ERROR";
	case SCSI_SENSE_HARDWARE_ERROR:
		return "HARDWARE_ERROR";
	default:
		return "sense key";
	}
}

static const char *sense_ascq_name(int ascq)
{
	const char *s = scsi_sense_ascq_str(ascq);

	if (s)
		return s;
	switch (ascq) {
	case 0x0c00:
		return "WRITE_ERROR";
	case 0x1100:
		return "UNRECOVERED_READ_ERROR";
	case SCSI_SENSE_ASCQ_SPACE_ALLOCATION_FAILED:
		return "SPACE_ALLOCATION_FAILED";
	default:
		return "ASC/ASCQ";
	}
}

/* 0, or the errno of a finished task; *retry as iscsi_conn_status_errno. */
static int cmd_task_result(struct iscsi_conn *c, struct iscsi_cmd *cmd,
			   int status, struct scsi_task *task, bool *retry)
{
	int err;

	*retry = false;
	if (status == SCSI_STATUS_ERROR || status == SCSI_STATUS_TIMEOUT) {
		conn_err(c, "lba %llu: %s", (unsigned long long)cmd->lba,
			 iscsi_get_error(c->ctx));
		return -EIO;
	}
	err = iscsi_conn_status_errno(status, task->sense.key, task->sense.ascq,
				      retry);
	if (status == SCSI_STATUS_RESERVATION_CONFLICT && !cmd->pr) {
		c->stats.reservation_conflicts++;
		conn_err(c,
			 "op %d lba %llu: reservation conflict: "
			 "this host was fenced from LUN %s %s lun %u "
			 "(its key was preempted by a host that took "
			 "a disk over); " ISCSI_CONN_READMIT_HINT,
			 cmd->op, (unsigned long long)cmd->lba, c->portal,
			 c->target, c->lun);
	}
	if (status == SCSI_STATUS_CHECK_CONDITION && !*retry &&
	    err != -EOPNOTSUPP)
		conn_err(c, "op %d lba %llu: %s, %s (0x%04x): %s", cmd->op,
			 (unsigned long long)cmd->lba,
			 sense_key_name(task->sense.key),
			 sense_ascq_name(task->sense.ascq), task->sense.ascq,
			 strerror(-err));
	/* Only user data counts: tgt reports the whole UNMAP parameter list
	 * as residual after doing the unmap. */
	if (!err && task->residual_status != SCSI_RESIDUAL_NO_RESIDUAL &&
	    task->residual && cmd_moves_data(cmd)) {
		conn_err(c, "op %d lba %llu: short transfer, %zu bytes missing",
			 cmd->op, (unsigned long long)cmd->lba, task->residual);
		return -EIO;
	}
	return err;
}

/*
 * GET LBA STATUS's parameter data into cmd->lba_status: the descriptors
 * that start at cmd->lba and follow one another, clipped to the range
 * asked.  The target's answer is input from the network: a descriptor
 * that does not continue the previous one ends the answer, and an answer
 * with none that does is -EIO.
 */
static int cmd_lba_status_answer(struct iscsi_conn *c, struct iscsi_cmd *cmd,
				 struct scsi_task *task)
{
	struct iscsi_lba_answer *a = cmd->lba_status;
	struct scsi_get_lba_status *gls = scsi_datain_unmarshall(task);
	uint64_t next = cmd->lba, end = cmd->lba + cmd->nr_blocks;

	a->nr = 0;
	for (uint32_t i = 0; gls && i < gls->num_descriptors; i++) {
		const struct scsi_lba_status_descriptor *d =
			&gls->descriptors[i];
		uint64_t d_end = d->lba + d->num_blocks;

		if (a->nr == a->room || next == end || d->num_blocks == 0 ||
		    d->lba > next || d_end <= next)
			break;
		if (d_end > end)
			d_end = end;
		a->ext[a->nr].lba = next;
		a->ext[a->nr].nr_blocks = (uint32_t)(d_end - next);
		a->ext[a->nr].hole =
			d->provisioning == SCSI_PROVISIONING_TYPE_DEALLOCATED ||
			d->provisioning == SCSI_PROVISIONING_TYPE_ANCHORED;
		a->nr++;
		next = d_end;
	}
	if (a->nr)
		return 0;
	conn_err(c,
		 "lba %llu: GET LBA STATUS answer without a descriptor "
		 "for it",
		 (unsigned long long)cmd->lba);
	return -EIO;
}

/* What comes after a successful step of WRITE_ZEROES; true if more. */
static bool cmd_zeroes_next(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	uint32_t chunk = ISCSI_CONN_ZERO_CHUNK_BYTES / c->block_size;

	if (cmd->step == ISCSI_STEP_ZERO_WRITE) {
		uint32_t left = cmd->nr_blocks - cmd->zeroed;

		cmd->zeroed += left < chunk ? left : chunk;
		return cmd->zeroed < cmd->nr_blocks;
	}
	if (cmd->step == ISCSI_STEP_MAIN && cmd->fua) {
		/* WRITE SAME has no FUA bit: sync the range after it. */
		cmd->step = ISCSI_STEP_SYNC;
		return true;
	}
	return false;
}

/*
 * A UNIT ATTENTION answered cmd: it was not run.  Log the events that
 * matter to fencing; true when cmd may be retried (its own budget, see
 * ISCSI_CMD_MAX_UA_RETRIES).
 */
static bool cmd_unit_attention(struct iscsi_conn *c, struct iscsi_cmd *cmd,
			       int ascq)
{
	c->stats.unit_attentions++;
	if (ascq == SCSI_SENSE_ASCQ_REGISTRATIONS_PREEMPTED)
		conn_warn(c,
			  "%s lun %u: UNIT ATTENTION: this host's "
			  "registration was preempted (fenced by another "
			  "host); its writes will be refused",
			  c->portal, c->lun);
	else if (ascq == SCSI_SENSE_ASCQ_RESERVATIONS_RELEASED ||
		 ascq == SCSI_SENSE_ASCQ_RESERVATIONS_PREEMPTED)
		conn_info(c, "%s lun %u: UNIT ATTENTION: reservations %s",
			  c->portal, c->lun,
			  ascq == SCSI_SENSE_ASCQ_RESERVATIONS_RELEASED
				  ? "released"
				  : "preempted");
	else
		conn_dbg(c, "UNIT ATTENTION 0x%04x", ascq);
	return cmd->unit_attentions++ < ISCSI_CMD_MAX_UA_RETRIES;
}

static void cmd_task_cb(struct iscsi_context *ctx, int status, void *data,
			void *opaque)
{
	struct iscsi_cmd *cmd = opaque;
	struct iscsi_conn *c = cmd->conn;
	struct scsi_task *task = data;
	bool retry, more = false;
	int err;

	TAILQ_REMOVE(&c->in_flight, cmd, link);
	c->nr_in_flight--;
	cmd->task = NULL;
	if (status == SCSI_STATUS_CANCELLED) {
		/* The session went away under it (see iscsi-conn.c). */
		scsi_free_scsi_task(data);
		if (!c->dropping)
			c->session_lost = true;
		iscsi_conn_cmd_lost(c, cmd);
		return;
	}
	err = cmd_task_result(c, cmd, status, task, &retry);
	if (status == SCSI_STATUS_CHECK_CONDITION &&
	    task->sense.key == SCSI_SENSE_UNIT_ATTENTION)
		retry = cmd_unit_attention(c, cmd, task->sense.ascq);
	else if (retry && status == SCSI_STATUS_CHECK_CONDITION)
		retry = cmd->retries++ < ISCSI_CMD_MAX_RETRIES;
	if (cmd->pr && !cmd->expired && !retry &&
	    (!err || err == -EACCES || err == -EOPNOTSUPP))
		more = iscsi_pr_answer(c, cmd, task, &err);
	if (cmd->op == ISCSI_CMD_GET_LBA_STATUS && !err && !retry &&
	    !cmd->expired && status == SCSI_STATUS_GOOD)
		err = cmd_lba_status_answer(c, cmd, task);
	scsi_free_scsi_task(data);
	if (cmd->expired) {
		cmd_time_out(c, cmd);
	} else if (status == SCSI_STATUS_BUSY ||
		   status == SCSI_STATUS_TASK_SET_FULL) {
		/* The target's queue is full: pause the connection briefly;
		 * the deadline bounds the retries. */
		cmd_requeue(c, cmd);
		c->busy_paused = true;
		td_loop_timer_arm(c->loop, &c->busy_timer,
				  ISCSI_CONN_BUSY_PAUSE_MS * 1000ull,
				  cmd_busy_end_cb, c);
	} else if (retry || more) {
		cmd_requeue(c, cmd);
	} else if (err == -EOPNOTSUPP && cmd->op == ISCSI_CMD_WRITE_ZEROES &&
		   cmd->step == ISCSI_STEP_MAIN) {
		conn_info(c, "WRITE SAME refused: writing zeroes instead");
		c->no_write_same = true;
		cmd_requeue(c, cmd);
	} else if (!err && cmd->op == ISCSI_CMD_WRITE_ZEROES &&
		   cmd_zeroes_next(c, cmd)) {
		cmd_requeue(c, cmd);
	} else if (!err && cmd_piece_next(c, cmd)) {
		cmd_requeue(c, cmd); /* the next piece, before anything else */
	} else {
		iscsi_conn_complete(c, cmd, err);
	}
}

/* --- submission -------------------------------------------------------- */

void iscsi_conn_submit(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	uint64_t now = td_now_ns();

	cmd->conn = c;
	cmd->task = NULL;
	cmd->start_ns = now;
	cmd->deadline_ns = now + c->cmd_timeout_ms * 1000000ull;
	cmd->retries = 0;
	cmd->unit_attentions = 0;
	cmd->zeroed = 0;
	cmd->piece_done = cmd->piece_blocks = 0;
	cmd->step = ISCSI_STEP_MAIN;
	cmd->result = 0;
	cmd->expired = false;
	cmd->reissued = false;
	TAILQ_INSERT_TAIL(&c->by_age, cmd, age_link);
	if (c->state == ISCSI_CONN_DOWN || c->state == ISCSI_CONN_FENCED ||
	    c->destroyed) {
		/* Completed from the loop (or by the running destroy). */
		if (c->state == ISCSI_CONN_FENCED && !c->destroyed)
			c->stats.reservation_conflicts++;
		iscsi_conn_complete(c, cmd,
				    c->destroyed		    ? -ECANCELED
				    : c->state == ISCSI_CONN_FENCED ? -EACCES
								    : -EIO);
		return;
	}
	cmd->state = ISCSI_CMD_WAITING;
	TAILQ_INSERT_TAIL(&c->waiting, cmd, link);
	c->nr_waiting++;
	if (!td_timer_armed(&c->deadline_timer))
		iscsi_conn_arm_deadline(c);
	iscsi_conn_settle(c);
}
