/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-al.c - the activity log of the stripe driver (see stripe-al.h).
 *
 * In memory: at most cap entries, one per hot region, each with the
 * writes in flight on it and the log generation that first named it.  A
 * write enters before it is routed (stripe_al_enter): its regions gain a
 * reference; a region not in the log takes a free entry, or evicts the
 * least recently used one that no write holds; when an entry of the
 * write's is not yet on disk the write waits for that generation (like a
 * stale mark, stripe-stale.c).  It leaves (stripe_al_leave) when it is
 * completed, so an unacknowledged write's regions are always in the log.
 * When every entry is held, the write waits for one to be let go.
 *
 * The writer thread writes the newest set it was given (generation
 * want_gen) into the record slot want_gen % 2 and fdatasyncs; it reports
 * through an eventfd, as the stale writer does.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/stripe/stripe-int.h"

#define AL_NONE UINT32_MAX

/* --- the set ------------------------------------------------------------------- */

static uint32_t hash_of(const struct stripe_al *al, uint64_t region)
{
	return (uint32_t)((region * 0x9e3779b97f4a7c15ull) >> 32) &
	       (al->nbuckets - 1);
}

static uint32_t find(const struct stripe_al *al, uint64_t region)
{
	for (uint32_t i = al->bucket[hash_of(al, region)]; i != AL_NONE;
	     i = al->e[i].next)
		if (al->e[i].region == region)
			return i;
	return AL_NONE;
}

static void unlink_entry(struct stripe_al *al, uint32_t idx)
{
	uint32_t *p = &al->bucket[hash_of(al, al->e[idx].region)];

	while (*p != idx)
		p = &al->e[*p].next;
	*p = al->e[idx].next;
	al->e[idx].used = false;
	al->nr--;
}

/* A free entry, or the least recently used idle one (evicted); AL_NONE. */
static uint32_t take_entry(struct stripe_al *al)
{
	uint32_t best = AL_NONE;

	for (uint32_t i = 0; i < al->cap; i++) {
		const struct stripe_al_entry *e = &al->e[i];

		if (!e->used)
			return i;
		if (!e->inflight &&
		    (best == AL_NONE || e->last_use < al->e[best].last_use))
			best = i;
	}
	if (best != AL_NONE) {
		unlink_entry(al, best);
		al->evictions++;
	}
	return best;
}

static void insert(struct stripe_al *al, uint32_t idx, uint64_t region)
{
	struct stripe_al_entry *e = &al->e[idx];
	uint32_t h = hash_of(al, region);

	e->region = region;
	e->used = true;
	e->inflight = 0;
	e->add_gen = al->gen_requested + 1;
	e->next = al->bucket[h];
	al->bucket[h] = idx;
	al->nr++;
	al->dirty = true;
}

/* The global ids of the regions sr touches: [*first, *last]. */
static void req_regions(const struct stripe_dev *dev,
			const struct stripe_req *sr, uint64_t *first,
			uint64_t *last)
{
	const struct stripe_map *m = &dev->map;
	const struct stripe_al *al = &dev->al;
	uint64_t base =
		((uint64_t)sr->column * m->extents_per_column + sr->extent) *
		al->per_extent;
	uint64_t len = sr->bytes ? sr->bytes : 1;

	*first = base + sr->ext_off / al->unit;
	*last = base + (sr->ext_off + len - 1) / al->unit;
}

static void drop_refs(struct stripe_al *al, uint64_t first, uint64_t last)
{
	for (uint64_t r = first; r <= last; r++) {
		uint32_t i = find(al, r);

		if (i != AL_NONE && al->e[i].inflight)
			al->e[i].inflight--;
	}
}

/*
 * Take a reference on every region of sr.  0 with *gen the generation to
 * wait for (0: on disk already), -ENOSPC when the log is full of held
 * entries (nothing is held by sr then).
 */
