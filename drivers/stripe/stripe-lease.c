/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-lease.c - the disk's lease at the master (issue #18): taken at
 * open (a tapdisk serves a disk only while its host holds the lease),
 * shown in reports, handed over to another host for live migration
 * ("tap-ctl driver -i ID stripe handover HOST").  The sequences are in
 * doc/stripe-driver.md "The lease".
 *
 * Threads: everything runs in the event loop but the hand-over's call to
 * the master, made by a thread of its own (struct stripe_handover's
 * shared part), which answers through an eventfd.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "drivers/stripe/iscsi/iscsi-pr.h"
#include "drivers/stripe/stripe-int.h"
#include "master/client/client.h"
#include "master/hostid.h"
#include "master/reply.h"

/* How often a hand-over looks whether the writes in flight are done. */
#define HANDOVER_DRAIN_POLL_US 1000
#define LEASE_MSG_SIZE	       MASTER_CLIENT_ERROR_SIZE

enum handover_state {
	HO_IDLE = 0,
	HO_DRAINING,  /* new writes held, waiting for those in flight */
	HO_SYNCING,   /* SYNCHRONIZE CACHE on every server */
	HO_CALLING,   /* the thread calls the master */
	HO_UNCERTAIN, /* the call may have run: writes stay held */
	HO_DONE,
	HO_FAILED,
};

struct stripe_handover {
	struct stripe_dev *dev;
	enum handover_state state;
	char to[MASTER_HOST_ID_SIZE];
	struct stripe_req_list held; /* requests held since the start */
	uint32_t held_count;
	struct td_timer timer;
	struct stripe_cmd *syncs; /* one per server */
	uint32_t syncs_pending;
	int sync_err;
	uint32_t sync_server;
	uint64_t start_ns;
	uint64_t stall_us; /* from the start to the end (done or failed) */
	bool failure_told; /* a control reply said why it failed */
	char error[LEASE_MSG_SIZE];

	int efd;
	struct td_fd efd_event;
	pthread_t thread;
	bool thread_running;
	/* the thread's results, read after it was joined */
	int call_ret;
	uint64_t new_epoch;
	char new_holder[MASTER_HOST_ID_SIZE];
	char call_error[LEASE_MSG_SIZE];
};

static const char *const handover_names[] = {
	[HO_IDLE] = "idle",	    [HO_DRAINING] = "draining",
	[HO_SYNCING] = "syncing",   [HO_CALLING] = "calling the master",
	[HO_UNCERTAIN] = "unknown", [HO_DONE] = "done",
	[HO_FAILED] = "failed",
};

/* --- the decision at open ------------------------------------------------------ */

static bool transport_error(int ret)
{
	return ret == -ECONNREFUSED || ret == -ETIMEDOUT ||
	       ret == -ECONNRESET || ret == -EHOSTUNREACH ||
	       ret == -ENETUNREACH || ret == -EPROTONOSUPPORT;
}

static const ms_lease *reply_lease(const ms_reply *rep)
{
	return rep && rep->body.kind == MS_BODY_LEASE
		       ? &rep->body.ms_body_u.lease
		       : NULL;
}

static int verdict_held(const ms_lease *l, const struct stripe_lease_ctx *ctx,
			char *msg, size_t len)
{
	const char *h = l && l->holder ? l->holder : "?";

	snprintf(msg, len,
		 "vdisk %s is held by host %s (lease epoch %" PRIu64
		 "), this host is %s: to move it here, hand it over on %s "
		 "(tap-ctl driver -i ID stripe handover %s, or stripe-ctl "
		 "vdisk lease handover %s --to %s); if %s is dead, take it "
		 "over with fencing: stripe-ctl vdisk lease takeover %s "
		 "--fence",
		 ctx->vdisk, h, l ? (uint64_t)l->epoch : 0, ctx->host, h,
		 ctx->host, ctx->vdisk, ctx->host, h, ctx->vdisk);
	return -EBUSY;
}

