/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_td-front-lib.c - the frontend library (tools/td-front-*.c) against
 * a backend written here by hand: a thread answers the negotiation on a
 * Unix socket and hands over memfds it keeps mapped, so the test reads
 * the very requests the library writes (how an I/O is cut, direct or
 * indirect, one notification per batch) and writes the responses.
 *
 * The oracles are tables: the requests blkfront makes of an I/O (from
 * FACTS.md: 1 MiB with 11 segments is 23 x 44 KiB + 12 KiB), pattern
 * words computed by tests/integration/shm-pattern.py, JSON paths.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "frontends/blkif/xen-ring.h"
#include "tools/td-front/td-front-lib.h"

#define PAGE	     TDF_PAGE_SIZE
#define KIB	     1024u
#define MIB	     (1024u * 1024u)
#define LINE	     (SHM_LINE_MAX + 1)
#define DISK_SECTORS (1u << 21) /* 1 GiB */
#define OFFER_FMT                                                      \
	"tapstripe-shm version=1 sectors=%u sector-size=512 info=%u "  \
	"feature-flush-cache=1 feature-discard=%u discard-secure=0%s " \
	"max-ring-page-order=%u max-data-pages=%u\n"

/* --- how blkfront cuts an I/O ------------------------------------------------ */

static const struct {
	uint32_t len, max_segments;
	uint32_t requests, first_len, last_len, last_segments;
	bool indirect;
} splits[] = {
	/* FACTS.md, "The blkif limits today" */
	{MIB, 11, 24, 44 * KIB, 12 * KIB, 3, false},
	{MIB, 32, 8, 128 * KIB, 128 * KIB, 32, true},
	{MIB, 256, 1, MIB, MIB, 256, true},
	{MIB, 4096, 1, MIB, MIB, 256, true},
	/* small ones are direct whatever the maximum */
	{4 * KIB, 4096, 1, 4 * KIB, 4 * KIB, 1, false},
	{512, 32, 1, 512, 512, 1, false},
	{44 * KIB, 32, 1, 44 * KIB, 44 * KIB, 11, false},
	{48 * KIB, 32, 1, 48 * KIB, 48 * KIB, 12, true},
	{46 * KIB, 11, 2, 44 * KIB, 2 * KIB, 1, false},
	{112 * KIB, 11, 3, 44 * KIB, 24 * KIB, 6, false},
	{16 * MIB, 4096, 1, 16 * MIB, 16 * MIB, 4096, true},
	{16 * MIB + 4 * KIB, 4096, 2, 16 * MIB, 4 * KIB, 1, false},
};

static void test_split(void **state)
{
	struct tdf_piece p[32];

	for (size_t i = 0; i < sizeof(splits) / sizeof(*splits); i++) {
		uint32_t n =
			tdf_split(splits[i].len, splits[i].max_segments, p, 32);

		if (n != splits[i].requests)
			fail_msg("case %zu: %u requests, expected %u", i, n,
				 splits[i].requests);
		assert_int_equal(p[0].len, splits[i].first_len);
		assert_int_equal(p[0].offset, 0);
		assert_int_equal(p[n - 1].len, splits[i].last_len);
		assert_int_equal(p[n - 1].segments, splits[i].last_segments);
		assert_int_equal(p[0].indirect,
				 splits[i].first_len > 11 * PAGE);
		assert_int_equal(p[n - 1].offset,
				 splits[i].len - splits[i].last_len);
		(void)splits[i].indirect;
	}
	/* Only as many as asked are written; all are counted. */
	assert_int_equal(tdf_split(MIB, 11, p, 2), 24);
	assert_int_equal(tdf_split(0, 11, p, 2), 0);
}

/* --- the hand-made backend ---------------------------------------------------- */

static struct {
	char dir[64], path[96];
	int listen_fd, sock;
	pthread_t thread;
	/* what to offer */
	uint32_t max_order, max_indirect, max_pages, info, discard;
	const char *answer; /* sent instead of "connected" when set */
	/* what it got and made */
	char connect[LINE];
	struct shm_connect_msg m;
	void *sring;
	unsigned char *pool;
	size_t ring_bytes, pool_bytes;
	int kick, notify;
	blkif_back_ring_t back;
	struct tdf_dev *dev;
	int done, last_err;
	uint32_t poll_us; /* td-front's --poll-us for open_dev */
	useconds_t delay; /* the responder thread's wait before answering */
} B;

