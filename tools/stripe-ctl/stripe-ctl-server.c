/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-server.c - stripe-ctl info, server add|drain|remove|list|label
 * and extents list.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/addr.h"
#include "master/hostid.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define ISCSI_PORT 3260

int ctl_cmd_info(struct ctl_opts *o)
{
	struct master_client *c = ctl_client(o);
	char extent[32];
	struct td_strbuf sb;
	struct td_json j;
	ms_reply rep;
	ms_info *i = &rep.body.ms_body_u.info;
	int status = 0;

	if (!c)
		return EXIT_FAILURE;
	if (master_call_info(c, &rep))
		status = ctl_call_failed(c, "info");
	else if (o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "master", master_client_address(c));
		td_json_u64(&j, "protocol", i->protocol);
		td_json_u64(&j, "extent_size_bytes", i->extent_size_bytes);
		td_json_u64(&j, "servers", i->nr_servers);
		td_json_u64(&j, "vdisks", i->nr_vdisks);
		td_json_u64(&j, "extents", i->nr_extents);
		td_json_u64(&j, "free_extents", i->free_extents);
		td_json_end_object(&j);
		status = ctl_print_json(&j, &sb);
	} else {
		ctl_format_bytes(i->extent_size_bytes, extent, sizeof(extent));
		printf("master:        %s (protocol %u)\nextent size:   %s\n"
		       "servers:       %u\nvdisks:        %u\n"
		       "extents:       %llu (%llu free)\n",
		       master_client_address(c), i->protocol, extent,
		       i->nr_servers, i->nr_vdisks,
		       (unsigned long long)i->nr_extents,
		       (unsigned long long)i->free_extents);
	}
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* Print one server with what happened to it. */
static int print_server_result(const struct ctl_opts *o, const ms_reply *rep,
			       const char *done, const char *already)
{
	const ms_server *s = &rep->body.ms_body_u.server;
	struct td_strbuf sb;
	struct td_json j;

	if (!o->json) {
		printf("server %u (%s lun %u at %s; host %s, rack %s, site "
		       "%s): "
		       "%s\n",
		       s->id, s->target, s->lun, s->portal, s->host,
		       s->rack[0] ? s->rack : "-", s->site[0] ? s->site : "-",
		       rep->changed ? done : already);
		return 0;
	}
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_bool(&j, "changed", rep->changed);
	ctl_json_server(&j, "server", s);
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

/* "host" becomes "host:3260"; the host alone goes to address. */
static int portal_parts(const struct ctl_opts *o, char *portal, size_t size,
			char host[MASTER_HOST_MAX])
{
	char port[MASTER_PORT_MAX];

	if (master_split_hostport(o->portal, ISCSI_PORT, 0, host, port))
		return -EINVAL;
	snprintf(portal, size, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host,
		 port);
	return 0;
}

/* The labels given are well-formed (a host label not empty); 0 or an
 * exit status printed. */
static int check_labels(const struct ctl_opts *o)
{
	const char *given[] = {o->host, o->rack, o->site};
	static const char *const names[] = {"--host", "--rack", "--site"};

	for (int i = 0; i < 3; i++)
		if (given[i] && (i == 0 || given[i][0]) &&
		    !master_host_id_ok(given[i]))
			return ctl_fail("%s '%s' is not a label: 1-%d of "
					"[A-Za-z0-9._-]%s",
					names[i], given[i], MS_LABEL_MAX,
					i ? " ('' for none)" : "");
	return 0;
}

/*
 * After MS_SERVER_ADD: the CHAP account given (MS_SERVER_CHAP_SET), the
 * add's reply then saying whether either call changed something.  0 or
 * an exit status printed.
 */
static int add_chap(struct master_client *c, const struct ctl_opts *o,
		    const char *secret, ms_reply *rep)
{
	ms_reply chap;
	int status = 0;

	if (!o->chap_user)
		return 0;
	if (ctl_chap_set(c, o, secret, &chap))
		status = ctl_fail("server add: the LUN is registered, but its "
				  "CHAP account was not set: %s; run 'server "
				  "chap' or this command again",
				  master_client_error(c));
	else
		rep->changed = rep->changed || chap.changed;
	master_reply_free(&chap);
	return status;
}

int ctl_cmd_server_add(struct ctl_opts *o)
{
	char portal[MASTER_HOST_MAX + MASTER_PORT_MAX + 4],
		host[MASTER_HOST_MAX], secret[STRIPE_MAP_CHAP_SIZE];
	ms_server_add_args a = {0};
	struct master_client *c;
	ms_reply rep;
	int status;

	if (portal_parts(o, portal, sizeof(portal), host))
		return ctl_fail("--portal '%s' is not HOST[:PORT]", o->portal);
	if (check_labels(o) || ctl_chap_args(o, secret))
		return EXIT_FAILURE;
	a.address = (char *)(o->address ? o->address : host);
	a.portal = portal;
	a.target = (char *)o->target;
	a.lun = (u_int)o->lun;
	a.size_bytes = o->size_bytes;
	a.block_size = o->block_size;
	a.host = (char *)(o->host ? o->host : "");
	a.rack = (char *)(o->rack ? o->rack : "");
	a.site = (char *)(o->site ? o->site : "");
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	if (master_call_server_add(c, &a, &rep))
		status = ctl_call_failed(c, "server add");
	else if (!(status = add_chap(c, o, secret, &rep)))
		status = print_server_result(o, &rep, "registered",
					     "already registered with these "
					     "values; nothing changed");
	memset(secret, 0, sizeof(secret));
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_server_drain(struct ctl_opts *o)
{
	ms_server_key k = {.target = (char *)o->target, .lun = (u_int)o->lun};
	struct master_client *c = ctl_client(o);
	ms_reply rep;
	int status;

	if (!c)
		return EXIT_FAILURE;
	if (master_call_server_drain(c, &k, &rep))
		status = ctl_call_failed(c, "server drain");
	else
		status = print_server_result(o, &rep,
					     "draining: no new extents go to "
					     "it",
					     "was draining already");
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_server_label(struct ctl_opts *o)
{
	ms_server_label_args a = {.target = (char *)o->target,
				  .lun = (u_int)o->lun,
				  .set_host = o->host != NULL,
				  .host = (char *)(o->host ? o->host : ""),
				  .set_rack = o->rack != NULL,
				  .rack = (char *)(o->rack ? o->rack : ""),
				  .set_site = o->site != NULL,
				  .site = (char *)(o->site ? o->site : "")};
	struct master_client *c;
	ms_reply rep;
	int status;

	if (!o->host && !o->rack && !o->site)
		return ctl_usage_fail("server label",
				      "give --host, --rack or --site");
	if (check_labels(o))
		return EXIT_FAILURE;
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	if (master_call_server_label(c, &a, &rep))
		status = ctl_call_failed(c, "server label");
	else
		status = print_server_result(o, &rep, "labelled",
					     "labelled so already; nothing "
					     "changed");
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_server_remove(struct ctl_opts *o)
{
	ms_server_key k = {.target = (char *)o->target, .lun = (u_int)o->lun};
	struct master_client *c = ctl_client(o);
	ms_reply rep;
	int status = 0;

	if (!c)
		return EXIT_FAILURE;
	if (master_call_server_remove(c, &k, &rep))
		status = ctl_call_failed(c, "server remove");
	else if (o->json)
		status = ctl_print_result(NULL, NULL, rep.changed);
	else
		printf("%s lun %ld: %s\n", o->target, o->lun,
		       rep.changed ? "removed"
				   : "not registered; nothing to do");
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* The status of server id in st (NULL: none). */
static const ms_server_stat *stat_of(const ms_reply *st, u_int id)
{
	for (u_int i = 0; i < st->body.ms_body_u.stats.stats_len; i++)
		if (st->body.ms_body_u.stats.stats_val[i].id == id)
			return &st->body.ms_body_u.stats.stats_val[i];
	return NULL;
}

static int print_servers(const struct ctl_opts *o, const ms_reply *rep,
			 const ms_reply *st)
{
	ms_server *s = rep->body.ms_body_u.servers.servers_val;
	u_int n = rep->body.ms_body_u.servers.servers_len;
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_array(&j, NULL);
	if (!o->json)
		ctl_print_server_stat_header();
	for (u_int i = 0; i < n; i++) {
		if (o->json)
			ctl_json_server_stat(&j, NULL, &s[i],
					     stat_of(st, s[i].id));
		else
			ctl_print_server_stat(&s[i], stat_of(st, s[i].id));
	}
	td_json_end_array(&j);
	if (o->json)
		return ctl_print_json(&j, &sb);
	td_strbuf_free(&sb);
	return 0;
}

int ctl_cmd_server_list(struct ctl_opts *o)
{
	struct master_client *c = ctl_client(o);
	ms_reply rep, st;
	int status = 0;

	if (!c)
		return EXIT_FAILURE;
	master_reply_init(&st);
	if (master_call_server_list(c, &rep))
		status = ctl_call_failed(c, "server list");
	else if (master_call_server_status(c, &st))
		status = ctl_call_failed(c, "server status");
	else
		status = print_servers(o, &rep, &st);
	master_reply_free(&st);
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

/* --- extents list ------------------------------------------------------------ */

static void print_extent(const struct ctl_opts *o, struct td_json *j,
			 const ms_extent_entry *e)
{
	if (o->json) {
		td_json_begin_object(j, NULL);
		td_json_u64(j, "server", e->server_id);
		td_json_u64(j, "index", e->index);
		td_json_u64(j, "offset_bytes", e->offset_bytes);
		if (e->vdisk[0]) {
			td_json_str(j, "vdisk", e->vdisk);
			td_json_u64(j, "column", e->column);
			td_json_u64(j, "extent", e->extent);
			td_json_u64(j, "replica", e->replica);
			td_json_bool(j, "stale", e->stale);
			td_json_bool(j, "move_target", e->move_target);
		} else
			td_json_null(j, "vdisk");
		td_json_end_object(j);
	} else if (e->vdisk[0])
		printf("%6u %8u %16llu  %s %u %u %u%s%s\n", e->server_id,
		       e->index, (unsigned long long)e->offset_bytes, e->vdisk,
		       e->column, e->extent, e->replica,
		       e->stale ? " stale" : "",
		       e->move_target ? " move-target" : "");
	else
		printf("%6u %8u %16llu  -\n", e->server_id, e->index,
		       (unsigned long long)e->offset_bytes);
}

/* Every page of the listing; 0 or an exit status. */
static int list_pages(const struct ctl_opts *o, struct master_client *c,
		      struct td_json *j)
{
	ms_extent_list_args a = {
		.server_ids = {o->nr_server_ids, (u_int *)o->server_ids},
		.vdisk = (char *)(o->name ? o->name : ""),
		.allocated_only = o->allocated,
		.limit = MS_MAX_PAGE};
	bool more = true;

	while (more) {
		ms_reply rep;
		ms_extent_page *p = &rep.body.ms_body_u.extents;

		if (master_call_extent_list(c, &a, &rep)) {
			master_reply_free(&rep);
			return ctl_call_failed(c, "extents list");
		}
		for (u_int i = 0; i < p->extents.extents_len; i++)
			print_extent(o, j, &p->extents.extents_val[i]);
		more = p->more && p->extents.extents_len;
		if (more) {
			ms_extent_entry *last =
				&p->extents.extents_val[p->extents.extents_len -
							1];

			a.has_cursor = true;
			a.after_server = last->server_id;
			a.after_index = last->index;
		}
		master_reply_free(&rep);
	}
	return 0;
}

int ctl_cmd_extents_list(struct ctl_opts *o)
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
		printf("%6s %8s %16s  %s\n", "SERVER", "INDEX", "OFFSET",
		       "VDISK COLUMN EXTENT REPLICA [stale] [move-target]");
	status = list_pages(o, c, &j);
	td_json_end_array(&j);
	if (!status && o->json)
		status = ctl_print_json(&j, &sb);
	else
		td_strbuf_free(&sb);
	master_client_close(c);
	return status;
}