static int verdict_error(int ret, const ms_reply *rep,
			 const struct stripe_lease_ctx *ctx, char *msg,
			 size_t len)
{
	const ms_lease *l = reply_lease(rep);

	if (ret == -EBUSY)
		return verdict_held(l, ctx, msg, len);
	if (ret == -EPERM && rep && rep->status == MS_EFENCED) {
		snprintf(msg, len,
			 "this host (%s) was fenced from the storage servers "
			 "when another host took a disk over from it: make "
			 "sure none of its tapdisks still serves a disk taken "
			 "over (stripe-ctl host list), then re-admit it with "
			 "stripe-ctl host readmit %s (the master %s says: "
			 "%.320s)",
			 ctx->host, ctx->host, ctx->master,
			 rep->message && *rep->message ? rep->message
						       : "fenced");
		return -EPERM;
	}
	if (transport_error(ret)) {
		/* a list: the client's error names each master and why */
		bool list =
			strchr(ctx->master, ',') && ctx->error && *ctx->error;

		snprintf(msg, len,
			 "cannot reach the master at %s to take the lease of "
			 "vdisk %s (%s): a disk opens only with its lease; "
			 "disks already running are not affected; start the "
			 "master or check the network",
			 ctx->master, ctx->vdisk,
			 list ? ctx->error : strerror(-ret));
		return -EHOSTUNREACH;
	}
	snprintf(msg, len, "the master at %s refused the lease of vdisk %s: %s",
		 ctx->master, ctx->vdisk,
		 ctx->error && *ctx->error ? ctx->error : strerror(-ret));
	return ret < 0 ? ret : -EPROTO;
}

int stripe_lease_verdict(int ret, const ms_reply *rep,
			 const struct stripe_lease_ctx *ctx, uint64_t *epoch,
			 char *msg, size_t len)
{
	const ms_lease *l = reply_lease(rep);

	if (ret)
		return verdict_error(ret, rep, ctx, msg, len);
	if (!l || !l->holder || strcmp(l->holder, ctx->host))
		return verdict_held(l, ctx, msg, len);
	if (l->fence_pending) {
		snprintf(msg, len,
			 "vdisk %s was taken over with fencing by this host "
			 "(%s, epoch %" PRIu64
			 ") but the old holder %s is not fenced yet: finish "
			 "stripe-ctl vdisk lease takeover %s --fence first",
			 ctx->vdisk, ctx->host, (uint64_t)l->epoch,
			 l->previous && *l->previous ? l->previous : "?",
			 ctx->vdisk);
		return -EAGAIN;
	}
	*epoch = l->epoch;
	return 0;
}

/* --- open ---------------------------------------------------------------------- */

static int lease_acquire(struct stripe_dev *dev, char *msg, size_t len)
{
	struct master_client_opts o = {.timeout_ms = STRIPE_LEASE_TIMEOUT_MS,
				       .retries = STRIPE_LEASE_RETRIES};
	struct stripe_lease *ls = &dev->lease;
	struct stripe_lease_ctx ctx = {.vdisk = dev->map.vdisk,
				       .host = ls->host_id,
				       .master = dev->map.master};
	struct master_client *c;
	ms_reply rep;
	int ret;

	if ((ret = master_client_open(dev->map.master, &o, &c))) {
		snprintf(msg, len,
			 "the map names the master '%s', not "
			 "HOST[:PORT][,HOST[:PORT]...]: "
			 "a disk opens only with its lease from the master",
			 dev->map.master);
		return ret;
	}
	ret = master_call_lease_acquire(c, dev->map.vdisk, ls->host_id, &rep);
	ctx.error = master_client_error(c);
	ret = stripe_lease_verdict(ret, &rep, &ctx, &ls->epoch, msg, len);
	master_reply_free(&rep);
	master_client_close(c);
	return ret;
}

int stripe_lease_open(struct stripe_dev *dev)
{
	struct stripe_lease *ls = &dev->lease;
	char msg[LEASE_MSG_SIZE];
	int ret;

	if (dev->opts.lease_off) {
		td_warn("stripe: %s: lease=off: nothing stops another host "
			"from writing vdisk %s at the same time (use it only "
			"for a map no other host has)",
			dev->path, dev->map.vdisk);
		return 0;
	}
	ret = master_host_id_default(NULL, ls->host_id, msg, sizeof(msg));
	if (!ret)
		ret = lease_acquire(dev, msg, sizeof(msg));
	if (ret)
		return td_driver_fail(dev->drv, ret, "stripe: %s: %s",
				      dev->path, msg);
	ls->enabled = true;
	ls->key = iscsi_conn_pr_key(ls->host_id);
	snprintf(ls->holder, sizeof(ls->holder), "%s", ls->host_id);
	td_info("stripe: %s: host %s holds the lease of vdisk %s at epoch "
		"%" PRIu64,
		dev->path, ls->host_id, dev->map.vdisk, ls->epoch);
	return 0;
}

