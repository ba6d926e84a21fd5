/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c - the master's listener and poll loop (see server.h).
 *
 * libtirpc owns the connections (svc_pollfd holds their fds); this loop
 * owns the rounds: poll everything, let libtirpc read one record per ready
 * connection and call master_dispatch, commit, reply, then close idle
 * connections.  A connection is closed by shutting its socket down: the
 * next poll reports it, and libtirpc destroys its transport itself, so no
 * transport pointer is ever kept here.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "master/addr.h"
#include "master/server/server-int.h"

#include <rpc/rpc_com.h> /* rpc_control, after rpc/rpc.h */

#define NS_PER_S      1000000000ull
#define NS_PER_US     1000ull
#define SLOW_ROUND_US 2000 /* counted in master_stats.slow_rounds */
#define MS_PER_S      1000
#define IDLE_POLL_MS  1000 /* how often idle connections are looked for */
#define STOP_SLOT     0	   /* pfd[0] is stop_fd; svc_pollfd follows */

static int bind_listener(const char *listen_text, int *fd_out,
			 unsigned int *port, char *msg, size_t len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	char host[MASTER_HOST_MAX], serv[MASTER_PORT_MAX];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *ai;
	int fd, one = 1, rc, err;

	if (master_split_hostport(listen_text, MS_DEFAULT_PORT, 1, host,
				  serv)) {
		snprintf(msg, len, "--listen '%s' is not HOST[:PORT]",
			 listen_text);
		return -EINVAL;
	}
	if ((rc = getaddrinfo(host, serv, &hints, &ai))) {
		snprintf(msg, len, "--listen %s: %s", listen_text,
			 gai_strerror(rc));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		err = errno;
		snprintf(msg, len, "cannot listen on %s: %s%s", listen_text,
			 strerror(err),
			 err == EADDRINUSE ? " (another stripe-master?)" : "");
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -err;
	}
	freeaddrinfo(ai);
	*port = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	*fd_out = fd;
	return 0;
}

/* The transport: non-blocking connections, bounded records. */
static int start_rpc(struct master_server *ms, char *msg, size_t len)
{
	int maxrec = MASTER_MAX_RECORD_BYTES;

	if (!rpc_control(RPC_SVC_CONNMAXREC_SET, &maxrec)) {
		snprintf(msg, len,
			 "rpc_control(RPC_SVC_CONNMAXREC_SET) failed");
		return -EIO;
	}
	if (!(ms->listener = svc_vc_create(ms->listen_fd, 0, 0))) {
		snprintf(msg, len, "svc_vc_create failed");
		return -EIO;
	}
	/* Protocol 0: no rpcbind registration, the port is fixed. */
	if (!svc_register(ms->listener, STRIPE_MASTER_PROG, STRIPE_MASTER_V1,
			  master_dispatch, 0)) {
		snprintf(msg, len, "svc_register failed");
		return -EIO;
	}
	return 0;
}

int master_server_create(const struct master_server_config *cfg,
			 struct master_store *store, int stop_fd,
			 struct master_server **out, char *msg, size_t msg_len)
{
	struct master_server *ms;
	int ret;

	if (master_current) {
		snprintf(msg, msg_len, "a master server runs already");
		return -EBUSY;
	}
	if (!(ms = calloc(1, sizeof(*ms))))
		return -ENOMEM;
	ms->cfg = *cfg;
	ms->store = store;
	ms->stop_fd = stop_fd;
	ms->listen_fd = -1;
	master_current = ms;
	if ((ret = bind_listener(cfg->listen, &ms->listen_fd, &ms->port, msg,
				 msg_len)) ||
	    (ret = start_rpc(ms, msg, msg_len))) {
		master_server_destroy(ms);
		return ret;
	}
	*out = ms;
	return 0;
}

unsigned int master_server_port(const struct master_server *ms)
{
	return ms->port;
}

void master_server_get_stats(const struct master_server *ms,
			     struct master_stats *out)
{
	*out = ms->stats;
}

/* --- the loop ------------------------------------------------------------------ */

static int track_fd(struct master_server *ms, int fd, uint64_t now)
{
	if ((size_t)fd >= ms->nr_fds) {
		size_t n = (size_t)fd * 2 + 16;
		uint64_t *t = realloc(ms->last_active_ns, n * sizeof(*t));
		bool *o;

		if (!t)
			return -ENOMEM;
		ms->last_active_ns = t;
		if (!(o = realloc(ms->fd_open, n * sizeof(*o))))
			return -ENOMEM;
		ms->fd_open = o;
		memset(t + ms->nr_fds, 0, (n - ms->nr_fds) * sizeof(*t));
		memset(o + ms->nr_fds, 0, (n - ms->nr_fds) * sizeof(*o));
		ms->nr_fds = n;
	}
	if (!ms->last_active_ns[fd])
		ms->last_active_ns[fd] = now;
	return 0;
}

