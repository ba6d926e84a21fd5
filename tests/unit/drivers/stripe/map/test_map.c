/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_map.c - the mapping file (drivers/stripe/map/map*.c): a round trip,
 * one test per reason a file is rejected (each checks the line number and
 * the reason), truncation, a flipped bit, atomic writing, and the lock
 * that refuses a second opener.
 *
 * Hand edits are "resealed" (their checksum line recomputed) so that the
 * rule under test, not the checksum, rejects them.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
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

#define MiB	      (1024ull * 1024)
#define CHECKSUM_LINE "checksum crc32c "

/* --- a valid map ----------------------------------------------------------- */

static void set_server(struct stripe_map_server *s, const char *addr,
		       const char *target, uint32_t block)
{
	snprintf(s->address, sizeof(s->address), "%s", addr);
	snprintf(s->portal, sizeof(s->portal), "%s:3260", addr);
	snprintf(s->target, sizeof(s->target), "%s", target);
	s->lun = 1;
	s->block_size = block;
}

static void set_slot(struct stripe_map *m, size_t i, uint32_t server,
		     uint64_t lba, bool stale)
{
	m->slots[i].server = server;
	m->slots[i].lba = lba;
	if (stale)
		stripe_map_slot_mark_all(m, i);
	else
		stripe_map_slot_clear_all(m, i);
}

/*
 * 4 MiB, 64 KiB units, 2 columns, 1 MiB extents (J = 2), 2 replicas on 4
 * servers; server 2 has CHAP, server 3 4 KiB blocks, one replica stale.
 */
static void base_map(struct stripe_map *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->vdisk, sizeof(m->vdisk), "db1");
	snprintf(m->master, sizeof(m->master), "127.0.0.1:7700");
	m->size_bytes = 4 * MiB;
	m->stripe_unit_bytes = 64 * 1024;
	m->extent_size_bytes = 1 * MiB;
	m->columns = 2;
	m->extents_per_column = 2;
	m->replicas = 2;
	assert_int_equal(stripe_map_alloc(m, 4), 0);
	set_server(&m->servers[0], "10.0.0.1", "iqn.2024-01.t:a", 512);
	set_server(&m->servers[1], "10.0.0.2", "iqn.2024-01.t:b", 512);
	set_server(&m->servers[2], "10.0.0.3", "iqn.2024-01.t:c", 512);
	set_server(&m->servers[3], "10.0.0.4", "iqn.2024-01.t:d", 4096);
	snprintf(m->servers[2].chap_user, STRIPE_MAP_CHAP_SIZE, "alice");
	snprintf(m->servers[2].chap_secret, STRIPE_MAP_CHAP_SIZE, "s3cret!");
	set_slot(m, 0, 0, 0, false);
	set_slot(m, 1, 1, 0, false);
	set_slot(m, 2, 0, 2048, false);
	set_slot(m, 3, 1, 2048, false);
	set_slot(m, 4, 2, 0, false);
	set_slot(m, 5, 3, 0, false);
	set_slot(m, 6, 2, 2048, false);
	set_slot(m, 7, 3, 256, true);
}

/* The base map's text (lines: 1 magic ... 11-14 servers, 15-22 extents). */
static char *base_text(void)
{
	struct stripe_map_error err;
	struct td_strbuf sb;
	struct stripe_map m;
	char *text;

	base_map(&m);
	td_strbuf_init(&sb);
	assert_int_equal(stripe_map_format(&m, &sb, &err), 0);
	text = strdup(td_strbuf_str(&sb));
	td_strbuf_free(&sb);
	stripe_map_free(&m);
	return text;
}

/* Replace the first old by new in text (freed); the result is new memory. */
static char *edit(char *text, const char *old, const char *new)
{
	char *at = strstr(text, old), *out;
	size_t len;

	assert_non_null(at);
	len = strlen(text) - strlen(old) + strlen(new) + 1;
	out = malloc(len);
	snprintf(out, len, "%.*s%s%s", (int)(at - text), text, new,
		 at + strlen(old));
	free(text);
	return out;
}

