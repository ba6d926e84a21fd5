/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-int.h - what the files of the Xen transport share: xen-backend.c
 * (the server and each device's xenbus state machine), xen-store.c
 * (xenstore through libxenstore) and xen-io.c (ring, event channel, grant
 * copy).  Tests replace the store and the I/O side with fakes through the
 * two ops tables.  Not for other modules.
 */
#ifndef TAPSTRIPE_XEN_INT_H
#define TAPSTRIPE_XEN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "frontends/xen/xen-keys.h"
#include "frontends/xen/xen.h"

/* --- xenstore ------------------------------------------------------------- */

/*
 * The xenstore operations the backend uses; h is the store's handle.
 * read returns a malloc'd string or NULL with errno (ENOENT: absent);
 * the others return 0 or -errno.  A watch fires once when set and on
 * every change at or below path; events reach the server through
 * xen_server_watch_event().
 */
struct xen_store_ops {
	char *(*read)(void *h, const char *path);
	int (*write)(void *h, const char *path, const char *value);
	int (*watch)(void *h, const char *path, const char *token);
	int (*unwatch)(void *h, const char *path, const char *token);
	/*
	 * The names below path as one malloc'd block (free it once), *n of
	 * them; NULL with errno (ENOENT: absent).  Remove path and all
	 * below it: 0 or -errno.
	 */
	char **(*directory)(void *h, const char *path, unsigned int *n);
	int (*rm)(void *h, const char *path);
	void (*close)(void *h);
	/*
	 * A transaction (issue #21: the resize notice).  tx_start gives its
	 * id in *tx; tx_write writes in it (nobody sees it, no watch fires,
	 * until it ends); tx_end commits it (abort false) or drops it: 0,
	 * -EAGAIN when another writer got in between (start again), or
	 * -errno.  All three 0 or -errno.
	 */
	int (*tx_start)(void *h, uint32_t *tx);
	int (*tx_write)(void *h, uint32_t tx, const char *path,
			const char *value);
	int (*tx_end)(void *h, uint32_t tx, bool abort);
};

/* xen-store.c: libxenstore, its watch fd served by loop. */
int xen_store_open(struct td_loop *loop, struct td_xen_server *srv,
		   const struct xen_store_ops **ops, void **h);
/* This domain's id ("domid"; a dom0 may not have the key: 0). */
uint32_t xen_store_self_domid(const struct xen_store_ops *ops, void *h);

/* --- the data path -------------------------------------------------------- */

struct xen_ring;

struct xen_ring_params {
	struct td_vbd *vbd;
	const struct blkif_config *cfg;
	uint32_t frontend_domid;
	const struct xen_frontend_keys *keys;
	/* Take over a ring another tapdisk quiesced (blkif: resume). */
	bool resume;
	/* The frontend broke the ring protocol: disconnect it. */
	void (*fatal)(void *opaque);
	void *opaque;
	struct td_xen_stats *stats; /* the server's, for the copy counters */
	uint32_t queue; /* the ring's index (queue-N), for stats->queues */
};

struct xen_io_ops {
	/* Map the ring, bind the channel, start serving.  0 or -errno. */
	int (*connect)(const struct xen_ring_params *p, struct xen_ring **out);
	/*
	 * Stop touching the ring, unmap it, unbind the channel; once the
	 * I/O in flight has finished free everything and call done(opaque)
	 * from the event loop.
	 */
	void (*disconnect)(struct xen_ring *ring, void (*done)(void *),
			   void *opaque);
	/*
	 * Optional (NULL: not offered).  Hand the ring over: take no more
	 * requests, answer every one taken, then unmap, unbind, free and call
	 * done(opaque) from the event loop.  The frontend's ring, with the
	 * requests nobody took, is left for the next backend (connect with
	 * resume).
	 */
	void (*quiesce)(struct xen_ring *ring, void (*done)(void *),
			void *opaque);
	/*
	 * Optional.  Add the counters of a connected ring to *sum: its
	 * blkif counters, the events the frontend sent on it and the
	 * requests it holds now (a closed ring's are added to the server's
	 * ring and queues[queue] when it closes).
	 */
	void (*add_stats)(const struct xen_ring *ring,
			  struct blkif_queue_report *sum);
};

/* xen-io.c: libxengnttab and libxenevtchn. */
extern const struct xen_io_ops xen_io_real;

/* --- the server and its devices --------------------------------------------- */

/* The backend types served: XEN_BACKEND_TYPE, XEN_BACKEND_TYPE_QDISK. */
#define XEN_NR_BACKEND_TYPES 2
extern const char *const xen_backend_types[XEN_NR_BACKEND_TYPES];

/*
 * A claimed device that closed is removed this long after (libxl waits
 * to see it Closed before it waits for the directory to go).
 */
#define XEN_REMOVE_DELAY_US 500000

struct xen_dev {
	LIST_ENTRY(xen_dev) link;
	struct td_xen_server *srv;
	unsigned int type; /* index in xen_backend_types */
	uint32_t domid;	   /* the frontend's */
	uint32_t devid;
	char be[XEN_PATH_MAX]; /* our directory */
	char fe[XEN_PATH_MAX]; /* the frontend's, from our "frontend" key */
	char fe_state_path[XEN_PATH_MAX];
	char token[XEN_PATH_MAX];
	int state; /* the backend state we last wrote */
	/* The frontend's rings (multi-queue-num-queues of them); none when
	 * not connected.  pending: disconnects or quiesces not yet done. */
	struct xen_ring *rings[XEN_MAX_QUEUES];
	uint32_t nr_rings;
	uint32_t pending;
	bool draining;	/* disconnect or quiesce called, done not yet */
	bool releasing; /* handed over: forget it once drained */
	bool failed;	/* connect failed: wait for the frontend */
	bool gone;	/* freed once drained */
	bool read_only; /* mode r, or a read-only vbd */
	bool claimed;	/* taken by its params (xl): we remove it */
	bool forced;	/* the toolstack wrote our state Closed */
	struct td_timer rm_timer;
};

LIST_HEAD(xen_dev_list, xen_dev);

struct td_xen_server {
	struct td_frontend fe; /* its shutdown state included */
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct blkif_config cfg;
	const struct xen_store_ops *xs;
	void *xsh;
	const struct xen_io_ops *io;
	uint32_t self_domid;
	int pid;
	char root[XEN_PATH_MAX]; /* vbd3's, for "info" and tap-ctl */
	char roots[XEN_NR_BACKEND_TYPES][XEN_PATH_MAX];
	char name[XEN_NAME_MAX]; /* claim params naming it; "": none */
	/* How long a closed claimed device stays before we remove it. */
	uint64_t remove_delay_us;
	struct xen_dev_list devs;
	struct td_xen_stats stats;
};

/*
 * xen-backend.c: set up a server over the given store and data path
 * (xen_store_open's and xen_io_real in tapdisk; fakes in tests).
 */
int xen_server_init(struct td_xen_server *srv, struct td_loop *loop,
		    struct td_vbd *vbd, const struct td_xen_params *params,
		    const struct xen_store_ops *xs, void *xsh,
		    const struct xen_io_ops *io);

/* A watch fired: path changed, token as given to watch. */
void xen_server_watch_event(struct td_xen_server *srv, const char *path,
			    const char *token);

/* The shutdown op (frontend.h, xen.h): the rings' I/O finishes unanswered. */
int xen_server_shutdown(struct td_frontend *fe, td_frontend_done_fn done,
			void *opaque);

/*
 * The resized op (frontend.h): each connected device gets the vbd's new
 * "sectors" and its state Connected written again in one transaction, as
 * Linux's blkback does (xen_vbd_resize), so that blkfront reads the new
 * size without a re-attach; a device not connected yet gets the new
 * "sectors" to read when it connects.
 */
void xen_server_resized(struct td_frontend *fe, struct td_strbuf *out);

/* Free the devices (not the server, nor the store). */
void xen_server_fini(struct td_xen_server *srv);

#endif
