/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_snapshot.c - the snapshot job's copy-before-write against the
 * mock driver (tapdisk/snapshot.c): a write to a chunk not yet copied is
 * held until the chunk's read from the disk, its FUA write to the target
 * and its bit in the job file are done, in that order, and only the 4 KiB
 * chunks it touches are copied (a run of them in one copy, at most
 * 64 KiB); a job file of 64 KiB chunks (older tapdisks) resumes in
 * 64 KiB units; a write to a
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
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tapdisk/fsync-async.h"
#include "tapdisk/snapshot-state.h"
#include "tapdisk/snapshot.h"
#include "tests/unit/vbd-fixture.h"

#define CHUNK	  8u   /* sectors: 4 KiB */
#define RUN	  256u /* chunks the cursor copies at once (1 MiB) */
#define CBW_RUN	  16u  /* chunks a held write copies at most (64 KiB) */
#define NR_CHUNKS 1024u

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

/* The flush still held (a commit's, of the target), or -1. */
static int held_flush(void)
{
	for (unsigned int i = 0; i < mock.nr_seen; i++)
		if (mock.seen[i].op == TD_OP_FLUSH && mock.held[i])
			return (int)i;
	return -1;
}

/* Let the commit running go on: its flush of the target completes. */
static void commit(void)
{
	int fl = held_flush();

	assert_true(fl >= 0);
	done(fl);
	run(3);
}

/* Complete everything held, running the loop between, until nothing is
 * held any more (at most rounds * 4 rounds: a commit is a flush, then a sync). */
static void drain_all(int rounds)
{
	for (rounds *= 4; rounds--;) {
		bool any = false;

		for (unsigned int i = 0; i < mock.nr_held; i++)
			if (mock.held[i]) {
				done((int)i);
				any = true;
			}
		run(3);
		if (!any)
			return;
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
	/* The tests count loop passes: the job file's sync in place. */
	td_fsync_in_place = true;
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
	assert_int_equal(td_vbd_snapshot_start(fx->vbd, "mock", NULL, started,
					       NULL, &why),
			 0);
	/* The tests count loop passes: the cursor not slowed by the
	 * disk's own I/O (test_busy_speed turns that on). */
	assert_int_equal(td_vbd_snapshot_set_speed(fx->vbd, 0, 0, &why), 0);
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
	/* The cursor copies runs 0-255 and 256-511; chunk 1000 is left. */
	assert_true(seen(TD_OP_READ, 0, RUN * CHUNK, 0) >= 0);
	assert_true(seen(TD_OP_READ, RUN * CHUNK, RUN * CHUNK, 0) >= 0);
	assert_int_equal(seen(TD_OP_READ, 1000 * CHUNK, CHUNK, 0), -1);

	/* A 4 KiB write across chunks 1000 and 1001 is held; those two
	 * chunks, and only they, are read from the disk in one copy. */
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE,
						     1000 * CHUNK + 4, 8)),
			 0);
	run(2);
	assert_int_equal(seen(TD_OP_WRITE, 1000 * CHUNK + 4, 8, 0), -1);
	rd = seen(TD_OP_READ, 1000 * CHUNK, 2 * CHUNK, 0);
	assert_true(rd >= 0);

	/* A read of an uncopied chunk is never held. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(1, TD_OP_READ, 2 * CHUNK, 8)), 0);
	run(2);
	assert_true(seen(TD_OP_READ, 2 * CHUNK, 8, 0) >= 0);

	/* Old data read: it goes to the target (no FUA: the commit flushes
	 * it), the write still held. */
	done(rd);
	run(3);
	wr = seen(TD_OP_WRITE, 1000 * CHUNK, 2 * CHUNK, 0);
	assert_true(wr >= 0);
	assert_int_equal(seen(TD_OP_WRITE, 1000 * CHUNK + 4, 8, 0), -1);
	assert_false(bit_on_disk(1000));

	/* Written: one flush of the target, and only after it the bits are
	 * on disk and the write goes. */
	done(wr);
	run(3);
	assert_false(bit_on_disk(1000));
	assert_int_equal(seen(TD_OP_WRITE, 1000 * CHUNK + 4, 8, 0), -1);
	commit();
	assert_true(bit_on_disk(1000));
	assert_true(bit_on_disk(1001));
	assert_false(bit_on_disk(1002));
	fg = seen(TD_OP_WRITE, 1000 * CHUNK + 4, 8, 0);
	assert_true(fg >= 0);
	assert_int_equal(fx->calls[0], 0);
	done(fg);
	run(2);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->err[0], 0);

	/* A second write to chunk 1000 goes straight through. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(2, TD_OP_WRITE, 1000 * CHUNK, 4)),
		0);
	run(1);
	assert_true(seen(TD_OP_WRITE, 1000 * CHUNK, 4, 0) >= 0);
	assert_true(td_vbd_close(fx->vbd) == -EBUSY); /* copies in flight */

	/* Finish everything: the job is done and its file gone. */
	drain_all(8);
	assert_false(td_vbd_snapshot_running(fx->vbd));
	assert_int_equal(access(job, F_OK), -1);
	run(3);
}

