/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * block-status.c - block status and metadata contexts of a vbd: which
 * driver of the chain answers a context (NBD_CMD_BLOCK_STATUS,
 * NBD_OPT_LIST_META_CONTEXT).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "tapdisk/vbd-int.h"
#include "tapdisk/vbd.h"

/* Most distinct contexts td_vbd_list_contexts reports. */
#define VBD_MAX_CONTEXTS 64

int td_vbd_block_status(struct td_vbd *vbd, const char *ctx, uint64_t sector,
			uint64_t nr_sectors, struct td_extent *ext,
			unsigned int *nr)
{
	uint64_t size = vbd->drivers[0].info.size_sectors;

	if (!*nr || !nr_sectors || sector > size || nr_sectors > size - sector)
		return -ERANGE;
	/* Two files serve the disk: the disk's file's holes say nothing;
	 * everything is data (a backup copies more, never less). */
	if (vbd->snap && vbd_snap_row(vbd->snap) &&
	    !strcmp(ctx, TD_CTX_BASE_ALLOCATION)) {
		ext[0].nr_sectors = nr_sectors;
		ext[0].flags = 0;
		*nr = 1;
		return 0;
	}
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];
		unsigned int room = *nr;
		int err;

		if (!drv->ops->block_status)
			continue;
		err = drv->ops->block_status(drv, ctx, sector, nr_sectors, ext,
					     &room);
		if (err == -ENOENT)
			continue;
		if (!err && (!room || room > *nr))
			return -EIO; /* a driver broke the contract */
		*nr = room;
		return err;
	}
	if (strcmp(ctx, TD_CTX_BASE_ALLOCATION))
		return -ENOENT;
	ext[0].nr_sectors = nr_sectors;
	ext[0].flags = 0;
	*nr = 1;
	return 0;
}

struct ctx_seen {
	char names[VBD_MAX_CONTEXTS][TD_CTX_NAME_MAX];
	unsigned int n;
	void (*add)(const char *name, void *opaque);
	void *opaque;
};

static void add_once(const char *name, void *opaque)
{
	struct ctx_seen *seen = opaque;

	if (strlen(name) >= TD_CTX_NAME_MAX || seen->n == VBD_MAX_CONTEXTS)
		return;
	for (unsigned int i = 0; i < seen->n; i++)
		if (!strcmp(seen->names[i], name))
			return;
	strcpy(seen->names[seen->n++], name);
	seen->add(name, seen->opaque);
}

void td_vbd_list_contexts(struct td_vbd *vbd,
			  void (*add)(const char *name, void *opaque),
			  void *opaque)
{
	struct ctx_seen seen; /* 16 KiB of stack */

	seen.n = 0;
	seen.add = add;
	seen.opaque = opaque;
	add_once(TD_CTX_BASE_ALLOCATION, &seen);
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (drv->ops->list_contexts)
			drv->ops->list_contexts(drv, add_once, &seen);
	}
}
