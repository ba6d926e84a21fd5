/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-resync.c - stripe-ctl vdisk resync FILE: copy every stale
 * replica of a striped disk from a live one and clear its mark, with the
 * stripe driver's own resync (drivers/stripe-resync.c).
 *
 * Online: when a tapdisk holds FILE open (its lock: stripe_map_open says
 * -EBUSY), the tapdisk of the run directory whose chain names FILE
 * (tools/ctl-client.h) is sent "driver stripe resync [RATE]" over its
 * control socket, and its "driver stripe status" is polled until the run
 * ends and the cleared marks are durable.  The disk stays in service; the
 * copy is throttled to RATE.
 * Offline: else stripe-ctl serves the disk itself for the time of the
 * copy: a vbd with the chain stripe:FILE on a private event loop, the
 * same driver, the same command, the loop driven until the run ends; the
 * close writes the cleared marks.
 * Offline, the driver takes the disk's lease at the master as this host
 * (issue #18), so the lease is looked at first: held by another host,
 * the resync is refused (it must run on that host, or after the lease is
 * released or handed over); free, the open takes it and it is released
 * again at the end, at the epoch the open took it at, whatever the
 * outcome; this host's, it stays.  The driver's own refusals (a fence
 * pending, this host fenced, the master unreachable) are printed as the
 * driver says them.  A -EBUSY from the open is the file's lock (a tapdisk
 * of this host took it meanwhile: online) only when the file is locked.
 * Either way the file decides: the command succeeds only when it has no
 * stale replica left.  SIGINT or SIGTERM stops the run after the chunk in
 * flight (the replicas not yet copied stay stale).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "drivers/drivers.h"
#include "master/client/host-id.h"
#include "master/reply.h"
#include "tapdisk/control/control.h"
#include "tapdisk/control/ctl-client.h"
#include "tapdisk/vbd.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define POLL_MS		   250	 /* how often the status is asked */
#define DURABLE_TIMEOUT_MS 30000 /* for the cleared marks to be written */
#define STOP_TIMEOUT_MS	   60000 /* for a stopped run to end */
#define NS_PER_MS	   1000000ull
#define NS_PER_S	   1000000000ull
#define STATE_SIZE	   16
#define ERROR_SIZE	   256
#define VBD_NAME	   "stripe-ctl"
#define MSG_SIZE	   (PATH_MAX + 1024)

/* The lease before an offline open (LEASE_UNKNOWN: not looked at, or the
 * master did not say). */
enum lease_before { LEASE_UNKNOWN = 0, LEASE_FREE, LEASE_MINE };

static volatile sig_atomic_t interrupted;

/* What "driver stripe status" says of the run (block-stripe.c). */
struct progress {
	char state[STATE_SIZE]; /* idle, running, done, failed, stopped */
	uint64_t total, done, failed, bytes;
	bool have_slot;
	unsigned int column, extent, replica;
	uint64_t slot_bytes, extent_bytes;
	unsigned int stale, pending; /* stale replicas, marks not durable */
	char last_error[ERROR_SIZE];
};

struct job {
	const struct ctl_opts *o;
	char path[PATH_MAX]; /* FILE's realpath */
	char vdisk[STRIPE_MAP_NAME_SIZE];
	char master[STRIPE_MAP_MASTER_SIZE];
	unsigned int stale_before;
	bool *was_stale;    /* per slot, before the run */
	size_t stale_slots; /* entries of was_stale */
	/* online: the tapdisk's pid and control socket */
	int pid;
	char sock[PATH_MAX];
	/* offline: the disk served here */
	struct td_loop *loop;
	struct td_vbd *vbd;
	/* offline: the lease */
	char host[MASTER_HOST_ID_SIZE]; /* this host's id */
	enum lease_before lease;
	bool taken;	     /* the open took a free lease at epoch */
	uint64_t epoch;	     /* taken at, or held at (LEASE_MINE) */
	const char *outcome; /* --json "lease": released, kept, NULL */
	/* the progress line */
	bool tty;
	bool line_open; /* a \r line is on the terminal */
	uint64_t start_ns;
	char last_slot[64]; /* what the last non-tty line said */
	struct progress p;
};

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* SIGINT and SIGTERM set interrupted; no SA_RESTART, so waits end. */
static void catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* --- the driver's status -------------------------------------------------------- */

