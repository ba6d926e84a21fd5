/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_etcd-json.c - the JSON of etcd's v3 gateway: requests read back
 * member by member, answers written by hand as etcd 3.4 writes them
 * (int64 as strings, zero fields left out), answers that are not etcd's
 * refused, and the prefix range_end.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/etcd/etcd-int.h"

/* The string member key of obj. */
static const char *str(const struct td_jval *obj, const char *key)
{
	const char *s = NULL;

	assert_int_equal(td_jval_get_str(obj, key, &s), 0);
	return s;
}

static const struct td_jval *nth(const struct td_jval *arr, int n)
{
	const struct td_jval *v;

	assert_non_null(arr);
	assert_int_equal(arr->type, TD_JARRAY);
	for (v = arr->child; v && n > 0; v = v->next)
		n--;
	assert_non_null(v);
	return v;
}

static struct td_jval *parse(const char *text)
{
	struct td_jval *doc = NULL;

	assert_int_equal(td_json_parse(text, &doc), 0);
	return doc;
}

static void test_range_request(void **state)
{
	struct td_strbuf sb;
	struct td_jval *doc;

	(void)state;
	td_strbuf_init(&sb);
	assert_int_equal(etcd_json_range_request(&sb, "a\0b", 3), 0);
	doc = parse(td_strbuf_str(&sb));
	assert_string_equal(str(doc, "key"), "YQBi");
	td_jval_free(doc);
	td_strbuf_free(&sb);
}

static void test_txn_request(void **state)
{
	static const uint8_t end[] = {'l', 'o', 'h'};
	const struct etcd_cmp cmps[] = {
		{.kind = ETCD_CMP_VALUE,
		 .key = "head",
		 .key_len = 4,
		 .value = "7",
		 .value_len = 1},
		{.kind = ETCD_CMP_MOD_REVISION,
		 .key = "id",
		 .key_len = 2,
		 .mod_revision = 42},
		{.kind = ETCD_CMP_ABSENT, .key = "log/8", .key_len = 5},
	};
	const struct etcd_op success[] = {
		{.kind = ETCD_OP_PUT,
		 .key = "log/8",
		 .key_len = 5,
		 .value = "\xff\x00",
		 .value_len = 2},
		{.kind = ETCD_OP_DELETE, .key = "old", .key_len = 3},
	};
	const struct etcd_op failure[] = {
		{.kind = ETCD_OP_RANGE,
		 .key = "log",
		 .key_len = 3,
		 .range_end = end,
		 .range_end_len = 3,
		 .limit = 10},
	};
	const struct td_jval *c, *op;
	struct td_strbuf sb;
	struct td_jval *doc;

	(void)state;
	td_strbuf_init(&sb);
	assert_int_equal(
		etcd_json_txn_request(&sb, cmps, 3, success, 2, failure, 1), 0);
	doc = parse(td_strbuf_str(&sb));
	c = nth(td_jval_get(doc, "compare"), 0);
	assert_string_equal(str(c, "key"), "aGVhZA==");
	assert_string_equal(str(c, "target"), "VALUE");
	assert_string_equal(str(c, "result"), "EQUAL");
	assert_string_equal(str(c, "value"), "Nw==");
	c = nth(td_jval_get(doc, "compare"), 1);
	assert_string_equal(str(c, "target"), "MOD");
	assert_string_equal(str(c, "mod_revision"), "42");
	c = nth(td_jval_get(doc, "compare"), 2);
	assert_string_equal(str(c, "target"), "CREATE");
	assert_string_equal(str(c, "create_revision"), "0");
	op = td_jval_get(nth(td_jval_get(doc, "success"), 0), "request_put");
	assert_string_equal(str(op, "key"), "bG9nLzg=");
	assert_string_equal(str(op, "value"), "/wA=");
	op = td_jval_get(nth(td_jval_get(doc, "success"), 1),
			 "request_delete_range");
	assert_string_equal(str(op, "key"), "b2xk");
	assert_null(td_jval_get(op, "range_end"));
	op = td_jval_get(nth(td_jval_get(doc, "failure"), 0), "request_range");
	assert_string_equal(str(op, "key"), "bG9n");
	assert_string_equal(str(op, "range_end"), "bG9o");
	assert_string_equal(str(op, "limit"), "10");
	td_jval_free(doc);
	td_strbuf_free(&sb);
}

