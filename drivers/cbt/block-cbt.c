/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * block-cbt.c - the cbt filter: changed-block tracking, persistent dirty
 * bitmaps of the disk below it (cbt-bitmap.h), exported over NBD as the
 * metadata context qemu:dirty-bitmap:NAME (block_status).
 *
 * Chain: "cbt|LOWER" or "cbt:dir=PATH|LOWER".  The bitmaps live in
 * PATH (default TAPSTRIPE_STATEDIR/cbt/<disk name>), one file each; every
 * file there is opened with the disk.  WRITE, WRITE_ZEROES and DISCARD
 * set their granules in every bitmap before they are forwarded (a bit not
 * yet set costs one pwrite; a set one costs nothing); a bitmap made or
 * cleared marks the writes still in flight.  Nothing syncs on the data
 * path: the boot-id rule of cbt-bitmap.h covers a host crash.  `tap-ctl driver -i ID cbt create|remove|clear|list|show`
 * manages them at run time; doc/cbt.md.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/cbt/cbt-bitmap.h"
#include "drivers/drivers.h"

#define CBT_MAX_BITMAPS 16

/* A write-like request between its submit and its completion. */
struct cbt_req {
	TAILQ_ENTRY(cbt_req) link;
	struct td_request *req;
};

TAILQ_HEAD(cbt_req_list, cbt_req);

struct cbt_dev {
	char dir[PATH_MAX];
	char boot_id[CBT_BOOT_ID_MAX];
	struct cbt_bitmap *maps[CBT_MAX_BITMAPS];
	unsigned int nr;
	/*
	 * Writes in flight: a bitmap made or cleared while one is in flight
	 * marks it too, since its data may land after a backup read the
	 * region by the previous bitmap.
	 */
	struct cbt_req_list inflight;
	/* Counters (td_cbt_ops.counters). */
	uint64_t marks;	   /* writes that set a bit not yet set */
	uint64_t failures; /* writes refused: a bit could not be written */
};

static struct cbt_dev *dev_of(struct td_driver *drv)
{
	return drv->data;
}

static uint64_t disk_bytes(struct td_driver *drv)
{
	return drv->info.size_sectors << TD_SECTOR_SHIFT;
}

/* --- I/O ------------------------------------------------------------------------ */

static bool write_like(enum td_op op)
{
	return op == TD_OP_WRITE || op == TD_OP_WRITE_ZEROES ||
	       op == TD_OP_DISCARD;
}

static void cbt_lower_done(struct td_request *lower, int err, void *opaque)
{
	struct td_request *req = opaque;
	struct cbt_req *cr = req->priv;

	(void)lower;
	if (write_like(req->op))
		TAILQ_REMOVE(&dev_of(req->drv)->inflight, cr, link);
	td_complete(req, err);
}

static int cbt_mark(struct td_driver *drv, const struct td_request *req)
{
	struct cbt_dev *dev = dev_of(drv);
	uint64_t off = req->sector << TD_SECTOR_SHIFT;
	bool marked = false;
	int err;

	for (unsigned int i = 0; i < dev->nr; i++) {
		uint64_t before = dev->maps[i]->nr_dirty;

		if ((err = cbt_bitmap_mark(dev->maps[i], off,
					   td_request_bytes(req))))
			return err;
		marked |= dev->maps[i]->nr_dirty != before;
	}
	dev->marks += marked;
	return 0;
}

/*
 * Neither FLUSH nor FUA syncs the bitmaps: after a host crash the boot id
 * differs and every granule is taken as dirty whatever was synced (a
 * write sent without a flush may reach the disk while its bit, written
 * after the last sync, does not), and after a tapdisk crash the page
 * cache holds every bit.  The files are synced when they close.
 */
