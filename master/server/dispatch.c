/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dispatch.c - the master's own RPC dispatcher and the round's replies
 * (see server.h for the group commit).
 *
 * Written by hand rather than taken from rpcgen because rpcgen's
 * dispatcher leaks whatever it decoded when decoding fails part-way (a
 * hostile client can grow the master without bound), replies before
 * anything is durable, and knows nothing of the allow-list.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "master/server/server-int.h"

#define PENDING_MIN 16
/* Runs of a round after other masters changed a replicated store first
 * (each one etcd request, a few ms): beyond, its calls fail with MS_EIO
 * and their clients retry.  Two busy masters lose a race now and then,
 * 32 in a row practically never. */
#define ROUND_MAX_REPLAYS 32

struct master_server *master_current;

struct master_proc {
	const char *name;
	xdrproc_t xdr_args;
	bool mutating; /* only from the allow-list, only in a round */
	int (*run)(struct master_store *st, const union ms_args *a,
		   ms_reply *rep);
};

static int run_info(struct master_store *st, const union ms_args *a,
		    ms_reply *rep)
{
	return master_store_info(st, rep);
}

static int run_server_add(struct master_store *st, const union ms_args *a,
			  ms_reply *rep)
{
	return master_store_server_add(st, &a->server_add, rep);
}

static int run_server_drain(struct master_store *st, const union ms_args *a,
			    ms_reply *rep)
{
	return master_store_server_drain(st, &a->key, rep);
}

static int run_server_remove(struct master_store *st, const union ms_args *a,
			     ms_reply *rep)
{
	return master_store_server_remove(st, &a->key, rep);
}

static int run_server_list(struct master_store *st, const union ms_args *a,
			   ms_reply *rep)
{
	return master_store_server_list(st, rep);
}

static int run_vdisk_alloc(struct master_store *st, const union ms_args *a,
			   ms_reply *rep)
{
	return master_store_vdisk_alloc(st, &a->alloc, rep);
}

static int run_vdisk_lookup(struct master_store *st, const union ms_args *a,
			    ms_reply *rep)
{
	return master_store_vdisk_lookup(st, a->id, rep);
}

static int run_vdisk_release(struct master_store *st, const union ms_args *a,
			     ms_reply *rep)
{
	return master_store_vdisk_release(st, a->id, rep);
}

static int run_vdisk_list(struct master_store *st, const union ms_args *a,
			  ms_reply *rep)
{
	return master_store_vdisk_list(st, &a->vdisk_list, rep);
}

static int run_extent_list(struct master_store *st, const union ms_args *a,
			   ms_reply *rep)
{
	return master_store_extent_list(st, &a->extent_list, rep);
}

static int run_replica_state(struct master_store *st, const union ms_args *a,
			     ms_reply *rep)
{
	return master_store_replica_state(st, &a->replica_state, rep);
}

static int run_lease_acquire(struct master_store *st, const union ms_args *a,
			     ms_reply *rep)
{
	return master_store_lease_acquire(st, &a->lease, rep);
}

static int run_lease_release(struct master_store *st, const union ms_args *a,
			     ms_reply *rep)
{
	return master_store_lease_release(st, &a->lease, rep);
}

static int run_lease_handover(struct master_store *st, const union ms_args *a,
			      ms_reply *rep)
{
	return master_store_lease_handover(st, &a->lease, rep);
}

static int run_lease_takeover(struct master_store *st, const union ms_args *a,
			      ms_reply *rep)
{
	return master_store_lease_takeover(st, &a->lease, rep);
}

static int run_lease_show(struct master_store *st, const union ms_args *a,
			  ms_reply *rep)
{
	return master_store_lease_show(st, a->id, rep);
}

static int run_lease_fenced(struct master_store *st, const union ms_args *a,
			    ms_reply *rep)
{
	return master_store_lease_fenced(st, &a->lease, rep);
}

static int run_host_list(struct master_store *st, const union ms_args *a,
			 ms_reply *rep)
{
	return master_store_host_list(st, rep);
}

static int run_host_readmit(struct master_store *st, const union ms_args *a,
			    ms_reply *rep)
{
	return master_store_host_readmit(st, a->host, rep);
}

static int run_server_label(struct master_store *st, const union ms_args *a,
			    ms_reply *rep)
{
	return master_store_server_label(st, &a->label, rep);
}

static int run_server_fail(struct master_store *st, const union ms_args *a,
			   ms_reply *rep)
{
	return master_store_server_fail(st, &a->key, rep);
}

static int run_server_status(struct master_store *st, const union ms_args *a,
			     ms_reply *rep)
{
	return master_store_server_status(st, rep);
}

