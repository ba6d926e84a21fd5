/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * block-stripe.c - the stripe driver: an extent-striped, replicated
 * virtual disk over iSCSI servers, described by a mapping file
 * (map/map.h; layout in map/stripe-layout.h).
 *
 * Chain: "stripe:/var/lib/tapstripe/NAME.map[,OPTION=VALUE]...", options
 * queue_depth, cmd_timeout_ms, login_retries, degraded_grace_ms,
 * resync_rate, resync_chunk, initiator, lease (doc/driver-chains.md).
 * Open takes the mapping file's exclusive lock until close and the disk's
 * lease at the master (stripe-lease.c; kept after close); the driver
 * declares the stripe unit as its boundary.  Control ("tap-ctl driver -i
 * ID stripe"): resync [RATE], resync stop, verify [--repair] [RATE],
 * verify stop, verify status, status, lease, handover HOST.
 * The design of open, the request path (stripe-io.c), stale marks
 * (stripe-stale.c) and resync (stripe-resync.c) is in
 * doc/stripe-driver.md.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/drivers.h"
#include "drivers/stripe/stripe-int.h"

#define STRIPE_RESYNC_CHUNK_ALIGN 4096u
#define SERVER_NAME_BYTES	  32

static struct stripe_dev *dev_of(struct td_driver *drv)
{
	return drv->data;
}

uint32_t stripe_live_replicas(const struct stripe_dev *dev, uint32_t c,
			      uint32_t j)
{
	uint32_t n = 0;

	for (uint32_t r = 0; r < dev->map.replicas; r++)
		n += !stripe_map_slot(&dev->map, c, j, r)->stale;
	return n;
}

bool stripe_slot_has_source(const struct stripe_dev *dev, size_t slot)
{
	const struct stripe_map *m = &dev->map;
	uint32_t n = stripe_map_region_count(m);
	const uint64_t *bits = stripe_map_slot_dirty(m, slot);
	size_t first = slot - slot % m->replicas;

	for (uint32_t k = stripe_map_bits_next(bits, n, 0); k < n;
	     k = stripe_map_bits_next(bits, n, k + 1)) {
		bool found = false;

		for (uint32_t r = 0; r < m->replicas && !found; r++)
			found = first + r != slot &&
				!stripe_map_bits_test(
					stripe_map_slot_dirty(m, first + r), k);
		if (!found)
			return false;
	}
	return true;
}

/* --- options ------------------------------------------------------------------- */

static int parse_u32(const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n < min || n > max)
		return -EINVAL;
	*out = (uint32_t)n;
	return 0;
}

static int parse_size_opt(const char *v, uint64_t min, uint64_t max,
			  uint64_t align, uint64_t *out)
{
	uint64_t n;

	if (td_parse_size(v, &n) || n < min || n > max || n % align)
		return -EINVAL;
	*out = n;
	return 0;
}

static bool key_is(const char *opt, size_t klen, const char *name)
{
	return klen == strlen(name) && !strncmp(opt, name, klen);
}

/* One "key=value" cut off the path: 0, 1 (not an option), -EINVAL. */
static int parse_option(struct stripe_opts *o, const char *opt)
{
	const char *eq = strchr(opt, '=');
	const char *v = eq ? eq + 1 : "";
	size_t klen = eq ? (size_t)(eq - opt) : 0;
	int ret = -EINVAL;

	if (!eq || strchr(opt, '/'))
		return 1;
	if (key_is(opt, klen, "queue_depth")) {
		ret = parse_u32(v, 1, STRIPE_MAX_QUEUE_DEPTH, &o->queue_depth);
	} else if (key_is(opt, klen, "cmd_timeout_ms")) {
		ret = parse_u32(v, 1, STRIPE_MAX_CMD_TIMEOUT_MS,
				&o->cmd_timeout_ms);
	} else if (key_is(opt, klen, "login_retries")) {
		ret = parse_u32(v, 0, STRIPE_MAX_LOGIN_RETRIES,
				&o->login_retries);
		o->login_retries_set = !ret;
	} else if (key_is(opt, klen, "degraded_grace_ms")) {
		ret = parse_u32(v, 0, STRIPE_MAX_DEGRADED_GRACE_MS,
				&o->degraded_grace_ms);
	} else if (key_is(opt, klen, "resync_rate")) {
		ret = parse_size_opt(v, STRIPE_MIN_RESYNC_RATE, UINT64_MAX / 2,
				     1, &o->resync_rate);
	} else if (key_is(opt, klen, "resync_chunk")) {
		ret = parse_size_opt(
			v, STRIPE_RESYNC_CHUNK_ALIGN, STRIPE_MAX_RESYNC_CHUNK,
			STRIPE_RESYNC_CHUNK_ALIGN, &o->resync_chunk);
	} else if (key_is(opt, klen, "al_regions")) {
		ret = parse_u32(v, 0, STRIPE_AL_MAX_CAP, &o->al_regions);
		if (!ret && o->al_regions && o->al_regions < STRIPE_AL_MIN_CAP)
			ret = -EINVAL;
	} else if (key_is(opt, klen, "al_unit")) {
		ret = parse_size_opt(v, 4096, 1ull << 40, 4096, &o->al_unit);
	} else if (key_is(opt, klen, "auto_resync")) {
		ret = !strcmp(v, "on") || !strcmp(v, "off") ? 0 : -EINVAL;
		o->auto_resync_off = !strcmp(v, "off");
	} else if (key_is(opt, klen, "snapshot_target")) {
		ret = !strcmp(v, "on") || !strcmp(v, "off") ? 0 : -EINVAL;
		o->snapshot_target = !strcmp(v, "on");
	} else if (key_is(opt, klen, "lease")) {
		ret = !strcmp(v, "on") || !strcmp(v, "off") ? 0 : -EINVAL;
		o->lease_off = !strcmp(v, "off");
	} else if (key_is(opt, klen, "initiator") && *v && !o->initiator) {
		if (!(o->initiator = strdup(v)))
			return -ENOMEM;
		ret = 0;
	}
	return ret;
}

