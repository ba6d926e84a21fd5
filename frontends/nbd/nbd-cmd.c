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
 * reply once a WRITE's payload has been read and dropped.  BLOCK_STATUS
 * is answered at once (td_vbd_block_status is synchronous), its chunks
 * built in the slot's buffer.  Replies are simple, or structured chunks
 * once the client negotiated them (nbd-handshake.c).
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
	slot->reply_data = 0;
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

/*
 * Structured replies: one chunk, flagged DONE.  A READ's data follows an
 * OFFSET_DATA header; BLOCK_STATUS chunks are already in buf; an error is
 * an ERROR chunk with an empty message; anything else is a NONE chunk.
 */
static void slot_structured_reply(struct nbd_slot *slot, uint32_t bs_bytes)
{
	const struct nbd_request *req = &slot->req;
	uint8_t *p = slot->reply + NBD_STRUCTURED_REPLY_BYTES;

	if (slot->error) {
		nbd_put_structured_reply(slot->reply, NBD_REPLY_FLAG_DONE,
					 NBD_REPLY_TYPE_ERROR, req->handle,
					 4 + 2);
		nbd_put32(p, slot->error);
		nbd_put16(p + 4, 0); /* no message */
		slot->reply_len = NBD_STRUCTURED_REPLY_BYTES + 4 + 2;
	} else if (req->type == NBD_CMD_READ) {
		nbd_put_structured_reply(slot->reply, NBD_REPLY_FLAG_DONE,
					 NBD_REPLY_TYPE_OFFSET_DATA,
					 req->handle, 8 + req->length);
		nbd_put64(p, req->offset);
		slot->reply_len = NBD_STRUCTURED_REPLY_BYTES + 8;
		slot->reply_data = req->length;
	} else if (slot->plan.block_status) {
		slot->reply_len = 0;
		slot->reply_data = bs_bytes;
	} else {
		nbd_put_structured_reply(slot->reply, NBD_REPLY_FLAG_DONE,
					 NBD_REPLY_TYPE_NONE, req->handle, 0);
		slot->reply_len = NBD_STRUCTURED_REPLY_BYTES;
	}
}

void nbd_cmd_reply(struct nbd_conn *conn, struct nbd_slot *slot)
{
	uint32_t bs_bytes = slot->reply_data; /* BLOCK_STATUS chunks */

	if (slot->error && conn->srv)
		conn->srv->stats.error_replies++;
	slot->reply_data = 0;
	if (conn->structured) {
		slot_structured_reply(slot, bs_bytes);
	} else {
		nbd_put_simple_reply(slot->reply, slot->error,
				     slot->req.handle);
		slot->reply_len = NBD_SIMPLE_REPLY_BYTES;
		if (slot->req.type == NBD_CMD_READ && !slot->error)
			slot->reply_data = slot->req.length;
	}
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

/*
 * Extents per context of one BLOCK_STATUS reply: every selected
 * context's chunk must fit in one data buffer (at most the largest
 * request, >= 4096 bytes: nbd.c), and REQ_ONE asks for a single one.
 */
static uint32_t conn_bs_room(const struct nbd_conn *conn,
			     const struct nbd_slot *slot)
{
	uint32_t per_ctx = conn->srv->exp.max_request_bytes / conn->nr_meta;
	uint32_t room = (per_ctx - NBD_STRUCTURED_REPLY_BYTES -
			 NBD_BLOCK_STATUS_ID_BYTES) /
			NBD_BLOCK_STATUS_EXTENT_BYTES;

	if (slot->req.flags & NBD_CMD_FLAG_REQ_ONE)
		return 1;
	return room < NBD_BLOCK_STATUS_MAX_EXTENTS
		       ? room
		       : NBD_BLOCK_STATUS_MAX_EXTENTS;
}

static uint32_t conn_bs_bytes(const struct nbd_conn *conn,
			      const struct nbd_slot *slot)
{
	return conn->nr_meta *
	       (NBD_STRUCTURED_REPLY_BYTES + NBD_BLOCK_STATUS_ID_BYTES +
		conn_bs_room(conn, slot) * NBD_BLOCK_STATUS_EXTENT_BYTES);
}

/*
 * Put one context's extents on the wire: in bytes, cut at the requested
 * range (a driver may not go beyond it, but is not trusted to), empty
 * ones dropped.  The TD_EXTENT_* flags are NBD's values (driver.h).
 * Returns how many, 0 when nothing usable came.
 */
static uint32_t bs_extents(const struct td_extent *ext, unsigned int nr,
			   uint64_t nr_sectors, uint32_t *lengths,
			   uint32_t *flags)
{
	uint32_t n = 0;

	for (unsigned int i = 0; i < nr && nr_sectors; i++) {
		uint64_t len = ext[i].nr_sectors < nr_sectors
				       ? ext[i].nr_sectors
				       : nr_sectors;

		if (!len)
			continue;
		nr_sectors -= len;
		/* <= the request's 32-bit length: it fits. */
		lengths[n] = (uint32_t)(len << TD_SECTOR_SHIFT);
		flags[n++] = ext[i].flags;
	}
	return n;
}

/*
 * Answer BLOCK_STATUS into the slot's buffer: one chunk per selected
 * context, in id order, the last flagged DONE.  The drivers answer
 * synchronously (driver op block_status).  Any context failing fails
 * the whole command with an ERROR chunk.
 */
static void conn_block_status(struct nbd_conn *conn, struct nbd_slot *slot)
{
	struct td_extent ext[NBD_BLOCK_STATUS_MAX_EXTENTS];
	uint32_t lengths[NBD_BLOCK_STATUS_MAX_EXTENTS];
	uint32_t flags[NBD_BLOCK_STATUS_MAX_EXTENTS];
	uint64_t sector = slot->req.offset >> TD_SECTOR_SHIFT;
	uint64_t nr_sectors = slot->plan.bs_length >> TD_SECTOR_SHIFT;
	size_t off = 0;

	for (uint32_t i = 0; i < conn->nr_meta; i++) {
		unsigned int nr = conn_bs_room(conn, slot);
		int err = td_vbd_block_status(conn->vbd, conn->meta[i], sector,
					      nr_sectors, ext, &nr);
		uint32_t n =
			err ? 0
			    : bs_extents(ext, nr, nr_sectors, lengths, flags);

		if (!n) {
			td_vbd_warn(conn->vbd,
				    "nbd %s: BLOCK_STATUS in %s at %llu: %s",
				    conn->peer, conn->meta[i],
				    (unsigned long long)slot->req.offset,
				    err ? strerror(-err) : "no extents");
			slot->error = NBD_EIO;
			nbd_cmd_reply(conn, slot);
			return;
		}
		off += nbd_put_block_status(
			slot->buf + off,
			i + 1 == conn->nr_meta ? NBD_REPLY_FLAG_DONE : 0,
			slot->req.handle, i + 1, lengths, flags, n);
	}
	slot->reply_data = (uint32_t)off;
	nbd_cmd_reply(conn, slot);
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
	if (slot->plan.block_status) {
		/* Only with structured replies and a context to answer. */
		if (!conn->structured || !conn->nr_meta) {
			td_vbd_warn(conn->vbd,
				    "nbd %s: BLOCK_STATUS refused: %s",
				    conn->peer,
				    conn->structured
					    ? "no metadata context selected"
					    : "structured replies not "
					      "negotiated");
			slot->error = NBD_EINVAL;
			conn_refuse(conn, slot);
			return true;
		}
		slot->plan.data_bytes = conn_bs_bytes(conn, slot);
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
	if (slot->plan.block_status)
		conn_block_status(conn, slot);
	else
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
