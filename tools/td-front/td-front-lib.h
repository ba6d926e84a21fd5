/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-lib.h - a blkif frontend over tapdisk's shm transport, as a
 * library: td-front is built on it, td-bench will be.
 *
 * It drives a shm vbd the way Linux's blkfront drives a Xen one:
 *   - it negotiates like blkfront reads xenbus: the ring order and the
 *     segments per request it asks for are cut to the backend's
 *     max-ring-page-order and feature-max-indirect-segments;
 *   - an I/O longer than max_segments pages is split into requests of
 *     max_segments pages (the block layer's max_segments /
 *     max_hw_sectors); a request of at most 11 segments is a direct
 *     BLKIF_OP_READ/WRITE, a longer one BLKIF_OP_INDIRECT (blkfront's
 *     blkif_queue_rw_req), so max_segments 11 means direct requests only;
 *   - requests queued between two tdf_kick() calls are pushed together,
 *     with one notification at most (RING_PUSH_REQUESTS_AND_CHECK_NOTIFY);
 *   - responses are taken until RING_FINAL_CHECK_FOR_RESPONSES finds no
 *     more, so the backend notifies only when there is something new.
 *
 * Several rings (tdf_config.queues) are several independent instances
 * of all this, each with its own pool; an I/O names its ring.
 *
 * Memory: each data pool the backend sends is cut in two: pages
 * [0, data_pages) are the caller's I/O buffers (tdf_page), the rest holds
 * each ring slot's indirect descriptor pages.  Every buffer starts on a
 * page: segment i of an I/O is page io->page + i.
 *
 * The library is single-threaded and blocking only where it says so
 * (tdf_open, tdf_wait).  It never prints: functions return 0 or -errno,
 * and tdf_open explains a failure in *why.  Input from the backend (its
 * messages, the responses) is checked like any other input.
 */
#ifndef TAPSTRIPE_TD_FRONT_LIB_H
#define TAPSTRIPE_TD_FRONT_LIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "frontends/shm/shm-proto.h"

#define TDF_PAGE_SIZE		 SHM_PAGE_SIZE
#define TDF_SECTOR_SIZE		 512u
#define TDF_DIRECT_SEGMENTS	 11 /* BLKIF_MAX_SEGMENTS_PER_REQUEST */
#define TDF_MAX_SEGMENTS	 SHM_MAX_INDIRECT_SEGMENTS
#define TDF_DEFAULT_MAX_SEGMENTS 32 /* blkfront's max_indirect_segments */
#define TDF_DEFAULT_TIMEOUT_MS	 10000
#define TDF_WHY_MAX		 256

struct tdf_config {
	const char *path;      /* the vbd's shm socket */
	uint32_t ring_order;   /* asked for; cut to the backend's maximum */
	uint32_t max_segments; /* 11..4096 (0: 32); cut to the backend's */
	uint32_t data_pages;   /* pages of I/O buffers the caller needs */
	int timeout_ms;	       /* for the negotiation; 0: default */
	/* Rings wanted (multi-queue-num-queues), 1..SHM_MAX_QUEUES (0: 1);
	 * cut to the backend's multi-queue-max-queues, as blkfront cuts
	 * its one ring per vCPU.  Each ring has data_pages of its own. */
	uint32_t queues;

	/*
	 * tdf_wait polls the response ring this long (microseconds) before
	 * it sleeps on the notification, leaving rsp_event unarmed so that
	 * the backend need not notify; 0: never (blkfront's way).
	 */
	uint32_t poll_us;
};

/* What was negotiated. */
struct tdf_info {
	struct shm_backend_msg backend; /* the backend's offer, as sent */
	uint64_t size_bytes;
	uint32_t ring_order;
	uint32_t ring_slots;
	uint32_t max_segments;	 /* per request; 11: direct only */
	uint32_t data_pages;	 /* the caller's */
	uint32_t indirect_pages; /* the library's, after the caller's */
	pid_t backend_pid;	 /* from SO_PEERCRED; 0 if unknown */
	uint32_t nr_queues;	 /* rings set up, each with the above */
};

enum tdf_op {
	TDF_OP_READ,
	TDF_OP_WRITE,
	TDF_OP_FLUSH,	/* BLKIF_OP_FLUSH_DISKCACHE, no data */
	TDF_OP_DISCARD, /* BLKIF_OP_DISCARD of len bytes */
};

