/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_map-grow.c - growing a mapping file (issue #21 item 1): where a
 * slot or region index goes when the extents per column grow (tables
 * written by hand), and the grown map rebuilt from the map in force and
 * a grown map written earlier (MAP.grow): the result's text written by
 * hand, and one test per reason a grown map is refused.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "drivers/stripe/map/map.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * The map in force: 2 columns, J = 2, 2 replicas, 24 KiB extents (48
 * blocks of 512), 4 KiB regions (6 per extent), 4 servers (server 3
 * holds only a move target); one replica partly dirty, one stale.
 */
#define MAGIC "tapstripe-map 2\n"
#define COMMENT                                                  \
	"# tapstripe mapping file (see drivers/mapfile.h); the " \
	"last line checksums the rest\n"
#define HEADER(size, j)                                                    \
	"vdisk vd2\nsize-bytes " size "\nstripe-unit-bytes 4096\ncolumns " \
	"2\nextents-per-column " j "\nreplicas 2\nextent-size-bytes "      \
	"24576\nmaster 10.0.0.9:7700\nregion-bytes 4096\n"
#define SRV(i, ip, t)                                          \
	"server " i " address 10.0.0." ip " portal 10.0.0." ip \
	":3260 target iqn.t:" t " lun 1 block-size 512\n"
#define SERVERS SRV("0", "1", "a") SRV("1", "2", "b") SRV("2", "3", "c")
#define CUR                                                             \
	MAGIC COMMENT HEADER("98304", "2") SERVERS SRV(                 \
		"3", "4", "d") "extent 0 0 0 server 0 lba 0 ok\n"       \
			       "extent 0 0 1 server 1 lba 0 ok\n"       \
			       "extent 0 1 0 server 1 lba 48 ok\n"      \
			       "extent 0 1 1 server 2 lba 0 dirty 21\n" \
			       "extent 1 0 0 server 2 lba 48 stale\n"   \
			       "extent 1 0 1 server 0 lba 48 ok\n"      \
			       "extent 1 1 0 server 0 lba 96 ok\n"      \
			       "extent 1 1 1 server 1 lba 96 ok\n"      \
			       "move 0 0 1 server 3 lba 0 dirty 30\n"

/*
 * The grown map stripe-ctl wrote before the marks and the move above
 * (its old slots all ok): J = 3, a new server e (its index 3 here).
 */
#define OLD_C0_CLEAN                        \
	"extent 0 0 0 server 0 lba 0 ok\n"  \
	"extent 0 0 1 server 1 lba 0 ok\n"  \
	"extent 0 1 0 server 1 lba 48 ok\n" \
	"extent 0 1 1 server 2 lba 0 ok\n"
#define OLD_C1_CLEAN                        \
	"extent 1 0 0 server 2 lba 48 ok\n" \
	"extent 1 0 1 server 0 lba 48 ok\n" \
	"extent 1 1 0 server 0 lba 96 ok\n" \
	"extent 1 1 1 server 1 lba 96 ok\n"
/* The slots of the side file, old and added, in the file's order. */
#define SIDE_SLOTS(x020, x021)                               \
	OLD_C0_CLEAN "extent 0 2 0 " x020 "\n"               \
		     "extent 0 2 1 " x021 "\n" OLD_C1_CLEAN  \
		     "extent 1 2 0 server 1 lba 144 stale\n" \
		     "extent 1 2 1 server 2 lba 96 ok\n"
#define SIDE_HEAD MAGIC COMMENT HEADER("147456", "3") SERVERS SRV("3", "5", "e")
#define SIDE	  SIDE_HEAD SIDE_SLOTS("server 3 lba 0 ok", "server 0 lba 144 ok")

/* The merge, by hand: cur's slots at their new places, side's added. */
#define GROWN                                                               \
	MAGIC COMMENT HEADER("147456", "3") SERVERS SRV("3", "4", "d")      \
		SRV("4", "5", "e") "extent 0 0 0 server 0 lba 0 ok\n"       \
				   "extent 0 0 1 server 1 lba 0 ok\n"       \
				   "extent 0 1 0 server 1 lba 48 ok\n"      \
				   "extent 0 1 1 server 2 lba 0 dirty 21\n" \
				   "extent 0 2 0 server 4 lba 0 ok\n"       \
				   "extent 0 2 1 server 0 lba 144 ok\n"     \
				   "extent 1 0 0 server 2 lba 48 stale\n"   \
				   "extent 1 0 1 server 0 lba 48 ok\n"      \
				   "extent 1 1 0 server 0 lba 96 ok\n"      \
				   "extent 1 1 1 server 1 lba 96 ok\n"      \
				   "extent 1 2 0 server 1 lba 144 stale\n"  \
				   "extent 1 2 1 server 2 lba 96 ok\n"      \
				   "move 0 0 1 server 3 lba 0 dirty 30\n"