const char *stripe_lease_state(const struct stripe_dev *dev)
{
	if (!dev->lease.enabled)
		return "off";
	return dev->lease.handed_over ? "handed-over" : "held";
}

/* --- the gate in front of the request path ------------------------------------ */

static bool handover_holds(const struct stripe_handover *ho)
{
	return ho && (ho->state == HO_DRAINING || ho->state == HO_SYNCING ||
		      ho->state == HO_CALLING || ho->state == HO_UNCERTAIN);
}

bool stripe_lease_handover_busy(const struct stripe_dev *dev)
{
	return dev->lease.handed_over || handover_holds(dev->lease.ho);
}

int stripe_lease_submit(struct td_driver *drv, struct td_request *req)
{
	struct stripe_dev *dev = drv->data;
	struct stripe_handover *ho = dev->lease.ho;

	if (dev->lease.handed_over) {
		td_vbd_err(drv->vbd,
			   "stripe: %s refused: the lease of vdisk %s was "
			   "handed over to %s (epoch %" PRIu64 ")",
			   td_op_name(req->op), dev->map.vdisk,
			   dev->lease.holder, dev->lease.epoch);
		return -EACCES;
	}
	if (handover_holds(ho) && req->op != TD_OP_READ) {
		struct stripe_req *sr = req->priv;

		sr->req = req;
		sr->dev = dev;
		TAILQ_INSERT_TAIL(&ho->held, sr, wait_link);
		ho->held_count++;
		return 0;
	}
	return stripe_io_submit(drv, req);
}

/* Held requests: failed with err, or (err 0) sent on as before. */
static void handover_release_held(struct stripe_handover *ho, int err)
{
	struct stripe_req *sr;

	while ((sr = TAILQ_FIRST(&ho->held))) {
		struct td_request *req = sr->req;
		int ret = err;

		TAILQ_REMOVE(&ho->held, sr, wait_link);
		ho->held_count--;
		if (!ret)
			ret = stripe_io_submit(ho->dev->drv, req);
		if (ret)
			td_complete(req, ret);
	}
}

/* --- hand-over ------------------------------------------------------------------ */

static void handover_end(struct stripe_handover *ho, enum handover_state st)
{
	struct stripe_dev *dev = ho->dev;

	ho->state = st;
	ho->stall_us = (td_now_ns() - ho->start_ns) / 1000;
	td_loop_timer_cancel(&ho->timer);
	if (st == HO_DONE) {
		td_vbd_warn(dev->drv->vbd,
			    "stripe: %s: the lease of vdisk %s is handed over "
			    "to %s at epoch %" PRIu64
			    ": every request fails with EACCES from now on "
			    "(writes held %" PRIu64 " us)",
			    dev->path, dev->map.vdisk, dev->lease.holder,
			    dev->lease.epoch, ho->stall_us);
		handover_release_held(ho, -EACCES);
	} else {
		td_vbd_err(dev->drv->vbd,
			   "stripe: %s: hand-over of vdisk %s to %s failed: "
			   "%s; writes go on here",
			   dev->path, dev->map.vdisk, ho->to, ho->error);
		handover_release_held(ho, 0);
	}
}

