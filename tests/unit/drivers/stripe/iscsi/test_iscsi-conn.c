/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_iscsi-conn.c - the iSCSI connection without a server.
 *
 * The status/sense -> errno table and the portal syntax are checked
 * against tables written by hand.  The state machine runs against a fake
 * libiscsi defined below (the library boundary): each context owns an
 * eventfd that the loop watches; the test queues answers (login result,
 * READ CAPACITY, task completions) and pokes the eventfd, and the fake
 * iscsi_service() delivers them the way libiscsi would, from inside the
 * loop.  The module's three .c files are included to reach their statics.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "drivers/stripe/iscsi/iscsi-cmd.c"
#include "drivers/stripe/iscsi/iscsi-conn.c"
#include "drivers/stripe/iscsi/iscsi-login.c"
#include "drivers/stripe/iscsi/iscsi-pr.c"

/* --- a fake libiscsi ------------------------------------------------------ */

enum fake_kind {
	K_RC16,
	K_LBP,
	K_BL,
	K_READ,
	K_WRITE,
	K_SYNC,
	K_UNMAP,
	K_WS,
	K_PR_IN,
	K_PR_OUT,
	K_GLS
};

#define FAKE_MAX_TASKS 64

struct fake_task {
	struct scsi_task task;	   /* first: the pointer libiscsi hands out */
	struct iscsi_context *ctx; /* NULL once its context is gone */
	enum fake_kind kind;
	iscsi_command_cb cb;
	void *priv;
	uint64_t lba;
	uint32_t len; /* bytes or blocks, as the call took them */
	int fua, unmap;
	int sa, type;		/* PR: service action, reservation type */
	uint64_t key, sa_key;	/* PR OUT: the parameter list's keys */
	struct scsi_iovec *iov; /* READ/WRITE: the entries it was given */
	int niov;
	bool answered;
};

struct iscsi_context {
	int fd;
	bool logged_in;
	iscsi_command_cb connect_cb, login_cb;
	void *connect_priv, *login_priv;
	struct fake_task *tasks[FAKE_MAX_TASKS];
	int nr_tasks;
	int service_ret; /* next iscsi_service() result */
};

/* What the next connect does, and the answers the test queued. */
static struct {
	int connect_ret;   /* iscsi_full_connect_async's result */
	bool login_ok;	   /* answer the login */
	bool login_silent; /* never answer the login */
	bool auto_probe;   /* answer READ CAPACITY / VPD at once */
	uint32_t block_size;
	uint64_t nr_blocks;
	bool lbpme, lbpu, lbpws, lbprz;
	uint32_t max_xfer, opt_xfer; /* the Block Limits page */
	bool no_block_limits;	     /* the page is refused */
	int contexts, destroyed;
	struct iscsi_context *ctx; /* the newest */
	/* Completions to deliver at the next service, in order. */
	struct fake_task *due[FAKE_MAX_TASKS];
	int due_status[FAKE_MAX_TASKS];
	int nr_due;
	bool login_due, tcp_due;
	int rc16_uas; /* READ CAPACITYs answered with UNIT ATTENTION */
} fake;

static struct scsi_readcapacity16 fake_rc;
/* GET LBA STATUS's parameter data, as the test sets it. */
static struct scsi_lba_status_descriptor fake_gls_desc[8];
static struct scsi_get_lba_status fake_gls = {.descriptors = fake_gls_desc};
static struct scsi_inquiry_logical_block_provisioning fake_lbp;
static struct scsi_inquiry_block_limits fake_bl;

static void fake_poke(struct iscsi_context *ctx)
{
	uint64_t one = 1;

	assert_int_equal(write(ctx->fd, &one, sizeof(one)), sizeof(one));
}

struct iscsi_context *iscsi_create_context(const char *initiator)
{
	struct iscsi_context *ctx = calloc(1, sizeof(*ctx));

	ctx->fd = eventfd(0, EFD_NONBLOCK);
	fake.contexts++;
	fake.ctx = ctx;
	fake.nr_due = 0;
	fake.login_due = fake.tcp_due = false;
	return ctx;
}

int iscsi_destroy_context(struct iscsi_context *ctx)
{
	/* libiscsi: outstanding tasks come back cancelled if logged in
	 * (each callback frees its task, which leaves the table). */
	while (ctx->logged_in && ctx->nr_tasks) {
		struct fake_task *t = ctx->tasks[0];

		t->answered = true;
		t->cb(ctx, SCSI_STATUS_CANCELLED, &t->task, t->priv);
		assert_true(ctx->nr_tasks == 0 || ctx->tasks[0] != t);
	}
	for (int i = 0; i < ctx->nr_tasks; i++)
		ctx->tasks[i]->ctx = NULL;
	close(ctx->fd);
	if (fake.ctx == ctx)
		fake.ctx = NULL;
	fake.destroyed++;
	free(ctx);
	return 0;
}

static void fake_deliver(struct iscsi_context *ctx)
{
	int n = fake.nr_due;

	if (fake.tcp_due) {
		fake.tcp_due = false;
		ctx->connect_cb(ctx, SCSI_STATUS_GOOD, NULL, ctx->connect_priv);
	}
	if (fake.login_due) {
		fake.login_due = false;
		ctx->logged_in = fake.login_ok;
		ctx->login_cb(ctx,
			      fake.login_ok ? SCSI_STATUS_GOOD
					    : SCSI_STATUS_ERROR,
			      NULL, ctx->login_priv);
	}
	for (int i = 0; i < n && i < fake.nr_due; i++) {
		struct fake_task *t = fake.due[i];

		if (!t || t->answered)
			continue;
		t->answered = true;
		t->task.status = fake.due_status[i];
		t->cb(ctx, fake.due_status[i], &t->task, t->priv);
	}
	/* Answers queued by the callbacks (the probe) wait for the next. */
	memmove(fake.due, fake.due + n,
		(fake.nr_due - n) * sizeof(fake.due[0]));
	memmove(fake.due_status, fake.due_status + n,
		(fake.nr_due - n) * sizeof(int));
	fake.nr_due -= n;
	if (fake.nr_due || fake.login_due || fake.tcp_due)
		fake_poke(ctx);
}

int iscsi_service(struct iscsi_context *ctx, int revents)
{
	uint64_t v;
	int r = ctx->service_ret;

	if (read(ctx->fd, &v, sizeof(v)) < 0)
		v = 0;
	ctx->service_ret = 0;
	fake_deliver(ctx);
	return r;
}

int iscsi_get_fd(struct iscsi_context *ctx)
{
	return ctx->fd;
}

int iscsi_which_events(struct iscsi_context *ctx)
{
	return POLLIN;
}

const char *iscsi_get_error(struct iscsi_context *ctx)
{
	return "fake error";
}

int iscsi_set_targetname(struct iscsi_context *ctx, const char *name)
{
	return 0;
}

int iscsi_set_session_type(struct iscsi_context *ctx,
			   enum iscsi_session_type type)
{
	return 0;
}

int iscsi_set_header_digest(struct iscsi_context *ctx,
			    enum iscsi_header_digest d)
{
	return 0;
}

int iscsi_set_initiator_username_pwd(struct iscsi_context *ctx,
				     const char *user, const char *passwd)
{
	return 0;
}

void iscsi_set_noautoreconnect(struct iscsi_context *ctx, int state)
{
}

int iscsi_logout_async(struct iscsi_context *ctx, iscsi_command_cb cb,
		       void *priv)
{
	return 0;
}

const char *scsi_sense_key_str(int key)
{
	return "key";
}

const char *scsi_sense_ascq_str(int ascq)
{
	return "ascq";
}

void scsi_free_scsi_task(struct scsi_task *task)
{
	struct fake_task *t = (struct fake_task *)task;
	struct iscsi_context *ctx = t->ctx;

	if (!t)
		return;
	for (int i = 0; ctx && i < ctx->nr_tasks; i++)
		if (ctx->tasks[i] == t)
			ctx->tasks[i] = ctx->tasks[--ctx->nr_tasks];
	for (int i = 0; i < fake.nr_due; i++)
		if (fake.due[i] == t)
			fake.due[i] = NULL;
	free(t);
}

static void fake_due(struct fake_task *t, int status)
{
	fake.due[fake.nr_due] = t;
	fake.due_status[fake.nr_due++] = status;
	fake_poke(fake.ctx);
}

static struct fake_task *fake_task(struct iscsi_context *ctx,
				   enum fake_kind kind, iscsi_command_cb cb,
				   void *priv)
{
	struct fake_task *t = calloc(1, sizeof(*t));

	assert_true(ctx->nr_tasks < FAKE_MAX_TASKS);
	t->ctx = ctx;
	t->kind = kind;
	t->cb = cb;
	t->priv = priv;
	ctx->tasks[ctx->nr_tasks++] = t;
	return t;
}

int iscsi_connect_async(struct iscsi_context *ctx, const char *portal,
			iscsi_command_cb cb, void *priv)
{
	if (fake.connect_ret)
		return fake.connect_ret;
	ctx->connect_cb = cb;
	ctx->connect_priv = priv;
	fake.tcp_due = true;
	fake_poke(ctx);
	return 0;
}

int iscsi_login_async(struct iscsi_context *ctx, iscsi_command_cb cb,
		      void *priv)
{
	ctx->login_cb = cb;
	ctx->login_priv = priv;
	if (!fake.login_silent) {
		fake.login_due = true;
		fake_poke(ctx);
	}
	return 0;
}

