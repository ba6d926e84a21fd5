/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_shm.c - the shm transport (tapdisk/shm.c, shm-conn.c), driven by
 * frontends written here by hand over socketpairs: the negotiation, the
 * ring over the memory it hands out, hostile messages, frontends that
 * leave with I/O in flight, several frontends on one vbd, shutdown.
 *
 * The loop runs pass by pass.  "Frees everything" is checked from the
 * outside: the process's open descriptors and its mappings of the
 * backend's memfds (/proc/self/fd, /proc/self/maps) come back to what
 * they were, and the data pool stays mapped until the vbd has finished
 * with it.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "drivers/drivers.h"
#include "common/log.h"
#include "frontends/shm/shm-int.h"
#include "tapdisk/stats-format.h"
#include "tests/unit/mock-driver.h"

#define PAGE	       SHM_PAGE_SIZE
#define NULL_SECTORS   (64u << 11) /* null:size=64M */
#define MAX_PASSES     4096
#define SLOW_PASS_MS   5
#define DATA_MEMFD     "tapstripe-shm-data"
#define RING_MEMFD     "tapstripe-shm-ring"
#define LINE	       (SHM_LINE_MAX + 1)
#define GOOD_CONNECT   "connect version=1 ring-page-order=0 data-pages=64\n"
#define ORDER3_CONNECT "connect version=1 ring-page-order=3 data-pages=4\n"
#define NO_INDIRECT_CONNECT                                 \
	"connect version=1 ring-page-order=0 data-pages=4 " \
	"max-indirect-segments=12\n"
#define TEST_TIMEOUT   20 /* ms: handshake deadline in the timeout test */
#define SEGS_PER_IND   512u
#define MAX_SEGS_ASKED 32u

static const struct td_driver_ops *const table[] = {
	&td_null_ops,
	&mock_ops,
	&td_sort_ops,
	NULL,
};

/* A frontend written by hand. */
struct front {
	int sock;
	int kick, notify;
	void *sring;
	size_t ring_bytes;
	unsigned char *pool;
	size_t pool_bytes;
	blkif_front_ring_t front;
	struct shm_backend_msg offer;
};

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_shm_server *srv;
	struct td_shm_params params;
	struct blkif_config cfg;
	char dir[64];
	int done;
	char *log_buf;
	size_t log_len;
	FILE *log;
	int fds_before;
} T;

/* --- the process's resources ------------------------------------------------ */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own */
}

/* Mappings of the memfd called name, the frontend's and the backend's. */
static int count_maps(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, name) != NULL;
	fclose(f);
	return n;
}

/* --- fixture ---------------------------------------------------------------- */

static int setup(void **state)
{
	memset(&T, 0, sizeof(T));
	mock_reset();
	T.fds_before = count_fds();
	T.log = open_memstream(&T.log_buf, &T.log_len);
	assert_non_null(T.log);
	td_log_set_stream(T.log);
	assert_int_equal(td_loop_create(&T.loop), 0);
	blkif_config_init(&T.cfg);
	T.cfg.max_ring_order = BLKIF_MAX_RING_ORDER;
	T.params.blkif = &T.cfg;
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
	td_frontend_destroy(td_shm_server_frontend(T.srv));
	if (T.vbd)
		assert_int_equal(td_vbd_close(T.vbd), 0);
	td_loop_destroy(T.loop);
	td_log_set_stream(NULL);
	fclose(T.log);
	free(T.log_buf);
	if (T.dir[0]) {
		char path[128];

		snprintf(path, sizeof(path), "%s/s.sock", T.dir);
		unlink(path);
		rmdir(T.dir);
	}
	/* Every descriptor the test or the server opened is closed. */
	assert_int_equal(count_fds(), T.fds_before);
	assert_int_equal(count_maps(DATA_MEMFD), 0);
	assert_int_equal(count_maps(RING_MEMFD), 0);
	return 0;
}

static void start(const char *chain)
{
	struct td_vbd_params p = {.name = "shm", .chain = chain};

	assert_int_equal(td_vbd_open(T.loop, table, &p, &T.vbd), 0);
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, &T.params, &T.srv),
			 0);
}

static struct td_shm_stats stats(void)
{
	struct td_shm_stats s;

	td_shm_server_get_stats(T.srv, &s);
	return s;
}

static bool logged(const char *text)
{
	fflush(T.log);
	return T.log_buf && strstr(T.log_buf, text);
}

/* --- the hand-made frontend --------------------------------------------------- */

/*
 * Read one line without waiting (the loop has run), with its descriptors
 * when fds is not NULL.  Returns its length, 0 at EOF, -EAGAIN.
 */
static int read_line(struct front *f, char *buf, int *fds, unsigned int *nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * SHM_NR_FDS * SHM_MAX_QUEUES)];
	} u;
	struct iovec iov = {buf, LINE - 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.b,
			     .msg_controllen = sizeof(u.b)};
	struct cmsghdr *c;
	ssize_t n = recvmsg(f->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		unsigned int k = (unsigned int)((c->cmsg_len - CMSG_LEN(0)) /
						sizeof(int));

		assert_non_null(fds);
		memcpy(fds, CMSG_DATA(c), k * sizeof(int));
		*nfds = k;
	}
	return (int)n;
}

/* Attach a frontend on a socketpair and take the offer. */
static int attach(struct front *f)
{
	int sv[2], err;
	char line[LINE];

	memset(f, 0, sizeof(*f));
	f->kick = f->notify = -1;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	f->sock = sv[0];
	err = td_shm_server_add_client(T.srv, sv[1], "test");
	if (err)
		return err;
	assert_true(read_line(f, line, NULL, NULL) > 0);
	assert_int_equal(
		shm_parse_backend(line, strlen(line) - 1, &f->offer, NULL, 0),
		0);
	return 0;
}

