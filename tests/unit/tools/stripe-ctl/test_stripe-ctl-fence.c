/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stripe-ctl-fence.c - the parts of takeover --fence that need no
 * server (tests/integration/lease-fence.sh runs the rest against tgtd):
 * portals split and resolved to numeric ones, and what each LUN does next
 * after READ KEYS and READ RESERVATION.  Oracles written by hand.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tools/stripe-ctl/stripe-ctl-fence.c"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* stripe-ctl.c, stripe-ctl-lease.c and stripe-ctl-output.c have these. */
int ctl_fail(const char *fmt, ...)
{
	return EXIT_FAILURE;
}

int ctl_call_failed(struct master_client *c, const char *what)
{
	return EXIT_FAILURE;
}

int ctl_lease_failed(const struct ctl_opts *o, struct master_client *c,
		     const ms_reply *rep, const char *what)
{
	return EXIT_FAILURE;
}

int ctl_print_json(struct td_json *j, struct td_strbuf *sb)
{
	td_strbuf_free(sb);
	return 0;
}

void ctl_json_lease(struct td_json *j, const ms_lease *l)
{
}

void ctl_print_lease(const ms_lease *l)
{
}

/* stripe-ctl-chap.c: the master's account of a LUN (issue #20). */
static const char *master_user = "", *master_secret = "";
static int master_err;

int ctl_chap_get(struct master_client *c, struct stripe_map_server *s)
{
	if (master_err)
		return master_err;
	snprintf(s->chap_user, sizeof(s->chap_user), "%s", master_user);
	snprintf(s->chap_secret, sizeof(s->chap_secret), "%s", master_secret);
	return 0;
}

/* A LUN's credentials: --map's entry first, else the master's account. */
static void test_plan_creds(void **state)
{
	ms_server two[2] = {
		{.target = (char *)"iqn.t:a", .lun = 1},
		{.target = (char *)"iqn.t:b", .lun = 1},
	};
	struct stripe_map m = {.nr_servers = 1};
	struct stripe_map_server in_map = {.lun = 1};
	struct fence_run r = {0};

	snprintf(in_map.target, sizeof(in_map.target), "iqn.t:a");
	snprintf(in_map.chap_user, sizeof(in_map.chap_user), "mapuser");
	m.servers = &in_map;
	master_user = "masteruser";
	master_secret = "mastersecret";
	assert_int_equal(fence_plan(&r, two, 2, &m, NULL), 0);
	assert_int_equal(r.nr, 2);
	assert_ptr_equal(r.luns[0].creds, &in_map);
	assert_ptr_equal(r.luns[1].creds, &r.luns[1].own);
	assert_string_equal(r.luns[1].creds->chap_user, "masteruser");
	assert_string_equal(r.luns[1].creds->chap_secret, "mastersecret");
	free(r.luns);
	/* the master has none, or cannot say: no CHAP */
	memset(&r, 0, sizeof(r));
	master_user = master_secret = "";
	assert_int_equal(fence_plan(&r, two, 2, NULL, NULL), 0);
	assert_null(r.luns[0].creds);
	assert_null(r.luns[1].creds);
	free(r.luns);
	memset(&r, 0, sizeof(r));
	master_err = -EPERM;
	assert_int_equal(fence_plan(&r, two, 2, NULL, NULL), 0);
	assert_null(r.luns[1].creds);
	free(r.luns);
	master_err = 0;
}

static void test_split_portal(void **state)
{
	static const struct {
		const char *portal, *host, *port;
	} ok[] = {
		{"10.0.0.1", "10.0.0.1", "3260"},
		{"10.0.0.1:3261", "10.0.0.1", "3261"},
		{"srv1.example:3262", "srv1.example", "3262"},
		{"[fe80::1]:3263", "fe80::1", "3263"},
		{"[::1]", "::1", "3260"},
	};
	static const char *const bad[] = {
		"", ":3260", "host:", "[::1", "[]:3260", "h:1234567"};
	char host[FENCE_HOST_SIZE], port[16];

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		assert_int_equal(split_portal(ok[i].portal, host, sizeof(host),
					      port, sizeof(port)),
				 0);
		assert_string_equal(host, ok[i].host);
		assert_string_equal(port, ok[i].port);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(split_portal(bad[i], host, sizeof(host), port,
					      sizeof(port)),
				 -EINVAL);
}

static struct fence_run run;
static ms_server srv;
static struct fence_lun lun;

static int setup(void **state)
{
	memset(&run, 0, sizeof(run));
	memset(&lun, 0, sizeof(lun));
	srv = (ms_server){.portal = (char *)"127.0.0.1:3260",
			  .target = (char *)"iqn.2026-11.test:t",
			  .lun = 1};
	run.nr = 1;
	run.key = iscsi_conn_pr_key("host-b");
	run.victim_key = iscsi_conn_pr_key("host-a");
	run.timeout_s = 1;
	lun.srv = &srv;
	lun.run = &run;
	return 0;
}

