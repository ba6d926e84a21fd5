/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fsync-async.c - the fdatasync the event loop does not wait for
 * (tapdisk/fsync-async.c): through AIO and in place, its callback only
 * ever from the loop, one at a time, errors passed on, and a close with
 * one in flight that runs no callback.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/loop.h"
#include "tapdisk/fsync-async.h"

static struct td_loop *loop;
static char path[64];
static int fd = -1;
static int calls, last_err;

static void cb(struct td_fsync *f, int err, void *opaque)
{
	assert_ptr_equal(opaque, &calls);
	assert_false(f->busy); /* a new sync may start from the callback */
	calls++;
	last_err = err;
}

static int setup(void **state)
{
	(void)state;
	calls = 0;
	last_err = 1;
	td_fsync_in_place = false;
	assert_int_equal(td_loop_create(&loop), 0);
	snprintf(path, sizeof(path), "/tmp/test_fsync.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(fd);
	unlink(path);
	td_loop_destroy(loop);
	td_fsync_in_place = false;
	return 0;
}

/* Run the loop until the callback ran (at most ~5 s). */
static void wait_cb(void)
{
	for (int i = 0; i < 500 && !calls; i++)
		assert_int_equal(td_loop_run_once(loop, 10), 0);
	assert_int_equal(calls, 1);
}

static void check_one(bool in_place)
{
	struct td_fsync f;

	td_fsync_in_place = in_place;
	assert_int_equal(td_fsync_open(&f, loop), 0);
	assert_int_equal(f.ctx == 0, in_place);
	assert_int_equal(td_fsync_start(&f, fd, cb, &calls), 0);
	assert_int_equal(calls, 0); /* never from inside start */
	assert_int_equal(td_fsync_start(&f, fd, cb, &calls), -EBUSY);
	wait_cb();
	assert_int_equal(last_err, 0);
	/* And again: the same td_fsync serves the next one. */
	calls = 0;
	assert_int_equal(td_fsync_start(&f, fd, cb, &calls), 0);
	wait_cb();
	td_fsync_close(&f);
}

static void test_aio(void **state)
{
	(void)state;
	check_one(false);
}

static void test_in_place(void **state)
{
	(void)state;
	check_one(true);
}

/* A bad descriptor: -EBADF reaches the callback, either way. */
static void test_error(void **state)
{
	struct td_fsync f;
	int bad = 999; /* not a closed dup: the eventfd would reuse it */

	(void)state;
	assert_int_equal(fcntl(bad, F_GETFD), -1);
	for (int in_place = 0; in_place < 2; in_place++) {
		calls = 0;
		td_fsync_in_place = in_place;
		td_fsync_open(&f, loop);
		assert_int_equal(td_fsync_start(&f, bad, cb, &calls), 0);
		wait_cb();
		assert_int_equal(last_err, -EBADF);
		td_fsync_close(&f);
	}
}

/* Closed with a sync in flight: no callback afterwards, nothing left. */
static void test_close_busy(void **state)
{
	struct td_fsync f;

	(void)state;
	for (int in_place = 0; in_place < 2; in_place++) {
		td_fsync_in_place = in_place;
		td_fsync_open(&f, loop);
		assert_int_equal(td_fsync_start(&f, fd, cb, &calls), 0);
		td_fsync_close(&f);
		for (int i = 0; i < 5; i++)
			assert_int_equal(td_loop_run_once(loop, 10), 0);
		assert_int_equal(calls, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_aio, setup, teardown),
		cmocka_unit_test_setup_teardown(test_in_place, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_busy, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
