/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_snapshot.c - the snapshot job's copy-before-write against the
 * mock driver (tapdisk/snapshot.c): a write to a chunk not yet copied is
 * held until the chunk's read from the disk, its FUA write to the target
 * and its bit in the job file are done, in that order; a write to a
 * copied chunk and every read go straight through; a shutdown's close
 * leaves the job file, and a new vbd resumes from it.
 *
 * The source and the target are both "mock" chains: their requests
 * share mock.seen[] (and mock.held[], the same index), told apart by op,
 * flags and range.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tapdisk/snapshot-state.h"
#include "tapdisk/snapshot.h"
#include "tests/unit/vbd-fixture.h"

#define CHUNK	  128u /* sectors: 64 KiB */
#define RUN	  16u  /* chunks the cursor copies at once */
#define NR_CHUNKS 64u

static char dir[64];
static char job[160];
static int started_err = 1;

static void started(struct td_vbd *vbd, int err, const char *why, void *opaque)
{
	started_err = err;
}

/* Index in mock.seen/held of the request (op, sector, nr, flags). */
static int seen(enum td_op op, uint64_t sector, uint32_t nr, uint32_t flags)
{
	for (unsigned int i = 0; i < mock.nr_seen; i++)
		if (mock.seen[i].op == op && mock.seen[i].sector == sector &&
		    mock.seen[i].nr_sectors == nr &&
		    mock.seen[i].flags == flags)
			return (int)i;
	return -1;
}

/* Complete held request i once. */
static void done(int i)
{
	struct td_request *r;

	assert_true(i >= 0 && mock.held[i]);
	r = mock.held[i];
	mock.held[i] = NULL;
	td_complete(r, 0);
}

/* Complete everything held, rounds times, running the loop between. */
static void drain_all(int rounds)
{
	while (rounds--) {
		for (unsigned int i = 0; i < mock.nr_held; i++)
			if (mock.held[i])
				done((int)i);
		run(3);
	}
}

static bool bit_on_disk(uint64_t chunk)
{
	struct td_snap_state st;
	struct td_strbuf why;
	bool set;

	td_strbuf_init(&why);
	assert_int_equal(td_snap_state_load(&st, job, &why), 0);
	set = td_snap_copied(&st, chunk);
	td_snap_state_fini(&st);
	td_strbuf_free(&why);
	return set;
}

static int snap_setup(void **state)
{
	setup(state);
	snprintf(dir, sizeof(dir), "/tmp/test_snapshot.XXXXXX");
	assert_non_null(mkdtemp(dir));
	setenv("TAPSTRIPE_STATE_DIR", dir, 1);
	snprintf(job, sizeof(job), "%s/snapshots/test.job", dir);
	mock.size_sectors = CHUNK * NR_CHUNKS;
	mock.features = TD_FEAT_FLUSH | TD_FEAT_FUA;
	mock.hold = true;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	return 0;
}

static int snap_teardown(void **state)
{
	char sub[100];

	unlink(job);
	snprintf(sub, sizeof(sub), "%s/snapshots", dir);
	rmdir(sub);
	rmdir(dir);
	return teardown(state);
}

/* Start a job; complete the flush that marks the instant. */
static void start_job(void)
{
	int flush;

	struct td_strbuf why;

	td_strbuf_init(&why);
	assert_int_equal(
		td_vbd_snapshot_start(fx->vbd, "mock", started, NULL, &why), 0);
	td_strbuf_free(&why);
	run(3);
	flush = seen(TD_OP_FLUSH, 0, 0, 0);
	assert_true(flush >= 0);
	assert_int_equal(access(job, F_OK), -1); /* not before the instant */
	done(flush);
	run(3);
	assert_int_equal(started_err, 0);
	assert_int_equal(access(job, F_OK), 0);
	assert_true(td_vbd_snapshot_running(fx->vbd));
}

