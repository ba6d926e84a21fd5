/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cbt-bitmap.c - the persistent dirty bitmap of the cbt filter: bits
 * set and written, runs reported rounded to the granularity, the file
 * read back after a clean close, after a kill (same boot: exact) and after
 * a host crash (another boot id: all dirty), damaged headers refused with
 * a reason, clear, grow and remove.  Expected values are written by hand.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "drivers/cbt/cbt-bitmap.h"

#define KiB 1024ull
#define MiB (1024 * KiB)

static char dir[64], path[128];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/test_cbt.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/b1.cbt", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static struct cbt_bitmap *make(uint64_t size)
{
	struct cbt_bitmap *b = NULL;
	char why[CBT_WHY_MAX] = "";

	unlink(path);
	assert_int_equal(cbt_bitmap_create(dir, "b1", 64 * KiB, size, "boot-A",
					   &b, why, sizeof(why)),
			 0);
	return b;
}

static struct cbt_bitmap *reopen(uint64_t size, const char *boot)
{
	struct cbt_bitmap *b = NULL;
	char why[CBT_WHY_MAX] = "";

	assert_int_equal(
		cbt_bitmap_open(path, size, boot, &b, why, sizeof(why)), 0);
	return b;
}

/* Extents of the whole disk, as (sectors, flags) pairs. */
static void expect_runs(const struct cbt_bitmap *b, unsigned int n, ...)
{
	struct td_extent ext[16];
	unsigned int got = 16;
	va_list ap;

	cbt_bitmap_extents(b, 0, b->size_bytes, ext, &got);
	assert_int_equal(got, n);
	va_start(ap, n);
	for (unsigned int i = 0; i < n; i++) {
		assert_int_equal(ext[i].nr_sectors, va_arg(ap, uint64_t));
		assert_int_equal(ext[i].flags, va_arg(ap, unsigned int));
	}
	va_end(ap);
}

/* 1 MiB disk, 16 granules of 64 KiB: writes at 4 KiB and 130 KiB..200 KiB. */
static void test_mark_and_runs(void **state)
{
	struct cbt_bitmap *b = make(MiB);
	struct td_extent ext[4];
	unsigned int n = 4;

	(void)state;
	expect_runs(b, 1, 2048ull, 0u);
	assert_int_equal(cbt_bitmap_mark(b, 4 * KiB, 4 * KiB), 0);
	assert_int_equal(cbt_bitmap_mark(b, 130 * KiB, 70 * KiB), 0);
	assert_int_equal(b->nr_dirty, 3); /* granules 0, 2, 3 */
	assert_int_equal(b->writes, 2);
	/* Set again: no write at all. */
	assert_int_equal(cbt_bitmap_mark(b, 0, 64 * KiB), 0);
	assert_int_equal(b->writes, 2);
	expect_runs(b, 4, 128ull, (unsigned)TD_EXTENT_DIRTY, 128ull, 0u, 256ull,
		    (unsigned)TD_EXTENT_DIRTY, 1536ull, 0u);
	/* A range from inside a granule: cut at the range, not rounded back. */
	cbt_bitmap_extents(b, 32 * KiB, 100 * KiB, ext, &n);
	assert_int_equal(n, 3);
	assert_int_equal(ext[0].nr_sectors, 64); /* 32K..64K dirty */
	assert_int_equal(ext[1].nr_sectors, 128);
	assert_int_equal(ext[2].nr_sectors, 8); /* 128K..132K dirty */
	/* Room for one: the first run only. */
	n = 1;
	cbt_bitmap_extents(b, 0, MiB, ext, &n);
	assert_int_equal(n, 1);
	cbt_bitmap_close(b);
}