static void send_text(struct front *f, const char *text, size_t len)
{
	assert_int_equal(send(f->sock, text, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* The backend answered "error NAME ..." and closed the connection. */
static void expect_refused(struct front *f, const char *name)
{
	char line[LINE], want[32];

	run();
	snprintf(want, sizeof(want), "error %s", name);
	assert_true(read_line(f, line, NULL, NULL) > 0);
	if (strncmp(line, want, strlen(want)))
		fail_msg("got '%s', expected '%s ...'", line, want);
	assert_int_equal(read_line(f, line, NULL, NULL), 0);
}

static void expect_closed(struct front *f)
{
	char line[LINE];

	run();
	assert_int_equal(read_line(f, line, NULL, NULL), 0);
}

static void *map(int fd, size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	assert_true(p != MAP_FAILED);
	close(fd);
	return p;
}

/* Negotiate order, pages (and max-indirect-segments when max_ind). */
static void connect_front(struct front *f, uint32_t order, uint32_t pages,
			  uint32_t max_ind)
{
	struct shm_connect_msg m = {1, order, pages, max_ind, 1};
	struct shm_connected_msg c;
	int fds[SHM_NR_FDS];
	unsigned int nfds = 0;
	char line[LINE];
	int n = shm_format_connect(&m, line, sizeof(line));

	send_text(f, line, (size_t)n);
	run();
	n = read_line(f, line, fds, &nfds);
	assert_true(n > 0);
	assert_int_equal(nfds, SHM_NR_FDS);
	assert_int_equal(shm_parse_connected(line, (size_t)n - 1, &c, NULL, 0),
			 0);
	assert_int_equal(c.ring_page_order, order);
	assert_int_equal(c.data_pages, pages);
	f->ring_bytes = (size_t)c.ring_bytes;
	f->pool_bytes = (size_t)c.data_bytes;
	f->sring = map(fds[SHM_FD_RING], f->ring_bytes);
	f->pool = map(fds[SHM_FD_DATA], f->pool_bytes);
	f->kick = fds[SHM_FD_KICK];
	f->notify = fds[SHM_FD_NOTIFY];
	/* Initialised by the backend. */
	assert_int_equal(((blkif_sring_t *)f->sring)->req_event, 1);
	FRONT_RING_INIT(&f->front, (blkif_sring_t *)f->sring, f->ring_bytes);
}

static void front_close(struct front *f)
{
	if (f->sock >= 0)
		close(f->sock);
	if (f->sring)
		munmap(f->sring, f->ring_bytes);
	if (f->pool)
		munmap(f->pool, f->pool_bytes);
	if (f->kick >= 0)
		close(f->kick);
	if (f->notify >= 0)
		close(f->notify);
	memset(f, 0, sizeof(*f));
	f->sock = f->kick = f->notify = -1;
}

/* A direct request of nseg pages from page. */
static void req_rw(struct front *f, uint8_t op, uint64_t id, uint64_t sector,
		   unsigned int nseg, uint32_t page)
{
	blkif_request_t *r =
		RING_GET_REQUEST(&f->front, f->front.req_prod_pvt++);

	memset(r, 0, sizeof(*r));
	r->operation = op;
	r->id = id;
	r->nr_segments = (uint8_t)nseg;
	r->sector_number = sector;
	for (unsigned int i = 0; i < nseg; i++)
		r->seg[i] = (struct blkif_request_segment){page + i, 0, 7};
}

/* An indirect request of nseg pages from data, descriptors at page desc. */
static void req_ind(struct front *f, uint8_t op, uint64_t id, uint32_t nseg,
		    uint32_t desc, uint32_t data)
{
	blkif_request_indirect_t *r =
		(blkif_request_indirect_t *)RING_GET_REQUEST(
			&f->front, f->front.req_prod_pvt++);
	struct blkif_request_segment *d =
		(void *)(f->pool + (size_t)desc * PAGE);

	memset(r, 0, sizeof(*r));
	r->operation = BLKIF_OP_INDIRECT;
	r->indirect_op = op;
	r->id = id;
	r->nr_segments = (uint16_t)nseg;
	for (uint32_t p = 0; p * SEGS_PER_IND < nseg; p++)
		r->indirect_grefs[p] = desc + p;
	for (uint32_t i = 0; i < nseg; i++)
		d[i] = (struct blkif_request_segment){data + i, 0, 7};
}

/* Push, and notify as blkfront does. */
static void kick(struct front *f)
{
	uint64_t one = 1;
	int notify;

	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&f->front, notify);
	if (notify)
		assert_int_equal(write(f->kick, &one, sizeof(one)),
				 sizeof(one));
	run();
}

static unsigned int unread(const struct front *f)
{
	return f->front.sring->rsp_prod - f->front.rsp_cons;
}

static void expect_rsp(struct front *f, uint64_t id, int16_t status)
{
	blkif_response_t *rsp;

	assert_true(unread(f) > 0);
	rsp = RING_GET_RESPONSE(&f->front, f->front.rsp_cons++);
	assert_int_equal(rsp->id, id);
	assert_int_equal(rsp->status, status);
}

/* Was the notify eventfd signalled?  Clears it. */
static bool notified(struct front *f)
{
	uint64_t v;

	return read(f->notify, &v, sizeof(v)) == sizeof(v);
}

/* --- negotiation ---------------------------------------------------------------- */

static void test_offer(void **state)
{
	struct front f;

	start("null:size=64M");
	assert_int_equal(attach(&f), 0);
	assert_int_equal(f.offer.version, 1);
	assert_int_equal(f.offer.sectors, NULL_SECTORS);
	assert_int_equal(f.offer.sector_size, 512);
	assert_int_equal(f.offer.info, 0);
	assert_true(f.offer.flush_cache);
	assert_true(f.offer.discard);
	assert_false(f.offer.discard_secure);
	assert_int_equal(f.offer.max_indirect_segments, 4096);
	assert_int_equal(f.offer.max_ring_page_order, 8);
	assert_int_equal(f.offer.max_data_pages,
			 TD_SHM_DEFAULT_MAX_DATA_BYTES / PAGE);
	assert_int_equal(stats().clients, 1);
	assert_int_equal(stats().rings, 0);
	front_close(&f);
}

/* --max-indirect-segments 11 and a read-only disk, as offered. */
static void test_offer_no_indirect_read_only(void **state)
{
	struct td_vbd_params p = {
		.name = "ro", .chain = "null:size=64M", .read_only = true};
	struct front f;

	T.cfg.max_indirect_segments = BLKIF_NO_INDIRECT;
	T.cfg.max_ring_order = 2;
	assert_int_equal(td_vbd_open(T.loop, table, &p, &T.vbd), 0);
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, &T.params, &T.srv),
			 0);
	assert_int_equal(attach(&f), 0);
	assert_int_equal(f.offer.max_indirect_segments, 0); /* key absent */
	assert_int_equal(f.offer.max_ring_page_order, 2);
	assert_int_equal(f.offer.info, SHM_INFO_READONLY);
	assert_false(f.offer.discard);
	/* Asking for indirect requests is refused; 11 is fine. */
	send_text(&f, NO_INDIRECT_CONNECT, strlen(NO_INDIRECT_CONNECT));
	expect_refused(&f, "EINVAL");
	front_close(&f);
	/* So is a ring above the offered order. */
	assert_int_equal(attach(&f), 0);
	send_text(&f, ORDER3_CONNECT, strlen(ORDER3_CONNECT));
	expect_refused(&f, "EINVAL");
	assert_true(logged("ring-page-order=3 is above max-ring-page-order=2"));
	front_close(&f);
	assert_int_equal(attach(&f), 0);
	connect_front(&f, 2, 4, BLKIF_NO_INDIRECT);
	req_rw(&f, BLKIF_OP_WRITE, 9, 0, 1, 0);
	kick(&f);
	expect_rsp(&f, 9, BLKIF_RSP_ERROR); /* read-only */
	front_close(&f);
}

