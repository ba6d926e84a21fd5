/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd.c - the NBD server: parameters, listening sockets (unix and TCP),
 * accepting clients, the pass-end hook that writes replies and frees
 * closed connections, and shutdown.  One connection's protocol is in
 * nbd-conn.c, the wire format in nbd-proto.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/sock.h"
#include "common/util.h"
#include "frontends/nbd/nbd-int.h"

#define NBD_LISTEN_BACKLOG 128
#define NBD_UNIX_PREFIX	   "unix:"
#define NBD_TCP_PREFIX	   "tcp:"

/* --- admission ------------------------------------------------------------ */

static double nbd_secs_since(uint64_t ns)
{
	uint64_t now = td_now_ns();

	return now > ns ? (double)(now - ns) / 1e9 : 0.0;
}

/* The handshake slots are full: the oldest handshake makes room. */
static void nbd_evict_handshake(struct td_nbd_server *srv, const char *peer)
{
	struct nbd_conn *conn;

	TAILQ_FOREACH(conn, &srv->conns, link)
	{
		if (!conn->transmission)
			break;
	}
	if (!conn)
		return;
	td_vbd_warn(srv->vbd,
		    "nbd %s: all %u handshake slots taken: closing the oldest "
		    "handshake, %s (%.1f s old), for it",
		    peer, srv->max_handshakes, conn->peer,
		    nbd_secs_since(conn->accepted_ns));
	srv->stats.evicted++;
	nbd_conn_close(conn);
}

/* Admit a connected socket, or refuse it.  Takes fd. */
static int nbd_serve(struct td_nbd_server *srv, int fd, const char *peer)
{
	int err;

	if (srv->fe.stopping) {
		close(fd);
		srv->stats.refused++;
		td_vbd_warn(srv->vbd, "nbd %s: refused: shutting down", peer);
		return -ESHUTDOWN;
	}
	if (srv->stats.handshaking >= srv->max_handshakes)
		nbd_evict_handshake(srv, peer);
	err = nbd_conn_create(srv, fd, peer);
	if (err)
		td_vbd_err(srv->vbd, "nbd %s: %s", peer, strerror(-err));
	return err;
}

/* Established slots in use: open ones, and closed ones the vbd holds. */
static uint32_t nbd_established_used(const struct td_nbd_server *srv)
{
	const struct nbd_conn *conn;
	uint32_t n = srv->nr_established;

	TAILQ_FOREACH(conn, &srv->dead, link)
	{
		if (conn->vbd_inflight)
			n++;
	}
	return n;
}

static struct nbd_conn *nbd_idle_victim(struct td_nbd_server *srv)
{
	struct nbd_conn *conn, *victim = NULL;

	TAILQ_FOREACH(conn, &srv->conns, link)
	{
		if (nbd_conn_idle(conn) &&
		    (!victim || conn->active_ns < victim->active_ns))
			victim = conn;
	}
	return victim;
}

int nbd_admit(struct nbd_conn *conn)
{
	struct td_nbd_server *srv = conn->srv;
	struct nbd_conn *victim;

	if (nbd_established_used(srv) < srv->max_clients)
		return 0;
	victim = nbd_idle_victim(srv);
	if (!victim) {
		srv->stats.busy_refusals++;
		td_vbd_warn(srv->vbd,
			    "nbd %s: refused: all %u connections are busy "
			    "(none idle)",
			    conn->peer, srv->max_clients);
		return -EBUSY;
	}
	td_vbd_warn(srv->vbd,
		    "nbd %s: idle for %.1f s: closed to make room for %s "
		    "(all %u connections in use)",
		    victim->peer, nbd_secs_since(victim->active_ns), conn->peer,
		    srv->max_clients);
	srv->stats.evicted++;
	nbd_conn_close(victim);
	/* Idle: no I/O in the vbd, so its slot is free now. */
	return 0;
}

/* --- memory ------------------------------------------------------------------ */

int nbd_map(struct td_nbd_server *srv, size_t bytes, void **out)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -ENOMEM;
	if (srv)
		srv->stats.memory_bytes += bytes;
	*out = p;
	return 0;
}

void nbd_unmap(struct td_nbd_server *srv, void *p, size_t bytes)
{
	munmap(p, bytes);
	if (srv)
		srv->stats.memory_bytes -= bytes;
}

