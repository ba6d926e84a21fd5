/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-rehome.c - stripe-ctl server evacuate and server fail
 * --rehome (issue #19, item 3): move every replica a server holds to
 * another server while the disks stay in use.
 *
 * For each replica slot on the server (MS_EXTENT_LIST of the server),
 * one move at the master (MS_MOVE_BEGIN places NEW), the copy by the
 * stripe driver of the disk's tapdisk, or of this process when no
 * tapdisk serves the disk ("driver stripe move add", then the mapping
 * file is watched until it names NEW: stripe-ctl-rehome-disk.c), and
 * only then MS_MOVE_COMMIT, which frees OLD.  Every step is idempotent
 * and the mapping file decides: a rerun after a kill -9 of anything
 * begins the same moves again, commits those the map has swapped in,
 * waits for those being copied and starts the others.  A move whose NEW
 * the map does not name is aborted at the master only when the driver
 * refused it; an extent a map names is never freed.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "master/reply.h"
#include "tools/stripe-ctl/stripe-ctl-rehome.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S  1000000000ull

void ctl_rehome_end_line(struct rehome *rh)
{
	if (rh->line_open)
		fputc('\n', stderr);
	rh->line_open = false;
}

void ctl_rehome_failed(struct rehome *rh, struct rh_task *t, const char *fmt,
		       ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->error, sizeof(t->error), fmt, ap);
	va_end(ap);
	t->outcome = "failed";
	ctl_rehome_end_line(rh);
	fprintf(stderr,
		"stripe-ctl: %s: vdisk %s column %u extent %u replica %u: "
		"%s\n",
		rh->verb, t->vdisk, t->column, t->extent, t->replica, t->error);
}

const char *ctl_rehome_keep(struct rehome *rh, const char *path)
{
	char **files = realloc(rh->files, (rh->nr_files + 1) * sizeof(*files));
	char *copy;

	if (!files)
		return NULL;
	rh->files = files;
	if (!(copy = strdup(path)))
		return NULL;
	files[rh->nr_files++] = copy;
	return copy;
}

/* --- the master's side of one slot ------------------------------------------- */

static void move_args(const struct rehome *rh, const struct rh_task *t,
		      ms_move_args *a, bool at_new)
{
	memset(a, 0, sizeof(*a));
	a->vdisk = (char *)t->vdisk;
	a->column = t->column;
	a->extent = t->extent;
	a->replica = t->replica;
	a->target = at_new ? (char *)t->new_target : rh->server->target;
	a->lun = at_new ? t->new_lun : rh->server->lun;
	a->offset_bytes = at_new ? t->new_offset : 0;
	a->reason = rh->fail ? MS_MOVE_FAIL : MS_MOVE_EVACUATE;
}

/* NEW as the master answered it (the move, or the slot's replica). */
static void take_new(struct rh_task *t, const ms_move_result *r)
{
	const ms_server *n = &r->new_server;

	t->have_move = true;
	t->new_id = n->id;
	t->new_lun = n->lun;
	t->new_block = n->block_size ? n->block_size : 512;
	snprintf(t->new_target, sizeof(t->new_target), "%s", n->target);
	snprintf(t->new_portal, sizeof(t->new_portal), "%s", n->portal);
	snprintf(t->new_address, sizeof(t->new_address), "%s", n->address);
	t->new_offset = r->move.new_offset_bytes;
	t->reached = r->move.reached;
	t->wanted = r->move.wanted;
}

/* The placement could not keep the extent's spread: say so, once. */
static void note_spread(const struct rehome *rh, const struct rh_task *t)
{
	if (t->reached >= t->wanted)
		return;
	fprintf(stderr,
		"stripe-ctl: %s: note: vdisk %s column %u extent %u: the new "
		"replica (server %u) keeps the extent's copies on distinct "
		"%ss only, distinct %ss wanted: no other %s had a free "
		"extent (the server was the last of its %s with room)\n",
		rh->verb, t->vdisk, t->column, t->extent, t->new_id,
		ctl_domain_name(t->reached), ctl_domain_name(t->wanted),
		ctl_domain_name(t->wanted), ctl_domain_name(t->wanted));
}

/*
 * MS_MOVE_BEGIN: NEW into t; 1 when the slot was moved and committed
 * already (outcome "already"), 0 with NEW, -1 with t failed.
 */
