/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-vdisk.c - stripe-ctl vdisk create|map|show|destroy|list|mark: the
 * layout (drivers/stripe-layout.h), the master's allocation and replica
 * states, and the mapping file (drivers/stripe/map/map.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "drivers/stripe/map/stripe-layout.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define SECTOR_BYTES 512u
#define MAP_DIR_MODE 0755

/* The master's bounds and the mapping file's are the same numbers. */
_Static_assert(MS_MAX_SLOTS == STRIPE_MAP_MAX_SLOTS, "slot bounds differ");
_Static_assert(MS_MAX_SERVERS == STRIPE_MAP_MAX_SERVERS, "server bounds");
_Static_assert(MS_MAX_COLUMNS == STRIPE_MAX_COLUMNS, "column bounds differ");
_Static_assert(MS_MAX_REPLICAS == STRIPE_MAX_REPLICAS, "replica bounds");
_Static_assert(MS_VDISK_ID_MAX + 1 == STRIPE_MAP_NAME_SIZE, "name sizes");
_Static_assert(MS_ADDRESS_MAX + 1 <= STRIPE_MAP_ADDRESS_SIZE, "addresses");
_Static_assert(MS_PORTAL_MAX + 1 <= STRIPE_MAP_PORTAL_SIZE, "portals");
_Static_assert(MS_TARGET_MAX + 1 <= STRIPE_MAP_TARGET_SIZE, "targets");

static void print_map_error(const char *path, const struct stripe_map_error *e)
{
	char text[STRIPE_MAP_ERROR_TEXT_MAX];

	stripe_map_error_text(e, path, text, sizeof(text));
	ctl_fail("%s", text);
}

/* --- create -------------------------------------------------------------------- */

/* J for this disk with the master's E, or an exit status printed. */
static int layout(const struct ctl_opts *o, uint64_t extent_bytes,
		  uint32_t *per_column)
{
	char unit[32], extent[32];
	int err = stripe_layout_extents_per_column(
		o->size_bytes, o->stripe_unit_bytes, o->stripes, extent_bytes,
		per_column);

	ctl_format_bytes(o->stripe_unit_bytes, unit, sizeof(unit));
	ctl_format_bytes(extent_bytes, extent, sizeof(extent));
	if (err == -EINVAL)
		return ctl_fail("the master's extent size (%s) is not a "
				"multiple of the stripe unit (%s): choose a "
				"--stripe-unit that divides it",
				extent, unit);
	if (err ||
	    (uint64_t)o->stripes * *per_column * o->replicas > MS_MAX_SLOTS)
		return ctl_fail("--size needs more than %d extent replicas of "
				"%s: make the disk smaller, or run the master "
				"with a larger --extent-size",
				MS_MAX_SLOTS, extent);
	return 0;
}

/* --region-size against the extent size; 0 or an exit status printed. */
static int check_region(const struct ctl_opts *o, uint64_t extent_bytes)
{
	char region[32], extent[32];

	if (!o->region_bytes ||
	    stripe_map_region_ok(extent_bytes, o->region_bytes))
		return 0;
	ctl_format_bytes(o->region_bytes, region, sizeof(region));
	ctl_format_bytes(extent_bytes, extent, sizeof(extent));
	return ctl_fail("--region-size %s does not fit the extent size (%s): "
			"it must be a multiple of 4K that divides the extent "
			"size into at most %u regions",
			region, extent, STRIPE_MAP_MAX_REGIONS);
}

/* Copy a master reply's disk into a mapping file's map. */
int ctl_map_from_reply(const ms_vdisk *v, const struct ctl_opts *o,
		       const char *master, struct stripe_map *m)
{
	size_t n = (size_t)v->columns * v->extents_per_column * v->replicas;

	memset(m, 0, sizeof(*m));
	snprintf(m->vdisk, sizeof(m->vdisk), "%s", v->id);
	snprintf(m->master, sizeof(m->master), "%s", master);
	m->size_bytes = o->size_bytes;
	m->stripe_unit_bytes = o->stripe_unit_bytes;
	m->extent_size_bytes = v->extent_size_bytes;
	m->columns = v->columns;
	m->extents_per_column = v->extents_per_column;
	m->replicas = v->replicas;
	m->region_bytes = o->region_bytes; /* 0: the default */
	if (v->extents.extents_len != n ||
	    stripe_map_alloc(m, v->servers.servers_len))
		return -EPROTO;
	for (u_int s = 0; s < v->servers.servers_len; s++) {
		const ms_server *src = &v->servers.servers_val[s];
		struct stripe_map_server *dst = &m->servers[s];

		snprintf(dst->address, sizeof(dst->address), "%s",
			 src->address);
		snprintf(dst->portal, sizeof(dst->portal), "%s", src->portal);
		snprintf(dst->target, sizeof(dst->target), "%s", src->target);
		dst->lun = src->lun;
		dst->block_size = src->block_size;
	}
	for (size_t i = 0; i < n; i++) {
		const ms_extent *e = &v->extents.extents_val[i];
		u_int s = 0;

		while (s < v->servers.servers_len &&
		       v->servers.servers_val[s].id != e->server_id)
			s++;
		if (s == v->servers.servers_len ||
		    e->offset_bytes % m->servers[s].block_size)
			return -EPROTO;
		m->slots[i].server = s;
		m->slots[i].lba = e->offset_bytes / m->servers[s].block_size;
		if (e->stale) /* the master knows whole replicas only */
			stripe_map_slot_mark_all(m, i);
	}
	return 0;
}

/* The default file is CTL_MAP_DIR/NAME.map; the directory is made. */
static const char *output_path(const struct ctl_opts *o, char *buf, size_t size)
{
	if (o->output)
		return o->output;
	mkdir(CTL_MAP_DIR, MAP_DIR_MODE);
	snprintf(buf, size, "%s/%s.map", CTL_MAP_DIR, o->arg);
	return buf;
}

/* --json: ctl_print_result's keys, and how far the replicas are spread. */
static int json_created(const ms_vdisk *v, const char *path, bool changed)
{
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_str(&j, "vdisk", v->id);
	td_json_str(&j, "file", path);
	td_json_bool(&j, "changed", changed);
	ctl_json_spread(&j, v);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

static int report_created(const struct ctl_opts *o, const struct stripe_map *m,
			  const ms_vdisk *v, const char *path, bool changed)
{
	char size[32], extent[32], unit[32];

	if (o->json)
		return json_created(v, path, changed);
	ctl_format_bytes(m->size_bytes, size, sizeof(size));
	ctl_format_bytes(m->extent_size_bytes, extent, sizeof(extent));
	ctl_format_bytes(m->stripe_unit_bytes, unit, sizeof(unit));
	printf("vdisk %s: %s, %u columns x %u extents x %u replicas of %s, "
	       "stripe unit %s%s\nmapping file: %s\n",
	       m->vdisk, size, m->columns, m->extents_per_column, m->replicas,
	       extent, unit,
	       changed ? "" : " (allocated before: the same extents)", path);
	ctl_print_spread(v);
	return 0;
}

/* Allocate at the master; then write the map.  0 or an exit status. */
static int allocate_and_write(const struct ctl_opts *o, struct master_client *c,
			      uint64_t extent_bytes, uint32_t per_column)
{
	ms_alloc_args a = {.id = (char *)o->arg,
			   .columns = o->stripes,
			   .extents_per_column = per_column,
			   .replicas = o->replicas,
			   .extent_size_bytes = extent_bytes};
	char buf[PATH_MAX];
	const char *path = output_path(o, buf, sizeof(buf));
	struct stripe_map_error err;
	struct stripe_map m = {0};
	ms_reply rep;
	int status = 0;

	if (master_call_vdisk_alloc(c, &a, &rep)) {
		master_reply_free(&rep);
		return ctl_call_failed(c, "vdisk create");
	}
	if (ctl_map_from_reply(&rep.body.ms_body_u.vdisk, o,
			       master_client_addresses(c), &m))
		status = ctl_fail("the master's answer does not match the "
				  "request: is it the same version?");
	else if ((status = ctl_map_chap(c, &m, "vdisk create")))
		status = ctl_fail("the extents stay allocated to %s at the "
				  "master: run the same command again to write "
				  "the file",
				  o->arg);
	else if (stripe_map_write(path, &m, &err)) {
		print_map_error(path, &err);
		status = ctl_fail("the extents stay allocated to %s at the "
				  "master: run the same command again to write "
				  "the file, or 'stripe-ctl vdisk destroy "
				  "--name %s' to free them",
				  o->arg, o->arg);
	} else
		status = report_created(o, &m, &rep.body.ms_body_u.vdisk, path,
					rep.changed);
	stripe_map_free(&m);
	master_reply_free(&rep);
	return status;
}

int ctl_cmd_vdisk_create(struct ctl_opts *o)
{
	struct master_client *c;
	uint32_t per_column;
	ms_reply rep;
	int status;

	if (!stripe_map_name_ok(o->arg))
		return ctl_fail("'%s' is not a vdisk name: use 1-63 letters, "
				"digits, '.', '_' or '-'",
				o->arg);
	if (o->size_bytes % SECTOR_BYTES)
		return ctl_fail("--size must be a multiple of %u bytes",
				SECTOR_BYTES);
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	if (master_call_info(c, &rep))
		status = ctl_call_failed(c, "vdisk create");
	else if (!(status = layout(o, rep.body.ms_body_u.info.extent_size_bytes,
				   &per_column)) &&
		 !(status = check_region(
			   o, rep.body.ms_body_u.info.extent_size_bytes)))
		status = allocate_and_write(
			o, c, rep.body.ms_body_u.info.extent_size_bytes,
			per_column);
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* --- map ---------------------------------------------------------------------- */

/*
 * The master keeps no size nor stripe unit: the ones given must give the
 * disk's geometry (its columns and J) with the master's E.
 */
static int check_geometry(struct ctl_opts *o, const ms_vdisk *v)
{
	uint32_t per_column;
	int status;

	o->stripes = v->columns;
	o->replicas = v->replicas;
	if ((status = layout(o, v->extent_size_bytes, &per_column)) ||
	    (status = check_region(o, v->extent_size_bytes)))
		return status;
	if (per_column != v->extents_per_column)
		return ctl_fail("--size and --stripe-unit give %u extents per "
				"column, but vdisk %s has %u at the master (%u "
				"columns): give the values 'vdisk create' was "
				"given",
				per_column, v->id, v->extents_per_column,
				v->columns);
	return 0;
}

static int write_map(struct ctl_opts *o, struct master_client *c,
		     const ms_reply *rep)
{
	char buf[PATH_MAX];
	const char *path = output_path(o, buf, sizeof(buf));
	struct stripe_map_error err;
	struct stripe_map m = {0};
	int status, ret;

	if ((status = check_geometry(o, &rep->body.ms_body_u.vdisk)))
		return status;
	if (ctl_map_from_reply(&rep->body.ms_body_u.vdisk, o,
			       master_client_addresses(c), &m))
		status =
			ctl_fail("the master's answer is not a disk this "
				 "stripe-ctl can map: is it the same version?");
	else if ((status = ctl_map_chap(c, &m, "vdisk map")))
		;
	else if ((ret = stripe_map_write(path, &m, &err)) == -EBUSY)
		status =
			ctl_fail("%s is locked by a tapdisk: the disk is being "
				 "served from it; stop that tapdisk first, or "
				 "write the map elsewhere (-o)",
				 path);
	else if (ret) {
		print_map_error(path, &err);
		status = EXIT_FAILURE;
	} else if (o->json)
		status = ctl_print_result(m.vdisk, path, true);
	else
		printf("vdisk %s: mapping file %s written from the master\n",
		       m.vdisk, path);
	stripe_map_free(&m);
	return status;
}

int ctl_cmd_vdisk_map(struct ctl_opts *o)
{
	struct master_client *c;
	ms_reply rep;
	int status;

	if (!stripe_map_name_ok(o->arg))
		return ctl_fail("'%s' is not a vdisk name", o->arg);
	if (o->size_bytes % SECTOR_BYTES)
		return ctl_fail("--size must be a multiple of %u bytes",
				SECTOR_BYTES);
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	if (master_call_vdisk_lookup(c, o->arg, &rep))
		status = ctl_call_failed(c, "vdisk map");
	else
		status = write_map(o, c, &rep);
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* --- show, destroy, list ----------------------------------------------------- */

/* The master's record of a disk (show --name). */
static int show_at_master(const struct ctl_opts *o)
{
	struct master_client *c;
	ms_reply rep, lease;
	int status;

	if (!stripe_map_name_ok(o->name))
		return ctl_fail("'%s' is not a vdisk name", o->name);
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	if (master_call_vdisk_lookup(c, o->name, &rep))
		status = ctl_call_failed(c, "vdisk show");
	else {
		/* An older master has no leases: show the disk without. */
		int ret = master_call_lease_show(c, o->name, &lease);

		status =
			ctl_show_vdisk(&rep.body.ms_body_u.vdisk,
				       ret ? NULL : &lease.body.ms_body_u.lease,
				       master_client_address(c), o->json);
		master_reply_free(&lease);
	}
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_vdisk_show(struct ctl_opts *o)
{
	struct stripe_map_error err;
	struct stripe_map m;
	int status;

	if (!o->arg)
		return show_at_master(o);
	if (stripe_map_read(o->arg, &m, &err)) {
		print_map_error(o->arg, &err);
		return EXIT_FAILURE;
	}
	status = ctl_show_map(&m, o->arg, o->json);
	stripe_map_free(&m);
	return status;
}

/* Free a disk's extents at the master named by o (or by the file). */
static int release(const struct ctl_opts *o, const char *name,
		   const char *file_master, bool *changed)
{
	struct ctl_opts at = *o;
	struct master_client *c;
	ms_reply rep;
	int status = 0;

	if (file_master && !o->master_given)
		at.master = file_master;
	if (!(c = ctl_client(&at)))
		return EXIT_FAILURE;
	if (master_call_vdisk_release(c, name, &rep))
		status = ctl_call_failed(c, "vdisk destroy");
	*changed = rep.changed;
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

static int report_destroyed(const struct ctl_opts *o, const char *name,
			    const char *file, bool changed)
{
	if (o->json)
		return ctl_print_result(name, file, changed);
	printf("vdisk %s: %s%s%s\n", name,
	       changed ? "extents freed"
		       : "not allocated at the master; nothing freed",
	       file ? ", removed " : "", file ? file : "");
	return 0;
}

int ctl_cmd_vdisk_destroy(struct ctl_opts *o)
{
	struct stripe_map_error err;
	struct stripe_map m;
	bool changed = false;
	int lock_fd, status, ret;

	if (!o->arg) {
		if (!stripe_map_name_ok(o->name))
			return ctl_fail("'%s' is not a vdisk name", o->name);
		status = release(o, o->name, NULL, &changed);
		return status ? status
			      : report_destroyed(o, o->name, NULL, changed);
	}
	/* Held until the file is gone, so no tapdisk opens it meanwhile. */
	if (stripe_map_open(o->arg, &m, &lock_fd, &err)) {
		print_map_error(o->arg, &err);
		return EXIT_FAILURE;
	}
	status = release(o, m.vdisk, m.master, &changed);
	if (!status && (ret = stripe_map_unlink(o->arg, lock_fd)))
		status = ctl_fail("the extents of %s were freed, but %s could "
				  "not be removed: %s; remove it by hand",
				  m.vdisk, o->arg, strerror(-ret));
	else if (status)
		stripe_map_close(lock_fd);
	if (!status) {
		char marker[PATH_MAX + 16];

		/* A dropped incomplete snapshot's marker goes with it. */
		snprintf(marker, sizeof(marker), "%s" STRIPE_INCOMPLETE_SUFFIX,
			 o->arg);
		unlink(marker);
		status = report_destroyed(o, m.vdisk, o->arg, changed);
	}
	stripe_map_free(&m);
	return status;
}

static void print_summary(const struct ctl_opts *o, struct td_json *j,
			  const ms_vdisk_summary *v)
{
	if (!o->json) {
		printf("%-32s %7u %9u %8u %6u %16u %6u", v->id, v->columns,
		       v->extents_per_column, v->replicas, v->stale_replicas,
		       v->under_replicated, v->moves);
		/* Only snapshots get the column: other lines stay as they
		 * were for scripts that read them. */
		if (v->source && *v->source)
			printf(" snapshot-of=%s%s", v->source,
			       v->complete ? "" : " (incomplete)");
		printf("\n");
		return;
	}
	td_json_begin_object(j, NULL);
	td_json_str(j, "vdisk", v->id);
	td_json_u64(j, "columns", v->columns);
	td_json_u64(j, "extents_per_column", v->extents_per_column);
	td_json_u64(j, "replicas", v->replicas);
	td_json_u64(j, "stale_replicas", v->stale_replicas);
	td_json_u64(j, "under_replicated", v->under_replicated);
	td_json_u64(j, "moves", v->moves);
	td_json_str(j, "source", v->source ? v->source : "");
	td_json_bool(j, "complete", v->complete);
	td_json_end_object(j);
}

/* Every page; 0 or an exit status. */
static int list_pages(const struct ctl_opts *o, struct master_client *c,
		      struct td_json *j)
{
	char after[MS_VDISK_ID_MAX + 1] = "";
	ms_vdisk_list_args a = {.after = after, .limit = MS_MAX_PAGE};
	bool more = true;

	while (more) {
		ms_reply rep;
		ms_vdisk_page *p = &rep.body.ms_body_u.vdisks;

		if (master_call_vdisk_list(c, &a, &rep)) {
			master_reply_free(&rep);
			return ctl_call_failed(c, "vdisk list");
		}
		for (u_int i = 0; i < p->vdisks.vdisks_len; i++)
			print_summary(o, j, &p->vdisks.vdisks_val[i]);
		more = p->more && p->vdisks.vdisks_len;
		if (more)
			snprintf(after, sizeof(after), "%s",
				 p->vdisks.vdisks_val[p->vdisks.vdisks_len - 1]
					 .id);
		master_reply_free(&rep);
	}
	return 0;
}

int ctl_cmd_vdisk_list(struct ctl_opts *o)
{
	struct master_client *c = ctl_client(o);
	struct td_strbuf sb;
	struct td_json j;
	int status;

	if (!c)
		return EXIT_FAILURE;
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_array(&j, NULL);
	if (!o->json)
		printf("%-32s %7s %9s %8s %6s %16s %6s\n", "VDISK", "COLUMNS",
		       "EXTENTS", "REPLICAS", "STALE", "UNDER-REPLICATED",
		       "MOVES");
	status = list_pages(o, c, &j);
	td_json_end_array(&j);
	if (!status && o->json)
		status = ctl_print_json(&j, &sb);
	else
		td_strbuf_free(&sb);
	master_client_close(c);
	return status;
}

/* --- mark ---------------------------------------------------------------------- */

/* A replica's place and state from the command line, or a usage error. */
static int parse_mark(const struct ctl_opts *o, ms_replica_state_args *a)
{
	static const char *const what[] = {"COLUMN", "EXTENT", "REPLICA"};
	u_int *at[] = {&a->column, &a->extent, &a->replica};

	for (unsigned int i = 0; i < 3; i++) {
		const char *text = o->extra[i];
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(text, &end, 10);
		if (errno || end == text || *end || text[0] == '-' ||
		    v > UINT32_MAX)
			return ctl_usage_fail(
				"vdisk mark",
				"%s wants a number, 0 or more, not "
				"'%s'",
				what[i], text);
		*at[i] = (u_int)v;
	}
	if (strcmp(o->extra[3], "stale") && strcmp(o->extra[3], "ok"))
		return ctl_usage_fail("vdisk mark",
				      "the state is 'stale' or 'ok', not '%s'",
				      o->extra[3]);
	a->stale = !strcmp(o->extra[3], "stale");
	return 0;
}

/* When the file says otherwise, say so: tapdisk goes by the file. */
static int compare_with_file(const struct stripe_map *m, const char *path,
			     const ms_replica_state_args *a, bool json)
{
	size_t slot;

	if (a->column >= m->columns || a->extent >= m->extents_per_column ||
	    a->replica >= m->replicas)
		return ctl_fail("%s has %u columns x %u extents x %u replicas: "
				"column %u extent %u replica %u is not one of "
				"them (they count from 0)",
				path, m->columns, m->extents_per_column,
				m->replicas, a->column, a->extent, a->replica);
	slot = stripe_map_slot_index(m, a->column, a->extent, a->replica);
	if (!json && m->slots[slot].stale != (a->stale != 0))
		fprintf(stderr,
			"stripe-ctl: note: %s says this replica is %s; tapdisk "
			"serves the disk by the file's states\n",
			path, m->slots[slot].stale ? "stale" : "ok");
	return 0;
}

static int report_marked(const struct ctl_opts *o, const char *master,
			 const ms_reply *rep)
{
	const ms_extent_entry *e = &rep->body.ms_body_u.replica;
	struct td_strbuf sb;
	struct td_json j;
	char offset[32];

	if (!o->json) {
		ctl_format_bytes(e->offset_bytes, offset, sizeof(offset));
		printf("vdisk %s: column %u extent %u replica %u (server %u, "
		       "extent %u at %s) is %s at the master %s%s\n",
		       e->vdisk, e->column, e->extent, e->replica, e->server_id,
		       e->index, offset, e->stale ? "stale" : "ok", master,
		       rep->changed ? ""
				    : " (it was already: nothing changed)");
		return 0;
	}
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_str(&j, "vdisk", e->vdisk);
	td_json_u64(&j, "column", e->column);
	td_json_u64(&j, "extent", e->extent);
	td_json_u64(&j, "replica", e->replica);
	td_json_u64(&j, "server", e->server_id);
	td_json_u64(&j, "index", e->index);
	td_json_u64(&j, "offset_bytes", e->offset_bytes);
	td_json_bool(&j, "stale", e->stale);
	td_json_bool(&j, "changed", rep->changed);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

/* Send the state to the master at->master; an exit status. */
static int mark_at_master(const struct ctl_opts *at,
			  const ms_replica_state_args *a)
{
	struct master_client *c = ctl_client(at);
	ms_reply rep;
	int status;

	if (!c)
		return EXIT_FAILURE;
	if (master_call_replica_state(c, a, &rep))
		status = ctl_call_failed(c, "vdisk mark");
	else
		status = report_marked(at, master_client_address(c), &rep);
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_vdisk_mark(struct ctl_opts *o)
{
	ms_replica_state_args a = {0};
	struct stripe_map_error err;
	struct ctl_opts at = *o;
	struct stripe_map m;
	int status;

	if ((status = parse_mark(o, &a)))
		return status;
	if (!o->arg) {
		if (!stripe_map_name_ok(o->name))
			return ctl_fail("'%s' is not a vdisk name", o->name);
		a.vdisk = (char *)o->name;
		return mark_at_master(o, &a);
	}
	if (stripe_map_read(o->arg, &m, &err)) {
		print_map_error(o->arg, &err);
		return EXIT_FAILURE;
	}
	a.vdisk = m.vdisk;
	if (!o->master_given)
		at.master = m.master;
	if (!(status = compare_with_file(&m, o->arg, &a, o->json)))
		status = mark_at_master(&at, &a);
	stripe_map_free(&m);
	return status;
}
