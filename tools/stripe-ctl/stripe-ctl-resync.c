/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-resync.c - stripe-ctl vdisk resync FILE: copy every stale
 * replica of a striped disk from a live one and clear its mark, with the
 * stripe driver's own resync (drivers/stripe-resync.c).
 *
 * Online through the tapdisk that serves FILE ("driver stripe resync
 * [RATE]", its "driver stripe status json" polled until the run ends and the
 * cleared marks are durable; the disk stays in service, the copy is
 * throttled to RATE), else offline in this process with the lease rules
 * of stripe-ctl-serve.c (the close writes the cleared marks).
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

#include "common/json-read.h"
#include "common/util.h"
#include "drivers/drivers.h"
#include "master/client/host-id.h"
#include "master/reply.h"
#include "tapdisk/control/control.h"
#include "tapdisk/control/ctl-client.h"
#include "tapdisk/vbd.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define DURABLE_TIMEOUT_MS 30000 /* for the cleared marks to be written */
#define STOP_TIMEOUT_MS	   60000 /* for a stopped run to end */
#define RESYNC_PASSES	   3	 /* runs online, at most */
#define NS_PER_MS	   1000000ull
#define NS_PER_S	   1000000000ull
#define STATE_SIZE	   16
#define ERROR_SIZE	   256

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
	struct ctl_serve s; /* first: run's s is the job */
	unsigned int stale_before;
	bool *was_stale;    /* per slot, before the run */
	size_t stale_slots; /* entries of was_stale */
	/* the progress line */
	bool tty;
	bool line_open; /* a \r line is on the terminal */
	uint64_t start_ns;
	char last_slot[64]; /* what the last non-tty line said */
	struct progress p;
};

/* --- the driver's status -------------------------------------------------------- */

/* Member key of o as an unsigned int; false when missing or too big. */
static bool get_uint(const struct td_jval *o, const char *key,
		     unsigned int *out)
{
	uint64_t v;

	if (td_jval_get_u64(o, key, &v) || v > UINT_MAX)
		return false;
	*out = (unsigned int)v;
	return true;
}

/* The slot being copied, when the status names one. */
static void parse_slot(const struct td_jval *v, const struct td_jval *rs,
		       struct progress *p)
{
	p->have_slot =
		get_uint(rs, "column", &p->column) &&
		get_uint(rs, "extent", &p->extent) &&
		get_uint(rs, "replica", &p->replica) &&
		!td_jval_get_u64(rs, "extent_done_bytes", &p->slot_bytes) &&
		!td_jval_get_u64(v, "extent_size_bytes", &p->extent_bytes);
}

/*
 * "driver stripe status json" (block-stripe.c, the object tap-ctl stats
 * --json shows under drivers.stripe): its "resync" object, and
 * stale_replicas, stale_marks_pending.  0, or -EPROTO when the text is
 * not that.
 */
static int parse_status(const char *text, struct progress *p)
{
	const struct td_jval *rs;
	const char *state, *error = "";
	struct td_jval *v;
	int err = -EPROTO;

	memset(p, 0, sizeof(*p));
	if (td_json_parse(text, &v))
		return -EPROTO;
	rs = td_jval_get(v, "resync");
	if (!td_jval_get_str(rs, "state", &state) &&
	    !td_jval_get_u64(rs, "replicas_done", &p->done) &&
	    !td_jval_get_u64(rs, "replicas_total", &p->total) &&
	    !td_jval_get_u64(rs, "replicas_failed", &p->failed) &&
	    !td_jval_get_u64(rs, "bytes_copied", &p->bytes) &&
	    get_uint(v, "stale_replicas", &p->stale) &&
	    get_uint(v, "stale_marks_pending", &p->pending)) {
		snprintf(p->state, sizeof(p->state), "%s", state);
		td_jval_get_str(rs, "last_error", &error);
		snprintf(p->last_error, sizeof(p->last_error), "%s", error);
		parse_slot(v, rs, p);
		err = 0;
	}
	td_jval_free(v);
	return err;
}

