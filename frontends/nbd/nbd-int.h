/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-int.h - state shared by the NBD server (nbd.c: listening, accepting,
 * shutdown) and its connections (nbd-conn.c: input, output, life cycle;
 * nbd-handshake.c: options; nbd-cmd.c: commands).  Private to those
 * files and their unit test.
 *
 * Lifetime of a connection: created on accept (one mmap holding it and
 * its slots: nbd_conn_create), on srv->conns while its
 * socket is open; nbd_conn_close() closes the socket and moves it to
 * srv->dead, where it stays until every td_vbd_io it gave the vbd has
 * completed; the server's pass-end hook then frees it.  Nothing frees a
 * connection from inside one of its own callbacks.
 */
#ifndef TAPSTRIPE_NBD_INT_H
#define TAPSTRIPE_NBD_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/listener.h"
#include "frontends/nbd/nbd-proto.h"
#include "frontends/nbd/nbd-tls.h"
#include "frontends/nbd/nbd.h"

#define NBD_INBUF_BYTES		(16u << 10) /* > NBD_OPT_MAX_DATA_BYTES */
#define NBD_OUTBUF_BYTES	(16u << 10) /* handshake replies */
#define NBD_BUF_ALIGN		4096u	    /* data buffers: page-aligned */
#define NBD_WRITE_IOV_MAX	64	    /* iovecs per sendmsg */
#define NBD_READS_PER_EVENT	8	    /* fairness between connections */
#define NBD_DISCARD_CHUNK_BYTES (16u << 10)
#define NBD_DRAIN_TIMEOUT_MS	30000 /* replies after DISC or EOF */
#define NBD_SHUTDOWN_TIMEOUT_MS 5000  /* td_nbd_server_shutdown */
#define NBD_PEER_MAX		64

/* What the connection reads next. */
enum nbd_rstate {
	NBD_RS_CLIENT_FLAGS, /* 32-bit client flags */
	NBD_RS_OPT_HEADER,   /* IHAVEOPT, option, length */
	NBD_RS_OPT_DATA,     /* option data, whole in inbuf */
	NBD_RS_OPT_SKIP,     /* option data too long: discarded, then refused */
	NBD_RS_CMD_HEADER,   /* a request header */
	NBD_RS_CMD_BUFFER,   /* header taken, waiting for a data buffer */
	NBD_RS_CMD_PAYLOAD,  /* WRITE data into the command's buffer */
	NBD_RS_CMD_SKIP,     /* WRITE data of a refused command: discarded */
	NBD_RS_STOPPED,	     /* nothing more: DISC, EOF, ABORT, shutdown */
	NBD_RS_TLS,	     /* STARTTLS answered: TLS handshake (nbd-tls.c) */
};

enum nbd_slot_state {
	NBD_SLOT_FREE,
	NBD_SLOT_INPUT, /* header read, payload or buffer pending */
	NBD_SLOT_VBD,	/* given to td_vbd_submit, callback pending */
	NBD_SLOT_REPLY, /* on out_q */
};

/* One command, from its header until its reply has been written. */
struct nbd_slot {
	struct td_vbd_io io; /* io.opaque is the slot */
	struct nbd_conn *conn;
	enum nbd_slot_state state;
	struct nbd_request req;
	struct nbd_plan plan;
	uint32_t error; /* NBD error of the reply */
	/* The reply: reply_len bytes of header here, then reply_data bytes
	 * of buf (a READ's data, BLOCK_STATUS chunks). */
	uint8_t reply[NBD_REPLY_HEAD_MAX_BYTES];
	uint32_t reply_len;
	uint32_t reply_data;
	/* Page-aligned, grown on demand, kept for the next command. */
	uint8_t *buf;
	uint32_t buf_bytes;
	uint32_t payload_done;	    /* WRITE bytes received */
	struct iovec iov;	    /* io.iov points here */
	TAILQ_ENTRY(nbd_slot) link; /* free_slots or out_q */
};

TAILQ_HEAD(nbd_slot_list, nbd_slot);

