/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vbd.c - the request lifecycle: validation, splitting, completion
 * exactly once and always deferred, back-pressure, pause, filters, stats.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/json.h"
#include "tests/unit/vbd-fixture.h"

/* --- validation ------------------------------------------------------------ */

static void test_validation(void **state)
{
	struct td_vbd_io *io;
	struct iovec odd = {fx->buf, 100};
	struct iovec nul = {NULL, 512};

	mock.features = TD_FEAT_FLUSH; /* no FUA, discard, zeroes */
	assert_int_equal(open_chain("mock", 0, 0, false), 0);

	/* Each row: an I/O that must be refused, and with what. */
	io = mkio(0, TD_OP_READ, 2048, 1);
	assert_int_equal(td_vbd_submit(fx->vbd, io), -ERANGE);
	io = mkio(0, TD_OP_READ, 2047, 2);
	assert_int_equal(td_vbd_submit(fx->vbd, io), -ERANGE);
	io = mkio(0, TD_OP_READ, UINT64_MAX - 1, 4); /* would wrap */
	assert_int_equal(td_vbd_submit(fx->vbd, io), -ERANGE);
	io = mkio(0, TD_OP_READ, 0, 1);
	io->nr_sectors = 0;
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_READ, 0, 2);
	io->nr_sectors = 3; /* iovecs cover 2 sectors */
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_WRITE, 0, 1);
	io->iov = &odd;
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_WRITE, 0, 1);
	io->iov = &nul;
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_WRITE, 0, 1);
	io->iovcnt = 0;
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_WRITE, 0, 1);
	io->flags = 1u << 7;
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_WRITE, 0, 1);
	io->flags = TD_REQ_FUA; /* the driver has no FUA */
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EOPNOTSUPP);
	io = mkio(0, TD_OP_WRITE, 0, 1);
	io->op = (enum td_op)99;
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_DISCARD, 0, 8);
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EOPNOTSUPP);
	io = mkio(0, TD_OP_WRITE_ZEROES, 0, 8);
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EOPNOTSUPP);
	io = mkio(0, TD_OP_READ, 0, 1);
	io->cb = NULL;
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);

	run(2);
	assert_int_equal(fx->calls[0], 0); /* refused I/O never calls back */
	assert_int_equal(mock.nr_seen, 0);
}

static void test_validation_flags(void **state)
{
	struct td_vbd_io *io;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	io = mkio(0, TD_OP_READ, 0, 1);
	io->flags = TD_REQ_FUA; /* FUA means nothing on a read */
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_DISCARD, 0, 0);
	assert_int_equal(td_vbd_submit(fx->vbd, io), -EINVAL);
	io = mkio(0, TD_OP_WRITE_ZEROES, 2040, 16);
	assert_int_equal(td_vbd_submit(fx->vbd, io), -ERANGE);
	io = mkio(0, TD_OP_WRITE_ZEROES, 0, 8);
	io->flags = TD_REQ_FUA | TD_REQ_NO_HOLE;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(mock.seen[0].flags, TD_REQ_FUA | TD_REQ_NO_HOLE);
}

static void test_read_only(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, true), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 1)),
			 -EROFS);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_DISCARD, 0, 1)),
			 -EROFS);
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE_ZEROES, 0, 1)),
		-EROFS);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(1, TD_OP_READ, 0, 1)), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(2, TD_OP_FLUSH, 0, 0)), 0);
	run(1);
	assert_int_equal(fx->calls[1], 1);
	assert_int_equal(fx->calls[2], 1);
}

static void test_sector_size_4k(void **state)
{
	mock.sector_size = 4096;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 1, 8)),
			 -EINVAL);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 4)),
			 -EINVAL);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 8, 8)), 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
}

/* --- splitting ------------------------------------------------------------- */

struct piece {
	uint64_t sector;
	uint32_t nr;
};