/* The line of text that starts with prefix (its rest), or NULL. */
static const char *find_line(const char *text, const char *prefix)
{
	size_t len = strlen(prefix);

	for (const char *l = text; l && *l;) {
		if (!strncmp(l, prefix, len))
			return l + len;
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return NULL;
}

/*
 * "resync: STATE, A of B replicas done, F failed, N bytes copied
 *  [; copying column C extent X replica R: D of E bytes]
 *  [; last error: MESSAGE]" and "stale replicas: N (P marks not yet
 * durable)...".  0, or -EPROTO when the text is not that.
 */
static int parse_status(const char *text, struct progress *p)
{
	const char *l = find_line(text, "resync: "), *s;
	size_t n;

	memset(p, 0, sizeof(*p));
	if (!l ||
	    sscanf(l,
		   "%15[a-z], %" SCNu64 " of %" SCNu64
		   " replicas done, %" SCNu64 " failed, %" SCNu64,
		   p->state, &p->done, &p->total, &p->failed, &p->bytes) != 5)
		return -EPROTO;
	n = strcspn(l, "\n");
	if ((s = strstr(l, "; copying column ")) && (size_t)(s - l) < n)
		p->have_slot = sscanf(s,
				      "; copying column %u extent %u replica "
				      "%u: %" SCNu64 " of %" SCNu64,
				      &p->column, &p->extent, &p->replica,
				      &p->slot_bytes, &p->extent_bytes) == 5;
	if ((s = strstr(l, "; last error: ")) && (size_t)(s - l) < n)
		snprintf(p->last_error, sizeof(p->last_error), "%.*s",
			 (int)(n - (size_t)(s + 14 - l)), s + 14);
	l = find_line(text, "stale replicas: ");
	if (!l || sscanf(l, "%u (%u", &p->stale, &p->pending) != 2)
		return -EPROTO;
	return 0;
}

/* --- talking to the driver: over a socket, or in this process ------------------- */

/*
 * "driver stripe WORDS" to the tapdisk, or to the vbd served here: 0 with
 * the reply in out, or -errno with the reason in out.
 */
static int command(struct job *job, const char *words, struct td_strbuf *out)
{
	char line[TD_CTL_LINE_MAX], *argv[TD_CTL_MAX_ARGS], *save = NULL;
	struct td_ctl_reply r;
	int argc = 0, err;

	td_strbuf_reset(out);
	if (job->vbd) {
		snprintf(line, sizeof(line), "%s", words);
		for (char *w = strtok_r(line, " ", &save);
		     w && argc < TD_CTL_MAX_ARGS;
		     w = strtok_r(NULL, " ", &save))
			argv[argc++] = w;
		return td_vbd_driver_control(job->vbd, "stripe", argc, argv,
					     out);
	}
	snprintf(line, sizeof(line), "driver stripe %s", words);
	td_ctl_reply_init(&r);
	err = td_ctl_call(job->sock, line, (int)job->o->timeout_s * 1000, &r);
	if (err)
		td_strbuf_printf(out, "tapdisk %d does not answer on %s: %s",
				 job->pid, job->sock, strerror(-err));
	else if ((err = r.err))
		td_strbuf_puts(out, r.message);
	else
		td_strbuf_append(out, r.payload.data, r.payload.len);
	td_ctl_reply_free(&r);
	return err;
}

/* Let POLL_MS pass: a sleep online, the event loop's passes offline. */
static void wait_a_while(struct job *job)
{
	uint64_t end = td_now_ns() + POLL_MS * NS_PER_MS;

	if (!job->loop) {
		poll(NULL, 0, POLL_MS);
		return;
	}
	for (uint64_t now; !interrupted && (now = td_now_ns()) < end;)
		td_loop_run_once(job->loop, (int)((end - now + NS_PER_MS - 1) /
						  NS_PER_MS));
}

/* --- the progress line (stderr) -------------------------------------------------- */

static void progress_text(const struct job *job, char *buf, size_t size)
{
	const struct progress *p = &job->p;
	uint64_t ns = td_now_ns() - job->start_ns;
	char bytes[32], rate[32];
	int n;

	ctl_format_bytes(p->bytes, bytes, sizeof(bytes));
	ctl_format_bytes(ns ? (uint64_t)((double)p->bytes * NS_PER_S / ns) : 0,
			 rate, sizeof(rate));
	n = snprintf(buf, size, "resync: %" PRIu64 " of %" PRIu64 " replicas",
		     p->done, p->total);
	if (p->have_slot && p->extent_bytes && n > 0 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n,
			      ", column %u extent %u replica %u %3" PRIu64 "%%",
			      p->column, p->extent, p->replica,
			      p->slot_bytes * 100 / p->extent_bytes);
	if (n > 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, ", %s copied, %s/s%s",
			 bytes, rate, p->failed ? ", some failed" : "");
}

/* On a tty one line redrawn in place; else a line per replica. */
static void show_progress(struct job *job)
{
	char text[256], slot[sizeof(job->last_slot)];

	progress_text(job, text, sizeof(text));
	if (job->tty) {
		fprintf(stderr, "\r%s\033[K", text);
		job->line_open = true;
		return;
	}
	snprintf(slot, sizeof(slot), "%" PRIu64 " %u %u %u", job->p.done,
		 job->p.column, job->p.extent, job->p.replica);
	if (job->p.have_slot && strcmp(slot, job->last_slot)) {
		fprintf(stderr, "%s\n", text);
		snprintf(job->last_slot, sizeof(job->last_slot), "%s", slot);
	}
}

static void end_progress(struct job *job)
{
	if (job->line_open)
		fputc('\n', stderr);
	job->line_open = false;
}

/* --- the run ----------------------------------------------------------------------- */

/* Poll the status until the run is over; 0, or an exit status printed. */
static int follow(struct job *job, struct td_strbuf *out)
{
	bool stop_sent = false;
	uint64_t stop_deadline = 0;
	int err;

	for (;;) {
		if ((err = command(job, "status", out)) ||
		    (err = parse_status(td_strbuf_str(out), &job->p))) {
			end_progress(job);
			return ctl_fail("cannot follow the resync: %s",
					err == -EPROTO ? "the driver's status "
							 "is not understood"
						       : td_strbuf_str(out));
		}
		show_progress(job);
		if (strcmp(job->p.state, "running"))
			return 0;
		if (interrupted && !stop_sent) {
			stop_sent = true;
			stop_deadline =
				td_now_ns() + STOP_TIMEOUT_MS * NS_PER_MS;
			end_progress(job);
			fprintf(stderr, "stripe-ctl: interrupted: stopping the "
					"resync after the chunk in flight\n");
			command(job, "resync stop", out);
		}
		if (stop_sent && td_now_ns() > stop_deadline) {
			end_progress(job);
			return ctl_fail("the resync did not stop within %d s",
					STOP_TIMEOUT_MS / 1000);
		}
		wait_a_while(job);
	}
}

/* Online: the cleared marks are written by tapdisk's map writer. */
static int wait_durable(struct job *job, struct td_strbuf *out)
{
	uint64_t deadline = td_now_ns() + DURABLE_TIMEOUT_MS * NS_PER_MS;
	struct progress p;

	while (td_now_ns() < deadline) {
		if (command(job, "status", out) ||
		    parse_status(td_strbuf_str(out), &p))
			return ctl_fail("tapdisk %d: cannot see whether the "
					"cleared marks were written: %s",
					job->pid, td_strbuf_str(out));
		if (!p.pending)
			return 0;
		wait_a_while(job);
	}
	return ctl_fail("tapdisk %d has not written the cleared marks to %s "
			"within %d s; see its log",
			job->pid, job->path, DURABLE_TIMEOUT_MS / 1000);
}

/*
 * The servers whose session is not up, from the status's "server N
 * PORTAL TARGET lun L: STATE, ..." lines; the first one described in
 * what.  -1 when the status cannot be had.
 */
static int servers_not_up(struct job *job, struct td_strbuf *out, char *what,
			  size_t size)
{
	int n = 0;

	if (command(job, "status", out))
		return -1;
	for (const char *l = td_strbuf_str(out); l && *l;) {
		size_t len = strcspn(l, "\n");
		/* the first ": " (a portal's or an IQN's ':' has no space) */
		const char *colon = memmem(l, len, ": ", 2);

		if (!strncmp(l, "server ", 7) && colon &&
		    strncmp(colon, ": up,", 5) && !n++)
			snprintf(what, size, "%.*s",
				 (int)(strcspn(colon + 2, ",") +
				       (size_t)(colon + 2 - l)),
				 l);
		l = l[len] ? l + len + 1 : NULL;
	}
	return n;
}

/*
 * A replica on a server whose session is down (just revived, say: a
 * DOWN session tries again every few seconds) would fail at once: wait,
 * at most --timeout, for every session to be up, then start anyway.
 */
static void wait_servers(struct job *job, struct td_strbuf *out)
{
	uint64_t deadline = td_now_ns() + job->o->timeout_s * NS_PER_S;
	char what[512] = "";
	int n;

	while ((n = servers_not_up(job, out, what, sizeof(what))) > 0 &&
	       td_now_ns() < deadline && !interrupted)
		wait_a_while(job);
	if (n > 0)
		fprintf(stderr,
			"stripe-ctl: %d servers are not up after %u s (%s); "
			"their stale replicas cannot be resynchronised\n",
			n, job->o->timeout_s, what);
}

/* Start the run and follow it; 0, or an exit status printed. */
static int run(struct job *job)
{
	char words[64];
	struct td_strbuf out;
	int err, status;

	if (job->o->rate_bytes_per_s)
		snprintf(words, sizeof(words), "resync %" PRIu64,
			 job->o->rate_bytes_per_s);
	else
		snprintf(words, sizeof(words), "resync");
	td_strbuf_init(&out);
	wait_servers(job, &out);
	job->start_ns = td_now_ns();
	err = command(job, words, &out);
	if (err == -EALREADY && job->pid) {
		fprintf(stderr,
			"stripe-ctl: tapdisk %d is already resynchronising "
			"%s; following that run\n",
			job->pid, job->path);
	} else if (err) {
		status = job->pid
				 ? ctl_fail("tapdisk %d refused the resync: %s",
					    job->pid, td_strbuf_str(&out))
				 : ctl_fail("the resync did not start: %s",
					    td_strbuf_str(&out));
		td_strbuf_free(&out);
		return status;
	} else if (!strncmp(td_strbuf_str(&out), "nothing to resync", 17)) {
		/* Every stale replica lacks a live source: the file says. */
		td_strbuf_free(&out);
		return 0;
	}
	status = follow(job, &out);
	end_progress(job);
	if (!status && job->pid && !strcmp(job->p.state, "done"))
		status = wait_durable(job, &out);
	td_strbuf_free(&out);
	return status;
}

/* --- where the disk is served -------------------------------------------------- */

static int run_online(struct job *job)
{
	const char *run_dir = td_ctl_run_dir(job->o->run_dir);
	char who[32] = "another process";
	unsigned int silent = 0;
	int err, holder;

	err = td_ctl_find_serving(run_dir, "stripe", job->path,
				  (int)job->o->timeout_s * 1000, &job->pid,
				  &silent);
	if (err == -ENOENT) {
		if ((holder = td_ctl_flock_holder(job->path)))
			snprintf(who, sizeof(who), "process %d", holder);
		return ctl_fail(
			"%s is locked by %s, but no tapdisk in %s serves "
			"it%s; give the run directory of its tapdisk "
			"(--run-dir or $" TD_CTL_RUN_DIR_ENV "), or stop it",
			job->path, who, run_dir,
			silent ? " (some tapdisks did not answer)" : "");
	}
	if (err)
		return ctl_fail("cannot read the run directory %s: %s", run_dir,
				strerror(-err));
	if ((err = td_ctl_socket_path(job->sock, sizeof(job->sock), run_dir,
				      job->pid)))
		return ctl_fail("%s: %s", run_dir, strerror(-err));
	fprintf(stderr,
		"stripe-ctl: %s is served by tapdisk %d: resynchronising "
		"online\n",
		job->path, job->pid);
	return run(job);
}

/* --- the lease (offline) ---------------------------------------------------------- */

/* A client of the master the map names, the one the driver asks; NULL
 * when the map's text is not HOST[:PORT] (the open says so). */
static struct master_client *lease_client(const struct job *job)
{
	struct master_client_opts co = {.timeout_ms = job->o->timeout_s * 1000,
					.retries = job->o->retries};
	struct master_client *c;

	return master_client_open(job->master, &co, &c) ? NULL : c;
}

/* Another host holds the lease: refused, nothing opened; EXIT_FAILURE. */
static int refuse_held(const struct job *job, const ms_lease *l)
{
	char msg[MSG_SIZE];
	struct td_strbuf sb;
	struct td_json j;

	snprintf(msg, sizeof(msg),
		 "vdisk %s is held by host %s (lease epoch %" PRIu64
		 "), this host is %s and no tapdisk of it serves %s: an "
		 "offline resync serves the disk as this host, so run it on "
		 "%s (it goes through the tapdisk there), or once %s has "
		 "released the lease or handed it over here (stripe-ctl vdisk "
		 "lease release|handover %s); nothing was written",
		 job->vdisk, l->holder, (uint64_t)l->epoch, job->host,
		 job->path, l->holder, l->holder, job->vdisk);
	if (job->o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "file", job->path);
		td_json_str(&j, "vdisk", job->vdisk);
		ctl_json_lease(&j, l);
		td_json_str(&j, "error", master_status_name(MS_EHELD));
		td_json_str(&j, "message", msg);
		td_json_end_object(&j);
		ctl_print_json(&j, &sb);
	}
	return ctl_fail("%s", msg);
}

