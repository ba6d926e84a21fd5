/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * driver.h - the block driver interface of tapdisk.
 *
 * A vbd serves I/O through a chain of drivers written as a string,
 * top first: "aio:/srv/disk.img", "null:size=1G", "sort|aio:/srv/disk.img".
 * Every driver but the last is a filter (TD_DRV_FILTER) and forwards
 * requests to the driver below it with td_forward().
 *
 * The core owns memory.  A driver declares the size of its per-device state
 * (dev_size, allocated zeroed at open and freed after close) and of its
 * per-request state (req_size, reached through td_request->priv, not
 * zeroed); requests come from pools preallocated when the vbd opens, so
 * nothing is allocated per I/O.
 *
 * The core guarantees, before calling ->submit:
 *   - the range lies inside the disk (no overflow) and does not cross a
 *     multiple of info.boundary_sectors; nr_sectors <= info.max_io_sectors;
 *   - READ and WRITE carry iovecs whose lengths are multiples of
 *     TD_SECTOR_SIZE and add up to nr_sectors * TD_SECTOR_SIZE, at most
 *     td_request_iov_cap() of them; other ops carry none;
 *   - offsets and lengths are multiples of the top driver's
 *     info.sector_size (a 4 KiB-sector device gets 4 KiB-aligned I/O);
 *   - the op is one the driver announced in info.features (READ and WRITE
 *     always), and no write reaches a read-only disk.
 * Everything runs in the single event-loop thread.
 */
#ifndef TAPSTRIPE_DRIVER_H
#define TAPSTRIPE_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/json.h"
#include "common/loop.h"

#define TD_SECTOR_SHIFT 9
#define TD_SECTOR_SIZE	(1u << TD_SECTOR_SHIFT)

/* Most iovec entries one request may carry (Linux's IOV_MAX). */
#define TD_IOV_MAX 1024

enum td_op {
	TD_OP_READ = 0,
	TD_OP_WRITE,
	TD_OP_FLUSH,	    /* make every completed write durable */
	TD_OP_DISCARD,	    /* the range may read back as anything */
	TD_OP_WRITE_ZEROES, /* the range reads back as zeroes */
	TD_OP_COUNT
};

/* td_request.flags */
#define TD_REQ_FUA     (1u << 0) /* WRITE/WRITE_ZEROES durable on completion */
#define TD_REQ_NO_HOLE (1u << 1) /* WRITE_ZEROES must allocate, not punch */

/* td_disk_info.features */
#define TD_FEAT_FLUSH	     (1u << 0)
#define TD_FEAT_FUA	     (1u << 1)
#define TD_FEAT_DISCARD	     (1u << 2)
#define TD_FEAT_WRITE_ZEROES (1u << 3)

struct td_disk_info {
	uint64_t size_sectors;
	/* Alignment the backend needs for offsets, lengths and buffers. */
	uint32_t sector_size;
	uint32_t features;	   /* TD_FEAT_* */
	uint64_t boundary_sectors; /* 0: none */
	uint32_t max_io_sectors;   /* 0: no limit of its own */
	bool read_only;
};

/*
 * Block status (NBD_CMD_BLOCK_STATUS): a range described in one metadata
 * context as extents, each a length and the context's flags.
 */
#define TD_CTX_BASE_ALLOCATION	   "base:allocation"
#define TD_CTX_DIRTY_BITMAP_PREFIX "qemu:dirty-bitmap:"
#define TD_CTX_NAME_MAX		   256

/* base:allocation (NBD's NBD_STATE_HOLE and NBD_STATE_ZERO) */
#define TD_EXTENT_HOLE (1u << 0) /* not allocated */
#define TD_EXTENT_ZERO (1u << 1) /* reads as zeroes */
/* qemu:dirty-bitmap:NAME (NBD's 1 = dirty) */
#define TD_EXTENT_DIRTY (1u << 0) /* written since the bitmap was made */

