/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen.h - the Xen transport: tapdisk as the backend of Xen virtual block
 * devices (the role of Linux's blkback, QEMU's xen-block, XenServer's
 * tapback + tapdisk3).
 *
 * The server watches the backend roots of its own domain,
 * /local/domain/<self>/backend/vbd3 and .../backend/qdisk, and takes every
 * device whose tapstripe-pid node names this process (tap-ctl attach
 * writes them; see xen-keys.h for the nodes), and, when it has a name,
 * every device with no tapstripe-pid whose "params" names it
 * ("[aio:]tapstripe:NAME": a disk that xl made in this driver domain, with
 * backend=<this domain>, backendtype=qdisk, target=tapstripe:NAME).  A
 * device so claimed is removed by tapdisk once closed, as xl devd would:
 * when the toolstack set online to 0 or wrote its state Closed (libxl
 * does that for a qdisk of a guest being destroyed).  Devices there
 * already when the server starts are taken too.  For each it runs the
 * backend side of the
 * xenbus state machine: advertises the features (InitWait), reads the
 * frontend's ring keys when it is Initialised, maps the ring
 * (libxengnttab), binds the event channel (libxenevtchn), serves the ring
 * with tapdisk/blkif (Connected), and closes when the frontend closes or
 * the toolstack sets online to 0 (Closing, then Closed once the I/O in
 * flight has drained).  Data moves by grant copy into a per-ring buffer
 * arena filled in ring order (xen-io.c).
 *
 * Everything runs in the event-loop thread.  xenstore requests are
 * synchronous round trips to xenstored, as in every other backend; they
 * happen on set-up and state changes only, never per I/O.
 */
#ifndef TAPSTRIPE_XEN_H
#define TAPSTRIPE_XEN_H

#include <stdint.h>

#include "common/loop.h"
#include "frontends/blkif/blkif.h"
#include "frontends/xen/xen-keys.h"
#include "tapdisk/frontend.h"
#include "tapdisk/vbd.h"

struct td_xen_server;

struct td_xen_params {
	/* Limits advertised to frontends; NULL: blkif_config_init's. */
	const struct blkif_config *blkif;
	/*
	 * Claim the devices whose params is "[aio:]tapstripe:<name>" (xl's
	 * target=tapstripe:<name>); NULL: only tap-ctl attach's.
	 */
	const char *name;
};

/* Counters of the server and of all its rings, live and gone. */
struct td_xen_stats {
	uint64_t devices;	      /* taken since start */
	uint64_t connects;	      /* rings connected */
	uint64_t connect_errors;      /* frontends refused (bad keys, ABI) */
	uint64_t copy_in_segs;	      /* grant-copy segments, guest to us */
	uint64_t copy_out_segs;	      /* grant-copy segments, us to guest */
	uint64_t copy_errors;	      /* segments the hypervisor refused */
	struct blkif_ring_stats ring; /* summed over rings */
	/*
	 * Ring by ring: queues[i] sums ring i (queue-i) of every device,
	 * connected and closed (in_flight: of the connected ones; kicks:
	 * the events the frontend sent on it), so that the queues add up
	 * to ring.  nr_queues: the most rings a device opened.
	 */
	uint32_t nr_queues;
	struct blkif_queue_report queues[XEN_MAX_QUEUES];
};

/*
 * Connect to xenstore and start watching this domain's backend root.
 * Returns 0 and *out, or -errno having logged why: -ENOENT or -EACCES when
 * there is no xenstore here (not a Xen domain, or not privileged).
 */
int td_xen_server_create(struct td_loop *loop, struct td_vbd *vbd,
			 const struct td_xen_params *params,
			 struct td_xen_server **out);

/* The backend root it watches, for "info": /local/domain/0/backend/vbd3. */
const char *td_xen_server_root(const struct td_xen_server *srv);

/*
 * The Xen frontend (frontend.h): create takes a struct td_xen_params; it
 * has no listen (devices come through xenstore).  Its shutdown stops
 * taking devices, disconnects every ring (its I/O in flight finishes
 * without a response) and marks each device Closed, then calls done.
 * Destroyed before that, a ring still draining is left (logged).  Its
 * report is the counters of struct td_xen_stats, its rings' included.
 */
extern const struct td_frontend_ops td_xen_frontend;

/* The generic handle of srv (NULL for NULL), and back. */
struct td_frontend *td_xen_server_frontend(struct td_xen_server *srv);
struct td_xen_server *td_xen_server_of(struct td_frontend *fe);

void td_xen_server_get_stats(const struct td_xen_server *srv,
			     struct td_xen_stats *out);

#endif