static void expect_pieces(const struct piece *want, unsigned int n)
{
	assert_int_equal(mock.nr_seen, n);
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal(mock.seen[i].sector, want[i].sector);
		assert_int_equal(mock.seen[i].nr_sectors, want[i].nr);
	}
}

static void test_split_boundary(void **state)
{
	/* Boundary 8 sectors: [6, 18) -> [6,8) [8,16) [16,18). */
	static const struct piece want[] = {{6, 2}, {8, 8}, {16, 2}};

	mock.boundary_sectors = 8;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 6, 12)),
			 0);
	expect_pieces(want, 3);
	/* Each piece's data is the next slice of the buffer. */
	assert_ptr_equal(mock.seen[0].iov[0].iov_base, fx->buf);
	assert_int_equal(mock.seen[0].iov[0].iov_len, 1024);
	assert_ptr_equal(mock.seen[1].iov[0].iov_base, fx->buf + 1024);
	assert_int_equal(mock.seen[1].iov[0].iov_len, 4096);
	assert_ptr_equal(mock.seen[2].iov[0].iov_base, fx->buf + 5120);
	assert_int_equal(mock.seen[2].iov[0].iov_len, 1024);
	assert_int_equal(fx->calls[0], 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], 0);
}

static void test_split_max_io(void **state)
{
	/* max 4 KiB: [0, 20) -> [0,8) [8,16) [16,20). */
	static const struct piece want[] = {{0, 8}, {8, 8}, {16, 4}};

	assert_int_equal(open_chain("mock", 0, 4096, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 20)), 0);
	expect_pieces(want, 3);
	run(1);
	assert_int_equal(fx->calls[0], 1);
}

static void test_split_boundary_and_max_io(void **state)
{
	/* boundary 16, max 12: [10, 40) -> [10,16) [16,28) [28,32) [32,40) */
	static const struct piece want[] = {
		{10, 6}, {16, 12}, {28, 4}, {32, 8}};

	mock.boundary_sectors = 16;
	assert_int_equal(open_chain("mock", 0, 12 * 512, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 10, 30)),
			 0);
	expect_pieces(want, 4);
	run(1);
}

static void test_split_discard_ignores_max_io(void **state)
{
	/* Discards are split at the boundary only (no data to carry). */
	static const struct piece want[] = {{4, 60}, {64, 64}, {128, 8}};

	mock.boundary_sectors = 64;
	assert_int_equal(open_chain("mock", 0, 4096, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_DISCARD, 4, 132)),
			 0);
	expect_pieces(want, 3);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(mock.seen[i].iovcnt, 0);
	run(1);
}

static void test_split_iovecs(void **state)
{
	/*
	 * iovecs of 1024, 2048 and 1024 bytes, boundary 4 sectors (2 KiB):
	 * piece 0 = iov0 + first half of iov1, piece 1 = second half + iov2.
	 */
	struct td_vbd_io *io = mkio(0, TD_OP_WRITE, 0, 8);
	struct iovec v[3] = {
		{fx->buf, 1024},
		{fx->buf + 8192, 2048},
		{fx->buf + 16384, 1024},
	};

	mock.boundary_sectors = 4;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	io->iov = v;
	io->iovcnt = 3;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[0].iovcnt, 2);
	assert_ptr_equal(mock.seen[0].iov[0].iov_base, fx->buf);
	assert_int_equal(mock.seen[0].iov[0].iov_len, 1024);
	assert_ptr_equal(mock.seen[0].iov[1].iov_base, fx->buf + 8192);
	assert_int_equal(mock.seen[0].iov[1].iov_len, 1024);
	assert_int_equal(mock.seen[1].iovcnt, 2);
	assert_ptr_equal(mock.seen[1].iov[0].iov_base, fx->buf + 9216);
	assert_int_equal(mock.seen[1].iov[0].iov_len, 1024);
	assert_ptr_equal(mock.seen[1].iov[1].iov_base, fx->buf + 16384);
	assert_int_equal(mock.seen[1].iov[1].iov_len, 1024);
	run(1);
	assert_int_equal(fx->calls[0], 1);
}

