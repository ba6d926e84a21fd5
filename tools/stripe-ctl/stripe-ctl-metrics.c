/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-metrics.c - stripe-ctl metrics [-o FILE]: the master's view
 * in the Prometheus text format (doc/metrics.md), from its existing RPCs
 * (server list, server status, vdisk list): each server's extents, free
 * extents and state, each disk's stale and under-replicated extents and
 * moves.  -o FILE is written through a temporary file and a rename, for
 * node-exporter's textfile collector.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "tools/stripe-ctl/stripe-ctl.h"

/* Label values are quoted: escape backslash, quote and newline. */
static void label(struct td_strbuf *sb, const char *name, const char *value)
{
	td_strbuf_printf(sb, "%s=\"", name);
	for (const char *c = value; *c; c++) {
		if (*c == '\\' || *c == '"')
			td_strbuf_printf(sb, "\\%c", *c);
		else if (*c == '\n')
			td_strbuf_puts(sb, "\\n");
		else
			td_strbuf_append(sb, c, 1);
	}
	td_strbuf_puts(sb, "\"");
}

static void family(struct td_strbuf *sb, const char *name, const char *help)
{
	td_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s gauge\n", name, help,
			 name);
}

/* --- servers -------------------------------------------------------------------- */

static const ms_server_stat *stat_of(const ms_reply *st, u_int id)
{
	for (u_int i = 0; i < st->body.ms_body_u.stats.stats_len; i++)
		if (st->body.ms_body_u.stats.stats_val[i].id == id)
			return &st->body.ms_body_u.stats.stats_val[i];
	return NULL;
}

/* One gauge per server: field's value of each (its ms_server_stat may
 * be NULL: an older master). */
static void server_gauge(struct td_strbuf *sb, const ms_reply *rep,
			 const ms_reply *st, const char *name, const char *help,
			 uint64_t (*field)(const ms_server *s,
					   const ms_server_stat *x))
{
	const ms_server *s = rep->body.ms_body_u.servers.servers_val;

	family(sb, name, help);
	for (u_int i = 0; i < rep->body.ms_body_u.servers.servers_len; i++)
		td_strbuf_printf(sb, "%s{server=\"%u\"} %" PRIu64 "\n", name,
				 s[i].id, field(&s[i], stat_of(st, s[i].id)));
}

static uint64_t f_extents(const ms_server *s, const ms_server_stat *x)
{
	(void)x;
	return s->nr_extents;
}

static uint64_t f_free(const ms_server *s, const ms_server_stat *x)
{
	(void)x;
	return s->free_extents;
}

static uint64_t f_replicas(const ms_server *s, const ms_server_stat *x)
{
	(void)s;
	return x ? x->replicas : 0;
}

static uint64_t f_stale(const ms_server *s, const ms_server_stat *x)
{
	(void)s;
	return x ? x->stale : 0;
}

static uint64_t f_moves_from(const ms_server *s, const ms_server_stat *x)
{
	(void)s;
	return x ? x->moves_from : 0;
}

static uint64_t f_moves_to(const ms_server *s, const ms_server_stat *x)
{
	(void)s;
	return x ? x->moves_to : 0;
}

/* tapstripe_master_server_info: the labels of each server, value 1. */
static void server_info(struct td_strbuf *sb, const ms_reply *rep,
			const ms_reply *st)
{
	const ms_server *s = rep->body.ms_body_u.servers.servers_val;

	family(sb, "tapstripe_master_server_info",
	       "A registered LUN: its address and labels (value 1)");
	for (u_int i = 0; i < rep->body.ms_body_u.servers.servers_len; i++) {
		td_strbuf_printf(sb,
				 "tapstripe_master_server_info{server=\"%u\",",
				 s[i].id);
		label(sb, "portal", s[i].portal);
		td_strbuf_puts(sb, ",");
		label(sb, "target", s[i].target);
		td_strbuf_printf(sb, ",lun=\"%u\",", s[i].lun);
		label(sb, "state",
		      ctl_server_state(&s[i], stat_of(st, s[i].id)));
		td_strbuf_puts(sb, ",");
		label(sb, "host", s[i].host);
		td_strbuf_puts(sb, ",");
		label(sb, "rack", s[i].rack);
		td_strbuf_puts(sb, ",");
		label(sb, "site", s[i].site);
		td_strbuf_puts(sb, "} 1\n");
	}
}

/* tapstripe_master_server_state: 1 for the server's state, 0 for the
 * others (a state set, one sample per state). */
static void server_state(struct td_strbuf *sb, const ms_reply *rep,
			 const ms_reply *st)
{
	static const char *const states[] = {"ok", "draining", "failed"};
	const ms_server *s = rep->body.ms_body_u.servers.servers_val;

	family(sb, "tapstripe_master_server_state",
	       "1 for the server's state (ok, draining, failed), else 0");
	for (u_int i = 0; i < rep->body.ms_body_u.servers.servers_len; i++) {
		const char *now = ctl_server_state(&s[i], stat_of(st, s[i].id));

		for (size_t k = 0; k < sizeof(states) / sizeof(states[0]); k++)
			td_strbuf_printf(sb,
					 "tapstripe_master_server_state{server="
					 "\"%u\",state=\"%s\"} %d\n",
					 s[i].id, states[k],
					 !strcmp(now, states[k]));
	}
}