static int memfd_of(size_t bytes, void **map)
{
	int fd = memfd_create("test", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
	*map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(*map != MAP_FAILED);
	return fd;
}

static void send_connected(void)
{
	struct shm_connected_msg c = {B.m.ring_page_order,
				      B.ring_bytes,
				      B.m.data_pages,
				      B.pool_bytes,
				      B.m.max_indirect_segments ?: 11,
				      1};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * SHM_NR_FDS)];
	} u = {0};
	char line[SHM_LINE_MAX];
	int fds[SHM_NR_FDS];
	struct iovec iov = {line, 0};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.b,
			     .msg_controllen = sizeof(u.b)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	fds[SHM_FD_RING] = memfd_of(B.ring_bytes, &B.sring);
	fds[SHM_FD_DATA] = memfd_of(B.pool_bytes, (void **)&B.pool);
	fds[SHM_FD_KICK] = B.kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fds[SHM_FD_NOTIFY] = B.notify = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	SHARED_RING_INIT((blkif_sring_t *)B.sring);
	BACK_RING_INIT(&B.back, (blkif_sring_t *)B.sring, B.ring_bytes);
	iov.iov_len = (size_t)shm_format_connected(&c, line, sizeof(line));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	assert_int_equal(sendmsg(B.sock, &msg, 0), (ssize_t)iov.iov_len);
	close(fds[SHM_FD_RING]);
	close(fds[SHM_FD_DATA]);
}

/* The backend's side of the negotiation, in a thread: tdf_open blocks. */
static void *backend_main(void *arg)
{
	char offer[LINE], ind[64] = "";
	ssize_t n, len = 0;

	B.sock = accept4(B.listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (B.max_indirect)
		snprintf(ind, sizeof(ind), " feature-max-indirect-segments=%u",
			 B.max_indirect);
	n = snprintf(offer, sizeof(offer), OFFER_FMT, DISK_SECTORS, B.info,
		     B.discard, ind, B.max_order, B.max_pages);
	if (send(B.sock, offer, (size_t)n, MSG_NOSIGNAL) != n)
		return NULL;
	while (!memchr(B.connect, '\n', (size_t)len) &&
	       (n = recv(B.sock, B.connect + len, LINE - 1 - (size_t)len, 0)) >
		       0)
		len += n;
	if (len <= 0)
		return NULL;
	if (shm_parse_connect(B.connect, (size_t)len - 1, &B.m, NULL, 0))
		return NULL;
	if (B.answer) {
		(void)!send(B.sock, B.answer, strlen(B.answer), MSG_NOSIGNAL);
		return NULL;
	}
	B.ring_bytes = (size_t)PAGE << B.m.ring_page_order;
	B.pool_bytes = (size_t)B.m.data_pages * PAGE;
	send_connected();
	return NULL;
}

static int setup(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(&B, 0, sizeof(B));
	B.sock = B.kick = B.notify = -1;
	B.max_order = 8;
	B.max_indirect = 4096;
	B.max_pages = 1u << 20;
	B.discard = 1;
	strcpy(B.dir, "/tmp/test_tdf.XXXXXX");
	assert_non_null(mkdtemp(B.dir));
	snprintf(B.path, sizeof(B.path), "%s/s", B.dir);
	strcpy(sa.sun_path, B.path);
	B.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(B.listen_fd, (struct sockaddr *)&sa, sizeof(sa)),
			 0);
	assert_int_equal(listen(B.listen_fd, 1), 0);
	return 0;
}

static int teardown(void **state)
{
	tdf_close(B.dev);
	if (B.sring)
		munmap(B.sring, B.ring_bytes);
	if (B.pool)
		munmap(B.pool, B.pool_bytes);
	if (B.kick >= 0)
		close(B.kick);
	if (B.notify >= 0)
		close(B.notify);
	if (B.sock >= 0)
		close(B.sock);
	close(B.listen_fd);
	unlink(B.path);
	rmdir(B.dir);
	return 0;
}

