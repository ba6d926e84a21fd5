/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-pr.c - PERSISTENT RESERVE IN/OUT on an iscsi_conn (contract in
 * iscsi-pr.h): each call is an ISCSI_CMD_PR_IN/OUT command that
 * iscsi-cmd.c queues, issues (iscsi_pr_new_task) and finishes
 * (iscsi_pr_answer) like any other.  PR IN data is parsed here from the
 * raw bytes, each length checked against what arrived.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "drivers/stripe/iscsi/iscsi-int.h"
#include "drivers/stripe/iscsi/iscsi-pr.h"

#define FNV64_OFFSET_BASIS 0xcbf29ce484222325ull
#define FNV64_PRIME	   0x100000001b3ull
/* PR IN parameter data: the header (PRgeneration, ADDITIONAL LENGTH)... */
#define PR_IN_HEADER_BYTES 8
/* ...and READ RESERVATION's descriptor (key, obsolete, scope/type). */
#define PR_IN_RESERVATION_BYTES 24
#define PR_IN_KEYS_BYTES	(PR_IN_HEADER_BYTES + 8 * ISCSI_PR_MAX_KEYS)

uint64_t iscsi_conn_pr_key(const char *host_id)
{
	uint64_t h = FNV64_OFFSET_BASIS;

	if (!host_id || !*host_id)
		return 0;
	for (const unsigned char *p = (const unsigned char *)host_id; *p; p++) {
		h ^= *p;
		h *= FNV64_PRIME;
	}
	return h ? h : 1;
}

const char *iscsi_pr_action_name(enum iscsi_pr_action a)
{
	switch (a) {
	case ISCSI_PR_REGISTER:
		return "register";
	case ISCSI_PR_UNREGISTER:
		return "unregister";
	case ISCSI_PR_RESERVE:
		return "reserve";
	case ISCSI_PR_PREEMPT_ABORT:
		return "preempt-and-abort";
	case ISCSI_PR_READ_KEYS:
		return "read-keys";
	case ISCSI_PR_READ_RESERVATION:
		return "read-reservation";
	}
	return "unknown";
}

bool iscsi_pr_has_key(const struct iscsi_pr_cmd *pr, uint64_t key)
{
	for (uint32_t i = 0; i < pr->nr_kept; i++)
		if (pr->keys[i] == key)
			return true;
	return false;
}

static struct iscsi_pr_cmd *pr_of(const struct iscsi_cmd *cmd)
{
	return cmd->pr;
}

static bool pr_is_in(const struct iscsi_pr_cmd *pr)
{
	return pr->verifying || pr->action == ISCSI_PR_READ_KEYS ||
	       pr->action == ISCSI_PR_READ_RESERVATION;
}

/* --- issue ----------------------------------------------------------- */

int iscsi_pr_check(const struct iscsi_cmd *cmd)
{
	const struct iscsi_pr_cmd *pr = pr_of(cmd);

	/* Only our own calls submit these (iscsi-conn.h). */
	if (!pr || &pr->cmd != cmd || pr->action > ISCSI_PR_READ_RESERVATION)
		return -EINVAL;
	return 0;
}

static struct scsi_task *
pr_out_task(struct iscsi_conn *c, struct iscsi_pr_cmd *pr, iscsi_command_cb cb)
{
	struct scsi_persistent_reserve_out_basic p = {0};
	int sa = SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY;
	int type = 0;

	switch (pr->action) {
	case ISCSI_PR_REGISTER:
		p.service_action_reservation_key = pr->key;
		break;
	case ISCSI_PR_UNREGISTER:
		break; /* service key 0: unregister, or nothing */
	case ISCSI_PR_RESERVE:
		sa = SCSI_PERSISTENT_RESERVE_RESERVE;
		p.reservation_key = pr->key;
		type = ISCSI_PR_TYPE_WERO;
		break;
	default: /* ISCSI_PR_PREEMPT_ABORT */
		sa = c->no_preempt_abort
			     ? SCSI_PERSISTENT_RESERVE_PREEMPT
			     : SCSI_PERSISTENT_RESERVE_PREEMPT_AND_ABORT;
		pr->plain_preempt = c->no_preempt_abort;
		p.reservation_key = pr->key;
		p.service_action_reservation_key = pr->victim;
		type = ISCSI_PR_TYPE_WERO;
		break;
	}
	/* libiscsi copies p into the task's parameter list. */
	return iscsi_persistent_reserve_out_task(
		c->ctx, c->lun, sa, SCSI_PERSISTENT_RESERVE_SCOPE_LU, type, &p,
		cb, &pr->cmd);
}

