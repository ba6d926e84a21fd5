/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_xen-io.c - the Xen transport's data path (frontends/xen/xen-io.c)
 * with libxengnttab and libxenevtchn wrapped (-Wl,--wrap): the grant-copy
 * segments built for reads, writes and indirect pages (checked field by
 * field against tables written by hand), a segment the hypervisor refuses,
 * a grant-copy call that fails, segment bounds, the arena's wrap to page 0
 * and its wait for room, and connect's errors and cleanup.
 *
 * The fake hypervisor holds the guest's pages (gref g is page g of
 * guest[]) and really copies, so data must land where the driver reads it
 * and come back from where it wrote.  The vbd is the mock driver, which
 * records each request's iovecs: the arena addresses the copies must use.
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
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/loop.h"
#include "frontends/xen/xen-int.h"
#include "tests/unit/mock-driver.h"

/* After xen-ring.h (through xen-int.h), which sets the Xen interface. */
#include <xenevtchn.h>
#include <xengnttab.h>

#define PAGE	    BLKIF_PAGE_SIZE
#define SECT	    512u
#define GUEST_PAGES 64u
#define DOMID	    7u	  /* the frontend's */
#define RING_REF    0x99u /* the frontend's grant of its ring page */
#define REMOTE_PORT 5u	  /* the frontend's event channel */
#define LOCAL_PORT  17	  /* what binding it gives us */
#define MAX_COPIES  1024u
#define MAX_CALLS   64u
#define SLOTS	    32u /* ring order 0 */
#define NO_GREF	    UINT32_MAX

/* --- the fake hypervisor ------------------------------------------------- */

static xengnttab_handle *const FAKE_XGT = (xengnttab_handle *)0x1000;
static xenevtchn_handle *const FAKE_XCE = (xenevtchn_handle *)0x2000;

static struct {
	unsigned char *guest; /* GUEST_PAGES pages: gref g is page g */
	blkif_sring_t *sring; /* the ring page the frontend granted */
	int efd;	      /* what xenevtchn_fd returns */

	/* scripted failures: errno to fail with, 0: succeed */
	int open_gnttab_err, map_err, open_evtchn_err, bind_err, copy_errno;
	uint32_t refuse_gref; /* its copies get GNTST_bad_gntref; NO_GREF */

	/* calls seen */
	unsigned int gnttab_opens, gnttab_closes, evtchn_opens, evtchn_closes;
	unsigned int maps, unmaps, unbinds, notifies, unmasks;
	uint32_t map_count, map_domid, map_ref, map_prot;
	void *unmap_addr;
	uint32_t unmap_count, bind_domid, bind_port, unbind_port;
	uint32_t notify_port, unmask_port;

	/* every grant-copy call: its segments, as given */
	unsigned int nr_calls;
	unsigned int call_first[MAX_CALLS], call_count[MAX_CALLS];
	unsigned int nr_copies;
	xengnttab_grant_copy_segment_t copies[MAX_COPIES];
} hv;

xengnttab_handle *__wrap_xengnttab_open(struct xentoollog_logger *logger,
					unsigned int flags);
int __wrap_xengnttab_close(xengnttab_handle *xgt);
void *__wrap_xengnttab_map_domain_grant_refs(xengnttab_handle *xgt,
					     uint32_t count, uint32_t domid,
					     uint32_t *refs, int prot);
int __wrap_xengnttab_unmap(xengnttab_handle *xgt, void *start_address,
			   uint32_t count);
int __wrap_xengnttab_grant_copy(xengnttab_handle *xgt, uint32_t count,
				xengnttab_grant_copy_segment_t *segs);
xenevtchn_handle *__wrap_xenevtchn_open(struct xentoollog_logger *logger,
					unsigned int flags);
int __wrap_xenevtchn_close(xenevtchn_handle *xce);
int __wrap_xenevtchn_fd(xenevtchn_handle *xce);
xenevtchn_port_or_error_t
__wrap_xenevtchn_bind_interdomain(xenevtchn_handle *xce, uint32_t domid,
				  evtchn_port_t remote_port);
int __wrap_xenevtchn_unbind(xenevtchn_handle *xce, evtchn_port_t port);
int __wrap_xenevtchn_notify(xenevtchn_handle *xce, evtchn_port_t port);
xenevtchn_port_or_error_t __wrap_xenevtchn_pending(xenevtchn_handle *xce);
int __wrap_xenevtchn_unmask(xenevtchn_handle *xce, evtchn_port_t port);

xengnttab_handle *__wrap_xengnttab_open(struct xentoollog_logger *logger,
					unsigned int flags)
{
	if (hv.open_gnttab_err) {
		errno = hv.open_gnttab_err;
		return NULL;
	}
	hv.gnttab_opens++;
	return FAKE_XGT;
}

int __wrap_xengnttab_close(xengnttab_handle *xgt)
{
	assert_ptr_equal(xgt, FAKE_XGT);
	hv.gnttab_closes++;
	return 0;
}

void *__wrap_xengnttab_map_domain_grant_refs(xengnttab_handle *xgt,
					     uint32_t count, uint32_t domid,
					     uint32_t *refs, int prot)
{
	assert_ptr_equal(xgt, FAKE_XGT);
	hv.maps++;
	hv.map_count = count;
	hv.map_domid = domid;
	hv.map_ref = refs[0];
	hv.map_prot = (uint32_t)prot;
	if (hv.map_err) {
		errno = hv.map_err;
		return NULL;
	}
	return hv.sring;
}

