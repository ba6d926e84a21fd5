/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-cmd.c - the commands of the transmission phase: slots, data
 * buffers, submission to the vbd, replies.
 *
 * A slot holds one command from its header until its reply has been
 * written; the max_inflight slots of a connection are allocated with it.
 * Data buffers are mapped pages (nbd_map: given back to the system when
 * freed, so that no allocator keeps them after the connection), grown on
 * demand and kept in their slot for the next command, within the
 * connection's max_buffer_bytes.  A
 * command refused before the vbd (nbd_check_request) gets its error
 * reply once a WRITE's payload has been read and dropped.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/nbd/nbd-int.h"

struct nbd_slot *nbd_slot_get(struct nbd_conn *conn)
{
	struct nbd_slot *slot = TAILQ_FIRST(&conn->free_slots);

	TAILQ_REMOVE(&conn->free_slots, slot, link);
	slot->state = NBD_SLOT_INPUT;
	slot->error = 0;
	slot->payload_done = 0;
	return slot;
}

void nbd_slot_put(struct nbd_conn *conn, struct nbd_slot *slot)
{
	slot->state = NBD_SLOT_FREE;
	TAILQ_INSERT_HEAD(&conn->free_slots, slot, link);
	nbd_conn_unblock(conn);
}

static void slot_buf_free(struct nbd_conn *conn, struct nbd_slot *slot)
{
	if (!slot->buf)
		return;
	conn->buf_bytes -= slot->buf_bytes;
	nbd_unmap(conn->srv, slot->buf, slot->buf_bytes);
	slot->buf = NULL;
	slot->buf_bytes = 0;
}

/* Free the buffers of idle slots, to make room under the budget. */
static void conn_release_idle(struct nbd_conn *conn)
{
	struct nbd_slot *slot;

	TAILQ_FOREACH(slot, &conn->free_slots, link)
	{
		slot_buf_free(conn, slot);
	}
}

/* Powers of two from one page, at most the largest request. */
static uint64_t slot_buf_size(const struct nbd_conn *conn, uint32_t need)
{
	uint64_t cap = conn->srv->exp.max_request_bytes;
	uint64_t size = NBD_BUF_ALIGN;

	cap = (cap + NBD_BUF_ALIGN - 1) & ~(uint64_t)(NBD_BUF_ALIGN - 1);
	while (size < need && size < cap)
		size <<= 1;
	return size < cap ? size : cap;
}

/*
 * Give slot a buffer of need bytes.  The bytes allocated by one
 * connection never exceed srv->max_buffer_bytes (at least one largest
 * request): over it, idle slots give theirs back, and if that is not
 * enough the command waits (-EAGAIN) for busy slots to finish.  With no
 * other command in flight it always fits.  Returns 0, -EAGAIN or -ENOMEM.
 */
static int slot_reserve(struct nbd_conn *conn, struct nbd_slot *slot,
			uint32_t need)
{
	uint64_t budget = conn->srv->max_buffer_bytes;
	uint64_t size;
	void *buf;

	if (slot->buf_bytes >= need)
		return 0;
	size = slot_buf_size(conn, need);
	if (conn->buf_bytes - slot->buf_bytes + size > budget) {
		conn_release_idle(conn);
		if (conn->buf_bytes - slot->buf_bytes + size > budget)
			return -EAGAIN;
	}
	slot_buf_free(conn, slot);
	if (nbd_map(conn->srv, size, &buf))
		return -ENOMEM;
	slot->buf = buf;
	slot->buf_bytes = (uint32_t)size;
	conn->buf_bytes += size;
	return 0;
}

void nbd_cmd_reply(struct nbd_conn *conn, struct nbd_slot *slot)
{
	if (slot->error && conn->srv)
		conn->srv->stats.error_replies++;
	nbd_put_simple_reply(slot->reply, slot->error, slot->req.handle);
	slot->state = NBD_SLOT_REPLY;
	TAILQ_INSERT_TAIL(&conn->out_q, slot, link);
	nbd_conn_mark_dirty(conn);
}

static void slot_io_done(struct td_vbd_io *io, int err)
{
	struct nbd_slot *slot = io->opaque;
	struct nbd_conn *conn = slot->conn;

	conn->vbd_inflight--;
	if (conn->dead) {
		nbd_slot_put(conn, slot);
		/* Orphaned by the destroy op (nbd.c): last one out frees. */
		if (!conn->srv && !conn->vbd_inflight)
			nbd_conn_free(conn);
		return;
	}
	slot->error = nbd_map_error(err, slot->req.type);
	if (err)
		td_vbd_warn(conn->vbd, "nbd %s: %s of %u bytes at %llu: %s",
			    conn->peer, nbd_cmd_name(slot->req.type),
			    slot->req.length,
			    (unsigned long long)slot->req.offset,
			    strerror(-err));
	nbd_cmd_reply(conn, slot);
}

