/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mock-iscsi-conn.c - see mock-iscsi-conn.h.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/stripe/iscsi/iscsi-pr.h"
#include "tests/unit/drivers/stripe/mock-iscsi-conn.h"

#define MOCK_DEFAULT_BLOCK 512u
#define MOCK_DEFAULT_BYTES (8u << 20)

TAILQ_HEAD(mock_cmd_list, iscsi_cmd);

struct iscsi_conn {
	unsigned int index;
	struct td_loop *loop;
	enum iscsi_conn_state state;
	uint32_t block_size;
	uint64_t nr_blocks;
	bool can_unmap;
	unsigned char *data;
	int fail_err;
	uint32_t fail_ops;
	unsigned int fail_count;
	bool hold;
	struct mock_cmd_list ready;	 /* complete at the next defer */
	struct mock_cmd_list held;	 /* until mock_iscsi_release */
	struct mock_cmd_list connecting; /* until UP or DOWN */
	struct td_defer defer;
	struct iscsi_conn_stats st;
	/* admission (cfg.admit) and the LUN's persistent reservations */
	void (*admit)(struct iscsi_conn *c, void *opaque);
	void *admit_opaque;
	struct td_defer admit_defer;
	struct mock_pr lun;
	bool ours; /* this session is registered (with key ours_key) */
	uint64_t ours_key;
	struct iscsi_pr_cmd *pr_pending[4];
	int pr_err[4];
	unsigned int nr_pr;
	struct td_defer pr_defer;
};

struct mock_iscsi mock_iscsi;

static void mock_pr_run(struct td_defer *d, void *opaque);
static void admit_run(struct td_defer *d, void *opaque);

void mock_iscsi_reset(void)
{
	memset(&mock_iscsi, 0, sizeof(mock_iscsi));
	for (unsigned int i = 0; i < MOCK_ISCSI_MAX_CONNS; i++)
		mock_iscsi.setup[i].state = ISCSI_CONN_UP;
}

struct iscsi_conn *mock_iscsi_conn(unsigned int i)
{
	return i < MOCK_ISCSI_MAX_CONNS ? mock_iscsi.conns[i] : NULL;
}

unsigned char *mock_iscsi_data(unsigned int i)
{
	return mock_iscsi.conns[i]->data;
}

int iscsi_conn_create(struct td_loop *loop, const struct iscsi_conn_cfg *cfg,
		      struct iscsi_conn **out)
{
	unsigned int i = mock_iscsi.nr_created;
	const struct mock_iscsi_setup *s = &mock_iscsi.setup[i];
	struct iscsi_conn *c;

	if (!cfg->portal || !cfg->target || i >= MOCK_ISCSI_MAX_CONNS)
		return -EINVAL;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	c->index = i;
	c->loop = loop;
	c->state = s->state;
	c->block_size = s->block_size ? s->block_size : MOCK_DEFAULT_BLOCK;
	c->nr_blocks = s->nr_blocks ? s->nr_blocks
				    : MOCK_DEFAULT_BYTES / c->block_size;
	c->can_unmap = !s->cannot_unmap;
	c->admit = cfg->admit;
	c->admit_opaque = cfg->admit_opaque;
	if (c->admit && c->state == ISCSI_CONN_UP)
		c->state = ISCSI_CONN_ADMITTING;
	TAILQ_INIT(&c->ready);
	TAILQ_INIT(&c->held);
	TAILQ_INIT(&c->connecting);
	if (!(c->data = calloc(c->nr_blocks, c->block_size))) {
		free(c);
		return -ENOMEM;
	}
	mock_iscsi.conns[i] = c;
	mock_iscsi.nr_created++;
	if (c->state == ISCSI_CONN_ADMITTING)
		td_loop_defer(loop, &c->admit_defer, admit_run, c);
	*out = c;
	return 0;
}

static void complete_list(struct mock_cmd_list *list, int err)
{
	struct iscsi_cmd *cmd;

	while ((cmd = TAILQ_FIRST(list))) {
		TAILQ_REMOVE(list, cmd, link);
		cmd->done(cmd, err);
	}
}

void iscsi_conn_destroy(struct iscsi_conn *c)
{
	if (!c)
		return;
	td_loop_defer_cancel(c->loop, &c->defer);
	td_loop_defer_cancel(c->loop, &c->admit_defer);
	mock_pr_run(&c->pr_defer, c); /* done exactly once */
	td_loop_defer_cancel(c->loop, &c->pr_defer);
	complete_list(&c->ready, -ECANCELED);
	complete_list(&c->held, -ECANCELED);
	complete_list(&c->connecting, -ECANCELED);
	mock_iscsi.conns[c->index] = NULL;
	mock_iscsi.nr_destroyed++;
	free(c->data);
	free(c);
}