static void *handover_thread(void *opaque)
{
	struct stripe_handover *ho = opaque;
	struct stripe_dev *dev = ho->dev;
	struct master_client_opts o = {.timeout_ms = STRIPE_LEASE_TIMEOUT_MS,
				       .retries = STRIPE_LEASE_RETRIES};
	struct master_client *c;
	uint64_t one = 1;
	ms_reply rep;
	sigset_t all;

	/* SIGPIPE of a lost connection, and every other, stays pending. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	master_reply_init(&rep);
	ho->call_ret = master_client_open(dev->map.master, &o, &c);
	if (!ho->call_ret) {
		ho->call_ret = master_call_lease_handover(
			c, dev->map.vdisk, dev->lease.host_id, dev->lease.epoch,
			ho->to, &rep);
		snprintf(ho->call_error, sizeof(ho->call_error), "%s",
			 master_client_error(c));
		master_client_close(c);
	}
	if (reply_lease(&rep)) {
		const ms_lease *l = reply_lease(&rep);

		ho->new_epoch = l->epoch;
		snprintf(ho->new_holder, sizeof(ho->new_holder), "%s",
			 l->holder ? l->holder : "");
	}
	master_reply_free(&rep);
	if (write(ho->efd, &one, sizeof(one)) != sizeof(one))
		td_err("stripe: cannot wake the event loop: %s",
		       strerror(errno));
	return NULL;
}

/* Whether the call may have changed the lease though it failed. */
static bool call_ambiguous(int ret)
{
	return ret == -ETIMEDOUT || ret == -ECONNRESET || ret == -EPROTO;
}

static void handover_answer(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct stripe_handover *ho = opaque;
	struct stripe_lease *ls = &ho->dev->lease;
	uint64_t n;

	(void)fde;
	(void)events;
	if (read(ho->efd, &n, sizeof(n)) != sizeof(n))
		return;
	pthread_join(ho->thread, NULL);
	ho->thread_running = false;
	if (!ho->call_ret && !strcmp(ho->new_holder, ho->to)) {
		ls->handed_over = true;
		ls->epoch = ho->new_epoch;
		snprintf(ls->holder, sizeof(ls->holder), "%s", ho->to);
		handover_end(ho, HO_DONE);
		return;
	}
	snprintf(ho->error, sizeof(ho->error), "%s",
		 ho->call_error[0] ? ho->call_error : strerror(-ho->call_ret));
	if (call_ambiguous(ho->call_ret)) {
		/* The master may have moved the lease: never two writers. */
		ho->state = HO_UNCERTAIN;
		ho->stall_us = (td_now_ns() - ho->start_ns) / 1000;
		td_vbd_err(ho->dev->drv->vbd,
			   "stripe: hand-over of vdisk %s to %s: no answer "
			   "from the master (%s): it may have moved the lease, "
			   "so writes stay held; repeat the hand-over when the "
			   "master answers",
			   ho->dev->map.vdisk, ho->to, ho->error);
		return;
	}
	handover_end(ho, HO_FAILED);
}

static int handover_call(struct stripe_handover *ho)
{
	int ret;

	ho->state = HO_CALLING;
	ho->call_ret = 0;
	ho->call_error[0] = ho->new_holder[0] = '\0';
	ret = -pthread_create(&ho->thread, NULL, handover_thread, ho);
	if (ret) {
		snprintf(ho->error, sizeof(ho->error),
			 "cannot start a thread: %s", strerror(-ret));
		handover_end(ho, HO_FAILED);
		return ret;
	}
	ho->thread_running = true;
	return 0;
}

/* One SYNCHRONIZE CACHE fewer to wait for (err from server srv). */
static void handover_sync_put(struct stripe_handover *ho, int err, uint32_t srv)
{
	if (err && !ho->sync_err) {
		ho->sync_err = err;
		ho->sync_server = srv;
	}
	if (--ho->syncs_pending)
		return;
	if (ho->sync_err) {
		snprintf(ho->error, sizeof(ho->error),
			 "SYNCHRONIZE CACHE on server %u failed: %s",
			 ho->sync_server, strerror(-ho->sync_err));
		handover_end(ho, HO_FAILED);
		return;
	}
	handover_call(ho);
}

static void handover_sync_done(struct stripe_cmd *sc, int err)
{
	handover_sync_put(sc->srv->dev->lease.ho, err, sc->srv->index);
}

/* Every server with live replicas makes what it took durable. */
static void handover_sync(struct stripe_handover *ho)
{
	struct stripe_dev *dev = ho->dev;

	ho->state = HO_SYNCING;
	ho->sync_err = 0;
	ho->syncs_pending = 1; /* dropped below, after the loop */
	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		struct stripe_cmd *sc = &ho->syncs[i];

		if (!dev->servers[i].live_slots)
			continue;
		memset(sc, 0, sizeof(*sc));
		sc->io.op = ISCSI_CMD_SYNC;
		sc->srv = &dev->servers[i];
		sc->done = handover_sync_done;
		ho->syncs_pending++;
		stripe_cmd_submit(dev, sc);
	}
	handover_sync_put(ho, 0, 0);
}

