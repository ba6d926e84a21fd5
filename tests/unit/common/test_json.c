/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_json.c - the string buffer and the JSON writer (common/json.c):
 * the exact text of objects, arrays, nesting, escapes and integer limits,
 * written out by hand; the buffer's growth; and the sticky error of an
 * allocation that fails (realloc is wrapped), of nesting too deep and of
 * unbalanced ends.  The writer has no doubles.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json.h"

/* --- realloc, failing on demand ------------------------------------------ */

void *__real_realloc(void *ptr, size_t size);
void *__wrap_realloc(void *ptr, size_t size);

static unsigned int realloc_calls;
static bool realloc_fail;

void *__wrap_realloc(void *ptr, size_t size)
{
	realloc_calls++;
	if (realloc_fail)
		return NULL;
	return __real_realloc(ptr, size);
}

static int setup(void **state)
{
	realloc_calls = 0;
	realloc_fail = false;
	return 0;
}

/* --- helpers ---------------------------------------------------------------- */

static struct td_strbuf sb;
static struct td_json j;

static void start(void)
{
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
}

/* Finish the document, expect ret and exactly text, and free it. */
static void expect_doc(int ret, const char *text)
{
	assert_int_equal(td_json_finish(&j), ret);
	assert_string_equal(td_strbuf_str(&sb), text);
	assert_int_equal(sb.len, strlen(text));
	td_strbuf_free(&sb);
}

/* --- the writer's text ----------------------------------------------------------- */

static void test_empty_containers(void **state)
{
	start();
	td_json_begin_object(&j, NULL);
	td_json_end_object(&j);
	expect_doc(0, "{}\n");

	start();
	td_json_begin_array(&j, NULL);
	td_json_end_array(&j);
	expect_doc(0, "[]\n");
}

static void test_object_members(void **state)
{
	start();
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "a", 1);
	td_json_bool(&j, "b", true);
	td_json_bool(&j, "c", false);
	td_json_null(&j, "d");
	td_json_str(&j, "e", "text");
	td_json_str(&j, "f", NULL);
	td_json_i64(&j, "g", -5);
	td_json_str(&j, "h", "");
	td_json_end_object(&j);
	expect_doc(0, "{\n"
		      "  \"a\": 1,\n"
		      "  \"b\": true,\n"
		      "  \"c\": false,\n"
		      "  \"d\": null,\n"
		      "  \"e\": \"text\",\n"
		      "  \"f\": null,\n"
		      "  \"g\": -5,\n"
		      "  \"h\": \"\"\n"
		      "}\n");
}

static void test_nesting(void **state)
{
	start();
	td_json_begin_object(&j, NULL);
	td_json_begin_array(&j, "arr");
	td_json_u64(&j, NULL, 1);
	td_json_str(&j, NULL, "x");
	td_json_null(&j, NULL);
	td_json_begin_object(&j, NULL);
	td_json_end_object(&j);
	td_json_begin_array(&j, NULL);
	td_json_bool(&j, NULL, true);
	td_json_end_array(&j);
	td_json_end_array(&j);
	td_json_begin_object(&j, "o");
	td_json_bool(&j, "k", false);
	td_json_end_object(&j);
	td_json_begin_array(&j, "e");
	td_json_end_array(&j);
	td_json_end_object(&j);
	expect_doc(0, "{\n"
		      "  \"arr\": [\n"
		      "    1,\n"
		      "    \"x\",\n"
		      "    null,\n"
		      "    {},\n"
		      "    [\n"
		      "      true\n"
		      "    ]\n"
		      "  ],\n"
		      "  \"o\": {\n"
		      "    \"k\": false\n"
		      "  },\n"
		      "  \"e\": []\n"
		      "}\n");
}

