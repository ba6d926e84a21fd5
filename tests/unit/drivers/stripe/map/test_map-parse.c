/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_map-parse.c - stripe_map_parse (drivers/stripe/map/map*.c)
 * against tables of map texts written by hand: the fields each valid text
 * gives, and for each malformed one the exact error (-EINVAL, the line
 * and the whole reason).  test_map.c starts from the writer's output;
 * these texts owe nothing to it.
 *
 * Texts are written without their last line; seal() appends the checksum
 * line, computed with the library's CRC-32C (its value against a known
 * vector is checked in test_map.c), so that the rule under test, not
 * the checksum, rejects a text.
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
#define MAX_EDITS     3

/*
 * The base map: 512 KiB, 64 KiB units, 2 columns, 128 KiB extents
 * (4 rows of 128 KiB, columns of 256 KiB: J = 2), 2 replicas, 3 servers.
 * Lines: 1 magic, 2 comment, 3-10 header, 11-13 servers, 14-21 extents,
 * 22 the checksum.
 */
#define L_MAGIC	  "tapstripe-map 1\n"
#define L_COMMENT "# written by hand\n"
#define L_VDISK	  "vdisk vd1\n"
#define L_SIZE	  "size-bytes 524288\n"
#define L_UNIT	  "stripe-unit-bytes 65536\n"
#define L_COLUMNS "columns 2\n"
#define L_J	  "extents-per-column 2\n"
#define L_R	  "replicas 2\n"
#define L_EXTENT  "extent-size-bytes 131072\n"
#define L_MASTER  "master 10.0.0.9:7700\n"
#define L_SERVER0                                         \
	"server 0 address 10.0.0.1 portal 10.0.0.1:3260 " \
	"target iqn.2026-01.t:a lun 1 block-size 512\n"
#define L_SERVER1                                         \
	"server 1 address 10.0.0.2 portal 10.0.0.2:3260 " \
	"target iqn.2026-01.t:b lun 2 block-size 4096\n"
#define L_SERVER2                                         \
	"server 2 address 10.0.0.3 portal 10.0.0.3:3260 " \
	"target iqn.2026-01.t:c lun 0 block-size 512 "    \
	"chap-user u1 chap-secret pw!\n"
#define L_X000 "extent 0 0 0 server 0 lba 0 ok\n"
#define L_X001 "extent 0 0 1 server 1 lba 0 ok\n"
#define L_X010 "extent 0 1 0 server 1 lba 32 ok\n"
#define L_X011 "extent 0 1 1 server 2 lba 0 stale\n"
#define L_X100 "extent 1 0 0 server 2 lba 256 ok\n"
#define L_X101 "extent 1 0 1 server 0 lba 256 ok\n"
#define L_X110 "extent 1 1 0 server 0 lba 512 ok\n"
#define L_X111 "extent 1 1 1 server 1 lba 64 ok\n"

#define HEADER                                                             \
	L_MAGIC L_COMMENT L_VDISK L_SIZE L_UNIT L_COLUMNS L_J L_R L_EXTENT \
		L_MASTER
#define SERVERS L_SERVER0 L_SERVER1 L_SERVER2
#define EXTENTS L_X000 L_X001 L_X010 L_X011 L_X100 L_X101 L_X110 L_X111
#define BASE	HEADER SERVERS EXTENTS

/* --- helpers ----------------------------------------------------------------- */

/* body plus its checksum line, in new memory. */
static char *seal(const char *body)
{
	size_t len = strlen(body), size = len + 32;
	char *text = malloc(size);

	assert_non_null(text);
	snprintf(text, size, "%schecksum crc32c %08x\n", body,
		 stripe_map_crc32c(0, body, len));
	return text;
}

/* Replace the first old by new in text (freed); the result is new. */
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

/* BASE with the edits applied, sealed. */
static char *edited(const struct edit_spec *edits)
{
	char *body = strdup(BASE), *text;

	assert_non_null(body);
	for (int i = 0; i < MAX_EDITS && edits[i].old; i++)
		body = edit(body, edits[i].old, edits[i].new);
	text = seal(body);
	free(body);
	return text;
}

