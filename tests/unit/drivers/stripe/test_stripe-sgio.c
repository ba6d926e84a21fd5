/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stripe-sgio.c - persistent reservations through SG_IO: the CDBs
 * and parameter lists against hand-written SPC-4 bytes, the parsing of
 * READ KEYS and READ RESERVATION data, the SCSI status as an errno, and
 * stripe_sgio_run against the fake LUN of mock-sgio.c (the ioctl is
 * wrapped) and against a regular file (the real ioctl: ENOTTY).  Nothing
 * here reaches a kernel SCSI device.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "drivers/stripe/stripe-sgio.h"
#include "tests/unit/drivers/stripe/mock-sgio.h"

static void check_cdb(enum iscsi_pr_action a, const uint8_t *want, bool out)
{
	uint8_t cdb[SGIO_CDB_LEN];
	bool dir_out = !out;

	assert_int_equal(stripe_sgio_cdb(a, cdb, &dir_out), 0);
	assert_memory_equal(cdb, want, SGIO_CDB_LEN);
	assert_int_equal(dir_out, out);
}

static void test_cdbs(void **state)
{
	/* PR IN: op, service action, 5 reserved, allocation length 264 */
	static const uint8_t keys[] = {0x5e, 0x00, 0,	 0,    0,
				       0,    0,	   0x01, 0x08, 0};
	static const uint8_t res[] = {0x5e, 0x01, 0, 0, 0, 0, 0, 0x01, 0x08, 0};
	/* PR OUT: op, service action, scope|type, 2 reserved, length 24 */
	static const uint8_t reg[] = {0x5f, 0x06, 0, 0, 0, 0, 0, 0, 0x18, 0};
	static const uint8_t rsv[] = {0x5f, 0x01, 0x05, 0, 0, 0, 0, 0, 0x18, 0};
	uint8_t cdb[SGIO_CDB_LEN];
	bool out;

	check_cdb(ISCSI_PR_READ_KEYS, keys, false);
	check_cdb(ISCSI_PR_READ_RESERVATION, res, false);
	check_cdb(ISCSI_PR_REGISTER, reg, true);
	check_cdb(ISCSI_PR_UNREGISTER, reg, true);
	check_cdb(ISCSI_PR_RESERVE, rsv, true);
	assert_int_equal(stripe_sgio_cdb(ISCSI_PR_PREEMPT_ABORT, cdb, &out),
			 -EINVAL);
}

static void test_params(void **state)
{
	static const uint8_t reg[24] = {
		0,    0,    0,	  0,	0,    0,    0,	  0,
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
	};
	static const uint8_t rsv[24] = {
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
	};
	static const uint8_t zero[24];
	uint8_t p[SGIO_PROUT_PARAM_LEN];

	memset(p, 0xee, sizeof(p));
	stripe_sgio_param(ISCSI_PR_REGISTER, 0x0102030405060708ull, p);
	assert_memory_equal(p, reg, 24);
	memset(p, 0xee, sizeof(p));
	stripe_sgio_param(ISCSI_PR_RESERVE, 0x0102030405060708ull, p);
	assert_memory_equal(p, rsv, 24);
	memset(p, 0xee, sizeof(p));
	stripe_sgio_param(ISCSI_PR_UNREGISTER, 0x0102030405060708ull, p);
	assert_memory_equal(p, zero, 24);
}

