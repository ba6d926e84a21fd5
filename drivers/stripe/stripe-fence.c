/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-fence.c - SCSI-3 fencing of the stripe driver (issue #18): when
 * the disk's lease is on (dev->lease.enabled, filled at open by
 * stripe-lease.c), every session of an iscsi server is admitted before it
 * carries a command (iscsi_conn_cfg.admit):
 *
 *   READ KEYS (generation g).  Our key there (this host is registered
 *   through another session, so not fenced): REGISTER, READ KEYS again;
 *   generation g + 1 with our key: ensure the reservation, admitted.
 *   Otherwise (key absent: the first registration, a server that lost
 *   its PR state, or a preempt; or the generation moved by more than
 *   one): ask the master, off the loop, whether this host still holds
 *   the lease.  Yes: REGISTER, ensure the reservation, admitted.  No:
 *   UNREGISTER, FENCED (every command of the session fails with EACCES).
 *   Master unreachable: ask again every STRIPE_FENCE_RETRY_MS; the
 *   session stays held meanwhile (the driver's degraded logic goes on
 *   without it: a running disk never waits on the master).
 *
 *   Ensure the reservation: READ RESERVATION; none: RESERVE (WERO, our
 *   key), refused: read again; a WERO reservation by anyone is what we
 *   want (every registrant writes); another type: refused, FENCED.
 *
 * The master is asked by one worker thread per disk; its answer comes
 * back through an eventfd and serves every request made before it was
 * asked.  The decisions are pure functions (stripe_fence_decide,
 * stripe_fence_verdict_of) for the unit tests.
 *
 * Device backends (a kernel open-iscsi session's block device,
 * stripe-bdev.c) are admitted the same way, the same decisions, the same
 * master worker: their PR commands go through SG_IO on the backend's own
 * worker thread (stripe_bdev_pr, stripe-sgio.c) instead of the libiscsi
 * session.  A device where SG_IO is refused (-ENOTTY, -EINVAL: not SCSI,
 * a regular file, a loop device) is admitted unfenced (state off), said
 * once per server; a SCSI LUN without persistent reservations
 * (-EOPNOTSUPP) is held and tried again, as a session's.  A RESERVATION
 * CONFLICT on a device's command (-EBADE from the kernel) admits it again
 * through the same decision before it is declared fenced (stripe-bdev.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/stripe/stripe-int.h"
#include "master/client/client.h"

const char *stripe_fence_state_name(enum stripe_fence_state s)
{
	switch (s) {
	case STRIPE_FENCE_ADMITTING:
		return "admitting";
	case STRIPE_FENCE_REGISTERED:
		return "registered";
	case STRIPE_FENCE_FENCED:
		return "fenced";
	default:
		return "off";
	}
}

/* --- the pure decisions ------------------------------------------------- */

enum stripe_fence_action stripe_fence_decide(const struct stripe_fence_view *v)
{
	switch (v->verdict) {
	case FENCE_VERDICT_HOLDER:
		return FENCE_DO_REGISTER_ASKED;
	case FENCE_VERDICT_FENCED:
		return FENCE_DO_REFUSE;
	case FENCE_VERDICT_UNREACHABLE:
		return FENCE_DO_WAIT;
	case FENCE_VERDICT_NONE:
		break;
	}
	if (!v->have_before || !v->key_before)
		return FENCE_DO_ASK_MASTER;
	if (!v->have_after)
		return FENCE_DO_REGISTER;
	/* Our REGISTER moved the generation by one (tgtd counts a
	 * re-registration too); more means someone else changed the keys
	 * meanwhile, perhaps preempted us: the master decides. */
	if (v->key_after && v->gen_after == v->gen_before + 1)
		return FENCE_DO_RESERVE;
	return FENCE_DO_ASK_MASTER;
}

enum stripe_fence_verdict
stripe_fence_verdict_of(const struct stripe_fence_answer *a, const char *host,
			uint64_t epoch, char *why, size_t why_len)
{
	why[0] = '\0';
	if (a->lease_err && a->lease_err != -EBUSY && a->lease_err != -ESTALE &&
	    a->lease_err != -EPERM && a->lease_err != -ENOENT) {
		snprintf(why, why_len, "the master is unreachable: %s",
			 strerror(-a->lease_err));
		return FENCE_VERDICT_UNREACHABLE;
	}
	if (a->lease_err == -ENOENT) {
		snprintf(why, why_len, "the master does not know the vdisk");
		return FENCE_VERDICT_FENCED;
	}
	if (!a->holder || strcmp(a->holder, host) || a->epoch != epoch) {
		snprintf(why, why_len,
			 "the vdisk is held by %s at epoch %" PRIu64
			 ", this host %s opened it at epoch %" PRIu64,
			 a->holder && *a->holder ? a->holder : "nobody",
			 a->epoch, host, epoch);
		return FENCE_VERDICT_FENCED;
	}
	if (a->fence_pending) {
		snprintf(why, why_len,
			 "the lease's fenced takeover is not "
			 "confirmed yet (fence_pending)");
		return FENCE_VERDICT_FENCED;
	}
	if (a->hosts_err && a->hosts_err != -EPROTONOSUPPORT) {
		snprintf(why, why_len, "the master's fenced hosts: %s",
			 strerror(-a->hosts_err));
		return FENCE_VERDICT_UNREACHABLE;
	}
	if (a->fenced_by) {
		snprintf(why, why_len,
			 "host %s was fenced by %s (epoch %" PRIu64 ")", host,
			 a->fenced_by, a->fenced_epoch);
		return FENCE_VERDICT_FENCED;
	}
	return FENCE_VERDICT_HOLDER;
}

/* --- the worker: asking the master --------------------------------------- */

static int ask_lease(struct stripe_fence *f, struct master_client *mc,
		     struct stripe_fence_answer *a, ms_reply *rep)
{
	int r = master_call_lease_show(mc, f->vdisk, rep);

	a->lease_err = r;
	if ((!r || r == -EBUSY || r == -ESTALE || r == -EPERM) &&
	    rep->body.kind == MS_BODY_LEASE) {
		a->holder = rep->body.ms_body_u.lease.holder;
		a->epoch = rep->body.ms_body_u.lease.epoch;
		a->fence_pending = rep->body.ms_body_u.lease.fence_pending;
		a->lease_err = 0;
	} else if (!r) {
		a->lease_err = -EPROTO;
	}
	return a->lease_err;
}

static void ask_hosts(struct stripe_fence *f, struct master_client *mc,
		      struct stripe_fence_answer *a, ms_reply *rep)
{
	a->hosts_err = master_call_host_list(mc, rep);
	if (a->hosts_err || rep->body.kind != MS_BODY_HOSTS)
		return;
	for (u_int i = 0; i < rep->body.ms_body_u.hosts.hosts_len; i++) {
		const ms_fenced_host *h =
			&rep->body.ms_body_u.hosts.hosts_val[i];

		if (h->host && !strcmp(h->host, f->host)) {
			a->fenced_by = h->by ? h->by : "?";
			a->fenced_epoch = h->epoch;
		}
	}
}

static enum stripe_fence_verdict fence_ask(struct stripe_fence *f,
					   struct master_client *mc, char *why,
					   size_t why_len)
{
	struct stripe_fence_answer a = {0};
	enum stripe_fence_verdict v;
	ms_reply lrep, hrep;

	master_reply_init(&lrep);
	master_reply_init(&hrep);
	if (!ask_lease(f, mc, &a, &lrep))
		ask_hosts(f, mc, &a, &hrep);
	v = stripe_fence_verdict_of(&a, f->host, f->epoch, why, why_len);
	if (v == FENCE_VERDICT_UNREACHABLE && master_client_error(mc)[0])
		snprintf(why + strlen(why), why_len - strlen(why), " (%s)",
			 master_client_error(mc));
	master_reply_free(&lrep);
	master_reply_free(&hrep);
	return v;
}

static void *fence_worker(void *arg)
{
	struct stripe_fence *f = arg;
	struct master_client_opts o = {
		.timeout_ms = STRIPE_FENCE_MASTER_TIMEOUT_MS,
		.retries = STRIPE_FENCE_MASTER_RETRIES,
	};
	struct master_client *mc = NULL;
	uint64_t one = 1;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		char why[sizeof(f->why)];
		enum stripe_fence_verdict v;
		uint64_t req;

		while (!f->stop && f->asked == f->answered)
			pthread_cond_wait(&f->cond, &f->lock);
		if (f->stop)
			break;
		req = f->asked;
		pthread_mutex_unlock(&f->lock);
		if (!mc && master_client_open(f->master, &o, &mc))
			mc = NULL;
		if (mc) {
			v = fence_ask(f, mc, why, sizeof(why));
		} else {
			v = FENCE_VERDICT_UNREACHABLE;
			snprintf(why, sizeof(why), "bad master address %s",
				 f->master);
		}
		pthread_mutex_lock(&f->lock);
		f->answered = req;
		f->verdict = v;
		memcpy(f->why, why, sizeof(why));
		if (write(f->efd, &one, sizeof(one)) < 0)
			abort(); /* an eventfd write fails only on overflow */
	}
	pthread_mutex_unlock(&f->lock);
	master_client_close(mc);
	return NULL;
}

