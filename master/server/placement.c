/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * placement.c - the placement rule described in placement.h.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "master/server/placement.h"

#define MAX_REPLICAS 4 /* MS_MAX_REPLICAS; bounds the per-extent scratch */
#define NR_LEVELS    3
#define NO_DOMAIN    UINT32_MAX /* no label at this level */

struct placer {
	struct master_place_server *servers;
	uint32_t n;
	uint32_t *dom[NR_LEVELS]; /* domain number of each server per level */
	uint32_t *free;		  /* working copy of the free counts */
	uint8_t *seen;		  /* scratch of n entries (count_room) */
	uint8_t wanted;		  /* the widest level the labels offer */
	bool balance;		  /* pass 2: always the most free */
};

struct order_ctx {
	const struct master_place_server *s;
	int level;
};

static const char *label(const char *l)
{
	return l ? l : "";
}

/* The server's key at a level compared: host; site; (site, rack). */
static int cmp_level(const struct master_place_server *a,
		     const struct master_place_server *b, int level)
{
	int c;

	if (level == MASTER_DOMAIN_HOST)
		return strcmp(label(a->host), label(b->host));
	c = strcmp(label(a->site), label(b->site));
	return c || level == MASTER_DOMAIN_SITE
		       ? c
		       : strcmp(label(a->rack), label(b->rack));
}

/* qsort_r order of server indices by their key at one level. */
static int cmp_index(const void *a, const void *b, void *arg)
{
	const struct order_ctx *ctx = arg;

	return cmp_level(&ctx->s[*(const uint32_t *)a],
			 &ctx->s[*(const uint32_t *)b], ctx->level);
}

static bool has_label(const struct master_place_server *s, int level)
{
	if (s->gone) /* its host still counts: replicas stay apart */
		return level == MASTER_DOMAIN_HOST;
	if (level == MASTER_DOMAIN_SITE)
		return label(s->site)[0] != '\0';
	return level == MASTER_DOMAIN_HOST || label(s->rack)[0] != '\0';
}

/*
 * Number the domains of one level: dom[i] == dom[k] when servers i and k
 * share one, NO_DOMAIN when i has no label there.  Returns how many.
 */
static uint32_t number_level(struct placer *pl, int level, uint32_t *order)
{
	struct order_ctx ctx = {pl->servers, level};
	uint32_t nr = 0, last = NO_DOMAIN; /* the last labelled one */

	for (uint32_t i = 0; i < pl->n; i++)
		order[i] = i;
	qsort_r(order, pl->n, sizeof(*order), cmp_index, &ctx);
	for (uint32_t i = 0; i < pl->n; i++) {
		uint32_t k = order[i];

		if (!has_label(&pl->servers[k], level)) {
			pl->dom[level][k] = NO_DOMAIN;
			continue;
		}
		if (last != NO_DOMAIN &&
		    !cmp_level(&pl->servers[last], &pl->servers[k], level))
			pl->dom[level][k] = pl->dom[level][last];
		else
			pl->dom[level][k] = nr++;
		last = k;
	}
	return nr;
}

/* Number every level's domains and choose the level wanted. */
static int number_domains(struct placer *pl, uint32_t replicas)
{
	uint32_t *order = malloc(pl->n * sizeof(*order));
	uint32_t count[NR_LEVELS];

	if (!order)
		return -ENOMEM;
	for (int level = 0; level < NR_LEVELS; level++)
		count[level] = number_level(pl, level, order);
	free(order);
	pl->wanted = MASTER_DOMAIN_HOST;
	for (int level = MASTER_DOMAIN_SITE; replicas > 1 && level > 0; level--)
		if (count[level] >= replicas) {
			pl->wanted = (uint8_t)level;
			break;
		}
	return 0;
}

/*
 * May server i take replica r of the extent whose replicas so far are at,
 * at this level: free, on a host of its own, in a domain of its own?
 */