/* A write over copied and uncopied chunks copies only the uncopied runs,
 * at most 64 KiB each; it waits for all of them. */
static void test_cbw_runs(void **state)
{
	int a, b, c;

	start_job();
	/* Copy chunk 900 first (a 4 KiB write on it). */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 900 * CHUNK, 8)),
		0);
	run(2);
	a = seen(TD_OP_READ, 900 * CHUNK, CHUNK, 0);
	assert_true(a >= 0);
	done(a);
	run(3);
	done(seen(TD_OP_WRITE, 900 * CHUNK, CHUNK, 0));
	run(3);
	commit();
	assert_true(bit_on_disk(900));

	/* 132 KiB from chunk 899: 899 alone, 900 copied, then 901-916 and
	 * 917-932 (16 chunks each, a slot's buffer). */
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(1, TD_OP_WRITE,
						     899 * CHUNK, 34 * CHUNK)),
			 0);
	run(2);
	a = seen(TD_OP_READ, 899 * CHUNK, CHUNK, 0);
	b = seen(TD_OP_READ, 901 * CHUNK, CBW_RUN * CHUNK, 0);
	c = seen(TD_OP_READ, 917 * CHUNK, CBW_RUN * CHUNK, 0);
	assert_true(a >= 0 && b >= 0 && c >= 0);
	done(a);
	done(b);
	run(3);
	done(seen(TD_OP_WRITE, 899 * CHUNK, CHUNK, 0));
	done(seen(TD_OP_WRITE, 901 * CHUNK, CBW_RUN * CHUNK, 0));
	run(3);
	commit();
	/* One run still copying: the write waits. */
	assert_int_equal(seen(TD_OP_WRITE, 899 * CHUNK, 34 * CHUNK, 0), -1);
	done(c);
	run(3);
	done(seen(TD_OP_WRITE, 917 * CHUNK, CBW_RUN * CHUNK, 0));
	run(3);
	commit();
	assert_true(bit_on_disk(932));
	assert_true(seen(TD_OP_WRITE, 899 * CHUNK, 34 * CHUNK, 0) >= 0);
	drain_all(8);
	assert_false(td_vbd_snapshot_running(fx->vbd));
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
	assert_true(bit_on_disk(511));
	assert_false(bit_on_disk(512));

	/* A new vbd resumes: chunks 512-1023 are copied, not 0-511. */
	mock.nr_seen = 0;
	mock.nr_held = 0;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	td_strbuf_init(&why);
	assert_int_equal(td_vbd_snapshot_resume(fx->vbd, job, &why), 0);
	assert_int_equal(td_vbd_snapshot_set_speed(fx->vbd, 0, 0, &why), 0);
	td_strbuf_free(&why);
	run(3);
	assert_int_equal(seen(TD_OP_READ, 0, RUN * CHUNK, 0), -1);
	rd = seen(TD_OP_READ, 512 * CHUNK, RUN * CHUNK, 0);
	assert_true(rd >= 0);
	assert_true(seen(TD_OP_READ, 768 * CHUNK, RUN * CHUNK, 0) >= 0);
	drain_all(8);
	assert_false(td_vbd_snapshot_running(fx->vbd));
	assert_int_equal(access(job, F_OK), -1);
}

