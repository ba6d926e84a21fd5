/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vbd-open.c - driver chains: parsing, request pools, open and close, and
 * the vbd's accessors.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapdisk/vbd-int.h"

static unsigned int iov_cap = TD_IOV_MAX;

unsigned int td_request_iov_cap(void)
{
	return iov_cap;
}

/* --- pools ---------------------------------------------------------------- */

static size_t priv_stride(size_t req_size)
{
	return (req_size + VBD_PRIV_ALIGN - 1) & ~(size_t)(VBD_PRIV_ALIGN - 1);
}

int vbd_pool_init(struct td_vbd *vbd, struct vbd_pool *pool, uint32_t size,
		  size_t req_size)
{
	size_t stride = priv_stride(req_size);

	pool->reqs = calloc(size, sizeof(*pool->reqs));
	pool->iovs = calloc((size_t)size * iov_cap, sizeof(*pool->iovs));
	pool->priv =
		stride ? aligned_alloc(VBD_PRIV_ALIGN, stride * size) : NULL;
	if (!pool->reqs || !pool->iovs || (stride && !pool->priv))
		return -ENOMEM;
	pool->size = size;
	pool->nr_free = size;
	pool->free = NULL;
	for (uint32_t i = size; i-- > 0;) {
		struct td_request *req = &pool->reqs[i];

		req->vbd = vbd;
		req->pool = pool;
		req->iov_slab = &pool->iovs[(size_t)i * iov_cap];
		req->priv = stride ? pool->priv + stride * i : NULL;
		req->next = pool->free;
		pool->free = req;
	}
	return 0;
}

void vbd_pool_fini(struct vbd_pool *pool)
{
	free(pool->reqs);
	free(pool->iovs);
	free(pool->priv);
	memset(pool, 0, sizeof(*pool));
}

/* --- why an open failed --------------------------------------------------------- */

/* Log the reason and keep it (the first one) for td_vbd_open's caller. */
__attribute__((format(printf, 5, 0))) static int
vbd_vfail(struct td_vbd *vbd, const char *func, bool syntax, int err,
	  const char *fmt, va_list ap)
{
	char reason[TD_VBD_REASON_MAX];

	vsnprintf(reason, sizeof(reason), fmt, ap);
	td_log(TD_LOG_ERR, func, NULL, NULL, "%s", reason);
	if (vbd && vbd->open_error && !vbd->open_error->reason[0]) {
		memcpy(vbd->open_error->reason, reason, sizeof(reason));
		vbd->open_error->syntax = syntax;
	}
	return err < 0 ? err : -EINVAL;
}

/* See driver.h. */
int td_driver_fail_at(const char *func, struct td_driver *drv, int err,
		      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vbd_vfail(drv ? drv->vbd : NULL, func, false, err, fmt, ap);
	va_end(ap);
	return err;
}

