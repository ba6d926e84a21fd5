/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-verify.c - stripe-ctl vdisk verify NAME|FILE [--repair]:
 * compare the replicas of every extent with the stripe driver's scrub
 * (drivers/stripe/stripe-scrub.c), online through the tapdisk that serves
 * the disk or offline in this process (stripe-ctl-serve.c), follow it
 * with "driver stripe status json" (its "scrub" object), and print what
 * it found: each mismatch with its place, what was repaired, what could
 * not be decided, and the extents that could not be compared (a server
 * down).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json-read.h"
#include "common/log.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define NS_PER_MS	1000000ull
#define NS_PER_S	1000000000ull
#define STOP_TIMEOUT_MS 60000
#define STATE_SIZE	16
#define LIST_SIZE	16
#define ERROR_SIZE	256
#define MAX_PLACES	64 /* STRIPE_SCRUB_MAX_PLACES: what the driver keeps */

/* A "scrub mismatch: ..." line. */
struct place {
	unsigned int column, extent;
	uint64_t ext_off, chunk_off, chunk_len;
	int64_t disk_off; /* -1: past the disk's end */
	char replicas[LIST_SIZE];
	int good; /* -1: undecided */
	char outcome[STATE_SIZE];
};

/* A "scrub not compared: ..." line. */
struct skip {
	unsigned int column, extent;
	char replicas[LIST_SIZE];
};

/* The "scrub: ..." line and the lines that follow it. */
struct scrub_status {
	char state[STATE_SIZE];
	uint64_t checked, total, mismatches, repaired, undecided, failed;
	uint64_t skipped, skipped_extents, bytes, ms, rate;
	char repair[4];
	char last_error[ERROR_SIZE];
	unsigned int nr_places, nr_skips;
	struct place places[MAX_PLACES];
	struct skip skips[MAX_PLACES];
};

struct vjob {
	struct ctl_serve s; /* first: run's s is the job */
	unsigned int stale; /* stale replicas in the file: not compared */
	bool tty, line_open;
	uint64_t start_ns;
	uint64_t last_line_ns;
	struct scrub_status st;
};

/* --- the driver's status -------------------------------------------------------- */

/* Member key of o copied into buf (size bytes); false when missing. */
static bool get_text(const struct td_jval *o, const char *key, char *buf,
		     size_t size)
{
	const char *v;

	if (td_jval_get_str(o, key, &v))
		return false;
	snprintf(buf, size, "%s", v);
	return true;
}

static bool get_uint(const struct td_jval *o, const char *key,
		     unsigned int *out)
{
	uint64_t v;

	if (td_jval_get_u64(o, key, &v) || v > UINT32_MAX)
		return false;
	*out = (unsigned int)v;
	return true;
}

/* One of the scrub's "places": a mismatch and what became of it. */
static bool parse_place(const struct td_jval *e, struct place *p)
{
	int64_t good;

	if (!get_uint(e, "column", &p->column) ||
	    !get_uint(e, "extent", &p->extent) ||
	    td_jval_get_u64(e, "extent_offset", &p->ext_off) ||
	    td_jval_get_i64(e, "disk_offset", &p->disk_off) ||
	    td_jval_get_u64(e, "chunk_offset", &p->chunk_off) ||
	    td_jval_get_u64(e, "chunk_bytes", &p->chunk_len) ||
	    !get_text(e, "replicas", p->replicas, sizeof(p->replicas)) ||
	    td_jval_get_i64(e, "good", &good) || good < -1 || good > INT_MAX ||
	    !get_text(e, "outcome", p->outcome, sizeof(p->outcome)))
		return false;
	p->good = (int)good;
	return true;
}

/* The "places" and "not_compared" arrays; false when one is malformed. */
static bool parse_lists(const struct td_jval *sc, struct scrub_status *st)
{
	const struct td_jval *e = td_jval_get(sc, "places");

	for (e = e ? e->child : NULL; e && st->nr_places < MAX_PLACES;
	     e = e->next)
		if (!parse_place(e, &st->places[st->nr_places++]))
			return false;
	e = td_jval_get(sc, "not_compared");
	for (e = e ? e->child : NULL; e && st->nr_skips < MAX_PLACES;
	     e = e->next) {
		struct skip *k = &st->skips[st->nr_skips++];

		if (!get_uint(e, "column", &k->column) ||
		    !get_uint(e, "extent", &k->extent) ||
		    !get_text(e, "replicas", k->replicas, sizeof(k->replicas)))
			return false;
	}
	return true;
}

