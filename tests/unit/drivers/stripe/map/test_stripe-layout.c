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
		/* the geometries of test_locate_geometries */
		{3 * MiB, 64 * KiB, 1, 1 * MiB, 0, 3},
		/* 10 MiB / 192 KiB = 53.3 -> 54 rows = 3456 KiB = 3.4 MiB */
		{10 * MiB, 64 * KiB, 3, 1 * MiB, 0, 4},
		/* 100 KiB / 16 KiB = 6.25 -> 7 rows = 28 KiB = 3.5 x 8 KiB */
		{100 * KiB, 4 * KiB, 4, 8 * KiB, 0, 4},
		/* 150 KiB / 40 KiB = 3.75 -> 4 rows = 32 KiB = 1.3 x 24 KiB */
		{150 * KiB, 8 * KiB, 5, 24 * KiB, 0, 2},
		/* 2^20 units / 7 = 149796.6 -> 149797 rows of 1 MiB / 256 */
		{1ull << 40, 1 * MiB, 7, 256 * MiB, 0, 586},
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

/*
 * More geometries, each row worked out by hand from DESIGN.md (k = v / U,
 * c = k % S, off = (k / S) * U + v % U, j = off / E, x = off % E); the
 * comment gives k and the stripe row k / S.  Both sides of unit, row and
 * extent boundaries, and the last byte of a disk whose last stripe row is
 * partial.
 */
struct geom_case {
	const char *name;
	uint64_t size, unit;
	uint32_t columns;
	uint64_t extent;
	uint32_t j;
	const struct loc_row *rows;
	size_t nr_rows;
};

/* S = 1, U = 64 KiB, E = 1 MiB, V = 3 MiB: the column is the disk. */
static const struct loc_row s1_rows[] = {
	{0, 0, 0, 0, 0},
	{1 * MiB - 1, 0, 0, 1048575, 1048575},
	{1 * MiB, 0, 1, 1048576, 0},
	{2 * MiB + 64 * KiB + 5, 0, 2, 2162693, 65541},
	{3 * MiB - 1, 0, 2, 3145727, 1048575},
};

/*
 * S = 3, U = 64 KiB, E = 1 MiB (16 rows), V = 10 MiB = 160 units: rows
 * 0..53, the last (k = 159..161) holding column 0 only.
 */
static const struct loc_row s3_rows[] = {
	{0, 0, 0, 0, 0},
	{65535, 0, 0, 65535, 65535},	       /* k=0, the unit's end */
	{65536, 1, 0, 0, 0},		       /* k=1 */
	{131072, 2, 0, 0, 0},		       /* k=2 */
	{196608, 0, 0, 65536, 65536},	       /* k=3, row 1 */
	{3 * MiB - 1, 2, 0, 1048575, 1048575}, /* k=47, row 15 */
	{3 * MiB, 0, 1, 1048576, 0},	       /* k=48, row 16 */
	{3 * MiB + 64 * KiB + 100, 1, 1, 1048676, 100}, /* k=49 */
	{53 * 64 * KiB, 2, 1, 1114112, 65536},		/* k=53, row 17 */
	{10 * MiB - 64 * KiB, 0, 3, 3473408, 327680},	/* k=159, row 53 */
	{10 * MiB - 1, 0, 3, 3538943, 393215},		/* the last byte */
};

/*
 * S = 4, U = 4 KiB, E = 8 KiB (2 rows), V = 100 KiB = 25 units: rows
 * 0..6, the last (k = 24) holding column 0 only.
 */
static const struct loc_row s4_rows[] = {
	{0, 0, 0, 0, 0},
	{4095, 0, 0, 4095, 4095},
	{4096, 1, 0, 0, 0},		    /* k=1 */
	{12289, 3, 0, 1, 1},		    /* k=3 */
	{16384, 0, 0, 4096, 4096},	    /* k=4, row 1 */
	{32767, 3, 0, 8191, 8191},	    /* k=7, row 1: extent 0's end */
	{32768, 0, 1, 8192, 0},		    /* k=8, row 2: extent 1 */
	{45063, 3, 1, 8199, 7},		    /* k=11, row 2 */
	{61440, 3, 1, 12288, 4096},	    /* k=15, row 3 */
	{98304, 0, 3, 24576, 0},	    /* k=24, row 6: extent 3 */
	{100 * KiB - 1, 0, 3, 28671, 4095}, /* the last byte */
};

/*
 * S = 5 (not a power of two), U = 8 KiB, E = 24 KiB (3 rows), V = 150 KiB
 * = 18.75 units: rows 0..3, the last holding columns 0..3, the last of
 * them (k = 18) in part.
 */