struct td_extent {
	uint64_t nr_sectors;
	uint32_t flags;
};

struct td_vbd;
struct td_driver;
struct td_request;
struct td_vbd_io;

/* One driver instance in one vbd's chain.  Owned by the core. */
struct td_driver {
	const struct td_driver_ops *ops;
	void *data; /* ops->dev_size bytes, zeroed */
	struct td_vbd *vbd;
	struct td_loop *loop;
	struct td_driver *lower; /* the next driver down; NULL at the bottom */
	unsigned int layer;	 /* 0 = top of the chain */
	uint32_t queue_depth;	 /* most requests it can hold at once */
	bool read_only;		 /* the vbd was opened read-only */
	/*
	 * What this driver exposes.  ->open fills it in; for a filter it
	 * holds a copy of the lower driver's info when ->open is called.
	 */
	struct td_disk_info info;
};

typedef void (*td_request_cb)(struct td_request *req, int err, void *opaque);

struct td_request {
	enum td_op op;
	uint32_t flags; /* TD_REQ_* */
	uint64_t sector;
	uint32_t nr_sectors;
	struct iovec *iov;
	int iovcnt;
	void *priv; /* the serving driver's per-request state (req_size) */

	/* --- owned by the core; drivers read, never write ------------- */
	struct td_vbd *vbd; /* the vbd whose pool holds it */
	void *pool;
	struct td_driver *drv; /* the driver this request is queued to */
	td_request_cb cb;      /* who gets the completion */
	void *cb_opaque;
	int error;
	bool completing;	 /* td_complete was called */
	struct td_request *next; /* free list / done list */
	struct iovec *iov_slab;	 /* td_request_iov_cap() entries */
	/* The vbd I/O whose stages are timed (tapdisk/stages.h), or NULL. */
	struct td_vbd_io *timed_io;
};

/*
 * One of a driver's own counters: a uint64_t in its per-device state
 * (dev_size), which the driver updates and the core reads for tap-ctl
 * stats.
 */
struct td_driver_counter {
	const char *name; /* its key in tap-ctl stats, e.g. "sort_in" */
	size_t offset;	  /* offsetof(the per-device state, the counter) */
	bool max;	  /* a largest value: instances take the maximum */
};

struct td_driver_ops {
	const char *name; /* as written in chains: "aio", "null", "sort" */
	unsigned int flags;
#define TD_DRV_FILTER (1u << 0) /* must have a lower driver */
	size_t dev_size;	/* bytes of per-device state, or 0 */
	size_t req_size;	/* bytes of per-request state, or 0 */

	/*
	 * Required.  Open the device described by args (the text after
	 * "name:" in the chain, "" when none) and fill in drv->info.  A
	 * filter's lower driver is already open.  Returns 0 or -errno,
	 * having said why with td_driver_fail (the reason tapdisk reports
	 * first: name the file, the line, what to do); on error ->close is
	 * not called.  Runs before the event loop: an open that may block
	 * (a FIFO, a tty) uses td_open_file (common/util.h).
	 */
	int (*open)(struct td_driver *drv, const char *args);

	/*
	 * Required.  Release everything.  Called with no request in flight;
	 * a filter's lower driver is closed after it.
	 */
	void (*close)(struct td_driver *drv);

	/*
	 * Required.  Start req.  Returns 0: td_complete(req, err) will be
	 * called exactly once, possibly from inside this call (the core
	 * defers the completion to its caller).  Returns -errno: the request
	 * was not started and td_complete must not be called.
	 */
	int (*submit)(struct td_driver *drv, struct td_request *req);

	/*
	 * Optional.  Called at the end of every event-loop pass in which
	 * ->submit was called, top of the chain first: release what was
	 * batched (io_submit, a sorted plug).
	 */
	void (*unplug)(struct td_driver *drv);