static int take_refs(struct stripe_dev *dev, struct stripe_req *sr,
		     uint64_t *gen)
{
	struct stripe_al *al = &dev->al;
	uint64_t first, last;

	req_regions(dev, sr, &first, &last);
	*gen = 0;
	for (uint64_t r = first; r <= last; r++) {
		uint32_t i = find(al, r);

		if (i == AL_NONE) {
			if ((i = take_entry(al)) == AL_NONE) {
				if (r > first)
					drop_refs(al, first, r - 1);
				return -ENOSPC;
			}
			insert(al, i, r);
		}
		al->e[i].inflight++;
		al->e[i].last_use = ++al->tick;
		if (al->e[i].add_gen > al->gen_durable &&
		    al->e[i].add_gen > *gen)
			*gen = al->e[i].add_gen;
	}
	return 0;
}

/* --- the writer thread ------------------------------------------------------- */

static void *writer_main(void *opaque)
{
	struct stripe_al *al = opaque;
	uint64_t done = 0, one = 1;

	pthread_mutex_lock(&al->lock);
	for (;;) {
		struct stripe_al_record rec;
		int ret;

		while (al->want_gen == done && !al->stop)
			pthread_cond_wait(&al->cond, &al->lock);
		if (al->want_gen == done)
			break;
		rec = al->rec;
		rec.gen = al->want_gen;
		rec.nr = al->want_nr;
		memcpy(al->out, al->want, rec.nr * sizeof(*al->out));
		pthread_mutex_unlock(&al->lock);

		ret = stripe_al_file_write(al->fd, al->cap, &rec, al->out);

		pthread_mutex_lock(&al->lock);
		if (ret) {
			al->fail_gen = rec.gen;
			al->fail_err = ret;
		} else {
			al->ok_gen = rec.gen;
		}
		done = rec.gen;
		if (write(al->efd, &one, sizeof(one)) < 0)
			abort(); /* an eventfd write fails only on overflow */
	}
	pthread_mutex_unlock(&al->lock);
	return NULL;
}

/* Hand the current set to the thread if it changed. */
static void al_commit(struct stripe_al *al)
{
	uint32_t n = 0;

	if (!al->dirty)
		return;
	al->dirty = false;
	al->gen_requested++;
	pthread_mutex_lock(&al->lock);
	for (uint32_t i = 0; i < al->cap; i++)
		if (al->e[i].used)
			al->want[n++] = al->e[i].region;
	al->want_nr = n;
	al->want_gen = al->rec.gen + al->gen_requested;
	pthread_cond_signal(&al->cond);
	pthread_mutex_unlock(&al->lock);
}

/* --- the loop's side ----------------------------------------------------------- */

static void retry_full(struct stripe_dev *dev);

static void al_reap(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct stripe_dev *dev = opaque;
	struct stripe_al *al = &dev->al;
	struct stripe_req_list list = TAILQ_HEAD_INITIALIZER(list);
	struct stripe_req *sr, *next;
	uint64_t count, ok, fail;
	int err;

	if (read(al->efd, &count, sizeof(count)) != sizeof(count))
		return;
	pthread_mutex_lock(&al->lock);
	ok = al->ok_gen ? al->ok_gen - al->rec.gen : 0;
	fail = al->fail_gen ? al->fail_gen - al->rec.gen : 0;
	err = al->fail_err;
	pthread_mutex_unlock(&al->lock);
	if (fail > al->gen_failed) {
		al->gen_failed = fail;
		al->write_errors++;
		td_vbd_err(dev->drv->vbd,
			   "stripe: cannot write the activity log %s: %s; "
			   "writes to regions not in it fail with EIO until "
			   "a write succeeds",
			   al->path, strerror(-err));
	}
	if (ok > al->gen_durable) {
		al->gen_durable = ok;
		al->writes++;
	}
	for (sr = TAILQ_FIRST(&al->waiters); sr; sr = next) {
		next = TAILQ_NEXT(sr, wait_link);
		if (sr->wait_gen <= al->gen_durable ||
		    sr->wait_gen <= al->gen_failed) {
			TAILQ_REMOVE(&al->waiters, sr, wait_link);
			TAILQ_INSERT_TAIL(&list, sr, wait_link);
		}
	}
	while ((sr = TAILQ_FIRST(&list))) {
		TAILQ_REMOVE(&list, sr, wait_link);
		if (sr->wait_gen <= al->gen_durable) {
			stripe_io_restart(dev, sr);
			continue;
		}
		/* Its record failed: a newer write may succeed. */
		stripe_req_complete(dev, sr, -EIO);
	}
}