static int parse_options(struct stripe_dev *dev)
{
	char *comma;
	int ret;

	dev->opts.resync_rate = STRIPE_DEFAULT_RESYNC_RATE;
	dev->opts.resync_chunk = STRIPE_DEFAULT_RESYNC_CHUNK;
	dev->opts.degraded_grace_ms = STRIPE_DEFAULT_DEGRADED_GRACE_MS;
	dev->opts.al_regions = STRIPE_AL_DEFAULT_CAP;
	while ((comma = strrchr(dev->path, ','))) {
		if ((ret = parse_option(&dev->opts, comma + 1)) == -ENOMEM)
			return ret;
		if (ret < 0)
			return td_driver_fail(
				dev->drv, ret,
				"stripe: bad option '%s': write "
				"queue_depth=1-1024, cmd_timeout_ms=N, "
				"login_retries=N, degraded_grace_ms=N, "
				"resync_rate=SIZE (at least 64K), "
				"resync_chunk=SIZE (a multiple of 4K, at most "
				"64M), al_regions=0 or 16-65536, "
				"al_unit=SIZE, auto_resync=on|off, "
				"lease=on|off, snapshot_target=on|off or "
				"initiator=IQN",
				comma + 1);
		if (ret > 0)
			break;
		*comma = '\0';
	}
	return 0;
}

/* --- open and close ---------------------------------------------------------------- */

/*
 * A grown map that `stripe-ctl vdisk resize` left next to the map while
 * the disk was served (MAP.grow): taken at open, before the activity log
 * is read (stripe-al.c moves an unclean log's regions of the old
 * geometry to the grown places: regrow_record).  Not taken by a
 * read-only open.  0, or -errno said with td_driver_fail when
 * the map could not be rewritten (MAP.grow is kept for the next open).
 */
static int open_adopt_grow(struct stripe_dev *dev, int *lock_fd)
{
	enum stripe_map_grow_outcome done;
	struct stripe_map_error err;
	uint64_t old_size = dev->map.size_bytes;
	int ret;

	if (dev->drv->read_only)
		return 0;
	ret = stripe_map_grow_adopt(dev->path, &dev->map, lock_fd, &done, &err);
	if (ret)
		return td_driver_fail(dev->drv, ret,
				      "stripe: %s: cannot take the grown map "
				      "%s" STRIPE_MAP_GROW_SUFFIX ": %s",
				      dev->path, dev->path, err.reason);
	if (done == STRIPE_MAP_GROW_ADOPTED)
		td_info("stripe: %s: grown from %" PRIu64 " to %" PRIu64
			" bytes (%s" STRIPE_MAP_GROW_SUFFIX " taken)",
			dev->path, old_size, dev->map.size_bytes, dev->path);
	else if (done == STRIPE_MAP_GROW_STALE)
		td_info("stripe: %s: %s" STRIPE_MAP_GROW_SUFFIX
			" was taken already: removed",
			dev->path, dev->path);
	else if (done == STRIPE_MAP_GROW_REFUSED)
		td_warn("stripe: %s: %s" STRIPE_MAP_GROW_SUFFIX
			" does not apply to the map (%s): removed; the disk "
			"keeps its size, run 'stripe-ctl vdisk resize' again",
			dev->path, dev->path, err.reason);
	else if (done == STRIPE_MAP_GROW_KEPT)
		td_warn("stripe: %s: %s; the disk keeps its size until an open "
			"can read it",
			dev->path, err.reason);
	return 0;
}

/*
 * An incomplete snapshot (`stripe-ctl vdisk snapshot` writes MAP.incomplete
 * before the map and removes it once the copy is done) holds no
 * point-in-time content yet: only the copy job opens it.
 */
static int check_incomplete(struct stripe_dev *dev)
{
	char marker[PATH_MAX + 16];

	snprintf(marker, sizeof(marker), "%s" STRIPE_INCOMPLETE_SUFFIX,
		 dev->path);
	if (dev->opts.snapshot_target || access(marker, F_OK))
		return 0;
	return td_driver_fail(dev->drv, -EBUSY,
			      "stripe: %s is an incomplete snapshot (%s): run "
			      "'stripe-ctl vdisk snapshot' again to finish it, "
			      "or 'stripe-ctl vdisk destroy' to drop it",
			      dev->path, marker);
}