/* --- one server's admission (loop thread) --------------------------------- */

static struct iscsi_conn *srv_conn(struct stripe_server *srv)
{
	return srv->be;
}

static bool srv_is_device(const struct stripe_server *srv)
{
	return srv->ops == &stripe_backend_device;
}

static bool srv_admitting(struct stripe_server *srv)
{
	return srv->ops->state(srv->be) == ISCSI_CONN_ADMITTING;
}

/* The admission's end on the backend: 0 (UP) or -EACCES (FENCED). */
static void srv_admitted(struct stripe_server *srv, int err)
{
	if (srv_is_device(srv))
		stripe_bdev_admitted(srv->be, err);
	else
		iscsi_conn_admitted(srv_conn(srv), err);
}

static const struct stripe_map_server *srv_map(struct stripe_server *srv)
{
	return &srv->dev->map.servers[srv->index];
}

static void fence_step(struct stripe_server *srv);
static void fence_pr_done(struct iscsi_pr_cmd *pr, int err, void *opaque);

static enum iscsi_pr_action step_action(enum stripe_fence_step st)
{
	switch (st) {
	case FENCE_STEP_KEYS_BEFORE:
	case FENCE_STEP_KEYS_AFTER:
		return ISCSI_PR_READ_KEYS;
	case FENCE_STEP_REGISTER:
	case FENCE_STEP_REGISTER_ASKED:
		return ISCSI_PR_REGISTER;
	case FENCE_STEP_READ_RES:
		return ISCSI_PR_READ_RESERVATION;
	case FENCE_STEP_RESERVE:
		return ISCSI_PR_RESERVE;
	default: /* FENCE_STEP_UNREGISTER */
		return ISCSI_PR_UNREGISTER;
	}
}

