/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * util.h - small helpers shared by the daemon and the tools: sizes with
 * binary suffixes, errno names, opening a disk file without blocking on
 * it, helper threads that take no signal.  A leaf: includes nothing of
 * the project.
 */
#ifndef TAPSTRIPE_UTIL_H
#define TAPSTRIPE_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The struct of type type whose member member is at ptr. */
#define td_container_of(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))

/*
 * Parse a size with an optional binary suffix K, M, G, T, P, E (or KiB ...).
 * 0, -EINVAL for text that is not a size, -ERANGE past 64 bits.
 */
int td_parse_size(const char *text, uint64_t *bytes);

/* "EINVAL" for -EINVAL or EINVAL; "E<n>" for one it does not know. */
const char *td_errno_name(int err, char *buf, size_t len);
/* The errno (positive) of a name td_errno_name gives, or 0. */
int td_errno_from_name(const char *name);

/* Which kinds of file td_open_file accepts. */
#define TD_OPEN_REGULAR	     (1u << 0)
#define TD_OPEN_BLOCK_DEVICE (1u << 1)

/*
 * Open path (open(2) flags, O_CLOEXEC added) so that the open cannot wait
 * on the file's kind: with O_NONBLOCK (a FIFO without a writer, a tty),
 * then fstat, then O_NONBLOCK cleared and extra_fl (O_DIRECT, which
 * open(2) itself refuses on a FIFO) set with F_SETFL.  A file not of the
 * kinds accepted (a FIFO, a socket, a directory, a character device) is
 * closed again and refused.  0 and *fd; -EINVAL (-EISDIR for a
 * directory) with *mode set for a wrong kind (td_file_kind names it);
 * else *mode is 0 and the -errno is
 * open(2)'s or F_SETFL's (-EINVAL there: extra_fl not supported, as
 * O_DIRECT on some file systems).
 * A file system that hangs may still block open(2) itself: the caller
 * keeps SIGTERM fatal meanwhile (tools/tapdisk/tapdisk.c).
 */
int td_open_file(const char *path, int flags, int extra_fl, unsigned int kinds,
		 int *fd, mode_t *mode);

/* "a FIFO", "a directory", "a socket", ... for mode's file type. */
const char *td_file_kind(mode_t mode);

/*
 * pthread_create with every signal blocked in the new thread, so that a
 * signal sent to the process (SIGTERM, SIGINT: tools/tapdisk/tapdisk.c)
 * goes to the main thread, whatever its mask when the thread was made.
 * 0 or -errno.
 */
int td_thread_create(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif
