/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-snapshot.c - stripe-ctl vdisk snapshot SRC NEW: a
 * point-in-time copy of a striped disk in use (issue #21 item 2).
 *
 * The steps, each safe to repeat (the command run again resumes):
 *   1. the master makes NEW, a snapshot of SRC with extents of its own,
 *      incomplete (MS_VDISK_SNAPSHOT, idempotent);
 *   2. NEW.incomplete is written next to NEW's map, then the map: the
 *      stripe driver refuses to open a map with that marker unless it is
 *      the target of the copy (snapshot_target=on);
 *   3. the tapdisk serving SRC (found in the run directory) is asked to
 *      copy onto "stripe:NEW,snapshot_target=on" (control "snapshot
 *      start": it marks the instant before it answers, then copies in the
 *      background with copy-before-write; doc/snapshots.md); a copy of NEW
 *      already running there is followed instead.  No tapdisk serves SRC:
 *      stripe-ctl serves it itself for the copy (stripe-ctl-serve.c, with
 *      its lease rules) and runs the same job in this process, afresh;
 *   4. its progress is followed ("snapshot status json"), with a progress
 *      line on stderr once it lasts;
 *   5. done: the master marks NEW complete (MS_VDISK_SNAPSHOT_DONE), then
 *      the marker is removed.
 * A stripe-ctl killed anywhere leaves NEW incomplete and never served as
 * complete; the tapdisk's job file makes its copy survive a tapdisk
 * restart.  Run the command again to finish, or drop NEW with `tap-ctl
 * snapshot -i ID cancel` and `stripe-ctl vdisk destroy`.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json-read.h"
#include "common/log.h"
#include "common/util.h"
#include "tapdisk/control/control.h"
#include "tapdisk/control/ctl-client.h"
#include "tapdisk/snapshot.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define NS_PER_S	   1000000000ull
#define PROGRESS_AFTER_NS  (2 * NS_PER_S) /* no line for a short copy */
#define PROGRESS_EVERY_NS  (5 * NS_PER_S) /* a new line when not a tty */
#define OFFLINE_NAME_SIZE  (STRIPE_MAP_NAME_SIZE + 32)
#define OFFLINE_NAME_FIRST "stripe-ctl-snapshot-"

struct snap {
	struct ctl_serve s; /* first: run's s is the snap */
	struct ctl_opts *o;
	char src_path[PATH_MAX];
	char new_path[PATH_MAX];
	char marker[PATH_MAX + 16];
	struct stripe_map src;
	char name[OFFLINE_NAME_SIZE]; /* offline: the vbd's, the job file's */
	/* offline: the job's start */
	bool started;
	int start_err;
	char start_why[256];
	/* the progress line */
	uint64_t start_ns, line_ns;
	bool line_open;
};

static void print_map_error(const char *path, const struct stripe_map_error *e)
{
	char text[STRIPE_MAP_ERROR_TEXT_MAX];

	stripe_map_error_text(e, path, text, sizeof(text));
	ctl_fail("%s", text);
}

/* One control request to the tapdisk: 0 with r filled, or -errno. */
static int ask(struct snap *sn, const char *line, struct td_ctl_reply *r)
{
	int fd, err;

	if ((err = td_ctl_connect(sn->s.sock, &fd)))
		return err;
	err = td_ctl_request(fd, line, (int)sn->o->timeout_s * 1000, r);
	close(fd);
	return err ? err : r->err;
}

/* Steps 1 and 2: NEW at the master, its marker, its map. */
static int make_new(struct snap *sn, struct master_client *c)
{
	struct ctl_opts o = *sn->o;
	ms_snapshot_args a = {sn->src.vdisk, (char *)sn->o->extra[0]};
	struct stripe_map_error err;
	struct stripe_map m = {0};
	ms_reply rep;
	int status = 0, fd, ret;

	o.size_bytes = sn->src.size_bytes;
	o.stripe_unit_bytes = sn->src.stripe_unit_bytes;
	o.region_bytes = sn->src.region_bytes;
	if (master_call_vdisk_snapshot(c, &a, &rep)) {
		master_reply_free(&rep);
		return ctl_call_failed(c, "vdisk snapshot");
	}
	fd = open(sn->marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 ||
	    dprintf(fd, "snapshot of %s (%s)\n", sn->src.vdisk, sn->src_path) <
		    0 ||
	    fsync(fd))
		status = ctl_fail("cannot write %s: %s", sn->marker,
				  strerror(errno));
	else if (ctl_map_from_reply(&rep.body.ms_body_u.vdisk, &o,
				    master_client_addresses(c), &m))
		status = ctl_fail("the master's answer does not fit %s: is it "
				  "the same version?",
				  sn->src_path);
	else if (!(status = ctl_map_chap(c, &m, "vdisk snapshot")) &&
		 (ret = stripe_map_write(sn->new_path, &m, &err)) &&
		 ret != -EBUSY) { /* EBUSY: the copy job holds it, written */
		print_map_error(sn->new_path, &err);
		status = EXIT_FAILURE;
	}
	if (fd >= 0)
		close(fd);
	stripe_map_free(&m);
	master_reply_free(&rep);
	return status;
}

/* The job's state and progress from "snapshot status json". */
struct job_status {
	char state[16];
	char target[PATH_MAX + 64];
	char error[256];
	uint64_t copied, total;
};

/* The job's status text: from the tapdisk, or from the vbd served here. */
static int status_text(struct snap *sn, struct td_ctl_reply *r)
{
	if (sn->s.vbd) {
		td_vbd_snapshot_status(sn->s.vbd, true, &r->payload);
		return 0;
	}
	return ask(sn, "snapshot status json", r);
}

static int job_status(struct snap *sn, struct job_status *js)
{
	struct td_ctl_reply r;
	struct td_jval *v = NULL;
	const char *str;
	int err;

	memset(js, 0, sizeof(*js));
	td_ctl_reply_init(&r);
	err = status_text(sn, &r);
	if (!err && td_json_parse(td_strbuf_str(&r.payload), &v))
		err = -EPROTO;
	if (!err && td_jval_get_str(v, "state", &str))
		err = -EPROTO;
	if (!err) {
		snprintf(js->state, sizeof(js->state), "%s", str);
		/* Absent without a job ("state": "none" alone). */
		if (!td_jval_get_str(v, "target", &str))
			snprintf(js->target, sizeof(js->target), "%s", str);
		if (!td_jval_get_str(v, "error", &str))
			snprintf(js->error, sizeof(js->error), "%s", str);
		td_jval_get_u64(v, "bytes_copied", &js->copied);
		td_jval_get_u64(v, "bytes_total", &js->total);
	}
	td_jval_free(v);
	td_ctl_reply_free(&r);
	return err;
}

static bool targets_new(const struct snap *sn, const struct job_status *js)
{
	size_t n = strlen(sn->new_path);

	return !strncmp(js->target, "stripe:", 7) &&
	       !strncmp(js->target + 7, sn->new_path, n) &&
	       (js->target[7 + n] == ',' || !js->target[7 + n]);
}

static void offline_started(struct td_vbd *vbd, int err, const char *why,
			    void *opaque)
{
	struct snap *sn = opaque;

	(void)vbd;
	sn->started = true;
	sn->start_err = err;
	snprintf(sn->start_why, sizeof(sn->start_why), "%s", why ? why : "");
}

/*
 * Offline: the job in this process, afresh.  A job file of an earlier
 * run killed on the way is dropped first: SRC may have been served and
 * written since, so its bits no longer say what NEW holds.
 */
static int start_offline(struct snap *sn, const char *target)
{
	char path[PATH_MAX];
	struct td_strbuf why;
	int err;

	if ((err = td_snap_job_path(sn->name, path, sizeof(path))))
		return ctl_fail("the job file's path: %s", strerror(-err));
	if (unlink(path) && errno != ENOENT)
		return ctl_fail("cannot remove the stale job file %s: %s", path,
				strerror(errno));
	td_strbuf_init(&why);
	err = td_vbd_snapshot_start(sn->s.vbd, target, NULL, offline_started,
				    sn, &why);
	if (err)
		ctl_fail("cannot start the copy: %s",
			 why.len ? td_strbuf_str(&why) : strerror(-err));
	td_strbuf_free(&why);
	if (err)
		return EXIT_FAILURE;
	while (!sn->started && !ctl_interrupted)
		ctl_serve_wait(&sn->s);
	if (sn->started && sn->start_err)
		return ctl_fail("cannot start the copy: %s",
				sn->start_why[0] ? sn->start_why
						 : strerror(-sn->start_err));
	return sn->started ? 0 : ctl_fail("interrupted: NEW stays incomplete");
}

/* Online: the tapdisk serving SRC is asked to start the copy. */
static int start_online(struct snap *sn, const char *line)
{
	struct td_ctl_reply r;
	int err;

	td_ctl_reply_init(&r);
	err = ask(sn, line, &r);
	if (err)
		ctl_fail("tapdisk %d cannot start the copy: %s", sn->s.pid,
			 r.err ? r.message : strerror(-err));
	td_ctl_reply_free(&r);
	return err ? EXIT_FAILURE : 0;
}

/* Step 3: start the copy, unless one of NEW runs already. */
static int start_copy(struct snap *sn, const struct job_status *js)
{
	char line[TD_CTL_LINE_MAX];
	const char *verb = "snapshot start ";

	if (!strcmp(js->state, "copying") || !strcmp(js->state, "starting")) {
		if (targets_new(sn, js))
			return 0;
		return ctl_fail("tapdisk %d is copying to %s: one snapshot at "
				"a time; run this again when it is done",
				sn->s.pid, js->target);
	}
	if (snprintf(line, sizeof(line), "%sstripe:%s,snapshot_target=on", verb,
		     sn->new_path) >= (int)sizeof(line))
		return ctl_fail("%s: path too long for a control line",
				sn->new_path);
	sn->start_ns = td_now_ns();
	if (sn->s.vbd)
		return start_offline(sn, line + strlen(verb));
	return start_online(sn, line);
}

/*
 * On stderr once the copy lasts PROGRESS_AFTER_NS: one line redrawn in
 * place on a terminal, else a line every PROGRESS_EVERY_NS.
 */
static void progress(struct snap *sn, const struct job_status *js, bool end)
{
	uint64_t now = td_now_ns();
	bool tty = isatty(STDERR_FILENO);
	char copied[32], total[32];

	if (end) {
		if (sn->line_open)
			fputc('\n', stderr);
		sn->line_open = false;
		return;
	}
	if (now - sn->start_ns < PROGRESS_AFTER_NS ||
	    (!tty && sn->line_ns && now - sn->line_ns < PROGRESS_EVERY_NS))
		return;
	sn->line_ns = now;
	ctl_format_bytes(js->copied, copied, sizeof(copied));
	ctl_format_bytes(js->total, total, sizeof(total));
	fprintf(stderr, "%ssnapshot %s: %s of %s copied (%" PRIu64 " %%)%s",
		tty ? "\r" : "", sn->o->extra[0], copied, total,
		js->total ? js->copied * 100 / js->total : 0,
		tty ? "\033[K" : "\n");
	sn->line_open = tty;
}

/* Step 4: follow the job until it is done (0) or failed. */
static int follow(struct snap *sn)
{
	struct job_status js;
	int err;

	if (!sn->start_ns)
		sn->start_ns = td_now_ns();
	for (;;) {
		if ((err = job_status(sn, &js)))
			return ctl_fail(
				"tapdisk %d stopped answering (%s): run "
				"this again to resume the snapshot",
				sn->s.pid, strerror(-err));
		if (!strcmp(js.state, "done") && targets_new(sn, &js))
			return 0;
		if (strcmp(js.state, "copying") && strcmp(js.state, "starting"))
			return ctl_fail(
				"the copy %s%s%s: NEW stays incomplete; "
				"run this again to copy it afresh",
				js.state, js.error[0] ? ": " : "", js.error);
		if (ctl_interrupted)
			return ctl_fail(
				"interrupted: NEW stays incomplete; run "
				"this again to finish it");
		progress(sn, &js, false);
		ctl_serve_wait(&sn->s);
	}
}

/* Offline, interrupted: no more chunks, so the vbd can drain and close. */
static void stop_offline(struct snap *sn)
{
	if (sn->s.vbd && td_vbd_snapshot_running(sn->s.vbd))
		td_vbd_snapshot_stop_cursor(sn->s.vbd);
}

static int print_done(struct snap *sn)
{
	struct td_strbuf sb;
	struct td_json j;

	if (sn->o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "vdisk", sn->o->extra[0]);
		td_json_str(&j, "file", sn->new_path);
		td_json_bool(&j, "changed", true);
		td_json_str(&j, "source", sn->src.vdisk);
		td_json_str(&j, "mode", sn->s.vbd ? "offline" : "online");
		if (!sn->s.vbd)
			td_json_u64(&j, "tapdisk", (uint64_t)sn->s.pid);
		td_json_u64(&j, "elapsed_ms",
			    (td_now_ns() - sn->start_ns) / 1000000);
		td_json_end_object(&j);
		return ctl_print_json(&j, &sb);
	}
	printf("vdisk %s: a complete snapshot of %s as of the instant the copy "
	       "began (%s)\nmapping file: %s\n",
	       sn->o->extra[0], sn->src.vdisk,
	       sn->s.vbd ? "copied offline" : "copied online", sn->new_path);
	return 0;
}

