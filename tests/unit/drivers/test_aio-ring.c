/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_aio-ring.c - the aio ring's busy-polling side (issue #22): reaping
 * from the completion ring in user memory (a fake ring: wrap-around, the
 * limit, headers it must refuse), the loop poller on a real context (the
 * eventfd out of epoll while polling and back, emptied, when armed), its
 * io_getevents fallback when the ring's header is not the known layout,
 * and polling off: completions take the eventfd as before.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "drivers/aio-ring.h"

/* --- aio_ring_user_reap on a ring made here --------------------------------- */

#define FAKE_NR 4

static struct aio_ring_user *fake_ring(unsigned int head, unsigned int tail)
{
	struct aio_ring_user *r =
		calloc(1, sizeof(*r) + FAKE_NR * sizeof(struct io_event));

	assert_non_null(r);
	r->nr = FAKE_NR;
	r->head = head;
	r->tail = tail;
	r->magic = AIO_RING_USER_MAGIC;
	r->header_length = sizeof(*r);
	for (unsigned int i = 0; i < FAKE_NR; i++)
		r->io_events[i].res = 100 + i;
	return r;
}

/* Events from head round the end to tail, at most max per call. */
static void test_user_reap_wraps_and_limits(void **state)
{
	struct aio_ring_user *r = fake_ring(3, 2);
	struct io_event ev[FAKE_NR];

	(void)state;
	assert_int_equal(aio_ring_user_reap((io_context_t)r, ev, 2), 2);
	assert_int_equal(ev[0].res, 103);
	assert_int_equal(ev[1].res, 100);
	assert_int_equal(r->head, 1);
	assert_int_equal(aio_ring_user_reap((io_context_t)r, ev, FAKE_NR), 1);
	assert_int_equal(ev[0].res, 101);
	assert_int_equal(r->head, 2);
	assert_int_equal(aio_ring_user_reap((io_context_t)r, ev, FAKE_NR), 0);
	free(r);
}

/* A header this code does not know: refused, the ring left alone. */
static void test_user_reap_refuses_unknown_layout(void **state)
{
	struct aio_ring_user *r = fake_ring(0, 1);
	struct io_event ev[FAKE_NR];

	(void)state;
	assert_int_equal(aio_ring_user_reap(NULL, ev, FAKE_NR), -EOPNOTSUPP);
	r->magic = 0;
	assert_int_equal(aio_ring_user_reap((io_context_t)r, ev, FAKE_NR),
			 -EOPNOTSUPP);
	r->magic = AIO_RING_USER_MAGIC;
	r->incompat_features = 1;
	assert_int_equal(aio_ring_user_reap((io_context_t)r, ev, FAKE_NR),
			 -EOPNOTSUPP);
	r->incompat_features = 0;
	r->header_length = 64;
	assert_int_equal(aio_ring_user_reap((io_context_t)r, ev, FAKE_NR),
			 -EOPNOTSUPP);
	r->header_length = sizeof(*r);
	r->tail = FAKE_NR; /* out of range */
	assert_int_equal(aio_ring_user_reap((io_context_t)r, ev, FAKE_NR),
			 -EOPNOTSUPP);
	assert_int_equal(r->head, 0);
	free(r);
}

/* --- the poller on a real context ------------------------------------------ */

struct fixture {
	char path[64];
	int fd;
	struct td_loop *loop;
	struct aio_ring ring;
	unsigned int events, drained;
	char buf[512];
	struct iocb iocb;
};

static void on_event(void *opaque, struct io_event *ev)
{
	struct fixture *f = opaque;

	assert_ptr_equal(ev->data, f);
	assert_int_equal(ev->res, sizeof(f->buf));
	f->events++;
}

