/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.h - stripe-master's Sun RPC server (issue #5): one thread, one
 * poll loop, libtirpc's TCP transport, our own dispatcher, group commit.
 *
 * Connections.  rpc_control(RPC_SVC_CONNMAXREC_SET) makes every accepted
 * connection non-blocking with records bounded by MASTER_MAX_RECORD_BYTES:
 * a client that sends half a record holds only its own buffer, and one
 * that sends more is disconnected.  In that mode libtirpc reads at most one
 * record per connection per poll round.  Connections idle for longer than
 * idle_timeout_s are closed; beyond max_connections new ones wait in the
 * listen backlog.  Replies go out with libtirpc's writer, which gives a
 * client that does not read them at most 2 s before it drops the
 * connection.
 *
 * Group commit.  Each poll round runs every call that arrived (at most one
 * per connection) inside one SQLite transaction, each call under its own
 * savepoint, then commits once, then sends the replies.  A reply therefore
 * never leaves before its call is durable, and N concurrent clients share
 * one fsync.  If the commit fails every call of the round is answered
 * MS_EIO and nothing of it is kept.
 *
 * libtirpc's service registry is process-wide: one master_server per
 * process.
 */
#ifndef TAPSTRIPE_MASTER_SERVER_H
#define TAPSTRIPE_MASTER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "master/server/netacl.h"
#include "master/server/store.h"

#define MASTER_DEFAULT_LISTEN	       "127.0.0.1"
#define MASTER_DEFAULT_IDLE_S	       60
#define MASTER_DEFAULT_MAX_CONNECTIONS 256
#define MASTER_MAX_RECORD_BYTES	       (64 << 10) /* a call, not a reply */

struct master_server_config {
	const char *listen; /* HOST[:PORT]; port 0 picks a free one */
	struct master_netacl acl;
	unsigned int idle_timeout_s; /* 0: never close idle connections */
	unsigned int max_connections;
};

struct master_stats {
	uint64_t calls;		/* dispatched, decode failures excluded */
	uint64_t rounds;	/* transactions committed or rolled back */
	uint64_t failed_rounds; /* commits that failed */
	uint64_t max_round_calls;
	uint64_t max_round_us; /* reading, running, committing, replying */
	uint64_t slow_rounds;  /* rounds of 2 ms or more */
	uint64_t decode_errors;
	uint64_t denied; /* mutating calls from outside the allow-list */
	uint64_t idle_closed;
};

struct master_server;

/*
 * Listen on cfg->listen and register the program.  The loop stops when
 * stop_fd becomes readable (a signalfd, an eventfd); the caller owns it.
 * 0, or -errno with msg saying why (-EADDRINUSE: the port is taken; -EBUSY:
 * a master_server exists already in this process).
 */
int master_server_create(const struct master_server_config *cfg,
			 struct master_store *store, int stop_fd,
			 struct master_server **out, char *msg, size_t msg_len);

/* The port it listens on (useful after port 0). */
unsigned int master_server_port(const struct master_server *ms);

/* Serve until stop_fd is readable.  0, or -errno on a fatal poll error. */
int master_server_run(struct master_server *ms);

/* Close every connection and the listener; free everything. */
void master_server_destroy(struct master_server *ms);

void master_server_get_stats(const struct master_server *ms,
			     struct master_stats *out);

#endif