void *scsi_datain_unmarshall(struct scsi_task *task)
{
	struct fake_task *t = (struct fake_task *)task;

	if (t->kind == K_RC16) {
		fake_rc.block_length = fake.block_size;
		fake_rc.returned_lba = fake.nr_blocks - 1;
		fake_rc.lbpme = fake.lbpme;
		fake_rc.lbprz = fake.lbprz;
		return &fake_rc;
	}
	if (t->kind == K_GLS)
		return &fake_gls;
	if (t->kind == K_BL) {
		fake_bl.max_xfer_len = fake.max_xfer;
		fake_bl.opt_xfer_len = fake.opt_xfer;
		return &fake_bl;
	}
	fake_lbp.lbpu = fake.lbpu;
	fake_lbp.lbpws = fake.lbpws;
	return &fake_lbp;
}

struct scsi_task *iscsi_readcapacity16_task(struct iscsi_context *ctx, int lun,
					    iscsi_command_cb cb, void *priv)
{
	struct fake_task *t = fake_task(ctx, K_RC16, cb, priv);

	if (fake.rc16_uas > 0) {
		fake.rc16_uas--;
		t->task.sense.key = SCSI_SENSE_UNIT_ATTENTION;
		t->task.sense.ascq = SCSI_SENSE_ASCQ_BUS_RESET;
		fake_due(t, SCSI_STATUS_CHECK_CONDITION);
	} else if (fake.auto_probe) {
		fake_due(t, SCSI_STATUS_GOOD);
	}
	return &t->task;
}

struct scsi_task *iscsi_inquiry_task(struct iscsi_context *ctx, int lun,
				     int evpd, int page_code, int maxsize,
				     iscsi_command_cb cb, void *priv)
{
	bool bl = page_code == SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS;
	struct fake_task *t = fake_task(ctx, bl ? K_BL : K_LBP, cb, priv);

	if (bl && fake.no_block_limits) {
		t->task.sense.key = SCSI_SENSE_ILLEGAL_REQUEST;
		t->task.sense.ascq = SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB;
		fake_due(t, SCSI_STATUS_CHECK_CONDITION);
	} else if (fake.auto_probe) {
		fake_due(t, SCSI_STATUS_GOOD);
	}
	return &t->task;
}

struct scsi_task *iscsi_read16_iov_task(struct iscsi_context *ctx, int lun,
					uint64_t lba, uint32_t datalen,
					int blocksize, int rdprotect, int dpo,
					int fua, int fua_nv, int group,
					iscsi_command_cb cb, void *priv,
					struct scsi_iovec *iov, int niov)
{
	struct fake_task *t = fake_task(ctx, K_READ, cb, priv);

	t->lba = lba;
	t->len = datalen;
	t->iov = iov;
	t->niov = niov;
	return &t->task;
}

struct scsi_task *iscsi_write16_iov_task(struct iscsi_context *ctx, int lun,
					 uint64_t lba, unsigned char *data,
					 uint32_t datalen, int blocksize,
					 int wrprotect, int dpo, int fua,
					 int fua_nv, int group,
					 iscsi_command_cb cb, void *priv,
					 struct scsi_iovec *iov, int niov)
{
	struct fake_task *t = fake_task(ctx, K_WRITE, cb, priv);

	t->lba = lba;
	t->len = datalen;
	t->fua = fua;
	t->iov = iov;
	t->niov = niov;
	return &t->task;
}

struct scsi_task *iscsi_write16_task(struct iscsi_context *ctx, int lun,
				     uint64_t lba, unsigned char *data,
				     uint32_t datalen, int blocksize,
				     int wrprotect, int dpo, int fua,
				     int fua_nv, int group, iscsi_command_cb cb,
				     void *priv)
{
	return iscsi_write16_iov_task(ctx, lun, lba, data, datalen, blocksize,
				      wrprotect, dpo, fua, fua_nv, group, cb,
				      priv, NULL, 0);
}

struct scsi_task *iscsi_synchronizecache16_task(struct iscsi_context *ctx,
						int lun, uint64_t lba,
						uint32_t num_blocks, int syncnv,
						int immed, iscsi_command_cb cb,
						void *priv)
{
	struct fake_task *t = fake_task(ctx, K_SYNC, cb, priv);

	t->lba = lba;
	t->len = num_blocks;
	return &t->task;
}

struct scsi_task *iscsi_get_lba_status_task(struct iscsi_context *ctx, int lun,
					    uint64_t starting_lba,
					    uint32_t alloc_len,
					    iscsi_command_cb cb, void *priv)
{
	struct fake_task *t = fake_task(ctx, K_GLS, cb, priv);

	t->lba = starting_lba;
	t->len = alloc_len;
	return &t->task;
}

struct scsi_task *iscsi_unmap_task(struct iscsi_context *ctx, int lun,
				   int anchor, int group,
				   struct unmap_list *list, int list_len,
				   iscsi_command_cb cb, void *priv)
{
	struct fake_task *t = fake_task(ctx, K_UNMAP, cb, priv);

	t->lba = list[0].lba;
	t->len = list[0].num;
	return &t->task;
}

struct scsi_task *iscsi_writesame16_task(struct iscsi_context *ctx, int lun,
					 uint64_t lba, unsigned char *data,
					 uint32_t datalen, uint32_t num_blocks,
					 int anchor, int unmap, int wrprotect,
					 int group, iscsi_command_cb cb,
					 void *priv)
{
	struct fake_task *t = fake_task(ctx, K_WS, cb, priv);

	t->lba = lba;
	t->len = num_blocks;
	t->unmap = unmap;
	return &t->task;
}

struct scsi_task *iscsi_persistent_reserve_in_task(struct iscsi_context *ctx,
						   int lun, int sa,
						   uint16_t xferlen,
						   iscsi_command_cb cb,
						   void *priv)
{
	struct fake_task *t = fake_task(ctx, K_PR_IN, cb, priv);

	t->sa = sa;
	t->len = xferlen;
	return &t->task;
}

struct scsi_task *iscsi_persistent_reserve_out_task(struct iscsi_context *ctx,
						    int lun, int sa, int scope,
						    int type, void *params,
						    iscsi_command_cb cb,
						    void *priv)
{
	struct fake_task *t = fake_task(ctx, K_PR_OUT, cb, priv);
	struct scsi_persistent_reserve_out_basic *p = params;

	t->sa = sa;
	t->type = type;
	t->key = p->reservation_key;
	t->sa_key = p->service_action_reservation_key;
	return &t->task;
}

/* --- helpers ---------------------------------------------------------------- */

#define NR_CMDS 16

struct tcmd {
	struct iscsi_cmd cmd;
	struct iovec iov[2];
	uint8_t buf[8192];
	int calls;
	int err;
};

static struct td_loop *loop;
static struct tcmd tc[NR_CMDS];
static bool in_submit;
static int order[NR_CMDS * 4];
static int nr_order;
static struct iscsi_conn *destroy_in_done;

static void tdone(struct iscsi_cmd *cmd, int err)
{
	struct tcmd *t = (struct tcmd *)cmd;

	assert_false(in_submit);
	t->calls++;
	t->err = err;
	order[nr_order++] = (int)(t - tc);
	if (destroy_in_done) {
		struct iscsi_conn *c = destroy_in_done;

		destroy_in_done = NULL;
		iscsi_conn_destroy(c);
	}
}

static void prep(int i, enum iscsi_cmd_op op, uint64_t lba, uint32_t nr)
{
	struct tcmd *t = &tc[i];

	memset(&t->cmd, 0, sizeof(t->cmd));
	t->calls = 0;
	t->err = 1;
	t->cmd.op = op;
	t->cmd.lba = lba;
	t->cmd.nr_blocks = nr;
	t->cmd.done = tdone;
	if (op == ISCSI_CMD_READ || op == ISCSI_CMD_WRITE) {
		/* Two entries adding up to nr blocks of 512 bytes. */
		t->iov[0].iov_base = t->buf;
		t->iov[0].iov_len = 100;
		t->iov[1].iov_base = t->buf + 100;
		t->iov[1].iov_len = nr * 512 - 100;
		t->cmd.iov = t->iov;
		t->cmd.iovcnt = 2;
	}
}

static void sub(struct iscsi_conn *c, int i)
{
	in_submit = true;
	iscsi_conn_submit(c, &tc[i].cmd);
	in_submit = false;
}

/* Run the loop for up to ms, or until tc[i] completed (i >= 0). */
static void run(int ms, int i)
{
	uint64_t end = td_now_ns() + (uint64_t)ms * 1000000;

	do {
		td_loop_run_once(loop, 1);
	} while (td_now_ns() < end && (i < 0 || !tc[i].calls));
}

static struct fake_task *task_of(int i)
{
	return tc[i].cmd.task;
}

static struct iscsi_conn *up_conn(uint32_t qd, uint32_t timeout_ms)
{
	struct iscsi_conn_cfg cfg = {
		.portal = "127.0.0.1:3260",
		.target = "iqn.2026-11.test:t",
		.lun = 1,
		.queue_depth = qd,
		.cmd_timeout_ms = timeout_ms,
		.login_retries = 2,
		.login_backoff_ms = 1,
		.revive_interval_ms = 5,
	};
	struct iscsi_conn *c;

	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), 0);
	for (int n = 0; n < 200 && iscsi_conn_state(c) != ISCSI_CONN_UP; n++)
		td_loop_run_once(loop, 1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_UP);
	return c;
}

