/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map-grow.c - a grown map and the old one side by side (issue #21 item
 * 1): where an index kept per slot (or per region) goes when the extents
 * per column grow, and the grown map rebuilt from the map in force plus
 * the added extents of a grown map written earlier (MAP.grow).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "drivers/stripe/map/map-int.h"

uint64_t stripe_map_grow_index(uint64_t index, uint32_t old_per_column,
			       uint32_t new_per_column, uint32_t per_extent)
{
	uint64_t extent = index / per_extent, within = index % per_extent;
	uint64_t c = extent / old_per_column, j = extent % old_per_column;

	return (c * new_per_column + j) * per_extent + within;
}

size_t stripe_map_grow_slot(const struct stripe_map *old,
			    uint32_t new_per_column, size_t slot)
{
	return (size_t)stripe_map_grow_index(slot, old->extents_per_column,
					     new_per_column, old->replicas);
}

/* The header of side fits cur's disk and grows it; 0 or -EINVAL. */
static int grow_header_ok(const struct stripe_map *cur,
			  const struct stripe_map *side,
			  struct stripe_map_error *err)
{
	if (strcmp(cur->vdisk, side->vdisk))
		return stripe_map_fail(err, 0,
				       "the grown map is of vdisk %s, "
				       "the map of vdisk %s",
				       side->vdisk, cur->vdisk);
	if (cur->columns != side->columns || cur->replicas != side->replicas ||
	    cur->stripe_unit_bytes != side->stripe_unit_bytes ||
	    cur->extent_size_bytes != side->extent_size_bytes ||
	    cur->region_bytes != side->region_bytes)
		return stripe_map_fail(
			err, 0,
			"the grown map's geometry (columns, replicas, stripe "
			"unit, extent or region size) differs from the map's");
	if (side->size_bytes <= cur->size_bytes ||
	    side->extents_per_column < cur->extents_per_column)
		return stripe_map_fail(err, 0,
				       "the grown map (%" PRIu64
				       " bytes) does not grow the map "
				       "(%" PRIu64 " bytes)",
				       side->size_bytes, cur->size_bytes);
	return 0;
}

/*
 * The index in g->servers of side's server s (by target and LUN),
 * appended when g does not name it yet (g has room for every server of
 * side).
 */
static uint32_t grow_server(struct stripe_map *g, const struct stripe_map *side,
			    uint32_t s)
{
	const struct stripe_map_server *ms = &side->servers[s];

	for (uint32_t i = 0; i < g->nr_servers; i++)
		if (!strcmp(g->servers[i].target, ms->target) &&
		    g->servers[i].lun == ms->lun)
			return i;
	g->servers[g->nr_servers] = *ms;
	return g->nr_servers++;
}

/* Slot i of cur into slot k of g: replica, marks, move and all. */
static void grow_copy_slot(struct stripe_map *g, size_t k,
			   const struct stripe_map *cur, size_t i)
{
	size_t words = stripe_map_region_words(cur);

	g->slots[k] = cur->slots[i];
	g->moves[k] = cur->moves[i];
	memcpy(stripe_map_slot_dirty(g, k), stripe_map_slot_dirty(cur, i),
	       words * sizeof(uint64_t));
	memcpy(stripe_map_move_dirty(g, k), stripe_map_move_dirty(cur, i),
	       words * sizeof(uint64_t));
}

/* Slot k of side (an added extent) into g; its server mapped to g's. */
static void grow_new_slot(struct stripe_map *g, const struct stripe_map *side,
			  size_t k)
{
	size_t words = stripe_map_region_words(side);

	g->slots[k] = side->slots[k];
	g->slots[k].server = grow_server(g, side, side->slots[k].server);
	memcpy(stripe_map_slot_dirty(g, k), stripe_map_slot_dirty(side, k),
	       words * sizeof(uint64_t));
}

/* g's header and room: side's geometry, cur's master. */
static int grow_alloc(struct stripe_map *g, const struct stripe_map *cur,
		      const struct stripe_map *side)
{
	int ret;

	*g = (struct stripe_map){0};
	memcpy(g->vdisk, cur->vdisk, sizeof(g->vdisk));
	memcpy(g->master, cur->master, sizeof(g->master));
	g->size_bytes = side->size_bytes;
	g->stripe_unit_bytes = cur->stripe_unit_bytes;
	g->extent_size_bytes = cur->extent_size_bytes;
	g->columns = cur->columns;
	g->extents_per_column = side->extents_per_column;
	g->replicas = cur->replicas;
	g->region_bytes = cur->region_bytes;
	if (cur->nr_servers + side->nr_servers > STRIPE_MAP_MAX_SERVERS)
		return -EINVAL;
	if ((ret = stripe_map_alloc(g, cur->nr_servers + side->nr_servers)))
		return ret;
	memcpy(g->servers, cur->servers, cur->nr_servers * sizeof(*g->servers));
	g->nr_servers = cur->nr_servers;
	return 0;
}