int __wrap_xengnttab_unmap(xengnttab_handle *xgt, void *start_address,
			   uint32_t count)
{
	assert_ptr_equal(xgt, FAKE_XGT);
	hv.unmaps++;
	hv.unmap_addr = start_address;
	hv.unmap_count = count;
	return 0;
}

/* One segment as Xen does it: bounds first, then the copy. */
static int16_t hv_copy_one(const xengnttab_grant_copy_segment_t *s)
{
	const union xengnttab_copy_ptr *far;
	unsigned char *page;

	if (s->flags == GNTCOPY_source_gref)
		far = &s->source;
	else if (s->flags == GNTCOPY_dest_gref)
		far = &s->dest;
	else
		return GNTST_general_error;
	if (far->foreign.domid != DOMID)
		return GNTST_bad_domain;
	if (far->foreign.ref >= GUEST_PAGES ||
	    far->foreign.ref == hv.refuse_gref)
		return GNTST_bad_gntref;
	if (far->foreign.offset + s->len > PAGE)
		return GNTST_bad_copy_arg;
	page = hv.guest + (size_t)far->foreign.ref * PAGE + far->foreign.offset;
	if (s->flags == GNTCOPY_source_gref)
		memcpy(s->dest.virt, page, s->len);
	else
		memcpy(page, s->source.virt, s->len);
	return GNTST_okay;
}

int __wrap_xengnttab_grant_copy(xengnttab_handle *xgt, uint32_t count,
				xengnttab_grant_copy_segment_t *segs)
{
	assert_ptr_equal(xgt, FAKE_XGT);
	assert_true(count > 0);
	assert_true(hv.nr_calls < MAX_CALLS);
	assert_true(hv.nr_copies + count <= MAX_COPIES);
	hv.call_first[hv.nr_calls] = hv.nr_copies;
	hv.call_count[hv.nr_calls++] = count;
	memcpy(&hv.copies[hv.nr_copies], segs, count * sizeof(*segs));
	hv.nr_copies += count;
	if (hv.copy_errno) {
		errno = hv.copy_errno < 0 ? 0
					  : hv.copy_errno; /* -1: no errno */
		return -1;
	}
	for (uint32_t i = 0; i < count; i++)
		segs[i].status = hv_copy_one(&segs[i]);
	return 0;
}

xenevtchn_handle *__wrap_xenevtchn_open(struct xentoollog_logger *logger,
					unsigned int flags)
{
	if (hv.open_evtchn_err) {
		errno = hv.open_evtchn_err;
		return NULL;
	}
	hv.evtchn_opens++;
	return FAKE_XCE;
}

int __wrap_xenevtchn_close(xenevtchn_handle *xce)
{
	assert_ptr_equal(xce, FAKE_XCE);
	hv.evtchn_closes++;
	return 0;
}

int __wrap_xenevtchn_fd(xenevtchn_handle *xce)
{
	assert_ptr_equal(xce, FAKE_XCE);
	return hv.efd;
}

xenevtchn_port_or_error_t
__wrap_xenevtchn_bind_interdomain(xenevtchn_handle *xce, uint32_t domid,
				  evtchn_port_t remote_port)
{
	assert_ptr_equal(xce, FAKE_XCE);
	hv.bind_domid = domid;
	hv.bind_port = remote_port;
	if (hv.bind_err) {
		errno = hv.bind_err;
		return -1;
	}
	return LOCAL_PORT;
}

int __wrap_xenevtchn_unbind(xenevtchn_handle *xce, evtchn_port_t port)
{
	assert_ptr_equal(xce, FAKE_XCE);
	hv.unbinds++;
	hv.unbind_port = port;
	return 0;
}

int __wrap_xenevtchn_notify(xenevtchn_handle *xce, evtchn_port_t port)
{
	assert_ptr_equal(xce, FAKE_XCE);
	hv.notifies++;
	hv.notify_port = port;
	return 0;
}

/* The pending port is ours when the eventfd was signalled. */
xenevtchn_port_or_error_t __wrap_xenevtchn_pending(xenevtchn_handle *xce)
{
	uint64_t v;

	assert_ptr_equal(xce, FAKE_XCE);
	if (read(hv.efd, &v, sizeof(v)) != sizeof(v))
		return -1;
	return LOCAL_PORT;
}

int __wrap_xenevtchn_unmask(xenevtchn_handle *xce, evtchn_port_t port)
{
	assert_ptr_equal(xce, FAKE_XCE);
	hv.unmasks++;
	hv.unmask_port = port;
	return 0;
}

/* --- fixture: a vbd over the mock driver, a frontend, a connected ring ----- */

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct blkif_config cfg;
	struct xen_frontend_keys keys;
	struct td_xen_stats stats;
	struct xen_ring *ring;
	blkif_front_ring_t front;
	unsigned int fatals, dones;
	bool completed[MOCK_MAX_SEEN]; /* held requests completed */
	char *log_buf;
	size_t log_len;
	FILE *log;
} T;

static void on_fatal(void *opaque)
{
	T.fatals++;
}

static void on_done(void *opaque)
{
	assert_ptr_equal(opaque, &T);
	T.dones++;
}

static uint32_t connect_queue; /* the queue index connect_ring gives */

