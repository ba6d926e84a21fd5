/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_block-status.c - td_vbd_block_status and td_vbd_list_contexts:
 * which driver of a chain answers a context, the default answer for
 * base:allocation, the range checks, drivers that break the contract,
 * and the list of contexts without duplicates.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/loop.h"
#include "tapdisk/vbd.h"

#define DISK_SECTORS 2048

static struct {
	int low_calls, filt_calls;
	int low_err;	     /* "low" answers this for base:allocation */
	unsigned int low_nr; /* ... with this many extents (0: as room) */
	uint64_t sector, nr_sectors; /* what "low" was asked */
} st;

/* "low": base:allocation as 16-sector extents alternating data and
 * hole, and the bitmap "qemu:dirty-bitmap:low". */
static int low_open(struct td_driver *drv, const char *args)
{
	drv->info.size_sectors = DISK_SECTORS;
	drv->info.sector_size = TD_SECTOR_SIZE;
	return 0;
}

static void low_close(struct td_driver *drv)
{
}

static int low_submit(struct td_driver *drv, struct td_request *req)
{
	td_complete(req, 0);
	return 0;
}

static int low_block_status(struct td_driver *drv, const char *ctx,
			    uint64_t sector, uint64_t nr_sectors,
			    struct td_extent *ext, unsigned int *nr)
{
	st.low_calls++;
	st.sector = sector;
	st.nr_sectors = nr_sectors;
	if (!strcmp(ctx, "qemu:dirty-bitmap:low")) {
		ext[0].nr_sectors = nr_sectors;
		ext[0].flags = TD_EXTENT_DIRTY;
		*nr = 1;
		return 0;
	}
	if (strcmp(ctx, TD_CTX_BASE_ALLOCATION))
		return -ENOENT;
	if (st.low_err)
		return st.low_err;
	if (st.low_nr) { /* a broken driver: *nr as told */
		*nr = st.low_nr;
		return 0;
	}
	for (unsigned int i = 0; i < *nr; i++) {
		ext[i].nr_sectors = 16;
		ext[i].flags = i % 2 ? TD_EXTENT_HOLE | TD_EXTENT_ZERO : 0;
	}
	return 0;
}

static void low_list(struct td_driver *drv,
		     void (*add)(const char *name, void *opaque), void *opaque)
{
	add(TD_CTX_BASE_ALLOCATION, opaque); /* listed once all the same */
	add("qemu:dirty-bitmap:low", opaque);
}

static const struct td_driver_ops low_ops = {
	.name = "low",
	.open = low_open,
	.close = low_close,
	.submit = low_submit,
	.block_status = low_block_status,
	.list_contexts = low_list,
};

/* "plain": no block status at all. */
static const struct td_driver_ops plain_ops = {
	.name = "plain",
	.open = low_open,
	.close = low_close,
	.submit = low_submit,
};

/* "filt": a filter with its own bitmap "qemu:dirty-bitmap:f". */
static int filt_open(struct td_driver *drv, const char *args)
{
	return 0;
}

static void filt_done(struct td_request *child, int err, void *opaque)
{
	td_complete(opaque, err);
}

static int filt_submit(struct td_driver *drv, struct td_request *req)
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
	td_forward(drv, child, filt_done, req);
	return 0;
}

static int filt_block_status(struct td_driver *drv, const char *ctx,
			     uint64_t sector, uint64_t nr_sectors,
			     struct td_extent *ext, unsigned int *nr)
{
	st.filt_calls++;
	if (strcmp(ctx, "qemu:dirty-bitmap:f"))
		return -ENOENT;
	ext[0].nr_sectors = 1;
	ext[0].flags = TD_EXTENT_DIRTY;
	*nr = 1;
	return 0;
}

static void filt_list(struct td_driver *drv,
		      void (*add)(const char *name, void *opaque), void *opaque)
{
	add("qemu:dirty-bitmap:f", opaque);
	add("qemu:dirty-bitmap:low", opaque); /* again: listed once */
}

static const struct td_driver_ops filt_ops = {
	.name = "filt",
	.flags = TD_DRV_FILTER,
	.open = filt_open,
	.close = low_close,
	.submit = filt_submit,
	.block_status = filt_block_status,
	.list_contexts = filt_list,
};

static const struct td_driver_ops *const table[] = {&low_ops, &plain_ops,
						    &filt_ops, NULL};

static struct td_loop *loop;
static struct td_vbd *vbd;

static void open_chain(const char *chain)
{
	struct td_vbd_params vp = {.name = "bs", .chain = chain};

	memset(&st, 0, sizeof(st));
	assert_int_equal(td_loop_create(&loop), 0);
	assert_int_equal(td_vbd_open(loop, table, &vp, &vbd), 0);
}

static void close_chain(void)
{
	assert_int_equal(td_vbd_close(vbd), 0);
	td_loop_destroy(loop);
}

