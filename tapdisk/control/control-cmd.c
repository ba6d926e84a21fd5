/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * control-cmd.c - the commands of the control socket (control.h): the
 * table, the report behind info and stats, and pause/resume/destroy with
 * their late replies.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "tapdisk/control/control-int.h"
#include "tapdisk/snapshot.h"

/* One request being handled: its words, and what the handler answers. */
struct ctl_req {
	int argc;
	char **argv;
	struct td_strbuf *payload; /* filled on success */
	char msg[CTL_MSG_MAX];	   /* filled on error */
};

/* --- the report behind info and stats ---------------------------------------- */

static const char *ctl_state(const struct td_ctl_server *ctl)
{
	if (ctl->shutting_down)
		return "stopping";
	if (ctl->pausing)
		return "pausing";
	return td_vbd_paused(ctl->vbd) ? "paused" : "running";
}

static uint64_t timeval_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000ull + (uint64_t)tv->tv_usec;
}

static void ctl_report(const struct td_ctl_server *ctl, struct td_report *r)
{
	struct rusage ru;

	memset(r, 0, sizeof(*r));
	r->pid = (int)getpid();
	r->name = td_vbd_name(ctl->vbd);
	r->chain = td_vbd_chain(ctl->vbd);
	r->state = ctl_state(ctl);
	r->info = *td_vbd_get_info(ctl->vbd);
	td_vbd_get_stats(ctl->vbd, &r->stats);
	r->kinds = ctl->kinds;
	r->servers = ctl->servers;
	r->nr_servers = ctl->nr_servers;
	if (!getrusage(RUSAGE_SELF, &ru)) {
		r->cpu_user_us = timeval_us(&ru.ru_utime);
		r->cpu_sys_us = timeval_us(&ru.ru_stime);
	}
	r->uptime_us = (td_now_ns() - ctl->start_ns) / 1000;
	r->log_dropped = td_log_syslog_dropped();
	r->frontends = ctl->frontends;
	r->nr_frontends = ctl->nr_frontends;
	r->vbd = ctl->vbd;
}

/* --- commands ---------------------------------------------------------------- */

static bool want_json(const struct ctl_req *req)
{
	return req->argc > 1;
}

static int ctl_check_json_arg(struct ctl_req *req, const char *usage)
{
	if (req->argc > 1 && strcmp(req->argv[1], "json")) {
		snprintf(req->msg, sizeof(req->msg),
			 "unknown argument '%.64s'; usage: %s", req->argv[1],
			 usage);
		return -EINVAL;
	}
	return 0;
}

static int cmd_info(struct ctl_client *c, struct ctl_req *req)
{
	struct td_report r;
	int err = ctl_check_json_arg(req, "info [json]");

	if (err)
		return err;
	ctl_report(c->ctl, &r);
	err = want_json(req) ? td_format_info_json(&r, req->payload)
			     : td_format_info_text(&r, req->payload);
	if (err)
		snprintf(req->msg, sizeof(req->msg), "out of memory");
	return err;
}

static int cmd_stats(struct ctl_client *c, struct ctl_req *req)
{
	struct td_report r;
	bool metrics = req->argc > 1 && !strcmp(req->argv[1], "metrics");
	int err = metrics ? 0 : ctl_check_json_arg(req, "stats [json|metrics]");

	if (err)
		return err;
	ctl_report(c->ctl, &r);
	if (metrics)
		err = td_format_stats_metrics(&r, req->payload);
	else if (want_json(req))
		err = td_format_stats_json(&r, req->payload);
	else
		err = td_format_stats_text(&r, req->payload);
	if (err)
		snprintf(req->msg, sizeof(req->msg), "out of memory");
	return err;
}

/* The vbd has drained after "pause": answer whoever asked. */
static void ctl_drained(struct td_vbd *vbd, void *opaque)
{
	struct td_ctl_server *ctl = opaque;
	struct ctl_client *c = ctl->pause_waiter;
	struct td_strbuf payload;

	ctl->pausing = false;
	ctl->pause_waiter = NULL;
	if (!c)
		return;
	td_strbuf_init(&payload);
	td_strbuf_puts(&payload, "paused: no I/O in flight, new I/O is held "
				 "until resume\n");
	td_ctl_send_ok(c, &payload);
	td_strbuf_free(&payload);
	c->busy = false;
	td_ctl_pump(c);
}

