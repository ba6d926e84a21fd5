/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_disk-conf.c - the disk registry's files (tools/cli/disk-conf.c):
 * keys, quotes, comments, the words of OPTIONS, names, and every refusal
 * with the line it names.  The oracles are written by hand.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/cli/disk-conf.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void test_parse(void **state)
{
	struct td_disk_conf c;
	char err[256] = "";

	assert_int_equal(
		td_disk_conf_parse("# web1\n\n; old style\n"
				   "  CHAIN = \"sort|aio:/srv/a b\"  \n"
				   "OPTIONS=--nbd unix  --export-name "
				   "'x y' --nbd-tls-psk \"/k\\\"s\"\n",
				   &c, err, sizeof(err)),
		0);
	assert_string_equal(c.chain, "sort|aio:/srv/a b");
	assert_int_equal(c.nr_words, 6);
	assert_string_equal(c.words[0], "--nbd");
	assert_string_equal(c.words[1], "unix");
	assert_string_equal(c.words[3], "x y");
	assert_string_equal(c.words[5], "/k\"s");
	assert_null(c.words[6]);
	td_disk_conf_free(&c);
	/* No OPTIONS, no newline at the end. */
	assert_int_equal(
		td_disk_conf_parse("CHAIN=null:size=1G", &c, err, sizeof(err)),
		0);
	assert_string_equal(c.chain, "null:size=1G");
	assert_int_equal(c.nr_words, 0);
	td_disk_conf_free(&c);
}

static void test_refused(void **state)
{
	static const struct {
		const char *text, *err;
	} rows[] = {
		{"", "no CHAIN"},
		{"OPTIONS=--nbd unix\n", "no CHAIN"},
		{"CHAIN=a\nCHAIN=b\n", "line 2: a second CHAIN"},
		{"CHAIN=\n", "line 1: CHAIN is empty"},
		{"CHAIN=a\nchain=b\n", "line 2: unknown key 'chain'"},
		{"CHAIN=a\nnonsense\n", "line 2: not KEY=VALUE"},
		{"CHAIN=\"a\n", "line 1: CHAIN has an unclosed quote"},
		{"CHAIN=a\nOPTIONS=--name 'x\n", "line 2: OPTIONS has an "
						 "unclosed quote"},
	};
	struct td_disk_conf c;

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char err[256] = "";

		print_message("'%s'\n", rows[i].text);
		assert_int_equal(
			td_disk_conf_parse(rows[i].text, &c, err, sizeof(err)),
			-EINVAL);
		assert_non_null(strstr(err, rows[i].err));
		assert_null(c.text);
	}
}

static void test_many_words(void **state)
{
	char text[1024] = "CHAIN=a\nOPTIONS=", err[128];
	struct td_disk_conf c;

	for (int i = 0; i < TD_DISK_CONF_MAX_WORDS; i++)
		strcat(text, "-r ");
	assert_int_equal(td_disk_conf_parse(text, &c, err, sizeof(err)), 0);
	assert_int_equal(c.nr_words, TD_DISK_CONF_MAX_WORDS);
	td_disk_conf_free(&c);
	strcat(text, "-r");
	assert_int_equal(td_disk_conf_parse(text, &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "more than"));
}

static void test_names(void **state)
{
	assert_true(td_disk_conf_name_ok("web1"));
	assert_true(td_disk_conf_name_ok("a.b_c-D9"));
	assert_false(td_disk_conf_name_ok(""));
	assert_false(td_disk_conf_name_ok(".hidden"));
	assert_false(td_disk_conf_name_ok("../etc"));
	assert_false(td_disk_conf_name_ok("a/b"));
	assert_false(td_disk_conf_name_ok("a b"));
	assert_true(td_disk_conf_name_ok("1234567890123456789012345678901234567"
					 "89012345678901234567890123"));
	assert_false(td_disk_conf_name_ok("123456789012345678901234567890123456"
					  "7890123456789012345678901234"));
}

static void put(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void test_load(void **state)
{
	char dir[] = "/tmp/test-disk-conf-XXXXXX", path[128], err[512];
	static char big[TD_DISK_CONF_MAX + 2];
	struct td_disk_conf c;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/d1.conf", dir);
	put(path, "CHAIN=null:size=1G\n", 19);
	assert_int_equal(td_disk_conf_load(dir, "d1", &c, err, sizeof(err)), 0);
	assert_string_equal(c.chain, "null:size=1G");
	td_disk_conf_free(&c);
	assert_int_equal(td_disk_conf_load(dir, "d2", &c, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "d2.conf"));
	assert_int_equal(td_disk_conf_load(dir, "../d1", &c, err, sizeof(err)),
			 -EINVAL);
	put(path, "CHAIN=a\0b\n", 10);
	assert_int_equal(td_disk_conf_load(dir, "d1", &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "not a text file"));
	put(path, "CHAIN=a\nbad\n", 12);
	assert_int_equal(td_disk_conf_load(dir, "d1", &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "d1.conf: line 2: not KEY=VALUE"));
	memset(big, '#', sizeof(big));
	put(path, big, sizeof(big));
	assert_int_equal(td_disk_conf_load(dir, "d1", &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "larger than"));
	unlink(path);
	assert_int_equal(rmdir(dir), 0);
	/* The directory: the override, the environment, the default. */
	setenv(TD_DISK_CONF_DIR_ENV, "/tmp/e", 1);
	assert_string_equal(td_disk_conf_dir("/o"), "/o");
	assert_string_equal(td_disk_conf_dir(NULL), "/tmp/e");
	unsetenv(TD_DISK_CONF_DIR_ENV);
	assert_string_equal(td_disk_conf_dir(NULL), TAPSTRIPE_CONFDIR "/disks");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_many_words),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