static void test_txn_request_bad_kind(void **state)
{
	const struct etcd_op op = {
		.kind = (enum etcd_op_kind)7, .key = "k", .key_len = 1};
	const struct etcd_cmp cmp = {
		.kind = (enum etcd_cmp_kind)9, .key = "k", .key_len = 1};
	struct td_strbuf sb;

	(void)state;
	td_strbuf_init(&sb);
	assert_int_equal(etcd_json_txn_request(&sb, NULL, 0, &op, 1, NULL, 0),
			 -EINVAL);
	td_strbuf_reset(&sb);
	assert_int_equal(etcd_json_txn_request(&sb, &cmp, 1, NULL, 0, NULL, 0),
			 -EINVAL);
	td_strbuf_free(&sb);
}

/* A failed CAS as etcd 3.4 answers: no "succeeded", a range of 2 of 3. */
static const char txn_failed[] =
	"{\"header\":{\"cluster_id\":\"14841639068965178418\","
	"\"member_id\":\"10276657743932975437\",\"revision\":\"9\","
	"\"raft_term\":\"2\"},\"responses\":[{\"response_range\":{"
	"\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"bG9nLzE=\","
	"\"create_revision\":\"5\",\"mod_revision\":\"5\",\"version\":\"1\","
	"\"value\":\"AP8=\"},{\"key\":\"bG9nLzI=\",\"create_revision\":\"6\","
	"\"mod_revision\":\"7\",\"version\":\"2\"}],\"more\":true,"
	"\"count\":\"3\"}}]}";

static void test_txn_response_failed(void **state)
{
	struct etcd_txn_result res;
	struct td_jval *doc = parse(txn_failed);
	const struct etcd_kv *kv;

	(void)state;
	assert_int_equal(etcd_json_txn_response(doc, &res), 0);
	assert_false(res.succeeded);
	assert_int_equal(res.revision, 9);
	assert_int_equal(res.nr_ranges, 1);
	assert_int_equal(res.ranges[0].nr_kvs, 2);
	assert_int_equal(res.ranges[0].count, 3);
	assert_true(res.ranges[0].more);
	kv = &res.ranges[0].kvs[0];
	assert_int_equal(kv->key_len, 5);
	assert_memory_equal(kv->key, "log/1", 5);
	assert_int_equal(kv->value_len, 2);
	assert_memory_equal(kv->value, "\x00\xff", 2);
	assert_int_equal(kv->create_revision, 5);
	assert_int_equal(kv->mod_revision, 5);
	assert_int_equal(kv->version, 1);
	kv = &res.ranges[0].kvs[1];
	assert_memory_equal(kv->key, "log/2", 5);
	assert_int_equal(kv->value_len, 0); /* an empty value is left out */
	assert_int_equal(kv->mod_revision, 7);
	etcd_txn_result_clear(&res);
	td_jval_free(doc);
}

/* A CAS that held: a put, then a range of nothing (count left out). */
static void test_txn_response_succeeded(void **state)
{
	struct etcd_txn_result res;
	struct td_jval *doc =
		parse("{\"header\":{\"revision\":\"12\"},\"succeeded\":true,"
		      "\"responses\":[{\"response_put\":{\"header\":"
		      "{\"revision\":\"12\"}}},{\"response_range\":{\"header\":"
		      "{\"revision\":\"12\"}}}]}");

	(void)state;
	assert_int_equal(etcd_json_txn_response(doc, &res), 0);
	assert_true(res.succeeded);
	assert_int_equal(res.revision, 12);
	assert_int_equal(res.nr_ranges, 1);
	assert_int_equal(res.ranges[0].nr_kvs, 0);
	assert_int_equal(res.ranges[0].count, 0);
	assert_false(res.ranges[0].more);
	etcd_txn_result_clear(&res);
	td_jval_free(doc);
}