void stripe_al_regrow(struct stripe_dev *dev, uint32_t old_j, uint32_t new_j)
{
	struct stripe_al *al = &dev->al;

	free(al->told); /* read at open only, per old slot */
	al->told = NULL;
	if (!al->inited || !al->e)
		return;
	pthread_mutex_lock(&al->lock);
	for (uint32_t h = 0; h < al->nbuckets; h++)
		al->bucket[h] = AL_NONE;
	for (uint32_t i = 0; i < al->cap; i++) {
		struct stripe_al_entry *e = &al->e[i];
		uint32_t h;

		if (!e->used)
			continue;
		e->region = stripe_map_grow_index(e->region, old_j, new_j,
						  al->per_extent);
		h = hash_of(al, e->region);
		e->next = al->bucket[h];
		al->bucket[h] = i;
	}
	/* A record the thread writes now is of the old geometry whole. */
	for (uint32_t i = 0; i < al->want_nr; i++)
		al->want[i] = stripe_map_grow_index(al->want[i], old_j, new_j,
						    al->per_extent);
	al->rec.extents = dev->map.columns * new_j;
	pthread_mutex_unlock(&al->lock);
}

bool stripe_al_enter(struct stripe_dev *dev, struct stripe_req *sr)
{
	struct stripe_al *al = &dev->al;
	uint64_t gen;

	if (!al->enabled || sr->al_held)
		return false;
	if (take_refs(dev, sr, &gen)) {
		al->full_waits++;
		TAILQ_INSERT_TAIL(&al->full, sr, wait_link);
		return true;
	}
	sr->al_held = true;
	if (!gen)
		return false;
	if (al->dirty)
		al_commit(al);
	else if (gen <= al->gen_failed && al->gen_requested <= al->gen_failed) {
		al->dirty = true; /* its record failed: write it again */
		al_commit(al);
		gen = al->gen_requested;
	}
	al->waits++;
	sr->wait_gen = gen;
	TAILQ_INSERT_TAIL(&al->waiters, sr, wait_link);
	return true;
}

static void retry_full(struct stripe_dev *dev)
{
	struct stripe_al *al = &dev->al;
	struct stripe_req_list list = TAILQ_HEAD_INITIALIZER(list);
	struct stripe_req *sr;

	TAILQ_CONCAT(&list, &al->full, wait_link);
	while ((sr = TAILQ_FIRST(&list))) {
		TAILQ_REMOVE(&list, sr, wait_link);
		if (!stripe_al_enter(dev, sr))
			stripe_io_restart(dev, sr);
	}
}

void stripe_al_leave(struct stripe_dev *dev, struct stripe_req *sr)
{
	struct stripe_al *al = &dev->al;
	uint64_t first, last;

	if (!sr->al_held)
		return;
	sr->al_held = false;
	req_regions(dev, sr, &first, &last);
	drop_refs(al, first, last);
	if (!TAILQ_EMPTY(&al->full) && !dev->closing)
		retry_full(dev);
}

void stripe_req_complete(struct stripe_dev *dev, struct stripe_req *sr, int err)
{
	stripe_al_leave(dev, sr);
	td_complete(sr->req, err);
}

/* --- open: recovery ------------------------------------------------------------ */

/* The first replica of (c, j) that is not stale; -1 when none. */
static int recovery_source(const struct stripe_map *m, uint32_t c, uint32_t j)
{
	for (uint32_t r = 0; r < m->replicas; r++)
		if (!stripe_map_slot(m, c, j, r)->stale)
			return (int)r;
	return -1;
}

