/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-serve.c - a run of the stripe driver's over a striped disk
 * (vdisk resync, vdisk verify), wherever the disk is served.
 *
 * Online: when a tapdisk holds FILE open (its lock: stripe_map_open says
 * -EBUSY), the tapdisk of the run directory whose chain names FILE
 * (tools/ctl-client.h) is sent "driver stripe WORDS" over its control
 * socket.  Offline: else stripe-ctl serves the disk itself for the time
 * of the run: a vbd with the chain stripe:FILE on a private event loop,
 * the same driver, the same commands, the loop driven by ctl_serve_wait.
 * Offline, the driver takes the disk's lease at the master as this host
 * (issue #18), so the lease is looked at first: held by another host, the
 * run is refused (it must run on that host, or after the lease is
 * released or handed over); free, the open takes it and it is released
 * again at the end, at the epoch the open took it at, whatever the
 * outcome; this host's, it stays.  The driver's own refusals (a fence
 * pending, this host fenced, the master unreachable) are printed as the
 * driver says them.  A -EBUSY from the open is the file's lock (a tapdisk
 * of this host took it meanwhile: online) only when the file is locked.
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

#define POLL_MS	  250 /* what ctl_serve_wait lets pass */
#define NS_PER_MS 1000000ull
#define VBD_NAME  "stripe-ctl"
#define MSG_SIZE  (PATH_MAX + 1024)
#define DRAIN_MS  10000 /* at most, for the run's I/O to end at the close */

volatile sig_atomic_t ctl_interrupted;

static void on_signal(int sig)
{
	(void)sig;
	ctl_interrupted = 1;
}

/* SIGINT and SIGTERM set interrupted; no SA_RESTART, so waits end. */
void ctl_serve_catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * "driver stripe WORDS" to the tapdisk, or to the vbd served here: 0 with
 * the reply in out, or -errno with the reason in out.
 */
int ctl_serve_command(struct ctl_serve *s, const char *words,
		      struct td_strbuf *out)
{
	char line[TD_CTL_LINE_MAX], *argv[TD_CTL_MAX_ARGS], *save = NULL;
	struct td_ctl_reply r;
	int argc = 0, err;

	td_strbuf_reset(out);
	if (s->vbd) {
		snprintf(line, sizeof(line), "%s", words);
		for (char *w = strtok_r(line, " ", &save);
		     w && argc < TD_CTL_MAX_ARGS;
		     w = strtok_r(NULL, " ", &save))
			argv[argc++] = w;
		return td_vbd_driver_control(s->vbd, "stripe", argc, argv, out);
	}
	snprintf(line, sizeof(line), "driver stripe %s", words);
	td_ctl_reply_init(&r);
	err = td_ctl_call(s->sock, line, (int)s->o->timeout_s * 1000, &r);
	if (err)
		td_strbuf_printf(out, "tapdisk %d does not answer on %s: %s",
				 s->pid, s->sock, strerror(-err));
	else if ((err = r.err))
		td_strbuf_puts(out, r.message);
	else
		td_strbuf_append(out, r.payload.data, r.payload.len);
	td_ctl_reply_free(&r);
	return err;
}

/* Let POLL_MS pass: a sleep online, the event loop's passes offline. */
void ctl_serve_wait(struct ctl_serve *s)
{
	uint64_t end = td_now_ns() + POLL_MS * NS_PER_MS;

	if (!s->loop) {
		poll(NULL, 0, POLL_MS);
		return;
	}
	for (uint64_t now; !ctl_interrupted && (now = td_now_ns()) < end;)
		td_loop_run_once(s->loop, (int)((end - now + NS_PER_MS - 1) /
						NS_PER_MS));
}

static int run_online(struct ctl_serve *s)
{
	const char *run_dir = td_ctl_run_dir(s->o->run_dir);
	char who[32] = "another process";
	unsigned int silent = 0;
	int err, holder;

	err = td_ctl_find_serving(run_dir, "stripe", s->path,
				  (int)s->o->timeout_s * 1000, &s->pid,
				  &silent);
	if (err == -ENOENT) {
		if ((holder = td_ctl_flock_holder(s->path)))
			snprintf(who, sizeof(who), "process %d", holder);
		return ctl_fail(
			"%s is locked by %s, but no tapdisk in %s serves "
			"it%s; give the run directory of its tapdisk "
			"(--run-dir or $" TD_CTL_RUN_DIR_ENV "), or stop it",
			s->path, who, run_dir,
			silent ? " (some tapdisks did not answer)" : "");
	}
	if (err)
		return ctl_fail("cannot read the run directory %s: %s", run_dir,
				strerror(-err));
	if ((err = td_ctl_socket_path(s->sock, sizeof(s->sock), run_dir,
				      s->pid)))
		return ctl_fail("%s: %s", run_dir, strerror(-err));
	fprintf(stderr, "stripe-ctl: %s is served by tapdisk %d: %s online\n",
		s->path, s->pid, s->doing);
	return s->run(s);
}