int ctl_rehome_begin(struct rehome *rh, struct rh_task *t)
{
	ms_move_args a;
	ms_reply rep;
	int ret = 0;

	move_args(rh, t, &a, false);
	if (master_call_move_begin(rh->c, &a, &rep)) {
		ctl_rehome_failed(rh, t,
				  "the master did not begin the move: %s",
				  master_client_error(rh->c));
		ret = -1;
	} else {
		take_new(t, &rep.body.ms_body_u.move);
		if (rep.body.ms_body_u.move.done) {
			t->outcome = "already";
			ret = 1;
		} else if (rep.changed)
			note_spread(rh, t);
	}
	master_reply_free(&rep);
	return ret;
}

/* MS_MOVE_COMMIT of t's NEW (the map names it); 0, or -1 with t failed. */
int ctl_rehome_commit(struct rehome *rh, struct rh_task *t)
{
	ms_move_args a;
	ms_reply rep;
	int ret = 0;

	move_args(rh, t, &a, true);
	if (master_call_move_commit(rh->c, &a, &rep)) {
		ctl_rehome_failed(rh, t,
				  "the map names the new replica (server %u "
				  "offset %" PRIu64
				  ") but the master did not commit it: %s; "
				  "run the command again",
				  t->new_id, t->new_offset,
				  master_client_error(rh->c));
		ret = -1;
	}
	master_reply_free(&rep);
	return ret;
}

/* MS_MOVE_ABORT of t's NEW (the map does not name it); 0 or -1. */
int ctl_rehome_abort(struct rehome *rh, struct rh_task *t)
{
	ms_move_args a;
	ms_reply rep;
	int ret = 0;

	move_args(rh, t, &a, true);
	if (master_call_move_abort(rh->c, &a, &rep))
		ret = -1;
	master_reply_free(&rep);
	return ret;
}

/* --- the server and its slots ------------------------------------------------ */

static int find_server(struct rehome *rh)
{
	const ms_server *s;

	if (master_call_server_list(rh->c, &rh->srv_rep))
		return ctl_call_failed(rh->c, "server list");
	for (u_int i = 0; i < rh->srv_rep.body.ms_body_u.servers.servers_len;
	     i++) {
		s = &rh->srv_rep.body.ms_body_u.servers.servers_val[i];
		if (!strcmp(s->target, rh->o->target) &&
		    s->lun == (u_int)rh->o->lun) {
			rh->server = s;
			return 0;
		}
	}
	return ctl_fail("%s: no server %s lun %ld at the master %s (see "
			"'stripe-ctl server list'); nothing was changed",
			rh->verb, rh->o->target, rh->o->lun, rh->o->master);
}

/* Fail (server fail --rehome) or drain (evacuate) it; 0 or exit status. */
static int mark_server(struct rehome *rh)
{
	ms_server_key k = {.target = rh->server->target,
			   .lun = rh->server->lun};
	ms_reply rep;
	int ret;

	ret = rh->fail ? master_call_server_fail(rh->c, &k, &rep)
		       : master_call_server_drain(rh->c, &k, &rep);
	if (ret) {
		master_reply_free(&rep);
		return ctl_call_failed(rh->c, rh->fail ? "server fail"
						       : "server drain");
	}
	fprintf(stderr, "stripe-ctl: %s: server %u (%s lun %u): %s\n", rh->verb,
		rh->server->id, rh->server->target, rh->server->lun,
		rh->fail ? (rep.changed ? "failed: no new extents go to it; "
					  "re-homing its replicas from the "
					  "surviving ones"
					: "failed already; finishing the "
					  "re-homing")
			 : (rep.changed ? "draining: no new extents go to it"
					: "draining already"));
	master_reply_free(&rep);
	return 0;
}

static int add_task(struct rehome *rh, const ms_extent_entry *e)
{
	struct rh_task *t;

	if (rh->nr_tasks == rh->cap_tasks) {
		size_t cap = rh->cap_tasks ? rh->cap_tasks * 2 : 64;

		t = realloc(rh->tasks, cap * sizeof(*t));
		if (!t)
			return ctl_fail("out of memory");
		rh->tasks = t;
		rh->cap_tasks = cap;
	}
	t = &rh->tasks[rh->nr_tasks++];
	memset(t, 0, sizeof(*t));
	snprintf(t->vdisk, sizeof(t->vdisk), "%s", e->vdisk);
	t->column = e->column;
	t->extent = e->extent;
	t->replica = e->replica;
	t->incoming = e->move_target;
	return 0;
}

/*
 * The server's allocated extents: into tasks when tasks, else counted
 * into *left (replicas and move targets); 0 or an exit status.
 */
