/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * service-notify.c - READY=1 and STOPPING=1 for systemd, over sd_notify(3)
 * (libsystemd), which does nothing when $NOTIFY_SOCKET is unset.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include <systemd/sd-daemon.h>

#include "tools/cli/service-notify.h"

/* STATUS= text longer than this is cut: systemctl shows one line. */
#define NOTIFY_STATUS_MAX 256

/* "STATE\nSTATUS=text" in one datagram; 0 or -errno. */
static int notify(const char *state, const char *fmt, va_list ap)
{
	char status[NOTIFY_STATUS_MAX];
	int err;

	vsnprintf(status, sizeof(status), fmt, ap);
	err = sd_notifyf(0, "%s\nSTATUS=%s", state, status);
	return err < 0 ? err : 0;
}

int cli_notify_ready(const char *fmt, ...)
{
	va_list ap;
	int err;

	va_start(ap, fmt);
	err = notify("READY=1", fmt, ap);
	va_end(ap);
	return err;
}

int cli_notify_stopping(const char *fmt, ...)
{
	va_list ap;
	int err;

	va_start(ap, fmt);
	err = notify("STOPPING=1", fmt, ap);
	va_end(ap);
	return err;
}