static int connect_ring(uint32_t max_indirect_segments)
{
	struct xen_ring_params p = {
		.queue = connect_queue,
		.vbd = T.vbd,
		.cfg = &T.cfg,
		.frontend_domid = DOMID,
		.keys = &T.keys,
		.fatal = on_fatal,
		.opaque = &T,
		.stats = &T.stats,
	};

	T.cfg.max_indirect_segments = max_indirect_segments;
	return xen_io_real.connect(&p, &T.ring);
}

static int setup(void **state)
{
	struct td_vbd_params vp = {.name = "xenio", .chain = "mock"};

	memset(&T, 0, sizeof(T));
	connect_queue = 0;
	memset(&hv, 0, sizeof(hv));
	hv.refuse_gref = NO_GREF;
	T.log = open_memstream(&T.log_buf, &T.log_len);
	td_log_set_stream(T.log);
	mock_reset();
	mock.size_sectors = 1u << 20; /* 512 MiB */
	hv.guest = aligned_alloc(PAGE, (size_t)GUEST_PAGES * PAGE);
	hv.sring = aligned_alloc(PAGE, PAGE);
	assert_true(hv.guest && hv.sring);
	memset(hv.guest, 0, (size_t)GUEST_PAGES * PAGE);
	SHARED_RING_INIT(hv.sring);
	FRONT_RING_INIT(&T.front, hv.sring, PAGE);
	hv.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(hv.efd >= 0);
	assert_int_equal(td_loop_create(&T.loop), 0);
	assert_int_equal(td_vbd_open(T.loop, mock_table, &vp, &T.vbd), 0);
	blkif_config_init(&T.cfg);
	T.keys.ring_order = 0;
	T.keys.nr_ring_refs = 1;
	T.keys.ring_refs[0] = RING_REF;
	T.keys.event_channel = REMOTE_PORT;
	T.keys.protocol = BLKIF_PROTOCOL_NATIVE;
	return 0;
}

static void run(int passes)
{
	while (passes--)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
}

/* Complete held request i (each once), and let the responses out. */
static void complete_held_err(unsigned int i, int err)
{
	assert_true(i < mock.nr_held);
	assert_false(T.completed[i]);
	T.completed[i] = true;
	mock_complete_held(i, err);
	run(4);
}

static void complete_held(unsigned int i)
{
	complete_held_err(i, 0);
}

/* Complete what is still held, disconnect, wait for the drain. */
static void disconnect(void)
{
	if (!T.ring)
		return;
	for (unsigned int i = 0; i < mock.nr_held; i++)
		if (!T.completed[i]) {
			T.completed[i] = true;
			mock_complete_held(i, 0);
		}
	xen_io_real.disconnect(T.ring, on_done, &T);
	T.ring = NULL;
	run(4);
	assert_int_equal(T.dones, 1);
}

static int teardown(void **state)
{
	disconnect();
	assert_int_equal(td_vbd_close(T.vbd), 0);
	td_loop_destroy(T.loop);
	close(hv.efd);
	free(hv.guest);
	free(hv.sring);
	td_log_set_stream(NULL);
	fclose(T.log);
	free(T.log_buf);
	return 0;
}

/* --- the frontend ------------------------------------------------------------ */

struct seg_spec {
	uint32_t gref;
	uint8_t first, last;
};

static void queue(uint8_t op, uint64_t id, uint64_t sector,
		  const struct seg_spec *segs, unsigned int nr)
{
	blkif_request_t *req = RING_GET_REQUEST(&T.front, T.front.req_prod_pvt);

	memset(req, 0, sizeof(*req));
	req->operation = op;
	req->id = id;
	req->sector_number = sector;
	req->nr_segments = (uint8_t)nr;
	for (unsigned int i = 0; i < nr; i++) {
		req->seg[i].gref = segs[i].gref;
		req->seg[i].first_sect = segs[i].first;
		req->seg[i].last_sect = segs[i].last;
	}
	T.front.req_prod_pvt++;
}

/* A request of nr whole pages from gref on. */
static void queue_pages(uint8_t op, uint64_t id, uint64_t sector, uint32_t gref,
			unsigned int nr)
{
	struct seg_spec segs[BLKIF_MAX_SEGMENTS_PER_REQUEST];

	for (unsigned int i = 0; i < nr; i++)
		segs[i] = (struct seg_spec){gref + i, 0, 7};
	queue(op, id, sector, segs, nr);
}

/* Push the requests and signal the event channel, as blkfront does. */
static void kick(void)
{
	uint64_t one = 1;
	int notify;

	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&T.front, notify);
	(void)notify;
	assert_int_equal(write(hv.efd, &one, sizeof(one)), sizeof(one));
	run(4);
}

static unsigned int pending_responses(void)
{
	return T.front.sring->rsp_prod - T.front.rsp_cons;
}

/* The status of the response to id among those not yet consumed. */
static int16_t status_of(uint64_t id)
{
	for (RING_IDX i = T.front.rsp_cons; i != T.front.sring->rsp_prod; i++) {
		blkif_response_t *rsp = RING_GET_RESPONSE(&T.front, i);

		if (rsp->id == id)
			return rsp->status;
	}
	fail_msg("no response to %llu", (unsigned long long)id);
	return 99;
}

static void consume_responses(void)
{
	T.front.rsp_cons = T.front.sring->rsp_prod;
}

static unsigned char *guest_page(uint32_t gref)
{
	return hv.guest + (size_t)gref * PAGE;
}

/* --- expectations ---------------------------------------------------------- */

/*
 * One grant-copy segment as it must be built: the direction, the guest's
 * page, offset and length, and our address as an offset into the arena.
 */