/* --- talking to the driver: over a socket, or in this process ------------------- */

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
		if ((err = ctl_serve_command(&job->s, "status json", out)) ||
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
		if (ctl_interrupted && !stop_sent) {
			stop_sent = true;
			stop_deadline =
				td_now_ns() + STOP_TIMEOUT_MS * NS_PER_MS;
			end_progress(job);
			fprintf(stderr,
				"stripe-ctl: ctl_interrupted: stopping the "
				"resync after the chunk in flight\n");
			ctl_serve_command(&job->s, "resync stop", out);
		}
		if (stop_sent && td_now_ns() > stop_deadline) {
			end_progress(job);
			return ctl_fail("the resync did not stop within %d s",
					STOP_TIMEOUT_MS / 1000);
		}
		ctl_serve_wait(&job->s);
	}
}

/* Online: the cleared marks are written by tapdisk's map writer. */
static int wait_durable(struct job *job, struct td_strbuf *out)
{
	uint64_t deadline = td_now_ns() + DURABLE_TIMEOUT_MS * NS_PER_MS;
	struct progress p;

	while (td_now_ns() < deadline) {
		if (ctl_serve_command(&job->s, "status json", out) ||
		    parse_status(td_strbuf_str(out), &p))
			return ctl_fail("tapdisk %d: cannot see whether the "
					"cleared marks were written: %s",
					job->s.pid, td_strbuf_str(out));
		if (!p.pending)
			return 0;
		ctl_serve_wait(&job->s);
	}
	return ctl_fail("tapdisk %d has not written the cleared marks to %s "
			"within %d s; see its log",
			job->s.pid, job->s.path, DURABLE_TIMEOUT_MS / 1000);
}

/*
 * The servers whose session is not up, from the status's "servers" (each
 * with its "state"); the first one described in what as the text status
 * shows it ("server N PORTAL TARGET lun L: STATE").  -1 when the status
 * cannot be had.
 */
static int servers_not_up(struct job *job, struct td_strbuf *out, char *what,
			  size_t size)
{
	const struct td_jval *srv;
	struct td_jval *v;
	int n = 0;

	if (ctl_serve_command(&job->s, "status json", out) ||
	    td_json_parse(td_strbuf_str(out), &v))
		return -1;
	srv = td_jval_get(v, "servers");
	for (srv = srv ? srv->child : NULL; srv; srv = srv->next) {
		const char *state = "?", *portal = "?", *target = "?";
		uint64_t index = 0, lun = 0;

		td_jval_get_str(srv, "state", &state);
		if (!strcmp(state, "up"))
			continue;
		td_jval_get_u64(srv, "index", &index);
		td_jval_get_str(srv, "portal", &portal);
		td_jval_get_str(srv, "target", &target);
		td_jval_get_u64(srv, "lun", &lun);
		if (!n++)
			snprintf(what, size,
				 "server %" PRIu64 " %s %s lun %" PRIu64 ": %s",
				 index, portal, target, lun, state);
	}
	td_jval_free(v);
	return n;
}

/*
 * A replica on a server whose session is down (just revived, say: a
 * DOWN session tries again every few seconds) would fail at once: wait,
 * at most --timeout, for every session to be up, then start anyway.
 */
static void wait_servers(struct job *job, struct td_strbuf *out)
{
	uint64_t deadline = td_now_ns() + job->s.o->timeout_s * NS_PER_S;
	char what[512] = "";
	int n;

	while ((n = servers_not_up(job, out, what, sizeof(what))) > 0 &&
	       td_now_ns() < deadline && !ctl_interrupted)
		ctl_serve_wait(&job->s);
	if (n > 0)
		fprintf(stderr,
			"stripe-ctl: %d servers are not up after %u s (%s); "
			"their stale replicas cannot be resynchronised\n",
			n, job->s.o->timeout_s, what);
}

/*
 * One run: start it and follow it; 0, or an exit status printed.  A run
 * there was nothing for leaves job->p zeroed (state "").
 */