/* The counters of the "scrub" object; false when one is missing. */
static bool parse_counters(const struct td_jval *sc, struct scrub_status *st)
{
	static const struct {
		const char *key;
		size_t offset;
	} fields[] = {
		{"chunks_checked", offsetof(struct scrub_status, checked)},
		{"chunks_total", offsetof(struct scrub_status, total)},
		{"mismatches", offsetof(struct scrub_status, mismatches)},
		{"repaired", offsetof(struct scrub_status, repaired)},
		{"undecided", offsetof(struct scrub_status, undecided)},
		{"repair_failures", offsetof(struct scrub_status, failed)},
		{"chunks_not_compared", offsetof(struct scrub_status, skipped)},
		{"extents_not_compared",
		 offsetof(struct scrub_status, skipped_extents)},
		{"bytes_read", offsetof(struct scrub_status, bytes)},
		{"elapsed_ms", offsetof(struct scrub_status, ms)},
		{"rate_bytes_per_s", offsetof(struct scrub_status, rate)},
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (td_jval_get_u64(
			    sc, fields[i].key,
			    (uint64_t *)((char *)st + fields[i].offset)))
			return false;
	return true;
}

/*
 * The "scrub" object of "driver stripe status json" (stripe-scrub.c's
 * report); 0, or -EPROTO when not understood.
 */
static int parse_status(const char *text, struct scrub_status *st)
{
	const struct td_jval *sc;
	struct td_jval *v;
	bool repair, ok;

	memset(st, 0, sizeof(*st));
	if (td_json_parse(text, &v))
		return -EPROTO;
	sc = td_jval_get(v, "scrub");
	ok = get_text(sc, "state", st->state, sizeof(st->state)) &&
	     !td_jval_get_bool(sc, "repair", &repair) &&
	     parse_counters(sc, st) && parse_lists(sc, st);
	if (ok) {
		snprintf(st->repair, sizeof(st->repair), "%s",
			 repair ? "on" : "off");
		get_text(sc, "last_error", st->last_error,
			 sizeof(st->last_error));
	}
	td_jval_free(v);
	return ok ? 0 : -EPROTO;
}

/* --- the progress line (stderr) -------------------------------------------------- */

static void show_progress(struct vjob *job)
{
	const struct scrub_status *st = &job->st;
	uint64_t now = td_now_ns(), ns = now - job->start_ns;
	char bytes[32], rate[32], text[256];

	ctl_format_bytes(st->bytes, bytes, sizeof(bytes));
	ctl_format_bytes(ns ? (uint64_t)((double)st->bytes * NS_PER_S / ns) : 0,
			 rate, sizeof(rate));
	snprintf(text, sizeof(text),
		 "verify: %" PRIu64 " of %" PRIu64 " chunks, %s read, %s/s, "
		 "%" PRIu64 " mismatches",
		 st->checked + st->skipped, st->total, bytes, rate,
		 st->mismatches);
	if (job->tty) {
		fprintf(stderr, "\r%s\033[K", text);
		job->line_open = true;
	} else if (now - job->last_line_ns >= 5 * NS_PER_S) {
		fprintf(stderr, "%s\n", text);
		job->last_line_ns = now;
	}
}

static void end_progress(struct vjob *job)
{
	if (job->line_open)
		fputc('\n', stderr);
	job->line_open = false;
}

/* --- the run ----------------------------------------------------------------------- */

/* Poll the status until the run is over; 0, or an exit status printed. */
static int follow(struct vjob *job, struct td_strbuf *out)
{
	uint64_t stop_deadline = 0;
	int err;

	for (;;) {
		if ((err = ctl_serve_command(&job->s, "status json", out)) ||
		    (err = parse_status(td_strbuf_str(out), &job->st))) {
			end_progress(job);
			return ctl_fail("cannot follow the verify: %s",
					err == -EPROTO ? "the driver's status "
							 "is not understood"
						       : td_strbuf_str(out));
		}
		show_progress(job);
		if (strcmp(job->st.state, "running"))
			return 0;
		if (ctl_interrupted && !stop_deadline) {
			stop_deadline =
				td_now_ns() + STOP_TIMEOUT_MS * NS_PER_MS;
			end_progress(job);
			fprintf(stderr, "stripe-ctl: interrupted: stopping the "
					"verify after the chunk in flight\n");
			ctl_serve_command(&job->s, "verify stop", out);
		}
		if (stop_deadline && td_now_ns() > stop_deadline) {
			end_progress(job);
			return ctl_fail("the verify did not stop within %d s",
					STOP_TIMEOUT_MS / 1000);
		}
		ctl_serve_wait(&job->s);
	}
}

static int run(struct ctl_serve *s)
{
	struct vjob *job = (struct vjob *)s;
	char words[64];
	struct td_strbuf out;
	int err, status;

	snprintf(words, sizeof(words), "verify%s",
		 s->o->repair ? " --repair" : "");
	if (s->o->rate_bytes_per_s)
		snprintf(words + strlen(words), sizeof(words) - strlen(words),
			 " %" PRIu64, s->o->rate_bytes_per_s);
	td_strbuf_init(&out);
	job->start_ns = td_now_ns();
	if ((err = ctl_serve_command(s, words, &out))) {
		status = s->pid ? ctl_fail("tapdisk %d refused the verify: %s",
					   s->pid, td_strbuf_str(&out))
				: ctl_fail("the verify did not start: %s",
					   td_strbuf_str(&out));
		td_strbuf_free(&out);
		return status;
	}
	status = follow(job, &out);
	end_progress(job);
	td_strbuf_free(&out);
	return status;
}

/* --- the outcome ---------------------------------------------------------------- */

static void print_place(const struct place *p)
{
	printf("mismatch: column %u extent %u, extent offset %" PRIu64,
	       p->column, p->extent, p->ext_off);
	if (p->disk_off >= 0)
		printf(", disk offset %" PRId64, p->disk_off);
	else
		printf(", past the disk's end");
	printf(" (chunk %" PRIu64 "+%" PRIu64 "): ", p->chunk_off,
	       p->chunk_len);
	if (p->good < 0)
		printf("replicas %s differ, no majority: undecided, not "
		       "repaired\n",
		       p->replicas);
	else
		printf("replica %s differs from replica %d (the majority): "
		       "%s\n",
		       p->replicas, p->good,
		       !strcmp(p->outcome, "found") ? "not repaired"
						    : p->outcome);
}

static void report_text(const struct vjob *job)
{
	const struct scrub_status *st = &job->st;
	double secs = (double)st->ms / 1000;
	char bytes[32], rate[32];

	ctl_format_bytes(st->bytes, bytes, sizeof(bytes));
	ctl_format_bytes(secs > 0 ? (uint64_t)((double)st->bytes / secs) : 0,
			 rate, sizeof(rate));
	printf("vdisk %s: verify %s %s: %" PRIu64 " of %" PRIu64
	       " chunks compared, %s read in %.1f s (%s/s)\n",
	       job->s.vdisk, st->state, job->s.pid ? "online" : "offline",
	       st->checked, st->total, bytes, secs, rate);
	for (unsigned int i = 0; i < st->nr_places; i++)
		print_place(&st->places[i]);
	if (st->mismatches > st->nr_places)
		printf("(the first %u of %" PRIu64 " mismatches are listed)\n",
		       st->nr_places, st->mismatches);
	for (unsigned int i = 0; i < st->nr_skips; i++)
		printf("not compared: column %u extent %u: replica %s could "
		       "not be read (server down or failing)\n",
		       st->skips[i].column, st->skips[i].extent,
		       st->skips[i].replicas);
	printf("%" PRIu64 " mismatches, %" PRIu64 " repaired, %" PRIu64
	       " undecided, %" PRIu64 " repair failures, %" PRIu64
	       " extents not fully compared",
	       st->mismatches, st->repaired, st->undecided, st->failed,
	       st->skipped_extents);
	if (job->stale)
		printf(", %u stale replicas not compared (resync's job)",
		       job->stale);
	printf("\n");
}

static void json_lists(struct td_json *j, const struct scrub_status *st)
{
	td_json_begin_array(j, "mismatches");
	for (unsigned int i = 0; i < st->nr_places; i++) {
		const struct place *p = &st->places[i];

		td_json_begin_object(j, NULL);
		td_json_u64(j, "column", p->column);
		td_json_u64(j, "extent", p->extent);
		td_json_u64(j, "extent_offset", p->ext_off);
		td_json_i64(j, "disk_offset", p->disk_off);
		td_json_u64(j, "chunk_offset", p->chunk_off);
		td_json_u64(j, "chunk_bytes", p->chunk_len);
		td_json_str(j, "replicas", p->replicas);
		td_json_i64(j, "good", p->good);
		td_json_str(j, "outcome", p->outcome);
		td_json_end_object(j);
	}
	td_json_end_array(j);
	td_json_begin_array(j, "not_compared");
	for (unsigned int i = 0; i < st->nr_skips; i++) {
		td_json_begin_object(j, NULL);
		td_json_u64(j, "column", st->skips[i].column);
		td_json_u64(j, "extent", st->skips[i].extent);
		td_json_str(j, "replicas", st->skips[i].replicas);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

static int report_json(const struct vjob *job)
{
	const struct scrub_status *st = &job->st;
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_str(&j, "file", job->s.path);
	td_json_str(&j, "vdisk", job->s.vdisk);
	td_json_str(&j, "mode", job->s.pid ? "online" : "offline");
	if (job->s.pid)
		td_json_u64(&j, "tapdisk", (uint64_t)job->s.pid);
	td_json_str(&j, "state", st->state);
	td_json_bool(&j, "repair", job->s.o->repair);
	td_json_u64(&j, "chunks_total", st->total);
	td_json_u64(&j, "chunks_checked", st->checked);
	td_json_u64(&j, "chunks_not_compared", st->skipped);
	td_json_u64(&j, "extents_not_compared", st->skipped_extents);
	td_json_u64(&j, "mismatch_count", st->mismatches);
	td_json_u64(&j, "repaired", st->repaired);
	td_json_u64(&j, "undecided", st->undecided);
	td_json_u64(&j, "repair_failures", st->failed);
	td_json_u64(&j, "stale_replicas", job->stale);
	td_json_u64(&j, "bytes_read", st->bytes);
	td_json_u64(&j, "rate_limit_bytes_per_s", st->rate);
	td_json_u64(&j, "elapsed_ms", st->ms); /* the driver's: start to end */
	td_json_str(&j, "last_error", st->last_error);
	json_lists(&j, st);
	if (job->s.outcome) {
		td_json_str(&j, "lease", job->s.outcome);
		td_json_u64(&j, "lease_epoch", job->s.epoch);
	}
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

/* 0: done, and every mismatch repaired, every extent compared. */
static int report(const struct vjob *job)
{
	const struct scrub_status *st = &job->st;

	if (job->s.o->json ? report_json(job) : (report_text(job), 0))
		return EXIT_FAILURE;
	if (strcmp(st->state, "done"))
		return ctl_fail("the verify was %s before its end: run it "
				"again",
				st->state);
	if (st->skipped_extents)
		return ctl_fail("%" PRIu64 " extents of %s were not fully "
				"compared: a replica could not be read%s%s",
				st->skipped_extents, job->s.path,
				st->last_error[0] ? ": " : "", st->last_error);
	if (st->mismatches != st->repaired)
		return ctl_fail("%" PRIu64 " mismatches remain in %s%s",
				st->mismatches - st->repaired, job->s.path,
				st->undecided
					? " (some undecided: R = 2 cannot "
					  "tell which replica is right)"
					: "");
	return 0;
}

/* Whether FILE is held by a tapdisk (*busy), its names and stale count. */
static int look(struct vjob *job, bool *busy)
{
	struct stripe_map_error err;
	struct stripe_map m;
	int lock_fd, ret = stripe_map_open(job->s.path, &m, &lock_fd, &err);
	size_t nr;

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
	nr = stripe_map_nr_slots(&m);
	for (size_t i = 0; i < nr; i++)
		job->stale += m.slots[i].stale;
	stripe_map_free(&m);
	return 0;
}

int ctl_cmd_vdisk_verify(struct ctl_opts *o)
{
	struct vjob job = {.s = {.o = o,
				 .what = "verify",
				 .doing = "verifying",
				 .run = run},
			   .tty = isatty(STDERR_FILENO)};
	bool busy;
	int status;

	if ((status = ctl_serve_path(o->arg, job.s.path)) ||
	    (status = look(&job, &busy)) ||
	    (status = ctl_serve_run(&job.s, busy)))
		return status;
	return report(&job);
}