struct tdf_io;
/* err: 0, -EIO (BLKIF_RSP_ERROR) or -EOPNOTSUPP; first error wins. */
typedef void (*tdf_io_cb)(struct tdf_io *io, int err);

/* One I/O, owned by the caller until its callback. */
struct tdf_io {
	enum tdf_op op;
	uint64_t offset; /* bytes, a multiple of the sector size */
	uint32_t len;	 /* bytes, likewise; 0 for FLUSH */
	uint32_t page;	 /* READ/WRITE: the buffer's first data page */
	uint32_t queue;	 /* the ring (< nr_queues) and the pool of page */
	tdf_io_cb cb;
	void *opaque;

	/* --- private ----------------------------------------------------- */
	TAILQ_ENTRY(tdf_io) link;
	uint32_t issued;   /* bytes put into requests */
	uint32_t requests; /* requests made */
	uint32_t pending;  /* requests without response */
	int error;
};

struct tdf_stats {
	uint64_t ios;		    /* completed */
	uint64_t requests;	    /* put on the ring */
	uint64_t indirect_requests; /* of those */
	uint64_t segments;	    /* in READ/WRITE requests */
	uint64_t pushes;	    /* tdf_kick calls that pushed requests */
	uint64_t kicks;		    /* notifications sent to the backend */
	uint64_t wakeups;	    /* notifications received */
	uint64_t poll_hits;	    /* tdf_wait calls answered by polling */
	uint64_t poll_backoffs;	    /* times polling stopped: CPU contended */
	uint32_t poll_window_us;    /* the spin's adaptive window now */
	uint64_t errors;	    /* responses other than BLKIF_RSP_OKAY */
};

struct tdf_dev;

/*
 * Connect to cfg->path, negotiate, map the ring and the pool.  Blocks at
 * most cfg->timeout_ms.  Returns 0 and *out, or -errno with *why said:
 * -ECONNREFUSED/-ENOENT (no tapdisk there), -E2BIG (pool above the
 * backend's max-data-pages), -EPROTO (the backend spoke nonsense), the
 * backend's own error, -ETIMEDOUT.
 */
int tdf_open(const struct tdf_config *cfg, struct tdf_dev **out, char *why,
	     size_t why_len);

/* Disconnect and unmap.  I/O still in flight is abandoned (no callback). */
void tdf_close(struct tdf_dev *dev);

const struct tdf_info *tdf_get_info(const struct tdf_dev *dev);
void tdf_get_stats(const struct tdf_dev *dev, struct tdf_stats *out);

/* The address of the caller's data page (page < data_pages) of ring 0. */
void *tdf_page(struct tdf_dev *dev, uint32_t page);
/* The same in ring queue's pool (NULL when out of range). */
void *tdf_queue_page(struct tdf_dev *dev, uint32_t queue, uint32_t page);

/*
 * Queue io on ring io->queue.  Returns 0 (its requests go to the ring at
 * the next tdf_kick with room for them), or -EINVAL (not aligned, buffer
 * outside the data pages, no such ring), -ERANGE (past the end of the disk), -EROFS, -EOPNOTSUPP (FLUSH
 * or DISCARD not offered).
 */
int tdf_submit(struct tdf_dev *dev, struct tdf_io *io);

/*
 * Put queued requests on each ring while it has room, push them with one
 * notification per ring at most.  Returns the requests pushed, or -errno.
 */
int tdf_kick(struct tdf_dev *dev);

/*
 * Take the responses there are and run the callbacks (which may submit).
 * Returns the I/Os completed, or -EPROTO when the backend wrote a
 * response that answers nothing (the device is then unusable).
 */
int tdf_poll(struct tdf_dev *dev);

/*
 * tdf_poll, then, when nothing completed, wait at most timeout_ms (-1:
 * forever) for the backend's notification and tdf_poll again.  Returns
 * the I/Os completed (0 on timeout, and at once when no request is on the
 * ring), -ECONNRESET when the backend closed the connection, or -errno.
 * Callbacks must not call tdf_close().
 */
int tdf_wait(struct tdf_dev *dev, int timeout_ms);

/*
 * Wait at most timeout_ms for the backend's "resized sectors=N" (the disk
 * grew online: `tap-ctl resize`) and take the new size into the info.
 * Returns 0, -ETIMEDOUT, -ECONNRESET, or -EPROTO for another message,
 * with the reason in why.  Reads only the socket: the ring may be busy.
 */
