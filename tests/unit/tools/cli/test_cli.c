/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cli.c - the programs' shared command-line helpers (tools/cli/):
 * numbers and their ranges, the getopt array and help text of an option
 * table, and the one-line explanations.  The oracles are written by hand.
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

#include "tools/cli/cli.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void test_parse_number(void **state)
{
	static const struct {
		const char *text;
		long long min, max;
		int err;
		long long value;
	} rows[] = {
		{"0", 0, 10, 0, 0},
		{"10", 0, 10, 0, 10},
		{"11", 0, 10, -ERANGE, 0},
		{"-1", 0, 10, -ERANGE, 0},
		{"4096", 11, 4096, 0, 4096},
		{"9223372036854775807", 0, 9223372036854775807LL, 0,
		 9223372036854775807LL},
		{"9223372036854775808", 0, 9223372036854775807LL, -ERANGE, 0},
		{"", 0, 10, -EINVAL, 0},
		{"5x", 0, 10, -EINVAL, 0},
		{"x", 0, 10, -EINVAL, 0},
		{"1 ", 0, 10, -EINVAL, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		long long v = -42;

		print_message("'%s'\n", rows[i].text);
		assert_int_equal(cli_parse_number(rows[i].text, rows[i].min,
						  rows[i].max, &v),
				 rows[i].err);
		assert_true(v == (rows[i].err ? -42 : rows[i].value));
	}
}

enum { KEY_LONG_ONLY = CLI_KEY_LONG, KEY_LONGER_NAME };
#define PICK 1u

static const struct cli_option table[] = {
	{"chain", 'a', "CHAIN", "the disk\ntwo lines", 0, 0, 0, PICK},
	{"depth", KEY_LONG_ONLY, "N", "{min}-{max}, default {default}", 1, 64,
	 8, PICK},
	{"max-indirect-segments", KEY_LONGER_NAME, "N", "long name", 0, 0, 0,
	 0},
	{"read-only", 'r', NULL, "refuse writes", 0, 0, 0, PICK},
};

static void test_print_options(void **state)
{
	static const char want_all[] =
		"    -a, --chain CHAIN     the disk\n"
		"                          two lines\n"
		"    --depth N             1-64, default 8\n"
		"    --max-indirect-segments N\n"
		"                          long name\n"
		"    -r, --read-only       refuse writes\n";
	static const char want_picked[] =
		"    -a, --chain CHAIN     the disk\n"
		"                          two lines\n"
		"    --depth N             1-64, default 8\n"
		"    -r, --read-only       refuse writes\n";
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	cli_print_options(f, table, ARRAY_SIZE(table), 0);
	fflush(f);
	assert_string_equal(buf, want_all);
	rewind(f);
	cli_print_options(f, table, ARRAY_SIZE(table), PICK);
	fputc('\0', f);
	fclose(f);
	assert_string_equal(buf, want_picked);
	free(buf);
}

static void test_getopt_table(void **state)
{
	struct option out[6] = {{"own", no_argument, NULL, 'o'}};
	char shorts[8] = "+o";

	assert_int_equal(cli_getopt_table(table, ARRAY_SIZE(table), PICK, out,
					  ARRAY_SIZE(out), shorts,
					  sizeof(shorts)),
			 0);
	assert_string_equal(shorts, "+oa:r");
	assert_string_equal(out[0].name, "own");
	assert_string_equal(out[1].name, "chain");
	assert_int_equal(out[1].has_arg, required_argument);
	assert_int_equal(out[1].val, 'a');
	assert_string_equal(out[2].name, "depth");
	assert_int_equal(out[2].val, KEY_LONG_ONLY);
	assert_string_equal(out[3].name, "read-only");
	assert_int_equal(out[3].has_arg, no_argument);
	assert_null(out[4].name);
	assert_ptr_equal(cli_option_find(table, ARRAY_SIZE(table), 'r'),
			 &table[3]);
	assert_null(cli_option_find(table, ARRAY_SIZE(table), 'x'));
}

static void test_getopt_table_too_small(void **state)
{
	struct option out[3] = {{0}};
	char shorts[8] = "";
	char tiny[2] = ""; /* "a:" needs 3 */

	assert_int_equal(cli_getopt_table(table, ARRAY_SIZE(table), 0, out,
					  ARRAY_SIZE(out), shorts,
					  sizeof(shorts)),
			 -ENOSPC);
	memset(out, 0, sizeof(out));
	assert_int_equal(cli_getopt_table(table, 1, 0, out, ARRAY_SIZE(out),
					  tiny, sizeof(tiny)),
			 -ENOSPC);
}

static void test_explain(void **state)
{
	static const struct {
		int err;
		enum cli_topic topic;
		const char *want;
	} rows[] = {
		{-ENOENT, CLI_PLAIN, "open x"},
		{-ENOENT, CLI_ERRNO, "open x: No such file or directory"},
		{-EROFS, CLI_CHAIN,
		 "open x: Read-only file system; add "
		 "--read-only"},
		{-EIO, CLI_CHAIN,
		 "open x: Input/output error; see the "
		 "messages above"},
		/* the syntax advice only for a malformed chain, and only it */
		{-EINVAL, CLI_CHAIN,
		 "open x: Invalid argument; see the "
		 "messages above"},
		{-ENOENT, CLI_CHAIN_SYNTAX,
		 "open x; check the syntax of -a, e.g. aio:/srv/disk.img or "
		 "null:size=1G"},
		{-ECONNREFUSED, CLI_CTL_SOCKET,
		 "open x: Connection refused; the tapdisk may be starting or "
		 "stopping: try again"},
		{-EIO, CLI_CTL_SOCKET, "open x: Input/output error"},
		{-EACCES, CLI_SHM_SOCKET,
		 "open x: Permission denied; run this as the user that runs "
		 "tapdisk"},
		{0, CLI_ERRNO, "open x: Invalid argument"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char buf[160];
		int want_err = rows[i].err ? rows[i].err : -EINVAL;

		assert_int_equal(cli_explain(buf, sizeof(buf), rows[i].err,
					     rows[i].topic, "open %s", "x"),
				 want_err);
		assert_string_equal(buf, rows[i].want);
	}
}

/* A short buffer holds the start of the line, terminated. */
static void test_explain_truncates(void **state)
{
	char buf[12];

	cli_explain(buf, sizeof(buf), -EROFS, CLI_CHAIN, "cannot open %s",
		    "/srv/disk.img");
	assert_string_equal(buf, "cannot open");
	cli_explain(buf, sizeof(buf), -EROFS, CLI_CHAIN, "open");
	assert_string_equal(buf, "open: Read-");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_number),
		cmocka_unit_test(test_print_options),
		cmocka_unit_test(test_getopt_table),
		cmocka_unit_test(test_getopt_table_too_small),
		cmocka_unit_test(test_explain),
		cmocka_unit_test(test_explain_truncates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
