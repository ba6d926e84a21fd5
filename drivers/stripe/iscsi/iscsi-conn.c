/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-conn.c - the session half of an iSCSI connection: configuration,
 * the loop's fd and timers, attempts and reconnects with back-off, DOWN
 * and revive, stats.  Login and the probe of the LUN are in
 * iscsi-login.c, commands in iscsi-cmd.c; the contract is in
 * iscsi-conn.h.
 *
 * Every attempt gets a fresh libiscsi context and a lost session is
 * dropped with its context: libiscsi's automatic reconnect is off
 * (iscsi_set_noautoreconnect), because it waits whole seconds between
 * attempts and we want our own back-off and per-command deadlines.
 * Dropping a logged-in context makes libiscsi call every outstanding
 * task's callback with SCSI_STATUS_CANCELLED; iscsi-cmd.c puts those
 * commands back at the head of the queue (the matching requeue is
 * iscsi_conn_requeue_front, called right after conn_drop_ctx).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/stripe/iscsi/iscsi-int.h"

static void conn_start_attempt(struct iscsi_conn *c);

void iscsi_conn_set_error(struct iscsi_conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
}

void iscsi_conn_fail_attempt(struct iscsi_conn *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->attempt_err) {
		va_start(ap, fmt);
		vsnprintf(c->error, sizeof(c->error), fmt, ap);
		va_end(ap);
	}
	c->attempt_err = true;
}

const char *iscsi_conn_state_name(enum iscsi_conn_state s)
{
	switch (s) {
	case ISCSI_CONN_CONNECTING:
		return "connecting";
	case ISCSI_CONN_UP:
		return "up";
	case ISCSI_CONN_DOWN:
		return "down";
	case ISCSI_CONN_ADMITTING:
		return "admitting";
	case ISCSI_CONN_FENCED:
		return "fenced";
	}
	return "unknown";
}

/* --- the libiscsi context and the loop ------------------------------------ */

static void conn_fd_cb(struct td_fd *fde, uint32_t events, void *opaque);
static void conn_poll_cb(struct td_timer *t, void *opaque);

/* Watch ctx's fd for what libiscsi wants; it may change between calls. */
static void conn_update_fd(struct iscsi_conn *c)
{
	uint32_t want = 0;
	int fd, ev, r;

	if (!c->ctx) {
		td_loop_del_fd(&c->fde);
		td_loop_timer_cancel(&c->poll_timer);
		return;
	}
	fd = iscsi_get_fd(c->ctx);
	ev = iscsi_which_events(c->ctx);
	if (fd < 0 || ev == 0) {
		/* iscsi.h: nothing to poll now, call iscsi_service(ctx, 0)
		 * again after >= 100 ms. */
		td_loop_del_fd(&c->fde);
		if (!td_timer_armed(&c->poll_timer))
			td_loop_timer_arm(c->loop, &c->poll_timer,
					  ISCSI_CONN_IDLE_POLL_MS * 1000ull,
					  conn_poll_cb, c);
		return;
	}
	td_loop_timer_cancel(&c->poll_timer);
	want = (ev & POLLIN ? EPOLLIN : 0) | (ev & POLLOUT ? EPOLLOUT : 0);
	if (c->fde.loop && c->fde.fd != fd)
		td_loop_del_fd(&c->fde);
	if (c->fde.loop) {
		r = td_loop_mod_fd(&c->fde, want);
		if (r != -ENOENT && r != -EBADF)
			return;
		/* libiscsi closed and reopened the socket under the same
		 * number (a login redirect): register it again. */
		td_loop_del_fd(&c->fde);
	}
	r = td_loop_add_fd(c->loop, &c->fde, fd, want, conn_fd_cb, c);
	if (r < 0) {
		conn_err(c, "cannot watch the iSCSI socket: %s", strerror(-r));
		if (iscsi_conn_has_session(c))
			c->session_lost = true;
		else
			c->attempt_err = true;
	}
}

/* Destroy ctx; its outstanding tasks come back cancelled (see top). */
static void conn_drop_ctx(struct iscsi_conn *c)
{
	struct iscsi_cmd *cmd;

	if (!c->ctx)
		return;
	td_loop_del_fd(&c->fde);
	td_loop_timer_cancel(&c->poll_timer);
	td_loop_timer_cancel(&c->login_timer);
	c->dropping = true;
	iscsi_destroy_context(c->ctx);
	c->dropping = false;
	c->ctx = NULL;
	/* libiscsi calls back only for a logged-in session: take back, by
	 * hand, any task it did not hand back. */
	while ((cmd = TAILQ_FIRST(&c->in_flight))) {
		TAILQ_REMOVE(&c->in_flight, cmd, link);
		c->nr_in_flight--;
		scsi_free_scsi_task(cmd->task);
		cmd->task = NULL;
		iscsi_conn_cmd_lost(c, cmd);
	}
}

static void conn_service(struct iscsi_conn *c, int revents)
{
	if (iscsi_service(c->ctx, revents) < 0) {
		if (iscsi_conn_has_session(c)) {
			if (!c->session_lost)
				iscsi_conn_set_error(c, "%s",
						     iscsi_get_error(c->ctx));
			c->session_lost = true;
		} else {
			iscsi_conn_fail_attempt(c, "%s",
						iscsi_get_error(c->ctx));
		}
	}
	iscsi_conn_settle(c);
}

static void conn_fd_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct iscsi_conn *c = opaque;
	int revents = 0;

	revents |= events & EPOLLIN ? POLLIN : 0;
	revents |= events & EPOLLOUT ? POLLOUT : 0;
	revents |= events & EPOLLERR ? POLLERR : 0;
	revents |= events & EPOLLHUP ? POLLHUP : 0;
	conn_service(c, revents);
}

static void conn_poll_cb(struct td_timer *t, void *opaque)
{
	struct iscsi_conn *c = opaque;

	if (c->ctx)
		conn_service(c, 0);
}

/* --- attempts, DOWN, revive -------------------------------------------- */

static void conn_retry_cb(struct td_timer *t, void *opaque)
{
	struct iscsi_conn *c = opaque;

	if (c->state == ISCSI_CONN_DOWN) {
		/* Revive: one attempt; commands queue meanwhile. */
		c->state = ISCSI_CONN_CONNECTING;
		c->reviving = true;
		c->attempts = 0;
	}
	conn_start_attempt(c);
	iscsi_conn_settle(c);
}

static uint64_t conn_backoff_ms(const struct iscsi_conn *c)
{
	uint64_t ms = c->login_backoff_ms;

	for (uint32_t i = 1; i < c->attempts && ms < ISCSI_CONN_MAX_BACKOFF_MS;
	     i++)
		ms *= 2;
	return ms < ISCSI_CONN_MAX_BACKOFF_MS ? ms : ISCSI_CONN_MAX_BACKOFF_MS;
}

static void conn_go_down(struct iscsi_conn *c)
{
	c->state = ISCSI_CONN_DOWN;
	c->reviving = false;
	td_loop_timer_cancel(&c->busy_timer);
	c->busy_paused = false;
	iscsi_conn_fail_waiting(c, -EIO);
	td_loop_timer_arm(c->loop, &c->retry_timer,
			  c->revive_interval_ms * 1000ull, conn_retry_cb, c);
}

static void conn_attempt_failed(struct iscsi_conn *c)
{
	bool reviving = c->reviving;

	conn_drop_ctx(c);
	/* A session lost during the probe gives its commands back too. */
	iscsi_conn_requeue_front(c, &c->lost);
	c->stats.login_failures++;
	c->attempts++;
	if (reviving || c->attempts > c->login_retries) {
		if (!reviving)
			conn_err(c, "%s lun %u: DOWN after %u attempts: %s",
				 c->portal, c->lun, c->attempts, c->error);
		else
			conn_dbg(c, "revive of %s failed: %s", c->portal,
				 c->error);
		conn_go_down(c);
		return;
	}
	conn_warn(c, "%s lun %u: attempt %u failed: %s; retrying in %llu ms",
		  c->portal, c->lun, c->attempts, c->error,
		  (unsigned long long)conn_backoff_ms(c));
	td_loop_timer_arm(c->loop, &c->retry_timer, conn_backoff_ms(c) * 1000,
			  conn_retry_cb, c);
}

