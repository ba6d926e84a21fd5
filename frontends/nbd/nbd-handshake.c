/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-handshake.c - option haggling of the fixed-newstyle handshake.
 *
 * Reached from the connection's input state machine (nbd-conn.c) through
 * the nbd_hs_step_* functions.  Replies go to the connection's outbuf;
 * an option is only read when outbuf has room for its largest reply
 * (NBD_OPT_MAX_REPLY_BYTES), so a client that sends options without
 * reading the replies is pushed back instead of buffered.  NBD_OPT_GO
 * and NBD_OPT_EXPORT_NAME end the handshake; every other option is
 * answered and the client may go on.  STRUCTURED_REPLY and the meta
 * context options set what the connection's commands get (nbd-cmd.c);
 * EXTENDED_HEADERS is refused (NBD_REP_ERR_UNSUP).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/nbd/nbd-int.h"

/* Room for one option's replies at the end of outbuf (compacting it). */
static uint8_t *conn_out_reserve(struct nbd_conn *conn, size_t len)
{
	if (conn->out_rpos) {
		memmove(conn->outbuf, conn->outbuf + conn->out_rpos,
			conn->out_wpos - conn->out_rpos);
		conn->out_wpos -= conn->out_rpos;
		conn->out_rpos = 0;
	}
	/* Cannot fail: options are read only with NBD_OPT_MAX_REPLY_BYTES
	 * free (nbd_hs_step_opt_header). */
	if (NBD_OUTBUF_BYTES - conn->out_wpos < len)
		return NULL;
	return conn->outbuf + conn->out_wpos;
}

static void conn_opt_reply(struct nbd_conn *conn, uint32_t type,
			   const void *data, uint32_t len)
{
	uint8_t *p = conn_out_reserve(conn, NBD_OPT_REPLY_HEADER_BYTES + len);

	if (!p) {
		nbd_conn_fail(conn, "option reply does not fit");
		return;
	}
	conn->out_wpos +=
		nbd_put_opt_reply(p, conn->opt.option, type, data, len);
	nbd_conn_mark_dirty(conn);
}

/* An error reply carries a message for the user (nbdinfo prints it). */
static void conn_opt_error(struct nbd_conn *conn, uint32_t type,
			   const char *msg)
{
	td_vbd_dbg(conn->vbd, "nbd %s: %s refused: %s", conn->peer,
		   nbd_opt_name(conn->opt.option), msg);
	conn_opt_reply(conn, type, msg, (uint32_t)strlen(msg));
}

static bool conn_name_ok(const struct nbd_conn *conn, const uint8_t *name,
			 uint32_t len)
{
	const char *want = conn->srv->export_name;

	return !*want || (strlen(want) == len && !memcmp(want, name, len));
}

/* After nbd_admit gave conn its slot.  The handshake's timer stays
 * armed: when it fires, it finds the deadlines of transmission. */
static void conn_enter_transmission(struct nbd_conn *conn)
{
	conn->transmission = true;
	conn->srv->stats.handshaking--;
	conn->srv->nr_established++;
	conn->rstate = NBD_RS_CMD_HEADER;
	conn->active_ns = td_now_ns();
	td_vbd_info(conn->vbd, "nbd %s: connected (size %llu, flags 0x%x)",
		    conn->peer, (unsigned long long)conn->srv->exp.size_bytes,
		    conn->srv->exp.tflags);
}

static void conn_opt_export_name(struct nbd_conn *conn, const uint8_t *data,
				 uint32_t len)
{
	char name[NBD_PEER_MAX];
	uint8_t *p;

	if (!conn_name_ok(conn, data, len)) {
		nbd_printable(data, len, name, sizeof(name));
		/* The option has no error reply: the spec says close. */
		td_vbd_warn(conn->vbd,
			    "nbd %s: unknown export '%s': "
			    "disconnecting",
			    conn->peer, name);
		nbd_conn_close(conn);
		return;
	}
	if (nbd_admit(conn)) {
		/* No error reply either: nbd_admit logged why. */
		nbd_conn_close(conn);
		return;
	}
	p = conn_out_reserve(conn, NBD_EXPORT_NAME_REPLY_BYTES +
					   NBD_EXPORT_NAME_ZEROES);
	if (!p) {
		nbd_conn_fail(conn, "option reply does not fit");
		return;
	}
	conn->out_wpos += nbd_put_export_name_reply(p, &conn->srv->exp,
						    conn->client_flags);
	nbd_conn_mark_dirty(conn);
	conn_enter_transmission(conn);
}

