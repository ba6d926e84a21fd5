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

#endif