/* Step 5: complete at the master, then the marker goes. */
static int finish(struct snap *sn, struct master_client *c)
{
	ms_reply rep;
	int status = 0;

	if (master_call_vdisk_snapshot_done(c, sn->o->extra[0], &rep))
		status = ctl_call_failed(c, "vdisk snapshot (marking it done)");
	master_reply_free(&rep);
	if (status)
		return status;
	if (unlink(sn->marker) && errno != ENOENT)
		return ctl_fail("cannot remove %s: %s", sn->marker,
				strerror(errno));
	return print_done(sn);
}

/* SRC reached (served by a tapdisk, or here): steps 1 to 5. */
static int run(struct ctl_serve *s)
{
	struct snap *sn = (struct snap *)s;
	struct ctl_opts o = *sn->o;
	struct master_client *c;
	struct job_status js;
	int status, err;

	if (!o.master_given && sn->src.master[0])
		o.master = sn->src.master;
	if (!(c = ctl_client(&o)))
		return EXIT_FAILURE;
	status = make_new(sn, c);
	if (!status && (err = job_status(sn, &js)))
		status = ctl_fail("tapdisk %d does not answer: %s", sn->s.pid,
				  strerror(-err));
	if (!status && !(!strcmp(js.state, "done") && targets_new(sn, &js)))
		status = start_copy(sn, &js);
	if (!status)
		status = follow(sn);
	progress(sn, NULL, true);
	if (status)
		stop_offline(sn);
	else
		status = finish(sn, c);
	master_client_close(c);
	return status;
}

