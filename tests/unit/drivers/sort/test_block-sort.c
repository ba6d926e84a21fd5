/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_block-sort.c - the sort filter over the mock driver ("sort|mock"):
 * batches of I/O written as tables go in, and the requests the mock
 * receives are compared with tables of the exact merged output expected
 * (sector, length, iovec count and bases), written by hand.  Covers
 * merging (interleaved writes, memory-adjacent iovecs, reads and writes,
 * discard and write-zeroes, flags), the ordering rules (flush epochs,
 * overlapping requests waiting), the limits (lower boundary, max I/O,
 * max_merge, TD_IOV_MAX), errors reaching every child once, the window
 * timer and the plug bounds, option errors and the stats counters.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "drivers/drivers.h"
#include "common/log.h"
#include "tapdisk/vbd.h"
#include "tests/unit/mock-driver.h"

#define NR_IOS	    64
#define KIB	    1024u
#define BLK	    8u /* sectors in a 4 KiB block */
#define DISK_SECS   (1u << 20)
#define BUF_BYTES   (2u << 20)
#define TINY_IOVS   600
#define WAIT_PASSES 400

static const struct td_driver_ops *const sort_table[] = {
	&td_sort_ops,
	&mock_ops,
	NULL,
};

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_vbd_io io[NR_IOS];
	struct iovec iov[NR_IOS];
	int calls[NR_IOS];
	int err[NR_IOS];
	int order[NR_IOS]; /* completion order: io index */
	int nr_done;
	int nr_ios; /* I/Os submitted so far */
} T;

static char buf[BUF_BYTES] __attribute__((aligned(4096)));
static struct iovec tiny[3][TINY_IOVS];

/* --- fixture ---------------------------------------------------------------- */

static void io_done(struct td_vbd_io *io, int err)
{
	int i = (int)(io - T.io);

	T.calls[i]++;
	T.err[i] = err;
	T.order[T.nr_done++] = i;
}

static int setup(void **state)
{
	memset(&T, 0, sizeof(T));
	mock_reset();
	mock.size_sectors = DISK_SECS;
	assert_int_equal(td_loop_create(&T.loop), 0);
	return 0;
}

static int teardown(void **state)
{
	if (T.vbd)
		assert_int_equal(td_vbd_close(T.vbd), 0);
	td_loop_destroy(T.loop);
	return 0;
}

static int open_depth(const char *chain, uint32_t depth)
{
	struct td_vbd_params p = {
		.name = "sorttest",
		.chain = chain,
		.max_inflight = depth,
	};

	return td_vbd_open(T.loop, sort_table, &p, &T.vbd);
}

static int open_sort(const char *chain)
{
	return open_depth(chain, 0);
}

static void run(int passes)
{
	while (passes--)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
}

static uint64_t counter(enum td_stat s)
{
	struct td_vbd_stats st;

	td_vbd_get_stats(T.vbd, &st);
	return st.counters[s];
}

/* One of sort's own counters (td_sort_ops.counters). */
static uint64_t sort_counter(const char *name)
{
	struct td_vbd_stats st;

	td_vbd_get_stats(T.vbd, &st);
	return td_vbd_driver_counter(&st, name);
}

/* --- tables ----------------------------------------------------------------- */

/* One I/O given to the vbd: {op, flags, sector, nr_sectors, buf_kib}. */
struct in_row {
	enum td_op op;
	uint32_t flags;
	uint64_t sector;
	uint32_t nr_sectors;
	uint32_t buf_kib;
};

/*
 * One request expected at the mock:
 * {op, flags, sector, nr_sectors, iovcnt, len_kib, nr_base, {base_kib...}}.
 */
struct out_row {
	enum td_op op;
	uint32_t flags;
	uint64_t sector;
	uint32_t nr_sectors;
	int iovcnt;
	uint32_t len_kib;		  /* iov[0].iov_len when nonzero */
	int nr_base;			  /* entries of base_kib to check */
	uint32_t base_kib[MOCK_SEEN_IOV]; /* iov[k].iov_base - buf, KiB */
};

