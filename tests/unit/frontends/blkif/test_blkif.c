/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_blkif.c - the blkif request path, driven as a frontend would drive
 * it: a fake transport over a malloc'd shared ring and data pool, a vbd
 * over the null driver, the mock driver or a small RAM driver, and the
 * event loop run pass by pass.
 *
 * Hostile requests are checked against the ring's counters as well as the
 * response: a request the module must refuse counts in bad_reqs (or
 * unsupported) and never reaches the vbd, so a check missing here but
 * caught by the vbd's own validation still fails the test.
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

#include "drivers/drivers.h"
#include "frontends/blkif/blkif-int.h" /* the poller: blkif_ring_poll */
#include "frontends/blkif/blkif.h"
#include "common/log.h"
#include "common/loop.h"
#include "tapdisk/vbd.h"
#include "tests/unit/mock-driver.h"

/* Pool pages: 16 MiB of data and the indirect pages. */
#define POOL_PAGES   4200u
#define PAGE	     BLKIF_PAGE_SIZE
#define SECT	     TD_SECTOR_SIZE
#define NULL_SECTORS (64u << 11) /* "null:size=64M" */
#define RAM_BYTES    (1u << 20)
#define MAX_PASSES   256
#define SEGS_PER_IND 512u

/* --- a RAM disk, to check where the data goes ---------------------------- */

static unsigned char *ram;

static int ram_open(struct td_driver *drv, const char *args)
{
	drv->info.size_sectors = RAM_BYTES / SECT;
	drv->info.sector_size = SECT;
	drv->info.features = TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			     TD_FEAT_WRITE_ZEROES;
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
	if (req->op == TD_OP_DISCARD || req->op == TD_OP_WRITE_ZEROES)
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

static const struct td_driver_ops *const table[] = {
	&td_null_ops,
	&mock_ops,
	&ram_ops,
	NULL,
};

/* --- the fake transport ---------------------------------------------------- */

struct fake {
	struct blkif_ring *ring;
	blkif_sring_t *sring;
	blkif_front_ring_t front;
	unsigned int notifies;
	unsigned int fatals;
	int fatal_err;
	unsigned int maps;
	enum blkif_map_access last_access;
	/* Called at each map_segment: the frontend acting meanwhile. */
	void (*on_map)(struct fake *f);
	bool drained;
};

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	unsigned char *pool;
	struct blkif_config cfg;
	struct fake fk[2];
	char *log_buf;
	size_t log_len;
	FILE *log;
} T;

static int fake_map(void *opaque, uint32_t gref, uint32_t offset, uint32_t len,
		    enum blkif_map_access access, void **addr)
{
	struct fake *f = opaque;

	/* The module's side of the contract. */
	assert_true(len && offset % SECT == 0 && len % SECT == 0);
	assert_true(offset + len <= PAGE);
	f->maps++;
	f->last_access = access;
	if (f->on_map)
		f->on_map(f);
	if (gref >= POOL_PAGES)
		return -EINVAL;
	*addr = T.pool + (size_t)gref * PAGE + offset;
	return 0;
}

static int fake_copy_indirect(void *opaque, uint32_t gref, void *dst,
			      size_t len)
{
	assert_true(len && len <= PAGE);
	if (gref >= POOL_PAGES)
		return -EINVAL;
	memcpy(dst, T.pool + (size_t)gref * PAGE, len);
	return 0;
}

static void fake_notify(void *opaque)
{
	((struct fake *)opaque)->notifies++;
}

static void fake_fatal(void *opaque, int err)
{
	struct fake *f = opaque;

	f->fatals++;
	f->fatal_err = err;
}

static const struct blkif_transport_ops fake_ops = {
	.map_segment = fake_map,
	.copy_indirect = fake_copy_indirect,
	.notify = fake_notify,
	.fatal = fake_fatal,
};

static int open_ring(struct fake *f, uint32_t order)
{
	size_t bytes = (size_t)PAGE << order;
	struct blkif_ring_params p = {
		.ring_order = order,
		.protocol = BLKIF_PROTOCOL_NATIVE,
		.queue = (uint32_t)(f - T.fk),
		.ops = &fake_ops,
		.opaque = f,
	};

	/* Exactly the ring's size, so that ASan and valgrind see overruns. */
	f->sring = aligned_alloc(PAGE, bytes);
	assert_non_null(f->sring);
	memset(f->sring, 0, bytes);
	SHARED_RING_INIT(f->sring);
	FRONT_RING_INIT(&f->front, f->sring, bytes);
	p.sring = f->sring;
	return blkif_ring_create(T.vbd, &T.cfg, &p, &f->ring);
}

static void close_ring(struct fake *f)
{
	if (f->ring)
		assert_int_equal(blkif_ring_destroy(f->ring), 0);
	free(f->sring);
	memset(f, 0, sizeof(*f));
}

static void open_vbd(const char *chain)
{
	struct td_vbd_params p = {.name = "blk", .chain = chain};

	assert_int_equal(td_vbd_open(T.loop, table, &p, &T.vbd), 0);
}

/* A vbd over chain and one ring of order 0 on fk[0]. */
static struct fake *start(const char *chain)
{
	open_vbd(chain);
	assert_int_equal(open_ring(&T.fk[0], 0), 0);
	return &T.fk[0];
}

static int setup(void **state)
{
	memset(&T, 0, sizeof(T));
	mock_reset();
	T.log = open_memstream(&T.log_buf, &T.log_len);
	assert_non_null(T.log);
	td_log_set_stream(T.log);
	assert_int_equal(td_loop_create(&T.loop), 0);
	T.pool = aligned_alloc(PAGE, (size_t)POOL_PAGES * PAGE);
	ram = calloc(1, RAM_BYTES);
	assert_true(T.pool && ram);
	memset(T.pool, 0, (size_t)POOL_PAGES * PAGE);
	blkif_config_init(&T.cfg);
	return 0;
}

static void run(void)
{
	for (int i = 0; i < 4; i++)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
}

static int teardown(void **state)
{
	run();
	for (int i = 0; i < 2; i++)
		close_ring(&T.fk[i]);
	if (T.vbd)
		assert_int_equal(td_vbd_close(T.vbd), 0);
	td_loop_destroy(T.loop);
	td_log_set_stream(NULL);
	fclose(T.log);
	free(T.log_buf);
	free(T.pool);
	free(ram);
	return 0;
}