/*
 * Mark [off, off + len) of extent (c, j) dirty on every replica but the
 * source; the slots that changed are counted in *changed.
 */
static void mark_hot(struct stripe_map *m, uint32_t c, uint32_t j, uint64_t off,
		     uint64_t len, uint32_t *changed)
{
	uint64_t per = stripe_map_region_count(m);
	uint64_t k0 = off / m->region_bytes;
	uint64_t k1 = (off + len - 1) / m->region_bytes;
	int src = recovery_source(m, c, j);

	if (src < 0)
		return; /* every replica is stale: nothing to choose from */
	if (k1 >= per)
		k1 = per - 1;
	for (uint32_t r = 0; r < m->replicas; r++) {
		size_t slot = stripe_map_slot_index(m, c, j, r);
		uint64_t *bits = stripe_map_slot_dirty(m, slot);
		uint64_t before = stripe_map_bits_count(bits, per);

		if (r == (uint32_t)src)
			continue;
		stripe_map_bits_set_range(bits, k0, k1);
		m->slots[slot].stale = true;
		if (stripe_map_bits_count(bits, per) != before)
			(*changed)++;
	}
}

/* Every region of rec's ids, in the map's own region size. */
static uint32_t mark_records(struct stripe_map *m,
			     const struct stripe_al_record *rec,
			     const uint64_t *ids)
{
	uint32_t changed = 0;

	for (uint32_t i = 0; i < rec->nr; i++) {
		uint64_t ext = ids[i] / rec->regions_per_extent;
		uint64_t off =
			ids[i] % rec->regions_per_extent * rec->region_bytes;

		mark_hot(m, (uint32_t)(ext / m->extents_per_column),
			 (uint32_t)(ext % m->extents_per_column), off,
			 rec->region_bytes, &changed);
	}
	return changed;
}

/* The log cannot be read: every extent is taken as hot (whole extents). */
static uint32_t mark_everything(struct stripe_map *m)
{
	uint32_t changed = 0;

	for (uint32_t c = 0; c < m->columns; c++)
		for (uint32_t j = 0; j < m->extents_per_column; j++)
			mark_hot(m, c, j, 0, m->extent_size_bytes, &changed);
	return changed;
}

static bool record_fits(const struct stripe_map *m,
			const struct stripe_al_record *rec)
{
	return rec->extents == m->columns * m->extents_per_column &&
	       rec->regions_per_extent ==
		       (m->extent_size_bytes + rec->region_bytes - 1) /
			       rec->region_bytes;
}

/*
 * A log written before the map was grown (MAP.grow taken at open: more
 * extents per column, nothing else changed): its region ids are moved
 * to where the grown map has them (stripe_map_grow_index), and rec then
 * fits.  Ids beyond the old geometry are left for record_fits to refuse.
 */
static void regrow_record(const struct stripe_map *m,
			  struct stripe_al_record *rec, uint64_t *ids)
{
	uint32_t old_j = m->columns ? rec->extents / m->columns : 0;
	uint64_t limit = (uint64_t)rec->extents * rec->regions_per_extent;

	if (!old_j || rec->extents % m->columns ||
	    old_j >= m->extents_per_column ||
	    rec->regions_per_extent !=
		    (m->extent_size_bytes + rec->region_bytes - 1) /
			    rec->region_bytes)
		return;
	for (uint32_t i = 0; i < rec->nr; i++)
		if (ids[i] >= limit)
			return;
	for (uint32_t i = 0; i < rec->nr; i++)
		ids[i] = stripe_map_grow_index(ids[i], old_j,
					       m->extents_per_column,
					       rec->regions_per_extent);
	rec->extents = m->columns * m->extents_per_column;
}

/*
 * Read the log and mark what an unclean one names.  The number of slots
 * whose marks changed (the map must be rewritten), or -errno.
 */
