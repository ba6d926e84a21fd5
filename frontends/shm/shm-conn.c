/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm-conn.c - one shm frontend: the negotiation, the shared memory, the
 * blkif ring's transport ops, and the end of it all (shm-int.h has the
 * life cycle).
 *
 * Messages are one line each way and small, so they are written whole
 * with one non-blocking send: a socket that cannot take a few hundred
 * bytes on a fresh connection belongs to a frontend that does not read,
 * and is dropped.  Nothing here ever blocks on the frontend.
 *
 * The eventfds are shared with the frontend, file description and all:
 * O_NONBLOCK is the frontend's to change too.  So the kick is read with
 * RWF_NOWAIT, which does not depend on it, and before every notification
 * the flag is checked: a frontend that cleared it is dropped, as its next
 * move could make our write block (an eventfd write waits while the
 * counter is full).  doc/shm-protocol.md forbids touching the flags.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "frontends/shm/shm-int.h"

#define SHM_SEALS	 (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define SHM_NOTIFY_VALUE 1
#define SHM_SEND_FLAGS	 (MSG_DONTWAIT | MSG_NOSIGNAL)
#define SHM_RING_MEMFD	 "tapstripe-shm-ring"
#define SHM_DATA_MEMFD	 "tapstripe-shm-data"
#define SHM_US_PER_MS	 1000ull
#define SHM_DRAIN_BYTES	 (64u << 10) /* read before close, at most */

static void queue_free(struct shm_queue *q)
{
	if (q->ring && blkif_ring_destroy(q->ring))
		td_vbd_err(q->conn->vbd,
			   "shm %s: ring %" PRIu32 " still busy at free",
			   q->conn->peer,
			   q->index); /* cannot happen: freed when drained */
	if (q->sring)
		munmap(q->sring, q->ring_bytes);
	if (q->data)
		munmap(q->data, q->data_bytes);
	if (q->kick_fd >= 0)
		close(q->kick_fd);
	if (q->notify_fd >= 0)
		close(q->notify_fd);
}

uint32_t shm_conn_nr_rings(const struct shm_conn *conn)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < conn->nr_queues; i++)
		n += conn->queues[i].ring != NULL;
	return n;
}

uint32_t shm_conn_destroy_rings(struct shm_conn *conn)
{
	for (uint32_t i = 0; i < conn->nr_queues; i++) {
		struct shm_queue *q = &conn->queues[i];

		if (q->ring && !blkif_ring_destroy(q->ring))
			q->ring = NULL;
	}
	return shm_conn_nr_rings(conn);
}

void shm_conn_free(struct shm_conn *conn)
{
	for (uint32_t i = 0; i < conn->nr_queues; i++)
		queue_free(&conn->queues[i]);
	if (conn->sock >= 0)
		close(conn->sock);
	td_loop_timer_cancel(&conn->timer);
	td_loop_defer_cancel(conn->loop, &conn->free_defer);
	td_loop_defer_cancel(conn->loop, &conn->close_defer);
	if (conn->srv)
		shm_server_conn_gone(conn->srv, conn);
	free(conn);
}

static void conn_free_deferred(struct td_defer *d, void *opaque)
{
	shm_conn_free(opaque);
}

/*
 * A ring's drained callback: its I/O is over.  The memory goes with the
 * connection, once every ring of it is drained.
 */
static void conn_drained(struct blkif_ring *ring, void *opaque)
{
	struct shm_queue *q = opaque;
	struct shm_conn *conn = q->conn;
	struct blkif_ring_stats s;

	if (conn->srv) {
		struct td_shm_server *srv = conn->srv;

		blkif_ring_get_stats(ring, &s);
		shm_ring_stats_add(&srv->closed_ring, &s);
		shm_queue_stats_add(&srv->closed_queues[q->index], q);
		if (srv->closed_nr_queues <= q->index)
			srv->closed_nr_queues = q->index + 1;
	}
	if (!blkif_ring_destroy(ring))
		q->ring = NULL;
	if (!shm_conn_nr_rings(conn))
		shm_conn_free(conn);
}