/* Recompute the checksum line (the last one) of an edited text. */
static char *reseal(char *text)
{
	char *last = strstr(text, CHECKSUM_LINE), *next, *out;
	size_t body;

	while ((next = strstr(last + 1, CHECKSUM_LINE)))
		last = next;
	body = (size_t)(last - text);

	out = malloc(body + 64);
	snprintf(out, body + 64, "%.*s" CHECKSUM_LINE "%08x\n", (int)body, text,
		 stripe_map_crc32c(0, text, body));
	free(text);
	return out;
}

static void expect_reject(const char *text, unsigned int line, const char *why)
{
	struct stripe_map_error err;
	struct stripe_map m;

	assert_int_equal(stripe_map_parse(text, strlen(text), &m, &err),
			 -EINVAL);
	print_message("line %u: %s\n", err.line, err.reason);
	assert_int_equal(err.line, line);
	assert_non_null(strstr(err.reason, why));
	assert_null(m.slots);
	assert_null(m.servers);
}

/* Edit, reseal, expect the rejection. */
static void reject_edit(const char *old, const char *new, unsigned int line,
			const char *why)
{
	char *text = reseal(edit(base_text(), old, new));

	expect_reject(text, line, why);
	free(text);
}

/* --- accepted ---------------------------------------------------------------- */