static int open_map(struct stripe_dev *dev)
{
	struct stripe_map_error err;
	int lock_fd = -1, ret;

	if ((ret = check_incomplete(dev)))
		return ret;
	ret = stripe_map_open(dev->path, &dev->map, &lock_fd, &err);
	if (ret) {
		char text[STRIPE_MAP_ERROR_TEXT_MAX];

		stripe_map_error_text(&err, dev->path, text, sizeof(text));
		return td_driver_fail(dev->drv, ret, "stripe: %s", text);
	}
	if ((ret = open_adopt_grow(dev, &lock_fd))) {
		stripe_map_close(lock_fd);
		return ret;
	}
	stripe_map_layout(&dev->map, &dev->layout);
	if ((ret = stripe_al_open(dev, &lock_fd))) {
		stripe_map_close(lock_fd);
		return ret;
	}
	/* From here the lock fd belongs to stripe-stale.c. */
	if ((ret = stripe_stale_start(dev, lock_fd)))
		td_driver_fail(dev->drv, ret,
			       "stripe: %s: cannot start the map writer: %s",
			       dev->path, strerror(-ret));
	return ret;
}

/* Per-server state from the map; the largest block size in *max_bs. */
static void server_init(struct stripe_dev *dev, uint32_t i)
{
	struct stripe_server *srv = &dev->servers[i];

	srv->dev = dev;
	srv->index = i;
	srv->block_size = dev->map.servers[i].block_size;
	TAILQ_INIT(&srv->held);
	TAILQ_INIT(&srv->parked);
}

/* A move target's extent must fit its server's LUN too. */
static void need_move(struct stripe_dev *dev, const struct stripe_map_move *mv)
{
	struct stripe_server *srv = &dev->servers[mv->server];
	uint64_t end = mv->lba + dev->map.extent_size_bytes / srv->block_size;

	if (end > srv->need_blocks)
		srv->need_blocks = end;
}

static int servers_init(struct stripe_dev *dev, uint32_t *max_bs)
{
	const struct stripe_map *m = &dev->map;
	uint32_t dead = 0;

	dev->nr_servers = m->nr_servers;
	/* Room for the new servers of moves: commands point into it. */
	dev->servers_cap = m->nr_servers + STRIPE_SPARE_SERVERS;
	dev->servers = calloc(dev->servers_cap, sizeof(*dev->servers));
	if (!dev->servers)
		return -ENOMEM;
	*max_bs = TD_SECTOR_SIZE;
	for (uint32_t i = 0; i < m->nr_servers; i++) {
		server_init(dev, i);
		if (dev->servers[i].block_size > *max_bs)
			*max_bs = dev->servers[i].block_size;
	}
	for (size_t i = 0; i < stripe_map_nr_slots(m); i++)
		if (m->moves[i].active)
			need_move(dev, &m->moves[i]);
	for (uint32_t c = 0; c < m->columns; c++) {
		for (uint32_t j = 0; j < m->extents_per_column; j++) {
			for (uint32_t r = 0; r < m->replicas; r++) {
				const struct stripe_map_replica *rep =
					stripe_map_slot(m, c, j, r);
				struct stripe_server *srv =
					&dev->servers[rep->server];
				uint64_t end =
					rep->lba +
					m->extent_size_bytes / srv->block_size;

				if (end > srv->need_blocks)
					srv->need_blocks = end;
				srv->live_slots += stripe_slot_usable(
					m, stripe_map_slot_index(m, c, j, r));
			}
			dead += !stripe_live_replicas(dev, c, j);
		}
	}
	if (dead)
		td_warn("stripe: %s: %u extents have every replica stale; I/O "
			"to them fails with EIO",
			dev->path, dead);
	return 0;
}

/* --- backends ----------------------------------------------------------------- */

static void be_iscsi_submit(void *be, struct iscsi_cmd *cmd)
{
	iscsi_conn_submit(be, cmd);
}

static enum iscsi_conn_state be_iscsi_state(const void *be)
{
	return iscsi_conn_state(be);
}

static uint32_t be_iscsi_block_size(const void *be)
{
	return iscsi_conn_block_size(be);
}

static uint64_t be_iscsi_nr_blocks(const void *be)
{
	return iscsi_conn_nr_blocks(be);
}

static bool be_iscsi_can_unmap(const void *be)
{
	return iscsi_conn_can_unmap(be);
}

static void be_iscsi_get_stats(const void *be, struct iscsi_conn_stats *st)
{
	iscsi_conn_get_stats(be, st);
}

static void be_iscsi_report(const void *be, struct td_json *j)
{
	iscsi_conn_report(be, j, "iscsi");
}

static void be_iscsi_destroy(void *be)
{
	iscsi_conn_destroy(be);
}

const struct stripe_backend_ops stripe_backend_iscsi = {
	.kind = "iscsi",
	.submit = be_iscsi_submit,
	.state = be_iscsi_state,
	.block_size = be_iscsi_block_size,
	.nr_blocks = be_iscsi_nr_blocks,
	.can_unmap = be_iscsi_can_unmap,
	.get_stats = be_iscsi_get_stats,
	.report = be_iscsi_report,
	.destroy = be_iscsi_destroy,
};