/* A pause that had not drained yet is called off. */
void td_ctl_cancel_pause(struct td_ctl_server *ctl, const char *why)
{
	struct ctl_client *c = ctl->pause_waiter;

	ctl->pausing = false;
	ctl->pause_waiter = NULL;
	if (!c)
		return;
	td_ctl_send_err(c, -ECANCELED, why);
	c->busy = false;
	td_ctl_pump(c);
}

static int cmd_pause(struct ctl_client *c, struct ctl_req *req)
{
	struct td_ctl_server *ctl = c->ctl;
	int err;

	if (ctl->pausing) {
		snprintf(req->msg, sizeof(req->msg),
			 "a pause is already in progress (waiting for the I/O "
			 "in flight to finish)");
		return -EALREADY;
	}
	err = td_vbd_pause(ctl->vbd, ctl_drained, ctl);
	if (err) {
		snprintf(req->msg, sizeof(req->msg),
			 err == -EALREADY ? "the vbd is already paused"
					  : "cannot pause the vbd");
		return err;
	}
	ctl->pausing = true;
	ctl->pause_waiter = c;
	return CTL_DEFERRED;
}

static int cmd_resume(struct ctl_client *c, struct ctl_req *req)
{
	struct td_ctl_server *ctl = c->ctl;
	bool was_pausing = ctl->pausing;
	int err;

	if (ctl->snap_starting || td_vbd_snapshot_pausing(ctl->vbd)) {
		snprintf(req->msg, sizeof(req->msg),
			 ctl->snap_starting
				 ? "a snapshot is marking its instant; the "
				   "disk resumes on its own"
				 : "a snapshot exchanges its files; the disk "
				   "resumes on its own");
		return -EBUSY;
	}
	err = td_vbd_resume(ctl->vbd);

	if (err) {
		snprintf(req->msg, sizeof(req->msg),
			 err == -EALREADY ? "the vbd is not paused"
					  : "cannot resume the vbd");
		return err;
	}
	if (was_pausing)
		td_ctl_cancel_pause(ctl,
				    "pause cancelled by a resume before the "
				    "I/O in flight had finished");
	td_strbuf_puts(req->payload,
		       was_pausing ? "resumed (the pause in progress was "
				     "cancelled)\n"
				   : "resumed\n");
	return 0;
}

static void ctl_run_destroy(struct td_defer *d, void *opaque)
{
	struct td_ctl_server *ctl = opaque;

	ctl->destroy_cb(ctl->opaque);
}

static int cmd_destroy(struct ctl_client *c, struct ctl_req *req)
{
	struct td_ctl_server *ctl = c->ctl;

	if (!ctl->destroy_cb) {
		snprintf(req->msg, sizeof(req->msg),
			 "this tapdisk cannot be destroyed over its control "
			 "socket; send it SIGTERM");
		return -ENOTSUP;
	}
	c->wants_destroy = true;
	if (!ctl->destroy_requested) {
		ctl->destroy_requested = true;
		td_ctl_server_begin_shutdown(ctl);
		/* Never run the owner's shutdown inside this client's pump. */
		td_loop_defer(ctl->loop, &ctl->destroy_defer, ctl_run_destroy,
			      ctl);
	}
	return CTL_DEFERRED;
}

/* The first line of text, printable ASCII only, as an ERR message. */
static void ctl_msg_from(struct ctl_req *req, const struct td_strbuf *text)
{
	const char *t = td_strbuf_str(text);
	size_t n = 0;

	for (; t[n] && t[n] != '\n' && n + 1 < sizeof(req->msg); n++)
		req->msg[n] = (t[n] >= 0x20 && t[n] < 0x7f) ? t[n] : ' ';
	req->msg[n] = '\0';
	if (!n)
		snprintf(req->msg, sizeof(req->msg), "the driver refused");
}

/* "driver NAME WORD...": a command for one driver of the chain. */
static int cmd_driver(struct ctl_client *c, struct ctl_req *req)
{
	struct td_strbuf out;
	int err;

	if (req->argc < 3) {
		snprintf(req->msg, sizeof(req->msg),
			 "usage: driver NAME WORD... (e.g. driver stripe "
			 "status)");
		return -EINVAL;
	}
	td_strbuf_init(&out);
	err = td_vbd_driver_control(c->ctl->vbd, req->argv[1], req->argc - 2,
				    req->argv + 2, &out);
	if (!err && td_strbuf_error(&out))
		err = -ENOMEM;
	if (err) {
		ctl_msg_from(req, &out);
	} else {
		td_strbuf_append(req->payload, out.data, out.len);
		if (out.len && out.data[out.len - 1] != '\n')
			td_strbuf_puts(req->payload, "\n");
	}
	td_strbuf_free(&out);
	return err;
}

