/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hostid.c - the rule for a host id (see hostid.h).
 */
#include "config.h"

#include <string.h>

#include "master/hostid.h"
#include "master/stripe.h"

bool master_host_id_ok(const char *id)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
	size_t len = id ? strnlen(id, MS_HOST_ID_MAX + 1) : 0;

	return len && len <= MS_HOST_ID_MAX && id[strspn(id, ok)] == '\0';
}