static int setup(void **state)
{
	memset(&fake, 0, sizeof(fake));
	fake.login_ok = true;
	fake.auto_probe = true;
	fake.block_size = 512;
	fake.nr_blocks = 1 << 20;
	memset(tc, 0, sizeof(tc));
	nr_order = 0;
	td_log_set_level(TD_LOG_ERR);
	return td_loop_create(&loop);
}

static int teardown(void **state)
{
	td_loop_destroy(loop);
	return 0;
}

/* --- the errno table --------------------------------------------------------- */

static void test_status_table(void **state)
{
	static const struct {
		int status, key, ascq;
		int err;
		bool retry;
	} rows[] = {
		{SCSI_STATUS_GOOD, 0, 0, 0, false},
		{SCSI_STATUS_CONDITION_MET, 0, 0, 0, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x01, 0x1700, 0, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x03, 0x1100, -EIO, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x04, 0x4400, -EIO, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x03, 0x0c00, -EIO, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x05, 0x2100, -ENXIO, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x05, 0x2000, -EOPNOTSUPP, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x05, 0x2400, -EOPNOTSUPP, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x05, 0x2600, -EOPNOTSUPP, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x05, 0x2500, -ENODEV, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x05, 0x2700, -EINVAL, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x07, 0x2700, -EROFS, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x07, 0x2707, -ENOSPC, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x02, 0x0401, -EIO, true},
		{SCSI_STATUS_CHECK_CONDITION, 0x06, 0x2900, -EIO, true},
		{SCSI_STATUS_CHECK_CONDITION, 0x0b, 0x0000, -EIO, true},
		{SCSI_STATUS_CHECK_CONDITION, 0x00, 0x0000, -EIO, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x0e, 0x1d00, -EIO, false},
		{SCSI_STATUS_RESERVATION_CONFLICT, 0, 0, -EACCES, false},
		{SCSI_STATUS_CHECK_CONDITION, 0x06, 0x2a03, -EIO, true},
		{SCSI_STATUS_CHECK_CONDITION, 0x06, 0x2a04, -EIO, true},
		{SCSI_STATUS_CHECK_CONDITION, 0x06, 0x2a05, -EIO, true},
		{SCSI_STATUS_BUSY, 0, 0, -EAGAIN, true},
		{SCSI_STATUS_TASK_SET_FULL, 0, 0, -EAGAIN, true},
		{SCSI_STATUS_ACA_ACTIVE, 0, 0, -EIO, false},
		{SCSI_STATUS_TASK_ABORTED, 0, 0, -EIO, false},
		{SCSI_STATUS_ERROR, 0, 0, -EIO, false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bool retry = !rows[i].retry;
		int err = iscsi_conn_status_errno(rows[i].status, rows[i].key,
						  rows[i].ascq, &retry);

		if (err != rows[i].err || retry != rows[i].retry)
			fail_msg("row %zu: status 0x%x key 0x%x ascq 0x%04x: "
				 "%d retry %d, want %d retry %d",
				 i, rows[i].status, rows[i].key, rows[i].ascq,
				 err, retry, rows[i].err, rows[i].retry);
	}
}

static void test_portal_syntax(void **state)
{
	static const struct {
		const char *portal;
		bool ok;
	} rows[] = {
		{"10.0.0.1", true},	 {"10.0.0.1:3260", true},
		{"srv1:1", true},	 {"[::1]:3260", true},
		{"[fe80::1]", true},	 {"", false},
		{":3260", false},	 {"10.0.0.1:", false},
		{"10.0.0.1:0", false},	 {"10.0.0.1:65536", false},
		{"10.0.0.1:32x", false}, {"::1", false},
		{"[::1]x", false},	 {"[]:3260", false},
		{"10.0.0.1:-5", false},	 {"[::1]:", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (portal_valid(rows[i].portal) != rows[i].ok)
			fail_msg("portal '%s': want %s", rows[i].portal,
				 rows[i].ok ? "valid" : "invalid");
	assert_false(portal_valid(NULL));
}

static void test_create_rejects(void **state)
{
	struct iscsi_conn_cfg ok = {.portal = "1.2.3.4",
				    .target = "iqn.2026-11.test:t"};
	struct iscsi_conn_cfg cfg;
	struct iscsi_conn *c = NULL;
	char longname[300];

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	cfg = ok;
	cfg.portal = "1.2.3.4:99999";
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), -EINVAL);
	cfg = ok;
	cfg.target = "";
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), -EINVAL);
	cfg.target = longname;
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), -EINVAL);
	cfg = ok;
	cfg.queue_depth = ISCSI_CONN_MAX_QUEUE_DEPTH + 1;
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), -EINVAL);
	cfg = ok;
	cfg.chap_user = "u";
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), -EINVAL);
	assert_null(c);
	assert_int_equal(fake.contexts, 0);
}

/* --- the state machine --------------------------------------------------------- */

static void test_queue_depth_fifo(void **state)
{
	struct iscsi_conn *c = up_conn(4, 10000);
	struct iscsi_conn_stats st;

	assert_int_equal(iscsi_conn_block_size(c), 512);
	assert_int_equal(iscsi_conn_nr_blocks(c), 1 << 20);
	for (int i = 0; i < 10; i++) {
		prep(i, ISCSI_CMD_WRITE, (uint64_t)i * 8, 8);
		sub(c, i);
	}
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.in_flight, 4);
	assert_int_equal(st.queued, 6);
	for (int i = 4; i < 10; i++)
		assert_null(task_of(i));
	/* Answer the oldest one at a time: the next waiting one is issued. */
	for (int i = 0; i < 10; i++) {
		struct fake_task *t = task_of(i);

		assert_non_null(t);
		assert_int_equal(t->lba, (uint64_t)i * 8);
		assert_int_equal(t->len, 8 * 512);
		fake_due(t, SCSI_STATUS_GOOD);
		run(100, i);
		assert_int_equal(tc[i].calls, 1);
		assert_int_equal(tc[i].err, 0);
		iscsi_conn_get_stats(c, &st);
		assert_true(st.in_flight <= 4);
	}
	for (int i = 0; i < 10; i++)
		assert_int_equal(order[i], i);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.max_in_flight, 4);
	assert_int_equal(st.writes, 10);
	assert_int_equal(st.write_bytes, 10 * 8 * 512);
	iscsi_conn_destroy(c);
}

static void test_checks_at_issue(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);

	prep(0, ISCSI_CMD_READ, (1 << 20) - 1, 2); /* beyond the end */
	prep(1, ISCSI_CMD_READ, 0, 2);
	tc[1].iov[1].iov_len = 1;	/* does not add up */
	prep(2, ISCSI_CMD_UNMAP, 0, 8); /* LUN cannot unmap */
	prep(3, ISCSI_CMD_WRITE, 0, 0);
	prep(4, ISCSI_CMD_WRITE, 0, 1);
	tc[4].cmd.iovcnt = ISCSI_CONN_MAX_IOV + 1;
	for (int i = 0; i < 5; i++) {
		sub(c, i);
		assert_int_equal(tc[i].calls, 0); /* never inside submit */
	}
	run(50, 4);
	assert_int_equal(tc[0].err, -EINVAL);
	assert_int_equal(tc[1].err, -EINVAL);
	assert_int_equal(tc[2].err, -EOPNOTSUPP);
	assert_int_equal(tc[3].err, -EINVAL);
	assert_int_equal(tc[4].err, -EINVAL);
	assert_false(iscsi_conn_can_unmap(c));
	assert_int_equal(fake.ctx->nr_tasks, 0); /* nothing reached the fake */
	iscsi_conn_destroy(c);
}

static void test_sense_retries(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	struct fake_task *t;

	/* UNIT ATTENTION: retried ISCSI_CMD_MAX_UA_RETRIES (8) times, then
	 * -EIO. */
	prep(0, ISCSI_CMD_READ, 0, 1);
	sub(c, 0);
	for (int n = 0; n < 9; n++) {
		t = task_of(0);
		assert_non_null(t);
		t->task.sense.key = SCSI_SENSE_UNIT_ATTENTION;
		t->task.sense.ascq = 0x2900;
		fake_due(t, SCSI_STATUS_CHECK_CONDITION);
		run(20, 0);
		assert_int_equal(tc[0].calls, n < 8 ? 0 : 1);
	}
	assert_int_equal(tc[0].err, -EIO);

	/* NOT READY: still retried once only. */
	prep(4, ISCSI_CMD_READ, 0, 1);
	sub(c, 4);
	for (int n = 0; n < 2; n++) {
		t = task_of(4);
		assert_non_null(t);
		t->task.sense.key = SCSI_SENSE_NOT_READY;
		t->task.sense.ascq = 0x0401;
		fake_due(t, SCSI_STATUS_CHECK_CONDITION);
		run(20, 4);
		assert_int_equal(tc[4].calls, n == 0 ? 0 : 1);
	}
	assert_int_equal(tc[4].err, -EIO);

	/* LBA out of range (a LUN that shrank): not retried, -ENXIO. */
	prep(1, ISCSI_CMD_WRITE, 0, 1);
	sub(c, 1);
	t = task_of(1);
	t->task.sense.key = SCSI_SENSE_ILLEGAL_REQUEST;
	t->task.sense.ascq = SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE;
	fake_due(t, SCSI_STATUS_CHECK_CONDITION);
	run(50, 1);
	assert_int_equal(tc[1].err, -ENXIO);

	/* BUSY: paused, then issued again, then done. */
	prep(2, ISCSI_CMD_READ, 0, 1);
	sub(c, 2);
	fake_due(task_of(2), SCSI_STATUS_BUSY);
	run(2, -1);
	assert_true(c->busy_paused || task_of(2));
	run(50, -1);
	assert_non_null(task_of(2));
	assert_int_equal(tc[2].calls, 0);
	fake_due(task_of(2), SCSI_STATUS_GOOD);
	run(50, 2);
	assert_int_equal(tc[2].err, 0);

	/* A short read is -EIO; a residual on UNMAP parameter data is not. */
	prep(3, ISCSI_CMD_READ, 0, 1);
	sub(c, 3);
	t = task_of(3);
	t->task.residual_status = SCSI_RESIDUAL_UNDERFLOW;
	t->task.residual = 512;
	fake_due(t, SCSI_STATUS_GOOD);
	run(50, 3);
	assert_int_equal(tc[3].err, -EIO);
	iscsi_conn_destroy(c);
}