/* A scalar alone is a document too. */
static void test_top_level_scalars(void **state)
{
	start();
	td_json_u64(&j, NULL, 7);
	expect_doc(0, "7\n");

	start();
	td_json_str(&j, NULL, "a");
	expect_doc(0, "\"a\"\n");

	start();
	td_json_null(&j, NULL);
	expect_doc(0, "null\n");
}

struct int_row {
	bool is_signed;
	uint64_t u;
	int64_t s;
	const char *text;
};

static void test_integer_limits(void **state)
{
	static const struct int_row rows[] = {
		{false, 0, 0, "0"},
		{false, 9, 0, "9"},
		{false, 10, 0, "10"},
		{false, 4294967295u, 0, "4294967295"},
		{false, 4294967296u, 0, "4294967296"},
		{false, UINT64_MAX, 0, "18446744073709551615"},
		{false, UINT64_MAX - 1, 0, "18446744073709551614"},
		{true, 0, 0, "0"},
		{true, 0, -1, "-1"},
		{true, 0, INT64_MAX, "9223372036854775807"},
		{true, 0, INT64_MIN, "-9223372036854775808"},
		{true, 0, INT64_MIN + 1, "-9223372036854775807"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char want[64];

		print_message("row %zu: %s\n", i, rows[i].text);
		start();
		td_json_begin_array(&j, NULL);
		if (rows[i].is_signed)
			td_json_i64(&j, NULL, rows[i].s);
		else
			td_json_u64(&j, NULL, rows[i].u);
		td_json_end_array(&j);
		/* "[\n  " + text + "\n]\n" */
		strcpy(want, "[\n  ");
		strcat(want, rows[i].text);
		strcat(want, "\n]\n");
		expect_doc(0, want);
	}
}

struct esc_row {
	const char *in;
	const char *out; /* with the quotes */
};

/*
 * Quotes and backslashes get a backslash; bytes below 0x20 and DEL become
 * \u00XX (lowercase hex; no \n or \t short forms); every other byte,
 * non-ASCII included, is copied as it is (valid UTF-8 stays valid; the
 * writer does not check it).
 */
static void test_string_escapes(void **state)
{
	static const struct esc_row rows[] = {
		{"plain", "\"plain\""},
		{"a\"b", "\"a\\\"b\""},
		{"a\\b", "\"a\\\\b\""},
		{"\\\"", "\"\\\\\\\"\""},
		{"\n", "\"\\u000a\""},
		{"\t\r", "\"\\u0009\\u000d\""},
		{"\x01", "\"\\u0001\""},
		{"\x1f", "\"\\u001f\""},
		{"\x7f", "\"\\u007f\""},
		{" ~", "\" ~\""},
		{"/", "\"/\""},
		{"\xc3\xa9t\xc3\xa9", "\"\xc3\xa9t\xc3\xa9\""},
		{"\xe2\x82\xac", "\"\xe2\x82\xac\""},
		{"\xff\x80", "\"\xff\x80\""},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char want[64];

		print_message("row %zu\n", i);
		start();
		td_json_str(&j, NULL, rows[i].in);
		strcpy(want, rows[i].out);
		strcat(want, "\n");
		expect_doc(0, want);
	}
}

/* Keys go through the same escaping. */
static void test_key_escapes(void **state)
{
	start();
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "q\"\\\n", 1);
	td_json_end_object(&j);
	expect_doc(0, "{\n  \"q\\\"\\\\\\u000a\": 1\n}\n");
}

/* TD_JSON_MAX_DEPTH (8) levels are fine. */
static void test_max_depth(void **state)
{
	start();
	for (int i = 0; i < TD_JSON_MAX_DEPTH; i++)
		td_json_begin_array(&j, NULL);
	for (int i = 0; i < TD_JSON_MAX_DEPTH; i++)
		td_json_end_array(&j);
	expect_doc(0, "[\n"
		      "  [\n"
		      "    [\n"
		      "      [\n"
		      "        [\n"
		      "          [\n"
		      "            [\n"
		      "              []\n"
		      "            ]\n"
		      "          ]\n"
		      "        ]\n"
		      "      ]\n"
		      "    ]\n"
		      "  ]\n"
		      "]\n");
}