static struct td_vbd_io *mkio(enum td_op op, uint32_t flags, uint64_t sector,
			      uint32_t nr, uint32_t buf_kib)
{
	int i = T.nr_ios++;
	struct td_vbd_io *io = &T.io[i];

	assert_true(i < NR_IOS);
	memset(io, 0, sizeof(*io));
	io->op = op;
	io->flags = flags;
	io->sector = sector;
	io->nr_sectors = nr;
	io->cb = io_done;
	if (op == TD_OP_READ || op == TD_OP_WRITE) {
		T.iov[i].iov_base = buf + (size_t)buf_kib * KIB;
		T.iov[i].iov_len = (size_t)nr * TD_SECTOR_SIZE;
		io->iov = &T.iov[i];
		io->iovcnt = 1;
	}
	return io;
}

static void submit_rows(const struct in_row *rows, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		const struct in_row *r = &rows[i];

		assert_int_equal(
			td_vbd_submit(T.vbd, mkio(r->op, r->flags, r->sector,
						  r->nr_sectors, r->buf_kib)),
			0);
	}
}

static bool row_matches(const struct mock_seen *s, const struct out_row *want)
{
	if (s->op != want->op || s->flags != want->flags ||
	    s->sector != want->sector || s->nr_sectors != want->nr_sectors ||
	    s->iovcnt != want->iovcnt)
		return false;
	for (int k = 0; k < want->nr_base; k++)
		if (s->iov[k].iov_base != buf + (size_t)want->base_kib[k] * KIB)
			return false;
	return !want->len_kib ||
	       s->iov[0].iov_len == (size_t)want->len_kib * KIB;
}

static void check_row(unsigned int i, const struct out_row *want)
{
	const struct mock_seen *s = &mock.seen[i];

	if (row_matches(s, want))
		return;
	fail_msg("output %u: got %s flags %u sector %llu +%u, %d iovecs "
		 "(first at %+td KiB, %zu bytes); want %s flags %u sector "
		 "%llu +%u, %d iovecs",
		 i, td_op_name(s->op), s->flags, (unsigned long long)s->sector,
		 s->nr_sectors, s->iovcnt,
		 s->iovcnt ? ((char *)s->iov[0].iov_base - buf) / (ptrdiff_t)KIB
			   : 0,
		 s->iovcnt ? s->iov[0].iov_len : 0, td_op_name(want->op),
		 want->flags, (unsigned long long)want->sector,
		 want->nr_sectors, want->iovcnt);
}

/* The mock must have seen exactly rows[0..n) from index from on. */
static void expect_rows(unsigned int from, const struct out_row *rows,
			unsigned int n)
{
	assert_int_equal(mock.nr_seen, from + n);
	for (unsigned int i = 0; i < n; i++)
		check_row(from + i, &rows[i]);
}

/* Every I/O submitted completed exactly once with err. */
static void expect_all_done(int err)
{
	assert_int_equal(T.nr_done, T.nr_ios);
	for (int i = 0; i < T.nr_ios; i++) {
		assert_int_equal(T.calls[i], 1);
		assert_int_equal(T.err[i], err);
	}
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* --- merging ------------------------------------------------------------------ */

/*
 * The thesis workload: 4 KiB writes to blocks 0, 2, ..., 26 then 1, 3, ...,
 * 27 in one pass, their buffers laid out in arrival order (as the ring
 * arena does) become one 112 KiB write of 28 iovecs.
 */
static void test_interleaved_writes(void **state)
{
	/* clang-format off */
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 224, 28, 0, 28, {
			/* KiB of blocks 0 and 1, 2 and 3, ... */
			0, 56,   4, 60,   8, 64,   12, 68,   16, 72,
			20, 76,  24, 80,  28, 84,  32, 88,   36, 92,
			40, 96,  44, 100, 48, 104, 52, 108}},
	};
	/* clang-format on */

	assert_int_equal(open_sort("sort|mock"), 0);
	for (uint32_t i = 0; i < 28; i++) {
		uint32_t block = i < 14 ? 2 * i : 2 * (i - 14) + 1;

		assert_int_equal(
			td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, block * BLK,
						  BLK, 4 * i)),
			0);
	}
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
	assert_int_equal(sort_counter("sort_in"), 28);
	assert_int_equal(sort_counter("sort_out"), 1);
	assert_int_equal(sort_counter("sort_merges"), 27);
	assert_int_equal(sort_counter("sort_max_merge_bytes"), 112 * KIB);
	assert_int_equal(counter(TD_STAT_MERGED_IOV_ENTRIES), 28);
}