static int run_pass(struct job *job, struct td_strbuf *out, bool first)
{
	char words[64];
	int err, status;

	memset(&job->p, 0, sizeof(job->p));
	if (job->s.o->rate_bytes_per_s)
		snprintf(words, sizeof(words), "resync %" PRIu64,
			 job->s.o->rate_bytes_per_s);
	else
		snprintf(words, sizeof(words), "resync");
	wait_servers(job, out);
	if (first)
		job->start_ns = td_now_ns();
	err = ctl_serve_command(&job->s, words, out);
	if (err == -EALREADY && job->s.pid) {
		fprintf(stderr,
			"stripe-ctl: tapdisk %d is already resynchronising "
			"%s; following that run\n",
			job->s.pid, job->s.path);
	} else if (err) {
		return job->s.pid
			       ? ctl_fail("tapdisk %d refused the resync: %s",
					  job->s.pid, td_strbuf_str(out))
			       : ctl_fail("the resync did not start: %s",
					  td_strbuf_str(out));
	} else if (!strncmp(td_strbuf_str(out), "nothing to resync", 17)) {
		/* Every stale replica lacks a live source, or its mark is
		 * still being written: the file and the next pass say. */
		return 0;
	}
	status = follow(job, out);
	end_progress(job);
	if (!status && job->s.pid && !strcmp(job->p.state, "done"))
		status = wait_durable(job, out);
	return status;
}

/*
 * Online, a replica can turn stale again while a run goes (a write its
 * server failed), or its mark be still on its way to the file when the
 * run is asked for: another pass takes it, once the marks are durable,
 * RESYNC_PASSES at most.  Whether another pass is worth it.
 */
static bool again(struct job *job, struct td_strbuf *out, unsigned int pass)
{
	struct progress p;

	if (!job->s.pid || ctl_interrupted || pass >= RESYNC_PASSES ||
	    !strcmp(job->p.state, "stopped") || !strcmp(job->p.state, "failed"))
		return false;
	if (wait_durable(job, out) ||
	    ctl_serve_command(&job->s, "status json", out) ||
	    parse_status(td_strbuf_str(out), &p) || !p.stale)
		return false;
	if (!job->p.state[0] && pass > 1)
		return false; /* nothing to run last time either */
	fprintf(stderr,
		"stripe-ctl: %u replicas of %s are stale after pass %u "
		"(marked during it, or their marks were being written): "
		"another pass\n",
		p.stale, job->s.path, pass);
	return true;
}

/* The runs; 0, or an exit status printed. */
static int run(struct ctl_serve *s)
{
	struct job *job = (struct job *)s;
	struct progress sum = {0};
	struct td_strbuf out;
	unsigned int pass = 0;
	int status;

	td_strbuf_init(&out);
	do {
		status = run_pass(job, &out, ++pass == 1);
		sum.done += job->p.done;
		sum.failed += job->p.failed;
		sum.bytes += job->p.bytes;
		if (job->p.state[0]) { /* the last run's state and error */
			sum.total = job->p.total;
			memcpy(sum.state, job->p.state, sizeof(sum.state));
			memcpy(sum.last_error, job->p.last_error,
			       sizeof(sum.last_error));
		}
	} while (!status && again(job, &out, pass));
	td_strbuf_free(&out);
	sum.stale = job->p.stale;
	sum.pending = job->p.pending;
	job->p = sum;
	return status;
}

/* --- where the disk is served -------------------------------------------------- */