static void test_parse_keys(void **state)
{
	static const uint8_t two[] = {
		0x00, 0x00, 0x01, 0x07, /* PRgeneration 263 */
		0x00, 0x00, 0x00, 0x10, /* additional length: 2 keys */
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	};
	static const uint8_t odd[] = {0, 0, 0, 1, 0, 0, 0, 12, 1,  2,
				      3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	uint8_t many[SGIO_PRIN_ALLOC] = {0, 0, 0, 9, 0, 0, 0x01, 0x40};
	struct iscsi_pr_cmd pr;

	memset(&pr, 0, sizeof(pr));
	assert_int_equal(stripe_sgio_parse_keys(two, sizeof(two), &pr), 0);
	assert_int_equal(pr.generation, 263);
	assert_int_equal(pr.nr_keys, 2);
	assert_int_equal(pr.nr_kept, 2);
	assert_int_equal(pr.keys[0], 0x1122334455667788ull);
	assert_int_equal(pr.keys[1], 1);
	assert_true(iscsi_pr_has_key(&pr, 1));
	/* what came back was cut short: one key kept of two */
	assert_int_equal(stripe_sgio_parse_keys(two, 16, &pr), 0);
	assert_int_equal(pr.nr_keys, 2);
	assert_int_equal(pr.nr_kept, 1);
	/* 40 keys (320 bytes) registered, 32 fit the allocation */
	many[8 + 31 * 8 + 7] = 0x42;
	assert_int_equal(stripe_sgio_parse_keys(many, sizeof(many), &pr), 0);
	assert_int_equal(pr.nr_keys, 40);
	assert_int_equal(pr.nr_kept, ISCSI_PR_MAX_KEYS);
	assert_int_equal(pr.keys[31], 0x42);
	/* no key: header only */
	assert_int_equal(stripe_sgio_parse_keys(many, 8, &pr), 0);
	assert_int_equal(pr.nr_keys, 40);
	assert_int_equal(pr.nr_kept, 0);
	assert_int_equal(stripe_sgio_parse_keys(odd, sizeof(odd), &pr),
			 -EPROTO);
	assert_int_equal(stripe_sgio_parse_keys(two, 7, &pr), -EPROTO);
}

static void test_parse_reservation(void **state)
{
	static const uint8_t none[8] = {0, 0, 0, 5, 0, 0, 0, 0};
	static const uint8_t wero[24] = {
		0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x10,
		0xca, 0xfe, 0x00, 0x00, 0x00, 0x00, 0xbe, 0xef,
		0,    0,    0,	  0,	0,    0x05, 0,	  0,
	};
	static const uint8_t bad[16] = {0, 0, 0, 6, 0, 0, 0, 8};
	struct iscsi_pr_cmd pr;

	memset(&pr, 0, sizeof(pr));
	pr.reserved = true;
	assert_int_equal(stripe_sgio_parse_reservation(none, 8, &pr), 0);
	assert_int_equal(pr.generation, 5);
	assert_false(pr.reserved);
	assert_int_equal(stripe_sgio_parse_reservation(wero, 24, &pr), 0);
	assert_int_equal(pr.generation, 6);
	assert_true(pr.reserved);
	assert_int_equal(pr.holder_key, 0xcafe00000000beefull);
	assert_int_equal(pr.type, ISCSI_PR_TYPE_WERO);
	assert_int_equal(stripe_sgio_parse_reservation(wero, 20, &pr), -EPROTO);
	assert_int_equal(stripe_sgio_parse_reservation(bad, 16, &pr), -EPROTO);
	assert_int_equal(stripe_sgio_parse_reservation(none, 4, &pr), -EPROTO);
}

static void test_status(void **state)
{
	static const uint8_t ua[18] = {0x70, 0, 0x06, 0, 0, 0,	  0,
				       10,   0, 0,    0, 0, 0x2a, 0x05};
	static const uint8_t illegal_desc[8] = {0x72, 0x05, 0x20, 0x00};
	static const uint8_t medium[18] = {0x70, 0, 0x03};

	assert_int_equal(stripe_sgio_status(0, 0, 0, NULL, 0), 0);
	assert_int_equal(stripe_sgio_status(0, 0, 0x08, NULL, 0), 0);
	assert_int_equal(stripe_sgio_status(0x18, 0, 0, NULL, 0), -EACCES);
	assert_int_equal(stripe_sgio_status(0x02, 0, 0x08, ua, 18), -EAGAIN);
	assert_int_equal(stripe_sgio_status(0x02, 0, 0x08, illegal_desc, 8),
			 -EOPNOTSUPP);
	assert_int_equal(stripe_sgio_status(0x02, 0, 0x08, medium, 18), -EIO);
	assert_int_equal(stripe_sgio_status(0x02, 0, 0, NULL, 0), -EIO);
	assert_int_equal(stripe_sgio_status(0, 0x01, 0, NULL, 0), -EIO);
	assert_int_equal(stripe_sgio_status(0, 0, 0x06, NULL, 0), -EIO);
	assert_int_equal(stripe_sgio_status(0x08, 0, 0, NULL, 0), -EIO);
}

static int setup(void **state)
{
	mock_sgio_reset();
	mock_sgio.on = true;
	return 0;
}

/* Register, reserve, read back; a conflict; unregister. */
static void test_run_fake_lun(void **state)
{
	struct iscsi_pr_cmd pr;

	memset(&pr, 0, sizeof(pr));
	mock_sgio.others[mock_sgio.nr_others++] = 0x77;
	mock_sgio.generation = 3;
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_READ_KEYS, 0, &pr), 0);
	assert_int_equal(pr.generation, 3);
	assert_int_equal(pr.nr_keys, 1);
	assert_false(iscsi_pr_has_key(&pr, 0x42));
	/* RESERVE before REGISTER: RESERVATION CONFLICT */
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_RESERVE, 0x42, &pr),
			 -EACCES);
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_REGISTER, 0x42, &pr), 0);
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_RESERVE, 0x42, &pr), 0);
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_READ_KEYS, 0, &pr), 0);
	assert_int_equal(pr.generation, 4);
	assert_true(iscsi_pr_has_key(&pr, 0x42));
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_READ_RESERVATION, 0, &pr),
			 0);
	assert_true(pr.reserved);
	assert_int_equal(pr.holder_key, 0x42);
	assert_int_equal(pr.type, ISCSI_PR_TYPE_WERO);
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_UNREGISTER, 0, &pr), 0);
	assert_int_equal(mock_sgio.mine, 0);
	assert_string_equal(mock_sgio_trace(0), "KRGRKVU");
}

