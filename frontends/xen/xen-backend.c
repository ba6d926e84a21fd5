/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-backend.c - the Xen transport's server: find the devices tap-ctl
 * attached to this tapdisk (or that xl made in a driver domain and named
 * it by --name), and run the backend side of each one's xenbus state
 * machine (see xen.h).
 *
 * The state machine is evaluated, not stepped: every watch event re-reads
 * "online" and the frontend's state and moves the backend toward what they
 * call for (dev_update), idempotently.  The table of states, how devices
 * are claimed and removed, and the hand-over between tapdisks are in
 * doc/xen.md ("The backend state machine").
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontends/xen/xen-int.h"

#define VALUE_MAX  32
#define ERROR_MAX  160
#define ROOT_TOKEN "tapstripe-root-"

const char *const xen_backend_types[XEN_NR_BACKEND_TYPES] = {
	XEN_BACKEND_TYPE,
	XEN_BACKEND_TYPE_QDISK,
};

static void dev_update(struct xen_dev *dev);

/* --- xenstore helpers ------------------------------------------------------ */

static char *dev_read(struct xen_dev *dev, const char *dir, const char *key)
{
	struct td_xen_server *srv = dev->srv;
	char path[XEN_PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, key) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return srv->xs->read(srv->xsh, path);
}

