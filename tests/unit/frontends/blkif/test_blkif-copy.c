/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_blkif-copy.c - the blkif ring over a copying transport (the ops
 * reserve, copy_in, copy_out and release that the Xen transport's grant
 * copy uses): data fetched before submission and stored after a read, in
 * one batch per pass, ring order kept, a failed copy failing only its
 * request, and a transport out of room leaving requests on the ring.
 *
 * The fake transport keeps "guest" pages (what gref names) apart from its
 * own buffers, and copies between them only in copy_in and copy_out, so a
 * read answered without copy_out, or a write submitted before copy_in,
 * shows as wrong data.
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

#include "frontends/blkif/blkif.h"
#include "common/log.h"
#include "common/loop.h"
#include "tapdisk/vbd.h"

#define PAGE	    BLKIF_PAGE_SIZE
#define SECT	    TD_SECTOR_SIZE
#define GUEST_PAGES 64u
#define BUF_PAGES   64u
#define RAM_BYTES   (1u << 20)
#define SLOTS	    32u /* order 0 */

/* --- a RAM disk ------------------------------------------------------------ */

static unsigned char *ram;

static int ram_open(struct td_driver *drv, const char *args)
{
	drv->info.size_sectors = RAM_BYTES / SECT;
	drv->info.sector_size = SECT;
	drv->info.features = TD_FEAT_FLUSH;
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
		else if (req->op == TD_OP_WRITE)
			memcpy(p, req->iov[i].iov_base, req->iov[i].iov_len);
		p += req->iov[i].iov_len;
	}
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

/* --- the copying transport ----------------------------------------------------- */

struct seg {
	uint32_t gref, offset, len, buf_page;
	enum blkif_map_access access;
};

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct blkif_ring *ring;
	blkif_sring_t *sring;
	blkif_front_ring_t front;
	unsigned char *guest; /* the frontend's pages */
	unsigned char *buf;   /* the transport's own */
	uint32_t next_buf;
	struct seg segs[SLOTS][BUF_PAGES];
	uint32_t nsegs[SLOTS];
	uint32_t cur;
	bool reserved[SLOTS];
	size_t reserved_bytes[SLOTS];
	uint32_t room_pages; /* what reserve may still give */
	uint32_t in_calls, out_calls, releases;
	uint32_t last_in[SLOTS], last_in_n;
	uint32_t fail_gref; /* copies of this page fail; 0: none */
	char *log_buf;
	size_t log_len;
	FILE *log;
} T;

static int c_reserve(void *opaque, uint32_t tag, size_t max_bytes)
{
	uint32_t pages = (uint32_t)(max_bytes / PAGE);

	assert_true(tag < SLOTS);
	assert_false(T.reserved[tag]); /* not reused before release */
	if (pages > T.room_pages)
		return -EAGAIN;
	T.room_pages -= pages;
	T.reserved[tag] = true;
	T.reserved_bytes[tag] = max_bytes;
	T.nsegs[tag] = 0;
	T.cur = tag;
	return 0;
}

static int c_map(void *opaque, uint32_t gref, uint32_t offset, uint32_t len,
		 enum blkif_map_access access, void **addr)
{
	struct seg *s = &T.segs[T.cur][T.nsegs[T.cur]];

	assert_true(T.reserved[T.cur]);
	assert_true((T.nsegs[T.cur] + 1) * PAGE <= T.reserved_bytes[T.cur]);
	if (gref >= GUEST_PAGES)
		return -EINVAL;
	*s = (struct seg){gref, offset, len, T.next_buf++ % BUF_PAGES, access};
	T.nsegs[T.cur]++;
	*addr = T.buf + (size_t)s->buf_page * PAGE + offset;
	return 0;
}

static void c_copy(const uint32_t *tags, int *errs, uint32_t n, bool out)
{
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < T.nsegs[tags[i]]; j++) {
			const struct seg *s = &T.segs[tags[i]][j];
			unsigned char *g =
				T.guest + (size_t)s->gref * PAGE + s->offset;
			unsigned char *b =
				T.buf + (size_t)s->buf_page * PAGE + s->offset;

			if ((s->access == BLKIF_MAP_RW) != out)
				continue;
			if (T.fail_gref && s->gref == T.fail_gref) {
				errs[i] = -EIO;
				continue;
			}
			if (out)
				memcpy(g, b, s->len);
			else
				memcpy(b, g, s->len);
		}
	}
}

