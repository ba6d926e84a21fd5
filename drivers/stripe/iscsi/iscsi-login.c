/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-login.c - one attempt of an iSCSI connection: a fresh libiscsi
 * context, TCP connect, login (CHAP when configured), then the probe of
 * the LUN: READ CAPACITY(16) for the block size and size (retried over the
 * UNIT ATTENTIONs of a fresh session) and, when the LUN has logical block
 * provisioning, the Logical Block Provisioning VPD page for UNMAP and
 * WRITE SAME with UNMAP, then the Block Limits VPD page (0xB0) for the
 * transfer lengths.  The callbacks run inside iscsi_service(); they
 * only set c->logged_in, c->probed or c->attempt_err (with the error
 * text), which iscsi_conn_settle() in iscsi-conn.c acts on.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "drivers/stripe/iscsi/iscsi-int.h"

/* Not fatal: a LUN without the page (or a bad one) has no limit. */
static void login_take_limits(struct iscsi_conn *c, int status,
			      struct scsi_task *task)
{
	struct scsi_inquiry_block_limits *bl;

	c->max_xfer_blocks = c->opt_xfer_blocks = 0;
	if (status != SCSI_STATUS_GOOD || !(bl = scsi_datain_unmarshall(task)))
		return;
	c->max_xfer_blocks = bl->max_xfer_len;
	/* SBC: OPTIMAL is at most MAXIMUM; a target that says otherwise is
	 * not believed. */
	if (!c->max_xfer_blocks || bl->opt_xfer_len <= c->max_xfer_blocks)
		c->opt_xfer_blocks = bl->opt_xfer_len;
}

/*
 * A probe's INQUIRY answered by a lost or dropped session: note the loss
 * once (a drop we asked for is not an error), free the task; true when the
 * callback must stop there.
 */
static bool probe_cancelled(struct iscsi_conn *c, int status,
			    struct scsi_task *task)
{
	if (status != SCSI_STATUS_CANCELLED && !c->dropping)
		return false;
	if (!c->dropping && !c->attempt_err) {
		iscsi_conn_set_error(c, "session lost during the probe");
		c->attempt_err = true;
	}
	scsi_free_scsi_task(task);
	return true;
}

static void login_bl_cb(struct iscsi_context *ctx, int status, void *data,
			void *opaque)
{
	struct iscsi_conn *c = opaque;
	struct scsi_task *task = data;

	if (probe_cancelled(c, status, task))
		return;
	login_take_limits(c, status, task);
	scsi_free_scsi_task(task);
	c->probed = true;
}

/* The last step of the probe: the Block Limits page. */
static void login_limits(struct iscsi_conn *c)
{
	if (!iscsi_inquiry_task(c->ctx, c->lun, 1,
				SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS, 255,
				login_bl_cb, c)) {
		iscsi_conn_set_error(c, "INQUIRY: %s", iscsi_get_error(c->ctx));
		c->attempt_err = true;
	}
}

static void login_lbp_cb(struct iscsi_context *ctx, int status, void *data,
			 void *opaque)
{
	struct iscsi_conn *c = opaque;
	struct scsi_task *task = data;
	struct scsi_inquiry_logical_block_provisioning *lbp;

	if (probe_cancelled(c, status, task))
		return;
	/* Not fatal: a LUN without the page simply cannot unmap. */
	c->lbpu = c->lbpws = false;
	if (status == SCSI_STATUS_GOOD &&
	    (lbp = scsi_datain_unmarshall(task))) {
		c->lbpu = lbp->lbpu;
		c->lbpws = lbp->lbpws;
		c->lbprz = c->lbprz || lbp->lbprz;
	}
	scsi_free_scsi_task(task);
	login_limits(c);
}

static int login_take_capacity(struct iscsi_conn *c, struct scsi_task *task)
{
	struct scsi_readcapacity16 *rc = scsi_datain_unmarshall(task);
	uint32_t bs;

	if (!rc) {
		iscsi_conn_set_error(c, "READ CAPACITY(16): unreadable answer");
		return -EIO;
	}
	bs = rc->block_length;
	if (bs < 512 || bs > (1u << 20) || (bs & (bs - 1)) ||
	    rc->returned_lba == UINT64_MAX) {
		iscsi_conn_set_error(c, "READ CAPACITY(16): bad block size %u",
				     bs);
		return -EIO;
	}
	if (c->ever_up && bs != c->block_size) {
		iscsi_conn_set_error(c,
				     "block size changed from %u to %u bytes",
				     c->block_size, bs);
		return -EIO;
	}
	if (c->ever_up && rc->returned_lba + 1 != c->nr_blocks)
		conn_warn(c, "LUN size changed from %llu to %llu blocks",
			  (unsigned long long)c->nr_blocks,
			  (unsigned long long)rc->returned_lba + 1);
	c->block_size = bs;
	c->nr_blocks = rc->returned_lba + 1;
	c->lbpme = rc->lbpme;
	c->lbprz = rc->lbprz;
	return 0;
}

static void login_rc16_cb(struct iscsi_context *ctx, int status, void *data,
			  void *opaque);