static void test_crc32c(void **state)
{
	assert_int_equal(stripe_map_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(stripe_map_crc32c(0, "", 0), 0);
	/* continuing gives the same as one pass */
	assert_int_equal(
		stripe_map_crc32c(stripe_map_crc32c(0, "1234", 4), "56789", 5),
		0xe3069283);
}

static void test_round_trip(void **state)
{
	struct stripe_map a, b;
	struct stripe_map_error err;
	char *text = base_text();

	base_map(&a);
	assert_int_equal(stripe_map_parse(text, strlen(text), &b, &err), 0);
	assert_string_equal(b.vdisk, "db1");
	assert_string_equal(b.master, "127.0.0.1:7700");
	assert_int_equal(b.size_bytes, a.size_bytes);
	assert_int_equal(b.stripe_unit_bytes, a.stripe_unit_bytes);
	assert_int_equal(b.extent_size_bytes, a.extent_size_bytes);
	assert_int_equal(b.columns, 2);
	assert_int_equal(b.extents_per_column, 2);
	assert_int_equal(b.replicas, 2);
	assert_int_equal(b.nr_servers, 4);
	assert_memory_equal(b.servers, a.servers, 4 * sizeof(*a.servers));
	assert_memory_equal(b.slots, a.slots, 8 * sizeof(*a.slots));
	assert_true(stripe_map_slot(&b, 1, 1, 1)->stale);
	assert_int_equal(stripe_map_slot(&b, 1, 1, 1)->lba, 256);
	assert_string_equal(b.servers[2].chap_secret, "s3cret!");
	stripe_map_free(&a);
	stripe_map_free(&b);
	free(text);
}

static void test_comments_and_key_order(void **state)
{
	char *text = base_text();
	struct stripe_map_error err;
	struct stripe_map m;

	/* header keys in another order, and a comment among the extents */
	text = edit(text, "columns 2\nextents-per-column 2\n",
		    "extents-per-column 2\ncolumns 2\n");
	text = edit(text, "extent 1 0 0", "# column 1\nextent 1 0 0");
	text = reseal(text);
	assert_int_equal(stripe_map_parse(text, strlen(text), &m, &err), 0);
	assert_int_equal(m.columns, 2);
	stripe_map_free(&m);
	free(text);
}

/* --- rejected: magic, keys, numbers ----------------------------------------- */

static void test_reject_magic_and_version(void **state)
{
	reject_edit("tapstripe-map 1", "tapstripe-mop 1", 1,
		    "not a mapping file");
	reject_edit("tapstripe-map 1", "tapstripe-map 3", 1,
		    "unsupported version '3'");
}

static void test_reject_unknown_key(void **state)
{
	reject_edit("replicas 2\n", "replicas 2\ncolour blue\n", 9,
		    "unknown key 'colour'");
}

static void test_reject_duplicate_key(void **state)
{
	reject_edit("replicas 2\n", "replicas 2\ncolumns 2\n", 9,
		    "duplicate key 'columns' (first on line 6)");
}

static void test_reject_missing_key(void **state)
{
	reject_edit("master 127.0.0.1:7700\n", "", 10,
		    "key 'master' is missing");
}

static void test_reject_bad_numbers(void **state)
{
	reject_edit("columns 2", "columns 02", 6, "not an unsigned decimal");
	reject_edit("columns 2", "columns -2", 6, "not an unsigned decimal");
	reject_edit("columns 2", "columns 4294967296", 6, "larger than");
	reject_edit("size-bytes 4194304", "size-bytes 18446744073709551616", 4,
		    "larger than");
	reject_edit("lba 256", "lba 2x", 22, "not an unsigned decimal");
}

static void test_reject_stripe_unit(void **state)
{
	/* not a power of two */
	reject_edit("stripe-unit-bytes 65536", "stripe-unit-bytes 65537", 5,
		    "not a power of two");
	/* below 4 KiB */
	reject_edit("stripe-unit-bytes 65536", "stripe-unit-bytes 2048", 5,
		    "not a power of two");
}

static void test_reject_extent_not_multiple(void **state)
{
	reject_edit("extent-size-bytes 1048576", "extent-size-bytes 1081344", 9,
		    "not a multiple of the stripe unit");
}

static void test_reject_size(void **state)
{
	reject_edit("size-bytes 4194304", "size-bytes 4194305", 4,
		    "not a positive multiple of 512");
	reject_edit("size-bytes 4194304", "size-bytes 0", 4,
		    "not a positive multiple of 512");
	/* J would exceed the bound (2^60 bytes over 2 columns of 64 KiB) */
	reject_edit("size-bytes 4194304", "size-bytes 1152921504606846976", 4,
		    "more than");
}

static void test_reject_counts_beyond_bounds(void **state)
{
	reject_edit("columns 2", "columns 257", 6, "not in 1..256");
	reject_edit("columns 2", "columns 0", 6, "not in 1..256");
	reject_edit("replicas 2", "replicas 5", 8, "not in 1..4");
}

static void test_reject_inconsistent_j(void **state)
{
	reject_edit("extents-per-column 2", "extents-per-column 3", 7,
		    "give 2");
}

/* --- rejected: servers --------------------------------------------------------- */

static void test_reject_server_numbering(void **state)
{
	reject_edit("server 1 ", "server 2 ", 12,
		    "server 2 where server 1 was expected");
}

static void test_reject_server_keys(void **state)
{
	reject_edit("lun 1 block-size 4096", "lun 1 block-size 4096 color red",
		    14, "unknown server key 'color'");
	reject_edit("lun 1 block-size 4096", "lun 1 block-size 4096 lun 2", 14,
		    "duplicate server key 'lun'");
	reject_edit("lun 1 block-size 4096", "block-size 4096", 14,
		    "server key 'lun' is missing");
	reject_edit("block-size 4096", "block-size 3000", 14,
		    "block-size 3000 is not");
	reject_edit("block-size 4096", "block-size 4096 lun", 14,
		    "KEY VALUE pairs");
}

static void test_reject_lun_range(void **state)
{
	reject_edit("target iqn.2024-01.t:d lun 1",
		    "target iqn.2024-01.t:d lun "
		    "65536",
		    14, "lun 65536 above 65535");
}

static void test_reject_chap_half(void **state)
{
	reject_edit(" chap-secret s3cret!", "", 13,
		    "give both chap-user and chap-secret");
}

/* The optional device key (a kernel iSCSI session's block device). */
static void test_device_round_trip(void **state)
{
	const char *dev = "/dev/disk/by-path/"
			  "ip-10.0.0.2:3260-iscsi-iqn.2024-01.t:b-lun-1";
	struct stripe_map a, b;
	struct stripe_map_error err;
	struct td_strbuf sb;

	base_map(&a);
	snprintf(a.servers[1].device, STRIPE_MAP_DEVICE_SIZE, "%s", dev);
	td_strbuf_init(&sb);
	assert_int_equal(stripe_map_format(&a, &sb, &err), 0);
	/* the key follows the others, on server 1's line only */
	assert_non_null(strstr(td_strbuf_str(&sb),
			       "target iqn.2024-01.t:b lun 1 block-size 512 "
			       "device /dev/disk/by-path/ip-10.0.0.2:3260-"
			       "iscsi-iqn.2024-01.t:b-lun-1\n"));
	assert_int_equal(stripe_map_parse(td_strbuf_str(&sb), sb.len, &b, &err),
			 0);
	assert_string_equal(b.servers[1].device, dev);
	assert_string_equal(b.servers[0].device, "");
	assert_memory_equal(b.servers, a.servers, 4 * sizeof(*a.servers));
	td_strbuf_free(&sb);
	stripe_map_free(&a);
	stripe_map_free(&b);
}

static void test_reject_device(void **state)
{
	reject_edit("block-size 4096", "block-size 4096 device dev/sdb", 14,
		    "server 3: device must be an absolute path");
	reject_edit("block-size 4096",
		    "block-size 4096 device /dev/sdb device /dev/sdc", 14,
		    "duplicate server key 'device'");
	reject_edit("block-size 4096", "block-size 4096 device", 14,
		    "KEY VALUE pairs");
}

static void test_reject_device_shared(void **state)
{
	char *text = base_text();

	text = edit(text, "t:a lun 1 block-size 512",
		    "t:a lun 1 block-size 512 device /dev/sdb");
	text = edit(text, "t:d lun 1 block-size 4096",
		    "t:d lun 1 block-size 4096 device /dev/sdb");
	text = reseal(text);
	expect_reject(text, 14, "server 3 has the device of server 0");
	free(text);
}

static void test_reject_duplicate_target(void **state)
{
	reject_edit("iqn.2024-01.t:d", "iqn.2024-01.t:a", 14,
		    "server 3 has the target and lun of server 0");
}

static void test_reject_unused_server(void **state)
{
	char *text = base_text();

	text = edit(text, "extent 0 0 0",
		    "server 4 address 10.0.0.9 portal "
		    "10.0.0.9:3260 target iqn.x:z lun 1 "
		    "block-size 512\nextent 0 0 0");
	text = reseal(text);
	expect_reject(text, 15, "server 4 is not used by any extent");
	free(text);
}

/* --- rejected: extents --------------------------------------------------------- */

static void test_reject_missing_extent(void **state)
{
	reject_edit("extent 0 1 0 server 0 lba 2048 ok\n", "", 17,
		    "extent 0 1 1 where 0 1 0 was expected");
	/* the last one missing: the file ends early */
	reject_edit("extent 1 1 1 server 3 lba 256 stale\n", "", 22,
		    "after 7 of 8 extent lines");
}

static void test_reject_duplicate_extent(void **state)
{
	reject_edit("extent 0 1 0 server 0 lba 2048 ok\n",
		    "extent 0 0 1 server 0 lba 2048 ok\n", 17,
		    "extent 0 0 1 where 0 1 0 was expected");
}

static void test_reject_extra_extent(void **state)
{
	reject_edit("extent 1 1 1 server 3 lba 256 stale\n",
		    "extent 1 1 1 server 3 lba 256 stale\n"
		    "extent 2 0 0 server 3 lba 512 ok\n",
		    23, "extra extent line");
}

static void test_reject_extent_syntax(void **state)
{
	reject_edit("extent 0 0 0 server 0 lba 0 ok",
		    "extent 0 0 0 server 0 "
		    "lba 0 good",
		    15, "replica state 'good'");
	reject_edit("extent 0 0 0 server 0 lba 0 ok",
		    "extent 0 0 0 srv 0 lba "
		    "0 ok",
		    15, "extent lines are");
	reject_edit("extent 0 0 0 server 0 lba 0 ok",
		    "extent 0 0 0 server 9 "
		    "lba 0 ok",
		    15, "no server 9");
}

static void test_reject_same_host(void **state)
{
	/* replica 1 of extent (0, 0) moves to server 0's host */
	reject_edit("extent 0 0 1 server 1 lba 0",
		    "extent 0 0 1 server 0 lba "
		    "4096",
		    16, "replicas 0 and 1 are both on host 10.0.0.1");
	/* two servers (distinct LUNs) on one host are one host */
	reject_edit("address 10.0.0.2", "address 10.0.0.1", 16,
		    "both on host 10.0.0.1");
}

static void test_reject_overlap(void **state)
{
	/* server 0: extent at lba 0 and one at lba 1024 (512 KiB in) */
	reject_edit("extent 0 1 0 server 0 lba 2048",
		    "extent 0 1 0 server 0 "
		    "lba 1024",
		    17, "overlaps the one on line 15");
}

static void test_reject_lba_overflow(void **state)
{
	reject_edit("lba 256 stale", "lba 18014398509481983 stale", 22,
		    "overflows");
}

static void test_reject_out_of_section(void **state)
{
	reject_edit("extent 0 0 0", "columns 2\nextent 0 0 0", 15,
		    "unexpected 'columns' line among the servers");
	reject_edit("extent 1 1 1",
		    "server 4 address a portal a:1 target t "
		    "lun 1 block-size 512\nextent 1 1 1",
		    22, "unexpected 'server' line among the extents");
}

/* --- rejected: damaged files ------------------------------------------------------ */

static void test_reject_truncated(void **state)
{
	char *text = base_text();
	size_t len = strlen(text);
	struct stripe_map_error err;
	struct stripe_map m;
	char half[4096];

	/* cut in the middle of the extents, at a line's end */
	snprintf(half, sizeof(half), "%.*s", (int)len / 2, text);
	*(strrchr(half, '\n') + 1) = '\0';
	assert_int_equal(stripe_map_parse(half, strlen(half), &m, &err),
			 -EINVAL);
	assert_non_null(strstr(err.reason, "truncated"));
	/* cut anywhere: never accepted */
	for (size_t cut = 0; cut < len; cut++)
		assert_int_equal(stripe_map_parse(text, cut, &m, &err),
				 -EINVAL);
	/* the final newline lost */
	text[len - 1] = '\0';
	expect_reject(text, 23, "newline"); /* the checksum line's */
	free(text);
}

static void test_reject_bit_flip(void **state)
{
	char *text = base_text();
	size_t len = strlen(text), body = strstr(text, CHECKSUM_LINE) - text;

	/* every single bit of the body, flipped, is caught */
	for (size_t i = 0; i < body; i++)
		for (int bit = 0; bit < 8; bit++) {
			struct stripe_map_error err;
			struct stripe_map m;

			text[i] ^= (char)(1 << bit);
			assert_int_equal(stripe_map_parse(text, len, &m, &err),
					 -EINVAL);
			text[i] ^= (char)(1 << bit);
		}
	text[body / 2] ^= 1;
	expect_reject(text, 23, "checksum mismatch");
	free(text);
}

static void test_reject_after_checksum(void **state)
{
	char *text = base_text();
	size_t len = strlen(text);

	text = realloc(text, len + 16);
	strcat(text, "vdisk db2\n");
	expect_reject(text, 24, "something follows the checksum line");
	free(text);
	reject_edit("extent 0 0 0", "checksum crc32c 00000000\nextent 0 0 0",
		    15, "a checksum line before the end");
}

static void test_reject_bad_bytes(void **state)
{
	reject_edit("columns 2", "columns\t2", 6, "byte 0x09");
	reject_edit("columns 2\n", "columns 2\r\n", 6, "byte 0x0d");
	reject_edit("columns 2", "columns  2", 6, "stray space");
	reject_edit("columns 2", "columns 2 ", 6, "stray space");
	reject_edit("vdisk db1", "vdisk d\xc3\xa9", 3, "byte 0xc3");
	reject_edit("columns 2\n", "columns 2\n\n", 7, "empty line");
}

static void test_reject_long_line(void **state)
{
	char target[STRIPE_MAP_MAX_LINE + 8];

	memset(target, 'x', sizeof(target) - 1);
	target[sizeof(target) - 1] = '\0';
	reject_edit("iqn.2024-01.t:a", target, 11, "longer than 1024");
}

static void test_reject_nul_and_empty(void **state)
{
	static const char nul[] = "tapstripe-map 1\n\0\n";

	expect_reject("", 1, "empty");
	{
		struct stripe_map_error err;
		struct stripe_map m;

		assert_int_equal(
			stripe_map_parse(nul, sizeof(nul) - 1, &m, &err),
			-EINVAL);
		assert_non_null(strstr(err.reason, "NUL byte (at byte 16)"));
		assert_int_equal(err.line, 2);
	}
}

static void test_reject_bad_name(void **state)
{
	reject_edit("vdisk db1", "vdisk db/1", 3, "is not 1-63 of");
}

/* --- the writer, files and locks ------------------------------------------------- */

static char tmpdir[64];

static int make_tmpdir(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_map.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd);
}

