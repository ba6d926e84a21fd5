/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio-worker.h - one thread per aio device for the operations libaio has
 * no asynchronous form of: DISCARD and WRITE_ZEROES.
 *
 * The event loop queues a request; the thread runs fallocate (files) or
 * BLKDISCARD/BLKZEROOUT (block devices), falling back to writing zeroes
 * where those are refused, honours FUA with fdatasync, and reports back
 * through an eventfd watched by the loop, where td_complete is called.
 */
#ifndef TAPSTRIPE_AIO_WORKER_H
#define TAPSTRIPE_AIO_WORKER_H

#include <stdbool.h>

#include "tapdisk/driver.h"

struct aio_worker;

/* Start the thread for fd.  Returns 0 and *out, or -errno. */
int aio_worker_start(struct td_driver *drv, int fd, bool is_bdev,
		     struct aio_worker **out);

/* Queue a DISCARD or WRITE_ZEROES request.  Returns 0 or -errno. */
int aio_worker_queue(struct aio_worker *w, struct td_request *req);

/* Stop and free (NULL is fine).  No request may be queued. */
void aio_worker_stop(struct aio_worker *w);

/* What the thread does for one request (exposed for unit tests). */
int aio_worker_run_op(int fd, bool is_bdev, void *zero_buf,
		      const struct td_request *req);

#define AIO_ZERO_BUF_BYTES (1u << 20)

#endif