/* tdf_open against the backend thread; returns tdf_open's answer. */
static int open_dev(uint32_t order, uint32_t max_segments, uint32_t pages,
		    char *why)
{
	struct tdf_config cfg = {
		.path = B.path,
		.ring_order = order,
		.max_segments = max_segments,
		.data_pages = pages,
		.timeout_ms = 2000,
		.poll_us = B.poll_us,
	};
	char buf[TDF_WHY_MAX];
	int err;

	assert_int_equal(pthread_create(&B.thread, NULL, backend_main, NULL),
			 0);
	err = tdf_open(&cfg, &B.dev, why ? why : buf, TDF_WHY_MAX);
	assert_int_equal(pthread_join(B.thread, NULL), 0);
	if (err)
		B.dev = NULL;
	return err;
}

static uint64_t eventfd_take(int fd)
{
	uint64_t v = 0;

	return read(fd, &v, sizeof(v)) == sizeof(v) ? v : 0;
}

static void io_done(struct tdf_io *io, int err)
{
	B.done++;
	B.last_err = err;
}

/* Answer every request on the ring with status, one push. */
static unsigned int respond_all(int16_t status)
{
	unsigned int n = 0;
	uint64_t one = 1;
	int notify;

	while (B.back.req_cons != B.back.sring->req_prod) {
		blkif_request_t *req =
			RING_GET_REQUEST(&B.back, B.back.req_cons++);
		blkif_response_t *rsp =
			RING_GET_RESPONSE(&B.back, B.back.rsp_prod_pvt++);

		rsp->id = req->id;
		rsp->operation = req->operation;
		rsp->status = status;
		n++;
	}
	RING_PUSH_RESPONSES_AND_CHECK_NOTIFY(&B.back, notify);
	if (notify)
		assert_int_equal(write(B.notify, &one, sizeof(one)),
				 sizeof(one));
	return n;
}

static const blkif_request_t *request(unsigned int i)
{
	return RING_GET_REQUEST(&B.back, B.back.req_cons + i);
}

/* --- negotiation ---------------------------------------------------------------- */

static void test_negotiate(void **state)
{
	const struct tdf_info *info;

	assert_int_equal(open_dev(3, 256, 100, NULL), 0);
	info = tdf_get_info(B.dev);
	assert_int_equal(info->ring_order, 3);
	assert_int_equal(info->ring_slots, 256);
	assert_int_equal(info->max_segments, 256);
	assert_int_equal(info->data_pages, 100);
	assert_int_equal(info->indirect_pages, 256); /* 1 page per slot */
	assert_int_equal(info->size_bytes, (uint64_t)DISK_SECTORS * 512);
	assert_int_equal(info->backend_pid, getpid());
	assert_string_equal(B.connect,
			    "connect version=1 ring-page-order=3 "
			    "data-pages=356 max-indirect-segments=256\n");
	assert_non_null(tdf_page(B.dev, 99));
	assert_null(tdf_page(B.dev, 100));
}

/* Cut to the backend's offer, as blkfront does. */
static void test_negotiate_clamped(void **state)
{
	const struct tdf_info *info;

	B.max_order = 2;
	B.max_indirect = 0; /* no indirect */
	assert_int_equal(open_dev(4, 256, 8, NULL), 0);
	info = tdf_get_info(B.dev);
	assert_int_equal(info->ring_order, 2);
	assert_int_equal(info->max_segments, 11);
	assert_int_equal(info->indirect_pages, 0);
	assert_non_null(strstr(B.connect, "ring-page-order=2 data-pages=8 "
					  "max-indirect-segments=11\n"));
}

static void test_negotiate_failures(void **state)
{
	char why[TDF_WHY_MAX];

	/* 512 slots x 8 descriptor pages do not fit 1000 pages. */
	B.max_pages = 1000;
	assert_int_equal(open_dev(4, 4096, 8, why), -E2BIG);
	assert_non_null(strstr(why, "at most 1000"));
	teardown(state);
	setup(state);
	B.answer = "error EINVAL no way\n";
	assert_int_equal(open_dev(0, 32, 8, why), -EINVAL);
	assert_non_null(strstr(why, "no way"));
	teardown(state);
	setup(state);
	/* An answer about something else than what was asked. */
	B.answer = "connected ring-page-order=1 ring-bytes=8192 data-pages=40 "
		   "data-bytes=163840 max-indirect-segments=32\n";
	assert_int_equal(open_dev(0, 32, 8, why), -EPROTO);
	teardown(state);
	setup(state);
	B.answer = "nonsense\n";
	assert_int_equal(open_dev(0, 32, 8, why), -EPROTO);
	unlink(B.path);
	assert_int_equal(tdf_open(&(struct tdf_config){.path = B.path}, &B.dev,
				  why, sizeof(why)),
			 -ENOENT);
	B.dev = NULL;
}

