/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * block-aio.c - files and block devices through libaio with O_DIRECT.
 *
 * Chain: "aio:/path/to/file-or-device[,merge=off][,submit_batch=N]".
 *   merge=off       submit every request as its own iocb (for experiments
 *                   that measure what the sort filter adds);
 *   submit_batch=N  at most N iocbs per io_submit call (0 = the whole
 *                   pass at once; default: AIO_SUBMIT_BATCH_DISK, or
 *                   AIO_SUBMIT_BATCH_MEMORY on tmpfs and ramfs).
 *                   Linux plugs the block queue for the duration of an
 *                   io_submit of more than 2 iocbs, which holds back the
 *                   first I/Os of a large batch on some devices.
 * Options are cut off the end of the path, so a path that itself ends in
 * ",merge=..." or ",submit_batch=..." cannot be used.
 *
 * Requests submitted during one event-loop pass are batched; at the end of
 * the pass (->unplug) the batch is ordered by operation and offset, runs
 * of requests that are adjacent on disk are joined into one preadv/pwritev
 * iocb (iovec entries adjacent in memory are joined too), and everything
 * goes to the kernel in one io_submit.  Completions arrive on an eventfd
 * watched by the loop.  FLUSH is an aio fdsync iocb (Linux >= 4.18), FUA
 * writes carry RWF_DSYNC, so neither blocks the loop.
 *
 * DISCARD and WRITE_ZEROES have no aio form: they run on one worker thread
 * of the device (fallocate or BLKDISCARD/BLKZEROOUT, writing zeroes where
 * the file system or device refuses), which reports back through a second
 * eventfd.  This keeps the event loop free of calls that wait for the disk.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/aio-ring.h"
#include "drivers/aio/aio-extents.h"
#include "drivers/aio/aio-worker.h"
#include "drivers/drivers.h"

#define AIO_MAX_MERGE_BYTES (4u << 20)
/*
 * iocbs per io_submit by default.  On a disk, Linux plugs the queue while
 * io_submit takes more than 2 iocbs and dispatches them only at its end;
 * two per call never plugs (measured on a virtio disk, 4 KiB random reads
 * QD32: 0.87x fio with the whole pass per call, 0.98x with 2).  A memory
 * file system does the copy inside io_submit, so there one call per pass
 * saves syscalls (the same job on tmpfs: 18 % faster than 2 per call).
 */
#define AIO_SUBMIT_BATCH_DISK	2
#define AIO_SUBMIT_BATCH_MEMORY 0    /* no limit */
#define AIO_RETRY_US		1000 /* after io_submit said EAGAIN */

struct aio_req {
	struct iocb iocb;
	struct td_request *req;
	struct aio_req *next_in_group; /* members after the leader */
	uint64_t group_bytes;	       /* leader only: what the iocb moves */
	int merge_iovcnt;
	struct iovec merge_iov[]; /* TD_IOV_MAX entries, leader of a merge */
};

struct aio_dev {
	int fd;
	bool no_merge;
	uint32_t submit_batch; /* 0: everything at once */
	bool is_bdev;
	char *path;
	struct aio_ring ring;	/* completions reaped by the loop */
	struct aio_req **batch; /* submitted this pass, waiting for unplug */
	uint32_t nr_batch;
	struct iocb **iocbs; /* built by unplug */
	uint32_t nr_iocbs;   /* not yet accepted by io_submit */
	uint32_t iocb_start;
	struct td_timer retry;
	struct aio_worker *worker;
};

static struct aio_dev *dev_of(struct td_driver *drv)
{
	return drv->data;
}

/* --- open ----------------------------------------------------------------- */