static void on_drained(void *opaque)
{
	((struct fixture *)opaque)->drained++;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char data[4096] = {0};

	assert_non_null(f);
	snprintf(f->path, sizeof(f->path), "/tmp/test_aio-ring.XXXXXX");
	f->fd = mkstemp(f->path);
	assert_true(f->fd >= 0);
	assert_int_equal(write(f->fd, data, sizeof(data)), sizeof(data));
	assert_int_equal(td_loop_create(&f->loop), 0);
	assert_int_equal(aio_ring_open(&f->ring, f->loop, 8, on_event,
				       on_drained, f, "test"),
			 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	aio_ring_close(&f->ring);
	td_loop_destroy(f->loop);
	close(f->fd);
	unlink(f->path);
	free(f);
	return 0;
}

/* One buffered read; it has finished (in the ring) when this returns. */
static void submit_read(struct fixture *f)
{
	struct iocb *list[1] = {&f->iocb};
	struct aio_ring_user *r = (struct aio_ring_user *)f->ring.ctx;

	io_prep_pread(&f->iocb, f->fd, f->buf, sizeof(f->buf), 0);
	aio_ring_prep(&f->ring, &f->iocb, f);
	assert_int_equal(io_submit(f->ring.ctx, 1, list), 1);
	for (int i = 0; i < 1000 && r->head == r->tail; i++)
		usleep(1000);
	assert_true(r->head != r->tail);
}

static bool ring_poll(struct fixture *f)
{
	return f->ring.poller.poll(&f->ring.poller, f->ring.poller.opaque);
}

static bool ring_arm(struct fixture *f)
{
	return f->ring.poller.arm(&f->ring.poller, f->ring.poller.opaque);
}

static bool efd_empty(struct fixture *f)
{
	uint64_t count;

	return read(f->ring.efd, &count, sizeof(count)) < 0 && errno == EAGAIN;
}

/*
 * Polling: the eventfd leaves epoll, the completion is taken from the
 * ring; arming puts the eventfd back and empties it, so the next sleep is
 * not woken by a completion already handled.
 */
static void test_poll_reaps_from_user_ring(void **state)
{
	struct fixture *f = *state;

	assert_false(ring_poll(f));
	assert_true(f->ring.efd_off);
	assert_int_equal(f->ring.efd_event.events, 0);
	submit_read(f);
	assert_true(ring_poll(f));
	assert_int_equal(f->events, 1);
	assert_int_equal(f->drained, 1);
	assert_int_equal(f->ring.polled, 1);
	assert_false(ring_poll(f)); /* nothing more; drained not called */
	assert_int_equal(f->drained, 1);
	assert_false(ring_arm(f));
	assert_false(f->ring.efd_off);
	assert_int_equal(f->ring.efd_event.events, EPOLLIN);
	assert_true(efd_empty(f));
	assert_false(ring_arm(f)); /* armed already: nothing to do */
}

/* A completion between the last poll and the arm: arm takes it. */
static void test_arm_takes_late_completion(void **state)
{
	struct fixture *f = *state;

	assert_false(ring_poll(f));
	submit_read(f);
	assert_true(ring_arm(f));
	assert_int_equal(f->events, 1);
	assert_true(efd_empty(f));
}

/* A ring header of another layout: the poller reaps with io_getevents. */
static void test_poll_falls_back_to_io_getevents(void **state)
{
	struct fixture *f = *state;
	struct aio_ring_user *r = (struct aio_ring_user *)f->ring.ctx;
	unsigned int magic = r->magic;
	struct io_event ev;

	assert_int_equal(magic, AIO_RING_USER_MAGIC);
	submit_read(f);
	r->magic = 0; /* the kernel never reads it; libaio then does syscalls */
	assert_int_equal(aio_ring_user_reap(f->ring.ctx, &ev, 1), -EOPNOTSUPP);
	assert_true(ring_poll(f));
	assert_int_equal(f->events, 1);
	assert_int_equal(r->head, r->tail);
	assert_false(ring_poll(f));
	assert_false(ring_arm(f));
	r->magic = magic;
}

/*
 * Polling off (budget 0, the default): the poller is never called; the
 * completion wakes the loop through the eventfd and is taken from the
 * user ring (no io_getevents: perf trace shows one system call fewer per
 * request, bench/stages.sh --syscalls).
 */
static void test_poll_off_takes_eventfd(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(td_loop_poll_budget(f->loop), 0);
	submit_read(f);
	assert_int_equal(td_loop_run_once(f->loop, 1000), 0);
	assert_int_equal(f->events, 1);
	assert_int_equal(f->ring.polled, 0);
	assert_false(f->ring.efd_off);
	assert_int_equal(f->ring.efd_event.events, EPOLLIN);
}

/* The eventfd path with a ring of another layout: io_getevents. */
static void test_eventfd_falls_back_to_io_getevents(void **state)
{
	struct fixture *f = *state;
	struct aio_ring_user *r = (struct aio_ring_user *)f->ring.ctx;
	unsigned int magic = r->magic;

	submit_read(f);
	r->magic = 0;
	assert_int_equal(td_loop_run_once(f->loop, 1000), 0);
	assert_int_equal(f->events, 1);
	assert_int_equal(f->drained, 1);
	assert_int_equal(f->ring.polled, 0);
	assert_int_equal(r->head, r->tail);
	r->magic = magic;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_reap_wraps_and_limits),
		cmocka_unit_test(test_user_reap_refuses_unknown_layout),
		T(test_poll_reaps_from_user_ring),
		T(test_arm_takes_late_completion),
		T(test_poll_falls_back_to_io_getevents),
		T(test_eventfd_falls_back_to_io_getevents),
		T(test_poll_off_takes_eventfd),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