/* Nothing that writes is in flight or waiting inside the driver. */
static bool dev_quiet(const struct stripe_dev *dev)
{
	return TAILQ_EMPTY(&dev->writes) && TAILQ_EMPTY(&dev->stale.waiters) &&
	       TAILQ_EMPTY(&dev->lock.waiting) &&
	       TAILQ_EMPTY(&dev->flush_cur) && TAILQ_EMPTY(&dev->flush_next) &&
	       !dev->round_active;
}

static void handover_drain_poll(struct td_timer *t, void *opaque)
{
	struct stripe_handover *ho = opaque;

	(void)t;
	if (!dev_quiet(ho->dev)) {
		td_loop_timer_arm(ho->dev->drv->loop, &ho->timer,
				  HANDOVER_DRAIN_POLL_US, handover_drain_poll,
				  ho);
		return;
	}
	handover_sync(ho);
}

static int handover_alloc(struct stripe_dev *dev, struct stripe_handover **out)
{
	struct stripe_handover *ho = calloc(1, sizeof(*ho));
	int ret;

	if (!ho)
		return -ENOMEM;
	ho->dev = dev;
	TAILQ_INIT(&ho->held);
	ho->syncs = calloc(dev->nr_servers ? dev->nr_servers : 1,
			   sizeof(*ho->syncs));
	ho->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!ho->syncs || ho->efd < 0) {
		ret = ho->efd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	ret = td_loop_add_fd(dev->drv->loop, &ho->efd_event, ho->efd, EPOLLIN,
			     handover_answer, ho);
	if (ret)
		goto fail;
	*out = ho;
	return 0;
fail:
	if (ho->efd >= 0)
		close(ho->efd);
	free(ho->syncs);
	free(ho);
	return ret;
}

void stripe_lease_close(struct stripe_dev *dev)
{
	struct stripe_handover *ho = dev->lease.ho;

	if (!ho)
		return;
	if (ho->thread_running)
		pthread_join(ho->thread, NULL); /* bounded by its timeouts */
	td_loop_timer_cancel(&ho->timer);
	td_loop_del_fd(&ho->efd_event);
	close(ho->efd);
	/* The core closes with no request in flight: nothing is held. */
	free(ho->syncs);
	free(ho);
	dev->lease.ho = NULL;
}

/* --- control ---------------------------------------------------------------------- */

static int handover_status(struct stripe_dev *dev, struct td_strbuf *out)
{
	struct stripe_handover *ho = dev->lease.ho;

	switch (ho->state) {
	case HO_DONE:
		td_strbuf_printf(out,
				 "handed over: vdisk %s is held by %s at epoch "
				 "%" PRIu64 " (writes were held %" PRIu64
				 " us); this tapdisk refuses all I/O\n",
				 dev->map.vdisk, dev->lease.holder,
				 dev->lease.epoch, ho->stall_us);
		return 0;
	case HO_FAILED:
		ho->failure_told = true;
		td_strbuf_printf(out,
				 "hand-over to %s failed: %s; writes go on "
				 "here (repeat the command to try again)",
				 ho->to, ho->error);
		return -EIO;
	default:
		td_strbuf_printf(out,
				 "handing over vdisk %s to %s: %s (%u writes "
				 "held); repeat the command to see the "
				 "result\n",
				 dev->map.vdisk, ho->to,
				 handover_names[ho->state], ho->held_count);
		return 0;
	}
}

static int handover_check(struct stripe_dev *dev, const char *to,
			  struct td_strbuf *out)
{
	struct stripe_handover *ho = dev->lease.ho;