static void test_resolve_portal(void **state)
{
	static const struct {
		const char *portal, *numeric;
	} ok[] = {
		{"127.0.0.1:3260", "127.0.0.1:3260"},
		{"127.0.0.1", "127.0.0.1:3260"},
		{"[::1]:3261", "[::1]:3261"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		srv.portal = (char *)ok[i].portal;
		assert_int_equal(resolve_portal(&lun), 0);
		assert_string_equal(lun.portal, ok[i].numeric);
	}
	srv.portal = (char *)"no-such-host.invalid:3260";
	assert_int_equal(resolve_portal(&lun), -EHOSTUNREACH);
	assert_non_null(strstr(lun.error, "cannot resolve no-such-host"));
	srv.portal = (char *)"host:";
	assert_int_equal(resolve_portal(&lun), -EINVAL);
	assert_non_null(strstr(lun.error, "bad portal"));
}

/*
 * The LUN has no connection here: the next command is refused at once
 * (-EINVAL) and finishes the LUN, leaving l->step at what it would have
 * issued.
 */
static void keys_answer(uint32_t nr_keys, const uint64_t *keys, uint32_t n)
{
	lun.pr.nr_keys = nr_keys;
	lun.pr.nr_kept = n;
	memcpy(lun.pr.keys, keys, n * sizeof(*keys));
	fence_keys_read(&lun);
}

static void test_keys_victim_gone(void **state)
{
	const uint64_t keys[] = {0x1234, run.key};

	keys_answer(2, keys, 2);
	assert_int_equal(lun.step, FS_READ_RES); /* no REGISTER, no PREEMPT */
	assert_true(lun.already_done && lun.preempted);
}

static void test_keys_victim_there(void **state)
{
	const uint64_t keys[] = {run.key, run.victim_key};

	keys_answer(2, keys, 2);
	assert_int_equal(lun.step, FS_REGISTER);
	assert_false(lun.already_done);
}

static void test_keys_ours_missing(void **state)
{
	const uint64_t keys[] = {0x1234};

	keys_answer(1, keys, 1);
	assert_int_equal(lun.step, FS_REGISTER);
}

static void test_keys_not_all_read(void **state)
{
	const uint64_t keys[] = {run.key};

	keys_answer(40, keys, 1); /* the victim may be among the others */
	assert_int_equal(lun.step, FS_REGISTER);
}

static void reservation_answer(bool reserved, uint8_t type)
{
	lun.step = FS_READ_RES;
	lun.pr.reserved = reserved;
	lun.pr.type = type;
	lun.pr.holder_key = 0x99;
	fence_reservation_read(&lun);
}

static void test_reservation_wero(void **state)
{
	reservation_answer(true, ISCSI_PR_TYPE_WERO);
	assert_true(lun.finished);
	assert_int_equal(lun.err, 0); /* anyone's WERO is what we want */
	assert_int_equal(run.nr_failed, 0);
}

static void test_reservation_other_type(void **state)
{
	reservation_answer(true, 3); /* exclusive access */
	assert_true(lun.finished);
	assert_int_equal(lun.err, -EACCES);
	assert_non_null(strstr(lun.error, "type 3 by key 0x0000000000000099"));
}

static void test_reservation_none(void **state)
{
	lun.registered = true;
	reservation_answer(false, 0);
	assert_int_equal(lun.step, FS_RESERVE);
}

static void test_reservation_none_unregistered(void **state)
{
	reservation_answer(false, 0); /* READ KEYS found us done already */
	assert_int_equal(lun.step, FS_REGISTER);
}

static void test_reservation_vanishing(void **state)
{
	lun.registered = true;
	lun.reserve_tries = FENCE_RESERVE_TRIES;
	reservation_answer(false, 0);
	assert_true(lun.finished);
	assert_int_equal(lun.err, -EACCES);
	assert_non_null(strstr(lun.error, "RESERVE refused 3 times"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_portal),
		cmocka_unit_test(test_plan_creds),
		cmocka_unit_test_setup(test_resolve_portal, setup),
		cmocka_unit_test_setup(test_keys_victim_gone, setup),
		cmocka_unit_test_setup(test_keys_victim_there, setup),
		cmocka_unit_test_setup(test_keys_ours_missing, setup),
		cmocka_unit_test_setup(test_keys_not_all_read, setup),
		cmocka_unit_test_setup(test_reservation_wero, setup),
		cmocka_unit_test_setup(test_reservation_other_type, setup),
		cmocka_unit_test_setup(test_reservation_none, setup),
		cmocka_unit_test_setup(test_reservation_none_unregistered,
				       setup),
		cmocka_unit_test_setup(test_reservation_vanishing, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