/* Buffers adjacent in memory become one iovec entry. */
static void test_memory_adjacent_joined(void **state)
{
	static const struct in_row batch[] = {
		/* blocks 0..3, data at 0, 4K, 12K, 16K: a gap after 8K */
		{TD_OP_WRITE, 0, 24, 8, 16},
		{TD_OP_WRITE, 0, 0, 8, 0},
		{TD_OP_WRITE, 0, 16, 8, 12},
		{TD_OP_WRITE, 0, 8, 8, 4},
	};
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 32, 2, 8, 2, {0, 12}},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(1);
	expect_rows(0, want, N(want));
	assert_int_equal(mock.seen[0].iov[1].iov_len, 8 * KIB);
	run(2);
	expect_all_done(0);
	assert_int_equal(counter(TD_STAT_MERGED_IOV_ENTRIES), 2);
}

/* The interleaved batch again, data laid out by sector: one iovec. */
static void test_interleaved_joined(void **state)
{
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 224, 1, 112, 1, {0}},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	for (uint32_t i = 0; i < 28; i++) {
		uint32_t block = i < 14 ? 2 * i : 2 * (i - 14) + 1;

		assert_int_equal(
			td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, block * BLK,
						  BLK, 4 * block)),
			0);
	}
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
}

/* Reads merge with reads, writes with writes; one op never joins another. */
static void test_reads_writes_mixed(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 0, 8, 0},   {TD_OP_READ, 0, 8, 8, 4},
		{TD_OP_WRITE, 0, 16, 8, 8},  {TD_OP_WRITE, 0, 24, 8, 12},
		{TD_OP_READ, 0, 40, 8, 16},  {TD_OP_READ, 0, 48, 8, 20},
		{TD_OP_WRITE, 0, 32, 8, 40}, {TD_OP_READ, 0, 64, 8, 60},
	};
	static const struct out_row want[] = {
		{TD_OP_READ, 0, 8, 8, 1, 0, 1, {4}},
		{TD_OP_READ, 0, 40, 16, 1, 8, 1, {16}},
		{TD_OP_READ, 0, 64, 8, 1, 0, 1, {60}},
		{TD_OP_WRITE, 0, 0, 8, 1, 0, 1, {0}},
		{TD_OP_WRITE, 0, 16, 24, 2, 8, 2, {8, 40}},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
	assert_int_equal(sort_counter("sort_in"), 8);
	assert_int_equal(sort_counter("sort_out"), 5);
	assert_int_equal(sort_counter("sort_merges"), 3);
}

/* DISCARD and WRITE_ZEROES merge like writes, by op and flags only. */
static void test_discard_zeroes_flags(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_DISCARD, 0, 8, 8, 0},
		{TD_OP_DISCARD, 0, 0, 8, 0},
		{TD_OP_WRITE_ZEROES, 0, 16, 8, 0},
		{TD_OP_WRITE_ZEROES, TD_REQ_NO_HOLE, 48, 8, 0},
		{TD_OP_WRITE_ZEROES, 0, 40, 8, 0},
		{TD_OP_WRITE_ZEROES, 0, 32, 8, 0},
		{TD_OP_WRITE, TD_REQ_FUA, 64, 8, 0},
		{TD_OP_WRITE, 0, 56, 8, 28},
		{TD_OP_WRITE, TD_REQ_FUA, 80, 8, 8},
		{TD_OP_WRITE, TD_REQ_FUA, 88, 8, 12},
	};
	/* Neighbours on disk with other flags stay apart (56|64, 40|48). */
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 56, 8, 1, 0, 1, {28}},
		{TD_OP_WRITE, TD_REQ_FUA, 64, 8, 1, 0, 1, {0}},
		{TD_OP_WRITE, TD_REQ_FUA, 80, 16, 1, 8, 1, {8}},
		{TD_OP_DISCARD, 0, 0, 16, 0, 0, 0, {0}},
		{TD_OP_WRITE_ZEROES, 0, 16, 8, 0, 0, 0, {0}},
		{TD_OP_WRITE_ZEROES, 0, 32, 16, 0, 0, 0, {0}},
		{TD_OP_WRITE_ZEROES, TD_REQ_NO_HOLE, 48, 8, 0, 0, 0, {0}},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
}

