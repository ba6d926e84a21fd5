/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mock-driver.c - see mock-driver.h.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "tests/unit/mock-driver.h"

struct mock_ctl mock;

void mock_reset(void)
{
	memset(&mock, 0, sizeof(mock));
	mock.size_sectors = 2048;
	mock.sector_size = TD_SECTOR_SIZE;
	mock.features = TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			TD_FEAT_WRITE_ZEROES;
}

static int mock_open(struct td_driver *drv, const char *args)
{
	if (mock.open_err)
		return mock.open_err;
	drv->info.size_sectors = mock.size_sectors;
	drv->info.sector_size = mock.sector_size;
	drv->info.features = mock.features;
	drv->info.boundary_sectors = mock.boundary_sectors;
	drv->info.max_io_sectors = mock.max_io_sectors;
	return 0;
}

/* tap-ctl resize: the size is mock.size_sectors now (the filter has none). */
static int mock_refresh_size(struct td_driver *drv, uint64_t *sectors)
{
	if (mock.refresh_err)
		return mock.refresh_err;
	*sectors = mock.size_sectors;
	return 0;
}

static void mock_close(struct td_driver *drv)
{
	mock.closed = true;
}

static int mock_submit(struct td_driver *drv, struct td_request *req)
{
	struct mock_seen *s;

	if (mock.nr_seen < MOCK_MAX_SEEN) {
		s = &mock.seen[mock.nr_seen++];
		s->op = req->op;
		s->flags = req->flags;
		s->sector = req->sector;
		s->nr_sectors = req->nr_sectors;
		s->iovcnt = req->iovcnt;
		s->layer = drv->layer;
		for (int i = 0; i < req->iovcnt && i < MOCK_SEEN_IOV; i++)
			s->iov[i] = req->iov[i];
	}
	if (mock.submit_err)
		return mock.submit_err;
	if (mock.hold) {
		mock.held[mock.nr_held++] = req;
		return 0;
	}
	td_complete(req, mock.complete_err);
	if (mock.complete_twice)
		td_complete(req, -EIO);
	return 0;
}

static void mock_unplug(struct td_driver *drv)
{
	mock.unplugs++;
}

void mock_complete_held(unsigned int i, int err)
{
	td_complete(mock.held[i], err);
}

const struct td_driver_ops mock_ops = {
	.name = "mock",
	.dev_size = 16,
	.req_size = 8,
	.open = mock_open,
	.refresh_size = mock_refresh_size,
	.close = mock_close,
	.submit = mock_submit,
	.unplug = mock_unplug,
};

/* A filter that forwards every request unchanged. */
static int filter_open(struct td_driver *drv, const char *args)
{
	return 0;
}

static void filter_close(struct td_driver *drv)
{
}

static void filter_done(struct td_request *child, int err, void *opaque)
{
	td_complete(opaque, err);
}

static int filter_submit(struct td_driver *drv, struct td_request *req)
{
	struct td_request *child = td_request_get(drv);

	if (!child)
		return -EBUSY;
	child->op = req->op;
	child->flags = req->flags;
	child->sector = req->sector;
	child->nr_sectors = req->nr_sectors;
	child->iov = req->iov;
	child->iovcnt = req->iovcnt;
	mock.filter_forwards++;
	td_forward(drv, child, filter_done, req);
	return 0;
}

const struct td_driver_ops mock_filter_ops = {
	.name = "mockfilter",
	.flags = TD_DRV_FILTER,
	.open = filter_open,
	.close = filter_close,
	.submit = filter_submit,
};

const struct td_driver_ops *const mock_table[] = {
	&mock_ops,
	&mock_filter_ops,
	NULL,
};
