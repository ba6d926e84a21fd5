/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-store.c - xenstore through libxenstore for the Xen transport, and
 * the server's public life (td_xen_server_create, the frontend ops).
 *
 * libxenstore delivers watch events on a pipe (xs_fileno) that the event
 * loop watches; each wake-up drains them with xs_check_watch, which never
 * blocks.  Reads and writes are synchronous round trips to xenstored,
 * used on set-up and state changes only.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <xenstore.h>

#include "common/util.h"
#include "frontends/xen/xen-int.h"

struct xen_store {
	struct xs_handle *xs;
	struct td_fd fde;
	struct td_xen_server *srv;
};

static char *store_read(void *h, const char *path)
{
	struct xen_store *st = h;
	unsigned int len;

	return xs_read(st->xs, XBT_NULL, path, &len);
}

static int store_write(void *h, const char *path, const char *value)
{
	struct xen_store *st = h;

	return xs_write(st->xs, XBT_NULL, path, value, strlen(value)) ? 0
								      : -errno;
}

static int store_watch(void *h, const char *path, const char *token)
{
	struct xen_store *st = h;

	return xs_watch(st->xs, path, token) ? 0 : -errno;
}

static int store_unwatch(void *h, const char *path, const char *token)
{
	struct xen_store *st = h;

	return xs_unwatch(st->xs, path, token) ? 0 : -errno;
}

static char **store_directory(void *h, const char *path, unsigned int *n)
{
	struct xen_store *st = h;

	return xs_directory(st->xs, XBT_NULL, path, n);
}

static int store_rm(void *h, const char *path)
{
	struct xen_store *st = h;

	return xs_rm(st->xs, XBT_NULL, path) ? 0 : -errno;
}

static int store_tx_start(void *h, uint32_t *tx)
{
	struct xen_store *st = h;
	xs_transaction_t t = xs_transaction_start(st->xs);

	if (t == XBT_NULL)
		return errno ? -errno : -EIO;
	*tx = t;
	return 0;
}

static int store_tx_write(void *h, uint32_t tx, const char *path,
			  const char *value)
{
	struct xen_store *st = h;

	return xs_write(st->xs, tx, path, value, strlen(value)) ? 0 : -errno;
}

/* xenstored answers EAGAIN when another writer got in between. */
static int store_tx_end(void *h, uint32_t tx, bool abort)
{
	struct xen_store *st = h;

	return xs_transaction_end(st->xs, tx, abort) ? 0 : -errno;
}

static void store_close(void *h)
{
	struct xen_store *st = h;

	td_loop_del_fd(&st->fde);
	xs_close(st->xs);
	free(st);
}

static const struct xen_store_ops store_ops = {
	.read = store_read,
	.write = store_write,
	.watch = store_watch,
	.unwatch = store_unwatch,
	.directory = store_directory,
	.rm = store_rm,
	.close = store_close,
	.tx_start = store_tx_start,
	.tx_write = store_tx_write,
	.tx_end = store_tx_end,
};

/* Every watch event queued so far, handed to the server in order. */
static void store_event(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct xen_store *st = opaque;
	char **ev;

	while ((ev = xs_check_watch(st->xs))) {
		xen_server_watch_event(st->srv, ev[XS_WATCH_PATH],
				       ev[XS_WATCH_TOKEN]);
		free(ev);
	}
	if (errno != EAGAIN)
		td_err("xen: reading xenstore watch events: %s",
		       strerror(errno));
}

int xen_store_open(struct td_loop *loop, struct td_xen_server *srv,
		   const struct xen_store_ops **ops, void **h)
{
	struct xen_store *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	st->srv = srv;
	st->xs = xs_open(0);
	if (!st->xs) {
		err = -errno;
		free(st);
		return err ? err : -ENOENT;
	}
	err = td_loop_add_fd(loop, &st->fde, xs_fileno(st->xs), EPOLLIN,
			     store_event, st);
	if (err) {
		xs_close(st->xs);
		free(st);
		return err;
	}
	*ops = &store_ops;
	*h = st;
	return 0;
}