/* --- ordering rules ------------------------------------------------------------ */

/*
 * W0 W2 FLUSH W1 W3 in one pass: the flush waits until W0 and W2 have
 * completed, W1 and W3 until the flush is forwarded; nothing crosses it
 * (without the flush, the four would be one write).
 */
static void test_flush_epochs(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 0, 8, 0},   {TD_OP_WRITE, 0, 16, 8, 8},
		{TD_OP_FLUSH, 0, 0, 0, 0},   {TD_OP_WRITE, 0, 8, 8, 4},
		{TD_OP_WRITE, 0, 24, 8, 12},
	};
	static const struct out_row epoch0[] = {
		{TD_OP_WRITE, 0, 0, 8, 1, 0, 1, {0}},
		{TD_OP_WRITE, 0, 16, 8, 1, 0, 1, {8}},
	};
	static const struct out_row rest[] = {
		{TD_OP_FLUSH, 0, 0, 0, 0, 0, 0, {0}},
		{TD_OP_WRITE, 0, 8, 8, 1, 0, 1, {4}},
		{TD_OP_WRITE, 0, 24, 8, 1, 0, 1, {12}},
	};

	mock.hold = true;
	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(3);
	expect_rows(0, epoch0, N(epoch0));
	mock_complete_held(0, 0);
	run(3);
	assert_int_equal(mock.nr_seen, 2); /* W2 still in flight */
	mock_complete_held(1, 0);
	run(3);
	expect_rows(2, rest, N(rest));
	for (unsigned int i = 2; i < 5; i++)
		mock_complete_held(i, 0);
	run(3);
	expect_all_done(0);
	assert_int_equal(T.order[0], 0);
	assert_int_equal(T.order[1], 1);
}

/* The same batch with a mock that completes at once flows by itself. */
static void test_flush_epochs_flowing(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 0, 8, 0},   {TD_OP_WRITE, 0, 16, 8, 8},
		{TD_OP_FLUSH, 0, 0, 0, 0},   {TD_OP_WRITE, 0, 8, 8, 4},
		{TD_OP_WRITE, 0, 24, 8, 12},
	};
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 8, 1, 0, 1, {0}},
		{TD_OP_WRITE, 0, 16, 8, 1, 0, 1, {8}},
		{TD_OP_FLUSH, 0, 0, 0, 0, 0, 0, {0}},
		{TD_OP_WRITE, 0, 8, 8, 1, 0, 1, {4}},
		{TD_OP_WRITE, 0, 24, 8, 1, 0, 1, {12}},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(6);
	expect_rows(0, want, N(want));
	expect_all_done(0);
	/* Epoch 0 was complete before the flush was even forwarded. */
	assert_int_equal(T.order[0] + T.order[1], 0 + 1);
	assert_int_equal(sort_counter("sort_merges"), 0);
}

/* A flush behind requests of an earlier pass still in flight waits. */
static void test_flush_waits_for_inflight(void **state)
{
	mock.hold = true;
	assert_int_equal(open_sort("sort|mock"), 0);
	assert_int_equal(td_vbd_submit(T.vbd, mkio(TD_OP_READ, 0, 0, 8, 0)), 0);
	run(1);
	assert_int_equal(td_vbd_submit(T.vbd, mkio(TD_OP_FLUSH, 0, 0, 0, 0)),
			 0);
	assert_int_equal(td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, 800, 8, 4)),
			 0);
	run(3);
	assert_int_equal(mock.nr_seen, 1);
	mock_complete_held(0, 0);
	run(3);
	assert_int_equal(mock.nr_seen, 3);
	assert_int_equal(mock.seen[1].op, TD_OP_FLUSH);
	assert_int_equal(mock.seen[2].op, TD_OP_WRITE);
	mock_complete_held(1, 0);
	mock_complete_held(2, 0);
	run(3);
	expect_all_done(0);
}