/* --- listeners -------------------------------------------------------------- */

/* The listeners' callback (listener.h): peer is NULL for Unix clients. */
static void nbd_on_accept(int fd, const char *peer, void *opaque)
{
	struct td_nbd_server *srv = opaque;
	char name[NBD_PEER_MAX];
	int one = 1;

	if (fd < 0) {
		td_vbd_warn(srv->vbd, "nbd: accept: %s: pausing %u ms",
			    strerror(-fd), TD_LISTENER_BACKOFF_MS);
		return;
	}
	if (peer && !nbd_tls_peer_allowed(srv, fd, peer)) {
		close(fd);
		return;
	}
	if (peer) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	} else {
		snprintf(name, sizeof(name), "unix#%llu",
			 (unsigned long long)srv->stats.clients_total + 1);
		peer = name;
	}
	nbd_serve(srv, fd, peer);
}

static int nbd_listener_add(struct td_nbd_server *srv, int fd,
			    const char *unix_path)
{
	return td_listener_add(&srv->listeners, srv->loop, fd, unix_path,
			       NBD_LISTEN_BACKLOG, nbd_on_accept, srv);
}

static int nbd_listen_unix(struct td_nbd_server *srv, const char *path)
{
	int fd = td_sock_bind_unix("nbd", path, 0);
	int err;

	if (fd < 0)
		return fd;
	err = nbd_listener_add(srv, fd, path);
	if (err)
		td_err("nbd: listen on %s: %s", path, strerror(-err));
	return err;
}

static int nbd_listen_addrinfo(struct td_nbd_server *srv,
			       const struct addrinfo *ai)
{
	int one = 1;
	int fd = socket(ai->ai_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* So that "tcp::PORT" can bind 0.0.0.0 and :: side by side. */
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return nbd_listener_add(srv, fd, NULL);
}

/* "HOST:PORT", "[V6]:PORT" or ":PORT". */
static int nbd_listen_tcp(struct td_nbd_server *srv, const char *hostport)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	const char *colon = strrchr(hostport, ':');
	struct addrinfo *res, *ai;
	const char *start;
	char host[256];
	size_t len;
	int err = -EADDRNOTAVAIL, ok = 0, gai;

	if (!colon || !colon[1] || (size_t)(colon - hostport) >= sizeof(host)) {
		td_err("nbd: bad TCP address '%s': expected HOST:PORT, "
		       "[IPV6]:PORT or :PORT",
		       hostport);
		return -EINVAL;
	}
	start = hostport;
	len = (size_t)(colon - hostport);
	if (len >= 2 && start[0] == '[' && start[len - 1] == ']') {
		start++; /* an IPv6 literal: drop the brackets */
		len -= 2;
	}
	memcpy(host, start, len);
	host[len] = '\0';
	gai = getaddrinfo(len ? host : NULL, colon + 1, &hints, &res);
	if (gai) {
		td_err("nbd: tcp:%s: %s", hostport, gai_strerror(gai));
		return -EINVAL;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int e = nbd_listen_addrinfo(srv, ai);

		if (!e)
			ok++;
		else
			err = e;
		if (!e)
			nbd_tls_listen_check(srv, ai->ai_addr, ai->ai_addrlen);
	}
	freeaddrinfo(res);
	if (!ok) {
		td_err("nbd: listen on tcp:%s: %s", hostport, strerror(-err));
		return err;
	}
	return 0;
}

int td_nbd_server_listen(struct td_nbd_server *srv, const char *addr)
{
	if (srv->fe.stopping)
		return -ESHUTDOWN;
	if (!strncmp(addr, NBD_UNIX_PREFIX, strlen(NBD_UNIX_PREFIX)))
		return nbd_listen_unix(srv, addr + strlen(NBD_UNIX_PREFIX));
	if (!strncmp(addr, NBD_TCP_PREFIX, strlen(NBD_TCP_PREFIX)))
		return nbd_listen_tcp(srv, addr + strlen(NBD_TCP_PREFIX));
	td_err("nbd: bad address '%s': expected unix:/path/to.sock or "
	       "tcp:HOST:PORT",
	       addr);
	return -EINVAL;
}

