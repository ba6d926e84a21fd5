/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-lib.c - the frontend library's connection: connect to the shm
 * socket, negotiate as blkfront does over xenbus, receive and map the
 * ring and the data pool (doc/shm-protocol.md).  The I/O path is in
 * td-front-ring.c.
 *
 * Blocking, bounded by one deadline for the whole negotiation: this runs
 * once, before any I/O, in a tool.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "tools/cli/cli.h"
#include "tools/td-front/td-front-int.h"

#define NS_PER_MS   1000000ull
#define TDF_MAX_FDS (SHM_NR_FDS * SHM_MAX_QUEUES)

static int connect_unix(const char *path, int *out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, err;

	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

/* Keep the first TDF_MAX_FDS descriptors of msg's SCM_RIGHTS, close others. */
static void take_fds(struct msghdr *msg, int *fds, unsigned int *nfds)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c;
	     c = CMSG_NXTHDR(msg, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (*nfds < TDF_MAX_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
}

/*
 * Wait until sock is readable or deadline_ns passes: 0 (readable, or a
 * signal: look again), -ETIMEDOUT, or -errno.
 */
static int wait_readable(int sock, uint64_t deadline_ns)
{
	struct pollfd pfd = {.fd = sock, .events = POLLIN};
	uint64_t now = td_now_ns();

	if (now >= deadline_ns)
		return -ETIMEDOUT;
	if (poll(&pfd, 1, (int)((deadline_ns - now) / NS_PER_MS) + 1) < 0 &&
	    errno != EINTR)
		return -errno;
	return 0;
}

/*
 * Read one line (without its LF, NUL-terminated) before deadline_ns,
 * gathering descriptors into fds when fds is not NULL.  A byte after the
 * LF is a protocol error: the backend sends one line and waits.
 */
static int read_line(int sock, char *line, size_t size, int *fds,
		     unsigned int *nfds, uint64_t deadline_ns)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * TDF_MAX_FDS)];
	} u;
	size_t len = 0;

	for (;;) {
		struct iovec iov = {line + len, size - 1 - len};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
		char *lf;
		ssize_t n;
		int err = wait_readable(sock, deadline_ns);

		if (err)
			return err;
		if (fds) {
			msg.msg_control = u.buf;
			msg.msg_controllen = sizeof(u.buf);
		}
		n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			return -errno;
		if (fds)
			take_fds(&msg, fds, nfds);
		if (n == 0)
			return -ECONNRESET;
		len += (size_t)n;
		line[len] = '\0';
		if ((lf = memchr(line, '\n', len))) {
			*lf = '\0';
			return lf + 1 == line + len ? 0 : -EPROTO;
		}
		if (len == size - 1)
			return -EPROTO;
	}
}

/*
 * One line of a stream the backend may write several lines to at once
 * ("resized" notices): peek for the LF, then take exactly that line.
 */
static int read_one_line(int sock, char *line, size_t size,
			 uint64_t deadline_ns)
{
	for (;;) {
		ssize_t n = recv(sock, line, size - 1, MSG_PEEK | MSG_DONTWAIT);
		char *lf = n > 0 ? memchr(line, '\n', (size_t)n) : NULL;
		int err;

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		if (lf) {
			n = recv(sock, line, (size_t)(lf - line) + 1,
				 MSG_DONTWAIT);
			if (n != lf - line + 1)
				return n < 0 ? -errno : -EIO;
			*lf = '\0';
			return 0;
		}
		if (n == (ssize_t)size - 1)
			return -EPROTO;
		/* Nothing, or the rest of the line is on its way. */
		if ((err = wait_readable(sock, deadline_ns)))
			return err;
	}
}

