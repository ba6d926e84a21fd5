/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nbd-proto.c - the NBD wire format and checks, against tables and
 * byte strings written out by hand from the protocol specification.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "frontends/nbd/nbd-proto.h"

#define MIB (1ull << 20)

/* --- errors ---------------------------------------------------------------- */

static void test_map_error(void **state)
{
	static const struct {
		int err;
		uint16_t cmd;
		uint32_t want;
	} rows[] = {
		{0, 0, 0},
		{-ERANGE, 0 /* READ */, 22},
		{-ERANGE, 1 /* WRITE */, 28},
		{-ERANGE, 6 /* WRITE_ZEROES */, 28},
		{-ERANGE, 4 /* TRIM */, 28},
		{-ERANGE, 3 /* FLUSH */, 22},
		{-EROFS, 1, 1},
		{-EROFS, 4, 1},
		{-EPERM, 6, 1},
		{-EOPNOTSUPP, 4, 95},
		{-EOPNOTSUPP, 3, 95},
		{-EINVAL, 0, 22},
		{-EINVAL, 1, 22},
		{-ENOMEM, 0, 12},
		{-ENOSPC, 1, 28},
		{-EDQUOT, 1, 28},
		{-EFBIG, 6, 28},
		{-EIO, 0, 5},
		{-EIO, 3, 5},
		{-ETIMEDOUT, 1, 5},
		{-ECONNRESET, 0, 5},
		{-EBADF, 4, 5},
		{-EAGAIN, 0, 5},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint32_t got = nbd_map_error(rows[i].err, rows[i].cmd);

		if (got != rows[i].want)
			fail_msg("row %zu: err %d cmd %u: got %u, want %u", i,
				 rows[i].err, rows[i].cmd, got, rows[i].want);
	}
}

/* --- transmission flags ------------------------------------------------------ */

static void test_transmission_flags(void **state)
{
	static const struct {
		uint32_t features;
		bool ro;
		uint16_t want;
	} rows[] = {
		/* HAS_FLAGS 0x1, READ_ONLY 0x2, FLUSH 0x4, FUA 0x8,
		 * TRIM 0x20, WRITE_ZEROES 0x40, CAN_MULTI_CONN 0x100 */
		{0, false, 0x101},
		{TD_FEAT_FLUSH, false, 0x105},
		{TD_FEAT_FUA, false, 0x109},
		{TD_FEAT_DISCARD, false, 0x121},
		{TD_FEAT_WRITE_ZEROES, false, 0x141},
		{TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			 TD_FEAT_WRITE_ZEROES,
		 false, 0x16d},
		{TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			 TD_FEAT_WRITE_ZEROES,
		 true, 0x107},
		{0, true, 0x103},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct td_disk_info info = {
			.size_sectors = 2048,
			.features = rows[i].features,
			.read_only = rows[i].ro,
		};

		if (nbd_transmission_flags(&info) != rows[i].want)
			fail_msg("row %zu: got 0x%x, want 0x%x", i,
				 nbd_transmission_flags(&info), rows[i].want);
	}
}

/* --- BLOCK_STATUS and metadata contexts ---------------------------------------- */