static void expect_error(const char *text, size_t len, unsigned int line,
			 const char *reason)
{
	struct stripe_map_error err;
	struct stripe_map m;

	assert_int_equal(stripe_map_parse(text, len, &m, &err), -EINVAL);
	print_message("  -> line %u: %s\n", err.line, err.reason);
	assert_int_equal(err.line, line);
	assert_string_equal(err.reason, reason);
	assert_null(m.servers);
	assert_null(m.slots);
	assert_int_equal(m.nr_servers, 0);
}

/* --- valid texts -------------------------------------------------------------- */

struct server_want {
	const char *address, *portal, *target;
	uint32_t lun, block_size;
	const char *chap_user, *chap_secret, *device;
};

struct slot_want {
	uint32_t c, j, r, server;
	uint64_t lba;
	bool stale;
};

static const struct server_want base_servers[] = {
	{"10.0.0.1", "10.0.0.1:3260", "iqn.2026-01.t:a", 1, 512, "", "", ""},
	{"10.0.0.2", "10.0.0.2:3260", "iqn.2026-01.t:b", 2, 4096, "", "", ""},
	{"10.0.0.3", "10.0.0.3:3260", "iqn.2026-01.t:c", 0, 512, "u1", "pw!",
	 ""},
};

static const struct slot_want base_slots[] = {
	{0, 0, 0, 0, 0, false},	  {0, 0, 1, 1, 0, false},
	{0, 1, 0, 1, 32, false},  {0, 1, 1, 2, 0, true},
	{1, 0, 0, 2, 256, false}, {1, 0, 1, 0, 256, false},
	{1, 1, 0, 0, 512, false}, {1, 1, 1, 1, 64, false},
};

static void check_servers(const struct stripe_map *m,
			  const struct server_want *want, uint32_t n)
{
	assert_int_equal(m->nr_servers, n);
	for (uint32_t i = 0; i < n; i++) {
		const struct stripe_map_server *s = &m->servers[i];

		assert_string_equal(s->address, want[i].address);
		assert_string_equal(s->portal, want[i].portal);
		assert_string_equal(s->target, want[i].target);
		assert_int_equal(s->lun, want[i].lun);
		assert_int_equal(s->block_size, want[i].block_size);
		assert_string_equal(s->chap_user, want[i].chap_user);
		assert_string_equal(s->chap_secret, want[i].chap_secret);
		assert_string_equal(s->device, want[i].device);
	}
}

static void check_slots(const struct stripe_map *m,
			const struct slot_want *want, size_t n)
{
	assert_int_equal(stripe_map_nr_slots(m), n);
	for (size_t i = 0; i < n; i++) {
		const struct stripe_map_replica *p =
			stripe_map_slot(m, want[i].c, want[i].j, want[i].r);

		assert_int_equal(p->server, want[i].server);
		assert_int_equal(p->lba, want[i].lba);
		assert_int_equal(p->stale, want[i].stale);
	}
}

static void parse_ok(const char *text, struct stripe_map *m)
{
	struct stripe_map_error err;
	int ret = stripe_map_parse(text, strlen(text), m, &err);

	if (ret)
		print_message("line %u: %s\n", err.line, err.reason);
	assert_int_equal(ret, 0);
}

static void check_base_header(const struct stripe_map *m)
{
	assert_string_equal(m->vdisk, "vd1");
	assert_int_equal(m->size_bytes, 524288);
	assert_int_equal(m->stripe_unit_bytes, 65536);
	assert_int_equal(m->columns, 2);
	assert_int_equal(m->extents_per_column, 2);
	assert_int_equal(m->replicas, 2);
	assert_int_equal(m->extent_size_bytes, 131072);
	assert_string_equal(m->master, "10.0.0.9:7700");
}

/*
 * The base text, and texts that must read the same: header keys in
 * another order, comments anywhere after the magic, server keys in
 * another order.
 */
