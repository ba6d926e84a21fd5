/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_qos-bucket.c - the qos filter's token buckets with a fake clock
 * (every time is passed in), the cost table and the option parser's
 * errors.  Expected times are written by hand from the rates.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "drivers/qos/qos-bucket.h"

#define MS  1000000ull
#define SEC 1000000000ull

/* 200 IOPS, 100 ms burst: 20 pass at t=0, the 21st waits 5 ms. */
static void test_iops_burst_then_rate(void **state)
{
	struct qos_bucket b;
	uint64_t t = 10 * SEC;

	(void)state;
	qos_bucket_set(&b, 200, 100, t);
	for (int i = 0; i < 21; i++) {
		assert_int_equal(qos_bucket_wait_ns(&b, t), 0);
		qos_bucket_charge(&b, 1, t);
	}
	assert_int_equal(qos_bucket_wait_ns(&b, t), 5 * MS);
	assert_int_equal(qos_bucket_wait_ns(&b, t + 2 * MS), 3 * MS);
	assert_int_equal(qos_bucket_wait_ns(&b, t + 5 * MS), 0);
	/* Idle for a long time: the burst refills, never beyond it. */
	t += 100 * SEC;
	for (int i = 0; i < 21; i++) {
		assert_int_equal(qos_bucket_wait_ns(&b, t), 0);
		qos_bucket_charge(&b, 1, t);
	}
	assert_int_equal(qos_bucket_wait_ns(&b, t), 5 * MS);
}

/* 1 MiB/s: a 4 MiB write (beyond the burst) passes, then a 4 s debt. */
static void test_bps_large_request_debt(void **state)
{
	struct qos_bucket b;

	(void)state;
	qos_bucket_set(&b, 1u << 20, 100, 0);
	assert_int_equal(qos_bucket_wait_ns(&b, 0), 0);
	qos_bucket_charge(&b, 4u << 20, 0);
	assert_int_equal(qos_bucket_wait_ns(&b, 0), 3900 * MS);
	assert_int_equal(qos_bucket_wait_ns(&b, 3900 * MS), 0);
}

/* Rate 0 is no limit; set forgets the debt. */
static void test_unlimited_and_reset(void **state)
{
	struct qos_bucket b;

	(void)state;
	qos_bucket_set(&b, 0, 100, 0);
	qos_bucket_charge(&b, UINT64_MAX, 0);
	assert_int_equal(qos_bucket_wait_ns(&b, 0), 0);
	qos_bucket_set(&b, 1, 100, 0);
	qos_bucket_charge(&b, 10, 0);
	assert_int_equal(qos_bucket_wait_ns(&b, 0), 9900 * MS);
	qos_bucket_set(&b, 1000, 100, 0);
	assert_int_equal(qos_bucket_wait_ns(&b, 0), 0);
}

/* Huge costs saturate instead of wrapping to a small wait. */
static void test_overflow_saturates(void **state)
{
	struct qos_bucket b;

	(void)state;
	qos_bucket_set(&b, 1, 1, 0);
	qos_bucket_charge(&b, UINT64_MAX, 0);
	assert_true(qos_bucket_wait_ns(&b, 0) > 1000 * SEC);
}

static void test_cost_table(void **state)
{
	uint64_t c[QOS_NR_LIMITS];

	(void)state;
	qos_request_cost(TD_OP_READ, 4096, c);
	assert_int_equal(c[QOS_IOPS], 1);
	assert_int_equal(c[QOS_READ_IOPS], 1);
	assert_int_equal(c[QOS_WRITE_IOPS], 0);
	assert_int_equal(c[QOS_BPS], 4096);
	assert_int_equal(c[QOS_READ_BPS], 4096);
	assert_int_equal(c[QOS_WRITE_BPS], 0);
	qos_request_cost(TD_OP_WRITE, 8192, c);
	assert_int_equal(c[QOS_WRITE_IOPS], 1);
	assert_int_equal(c[QOS_READ_IOPS], 0);
	assert_int_equal(c[QOS_WRITE_BPS], 8192);
	assert_int_equal(c[QOS_READ_BPS], 0);
	qos_request_cost(TD_OP_DISCARD, 1u << 20, c);
	assert_int_equal(c[QOS_WRITE_IOPS], 1);
	assert_int_equal(c[QOS_BPS], 0);
	qos_request_cost(TD_OP_FLUSH, 0, c);
	for (int l = 0; l < QOS_NR_LIMITS; l++)
		assert_int_equal(c[l], 0);
}