/* --- requests ------------------------------------------------------------------ */

/* 1 MiB with 11 segments: 24 direct requests, one push, one kick. */
static void test_direct_split_on_the_ring(void **state)
{
	struct tdf_io io = {.op = TDF_OP_WRITE,
			    .offset = 3 * MIB,
			    .len = MIB,
			    .page = 2,
			    .cb = io_done};
	struct tdf_stats st;

	assert_int_equal(open_dev(0, 11, 300, NULL), 0);
	assert_int_equal(tdf_submit(B.dev, &io), 0);
	assert_int_equal(tdf_kick(B.dev), 24);
	assert_int_equal(eventfd_take(B.kick), 1);
	for (unsigned int i = 0; i < 24; i++) {
		const blkif_request_t *r = request(i);

		assert_int_equal(r->operation, BLKIF_OP_WRITE);
		assert_int_equal(r->nr_segments, i < 23 ? 11 : 3);
		assert_int_equal(r->sector_number,
				 (3 * MIB + i * 44 * KIB) / 512);
		assert_int_equal(r->seg[0].gref, 2 + i * 11);
		assert_int_equal(r->seg[0].first_sect, 0);
		assert_int_equal(r->seg[r->nr_segments - 1].last_sect, 7);
	}
	assert_int_equal(tdf_inflight(B.dev), 24);
	assert_int_equal(respond_all(BLKIF_RSP_OKAY), 24);
	assert_int_equal(tdf_wait(B.dev, 1000), 1);
	assert_int_equal(B.done, 1);
	assert_int_equal(B.last_err, 0);
	tdf_get_stats(B.dev, &st);
	assert_int_equal(st.requests, 24);
	assert_int_equal(st.indirect_requests, 0);
	assert_int_equal(st.segments, 256);
	assert_int_equal(st.pushes, 1);
	assert_int_equal(st.kicks, 1);
}

/* 1 MiB with 32 segments: 8 indirect requests with their descriptors. */
static void test_indirect_split_on_the_ring(void **state)
{
	struct tdf_io io = {.op = TDF_OP_READ,
			    .offset = 0,
			    .len = MIB,
			    .page = 0,
			    .cb = io_done};
	const struct tdf_info *info;

	assert_int_equal(open_dev(0, 32, 256, NULL), 0);
	info = tdf_get_info(B.dev);
	assert_int_equal(tdf_submit(B.dev, &io), 0);
	assert_int_equal(tdf_kick(B.dev), 8);
	for (unsigned int i = 0; i < 8; i++) {
		const blkif_request_indirect_t *r =
			(const blkif_request_indirect_t *)request(i);
		const struct blkif_request_segment *d;

		assert_int_equal(r->operation, BLKIF_OP_INDIRECT);
		assert_int_equal(r->indirect_op, BLKIF_OP_READ);
		assert_int_equal(r->nr_segments, 32);
		assert_int_equal(r->sector_number, i * 256);
		/* Its descriptor page lies after the caller's pages. */
		assert_true(r->indirect_grefs[0] >= info->data_pages);
		d = (const void *)(B.pool +
				   (size_t)r->indirect_grefs[0] * PAGE);
		for (unsigned int s = 0; s < 32; s++) {
			assert_int_equal(d[s].gref, i * 32 + s);
			assert_int_equal(d[s].first_sect, 0);
			assert_int_equal(d[s].last_sect, 7);
		}
	}
	respond_all(BLKIF_RSP_OKAY);
	assert_int_equal(tdf_wait(B.dev, 1000), 1);
}