/* --- the frontend's side -------------------------------------------------------- */

static blkif_request_t *next_req(struct fake *f, uint8_t op, uint64_t id)
{
	blkif_request_t *r =
		RING_GET_REQUEST(&f->front, f->front.req_prod_pvt++);

	memset(r, 0, sizeof(*r));
	r->operation = op;
	r->id = id;
	return r;
}

/* A direct request of nseg whole pages, page, page + 1, ... */
static blkif_request_t *req_rw(struct fake *f, uint8_t op, uint64_t id,
			       uint64_t sector, unsigned int nseg,
			       uint32_t page)
{
	blkif_request_t *r = next_req(f, op, id);

	r->nr_segments = (uint8_t)nseg;
	r->sector_number = sector;
	for (unsigned int i = 0; i < nseg && i < 11; i++) {
		r->seg[i].gref = page + i;
		r->seg[i].first_sect = 0;
		r->seg[i].last_sect = 7;
	}
	return r;
}

static void req_discard(struct fake *f, uint64_t id, uint64_t sector,
			uint64_t nr, uint8_t flag)
{
	blkif_request_discard_t *d =
		(blkif_request_discard_t *)next_req(f, BLKIF_OP_DISCARD, id);

	d->flag = flag;
	d->sector_number = sector;
	d->nr_sectors = nr;
}

/* Segment descriptors of an indirect request, in pool pages from desc. */
static struct blkif_request_segment *descs(uint32_t desc)
{
	return (struct blkif_request_segment *)(T.pool + (size_t)desc * PAGE);
}

/*
 * An indirect request of nseg whole pages from data; its descriptors are
 * written to pool pages desc, desc + 1, ... (contiguous, so descs(desc)[i]
 * is segment i).
 */
static blkif_request_indirect_t *req_ind(struct fake *f, uint8_t op,
					 uint64_t id, uint64_t sector,
					 uint32_t nseg, uint32_t desc,
					 uint32_t data)
{
	blkif_request_indirect_t *r =
		(blkif_request_indirect_t *)next_req(f, BLKIF_OP_INDIRECT, id);

	r->indirect_op = op;
	r->nr_segments = (uint16_t)nseg;
	r->sector_number = sector;
	for (uint32_t p = 0; p < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; p++)
		r->indirect_grefs[p] = desc + p;
	for (uint32_t i = 0; i < nseg && i < 8 * SEGS_PER_IND; i++)
		descs(desc)[i] = (struct blkif_request_segment){
			.gref = data + i, .first_sect = 0, .last_sect = 7};
	return r;
}

static int push(struct fake *f)
{
	int notify;

	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&f->front, notify);
	return notify;
}

/* What the transport does when the frontend's signal arrives. */
static void kick(struct fake *f)
{
	push(f);
	blkif_ring_kick(f->ring);
}

static unsigned int unread(const struct fake *f)
{
	return f->sring->rsp_prod - f->front.rsp_cons;
}

static void expect_rsp(struct fake *f, uint64_t id, uint8_t op, int16_t status)
{
	blkif_response_t *rsp;

	assert_true(unread(f) > 0);
	rsp = RING_GET_RESPONSE(&f->front, f->front.rsp_cons);
	f->front.rsp_cons++;
	assert_int_equal(rsp->id, id);
	assert_int_equal(rsp->operation, op);
	assert_int_equal(rsp->status, status);
}

static struct blkif_ring_stats ring_stats(const struct fake *f)
{
	struct blkif_ring_stats s;

	blkif_ring_get_stats(f->ring, &s);
	return s;
}

static struct td_vbd_stats vbd_stats(void)
{
	struct td_vbd_stats s;

	td_vbd_get_stats(T.vbd, &s);
	return s;
}

/* How many messages logged so far contain text. */
static int count_logged(const char *text)
{
	int n = 0;

	fflush(T.log);
	for (const char *p = T.log_buf; p && (p = strstr(p, text)); p++)
		n++;
	return n;
}

static bool logged(const char *text)
{
	return count_logged(text) > 0;
}

/* --- happy paths ------------------------------------------------------------ */

static void test_write_then_read_ram(void **state)
{
	struct fake *f = start("ram");
	blkif_request_t *r;

	for (size_t i = 0; i < 2 * PAGE; i++) {
		T.pool[3 * PAGE + i] = (unsigned char)(i * 7 + 1);
		T.pool[5 * PAGE + i] = (unsigned char)(i * 13 + 2);
	}
	/* Page 3 sectors 2..7 then page 5 sectors 0..3, to disk sector 8. */
	r = req_rw(f, BLKIF_OP_WRITE, 41, 8, 2, 0);
	r->seg[0] = (struct blkif_request_segment){3, 2, 7};
	r->seg[1] = (struct blkif_request_segment){5, 0, 3};
	kick(f);
	assert_int_equal(f->last_access, BLKIF_MAP_RO);
	run();
	expect_rsp(f, 41, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	assert_memory_equal(ram + 8 * SECT, T.pool + 3 * PAGE + 2 * SECT,
			    6 * SECT);
	assert_memory_equal(ram + 14 * SECT, T.pool + 5 * PAGE, 4 * SECT);

	/* Read the 10 sectors back into page 9 sectors 0..7, page 10 0..1. */
	r = req_rw(f, BLKIF_OP_READ, 42, 8, 2, 9);
	r->seg[1].last_sect = 1;
	kick(f);
	assert_int_equal(f->last_access, BLKIF_MAP_RW);
	run();
	expect_rsp(f, 42, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_memory_equal(T.pool + 9 * PAGE, ram + 8 * SECT, 10 * SECT);
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_WRITE], 1);
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_READ], 1);
	assert_int_equal(ring_stats(f).segments, 4);
}

