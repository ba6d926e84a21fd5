/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stats.c - histogram bucket arithmetic and names (tapdisk/stats.c).
 *
 * The expected buckets are written out by hand from the layout documented
 * in vbd.h; none of them is computed with the formula under test.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json.h"
#include "tapdisk/vbd.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The largest value the latency histogram tells apart: 2^34 - 1 µs. */
#define LAT_LAST_MAX_US 17179869183ull

/* --- segments ---------------------------------------------------------------- */

static void test_seg_bucket_table(void **state)
{
	static const struct {
		uint32_t nr_segments;
		unsigned int bucket;
	} rows[] = {
		/* 0 and 1 share bucket 0 */
		{0, 0},
		{1, 0},
		/* then bucket i holds (2^(i-1), 2^i] */
		{2, 1},
		{3, 2},
		{4, 2},
		{5, 3},
		{8, 3},
		{9, 4},
		{11, 4},
		{16, 4},
		{17, 5},
		{32, 5},
		{33, 6},
		{2048, 11},
		{2049, 12},
		{4096, 12},
		/* the last bucket takes everything above */
		{4097, 12},
		{UINT32_MAX, 12},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("td_seg_bucket(%u)\n", rows[i].nr_segments);
		assert_int_equal(td_seg_bucket(rows[i].nr_segments),
				 rows[i].bucket);
	}
}

static void test_seg_bucket_max_table(void **state)
{
	static const struct {
		unsigned int bucket;
		uint32_t max;
	} rows[] = {
		{0, 1},
		{1, 2},
		{2, 4},
		{3, 8},
		{4, 16},
		{5, 32},
		{10, 1024},
		{11, 2048},
		/* the last bucket is open-ended */
		{12, UINT32_MAX},
		{13, UINT32_MAX},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("td_seg_bucket_max(%u)\n", rows[i].bucket);
		assert_int_equal(td_seg_bucket_max(rows[i].bucket),
				 rows[i].max);
	}
}

static void test_seg_bucket_min_table(void **state)
{
	static const struct {
		unsigned int bucket;
		uint32_t min;
	} rows[] = {
		{0, 1}, {1, 2}, {2, 3}, {3, 5}, {4, 9}, {11, 1025}, {12, 2049},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("td_seg_bucket_min(%u)\n", rows[i].bucket);
		assert_int_equal(td_seg_bucket_min(rows[i].bucket),
				 rows[i].min);
	}
}

/* --- latency ----------------------------------------------------------------- */

static void test_lat_bucket_table(void **state)
{
	static const struct {
		uint64_t us;
		unsigned int bucket;
	} rows[] = {
		/* below 8 µs: one to one */
		{0, 0},
		{1, 1},
		{2, 2},
		{3, 3},
		{4, 4},
		{5, 5},
		{6, 6},
		{7, 7},
		/* [8, 16): still 1 µs wide */
		{8, 8},
		{9, 9},
		{10, 10},
		{11, 11},
		{12, 12},
		{13, 13},
		{14, 14},
		{15, 15},
		/* [16, 32): 2 µs wide */
		{16, 16},
		{17, 16},
		{18, 17},
		{19, 17},
		{20, 18},
		{31, 23},
		/* [32, 64): 4 µs wide */
		{32, 24},
		{35, 24},
		{36, 25},
		{63, 31},
		/* powers of two start a group of 8 */
		{64, 32},
		{128, 40},
		{1024, 64},
		{1152, 65},
		{1ull << 20, 144},
		{1ull << 33, 248},
		{LAT_LAST_MAX_US, 255},
		/* beyond the last bucket: clamped */
		{1ull << 34, 255},
		{1ull << 40, 255},
		{UINT64_MAX, 255},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("td_lat_bucket(%llu)\n",
			      (unsigned long long)rows[i].us);
		assert_int_equal(td_lat_bucket(rows[i].us), rows[i].bucket);
	}
}