static int fence_submit_iscsi(struct stripe_server *srv,
			      enum stripe_fence_step st, uint64_t key)
{
	struct stripe_fence_srv *fs = &srv->fence;
	struct iscsi_conn *c = srv_conn(srv);
	int r;

	switch (st) {
	case FENCE_STEP_KEYS_BEFORE:
	case FENCE_STEP_KEYS_AFTER:
		r = iscsi_conn_pr_read_keys(c, &fs->pr, fence_pr_done, srv);
		break;
	case FENCE_STEP_REGISTER:
	case FENCE_STEP_REGISTER_ASKED:
		r = iscsi_conn_pr_register(c, &fs->pr, key, fence_pr_done, srv);
		break;
	case FENCE_STEP_READ_RES:
		r = iscsi_conn_pr_read_reservation(c, &fs->pr, fence_pr_done,
						   srv);
		break;
	case FENCE_STEP_RESERVE:
		r = iscsi_conn_pr_reserve(c, &fs->pr, key, fence_pr_done, srv);
		break;
	default: /* FENCE_STEP_UNREGISTER */
		r = iscsi_conn_pr_unregister(c, &fs->pr, fence_pr_done, srv);
		break;
	}
	return r;
}

static void fence_submit(struct stripe_server *srv, enum stripe_fence_step st)
{
	struct stripe_fence_srv *fs = &srv->fence;
	uint64_t key = srv->dev->lease.key;
	int r;

	fs->step = st;
	fs->busy = true;
	memset(&fs->pr, 0, sizeof(fs->pr));
	fs->pr.admission = true;
	if (srv_is_device(srv))
		r = stripe_bdev_pr(srv->be, &fs->pr, step_action(st), key,
				   fence_pr_done, srv);
	else
		r = fence_submit_iscsi(srv, st, key);
	if (r)
		abort(); /* a zero key, no callback, a busy worker: a bug */
}