/* --- the lease (offline) ---------------------------------------------------------- */

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

	if (job->s.o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "file", job->s.path);
		td_json_str(&j, "vdisk", job->s.vdisk);
		td_json_str(&j, "mode", job->s.pid ? "online" : "offline");
		if (job->s.pid)
			td_json_u64(&j, "tapdisk", (uint64_t)job->s.pid);
		td_json_str(&j, "state", p->state[0] ? p->state : "nothing");
		td_json_u64(&j, "stale_before", job->stale_before);
		td_json_u64(&j, "stale_left", stale_left);
		td_json_u64(&j, "replicas_done", p->done);
		td_json_u64(&j, "replicas_failed", p->failed);
		td_json_u64(&j, "bytes_copied", p->bytes);
		td_json_u64(&j, "elapsed_ms",
			    (td_now_ns() - job->start_ns) / NS_PER_MS);
		td_json_str(&j, "last_error", p->last_error);
		if (job->s.outcome) {
			td_json_str(&j, "lease", job->s.outcome);
			td_json_u64(&j, "lease_epoch", job->s.epoch);
		}
		td_json_end_object(&j);
		if (ctl_print_json(&j, &sb))
			return EXIT_FAILURE;
	} else if (!stale_left) {
		ctl_format_bytes(p->bytes, bytes, sizeof(bytes));
		printf("vdisk %s: %" PRIu64 " stale replicas resynchronised "
		       "%s, %s copied in %.1f s; no stale replica left in %s\n",
		       job->s.vdisk, p->done, job->s.pid ? "online" : "offline",
		       bytes, s, job->s.path);
	}
	if (!stale_left)
		return 0;
	if (!strcmp(p->state, "stopped"))
		return ctl_fail("the resync was stopped: %u replicas of %s "
				"are still stale; run it again to finish",
				stale_left, job->s.path);
	return ctl_fail("%u replicas of %s are still stale%s%s%s; an extent "
			"whose every replica is stale has no source, and a "
			"server that is down cannot be written: see "
			"'stripe-ctl vdisk show %s'",
			stale_left, job->s.path, p->last_error[0] ? " (" : "",
			p->last_error, p->last_error[0] ? ")" : "",
			job->s.path);
}

/*
 * Offline, the driver's notifier had at most MASTER_NOTIFY_FLUSH_MS at the
 * close to tell the master of the last cleared marks: tell it again of
 * every replica the run cleared (idempotent).  The file is the truth, so
 * a master that cannot be told is a warning, not a failure.
 */
static void tell_master(const struct job *job, const struct stripe_map *m)
{
	struct ctl_opts at = *job->s.o;
	struct master_client *c = NULL;
	size_t nr = stripe_map_nr_slots(m);
	ms_reply rep;
	int err;

	if (!at.master_given)
		at.master = job->s.master;
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
	int ret = stripe_map_read(job->s.path, &m, &err);

	if (ret) {
		char text[STRIPE_MAP_ERROR_TEXT_MAX];

		stripe_map_error_text(&err, job->s.path, text, sizeof(text));
		return ctl_fail("cannot read the file after the resync: %s",
				text);
	}
	*stale = count_stale(&m);
	if (!job->s.pid && *stale < job->stale_before &&
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
	int lock_fd, ret = stripe_map_open(job->s.path, &m, &lock_fd, &err);

	*busy = ret == -EBUSY;
	if (*busy)
		ret = stripe_map_read(job->s.path, &m, &err);
	else if (!ret)
		stripe_map_close(lock_fd);
	if (ret) {
		char text[STRIPE_MAP_ERROR_TEXT_MAX];

		stripe_map_error_text(&err, job->s.path, text, sizeof(text));
		return ctl_fail("%s", text);
	}
	snprintf(job->s.vdisk, sizeof(job->s.vdisk), "%s", m.vdisk);
	snprintf(job->s.master, sizeof(job->s.master), "%s", m.master);
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
		if (!job->s.o->json)
			printf("vdisk %s: nothing to resync, no replica is "
			       "stale in %s\n",
			       job->s.vdisk, job->s.path);
		return job->s.o->json ? report(job, 0) : 0;
	}
	if ((status = ctl_serve_run(&job->s, busy)))
		return status;
	if ((status = stale_in_file(job, &stale_left)))
		return status;
	return report(job, stale_left);
}

int ctl_cmd_vdisk_resync(struct ctl_opts *o)
{
	struct job job = {.s = {.o = o,
				.what = "resync",
				.doing = "resynchronising",
				.run = run},
			  .tty = isatty(STDERR_FILENO)};
	bool busy;
	int status;

	if (!realpath(o->arg, job.s.path))
		return ctl_fail("%s: %s", o->arg, strerror(errno));
	if (!(status = look(&job, &busy)))
		status = resync(&job, busy);
	free(job.was_stale);
	return status;
}