static void test_lat_bucket_max_table(void **state)
{
	static const struct {
		unsigned int bucket;
		uint64_t max_us;
	} rows[] = {
		{0, 0},
		{1, 1},
		{7, 7},
		{8, 8},
		{15, 15},
		{16, 17},
		{17, 19},
		{18, 21},
		{23, 31},
		{24, 35},
		{31, 63},
		{32, 71},
		{64, 1151},
		{144, 1179647},
		{248, 9663676415ull},
		{255, LAT_LAST_MAX_US},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("td_lat_bucket_max_us(%u)\n", rows[i].bucket);
		assert_int_equal(td_lat_bucket_max_us(rows[i].bucket),
				 rows[i].max_us);
	}
}

/* v lands in b such that max_us(b - 1) < v <= max_us(b). */
static void check_lat_value(uint64_t v)
{
	unsigned int b = td_lat_bucket(v);

	if (b >= TD_LAT_BUCKETS || v > td_lat_bucket_max_us(b) ||
	    (b > 0 && td_lat_bucket_max_us(b - 1) >= v))
		fail_msg("%llu µs went to bucket %u", (unsigned long long)v, b);
}

static void test_lat_bucket_invariant(void **state)
{
	/* Every value of the first 2^20 µs (about one second)... */
	for (uint64_t v = 0; v < (1ull << 20); v++)
		check_lat_value(v);
	/* ...and the edges of every group up to the last bucket. */
	for (unsigned int e = 20; e < 34; e++) {
		uint64_t p = 1ull << e;

		for (uint64_t d = 0; d < 64; d++) {
			check_lat_value(p + d);
			check_lat_value(p - 1 - d);
		}
		check_lat_value(p + p / 2);
	}
	check_lat_value(LAT_LAST_MAX_US);
}

/* Buckets tile the axis: max_us(b - 1) + 1 is the first value of b. */
static void test_lat_buckets_contiguous(void **state)
{
	assert_int_equal(td_lat_bucket(0), 0);
	for (unsigned int b = 1; b < TD_LAT_BUCKETS; b++) {
		uint64_t first = td_lat_bucket_max_us(b - 1) + 1;

		assert_true(td_lat_bucket_max_us(b) >= first);
		assert_int_equal(td_lat_bucket(first), b);
		assert_int_equal(td_lat_bucket(td_lat_bucket_max_us(b)), b);
	}
}

/* --- percentiles --------------------------------------------------------------- */

static void test_percentile_empty(void **state)
{
	uint64_t hist[TD_LAT_BUCKETS] = {0};

	assert_int_equal(td_lat_percentile(hist, 50), 0);
	assert_int_equal(td_lat_percentile(hist, 99), 0);
	assert_int_equal(td_lat_percentile(hist, 100), 0);
}

static void test_percentile_single_bucket(void **state)
{
	uint64_t hist[TD_LAT_BUCKETS] = {0};

	hist[24] = 7; /* 32..35 µs */
	assert_int_equal(td_lat_percentile(hist, 1), 35);
	assert_int_equal(td_lat_percentile(hist, 50), 35);
	assert_int_equal(td_lat_percentile(hist, 99), 35);
	assert_int_equal(td_lat_percentile(hist, 100), 35);
}

static void test_percentile_two_buckets(void **state)
{
	static const struct {
		double p;
		uint64_t us;
	} rows[] = {
		/* 99 samples at 5 µs, one in 128..143 µs (bucket 40) */
		{1, 5},	     /* rank 1 */
		{50, 5},     /* rank 50 */
		{99, 5},     /* rank 99: the last at 5 µs */
		{99.5, 143}, /* rank 100 (99.5 rounds up) */
		{100, 143},  /* rank 100 */
	};
	uint64_t hist[TD_LAT_BUCKETS] = {0};

	hist[5] = 99;
	hist[40] = 1;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("p%g\n", rows[i].p);
		assert_int_equal(td_lat_percentile(hist, rows[i].p),
				 rows[i].us);
	}
}

