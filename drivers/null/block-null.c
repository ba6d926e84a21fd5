/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * block-null.c - a disk of a given size that reads zeroes and discards
 * writes.  For benchmarks of everything above the backend.
 *
 * Chain: "null:size=1G" (size takes K/M/G/T binary suffixes; default 1G).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/drivers.h"

#define NULL_DEFAULT_SIZE (1ull << 30)

static int null_open(struct td_driver *drv, const char *args)
{
	uint64_t size = NULL_DEFAULT_SIZE;

	if (*args) {
		if (strncmp(args, "size=", 5) || td_parse_size(args + 5, &size))
			return td_driver_fail(drv, -EINVAL,
					      "null: bad arguments '%s': "
					      "expected size=SIZE (e.g. "
					      "null:size=1G)",
					      args);
	}
	if (size < TD_SECTOR_SIZE || size % TD_SECTOR_SIZE)
		return td_driver_fail(drv, -EINVAL,
				      "null: size %llu is not a positive "
				      "multiple of %u",
				      (unsigned long long)size, TD_SECTOR_SIZE);
	drv->info.size_sectors = size >> TD_SECTOR_SHIFT;
	drv->info.sector_size = TD_SECTOR_SIZE;
	drv->info.features = TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			     TD_FEAT_WRITE_ZEROES;
	return 0;
}

static void null_close(struct td_driver *drv)
{
}

static int null_submit(struct td_driver *drv, struct td_request *req)
{
	if (req->op == TD_OP_READ)
		for (int i = 0; i < req->iovcnt; i++)
			memset(req->iov[i].iov_base, 0, req->iov[i].iov_len);
	td_driver_stat_add(drv, TD_STAT_BACKEND_SUBMITS, 1);
	td_complete(req, 0);
	return 0;
}

/* base:allocation: everything reads as zeroes. */
static int null_block_status(struct td_driver *drv, const char *ctx,
			     uint64_t sector, uint64_t nr_sectors,
			     struct td_extent *ext, unsigned int *nr)
{
	if (strcmp(ctx, TD_CTX_BASE_ALLOCATION))
		return -ENOENT;
	ext[0].nr_sectors = nr_sectors;
	ext[0].flags = TD_EXTENT_ZERO;
	*nr = 1;
	return 0;
}

const struct td_driver_ops td_null_ops = {
	.name = "null",
	.open = null_open,
	.close = null_close,
	.submit = null_submit,
	.block_status = null_block_status,
};