static void test_split_iov_cap(void **state)
{
	/* More iovecs than one request can carry: split at the cap. */
	static struct iovec many[TD_IOV_MAX + 10];
	struct td_vbd_io *io = mkio(0, TD_OP_WRITE, 0, TD_IOV_MAX + 10);

	mock.size_sectors = 4096;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	for (int i = 0; i < TD_IOV_MAX + 10; i++) {
		/* never adjacent in memory: every entry stays its own */
		many[i].iov_base = fx->buf + (i % 2) * 4096;
		many[i].iov_len = 512;
	}
	io->iov = many;
	io->iovcnt = TD_IOV_MAX + 10;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[0].sector, 0);
	assert_int_equal(mock.seen[0].nr_sectors, TD_IOV_MAX);
	assert_int_equal(mock.seen[0].iovcnt, TD_IOV_MAX);
	assert_int_equal(mock.seen[1].sector, TD_IOV_MAX);
	assert_int_equal(mock.seen[1].nr_sectors, 10);
	run(1);
	assert_int_equal(fx->calls[0], 1);
}

/* --- completion ------------------------------------------------------------ */

static void test_completion_deferred_once(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	/* The mock completes inside submit; the vbd must defer it. */
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 1)), 0);
	assert_int_equal(fx->calls[0], 0);
	run(3);
	assert_int_equal(fx->calls[0], 1);
}

static void test_complete_twice_ignored(void **state)
{
	struct td_vbd_stats st;

	mock.complete_twice = true;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 1)), 0);
	run(3);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], 0); /* the second, -EIO, was ignored */
	td_vbd_get_stats(fx->vbd, &st);
	assert_int_equal(st.inflight, 0);
}

static void test_first_error_wins(void **state)
{
	mock.boundary_sectors = 8;
	mock.hold = true;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 24)),
			 0);
	assert_int_equal(mock.nr_held, 3);
	mock_complete_held(2, -ENOSPC); /* completes first, so it wins */
	mock_complete_held(0, -EIO);
	run(1);
	assert_int_equal(fx->calls[0], 0); /* one piece still out */
	mock_complete_held(1, 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], -ENOSPC);
}

static void test_submit_error(void **state)
{
	struct td_vbd_stats st;

	mock.submit_err = -EIO;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 1)), 0);
	assert_int_equal(fx->calls[0], 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], -EIO);
	td_vbd_get_stats(fx->vbd, &st);
	assert_int_equal(st.errors[TD_OP_WRITE], 1);
	assert_int_equal(st.reqs[TD_OP_WRITE], 1);
}

static void test_positive_error_becomes_eio(void **state)
{
	mock.complete_err = EPERM; /* a driver bug: positive errno */
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 1)), 0);
	run(1);
	assert_int_equal(fx->err[0], -EIO);
}

static void test_flush(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_FLUSH, 77, 0)),
			 0);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].op, TD_OP_FLUSH);
	assert_int_equal(mock.seen[0].sector, 0);
	assert_int_equal(mock.seen[0].nr_sectors, 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
}

/* --- back-pressure, pause ------------------------------------------------- */

static void test_pool_backpressure_in_order(void **state)
{
	struct td_vbd_stats st;

	mock.boundary_sectors = 8;
	mock.hold = true;
	/* Two requests in the pool: io 0 needs 3, io 1 needs 1. */
	assert_int_equal(open_chain("mock", 2, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 24)),
			 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(1, TD_OP_WRITE, 100, 1)),
			 0);
	assert_int_equal(mock.nr_seen, 2);
	mock_complete_held(0, 0);
	run(1);
	/* The freed request goes to io 0's last piece, not to io 1. */
	assert_int_equal(mock.nr_seen, 3);
	assert_int_equal(mock.seen[2].sector, 16);
	mock_complete_held(1, 0);
	mock_complete_held(2, 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(mock.nr_seen, 4);
	assert_int_equal(mock.seen[3].sector, 100);
	mock_complete_held(3, 0);
	run(1);
	assert_int_equal(fx->calls[1], 1);
	assert_int_equal(fx->order[0], 0);
	assert_int_equal(fx->order[1], 1);
	td_vbd_get_stats(fx->vbd, &st);
	assert_true(st.waits >= 1);
	assert_int_equal(st.pieces, 4);
}

