/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_json-read.c - the JSON reader: what the writer of json.h makes is
 * read back, typed getters, and text that is not JSON refused.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json-read.h"
#include "common/json.h"

static void test_round_trip(void **state)
{
	struct td_strbuf sb;
	struct td_json j;
	struct td_jval *v;
	const struct td_jval *o, *a;
	const char *s;
	uint64_t u;
	bool b;

	(void)state;
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "big", UINT64_MAX);
	td_json_str(&j, "text", "a \"q\" \\ \n\t\x01 é");
	td_json_bool(&j, "yes", true);
	td_json_null(&j, "nothing");
	td_json_begin_object(&j, "resync");
	td_json_str(&j, "state", "running");
	td_json_u64(&j, "bytes_copied", 12345);
	td_json_end_object(&j);
	td_json_begin_array(&j, "list");
	td_json_i64(&j, NULL, -3);
	td_json_u64(&j, NULL, 7);
	td_json_end_array(&j);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), 0);

	assert_int_equal(td_json_parse(td_strbuf_str(&sb), &v), 0);
	assert_int_equal(td_jval_get_u64(v, "big", &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(td_jval_get_str(v, "text", &s), 0);
	assert_string_equal(s, "a \"q\" \\ \n\t\x01 é");
	assert_int_equal(td_jval_get_bool(v, "yes", &b), 0);
	assert_true(b);
	assert_int_equal(td_jval_get_u64(v, "nothing", &u), -ENOENT);
	assert_int_equal(td_jval_get_u64(v, "absent", &u), -ENOENT);
	assert_int_equal(td_jval_get_u64(v, "text", &u), -EINVAL);
	o = td_jval_get(v, "resync");
	assert_int_equal(td_jval_get_str(o, "state", &s), 0);
	assert_string_equal(s, "running");
	assert_int_equal(td_jval_get_u64(o, "bytes_copied", &u), 0);
	assert_int_equal(u, 12345);
	a = td_jval_get(v, "list");
	assert_int_equal(a->type, TD_JARRAY);
	assert_false(a->child->is_u64); /* -3 */
	assert_true(a->child->number == -3.0);
	assert_true(a->child->next->is_u64 && a->child->next->u64 == 7);
	assert_null(a->child->next->next);
	assert_null(td_jval_get(a, "x")); /* not an object */
	td_jval_free(v);
	td_strbuf_free(&sb);
}

static void test_numbers(void **state)
{
	static const struct {
		const char *text;
		bool is_u64;
		uint64_t u64;
		double number;
	} rows[] = {
		{"0", true, 0, 0.0},
		{"42", true, 42, 42.0},
		{"18446744073709551615", true, UINT64_MAX,
		 18446744073709551615.0},
		{"18446744073709551616", false, 0, 18446744073709551616.0},
		{"-1", false, 0, -1.0},
		{"1.5", false, 0, 1.5},
		{"2e3", false, 0, 2000.0},
	};
	struct td_jval *v;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(td_json_parse(rows[i].text, &v), 0);
		assert_int_equal(v->type, TD_JNUMBER);
		assert_int_equal(v->is_u64, rows[i].is_u64);
		if (rows[i].is_u64)
			assert_true(v->u64 == rows[i].u64);
		assert_true(v->number == rows[i].number);
		td_jval_free(v);
	}
}

static void test_i64(void **state)
{
	struct td_jval *v;
	int64_t x;

	(void)state;
	assert_int_equal(td_json_parse("{\"a\": -3, \"b\": 9223372036854775807,"
				       " \"c\": 9223372036854775808, \"d\": "
				       "1.5, \"e\": \"1\"}",
				       &v),
			 0);
	assert_int_equal(td_jval_get_i64(v, "a", &x), 0);
	assert_true(x == -3);
	assert_int_equal(td_jval_get_i64(v, "b", &x), 0);
	assert_true(x == INT64_MAX);
	assert_int_equal(td_jval_get_i64(v, "c", &x), -EINVAL);
	assert_int_equal(td_jval_get_i64(v, "d", &x), -EINVAL);
	assert_int_equal(td_jval_get_i64(v, "e", &x), -EINVAL);
	assert_int_equal(td_jval_get_i64(v, "f", &x), -ENOENT);
	td_jval_free(v);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
		"",	     "   ",	   "{",		"}",	    "[1,]",
		"[1 2]",     "{\"a\" 1}",  "{a:1}",	"{\"a\":}", "\"open",
		"\"a\x01\"", "\"\\x\"",	   "\"\\u12\"", "01",	    "0x10",
		"inf",	     "nan",	   "-",		"tru",	    "nul",
		"1 2",	     "{\"a\":1}x", "[[[",
	};
	char deep[2 * TD_JSON_READ_MAX_DEPTH + 8];
	struct td_jval *v = NULL;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (td_json_parse(bad[i], &v) != -EINVAL)
			fail_msg("'%s' was not refused", bad[i]);
	/* TD_JSON_READ_MAX_DEPTH arrays deep is read, one more is not. */
	memset(deep, '[', TD_JSON_READ_MAX_DEPTH);
	memset(deep + TD_JSON_READ_MAX_DEPTH, ']', TD_JSON_READ_MAX_DEPTH);
	deep[2 * TD_JSON_READ_MAX_DEPTH] = '\0';
	assert_int_equal(td_json_parse(deep, &v), 0);
	td_jval_free(v);
	memset(deep, '[', TD_JSON_READ_MAX_DEPTH + 1);
	memset(deep + TD_JSON_READ_MAX_DEPTH + 1, ']',
	       TD_JSON_READ_MAX_DEPTH + 1);
	deep[2 * TD_JSON_READ_MAX_DEPTH + 2] = '\0';
	assert_int_equal(td_json_parse(deep, &v), -EINVAL);
}

static void test_escapes_and_space(void **state)
{
	struct td_jval *v;
	const char *s;

	(void)state;
	assert_int_equal(td_json_parse(" \r\n\t{ \"k\" : \"\\u0041\\u00e9\\/\" "
				       "} \n",
				       &v),
			 0);
	assert_int_equal(td_jval_get_str(v, "k", &s), 0);
	assert_string_equal(s, "A\xc3\xa9/");
	td_jval_free(v);
	assert_int_equal(td_json_parse("{}", &v), 0);
	assert_null(v->child);
	td_jval_free(v);
	assert_int_equal(td_json_parse("[]", &v), 0);
	assert_int_equal(v->type, TD_JARRAY);
	td_jval_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_i64),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_escapes_and_space),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
