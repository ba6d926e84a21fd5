/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * listener.h - listening sockets of tapdisk's servers (NBD, shm): accept
 * on the event loop, pause after running out of descriptors, and on close
 * remove the server's own Unix socket file.
 *
 * What a server admits or refuses, and what it logs, stays in the server:
 * the listener hands it every accepted socket, and every accept error that
 * made it pause, through one callback.
 */
#ifndef TAPSTRIPE_LISTENER_H
#define TAPSTRIPE_LISTENER_H

#include <sys/queue.h>
#include <sys/types.h>

#include "common/loop.h"

/* accept4 calls per readiness event: fairness with the other fds. */
#define TD_LISTENER_ACCEPTS_PER_EVENT 16
/* After an accept error other than "nothing to accept" (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM): level-triggered epoll would report the socket ready
 * again at once, so the listener stops watching it this long. */
#define TD_LISTENER_BACKOFF_MS 100
/* Room for a peer name: "[IPV6]:PORT" and its NUL. */
#define TD_LISTENER_PEER_MAX 64

/*
 * Called from the event loop for each accepted connection and for each
 * pause.
 *   fd >= 0: a connection, non-blocking and close-on-exec, owned by the
 *            callee from here on (it serves or closes it).  peer is
 *            "HOST:PORT" or "[IPV6]:PORT" for a TCP client, NULL for a
 *            Unix-domain one; it lives until the callback returns.
 *   fd < 0:  accept failed with that -errno; the listener has stopped
 *            accepting and resumes TD_LISTENER_BACKOFF_MS later.  peer is
 *            NULL.  The callee only reports it.
 * The callback must not close any listener of its list.
 */
typedef void (*td_listener_cb)(int fd, const char *peer, void *opaque);

/* One listening socket.  Allocated by td_listener_add; the fields are
 * listener.c's (tests read fd, fde and backoff). */
struct td_listener {
	TAILQ_ENTRY(td_listener) link;
	struct td_loop *loop;
	int fd;
	struct td_fd fde;
	struct td_timer backoff;
	td_listener_cb cb;
	void *opaque;
	char *unix_path; /* unlinked on close if still our socket */
	dev_t unix_dev;
	ino_t unix_ino;
};

TAILQ_HEAD(td_listener_list, td_listener);

/*
 * Listen on the bound socket fd (taken: owned from here on, closed on
 * failure) with the given backlog, call cb(fd, peer, opaque) for what it
 * accepts, and append the listener to list.  unix_path, when not NULL, is
 * the socket file fd is bound to: remembered by its device and inode so
 * that closing removes it only if no newer server has replaced it, and
 * removed at once on failure.  Returns 0 or -errno; logs nothing (the
 * caller says which server failed).
 */
int td_listener_add(struct td_listener_list *list, struct td_loop *loop, int fd,
		    const char *unix_path, int backlog, td_listener_cb cb,
		    void *opaque);

/* Stop, close and free every listener of list, removing their own socket
 * files.  Not from inside a listener's callback. */
void td_listener_close_all(struct td_listener_list *list);

#endif