struct copy_row {
	uint16_t flags; /* GNTCOPY_source_gref: fetch; _dest_gref: store */
	uint32_t gref;
	uint16_t offset, len;
	size_t arena_off;
};

/* Segments [first, first + n) of the log against rows. */
static void expect_copies(unsigned int first, const struct copy_row *rows,
			  unsigned int n, const unsigned char *arena)
{
	for (unsigned int i = 0; i < n; i++) {
		const xengnttab_grant_copy_segment_t *s = &hv.copies[first + i];
		const struct copy_row *w = &rows[i];
		const union xengnttab_copy_ptr *far, *near;

		print_message("copy %u: gref %u\n", first + i, w->gref);
		assert_int_equal(s->flags, w->flags);
		if (w->flags == GNTCOPY_source_gref) {
			far = &s->source;
			near = &s->dest;
		} else {
			far = &s->dest;
			near = &s->source;
		}
		assert_int_equal(far->foreign.ref, w->gref);
		assert_int_equal(far->foreign.offset, w->offset);
		assert_int_equal(far->foreign.domid, DOMID);
		assert_int_equal(s->len, w->len);
		assert_ptr_equal(near->virt, arena + w->arena_off);
	}
}

static void fill(unsigned char *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seed * 37 + i * 11 + (i >> 8));
}

/* --- connect and disconnect ----------------------------------------------- */

static void test_connect_and_disconnect(void **state)
{
	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	assert_int_equal(hv.gnttab_opens, 1);
	assert_int_equal(hv.maps, 1);
	assert_int_equal(hv.map_count, 1);
	assert_int_equal(hv.map_domid, DOMID);
	assert_int_equal(hv.map_ref, RING_REF);
	assert_int_equal(hv.map_prot, PROT_READ | PROT_WRITE);
	assert_int_equal(hv.evtchn_opens, 1);
	assert_int_equal(hv.bind_domid, DOMID);
	assert_int_equal(hv.bind_port, REMOTE_PORT);
	assert_int_equal(T.fatals, 0);

	/* an event brings the ring's requests in and is unmasked */
	queue_pages(BLKIF_OP_WRITE, 1, 0, 3, 1);
	kick();
	assert_int_equal(hv.unmasks, 1);
	assert_int_equal(hv.unmask_port, LOCAL_PORT);
	assert_int_equal(status_of(1), BLKIF_RSP_OKAY);
	assert_true(hv.notifies >= 1);
	assert_int_equal(hv.notify_port, LOCAL_PORT);

	/* the ring is unmapped at once; the rest once drained, from the loop */
	xen_io_real.disconnect(T.ring, on_done, &T);
	T.ring = NULL;
	assert_int_equal(hv.unmaps, 1);
	assert_ptr_equal(hv.unmap_addr, hv.sring);
	assert_int_equal(hv.unmap_count, 1);
	assert_int_equal(T.dones, 0);
	run(4);
	assert_int_equal(T.dones, 1);
	assert_int_equal(hv.unmaps, 1); /* not twice */
	assert_int_equal(hv.unbinds, 1);
	assert_int_equal(hv.unbind_port, LOCAL_PORT);
	assert_int_equal(hv.evtchn_closes, 1);
	assert_int_equal(hv.gnttab_closes, 1);
}

/* Each library call that fails: its -errno, and what was undone. */
struct connect_row {
	const char *what;
	int *knob;
	int err;
	unsigned int unmaps, unbinds, evtchn_closes, gnttab_closes;
};

static void test_connect_errors(void **state)
{
	const struct connect_row rows[] = {
		{"gnttab open", &hv.open_gnttab_err, EACCES, 0, 0, 0, 0},
		{"map the ring", &hv.map_err, EINVAL, 0, 0, 0, 1},
		{"evtchn open", &hv.open_evtchn_err, ENOENT, 1, 0, 0, 1},
		{"bind", &hv.bind_err, ESRCH, 1, 0, 1, 1},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct connect_row *r = &rows[i];

		print_message("%s fails\n", r->what);
		hv.unmaps = hv.unbinds = hv.evtchn_closes = 0;
		hv.gnttab_closes = 0;
		*r->knob = r->err;
		T.ring = NULL;
		assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), -r->err);
		assert_null(T.ring);
		*r->knob = 0;
		assert_int_equal(hv.unmaps, r->unmaps);
		assert_int_equal(hv.unbinds, r->unbinds);
		assert_int_equal(hv.evtchn_closes, r->evtchn_closes);
		assert_int_equal(hv.gnttab_closes, r->gnttab_closes);
	}
	/* and then a connect works */
	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
}

/* --- the copies -------------------------------------------------------------- */

/*
 * Two writes taken in one pass: their segments go in one grant-copy call,
 * in ring order, from the guest's pages into consecutive arena pages (a
 * request reserves a page per segment; a segment sits at its in-page
 * offset), and the driver is given exactly those bytes.
 */
