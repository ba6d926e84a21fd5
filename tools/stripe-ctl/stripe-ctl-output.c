/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-output.c - stripe-ctl's shared helpers and its printing of
 * servers, mapping files and the master's record of a disk, as text
 * (binary units) or JSON (exact bytes).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stripe-ctl/stripe-ctl.h"

#define MS_PER_S       1000
#define CONF_LINE_SIZE 1024
#define CONF_KEY       CTL_MASTER_ENV "="

/* "VALUE" or 'VALUE' or VALUE, trailing blanks dropped, in place. */
static char *conf_value(char *v)
{
	size_t len;

	v[strcspn(v, "\r\n")] = '\0';
	len = strlen(v);
	while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		v[--len] = '\0';
	if (len >= 2 && (v[0] == '"' || v[0] == '\'') && v[len - 1] == v[0]) {
		v[len - 1] = '\0';
		v++;
	}
	return v;
}

const char *ctl_master_conf(void)
{
	static char value[CONF_LINE_SIZE];
	const char *path = getenv(CTL_MASTER_CONF_ENV);
	char line[CONF_LINE_SIZE];
	FILE *f;

	f = fopen(path && *path ? path : CTL_MASTER_CONF, "re");
	if (!f)
		return NULL;
	value[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *p = line + strspn(line, " \t");

		if (!strncmp(p, CONF_KEY, strlen(CONF_KEY)))
			snprintf(value, sizeof(value), "%s",
				 conf_value(p + strlen(CONF_KEY)));
	}
	fclose(f);
	return value[0] ? value : NULL;
}

struct master_client *ctl_client(const struct ctl_opts *o)
{
	struct master_client_opts co = {.timeout_ms = o->timeout_s * MS_PER_S,
					.retries = o->retries};
	struct master_client *c;
	int err = master_client_open(o->master, &co, &c);

	if (err == -EINVAL)
		ctl_fail("--master '%s' is not HOST[:PORT] or a list of at "
			 "most %u of them, each once, like 10.0.0.5 or "
			 "10.0.0.5:7700,10.0.0.6:7700",
			 o->master, MASTER_CLIENT_MAX_MASTERS);
	else if (err)
		ctl_fail("%s", strerror(-err));
	if (err)
		return NULL;
	/* the list goes into mapping files' master line */
	if (strlen(master_client_addresses(c)) >= STRIPE_MAP_MASTER_SIZE) {
		ctl_fail("--master '%s' is too long for a mapping file's "
			 "master line (%u bytes at most, the ports included): "
			 "name fewer masters, or shorter addresses",
			 master_client_addresses(c),
			 STRIPE_MAP_MASTER_SIZE - 1);
		master_client_close(c);
		return NULL;
	}
	return c;
}

int ctl_call_failed(struct master_client *c, const char *what)
{
	return ctl_fail("%s: %s", what, master_client_error(c));
}

void ctl_format_bytes(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB",
					    "TiB",   "PiB", "EiB"};
	unsigned int u = 0;
	double v = (double)bytes;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (!u)
		snprintf(buf, size, "%" PRIu64 " bytes", bytes);
	else
		snprintf(buf, size, "%.1f %s", v, units[u]);
}

int ctl_print_json(struct td_json *j, struct td_strbuf *sb)
{
	int err = td_json_finish(j);

	if (!err)
		fputs(td_strbuf_str(sb), stdout);
	td_strbuf_free(sb);
	return err ? ctl_fail("out of memory") : 0;
}