/*
 * Overlaps: a write waits for every earlier overlapping request, a read
 * for earlier overlapping writes; reads overlapping reads go together.
 */
static void test_overlap_waits(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 0, 16, 0},   /* A */
		{TD_OP_WRITE, 0, 8, 8, 64},   /* B: overlaps A */
		{TD_OP_WRITE, 0, 64, 8, 16},  /* C */
		{TD_OP_READ, 0, 0, 8, 24},    /* D: overlaps A */
		{TD_OP_READ, 0, 64, 8, 28},   /* E: overlaps C */
		{TD_OP_READ, 0, 200, 8, 32},  /* F */
		{TD_OP_READ, 0, 200, 16, 36}, /* G: overlaps F, both read */
	};
	static const struct out_row first[] = {
		{TD_OP_READ, 0, 200, 8, 1, 0, 1, {32}},
		{TD_OP_READ, 0, 200, 16, 1, 0, 1, {36}},
		{TD_OP_WRITE, 0, 0, 16, 1, 0, 1, {0}},
		{TD_OP_WRITE, 0, 64, 8, 1, 0, 1, {16}},
	};
	static const struct out_row after_a[] = {
		{TD_OP_READ, 0, 0, 8, 1, 0, 1, {24}},
		{TD_OP_WRITE, 0, 8, 8, 1, 0, 1, {64}},
	};
	static const struct out_row after_c[] = {
		{TD_OP_READ, 0, 64, 8, 1, 0, 1, {28}},
	};

	mock.hold = true;
	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(3);
	expect_rows(0, first, N(first));
	mock_complete_held(2, 0); /* A */
	run(3);
	expect_rows(4, after_a, N(after_a));
	mock_complete_held(3, 0); /* C */
	run(3);
	expect_rows(6, after_c, N(after_c));
	for (unsigned int i = 0; i < 7; i++)
		if (i != 2 && i != 3)
			mock_complete_held(i, 0);
	run(3);
	expect_all_done(0);
}

/* Three writes to one block land one after the other, in arrival order. */
static void test_overlap_chain(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 0, 8, 0},
		{TD_OP_WRITE, 0, 0, 8, 4},
		{TD_OP_WRITE, 0, 0, 8, 8},
	};
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 8, 1, 0, 1, {0}},
		{TD_OP_WRITE, 0, 0, 8, 1, 0, 1, {4}},
		{TD_OP_WRITE, 0, 0, 8, 1, 0, 1, {8}},
	};

	mock.hold = true;
	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(3);
	expect_rows(0, want, 1);
	mock_complete_held(0, 0);
	run(3);
	expect_rows(0, want, 2);
	mock_complete_held(1, 0);
	run(3);
	expect_rows(0, want, 3);
	mock_complete_held(2, 0);
	run(3);
	expect_all_done(0);
	assert_int_equal(T.order[0], 0);
	assert_int_equal(T.order[1], 1);
	assert_int_equal(T.order[2], 2);
}

/* --- limits ----------------------------------------------------------------- */

/* Lower boundary 64 KiB (128 sectors): blocks 12..19 make two writes. */
static void test_boundary(void **state)
{
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 96, 32, 1, 16, 1, {48}},
		{TD_OP_WRITE, 0, 128, 32, 1, 16, 1, {64}},
	};

	mock.boundary_sectors = 128;
	assert_int_equal(open_sort("sort|mock"), 0);
	for (uint32_t block = 12; block < 20; block++)
		assert_int_equal(
			td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, block * BLK,
						  BLK, 4 * block)),
			0);
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
}

static void test_max_merge(void **state)
{
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 32, 1, 16, 1, {0}},
		{TD_OP_WRITE, 0, 32, 32, 1, 16, 1, {16}},
	};

	assert_int_equal(open_sort("sort:max_merge=16K|mock"), 0);
	for (uint32_t block = 0; block < 8; block++)
		assert_int_equal(
			td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, block * BLK,
						  BLK, 4 * block)),
			0);
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
	assert_int_equal(sort_counter("sort_max_merge_bytes"), 16 * KIB);
}

