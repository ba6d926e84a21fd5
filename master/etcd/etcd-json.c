/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd-json.c - the JSON of etcd's v3 gateway: requests written with
 * common/json.h, answers read from common/json-read.h trees.  The gateway
 * writes int64 fields as strings and leaves out fields that are zero,
 * false or empty.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/etcd/base64.h"
#include "master/etcd/etcd-int.h"

/* Write bytes as a base64 string member key; marks sb failed on ENOMEM. */
static void etcd_json_bytes(struct td_json *j, const char *key,
			    const void *data, size_t len)
{
	char *text = malloc(ETCD_BASE64_LEN(len) + 1);

	if (!text) {
		j->sb->oom = true;
		return;
	}
	etcd_base64_encode(data, len, text);
	td_json_str(j, key, text);
	free(text);
}

static void etcd_json_int(struct td_json *j, const char *key, int64_t value)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRId64, value);
	td_json_str(j, key, text);
}

int etcd_json_range_request(struct td_strbuf *sb, const void *key,
			    size_t key_len)
{
	struct td_json j;

	td_json_init(&j, sb);
	td_json_begin_object(&j, NULL);
	etcd_json_bytes(&j, "key", key, key_len);
	td_json_end_object(&j);
	return td_json_finish(&j);
}

static int etcd_json_cmp(struct td_json *j, const struct etcd_cmp *cmp)
{
	td_json_begin_object(j, NULL);
	etcd_json_bytes(j, "key", cmp->key, cmp->key_len);
	td_json_str(j, "result", "EQUAL");
	switch (cmp->kind) {
	case ETCD_CMP_VALUE:
		td_json_str(j, "target", "VALUE");
		etcd_json_bytes(j, "value", cmp->value, cmp->value_len);
		break;
	case ETCD_CMP_MOD_REVISION:
		td_json_str(j, "target", "MOD");
		etcd_json_int(j, "mod_revision", cmp->mod_revision);
		break;
	case ETCD_CMP_ABSENT:
		/* A key that does not exist has create_revision 0. */
		td_json_str(j, "target", "CREATE");
		etcd_json_int(j, "create_revision", 0);
		break;
	default:
		return -EINVAL;
	}
	td_json_end_object(j);
	return 0;
}

static int etcd_json_op(struct td_json *j, const struct etcd_op *op)
{
	static const char *const names[] = {
		[ETCD_OP_PUT] = "request_put",
		[ETCD_OP_DELETE] = "request_delete_range",
		[ETCD_OP_RANGE] = "request_range",
	};

	if ((unsigned int)op->kind > ETCD_OP_RANGE)
		return -EINVAL;
	td_json_begin_object(j, NULL);
	td_json_begin_object(j, names[op->kind]);
	etcd_json_bytes(j, "key", op->key, op->key_len);
	if (op->kind == ETCD_OP_PUT)
		etcd_json_bytes(j, "value", op->value, op->value_len);
	else if (op->range_end)
		etcd_json_bytes(j, "range_end", op->range_end,
				op->range_end_len);
	if (op->kind == ETCD_OP_RANGE && op->limit > 0)
		etcd_json_int(j, "limit", op->limit);
	td_json_end_object(j);
	td_json_end_object(j);
	return 0;
}

static int etcd_json_ops(struct td_json *j, const char *key,
			 const struct etcd_op *ops, size_t nr)
{
	size_t i;
	int rc;

	td_json_begin_array(j, key);
	for (i = 0; i < nr; i++) {
		rc = etcd_json_op(j, &ops[i]);
		if (rc < 0)
			return rc;
	}
	td_json_end_array(j);
	return 0;
}