static void test_unmap_and_zeroes(void **state)
{
	struct iscsi_conn *c;
	struct fake_task *t;

	fake.lbpme = fake.lbpu = fake.lbpws = fake.lbprz = true;
	c = up_conn(8, 10000);
	assert_true(iscsi_conn_can_unmap(c));
	prep(0, ISCSI_CMD_UNMAP, 8, 16);
	sub(c, 0);
	t = task_of(0);
	assert_int_equal(t->kind, K_UNMAP);
	assert_int_equal(t->lba, 8);
	assert_int_equal(t->len, 16);
	t->task.residual_status = SCSI_RESIDUAL_UNDERFLOW;
	t->task.residual = 24; /* tgt does this */
	fake_due(t, SCSI_STATUS_GOOD);
	run(50, 0);
	assert_int_equal(tc[0].err, 0);

	/* WRITE_ZEROES: WRITE SAME with UNMAP, unless no_hole. */
	prep(1, ISCSI_CMD_WRITE_ZEROES, 0, 16);
	tc[1].cmd.no_hole = true;
	sub(c, 1);
	t = task_of(1);
	assert_int_equal(t->kind, K_WS);
	assert_int_equal(t->unmap, 0);
	/* Refused: every later one writes zeroes, in chunks. */
	t->task.sense.key = SCSI_SENSE_ILLEGAL_REQUEST;
	t->task.sense.ascq = SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE;
	fake_due(t, SCSI_STATUS_CHECK_CONDITION);
	run(20, -1);
	t = task_of(1);
	assert_int_equal(t->kind, K_WRITE);
	assert_int_equal(t->len, 16 * 512);
	fake_due(t, SCSI_STATUS_GOOD);
	run(50, 1);
	assert_int_equal(tc[1].err, 0);

	/* 1024 blocks = 2 chunks of 256 KiB, with FUA on each. */
	prep(2, ISCSI_CMD_WRITE_ZEROES, 100, 1024);
	tc[2].cmd.fua = true;
	sub(c, 2);
	for (int n = 0; n < 2; n++) {
		t = task_of(2);
		assert_int_equal(t->kind, K_WRITE);
		assert_int_equal(t->lba, 100 + n * 512);
		assert_int_equal(t->len, 512 * 512);
		assert_int_equal(t->fua, 1);
		fake_due(t, SCSI_STATUS_GOOD);
		run(20, 2);
	}
	assert_int_equal(tc[2].calls, 1);
	assert_int_equal(tc[2].err, 0);
	iscsi_conn_destroy(c);
}

/* --- the Block Limits page: commands above MAXIMUM TRANSFER LENGTH ------- */

/* One piece as the target must see it, written out by hand. */
struct piece_row {
	uint64_t lba;
	uint32_t bytes;
	int niov;
	size_t first_off,
		first_len;	   /* its first entry: offset in buf, length */
	size_t last_off, last_len; /* its last entry */
};

/* Answer tc[i]'s pieces in turn, checking each against rows. */
static void check_pieces(int i, enum fake_kind kind, const uint8_t *buf,
			 const struct piece_row *rows, int nr_rows)
{
	for (int n = 0; n < nr_rows; n++) {
		const struct piece_row *row = &rows[n];
		struct fake_task *t = task_of(i);

		assert_non_null(t);
		assert_int_equal(fake.ctx->nr_tasks, 1); /* one at a time */
		assert_int_equal(t->kind, kind);
		assert_int_equal(t->lba, row->lba);
		assert_int_equal(t->len, row->bytes);
		assert_int_equal(t->niov, row->niov);
		assert_ptr_equal(t->iov[0].iov_base, buf + row->first_off);
		assert_int_equal(t->iov[0].iov_len, row->first_len);
		assert_ptr_equal(t->iov[t->niov - 1].iov_base,
				 buf + row->last_off);
		assert_int_equal(t->iov[t->niov - 1].iov_len, row->last_len);
		assert_int_equal(tc[i].calls, 0);
		fake_due(t, SCSI_STATUS_GOOD);
		run(20, n == nr_rows - 1 ? i : -1);
	}
	assert_int_equal(tc[i].calls, 1);
	assert_int_equal(tc[i].err, 0);
}

/*
 * MAXIMUM 6 blocks, OPTIMAL 4: pieces of 4 blocks (the largest whole
 * number of optimal lengths within the maximum).  prep's iovec is 100
 * bytes, then the rest.
 */
static void test_block_limits_split(void **state)
{
	static const struct piece_row w16[] = {
		{0, 2048, 2, 0, 100, 100, 1948},
		{4, 2048, 1, 2048, 2048, 2048, 2048},
		{8, 2048, 1, 4096, 2048, 4096, 2048},
		{12, 2048, 1, 6144, 2048, 6144, 2048},
	};
	static const struct piece_row r9[] = {
		{100, 2048, 2, 0, 100, 100, 1948},
		{104, 2048, 1, 2048, 2048, 2048, 2048},
		{108, 512, 1, 4096, 512, 4096, 512},
	};
	struct iscsi_conn_stats st;
	struct iscsi_conn *c;
	struct fake_task *t;

	fake.max_xfer = 6;
	fake.opt_xfer = 4;
	c = up_conn(8, 10000);
	assert_int_equal(iscsi_conn_max_transfer_blocks(c), 6);
	assert_int_equal(iscsi_conn_opt_transfer_blocks(c), 4);

	prep(0, ISCSI_CMD_WRITE, 0, 16);
	tc[0].cmd.fua = true;
	sub(c, 0);
	check_pieces(0, K_WRITE, tc[0].buf, w16, 4);
	prep(1, ISCSI_CMD_READ, 100, 9);
	sub(c, 1);
	check_pieces(1, K_READ, tc[1].buf, r9, 3);

	/* Within the maximum (6 > 4 blocks, the optimal): sent whole. */
	prep(2, ISCSI_CMD_WRITE, 40, 6);
	sub(c, 2);
	t = task_of(2);
	assert_int_equal(t->len, 6 * 512);
	assert_int_equal(t->niov, 2);
	assert_ptr_equal(t->iov, tc[2].iov); /* the caller's own entries */
	fake_due(t, SCSI_STATUS_GOOD);
	run(20, 2);
	assert_int_equal(tc[2].err, 0);

	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.splits, 2);
	assert_int_equal(st.writes, 2);
	assert_int_equal(st.write_bytes, 22 * 512);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.read_bytes, 9 * 512);
	iscsi_conn_destroy(c);
}

/* A piece that fails fails the command: no later piece is sent. */
static void test_block_limits_piece_fails(void **state)
{
	struct iscsi_conn_stats st;
	struct iscsi_conn *c;
	struct fake_task *t;

	fake.max_xfer = 8;
	c = up_conn(8, 10000);
	prep(0, ISCSI_CMD_WRITE, 0, 16);
	sub(c, 0);
	t = task_of(0);
	assert_int_equal(t->len, 8 * 512);
	fake_due(t, SCSI_STATUS_GOOD);
	run(20, -1);
	t = task_of(0);
	assert_int_equal(t->lba, 8);
	t->task.sense.key = SCSI_SENSE_MEDIUM_ERROR;
	fake_due(t, SCSI_STATUS_CHECK_CONDITION);
	run(50, 0);
	assert_int_equal(tc[0].err, -EIO);
	assert_int_equal(fake.ctx->nr_tasks, 0);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.splits, 0);
	assert_int_equal(st.errors, 1);
	iscsi_conn_destroy(c);
}

/*
 * Pieces are also bounded by ISCSI_CONN_PIECE_IOV entries and end on a
 * block boundary: 16 blocks in 117 entries of 70 bytes and one of 2,
 * MAXIMUM 12 blocks.  Piece 0: 64 entries hold 4480 bytes, cut back to 8
 * blocks: 58 whole entries and 36 bytes of entry 58.  Piece 1: the other
 * 34 bytes of entry 58, entries 59-116 and the 2 bytes of entry 117.
 */
static void test_block_limits_small_entries(void **state)
{
	static uint8_t buf[8192];
	static struct iovec iov[118];
	static const struct piece_row rows[] = {
		{0, 4096, 59, 0, 70, 58 * 70, 36},
		{8, 4096, 60, 4096, 34, 117 * 70, 2},
	};
	struct iscsi_conn *c;

	for (int i = 0; i < 117; i++)
		iov[i] = (struct iovec){buf + i * 70, 70};
	iov[117] = (struct iovec){buf + 117 * 70, 2};
	fake.max_xfer = 12;
	c = up_conn(8, 10000);
	assert_int_equal(iscsi_conn_opt_transfer_blocks(c), 0);
	prep(0, ISCSI_CMD_READ, 0, 16);
	tc[0].cmd.iov = iov;
	tc[0].cmd.iovcnt = 118;
	sub(c, 0);
	check_pieces(0, K_READ, buf, rows, 2);
	iscsi_conn_destroy(c);
}