static void test_percentile_half_and_half(void **state)
{
	static const struct {
		double p;
		uint64_t us;
	} rows[] = {
		/* one sample at 3 µs, one in 24576..26623 µs (bucket 100) */
		{50, 3},
		{51, 26623},
		{99, 26623},
		{100, 26623},
	};
	uint64_t hist[TD_LAT_BUCKETS] = {0};

	hist[3] = 1;
	hist[100] = 1;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("p%g\n", rows[i].p);
		assert_int_equal(td_lat_percentile(hist, rows[i].p),
				 rows[i].us);
	}
}

static void test_percentile_last_bucket(void **state)
{
	uint64_t hist[TD_LAT_BUCKETS] = {0};

	hist[0] = 3;
	hist[TD_LAT_BUCKETS - 1] = 1;
	assert_int_equal(td_lat_percentile(hist, 75), 0);
	assert_int_equal(td_lat_percentile(hist, 100), LAT_LAST_MAX_US);
}

/* --- names ------------------------------------------------------------------------ */

static void test_stat_names(void **state)
{
	static const struct {
		enum td_stat stat;
		const char *name;
	} rows[] = {
		{TD_STAT_BACKEND_SUBMITS, "backend_submits"},
		{TD_STAT_BACKEND_MERGES, "backend_merges"},
		{TD_STAT_MERGED_IOV_ENTRIES, "merged_iov_entries"},
		{TD_STAT_COUNT, "?"},
		{(enum td_stat)(TD_STAT_COUNT + 1), "?"},
		{(enum td_stat) - 1, "?"},
	};

	/* A counter added to the enum needs a name and a row here. */
	assert_int_equal(TD_STAT_COUNT, 3);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		assert_string_equal(td_stat_name(rows[i].stat), rows[i].name);
}

static void test_op_names(void **state)
{
	static const struct {
		enum td_op op;
		const char *name;
	} rows[] = {
		{TD_OP_READ, "read"},
		{TD_OP_WRITE, "write"},
		{TD_OP_FLUSH, "flush"},
		{TD_OP_DISCARD, "discard"},
		{TD_OP_WRITE_ZEROES, "write_zeroes"},
		{TD_OP_COUNT, "?"},
		{(enum td_op)1000, "?"},
		{(enum td_op) - 1, "?"},
	};

	assert_int_equal(TD_OP_COUNT, 5);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		assert_string_equal(td_op_name(rows[i].op), rows[i].name);
}

/* Online grow: equal and larger pass, smaller is refused with the reason. */
static void test_check_grow(void **state)
{
	struct td_strbuf why;

	(void)state;
	td_strbuf_init(&why);
	assert_int_equal(td_vbd_check_grow("aio", 100, 100, &why), 0);
	assert_int_equal(td_vbd_check_grow("aio", 100, 101, &why), 0);
	assert_int_equal(td_vbd_check_grow("aio", 0, UINT64_MAX, &why), 0);
	assert_int_equal(why.len, 0);
	assert_int_equal(td_vbd_check_grow("aio", 100, 99, &why), -EINVAL);
	assert_string_equal(td_strbuf_str(&why),
			    "aio: the size went down from 100 to 99 sectors; "
			    "a disk in use is never shrunk");
	td_strbuf_free(&why);
	td_strbuf_init(&why);
	assert_int_equal(td_vbd_check_grow("x", UINT64_MAX, 0, &why), -EINVAL);
	td_strbuf_free(&why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seg_bucket_table),
		cmocka_unit_test(test_check_grow),
		cmocka_unit_test(test_seg_bucket_max_table),
		cmocka_unit_test(test_seg_bucket_min_table),
		cmocka_unit_test(test_lat_bucket_table),
		cmocka_unit_test(test_lat_bucket_max_table),
		cmocka_unit_test(test_lat_bucket_invariant),
		cmocka_unit_test(test_lat_buckets_contiguous),
		cmocka_unit_test(test_percentile_empty),
		cmocka_unit_test(test_percentile_single_bucket),
		cmocka_unit_test(test_percentile_two_buckets),
		cmocka_unit_test(test_percentile_half_and_half),
		cmocka_unit_test(test_percentile_last_bucket),
		cmocka_unit_test(test_stat_names),
		cmocka_unit_test(test_op_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
