/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stripe-layout.c - drivers/stripe-layout.c against tables worked out
 * by hand from DESIGN.md's "Stripe layout (exact)" (the formula is not
 * re-derived here: every expected value is written out).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "drivers/stripe/map/stripe-layout.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define KiB	      1024ull
#define MiB	      (1024 * KiB)
#define GiB	      (1024 * MiB)

struct j_row {
	uint64_t size, unit;
	uint32_t columns;
	uint64_t extent;
	int ret;
	uint32_t j;
};

static void test_extents_per_column(void **state)
{
	static const struct j_row rows[] = {
		/* 1 GiB over 4 columns of 1 MiB units: 256 rows = 256 MiB */
		{1 * GiB, 1 * MiB, 4, 256 * MiB, 0, 1},
		/* one sector more needs a 257th row, so a second extent */
		{1 * GiB + 512, 1 * MiB, 4, 256 * MiB, 0, 2},
		/* 10 GiB / 192 KiB = 54613.3 -> 54614 rows of 64 KiB =
		 * 3579183104 bytes = 13.3 extents of 256 MiB -> 14 */
		{10 * GiB, 64 * KiB, 3, 256 * MiB, 0, 14},
		/* 2 MiB / 192 KiB -> 11 rows = 704 KiB = 2.75 x 256 KiB */
		{2 * MiB, 64 * KiB, 3, 256 * KiB, 0, 3},
		{4096, 4 * KiB, 1, 1 * MiB, 0, 1},
		{4 * KiB, 4 * KiB, 1, 4 * KiB, 0, 1},
		/* a unit that is not a power of two, or below 4 KiB */
		{1 * GiB, 3000, 1, 256 * MiB, -EINVAL, 0},
		{1 * GiB, 2 * KiB, 1, 256 * MiB, -EINVAL, 0},
		{1 * GiB, 2 * GiB, 1, 2 * GiB, -EINVAL, 0},
		/* an extent that is not a multiple of the unit, or too big */
		{1 * GiB, 64 * KiB, 1, 96 * KiB, -EINVAL, 0},
		{1 * GiB, 64 * KiB, 1, 2048 * GiB, -EINVAL, 0},
		{1 * GiB, 64 * KiB, 1, 0, -EINVAL, 0},
		/* columns out of 1..256, size 0 */
		{1 * GiB, 1 * MiB, 0, 256 * MiB, -EINVAL, 0},
		{1 * GiB, 1 * MiB, 257, 256 * MiB, -EINVAL, 0},
		{0, 1 * MiB, 4, 256 * MiB, -EINVAL, 0},
		/* rows * U overflows 64 bits */
		{UINT64_MAX, 4 * KiB, 1, 4 * KiB, -EOVERFLOW, 0},
		/* 2^40 / 4 KiB = 2^28 extents per column, above 2^20 */
		{1ull << 40, 4 * KiB, 1, 4 * KiB, -EOVERFLOW, 0},
		/* exactly 2^20 is allowed */
		{1ull << 32, 4 * KiB, 1, 4 * KiB, 0, 1u << 20},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		uint32_t j = 0;

		print_message("row %zu\n", i);
		assert_int_equal(stripe_layout_extents_per_column(
					 rows[i].size, rows[i].unit,
					 rows[i].columns, rows[i].extent, &j),
				 rows[i].ret);
		if (!rows[i].ret)
			assert_int_equal(j, rows[i].j);
	}
}

struct loc_row {
	uint64_t v;
	uint32_t column, extent;
	uint64_t column_offset, extent_offset;
};

/* V = 2 MiB, U = 64 KiB, S = 3, E = 256 KiB (4 units), J = 3. */
static void test_locate(void **state)
{
	static const struct loc_row rows[] = {
		{0, 0, 0, 0, 0},
		{65535, 0, 0, 65535, 65535},
		{65536, 1, 0, 0, 0},		     /* k=1 */
		{2 * 65536 + 100, 2, 0, 100, 100},   /* k=2 */
		{3 * 65536, 0, 0, 65536, 65536},     /* k=3: row 1 */
		{4 * 65536 + 7, 1, 0, 65543, 65543}, /* k=4 */
		{11 * 65536, 2, 0, 196608, 196608},  /* k=11: row 3 */
		{12 * 65536, 0, 1, 262144, 0},	     /* k=12: row 4, extent 1 */
		{13 * 65536 + 5, 1, 1, 262149, 5},   /* k=13 */
		{24 * 65536, 0, 2, 524288, 0},	     /* k=24: row 8, extent 2 */
		{2 * MiB - 1, 1, 2, 720895, 196607}, /* k=31: row 10 */
	};
	struct stripe_layout l;

	assert_int_equal(
		stripe_layout_init(&l, 2 * MiB, 64 * KiB, 3, 256 * KiB), 0);
	assert_int_equal(l.extents_per_column, 3);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct stripe_loc loc;

		print_message("v=%llu\n", (unsigned long long)rows[i].v);
		stripe_layout_locate(&l, rows[i].v, &loc);
		assert_int_equal(loc.column, rows[i].column);
		assert_int_equal(loc.extent, rows[i].extent);
		assert_int_equal(loc.column_offset, rows[i].column_offset);
		assert_int_equal(loc.extent_offset, rows[i].extent_offset);
	}
}

static void test_unit_ok(void **state)
{
	assert_true(stripe_layout_unit_ok(4 * KiB));
	assert_true(stripe_layout_unit_ok(1 * MiB));
	assert_true(stripe_layout_unit_ok(1 * GiB));
	assert_false(stripe_layout_unit_ok(2 * GiB));
	assert_false(stripe_layout_unit_ok(2 * KiB));
	assert_false(stripe_layout_unit_ok(12 * KiB));
	assert_false(stripe_layout_unit_ok(0));
}

static void test_init_rejects(void **state)
{
	struct stripe_layout l;

	assert_int_equal(stripe_layout_init(&l, 1 * GiB, 3000, 1, 1 * MiB),
			 -EINVAL);
	assert_int_equal(
		stripe_layout_init(&l, 1ull << 40, 4 * KiB, 1, 4 * KiB),
		-EOVERFLOW);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_extents_per_column),
		cmocka_unit_test(test_locate),
		cmocka_unit_test(test_unit_ok),
		cmocka_unit_test(test_init_rejects),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
