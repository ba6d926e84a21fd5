/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server-int.h - what server.c (the loop) and dispatch.c (the calls)
 * share.  Only master/server.c and master/dispatch.c include it.
 */
#ifndef TAPSTRIPE_MASTER_SERVER_INT_H
#define TAPSTRIPE_MASTER_SERVER_INT_H

#include <poll.h>
#include <stdbool.h>

#include "master/reply.h"
#include "master/server/server.h"

/* A reply waiting for the round's commit. */
struct master_pending {
	SVCXPRT *xprt;
	ms_reply reply;
	bool in_round; /* ran inside the round's transaction */
};

struct master_server {
	struct master_server_config cfg;
	struct master_store *store;
	int stop_fd;
	SVCXPRT *listener;
	int listen_fd;
	unsigned int port;
	struct master_stats stats;
	/* the round */
	bool round_open;   /* BEGIN done, COMMIT pending */
	bool round_failed; /* the store failed: every call of it gets EIO */
	uint64_t round_calls;
	struct master_pending *pending;
	size_t nr_pending, cap_pending;
	/* connections: last activity by fd */
	uint64_t *last_active_ns;
	bool *fd_open; /* scratch of sweep */
	size_t nr_fds;
	struct pollfd *pfd;
	size_t cap_pfd;
};

/*
 * The server whose dispatcher runs: libtirpc's dispatch callback has no
 * context argument.  Set by master_server_create, cleared by destroy.
 */
extern struct master_server *master_current;

/* The dispatcher registered with svc_register. */
void master_dispatch(struct svc_req *rq, SVCXPRT *xprt);

/* End the round: commit, then send every pending reply and free it. */
void master_round_finish(struct master_server *ms);

#endif