static char *seal(const char *body)
{
	size_t len = strlen(body), size = len + 32;
	char *text = malloc(size);

	assert_non_null(text);
	snprintf(text, size, "%schecksum crc32c %08x\n", body,
		 stripe_map_crc32c(0, body, len));
	return text;
}

static void parse_ok(const char *body, struct stripe_map *m)
{
	struct stripe_map_error err;
	char *text = seal(body);
	int ret = stripe_map_parse(text, strlen(text), m, &err);

	if (ret)
		print_message("line %u: %s\n", err.line, err.reason);
	assert_int_equal(ret, 0);
	free(text);
}

/* --- re-index ------------------------------------------------------------- */

struct reindex_row {
	uint64_t index;
	uint32_t old_j, new_j, per_extent;
	uint64_t want;
};

/* (c, j, i) -> (c * J + j) * n + i, then with J': worked out by hand. */
static const struct reindex_row reindex_rows[] = {
	/* slots: 2 columns, J 2 -> 3, 2 replicas */
	{0, 2, 3, 2, 0}, /* (0,0,0) */
	{1, 2, 3, 2, 1}, /* (0,0,1) */
	{2, 2, 3, 2, 2}, /* (0,1,0) */
	{3, 2, 3, 2, 3}, /* (0,1,1) */
	{4, 2, 3, 2, 6}, /* (1,0,0) */
	{5, 2, 3, 2, 7}, /* (1,0,1) */
	{6, 2, 3, 2, 8}, /* (1,1,0) */
	{7, 2, 3, 2, 9}, /* (1,1,1) */
	/* activity-log regions: 6 per extent, J 2 -> 5 */
	{9, 2, 5, 6, 9},   /* (0,1,3) */
	{17, 2, 5, 6, 35}, /* (1,0,5) */
	{18, 2, 5, 6, 36}, /* (1,1,0) */
	{23, 2, 5, 6, 41}, /* (1,1,5) */
	/* 3 columns, J 1 -> 4, 3 replicas */
	{5, 1, 4, 3, 14}, /* (1,0,2) */
	{7, 1, 4, 3, 25}, /* (2,0,1) */
	/* J unchanged: the identity */
	{7, 2, 2, 2, 7},
};

static void test_grow_index(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(reindex_rows); i++) {
		const struct reindex_row *r = &reindex_rows[i];

		assert_int_equal(stripe_map_grow_index(r->index, r->old_j,
						       r->new_j, r->per_extent),
				 r->want);
	}
}

static void test_grow_slot(void **state)
{
	static const size_t want[8] = {0, 1, 2, 3, 6, 7, 8, 9};
	struct stripe_map m;

	(void)state;
	parse_ok(CUR, &m);
	for (size_t s = 0; s < 8; s++)
		assert_int_equal(stripe_map_grow_slot(&m, 3, s), want[s]);
	stripe_map_free(&m);
}

/* --- merge ---------------------------------------------------------------- */

static int merge(const char *cur_body, const char *side_body,
		 struct stripe_map *out, struct stripe_map_error *err)
{
	struct stripe_map cur, side;
	int ret;

	parse_ok(cur_body, &cur);
	parse_ok(side_body, &side);
	ret = stripe_map_grow_merge(&cur, &side, out, err);
	stripe_map_free(&cur);
	stripe_map_free(&side);
	return ret;
}

static void test_merge(void **state)
{
	struct stripe_map_error err;
	struct stripe_map g;
	struct td_strbuf sb;
	char *want = seal(GROWN);
	int ret;

	(void)state;
	ret = merge(CUR, SIDE, &g, &err);
	if (ret)
		print_message("%s\n", err.reason);
	assert_int_equal(ret, 0);
	td_strbuf_init(&sb);
	assert_int_equal(stripe_map_format(&g, &sb, &err), 0);
	assert_string_equal(td_strbuf_str(&sb), want);
	td_strbuf_free(&sb);
	stripe_map_free(&g);
	free(want);
}

/* A side file with no new server: none appended. */
static void test_merge_known_servers(void **state)
{
	struct stripe_map_error err;
	struct stripe_map g;

	(void)state;
	assert_int_equal(
		merge(CUR,
		      MAGIC COMMENT HEADER("147456", "3") SERVERS SIDE_SLOTS(
			      "server 2 lba 144 ok", "server 0 lba 144 ok"),
		      &g, &err),
		0);
	assert_int_equal(g.nr_servers, 4);
	assert_int_equal(stripe_map_slot(&g, 0, 2, 0)->server, 2);
	assert_int_equal(stripe_map_slot(&g, 0, 2, 0)->lba, 144);
	stripe_map_free(&g);
}

struct refusal {
	const char *side;
	const char *reason; /* a part of err.reason */
};