static void c_copy_in(void *opaque, const uint32_t *tags, int *errs, uint32_t n)
{
	T.in_calls++;
	memcpy(T.last_in, tags, n * sizeof(*tags));
	T.last_in_n = n;
	c_copy(tags, errs, n, false);
}

static void c_copy_out(void *opaque, const uint32_t *tags, int *errs,
		       uint32_t n)
{
	T.out_calls++;
	c_copy(tags, errs, n, true);
}

static void c_release(void *opaque, uint32_t tag)
{
	assert_true(T.reserved[tag]);
	T.reserved[tag] = false;
	T.room_pages += (uint32_t)(T.reserved_bytes[tag] / PAGE);
	T.releases++;
}

static int c_copy_indirect(void *opaque, uint32_t gref, void *dst, size_t len)
{
	memcpy(dst, T.guest + (size_t)gref * PAGE, len);
	return 0;
}

static void c_notify(void *opaque)
{
}

static void c_fatal(void *opaque, int err)
{
	fail_msg("fatal %d", err);
}

static const struct blkif_transport_ops copy_ops = {
	.map_segment = c_map,
	.copy_indirect = c_copy_indirect,
	.notify = c_notify,
	.fatal = c_fatal,
	.reserve = c_reserve,
	.copy_in = c_copy_in,
	.copy_out = c_copy_out,
	.release = c_release,
};

/* --- fixture and frontend ------------------------------------------------------ */

static bool read_only_ring;

static int open_ring(const struct blkif_transport_ops *ops)
{
	struct blkif_config cfg;
	struct blkif_ring_params p = {
		.sring = T.sring,
		.protocol = BLKIF_PROTOCOL_NATIVE,
		.ops = ops,
	};

	blkif_config_init(&cfg);
	cfg.read_only = read_only_ring;
	return blkif_ring_create(T.vbd, &cfg, &p, &T.ring);
}

static int setup(void **state)
{
	struct td_vbd_params vp = {.name = "copy", .chain = "ram"};

	memset(&T, 0, sizeof(T));
	T.log = open_memstream(&T.log_buf, &T.log_len);
	td_log_set_stream(T.log);
	ram = calloc(1, RAM_BYTES);
	T.guest = aligned_alloc(PAGE, (size_t)GUEST_PAGES * PAGE);
	T.buf = aligned_alloc(PAGE, (size_t)BUF_PAGES * PAGE);
	T.sring = aligned_alloc(PAGE, PAGE);
	assert_true(ram && T.guest && T.buf && T.sring);
	memset(T.guest, 0, (size_t)GUEST_PAGES * PAGE);
	memset(T.buf, 0xee, (size_t)BUF_PAGES * PAGE);
	SHARED_RING_INIT(T.sring);
	FRONT_RING_INIT(&T.front, T.sring, PAGE);
	T.room_pages = BUF_PAGES;
	assert_int_equal(td_loop_create(&T.loop), 0);
	assert_int_equal(td_vbd_open(T.loop, table, &vp, &T.vbd), 0);
	assert_int_equal(open_ring(&copy_ops), 0);
	return 0;
}

static int teardown(void **state)
{
	if (T.ring)
		assert_int_equal(blkif_ring_destroy(T.ring), 0);
	assert_int_equal(td_vbd_close(T.vbd), 0);
	td_loop_destroy(T.loop);
	td_log_set_stream(NULL);
	fclose(T.log);
	free(T.log_buf);
	free(ram);
	free(T.guest);
	free(T.buf);
	free(T.sring);
	return 0;
}

/* A read or write of nr whole guest pages from gref on, at sector. */
static void queue(uint8_t op, uint64_t id, uint64_t sector, uint32_t gref,
		  uint32_t nr)
{
	blkif_request_t *req = RING_GET_REQUEST(&T.front, T.front.req_prod_pvt);

	memset(req, 0, sizeof(*req));
	req->operation = op;
	req->id = id;
	req->sector_number = sector;
	req->nr_segments = (uint8_t)nr;
	for (uint32_t i = 0; i < nr; i++) {
		req->seg[i].gref = gref + i;
		req->seg[i].first_sect = 0;
		req->seg[i].last_sect = 7;
	}
	T.front.req_prod_pvt++;
}

