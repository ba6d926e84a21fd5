/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-move.c - re-homing a replica while the disk is served (issue #19):
 * "stripe move add C X R target=... lba=...", "move abort C X R",
 * "move status".
 *
 * A move gives replica R of extent (C, X) a new place (a move target, the
 * map's "move" line): from then on every write to the extent also goes
 * there (stripe-io.c), and the resync machinery (stripe-resync.c) copies
 * the whole extent to it from the replicas, under its chunk lock, at
 * resync_rate.  Once copied and its server's cache synchronised, the
 * target is swapped in: the slot's replica is the new place, clean, the
 * move line gone, in memory and then durably in the map (the stale writer
 * of stripe-stale.c, under the file's lock).  The old place is no longer
 * written; the master frees it when told (stripe-ctl, MS_MOVE_COMMIT),
 * which it must do only once the map no longer names it.
 *
 * The new place's server may be one the disk did not use: it is added
 * (block-stripe.c, stripe_server_add), within the spare room tapdisk
 * keeps for that.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/stripe/stripe-int.h"

/* The words of "move add" after C X R. */
struct move_args {
	struct stripe_map_server ms;
	uint64_t lba;
	bool have_lba, have_lun, have_bs;
};

static int parse_u64_word(const char *v, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (*v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || n > max)
		return -EINVAL;
	*out = n;
	return 0;
}

static int parse_u32_word(const char *v, uint32_t max, uint32_t *out)
{
	uint64_t n;
	int ret = parse_u64_word(v, max, &n);

	if (!ret)
		*out = (uint32_t)n;
	return ret;
}

static int copy_word(char *dst, size_t size, const char *v)
{
	if (!*v || strlen(v) >= size || strchr(v, ' '))
		return -EINVAL;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

/* One "key=value" word of "move add". */
static int parse_kv(struct move_args *a, const char *w)
{
	const char *v = strchr(w, '=');
	size_t k = v ? (size_t)(v - w) : 0;
	if (!v++)
		return -EINVAL;
	if (k == 6 && !strncmp(w, "target", k))
		return copy_word(a->ms.target, sizeof(a->ms.target), v);
	if (k == 6 && !strncmp(w, "portal", k))
		return copy_word(a->ms.portal, sizeof(a->ms.portal), v);
	if (k == 7 && !strncmp(w, "address", k))
		return copy_word(a->ms.address, sizeof(a->ms.address), v);
	if (k == 9 && !strncmp(w, "chap-user", k))
		return copy_word(a->ms.chap_user, sizeof(a->ms.chap_user), v);
	if (k == 11 && !strncmp(w, "chap-secret", k))
		return copy_word(a->ms.chap_secret, sizeof(a->ms.chap_secret),
				 v);
	if (k == 3 && !strncmp(w, "lun", k))
		return (a->have_lun = true,
			parse_u32_word(v, STRIPE_MAP_MAX_LUN, &a->ms.lun));
	if (k == 10 && !strncmp(w, "block-size", k))
		return (a->have_bs = true,
			parse_u32_word(v, STRIPE_MAP_MAX_BLOCK,
				       &a->ms.block_size));
	if (k == 3 && !strncmp(w, "lba", k))
		return (a->have_lba = true,
			parse_u64_word(v, UINT64_MAX / 4096, &a->lba));
	return -EINVAL;
}

/* "C X R" into a slot index of the map; -EINVAL out of range. */
static int parse_slot(const struct stripe_map *m, char **argv, size_t *slot)
{
	uint32_t c, j, r;

	if (parse_u32_word(argv[0], m->columns - 1, &c) ||
	    parse_u32_word(argv[1], m->extents_per_column - 1, &j) ||
	    parse_u32_word(argv[2], m->replicas - 1, &r))
		return -EINVAL;
	*slot = stripe_map_slot_index(m, c, j, r);
	return 0;
}

/* The server of a at index *idx, added to the disk when it is new. */
static int move_server(struct stripe_dev *dev, const struct move_args *a,
		       uint32_t *idx, struct td_strbuf *out)
{
	int ret = stripe_server_add(dev, &a->ms, idx);

	if (ret == -ENOSPC)
		td_strbuf_puts(out, "no room for another new server in this "
				    "tapdisk; restart it (the map keeps the "
				    "moves added so far)");
	else if (ret == -EINVAL)
		td_strbuf_printf(out,
				 "server %s lun %u: block size %u is not the "
				 "one the disk's map has for it",
				 a->ms.target, a->ms.lun, a->ms.block_size);
	else if (ret)
		td_strbuf_printf(out, "cannot add server %s lun %u: %s",
				 a->ms.target, a->ms.lun, strerror(-ret));
	return ret;
}

/* Whether server s at lba is the place of the slot already, or its move. */
static bool same_place(const struct stripe_map_replica *rep,
		       const struct stripe_map_move *mv, uint32_t s,
		       uint64_t lba)
{
	return mv ? mv->active && mv->server == s && mv->lba == lba
		  : rep->server == s && rep->lba == lba;
}

static int move_add(struct stripe_dev *dev, int argc, char **argv,
		    struct td_strbuf *out)
{
	struct stripe_map *m = &dev->map;
	struct move_args a;
	struct stripe_map_move *mv;
	uint32_t idx, n = stripe_map_region_count(m);
	size_t slot;
	int ret;

	memset(&a, 0, sizeof(a));
	if (argc < 5 || parse_slot(m, argv + 2, &slot))
		goto usage;
	for (int i = 5; i < argc; i++)
		if (parse_kv(&a, argv[i]))
			goto usage;
	if (!a.ms.target[0] || !a.ms.portal[0] || !a.ms.address[0] ||
	    !a.have_lun || !a.have_bs || !a.have_lba)
		goto usage;
	if ((ret = move_server(dev, &a, &idx, out)))
		return ret;
	mv = &m->moves[slot];
	if (same_place(&m->slots[slot], NULL, idx, a.lba)) {
		td_strbuf_puts(out, "done: the replica is there already\n");
		return 0;
	}
	if (same_place(&m->slots[slot], mv, idx, a.lba)) {
		td_strbuf_puts(out, "already: that move is under way\n");
		return 0;
	}
	if (mv->active) {
		td_strbuf_puts(out, "another move of this replica is under "
				    "way: abort it first");
		return -EBUSY;
	}
	if (a.lba + m->extent_size_bytes / a.ms.block_size >
	    dev->servers[idx].need_blocks)
		dev->servers[idx].need_blocks =
			a.lba + m->extent_size_bytes / a.ms.block_size;
	mv->active = true;
	mv->server = idx;
	mv->lba = a.lba;
	stripe_map_bits_set_all(stripe_map_move_dirty(m, slot), n);
	stripe_stale_slot_changed(dev, slot);
	stripe_stale_commit(dev);
	dev->moves_added++;
	td_vbd_info(dev->drv->vbd,
		    "stripe: column %s extent %s replica %s: moving to %s lun "
		    "%u lba %" PRIu64 " (server %u); every write goes there "
		    "too until it is copied and swapped in",
		    argv[2], argv[3], argv[4], a.ms.target, a.ms.lun, a.lba,
		    idx);
	td_strbuf_puts(out, "added: copying\n");
	stripe_resync_kick(dev);
	return 0;
usage:
	td_strbuf_puts(out, "usage: move add C X R target=IQN lun=N "
			    "portal=HOST:PORT address=A block-size=B "
			    "lba=LBA [chap-user=U chap-secret=S]");
	return -EINVAL;
}

static int move_abort(struct stripe_dev *dev, int argc, char **argv,
		      struct td_strbuf *out)
{
	struct stripe_map *m = &dev->map;
	size_t slot;

	if (argc != 5 || parse_slot(m, argv + 2, &slot)) {
		td_strbuf_puts(out, "usage: move abort C X R");
		return -EINVAL;
	}
	if (!m->moves[slot].active) {
		td_strbuf_puts(out, "no move of that replica\n");
		return 0;
	}
	if (dev->resync.have_slot && dev->resync.is_move &&
	    dev->resync.slot == slot) {
		td_strbuf_puts(out, "its copy is running: 'stripe resync "
				    "stop' first, then abort");
		return -EBUSY;
	}
	memset(&m->moves[slot], 0, sizeof(m->moves[slot]));
	memset(stripe_map_move_dirty(m, slot), 0,
	       stripe_map_region_words(m) * sizeof(*m->move_dirty));
	stripe_stale_slot_changed(dev, slot);
	stripe_stale_commit(dev);
	td_vbd_info(dev->drv->vbd,
		    "stripe: column %s extent %s replica %s: move aborted",
		    argv[2], argv[3], argv[4]);
	td_strbuf_puts(out, "aborted\n");
	return 0;
}

void stripe_move_swap(struct stripe_dev *dev, size_t slot)
{
	struct stripe_map *m = &dev->map;
	struct stripe_map_replica *rep = &m->slots[slot];
	struct stripe_map_move *mv = &m->moves[slot];
	struct stripe_server *old = &dev->servers[rep->server];
	uint32_t from = rep->server;

	if (stripe_slot_usable(m, slot))
		old->live_slots--;
	rep->server = mv->server;
	rep->lba = mv->lba;
	stripe_map_slot_clear_all(m, slot); /* copied whole from clean ones */
	dev->servers[rep->server].live_slots++;
	memset(mv, 0, sizeof(*mv));
	memset(stripe_map_move_dirty(m, slot), 0,
	       stripe_map_region_words(m) * sizeof(*m->move_dirty));
	stripe_stale_slot_changed(dev, slot);
	stripe_stale_commit(dev);
	dev->moves_done++;
	td_vbd_info(dev->drv->vbd,
		    "stripe: column %u extent %u replica %u moved from server "
		    "%u to server %u lba %" PRIu64
		    " (the map says so once rewritten)",
		    (uint32_t)(slot /
			       ((size_t)m->replicas * m->extents_per_column)),
		    (uint32_t)((slot / m->replicas) % m->extents_per_column),
		    (uint32_t)(slot % m->replicas), from, rep->server,
		    rep->lba);
}

/* The state of slot's move for a report: "copying" or "waiting". */
static const char *move_state(const struct stripe_dev *dev, size_t slot)
{
	const struct stripe_resync *rs = &dev->resync;

	return rs->state == STRIPE_RESYNC_RUNNING && rs->have_slot &&
			       rs->is_move && rs->slot == slot
		       ? "copying"
		       : "waiting";
}

static uint64_t move_copied(const struct stripe_dev *dev, size_t slot)
{
	const struct stripe_resync *rs = &dev->resync;

	return rs->have_slot && rs->is_move && rs->slot == slot ? rs->cursor
								: 0;
}

void stripe_move_report_text(struct stripe_dev *dev, struct td_strbuf *sb)
{
	const struct stripe_map *m = &dev->map;
	size_t nr = stripe_map_nr_slots(m);
	uint32_t active = 0;

	for (size_t i = 0; i < nr; i++) {
		const struct stripe_map_move *mv = &m->moves[i];

		if (!mv->active)
			continue;
		active++;
		td_strbuf_printf(
			sb,
			"move %u %u %u: %s lun %u lba %" PRIu64 ": %s, "
			"%" PRIu64 " of %" PRIu64 " bytes\n",
			(uint32_t)(i / ((size_t)m->replicas *
					m->extents_per_column)),
			(uint32_t)((i / m->replicas) % m->extents_per_column),
			(uint32_t)(i % m->replicas),
			m->servers[mv->server].target,
			m->servers[mv->server].lun, mv->lba, move_state(dev, i),
			move_copied(dev, i), m->extent_size_bytes);
	}
	td_strbuf_printf(sb, "moves: %u active, %" PRIu64 " done since open\n",
			 active, dev->moves_done);
}

void stripe_move_report_json(struct stripe_dev *dev, struct td_json *j)
{
	const struct stripe_map *m = &dev->map;
	size_t nr = stripe_map_nr_slots(m);

	td_json_begin_array(j, "moves");
	for (size_t i = 0; i < nr; i++) {
		const struct stripe_map_move *mv = &m->moves[i];

		if (!mv->active)
			continue;
		td_json_begin_object(j, NULL);
		td_json_u64(j, "column",
			    i / ((size_t)m->replicas * m->extents_per_column));
		td_json_u64(j, "extent",
			    (i / m->replicas) % m->extents_per_column);
		td_json_u64(j, "replica", i % m->replicas);
		td_json_str(j, "target", m->servers[mv->server].target);
		td_json_u64(j, "lun", m->servers[mv->server].lun);
		td_json_u64(j, "lba_blocks", mv->lba);
		td_json_str(j, "state", move_state(dev, i));
		td_json_u64(j, "copied_bytes", move_copied(dev, i));
		td_json_end_object(j);
	}
	td_json_end_array(j);
	td_json_u64(j, "moves_done", dev->moves_done);
}

int stripe_move_control(struct stripe_dev *dev, int argc, char **argv,
			struct td_strbuf *out)
{
	if (argc >= 2 && !strcmp(argv[1], "add"))
		return move_add(dev, argc, argv, out);
	if (argc >= 2 && !strcmp(argv[1], "abort"))
		return move_abort(dev, argc, argv, out);
	if (argc == 2 && !strcmp(argv[1], "status")) {
		stripe_move_report_text(dev, out);
		return 0;
	}
	td_strbuf_puts(out, "usage: move add C X R target=IQN lun=N "
			    "portal=HOST:PORT block-size=B lba=LBA ... | "
			    "move abort C X R | move status");
	return -EINVAL;
}