/* The lower driver's max_io_sectors (12 KiB) bounds a merge too. */
static void test_lower_max_io(void **state)
{
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 24, 1, 12, 1, {0}},
		{TD_OP_WRITE, 0, 24, 24, 1, 12, 1, {12}},
		{TD_OP_WRITE, 0, 48, 16, 1, 8, 1, {24}},
	};

	mock.max_io_sectors = 24;
	assert_int_equal(open_sort("sort|mock"), 0);
	for (uint32_t block = 0; block < 8; block++)
		assert_int_equal(
			td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, block * BLK,
						  BLK, 4 * block)),
			0);
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
}

/*
 * Submit a write of n 512-byte iovecs, one per KiB of buf from first_kib
 * on, so that no two are adjacent in memory.
 */
static void submit_tiny(int which, uint64_t sector, int n, uint32_t first_kib)
{
	struct td_vbd_io *io = mkio(TD_OP_WRITE, 0, sector, (uint32_t)n, 0);

	for (int k = 0; k < n; k++) {
		tiny[which][k].iov_base = buf + (size_t)(first_kib + k) * KIB;
		tiny[which][k].iov_len = TD_SECTOR_SIZE;
	}
	io->iov = tiny[which];
	io->iovcnt = n;
	assert_int_equal(td_vbd_submit(T.vbd, io), 0);
}

/* 600 + 424 entries fit TD_IOV_MAX (1024) exactly; one more does not. */
static void test_iov_max(void **state)
{
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 1024, 1024, 0, 4, {0, 1, 2, 3}},
		{TD_OP_WRITE, 0, 1024, 1, 1, 0, 1, {1030}},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	submit_tiny(0, 0, 600, 0);
	submit_tiny(1, 600, 424, 600);
	submit_tiny(2, 1024, 1, 1030);
	run(1);
	expect_rows(0, want, N(want));
	/* The seam: A's last entry, then B's first. */
	assert_int_equal(mock.seen[0].iovcnt, 1024);
	run(2);
	expect_all_done(0);
	assert_int_equal(counter(TD_STAT_MERGED_IOV_ENTRIES), 1024);
}

static void test_iov_max_overflow(void **state)
{
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 600, 600, 0, 2, {0, 1}},
		{TD_OP_WRITE, 0, 600, 425, 425, 0, 2, {600, 601}},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	submit_tiny(0, 0, 600, 0);
	submit_tiny(1, 600, 425, 600);
	run(1);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
	assert_int_equal(sort_counter("sort_merges"), 0);
}

/* --- errors ---------------------------------------------------------------- */

/* A merged request fails: each of its children gets the error once. */
static void test_error_in_merged(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 8, 8, 4},
		{TD_OP_WRITE, 0, 0, 8, 0},
		{TD_OP_WRITE, 0, 16, 8, 8},
		{TD_OP_WRITE, 0, 800, 8, 32},
	};

	mock.hold = true;
	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(1);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[0].nr_sectors, 24);
	mock_complete_held(0, -ENOSPC);
	mock_complete_held(1, 0);
	run(3);
	assert_int_equal(T.nr_done, 4);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(T.calls[i], 1);
		assert_int_equal(T.err[i], -ENOSPC);
	}
	assert_int_equal(T.calls[3], 1);
	assert_int_equal(T.err[3], 0);
}

/* The lower driver refuses the merged request at submit. */
static void test_lower_submit_error(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 0, 8, 0},
		{TD_OP_WRITE, 0, 8, 8, 4},
		{TD_OP_WRITE, 0, 16, 8, 8},
	};

	mock.submit_err = -EIO;
	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(batch, N(batch));
	run(3);
	assert_int_equal(mock.nr_seen, 1);
	expect_all_done(-EIO);
}

/* --- plug: window and bounds --------------------------------------------------- */

static void run_until_seen(unsigned int n)
{
	for (int i = 0; i < WAIT_PASSES && mock.nr_seen < n; i++)
		assert_int_equal(td_loop_run_once(T.loop, 20), 0);
}