/* The job's job_syncs so far (status). */
static unsigned long job_syncs(void)
{
	struct td_strbuf out;
	unsigned long n;
	const char *p;

	td_strbuf_init(&out);
	td_vbd_snapshot_status(fx->vbd, false, &out);
	p = strstr(td_strbuf_str(&out), "job_syncs ");
	assert_non_null(p);
	n = strtoul(p + 10, NULL, 10);
	td_strbuf_free(&out);
	return n;
}

/* Group commit: two copies written to the target in the same pass get
 * one flush of the target and their bits in one sync of the job file;
 * their writes go only after. */
/* The commit's flush of the target fails: the job fails with the
 * reason, no bit is set, and the held write still goes (to the disk,
 * which the target no longer follows). */
static void test_commit_flush_fails(void **state)
{
	struct td_strbuf out;
	int rd, wr, fl;

	start_job();
	td_vbd_snapshot_stop_cursor(fx->vbd);
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 1000 * CHUNK, 4)),
		0);
	run(2);
	rd = seen(TD_OP_READ, 1000 * CHUNK, CHUNK, 0);
	assert_true(rd >= 0);
	done(rd);
	run(3);
	wr = seen(TD_OP_WRITE, 1000 * CHUNK, CHUNK, 0);
	assert_true(wr >= 0);
	done(wr);
	run(3);
	fl = held_flush();
	assert_true(fl >= 0);
	{
		struct td_request *r = mock.held[fl];

		mock.held[fl] = NULL;
		td_complete(r, -EIO);
	}
	run(3);
	td_strbuf_init(&out);
	td_vbd_snapshot_status(fx->vbd, false, &out);
	assert_non_null(strstr(td_strbuf_str(&out), "state failed"));
	assert_non_null(strstr(td_strbuf_str(&out), "marking"));
	td_strbuf_free(&out);
	assert_int_equal(access(job, F_OK), -1); /* dropped with the job */
	drain_all(4);
	assert_int_equal(fx->calls[0], 1);
}

static void test_group_commit(void **state)
{
	int r1, r2, w1, w2;
	unsigned long before;

	start_job();
	td_vbd_snapshot_stop_cursor(fx->vbd);
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 1000 * CHUNK, 4)),
		0);
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(1, TD_OP_WRITE, 1010 * CHUNK, 4)),
		0);
	run(2);
	r1 = seen(TD_OP_READ, 1000 * CHUNK, CHUNK, 0);
	r2 = seen(TD_OP_READ, 1010 * CHUNK, CHUNK, 0);
	assert_true(r1 >= 0 && r2 >= 0);
	done(r1);
	done(r2);
	run(3);
	w1 = seen(TD_OP_WRITE, 1000 * CHUNK, CHUNK, 0);
	w2 = seen(TD_OP_WRITE, 1010 * CHUNK, CHUNK, 0);
	assert_true(w1 >= 0 && w2 >= 0);
	before = job_syncs();
	assert_false(bit_on_disk(1000));
	done(w1);
	done(w2);
	/* Not before the commit: no bit synced, no write through. */
	assert_int_equal(seen(TD_OP_WRITE, 1000 * CHUNK, 4, 0), -1);
	assert_int_equal(seen(TD_OP_WRITE, 1010 * CHUNK, 4, 0), -1);
	assert_int_equal(job_syncs(), before);
	run(3);
	/* One flush of the target for both, then one sync. */
	assert_int_equal(job_syncs(), before);
	commit();
	assert_int_equal(held_flush(), -1);
	assert_int_equal(job_syncs(), before + 1);
	assert_true(bit_on_disk(1000));
	assert_true(bit_on_disk(1010));
	assert_true(seen(TD_OP_WRITE, 1000 * CHUNK, 4, 0) >= 0);
	assert_true(seen(TD_OP_WRITE, 1010 * CHUNK, 4, 0) >= 0);
	drain_all(4);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->calls[1], 1);
}