static const struct loc_row s5_rows[] = {
	{0, 0, 0, 0, 0},
	{32778, 4, 0, 10, 10},		    /* k=4 */
	{40960, 0, 0, 8192, 8192},	    /* k=5, row 1 */
	{65535, 2, 0, 16383, 16383},	    /* k=7, row 1 */
	{122879, 4, 0, 24575, 24575},	    /* k=14, row 2: extent 0's end */
	{122880, 0, 1, 24576, 0},	    /* k=15, row 3: extent 1 */
	{139265, 2, 1, 24577, 1},	    /* k=17, row 3 */
	{150 * KiB - 1, 3, 1, 30719, 6143}, /* k=18: the last byte */
};

/*
 * S = 7, U = 1 MiB, E = 256 MiB, V = 1 TiB: offsets beyond 32 bits.
 * 2^20 units: the last, k = 1048575 = 7 * 149796 + 3.
 */
static const struct loc_row s7_rows[] = {
	{7 * 256 * MiB - 1, 6, 0, 268435455, 268435455}, /* k=1791, row 255 */
	{7 * 256 * MiB, 0, 1, 268435456, 0},		 /* k=1792, row 256 */
	{(1ull << 40) - 1, 3, 585, 157073539071ull, 38797311},
};

#define GEOM(n, v, u, s, e, j, rows)                     \
	{                                                \
		n, v, u, s, e, j, rows, ARRAY_SIZE(rows) \
	}

static void test_locate_geometries(void **state)
{
	static const struct geom_case cases[] = {
		GEOM("S=1", 3 * MiB, 64 * KiB, 1, 1 * MiB, 3, s1_rows),
		GEOM("S=3", 10 * MiB, 64 * KiB, 3, 1 * MiB, 4, s3_rows),
		GEOM("S=4", 100 * KiB, 4 * KiB, 4, 8 * KiB, 4, s4_rows),
		GEOM("S=5", 150 * KiB, 8 * KiB, 5, 24 * KiB, 2, s5_rows),
		GEOM("S=7", 1ull << 40, 1 * MiB, 7, 256 * MiB, 586, s7_rows),
	};

	for (size_t g = 0; g < ARRAY_SIZE(cases); g++) {
		const struct geom_case *gc = &cases[g];
		struct stripe_layout l;

		assert_int_equal(stripe_layout_init(&l, gc->size, gc->unit,
						    gc->columns, gc->extent),
				 0);
		assert_int_equal(l.extents_per_column, gc->j);
		for (size_t i = 0; i < gc->nr_rows; i++) {
			const struct loc_row *r = &gc->rows[i];
			struct stripe_loc loc;

			print_message("%s v=%llu\n", gc->name,
				      (unsigned long long)r->v);
			stripe_layout_locate(&l, r->v, &loc);
			assert_int_equal(loc.column, r->column);
			assert_int_equal(loc.extent, r->extent);
			assert_int_equal(loc.column_offset, r->column_offset);
			assert_int_equal(loc.extent_offset, r->extent_offset);
			/* every place lies inside the disk's J extents */
			assert_true(loc.extent < l.extents_per_column);
		}
	}
}

/*
 * stripe_layout_virtual, the inverse of locate (used to turn a server's
 * GET LBA STATUS answer into virtual ranges): (column, column offset) ->
 * virtual offset, worked out by hand.  Geometry: 3 columns, 64 KiB units,
 * 256 KiB extents, 2 MiB disk.
 */
struct virt_row {
	uint32_t column;
	uint64_t column_offset, v;
};

static void test_virtual(void **state)
{
	static const struct virt_row rows[] = {
		{0, 0, 0},
		{1, 0, 64 * KiB},
		{2, 0, 128 * KiB},
		{2, 64 * KiB - 512, 192 * KiB - 512},
		/* row 1 of column 0 follows column 2's row 0 */
		{0, 64 * KiB, 192 * KiB},
		{1, 64 * KiB + 4 * KiB, 256 * KiB + 4 * KiB},
		/* extent 1 of column 1 starts at its 256 KiB: row 4 */
		{1, 256 * KiB, 4 * 192 * KiB + 64 * KiB},
		{2, 256 * KiB + 100, 4 * 192 * KiB + 128 * KiB + 100},
		/* the last row (10) of column 2: past the 2 MiB end */
		{2, 640 * KiB, 10 * 192 * KiB + 128 * KiB},
	};
	struct stripe_layout l;
	struct stripe_loc loc;

	(void)state;
	assert_int_equal(
		stripe_layout_init(&l, 2 * MiB, 64 * KiB, 3, 256 * KiB), 0);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		assert_int_equal(stripe_layout_virtual(&l, rows[i].column,
						       rows[i].column_offset),
				 rows[i].v);
		if (rows[i].v >= l.size_bytes)
			continue;
		stripe_layout_locate(&l, rows[i].v, &loc);
		assert_int_equal(loc.column, rows[i].column);
		assert_int_equal(loc.column_offset, rows[i].column_offset);
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
		cmocka_unit_test(test_locate_geometries),
		cmocka_unit_test(test_unit_ok),
		cmocka_unit_test(test_init_rejects),
		cmocka_unit_test(test_virtual),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