	/*
	 * Optional.  The driver's own state and counters for tap-ctl stats:
	 * report_json adds members to the JSON object that is open (the core
	 * has opened one named after the driver), report_text appends lines
	 * of text (the core prints a heading first).  Neither may fail: on
	 * memory exhaustion the buffers drop output and report it.
	 */
	void (*report_json)(struct td_driver *drv, struct td_json *j);
	void (*report_text)(struct td_driver *drv, struct td_strbuf *sb);

	/*
	 * Optional.  The driver's gauges for tap-ctl metrics, in the
	 * Prometheus text format: whole families ("# HELP", "# TYPE", then
	 * samples), metric names tapstripe_<driver>_*, every sample carrying
	 * labels (the disk's, e.g. disk="d1", escaped already) first.  Run in
	 * the event loop; may not fail (see report_json).
	 */
	void (*report_metrics)(struct td_driver *drv, const char *labels,
			       struct td_strbuf *sb);

	/*
	 * Optional.  The few facts tap-ctl info shows next to the disk's
	 * size (the stripe driver's lease): info_json adds members to the
	 * JSON object that is open (named after the driver, inside
	 * "drivers"), info_text appends "key: value" lines.  Run in the
	 * event loop; neither may fail.
	 */
	void (*info_json)(struct td_driver *drv, struct td_json *j);
	void (*info_text)(struct td_driver *drv, struct td_strbuf *sb);

	/*
	 * Optional (nr_counters 0).  The driver's own counters, listed among
	 * the vbd's "driver counters" of tap-ctl stats ("counters" in
	 * --json), between backend_merges and merged_iov_entries in the
	 * order of the driver table.  The core reads them in the event loop
	 * when stats are asked for; instances of one driver in a chain add up
	 * (or take the maximum).  Every driver of the table given to
	 * td_vbd_open shows its counters for every vbd, at 0 when the chain
	 * does not hold it, so that the keys do not depend on the chain.
	 */
	const struct td_driver_counter *counters;
	unsigned int nr_counters;

	/*
	 * Optional.  A command for this driver from the control socket
	 * ("driver NAME WORD...", tap-ctl driver): argv holds the words
	 * after the driver's name, argc >= 1.  Runs in the event loop and
	 * must not block: long work (a resync) is started here and shows its
	 * progress through report_json/report_text.  Returns 0 with the
	 * reply text in out, or -errno with a one-line reason in out (sent
	 * as the ERR message).  NULL: the core answers -EOPNOTSUPP.
	 */
	int (*control)(struct td_driver *drv, int argc, char **argv,
		       struct td_strbuf *out);

	/*
	 * Optional.  Reads again the size of what the driver serves (a
	 * backing file made larger, a block device grown) into *sectors
	 * without applying it; td_vbd_resize checks it (grow only) and then
	 * sets info.size_sectors.  A filter is called with its lower
	 * driver's new size in *sectors and leaves the size it exposes.
	 * Event-loop context; must not block.  NULL: the driver cannot
	 * change size and td_vbd_resize answers -EOPNOTSUPP.
	 */
	int (*refresh_size)(struct td_driver *drv, uint64_t *sectors);

	/*
	 * Optional.  Block status in the metadata context ctx (e.g.
	 * "base:allocation", "qemu:dirty-bitmap:NAME"): describe the range
	 * from sector on, at most nr_sectors long, as extents in order: *nr
	 * holds the room in ext (>= 1) and receives how many were filled
	 * (>= 1 on success); they may cover less than nr_sectors, never
	 * more.  Returns 0, -ENOENT when the driver has no context ctx (the
	 * core then asks the driver below it), or -errno.  Event-loop
	 * context, synchronous and short: lseek(SEEK_DATA) on a local file
	 * is fine, nothing that waits on the network.  The core has checked
	 * that the range lies inside the disk.
	 */
	int (*block_status)(struct td_driver *drv, const char *ctx,
			    uint64_t sector, uint64_t nr_sectors,
			    struct td_extent *ext, unsigned int *nr);