uint32_t xen_store_self_domid(const struct xen_store_ops *ops, void *h)
{
	char *v = ops->read(h, "domid");
	uint32_t domid = 0;

	if (v && xen_parse_u32(v, INT32_MAX, &domid))
		domid = 0;
	free(v);
	return domid;
}

int td_xen_server_create(struct td_loop *loop, struct td_vbd *vbd,
			 const struct td_xen_params *params,
			 struct td_xen_server **out)
{
	struct td_xen_server *srv = calloc(1, sizeof(*srv));
	const struct xen_store_ops *ops;
	void *h;
	int err;

	if (!srv)
		return -ENOMEM;
	err = xen_store_open(loop, srv, &ops, &h);
	if (err) {
		td_dbg("xen: no xenstore here (%s): Xen transport off",
		       strerror(-err));
		free(srv);
		return err;
	}
	err = xen_server_init(srv, loop, vbd, params, ops, h, &xen_io_real);
	if (err) {
		ops->close(h);
		free(srv);
		return err;
	}
	*out = srv;
	return 0;
}

/* The frontend op (frontend.h). */
static void xen_destroy(struct td_frontend *fe)
{
	struct td_xen_server *srv = td_xen_server_of(fe);

	xen_server_fini(srv);
	srv->xs->close(srv->xsh);
	free(srv);
}

static int xen_create(struct td_loop *loop, struct td_vbd *vbd,
		      const void *params, struct td_frontend **out)
{
	struct td_xen_server *srv;
	int err = td_xen_server_create(loop, vbd, params, &srv);

	if (!err)
		*out = &srv->fe;
	return err;
}

/* The names of the counters, as "stats" prints them; never change them. */
static void xen_report_json(struct td_frontend *fe, struct td_json *j)
{
	struct td_xen_stats s;

	td_xen_server_get_stats(td_xen_server_of(fe), &s);
	td_json_u64(j, "devices", s.devices);
	td_json_u64(j, "connects", s.connects);
	td_json_u64(j, "connect_errors", s.connect_errors);
	td_json_u64(j, "copy_in_segments", s.copy_in_segs);
	td_json_u64(j, "copy_out_segments", s.copy_out_segs);
	td_json_u64(j, "copy_errors", s.copy_errors);
	blkif_ring_report_json(&s.ring, j);
	blkif_queue_report_json(s.queues, s.nr_queues, j);
}

static void xen_report_text(struct td_frontend *fe, struct td_strbuf *sb)
{
	struct td_xen_stats s;

	td_xen_server_get_stats(td_xen_server_of(fe), &s);
	td_strbuf_printf(sb,
			 "\nxen: %" PRIu64 " devices taken, %" PRIu64
			 " rings connected, %" PRIu64
			 " frontends refused; grant copy: %" PRIu64
			 " segments in, %" PRIu64 " out, %" PRIu64 " refused\n",
			 s.devices, s.connects, s.connect_errors,
			 s.copy_in_segs, s.copy_out_segs, s.copy_errors);
	blkif_ring_report_text(&s.ring, sb);
	/* One ring: the lines above say it all. */
	if (s.nr_queues > 1)
		blkif_queue_report_text(s.queues, s.nr_queues, sb);
}

static void xen_report_metrics(struct td_frontend *fe, const char *labels,
			       struct td_strbuf *sb)
{
	struct td_xen_stats s;

	td_xen_server_get_stats(td_xen_server_of(fe), &s);
	blkif_queue_report_metrics(s.queues, s.nr_queues, labels, "xen", sb);
}

const struct td_frontend_ops td_xen_frontend = {
	.name = "xen",
	.create = xen_create,
	.shutdown = xen_server_shutdown,
	.destroy = xen_destroy,
	.report_json = xen_report_json,
	.report_text = xen_report_text,
	.resized = xen_server_resized,
	.report_metrics = xen_report_metrics,
};

struct td_xen_server *td_xen_server_of(struct td_frontend *fe)
{
	return td_container_of(fe, struct td_xen_server, fe);
}

struct td_frontend *td_xen_server_frontend(struct td_xen_server *srv)
{
	return srv ? &srv->fe : NULL;
}