/*
 * Before an offline open: who holds the lease.  Another host: refused (an
 * exit status printed).  Free or this host's: noted, 0.  Not known (the
 * master unreachable, the disk unknown to it): 0, and the open says why
 * in the driver's own words.  The driver is to act as this host too.
 */
static int check_lease(struct job *job)
{
	struct master_client *c;
	const ms_lease *l = NULL;
	ms_reply rep;
	int status;

	if ((status = ctl_host_id(job->o, job->host)))
		return status;
	if (setenv(MASTER_HOST_ID_ENV, job->host, 1))
		return ctl_fail("setenv: %s", strerror(errno));
	if (!(c = lease_client(job)))
		return 0;
	if (!master_call_lease_show(c, job->vdisk, &rep) &&
	    rep.body.kind == MS_BODY_LEASE)
		l = &rep.body.ms_body_u.lease;
	if (l && !*l->holder)
		job->lease = LEASE_FREE;
	else if (l && !strcmp(l->holder, job->host))
		job->lease = LEASE_MINE;
	else if (l)
		status = refuse_held(job, l);
	job->epoch = l ? l->epoch : 0;
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* After the open: the epoch the driver took the lease at (its "lease"). */
static void note_taken(struct job *job)
{
	struct td_strbuf out;
	const char *e;

	td_strbuf_init(&out);
	if (job->lease == LEASE_FREE && !command(job, "lease", &out) &&
	    (e = strstr(td_strbuf_str(&out), ", epoch ")) &&
	    sscanf(e, ", epoch %" SCNu64, &job->epoch) == 1)
		job->taken = true;
	td_strbuf_free(&out);
}

/*
 * The open failed, or its "lease" was not understood: whether this host
 * holds the lease now all the same (taken before the open failed); then
 * job->epoch is its epoch.
 */
static bool held_here(struct job *job, struct master_client *c)
{
	ms_reply rep;
	bool mine = false;

	if (!master_call_lease_show(c, job->vdisk, &rep) &&
	    rep.body.kind == MS_BODY_LEASE &&
	    !strcmp(rep.body.ms_body_u.lease.holder, job->host)) {
		job->epoch = rep.body.ms_body_u.lease.epoch;
		mine = true;
	}
	master_reply_free(&rep);
	return mine;
}

/* Release the lease taken for the resync; 0 or EXIT_FAILURE printed. */
static int release_lease(struct job *job)
{
	struct master_client *c = lease_client(job);
	const char *why = "the master's address in the map is not HOST[:PORT]";
	ms_reply rep;
	int status = 0;

	if (c && !job->taken && !(job->taken = held_here(job, c))) {
		master_client_close(c);
		return 0; /* the open did not take it */
	}
	if (c && !master_call_lease_release(c, job->vdisk, job->host,
					    job->epoch, &rep)) {
		fprintf(stderr,
			"stripe-ctl: the lease of vdisk %s was free before the "
			"resync: released again at epoch %" PRIu64 "\n",
			job->vdisk, job->epoch);
		job->outcome = "released";
	} else {
		why = c ? master_client_error(c) : why;
		status = ctl_fail(
			"the lease of vdisk %s, taken for the resync, is still "
			"held by this host (%s, epoch %" PRIu64
			"): the release failed: %s; release it with "
			"'stripe-ctl --host-id %s vdisk lease release %s "
			"--epoch %" PRIu64 "'",
			job->vdisk, job->host, job->epoch, why, job->host,
			job->vdisk, job->epoch);
	}
	if (c) {
		master_reply_free(&rep);
		master_client_close(c);
	}
	return status;
}

/* After an offline attempt: leave the lease as it was; 0 or EXIT_FAILURE. */
static int restore_lease(struct job *job)
{
	if (job->lease == LEASE_FREE)
		return release_lease(job);
	if (job->lease == LEASE_MINE) {
		fprintf(stderr,
			"stripe-ctl: the lease of vdisk %s is held by this "
			"host "
			"(%s, epoch %" PRIu64 "): kept\n",
			job->vdisk, job->host, job->epoch);
		job->outcome = "kept";
	}
	return 0;
}

/* The file's lock is held: the open's -EBUSY is a tapdisk serving it. */
static bool file_locked(const char *path)
{
	struct stripe_map_error err;
	struct stripe_map m;
	int lock_fd, ret = stripe_map_open(path, &m, &lock_fd, &err);

	if (!ret) {
		stripe_map_close(lock_fd);
		stripe_map_free(&m);
	}
	return ret == -EBUSY;
}

/* The offline open failed: the driver's reason as it is; EXIT_FAILURE. */
static int open_failed(const struct job *job, const char *chain, int err,
		       const char *reason)
{
	char msg[MSG_SIZE], name[32];
	struct td_strbuf sb;
	struct td_json j;

	if (*reason)
		snprintf(msg, sizeof(msg), "%s", reason);
	else
		snprintf(msg, sizeof(msg), "cannot open %s: %s", chain,
			 strerror(-err));
	if (job->o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "file", job->path);
		td_json_str(&j, "vdisk", job->vdisk);
		td_json_str(&j, "error",
			    td_errno_name(err, name, sizeof(name)));
		td_json_str(&j, "message", msg);
		td_json_end_object(&j);
		ctl_print_json(&j, &sb);
	}
	return ctl_fail("%s", msg);
}

