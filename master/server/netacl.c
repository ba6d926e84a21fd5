/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * netacl.c - client networks allowed to change the master (netacl.h).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/server/netacl.h"

#define IPV4_BITS   32
#define IPV6_BITS   128
#define V4MAPPED_AT 12 /* ::ffff:a.b.c.d keeps the IPv4 address here */
#define LOOPBACK_V4 "127.0.0.0/8"
#define LOOPBACK_V6 "::1/128"

void master_netacl_init(struct master_netacl *acl)
{
	memset(acl, 0, sizeof(*acl));
}

void master_netacl_loopback(struct master_netacl *acl)
{
	master_netacl_init(acl);
	master_netacl_add(acl, LOOPBACK_V4);
	master_netacl_add(acl, LOOPBACK_V6);
}

/* Do the first bits of a and b agree? */
static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned int bits)
{
	unsigned int bytes = bits / 8, rest = bits % 8;

	if (memcmp(a, b, bytes))
		return false;
	if (!rest)
		return true;
	return !((a[bytes] ^ b[bytes]) & (uint8_t)(0xff << (8 - rest)));
}

static int parse_bits(const char *text, unsigned int max, unsigned int *bits)
{
	char *end;
	unsigned long v;

	if (!text) {
		*bits = max;
		return 0;
	}
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno || end == text || *end || v > max || text[0] == '-')
		return -EINVAL;
	*bits = (unsigned int)v;
	return 0;
}

int master_netacl_add(struct master_netacl *acl, const char *text)
{
	char buf[INET6_ADDRSTRLEN + 8];
	struct master_net net = {.family = AF_INET};
	char *slash;

	if (!text || strlen(text) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, text);
	if ((slash = strchr(buf, '/')))
		*slash++ = '\0';
	if (inet_pton(AF_INET, buf, net.addr) != 1) {
		net.family = AF_INET6;
		if (inet_pton(AF_INET6, buf, net.addr) != 1)
			return -EINVAL;
	}
	if (parse_bits(slash, net.family == AF_INET ? IPV4_BITS : IPV6_BITS,
		       &net.prefix_bits))
		return -EINVAL;
	/* Host bits set ("10.1.2.3/8") are a typo more often than not. */
	for (unsigned int b = net.prefix_bits;
	     b < (net.family == AF_INET ? IPV4_BITS : IPV6_BITS); b++)
		if (net.addr[b / 8] & (0x80 >> (b % 8)))
			return -EINVAL;
	if (acl->nr == MASTER_NETACL_MAX)
		return -ENOSPC;
	acl->nets[acl->nr++] = net;
	return 0;
}

bool master_netacl_allows(const struct master_netacl *acl,
			  const struct sockaddr *sa, socklen_t len)
{
	static const uint8_t v4mapped[V4MAPPED_AT] = {0, 0, 0, 0, 0,	0,
						      0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *addr;
	int family;

	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		family = AF_INET;
		addr = (const uint8_t *)&((const struct sockaddr_in *)sa)
			       ->sin_addr;
	} else if (sa->sa_family == AF_INET6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		family = AF_INET6;
		addr = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		if (!memcmp(addr, v4mapped, V4MAPPED_AT)) {
			family = AF_INET;
			addr += V4MAPPED_AT;
		}
	} else
		return false;
	for (unsigned int i = 0; i < acl->nr; i++)
		if (acl->nets[i].family == family &&
		    prefix_match(acl->nets[i].addr, addr,
				 acl->nets[i].prefix_bits))
			return true;
	return false;
}

void master_peer_name(const struct sockaddr *sa, socklen_t len, char *buf,
		      size_t size)
{
	if (!sa ||
	    getnameinfo(sa, len, buf, (socklen_t)size, NULL, 0, NI_NUMERICHOST))
		snprintf(buf, size, "?");
}
