/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qos-group.h - a qos budget shared by several disks (a throttle group,
 * like QEMU's throttle-group or blktap's valve): every qos filter that
 * names the same group, in any tapdisk of the host, draws from the same
 * buckets.
 *
 * The group is a small file, GROUP_DIR/NAME.qos (on the run dir, a
 * tmpfs), mapped shared by each member.  Its buckets are GCRA theoretical
 * arrival times on CLOCK_MONOTONIC, which every process of the host
 * shares; a member charges them with compare-and-swap, so there is no
 * lock to hold and no daemon to run, and a member killed at any moment
 * leaves nothing half done.  Two members may pass one request each at the
 * same instant past an exhausted budget (the check and the charge are
 * not one atomic step): the overshoot is bounded by one request per
 * member and repaid by the debt it leaves.
 */
#ifndef TAPSTRIPE_QOS_GROUP_H
#define TAPSTRIPE_QOS_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "drivers/qos/qos-bucket.h"

struct qos_group;

/*
 * Open (creating it when missing) the group NAME in dir (made when
 * missing, mode 0700).  A new group has no limit.  0 or -errno with the
 * reason in why (a file that is not a group: say to remove it).
 */
int qos_group_open(const char *dir, const char *name, struct qos_group **out,
		   char *why, size_t why_len);
void qos_group_close(struct qos_group *g);
const char *qos_group_name(const struct qos_group *g);

/*
 * Set the group's limits (given[l] true: limit[l] changes; the others
 * stay) and burst; the buckets forget their debt.  Every member sees it
 * at its next request.
 */
void qos_group_set(struct qos_group *g, const uint64_t limit[QOS_NR_LIMITS],
		   const bool given[QOS_NR_LIMITS], uint32_t burst_ms,
		   uint64_t now_ns);

/* The group's limits and burst now. */
void qos_group_get(const struct qos_group *g, uint64_t limit[QOS_NR_LIMITS],
		   uint32_t *burst_ms);

/*
 * Nanoseconds until a request of cost may pass the group's buckets; 0:
 * it may, and it has been charged.
 */
uint64_t qos_group_admit(struct qos_group *g,
			 const uint64_t cost[QOS_NR_LIMITS], uint64_t now_ns);

#endif