int tdf_wait_resize(struct tdf_dev *dev, int timeout_ms, char *why, size_t len);

/* Requests on the ring without a response. */
uint32_t tdf_inflight(const struct tdf_dev *dev);

/* --- how blkfront cuts an I/O (pure; the tests' oracle) ------------------- */

struct tdf_piece {
	uint32_t offset;   /* in the I/O */
	uint32_t len;	   /* bytes */
	uint32_t segments; /* pages it spans */
	bool indirect;	   /* BLKIF_OP_INDIRECT */
};

/*
 * The requests an I/O of len bytes from a page boundary becomes with
 * max_segments per request.  Fills at most max_pieces and returns how
 * many there are in all.
 */
uint32_t tdf_split(uint32_t len, uint32_t max_segments,
		   struct tdf_piece *pieces, uint32_t max_pieces);

/* --- verification patterns (td-front-pattern.c) ----------------------------- */

/*
 * Every 512-byte sector of a pattern is, little-endian:
 *   [0, 8)     TDF_PATTERN_MAGIC
 *   [8, 16)    the sector's byte offset on the disk
 *   [16, 24)   the generation (which write of the region this is)
 *   [24, 32)   the run's seed
 *   [32, 512)  60 words w, w + 1, ..., w + 59 (mod 2^64), where
 *              w = tdf_pattern_word(offset, generation, seed)
 * so a sector in the wrong place, of another write or of another run is
 * found, and a checker in any language can compute it.
 */
#define TDF_PATTERN_MAGIC UINT64_C(0x31544e4f52464454) /* "TDFRONT1" */

uint64_t tdf_pattern_word(uint64_t offset, uint64_t generation, uint64_t seed);
/* offset and len are multiples of 512. */
void tdf_pattern_fill(void *buf, uint64_t offset, uint32_t len,
		      uint64_t generation, uint64_t seed);

struct tdf_mismatch {
	uint64_t offset; /* disk byte offset of the first bad sector */
	uint64_t found_offset, found_generation, found_seed;
	bool bad_magic; /* not a pattern sector at all */
};

/* Returns 0, or -EILSEQ with *bad describing the first bad sector. */
int tdf_pattern_check(const void *buf, uint64_t offset, uint32_t len,
		      uint64_t generation, uint64_t seed,
		      struct tdf_mismatch *bad);

/* --- the backend's counters (td-front-stats.c) ------------------------------- */

#define TDF_SEG_BUCKETS 13 /* as TD_SEG_BUCKETS: 1, 2, 3-4, ..., 2049+ */
#define TDF_NR_OPS	5  /* read, write, flush, discard, write_zeroes */

/* What "tap-ctl stats --json" says that a frontend wants to know. */
struct tdf_backend_stats {
	uint64_t requests[TDF_NR_OPS]; /* the vbd's I/Os, by op */
	uint64_t bytes[TDF_NR_OPS];
	uint64_t pieces;	  /* requests they were split into */
	uint64_t backend_submits; /* I/Os the drivers gave the backend */
	uint64_t backend_merges;
	uint64_t sort_merges;
	uint64_t seg_hist[TDF_SEG_BUCKETS];
	uint64_t cpu_us; /* user + system of the tapdisk process */
	uint64_t ring_requests;
	uint64_t ring_indirect;
	uint64_t ring_segments;
	uint64_t ring_notifications;
	uint64_t kicks;
	uint64_t ring_polled; /* taken by tapdisk's poller (--poll-us) */
};

/*
 * Ask the tapdisk whose control socket is ctl_path for its stats and fill
 * *out.  Returns 0, or -errno with *why said.
 */
int tdf_backend_stats(const char *ctl_path, struct tdf_backend_stats *out,
		      char *why, size_t why_len);
/* after - before, counter by counter. */
void tdf_backend_stats_diff(const struct tdf_backend_stats *after,
			    const struct tdf_backend_stats *before,
			    struct tdf_backend_stats *out);

/*
 * The number at a dotted path in a JSON document ("ops.read.requests",
 * "segments_per_request.3.count").  Returns 0, -ENOENT when the path is
 * not there, -EPROTO when the text is not JSON or the value not a
 * non-negative integer.
 */
int tdf_json_u64(const char *json, const char *path, uint64_t *out);

#endif