/*
 * Every established slot is busy (nbd_admit logged it): the client is
 * told so and may try again; it stays in the handshake, under its
 * deadline.
 */
static void conn_opt_busy(struct nbd_conn *conn)
{
	char msg[160];

	snprintf(msg, sizeof(msg),
		 "disk %s: all %u connections are busy; try again later",
		 td_vbd_name(conn->vbd), conn->srv->max_clients);
	conn_opt_error(conn, NBD_REP_ERR_POLICY, msg);
}

static void conn_opt_info(struct nbd_conn *conn, const uint8_t *data,
			  uint32_t len)
{
	struct nbd_info_request ir;
	uint32_t err = nbd_parse_info_request(data, len, &ir);
	uint8_t *p;

	if (err) {
		conn_opt_error(conn, err, "malformed GO/INFO request");
		return;
	}
	if (!conn_name_ok(conn, ir.name, ir.name_len)) {
		conn_opt_error(conn, NBD_REP_ERR_UNKNOWN,
			       "unknown export name");
		return;
	}
	if (conn->opt.option == NBD_OPT_GO && nbd_admit(conn)) {
		conn_opt_busy(conn);
		return;
	}
	p = conn_out_reserve(conn, NBD_GO_REPLY_BYTES);
	if (!p) {
		nbd_conn_fail(conn, "option reply does not fit");
		return;
	}
	conn->out_wpos +=
		nbd_put_go_reply(p, conn->opt.option, &conn->srv->exp);
	nbd_conn_mark_dirty(conn);
	if (conn->opt.option == NBD_OPT_GO)
		conn_enter_transmission(conn);
}

static void conn_opt_list(struct nbd_conn *conn)
{
	uint8_t body[4 + NBD_MAX_STRING_BYTES];
	uint32_t len = (uint32_t)strlen(conn->srv->export_name);

	nbd_put32(body, len);
	memcpy(body + 4, conn->srv->export_name, len);
	conn_opt_reply(conn, NBD_REP_SERVER, body, 4 + len);
	if (!conn->dead)
		conn_opt_reply(conn, NBD_REP_ACK, NULL, 0);
}

/*
 * NBD_OPT_STRUCTURED_REPLY: no data; asking twice is harmless.  What the
 * client is told about (READ chunks, ERROR chunks, BLOCK_STATUS) is in
 * nbd-cmd.c.
 */
static void conn_opt_structured(struct nbd_conn *conn, uint32_t len)
{
	if (len) {
		conn_opt_error(conn, NBD_REP_ERR_INVALID,
			       "NBD_OPT_STRUCTURED_REPLY takes no data");
		return;
	}
	conn->structured = true;
	conn_opt_reply(conn, NBD_REP_ACK, NULL, 0);
}

/* The contexts the vbd answers (td_vbd_list_contexts), for matching. */
struct meta_names {
	char names[NBD_META_LIST_MAX][TD_CTX_NAME_MAX];
	uint32_t n;
};

static void meta_collect(const char *name, void *opaque)
{
	struct meta_names *all = opaque;

	if (all->n < NBD_META_LIST_MAX && strlen(name) < TD_CTX_NAME_MAX)
		strcpy(all->names[all->n++], name);
}

static bool meta_wanted(const struct nbd_meta_request *mr, const char *name,
			bool list)
{
	if (list && !mr->nr_queries)
		return true; /* LIST with no query: every context */
	for (uint32_t q = 0; q < mr->nr_queries; q++) {
		const uint8_t *query;
		uint32_t q_len;

		nbd_meta_query(mr, q, &query, &q_len);
		if (nbd_meta_match(name, query, q_len, list))
			return true;
	}
	return false;
}