/* Copy between the LUN and an iovec list; false when out of range. */
static bool move_data(struct iscsi_conn *c, struct iscsi_cmd *cmd, bool write)
{
	uint64_t off = cmd->lba * c->block_size;
	uint64_t len = (uint64_t)cmd->nr_blocks * c->block_size, done = 0;

	if (cmd->lba + cmd->nr_blocks > c->nr_blocks)
		return false;
	for (int i = 0; i < cmd->iovcnt && done < len; i++) {
		size_t n = cmd->iov[i].iov_len;

		if (write)
			memcpy(c->data + off + done, cmd->iov[i].iov_base, n);
		else
			memcpy(cmd->iov[i].iov_base, c->data + off + done, n);
		done += n;
	}
	return done == len;
}

static int scripted_error(struct iscsi_conn *c, const struct iscsi_cmd *cmd)
{
	/* The allocation scan's command fails only when named. */
	if (cmd->op == ISCSI_CMD_GET_LBA_STATUS && c->fail_err &&
	    !(c->fail_ops & MOCK_ISCSI_OP(cmd->op)))
		return 0;
	if (!c->fail_err ||
	    (c->fail_ops && !(c->fail_ops & MOCK_ISCSI_OP(cmd->op))))
		return 0;
	if (c->fail_count && --c->fail_count == 0) {
		int err = c->fail_err;

		c->fail_err = 0;
		return err;
	}
	return c->fail_err;
}

/* GET LBA STATUS: a block of zeroes counts as deallocated (LBPRZ). */
static bool block_is_zero(const struct iscsi_conn *c, uint64_t lba)
{
	const unsigned char *p = c->data + lba * c->block_size;

	for (uint32_t i = 0; i < c->block_size; i++)
		if (p[i])
			return false;
	return true;
}

static int mock_lba_status(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	struct iscsi_lba_answer *a = cmd->lba_status;
	uint64_t lba = cmd->lba, end = cmd->lba + cmd->nr_blocks;

	c->st.lba_status++;
	if (!a || !a->room || !cmd->nr_blocks || end > c->nr_blocks)
		return -EINVAL;
	a->nr = 0;
	while (lba < end && a->nr < a->room) {
		bool hole = block_is_zero(c, lba);
		uint64_t from = lba;

		while (lba < end && block_is_zero(c, lba) == hole)
			lba++;
		a->ext[a->nr].lba = from;
		a->ext[a->nr].nr_blocks = (uint32_t)(lba - from);
		a->ext[a->nr].hole = hole;
		a->nr++;
	}
	return 0;
}

static int perform(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	uint64_t off = cmd->lba * c->block_size;
	uint64_t len = (uint64_t)cmd->nr_blocks * c->block_size;
	int err = scripted_error(c, cmd);

	if (err)
		return err;
	switch (cmd->op) {
	case ISCSI_CMD_READ:
		c->st.reads++;
		return move_data(c, cmd, false) ? 0 : -EINVAL;
	case ISCSI_CMD_WRITE:
		c->st.writes++;
		return move_data(c, cmd, true) ? 0 : -EINVAL;
	case ISCSI_CMD_SYNC:
		c->st.syncs++;
		return 0;
	case ISCSI_CMD_UNMAP:
		if (!c->can_unmap)
			return -EOPNOTSUPP;
		/* fall through */
	case ISCSI_CMD_WRITE_ZEROES:
		c->st.unmaps++;
		if (cmd->lba + cmd->nr_blocks > c->nr_blocks)
			return -EINVAL;
		memset(c->data + off, 0, len);
		return 0;
	case ISCSI_CMD_PR_IN:
	case ISCSI_CMD_PR_OUT:
		return -EOPNOTSUPP; /* the stripe driver does not use them yet */
	case ISCSI_CMD_GET_LBA_STATUS:
		return mock_lba_status(c, cmd);
	}
	return -EIO;
}

static void finish(struct iscsi_conn *c, struct iscsi_cmd *cmd, int err)
{
	if (!err)
		err = perform(c, cmd);
	if (err)
		c->st.errors++;
	c->st.in_flight--;
	cmd->done(cmd, err);
}