/* ... and a ninth marks the document failed, whatever follows. */
static void test_too_deep(void **state)
{
	start();
	for (int i = 0; i < TD_JSON_MAX_DEPTH; i++)
		td_json_begin_object(&j, i ? "k" : NULL);
	assert_int_equal(td_strbuf_error(&sb), 0);
	td_json_begin_object(&j, "k");
	assert_int_equal(td_strbuf_error(&sb), -ENOMEM);
	for (int i = 0; i < TD_JSON_MAX_DEPTH + 1; i++)
		td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), -ENOMEM);
	td_strbuf_free(&sb);
}

static void test_unbalanced(void **state)
{
	size_t len;

	/* an end without a begin */
	start();
	td_json_end_object(&j);
	assert_int_equal(td_strbuf_error(&sb), -ENOMEM);
	assert_int_equal(td_json_finish(&j), -ENOMEM);
	td_strbuf_free(&sb);

	start();
	td_json_begin_array(&j, NULL);
	td_json_end_array(&j);
	td_json_end_array(&j);
	assert_int_equal(td_json_finish(&j), -ENOMEM);
	td_strbuf_free(&sb);

	/* a begin never ended: the text is there, the error too */
	start();
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "a", 1);
	len = sb.len;
	assert_int_equal(td_json_finish(&j), -ENOMEM);
	assert_int_equal(sb.len, len); /* the newline is not added */
	assert_string_equal(td_strbuf_str(&sb), "{\n  \"a\": 1");
	td_strbuf_free(&sb);
}

/* --- the string buffer ---------------------------------------------------------- */

static void test_strbuf_basics(void **state)
{
	td_strbuf_init(&sb);
	assert_null(sb.data);
	assert_string_equal(td_strbuf_str(&sb), "");
	assert_int_equal(td_strbuf_error(&sb), 0);

	td_strbuf_puts(&sb, "ab");
	td_strbuf_append(&sb, "cdef", 2);
	td_strbuf_printf(&sb, "-%d-%s-%05u", -42, "x", 7u);
	td_strbuf_append(&sb, "", 0);
	assert_string_equal(td_strbuf_str(&sb), "abcd--42-x-00007");
	assert_int_equal(sb.len, 16);

	/* reset keeps the memory */
	{
		char *data = sb.data;

		td_strbuf_reset(&sb);
		assert_ptr_equal(sb.data, data);
		assert_int_equal(sb.len, 0);
		assert_string_equal(td_strbuf_str(&sb), "");
	}
	td_strbuf_puts(&sb, "z");
	assert_string_equal(td_strbuf_str(&sb), "z");

	td_strbuf_free(&sb);
	assert_null(sb.data);
	assert_int_equal(sb.len, 0);
	assert_int_equal(sb.cap, 0);
	assert_string_equal(td_strbuf_str(&sb), "");
}

/* 256 bytes at first (the text and its NUL), doubling after. */
static void test_strbuf_growth(void **state)
{
	char big[1100];

	memset(big, 'x', sizeof(big));
	td_strbuf_init(&sb);
	td_strbuf_append(&sb, big, 255);
	assert_int_equal(sb.cap, 256);
	assert_int_equal(realloc_calls, 1);
	td_strbuf_append(&sb, big, 1);
	assert_int_equal(sb.cap, 512);
	assert_int_equal(realloc_calls, 2);
	td_strbuf_append(&sb, big, 255);
	assert_int_equal(sb.len, 511);
	assert_int_equal(sb.cap, 512);
	assert_int_equal(realloc_calls, 2);
	/* 511 + 1000 + 1 = 1512: two doublings in one call */
	td_strbuf_append(&sb, big, 1000);
	assert_int_equal(sb.cap, 2048);
	assert_int_equal(realloc_calls, 3);
	assert_int_equal(sb.len, 1511);
	assert_int_equal(strlen(td_strbuf_str(&sb)), 1511);
	/* printf grows the same way */
	td_strbuf_printf(&sb, "%.*s", 600, big);
	assert_int_equal(sb.len, 2111);
	assert_int_equal(sb.cap, 4096);
	assert_int_equal(td_strbuf_error(&sb), 0);
	td_strbuf_free(&sb);
}