static void login_probe(struct iscsi_conn *c)
{
	if (!iscsi_readcapacity16_task(c->ctx, c->lun, login_rc16_cb, c)) {
		iscsi_conn_set_error(c, "READ CAPACITY(16): %s",
				     iscsi_get_error(c->ctx));
		c->attempt_err = true;
	}
}

static void login_rc16_cb(struct iscsi_context *ctx, int status, void *data,
			  void *opaque)
{
	struct iscsi_conn *c = opaque;
	struct scsi_task *task = data;
	int r = -EIO;

	if (c->dropping) {
		scsi_free_scsi_task(task);
		return;
	}
	if (status == SCSI_STATUS_CHECK_CONDITION &&
	    task->sense.key == SCSI_SENSE_UNIT_ATTENTION &&
	    ++c->probe_uas <= ISCSI_CONN_MAX_LOGIN_UAS) {
		/* A fresh session reports a power-on or reset first. */
		scsi_free_scsi_task(task);
		login_probe(c);
		return;
	}
	if (status == SCSI_STATUS_GOOD)
		r = login_take_capacity(c, task);
	else if (status == SCSI_STATUS_CHECK_CONDITION)
		iscsi_conn_set_error(c, "READ CAPACITY(16): %s (0x%04x)",
				     scsi_sense_key_str(task->sense.key),
				     task->sense.ascq);
	else
		iscsi_conn_set_error(c, "READ CAPACITY(16): status 0x%x: %s",
				     status, iscsi_get_error(ctx));
	scsi_free_scsi_task(task);
	if (r < 0) {
		c->attempt_err = true;
		return;
	}
	if (!c->lbpme) {
		c->lbpu = c->lbpws = false;
		login_limits(c);
		return;
	}
	if (!iscsi_inquiry_task(
		    ctx, c->lun, 1,
		    SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING, 255,
		    login_lbp_cb, c)) {
		iscsi_conn_set_error(c, "INQUIRY: %s", iscsi_get_error(ctx));
		c->attempt_err = true;
	}
}

/* What to do about a login the target refused for authentication. */
static const char *auth_hint(const struct iscsi_conn *c, const char *err)
{
	if (!strstr(err, "Authentication"))
		return "";
	return c->chap_user ? " (CHAP: the target refused the map's account; "
			      "fix it with 'stripe-ctl server chap', then "
			      "'vdisk map')"
			    : " (CHAP: the target wants an account; set it "
			      "with 'stripe-ctl server chap', then 'vdisk "
			      "map')";
}

static void login_done_cb(struct iscsi_context *ctx, int status, void *data,
			  void *opaque)
{
	struct iscsi_conn *c = opaque;
	const char *err;

	if (c->dropping)
		return;
	if (status != SCSI_STATUS_GOOD) {
		err = iscsi_get_error(ctx);
		iscsi_conn_fail_attempt(c, "login to %s %s: %s%s", c->portal,
					c->target, err, auth_hint(c, err));
		return;
	}
	c->logged_in = true;
	c->probe_uas = 0;
	login_probe(c);
}

/*
 * TCP connected (or not).  iscsi_connect_async + iscsi_login_async rather
 * than iscsi_full_connect_async: the latter leaks its state (24 bytes) for
 * every attempt destroyed before the login answered, e.g. each login that
 * timed out against a stopped server.
 */
static void login_tcp_cb(struct iscsi_context *ctx, int status, void *data,
			 void *opaque)
{
	struct iscsi_conn *c = opaque;

	if (c->dropping)
		return;
	if (status != SCSI_STATUS_GOOD) {
		iscsi_conn_fail_attempt(c, "connect to %s: %s", c->portal,
					iscsi_get_error(ctx));
		return;
	}
	if (iscsi_login_async(ctx, login_done_cb, c) < 0) {
		iscsi_conn_set_error(c, "login to %s: %s", c->portal,
				     iscsi_get_error(ctx));
		c->attempt_err = true;
	}
}

static int login_new_ctx(struct iscsi_conn *c)
{
	struct iscsi_context *ctx = iscsi_create_context(c->initiator);

	if (!ctx) {
		iscsi_conn_set_error(c, "cannot create a libiscsi context");
		return -ENOMEM;
	}
	if (iscsi_set_targetname(ctx, c->target) ||
	    iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL) ||
	    iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE) ||
	    (c->chap_user && iscsi_set_initiator_username_pwd(
				     ctx, c->chap_user, c->chap_secret))) {
		iscsi_conn_set_error(c, "libiscsi set-up: %s",
				     iscsi_get_error(ctx));
		iscsi_destroy_context(ctx);
		return -EINVAL;
	}
	iscsi_set_noautoreconnect(ctx, 1);
	c->ctx = ctx;
	return 0;
}

int iscsi_conn_login_begin(struct iscsi_conn *c)
{
	int r = login_new_ctx(c);

	if (r < 0)
		return r;
	if (iscsi_connect_async(c->ctx, c->portal, login_tcp_cb, c) < 0) {
		iscsi_conn_set_error(c, "connect to %s: %s", c->portal,
				     iscsi_get_error(c->ctx));
		return -EIO;
	}
	return 0;
}
