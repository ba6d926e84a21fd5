/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vbd-open.c - opening driver chains (errors, the disk info the vbd
 * exposes) and closing (busy, from inside a callback).
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/vbd-fixture.h"

/* Malformed chains: refused with the reason, marked as syntax errors. */
static void test_open_errors(void **state)
{
	static const struct {
		const char *chain;
		int err;
		const char *reason;
	} rows[] = {
		{"", -EINVAL, "empty driver chain"},
		{"nosuch:/x", -ENOENT,
		 "unknown driver 'nosuch' in chain 'nosuch:/x' (known: mock, "
		 "mockfilter"},
		{"mockfilter", -EINVAL, /* a filter at the bottom */
		 "driver 'mockfilter' is a filter: put a driver below it"},
		{"mock|mock", -EINVAL, /* a disk driver above another */
		 "driver 'mock' must be the last in the chain"},
		{"mockfilter|nosuch", -ENOENT, "unknown driver 'nosuch'"},
		{"mockfilter|mockfilter|mockfilter|mockfilter|mockfilter|"
		 "mockfilter|mockfilter|mockfilter|mock",
		 -E2BIG, "has more than 8 drivers"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		fx->vbd = NULL;
		assert_int_equal(open_chain(rows[i].chain, 0, 0, false),
				 rows[i].err);
		assert_null(fx->vbd);
		print_message("%s: %s\n", rows[i].chain, fx->open_error.reason);
		assert_non_null(strstr(fx->open_error.reason, rows[i].reason));
		assert_true(fx->open_error.syntax);
	}
}

/* A driver's failure: its reason (td_driver_fail), or, when it said
 * nothing, one naming the driver, its argument and the errno; never a
 * syntax error. */
static void test_open_driver_reasons(void **state)
{
	mock.open_err = -EACCES;
	assert_int_equal(open_chain("mock:/srv/x.img", 0, 0, false), -EACCES);
	assert_false(mock.closed); /* close is not called after a failed open */
	assert_string_equal(fx->open_error.reason,
			    "mock: cannot open '/srv/x.img': Permission "
			    "denied");
	assert_false(fx->open_error.syntax);
	mock.open_err = 0;
	assert_int_equal(open_chain("mock", 0, 1000, false), -EINVAL);
	mock.sector_size = 1000;
	assert_int_equal(open_chain("mock", 0, 0, false), -EINVAL);
	assert_true(mock.closed);
	assert_string_equal(fx->open_error.reason,
			    "mock: sector size 1000: not a power of two >= "
			    "512");
	assert_false(fx->open_error.syntax);
	/* a driver outside an open (no vbd) is only logged */
	assert_int_equal(td_driver_fail(&(struct td_driver){0}, -EIO, "x"),
			 -EIO);
}

static void test_open_info(void **state)
{
	const struct td_disk_info *info;

	mock.max_io_sectors = 16;
	assert_int_equal(open_chain("mockfilter|mock:arg", 0, 1 << 20, true),
			 0);
	info = td_vbd_get_info(fx->vbd);
	assert_int_equal(info->size_sectors, 2048);
	assert_true(info->read_only);
	assert_int_equal(info->max_io_sectors, 16); /* min(driver, params) */
	assert_string_equal(td_vbd_chain(fx->vbd), "mockfilter|mock:arg");
	assert_string_equal(td_vbd_name(fx->vbd), "test");
}

static void test_close_busy(void **state)
{
	mock.hold = true;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 1)), 0);
	assert_int_equal(td_vbd_close(fx->vbd), -EBUSY);
	mock_complete_held(0, 0);
	run(1);
	assert_int_equal(td_vbd_close(fx->vbd), 0);
	fx->vbd = NULL;
	assert_true(mock.closed);
}

static int close_in_cb_result;

static void close_in_cb(struct td_vbd_io *io, int err)
{
	close_in_cb_result = td_vbd_close(fx->vbd);
	io_done(io, err);
}

static void test_close_from_callback_refused(void **state)
{
	struct td_vbd_io *io;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	io = mkio(0, TD_OP_READ, 0, 1);
	io->cb = close_in_cb;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
	run(1);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(close_in_cb_result, -EBUSY);
	assert_int_equal(td_vbd_close(fx->vbd), 0); /* fine afterwards */
	fx->vbd = NULL;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_open_errors),
		T(test_open_driver_reasons),
		T(test_open_info),
		T(test_close_busy),
		T(test_close_from_callback_refused),
	};

	td_log_set_level(TD_LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