static void test_driver_answers(void **state)
{
	struct td_extent ext[8];
	unsigned int nr = 8;

	open_chain("low");
	assert_int_equal(td_vbd_block_status(vbd, TD_CTX_BASE_ALLOCATION, 32,
					     64, ext, &nr),
			 0);
	assert_int_equal(nr, 8);
	assert_int_equal(st.sector, 32);
	assert_int_equal(st.nr_sectors, 64);
	assert_int_equal(ext[0].nr_sectors, 16);
	assert_int_equal(ext[0].flags, 0);
	assert_int_equal(ext[1].flags, 3); /* NBD_STATE_HOLE | ZERO */
	nr = 1;
	assert_int_equal(td_vbd_block_status(vbd, TD_CTX_BASE_ALLOCATION, 0,
					     DISK_SECTORS, ext, &nr),
			 0);
	assert_int_equal(nr, 1);
	/* The driver's error is the answer. */
	st.low_err = -EIO;
	nr = 8;
	assert_int_equal(td_vbd_block_status(vbd, TD_CTX_BASE_ALLOCATION, 0, 8,
					     ext, &nr),
			 -EIO);
	/* A context no driver has. */
	assert_int_equal(td_vbd_block_status(vbd, "qemu:dirty-bitmap:nosuch", 0,
					     8, ext, &nr),
			 -ENOENT);
	close_chain();
}

static void test_ranges(void **state)
{
	static const struct {
		uint64_t sector, nr_sectors;
		unsigned int room;
		int want;
	} rows[] = {
		{0, DISK_SECTORS, 8, 0},
		{DISK_SECTORS - 1, 1, 8, 0},
		{DISK_SECTORS - 1, 2, 8, -ERANGE},
		{DISK_SECTORS, 1, 8, -ERANGE},
		{0, 0, 8, -ERANGE},
		{0, 8, 0, -ERANGE}, /* no room */
		{UINT64_MAX, 1, 8, -ERANGE},
		{1, UINT64_MAX, 8, -ERANGE},
	};
	struct td_extent ext[8];

	open_chain("low");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		unsigned int nr = rows[i].room;
		int got = td_vbd_block_status(vbd, TD_CTX_BASE_ALLOCATION,
					      rows[i].sector,
					      rows[i].nr_sectors, ext, &nr);

		if (got != rows[i].want)
			fail_msg("row %zu: %d, want %d", i, got, rows[i].want);
	}
	close_chain();
}

/* A driver that fills no extent, or more than the room: -EIO. */
static void test_broken_driver(void **state)
{
	struct td_extent ext[8];
	unsigned int nr = 4;

	open_chain("low");
	st.low_nr = 0xffffffffu; /* "filled" more than the room */
	assert_int_equal(td_vbd_block_status(vbd, TD_CTX_BASE_ALLOCATION, 0, 8,
					     ext, &nr),
			 -EIO);
	close_chain();
}

/* No driver knows base:allocation: one extent of data over the range. */
static void test_default_allocation(void **state)
{
	struct td_extent ext[8];
	unsigned int nr = 8;

	open_chain("plain");
	assert_int_equal(td_vbd_block_status(vbd, TD_CTX_BASE_ALLOCATION, 100,
					     50, ext, &nr),
			 0);
	assert_int_equal(nr, 1);
	assert_int_equal(ext[0].nr_sectors, 50);
	assert_int_equal(ext[0].flags, 0);
	nr = 8;
	assert_int_equal(td_vbd_block_status(vbd, "qemu:dirty-bitmap:low", 0, 8,
					     ext, &nr),
			 -ENOENT);
	close_chain();
}

/* Top first: the filter answers its own context and passes the rest. */
static void test_filter_first(void **state)
{
	struct td_extent ext[8];
	unsigned int nr = 8;

	open_chain("filt|low");
	assert_int_equal(
		td_vbd_block_status(vbd, "qemu:dirty-bitmap:f", 0, 8, ext, &nr),
		0);
	assert_int_equal(st.filt_calls, 1);
	assert_int_equal(st.low_calls, 0);
	assert_int_equal(nr, 1);
	assert_int_equal(ext[0].flags, TD_EXTENT_DIRTY);
	nr = 8;
	assert_int_equal(td_vbd_block_status(vbd, "qemu:dirty-bitmap:low", 0, 8,
					     ext, &nr),
			 0);
	assert_int_equal(st.filt_calls, 2);
	assert_int_equal(st.low_calls, 1);
	assert_int_equal(ext[0].nr_sectors, 8);
	close_chain();
}

struct names {
	char name[8][64];
	int n;
};

static void add_name(const char *name, void *opaque)
{
	struct names *l = opaque;

	assert_true(l->n < 8);
	strcpy(l->name[l->n++], name);
}

static void test_list_contexts(void **state)
{
	struct names l = {.n = 0};

	open_chain("filt|low");
	td_vbd_list_contexts(vbd, add_name, &l);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.name[0], "base:allocation");
	assert_string_equal(l.name[1], "qemu:dirty-bitmap:f");
	assert_string_equal(l.name[2], "qemu:dirty-bitmap:low");
	close_chain();

	memset(&l, 0, sizeof(l));
	open_chain("plain");
	td_vbd_list_contexts(vbd, add_name, &l);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.name[0], "base:allocation");
	close_chain();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_driver_answers),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_broken_driver),
		cmocka_unit_test(test_default_allocation),
		cmocka_unit_test(test_filter_first),
		cmocka_unit_test(test_list_contexts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