static void test_valid_base_and_variants(void **state)
{
	static const struct edit_spec variants[][MAX_EDITS] = {
		{{NULL, NULL}},
		/* header in reverse order */
		{{L_VDISK L_SIZE L_UNIT L_COLUMNS L_J L_R L_EXTENT L_MASTER,
		  L_MASTER L_EXTENT L_R L_J L_COLUMNS L_UNIT L_SIZE L_VDISK}},
		/* comments among the servers and the extents */
		{{L_SERVER1, "# s1\n" L_SERVER1 "#\n"},
		 {L_X100, "# column 1\n" L_X100}},
		/* server keys in any order */
		{{L_SERVER1, "server 1 block-size 4096 lun 2 target "
			     "iqn.2026-01.t:b portal 10.0.0.2:3260 address "
			     "10.0.0.2\n"}},
	};

	for (size_t i = 0; i < ARRAY_SIZE(variants); i++) {
		char *text = edited(variants[i]);
		struct stripe_map m;

		print_message("variant %zu\n", i);
		parse_ok(text, &m);
		check_base_header(&m);
		check_servers(&m, base_servers, 3);
		check_slots(&m, base_slots, ARRAY_SIZE(base_slots));
		stripe_map_free(&m);
		free(text);
	}
}

/* The optional device key. */
static void test_valid_device(void **state)
{
	static const struct edit_spec e[MAX_EDITS] = {
		{"lun 1 block-size 512\n",
		 "lun 1 block-size 512 device /dev/disk/by-path/x-lun-1\n"},
	};
	struct server_want want[3];
	char *text = edited(e);
	struct stripe_map m;

	memcpy(want, base_servers, sizeof(want));
	want[0].device = "/dev/disk/by-path/x-lun-1";
	parse_ok(text, &m);
	check_servers(&m, want, 3);
	stripe_map_free(&m);
	free(text);
}

/*
 * The smallest disk (one 4 KiB unit, one column, one replica, one 4 KiB
 * extent) with the largest lba that does not overflow: lba * 512 + 4096
 * <= 2^64 - 1 for lba <= (2^64 - 1 - 4096) / 512 = 36028797018963959.
 */
#define MINIMAL(lba)                                                          \
	"tapstripe-map 1\nvdisk a\nsize-bytes 4096\nstripe-unit-bytes 4096\n" \
	"columns 1\nextents-per-column 1\nreplicas 1\n"                       \
	"extent-size-bytes 4096\nmaster m:1\n"                                \
	"server 0 address h portal h:1 target t lun 65535 block-size 512\n"   \
	"extent 0 0 0 server 0 lba " lba " ok\n"

static void test_valid_minimal_and_limits(void **state)
{
	static const struct server_want s = {"h", "h:1", "t", 65535,
					     512, "",	 "",  ""};
	static const struct slot_want x = {0,	 0, 0, 0, 36028797018963959ull,
					   false};
	char *text = seal(MINIMAL("36028797018963959"));
	struct stripe_map m;

	parse_ok(text, &m);
	assert_string_equal(m.vdisk, "a");
	assert_int_equal(m.size_bytes, 4096);
	assert_int_equal(m.stripe_unit_bytes, 4096);
	assert_int_equal(m.columns, 1);
	assert_int_equal(m.extents_per_column, 1);
	assert_int_equal(m.replicas, 1);
	assert_int_equal(m.extent_size_bytes, 4096);
	assert_string_equal(m.master, "m:1");
	check_servers(&m, &s, 1);
	check_slots(&m, &x, 1);
	stripe_map_free(&m);
	free(text);

	/* one more block and the extent's end passes 2^64 */
	text = seal(MINIMAL("36028797018963960"));
	expect_error(text, strlen(text), 11,
		     "extent 0 0 0: lba 36028797018963960 overflows");
	free(text);
}

/* --- malformed texts ------------------------------------------------------------ */

struct error_row {
	const char *name;
	struct edit_spec edits[MAX_EDITS];
	unsigned int line;
	const char *reason;
};