/* One NBD_REP_META_CONTEXT: id (0 for LIST) and name. */
static void conn_meta_reply(struct nbd_conn *conn, uint32_t id,
			    const char *name)
{
	uint8_t body[4 + TD_CTX_NAME_MAX];
	uint32_t len = (uint32_t)strlen(name);

	nbd_put32(body, id);
	memcpy(body + 4, name, len);
	conn_opt_reply(conn, NBD_REP_META_CONTEXT, body, 4 + len);
}

/*
 * LIST_META_CONTEXT and SET_META_CONTEXT (only once structured replies
 * are on, as the spec says).  SET replaces the selection: the contexts
 * the vbd has that a query names exactly, at most NBD_META_MAX; a query
 * for a context that does not exist selects nothing and gets no reply.
 * Every reply fits in NBD_OPT_MAX_REPLY_BYTES (NBD_META_LIST_MAX names).
 */
static void conn_opt_meta(struct nbd_conn *conn, const uint8_t *data,
			  uint32_t len)
{
	bool list = conn->opt.option == NBD_OPT_LIST_META_CONTEXT;
	struct nbd_meta_request mr;
	struct meta_names all; /* 4 KiB */
	uint32_t err;

	if (!conn->structured) {
		conn_opt_error(conn, NBD_REP_ERR_INVALID,
			       "negotiate NBD_OPT_STRUCTURED_REPLY first");
		return;
	}
	if (!data) {
		conn_opt_error(conn, NBD_REP_ERR_TOO_BIG,
			       "option data too long");
		return;
	}
	if ((err = nbd_parse_meta_request(data, len, &mr))) {
		conn_opt_error(conn, err, "malformed meta context request");
		return;
	}
	if (!conn_name_ok(conn, mr.name, mr.name_len)) {
		conn_opt_error(conn, NBD_REP_ERR_UNKNOWN,
			       "unknown export name");
		return;
	}
	all.n = 0;
	td_vbd_list_contexts(conn->vbd, meta_collect, &all);
	if (!list)
		conn->nr_meta = 0;
	for (uint32_t i = 0; i < all.n && !conn->dead; i++) {
		if (!meta_wanted(&mr, all.names[i], list))
			continue;
		if (list) {
			conn_meta_reply(conn, 0, all.names[i]);
			continue;
		}
		if (conn->nr_meta == NBD_META_MAX)
			break;
		strcpy(conn->meta[conn->nr_meta++], all.names[i]);
		conn_meta_reply(conn, conn->nr_meta, all.names[i]);
	}
	if (!conn->dead)
		conn_opt_reply(conn, NBD_REP_ACK, NULL, 0);
}

/*
 * STARTTLS, and every option while TLS is required and not yet on
 * (nbd-tls.c decides).  Returns true when it answered the option.
 */
static bool conn_opt_tls(struct nbd_conn *conn)
{
	const char *msg = NULL;
	uint32_t err = 0;
	int e;

	switch (nbd_tls_conn_action(conn, &err, &msg)) {
	case NBD_TLS_SERVE:
		return false;
	case NBD_TLS_REFUSE:
		if (err == NBD_REP_ERR_TLS_REQD)
			td_vbd_info(conn->vbd,
				    "nbd %s: %s refused: TLS required",
				    conn->peer, nbd_opt_name(conn->opt.option));
		conn_opt_error(conn, err, msg);
		return true;
	case NBD_TLS_CLOSE:
		/* The option has no error reply: the spec says close. */
		nbd_conn_fail(conn, "NBD_OPT_EXPORT_NAME without TLS, which "
				    "this server requires");
		return true;
	case NBD_TLS_START:
		/* What was negotiated in plaintext is forgotten. */
		conn->structured = false;
		conn->nr_meta = 0;
		conn_opt_reply(conn, NBD_REP_ACK, NULL, 0);
		if (!conn->dead && (e = nbd_tls_start(conn)))
			nbd_conn_fail(conn, "STARTTLS: %s",
				      e == -EPROTO
					      ? "data sent before the reply"
					      : strerror(-e));
		return true;
	}
	return false;
}

