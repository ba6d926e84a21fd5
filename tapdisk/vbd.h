/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vbd.h - a virtual block device: frontends feed it I/O, a driver chain
 * serves it.
 *
 * Life of an I/O (struct td_vbd_io, owned by the frontend):
 *   td_vbd_submit validates it (op known and supported, range inside the
 *   disk without overflow, iovecs matching the length), splits it at the
 *   chain's boundary, its max I/O size and the iovec capacity into requests
 *   from the top driver's pool, submits them, and returns 0.  When every
 *   piece has completed, io->cb(io, err) runs once, from the event loop,
 *   never inside td_vbd_submit; err is the first error of any piece.
 *   When td_vbd_submit returns -errno, io->cb never runs.
 * When the pool is empty the rest of the I/O waits, in order, for
 * requests to come back (back-pressure, no allocation).
 */
#ifndef TAPSTRIPE_VBD_H
#define TAPSTRIPE_VBD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/log.h"
#include "common/loop.h"
#include "tapdisk/driver.h"
#include "tapdisk/stages.h"

#define TD_VBD_DEFAULT_MAX_INFLIGHT 256
#define TD_VBD_DEFAULT_MAX_IO_BYTES (4u << 20)
#define TD_VBD_NAME_MAX		    64

struct td_vbd;
struct td_vbd_io;

typedef void (*td_vbd_io_cb)(struct td_vbd_io *io, int err);

struct td_vbd_io {
	enum td_op op;
	uint32_t flags; /* TD_REQ_* */
	uint64_t sector;
	uint32_t nr_sectors;
	const struct iovec *iov; /* READ/WRITE only; must outlive the I/O */
	int iovcnt;
	/* Segments as the frontend counts them (blkif), 0: use iovcnt. */
	uint32_t nr_segments;
	td_vbd_io_cb cb;
	void *opaque;

	/* --- core private ------------------------------------------------ */
	TAILQ_ENTRY(td_vbd_io) link;
	uint64_t next_sector; /* first sector not yet given to a request */
	int iov_idx;	      /* where the next piece's data begins */
	size_t iov_off;
	bool started;	  /* counted in the vbd's active I/O */
	uint32_t pending; /* pieces submitted and not yet completed */
	int error;
	uint64_t start_ns;
	TAILQ_ENTRY(td_vbd_io) held_link; /* held by a snapshot job */
	/* A snapshot job's own I/O (vbd_submit_internal): not in the
	 * disk's statistics, never held by the job's gate. */
	bool internal;
	/* Stage timing (stages.h).  The frontend may set
	 * stamp_ns[TD_STAMP_SEEN] before td_vbd_submit (0: not known) and
	 * then answer with td_vbd_stages_respond; the core fills the rest. */
	uint64_t stamp_ns[TD_STAMP_COUNT];
	bool timed;	  /* stamped: timing was on when it started */
	bool fe_accounts; /* the frontend calls td_vbd_stages_respond */
};

#define TD_VBD_REASON_MAX 512

/* Why td_vbd_open failed, for the first line the caller prints. */
struct td_vbd_open_error {
	/* One line: a driver's td_driver_fail, or what is wrong with the
	 * chain's text; "" when nobody said (only the errno is known). */
	char reason[TD_VBD_REASON_MAX];
	bool syntax; /* the chain's text itself is malformed */
};

struct td_vbd_params {
	const char *name;  /* for logs and stats, e.g. "vbd-1" */
	const char *chain; /* "sort|aio:/srv/disk.img" */
	bool read_only;
	uint32_t max_inflight; /* requests per chain layer; 0: default */
	uint32_t max_io_bytes; /* split size; 0: default */
	struct td_vbd_open_error *error; /* filled in on failure; may be NULL */
};

/*
 * Open the chain, bottom driver first.  table is the NULL-terminated list
 * of drivers that chains may name (the daemon's main passes it in).
 * Returns 0 and *out, or -errno having logged why (unknown driver, bad
 * arguments, a driver's open failing) and said it in params->error.
 */
int td_vbd_open(struct td_loop *loop, const struct td_driver_ops *const *table,
		const struct td_vbd_params *params, struct td_vbd **out);

/*
 * Close the chain.  Returns -EBUSY while I/O is in flight (pause first) or
 * when called from inside an I/O completion callback (defer the close with
 * td_loop_defer: the vbd still uses its request pool after the callback).
 */