static void test_write_read(void **state)
{
	char path[128], tmp[160];
	struct stripe_map a, b;
	struct stripe_map_error err;
	struct stat st;

	base_map(&a);
	snprintf(path, sizeof(path), "%s/db1.map", tmpdir);
	assert_int_equal(stripe_map_write(path, &a, &err), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	assert_int_not_equal(access(tmp, F_OK), 0);
	/* replacing an unlocked file works */
	stripe_map_slot_mark_all(&a, 0);
	assert_int_equal(stripe_map_write(path, &a, &err), 0);
	assert_int_equal(stripe_map_read(path, &b, &err), 0);
	assert_true(b.slots[0].stale);
	stripe_map_free(&a);
	stripe_map_free(&b);
	assert_int_equal(stripe_map_read("/nonexistent/x.map", &b, &err),
			 -ENOENT);
	assert_non_null(strstr(err.reason, "/nonexistent/x.map"));
}

static void test_writer_refuses_bad_map(void **state)
{
	char path[128];
	struct stripe_map m;
	struct stripe_map_error err;

	base_map(&m);
	m.slots[1].server = 0; /* both replicas of (0, 0) on server 0 */
	snprintf(path, sizeof(path), "%s/bad.map", tmpdir);
	assert_int_equal(stripe_map_write(path, &m, &err), -EINVAL);
	assert_non_null(strstr(err.reason, "both on host"));
	assert_int_not_equal(access(path, F_OK), 0);
	stripe_map_free(&m);
}

static void test_second_opener_refused(void **state)
{
	char path[128];
	struct stripe_map a, b, m;
	struct stripe_map_error err;
	int fd1, fd2;

	base_map(&m);
	snprintf(path, sizeof(path), "%s/locked.map", tmpdir);
	assert_int_equal(stripe_map_write(path, &m, &err), 0);
	assert_int_equal(stripe_map_open(path, &a, &fd1, &err), 0);
	/* a second opener, even in the same process, is refused */
	assert_int_equal(stripe_map_open(path, &b, &fd2, &err), -EBUSY);
	assert_non_null(strstr(err.reason, path));
	assert_non_null(strstr(err.reason, "in use"));
	/* and nobody replaces the file under the opener */
	assert_int_equal(stripe_map_write(path, &m, &err), -EBUSY);
	/* readers that only look are fine */
	assert_int_equal(stripe_map_read(path, &b, &err), 0);
	stripe_map_free(&b);
	stripe_map_close(fd1);
	assert_int_equal(stripe_map_open(path, &b, &fd2, &err), 0);
	assert_int_equal(stripe_map_unlink(path, fd2), 0);
	assert_int_not_equal(access(path, F_OK), 0);
	stripe_map_free(&a);
	stripe_map_free(&b);
	stripe_map_free(&m);
}

static void test_reject_big_file(void **state)
{
	char path[128];
	struct stripe_map m;
	struct stripe_map_error err;
	int fd;

	snprintf(path, sizeof(path), "%s/big.map", tmpdir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, STRIPE_MAP_MAX_FILE_BYTES + 1), 0);
	close(fd);
	assert_int_equal(stripe_map_read(path, &m, &err), -EFBIG);
	assert_non_null(strstr(err.reason, "not a mapping file"));
}