static void conn_login_timeout_cb(struct td_timer *t, void *opaque)
{
	struct iscsi_conn *c = opaque;

	iscsi_conn_fail_attempt(c, "no login to %s within %u ms", c->portal,
				c->cmd_timeout_ms);
	iscsi_conn_settle(c);
}

static void conn_admit_cb(struct td_defer *d, void *opaque)
{
	struct iscsi_conn *c = opaque;

	if (c->state == ISCSI_CONN_ADMITTING && !c->destroyed)
		c->admit(c, c->admit_opaque);
}

static void conn_become_up(struct iscsi_conn *c)
{
	td_loop_timer_cancel(&c->login_timer);
	c->state = c->admit ? ISCSI_CONN_ADMITTING : ISCSI_CONN_UP;
	c->attempts = 0;
	c->reviving = false;
	if (c->ever_up)
		c->stats.reconnects++;
	c->ever_up = true;
	conn_info(c,
		  "%s %s lun %u %s: %llu blocks of %u bytes, unmap %s, "
		  "write same unmap %s, transfer length max %u opt %u blocks",
		  c->portal, c->target, c->lun,
		  c->admit ? "logged in, admitting" : "up",
		  (unsigned long long)c->nr_blocks, c->block_size,
		  c->lbpu ? "yes" : "no", c->lbpws && c->lbprz ? "yes" : "no",
		  c->max_xfer_blocks, c->opt_xfer_blocks);
	/* From the loop: the owner may submit and decide at once. */
	if (c->admit)
		td_loop_defer(c->loop, &c->admit_defer, conn_admit_cb, c);
}

/* Refused: fail what waits, drop the session, never come back. */
static void conn_fence(struct iscsi_conn *c)
{
	uint32_t held;

	c->state = ISCSI_CONN_FENCED;
	td_loop_defer_cancel(c->loop, &c->admit_defer);
	td_loop_timer_cancel(&c->retry_timer);
	td_loop_timer_cancel(&c->busy_timer);
	c->busy_paused = false;
	conn_drop_ctx(c);
	iscsi_conn_requeue_front(c, &c->lost);
	held = c->nr_waiting;
	c->stats.reservation_conflicts += held;
	iscsi_conn_fail_waiting(c, -EACCES);
	iscsi_conn_set_error(c, "fenced: this host's key is not admitted");
	conn_err(c,
		 "%s %s lun %u: this host was fenced from the LUN: %u held "
		 "commands and every later one fail with "
		 "EACCES; " ISCSI_CONN_READMIT_HINT,
		 c->portal, c->target, c->lun, held);
}

int iscsi_conn_admitted(struct iscsi_conn *c, int err)
{
	if (c->destroyed || c->state == ISCSI_CONN_FENCED)
		return -EINVAL;
	if (err == -EACCES) {
		conn_fence(c);
		conn_update_fd(c);
		return 0;
	}
	if (err)
		return -EINVAL;
	if (c->state != ISCSI_CONN_ADMITTING)
		return -ESTALE;
	c->state = ISCSI_CONN_UP;
	conn_info(c, "%s lun %u: admitted: up", c->portal, c->lun);
	iscsi_conn_settle(c);
	return 0;
}

