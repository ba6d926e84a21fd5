/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-admin.c - the operator's view of the NBD server: its connections
 * listed (peer, state, age, idle time, bytes) and dropped by id, behind
 * the frontend's control op ("tap-ctl nbd"; doc/control-protocol.md).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/nbd/nbd-int.h"

#define NS_PER_MS 1000000ull

/* What a connection is doing, as "list" names it. */
static const char *nbd_conn_state(const struct nbd_conn *conn)
{
	if (conn->draining)
		return "draining";
	if (!conn->transmission)
		return "handshake";
	if (nbd_conn_idle(conn))
		return "idle";
	if (conn->rstate == NBD_RS_CMD_PAYLOAD ||
	    conn->rstate == NBD_RS_CMD_SKIP)
		return "payload";
	return "busy";
}

static uint64_t ms_since(uint64_t now, uint64_t ns)
{
	return now > ns ? (now - ns) / NS_PER_MS : 0;
}

static uint64_t conn_buffer_bytes(const struct nbd_conn *conn)
{
	return conn->buf_bytes + conn->map_bytes;
}

static void nbd_list_json(struct td_nbd_server *srv, struct td_strbuf *out)
{
	uint64_t now = td_now_ns();
	struct nbd_conn *conn;
	struct td_json j;

	td_json_init(&j, out);
	td_json_begin_object(&j, NULL);
	td_json_u64(&j, "max_clients", srv->max_clients);
	td_json_u64(&j, "max_handshakes", srv->max_handshakes);
	td_json_u64(&j, "handshake_timeout_ms", srv->handshake_timeout_ms);
	td_json_u64(&j, "io_timeout_ms", srv->io_timeout_ms);
	td_json_u64(&j, "idle_timeout_ms", srv->idle_timeout_ms);
	td_json_begin_array(&j, "connections");
	TAILQ_FOREACH(conn, &srv->conns, link)
	{
		td_json_begin_object(&j, NULL);
		td_json_u64(&j, "id", conn->id);
		td_json_str(&j, "peer", conn->peer);
		td_json_str(&j, "state", nbd_conn_state(conn));
		td_json_u64(&j, "age_ms", ms_since(now, conn->accepted_ns));
		td_json_u64(&j, "idle_ms", ms_since(now, conn->active_ns));
		td_json_u64(&j, "bytes_in", conn->bytes_in);
		td_json_u64(&j, "bytes_out", conn->bytes_out);
		td_json_u64(&j, "in_flight", conn->vbd_inflight);
		td_json_u64(&j, "memory_bytes", conn_buffer_bytes(conn));
		td_json_end_object(&j);
	}
	td_json_end_array(&j);
	td_json_end_object(&j);
	td_json_finish(&j);
}

static void nbd_list_text(struct td_nbd_server *srv, struct td_strbuf *out)
{
	uint64_t now = td_now_ns();
	struct nbd_conn *conn;

	td_strbuf_printf(out,
			 "%" PRIu64 " connections (%u at most, %u in the "
			 "handshake at most)\n",
			 srv->stats.clients, srv->max_clients,
			 srv->max_handshakes);
	td_strbuf_printf(out, "%-6s %-28s %-9s %9s %9s %12s %12s\n", "ID",
			 "PEER", "STATE", "AGE_S", "IDLE_S", "BYTES_IN",
			 "BYTES_OUT");
	TAILQ_FOREACH(conn, &srv->conns, link)
	{
		td_strbuf_printf(out,
				 "%-6" PRIu64
				 " %-28s %-9s %9.1f %9.1f %12" PRIu64
				 " %12" PRIu64 "\n",
				 conn->id, conn->peer, nbd_conn_state(conn),
				 (double)ms_since(now, conn->accepted_ns) / 1e3,
				 (double)ms_since(now, conn->active_ns) / 1e3,
				 conn->bytes_in, conn->bytes_out);
	}
}

void td_nbd_server_list(struct td_nbd_server *srv, bool json,
			struct td_strbuf *out)
{
	if (json)
		nbd_list_json(srv, out);
	else
		nbd_list_text(srv, out);
}

int td_nbd_server_drop(struct td_nbd_server *srv, uint64_t id)
{
	struct nbd_conn *conn;

	TAILQ_FOREACH(conn, &srv->conns, link)
	{
		if (conn->id != id)
			continue;
		td_vbd_warn(srv->vbd, "nbd %s: dropped by the operator",
			    conn->peer);
		nbd_conn_close(conn);
		return 0;
	}
	return -ENOENT;
}

/* "drop ID": a connection's id as "list" shows it. */
static int nbd_control_drop(struct td_nbd_server *srv, const char *arg,
			    struct td_strbuf *out)
{
	char *end;
	unsigned long long id;

	errno = 0;
	id = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || !id) {
		td_strbuf_printf(out,
				 "'%.64s' is not a connection id (see "
				 "'list')",
				 arg);
		return -EINVAL;
	}
	if (td_nbd_server_drop(srv, id)) {
		td_strbuf_printf(out, "no open connection %llu (see 'list')",
				 id);
		return -ENOENT;
	}
	td_strbuf_printf(out, "connection %llu dropped\n", id);
	return 0;
}

/* The frontend's control op (frontend.h): list [json] | drop ID. */
int nbd_control(struct td_frontend *fe, int argc, char **argv,
		struct td_strbuf *out)
{
	struct td_nbd_server *srv = td_nbd_server_of(fe);

	if (argc >= 1 && !strcmp(argv[0], "list") &&
	    (argc == 1 || (argc == 2 && !strcmp(argv[1], "json")))) {
		td_nbd_server_list(srv, argc == 2, out);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[0], "drop"))
		return nbd_control_drop(srv, argv[1], out);
	td_strbuf_puts(out, "usage: list [json] | drop ID");
	return -EINVAL;
}