int td_vbd_close(struct td_vbd *vbd);

int td_vbd_submit(struct td_vbd *vbd, struct td_vbd_io *io);

/* What the chain exposes: size, features, read-only. */
const struct td_disk_info *td_vbd_get_info(const struct td_vbd *vbd);
const char *td_vbd_chain(const struct td_vbd *vbd);
struct td_loop *td_vbd_loop(const struct td_vbd *vbd);

/*
 * Pause: hold every new I/O, let the ones already started finish, then
 * call cb(vbd, opaque) once from the event loop.  A second pause while
 * paused or pausing returns -EALREADY.  Resume releases the held I/O in
 * order.
 */
typedef void (*td_vbd_drained_cb)(struct td_vbd *vbd, void *opaque);
int td_vbd_pause(struct td_vbd *vbd, td_vbd_drained_cb cb, void *opaque);
int td_vbd_resume(struct td_vbd *vbd);
bool td_vbd_paused(const struct td_vbd *vbd); /* paused and drained */

/* --- statistics ----------------------------------------------------------- */

/* Segments-per-request histogram: bucket i holds counts in (2^(i-1), 2^i]. */
#define TD_SEG_BUCKETS 13 /* 1, 2, 3-4, ..., 2049-4096 */
/* Latency histogram: 8 linear sub-buckets per power of two of µs. */
#define TD_LAT_SUB     8
#define TD_LAT_BUCKETS (32 * TD_LAT_SUB)

/* Most driver counters (ops->counters) one table may declare, all told. */
#define TD_DRIVER_COUNTERS_MAX 16

struct td_driver_counter_value {
	const char *name; /* the td_driver_counter's */
	uint64_t value;
};

struct td_vbd_stats {
	uint64_t reqs[TD_OP_COUNT];   /* I/Os completed, by op */
	uint64_t bytes[TD_OP_COUNT];  /* bytes they covered */
	uint64_t errors[TD_OP_COUNT]; /* I/Os completed with an error */
	uint64_t pieces;	      /* requests the I/Os were split into */
	uint64_t inflight;	      /* I/Os accepted and not completed */
	uint64_t waits;		      /* times an I/O waited for the pool */
	uint64_t seg_hist[TD_SEG_BUCKETS];
	uint64_t counters[TD_STAT_COUNT];  /* reported by drivers */
	uint64_t lat_hist[TD_LAT_BUCKETS]; /* all ops, in µs */
	/* The drivers' own counters, those of the whole driver table. */
	struct td_driver_counter_value driver_counters[TD_DRIVER_COUNTERS_MAX];
	unsigned int nr_driver_counters;
};

void td_vbd_get_stats(const struct td_vbd *vbd, struct td_vbd_stats *out);

/* Names of enum td_stat and enum td_op, for output. */
const char *td_stat_name(enum td_stat stat);

/* A driver counter of a snapshot by name; 0 when no driver declares it. */
uint64_t td_vbd_driver_counter(const struct td_vbd_stats *s, const char *name);

/*
 * The report_json / report_text output of every driver of the chain that
 * has one, top first: an object "drivers" of objects named after each
 * driver, or a text section per driver.
 */
void td_vbd_report_drivers_json(struct td_vbd *vbd, struct td_json *j);
void td_vbd_report_drivers_text(struct td_vbd *vbd, struct td_strbuf *sb);
/* Each driver's report_metrics, with labels (e.g. disk="d1"). */
void td_vbd_report_drivers_metrics(struct td_vbd *vbd, const char *labels,
				   struct td_strbuf *sb);

/* The same for the drivers' info_json / info_text (tap-ctl info). */
void td_vbd_info_drivers_json(struct td_vbd *vbd, struct td_json *j);
void td_vbd_info_drivers_text(struct td_vbd *vbd, struct td_strbuf *sb);

/*
 * Pass a control command to the driver of the chain named name (the top
 * one when the chain names it twice): its ->control's result, or -ENOENT
 * when the chain has no such driver and -EOPNOTSUPP when it takes no
 * commands, with a one-line reason in out.
 */
int td_vbd_driver_control(struct td_vbd *vbd, const char *name, int argc,
			  char **argv, struct td_strbuf *out);