/* No page, or an OPTIMAL above the MAXIMUM: no limit, or the maximum. */
static void test_block_limits_absent_or_odd(void **state)
{
	struct iscsi_conn *c;
	struct fake_task *t;

	fake.no_block_limits = true;
	fake.max_xfer = 2; /* not seen: the page is refused */
	c = up_conn(8, 10000);
	assert_int_equal(iscsi_conn_max_transfer_blocks(c), 0);
	prep(0, ISCSI_CMD_WRITE, 0, 16);
	sub(c, 0);
	t = task_of(0);
	assert_int_equal(t->len, 16 * 512);
	fake_due(t, SCSI_STATUS_GOOD);
	run(20, 0);
	assert_int_equal(tc[0].err, 0);
	iscsi_conn_destroy(c);

	fake.no_block_limits = false;
	fake.max_xfer = 5;
	fake.opt_xfer = 8; /* above the maximum: not believed */
	c = up_conn(8, 10000);
	assert_int_equal(iscsi_conn_opt_transfer_blocks(c), 0);
	prep(1, ISCSI_CMD_WRITE, 0, 16);
	sub(c, 1);
	for (int n = 0; n < 4; n++) {
		t = task_of(1);
		assert_int_equal(t->lba, n * 5);
		assert_int_equal(t->len, (n < 3 ? 5 : 1) * 512);
		fake_due(t, SCSI_STATUS_GOOD);
		run(20, n == 3 ? 1 : -1);
	}
	assert_int_equal(tc[1].err, 0);
	iscsi_conn_destroy(c);
}

static void test_ws_fua_syncs_range(void **state)
{
	struct iscsi_conn *c;
	struct fake_task *t;

	fake.lbpme = fake.lbpu = fake.lbpws = fake.lbprz = true;
	c = up_conn(8, 10000);
	prep(0, ISCSI_CMD_WRITE_ZEROES, 64, 32);
	tc[0].cmd.fua = true;
	sub(c, 0);
	t = task_of(0);
	assert_int_equal(t->kind, K_WS);
	assert_int_equal(t->unmap, 1);
	fake_due(t, SCSI_STATUS_GOOD);
	run(20, -1);
	t = task_of(0);
	assert_non_null(t);
	assert_int_equal(t->kind, K_SYNC);
	assert_int_equal(t->lba, 64);
	assert_int_equal(t->len, 32);
	fake_due(t, SCSI_STATUS_GOOD);
	run(50, 0);
	assert_int_equal(tc[0].err, 0);
	iscsi_conn_destroy(c);
}

static void test_session_lost_reissues(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	struct iscsi_conn_stats st;
	struct iscsi_context *old;

	for (int i = 0; i < 3; i++) {
		prep(i, ISCSI_CMD_WRITE, (uint64_t)i, 1);
		sub(c, i);
	}
	old = fake.ctx;
	/* The connection breaks: libiscsi cancels what was in flight and
	 * iscsi_service fails. */
	old->service_ret = -1;
	for (int i = 0; i < 3; i++) {
		struct fake_task *t = task_of(i);

		t->answered = true;
		t->cb(old, SCSI_STATUS_CANCELLED, &t->task, t->priv);
	}
	fake_poke(old);
	run(50, -1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_UP);
	assert_ptr_not_equal(fake.ctx, NULL);
	assert_int_equal(fake.contexts, 2);
	for (int i = 0; i < 3; i++) {
		struct fake_task *t = task_of(i);

		assert_int_equal(tc[i].calls, 0);
		assert_non_null(t);
		assert_int_equal(t->lba, (uint64_t)i);
		fake_due(t, SCSI_STATUS_GOOD);
	}
	run(50, 2);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.reissued, 3);
	assert_int_equal(st.reconnects, 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(tc[i].err, 0);
	iscsi_conn_destroy(c);
}

static void test_timeout_drops_session(void **state)
{
	struct iscsi_conn *c = up_conn(1, 30);
	struct iscsi_conn_stats st;
	uint64_t t0 = td_now_ns();

	prep(0, ISCSI_CMD_READ, 0, 1); /* issued, never answered */
	prep(1, ISCSI_CMD_READ, 0, 1); /* waits behind it (depth 1) */
	sub(c, 0);
	sub(c, 1);
	run(200, 1);
	assert_int_equal(tc[0].err, -ETIMEDOUT);
	assert_int_equal(tc[1].err, -ETIMEDOUT);
	assert_true(td_now_ns() - t0 >= 30 * 1000000ull);
	assert_true(fake.destroyed >= 1); /* the session was dropped */
	run(20, -1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_UP);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.timeouts, 2);
	assert_int_equal(st.errors, 2);
	iscsi_conn_destroy(c);
}

static void test_login_retries_down_revive(void **state)
{
	struct iscsi_conn_cfg cfg = {
		.portal = "127.0.0.1",
		.target = "iqn.2026-11.test:t",
		.login_retries = 2,
		.login_backoff_ms = 1,
		.revive_interval_ms = 5,
	};
	struct iscsi_conn *c;

	fake.login_ok = false;
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), 0);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_CONNECTING);
	prep(0, ISCSI_CMD_READ, 0, 1); /* queued while connecting */
	sub(c, 0);
	run(200, 0);
	assert_int_equal(tc[0].err, -EIO);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_DOWN);
	assert_int_equal(fake.contexts, 3); /* 1 + 2 retries */
	assert_non_null(strstr(iscsi_conn_error(c), "fake error"));

	/* DOWN: -EIO from the loop, not from inside submit. */
	prep(1, ISCSI_CMD_READ, 0, 1);
	sub(c, 1);
	assert_int_equal(tc[1].calls, 0);
	run(1, 1);
	assert_int_equal(tc[1].err, -EIO);

	/* The server comes back: a revive makes it UP. */
	fake.login_ok = true;
	for (int n = 0; n < 100 && iscsi_conn_state(c) != ISCSI_CONN_UP; n++)
		run(1, -1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_UP);
	iscsi_conn_destroy(c);
}

static void test_login_timeout(void **state)
{
	struct iscsi_conn_cfg cfg = {
		.portal = "127.0.0.1",
		.target = "iqn.2026-11.test:t",
		.cmd_timeout_ms = 10,
		.login_backoff_ms = 1,
	};
	struct iscsi_conn *c;

	fake.login_silent = true; /* accepts TCP, never answers */
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), 0);
	run(100, -1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_DOWN);
	assert_non_null(strstr(iscsi_conn_error(c), "no login"));
	iscsi_conn_destroy(c);
	assert_int_equal(fake.contexts, fake.destroyed);
}

static void test_connect_fails_at_once(void **state)
{
	struct iscsi_conn_cfg cfg = {.portal = "127.0.0.1",
				     .target = "iqn.2026-11.test:t"};
	struct iscsi_conn *c;

	fake.connect_ret = -ENOMEM;
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), 0);
	/* No retries configured: DOWN straight away, nothing leaked. */
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_DOWN);
	assert_int_equal(fake.contexts, fake.destroyed);
	iscsi_conn_destroy(c);
}

static void test_probe_unit_attentions(void **state)
{
	struct iscsi_conn_cfg cfg = {.portal = "127.0.0.1",
				     .target = "iqn.2026-11.test:t"};
	struct iscsi_conn *c;

	/* A fresh session's UNIT ATTENTIONs are consumed... */
	fake.rc16_uas = 3;
	c = up_conn(4, 10000);
	iscsi_conn_destroy(c);
	/* ...but not forever. */
	fake.rc16_uas = ISCSI_CONN_MAX_LOGIN_UAS + 1;
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), 0);
	run(100, -1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_DOWN);
	assert_non_null(strstr(iscsi_conn_error(c), "READ CAPACITY"));
	iscsi_conn_destroy(c);
	assert_int_equal(fake.contexts, fake.destroyed);
}

static void test_destroy_cancels(void **state)
{
	struct iscsi_conn *c = up_conn(2, 10000);

	for (int i = 0; i < 4; i++) {
		prep(i, ISCSI_CMD_READ, 0, 1);
		sub(c, i);
	}
	iscsi_conn_destroy(c);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(tc[i].calls, 1);
		assert_int_equal(tc[i].err, -ECANCELED);
	}
	assert_int_equal(fake.contexts, fake.destroyed);
}

static void test_destroy_inside_done(void **state)
{
	struct iscsi_conn *c = up_conn(4, 10000);

	for (int i = 0; i < 3; i++) {
		prep(i, ISCSI_CMD_READ, 0, 1);
		sub(c, i);
	}
	fake_due(task_of(0), SCSI_STATUS_GOOD);
	destroy_in_done = c;
	run(50, 0);
	assert_int_equal(tc[0].err, 0);
	assert_int_equal(tc[1].err, -ECANCELED);
	assert_int_equal(tc[2].err, -ECANCELED);
	assert_int_equal(fake.contexts, fake.destroyed);
}