static int conn_create(struct stripe_dev *dev, uint32_t i, const char *name)
{
	const struct stripe_map_server *ms = &dev->map.servers[i];
	struct iscsi_conn_cfg cfg = {
		.portal = ms->portal,
		.target = ms->target,
		.lun = ms->lun,
		.initiator = dev->opts.initiator,
		.chap_user = ms->chap_user[0] ? ms->chap_user : NULL,
		.chap_secret = ms->chap_user[0] ? ms->chap_secret : NULL,
		.queue_depth = dev->opts.queue_depth,
		.cmd_timeout_ms = dev->opts.cmd_timeout_ms,
		.login_retries = dev->opts.login_retries_set
					 ? dev->opts.login_retries
					 : ISCSI_CONN_DEFAULT_LOGIN_RETRIES,
		.name = name,
	};
	struct iscsi_conn *c;
	int ret;

	stripe_fence_conn_cfg(dev, i, &cfg);
	ret = iscsi_conn_create(dev->drv->loop, &cfg, &c);

	if (!ret) {
		dev->servers[i].ops = &stripe_backend_iscsi;
		dev->servers[i].be = c;
	}
	return ret;
}

static int bdev_create(struct stripe_dev *dev, uint32_t i, const char *name)
{
	const struct stripe_map_server *ms = &dev->map.servers[i];
	struct stripe_bdev_cfg cfg = {
		.path = ms->device,
		.block_size = ms->block_size,
		.queue_depth = dev->opts.queue_depth,
		.read_only = dev->drv->read_only,
		.name = name,
		.hold_timeout_ms = dev->opts.cmd_timeout_ms,
	};
	int ret;

	stripe_fence_bdev_cfg(dev, i, &cfg);
	ret = stripe_bdev_create(dev->drv->loop, &cfg, &dev->servers[i].be);
	if (!ret)
		dev->servers[i].ops = &stripe_backend_device;
	return ret;
}

/* One backend per server: its device when the map names one, else iSCSI. */
static int conns_create(struct stripe_dev *dev)
{
	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		const struct stripe_map_server *ms = &dev->map.servers[i];
		char name[SERVER_NAME_BYTES];
		int ret;

		snprintf(name, sizeof(name), "server %u", i);
		ret = ms->device[0] ? bdev_create(dev, i, name)
				    : conn_create(dev, i, name);
		if (ret) {
			return td_driver_fail(
				dev->drv, ret,
				"stripe: %s: server %u (%s %s lun %u%s%s): %s",
				dev->path, i, ms->portal, ms->target, ms->lun,
				ms->device[0] ? " device " : "", ms->device,
				strerror(-ret));
		}
	}
	return 0;
}

int stripe_server_add(struct stripe_dev *dev,
		      const struct stripe_map_server *ms, uint32_t *idx)
{
	struct stripe_map *m = &dev->map;
	struct stripe_map_server *s;
	char name[SERVER_NAME_BYTES];
	uint32_t i = m->nr_servers;
	int ret;

	for (uint32_t k = 0; k < m->nr_servers; k++) {
		if (strcmp(m->servers[k].target, ms->target) ||
		    m->servers[k].lun != ms->lun)
			continue;
		*idx = k;
		return m->servers[k].block_size == ms->block_size ? 0 : -EINVAL;
	}
	if (ms->block_size > dev->drv->info.sector_size ||
	    ms->block_size < STRIPE_MAP_MIN_BLOCK)
		return -EINVAL; /* the disk's sector size is fixed at open */
	if (dev->nr_servers >= dev->servers_cap)
		return -ENOSPC;
	if (!(s = realloc(m->servers, (i + 1) * sizeof(*s))))
		return -ENOMEM;
	m->servers = s;
	s[i] = *ms;
	s[i].device[0] = '\0';
	m->nr_servers++;
	dev->nr_servers++;
	server_init(dev, i);
	snprintf(name, sizeof(name), "server %u", i);
	if ((ret = conn_create(dev, i, name)) ||
	    (ret = stripe_stale_server_added(dev))) {
		/* the slot stays in the array, unused by any replica */
		return ret;
	}
	td_vbd_info(dev->drv->vbd,
		    "stripe: server %u (%s %s lun %u) added for a move", i,
		    ms->portal, ms->target, ms->lun);
	*idx = i;
	return 0;
}

static void stripe_close(struct td_driver *drv)
{
	struct stripe_dev *dev = dev_of(drv);

	dev->closing = true;
	/* Cancels what is left (resync copies): their callbacks see closing. */
	for (uint32_t i = 0; dev->servers && i < dev->nr_servers; i++)
		if (dev->servers[i].be)
			dev->servers[i].ops->destroy(dev->servers[i].be);
	stripe_io_close(dev);
	stripe_fence_stop(dev);
	stripe_lease_close(dev); /* the lease itself stays with this host */
	stripe_resync_close(dev);
	stripe_scrub_close(dev);
	stripe_alloc_close(dev);
	stripe_stale_stop(dev); /* writes pending marks, drops the lock */
	stripe_al_close(dev);	/* clean, when no write was cut short */
	stripe_notify_stop(dev->notify);
	stripe_map_free(&dev->map);
	free(dev->servers);
	free(dev->path);
	free(dev->opts.initiator);
	memset(dev, 0, sizeof(*dev));
}