/* data is NULL when the option's data was too long and was skipped. */
void nbd_hs_option(struct nbd_conn *conn, const uint8_t *data)
{
	uint32_t len = conn->opt.length;

	conn->rstate = NBD_RS_OPT_HEADER;
	if (conn_opt_tls(conn))
		return;
	switch (conn->opt.option) {
	case NBD_OPT_EXPORT_NAME: /* never skipped: see nbd_hs_step_opt_header */
		conn_opt_export_name(conn, data, len);
		break;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		if (data)
			conn_opt_info(conn, data, len);
		else
			conn_opt_error(conn, NBD_REP_ERR_TOO_BIG,
				       "option data too long");
		break;
	case NBD_OPT_LIST:
		if (len)
			conn_opt_error(conn, NBD_REP_ERR_INVALID,
				       "NBD_OPT_LIST takes no data");
		else
			conn_opt_list(conn);
		break;
	case NBD_OPT_ABORT: /* data, if any, is ignored as the spec asks */
		conn_opt_reply(conn, NBD_REP_ACK, NULL, 0);
		nbd_conn_stop_input(conn);
		break;
	case NBD_OPT_STRUCTURED_REPLY:
		conn_opt_structured(conn, len);
		break;
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		conn_opt_meta(conn, data, len);
		break;
	default: /* EXTENDED_HEADERS included */
		conn_opt_error(conn, NBD_REP_ERR_UNSUP, "option not supported");
		break;
	}
}

bool nbd_hs_step_client_flags(struct nbd_conn *conn)
{
	uint32_t flags;

	if (nbd_in_avail(conn) < NBD_CLIENT_FLAGS_BYTES)
		return false;
	flags = nbd_get32(nbd_in_ptr(conn));
	nbd_in_consume(conn, NBD_CLIENT_FLAGS_BYTES);
	if (flags & ~NBD_CLIENT_FLAGS_KNOWN) {
		nbd_conn_fail(conn, "unknown client flags 0x%08x", flags);
		return false;
	}
	conn->client_flags = flags;
	conn->rstate = NBD_RS_OPT_HEADER;
	return true;
}

bool nbd_hs_step_opt_header(struct nbd_conn *conn)
{
	/* Back-pressure on a client that sends options without reading. */
	if (NBD_OUTBUF_BYTES - (conn->out_wpos - conn->out_rpos) <
	    NBD_OPT_MAX_REPLY_BYTES) {
		conn->blocked = true;
		return false;
	}
	if (nbd_in_avail(conn) < NBD_OPT_HEADER_BYTES)
		return false;
	nbd_decode_opt_header(nbd_in_ptr(conn), &conn->opt);
	nbd_in_consume(conn, NBD_OPT_HEADER_BYTES);
	if (conn->opt.magic != NBD_IHAVEOPT) {
		nbd_conn_fail(conn, "bad option magic 0x%016llx",
			      (unsigned long long)conn->opt.magic);
		return false;
	}
	if (conn->opt.length <= NBD_OPT_MAX_DATA_BYTES) {
		conn->rstate = NBD_RS_OPT_DATA;
		return true;
	}
	if (conn->opt.option == NBD_OPT_EXPORT_NAME) {
		nbd_conn_fail(conn, "export name of %u bytes",
			      conn->opt.length);
		return false;
	}
	conn->skip = conn->opt.length;
	conn->rstate = NBD_RS_OPT_SKIP;
	return true;
}

bool nbd_hs_step_opt_data(struct nbd_conn *conn)
{
	uint32_t len = conn->opt.length;

	const uint8_t *data = nbd_in_ptr(conn);

	/* len <= NBD_OPT_MAX_DATA_BYTES < NBD_INBUF_BYTES: it fits. */
	if (nbd_in_avail(conn) < len)
		return false;
	/* Consumed first, still readable: nothing refills inbuf before the
	 * next recv, and ABORT may reset it. */
	nbd_in_consume(conn, len);
	nbd_hs_option(conn, data);
	return !conn->dead;
}
