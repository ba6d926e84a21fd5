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
 *      already running there is followed instead;
 *   4. its progress is followed ("snapshot status json"), with a progress
 *      line on a terminal;
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
#include "tapdisk/control/control.h"
#include "tapdisk/control/ctl-client.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define POLL_MS 250

struct snap {
	struct ctl_opts *o;
	char src_path[PATH_MAX];
	char new_path[PATH_MAX];
	char marker[PATH_MAX + 16];
	struct stripe_map src;
	int pid; /* the tapdisk serving SRC */
	char sock[PATH_MAX];
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

	if ((err = td_ctl_connect(sn->sock, &fd)))
		return err;
	err = td_ctl_request(fd, line, (int)sn->o->timeout_s * 1000, r);
	close(fd);
	return err ? err : r->err;
}

static int find_tapdisk(struct snap *sn)
{
	const char *run_dir = td_ctl_run_dir(sn->o->run_dir);
	int err = td_ctl_find_serving(run_dir, "stripe", sn->src_path,
				      (int)sn->o->timeout_s * 1000, &sn->pid,
				      NULL);

	if (err)
		return ctl_fail(
			"no tapdisk in %s serves %s: a snapshot is "
			"taken by the tapdisk serving the disk (serve "
			"it with 'tap-ctl create -a stripe:%s', or give "
			"--run-dir); nothing was changed",
			run_dir, sn->src_path, sn->src_path);
	if (td_ctl_socket_path(sn->sock, sizeof(sn->sock), run_dir, sn->pid))
		return ctl_fail("run directory path too long");
	return 0;
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
				    master_client_address(c), &m))
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

static int job_status(struct snap *sn, struct job_status *js)
{
	struct td_ctl_reply r;
	struct td_jval *v = NULL;
	const char *str;
	int err;

	memset(js, 0, sizeof(*js));
	td_ctl_reply_init(&r);
	err = ask(sn, "snapshot status json", &r);
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

/* Step 3: start the copy, unless one of NEW runs already. */
static int start_copy(struct snap *sn, const struct job_status *js)
{
	char line[TD_CTL_LINE_MAX];
	struct td_ctl_reply r;
	int err;

	if (!strcmp(js->state, "copying") || !strcmp(js->state, "starting")) {
		if (targets_new(sn, js))
			return 0;
		return ctl_fail("tapdisk %d is copying to %s: one snapshot at "
				"a time; run this again when it is done",
				sn->pid, js->target);
	}
	if (snprintf(line, sizeof(line),
		     "snapshot start stripe:%s,snapshot_target=on",
		     sn->new_path) >= (int)sizeof(line))
		return ctl_fail("%s: path too long for a control line",
				sn->new_path);
	td_ctl_reply_init(&r);
	err = ask(sn, line, &r);
	if (err)
		ctl_fail("tapdisk %d cannot start the copy: %s", sn->pid,
			 r.err ? r.message : strerror(-err));
	td_ctl_reply_free(&r);
	return err ? EXIT_FAILURE : 0;
}

static void progress(const struct snap *sn, const struct job_status *js,
		     bool end)
{
	if (!isatty(STDERR_FILENO) || sn->o->json)
		return;
	fprintf(stderr,
		"\rsnapshot %s: %" PRIu64 " of %" PRIu64 " MiB copied%s",
		sn->o->extra[0], js->copied >> 20, js->total >> 20,
		end ? "\n" : "");
}

/* Step 4: follow the job until it is done (0) or failed. */
static int follow(struct snap *sn)
{
	struct job_status js;
	int err;

	for (;;) {
		if ((err = job_status(sn, &js)))
			return ctl_fail(
				"tapdisk %d stopped answering (%s): run "
				"this again to resume the snapshot",
				sn->pid, strerror(-err));
		if (!strcmp(js.state, "done") && targets_new(sn, &js)) {
			progress(sn, &js, true);
			return 0;
		}
		if (strcmp(js.state, "copying") && strcmp(js.state, "starting"))
			return ctl_fail(
				"the copy %s%s%s: NEW stays incomplete; "
				"run this again to copy it afresh",
				js.state, js.error[0] ? ": " : "", js.error);
		progress(sn, &js, false);
		poll(NULL, 0, POLL_MS);
	}
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
	if (sn->o->json)
		return ctl_print_result(sn->o->extra[0], sn->new_path, true);
	printf("vdisk %s: a complete snapshot of %s as of the instant the copy "
	       "began\nmapping file: %s\n",
	       sn->o->extra[0], sn->src.vdisk, sn->new_path);
	return 0;
}

static int run(struct snap *sn)
{
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
		status = ctl_fail("tapdisk %d does not answer: %s", sn->pid,
				  strerror(-err));
	if (!status && !(!strcmp(js.state, "done") && targets_new(sn, &js)))
		status = start_copy(sn, &js);
	if (!status)
		status = follow(sn);
	if (!status)
		status = finish(sn, c);
	master_client_close(c);
	return status;
}

int ctl_cmd_vdisk_snapshot(struct ctl_opts *o)
{
	struct snap sn = {.o = o};
	struct stripe_map_error err;
	struct stat st;
	int status;

	if (!stripe_map_name_ok(o->extra[0]))
		return ctl_fail("'%s' is not a vdisk name: use 1-63 letters, "
				"digits, '.', '_' or '-'",
				o->extra[0]);
	if ((status = ctl_serve_path(o->arg, sn.src_path)))
		return status;
	if (o->output)
		snprintf(sn.new_path, sizeof(sn.new_path), "%s", o->output);
	else
		snprintf(sn.new_path, sizeof(sn.new_path), "%s/%s.map",
			 CTL_MAP_DIR, o->extra[0]);
	snprintf(sn.marker, sizeof(sn.marker), "%s" STRIPE_INCOMPLETE_SUFFIX,
		 sn.new_path);
	if (!stat(sn.new_path, &st) && stat(sn.marker, &st))
		return ctl_fail("%s exists and is no incomplete snapshot: "
				"choose another name or -o FILE; nothing was "
				"changed",
				sn.new_path);
	if (stripe_map_read(sn.src_path, &sn.src, &err)) {
		print_map_error(sn.src_path, &err);
		return EXIT_FAILURE;
	}
	if (!strcmp(sn.src.vdisk, o->extra[0]))
		status = ctl_fail("a disk cannot be its own snapshot");
	else if (!(status = find_tapdisk(&sn)))
		status = run(&sn);
	stripe_map_free(&sn.src);
	return status;
}