static void fence_refuse(struct stripe_server *srv, const char *why)
{
	struct stripe_fence_srv *fs = &srv->fence;
	const struct stripe_map_server *ms = srv_map(srv);

	fs->state = STRIPE_FENCE_FENCED;
	fs->step = FENCE_STEP_IDLE;
	td_vbd_err(srv->dev->drv->vbd,
		   "stripe: this host was fenced from LUN %s %s lun %u "
		   "(server %u) of vdisk %s: %s: its writes are refused; "
		   "the disk must be closed here and the host re-admitted "
		   "(stripe-ctl host readmit) once it no longer holds the "
		   "disk",
		   ms->portal, ms->target, ms->lun, srv->index,
		   srv->dev->map.vdisk, why);
	srv_admitted(srv, -EACCES);
}

static void fence_admitted(struct stripe_server *srv)
{
	struct stripe_fence_srv *fs = &srv->fence;

	fs->step = FENCE_STEP_IDLE;
	fs->state = STRIPE_FENCE_REGISTERED;
	fs->admissions++;
	fs->logged_error = false;
	td_vbd_info(srv->dev->drv->vbd,
		    "stripe: server %u: key 0x%016" PRIx64
		    " registered, WERO reservation held: admitted",
		    srv->index, srv->dev->lease.key);
	srv_admitted(srv, 0);
}

/* SG_IO refused: the device is not SCSI (a regular file, a loop device).
 * A SCSI LUN without persistent reservations (-EOPNOTSUPP) is held and
 * tried again, as a session's. */
static bool fence_not_scsi(const struct stripe_server *srv, int err)
{
	return srv_is_device(srv) && (err == -ENOTTY || err == -EINVAL);
}

/* A device that cannot be fenced: served unfenced, said once. */
static void fence_unfenceable(struct stripe_server *srv, int err)
{
	struct stripe_fence_srv *fs = &srv->fence;

	fs->step = FENCE_STEP_IDLE;
	fs->state = STRIPE_FENCE_OFF;
	if (!fs->logged_not_scsi)
		td_vbd_warn(srv->dev->drv->vbd,
			    "stripe: server %u: device %s is not fenced: it "
			    "is not a SCSI device (SG_IO %s: %s); no SCSI-3 "
			    "registration is made there (doc/stripe-driver.md, "
			    "\"Fencing\")",
			    srv->index, srv_map(srv)->device,
			    iscsi_pr_action_name(fs->pr.action),
			    strerror(-err));
	fs->logged_not_scsi = true;
	srv_admitted(srv, 0);
}

static void fence_ask_master(struct stripe_server *srv)
{
	struct stripe_fence *f = &srv->dev->fence;

	srv->fence.step = FENCE_STEP_ASKING;
	pthread_mutex_lock(&f->lock);
	srv->fence.ask_seq = ++f->asked;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
	f->asks++;
}

/* Act on what decide says, from the view gathered so far. */
static void fence_step(struct stripe_server *srv)
{
	struct stripe_fence_srv *fs = &srv->fence;

	switch (stripe_fence_decide(&fs->view)) {
	case FENCE_DO_REGISTER:
		fence_submit(srv, FENCE_STEP_REGISTER);
		break;
	case FENCE_DO_RESERVE:
		fs->reserve_tries = 0;
		fence_submit(srv, FENCE_STEP_READ_RES);
		break;
	case FENCE_DO_ASK_MASTER:
		fence_ask_master(srv);
		break;
	case FENCE_DO_REGISTER_ASKED:
		fence_submit(srv, FENCE_STEP_REGISTER_ASKED);
		break;
	case FENCE_DO_REFUSE:
		fence_submit(srv, FENCE_STEP_UNREGISTER);
		break;
	case FENCE_DO_WAIT:
		fs->step = FENCE_STEP_ASKING;
		fs->ask_seq = 0; /* asked again by the retry timer */
		break;
	}
}

