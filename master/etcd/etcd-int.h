/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd-int.h - inside the etcd client: the JSON of the gateway's requests
 * and answers (etcd-json.c), apart from HTTP so that the tests reach it.
 */
#ifndef TAPSTRIPE_ETCD_INT_H
#define TAPSTRIPE_ETCD_INT_H

#include "common/json-read.h"
#include "common/json.h"
#include "master/etcd/etcd.h"

/* The body of POST /v3/kv/range for one key.  0 or -ENOMEM. */
int etcd_json_range_request(struct td_strbuf *sb, const void *key,
			    size_t key_len);
/* The body of POST /v3/kv/txn.  0, -EINVAL (a bad kind), -ENOMEM. */
int etcd_json_txn_request(struct td_strbuf *sb, const struct etcd_cmp *cmps,
			  size_t nr_cmps, const struct etcd_op *success,
			  size_t nr_success, const struct etcd_op *failure,
			  size_t nr_failure);

/*
 * The answers, parsed by td_json_parse.  0; -EPROTO when the document is
 * not what etcd writes (no header, a key that is not base64, a revision
 * that is not a number); -ENOMEM.  *res / *range are cleared on error.
 */
int etcd_json_range_response(const struct td_jval *doc,
			     struct etcd_range *range, int64_t *revision);
int etcd_json_txn_response(const struct td_jval *doc,
			   struct etcd_txn_result *res);

/* Free a range's pairs and zero it. */
void etcd_range_free(struct etcd_range *range);

/*
 * An error answer {"error": ..., "code": N, "message": ...}: the gRPC
 * code (-1 when absent) and the message (NULL when absent).
 */
void etcd_json_error(const struct td_jval *doc, int *code,
		     const char **message);

/* gRPC status codes the gateway passes on. */
#define ETCD_GRPC_INVALID_ARGUMENT  3
#define ETCD_GRPC_DEADLINE_EXCEEDED 4
#define ETCD_GRPC_UNAVAILABLE	    14

#endif