/*
 * The size check of an online grow: 0 when new_sectors >= old_sectors
 * (equal: nothing to do), -EINVAL with the reason in why for a shrink,
 * which is always refused (data beyond the new end would vanish under
 * the frontends).
 */
int td_vbd_check_grow(const char *who, uint64_t old_sectors,
		      uint64_t new_sectors, struct td_strbuf *why);

/*
 * Online grow (tap-ctl resize): every driver of the chain, bottom first,
 * reads its size again (driver op refresh_size); a driver without the op
 * refuses with -EOPNOTSUPP, a shrink with -EINVAL, both with a one-line
 * reason in why and nothing changed.  Otherwise every layer and the vbd
 * take the new size at once, in the event loop: I/O in flight stays
 * within the old end, and I/O beyond it was refused (-ERANGE) until now.
 * *old_sectors and *new_sectors receive the sizes.
 */
int td_vbd_resize(struct td_vbd *vbd, uint64_t *old_sectors,
		  uint64_t *new_sectors, struct td_strbuf *why);

/*
 * Block status of the range from sector on (at most nr_sectors, inside
 * the disk, else -ERANGE) in the metadata context ctx, as extents (see
 * driver op block_status; *nr: room in, filled out): the first driver of
 * the chain, top first, that knows ctx answers.  base:allocation always
 * has an answer: when no driver knows it, one extent of allocated data
 * (flags 0) over the whole range.  -ENOENT: no driver knows ctx.
 */
int td_vbd_block_status(struct td_vbd *vbd, const char *ctx, uint64_t sector,
			uint64_t nr_sectors, struct td_extent *ext,
			unsigned int *nr);

/*
 * Every metadata context the chain answers: base:allocation first, then
 * each driver's (list_contexts), top first, names given twice once.
 */
void td_vbd_list_contexts(struct td_vbd *vbd,
			  void (*add)(const char *name, void *opaque),
			  void *opaque);

/* --- stage timing (stages.c, tap-ctl stages) ------------------------------ */

/* Switch timing on or off (the sums stay), or clear the sums. */
void td_vbd_stages_set(struct td_vbd *vbd, bool on);
void td_vbd_stages_reset(struct td_vbd *vbd);
void td_vbd_get_stages(const struct td_vbd *vbd, struct td_vbd_stages *out);

/*
 * For frontends.  td_vbd_stages_seen: the time to put in
 * stamp_ns[TD_STAMP_SEEN] as a request is read off the ring (0 while
 * timing is off), counting the pass's wake-up.  td_vbd_stages_clock: the
 * time now, or 0 while off.  td_vbd_stages_respond: account io (when it
 * was timed, once: it clears io->timed) with respond_ns as its RESPOND
 * stamp, counting it in nr_by_op[op]; td_vbd_stages_notified then adds
 * notify_ns to the NOTIFY stage of those I/Os.
 */
uint64_t td_vbd_stages_seen(struct td_vbd *vbd);
uint64_t td_vbd_stages_clock(const struct td_vbd *vbd);
void td_vbd_stages_respond(struct td_vbd *vbd, struct td_vbd_io *io,
			   uint64_t respond_ns, uint32_t *nr_by_op);
void td_vbd_stages_notified(struct td_vbd *vbd, const uint32_t *nr_by_op,
			    uint64_t notify_ns);

/* tap-ctl stages' output, and the "stages" object of stats json; stats'
 * text shows the stages when shown (on, or something timed). */
bool td_vbd_stages_shown(const struct td_vbd *vbd);
void td_vbd_report_stages_json(const struct td_vbd *vbd, struct td_json *j);
void td_vbd_report_stages_text(const struct td_vbd *vbd, struct td_strbuf *sb);

/* Histogram helpers (stats.c). */
unsigned int td_seg_bucket(uint32_t nr_segments);
uint32_t td_seg_bucket_max(unsigned int bucket);
/* The fewest segments bucket counts: 1, or one more than the last one's max. */
uint32_t td_seg_bucket_min(unsigned int bucket);
unsigned int td_lat_bucket(uint64_t us);
uint64_t td_lat_bucket_max_us(unsigned int bucket);
/* The p-th percentile (0 < p <= 100) of a latency histogram, in µs. */
uint64_t td_lat_percentile(const uint64_t *hist, double p);

#endif
