/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fsync-async.c - an fdatasync the event loop does not wait for
 * (fsync-async.h).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "tapdisk/fsync-async.h"

bool td_fsync_in_place;

static void fsync_finish(struct td_fsync *f, int err)
{
	f->busy = false;
	f->cb(f, err, f->opaque);
}

static void fsync_reaped(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct td_fsync *f = opaque;
	struct io_event ev;
	struct timespec now = {0, 0};
	uint64_t count;
	int n;

	(void)fde;
	(void)events;
	if (read(f->efd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		td_err("fsync: reading its eventfd: %s", strerror(errno));
	if (!f->busy)
		return;
	n = io_getevents(f->ctx, 0, 1, &ev, &now);
	if (n < 0)
		td_err("fsync: io_getevents: %s", strerror(-n));
	if (n == 1)
		fsync_finish(f, (long)ev.res < 0 ? (int)(long)ev.res : 0);
}

static void fsync_done_in_place(struct td_defer *d, void *opaque)
{
	struct td_fsync *f = opaque;

	(void)d;
	fsync_finish(f, f->err);
}

int td_fsync_open(struct td_fsync *f, struct td_loop *loop)
{
	memset(f, 0, sizeof(*f));
	f->loop = loop;
	f->efd = -1;
	if (td_fsync_in_place || io_setup(1, &f->ctx) < 0) {
		f->ctx = 0;
		return 0;
	}
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->efd < 0 || td_loop_add_fd(loop, &f->efd_event, f->efd, EPOLLIN,
					 fsync_reaped, f)) {
		td_fsync_close(f);
		f->loop = loop;
	}
	return 0;
}

int td_fsync_start(struct td_fsync *f, int fd, td_fsync_cb cb, void *opaque)
{
	struct iocb *list[1] = {&f->iocb};

	if (f->busy)
		return -EBUSY;
	f->busy = true;
	f->cb = cb;
	f->opaque = opaque;
	if (f->ctx) {
		io_prep_fdsync(&f->iocb, fd);
		io_set_eventfd(&f->iocb, f->efd);
		if (io_submit(f->ctx, 1, list) == 1)
			return 0;
		/* EINVAL: a kernel without AIO fsync; do it here. */
	}
	f->err = fdatasync(fd) ? -errno : 0;
	td_loop_defer(f->loop, &f->done_defer, fsync_done_in_place, f);
	return 0;
}

void td_fsync_close(struct td_fsync *f)
{
	if (f->loop)
		td_loop_defer_cancel(f->loop, &f->done_defer);
	td_loop_del_fd(&f->efd_event);
	if (f->efd >= 0)
		close(f->efd);
	f->efd = -1;
	if (f->ctx)
		io_destroy(f->ctx);
	f->ctx = 0;
	f->busy = false;
}
