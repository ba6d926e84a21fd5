/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * errno-name.c - errno values by name and back, for the wire (the control
 * protocol's "ERR EINVAL" lines, the shm negotiation) and for messages.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

#define ERRNO_ENTRY(e) \
	{              \
		e, #e  \
	}
static const struct {
	int err;
	const char *name;
} errno_names[] = {
	ERRNO_ENTRY(EPERM),	   ERRNO_ENTRY(ENOENT),
	ERRNO_ENTRY(ESRCH),	   ERRNO_ENTRY(EINTR),
	ERRNO_ENTRY(EIO),	   ERRNO_ENTRY(ENXIO),
	ERRNO_ENTRY(E2BIG),	   ERRNO_ENTRY(EBADF),
	ERRNO_ENTRY(EAGAIN),	   ERRNO_ENTRY(ENOMEM),
	ERRNO_ENTRY(EACCES),	   ERRNO_ENTRY(EFAULT),
	ERRNO_ENTRY(EBUSY),	   ERRNO_ENTRY(EEXIST),
	ERRNO_ENTRY(ENODEV),	   ERRNO_ENTRY(ENOTDIR),
	ERRNO_ENTRY(EISDIR),	   ERRNO_ENTRY(EINVAL),
	ERRNO_ENTRY(ENFILE),	   ERRNO_ENTRY(EMFILE),
	ERRNO_ENTRY(EFBIG),	   ERRNO_ENTRY(ENOSPC),
	ERRNO_ENTRY(EROFS),	   ERRNO_ENTRY(EPIPE),
	ERRNO_ENTRY(ERANGE),	   ERRNO_ENTRY(EDEADLK),
	ERRNO_ENTRY(ENAMETOOLONG), ERRNO_ENTRY(ENOLCK),
	ERRNO_ENTRY(ENOSYS),	   ERRNO_ENTRY(ENOTEMPTY),
	ERRNO_ENTRY(ENODATA),	   ERRNO_ENTRY(EPROTO),
	ERRNO_ENTRY(EBADMSG),	   ERRNO_ENTRY(EOVERFLOW),
	ERRNO_ENTRY(ENOTSOCK),	   ERRNO_ENTRY(EMSGSIZE),
	ERRNO_ENTRY(EOPNOTSUPP),   ERRNO_ENTRY(ENOTSUP),
	ERRNO_ENTRY(EADDRINUSE),   ERRNO_ENTRY(EADDRNOTAVAIL),
	ERRNO_ENTRY(ENETDOWN),	   ERRNO_ENTRY(ENETUNREACH),
	ERRNO_ENTRY(ECONNABORTED), ERRNO_ENTRY(ECONNRESET),
	ERRNO_ENTRY(ENOBUFS),	   ERRNO_ENTRY(ENOTCONN),
	ERRNO_ENTRY(ESHUTDOWN),	   ERRNO_ENTRY(ETIMEDOUT),
	ERRNO_ENTRY(ECONNREFUSED), ERRNO_ENTRY(EHOSTUNREACH),
	ERRNO_ENTRY(EALREADY),	   ERRNO_ENTRY(EINPROGRESS),
	ERRNO_ENTRY(ESTALE),	   ERRNO_ENTRY(EDQUOT),
	ERRNO_ENTRY(ECANCELED),	   ERRNO_ENTRY(ENOMEDIUM),
};
#define NR_ERRNO_NAMES (sizeof(errno_names) / sizeof(errno_names[0]))

const char *td_errno_name(int err, char *buf, size_t len)
{
	if (err < 0)
		err = -err;
	/* First match wins: EOPNOTSUPP before its alias ENOTSUP. */
	for (unsigned int i = 0; i < NR_ERRNO_NAMES; i++)
		if (errno_names[i].err == err)
			return errno_names[i].name;
	snprintf(buf, len, "E%d", err);
	return buf;
}

int td_errno_from_name(const char *name)
{
	for (unsigned int i = 0; i < NR_ERRNO_NAMES; i++)
		if (!strcmp(errno_names[i].name, name))
			return errno_names[i].err;
	return 0;
}