/* Whether a tapdisk of this host holds SRC open (its lock). */
static bool src_busy(const char *path)
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

static int snapshot(struct snap *sn)
{
	sn->s.o = sn->o;
	sn->s.what = "snapshot";
	sn->s.doing = "copying";
	sn->s.run = run;
	sn->s.name = sn->name;
	snprintf(sn->s.path, sizeof(sn->s.path), "%s", sn->src_path);
	snprintf(sn->s.vdisk, sizeof(sn->s.vdisk), "%s", sn->src.vdisk);
	snprintf(sn->s.master, sizeof(sn->s.master), "%s", sn->src.master);
	snprintf(sn->name, sizeof(sn->name), OFFLINE_NAME_FIRST "%s",
		 sn->o->extra[0]);
	return ctl_serve_run(&sn->s, src_busy(sn->src_path));
}

int ctl_cmd_vdisk_snapshot(struct ctl_opts *o)
{
	struct snap *sn = calloc(1, sizeof(*sn));
	struct stripe_map_error err;
	struct stat st;
	int status;

	if (!sn)
		return ctl_fail("out of memory");
	sn->o = o;
	if (!stripe_map_name_ok(o->extra[0]))
		status = ctl_fail("'%s' is not a vdisk name: use 1-63 letters, "
				  "digits, '.', '_' or '-'",
				  o->extra[0]);
	else
		status = ctl_serve_path(o->arg, sn->src_path);
	if (status) {
		free(sn);
		return status;
	}
	if (o->output)
		snprintf(sn->new_path, sizeof(sn->new_path), "%s", o->output);
	else
		snprintf(sn->new_path, sizeof(sn->new_path), "%s/%s.map",
			 CTL_MAP_DIR, o->extra[0]);
	snprintf(sn->marker, sizeof(sn->marker), "%s" STRIPE_INCOMPLETE_SUFFIX,
		 sn->new_path);
	if (!stat(sn->new_path, &st) && stat(sn->marker, &st))
		status = ctl_fail("%s exists and is no incomplete snapshot: "
				  "choose another name or -o FILE; nothing "
				  "was changed",
				  sn->new_path);
	else if (stripe_map_read(sn->src_path, &sn->src, &err)) {
		print_map_error(sn->src_path, &err);
		free(sn);
		return EXIT_FAILURE;
	} else if (!strcmp(sn->src.vdisk, o->extra[0]))
		status = ctl_fail("a disk cannot be its own snapshot");
	else
		status = snapshot(sn);
	stripe_map_free(&sn->src);
	free(sn);
	return status;
}