/* Push what was queued and let the ring take it. */
static void kick(void)
{
	int notify;

	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&T.front, notify);
	(void)notify;
	blkif_ring_kick(T.ring);
	for (int i = 0; i < 4; i++)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
}

static void expect_rsp(uint64_t id, int16_t status)
{
	blkif_response_t *rsp;

	assert_true(RING_HAS_UNCONSUMED_RESPONSES(&T.front));
	rsp = RING_GET_RESPONSE(&T.front, T.front.rsp_cons);
	T.front.rsp_cons++;
	assert_int_equal(rsp->id, id);
	assert_int_equal(rsp->status, status);
}

/* Status of the response to id among the next n (any order). */
static int16_t status_of(uint64_t id, unsigned int n)
{
	int16_t status = 99;

	for (unsigned int i = 0; i < n; i++) {
		blkif_response_t *rsp;

		assert_true(RING_HAS_UNCONSUMED_RESPONSES(&T.front));
		rsp = RING_GET_RESPONSE(&T.front, T.front.rsp_cons + i);
		if (rsp->id == id)
			status = rsp->status;
	}
	return status;
}

static void fill_guest(uint32_t gref, uint32_t nr, unsigned char v)
{
	memset(T.guest + (size_t)gref * PAGE, v, (size_t)nr * PAGE);
}

/* --- tests ------------------------------------------------------------------- */

/* Three writes in one pass: one copy_in, in ring order, data on disk. */
static void test_writes_one_batch(void **state)
{
	fill_guest(0, 2, 0xa1);
	fill_guest(2, 1, 0xb2);
	fill_guest(3, 3, 0xc3);
	queue(BLKIF_OP_WRITE, 1, 0, 0, 2);
	queue(BLKIF_OP_WRITE, 2, 16, 2, 1);
	queue(BLKIF_OP_WRITE, 3, 64, 3, 3);
	kick();
	assert_int_equal(T.in_calls, 1);
	assert_int_equal(T.last_in_n, 3);
	assert_int_equal(T.last_in[0], 0);
	assert_int_equal(T.last_in[1], 1);
	assert_int_equal(T.last_in[2], 2);
	assert_int_equal(T.out_calls, 0); /* no read */
	expect_rsp(1, BLKIF_RSP_OKAY);
	expect_rsp(2, BLKIF_RSP_OKAY);
	expect_rsp(3, BLKIF_RSP_OKAY);
	assert_int_equal(ram[0], 0xa1);
	assert_int_equal(ram[2 * PAGE - 1], 0xa1);
	assert_int_equal(ram[16 * SECT], 0xb2);
	assert_int_equal(ram[64 * SECT + 3 * PAGE - 1], 0xc3);
	assert_int_equal(T.releases, 3);
	assert_int_equal(T.room_pages, BUF_PAGES);
	/* Reserved from the counts: 2, 1, 3 pages. */
	assert_int_equal(T.reserved_bytes[0], 2 * PAGE);
	assert_int_equal(T.reserved_bytes[2], 3 * PAGE);
}

/* A read reaches the guest only through copy_out. */
static void test_read_copied_out(void **state)
{
	memset(ram + 8 * SECT, 0x5a, 2 * PAGE);
	queue(BLKIF_OP_READ, 9, 8, 10, 2);
	kick();
	assert_int_equal(T.out_calls, 1);
	expect_rsp(9, BLKIF_RSP_OKAY);
	assert_int_equal(T.guest[10 * PAGE], 0x5a);
	assert_int_equal(T.guest[12 * PAGE - 1], 0x5a);
	assert_int_equal(T.releases, 1);
}

/* A failed fetch fails its request alone, which never reaches the disk. */
static void test_copy_in_error(void **state)
{
	fill_guest(4, 1, 0x11);
	fill_guest(5, 1, 0x22);
	T.fail_gref = 5;
	queue(BLKIF_OP_WRITE, 1, 0, 4, 1);
	queue(BLKIF_OP_WRITE, 2, 8, 5, 1);
	kick();
	/* In completion order: the refused one comes first. */
	assert_int_equal(status_of(1, 2), BLKIF_RSP_OKAY);
	assert_int_equal(status_of(2, 2), BLKIF_RSP_ERROR);
	assert_int_equal(ram[0], 0x11);
	assert_int_equal(ram[8 * SECT], 0);
	assert_int_equal(T.releases, 2);
}