static void test_report(void **state)
{
	struct iscsi_conn *c = up_conn(4, 10000);
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	iscsi_conn_report(c, &j, NULL);
	assert_int_equal(td_json_finish(&j), 0);
	assert_non_null(strstr(td_strbuf_str(&sb), "\"state\": \"up\""));
	assert_non_null(
		strstr(td_strbuf_str(&sb), "\"block_size_bytes\": 512"));
	td_strbuf_free(&sb);
	iscsi_conn_destroy(c);
}

/* --- persistent reservations ------------------------------------------------ */

static void test_pr_key_table(void **state)
{
	/* FNV-1a 64: "a" and "foobar" are the published test vectors. */
	static const struct {
		const char *host_id;
		uint64_t key;
	} rows[] = {
		{"a", 0xaf63dc4c8601ec8cull},
		{"foobar", 0x85944171f73967e8ull},
		{"host-a", 0x66fb977456191da5ull},
		{"host-b", 0x66fb94745619188cull},
		{"xen1.example.org", 0x7e293ae68d1b2e47ull},
		{"", 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (iscsi_conn_pr_key(rows[i].host_id) != rows[i].key)
			fail_msg("'%s': 0x%016llx, want 0x%016llx",
				 rows[i].host_id,
				 (unsigned long long)iscsi_conn_pr_key(
					 rows[i].host_id),
				 (unsigned long long)rows[i].key);
	assert_int_equal(iscsi_conn_pr_key(NULL), 0);
}

struct tpr {
	struct iscsi_pr_cmd pr;
	int calls, err;
};

static bool pr_in_submit;

static void tpr_done(struct iscsi_pr_cmd *pr, int err, void *opaque)
{
	struct tpr *t = opaque;

	assert_false(pr_in_submit);
	assert_ptr_equal(&t->pr, pr);
	t->calls++;
	t->err = err;
}

static void run_pr(struct tpr *t, int ms)
{
	uint64_t end = td_now_ns() + (uint64_t)ms * 1000000;

	do {
		td_loop_run_once(loop, 1);
	} while (td_now_ns() < end && !t->calls);
}

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* READ KEYS parameter data: generation, then the keys. */
static int keys_data(uint8_t *d, uint32_t gen, const uint64_t *keys, int n)
{
	put_be(d, gen, 4);
	put_be(d + 4, (uint64_t)n * 8, 4);
	for (int i = 0; i < n; i++)
		put_be(d + 8 + 8 * i, keys[i], 8);
	return 8 + 8 * n;
}

static struct fake_task *pr_task(struct tpr *t)
{
	return t->pr.cmd.task;
}

static void test_pr_out_cdbs(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	struct tpr t[4] = {0};
	struct fake_task *f;
	static const struct {
		int sa, type;
		uint64_t key, sa_key;
	} want[] = {
		{SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY, 0, 0,
		 0x1111},
		{SCSI_PERSISTENT_RESERVE_RESERVE, 5, 0x1111, 0},
		{SCSI_PERSISTENT_RESERVE_PREEMPT_AND_ABORT, 5, 0x1111, 0x2222},
		{SCSI_PERSISTENT_RESERVE_REGISTER_AND_IGNORE_EXISTING_KEY, 0, 0,
		 0},
	};

	pr_in_submit = true;
	assert_int_equal(
		iscsi_conn_pr_register(c, &t[0].pr, 0x1111, tpr_done, &t[0]),
		0);
	assert_int_equal(
		iscsi_conn_pr_reserve(c, &t[1].pr, 0x1111, tpr_done, &t[1]), 0);
	assert_int_equal(iscsi_conn_pr_preempt_abort(c, &t[2].pr, 0x1111,
						     0x2222, tpr_done, &t[2]),
			 0);
	assert_int_equal(iscsi_conn_pr_unregister(c, &t[3].pr, tpr_done, &t[3]),
			 0);
	pr_in_submit = false;
	for (int i = 0; i < 4; i++) {
		f = pr_task(&t[i]);
		assert_non_null(f);
		assert_int_equal(f->kind, K_PR_OUT);
		assert_int_equal(f->sa, want[i].sa);
		assert_int_equal(f->type, want[i].type);
		assert_int_equal(f->key, want[i].key);
		assert_int_equal(f->sa_key, want[i].sa_key);
		fake_due(f, SCSI_STATUS_GOOD);
		run_pr(&t[i], 100);
		assert_int_equal(t[i].calls, 1);
		assert_int_equal(t[i].err, 0);
	}
	/* Bad arguments: refused at once, done never runs. */
	assert_int_equal(
		iscsi_conn_pr_register(c, &t[0].pr, 0, tpr_done, &t[0]),
		-EINVAL);
	assert_int_equal(iscsi_conn_pr_reserve(c, &t[0].pr, 1, NULL, NULL),
			 -EINVAL);
	assert_int_equal(
		iscsi_conn_pr_preempt_abort(c, &t[0].pr, 7, 7, tpr_done, &t[0]),
		-EINVAL);
	assert_int_equal(
		iscsi_conn_pr_preempt_abort(c, &t[0].pr, 7, 0, tpr_done, &t[0]),
		-EINVAL);
	/* A PR op submitted by hand, without iscsi-pr.c: -EINVAL. */
	prep(0, ISCSI_CMD_PR_OUT, 0, 0);
	sub(c, 0);
	run(50, 0);
	assert_int_equal(tc[0].err, -EINVAL);
	run(10, -1);
	assert_int_equal(t[0].calls, 1);
	iscsi_conn_destroy(c);
}

static void test_pr_in_parse(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	static uint8_t d[512];
	static const uint64_t keys[] = {0x66fb977456191da5ull,
					0x66fb94745619188cull};
	struct tpr t = {0};
	struct fake_task *f;

	/* READ KEYS: two keys, generation 7. */
	assert_int_equal(iscsi_conn_pr_read_keys(c, &t.pr, tpr_done, &t), 0);
	run(5, -1);
	f = pr_task(&t);
	assert_int_equal(f->kind, K_PR_IN);
	assert_int_equal(f->sa, SCSI_PERSISTENT_RESERVE_READ_KEYS);
	assert_int_equal(f->len, 8 + 8 * ISCSI_PR_MAX_KEYS);
	f->task.datain.data = d;
	f->task.datain.size = keys_data(d, 7, keys, 2);
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.err, 0);
	assert_int_equal(t.pr.generation, 7);
	assert_int_equal(t.pr.nr_keys, 2);
	assert_int_equal(t.pr.nr_kept, 2);
	assert_true(iscsi_pr_has_key(&t.pr, keys[1]));
	assert_false(iscsi_pr_has_key(&t.pr, 0x1234));

	/* A header that claims more keys than arrived: only those kept. */
	memset(&t, 0, sizeof(t));
	assert_int_equal(iscsi_conn_pr_read_keys(c, &t.pr, tpr_done, &t), 0);
	run(5, -1);
	f = pr_task(&t);
	keys_data(d, 8, keys, 2);
	put_be(d + 4, 400 * 8, 4);
	f->task.datain.data = d;
	f->task.datain.size = 8 + 8 + 3; /* one key and a bit */
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.err, 0);
	assert_int_equal(t.pr.nr_keys, 400);
	assert_int_equal(t.pr.nr_kept, 1);

	/* Too short for the header: -EIO. */
	memset(&t, 0, sizeof(t));
	assert_int_equal(iscsi_conn_pr_read_keys(c, &t.pr, tpr_done, &t), 0);
	run(5, -1);
	f = pr_task(&t);
	f->task.datain.data = d;
	f->task.datain.size = 5;
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.err, -EIO);

	/* READ RESERVATION: WERO held by key 0x66fb..., generation 9. */
	memset(&t, 0, sizeof(t));
	assert_int_equal(iscsi_conn_pr_read_reservation(c, &t.pr, tpr_done, &t),
			 0);
	run(5, -1);
	f = pr_task(&t);
	assert_int_equal(f->sa, SCSI_PERSISTENT_RESERVE_READ_RESERVATION);
	memset(d, 0, 24);
	put_be(d, 9, 4);
	put_be(d + 4, 16, 4);
	put_be(d + 8, keys[0], 8);
	d[21] = 0x05; /* scope LU (0), type 5 */
	f->task.datain.data = d;
	f->task.datain.size = 24;
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.err, 0);
	assert_true(t.pr.reserved);
	assert_int_equal(t.pr.generation, 9);
	assert_int_equal(t.pr.holder_key, keys[0]);
	assert_int_equal(t.pr.type, ISCSI_PR_TYPE_WERO);

	/* No reservation: additional length 0. */
	memset(&t, 0, sizeof(t));
	assert_int_equal(iscsi_conn_pr_read_reservation(c, &t.pr, tpr_done, &t),
			 0);
	run(5, -1);
	f = pr_task(&t);
	put_be(d + 4, 0, 4);
	f->task.datain.data = d;
	f->task.datain.size = 8;
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.err, 0);
	assert_false(t.pr.reserved);
	iscsi_conn_destroy(c);
}

/* PREEMPT AND ABORT answered RESERVATION CONFLICT: READ KEYS decides. */
static void preempt_conflict(struct iscsi_conn *c, const uint64_t *keys, int n,
			     int want_err, bool want_done)
{
	static uint8_t d[512];
	struct tpr t = {0};
	struct fake_task *f;

	assert_int_equal(
		iscsi_conn_pr_preempt_abort(c, &t.pr, 0xb, 0xa, tpr_done, &t),
		0);
	run(5, -1);
	fake_due(pr_task(&t), SCSI_STATUS_RESERVATION_CONFLICT);
	run(20, -1);
	assert_int_equal(t.calls, 0);
	f = pr_task(&t);
	assert_non_null(f);
	assert_int_equal(f->kind, K_PR_IN);
	f->task.datain.data = d;
	f->task.datain.size = keys_data(d, 3, keys, n);
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.calls, 1);
	assert_int_equal(t.err, want_err);
	assert_int_equal(t.pr.already_done, want_done);
}