static void run_ready(struct td_defer *d, void *opaque)
{
	struct iscsi_conn *c = opaque;
	struct mock_cmd_list list = TAILQ_HEAD_INITIALIZER(list);
	struct iscsi_cmd *cmd;

	TAILQ_CONCAT(&list, &c->ready, link);
	while ((cmd = TAILQ_FIRST(&list))) {
		TAILQ_REMOVE(&list, cmd, link);
		finish(c, cmd, cmd->result);
	}
}

static void make_ready(struct iscsi_conn *c, struct iscsi_cmd *cmd, int err)
{
	cmd->result = err;
	TAILQ_INSERT_TAIL(&c->ready, cmd, link);
	td_loop_defer(c->loop, &c->defer, run_ready, c);
}

/* A write-like command refused: a WERO reservation, this session out. */
static bool pr_conflict(const struct iscsi_conn *c, const struct iscsi_cmd *cmd)
{
	return c->lun.reserved && !c->ours && cmd->op != ISCSI_CMD_READ;
}

void iscsi_conn_submit(struct iscsi_conn *c, struct iscsi_cmd *cmd)
{
	bool scan = cmd->op == ISCSI_CMD_GET_LBA_STATUS;

	if (!scan && mock_iscsi.nr_log < MOCK_ISCSI_MAX_LOG) {
		struct mock_iscsi_rec *r = &mock_iscsi.log[mock_iscsi.nr_log++];

		r->conn = c->index;
		r->op = cmd->op;
		r->lba = cmd->lba;
		r->nr_blocks = cmd->nr_blocks;
		r->fua = cmd->fua;
	}
	cmd->conn = c;
	c->st.in_flight++;
	if (c->state == ISCSI_CONN_DOWN)
		make_ready(c, cmd, -EIO);
	else if (c->state == ISCSI_CONN_FENCED)
		make_ready(c, cmd, -EACCES);
	else if (c->state == ISCSI_CONN_CONNECTING ||
		 c->state == ISCSI_CONN_ADMITTING)
		TAILQ_INSERT_TAIL(&c->connecting, cmd, link);
	else if (c->hold && !scan)
		TAILQ_INSERT_TAIL(&c->held, cmd, link);
	else
		make_ready(c, cmd, pr_conflict(c, cmd) ? -EACCES : 0);
}

void mock_iscsi_fail(unsigned int i, int err, uint32_t ops_mask,
		     unsigned int count)
{
	struct iscsi_conn *c = mock_iscsi.conns[i];

	c->fail_err = err;
	c->fail_ops = ops_mask;
	c->fail_count = count;
}

void mock_iscsi_hold(unsigned int i, bool hold)
{
	mock_iscsi.conns[i]->hold = hold;
}

unsigned int mock_iscsi_nr_held(unsigned int i)
{
	struct iscsi_cmd *cmd;
	unsigned int n = 0;

	TAILQ_FOREACH(cmd, &mock_iscsi.conns[i]->held, link)
	n++;
	return n;
}

unsigned int mock_iscsi_release(unsigned int i, int err)
{
	struct iscsi_conn *c = mock_iscsi.conns[i];
	unsigned int n = 0;
	struct iscsi_cmd *cmd;

	while ((cmd = TAILQ_FIRST(&c->held))) {
		TAILQ_REMOVE(&c->held, cmd, link);
		make_ready(c, cmd, err);
		n++;
	}
	return n;
}

void mock_iscsi_release_first(unsigned int i, int err)
{
	struct iscsi_conn *c = mock_iscsi.conns[i];
	struct iscsi_cmd *cmd = TAILQ_FIRST(&c->held);

	if (cmd) {
		TAILQ_REMOVE(&c->held, cmd, link);
		make_ready(c, cmd, err);
	}
}

void mock_iscsi_set_state(unsigned int i, enum iscsi_conn_state state)
{
	struct iscsi_conn *c = mock_iscsi.conns[i];
	struct iscsi_cmd *cmd;

	c->state = state;
	if (state == ISCSI_CONN_CONNECTING || state == ISCSI_CONN_ADMITTING)
		return;
	while ((cmd = TAILQ_FIRST(&c->connecting))) {
		TAILQ_REMOVE(&c->connecting, cmd, link);
		make_ready(c, cmd,
			   state == ISCSI_CONN_DOWN	? -EIO
			   : state == ISCSI_CONN_FENCED ? -EACCES
							: 0);
	}
}

unsigned int mock_iscsi_count(unsigned int conn, enum iscsi_cmd_op op,
			      unsigned int from)
{
	unsigned int n = 0;

	for (unsigned int i = from; i < mock_iscsi.nr_log; i++)
		n += mock_iscsi.log[i].conn == conn &&
		     mock_iscsi.log[i].op == op;
	return n;
}

