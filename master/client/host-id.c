/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host-id.c - this host's id (see host-id.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/client/host-id.h"

#define LINE_MAX_BYTES 256

/* s without blanks around it, in place. */
static char *trim(char *s)
{
	size_t len;

	s += strspn(s, " \t\r\n");
	len = strlen(s);
	while (len && strchr(" \t\r\n", s[len - 1]))
		s[--len] = '\0';
	return s;
}

static int take(const char *id, const char *source, char *out, char *msg,
		size_t msg_len)
{
	if (!master_host_id_ok(id)) {
		snprintf(msg, msg_len,
			 "the host id from %s is not 1-%d of [A-Za-z0-9._-]: "
			 "set one in " MASTER_HOST_ID_FILE
			 " (or $" MASTER_HOST_ID_ENV ", --host-id)",
			 source, MS_HOST_ID_MAX);
		return -EINVAL;
	}
	memcpy(out, id, strlen(id) + 1); /* at most MS_HOST_ID_MAX bytes */
	return 0;
}

/* 1 when the file gave the id, 0 when there is no file, -errno. */
static int from_file(const char *file, char *out, char *msg, size_t msg_len)
{
	char line[LINE_MAX_BYTES] = "";
	FILE *f = fopen(file, "re");
	int err, ret;

	if (!f) {
		if (errno == ENOENT)
			return 0;
		err = errno;
		snprintf(msg, msg_len, "cannot read %s: %s", file,
			 strerror(err));
		return -err;
	}
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	ret = take(trim(line), file, out, msg, msg_len);
	return ret ? ret : 1;
}

int master_host_id_default(const char *file, char *out, char *msg,
			   size_t msg_len)
{
	const char *env = getenv(MASTER_HOST_ID_ENV);
	char name[LINE_MAX_BYTES];
	int ret;

	if (env && *env)
		return take(env, "$" MASTER_HOST_ID_ENV, out, msg, msg_len);
	if ((ret = from_file(file ? file : MASTER_HOST_ID_FILE, out, msg,
			     msg_len)))
		return ret < 0 ? ret : 0;
	if (gethostname(name, sizeof(name))) {
		ret = -errno;
		snprintf(msg, msg_len,
			 "gethostname: %s: set a host id "
			 "in " MASTER_HOST_ID_FILE,
			 strerror(-ret));
		return ret;
	}
	name[sizeof(name) - 1] = '\0';
	return take(name, "the host name", out, msg, msg_len);
}
