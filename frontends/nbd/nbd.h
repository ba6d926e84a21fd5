/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd.h - fixed-newstyle NBD server frontend for a vbd.
 *
 * The server lives in the tapdisk event loop and never blocks: sockets are
 * non-blocking, each connection has a small state machine for the
 * handshake and the transmission phase, many commands may be in flight per
 * connection, replies are batched and written when the socket accepts them.
 * A client that sends garbage, a truncated handshake, an out-of-range or
 * oversized request or an unknown command gets the protocol's error reply
 * or is disconnected; every other client keeps being served.
 *
 * Protocol subset: options NBD_OPT_GO, NBD_OPT_INFO, NBD_OPT_EXPORT_NAME,
 * NBD_OPT_LIST, NBD_OPT_ABORT and, when TLS is configured, NBD_OPT_STARTTLS
 * (nbd-tls.h; any other option, structured replies included, gets
 * NBD_REP_ERR_UNSUP); simple replies only;
 * commands READ, WRITE, FLUSH, TRIM, WRITE_ZEROES and DISC.  GO and INFO
 * advertise block sizes: minimum 512 (the vbd's sector), preferred 4096,
 * maximum max_request_bytes.
 *
 * Resources are bounded per connection: max_inflight command slots
 * (each command holds one from its header until its reply is written),
 * and max_buffer_bytes of data buffers.  When either is exhausted the
 * server stops reading that connection until replies drain.  A WRITE
 * refused before its payload is read (too long, misaligned, out of range,
 * read-only export) has its payload read and discarded, in small pieces,
 * before the error reply goes out, so the stream stays in step.
 *
 * Admission (doc/tapdisk.md, "Who may hold an NBD connection"): clients in
 * the handshake and clients past it have separate slots, max_handshakes
 * and max_clients.  A newcomer that finds the handshake slots full takes
 * the slot of the oldest handshake; a client whose NBD_OPT_GO finds the
 * established slots full takes the slot of the connection idle the
 * longest, or, when none is idle, is refused with NBD_REP_ERR_POLICY and
 * a message.  Deadlines: the handshake (handshake_timeout_ms from
 * accept); a request's header and WRITE payload, and replies the client
 * does not take (io_timeout_ms); an idle connection (idle_timeout_ms, 0
 * for never).  Connection memory (the connection, its slots and data
 * buffers) is mapped and unmapped with mmap, so that a closed
 * connection gives it back to the system.
 *
 * Everything runs in the event-loop thread.
 */
#ifndef TAPSTRIPE_NBD_H
#define TAPSTRIPE_NBD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/loop.h"
#include "frontends/nbd/nbd-tls.h"
#include "tapdisk/frontend.h"
#include "tapdisk/vbd.h"

#define TD_NBD_DEFAULT_MAX_CLIENTS	    16
#define TD_NBD_DEFAULT_MAX_INFLIGHT	    64 /* commands per connection */
#define TD_NBD_DEFAULT_MAX_REQUEST	    (32u << 20) /* bytes per command */
#define TD_NBD_DEFAULT_MAX_BUFFER	    (64u << 20) /* buffer bytes per connection */
#define TD_NBD_DEFAULT_HANDSHAKE_TIMEOUT_MS 10000
#define TD_NBD_DEFAULT_IO_TIMEOUT_MS	    30000
#define TD_NBD_DEFAULT_IDLE_TIMEOUT_MS	    0	 /* never: see nbd.h's head */
#define TD_NBD_MAX_CLIENTS		    1024 /* upper bound of max_clients */
#define TD_NBD_MAX_TIMEOUT_MS		    (86400u * 1000) /* one day */
#define TD_NBD_MAX_INFLIGHT		    4096 /* upper bound of max_inflight */
#define TD_NBD_MAX_REQUEST_LIMIT	    (1u << 30) /* upper bound of max_request */

struct td_nbd_server;

struct td_nbd_params {
	const char *export_name; /* "" serves any name; NULL: "" */
	/* TLS and allowed addresses (nbd-tls.h); NULL: none. */
	const struct td_nbd_access *access;
	/* Connections at once, counting closed ones whose I/O is still in
	 * the vbd; 0: default. */
	uint32_t max_clients;
	uint32_t max_inflight; /* 0: default; at most TD_NBD_MAX_INFLIGHT */
	/* READ/WRITE length limit; 0: default; a multiple of 512 from 4096
	 * to TD_NBD_MAX_REQUEST_LIMIT. */
	uint32_t max_request_bytes;
	/* Clients in the handshake at once (separate from max_clients);
	 * 0: max_clients. */
	uint32_t max_handshakes;
	uint32_t handshake_timeout_ms; /* 0: default */
	/* A request's header and payload must arrive, and replies be taken,
	 * within this; 0: default. */
	uint32_t io_timeout_ms;
	/* Close a connection with nothing in flight after this; 0: never.
	 * Idle connections yield their slot to a newcomer regardless. */
	uint32_t idle_timeout_ms;
	/* Data buffers one connection may hold; 0: default; raised to
	 * max_request_bytes (rounded up to 4 KiB) when smaller. */
	uint32_t max_buffer_bytes;
};

struct td_nbd_stats {
	uint64_t clients;	  /* connected now */
	uint64_t clients_total;	  /* accepted since start */
	uint64_t refused;	  /* at accept: shutting down */
	uint64_t protocol_errors; /* connections dropped for bad input */
	uint64_t commands;	  /* requests received, DISC included */
	uint64_t error_replies;	  /* replies with a nonzero error */
	uint64_t handshaking;	  /* of clients: still in the handshake */
	uint64_t timed_out;	  /* closed by a deadline */
	uint64_t evicted;	  /* closed to make room for a newcomer */
	uint64_t busy_refusals;	  /* GO refused: every slot busy */
	uint64_t memory_bytes;	  /* mapped for connections and buffers */
};

/*
 * Returns 0 and *out, or -errno having logged why (-EINVAL for bad
 * parameters).  The server serves vbd, which must outlive it.
 */
int td_nbd_server_create(struct td_loop *loop, struct td_vbd *vbd,
			 const struct td_nbd_params *params,
			 struct td_nbd_server **out);

/*
 * Listen on "unix:/path/to.sock" or "tcp:HOST:PORT" ("tcp::PORT" for all
 * addresses, "tcp:[::1]:PORT" for an IPv6 literal).  May be called more
 * than once.  A stale unix socket file (nobody accepting on it) is
 * replaced; a live one gives -EADDRINUSE.  HOST is resolved with
 * getaddrinfo, which may block: call this at set-up time, not from the
 * I/O path.  Returns 0 or -errno, having logged why.
 */
int td_nbd_server_listen(struct td_nbd_server *srv, const char *addr);

/*
 * Serve a connected stream socket (taking ownership of fd: it is closed
 * on every path).  peer names it in logs (NULL: "fd").  For sockets
 * accepted elsewhere or passed in by SCM_RIGHTS, and for tests.  When
 * max_handshakes clients are in the handshake the oldest of them is
 * closed to make room (counted in evicted).  Returns 0, -ESHUTDOWN when
 * the server is shutting down (counted in refused), or -errno.
 */
int td_nbd_server_add_client(struct td_nbd_server *srv, int fd,
			     const char *peer);

/*
 * The NBD frontend (frontend.h): create takes a struct td_nbd_params,
 * listen an address as td_nbd_server_listen.  Its shutdown stops
 * accepting and reading commands, lets the commands in flight finish and
 * their replies go out (connections still busy after a short timeout are
 * closed), closes every connection, then calls done; connections still
 * in the handshake are closed at once.  done waits for the vbd to
 * complete what it was given: memory the vbd may still write is never
 * freed.  Its report is the counters of struct td_nbd_stats.
 */
extern const struct td_frontend_ops td_nbd_frontend;

/* The generic handle of srv (NULL for NULL), and back. */
struct td_frontend *td_nbd_server_frontend(struct td_nbd_server *srv);
struct td_nbd_server *td_nbd_server_of(struct td_frontend *fe);

void td_nbd_server_get_stats(const struct td_nbd_server *srv,
			     struct td_nbd_stats *out);

/*
 * The operator's view (tap-ctl nbd): list the open connections (text, or
 * JSON when json) into out, or drop connection id.  td_nbd_server_drop
 * returns 0 or -ENOENT when no open connection has that id.
 */
void td_nbd_server_list(struct td_nbd_server *srv, bool json,
			struct td_strbuf *out);
int td_nbd_server_drop(struct td_nbd_server *srv, uint64_t id);

#endif
