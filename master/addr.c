/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * addr.c - HOST[:PORT] parsing (addr.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/addr.h"

#define PORT_LIMIT 65535

static int parse_port(const char *text, int allow_zero, unsigned long *port)
{
	char *end;

	if (!*text || strspn(text, "0123456789") != strlen(text))
		return -EINVAL;
	*port = strtoul(text, &end, 10);
	if (*port > PORT_LIMIT || (!*port && !allow_zero))
		return -EINVAL;
	return 0;
}

int master_split_hostport(const char *text, unsigned int default_port,
			  int allow_zero, char host[MASTER_HOST_MAX],
			  char port[MASTER_PORT_MAX])
{
	const char *colon, *port_text = NULL;
	unsigned long p = default_port;
	size_t host_len;

	if (!text || !*text)
		return -EINVAL;
	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || (close[1] && close[1] != ':'))
			return -EINVAL;
		text++;
		host_len = (size_t)(close - text);
		if (close[1] == ':')
			port_text = close + 2;
	} else if ((colon = strchr(text, ':')) && !strchr(colon + 1, ':')) {
		host_len = (size_t)(colon - text);
		port_text = colon + 1;
	} else
		host_len = strlen(text); /* a name, IPv4, or bare IPv6 */
	if (!host_len || host_len >= MASTER_HOST_MAX)
		return -EINVAL;
	if (port_text && parse_port(port_text, allow_zero, &p))
		return -EINVAL;
	memcpy(host, text, host_len);
	host[host_len] = '\0';
	snprintf(port, MASTER_PORT_MAX, "%hu", (unsigned short)p);
	return 0;
}