static int stripe_open(struct td_driver *drv, const char *args)
{
	struct stripe_dev *dev = dev_of(drv);
	uint32_t max_bs = TD_SECTOR_SIZE;
	int ret;

	dev->drv = drv;
	TAILQ_INIT(&dev->failed);
	TAILQ_INIT(&dev->writes);
	TAILQ_INIT(&dev->flush_cur);
	TAILQ_INIT(&dev->flush_next);
	TAILQ_INIT(&dev->lock.waiting);
	if (!*args) {
		return td_driver_fail(drv, -EINVAL,
				      "stripe: no mapping file: write the "
				      "chain as stripe:" TAPSTRIPE_STATEDIR
				      "/NAME.map");
	}
	if (!(dev->path = strdup(args)))
		return -ENOMEM;
	ret = parse_options(dev);
	if (!ret)
		ret = open_map(dev);
	if (!ret)
		ret = stripe_lease_open(dev);
	if (!ret)
		ret = servers_init(dev, &max_bs);
	if (!ret && (ret = stripe_fence_start(dev)))
		td_driver_fail(drv, ret, "stripe: %s: cannot start fencing: %s",
			       dev->path, strerror(-ret));
	if (!ret)
		ret = conns_create(dev);
	if (ret) {
		stripe_close(drv);
		return ret;
	}
	if (stripe_notify_start(dev->map.master, &dev->notify))
		td_warn("stripe: %s: the master %s will not be told of stale "
			"replicas",
			dev->path, dev->map.master);
	stripe_stale_told(dev,
			  dev->al.told); /* what the log's recovery marked */
	stripe_resync_auto_start(dev);
	if ((ret = stripe_alloc_start(dev))) {
		stripe_close(drv);
		return ret;
	}
	drv->info.size_sectors = dev->map.size_bytes >> TD_SECTOR_SHIFT;
	drv->info.sector_size = max_bs;
	drv->info.boundary_sectors =
		dev->map.stripe_unit_bytes >> TD_SECTOR_SHIFT;
	drv->info.features = TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
			     TD_FEAT_WRITE_ZEROES;
	drv->info.read_only = drv->read_only;
	td_info("stripe: %s: vdisk %s, %" PRIu64
		" bytes, %u columns of %" PRIu64
		"-byte units, %u replicas, %u servers",
		dev->path, dev->map.vdisk, dev->map.size_bytes,
		dev->map.columns, dev->map.stripe_unit_bytes, dev->map.replicas,
		dev->nr_servers);
	return 0;
}

/* --- reports ----------------------------------------------------------------------- */

static uint32_t count_stale(const struct stripe_dev *dev)
{
	size_t nr = stripe_map_nr_slots(&dev->map);
	uint32_t n = 0;

	for (size_t i = 0; i < nr; i++)
		n += dev->map.slots[i].stale;
	return n;
}

static uint64_t count_dirty(const struct stripe_dev *dev)
{
	const struct stripe_map *m = &dev->map;
	size_t nr = stripe_map_nr_slots(m);
	uint64_t n = 0;

	for (size_t i = 0; i < nr; i++)
		if (m->slots[i].stale)
			n += stripe_map_bits_count(stripe_map_slot_dirty(m, i),
						   stripe_map_region_count(m));
	return n;
}

static void report_al_json(struct stripe_dev *dev, struct td_json *j)
{
	const struct stripe_al *al = &dev->al;

	td_json_begin_object(j, "activity_log");
	td_json_bool(j, "enabled", al->enabled);
	td_json_u64(j, "capacity", al->cap);
	td_json_u64(j, "hot_regions", al->nr);
	td_json_u64(j, "writes", al->writes);
	td_json_u64(j, "write_errors", al->write_errors);
	td_json_u64(j, "waits", al->waits);
	td_json_u64(j, "full_waits", al->full_waits);
	td_json_u64(j, "evictions", al->evictions);
	td_json_u64(j, "recovered", al->recovered);
	td_json_end_object(j);
}

static void report_resync_json(struct stripe_dev *dev, struct td_json *j)
{
	const struct stripe_resync *rs = &dev->resync;

	td_json_begin_object(j, "resync");
	td_json_str(j, "state", stripe_resync_state_name(rs->state));
	td_json_bool(j, "automatic", rs->auto_run);
	td_json_u64(j, "replicas_total", rs->slots_total);
	td_json_u64(j, "replicas_done", rs->slots_done);
	td_json_u64(j, "replicas_failed", rs->slots_failed);
	td_json_u64(j, "bytes_copied", rs->bytes_copied);
	td_json_u64(j, "bytes_copied_since_open", rs->bytes_copied_all);
	if (rs->started_ns)
		td_json_u64(
			j, "elapsed_us",
			((rs->state == STRIPE_RESYNC_RUNNING ? td_now_ns()
							     : rs->ended_ns) -
			 rs->started_ns) /
				1000);
	td_json_u64(j, "rate_bytes_per_s", rs->rate_bytes_per_s);
	if (rs->have_slot) {
		td_json_u64(j, "column", rs->column);
		td_json_u64(j, "extent", rs->extent);
		td_json_u64(j, "replica", rs->replica);
		td_json_u64(j, "extent_done_bytes", rs->cursor);
	}
	td_json_str(j, "last_error", rs->last_error);
	td_json_end_object(j);
}

/* One gauge or counter family with a single sample for the disk. */
static void stripe_metric(struct td_strbuf *sb, const char *labels,
			  const char *name, const char *type, const char *help,
			  uint64_t v)
{
	td_driver_metric(sb, labels, name, type, help, v);
}