static void test_read_write_notify(void **state)
{
	struct front f;

	start("null:size=64M");
	assert_int_equal(attach(&f), 0);
	connect_front(&f, 0, 64, 0);
	assert_int_equal(stats().rings, 1);
	memset(f.pool + 3 * PAGE, 0xee, 2 * PAGE);
	req_rw(&f, BLKIF_OP_READ, 1, 0, 2, 3);
	req_rw(&f, BLKIF_OP_WRITE, 2, 64, 11, 10);
	kick(&f);
	expect_rsp(&f, 1, BLKIF_RSP_OKAY);
	expect_rsp(&f, 2, BLKIF_RSP_OKAY);
	/* The null disk read zeroes into the pool pages named by gref. */
	for (size_t i = 0; i < 2 * PAGE; i++)
		assert_int_equal(f.pool[3 * PAGE + i], 0);
	assert_true(notified(&f));
	assert_false(notified(&f));
	/* A gref outside the pool is an error answer, not a disconnect. */
	req_rw(&f, BLKIF_OP_READ, 3, 0, 1, 64);
	kick(&f);
	expect_rsp(&f, 3, BLKIF_RSP_ERROR);
	assert_int_equal(stats().ring.bad_reqs, 1);
	assert_int_equal(stats().ring.reqs[BLKIF_OP_READ], 2);
	assert_int_equal(stats().ring.segments, 13);
	assert_int_equal(stats().kicks, 2);
	assert_int_equal(stats().protocol_errors, 0);
	front_close(&f);
}

/* Every order the shm transport allows, each ring filled and wrapped. */
static void test_ring_orders(void **state)
{
	start("null:size=64M");
	for (uint32_t order = 0; order <= BLKIF_MAX_RING_ORDER; order++) {
		uint32_t slots = 32u << order;
		struct front f;

		assert_int_equal(attach(&f), 0);
		connect_front(&f, order, 1, 0);
		assert_int_equal(f.ring_bytes, (size_t)PAGE << order);
		assert_int_equal(RING_SIZE(&f.front), slots);
		for (int round = 0; round < 2; round++) {
			for (uint32_t i = 0; i < slots; i++)
				req_rw(&f, BLKIF_OP_READ, i, i % 1024 * 8, 1,
				       0);
			kick(&f);
			for (int p = 0; p < MAX_PASSES && unread(&f) < slots;
			     p++)
				run();
			assert_int_equal(unread(&f), slots);
			f.front.rsp_cons += slots;
		}
		front_close(&f);
		run();
	}
	assert_int_equal(stats().ring.reqs[BLKIF_OP_READ],
			 2u * (32u << (BLKIF_MAX_RING_ORDER + 1)) - 64);
	assert_int_equal(stats().protocol_errors, 0);
}

/* The frontend's max-indirect-segments is its ring's limit. */
static void test_indirect_limit_per_ring(void **state)
{
	struct front f, g;

	start("null:size=64M");
	assert_int_equal(attach(&f), 0);
	connect_front(&f, 0, 300, MAX_SEGS_ASKED);
	assert_int_equal(attach(&g), 0);
	connect_front(&g, 0, 300, 0); /* the offer: 4096 */
	req_ind(&f, BLKIF_OP_WRITE, 1, MAX_SEGS_ASKED, 0, 10);
	req_ind(&f, BLKIF_OP_WRITE, 2, MAX_SEGS_ASKED + 1, 1, 10);
	kick(&f);
	/* Refused at once, so answered before the one that ran. */
	expect_rsp(&f, 2, BLKIF_RSP_ERROR);
	expect_rsp(&f, 1, BLKIF_RSP_OKAY);
	req_ind(&g, BLKIF_OP_READ, 3, 256, 0, 10);
	kick(&g);
	expect_rsp(&g, 3, BLKIF_RSP_OKAY);
	assert_int_equal(stats().ring.indirect_reqs, 3);
	front_close(&f);
	front_close(&g);
}

/* --- hostile messages ------------------------------------------------------------- */

struct hostile {
	const char *text; /* sent as is */
	const char *answer;
	size_t len;
};

/* Literals only: their length counts the NULs they may hold. */
#define H(text, answer)                            \
	{                                          \
		(text), (answer), sizeof(text) - 1 \
	}
#define GARBAGE "\x00\x01\xff garbage\n"

static const struct hostile hostile_lines[] = {
	H(GARBAGE, "EPROTO"),
	H("hello\n", "EPROTO"),
	H("connect version=2 ring-page-order=0 data-pages=1\n", "EOPNOTSUPP"),
	H("connect version=1\n", "EPROTO"),
	H("connect version=1 ring-page-order=9 data-pages=1\n", "EINVAL"),
	H("connect version=1 ring-page-order=0 data-pages=0\n", "EINVAL"),
	H("connect version=1 ring-page-order=0 data-pages=262145\n", "E2BIG"),
	H("connect version=1 ring-page-order=0 data-pages=4294967295\n",
	  "E2BIG"),
	H("connect version=1 ring-page-order=0 "
	  "data-pages=99999999999999999999999\n",
	  "EPROTO"),
	H("connect version=1 ring-page-order=0 ring-page-order=0 "
	  "data-pages=1\n",
	  "EPROTO"),
	H("connect  version=1 ring-page-order=0 data-pages=1\n", "EPROTO"),
	H("connect version=1 ring-page-order=0 data-pages=01\n", "EPROTO"),
	H("connect version=1 ring-page-order=0 data-pages=1 "
	  "max-indirect-segments=5000\n",
	  "EINVAL"),
	H("connect version=1 ring-page-order=0 data-pages=1 "
	  "max-indirect-segments=10\n",
	  "EINVAL"),
	H("connect version=1 ring-page-order=0 data-pages=1\r\n", "EPROTO"),
	H(GOOD_CONNECT GOOD_CONNECT, "EPROTO"), /* bytes after the line */
	H("connect version=1 ring-page-order=0 data-pages=1\nx", "EPROTO"),
};