/* window_us > 0: requests of two passes merge once the window ends. */
static void test_window_merges_passes(void **state)
{
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 16, 1, 8, 1, {0}},
	};
	uint64_t t0 = td_now_ns();

	assert_int_equal(open_sort("sort:window_us=5000|mock"), 0);
	assert_int_equal(td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, 8, 8, 4)),
			 0);
	run(1);
	assert_int_equal(mock.nr_seen, 0);
	assert_int_equal(td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, 0, 8, 0)),
			 0);
	run(1);
	assert_int_equal(mock.nr_seen, 0);
	/* Held requests are in flight: the vbd cannot close yet. */
	assert_int_equal(td_vbd_close(T.vbd), -EBUSY);
	run_until_seen(1);
	assert_true(td_now_ns() - t0 >= 5000 * 1000ull);
	expect_rows(0, want, N(want));
	run(2);
	expect_all_done(0);
}

/* window_us = 0 (the default): nothing is held past its pass. */
static void test_no_window_holds_nothing(void **state)
{
	assert_int_equal(open_sort("sort|mock"), 0);
	assert_int_equal(td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, 8, 8, 4)),
			 0);
	run(1);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0, 0, 8, 0)),
			 0);
	run(1);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(sort_counter("sort_merges"), 0);
	run(2);
	expect_all_done(0);
}

/* Bounds release a plug at once, even inside a long window. */
static void test_plug_bounds(void **state)
{
	static const struct {
		const char *chain;
		uint32_t depth;
		uint32_t nr_writes;	     /* contiguous 4 KiB writes */
		unsigned int seen_at_submit; /* requests at the mock at once */
		uint32_t first_sectors;	     /* the first one's length */
		unsigned int seen_total;
	} rows[] = {
		{"sort:window_us=200000,max_reqs=4|mock", 0, 4, 1, 32, 1},
		{"sort:window_us=200000,max_bytes=8K|mock", 0, 2, 1, 16, 1},
		{"sort:window_us=200000|mock", 4, 4, 1, 32, 1}, /* pool full */
		{"sort:window_us=200000,max_reqs=2|mock", 0, 3, 1, 16, 2},
		{"sort:max_reqs=2|mock", 0, 4, 2, 16, 2},
	};

	for (unsigned int r = 0; r < N(rows); r++) {
		print_message("  chain %s\n", rows[r].chain);
		mock_reset();
		mock.size_sectors = DISK_SECS;
		T.nr_ios = 0;
		T.nr_done = 0;
		memset(T.calls, 0, sizeof(T.calls));
		assert_int_equal(open_depth(rows[r].chain, rows[r].depth), 0);
		for (uint32_t b = 0; b < rows[r].nr_writes; b++)
			assert_int_equal(
				td_vbd_submit(T.vbd, mkio(TD_OP_WRITE, 0,
							  b * BLK, BLK, 4 * b)),
				0);
		assert_int_equal(mock.nr_seen, rows[r].seen_at_submit);
		assert_int_equal(mock.seen[0].nr_sectors,
				 rows[r].first_sectors);
		run_until_seen(rows[r].seen_total);
		assert_int_equal(mock.nr_seen, rows[r].seen_total);
		run(2);
		expect_all_done(0);
		assert_int_equal(td_vbd_close(T.vbd), 0);
		T.vbd = NULL;
	}
}

/*
 * A plug is released once sort holds as many requests as its pool: here
 * one write waits behind an overlapping one, so the plug holds only three
 * of the four when the pool fills, inside a 200 ms window.
 */
static void test_plug_pool_full(void **state)
{
	static const struct in_row batch[] = {
		{TD_OP_WRITE, 0, 0, 8, 0},
		{TD_OP_WRITE, 0, 0, 8, 4}, /* waits for the first */
		{TD_OP_WRITE, 0, 40, 8, 20},
		{TD_OP_WRITE, 0, 48, 8, 24},
	};
	static const struct out_row want[] = {
		{TD_OP_WRITE, 0, 0, 8, 1, 0, 1, {0}},
		{TD_OP_WRITE, 0, 40, 16, 1, 8, 1, {20}},
	};

	mock.hold = true;
	assert_int_equal(open_depth("sort:window_us=200000|mock", 4), 0);
	submit_rows(batch, N(batch));
	expect_rows(0, want, N(want));
	mock_complete_held(0, 0);
	run(3);
	assert_int_equal(mock.nr_seen, 3);
	mock_complete_held(1, 0);
	mock_complete_held(2, 0);
	run(3);
	expect_all_done(0);
}