static int drained;

static void on_drained(struct td_vbd *vbd, void *opaque)
{
	drained++;
	assert_ptr_equal(opaque, fx);
}

static void test_pause_drains_then_holds(void **state)
{
	drained = 0;
	mock.hold = true;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 1)), 0);
	assert_int_equal(td_vbd_pause(fx->vbd, on_drained, fx), 0);
	assert_int_equal(td_vbd_pause(fx->vbd, on_drained, fx), -EALREADY);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(1, TD_OP_WRITE, 8, 1)), 0);
	run(2);
	assert_int_equal(drained, 0);	   /* io 0 still in flight */
	assert_int_equal(mock.nr_seen, 1); /* io 1 held back */
	assert_false(td_vbd_paused(fx->vbd));
	mock_complete_held(0, 0);
	run(2);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(drained, 1);
	assert_true(td_vbd_paused(fx->vbd));
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(td_vbd_close(fx->vbd), -EBUSY); /* io 1 is waiting */
	assert_int_equal(td_vbd_resume(fx->vbd), 0);
	assert_int_equal(td_vbd_resume(fx->vbd), -EALREADY);
	assert_int_equal(mock.nr_seen, 2);
	mock_complete_held(1, 0);
	run(1);
	assert_int_equal(fx->calls[1], 1);
	assert_int_equal(drained, 1);
}

static void test_pause_idle(void **state)
{
	drained = 0;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_pause(fx->vbd, on_drained, fx), 0);
	assert_int_equal(drained, 0); /* deferred, even with nothing to drain */
	run(1);
	assert_int_equal(drained, 1);
	assert_true(td_vbd_paused(fx->vbd));
	assert_int_equal(td_vbd_resume(fx->vbd), 0);
}

static void test_pause_finishes_started_io(void **state)
{
	/* A paused vbd still issues the rest of an I/O it began. */
	drained = 0;
	mock.boundary_sectors = 8;
	mock.hold = true;
	assert_int_equal(open_chain("mock", 1, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 16)),
			 0);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(td_vbd_pause(fx->vbd, on_drained, fx), 0);
	mock_complete_held(0, 0);
	run(1);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(drained, 0);
	mock_complete_held(1, 0);
	run(2);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(drained, 1);
	assert_int_equal(td_vbd_resume(fx->vbd), 0);
}

/* --- filters, unplug, stats ----------------------------------------------- */

/* --- online grow --------------------------------------------------------- */

static void test_resize_grow(void **state)
{
	struct td_strbuf why;
	uint64_t old_s = 0, new_s = 0;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	td_strbuf_init(&why);
	mock.size_sectors = 4096; /* grown underneath, not yet taken */
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 2048, 8)),
			 -ERANGE);
	assert_int_equal(td_vbd_resize(fx->vbd, &old_s, &new_s, &why), 0);
	assert_int_equal(old_s, 2048);
	assert_int_equal(new_s, 4096);
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors, 4096);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 2048, 8)),
			 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(1, TD_OP_READ, 4095, 2)),
			 -ERANGE);
	run(1);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], 0);
	td_strbuf_free(&why);
}

static void test_resize_refused(void **state)
{
	struct td_strbuf why;
	uint64_t old_s = 0, new_s = 0;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	td_strbuf_init(&why);
	mock.size_sectors = 1024;
	assert_int_equal(td_vbd_resize(fx->vbd, &old_s, &new_s, &why), -EINVAL);
	assert_non_null(strstr(td_strbuf_str(&why), "never shrunk"));
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors, 2048);
	mock.size_sectors = 4096;
	mock.refresh_err = -EIO;
	assert_int_equal(td_vbd_resize(fx->vbd, &old_s, &new_s, &why), -EIO);
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors, 2048);
	td_strbuf_free(&why);
}