int etcd_json_txn_request(struct td_strbuf *sb, const struct etcd_cmp *cmps,
			  size_t nr_cmps, const struct etcd_op *success,
			  size_t nr_success, const struct etcd_op *failure,
			  size_t nr_failure)
{
	struct td_json j;
	size_t i;
	int rc;

	td_json_init(&j, sb);
	td_json_begin_object(&j, NULL);
	td_json_begin_array(&j, "compare");
	for (i = 0; i < nr_cmps; i++) {
		rc = etcd_json_cmp(&j, &cmps[i]);
		if (rc < 0)
			return rc;
	}
	td_json_end_array(&j);
	rc = etcd_json_ops(&j, "success", success, nr_success);
	if (rc == 0)
		rc = etcd_json_ops(&j, "failure", failure, nr_failure);
	if (rc < 0)
		return rc;
	td_json_end_object(&j);
	return td_json_finish(&j);
}

/* An int64 member written as a string or a number; absent is 0. */
static int etcd_json_get_int(const struct td_jval *obj, const char *key,
			     int64_t *out)
{
	const struct td_jval *v = td_jval_get(obj, key);
	char *end;
	long long n;

	*out = 0;
	if (!v || v->type == TD_JNULL)
		return 0;
	if (v->type == TD_JNUMBER)
		return td_jval_get_i64(obj, key, out) < 0 ? -EPROTO : 0;
	if (v->type != TD_JSTRING || !v->string[0])
		return -EPROTO;
	errno = 0;
	n = strtoll(v->string, &end, 10);
	if (errno || *end)
		return -EPROTO;
	*out = n;
	return 0;
}

/* A base64 member into a malloc'd buffer; absent is empty (not NULL). */
static int etcd_json_get_bytes(const struct td_jval *obj, const char *key,
			       uint8_t **out, size_t *out_len)
{
	const struct td_jval *v = td_jval_get(obj, key);
	size_t len = 0;

	if (v && v->type != TD_JNULL && v->type != TD_JSTRING)
		return -EPROTO;
	if (v && v->type == TD_JSTRING)
		len = strlen(v->string);
	*out = malloc(len / 4 * 3 + 1);
	if (!*out)
		return -ENOMEM;
	*out_len = 0;
	if (len && etcd_base64_decode(v->string, len, *out, out_len) < 0) {
		free(*out);
		*out = NULL;
		return -EPROTO;
	}
	return 0;
}