static bool allowed(const struct placer *pl, uint32_t i, const uint32_t *at,
		    uint32_t r, int level)
{
	const uint32_t *host = pl->dom[MASTER_DOMAIN_HOST];
	const uint32_t *dom = pl->dom[level];

	if (!pl->free[i] || dom[i] == NO_DOMAIN)
		return false;
	for (uint32_t q = 0; q < r; q++)
		if (host[at[q]] == host[i] || dom[at[q]] == dom[i])
			return false;
	return true;
}

/* The allowed server with the most free extents, first from p on a tie. */
static int most_free(const struct placer *pl, uint32_t p, const uint32_t *at,
		     uint32_t r, int level)
{
	int best = -1;

	for (uint32_t k = 0; k < pl->n; k++) {
		uint32_t i = (p + k) % pl->n;

		if (allowed(pl, i, at, r, level) &&
		    (best < 0 || pl->free[i] > pl->free[best]))
			best = (int)i;
	}
	return best;
}

/* Domains of level wanted that still have a server with free extents. */
static uint32_t count_room(struct placer *pl)
{
	const uint32_t *dom = pl->dom[pl->wanted];
	uint32_t room = 0;

	memset(pl->seen, 0, pl->n);
	for (uint32_t i = 0; i < pl->n; i++)
		if (pl->free[i] && dom[i] != NO_DOMAIN && !pl->seen[dom[i]]) {
			pl->seen[dom[i]] = 1;
			room++;
		}
	return room;
}

/* Place one extent's replicas at one level; undone when one finds none. */
static bool place_level(struct placer *pl, uint32_t c, uint32_t replicas,
			uint32_t *at, int level)
{
	for (uint32_t r = 0; r < replicas; r++) {
		uint32_t p = (uint32_t)(((uint64_t)c * replicas + r) % pl->n);
		int i = !pl->balance && allowed(pl, p, at, r, level)
				? (int)p
				: most_free(pl, p, at, r, level);

		if (i < 0) {
			while (r--)
				pl->free[at[r]]++;
			return false;
		}
		at[r] = (uint32_t)i;
		pl->free[i]--;
	}
	return true;
}

/* Place one extent at the widest level it can reach; false when none. */
static bool place_extent(struct placer *pl, uint32_t c, uint32_t replicas,
			 uint32_t *at, struct master_place_spread *sp)
{
	for (int level = pl->wanted; level >= 0; level--) {
		uint32_t room = level < pl->wanted ? count_room(pl) : 0;

		if (!place_level(pl, c, replicas, at, level))
			continue;
		if (sp)
			*sp = (struct master_place_spread){
				.reached = (uint8_t)level,
				.wanted = pl->wanted,
				.room = room};
		return true;
	}
	return false;
}

/* One pass over every extent; false when some replica found no server. */
static bool place_pass(struct placer *pl, uint32_t columns, uint32_t per_col,
		       uint32_t replicas, uint32_t *slots,
		       struct master_place_spread *spread)
{
	size_t extent = 0;

	for (uint32_t c = 0; c < columns; c++)
		for (uint32_t j = 0; j < per_col; j++, extent++)
			if (!place_extent(pl, c, replicas,
					  &slots[extent * replicas],
					  spread ? &spread[extent] : NULL))
				return false;
	return true;
}

static void reset_free(struct placer *pl)
{
	for (uint32_t i = 0; i < pl->n; i++)
		pl->free[i] = pl->servers[i].free;
}

static int placer_init(struct placer *pl, uint32_t replicas)
{
	bool ok = true;

	for (int level = 0; level < NR_LEVELS; level++)
		ok &= !!(pl->dom[level] = malloc(pl->n * sizeof(uint32_t)));
	pl->free = malloc(pl->n * sizeof(*pl->free));
	pl->seen = malloc(pl->n);
	if (!ok || !pl->free || !pl->seen)
		return -ENOMEM;
	return number_domains(pl, replicas);
}

static void placer_free(struct placer *pl)
{
	for (int level = 0; level < NR_LEVELS; level++)
		free(pl->dom[level]);
	free(pl->free);
	free(pl->seen);
}