enum iscsi_conn_state iscsi_conn_state(const struct iscsi_conn *c)
{
	return c->state;
}

uint32_t iscsi_conn_block_size(const struct iscsi_conn *c)
{
	return c->state == ISCSI_CONN_UP ? c->block_size : 0;
}

uint64_t iscsi_conn_nr_blocks(const struct iscsi_conn *c)
{
	return c->state == ISCSI_CONN_UP ? c->nr_blocks : 0;
}

bool iscsi_conn_can_unmap(const struct iscsi_conn *c)
{
	return c->can_unmap;
}

const char *iscsi_conn_error(const struct iscsi_conn *c)
{
	return "";
}

void iscsi_conn_get_stats(const struct iscsi_conn *c,
			  struct iscsi_conn_stats *st)
{
	*st = c->st;
	st->state = c->state;
}

void iscsi_conn_report(const struct iscsi_conn *c, struct td_json *j,
		       const char *key)
{
	td_json_begin_object(j, key);
	td_json_str(j, "state", iscsi_conn_state_name(c->state));
	td_json_u64(j, "reads", c->st.reads);
	td_json_u64(j, "writes", c->st.writes);
	td_json_end_object(j);
}

const char *iscsi_conn_state_name(enum iscsi_conn_state s)
{
	switch (s) {
	case ISCSI_CONN_UP:
		return "up";
	case ISCSI_CONN_DOWN:
		return "down";
	case ISCSI_CONN_ADMITTING:
		return "admitting";
	case ISCSI_CONN_FENCED:
		return "fenced";
	default:
		return "connecting";
	}
}

int iscsi_conn_status_errno(int status, int sense_key, int ascq, bool *retry)
{
	*retry = false;
	return status ? -EIO : 0;
}

/* --- admission and persistent reservations ------------------------------ */

static void admit_run(struct td_defer *d, void *opaque)
{
	struct iscsi_conn *c = opaque;

	if (c->state == ISCSI_CONN_ADMITTING)
		c->admit(c, c->admit_opaque);
}

void mock_iscsi_relogin(unsigned int i, bool lose_registration)
{
	struct iscsi_conn *c = mock_iscsi.conns[i];

	if (!c) /* inside create: the newest */
		return;
	/* The old session's registration stays on the LUN (tgtd keys it by
	 * I_T nexus); the new session is unregistered. */
	if (c->ours && !lose_registration)
		c->lun.others[c->lun.nr_others++] = c->ours_key;
	c->ours = false;
	c->state = ISCSI_CONN_ADMITTING;
	td_loop_defer(c->loop, &c->admit_defer, admit_run, c);
}

struct mock_pr *mock_iscsi_lun(unsigned int i)
{
	return &mock_iscsi.conns[i]->lun;
}

bool mock_iscsi_registered(unsigned int i)
{
	return mock_iscsi.conns[i]->ours;
}

void mock_iscsi_preempt(unsigned int i, uint64_t victim, uint64_t by)
{
	struct iscsi_conn *c = mock_iscsi.conns[i];
	struct mock_pr *l = &c->lun;
	unsigned int n = 0;

	for (unsigned int k = 0; k < l->nr_others; k++)
		if (l->others[k] != victim)
			l->others[n++] = l->others[k];
	l->nr_others = n;
	if (c->ours && c->ours_key == victim)
		c->ours = false;
	l->reserved = true;
	l->type = ISCSI_PR_TYPE_WERO;
	l->holder = by;
	l->gen++;
}

static void mock_pr_run(struct td_defer *d, void *opaque)
{
	struct iscsi_conn *c = opaque;
	unsigned int n = c->nr_pr;
	struct iscsi_pr_cmd *prs[4];
	int errs[4];

	memcpy(prs, c->pr_pending, sizeof(prs));
	memcpy(errs, c->pr_err, sizeof(errs));
	c->nr_pr = 0;
	for (unsigned int k = 0; k < n; k++)
		prs[k]->done(prs[k], errs[k], prs[k]->opaque);
}

static void pr_keys(struct iscsi_conn *c, struct iscsi_pr_cmd *pr)
{
	const struct mock_pr *l = &c->lun;

	pr->generation = l->gen;
	pr->nr_keys = pr->nr_kept = 0;
	for (unsigned int k = 0; k < l->nr_others; k++)
		pr->keys[pr->nr_kept++] = l->others[k];
	if (c->ours)
		pr->keys[pr->nr_kept++] = c->ours_key;
	pr->nr_keys = pr->nr_kept;
}

