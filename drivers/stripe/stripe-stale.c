/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-stale.c - durable stale marks of the stripe driver.
 *
 * When a replica misses a write, the write may be acknowledged only once
 * the mapping file says that replica is stale: after a crash, a replica
 * the file calls "ok" must hold every acknowledged write.  The file is
 * rewritten atomically (stripe_map_rewrite: temp file, fsync, rename,
 * fsync of the directory) under tapdisk's exclusive lock, by one writer
 * thread per disk, so that the event loop never waits for the disk.
 *
 * Generations.  The loop changes a slot in memory at once (reads and
 * writes obey dev->map.slots[].stale from then on) and records the change
 * in want[] with mark_gen[slot] = the next generation.  stripe_stale_commit
 * hands want[] to the thread as generation gen_requested + 1; the thread
 * always writes the newest want[] it finds, so writing generation g makes
 * every change of a generation <= g durable, and several marks made in
 * one pass cost one rewrite.  The thread reports the newest generation it
 * wrote (ok_gen) and the newest it failed to write (fail_gen) through an
 * eventfd; a slot is durable when mark_gen[slot] <= gen_durable.
 *
 * Waiters.  A write that must not be acknowledged before generation g is
 * durable (it made replicas stale, or skipped a replica whose mark is not
 * durable yet) waits on stale.waiters; it completes with its own result
 * once g is durable, with -EIO once the rewrite of g has failed (the file
 * still calls the replica ok, so acknowledging would lie after a crash).
 * A later write that depends on a failed mark asks for a new rewrite.
 *
 * The master is told (stripe-notify.h) of each slot whose state became
 * durable, after the rewrite: never before the file says so.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/stripe/stripe-int.h"

/* --- the writer thread ------------------------------------------------------ */

/*
 * The thread's copy takes want's state: slots, regions, moves, and the
 * servers that a replica or a move uses, numbered in order (a server a
 * move left behind is dropped from the file, while the loop keeps its
 * own numbering).  Under st->lock.  0 or -ENOMEM.
 */
static int want_to_copy(struct stripe_stale *st)
{
	struct stripe_map *w = &st->want_map, *c = &st->copy;
	size_t nr = stripe_map_nr_slots(w);
	size_t words = nr * stripe_map_region_words(w);
	uint32_t *num = calloc(w->nr_servers, sizeof(*num)), n = 0;
	struct stripe_map_server *s;

	if (!num)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++) {
		num[w->slots[i].server] = 1;
		if (w->moves[i].active)
			num[w->moves[i].server] = 1;
	}
	if (!(s = realloc(c->servers, w->nr_servers * sizeof(*s)))) {
		free(num);
		return -ENOMEM;
	}
	c->servers = s;
	for (uint32_t k = 0; k < w->nr_servers; k++)
		if (num[k]) {
			c->servers[n] = w->servers[k];
			num[k] = n++;
		}
	c->nr_servers = n;
	memcpy(c->slots, w->slots, nr * sizeof(*c->slots));
	memcpy(c->moves, w->moves, nr * sizeof(*c->moves));
	for (size_t i = 0; i < nr; i++) {
		c->slots[i].server = num[w->slots[i].server];
		if (c->moves[i].active)
			c->moves[i].server = num[w->moves[i].server];
	}
	memcpy(c->dirty, w->dirty, words * sizeof(*c->dirty));
	memcpy(c->move_dirty, w->move_dirty, words * sizeof(*c->move_dirty));
	free(num);
	return 0;
}

