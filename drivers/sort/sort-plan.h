/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sort-plan.h - the sort filter's options and its merge plan: ordering a
 * released plug and cutting it into groups that one forwarded request can
 * carry.  Plain functions over the requests given (no event loop, no I/O),
 * shared by block-sort.c and its tests.  Which requests may share a plug
 * at all is block-sort.c's business (its ordering rules); the plan only
 * ever sees requests that may be reordered freely among themselves.
 */
#ifndef TAPSTRIPE_SORT_PLAN_H
#define TAPSTRIPE_SORT_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "tapdisk/driver.h"

#define SORT_DEFAULT_MAX_MERGE_BYTES (4u << 20)
#define SORT_DEFAULT_MAX_PLUG_BYTES  (64ull << 20)
#define SORT_WINDOW_US_LIMIT	     1000000u /* one second */
#define SORT_MAX_MERGE_LIMIT	     (1u << 30)
#define SORT_MAX_REQS_LIMIT	     65536u
#define SORT_MAX_BYTES_LIMIT	     (1ull << 40)

/* Parsed from the chain: "sort:window_us=200,max_merge=4M|aio:/x". */
struct sort_opts {
	uint32_t window_us;	  /* hold a plug this long; 0: one pass */
	uint32_t max_merge_bytes; /* largest request sort builds */
	uint32_t max_reqs;	  /* release a plug this full; 0: queue depth */
	uint64_t max_plug_bytes;  /* ... or holding this many bytes */
};

#define SORT_WHY_MAX 256 /* sort_opts_parse's reason, the NUL included */

/*
 * Parse args ("" gives the defaults).  Returns 0, or -EINVAL with which
 * option is wrong and what it accepts in why (why_len bytes).
 */
int sort_opts_parse(const char *args, struct sort_opts *opts, char *why,
		    size_t why_len);

enum sort_state {
	SORT_WAITING,  /* for earlier requests (see block-sort.c) */
	SORT_PLUGGED,  /* in the plug, may be reordered and merged */
	SORT_INFLIGHT, /* forwarded, alone or in a group */
};

/* Per-request state of sort (td_request.priv of sort's pool). */
struct sort_req {
	struct td_request *req;
	uint64_t seq;	   /* arrival number */
	uint32_t blockers; /* earlier events it still waits for */
	uint32_t held_idx; /* its entry in the held set */
	enum sort_state state;
	struct sort_req *next_child; /* next member of its forwarded group */
	TAILQ_ENTRY(sort_req) wait_link;
};

/* What one forwarded request may be. */
struct sort_limits {
	uint64_t boundary_sectors; /* the lower driver's; 0: none */
	uint64_t max_sectors;	   /* max_merge and the lower max_io_sectors */
	int iov_cap;		   /* td_request_iov_cap() */
};

/* A run of plugged requests that becomes one forwarded request. */
struct sort_group {
	struct sort_req *first; /* children linked through next_child */
	struct sort_req *last;
	uint64_t sector;
	uint64_t nr_sectors;
	uint32_t members;
	/*
	 * The forwarded request's own slab (iov_cap entries), filled once a
	 * second member joins; a lone member forwards its own iovecs.
	 */
	struct iovec *iov;
	int iovcnt;
};

/* Order reqs[0..n) by operation, flags, sector, then arrival. */
void sort_plan_order(struct sort_req **reqs, uint32_t n);

/* Start a group with first; slab is where merged iovecs go. */
void sort_group_start(struct sort_group *g, struct sort_req *first,
		      struct iovec *slab);

/*
 * Append next to g when it continues it: same op (not FLUSH) and flags,
 * starting where g ends, within lim's boundary, size and iovec count
 * (entries adjacent in memory joined).  Returns false, leaving g as it
 * was for forwarding, when it does not.
 */
bool sort_group_add(struct sort_group *g, struct sort_req *next,
		    const struct sort_limits *lim);

#endif
