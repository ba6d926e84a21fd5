/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-alloc.c - base:allocation of a striped disk (NBD BLOCK_STATUS):
 * which regions were never written.  A scan at open asks each extent's
 * fresh replica (GET LBA STATUS); block_status answers from what it
 * learnt, minus what was written since.  doc/stripe-driver.md
 * "Allocation (base:allocation)" says why it is built so.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "drivers/stripe/stripe-int.h"

static inline void bit_set(uint64_t *b, uint64_t k)
{
	b[k / 64] |= 1ull << (k % 64);
}

static inline bool bit_test(const uint64_t *b, uint64_t k)
{
	return b[k / 64] >> (k % 64) & 1;
}

/* Mark chunks [first, last] written (a write, discard or zeroing). */
static void mark_written(struct stripe_alloc *a, uint64_t first, uint64_t last)
{
	for (uint64_t k = first; k <= last && k < a->nr_chunks; k++)
		bit_set(a->written, k);
}

void stripe_alloc_write(struct stripe_dev *dev, uint64_t sector,
			uint64_t nr_sectors)
{
	struct stripe_alloc *a = &dev->alloc;
	uint64_t start = sector << TD_SECTOR_SHIFT;

	if (!a->chunks_inited || !nr_sectors)
		return;
	mark_written(a, start / a->chunk_bytes,
		     (start + (nr_sectors << TD_SECTOR_SHIFT) - 1) /
			     a->chunk_bytes);
}

/*
 * A fresh replica of extent (c, j) says [x0, x1) (bytes into the extent)
 * is deallocated and reads as zeroes: mark the chunks wholly inside it.
 * A chunk lies inside one stripe unit (chunk_bytes divides U), so its
 * virtual place is that of its first byte.
 */
static void mark_hole(struct stripe_dev *dev, uint32_t c, uint32_t j,
		      uint64_t x0, uint64_t x1)
{
	struct stripe_alloc *a = &dev->alloc;
	uint64_t g = a->chunk_bytes, e = dev->layout.extent_size_bytes;
	uint64_t x = (x0 + g - 1) / g * g;

	for (; x + g <= x1; x += g) {
		uint64_t v = stripe_layout_virtual(&dev->layout, c,
						   (uint64_t)j * e + x);

		if (v / g < a->nr_chunks)
			bit_set(a->hole, v / g);
	}
}

/*
 * A replica of extent (c, j) that is fresh (not stale) on a server that
 * can answer GET LBA STATUS (an iSCSI session: the device backend has no
 * such command): -1 when none.
 */
static int fresh_replica(const struct stripe_dev *dev, uint32_t c, uint32_t j)
{
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		const struct stripe_map_replica *rep =
			stripe_map_slot(&dev->map, c, j, r);

		if (!rep->stale &&
		    dev->servers[rep->server].ops == &stripe_backend_iscsi)
			return (int)r;
	}
	return -1;
}

static void scan_issue(struct stripe_dev *dev);

/* The scan moves on to the next extent. */
static void scan_next_extent(struct stripe_alloc *a)
{
	a->cursor = 0;
	a->extent++;
}

static void scan_done(struct stripe_cmd *sc, int err)
{
	struct stripe_dev *dev = sc->srv->dev;
	struct stripe_alloc *a = &dev->alloc;
	struct stripe_server *srv = sc->srv;
	uint32_t c = a->extent % dev->map.columns;
	uint32_t j = a->extent / dev->map.columns;

	a->busy = false;
	if (dev->closing)
		return;
	if (err) {
		/* Not known: these extents stay allocated (the safe answer). */
		if (!a->logged_error && err == -EOPNOTSUPP)
			td_info("stripe: %s: server %u's LUN does not say "
				"that deallocated blocks read as zeroes (no "
				"LBPME and LBPRZ; tgtd: --params "
				"thin_provisioning=1): its extents count as "
				"allocated",
				dev->path, srv->index);
		else if (!a->logged_error)
			td_info("stripe: %s: server %u does not report "
				"allocation (%s): its extents count as "
				"allocated",
				dev->path, srv->index, strerror(-err));
		a->logged_error = true;
		a->extents_unknown++;
		scan_next_extent(a);
		scan_issue(dev);
		return;
	}
	for (uint32_t i = 0; i < a->answer.nr; i++) {
		const struct iscsi_lba_extent *e = &a->answer.ext[i];
		uint64_t x0 = a->cursor;
		uint64_t x1 = x0 + (uint64_t)e->nr_blocks * srv->block_size;

		if (e->hole)
			mark_hole(dev, c, j, x0, x1);
		a->cursor = x1;
	}
	if (a->cursor >= dev->layout.extent_size_bytes) {
		a->extents_scanned++;
		scan_next_extent(a);
	}
	scan_issue(dev);
}

/*
 * Ask for the rest of the current extent (from cursor) on a fresh
 * replica; extents without one stay allocated.  One command at a time:
 * the scan is background work and must not crowd the guest's I/O.
 */
