/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli-explain.c - one line for a failed step: what failed, the errno's
 * text and what to do about it (cli.h).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "tools/cli/cli.h"

struct advice {
	enum cli_topic topic;
	int err;
	const char *text;
};

/* First match wins; a topic's row with err 0 is its default. */
static const struct advice advice[] = {
	{CLI_CHAIN, -ENOENT, "check the driver name and the path in -a"},
	{CLI_CHAIN, -EACCES,
	 "check the file's permissions (or add --read-only)"},
	{CLI_CHAIN, -EPERM,
	 "check the file's permissions (or add --read-only)"},
	{CLI_CHAIN, -EROFS, "add --read-only"},
	{CLI_CHAIN, -EBUSY, "is another tapdisk serving it? see tap-ctl list"},
	{CLI_CHAIN, -EAGAIN, "is another tapdisk serving it? see tap-ctl list"},
	{CLI_CHAIN, 0, "see the messages above"},
	{CLI_CHAIN_SYNTAX, 0,
	 "check the syntax of -a, e.g. aio:/srv/disk.img or null:size=1G"},
	{CLI_CTL_SOCKET, -ENOENT, "no such tapdisk: see 'tap-ctl list'"},
	{CLI_CTL_SOCKET, -ECONNREFUSED,
	 "the tapdisk may be starting or stopping: try again"},
	{CLI_CTL_SOCKET, -EACCES, "run this as the user that runs tapdisk"},
	{CLI_CTL_SOCKET, -EPERM, "run this as the user that runs tapdisk"},
	{CLI_CTL_SOCKET, -ETIMEDOUT, "raise --timeout or look at its log"},
	{CLI_SHM_SOCKET, -ENOENT,
	 "is a tapdisk serving --shm with this path? see tap-ctl list"},
	{CLI_SHM_SOCKET, -ECONNREFUSED,
	 "no tapdisk listens there any more; start one with --shm"},
	{CLI_SHM_SOCKET, -EACCES, "run this as the user that runs tapdisk"},
	{CLI_SHM_SOCKET, -EPERM, "run this as the user that runs tapdisk"},
};

const char *cli_advice(int err, enum cli_topic topic)
{
	for (size_t i = 0; i < sizeof(advice) / sizeof(advice[0]); i++)
		if (advice[i].topic == topic &&
		    (advice[i].err == err || !advice[i].err))
			return advice[i].text;
	return "";
}

int cli_explain(char *buf, size_t len, int err, enum cli_topic topic,
		const char *fmt, ...)
{
	const char *what = cli_advice(err, topic);
	va_list ap;
	size_t used;

	if (!buf || !len) /* the caller wants no message */
		return err < 0 ? err : -EINVAL;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	used = strlen(buf);
	/* A syntax error's message says what is wrong better than EINVAL. */
	if (topic != CLI_PLAIN && topic != CLI_CHAIN_SYNTAX && used < len)
		used += (size_t)snprintf(buf + used, len - used, ": %s",
					 strerror(err < 0 ? -err : EINVAL));
	if (*what && used < len)
		snprintf(buf + used, len - used, "; %s", what);
	return err < 0 ? err : -EINVAL;
}