/* The chain's text is malformed: the caller adds advice on its syntax. */
static int vbd_syntax_fail(struct td_vbd *vbd, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int vbd_syntax_fail(struct td_vbd *vbd, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vbd_vfail(vbd, "vbd_parse_chain", true, err, fmt, ap);
	va_end(ap);
	return err;
}

/* --- open and close --------------------------------------------------------- */

static const struct td_driver_ops *
find_driver(const struct td_driver_ops *const *table, const char *name,
	    size_t len)
{
	for (; *table; table++)
		if (strlen((*table)->name) == len &&
		    !strncmp((*table)->name, name, len))
			return *table;
	return NULL;
}

/*
 * Split "sort|aio:/path" into layers.  Each element is NAME or NAME:ARGS;
 * the chain text is copied into vbd->chain and cut in place, so
 * args[i] points into it.
 */
static int vbd_parse_chain(struct td_vbd *vbd,
			   const struct td_driver_ops *const *table,
			   char **args)
{
	char *p = vbd->chain_buf;
	unsigned int n = 0;

	if (!*p)
		return vbd_syntax_fail(vbd, -EINVAL,
				       "empty driver chain: give one such as "
				       "aio:/path/disk.img");
	for (;;) {
		char *bar = strchr(p, '|');
		char *colon;
		size_t name_len;

		if (bar)
			*bar = '\0';
		colon = strchr(p, ':');
		name_len = colon ? (size_t)(colon - p) : strlen(p);
		if (n == VBD_MAX_LAYERS)
			return vbd_syntax_fail(
				vbd, -E2BIG,
				"driver chain '%s' has more than %d drivers",
				vbd->chain, VBD_MAX_LAYERS);
		vbd->drivers[n].ops = find_driver(table, p, name_len);
		if (!vbd->drivers[n].ops) {
			char known[256] = "";

			for (const struct td_driver_ops *const *t = table; *t;
			     t++) {
				size_t used = strlen(known);

				snprintf(known + used, sizeof(known) - used,
					 "%s%s", used ? ", " : "", (*t)->name);
			}
			return vbd_syntax_fail(vbd, -ENOENT,
					       "unknown driver '%.*s' in chain "
					       "'%s' (known: %s)",
					       (int)name_len, p, vbd->chain,
					       known);
		}
		args[n] = colon ? colon + 1 : p + name_len;
		n++;
		if (!bar)
			break;
		p = bar + 1;
	}
	vbd->nr_layers = n;
	for (unsigned int i = 0; i < n; i++) {
		bool filter = vbd->drivers[i].ops->flags & TD_DRV_FILTER;

		if (filter && i == n - 1)
			return vbd_syntax_fail(
				vbd, -EINVAL,
				"driver '%s' is a filter: put a driver below "
				"it (e.g. %s|aio:/path)",
				vbd->drivers[i].ops->name,
				vbd->drivers[i].ops->name);
		if (!filter && i != n - 1)
			return vbd_syntax_fail(
				vbd, -EINVAL,
				"driver '%s' must be the last in the chain",
				vbd->drivers[i].ops->name);
	}
	return 0;
}

static void vbd_close_layers(struct td_vbd *vbd, unsigned int from)
{
	for (unsigned int i = from; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		drv->ops->close(drv);
		free(drv->data);
		drv->data = NULL;
	}
}

static int vbd_open_layers(struct td_vbd *vbd, char **args, bool read_only)
{
	for (unsigned int i = vbd->nr_layers; i-- > 0;) {
		struct td_driver *drv = &vbd->drivers[i];
		int err;

		drv->vbd = vbd;
		drv->loop = vbd->loop;
		drv->layer = i;
		drv->read_only = read_only;
		drv->queue_depth = vbd->pools[i].size;
		drv->lower =
			i + 1 < vbd->nr_layers ? &vbd->drivers[i + 1] : NULL;
		if (drv->lower)
			drv->info = drv->lower->info;
		drv->info.sector_size = drv->info.sector_size ?: TD_SECTOR_SIZE;
		drv->data = calloc(1, drv->ops->dev_size ?: 1);
		if (!drv->data) {
			vbd_close_layers(vbd, i + 1);
			return -ENOMEM;
		}
		err = drv->ops->open(drv, args[i]);
		if (err && vbd->open_error && !vbd->open_error->reason[0])
			snprintf(vbd->open_error->reason, TD_VBD_REASON_MAX,
				 "%s: cannot open '%s': %s", drv->ops->name,
				 args[i], strerror(err < 0 ? -err : EINVAL));
		if (err) {
			free(drv->data);
			drv->data = NULL;
			vbd_close_layers(vbd, i + 1);
			return err;
		}
	}
	return 0;
}

static void vbd_free(struct td_vbd *vbd)
{
	for (unsigned int i = 0; i < VBD_MAX_LAYERS; i++)
		vbd_pool_fini(&vbd->pools[i]);
	free(vbd->chain);
	free(vbd->chain_buf);
	free(vbd);
}

int td_vbd_open(struct td_loop *loop, const struct td_driver_ops *const *table,
		const struct td_vbd_params *params, struct td_vbd **out)
{
	uint32_t inflight = params->max_inflight ?: TD_VBD_DEFAULT_MAX_INFLIGHT;
	uint32_t max_io = params->max_io_bytes ?: TD_VBD_DEFAULT_MAX_IO_BYTES;
	char *args[VBD_MAX_LAYERS];
	struct td_vbd *vbd;
	int err;

	if (max_io < TD_SECTOR_SIZE || max_io % TD_SECTOR_SIZE) {
		td_err("max I/O size %u is not a multiple of %u", max_io,
		       TD_SECTOR_SIZE);
		return -EINVAL;
	}
	vbd = calloc(1, sizeof(*vbd));
	if (!vbd)
		return -ENOMEM;
	vbd->chain = strdup(params->chain ? params->chain : "");
	vbd->chain_buf = strdup(vbd->chain ? vbd->chain : "");
	if (!vbd->chain || !vbd->chain_buf) {
		vbd_free(vbd);
		return -ENOMEM;
	}
	snprintf(vbd->name, sizeof(vbd->name), "%s",
		 params->name ? params->name : "vbd");
	vbd->loop = loop;
	vbd->table = table;
	TAILQ_INIT(&vbd->waiting);
	vbd->done_tail = &vbd->done_head;
	td_ratelimit_init(&vbd->rl);
	vbd->open_error = params->error;
	vbd->open_read_only = params->read_only;
	if (params->error)
		memset(params->error, 0, sizeof(*params->error));

	err = vbd_parse_chain(vbd, table, args);
	if (!err)
		err = vbd_driver_counters_init(vbd);
	for (unsigned int i = 0; !err && i < vbd->nr_layers; i++)
		err = vbd_pool_init(vbd, &vbd->pools[i], inflight,
				    vbd->drivers[i].ops->req_size);
	if (!err)
		err = vbd_open_layers(vbd, args, params->read_only);
	if (err) {
		vbd_free(vbd);
		return err;
	}
	vbd->info = vbd->drivers[0].info;
	vbd->info.read_only |= params->read_only;
	if (vbd->info.sector_size < TD_SECTOR_SIZE ||
	    vbd->info.sector_size % TD_SECTOR_SIZE ||
	    (vbd->info.sector_size & (vbd->info.sector_size - 1))) {
		err = td_driver_fail(&vbd->drivers[0], -EINVAL,
				     "%s: sector size %u: not a power of two "
				     ">= %u",
				     vbd->drivers[0].ops->name,
				     vbd->info.sector_size, TD_SECTOR_SIZE);
		vbd_close_layers(vbd, 0);
		vbd_free(vbd);
		return err;
	}
	vbd->open_error = NULL;
	vbd->max_io_sectors = max_io >> TD_SECTOR_SHIFT;
	if (vbd->info.max_io_sectors &&
	    vbd->info.max_io_sectors < vbd->max_io_sectors)
		vbd->max_io_sectors = vbd->info.max_io_sectors;
	vbd->info.max_io_sectors = vbd->max_io_sectors;
	td_loop_add_hook(loop, &vbd->unplug_hook, vbd_unplug, vbd);
	*out = vbd;
	return 0;
}

static bool reopen_failpoint(void)
{
	const char *fp = getenv("TAPSTRIPE_FAILPOINT");

	return fp && !strcmp(fp, "vbd-reopen");
}

int vbd_reopen_layers(struct td_vbd *vbd)
{
	char *args[VBD_MAX_LAYERS];
	uint64_t size = vbd->info.size_sectors;
	int err;

	if (vbd->active || vbd->stats.inflight || vbd->in_done ||
	    vbd->done_head)
		return -EBUSY;
	vbd_close_layers(vbd, 0);
	memcpy(vbd->chain_buf, vbd->chain, strlen(vbd->chain) + 1);
	err = vbd_parse_chain(vbd, vbd->table, args);
	if (!err)
		err = vbd_open_layers(vbd, args, vbd->open_read_only);
	if (!err && vbd->drivers[0].info.size_sectors != size) {
		td_vbd_err(vbd,
			   "reopened with %" PRIu64 " sectors, not %" PRIu64,
			   vbd->drivers[0].info.size_sectors, size);
		vbd_close_layers(vbd, 0);
		err = -EIO;
	}
	/* TAPSTRIPE_FAILPOINT=vbd-reopen: fail as a reopen whose open
	 * failed, every layer closed (the error-path test). */
	if (!err && reopen_failpoint()) {
		td_vbd_err(vbd, "fail point vbd-reopen: the reopen fails");
		vbd_close_layers(vbd, 0);
		err = -EIO;
	}
	if (err)
		vbd->nr_layers = 0;
	return err;
}

int td_vbd_close(struct td_vbd *vbd)
{
	if (vbd->stats.inflight || vbd->in_done || vbd->active ||
	    (vbd->snap && vbd_snap_busy(vbd->snap)))
		return -EBUSY;
	vbd_snap_close(vbd);
	td_loop_del_hook(&vbd->unplug_hook);
	td_loop_defer_cancel(vbd->loop, &vbd->done_defer);
	td_loop_defer_cancel(vbd->loop, &vbd->drained_defer);
	vbd_close_layers(vbd, 0);
	vbd_free(vbd);
	return 0;
}

/* --- accessors ---------------------------------------------------------------- */

const struct td_disk_info *td_vbd_get_info(const struct td_vbd *vbd)
{
	return &vbd->info;
}

const char *td_vbd_name(const struct td_vbd *vbd)
{
	return vbd->name;
}

const char *td_vbd_chain(const struct td_vbd *vbd)
{
	return vbd->chain ? vbd->chain : "";
}

struct td_ratelimit *td_vbd_ratelimit(struct td_vbd *vbd)
{
	return &vbd->rl;
}

struct td_loop *td_vbd_loop(const struct td_vbd *vbd)
{
	return vbd->loop;
}

void td_vbd_get_stats(const struct td_vbd *vbd, struct td_vbd_stats *out)
{
	*out = vbd->stats;
	vbd_driver_counters(vbd, out);
}