static void test_check_block_status(void **state)
{
	static const struct {
		uint16_t flags;
		uint64_t offset;
		uint32_t length;
		uint32_t err;
		uint32_t bs_length; /* clamped to the 1 MiB export */
	} rows[] = {
		{0, 0, 4096, 0, 4096},
		{0x8 /* REQ_ONE */, 0, 4096, 0, 4096},
		{0, 0, 0xfffffe00u, 0, MIB}, /* cut at the end */
		{0, MIB - 512, 4096, 0, 512},
		{0, MIB - 512, 512, 0, 512},
		{0, 0, (uint32_t)MIB, 0, MIB}, /* no payload limit */
		{0, MIB, 512, 22, 0},	       /* offset at the end */
		{0, UINT64_MAX - 511, 512, 22, 0},
		{0, 0, 0, 22, 0},
		{0, 100, 512, 22, 0},
		{0, 0, 1000, 22, 0},
		{0x1 /* FUA */, 0, 512, 22, 0},
		{0x2 /* NO_HOLE */, 0, 512, 22, 0},
		{0x20 /* PAYLOAD_LEN: extended headers */, 0, 512, 22, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct nbd_export exp = {
			.size_bytes = MIB,
			.tflags = 0x16d,
			.max_request_bytes = 65536,
		};
		struct nbd_request req = {
			.magic = NBD_REQUEST_MAGIC,
			.type = 7,
			.flags = rows[i].flags,
			.offset = rows[i].offset,
			.length = rows[i].length,
		};
		struct nbd_plan plan;
		uint32_t err = nbd_check_request(&exp, &req, &plan);

		if (err != rows[i].err)
			fail_msg("row %zu: error %u, want %u", i, err,
				 rows[i].err);
		if (err)
			continue;
		assert_true(plan.block_status);
		assert_int_equal(plan.data_bytes, 0);
		if (plan.bs_length != rows[i].bs_length)
			fail_msg("row %zu: length %u, want %u", i,
				 plan.bs_length, rows[i].bs_length);
	}
}

/* A request body from a name and queries, for the parser. */
static uint32_t meta_body(uint8_t *buf, const char *name, uint32_t nr,
			  const char *const *queries)
{
	uint32_t n = (uint32_t)strlen(name), pos;

	nbd_put32(buf, n);
	memcpy(buf + 4, name, n);
	nbd_put32(buf + 4 + n, nr);
	pos = 8 + n;
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t q = (uint32_t)strlen(queries[i]);

		nbd_put32(buf + pos, q);
		memcpy(buf + pos + 4, queries[i], q);
		pos += 4 + q;
	}
	return pos;
}

static void test_parse_meta_request(void **state)
{
	static const char *const two[] = {"base:allocation",
					  "qemu:dirty-bitmap:b0"};
	struct nbd_meta_request mr;
	uint8_t buf[2048];
	const uint8_t *q;
	uint32_t q_len, len;

	len = meta_body(buf, "exp", 2, two);
	assert_int_equal(len, 4 + 3 + 4 + 4 + 15 + 4 + 20);
	assert_int_equal(nbd_parse_meta_request(buf, len, &mr), 0);
	assert_int_equal(mr.name_len, 3);
	assert_memory_equal(mr.name, "exp", 3);
	assert_int_equal(mr.nr_queries, 2);
	nbd_meta_query(&mr, 0, &q, &q_len);
	assert_int_equal(q_len, 15);
	assert_memory_equal(q, "base:allocation", 15);
	nbd_meta_query(&mr, 1, &q, &q_len);
	assert_int_equal(q_len, 20);
	assert_memory_equal(q, "qemu:dirty-bitmap:b0", 20);

	/* No queries, empty name. */
	len = meta_body(buf, "", 0, NULL);
	assert_int_equal(len, 8);
	assert_int_equal(nbd_parse_meta_request(buf, len, &mr), 0);
	assert_int_equal(mr.nr_queries, 0);

	/* Lengths that do not add up: NBD_REP_ERR_INVALID (0x80000003). */
	len = meta_body(buf, "exp", 2, two);
	assert_int_equal(nbd_parse_meta_request(buf, len - 1, &mr),
			 0x80000003u); /* last query cut short */
	assert_int_equal(nbd_parse_meta_request(buf, len + 1, &mr),
			 0x80000003u); /* a byte left over */
	buf[len] = 0;
	assert_int_equal(nbd_parse_meta_request(buf, 7, &mr), 0x80000003u);
	nbd_put32(buf + 4 + 3, 3); /* three queries, two sent */
	assert_int_equal(nbd_parse_meta_request(buf, len, &mr), 0x80000003u);
	nbd_put32(buf + 4 + 3, 0xffffffffu);
	assert_int_equal(nbd_parse_meta_request(buf, len, &mr), 0x80000003u);
	nbd_put32(buf, 0xfffffff0u); /* name length past the data */
	assert_int_equal(nbd_parse_meta_request(buf, len, &mr), 0x80000003u);
	len = meta_body(buf, "exp", 2, two);
	nbd_put32(buf + 11, 0xfffffff0u); /* query length past the data */
	assert_int_equal(nbd_parse_meta_request(buf, len, &mr), 0x80000003u);

	/* 129 empty queries: NBD_REP_ERR_TOO_BIG (0x80000009); 128 pass. */
	memset(buf, 0, sizeof(buf));
	nbd_put32(buf + 4, 129);
	assert_int_equal(nbd_parse_meta_request(buf, 8 + 129 * 4, &mr),
			 0x80000009u);
	nbd_put32(buf + 4, 128);
	assert_int_equal(nbd_parse_meta_request(buf, 8 + 128 * 4, &mr), 0);
}