/* Drop a session that was UP and start again at once (see the header). */
void iscsi_conn_lose_session(struct iscsi_conn *c, const char *why)
{
	conn_warn(c, "%s lun %u: session lost (%s); reconnecting", c->portal,
		  c->lun, why);
	conn_drop_ctx(c);
	iscsi_conn_requeue_front(c, &c->lost);
	td_loop_timer_cancel(&c->busy_timer);
	td_loop_defer_cancel(c->loop, &c->admit_defer);
	c->busy_paused = false;
	c->state = ISCSI_CONN_CONNECTING;
	c->reviving = false;
	c->attempts = 0;
	conn_start_attempt(c);
}

static void conn_start_attempt(struct iscsi_conn *c)
{
	c->logged_in = c->probed = c->attempt_err = c->session_lost = false;
	td_loop_timer_arm(c->loop, &c->login_timer, c->cmd_timeout_ms * 1000ull,
			  conn_login_timeout_cb, c);
	if (iscsi_conn_login_begin(c) < 0) {
		c->attempt_err = true;
		conn_attempt_failed(c);
		return;
	}
	conn_update_fd(c);
}

void iscsi_conn_settle(struct iscsi_conn *c)
{
	if (c->state == ISCSI_CONN_CONNECTING && c->ctx) {
		if (c->attempt_err)
			conn_attempt_failed(c);
		else if (c->probed)
			conn_become_up(c);
	} else if (iscsi_conn_has_session(c) && c->session_lost) {
		iscsi_conn_lose_session(c, c->error[0] ? c->error
						       : "connection closed");
	}
	iscsi_conn_issue_waiting(c);
	conn_update_fd(c);
}

/* --- create, destroy ---------------------------------------------------- */

/* "host", "host:port" or "[v6]:port"; port 1..65535. */
static bool portal_valid(const char *p)
{
	const char *port = NULL;
	char *end;
	long n;

	if (!p || !*p || strlen(p) >= MAX_STRING_SIZE)
		return false;
	if (*p == '[') {
		const char *close = strchr(p, ']');

		if (!close || close == p + 1)
			return false;
		if (close[1] == ':')
			port = close + 2;
		else if (close[1])
			return false;
	} else {
		const char *colon = strchr(p, ':');

		if (colon == p || (colon && strchr(colon + 1, ':')))
			return false;
		if (colon)
			port = colon + 1;
	}
	if (!port)
		return true;
	if (*port < '0' || *port > '9')
		return false;
	errno = 0;
	n = strtol(port, &end, 10);
	return !errno && !*end && n >= 1 && n <= 65535;
}

static int conn_check_cfg(const struct iscsi_conn_cfg *cfg)
{
	bool chap = cfg->chap_user && *cfg->chap_user;

	if (!portal_valid(cfg->portal)) {
		td_err("iscsi: bad portal '%s' (host, host:port or [v6]:port)",
		       cfg->portal ? cfg->portal : "");
		return -EINVAL;
	}
	if (!cfg->target || !*cfg->target ||
	    strlen(cfg->target) > ISCSI_NAME_MAX) {
		td_err("iscsi: bad target name '%s'",
		       cfg->target ? cfg->target : "");
		return -EINVAL;
	}
	if (cfg->queue_depth > ISCSI_CONN_MAX_QUEUE_DEPTH ||
	    cfg->lun > INT_MAX) {
		td_err("iscsi: queue depth %u (at most %u) or lun %u too large",
		       cfg->queue_depth, ISCSI_CONN_MAX_QUEUE_DEPTH, cfg->lun);
		return -EINVAL;
	}
	if (chap && (!cfg->chap_secret || !*cfg->chap_secret)) {
		td_err("iscsi: CHAP user '%s' without a secret",
		       cfg->chap_user);
		return -EINVAL;
	}
	return 0;
}

