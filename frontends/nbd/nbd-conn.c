/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-conn.c - one NBD connection: its input state machine, socket I/O
 * and life cycle.  The steps of the handshake are in nbd-handshake.c,
 * those of the commands in nbd-cmd.c.
 *
 * Input: bytes are read into inbuf (a WRITE's payload straight into its
 * command's buffer when inbuf is empty) and consumed by a state machine,
 * enum nbd_rstate, one step at a time.  A step that lacks bytes waits for
 * EPOLLIN; a step that lacks a resource (a free slot, buffer budget, room
 * for option replies) sets conn->blocked, which drops EPOLLIN: the client
 * is pushed back through TCP.  Whatever frees that resource defers a
 * kick that parses again.
 *
 * Output: handshake replies go to outbuf; each command's reply header
 * (simple, or a structured chunk's) and what follows it in its buffer (a
 * READ's data, BLOCK_STATUS chunks) stay in its slot, queued on out_q.
 * Replies are
 * written at the end of the event-loop pass (the server's hook), all
 * queued replies in one sendmsg; when the socket is full the rest waits
 * for EPOLLOUT.  A slot is freed, and its buffer kept for reuse, once its
 * reply is written.
 *
 * Every path that ends a connection goes through nbd_conn_close(); the
 * memory is freed later, by the server, once the vbd has completed every
 * I/O the connection gave it.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frontends/nbd/nbd-int.h"

static void conn_parse(struct nbd_conn *conn);
static void conn_read(struct nbd_conn *conn);
static void conn_update_events(struct nbd_conn *conn);

/* --- helpers for the steps ----------------------------------------- */

void nbd_conn_mark_dirty(struct nbd_conn *conn)
{
	/* With want_out set, EPOLLOUT does the writing. */
	if (conn->dirty || conn->dead || conn->want_out || !conn->srv)
		return;
	conn->dirty = true;
	TAILQ_INSERT_TAIL(&conn->srv->dirty, conn, dirty_link);
}

void nbd_conn_fail(struct nbd_conn *conn, const char *fmt, ...)
{
	char msg[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	td_vbd_warn(conn->vbd, "nbd %s: %s: disconnecting", conn->peer, msg);
	if (conn->srv)
		conn->srv->stats.protocol_errors++;
	nbd_conn_close(conn);
}

static void conn_kick(struct td_defer *d, void *opaque)
{
	struct nbd_conn *conn = opaque;

	conn->blocked = false;
	conn_parse(conn);
	if (nbd_tls_pending_in(conn)) /* no fd event will say so */
		conn_read(conn);
	conn_update_events(conn);
}

/* A resource was freed: a blocked connection parses again, later. */
void nbd_conn_unblock(struct nbd_conn *conn)
{
	if (conn->blocked && !conn->dead)
		td_loop_defer(conn->loop, &conn->kick, conn_kick, conn);
}

/* --- deadlines ------------------------------------------------------- */

#define NS_PER_MS 1000000ull

struct conn_deadline {
	uint64_t at_ns; /* 0: none */
	uint32_t limit_ms;
	const char *what;
};

static void deadline_min(struct conn_deadline *d, uint64_t start_ns,
			 uint32_t limit_ms, const char *what)
{
	uint64_t at = start_ns + limit_ms * NS_PER_MS;

	if (!d->at_ns || at < d->at_ns) {
		d->at_ns = at;
		d->limit_ms = limit_ms;
		d->what = what;
	}
}

bool nbd_conn_idle(const struct nbd_conn *conn)
{
	return conn->transmission && !conn->draining && !conn->dead &&
	       conn->rstate == NBD_RS_CMD_HEADER && !nbd_in_avail(conn) &&
	       !conn->vbd_inflight && !nbd_has_output(conn);
}

/* Waiting for the rest of a request from the client (not for us). */
static bool conn_mid_request(const struct nbd_conn *conn)
{
	if (conn->blocked)
		return false;
	return conn->rstate == NBD_RS_CMD_PAYLOAD ||
	       conn->rstate == NBD_RS_CMD_SKIP ||
	       (conn->rstate == NBD_RS_CMD_HEADER && nbd_in_avail(conn));
}

/* The earliest deadline that applies to conn now (nbd.h's head). */
static struct conn_deadline conn_deadline(const struct nbd_conn *conn)
{
	const struct td_nbd_server *srv = conn->srv;
	struct conn_deadline d = {0};

	if (conn->dead || !srv)
		return d;
	if (conn->draining) {
		deadline_min(&d, conn->drain_start_ns, NBD_DRAIN_TIMEOUT_MS,
			     "replies not taken");
	} else if (!conn->transmission) {
		deadline_min(&d, conn->accepted_ns, srv->handshake_timeout_ms,
			     "handshake not finished");
	} else {
		if (conn_mid_request(conn))
			deadline_min(&d, conn->in_start_ns, srv->io_timeout_ms,
				     "request not received in full");
		if (conn->want_out)
			deadline_min(&d, conn->out_progress_ns,
				     srv->io_timeout_ms, "replies not taken");
		if (srv->idle_timeout_ms && nbd_conn_idle(conn))
			deadline_min(&d, conn->active_ns, srv->idle_timeout_ms,
				     "idle");
	}
	return d;
}

static void conn_timer_fired(struct td_timer *t, void *opaque)
{
	struct nbd_conn *conn = opaque;
	struct conn_deadline d = conn_deadline(conn);

	if (!d.at_ns)
		return;
	if (d.at_ns > td_now_ns()) {
		nbd_conn_update_timer(conn);
		return;
	}
	conn->srv->stats.timed_out++;
	td_vbd_warn(conn->vbd, "nbd %s: %s within %u ms: disconnecting",
		    conn->peer, d.what, d.limit_ms);
	nbd_conn_close(conn);
}

/*
 * Armed lazily: only when no earlier expiry is pending, so that the I/O
 * path moves no timer; an expiry that finds its deadline moved re-arms.
 */
void nbd_conn_update_timer(struct nbd_conn *conn)
{
	struct conn_deadline d = conn_deadline(conn);
	uint64_t now;

	if (!d.at_ns || (td_timer_armed(&conn->timer) &&
			 conn->timer.deadline_ns <= d.at_ns))
		return;
	now = td_now_ns();
	td_loop_timer_arm(conn->loop, &conn->timer,
			  d.at_ns > now ? (d.at_ns - now) / 1000 : 0,
			  conn_timer_fired, conn);
}

/*
 * No more input: after DISC, ABORT, EOF or at shutdown.  What is in
 * flight finishes and its replies go out (bounded by the drain timeout),
 * then nbd_conn_check_drained() closes.  A command half read is dropped.
 */
void nbd_conn_stop_input(struct nbd_conn *conn)
{
	if (conn->cur) {
		nbd_slot_put(conn, conn->cur);
		conn->cur = NULL;
	}
	conn->rstate = NBD_RS_STOPPED;
	conn->in_rpos = conn->in_wpos = 0;
	conn->draining = true;
	conn->drain_start_ns = td_now_ns();
	nbd_conn_update_timer(conn);
}

void nbd_conn_check_drained(struct nbd_conn *conn)
{
	if (conn->draining && !conn->dead && !conn->vbd_inflight &&
	    !nbd_has_output(conn))
		nbd_conn_close(conn);
}

/* --- input --------------------------------------------------------- */

/* Discard option data or a refused WRITE's payload, then answer. */
static bool conn_step_skip(struct nbd_conn *conn)
{
	uint32_t n = nbd_in_avail(conn);

	if (n > conn->skip)
		n = (uint32_t)conn->skip;
	nbd_in_consume(conn, n);
	conn->skip -= n;
	if (conn->skip)
		return false;
	conn->in_start_ns = td_now_ns(); /* what follows is a new request */
	if (conn->rstate == NBD_RS_OPT_SKIP) {
		nbd_hs_option(conn, NULL);
	} else {
		struct nbd_slot *slot = conn->cur;

		conn->cur = NULL;
		conn->rstate = NBD_RS_CMD_HEADER;
		nbd_cmd_reply(conn, slot);
	}
	return !conn->dead;
}

static void conn_parse(struct nbd_conn *conn)
{
	bool more = true;

	while (more && !conn->dead && !conn->blocked) {
		switch (conn->rstate) {
		case NBD_RS_CLIENT_FLAGS:
			more = nbd_hs_step_client_flags(conn);
			break;
		case NBD_RS_OPT_HEADER:
			more = nbd_hs_step_opt_header(conn);
			break;
		case NBD_RS_OPT_DATA:
			more = nbd_hs_step_opt_data(conn);
			break;
		case NBD_RS_OPT_SKIP:
		case NBD_RS_CMD_SKIP:
			more = conn_step_skip(conn);
			break;
		case NBD_RS_CMD_HEADER:
			more = nbd_cmd_step_header(conn);
			break;
		case NBD_RS_CMD_BUFFER:
			more = nbd_cmd_step_buffer(conn);
			break;
		case NBD_RS_CMD_PAYLOAD:
			more = nbd_cmd_step_payload(conn);
			break;
		case NBD_RS_STOPPED:
		case NBD_RS_TLS:
			more = false;
			break;
		}
	}
}

static bool conn_wants_input(const struct nbd_conn *conn)
{
	return !conn->dead && !conn->blocked &&
	       conn->rstate != NBD_RS_STOPPED && conn->rstate != NBD_RS_TLS &&
	       nbd_in_avail(conn) < NBD_INBUF_BYTES;
}

/*
 * One readv: into the free end of inbuf, preceded by the rest of the
 * current WRITE's buffer when inbuf holds nothing of it.  Returns the
 * bytes read, 0 at end of stream, -EAGAIN or -errno.
 */
static ssize_t conn_recv(struct nbd_conn *conn)
{
	struct nbd_slot *slot = conn->cur;
	bool boundary =
		conn->rstate == NBD_RS_CMD_HEADER && !nbd_in_avail(conn);
	struct iovec iov[2];
	size_t direct = 0;
	int cnt = 0;
	ssize_t n;

	if (conn->in_rpos) {
		memmove(conn->inbuf, nbd_in_ptr(conn), nbd_in_avail(conn));
		conn->in_wpos -= conn->in_rpos;
		conn->in_rpos = 0;
	}
	if (conn->rstate == NBD_RS_CMD_PAYLOAD && !conn->in_wpos) {
		direct = slot->req.length - slot->payload_done;
		iov[cnt].iov_base = slot->buf + slot->payload_done;
		iov[cnt++].iov_len = direct;
	}
	iov[cnt].iov_base = conn->inbuf + conn->in_wpos;
	iov[cnt++].iov_len = NBD_INBUF_BYTES - conn->in_wpos;
	if (nbd_tls_active(conn))
		n = nbd_tls_recv(conn, iov[0].iov_base, iov[0].iov_len);
	else if ((n = readv(conn->fd, iov, cnt)) < 0)
		n = errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
			    ? -EAGAIN
			    : -errno;
	if (n < 0)
		return n;
	conn->bytes_in += (uint64_t)n;
	if (boundary && n)
		conn->in_start_ns = td_now_ns(); /* a request header begins */
	if ((size_t)n <= direct) {
		if (direct)
			slot->payload_done += (uint32_t)n;
		return n;
	}
	if (direct)
		slot->payload_done += (uint32_t)direct;
	conn->in_wpos += (uint32_t)((size_t)n - direct);
	return n;
}

static void conn_eof(struct nbd_conn *conn)
{
	bool between =
		nbd_in_avail(conn) == 0 && conn->rstate == NBD_RS_CMD_HEADER;

	if (!conn->transmission) {
		nbd_conn_fail(conn, "closed during the handshake");
		return;
	}
	if (!between) {
		td_vbd_warn(conn->vbd, "nbd %s: truncated request", conn->peer);
		conn->srv->stats.protocol_errors++;
	}
	/* Half-closed: what was sent in full is still answered. */
	nbd_conn_stop_input(conn);
	nbd_conn_check_drained(conn);
}

static void conn_read(struct nbd_conn *conn)
{
	for (int i = 0; i < NBD_READS_PER_EVENT && conn_wants_input(conn);
	     i++) {
		ssize_t n = conn_recv(conn);

		if (n == -EAGAIN)
			return;
		if (n < 0) {
			td_vbd_warn(conn->vbd, "nbd %s: read: %s", conn->peer,
				    strerror((int)-n));
			nbd_conn_close(conn);
			return;
		}
		if (n == 0) {
			conn_eof(conn);
			return;
		}
		conn_parse(conn);
	}
}

/* --- output -------------------------------------------------------- */

/* The iovecs of what is queued, at most NBD_WRITE_IOV_MAX. */
static int conn_fill_iov(struct nbd_conn *conn, struct iovec *iov,
			 size_t *total)
{
	uint32_t off = conn->out_off;
	struct nbd_slot *slot;
	int n = 0;

	*total = 0;
	if (conn->out_wpos != conn->out_rpos) {
		iov[n].iov_base = conn->outbuf + conn->out_rpos;
		iov[n++].iov_len = conn->out_wpos - conn->out_rpos;
	}
	TAILQ_FOREACH(slot, &conn->out_q, link)
	{
		uint32_t data = nbd_slot_reply_bytes(slot);
		uint32_t doff =
			off > slot->reply_len ? off - slot->reply_len : 0;

		if (n + 2 > NBD_WRITE_IOV_MAX)
			break;
		if (off < slot->reply_len) {
			iov[n].iov_base = slot->reply + off;
			iov[n++].iov_len = slot->reply_len - off;
		}
		if (data > doff) {
			iov[n].iov_base = slot->buf + doff;
			iov[n++].iov_len = data - doff;
		}
		off = 0;
	}
	for (int i = 0; i < n; i++)
		*total += iov[i].iov_len;
	return n;
}

/* n bytes were sent: advance outbuf and out_q, freeing sent slots. */
static void conn_consume_output(struct nbd_conn *conn, size_t n)
{
	size_t hs = conn->out_wpos - conn->out_rpos;

	hs = n < hs ? n : hs;
	conn->out_rpos += (uint32_t)hs;
	n -= hs;
	if (conn->out_rpos == conn->out_wpos)
		conn->out_rpos = conn->out_wpos = 0;
	while (n) {
		struct nbd_slot *slot = TAILQ_FIRST(&conn->out_q);
		size_t left = slot->reply_len + nbd_slot_reply_bytes(slot) -
			      conn->out_off;

		if (n < left) {
			conn->out_off += (uint32_t)n;
			break;
		}
		n -= left;
		conn->out_off = 0;
		TAILQ_REMOVE(&conn->out_q, slot, link);
		nbd_slot_put(conn, slot);
	}
	nbd_conn_unblock(conn); /* room in outbuf for more options */
}

/* One sendmsg, or TLS records.  Bytes taken, -EAGAIN or -errno. */
static ssize_t conn_send(struct nbd_conn *conn, struct iovec *iov, int cnt)
{
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};
	ssize_t n;

	if (nbd_tls_active(conn))
		return nbd_tls_send(conn, iov, cnt);
	/* MSG_NOSIGNAL: a vanished client is EPIPE, not SIGPIPE. */
	do
		n = sendmsg(conn->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return n;
}

static void conn_write(struct nbd_conn *conn)
{
	while (!conn->dead && nbd_has_output(conn)) {
		struct iovec iov[NBD_WRITE_IOV_MAX];
		size_t total;
		int cnt = conn_fill_iov(conn, iov, &total);
		ssize_t n = conn_send(conn, iov, cnt);

		if (n == -EAGAIN) {
			if (!conn->want_out)
				conn->out_progress_ns = td_now_ns();
			conn->want_out = true;
			return;
		}
		if (n < 0) {
			td_vbd_info(conn->vbd, "nbd %s: write: %s", conn->peer,
				    strerror((int)-n));
			nbd_conn_close(conn);
			return;
		}
		conn->bytes_out += (uint64_t)n;
		conn->out_progress_ns = conn->active_ns = td_now_ns();
		conn_consume_output(conn, (size_t)n);
		if ((size_t)n < total) {
			conn->want_out = true;
			return;
		}
	}
	conn->want_out = false;
	nbd_tls_output_drained(conn); /* STARTTLS's ACK is out */
	nbd_conn_check_drained(conn);
}

/* --- events -------------------------------------------------------- */

static void conn_update_events(struct nbd_conn *conn)
{
	uint32_t events = 0;
	int err;

	if (conn->dead)
		return;
	if (conn_wants_input(conn))
		events |= EPOLLIN;
	if (conn->want_out || nbd_tls_recv_wants_out(conn))
		events |= EPOLLOUT;
	if (conn->rstate == NBD_RS_TLS)
		events |= nbd_tls_handshake_events(conn);
	if ((events & EPOLLIN) && nbd_tls_pending_in(conn))
		td_loop_defer(conn->loop, &conn->kick, conn_kick, conn);
	err = td_loop_mod_fd(&conn->fde, events);
	if (err) {
		td_vbd_err(conn->vbd, "nbd %s: epoll: %s", conn->peer,
			   strerror(-err));
		nbd_conn_close(conn);
		return;
	}
	nbd_conn_update_timer(conn);
}

static void conn_event(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct nbd_conn *conn = opaque;

	if (conn->rstate == NBD_RS_TLS && nbd_tls_handshake_event(conn)) {
		conn_update_events(conn);
		return;
	}
	/*
	 * Read first even on a hang-up: a client may send NBD_OPT_ABORT or
	 * NBD_CMD_DISC and close at once, and that is a clean goodbye.
	 */
	if ((events & EPOLLIN) ||
	    ((events & EPOLLOUT) && nbd_tls_recv_wants_out(conn)))
		conn_read(conn);
	if (conn->dead)
		return;
	/* Reported even when not asked for: the client is gone for good. */
	if (events & (EPOLLERR | EPOLLHUP)) {
		if (!conn->transmission && !conn->draining)
			nbd_conn_fail(conn, "hung up during the handshake");
		else
			nbd_conn_close(conn);
		return;
	}
	if (events & EPOLLOUT)
		conn_write(conn);
	conn_update_events(conn);
}

/* --- life cycle ---------------------------------------------------- */

/* One mapping: the connection, then its slots (zeroed, as calloc). */
static struct nbd_conn *conn_map(struct td_nbd_server *srv)
{
	size_t head =
		(sizeof(struct nbd_conn) + _Alignof(struct nbd_slot) - 1) &
		~(_Alignof(struct nbd_slot) - 1);
	size_t bytes =
		head + (size_t)srv->max_inflight * sizeof(struct nbd_slot);
	struct nbd_conn *conn;
	void *p;

	if (nbd_map(srv, bytes, &p))
		return NULL;
	conn = p;
	conn->map_bytes = bytes;
	conn->slots = (struct nbd_slot *)((char *)p + head);
	conn->nr_slots = srv->max_inflight;
	return conn;
}

static void conn_init(struct nbd_conn *conn, struct td_nbd_server *srv, int fd,
		      const char *peer)
{
	conn->srv = srv;
	conn->vbd = srv->vbd;
	conn->loop = srv->loop;
	conn->fd = fd;
	conn->id = srv->stats.clients_total + 1;
	conn->accepted_ns = conn->active_ns = td_now_ns();
	snprintf(conn->peer, sizeof(conn->peer), "%s", peer);
	TAILQ_INIT(&conn->free_slots);
	TAILQ_INIT(&conn->out_q);
	for (uint32_t i = 0; i < conn->nr_slots; i++) {
		conn->slots[i].conn = conn;
		TAILQ_INSERT_TAIL(&conn->free_slots, &conn->slots[i], link);
	}
	conn->out_wpos = (uint32_t)nbd_put_greeting(conn->outbuf);
	conn->rstate = NBD_RS_CLIENT_FLAGS;
}

int nbd_conn_create(struct td_nbd_server *srv, int fd, const char *peer)
{
	struct nbd_conn *conn = conn_map(srv);
	int err;

	if (!conn) {
		close(fd);
		return -ENOMEM;
	}
	conn_init(conn, srv, fd, peer);
	err = td_loop_add_fd(srv->loop, &conn->fde, fd, EPOLLIN, conn_event,
			     conn);
	if (err) {
		nbd_unmap(srv, conn, conn->map_bytes);
		close(fd);
		return err;
	}
	TAILQ_INSERT_TAIL(&srv->conns, conn, link);
	srv->stats.clients++;
	srv->stats.clients_total++;
	srv->stats.handshaking++;
	nbd_conn_update_timer(conn); /* the handshake's deadline */
	nbd_conn_mark_dirty(conn);   /* the greeting goes out at the pass end */
	return 0;
}

void nbd_conn_flush(struct nbd_conn *conn)
{
	conn_write(conn);
	conn_update_events(conn);
}

void nbd_conn_shutdown(struct nbd_conn *conn)
{
	if (!conn->transmission) {
		nbd_conn_close(conn);
		return;
	}
	if (!conn->draining)
		nbd_conn_stop_input(conn);
	nbd_conn_check_drained(conn);
	conn_update_events(conn);
}

void nbd_conn_close(struct nbd_conn *conn)
{
	struct td_nbd_server *srv = conn->srv;
	struct nbd_slot *slot;

	if (conn->dead)
		return;
	conn->dead = true;
	td_loop_del_fd(&conn->fde);
	nbd_tls_close(conn);
	close(conn->fd);
	conn->fd = -1;
	td_loop_timer_cancel(&conn->timer);
	td_loop_defer_cancel(conn->loop, &conn->kick);
	while ((slot = TAILQ_FIRST(&conn->out_q))) {
		TAILQ_REMOVE(&conn->out_q, slot, link);
		nbd_slot_put(conn, slot);
	}
	conn->out_off = 0;
	if (conn->cur) {
		nbd_slot_put(conn, conn->cur);
		conn->cur = NULL;
	}
	if (conn->dirty) {
		TAILQ_REMOVE(&srv->dirty, conn, dirty_link);
		conn->dirty = false;
	}
	TAILQ_REMOVE(&srv->conns, conn, link);
	TAILQ_INSERT_TAIL(&srv->dead, conn, link);
	srv->nr_dead++;
	srv->stats.clients--;
	if (conn->transmission)
		srv->nr_established--;
	else
		srv->stats.handshaking--;
	td_vbd_dbg(conn->vbd, "nbd %s: closed (%u I/O still in the vbd)",
		   conn->peer, conn->vbd_inflight);
}

/* conn->srv is NULL for a connection orphaned by the destroy op. */
void nbd_conn_free(struct nbd_conn *conn)
{
	struct td_nbd_server *srv = conn->srv;

	for (uint32_t i = 0; i < conn->nr_slots; i++)
		if (conn->slots[i].buf)
			nbd_unmap(srv, conn->slots[i].buf,
				  conn->slots[i].buf_bytes);
	nbd_tls_free(conn);
	nbd_unmap(srv, conn, conn->map_bytes);
}