/* --- options and stats ------------------------------------------------------------ */

static void test_options(void **state)
{
	static const struct {
		const char *chain;
		int err;
		const char *says; /* in the log */
	} rows[] = {
		{"sort|mock", 0, NULL},
		{"sort:|mock", 0, NULL},
		{"sort:window_us=0,max_merge=1M,max_reqs=8,max_bytes=1M|mock",
		 0, NULL},
		{"sort:bogus=1|mock", -EINVAL, "unknown option 'bogus'"},
		{"sort:window=1|mock", -EINVAL, "unknown option 'window'"},
		{"sort:window_us=abc|mock", -EINVAL,
		 "bad value 'abc' for window_us"},
		{"sort:window_us=1000001|mock", -EINVAL,
		 "bad value '1000001' for window_us"},
		{"sort:window_us=18446744073709551616|mock", -EINVAL,
		 "for window_us"},
		{"sort:window_us=-1|mock", -EINVAL, "bad value '-1'"},
		{"sort:max_merge=1000|mock", -EINVAL,
		 "bad value '1000' for max_merge"},
		{"sort:max_merge=2G|mock", -EINVAL, "for max_merge"},
		{"sort:max_merge=4Q|mock", -EINVAL, "for max_merge"},
		{"sort:max_reqs=0|mock", -EINVAL, "bad value '0' for max_reqs"},
		{"sort:max_reqs=65537|mock", -EINVAL, "for max_reqs"},
		{"sort:max_bytes=|mock", -EINVAL, "max_bytes needs a value"},
		{"sort:max_bytes|mock", -EINVAL, "max_bytes needs a value"},
		{"sort:max_bytes=2T|mock", -EINVAL, "for max_bytes"},
		{"sort:window_us=10,,max_reqs=4|mock", -EINVAL, "empty option"},
		{"sort:window_us=10,|mock", -EINVAL, "empty option"},
	};

	for (unsigned int r = 0; r < N(rows); r++) {
		char *text = NULL;
		size_t len = 0;
		FILE *log = open_memstream(&text, &len);

		print_message("  chain %s\n", rows[r].chain);
		assert_non_null(log);
		td_log_set_stream(log);
		assert_int_equal(open_sort(rows[r].chain), rows[r].err);
		td_log_set_stream(NULL);
		fclose(log);
		if (rows[r].says)
			assert_non_null(strstr(text, rows[r].says));
		free(text);
		if (!rows[r].err) {
			assert_int_equal(td_vbd_close(T.vbd), 0);
		}
		T.vbd = NULL;
	}
}

/* Counters over two passes: the largest merge is a maximum. */
static void test_stats(void **state)
{
	static const struct in_row pass1[] = {
		{TD_OP_WRITE, 0, 0, 8, 0},
		{TD_OP_WRITE, 0, 8, 8, 8},
		{TD_OP_WRITE, 0, 16, 8, 16},
	};
	static const struct in_row pass2[] = {
		{TD_OP_READ, 0, 100, 4, 100},
		{TD_OP_READ, 0, 104, 4, 200},
		{TD_OP_READ, 0, 500, 8, 300},
	};

	assert_int_equal(open_sort("sort|mock"), 0);
	submit_rows(pass1, N(pass1));
	run(3);
	submit_rows(pass2, N(pass2));
	run(3);
	expect_all_done(0);
	assert_int_equal(sort_counter("sort_in"), 6);
	assert_int_equal(sort_counter("sort_out"), 3);
	assert_int_equal(sort_counter("sort_merges"), 3);
	assert_int_equal(sort_counter("sort_max_merge_bytes"), 12 * KIB);
	assert_int_equal(counter(TD_STAT_MERGED_IOV_ENTRIES), 3 + 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_interleaved_writes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_memory_adjacent_joined,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_interleaved_joined, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reads_writes_mixed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_discard_zeroes_flags,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_epochs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_flush_epochs_flowing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_waits_for_inflight,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlap_waits, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_overlap_chain, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_boundary, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_merge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lower_max_io, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_iov_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_iov_max_overflow, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_error_in_merged, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lower_submit_error, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_window_merges_passes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_window_holds_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_plug_bounds, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_plug_pool_full, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
