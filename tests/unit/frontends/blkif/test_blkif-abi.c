/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_blkif-abi.c - a ring in the x86_32 ABI (a 32-bit x86 guest's
 * blkfront): slots of 108 bytes written at the offsets of xen/io/blkif.h
 * compiled for i386, by hand here, served by tapdisk/blkif on x86_64.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontends/blkif/blkif-int.h"
#include "common/log.h"
#include "common/loop.h"

#define PAGE	   BLKIF_PAGE_SIZE
#define SECT	   TD_SECTOR_SIZE
#define POOL_PAGES 64u
#define RAM_BYTES  (1u << 20)
#define SLOT	   108u /* the x86_32 request */
#define HEADER	   64u	/* req_prod .. pad, before the first slot */

/* --- a RAM disk ------------------------------------------------------------ */

static unsigned char *ram;

static int ram_open(struct td_driver *drv, const char *args)
{
	drv->info.size_sectors = RAM_BYTES / SECT;
	drv->info.sector_size = SECT;
	drv->info.features = TD_FEAT_FLUSH | TD_FEAT_DISCARD;
	return 0;
}

static void ram_close(struct td_driver *drv)
{
}

static int ram_submit(struct td_driver *drv, struct td_request *req)
{
	unsigned char *p = ram + req->sector * SECT;

	for (int i = 0; i < req->iovcnt; i++) {
		if (req->op == TD_OP_READ)
			memcpy(req->iov[i].iov_base, p, req->iov[i].iov_len);
		else
			memcpy(p, req->iov[i].iov_base, req->iov[i].iov_len);
		p += req->iov[i].iov_len;
	}
	if (req->op == TD_OP_DISCARD)
		memset(p, 0, td_request_bytes(req));
	td_complete(req, 0);
	return 0;
}

static const struct td_driver_ops ram_ops = {
	.name = "ram",
	.open = ram_open,
	.close = ram_close,
	.submit = ram_submit,
};

static const struct td_driver_ops *const table[] = {&ram_ops, NULL};

/* --- a mapping transport over a pool ------------------------------------------- */

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct blkif_ring *ring;
	unsigned char *sring;
	unsigned char *pool;
	uint32_t req_prod, rsp_cons;
	char *log_buf;
	size_t log_len;
	FILE *log;
} T;

static int t_map(void *opaque, uint32_t gref, uint32_t offset, uint32_t len,
		 enum blkif_map_access access, void **addr)
{
	if (gref >= POOL_PAGES)
		return -EINVAL;
	*addr = T.pool + (size_t)gref * PAGE + offset;
	return 0;
}

static int t_copy_indirect(void *opaque, uint32_t gref, void *dst, size_t len)
{
	if (gref >= POOL_PAGES)
		return -EINVAL;
	memcpy(dst, T.pool + (size_t)gref * PAGE, len);
	return 0;
}

static void t_notify(void *opaque)
{
}

static void t_fatal(void *opaque, int err)
{
	fail_msg("fatal %d", err);
}

static const struct blkif_transport_ops t_ops = {
	.map_segment = t_map,
	.copy_indirect = t_copy_indirect,
	.notify = t_notify,
	.fatal = t_fatal,
};

static int setup(void **state)
{
	struct td_vbd_params vp = {.name = "x32", .chain = "ram"};
	struct blkif_config cfg;
	struct blkif_ring_params p = {
		.protocol = BLKIF_PROTOCOL_X86_32,
		.ops = &t_ops,
	};

	memset(&T, 0, sizeof(T));
	T.log = open_memstream(&T.log_buf, &T.log_len);
	td_log_set_stream(T.log);
	ram = calloc(1, RAM_BYTES);
	T.pool = aligned_alloc(PAGE, (size_t)POOL_PAGES * PAGE);
	T.sring = aligned_alloc(PAGE, PAGE);
	assert_true(ram && T.pool && T.sring);
	memset(T.pool, 0, (size_t)POOL_PAGES * PAGE);
	memset(T.sring, 0, PAGE);
	SHARED_RING_INIT((blkif_sring_t *)T.sring);
	assert_int_equal(td_loop_create(&T.loop), 0);
	assert_int_equal(td_vbd_open(T.loop, table, &vp, &T.vbd), 0);
	blkif_config_init(&cfg);
	p.sring = T.sring;
	assert_int_equal(blkif_ring_create(T.vbd, &cfg, &p, &T.ring), 0);
	return 0;
}

static int teardown(void **state)
{
	assert_int_equal(blkif_ring_destroy(T.ring), 0);
	assert_int_equal(td_vbd_close(T.vbd), 0);
	td_loop_destroy(T.loop);
	td_log_set_stream(NULL);
	fclose(T.log);
	free(T.log_buf);
	free(ram);
	free(T.pool);
	free(T.sring);
	return 0;
}

/* --- the guest's side, in its layout --------------------------------------------- */

static unsigned char *slot(uint32_t idx)
{
	return T.sring + HEADER + (size_t)(idx % 32) * SLOT;
}

