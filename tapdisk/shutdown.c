/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shutdown.c - the order behind "no acknowledged write is lost"
 * (shutdown.h): frontends stop, the vbd drains, one flush, close.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "tapdisk/shutdown.h"
#include "tapdisk/snapshot.h"

#define US_PER_S 1000000ull

/* Close the vbd and report.  A step of its own: the callers of
 * sd_finish run inside the vbd's completion or drain callbacks, and
 * closing the vbd there would free requests the vbd is still walking. */
static void sd_close(struct td_defer *d, void *opaque)
{
	struct td_shutdown *sd = opaque;

	sd->vbd_closed = td_vbd_close(sd->p.vbd) == 0;
	sd->p.done(sd, sd->p.opaque);
}

/* The result; the first one wins (a timeout, then a late flush). */
static void sd_finish(struct td_shutdown *sd, int err, const char *msg)
{
	if (sd->finished)
		return;
	sd->finished = true;
	td_loop_timer_cancel(&sd->timer);
	sd->err = err;
	snprintf(sd->msg, sizeof(sd->msg), "%s", msg);
	td_loop_defer(sd->loop, &sd->close_defer, sd_close, sd);
}

static void sd_flush_done(struct td_vbd_io *io, int err)
{
	struct td_shutdown *sd = io->opaque;
	char msg[TD_SHUTDOWN_MSG_MAX];

	if (!err) {
		sd_finish(sd, 0, "all acknowledged writes flushed");
		return;
	}
	snprintf(msg, sizeof(msg),
		 "the final flush failed: %s; acknowledged writes may not be "
		 "on stable storage",
		 strerror(-err));
	sd_finish(sd, err, msg);
}

/* Nothing is in flight and no frontend submits any more: flush. */
static void sd_drained(struct td_vbd *vbd, void *opaque)
{
	struct td_shutdown *sd = opaque;
	const struct td_disk_info *info = td_vbd_get_info(vbd);
	int err;

	td_vbd_resume(vbd); /* let the flush through */
	if (sd->finished)
		return;
	if (info->read_only) {
		sd_finish(sd, 0, "read-only disk: nothing to flush");
		return;
	}
	if (!(info->features & TD_FEAT_FLUSH)) {
		sd_finish(sd, 0,
			  "the chain cannot flush: every write was complete "
			  "when acknowledged");
		return;
	}
	memset(&sd->flush_io, 0, sizeof(sd->flush_io));
	sd->flush_io.op = TD_OP_FLUSH;
	sd->flush_io.cb = sd_flush_done;
	sd->flush_io.opaque = sd;
	err = td_vbd_submit(vbd, &sd->flush_io);
	if (err)
		sd_flush_done(&sd->flush_io, err);
}

/* One frontend has stopped; the drain starts after the last. */
static void sd_frontend_stopped(void *opaque)
{
	struct td_shutdown *sd = opaque;
	int err;

	if (--sd->frontends_stopping || sd->finished)
		return;
	err = td_vbd_pause(sd->p.vbd, sd_drained, sd);
	if (err) {
		td_err("cannot drain the vbd: %s", strerror(-err));
		sd_finish(sd, err, "cannot drain the vbd before closing it");
	}
}

static void sd_stop_frontends(struct td_defer *d, void *opaque)
{
	struct td_shutdown *sd = opaque;

	/* Held at one until all have started: the count must not reach
	 * zero in between (their done is deferred, but a frontend that
	 * refuses does not call it). */
	sd->frontends_stopping = 1;
	for (unsigned int i = 0; i < sd->p.nr_frontends; i++)
		if (!td_frontend_shutdown(sd->frontends[i], sd_frontend_stopped,
					  sd))
			sd->frontends_stopping++;
	sd_frontend_stopped(sd);
}

static void sd_timeout(struct td_timer *t, void *opaque)
{
	struct td_shutdown *sd = opaque;
	struct td_vbd_stats st;
	char msg[TD_SHUTDOWN_MSG_MAX];

	td_vbd_get_stats(sd->p.vbd, &st);
	snprintf(msg, sizeof(msg),
		 "shutdown timed out after %llu s with %llu I/Os in flight: "
		 "exiting without closing the disk; acknowledged writes may "
		 "not be on stable storage",
		 (unsigned long long)(sd->p.timeout_us / US_PER_S),
		 (unsigned long long)st.inflight);
	sd_finish(sd, -ETIMEDOUT, msg);
}

/* After a timeout the vbd still has I/O in flight: td_vbd_close refuses,
 * and sd_close reports the vbd open. */
int td_shutdown_start(struct td_shutdown *sd, struct td_loop *loop,
		      const struct td_shutdown_params *params)
{
	if (sd->started)
		return -EALREADY;
	if (!params->vbd || !params->done ||
	    params->nr_frontends > TD_SHUTDOWN_MAX_FRONTENDS)
		return -EINVAL;
	sd->started = true;
	sd->loop = loop;
	sd->p = *params;
	if (!sd->p.timeout_us)
		sd->p.timeout_us = TD_SHUTDOWN_TIMEOUT_US;
	for (unsigned int i = 0; i < params->nr_frontends; i++)
		sd->frontends[i] = params->frontends[i];
	td_vbd_snapshot_stop_cursor(sd->p.vbd); /* its file stays */
	td_vbd_resume(sd->p.vbd);		/* held I/O must finish too */
	td_loop_timer_arm(loop, &sd->timer, sd->p.timeout_us, sd_timeout, sd);
	td_loop_defer(loop, &sd->start_defer, sd_stop_frontends, sd);
	return 0;
}