/* -EBUSY when a tapdisk took the file meanwhile; else 0 or exit status. */
static int run_offline(struct job *job)
{
	char chain[PATH_MAX + 32];
	struct td_vbd_open_error oe = {.reason = ""};
	struct td_vbd_params vp = {
		.name = VBD_NAME, .chain = chain, .error = &oe};
	enum td_log_level level = td_log_get_level();
	int err, status;

	snprintf(chain, sizeof(chain), "stripe:%s,auto_resync=off", job->path);
	if ((err = td_loop_create(&job->loop)))
		return ctl_fail("cannot create an event loop: %s",
				strerror(-err));
	/* The driver's notes are for tapdisk's log; its errors show, and
	 * why the open failed is printed below. */
	td_log_set_level(TD_LOG_WARN);
	err = td_vbd_open(job->loop, td_driver_table, &vp, &job->vbd);
	if (err) {
		td_loop_destroy(job->loop);
		job->loop = NULL;
		td_log_set_level(level);
		if (err == -EBUSY && file_locked(job->path))
			return -EBUSY;
		status = open_failed(job, chain, err, oe.reason);
		restore_lease(job);
		return status;
	}
	note_taken(job);
	fprintf(stderr,
		"stripe-ctl: no tapdisk serves %s: resynchronising "
		"offline\n",
		job->path);
	status = run(job);
	/* Nothing of the vbd's is in flight: only the driver's resync ran. */
	if ((err = td_vbd_close(job->vbd)) && !status)
		status = ctl_fail("cannot close %s: %s", chain, strerror(-err));
	job->vbd = NULL;
	td_loop_destroy(job->loop);
	job->loop = NULL;
	td_log_set_level(level);
	if ((err = restore_lease(job)) && !status)
		status = err;
	return status;
}