	/*
	 * Optional.  The metadata contexts the driver answers besides
	 * base:allocation (for NBD_OPT_LIST_META_CONTEXT): add(name, opaque)
	 * once for each.
	 */
	void (*list_contexts)(struct td_driver *drv,
			      void (*add)(const char *name, void *opaque),
			      void *opaque);
};

/* Complete a request given to ->submit.  Exactly once; err 0 or -errno. */
void td_complete(struct td_request *req, int err);

/*
 * Stage timing (tap-ctl stages): a driver that hands requests to the
 * kernel calls this for each, with the time its io_submit (or the like)
 * returned, when req->timed_io is set.  Others need not: their kernel
 * time then counts in the DISK stage.
 */
void td_request_submitted(struct td_request *req, uint64_t now_ns);

/* The time now while stage timing is on, else 0 (one test). */
uint64_t td_driver_stages_clock(const struct td_driver *drv);

/* Capacity of td_request.iov_slab (the iovecs a request may carry). */
unsigned int td_request_iov_cap(void);

/*
 * For filters: take a request from the lower driver's pool.  Returns NULL
 * when the pool is empty: a filter never holds more forwarded requests
 * than it holds requests of its own, so with the pools sized alike this
 * cannot happen to a filter that forwards at most one request per request.
 * The request's iov points at its own slab; the filter fills it or points
 * it at memory that outlives the request.
 */
struct td_request *td_request_get(struct td_driver *filter);

/* Return a request taken with td_request_get and never forwarded. */
void td_request_put(struct td_request *req);

/*
 * For filters: submit req to filter->lower.  cb(req, err, opaque) runs
 * exactly once, always from the event loop and never inside this call;
 * the request goes back to its pool when cb returns.
 */
void td_forward(struct td_driver *filter, struct td_request *req,
		td_request_cb cb, void *opaque);

/*
 * The vbd's own counters, which any driver adds to (see vbd.h,
 * td_vbd_stats): what reached the backend and what was merged on the way,
 * whichever drivers did it.  A driver's own counters are its
 * ops->counters.
 */
enum td_stat {
	TD_STAT_BACKEND_SUBMITS = 0, /* I/Os handed to the backend */
	TD_STAT_BACKEND_MERGES,	     /* requests joined to a neighbour's I/O */
	TD_STAT_MERGED_IOV_ENTRIES,  /* iovec entries carried by merged I/Os */
	TD_STAT_COUNT
};

void td_driver_stat_add(struct td_driver *drv, enum td_stat stat, uint64_t n);

/*
 * For ->open: log why the open fails (an error, as td_err) and keep the
 * text as the reason td_vbd_open reports (td_vbd_params.error), the first
 * line tapdisk prints.  One line, the driver's name first, naming the
 * file (and the line of a file) and what to do.  The first reason of an
 * open is kept.  Returns err (< 0), for "return td_driver_fail(...)".
 */
#define td_driver_fail(drv, err, ...) \
	td_driver_fail_at(__func__, drv, err, __VA_ARGS__)
int td_driver_fail_at(const char *func, struct td_driver *drv, int err,
		      const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * For report_metrics: one whole family of one sample, "# HELP", "# TYPE"
 * (type "gauge" or "counter") and name{labels} value.
 */
void td_driver_metric(struct td_strbuf *sb, const char *labels,
		      const char *name, const char *type, const char *help,
		      uint64_t value);

/* For drivers' log messages (td_vbd_err & co. in log.h) and output. */
const char *td_vbd_name(const struct td_vbd *vbd);
struct td_ratelimit *td_vbd_ratelimit(struct td_vbd *vbd);
const char *td_op_name(enum td_op op);

/* Bytes of a request's data (nr_sectors * TD_SECTOR_SIZE). */
static inline uint64_t td_request_bytes(const struct td_request *req)
{
	return (uint64_t)req->nr_sectors << TD_SECTOR_SHIFT;
}

#endif