static int cbt_submit(struct td_driver *drv, struct td_request *req)
{
	struct cbt_dev *dev = dev_of(drv);
	struct cbt_req *cr = req->priv;
	struct td_request *lower;
	int err = 0;

	if (write_like(req->op) && (err = cbt_mark(drv, req))) {
		/* Unrecorded, the write would be missed by a backup. */
		dev->failures++;
		td_vbd_err(drv->vbd, "cbt: cannot record a %s: %s; refused",
			   td_op_name(req->op), strerror(-err));
		td_complete(req, -EIO);
		return 0;
	}
	if (!(lower = td_request_get(drv))) {
		td_complete(req, -EBUSY); /* cannot happen: one per request */
		return 0;
	}
	if (write_like(req->op)) {
		cr->req = req;
		TAILQ_INSERT_TAIL(&dev->inflight, cr, link);
	}
	lower->op = req->op;
	lower->flags = req->flags;
	lower->sector = req->sector;
	lower->nr_sectors = req->nr_sectors;
	lower->iov = req->iov;
	lower->iovcnt = req->iovcnt;
	td_forward(drv, lower, cbt_lower_done, req);
	return 0;
}

/* A bitmap made or cleared now: the writes in flight are in it too. */
static int cbt_mark_inflight(struct cbt_dev *dev, struct cbt_bitmap *b)
{
	struct cbt_req *cr;
	int err;

	TAILQ_FOREACH(cr, &dev->inflight, link)
	{
		if ((err = cbt_bitmap_mark(b,
					   cr->req->sector << TD_SECTOR_SHIFT,
					   td_request_bytes(cr->req))))
			return err;
	}
	return 0;
}

/* --- open and close -------------------------------------------------------------- */

static int cbt_parse(struct td_driver *drv, const char *args)
{
	struct cbt_dev *dev = dev_of(drv);
	int n;

	if (!args[0])
		n = snprintf(dev->dir, sizeof(dev->dir), "%s/cbt/%s",
			     TAPSTRIPE_STATEDIR, td_vbd_name(drv->vbd));
	else if (!strncmp(args, "dir=", 4) && args[4] == '/' &&
		 !strchr(args, ','))
		n = snprintf(dev->dir, sizeof(dev->dir), "%s", args + 4);
	else
		return td_driver_fail(drv, -EINVAL,
				      "cbt: options are 'dir=/ABSOLUTE/PATH' "
				      "or none, not '%.64s'",
				      args);
	if (n >= (int)sizeof(dev->dir))
		return td_driver_fail(drv, -ENAMETOOLONG, "cbt: dir too long");
	return 0;
}

/* mkdir -p of dev->dir, mode 0700. */
static int cbt_make_dir(char *dir)
{
	for (char *p = dir + 1;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(dir, 0700) && errno != EEXIST) {
			*p = c;
			return -errno;
		}
		*p = c;
		if (!c)
			return 0;
	}
}

static bool is_cbt_file(const char *name)
{
	size_t n = strlen(name);

	return n > 4 && !strcmp(name + n - 4, ".cbt") && name[0] != '.';
}