struct scsi_task *iscsi_pr_new_task(struct iscsi_conn *c, struct iscsi_cmd *cmd,
				    iscsi_command_cb cb)
{
	struct iscsi_pr_cmd *pr = pr_of(cmd);

	if (pr->verifying || pr->action == ISCSI_PR_READ_KEYS)
		return iscsi_persistent_reserve_in_task(
			c->ctx, c->lun, SCSI_PERSISTENT_RESERVE_READ_KEYS,
			PR_IN_KEYS_BYTES, cb, cmd);
	if (pr->action == ISCSI_PR_READ_RESERVATION)
		return iscsi_persistent_reserve_in_task(
			c->ctx, c->lun,
			SCSI_PERSISTENT_RESERVE_READ_RESERVATION,
			PR_IN_RESERVATION_BYTES, cb, cmd);
	return pr_out_task(c, pr, cb);
}

/* --- answers ------------------------------------------------------------- */

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const unsigned char *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* READ KEYS' parameter data: 0 or -EIO (too short to hold its header). */
static int pr_take_keys(struct iscsi_pr_cmd *pr, const unsigned char *d,
			int size)
{
	uint32_t len, n;

	if (!d || size < PR_IN_HEADER_BYTES)
		return -EIO;
	pr->generation = get_be32(d);
	len = get_be32(d + 4);
	pr->nr_keys = len / 8;
	n = (uint32_t)(size - PR_IN_HEADER_BYTES) / 8;
	n = n < pr->nr_keys ? n : pr->nr_keys;
	pr->nr_kept = n < ISCSI_PR_MAX_KEYS ? n : ISCSI_PR_MAX_KEYS;
	for (uint32_t i = 0; i < pr->nr_kept; i++)
		pr->keys[i] = get_be64(d + PR_IN_HEADER_BYTES + 8 * i);
	return 0;
}

/* READ RESERVATION's: 0 or -EIO. */
static int pr_take_reservation(struct iscsi_pr_cmd *pr, const unsigned char *d,
			       int size)
{
	if (!d || size < PR_IN_HEADER_BYTES)
		return -EIO;
	pr->generation = get_be32(d);
	pr->reserved = get_be32(d + 4) >= 16;
	pr->holder_key = 0;
	pr->type = 0;
	if (!pr->reserved)
		return 0;
	if (size < PR_IN_RESERVATION_BYTES)
		return -EIO;
	pr->holder_key = get_be64(d + 8);
	pr->type = d[21] & 0x0f;
	return 0;
}

/* The READ KEYS that follows a PREEMPT AND ABORT refused: decide. */
static int pr_verify_preempt(struct iscsi_conn *c, struct iscsi_pr_cmd *pr)
{
	bool ours = iscsi_pr_has_key(pr, pr->key);
	bool victim =
		iscsi_pr_has_key(pr, pr->victim) || pr->nr_kept < pr->nr_keys;

	pr->verifying = false;
	if (ours && !victim) {
		conn_info(c,
			  "%s lun %u: key 0x%016llx was not registered any "
			  "more: preempted already",
			  c->portal, c->lun, (unsigned long long)pr->victim);
		pr->already_done = true;
		return 0;
	}
	conn_err(c,
		 "%s lun %u: preempt-and-abort of key 0x%016llx refused: "
		 "reservation conflict (our key 0x%016llx %s)",
		 c->portal, c->lun, (unsigned long long)pr->victim,
		 (unsigned long long)pr->key,
		 ours ? "registered, the victim's too" : "not registered");
	return -EACCES;
}

bool iscsi_pr_answer(struct iscsi_conn *c, struct iscsi_cmd *cmd,
		     struct scsi_task *task, int *err)
{
	struct iscsi_pr_cmd *pr = pr_of(cmd);

