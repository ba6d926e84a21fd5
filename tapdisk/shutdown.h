/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shutdown.h - stop serving a vbd without losing an acknowledged write.
 *
 * The order, each step starting when the one before is over:
 *   1. the vbd is resumed, so that I/O held by a pause can finish;
 *   2. every frontend shuts down at once (td_frontend_shutdown): none
 *      takes a new request, and the requests it took complete and are
 *      answered or dropped with their connection;
 *   3. the vbd drains (td_vbd_pause), so nothing is in flight; it is
 *      resumed for one TD_OP_FLUSH when the disk is writable and the
 *      chain can flush: every write acknowledged before is durable once
 *      the flush completes (a chain without TD_FEAT_FLUSH completes a
 *      write only when it is durable);
 *   4. the vbd closes, from the event loop, never inside a vbd callback.
 * A shutdown not over after timeout_us ends with -ETIMEDOUT and leaves the
 * vbd open (I/O may still be in flight, and closing it would free memory
 * that I/O uses).  Everything runs in the event-loop thread.
 */
#ifndef TAPSTRIPE_SHUTDOWN_H
#define TAPSTRIPE_SHUTDOWN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/loop.h"
#include "tapdisk/frontend.h"
#include "tapdisk/vbd.h"

#define TD_SHUTDOWN_TIMEOUT_US (60ull * 1000000) /* the default */
#define TD_SHUTDOWN_MSG_MAX    256

struct td_shutdown;

/* The shutdown is over: sd->err, sd->msg and sd->vbd_closed say how. */
typedef void (*td_shutdown_done_fn)(struct td_shutdown *sd, void *opaque);

struct td_shutdown_params {
	struct td_vbd *vbd; /* required */
	/* The frontends serving the vbd; the array is copied. */
	struct td_frontend *const *frontends;
	unsigned int nr_frontends; /* at most TD_SHUTDOWN_MAX_FRONTENDS */
	uint64_t timeout_us;	   /* 0: TD_SHUTDOWN_TIMEOUT_US */
	td_shutdown_done_fn done;  /* required */
	void *opaque;
};

#define TD_SHUTDOWN_MAX_FRONTENDS 8

/* Zero it before td_shutdown_start; it must outlive the shutdown. */
struct td_shutdown {
	/* --- the result, set when done runs ---------------------------------- */
	int err; /* 0: every acknowledged write is durable and the vbd closed */
	char msg[TD_SHUTDOWN_MSG_MAX]; /* why, for logs and "destroy" */
	bool vbd_closed;	       /* false after a timeout */

	/* --- private ------------------------------------------------------- */
	struct td_loop *loop;
	struct td_shutdown_params p;
	struct td_frontend *frontends[TD_SHUTDOWN_MAX_FRONTENDS];
	unsigned int frontends_stopping;
	bool started;
	bool finished; /* the result is set; later events are ignored */
	struct td_vbd_io flush_io;
	struct td_timer timer;
	struct td_defer start_defer;
	struct td_defer close_defer;
};

/*
 * Start the shutdown; done(sd, opaque) runs exactly once, from the event
 * loop, never inside this call.  Returns 0, -EALREADY when sd was started
 * already, or -EINVAL for bad params (done never runs then).
 */
int td_shutdown_start(struct td_shutdown *sd, struct td_loop *loop,
		      const struct td_shutdown_params *params);

#endif