static void test_parse_ok(void **state)
{
	struct qos_opts o;
	char why[QOS_WHY_MAX];

	(void)state;
	qos_opts_init(&o);
	assert_int_equal(o.burst_ms, QOS_DEFAULT_BURST_MS);
	assert_int_equal(qos_opts_parse("", &o, why, sizeof(why)), 0);
	assert_int_equal(qos_opts_parse("write_iops=200,read_bps=10M,"
					"burst_ms=500",
					&o, why, sizeof(why)),
			 0);
	assert_int_equal(o.limit[QOS_WRITE_IOPS], 200);
	assert_int_equal(o.limit[QOS_READ_BPS], 10u << 20);
	assert_int_equal(o.burst_ms, 500);
	/* Only the keys given change. */
	assert_int_equal(qos_opts_parse("iops=7", &o, why, sizeof(why)), 0);
	assert_int_equal(o.limit[QOS_IOPS], 7);
	assert_int_equal(o.limit[QOS_WRITE_IOPS], 200);
	assert_int_equal(qos_opts_parse("write_iops=0", &o, why, sizeof(why)),
			 0);
	assert_int_equal(o.limit[QOS_WRITE_IOPS], 0);
	/* A group and its limits, apart from the disk's own. */
	assert_int_equal(qos_opts_parse("group=tenant-1.a,group_iops=900,"
					"group_write_bps=1M,group_burst_ms=50,"
					"group_dir=/tmp/g",
					&o, why, sizeof(why)),
			 0);
	assert_string_equal(o.group, "tenant-1.a");
	assert_string_equal(o.group_dir, "/tmp/g");
	assert_int_equal(o.group_limit[QOS_IOPS], 900);
	assert_true(o.group_given[QOS_IOPS]);
	assert_int_equal(o.group_limit[QOS_WRITE_BPS], 1u << 20);
	assert_false(o.group_given[QOS_READ_IOPS]);
	assert_int_equal(o.group_burst_ms, 50);
	assert_true(o.group_burst_given);
	assert_int_equal(o.limit[QOS_IOPS], 7);
	assert_int_equal(o.burst_ms, 500);
}

/* Every malformed input is -EINVAL with a reason and changes nothing. */
static void test_parse_errors(void **state)
{
	static const char *const bad[] = {
		"iops",
		"=5",
		"iops=",
		"iops=-1",
		"iops=5x",
		"iops=1K",
		"bps=lots",
		"burst_ms=0",
		"burst_ms=60001",
		"speed=5",
		"iops=5,",
		",iops=5",
		"iops=5,,bps=1",
		"read_iops=1,nope=2",
		"iops=99999999999999999999",
		"group=",
		"group=.hidden",
		"group=a/b",
		"group="
		"01234567890123456789012345678901234567890123456789012345678901"
		"23",
		"group_iops=x",
		"group_speed=1",
		"group_=1",
		"group_burst_ms=0",
		"group_dir=relative",
	};
	struct qos_opts o, before;
	char why[QOS_WHY_MAX];

	(void)state;
	qos_opts_init(&o);
	o.limit[QOS_IOPS] = 3;
	before = o;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(qos_opts_parse(bad[i], &o, why, sizeof(why)),
				 -EINVAL);
		assert_true(why[0] != '\0');
		assert_memory_equal(&o, &before, sizeof(o));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_iops_burst_then_rate),
		cmocka_unit_test(test_bps_large_request_debt),
		cmocka_unit_test(test_unlimited_and_reset),
		cmocka_unit_test(test_overflow_saturates),
		cmocka_unit_test(test_cost_table),
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
