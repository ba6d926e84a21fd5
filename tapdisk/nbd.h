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
 */
#ifndef TAPSTRIPE_NBD_H
#define TAPSTRIPE_NBD_H

#include <stdint.h>

#include "tapdisk/loop.h"
#include "tapdisk/vbd.h"

#define TD_NBD_DEFAULT_MAX_CLIENTS 16
#define TD_NBD_DEFAULT_MAX_INFLIGHT 64		 /* commands per connection */
#define TD_NBD_DEFAULT_MAX_REQUEST (32u << 20) /* bytes per command */
#define TD_NBD_DEFAULT_HANDSHAKE_TIMEOUT_MS 10000

struct td_nbd_server;

struct td_nbd_params {
	const char *export_name; /* "" serves any name; default "" */
	uint32_t max_clients;	 /* 0: default */
	uint32_t max_inflight;	 /* 0: default */
	uint32_t max_request_bytes;
	uint32_t handshake_timeout_ms;
};

struct td_nbd_stats {
	uint64_t clients;	/* connected now */
	uint64_t clients_total; /* accepted since start */
	uint64_t refused;	/* over max_clients */
	uint64_t protocol_errors; /* connections dropped for bad input */
	uint64_t commands;
	uint64_t error_replies;
};

/* Returns 0 and *out, or -errno. */
int td_nbd_server_create(struct td_loop *loop, struct td_vbd *vbd,
			 const struct td_nbd_params *params,
			 struct td_nbd_server **out);

/*
 * Listen on "unix:/path/to.sock" or "tcp:HOST:PORT" ("tcp::PORT" for all
 * addresses).  May be called more than once.  A stale unix socket file is
 * replaced.  Returns 0 or -errno, having logged why.
 */
int td_nbd_server_listen(struct td_nbd_server *srv, const char *addr);

/*
 * Stop accepting, stop reading commands, let in-flight commands finish and
 * their replies go out (bounded by a short timeout), close every
 * connection, then call done(opaque) from the event loop.
 */
void td_nbd_server_shutdown(struct td_nbd_server *srv,
			    void (*done)(void *opaque), void *opaque);

/* Free a server that has finished shutting down (or never listened). */
void td_nbd_server_destroy(struct td_nbd_server *srv);

void td_nbd_server_get_stats(const struct td_nbd_server *srv,
			     struct td_nbd_stats *out);

#endif