/* pfd[0] = stop_fd, then a copy of svc_pollfd; returns the count. */
static int build_pollset(struct master_server *ms, uint64_t now,
			 size_t *nr_conns)
{
	size_t n = (size_t)svc_max_pollfd + 1;

	if (n > ms->cap_pfd) {
		struct pollfd *p = realloc(ms->pfd, n * sizeof(*p));

		if (!p)
			return -ENOMEM;
		ms->pfd = p;
		ms->cap_pfd = n;
	}
	ms->pfd[STOP_SLOT] =
		(struct pollfd){.fd = ms->stop_fd, .events = POLLIN};
	memcpy(ms->pfd + 1, svc_pollfd, (n - 1) * sizeof(*ms->pfd));
	*nr_conns = 0;
	for (size_t i = 1; i < n; i++) {
		int fd = ms->pfd[i].fd;

		ms->pfd[i].revents = 0;
		if (fd < 0 || fd == ms->listen_fd)
			continue;
		(*nr_conns)++;
		if (track_fd(ms, fd, now))
			return -ENOMEM;
	}
	return (int)n;
}

/* Beyond max_connections the listener is not polled: clients wait. */
static void limit_accepts(struct master_server *ms, int n, size_t nr_conns)
{
	if (nr_conns < ms->cfg.max_connections)
		return;
	for (int i = 1; i < n; i++)
		if (ms->pfd[i].fd == ms->listen_fd)
			ms->pfd[i].events = 0;
}

/* Let libtirpc read and dispatch; then commit and reply. */
static void serve_round(struct master_server *ms, int n, uint64_t now)
{
	uint64_t took_us;

	for (int i = 1; i < n; i++) {
		int fd = ms->pfd[i].fd;

		if (fd < 0 || !ms->pfd[i].revents)
			continue;
		if (fd != ms->listen_fd)
			ms->last_active_ns[fd] = now;
		svc_getreq_common(fd);
	}
	master_round_finish(ms);
	took_us = (td_now_ns() - now) / NS_PER_US;
	if (took_us > ms->stats.max_round_us)
		ms->stats.max_round_us = took_us;
	if (took_us >= SLOW_ROUND_US) {
		ms->stats.slow_rounds++;
		td_dbg("a round took %llu us", (unsigned long long)took_us);
	}
}

/*
 * Forget the fds libtirpc closed (a new connection on the same number
 * starts afresh); shut idle connections down.
 */
static void sweep(struct master_server *ms, uint64_t now)
{
	uint64_t idle_ns = (uint64_t)ms->cfg.idle_timeout_s * NS_PER_S;

	if (!ms->nr_fds)
		return;
	memset(ms->fd_open, 0, ms->nr_fds * sizeof(*ms->fd_open));
	for (int i = 0; i < svc_max_pollfd; i++)
		if (svc_pollfd[i].fd >= 0 &&
		    (size_t)svc_pollfd[i].fd < ms->nr_fds)
			ms->fd_open[svc_pollfd[i].fd] = true;
	for (size_t fd = 0; fd < ms->nr_fds; fd++) {
		if (!ms->fd_open[fd]) {
			ms->last_active_ns[fd] = 0;
			continue;
		}
		if ((int)fd == ms->listen_fd || !idle_ns ||
		    !ms->last_active_ns[fd] ||
		    now - ms->last_active_ns[fd] < idle_ns)
			continue;
		td_dbg("closing connection fd %zu, idle for %u s", fd,
		       ms->cfg.idle_timeout_s);
		shutdown((int)fd, SHUT_RDWR);
		ms->stats.idle_closed++;
		ms->last_active_ns[fd] = now; /* libtirpc closes it next */
	}
}

int master_server_run(struct master_server *ms)
{
	int timeout = ms->cfg.idle_timeout_s ? IDLE_POLL_MS : -1;

	for (;;) {
		uint64_t now = td_now_ns();
		size_t nr_conns;
		int n = build_pollset(ms, now, &nr_conns), rc;

		if (n < 0)
			return n;
		limit_accepts(ms, n, nr_conns);
		rc = poll(ms->pfd, (nfds_t)n, timeout);
		if (rc < 0 && errno != EINTR)
			return -errno;
		now = td_now_ns();
		if (rc > 0)
			serve_round(ms, n, now);
		if (ms->pfd[STOP_SLOT].revents)
			return 0;
		sweep(ms, now);
	}
}

/* --- teardown -------------------------------------------------------------------- */

/*
 * Close every connection the way sweep does, and let libtirpc notice at
 * once: reading a shut-down socket gives end-of-file, and libtirpc then
 * destroys the transport and its buffers.
 */
static void close_connections(struct master_server *ms)
{
	for (int i = 0; i < svc_max_pollfd; i++) {
		int fd = svc_pollfd[i].fd;

		if (fd < 0 || fd == ms->listen_fd)
			continue;
		shutdown(fd, SHUT_RDWR);
		svc_getreq_common(fd);
	}
}

void master_server_destroy(struct master_server *ms)
{
	if (!ms)
		return;
	master_round_finish(ms); /* nothing pending normally */
	close_connections(ms);
	if (ms->listener)
		svc_destroy(ms->listener); /* closes listen_fd */
	else if (ms->listen_fd >= 0)
		close(ms->listen_fd);
	free(ms->pending);
	free(ms->last_active_ns);
	free(ms->fd_open);
	free(ms->pfd);
	master_current = NULL;
	free(ms);
}
