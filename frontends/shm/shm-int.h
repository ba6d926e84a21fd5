/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm-int.h - what the shm server (shm.c: listening, accepting, shutdown,
 * statistics) and its connections (shm-conn.c: negotiation, shared
 * memory, the ring's transport ops) share.  Private to those files and
 * their unit test.
 *
 * Life of a connection (struct shm_conn):
 *   HANDSHAKE   accepted; our offer is written (whole, at once: an empty
 *               socket always takes one line), the frontend's "connect"
 *               line is awaited (at most handshake_timeout_ms);
 *   CONNECTED   memory mapped, descriptors sent, a blkif ring serves it;
 *               the socket is watched only for its end;
 *   CLOSING     socket closed; the ring was stopped and the I/O it had in
 *               the vbd is completing.  shm_conn_drained() (the ring's
 *               drained callback) then destroys the ring, unmaps the
 *               memory and frees the connection.
 * A connection is never freed inside one of its own callbacks: closing
 * always goes through the ring's drained callback or a deferred call.
 */
#ifndef TAPSTRIPE_SHM_INT_H
#define TAPSTRIPE_SHM_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "common/listener.h"
#include "frontends/shm/shm-proto.h"
#include "frontends/shm/shm.h"

#define SHM_PEER_MAX 48

enum shm_conn_state {
	SHM_CONN_HANDSHAKE,
	SHM_CONN_CONNECTED,
	SHM_CONN_CLOSING,
};

/*
 * One ring of a connection (a "queue", as xenbus calls it): its own
 * shared ring, data pool and eventfds, its own struct blkif_ring on the
 * connection's vbd.  A connection has 1..SHM_MAX_QUEUES of them, all
 * served by the vbd's event loop; they live and die together.
 */
struct shm_queue {
	struct shm_conn *conn;
	uint32_t index; /* in conn->queues[] */
	void *sring;
	size_t ring_bytes;
	unsigned char *data;
	size_t data_bytes;
	uint32_t data_pages;
	int kick_fd, notify_fd;
	struct td_fd kick_fde;
	struct blkif_ring *ring; /* NULL once destroyed */
	uint64_t kicks;
};

struct shm_conn {
	struct td_shm_server *srv; /* NULL once orphaned by destroy */
	struct td_vbd *vbd;
	struct td_loop *loop;
	TAILQ_ENTRY(shm_conn) link; /* srv->conns */
	uint32_t id;		    /* connection number in logs */
	char peer[SHM_PEER_MAX];
	enum shm_conn_state state;
	uint64_t told_sectors; /* the size the frontend was last told */

	int sock;
	struct td_fd sock_fde;
	struct td_timer timer;	     /* handshake deadline */
	struct td_defer free_defer;  /* frees a connection without a ring */
	struct td_defer close_defer; /* closes after a fatal ring error */

	char in[SHM_LINE_MAX]; /* the "connect" line, as it arrives */
	uint32_t in_len;
	char close_why[SHM_WHY_MAX]; /* for close_defer */

	/* Once connected: queues[0, nr_queues). */
	uint32_t nr_queues;
	struct shm_queue queues[SHM_MAX_QUEUES];
};

TAILQ_HEAD(shm_conn_list, shm_conn);

struct td_shm_server {
	struct td_frontend fe; /* its shutdown state included */
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct blkif_config cfg; /* what rings accept at most */
	uint32_t max_clients;
	uint32_t max_data_pages;
	uint32_t max_queues; /* rings per connection */
	uint32_t handshake_timeout_ms;

	struct td_listener_list listeners;
	struct shm_conn_list conns; /* every state, CLOSING included */
	uint32_t nr_conns;

	uint64_t shutdown_deadline_ns;

	struct td_shm_stats stats;	     /* ring: of closed rings only */
	struct blkif_ring_stats closed_ring; /* summed at each ring's end */
	/* The same ring by ring (queue index); in_flight unused. */
	uint32_t closed_nr_queues;
	struct blkif_queue_report closed_queues[SHM_MAX_QUEUES];
};

/* --- shm-conn.c ------------------------------------------------------------ */

/* Serve fd (owned from here on).  Returns 0 or -errno, fd closed. */
int shm_conn_create(struct td_shm_server *srv, int fd, const char *peer);

/*
 * End the connection: close its socket, stop its ring.  why (NULL for a
 * plain disconnect) is logged, and counted as a protocol error.  Safe from
 * any callback of the connection; the memory goes later.
 */
void shm_conn_close(struct shm_conn *conn, const char *why);

/*
 * A connected frontend told of the disk's size when it changed since it
 * was last told ("resized sectors=N" on its socket): 1 when told, 0 when
 * there was nothing to tell (or it is not connected yet: it is told right
 * after "connected"), -errno when the line could not be sent.
 */
int shm_conn_tell_size(struct shm_conn *conn);

/*
 * Free a connection at once: unmap, close, forget.  Only for one whose
 * ring is destroyed or idle (never while the vbd holds its I/O).
 */
void shm_conn_free(struct shm_conn *conn);

/* Shutdown: stop taking requests; the rings still answer. */
void shm_conn_quiesce(struct shm_conn *conn);

/*
 * Destroy the rings the vbd no longer holds (server destroy).  Returns
 * how many are still busy: each frees itself when drained, and the last
 * one frees the connection.
 */
uint32_t shm_conn_destroy_rings(struct shm_conn *conn);

/* Rings of the connection that exist (not yet destroyed). */
uint32_t shm_conn_nr_rings(const struct shm_conn *conn);

/* Add the connection's ring counters to out->ring and out->queues. */
void shm_conn_add_stats(const struct shm_conn *conn, struct td_shm_stats *out);

/* Add ring q's counters (and its kicks) to *sum. */
void shm_queue_stats_add(struct blkif_queue_report *sum,
			 const struct shm_queue *q);

/* --- shm.c --------------------------------------------------------------------- */

/* A connection is gone (freed by shm-conn.c): count it, maybe finish. */
void shm_server_conn_gone(struct td_shm_server *srv, struct shm_conn *conn);

/* Sum b into a, counter by counter. */
void shm_ring_stats_add(struct blkif_ring_stats *a,
			const struct blkif_ring_stats *b);

#endif