/* Start (again) from READ KEYS on the session now ADMITTING. */
static void fence_begin(struct stripe_server *srv)
{
	struct stripe_fence_srv *fs = &srv->fence;

	memset(&fs->view, 0, sizeof(fs->view));
	fs->state = STRIPE_FENCE_ADMITTING;
	fence_submit(srv, FENCE_STEP_KEYS_BEFORE);
}

/* The reservation as READ RESERVATION found it. */
static void fence_reservation(struct stripe_server *srv)
{
	struct stripe_fence_srv *fs = &srv->fence;
	char why[160];

	if (!fs->pr.reserved) {
		if (fs->reserve_tries++ < STRIPE_FENCE_MAX_RESERVE_TRIES) {
			fence_submit(srv, FENCE_STEP_RESERVE);
			return;
		}
		fence_refuse(srv, "RESERVE keeps being refused");
		return;
	}
	if (fs->pr.type == ISCSI_PR_TYPE_WERO) {
		fence_admitted(srv);
		return;
	}
	snprintf(why, sizeof(why),
		 "the LUN holds a reservation of type %u (key 0x%016" PRIx64
		 "), not Write Exclusive - Registrants Only: another "
		 "scheme manages it",
		 fs->pr.type, fs->pr.holder_key);
	fence_refuse(srv, why);
}

/* A PR command of the admission failed (not a conflict): start again later. */
static void fence_pr_error(struct stripe_server *srv, int err)
{
	struct stripe_fence_srv *fs = &srv->fence;

	if (!fs->logged_error)
		td_vbd_err(srv->dev->drv->vbd,
			   "stripe: server %u: %s during its admission: %s; "
			   "the session stays held, trying again every %u ms",
			   srv->index, iscsi_pr_action_name(fs->pr.action),
			   strerror(-err), STRIPE_FENCE_RETRY_MS);
	fs->logged_error = true;
	fs->step = FENCE_STEP_ASKING; /* the retry timer restarts it */
	fs->ask_seq = 0;
	fs->view.have_before = false;
	fs->view.verdict = FENCE_VERDICT_NONE;
}

static void fence_arm_retry(struct stripe_dev *dev);

static void fence_pr_done(struct iscsi_pr_cmd *pr, int err, void *opaque)
{
	struct stripe_server *srv = opaque;
	struct stripe_fence_srv *fs = &srv->fence;
	struct stripe_fence_view *v = &fs->view;

	fs->busy = false;
	if (srv->dev->closing || fs->state == STRIPE_FENCE_FENCED)
		return;
	if (fs->step == FENCE_STEP_UNREGISTER) {
		fence_refuse(srv, srv->dev->fence.last_why);
		return;
	}
	if (!srv_admitting(srv)) {
		fs->restart = false; /* the next login calls the hook */
		fs->step = FENCE_STEP_IDLE;
		return;
	}
	if (fs->restart) {
		fs->restart = false;
		fence_begin(srv);
		return;
	}
	if (err == -EACCES && fs->step == FENCE_STEP_RESERVE) {
		fence_submit(srv, FENCE_STEP_READ_RES);
		return;
	}
	if (fence_not_scsi(srv, err)) {
		fence_unfenceable(srv, err);
		return;
	}
	if (err) {
		fence_pr_error(srv, err);
		fence_arm_retry(srv->dev);
		return;
	}
	switch (fs->step) {
	case FENCE_STEP_KEYS_BEFORE:
		v->have_before = true;
		v->gen_before = pr->generation;
		v->key_before = iscsi_pr_has_key(pr, srv->dev->lease.key);
		break;
	case FENCE_STEP_KEYS_AFTER:
		v->have_after = true;
		v->gen_after = pr->generation;
		v->key_after = iscsi_pr_has_key(pr, srv->dev->lease.key);
		break;
	case FENCE_STEP_REGISTER:
		fence_submit(srv, FENCE_STEP_KEYS_AFTER);
		return;
	case FENCE_STEP_REGISTER_ASKED:
		fs->reserve_tries = 0;
		fence_submit(srv, FENCE_STEP_READ_RES);
		return;
	case FENCE_STEP_READ_RES:
	case FENCE_STEP_RESERVE:
		if (fs->step == FENCE_STEP_RESERVE)
			fence_admitted(srv);
		else
			fence_reservation(srv);
		return;
	default:
		return;
	}
	fence_step(srv);
	if (fs->step == FENCE_STEP_ASKING && !fs->ask_seq)
		fence_arm_retry(srv->dev);
}