static void test_pr_preempt_verified(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	static const uint64_t ours[] = {0xb}, both[] = {0xb, 0xa},
			      theirs[] = {0xa};
	struct iscsi_conn_stats st;

	preempt_conflict(c, ours, 1, 0, true); /* done already */
	preempt_conflict(c, both, 2, -EACCES, false);
	preempt_conflict(c, theirs, 1, -EACCES, false); /* we are out */
	preempt_conflict(c, NULL, 0, -EACCES, false);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.reservation_conflicts, 0); /* no data refused */
	assert_int_equal(st.pr_commands, 1);
	assert_int_equal(fake.contexts, 1);
	iscsi_conn_destroy(c);
}

/* tgtd refuses PREEMPT AND ABORT: PREEMPT instead, then at once. */
static void test_pr_preempt_fallback(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	struct tpr t = {0};
	struct fake_task *f;

	for (int round = 0; round < 2; round++) {
		memset(&t, 0, sizeof(t));
		assert_int_equal(iscsi_conn_pr_preempt_abort(c, &t.pr, 0xb, 0xa,
							     tpr_done, &t),
				 0);
		run(5, -1);
		f = pr_task(&t);
		if (round == 0) {
			assert_int_equal(
				f->sa,
				SCSI_PERSISTENT_RESERVE_PREEMPT_AND_ABORT);
			f->task.sense.key = SCSI_SENSE_ILLEGAL_REQUEST;
			f->task.sense.ascq =
				SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB;
			fake_due(f, SCSI_STATUS_CHECK_CONDITION);
			run(20, -1);
			assert_int_equal(t.calls, 0);
			f = pr_task(&t);
		}
		assert_int_equal(f->sa, SCSI_PERSISTENT_RESERVE_PREEMPT);
		assert_int_equal(f->sa_key, 0xa);
		fake_due(f, SCSI_STATUS_GOOD);
		run_pr(&t, 100);
		assert_int_equal(t.err, 0);
		assert_true(t.pr.plain_preempt);
	}
	iscsi_conn_destroy(c);
}

/* A fenced host: its WRITE fails with -EACCES, at once, no retry, no
 * reconnect; the connection stays UP and other commands carry on. */
static void test_reservation_conflict_fails_once(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	struct iscsi_conn_stats st;

	prep(0, ISCSI_CMD_WRITE, 8, 2);
	prep(1, ISCSI_CMD_READ, 8, 2);
	sub(c, 0);
	sub(c, 1);
	fake_due(task_of(0), SCSI_STATUS_RESERVATION_CONFLICT);
	run(50, 0);
	assert_int_equal(tc[0].calls, 1);
	assert_int_equal(tc[0].err, -EACCES);
	assert_non_null(task_of(1)); /* untouched, still in flight */
	fake_due(task_of(1), SCSI_STATUS_GOOD);
	run(50, 1);
	assert_int_equal(tc[1].err, 0);
	run(20, -1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_UP);
	assert_int_equal(fake.contexts, 1);
	assert_int_equal(fake.destroyed, 0);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.reservation_conflicts, 1);
	assert_int_equal(st.reconnects, 0);
	assert_int_equal(st.errors, 1);
	iscsi_conn_destroy(c);
}

/* 2A/05 then 2A/04 then 2A/03 in front of a WRITE: taken, retried, the
 * WRITE succeeds; the same for a PR command. */
static void test_pr_unit_attentions_retried(void **state)
{
	static const int ascq[] = {0x2a05, 0x2a04, 0x2a03, 0x2900};
	struct iscsi_conn *c = up_conn(8, 10000);
	struct iscsi_conn_stats st;
	struct tpr t = {0};

	prep(0, ISCSI_CMD_WRITE, 0, 1);
	sub(c, 0);
	for (int n = 0; n < 4; n++) {
		struct fake_task *f = task_of(0);

		assert_non_null(f);
		f->task.sense.key = SCSI_SENSE_UNIT_ATTENTION;
		f->task.sense.ascq = ascq[n];
		fake_due(f, SCSI_STATUS_CHECK_CONDITION);
		run(20, 0);
		assert_int_equal(tc[0].calls, 0);
	}
	fake_due(task_of(0), SCSI_STATUS_GOOD);
	run(50, 0);
	assert_int_equal(tc[0].err, 0);

	assert_int_equal(iscsi_conn_pr_register(c, &t.pr, 5, tpr_done, &t), 0);
	run(5, -1);
	pr_task(&t)->task.sense.key = SCSI_SENSE_UNIT_ATTENTION;
	pr_task(&t)->task.sense.ascq = 0x2a04;
	fake_due(pr_task(&t), SCSI_STATUS_CHECK_CONDITION);
	run(20, -1);
	assert_int_equal(t.calls, 0);
	fake_due(pr_task(&t), SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.err, 0);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.unit_attentions, 5);
	assert_int_equal(st.errors, 0);
	iscsi_conn_destroy(c);
}

/* A PR OUT lost with its session is issued again on the next one. */
static void test_pr_reissued_after_loss(void **state)
{
	struct iscsi_conn *c = up_conn(8, 10000);
	struct iscsi_context *old;
	struct tpr t = {0};
	struct fake_task *f;

	assert_int_equal(iscsi_conn_pr_register(c, &t.pr, 0x77, tpr_done, &t),
			 0);
	run(5, -1);
	old = fake.ctx;
	old->service_ret = -1;
	f = pr_task(&t);
	f->answered = true;
	f->cb(old, SCSI_STATUS_CANCELLED, &f->task, f->priv);
	fake_poke(old);
	run(50, -1);
	assert_int_equal(fake.contexts, 2);
	assert_int_equal(t.calls, 0);
	f = pr_task(&t);
	assert_non_null(f);
	assert_int_equal(f->sa_key, 0x77);
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&t, 100);
	assert_int_equal(t.err, 0);
	iscsi_conn_destroy(c);
}

/* --- admission (cfg.admit) ------------------------------------------------- */

static struct {
	int calls;
	struct iscsi_conn *c;
	struct tpr pr;
} adm;

static void admit_hook(struct iscsi_conn *c, void *opaque)
{
	assert_ptr_equal(opaque, &adm);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_ADMITTING);
	adm.calls++;
	adm.c = c;
	/* What the stripe driver does: a PR command marked as admission. */
	memset(&adm.pr, 0, sizeof(adm.pr));
	adm.pr.pr.admission = true;
	assert_int_equal(
		iscsi_conn_pr_read_keys(c, &adm.pr.pr, tpr_done, &adm.pr), 0);
}

static struct iscsi_conn *admitting_conn(uint32_t timeout_ms)
{
	struct iscsi_conn_cfg cfg = {
		.portal = "127.0.0.1:3260",
		.target = "iqn.2026-11.test:t",
		.lun = 1,
		.queue_depth = 8,
		.cmd_timeout_ms = timeout_ms,
		.login_retries = 2,
		.login_backoff_ms = 1,
		.revive_interval_ms = 5,
		.admit = admit_hook,
		.admit_opaque = &adm,
	};
	struct iscsi_conn *c;

	memset(&adm, 0, sizeof(adm));
	assert_int_equal(iscsi_conn_create(loop, &cfg, &c), 0);
	for (int n = 0; n < 200 && !adm.calls; n++)
		td_loop_run_once(loop, 1);
	assert_int_equal(adm.calls, 1);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_ADMITTING);
	return c;
}

/* Answer the hook's READ KEYS (no keys). */
static void admit_answer(void)
{
	static uint8_t keys[8];
	struct fake_task *f = pr_task(&adm.pr);

	assert_non_null(f);
	f->task.datain.data = keys;
	f->task.datain.size = sizeof(keys);
	fake_due(f, SCSI_STATUS_GOOD);
	run_pr(&adm.pr, 100);
	assert_int_equal(adm.pr.err, 0);
}

/* Held while ADMITTING, the admission command goes; admitted(0) releases
 * them in order; a reconnect admits again before the reissue. */
static void test_admission_holds(void **state)
{
	struct iscsi_conn *c = admitting_conn(10000);
	struct iscsi_context *old;
	struct iscsi_conn_stats st;

	prep(0, ISCSI_CMD_WRITE, 0, 1);
	prep(1, ISCSI_CMD_READ, 1, 1);
	sub(c, 0);
	sub(c, 1);
	run(10, -1);
	assert_null(task_of(0));
	assert_null(task_of(1));
	admit_answer();
	assert_null(task_of(0));
	assert_int_equal(iscsi_conn_admitted(c, 0), 0);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_UP);
	assert_int_equal(iscsi_conn_admitted(c, 0), -ESTALE);
	assert_non_null(task_of(0));
	assert_non_null(task_of(1));
	/* The session breaks: the two come back held until admitted. */
	old = fake.ctx;
	old->service_ret = -1;
	for (int i = 0; i < 2; i++) {
		struct fake_task *t = task_of(i);

		t->answered = true;
		t->cb(old, SCSI_STATUS_CANCELLED, &t->task, t->priv);
	}
	fake_poke(old);
	for (int n = 0; n < 200 && adm.calls < 2; n++)
		td_loop_run_once(loop, 1);
	assert_int_equal(adm.calls, 2);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_ADMITTING);
	assert_null(task_of(0));
	admit_answer();
	assert_null(task_of(0));
	assert_int_equal(iscsi_conn_admitted(c, 0), 0);
	fake_due(task_of(0), SCSI_STATUS_GOOD);
	fake_due(task_of(1), SCSI_STATUS_GOOD);
	run(50, 1);
	assert_int_equal(tc[0].err, 0);
	assert_int_equal(tc[1].err, 0);
	assert_int_equal(order[0], 0);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.reconnects, 1);
	assert_int_equal(st.reissued, 2);
	iscsi_conn_destroy(c);
}

