/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm.c - the shm server: parameters, listening sockets, accepting
 * frontends, shutdown and statistics.  One frontend's negotiation and
 * ring are in shm-conn.c, the wire format in shm-proto.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/sock.h"
#include "common/util.h"
#include "frontends/shm/shm-int.h"

#define SHM_LISTEN_BACKLOG	 64
#define SHM_SOCKET_MODE		 0600
#define SHM_SHUTDOWN_POLL_US	 1000
#define SHM_NS_PER_MS		 1000000ull
#define SHM_REFUSE_BUSY		 "too many frontends on this disk"
#define SHM_REFUSE_SHUTTING_DOWN "tapdisk is shutting down"

void shm_ring_stats_add(struct blkif_ring_stats *a,
			const struct blkif_ring_stats *b)
{
	for (unsigned int i = 0; i < BLKIF_STAT_OPS; i++)
		a->reqs[i] += b->reqs[i];
	a->indirect_reqs += b->indirect_reqs;
	a->segments += b->segments;
	a->bad_reqs += b->bad_reqs;
	a->unsupported += b->unsupported;
	a->io_errors += b->io_errors;
	a->protocol_errors += b->protocol_errors;
	a->notifications += b->notifications;
	a->indirect_waits += b->indirect_waits;
	a->data_waits += b->data_waits;
	a->copy_batches += b->copy_batches;
	a->polled_reqs += b->polled_reqs;
}

/* --- listeners -------------------------------------------------------------- */

/* Refuse fd with one error line (best effort), counted. */
static int shm_refuse(struct td_shm_server *srv, int fd, const char *why)
{
	char line[SHM_LINE_MAX];
	int n = shm_format_error(-EBUSY, why, line, sizeof(line));

	if (n > 0)
		(void)!send(fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
	srv->stats.refused++;
	td_vbd_warn(srv->vbd, "shm: frontend refused: %s", why);
	return -EBUSY;
}

/* Admit a connected socket, or refuse it.  Takes fd. */
static int shm_serve(struct td_shm_server *srv, int fd, const char *what)
{
	char peer[SHM_PEER_MAX];
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int err;

	if (srv->fe.stopping)
		return shm_refuse(srv, fd, SHM_REFUSE_SHUTTING_DOWN);
	if (srv->nr_conns >= srv->max_clients)
		return shm_refuse(srv, fd, SHM_REFUSE_BUSY);
	srv->stats.clients_total++;
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) && cred.pid)
		snprintf(peer, sizeof(peer), "%s#%llu pid %d", what,
			 (unsigned long long)srv->stats.clients_total,
			 (int)cred.pid);
	else
		snprintf(peer, sizeof(peer), "%s#%llu", what,
			 (unsigned long long)srv->stats.clients_total);
	err = shm_conn_create(srv, fd, peer);
	if (err)
		td_vbd_err(srv->vbd, "shm %s: %s", peer, strerror(-err));
	return err;
}

/* The listeners' callback (listener.h): every client is a Unix one. */
static void shm_on_accept(int fd, const char *peer, void *opaque)
{
	struct td_shm_server *srv = opaque;

	if (fd < 0) {
		td_vbd_warn(srv->vbd, "shm: accept: %s: pausing",
			    strerror(-fd));
		return;
	}
	shm_serve(srv, fd, "unix");
}

int td_shm_server_listen(struct td_shm_server *srv, const char *path)
{
	int fd, err;

	if (srv->fe.stopping)
		return -ESHUTDOWN;
	if ((fd = td_sock_bind_unix("shm", path, SHM_SOCKET_MODE)) < 0)
		return fd;
	err = td_listener_add(&srv->listeners, srv->loop, fd, path,
			      SHM_LISTEN_BACKLOG, shm_on_accept, srv);
	if (err)
		td_err("shm: listen on %s: %s", path, strerror(-err));
	return err;
}

int td_shm_server_add_client(struct td_shm_server *srv, int fd,
			     const char *peer)
{
	return shm_serve(srv, fd, peer ? peer : "fd");
}

/* --- shutdown ----------------------------------------------------------------- */

void shm_server_conn_gone(struct td_shm_server *srv, struct shm_conn *conn)
{
	TAILQ_REMOVE(&srv->conns, conn, link);
	srv->nr_conns--;
	td_frontend_stop_check(&srv->fe, TAILQ_EMPTY(&srv->conns));
}

static void shm_close_all(struct td_shm_server *srv)
{
	struct shm_conn *conn, *next;

	for (conn = TAILQ_FIRST(&srv->conns); conn; conn = next) {
		next = TAILQ_NEXT(conn, link);
		shm_conn_close(conn, NULL);
	}
}

/*
 * The rings take no new request; once nothing is in flight in the vbd
 * (so every request a ring took has been answered: responses are pushed
 * in the pass that completes them, before this timer's next run), close
 * them.  The vbd's count covers the other frontends too, which are
 * stopping as well; the deadline bounds the wait either way.
 */