static void stripe_report_metrics(struct td_driver *drv, const char *labels,
				  struct td_strbuf *sb)
{
	struct stripe_dev *dev = dev_of(drv);
	const struct stripe_resync *rs = &dev->resync;

	stripe_metric(sb, labels, "tapstripe_stripe_stale_replicas", "gauge",
		      "Replicas marked stale in the map", count_stale(dev));
	stripe_metric(sb, labels, "tapstripe_stripe_dirty_regions", "gauge",
		      "Regions marked dirty (being written)", count_dirty(dev));
	stripe_metric(sb, labels, "tapstripe_stripe_resync_bytes_total",
		      "counter", "Bytes copied by resync since the disk opened",
		      rs->bytes_copied_all);
	stripe_metric(sb, labels, "tapstripe_stripe_resync_running", "gauge",
		      "1 while a resync runs",
		      rs->state == STRIPE_RESYNC_RUNNING);
	stripe_metric(sb, labels, "tapstripe_stripe_writes_degraded_total",
		      "counter", "Writes that reached fewer than every replica",
		      dev->writes_degraded);
	stripe_metric(sb, labels, "tapstripe_stripe_read_fallbacks_total",
		      "counter",
		      "Reads served by another replica after an error",
		      dev->read_fallbacks);
}

static void stripe_report_json(struct td_driver *drv, struct td_json *j)
{
	struct stripe_dev *dev = dev_of(drv);
	const struct stripe_map *m = &dev->map;

	td_json_str(j, "map", dev->path);
	td_json_str(j, "vdisk", m->vdisk);
	td_json_u64(j, "stripe_unit_bytes", m->stripe_unit_bytes);
	td_json_u64(j, "extent_size_bytes", m->extent_size_bytes);
	td_json_u64(j, "columns", m->columns);
	td_json_u64(j, "extents_per_column", m->extents_per_column);
	td_json_u64(j, "replicas", m->replicas);
	td_json_u64(j, "stale_replicas", count_stale(dev));
	td_json_u64(j, "region_bytes", m->region_bytes);
	td_json_u64(j, "dirty_regions", count_dirty(dev));
	td_json_bool(j, "auto_resync", !dev->opts.auto_resync_off);
	report_al_json(dev, j);
	stripe_move_report_json(dev, j);
	td_json_u64(j, "stale_marks_pending", stripe_stale_pending(dev));
	td_json_u64(j, "map_rewrites", dev->stale.rewrites);
	td_json_u64(j, "map_rewrite_errors", dev->stale.rewrite_errors);
	td_json_u64(j, "master_notifications",
		    stripe_notify_count(dev->notify));
	td_json_u64(j, "read_fallbacks", dev->read_fallbacks);
	td_json_u64(j, "replica_write_errors", dev->replica_write_errors);
	td_json_u64(j, "writes_degraded", dev->writes_degraded);
	td_json_u64(j, "degraded_skips", dev->degraded_skips);
	td_json_u64(j, "degraded_grace_ms", dev->opts.degraded_grace_ms);
	td_json_u64(j, "flush_rounds", dev->flush_rounds);
	td_json_u64(j, "reservation_conflicts", dev->reservation_conflicts);
	td_json_bool(j, "fencing", dev->fence.on);
	td_json_u64(j, "fence_master_asks", dev->fence.asks);
	stripe_lease_report_json(dev, j);
	report_resync_json(dev, j);
	stripe_scrub_report_json(dev, j);
	stripe_alloc_report_json(dev, j);
	td_json_begin_array(j, "servers");
	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		const struct stripe_server *srv = &dev->servers[i];
		struct iscsi_conn_stats st;

		srv->ops->get_stats(srv->be, &st);
		td_json_begin_object(j, NULL);
		td_json_u64(j, "index", i);
		td_json_str(j, "portal", m->servers[i].portal);
		td_json_str(j, "target", m->servers[i].target);
		td_json_u64(j, "lun", m->servers[i].lun);
		/* the session's, as the text says it (also inside the
		 * backend's own object below) */
		td_json_str(j, "state", iscsi_conn_state_name(st.state));
		td_json_u64(j, "block_size", srv->block_size);
		td_json_str(j, "geometry", stripe_gate_name(srv->gate));
		td_json_bool(j, "degraded",
			     stripe_server_degraded(dev, &dev->servers[i]));
		td_json_u64(j, "live_replicas", srv->live_slots);
		td_json_str(j, "fence",
			    stripe_fence_state_name(srv->fence.state));
		td_json_u64(j, "fence_admissions", srv->fence.admissions);
		td_json_u64(j, "reservation_conflicts",
			    srv->fence.reservation_conflicts);
		srv->ops->report(srv->be, j);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

static void report_resync_text(struct stripe_dev *dev, struct td_strbuf *sb)
{
	const struct stripe_resync *rs = &dev->resync;

	td_strbuf_printf(sb,
			 "resync: %s, %" PRIu64 " of %" PRIu64
			 " replicas done, %" PRIu64 " failed, %" PRIu64
			 " bytes copied%s",
			 stripe_resync_state_name(rs->state), rs->slots_done,
			 rs->slots_total, rs->slots_failed, rs->bytes_copied,
			 rs->auto_run ? " (started on its own)" : "");
	if (rs->have_slot)
		td_strbuf_printf(sb,
				 "; copying column %u extent %u replica %u: "
				 "%" PRIu64 " of %" PRIu64 " bytes",
				 rs->column, rs->extent, rs->replica,
				 rs->cursor, dev->map.extent_size_bytes);
	if (rs->last_error[0])
		td_strbuf_printf(sb, "; last error: %s", rs->last_error);
	td_strbuf_puts(sb, "\n");
}

static void stripe_report_text(struct td_driver *drv, struct td_strbuf *sb)
{
	struct stripe_dev *dev = dev_of(drv);
	const struct stripe_map *m = &dev->map;

	td_strbuf_printf(sb,
			 "map: %s (vdisk %s, %u columns, unit %" PRIu64
			 " bytes, extent %" PRIu64 " bytes, %u replicas)\n",
			 dev->path, m->vdisk, m->columns, m->stripe_unit_bytes,
			 m->extent_size_bytes, m->replicas);
	td_strbuf_printf(sb,
			 "stale replicas: %u (%u marks not yet durable), "
			 "%" PRIu64 " dirty regions of %" PRIu64
			 " bytes, map rewrites %" PRIu64 " (%" PRIu64
			 " failed), master notifications %" PRIu64 "\n",
			 count_stale(dev), stripe_stale_pending(dev),
			 count_dirty(dev), m->region_bytes, dev->stale.rewrites,
			 dev->stale.rewrite_errors,
			 stripe_notify_count(dev->notify));
	td_strbuf_printf(
		sb,
		"read fallbacks %" PRIu64 ", replica write errors "
		"%" PRIu64 ", degraded writes %" PRIu64
		", degraded skips %" PRIu64 ", flush rounds %" PRIu64 "\n",
		dev->read_fallbacks, dev->replica_write_errors,
		dev->writes_degraded, dev->degraded_skips, dev->flush_rounds);
	td_strbuf_printf(sb,
			 "activity log: %s, %u of %u regions hot, %" PRIu64
			 " writes (%" PRIu64 " failed), %" PRIu64
			 " waits, %u recovered at open; auto resync %s\n",
			 dev->al.enabled ? "on" : "off", dev->al.nr,
			 dev->al.cap, dev->al.writes, dev->al.write_errors,
			 dev->al.waits, dev->al.recovered,
			 dev->opts.auto_resync_off ? "off" : "on");
	stripe_lease_report_text(dev, sb);
	report_resync_text(dev, sb);
	stripe_move_report_text(dev, sb);
	stripe_scrub_report_text(dev, sb);
	for (uint32_t i = 0; i < dev->nr_servers; i++) {
		const struct stripe_server *srv = &dev->servers[i];
		struct iscsi_conn_stats st;

		srv->ops->get_stats(srv->be, &st);
		td_strbuf_printf(
			sb,
			"server %u %s %s lun %u (%s%s%s): %s%s, geometry %s, "
			"fence %s, %u live "
			"replicas, %" PRIu64 " reads %" PRIu64
			" writes %" PRIu64 " syncs, %" PRIu64
			" errors, %" PRIu64 " timeouts, %" PRIu64
			" reconnects, %u in flight\n",
			i, m->servers[i].portal, m->servers[i].target,
			m->servers[i].lun, srv->ops->kind,
			m->servers[i].device[0] ? " " : "",
			m->servers[i].device, iscsi_conn_state_name(st.state),
			stripe_server_degraded(dev, &dev->servers[i])
				? " (degraded)"
				: "",
			stripe_gate_name(srv->gate),
			stripe_fence_state_name(srv->fence.state),
			srv->live_slots, st.reads, st.writes, st.syncs,
			st.errors, st.timeouts, st.reconnects, st.in_flight);
	}
}

/* tap-ctl info: the lease ("lease: held, holder H, epoch N, this host H"). */
static void stripe_info_json(struct td_driver *drv, struct td_json *j)
{
	stripe_lease_report_json(dev_of(drv), j);
}

static void stripe_info_text(struct td_driver *drv, struct td_strbuf *sb)
{
	stripe_lease_report_text(dev_of(drv), sb);
}

/* --- control ------------------------------------------------------------------------ */

/* "resync auto [on|off]": the switch of the resync on its own. */
static int control_auto(struct stripe_dev *dev, int argc, char **argv,
			struct td_strbuf *out)
{
	if (argc == 3 && strcmp(argv[2], "on") && strcmp(argv[2], "off")) {
		td_strbuf_puts(out, "usage: resync auto [on|off]");
		return -EINVAL;
	}
	if (argc == 3)
		dev->opts.auto_resync_off = !strcmp(argv[2], "off");
	td_strbuf_printf(out, "auto resync %s\n",
			 dev->opts.auto_resync_off ? "off" : "on");
	return 0;
}

/*
 * "resync rate [RATE]": the disk's resync_rate at run time (the copies of
 * the resync on its own and of moves start at it); a run in progress
 * takes it at its next chunk.
 */
static int control_rate(struct stripe_dev *dev, int argc, char **argv,
			struct td_strbuf *out)
{
	uint64_t rate;

	if (argc == 3 &&
	    (td_parse_size(argv[2], &rate) || rate < STRIPE_MIN_RESYNC_RATE)) {
		td_strbuf_printf(out,
				 "bad rate '%.64s': bytes per second, at least "
				 "64K (K/M/G suffixes)",
				 argv[2]);
		return -EINVAL;
	}
	if (argc == 3) {
		dev->opts.resync_rate = rate;
		if (dev->resync.state == STRIPE_RESYNC_RUNNING)
			dev->resync.rate_bytes_per_s = rate;
	}
	td_strbuf_printf(out, "resync rate %" PRIu64 "\n",
			 dev->opts.resync_rate);
	return 0;
}

static int control_resync(struct stripe_dev *dev, int argc, char **argv,
			  struct td_strbuf *out)
{
	const char *rate_arg = argc > 1 ? argv[1] : NULL;
	uint64_t rate = 0;

	if (argc >= 2 && argc <= 3 && !strcmp(argv[1], "rate"))
		return control_rate(dev, argc, argv, out);
	if (argc > 3 || (argc == 3 && strcmp(argv[1], "auto"))) {
		td_strbuf_puts(out, "usage: resync [RATE] | resync stop | "
				    "resync auto [on|off] | resync rate "
				    "[RATE]");
		return -EINVAL;
	}
	if (rate_arg && !strcmp(rate_arg, "stop"))
		return stripe_resync_stop(dev, out);
	if (rate_arg && !strcmp(rate_arg, "auto"))
		return control_auto(dev, argc, argv, out);
	if (rate_arg && !strncmp(rate_arg, "rate=", 5))
		rate_arg += 5;
	if (rate_arg &&
	    (td_parse_size(rate_arg, &rate) || rate < STRIPE_MIN_RESYNC_RATE)) {
		td_strbuf_printf(out,
				 "bad rate '%.64s': bytes per second, at least "
				 "64K (K/M/G suffixes)",
				 rate_arg);
		return -EINVAL;
	}
	return stripe_resync_start(dev, rate, out);
}

/* "verify [--repair] [RATE]", "verify stop", "verify status". */
static int control_verify(struct stripe_dev *dev, int argc, char **argv,
			  struct td_strbuf *out)
{
	const char *rate_arg = NULL;
	bool repair = false;
	uint64_t rate = 0;

	if (argc == 2 && !strcmp(argv[1], "stop"))
		return stripe_scrub_stop(dev, out);
	if (argc == 2 && !strcmp(argv[1], "status")) {
		stripe_scrub_report_text(dev, out);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--repair") && !repair) {
			repair = true;
		} else if (!rate_arg) {
			rate_arg = argv[i];
		} else {
			td_strbuf_puts(out, "usage: verify [--repair] [RATE] | "
					    "verify stop | verify status");
			return -EINVAL;
		}
	}
	if (rate_arg &&
	    (td_parse_size(rate_arg, &rate) || rate < STRIPE_MIN_RESYNC_RATE)) {
		td_strbuf_printf(out,
				 "bad rate '%.64s': bytes read per second, at "
				 "least 64K (K/M/G suffixes)",
				 rate_arg);
		return -EINVAL;
	}
	return stripe_scrub_start(dev, rate, repair, out);
}