static void test_range_response(void **state)
{
	struct etcd_range range;
	int64_t rev;
	struct td_jval *doc = parse(
		"{\"header\":{\"revision\":\"4\"},\"kvs\":[{\"key\":\"aw==\","
		"\"create_revision\":\"2\",\"mod_revision\":\"4\","
		"\"version\":\"3\",\"value\":\"dg==\"}],\"count\":\"1\"}");

	(void)state;
	assert_int_equal(etcd_json_range_response(doc, &range, &rev), 0);
	assert_int_equal(rev, 4);
	assert_int_equal(range.nr_kvs, 1);
	assert_memory_equal(range.kvs[0].key, "k", 1);
	assert_memory_equal(range.kvs[0].value, "v", 1);
	assert_int_equal(range.kvs[0].version, 3);
	etcd_range_free(&range);
	td_jval_free(doc);
}

/* Answers that are not etcd's: -EPROTO, nothing left allocated. */
static void test_not_etcd(void **state)
{
	static const char *const bad[] = {
		"{}", /* no header */
		"{\"header\":{\"revision\":\"x1\"}}",
		"{\"header\":{\"revision\":true}}",
		"{\"header\":{},\"succeeded\":\"yes\"}",
		"{\"header\":{},\"responses\":{}}",
		"{\"header\":{},\"responses\":[{\"response_range\":"
		"{\"kvs\":[{\"key\":\"not base64!\"}]}}]}",
		"{\"header\":{},\"responses\":[{\"response_range\":"
		"{\"kvs\":[{\"key\":\"aw==\"},{\"value\":\"aw==\"}]}}]}",
		"{\"header\":{},\"responses\":[{\"response_range\":"
		"{\"kvs\":[{\"key\":\"aw==\",\"mod_revision\":[]}]}}]}",
		"{\"header\":{},\"responses\":[7]}",
	};
	struct etcd_txn_result res;
	struct td_jval *doc;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		doc = parse(bad[i]);
		assert_int_equal(etcd_json_txn_response(doc, &res), -EPROTO);
		assert_null(res.ranges);
		td_jval_free(doc);
	}
}

static void test_error_answer(void **state)
{
	struct td_jval *doc =
		parse("{\"error\":\"etcdserver: too many operations in txn "
		      "request\",\"code\":3,\"message\":\"etcdserver: too many "
		      "operations in txn request\"}");
	const char *msg;
	int code;

	(void)state;
	etcd_json_error(doc, &code, &msg);
	assert_int_equal(code, ETCD_GRPC_INVALID_ARGUMENT);
	assert_string_equal(msg,
			    "etcdserver: too many operations in txn request");
	td_jval_free(doc);
	doc = parse("{\"status\":404}");
	etcd_json_error(doc, &code, &msg);
	assert_int_equal(code, -1);
	assert_null(msg);
	td_jval_free(doc);
}

static void test_prefix_end(void **state)
{
	static const struct {
		const char *prefix;
		size_t len;
		const char *end;
		size_t end_len;
	} rows[] = {
		{"log/", 4, "log0", 4}, {"a", 1, "b", 1},
		{"a\xff", 2, "b", 1},	{"a\xfe\xff\xff", 4, "a\xff", 2},
		{"\xff\xff", 2, "", 0}, {"", 0, "", 0},
	};
	uint8_t out[8];
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		etcd_prefix_end(rows[i].prefix, rows[i].len, out, &len);
		assert_int_equal(len, rows[i].end_len);
		assert_memory_equal(out, rows[i].end, len);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_request),
		cmocka_unit_test(test_txn_request),
		cmocka_unit_test(test_txn_request_bad_kind),
		cmocka_unit_test(test_txn_response_failed),
		cmocka_unit_test(test_txn_response_succeeded),
		cmocka_unit_test(test_range_response),
		cmocka_unit_test(test_not_etcd),
		cmocka_unit_test(test_error_answer),
		cmocka_unit_test(test_prefix_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