static void test_copy_out_error(void **state)
{
	struct blkif_ring_stats st;

	T.fail_gref = 7;
	queue(BLKIF_OP_READ, 4, 0, 7, 1);
	kick();
	expect_rsp(4, BLKIF_RSP_ERROR);
	blkif_ring_get_stats(T.ring, &st);
	assert_int_equal(st.io_errors, 1);
}

/* Out of room: the request stays on the ring until a release. */
static void test_wait_for_room(void **state)
{
	struct blkif_ring_stats st;

	T.room_pages = 3;
	fill_guest(0, 6, 0x77);
	queue(BLKIF_OP_WRITE, 1, 0, 0, 3);
	queue(BLKIF_OP_WRITE, 2, 24, 3, 3);
	kick();
	/* The first went through and released its room; the second was
	 * taken again after that release. */
	expect_rsp(1, BLKIF_RSP_OKAY);
	blkif_ring_get_stats(T.ring, &st);
	assert_int_equal(st.data_waits, 1);
	for (int i = 0; i < 4; i++)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
	expect_rsp(2, BLKIF_RSP_OKAY);
	assert_int_equal(ram[24 * SECT + 3 * PAGE - 1], 0x77);
	assert_int_equal(T.in_calls, 2);
}

/* A request with no data reserves nothing and copies nothing. */
static void test_flush_reserves_nothing(void **state)
{
	queue(BLKIF_OP_FLUSH_DISKCACHE, 5, 0, 0, 0);
	kick();
	expect_rsp(5, BLKIF_RSP_OKAY);
	assert_int_equal(T.reserved_bytes[0], 0);
	assert_int_equal(T.releases, 1);
}

/* A refused request still gives its reservation back. */
static void test_refused_released(void **state)
{
	queue(BLKIF_OP_WRITE, 6, RAM_BYTES / SECT, 0, 1); /* past the end */
	kick();
	expect_rsp(6, BLKIF_RSP_ERROR);
	assert_int_equal(T.releases, 1);
	assert_int_equal(T.in_calls, 0);
}

/* The four ops come together or not at all. */
static void test_ops_all_or_none(void **state)
{
	struct blkif_transport_ops partial = copy_ops;

	assert_int_equal(blkif_ring_destroy(T.ring), 0);
	T.ring = NULL;
	partial.copy_out = NULL;
	assert_int_equal(open_ring(&partial), -EINVAL);
	assert_non_null(strstr(T.log_buf, "all four or none"));
	partial.copy_in = partial.copy_out = NULL;
	partial.reserve = NULL;
	partial.release = NULL;
	assert_int_equal(open_ring(&partial), 0);
}

/* A frontend given the disk read-only: reads and flushes only. */
static void test_read_only(void **state)
{
	blkif_request_discard_t *d;

	assert_int_equal(blkif_ring_destroy(T.ring), 0);
	read_only_ring = true;
	assert_int_equal(open_ring(&copy_ops), 0);
	read_only_ring = false;
	fill_guest(0, 1, 0x42);
	queue(BLKIF_OP_WRITE, 1, 0, 0, 1);
	queue(BLKIF_OP_WRITE_BARRIER, 2, 0, 0, 1);
	queue(BLKIF_OP_READ, 3, 0, 1, 1);
	queue(BLKIF_OP_FLUSH_DISKCACHE, 4, 0, 0, 0);
	d = (blkif_request_discard_t *)RING_GET_REQUEST(&T.front,
							T.front.req_prod_pvt);
	queue(BLKIF_OP_DISCARD, 5, 0, 0, 0);
	d->nr_sectors = 8;
	kick();
	assert_int_equal(status_of(1, 5), BLKIF_RSP_ERROR);
	assert_int_equal(status_of(2, 5), BLKIF_RSP_ERROR);
	assert_int_equal(status_of(3, 5), BLKIF_RSP_OKAY);
	assert_int_equal(status_of(4, 5), BLKIF_RSP_OKAY);
	assert_int_equal(status_of(5, 5), BLKIF_RSP_ERROR);
	assert_int_equal(ram[0], 0);
	assert_non_null(strstr(T.log_buf, "write to a read-only disk"));
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_writes_one_batch), TEST(test_read_copied_out),
		TEST(test_copy_in_error),    TEST(test_copy_out_error),
		TEST(test_wait_for_room),    TEST(test_flush_reserves_nothing),
		TEST(test_refused_released), TEST(test_ops_all_or_none),
		TEST(test_read_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
