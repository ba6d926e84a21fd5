/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_snapshot-state.c - chunk bookkeeping and the job file of a
 * snapshot copy (tapdisk/snapshot-state.c): geometry rows written by
 * hand, a round trip through the file, and damaged files refused.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tapdisk/snapshot-state.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIB_SECTORS   2048u

static char dir[64];
static char path[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/test_snap.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vbd.job", dir);
	return 0;
}

static int teardown(void **state)
{
	char tmp[160];

	unlink(path);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	snprintf(tmp, sizeof(tmp), "%s.speed", path);
	unlink(tmp);
	rmdir(dir);
	return 0;
}

static void test_geometry_table(void **state)
{
	static const struct {
		uint64_t size_sectors;
		uint64_t nr_chunks;
		uint32_t last_len;
	} rows[] = {
		{1, 1, 1},	 {2048, 1, 2048},    {2049, 2, 1},
		{4096, 2, 2048}, {131072, 64, 2048}, /* 64 MiB */
		{131080, 65, 8},
	};
	struct td_strbuf why;

	td_strbuf_init(&why);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct td_snap_state st;

		assert_int_equal(td_snap_state_init(&st, "aio:/x",
						    rows[i].size_sectors,
						    MIB_SECTORS, &why),
				 0);
		assert_int_equal(st.nr_chunks, rows[i].nr_chunks);
		assert_int_equal(td_snap_chunk_len(&st, st.nr_chunks - 1),
				 rows[i].last_len);
		td_snap_state_fini(&st);
	}
	td_strbuf_free(&why);
}

static void test_chunk_range_table(void **state)
{
	static const struct {
		uint64_t sector, nr, first, last;
	} rows[] = {
		{0, 8, 0, 0},	    {2040, 8, 0, 0},	    {2040, 16, 0, 1},
		{2048, 8, 1, 1},    {0, 4096, 0, 1},	    {4095, 1, 1, 1},
		{4096, 2049, 2, 3}, {129024, 2048, 63, 63},
	};
	struct td_snap_state st;
	struct td_strbuf why;

	td_strbuf_init(&why);
	assert_int_equal(
		td_snap_state_init(&st, "aio:/x", 131072, MIB_SECTORS, &why),
		0);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		uint64_t first, last;

		td_snap_chunk_range(&st, rows[i].sector, rows[i].nr, &first,
				    &last);
		assert_int_equal(first, rows[i].first);
		assert_int_equal(last, rows[i].last);
	}
	td_snap_state_fini(&st);
	td_strbuf_free(&why);
}

static void test_bad_geometry(void **state)
{
	struct td_snap_state st;
	struct td_strbuf why;

	td_strbuf_init(&why);
	assert_int_equal(td_snap_state_init(&st, "aio:/x", 100, 3000, &why),
			 -EINVAL);
	assert_non_null(strstr(td_strbuf_str(&why), "power of two"));
	assert_int_equal(td_snap_state_init(&st, "aio:/x", 0, 2048, &why),
			 -EINVAL);
	assert_int_equal(td_snap_state_init(&st, "", 100, 2048, &why), -EINVAL);
	assert_int_equal(td_snap_state_init(&st, "a\nb", 100, 2048, &why),
			 -EINVAL);
	td_strbuf_free(&why);
}

static void test_next_uncopied(void **state)
{
	struct td_snap_state st;
	struct td_strbuf why;

	td_strbuf_init(&why);
	assert_int_equal(td_snap_state_init(&st, "aio:/x", 20 * MIB_SECTORS,
					    MIB_SECTORS, &why),
			 0);
	for (uint64_t i = 0; i < 17; i++)
		if (i != 9)
			assert_int_equal(td_snap_state_mark(&st, i), 0);
	assert_int_equal(st.nr_copied, 16);
	assert_int_equal(td_snap_next_uncopied(&st, 0), 9);
	assert_int_equal(td_snap_next_uncopied(&st, 10), 17);
	assert_int_equal(td_snap_state_mark(&st, 3), 0); /* again: no-op */
	assert_int_equal(st.nr_copied, 16);
	for (uint64_t i = 17; i < 20; i++)
		assert_int_equal(td_snap_state_mark(&st, i), 0);
	assert_int_equal(td_snap_next_uncopied(&st, 10), 20);
	td_snap_state_fini(&st);
	td_strbuf_free(&why);
}

