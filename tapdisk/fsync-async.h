/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fsync-async.h - an fdatasync that does not stop the event loop: one
 * Linux AIO fdsync iocb (Linux >= 4.18 runs it in a kernel worker) whose
 * completion the loop reaps through an eventfd.  Where AIO cannot take it
 * (io_setup failed, an old kernel refuses the iocb) the fdatasync runs in
 * place, and the callback still comes from the loop, never from inside
 * td_fsync_start: callers see one behaviour.
 *
 * Used by the snapshot job's group commit (snapshot.c): a job file synced
 * on a disk takes milliseconds, which stopped every disk of the tapdisk.
 */
#ifndef TAPSTRIPE_FSYNC_ASYNC_H
#define TAPSTRIPE_FSYNC_ASYNC_H

#include <libaio.h>
#include <stdbool.h>

#include "common/loop.h"

struct td_fsync;
typedef void (*td_fsync_cb)(struct td_fsync *f, int err, void *opaque);

struct td_fsync {
	struct td_loop *loop;
	io_context_t ctx; /* 0: fdatasync in place */
	int efd;
	struct td_fd efd_event;
	struct iocb iocb;
	struct td_defer done_defer; /* an in-place sync's callback */
	int err;		    /* its result */
	bool busy;
	td_fsync_cb cb;
	void *opaque;
};

/* Unit tests that count loop passes set it: every sync runs in place. */
extern bool td_fsync_in_place;

/* Set f up on loop.  Always 0: without AIO it syncs in place. */
int td_fsync_open(struct td_fsync *f, struct td_loop *loop);

/*
 * Start an fdatasync of fd; cb(f, 0 or -errno, opaque) runs from the loop
 * once it is done.  -EBUSY while one is in flight.
 */
int td_fsync_start(struct td_fsync *f, int fd, td_fsync_cb cb, void *opaque);

/* Undo td_fsync_open; waits for an iocb in flight (its cb is not run). */
void td_fsync_close(struct td_fsync *f);

#endif
