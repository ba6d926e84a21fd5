/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vbd-int.h - the vbd's private state, shared by vbd.c (the I/O path) and
 * vbd-open.c (chains, pools, open and close).  Nothing outside tapdisk/vbd*
 * includes it.
 */
#ifndef TAPSTRIPE_VBD_INT_H
#define TAPSTRIPE_VBD_INT_H

#include "tapdisk/vbd.h"

#define VBD_MAX_LAYERS 8
#define VBD_PRIV_ALIGN 16

enum vbd_state { VBD_RUNNING, VBD_PAUSING, VBD_PAUSED };

struct vbd_pool {
	struct td_request *reqs;
	struct iovec *iovs;
	unsigned char *priv;
	struct td_request *free;
	uint32_t size;
	uint32_t nr_free;
};

TAILQ_HEAD(vbd_io_list, td_vbd_io);

struct td_snap_job;

struct td_vbd {
	char name[TD_VBD_NAME_MAX];
	char *chain;	 /* as given */
	char *chain_buf; /* cut up by parsing; drivers' args point here */
	struct td_loop *loop;
	const struct td_driver_ops *const *table; /* given to td_vbd_open */
	unsigned int nr_layers;
	struct td_driver drivers[VBD_MAX_LAYERS]; /* [0] is the top */
	struct vbd_pool pools[VBD_MAX_LAYERS];
	struct td_disk_info info;
	uint32_t max_io_sectors;

	struct vbd_io_list waiting; /* not fully issued: pool empty or paused */
	uint64_t active;	    /* I/Os started and not completed */

	struct td_request *done_head; /* completed, callbacks not yet run */
	struct td_request **done_tail;
	struct td_defer done_defer;
	bool in_done; /* completion callbacks running: closing would free them */

	struct td_hook unplug_hook;
	uint32_t unplug_mask; /* layers submitted to in this pass */

	enum vbd_state state;
	td_vbd_drained_cb drained_cb;
	void *drained_opaque;
	struct td_defer drained_defer;

	struct td_ratelimit rl;
	struct td_vbd_stats stats;
	struct td_vbd_stages stages; /* stages.c */
	/* params->error while td_vbd_open runs, else NULL */
	struct td_vbd_open_error *open_error;
	/* The snapshot job copying this vbd (snapshot.c), or NULL. */
	struct td_snap_job *snap;
	bool open_read_only; /* as td_vbd_open was asked */
};

/* vbd-open.c */
/*
 * Close the chain's drivers and open them again from the same chain
 * text (a redirect-on-write snapshot exchanged the disk's file under its
 * name).  The vbd must be drained.  On failure the vbd has no drivers
 * left (-errno): it must not get I/O again.
 */
int vbd_reopen_layers(struct td_vbd *vbd);
int vbd_pool_init(struct td_vbd *vbd, struct vbd_pool *pool, uint32_t size,
		  size_t req_size);
void vbd_pool_fini(struct vbd_pool *pool);

/*
 * stats.c: lay out vbd->stats.driver_counters, one per name the driver
 * table declares (0 or -EINVAL when they are more than
 * TD_DRIVER_COUNTERS_MAX); fill a snapshot's values from the chain.
 */
int vbd_driver_counters_init(struct td_vbd *vbd);
void vbd_driver_counters(const struct td_vbd *vbd, struct td_vbd_stats *out);

/*
 * stages.c, for vbd.c, while an I/O is timed: stamp its start (the
 * frontend's SEEN kept), its completion read (td_complete), its callback
 * (accounted at once unless the frontend accounts it).
 */
void vbd_stages_start(struct td_vbd_io *io);
void vbd_stages_reaped(struct td_vbd *vbd, struct td_vbd_io *io);
void vbd_stages_done(struct td_vbd *vbd, struct td_vbd_io *io, uint64_t now);

/* vbd.c: the pass-end hook that unplugs the chain, top first. */
void vbd_unplug(struct td_hook *h, void *opaque);

/*
 * vbd.c, for the snapshot job: submit io even while the vbd pauses (the
 * job's own reads and flushes), ahead of waiting I/O; give back an I/O
 * the copy-before-write gate held (it is issued now, or first when the
 * pool has room); count the job's work as active, so a pause drains it.
 */
int vbd_submit_internal(struct td_vbd *vbd, struct td_vbd_io *io);
/*
 * The next bytes (at most) of io's buffers, from its cursor (iov_idx,
 * iov_off, which move on), as up to cap entries of dst: returns the
 * entries, the bytes in *mapped (fewer when cap runs out).
 */
int vbd_iov_take(struct td_vbd_io *io, struct iovec *dst, int cap,
		 uint64_t bytes, uint64_t *mapped);
/* The gate answers io itself (redirect-on-write served it elsewhere). */
void vbd_io_complete(struct td_vbd *vbd, struct td_vbd_io *io, int err);
void vbd_io_release(struct td_vbd *vbd, struct td_vbd_io *io);
void vbd_active_get(struct td_vbd *vbd);
void vbd_active_put(struct td_vbd *vbd);

/*
 * snapshot.c: the copy-before-write gate, asked once per I/O when it
 * starts: true when it holds io (a write, write-zeroes or discard to a
 * chunk not yet copied) and will give it back with vbd_io_release.
 * vbd_snap_busy: the job has copies in flight (the vbd cannot close).
 * vbd_snap_close: at td_vbd_close, stop the job, keep its file.
 */
bool vbd_snap_gate(struct td_snap_job *job, struct td_vbd_io *io);
bool vbd_snap_busy(const struct td_snap_job *job);
/* A redirect-on-write job serves the disk from two files. */
bool vbd_snap_row(const struct td_snap_job *job);
void vbd_snap_close(struct td_vbd *vbd);

#endif