static const struct refusal refusals[] = {
	{MAGIC COMMENT
	 "vdisk vd3\nsize-bytes 147456\nstripe-unit-bytes 4096\ncolumns "
	 "2\nextents-per-column 3\nreplicas 2\nextent-size-bytes "
	 "24576\nmaster 10.0.0.9:7700\nregion-bytes 4096\n" SERVERS SRV(
		 "3", "5", "e")
		 SIDE_SLOTS("server 3 lba 0 ok", "server 0 lba 144 ok"),
	 "vdisk vd3"},
	/* the same size: nothing to grow */
	{CUR, "does not grow"},
	/* another region size */
	{MAGIC COMMENT
	 "vdisk vd2\nsize-bytes 147456\nstripe-unit-bytes 4096\ncolumns "
	 "2\nextents-per-column 3\nreplicas 2\nextent-size-bytes "
	 "24576\nmaster 10.0.0.9:7700\nregion-bytes 8192\n" SERVERS SRV(
		 "3", "5", "e")
		 SIDE_SLOTS("server 3 lba 0 ok", "server 0 lba 144 ok"),
	 "geometry"},
	/*
	 * an added extent on one of cur's (server a, lba 96): side was
	 * written while (1, 1, 0) was elsewhere (before a move's swap)
	 */
	{SIDE_HEAD OLD_C0_CLEAN "extent 0 2 0 server 3 lba 0 ok\n"
				"extent 0 2 1 server 0 lba 96 ok\n"
				"extent 1 0 0 server 2 lba 48 ok\n"
				"extent 1 0 1 server 0 lba 48 ok\n"
				"extent 1 1 0 server 2 lba 144 ok\n"
				"extent 1 1 1 server 1 lba 96 ok\n"
				"extent 1 2 0 server 1 lba 144 stale\n"
				"extent 1 2 1 server 2 lba 96 ok\n",
	 "overlap"},
	/* an added extent on cur's move target (d, lba 0) */
	{MAGIC COMMENT HEADER("147456", "3") SERVERS SRV("3", "4", "d")
		 SIDE_SLOTS("server 3 lba 0 ok", "server 0 lba 144 ok"),
	 "overlap"},
};

static void test_merge_refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(refusals); i++) {
		struct stripe_map_error err = {0};
		struct stripe_map g;

		assert_int_equal(merge(CUR, refusals[i].side, &g, &err),
				 -EINVAL);
		if (!strstr(err.reason, refusals[i].reason))
			print_message("case %zu: %s\n", i, err.reason);
		assert_non_null(strstr(err.reason, refusals[i].reason));
		assert_null(g.slots);
	}
}

static void test_grow_path(void **state)
{
	char buf[64];

	(void)state;
	stripe_map_grow_path("/var/lib/tapstripe/vd2.map", buf, sizeof(buf));
	assert_string_equal(buf, "/var/lib/tapstripe/vd2.map.grow");
}

/* --- adopt: PATH.grow next to a held map --------------------------------------- */

struct adopt_fx {
	char dir[64], path[128], side[160];
};

static void put(const char *path, const char *body, bool sealed)
{
	char *text = sealed ? seal(body) : strdup(body);
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	free(text);
}

