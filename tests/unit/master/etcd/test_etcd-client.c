/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_etcd-client.c - the etcd client's endpoint list (what is accepted,
 * what is refused and why) and its answer when no endpoint listens: every
 * endpoint tried, in order from the current one, each named in the error.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/etcd/etcd.h"

static void test_endpoints_accepted(void **state)
{
	static const char *const good[] = {
		"http://127.0.0.1:2379",
		"https://etcd.example:2379/",
		"http://a:1,http://b:2,https://c:3",
	};
	struct etcd_client *c;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(
			etcd_client_new(good[i], 1000, &c, err, sizeof(err)),
			0);
		assert_string_equal(etcd_client_error(c), "");
		assert_int_equal(strncmp(etcd_client_endpoint(c), good[i],
					 strlen(etcd_client_endpoint(c))),
				 0);
		etcd_client_free(c);
	}
}

static void test_endpoints_refused(void **state)
{
	static const struct {
		const char *list;
		const char *named;
	} bad[] = {
		{"127.0.0.1:2379", "'127.0.0.1:2379'"},
		{"ftp://h:1", "'ftp://h:1'"},
		{"http://h:1/v3", "'http://h:1/v3'"},
		{"http://h:1,,http://g:2", "''"},
		{"http://h:1,", "''"},
		{"", "''"},
	};
	struct etcd_client *c = (struct etcd_client *)&c;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(etcd_client_new(bad[i].list, 1000, &c, err,
						 sizeof(err)),
				 -EINVAL);
		assert_null(c);
		assert_non_null(strstr(err, bad[i].named));
		assert_non_null(strstr(err, "http://HOST:PORT"));
	}
	assert_int_equal(etcd_client_new("http://h:1", 0, &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "timeout"));
}

static void test_too_many_endpoints(void **state)
{
	char list[1024] = "", err[256];
	struct etcd_client *c;
	int i;

	(void)state;
	for (i = 0; i <= ETCD_MAX_ENDPOINTS; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
			 "%shttp://h%d:1", i ? "," : "", i);
	assert_int_equal(etcd_client_new(list, 1000, &c, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "more than 16"));
}

/* Ports 1 and 2 on loopback: nothing listens there (root-only ports). */
static void test_nobody_listens(void **state)
{
	struct etcd_client *c;
	struct etcd_kv kv;
	bool found = true;
	const char *e;

	(void)state;
	assert_int_equal(
		etcd_client_new("http://127.0.0.1:1,http://127.0.0.1:2", 1000,
				&c, NULL, 0),
		0);
	assert_int_equal(etcd_get(c, "k", 1, &kv, &found, NULL), -ECONNREFUSED);
	assert_false(found);
	e = etcd_client_error(c);
	assert_non_null(strstr(e, "no etcd endpoint answered"));
	assert_non_null(strstr(e, "http://127.0.0.1:1 ("));
	assert_non_null(strstr(e, "http://127.0.0.1:2 ("));
	/* Both tried once: back at the first. */
	assert_string_equal(etcd_client_endpoint(c), "http://127.0.0.1:1");
	etcd_client_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_endpoints_accepted),
		cmocka_unit_test(test_endpoints_refused),
		cmocka_unit_test(test_too_many_endpoints),
		cmocka_unit_test(test_nobody_listens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