/* UNIT ATTENTION is sent again, up to SGIO_UNIT_ATTENTION_RETRIES. */
static void test_run_unit_attention(void **state)
{
	struct iscsi_pr_cmd pr;

	memset(&pr, 0, sizeof(pr));
	mock_sgio.unit_attentions = 2;
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_READ_KEYS, 0, &pr), 0);
	assert_string_equal(mock_sgio_trace(0), "KKK");
	mock_sgio.unit_attentions = SGIO_UNIT_ATTENTION_RETRIES + 1;
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_REGISTER, 1, &pr), -EIO);
	assert_int_equal(mock_sgio.mine, 0);
	mock_sgio.illegal = true;
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_READ_KEYS, 0, &pr),
			 -EOPNOTSUPP);
	mock_sgio.illegal = false;
	mock_sgio.ioctl_errno = EINVAL;
	assert_int_equal(stripe_sgio_run(9, ISCSI_PR_READ_KEYS, 0, &pr),
			 -EINVAL);
}

/* The real ioctl on a regular file: not a SCSI device. */
static void test_run_regular_file(void **state)
{
	char path[] = "/tmp/test-sgio.XXXXXX";
	struct iscsi_pr_cmd pr;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	mock_sgio.on = false;
	memset(&pr, 0, sizeof(pr));
	assert_int_equal(stripe_sgio_run(fd, ISCSI_PR_READ_KEYS, 0, &pr),
			 -ENOTTY);
	assert_int_equal(stripe_sgio_run(fd, ISCSI_PR_REGISTER, 5, &pr),
			 -ENOTTY);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cdbs),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_parse_keys),
		cmocka_unit_test(test_parse_reservation),
		cmocka_unit_test(test_status),
		cmocka_unit_test_setup(test_run_fake_lun, setup),
		cmocka_unit_test_setup(test_run_unit_attention, setup),
		cmocka_unit_test_setup(test_run_regular_file, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