/* A sub-page tail, a flush and a discard; errors reach the callback. */
static void test_tail_flush_discard_errors(void **state)
{
	struct tdf_io a = {.op = TDF_OP_READ,
			   .offset = 512,
			   .len = 4608,
			   .page = 0,
			   .cb = io_done};
	struct tdf_io f = {.op = TDF_OP_FLUSH, .cb = io_done};
	struct tdf_io d = {
		.op = TDF_OP_DISCARD, .offset = MIB, .len = MIB, .cb = io_done};
	const blkif_request_discard_t *dr;

	assert_int_equal(open_dev(0, 32, 4, NULL), 0);
	assert_int_equal(tdf_submit(B.dev, &a), 0);
	assert_int_equal(tdf_submit(B.dev, &f), 0);
	assert_int_equal(tdf_submit(B.dev, &d), 0);
	assert_int_equal(tdf_kick(B.dev), 3);
	assert_int_equal(request(0)->nr_segments, 2);
	assert_int_equal(request(0)->sector_number, 1);
	assert_int_equal(request(0)->seg[1].last_sect, 0); /* 512 bytes */
	assert_int_equal(request(1)->operation, BLKIF_OP_FLUSH_DISKCACHE);
	assert_int_equal(request(1)->nr_segments, 0);
	dr = (const blkif_request_discard_t *)request(2);
	assert_int_equal(dr->operation, BLKIF_OP_DISCARD);
	assert_int_equal(dr->sector_number, 2048);
	assert_int_equal(dr->nr_sectors, 2048);
	respond_all(BLKIF_RSP_EOPNOTSUPP);
	assert_int_equal(tdf_wait(B.dev, 1000), 3);
	assert_int_equal(B.last_err, -EOPNOTSUPP);
}

/* What the library refuses before it reaches the ring. */
static void test_submit_checks(void **state)
{
	struct tdf_io io = {.op = TDF_OP_READ, .len = 4096, .cb = io_done};

	B.info = SHM_INFO_READONLY;
	B.discard = 0;
	assert_int_equal(open_dev(0, 32, 4, NULL), 0);
	io.offset = 100;
	assert_int_equal(tdf_submit(B.dev, &io), -EINVAL);
	io.offset = (uint64_t)DISK_SECTORS * 512 - 512;
	assert_int_equal(tdf_submit(B.dev, &io), -ERANGE);
	io.offset = UINT64_MAX - 511;
	assert_int_equal(tdf_submit(B.dev, &io), -ERANGE);
	io.offset = 0;
	io.page = 3;
	io.len = 8192;
	assert_int_equal(tdf_submit(B.dev, &io), -EINVAL); /* past the pages */
	io.page = 0;
	io.op = TDF_OP_WRITE;
	assert_int_equal(tdf_submit(B.dev, &io), -EROFS);
	io.op = TDF_OP_DISCARD;
	assert_int_equal(tdf_submit(B.dev, &io), -EOPNOTSUPP);
	io.op = TDF_OP_READ;
	io.len = 0;
	assert_int_equal(tdf_submit(B.dev, &io), -EINVAL);
	assert_int_equal(tdf_kick(B.dev), 0);
}

/* More requests than slots: the rest waits for responses, in order. */
static void test_ring_full(void **state)
{
	struct tdf_io io[40];
	struct tdf_stats st;

	assert_int_equal(open_dev(0, 11, 40, NULL), 0);
	for (unsigned int i = 0; i < 40; i++) {
		io[i] = (struct tdf_io){.op = TDF_OP_READ,
					.offset = i * PAGE,
					.len = PAGE,
					.page = i,
					.cb = io_done};
		assert_int_equal(tdf_submit(B.dev, &io[i]), 0);
	}
	assert_int_equal(tdf_kick(B.dev), 32);
	assert_int_equal(respond_all(BLKIF_RSP_OKAY), 32);
	assert_int_equal(tdf_wait(B.dev, 1000), 32);
	assert_int_equal(tdf_kick(B.dev), 8);
	/* The backend has not re-armed req_event: no second kick. */
	assert_int_equal(eventfd_take(B.kick), 1);
	tdf_get_stats(B.dev, &st);
	assert_int_equal(st.pushes, 2);
	assert_int_equal(st.kicks, 1);
	assert_int_equal(request(0)->sector_number, 32 * 8);
	respond_all(BLKIF_RSP_OKAY);
	assert_int_equal(tdf_wait(B.dev, 1000), 8);
	assert_int_equal(B.done, 40);
}

/*
 * One read at QD 1.  late: td-front waits 30 ms for it in vain (a backend
 * slower than the budget; a timed-out poll lasts at least that, however
 * loaded the host), then it is answered and taken without a wait;
 * otherwise answered before td-front waits.
 */
static void one_read(bool late)
{
	struct tdf_io io = {.op = TDF_OP_READ, .len = PAGE, .cb = io_done};
	int done = B.done;

	assert_int_equal(tdf_submit(B.dev, &io), 0);
	tdf_kick(B.dev);
	if (late) {
		assert_int_equal(tdf_wait(B.dev, 30), 0);
		respond_all(BLKIF_RSP_OKAY);
		assert_int_equal(tdf_poll(B.dev), 1);
	} else {
		respond_all(BLKIF_RSP_OKAY);
		assert_int_equal(tdf_wait(B.dev, 5000), 1);
	}
	eventfd_take(B.notify); /* no stale wake-up for the next wait */
	assert_int_equal(B.done, done + 1);
}