static void test_writes_fetched_in_one_call(void **state)
{
	static const struct seg_spec a[] = {{10, 0, 7}, {11, 2, 5}};
	static const struct seg_spec b[] = {{12, 1, 1}};
	static const struct copy_row want[] = {
		{GNTCOPY_source_gref, 10, 0, 4096, 0},
		{GNTCOPY_source_gref, 11, 1024, 2048, 4096 + 1024},
		{GNTCOPY_source_gref, 12, 512, 512, 8192 + 512},
	};
	const unsigned char *arena;

	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	fill(guest_page(10), PAGE, 1);
	fill(guest_page(11), PAGE, 2);
	fill(guest_page(12), PAGE, 3);
	queue(BLKIF_OP_WRITE, 1, 0, a, 2);
	queue(BLKIF_OP_WRITE, 2, 16, b, 1);
	kick();

	assert_int_equal(hv.nr_calls, 1);
	assert_int_equal(hv.call_count[0], 3);
	assert_int_equal(mock.nr_seen, 2);
	/* The first request's first segment opens the arena. */
	arena = mock.seen[0].iov[0].iov_base;
	assert_int_equal((uintptr_t)arena % PAGE, 0);
	expect_copies(0, want, 3, arena);

	/* what the driver got: 8 + 4 sectors in two iovecs, then 1 */
	assert_int_equal(mock.seen[0].op, TD_OP_WRITE);
	assert_int_equal(mock.seen[0].sector, 0);
	assert_int_equal(mock.seen[0].nr_sectors, 12);
	assert_int_equal(mock.seen[0].iovcnt, 2);
	assert_int_equal(mock.seen[0].iov[0].iov_len, 4096);
	assert_ptr_equal(mock.seen[0].iov[1].iov_base, arena + 5120);
	assert_int_equal(mock.seen[0].iov[1].iov_len, 2048);
	assert_int_equal(mock.seen[1].sector, 16);
	assert_int_equal(mock.seen[1].nr_sectors, 1);
	assert_int_equal(mock.seen[1].iovcnt, 1);
	assert_ptr_equal(mock.seen[1].iov[0].iov_base, arena + 8704);
	assert_int_equal(mock.seen[1].iov[0].iov_len, 512);
	/* ... holding the guest's bytes */
	assert_memory_equal(arena, guest_page(10), 4096);
	assert_memory_equal(arena + 5120, guest_page(11) + 1024, 2048);
	assert_memory_equal(arena + 8704, guest_page(12) + 512, 512);

	assert_int_equal(pending_responses(), 2);
	assert_int_equal(status_of(1), BLKIF_RSP_OKAY);
	assert_int_equal(status_of(2), BLKIF_RSP_OKAY);
	assert_int_equal(T.stats.copy_in_segs, 3);
	assert_int_equal(T.stats.copy_out_segs, 0);
	assert_int_equal(T.stats.copy_errors, 0);
}

/*
 * A read: nothing fetched; once the driver has filled the arena, one call
 * stores the segments into the guest's pages, and only those bytes.
 */
static void test_read_stored_after_completion(void **state)
{
	static const struct seg_spec segs[] = {
		{20, 0, 7}, {21, 0, 7}, {22, 4, 7}};
	static const struct copy_row want[] = {
		{GNTCOPY_dest_gref, 20, 0, 4096, 0},
		{GNTCOPY_dest_gref, 21, 0, 4096, 4096},
		{GNTCOPY_dest_gref, 22, 2048, 2048, 8192 + 2048},
	};
	unsigned char *arena;
	unsigned char zero[2048] = {0};

	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	mock.hold = true;
	queue(BLKIF_OP_READ, 3, 8, segs, 3);
	kick();
	assert_int_equal(hv.nr_calls, 0); /* nothing to fetch for a read */
	assert_int_equal(mock.nr_held, 1);
	assert_int_equal(mock.seen[0].op, TD_OP_READ);
	assert_int_equal(mock.seen[0].sector, 8);
	assert_int_equal(mock.seen[0].nr_sectors, 20);
	/* 20 and 21 adjacent: one iovec; 22 starts 2 KiB into its page */
	assert_int_equal(mock.seen[0].iovcnt, 2);
	arena = mock.seen[0].iov[0].iov_base;
	assert_int_equal(mock.seen[0].iov[0].iov_len, 8192);
	assert_ptr_equal(mock.seen[0].iov[1].iov_base, arena + 10240);
	assert_int_equal(mock.seen[0].iov[1].iov_len, 2048);
	assert_int_equal(pending_responses(), 0);

	/* the "disk" fills the buffers, then completes */
	fill(arena, 8192, 4);
	fill(arena + 10240, 2048, 5);
	complete_held(0);
	assert_int_equal(hv.nr_calls, 1);
	assert_int_equal(hv.call_count[0], 3);
	expect_copies(0, want, 3, arena);
	assert_memory_equal(guest_page(20), arena, 8192);
	assert_memory_equal(guest_page(22) + 2048, arena + 10240, 2048);
	assert_memory_equal(guest_page(22), zero, 2048); /* untouched */
	assert_int_equal(status_of(3), BLKIF_RSP_OKAY);
	assert_int_equal(T.stats.copy_out_segs, 3);
	assert_int_equal(T.stats.copy_in_segs, 0);
}

/*
 * The hypervisor refuses one segment of a write: that request alone is
 * answered BLKIF_RSP_ERROR and never reaches the driver; its neighbour in
 * the same call goes through, and the ring goes on.
 */