static int list_slots(struct rehome *rh, bool tasks, size_t *left)
{
	u_int id = rh->server->id;
	ms_extent_list_args a = {.server_ids = {1, &id},
				 .vdisk = "",
				 .allocated_only = true,
				 .limit = MS_MAX_PAGE};
	bool more = true;
	int status = 0;

	*left = 0;
	while (more && !status) {
		ms_reply rep;
		ms_extent_page *p = &rep.body.ms_body_u.extents;

		if (master_call_extent_list(rh->c, &a, &rep)) {
			master_reply_free(&rep);
			return ctl_call_failed(rh->c, "extents list");
		}
		for (u_int i = 0; i < p->extents.extents_len && !status; i++) {
			if (!*p->extents.extents_val[i].vdisk)
				continue;
			++*left;
			if (tasks)
				status = add_task(rh,
						  &p->extents.extents_val[i]);
		}
		more = p->more && p->extents.extents_len;
		if (more) {
			a.has_cursor = true;
			a.after_server =
				p->extents
					.extents_val[p->extents.extents_len - 1]
					.server_id;
			a.after_index =
				p->extents
					.extents_val[p->extents.extents_len - 1]
					.index;
		}
		master_reply_free(&rep);
	}
	return status;
}

static int task_cmp(const void *a, const void *b)
{
	const struct rh_task *x = a, *y = b;
	int d = strcmp(x->vdisk, y->vdisk);

	if (d)
		return d;
	if (x->column != y->column)
		return x->column < y->column ? -1 : 1;
	if (x->extent != y->extent)
		return x->extent < y->extent ? -1 : 1;
	return x->replica < y->replica ? -1 : x->replica > y->replica;
}

/* --- the outcome ----------------------------------------------------------- */

struct tally {
	size_t moved, committed, already, aborted, failed;
	uint64_t bytes, copy_ns;
};

static void count(const struct rehome *rh, struct tally *n)
{
	memset(n, 0, sizeof(*n));
	n->copy_ns = rh->copy_ns;
	for (size_t i = 0; i < rh->nr_tasks; i++) {
		const struct rh_task *t = &rh->tasks[i];
		const char *o = t->outcome ? t->outcome : "failed";

		n->moved += !strcmp(o, "moved");
		n->committed += !strcmp(o, "committed");
		n->already += !strcmp(o, "already");
		n->aborted += !strcmp(o, "aborted");
		n->failed += !strcmp(o, "failed");
		n->bytes += t->bytes;
	}
}

static void json_task(struct td_json *j, const struct rh_task *t)
{
	td_json_begin_object(j, NULL);
	td_json_str(j, "vdisk", t->vdisk);
	td_json_u64(j, "column", t->column);
	td_json_u64(j, "extent", t->extent);
	td_json_u64(j, "replica", t->replica);
	td_json_bool(j, "incoming", t->incoming);
	td_json_str(j, "outcome", t->outcome ? t->outcome : "failed");
	if (t->have_move) {
		td_json_u64(j, "new_server", t->new_id);
		td_json_str(j, "new_target", t->new_target);
		td_json_u64(j, "new_lun", t->new_lun);
		td_json_u64(j, "new_offset_bytes", t->new_offset);
		td_json_str(j, "domain", ctl_domain_name(t->reached));
		td_json_str(j, "domain_wanted", ctl_domain_name(t->wanted));
	}
	td_json_str(j, "file", t->file ? t->file : "");
	td_json_str(j, "mode", t->mode ? t->mode : "");
	td_json_u64(j, "bytes_copied", t->bytes);
	td_json_u64(j, "copy_ms", t->copy_ns / NS_PER_MS);
	td_json_str(j, "error", t->error);
	td_json_end_object(j);
}