/* Refused: held and later commands fail with EACCES, once; no reconnect. */
static void test_admission_fenced(void **state)
{
	struct iscsi_conn *c = admitting_conn(10000);
	struct iscsi_conn_stats st;

	prep(0, ISCSI_CMD_WRITE, 0, 1);
	sub(c, 0);
	admit_answer();
	assert_int_equal(iscsi_conn_admitted(c, -EACCES), 0);
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_FENCED);
	assert_int_equal(tc[0].calls, 0); /* never inside the call */
	run(20, 0);
	assert_int_equal(tc[0].calls, 1);
	assert_int_equal(tc[0].err, -EACCES);
	prep(1, ISCSI_CMD_READ, 0, 1);
	sub(c, 1);
	run(20, 1);
	assert_int_equal(tc[1].err, -EACCES);
	run(30, -1);
	assert_int_equal(fake.contexts, 1); /* never reconnected */
	assert_int_equal(iscsi_conn_state(c), ISCSI_CONN_FENCED);
	assert_int_equal(iscsi_conn_admitted(c, 0), -EINVAL);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.reservation_conflicts, 2);
	assert_int_equal(tc[0].calls, 1);
	prep(2, ISCSI_CMD_WRITE, 0, 1);
	sub(c, 2);
	iscsi_conn_destroy(c); /* completes it before returning */
	assert_int_equal(tc[2].calls, 1);
}

/* Deadlines run while held; destroy while ADMITTING cancels. */
static void test_admission_deadline_and_destroy(void **state)
{
	struct iscsi_conn *c = admitting_conn(30);

	prep(0, ISCSI_CMD_WRITE, 0, 1);
	sub(c, 0);
	run(200, 0);
	assert_int_equal(tc[0].err, -ETIMEDOUT);
	prep(1, ISCSI_CMD_WRITE, 0, 1);
	sub(c, 1);
	iscsi_conn_destroy(c);
	assert_int_equal(tc[1].calls, 1);
	assert_int_equal(tc[1].err, -ECANCELED);
}

/* --- GET LBA STATUS --------------------------------------------------------- */

static void gls_desc(unsigned int i, uint64_t lba, uint32_t n, int prov)
{
	fake_gls_desc[i].lba = lba;
	fake_gls_desc[i].num_blocks = n;
	fake_gls_desc[i].provisioning = prov;
}

/* Ask lba..+nr with room entries; the answer's status; tc[0].err. */
static int gls_run(struct iscsi_conn *c, struct iscsi_lba_answer *a,
		   uint64_t lba, uint32_t nr, unsigned int nr_desc)
{
	prep(0, ISCSI_CMD_GET_LBA_STATUS, lba, nr);
	tc[0].cmd.lba_status = a;
	fake_gls.num_descriptors = nr_desc;
	sub(c, 0);
	if (task_of(0)) {
		assert_int_equal(task_of(0)->kind, K_GLS);
		assert_int_equal(task_of(0)->lba, lba);
		assert_int_equal(task_of(0)->len, 8 + 16 * a->room);
		fake_due(task_of(0), SCSI_STATUS_GOOD);
	}
	run(50, 0);
	assert_int_equal(tc[0].calls, 1);
	return tc[0].err;
}

static void test_lba_status_needs_lbprz(void **state)
{
	struct iscsi_lba_extent ext[4];
	struct iscsi_lba_answer a = {.room = 4, .ext = ext};
	struct iscsi_conn_stats st;
	struct iscsi_conn *c;

	(void)state;
	fake.lbpme = true; /* LBPRZ 0: a hole's content is not promised */
	c = up_conn(8, 10000);
	prep(0, ISCSI_CMD_GET_LBA_STATUS, 0, 8);
	tc[0].cmd.lba_status = &a;
	sub(c, 0);
	run(50, 0);
	assert_int_equal(tc[0].err, -EOPNOTSUPP);
	assert_int_equal(fake.ctx->nr_tasks, 0); /* never sent */
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.errors, 0);
	/* No answer buffer, or a range past the LUN: -EINVAL. */
	prep(1, ISCSI_CMD_GET_LBA_STATUS, 0, 8);
	sub(c, 1);
	run(50, 1);
	assert_int_equal(tc[1].err, -EINVAL);
	prep(2, ISCSI_CMD_GET_LBA_STATUS, (1 << 20) - 4, 8);
	tc[2].cmd.lba_status = &a;
	sub(c, 2);
	run(50, 2);
	assert_int_equal(tc[2].err, -EINVAL);
	iscsi_conn_destroy(c);
}

static void test_lba_status_answers(void **state)
{
	struct iscsi_lba_extent ext[4];
	struct iscsi_lba_answer a = {.room = 4, .ext = ext};
	struct iscsi_conn_stats st;
	struct iscsi_conn *c;

	(void)state;
	fake.lbpme = fake.lbprz = true;
	c = up_conn(8, 10000);

	/* Clipped to 100..1100; anchored counts as a hole (LBPRZ). */
	gls_desc(0, 100, 50, SCSI_PROVISIONING_TYPE_DEALLOCATED);
	gls_desc(1, 150, 30, SCSI_PROVISIONING_TYPE_MAPPED);
	gls_desc(2, 180, 2000, SCSI_PROVISIONING_TYPE_ANCHORED);
	assert_int_equal(gls_run(c, &a, 100, 1000, 3), 0);
	assert_int_equal(a.nr, 3);
	assert_int_equal(ext[0].lba, 100);
	assert_int_equal(ext[0].nr_blocks, 50);
	assert_true(ext[0].hole);
	assert_int_equal(ext[1].lba, 150);
	assert_int_equal(ext[1].nr_blocks, 30);
	assert_false(ext[1].hole);
	assert_int_equal(ext[2].lba, 180);
	assert_int_equal(ext[2].nr_blocks, 920);
	assert_true(ext[2].hole);

	/* A first descriptor that began before the LBA asked: from it on. */
	gls_desc(0, 0, 300, SCSI_PROVISIONING_TYPE_MAPPED);
	assert_int_equal(gls_run(c, &a, 200, 50, 1), 0);
	assert_int_equal(a.nr, 1);
	assert_int_equal(ext[0].lba, 200);
	assert_int_equal(ext[0].nr_blocks, 50);

	/* Hostile: a gap ends the answer; more runs than room: cut. */
	gls_desc(0, 10, 5, SCSI_PROVISIONING_TYPE_DEALLOCATED);
	gls_desc(1, 20, 5, SCSI_PROVISIONING_TYPE_MAPPED);
	assert_int_equal(gls_run(c, &a, 10, 100, 2), 0);
	assert_int_equal(a.nr, 1);
	assert_int_equal(ext[0].nr_blocks, 5);
	a.room = 2;
	for (unsigned int i = 0; i < 5; i++)
		gls_desc(i, 10 + i, 1, (int)(i % 2));
	assert_int_equal(gls_run(c, &a, 10, 100, 5), 0);
	assert_int_equal(a.nr, 2);
	a.room = 4;

	/* No descriptor for the LBA asked (none, one after it, one of
	 * zero blocks): -EIO. */
	assert_int_equal(gls_run(c, &a, 10, 100, 0), -EIO);
	gls_desc(0, 11, 5, SCSI_PROVISIONING_TYPE_MAPPED);
	assert_int_equal(gls_run(c, &a, 10, 100, 1), -EIO);
	gls_desc(0, 10, 0, SCSI_PROVISIONING_TYPE_MAPPED);
	assert_int_equal(gls_run(c, &a, 10, 100, 1), -EIO);
	iscsi_conn_get_stats(c, &st);
	assert_int_equal(st.lba_status, 4);
	iscsi_conn_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_table),
		cmocka_unit_test(test_portal_syntax),
		cmocka_unit_test_setup_teardown(test_create_rejects, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_queue_depth_fifo, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_checks_at_issue, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sense_retries, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unmap_and_zeroes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_block_limits_split, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_block_limits_piece_fails,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_limits_small_entries,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_limits_absent_or_odd,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_ws_fua_syncs_range, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_session_lost_reissues,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_drops_session,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_login_retries_down_revive,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_login_timeout, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_connect_fails_at_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_unit_attentions,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_cancels, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_destroy_inside_done, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_report, setup, teardown),
		cmocka_unit_test(test_pr_key_table),
		cmocka_unit_test_setup_teardown(test_pr_out_cdbs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pr_in_parse, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pr_preempt_verified, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_reservation_conflict_fails_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pr_preempt_fallback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pr_unit_attentions_retried,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_admission_holds, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_admission_fenced, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_admission_deadline_and_destroy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pr_reissued_after_loss,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lba_status_needs_lbprz,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_lba_status_answers, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
