/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reply.h - building, reading and freeing the master's one reply type,
 * ms_reply (master/stripe.x), on both sides of the wire.
 *
 * Every string in a reply is allocated (never a literal): xdr_free frees
 * them all, and an ms_reply must never carry a NULL string, which XDR
 * cannot encode.
 */
#ifndef TAPSTRIPE_MASTER_REPLY_H
#define TAPSTRIPE_MASTER_REPLY_H

#include <stdbool.h>

#include "master/stripe.h"

/*
 * xdr_void as an xdrproc_t: it is declared without parameters, and the
 * detour through void (*)(void) tells the compiler the cast is meant.
 */
#define MASTER_XDR_VOID ((xdrproc_t)(void (*)(void))xdr_void)

/* An empty reply: status MS_OK, no message yet, body MS_BODY_NONE. */
void master_reply_init(ms_reply *rep);

/* Free everything a reply holds and make it empty again. */
void master_reply_free(ms_reply *rep);

/* Success: message "", changed as given; the body is the caller's.  0 or
 * -ENOMEM. */
int master_reply_ok(ms_reply *rep, bool changed);

/*
 * Failure: drop any body, set status and the message (printf-style,
 * truncated to MS_MESSAGE_MAX).  0 or -ENOMEM.
 */
int master_reply_fail(ms_reply *rep, ms_status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "ok", "EINVAL" ... for logs. */
const char *master_status_name(ms_status status);

/*
 * 0 for MS_OK, else the matching -errno (MS_EINVAL -> -EINVAL ...;
 * MS_EHELD -> -EBUSY, MS_ESTALE -> -ESTALE, MS_EFENCED -> -EPERM, like
 * MS_EPERM: the two are told apart by the status).
 */
int master_status_errno(ms_status status);

/* strdup for reply strings: NULL becomes "".  NULL when out of memory. */
char *master_strdup(const char *s);

#endif