static int run_move_begin(struct master_store *st, const union ms_args *a,
			  ms_reply *rep)
{
	return master_store_move_begin(st, &a->move, rep);
}

static int run_move_commit(struct master_store *st, const union ms_args *a,
			   ms_reply *rep)
{
	return master_store_move_commit(st, &a->move, rep);
}

static int run_move_abort(struct master_store *st, const union ms_args *a,
			  ms_reply *rep)
{
	return master_store_move_abort(st, &a->move, rep);
}

static int run_move_list(struct master_store *st, const union ms_args *a,
			 ms_reply *rep)
{
	return master_store_move_list(st, &a->move_list, rep);
}

static int run_server_chap_set(struct master_store *st, const union ms_args *a,
			       ms_reply *rep)
{
	return master_store_server_chap_set(st, &a->chap, rep);
}

static int run_server_chap_get(struct master_store *st, const union ms_args *a,
			       ms_reply *rep)
{
	return master_store_server_chap_get(st, &a->key, rep);
}

static int run_vdisk_grow(struct master_store *st, const union ms_args *a,
			  ms_reply *rep)
{
	return master_store_vdisk_grow(st, &a->grow, rep);
}

static int run_vdisk_snapshot(struct master_store *st, const union ms_args *a,
			      ms_reply *rep)
{
	return master_store_vdisk_snapshot(st, &a->snapshot, rep);
}

static int run_vdisk_snapshot_done(struct master_store *st,
				   const union ms_args *a, ms_reply *rep)
{
	return master_store_vdisk_snapshot_done(st, a->id, rep);
}

/* mutating: from --allow networks only; so is MS_SERVER_CHAP_GET, whose
 * reply carries a secret although it changes nothing. */
static const struct master_proc procs[] = {
	[MS_INFO] = {"info", MASTER_XDR_VOID, false, run_info},
	[MS_SERVER_ADD] = {"server_add", (xdrproc_t)xdr_ms_server_add_args,
			   true, run_server_add},
	[MS_SERVER_DRAIN] = {"server_drain", (xdrproc_t)xdr_ms_server_key, true,
			     run_server_drain},
	[MS_SERVER_REMOVE] = {"server_remove", (xdrproc_t)xdr_ms_server_key,
			      true, run_server_remove},
	[MS_SERVER_LIST] = {"server_list", MASTER_XDR_VOID, false,
			    run_server_list},
	[MS_VDISK_ALLOC] = {"vdisk_alloc", (xdrproc_t)xdr_ms_alloc_args, true,
			    run_vdisk_alloc},
	[MS_VDISK_LOOKUP] = {"vdisk_lookup", (xdrproc_t)xdr_ms_vdisk_id, false,
			     run_vdisk_lookup},
	[MS_VDISK_RELEASE] = {"vdisk_release", (xdrproc_t)xdr_ms_vdisk_id, true,
			      run_vdisk_release},
	[MS_VDISK_LIST] = {"vdisk_list", (xdrproc_t)xdr_ms_vdisk_list_args,
			   false, run_vdisk_list},
	[MS_EXTENT_LIST] = {"extent_list", (xdrproc_t)xdr_ms_extent_list_args,
			    false, run_extent_list},
	[MS_REPLICA_STATE] = {"replica_state",
			      (xdrproc_t)xdr_ms_replica_state_args, true,
			      run_replica_state},
	[MS_LEASE_ACQUIRE] = {"lease_acquire", (xdrproc_t)xdr_ms_lease_args,
			      true, run_lease_acquire},
	[MS_LEASE_RELEASE] = {"lease_release", (xdrproc_t)xdr_ms_lease_args,
			      true, run_lease_release},
	[MS_LEASE_HANDOVER] = {"lease_handover", (xdrproc_t)xdr_ms_lease_args,
			       true, run_lease_handover},
	[MS_LEASE_TAKEOVER] = {"lease_takeover", (xdrproc_t)xdr_ms_lease_args,
			       true, run_lease_takeover},
	[MS_LEASE_SHOW] = {"lease_show", (xdrproc_t)xdr_ms_vdisk_id, false,
			   run_lease_show},
	[MS_LEASE_FENCED] = {"lease_fenced", (xdrproc_t)xdr_ms_lease_args, true,
			     run_lease_fenced},
	[MS_HOST_LIST] = {"host_list", MASTER_XDR_VOID, false, run_host_list},
	[MS_HOST_READMIT] = {"host_readmit", (xdrproc_t)xdr_ms_host_id, true,
			     run_host_readmit},
	[MS_SERVER_LABEL] = {"server_label",
			     (xdrproc_t)xdr_ms_server_label_args, true,
			     run_server_label},
	[MS_SERVER_FAIL] = {"server_fail", (xdrproc_t)xdr_ms_server_key, true,
			    run_server_fail},
	[MS_SERVER_STATUS] = {"server_status", MASTER_XDR_VOID, false,
			      run_server_status},
	[MS_MOVE_BEGIN] = {"move_begin", (xdrproc_t)xdr_ms_move_args, true,
			   run_move_begin},
	[MS_MOVE_COMMIT] = {"move_commit", (xdrproc_t)xdr_ms_move_args, true,
			    run_move_commit},
	[MS_MOVE_ABORT] = {"move_abort", (xdrproc_t)xdr_ms_move_args, true,
			   run_move_abort},
	[MS_MOVE_LIST] = {"move_list", (xdrproc_t)xdr_ms_move_list_args, false,
			  run_move_list},
	[MS_SERVER_CHAP_SET] = {"server_chap_set",
				(xdrproc_t)xdr_ms_server_chap_args, true,
				run_server_chap_set},
	[MS_SERVER_CHAP_GET] = {"server_chap_get", (xdrproc_t)xdr_ms_server_key,
				true, run_server_chap_get},
	[MS_VDISK_GROW] = {"vdisk_grow", (xdrproc_t)xdr_ms_grow_args, true,
			   run_vdisk_grow},
	[MS_VDISK_SNAPSHOT] = {"vdisk_snapshot",
			       (xdrproc_t)xdr_ms_snapshot_args, true,
			       run_vdisk_snapshot},
	[MS_VDISK_SNAPSHOT_DONE] = {"vdisk_snapshot_done",
				    (xdrproc_t)xdr_ms_vdisk_id, true,
				    run_vdisk_snapshot_done},
};
#define NR_PROCS (sizeof(procs) / sizeof(procs[0]))