int stripe_map_grow_merge(const struct stripe_map *cur,
			  const struct stripe_map *side, struct stripe_map *out,
			  struct stripe_map_error *err)
{
	struct stripe_map g;
	int ret;

	*out = (struct stripe_map){0};
	if ((ret = grow_header_ok(cur, side, err)))
		return ret;
	if ((ret = grow_alloc(&g, cur, side)))
		return ret == -ENOMEM ? ret
				      : stripe_map_fail(err, 0,
							"the grown map names "
							"too many servers");
	for (uint32_t c = 0; c < g.columns; c++)
		for (uint32_t j = 0; j < g.extents_per_column; j++)
			for (uint32_t r = 0; r < g.replicas; r++) {
				size_t k = stripe_map_slot_index(&g, c, j, r);

				if (j < cur->extents_per_column)
					grow_copy_slot(&g, k, cur,
						       stripe_map_slot_index(
							       cur, c, j, r));
				else
					grow_new_slot(&g, side, k);
			}
	if ((ret = stripe_map_check(&g, err))) {
		stripe_map_free(&g);
		return ret;
	}
	*out = g;
	return 0;
}

void stripe_map_grow_path(const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", path, STRIPE_MAP_GROW_SUFFIX);
}

/* Remove side (and make it durable); the outcome given, or -errno. */
static int grow_remove(const char *side, enum stripe_map_grow_outcome *outcome,
		       enum stripe_map_grow_outcome what,
		       struct stripe_map_error *err)
{
	int ret = unlink(side) ? -errno : stripe_map_sync_dir(side);

	if (ret && ret != -ENOENT) {
		err->line = 0;
		err->names_file = true;
		snprintf(err->reason, sizeof(err->reason),
			 "cannot remove %s: %s", side, strerror(-ret));
		return ret;
	}
	*outcome = what;
	return 0;
}

int stripe_map_grow_discard(const char *path)
{
	char side[PATH_MAX];

	stripe_map_grow_path(path, side, sizeof(side));
	if (unlink(side))
		return errno == ENOENT ? 0 : -errno;
	return stripe_map_sync_dir(side);
}

int stripe_map_grow_adopt(const char *path, struct stripe_map *m, int *lock_fd,
			  enum stripe_map_grow_outcome *outcome,
			  struct stripe_map_error *err)
{
	char side_path[PATH_MAX];
	struct stripe_map side, g;
	int ret;

	*outcome = STRIPE_MAP_GROW_NONE;
	stripe_map_grow_path(path, side_path, sizeof(side_path));
	ret = stripe_map_read(side_path, &side, err);
	if (ret == -ENOENT)
		return 0;
	if (ret == -EINVAL || ret == -EFBIG)
		return grow_remove(side_path, outcome, STRIPE_MAP_GROW_REFUSED,
				   err);
	if (ret) {
		*outcome = STRIPE_MAP_GROW_KEPT;
		return 0;
	}
	if (side.size_bytes <= m->size_bytes) {
		stripe_map_free(&side);
		return grow_remove(side_path, outcome, STRIPE_MAP_GROW_STALE,
				   err);
	}
	ret = stripe_map_grow_merge(m, &side, &g, err);
	stripe_map_free(&side);
	if (ret == -EINVAL) {
		struct stripe_map_error why = *err;

		ret = grow_remove(side_path, outcome, STRIPE_MAP_GROW_REFUSED,
				  err);
		if (!ret)
			*err = why;
		return ret;
	}
	if (ret)
		return ret;
	if ((ret = stripe_map_rewrite(path, &g, lock_fd, err))) {
		stripe_map_free(&g);
		return ret;
	}
	stripe_map_free(m);
	*m = g;
	/* The map is grown: a PATH.grow left by a failure here is stale. */
	grow_remove(side_path, outcome, STRIPE_MAP_GROW_ADOPTED, err);
	*outcome = STRIPE_MAP_GROW_ADOPTED;
	return 0;
}