static void test_round_trip(void **state)
{
	struct td_snap_state st, back;
	struct td_strbuf why;

	td_strbuf_init(&why);
	assert_int_equal(td_snap_state_init(&st, "sort|aio:/srv/t.img",
					    10 * MIB_SECTORS + 8, MIB_SECTORS,
					    &why),
			 0);
	assert_int_equal(td_snap_state_create(&st, path, &why), 0);
	assert_int_equal(td_snap_state_mark(&st, 0), 0);
	assert_int_equal(td_snap_state_mark(&st, 10), 0); /* the short one */
	/* A run across a byte boundary, one chunk of it set already. */
	assert_int_equal(td_snap_state_mark(&st, 5), 0);
	assert_int_equal(td_snap_state_mark_run(&st, 4, 6), 0); /* 4-9 */
	/* Marked on disk, not only in memory: read a second copy. */
	assert_int_equal(td_snap_state_load(&back, path, &why), 0);
	assert_string_equal(back.target, "sort|aio:/srv/t.img");
	assert_int_equal(back.size_sectors, 10 * MIB_SECTORS + 8);
	assert_int_equal(back.nr_chunks, 11);
	assert_int_equal(back.nr_copied, 8);
	assert_true(td_snap_copied(&back, 0));
	assert_false(td_snap_copied(&back, 1));
	assert_false(td_snap_copied(&back, 3));
	for (uint64_t i = 4; i <= 10; i++)
		assert_true(td_snap_copied(&back, i));
	td_snap_state_fini(&back);
	/* A second job on the same disk is refused while the file is there. */
	assert_int_equal(td_snap_state_create(&st, path, &why), -EEXIST);
	assert_non_null(strstr(td_strbuf_str(&why), "exists"));
	/* One sync per mark; group commit: set runs, then one sync. */
	assert_int_equal(st.nr_syncs, 4);
	assert_int_equal(td_snap_state_set_run(&st, 1, 1), 0);
	assert_int_equal(td_snap_state_set_run(&st, 2, 2), 0);
	assert_int_equal(st.nr_syncs, 4);
	assert_int_equal(td_snap_state_sync(&st), 0);
	assert_int_equal(st.nr_syncs, 5);
	assert_int_equal(td_snap_state_load(&back, path, &why), 0);
	assert_int_equal(back.nr_copied, 11);
	td_snap_state_fini(&back);
	assert_int_equal(td_snap_state_remove(&st), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(td_snap_state_load(&back, path, &why), -ENOENT);
	td_strbuf_free(&why);
}

/* Write a job file for 11 chunks, then damage it with fn. */
/* A redirect-on-write job keeps its inodes; a bad row line is refused. */
static void test_row_round_trip(void **state)
{
	static const char *const bad[] = {"row 1 2\n", "row 1 2 2\n",
					  "row 1 0 3\n", "row 1 2 3 4\n",
					  "row x 2 3\n"};
	struct td_snap_state st, back;
	struct td_strbuf why;
	char hdr[TD_SNAP_HEADER_BYTES];
	int fd;

	td_strbuf_init(&why);
	assert_int_equal(td_snap_state_init(&st, "aio:/srv/t.img",
					    4 * MIB_SECTORS, MIB_SECTORS, &why),
			 0);
	st.row = true;
	st.row_dev = 2049;
	st.row_lower_ino = 12;
	st.row_upper_ino = 13;
	assert_int_equal(td_snap_state_create(&st, path, &why), 0);
	assert_int_equal(td_snap_state_set_run(&st, 1, 2), 0); /* no sync */
	assert_int_equal(st.nr_syncs, 0);
	assert_int_equal(td_snap_state_load(&back, path, &why), 0);
	assert_true(back.row);
	assert_int_equal(back.row_dev, 2049);
	assert_int_equal(back.row_lower_ino, 12);
	assert_int_equal(back.row_upper_ino, 13);
	assert_string_equal(back.target, "aio:/srv/t.img");
	assert_int_equal(back.nr_copied, 2); /* in the file unsynced */
	td_snap_state_fini(&back);
	td_snap_state_fini(&st);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		fd = open(path, O_RDWR);
		assert_true(fd >= 0);
		memset(hdr, 0, sizeof(hdr));
		snprintf(hdr, sizeof(hdr),
			 "tapstripe-snapshot-job 1\nsize_sectors %u\n"
			 "chunk_sectors %u\ntarget aio:/t\n%send\n",
			 4 * MIB_SECTORS, MIB_SECTORS, bad[i]);
		assert_int_equal(pwrite(fd, hdr, sizeof(hdr), 0),
				 (ssize_t)sizeof(hdr));
		close(fd);
		td_strbuf_reset(&why);
		assert_int_equal(td_snap_state_load(&back, path, &why),
				 -EINVAL);
		assert_non_null(strstr(td_strbuf_str(&why), "bad row line"));
	}
	unlink(path);
	td_strbuf_free(&why);
}