/* The frontend of kind name serving the vbd, or NULL. */
static struct td_frontend *ctl_find_frontend(const struct td_ctl_server *ctl,
					     const char *name)
{
	for (unsigned int i = 0; i < ctl->nr_servers; i++)
		if (!strcmp(ctl->servers[i]->ops->name, name))
			return ctl->servers[i];
	return NULL;
}

/* "frontend KIND WORD...": a command for one frontend (e.g. nbd list). */
static int cmd_frontend(struct ctl_client *c, struct ctl_req *req)
{
	struct td_frontend *fe;
	struct td_strbuf out;
	int err;

	if (req->argc < 3) {
		snprintf(req->msg, sizeof(req->msg),
			 "usage: frontend KIND WORD... (e.g. frontend nbd "
			 "list)");
		return -EINVAL;
	}
	fe = ctl_find_frontend(c->ctl, req->argv[1]);
	if (!fe) {
		snprintf(req->msg, sizeof(req->msg),
			 "this tapdisk has no %.32s frontend (see info)",
			 req->argv[1]);
		return -ENOENT;
	}
	td_strbuf_init(&out);
	err = td_frontend_control(fe, req->argc - 2, req->argv + 2, &out);
	if (!err && td_strbuf_error(&out))
		err = -ENOMEM;
	if (err == -EOPNOTSUPP)
		snprintf(req->msg, sizeof(req->msg),
			 "the %.32s frontend takes no commands", req->argv[1]);
	else if (err)
		ctl_msg_from(req, &out);
	else
		td_strbuf_append(req->payload, out.data, out.len);
	td_strbuf_free(&out);
	return err;
}

static int resize_reply(struct ctl_req *req, uint64_t old_s, uint64_t new_s,
			const struct td_strbuf *told)
{
	struct td_json j;

	if (!want_json(req)) {
		td_strbuf_printf(req->payload,
				 "%s %" PRIu64 " bytes (was %" PRIu64 ")\n",
				 new_s > old_s ? "grown to" : "unchanged at",
				 new_s << TD_SECTOR_SHIFT,
				 old_s << TD_SECTOR_SHIFT);
		td_strbuf_append(req->payload, told->data, told->len);
		return 0;
	}
	td_json_init(&j, req->payload);
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "old_bytes", old_s << TD_SECTOR_SHIFT);
	td_json_u64(&j, "new_bytes", new_s << TD_SECTOR_SHIFT);
	td_json_bool(&j, "grown", new_s > old_s);
	td_json_str(&j, "frontends", td_strbuf_str(told));
	td_json_end_object(&j);
	return td_json_finish(&j);
}

/* "resize [json]": the chain takes its new, larger size (tap-ctl resize). */
static int cmd_resize(struct ctl_client *c, struct ctl_req *req)
{
	struct td_ctl_server *ctl = c->ctl;
	uint64_t old_s, new_s;
	struct td_strbuf out;
	int err = ctl_check_json_arg(req, "resize [json]");

	if (err)
		return err;
	td_strbuf_init(&out);
	if (td_vbd_snapshot_running(ctl->vbd)) {
		snprintf(req->msg, sizeof(req->msg),
			 "a snapshot job is copying this disk: grow it once "
			 "the job is done (snapshot status) or cancelled");
		return -EBUSY;
	}
	err = td_vbd_resize(ctl->vbd, &old_s, &new_s, &out);
	if (err) {
		ctl_msg_from(req, &out);
		td_strbuf_free(&out);
		return err;
	}
	if (new_s > old_s) {
		td_info("%s: grown from %" PRIu64 " to %" PRIu64 " sectors",
			td_vbd_name(ctl->vbd), old_s, new_s);
		for (unsigned int i = 0; i < ctl->nr_servers; i++)
			td_frontend_resized(ctl->servers[i], &out);
	}
	err = td_strbuf_error(&out) ? -ENOMEM
				    : resize_reply(req, old_s, new_s, &out);
	if (err)
		snprintf(req->msg, sizeof(req->msg), "out of memory");
	td_strbuf_free(&out);
	return err;
}