/* A session of srv logged in, or its device opened (or conflicted). */
static void fence_admit_srv(struct stripe_server *srv)
{
	struct stripe_fence_srv *fs = &srv->fence;

	if (fs->state == STRIPE_FENCE_FENCED) {
		srv_admitted(srv, -EACCES);
		return;
	}
	fs->state = STRIPE_FENCE_ADMITTING;
	if (fs->busy) {
		fs->restart = true;
		return;
	}
	if (fs->step == FENCE_STEP_ASKING && fs->ask_seq)
		return; /* the master's answer goes on with this session */
	fence_begin(srv);
}

/* iscsi_conn_cfg.admit */
static void fence_admit(struct iscsi_conn *c, void *opaque)
{
	fence_admit_srv(opaque);
}

/* stripe_bdev_cfg.admit */
static void fence_admit_device(void *be, void *opaque)
{
	fence_admit_srv(opaque);
}

/* --- the master's answers, the retry timer (loop thread) ------------------ */

static void fence_answer(struct stripe_server *srv, enum stripe_fence_verdict v)
{
	struct stripe_fence_srv *fs = &srv->fence;

	if (v == FENCE_VERDICT_FENCED && !srv_admitting(srv)) {
		fence_refuse(srv, srv->dev->fence.last_why);
		return;
	}
	if (!srv_admitting(srv)) {
		fs->step = FENCE_STEP_IDLE; /* the next login starts again */
		return;
	}
	fs->view.verdict = v;
	fence_step(srv);
	fs->view.verdict = FENCE_VERDICT_NONE;
}

static void fence_efd_cb(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct stripe_dev *dev = opaque;
	struct stripe_fence *f = &dev->fence;
	enum stripe_fence_verdict v;
	uint64_t count, answered;
	bool waiting = false;

	if (read(f->efd, &count, sizeof(count)) != sizeof(count))
		return;
	pthread_mutex_lock(&f->lock);
	answered = f->answered;
	v = f->verdict;
	memcpy(f->last_why, f->why, sizeof(f->last_why));
	pthread_mutex_unlock(&f->lock);
	if (v == FENCE_VERDICT_UNREACHABLE && !f->logged_unreachable)
		td_vbd_warn(dev->drv->vbd,
			    "stripe: vdisk %s: cannot ask the master whether "
			    "this host still holds the lease: %s; the "
			    "sessions that need it stay held (asking again "
			    "every %u ms)",
			    dev->map.vdisk, f->last_why, STRIPE_FENCE_RETRY_MS);
	f->logged_unreachable = v == FENCE_VERDICT_UNREACHABLE;
	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		struct stripe_server *srv = &dev->servers[i];

		if (srv->fence.step != FENCE_STEP_ASKING ||
		    !srv->fence.ask_seq || srv->fence.ask_seq > answered)
			continue;
		fence_answer(srv, v);
		waiting |= srv->fence.step == FENCE_STEP_ASKING &&
			   !srv->fence.ask_seq;
	}
	if (waiting)
		fence_arm_retry(dev);
}

static void fence_retry_cb(struct td_timer *t, void *opaque)
{
	struct stripe_dev *dev = opaque;

	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		struct stripe_server *srv = &dev->servers[i];
		struct stripe_fence_srv *fs = &srv->fence;

		if (fs->step != FENCE_STEP_ASKING || fs->ask_seq || fs->busy)
			continue;
		if (!srv_admitting(srv))
			fs->step = FENCE_STEP_IDLE;
		else if (!fs->view.have_before)
			fence_begin(srv); /* after a PR error */
		else
			fence_ask_master(srv);
	}
}

static void fence_arm_retry(struct stripe_dev *dev)
{
	if (!td_timer_armed(&dev->fence.retry_timer))
		td_loop_timer_arm(dev->drv->loop, &dev->fence.retry_timer,
				  STRIPE_FENCE_RETRY_MS * 1000ull,
				  fence_retry_cb, dev);
}