static uint32_t window_us(void)
{
	struct tdf_stats st;

	tdf_get_stats(B.dev, &st);
	return st.poll_window_us;
}

/*
 * --poll-us adapts as tapdisk's window does: waits longer than the
 * budget halve the spin down to 0 (td-front then sleeps at once and
 * leaves its CPU to the backend), answers within it grow it again.
 */
static void test_poll_window_adapts(void **state)
{
	unsigned int i;

	B.poll_us = 10000;
	assert_int_equal(open_dev(0, 11, 4, NULL), 0);
	assert_int_equal(window_us(), 10000);
	for (i = 0; i < 3; i++)
		one_read(true);
	assert_int_equal(window_us(), 10000 >> 3);
	for (i = 0; i < 11; i++)
		one_read(true);
	assert_int_equal(window_us(), 0);
	/* An answer found at once grows it from 10 us: one of a few, even
	 * on a host so loaded that a wait of a few us can last 10 ms. */
	for (i = 0; i < 10 && !window_us(); i++)
		one_read(false);
	assert_true(window_us() >= 10);
}

/* Without --poll-us td-front never spins. */
static void test_poll_off_no_window(void **state)
{
	assert_int_equal(open_dev(0, 11, 4, NULL), 0);
	one_read(false);
	one_read(true);
	assert_int_equal(window_us(), 0);
}

/* A response that answers nothing breaks the device, not the process. */
static void test_bogus_response(void **state)
{
	struct tdf_io io = {.op = TDF_OP_READ, .len = PAGE, .cb = io_done};
	blkif_response_t *rsp;
	int notify;

	assert_int_equal(open_dev(0, 11, 1, NULL), 0);
	assert_int_equal(tdf_submit(B.dev, &io), 0);
	assert_int_equal(tdf_kick(B.dev), 1);
	rsp = RING_GET_RESPONSE(&B.back, B.back.rsp_prod_pvt++);
	rsp->id = 31; /* a free slot */
	RING_PUSH_RESPONSES_AND_CHECK_NOTIFY(&B.back, notify);
	assert_true(notify);
	assert_int_equal(tdf_poll(B.dev), -EPROTO);
	assert_int_equal(tdf_submit(B.dev, &io), -EPROTO);
	assert_int_equal(B.done, 0);
}

/* The backend goes away with a request in flight. */
static void test_backend_gone(void **state)
{
	struct tdf_io io = {.op = TDF_OP_READ, .len = PAGE, .cb = io_done};

	assert_int_equal(open_dev(0, 11, 1, NULL), 0);
	assert_int_equal(tdf_submit(B.dev, &io), 0);
	assert_int_equal(tdf_kick(B.dev), 1);
	assert_int_equal(tdf_wait(B.dev, 0), 0); /* nothing yet */
	close(B.sock);
	B.sock = -1;
	assert_int_equal(tdf_wait(B.dev, 1000), -ECONNRESET);
}

/* --- patterns ------------------------------------------------------------------- */