static void test_hostile_lines(void **state)
{
	struct front f;
	uint64_t errors = 0;

	start("null:size=64M");
	for (size_t i = 0; i < sizeof(hostile_lines) / sizeof(*hostile_lines);
	     i++) {
		const char *t = hostile_lines[i].text;
		size_t len = hostile_lines[i].len;

		assert_int_equal(attach(&f), 0);
		send_text(&f, t, len);
		expect_refused(&f, hostile_lines[i].answer);
		front_close(&f);
		run();
		assert_int_equal(stats().protocol_errors, ++errors);
		assert_int_equal(stats().clients, 0);
		assert_int_equal(T.srv->nr_conns, 0);
	}
	/* Nothing of it harmed the server. */
	assert_int_equal(attach(&f), 0);
	connect_front(&f, 0, 64, 0);
	req_rw(&f, BLKIF_OP_READ, 5, 0, 1, 0);
	kick(&f);
	expect_rsp(&f, 5, BLKIF_RSP_OKAY);
	front_close(&f);
}

/* A line that never ends, sent in pieces. */
static void test_endless_line(void **state)
{
	char junk[100];
	struct front f;

	memset(junk, 'c', sizeof(junk));
	start("null:size=64M");
	assert_int_equal(attach(&f), 0);
	for (int i = 0; i < 5; i++) {
		send_text(&f, junk, sizeof(junk));
		run();
	}
	send_text(&f, junk, SHM_LINE_MAX - 5 * sizeof(junk));
	expect_refused(&f, "EPROTO");
	assert_true(logged("longer than 512 bytes"));
	front_close(&f);
}

static void test_handshake_timeout(void **state)
{
	struct front f;

	T.params.handshake_timeout_ms = TEST_TIMEOUT;
	start("null:size=64M");
	assert_int_equal(attach(&f), 0);
	send_text(&f, "connect version=1", 17); /* and nothing more */
	for (int i = 0; i < 10 && stats().clients; i++)
		assert_int_equal(td_loop_run_once(T.loop, TEST_TIMEOUT), 0);
	expect_refused(&f, "ETIMEDOUT");
	front_close(&f);
}

/* Descriptors a frontend sends are not kept. */
static void test_fds_from_frontend_dropped(void **state)
{
	char buf[] = GOOD_CONNECT;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u = {0};
	struct iovec iov = {buf, strlen(buf)};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.b,
			     .msg_controllen = sizeof(u.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	struct front f;
	int pipefd[2];
	char byte;

	start("null:size=64M");
	assert_int_equal(pipe2(pipefd, O_CLOEXEC | O_NONBLOCK), 0);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pipefd[1], sizeof(int));
	assert_int_equal(attach(&f), 0);
	assert_int_equal(sendmsg(f.sock, &msg, 0), (ssize_t)strlen(buf));
	close(pipefd[1]);
	run();
	/* The only writer left would be a copy kept by the server. */
	assert_int_equal(read(pipefd[0], &byte, 1), 0);
	close(pipefd[0]);
	front_close(&f);
}