static void shm_shutdown_poll(struct td_timer *t, void *opaque)
{
	struct td_shm_server *srv = opaque;
	struct td_vbd_stats st;

	td_vbd_get_stats(srv->vbd, &st);
	if (st.inflight && td_now_ns() < srv->shutdown_deadline_ns) {
		td_loop_timer_arm(srv->loop, &srv->fe.stop_timer,
				  SHM_SHUTDOWN_POLL_US, shm_shutdown_poll, srv);
		return;
	}
	if (st.inflight)
		td_vbd_warn(srv->vbd,
			    "shm: I/O still in flight after %u ms: closing "
			    "the rings without their responses",
			    TD_SHM_SHUTDOWN_TIMEOUT_MS);
	shm_close_all(srv);
}

/* The frontend op (frontend.h). */
static int shm_shutdown(struct td_frontend *fe, td_frontend_done_fn done,
			void *opaque)
{
	struct td_shm_server *srv = td_shm_server_of(fe);
	struct shm_conn *conn, *next;
	int err = td_frontend_stop_begin(fe, done, opaque);

	if (err)
		return err;
	td_listener_close_all(&srv->listeners);
	for (conn = TAILQ_FIRST(&srv->conns); conn; conn = next) {
		next = TAILQ_NEXT(conn, link);
		if (conn->state == SHM_CONN_HANDSHAKE)
			shm_conn_close(conn, NULL);
		else if (conn->state == SHM_CONN_CONNECTED)
			shm_conn_quiesce(conn);
	}
	srv->shutdown_deadline_ns =
		td_now_ns() + TD_SHM_SHUTDOWN_TIMEOUT_MS * SHM_NS_PER_MS;
	td_loop_timer_arm(srv->loop, &fe->stop_timer, 0, shm_shutdown_poll,
			  srv);
	td_frontend_stop_check(fe, TAILQ_EMPTY(&srv->conns));
	return 0;
}

/* --- create, destroy, stats -------------------------------------------------------- */

static int shm_apply_params(struct td_shm_server *srv,
			    const struct td_shm_params *p)
{
	uint64_t max_data = p->max_data_bytes ?: TD_SHM_DEFAULT_MAX_DATA_BYTES;

	if (p->blkif) {
		srv->cfg = *p->blkif;
	} else {
		blkif_config_init(&srv->cfg);
		srv->cfg.max_ring_order = BLKIF_MAX_RING_ORDER;
	}
	if (blkif_config_check(&srv->cfg))
		return -EINVAL;
	if (max_data < SHM_PAGE_SIZE || max_data % SHM_PAGE_SIZE ||
	    max_data > TD_SHM_MAX_DATA_BYTES_LIMIT) {
		td_err("shm: max data pool of %llu bytes: give a multiple of "
		       "%u from %u to %llu",
		       (unsigned long long)max_data, SHM_PAGE_SIZE,
		       SHM_PAGE_SIZE, TD_SHM_MAX_DATA_BYTES_LIMIT);
		return -EINVAL;
	}
	if (p->max_queues > SHM_MAX_QUEUES) {
		td_err("shm: %" PRIu32 " rings per frontend: give 1 to %d",
		       p->max_queues, SHM_MAX_QUEUES);
		return -EINVAL;
	}
	srv->max_data_pages = (uint32_t)(max_data / SHM_PAGE_SIZE);
	srv->max_clients = p->max_clients ?: TD_SHM_DEFAULT_MAX_CLIENTS;
	srv->max_queues = p->max_queues ?: TD_SHM_DEFAULT_MAX_QUEUES;
	srv->handshake_timeout_ms =
		p->handshake_timeout_ms ?: TD_SHM_DEFAULT_HANDSHAKE_TIMEOUT_MS;
	return 0;
}

int td_shm_server_create(struct td_loop *loop, struct td_vbd *vbd,
			 const struct td_shm_params *params,
			 struct td_shm_server **out)
{
	const struct td_shm_params defaults = {0};
	struct td_shm_server *srv = calloc(1, sizeof(*srv));
	int err;

	if (!srv)
		return -ENOMEM;
	err = shm_apply_params(srv, params ? params : &defaults);
	if (err) {
		free(srv);
		return err;
	}
	td_frontend_init(&srv->fe, &td_shm_frontend, loop);
	srv->loop = loop;
	srv->vbd = vbd;
	TAILQ_INIT(&srv->listeners);
	TAILQ_INIT(&srv->conns);
	*out = srv;
	return 0;
}

/* The frontend op (frontend.h). */
static void shm_destroy(struct td_frontend *fe)
{
	struct td_shm_server *srv = td_shm_server_of(fe);
	struct shm_conn *conn;

	td_listener_close_all(&srv->listeners);
	shm_close_all(srv);
	/*
	 * Closed connections wait for deferred calls that may never run
	 * now.  Free those the vbd no longer holds; orphan the others, whose
	 * ring's drained callback frees them (shm-conn.c).
	 */
	while ((conn = TAILQ_FIRST(&srv->conns))) {
		TAILQ_REMOVE(&srv->conns, conn, link);
		conn->srv = NULL;
		if (shm_conn_destroy_rings(conn)) {
			td_vbd_warn(srv->vbd,
				    "shm %s: destroyed with I/O in "
				    "flight",
				    conn->peer);
			continue;
		}
		shm_conn_free(conn);
	}
	td_frontend_fini(fe);
	free(srv);
}