int td_nbd_server_add_client(struct td_nbd_server *srv, int fd,
			     const char *peer)
{
	char name[NBD_PEER_MAX];
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	snprintf(name, sizeof(name), "%s#%llu", peer ? peer : "fd",
		 (unsigned long long)srv->stats.clients_total + 1);
	return nbd_serve(srv, fd, name);
}

/* --- pass end, shutdown ------------------------------------------------------ */

static bool nbd_idle(const struct td_nbd_server *srv)
{
	return TAILQ_EMPTY(&srv->conns) && TAILQ_EMPTY(&srv->dead);
}

/*
 * After the pass's completions: write every connection's queued replies
 * (one sendmsg each), then free the closed connections the vbd no longer
 * holds.
 */
static void nbd_pass_end(struct td_hook *h, void *opaque)
{
	struct td_nbd_server *srv = opaque;
	struct nbd_conn *conn, *next;

	while ((conn = TAILQ_FIRST(&srv->dirty))) {
		TAILQ_REMOVE(&srv->dirty, conn, dirty_link);
		conn->dirty = false;
		nbd_conn_flush(conn);
	}
	for (conn = TAILQ_FIRST(&srv->dead); conn; conn = next) {
		next = TAILQ_NEXT(conn, link);
		if (conn->vbd_inflight)
			continue;
		TAILQ_REMOVE(&srv->dead, conn, link);
		srv->nr_dead--;
		nbd_conn_free(conn);
	}
	td_frontend_stop_check(&srv->fe, nbd_idle(srv));
}

static void nbd_shutdown_timeout(struct td_timer *t, void *opaque)
{
	struct td_nbd_server *srv = opaque;
	struct nbd_conn *conn;

	td_vbd_warn(srv->vbd,
		    "nbd: %llu clients still busy after %u ms: "
		    "disconnecting them",
		    (unsigned long long)srv->stats.clients,
		    NBD_SHUTDOWN_TIMEOUT_MS);
	while ((conn = TAILQ_FIRST(&srv->conns)))
		nbd_conn_close(conn);
}

/* The frontend op (frontend.h): the commands in flight are answered. */
static int nbd_shutdown(struct td_frontend *fe, td_frontend_done_fn done,
			void *opaque)
{
	struct td_nbd_server *srv = td_nbd_server_of(fe);
	struct nbd_conn *conn, *next;
	int err = td_frontend_stop_begin(fe, done, opaque);

	if (err)
		return err;
	td_listener_close_all(&srv->listeners);
	for (conn = TAILQ_FIRST(&srv->conns); conn; conn = next) {
		next = TAILQ_NEXT(conn, link);
		nbd_conn_shutdown(conn);
	}
	if (!TAILQ_EMPTY(&srv->conns))
		td_loop_timer_arm(srv->loop, &fe->stop_timer,
				  NBD_SHUTDOWN_TIMEOUT_MS * 1000ull,
				  nbd_shutdown_timeout, srv);
	td_frontend_stop_check(fe, nbd_idle(srv));
	return 0;
}

/* --- create, destroy ------------------------------------------------------------ */

/* Slots and timeouts within their bounds (0 is the default for each). */
static int nbd_check_limits(const struct td_nbd_params *p)
{
	if (p->max_clients > TD_NBD_MAX_CLIENTS ||
	    p->max_handshakes > TD_NBD_MAX_CLIENTS) {
		td_err("nbd: at most %u clients and %u handshakes at once",
		       TD_NBD_MAX_CLIENTS, TD_NBD_MAX_CLIENTS);
		return -EINVAL;
	}
	if (p->handshake_timeout_ms > TD_NBD_MAX_TIMEOUT_MS ||
	    p->io_timeout_ms > TD_NBD_MAX_TIMEOUT_MS ||
	    p->idle_timeout_ms > TD_NBD_MAX_TIMEOUT_MS) {
		td_err("nbd: timeouts are at most %u ms",
		       TD_NBD_MAX_TIMEOUT_MS);
		return -EINVAL;
	}
	return 0;
}