/* Every row is BASE, edited, then sealed. */
static const struct error_row error_rows[] = {
	/* the magic line */
	{"wrong magic",
	 {{"tapstripe-map 1", "tapstripe-mab 1"}},
	 1,
	 "not a mapping file: the first line must be 'tapstripe-map 1' or "
	 "'tapstripe-map 2'"},
	{"magic without version",
	 {{"tapstripe-map 1", "tapstripe-map"}},
	 1,
	 "not a mapping file: the first line must be 'tapstripe-map 1' or "
	 "'tapstripe-map 2'"},
	{"version 3",
	 {{"tapstripe-map 1", "tapstripe-map 3"}},
	 1,
	 "unsupported version '3' (this program reads versions 1 and 2)"},
	{"version 01",
	 {{"tapstripe-map 1", "tapstripe-map 01"}},
	 1,
	 "unsupported version '01' (this program reads versions 1 and 2)"},
	{"comment before the magic",
	 {{L_MAGIC, "# x\n" L_MAGIC}},
	 1,
	 "not a mapping file: the first line must be 'tapstripe-map 1' or "
	 "'tapstripe-map 2'"},
	/* syntax of any line */
	{"empty line", {{L_COMMENT, "\n"}}, 2, "empty line"},
	{"double space",
	 {{L_COLUMNS, "columns  2\n"}},
	 6,
	 "stray space: fields are separated by one space"},
	{"trailing space",
	 {{L_COLUMNS, "columns 2 \n"}},
	 6,
	 "stray space: fields are separated by one space"},
	{"leading space",
	 {{L_COLUMNS, " columns 2\n"}},
	 6,
	 "stray space: fields are separated by one space"},
	{"tab",
	 {{L_COLUMNS, "columns\t2\n"}},
	 6,
	 "byte 0x09 is not printable ASCII"},
	{"carriage return",
	 {{L_COLUMNS, "columns 2\r\n"}},
	 6,
	 "byte 0x0d is not printable ASCII"},
	{"non-ASCII",
	 {{L_VDISK, "vdisk v\xc3\xa9\n"}},
	 3,
	 "byte 0xc3 is not printable ASCII"},
	{"21 fields",
	 {{L_SERVER0, "server 0 a 1 b 2 c 3 d 4 e 5 f 6 g 7 h 8 i 9 j\n"}},
	 11,
	 "more than 20 fields"},
	/* header keys */
	{"unknown key",
	 {{L_COLUMNS, L_COLUMNS "colour blue\n"}},
	 7,
	 "unknown key 'colour'"},
	{"duplicate key",
	 {{L_COLUMNS, L_COLUMNS L_COLUMNS}},
	 7,
	 "duplicate key 'columns' (first on line 6)"},
	{"two values",
	 {{L_COLUMNS, "columns 2 3\n"}},
	 6,
	 "'columns' takes one value"},
	{"no value",
	 {{L_COLUMNS, "columns\n"}},
	 6,
	 "'columns' takes one value"},
	{"missing master",
	 {{L_MASTER, ""}},
	 10,
	 "key 'master' is missing before the first server line"},
	{"missing vdisk",
	 {{L_VDISK, ""}},
	 10,
	 "key 'vdisk' is missing before the first server line"},
	/* numbers */
	{"letters",
	 {{L_COLUMNS, "columns 2x\n"}},
	 6,
	 "columns '2x' is not an unsigned decimal number"},
	{"leading zero",
	 {{L_COLUMNS, "columns 02\n"}},
	 6,
	 "columns '02' is not an unsigned decimal number"},
	{"sign",
	 {{L_COLUMNS, "columns +2\n"}},
	 6,
	 "columns '+2' is not an unsigned decimal number"},
	{"negative",
	 {{L_R, "replicas -1\n"}},
	 8,
	 "replicas '-1' is not an unsigned decimal number"},
	{"u32 overflow",
	 {{L_COLUMNS, "columns 4294967296\n"}},
	 6,
	 "columns 4294967296 is larger than 4294967295"},
	{"u64 overflow",
	 {{L_SIZE, "size-bytes 18446744073709551616\n"}},
	 4,
	 "size-bytes 18446744073709551616 is larger than "
	 "18446744073709551615"},
	{"21 digits",
	 {{L_SIZE, "size-bytes 100000000000000000000\n"}},
	 4,
	 "size-bytes '100000000000000000000' is not an unsigned decimal "
	 "number"},
	/* the header's rules, named at the key's line */
	{"bad vdisk name",
	 {{L_VDISK, "vdisk a/b\n"}},
	 3,
	 "vdisk 'a/b' is not 1-63 of [A-Za-z0-9._-]"},
	{"size not a multiple of 512",
	 {{L_SIZE, "size-bytes 524289\n"}},
	 4,
	 "size-bytes 524289 is not a positive multiple of 512"},
	{"size 0",
	 {{L_SIZE, "size-bytes 0\n"}},
	 4,
	 "size-bytes 0 is not a positive multiple of 512"},
	{"unit not a power of two",
	 {{L_UNIT, "stripe-unit-bytes 98304\n"}},
	 5,
	 "stripe-unit-bytes 98304 is not a power of two from 4096 to "
	 "1073741824"},
	{"unit too small",
	 {{L_UNIT, "stripe-unit-bytes 2048\n"}},
	 5,
	 "stripe-unit-bytes 2048 is not a power of two from 4096 to "
	 "1073741824"},
	{"extent not a multiple of the unit",
	 {{L_EXTENT, "extent-size-bytes 98304\n"}},
	 9,
	 "extent-size-bytes 98304 is not a multiple of the stripe unit "
	 "(65536) up to 1099511627776"},
	{"extent above 1 TiB",
	 {{L_EXTENT, "extent-size-bytes 1099511693312\n"}},
	 9,
	 "extent-size-bytes 1099511693312 is not a multiple of the stripe "
	 "unit (65536) up to 1099511627776"},
	{"columns 0",
	 {{L_COLUMNS, "columns 0\n"}},
	 6,
	 "columns 0 is not in 1..256"},
	{"columns 257",
	 {{L_COLUMNS, "columns 257\n"}},
	 6,
	 "columns 257 is not in 1..256"},
	{"replicas 0", {{L_R, "replicas 0\n"}}, 8, "replicas 0 is not in 1..4"},
	{"replicas 5", {{L_R, "replicas 5\n"}}, 8, "replicas 5 is not in 1..4"},
	{"wrong J",
	 {{L_J, "extents-per-column 3\n"}},
	 7,
	 "extents-per-column is 3, but size-bytes, stripe-unit-bytes, columns "
	 "and extent-size-bytes give 2"},
	/* 8 TiB over 2 columns of 128 KiB extents: 2^25 per column */
	{"J beyond 2^20",
	 {{L_SIZE, "size-bytes 8796093022208\n"}},
	 4,
	 "size-bytes 8796093022208 needs more than 1048576 extents per "
	 "column"},
	/* 256 columns of 257 extents of 4 KiB, 4 replicas: 263168 slots */
	{"too many slots",
	 {{L_SIZE L_UNIT L_COLUMNS L_J L_R L_EXTENT,
	   "size-bytes 269484032\nstripe-unit-bytes 4096\ncolumns 256\n"
	   "extents-per-column 257\nreplicas 4\nextent-size-bytes 4096\n"}},
	 7,
	 "263168 extent replicas, more than 262144"},
	/* servers */
	{"servers from 1",
	 {{"server 0 ", "server 1 "}},
	 11,
	 "server 1 where server 0 was expected (servers are numbered from 0, "
	 "in order)"},
	{"server number repeated",
	 {{"server 1 ", "server 0 "}},
	 12,
	 "server 0 where server 1 was expected (servers are numbered from 0, "
	 "in order)"},
	{"server without a number",
	 {{L_SERVER0, "server\n"}},
	 11,
	 "server line without a number"},
	{"server number not a number",
	 {{"server 0 ", "server x "}},
	 11,
	 "server number 'x' is not an unsigned decimal number"},
	{"server key without value",
	 {{"lun 1 block-size 512\n", "lun 1 block-size\n"}},
	 11,
	 "server lines are 'server N' and KEY VALUE pairs"},
	{"unknown server key",
	 {{"lun 1 ", "lun 1 color red "}},
	 11,
	 "unknown server key 'color'"},
	{"duplicate server key",
	 {{"lun 1 ", "lun 1 lun 1 "}},
	 11,
	 "duplicate server key 'lun'"},
	{"missing lun", {{"lun 1 ", ""}}, 11, "server key 'lun' is missing"},
	{"missing address",
	 {{"server 0 address 10.0.0.1 ", "server 0 "}},
	 11,
	 "server key 'address' is missing"},
	{"lun 65536",
	 {{"lun 1 ", "lun 65536 "}},
	 11,
	 "server 0: lun 65536 above 65535"},
	{"block size 1000",
	 {{"block-size 4096", "block-size 1000"}},
	 12,
	 "server 1: block-size 1000 is not 512, 1024, 2048 or 4096"},
	{"block size 8192",
	 {{"block-size 4096", "block-size 8192"}},
	 12,
	 "server 1: block-size 8192 is not 512, 1024, 2048 or 4096"},
	{"chap user alone",
	 {{" chap-secret pw!", ""}},
	 13,
	 "server 2: give both chap-user and chap-secret, or neither"},
	{"relative device",
	 {{"lun 1 block-size 512\n", "lun 1 block-size 512 device dev/sdb\n"}},
	 11,
	 "server 0: device must be an absolute path without spaces (e.g. "
	 "/dev/disk/by-path/...)"},
	{"same target and lun",
	 {{"iqn.2026-01.t:b lun 2", "iqn.2026-01.t:a lun 1"}},
	 12,
	 "server 1 has the target and lun of server 0"},
	{"same device",
	 {{"lun 1 block-size 512\n", "lun 1 block-size 512 device /dev/x\n"},
	  {"lun 0 block-size 512 ", "lun 0 block-size 512 device /dev/x "}},
	 13,
	 "server 2 has the device of server 0"},
	{"unused server",
	 {{L_SERVER2, L_SERVER2 "server 3 address 10.0.0.4 portal p:1 "
				"target t lun 0 block-size 512\n"}},
	 14,
	 "server 3 is not used by any extent"},
	{"no server", {{SERVERS, ""}}, 11, "no server line before the extents"},
	/* the order of the sections */
	{"header key among the servers",
	 {{L_SERVER1, L_SERVER1 L_COLUMNS}},
	 13,
	 "unexpected 'columns' line among the servers"},
	{"server among the extents",
	 {{L_X100, L_SERVER2 L_X100}},
	 18,
	 "unexpected 'server' line among the extents"},
	{"checksum line inside",
	 {{L_X100, "checksum crc32c 00000000\n" L_X100}},
	 18,
	 "a checksum line before the end"},
	/* extents */
	{"missing extent",
	 {{L_X011, ""}},
	 17,
	 "extent 1 0 0 where 0 1 1 was expected: one is missing, duplicated "
	 "or out of order"},
	{"duplicate extent",
	 {{L_X000, L_X000 L_X000}},
	 15,
	 "extent 0 0 0 where 0 0 1 was expected: one is missing, duplicated "
	 "or out of order"},
	{"extents out of order",
	 {{L_X000 L_X001, L_X001 L_X000}},
	 14,
	 "extent 0 0 1 where 0 0 0 was expected: one is missing, duplicated "
	 "or out of order"},
	{"extra extent",
	 {{L_X111, L_X111 L_X111}},
	 22,
	 "extra extent line: the geometry has 8"},
	{"last extent missing",
	 {{L_X111, ""}},
	 21,
	 "the file ends after 7 of 8 extent lines"},
	{"no extent",
	 {{EXTENTS, ""}},
	 14,
	 "the file ends after 0 of 0 extent lines"},
	{"extent syntax",
	 {{L_X000, "extent 0 0 0 srv 0 lba 0 ok\n"}},
	 14,
	 "extent lines are 'extent C X R server N lba LBA ok|stale'"},
	{"extent field missing",
	 {{L_X000, "extent 0 0 0 server 0 lba 0\n"}},
	 14,
	 "extent lines are 'extent C X R server N lba LBA ok|stale'"},
	{"bad state",
	 {{L_X000, "extent 0 0 0 server 0 lba 0 okay\n"}},
	 14,
	 "replica state 'okay' is not ok or stale"},
	{"bad coordinate",
	 {{L_X000, "extent 0 0 x server 0 lba 0 ok\n"}},
	 14,
	 "extent coordinate 'x' is not an unsigned decimal number"},
	{"bad lba",
	 {{L_X000, "extent 0 0 0 server 0 lba 1e3 ok\n"}},
	 14,
	 "lba '1e3' is not an unsigned decimal number"},
	{"unknown server",
	 {{L_X000, "extent 0 0 0 server 3 lba 0 ok\n"}},
	 14,
	 "extent 0 0 0: no server 3"},
	{"replicas on one host",
	 {{L_X001, "extent 0 0 1 server 0 lba 1024 ok\n"}},
	 15,
	 "extent 0 0: replicas 0 and 1 are both on host 10.0.0.1"},
	/* server 0: lba 256 and 300 are 22528 bytes apart, E = 131072 */
	{"overlap",
	 {{L_X110, "extent 1 1 0 server 0 lba 300 ok\n"}},
	 20,
	 "this extent overlaps the one on line 19 (server 0)"},
	/* (2^64 - 1 - 131072) / 512 = 36028797018963711 */
	{"lba overflow",
	 {{L_X000, "extent 0 0 0 server 0 lba 36028797018963712 ok\n"}},
	 14,
	 "extent 0 0 0: lba 36028797018963712 overflows"},
};

