/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-move.c - stripe-ctl server fail and extent move
 * begin|commit|abort|list (issue #19: re-homing one replica slot; see
 * ms_move_args in master/stripe.x).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stripe-ctl/stripe-ctl.h"

int ctl_cmd_server_fail(struct ctl_opts *o)
{
	ms_server_key k = {.target = (char *)o->target, .lun = (u_int)o->lun};
	struct master_client *c;
	const ms_server *s;
	struct td_strbuf sb;
	struct td_json j;
	ms_reply rep;
	int status = 0;

	if (o->rehome && o->mark_only)
		return ctl_usage_fail("server fail",
				      "--rehome and --mark-only exclude each "
				      "other");
	if (!o->mark_only)
		return ctl_cmd_server_fail_rehome(o);
	if (o->nr_extra || o->map_dir || o->rate_bytes_per_s)
		return ctl_usage_fail("server fail",
				      "mapping files, --map-dir and --rate "
				      "re-home: not with --mark-only");
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	s = &rep.body.ms_body_u.server;
	if (master_call_server_fail(c, &k, &rep))
		status = ctl_call_failed(c, "server fail");
	else if (o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_bool(&j, "changed", rep.changed);
		td_json_str(&j, "state", "failed");
		ctl_json_server(&j, "server", s);
		td_json_end_object(&j);
		status = ctl_print_json(&j, &sb);
	} else
		printf("server %u (%s lun %u at %s): %s\n", s->id, s->target,
		       s->lun, s->portal,
		       rep.changed ? "failed: no new extents go to it, its "
				     "replicas count as lost; re-home them "
				     "(stripe-ctl server fail --rehome)"
				   : "already failed; nothing changed");
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* --- extent move ------------------------------------------------------------- */

const char *ctl_move_reason_name(u_int reason)
{
	return reason == MS_MOVE_FAIL ? "fail" : "evacuate";
}

/* COLUMN EXTENT REPLICA from the words after NAME; 0 or an exit status. */
static int slot_words(const struct ctl_opts *o, const char *command,
		      ms_move_args *a)
{
	u_int *out[3] = {&a->column, &a->extent, &a->replica};
	static const char *const names[] = {"COLUMN", "EXTENT", "REPLICA"};

	for (int i = 0; i < 3; i++) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(o->extra[i], &end, 10);
		if (errno || end == o->extra[i] || *end || v > UINT_MAX ||
		    o->extra[i][0] == '-')
			return ctl_usage_fail(command,
					      "%s wants a number from 0, not "
					      "'%s'",
					      names[i], o->extra[i]);
		*out[i] = (u_int)v;
	}
	return 0;
}

static void json_move(struct td_json *j, const char *key, const ms_move *m)
{
	td_json_begin_object(j, key);
	td_json_str(j, "vdisk", m->vdisk);
	td_json_u64(j, "column", m->column);
	td_json_u64(j, "extent", m->extent);
	td_json_u64(j, "replica", m->replica);
	td_json_str(j, "reason", ctl_move_reason_name(m->reason));
	td_json_u64(j, "old_server", m->old_server_id);
	td_json_u64(j, "old_offset_bytes", m->old_offset_bytes);
	td_json_u64(j, "new_server", m->new_server_id);
	td_json_u64(j, "new_offset_bytes", m->new_offset_bytes);
	td_json_u64(j, "since", m->since);
	td_json_str(j, "domain", ctl_domain_name(m->reached));
	td_json_str(j, "domain_wanted", ctl_domain_name(m->wanted));
	td_json_end_object(j);
}