static void servers(struct td_strbuf *sb, const ms_reply *rep,
		    const ms_reply *st)
{
	server_info(sb, rep, st);
	server_state(sb, rep, st);
	server_gauge(sb, rep, st, "tapstripe_master_server_extents",
		     "Extents the LUN is cut into", f_extents);
	server_gauge(sb, rep, st, "tapstripe_master_server_free_extents",
		     "Extents of the LUN no disk holds", f_free);
	server_gauge(sb, rep, st, "tapstripe_master_server_replicas",
		     "Replicas the LUN holds", f_replicas);
	server_gauge(sb, rep, st, "tapstripe_master_server_stale_replicas",
		     "Replicas on the LUN marked stale", f_stale);
	server_gauge(sb, rep, st, "tapstripe_master_server_moves_from",
		     "Moves in progress away from the LUN", f_moves_from);
	server_gauge(sb, rep, st, "tapstripe_master_server_moves_to",
		     "Moves in progress to the LUN", f_moves_to);
}

/* --- disks ---------------------------------------------------------------------- */

struct disk_gauges {
	struct td_strbuf stale, under, moves;
};

static void disk_sample(struct td_strbuf *sb, const char *name,
			const char *disk, uint64_t v)
{
	td_strbuf_printf(sb, "%s{", name);
	label(sb, "disk", disk);
	td_strbuf_printf(sb, "} %" PRIu64 "\n", v);
}

/* Every page of vdisk list into the three families; 0 or exit status. */
static int disks(struct master_client *c, struct disk_gauges *g)
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
		for (u_int i = 0; i < p->vdisks.vdisks_len; i++) {
			const ms_vdisk_summary *v = &p->vdisks.vdisks_val[i];

			disk_sample(&g->stale,
				    "tapstripe_master_disk_stale_"
				    "replicas",
				    v->id, v->stale_replicas);
			disk_sample(&g->under,
				    "tapstripe_master_disk_under_replicated_"
				    "extents",
				    v->id, v->under_replicated);
			disk_sample(&g->moves, "tapstripe_master_disk_moves",
				    v->id, v->moves);
		}
		more = p->more && p->vdisks.vdisks_len;
		if (more)
			snprintf(after, sizeof(after), "%s",
				 p->vdisks.vdisks_val[p->vdisks.vdisks_len - 1]
					 .id);
		master_reply_free(&rep);
	}
	return 0;
}

static void disk_families(struct td_strbuf *sb, struct disk_gauges *g)
{
	family(sb, "tapstripe_master_disk_stale_replicas",
	       "Replicas of the disk marked stale");
	td_strbuf_puts(sb, td_strbuf_str(&g->stale));
	family(sb, "tapstripe_master_disk_under_replicated_extents",
	       "Extents of the disk with fewer live copies than replicas");
	td_strbuf_puts(sb, td_strbuf_str(&g->under));
	family(sb, "tapstripe_master_disk_moves",
	       "Moves in progress of the disk's replicas");
	td_strbuf_puts(sb, td_strbuf_str(&g->moves));
}

/* --- output --------------------------------------------------------------------- */

/* path through path.tmp.PID and a rename; 0 or an exit status printed. */
static int write_atomically(const char *path, const struct td_strbuf *sb)
{
	char tmp[PATH_MAX];
	FILE *f;
	int err = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		return ctl_fail("-o %s: name too long", path);
	if (!(f = fopen(tmp, "w")))
		return ctl_fail("cannot create %s: %s", tmp, strerror(errno));
	if (fputs(td_strbuf_str(sb), f) == EOF || fflush(f) || fsync(fileno(f)))
		err = errno;
	if (fclose(f) && !err)
		err = errno;
	if (!err && rename(tmp, path))
		err = errno;
	if (err) {
		unlink(tmp);
		return ctl_fail("cannot write %s: %s", path, strerror(err));
	}
	return 0;
}

static int collect(struct master_client *c, struct td_strbuf *sb)
{
	struct disk_gauges g;
	ms_reply rep, st;
	int status = 0;

	td_strbuf_init(&g.stale);
	td_strbuf_init(&g.under);
	td_strbuf_init(&g.moves);
	master_reply_init(&st);
	if (master_call_server_list(c, &rep))
		status = ctl_call_failed(c, "server list");
	else if (master_call_server_status(c, &st))
		status = ctl_call_failed(c, "server status");
	else if (!(status = disks(c, &g))) {
		servers(sb, &rep, &st);
		disk_families(sb, &g);
	}
	master_reply_free(&st);
	master_reply_free(&rep);
	td_strbuf_free(&g.stale);
	td_strbuf_free(&g.under);
	td_strbuf_free(&g.moves);
	return status;
}

int ctl_cmd_metrics(struct ctl_opts *o)
{
	struct master_client *c = ctl_client(o);
	struct td_strbuf sb;
	int status;

	if (!c)
		return EXIT_FAILURE;
	td_strbuf_init(&sb);
	status = collect(c, &sb);
	master_client_close(c);
	if (!status && td_strbuf_error(&sb))
		status = ctl_fail("out of memory");
	if (!status && o->output)
		status = write_atomically(o->output, &sb);
	else if (!status)
		fputs(td_strbuf_str(&sb), stdout);
	td_strbuf_free(&sb);
	return status;
}