static void test_max_clients(void **state)
{
	struct front a, b;
	char line[LINE];
	int sv[2];

	T.params.max_clients = 1;
	start("null:size=64M");
	assert_int_equal(attach(&a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	memset(&b, 0, sizeof(b));
	b.kick = b.notify = -1;
	b.sock = sv[0];
	assert_int_equal(td_shm_server_add_client(T.srv, sv[1], "b"), -EBUSY);
	assert_true(read_line(&b, line, NULL, NULL) > 0);
	assert_non_null(strstr(line, "error EBUSY"));
	assert_int_equal(stats().refused, 1);
	front_close(&b);
	front_close(&a);
	run();
	assert_int_equal(attach(&b), 0); /* room again */
	front_close(&b);
}

/* --- frontends that go away ---------------------------------------------------------- */

/*
 * The frontend disconnects with a read in the vbd: the ring stops at once
 * (no response is ever written), the pool stays mapped until the read has
 * completed, then everything goes.
 */
static void test_disconnect_mid_io(void **state)
{
	struct front f;

	mock.hold = true;
	start("mock");
	assert_int_equal(attach(&f), 0);
	connect_front(&f, 0, 16, 0);
	assert_int_equal(count_maps(DATA_MEMFD), 2); /* ours, the server's */
	req_rw(&f, BLKIF_OP_READ, 1, 0, 4, 0);
	req_rw(&f, BLKIF_OP_READ, 2, 8, 1, 8);
	kick(&f);
	assert_int_equal(mock.nr_held, 2);
	close(f.sock); /* what the kernel does when the frontend dies */
	f.sock = -1;
	run();
	assert_int_equal(stats().clients, 0);
	assert_int_equal(T.srv->nr_conns, 1); /* draining */
	assert_int_equal(count_maps(DATA_MEMFD), 2);
	mock_complete_held(0, 0);
	run();
	assert_int_equal(count_maps(DATA_MEMFD), 2); /* one still held */
	mock_complete_held(1, 0);
	run();
	assert_int_equal(T.srv->nr_conns, 0);
	assert_int_equal(count_maps(DATA_MEMFD), 1);
	assert_int_equal(count_maps(RING_MEMFD), 1);
	assert_int_equal(f.front.sring->rsp_prod, 0);
	assert_int_equal(stats().protocol_errors, 0);
	assert_int_equal(stats().ring.reqs[BLKIF_OP_READ], 2); /* kept */
	front_close(&f);
	assert_int_equal(count_maps(DATA_MEMFD), 0);
}

/* Gone during the handshake, and gone before reading the offer. */
static void test_disconnect_during_handshake(void **state)
{
	struct front f;

	start("null:size=64M");
	assert_int_equal(attach(&f), 0);
	send_text(&f, "connect vers", 12);
	run();
	front_close(&f);
	run();
	assert_int_equal(T.srv->nr_conns, 0);
	assert_int_equal(stats().protocol_errors, 0);
}

/* Two frontends: one breaks the rules in each way, the other goes on. */
static void test_frontends_isolated(void **state)
{
	struct front good, bad;
	uint64_t id = 100;

	start("null:size=64M");
	assert_int_equal(attach(&good), 0);
	connect_front(&good, 1, 8, 0);
	for (int how = 0; how < 3; how++) {
		assert_int_equal(attach(&bad), 0);
		connect_front(&bad, 0, 8, 0);
		req_rw(&bad, BLKIF_OP_READ, 1, 0, 1, 0);
		req_rw(&good, BLKIF_OP_READ, id, 0, 1, 0);
		if (how == 0) {
			send_text(&bad, "x", 1); /* talks after connecting */
		} else if (how == 1) {
			/* more than a ring ahead */
			bad.front.req_prod_pvt += RING_SIZE(&bad.front);
		} else {
			int fl = fcntl(bad.notify, F_GETFL);

			assert_int_equal(
				fcntl(bad.notify, F_SETFL, fl & ~O_NONBLOCK),
				0);
		}
		kick(&bad);
		kick(&good);
		expect_closed(&bad);
		expect_rsp(&good, id++, BLKIF_RSP_OKAY);
		front_close(&bad);
		run();
		assert_int_equal(stats().protocol_errors, (uint64_t)how + 1);
	}
	assert_true(logged("sent data on the socket after connecting"));
	assert_true(logged("broke the ring protocol"));
	assert_true(logged("cleared O_NONBLOCK"));
	assert_int_equal(stats().ring.protocol_errors, 1);
	assert_int_equal(stats().clients, 1);
	front_close(&good);
}

/* --- several rings on one connection (multi-queue) ----------------------------- */

#define MQ_MAX 4

/* Map ring q's four descriptors fds[4q..4q+3] into f (no socket). */
static void map_queue(struct front *f, const struct shm_connected_msg *c,
		      const int *fds)
{
	f->sock = -1;
	f->ring_bytes = (size_t)c->ring_bytes;
	f->pool_bytes = (size_t)c->data_bytes;
	f->sring = map(fds[SHM_FD_RING], f->ring_bytes);
	f->pool = map(fds[SHM_FD_DATA], f->pool_bytes);
	f->kick = fds[SHM_FD_KICK];
	f->notify = fds[SHM_FD_NOTIFY];
	assert_int_equal(((blkif_sring_t *)f->sring)->req_event, 1);
	FRONT_RING_INIT(&f->front, (blkif_sring_t *)f->sring, f->ring_bytes);
}

/*
 * Negotiate n rings on the socket of f[0] (attached): f[q] gets ring q.
 * A line given sends it instead of the formatted one.
 */
static void connect_queues(struct front *f, uint32_t n, uint32_t order,
			   uint32_t pages)
{
	struct shm_connect_msg m = {1, order, pages, 0, n};
	struct shm_connected_msg c;
	int fds[SHM_NR_FDS * SHM_MAX_QUEUES];
	unsigned int nfds = 0;
	char line[LINE];
	int len = shm_format_connect(&m, line, sizeof(line));

	send_text(&f[0], line, (size_t)len);
	run();
	len = read_line(&f[0], line, fds, &nfds);
	assert_true(len > 0);
	assert_int_equal(nfds, SHM_NR_FDS * n);
	assert_int_equal(
		shm_parse_connected(line, (size_t)len - 1, &c, NULL, 0), 0);
	assert_int_equal(c.nr_queues, n);
	assert_int_equal(c.ring_page_order, order);
	assert_int_equal(c.data_pages, pages);
	for (uint32_t q = 0; q < n; q++) {
		int sock = f[0].sock;

		map_queue(&f[q], &c, fds + q * SHM_NR_FDS);
		if (!q)
			f[0].sock = sock;
	}
}

static void close_queues(struct front *f, uint32_t n)
{
	for (uint32_t q = 0; q < n; q++)
		front_close(&f[q]);
}

/* The offer says how many rings; 1, 2 and 4 of every order work. */
static void test_mq_rings(void **state)
{
	static const uint32_t counts[] = {1, 2, 4};
	struct front f[MQ_MAX];
	uint64_t reads = 0;

	start("null:size=64M");
	for (size_t i = 0; i < sizeof(counts) / sizeof(*counts); i++) {
		for (uint32_t order = 0; order <= 3; order++) {
			uint32_t n = counts[i];

			assert_int_equal(attach(&f[0]), 0);
			assert_int_equal(f[0].offer.max_queues,
					 TD_SHM_DEFAULT_MAX_QUEUES);
			connect_queues(f, n, order, 4);
			assert_int_equal(stats().rings, n);
			assert_int_equal(stats().clients, 1);
			/* Each ring answers on itself, with its own pool. */
			for (uint32_t q = 0; q < n; q++) {
				memset(f[q].pool, 0xee, PAGE);
				req_rw(&f[q], BLKIF_OP_READ, 10 + q, q * 8, 1,
				       0);
				kick(&f[q]);
			}
			for (uint32_t q = 0; q < n; q++) {
				expect_rsp(&f[q], 10 + q, BLKIF_RSP_OKAY);
				assert_int_equal(unread(&f[q]), 0);
				assert_true(notified(&f[q]));
				assert_int_equal(f[q].pool[0], 0);
			}
			reads += n;
			close_queues(f, n);
			run();
			assert_int_equal(stats().rings, 0);
			assert_int_equal(T.srv->nr_conns, 0);
		}
	}
	/* Counted once each, over every ring. */
	assert_int_equal(stats().ring.reqs[BLKIF_OP_READ], reads);
	assert_int_equal(stats().kicks, reads);
	assert_int_equal(stats().protocol_errors, 0);
}

/* Asking for more rings than offered, or none, is refused. */
static void test_mq_refused(void **state)
{
	static const struct {
		const char *line;
		const char *answer;
		const char *logged;
	} cases[] = {
		{"connect version=1 ring-page-order=0 data-pages=1 "
		 "multi-queue-num-queues=3\n",
		 "EINVAL",
		 "multi-queue-num-queues=3 is above multi-queue-max-queues=2"},
		{"connect version=1 ring-page-order=0 data-pages=1 "
		 "multi-queue-num-queues=0\n",
		 "EINVAL", "multi-queue-num-queues=0 is not in 1..16"},
		{"connect version=1 ring-page-order=0 data-pages=1 "
		 "multi-queue-num-queues=17\n",
		 "EINVAL", "multi-queue-num-queues=17 is not in 1..16"},
		{"connect version=1 ring-page-order=0 data-pages=1 "
		 "multi-queue-num-queues=x\n",
		 "EPROTO", "is not a decimal number"},
		{"connect version=1 ring-page-order=0 data-pages=1 "
		 "multi-queue-max-queues=2\n",
		 "EPROTO", "unknown key 'multi-queue-max-queues'"},
	};
	struct front f[MQ_MAX];

	T.params.max_queues = 2;
	start("null:size=64M");
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		assert_int_equal(attach(&f[0]), 0);
		assert_int_equal(f[0].offer.max_queues, 2);
		send_text(&f[0], cases[i].line, strlen(cases[i].line));
		expect_refused(&f[0], cases[i].answer);
		if (!logged(cases[i].logged))
			fail_msg("'%s' not logged", cases[i].logged);
		front_close(&f[0]);
		run();
	}
	assert_int_equal(stats().protocol_errors,
			 sizeof(cases) / sizeof(*cases));
	/* The key left out: one ring, four descriptors (connect_front). */
	assert_int_equal(attach(&f[0]), 0);
	connect_front(&f[0], 0, 4, 0);
	assert_int_equal(stats().rings, 1);
	front_close(&f[0]);
	/* Exactly the maximum. */
	assert_int_equal(attach(&f[0]), 0);
	connect_queues(f, 2, 0, 4);
	assert_int_equal(stats().rings, 2);
	close_queues(f, 2);
}

/* One ring offered: the key is absent from the offer, and 2 refused. */
static void test_mq_single_offered(void **state)
{
	static const char two[] = "connect version=1 ring-page-order=0 "
				  "data-pages=1 multi-queue-num-queues=2\n";
	struct front f;
	char line[LINE];
	int sv[2];

	T.params.max_queues = 1;
	start("null:size=64M");
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	memset(&f, 0, sizeof(f));
	f.kick = f.notify = -1;
	f.sock = sv[0];
	assert_int_equal(td_shm_server_add_client(T.srv, sv[1], "one"), 0);
	assert_true(read_line(&f, line, NULL, NULL) > 0);
	assert_null(strstr(line, "multi-queue"));
	send_text(&f, two, strlen(two));
	expect_refused(&f, "EINVAL");
	front_close(&f);
	/* Bounds of the parameter itself. */
	td_frontend_destroy(td_shm_server_frontend(T.srv));
	T.srv = NULL;
	T.params.max_queues = SHM_MAX_QUEUES + 1;
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, &T.params, &T.srv),
			 -EINVAL);
	T.params.max_queues = SHM_MAX_QUEUES;
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, &T.params, &T.srv),
			 0);
}