static void put_u16(unsigned char *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

static void put_u32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

static void put_u64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* A new slot: operation at 0, id at 4. */
static unsigned char *new_req(uint8_t op, uint64_t id)
{
	unsigned char *s = slot(T.req_prod++);

	memset(s, 0, SLOT);
	s[0] = op;
	put_u64(s + 4, id);
	return s;
}

/* Segment i (8 bytes: gref, first_sect, last_sect) at base. */
static void put_seg(unsigned char *base, uint32_t i, uint32_t gref)
{
	put_u32(base + 8 * i, gref);
	base[8 * i + 4] = 0;
	base[8 * i + 5] = 7;
}

static void rw(uint8_t op, uint64_t id, uint64_t sector, uint32_t gref,
	       uint8_t nr)
{
	unsigned char *s = new_req(op, id);

	s[1] = nr;
	put_u16(s + 2, 0x1234); /* handle */
	put_u64(s + 12, sector);
	for (uint32_t i = 0; i < nr; i++)
		put_seg(s + 20, i, gref + i);
}

static void kick(void)
{
	blkif_sring_t *sr = (blkif_sring_t *)T.sring;

	xen_wmb();
	sr->req_prod = T.req_prod;
	blkif_ring_kick(T.ring);
	for (int i = 0; i < 4; i++)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
}

/* The next response: id at 0, operation at 8, status at 10. */
static void expect_rsp(uint64_t id, uint8_t op, int16_t status)
{
	blkif_sring_t *sr = (blkif_sring_t *)T.sring;
	unsigned char *s;
	uint64_t got_id;
	int16_t got_status;

	assert_true(sr->rsp_prod != T.rsp_cons);
	s = slot(T.rsp_cons++);
	memcpy(&got_id, s, sizeof(got_id));
	memcpy(&got_status, s + 10, sizeof(got_status));
	assert_int_equal(got_id, id);
	assert_int_equal(s[8], op);
	assert_int_equal(got_status, status);
}

/* --- tests ----------------------------------------------------------------------- */

static void test_ring_sizes(void **state)
{
	/* (bytes - 64) / slot, rounded down to a power of two. */
	static const struct {
		size_t bytes;
		uint32_t x32, native;
	} rows[] = {
		{4096, 32, 32},	   {8192, 64, 64},    {16384, 128, 128},
		{32768, 256, 256}, {65536, 512, 512}, {1024, 8, 8},
		{640, 4, 4}, /* 576 / 108 = 5, 576 / 112 = 5 */
		{500, 4, 2}, /* 436 / 108 = 4, 436 / 112 = 3 */
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(blkif_abi_ring_size(BLKIF_PROTOCOL_X86_32,
						     rows[i].bytes),
				 rows[i].x32);
		assert_int_equal(blkif_abi_ring_size(BLKIF_PROTOCOL_NATIVE,
						     rows[i].bytes),
				 rows[i].native);
	}
	assert_int_equal(blkif_ring_size(T.ring), 32);
}

static void test_write_read(void **state)
{
	memset(T.pool + 2 * PAGE, 0x3c, 2 * PAGE);
	rw(BLKIF_OP_WRITE, 0x1122334455667788ull, 16, 2, 2);
	kick();
	expect_rsp(0x1122334455667788ull, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	assert_int_equal(ram[16 * SECT], 0x3c);
	assert_int_equal(ram[16 * SECT + 2 * PAGE - 1], 0x3c);
	assert_int_equal(ram[16 * SECT + 2 * PAGE], 0);
	rw(BLKIF_OP_READ, 7, 16, 10, 2);
	kick();
	expect_rsp(7, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(T.pool[10 * PAGE], 0x3c);
	assert_int_equal(T.pool[12 * PAGE - 1], 0x3c);
}

/* Past the last slot: the index wraps at 32 slots of 108 bytes. */
static void test_wraps(void **state)
{
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 20; i++)
			rw(BLKIF_OP_WRITE, (uint64_t)round * 100 + (uint64_t)i,
			   (uint64_t)i * 8, 0, 1);
		kick();
		for (int i = 0; i < 20; i++)
			expect_rsp((uint64_t)round * 100 + (uint64_t)i,
				   BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	}
}

static void test_indirect(void **state)
{
	unsigned char *s = new_req(BLKIF_OP_INDIRECT, 42);
	unsigned char *ind = T.pool + 40 * PAGE;

	for (uint32_t i = 0; i < 20; i++) {
		put_seg(ind, i, i);
		memset(T.pool + (size_t)i * PAGE, (int)(i + 1), PAGE);
	}
	s[1] = BLKIF_OP_WRITE; /* indirect_op */
	put_u16(s + 2, 20);    /* nr_segments */
	put_u64(s + 12, 256);  /* sector_number */
	put_u16(s + 20, 0x99); /* handle */
	put_u32(s + 24, 40);   /* indirect_grefs[0] */
	kick();
	expect_rsp(42, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	for (uint32_t i = 0; i < 20; i++)
		assert_int_equal(ram[256 * SECT + i * PAGE], i + 1);
}

static void test_discard(void **state)
{
	unsigned char *s;

	memset(ram + 64 * SECT, 0xff, 16 * SECT);
	s = new_req(BLKIF_OP_DISCARD, 5);
	put_u64(s + 12, 64); /* sector_number */
	put_u64(s + 20, 8);  /* nr_sectors */
	kick();
	expect_rsp(5, BLKIF_OP_DISCARD, BLKIF_RSP_OKAY);
	assert_int_equal(ram[64 * SECT], 0);
	assert_int_equal(ram[72 * SECT - 1], 0);
	assert_int_equal(ram[72 * SECT], 0xff);
}

/* A hostile count in the 32-bit layout is refused like a native one. */
static void test_bad_count(void **state)
{
	rw(BLKIF_OP_WRITE, 9, 0, 0, 12);
	kick();
	expect_rsp(9, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_ring_sizes), TEST(test_write_read),
		TEST(test_wraps),      TEST(test_indirect),
		TEST(test_discard),    TEST(test_bad_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