static void test_errors(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(error_rows); i++) {
		const struct error_row *r = &error_rows[i];
		char *text = edited(r->edits);

		print_message("%s\n", r->name);
		expect_error(text, strlen(text), r->line, r->reason);
		free(text);
	}
}

/* The "lba overflow" row's neighbour is accepted. */
static void test_lba_limit_accepted(void **state)
{
	static const struct edit_spec e[MAX_EDITS] = {
		{L_X000, "extent 0 0 0 server 0 lba 36028797018963711 ok\n"},
	};
	char *text = edited(e);
	struct stripe_map m;

	parse_ok(text, &m);
	assert_int_equal(stripe_map_slot(&m, 0, 0, 0)->lba,
			 36028797018963711ull);
	stripe_map_free(&m);
	free(text);
}

/* --- the file as a whole: checksum, truncation, stray bytes ------------------------ */

static void test_checksum_errors(void **state)
{
	const char *body = BASE;
	uint32_t crc = stripe_map_crc32c(0, body, strlen(body));
	char *text = seal(body), *bad, want[256];
	size_t len = strlen(text);

	/* one bit flipped in the body: both values named */
	bad = strdup(text);
	bad[strlen(L_MAGIC L_COMMENT) + 6] ^=
		1; /* "vdisk vd1" -> "vdisk wd1" */
	snprintf(want, sizeof(want),
		 "checksum mismatch (the file says %08x, its contents give "
		 "%08x): it is corrupted or was edited",
		 crc, stripe_map_crc32c(0, bad, strlen(body)));
	expect_error(bad, len, 22, want);
	free(bad);

	/* the checksum digits in upper case */
	bad = strdup(text);
	for (size_t i = len - 9; i < len - 1; i++)
		bad[i] = (char)(bad[i] >= 'a' ? bad[i] - 32 : bad[i]);
	if (strcmp(bad, text)) /* some letter in the digits */
		expect_error(bad, len, 22,
			     "the checksum is not 8 lowercase hex digits");
	free(bad);
	bad = edit(strdup(text), "checksum crc32c ", "checksum crc32c x");
	bad[strlen(bad) - 2] = '\n';
	bad[strlen(bad) - 1] = '\0';
	expect_error(bad, strlen(bad), 22,
		     "the checksum is not 8 lowercase hex digits");
	free(bad);

	/* seven digits: not a checksum line */
	bad = strdup(text);
	bad[len - 2] = '\n';
	expect_error(
		bad, len - 1, 22,
		"the last line is not 'checksum crc32c XXXXXXXX': the file "
		"is truncated");
	free(bad);

	/* a line after the checksum line */
	bad = malloc(len + sizeof(L_X000));
	snprintf(bad, len + sizeof(L_X000), "%s%s", text, L_X000);
	expect_error(bad, strlen(bad), 23,
		     "the last line is not 'checksum crc32c XXXXXXXX': "
		     "something follows the checksum line");
	free(bad);

	/* a different checksum algorithm name */
	bad = edit(strdup(text), "crc32c", "crc32x");
	expect_error(
		bad, len, 22,
		"the last line is not 'checksum crc32c XXXXXXXX': the file "
		"is truncated");
	free(bad);
	free(text);
}