static void write_then(void (*fn)(int fd))
{
	struct td_snap_state st;
	struct td_strbuf why;
	int fd;

	td_strbuf_init(&why);
	assert_int_equal(td_snap_state_init(&st, "aio:/t", 11 * MIB_SECTORS,
					    MIB_SECTORS, &why),
			 0);
	assert_int_equal(td_snap_state_create(&st, path, &why), 0);
	td_snap_state_fini(&st);
	td_strbuf_free(&why);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	fn(fd);
	close(fd);
}

static void bad_magic(int fd)
{
	assert_int_equal(pwrite(fd, "X", 1, 0), 1);
}

static void cut_short(int fd)
{
	assert_int_equal(ftruncate(fd, TD_SNAP_HEADER_BYTES + 1), 0);
}

static void bits_beyond(int fd)
{
	unsigned char b = 0x80; /* chunk 15 of 11 */

	assert_int_equal(pwrite(fd, &b, 1, TD_SNAP_HEADER_BYTES + 1), 1);
}

static void no_target(int fd)
{
	char hdr[80];

	assert_int_equal(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	*strstr(hdr, "target") = 'T';
	assert_int_equal(pwrite(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
}

static void tiny(int fd)
{
	assert_int_equal(ftruncate(fd, 100), 0);
}

static void test_corrupt_refused(void **state)
{
	static const struct {
		void (*damage)(int fd);
		const char *reason;
	} rows[] = {
		{bad_magic, "not a snapshot job file (bad header)"},
		{cut_short, "cut short: 1 of 2 bitmap bytes"},
		{bits_beyond, "bits set beyond the last chunk"},
		{no_target, "not a snapshot job file (no target)"},
		{tiny, "not a snapshot job file (too short)"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct td_snap_state st;
		struct td_strbuf why;

		write_then(rows[i].damage);
		td_strbuf_init(&why);
		assert_int_equal(td_snap_state_load(&st, path, &why), -EINVAL);
		assert_non_null(strstr(td_strbuf_str(&why), path));
		assert_non_null(strstr(td_strbuf_str(&why), rows[i].reason));
		assert_null(st.bits);
		td_strbuf_free(&why);
		unlink(path);
	}
}

/* Write text as the job's speed file. */
static void put_speed_file(const char *text)
{
	char sp[160];
	FILE *f;

	snprintf(sp, sizeof(sp), "%s.speed", path);
	assert_non_null(f = fopen(sp, "w"));
	fputs(text, f);
	fclose(f);
}

/*
 * The speed limits next to the job file: none kept, a round trip (the
 * last save wins), malformed files refused, and removed with the job.
 */
static void test_speed_kept(void **state)
{
	static const char *const bad[] = {
		"",
		"speed 1\n",
		"speed x busy_speed 2\n",
		"speed 1 busy_speed 2\ntrailing\n",
		"busy_speed 2 speed 1\n",
	};
	struct td_snap_state st;
	struct td_strbuf why;
	uint64_t speed = 7, busy = 7;
	char sp[160];

	(void)state;
	td_strbuf_init(&why);
	snprintf(sp, sizeof(sp), "%s.speed", path);
	assert_int_equal(td_snap_speed_load(path, &speed, &busy), -ENOENT);
	assert_int_equal(td_snap_speed_save(path, 1, 2), 0);
	assert_int_equal(td_snap_speed_save(path, 0, 16777216), 0);
	assert_int_equal(td_snap_speed_load(path, &speed, &busy), 0);
	assert_int_equal(speed, 0);
	assert_int_equal(busy, 16777216);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		put_speed_file(bad[i]);
		assert_int_equal(td_snap_speed_load(path, &speed, &busy),
				 -EINVAL);
	}
	/* Removing the job removes its limits; a job without them too. */
	assert_int_equal(
		td_snap_state_init(&st, "aio:/srv/t.img", MIB_SECTORS, 8, &why),
		0);
	assert_int_equal(td_snap_state_create(&st, path, &why), 0);
	assert_int_equal(td_snap_speed_save(path, 5, 6), 0);
	assert_int_equal(td_snap_state_remove(&st), 0);
	assert_int_equal(access(sp, F_OK), -1);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(
		td_snap_state_init(&st, "aio:/srv/t.img", MIB_SECTORS, 8, &why),
		0);
	assert_int_equal(td_snap_state_create(&st, path, &why), 0);
	assert_int_equal(td_snap_state_remove(&st), 0);
	assert_int_equal(access(path, F_OK), -1);
	td_strbuf_free(&why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry_table),
		cmocka_unit_test(test_chunk_range_table),
		cmocka_unit_test(test_bad_geometry),
		cmocka_unit_test(test_next_uncopied),
		cmocka_unit_test_setup_teardown(test_round_trip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_row_round_trip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_speed_kept, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