/* A length that cannot fit fails before any allocation or copy. */
static void test_strbuf_size_overflow(void **state)
{
	td_strbuf_init(&sb);
	td_strbuf_puts(&sb, "ab");
	realloc_calls = 0;
	td_strbuf_append(&sb, "x", SIZE_MAX / 2);
	assert_int_equal(realloc_calls, 0);
	assert_int_equal(td_strbuf_error(&sb), -ENOMEM);
	assert_int_equal(sb.len, 2);
	assert_string_equal(td_strbuf_str(&sb), "ab");
	td_strbuf_free(&sb);

	td_strbuf_init(&sb);
	td_strbuf_append(&sb, "x", SIZE_MAX);
	assert_int_equal(td_strbuf_error(&sb), -ENOMEM);
	assert_null(sb.data);
	td_strbuf_free(&sb);
}

/*
 * realloc fails: the append is dropped, the error sticks (later appends
 * do nothing, even once memory is back) until reset.
 */
static void test_strbuf_oom_sticky(void **state)
{
	char big[300];

	memset(big, 'y', sizeof(big));
	td_strbuf_init(&sb);
	td_strbuf_puts(&sb, "ok");
	realloc_fail = true;
	td_strbuf_append(&sb, big, sizeof(big));
	assert_int_equal(td_strbuf_error(&sb), -ENOMEM);
	assert_string_equal(td_strbuf_str(&sb), "ok");
	realloc_fail = false;
	td_strbuf_puts(&sb, "more");
	td_strbuf_printf(&sb, "%d", 1);
	assert_int_equal(td_strbuf_error(&sb), -ENOMEM);
	assert_string_equal(td_strbuf_str(&sb), "ok");
	assert_int_equal(sb.len, 2);

	td_strbuf_reset(&sb);
	assert_int_equal(td_strbuf_error(&sb), 0);
	td_strbuf_puts(&sb, "again");
	assert_string_equal(td_strbuf_str(&sb), "again");
	td_strbuf_free(&sb);
}

/* A first allocation that fails leaves an empty buffer. */
static void test_strbuf_oom_first(void **state)
{
	td_strbuf_init(&sb);
	realloc_fail = true;
	td_strbuf_puts(&sb, "x");
	assert_null(sb.data);
	assert_int_equal(sb.cap, 0);
	assert_string_equal(td_strbuf_str(&sb), "");
	assert_int_equal(td_strbuf_error(&sb), -ENOMEM);
	td_strbuf_free(&sb);
}

/* The writer over a buffer that runs out: the document fails. */
static void test_json_oom(void **state)
{
	char big[300];

	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	start();
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "a", 1);
	realloc_fail = true;
	td_json_str(&j, "big", big);
	realloc_fail = false;
	td_json_u64(&j, "b", 2);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), -ENOMEM);
	td_strbuf_free(&sb);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, setup)
	const struct CMUnitTest tests[] = {
		T(test_empty_containers),
		T(test_object_members),
		T(test_nesting),
		T(test_top_level_scalars),
		T(test_integer_limits),
		T(test_string_escapes),
		T(test_key_escapes),
		T(test_max_depth),
		T(test_too_deep),
		T(test_unbalanced),
		T(test_strbuf_basics),
		T(test_strbuf_growth),
		T(test_strbuf_size_overflow),
		T(test_strbuf_oom_sticky),
		T(test_strbuf_oom_first),
		T(test_json_oom),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
