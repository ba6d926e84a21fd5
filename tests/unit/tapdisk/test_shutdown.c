/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_shutdown.c - the shutdown order (tapdisk/shutdown.c) keeps every
 * acknowledged write: a mock frontend acknowledges writes that the mock
 * driver holds, and the tests check what reaches the driver, and when.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tapdisk/shutdown.h"
#include "tests/unit/vbd-fixture.h"

/* A frontend whose shutdown ends when the test says so. */
struct mock_fe {
	struct td_frontend fe;
	unsigned int shutdowns;
	int shutdown_err; /* returned by ->shutdown */
	td_frontend_done_fn done;
	void *opaque;
};

static int mock_fe_shutdown(struct td_frontend *fe, td_frontend_done_fn done,
			    void *opaque)
{
	struct mock_fe *m = (struct mock_fe *)fe;

	m->shutdowns++;
	if (m->shutdown_err)
		return m->shutdown_err;
	m->done = done;
	m->opaque = opaque;
	return 0;
}

static const struct td_frontend_ops mock_fe_ops = {
	.name = "mockfe",
	.shutdown = mock_fe_shutdown,
};

static struct mock_fe mfe[2];
static struct td_frontend *fes[2];
static struct td_shutdown sd;
static unsigned int nr_done;
/* What the driver had seen when the write was acknowledged. */
static unsigned int seen_at_ack;

static void shutdown_done(struct td_shutdown *s, void *opaque)
{
	nr_done++;
	assert_ptr_equal(s, &sd);
}

/* The frontend acknowledges the write to its client. */
static void write_acked(struct td_vbd_io *io, int err)
{
	io_done(io, err);
	seen_at_ack = mock.nr_seen;
}

static int test_setup(void **state)
{
	setup(state);
	memset(mfe, 0, sizeof(mfe));
	memset(&sd, 0, sizeof(sd));
	nr_done = 0;
	seen_at_ack = 0;
	for (int i = 0; i < 2; i++) {
		mfe[i].fe.ops = &mock_fe_ops;
		fes[i] = &mfe[i].fe;
	}
	return 0;
}

static int test_teardown(void **state)
{
	if (sd.vbd_closed)
		fx->vbd = NULL;
	return teardown(state);
}

static void start(unsigned int nr_fe, uint64_t timeout_us)
{
	struct td_shutdown_params p = {
		.vbd = fx->vbd,
		.frontends = fes,
		.nr_frontends = nr_fe,
		.timeout_us = timeout_us,
		.done = shutdown_done,
	};

	assert_int_equal(td_shutdown_start(&sd, fx->loop, &p), 0);
	assert_int_equal(nr_done, 0); /* never inside the call */
}

/* A held write in flight when the shutdown starts, from frontend 0. */
static void held_write(void)
{
	struct td_vbd_io *io = mkio(0, TD_OP_WRITE, 8, 8);

	mock.hold = true;
	io->cb = write_acked;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
	run(2);
	assert_int_equal(mock.nr_held, 1);
}

static void end_frontend(int i)
{
	assert_non_null(mfe[i].done);
	mfe[i].done(mfe[i].opaque);
}

/*
 * Frontends stop, the write they took completes and is acknowledged, the
 * last frontend's shutdown ends: only then the flush, then the close.
 */
static void test_flush_after_last_write_before_close(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	held_write();
	start(2, 0);
	run(2);
	assert_int_equal(mfe[0].shutdowns, 1);
	assert_int_equal(mfe[1].shutdowns, 1);
	mock_complete_held(0, 0);
	run(2);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(seen_at_ack, 1); /* no flush before the ack */
	end_frontend(1);
	run(3);
	/* Frontend 0 may still answer writes: no flush, no close yet. */
	assert_int_equal(mock.nr_seen, 1);
	assert_false(mock.closed);
	end_frontend(0);
	run(3);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[1].op, TD_OP_FLUSH);
	/* The flush is held by the driver: no close while in flight. */
	assert_false(mock.closed);
	assert_int_equal(nr_done, 0);
	mock_complete_held(1, 0);
	run(3);
	assert_true(mock.closed);
	assert_int_equal(nr_done, 1);
	assert_int_equal(sd.err, 0);
	assert_true(sd.vbd_closed);
	assert_string_equal(sd.msg, "all acknowledged writes flushed");
}

/*
 * A frontend that ends its shutdown with a write still in the vbd (Xen
 * drops the responses of a disconnected ring): the drain waits for it.
 */
