/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mock-driver.h - a scriptable driver ("mock") and a 1:1 filter
 * ("mockfilter") for unit tests of the vbd core.
 */
#ifndef TAPSTRIPE_MOCK_DRIVER_H
#define TAPSTRIPE_MOCK_DRIVER_H

#include "tapdisk/driver.h"

#define MOCK_MAX_SEEN 256
#define MOCK_SEEN_IOV 32 /* iovec entries recorded per request */

struct mock_seen {
	enum td_op op;
	uint32_t flags;
	uint64_t sector;
	uint32_t nr_sectors;
	int iovcnt;
	struct iovec iov[MOCK_SEEN_IOV];
	unsigned int layer;
};

struct mock_ctl {
	/* what open reports */
	uint64_t size_sectors;
	int refresh_err; /* refresh_size fails with it */
	uint32_t sector_size;
	uint32_t features;
	uint64_t boundary_sectors;
	uint32_t max_io_sectors;
	int open_err;
	/* behaviour */
	bool hold;	/* keep requests until mock_complete_held() */
	int submit_err; /* returned by submit when nonzero */
	int complete_err;
	bool complete_twice;
	/* observations */
	unsigned int nr_seen;
	struct mock_seen seen[MOCK_MAX_SEEN];
	struct td_request *held[MOCK_MAX_SEEN];
	unsigned int nr_held;
	unsigned int unplugs;
	unsigned int filter_forwards;
	bool closed;
};

extern struct mock_ctl mock;
extern const struct td_driver_ops mock_ops;
extern const struct td_driver_ops mock_filter_ops;
extern const struct td_driver_ops *const mock_table[];

/* Reset mock to a 1 MiB disk that completes at once. */
void mock_reset(void);
/* Complete held request i (in submission order) with err. */
void mock_complete_held(unsigned int i, int err);

#endif