/* A file cut anywhere is refused, and says why. */
static void test_truncated(void **state)
{
	char *text = seal(BASE);
	size_t len = strlen(text);

	/* cut after line 16: 16 newlines, no checksum */
	{
		const char *cut = strstr(text, L_X011);

		expect_error(text, (size_t)(cut - text), 16,
			     "the last line is not 'checksum crc32c XXXXXXXX': "
			     "the file is truncated");
	}
	/*
	 * The last newline missing (line 22, the checksum line), or the text
	 * cut inside line 2 (bytes 16-33 are "# written by hand\n"): the
	 * error names the unterminated line.
	 */
	expect_error(text, len - 1, 22,
		     "the file does not end with a newline: it is truncated");
	expect_error(text, 20, 2,
		     "the file does not end with a newline: it is truncated");
	expect_error(text, 0, 1, "the file is empty");
	/* a NUL byte anywhere: byte 30 is in line 2 */
	{
		char *nul = strdup(text);

		nul[30] = '\0';
		expect_error(
			nul, len, 2,
			"the file holds a NUL byte (at byte 30): it is not "
			"a mapping file");
		free(nul);
	}
	free(text);
}

/* Texts that are nothing like a map. */
static void test_not_a_map(void **state)
{
	static const struct {
		const char *body;
		unsigned int line;
		const char *reason;
	} rows[] = {
		/* only the checksum line: the checksum of nothing is 0 */
		{"", 1, "the file ends after 0 of 0 extent lines"},
		{"hello\n", 1,
		 "not a mapping file: the first line must be "
		 "'tapstripe-map 1' or 'tapstripe-map 2'"},
		{L_MAGIC, 2, "the file ends after 0 of 0 extent lines"},
		{HEADER, 11, "the file ends after 0 of 0 extent lines"},
		{HEADER SERVERS, 14, "the file ends after 0 of 0 extent lines"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char *text = seal(rows[i].body);

		print_message("row %zu\n", i);
		expect_error(text, strlen(text), rows[i].line, rows[i].reason);
		free(text);
	}
}

/* A line of 1024 bytes is allowed, of 1025 not. */
static void test_line_length(void **state)
{
	char target[1100], line[1200], *body, *text;
	struct edit_spec e[MAX_EDITS] = {{"target iqn.2026-01.t:a ", NULL}};
	size_t fixed = strlen(L_SERVER0) - 1 - strlen("iqn.2026-01.t:a");

	/* a target that makes line 11 exactly 1024 bytes, then 1025 */
	for (size_t extra = 0; extra < 2; extra++) {
		size_t tlen = 1024 + extra - fixed;

		memset(target, 'q', tlen);
		target[tlen] = '\0';
		snprintf(line, sizeof(line), "target %s ", target);
		e[0].new = line;
		text = edited(e);
		body = strstr(text, "server 0 ");
		assert_int_equal(strchr(body, '\n') - body, 1024 + extra);
		print_message("line of %zu bytes\n", 1024 + extra);
		if (!extra)
			expect_error(text, strlen(text), 11,
				     "target is 949 bytes long, at most 223");
		else
			expect_error(text, strlen(text), 11,
				     "line longer than 1024 bytes");
		free(text);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_base_and_variants),
		cmocka_unit_test(test_valid_device),
		cmocka_unit_test(test_valid_minimal_and_limits),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_lba_limit_accepted),
		cmocka_unit_test(test_checksum_errors),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_not_a_map),
		cmocka_unit_test(test_line_length),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