/* "poll [US] [json]": the polling budget, set when US is given. */
static int cmd_poll(struct ctl_client *c, struct ctl_req *req)
{
	struct td_loop *loop = c->ctl->loop;
	struct td_loop_poll_stats st;
	bool json = req->argc > 1 && !strcmp(req->argv[req->argc - 1], "json");
	int nargs = req->argc - 1 - json;
	struct td_json j;
	char *end;
	unsigned long us;

	if (nargs > 1) {
		snprintf(req->msg, sizeof(req->msg), "usage: poll [US] [json]");
		return -EINVAL;
	}
	if (nargs == 1) {
		errno = 0;
		us = strtoul(req->argv[1], &end, 10);
		if (errno || *end || req->argv[1][0] < '0' ||
		    req->argv[1][0] > '9' ||
		    td_loop_set_poll_budget(loop, us > UINT32_MAX
							  ? UINT32_MAX
							  : (uint32_t)us)) {
			snprintf(req->msg, sizeof(req->msg),
				 "poll: '%.32s' is not microseconds from 0 "
				 "(off) to %u",
				 req->argv[1], TD_LOOP_POLL_MAX_US);
			return -EINVAL;
		}
		td_info("%s: polling budget %lu us%s", td_vbd_name(c->ctl->vbd),
			us, us ? "" : " (polling off)");
	}
	td_loop_get_poll_stats(loop, &st);
	if (!json) {
		td_strbuf_printf(
			req->payload,
			"budget_us: %u\nwindow_us: %u\nrounds: %" PRIu64
			"\nhits: %" PRIu64 "\nsleeps: %" PRIu64
			"\npoll_us: %" PRIu64 "\nbackoffs: %" PRIu64
			"\nbackoff: %s\ncpu_pct: %u\nrunnable: %u\ncpus: %u\n",
			st.budget_us, st.window_us, st.rounds, st.hits,
			st.sleeps, st.poll_ns / 1000, st.backoffs,
			st.backoff ? "yes" : "no", st.cpu_pct, st.runnable,
			st.cpus);
		return 0;
	}
	td_json_init(&j, req->payload);
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "budget_us", st.budget_us);
	td_json_u64(&j, "window_us", st.window_us);
	td_json_u64(&j, "rounds", st.rounds);
	td_json_u64(&j, "hits", st.hits);
	td_json_u64(&j, "sleeps", st.sleeps);
	td_json_u64(&j, "poll_us", st.poll_ns / 1000);
	td_json_u64(&j, "backoffs", st.backoffs);
	td_json_bool(&j, "backoff", st.backoff);
	td_json_u64(&j, "cpu_pct", st.cpu_pct);
	td_json_u64(&j, "runnable", st.runnable);
	td_json_u64(&j, "cpus", st.cpus);
	td_json_end_object(&j);
	return td_json_finish(&j);
}

/* "stages [on|off|reset] [json]": stage timing, switched when asked. */
static int cmd_stages(struct ctl_client *c, struct ctl_req *req)
{
	struct td_vbd *vbd = c->ctl->vbd;
	bool json = req->argc > 1 && !strcmp(req->argv[req->argc - 1], "json");
	int nargs = req->argc - 1 - json;
	const char *how = nargs == 1 ? req->argv[1] : "";
	struct td_json j;

	if (nargs > 1 || (nargs == 1 && strcmp(how, "on") &&
			  strcmp(how, "off") && strcmp(how, "reset"))) {
		snprintf(req->msg, sizeof(req->msg),
			 "usage: stages [on|off|reset] [json]");
		return -EINVAL;
	}
	if (!strcmp(how, "reset"))
		td_vbd_stages_reset(vbd);
	else if (nargs == 1)
		td_vbd_stages_set(vbd, !strcmp(how, "on"));
	if (nargs == 1)
		td_info("%s: stage timing %s", td_vbd_name(vbd), how);
	if (!json) {
		td_vbd_report_stages_text(vbd, req->payload);
		return td_strbuf_error(req->payload);
	}
	td_json_init(&j, req->payload);
	td_json_begin_object(&j, NULL);
	td_vbd_report_stages_json(vbd, &j);
	td_json_end_object(&j);
	return td_json_finish(&j);
}

/* The snapshot's instant is marked, or its start failed: answer. */
static void ctl_snap_started(struct td_vbd *vbd, int err, const char *why,
			     void *opaque)
{
	struct td_ctl_server *ctl = opaque;
	struct ctl_client *c = ctl->snap_waiter;
	struct td_strbuf payload;

	ctl->snap_starting = false;
	ctl->snap_waiter = NULL;
	if (!c)
		return;
	if (err) {
		td_ctl_send_err(c, err, why && *why ? why : strerror(-err));
	} else {
		td_strbuf_init(&payload);
		td_strbuf_puts(&payload, "snapshot started: the instant is "
					 "marked, copying in the background\n");
		td_ctl_send_ok(c, &payload);
		td_strbuf_free(&payload);
	}
	c->busy = false;
	td_ctl_pump(c);
}

