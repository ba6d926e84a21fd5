/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_netacl.c - master/netacl.c: which networks parse, and which peers
 * each allow-list lets change the master (hand-written table).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/server/netacl.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Is peer (text) allowed by acl? */
static bool allows(const struct master_netacl *acl, const char *peer)
{
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
	struct sockaddr_in s4 = {.sin_family = AF_INET};

	if (inet_pton(AF_INET, peer, &s4.sin_addr) == 1)
		return master_netacl_allows(acl, (struct sockaddr *)&s4,
					    sizeof(s4));
	assert_int_equal(inet_pton(AF_INET6, peer, &s6.sin6_addr), 1);
	return master_netacl_allows(acl, (struct sockaddr *)&s6, sizeof(s6));
}

static void test_parse(void **state)
{
	static const struct {
		const char *text;
		int ret;
	} rows[] = {
		{"10.0.0.0/8", 0},	   {"192.168.1.7", 0},
		{"0.0.0.0/0", 0},	   {"::1", 0},
		{"fd00::/8", 0},	   {"::/0", 0},
		{"10.1.2.3/8", -EINVAL}, /* host bits set */
		{"10.0.0.0/33", -EINVAL},  {"10.0.0.0/", -EINVAL},
		{"10.0.0.0/-1", -EINVAL},  {"fd00::/129", -EINVAL},
		{"host.example", -EINVAL}, {"", -EINVAL},
		{"10.0.0.0/8x", -EINVAL},
	};
	struct master_netacl acl;

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		master_netacl_init(&acl);
		print_message("%s\n", rows[i].text);
		assert_int_equal(master_netacl_add(&acl, rows[i].text),
				 rows[i].ret);
	}
	assert_int_equal(master_netacl_add(&acl, NULL), -EINVAL);
}

static void test_full(void **state)
{
	struct master_netacl acl;

	master_netacl_init(&acl);
	for (int i = 0; i < MASTER_NETACL_MAX; i++)
		assert_int_equal(master_netacl_add(&acl, "10.0.0.0/8"), 0);
	assert_int_equal(master_netacl_add(&acl, "10.0.0.0/8"), -ENOSPC);
}

static void test_loopback_default(void **state)
{
	struct master_netacl acl;

	master_netacl_loopback(&acl);
	assert_true(allows(&acl, "127.0.0.1"));
	assert_true(allows(&acl, "127.255.0.9"));
	assert_true(allows(&acl, "::1"));
	assert_true(allows(&acl, "::ffff:127.0.0.1")); /* v4-mapped */
	assert_false(allows(&acl, "10.0.0.1"));
	assert_false(allows(&acl, "128.0.0.1"));
	assert_false(allows(&acl, "::2"));
	assert_false(allows(&acl, "::ffff:10.0.0.1"));
}

static void test_networks(void **state)
{
	static const struct {
		const char *peer;
		bool allowed;
	} rows[] = {
		{"10.77.0.1", true},	    {"10.77.255.255", true},
		{"10.78.0.1", false},	    {"192.168.1.7", true},
		{"192.168.1.8", false},	    {"172.16.0.1", true},
		{"172.31.255.255", true},   {"172.32.0.0", false},
		{"fd00:1::5", true},	    {"fe80::1", false},
		{"::ffff:10.77.3.4", true},
	};
	struct master_netacl acl;

	master_netacl_init(&acl);
	assert_int_equal(master_netacl_add(&acl, "10.77.0.0/16"), 0);
	assert_int_equal(master_netacl_add(&acl, "192.168.1.7"), 0);
	assert_int_equal(master_netacl_add(&acl, "172.16.0.0/12"), 0);
	assert_int_equal(master_netacl_add(&acl, "fd00::/8"), 0);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("%s\n", rows[i].peer);
		assert_int_equal(allows(&acl, rows[i].peer), rows[i].allowed);
	}
}

static void test_empty_and_everyone(void **state)
{
	struct master_netacl acl;
	struct sockaddr sa = {.sa_family = AF_UNIX};

	master_netacl_init(&acl);
	assert_false(allows(&acl, "127.0.0.1"));
	assert_int_equal(master_netacl_add(&acl, "0.0.0.0/0"), 0);
	assert_true(allows(&acl, "203.0.113.9"));
	assert_false(allows(&acl, "2001:db8::1")); /* IPv4 only */
	assert_false(master_netacl_allows(&acl, &sa, sizeof(sa)));
}

static void test_peer_name(void **state)
{
	struct sockaddr_in s4 = {.sin_family = AF_INET};
	char buf[64];

	inet_pton(AF_INET, "10.1.2.3", &s4.sin_addr);
	master_peer_name((struct sockaddr *)&s4, sizeof(s4), buf, sizeof(buf));
	assert_string_equal(buf, "10.1.2.3");
	master_peer_name(NULL, 0, buf, sizeof(buf));
	assert_string_equal(buf, "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_loopback_default),
		cmocka_unit_test(test_networks),
		cmocka_unit_test(test_empty_and_everyone),
		cmocka_unit_test(test_peer_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
