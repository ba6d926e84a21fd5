/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-spread.c - how far a disk's replicas are spread over failure
 * domains (issue #19), for vdisk create and vdisk show --name: the domain
 * each extent's replicas reach with the servers' labels as the master
 * answers them now, and the master's notes on the extents it could not
 * spread as widely as the labels allowed when it placed them.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "tools/stripe-ctl/stripe-ctl.h"

static const char *const domain_names[] = {"host", "rack", "site"};

const char *ctl_domain_name(u_int level)
{
	return level < 3 ? domain_names[level] : "?";
}

static const ms_server *server_of(const ms_vdisk *v, u_int id)
{
	for (u_int s = 0; s < v->servers.servers_len; s++)
		if (v->servers.servers_val[s].id == id)
			return &v->servers.servers_val[s];
	return NULL;
}

/*
 * Are a and b not distinct at level?  As master/server/placement.h rules:
 * distinct sites need two site labels that differ, distinct racks two rack
 * labels whose (site, rack) pairs differ.
 */
static bool same_domain(const ms_server *a, const ms_server *b, u_int level)
{
	if (level == MS_DOMAIN_HOST)
		return !strcmp(a->host, b->host);
	if (level == MS_DOMAIN_SITE)
		return !a->site[0] || !b->site[0] || !strcmp(a->site, b->site);
	return !a->rack[0] || !b->rack[0] ||
	       (!strcmp(a->site, b->site) && !strcmp(a->rack, b->rack));
}

/* The replicas of extent x (its first slot's index), or NULL when a
 * server is missing from the answer. */
static bool replicas_of(const ms_vdisk *v, u_int x, const ms_server **out)
{
	for (u_int r = 0; r < v->replicas; r++) {
		u_int slot = x * v->replicas + r;

		if (slot >= v->extents.extents_len ||
		    !(out[r] = server_of(
			      v, v->extents.extents_val[slot].server_id)))
			return false;
	}
	return true;
}

/* The widest level at which extent x's replicas are pairwise distinct
 * (host when they are not even that, as a broken store would be). */
u_int ctl_extent_domain(const ms_vdisk *v, u_int x)
{
	const ms_server *s[MS_MAX_REPLICAS];

	if (v->replicas > MS_MAX_REPLICAS || !replicas_of(v, x, s))
		return MS_DOMAIN_HOST;
	for (u_int level = MS_DOMAIN_SITE; level > MS_DOMAIN_HOST; level--) {
		bool distinct = v->replicas > 1;

		for (u_int a = 0; distinct && a < v->replicas; a++)
			for (u_int b = a + 1; distinct && b < v->replicas; b++)
				distinct = !same_domain(s[a], s[b], level);
		if (distinct)
			return level;
	}
	return MS_DOMAIN_HOST;
}

/* The label two replicas of extent x share at level, or "". */
static const char *shared_label(const ms_vdisk *v, u_int x, u_int level)
{
	const ms_server *s[MS_MAX_REPLICAS];

	if (v->replicas > MS_MAX_REPLICAS || !replicas_of(v, x, s))
		return "";
	for (u_int a = 0; a < v->replicas; a++)
		for (u_int b = a + 1; b < v->replicas; b++)
			if (same_domain(s[a], s[b], level))
				return level == MS_DOMAIN_SITE ? s[a]->site
							       : s[a]->rack;
	return "";
}

/* "extent 3 of column 0: replicas share site s1 (...)" */
static void note_text(const ms_vdisk *v, const ms_spread_note *n, char *buf,
		      size_t size)
{
	u_int x = n->column * v->extents_per_column + n->extent;
	u_int level = (u_int)n->reached + 1;
	const char *label = shared_label(v, x, level);
	const char *wanted = ctl_domain_name(n->wanted);

	snprintf(buf, size,
		 "extent %u of column %u: replicas share %s %s (distinct "
		 "%ss wanted; %s%u %s%s had free extents)",
		 n->extent, n->column, ctl_domain_name(level),
		 label[0] ? label : "(no label)", wanted,
		 n->room == 1 ? "only " : "", n->room, wanted,
		 n->room == 1 ? "" : "s");
}

void ctl_print_spread(const ms_vdisk *v)
{
	u_int count[3] = {0, 0, 0},
	      extents = v->columns * v->extents_per_column;
	char text[MS_LABEL_MAX * 2 + 160];

	if (v->replicas < 2)
		return;
	for (u_int x = 0; x < extents; x++)
		count[ctl_extent_domain(v, x)]++;
	printf("failure domains:     %u extents across sites, %u across racks, "
	       "%u across hosts only\n",
	       count[MS_DOMAIN_SITE], count[MS_DOMAIN_RACK],
	       count[MS_DOMAIN_HOST]);
	for (u_int i = 0; i < v->spread.spread_len; i++) {
		note_text(v, &v->spread.spread_val[i], text, sizeof(text));
		printf("  not spread as widely as the labels allow: %s\n",
		       text);
	}
}

void ctl_json_spread(struct td_json *j, const ms_vdisk *v)
{
	u_int count[3] = {0, 0, 0},
	      extents = v->columns * v->extents_per_column;
	char text[MS_LABEL_MAX * 2 + 160];

	for (u_int x = 0; v->replicas > 1 && x < extents; x++)
		count[ctl_extent_domain(v, x)]++;
	td_json_begin_object(j, "spread");
	td_json_u64(j, "extents_across_sites", count[MS_DOMAIN_SITE]);
	td_json_u64(j, "extents_across_racks", count[MS_DOMAIN_RACK]);
	td_json_u64(j, "extents_across_hosts", count[MS_DOMAIN_HOST]);
	td_json_begin_array(j, "short");
	for (u_int i = 0; i < v->spread.spread_len; i++) {
		const ms_spread_note *n = &v->spread.spread_val[i];
		u_int x = n->column * v->extents_per_column + n->extent;

		note_text(v, n, text, sizeof(text));
		td_json_begin_object(j, NULL);
		td_json_u64(j, "column", n->column);
		td_json_u64(j, "extent", n->extent);
		td_json_str(j, "reached", ctl_domain_name(n->reached));
		td_json_str(j, "wanted", ctl_domain_name(n->wanted));
		td_json_u64(j, "room", n->room);
		td_json_str(j, "shared",
			    shared_label(v, x, (u_int)n->reached + 1));
		td_json_str(j, "message", text);
		td_json_end_object(j);
	}
	td_json_end_array(j);
	td_json_end_object(j);
}