static void *writer_main(void *opaque)
{
	struct stripe_dev *dev = opaque;
	struct stripe_stale *st = &dev->stale;
	uint64_t done = 0, one = 1;

	pthread_mutex_lock(&st->lock);
	for (;;) {
		struct stripe_map_error err;
		uint64_t gen;
		int ret;

		while (st->want_gen == done && !st->stop)
			pthread_cond_wait(&st->cond, &st->lock);
		if (st->want_gen == done)
			break; /* stopping, and everything asked is written */
		gen = st->want_gen;
		ret = want_to_copy(st);
		pthread_mutex_unlock(&st->lock);

		if (!ret)
			ret = stripe_map_rewrite(dev->path, &st->copy,
						 &st->lock_fd, &err);
		else
			snprintf(err.reason, sizeof(err.reason),
				 "out of memory");

		pthread_mutex_lock(&st->lock);
		if (ret) {
			st->fail_gen = gen;
			st->fail_err = ret;
			snprintf(st->fail_msg, sizeof(st->fail_msg), "%s",
				 err.reason);
		} else {
			st->ok_gen = gen;
		}
		done = gen;
		if (write(st->efd, &one, sizeof(one)) < 0)
			abort(); /* an eventfd write fails only on overflow */
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

/* --- the loop's side ---------------------------------------------------------- */

/* Tell the master about every slot whose current state is now durable. */
static void stale_notify(struct stripe_dev *dev)
{
	struct stripe_stale *st = &dev->stale;
	const struct stripe_map *m = &dev->map;
	size_t nr = stripe_map_nr_slots(m);

	for (size_t i = 0; i < nr; i++) {
		bool stale = m->slots[i].stale;

		if (st->notified[i] == stale ||
		    st->mark_gen[i] > st->gen_durable)
			continue;
		st->notified[i] = stale;
		stripe_notify_replica(
			dev->notify, m->vdisk,
			(uint32_t)(i / ((size_t)m->replicas *
					m->extents_per_column)),
			(uint32_t)((i / m->replicas) % m->extents_per_column),
			(uint32_t)(i % m->replicas), stale);
	}
}

/* Complete the waiters whose generation is decided. */
static void stale_release(struct stripe_dev *dev)
{
	struct stripe_stale *st = &dev->stale;
	struct stripe_req *sr, *next;

	for (sr = TAILQ_FIRST(&st->waiters); sr; sr = next) {
		next = TAILQ_NEXT(sr, wait_link);
		if (sr->wait_gen <= st->gen_durable) {
			TAILQ_REMOVE(&st->waiters, sr, wait_link);
			stripe_req_complete(dev, sr, sr->err);
		} else if (sr->wait_gen <= st->gen_failed) {
			TAILQ_REMOVE(&st->waiters, sr, wait_link);
			stripe_req_complete(dev, sr, -EIO);
		}
	}
}

static void stale_reap(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct stripe_dev *dev = opaque;
	struct stripe_stale *st = &dev->stale;
	uint64_t count, ok, fail;
	char msg[sizeof(st->fail_msg)];
	int err;

	if (read(st->efd, &count, sizeof(count)) != sizeof(count))
		return;
	pthread_mutex_lock(&st->lock);
	ok = st->ok_gen;
	fail = st->fail_gen;
	err = st->fail_err;
	memcpy(msg, st->fail_msg, sizeof(msg));
	pthread_mutex_unlock(&st->lock);

	if (fail > st->gen_failed) {
		st->gen_failed = fail;
		st->rewrite_errors++;
		td_vbd_err(dev->drv->vbd,
			   "stripe: cannot record stale replicas in %s: %s "
			   "(%s); writes that depend on the mark fail with "
			   "EIO until a rewrite succeeds",
			   dev->path, msg, strerror(-err));
	}
	if (ok > st->gen_durable) {
		st->gen_durable = ok;
		st->rewrites++;
		stale_notify(dev);
	}
	stale_release(dev);
}

/* Hand slot's state (flag and regions) to want[], for the next rewrite. */
static void stale_want(struct stripe_dev *dev, size_t slot)
{
	struct stripe_stale *st = &dev->stale;
	const struct stripe_map *m = &dev->map;
	struct stripe_map *w = &st->want_map;
	size_t words = stripe_map_region_words(m);

	pthread_mutex_lock(&st->lock);
	w->slots[slot] = m->slots[slot];
	w->moves[slot] = m->moves[slot];
	memcpy(stripe_map_slot_dirty(w, slot), stripe_map_slot_dirty(m, slot),
	       words * sizeof(*w->dirty));
	memcpy(stripe_map_move_dirty(w, slot), stripe_map_move_dirty(m, slot),
	       words * sizeof(*w->move_dirty));
	pthread_mutex_unlock(&st->lock);
	st->mark_gen[slot] = st->gen_requested + 1;
	st->dirty = true;
}

/* Keep the server's count of usable slots after slot changed. */
static void live_count(struct stripe_dev *dev, size_t slot, bool was)
{
	struct stripe_server *srv = &dev->servers[dev->map.slots[slot].server];
	bool now = stripe_slot_usable(&dev->map, slot);

	if (was && !now)
		srv->live_slots--;
	else if (!was && now)
		srv->live_slots++;
}

void stripe_stale_set(struct stripe_dev *dev, size_t slot, bool stale)
{
	struct stripe_map *m = &dev->map;
	uint32_t n = stripe_map_region_count(m);
	const uint64_t *bits = stripe_map_slot_dirty(m, slot);

	/* Stale means every region here; a slot with some is made whole. */
	bool was = stripe_slot_usable(m, slot);

	if (stale ? stripe_map_bits_count(bits, n) == n : !m->slots[slot].stale)
		return;
	if (stale)
		stripe_map_slot_mark_all(m, slot);
	else
		stripe_map_slot_clear_all(m, slot);
	live_count(dev, slot, was);
	stale_want(dev, slot);
}

uint64_t stripe_stale_mark_range(struct stripe_dev *dev, size_t slot,
				 uint64_t off, uint64_t len)
{
	struct stripe_map *m = &dev->map;
	uint64_t *bits = stripe_map_slot_dirty(m, slot);
	uint32_t k0 = (uint32_t)(off / m->region_bytes);
	uint32_t k1 = (uint32_t)((off + (len ? len : 1) - 1) / m->region_bytes);
	bool all = true;

	for (uint32_t k = k0; k <= k1 && all; k++)
		all = stripe_map_bits_test(bits, k);
	if (!all) {
		bool was = stripe_slot_usable(m, slot);

		stripe_map_bits_set_range(bits, k0, k1);
		m->slots[slot].stale = true;
		live_count(dev, slot, was);
		stale_want(dev, slot);
	}
	return stripe_stale_gen_for(dev, slot);
}

int stripe_stale_server_added(struct stripe_dev *dev)
{
	struct stripe_stale *st = &dev->stale;
	struct stripe_map *w = &st->want_map;
	const struct stripe_map *m = &dev->map;
	struct stripe_map_server *s;

	pthread_mutex_lock(&st->lock);
	s = realloc(w->servers, m->nr_servers * sizeof(*s));
	if (s) {
		w->servers = s;
		memcpy(s, m->servers, m->nr_servers * sizeof(*s));
		w->nr_servers = m->nr_servers;
	}
	pthread_mutex_unlock(&st->lock);
	return s ? 0 : -ENOMEM;
}

void stripe_stale_slot_changed(struct stripe_dev *dev, size_t slot)
{
	stale_want(dev, slot);
}

void stripe_stale_told(struct stripe_dev *dev, bool *told)
{
	size_t nr = stripe_map_nr_slots(&dev->map);

	if (!told || !dev->stale.notified)
		return;
	for (size_t i = 0; i < nr; i++)
		dev->stale.notified[i] = told[i];
	stale_notify(dev); /* the marks are in the file already */
}

uint64_t stripe_stale_commit(struct stripe_dev *dev)
{
	struct stripe_stale *st = &dev->stale;

	if (!st->dirty)
		return st->gen_requested;
	st->dirty = false;
	st->gen_requested++;
	pthread_mutex_lock(&st->lock);
	st->want_gen = st->gen_requested;
	pthread_cond_signal(&st->cond);
	pthread_mutex_unlock(&st->lock);
	return st->gen_requested;
}

bool stripe_stale_durable(const struct stripe_dev *dev, size_t slot)
{
	return dev->stale.mark_gen[slot] <= dev->stale.gen_durable;
}

uint64_t stripe_stale_gen_for(struct stripe_dev *dev, size_t slot)
{
	struct stripe_stale *st = &dev->stale;
	uint64_t mark = st->mark_gen[slot];

	if (mark <= st->gen_durable)
		return 0;
	if (mark <= st->gen_failed) {
		/* Its rewrite failed: a newer one is needed, and covers it. */
		if (st->gen_requested <= st->gen_failed)
			st->dirty = true;
		return stripe_stale_commit(dev);
	}
	stripe_stale_commit(dev); /* a no-op unless it is still unhanded */
	return mark;
}

void stripe_stale_wait(struct stripe_dev *dev, struct stripe_req *sr,
		       uint64_t gen)
{
	struct stripe_stale *st = &dev->stale;

	if (gen <= st->gen_durable) {
		stripe_req_complete(dev, sr, sr->err);
		return;
	}
	sr->wait_gen = gen;
	TAILQ_INSERT_TAIL(&st->waiters, sr, wait_link);
}

uint32_t stripe_stale_pending(const struct stripe_dev *dev)
{
	size_t nr = stripe_map_nr_slots(&dev->map);
	uint32_t n = 0;

	for (size_t i = 0; i < nr; i++)
		if (!stripe_stale_durable(dev, i))
			n++;
	return n;
}

/* --- growing while serving (stripe-grow.c) ------------------------------------ */

/* The new per-slot arrays: old slot i's values at its grown index. */
static int grow_arrays(struct stripe_dev *dev, const struct stripe_map *g,
		       uint64_t **mark_gen, bool **notified)
{
	const struct stripe_stale *st = &dev->stale;
	size_t nr = stripe_map_nr_slots(g), old_nr;

	*mark_gen = calloc(nr, sizeof(**mark_gen));
	*notified = calloc(nr, sizeof(**notified));
	if (!*mark_gen || !*notified) {
		free(*mark_gen);
		free(*notified);
		return -ENOMEM;
	}
	for (size_t k = 0; k < nr; k++)
		(*notified)[k] =
			g->slots[k].stale; /* added: as the master has */
	old_nr = stripe_map_nr_slots(&dev->map);
	for (size_t i = 0; i < old_nr; i++) {
		size_t k = stripe_map_grow_slot(&dev->map,
						g->extents_per_column, i);

		(*mark_gen)[k] = st->mark_gen[i];
		(*notified)[k] = st->notified[i];
	}
	return 0;
}

/* Swap want_map and the thread's copy with *w and *c (under st->lock). */
static void grow_swap(struct stripe_stale *st, struct stripe_map *w,
		      struct stripe_map *c)
{
	struct stripe_map t = st->want_map;

	st->want_map = *w;
	*w = t;
	t = st->copy;
	st->copy = *c;
	*c = t;
}

/* Under st->lock: the thread waits (everything asked is answered). */
static bool writer_idle(const struct stripe_stale *st)
{
	uint64_t done = st->ok_gen > st->fail_gen ? st->ok_gen : st->fail_gen;

	return st->want_gen == done;
}

int stripe_stale_grow(struct stripe_dev *dev, const struct stripe_map *g,
		      struct stripe_map_error *err)
{
	struct stripe_stale *st = &dev->stale;
	struct stripe_map w = {0}, c = {0};
	uint64_t *mark_gen = NULL;
	bool *notified = NULL;
	int ret;

	if ((ret = grow_arrays(dev, g, &mark_gen, &notified)) ||
	    (ret = stripe_map_copy(&w, g)) || (ret = stripe_map_copy(&c, g))) {
		snprintf(err->reason, sizeof(err->reason), "out of memory");
		goto out;
	}
	pthread_mutex_lock(&st->lock);
	if (!writer_idle(st)) {
		pthread_mutex_unlock(&st->lock);
		snprintf(err->reason, sizeof(err->reason),
			 "the map writer is recording stale marks now");
		ret = -EBUSY;
		goto out;
	}
	grow_swap(st, &w, &c);
	ret = want_to_copy(st);
	if (ret)
		snprintf(err->reason, sizeof(err->reason), "out of memory");
	else
		ret = stripe_map_rewrite(dev->path, &st->copy, &st->lock_fd,
					 err);
	if (ret)
		grow_swap(st, &w, &c); /* the old state back */
	pthread_mutex_unlock(&st->lock);
	if (!ret) {
		free(st->mark_gen);
		free(st->notified);
		st->mark_gen = mark_gen;
		st->notified = notified;
		mark_gen = NULL;
		notified = NULL;
	}
out:
	free(mark_gen);
	free(notified);
	stripe_map_free(&w);
	stripe_map_free(&c);
	return ret;
}

/* --- start and stop --------------------------------------------------------- */

static int stale_alloc(struct stripe_dev *dev)
{
	struct stripe_stale *st = &dev->stale;
	size_t nr = stripe_map_nr_slots(&dev->map);
	int ret;

	st->mark_gen = calloc(nr, sizeof(*st->mark_gen));
	st->notified = calloc(nr, sizeof(*st->notified));
	if (!st->mark_gen || !st->notified)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++)
		st->notified[i] = dev->map.slots[i].stale;
	st->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (st->efd < 0)
		return -errno;
	if ((ret = stripe_map_copy(&st->want_map, &dev->map)))
		return ret;
	return stripe_map_copy(&st->copy, &dev->map);
}

int stripe_stale_start(struct stripe_dev *dev, int lock_fd)
{
	struct stripe_stale *st = &dev->stale;
	int ret;

	TAILQ_INIT(&st->waiters);
	st->inited = true;
	st->lock_fd = lock_fd;
	st->efd = -1;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	ret = stale_alloc(dev);
	if (!ret)
		ret = td_loop_add_fd(dev->drv->loop, &st->efd_event, st->efd,
				     EPOLLIN, stale_reap, dev);
	if (!ret)
		ret = td_thread_create(&st->thread, writer_main, dev);
	if (!ret)
		st->thread_started = true;
	return ret; /* stripe_stale_stop cleans up either way */
}

void stripe_stale_stop(struct stripe_dev *dev)
{
	struct stripe_stale *st = &dev->stale;

	if (!st->inited)
		return;
	if (st->thread_started) {
		/* The thread writes what it was given before it exits. */
		stripe_stale_commit(dev);
		pthread_mutex_lock(&st->lock);
		st->stop = true;
		pthread_cond_signal(&st->cond);
		pthread_mutex_unlock(&st->lock);
		pthread_join(st->thread, NULL);
		st->thread_started = false;
		if (st->fail_gen > st->ok_gen)
			td_vbd_err(dev->drv->vbd,
				   "stripe: the last rewrite of %s failed: "
				   "%s; its stale marks are not on disk",
				   dev->path, st->fail_msg);
	}
	td_loop_del_fd(&st->efd_event);
	if (st->efd >= 0)
		close(st->efd);
	st->efd = -1;
	stripe_map_close(st->lock_fd);
	st->lock_fd = -1;
	stripe_map_free(&st->copy);
	free(st->mark_gen);
	free(st->notified);
	stripe_map_free(&st->want_map);
	st->mark_gen = NULL;
	st->notified = NULL;
	pthread_mutex_destroy(&st->lock);
	pthread_cond_destroy(&st->cond);
	st->inited = false;
}
