/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qos-bucket.h - the qos filter's token buckets and options, free of the
 * event loop so that tests drive them with their own clock.
 *
 * A bucket is kept as a theoretical arrival time (GCRA, the form of a
 * token bucket that needs no periodic refill): a request conforms when
 * tat - burst <= now; admitting it moves tat to max(tat, now) + cost/rate.
 * A request costing more than the burst still passes once the bucket is
 * full and leaves a debt, so nothing waits for ever.  Rate 0: no limit.
 */
#ifndef TAPSTRIPE_QOS_BUCKET_H
#define TAPSTRIPE_QOS_BUCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapdisk/driver.h"

enum qos_limit {
	QOS_IOPS,	/* iops: reads and writes together */
	QOS_READ_IOPS,	/* read_iops */
	QOS_WRITE_IOPS, /* write_iops */
	QOS_BPS,	/* bps: bytes per second, reads and writes */
	QOS_READ_BPS,	/* read_bps */
	QOS_WRITE_BPS,	/* write_bps */
	QOS_NR_LIMITS
};

/* Burst allowance when burst_ms is not given: 100 ms' worth. */
#define QOS_DEFAULT_BURST_MS 100u
#define QOS_MAX_BURST_MS     60000u
#define QOS_WHY_MAX	     256 /* a parse error's reason, NUL included */

#define QOS_GROUP_NAME_MAX 63

struct qos_opts {
	uint64_t limit[QOS_NR_LIMITS]; /* per second; 0: none */
	uint32_t burst_ms;	       /* seconds' worth, in ms, for all */
	/*
	 * group=NAME: a budget shared with other disks (qos-group.h), whose
	 * limits are the group_* keys; "" when none.
	 */
	char group[QOS_GROUP_NAME_MAX + 1];
	char group_dir[256]; /* group_dir=: where groups live */
	uint64_t group_limit[QOS_NR_LIMITS];
	bool group_given[QOS_NR_LIMITS]; /* group_<limit> was given */
	uint32_t group_burst_ms;
	bool group_burst_given;
};

/* A group name: 1 to 63 of [A-Za-z0-9._-], not starting with '.'. */
bool qos_group_name_ok(const char *name);

struct qos_bucket {
	uint64_t rate;	   /* units per second; 0: no limit */
	uint64_t burst_ns; /* tolerance: burst_ms of the rate */
	uint64_t tat_ns;   /* theoretical arrival time */
};

/* The name of a limit as written in options ("write_iops"). */
const char *qos_limit_name(enum qos_limit l);

/* Set the rate and burst, forgetting any debt (the bucket starts full). */
void qos_bucket_set(struct qos_bucket *b, uint64_t rate, uint32_t burst_ms,
		    uint64_t now_ns);

/* Nanoseconds until cost may pass; 0 when it may pass now. */
uint64_t qos_bucket_wait_ns(const struct qos_bucket *b, uint64_t now_ns);

/* Charge cost units admitted at now_ns. */
void qos_bucket_charge(struct qos_bucket *b, uint64_t cost, uint64_t now_ns);

/*
 * Which limits a request of op is charged to, and its cost for each:
 * cost[l] is 0 when limit l does not apply.  A flush costs nothing;
 * DISCARD and WRITE_ZEROES count as write operations and move no bytes.
 */
void qos_request_cost(enum td_op op, uint64_t bytes,
		      uint64_t cost[QOS_NR_LIMITS]);

/*
 * Parse "key=value,key=value" (the chain's options) over the values
 * already in opts: only the keys given change.  Sizes for *_bps take
 * K/M/G suffixes (binary).  0 or -EINVAL with the reason in why; on
 * error opts is unchanged.
 */
int qos_opts_parse(const char *args, struct qos_opts *opts, char *why,
		   size_t why_len);

/* Defaults: no limit, QOS_DEFAULT_BURST_MS. */
void qos_opts_init(struct qos_opts *opts);

#endif