/*
 * Take what the frontend sent and we did not read, without waiting: a
 * Unix socket closed with unread input resets the connection, and the
 * frontend would lose our error line.
 */
static void conn_drain_input(struct shm_conn *conn)
{
	char buf[SHM_LINE_MAX];
	size_t total = 0;
	ssize_t n;

	while (total < SHM_DRAIN_BYTES &&
	       (n = recv(conn->sock, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		total += (size_t)n;
}

void shm_conn_close(struct shm_conn *conn, const char *why)
{
	if (conn->state == SHM_CONN_CLOSING)
		return;
	if (why) {
		td_vbd_warn(conn->vbd, "shm %s: %s: disconnecting", conn->peer,
			    why);
		if (conn->srv)
			conn->srv->stats.protocol_errors++;
	} else {
		td_vbd_dbg(conn->vbd, "shm %s: disconnected", conn->peer);
	}
	conn->state = SHM_CONN_CLOSING;
	td_loop_del_fd(&conn->sock_fde);
	shm_conn_quiesce(conn);
	conn_drain_input(conn);
	close(conn->sock);
	conn->sock = -1;
	td_loop_timer_cancel(&conn->timer);
	td_loop_defer_cancel(conn->loop, &conn->close_defer);
	/*
	 * The memory stays mapped until the vbd is done with it.  The
	 * drained callbacks are deferred, never called from in here.
	 */
	for (uint32_t i = 0; i < conn->nr_queues; i++)
		if (conn->queues[i].ring)
			blkif_ring_stop(conn->queues[i].ring, conn_drained,
					&conn->queues[i]);
	if (!shm_conn_nr_rings(conn))
		td_loop_defer(conn->loop, &conn->free_defer, conn_free_deferred,
			      conn);
}

static void conn_close_deferred(struct td_defer *d, void *opaque)
{
	struct shm_conn *conn = opaque;

	shm_conn_close(conn, conn->close_why);
}

/* From inside blkif's call stack: close from the event loop instead. */
static void conn_close_later(struct shm_conn *conn, const char *why)
{
	if (conn->state == SHM_CONN_CLOSING || conn->close_defer.queued)
		return;
	snprintf(conn->close_why, sizeof(conn->close_why), "%s", why);
	td_loop_defer(conn->loop, &conn->close_defer, conn_close_deferred,
		      conn);
}

void shm_conn_quiesce(struct shm_conn *conn)
{
	for (uint32_t i = 0; i < conn->nr_queues; i++)
		td_loop_del_fd(&conn->queues[i].kick_fde);
}

void shm_queue_stats_add(struct blkif_queue_report *sum,
			 const struct shm_queue *q)
{
	struct blkif_ring_stats s;

	sum->kicks += q->kicks;
	if (!q->ring)
		return;
	blkif_ring_get_stats(q->ring, &s);
	shm_ring_stats_add(&sum->ring, &s);
}

void shm_conn_add_stats(const struct shm_conn *conn, struct td_shm_stats *out)
{
	struct blkif_ring_stats s;

	for (uint32_t i = 0; i < conn->nr_queues; i++) {
		const struct shm_queue *q = &conn->queues[i];

		if (!q->ring)
			continue;
		blkif_ring_get_stats(q->ring, &s);
		shm_ring_stats_add(&out->ring, &s);
		shm_queue_stats_add(&out->queues[i], q);
		out->queues[i].in_flight += blkif_ring_in_flight(q->ring);
		if (out->nr_queues <= i)
			out->nr_queues = i + 1;
	}
}

/* --- the ring's transport ops -------------------------------------------------- */

static int conn_map_segment(void *opaque, uint32_t gref, uint32_t offset,
			    uint32_t len, enum blkif_map_access access,
			    void **addr)
{
	struct shm_queue *q = opaque;

	if (gref >= q->data_pages)
		return -EINVAL;
	*addr = q->data + (size_t)gref * SHM_PAGE_SIZE + offset;
	return 0;
}

static int conn_copy_indirect(void *opaque, uint32_t gref, void *dst,
			      size_t len)
{
	struct shm_queue *q = opaque;

	if (gref >= q->data_pages || len > SHM_PAGE_SIZE)
		return -EINVAL;
	memcpy(dst, q->data + (size_t)gref * SHM_PAGE_SIZE, len);
	return 0;
}

static void conn_notify(void *opaque)
{
	struct shm_queue *q = opaque;
	uint64_t one = SHM_NOTIFY_VALUE;
	int flags = fcntl(q->notify_fd, F_GETFL);

	if (flags < 0 || !(flags & O_NONBLOCK)) {
		conn_close_later(q->conn, "cleared O_NONBLOCK on the notify "
					  "eventfd");
		return;
	}
	/* EAGAIN: the counter is full, so a wake-up is pending anyway. */
	if (write(q->notify_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		conn_close_later(q->conn, strerror(errno));
}

/* One ring broken: the whole connection (every ring of it) goes. */
static void conn_fatal(void *opaque, int err)
{
	struct shm_queue *q = opaque;

	conn_close_later(q->conn, "broke the ring protocol");
}

static const struct blkif_transport_ops shm_ring_ops = {
	.map_segment = conn_map_segment,
	.copy_indirect = conn_copy_indirect,
	.notify = conn_notify,
	.fatal = conn_fatal,
};

static void conn_on_kick(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct shm_queue *q = opaque;
	uint64_t count;
	struct iovec iov = {&count, sizeof(count)};

	/* EAGAIN: the frontend read its own kick; nothing to clear. */
	if (preadv2(q->kick_fd, &iov, 1, -1, RWF_NOWAIT) < 0 &&
	    errno == EOPNOTSUPP) /* before Linux 5.12: O_NONBLOCK only */
		(void)!read(q->kick_fd, &count, sizeof(count));
	q->kicks++;
	if (q->conn->srv)
		q->conn->srv->stats.kicks++;
	blkif_ring_kick(q->ring);
}

/* --- shared memory -------------------------------------------------------------- */

/* A memfd of bytes, sealed so that nobody can shrink or grow it. */
static int make_memfd(const char *name, size_t bytes, int *out)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int err;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0 ||
	    fcntl(fd, F_ADD_SEALS, SHM_SEALS) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

static int map_memfd(int fd, size_t bytes, void **out)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

/* Memfds and eventfds into fds[SHM_NR_FDS], mapped into q. */
static int queue_make_memory(struct shm_queue *q,
			     const struct shm_connect_msg *m, int *fds)
{
	void *data = NULL;
	int err;

	q->ring_bytes = (size_t)SHM_PAGE_SIZE << m->ring_page_order;
	q->data_pages = m->data_pages;
	q->data_bytes = (size_t)m->data_pages * SHM_PAGE_SIZE;
	if ((err = make_memfd(SHM_RING_MEMFD, q->ring_bytes,
			      &fds[SHM_FD_RING])) ||
	    (err = make_memfd(SHM_DATA_MEMFD, q->data_bytes,
			      &fds[SHM_FD_DATA])) ||
	    (err = map_memfd(fds[SHM_FD_RING], q->ring_bytes, &q->sring)))
		return err;
	if ((err = map_memfd(fds[SHM_FD_DATA], q->data_bytes, &data)))
		return err;
	q->data = data;
	q->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->kick_fd < 0 || q->notify_fd < 0)
		return -errno;
	fds[SHM_FD_KICK] = q->kick_fd;
	fds[SHM_FD_NOTIFY] = q->notify_fd;
	/* The backend initialises the ring: the frontend must not. */
	SHARED_RING_INIT((blkif_sring_t *)q->sring);
	return 0;
}

static int queue_make_ring(struct shm_queue *q, const struct shm_connect_msg *m)
{
	struct shm_conn *conn = q->conn;
	struct blkif_config cfg = conn->srv->cfg;
	struct blkif_ring_params p = {
		.sring = q->sring,
		.ring_order = m->ring_page_order,
		.protocol = BLKIF_PROTOCOL_NATIVE,
		.queue = q->index,
		.ops = &shm_ring_ops,
		.opaque = q,
	};

	if (m->max_indirect_segments)
		cfg.max_indirect_segments = m->max_indirect_segments;
	return blkif_ring_create(conn->vbd, &cfg, &p, &q->ring);
}

/* --- messages --------------------------------------------------------------------- */

/* One line, whole, with fds attached when nfds > 0. */
static int conn_send(struct shm_conn *conn, const char *line, size_t len,
		     const int *fds, unsigned int nfds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * SHM_NR_FDS * SHM_MAX_QUEUES)];
	} u;
	struct iovec iov = {(void *)line, len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;
	ssize_t n;

	if (nfds) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	n = sendmsg(conn->sock, &msg, SHM_SEND_FLAGS);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EAGAIN;
}

static int conn_send_offer(struct shm_conn *conn)
{
	const struct td_shm_server *srv = conn->srv;
	const struct td_disk_info *info = td_vbd_get_info(conn->vbd);
	struct blkif_features f;
	struct shm_backend_msg m = {.version = SHM_PROTO_VERSION};
	char line[SHM_LINE_MAX];
	int n;

	blkif_get_features(&srv->cfg, conn->vbd, &f);
	m.sectors = info->size_sectors;
	conn->told_sectors = m.sectors;
	m.sector_size = info->sector_size;
	m.info = info->read_only ? SHM_INFO_READONLY : 0;
	m.flush_cache = f.flush_cache;
	m.discard = f.discard;
	m.discard_secure = f.discard_secure;
	m.max_indirect_segments = f.max_indirect_segments;
	m.max_ring_page_order = f.max_ring_page_order;
	m.max_data_pages = srv->max_data_pages;
	m.max_queues = srv->max_queues;
	n = shm_format_backend(&m, line, sizeof(line));
	return n < 0 ? n : conn_send(conn, line, (size_t)n, NULL, 0);
}

int shm_conn_tell_size(struct shm_conn *conn)
{
	uint64_t sectors = td_vbd_get_info(conn->vbd)->size_sectors;
	char line[SHM_LINE_MAX];
	int n, err;

	if (conn->state != SHM_CONN_CONNECTED || sectors == conn->told_sectors)
		return 0;
	n = shm_format_resized(sectors, line, sizeof(line));
	err = n < 0 ? n : conn_send(conn, line, (size_t)n, NULL, 0);
	if (err) {
		td_vbd_warn(conn->vbd, "shm %s: cannot tell the new size: %s",
			    conn->peer, strerror(-err));
		return err;
	}
	td_vbd_info(conn->vbd, "shm %s: told the new size, %" PRIu64 " sectors",
		    conn->peer, sectors);
	conn->told_sectors = sectors;
	return 1;
}

/* Answer "error ENAME why" (best effort) and drop the frontend. */
static void conn_refuse(struct shm_conn *conn, int err, const char *why)
{
	char line[SHM_LINE_MAX];
	int n = shm_format_error(err, why, line, sizeof(line));

	if (n > 0)
		conn_send(conn, line, (size_t)n, NULL, 0);
	shm_conn_close(conn, why);
}

/* What this backend accepts, beyond what the protocol allows. */
static int conn_check_connect(const struct shm_conn *conn,
			      const struct shm_connect_msg *m, char *why,
			      size_t len)
{
	const struct td_shm_server *srv = conn->srv;
	uint32_t offer = srv->cfg.max_indirect_segments;

	if (m->nr_queues > srv->max_queues) {
		snprintf(why, len,
			 "multi-queue-num-queues=%" PRIu32
			 " is above multi-queue-max-queues=%" PRIu32,
			 m->nr_queues, srv->max_queues);
		return -EINVAL;
	}
	if (m->ring_page_order > srv->cfg.max_ring_order) {
		snprintf(why, len,
			 "ring-page-order=%" PRIu32
			 " is above max-ring-page-order=%" PRIu32,
			 m->ring_page_order, srv->cfg.max_ring_order);
		return -EINVAL;
	}
	if (m->data_pages > srv->max_data_pages) {
		snprintf(why, len,
			 "data-pages=%" PRIu32
			 " is above max-data-pages=%" PRIu32,
			 m->data_pages, srv->max_data_pages);
		return -E2BIG;
	}
	if (m->max_indirect_segments > offer) {
		snprintf(why, len,
			 "max-indirect-segments=%" PRIu32
			 " is above the %" PRIu32 " offered",
			 m->max_indirect_segments, offer);
		return -EINVAL;
	}
	return 0;
}

/* Every ring's memory, eventfds and blkif ring; fds[q * SHM_NR_FDS + i]. */
static int conn_make_queues(struct shm_conn *conn,
			    const struct shm_connect_msg *m, int *fds)
{
	int err = 0;

	for (uint32_t i = 0; i < m->nr_queues && !err; i++) {
		struct shm_queue *q = &conn->queues[i];

		conn->nr_queues = i + 1; /* shm_conn_free cleans it up */
		err = queue_make_memory(q, m, fds + i * SHM_NR_FDS);
		if (!err)
			err = queue_make_ring(q, m);
	}
	return err;
}

static int conn_connect(struct shm_conn *conn, const struct shm_connect_msg *m,
			char *why, size_t len)
{
	int fds[SHM_NR_FDS * SHM_MAX_QUEUES];
	struct shm_connected_msg cm;
	char line[SHM_LINE_MAX];
	int n, err;

	for (unsigned int i = 0; i < SHM_NR_FDS * SHM_MAX_QUEUES; i++)
		fds[i] = -1;
	err = conn_make_queues(conn, m, fds);
	if (!err) {
		cm.ring_page_order = m->ring_page_order;
		cm.ring_bytes = conn->queues[0].ring_bytes;
		cm.data_pages = conn->queues[0].data_pages;
		cm.data_bytes = conn->queues[0].data_bytes;
		cm.max_indirect_segments =
			m->max_indirect_segments
				?: conn->srv->cfg.max_indirect_segments;
		cm.nr_queues = m->nr_queues;
		n = shm_format_connected(&cm, line, sizeof(line));
		err = n < 0 ? n
			    : conn_send(conn, line, (size_t)n, fds,
					SHM_NR_FDS * m->nr_queues);
	}
	/* The mappings keep the memory; the frontend has its own fds. */
	for (uint32_t q = 0; q < m->nr_queues; q++)
		for (int i = SHM_FD_RING; i <= SHM_FD_DATA; i++)
			if (fds[q * SHM_NR_FDS + i] >= 0)
				close(fds[q * SHM_NR_FDS + i]);
	if (err)
		snprintf(why, len, "cannot set up the shared memory: %s",
			 strerror(-err));
	return err;
}

static void conn_negotiate(struct shm_conn *conn, const char *line, size_t len)
{
	struct shm_connect_msg m;
	char why[SHM_WHY_MAX];
	int err = shm_parse_connect(line, len, &m, why, sizeof(why));

	if (!err)
		err = conn_check_connect(conn, &m, why, sizeof(why));
	if (!err)
		err = conn_connect(conn, &m, why, sizeof(why));
	if (err) {
		conn_refuse(conn, err, why);
		return;
	}
	conn->state = SHM_CONN_CONNECTED;
	td_loop_timer_cancel(&conn->timer);
	for (uint32_t i = 0; i < conn->nr_queues && !err; i++)
		err = td_loop_add_fd(conn->loop, &conn->queues[i].kick_fde,
				     conn->queues[i].kick_fd, EPOLLIN,
				     conn_on_kick, &conn->queues[i]);
	if (err) {
		shm_conn_close(conn, "cannot watch the kick eventfd");
		return;
	}
	/* The disk grew between the offer and now: say so at once. */
	shm_conn_tell_size(conn);
	td_vbd_info(conn->vbd,
		    "shm %s: %" PRIu32 " ring(s) of order %" PRIu32 " (%" PRIu32
		    " slots), %" PRIu32 " data pages, %" PRIu32
		    " segments per request",
		    conn->peer, conn->nr_queues, m.ring_page_order,
		    blkif_ring_size(conn->queues[0].ring), m.data_pages,
		    m.max_indirect_segments
			    ?: conn->srv->cfg.max_indirect_segments);
}

/* --- the socket ---------------------------------------------------------------- */

/* Gather the "connect" line; negotiate once it is whole. */
static void conn_read_handshake(struct shm_conn *conn)
{
	ssize_t n = recv(conn->sock, conn->in + conn->in_len,
			 sizeof(conn->in) - conn->in_len, MSG_DONTWAIT);
	char why[SHM_WHY_MAX];
	char *lf;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		shm_conn_close(conn, NULL);
		return;
	}
	conn->in_len += (uint32_t)n;
	lf = memchr(conn->in, '\n', conn->in_len);
	if (!lf) {
		if (conn->in_len < sizeof(conn->in))
			return;
		snprintf(why, sizeof(why), "line longer than %u bytes",
			 SHM_LINE_MAX);
		conn_refuse(conn, -EPROTO, why);
		return;
	}
	if (lf + 1 != conn->in + conn->in_len) {
		conn_refuse(conn, -EPROTO, "bytes after the connect line");
		return;
	}
	conn_negotiate(conn, conn->in, (size_t)(lf - conn->in));
}

/* Once connected the socket only says that the frontend is alive. */
static void conn_read_connected(struct shm_conn *conn)
{
	char byte;
	ssize_t n = recv(conn->sock, &byte, 1, MSG_DONTWAIT);

	if (n > 0)
		shm_conn_close(conn,
			       "sent data on the socket after connecting");
	else if (n == 0 || (errno != EAGAIN && errno != EINTR))
		shm_conn_close(conn, NULL);
}

static void conn_on_sock(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct shm_conn *conn = opaque;

	if (conn->state == SHM_CONN_HANDSHAKE)
		conn_read_handshake(conn);
	else if (conn->state == SHM_CONN_CONNECTED)
		conn_read_connected(conn);
}

static void conn_timeout(struct td_timer *t, void *opaque)
{
	struct shm_conn *conn = opaque;

	conn_refuse(conn, -ETIMEDOUT, "no connect line in time");
}

int shm_conn_create(struct td_shm_server *srv, int fd, const char *peer)
{
	struct shm_conn *conn = calloc(1, sizeof(*conn));
	int err;

	if (!conn) {
		close(fd);
		return -ENOMEM;
	}
	conn->srv = srv;
	conn->vbd = srv->vbd;
	conn->loop = srv->loop;
	conn->id = (uint32_t)srv->stats.clients_total;
	conn->sock = fd;
	for (uint32_t i = 0; i < SHM_MAX_QUEUES; i++) {
		conn->queues[i].conn = conn;
		conn->queues[i].index = i;
		conn->queues[i].kick_fd = conn->queues[i].notify_fd = -1;
	}
	snprintf(conn->peer, sizeof(conn->peer), "%s", peer);
	TAILQ_INSERT_TAIL(&srv->conns, conn, link);
	srv->nr_conns++;
	err = td_loop_add_fd(srv->loop, &conn->sock_fde, fd, EPOLLIN,
			     conn_on_sock, conn);
	if (!err)
		err = conn_send_offer(conn);
	if (err) {
		conn->state = SHM_CONN_CLOSING;
		td_loop_del_fd(&conn->sock_fde);
		shm_conn_free(conn);
		return err;
	}
	td_loop_timer_arm(srv->loop, &conn->timer,
			  srv->handshake_timeout_ms * SHM_US_PER_MS,
			  conn_timeout, conn);
	return 0;
}
