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

struct placer {
	struct master_place_server *servers;
	uint32_t n;
	uint32_t *host; /* host number of each server (equal addresses) */
	uint32_t *free; /* working copy of the free counts */
	bool balance;	/* pass 2: always the most free */
};

/* qsort_r order of server indices by address. */
static int cmp_address(const void *a, const void *b, void *ctx)
{
	const struct master_place_server *s = ctx;

	return strcmp(s[*(const uint32_t *)a].address,
		      s[*(const uint32_t *)b].address);
}

/* Number the hosts: host[i] == host[k] when servers i and k share one. */
static int number_hosts(struct placer *pl)
{
	uint32_t *order = malloc(pl->n * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (uint32_t i = 0; i < pl->n; i++)
		order[i] = i;
	qsort_r(order, pl->n, sizeof(*order), cmp_address, pl->servers);
	for (uint32_t i = 0, host = 0; i < pl->n; i++) {
		if (i && cmp_address(&order[i - 1], &order[i], pl->servers))
			host++;
		pl->host[order[i]] = host;
	}
	free(order);
	return 0;
}

/* May server i take replica r of the extent whose replicas so far are at? */
static bool allowed(const struct placer *pl, uint32_t i, const uint32_t *at,
		    uint32_t r)
{
	if (!pl->free[i])
		return false;
	for (uint32_t q = 0; q < r; q++)
		if (pl->host[at[q]] == pl->host[i])
			return false;
	return true;
}

/* The allowed server with the most free extents, first from p on a tie. */
static int most_free(const struct placer *pl, uint32_t p, const uint32_t *at,
		     uint32_t r)
{
	int best = -1;

	for (uint32_t k = 0; k < pl->n; k++) {
		uint32_t i = (p + k) % pl->n;

		if (allowed(pl, i, at, r) &&
		    (best < 0 || pl->free[i] > pl->free[best]))
			best = (int)i;
	}
	return best;
}

/* One pass over every slot; false when some replica found no server. */
static bool place_pass(struct placer *pl, uint32_t columns, uint32_t per_col,
		       uint32_t replicas, uint32_t *slots)
{
	size_t slot = 0;

	for (uint32_t c = 0; c < columns; c++)
		for (uint32_t j = 0; j < per_col; j++) {
			uint32_t *at = &slots[slot];

			for (uint32_t r = 0; r < replicas; r++, slot++) {
				uint32_t p =
					(uint32_t)(((uint64_t)c * replicas +
						    r) %
						   pl->n);
				int i = !pl->balance && allowed(pl, p, at, r)
						? (int)p
						: most_free(pl, p, at, r);

				if (i < 0)
					return false;
				at[r] = (uint32_t)i;
				pl->free[i]--;
			}
		}
	return true;
}

static void reset_free(struct placer *pl)
{
	for (uint32_t i = 0; i < pl->n; i++)
		pl->free[i] = pl->servers[i].free;
}

int master_place(struct master_place_server *servers, uint32_t nr_servers,
		 uint32_t columns, uint32_t extents_per_column,
		 uint32_t replicas, uint32_t *slots)
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
	pl.host = malloc(nr_servers * sizeof(*pl.host));
	pl.free = malloc(nr_servers * sizeof(*pl.free));
	ret = pl.host && pl.free ? number_hosts(&pl) : -ENOMEM;
	for (int pass = 0; !ret && pass < 2 && !ok; pass++) {
		pl.balance = pass == 1;
		reset_free(&pl);
		ok = place_pass(&pl, columns, extents_per_column, replicas,
				slots);
	}
	if (!ret && !ok)
		ret = -ENOSPC;
	for (uint32_t i = 0; !ret && i < nr_servers; i++)
		servers[i].free = pl.free[i];
	free(pl.host);
	free(pl.free);
	return ret;
}