/* --- the outcome ---------------------------------------------------------------- */

static unsigned int count_stale(const struct stripe_map *m)
{
	size_t nr = stripe_map_nr_slots(m);
	unsigned int n = 0;

	for (size_t i = 0; i < nr; i++)
		n += m->slots[i].stale;
	return n;
}

static int report(const struct job *job, unsigned int stale_left)
{
	const struct progress *p = &job->p;
	double s = (double)(td_now_ns() - job->start_ns) / NS_PER_S;
	char bytes[32];
	struct td_strbuf sb;
	struct td_json j;

	if (job->o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "file", job->path);
		td_json_str(&j, "vdisk", job->vdisk);
		td_json_str(&j, "mode", job->pid ? "online" : "offline");
		if (job->pid)
			td_json_u64(&j, "tapdisk", (uint64_t)job->pid);
		td_json_str(&j, "state", p->state[0] ? p->state : "nothing");
		td_json_u64(&j, "stale_before", job->stale_before);
		td_json_u64(&j, "stale_left", stale_left);
		td_json_u64(&j, "replicas_done", p->done);
		td_json_u64(&j, "replicas_failed", p->failed);
		td_json_u64(&j, "bytes_copied", p->bytes);
		td_json_u64(&j, "elapsed_ms",
			    (td_now_ns() - job->start_ns) / NS_PER_MS);
		td_json_str(&j, "last_error", p->last_error);
		if (job->outcome) {
			td_json_str(&j, "lease", job->outcome);
			td_json_u64(&j, "lease_epoch", job->epoch);
		}
		td_json_end_object(&j);
		if (ctl_print_json(&j, &sb))
			return EXIT_FAILURE;
	} else if (!stale_left) {
		ctl_format_bytes(p->bytes, bytes, sizeof(bytes));
		printf("vdisk %s: %" PRIu64 " stale replicas resynchronised "
		       "%s, %s copied in %.1f s; no stale replica left in %s\n",
		       job->vdisk, p->done, job->pid ? "online" : "offline",
		       bytes, s, job->path);
	}
	if (!stale_left)
		return 0;
	if (!strcmp(p->state, "stopped"))
		return ctl_fail("the resync was stopped: %u replicas of %s "
				"are still stale; run it again to finish",
				stale_left, job->path);
	return ctl_fail("%u replicas of %s are still stale%s%s%s; an extent "
			"whose every replica is stale has no source, and a "
			"server that is down cannot be written: see "
			"'stripe-ctl vdisk show %s'",
			stale_left, job->path, p->last_error[0] ? " (" : "",
			p->last_error, p->last_error[0] ? ")" : "", job->path);
}