/* Words computed by tests/integration/shm-pattern.py. */
static const struct {
	uint64_t offset, generation, seed, word;
} words[] = {
	{0, 0, 0, UINT64_C(0xe220a8397b1dcdaf)},
	{512, 1, 1, UINT64_C(0x496965039ee05843)},
	{1048576, 7, 12345, UINT64_C(0x8c135e0be6fc8eae)},
};

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void test_pattern(void **state)
{
	unsigned char buf[3 * 512];
	struct tdf_mismatch m;

	for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
		assert_int_equal(tdf_pattern_word(words[i].offset,
						  words[i].generation,
						  words[i].seed),
				 words[i].word);
	tdf_pattern_fill(buf, 4096, sizeof(buf), 3, 9);
	assert_memory_equal(buf, "TDFRONT1", 8);
	/* The layout, byte by byte: offset, generation, seed, w .. w + 59. */
	assert_int_equal(le64(buf + 8), 4096);
	assert_int_equal(le64(buf + 16), 3);
	assert_int_equal(le64(buf + 24), 9);
	assert_int_equal(le64(buf + 32), tdf_pattern_word(4096, 3, 9));
	assert_int_equal(le64(buf + 504), tdf_pattern_word(4096, 3, 9) + 59);
	assert_int_equal(le64(buf + 512 + 8), 4608);
	assert_int_equal(tdf_pattern_check(buf, 4096, sizeof(buf), 3, 9, &m),
			 0);
	/* Another generation, seed or place is caught, and said. */
	assert_int_equal(tdf_pattern_check(buf, 4096, sizeof(buf), 4, 9, &m),
			 -EILSEQ);
	assert_int_equal(m.offset, 4096);
	assert_int_equal(m.found_generation, 3);
	assert_int_equal(tdf_pattern_check(buf, 4096, sizeof(buf), 3, 8, &m),
			 -EILSEQ);
	assert_int_equal(tdf_pattern_check(buf, 4608, sizeof(buf), 3, 9, &m),
			 -EILSEQ);
	assert_int_equal(m.found_offset, 4096);
	/* One byte of the last sector. */
	buf[2 * 512 + 300] ^= 1;
	assert_int_equal(tdf_pattern_check(buf, 4096, sizeof(buf), 3, 9, &m),
			 -EILSEQ);
	assert_int_equal(m.offset, 4096 + 1024);
	assert_false(m.bad_magic);
	memset(buf, 0, 512);
	assert_int_equal(tdf_pattern_check(buf, 4096, sizeof(buf), 3, 9, &m),
			 -EILSEQ);
	assert_true(m.bad_magic);
}

/* --- the JSON reader --------------------------------------------------------------- */

static void test_json(void **state)
{
	static const char js[] =
		"{\"a\": 1, \"s\": \"x\\\"y}\", \"n\": null, \"t\": true,\n"
		" \"neg\": -3, \"f\": 1.5, \"o\": {\"x\": [1, {\"q\": 22}]},\n"
		" \"big\": 18446744073709551615, \"e\": {}, \"l\": []}";
	static const struct {
		const char *path;
		int err;
		uint64_t value;
	} cases[] = {
		{"a", 0, 1},	       {"o.x.0", 0, 1},
		{"o.x.1.q", 0, 22},    {"big", 0, UINT64_MAX},
		{"o.x.2", -ENOENT, 0}, {"o.y", -ENOENT, 0},
		{"n", -EPROTO, 0},     {"n.z", -ENOENT, 0},
		{"neg", -EPROTO, 0},   {"f", -EPROTO, 0},
		{"s", -EPROTO, 0},     {"e.x", -ENOENT, 0},
		{"l.0", -ENOENT, 0},   {"zz", -ENOENT, 0},
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		int err = tdf_json_u64(js, cases[i].path, &v);

		if (err != cases[i].err)
			fail_msg("%s: %d, expected %d", cases[i].path, err,
				 cases[i].err);
		if (!err)
			assert_int_equal(v, cases[i].value);
	}
	assert_int_equal(tdf_json_u64("{\"a\": 18446744073709551616}", "a", &v),
			 -EPROTO);
	assert_int_equal(tdf_json_u64("{\"a\" 1}", "a", &v), -EPROTO);
	assert_int_equal(tdf_json_u64("{\"b\": {\"c\": 1 \"a\": 2}", "a", &v),
			 -EPROTO);
	assert_int_equal(tdf_json_u64("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]"
				      "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
				      "a", &v),
			 -ENOENT);
	assert_int_equal(tdf_json_u64("{\"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
				      "[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
				      "]]]]]]]], \"a\": 1}",
				      "a", &v),
			 -EPROTO);
	assert_int_equal(tdf_json_u64("", "a", &v), -ENOENT);
	assert_int_equal(tdf_json_u64("{\"a\": \"unterminated", "b", &v),
			 -EPROTO);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		TEST(test_negotiate),
		TEST(test_negotiate_clamped),
		TEST(test_negotiate_failures),
		TEST(test_direct_split_on_the_ring),
		TEST(test_indirect_split_on_the_ring),
		TEST(test_tail_flush_discard_errors),
		TEST(test_submit_checks),
		TEST(test_ring_full),
		TEST(test_bogus_response),
		TEST(test_backend_gone),
		TEST(test_poll_window_adapts),
		TEST(test_poll_off_no_window),
		cmocka_unit_test(test_pattern),
		cmocka_unit_test(test_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