static struct master_pending *pending_new(struct master_server *ms)
{
	struct master_pending *p;

	if (ms->nr_pending == ms->cap_pending) {
		size_t cap =
			ms->cap_pending ? ms->cap_pending * 2 : PENDING_MIN;

		p = realloc(ms->pending, cap * sizeof(*p));
		if (!p)
			return NULL;
		ms->pending = p;
		ms->cap_pending = cap;
	}
	p = &ms->pending[ms->nr_pending++];
	memset(p, 0, sizeof(*p));
	master_reply_init(&p->reply);
	return p;
}

static bool caller_allowed(struct master_server *ms, SVCXPRT *xprt,
			   ms_reply *rep)
{
	const struct netbuf *nb = svc_getrpccaller(xprt);
	char peer[64];

	if (nb && nb->buf &&
	    master_netacl_allows(&ms->cfg.acl, nb->buf, nb->len))
		return true;
	master_peer_name(nb ? nb->buf : NULL, nb ? nb->len : 0, peer,
			 sizeof(peer));
	ms->stats.denied++;
	td_warn("refused a mutating call from %s (not in --allow)", peer);
	master_reply_fail(rep, MS_EPERM,
			  "client %s may not change the master: start "
			  "stripe-master with --allow NETWORK covering it",
			  peer);
	return false;
}

static void fail_store(ms_reply *rep, int err)
{
	master_reply_fail(rep, MS_EIO,
			  "the master's store failed (%s; see its log): this "
			  "call changed nothing, retry later",
			  strerror(-err));
}

/* Why etcd did not confirm a round, in the user's words. */
static const char *round_err_cause(int err)
{
	switch (err) {
	case -ETIMEDOUT:
		return "etcd did not answer in time: the etcd members this "
		       "master uses may be cut off from their cluster's "
		       "majority";
	case -EHOSTUNREACH:
		return "etcd has no leader: its cluster has lost its quorum";
	case -ECONNREFUSED:
		return "no etcd member of the master's --store could be "
		       "reached";
	default:
		return strerror(-err);
	}
}

/* A call of a round that failed to commit.  A replicated store may have
 * taken the round although its confirmation was lost (a timeout). */
static void fail_round(struct master_server *ms, ms_reply *rep)
{
	if (!master_store_replicated(ms->store)) {
		fail_store(rep, -EIO);
		return;
	}
	if (ms->round_err == -E2BIG) {
		master_reply_fail(rep, MS_EIO,
				  "etcd refused the changes of this call's "
				  "round (larger than its --max-request-bytes; "
				  "see the master's log): nothing was changed; "
				  "allocate fewer extents at once (larger "
				  "extents) or raise etcd's limit");
		return;
	}
	master_reply_fail(rep, MS_EIO,
			  "the replicated store did not confirm this call (%s; "
			  "see the master's log): retry it, here or through "
			  "another master; it may have taken effect, and a "
			  "retry answers what it did",
			  round_err_cause(ms->round_err));
}