static void scan_issue(struct stripe_dev *dev)
{
	struct stripe_alloc *a = &dev->alloc;
	uint32_t nr_extents = dev->map.columns * dev->map.extents_per_column;

	while (a->extent < a->scan_extents && a->extent < nr_extents) {
		uint32_t c = a->extent % dev->map.columns;
		uint32_t j = a->extent / dev->map.columns;
		int r = fresh_replica(dev, c, j);
		const struct stripe_map_replica *rep;
		struct stripe_server *srv;
		uint64_t left;

		if (r < 0) {
			a->extents_unknown++;
			scan_next_extent(a);
			continue;
		}
		rep = stripe_map_slot(&dev->map, c, j, (uint32_t)r);
		srv = &dev->servers[rep->server];
		left = dev->layout.extent_size_bytes - a->cursor;
		if (left > STRIPE_ALLOC_MAX_BYTES)
			left = STRIPE_ALLOC_MAX_BYTES;
		memset(&a->cmd.io, 0, sizeof(a->cmd.io));
		a->cmd.srv = srv;
		a->cmd.done = scan_done;
		a->cmd.io.op = ISCSI_CMD_GET_LBA_STATUS;
		a->cmd.io.lba = rep->lba + a->cursor / srv->block_size;
		a->cmd.io.nr_blocks = (uint32_t)(left / srv->block_size);
		a->answer.room = STRIPE_ALLOC_EXTENTS;
		a->answer.nr = 0;
		a->answer.ext = a->ext;
		a->cmd.io.lba_status = &a->answer;
		a->busy = true;
		stripe_cmd_submit(dev, &a->cmd);
		return;
	}
	if (!a->done)
		td_info("stripe: %s: allocation scan done: %" PRIu64
			" extents scanned, %" PRIu64 " unknown (allocated)",
			dev->path, a->extents_scanned, a->extents_unknown);
	a->done = true;
}

int stripe_alloc_start(struct stripe_dev *dev)
{
	struct stripe_alloc *a = &dev->alloc;
	uint64_t u = dev->layout.stripe_unit_bytes;
	size_t words;

	a->chunk_bytes =
		u < STRIPE_ALLOC_CHUNK_BYTES ? u : STRIPE_ALLOC_CHUNK_BYTES;
	a->nr_chunks =
		(dev->map.size_bytes + a->chunk_bytes - 1) / a->chunk_bytes;
	words = (size_t)((a->nr_chunks + 63) / 64);
	a->hole = calloc(words, sizeof(uint64_t));
	a->written = calloc(words, sizeof(uint64_t));
	if (!a->hole || !a->written) {
		stripe_alloc_close(dev);
		return -ENOMEM;
	}
	a->chunks_inited = true;
	a->scan_extents = dev->map.columns * dev->map.extents_per_column;
	scan_issue(dev);
	return 0;
}

void stripe_alloc_close(struct stripe_dev *dev)
{
	struct stripe_alloc *a = &dev->alloc;

	free(a->hole);
	free(a->written);
	a->hole = a->written = NULL;
	a->chunks_inited = false;
}

/* Whether chunk k is known never written and reading as zeroes. */
static bool chunk_is_hole(const struct stripe_alloc *a, uint64_t k)
{
	return k < a->nr_chunks && bit_test(a->hole, k) &&
	       !bit_test(a->written, k);
}

int stripe_alloc_block_status(struct td_driver *drv, const char *ctx,
			      uint64_t sector, uint64_t nr_sectors,
			      struct td_extent *ext, unsigned int *nr)
{
	struct stripe_dev *dev = drv->data;
	const struct stripe_alloc *a = &dev->alloc;
	uint64_t pos = sector << TD_SECTOR_SHIFT;
	uint64_t end = pos + (nr_sectors << TD_SECTOR_SHIFT);
	unsigned int n = 0;

	if (strcmp(ctx, TD_CTX_BASE_ALLOCATION))
		return -ENOENT;
	if (!a->chunks_inited)
		return -ENOENT; /* the core answers: all allocated */
	while (pos < end) {
		bool hole = chunk_is_hole(a, pos / a->chunk_bytes);
		uint64_t next = (pos / a->chunk_bytes + 1) * a->chunk_bytes;

		while (next < end &&
		       chunk_is_hole(a, next / a->chunk_bytes) == hole)
			next += a->chunk_bytes;
		if (next > end)
			next = end;
		if (n == *nr)
			break;
		ext[n].nr_sectors = (next - pos) >> TD_SECTOR_SHIFT;
		ext[n].flags = hole ? TD_EXTENT_HOLE | TD_EXTENT_ZERO : 0;
		n++;
		pos = next;
	}
	*nr = n;
	return 0;
}

void stripe_alloc_report_json(const struct stripe_dev *dev, struct td_json *j)
{
	const struct stripe_alloc *a = &dev->alloc;

	td_json_begin_object(j, "allocation");
	td_json_bool(j, "scan_done", a->done);
	td_json_u64(j, "chunk_bytes", a->chunk_bytes);
	td_json_u64(j, "extents_scanned", a->extents_scanned);
	td_json_u64(j, "extents_unknown", a->extents_unknown);
	td_json_end_object(j);
}