static void test_write_segment_refused(void **state)
{
	static const struct seg_spec a[] = {{10, 0, 7}, {11, 0, 7}};
	static const struct seg_spec b[] = {{12, 0, 7}};
	static const struct seg_spec c[] = {{13, 0, 7}, {14, 0, 3}};

	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	/* the first request of the call refused */
	hv.refuse_gref = 11;
	queue(BLKIF_OP_WRITE, 1, 0, a, 2);
	queue(BLKIF_OP_WRITE, 2, 64, b, 1);
	kick();
	assert_int_equal(hv.nr_calls, 1);
	assert_int_equal(hv.call_count[0], 3);
	assert_int_equal(pending_responses(), 2);
	assert_int_equal(status_of(1), BLKIF_RSP_ERROR);
	assert_int_equal(status_of(2), BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].sector, 64);
	assert_int_equal(T.stats.copy_errors, 1);
	assert_non_null(strstr(T.log_buf, "grant copy of page 11 refused"));
	consume_responses();

	/* the last of three refused (its second segment) */
	hv.refuse_gref = 14;
	queue(BLKIF_OP_WRITE, 3, 128, a, 2);
	queue(BLKIF_OP_WRITE, 4, 256, b, 1);
	queue(BLKIF_OP_WRITE, 5, 512, c, 2);
	kick();
	assert_int_equal(hv.nr_calls, 2);
	assert_int_equal(hv.call_count[1], 5);
	assert_int_equal(status_of(3), BLKIF_RSP_OKAY);
	assert_int_equal(status_of(4), BLKIF_RSP_OKAY);
	assert_int_equal(status_of(5), BLKIF_RSP_ERROR);
	assert_int_equal(mock.nr_seen, 3);
	assert_int_equal(mock.seen[1].sector, 128);
	assert_int_equal(mock.seen[2].sector, 256);
	assert_int_equal(T.stats.copy_errors, 2);
	consume_responses();

	/* the refused requests' pages were given back: all works on */
	hv.refuse_gref = NO_GREF;
	queue(BLKIF_OP_WRITE, 6, 1024, c, 2);
	kick();
	assert_int_equal(status_of(6), BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, 4);
	assert_int_equal(T.fatals, 0);
}

/* Two reads completed together: one store call; a refused page fails its
 * read alone. */
static void test_read_segment_refused(void **state)
{
	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	mock.hold = true;
	queue_pages(BLKIF_OP_READ, 1, 0, 30, 2);
	queue_pages(BLKIF_OP_READ, 2, 64, 32, 1);
	kick();
	assert_int_equal(mock.nr_held, 2);
	fill(mock.seen[1].iov[0].iov_base, PAGE, 9);
	hv.refuse_gref = 31;
	T.completed[0] = T.completed[1] = true;
	mock_complete_held(0, 0);
	mock_complete_held(1, 0);
	run(4);
	assert_int_equal(hv.nr_calls, 1);
	assert_int_equal(hv.call_count[0], 3);
	assert_int_equal(status_of(1), BLKIF_RSP_ERROR);
	assert_int_equal(status_of(2), BLKIF_RSP_OKAY);
	assert_memory_equal(guest_page(32), mock.seen[1].iov[0].iov_base, PAGE);
	assert_int_equal(T.stats.copy_errors, 1);
	assert_int_equal(T.stats.copy_out_segs, 3);
}

/* A read the disk fails is not stored: no copy, BLKIF_RSP_ERROR. */
static void test_failed_read_not_stored(void **state)
{
	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	mock.hold = true;
	queue_pages(BLKIF_OP_READ, 5, 0, 30, 1);
	kick();
	complete_held_err(0, -EIO);
	assert_int_equal(hv.nr_calls, 0);
	assert_int_equal(status_of(5), BLKIF_RSP_ERROR);
	assert_int_equal(T.stats.copy_out_segs, 0);
}

/*
 * The grant-copy call fails with -1 but leaves errno at 0: the requests
 * still fail (-EIO), never answered OK with nothing copied.
 */
static void test_copy_call_fails_without_errno(void **state)
{
	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	hv.copy_errno = -1;
	queue_pages(BLKIF_OP_WRITE, 1, 0, 1, 1);
	kick();
	assert_int_equal(hv.nr_calls, 1);
	assert_int_equal(status_of(1), BLKIF_RSP_ERROR);
	assert_int_equal(mock.nr_seen, 0);
	assert_non_null(strstr(T.log_buf,
			       "grant copy of 1 segments: Input/output error"));
	hv.copy_errno = 0;
}

/*
 * The grant-copy call itself fails (-1, errno): every request of that
 * call is answered BLKIF_RSP_ERROR; writes never reach the driver.
 */
static void test_copy_call_fails(void **state)
{
	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	hv.copy_errno = EFAULT;
	queue_pages(BLKIF_OP_WRITE, 1, 0, 1, 2);
	queue_pages(BLKIF_OP_WRITE, 2, 16, 3, 1);
	kick();
	assert_int_equal(hv.nr_calls, 1);
	assert_int_equal(status_of(1), BLKIF_RSP_ERROR);
	assert_int_equal(status_of(2), BLKIF_RSP_ERROR);
	assert_int_equal(mock.nr_seen, 0);
	assert_non_null(
		strstr(T.log_buf, "grant copy of 3 segments: Bad address"));
	consume_responses();

	/* a read whose store fails */
	mock.hold = true;
	queue_pages(BLKIF_OP_READ, 3, 0, 5, 1);
	kick();
	complete_held(0);
	assert_int_equal(hv.nr_calls, 2);
	assert_int_equal(status_of(3), BLKIF_RSP_ERROR);
	consume_responses();

	/* the next call works again */
	hv.copy_errno = 0;
	mock.hold = false;
	queue_pages(BLKIF_OP_WRITE, 4, 0, 1, 1);
	kick();
	assert_int_equal(status_of(4), BLKIF_RSP_OKAY);
	assert_int_equal(T.fatals, 0);
}