int ctl_print_result(const char *vdisk, const char *file, bool changed)
{
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	if (vdisk)
		td_json_str(&j, "vdisk", vdisk);
	if (file)
		td_json_str(&j, "file", file);
	td_json_bool(&j, "changed", changed);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

void ctl_json_server(struct td_json *j, const char *key, const ms_server *s)
{
	ctl_json_server_stat(j, key, s, NULL);
}

const char *ctl_server_state(const ms_server *s, const ms_server_stat *x)
{
	if (x && x->failed)
		return "failed";
	return s->draining ? "draining" : "ok";
}

void ctl_json_server_stat(struct td_json *j, const char *key,
			  const ms_server *s, const ms_server_stat *x)
{
	td_json_begin_object(j, key);
	td_json_u64(j, "id", s->id);
	td_json_str(j, "address", s->address);
	td_json_str(j, "portal", s->portal);
	td_json_str(j, "target", s->target);
	td_json_u64(j, "lun", s->lun);
	td_json_u64(j, "size_bytes", s->size_bytes);
	td_json_u64(j, "block_size", s->block_size);
	td_json_u64(j, "extents", s->nr_extents);
	td_json_u64(j, "free_extents", s->free_extents);
	td_json_bool(j, "draining", s->draining);
	td_json_str(j, "host", s->host);
	td_json_str(j, "rack", s->rack);
	td_json_str(j, "site", s->site);
	if (x) {
		td_json_str(j, "state", ctl_server_state(s, x));
		td_json_u64(j, "replicas", x->replicas);
		td_json_u64(j, "stale_replicas", x->stale);
		td_json_u64(j, "moves_from", x->moves_from);
		td_json_u64(j, "moves_to", x->moves_to);
	}
	td_json_end_object(j);
}

void ctl_print_server_header(void)
{
	printf("%-4s %-15s %-21s %-40s %5s %10s %8s %8s %-8s %s\n", "ID",
	       "ADDRESS", "PORTAL", "TARGET", "LUN", "SIZE", "EXTENTS", "FREE",
	       "STATE", "HOST/RACK/SITE");
}

void ctl_print_server_stat_header(void)
{
	printf("%-4s %-15s %-21s %-40s %5s %10s %8s %8s %-8s %-24s %8s %6s "
	       "%s\n",
	       "ID", "ADDRESS", "PORTAL", "TARGET", "LUN", "SIZE", "EXTENTS",
	       "FREE", "STATE", "HOST/RACK/SITE", "REPLICAS", "STALE",
	       "MOVES OUT/IN");
}

void ctl_print_server(const ms_server *s)
{
	ctl_print_server_stat(s, NULL);
}

static void print_server_base(const ms_server *s, const char *state,
			      char *labels, size_t len)
{
	char size[32];

	ctl_format_bytes(s->size_bytes, size, sizeof(size));
	snprintf(labels, len, "%s/%s/%s", s->host, s->rack[0] ? s->rack : "-",
		 s->site[0] ? s->site : "-");
	printf("%-4u %-15s %-21s %-40s %5u %10s %8u %8u %-8s ", s->id,
	       s->address, s->portal, s->target, s->lun, size, s->nr_extents,
	       s->free_extents, state);
}

void ctl_print_server_state(const ms_server *s, const char *state)
{
	char labels[3 * MS_LABEL_MAX + 3];

	print_server_base(s, state, labels, sizeof(labels));
	printf("%s\n", labels);
}

void ctl_print_server_stat(const ms_server *s, const ms_server_stat *x)
{
	char labels[3 * MS_LABEL_MAX + 3];

	print_server_base(s, ctl_server_state(s, x), labels, sizeof(labels));
	if (x)
		printf("%-24s %8u %6u %u/%u\n", labels, x->replicas, x->stale,
		       x->moves_from, x->moves_to);
	else
		printf("%s\n", labels);
}

/* --- mapping files ------------------------------------------------------------- */

static uint32_t map_stale(const struct stripe_map *m)
{
	size_t n = (size_t)m->columns * m->extents_per_column * m->replicas;
	uint32_t stale = 0;

	for (size_t i = 0; i < n; i++)
		stale += m->slots[i].stale;
	return stale;
}

/* "moves": the active move targets, in slot order. */
static void json_moves(struct td_json *j, const struct stripe_map *m)
{
	size_t i = 0;

	td_json_begin_array(j, "moves");
	for (uint32_t c = 0; c < m->columns; c++)
		for (uint32_t x = 0; x < m->extents_per_column; x++)
			for (uint32_t r = 0; r < m->replicas; r++, i++) {
				if (!m->moves[i].active)
					continue;
				td_json_begin_object(j, NULL);
				td_json_u64(j, "column", c);
				td_json_u64(j, "extent", x);
				td_json_u64(j, "replica", r);
				td_json_u64(j, "server", m->moves[i].server);
				td_json_u64(j, "lba", m->moves[i].lba);
				td_json_u64(
					j, "dirty_regions",
					stripe_map_bits_count(
						stripe_map_move_dirty(m, i),
						stripe_map_region_count(m)));
				td_json_end_object(j);
			}
	td_json_end_array(j);
}

static void json_map(struct td_json *j, const struct stripe_map *m,
		     const char *path)
{
	size_t i = 0;

	td_json_str(j, "file", path);
	td_json_str(j, "vdisk", m->vdisk);
	td_json_u64(j, "size_bytes", m->size_bytes);
	td_json_u64(j, "stripe_unit_bytes", m->stripe_unit_bytes);
	td_json_u64(j, "columns", m->columns);
	td_json_u64(j, "extents_per_column", m->extents_per_column);
	td_json_u64(j, "replicas", m->replicas);
	td_json_u64(j, "extent_size_bytes", m->extent_size_bytes);
	td_json_str(j, "master", m->master);
	td_json_u64(j, "stale_replicas", map_stale(m));
	td_json_u64(j, "region_bytes", m->region_bytes);
	td_json_begin_array(j, "servers");
	for (uint32_t s = 0; s < m->nr_servers; s++) {
		td_json_begin_object(j, NULL);
		td_json_str(j, "address", m->servers[s].address);
		td_json_str(j, "portal", m->servers[s].portal);
		td_json_str(j, "target", m->servers[s].target);
		td_json_u64(j, "lun", m->servers[s].lun);
		td_json_u64(j, "block_size", m->servers[s].block_size);
		td_json_bool(j, "chap", m->servers[s].chap_user[0] != '\0');
		if (m->servers[s].device[0])
			td_json_str(j, "device", m->servers[s].device);
		td_json_end_object(j);
	}
	td_json_end_array(j);
	td_json_begin_array(j, "extents");
	for (uint32_t c = 0; c < m->columns; c++)
		for (uint32_t x = 0; x < m->extents_per_column; x++)
			for (uint32_t r = 0; r < m->replicas; r++, i++) {
				td_json_begin_object(j, NULL);
				td_json_u64(j, "column", c);
				td_json_u64(j, "extent", x);
				td_json_u64(j, "replica", r);
				td_json_u64(j, "server", m->slots[i].server);
				td_json_u64(j, "lba", m->slots[i].lba);
				td_json_bool(j, "stale", m->slots[i].stale);
				td_json_u64(
					j, "dirty_regions",
					stripe_map_bits_count(
						stripe_map_slot_dirty(m, i),
						stripe_map_region_count(m)));
				td_json_end_object(j);
			}
	td_json_end_array(j);
	json_moves(j, m);
}

/* After a state: ", dirty K of N regions (G each)" when K > 0. */
static void print_dirty(const struct stripe_map *m, const uint64_t *bits)
{
	uint32_t n = stripe_map_region_count(m);
	uint32_t k = stripe_map_bits_count(bits, n);
	char g[32];

	if (k) {
		ctl_format_bytes(m->region_bytes, g, sizeof(g));
		printf(", dirty %u of %u regions (%s each)", k, n, g);
	}
	printf("\n");
}

/* The move targets being filled (re-homing), when there are any. */
static void print_moves(const struct stripe_map *m)
{
	size_t n = stripe_map_nr_slots(m), i = 0;
	bool header = false;

	for (uint32_t c = 0; c < m->columns; c++)
		for (uint32_t x = 0; x < m->extents_per_column; x++)
			for (uint32_t r = 0; r < m->replicas && i < n;
			     r++, i++) {
				if (!m->moves[i].active)
					continue;
				if (!header)
					printf("\nmove targets (replicas being "
					       "re-homed):\n%6s %6s %7s %6s "
					       "%14s %s\n",
					       "COLUMN", "EXTENT", "REPLICA",
					       "SERVER", "LBA", "STATE");
				header = true;
				printf("%6u %6u %7u %6u %14" PRIu64 " %s", c, x,
				       r, m->moves[i].server, m->moves[i].lba,
				       stripe_map_bits_any(
					       stripe_map_move_dirty(m, i),
					       stripe_map_region_count(m))
					       ? "copying"
					       : "copied");
				print_dirty(m, stripe_map_move_dirty(m, i));
			}
}

static void print_map(const struct stripe_map *m, const char *path)
{
	char size[32], unit[32], extent[32];
	size_t i = 0;

	ctl_format_bytes(m->size_bytes, size, sizeof(size));
	ctl_format_bytes(m->stripe_unit_bytes, unit, sizeof(unit));
	ctl_format_bytes(m->extent_size_bytes, extent, sizeof(extent));
	printf("file:                %s\nvdisk:               %s\n"
	       "size:                %s (%" PRIu64 " bytes)\n"
	       "stripe unit:         %s\ncolumns:             %u\n"
	       "extents per column:  %u\nreplicas:            %u\n"
	       "extent size:         %s\nmaster:              %s\n"
	       "stale replicas:      %u\n\nservers:\n",
	       path, m->vdisk, size, m->size_bytes, unit, m->columns,
	       m->extents_per_column, m->replicas, extent, m->master,
	       map_stale(m));
	for (uint32_t s = 0; s < m->nr_servers; s++)
		printf("  %u  %s  %s  %s  lun %u  block %u%s%s%s\n", s,
		       m->servers[s].address, m->servers[s].portal,
		       m->servers[s].target, m->servers[s].lun,
		       m->servers[s].block_size,
		       m->servers[s].chap_user[0] ? "  chap" : "",
		       m->servers[s].device[0] ? "  device " : "",
		       m->servers[s].device);
	printf("\n%6s %6s %7s %6s %14s %s\n", "COLUMN", "EXTENT", "REPLICA",
	       "SERVER", "LBA", "STATE");
	for (uint32_t c = 0; c < m->columns; c++)
		for (uint32_t x = 0; x < m->extents_per_column; x++)
			for (uint32_t r = 0; r < m->replicas; r++, i++) {
				printf("%6u %6u %7u %6u %14" PRIu64 " %s", c, x,
				       r, m->slots[i].server, m->slots[i].lba,
				       m->slots[i].stale ? "stale" : "ok");
				print_dirty(m, stripe_map_slot_dirty(m, i));
			}
	print_moves(m);
}

int ctl_show_map(const struct stripe_map *m, const char *path, bool json)
{
	struct td_strbuf sb;
	struct td_json j;

	if (!json) {
		print_map(m, path);
		return 0;
	}
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	json_map(&j, m, path);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

/* --- the master's record of a disk (vdisk show --name) ------------------------- */

static u_int vdisk_stale(const ms_vdisk *v)
{
	u_int stale = 0;

	for (u_int i = 0; i < v->extents.extents_len; i++)
		stale += v->extents.extents_val[i].stale;
	return stale;
}

static void json_vdisk(struct td_json *j, const ms_vdisk *v, const char *master)
{
	u_int i = 0;

	td_json_str(j, "vdisk", v->id);
	td_json_str(j, "master", master);
	td_json_u64(j, "columns", v->columns);
	td_json_u64(j, "extents_per_column", v->extents_per_column);
	td_json_u64(j, "replicas", v->replicas);
	td_json_u64(j, "extent_size_bytes", v->extent_size_bytes);
	td_json_u64(j, "stale_replicas", vdisk_stale(v));
	td_json_begin_array(j, "servers");
	for (u_int s = 0; s < v->servers.servers_len; s++)
		ctl_json_server(j, NULL, &v->servers.servers_val[s]);
	td_json_end_array(j);
	td_json_begin_array(j, "extents");
	for (u_int c = 0; c < v->columns; c++)
		for (u_int x = 0; x < v->extents_per_column; x++)
			for (u_int r = 0;
			     r < v->replicas && i < v->extents.extents_len;
			     r++, i++) {
				const ms_extent *e = &v->extents.extents_val[i];

				td_json_begin_object(j, NULL);
				td_json_u64(j, "column", c);
				td_json_u64(j, "extent", x);
				td_json_u64(j, "replica", r);
				td_json_u64(j, "server", e->server_id);
				td_json_u64(j, "offset_bytes", e->offset_bytes);
				td_json_bool(j, "stale", e->stale);
				td_json_str(
					j, "domain",
					ctl_domain_name(ctl_extent_domain(
						v, c * v->extents_per_column +
							   x)));
				ctl_json_slot_copies(j, v, i);
				td_json_end_object(j);
			}
	td_json_end_array(j);
	ctl_json_spread(j, v);
	ctl_json_copies(j, v);
}

static void print_vdisk(const ms_vdisk *v, const char *master)
{
	char extent[32];
	u_int i = 0;

	ctl_format_bytes(v->extent_size_bytes, extent, sizeof(extent));
	printf("vdisk:               %s\nmaster:              %s\n"
	       "columns:             %u\nextents per column:  %u\n"
	       "replicas:            %u\nextent size:         %s\n"
	       "stale replicas:      %u\n",
	       v->id, master, v->columns, v->extents_per_column, v->replicas,
	       extent, vdisk_stale(v));
	ctl_print_copies(v);
	ctl_print_spread(v);
	printf("\nservers:\n");
	ctl_print_server_header();
	for (u_int s = 0; s < v->servers.servers_len; s++)
		ctl_print_vdisk_server(v, s);
	printf("\n%6s %6s %7s %6s %16s %s\n", "COLUMN", "EXTENT", "REPLICA",
	       "SERVER", "OFFSET", "STATE");
	for (u_int c = 0; c < v->columns; c++)
		for (u_int x = 0; x < v->extents_per_column; x++)
			for (u_int r = 0;
			     r < v->replicas && i < v->extents.extents_len;
			     r++, i++) {
				printf("%6u %6u %7u %6u %16llu %s", c, x, r,
				       v->extents.extents_val[i].server_id,
				       (unsigned long long)v->extents
					       .extents_val[i]
					       .offset_bytes,
				       v->extents.extents_val[i].stale ? "stale"
								       : "ok");
				ctl_print_slot_copies(v, i);
			}
}

int ctl_show_vdisk(const ms_vdisk *v, const ms_lease *lease, const char *master,
		   bool json)
{
	struct td_strbuf sb;
	struct td_json j;

	if (!json) {
		print_vdisk(v, master);
		if (lease) {
			putchar('\n');
			ctl_print_lease(lease);
		}
		return 0;
	}
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	json_vdisk(&j, v, master);
	if (lease) {
		td_json_begin_object(&j, "lease");
		ctl_json_lease(&j, lease);
		td_json_end_object(&j);
	}
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}