static void test_read_write_null(void **state)
{
	struct fake *f = start("null:size=64M");
	struct td_vbd_stats vs;

	req_rw(f, BLKIF_OP_READ, 1, 0, 11, 0);
	req_rw(f, BLKIF_OP_WRITE, 2, NULL_SECTORS - 8, 1, 20);
	kick(f);
	run();
	expect_rsp(f, 1, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	expect_rsp(f, 2, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	vs = vbd_stats();
	assert_int_equal(vs.reqs[TD_OP_READ], 1);
	assert_int_equal(vs.bytes[TD_OP_READ], 11 * PAGE);
	assert_int_equal(vs.reqs[TD_OP_WRITE], 1);
	assert_int_equal(vs.seg_hist[td_seg_bucket(11)], 1);
}

/*
 * Requests the loop's poller takes (produced without a notification) are
 * counted as polled, those a kick takes are not; in flight counts the
 * requests taken and not answered.
 */
static void test_polled_counted(void **state)
{
	struct fake *f = start("null:size=64M");
	struct blkif_ring *ring = f->ring;
	struct blkif_ring_stats s;

	req_rw(f, BLKIF_OP_READ, 1, 0, 1, 0);
	kick(f);
	assert_int_equal(blkif_ring_in_flight(ring), 1);
	run();
	expect_rsp(f, 1, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(blkif_ring_in_flight(ring), 0);
	assert_int_equal(ring_stats(f).polled_reqs, 0);

	assert_false(blkif_ring_poll(&ring->poller, ring)); /* nothing new */
	req_rw(f, BLKIF_OP_READ, 2, 8, 1, 0);
	req_rw(f, BLKIF_OP_WRITE, 3, 16, 2, 1);
	push(f);
	assert_true(blkif_ring_poll(&ring->poller, ring));
	assert_int_equal(blkif_ring_in_flight(ring), 2);
	assert_false(blkif_ring_poll(&ring->poller, ring));
	run();
	expect_rsp(f, 2, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	expect_rsp(f, 3, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	s = ring_stats(f);
	assert_int_equal(s.polled_reqs, 2);
	assert_int_equal(blkif_ring_stats_requests(&s), 3);
	assert_int_equal(s.segments, 4);
	assert_int_equal(blkif_ring_in_flight(ring), 0);

	/* A kick after that counts as notified again. */
	req_rw(f, BLKIF_OP_READ, 4, 0, 1, 0);
	kick(f);
	run();
	expect_rsp(f, 4, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(ring_stats(f).polled_reqs, 2);
}

static void test_flush(void **state)
{
	struct fake *f = start("mock");

	next_req(f, BLKIF_OP_FLUSH_DISKCACHE, 7);
	kick(f);
	run();
	expect_rsp(f, 7, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].op, TD_OP_FLUSH);
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_FLUSH_DISKCACHE], 1);
}

/* A flush carrying data: the flush first, then the write. */
static void test_flush_with_data(void **state)
{
	struct fake *f = start("mock");

	req_rw(f, BLKIF_OP_FLUSH_DISKCACHE, 8, 16, 2, 1);
	kick(f);
	run();
	expect_rsp(f, 8, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[0].op, TD_OP_FLUSH);
	assert_int_equal(mock.seen[1].op, TD_OP_WRITE);
	assert_int_equal(mock.seen[1].flags, 0);
	assert_int_equal(mock.seen[1].sector, 16);
	assert_int_equal(mock.seen[1].nr_sectors, 16);
}

static void test_barrier_fua(void **state)
{
	struct fake *f = start("mock");

	req_rw(f, BLKIF_OP_WRITE_BARRIER, 9, 24, 1, 1);
	kick(f);
	run();
	expect_rsp(f, 9, BLKIF_OP_WRITE_BARRIER, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[0].op, TD_OP_FLUSH);
	assert_int_equal(mock.seen[1].op, TD_OP_WRITE);
	assert_int_equal(mock.seen[1].flags, TD_REQ_FUA);
	assert_int_equal(mock.seen[1].sector, 24);
}

/* Without FUA the write is followed by a second flush. */
static void test_barrier_no_fua(void **state)
{
	struct fake *f;

	mock.features = TD_FEAT_FLUSH;
	f = start("mock");
	req_rw(f, BLKIF_OP_WRITE_BARRIER, 10, 0, 1, 1);
	next_req(f, BLKIF_OP_WRITE_BARRIER, 11); /* no data: a flush */
	kick(f);
	run();
	run();
	expect_rsp(f, 10, BLKIF_OP_WRITE_BARRIER, BLKIF_RSP_OKAY);
	expect_rsp(f, 11, BLKIF_OP_WRITE_BARRIER, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 4);
	assert_int_equal(mock.seen[0].op, TD_OP_FLUSH);
	assert_int_equal(mock.seen[1].op, TD_OP_WRITE);
	assert_int_equal(mock.seen[1].flags, 0);
	assert_int_equal(mock.seen[2].op, TD_OP_FLUSH);
	assert_int_equal(mock.seen[3].op, TD_OP_FLUSH);
}

static void test_barrier_unsupported(void **state)
{
	struct fake *f;

	mock.features = 0;
	f = start("mock");
	req_rw(f, BLKIF_OP_WRITE_BARRIER, 12, 0, 1, 1);
	kick(f);
	run();
	expect_rsp(f, 12, BLKIF_OP_WRITE_BARRIER, BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(mock.nr_seen, 0); /* the write never ran */
}

/*
 * A barrier waits for the requests before it, and the requests after it
 * wait for the barrier.
 */
static void test_barrier_orders(void **state)
{
	struct fake *f;

	mock.hold = true;
	f = start("mock");
	req_rw(f, BLKIF_OP_READ, 1, 0, 1, 1);
	req_rw(f, BLKIF_OP_WRITE_BARRIER, 2, 8, 1, 2);
	req_rw(f, BLKIF_OP_READ, 3, 16, 1, 3);
	kick(f);
	run();
	assert_int_equal(mock.nr_seen, 1); /* the barrier drains */
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_READ], 1);
	mock_complete_held(0, 0);
	run();
	expect_rsp(f, 1, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[1].op, TD_OP_FLUSH);
	mock_complete_held(1, 0);
	run();
	assert_int_equal(mock.nr_seen, 3);
	assert_int_equal(mock.seen[2].op, TD_OP_WRITE);
	assert_int_equal(unread(f), 0);
	mock_complete_held(2, 0);
	run();
	expect_rsp(f, 2, BLKIF_OP_WRITE_BARRIER, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 4); /* only now the read after it */
	assert_int_equal(mock.seen[3].op, TD_OP_READ);
	assert_int_equal(mock.seen[3].sector, 16);
	mock_complete_held(3, 0);
	run();
	expect_rsp(f, 3, BLKIF_OP_READ, BLKIF_RSP_OKAY);
}

static void test_discard(void **state)
{
	struct fake *f = start("mock");

	req_discard(f, 13, 64, 128, 0);
	kick(f);
	run();
	expect_rsp(f, 13, BLKIF_OP_DISCARD, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].op, TD_OP_DISCARD);
	assert_int_equal(mock.seen[0].sector, 64);
	assert_int_equal(mock.seen[0].nr_sectors, 128);
}

/* A 64-bit discard is cut into vbd I/Os of at most 2^31 sectors. */
static void test_discard_huge(void **state)
{
	struct fake *f;

	mock.size_sectors = 1ull << 33;
	f = start("mock");
	req_discard(f, 14, 8, (1ull << 32) + 16, 0);
	kick(f);
	for (int i = 0; i < 3; i++)
		run();
	expect_rsp(f, 14, BLKIF_OP_DISCARD, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 3);
	assert_int_equal(mock.seen[0].sector, 8);
	assert_int_equal(mock.seen[0].nr_sectors, 1u << 31);
	assert_int_equal(mock.seen[1].sector, 8 + (1ull << 31));
	assert_int_equal(mock.seen[1].nr_sectors, 1u << 31);
	assert_int_equal(mock.seen[2].sector, 8 + (1ull << 32));
	assert_int_equal(mock.seen[2].nr_sectors, 16);
}

static void test_secure_discard_offered(void **state)
{
	struct fake *f;

	T.cfg.feature_secure_discard = true;
	f = start("mock");
	req_discard(f, 15, 0, 8, BLKIF_DISCARD_SECURE);
	kick(f);
	run();
	expect_rsp(f, 15, BLKIF_OP_DISCARD, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].op, TD_OP_WRITE_ZEROES);
	assert_int_equal(mock.seen[0].flags, TD_REQ_NO_HOLE);
}

