/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm.h - the shm transport: blkif rings in shared memory, for frontends
 * on the same machine (td-front, tests, benchmarks) where there is no Xen.
 *
 * The server listens on a Unix stream socket.  A frontend connects,
 * reads the backend's offer (the xenbus keys: sectors, sector-size, info,
 * feature-flush-cache, feature-discard, feature-max-indirect-segments,
 * max-ring-page-order), answers with the ring order and data pool size
 * it wants, and receives by SCM_RIGHTS a memfd holding the shared ring, a
 * memfd holding the data pool (a segment's gref is a page index in it)
 * and two eventfds, one per direction.  From then on it speaks blkif
 * (xen/io/blkif.h) exactly as blkfront does; the socket stays open only
 * to say that the frontend is alive.  doc/shm-protocol.md specifies it.
 *
 * Every connection is one ring (struct blkif_ring) on the same vbd, or
 * several when the frontend asks for them (multi-queue-num-queues, up to
 * the multi-queue-max-queues offered), each with its own shared memory
 * and eventfds, all in the one event loop.  A connection is isolated
 * from the others: a frontend that sends a malformed or
 * unacceptable message, sends anything once connected, breaks the ring
 * protocol, meddles with the eventfds' flags or stays silent during the
 * handshake is dropped, alone.  A frontend that goes away, cleanly or
 * not, frees everything: the ring is stopped at once, the I/O it had in
 * flight completes (without responses), then the memory is unmapped and
 * the descriptors closed.
 *
 * Memory is bounded per ring: the ring is at most 1 MiB (order 8), the
 * data pool at most max_data_bytes, times max_queues per connection (memfds sealed against shrinking,
 * so a frontend cannot make the backend fault on a truncated file).
 *
 * Everything runs in the event-loop thread.
 */
#ifndef TAPSTRIPE_SHM_H
#define TAPSTRIPE_SHM_H

#include <stdint.h>

#include "common/loop.h"
#include "frontends/blkif/blkif.h"
#include "frontends/shm/shm-proto.h"
#include "tapdisk/frontend.h"
#include "tapdisk/vbd.h"

#define TD_SHM_DEFAULT_MAX_CLIENTS	    16
#define TD_SHM_DEFAULT_MAX_DATA_BYTES	    (1ull << 30)
#define TD_SHM_MAX_DATA_BYTES_LIMIT	    (16ull << 30)
#define TD_SHM_DEFAULT_HANDSHAKE_TIMEOUT_MS 10000
/* Rings one frontend may open (multi-queue-max-queues); at most
 * SHM_MAX_QUEUES.  Linux's blkback offers one per CPU of dom0. */
#define TD_SHM_DEFAULT_MAX_QUEUES 8
/* How long shutdown waits for the rings' I/O to be answered. */
#define TD_SHM_SHUTDOWN_TIMEOUT_MS 5000

struct td_shm_server;

struct td_shm_params {
	/*
	 * What the rings accept: max_ring_order (up to BLKIF_MAX_RING_ORDER,
	 * the shm default), max_indirect_segments (11 refuses indirect
	 * requests), indirect_buffers.  NULL: blkif_config_init() with
	 * max_ring_order BLKIF_MAX_RING_ORDER.
	 */
	const struct blkif_config *blkif;
	/* Connections at once, counting closed ones still draining; 0:
	 * default. */
	uint32_t max_clients;
	/* Largest data pool a frontend may ask for; 0: default.  A multiple
	 * of 4096 from 4096 to TD_SHM_MAX_DATA_BYTES_LIMIT. */
	uint64_t max_data_bytes;
	uint32_t handshake_timeout_ms; /* 0: default */
	/* Rings one frontend may open (multi-queue-max-queues, 1 to
	 * SHM_MAX_QUEUES); 0: default. */
	uint32_t max_queues;
};

struct td_shm_stats {
	uint64_t clients;	  /* connections open now */
	uint64_t rings;		  /* rings of the connected ones (several
				   * per frontend with multi-queue) */
	uint64_t clients_total;	  /* accepted since start */
	uint64_t refused;	  /* over max_clients, or shutting down */
	uint64_t protocol_errors; /* dropped for bad input (any kind) */
	uint64_t kicks;		  /* frontend notifications taken */
	/* The rings' own counters, summed over open and closed rings. */
	struct blkif_ring_stats ring;
	/*
	 * Ring by ring: queues[i] sums ring i of every frontend, open and
	 * closed (in_flight: of the open ones), so that the queues add up
	 * to ring.  nr_queues: the most rings a frontend opened.
	 */
	uint32_t nr_queues;
	struct blkif_queue_report queues[SHM_MAX_QUEUES];
};

/*
 * Returns 0 and *out, or -errno having logged why (-EINVAL for bad
 * parameters).  The server serves vbd, which must outlive it.
 */
int td_shm_server_create(struct td_loop *loop, struct td_vbd *vbd,
			 const struct td_shm_params *params,
			 struct td_shm_server **out);

/*
 * Listen on the Unix socket path (mode 0600: the socket hands out the
 * disk).  May be called more than once.  A stale socket file (nobody
 * accepting) is replaced; a live one gives -EADDRINUSE.  Returns 0 or
 * -errno, having logged why.
 */
int td_shm_server_listen(struct td_shm_server *srv, const char *path);

/*
 * Serve a connected stream socket, taking ownership of fd (closed on every
 * path).  peer names it in logs (NULL: "fd").  For sockets accepted
 * elsewhere and for tests.  Returns 0, -EBUSY when max_clients are
 * connected or the server is shutting down, or -errno.
 */
int td_shm_server_add_client(struct td_shm_server *srv, int fd,
			     const char *peer);

/*
 * The shm frontend (frontend.h): create takes a struct td_shm_params,
 * listen a socket path as td_shm_server_listen.  Its shutdown stops
 * accepting, closes the connections still negotiating, stops taking
 * requests from the rings, lets what they have in flight complete and be
 * answered (at most TD_SHM_SHUTDOWN_TIMEOUT_MS), then closes every ring
 * and calls done.  Destroyed before that, a ring with I/O still in the
 * vbd frees itself when that I/O completes.  Its report is the counters
 * of struct td_shm_stats, its rings' included.
 */
extern const struct td_frontend_ops td_shm_frontend;

/* The generic handle of srv (NULL for NULL), and back. */
struct td_frontend *td_shm_server_frontend(struct td_shm_server *srv);
struct td_shm_server *td_shm_server_of(struct td_frontend *fe);

void td_shm_server_get_stats(const struct td_shm_server *srv,
			     struct td_shm_stats *out);

#endif