static int pr_do(struct iscsi_conn *c, struct iscsi_pr_cmd *pr)
{
	struct mock_pr *l = &c->lun;

	if (c->state == ISCSI_CONN_DOWN || c->state == ISCSI_CONN_FENCED)
		return c->state == ISCSI_CONN_DOWN ? -EIO : -EACCES;
	if (l->fail_err)
		return l->fail_err;
	switch (pr->action) {
	case ISCSI_PR_READ_KEYS:
		pr_keys(c, pr);
		return 0;
	case ISCSI_PR_READ_RESERVATION:
		pr->generation = l->gen;
		pr->reserved = l->reserved;
		pr->holder_key = l->holder;
		pr->type = l->type;
		return 0;
	case ISCSI_PR_REGISTER:
		c->ours = true;
		c->ours_key = pr->key;
		l->gen++;
		return 0;
	case ISCSI_PR_UNREGISTER:
		if (c->ours)
			l->gen++;
		c->ours = false;
		return 0;
	case ISCSI_PR_RESERVE:
		if (!c->ours || (l->reserved && l->holder != pr->key))
			return -EACCES;
		l->reserved = true;
		l->type = ISCSI_PR_TYPE_WERO;
		l->holder = pr->key;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static int pr_queue(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
		    enum iscsi_pr_action a, uint64_t key, iscsi_pr_done_fn done,
		    void *opaque)
{
	bool admission = pr->admission;

	if (!done || c->nr_pr == 4)
		return -EINVAL;
	memset(pr, 0, sizeof(*pr));
	pr->admission = admission;
	pr->action = a;
	pr->key = key;
	pr->done = done;
	pr->opaque = opaque;
	c->pr_pending[c->nr_pr] = pr;
	c->pr_err[c->nr_pr++] = pr_do(c, pr);
	c->lun.commands++;
	td_loop_defer(c->loop, &c->pr_defer, mock_pr_run, c);
	return 0;
}

int iscsi_conn_admitted(struct iscsi_conn *c, int err)
{
	if (c->state == ISCSI_CONN_FENCED)
		return -EINVAL;
	if (err == -EACCES) {
		mock_iscsi_set_state(c->index, ISCSI_CONN_FENCED);
		return 0;
	}
	if (err)
		return -EINVAL;
	if (c->state != ISCSI_CONN_ADMITTING)
		return -ESTALE;
	mock_iscsi_set_state(c->index, ISCSI_CONN_UP);
	return 0;
}

int iscsi_conn_pr_register(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			   uint64_t key, iscsi_pr_done_fn done, void *opaque)
{
	return key ? pr_queue(c, pr, ISCSI_PR_REGISTER, key, done, opaque)
		   : -EINVAL;
}

int iscsi_conn_pr_unregister(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			     iscsi_pr_done_fn done, void *opaque)
{
	return pr_queue(c, pr, ISCSI_PR_UNREGISTER, 0, done, opaque);
}

int iscsi_conn_pr_reserve(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			  uint64_t key, iscsi_pr_done_fn done, void *opaque)
{
	return key ? pr_queue(c, pr, ISCSI_PR_RESERVE, key, done, opaque)
		   : -EINVAL;
}

int iscsi_conn_pr_read_keys(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			    iscsi_pr_done_fn done, void *opaque)
{
	return pr_queue(c, pr, ISCSI_PR_READ_KEYS, 0, done, opaque);
}

int iscsi_conn_pr_read_reservation(struct iscsi_conn *c,
				   struct iscsi_pr_cmd *pr,
				   iscsi_pr_done_fn done, void *opaque)
{
	return pr_queue(c, pr, ISCSI_PR_READ_RESERVATION, 0, done, opaque);
}

bool iscsi_pr_has_key(const struct iscsi_pr_cmd *pr, uint64_t key)
{
	for (uint32_t i = 0; i < pr->nr_kept; i++)
		if (pr->keys[i] == key)
			return true;
	return false;
}

const char *iscsi_pr_action_name(enum iscsi_pr_action a)
{
	return a == ISCSI_PR_READ_KEYS ? "read-keys" : "pr";
}

/* iscsi-pr.c's, the same FNV-1a 64 (the mock stands in for that file). */
uint64_t iscsi_conn_pr_key(const char *host_id)
{
	uint64_t h = 0xcbf29ce484222325ull;

	if (!host_id || !*host_id)
		return 0;
	for (const unsigned char *p = (const unsigned char *)host_id; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return h ? h : 1;
}
