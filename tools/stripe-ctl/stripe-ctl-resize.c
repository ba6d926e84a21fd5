/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-resize.c - stripe-ctl vdisk resize: grow a striped disk
 * (issue #21).  The mapping file is taken under its lock for the whole
 * command (stripe_map_open), the master asked for the added extents
 * (MS_VDISK_GROW, idempotent), and the file rewritten under the same lock
 * (stripe_map_rewrite: temp file, fsync, rename, fsync of the directory):
 * a stripe-ctl killed between the master's answer and the rewrite leaves
 * the old file, and the same command run again finishes the job.  The
 * old slots keep everything the file says of them (servers, stale marks,
 * dirty regions, moves); the new ones are the master's.  While a tapdisk
 * serves the disk (it holds the lock), the grown map goes to PATH.grow
 * instead, and the tapdisk is asked to take it now (its control
 * "resize", the stripe driver's refresh_size); one that cannot (busy)
 * takes it later, at its next open, or the next resize that gets the
 * lock does (stripe_map_grow_adopt).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tapdisk/control/control.h"
#include "tapdisk/control/ctl-client.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define SECTOR_BYTES 512u

struct resize {
	const struct ctl_opts *o;
	char path[PATH_MAX];
	char side[PATH_MAX]; /* PATH.grow */
	int served_by;	     /* > 0: the tapdisk pid holding the map */
	bool served;	     /* the map is held: the grown one goes to side */
	struct stripe_map old, grown;
	int lock_fd;
	uint32_t per_column; /* J for --size */
	/* The tapdisk's answer to "resize" once side is written. */
	bool taken;	       /* it took side: it serves served_bytes */
	uint64_t served_bytes; /* the size it serves (taken) */
	char refused[TD_CTL_LINE_MAX + 48]; /* why it did not, when asked */
};

static void print_map_error(const char *path, const struct stripe_map_error *e)
{
	char text[STRIPE_MAP_ERROR_TEXT_MAX];

	stripe_map_error_text(e, path, text, sizeof(text));
	ctl_fail("%s", text);
}

/* The tapdisk holding the file (0: another process or not found). */
static int serving_pid(const struct resize *rz)
{
	const char *run_dir = td_ctl_run_dir(rz->o->run_dir);
	int pid = 0;

	if (td_ctl_find_serving(run_dir, "stripe", rz->path,
				(int)rz->o->timeout_s * 1000, &pid, NULL))
		pid = td_ctl_flock_holder(rz->path);
	return pid;
}

/*
 * The map is not held: first take a MAP.grow a served resize left (the
 * tapdisk stopped before it opened the disk again).  An exit status.
 */
static int adopt_pending(struct resize *rz)
{
	enum stripe_map_grow_outcome done;
	struct stripe_map_error err;

	if (stripe_map_grow_adopt(rz->path, &rz->old, &rz->lock_fd, &done,
				  &err)) {
		print_map_error(rz->path, &err);
		return EXIT_FAILURE;
	}
	if (done == STRIPE_MAP_GROW_ADOPTED)
		fprintf(stderr,
			"stripe-ctl: %s: the grown map "
			"%s" STRIPE_MAP_GROW_SUFFIX
			" of an earlier resize taken\n",
			rz->path, rz->path);
	else if (done == STRIPE_MAP_GROW_REFUSED)
		fprintf(stderr,
			"stripe-ctl: %s" STRIPE_MAP_GROW_SUFFIX
			" did not apply (%s): removed\n",
			rz->path, err.reason);
	else if (done == STRIPE_MAP_GROW_KEPT)
		fprintf(stderr, "stripe-ctl: %s (left as it is)\n", err.reason);
	return 0;
}

/* --size against the map: 0 (*same: nothing to do) or an exit status. */
static int check_size(struct resize *rz, bool *same)
{
	const struct stripe_map *m = &rz->old;
	char want[32], have[32];
	int err;

	ctl_format_bytes(rz->o->size_bytes, want, sizeof(want));
	ctl_format_bytes(m->size_bytes, have, sizeof(have));
	if (rz->o->size_bytes % SECTOR_BYTES)
		return ctl_fail("--size must be a multiple of %u bytes",
				SECTOR_BYTES);
	if (rz->o->size_bytes < m->size_bytes)
		return ctl_fail("vdisk %s is %s; --size %s would shrink it, "
				"which would drop the data at its end: disks "
				"only grow (nothing was changed)",
				m->vdisk, have, want);
	if ((*same = rz->o->size_bytes == m->size_bytes))
		return 0;
	err = stripe_layout_extents_per_column(
		rz->o->size_bytes, m->stripe_unit_bytes, m->columns,
		m->extent_size_bytes, &rz->per_column);
	if (err ||
	    (uint64_t)m->columns * rz->per_column * m->replicas > MS_MAX_SLOTS)
		return ctl_fail("--size %s needs more than %d extent replicas: "
				"choose a smaller size",
				want, MS_MAX_SLOTS);
	return 0;
}

/*
 * The index in m->servers of v's server id, appended (room for cap) when
 * the map does not name it yet; -1 when v does not describe it or there
 * is no room.
 */
static int server_index(struct stripe_map *m, uint32_t cap, const ms_vdisk *v,
			u_int id)
{
	const ms_server *src = NULL;
	struct stripe_map_server *dst;

	for (u_int s = 0; s < v->servers.servers_len; s++)
		if (v->servers.servers_val[s].id == id)
			src = &v->servers.servers_val[s];
	if (!src)
		return -1;
	for (uint32_t i = 0; i < m->nr_servers; i++)
		if (!strcmp(m->servers[i].target, src->target) &&
		    m->servers[i].lun == src->lun)
			return (int)i;
	if (m->nr_servers == cap)
		return -1;
	dst = &m->servers[m->nr_servers];
	memset(dst, 0, sizeof(*dst));
	snprintf(dst->address, sizeof(dst->address), "%s", src->address);
	snprintf(dst->portal, sizeof(dst->portal), "%s", src->portal);
	snprintf(dst->target, sizeof(dst->target), "%s", src->target);
	dst->lun = src->lun;
	dst->block_size = src->block_size;
	return (int)m->nr_servers++;
}

/* Slot i of the old map into slot k of the grown one, state and all. */
static void copy_slot(struct stripe_map *g, size_t k,
		      const struct stripe_map *m, size_t i)
{
	size_t words = stripe_map_region_words(m);

	g->slots[k] = m->slots[i];
	g->moves[k] = m->moves[i];
	memcpy(stripe_map_slot_dirty(g, k), stripe_map_slot_dirty(m, i),
	       words * sizeof(uint64_t));
	memcpy(stripe_map_move_dirty(g, k), stripe_map_move_dirty(m, i),
	       words * sizeof(uint64_t));
}

/* Slot k (an added extent) from the master's extent e; 0 or -EPROTO. */
static int new_slot(struct stripe_map *g, uint32_t cap, size_t k,
		    const ms_vdisk *v, const ms_extent *e)
{
	int s = server_index(g, cap, v, e->server_id);

	if (s < 0 || !g->servers[s].block_size ||
	    e->offset_bytes % g->servers[s].block_size)
		return -EPROTO;
	g->slots[k].server = (uint32_t)s;
	g->slots[k].lba = e->offset_bytes / g->servers[s].block_size;
	if (e->stale)
		stripe_map_slot_mark_all(g, k);
	return 0;
}

/* rz->grown: the old map with v's added extents.  0 or -errno. */
static int build(struct resize *rz, const ms_vdisk *v)
{
	const struct stripe_map *m = &rz->old;
	struct stripe_map *g = &rz->grown;
	uint32_t cap = m->nr_servers + v->servers.servers_len;
	int ret = 0;

	if (cap > STRIPE_MAP_MAX_SERVERS)
		cap = STRIPE_MAP_MAX_SERVERS;
	*g = (struct stripe_map){0};
	memcpy(g->vdisk, m->vdisk, sizeof(g->vdisk));
	memcpy(g->master, m->master, sizeof(g->master));
	g->size_bytes = rz->o->size_bytes;
	g->stripe_unit_bytes = m->stripe_unit_bytes;
	g->extent_size_bytes = m->extent_size_bytes;
	g->columns = m->columns;
	g->extents_per_column = v->extents_per_column;
	g->replicas = m->replicas;
	g->region_bytes = m->region_bytes;
	if ((ret = stripe_map_alloc(g, cap)))
		return ret;
	memcpy(g->servers, m->servers, m->nr_servers * sizeof(*m->servers));
	g->nr_servers = m->nr_servers;
	for (uint32_t c = 0; !ret && c < g->columns; c++)
		for (uint32_t j = 0; !ret && j < g->extents_per_column; j++)
			for (uint32_t r = 0; !ret && r < g->replicas; r++) {
				size_t k = stripe_map_slot_index(g, c, j, r);

				if (j < m->extents_per_column)
					copy_slot(g, k, m,
						  stripe_map_slot_index(m, c, j,
									r));
				else
					ret = new_slot(
						g, cap, k, v,
						&v->extents.extents_val[k]);
			}
	return ret;
}

/* The master's answer fits the map and --size; 0 or an exit status. */
static int check_answer(const struct resize *rz, const ms_vdisk *v)
{
	const struct stripe_map *m = &rz->old;

	if (v->columns != m->columns || v->replicas != m->replicas ||
	    v->extent_size_bytes != m->extent_size_bytes ||
	    v->extents.extents_len !=
		    (u_int)m->columns * v->extents_per_column * m->replicas)
		return ctl_fail("the master's vdisk %s (%u columns x %u "
				"replicas) is not the disk of %s: is --master "
				"the master the file names (%s)?",
				v->id, v->columns, v->replicas, rz->path,
				m->master);
	if (v->extents_per_column != rz->per_column)
		return ctl_fail(
			"the master holds %u extents per column for "
			"vdisk %s (it was grown further before), --size "
			"needs %u: give a size that needs %u, up to "
			"%" PRIu64 " bytes; nothing was changed",
			v->extents_per_column, v->id, rz->per_column,
			v->extents_per_column,
			(uint64_t)v->extents_per_column * m->extent_size_bytes *
				m->columns);
	return 0;
}

/* CHAP accounts of the servers the grown map added; an exit status. */
static int new_chap(struct resize *rz, struct master_client *c)
{
	for (uint32_t i = rz->old.nr_servers; i < rz->grown.nr_servers; i++) {
		struct stripe_map_server *s = &rz->grown.servers[i];

		if (ctl_chap_get(c, s))
			return ctl_fail("vdisk resize: the CHAP account of %s "
					"lun %u: %s (the extents stay granted "
					"at the master: run the same command "
					"again)",
					s->target, s->lun,
					master_client_error(c));
	}
	return 0;
}

/* What the tapdisk serving the disk did with the grown map. */
static void report_served(const struct resize *rz)
{
	char to[32];

	if (rz->taken) {
		ctl_format_bytes(rz->served_bytes, to, sizeof(to));
		printf("tapdisk %d serves it at %s now (NBD clients see it "
		       "when they connect again, Xen guests are told at "
		       "once)\n",
		       rz->served_by, to);
		return;
	}
	printf("the disk is served (by %s %d), which holds the mapping "
	       "file: the grown map is in %s",
	       rz->served_by ? "tapdisk" : "process", rz->served_by, rz->side);
	if (rz->refused[0])
		printf("; the tapdisk did not take it now: %s", rz->refused);
	printf("; the stripe driver takes it at 'tap-ctl resize -i %d' (or "
	       "this command again) once it can, or when it next opens the "
	       "disk\n",
	       rz->served_by);
}

/*
 * Ask the tapdisk serving the disk to take PATH.grow now (its control
 * "resize", as tap-ctl resize does): rz->taken and served_bytes, or
 * rz->refused says why not (busy: a resync, scrub, move or hand-over).
 */
static void ask_tapdisk(struct resize *rz)
{
	const char *run_dir = td_ctl_run_dir(rz->o->run_dir);
	struct td_ctl_reply r;
	char sock[PATH_MAX];
	const char *nb;
	int ret;

	if (rz->served_by <= 0 ||
	    td_ctl_socket_path(sock, sizeof(sock), run_dir, rz->served_by))
		return;
	td_ctl_reply_init(&r);
	ret = td_ctl_call(sock, "resize json", (int)rz->o->timeout_s * 1000,
			  &r);
	if (ret)
		snprintf(rz->refused, sizeof(rz->refused),
			 "cannot reach its control socket: %s", strerror(-ret));
	else if (r.err)
		snprintf(rz->refused, sizeof(rz->refused), "%s (%s)", r.message,
			 r.errname);
	else if ((nb = strstr(td_strbuf_str(&r.payload), "\"new_bytes\":")))
		rz->served_bytes =
			strtoull(nb + strlen("\"new_bytes\":"), NULL, 10);
	if (!ret)
		ret = r.err;
	td_ctl_reply_free(&r);
	rz->taken = rz->served_bytes >= rz->grown.size_bytes;
	if (!ret && !rz->taken)
		snprintf(rz->refused, sizeof(rz->refused),
			 "it serves %" PRIu64 " bytes still", rz->served_bytes);
}

static int report(const struct resize *rz, bool changed)
{
	const struct stripe_map *m = &rz->old;
	uint64_t size = changed ? rz->grown.size_bytes : m->size_bytes;
	uint32_t per_column =
		changed ? rz->grown.extents_per_column : m->extents_per_column;
	char from[32], to[32];
	struct td_strbuf sb;
	struct td_json j;

	if (rz->o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "vdisk", m->vdisk);
		td_json_str(&j, "file", rz->path);
		td_json_bool(&j, "changed", changed);
		td_json_u64(&j, "old_size_bytes", m->size_bytes);
		td_json_u64(&j, "size_bytes", size);
		td_json_u64(&j, "old_extents_per_column",
			    m->extents_per_column);
		td_json_u64(&j, "extents_per_column", per_column);
		if (changed && rz->served) {
			td_json_u64(&j, "served_by_pid",
				    (uint64_t)rz->served_by);
			td_json_bool(&j, "taken", rz->taken);
			if (rz->taken)
				td_json_u64(&j, "served_size_bytes",
					    rz->served_bytes);
			else
				td_json_str(&j, "pending_file", rz->side);
			if (rz->refused[0])
				td_json_str(&j, "tapdisk_error", rz->refused);
		}
		td_json_end_object(&j);
		return ctl_print_json(&j, &sb);
	}
	ctl_format_bytes(m->size_bytes, from, sizeof(from));
	ctl_format_bytes(size, to, sizeof(to));
	if (!changed)
		printf("vdisk %s is %s already: nothing to do\n", m->vdisk, to);
	else
		printf("vdisk %s: %s -> %s, %u -> %u extents per column (%u "
		       "extent replicas added)\nmapping file: %s\n",
		       m->vdisk, from, to, m->extents_per_column, per_column,
		       (per_column - m->extents_per_column) * m->columns *
			       m->replicas,
		       rz->path);
	if (changed && rz->served)
		report_served(rz);
	return 0;
}

/*
 * The grown map into the file (under its lock), or, while a tapdisk
 * holds it, into PATH.grow (atomic, synced), which the stripe driver
 * takes when it next opens the disk.  An exit status.
 */
static int write_grown(struct resize *rz)
{
	struct stripe_map_error err;
	const char *to = rz->served ? rz->side : rz->path;
	int ret;

	if (rz->served)
		ret = stripe_map_write(rz->side, &rz->grown, &err);
	else
		ret = stripe_map_rewrite(rz->path, &rz->grown, &rz->lock_fd,
					 &err);
	if (!ret)
		return 0;
	print_map_error(to, &err);
	return ctl_fail("the extents stay granted at the master: run the "
			"same command again");
}

/* Ask the master, build the map, write it; an exit status. */
static int grow(struct resize *rz)
{
	struct ctl_opts o = *rz->o;
	ms_grow_args a = {rz->old.vdisk, rz->per_column};
	struct master_client *c;
	ms_reply rep;
	int status;

	if (!o.master_given && rz->old.master[0])
		o.master = rz->old.master;
	if (!(c = ctl_client(&o)))
		return EXIT_FAILURE;
	if (master_call_vdisk_grow(c, &a, &rep))
		status = ctl_call_failed(c, "vdisk resize");
	else if (!(status = check_answer(rz, &rep.body.ms_body_u.vdisk))) {
		if (build(rz, &rep.body.ms_body_u.vdisk))
			status = ctl_fail("the master's answer does not fit "
					  "the map: is it the same version?");
		else if (!(status = new_chap(rz, c)) &&
			 !(status = write_grown(rz)) && rz->served)
			ask_tapdisk(rz);
	}
	master_reply_free(&rep);
	master_client_close(c);
	return status ? status : report(rz, true);
}

int ctl_cmd_vdisk_resize(struct ctl_opts *o)
{
	struct resize rz = {.o = o, .lock_fd = -1};
	struct stripe_map_error err;
	bool same = false;
	int status, ret;

	if ((status = ctl_serve_path(o->arg, rz.path)))
		return status;
	stripe_map_grow_path(rz.path, rz.side, sizeof(rz.side));
	ret = stripe_map_open(rz.path, &rz.old, &rz.lock_fd, &err);
	if (ret == -EBUSY) {
		/* Served: its file as it is now, read without the lock. */
		rz.served = true;
		rz.served_by = serving_pid(&rz);
		ret = stripe_map_read(rz.path, &rz.old, &err);
	} else if (!ret && (status = adopt_pending(&rz))) {
		stripe_map_close(rz.lock_fd);
		stripe_map_free(&rz.old);
		return status;
	}
	if (ret) {
		print_map_error(rz.path, &err);
		return EXIT_FAILURE;
	}
	if (!(status = check_size(&rz, &same)))
		status = same ? report(&rz, false) : grow(&rz);
	if (rz.lock_fd >= 0)
		stripe_map_close(rz.lock_fd);
	stripe_map_free(&rz.old);
	stripe_map_free(&rz.grown);
	return status;
}