/* A write to a chunk whose bit is set but not synced yet (its commit's
 * flush of the target ended, the job file's sync runs) waits for the
 * sync: a power loss could otherwise keep the write and lose the bit.
 * The sync runs through AIO here, so the window stays open until the
 * loop reaps it. */
static void test_write_waits_for_sync(void **state)
{
	int rd, wr, fl;

	td_fsync_in_place = false;
	start_job();
	td_vbd_snapshot_stop_cursor(fx->vbd);
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 1000 * CHUNK, 4)),
		0);
	run(2);
	rd = seen(TD_OP_READ, 1000 * CHUNK, CHUNK, 0);
	assert_true(rd >= 0);
	done(rd);
	run(3);
	wr = seen(TD_OP_WRITE, 1000 * CHUNK, CHUNK, 0);
	assert_true(wr >= 0);
	done(wr);
	run(3);
	fl = held_flush();
	assert_true(fl >= 0);
	done(fl);
	run(1); /* the flush ends: the bits are set, the sync submitted */
	/* A second write to the chunk, before the loop reaps the sync. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(1, TD_OP_WRITE, 1000 * CHUNK, 2)),
		0);
	assert_int_equal(seen(TD_OP_WRITE, 1000 * CHUNK, 2, 0), -1);
	assert_int_equal(seen(TD_OP_WRITE, 1000 * CHUNK, 4, 0), -1);
	for (int i = 0; i < 200 && seen(TD_OP_WRITE, 1000 * CHUNK, 2, 0) < 0;
	     i++) {
		usleep(1000);
		run(1);
	}
	assert_true(bit_on_disk(1000));
	assert_true(seen(TD_OP_WRITE, 1000 * CHUNK, 4, 0) >= 0);
	assert_true(seen(TD_OP_WRITE, 1000 * CHUNK, 2, 0) >= 0);
	drain_all(4);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->calls[1], 1);
	/* The cursor's first runs commit through AIO syncs too. */
	for (int i = 0; i < 200 && fx->vbd; i++) {
		drain_all(4);
		if (td_vbd_close(fx->vbd) == 0)
			fx->vbd = NULL;
		else
			usleep(1000);
	}
	assert_null(fx->vbd);
}

/* The copy of chunk c for a held write: read, then written to the
 * target (the commit not done). */
static void copy_to_target(uint64_t c)
{
	int rd, wr;

	run(2);
	rd = seen(TD_OP_READ, c * CHUNK, CHUNK, 0);
	assert_true(rd >= 0);
	done(rd);
	run(3);
	wr = seen(TD_OP_WRITE, c * CHUNK, CHUNK, 0);
	assert_true(wr >= 0);
	done(wr);
	run(3);
}

/* Commits overlap: a copy written to the target while a commit's flush
 * runs gets a commit of its own at once; each commit's bits and writes
 * go after its own flush and sync, in whatever order they end. */
static void test_commits_overlap(void **state)
{
	int f1, f2;

	start_job();
	td_vbd_snapshot_stop_cursor(fx->vbd);
	drain_all(4); /* the cursor's first runs */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 1000 * CHUNK, 4)),
		0);
	copy_to_target(1000);
	f1 = held_flush();
	assert_true(f1 >= 0);
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(1, TD_OP_WRITE, 1010 * CHUNK, 4)),
		0);
	copy_to_target(1010);
	f2 = -1;
	for (unsigned int i = (unsigned int)f1 + 1; i < mock.nr_seen; i++)
		if (mock.seen[i].op == TD_OP_FLUSH && mock.held[i])
			f2 = (int)i;
	assert_true(f2 > f1); /* the second commit did not wait */
	/* The second ends first: its write goes, the first's waits. */
	done(f2);
	run(3);
	assert_true(bit_on_disk(1010));
	assert_false(bit_on_disk(1000));
	assert_true(seen(TD_OP_WRITE, 1010 * CHUNK, 4, 0) >= 0);
	assert_int_equal(seen(TD_OP_WRITE, 1000 * CHUNK, 4, 0), -1);
	done(f1);
	run(3);
	assert_true(bit_on_disk(1000));
	assert_true(seen(TD_OP_WRITE, 1000 * CHUNK, 4, 0) >= 0);
	drain_all(4);
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(fx->calls[1], 1);
}