	if (!dev->lease.enabled) {
		td_strbuf_puts(out, "no lease to hand over (lease=off)");
		return -EINVAL;
	}
	if (!master_host_id_ok(to)) {
		td_strbuf_printf(
			out, "bad host id '%.64s': 1-63 of [A-Za-z0-9._-]", to);
		return -EINVAL;
	}
	if (ho && ho->state != HO_IDLE && ho->state != HO_FAILED &&
	    strcmp(ho->to, to)) {
		td_strbuf_printf(out, "a hand-over to %s is %s", ho->to,
				 handover_names[ho->state]);
		return -EBUSY;
	}
	if (!strcmp(to, dev->lease.host_id)) {
		td_strbuf_printf(out, "this host (%s) holds the lease already",
				 to);
		return -EINVAL;
	}
	if (dev->resync.state == STRIPE_RESYNC_RUNNING) {
		td_strbuf_puts(out, "a resync is running: stop it first "
				    "(stripe resync stop)");
		return -EBUSY;
	}
	if (dev->scrub.state == STRIPE_SCRUB_RUNNING) {
		td_strbuf_puts(out, "a scrub is running: stop it first "
				    "(stripe verify stop)");
		return -EBUSY;
	}
	return 0;
}

static int control_handover(struct stripe_dev *dev, const char *to,
			    struct td_strbuf *out)
{
	struct stripe_handover *ho;
	int ret = handover_check(dev, to, out);

	if (ret)
		return ret;
	if (!dev->lease.ho && (ret = handover_alloc(dev, &dev->lease.ho))) {
		td_strbuf_printf(out, "cannot start: %s", strerror(-ret));
		return ret;
	}
	ho = dev->lease.ho;
	if (ho->state == HO_UNCERTAIN) {
		handover_call(ho); /* the same call again: idempotent */
		return handover_status(dev, out);
	}
	if (ho->state != HO_IDLE &&
	    (ho->state != HO_FAILED || !ho->failure_told))
		return handover_status(dev, out);
	snprintf(ho->to, sizeof(ho->to), "%s", to);
	ho->error[0] = '\0';
	ho->failure_told = false;
	ho->state = HO_DRAINING;
	ho->start_ns = td_now_ns();
	td_vbd_info(dev->drv->vbd,
		    "stripe: %s: handing vdisk %s over to %s: new writes are "
		    "held",
		    dev->path, dev->map.vdisk, to);
	handover_drain_poll(&ho->timer, ho);
	return handover_status(dev, out);
}

int stripe_lease_control(struct stripe_dev *dev, int argc, char **argv,
			 struct td_strbuf *out)
{
	if (!strcmp(argv[0], "lease") && argc == 1) {
		stripe_lease_report_text(dev, out);
		return 0;
	}
	if (!strcmp(argv[0], "handover") && argc == 2)
		return control_handover(dev, argv[1], out);
	td_strbuf_puts(out, "usage: lease | handover HOST");
	return -EINVAL;
}

/* --- reports ------------------------------------------------------------------------ */

void stripe_lease_report_json(struct stripe_dev *dev, struct td_json *j)
{
	const struct stripe_lease *ls = &dev->lease;

	td_json_begin_object(j, "lease");
	td_json_str(j, "state", stripe_lease_state(dev));
	td_json_str(j, "host_id", ls->host_id);
	td_json_str(j, "holder", ls->holder);
	td_json_u64(j, "epoch", ls->epoch);
	if (ls->ho) {
		td_json_begin_object(j, "handover");
		td_json_str(j, "state", handover_names[ls->ho->state]);
		td_json_str(j, "to", ls->ho->to);
		td_json_u64(j, "held_requests", ls->ho->held_count);
		td_json_u64(j, "stall_us", ls->ho->stall_us);
		td_json_str(j, "error", ls->ho->error);
		td_json_end_object(j);
	}
	td_json_end_object(j);
}

void stripe_lease_report_text(struct stripe_dev *dev, struct td_strbuf *sb)
{
	const struct stripe_lease *ls = &dev->lease;

	if (!ls->enabled) {
		td_strbuf_puts(sb, "lease: off (lease=off: nothing stops "
				   "another host from writing this disk)\n");
		return;
	}
	td_strbuf_printf(
		sb, "lease: %s, holder %s, epoch %" PRIu64 ", this host %s\n",
		stripe_lease_state(dev), ls->holder, ls->epoch, ls->host_id);
	if (ls->ho && ls->ho->state != HO_IDLE)
		td_strbuf_printf(sb, "hand-over to %s: %s%s%s\n", ls->ho->to,
				 handover_names[ls->ho->state],
				 ls->ho->error[0] ? ": " : "", ls->ho->error);
}