/* Run p inside the round's transaction, under a savepoint of its own. */
static void run_in_round(struct master_server *ms, const struct master_proc *p,
			 const union ms_args *a, struct master_pending *pd)
{
	int ret = 0;

	if (!ms->round_open && !(ret = master_store_begin(ms->store)))
		ms->round_open = true;
	if (ret || ms->round_failed) {
		fail_store(&pd->reply, ret ? ret : -EIO);
		return;
	}
	pd->in_round = true;
	ms->round_calls++;
	if ((ret = master_store_call_begin(ms->store)) ||
	    (ret = p->run(ms->store, a, &pd->reply)) < 0) {
		td_err("%s failed: %s", p->name, strerror(-ret));
		fail_store(&pd->reply, ret);
	}
	if (master_store_call_end(ms->store,
				  !ret && pd->reply.status == MS_OK) ||
	    !master_store_in_transaction(ms->store))
		ms->round_failed = true; /* SQLite gave the transaction up */
}

void master_dispatch(struct svc_req *rq, SVCXPRT *xprt)
{
	struct master_server *ms = master_current;
	const struct master_proc *p =
		rq->rq_proc < NR_PROCS ? &procs[rq->rq_proc] : NULL;
	struct master_pending *pd;

	if (rq->rq_proc == MS_NULL) {
		svc_sendreply(xprt, MASTER_XDR_VOID, NULL);
		return;
	}
	if (!p || !p->run) {
		svcerr_noproc(xprt);
		return;
	}
	if (!(pd = pending_new(ms))) {
		svcerr_systemerr(xprt);
		return;
	}
	if (!svc_getargs(xprt, p->xdr_args, (caddr_t)&pd->args)) {
		/* Free what was decoded before the failure. */
		svc_freeargs(xprt, p->xdr_args, (caddr_t)&pd->args);
		master_reply_free(&pd->reply);
		ms->nr_pending--;
		ms->stats.decode_errors++;
		svcerr_decode(xprt);
		return;
	}
	pd->xprt = xprt;
	pd->proc = p; /* the arguments are freed in master_round_finish */
	ms->stats.calls++;
	if (!p->mutating || caller_allowed(ms, xprt, &pd->reply))
		run_in_round(ms, p, &pd->args, pd);
}

/*
 * Run the round's calls again, from a fresh reply each, in a new
 * transaction: the store rolled the round back and caught up with what
 * other masters committed first.
 */
static bool replay_round(struct master_server *ms)
{
	ms->round_open = false;
	ms->round_failed = false;
	ms->round_calls = 0;
	ms->round_replays++;
	for (size_t i = 0; i < ms->nr_pending; i++) {
		struct master_pending *pd = &ms->pending[i];

		if (!pd->in_round)
			continue;
		master_reply_free(&pd->reply);
		master_reply_init(&pd->reply);
		run_in_round(ms, pd->proc, &pd->args, pd);
	}
	return !ms->round_failed && ms->round_open;
}

/* Commit the round; false when it failed (then it is rolled back). */
static bool commit_round(struct master_server *ms)
{
	bool ok = !ms->round_failed;
	int ret = 0;

	if (!ms->round_open)
		return true;
	while (ok && (ret = master_store_commit(ms->store)) == -EAGAIN &&
	       ms->round_replays < ROUND_MAX_REPLAYS)
		ok = replay_round(ms);
	if (ok && ret)
		ok = false;
	ms->round_err = ret;
	if (!ok) {
		master_store_rollback(ms->store);
		ms->stats.failed_rounds++;
		td_err("a round of %llu calls was rolled back (run %llu "
		       "times): each gets EIO",
		       (unsigned long long)ms->round_calls,
		       (unsigned long long)ms->round_replays + 1);
	}
	ms->stats.rounds++;
	if (ms->round_calls > ms->stats.max_round_calls)
		ms->stats.max_round_calls = ms->round_calls;
	ms->round_open = false;
	ms->round_failed = false;
	ms->round_calls = 0;
	ms->round_replays = 0;
	return ok;
}

void master_round_finish(struct master_server *ms)
{
	bool ok = commit_round(ms);

	for (size_t i = 0; i < ms->nr_pending; i++) {
		struct master_pending *pd = &ms->pending[i];

		if (!ok && pd->in_round)
			fail_round(ms, &pd->reply);
		/* A client that left fails here; poll reports it next. */
		if (!svc_sendreply(pd->xprt, (xdrproc_t)xdr_ms_reply,
				   (caddr_t)&pd->reply))
			td_dbg("a reply could not be sent");
		master_reply_free(&pd->reply);
		xdr_free(pd->proc->xdr_args, (char *)&pd->args);
	}
	ms->nr_pending = 0;
}
