/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * service-notify.h - readiness for a systemd service of Type=notify
 * (sd_notify(3)): tapdisk and stripe-master say READY=1 once they serve and
 * STOPPING=1 when their shutdown begins.  Without $NOTIFY_SOCKET (not
 * started by systemd, or a test) every call does nothing and returns 0.
 * Only tapdisk and stripe-master link libsystemd for it.
 */
#ifndef TAPSTRIPE_TOOLS_CLI_SERVICE_NOTIFY_H
#define TAPSTRIPE_TOOLS_CLI_SERVICE_NOTIFY_H

/* The environment variable systemd sets for a Type=notify service. */
#define CLI_NOTIFY_SOCKET_ENV "NOTIFY_SOCKET"

/*
 * "READY=1" and "STATUS=" the formatted text, in one datagram.  0 when sent
 * or when there is no $NOTIFY_SOCKET; -errno when sending failed (the
 * caller logs it: the service manager then times the start out).
 */
int cli_notify_ready(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* "STOPPING=1" and "STATUS=" the formatted text; returns as above. */
int cli_notify_stopping(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

#endif