/* A read starting at sector, of any length: -1 if none. */
static int read_from(uint64_t sector)
{
	for (unsigned int i = 0; i < mock.nr_seen; i++)
		if (mock.seen[i].op == TD_OP_READ &&
		    mock.seen[i].sector == sector)
			return (int)i;
	return -1;
}

/* Complete every held request once (no more), running the loop. */
static void done_held(void)
{
	for (unsigned int i = 0; i < mock.nr_held; i++)
		if (mock.held[i])
			done((int)i);
	run(3);
}

/* The cursor's speed limit: at 1 byte/s one run starts after the two in
 * flight (the first is free), then none; copy-before-write still goes;
 * 0 lifts the limit at once. */
static void test_speed(void **state)
{
	struct td_strbuf why, out;

	td_strbuf_init(&why);
	assert_int_equal(td_vbd_snapshot_set_speed(fx->vbd, 1, 0, &why),
			 -ENOENT); /* no job yet */
	assert_non_null(strstr(td_strbuf_str(&why), "no snapshot job"));
	start_job();
	assert_int_equal(td_vbd_snapshot_set_speed(fx->vbd, 1, 0, &why), 0);
	for (int i = 0; i < 6; i++)
		done_held(); /* runs 0-511 copied, and one more (512-767) */
	assert_int_equal(read_from(768 * CHUNK), -1);
	/* A write on chunk 1000 is not held back by the limit. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 1000 * CHUNK, 4)),
		0);
	for (int i = 0; i < 6; i++)
		done_held();
	assert_int_equal(fx->calls[0], 1);
	assert_int_equal(read_from(768 * CHUNK), -1);
	td_strbuf_init(&out);
	td_vbd_snapshot_status(fx->vbd, true, &out);
	assert_non_null(strstr(td_strbuf_str(&out), "\"speed\": 1,"));
	assert_non_null(strstr(td_strbuf_str(&out), "\"busy_speed\": 0"));
	td_strbuf_free(&out);
	/* No limit: the cursor goes on at once. */
	assert_int_equal(td_vbd_snapshot_set_speed(fx->vbd, 0, 0, &why), 0);
	run(2);
	assert_true(read_from(768 * CHUNK) >= 0);
	td_strbuf_free(&why);
	drain_all(8);
	assert_false(td_vbd_snapshot_running(fx->vbd));
}

/* The busy speed: at 1 byte/s while the disk serves its own I/O, the
 * cursor waits after a read of the disk, and goes on once the disk has
 * been idle for 100 ms. */
static void test_busy_speed(void **state)
{
	struct td_strbuf why;
	int rd;

	start_job();
	td_strbuf_init(&why);
	assert_int_equal(td_vbd_snapshot_set_speed(fx->vbd, 0, 1, &why), 0);
	td_strbuf_free(&why);
	/* The disk's own read, while the cursor's runs are in flight. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 100 * CHUNK, 8)), 0);
	run(2);
	rd = seen(TD_OP_READ, 100 * CHUNK, 8, 0);
	assert_true(rd >= 0);
	done(rd);
	run(2);
	for (int i = 0; i < 6; i++)
		done_held(); /* runs 0-511, one more (the first is free) */
	assert_true(read_from(512 * CHUNK) >= 0);
	assert_int_equal(read_from(768 * CHUNK), -1);
	/* Idle for 100 ms: the retry timer finds it so, the cursor goes. */
	for (int i = 0; i < 30 && read_from(768 * CHUNK) < 0; i++) {
		usleep(10000);
		run(1);
	}
	assert_true(read_from(768 * CHUNK) >= 0);
	drain_all(8);
	assert_false(td_vbd_snapshot_running(fx->vbd));
}

