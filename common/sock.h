/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sock.h - Unix stream sockets for tapdisk's servers (NBD, shm).
 */
#ifndef TAPSTRIPE_SOCK_H
#define TAPSTRIPE_SOCK_H

#include <sys/types.h>

/*
 * Create a non-blocking, close-on-exec Unix stream socket bound at path,
 * with the file's mode set to mode (0: left as the umask made it).  A
 * socket file left by a server that is gone is replaced; a live one, or a
 * file that is not a socket, is refused.  what names the server in the
 * messages ("nbd", "shm").  Returns the fd (not yet listening) or -errno,
 * having logged why.
 */
int td_sock_bind_unix(const char *what, const char *path, mode_t mode);

/*
 * Remove the socket file at path if it is still the one identified by
 * (dev, ino) — the file this server bound — and not one a newer server
 * has put there since.  path may be NULL.
 */
void td_sock_unlink_own(const char *path, dev_t dev, ino_t ino);

#endif