static int snap_start(struct ctl_client *c, struct ctl_req *req)
{
	struct td_ctl_server *ctl = c->ctl;
	struct td_snap_opts o = {false, TD_SNAP_SPEED_KEEP, TD_SNAP_SPEED_KEEP};
	struct td_strbuf why;
	bool bad = req->argc < 3 || req->argc > 6;
	int err;

	if (!bad && req->argc >= 4) {
		o.row = !strcmp(req->argv[3], "row");
		bad = !o.row && strcmp(req->argv[3], "cbw");
	}
	if (!bad && req->argc >= 5)
		bad = td_parse_size(req->argv[4], &o.speed) != 0;
	if (!bad && req->argc == 6)
		bad = td_parse_size(req->argv[5], &o.busy_speed) != 0;
	if (bad) {
		snprintf(req->msg, sizeof(req->msg),
			 "usage: snapshot start TARGET-CHAIN [row|cbw [BPS "
			 "[BUSY-BPS]]]");
		return -EINVAL;
	}
	if (ctl->pausing || ctl->snap_starting) {
		snprintf(req->msg, sizeof(req->msg),
			 "a pause or a snapshot start is in progress");
		return -EBUSY;
	}
	td_strbuf_init(&why);
	err = td_vbd_snapshot_start(ctl->vbd, req->argv[2], &o,
				    ctl_snap_started, ctl, &why);
	if (err) {
		ctl_msg_from(req, &why);
		td_strbuf_free(&why);
		return err;
	}
	td_strbuf_free(&why);
	ctl->snap_starting = true;
	ctl->snap_waiter = c;
	return CTL_DEFERRED;
}

/*
 * "snapshot speed BPS [BUSY-BPS]": the background copy's limit (0 none)
 * and its limit while the disk is busy (0: not slowed; kept if absent).
 */
static int snap_speed(struct ctl_client *c, struct ctl_req *req)
{
	uint64_t bps, busy = TD_SNAP_SPEED_KEEP;
	struct td_strbuf why;
	int err;

	for (int i = 2; i < req->argc; i++)
		if (td_parse_size(req->argv[i], i == 2 ? &bps : &busy)) {
			snprintf(req->msg, sizeof(req->msg),
				 "'%s' is not a speed: give bytes per second "
				 "(K, M, G suffixes; 0 for no limit)",
				 req->argv[i]);
			return -EINVAL;
		}
	td_strbuf_init(&why);
	err = td_vbd_snapshot_set_speed(c->ctl->vbd, bps, busy, &why);
	if (err)
		ctl_msg_from(req, &why);
	else
		td_strbuf_printf(req->payload,
				 "background copy: speed %" PRIu64
				 " bytes/s, %s\n",
				 bps, "see snapshot status for busy_speed");
	td_strbuf_free(&why);
	return err;
}

/* "snapshot start TARGET | status [json] | speed BPS | cancel"
 * (doc/snapshots.md). */
static int cmd_snapshot(struct ctl_client *c, struct ctl_req *req)
{
	const char *sub = req->argc > 1 ? req->argv[1] : "";
	struct td_strbuf why;
	int err;

	if (!strcmp(sub, "start"))
		return snap_start(c, req);
	if (!strcmp(sub, "status") &&
	    (req->argc == 2 ||
	     (req->argc == 3 && !strcmp(req->argv[2], "json")))) {
		td_vbd_snapshot_status(c->ctl->vbd, req->argc == 3,
				       req->payload);
		return 0;
	}
	if (!strcmp(sub, "speed") && (req->argc == 3 || req->argc == 4))
		return snap_speed(c, req);
	if (!strcmp(sub, "cancel") && req->argc == 2) {
		td_strbuf_init(&why);
		err = td_vbd_snapshot_cancel(c->ctl->vbd, &why);
		if (err)
			ctl_msg_from(req, &why);
		else
			td_strbuf_puts(req->payload,
				       "snapshot cancelled: the job file is "
				       "gone, the target is incomplete\n");
		td_strbuf_free(&why);
		return err;
	}
	snprintf(
		req->msg, sizeof(req->msg),
		"usage: snapshot start TARGET-CHAIN [row|cbw [BPS [BUSY-BPS]]] "
		"| snapshot status [json] "
		"| snapshot speed BPS [BUSY-BPS] | snapshot cancel");
	return -EINVAL;
}