/*
 * Offline, the driver's notifier had at most MASTER_NOTIFY_FLUSH_MS at the
 * close to tell the master of the last cleared marks: tell it again of
 * every replica the run cleared (idempotent).  The file is the truth, so
 * a master that cannot be told is a warning, not a failure.
 */
static void tell_master(const struct job *job, const struct stripe_map *m)
{
	struct ctl_opts at = *job->o;
	struct master_client *c = NULL;
	size_t nr = stripe_map_nr_slots(m);
	ms_reply rep;
	int err;

	if (!at.master_given)
		at.master = job->master;
	at.retries = 0;
	for (size_t i = 0; i < nr; i++) {
		ms_replica_state_args a = {
			.vdisk = (char *)m->vdisk,
			.column = (u_int)(i / ((size_t)m->replicas *
					       m->extents_per_column)),
			.extent = (u_int)((i / m->replicas) %
					  m->extents_per_column),
			.replica = (u_int)(i % m->replicas),
		};

		if (!job->was_stale[i] || m->slots[i].stale)
			continue;
		if (!c && !(c = ctl_client(&at)))
			break;
		err = master_call_replica_state(c, &a, &rep);
		master_reply_free(&rep);
		if (err) {
			fprintf(stderr,
				"stripe-ctl: warning: the master %s was not "
				"told that the resynchronised replicas are ok "
				"(%s); 'stripe-ctl vdisk mark' sets its "
				"record\n",
				at.master, master_client_error(c));
			break;
		}
	}
	if (c)
		master_client_close(c);
}