static char *slurp(const char *path)
{
	static char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/*
 * The map CUR at fx->path, side_body (NULL: none) at PATH.grow; adopt;
 * the outcome, with *m the map afterwards (free it).
 */
static int adopt(struct adopt_fx *fx, const char *side_body, bool sealed,
		 struct stripe_map *m, enum stripe_map_grow_outcome *done,
		 struct stripe_map_error *err)
{
	int lock_fd = -1, ret, other;
	struct stripe_map_error busy;
	struct stripe_map again;

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_map-grow.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/vd2.map", fx->dir);
	stripe_map_grow_path(fx->path, fx->side, sizeof(fx->side));
	put(fx->path, CUR, true);
	if (side_body)
		put(fx->side, side_body, sealed);
	assert_int_equal(stripe_map_open(fx->path, m, &lock_fd, err), 0);
	ret = stripe_map_grow_adopt(fx->path, m, &lock_fd, done, err);
	/* the lock is still held, on the file now in place */
	assert_int_equal(stripe_map_open(fx->path, &again, &other, &busy),
			 -EBUSY);
	stripe_map_close(lock_fd);
	return ret;
}

static void adopt_cleanup(struct adopt_fx *fx)
{
	unlink(fx->side);
	unlink(fx->path);
	assert_int_equal(rmdir(fx->dir), 0);
}

static void test_adopt(void **state)
{
	enum stripe_map_grow_outcome done;
	struct stripe_map_error err;
	struct adopt_fx fx;
	struct stripe_map m;
	char *want = seal(GROWN);

	(void)state;
	assert_int_equal(adopt(&fx, SIDE, true, &m, &done, &err), 0);
	assert_int_equal(done, STRIPE_MAP_GROW_ADOPTED);
	assert_int_equal(m.size_bytes, 147456);
	assert_int_equal(m.extents_per_column, 3);
	assert_string_equal(slurp(fx.path), want);
	assert_int_equal(access(fx.side, F_OK), -1);
	stripe_map_free(&m);
	adopt_cleanup(&fx);
	free(want);
}

/* One that cannot be read now (a directory here: EISDIR) is left. */
static void test_adopt_kept(void **state)
{
	enum stripe_map_grow_outcome done;
	struct stripe_map_error err;
	struct adopt_fx fx;
	struct stripe_map m;
	char dir[64];
	int lock_fd = -1;

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_map-grow.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(fx.path, sizeof(fx.path), "%s/vd2.map", dir);
	stripe_map_grow_path(fx.path, fx.side, sizeof(fx.side));
	put(fx.path, CUR, true);
	assert_int_equal(mkdir(fx.side, 0700), 0);
	assert_int_equal(stripe_map_open(fx.path, &m, &lock_fd, &err), 0);
	assert_int_equal(
		stripe_map_grow_adopt(fx.path, &m, &lock_fd, &done, &err), 0);
	assert_int_equal(done, STRIPE_MAP_GROW_KEPT);
	assert_int_equal(m.size_bytes, 98304);
	assert_int_equal(access(fx.side, F_OK), 0);
	stripe_map_close(lock_fd);
	stripe_map_free(&m);
	assert_int_equal(rmdir(fx.side), 0);
	assert_int_equal(unlink(fx.path), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void test_adopt_none(void **state)
{
	enum stripe_map_grow_outcome done;
	struct stripe_map_error err;
	struct adopt_fx fx;
	struct stripe_map m;
	char *want = seal(CUR);

	(void)state;
	assert_int_equal(adopt(&fx, NULL, true, &m, &done, &err), 0);
	assert_int_equal(done, STRIPE_MAP_GROW_NONE);
	assert_int_equal(m.size_bytes, 98304);
	assert_string_equal(slurp(fx.path), want);
	stripe_map_free(&m);
	adopt_cleanup(&fx);
	free(want);
}

struct adopt_removed {
	const char *side;
	bool sealed;
	enum stripe_map_grow_outcome done;
	const char *reason; /* a part of err.reason; NULL: not looked at */
};

static const struct adopt_removed removed[] = {
	/* taken already (a crash between the rewrite and the removal) */
	{CUR, true, STRIPE_MAP_GROW_STALE, NULL},
	{SIDE, false, STRIPE_MAP_GROW_REFUSED, "checksum"},
	{"not a map\n", false, STRIPE_MAP_GROW_REFUSED, NULL},
	/* another disk's */
	{MAGIC COMMENT
	 "vdisk vd3\nsize-bytes 147456\nstripe-unit-bytes 4096\ncolumns "
	 "2\nextents-per-column 3\nreplicas 2\nextent-size-bytes "
	 "24576\nmaster 10.0.0.9:7700\nregion-bytes 4096\n" SERVERS SRV(
		 "3", "5", "e")
		 SIDE_SLOTS("server 3 lba 0 ok", "server 0 lba 144 ok"),
	 true, STRIPE_MAP_GROW_REFUSED, "vdisk vd3"},
};

/* A side file that is stale or cannot apply: removed, the map as it was. */
static void test_adopt_removed(void **state)
{
	char *want = seal(CUR);

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(removed); i++) {
		enum stripe_map_grow_outcome done;
		struct stripe_map_error err = {0};
		struct adopt_fx fx;
		struct stripe_map m;

		assert_int_equal(adopt(&fx, removed[i].side, removed[i].sealed,
				       &m, &done, &err),
				 0);
		assert_int_equal(done, removed[i].done);
		assert_int_equal(access(fx.side, F_OK), -1);
		if (removed[i].reason && !strstr(err.reason, removed[i].reason))
			print_message("case %zu: %s\n", i, err.reason);
		if (removed[i].reason)
			assert_non_null(strstr(err.reason, removed[i].reason));
		if (done != STRIPE_MAP_GROW_ADOPTED) {
			assert_int_equal(m.size_bytes, 98304);
			assert_string_equal(slurp(fx.path), want);
		}
		stripe_map_free(&m);
		adopt_cleanup(&fx);
	}
	free(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_index),
		cmocka_unit_test(test_grow_slot),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_merge_known_servers),
		cmocka_unit_test(test_merge_refused),
		cmocka_unit_test(test_grow_path),
		cmocka_unit_test(test_adopt),
		cmocka_unit_test(test_adopt_none),
		cmocka_unit_test(test_adopt_kept),
		cmocka_unit_test(test_adopt_removed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