static int aio_probe_size(struct td_driver *drv, struct aio_dev *dev)
{
	struct stat st;
	uint64_t bytes;
	int ssz = TD_SECTOR_SIZE;

	if (fstat(dev->fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		dev->is_bdev = true;
		if (ioctl(dev->fd, BLKGETSIZE64, &bytes) < 0 ||
		    ioctl(dev->fd, BLKSSZGET, &ssz) < 0)
			return -errno;
	} else if (S_ISREG(st.st_mode)) {
		bytes = (uint64_t)st.st_size;
	} else { /* td_open_file refused it already */
		return td_driver_fail(drv, -EINVAL,
				      "aio: %s is %s: give a regular file or "
				      "a block device",
				      dev->path, td_file_kind(st.st_mode));
	}
	if (bytes % (uint64_t)ssz)
		td_warn("aio: %s: size %llu is not a multiple of %d; the last "
			"%llu bytes are not served",
			dev->path, (unsigned long long)bytes, ssz,
			(unsigned long long)(bytes % (uint64_t)ssz));
	bytes -= bytes % (uint64_t)ssz;
	if (!bytes)
		return td_driver_fail(drv, -EINVAL,
				      "aio: %s is empty; size it first (e.g. "
				      "truncate -s 1G %s)",
				      dev->path, dev->path);
	drv->info.size_sectors = bytes >> TD_SECTOR_SHIFT;
	drv->info.sector_size = (uint32_t)ssz;
	return 0;
}

/*
 * The driver op (tap-ctl resize): the size of the file or block device
 * now, in whole sectors of the device's sector size.  One fstat or ioctl:
 * neither waits on the disk.
 */
static int aio_refresh_size(struct td_driver *drv, uint64_t *sectors)
{
	struct aio_dev *dev = dev_of(drv);
	struct stat st;
	uint64_t bytes;

	if (dev->is_bdev) {
		if (ioctl(dev->fd, BLKGETSIZE64, &bytes) < 0)
			return -errno;
	} else {
		if (fstat(dev->fd, &st) < 0)
			return -errno;
		bytes = (uint64_t)st.st_size;
	}
	bytes -= bytes % drv->info.sector_size;
	*sectors = bytes >> TD_SECTOR_SHIFT;
	return 0;
}

/* Opened without waiting on the file: a FIFO or a tty is refused. */
static int aio_open_fd(struct td_driver *drv, struct aio_dev *dev)
{
	mode_t mode;
	int err = td_open_file(dev->path, drv->read_only ? O_RDONLY : O_RDWR,
			       O_DIRECT, TD_OPEN_REGULAR | TD_OPEN_BLOCK_DEVICE,
			       &dev->fd, &mode);

	if (!err)
		return 0;
	dev->fd = -1;
	if (mode)
		return td_driver_fail(drv, err,
				      "aio: %s is %s, not a disk image: give "
				      "a regular file or a block device",
				      dev->path, td_file_kind(mode));
	if (err == -EINVAL)
		return td_driver_fail(drv, err,
				      "aio: cannot open %s with O_DIRECT: its "
				      "file system does not support direct I/O",
				      dev->path);
	return td_driver_fail(drv, err,
			      "aio: cannot open %s: %s; check the path in "
			      "aio:%s",
			      dev->path, strerror(-err), dev->path);
}

static void aio_event(void *opaque, struct io_event *ev);
static void aio_drained(void *opaque);

static int aio_setup_queue(struct td_driver *drv, struct aio_dev *dev)
{
	dev->batch = calloc(drv->queue_depth, sizeof(*dev->batch));
	dev->iocbs = calloc(drv->queue_depth, sizeof(*dev->iocbs));
	if (!dev->batch || !dev->iocbs)
		return -ENOMEM;
	return aio_ring_open(&dev->ring, drv->loop, drv->queue_depth, aio_event,
			     aio_drained, drv, "aio");
}

static void aio_close(struct td_driver *drv);

/* The submit batch when no option chose one: by what the fd lives on. */
static void aio_default_batch(struct aio_dev *dev)
{
	struct statfs sfs;
	bool memory = !dev->is_bdev && !fstatfs(dev->fd, &sfs) &&
		      (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC);

	if (dev->submit_batch == UINT32_MAX)
		dev->submit_batch = memory ? AIO_SUBMIT_BATCH_MEMORY
					   : AIO_SUBMIT_BATCH_DISK;
}

/* Parse one option cut off the path; returns 0, 1 (not an option), -EINVAL. */
static int aio_parse_option(struct aio_dev *dev, const char *opt)
{
	char *end;
	unsigned long n;

	if (!strcmp(opt, "merge=off") || !strcmp(opt, "merge=on")) {
		dev->no_merge = !strcmp(opt, "merge=off");
		return 0;
	}
	if (!strncmp(opt, "submit_batch=", 13)) {
		n = strtoul(opt + 13, &end, 10);
		if (opt[13] && !*end && n <= 1024) {
			dev->submit_batch = (uint32_t)n;
			return 0;
		}
	} else if (strncmp(opt, "merge=", 6)) {
		return 1;
	}
	return -EINVAL;
}

/* Cut ",merge=..." and ",submit_batch=..." off the end of the path. */
static int aio_parse_options(struct td_driver *drv, struct aio_dev *dev)
{
	char *comma;
	int err;

	dev->submit_batch = UINT32_MAX; /* not set: see aio_default_batch */
	while ((comma = strrchr(dev->path, ','))) {
		err = aio_parse_option(dev, comma + 1);
		if (err < 0)
			return td_driver_fail(drv, err,
					      "aio: bad option '%s': write "
					      "merge=on|off or submit_batch=N "
					      "(0-1024)",
					      comma + 1);
		if (err > 0)
			break;
		*comma = '\0';
	}
	return 0;
}

static int aio_open(struct td_driver *drv, const char *args)
{
	struct aio_dev *dev = dev_of(drv);
	int err;

	dev->fd = -1;
	dev->ring.efd = -1;
	if (!*args)
		return td_driver_fail(drv, -EINVAL,
				      "aio: no path: write the chain as "
				      "aio:/path/to/disk");
	dev->path = strdup(args);
	if (!dev->path)
		return -ENOMEM;
	err = aio_parse_options(drv, dev);
	if (!err)
		err = aio_open_fd(drv, dev);
	if (!err)
		err = aio_probe_size(drv, dev);
	if (!err)
		aio_default_batch(dev);
	if (!err)
		err = aio_setup_queue(drv, dev);
	if (!err)
		err = aio_worker_start(drv, dev->fd, dev->is_bdev,
				       &dev->worker);
	if (err) {
		aio_close(drv);
		return err;
	}
	drv->info.features = TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			     TD_FEAT_WRITE_ZEROES;
	drv->info.read_only = drv->read_only;
	return 0;
}

static void aio_close(struct td_driver *drv)
{
	struct aio_dev *dev = dev_of(drv);

	aio_worker_stop(dev->worker);
	dev->worker = NULL;
	td_loop_timer_cancel(&dev->retry);
	aio_ring_close(&dev->ring);
	if (dev->fd >= 0)
		close(dev->fd);
	free(dev->batch);
	free(dev->iocbs);
	free(dev->path);
	memset(dev, 0, sizeof(*dev));
}

/* --- submit and merge -------------------------------------------------------- */

static int aio_submit(struct td_driver *drv, struct td_request *req)
{
	struct aio_dev *dev = dev_of(drv);
	struct aio_req *ar = req->priv;

	switch (req->op) {
	case TD_OP_DISCARD:
	case TD_OP_WRITE_ZEROES:
		return aio_worker_queue(dev->worker, req);
	case TD_OP_READ:
	case TD_OP_WRITE:
	case TD_OP_FLUSH:
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (dev->nr_batch == drv->queue_depth)
		return -EBUSY; /* cannot happen: the pool is queue_depth deep */
	ar->req = req;
	ar->next_in_group = NULL;
	dev->batch[dev->nr_batch++] = ar;
	return 0;
}

/* Data before flush, then by offset; reads and writes apart. */
static int aio_cmp(const void *a, const void *b)
{
	const struct td_request *x = (*(struct aio_req *const *)a)->req;
	const struct td_request *y = (*(struct aio_req *const *)b)->req;

	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	if (x->sector != y->sector)
		return x->sector < y->sector ? -1 : 1;
	return 0;
}

static bool aio_can_join(const struct aio_dev *dev, const struct aio_req *lead,
			 const struct aio_req *last, const struct aio_req *next)
{
	const struct td_request *l = lead->req, *p = last->req, *n = next->req;

	return !dev->no_merge && n->op == l->op && n->op != TD_OP_FLUSH &&
	       n->flags == l->flags && p->sector + p->nr_sectors == n->sector &&
	       lead->group_bytes + td_request_bytes(n) <= AIO_MAX_MERGE_BYTES &&
	       lead->merge_iovcnt + n->iovcnt <= TD_IOV_MAX;
}

/* Append req's iovecs to the leader's, joining entries adjacent in memory. */
static void aio_append_iov(struct aio_req *lead, const struct td_request *req)
{
	for (int i = 0; i < req->iovcnt; i++) {
		struct iovec *tail =
			lead->merge_iovcnt
				? &lead->merge_iov[lead->merge_iovcnt - 1]
				: NULL;

		if (tail && (char *)tail->iov_base + tail->iov_len ==
				    (char *)req->iov[i].iov_base)
			tail->iov_len += req->iov[i].iov_len;
		else
			lead->merge_iov[lead->merge_iovcnt++] = req->iov[i];
	}
}

static void aio_prep(struct aio_dev *dev, struct aio_req *lead, bool merged)
{
	const struct td_request *req = lead->req;
	const struct iovec *iov = merged ? lead->merge_iov : req->iov;
	int iovcnt = merged ? lead->merge_iovcnt : req->iovcnt;
	long long off = (long long)(req->sector << TD_SECTOR_SHIFT);
	int rwf = (req->flags & TD_REQ_FUA) ? RWF_DSYNC : 0;

	if (req->op == TD_OP_FLUSH)
		io_prep_fdsync(&lead->iocb, dev->fd);
	else if (req->op == TD_OP_READ)
		io_prep_preadv2(&lead->iocb, dev->fd, iov, iovcnt, off, 0);
	else
		io_prep_pwritev2(&lead->iocb, dev->fd, iov, iovcnt, off, rwf);
	aio_ring_prep(&dev->ring, &lead->iocb, lead);
}

/* Turn the sorted batch into iocbs, one per run of adjacent requests. */
static void aio_build(struct td_driver *drv, struct aio_dev *dev)
{
	uint32_t i = 0;

	qsort(dev->batch, dev->nr_batch, sizeof(*dev->batch), aio_cmp);
	while (i < dev->nr_batch) {
		struct aio_req *lead = dev->batch[i++], *last = lead;
		uint32_t members = 1;

		lead->group_bytes = td_request_bytes(lead->req);
		lead->merge_iovcnt = 0;
		while (i < dev->nr_batch &&
		       aio_can_join(dev, lead, last, dev->batch[i])) {
			if (members == 1)
				aio_append_iov(lead, lead->req);
			aio_append_iov(lead, dev->batch[i]->req);
			lead->group_bytes +=
				td_request_bytes(dev->batch[i]->req);
			last->next_in_group = dev->batch[i];
			last = dev->batch[i++];
			members++;
		}
		if (members > 1) {
			td_driver_stat_add(drv, TD_STAT_BACKEND_MERGES,
					   members - 1);
			td_driver_stat_add(drv, TD_STAT_MERGED_IOV_ENTRIES,
					   (uint64_t)lead->merge_iovcnt);
		}
		aio_prep(dev, lead, members > 1);
		dev->iocbs[dev->iocb_start + dev->nr_iocbs++] = &lead->iocb;
	}
	dev->nr_batch = 0;
}

/* Complete a leader and every member of its group with err. */
static void aio_complete_group(struct aio_req *lead, int err)
{
	struct aio_req *ar = lead;

	while (ar) {
		struct aio_req *next = ar->next_in_group;

		td_complete(ar->req, err);
		ar = next;
	}
}

static void aio_retry(struct td_timer *t, void *opaque);

/* Stage timing: the kernel took the first n iocbs at now_ns. */
static void aio_stamp_submitted(struct iocb **iocbs, int n, uint64_t now_ns)
{
	for (int i = 0; i < n; i++)
		for (struct aio_req *ar = iocbs[i]->data; ar;
		     ar = ar->next_in_group)
			td_request_submitted(ar->req, now_ns);
}

/* Hand the built iocbs to the kernel; keep what it cannot take yet. */
static void aio_push(struct td_driver *drv, struct aio_dev *dev)
{
	while (dev->nr_iocbs) {
		struct iocb **first = &dev->iocbs[dev->iocb_start];
		uint32_t nr = dev->nr_iocbs;
		uint64_t now;
		int n;

		if (dev->submit_batch && nr > dev->submit_batch)
			nr = dev->submit_batch;
		n = io_submit(dev->ring.ctx, (long)nr, first);
		if (n > 0 && (now = td_driver_stages_clock(drv)))
			aio_stamp_submitted(first, n, now);

		if (n == -EAGAIN) {
			if (!td_timer_armed(&dev->retry))
				td_loop_timer_arm(drv->loop, &dev->retry,
						  AIO_RETRY_US, aio_retry, drv);
			return;
		}
		if (n < 0) {
			/* The first iocb is refused: fail it, go on. */
			td_vbd_err(drv->vbd, "aio: io_submit: %s",
				   strerror(-n));
			aio_complete_group((*first)->data, n);
			n = 1;
		} else {
			td_driver_stat_add(drv, TD_STAT_BACKEND_SUBMITS,
					   (uint64_t)n);
		}
		dev->iocb_start += (uint32_t)n;
		dev->nr_iocbs -= (uint32_t)n;
	}
	dev->iocb_start = 0;
}

static void aio_retry(struct td_timer *t, void *opaque)
{
	struct td_driver *drv = opaque;

	aio_push(drv, dev_of(drv));
}

static void aio_unplug(struct td_driver *drv)
{
	struct aio_dev *dev = dev_of(drv);

	if (!dev->nr_batch)
		return;
	/* Waiting iocbs stay in front, so the array is compacted first. */
	if (dev->iocb_start) {
		memmove(dev->iocbs, &dev->iocbs[dev->iocb_start],
			dev->nr_iocbs * sizeof(*dev->iocbs));
		dev->iocb_start = 0;
	}
	aio_build(drv, dev);
	if (!td_timer_armed(&dev->retry))
		aio_push(drv, dev);
}

/* --- completion -------------------------------------------------------------- */

static void aio_event_done(struct td_driver *drv, const struct io_event *ev)
{
	struct aio_req *lead = ev->data;
	long res = (long)ev->res;
	int err = 0;

	if (res < 0) {
		err = (int)res;
		td_vbd_err(drv->vbd, "aio: %s at sector %llu: %s",
			   td_op_name(lead->req->op),
			   (unsigned long long)lead->req->sector,
			   strerror(-err));
	} else if (lead->req->op != TD_OP_FLUSH &&
		   (uint64_t)res != lead->group_bytes) {
		/* A short transfer: the file shrank or the device failed. */
		td_vbd_err(drv->vbd,
			   "aio: short %s at sector %llu: %ld of %llu bytes",
			   td_op_name(lead->req->op),
			   (unsigned long long)lead->req->sector, res,
			   (unsigned long long)lead->group_bytes);
		err = -EIO;
	}
	aio_complete_group(lead, err);
}

static void aio_event(void *opaque, struct io_event *ev)
{
	aio_event_done(opaque, ev);
}

/* Room in the kernel queue again: push what waited. */
static void aio_drained(void *opaque)
{
	struct td_driver *drv = opaque;
	struct aio_dev *dev = dev_of(drv);

	if (dev->nr_iocbs && td_timer_armed(&dev->retry)) {
		td_loop_timer_cancel(&dev->retry);
		aio_push(drv, dev);
	}
}

/*
 * base:allocation: a file's holes (aio-extents.c); a block device says
 * everything is allocated data, which is never wrong.
 */
static int aio_block_status(struct td_driver *drv, const char *ctx,
			    uint64_t sector, uint64_t nr_sectors,
			    struct td_extent *ext, unsigned int *nr)
{
	struct aio_dev *dev = dev_of(drv);

	if (strcmp(ctx, TD_CTX_BASE_ALLOCATION))
		return -ENOENT;
	if (dev->is_bdev) {
		ext[0].nr_sectors = nr_sectors;
		ext[0].flags = 0;
		*nr = 1;
		return 0;
	}
	return aio_file_extents(dev->fd, sector, nr_sectors, ext, nr);
}

const struct td_driver_ops td_aio_ops = {
	.name = "aio",
	.dev_size = sizeof(struct aio_dev),
	.req_size = sizeof(struct aio_req) + TD_IOV_MAX * sizeof(struct iovec),
	.open = aio_open,
	.refresh_size = aio_refresh_size,
	.close = aio_close,
	.submit = aio_submit,
	.unplug = aio_unplug,
	.block_status = aio_block_status,
};