/*
 * The negotiation changed under a connected device (a second connect
 * line asking for other rings), or one ring of four broken: the whole
 * connection goes, every ring of it; another frontend's rings go on.
 */
static void test_mq_one_bad_ring(void **state)
{
	static const char again[] = "connect version=1 ring-page-order=0 "
				    "data-pages=4 multi-queue-num-queues=4\n";
	struct front good[2], bad[MQ_MAX];
	uint64_t id = 100;

	start("null:size=64M");
	assert_int_equal(attach(&good[0]), 0);
	connect_queues(good, 2, 1, 8);
	for (int how = 0; how < 2; how++) {
		assert_int_equal(attach(&bad[0]), 0);
		connect_queues(bad, MQ_MAX, 0, 4);
		assert_int_equal(stats().rings, 2 + MQ_MAX);
		if (how == 0)
			send_text(&bad[0], again, strlen(again));
		else /* ring 2 more than a ring ahead */
			bad[2].front.req_prod_pvt += RING_SIZE(&bad[2].front);
		req_rw(&bad[2], BLKIF_OP_READ, 1, 0, 1, 0);
		kick(&bad[2]);
		req_rw(&good[1], BLKIF_OP_READ, id, 0, 1, 0);
		kick(&good[1]);
		expect_closed(&bad[0]);
		expect_rsp(&good[1], id++, BLKIF_RSP_OKAY);
		assert_int_equal(stats().rings, 2);
		close_queues(bad, MQ_MAX);
		run();
		assert_int_equal(stats().protocol_errors, (uint64_t)how + 1);
		assert_int_equal(T.srv->nr_conns, 1);
	}
	assert_true(logged("sent data on the socket after connecting"));
	assert_true(logged("broke the ring protocol"));
	req_rw(&good[0], BLKIF_OP_READ, id, 0, 1, 0);
	kick(&good[0]);
	expect_rsp(&good[0], id, BLKIF_RSP_OKAY);
	close_queues(good, 2);
}

/*
 * A flush on one ring and writes on two others, through sort: the flush
 * reaches the disk only after the write answered before it (ring 0)
 * completed, and the write pushed after it (ring 2), although adjacent
 * to ring 0's, is not merged with it across the flush.
 */
static void test_mq_flush_across_rings(void **state)
{
	struct front f[3];

	mock.hold = true;
	start("sort|mock");
	assert_int_equal(attach(&f[0]), 0);
	connect_queues(f, 3, 0, 4);
	req_rw(&f[0], BLKIF_OP_WRITE, 1, 0, 1, 0);
	kick(&f[0]);
	assert_int_equal(mock.nr_held, 1);
	req_rw(&f[1], BLKIF_OP_FLUSH_DISKCACHE, 2, 0, 0, 0);
	req_rw(&f[2], BLKIF_OP_WRITE, 3, 8, 1, 0);
	kick(&f[1]);
	kick(&f[2]);
	/* The flush waits for the write before it; the write after it too. */
	assert_int_equal(mock.nr_held, 1);
	assert_int_equal(unread(&f[1]), 0);
	mock_complete_held(0, 0);
	run();
	expect_rsp(&f[0], 1, BLKIF_RSP_OKAY);
	assert_int_equal(mock.nr_held, 3);
	assert_int_equal(mock.seen[1].op, TD_OP_FLUSH);
	assert_int_equal(mock.seen[2].op, TD_OP_WRITE);
	assert_int_equal(mock.seen[2].sector, 8);
	assert_int_equal(mock.seen[2].nr_sectors, 8); /* not merged */
	mock_complete_held(1, 0);
	mock_complete_held(2, 0);
	run();
	expect_rsp(&f[1], 2, BLKIF_RSP_OKAY);
	expect_rsp(&f[2], 3, BLKIF_RSP_OKAY);
	/* Per-disk counters: each request once. */
	assert_int_equal(stats().ring.reqs[BLKIF_OP_WRITE], 2);
	assert_int_equal(stats().ring.reqs[BLKIF_OP_FLUSH_DISKCACHE], 1);
	close_queues(f, 3);
}