int master_place_spread(struct master_place_server *servers,
			uint32_t nr_servers, uint32_t columns,
			uint32_t extents_per_column, uint32_t replicas,
			uint32_t *slots, struct master_place_spread *spread)
{
	struct placer pl = {.servers = servers, .n = nr_servers};
	uint64_t need = (uint64_t)columns * extents_per_column * replicas;
	uint64_t have = 0;
	bool ok = false;
	int ret;

	if (!columns || !extents_per_column || !replicas ||
	    replicas > MAX_REPLICAS)
		return -EINVAL;
	for (uint32_t i = 0; i < nr_servers; i++)
		have += servers[i].free;
	if (!nr_servers || have < need)
		return -ENOSPC;
	ret = placer_init(&pl, replicas);
	for (int pass = 0; !ret && pass < 2 && !ok; pass++) {
		pl.balance = pass == 1;
		reset_free(&pl);
		ok = place_pass(&pl, columns, extents_per_column, replicas,
				slots, spread);
	}
	if (!ret && !ok)
		ret = -ENOSPC;
	for (uint32_t i = 0; !ret && i < nr_servers; i++)
		servers[i].free = pl.free[i];
	placer_free(&pl);
	return ret;
}

int master_place(struct master_place_server *servers, uint32_t nr_servers,
		 uint32_t columns, uint32_t extents_per_column,
		 uint32_t replicas, uint32_t *slots)
{
	return master_place_spread(servers, nr_servers, columns,
				   extents_per_column, replicas, slots, NULL);
}

/* The widest level at which the servers of set[] are pairwise in
 * distinct domains (gone ones left out); host when none is. */
static int set_level(const struct placer *pl, const uint32_t *set, uint32_t k)
{
	for (int level = pl->wanted; level > MASTER_DOMAIN_HOST; level--) {
		bool ok = true;

		for (uint32_t a = 0; ok && a < k; a++)
			for (uint32_t b = a + 1; ok && b < k; b++) {
				const uint32_t *dom = pl->dom[level];

				if (pl->servers[set[a]].gone ||
				    pl->servers[set[b]].gone)
					continue;
				ok = dom[set[a]] != NO_DOMAIN &&
				     dom[set[a]] != dom[set[b]];
			}
		if (ok)
			return level;
	}
	return MASTER_DOMAIN_HOST;
}

int master_place_one(struct master_place_server *servers, uint32_t nr_servers,
		     const uint32_t *fixed, uint32_t nr_fixed,
		     uint32_t replicas, uint32_t exclude, uint32_t *chosen,
		     struct master_place_spread *sp)
{
	struct placer pl = {.servers = servers, .n = nr_servers};
	uint32_t at[MASTER_PLACE_MAX_FIXED + 1];
	int ret = -ENOSPC, i = -1, level;

	if (!nr_servers || !replicas || replicas > MAX_REPLICAS ||
	    nr_fixed > MASTER_PLACE_MAX_FIXED)
		return nr_servers ? -EINVAL : -ENOSPC;
	for (uint32_t q = 0; q < nr_fixed; q++)
		if ((at[q] = fixed[q]) >= nr_servers)
			return -EINVAL;
	if (placer_init(&pl, replicas)) {
		placer_free(&pl);
		return -ENOMEM;
	}
	reset_free(&pl);
	if (exclude < nr_servers)
		pl.free[exclude] = 0;
	for (level = pl.wanted; i < 0 && level >= 0; level--) {
		uint32_t room = count_room(&pl);

		if ((i = most_free(&pl, 0, at, nr_fixed, level)) < 0)
			continue;
		at[nr_fixed] = (uint32_t)i;
		if (sp)
			*sp = (struct master_place_spread){
				.reached = (uint8_t)set_level(&pl, at,
							      nr_fixed + 1),
				.wanted = pl.wanted,
				.room = room};
	}
	if (i >= 0) {
		servers[i].free--;
		*chosen = (uint32_t)i;
		ret = 0;
	}
	placer_free(&pl);
	return ret;
}