static void test_clean_close_and_kill(void **state)
{
	struct cbt_bitmap *b = make(MiB);

	(void)state;
	assert_int_equal(cbt_bitmap_mark(b, 512 * KiB, 1), 0);
	cbt_bitmap_close(b);
	b = reopen(MiB, "boot-B"); /* clean: another boot changes nothing */
	assert_false(b->recovered);
	assert_int_equal(b->nr_dirty, 1);
	assert_int_equal(cbt_bitmap_mark(b, 0, 1), 0);
	/* Killed: no close, the file is IN_USE under boot-B. */
	close(b->fd);
	b->fd = -1;
	free(b->path);
	free(b->bits);
	free(b);
	b = reopen(MiB, "boot-B");
	assert_false(b->recovered);
	assert_int_equal(b->nr_dirty, 2);
	close(b->fd);
	b->fd = -1;
	free(b->path);
	free(b->bits);
	free(b);
	/* The host went down instead: another boot id, all dirty. */
	b = reopen(MiB, "boot-C");
	assert_true(b->recovered);
	assert_int_equal(b->nr_dirty, 16);
	expect_runs(b, 1, 2048ull, (unsigned)TD_EXTENT_DIRTY);
	assert_int_equal(cbt_bitmap_clear(b), 0);
	assert_int_equal(b->nr_dirty, 0);
	cbt_bitmap_close(b);
	b = reopen(MiB, "boot-D");
	assert_int_equal(b->nr_dirty, 0);
	cbt_bitmap_close(b);
}

/* 100 KiB disk: 2 granules, the last one partial; a grow adds clean ones. */
static void test_partial_and_grow(void **state)
{
	struct cbt_bitmap *b = make(100 * KiB);

	(void)state;
	assert_int_equal(b->nr_bits, 2);
	assert_int_equal(cbt_bitmap_mark(b, 99 * KiB, 10 * KiB), 0);
	expect_runs(b, 2, 128ull, 0u, 72ull, (unsigned)TD_EXTENT_DIRTY);
	assert_int_equal(cbt_bitmap_grow(b, MiB), 0);
	assert_int_equal(b->nr_bits, 16);
	expect_runs(b, 3, 128ull, 0u, 128ull, (unsigned)TD_EXTENT_DIRTY,
		    1792ull, 0u);
	cbt_bitmap_close(b);
	/* A disk smaller than the bitmap is refused; a larger one grows it. */
	{
		struct cbt_bitmap *c = NULL;
		char why[CBT_WHY_MAX] = "";

		assert_int_equal(cbt_bitmap_open(path, 512 * KiB, "x", &c, why,
						 sizeof(why)),
				 -EINVAL);
		assert_non_null(strstr(why, "remove it"));
	}
	b = reopen(2 * MiB, "boot-A");
	assert_int_equal(b->nr_bits, 32);
	assert_int_equal(b->nr_dirty, 1);
	assert_int_equal(cbt_bitmap_remove(b), 0);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_bad_input(void **state)
{
	static const char *const names[] = {"", ".x", "a/b", "a b",
					    "0123456789012345678901234567890123"
					    "4567890123456789012345678901234"};
	struct cbt_bitmap *b = NULL;
	char why[CBT_WHY_MAX];
	int fd;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(cbt_bitmap_create(dir, names[i], 64 * KiB, MiB,
						   "x", &b, why, sizeof(why)),
				 -EINVAL);
	assert_int_equal(cbt_bitmap_create(dir, "g", 3 * KiB, MiB, "x", &b, why,
					   sizeof(why)),
			 -EINVAL);
	assert_int_equal(cbt_bitmap_create(dir, "g", 96 * KiB, MiB, "x", &b,
					   why, sizeof(why)),
			 -EINVAL);
	b = make(MiB);
	assert_int_equal(cbt_bitmap_create(dir, "b1", 64 * KiB, MiB, "x", &b,
					   why, sizeof(why)),
			 -EEXIST);
	cbt_bitmap_close(b);
	/* One byte of the header changed: refused, with what to do. */
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "Z", 1, 20), 1);
	close(fd);
	why[0] = '\0';
	assert_int_equal(cbt_bitmap_open(path, MiB, "x", &b, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "full one"));
	/* Not there at all. */
	assert_int_equal(cbt_bitmap_open("/nonexistent/x.cbt", MiB, "x", &b,
					 why, sizeof(why)),
			 -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mark_and_runs),
		cmocka_unit_test(test_clean_close_and_kill),
		cmocka_unit_test(test_partial_and_grow),
		cmocka_unit_test(test_bad_input),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
