/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * netacl.h - the networks whose clients may change the master (issue #5).
 *
 * stripe-master answers read-only calls from anyone who can reach it, and
 * mutating calls (server add/drain/remove, vdisk alloc/release) only from
 * clients inside one of these networks.  The default is loopback only.
 */
#ifndef TAPSTRIPE_MASTER_NETACL_H
#define TAPSTRIPE_MASTER_NETACL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define MASTER_NETACL_MAX 64

struct master_net {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	unsigned int prefix_bits;
};

struct master_netacl {
	unsigned int nr;
	struct master_net nets[MASTER_NETACL_MAX];
};

/* Empty: nobody may change the master. */
void master_netacl_init(struct master_netacl *acl);

/* Loopback: 127.0.0.0/8 and ::1/128. */
void master_netacl_loopback(struct master_netacl *acl);

/*
 * Add "ADDR" or "ADDR/BITS" (IPv4 or IPv6; "0.0.0.0/0" and "::/0" allow
 * everyone).  0; -EINVAL for text that is not a network or has host bits
 * set beyond its prefix; -ENOSPC beyond MASTER_NETACL_MAX.
 */
int master_netacl_add(struct master_netacl *acl, const char *text);

/*
 * Is the peer at sa inside one of the networks?  IPv4-mapped IPv6 peers
 * (::ffff:a.b.c.d) are checked as IPv4.
 */
bool master_netacl_allows(const struct master_netacl *acl,
			  const struct sockaddr *sa, socklen_t len);

/* The peer address as text, for messages ("?" when unknown). */
void master_peer_name(const struct sockaddr *sa, socklen_t len, char *buf,
		      size_t size);

#endif