static int __attribute__((format(printf, 3, 4)))
dev_write(struct xen_dev *dev, const char *key, const char *fmt, ...)
{
	struct td_xen_server *srv = dev->srv;
	char path[XEN_PATH_MAX], value[ERROR_MAX];
	va_list ap;
	int err;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	if (snprintf(path, sizeof(path), "%s/%s", dev->be, key) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	err = srv->xs->write(srv->xsh, path, value);
	if (err)
		td_vbd_warn(srv->vbd, "cannot write %s: %s", path,
			    strerror(-err));
	return err;
}

/* The frontend's keys, for xen_read_frontend_keys. */
static char *fe_reader(void *opaque, const char *key)
{
	struct xen_dev *dev = opaque;

	return dev_read(dev, dev->fe, key);
}

static void dev_switch(struct xen_dev *dev, int state)
{
	if (dev->state == state)
		return;
	td_vbd_info(dev->srv->vbd, "%s: state %d -> %d", dev->be, dev->state,
		    state);
	dev->state = state;
	dev_write(dev, "state", "%d", state);
}

/* What the frontend is doing: its state node, Unknown when absent. */
static int dev_frontend_state(struct xen_dev *dev)
{
	char *v = dev_read(dev, dev->fe, "state");
	int state = v ? xen_parse_state(v) : XenbusStateUnknown;

	free(v);
	return state < 0 ? XenbusStateUnknown : state;
}

/* --- features -------------------------------------------------------------- */

/* A read-only disk, or attached with mode r. */
static bool dev_read_only(struct xen_dev *dev)
{
	char *mode = dev_read(dev, dev->be, "mode");
	bool ro = td_vbd_get_info(dev->srv->vbd)->read_only ||
		  (mode && !strcmp(mode, "r"));

	free(mode);
	return ro;
}

/* What blkfront reads before it connects (xen/io/blkif.h). */
static void dev_advertise(struct xen_dev *dev)
{
	struct td_xen_server *srv = dev->srv;
	const struct td_disk_info *info = td_vbd_get_info(srv->vbd);
	struct blkif_features f;
	bool ro = dev_read_only(dev);

	blkif_get_features(&srv->cfg, srv->vbd, &f);
	if (f.max_ring_page_order > BLKIF_XEN_MAX_RING_ORDER)
		f.max_ring_page_order = BLKIF_XEN_MAX_RING_ORDER;
	dev_write(dev, "max-ring-page-order", "%" PRIu32,
		  f.max_ring_page_order);
	dev_write(dev, "multi-queue-max-queues", "%u", XEN_DEFAULT_MAX_QUEUES);
	if (f.max_indirect_segments)
		dev_write(dev, "feature-max-indirect-segments", "%" PRIu32,
			  f.max_indirect_segments);
	dev_write(dev, "feature-flush-cache", "%d", f.flush_cache);
	dev_write(dev, "feature-discard", "%d", f.discard && !ro);
	if (f.discard && !ro) {
		dev_write(dev, "discard-granularity", "%u",
			  info->sector_size ?: TD_SECTOR_SIZE);
		dev_write(dev, "discard-alignment", "0");
		dev_write(dev, "discard-secure", "%d", f.discard_secure);
	}
	dev_write(dev, "sectors", "%" PRIu64, info->size_sectors);
	dev_write(dev, "sector-size", "%u",
		  info->sector_size ?: TD_SECTOR_SIZE);
	/* The ring refuses writes too (dev_connect): blkfront's read-only
	 * flag only stops a well-behaved guest. */
	dev->read_only = ro;
	dev_write(dev, "info", "%u", ro ? VDISK_READONLY : 0u);
}

/* --- connect and disconnect ------------------------------------------------ */

static void dev_fatal(void *opaque);

static void dev_fail(struct xen_dev *dev, const char *why)
{
	td_vbd_err(dev->srv->vbd, "%s: %s", dev->fe, why);
	dev->failed = true;
	dev_write(dev, "error", "%s", why);
	dev_switch(dev, XenbusStateClosing);
}

static void dev_disconnect(struct xen_dev *dev);

/* Map every ring the frontend set up; none is kept when one fails. */
static int dev_connect_rings(struct xen_dev *dev,
			     const struct xen_frontend_queues *q, bool resume,
			     char *why, size_t len)
{
	struct td_xen_server *srv = dev->srv;
	struct blkif_config cfg = srv->cfg;
	struct xen_ring_params p = {
		.vbd = srv->vbd,
		.cfg = &cfg,
		.frontend_domid = dev->domid,
		.resume = resume,
		.fatal = dev_fatal,
		.opaque = dev,
		.stats = &srv->stats,
	};
	int err = 0;

	cfg.read_only = dev->read_only;
	for (uint32_t i = 0; i < q->nr_queues && !err; i++) {
		p.keys = &q->q[i];
		p.queue = i;
		err = srv->io->connect(&p, &dev->rings[i]);
		if (err)
			snprintf(why, len,
				 "cannot map ring %" PRIu32 " or bind event "
				 "channel %" PRIu32 ": %s",
				 i, q->q[i].event_channel, strerror(-err));
		else
			dev->nr_rings = i + 1;
	}
	return err;
}

static void dev_connect(struct xen_dev *dev, bool resume)
{
	struct td_xen_server *srv = dev->srv;
	struct xen_frontend_queues q;
	char why[ERROR_MAX];
	int err;

	err = xen_read_frontend_queues(fe_reader, dev, srv->cfg.max_ring_order,
				       XEN_DEFAULT_MAX_QUEUES, &q, why,
				       sizeof(why));
	if (!err)
		err = dev_connect_rings(dev, &q, resume, why, sizeof(why));
	if (err) {
		srv->stats.connect_errors++;
		dev_fail(dev, why);
		dev_disconnect(dev); /* the rings mapped before the failure */
		return;
	}
	srv->stats.connects++;
	/* "connected, ring order N" and "resumed, ring order N" are what
	 * operators and the e2e (dd-init.sh) read: kept as they were. */
	td_vbd_info(srv->vbd,
		    "%s: %s, ring order %" PRIu32 ", event channel %" PRIu32
		    "%s; %" PRIu32 " ring(s)",
		    dev->fe, resume ? "resumed" : "connected",
		    q.q[0].ring_order, q.q[0].event_channel,
		    q.nr_queues > 1 ? " (ring 0)" : "", q.nr_queues);
	dev_switch(dev, XenbusStateConnected);
}

static void dev_free(struct xen_dev *dev)
{
	td_loop_timer_cancel(&dev->rm_timer);
	LIST_REMOVE(dev, link);
	free(dev);
}

static void server_check_stopped(struct td_xen_server *srv);

/* One ring is done; true when it was the last. */
static bool dev_ring_done(struct xen_dev *dev)
{
	if (--dev->pending)
		return false;
	memset(dev->rings, 0, sizeof(dev->rings));
	dev->nr_rings = 0;
	dev->draining = false;
	return true;
}

static void dev_drained(void *opaque)
{
	struct xen_dev *dev = opaque;
	struct td_xen_server *srv = dev->srv;

	if (!dev_ring_done(dev))
		return;
	td_vbd_info(srv->vbd, "%s: disconnected", dev->fe);
	if (dev->gone)
		dev_free(dev);
	else
		dev_update(dev);
	server_check_stopped(srv);
}

static void dev_disconnect(struct xen_dev *dev)
{
	if (!dev->nr_rings || dev->draining)
		return;
	dev->draining = true;
	dev->pending = dev->nr_rings; /* the callbacks come later, deferred */
	for (uint32_t i = 0; i < dev->nr_rings; i++)
		dev->srv->io->disconnect(dev->rings[i], dev_drained, dev);
}

/* The ring broke the protocol (blkif logged how). */
static void dev_fatal(void *opaque)
{
	struct xen_dev *dev = opaque;

	dev_fail(dev, "the frontend broke the ring protocol");
	dev_disconnect(dev);
}

/* --- handing over ------------------------------------------------------------ */

static void dev_unwatch(struct xen_dev *dev)
{
	struct td_xen_server *srv = dev->srv;

	srv->xs->unwatch(srv->xsh, dev->be, dev->token);
	srv->xs->unwatch(srv->xsh, dev->fe_state_path, dev->token);
}

/* Every request taken is answered and the ring is unmapped. */
static void dev_released(void *opaque)
{
	struct xen_dev *dev = opaque;
	struct td_xen_server *srv = dev->srv;

	if (dev->nr_rings && !dev_ring_done(dev))
		return;
	dev_write(dev, XEN_KEY_TAPDISK_OWNER, "0");
	td_vbd_info(srv->vbd,
		    "%s: handed over; the frontend's next requests wait on "
		    "the ring for the next tapdisk",
		    dev->be);
	dev_free(dev);
	server_check_stopped(srv);
}

/* tapstripe-pid names another tapdisk, or none: hand the device over. */
static void dev_release(struct xen_dev *dev)
{
	struct td_xen_server *srv = dev->srv;

	td_vbd_info(srv->vbd, "%s: releasing it to another tapdisk", dev->be);
	dev_unwatch(dev);
	dev->releasing = true;
	if (!dev->nr_rings) {
		dev_released(dev);
		return;
	}
	dev->draining = true;
	dev->pending = dev->nr_rings;
	for (uint32_t i = 0; i < dev->nr_rings; i++) {
		if (srv->io->quiesce)
			srv->io->quiesce(dev->rings[i], dev_released, dev);
		else
			srv->io->disconnect(dev->rings[i], dev_released, dev);
	}
}

/* False only when tapstripe-pid is readable and names someone else. */
static bool dev_still_ours(struct xen_dev *dev)
{
	char *pid = dev_read(dev, dev->be, XEN_KEY_TAPDISK_PID);
	uint32_t v;
	bool ours = !pid || xen_parse_u32(pid, INT32_MAX, &v) ||
		    (int)v == dev->srv->pid;

	free(pid);
	return ours;
}

/* --- the state machine ------------------------------------------------------- */

/* online=0 or tapdisk stopping: leave, politely when connected. */
static void dev_leave(struct xen_dev *dev, int fe_state)
{
	if (dev->nr_rings && !dev->srv->fe.stopping &&
	    fe_state != XenbusStateClosed && fe_state != XenbusStateUnknown) {
		dev_switch(dev, XenbusStateClosing);
		return;
	}
	dev_disconnect(dev);
	if (!dev->nr_rings)
		dev_switch(dev, XenbusStateClosed);
}

static void dev_follow(struct xen_dev *dev, int fe_state)
{
	switch (fe_state) {
	case XenbusStateInitialising:
	case XenbusStateInitWait:
		if (dev->state == XenbusStateClosed) {
			dev->failed = false; /* the frontend starts over */
			dev_switch(dev, XenbusStateInitWait);
		}
		break;
	case XenbusStateInitialised:
	case XenbusStateConnected:
		if (!dev->nr_rings && !dev->failed &&
		    dev->state == XenbusStateInitWait)
			dev_connect(dev, false);
		break;
	case XenbusStateClosing:
		dev_disconnect(dev);
		dev_switch(dev, XenbusStateClosing);
		break;
	default: /* Closed, Unknown, Reconfiguring: not supported */
		dev_disconnect(dev);
		if (dev->nr_rings || (fe_state == XenbusStateClosed &&
				      dev->state == XenbusStateInitWait))
			break; /* draining, or ready for the frontend already */
		dev_switch(dev, XenbusStateClosed);
		/*
		 * A frontend that closed may come back (a guest kernel that
		 * reboots in place, blkfront unbound and bound again): it reads
		 * our state before writing its own and connects only to
		 * InitWait, so wait there, as for a new device.
		 */
		if (fe_state == XenbusStateClosed) {
			dev->failed = false;
			dev_switch(dev, XenbusStateInitWait);
		}
		break;
	}
}

static void dev_forget(struct xen_dev *dev)
{
	struct td_xen_server *srv = dev->srv;

	td_vbd_info(srv->vbd, "%s: removed", dev->be);
	dev_unwatch(dev);
	dev->gone = true;
	dev_disconnect(dev);
	if (!dev->nr_rings)
		dev_free(dev);
}

/* The toolstack wrote our state Closed: we did not. */
static bool dev_closed_by_toolstack(struct xen_dev *dev)
{
	char *v = dev_read(dev, dev->be, "state");
	bool closed = v && xen_parse_state(v) == XenbusStateClosed &&
		      dev->state != XenbusStateClosed;

	free(v);
	return closed;
}

/* The claimed device is closed and its toolstack is done with it. */
static void dev_remove(struct td_timer *t, void *opaque)
{
	struct xen_dev *dev = opaque;
	struct td_xen_server *srv = dev->srv;
	int err;

	td_vbd_info(srv->vbd, "%s: closed; removing it", dev->be);
	err = srv->xs->rm(srv->xsh, dev->be);
	if (err)
		td_vbd_warn(srv->vbd, "cannot remove %s: %s", dev->be,
			    strerror(-err));
	dev_forget(dev);
}

static void dev_update(struct xen_dev *dev)
{
	struct td_xen_server *srv = dev->srv;
	char *online;
	bool on;
	int fe_state;

	if (dev->draining || dev->gone)
		return; /* dev_drained evaluates again */
	online = dev_read(dev, dev->be, "online");
	if (!online && errno == ENOENT) {
		dev_forget(dev);
		return;
	}
	if (!srv->fe.stopping && !dev_still_ours(dev)) {
		free(online);
		dev_release(dev);
		return;
	}
	on = online && !strcmp(online, "1");
	free(online);
	if (!dev->forced && dev_closed_by_toolstack(dev)) {
		td_vbd_info(srv->vbd,
			    "%s: closed by the toolstack: disconnecting",
			    dev->be);
		dev->forced = true;
	}
	fe_state = dev_frontend_state(dev);
	if (dev->forced)
		dev_leave(dev, XenbusStateClosed); /* no frontend to wait for */
	else if (!on || srv->fe.stopping)
		dev_leave(dev, fe_state);
	else
		dev_follow(dev, fe_state);
	/* The frontend's directory gone: its guest is gone. */
	if (dev->claimed &&
	    (dev->forced || !on || fe_state == XenbusStateUnknown) &&
	    !srv->fe.stopping && !dev->nr_rings &&
	    dev->state == XenbusStateClosed && !td_timer_armed(&dev->rm_timer))
		td_loop_timer_arm(srv->loop, &dev->rm_timer,
				  srv->remove_delay_us, dev_remove, dev);
}

/* --- finding devices ---------------------------------------------------------- */

static struct xen_dev *server_find(struct td_xen_server *srv, unsigned int type,
				   uint32_t domid, uint32_t devid)
{
	struct xen_dev *dev;

	LIST_FOREACH(dev, &srv->devs, link)
	if (dev->type == type && dev->domid == domid && dev->devid == devid)
		return dev;
	return NULL;
}

/* No tapstripe-pid, and params names this tapdisk (xl's target=). */
static bool dev_params_name_us(struct xen_dev *dev)
{
	char *params;
	const char *name;
	bool us;

	if (!dev->srv->name[0])
		return false;
	params = dev_read(dev, dev->be, "params");
	name = xen_params_tapdisk_name(params);
	us = name && !strcmp(name, dev->srv->name);
	free(params);
	return us;
}

/*
 * True when be is online and names this process (tap-ctl attach), or
 * names no tapdisk and its params names us (xl: claimed).  A qdisk
 * device named ours by tapstripe-pid was claimed by the tapdisk that
 * handed it over to us (tap-ctl release, then attach): xl made it, so we
 * remove it when xl closes it, as that tapdisk would have.
 */
static bool dev_is_ours(struct xen_dev *dev)
{
	char *pid = dev_read(dev, dev->be, XEN_KEY_TAPDISK_PID);
	bool no_pid = !pid && errno == ENOENT;
	char *online = dev_read(dev, dev->be, "online");
	char *fe = dev_read(dev, dev->be, "frontend");
	uint32_t v;
	bool named, ours;

	if (no_pid)
		dev->claimed = dev_params_name_us(dev);
	named = pid && !xen_parse_u32(pid, INT32_MAX, &v) &&
		(int)v == dev->srv->pid;
	if (named &&
	    !strcmp(xen_backend_types[dev->type], XEN_BACKEND_TYPE_QDISK))
		dev->claimed = true;
	ours = (named || dev->claimed) && online && !strcmp(online, "1");

	/* The frontend directory must be the one of (domid, devid): a key
	 * pointing elsewhere would make us read another device's ring. */
	if (ours && (!fe || strcmp(fe, dev->fe))) {
		td_vbd_warn(dev->srv->vbd,
			    "%s: frontend is '%.64s', not %s: ignored", dev->be,
			    fe ? fe : "(none)", dev->fe);
		ours = false;
	}
	free(pid);
	free(online);
	free(fe);
	return ours;
}

static int dev_init(struct xen_dev *dev, struct td_xen_server *srv,
		    unsigned int type, uint32_t domid, uint32_t devid)
{
	dev->srv = srv;
	dev->type = type;
	dev->domid = domid;
	dev->devid = devid;
	dev->state = XenbusStateInitialising;
	if (xen_backend_path_type(dev->be, sizeof(dev->be),
				  xen_backend_types[type], srv->self_domid,
				  domid, devid) ||
	    xen_frontend_path(dev->fe, sizeof(dev->fe), domid, devid) ||
	    snprintf(dev->fe_state_path, sizeof(dev->fe_state_path), "%s/state",
		     dev->fe) >= (int)sizeof(dev->fe_state_path))
		return -ENAMETOOLONG;
	snprintf(dev->token, sizeof(dev->token),
		 "tapstripe-%s-%" PRIu32 "-%" PRIu32, xen_backend_types[type],
		 domid, devid);
	return 0;
}

/*
 * True when the backend and the frontend are connected already: another
 * tapdisk served the device; *handed_over when it quiesced the ring and
 * said so (tapstripe-owner 0).
 */
static bool dev_connected_before(struct xen_dev *dev, bool *handed_over)
{
	char *be_state = dev_read(dev, dev->be, "state");
	char *owner = dev_read(dev, dev->be, XEN_KEY_TAPDISK_OWNER);
	int fe_state = dev_frontend_state(dev);
	/* blkfront writes Connected after us: Initialised is connected too. */
	bool connected = be_state &&
			 xen_parse_state(be_state) == XenbusStateConnected &&
			 (fe_state == XenbusStateConnected ||
			  fe_state == XenbusStateInitialised);

	*handed_over = connected && owner && !strcmp(owner, "0");
	free(be_state);
	free(owner);
	return connected;
}

static void server_take(struct td_xen_server *srv, unsigned int type,
			uint32_t domid, uint32_t devid)
{
	struct xen_dev *dev = calloc(1, sizeof(*dev));
	bool connected, handed_over;
	int err;

	if (!dev || dev_init(dev, srv, type, domid, devid) ||
	    !dev_is_ours(dev)) {
		free(dev);
		return;
	}
	LIST_INSERT_HEAD(&srv->devs, dev, link);
	srv->stats.devices++;
	/* Named ours from now on: release and take-over work as for
	 * tap-ctl's devices, and no other tapdisk claims it. */
	if (dev->claimed)
		dev_write(dev, XEN_KEY_TAPDISK_PID, "%d", srv->pid);
	connected = dev_connected_before(dev, &handed_over);
	td_vbd_info(srv->vbd, "%s %s (frontend %s%s)",
		    handed_over ? "taking over" : "serving", dev->be, dev->fe,
		    dev->claimed ? "; params names this tapdisk" : "");
	dev_write(dev, XEN_KEY_TAPDISK_OWNER, "%d", srv->pid);
	if (handed_over) {
		dev->state = XenbusStateConnected;
		dev->read_only = dev_read_only(dev);
	} else if (!connected) {
		dev_advertise(dev);
		dev_switch(dev, XenbusStateInitWait);
	}
	err = srv->xs->watch(srv->xsh, dev->be, dev->token);
	if (!err)
		err = srv->xs->watch(srv->xsh, dev->fe_state_path, dev->token);
	if (err) {
		td_vbd_err(srv->vbd, "cannot watch %s: %s", dev->be,
			   strerror(-err));
		dev_fail(dev, "the backend cannot watch xenstore");
	} else if (handed_over) {
		dev_connect(dev, true);
	} else if (connected) {
		dev->state = XenbusStateConnected;
		dev_fail(dev, "the last tapdisk of this device did not hand it "
			      "over (it died?): the frontend must connect "
			      "again");
	}
}

static void server_maybe_take(struct td_xen_server *srv, unsigned int type,
			      const char *domid, const char *devid)
{
	uint32_t d, v;

	if (xen_parse_u32(domid, INT32_MAX, &d) ||
	    xen_parse_u32(devid, INT32_MAX, &v))
		return;
	if (!server_find(srv, type, d, v))
		server_take(srv, type, d, v);
}

/* The devices under a root already (the watch fires on the root itself
 * when set): made before this tapdisk started. */
static void server_scan(struct td_xen_server *srv, unsigned int type)
{
	const char *root = srv->roots[type];
	char path[XEN_PATH_MAX];
	char **domids, **devids;
	unsigned int nd, nv;

	if (!srv->xs->directory ||
	    !(domids = srv->xs->directory(srv->xsh, root, &nd)))
		return;
	for (unsigned int i = 0; i < nd; i++) {
		if (snprintf(path, sizeof(path), "%s/%s", root, domids[i]) >=
			    (int)sizeof(path) ||
		    !(devids = srv->xs->directory(srv->xsh, path, &nv)))
			continue;
		for (unsigned int j = 0; j < nv; j++)
			server_maybe_take(srv, type, domids[i], devids[j]);
		free(devids);
	}
	free(domids);
}

/* A change under a root: "<root>/<domid>/<devid>[/...]", or the root. */
static void server_root_event(struct td_xen_server *srv, unsigned int type,
			      const char *path)
{
	const char *root = srv->roots[type];
	size_t n = strlen(root);
	char domid[VALUE_MAX], devid[VALUE_MAX];

	if (strncmp(path, root, n) || (path[n] != '/' && path[n]))
		return;
	if (!path[n]) {
		server_scan(srv, type);
		return;
	}
	if (sscanf(path + n, "/%31[0-9]/%31[0-9]", domid, devid) != 2)
		return;
	server_maybe_take(srv, type, domid, devid);
}

void xen_server_watch_event(struct td_xen_server *srv, const char *path,
			    const char *token)
{
	size_t n = strlen(ROOT_TOKEN);
	struct xen_dev *dev;

	if (srv->fe.stopping)
		return;
	if (!strncmp(token, ROOT_TOKEN, n)) {
		for (unsigned int t = 0; t < XEN_NR_BACKEND_TYPES; t++)
			if (!strcmp(token + n, xen_backend_types[t]))
				server_root_event(srv, t, path);
		return;
	}
	LIST_FOREACH(dev, &srv->devs, link)
	{
		if (!strcmp(dev->token, token)) {
			dev_update(dev);
			return;
		}
	}
}

/* --- the server ------------------------------------------------------------------ */

int xen_server_init(struct td_xen_server *srv, struct td_loop *loop,
		    struct td_vbd *vbd, const struct td_xen_params *params,
		    const struct xen_store_ops *xs, void *xsh,
		    const struct xen_io_ops *io)
{
	int err;

	td_frontend_init(&srv->fe, &td_xen_frontend, loop);
	srv->loop = loop;
	srv->vbd = vbd;
	srv->xs = xs;
	srv->xsh = xsh;
	srv->io = io;
	srv->pid = (int)getpid();
	LIST_INIT(&srv->devs);
	if (params && params->blkif)
		srv->cfg = *params->blkif;
	else
		blkif_config_init(&srv->cfg);
	if ((err = blkif_config_check(&srv->cfg)))
		return err;
	if (params && params->name) {
		if (strlen(params->name) >= sizeof(srv->name))
			return -ENAMETOOLONG;
		strcpy(srv->name, params->name);
	}
	srv->remove_delay_us = XEN_REMOVE_DELAY_US;
	srv->self_domid = xen_store_self_domid(xs, xsh);
	for (unsigned int t = 0; t < XEN_NR_BACKEND_TYPES; t++) {
		char token[VALUE_MAX];

		if (snprintf(srv->roots[t], sizeof(srv->roots[t]),
			     "/local/domain/%" PRIu32 "/backend/%s",
			     srv->self_domid, xen_backend_types[t]) >=
		    (int)sizeof(srv->roots[t]))
			return -ENAMETOOLONG;
		snprintf(token, sizeof(token), ROOT_TOKEN "%s",
			 xen_backend_types[t]);
		err = xs->watch(xsh, srv->roots[t], token);
		if (err) {
			td_err("xen: cannot watch %s: %s", srv->roots[t],
			       strerror(-err));
			while (t--) {
				snprintf(token, sizeof(token), ROOT_TOKEN "%s",
					 xen_backend_types[t]);
				xs->unwatch(xsh, srv->roots[t], token);
			}
			return err;
		}
	}
	strcpy(srv->root, srv->roots[0]);
	return 0;
}

static void server_unwatch_roots(struct td_xen_server *srv)
{
	char token[VALUE_MAX];

	for (unsigned int t = 0; t < XEN_NR_BACKEND_TYPES; t++) {
		snprintf(token, sizeof(token), ROOT_TOKEN "%s",
			 xen_backend_types[t]);
		srv->xs->unwatch(srv->xsh, srv->roots[t], token);
	}
}

const char *td_xen_server_root(const struct td_xen_server *srv)
{
	return srv->root;
}

static void server_check_stopped(struct td_xen_server *srv)
{
	struct xen_dev *dev;
	bool idle = true;

	LIST_FOREACH(dev, &srv->devs, link)
	if (dev->nr_rings)
		idle = false;
	td_frontend_stop_check(&srv->fe, idle);
}

/* --- resize (issue #21) ------------------------------------------------------ */

/*
 * Linux's blkback (xen_vbd_resize) writes "sectors" and then its current
 * state again in one transaction: blkfront's watch on the backend state
 * fires, it sees Connected while connected and re-reads "sectors"
 * (blkfront_connect, BLKIF_STATE_CONNECTED: set_capacity).  Retried while
 * xenstored says another writer got in between; bounded, in case one
 * always does.
 */
#define RESIZE_TX_TRIES 16

static int dev_resize_tx(struct xen_dev *dev, const char *sectors)
{
	struct td_xen_server *srv = dev->srv;
	char p_sectors[XEN_PATH_MAX + 16], p_state[XEN_PATH_MAX + 16];
	char state[VALUE_MAX];
	uint32_t tx;
	int err = -EAGAIN;

	if (!srv->xs->tx_start)
		return -EOPNOTSUPP;
	snprintf(p_sectors, sizeof(p_sectors), "%s/sectors", dev->be);
	snprintf(p_state, sizeof(p_state), "%s/state", dev->be);
	snprintf(state, sizeof(state), "%d", dev->state);
	for (int i = 0; i < RESIZE_TX_TRIES && err == -EAGAIN; i++) {
		if ((err = srv->xs->tx_start(srv->xsh, &tx)))
			break;
		if ((err = srv->xs->tx_write(srv->xsh, tx, p_sectors,
					     sectors)) ||
		    (err = srv->xs->tx_write(srv->xsh, tx, p_state, state))) {
			srv->xs->tx_end(srv->xsh, tx, true);
			break;
		}
		err = srv->xs->tx_end(srv->xsh, tx, false);
	}
	return err;
}

void xen_server_resized(struct td_frontend *fe, struct td_strbuf *out)
{
	struct td_xen_server *srv = td_xen_server_of(fe);
	const struct td_disk_info *info = td_vbd_get_info(srv->vbd);
	unsigned int told = 0, later = 0, failed = 0;
	char sectors[VALUE_MAX];
	struct xen_dev *dev;
	int err;

	snprintf(sectors, sizeof(sectors), "%" PRIu64, info->size_sectors);
	LIST_FOREACH(dev, &srv->devs, link)
	{
		if (dev->gone || dev->draining)
			continue;
		if (dev->state == XenbusStateConnected && dev->nr_rings) {
			if (!(err = dev_resize_tx(dev, sectors))) {
				told++;
				continue;
			}
			td_vbd_warn(srv->vbd,
				    "%s: cannot tell the frontend of the new "
				    "size: %s",
				    dev->be, strerror(-err));
			failed++;
		} else if (dev->state >= XenbusStateInitWait &&
			   dev->state < XenbusStateClosing) {
			failed += dev_write(dev, "sectors", "%s", sectors) != 0;
			later += 1;
		}
	}
	td_strbuf_printf(out,
			 "xen: %s sectors written; %u connected frontends "
			 "told; %u will read it when they connect%s\n",
			 sectors, told, later,
			 failed ? "; some writes failed (see the log)" : "");
}

int xen_server_shutdown(struct td_frontend *fe, td_frontend_done_fn done,
			void *opaque)
{
	struct td_xen_server *srv = td_xen_server_of(fe);
	struct xen_dev *dev, *next;
	int err = td_frontend_stop_begin(fe, done, opaque);

	if (err)
		return err;
	server_unwatch_roots(srv);
	for (dev = LIST_FIRST(&srv->devs); dev; dev = next) {
		next = LIST_NEXT(dev, link);
		dev_leave(dev, XenbusStateClosed);
	}
	server_check_stopped(srv);
	return 0;
}

/*
 * The server's counters, the rings still connected included; ring i of
 * each device into queues[i].
 */
void td_xen_server_get_stats(const struct td_xen_server *srv,
			     struct td_xen_stats *out)
{
	const struct xen_dev *dev;

	*out = srv->stats;
	for (uint32_t i = 0; i < XEN_MAX_QUEUES; i++)
		out->queues[i].queue = i;
	if (!srv->io->add_stats)
		return;
	LIST_FOREACH(dev, &srv->devs, link)
	{
		for (uint32_t i = 0; i < dev->nr_rings; i++) {
			struct blkif_queue_report q = {0};

			srv->io->add_stats(dev->rings[i], &q);
			blkif_ring_stats_add(&out->ring, &q.ring);
			blkif_queue_report_add(&out->queues[i], &q);
			if (out->nr_queues <= i)
				out->nr_queues = i + 1;
		}
	}
}

/* Free every device; one with a ring still draining is left behind. */
void xen_server_fini(struct td_xen_server *srv)
{
	struct xen_dev *dev;

	while ((dev = LIST_FIRST(&srv->devs))) {
		if (dev->nr_rings) {
			td_warn("xen: %s still has I/O in flight: left",
				dev->be);
			LIST_REMOVE(dev, link);
			continue;
		}
		dev_unwatch(dev);
		dev_free(dev);
	}
	td_frontend_fini(&srv->fe);
}