/* A filter without refresh_size: refused, nothing changed in any layer. */
static void test_resize_filter_cannot(void **state)
{
	struct td_strbuf why;
	uint64_t old_s = 0, new_s = 0;

	assert_int_equal(open_chain("mockfilter|mock", 0, 0, false), 0);
	td_strbuf_init(&why);
	mock.size_sectors = 4096;
	assert_int_equal(td_vbd_resize(fx->vbd, &old_s, &new_s, &why),
			 -EOPNOTSUPP);
	assert_string_equal(td_strbuf_str(&why),
			    "the mockfilter driver cannot change size");
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors, 2048);
	td_strbuf_free(&why);
}

static void test_filter_forwarding(void **state)
{
	mock.hold = true;
	assert_int_equal(open_chain("mockfilter|mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 8, 4)), 0);
	assert_int_equal(mock.filter_forwards, 1);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].layer, 1);
	assert_int_equal(mock.seen[0].sector, 8);
	mock_complete_held(0, -EIO);
	run(1); /* the filter completes its own request in the same pass */
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], -EIO);
}

static void test_unplug_once_per_pass(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(
			td_vbd_submit(fx->vbd, mkio(i, TD_OP_READ, i, 1)), 0);
	assert_int_equal(mock.unplugs, 0);
	run(1);
	assert_int_equal(mock.unplugs, 1);
	run(1);
	assert_int_equal(mock.unplugs, 1); /* nothing submitted in that pass */
}

static void test_stats(void **state)
{
	struct td_vbd_stats st;
	struct td_vbd_io *io;
	uint64_t lat = 0;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 8)), 0);
	io = mkio(1, TD_OP_WRITE, 0, 16);
	io->nr_segments = 11;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(2, TD_OP_FLUSH, 0, 0)), 0);
	td_vbd_get_stats(fx->vbd, &st);
	assert_int_equal(st.inflight, 3);
	run(1);
	td_vbd_get_stats(fx->vbd, &st);
	assert_int_equal(st.inflight, 0);
	assert_int_equal(st.reqs[TD_OP_READ], 1);
	assert_int_equal(st.bytes[TD_OP_READ], 4096);
	assert_int_equal(st.reqs[TD_OP_WRITE], 1);
	assert_int_equal(st.bytes[TD_OP_WRITE], 8192);
	assert_int_equal(st.reqs[TD_OP_FLUSH], 1);
	assert_int_equal(st.seg_hist[0], 1); /* the read: 1 iovec */
	assert_int_equal(st.seg_hist[4], 1); /* 11 segments: 9..16 */
	for (unsigned int i = 0; i < TD_LAT_BUCKETS; i++)
		lat += st.lat_hist[i];
	assert_int_equal(lat, 3);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_validation),
		T(test_validation_flags),
		T(test_read_only),
		T(test_sector_size_4k),
		T(test_split_boundary),
		T(test_split_max_io),
		T(test_split_boundary_and_max_io),
		T(test_split_discard_ignores_max_io),
		T(test_split_iovecs),
		T(test_split_iov_cap),
		T(test_completion_deferred_once),
		T(test_complete_twice_ignored),
		T(test_first_error_wins),
		T(test_submit_error),
		T(test_positive_error_becomes_eio),
		T(test_flush),
		T(test_pool_backpressure_in_order),
		T(test_pause_drains_then_holds),
		T(test_pause_idle),
		T(test_pause_finishes_started_io),
		T(test_resize_grow),
		T(test_resize_refused),
		T(test_resize_filter_cannot),
		T(test_filter_forwarding),
		T(test_unplug_once_per_pass),
		T(test_stats),
	};

	td_log_set_level(TD_LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