static int nbd_apply_params(struct td_nbd_server *srv,
			    const struct td_nbd_params *p)
{
	const char *name = p->export_name ? p->export_name : "";
	uint32_t max_req = p->max_request_bytes ?: TD_NBD_DEFAULT_MAX_REQUEST;
	uint64_t max_req_buf;

	if (strlen(name) > NBD_MAX_STRING_BYTES) {
		td_err("nbd: export name longer than %d bytes",
		       NBD_MAX_STRING_BYTES);
		return -EINVAL;
	}
	if (max_req < NBD_PREFERRED_BLOCK_BYTES || max_req % TD_SECTOR_SIZE ||
	    max_req > TD_NBD_MAX_REQUEST_LIMIT) {
		td_err("nbd: max request of %u bytes: give a multiple of %u "
		       "from %u to %u",
		       max_req, TD_SECTOR_SIZE, NBD_PREFERRED_BLOCK_BYTES,
		       TD_NBD_MAX_REQUEST_LIMIT);
		return -EINVAL;
	}
	srv->max_inflight = p->max_inflight ?: TD_NBD_DEFAULT_MAX_INFLIGHT;
	if (srv->max_inflight > TD_NBD_MAX_INFLIGHT) {
		td_err("nbd: max in-flight %u is over %u", srv->max_inflight,
		       TD_NBD_MAX_INFLIGHT);
		return -EINVAL;
	}
	if (nbd_check_limits(p))
		return -EINVAL;
	srv->export_name = strdup(name);
	if (!srv->export_name)
		return -ENOMEM;
	srv->max_clients = p->max_clients ?: TD_NBD_DEFAULT_MAX_CLIENTS;
	srv->max_handshakes = p->max_handshakes ?: srv->max_clients;
	srv->handshake_timeout_ms =
		p->handshake_timeout_ms ?: TD_NBD_DEFAULT_HANDSHAKE_TIMEOUT_MS;
	srv->io_timeout_ms = p->io_timeout_ms ?: TD_NBD_DEFAULT_IO_TIMEOUT_MS;
	srv->idle_timeout_ms = p->idle_timeout_ms;
	srv->max_buffer_bytes =
		p->max_buffer_bytes ?: TD_NBD_DEFAULT_MAX_BUFFER;
	max_req_buf = ((uint64_t)max_req + NBD_BUF_ALIGN - 1) &
		      ~(uint64_t)(NBD_BUF_ALIGN - 1);
	if (srv->max_buffer_bytes < max_req_buf)
		srv->max_buffer_bytes = (uint32_t)max_req_buf;
	srv->exp.max_request_bytes = max_req;
	return 0;
}

int td_nbd_server_create(struct td_loop *loop, struct td_vbd *vbd,
			 const struct td_nbd_params *params,
			 struct td_nbd_server **out)
{
	const struct td_nbd_params defaults = {0};
	const struct td_disk_info *info = td_vbd_get_info(vbd);
	struct td_nbd_server *srv = calloc(1, sizeof(*srv));
	int err;

	if (!srv)
		return -ENOMEM;
	err = nbd_apply_params(srv, params ? params : &defaults);
	if (!err)
		err = nbd_tls_server_create(params ? params->access : NULL,
					    &srv->tls);
	if (err) {
		free(srv->export_name);
		free(srv);
		return err;
	}
	td_frontend_init(&srv->fe, &td_nbd_frontend, loop);
	srv->loop = loop;
	srv->vbd = vbd;
	srv->exp.size_bytes = info->size_sectors << TD_SECTOR_SHIFT;
	srv->exp.tflags = nbd_transmission_flags(info);
	TAILQ_INIT(&srv->listeners);
	TAILQ_INIT(&srv->conns);
	TAILQ_INIT(&srv->dead);
	TAILQ_INIT(&srv->dirty);
	td_loop_add_hook(loop, &srv->hook, nbd_pass_end, srv);
	*out = srv;
	return 0;
}

/* The frontend op (frontend.h). */
static void nbd_destroy(struct td_frontend *fe)
{
	struct td_nbd_server *srv = td_nbd_server_of(fe);
	struct nbd_conn *conn;

	td_listener_close_all(&srv->listeners);
	while ((conn = TAILQ_FIRST(&srv->conns)))
		nbd_conn_close(conn);
	while ((conn = TAILQ_FIRST(&srv->dead))) {
		TAILQ_REMOVE(&srv->dead, conn, link);
		if (!conn->vbd_inflight) {
			nbd_conn_free(conn);
			continue;
		}
		/* The vbd still writes into its buffers: it frees itself
		 * when the last I/O completes (slot_io_done, nbd-cmd.c). */
		td_vbd_warn(srv->vbd, "nbd %s: destroyed with %u I/O in flight",
			    conn->peer, conn->vbd_inflight);
		conn->srv = NULL;
	}
	td_loop_del_hook(&srv->hook);
	td_frontend_fini(&srv->fe);
	nbd_tls_server_destroy(srv->tls);
	free(srv->export_name);
	free(srv);
}