void etcd_kv_clear(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

static int etcd_json_kv(const struct td_jval *obj, struct etcd_kv *kv)
{
	int rc;

	memset(kv, 0, sizeof(*kv));
	if (obj->type != TD_JOBJECT || !td_jval_get(obj, "key"))
		return -EPROTO;
	rc = etcd_json_get_bytes(obj, "key", &kv->key, &kv->key_len);
	if (rc == 0)
		rc = etcd_json_get_bytes(obj, "value", &kv->value,
					 &kv->value_len);
	if (rc == 0)
		rc = etcd_json_get_int(obj, "create_revision",
				       &kv->create_revision);
	if (rc == 0)
		rc = etcd_json_get_int(obj, "mod_revision", &kv->mod_revision);
	if (rc == 0)
		rc = etcd_json_get_int(obj, "version", &kv->version);
	if (rc < 0)
		etcd_kv_clear(kv);
	return rc;
}

void etcd_range_free(struct etcd_range *range)
{
	size_t i;

	for (i = 0; i < range->nr_kvs; i++)
		etcd_kv_clear(&range->kvs[i]);
	free(range->kvs);
	memset(range, 0, sizeof(*range));
}

static size_t etcd_json_count(const struct td_jval *arr)
{
	const struct td_jval *v;
	size_t n = 0;

	for (v = arr->child; v; v = v->next)
		n++;
	return n;
}

/* A RangeResponse object (the header is checked by the caller). */
static int etcd_json_range(const struct td_jval *obj, struct etcd_range *range)
{
	const struct td_jval *kvs = td_jval_get(obj, "kvs"), *v;
	int rc;

	memset(range, 0, sizeof(*range));
	if (kvs && kvs->type != TD_JARRAY)
		return -EPROTO;
	rc = etcd_json_get_int(obj, "count", &range->count);
	if (rc == 0 && td_jval_get(obj, "more"))
		rc = td_jval_get_bool(obj, "more", &range->more) < 0 ? -EPROTO
								     : 0;
	if (rc < 0 || !kvs || !kvs->child)
		return rc;
	range->kvs = calloc(etcd_json_count(kvs), sizeof(*range->kvs));
	if (!range->kvs)
		return -ENOMEM;
	for (v = kvs->child; v; v = v->next) {
		rc = etcd_json_kv(v, &range->kvs[range->nr_kvs]);
		if (rc < 0) {
			etcd_range_free(range);
			return rc;
		}
		range->nr_kvs++;
	}
	return 0;
}

/* The header's revision: every answer of etcd has a header. */
static int etcd_json_header(const struct td_jval *doc, int64_t *revision)
{
	const struct td_jval *h = td_jval_get(doc, "header");

	if (!h || h->type != TD_JOBJECT)
		return -EPROTO;
	return etcd_json_get_int(h, "revision", revision);
}

int etcd_json_range_response(const struct td_jval *doc,
			     struct etcd_range *range, int64_t *revision)
{
	int rc = etcd_json_header(doc, revision);

	memset(range, 0, sizeof(*range));
	return rc < 0 ? rc : etcd_json_range(doc, range);
}

void etcd_txn_result_clear(struct etcd_txn_result *res)
{
	size_t i;

	for (i = 0; i < res->nr_ranges; i++)
		etcd_range_free(&res->ranges[i]);
	free(res->ranges);
	memset(res, 0, sizeof(*res));
}

/* The responses of the branch that ran: keep the ranges. */
static int etcd_json_txn_ranges(const struct td_jval *arr,
				struct etcd_txn_result *res)
{
	const struct td_jval *v, *r;
	int rc;

	res->ranges = calloc(etcd_json_count(arr) + 1, sizeof(*res->ranges));
	if (!res->ranges)
		return -ENOMEM;
	for (v = arr->child; v; v = v->next) {
		if (v->type != TD_JOBJECT)
			return -EPROTO;
		r = td_jval_get(v, "response_range");
		if (!r)
			continue;
		if (r->type != TD_JOBJECT)
			return -EPROTO;
		rc = etcd_json_range(r, &res->ranges[res->nr_ranges]);
		if (rc < 0)
			return rc;
		res->nr_ranges++;
	}
	return 0;
}

int etcd_json_txn_response(const struct td_jval *doc,
			   struct etcd_txn_result *res)
{
	const struct td_jval *arr;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = etcd_json_header(doc, &res->revision);
	if (rc == 0 && td_jval_get(doc, "succeeded"))
		rc = td_jval_get_bool(doc, "succeeded", &res->succeeded) < 0
			     ? -EPROTO
			     : 0;
	if (rc < 0)
		return rc;
	arr = td_jval_get(doc, "responses");
	if (!arr)
		return 0;
	rc = arr->type == TD_JARRAY ? etcd_json_txn_ranges(arr, res) : -EPROTO;
	if (rc < 0)
		etcd_txn_result_clear(res);
	return rc;
}

void etcd_json_error(const struct td_jval *doc, int *code, const char **message)
{
	int64_t n;

	*code = -1;
	*message = NULL;
	if (!doc || doc->type != TD_JOBJECT)
		return;
	if (td_jval_get_i64(doc, "code", &n) == 0)
		*code = (int)n;
	if (td_jval_get_str(doc, "message", message) < 0)
		td_jval_get_str(doc, "error", message);
}

void etcd_prefix_end(const void *prefix, size_t len, uint8_t *out,
		     size_t *out_len)
{
	const uint8_t *p = prefix;

	while (len > 0 && p[len - 1] == 0xff)
		len--;
	if (len > 0) {
		memcpy(out, p, len);
		out[len - 1]++;
	}
	*out_len = len;
}