static void test_meta_match(void **state)
{
	static const struct {
		const char *name, *query;
		bool list, want;
	} rows[] = {
		{"base:allocation", "base:allocation", false, true},
		{"base:allocation", "base:allocation", true, true},
		{"base:allocation", "base:", true, true},
		{"base:allocation", "base:", false, false},
		{"base:allocation", "base", true, false},
		{"base:allocation", "base:alloc", true, false},
		{"base:allocation", "base:allocationX", true, false},
		{"base:allocation", "", true, false},
		{"qemu:dirty-bitmap:b0", "qemu:dirty-bitmap:", true, true},
		{"qemu:dirty-bitmap:b0", "qemu:", true, true},
		{"qemu:dirty-bitmap:b0", "qemu:dirty-bitmap:", false, false},
		{"qemu:dirty-bitmap:b0", "qemu:dirty-bitmap:b", true, false},
		{"qemu:dirty-bitmap:b0", "qemu:dirty-bitmap:b0", false, true},
		{"qemu:dirty-bitmap:b0", "qemu:dirty-bitmap:b1", false, false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bool got = nbd_meta_match(
			rows[i].name, (const uint8_t *)rows[i].query,
			(uint32_t)strlen(rows[i].query), rows[i].list);

		if (got != rows[i].want)
			fail_msg("row %zu: %s against %s (%s): %d", i,
				 rows[i].query, rows[i].name,
				 rows[i].list ? "LIST" : "SET", got);
	}
}

static void test_put_block_status(void **state)
{
	static const uint8_t want[] = {
		0x66, 0x8e, 0x33, 0xef, /* structured reply magic */
		0x00, 0x01,		/* NBD_REPLY_FLAG_DONE */
		0x00, 0x05,		/* NBD_REPLY_TYPE_BLOCK_STATUS */
		0,    0,    0,	  0,	0, 0, 0x12, 0x34, /* handle */
		0,    0,    0,	  20,			  /* 4 + 2 * 8 */
		0,    0,    0,	  2,			  /* context id */
		0,    0,    0x10, 0,	0, 0, 0,    3,	  /* 4096, HOLE|ZERO */
		0,    1,    0,	  0,	0, 0, 0,    0,	  /* 64 KiB, data */
	};
	static const uint32_t lengths[] = {4096, 65536}, flags[] = {3, 0};
	uint8_t buf[64];

	assert_int_equal(
		nbd_put_block_status(buf, 1, 0x1234, 2, lengths, flags, 2),
		sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
}

/* --- request checks ------------------------------------------------------------ */

struct check_row {
	uint16_t tflags;
	uint16_t type, flags;
	uint64_t offset;
	uint32_t length;
	uint32_t err;
	enum td_op op;
	uint32_t td_flags;
	uint32_t data_bytes;
};

#define RW     0x16d		     /* everything, read-write */
#define RO     0x107		     /* read-only */
#define BARE   0x101		     /* no flush, FUA, trim or write zeroes */
#define E(err) err, TD_OP_READ, 0, 0 /* refused: nothing else to compare */

static const struct check_row check_rows[] = {
	/* READ */
	{RW, 0, 0, 0, 4096, 0, TD_OP_READ, 0, 4096},
	{RW, 0, 0x1 /* FUA */, 0, 512, 0, TD_OP_READ, 0, 512},
	{RW, 0, 0x4 /* DF */, 0, 512, E(22)},
	{RW, 0, 0x8000, 0, 512, E(22)},
	{RW, 0, 0, 0, 0, E(22)},
	{RW, 0, 0, 511, 512, E(22)},
	{RW, 0, 0, 0, 1000, E(22)},
	{RW, 0, 0, 0, 65536, 0, TD_OP_READ, 0, 65536},
	{RW, 0, 0, 0, 65536 + 512, E(22)},
	{RW, 0, 0, MIB - 512, 512, 0, TD_OP_READ, 0, 512},
	{RW, 0, 0, MIB, 512, E(22)},
	{RW, 0, 0, MIB - 512, 1024, E(22)},
	{RW, 0, 0, UINT64_MAX - 511, 512, E(22)},
	{RO, 0, 0, 0, 512, 0, TD_OP_READ, 0, 512},
	{BARE, 0, 0x1, 0, 512, E(22)}, /* FUA not advertised */
	/* WRITE */
	{RW, 1, 0, 4096, 4096, 0, TD_OP_WRITE, 0, 4096},
	{RW, 1, 0x1, 0, 512, 0, TD_OP_WRITE, TD_REQ_FUA, 512},
	{RW, 1, 0x2 /* NO_HOLE */, 0, 512, E(22)},
	{RW, 1, 0, 0, 0, E(22)},
	{RW, 1, 0, 100, 512, E(22)},
	{RW, 1, 0, 0, 65536 + 512, E(22)},
	{RW, 1, 0, MIB, 512, E(28)},
	{RW, 1, 0, MIB - 512, 1024, E(28)},
	{RW, 1, 0, UINT64_MAX - 511, 512, E(28)},
	{RO, 1, 0, 0, 512, E(1)},
	{RO, 1, 0x1, 0, 512, E(22)}, /* FUA is not advertised read-only */
	{BARE, 1, 0, 0, 512, 0, TD_OP_WRITE, 0, 512},
	/* FLUSH */
	{RW, 3, 0, 0, 0, 0, TD_OP_FLUSH, 0, 0},
	{RW, 3, 0x1, 0, 0, 0, TD_OP_FLUSH, 0, 0},
	{RW, 3, 0, 512, 0, E(22)},
	{RW, 3, 0, 0, 512, E(22)},
	{RO, 3, 0, 0, 0, 0, TD_OP_FLUSH, 0, 0},
	{BARE, 3, 0, 0, 0, 0, TD_OP_FLUSH, 0, 0}, /* the vbd says ENOTSUP */
	/* TRIM */
	{RW, 4, 0, 0, 4096, 0, TD_OP_DISCARD, 0, 0},
	{RW, 4, 0x1, 0, 4096, 0, TD_OP_DISCARD, 0, 0},
	{RW, 4, 0, 0, MIB, 0, TD_OP_DISCARD, 0, 0}, /* no payload limit */
	{RW, 4, 0, MIB, 512, E(28)},
	{RW, 4, 0, 0, 0, E(22)},
	{RW, 4, 0x2, 0, 512, E(22)},
	{RO, 4, 0, 0, 512, E(1)},
	/* WRITE_ZEROES */
	{RW, 6, 0, 0, 4096, 0, TD_OP_WRITE_ZEROES, 0, 0},
	{RW, 6, 0x3, 0, 4096, 0, TD_OP_WRITE_ZEROES,
	 TD_REQ_FUA | TD_REQ_NO_HOLE, 0},
	{RW, 6, 0x10 /* FAST_ZERO */, 0, 4096, E(22)},
	{RW, 6, 0, MIB - 512, 4096, E(28)},
	{RO, 6, 0, 0, 512, E(1)},
	/* unknown and unsupported commands */
	{RW, 5 /* CACHE */, 0, 0, 512, E(22)},
	{RW, 8 /* RESIZE */, 0, 0, 512, E(22)},
	{RW, 99, 0, 0, 512, E(22)},
	{RW, 0xffff, 0, 0, 512, E(22)},
};

static void test_check_request(void **state)
{
	for (size_t i = 0; i < sizeof(check_rows) / sizeof(check_rows[0]);
	     i++) {
		const struct check_row *r = &check_rows[i];
		struct nbd_export exp = {
			.size_bytes = MIB,
			.tflags = r->tflags,
			.max_request_bytes = 65536,
		};
		struct nbd_request req = {
			.magic = NBD_REQUEST_MAGIC,
			.type = r->type,
			.flags = r->flags,
			.offset = r->offset,
			.length = r->length,
		};
		struct nbd_plan plan;
		uint32_t err = nbd_check_request(&exp, &req, &plan);

		if (err != r->err)
			fail_msg("row %zu: error %u, want %u", i, err, r->err);
		if (err)
			continue;
		if (plan.op != r->op || plan.td_flags != r->td_flags ||
		    plan.data_bytes != r->data_bytes)
			fail_msg("row %zu: op %d flags 0x%x data %u", i,
				 plan.op, plan.td_flags, plan.data_bytes);
	}
}

/* --- GO/INFO parsing ---------------------------------------------------------------- */

/* A refused row: no fields to compare. */
#define BAD NBD_REP_ERR_INVALID, 0, 0

static void test_parse_info_request(void **state)
{
	static const struct {
		uint8_t bytes[16];
		uint32_t len;
		uint32_t err;
		uint32_t name_len;
		uint16_t nr;
	} rows[] = {
		{{0, 0, 0, 0, 0, 0}, 6, 0, 0, 0},
		{{0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 1, 0, 3}, 12, 0, 4, 1},
		{{0, 0, 0, 0, 0, 2, 0, 3, 0, 1}, 10, 0, 0, 2},
		{{0, 0, 0, 0, 0}, 5, BAD},
		{{0}, 0, BAD},
		{{0, 0, 0, 5, 'a', 'b', 0, 0}, 8, BAD},
		{{0, 0, 0, 0, 0, 2, 0, 3}, 8, BAD},
		{{0, 0, 0, 0, 0, 0, 0}, 7, BAD},
		{{0, 0, 0, 0, 0, 1, 0}, 7, BAD},
		{{0xff, 0xff, 0xff, 0xff, 0, 0}, 6, BAD},
		{{0xff, 0xff, 0xff, 0xfb, 0, 0}, 10, BAD},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct nbd_info_request ir;
		uint32_t err =
			nbd_parse_info_request(rows[i].bytes, rows[i].len, &ir);

		if (err != rows[i].err)
			fail_msg("row %zu: error 0x%x, want 0x%x", i, err,
				 rows[i].err);
		if (err)
			continue;
		assert_int_equal(ir.name_len, rows[i].name_len);
		assert_ptr_equal(ir.name, rows[i].bytes + 4);
		assert_int_equal(ir.nr_infos, rows[i].nr);
	}
}

/* A name of 4097 bytes is over the protocol's string limit. */
static void test_parse_info_long_name(void **state)
{
	static uint8_t body[4 + 4097 + 2];
	struct nbd_info_request ir;

	memset(body, 'n', sizeof(body));
	nbd_put32(body, 4097);
	nbd_put16(body + 4 + 4097, 0);
	assert_int_equal(nbd_parse_info_request(body, sizeof(body), &ir),
			 NBD_REP_ERR_INVALID);
	nbd_put32(body, 4096); /* one byte shorter: the longest allowed */
	nbd_put16(body + 4 + 4096, 0);
	assert_int_equal(nbd_parse_info_request(body, 4 + 4096 + 2, &ir), 0);
	assert_int_equal(ir.name_len, 4096);
}

/* --- encodings ------------------------------------------------------------------ */

static void test_greeting(void **state)
{
	static const uint8_t want[18] = {0x4e, 0x42, 0x44, 0x4d, 0x41, 0x47,
					 0x49, 0x43, 0x49, 0x48, 0x41, 0x56,
					 0x45, 0x4f, 0x50, 0x54, 0x00, 0x03};
	uint8_t buf[32];

	assert_int_equal(nbd_put_greeting(buf), 18);
	assert_memory_equal(buf, want, sizeof(want));
}

static void test_opt_reply(void **state)
{
	static const uint8_t want[] = {
		0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9, /* magic */
		0x00, 0x00, 0x00, 0x03,				/* LIST */
		0x00, 0x00, 0x00, 0x02,				/* SERVER */
		0x00, 0x00, 0x00, 0x06,				/* length */
		0x00, 0x00, 0x00, 0x02, 'h',  'i',
	};
	static const uint8_t body[] = {0, 0, 0, 2, 'h', 'i'};
	uint8_t buf[64];

	assert_int_equal(nbd_put_opt_reply(buf, 3, 2, body, 6), 26);
	assert_memory_equal(buf, want, sizeof(want));
}

static void test_go_reply(void **state)
{
	static const uint8_t want[] = {
		0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9, /* magic */
		0x00, 0x00, 0x00, 0x07,				/* GO */
		0x00, 0x00, 0x00, 0x03,				/* REP_INFO */
		0x00, 0x00, 0x00, 0x0c,				/* 12 */
		0x00, 0x00,					/* EXPORT */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, /* 1 MiB */
		0x01, 0x6d,					/* flags */
		0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9, /* magic */
		0x00, 0x00, 0x00, 0x07,				/* GO */
		0x00, 0x00, 0x00, 0x03,				/* REP_INFO */
		0x00, 0x00, 0x00, 0x0e,				/* 14 */
		0x00, 0x03,					/* BLOCK_SIZE */
		0x00, 0x00, 0x02, 0x00,				/* 512 */
		0x00, 0x00, 0x10, 0x00,				/* 4096 */
		0x00, 0x01, 0x00, 0x00,				/* 65536 */
		0x00, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9, /* magic */
		0x00, 0x00, 0x00, 0x07,				/* GO */
		0x00, 0x00, 0x00, 0x01,				/* REP_ACK */
		0x00, 0x00, 0x00, 0x00,				/* 0 */
	};
	struct nbd_export exp = {MIB, 0x16d, 65536};
	uint8_t buf[NBD_GO_REPLY_BYTES + 8];

	assert_int_equal(sizeof(want), NBD_GO_REPLY_BYTES);
	assert_int_equal(nbd_put_go_reply(buf, 7, &exp), sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
}

static void test_export_name_reply(void **state)
{
	static const uint8_t head[10] = {0, 0, 0, 0, 0, 0x10, 0, 0, 0x01, 0x6d};
	struct nbd_export exp = {MIB, 0x16d, 65536};
	uint8_t buf[200], zero[124] = {0};

	memset(buf, 0xaa, sizeof(buf));
	assert_int_equal(nbd_put_export_name_reply(buf, &exp, 1), 134);
	assert_memory_equal(buf, head, sizeof(head));
	assert_memory_equal(buf + 10, zero, sizeof(zero));
	memset(buf, 0xaa, sizeof(buf));
	assert_int_equal(nbd_put_export_name_reply(buf, &exp, 3), 10);
	assert_memory_equal(buf, head, sizeof(head));
	assert_int_equal(buf[10], 0xaa);
}

static void test_simple_reply(void **state)
{
	static const uint8_t want[16] = {0x67, 0x44, 0x66, 0x98, 0, 0, 0, 0x16,
					 1,    2,    3,	   4,	 5, 6, 7, 8};
	uint8_t buf[16];

	nbd_put_simple_reply(buf, 22, 0x0102030405060708ull);
	assert_memory_equal(buf, want, sizeof(want));
}

static void test_structured_reply(void **state)
{
	static const uint8_t want[20] = {
		0x66, 0x8e, 0x33, 0xef,
		0x00, 0x01, 0x80, 0x01, /* DONE, ERROR */
		1,    2,    3,	  4,
		5,    6,    7,	  8,	/* handle */
		0x00, 0x00, 0x00, 0x06, /* length */
	};
	uint8_t buf[20];

	nbd_put_structured_reply(buf, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR,
				 0x0102030405060708ull, 6);
	assert_memory_equal(buf, want, sizeof(want));
}

static void test_decode(void **state)
{
	static const uint8_t request[28] = {
		0x25, 0x60, 0x95, 0x13, 0x00, 0x01, 0x00, 0x06, /* FUA, WZ */
		0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x01, /* handle */
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x02, 0x00, /* offset */
		0x00, 0x10, 0x00, 0x00,				/* length */
	};
	static const uint8_t opt[16] = {'I', 'H', 'A', 'V', 'E', 'O', 'P', 'T',
					0,   0,	  0,   7,   0,	 0,   1,   2};
	struct nbd_request req;
	struct nbd_opt_header hdr;

	nbd_decode_request(request, &req);
	assert_int_equal(req.magic, 0x25609513u);
	assert_int_equal(req.flags, 1);
	assert_int_equal(req.type, 6);
	assert_true(req.handle == 0xdeadbeef00000001ull);
	assert_true(req.offset == 0x100000200ull);
	assert_int_equal(req.length, 0x100000);

	nbd_decode_opt_header(opt, &hdr);
	assert_true(hdr.magic == 0x49484156454f5054ull);
	assert_int_equal(hdr.option, 7);
	assert_int_equal(hdr.length, 258);
}

static void test_names(void **state)
{
	assert_string_equal(nbd_cmd_name(0), "READ");
	assert_string_equal(nbd_cmd_name(6), "WRITE_ZEROES");
	assert_string_equal(nbd_cmd_name(99), "unknown");
	assert_string_equal(nbd_cmd_name(0xffff), "unknown");
	assert_string_equal(nbd_opt_name(7), "OPT_GO");
	assert_string_equal(nbd_opt_name(0), "unknown");
	assert_string_equal(nbd_opt_name(0xffffffffu), "unknown");
}

static void test_printable(void **state)
{
	char out[8];

	nbd_printable((const uint8_t *)"disk", 4, out, sizeof(out));
	assert_string_equal(out, "disk");
	nbd_printable((const uint8_t *)"a\nb\x80", 4, out, sizeof(out));
	assert_string_equal(out, "a?b?");
	nbd_printable((const uint8_t *)"abcdefghij", 10, out, sizeof(out));
	assert_string_equal(out, "abcd...");
	nbd_printable((const uint8_t *)"abcdefg", 7, out, sizeof(out));
	assert_string_equal(out, "abcdefg");
	nbd_printable((const uint8_t *)"", 0, out, sizeof(out));
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_error),
		cmocka_unit_test(test_transmission_flags),
		cmocka_unit_test(test_check_request),
		cmocka_unit_test(test_parse_info_request),
		cmocka_unit_test(test_parse_info_long_name),
		cmocka_unit_test(test_greeting),
		cmocka_unit_test(test_opt_reply),
		cmocka_unit_test(test_go_reply),
		cmocka_unit_test(test_export_name_reply),
		cmocka_unit_test(test_simple_reply),
		cmocka_unit_test(test_structured_reply),
		cmocka_unit_test(test_decode),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_printable),
		cmocka_unit_test(test_check_block_status),
		cmocka_unit_test(test_parse_meta_request),
		cmocka_unit_test(test_meta_match),
		cmocka_unit_test(test_put_block_status),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
