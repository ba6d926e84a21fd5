/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sock.c - binding Unix sockets, replacing stale ones.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sock.h"

/* Someone accepts on sa (a live server), as opposed to a stale file. */
static bool sock_in_use(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	bool used;

	if (fd < 0)
		return false;
	used = !connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) ||
	       errno == EAGAIN || errno == EINPROGRESS;
	close(fd);
	return used;
}

static int sock_clear_stale(const char *what, const struct sockaddr_un *sa)
{
	struct stat st;

	if (lstat(sa->sun_path, &st))
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		td_err("%s: %s exists and is not a socket", what, sa->sun_path);
		return -EEXIST;
	}
	if (sock_in_use(sa)) {
		td_err("%s: %s: another server is listening", what,
		       sa->sun_path);
		return -EADDRINUSE;
	}
	unlink(sa->sun_path); /* stale: its server is gone */
	return 0;
}

int td_sock_bind_unix(const char *what, const char *path, mode_t mode)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, err;

	if (!*path || strlen(path) >= sizeof(sa.sun_path)) {
		td_err("%s: socket path '%s' is empty or longer than %zu bytes",
		       what, path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path));
	if ((err = sock_clear_stale(what, &sa)))
		return err;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (mode && chmod(path, mode) < 0)) {
		err = -errno;
		td_err("%s: socket %s: %s", what, path, strerror(-err));
		if (fd >= 0)
			close(fd);
		return err;
	}
	return fd;
}

void td_sock_unlink_own(const char *path, dev_t dev, ino_t ino)
{
	struct stat st;

	if (path && !lstat(path, &st) && st.st_dev == dev && st.st_ino == ino)
		unlink(path);
}