/* --- hostile requests: refused by the module, never reach the vbd ---------- */

static void expect_refused(struct fake *f, uint64_t id, uint8_t op,
			   int16_t status)
{
	struct blkif_ring_stats rs;

	kick(f);
	run();
	expect_rsp(f, id, op, status);
	assert_int_equal(unread(f), 0);
	rs = ring_stats(f);
	assert_int_equal(rs.bad_reqs, status == BLKIF_RSP_ERROR);
	assert_int_equal(rs.unsupported, status == BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(rs.io_errors, 0); /* not left to the vbd */
	assert_int_equal(vbd_stats().pieces, 0);
	assert_false(blkif_ring_dead(f->ring));
	assert_int_equal(f->fatals, 0);
}

static void test_bad_no_segment(void **state)
{
	struct fake *f = start("null:size=64M");

	req_rw(f, BLKIF_OP_READ, 100, 0, 0, 0);
	expect_refused(f, 100, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	assert_true(logged("no segment"));
}

static void test_bad_12_segments(void **state)
{
	struct fake *f = start("null:size=64M");

	req_rw(f, BLKIF_OP_WRITE, 101, 0, 12, 0);
	expect_refused(f, 101, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	assert_int_equal(f->maps, 0);
	assert_true(logged("12 segments, more than 11"));
}

static void test_bad_indirect_over_protocol_max(void **state)
{
	struct fake *f = start("null:size=64M");

	req_ind(f, BLKIF_OP_READ, 102, 0, 4097, 0, 16);
	expect_refused(f, 102, BLKIF_OP_READ, BLKIF_RSP_ERROR);
}

static void test_bad_indirect_over_configured_max(void **state)
{
	struct fake *f;

	T.cfg.max_indirect_segments = 256;
	f = start("null:size=64M");
	req_ind(f, BLKIF_OP_WRITE, 103, 0, 257, 0, 16);
	expect_refused(f, 103, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	assert_true(logged("257 indirect segments, not in 1..256"));
}

/* 600 segments need 2 indirect pages; the second is not the frontend's. */
static void test_bad_indirect_page_missing(void **state)
{
	struct fake *f = start("null:size=64M");
	blkif_request_indirect_t *r;

	r = req_ind(f, BLKIF_OP_READ, 104, 0, 600, 0, 16);
	r->indirect_grefs[1] = POOL_PAGES;
	expect_refused(f, 104, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	assert_true(logged("indirect page 1 of 2"));
}

static void test_bad_indirect_zero_segments(void **state)
{
	struct fake *f = start("null:size=64M");

	req_ind(f, BLKIF_OP_READ, 105, 0, 0, 0, 16);
	expect_refused(f, 105, BLKIF_OP_READ, BLKIF_RSP_ERROR);
}

static void test_bad_indirect_op(void **state)
{
	struct fake *f = start("null:size=64M");

	req_ind(f, BLKIF_OP_WRITE_BARRIER, 106, 0, 4, 0, 16);
	expect_refused(f, 106, BLKIF_OP_WRITE_BARRIER, BLKIF_RSP_ERROR);
}

static void test_bad_first_after_last(void **state)
{
	struct fake *f = start("null:size=64M");
	blkif_request_t *r = req_rw(f, BLKIF_OP_READ, 107, 0, 2, 0);

	r->seg[1].first_sect = 5;
	r->seg[1].last_sect = 4;
	expect_refused(f, 107, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	assert_int_equal(f->maps, 0); /* checked before any page is mapped */
}

static void test_bad_last_sect_8(void **state)
{
	struct fake *f = start("null:size=64M");
	blkif_request_t *r = req_rw(f, BLKIF_OP_READ, 108, 0, 1, 0);

	r->seg[0].last_sect = 8;
	expect_refused(f, 108, BLKIF_OP_READ, BLKIF_RSP_ERROR);
}

/* In an indirect page too: descriptors are hostile input as well. */
static void test_bad_indirect_descriptor(void **state)
{
	struct fake *f = start("null:size=64M");

	req_ind(f, BLKIF_OP_READ, 109, 0, 700, 0, 16);
	descs(0)[650].last_sect = 9;
	expect_refused(f, 109, BLKIF_OP_READ, BLKIF_RSP_ERROR);
}

static void test_bad_range_past_end(void **state)
{
	struct fake *f = start("null:size=64M");

	/* The last 8 sectors are fine, 4 further are not. */
	req_rw(f, BLKIF_OP_READ, 110, NULL_SECTORS - 8, 1, 0);
	kick(f);
	run();
	expect_rsp(f, 110, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	req_rw(f, BLKIF_OP_READ, 111, NULL_SECTORS - 4, 1, 0);
	kick(f);
	run();
	expect_rsp(f, 111, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	assert_int_equal(ring_stats(f).bad_reqs, 1);
	assert_int_equal(ring_stats(f).io_errors, 0);
	assert_int_equal(vbd_stats().pieces, 1);
}

static void test_bad_sector_overflow(void **state)
{
	struct fake *f = start("null:size=64M");

	req_rw(f, BLKIF_OP_WRITE, 112, UINT64_MAX - 3, 1, 0);
	expect_refused(f, 112, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
}

static void test_bad_gref(void **state)
{
	struct fake *f = start("null:size=64M");

	req_rw(f, BLKIF_OP_READ, 113, 0, 3, POOL_PAGES - 2);
	expect_refused(f, 113, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	assert_true(logged("segment 2: page 4200 refused"));
}

static void test_unknown_op(void **state)
{
	struct fake *f = start("null:size=64M");

	next_req(f, BLKIF_OP_RESERVED_1, 114);
	expect_refused(f, 114, BLKIF_OP_RESERVED_1, BLKIF_RSP_EOPNOTSUPP);
	next_req(f, 0xee, 115);
	kick(f);
	run();
	expect_rsp(f, 115, 0xee, BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(ring_stats(f).reqs[BLKIF_STAT_OP_OTHER], 2);
}

static void test_secure_discard_refused(void **state)
{
	struct fake *f = start("mock");

	req_discard(f, 116, 0, 8, BLKIF_DISCARD_SECURE);
	expect_refused(f, 116, BLKIF_OP_DISCARD, BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(mock.nr_seen, 0);
}

static void test_discard_past_end(void **state)
{
	struct fake *f = start("null:size=64M");

	req_discard(f, 117, NULL_SECTORS - 8, 16, 0);
	expect_refused(f, 117, BLKIF_OP_DISCARD, BLKIF_RSP_ERROR);
}

static void test_discard_overflow(void **state)
{
	struct fake *f = start("null:size=64M");

	req_discard(f, 118, 8, UINT64_MAX - 4, 0);
	expect_refused(f, 118, BLKIF_OP_DISCARD, BLKIF_RSP_ERROR);
}

static void test_discard_unknown_flag(void **state)
{
	struct fake *f = start("mock");

	req_discard(f, 131, 0, 8, 1u << 1);
	expect_refused(f, 131, BLKIF_OP_DISCARD, BLKIF_RSP_ERROR);
}

static void test_discard_empty(void **state)
{
	struct fake *f = start("mock");

	req_discard(f, 132, 0, 0, 0);
	expect_refused(f, 132, BLKIF_OP_DISCARD, BLKIF_RSP_ERROR);
}

static void test_indirect_disabled(void **state)
{
	struct fake *f;

	T.cfg.max_indirect_segments = BLKIF_NO_INDIRECT;
	f = start("null:size=64M");
	req_ind(f, BLKIF_OP_READ, 119, 0, 8, 0, 16);
	expect_refused(f, 119, BLKIF_OP_READ, BLKIF_RSP_EOPNOTSUPP);
}

/* --- the copy is what counts ------------------------------------------------- */

/* The frontend rewrites the slot and the indirect page while we map. */
static void scribble(struct fake *f)
{
	blkif_request_indirect_t *r =
		(blkif_request_indirect_t *)RING_GET_REQUEST(&f->front, 0);

	r->id = 0xbad;
	r->nr_segments = 4096;
	r->sector_number = UINT64_MAX;
	for (uint32_t i = 0; i < 16; i++)
		descs(0)[i].gref = POOL_PAGES + i;
}

/* Between our check of a direct request's segments and their mapping. */
static void scribble_direct(struct fake *f)
{
	blkif_request_t *r = RING_GET_REQUEST(&f->front, 0);

	r->id = 0xbad;
	r->sector_number = UINT64_MAX - 1;
	r->seg[1] = (struct blkif_request_segment){POOL_PAGES + 1, 0, 200};
}

static void test_no_reread_direct(void **state)
{
	struct fake *f = start("mock");

	req_rw(f, BLKIF_OP_WRITE, 130, 40, 2, 50);
	f->on_map = scribble_direct;
	kick(f);
	run();
	assert_int_equal(f->maps, 2);
	expect_rsp(f, 130, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	assert_int_equal(mock.seen[0].sector, 40);
	assert_int_equal(mock.seen[0].nr_sectors, 16);
	assert_int_equal(mock.seen[0].iovcnt, 1);
	assert_ptr_equal(mock.seen[0].iov[0].iov_base, T.pool + 50 * PAGE);
}

static void test_no_reread(void **state)
{
	struct fake *f = start("mock");

	req_ind(f, BLKIF_OP_WRITE, 120, 32, 16, 0, 100);
	f->on_map = scribble;
	kick(f);
	run();
	assert_int_equal(f->maps, 16);
	expect_rsp(f, 120, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	assert_int_equal(mock.seen[0].sector, 32);
	assert_int_equal(mock.seen[0].nr_sectors, 16 * 8);
	assert_ptr_equal(mock.seen[0].iov[0].iov_base, T.pool + 100 * PAGE);
}

/* Pages adjacent in memory become one iovec; the histogram still sees
 * the frontend's segments. */
static void test_segments_joined(void **state)
{
	struct fake *f = start("mock");
	blkif_request_t *r = req_rw(f, BLKIF_OP_WRITE, 121, 0, 3, 7);

	r->seg[2].gref = 20;
	kick(f);
	run();
	expect_rsp(f, 121, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	assert_int_equal(mock.seen[0].iovcnt, 2);
	assert_ptr_equal(mock.seen[0].iov[0].iov_base, T.pool + 7 * PAGE);
	assert_int_equal(mock.seen[0].iov[0].iov_len, 2 * PAGE);
	assert_ptr_equal(mock.seen[0].iov[1].iov_base, T.pool + 20 * PAGE);
	assert_int_equal(vbd_stats().seg_hist[td_seg_bucket(3)], 1);
}

/* --- indirect ------------------------------------------------------------------ */

/* 1 MiB in 256 segments arrives as one vbd I/O. */
static void test_1mib_one_io(void **state)
{
	struct fake *f = start("null:size=64M");
	struct td_vbd_stats vs;

	req_ind(f, BLKIF_OP_READ, 122, 2048, 256, 0, 16);
	kick(f);
	run();
	expect_rsp(f, 122, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	vs = vbd_stats();
	assert_int_equal(vs.reqs[TD_OP_READ], 1);
	assert_int_equal(vs.bytes[TD_OP_READ], 1u << 20);
	assert_int_equal(vs.pieces, 1);
	assert_int_equal(vs.seg_hist[td_seg_bucket(256)], 1);
	assert_int_equal(td_seg_bucket_max(td_seg_bucket(256)), 256);
	assert_int_equal(ring_stats(f).indirect_reqs, 1);
	assert_int_equal(ring_stats(f).segments, 256);
}

/* The protocol's maximum: 8 pages of 512 descriptors, 16 MiB. */
static void test_16mib_4096_segments(void **state)
{
	struct fake *f = start("null:size=64M");
	struct td_vbd_stats vs;

	req_ind(f, BLKIF_OP_WRITE, 123, 0, 4096, 0, 8);
	kick(f);
	run();
	expect_rsp(f, 123, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	vs = vbd_stats();
	assert_int_equal(vs.bytes[TD_OP_WRITE], 16u << 20);
	assert_int_equal(vs.seg_hist[td_seg_bucket(4096)], 1);
}

/* Indirect requests beyond the buffers wait on the ring, in order. */
static void test_indirect_buffers_wait(void **state)
{
	struct fake *f;

	T.cfg.indirect_buffers = 1;
	mock.hold = true;
	f = start("mock");
	req_ind(f, BLKIF_OP_READ, 124, 0, 2, 0, 16);
	req_ind(f, BLKIF_OP_READ, 125, 8, 2, 1, 32);
	kick(f);
	run();
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(ring_stats(f).indirect_waits, 1);
	mock_complete_held(0, 0);
	run();
	expect_rsp(f, 124, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 2); /* taken by the deferred kick */
	assert_int_equal(mock.seen[1].sector, 8);
	mock_complete_held(1, 0);
	run();
	expect_rsp(f, 125, BLKIF_OP_READ, BLKIF_RSP_OKAY);
}

/* --- the ring ------------------------------------------------------------------ */

static void test_backend_errors(void **state)
{
	struct fake *f;

	mock.complete_err = -EIO;
	f = start("mock");
	req_rw(f, BLKIF_OP_READ, 126, 0, 1, 0);
	kick(f);
	run();
	expect_rsp(f, 126, BLKIF_OP_READ, BLKIF_RSP_ERROR);
	mock.complete_err = -EOPNOTSUPP;
	next_req(f, BLKIF_OP_FLUSH_DISKCACHE, 127);
	kick(f);
	run();
	expect_rsp(f, 127, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(ring_stats(f).io_errors, 2);
	assert_int_equal(ring_stats(f).bad_reqs, 0);
}

static void test_read_only_write(void **state)
{
	struct td_vbd_params p = {
		.name = "ro", .chain = "mock", .read_only = true};

	assert_int_equal(td_vbd_open(T.loop, table, &p, &T.vbd), 0);
	assert_int_equal(open_ring(&T.fk[0], 0), 0);
	req_rw(&T.fk[0], BLKIF_OP_WRITE, 128, 0, 1, 0);
	kick(&T.fk[0]);
	run();
	expect_rsp(&T.fk[0], 128, BLKIF_OP_WRITE, BLKIF_RSP_ERROR);
	assert_int_equal(mock.nr_seen, 0);
}

/* N completions in one pass: one push, one notification. */
static void test_responses_batched(void **state)
{
	struct fake *f = start("null:size=64M");
	int more;

	for (int i = 0; i < 8; i++)
		req_rw(f, BLKIF_OP_READ, 200 + i, (uint64_t)i * 8, 1, i);
	kick(f);
	assert_int_equal(f->sring->rsp_prod, 0); /* nothing written yet */
	assert_int_equal(td_loop_run_once(T.loop, 0), 0);
	assert_int_equal(f->sring->rsp_prod, 8);
	assert_int_equal(f->notifies, 1);
	for (int i = 0; i < 8; i++)
		expect_rsp(f, 200 + i, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	run();
	assert_int_equal(f->notifies, 1); /* idle passes notify nothing */

	/* The frontend re-arms rsp_event: the next batch notifies once. */
	RING_FINAL_CHECK_FOR_RESPONSES(&f->front, more);
	assert_false(more);
	for (int i = 0; i < 4; i++)
		req_rw(f, BLKIF_OP_READ, 300 + i, 0, 1, 0);
	kick(f);
	run();
	assert_int_equal(f->notifies, 2);
	/* Not re-armed: responses are pushed without a wasted wake-up. */
	for (int i = 0; i < 4; i++)
		req_rw(f, BLKIF_OP_READ, 400 + i, 0, 1, 0);
	kick(f);
	run();
	assert_int_equal(unread(f), 8);
	assert_int_equal(f->notifies, 2);
	assert_int_equal(ring_stats(f).notifications, 2);
}

/* After the backend's final check, a new request brings a signal. */
static void test_final_check_rearms(void **state)
{
	struct fake *f = start("null:size=64M");

	req_rw(f, BLKIF_OP_READ, 1, 0, 1, 0);
	assert_true(push(f)); /* req_event starts at 1 */
	blkif_ring_kick(f->ring);
	assert_int_equal(f->sring->req_event, 2); /* req_cons + 1 */
	req_rw(f, BLKIF_OP_READ, 2, 0, 1, 0);
	assert_true(push(f));
	req_rw(f, BLKIF_OP_READ, 3, 0, 1, 0);
	assert_false(push(f)); /* the backend has not looked yet */
	blkif_ring_kick(f->ring);
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_READ], 3);
	assert_int_equal(f->sring->req_event, 4);
	run();
	assert_int_equal(unread(f), 3);
}

/* A request produced while the backend consumes, without a signal. */
static void produce_once(struct fake *f)
{
	if (f->front.req_prod_pvt != 1)
		return;
	req_rw(f, BLKIF_OP_READ, 2, 8, 1, 1);
	push(f);
}

static void test_final_check_catches_late_request(void **state)
{
	struct fake *f = start("null:size=64M");

	req_rw(f, BLKIF_OP_READ, 1, 0, 1, 0);
	f->on_map = produce_once;
	kick(f);
	/* Taken within the same kick, by the re-check after req_event. */
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_READ], 2);
	run();
	expect_rsp(f, 1, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	expect_rsp(f, 2, BLKIF_OP_READ, BLKIF_RSP_OKAY);
}

/* Fill a ring twice (indices wrap) and collect every response. */
static void fill_ring(struct fake *f, uint32_t size, uint64_t base)
{
	unsigned char *seen = calloc(size, 1);

	assert_non_null(seen);
	for (uint32_t i = 0; i < size; i++)
		req_rw(f, BLKIF_OP_READ, base + i, (uint64_t)(i % 1024) * 8, 1,
		       i % POOL_PAGES);
	kick(f);
	for (int p = 0; p < MAX_PASSES && unread(f) < size; p++)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
	assert_int_equal(unread(f), size);
	while (unread(f)) {
		blkif_response_t *rsp =
			RING_GET_RESPONSE(&f->front, f->front.rsp_cons++);

		assert_int_equal(rsp->status, BLKIF_RSP_OKAY);
		assert_true(rsp->id >= base && rsp->id < base + size);
		assert_int_equal(seen[rsp->id - base]++, 0);
	}
	free(seen);
}

static void test_ring_orders(void **state)
{
	T.cfg.max_ring_order = BLKIF_MAX_RING_ORDER;
	open_vbd("null:size=64M");
	for (uint32_t order = 0; order <= BLKIF_MAX_RING_ORDER; order++) {
		struct fake *f = &T.fk[0];
		uint32_t size = 32u << order;

		assert_int_equal(open_ring(f, order), 0);
		assert_int_equal(blkif_ring_size(f->ring), size);
		fill_ring(f, size, 0);
		fill_ring(f, size, size);
		assert_int_equal(f->fatals, 0);
		run();
		close_ring(f);
	}
}

static void test_ring_order_limits(void **state)
{
	open_vbd("null:size=64M");
	/* Default: the Xen guest limit. */
	assert_int_equal(open_ring(&T.fk[0], 5), -EINVAL);
	close_ring(&T.fk[0]);
	T.cfg.max_ring_order = 9;
	assert_int_equal(open_ring(&T.fk[0], 9), -EINVAL);
	close_ring(&T.fk[0]);
}

static void drained(struct blkif_ring *ring, void *opaque)
{
	struct fake *f = opaque;

	f->drained = true;
	assert_int_equal(blkif_ring_destroy(ring), 0);
	f->ring = NULL;
}

/* More than a ring ahead: fatal for that ring, the other one goes on. */
static void test_producer_overflow(void **state)
{
	struct fake *a, *b;
	uint32_t size;

	open_vbd("null:size=64M");
	a = &T.fk[0];
	b = &T.fk[1];
	assert_int_equal(open_ring(a, 0), 0);
	assert_int_equal(open_ring(b, 1), 0);
	size = blkif_ring_size(a->ring);
	a->sring->req_prod = size + 1;
	blkif_ring_kick(a->ring);
	assert_int_equal(a->fatals, 1);
	assert_int_equal(a->fatal_err, -EPROTO);
	assert_true(blkif_ring_dead(a->ring));
	blkif_ring_kick(a->ring);
	a->sring->req_prod = 1; /* sane again: too late */
	blkif_ring_kick(a->ring);
	run();
	assert_int_equal(a->fatals, 1);
	assert_int_equal(ring_stats(a).protocol_errors, 1);
	assert_int_equal(count_logged("protocol error"), 1);
	/* Never touched again: not even req_event or rsp_prod. */
	assert_int_equal(a->sring->req_event, 1);
	assert_int_equal(a->sring->rsp_prod, 0);
	assert_int_equal(ring_stats(a).reqs[BLKIF_OP_READ], 0);

	req_rw(b, BLKIF_OP_READ, 500, 0, 1, 0);
	kick(b);
	run();
	expect_rsp(b, 500, BLKIF_OP_READ, BLKIF_RSP_OKAY);

	assert_int_equal(blkif_ring_stop(a->ring, drained, a), 0);
	assert_false(a->drained); /* never from inside the call */
	run();
	assert_true(a->drained);
}

/* Stopping with I/O in flight: no response, drained once it ends. */
static void test_stop_drains(void **state)
{
	struct fake *f;

	mock.hold = true;
	f = start("mock");
	req_rw(f, BLKIF_OP_READ, 600, 0, 1, 0);
	kick(f);
	run();
	assert_int_equal(blkif_ring_stop(f->ring, drained, f), 0);
	assert_int_equal(blkif_ring_stop(f->ring, drained, f), -EALREADY);
	assert_int_equal(blkif_ring_destroy(f->ring), -EBUSY);
	run();
	assert_false(f->drained);
	mock_complete_held(0, 0);
	run();
	assert_true(f->drained);
	assert_int_equal(f->sring->rsp_prod, 0);
}

/*
 * Quiesce with a request in flight and one queued behind it: the first is
 * answered, the second left on the ring; a new ring resumed on the same
 * shared ring (another tapdisk) takes the second, and only it.
 */
static void test_quiesce_then_resume(void **state)
{
	struct blkif_ring_params p = {
		.ring_order = 0,
		.protocol = BLKIF_PROTOCOL_NATIVE,
		.ops = &fake_ops,
		.resume = true,
	};
	struct fake *f;

	mock.hold = true;
	f = start("mock");
	req_rw(f, BLKIF_OP_READ, 700, 0, 1, 0);
	kick(f);
	run();
	assert_int_equal(blkif_ring_quiesce(f->ring, drained, f), 0);
	assert_int_equal(blkif_ring_quiesce(f->ring, drained, f), -EALREADY);
	/* Produced after the quiesce: must stay on the ring. */
	req_rw(f, BLKIF_OP_WRITE, 701, 8, 1, 1);
	kick(f);
	run();
	assert_false(f->drained);
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_WRITE], 0);
	mock_complete_held(0, 0);
	run();
	assert_true(f->drained); /* destroyed by the callback */
	expect_rsp(f, 700, BLKIF_OP_READ, BLKIF_RSP_OKAY);
	assert_int_equal(unread(f), 0);
	assert_int_equal(f->sring->rsp_prod, 1);

	/* The next backend: resumes at rsp_prod, takes 701 only. */
	mock.hold = false;
	p.sring = f->sring;
	p.opaque = f;
	assert_int_equal(blkif_ring_create(T.vbd, &T.cfg, &p, &f->ring), 0);
	blkif_ring_kick(f->ring);
	run();
	expect_rsp(f, 701, BLKIF_OP_WRITE, BLKIF_RSP_OKAY);
	assert_int_equal(unread(f), 0);
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_READ], 0);
	assert_int_equal(ring_stats(f).reqs[BLKIF_OP_WRITE], 1);
	assert_true(logged("resuming at index 1"));
}

/* Quiesced with nothing in flight: drained at once, from the loop. */
static void test_quiesce_idle(void **state)
{
	struct fake *f = start("null:size=64M");

	assert_int_equal(blkif_ring_quiesce(f->ring, drained, f), 0);
	assert_false(f->drained);
	run();
	assert_true(f->drained);
}

static void test_config(void **state)
{
	struct blkif_config cfg;
	struct blkif_features feat;

	blkif_config_init(&cfg);
	assert_int_equal(cfg.max_ring_order, 4);
	assert_int_equal(cfg.max_indirect_segments, 4096);
	assert_int_equal(blkif_config_check(&cfg), 0);
	cfg.max_indirect_segments = 10;
	assert_int_equal(blkif_config_check(&cfg), -EINVAL);
	cfg.max_indirect_segments = 4097;
	assert_int_equal(blkif_config_check(&cfg), -EINVAL);
	cfg.max_indirect_segments = 4096;
	cfg.max_ring_order = 9;
	assert_int_equal(blkif_config_check(&cfg), -EINVAL);

	mock.features = TD_FEAT_FLUSH;
	open_vbd("mock");
	blkif_config_init(&cfg);
	cfg.feature_secure_discard = true;
	blkif_get_features(&cfg, T.vbd, &feat);
	assert_int_equal(feat.max_ring_page_order, 4);
	assert_int_equal(feat.max_indirect_segments, 4096);
	assert_true(feat.flush_cache);
	assert_false(feat.discard);
	assert_false(feat.discard_secure);
	td_vbd_close(T.vbd);

	mock.features = TD_FEAT_DISCARD | TD_FEAT_WRITE_ZEROES;
	open_vbd("mock");
	cfg.max_indirect_segments = BLKIF_NO_INDIRECT;
	blkif_get_features(&cfg, T.vbd, &feat);
	assert_int_equal(feat.max_indirect_segments, 0);
	assert_false(feat.flush_cache);
	assert_true(feat.discard);
	assert_true(feat.discard_secure);
}

static void test_create_errors(void **state)
{
	struct blkif_transport_ops no_notify = fake_ops;
	struct blkif_ring_params p = {.ring_order = 0, .ops = &no_notify};
	struct blkif_ring *ring = NULL;
	void *page = aligned_alloc(PAGE, PAGE);

	open_vbd("mock");
	p.sring = page;
	no_notify.notify = NULL;
	assert_int_equal(blkif_ring_create(T.vbd, &T.cfg, &p, &ring), -EINVAL);
	no_notify = fake_ops;
	no_notify.copy_indirect = NULL; /* needed: indirect is on */
	assert_int_equal(blkif_ring_create(T.vbd, &T.cfg, &p, &ring), -EINVAL);
	T.cfg.max_indirect_segments = BLKIF_NO_INDIRECT;
	assert_int_equal(blkif_ring_create(T.vbd, &T.cfg, &p, &ring), 0);
	assert_int_equal(blkif_ring_destroy(ring), 0);
	p.protocol = (enum blkif_protocol)99; /* no such ABI */
	assert_int_equal(blkif_ring_create(T.vbd, &T.cfg, &p, &ring), -EINVAL);
	free(page);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_write_then_read_ram),
		TEST(test_read_write_null),
		TEST(test_flush),
		TEST(test_flush_with_data),
		TEST(test_barrier_fua),
		TEST(test_barrier_no_fua),
		TEST(test_barrier_unsupported),
		TEST(test_barrier_orders),
		TEST(test_discard),
		TEST(test_discard_huge),
		TEST(test_secure_discard_offered),
		TEST(test_bad_no_segment),
		TEST(test_bad_12_segments),
		TEST(test_bad_indirect_over_protocol_max),
		TEST(test_bad_indirect_over_configured_max),
		TEST(test_bad_indirect_page_missing),
		TEST(test_bad_indirect_zero_segments),
		TEST(test_bad_indirect_op),
		TEST(test_bad_first_after_last),
		TEST(test_bad_last_sect_8),
		TEST(test_bad_indirect_descriptor),
		TEST(test_bad_range_past_end),
		TEST(test_bad_sector_overflow),
		TEST(test_bad_gref),
		TEST(test_unknown_op),
		TEST(test_secure_discard_refused),
		TEST(test_discard_past_end),
		TEST(test_discard_overflow),
		TEST(test_discard_unknown_flag),
		TEST(test_discard_empty),
		TEST(test_indirect_disabled),
		TEST(test_no_reread_direct),
		TEST(test_no_reread),
		TEST(test_segments_joined),
		TEST(test_1mib_one_io),
		TEST(test_16mib_4096_segments),
		TEST(test_indirect_buffers_wait),
		TEST(test_backend_errors),
		TEST(test_read_only_write),
		TEST(test_responses_batched),
		TEST(test_final_check_rearms),
		TEST(test_final_check_catches_late_request),
		TEST(test_ring_orders),
		TEST(test_ring_order_limits),
		TEST(test_producer_overflow),
		TEST(test_stop_drains),
		TEST(test_quiesce_then_resume),
		TEST(test_quiesce_idle),
		TEST(test_config),
		TEST(test_create_errors),
		TEST(test_polled_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