/* A client of the master the map names, the one the driver asks; NULL
 * when the map's text is not HOST[:PORT] (the open says so). */
static struct master_client *lease_client(const struct ctl_serve *s)
{
	struct master_client_opts co = {.timeout_ms = s->o->timeout_s * 1000,
					.retries = s->o->retries};
	struct master_client *c;

	return master_client_open(s->master, &co, &c) ? NULL : c;
}

/* Another host holds the lease: refused, nothing opened; EXIT_FAILURE. */
static int refuse_held(const struct ctl_serve *s, const ms_lease *l)
{
	char msg[MSG_SIZE];
	struct td_strbuf sb;
	struct td_json j;

	snprintf(msg, sizeof(msg),
		 "vdisk %s is held by host %s (lease epoch %" PRIu64
		 "), this host is %s and no tapdisk of it serves %s: an "
		 "offline %s serves the disk as this host, so run it on "
		 "%s (it goes through the tapdisk there), or once %s has "
		 "released the lease or handed it over here (stripe-ctl vdisk "
		 "lease release|handover %s); nothing was written",
		 s->vdisk, l->holder, (uint64_t)l->epoch, s->host, s->path,
		 s->what, l->holder, l->holder, s->vdisk);
	if (s->o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "file", s->path);
		td_json_str(&j, "vdisk", s->vdisk);
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
static int check_lease(struct ctl_serve *s)
{
	struct master_client *c;
	const ms_lease *l = NULL;
	ms_reply rep;
	int status;

	if ((status = ctl_host_id(s->o, s->host)))
		return status;
	if (setenv(MASTER_HOST_ID_ENV, s->host, 1))
		return ctl_fail("setenv: %s", strerror(errno));
	if (!(c = lease_client(s)))
		return 0;
	if (!master_call_lease_show(c, s->vdisk, &rep) &&
	    rep.body.kind == MS_BODY_LEASE)
		l = &rep.body.ms_body_u.lease;
	if (l && !*l->holder)
		s->lease = LEASE_FREE;
	else if (l && !strcmp(l->holder, s->host))
		s->lease = LEASE_MINE;
	else if (l)
		status = refuse_held(s, l);
	s->epoch = l ? l->epoch : 0;
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* After the open: the epoch the driver took the lease at (its "lease"). */
static void note_taken(struct ctl_serve *s)
{
	struct td_strbuf out;
	const char *e;

	td_strbuf_init(&out);
	if (s->lease == LEASE_FREE && !ctl_serve_command(s, "lease", &out) &&
	    (e = strstr(td_strbuf_str(&out), ", epoch ")) &&
	    sscanf(e, ", epoch %" SCNu64, &s->epoch) == 1)
		s->taken = true;
	td_strbuf_free(&out);
}

/*
 * The open failed, or its "lease" was not understood: whether this host
 * holds the lease now all the same (taken before the open failed); then
 * s->epoch is its epoch.
 */
static bool held_here(struct ctl_serve *s, struct master_client *c)
{
	ms_reply rep;
	bool mine = false;

	if (!master_call_lease_show(c, s->vdisk, &rep) &&
	    rep.body.kind == MS_BODY_LEASE &&
	    !strcmp(rep.body.ms_body_u.lease.holder, s->host)) {
		s->epoch = rep.body.ms_body_u.lease.epoch;
		mine = true;
	}
	master_reply_free(&rep);
	return mine;
}

/* Release the lease taken for the run; 0 or EXIT_FAILURE printed. */
static int release_lease(struct ctl_serve *s)
{
	struct master_client *c = lease_client(s);
	const char *why = "the master's address in the map is not HOST[:PORT]";
	ms_reply rep;
	int status = 0;

	if (c && !s->taken && !(s->taken = held_here(s, c))) {
		master_client_close(c);
		return 0; /* the open did not take it */
	}
	if (c &&
	    !master_call_lease_release(c, s->vdisk, s->host, s->epoch, &rep)) {
		fprintf(stderr,
			"stripe-ctl: the lease of vdisk %s was free before the "
			"%s: released again at epoch %" PRIu64 "\n",
			s->vdisk, s->what, s->epoch);
		s->outcome = "released";
	} else {
		why = c ? master_client_error(c) : why;
		status = ctl_fail(
			"the lease of vdisk %s, taken for the %s, is still "
			"held by this host (%s, epoch %" PRIu64
			"): the release failed: %s; release it with "
			"'stripe-ctl --host-id %s vdisk lease release %s "
			"--epoch %" PRIu64 "'",
			s->vdisk, s->what, s->host, s->epoch, why, s->host,
			s->vdisk, s->epoch);
	}
	if (c) {
		master_reply_free(&rep);
		master_client_close(c);
	}
	return status;
}

/* After an offline attempt: leave the lease as it was; 0 or EXIT_FAILURE. */
static int restore_lease(struct ctl_serve *s)
{
	if (s->lease == LEASE_FREE)
		return release_lease(s);
	if (s->lease == LEASE_MINE) {
		fprintf(stderr,
			"stripe-ctl: the lease of vdisk %s is held by this "
			"host "
			"(%s, epoch %" PRIu64 "): kept\n",
			s->vdisk, s->host, s->epoch);
		s->outcome = "kept";
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
static int open_failed(const struct ctl_serve *s, const char *chain, int err,
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
	if (s->o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "file", s->path);
		td_json_str(&j, "vdisk", s->vdisk);
		td_json_str(&j, "error",
			    td_errno_name(err, name, sizeof(name)));
		td_json_str(&j, "message", msg);
		td_json_end_object(&j);
		ctl_print_json(&j, &sb);
	}
	return ctl_fail("%s", msg);
}

/*
 * The vbd has no frontend: what may still be in flight is the run's own
 * I/O (a snapshot job's last chunks), driven to its end by the loop.
 */
static int close_drained(struct ctl_serve *s)
{
	uint64_t end = td_now_ns() + DRAIN_MS * NS_PER_MS;
	int err;

	while ((err = td_vbd_close(s->vbd)) == -EBUSY && td_now_ns() < end)
		td_loop_run_once(s->loop, 50);
	return err;
}

/* -EBUSY when a tapdisk took the file meanwhile; else 0 or exit status. */
static int run_offline(struct ctl_serve *s)
{
	char chain[PATH_MAX + 80];
	struct td_vbd_open_error oe = {.reason = ""};
	struct td_vbd_params vp = {.name = s->name ? s->name : VBD_NAME,
				   .chain = chain,
				   .error = &oe};
	enum td_log_level level = td_log_get_level();
	int err, status;

	if (s->rate_bytes_per_s)
		snprintf(chain, sizeof(chain),
			 "stripe:%s,auto_resync=off,resync_rate=%" PRIu64,
			 s->path, s->rate_bytes_per_s);
	else
		snprintf(chain, sizeof(chain), "stripe:%s,auto_resync=off",
			 s->path);
	if ((err = td_loop_create(&s->loop)))
		return ctl_fail("cannot create an event loop: %s",
				strerror(-err));
	/* The driver's notes are for tapdisk's log; its errors show, and
	 * why the open failed is printed below. */
	td_log_set_level(TD_LOG_WARN);
	err = td_vbd_open(s->loop, td_driver_table, &vp, &s->vbd);
	if (err) {
		td_loop_destroy(s->loop);
		s->loop = NULL;
		td_log_set_level(level);
		if (err == -EBUSY && file_locked(s->path))
			return -EBUSY;
		status = open_failed(s, chain, err, oe.reason);
		restore_lease(s);
		return status;
	}
	note_taken(s);
	fprintf(stderr, "stripe-ctl: no tapdisk serves %s: %s offline\n",
		s->path, s->doing);
	status = s->run(s);
	if ((err = close_drained(s)) && !status)
		status = ctl_fail("cannot close %s: %s", chain, strerror(-err));
	s->vbd = NULL;
	td_loop_destroy(s->loop);
	s->loop = NULL;
	td_log_set_level(level);
	if ((err = restore_lease(s)) && !status)
		status = err;
	return status;
}

int ctl_serve_run(struct ctl_serve *s, bool busy)
{
	int status;

	ctl_serve_catch_signals();
	if (!busy && (status = check_lease(s)))
		return status;
	status = busy ? -EBUSY : run_offline(s);
	if (status == -EBUSY) /* served, or a tapdisk opened it just now */
		status = run_online(s);
	return status;
}

int ctl_serve_path(const char *arg, char *path)
{
	char conv[PATH_MAX];

	if (!strchr(arg, '/') && access(arg, F_OK) && stripe_map_name_ok(arg)) {
		snprintf(conv, sizeof(conv), "%s/%s.map", CTL_MAP_DIR, arg);
		arg = conv;
	}
	if (!realpath(arg, path))
		return ctl_fail("%s: %s", arg, strerror(errno));
	return 0;
}
