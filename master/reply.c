/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reply.c - ms_reply helpers (see reply.h).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/reply.h"

void master_reply_init(ms_reply *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->status = MS_OK;
	rep->body.kind = MS_BODY_NONE;
}

void master_reply_free(ms_reply *rep)
{
	char *secret = rep->body.kind == MS_BODY_CHAP
			       ? rep->body.ms_body_u.chap.secret
			       : NULL;

	if (secret) /* a CHAP secret does not linger in freed memory */
		memset(secret, 0, strlen(secret));
	xdr_free((xdrproc_t)xdr_ms_reply, (char *)rep);
	master_reply_init(rep);
}

char *master_strdup(const char *s)
{
	return strdup(s ? s : "");
}

int master_reply_ok(ms_reply *rep, bool changed)
{
	free(rep->message);
	rep->status = MS_OK;
	rep->changed = changed;
	rep->message = master_strdup("");
	return rep->message ? 0 : -ENOMEM;
}

int master_reply_fail(ms_reply *rep, ms_status status, const char *fmt, ...)
{
	char *msg = malloc(MS_MESSAGE_MAX + 1);
	va_list ap;

	/* The arguments may point into the body: format before freeing it. */
	if (msg) {
		va_start(ap, fmt);
		vsnprintf(msg, MS_MESSAGE_MAX + 1, fmt, ap);
		va_end(ap);
	}
	xdr_free((xdrproc_t)xdr_ms_body, (char *)&rep->body);
	memset(&rep->body, 0, sizeof(rep->body));
	rep->body.kind = MS_BODY_NONE;
	free(rep->message);
	rep->message = msg;
	rep->status = status;
	rep->changed = false;
	return msg ? 0 : -ENOMEM;
}

static const struct {
	const char *name;
	int err;
} statuses[] = {
	[MS_OK] = {"ok", 0},
	[MS_EINVAL] = {"EINVAL", -EINVAL},
	[MS_ENOENT] = {"ENOENT", -ENOENT},
	[MS_EEXIST] = {"EEXIST", -EEXIST},
	[MS_ENOSPC] = {"ENOSPC", -ENOSPC},
	[MS_EPERM] = {"EPERM", -EPERM},
	[MS_EBUSY] = {"EBUSY", -EBUSY},
	[MS_EIO] = {"EIO", -EIO},
	[MS_EHELD] = {"EHELD", -EBUSY},
	[MS_ESTALE] = {"ESTALE", -ESTALE},
	[MS_EFENCED] = {"EFENCED", -EPERM},
};

const char *master_status_name(ms_status status)
{
	if ((unsigned int)status >= sizeof(statuses) / sizeof(statuses[0]))
		return "unknown";
	return statuses[status].name;
}

int master_status_errno(ms_status status)
{
	if ((unsigned int)status >= sizeof(statuses) / sizeof(statuses[0]))
		return -EPROTO;
	return statuses[status].err;
}
