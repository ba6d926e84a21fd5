/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * listener.c - listening sockets: the accept loop, the back-off after
 * running out of descriptors, closing.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/listener.h"
#include "common/sock.h"

/* "HOST:PORT" or "[IPV6]:PORT" into out; NULL for any other family. */
static const char *listener_peer_name(const struct sockaddr_storage *ss,
				      char *out, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const void *)ss;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(out, size, "%s:%u", host, ntohs(sin->sin_port));
		return out;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const void *)ss;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(out, size, "[%s]:%u", host, ntohs(sin6->sin6_port));
		return out;
	}
	return NULL;
}

/* The back-off is over: watch the socket again (armed in listener_pause). */
static void listener_resume(struct td_timer *t, void *opaque)
{
	struct td_listener *l = opaque;

	td_loop_mod_fd(&l->fde, EPOLLIN);
}

static void listener_pause(struct td_listener *l, int err)
{
	td_loop_mod_fd(&l->fde, 0);
	td_loop_timer_arm(l->loop, &l->backoff,
			  TD_LISTENER_BACKOFF_MS * 1000ull, listener_resume, l);
	l->cb(err, NULL, l->opaque);
}

static void listener_on_readable(struct td_fd *fde, uint32_t events,
				 void *opaque)
{
	struct td_listener *l = opaque;

	for (int i = 0; i < TD_LISTENER_ACCEPTS_PER_EVENT; i++) {
		struct sockaddr_storage ss = {0};
		socklen_t len = sizeof(ss);
		char peer[TD_LISTENER_PEER_MAX];
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (fd < 0) {
			listener_pause(l, -errno);
			return;
		}
		l->cb(fd, listener_peer_name(&ss, peer, sizeof(peer)),
		      l->opaque);
	}
}

int td_listener_add(struct td_listener_list *list, struct td_loop *loop, int fd,
		    const char *unix_path, int backlog, td_listener_cb cb,
		    void *opaque)
{
	struct td_listener *l = calloc(1, sizeof(*l));
	struct stat st;
	int err;

	if (!l || (unix_path && !(l->unix_path = strdup(unix_path)))) {
		err = -ENOMEM;
		goto fail;
	}
	l->loop = loop;
	l->fd = fd;
	l->cb = cb;
	l->opaque = opaque;
	if (unix_path) {
		if (lstat(unix_path, &st)) {
			err = -errno;
			goto fail;
		}
		l->unix_dev = st.st_dev;
		l->unix_ino = st.st_ino;
	}
	if (listen(fd, backlog) < 0) {
		err = -errno;
		goto fail;
	}
	err = td_loop_add_fd(loop, &l->fde, fd, EPOLLIN, listener_on_readable,
			     l);
	if (err)
		goto fail;
	TAILQ_INSERT_TAIL(list, l, link);
	return 0;
fail:
	if (unix_path)
		unlink(unix_path);
	if (l)
		free(l->unix_path);
	free(l);
	close(fd);
	return err;
}

static void listener_close(struct td_listener *l)
{
	td_loop_del_fd(&l->fde);
	td_loop_timer_cancel(&l->backoff);
	close(l->fd);
	td_sock_unlink_own(l->unix_path, l->unix_dev, l->unix_ino);
	free(l->unix_path);
	free(l);
}

void td_listener_close_all(struct td_listener_list *list)
{
	struct td_listener *l;

	while ((l = TAILQ_FIRST(list))) {
		TAILQ_REMOVE(list, l, link);
		listener_close(l);
	}
}