static void conn_submit(struct nbd_conn *conn, struct nbd_slot *slot)
{
	struct td_vbd_io *io = &slot->io;
	int err;

	io->op = slot->plan.op;
	io->flags = slot->plan.td_flags;
	io->sector = slot->req.offset >> TD_SECTOR_SHIFT;
	io->nr_sectors = slot->req.length >> TD_SECTOR_SHIFT;
	io->iov = NULL;
	io->iovcnt = 0;
	io->nr_segments = 0;
	if (slot->plan.data_bytes) {
		slot->iov.iov_base = slot->buf;
		slot->iov.iov_len = slot->plan.data_bytes;
		io->iov = &slot->iov;
		io->iovcnt = 1;
	}
	io->cb = slot_io_done;
	io->opaque = slot;
	slot->state = NBD_SLOT_VBD;
	err = td_vbd_submit(conn->vbd, io);
	if (err) {
		slot->error = nbd_map_error(err, slot->req.type);
		td_vbd_dbg(conn->vbd, "nbd %s: %s refused by the vbd: %s",
			   conn->peer, nbd_cmd_name(slot->req.type),
			   strerror(-err));
		nbd_cmd_reply(conn, slot);
		return;
	}
	conn->vbd_inflight++;
}

/* Reply with slot->error, once a WRITE's payload has been discarded. */
static void conn_refuse(struct nbd_conn *conn, struct nbd_slot *slot)
{
	if (nbd_request_has_payload(&slot->req) && slot->req.length) {
		conn->cur = slot;
		conn->skip = slot->req.length;
		conn->rstate = NBD_RS_CMD_SKIP;
		return;
	}
	conn->cur = NULL;
	conn->rstate = NBD_RS_CMD_HEADER;
	nbd_cmd_reply(conn, slot);
}

static bool conn_start_cmd(struct nbd_conn *conn, struct nbd_slot *slot)
{
	struct nbd_request *req = &slot->req;

	if (req->magic != NBD_REQUEST_MAGIC) {
		nbd_slot_put(conn, slot);
		nbd_conn_fail(conn, "bad request magic 0x%08x", req->magic);
		return false;
	}
	conn->srv->stats.commands++;
	if (req->type == NBD_CMD_DISC) {
		/* Anything sent after DISC is never read. */
		nbd_slot_put(conn, slot);
		td_vbd_dbg(conn->vbd, "nbd %s: disconnect requested",
			   conn->peer);
		nbd_conn_stop_input(conn);
		nbd_conn_check_drained(conn);
		return false;
	}
	slot->error = nbd_check_request(&conn->srv->exp, req, &slot->plan);
	if (slot->error) {
		td_vbd_warn(conn->vbd,
			    "nbd %s: %s (type %u, flags 0x%x) of %u "
			    "bytes at %llu refused: error %u",
			    conn->peer, nbd_cmd_name(req->type), req->type,
			    req->flags, req->length,
			    (unsigned long long)req->offset, slot->error);
		conn_refuse(conn, slot);
		return true;
	}
	conn->cur = slot;
	conn->rstate = NBD_RS_CMD_BUFFER;
	return true;
}

bool nbd_cmd_step_header(struct nbd_conn *conn)
{
	struct nbd_slot *slot;

	if (TAILQ_EMPTY(&conn->free_slots)) {
		conn->blocked = true; /* max_inflight reached */
		return false;
	}
	if (nbd_in_avail(conn) < NBD_REQUEST_BYTES)
		return false;
	slot = nbd_slot_get(conn);
	nbd_decode_request(nbd_in_ptr(conn), &slot->req);
	nbd_in_consume(conn, NBD_REQUEST_BYTES);
	/* A request taken; what follows (payload, next header) starts now. */
	conn->active_ns = conn->in_start_ns = td_now_ns();
	return conn_start_cmd(conn, slot);
}

bool nbd_cmd_step_buffer(struct nbd_conn *conn)
{
	struct nbd_slot *slot = conn->cur;
	int err = 0;

	if (slot->plan.data_bytes)
		err = slot_reserve(conn, slot, slot->plan.data_bytes);
	if (err == -EAGAIN) {
		conn->blocked = true; /* max_buffer_bytes reached */
		return false;
	}
	if (err) {
		td_vbd_warn(conn->vbd, "nbd %s: no memory for %u bytes",
			    conn->peer, slot->plan.data_bytes);
		slot->error = NBD_ENOMEM;
		conn_refuse(conn, slot);
		return true;
	}
	if (slot->req.type == NBD_CMD_WRITE) {
		conn->rstate = NBD_RS_CMD_PAYLOAD;
		/* The payload's deadline starts once a buffer is there. */
		conn->in_start_ns = td_now_ns();
		return true;
	}
	conn->cur = NULL;
	conn->rstate = NBD_RS_CMD_HEADER;
	conn_submit(conn, slot);
	return true;
}

bool nbd_cmd_step_payload(struct nbd_conn *conn)
{
	struct nbd_slot *slot = conn->cur;
	uint32_t want = slot->req.length - slot->payload_done;
	uint32_t n = nbd_in_avail(conn) < want ? nbd_in_avail(conn) : want;

	memcpy(slot->buf + slot->payload_done, nbd_in_ptr(conn), n);
	nbd_in_consume(conn, n);
	slot->payload_done += n;
	if (slot->payload_done < slot->req.length)
		return false;
	conn->in_start_ns = td_now_ns();
	conn->cur = NULL;
	conn->rstate = NBD_RS_CMD_HEADER;
	conn_submit(conn, slot);
	return true;
}