static int print_move_result(const struct ctl_opts *o, const ms_reply *rep,
			     const char *what)
{
	const ms_move_result *r = &rep->body.ms_body_u.move;
	const ms_move *m = &r->move;
	struct td_strbuf sb;
	struct td_json j;

	if (!o->json) {
		printf("vdisk %s column %u extent %u replica %u: %s; old "
		       "server "
		       "%u (%s lun %u) offset %" PRIu64 ", new server %u (%s "
		       "lun %u at %s) offset %" PRIu64 "\n",
		       m->vdisk, m->column, m->extent, m->replica, what,
		       r->old_server.id, r->old_server.target,
		       r->old_server.lun, (uint64_t)m->old_offset_bytes,
		       r->new_server.id, r->new_server.target,
		       r->new_server.lun, r->new_server.portal,
		       (uint64_t)m->new_offset_bytes);
		return 0;
	}
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_bool(&j, "changed", rep->changed);
	td_json_bool(&j, "done", r->done);
	json_move(&j, "move", m);
	ctl_json_server(&j, "old", &r->old_server);
	ctl_json_server(&j, "new", &r->new_server);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

/* What a move call's answer means, in words. */
static const char *move_words(int proc, const ms_reply *rep)
{
	bool done = rep->body.ms_body_u.move.done;

	switch (proc) {
	case MS_MOVE_BEGIN:
		if (done)
			return "moved off that server already (done); no move "
			       "in progress";
		return rep->changed ? "move begun: copy the replica to the new "
				      "extent, then commit"
				    : "move in progress already (the same)";
	case MS_MOVE_COMMIT:
		return rep->changed ? "committed: the new extent is the "
				      "replica, the old one is freed"
				    : "committed already; nothing changed";
	default:
		return rep->changed ? "aborted: the new extent is freed"
				    : "no move in progress (aborted already); "
				      "nothing changed";
	}
}

static int move_call(struct ctl_opts *o, int proc, const char *command)
{
	ms_move_args a = {.vdisk = (char *)o->arg,
			  .target = (char *)o->target,
			  .lun = (u_int)o->lun,
			  .offset_bytes = o->offset_bytes,
			  .reason = o->reason_fail ? MS_MOVE_FAIL
						   : MS_MOVE_EVACUATE};
	struct master_client *c;
	ms_reply rep;
	int status, ret;

	if ((status = slot_words(o, command, &a)))
		return status;
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	if (proc == MS_MOVE_BEGIN)
		ret = master_call_move_begin(c, &a, &rep);
	else if (proc == MS_MOVE_COMMIT)
		ret = master_call_move_commit(c, &a, &rep);
	else
		ret = master_call_move_abort(c, &a, &rep);
	if (ret)
		status = ctl_call_failed(c, command);
	else
		status = print_move_result(o, &rep, move_words(proc, &rep));
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_move_begin(struct ctl_opts *o)
{
	return move_call(o, MS_MOVE_BEGIN, "extent move begin");
}

int ctl_cmd_move_commit(struct ctl_opts *o)
{
	return move_call(o, MS_MOVE_COMMIT, "extent move commit");
}

int ctl_cmd_move_abort(struct ctl_opts *o)
{
	return move_call(o, MS_MOVE_ABORT, "extent move abort");
}

static void print_move_line(const ms_move *m)
{
	printf("%-20s %6u %6u %7u %-8s %6u %16" PRIu64 " %6u %16" PRIu64 "\n",
	       m->vdisk, m->column, m->extent, m->replica,
	       ctl_move_reason_name(m->reason), m->old_server_id,
	       (uint64_t)m->old_offset_bytes, m->new_server_id,
	       (uint64_t)m->new_offset_bytes);
}

/* Every page of moves; 0 or an exit status. */
static int move_pages(const struct ctl_opts *o, struct master_client *c,
		      struct td_json *j)
{
	ms_move_list_args a = {.vdisk = (char *)(o->name ? o->name : ""),
			       .has_server = o->target != NULL,
			       .target = (char *)(o->target ? o->target : ""),
			       .lun = o->lun < 0 ? 0 : (u_int)o->lun,
			       .after_vdisk = "",
			       .limit = MS_MAX_PAGE};
	char after[MS_VDISK_ID_MAX + 1];
	bool more = true;

	while (more) {
		ms_reply rep;
		ms_move_page *p = &rep.body.ms_body_u.moves;
		ms_move *last;

		if (master_call_move_list(c, &a, &rep)) {
			master_reply_free(&rep);
			return ctl_call_failed(c, "extent move list");
		}
		for (u_int i = 0; i < p->moves.moves_len; i++) {
			if (o->json)
				json_move(j, NULL, &p->moves.moves_val[i]);
			else
				print_move_line(&p->moves.moves_val[i]);
		}
		more = p->more && p->moves.moves_len;
		if (more) {
			last = &p->moves.moves_val[p->moves.moves_len - 1];
			snprintf(after, sizeof(after), "%s", last->vdisk);
			a.has_cursor = true;
			a.after_vdisk = after;
			a.after_column = last->column;
			a.after_extent = last->extent;
			a.after_replica = last->replica;
		}
		master_reply_free(&rep);
	}
	return 0;
}

int ctl_cmd_move_list(struct ctl_opts *o)
{
	struct master_client *c;
	struct td_strbuf sb;
	struct td_json j;
	int status;

	if ((o->target != NULL) != (o->lun >= 0))
		return ctl_usage_fail("extent move list",
				      "give --target and --lun together");
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_array(&j, NULL);
	if (!o->json)
		printf("%-20s %6s %6s %7s %-8s %6s %16s %6s %16s\n", "VDISK",
		       "COLUMN", "EXTENT", "REPLICA", "REASON", "OLD",
		       "OLD_OFFSET", "NEW", "NEW_OFFSET");
	status = move_pages(o, c, &j);
	td_json_end_array(&j);
	if (!status && o->json)
		status = ctl_print_json(&j, &sb);
	else
		td_strbuf_free(&sb);
	master_client_close(c);
	return status;
}

/* --- a disk's copies, as the master knows them (vdisk show --name) --------- */

static bool server_failed(const ms_vdisk *v, u_int id)
{
	for (u_int i = 0; i < v->failed_servers.failed_servers_len; i++)
		if (v->failed_servers.failed_servers_val[i] == id)
			return true;
	return false;
}

bool ctl_replica_live(const ms_vdisk *v, u_int slot)
{
	const ms_extent *e = &v->extents.extents_val[slot];

	return !e->stale && !server_failed(v, e->server_id);
}

bool ctl_replica_lost(const ms_vdisk *v, u_int slot)
{
	return server_failed(v, v->extents.extents_val[slot].server_id);
}

u_int ctl_extent_live(const ms_vdisk *v, u_int x)
{
	u_int live = 0;

	for (u_int r = 0; r < v->replicas; r++)
		if (x * v->replicas + r < v->extents.extents_len)
			live += ctl_replica_live(v, x * v->replicas + r);
	return live;
}

u_int ctl_vdisk_under(const ms_vdisk *v)
{
	u_int under = 0;

	for (u_int x = 0; x < v->columns * v->extents_per_column; x++)
		under += ctl_extent_live(v, x) < v->replicas;
	return under;
}

const ms_move *ctl_slot_move(const ms_vdisk *v, u_int slot)
{
	for (u_int i = 0; i < v->moves.moves_len; i++) {
		const ms_move *m = &v->moves.moves_val[i];

		if ((m->column * v->extents_per_column + m->extent) *
				    v->replicas +
			    m->replica ==
		    slot)
			return m;
	}
	return NULL;
}

void ctl_json_copies(struct td_json *j, const ms_vdisk *v)
{
	td_json_u64(j, "under_replicated", ctl_vdisk_under(v));
	td_json_begin_array(j, "failed_servers");
	for (u_int i = 0; i < v->failed_servers.failed_servers_len; i++)
		td_json_u64(j, NULL, v->failed_servers.failed_servers_val[i]);
	td_json_end_array(j);
	td_json_begin_array(j, "moves");
	for (u_int i = 0; i < v->moves.moves_len; i++)
		json_move(j, NULL, &v->moves.moves_val[i]);
	td_json_end_array(j);
}

void ctl_json_slot_copies(struct td_json *j, const ms_vdisk *v, u_int slot)
{
	td_json_bool(j, "live", ctl_replica_live(v, slot));
	td_json_bool(j, "under_replicated",
		     ctl_extent_live(v, slot / v->replicas) < v->replicas);
	td_json_bool(j, "moving", ctl_slot_move(v, slot) != NULL);
}

void ctl_print_copies(const ms_vdisk *v)
{
	printf("under-replicated:    %u extents\nmoves in progress:   %u\n",
	       ctl_vdisk_under(v), v->moves.moves_len);
}

void ctl_print_slot_copies(const ms_vdisk *v, u_int slot)
{
	const ms_move *m = ctl_slot_move(v, slot);
	u_int live = ctl_extent_live(v, slot / v->replicas);

	if (ctl_replica_lost(v, slot))
		printf("  [lost: server failed]");
	if (live < v->replicas)
		printf("  [under-replicated: %u of %u live]", live,
		       v->replicas);
	if (m)
		printf("  [moving to server %u offset %" PRIu64 ", %s]",
		       m->new_server_id, (uint64_t)m->new_offset_bytes,
		       ctl_move_reason_name(m->reason));
	putchar('\n');
}

void ctl_print_vdisk_server(const ms_vdisk *v, u_int i)
{
	const ms_server *s = &v->servers.servers_val[i];

	ctl_print_server_state(s, server_failed(v, s->id)
					  ? "failed"
					  : ctl_server_state(s, NULL));
}
