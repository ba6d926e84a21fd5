/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.h - talking to stripe-master (issue #5): used by stripe-ctl and
 * the benchmark and master/notify.c (tapdisk's stripe driver) today.  It
 * depends on libtirpc, never on the master's store.
 *
 * Retries.  Sun RPC over TCP is at-least-once: a call that timed out may
 * still run on the master.  Every procedure of stripe.x is idempotent by
 * its own keys, so the client retries a call whose transport failed
 * (timeout, connection refused or reset) on a new connection, up to
 * opts.retries times, with a short growing pause; the master answers a
 * retry of a call that did run with what it did (ms_reply.changed false).
 *
 * Fail-over (issue #23).  The address may be a list of masters that serve
 * one state ("A,B,C": several stripe-master --store on one etcd cluster).
 * A call goes to the master that answered last (the first at the start);
 * when that one's transport fails (timeout, refused, reset, not a
 * stripe-master) or it answers MS_EIO (its store is not available: "this
 * call changed nothing" or "retry, it may have taken effect"), the call
 * moves at once to the next master in the list, which is safe for the
 * same reason as a retry.  After every master failed once, the client
 * pauses and starts another turn, up to opts.retries more turns, all
 * within opts.total_ms; then the error names every master tried and why.
 *
 * Contracts: one thread uses one client at a time; the process must ignore
 * SIGPIPE (libtirpc writes to the socket with write(2)); functions return
 * 0 or -errno and never print: master_client_error() says what failed.
 */
#ifndef TAPSTRIPE_MASTER_CLIENT_H
#define TAPSTRIPE_MASTER_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "master/reply.h"

#define MASTER_CLIENT_DEFAULT_TIMEOUT_MS 10000
#define MASTER_CLIENT_DEFAULT_RETRIES	 3
#define MASTER_CLIENT_ERROR_SIZE	 768
#define MASTER_CLIENT_MAX_MASTERS	 8 /* addresses in one list */

struct master_client_opts {
	unsigned int timeout_ms; /* per attempt: connect, or call + reply */
	unsigned int retries;	 /* extra turns over the masters after every
				    one failed (transport error or MS_EIO) */
	/* The whole call, every attempt and pause included; 0: timeout_ms
	 * times (retries + the number of masters), plus the pauses. */
	unsigned int total_ms;
};

struct master_client;

/*
 * A client for the master at "HOST[:PORT]" (port MS_DEFAULT_PORT by
 * default), or for the masters of a list "HOST[:PORT],HOST[:PORT],..."
 * (at most MASTER_CLIENT_MAX_MASTERS, each once); it connects on its
 * first call.  opts NULL gives the defaults.  0, -EINVAL for an address
 * that is not such a list, -ENOMEM.
 */
int master_client_open(const char *address,
		       const struct master_client_opts *opts,
		       struct master_client **out);

void master_client_close(struct master_client *c);

/*
 * The time allowed to each later attempt (connect, or call and reply);
 * 0 restores the default.  For callers with a deadline (master/notify.c).
 */
void master_client_set_timeout(struct master_client *c,
			       unsigned int timeout_ms);

/*
 * The whole call's bound (opts.total_ms; 0 restores the default).  For
 * callers with a deadline (master/notify.c).
 */
void master_client_set_total(struct master_client *c, unsigned int total_ms);

/* "HOST:PORT" (the port filled in) of the master that answered last, or of
 * the first in the list before any call. */
const char *master_client_address(const struct master_client *c);

/* Every master of the list, "HOST:PORT,HOST:PORT..." in the order given
 * (the ports filled in): what a mapping file's master line records. */
const char *master_client_addresses(const struct master_client *c);

/* How many masters the list names (1 for a single address). */
unsigned int master_client_count(const struct master_client *c);

/*
 * Why the last call failed: the transport's error with advice, or the
 * master's own message.  "" after a success.
 */
const char *master_client_error(const struct master_client *c);

/*
 * Call procedure proc (an MS_* of stripe.x) with args, expecting a body of
 * kind body (MS_BODY_NONE for none).  rep is initialised here; the caller
 * frees it with master_reply_free whatever the result.
 *   0            the master answered MS_OK; rep holds the body
 *   -EINVAL ...  the master answered an error status (master_status_errno);
 *                rep holds its message, also in master_client_error
 *   -ECONNREFUSED, -ETIMEDOUT, -ECONNRESET, -EHOSTUNREACH
 *                the transport failed after every retry; rep is empty
 *   -EIO         (MS_EIO) every master tried said its store was not
 *                available; rep holds the last one's answer
 *   -EPROTO      the master's answer was not what stripe.x says
 */
int master_client_call(struct master_client *c, unsigned int proc,
		       xdrproc_t xargs, const void *args, ms_body_kind body,
		       ms_reply *rep);

/* The procedures, typed. */
int master_call_info(struct master_client *c, ms_reply *rep);
int master_call_server_add(struct master_client *c, const ms_server_add_args *a,
			   ms_reply *rep);
int master_call_server_drain(struct master_client *c, const ms_server_key *k,
			     ms_reply *rep);
int master_call_server_remove(struct master_client *c, const ms_server_key *k,
			      ms_reply *rep);
int master_call_server_list(struct master_client *c, ms_reply *rep);
int master_call_server_label(struct master_client *c,
			     const ms_server_label_args *a, ms_reply *rep);
/* Issue #20: set a server's CHAP account (SERVER), read it (CHAP, the
 * secret included: only for a mapping file, never to print). */
int master_call_server_chap_set(struct master_client *c,
				const ms_server_chap_args *a, ms_reply *rep);
int master_call_server_chap_get(struct master_client *c, const ms_server_key *k,
				ms_reply *rep);
/* Issue #19: a server gone for good (SERVER), every server's state and
 * load (SERVER_STATS), re-homing one replica slot (MOVE; see
 * ms_move_args in stripe.x) and the moves in progress (MOVES). */
int master_call_server_fail(struct master_client *c, const ms_server_key *k,
			    ms_reply *rep);
int master_call_server_status(struct master_client *c, ms_reply *rep);
int master_call_move_begin(struct master_client *c, const ms_move_args *a,
			   ms_reply *rep);
int master_call_move_commit(struct master_client *c, const ms_move_args *a,
			    ms_reply *rep);
int master_call_move_abort(struct master_client *c, const ms_move_args *a,
			   ms_reply *rep);
int master_call_move_list(struct master_client *c, const ms_move_list_args *a,
			  ms_reply *rep);
int master_call_vdisk_alloc(struct master_client *c, const ms_alloc_args *a,
			    ms_reply *rep);
/* MS_VDISK_GROW (idempotent): body VDISK, the whole disk after the call;
 * its extents_per_column may exceed what was asked (grown further by
 * another call). */
int master_call_vdisk_grow(struct master_client *c, const ms_grow_args *a,
			   ms_reply *rep);

/* MS_VDISK_SNAPSHOT (idempotent): body VDISK, the new disk, incomplete;
 * MS_VDISK_SNAPSHOT_DONE (idempotent): no body. */
int master_call_vdisk_snapshot(struct master_client *c,
			       const ms_snapshot_args *a, ms_reply *rep);
int master_call_vdisk_snapshot_done(struct master_client *c, const char *id,
				    ms_reply *rep);
int master_call_vdisk_lookup(struct master_client *c, const char *id,
			     ms_reply *rep);
int master_call_vdisk_release(struct master_client *c, const char *id,
			      ms_reply *rep);
int master_call_vdisk_list(struct master_client *c, const ms_vdisk_list_args *a,
			   ms_reply *rep);
int master_call_extent_list(struct master_client *c,
			    const ms_extent_list_args *a, ms_reply *rep);
/* Body REPLICA: the replica's extent and its state after the call. */
int master_call_replica_state(struct master_client *c,
			      const ms_replica_state_args *a, ms_reply *rep);

/*
 * Leases (issue #18; what each does: stripe.x).  Body LEASE.  Besides the
 * errors of master_client_call: -EBUSY when another host holds the lease
 * (MS_EHELD) and -ESTALE when the epoch given is not the lease's
 * (MS_ESTALE), -EPERM with status MS_EFENCED when the caller's host
 * was fenced; then rep->body is LEASE too, the lease as it is (holder,
 * epoch), and master_client_error() says what to do.  Each is safe to
 * retry (the client does, after a transport error).
 */
int master_call_lease_acquire(struct master_client *c, const char *vdisk,
			      const char *host, ms_reply *rep);
int master_call_lease_release(struct master_client *c, const char *vdisk,
			      const char *host, uint64_t epoch, ms_reply *rep);
int master_call_lease_handover(struct master_client *c, const char *vdisk,
			       const char *host, uint64_t epoch, const char *to,
			       ms_reply *rep);
/* Body servers: every LUN the disk has extents on (to fence previous). */
int master_call_lease_takeover(struct master_client *c, const char *vdisk,
			       const char *host, uint64_t expected_epoch,
			       bool fence, ms_reply *rep);
int master_call_lease_show(struct master_client *c, const char *vdisk,
			   ms_reply *rep);
/*
 * After a fenced takeover: host (the holder at epoch) has preempted the
 * old holder on every LUN; the lease's fence_pending becomes false.
 */
int master_call_lease_fenced(struct master_client *c, const char *vdisk,
			     const char *host, uint64_t epoch, ms_reply *rep);

/*
 * Fenced hosts.  A fenced host's acquire (and a handover to it) answers
 * MS_EFENCED: -EPERM with rep->status MS_EFENCED and body LEASE.  Body
 * HOSTS: every fenced host (after readmit: those left).
 */
int master_call_host_list(struct master_client *c, ms_reply *rep);
int master_call_host_readmit(struct master_client *c, const char *host,
			     ms_reply *rep);

#endif
