/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd.h - a synchronous etcd v3 client for the master, over etcd's JSON
 * gateway (HTTP POST /v3/kv/range and /v3/kv/txn, libcurl).  Keys and
 * values are byte strings (base64 on the wire).  Not for an event loop:
 * every call blocks, for at most the client's timeout per endpoint tried.
 *
 * Errors are 0 or -errno, and etcd_client_error() then says why in words:
 *   -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH  no endpoint answered (the
 *                  reason lists every endpoint tried and what happened);
 *   -EPROTO        an endpoint answered but is not etcd's gateway;
 *   -EINVAL        etcd refused the request (its message is quoted);
 *   -EIO           another error etcd reported (its message is quoted);
 *   -EFBIG         etcd's answer exceeds ETCD_MAX_RESPONSE_BYTES (a range
 *                  to cut with a limit);
 *   -ENOMEM.
 * A connection error, a timeout, an answer that is not etcd's or etcd's
 * "unavailable" (no leader, a member cut off from the quorum) moves to the
 * next endpoint; the client keeps using the one that answered last.
 * A request that timed out may still have been applied: only a txn whose
 * compares make a replay fail is safe to retry (the master's are).
 */
#ifndef TAPSTRIPE_ETCD_H
#define TAPSTRIPE_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most endpoints in a list. */
#define ETCD_MAX_ENDPOINTS 16
/* Largest answer accepted from etcd (a range of log entries). */
#define ETCD_MAX_RESPONSE_BYTES (64u << 20)

struct etcd_client;

/*
 * A client of the comma-separated endpoints ("http://127.0.0.1:2379,...";
 * http:// or https://), each request given timeout_ms per endpoint.
 * 0 and *out, -EINVAL for a bad list (*out NULL; reason in errbuf when
 * errbuf is not NULL), -ENOMEM.  Contacts nobody yet.
 */
int etcd_client_new(const char *endpoints, unsigned int timeout_ms,
		    struct etcd_client **out, char *errbuf, size_t errlen);
void etcd_client_free(struct etcd_client *c);
/* Why the last call failed ("" after a success). */
const char *etcd_client_error(const struct etcd_client *c);
/* The endpoint the next request goes to first. */
const char *etcd_client_endpoint(const struct etcd_client *c);

/* One key-value pair as etcd returns it; the buffers are malloc'd. */
struct etcd_kv {
	uint8_t *key;
	size_t key_len;
	uint8_t *value;
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
};

void etcd_kv_clear(struct etcd_kv *kv);

/*
 * Read key (a linearizable read).  0 with *found and, when found, *kv
 * (clear it with etcd_kv_clear); *revision (may be NULL) gets the store's
 * revision at the read.
 */
int etcd_get(struct etcd_client *c, const void *key, size_t key_len,
	     struct etcd_kv *kv, bool *found, int64_t *revision);

enum etcd_cmp_kind {
	ETCD_CMP_VALUE,	       /* the key exists with exactly value */
	ETCD_CMP_MOD_REVISION, /* the key's mod_revision is mod_revision */
	ETCD_CMP_ABSENT,       /* the key does not exist */
};

struct etcd_cmp {
	enum etcd_cmp_kind kind;
	const void *key;
	size_t key_len;
	const void *value; /* ETCD_CMP_VALUE */
	size_t value_len;
	int64_t mod_revision; /* ETCD_CMP_MOD_REVISION */
};

enum etcd_op_kind {
	ETCD_OP_PUT,
	ETCD_OP_DELETE, /* key, or [key, range_end) when range_end is set */
	ETCD_OP_RANGE,	/* key, or [key, range_end) when range_end is set */
};

struct etcd_op {
	enum etcd_op_kind kind;
	const void *key;
	size_t key_len;
	const void *value; /* ETCD_OP_PUT */
	size_t value_len;
	const void *range_end; /* NULL: the key alone (etcd_prefix_end) */
	size_t range_end_len;
	int64_t limit; /* ETCD_OP_RANGE: most pairs returned, 0 = all */
};

/* What one range returned: pairs in key order. */
struct etcd_range {
	struct etcd_kv *kvs;
	size_t nr_kvs;
	int64_t count; /* pairs in the range, beyond limit too */
	bool more;     /* limit cut the answer */
};

struct etcd_txn_result {
	bool succeeded;	  /* every compare held: the success ops ran */
	int64_t revision; /* the store's revision after the txn */
	/* One per ETCD_OP_RANGE of the branch that ran, in op order. */
	struct etcd_range *ranges;
	size_t nr_ranges;
};

void etcd_txn_result_clear(struct etcd_txn_result *res);

/*
 * One atomic transaction: if every compare holds, the success ops run,
 * else the failure ops.  0 and *res (clear it with etcd_txn_result_clear)
 * whichever branch ran; <0 when the txn may not have run (see the head).
 * etcd limits the ops of one txn (128 by default: --max-txn-ops).
 */
int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmps, size_t nr_cmps,
	     const struct etcd_op *success, size_t nr_success,
	     const struct etcd_op *failure, size_t nr_failure,
	     struct etcd_txn_result *res);

/*
 * The range_end that makes [prefix, range_end) every key starting with
 * prefix: prefix with its last byte below 0xff incremented and the rest
 * cut.  out holds len bytes; *out_len gets the length, 0 when prefix is
 * all 0xff (then no key follows: etcd's "\0" range_end means "to the
 * end", which the caller passes itself).
 */
void etcd_prefix_end(const void *prefix, size_t len, uint8_t *out,
		     size_t *out_len);

#endif
