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

/* The decoded arguments of any procedure. */
union ms_args {
	ms_server_add_args server_add;
	ms_server_key key;
	ms_alloc_args alloc;
	ms_vdisk_id id;
	ms_vdisk_list_args vdisk_list;
	ms_extent_list_args extent_list;
	ms_replica_state_args replica_state;
	ms_lease_args lease;
	ms_host_id host;
	ms_server_label_args label;
	ms_move_args move;
	ms_move_list_args move_list;
	ms_server_chap_args chap;
	ms_grow_args grow;
	ms_snapshot_args snapshot;
};

struct master_proc;

/*
 * A reply waiting for the round's commit, and the call's decoded
 * arguments, kept until the round ends: a replicated store may make the
 * round run again (master_store_commit's -EAGAIN).
 */
struct master_pending {
	SVCXPRT *xprt;
	ms_reply reply;
	bool in_round; /* ran inside the round's transaction */
	const struct master_proc *proc;
	union ms_args args;
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
	uint64_t round_replays; /* runs again after other masters' changes */
	int round_err;		/* why the commit failed (-errno) */
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