/*
 * first_sect..last_sect: sectors of the guest's page.  Accepted ones give
 * the copy's offset (first * 512) and length ((last - first + 1) * 512);
 * the others (first > last, or beyond sector 7) are answered
 * BLKIF_RSP_ERROR with no copy and no I/O.
 */
struct bounds_row {
	uint8_t first, last;
	bool ok;
	uint16_t offset, len;
};

static void test_segment_bounds(void **state)
{
	static const struct bounds_row rows[] = {
		{0, 7, true, 0, 4096},	 {0, 0, true, 0, 512},
		{7, 7, true, 3584, 512}, {3, 5, true, 1536, 1536},
		{1, 6, true, 512, 3072}, {5, 3, false, 0, 0},
		{0, 8, false, 0, 0},	 {8, 8, false, 0, 0},
		{7, 255, false, 0, 0},	 {255, 255, false, 0, 0},
	};

	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct bounds_row *r = &rows[i];
		struct seg_spec seg = {40, r->first, r->last};
		unsigned int calls = hv.nr_calls, seen = mock.nr_seen;
		const unsigned char *local;

		print_message("sectors %u..%u\n", r->first, r->last);
		queue(BLKIF_OP_WRITE, 100 + i, 0, &seg, 1);
		kick();
		if (!r->ok) {
			assert_int_equal(status_of(100 + i), BLKIF_RSP_ERROR);
			assert_int_equal(hv.nr_calls, calls);
			assert_int_equal(mock.nr_seen, seen);
			consume_responses();
			continue;
		}
		assert_int_equal(status_of(100 + i), BLKIF_RSP_OKAY);
		assert_int_equal(hv.nr_calls, calls + 1);
		assert_int_equal(hv.call_count[calls], 1);
		local = hv.copies[hv.call_first[calls]].dest.virt;
		assert_int_equal(
			hv.copies[hv.call_first[calls]].source.foreign.offset,
			r->offset);
		assert_int_equal(hv.copies[hv.call_first[calls]].len, r->len);
		/* the driver reads where the copy wrote */
		assert_int_equal(mock.nr_seen, seen + 1);
		assert_ptr_equal(mock.seen[seen].iov[0].iov_base, local);
		assert_int_equal(mock.seen[seen].iov[0].iov_len, r->len);
		assert_int_equal((uintptr_t)local % PAGE, r->offset);
		consume_responses();
	}
}

/*
 * An indirect write of 12 segments: its descriptor page is fetched with a
 * copy of its own (12 * 8 bytes from offset 0), then the 12 data pages in
 * one call.
 */
static void test_indirect_write(void **state)
{
	blkif_request_indirect_t *req;
	struct blkif_request_segment *desc;
	const unsigned char *arena;

	assert_int_equal(connect_ring(32), 0);
	desc = (struct blkif_request_segment *)guest_page(50);
	for (unsigned int i = 0; i < 12; i++)
		desc[i] = (struct blkif_request_segment){
			.gref = 2 + i, .first_sect = 0, .last_sect = 7};
	desc[11].last_sect = 3; /* the last one half a page */
	for (unsigned int i = 0; i < 12; i++)
		fill(guest_page(2 + i), PAGE, 20 + i);
	req = (blkif_request_indirect_t *)RING_GET_REQUEST(
		&T.front, T.front.req_prod_pvt);
	memset(req, 0, sizeof(*req));
	req->operation = BLKIF_OP_INDIRECT;
	req->indirect_op = BLKIF_OP_WRITE;
	req->nr_segments = 12;
	req->id = 77;
	req->sector_number = 256;
	req->indirect_grefs[0] = 50;
	T.front.req_prod_pvt++;
	kick();

	assert_int_equal(status_of(77), BLKIF_RSP_OKAY);
	assert_int_equal(hv.nr_calls, 2);
	/* the descriptors */
	assert_int_equal(hv.call_count[0], 1);
	assert_int_equal(hv.copies[0].flags, GNTCOPY_source_gref);
	assert_int_equal(hv.copies[0].source.foreign.ref, 50);
	assert_int_equal(hv.copies[0].source.foreign.offset, 0);
	assert_int_equal(hv.copies[0].source.foreign.domid, DOMID);
	assert_int_equal(hv.copies[0].len, 96);
	/* the data: 12 consecutive arena pages, one iovec */
	assert_int_equal(hv.call_count[1], 12);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].sector, 256);
	assert_int_equal(mock.seen[0].nr_sectors, 11 * 8 + 4);
	assert_int_equal(mock.seen[0].iovcnt, 1);
	assert_int_equal(mock.seen[0].iov[0].iov_len, 11 * PAGE + 2048);
	arena = mock.seen[0].iov[0].iov_base;
	for (unsigned int i = 0; i < 12; i++) {
		const struct copy_row row = {GNTCOPY_source_gref, 2 + i, 0,
					     i < 11 ? 4096 : 2048,
					     (size_t)i * PAGE};

		expect_copies(1 + i, &row, 1, arena);
		assert_memory_equal(arena + (size_t)i * PAGE, guest_page(2 + i),
				    row.len);
	}
}