/* The file's stale replicas now; an exit status when it cannot be read. */
static int stale_in_file(const struct job *job, unsigned int *stale)
{
	struct stripe_map_error err;
	struct stripe_map m;
	int ret = stripe_map_read(job->path, &m, &err);

	if (ret) {
		char text[STRIPE_MAP_ERROR_TEXT_MAX];

		stripe_map_error_text(&err, job->path, text, sizeof(text));
		return ctl_fail("cannot read the file after the resync: %s",
				text);
	}
	*stale = count_stale(&m);
	if (!job->pid && *stale < job->stale_before &&
	    stripe_map_nr_slots(&m) == job->stale_slots)
		tell_master(job, &m);
	stripe_map_free(&m);
	return 0;
}

/*
 * Whether FILE is held by a tapdisk (*busy), and its disk's name and
 * stale replicas; 0 or an exit status printed.
 */
static int look(struct job *job, bool *busy)
{
	struct stripe_map_error err;
	struct stripe_map m;
	int lock_fd, ret = stripe_map_open(job->path, &m, &lock_fd, &err);

	*busy = ret == -EBUSY;
	if (*busy)
		ret = stripe_map_read(job->path, &m, &err);
	else if (!ret)
		stripe_map_close(lock_fd);
	if (ret) {
		char text[STRIPE_MAP_ERROR_TEXT_MAX];

		stripe_map_error_text(&err, job->path, text, sizeof(text));
		return ctl_fail("%s", text);
	}
	snprintf(job->vdisk, sizeof(job->vdisk), "%s", m.vdisk);
	snprintf(job->master, sizeof(job->master), "%s", m.master);
	job->stale_before = count_stale(&m);
	job->stale_slots = stripe_map_nr_slots(&m);
	job->was_stale = calloc(job->stale_slots, sizeof(bool));
	for (size_t i = 0; job->was_stale && i < job->stale_slots; i++)
		job->was_stale[i] = m.slots[i].stale;
	stripe_map_free(&m);
	return job->was_stale ? 0 : ctl_fail("out of memory");
}

static int resync(struct job *job, bool busy)
{
	unsigned int stale_left = 0;
	int status;

	job->start_ns = td_now_ns();
	if (!job->stale_before) {
		if (!job->o->json)
			printf("vdisk %s: nothing to resync, no replica is "
			       "stale in %s\n",
			       job->vdisk, job->path);
		return job->o->json ? report(job, 0) : 0;
	}
	catch_signals();
	if (!busy && (status = check_lease(job)))
		return status;
	status = busy ? -EBUSY : run_offline(job);
	if (status == -EBUSY) /* served, or a tapdisk opened it just now */
		status = run_online(job);
	if (status)
		return status;
	if ((status = stale_in_file(job, &stale_left)))
		return status;
	return report(job, stale_left);
}

int ctl_cmd_vdisk_resync(struct ctl_opts *o)
{
	struct job job = {.o = o, .tty = isatty(STDERR_FILENO)};
	bool busy;
	int status;

	if (!realpath(o->arg, job.path))
		return ctl_fail("%s: %s", o->arg, strerror(errno));
	if (!(status = look(&job, &busy)))
		status = resync(&job, busy);
	free(job.was_stale);
	return status;
}
