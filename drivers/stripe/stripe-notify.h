/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-notify.h - tell the master that a replica became stale or was
 * resynchronised, off the I/O path (issue #6: "master told when
 * reachable").
 *
 * A thin wrapper over master/notify.h, so that the driver does not depend
 * on how the notification travels: the notifier's thread queues,
 * coalesces and retries until the master answers.  None of these calls
 * blocks the event loop or fails the I/O path; the mapping file, not the
 * master, is what serving the disk relies on.
 */
#ifndef TAPSTRIPE_STRIPE_NOTIFY_H
#define TAPSTRIPE_STRIPE_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

struct stripe_notify;

/*
 * Start a notifier for the master at master_addr ("host:port").  0 and
 * *out, or -errno (the driver then serves the disk without telling the
 * master, and says so in its log).
 */
int stripe_notify_start(const char *master_addr, struct stripe_notify **out);

/* Queue "replica r of extent j of column c of vdisk is (not) stale". */
void stripe_notify_replica(struct stripe_notify *n, const char *vdisk,
			   uint32_t column, uint32_t extent, uint32_t replica,
			   bool stale);

/* Notifications queued so far (for tap-ctl stats). */
uint64_t stripe_notify_count(const struct stripe_notify *n);

/* Stop and free; NULL is fine. */
void stripe_notify_stop(struct stripe_notify *n);

#endif