static int cbt_load(struct td_driver *drv)
{
	struct cbt_dev *dev = dev_of(drv);
	char path[PATH_MAX + 256], why[CBT_WHY_MAX];
	struct dirent *de;
	DIR *d = opendir(dev->dir);
	int err = 0;

	if (!d)
		return td_driver_fail(drv, -errno, "cbt: cannot read %s: %s",
				      dev->dir, strerror(errno));
	while (!err && (de = readdir(d))) {
		if (!is_cbt_file(de->d_name))
			continue;
		if (dev->nr == CBT_MAX_BITMAPS) {
			err = td_driver_fail(drv, -EMFILE,
					     "cbt: more than %d bitmaps in %s",
					     CBT_MAX_BITMAPS, dev->dir);
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", dev->dir, de->d_name);
		err = cbt_bitmap_open(path, disk_bytes(drv), dev->boot_id,
				      &dev->maps[dev->nr], why, sizeof(why));
		if (err) {
			td_driver_fail(drv, err, "%s", why);
			break;
		}
		if (dev->maps[dev->nr]->recovered)
			td_vbd_warn(drv->vbd,
				    "cbt: bitmap %s was in use when the host "
				    "went down: every granule marked dirty",
				    dev->maps[dev->nr]->name);
		dev->nr++;
	}
	closedir(d);
	return err;
}

static void cbt_close(struct td_driver *drv)
{
	struct cbt_dev *dev = dev_of(drv);

	for (unsigned int i = 0; i < dev->nr; i++)
		cbt_bitmap_close(dev->maps[i]);
	dev->nr = 0;
}

static int cbt_open(struct td_driver *drv, const char *args)
{
	struct cbt_dev *dev = dev_of(drv);
	int err;

	TAILQ_INIT(&dev->inflight);
	if ((err = cbt_parse(drv, args)))
		return err;
	cbt_read_boot_id(dev->boot_id, sizeof(dev->boot_id));
	if ((err = cbt_make_dir(dev->dir)))
		return td_driver_fail(drv, err, "cbt: cannot make %s: %s",
				      dev->dir, strerror(-err));
	if ((err = cbt_load(drv)))
		cbt_close(drv);
	/* drv->info stays the lower driver's. */
	return err;
}

/* The lower driver's new size in *sectors: the bitmaps grow, clean. */
static int cbt_refresh_size(struct td_driver *drv, uint64_t *sectors)
{
	struct cbt_dev *dev = dev_of(drv);
	int err;

	for (unsigned int i = 0; i < dev->nr; i++)
		if ((err = cbt_bitmap_grow(dev->maps[i],
					   *sectors << TD_SECTOR_SHIFT)))
			return err;
	return 0;
}

/* --- block status ------------------------------------------------------------------- */

static struct cbt_bitmap *cbt_find(struct cbt_dev *dev, const char *name)
{
	for (unsigned int i = 0; i < dev->nr; i++)
		if (!strcmp(dev->maps[i]->name, name))
			return dev->maps[i];
	return NULL;
}

static int cbt_block_status(struct td_driver *drv, const char *ctx,
			    uint64_t sector, uint64_t nr_sectors,
			    struct td_extent *ext, unsigned int *nr)
{
	size_t plen = strlen(TD_CTX_DIRTY_BITMAP_PREFIX);
	struct cbt_bitmap *b;

	if (strncmp(ctx, TD_CTX_DIRTY_BITMAP_PREFIX, plen) ||
	    !(b = cbt_find(dev_of(drv), ctx + plen)))
		return -ENOENT;
	cbt_bitmap_extents(b, sector << TD_SECTOR_SHIFT,
			   nr_sectors << TD_SECTOR_SHIFT, ext, nr);
	return 0;
}

static void cbt_list_contexts(struct td_driver *drv,
			      void (*add)(const char *name, void *opaque),
			      void *opaque)
{
	struct cbt_dev *dev = dev_of(drv);
	char ctx[TD_CTX_NAME_MAX];

	for (unsigned int i = 0; i < dev->nr; i++) {
		snprintf(ctx, sizeof(ctx), "%s%s", TD_CTX_DIRTY_BITMAP_PREFIX,
			 dev->maps[i]->name);
		add(ctx, opaque);
	}
}

/* --- reports and commands ---------------------------------------------------------- */

static void cbt_report_json(struct td_driver *drv, struct td_json *j)
{
	struct cbt_dev *dev = dev_of(drv);

	td_json_str(j, "dir", dev->dir);
	td_json_begin_array(j, "bitmaps");
	for (unsigned int i = 0; i < dev->nr; i++) {
		const struct cbt_bitmap *b = dev->maps[i];

		td_json_begin_object(j, NULL);
		td_json_str(j, "name", b->name);
		td_json_u64(j, "granularity", b->granularity);
		td_json_u64(j, "size_bytes", b->size_bytes);
		td_json_u64(j, "dirty_bytes",
			    b->nr_dirty * (uint64_t)b->granularity);
		td_json_bool(j, "recovered", b->recovered);
		td_json_u64(j, "bitmap_writes", b->writes);
		td_json_u64(j, "syncs", b->syncs);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

static void cbt_report_text(struct td_driver *drv, struct td_strbuf *sb)
{
	struct cbt_dev *dev = dev_of(drv);

	td_strbuf_printf(sb, "dir: %s\n", dev->dir);
	for (unsigned int i = 0; i < dev->nr; i++) {
		const struct cbt_bitmap *b = dev->maps[i];

		td_strbuf_printf(sb,
				 "%s: granularity %" PRIu32 ", %" PRIu64
				 " of %" PRIu64 " granules dirty%s\n",
				 b->name, b->granularity, b->nr_dirty,
				 b->nr_bits,
				 b->recovered ? " (all: host crash)" : "");
	}
}

static const char cbt_usage[] =
	"cbt: commands are 'create NAME [granularity=SIZE]', 'remove NAME', "
	"'clear NAME', 'list [json]', 'show NAME [json]'";

static int cbt_cmd_create(struct td_driver *drv, int argc, char **argv,
			  struct td_strbuf *out)
{
	struct cbt_dev *dev = dev_of(drv);
	uint64_t gran = CBT_DEFAULT_GRANULARITY;
	char why[CBT_WHY_MAX];
	int err;

	if (argc > 3 || (argc == 3 && (strncmp(argv[2], "granularity=", 12) ||
				       td_parse_size(argv[2] + 12, &gran) ||
				       gran > CBT_MAX_GRANULARITY))) {
		td_strbuf_puts(out, "cbt create NAME [granularity=SIZE]: "
				    "SIZE a power of two from 4K to 64M");
		return -EINVAL;
	}
	if (cbt_find(dev, argv[1])) {
		td_strbuf_printf(out, "cbt: bitmap '%s' exists", argv[1]);
		return -EEXIST;
	}
	if (dev->nr == CBT_MAX_BITMAPS) {
		td_strbuf_printf(out, "cbt: %d bitmaps already: remove one",
				 CBT_MAX_BITMAPS);
		return -EMFILE;
	}
	err = cbt_bitmap_create(dev->dir, argv[1], (uint32_t)gran,
				disk_bytes(drv), dev->boot_id,
				&dev->maps[dev->nr], why, sizeof(why));
	if (err) {
		td_strbuf_puts(out, why);
		return err;
	}
	if ((err = cbt_mark_inflight(dev, dev->maps[dev->nr]))) {
		td_strbuf_printf(out, "cbt: %s: %s", argv[1], strerror(-err));
		cbt_bitmap_remove(dev->maps[dev->nr]);
		return err;
	}
	dev->nr++;
	td_vbd_info(drv->vbd, "cbt: bitmap %s created, granularity %" PRIu64,
		    argv[1], gran);
	td_strbuf_printf(out,
			 "bitmap %s: granularity %" PRIu64 ", context %s%s\n",
			 argv[1], gran, TD_CTX_DIRTY_BITMAP_PREFIX, argv[1]);
	return 0;
}

/* "remove NAME" or "clear NAME". */
static int cbt_cmd_one(struct td_driver *drv, int argc, char **argv,
		       struct td_strbuf *out)
{
	struct cbt_dev *dev = dev_of(drv);
	struct cbt_bitmap *b = argc == 2 ? cbt_find(dev, argv[1]) : NULL;
	int err;

	if (!b) {
		td_strbuf_printf(out, "cbt: no bitmap '%.64s' (cbt list)",
				 argc == 2 ? argv[1] : "");
		return argc == 2 ? -ENOENT : -EINVAL;
	}
	if (!strcmp(argv[0], "clear")) {
		err = cbt_bitmap_clear(b);
		if (!err)
			err = cbt_mark_inflight(dev, b);
	} else {
		unsigned int i = 0;

		while (dev->maps[i] != b)
			i++;
		dev->maps[i] = dev->maps[--dev->nr];
		err = cbt_bitmap_remove(b);
	}
	td_vbd_info(drv->vbd, "cbt: bitmap %s %s%s", argv[1],
		    argv[0][0] == 'c' ? "cleared" : "removed",
		    err ? " (with an error)" : "");
	if (err)
		td_strbuf_printf(out, "cbt: %s %s: %s", argv[0], argv[1],
				 strerror(-err));
	else
		td_strbuf_printf(out, "bitmap %s %s\n", argv[1],
				 argv[0][0] == 'c' ? "cleared" : "removed");
	return err;
}

/* "show NAME [json]": the dirty extents. */
static int cbt_cmd_show(struct td_driver *drv, int argc, char **argv,
			struct td_strbuf *out)
{
	struct cbt_bitmap *b =
		argc >= 2 ? cbt_find(dev_of(drv), argv[1]) : NULL;
	bool json = argc == 3 && !strcmp(argv[2], "json");
	uint64_t at = 0, size = b ? b->size_bytes : 0;
	struct td_extent ext[64];
	struct td_json j;

	if (!b || (argc == 3 && !json) || argc > 3) {
		td_strbuf_printf(out, "cbt show NAME [json]: no bitmap '%.64s'",
				 argc >= 2 ? argv[1] : "");
		return b ? -EINVAL : -ENOENT;
	}
	if (json) {
		td_json_init(&j, out);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "name", b->name);
		td_json_u64(&j, "granularity", b->granularity);
		td_json_begin_array(&j, "dirty");
	}
	while (at < size) {
		unsigned int n = 64;

		cbt_bitmap_extents(b, at, size - at, ext, &n);
		for (unsigned int i = 0; i < n; i++) {
			uint64_t len = ext[i].nr_sectors << TD_SECTOR_SHIFT;

			if (ext[i].flags & TD_EXTENT_DIRTY && json) {
				td_json_begin_object(&j, NULL);
				td_json_u64(&j, "offset", at);
				td_json_u64(&j, "length", len);
				td_json_end_object(&j);
			} else if (ext[i].flags & TD_EXTENT_DIRTY) {
				td_strbuf_printf(out,
						 "%" PRIu64 " %" PRIu64 "\n",
						 at, len);
			}
			at += len;
		}
	}
	if (!json)
		return 0;
	td_json_end_array(&j);
	td_json_end_object(&j);
	return td_json_finish(&j);
}

static int cbt_control(struct td_driver *drv, int argc, char **argv,
		       struct td_strbuf *out)
{
	if (!strcmp(argv[0], "create") && argc >= 2)
		return cbt_cmd_create(drv, argc, argv, out);
	if (!strcmp(argv[0], "remove") || !strcmp(argv[0], "clear"))
		return cbt_cmd_one(drv, argc, argv, out);
	if (!strcmp(argv[0], "show"))
		return cbt_cmd_show(drv, argc, argv, out);
	if (!strcmp(argv[0], "list") && argc == 1) {
		cbt_report_text(drv, out);
		return 0;
	}
	if (!strcmp(argv[0], "list") && argc == 2 && !strcmp(argv[1], "json")) {
		struct td_json j;

		td_json_init(&j, out);
		td_json_begin_object(&j, NULL);
		cbt_report_json(drv, &j);
		td_json_end_object(&j);
		return td_json_finish(&j);
	}
	td_strbuf_puts(out, cbt_usage);
	return -EINVAL;
}

static const struct td_driver_counter cbt_counters[] = {
	{"cbt_marks", offsetof(struct cbt_dev, marks), false},
	{"cbt_failures", offsetof(struct cbt_dev, failures), false},
};

const struct td_driver_ops td_cbt_ops = {
	.name = "cbt",
	.flags = TD_DRV_FILTER,
	.dev_size = sizeof(struct cbt_dev),
	.req_size = sizeof(struct cbt_req),
	.open = cbt_open,
	.close = cbt_close,
	.submit = cbt_submit,
	.refresh_size = cbt_refresh_size,
	.block_status = cbt_block_status,
	.list_contexts = cbt_list_contexts,
	.report_json = cbt_report_json,
	.report_text = cbt_report_text,
	.control = cbt_control,
	.counters = cbt_counters,
	.nr_counters = sizeof(cbt_counters) / sizeof(cbt_counters[0]),
};