/*
 * Per-ring counters: each ring counts its own requests, segments, kicks
 * and the requests it holds; closed rings stay in their queue's sum, a
 * later 1-ring frontend adds to queue 0 only, and the queues add up to
 * the disk's ring counters.  Text and JSON show them.
 */
static void test_mq_per_ring_stats(void **state)
{
	static const struct td_frontend_ops *const kinds[] = {&td_shm_frontend,
							      NULL};
	struct td_frontend *fe;
	struct td_report r = {.pid = 1,
			      .name = "v",
			      .chain = "mock",
			      .state = "running",
			      .kinds = kinds,
			      .servers = &fe,
			      .nr_servers = 1};
	struct front f[2];
	struct td_shm_stats s;
	struct td_strbuf sb;

	mock.hold = true;
	start("mock");
	fe = td_shm_server_frontend(T.srv);
	assert_int_equal(attach(&f[0]), 0);
	connect_queues(f, 2, 0, 4);
	req_rw(&f[0], BLKIF_OP_WRITE, 1, 0, 2, 0);
	req_rw(&f[0], BLKIF_OP_WRITE, 2, 16, 1, 2);
	req_rw(&f[1], BLKIF_OP_READ, 3, 64, 3, 0);
	kick(&f[0]);
	kick(&f[1]);
	s = stats();
	assert_int_equal(s.nr_queues, 2);
	assert_int_equal(s.queues[0].queue, 0);
	assert_int_equal(s.queues[1].queue, 1);
	assert_int_equal(s.queues[0].ring.reqs[BLKIF_OP_WRITE], 2);
	assert_int_equal(s.queues[0].ring.reqs[BLKIF_OP_READ], 0);
	assert_int_equal(s.queues[0].ring.segments, 3);
	assert_int_equal(s.queues[0].in_flight, 2);
	assert_int_equal(s.queues[0].kicks, 1);
	assert_int_equal(s.queues[1].ring.reqs[BLKIF_OP_READ], 1);
	assert_int_equal(s.queues[1].ring.segments, 3);
	assert_int_equal(s.queues[1].in_flight, 1);
	assert_int_equal(s.queues[1].kicks, 1);
	assert_int_equal(s.queues[0].ring.polled_reqs, 0);

	td_strbuf_init(&sb);
	assert_int_equal(td_format_stats_text(&r, &sb), 0);
	assert_non_null(strstr(sb.data,
			       "ring 0: 2 requests (0 reads, 2 writes), "
			       "3 segments, 2 in flight, 0 polled, "
			       "1 kicks, 0 notifications, 0 I/O errors"));
	assert_non_null(strstr(sb.data,
			       "ring 1: 1 requests (1 reads, 0 writes), "
			       "3 segments, 1 in flight"));
	td_strbuf_reset(&sb);
	assert_int_equal(td_format_stats_json(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "\"queues\": ["));
	assert_non_null(strstr(sb.data, "\"in_flight\": 2"));
	assert_non_null(strstr(sb.data, "\"polled_requests\": 0"));
	td_strbuf_reset(&sb);
	assert_int_equal(td_format_stats_metrics(&r, &sb), 0);
	assert_non_null(strstr(sb.data,
			       "# TYPE tapstripe_ring_requests_total "
			       "counter\n"
			       "tapstripe_ring_requests_total{disk=\"v\","
			       "frontend=\"shm\",ring=\"0\"} 2\n"
			       "tapstripe_ring_requests_total{disk=\"v\","
			       "frontend=\"shm\",ring=\"1\"} 1\n"));
	assert_non_null(strstr(sb.data, "tapstripe_ring_inflight{disk=\"v\","
					"frontend=\"shm\",ring=\"0\"} 2\n"));
	assert_non_null(strstr(sb.data, "tapstripe_ring_kicks_total{disk=\"v\","
					"frontend=\"shm\",ring=\"1\"} 1\n"));

	mock_complete_held(0, 0);
	mock_complete_held(1, 0);
	mock_complete_held(2, 0);
	run();
	expect_rsp(&f[0], 1, BLKIF_RSP_OKAY);
	expect_rsp(&f[0], 2, BLKIF_RSP_OKAY);
	expect_rsp(&f[1], 3, BLKIF_RSP_OKAY);
	s = stats();
	assert_int_equal(s.queues[0].in_flight, 0);
	assert_int_equal(s.queues[1].in_flight, 0);
	assert_int_equal(s.queues[1].ring.notifications, 1);
	close_queues(f, 2);
	run();

	/* Closed: still counted, in its own queue. */
	assert_int_equal(attach(&f[0]), 0);
	connect_queues(f, 1, 0, 4);
	req_rw(&f[0], BLKIF_OP_READ, 4, 0, 1, 0);
	kick(&f[0]);
	mock_complete_held(3, 0);
	run();
	expect_rsp(&f[0], 4, BLKIF_RSP_OKAY);
	s = stats();
	assert_int_equal(s.nr_queues, 2);
	assert_int_equal(s.queues[0].ring.reqs[BLKIF_OP_WRITE], 2);
	assert_int_equal(s.queues[0].ring.reqs[BLKIF_OP_READ], 1);
	assert_int_equal(s.queues[0].kicks, 2);
	assert_int_equal(s.queues[1].ring.reqs[BLKIF_OP_READ], 1);
	assert_int_equal(s.queues[1].kicks, 1);
	assert_int_equal(blkif_ring_stats_requests(&s.queues[0].ring) +
				 blkif_ring_stats_requests(&s.queues[1].ring),
			 blkif_ring_stats_requests(&s.ring));
	assert_int_equal(s.queues[0].ring.segments + s.queues[1].ring.segments,
			 s.ring.segments);
	close_queues(f, 1);
	run();
	td_strbuf_free(&sb);
}

/* --- shutdown and destroy ----------------------------------------------------------- */

static void shm_done(void *opaque)
{
	T.done++;
}

