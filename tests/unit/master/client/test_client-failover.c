/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client-failover.c - master/client/client.c's fail-over between the
 * masters of a list (issue #23): which master each attempt goes to, what
 * moves a call on and what does not, the remembered master, the bound on
 * the whole call and the error naming every master.  Only the transport
 * is faked: client.c is included and its attempt hook replaced by a table
 * of outcomes per master.
 */
#include "master/client/client.c"

#include <inttypes.h>
#include <signal.h>

#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

#define MAX_STEPS 16

/* What one attempt at a master does. */
enum outcome {
	OK,	    /* MS_OK */
	REFUSED,    /* connection refused */
	TIMEOUT,    /* no answer in time (the fake sleeps sleep_ms) */
	RESET,	    /* connection reset */
	NOT_MASTER, /* RPC_PROGUNAVAIL: something else listens there */
	UNAVAIL,    /* answered MS_EIO: the store is not available */
	NOENT,	    /* answered MS_ENOENT: final */
};

static struct fake {
	enum outcome plan[MASTER_CLIENT_MAX_MASTERS][MAX_STEPS];
	unsigned int calls[MASTER_CLIENT_MAX_MASTERS];
	unsigned int order[64]; /* the master of each attempt */
	unsigned int nr_attempts;
	unsigned int last_attempt_ms;
	unsigned int sleep_ms;
} fake;

static int fake_attempt(struct master_client *c, unsigned int proc,
			xdrproc_t xargs, const void *args, ms_reply *rep)
{
	unsigned int i = c->cur, step = fake.calls[i]++;
	enum outcome o = fake.plan[i][step < MAX_STEPS ? step : MAX_STEPS - 1];
	struct timespec ts = {0, (long)fake.sleep_ms * NS_PER_MS};

	(void)proc, (void)xargs, (void)args;
	if (fake.nr_attempts < 64)
		fake.order[fake.nr_attempts] = i;
	fake.nr_attempts++;
	fake.last_attempt_ms = attempt_ms(c);
	master_reply_init(rep);
	switch (o) {
	case OK:
		return master_reply_ok(rep, true);
	case REFUSED:
		set_error(c, "cannot connect to %s", c->ep[i].address);
		return -ECONNREFUSED;
	case TIMEOUT:
		nanosleep(&ts, NULL);
		set_error(c, "%s did not answer", c->ep[i].address);
		return -ETIMEDOUT;
	case RESET:
		set_error(c, "%s reset the connection", c->ep[i].address);
		return -ECONNRESET;
	case NOT_MASTER:
		set_error(c, "%s is not a stripe-master", c->ep[i].address);
		return -EPROTONOSUPPORT;
	case UNAVAIL:
		return master_reply_fail(rep, MS_EIO, "store of %s down",
					 c->ep[i].address);
	case NOENT:
		return master_reply_fail(rep, MS_ENOENT, "no such disk");
	}
	return -EPROTO;
}

static struct master_client *open_fake(const char *list, unsigned int retries,
				       unsigned int total_ms)
{
	struct master_client_opts o = {
		.timeout_ms = 1000, .retries = retries, .total_ms = total_ms};
	struct master_client *c;

	memset(&fake, 0, sizeof(fake));
	memo_list[0] = '\0'; /* each test starts at the first master */
	assert_int_equal(master_client_open(list, &o, &c), 0);
	c->attempt = fake_attempt;
	return c;
}

static int release(struct master_client *c)
{
	ms_reply rep;
	int ret = master_call_vdisk_release(c, "d1", &rep);

	master_reply_free(&rep);
	return ret;
}

static void test_lists(void **state)
{
	static const struct {
		const char *text;
		int ret;
		const char *addresses;
		unsigned int count;
	} rows[] = {
		{"a", 0, "a:7700", 1},
		{"a:1,b:2,c", 0, "a:1,b:2,c:7700", 3},
		{"[::1]:9,10.0.0.1", 0, "[::1]:9,10.0.0.1:7700", 2},
		{"a,b,c,d,e,f,g,h", 0,
		 "a:7700,b:7700,c:7700,d:7700,e:7700,"
		 "f:7700,g:7700,h:7700",
		 8},
		{"a,b,c,d,e,f,g,h,i", -EINVAL, NULL, 0}, /* more than 8 */
		{"a,,b", -EINVAL, NULL, 0},
		{"a,", -EINVAL, NULL, 0},
		{",a", -EINVAL, NULL, 0},
		{"a,a:7700", -EINVAL, NULL, 0}, /* the same master twice */
		{"a,b:0", -EINVAL, NULL, 0},
		{"", -EINVAL, NULL, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct master_client *c = NULL;

		print_message("'%s'\n", rows[i].text);
		assert_int_equal(master_client_open(rows[i].text, NULL, &c),
				 rows[i].ret);
		if (rows[i].ret)
			continue;
		assert_string_equal(master_client_addresses(c),
				    rows[i].addresses);
		assert_int_equal(master_client_count(c), rows[i].count);
		master_client_close(c);
	}
}

/* Refused, reset, timed out, not a master, store not available: each
 * moves the call to the next master, which answers. */
static void test_moves_on(void **state)
{
	static const enum outcome first[] = {REFUSED, RESET, TIMEOUT,
					     NOT_MASTER, UNAVAIL};

	for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
		struct master_client *c = open_fake("a,b,c", 3, 0);

		fake.plan[0][0] = first[i];
		assert_int_equal(release(c), 0);
		assert_int_equal(fake.nr_attempts, 2);
		assert_int_equal(fake.order[0], 0);
		assert_int_equal(fake.order[1], 1);
		assert_string_equal(master_client_address(c), "b:7700");
		assert_string_equal(master_client_error(c), "");
		master_client_close(c);
	}
}

/* The master that answered is remembered: the next call starts there. */
static void test_remembers(void **state)
{
	struct master_client *c = open_fake("a,b,c", 3, 0);

	fake.plan[0][0] = REFUSED;
	fake.plan[1][0] = REFUSED;
	assert_int_equal(release(c), 0);
	assert_string_equal(master_client_address(c), "c:7700");
	assert_int_equal(release(c), 0);
	assert_int_equal(fake.nr_attempts, 4);
	assert_int_equal(fake.order[3], 2);
	/* c dies later: the next turn wraps around to a */
	fake.plan[2][2] = REFUSED;
	assert_int_equal(release(c), 0);
	assert_int_equal(fake.order[4], 2);
	assert_int_equal(fake.order[5], 0);
	assert_string_equal(master_client_address(c), "a:7700");
	master_client_close(c);
}

/* A new client of the same list starts at the master that answered last
 * in this process; of another list, at its first. */
static void test_remembered_across_clients(void **state)
{
	struct master_client *c = open_fake("a,b,c", 3, 0), *d, *e;

	fake.plan[0][0] = REFUSED;
	assert_int_equal(release(c), 0);
	master_client_close(c);
	assert_int_equal(master_client_open("a,b,c", NULL, &d), 0);
	assert_string_equal(master_client_address(d), "b:7700");
	assert_int_equal(master_client_open("a,c", NULL, &e), 0);
	assert_string_equal(master_client_address(e), "a:7700");
	master_client_close(d);
	master_client_close(e);
}

/* A master's own answer other than MS_EIO is final: no other master asked. */
static void test_final_answer(void **state)
{
	struct master_client *c = open_fake("a,b", 3, 0);
	ms_reply rep;

	fake.plan[0][0] = NOENT;
	assert_int_equal(master_call_vdisk_release(c, "d1", &rep), -ENOENT);
	assert_int_equal(rep.status, MS_ENOENT);
	assert_string_equal(master_client_error(c), "no such disk");
	assert_int_equal(fake.nr_attempts, 1);
	master_reply_free(&rep);
	master_client_close(c);
}

/* Every master fails: retries more turns, then one error naming each. */
static void test_all_fail(void **state)
{
	struct master_client *c = open_fake("a,b:7701,c", 1, 0);
	const char *e;

	for (int s = 0; s < MAX_STEPS; s++) {
		fake.plan[0][s] = REFUSED;
		fake.plan[1][s] = UNAVAIL;
		fake.plan[2][s] = NOT_MASTER;
	}
	assert_int_equal(release(c), -EPROTONOSUPPORT);
	assert_int_equal(fake.nr_attempts, 6); /* 2 turns of 3 */
	e = master_client_error(c);
	print_message("%s\n", e);
	assert_non_null(strstr(e, "no master of 3 answered"));
	assert_non_null(strstr(e, "a:7700: Connection refused"));
	assert_non_null(strstr(e, "b:7701: its store is not available: store "
				  "of b:7701 down"));
	assert_non_null(strstr(e, "c:7700: not a stripe-master"));
	assert_non_null(strstr(e, "--master, $STRIPE_MASTER"));
	master_client_close(c);
}

/* Every master answers MS_EIO: the caller gets the last answer as is. */
static void test_all_unavailable(void **state)
{
	struct master_client *c = open_fake("a,b", 0, 0);
	ms_reply rep;

	fake.plan[0][0] = UNAVAIL;
	fake.plan[1][0] = UNAVAIL;
	assert_int_equal(master_call_vdisk_release(c, "d1", &rep), -EIO);
	assert_int_equal(rep.status, MS_EIO);
	assert_string_equal(rep.message, "store of b:7700 down");
	assert_non_null(strstr(master_client_error(c), "a:7700: its store"));
	master_reply_free(&rep);
	master_client_close(c);
}

/* One master: its own detailed error, retried as before (issue #5). */
static void test_single(void **state)
{
	struct master_client *c = open_fake("a", 2, 0);

	for (int s = 0; s < MAX_STEPS; s++)
		fake.plan[0][s] = REFUSED;
	assert_int_equal(release(c), -ECONNREFUSED);
	assert_int_equal(fake.nr_attempts, 3);
	assert_string_equal(master_client_error(c), "cannot connect to a:7700");
	master_client_close(c);

	c = open_fake("a", 2, 0);
	fake.plan[0][0] = UNAVAIL; /* the store is back at the retry */
	assert_int_equal(release(c), 0);
	assert_int_equal(fake.nr_attempts, 2);
	master_client_close(c);
}

/* total_ms bounds the call: every attempt is cut to what is left, and
 * masters not reached in time are named so. */
static void test_bounded(void **state)
{
	struct master_client *c = open_fake("a,b,c", 10, 250);
	uint64_t t0 = now_ns(), took_ms;

	fake.sleep_ms = 150;
	for (int s = 0; s < MAX_STEPS; s++)
		fake.plan[0][s] = fake.plan[1][s] = fake.plan[2][s] = TIMEOUT;
	assert_int_equal(release(c), -ETIMEDOUT);
	took_ms = (now_ns() - t0) / NS_PER_MS;
	print_message("%" PRIu64 " ms, %u attempts\n", took_ms,
		      fake.nr_attempts);
	assert_int_equal(fake.nr_attempts, 2);
	assert_true(took_ms < 400);
	assert_true(fake.last_attempt_ms <= 100); /* 250 - 150 */
	assert_non_null(strstr(master_client_error(c), "c:7700: not tried in "
						       "time"));
	master_client_close(c);
}

/* The default bound lets every master of a list have its attempt. */
static void test_default_bound(void **state)
{
	struct master_client *c = open_fake("a,b,c", 0, 0);

	assert_int_equal(total_ms(c), 3 * 1000);
	master_client_set_total(c, 500);
	assert_int_equal(total_ms(c), 500);
	master_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lists),
		cmocka_unit_test(test_moves_on),
		cmocka_unit_test(test_remembers),
		cmocka_unit_test(test_remembered_across_clients),
		cmocka_unit_test(test_final_answer),
		cmocka_unit_test(test_all_fail),
		cmocka_unit_test(test_all_unavailable),
		cmocka_unit_test(test_single),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_default_bound),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