static void test_drain_waits_for_io_in_flight(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	held_write();
	start(1, 0);
	run(2);
	end_frontend(0);
	run(5);
	assert_int_equal(mock.nr_seen, 1);
	assert_false(mock.closed);
	mock_complete_held(0, 0);
	run(3);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[1].op, TD_OP_FLUSH);
	assert_int_equal(seen_at_ack, 1);
	mock_complete_held(1, 0);
	run(3);
	assert_true(mock.closed);
	assert_int_equal(nr_done, 1);
}

/* No frontend at all: flush and close at once. */
static void test_no_frontend(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	start(0, 0);
	run(5);
	assert_int_equal(mock.nr_seen, 1);
	assert_int_equal(mock.seen[0].op, TD_OP_FLUSH);
	assert_true(mock.closed);
	assert_int_equal(nr_done, 1);
	assert_int_equal(sd.err, 0);
}

/* A frontend that refuses (already stopping) is not waited for. */
static void test_frontend_refuses(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	mfe[0].shutdown_err = -EALREADY;
	start(1, 0);
	run(5);
	assert_int_equal(mfe[0].shutdowns, 1);
	assert_true(mock.closed);
	assert_int_equal(nr_done, 1);
}

/* Read-only, or a chain that cannot flush: no flush, but a close. */
static void test_no_flush_needed(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, true), 0);
	start(0, 0);
	run(5);
	assert_int_equal(mock.nr_seen, 0);
	assert_true(mock.closed);
	assert_int_equal(sd.err, 0);
	assert_string_equal(sd.msg, "read-only disk: nothing to flush");
}

static void test_chain_cannot_flush(void **state)
{
	mock.features = 0;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	start(0, 0);
	run(5);
	assert_int_equal(mock.nr_seen, 0);
	assert_true(mock.closed);
	assert_int_equal(sd.err, 0);
}

/* A failed flush is the shutdown's error; the vbd still closes. */
static void test_flush_fails(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	mock.complete_err = -EIO;
	start(0, 0);
	run(5);
	assert_int_equal(mock.seen[0].op, TD_OP_FLUSH);
	assert_true(mock.closed);
	assert_int_equal(sd.err, -EIO);
	assert_non_null(strstr(sd.msg, "final flush failed"));
}

/* Stuck I/O: the timeout ends the shutdown and leaves the vbd open. */
static void test_timeout_leaves_vbd_open(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	held_write();
	start(0, 1000);
	for (int i = 0; i < 200 && !nr_done; i++)
		assert_int_equal(td_loop_run_once(fx->loop, 10), 0);
	assert_int_equal(nr_done, 1);
	assert_int_equal(sd.err, -ETIMEDOUT);
	assert_false(sd.vbd_closed);
	assert_false(mock.closed);
	assert_non_null(strstr(sd.msg, "1 I/Os in flight"));
	/* The late completion changes nothing, and the vbd can close. */
	mock.hold = false;
	mock_complete_held(0, 0);
	run(5);
	assert_int_equal(nr_done, 1);
	assert_int_equal(sd.err, -ETIMEDOUT);
}

static void paused(struct td_vbd *vbd, void *opaque)
{
}

/* A paused vbd is resumed so that its held I/O finishes first. */
static void test_paused_vbd_resumed(void **state)
{
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_pause(fx->vbd, paused, NULL), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 8)), 0);
	run(2);
	assert_int_equal(mock.nr_seen, 0);
	start(0, 0);
	run(6);
	assert_int_equal(mock.nr_seen, 2);
	assert_int_equal(mock.seen[0].op, TD_OP_WRITE);
	assert_int_equal(mock.seen[1].op, TD_OP_FLUSH);
	assert_true(mock.closed);
}

static void test_start_twice_and_bad_params(void **state)
{
	struct td_shutdown other = {0};
	struct td_shutdown_params p = {.vbd = NULL, .done = shutdown_done};

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_shutdown_start(&other, fx->loop, &p), -EINVAL);
	p.vbd = fx->vbd;
	p.nr_frontends = TD_SHUTDOWN_MAX_FRONTENDS + 1;
	assert_int_equal(td_shutdown_start(&other, fx->loop, &p), -EINVAL);
	start(0, 0);
	p.nr_frontends = 0;
	assert_int_equal(td_shutdown_start(&sd, fx->loop, &p), -EALREADY);
	run(5);
	assert_int_equal(nr_done, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
		T(test_flush_after_last_write_before_close),
		T(test_drain_waits_for_io_in_flight),
		T(test_no_frontend),
		T(test_frontend_refuses),
		T(test_no_flush_needed),
		T(test_chain_cannot_flush),
		T(test_flush_fails),
		T(test_timeout_leaves_vbd_open),
		T(test_paused_vbd_resumed),
		T(test_start_twice_and_bad_params),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
