/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-notify.c - see stripe-notify.h: a wrapper over master/notify.h
 * (one notifier thread per disk that queues, coalesces and retries until
 * the master answers).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "drivers/stripe/stripe-notify.h"
#include "master/client/notify.h"

struct stripe_notify {
	struct master_notifier *n;
	uint64_t count;
};

int stripe_notify_start(const char *master_addr, struct stripe_notify **out)
{
	struct stripe_notify *sn = calloc(1, sizeof(*sn));
	int ret;

	if (!sn)
		return -ENOMEM;
	if ((ret = master_notifier_start(master_addr, &sn->n))) {
		free(sn);
		return ret;
	}
	*out = sn;
	return 0;
}

void stripe_notify_replica(struct stripe_notify *sn, const char *vdisk,
			   uint32_t column, uint32_t extent, uint32_t replica,
			   bool stale)
{
	td_info("stripe: %s: replica %u of extent %u of column %u is %s; "
		"telling the master",
		vdisk, replica, extent, column, stale ? "stale" : "in step");
	if (!sn)
		return;
	sn->count++;
	master_notifier_replica_state(sn->n, vdisk, column, extent, replica,
				      stale);
}

uint64_t stripe_notify_count(const struct stripe_notify *sn)
{
	return sn ? sn->count : 0;
}

void stripe_notify_stop(struct stripe_notify *sn)
{
	if (!sn)
		return;
	master_notifier_stop(sn->n);
	free(sn);
}