/* Write a job file of chunk_bytes chunks over the whole mock disk. */
static void old_job_file(uint32_t chunk_bytes)
{
	struct td_snap_state st;
	struct td_strbuf why;
	char sub[100];

	snprintf(sub, sizeof(sub), "%s/snapshots", dir);
	assert_true(!mkdir(sub, 0700) || errno == EEXIST);
	td_strbuf_init(&why);
	assert_int_equal(td_snap_state_init(&st, "mock", mock.size_sectors,
					    chunk_bytes >> TD_SECTOR_SHIFT,
					    &why),
			 0);
	assert_int_equal(td_snap_state_create(&st, job, &why), 0);
	td_snap_state_fini(&st);
	td_strbuf_free(&why);
}

/* A job file of an older tapdisk (64 KiB chunks) resumes in 64 KiB
 * units; one naming chunks larger than 64 KiB is refused, saying so. */
static void test_old_job_file(void **state)
{
	struct td_strbuf why;
	int rd;

	old_job_file(64u << 10);
	td_strbuf_init(&why);
	assert_int_equal(td_vbd_snapshot_resume(fx->vbd, job, &why), 0);
	assert_int_equal(td_vbd_snapshot_set_speed(fx->vbd, 0, 0, &why), 0);
	run(3);
	/* The cursor: 16 chunks of 64 KiB (1 MiB) per run. */
	assert_true(seen(TD_OP_READ, 0, 16 * 128, 0) >= 0);
	assert_true(seen(TD_OP_READ, 16 * 128, 16 * 128, 0) >= 0);
	/* A 4 KiB write in chunk 60 copies that 64 KiB chunk. */
	assert_int_equal(
		td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 60 * 128 + 8, 8)),
		0);
	run(2);
	rd = seen(TD_OP_READ, 60 * 128, 128, 0);
	assert_true(rd >= 0);
	drain_all(8);
	assert_int_equal(fx->calls[0], 1);
	assert_false(td_vbd_snapshot_running(fx->vbd));
	assert_int_equal(access(job, F_OK), -1);

	/* 128 KiB chunks: refused, the file left alone. */
	old_job_file(128u << 10);
	td_strbuf_reset(&why);
	assert_int_equal(td_vbd_snapshot_resume(fx->vbd, job, &why), -EINVAL);
	assert_non_null(strstr(td_strbuf_str(&why), "chunks of 131072 bytes"));
	assert_non_null(strstr(td_strbuf_str(&why), "drop the job"));
	assert_int_equal(access(job, F_OK), 0);
	td_strbuf_free(&why);
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
	assert_true(td_vbd_snapshot_start(fx->vbd, "nosuch:x", NULL, started,
					  NULL, &why) < 0);
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
		cmocka_unit_test_setup_teardown(test_cbw_runs, snap_setup,
						snap_teardown),
		cmocka_unit_test_setup_teardown(test_old_job_file, snap_setup,
						snap_teardown),
		cmocka_unit_test_setup_teardown(test_speed, snap_setup,
						snap_teardown),
		cmocka_unit_test_setup_teardown(test_busy_speed, snap_setup,
						snap_teardown),
		cmocka_unit_test_setup_teardown(test_commit_flush_fails,
						snap_setup, snap_teardown),
		cmocka_unit_test_setup_teardown(test_group_commit, snap_setup,
						snap_teardown),
		cmocka_unit_test_setup_teardown(test_write_waits_for_sync,
						snap_setup, snap_teardown),
		cmocka_unit_test_setup_teardown(test_commits_overlap,
						snap_setup, snap_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