/* "status json": the object tap-ctl stats --json shows under "stripe". */
static int control_status_json(struct td_driver *drv, struct td_strbuf *out)
{
	struct td_json j;

	td_json_init(&j, out);
	td_json_begin_object(&j, NULL);
	stripe_report_json(drv, &j);
	td_json_end_object(&j);
	return td_json_finish(&j);
}

static int stripe_control(struct td_driver *drv, int argc, char **argv,
			  struct td_strbuf *out)
{
	struct stripe_dev *dev = dev_of(drv);

	if (argc >= 1 && !strcmp(argv[0], "resync"))
		return control_resync(dev, argc, argv, out);
	if (argc >= 1 && !strcmp(argv[0], "verify"))
		return control_verify(dev, argc, argv, out);
	if (argc == 1 && !strcmp(argv[0], "status")) {
		stripe_report_text(drv, out);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[0], "status") && !strcmp(argv[1], "json"))
		return control_status_json(drv, out);
	if (!strcmp(argv[0], "lease") || !strcmp(argv[0], "handover"))
		return stripe_lease_control(dev, argc, argv, out);
	if (!strcmp(argv[0], "move"))
		return stripe_move_control(dev, argc, argv, out);
	td_strbuf_puts(out, "stripe commands: resync [RATE], resync stop, "
			    "resync auto [on|off], resync rate [RATE], "
			    "verify [--repair] "
			    "[RATE], verify stop, verify status, move add|"
			    "abort|status, status [json], lease, handover "
			    "HOST");
	return -EINVAL;
}

const struct td_driver_ops td_stripe_ops = {
	.name = "stripe",
	.dev_size = sizeof(struct stripe_dev),
	.req_size = sizeof(struct stripe_req),
	.open = stripe_open,
	.close = stripe_close,
	.submit = stripe_lease_submit,
	.report_json = stripe_report_json,
	.report_metrics = stripe_report_metrics,
	.report_text = stripe_report_text,
	.info_json = stripe_info_json,
	.info_text = stripe_info_text,
	.control = stripe_control,
	.refresh_size = stripe_grow_refresh,
	.block_status = stripe_alloc_block_status,
};
