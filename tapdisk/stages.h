/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stages.h - where a request's time goes inside tapdisk (tap-ctl stages).
 *
 * Off by default.  While on, each I/O carries the times (stamps) at which
 * it passed the points below, and when its response has been pushed the
 * differences are added up by op: the mean of a stage is its sum over
 * the count.  Consecutive stamps make the stages, so the stages of an
 * I/O add up exactly to its residence (seen -> notified).
 *
 *   SEEN       the frontend read the request off its ring (blkif; other
 *              frontends: the vbd took it, = START)
 *   START      td_vbd_submit took it
 *   DRIVER     its first piece was handed to the top driver
 *   SUBMITTED  the kernel took it (io_submit returned; drivers that
 *              stamp it: aio.  Else = DRIVER, and the time counts in DISK)
 *   REAPED     the driver completed its last piece (td_complete: the
 *              completion was read)
 *   DONE       the vbd's callback ran (completions run deferred)
 *   RESPOND    the frontend's pass-end hook began writing responses
 *   NOTIFIED   the responses were pushed and the frontend notified
 *
 * A stamp never set (a held I/O, a failed one) takes the previous one's
 * value, so its stage counts 0.  Per wake-up, the time from a pass's
 * epoll_wait returning to the first request read off the ring and to the
 * first completion reaped is summed too (passes that read or reap).
 */
#ifndef TAPSTRIPE_STAGES_H
#define TAPSTRIPE_STAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "tapdisk/driver.h"

enum td_stamp {
	TD_STAMP_SEEN,
	TD_STAMP_START,
	TD_STAMP_DRIVER,
	TD_STAMP_SUBMITTED,
	TD_STAMP_REAPED,
	TD_STAMP_DONE,
	TD_STAMP_RESPOND,
	TD_STAMP_COUNT
};

/* Stage i runs from stamp i to stamp i + 1; NOTIFY from RESPOND on. */
enum td_stage {
	TD_STAGE_PARSE,	   /* seen -> vbd: parse, copy, start of the pass */
	TD_STAGE_ISSUE,	   /* vbd -> driver: validate, split */
	TD_STAGE_SUBMIT,   /* driver -> kernel: batch, io_submit */
	TD_STAGE_DISK,	   /* kernel -> reaped: the disk and the wake-up */
	TD_STAGE_CALLBACK, /* reaped -> vbd callback (deferred call) */
	TD_STAGE_WAIT,	   /* callback -> response hook (rest of the pass) */
	TD_STAGE_NOTIFY,   /* response pushed, frontend notified */
	TD_STAGE_COUNT
};

struct td_vbd_stages {
	bool on;
	uint64_t count[TD_OP_COUNT]; /* I/Os timed, by op */
	uint64_t sum_ns[TD_OP_COUNT][TD_STAGE_COUNT];
	uint64_t max_ns[TD_OP_COUNT]; /* longest seen -> respond */
	uint64_t ring_wakes;	      /* passes that read requests */
	uint64_t wake_to_ring_ns;     /* their epoll return -> first read */
	uint64_t reap_wakes;	      /* passes that reaped completions */
	uint64_t wake_to_reap_ns;
	/* Private: the pass of the last wake counted. */
	uint64_t ring_pass, reap_pass;
};

/* The stage (and op) names used in tap-ctl's output. */
const char *td_stage_name(enum td_stage stage);

/*
 * Add one I/O of op whose stamps are stamps[] (filled in place: a stamp
 * below the one before it is raised to it) to st; notify_ns is its
 * NOTIFY stage.  Pure: the unit tests give it exact times.
 */
void td_stages_account(struct td_vbd_stages *st, enum td_op op,
		       uint64_t *stamps, uint64_t notify_ns);

/* The residence of op's I/Os, summed over the stages. */
uint64_t td_stages_residence_ns(const struct td_vbd_stages *st, enum td_op op);

#endif
