/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio-worker.c - the discard / write-zeroes thread of an aio device.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/aio/aio-worker.h"

struct aio_job {
	struct td_request *req;
	int err;
};

/* Two rings of queue_depth jobs, guarded by lock. */
struct aio_worker {
	struct td_driver *drv;
	int fd;
	bool is_bdev;
	void *zero_buf;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	uint32_t depth;
	struct aio_job *todo, *done;
	uint32_t todo_head, todo_len, done_len;
	int efd;
	struct td_fd efd_event;
};

static int write_zeroes(int fd, void *zero_buf, uint64_t off, uint64_t len)
{
	while (len) {
		size_t n = len < AIO_ZERO_BUF_BYTES ? (size_t)len
						    : AIO_ZERO_BUF_BYTES;
		ssize_t done = pwrite(fd, zero_buf, n, (off_t)off);

		if (done < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (done == 0)
			return -EIO;
		off += (uint64_t)done;
		len -= (uint64_t)done;
	}
	return 0;
}

static int bdev_range_ioctl(int fd, unsigned long cmd, uint64_t off,
			    uint64_t len)
{
	uint64_t range[2] = {off, len};

	return ioctl(fd, cmd, range) < 0 ? -errno : 0;
}

static int file_fallocate(int fd, int mode, uint64_t off, uint64_t len)
{
	return fallocate(fd, mode | FALLOC_FL_KEEP_SIZE, (off_t)off,
			 (off_t)len) < 0
		       ? -errno
		       : 0;
}

static bool unsupported(int err)
{
	return err == -EOPNOTSUPP || err == -ENOTTY || err == -EINVAL ||
	       err == -ENOSYS;
}

int aio_worker_run_op(int fd, bool is_bdev, void *zero_buf,
		      const struct td_request *req)
{
	uint64_t off = req->sector << TD_SECTOR_SHIFT;
	uint64_t len = td_request_bytes(req);
	bool keep =
		req->op == TD_OP_WRITE_ZEROES && (req->flags & TD_REQ_NO_HOLE);
	int err;

	if (is_bdev)
		err = bdev_range_ioctl(
			fd, req->op == TD_OP_DISCARD ? BLKDISCARD : BLKZEROOUT,
			off, len);
	else
		err = file_fallocate(
			fd, keep ? FALLOC_FL_ZERO_RANGE : FALLOC_FL_PUNCH_HOLE,
			off, len);
	/* Where the file system or device refuses: zeroes, the safe answer. */
	if (unsupported(err) && !is_bdev && !keep)
		err = file_fallocate(fd, FALLOC_FL_ZERO_RANGE, off, len);
	if (unsupported(err))
		err = write_zeroes(fd, zero_buf, off, len);
	if (!err && (req->flags & TD_REQ_FUA) && fdatasync(fd) < 0)
		err = -errno;
	return err;
}

static void *worker_main(void *opaque)
{
	struct aio_worker *w = opaque;
	uint64_t one = 1;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct aio_job job;

		while (!w->todo_len && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->todo_len)
			break;
		job = w->todo[w->todo_head];
		w->todo_head = (w->todo_head + 1) % w->depth;
		w->todo_len--;
		pthread_mutex_unlock(&w->lock);

		job.err = aio_worker_run_op(w->fd, w->is_bdev, w->zero_buf,
					    job.req);

		pthread_mutex_lock(&w->lock);
		w->done[w->done_len++] = job;
		if (write(w->efd, &one, sizeof(one)) < 0)
			abort(); /* an eventfd write fails only on overflow */
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* In the loop: complete what the thread finished. */
static void worker_reap(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct aio_worker *w = opaque;
	struct aio_job jobs[64];
	uint32_t n;
	uint64_t count;

	if (read(w->efd, &count, sizeof(count)) != sizeof(count))
		return;
	do {
		pthread_mutex_lock(&w->lock);
		n = w->done_len < 64 ? w->done_len : 64;
		w->done_len -= n;
		memcpy(jobs, &w->done[w->done_len], n * sizeof(*jobs));
		pthread_mutex_unlock(&w->lock);
		for (uint32_t i = 0; i < n; i++) {
			if (jobs[i].err)
				td_vbd_err(w->drv->vbd, "aio: %s: %s",
					   td_op_name(jobs[i].req->op),
					   strerror(-jobs[i].err));
			td_complete(jobs[i].req, jobs[i].err);
		}
	} while (n == 64);
}

static int worker_alloc(struct aio_worker *w)
{
	w->todo = calloc(w->depth, sizeof(*w->todo));
	w->done = calloc(w->depth, sizeof(*w->done));
	if (!w->todo || !w->done ||
	    posix_memalign(&w->zero_buf, 4096, AIO_ZERO_BUF_BYTES))
		return -ENOMEM;
	memset(w->zero_buf, 0, AIO_ZERO_BUF_BYTES);
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return w->efd < 0 ? -errno : 0;
}

static void worker_free(struct aio_worker *w)
{
	td_loop_del_fd(&w->efd_event);
	if (w->efd >= 0)
		close(w->efd);
	free(w->todo);
	free(w->done);
	free(w->zero_buf);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}

int aio_worker_start(struct td_driver *drv, int fd, bool is_bdev,
		     struct aio_worker **out)
{
	struct aio_worker *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		return -ENOMEM;
	w->drv = drv;
	w->fd = fd;
	w->is_bdev = is_bdev;
	w->depth = drv->queue_depth;
	w->efd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	err = worker_alloc(w);
	if (!err)
		err = td_loop_add_fd(drv->loop, &w->efd_event, w->efd, EPOLLIN,
				     worker_reap, w);
	if (!err)
		err = td_thread_create(&w->thread, worker_main, w);
	if (err) {
		worker_free(w);
		return err;
	}
	*out = w;
	return 0;
}

int aio_worker_queue(struct aio_worker *w, struct td_request *req)
{
	int err = 0;

	pthread_mutex_lock(&w->lock);
	if (w->todo_len + w->done_len >= w->depth) {
		err = -EBUSY; /* cannot happen: the pool is depth deep */
	} else {
		w->todo[(w->todo_head + w->todo_len) % w->depth].req = req;
		w->todo_len++;
		pthread_cond_signal(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

void aio_worker_stop(struct aio_worker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	worker_free(w);
}