/* Not a regular file: refused at once (a FIFO would block open(2)),
 * naming the file and what it is. */
static void test_reject_not_a_file(void **state)
{
	char path[128], text[STRIPE_MAP_ERROR_TEXT_MAX];
	struct stripe_map m;
	struct stripe_map_error err;
	int fd;

	snprintf(path, sizeof(path), "%s/fifo.map", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(stripe_map_read(path, &m, &err), -EINVAL);
	stripe_map_error_text(&err, path, text, sizeof(text));
	assert_non_null(strstr(text, "fifo.map is a FIFO, not a mapping file"));
	assert_null(strstr(text + 1, tmpdir)); /* named once */
	assert_int_equal(stripe_map_open(path, &m, &fd, &err), -EINVAL);
	assert_non_null(strstr(err.reason, "is a FIFO"));
	assert_int_equal(stripe_map_open(tmpdir, &m, &fd, &err), -EISDIR);
	assert_non_null(strstr(err.reason, "is a directory"));
}

/* The line to print names the file, and the line when there is one. */
static void test_error_text(void **state)
{
	static const struct {
		struct stripe_map_error err;
		const char *want;
	} rows[] = {
		{{.line = 17, .reason = "checksum mismatch"},
		 "/m/x.map: line 17: checksum mismatch"},
		{{.line = 0, .reason = "the map has no extents"},
		 "/m/x.map: the map has no extents"},
		{{.names_file = true, .reason = "cannot open /m/x.map: EIO"},
		 "cannot open /m/x.map: EIO"},
	};
	char text[STRIPE_MAP_ERROR_TEXT_MAX];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		stripe_map_error_text(&rows[i].err, "/m/x.map", text,
				      sizeof(text));
		assert_string_equal(text, rows[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_comments_and_key_order),
		cmocka_unit_test(test_reject_magic_and_version),
		cmocka_unit_test(test_reject_unknown_key),
		cmocka_unit_test(test_reject_duplicate_key),
		cmocka_unit_test(test_reject_missing_key),
		cmocka_unit_test(test_reject_bad_numbers),
		cmocka_unit_test(test_reject_stripe_unit),
		cmocka_unit_test(test_reject_extent_not_multiple),
		cmocka_unit_test(test_reject_size),
		cmocka_unit_test(test_reject_counts_beyond_bounds),
		cmocka_unit_test(test_reject_inconsistent_j),
		cmocka_unit_test(test_reject_server_numbering),
		cmocka_unit_test(test_reject_server_keys),
		cmocka_unit_test(test_reject_lun_range),
		cmocka_unit_test(test_reject_chap_half),
		cmocka_unit_test(test_device_round_trip),
		cmocka_unit_test(test_reject_device),
		cmocka_unit_test(test_reject_device_shared),
		cmocka_unit_test(test_reject_duplicate_target),
		cmocka_unit_test(test_reject_unused_server),
		cmocka_unit_test(test_reject_missing_extent),
		cmocka_unit_test(test_reject_duplicate_extent),
		cmocka_unit_test(test_reject_extra_extent),
		cmocka_unit_test(test_reject_extent_syntax),
		cmocka_unit_test(test_reject_same_host),
		cmocka_unit_test(test_reject_overlap),
		cmocka_unit_test(test_reject_lba_overflow),
		cmocka_unit_test(test_reject_out_of_section),
		cmocka_unit_test(test_reject_truncated),
		cmocka_unit_test(test_reject_bit_flip),
		cmocka_unit_test(test_reject_after_checksum),
		cmocka_unit_test(test_reject_bad_bytes),
		cmocka_unit_test(test_reject_long_line),
		cmocka_unit_test(test_reject_nul_and_empty),
		cmocka_unit_test(test_reject_bad_name),
		cmocka_unit_test_setup_teardown(test_write_read, make_tmpdir,
						remove_tmpdir),
		cmocka_unit_test_setup_teardown(test_writer_refuses_bad_map,
						make_tmpdir, remove_tmpdir),
		cmocka_unit_test_setup_teardown(test_second_opener_refused,
						make_tmpdir, remove_tmpdir),
		cmocka_unit_test_setup_teardown(test_reject_big_file,
						make_tmpdir, remove_tmpdir),
		cmocka_unit_test_setup_teardown(test_reject_not_a_file,
						make_tmpdir, remove_tmpdir),
		cmocka_unit_test(test_error_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
