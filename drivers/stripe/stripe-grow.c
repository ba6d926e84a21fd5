/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-grow.c - growing a served disk (issue #21 item 1): the driver
 * op refresh_size (tap-ctl resize, stripe-ctl vdisk resize) takes the
 * grown map PATH.grow that `stripe-ctl vdisk resize` wrote, while the
 * disk is served.
 *
 * Everything or nothing, in the event loop: the merged map (the map in
 * force plus PATH.grow's added extents, stripe_map_grow_merge) is
 * checked, new servers connected (as a move connects them), the servers'
 * LUNs checked against the grown extents, the map rewritten through the
 * stale writer's lock fd with every per-slot state moved to its grown
 * index (stripe_stale_grow); only then, with nothing left that can fail,
 * the map, the layout, the servers' counts and the activity log are
 * switched, and PATH.grow removed.  Requests in flight name their place
 * by column and extent (stripe_req), not by slot index: they survive the
 * switch.  A resync, scrub, move or hand-over under way refuses it
 * (-EBUSY; the file stays for the next resize or open).  The rewrite
 * waits on the disk once (fsync and rename, as open does): resize is a
 * rare administrative step.  Its messages skip the vbd's rate limit
 * (a refusal must be seen even while servers are failing).
 * doc/stripe-driver.md "Growing while serving".
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "drivers/stripe/stripe-int.h"

/* Why the disk cannot grow now, or NULL. */
static const char *grow_busy(const struct stripe_dev *dev)
{
	const struct stripe_map *m = &dev->map;

	if (dev->resync.state == STRIPE_RESYNC_RUNNING)
		return "a resync runs";
	if (dev->scrub.state == STRIPE_SCRUB_RUNNING)
		return "a verify (scrub) runs";
	if (stripe_lease_handover_busy(dev))
		return "the disk is being (or was) handed over";
	for (size_t i = 0; i < stripe_map_nr_slots(m); i++)
		if (m->moves[i].active)
			return "a move is under way";
	return NULL;
}

/* Remove PATH.grow (taken, stale or inapplicable); says when it cannot. */
static void grow_discard(struct stripe_dev *dev, const char *side)
{
	int ret = stripe_map_grow_discard(dev->path);

	/* A PATH.grow left behind is stale: removed by the next resize. */
	if (ret)
		td_warn("stripe: cannot remove %s: %s; it is removed as "
			"stale at the next resize or open",
			side, strerror(-ret));
}

/* Connect g's servers that the disk does not have yet (as moves do). */
static int grow_servers(struct stripe_dev *dev, struct stripe_map *g)
{
	for (uint32_t i = dev->map.nr_servers; i < g->nr_servers; i++) {
		uint32_t idx;
		int ret = stripe_server_add(dev, &g->servers[i], &idx);

		if (ret) {
			td_err("stripe: %s: cannot add server %s lun %u "
			       "of the grown map: %s",
			       dev->path, g->servers[i].target,
			       g->servers[i].lun, strerror(-ret));
			return ret;
		}
		if (idx != i)
			return -EINVAL; /* merge and add disagree: a bug */
		g->servers[i] = dev->map.servers[i];
	}
	return 0;
}

/*
 * Each server's blocks needed and usable slots under g (need, live:
 * nr_servers each); -ENOSPC when a checked LUN is too small for them.
 */
static int grow_counts(struct stripe_dev *dev, const struct stripe_map *g,
		       uint64_t *need, uint32_t *live)
{
	for (size_t k = 0; k < stripe_map_nr_slots(g); k++) {
		const struct stripe_map_replica *rep = &g->slots[k];
		const struct stripe_server *srv = &dev->servers[rep->server];
		uint64_t end =
			rep->lba + g->extent_size_bytes / srv->block_size;

		if (end > need[rep->server])
			need[rep->server] = end;
		live[rep->server] += stripe_slot_usable(g, k);
	}
	for (uint32_t s = 0; s < dev->nr_servers; s++) {
		const struct stripe_server *srv = &dev->servers[s];
		uint64_t nr;

		if (srv->gate != STRIPE_GATE_OK)
			continue; /* the gate checks need_blocks later */
		nr = srv->ops->nr_blocks(srv->be);
		if (nr < need[s]) {
			td_err("stripe: %s: server %u's LUN has %" PRIu64
			       " blocks, the grown map needs %" PRIu64,
			       dev->path, s, nr, need[s]);
			return -ENOSPC;
		}
	}
	return 0;
}

/* Nothing can fail any more: serve g. */
static void grow_switch(struct stripe_dev *dev, struct stripe_map *g,
			const uint64_t *need, const uint32_t *live)
{
	uint32_t old_j = dev->map.extents_per_column;

	for (uint32_t s = 0; s < dev->nr_servers; s++) {
		if (need[s] > dev->servers[s].need_blocks)
			dev->servers[s].need_blocks = need[s];
		dev->servers[s].live_slots = live[s];
	}
	stripe_al_regrow(dev, old_j, g->extents_per_column);
	stripe_map_free(&dev->map);
	dev->map = *g;
	*g = (struct stripe_map){0};
	stripe_map_layout(&dev->map, &dev->layout);
}

/* Grow the disk to g (merged already); 0, or -errno with nothing changed. */
static int grow_apply(struct stripe_dev *dev, struct stripe_map *g)
{
	struct stripe_map_error err = {0};
	uint64_t *need = NULL;
	uint32_t *live = NULL;
	int ret;

	if ((ret = grow_servers(dev, g)))
		return ret;
	need = calloc(dev->nr_servers, sizeof(*need));
	live = calloc(dev->nr_servers, sizeof(*live));
	if (!need || !live)
		ret = -ENOMEM;
	if (!ret)
		ret = grow_counts(dev, g, need, live);
	if (!ret && (ret = stripe_stale_grow(dev, g, &err)))
		td_err("stripe: %s: cannot write the grown map: %s; the "
		       "disk keeps its size",
		       dev->path, err.reason);
	if (!ret)
		grow_switch(dev, g, need, live);
	free(need);
	free(live);
	return ret;
}

/* PATH.grow read into *side: 0, 1 (none), or -errno said. */
static int grow_read(struct stripe_dev *dev, const char *side_path,
		     struct stripe_map *side)
{
	struct stripe_map_error err = {0};
	int ret = stripe_map_read(side_path, side, &err);

	if (ret == -ENOENT)
		return 1;
	if (ret == -EINVAL || ret == -EFBIG) {
		td_err("stripe: %s does not apply (%s): removed; the disk "
		       "keeps its size, run 'stripe-ctl vdisk resize' "
		       "again",
		       side_path, err.reason);
		grow_discard(dev, side_path);
		return -EINVAL;
	}
	if (ret)
		td_err("stripe: cannot read %s: %s; it is kept, the disk "
		       "keeps its size",
		       side_path, err.reason);
	return ret;
}

/* Merge and apply side; 0 (grown, or nothing to grow), -errno said. */
static int grow_take(struct stripe_dev *dev, const char *side_path,
		     const struct stripe_map *side)
{
	struct stripe_map_error err = {0};
	struct stripe_map g;
	uint64_t old_size = dev->map.size_bytes;
	int ret;

	if (side->size_bytes <= dev->map.size_bytes) {
		td_info("stripe: %s was taken already: removed", side_path);
		grow_discard(dev, side_path);
		return 0;
	}
	ret = stripe_map_grow_merge(&dev->map, side, &g, &err);
	if (ret == -EINVAL) {
		td_err("stripe: %s does not apply to the map (%s): "
		       "removed; the disk keeps its size, run "
		       "'stripe-ctl vdisk resize' again",
		       side_path, err.reason);
		grow_discard(dev, side_path);
		return ret;
	}
	if (ret)
		return ret;
	ret = grow_apply(dev, &g);
	stripe_map_free(&g);
	if (ret)
		return ret;
	grow_discard(dev, side_path);
	td_info("stripe: %s: grown from %" PRIu64 " to %" PRIu64
		" bytes while serving (%s taken)",
		dev->path, old_size, dev->map.size_bytes, side_path);
	return 0;
}

int stripe_grow_refresh(struct td_driver *drv, uint64_t *sectors)
{
	struct stripe_dev *dev = drv->data;
	char side_path[PATH_MAX];
	struct stripe_map side;
	const char *why;
	int ret;

	*sectors = dev->map.size_bytes >> TD_SECTOR_SHIFT;
	stripe_map_grow_path(dev->path, side_path, sizeof(side_path));
	if (access(side_path, F_OK))
		return 0; /* no grown map: nothing to grow */
	if (drv->read_only) {
		td_err("stripe: %s: opened read-only: %s is taken by a "
		       "writable open",
		       dev->path, side_path);
		return -EROFS;
	}
	if ((why = grow_busy(dev))) {
		td_err("stripe: %s: cannot grow now: %s; %s stays for the "
		       "next resize or open",
		       dev->path, why, side_path);
		return -EBUSY;
	}
	if ((ret = grow_read(dev, side_path, &side)))
		return ret > 0 ? 0 : ret;
	ret = grow_take(dev, side_path, &side);
	stripe_map_free(&side);
	*sectors = dev->map.size_bytes >> TD_SECTOR_SHIFT;
	return ret;
}