struct nbd_conn {
	struct td_nbd_server *srv; /* NULL once orphaned by destroy */
	struct td_vbd *vbd;
	struct td_loop *loop;
	TAILQ_ENTRY(nbd_conn) link; /* srv->conns, then srv->dead */
	TAILQ_ENTRY(nbd_conn) dirty_link;
	bool dirty;	   /* on srv->dirty: output to write at pass end */
	bool dead;	   /* socket closed */
	bool transmission; /* handshake done */
	bool blocked;	   /* out of slots, buffer or reply room */
	bool want_out;	   /* socket full: waiting for EPOLLOUT */
	bool draining;	   /* input stopped: close once replies are out */
	char peer[NBD_PEER_MAX];
	uint64_t id;	  /* 1, 2, ... per server: tap-ctl nbd drop ID */
	size_t map_bytes; /* the mapping holding conn and its slots */

	int fd;
	struct td_fd fde;
	/*
	 * The connection's one deadline (nbd_conn_deadline): armed lazily,
	 * for the earliest of them; when it fires the deadlines are worked
	 * out again and it is armed anew if none has passed.
	 */
	struct td_timer timer;
	uint64_t accepted_ns;
	uint64_t active_ns;	  /* last request taken or reply byte sent */
	uint64_t in_start_ns;	  /* the request being read began */
	uint64_t out_progress_ns; /* the socket last took a byte */
	uint64_t drain_start_ns;
	uint64_t bytes_in, bytes_out;
	struct td_defer kick; /* parse again after a resource freed */

	enum nbd_rstate rstate;
	uint32_t client_flags;
	struct nbd_opt_header opt;
	uint64_t skip;	      /* bytes still to discard */
	struct nbd_slot *cur; /* the command being read */
	struct nbd_tls *tls;  /* from STARTTLS on (nbd-tls.c); else NULL */
	/* Negotiated in the handshake (nbd-handshake.c), forgotten at
	 * STARTTLS: structured replies, and the selected metadata contexts,
	 * whose ids are their index + 1. */
	bool structured;
	uint32_t nr_meta;
	char meta[NBD_META_MAX][TD_CTX_NAME_MAX];

	struct nbd_slot *slots;
	uint32_t nr_slots;
	struct nbd_slot_list free_slots; /* LIFO: warm buffers first */
	struct nbd_slot_list out_q;	 /* replies to write, in order */
	uint32_t out_off;      /* bytes of out_q's head already sent */
	uint32_t vbd_inflight; /* slots in NBD_SLOT_VBD */
	uint64_t buf_bytes;    /* data buffer bytes allocated */

	uint32_t in_rpos, in_wpos;
	uint32_t out_rpos, out_wpos;
	uint8_t inbuf[NBD_INBUF_BYTES];
	uint8_t outbuf[NBD_OUTBUF_BYTES];
};

TAILQ_HEAD(nbd_conn_list, nbd_conn);

struct td_nbd_server {
	struct td_frontend fe; /* its shutdown state included */
	struct td_loop *loop;
	struct td_vbd *vbd;
	char *export_name;
	uint32_t max_clients;
	uint32_t max_inflight;
	uint32_t max_buffer_bytes;
	uint32_t max_handshakes;
	uint32_t handshake_timeout_ms;
	uint32_t io_timeout_ms;
	uint32_t idle_timeout_ms;
	uint32_t nr_established; /* open and past the handshake */
	struct nbd_export exp;

	struct td_listener_list listeners;
	struct nbd_conn_list conns; /* socket open */
	struct nbd_conn_list dead;  /* closed, vbd I/O still in flight */
	uint32_t nr_dead;
	struct nbd_conn_list dirty; /* output queued */
	struct td_hook hook;

	struct td_nbd_stats stats;
	struct nbd_tls_server *tls; /* TLS, allowed addresses (nbd-tls.c) */
};

/* --- input and output buffers --------------------------------------------- */

static inline uint32_t nbd_in_avail(const struct nbd_conn *conn)
{
	return conn->in_wpos - conn->in_rpos;
}

static inline const uint8_t *nbd_in_ptr(const struct nbd_conn *conn)
{
	return conn->inbuf + conn->in_rpos;
}

static inline void nbd_in_consume(struct nbd_conn *conn, uint32_t n)
{
	conn->in_rpos += n;
	if (conn->in_rpos == conn->in_wpos)
		conn->in_rpos = conn->in_wpos = 0;
}

