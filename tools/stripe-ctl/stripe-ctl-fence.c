/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-fence.c - 'stripe-ctl vdisk lease takeover NAME --fence'
 * (issue #18): move the lease, then fence the old holder on the storage
 * servers themselves (SCSI-3 persistent reservations, fence_scsi's
 * semantics), then tell the master (MS_LEASE_FENCED: fence_pending false).
 *
 * Every LUN of the disk is fenced in parallel, in this process, on its own
 * iscsi_conn driven by a td_loop: register our key, preempt the old
 * holder's, make sure a Write Exclusive - Registrants Only reservation
 * exists.  Idempotent and resumable: a LUN already fenced is left as it
 * is, and a run that failed or was killed left the lease fence_pending
 * (the disk unserved) until a rerun completes.  doc/striped-disks.md
 * "Leases" describes it for operators.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/loop.h"
#include "drivers/stripe/iscsi/iscsi-conn.h"
#include "drivers/stripe/iscsi/iscsi-pr.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define NS_PER_MS	    UINT64_C(1000000)
#define US_PER_S	    UINT64_C(1000000)
#define FENCE_HOST_SIZE	    256 /* a portal's host part */
#define FENCE_NUMERIC_SIZE  96	/* an IPv6 address with its scope */
#define FENCE_PORTAL_SIZE   (FENCE_NUMERIC_SIZE + 16)
#define FENCE_ERROR_SIZE    512
#define FENCE_RESERVE_TRIES 3 /* RESERVE refused, reservation gone: again */
#define FENCE_PASS_MS	    100

enum fence_step {
	FS_READ_KEYS = 0, /* is the victim gone and our key there already? */
	FS_REGISTER,	  /* register our key on this session */
	FS_PREEMPT,	  /* preempt (and abort) the victim's key */
	FS_READ_RES,	  /* is there a reservation, of which type? */
	FS_RESERVE,	  /* none: take a WERO one */
};

/* One LUN to fence: its connection and where its steps are. */
struct fence_lun {
	const ms_server *srv;
	const struct stripe_map_server *creds; /* --map's entry, own, NULL */
	struct stripe_map_server own; /* the master's account (issue #20) */
	struct fence_run *run;
	char portal[FENCE_PORTAL_SIZE]; /* numeric, for iscsi_conn */
	struct iscsi_conn *conn;
	struct iscsi_pr_cmd pr;
	struct td_timer deadline;
	enum fence_step step;
	bool registered;   /* this session registered our key */
	bool preempted;	   /* the preempt (or READ KEYS) found it done */
	bool already_done; /* the victim's key was gone already */
	bool plain_preempt;
	bool reserved_now; /* we took the reservation */
	unsigned int reserve_tries;
	bool finished;
	int err;
	char error[FENCE_ERROR_SIZE];
	uint64_t start_ns, took_ns;
};

struct fence_run {
	struct td_loop *loop;
	struct fence_lun *luns;
	unsigned int nr, nr_finished, nr_failed;
	uint64_t key, victim_key;
	const char *initiator;
	unsigned int timeout_s;
};

/* --- portals --------------------------------------------------------------- */

/*
 * Split "host", "host:port", "[v6]" or "[v6]:port" into host and port
 * (3260 when none); 0 or -EINVAL.
 */
static int split_portal(const char *portal, char *host, size_t hsize,
			char *port, size_t psize)
{
	const char *colon, *end = portal + strlen(portal);
	size_t len;

	if (*portal == '[') {
		if (!(colon = strchr(portal, ']')))
			return -EINVAL;
		len = (size_t)(colon - portal - 1);
		portal++;
		colon = colon[1] == ':' ? colon + 1 : NULL;
	} else {
		colon = strrchr(portal, ':');
		len = colon ? (size_t)(colon - portal) : strlen(portal);
	}
	if (!len || len >= hsize || (colon && (!colon[1] || end - colon > 6)))
		return -EINVAL;
	memcpy(host, portal, len);
	host[len] = '\0';
	snprintf(port, psize, "%s", colon ? colon + 1 : "3260");
	return 0;
}

/*
 * The portal with its host name resolved to a numeric address (iscsi_conn
 * never resolves: libiscsi's getaddrinfo would block its loop).  Blocking
 * here is fine: no connection exists yet.  0, or -errno with error set.
 */
static int resolve_portal(struct fence_lun *l)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	char host[FENCE_HOST_SIZE], port[16], num[FENCE_NUMERIC_SIZE];
	int rc;

	if (split_portal(l->srv->portal, host, sizeof(host), port,
			 sizeof(port))) {
		snprintf(l->error, sizeof(l->error), "bad portal '%s'",
			 l->srv->portal);
		return -EINVAL;
	}
	if ((rc = getaddrinfo(host, port, &hints, &ai))) {
		snprintf(l->error, sizeof(l->error), "cannot resolve %s: %s",
			 host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	rc = getnameinfo(ai->ai_addr, ai->ai_addrlen, num, sizeof(num), NULL, 0,
			 NI_NUMERICHOST);
	if (!rc)
		snprintf(l->portal, sizeof(l->portal),
			 ai->ai_family == AF_INET6 ? "[%s]:%s" : "%s:%s", num,
			 port);
	freeaddrinfo(ai);
	if (rc) {
		snprintf(l->error, sizeof(l->error), "cannot resolve %s: %s",
			 host, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	return 0;
}

/* --- one LUN ----------------------------------------------------------------- */

static const char *fence_result(const struct fence_lun *l)
{
	if (!l->finished)
		return "not tried";
	return l->err ? "failed" : "fenced";
}

/* The progress line of a finished LUN, on stderr. */
static void fence_progress(const struct fence_lun *l)
{
	const struct fence_run *r = l->run;

	fprintf(stderr,
		"stripe-ctl: fence %u/%u: %s %s lun %u: ", r->nr_finished,
		r->nr, l->srv->portal, l->srv->target, l->srv->lun);
	if (l->err) {
		fprintf(stderr, "FAILED: %s\n", l->error);
		return;
	}
	fprintf(stderr, "fenced in %" PRIu64 " ms (%s%s%s)\n",
		l->took_ns / NS_PER_MS,
		l->already_done ? "its key was gone already"
				: "its key preempted",
		l->plain_preempt ? "; PREEMPT, not PREEMPT AND ABORT: the "
				   "server lacks it, commands already "
				   "accepted from it were not aborted"
				 : "",
		l->reserved_now ? "; WERO reservation taken"
				: "; WERO reservation held");
}

/* Done with this LUN (err 0: fenced); the connection goes. */
static void fence_finish(struct fence_lun *l, int err)
{
	struct iscsi_conn *c = l->conn;

	if (l->finished)
		return;
	l->finished = true;
	l->err = err;
	if (err && !*l->error)
		snprintf(l->error, sizeof(l->error), "%s%s%s", strerror(-err),
			 c && *iscsi_conn_error(c) ? ": " : "",
			 c ? iscsi_conn_error(c) : "");
	l->took_ns = td_now_ns() - l->start_ns;
	l->run->nr_finished++;
	l->run->nr_failed += err != 0;
	td_loop_timer_cancel(&l->deadline);
	fence_progress(l);
	/* Our registration stays on the LUN after the logout (a registration
	 * outlives its session): it holds the reservation. */
	l->conn = NULL;
	if (c)
		iscsi_conn_destroy(c); /* our pending command: -ECANCELED */
}

static void fence_deadline(struct td_timer *t, void *opaque)
{
	struct fence_lun *l = opaque;
	const char *state =
		l->conn ? iscsi_conn_state_name(iscsi_conn_state(l->conn))
			: "none";

	(void)t;
	snprintf(l->error, sizeof(l->error),
		 "no answer within %u s (connection %s%s%s)", l->run->timeout_s,
		 state, l->conn && *iscsi_conn_error(l->conn) ? ": " : "",
		 l->conn ? iscsi_conn_error(l->conn) : "");
	fence_finish(l, -ETIMEDOUT);
}

static void fence_pr_done(struct iscsi_pr_cmd *pr, int err, void *opaque);

/* Issue the command of l->step; a refusal finishes l. */
static void fence_issue(struct fence_lun *l)
{
	struct fence_run *r = l->run;
	int err;

	switch (l->step) {
	case FS_READ_KEYS:
		err = iscsi_conn_pr_read_keys(l->conn, &l->pr, fence_pr_done,
					      l);
		break;
	case FS_REGISTER:
		err = iscsi_conn_pr_register(l->conn, &l->pr, r->key,
					     fence_pr_done, l);
		break;
	case FS_PREEMPT:
		err = iscsi_conn_pr_preempt_abort(l->conn, &l->pr, r->key,
						  r->victim_key, fence_pr_done,
						  l);
		break;
	case FS_READ_RES:
		err = iscsi_conn_pr_read_reservation(l->conn, &l->pr,
						     fence_pr_done, l);
		break;
	default: /* FS_RESERVE */
		err = iscsi_conn_pr_reserve(l->conn, &l->pr, r->key,
					    fence_pr_done, l);
		break;
	}
	if (err)
		fence_finish(l, err);
}

static void fence_step(struct fence_lun *l, enum fence_step s)
{
	l->step = s;
	fence_issue(l);
}

/* READ KEYS answered: preempt, unless the victim is gone and we are in. */
static void fence_keys_read(struct fence_lun *l)
{
	const struct iscsi_pr_cmd *pr = &l->pr;
	bool complete = pr->nr_kept == pr->nr_keys;

	if (complete && !iscsi_pr_has_key(pr, l->run->victim_key) &&
	    iscsi_pr_has_key(pr, l->run->key)) {
		l->preempted = l->already_done = true;
		fence_step(l, FS_READ_RES);
		return;
	}
	fence_step(l, FS_REGISTER);
}

/* READ RESERVATION answered: a WERO one (anyone's) is what we want. */
static void fence_reservation_read(struct fence_lun *l)
{
	const struct iscsi_pr_cmd *pr = &l->pr;

	if (pr->reserved && pr->type == ISCSI_PR_TYPE_WERO) {
		fence_finish(l, 0);
		return;
	}
	if (pr->reserved) {
		snprintf(l->error, sizeof(l->error),
			 "the LUN holds a reservation of type %u by key "
			 "0x%016" PRIx64 ", not Write Exclusive - Registrants "
			 "Only: release it on the server",
			 pr->type, pr->holder_key);
		fence_finish(l, -EACCES);
		return;
	}
	if (++l->reserve_tries > FENCE_RESERVE_TRIES) {
		snprintf(l->error, sizeof(l->error),
			 "RESERVE refused %u times but no reservation is seen",
			 FENCE_RESERVE_TRIES);
		fence_finish(l, -EACCES);
		return;
	}
	/* RESERVE needs this session registered (the key alone is not). */
	fence_step(l, l->registered ? FS_RESERVE : FS_REGISTER);
}

/* A command of l failed: its message, and l is finished. */
static void fence_pr_failed(struct fence_lun *l, int err)
{
	snprintf(l->error, sizeof(l->error), "%s: %s%s%s",
		 l->step == FS_PREEMPT ? "preempt" : "command",
		 err == -EACCES ? "reservation conflict" : strerror(-err),
		 *iscsi_conn_error(l->conn) ? ": " : "",
		 iscsi_conn_error(l->conn));
	fence_finish(l, err);
}

static void fence_pr_done(struct iscsi_pr_cmd *pr, int err, void *opaque)
{
	struct fence_lun *l = opaque;

	(void)pr;
	if (l->finished) /* -ECANCELED from the destroy after a deadline */
		return;
	if (l->step == FS_RESERVE && err == -EACCES) {
		fence_step(l, FS_READ_RES); /* someone reserved meanwhile */
		return;
	}
	if (err) {
		fence_pr_failed(l, err);
		return;
	}
	switch (l->step) {
	case FS_READ_KEYS:
		fence_keys_read(l);
		break;
	case FS_REGISTER:
		l->registered = true;
		fence_step(l, l->preempted ? FS_RESERVE : FS_PREEMPT);
		break;
	case FS_PREEMPT:
		l->preempted = true;
		l->already_done = l->pr.already_done;
		l->plain_preempt = l->pr.plain_preempt;
		fence_step(l, FS_READ_RES);
		break;
	case FS_READ_RES:
		fence_reservation_read(l);
		break;
	default: /* FS_RESERVE */
		l->reserved_now = true;
		fence_finish(l, 0);
		break;
	}
}

/* Connect and queue the first command (it waits for the login). */
static void fence_start(struct fence_lun *l)
{
	struct fence_run *r = l->run;
	struct iscsi_conn_cfg cfg = {
		.portal = l->portal,
		.target = l->srv->target,
		.lun = l->srv->lun,
		.initiator = r->initiator,
		.chap_user = l->creds ? l->creds->chap_user : NULL,
		.chap_secret = l->creds ? l->creds->chap_secret : NULL,
		.queue_depth = 1,
		.cmd_timeout_ms = r->timeout_s * 1000u,
		.login_retries = ISCSI_CONN_DEFAULT_LOGIN_RETRIES,
		.name = l->srv->target,
	};
	int err;

	l->start_ns = td_now_ns();
	td_loop_timer_arm(r->loop, &l->deadline, r->timeout_s * US_PER_S,
			  fence_deadline, l);
	if ((err = resolve_portal(l))) {
		fence_finish(l, err);
		return;
	}
	if ((err = iscsi_conn_create(r->loop, &cfg, &l->conn))) {
		snprintf(l->error, sizeof(l->error), "iSCSI connection: %s",
			 strerror(-err));
		l->conn = NULL;
		fence_finish(l, err);
		return;
	}
	fence_step(l, FS_READ_KEYS);
}

/* --- the run ------------------------------------------------------------------ */

static bool same_lun(const ms_server *a, const ms_server *b)
{
	return a->lun == b->lun && !strcmp(a->target, b->target);
}

/* --map FILE's entry for this LUN (its CHAP credentials), or NULL. */
static const struct stripe_map_server *map_creds(const struct stripe_map *m,
						 const ms_server *s)
{
	for (uint32_t i = 0; m && i < m->nr_servers; i++)
		if (m->servers[i].lun == s->lun &&
		    !strcmp(m->servers[i].target, s->target))
			return &m->servers[i];
	return NULL;
}

/* Without --map's: the LUN's CHAP account at the master, if any. */
static void master_creds(struct master_client *c, struct fence_lun *l)
{
	snprintf(l->own.target, sizeof(l->own.target), "%s", l->srv->target);
	l->own.lun = l->srv->lun;
	if (!l->creds && !ctl_chap_get(c, &l->own) && l->own.chap_user[0])
		l->creds = &l->own;
}

/* One fence_lun per distinct target + LUN of servers; 0 or -ENOMEM. */
static int fence_plan(struct fence_run *r, const ms_server *servers, u_int n,
		      const struct stripe_map *m, struct master_client *c)
{
	if (!(r->luns = calloc(n ? n : 1, sizeof(*r->luns))))
		return -ENOMEM;
	for (u_int i = 0; i < n; i++) {
		bool seen = false;

		for (unsigned int k = 0; k < r->nr && !seen; k++)
			seen = same_lun(r->luns[k].srv, &servers[i]);
		if (seen)
			continue;
		r->luns[r->nr].srv = &servers[i];
		r->luns[r->nr].creds = map_creds(m, &servers[i]);
		master_creds(c, &r->luns[r->nr]);
		r->luns[r->nr].run = r;
		r->nr++;
	}
	return 0;
}

/* Fence every LUN of the plan; returns when each is fenced or failed. */
static int fence_execute(struct fence_run *r)
{
	enum td_log_level level = td_log_get_level();
	int err;

	if ((err = td_loop_create(&r->loop)))
		return err;
	/* iscsi_conn's own errors (a refused login, a conflict) on stderr;
	 * its routine messages are ours to print. */
	td_log_set_level(TD_LOG_WARN);
	for (unsigned int i = 0; i < r->nr; i++)
		fence_start(&r->luns[i]);
	while (r->nr_finished < r->nr)
		td_loop_run_once(r->loop, FENCE_PASS_MS);
	td_loop_destroy(r->loop);
	r->loop = NULL;
	td_log_set_level(level);
	return 0;
}

/* --- output -------------------------------------------------------------------- */

static void json_fence_luns(struct td_json *j, const struct fence_run *r)
{
	td_json_begin_array(j, "fence");
	for (unsigned int i = 0; i < r->nr; i++) {
		const struct fence_lun *l = &r->luns[i];

		td_json_begin_object(j, NULL);
		td_json_str(j, "portal", l->srv->portal);
		td_json_str(j, "target", l->srv->target);
		td_json_u64(j, "lun", l->srv->lun);
		td_json_str(j, "result", fence_result(l));
		td_json_bool(j, "plain_preempt", l->plain_preempt);
		td_json_bool(j, "already_done", l->already_done);
		td_json_bool(j, "reserved_now", l->reserved_now);
		td_json_str(j, "error", l->err ? l->error : "");
		td_json_u64(j, "time_ms", l->took_ns / NS_PER_MS);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

/* The LUNs as the master listed them (takeover's JSON before fencing). */
static void json_lun_list(struct td_json *j, const ms_server *s, u_int n)
{
	td_json_begin_array(j, "fence_luns");
	for (u_int i = 0; i < n; i++) {
		td_json_begin_object(j, NULL);
		td_json_str(j, "portal", s[i].portal);
		td_json_str(j, "target", s[i].target);
		td_json_u64(j, "lun", s[i].lun);
		td_json_str(j, "address", s[i].address);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

/* What one takeover --fence did, for its output. */
struct fence_outcome {
	const ms_lease *lease;	  /* as the master answered last */
	const ms_server *servers; /* the disk's LUNs */
	u_int nr_servers;
	const char *victim; /* the host fenced, "" for none */
	bool changed, resumed;
	bool fenced;	/* every LUN fenced */
	bool confirmed; /* MS_LEASE_FENCED answered */
	uint64_t took_ns;
};

static int fence_print_json(const struct ctl_opts *o,
			    const struct fence_outcome *f,
			    const struct fence_run *r)
{
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_str(&j, "vdisk", o->arg);
	ctl_json_lease(&j, f->lease);
	td_json_bool(&j, "changed", f->changed);
	td_json_bool(&j, "resumed", f->resumed);
	td_json_str(&j, "fenced_host", f->victim);
	td_json_str(&j, "initiator", r->initiator);
	td_json_bool(&j, "fence_asked", true);
	td_json_bool(&j, "fencing_performed", f->fenced);
	td_json_bool(&j, "fence_confirmed", f->confirmed);
	td_json_u64(&j, "fence_time_ms", f->took_ns / NS_PER_MS);
	json_lun_list(&j, f->servers, f->nr_servers);
	json_fence_luns(&j, r);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

/* The LUNs left unfenced and what that means, on stderr. */
static void fence_print_failure(const struct ctl_opts *o,
				const struct fence_outcome *f,
				const struct fence_run *r)
{
	fprintf(stderr,
		"stripe-ctl: host %s is NOT fenced from %u of %u LUNs:\n",
		f->victim, r->nr_failed, r->nr);
	for (unsigned int i = 0; i < r->nr; i++)
		if (r->luns[i].err)
			fprintf(stderr, "    %s %s lun %u: %s\n",
				r->luns[i].srv->portal, r->luns[i].srv->target,
				r->luns[i].srv->lun, r->luns[i].error);
	fprintf(stderr,
		"stripe-ctl: vdisk %s stays unserved (fence pending: host %s "
		"may still write\nto those LUNs) until 'stripe-ctl vdisk lease "
		"takeover %s --fence' is run\nagain and completes (bring the "
		"servers back, or fix their access first).\n",
		o->arg, f->victim, o->arg);
}

static void fence_print_text(const struct ctl_opts *o,
			     const struct fence_outcome *f,
			     const struct fence_run *r)
{
	if (*f->victim && f->fenced)
		printf("vdisk %s: host %s fenced on %u LUN%s in %" PRIu64
		       " ms%s\n",
		       o->arg, f->victim, r->nr, r->nr == 1 ? "" : "s",
		       f->took_ns / NS_PER_MS,
		       f->confirmed ? "; the master knows (fence done)" : "");
	else if (!*f->victim)
		printf("vdisk %s: nobody to fence (the lease had no other "
		       "holder)\n",
		       o->arg);
	printf("vdisk:               %s\n", o->arg);
	ctl_print_lease(f->lease);
}

/* --- the command ------------------------------------------------------------------ */

/* The master's reply after each step, kept for the output. */
struct fence_replies {
	ms_reply lease;	 /* show, then takeover */
	ms_reply vdisk;	 /* resume: the disk's servers */
	ms_reply fenced; /* MS_LEASE_FENCED */
	bool have_vdisk, have_fenced;
};

static void replies_free(struct fence_replies *rp)
{
	master_reply_free(&rp->lease);
	if (rp->have_vdisk)
		master_reply_free(&rp->vdisk);
	if (rp->have_fenced)
		master_reply_free(&rp->fenced);
}

/*
 * Step (a): the lease moves to host, or (a rerun after a failure or a
 * kill) this host holds it with fence_pending already: resume.  Fills
 * f->lease, servers, changed, resumed; 0 or EXIT_FAILURE (printed).
 */
static int fence_take(const struct ctl_opts *o, struct master_client *c,
		      const char *host, struct fence_replies *rp,
		      struct fence_outcome *f)
{
	const ms_lease *l = &rp->lease.body.ms_body_u.lease;
	uint64_t epoch;

	if (master_call_lease_show(c, o->arg, &rp->lease))
		return ctl_lease_failed(o, c, &rp->lease, "vdisk lease show");
	epoch = o->epoch_given ? o->epoch : l->epoch;
	f->resumed = !strcmp(l->holder, host) && l->fence_pending;
	if (f->resumed && epoch != l->epoch && epoch + 1 != l->epoch)
		return ctl_fail("vdisk %s: this host holds the lease at epoch "
				"%" PRIu64 ", not %" PRIu64 " or the one after",
				o->arg, (uint64_t)l->epoch, epoch);
	if (f->resumed) {
		rp->have_vdisk = true;
		if (master_call_vdisk_lookup(c, o->arg, &rp->vdisk))
			return ctl_call_failed(c, "vdisk lookup");
		f->servers = rp->vdisk.body.ms_body_u.vdisk.servers.servers_val;
		f->nr_servers =
			rp->vdisk.body.ms_body_u.vdisk.servers.servers_len;
	} else {
		master_reply_free(&rp->lease);
		if (master_call_lease_takeover(c, o->arg, host, epoch, true,
					       &rp->lease))
			return ctl_lease_failed(o, c, &rp->lease,
						"vdisk lease takeover");
		f->changed = rp->lease.changed;
		f->servers = l->servers.servers_val;
		f->nr_servers = l->servers.servers_len;
	}
	f->lease = l;
	f->victim = strcmp(l->previous, host) ? l->previous : "";
	return 0;
}

static void fence_announce(const struct ctl_opts *o,
			   const struct fence_outcome *f,
			   const struct fence_run *r)
{
	if (f->resumed)
		fprintf(stderr,
			"stripe-ctl: vdisk %s: this host holds the lease at "
			"epoch %" PRIu64 " with its fence pending: resuming "
			"the fencing of %s\n",
			o->arg, (uint64_t)f->lease->epoch, f->victim);
	else
		fprintf(stderr,
			"stripe-ctl: vdisk %s: %s; held by this host at epoch "
			"%" PRIu64 " (taken from %s)\n",
			o->arg,
			f->changed ? "taken over" : "already so, unchanged",
			(uint64_t)f->lease->epoch,
			*f->lease->previous ? f->lease->previous : "nobody");
	if (*f->victim)
		fprintf(stderr,
			"stripe-ctl: fencing host %s (key 0x%016" PRIx64
			") on %u LUN%s as %s\n",
			f->victim, r->victim_key, r->nr, r->nr == 1 ? "" : "s",
			r->initiator);
}

/* Steps (b) and (c); 0 or EXIT_FAILURE. */
static int fence_and_confirm(const struct ctl_opts *o, struct master_client *c,
			     const char *host, struct fence_replies *rp,
			     struct fence_outcome *f, struct fence_run *r)
{
	uint64_t start = td_now_ns();
	int err;

	fence_announce(o, f, r);
	if (*f->victim && r->nr && (err = fence_execute(r)))
		return ctl_fail("event loop: %s", strerror(-err));
	f->took_ns = td_now_ns() - start;
	f->fenced = r->nr_failed == 0;
	if (!f->fenced)
		return EXIT_FAILURE;
	if (!*f->victim && !f->lease->fence_pending)
		return 0; /* nothing was fenced, nothing is pending */
	rp->have_fenced = true;
	if (master_call_lease_fenced(c, o->arg, host, f->lease->epoch,
				     &rp->fenced)) {
		fprintf(stderr,
			"stripe-ctl: every LUN is fenced but the master was "
			"not told: the fence stays pending until the same "
			"command is run again\n");
		return ctl_lease_failed(o, c, &rp->fenced,
					"vdisk lease fenced");
	}
	f->confirmed = true;
	f->lease = &rp->fenced.body.ms_body_u.lease;
	return 0;
}

int ctl_lease_takeover_fence(const struct ctl_opts *o, struct master_client *c,
			     const char *host, const struct stripe_map *m)
{
	struct fence_replies rp = {0};
	struct fence_outcome f = {0};
	struct fence_run r = {0};
	int status;

	r.initiator =
		o->initiator ? o->initiator : ISCSI_CONN_DEFAULT_INITIATOR;
	r.timeout_s = o->timeout_s;
	r.key = iscsi_conn_pr_key(host);
	if ((status = fence_take(o, c, host, &rp, &f)))
		goto out;
	r.victim_key = iscsi_conn_pr_key(f.victim);
	if (fence_plan(&r, f.servers, f.nr_servers, m, c)) {
		status = ctl_fail("out of memory");
		goto out;
	}
	status = fence_and_confirm(o, c, host, &rp, &f, &r);
	if (status && (!f.lease || r.nr_failed == 0))
		goto out; /* a master call failed: printed */
	if (o->json && fence_print_json(o, &f, &r))
		status = EXIT_FAILURE;
	if (r.nr_failed)
		fence_print_failure(o, &f, &r);
	else if (!o->json)
		fence_print_text(o, &f, &r);
out:
	for (unsigned int i = 0; r.luns && i < r.nr; i++)
		memset(r.luns[i].own.chap_secret, 0,
		       sizeof(r.luns[i].own.chap_secret));
	free(r.luns);
	replies_free(&rp);
	return status;
}