void td_shm_server_get_stats(const struct td_shm_server *srv,
			     struct td_shm_stats *out)
{
	const struct shm_conn *conn;

	*out = srv->stats;
	out->ring = srv->closed_ring;
	out->nr_queues = srv->closed_nr_queues;
	memcpy(out->queues, srv->closed_queues, sizeof(out->queues));
	for (uint32_t i = 0; i < SHM_MAX_QUEUES; i++)
		out->queues[i].queue = i;
	out->clients = out->rings = 0;
	TAILQ_FOREACH(conn, &srv->conns, link)
	{
		shm_conn_add_stats(conn, out);
		if (conn->state == SHM_CONN_CLOSING)
			continue;
		out->clients++;
		if (conn->state == SHM_CONN_CONNECTED)
			out->rings += shm_conn_nr_rings(conn);
	}
}

static int shm_create(struct td_loop *loop, struct td_vbd *vbd,
		      const void *params, struct td_frontend **out)
{
	struct td_shm_server *srv;
	int err = td_shm_server_create(loop, vbd, params, &srv);

	if (!err)
		*out = &srv->fe;
	return err;
}

static int shm_listen(struct td_frontend *fe, const char *path)
{
	return td_shm_server_listen(td_shm_server_of(fe), path);
}

/* The names of the counters, as "stats" prints them; never change them. */
static void shm_report_json(struct td_frontend *fe, struct td_json *j)
{
	struct td_shm_stats s;

	td_shm_server_get_stats(td_shm_server_of(fe), &s);
	td_json_u64(j, "clients", s.clients);
	td_json_u64(j, "rings", s.rings);
	td_json_u64(j, "clients_total", s.clients_total);
	td_json_u64(j, "refused", s.refused);
	td_json_u64(j, "protocol_errors", s.protocol_errors);
	td_json_u64(j, "kicks", s.kicks);
	blkif_ring_report_json(&s.ring, j);
	blkif_queue_report_json(s.queues, s.nr_queues, j);
}

static void shm_report_text(struct td_frontend *fe, struct td_strbuf *sb)
{
	struct td_shm_stats s;

	td_shm_server_get_stats(td_shm_server_of(fe), &s);
	td_strbuf_printf(sb,
			 "\nshm: %" PRIu64 " frontends connected (%" PRIu64
			 " rings), %" PRIu64 " accepted, %" PRIu64
			 " refused, %" PRIu64 " protocol errors, %" PRIu64
			 " kicks\n",
			 s.clients, s.rings, s.clients_total, s.refused,
			 s.protocol_errors, s.kicks);
	blkif_ring_report_text(&s.ring, sb);
	/* One ring: the lines above say it all. */
	if (s.nr_queues > 1)
		blkif_queue_report_text(s.queues, s.nr_queues, sb);
}

static void shm_report_metrics(struct td_frontend *fe, const char *labels,
			       struct td_strbuf *sb)
{
	struct td_shm_stats s;

	td_shm_server_get_stats(td_shm_server_of(fe), &s);
	blkif_queue_report_metrics(s.queues, s.nr_queues, labels, "shm", sb);
}

/*
 * The frontend op: every connected frontend gets "resized sectors=N" on
 * its socket (doc/shm-protocol.md); one still negotiating gets it right
 * after "connected".
 */
static void shm_resized(struct td_frontend *fe, struct td_strbuf *out)
{
	struct td_shm_server *srv = td_shm_server_of(fe);
	struct shm_conn *conn;
	unsigned int told = 0, failed = 0;
	int r;

	TAILQ_FOREACH(conn, &srv->conns, link)
	{
		r = shm_conn_tell_size(conn);
		told += r > 0;
		failed += r < 0;
	}
	td_strbuf_printf(out, "shm: %u frontends told the new size", told);
	if (failed)
		td_strbuf_printf(out, ", %u could not be told", failed);
	td_strbuf_puts(out, "\n");
}

const struct td_frontend_ops td_shm_frontend = {
	.name = "shm",
	.create = shm_create,
	.listen = shm_listen,
	.shutdown = shm_shutdown,
	.destroy = shm_destroy,
	.report_json = shm_report_json,
	.report_text = shm_report_text,
	.resized = shm_resized,
	.report_metrics = shm_report_metrics,
};

struct td_shm_server *td_shm_server_of(struct td_frontend *fe)
{
	return td_container_of(fe, struct td_shm_server, fe);
}

struct td_frontend *td_shm_server_frontend(struct td_shm_server *srv)
{
	return srv ? &srv->fe : NULL;
}