static int al_recover(struct stripe_dev *dev)
{
	struct stripe_al *al = &dev->al;
	struct stripe_map *m = &dev->map;
	uint64_t *ids = NULL;
	int ret = stripe_al_file_read(al->fd, al->cap, &al->rec, &ids);

	if (ret == -ENOENT) {
		memset(&al->rec, 0, sizeof(al->rec));
		return 0;
	}
	if (!ret && al->rec.clean) {
		free(ids); /* closed cleanly: whatever map it was written for */
		return 0;
	}
	if (!ret && !record_fits(m, &al->rec))
		regrow_record(m, &al->rec, ids);
	if (ret == -EBADMSG || (!ret && !record_fits(m, &al->rec))) {
		td_err("stripe: %s: the activity log %s %s; taking every "
		       "extent as written when the disk was last closed: "
		       "its replicas are resynchronised from one of them",
		       dev->path, al->path,
		       ret ? "has no valid record"
			   : "does not match the map's geometry");
		free(ids);
		al->recovered = (uint32_t)(m->columns * m->extents_per_column);
		return (int)mark_everything(m);
	}
	if (ret)
		return ret;
	if (!al->rec.clean && al->rec.nr) {
		td_warn("stripe: %s: not closed cleanly: %u regions were "
			"hot; their replicas are made to agree by a resync",
			dev->path, al->rec.nr);
		al->recovered = al->rec.nr;
		ret = (int)mark_records(m, &al->rec, ids);
	}
	free(ids);
	return ret;
}

/* --- open and close ------------------------------------------------------------ */

static int al_alloc(struct stripe_al *al)
{
	al->nbuckets = 1;
	while (al->nbuckets < 2 * al->cap)
		al->nbuckets <<= 1;
	al->e = calloc(al->cap, sizeof(*al->e));
	al->bucket = malloc(al->nbuckets * sizeof(*al->bucket));
	al->want = calloc(al->cap, sizeof(*al->want));
	al->out = calloc(al->cap, sizeof(*al->out));
	if (!al->e || !al->bucket || !al->want || !al->out)
		return -ENOMEM;
	for (uint32_t i = 0; i < al->nbuckets; i++)
		al->bucket[i] = AL_NONE;
	return 0;
}

/* Write the first record of this open (or the clean one at close). */
static int al_write_now(struct stripe_dev *dev, uint64_t gen, bool clean)
{
	struct stripe_al *al = &dev->al;
	const struct stripe_map *m = &dev->map;
	struct stripe_al_record rec = {
		.gen = gen,
		.clean = clean,
		.nr = 0,
		.region_bytes = al->unit,
		.regions_per_extent = al->per_extent,
		.extents = m->columns * m->extents_per_column,
	};
	int ret = stripe_al_file_write(al->fd, al->cap, &rec, NULL);

	if (!ret)
		al->rec = rec;
	return ret;
}

/* Recover, rewrite the map if that marked something, start a new log. */
static int al_begin(struct stripe_dev *dev, int *lock_fd)
{
	struct stripe_al *al = &dev->al;
	struct stripe_map_error err;
	size_t nr = stripe_map_nr_slots(&dev->map);
	uint64_t gen;
	int changed, ret;

	if (!(al->told = calloc(nr, sizeof(*al->told))))
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++)
		al->told[i] = dev->map.slots[i].stale;
	changed = al_recover(dev);

	if (changed < 0)
		return td_driver_fail(dev->drv, changed,
				      "stripe: %s: cannot read the activity "
				      "log %s: %s",
				      dev->path, al->path, strerror(-changed));
	if (changed > 0 &&
	    (ret = stripe_map_rewrite(dev->path, &dev->map, lock_fd, &err)))
		return td_driver_fail(dev->drv, ret,
				      "stripe: %s: cannot record the regions "
				      "of the activity log: %s",
				      dev->path, err.reason);
	gen = al->rec.gen + 1;
	if (ftruncate(al->fd, (off_t)(2 * stripe_al_record_bytes(al->cap))) ||
	    (ret = al_write_now(dev, gen, false)))
		return td_driver_fail(dev->drv, -EIO,
				      "stripe: %s: cannot write the activity "
				      "log %s",
				      dev->path, al->path);
	return 0;
}