void td_nbd_server_get_stats(const struct td_nbd_server *srv,
			     struct td_nbd_stats *out)
{
	*out = srv->stats;
}

static int nbd_create(struct td_loop *loop, struct td_vbd *vbd,
		      const void *params, struct td_frontend **out)
{
	struct td_nbd_server *srv;
	int err = td_nbd_server_create(loop, vbd, params, &srv);

	if (!err)
		*out = &srv->fe;
	return err;
}

static int nbd_listen(struct td_frontend *fe, const char *addr)
{
	return td_nbd_server_listen(td_nbd_server_of(fe), addr);
}

/* The names of the counters, as "stats" prints them; never change them. */
static void nbd_report_json(struct td_frontend *fe, struct td_json *j)
{
	struct td_nbd_stats s;

	td_nbd_server_get_stats(td_nbd_server_of(fe), &s);
	td_json_u64(j, "clients", s.clients);
	td_json_u64(j, "clients_total", s.clients_total);
	td_json_u64(j, "refused", s.refused);
	td_json_u64(j, "protocol_errors", s.protocol_errors);
	td_json_u64(j, "commands", s.commands);
	td_json_u64(j, "error_replies", s.error_replies);
	td_json_u64(j, "handshaking", s.handshaking);
	td_json_u64(j, "timed_out", s.timed_out);
	td_json_u64(j, "evicted", s.evicted);
	td_json_u64(j, "busy_refusals", s.busy_refusals);
	td_json_u64(j, "memory_bytes", s.memory_bytes);
}

static void nbd_report_text(struct td_frontend *fe, struct td_strbuf *sb)
{
	struct td_nbd_stats s;

	td_nbd_server_get_stats(td_nbd_server_of(fe), &s);
	td_strbuf_printf(sb,
			 "\nnbd: %" PRIu64 " clients connected, %" PRIu64
			 " accepted, %" PRIu64 " refused, %" PRIu64
			 " protocol errors, %" PRIu64 " commands, %" PRIu64
			 " error replies\n"
			 "nbd: %" PRIu64 " in the handshake, %" PRIu64
			 " timed out, %" PRIu64 " evicted, %" PRIu64
			 " refused busy, %" PRIu64 " KiB mapped\n",
			 s.clients, s.clients_total, s.refused,
			 s.protocol_errors, s.commands, s.error_replies,
			 s.handshaking, s.timed_out, s.evicted, s.busy_refusals,
			 s.memory_bytes >> 10);
}

/*
 * The frontend op: new connections are offered the new size.  NBD has no
 * message that tells a connected client of a new size: a client sees it
 * when it connects again.  Requests beyond the old end from a connection
 * that still knows the old size are checked against the new one.
 */
static void nbd_resized(struct td_frontend *fe, struct td_strbuf *out)
{
	struct td_nbd_server *srv = td_nbd_server_of(fe);
	const struct td_disk_info *info = td_vbd_get_info(srv->vbd);

	srv->exp.size_bytes = info->size_sectors << TD_SECTOR_SHIFT;
	td_strbuf_printf(out,
			 "nbd: new connections see %" PRIu64
			 " bytes (NBD cannot tell connected clients)\n",
			 srv->exp.size_bytes);
}

const struct td_frontend_ops td_nbd_frontend = {
	.name = "nbd",
	.create = nbd_create,
	.listen = nbd_listen,
	.shutdown = nbd_shutdown,
	.destroy = nbd_destroy,
	.report_json = nbd_report_json,
	.report_text = nbd_report_text,
	.control = nbd_control,
	.resized = nbd_resized,
};

struct td_nbd_server *td_nbd_server_of(struct td_frontend *fe)
{
	return td_container_of(fe, struct td_nbd_server, fe);
}

struct td_frontend *td_nbd_server_frontend(struct td_nbd_server *srv)
{
	return srv ? &srv->fe : NULL;
}