void iscsi_conn_free(struct iscsi_conn *c)
{
	free(c->portal);
	free(c->target);
	free(c->initiator);
	free(c->chap_user);
	free(c->chap_secret);
	free(c->name);
	free(c->zero_buf);
	free(c);
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (!s || !*s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

#define DEFAULT_IF_ZERO(v, d) ((v) ? (v) : (d))

int iscsi_conn_create(struct td_loop *loop, const struct iscsi_conn_cfg *cfg,
		      struct iscsi_conn **out)
{
	struct iscsi_conn *c;
	bool oom = false;
	int r = conn_check_cfg(cfg);

	if (r < 0)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->loop = loop;
	c->portal = dup_or_null(cfg->portal, &oom);
	c->target = dup_or_null(cfg->target, &oom);
	c->initiator = dup_or_null(
		cfg->initiator ? cfg->initiator : ISCSI_CONN_DEFAULT_INITIATOR,
		&oom);
	c->chap_user = dup_or_null(cfg->chap_user, &oom);
	if (c->chap_user)
		c->chap_secret = dup_or_null(cfg->chap_secret, &oom);
	c->name = dup_or_null(cfg->name ? cfg->name : cfg->portal, &oom);
	c->zero_buf = calloc(1, ISCSI_CONN_ZERO_CHUNK_BYTES);
	if (oom || !c->zero_buf) {
		iscsi_conn_free(c);
		return -ENOMEM;
	}
	c->lun = cfg->lun;
	c->queue_depth = DEFAULT_IF_ZERO(cfg->queue_depth,
					 ISCSI_CONN_DEFAULT_QUEUE_DEPTH);
	c->cmd_timeout_ms = DEFAULT_IF_ZERO(cfg->cmd_timeout_ms,
					    ISCSI_CONN_DEFAULT_CMD_TIMEOUT_MS);
	c->login_retries = cfg->login_retries;
	c->login_backoff_ms = DEFAULT_IF_ZERO(
		cfg->login_backoff_ms, ISCSI_CONN_DEFAULT_LOGIN_BACKOFF_MS);
	c->revive_interval_ms = DEFAULT_IF_ZERO(cfg->revive_interval_ms,
						ISCSI_CONN_DEFAULT_REVIVE_MS);
	c->admit = cfg->admit;
	c->admit_opaque = cfg->admit_opaque;
	TAILQ_INIT(&c->waiting);
	TAILQ_INIT(&c->in_flight);
	TAILQ_INIT(&c->done);
	TAILQ_INIT(&c->lost);
	TAILQ_INIT(&c->by_age);
	td_ratelimit_init(&c->rl);
	c->state = ISCSI_CONN_CONNECTING;
	conn_start_attempt(c);
	iscsi_conn_settle(c);
	*out = c;
	return 0;
}

/* Best effort: queue a logout and push it out without waiting. */
static void conn_logout(struct iscsi_conn *c)
{
	if (!iscsi_conn_has_session(c) || !c->ctx || c->nr_in_flight)
		return;
	if (iscsi_logout_async(c->ctx, NULL, NULL) == 0)
		iscsi_service(c->ctx, POLLOUT);
}

void iscsi_conn_destroy(struct iscsi_conn *c)
{
	struct iscsi_cmd *cmd;

	if (!c || c->destroyed)
		return;
	c->destroyed = true;
	conn_logout(c);
	conn_drop_ctx(c);
	td_loop_timer_cancel(&c->retry_timer);
	td_loop_timer_cancel(&c->deadline_timer);
	td_loop_timer_cancel(&c->busy_timer);
	td_loop_defer_cancel(c->loop, &c->admit_defer);
	iscsi_conn_requeue_front(c, &c->lost);
	iscsi_conn_fail_waiting(c, -ECANCELED);
	td_loop_defer_cancel(c->loop, &c->done_defer);
	/* The callbacks run here, before destroy returns (see header); one
	 * of them may submit again: iscsi_conn_complete queues it here too. */
	while ((cmd = TAILQ_FIRST(&c->done))) {
		TAILQ_REMOVE(&c->done, cmd, link);
		c->nr_done--;
		cmd->state = ISCSI_CMD_IDLE;
		cmd->done(cmd, cmd->result);
	}
	td_loop_defer_cancel(c->loop, &c->done_defer);
	/* Inside a done callback: iscsi_conn_dispatch_done frees c on
	 * return. */
	if (!c->dispatching)
		iscsi_conn_free(c);
}

/* --- accessors and stats ------------------------------------------------ */

enum iscsi_conn_state iscsi_conn_state(const struct iscsi_conn *c)
{
	return c->state;
}

uint32_t iscsi_conn_block_size(const struct iscsi_conn *c)
{
	return c->ever_up ? c->block_size : 0;
}

uint64_t iscsi_conn_nr_blocks(const struct iscsi_conn *c)
{
	return c->ever_up ? c->nr_blocks : 0;
}

uint32_t iscsi_conn_max_transfer_blocks(const struct iscsi_conn *c)
{
	return c->ever_up ? c->max_xfer_blocks : 0;
}

uint32_t iscsi_conn_opt_transfer_blocks(const struct iscsi_conn *c)
{
	return c->ever_up ? c->opt_xfer_blocks : 0;
}

bool iscsi_conn_can_unmap(const struct iscsi_conn *c)
{
	return c->ever_up && c->lbpu;
}

const char *iscsi_conn_error(const struct iscsi_conn *c)
{
	return c->error;
}

void iscsi_conn_get_stats(const struct iscsi_conn *c,
			  struct iscsi_conn_stats *st)
{
	*st = c->stats;
	st->state = c->state;
	st->in_flight = c->nr_in_flight;
	st->queued = c->nr_waiting;
}

void iscsi_conn_report(const struct iscsi_conn *c, struct td_json *j,
		       const char *key)
{
	struct iscsi_conn_stats st;

	iscsi_conn_get_stats(c, &st);
	td_json_begin_object(j, key);
	td_json_str(j, "name", c->name);
	td_json_str(j, "portal", c->portal);
	td_json_str(j, "target", c->target);
	td_json_u64(j, "lun", c->lun);
	td_json_str(j, "state", iscsi_conn_state_name(st.state));
	td_json_u64(j, "block_size_bytes", iscsi_conn_block_size(c));
	td_json_u64(j, "size_blocks", iscsi_conn_nr_blocks(c));
	td_json_bool(j, "unmap", iscsi_conn_can_unmap(c));
	td_json_u64(j, "max_transfer_blocks",
		    iscsi_conn_max_transfer_blocks(c));
	td_json_u64(j, "opt_transfer_blocks",
		    iscsi_conn_opt_transfer_blocks(c));
	td_json_u64(j, "queue_depth", c->queue_depth);
	td_json_u64(j, "reads", st.reads);
	td_json_u64(j, "writes", st.writes);
	td_json_u64(j, "syncs", st.syncs);
	td_json_u64(j, "unmaps", st.unmaps);
	td_json_u64(j, "write_zeroes", st.write_zeroes);
	td_json_u64(j, "read_bytes", st.read_bytes);
	td_json_u64(j, "write_bytes", st.write_bytes);
	td_json_u64(j, "errors", st.errors);
	td_json_u64(j, "timeouts", st.timeouts);
	td_json_u64(j, "reissued", st.reissued);
	td_json_u64(j, "reconnects", st.reconnects);
	td_json_u64(j, "login_failures", st.login_failures);
	td_json_u64(j, "splits", st.splits);
	td_json_u64(j, "pr_commands", st.pr_commands);
	td_json_u64(j, "lba_status", st.lba_status);
	td_json_u64(j, "reservation_conflicts", st.reservation_conflicts);
	td_json_u64(j, "unit_attentions", st.unit_attentions);
	td_json_u64(j, "in_flight", st.in_flight);
	td_json_u64(j, "queued", st.queued);
	td_json_u64(j, "max_in_flight", st.max_in_flight);
	td_json_u64(j, "latency_sum_us", st.latency_sum_us);
	td_json_u64(j, "latency_max_us", st.latency_max_us);
	td_json_str(j, "last_error", c->error);
	td_json_end_object(j);
}