int stripe_al_open(struct stripe_dev *dev, int *lock_fd)
{
	struct stripe_al *al = &dev->al;
	int ret;

	TAILQ_INIT(&al->waiters);
	TAILQ_INIT(&al->full);
	al->fd = al->efd = -1;
	if (dev->drv->read_only || !dev->opts.al_regions)
		return 0;
	al->cap = dev->opts.al_regions;
	/* The log's unit: whole regions, at most E; STRIPE_AL_UNIT or so. */
	al->unit = dev->map.region_bytes;
	if (dev->opts.al_unit) {
		if (dev->opts.al_unit % al->unit ||
		    dev->opts.al_unit > dev->map.extent_size_bytes)
			return td_driver_fail(
				dev->drv, -EINVAL,
				"stripe: %s: al_unit=%" PRIu64 " must be a "
				"multiple of the map's region size (%" PRIu64
				") and at most its extent size (%" PRIu64 ")",
				dev->path, dev->opts.al_unit, al->unit,
				dev->map.extent_size_bytes);
		al->unit = dev->opts.al_unit;
	}
	while (!dev->opts.al_unit && al->unit * 2 <= STRIPE_AL_UNIT &&
	       al->unit * 2 <= dev->map.extent_size_bytes)
		al->unit *= 2;
	al->per_extent =
		(uint32_t)((dev->map.extent_size_bytes + al->unit - 1) /
			   al->unit);
	pthread_mutex_init(&al->lock, NULL);
	pthread_cond_init(&al->cond, NULL);
	al->inited = true;
	if (asprintf(&al->path, "%s.al", dev->path) < 0) {
		al->path = NULL;
		return -ENOMEM;
	}
	if ((ret = al_alloc(al)))
		return ret;
	al->fd = open(al->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (al->fd < 0)
		return td_driver_fail(dev->drv, -errno,
				      "stripe: %s: cannot open the activity "
				      "log %s: %s",
				      dev->path, al->path, strerror(errno));
	if ((ret = al_begin(dev, lock_fd)))
		return ret;
	al->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (al->efd < 0)
		return -errno;
	ret = td_loop_add_fd(dev->drv->loop, &al->efd_event, al->efd, EPOLLIN,
			     al_reap, dev);
	if (!ret && !(ret = td_thread_create(&al->thread, writer_main, al)))
		al->thread_started = true;
	if (!ret)
		al->enabled = true;
	return ret;
}

/* No region held and nothing aborted: the log may say "clean". */
static bool al_idle(const struct stripe_al *al)
{
	if (al->aborted || al->gen_failed > al->gen_durable)
		return false;
	for (uint32_t i = 0; i < al->cap; i++)
		if (al->e[i].used && al->e[i].inflight)
			return false;
	return true;
}

void stripe_al_close(struct stripe_dev *dev)
{
	struct stripe_al *al = &dev->al;

	if (!al->inited)
		return;
	if (al->thread_started) {
		pthread_mutex_lock(&al->lock);
		al->stop = true;
		pthread_cond_signal(&al->cond);
		pthread_mutex_unlock(&al->lock);
		pthread_join(al->thread, NULL);
		al->thread_started = false;
	}
	if (al->enabled && al_idle(al) &&
	    al_write_now(dev, al->rec.gen + al->gen_requested + 1, true))
		td_warn("stripe: %s: cannot mark the activity log %s clean; "
			"the next open resynchronises its regions",
			dev->path, al->path);
	td_loop_del_fd(&al->efd_event);
	if (al->efd >= 0)
		close(al->efd);
	if (al->fd >= 0)
		close(al->fd);
	free(al->e);
	free(al->bucket);
	free(al->want);
	free(al->out);
	free(al->told);
	free(al->path);
	pthread_mutex_destroy(&al->lock);
	pthread_cond_destroy(&al->cond);
	memset(al, 0, sizeof(*al));
	al->fd = al->efd = -1;
}