int tdf_wait_resize(struct tdf_dev *dev, int timeout_ms, char *why, size_t len)
{
	char line[SHM_LINE_MAX + 1], detail[SHM_WHY_MAX];
	uint64_t sectors;
	int err = read_one_line(dev->sock, line, sizeof(line),
				td_now_ns() + (uint64_t)timeout_ms * NS_PER_MS);

	if (err)
		return cli_explain(why, len, err, CLI_ERRNO,
				   "no size notice from the backend");
	err = shm_parse_resized(line, strlen(line), &sectors, detail,
				sizeof(detail));
	if (err)
		return cli_explain(why, len, err, CLI_PLAIN,
				   "the backend's line is not a size notice: "
				   "%s",
				   detail);
	dev->info.backend.sectors = sectors;
	dev->info.size_bytes = sectors * TDF_SECTOR_SIZE;
	return 0;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* What to ask for, blkfront's way: our wishes cut to the offer. */
static int plan(struct tdf_dev *dev, const struct tdf_config *cfg,
		struct shm_connect_msg *m, char *why, size_t len)
{
	struct tdf_info *info = &dev->info;
	const struct shm_backend_msg *b = &info->backend;
	uint32_t offered = b->max_indirect_segments ?: TDF_DIRECT_SEGMENTS;
	uint32_t wanted = cfg->max_segments ?: TDF_DEFAULT_MAX_SEGMENTS;
	uint32_t queues = cfg->queues ?: 1;
	uint64_t total;

	if (cfg->ring_order > SHM_MAX_RING_PAGE_ORDER ||
	    wanted < TDF_DIRECT_SEGMENTS || wanted > TDF_MAX_SEGMENTS ||
	    queues > SHM_MAX_QUEUES)
		return cli_explain(why, len, -EINVAL, CLI_PLAIN,
				   "ring order %" PRIu32 ", %" PRIu32
				   " segments or %" PRIu32
				   " rings out of range (0..%d, %d..%d, 1..%d)",
				   cfg->ring_order, wanted, queues,
				   SHM_MAX_RING_PAGE_ORDER, TDF_DIRECT_SEGMENTS,
				   TDF_MAX_SEGMENTS, SHM_MAX_QUEUES);
	/* As blkfront: as many rings as wanted, cut to the offer. */
	info->nr_queues = min_u32(queues, b->max_queues ?: 1);
	info->size_bytes = b->sectors * TDF_SECTOR_SIZE;
	info->ring_order = min_u32(cfg->ring_order, b->max_ring_page_order);
	info->ring_slots = __CONST_RING_SIZE(
		blkif, (size_t)TDF_PAGE_SIZE << info->ring_order);
	info->max_segments = min_u32(wanted, offered);
	if (info->max_segments > TDF_DIRECT_SEGMENTS)
		dev->pages_per_ibuf =
			(uint32_t)((info->max_segments +
				    TDF_SEGS_PER_INDIRECT_PAGE - 1) /
				   TDF_SEGS_PER_INDIRECT_PAGE);
	info->data_pages = cfg->data_pages;
	info->indirect_pages = info->ring_slots * dev->pages_per_ibuf;
	total = (uint64_t)info->data_pages + info->indirect_pages;
	if (!total)
		total = 1; /* the protocol wants a pool */
	if (total > b->max_data_pages)
		return cli_explain(
			why, len, -E2BIG, CLI_PLAIN,
			"%" PRIu64 " pool pages needed (%" PRIu32
			" for buffers, %" PRIu32 " for indirect "
			"descriptors); the backend maps at most %" PRIu32,
			total, info->data_pages, info->indirect_pages,
			b->max_data_pages);
	m->version = SHM_PROTO_VERSION;
	m->ring_page_order = info->ring_order;
	m->data_pages = (uint32_t)total;
	m->max_indirect_segments = info->max_segments;
	m->nr_queues = info->nr_queues;
	return 0;
}

static int read_offer(struct tdf_dev *dev, uint64_t deadline, char *why,
		      size_t len)
{
	char line[SHM_LINE_MAX + 1], detail[SHM_WHY_MAX];
	int err =
		read_line(dev->sock, line, sizeof(line), NULL, NULL, deadline);

	if (err)
		return cli_explain(why, len, err, CLI_ERRNO,
				   "no offer from the backend");
	if (shm_msg_kind(line, strlen(line)) == SHM_KIND_ERROR &&
	    !shm_parse_error(line, strlen(line), &err, detail, sizeof(detail)))
		return cli_explain(why, len, err, CLI_PLAIN,
				   "the backend refused: %s", detail);
	err = shm_parse_backend(line, strlen(line), &dev->info.backend, detail,
				sizeof(detail));
	return err ? cli_explain(why, len, err, CLI_PLAIN,
				 "bad offer from the backend: %s", detail)
		   : 0;
}

/* Read "connected" (or "error") and its descriptors into fds. */
static int read_answer(struct tdf_dev *dev, const struct shm_connect_msg *m,
		       uint64_t deadline, int *fds, char *why, size_t len)
{
	char line[SHM_LINE_MAX + 1], detail[SHM_WHY_MAX];
	struct shm_connected_msg c;
	unsigned int nfds = 0;
	int err =
		read_line(dev->sock, line, sizeof(line), fds, &nfds, deadline);

	if (err)
		return cli_explain(why, len, err, CLI_ERRNO,
				   "no answer from the backend");
	if (shm_msg_kind(line, strlen(line)) == SHM_KIND_ERROR &&
	    !shm_parse_error(line, strlen(line), &err, detail, sizeof(detail)))
		return cli_explain(why, len, err, CLI_PLAIN,
				   "the backend refused: %s", detail);
	err = shm_parse_connected(line, strlen(line), &c, detail,
				  sizeof(detail));
	if (err)
		return cli_explain(why, len, err, CLI_PLAIN,
				   "bad answer from the backend: %s", detail);
	if (c.ring_page_order != m->ring_page_order ||
	    c.data_pages != m->data_pages ||
	    c.max_indirect_segments != m->max_indirect_segments ||
	    c.nr_queues != m->nr_queues || nfds != SHM_NR_FDS * m->nr_queues)
		return cli_explain(
			why, len, -EPROTO, CLI_PLAIN,
			"the backend set up something else than asked "
			"(or sent %u descriptors): %s",
			nfds, line);
	for (uint32_t q = 0; q < c.nr_queues; q++) {
		dev->rings[q].ring_bytes = (size_t)c.ring_bytes;
		dev->rings[q].pool_bytes = (size_t)c.data_bytes;
	}
	return 0;
}

static int map_fd(int fd, size_t bytes, void **out)
{
	struct stat st;
	void *p;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < bytes)
		return -EPROTO;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

/* Ring r's four descriptors, fds[0..3]. */
static int map_ring(struct tdf_ring *r, int *fds, char *why, size_t len)
{
	void *pool = NULL;
	int err = map_fd(fds[SHM_FD_RING], r->ring_bytes, &r->sring);

	if (!err && !(err = map_fd(fds[SHM_FD_DATA], r->pool_bytes, &pool)))
		r->pool = pool;
	if (err)
		return cli_explain(why, len, err, CLI_ERRNO,
				   "cannot map the shared memory");
	r->kick_fd = fds[SHM_FD_KICK];
	r->notify_fd = fds[SHM_FD_NOTIFY];
	fds[SHM_FD_KICK] = fds[SHM_FD_NOTIFY] = -1;
	/* The backend initialised the shared ring; only our side here. */
	FRONT_RING_INIT(&r->front, (blkif_sring_t *)r->sring, r->ring_bytes);
	return tdf_ring_init(r);
}

static int map_all(struct tdf_dev *dev, int *fds, char *why, size_t len)
{
	int err = 0;

	for (uint32_t q = 0; q < dev->info.nr_queues && !err; q++)
		err = map_ring(&dev->rings[q], fds + q * SHM_NR_FDS, why, len);
	return err;
}

static int negotiate(struct tdf_dev *dev, const struct tdf_config *cfg,
		     char *why, size_t len)
{
	int timeout =
		cfg->timeout_ms > 0 ? cfg->timeout_ms : TDF_DEFAULT_TIMEOUT_MS;
	uint64_t deadline = td_now_ns() + (uint64_t)timeout * NS_PER_MS;
	int fds[TDF_MAX_FDS];
	struct shm_connect_msg m;
	char line[SHM_LINE_MAX];
	int n, err = read_offer(dev, deadline, why, len);

	for (int i = 0; i < TDF_MAX_FDS; i++)
		fds[i] = -1;
	if (err || (err = plan(dev, cfg, &m, why, len)))
		return err;
	n = shm_format_connect(&m, line, sizeof(line));
	if (n < 0 || send(dev->sock, line, (size_t)n, MSG_NOSIGNAL) != n)
		return cli_explain(why, len, n < 0 ? n : -errno, CLI_ERRNO,
				   "cannot send the connect line");
	err = read_answer(dev, &m, deadline, fds, why, len);
	if (!err)
		err = map_all(dev, fds, why, len);
	for (int i = 0; i < TDF_MAX_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return err;
}

int tdf_open(const struct tdf_config *cfg, struct tdf_dev **out, char *why,
	     size_t why_len)
{
	struct tdf_dev *dev = calloc(1, sizeof(*dev));
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int err;

	if (!dev)
		return cli_explain(why, why_len, -ENOMEM, CLI_PLAIN,
				   "out of memory");
	dev->sock = -1;
	for (uint32_t q = 0; q < SHM_MAX_QUEUES; q++) {
		dev->rings[q].dev = dev;
		dev->rings[q].kick_fd = dev->rings[q].notify_fd = -1;
		TAILQ_INIT(&dev->rings[q].queue);
	}
	dev->poll_us = cfg->poll_us;
	dev->window_us = cfg->poll_us;
	td_poll_gate_init(&dev->gate, td_host_cpus());
	err = connect_unix(cfg->path, &dev->sock);
	if (err) {
		cli_explain(why, why_len, err, CLI_SHM_SOCKET,
			    "cannot connect to %s", cfg->path);
		goto fail;
	}
	if (!getsockopt(dev->sock, SOL_SOCKET, SO_PEERCRED, &cred, &clen))
		dev->info.backend_pid = cred.pid;
	err = negotiate(dev, cfg, why, why_len);
	if (err)
		goto fail;
	*out = dev;
	return 0;
fail:
	tdf_close(dev);
	return err;
}

void tdf_close(struct tdf_dev *dev)
{
	if (!dev)
		return;
	/* The socket first: the backend stops reading the ring at once. */
	if (dev->sock >= 0)
		close(dev->sock);
	for (uint32_t q = 0; q < SHM_MAX_QUEUES; q++) {
		struct tdf_ring *r = &dev->rings[q];

		if (r->sring)
			munmap(r->sring, r->ring_bytes);
		if (r->pool)
			munmap(r->pool, r->pool_bytes);
		if (r->kick_fd >= 0)
			close(r->kick_fd);
		if (r->notify_fd >= 0)
			close(r->notify_fd);
		free(r->shadow);
	}
	free(dev);
}

const struct tdf_info *tdf_get_info(const struct tdf_dev *dev)
{
	return &dev->info;
}

void tdf_get_stats(const struct tdf_dev *dev, struct tdf_stats *out)
{
	*out = dev->stats;
	out->poll_window_us = dev->window_us;
}

void *tdf_queue_page(struct tdf_dev *dev, uint32_t queue, uint32_t page)
{
	return queue < dev->info.nr_queues && page < dev->info.data_pages
		       ? dev->rings[queue].pool + (size_t)page * TDF_PAGE_SIZE
		       : NULL;
}

void *tdf_page(struct tdf_dev *dev, uint32_t page)
{
	return tdf_queue_page(dev, 0, page);
}
