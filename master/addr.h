/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * addr.h - "HOST[:PORT]" as the master's tools and daemon write it.
 */
#ifndef TAPSTRIPE_MASTER_ADDR_H
#define TAPSTRIPE_MASTER_ADDR_H

#include <stddef.h>

#define MASTER_HOST_MAX 256 /* bytes, the NUL included */
#define MASTER_PORT_MAX 8

/*
 * Split "host", "host:port", "[v6addr]" or "[v6addr]:port" (a bare IPv6
 * address without brackets is taken whole as the host).  The port defaults
 * to default_port and must be 1-65535 (0 too when allow_zero: "any free
 * port").  0, or -EINVAL.
 */
int master_split_hostport(const char *text, unsigned int default_port,
			  int allow_zero, char host[MASTER_HOST_MAX],
			  char port[MASTER_PORT_MAX]);

#endif