static void test_cbw_order(void **state)
{
	int rd, wr, fg;

	start_job();
	/* The cursor copies runs 0-15 and 16-31; chunk 63 is left. */
	assert_true(seen(TD_OP_READ, 0, RUN * CHUNK, 0) >= 0);
	assert_true(seen(TD_OP_READ, RUN * CHUNK, RUN * CHUNK, 0) >= 0);
	assert_int_equal(seen(TD_OP_READ, 663 * CHUNK, CHUNK, 0), -1);

	/* A write to chunk 63 is held; its chunk is read from the disk. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 63 * CHUNK + 8, 8)),
		0);
	run(2);
	assert_int_equal(seen(TD_OP_WRITE, 63 * CHUNK + 8, 8, 0), -1);
	rd = seen(TD_OP_READ, 63 * CHUNK, CHUNK, 0);
	assert_true(rd >= 0);

	/* A read of an uncopied chunk is never held. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(1, TD_OP_READ, 2 * CHUNK, 8)), 0);
	run(2);
	assert_true(seen(TD_OP_READ, 2 * CHUNK, 8, 0) >= 0);

	/* Old data read: it goes to the target with FUA, write still held. */
	done(rd);
	run(3);
	wr = seen(TD_OP_WRITE, 63 * CHUNK, CHUNK, TD_REQ_FUA);
	assert_true(wr >= 0);
	assert_int_equal(seen(TD_OP_WRITE, 63 * CHUNK + 8, 8, 0), -1);
	assert_false(bit_on_disk(63));

	/* Durable in the target: the bit is on disk, then the write goes. */
	done(wr);
	run(3);
	assert_true(bit_on_disk(63));
	fg = seen(TD_OP_WRITE, 63 * CHUNK + 8, 8, 0);
	assert_true(fg >= 0);
	assert_int_equal(fx->calls[0], 0);
	done(fg);
	run(2);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], 0);

	/* A second write to chunk 63 goes straight through. */
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(2, TD_OP_WRITE,
						     63 * CHUNK + 64, 8)),
			 0);
	run(1);
	assert_true(seen(TD_OP_WRITE, 63 * CHUNK + 64, 8, 0) >= 0);
	assert_true(td_vbd_close(fx->vbd) == -EBUSY); /* copies in flight */

	/* Finish everything: the job is done and its file gone. */
	drain_all(8);
	assert_false(td_vbd_snapshot_running(fx->vbd));
	assert_int_equal(access(job, F_OK), -1);
	run(3);
}

static void test_close_keeps_job_then_resume(void **state)
{
	struct td_strbuf why;
	int rd;

	start_job();
	/* Finish what is in flight without letting the cursor go on. */
	td_vbd_snapshot_stop_cursor(fx->vbd);
	drain_all(2);
	assert_int_equal(td_vbd_close(fx->vbd), 0);
	fx->vbd = NULL;
	assert_int_equal(access(job, F_OK), 0); /* kept for the next one */
	assert_true(bit_on_disk(0));
	assert_true(bit_on_disk(31));
	assert_false(bit_on_disk(32));

	/* A new vbd resumes: chunks 32-63 are copied, not 0-31. */
	mock.nr_seen = 0;
	mock.nr_held = 0;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	td_strbuf_init(&why);
	assert_int_equal(td_vbd_snapshot_resume(fx->vbd, job, &why), 0);
	td_strbuf_free(&why);
	run(3);
	assert_int_equal(seen(TD_OP_READ, 0, RUN * CHUNK, 0), -1);
	rd = seen(TD_OP_READ, 32 * CHUNK, RUN * CHUNK, 0);
	assert_true(rd >= 0);
	assert_true(seen(TD_OP_READ, 48 * CHUNK, RUN * CHUNK, 0) >= 0);
	drain_all(8);
	assert_false(td_vbd_snapshot_running(fx->vbd));
	assert_int_equal(access(job, F_OK), -1);
}

static void test_refusals(void **state)
{
	struct td_strbuf why;
	int fd;

	/* A damaged job file is not resumed, with the reason. */
	td_strbuf_init(&why);
	assert_int_equal(td_vbd_snapshot_resume(fx->vbd, job, &why), -ENOENT);
	snprintf(job, sizeof(job), "%s/bad.job", dir);
	fd = creat(job, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "junk\n", 5), 5);
	close(fd);
	assert_int_equal(td_vbd_snapshot_resume(fx->vbd, job, &why), -EINVAL);
	assert_non_null(strstr(td_strbuf_str(&why), "not a snapshot job"));
	unlink(job);
	snprintf(job, sizeof(job), "%s/snapshots/test.job", dir);
	td_strbuf_reset(&why);
	/* Cancel with nothing running. */
	assert_int_equal(td_vbd_snapshot_cancel(fx->vbd, &why), -ENOENT);
	td_strbuf_reset(&why);
	/* A target the chain cannot open. */
	assert_true(td_vbd_snapshot_start(fx->vbd, "nosuch:x", started, NULL,
					  &why) < 0);
	assert_non_null(strstr(td_strbuf_str(&why), "cannot open the target"));
	td_strbuf_free(&why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cbw_order, snap_setup,
						snap_teardown),
		cmocka_unit_test_setup_teardown(
			test_close_keeps_job_then_resume, snap_setup,
			snap_teardown),
		cmocka_unit_test_setup_teardown(test_refusals, snap_setup,
						snap_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