	if (*err == -EOPNOTSUPP && pr->action == ISCSI_PR_PREEMPT_ABORT &&
	    !pr->verifying && !c->no_preempt_abort) {
		conn_info(c,
			  "%s lun %u: PREEMPT AND ABORT refused: using "
			  "PREEMPT (the victim's commands already in the "
			  "LUN's task set are not aborted)",
			  c->portal, c->lun);
		c->no_preempt_abort = true;
		*err = 0;
		return true;
	}
	if (*err == -EOPNOTSUPP)
		return false;
	if (*err == -EACCES) {
		if (pr->action == ISCSI_PR_PREEMPT_ABORT && !pr->verifying) {
			/* A reissue after a lost session, or a host that
			 * preempted the victim first, both land here. */
			pr->verifying = true;
			*err = 0;
			return true;
		}
		conn_err(c, "%s lun %u: %s: reservation conflict", c->portal,
			 c->lun, iscsi_pr_action_name(pr->action));
		return false;
	}
	if (!pr_is_in(pr))
		return false;
	if (pr->action == ISCSI_PR_READ_RESERVATION)
		*err = pr_take_reservation(pr, task->datain.data,
					   task->datain.size);
	else
		*err = pr_take_keys(pr, task->datain.data, task->datain.size);
	if (*err) {
		conn_err(c,
			 "%s lun %u: PERSISTENT RESERVE IN: %d bytes, too "
			 "short",
			 c->portal, c->lun, task->datain.size);
		return false;
	}
	if (pr->verifying)
		*err = pr_verify_preempt(c, pr);
	return false;
}

/* --- the calls ------------------------------------------------------------ */

static void pr_done(struct iscsi_cmd *cmd, int err)
{
	struct iscsi_pr_cmd *pr = pr_of(cmd);

	pr->done(pr, err, pr->opaque);
}

static int pr_submit(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
		     enum iscsi_pr_action action, uint64_t key, uint64_t victim,
		     iscsi_pr_done_fn done, void *opaque)
{
	bool out = action != ISCSI_PR_READ_KEYS &&
		   action != ISCSI_PR_READ_RESERVATION;
	bool admission;

	if (!c || !pr || !done)
		return -EINVAL;
	admission = pr->admission;
	memset(pr, 0, sizeof(*pr));
	pr->admission = admission;
	pr->cmd.admission = admission;
	pr->action = action;
	pr->key = key;
	pr->victim = victim;
	pr->done = done;
	pr->opaque = opaque;
	pr->cmd.op = out ? ISCSI_CMD_PR_OUT : ISCSI_CMD_PR_IN;
	pr->cmd.pr = pr;
	pr->cmd.done = pr_done;
	iscsi_conn_submit(c, &pr->cmd);
	return 0;
}

int iscsi_conn_pr_register(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			   uint64_t key, iscsi_pr_done_fn done, void *opaque)
{
	if (!key)
		return -EINVAL;
	return pr_submit(c, pr, ISCSI_PR_REGISTER, key, 0, done, opaque);
}

int iscsi_conn_pr_unregister(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			     iscsi_pr_done_fn done, void *opaque)
{
	return pr_submit(c, pr, ISCSI_PR_UNREGISTER, 0, 0, done, opaque);
}

int iscsi_conn_pr_reserve(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			  uint64_t key, iscsi_pr_done_fn done, void *opaque)
{
	if (!key)
		return -EINVAL;
	return pr_submit(c, pr, ISCSI_PR_RESERVE, key, 0, done, opaque);
}

int iscsi_conn_pr_preempt_abort(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
				uint64_t key, uint64_t victim,
				iscsi_pr_done_fn done, void *opaque)
{
	/* Preempting our own key would fence ourselves. */
	if (!key || !victim || key == victim)
		return -EINVAL;
	return pr_submit(c, pr, ISCSI_PR_PREEMPT_ABORT, key, victim, done,
			 opaque);
}

int iscsi_conn_pr_read_keys(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			    iscsi_pr_done_fn done, void *opaque)
{
	return pr_submit(c, pr, ISCSI_PR_READ_KEYS, 0, 0, done, opaque);
}

int iscsi_conn_pr_read_reservation(struct iscsi_conn *c,
				   struct iscsi_pr_cmd *pr,
				   iscsi_pr_done_fn done, void *opaque)
{
	return pr_submit(c, pr, ISCSI_PR_READ_RESERVATION, 0, 0, done, opaque);
}
