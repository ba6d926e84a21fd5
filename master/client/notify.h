/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * notify.h - telling stripe-master about replica states from inside
 * tapdisk without ever blocking its event loop (issue #6).
 *
 * When a write to one replica of an extent fails and another succeeds, the
 * stripe driver first rewrites its mapping file (the truth, durable before
 * the write completes), then calls master_notifier_replica_state(): the
 * master's record is for operators (stripe-ctl vdisk show --name, extents
 * list), never needed to serve the disk.
 *
 * One notifier thread per notifier, the only user of its master_client
 * (master/client.h).  The caller's side only takes a mutex: the latest
 * state of each (vdisk, column, extent, replica) waits in a bounded queue,
 * oldest first; a second state for a queued replica replaces the first
 * (coalesced, keeping its place).  The thread sends the oldest state
 * (MS_REPLICA_STATE, idempotent) and forgets it once the master has
 * acknowledged it, unless a newer state came meanwhile (that one is sent
 * next).  While the master is unreachable (connection refused, timeout, or
 * its store or allow-list refusing: MS_EIO, MS_EBUSY, MS_EPERM) the thread
 * retries with back-off, MASTER_NOTIFY_BACKOFF_MIN_MS doubling up to
 * MASTER_NOTIFY_BACKOFF_MAX_MS, and logs once when the master becomes
 * unreachable and once when it is back.  A state the master refuses for
 * good (unknown disk, indices outside it) is dropped with a log line.
 *
 * The queue holds MASTER_NOTIFY_QUEUE_MAX replicas; beyond that the oldest
 * is dropped with a (rate-limited) log line: the mapping file keeps every
 * state, and a resync or the operator (stripe-ctl vdisk mark) can set the
 * master's record again.
 *
 * Threads and signals: the thread runs with every signal blocked (a
 * signalfd or sigwait in the caller's thread keeps working, and SIGPIPE
 * from a lost connection cannot kill the process).  All functions may be
 * called from any thread; none after master_notifier_stop.  Logging goes
 * through tapdisk/log.h, as all of master/ does.
 */
#ifndef TAPSTRIPE_MASTER_NOTIFY_H
#define TAPSTRIPE_MASTER_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MASTER_NOTIFY_QUEUE_MAX	      4096 /* replicas waiting */
#define MASTER_NOTIFY_CALL_TIMEOUT_MS 1000 /* per attempt */
#define MASTER_NOTIFY_BACKOFF_MIN_MS  100
#define MASTER_NOTIFY_BACKOFF_MAX_MS  5000
#define MASTER_NOTIFY_FLUSH_MS	      1000 /* what stop may spend sending */

struct master_notifier;

/* What a notifier did, for tests and reports. */
struct master_notifier_stats {
	uint64_t queued;	   /* calls of master_notifier_replica_state */
	uint64_t coalesced;	   /* of those, merged into a queued entry */
	uint64_t sent;		   /* states the master acknowledged */
	uint64_t failed_attempts;  /* calls that failed, to be retried */
	uint64_t dropped_overflow; /* the oldest, when the queue was full */
	uint64_t dropped_refused;  /* refused by the master for good */
	uint64_t dropped_invalid;  /* a vdisk id too long to be one */
};

/*
 * A notifier for the master at "HOST[:PORT]" (master/client.h); it starts
 * one thread, which connects on the first state to send.  0, or -EINVAL
 * (not HOST[:PORT]), -ENOMEM, -EAGAIN (no thread).
 */
int master_notifier_start(const char *master_addr,
			  struct master_notifier **out);

/*
 * Queue the state of replica (column, extent, replica) of vdisk: stale
 * true when it missed writes, false when it is in step again.  Never
 * blocks beyond the notifier's mutex (held for a hash lookup), never
 * allocates, never fails: see above for overflow and refusals.
 */
void master_notifier_replica_state(struct master_notifier *n, const char *vdisk,
				   uint32_t column, uint32_t extent,
				   uint32_t replica, bool stale);

/*
 * Try to send what is queued for at most about MASTER_NOTIFY_FLUSH_MS
 * (an attempt under way may add its own timeout, bounded by the same
 * budget), then stop the thread and free everything.  States still queued
 * are logged as not sent.  n NULL does nothing.
 */
void master_notifier_stop(struct master_notifier *n);

/* States queued (the one being sent stays queued until answered). */
size_t master_notifier_pending(struct master_notifier *n);

/*
 * Wait until nothing is pending: 0, or -ETIMEDOUT after timeout_ms.  For
 * tests, and for callers that want the master told before going on.
 */
int master_notifier_wait_idle(struct master_notifier *n,
			      unsigned int timeout_ms);

void master_notifier_get_stats(struct master_notifier *n,
			       struct master_notifier_stats *out);

#endif