/* --- start, stop, conflicts ---------------------------------------------- */

static int fence_thread_start(struct stripe_fence *f)
{
	int ret;

	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	/* Signals stay with the loop thread (td_thread_create blocks them). */
	ret = td_thread_create(&f->thread, fence_worker, f);
	f->thread_started = !ret;
	return ret;
}

int stripe_fence_start(struct stripe_dev *dev)
{
	struct stripe_fence *f = &dev->fence;
	int ret;

	f->efd = -1;
	f->started = true; /* stop cleans up from here on */
	if (!dev->lease.enabled || !dev->map.nr_servers)
		return 0;
	f->master = strdup(dev->map.master);
	f->vdisk = strdup(dev->map.vdisk);
	f->host = strdup(dev->lease.host_id);
	f->epoch = dev->lease.epoch;
	if (!f->master || !f->vdisk || !f->host)
		return -ENOMEM;
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->efd < 0)
		return -errno;
	ret = td_loop_add_fd(dev->drv->loop, &f->efd_event, f->efd, EPOLLIN,
			     fence_efd_cb, dev);
	if (!ret)
		ret = fence_thread_start(f);
	if (!ret)
		f->on = true;
	return ret;
}

void stripe_fence_conn_cfg(struct stripe_dev *dev, uint32_t server,
			   struct iscsi_conn_cfg *cfg)
{
	if (!dev->fence.on)
		return;
	dev->servers[server].fence.state = STRIPE_FENCE_ADMITTING;
	cfg->admit = fence_admit;
	cfg->admit_opaque = &dev->servers[server];
}

void stripe_fence_bdev_cfg(struct stripe_dev *dev, uint32_t server,
			   struct stripe_bdev_cfg *cfg)
{
	if (!dev->fence.on)
		return;
	dev->servers[server].fence.state = STRIPE_FENCE_ADMITTING;
	cfg->admit = fence_admit_device;
	cfg->admit_opaque = &dev->servers[server];
}

void stripe_fence_stop(struct stripe_dev *dev)
{
	struct stripe_fence *f = &dev->fence;

	if (!f->started)
		return; /* open failed before stripe_fence_start */
	if (f->thread_started) {
		pthread_mutex_lock(&f->lock);
		f->stop = true;
		pthread_cond_signal(&f->cond);
		pthread_mutex_unlock(&f->lock);
		pthread_join(f->thread, NULL);
		pthread_mutex_destroy(&f->lock);
		pthread_cond_destroy(&f->cond);
		f->thread_started = false;
	}
	if (dev->drv && dev->drv->loop)
		td_loop_timer_cancel(&f->retry_timer);
	td_loop_del_fd(&f->efd_event);
	if (f->efd >= 0)
		close(f->efd);
	f->efd = -1;
	free(f->master);
	free(f->vdisk);
	free(f->host);
	f->master = f->vdisk = f->host = NULL;
	f->on = false;
	f->started = false;
}

void stripe_fence_conflict(struct stripe_dev *dev, struct stripe_server *srv)
{
	struct stripe_fence_srv *fs = &srv->fence;
	const struct stripe_map_server *ms = srv_map(srv);

	fs->reservation_conflicts++;
	/* A device admitted again after the conflict (stripe-bdev.c): its
	 * admission decides; it logged the conflict. */
	if (srv_is_device(srv) && srv_admitting(srv))
		return;
	if (fs->state != STRIPE_FENCE_OFF)
		fs->state = STRIPE_FENCE_FENCED;
	if (fs->logged_conflict)
		return;
	fs->logged_conflict = true;
	td_vbd_err(dev->drv->vbd,
		   "stripe: this host was fenced from LUN %s %s lun %u "
		   "(server %u) of vdisk %s (RESERVATION CONFLICT: its key "
		   "was preempted by a host that took the disk over): its "
		   "writes are refused with EACCES, its replicas are not "
		   "marked stale; the disk must be closed here and the host "
		   "re-admitted (stripe-ctl host readmit) once it no longer "
		   "holds the disk",
		   ms->portal, ms->target, ms->lun, srv->index, dev->map.vdisk);
}
