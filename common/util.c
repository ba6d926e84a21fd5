/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * util.c - small helpers shared by the daemon and the tools.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/*
 * "4096", "4K", "4KiB", "1G", "2T" (binary multiples; a trailing "B" or
 * "iB" is accepted).  Returns 0, or -EINVAL for text that is not a size,
 * -ERANGE when it does not fit 64 bits.
 */
int td_parse_size(const char *text, uint64_t *bytes)
{
	static const char units[] = "KMGTPE";
	unsigned long long value;
	const char *u;
	char *end;
	unsigned int shift = 0;

	if (!text || !isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno)
		return -ERANGE;
	if (*end) {
		u = strchr(units, toupper((unsigned char)*end));
		if (!u)
			return -EINVAL;
		shift = 10 * (unsigned int)(u - units + 1);
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "ib") ||
		    !strcmp(end, "B") || !strcmp(end, "b"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (shift && value > (UINT64_MAX >> shift))
		return -ERANGE;
	*bytes = (uint64_t)value << shift;
	return 0;
}

/* --- opening disk files --------------------------------------------------------- */

const char *td_file_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFBLK:
		return "a block device";
	case S_IFCHR:
		return "a character device";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFLNK:
		return "a symbolic link";
	default:
		return "a file of an unknown type";
	}
}

static bool kind_ok(mode_t mode, unsigned int kinds)
{
	return (S_ISREG(mode) && (kinds & TD_OPEN_REGULAR)) ||
	       (S_ISBLK(mode) && (kinds & TD_OPEN_BLOCK_DEVICE));
}

/* open(2) failed with err: a wrong kind (a socket gives ENXIO, a
 * directory EISDIR) is told as such. */
static int open_failed(const char *path, int err, unsigned int kinds,
		       mode_t *mode)
{
	struct stat st;

	if (!stat(path, &st) && !kind_ok(st.st_mode, kinds)) {
		*mode = st.st_mode;
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	return -err;
}

int td_open_file(const char *path, int flags, int extra_fl, unsigned int kinds,
		 int *fd, mode_t *mode)
{
	struct stat st;
	int f, fl, err;

	*mode = 0;
	f = open(path, flags | O_NONBLOCK | O_CLOEXEC);
	if (f < 0)
		return open_failed(path, errno, kinds, mode);
	if (fstat(f, &st)) {
		err = -errno;
		close(f);
		return err;
	}
	if (!kind_ok(st.st_mode, kinds)) {
		*mode = st.st_mode;
		close(f);
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	fl = fcntl(f, F_GETFL);
	if (fl < 0 || fcntl(f, F_SETFL, (fl & ~O_NONBLOCK) | extra_fl)) {
		err = -errno;
		close(f);
		return err;
	}
	*fd = f;
	return 0;
}

/* --- helper threads ------------------------------------------------------------- */

int td_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}