static int report_json(const struct rehome *rh, const struct tally *n,
		       size_t left)
{
	uint64_t rate = n->copy_ns ? (uint64_t)((double)n->bytes * NS_PER_S /
						(double)n->copy_ns)
				   : 0;
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	ctl_json_server(&j, "server", rh->server);
	td_json_str(&j, "reason", rh->fail ? "fail" : "evacuate");
	td_json_str(&j, "state", rh->fail ? "failed" : "draining");
	td_json_u64(&j, "replicas_before", rh->nr_tasks);
	td_json_u64(&j, "moved", n->moved);
	td_json_u64(&j, "committed", n->committed);
	td_json_u64(&j, "already", n->already);
	td_json_u64(&j, "aborted", n->aborted);
	td_json_u64(&j, "failed", n->failed);
	td_json_u64(&j, "left", left);
	td_json_u64(&j, "bytes_copied", n->bytes);
	td_json_u64(&j, "copy_ms", n->copy_ns / NS_PER_MS);
	td_json_u64(&j, "copy_rate_bytes_per_s", rate);
	td_json_u64(&j, "elapsed_ms", (td_now_ns() - rh->start_ns) / NS_PER_MS);
	td_json_begin_array(&j, "moves");
	for (size_t i = 0; i < rh->nr_tasks; i++)
		json_task(&j, &rh->tasks[i]);
	td_json_end_array(&j);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

static int report(const struct rehome *rh, size_t left)
{
	double s = (double)(td_now_ns() - rh->start_ns) / NS_PER_S;
	struct tally n;
	char bytes[32], rate[32];

	count(rh, &n);
	if (rh->o->json && report_json(rh, &n, left))
		return EXIT_FAILURE;
	ctl_format_bytes(n.bytes, bytes, sizeof(bytes));
	ctl_format_bytes(n.copy_ns ? (uint64_t)((double)n.bytes * NS_PER_S /
						(double)n.copy_ns)
				   : 0,
			 rate, sizeof(rate));
	if (!rh->o->json)
		printf("server %u (%s lun %u): %s: %zu replicas re-homed "
		       "(%zu copied, %zu committed after an earlier copy, %zu "
		       "moved already), %zu moves into it aborted, %zu "
		       "failed; %s copied at %s/s, %.1f s in all; %zu "
		       "extents left on it\n",
		       rh->server->id, rh->server->target, rh->server->lun,
		       rh->fail ? "failed" : "evacuated",
		       n.moved + n.committed + n.already, n.moved, n.committed,
		       n.already, n.aborted, n.failed, bytes, rate, s, left);
	if (!left && !n.failed)
		return 0;
	return ctl_fail("%s: server %u still holds %zu extents (%zu replicas "
			"failed to move, see above): nothing was lost; run the "
			"command again when the cause is fixed",
			rh->verb, rh->server->id, left, n.failed);
}

/* --- the command ------------------------------------------------------------ */

static int rehome_all(struct rehome *rh)
{
	size_t left, first = 0;
	int status;

	if ((status = find_server(rh)) || (status = mark_server(rh)) ||
	    (status = list_slots(rh, true, &left)))
		return status;
	if (!rh->nr_tasks) {
		fprintf(stderr,
			"stripe-ctl: %s: server %u holds no replica: nothing "
			"to move\n",
			rh->verb, rh->server->id);
		return report(rh, 0);
	}
	qsort(rh->tasks, rh->nr_tasks, sizeof(*rh->tasks), task_cmp);
	fprintf(stderr,
		"stripe-ctl: %s: server %u holds %zu extents of disks\n",
		rh->verb, rh->server->id, rh->nr_tasks);
	for (size_t i = 1; i <= rh->nr_tasks && !ctl_interrupted; i++) {
		if (i < rh->nr_tasks &&
		    !strcmp(rh->tasks[i].vdisk, rh->tasks[first].vdisk))
			continue;
		ctl_rehome_disk(rh, first, i - first);
		first = i;
	}
	ctl_rehome_end_line(rh);
	if ((status = list_slots(rh, false, &left)))
		return status;
	return report(rh, left);
}

static int rehome(struct ctl_opts *o, bool fail)
{
	struct rehome rh = {.o = o,
			    .fail = fail,
			    .verb = fail ? "server fail" : "server evacuate",
			    .tty = isatty(STDERR_FILENO)};
	const char *dir = o->map_dir ? o->map_dir : CTL_MAP_DIR;
	int status;

	if (strlen(dir) >= sizeof(rh.map_dir))
		return ctl_usage_fail(rh.verb, "--map-dir is too long");
	snprintf(rh.map_dir, sizeof(rh.map_dir), "%s", dir);
	master_reply_init(&rh.srv_rep);
	if (!(rh.c = ctl_client(o)))
		return EXIT_FAILURE;
	ctl_serve_catch_signals();
	rh.start_ns = td_now_ns();
	status = rehome_all(&rh);
	if (ctl_interrupted && !status)
		status = ctl_fail("%s: interrupted; run it again to finish",
				  rh.verb);
	free(rh.tasks);
	for (size_t i = 0; i < rh.nr_files; i++)
		free(rh.files[i]);
	free(rh.files);
	master_reply_free(&rh.srv_rep);
	master_client_close(rh.c);
	return status;
}

int ctl_cmd_server_evacuate(struct ctl_opts *o)
{
	return rehome(o, false);
}

int ctl_cmd_server_fail_rehome(struct ctl_opts *o)
{
	return rehome(o, true);
}