static int cmd_help(struct ctl_client *c, struct ctl_req *req);

static const struct ctl_command {
	const char *name;
	const char *usage;
	const char *what;
	int max_args; /* words after the command */
	bool during_shutdown;
	int (*handler)(struct ctl_client *c, struct ctl_req *req);
} ctl_commands[] = {
	{"help", "help", "this list", 0, true, cmd_help},
	{"info", "info [json]", "what this tapdisk serves", 1, true, cmd_info},
	{"stats", "stats [json|metrics]",
	 "I/O, NBD, shm, Xen and CPU counters (metrics: Prometheus text)", 1,
	 true, cmd_stats},
	{"pause", "pause", "hold new I/O; reply once drained", 0, false,
	 cmd_pause},
	{"resume", "resume", "release the held I/O", 0, false, cmd_resume},
	{"destroy", "destroy", "flush, close and exit; reply at the end", 0,
	 true, cmd_destroy},
	{"driver", "driver NAME WORD...",
	 "a command for driver NAME of the chain", TD_CTL_MAX_ARGS - 1, false,
	 cmd_driver},
	{"resize", "resize [json]",
	 "take the chain's new, larger size and tell the frontends", 1, false,
	 cmd_resize},
	{"frontend", "frontend KIND WORD...",
	 "a command for frontend KIND (nbd list [json], nbd drop ID)",
	 TD_CTL_MAX_ARGS - 1, true, cmd_frontend},
	{"snapshot", "snapshot start|status|speed|cancel",
	 "copy the disk as of now onto a chain (start TARGET-CHAIN [row|cbw "
	 "[BPS [BUSY-BPS]]], status [json], speed BPS [BUSY-BPS], cancel)",
	 5, false, cmd_snapshot},
	{"poll", "poll [US] [json]",
	 "the polling budget in microseconds (0: off), set when US is given", 2,
	 true, cmd_poll},
	{"stages", "stages [on|off|reset] [json]",
	 "time each I/O's stages inside tapdisk (on, off, reset the sums)", 2,
	 true, cmd_stages},
};
#define CTL_NR_COMMANDS (sizeof(ctl_commands) / sizeof(ctl_commands[0]))

static int cmd_help(struct ctl_client *c, struct ctl_req *req)
{
	td_strbuf_printf(req->payload, "tapdisk control protocol %d\n",
			 TD_CTL_PROTOCOL_VERSION);
	for (unsigned int i = 0; i < CTL_NR_COMMANDS; i++)
		td_strbuf_printf(req->payload, "  %-14s %s\n",
				 ctl_commands[i].usage, ctl_commands[i].what);
	return 0;
}

static const struct ctl_command *ctl_find_command(const char *name)
{
	for (unsigned int i = 0; i < CTL_NR_COMMANDS; i++)
		if (!strcmp(ctl_commands[i].name, name))
			return &ctl_commands[i];
	return NULL;
}

/* Check what cannot run now; 0 or -errno with req->msg. */
static int ctl_check_command(struct ctl_client *c,
			     const struct ctl_command *cmd, struct ctl_req *req)
{
	if (req->argc - 1 > cmd->max_args) {
		snprintf(req->msg, sizeof(req->msg), "usage: %s", cmd->usage);
		return -EINVAL;
	}
	if (!c->ctl->vbd || (c->ctl->shutting_down && !cmd->during_shutdown)) {
		snprintf(req->msg, sizeof(req->msg),
			 "tapdisk is shutting down");
		return -ESHUTDOWN;
	}
	return 0;
}

void td_ctl_dispatch(struct ctl_client *c, int argc, char **argv)
{
	const struct ctl_command *cmd = ctl_find_command(argv[0]);
	struct td_strbuf payload;
	struct ctl_req req = {.argc = argc, .argv = argv};
	int err;

	if (!cmd) {
		snprintf(req.msg, sizeof(req.msg),
			 "unknown command '%.64s'; send 'help' for the list",
			 argv[0]);
		td_ctl_send_err(c, -ENOSYS, req.msg);
		return;
	}
	td_strbuf_init(&payload);
	req.payload = &payload;
	err = ctl_check_command(c, cmd, &req);
	if (!err)
		err = cmd->handler(c, &req);
	if (err == CTL_DEFERRED)
		c->busy = true;
	else if (err)
		td_ctl_send_err(c, err, req.msg);
	else
		td_ctl_send_ok(c, &payload);
	td_strbuf_free(&payload);
}