static inline bool nbd_has_output(const struct nbd_conn *conn)
{
	return conn->out_wpos != conn->out_rpos || !TAILQ_EMPTY(&conn->out_q) ||
	       nbd_tls_pending_out(conn);
}

/* Bytes of buf (a READ's data, BLOCK_STATUS chunks) after the header. */
static inline uint32_t nbd_slot_reply_bytes(const struct nbd_slot *slot)
{
	return slot->reply_data;
}

/* --- nbd-conn.c: the connection --------------------------------------------- */

/* Serve fd (owned from here on).  Returns 0 or -errno, fd closed. */
int nbd_conn_create(struct td_nbd_server *srv, int fd, const char *peer);
/* Arm the timer for conn's earliest deadline, if it is not armed sooner.
 * Called whenever the connection's state may have changed. */
void nbd_conn_update_timer(struct nbd_conn *conn);
/* Nothing in flight, nothing queued, between requests. */
bool nbd_conn_idle(const struct nbd_conn *conn);
/* The handshake is about to end: make sure an established slot is free
 * (nbd.c), closing the connection idle the longest if need be.  0, or
 * -EBUSY having logged why when every slot is held by a busy one. */
int nbd_admit(struct nbd_conn *conn);
/* Pages for data buffers (mmap; 0 or -ENOMEM), counted in the server's
 * memory_bytes while srv is set; and back. */
int nbd_map(struct td_nbd_server *srv, size_t bytes, void **out);
void nbd_unmap(struct td_nbd_server *srv, void *p, size_t bytes);
/* Pass-end hook: write what conn has queued. */
void nbd_conn_flush(struct nbd_conn *conn);
/* Shutdown: close a handshaking connection, drain a transmitting one. */
void nbd_conn_shutdown(struct nbd_conn *conn);
/* Close the socket now; the connection waits on srv->dead for its I/O. */
void nbd_conn_close(struct nbd_conn *conn);
/* Free a closed connection with no I/O in flight. */
void nbd_conn_free(struct nbd_conn *conn);

/* Queue conn for the pass-end write (unless EPOLLOUT will do it). */
void nbd_conn_mark_dirty(struct nbd_conn *conn);
/* Log why the client is dropped, count a protocol error, and close. */
void nbd_conn_fail(struct nbd_conn *conn, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A resource was freed: a blocked connection parses again, later. */
void nbd_conn_unblock(struct nbd_conn *conn);
/* No more input (DISC, ABORT, EOF, shutdown); drain, then close. */
void nbd_conn_stop_input(struct nbd_conn *conn);
/* Close a draining connection once nothing is in flight or queued. */
void nbd_conn_check_drained(struct nbd_conn *conn);

/*
 * Steps of the input state machine.  Each consumes what it can from
 * inbuf and returns true to be called again, false when it needs more
 * bytes, set conn->blocked, or closed the connection.
 */

/* --- nbd-admin.c: list and drop, for the control socket ---------------------- */

int nbd_control(struct td_frontend *fe, int argc, char **argv,
		struct td_strbuf *out);

/* --- nbd-handshake.c ---------------------------------------------------------- */

bool nbd_hs_step_client_flags(struct nbd_conn *conn);
bool nbd_hs_step_opt_header(struct nbd_conn *conn);
bool nbd_hs_step_opt_data(struct nbd_conn *conn);
/* Answer conn->opt; data is NULL when it was too long and skipped. */
void nbd_hs_option(struct nbd_conn *conn, const uint8_t *data);

/* --- nbd-cmd.c ------------------------------------------------------------------ */

bool nbd_cmd_step_header(struct nbd_conn *conn);
bool nbd_cmd_step_buffer(struct nbd_conn *conn);
bool nbd_cmd_step_payload(struct nbd_conn *conn);
/* Queue slot's reply (error slot->error) for writing: simple, or
 * structured once negotiated. */
void nbd_cmd_reply(struct nbd_conn *conn, struct nbd_slot *slot);
/* Take a free slot (one must exist) / give one back. */
struct nbd_slot *nbd_slot_get(struct nbd_conn *conn);
void nbd_slot_put(struct nbd_conn *conn, struct nbd_slot *slot);

#endif
