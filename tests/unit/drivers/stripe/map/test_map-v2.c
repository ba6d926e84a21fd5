/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_map-v2.c - format version 2 of the mapping file (issue #19): the
 * region size and its default, per-region dirty marks ("dirty HEX"), move
 * targets, the bitmap helpers, stripe_map_copy, which version the writer
 * picks, and one test per reason a version 2 text is rejected (the line
 * and the reason).
 *
 * The texts are written by hand with the writer's comment line, so that a
 * valid one formats back to itself byte for byte; seal() appends the
 * checksum line.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "drivers/stripe/map/map.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MiB	      (1ull << 20)
#define MAX_EDITS     3

/*
 * 96 KiB, 4 KiB units, 2 columns, 24 KiB extents (J = 2), 2 replicas,
 * 4 servers (server 3 holds only a move target), 4 KiB regions: 6 per
 * extent, 2 hex digits.  Lines: 1 magic, 2 comment, 3-10 header,
 * 11 region-bytes, 12-15 servers, 16-23 extents, 24 the move, 25 the
 * checksum.
 */
#define V2_MAGIC "tapstripe-map 2\n"
#define V2_COMMENT                                               \
	"# tapstripe mapping file (see drivers/mapfile.h); the " \
	"last line checksums the rest\n"
#define V2_HEADER                                                          \
	"vdisk vd2\nsize-bytes 98304\nstripe-unit-bytes 4096\ncolumns 2\n" \
	"extents-per-column 2\nreplicas 2\nextent-size-bytes 24576\n"      \
	"master 10.0.0.9:7700\n"
#define V2_REGION "region-bytes 4096\n"
#define V2_SERVERS                                                       \
	"server 0 address 10.0.0.1 portal 10.0.0.1:3260 target iqn.t:a " \
	"lun 1 block-size 512\n"                                         \
	"server 1 address 10.0.0.2 portal 10.0.0.2:3260 target iqn.t:b " \
	"lun 1 block-size 512\n"                                         \
	"server 2 address 10.0.0.3 portal 10.0.0.3:3260 target iqn.t:c " \
	"lun 1 block-size 512\n"                                         \
	"server 3 address 10.0.0.4 portal 10.0.0.4:3260 target iqn.t:d " \
	"lun 1 block-size 512\n"
#define X000	   "extent 0 0 0 server 0 lba 0 ok\n"
#define X001	   "extent 0 0 1 server 1 lba 0 ok\n"
#define X010	   "extent 0 1 0 server 1 lba 48 ok\n"
#define X011	   "extent 0 1 1 server 2 lba 0 dirty 21\n"
#define X100	   "extent 1 0 0 server 2 lba 48 stale\n"
#define X101	   "extent 1 0 1 server 0 lba 48 ok\n"
#define X110	   "extent 1 1 0 server 0 lba 96 ok\n"
#define X111	   "extent 1 1 1 server 1 lba 96 ok\n"
#define MOVE	   "move 0 0 1 server 3 lba 0 dirty 30\n"
#define V2_EXTENTS X000 X001 X010 X011 X100 X101 X110 X111
#define V2_BASE \
	V2_MAGIC V2_COMMENT V2_HEADER V2_REGION V2_SERVERS V2_EXTENTS MOVE

/* --- helpers ----------------------------------------------------------------- */

static char *seal(const char *body)
{
	size_t len = strlen(body), size = len + 32;
	char *text = malloc(size);

	assert_non_null(text);
	snprintf(text, size, "%schecksum crc32c %08x\n", body,
		 stripe_map_crc32c(0, body, len));
	return text;
}

static char *edit(char *text, const char *old, const char *new)
{
	char *at = strstr(text, old), *out;
	size_t size;

	assert_non_null(at);
	size = strlen(text) - strlen(old) + strlen(new) + 1;
	out = malloc(size);
	assert_non_null(out);
	snprintf(out, size, "%.*s%s%s", (int)(at - text), text, new,
		 at + strlen(old));
	free(text);
	return out;
}

struct edit_spec {
	const char *old, *new;
};

static char *edited(const struct edit_spec *edits)
{
	char *body = strdup(V2_BASE), *text;

	assert_non_null(body);
	for (int i = 0; i < MAX_EDITS && edits[i].old; i++)
		body = edit(body, edits[i].old, edits[i].new);
	text = seal(body);
	free(body);
	return text;
}

static void parse_ok(const char *text, struct stripe_map *m)
{
	struct stripe_map_error err;
	int ret = stripe_map_parse(text, strlen(text), m, &err);

	if (ret)
		print_message("line %u: %s\n", err.line, err.reason);
	assert_int_equal(ret, 0);
}

/* The writer's text of m, in new memory. */
static char *format(const struct stripe_map *m)
{
	struct stripe_map_error err;
	struct td_strbuf sb;
	char *text;
	int ret;

	td_strbuf_init(&sb);
	ret = stripe_map_format(m, &sb, &err);
	if (ret)
		print_message("format: %s\n", err.reason);
	assert_int_equal(ret, 0);
	text = strdup(td_strbuf_str(&sb));
	td_strbuf_free(&sb);
	return text;
}

static bool bit(const uint64_t *bits, uint32_t k)
{
	return stripe_map_bits_test(bits, k);
}

/* --- accepted ---------------------------------------------------------------- */

static void test_v2_round_trip(void **state)
{
	char *text = seal(V2_BASE), *again;
	struct stripe_map m;
	const uint64_t *d;
	size_t s011, s001;

	parse_ok(text, &m);
	assert_int_equal(m.region_bytes, 4096);
	assert_int_equal(stripe_map_region_count(&m), 6);
	assert_int_equal(stripe_map_region_words(&m), 1);
	s011 = stripe_map_slot_index(&m, 0, 1, 1);
	s001 = stripe_map_slot_index(&m, 0, 0, 1);
	d = stripe_map_slot_dirty(&m, s011);
	assert_true(m.slots[s011].stale);
	assert_int_equal(d[0], (1u << 1) | (1u << 4)); /* "21" */
	assert_int_equal(stripe_map_bits_count(d, 6), 2);
	d = stripe_map_slot_dirty(&m, stripe_map_slot_index(&m, 1, 0, 0));
	assert_int_equal(d[0], 0x3f); /* stale: all 6 */
	assert_false(m.slots[0].stale);
	assert_int_equal(stripe_map_slot_dirty(&m, 0)[0], 0);
	for (size_t i = 0; i < stripe_map_nr_slots(&m); i++)
		assert_int_equal(m.moves[i].active, i == s001);
	assert_int_equal(m.moves[s001].server, 3);
	assert_int_equal(m.moves[s001].lba, 0);
	assert_int_equal(stripe_map_move_dirty(&m, s001)[0], 0x3); /* "30" */
	assert_int_equal(stripe_map_format_version(&m), 2);
	again = format(&m);
	assert_string_equal(again, text);
	stripe_map_free(&m);
	free(again);
	free(text);
}

/* A move target on the host of the replica it replaces is fine. */
static void test_v2_move_on_own_host(void **state)
{
	char *body = strdup(V2_BASE), *text;
	struct stripe_map m;
	size_t s;

	/* server 3 keeps a use: another slot's move target */
	body = edit(body, MOVE,
		    "move 0 0 1 server 1 lba 144 stale\n"
		    "move 1 1 1 server 3 lba 0 ok\n");
	text = seal(body);
	parse_ok(text, &m);
	s = stripe_map_slot_index(&m, 1, 1, 1);
	assert_true(m.moves[s].active);
	assert_false(stripe_map_bits_any(stripe_map_move_dirty(&m, s), 6));
	s = stripe_map_slot_index(&m, 0, 0, 1);
	assert_int_equal(stripe_map_bits_count(stripe_map_move_dirty(&m, s), 6),
			 6);
	stripe_map_free(&m);
	free(text);
	free(body);
}

/* A version 2 text that needs nothing of version 2 is written as 1. */
static void test_v2_written_back_as_v1(void **state)
{
	char *body = strdup(V2_BASE), *text, *out;
	struct stripe_map m;

	body = edit(body, "dirty 21", "stale");
	body = edit(body, MOVE, "");
	body = edit(body, V2_SERVERS,
		    "server 0 address 10.0.0.1 portal 10.0.0.1:3260 target "
		    "iqn.t:a lun 1 block-size 512\n"
		    "server 1 address 10.0.0.2 portal 10.0.0.2:3260 target "
		    "iqn.t:b lun 1 block-size 512\n"
		    "server 2 address 10.0.0.3 portal 10.0.0.3:3260 target "
		    "iqn.t:c lun 1 block-size 512\n");
	text = seal(body);
	parse_ok(text, &m);
	assert_int_equal(stripe_map_format_version(&m), 1);
	out = format(&m);
	assert_non_null(strstr(out, "tapstripe-map 1\n"));
	assert_null(strstr(out, "region-bytes"));
	/* and that version 1 text reads back with the default region */
	stripe_map_free(&m);
	parse_ok(out, &m);
	assert_int_equal(m.region_bytes, 4096);
	assert_true(stripe_map_slot(&m, 0, 1, 1)->stale);
	stripe_map_free(&m);
	free(out);
	free(text);
	free(body);
}

/* Which version the writer picks, from a version 1 map. */
static void test_writer_version(void **state)
{
	char *body = strdup(V2_BASE), *text, *out;
	struct stripe_map m;
	size_t s = 3;

	body = edit(body, "dirty 21", "ok");
	body = edit(body, "stale\n", "ok\n");
	body = edit(body, MOVE, "move 1 1 1 server 3 lba 0 ok\n");
	text = seal(body);
	parse_ok(text, &m);
	assert_int_equal(stripe_map_format_version(&m), 2); /* the move */
	m.moves[stripe_map_slot_index(&m, 1, 1, 1)].active = false;
	m.nr_servers = 3; /* server 3 held only the move target */
	assert_int_equal(stripe_map_format_version(&m), 1);
	out = format(&m);
	assert_non_null(strstr(out, "tapstripe-map 1\n"));
	free(out);
	stripe_map_slot_mark_all(&m, s);
	assert_true(m.slots[s].stale);
	assert_int_equal(stripe_map_format_version(&m), 1); /* whole: stale */
	stripe_map_bits_clear(stripe_map_slot_dirty(&m, s), 2);
	assert_int_equal(stripe_map_format_version(&m), 2); /* partial */
	out = format(&m);
	assert_non_null(strstr(out, "extent 0 1 1 server 2 lba 0 dirty b3\n"));
	free(out);
	stripe_map_slot_clear_all(&m, s);
	assert_false(m.slots[s].stale);
	assert_int_equal(stripe_map_format_version(&m), 1);
	m.region_bytes = 8192; /* not the default: version 2 */
	assert_int_equal(stripe_map_format_version(&m), 2);
	out = format(&m);
	assert_non_null(strstr(out, "\nregion-bytes 8192\n"));
	free(out);
	stripe_map_free(&m);
	free(text);
	free(body);
}

/* 2048 regions: a move line with 512 hex digits fits in a line. */
static void test_longest_line(void **state)
{
	struct stripe_map m = {0}, back;
	char *text, *line;
	size_t s1;

	snprintf(m.vdisk, sizeof(m.vdisk), "big");
	snprintf(m.master, sizeof(m.master), "10.0.0.9:7700");
	m.size_bytes = m.extent_size_bytes = 2048 * 4096;
	m.stripe_unit_bytes = 4096;
	m.columns = m.extents_per_column = 1;
	m.replicas = 2;
	m.region_bytes = 4096;
	assert_int_equal(stripe_map_alloc(&m, 3), 0);
	for (uint32_t s = 0; s < 3; s++) {
		snprintf(m.servers[s].address, STRIPE_MAP_ADDRESS_SIZE,
			 "192.168.100.%u", 100 + s);
		snprintf(m.servers[s].portal, STRIPE_MAP_PORTAL_SIZE,
			 "192.168.100.%u:3260", 100 + s);
		snprintf(m.servers[s].target, STRIPE_MAP_TARGET_SIZE,
			 "iqn.2026-01.t:%u", s);
		m.servers[s].block_size = 512;
	}
	m.slots[0].server = 0;
	m.slots[1].server = 1;
	m.slots[1].lba = UINT64_MAX / 512 - 2048 * 8; /* long numbers */
	s1 = 1;
	stripe_map_bits_set_range(stripe_map_slot_dirty(&m, s1), 1, 2046);
	m.slots[s1].stale = true;
	m.moves[s1] = (struct stripe_map_move){true, 2, m.slots[1].lba};
	stripe_map_bits_set_range(stripe_map_move_dirty(&m, s1), 0, 2046);
	text = format(&m);
	line = strstr(text, "\nmove ");
	assert_non_null(line);
	print_message("move line: %zu bytes\n",
		      (size_t)(strchr(line + 1, '\n') - line - 1));
	assert_true(strchr(line + 1, '\n') - line - 1 <= STRIPE_MAP_MAX_LINE);
	parse_ok(text, &back);
	assert_int_equal(
		stripe_map_bits_count(stripe_map_slot_dirty(&back, 1), 2048),
		2046);
	assert_memory_equal(back.move_dirty, m.move_dirty, 2 * 32 * 8);
	stripe_map_free(&back);
	stripe_map_free(&m);
	free(text);
}

/* --- the default region rule ------------------------------------------------- */

static void test_default_region(void **state)
{
	static const struct {
		uint64_t e, g;
	} rows[] = {
		{256 * MiB, MiB},
		{1 * MiB, MiB},
		{3 * MiB, MiB},
		{2048 * MiB, MiB},		  /* 2048 regions exactly */
		{4096 * MiB, 2 * MiB},		  /* 1 MiB would give 4096 */
		{1ull << 40, 512 * MiB},	  /* 1 TiB */
		{128 << 10, 4096},		  /* 1 MiB does not divide */
		{24576, 4096},			  /* 6 regions */
		{4096, 4096},			  /* one region */
		{4096ull * 4099, 4096ull * 4099}, /* 4099 prime: G = E */
		{4096ull * 2049, 4096ull * 3},	  /* 2049 = 3 * 683 */
		{3 * MiB + 4096 * 5, 4096},	  /* 773 regions */
		{0, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		uint64_t g = stripe_map_default_region(rows[i].e);

		print_message("E %llu -> G %llu\n",
			      (unsigned long long)rows[i].e,
			      (unsigned long long)g);
		assert_int_equal(g, rows[i].g);
		if (rows[i].e)
			assert_true(stripe_map_region_ok(rows[i].e, g));
	}
	assert_false(stripe_map_region_ok(16 * MiB, 4096)); /* 4096 regions */
	assert_true(stripe_map_region_ok(8 * MiB, 4096));   /* 2048 */
	assert_false(stripe_map_region_ok(MiB, 0));
	assert_false(stripe_map_region_ok(MiB, 2048));	  /* not 4K aligned */
	assert_false(stripe_map_region_ok(24576, 16384)); /* no divisor */
	assert_false(stripe_map_region_ok(MiB, 2 * MiB));
}

/* A version 1 file gets the default region. */
static void test_v1_default_region(void **state)
{
	char *body = strdup(V2_BASE), *text;
	struct stripe_map m;

	body = edit(body, V2_MAGIC, "tapstripe-map 1\n");
	body = edit(body, V2_REGION, "");
	body = edit(body, "dirty 21", "ok");
	body = edit(body, MOVE, "");
	body = edit(body,
		    "server 3 address 10.0.0.4 portal 10.0.0.4:3260 "
		    "target iqn.t:d lun 1 block-size 512\n",
		    "");
	text = seal(body);
	parse_ok(text, &m);
	assert_int_equal(m.region_bytes, 4096);
	assert_int_equal(stripe_map_slot_dirty(
				 &m, stripe_map_slot_index(&m, 1, 0, 0))[0],
			 0x3f);
	stripe_map_free(&m);
	free(text);
	free(body);
}

/* --- in memory: alloc, copy, check ------------------------------------------- */

static void small_map(struct stripe_map *m, uint64_t region)
{
	char *text = seal(V2_BASE);

	parse_ok(text, m);
	free(text);
	if (region) {
		m->region_bytes = region;
		memset(m->dirty, 0, 8 * 8);
		memset(m->move_dirty, 0, 8 * 8);
		for (size_t i = 0; i < 8; i++)
			m->slots[i].stale = false;
	}
}

static void test_alloc_region(void **state)
{
	struct stripe_map m = {0};

	m.columns = m.extents_per_column = m.replicas = 1;
	m.extent_size_bytes = 256 * MiB;
	assert_int_equal(stripe_map_alloc(&m, 1), 0);
	assert_int_equal(m.region_bytes, MiB);
	assert_int_equal(stripe_map_region_count(&m), 256);
	assert_int_equal(stripe_map_region_words(&m), 4);
	assert_non_null(m.dirty);
	assert_non_null(m.moves);
	assert_non_null(m.move_dirty);
	assert_false(m.moves[0].active);
	stripe_map_free(&m);
	assert_null(m.dirty);
	m.region_bytes = 3 * MiB; /* does not divide 256 MiB */
	assert_int_equal(stripe_map_alloc(&m, 1), -EINVAL);
	m.region_bytes = 4096; /* 65536 regions */
	assert_int_equal(stripe_map_alloc(&m, 1), -EINVAL);
	stripe_map_free(&m); /* nothing allocated: still fine */
}

static void test_copy(void **state)
{
	struct stripe_map a, b;
	char *ta, *tb;
	size_t s;

	small_map(&a, 0);
	s = stripe_map_slot_index(&a, 0, 1, 1);
	assert_int_equal(stripe_map_copy(&b, &a), 0);
	assert_ptr_not_equal(b.dirty, a.dirty);
	assert_ptr_not_equal(b.moves, a.moves);
	assert_ptr_not_equal(b.move_dirty, a.move_dirty);
	assert_ptr_not_equal(b.servers, a.servers);
	ta = format(&a);
	tb = format(&b);
	assert_string_equal(ta, tb);
	free(tb);
	/* b is deep: changing a leaves it alone */
	stripe_map_slot_clear_all(&a, s);
	stripe_map_move_dirty(&a, 1)[0] = 0;
	a.moves[1].active = false;
	a.servers[0].lun = 7;
	assert_true(b.slots[s].stale);
	assert_int_equal(stripe_map_slot_dirty(&b, s)[0], 0x12);
	assert_true(b.moves[1].active);
	assert_int_equal(stripe_map_move_dirty(&b, 1)[0], 0x3);
	assert_int_equal(b.servers[0].lun, 1);
	tb = format(&b);
	assert_string_equal(ta, tb);
	stripe_map_free(&a);
	stripe_map_free(&b);
	free(ta);
	free(tb);
	memset(&a, 0, sizeof(a));
	assert_int_equal(stripe_map_copy(&b, &a), -EINVAL);
	assert_null(b.dirty);
}

static void expect_rejected(const struct stripe_map *m, const char *why)
{
	struct stripe_map_error err;

	assert_int_equal(stripe_map_check(m, &err), -EINVAL);
	print_message("%s\n", err.reason);
	assert_non_null(strstr(err.reason, why));
}

static void test_check_in_memory(void **state)
{
	struct stripe_map m;
	uint64_t *d;
	size_t s;

	small_map(&m, 0);
	s = stripe_map_slot_index(&m, 0, 1, 1);
	d = stripe_map_slot_dirty(&m, s);
	m.slots[s].stale = false;
	expect_rejected(&m,
			"extent 0 1 1: stale is clear but a region is dirty");
	m.slots[s].stale = true;
	d[0] = 0;
	expect_rejected(&m,
			"extent 0 1 1: stale is set but no region is dirty");
	d[0] = 1ull << 6; /* region 6 of 6 */
	expect_rejected(&m, "extent 0 1 1: a dirty bit beyond region 5");
	d[0] = 0x12;
	m.moves[1].active = false;
	expect_rejected(&m, "extent 0 0 1: dirty regions for a move target "
			    "that is not active");
	stripe_map_move_dirty(&m, 1)[0] = 0;
	expect_rejected(&m, "server 3 is not used by any extent");
	m.moves[1].active = true;
	m.moves[1].server = 4;
	expect_rejected(&m, "move 0 0 1: no server 4");
	m.moves[1].server = 3;
	m.region_bytes = 5000;
	expect_rejected(&m, "region-bytes 5000 must be a multiple of 4096");
	m.region_bytes = 4096;
	free(m.dirty);
	m.dirty = NULL;
	expect_rejected(&m, "no dirty bitmaps");
	stripe_map_free(&m);
}

/* --- bitmap helpers ------------------------------------------------------------ */

static void test_bits_word_boundaries(void **state)
{
	uint64_t b[3] = {0};

	stripe_map_bits_set_range(b, 62, 65);
	assert_int_equal(b[0], 3ull << 62);
	assert_int_equal(b[1], 3);
	assert_int_equal(stripe_map_bits_count(b, 63), 1);
	assert_int_equal(stripe_map_bits_count(b, 64), 2);
	assert_int_equal(stripe_map_bits_count(b, 65), 3);
	assert_int_equal(stripe_map_bits_count(b, 130), 4);
	assert_true(bit(b, 63) && bit(b, 64) && !bit(b, 61) && !bit(b, 66));
	assert_int_equal(stripe_map_bits_next(b, 130, 0), 62);
	assert_int_equal(stripe_map_bits_next(b, 130, 63), 63);
	assert_int_equal(stripe_map_bits_next(b, 130, 64), 64);
	assert_int_equal(stripe_map_bits_next(b, 130, 66), 130);
	assert_int_equal(stripe_map_bits_next(b, 63, 63), 63); /* none < n */
	assert_int_equal(stripe_map_bits_next(b, 64, 63), 63);
	assert_int_equal(stripe_map_bits_next(b, 65, 65), 65);
	stripe_map_bits_clear(b, 64);
	assert_int_equal(stripe_map_bits_next(b, 130, 64), 65);
	stripe_map_bits_clear(b, 62);
	stripe_map_bits_clear(b, 63);
	assert_false(stripe_map_bits_any(b, 65));
	assert_true(stripe_map_bits_any(b, 66));
	assert_int_equal(stripe_map_bits_next(b, 65, 0), 65);
	stripe_map_bits_clear(b, 65);
	assert_false(stripe_map_bits_any(b, 130));
	assert_int_equal(stripe_map_bits_next(b, 130, 0), 130);
	assert_int_equal(stripe_map_bits_next(b, 0, 0), 0);
	stripe_map_bits_set_range(b, 129, 129);
	assert_int_equal(b[2], 2);
	assert_int_equal(stripe_map_bits_next(b, 130, 0), 129);
	stripe_map_bits_set_range(b, 5, 4); /* empty range */
	assert_int_equal(b[0], 0);
}

static void test_bits_set_all(void **state)
{
	static const uint32_t ns[] = {1, 3, 6, 63, 64, 65, 127, 128, 129, 2048};

	for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
		uint64_t b[33] = {0};
		uint32_t n = ns[i];

		stripe_map_bits_set_all(b, n);
		assert_int_equal(stripe_map_bits_count(b, n), n);
		assert_true(stripe_map_bits_any(b, n));
		assert_int_equal(stripe_map_bits_next(b, n, 0), 0);
		assert_int_equal(stripe_map_bits_next(b, n, n - 1), n - 1);
		/* nothing beyond n */
		if (n % 64)
			assert_int_equal(b[n / 64] >> (n % 64), 0);
		assert_int_equal(b[(n + 63) / 64], 0);
		assert_int_equal(stripe_map_bits_count(b, 64 * 33), n);
	}
}

static void test_mark_and_clear_all(void **state)
{
	struct stripe_map m;
	size_t s;

	small_map(&m, 0);
	s = stripe_map_slot_index(&m, 1, 1, 0);
	stripe_map_slot_mark_all(&m, s);
	assert_true(m.slots[s].stale);
	assert_int_equal(stripe_map_slot_dirty(&m, s)[0], 0x3f);
	assert_int_equal(stripe_map_check(&m, &(struct stripe_map_error){0}),
			 0);
	stripe_map_slot_clear_all(&m, s);
	assert_false(m.slots[s].stale);
	assert_int_equal(stripe_map_slot_dirty(&m, s)[0], 0);
	assert_int_equal(stripe_map_check(&m, &(struct stripe_map_error){0}),
			 0);
	stripe_map_free(&m);
}

/* --- rejected -------------------------------------------------------------------- */

struct error_row {
	const char *name;
	struct edit_spec edits[MAX_EDITS];
	unsigned int line;
	const char *reason;
};

#define SERVER3                                                          \
	"server 3 address 10.0.0.4 portal 10.0.0.4:3260 target iqn.t:d " \
	"lun 1 block-size 512\n"

static const struct error_row error_rows[] = {
	/* the region size */
	{"region-bytes in version 1",
	 {{V2_MAGIC, "tapstripe-map 1\n"}},
	 11,
	 "key 'region-bytes' is version 2: this file is version 1"},
	{"region-bytes missing",
	 {{V2_REGION, ""}},
	 11,
	 "key 'region-bytes' is missing before the first server line"},
	{"region-bytes twice",
	 {{V2_REGION, V2_REGION V2_REGION}},
	 12,
	 "duplicate key 'region-bytes' (first on line 11)"},
	{"region-bytes not aligned",
	 {{V2_REGION, "region-bytes 6144\n"}},
	 11,
	 "region-bytes 6144 must be a multiple of 4096 that divides "
	 "extent-size-bytes 24576 into at most 2048 regions"},
	{"region-bytes not a divisor",
	 {{V2_REGION, "region-bytes 16384\n"}},
	 11,
	 "region-bytes 16384 must be a multiple of 4096"},
	{"region-bytes 0",
	 {{V2_REGION, "region-bytes 0\n"}},
	 11,
	 "region-bytes 0 must be a multiple of 4096"},
	{"region-bytes not a number",
	 {{V2_REGION, "region-bytes 4k\n"}},
	 11,
	 "region-bytes '4k' is not an unsigned decimal number"},
	/* dirty HEX */
	{"dirty in version 1",
	 {{V2_MAGIC, "tapstripe-map 1\n"}, {V2_REGION, ""}},
	 18,
	 "state 'dirty' is version 2: this file is version 1"},
	{"dirty without hex",
	 {{"dirty 21", "dirty"}},
	 19,
	 "state 'dirty' takes one value: the dirty regions in hex"},
	{"dirty hex too short",
	 {{"dirty 21", "dirty 2"}},
	 19,
	 "dirty bitmap of 1 hex digits: 6 regions take 2"},
	{"dirty hex too long",
	 {{"dirty 21", "dirty 210"}},
	 19,
	 "dirty bitmap of 3 hex digits: 6 regions take 2"},
	{"dirty hex uppercase",
	 {{"dirty 21", "dirty A1"}},
	 19,
	 "dirty bitmap: 'A' is not a lowercase hex digit"},
	{"dirty hex not hex",
	 {{"dirty 21", "dirty 2g"}},
	 19,
	 "dirty bitmap: 'g' is not a lowercase hex digit"},
	{"dirty hex sign",
	 {{"dirty 21", "dirty -1"}},
	 19,
	 "dirty bitmap: '-' is not a lowercase hex digit"},
	{"dirty high bits",
	 {{"dirty 21", "dirty 24"}},
	 19,
	 "dirty bitmap: the last digit sets bits beyond region 5"},
	{"dirty high bits 8",
	 {{"dirty 21", "dirty 08"}},
	 19,
	 "dirty bitmap: the last digit sets bits beyond region 5"},
	{"dirty none",
	 {{"dirty 21", "dirty 00"}},
	 19,
	 "dirty bitmap with no region set: write 'ok' instead"},
	{"dirty all",
	 {{"dirty 21", "dirty f3"}},
	 19,
	 "dirty bitmap with every region set: write 'stale' instead"},
	{"state unknown",
	 {{"dirty 21", "dirt 21"}},
	 19,
	 "extent lines are 'extent C X R server N lba LBA "
	 "ok|stale|dirty HEX'"},
	{"state unknown, one word",
	 {{"dirty 21", "okay"}},
	 19,
	 "replica state 'okay' is not ok, stale or dirty HEX"},
	{"ok with a value",
	 {{"dirty 21", "ok 21"}},
	 19,
	 "extent lines are 'extent C X R server N lba LBA "
	 "ok|stale|dirty HEX'"},
	/* moves */
	{"move in version 1",
	 {{V2_MAGIC, "tapstripe-map 1\n"}, {V2_REGION, ""}, {"dirty 21", "ok"}},
	 23,
	 "move lines are version 2: this file is version 1"},
	{"move before the last extent",
	 {{MOVE, ""}, {X111, MOVE X111}},
	 23,
	 "a move line before the last extent line: moves follow every extent"},
	{"move among the servers",
	 {{MOVE, ""}, {SERVER3, SERVER3 MOVE}},
	 16,
	 "a move line before the last extent line"},
	{"move for a missing column",
	 {{MOVE, "move 2 0 0 server 3 lba 0 ok\n"}},
	 24,
	 "move 2 0 0: no such extent replica (2 columns x 2 extents x 2 "
	 "replicas)"},
	{"move for a missing replica",
	 {{MOVE, "move 0 0 2 server 3 lba 0 ok\n"}},
	 24,
	 "move 0 0 2: no such extent replica"},
	{"move for a missing extent",
	 {{MOVE, "move 0 2 0 server 3 lba 0 ok\n"}},
	 24,
	 "move 0 2 0: no such extent replica"},
	{"duplicate move",
	 {{MOVE, MOVE "move 0 0 1 server 3 lba 96 ok\n"}},
	 25,
	 "duplicate move 0 0 1 (first on line 24)"},
	{"moves out of order",
	 {{MOVE, "move 1 0 0 server 3 lba 96 ok\n" MOVE}},
	 25,
	 "move 0 0 1 out of order: move lines follow the extent lines' "
	 "order"},
	{"move syntax",
	 {{MOVE, "move 0 0 1 server 3 lba 0\n"}},
	 24,
	 "move lines are 'move C X R server N lba LBA ok|stale|dirty HEX'"},
	{"move syntax: keywords",
	 {{MOVE, "move 0 0 1 srv 3 lba 0 ok\n"}},
	 24,
	 "move lines are 'move C X R server N lba LBA ok|stale|dirty HEX'"},
	{"move coordinate",
	 {{MOVE, "move 0 x 1 server 3 lba 0 ok\n"}},
	 24,
	 "move coordinate 'x' is not an unsigned decimal number"},
	{"move dirty bad",
	 {{MOVE, "move 0 0 1 server 3 lba 0 dirty 3f\n"}},
	 24,
	 "dirty bitmap: the last digit sets bits beyond region 5"},
	{"move state bad",
	 {{MOVE, "move 0 0 1 server 3 lba 0 fine\n"}},
	 24,
	 "replica state 'fine' is not ok, stale or dirty HEX"},
	{"extent after a move",
	 {{MOVE, MOVE X111}},
	 25,
	 "unexpected 'extent' line among the moves"},
	{"server after a move",
	 {{MOVE, MOVE "server 4 address x\n"}},
	 25,
	 "unexpected 'server' line among the moves"},
	{"move to a missing server",
	 {{MOVE, "move 0 0 1 server 9 lba 0 ok\n"}},
	 24,
	 "move 0 0 1: no server 9"},
	{"move lba overflows",
	 {{MOVE, "move 0 0 1 server 3 lba 36028797018963967 ok\n"}},
	 24,
	 "move 0 0 1: lba 36028797018963967 overflows"},
	{"move on the host of another replica",
	 {{MOVE, "move 0 0 1 server 0 lba 144 ok\n"}},
	 24,
	 "move 0 0 1: the move target is on host 10.0.0.1, like replica 0"},
	{"move overlaps an extent",
	 {{MOVE, "move 0 0 1 server 2 lba 24 ok\n"
		 "move 1 1 1 server 3 lba 0 ok\n"}},
	 24,
	 "this move target overlaps the extent on line 19 (server 2)"},
	{"move overlaps a move",
	 {{MOVE, MOVE "move 1 1 0 server 3 lba 47 ok\n"}},
	 25,
	 "this move target overlaps the move target on line 24 (server 3)"},
	{"no move: server 3 unused",
	 {{MOVE, ""}},
	 15,
	 "server 3 is not used by any extent"},
};

static void test_errors(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(error_rows); i++) {
		const struct error_row *row = &error_rows[i];
		char *text = edited(row->edits);
		struct stripe_map_error err;
		struct stripe_map m;
		int ret = stripe_map_parse(text, strlen(text), &m, &err);

		print_message("%s: line %u: %s\n", row->name, err.line,
			      err.reason);
		assert_int_equal(ret, -EINVAL);
		assert_int_equal(err.line, row->line);
		assert_non_null(strstr(err.reason, row->reason));
		assert_null(m.slots);
		assert_null(m.dirty);
		assert_null(m.moves);
		assert_null(m.move_dirty);
		free(text);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v2_round_trip),
		cmocka_unit_test(test_v2_move_on_own_host),
		cmocka_unit_test(test_v2_written_back_as_v1),
		cmocka_unit_test(test_writer_version),
		cmocka_unit_test(test_longest_line),
		cmocka_unit_test(test_default_region),
		cmocka_unit_test(test_v1_default_region),
		cmocka_unit_test(test_alloc_region),
		cmocka_unit_test(test_copy),
		cmocka_unit_test(test_check_in_memory),
		cmocka_unit_test(test_bits_word_boundaries),
		cmocka_unit_test(test_bits_set_all),
		cmocka_unit_test(test_mark_and_clear_all),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