static void test_shutdown_answers_in_flight(void **state)
{
	struct front f, hs;

	mock.hold = true;
	start("mock");
	assert_int_equal(attach(&f), 0);
	connect_front(&f, 0, 16, 0);
	assert_int_equal(attach(&hs), 0); /* still negotiating */
	req_rw(&f, BLKIF_OP_READ, 1, 0, 1, 0);
	kick(&f);
	td_frontend_shutdown(td_shm_server_frontend(T.srv), shm_done, NULL);
	run();
	expect_closed(&hs);
	assert_int_equal(T.done, 0);
	/* No new request is taken... */
	req_rw(&f, BLKIF_OP_READ, 2, 8, 1, 1);
	kick(&f);
	assert_int_equal(mock.nr_seen, 1);
	/* ... the one in flight is answered, then the ring closes. */
	mock_complete_held(0, 0);
	for (int i = 0; i < 20 && !T.done; i++)
		assert_int_equal(td_loop_run_once(T.loop, SLOW_PASS_MS), 0);
	assert_int_equal(T.done, 1);
	expect_rsp(&f, 1, BLKIF_RSP_OKAY);
	assert_int_equal(unread(&f), 0);
	expect_closed(&f);
	assert_int_equal(td_shm_server_add_client(T.srv, dup(f.sock), NULL),
			 -EBUSY);
	front_close(&f);
	front_close(&hs);
}

/* Destroyed with I/O in the vbd: the ring frees itself afterwards. */
static void test_destroy_with_io_in_flight(void **state)
{
	struct front f;

	mock.hold = true;
	start("mock");
	assert_int_equal(attach(&f), 0);
	connect_front(&f, 0, 16, 0);
	req_rw(&f, BLKIF_OP_READ, 1, 0, 1, 0);
	kick(&f);
	td_frontend_destroy(td_shm_server_frontend(T.srv));
	T.srv = NULL;
	expect_closed(&f);
	assert_int_equal(count_maps(DATA_MEMFD), 2);
	mock_complete_held(0, 0);
	run();
	assert_int_equal(count_maps(DATA_MEMFD), 1);
	front_close(&f);
}

/* --- listening ----------------------------------------------------------------------- */

static int connect_path(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void test_listen(void **state)
{
	char path[128], line[LINE];
	struct td_shm_server *other;
	struct front f = {.kick = -1, .notify = -1};
	struct stat st;
	int fd;

	strcpy(T.dir, "/tmp/test_shm.XXXXXX");
	assert_non_null(mkdtemp(T.dir));
	snprintf(path, sizeof(path), "%s/s.sock", T.dir);
	start("null:size=64M");
	/* A stale socket file (nobody listening) is replaced. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	{
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		strcpy(sa.sun_path, path);
		assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)),
				 0);
		close(fd);
	}
	assert_int_equal(td_shm_server_listen(T.srv, path), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	f.sock = connect_path(path);
	run();
	assert_true(read_line(&f, line, NULL, NULL) > 0);
	assert_int_equal(shm_msg_kind(line, strlen(line)), SHM_KIND_BACKEND);
	/* A live one is not taken over. */
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, NULL, &other), 0);
	assert_int_equal(td_shm_server_listen(other, path), -EADDRINUSE);
	td_frontend_destroy(td_shm_server_frontend(other));
	front_close(&f);
	run();
	/* Destroy removes the socket. */
	td_frontend_destroy(td_shm_server_frontend(T.srv));
	T.srv = NULL;
	assert_int_equal(stat(path, &st), -1);
	/* A file that is not a socket is left alone. */
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, NULL, &T.srv), 0);
	assert_int_equal(td_shm_server_listen(T.srv, path), -EEXIST);
	unlink(path);
}

static void test_bad_params(void **state)
{
	struct td_vbd_params p = {.name = "x", .chain = "null:size=1M"};
	struct td_shm_params sp = {.max_data_bytes = 4095};
	struct td_shm_server *srv;

	assert_int_equal(td_vbd_open(T.loop, table, &p, &T.vbd), 0);
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, &sp, &srv),
			 -EINVAL);
	sp.max_data_bytes = TD_SHM_MAX_DATA_BYTES_LIMIT + PAGE;
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, &sp, &srv),
			 -EINVAL);
	T.cfg.max_ring_order = 9;
	sp.max_data_bytes = 0;
	sp.blkif = &T.cfg;
	assert_int_equal(td_shm_server_create(T.loop, T.vbd, &sp, &srv),
			 -EINVAL);
}

/* The shm counters in tapdisk's stats reply: the frontend's report op. */
static void test_stats_format(void **state)
{
	static const struct td_frontend_ops *const kinds[] = {&td_shm_frontend,
							      NULL};
	struct td_frontend *fe;
	struct td_report r = {.pid = 1,
			      .name = "v",
			      .chain = "null:",
			      .state = "running",
			      .kinds = kinds,
			      .servers = &fe,
			      .nr_servers = 1};
	struct td_strbuf sb;

	start("null:size=1M");
	fe = td_shm_server_frontend(T.srv);
	T.srv->stats.clients_total = 2;
	T.srv->stats.kicks = 77;
	T.srv->closed_ring.reqs[BLKIF_OP_WRITE] = 5;
	T.srv->closed_ring.segments = 1280;
	td_strbuf_init(&sb);
	assert_int_equal(td_format_stats_text(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "shm: 0 frontends connected (0 rings), "
					"2 accepted"));
	assert_non_null(strstr(sb.data, "write 5"));
	assert_non_null(strstr(sb.data, "1280 segments"));
	td_strbuf_reset(&sb);
	assert_int_equal(td_format_stats_json(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "\"kicks\": 77"));
	assert_non_null(strstr(sb.data, "\"write\": 5"));
	td_strbuf_reset(&sb);
	r.nr_servers = 0;
	assert_int_equal(td_format_stats_json(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "\"shm\": null"));
	td_strbuf_free(&sb);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_offer),
		TEST(test_offer_no_indirect_read_only),
		TEST(test_read_write_notify),
		TEST(test_ring_orders),
		TEST(test_indirect_limit_per_ring),
		TEST(test_hostile_lines),
		TEST(test_endless_line),
		TEST(test_handshake_timeout),
		TEST(test_fds_from_frontend_dropped),
		TEST(test_max_clients),
		TEST(test_disconnect_mid_io),
		TEST(test_disconnect_during_handshake),
		TEST(test_frontends_isolated),
		TEST(test_shutdown_answers_in_flight),
		TEST(test_destroy_with_io_in_flight),
		TEST(test_listen),
		TEST(test_bad_params),
		TEST(test_stats_format),
		TEST(test_mq_rings),
		TEST(test_mq_refused),
		TEST(test_mq_single_offered),
		TEST(test_mq_one_bad_ring),
		TEST(test_mq_flush_across_rings),
		TEST(test_mq_per_ring_stats),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