/* The indirect page itself refused: the request fails, no data copied. */
static void test_indirect_page_refused(void **state)
{
	blkif_request_indirect_t *req;

	assert_int_equal(connect_ring(32), 0);
	hv.refuse_gref = 51;
	req = (blkif_request_indirect_t *)RING_GET_REQUEST(
		&T.front, T.front.req_prod_pvt);
	memset(req, 0, sizeof(*req));
	req->operation = BLKIF_OP_INDIRECT;
	req->indirect_op = BLKIF_OP_WRITE;
	req->nr_segments = 12;
	req->id = 78;
	req->indirect_grefs[0] = 51;
	T.front.req_prod_pvt++;
	kick();
	assert_int_equal(status_of(78), BLKIF_RSP_ERROR);
	assert_int_equal(hv.nr_calls, 1);
	assert_int_equal(mock.nr_seen, 0);
}

/*
 * The arena without indirect requests: 11 pages a request times 32 slots =
 * 352 pages.  A request of 5 pages, then 31 of 11, all held, fill pages
 * 0..345.  The 33rd request (11 pages) finds 6 pages at the end: it must
 * start again at page 0, which needs the first 11 pages free.  With only
 * the first request (pages 0..4) done it waits on the ring; once the second
 * (pages 5..15) is done it is taken, at page 0.
 */
static void test_arena_wraps_and_waits(void **state)
{
	const unsigned char *arena;

	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	mock.hold = true;
	queue_pages(BLKIF_OP_WRITE, 0, 0, 0, 5);
	for (unsigned int i = 1; i < SLOTS; i++)
		queue_pages(BLKIF_OP_WRITE, i, 0, 0, 11);
	kick();
	assert_int_equal(mock.nr_held, SLOTS);
	arena = mock.seen[0].iov[0].iov_base;
	assert_ptr_equal(mock.seen[1].iov[0].iov_base, arena + 5 * PAGE);
	assert_ptr_equal(mock.seen[31].iov[0].iov_base, arena + 335 * PAGE);
	assert_int_equal(mock.seen[31].iov[0].iov_len, 11 * PAGE);

	complete_held(0);
	assert_int_equal(status_of(0), BLKIF_RSP_OKAY);
	consume_responses();
	queue_pages(BLKIF_OP_WRITE, 32, 0, 20, 11);
	kick();
	assert_int_equal(mock.nr_seen, SLOTS); /* left on the ring */

	complete_held(1);
	assert_int_equal(status_of(1), BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_seen, SLOTS + 1);
	assert_ptr_equal(mock.seen[32].iov[0].iov_base, arena);
	assert_int_equal(hv.call_count[hv.nr_calls - 1], 11);
	assert_ptr_equal(hv.copies[hv.call_first[hv.nr_calls - 1]].dest.virt,
			 arena);
	assert_int_equal(
		hv.copies[hv.call_first[hv.nr_calls - 1]].source.foreign.ref,
		20);

	/* the ring's counters reach the server's stats when it closes */
	disconnect();
	assert_int_equal(T.stats.ring.data_waits, 1);
	assert_int_equal(T.stats.ring.reqs[BLKIF_OP_WRITE], SLOTS + 1);
}

/*
 * Ring 2 of a device: while connected it reports the requests it holds
 * and the events it took; once closed its counters are in the server's
 * ring and in queues[2] (not another queue), nr_queues covering it.
 */
static void test_queue_stats(void **state)
{
	struct blkif_queue_report q = {0};

	connect_queue = 2;
	assert_int_equal(connect_ring(BLKIF_NO_INDIRECT), 0);
	mock.hold = true;
	queue_pages(BLKIF_OP_WRITE, 0, 0, 0, 2);
	queue_pages(BLKIF_OP_READ, 1, 8, 4, 1);
	kick();
	queue_pages(BLKIF_OP_WRITE, 2, 16, 6, 1);
	kick();
	assert_int_equal(mock.nr_held, 3);
	xen_io_real.add_stats(T.ring, &q);
	assert_int_equal(q.in_flight, 3);
	assert_int_equal(q.kicks, 2);
	assert_int_equal(q.ring.reqs[BLKIF_OP_WRITE], 2);
	assert_int_equal(q.ring.reqs[BLKIF_OP_READ], 1);
	assert_int_equal(q.ring.segments, 4);
	complete_held(0);
	memset(&q, 0, sizeof(q));
	xen_io_real.add_stats(T.ring, &q);
	assert_int_equal(q.in_flight, 2);
	assert_int_equal(T.stats.nr_queues, 0); /* nothing closed yet */

	disconnect();
	assert_int_equal(T.stats.nr_queues, 3);
	assert_int_equal(T.stats.queues[2].ring.reqs[BLKIF_OP_WRITE], 2);
	assert_int_equal(T.stats.queues[2].ring.reqs[BLKIF_OP_READ], 1);
	assert_int_equal(T.stats.queues[2].kicks, 2);
	assert_int_equal(T.stats.queues[2].in_flight, 0);
	assert_int_equal(T.stats.queues[0].ring.reqs[BLKIF_OP_WRITE], 0);
	assert_int_equal(T.stats.queues[1].kicks, 0);
	assert_int_equal(T.stats.ring.reqs[BLKIF_OP_WRITE], 2);
	assert_int_equal(T.stats.ring.segments, 4);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_connect_and_disconnect),
		T(test_connect_errors),
		T(test_writes_fetched_in_one_call),
		T(test_read_stored_after_completion),
		T(test_write_segment_refused),
		T(test_read_segment_refused),
		T(test_failed_read_not_stored),
		T(test_copy_call_fails_without_errno),
		T(test_copy_call_fails),
		T(test_segment_bounds),
		T(test_indirect_write),
		T(test_indirect_page_refused),
		T(test_arena_wraps_and_waits),
		T(test_queue_stats),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
