/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-scrub.c - online scrub: compare the replicas of every extent,
 * chunk by chunk, and with repair rewrite a replica that differs from the
 * majority ("tap-ctl driver -i ID stripe verify [--repair] [RATE]").
 *
 * Each chunk of resync_chunk bytes is locked against writes (stripe-lock.c,
 * shared with the resync), read from every replica that is not stale and
 * whose session is up, and compared: byte for byte, then on a difference
 * by CRC32C for the vote (stripe_scrub_decide); a
 * mismatch is recorded, and with repair the replicas that differ from a
 * strict majority are rewritten from it and their servers synchronised
 * before the chunk is unlocked.  Throttled to rate bytes read per second.
 * The design and the output: doc/striped-disks.md "Scrub".
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "drivers/stripe/stripe-int.h"

#define NS_PER_S	1000000000ull
#define NS_PER_US	1000ull
#define SCRUB_BUF_ALIGN 4096

const char *stripe_scrub_state_name(enum stripe_scrub_state s)
{
	switch (s) {
	case STRIPE_SCRUB_RUNNING:
		return "running";
	case STRIPE_SCRUB_DONE:
		return "done";
	case STRIPE_SCRUB_STOPPED:
		return "stopped";
	default:
		return "idle";
	}
}

static const char *outcome_name(enum stripe_scrub_outcome o)
{
	switch (o) {
	case STRIPE_SCRUB_REPAIRED:
		return "repaired";
	case STRIPE_SCRUB_REPAIR_FAILED:
		return "repair-failed";
	case STRIPE_SCRUB_NOT_DECIDED:
		return "undecided";
	default:
		return "found";
	}
}

enum stripe_scrub_verdict stripe_scrub_decide(uint32_t nr, const uint32_t *crc,
					      uint32_t read_ok, uint32_t stale,
					      uint32_t *good, uint32_t *bad)
{
	uint32_t cmp = read_ok & ~stale & ((1u << nr) - 1), n, best = 0;

	*good = nr;
	*bad = 0;
	n = (uint32_t)__builtin_popcount(cmp);
	if (n < 2)
		return STRIPE_SCRUB_TOO_FEW;
	for (uint32_t r = 0; r < nr; r++) {
		uint32_t same = 0;

		if (!(cmp & (1u << r)))
			continue;
		for (uint32_t q = 0; q < nr; q++)
			same += (cmp & (1u << q)) && crc[q] == crc[r];
		if (same > best) {
			best = same;
			*good = r;
		}
	}
	if (best == n)
		return STRIPE_SCRUB_SAME;
	if (2 * best > n) {
		for (uint32_t r = 0; r < nr; r++)
			if ((cmp & (1u << r)) && crc[r] != crc[*good])
				*bad |= 1u << r;
		return STRIPE_SCRUB_MAJORITY;
	}
	*good = nr;
	*bad = cmp;
	return STRIPE_SCRUB_UNDECIDED;
}

/* The virtual byte at extent offset x of extent (c, j), or NO_OFFSET. */
static uint64_t disk_offset(const struct stripe_map *m, uint32_t c, uint32_t j,
			    uint64_t x)
{
	uint64_t off = (uint64_t)j * m->extent_size_bytes + x;
	uint64_t u = m->stripe_unit_bytes;
	uint64_t v = ((off / u) * m->columns + c) * u + off % u;

	return v < m->size_bytes ? v : STRIPE_SCRUB_NO_OFFSET;
}

/* The first byte where a and b differ (len when none). */
static uint64_t first_diff(const void *a, const void *b, uint64_t len)
{
	const unsigned char *p = a, *q = b;
	uint64_t i = 0;

	while (i < len && p[i] == q[i])
		i++;
	return i;
}

/* --- the run ------------------------------------------------------------------- */

static void chunk_begin(struct stripe_dev *dev);

static void finish(struct stripe_dev *dev, enum stripe_scrub_state state)
{
	struct stripe_scrub *sc = &dev->scrub;

	sc->state = state;
	sc->busy = sc->paused = false;
	sc->ended_ns = td_now_ns();
	for (uint32_t r = 0; r < STRIPE_MAX_REPLICAS; r++) {
		free(sc->buf[r]);
		sc->buf[r] = NULL;
	}
	td_vbd_info(dev->drv->vbd,
		    "stripe: scrub %s: %" PRIu64 " of %" PRIu64
		    " chunks checked, %" PRIu64 " mismatches, %" PRIu64
		    " repaired, %" PRIu64 " undecided, %" PRIu64
		    " not compared, %" PRIu64 " bytes read",
		    stripe_scrub_state_name(state), sc->chunks_checked,
		    sc->chunks_total, sc->mismatches, sc->repaired,
		    sc->undecided, sc->chunks_skipped, sc->bytes_read);
}

static void pause_over(struct td_timer *t, void *opaque)
{
	(void)t;
	((struct stripe_dev *)opaque)->scrub.paused = false;
	chunk_begin(opaque);
}

/* The chunk is over: unlock, then the next one when the rate allows. */
static void chunk_end(struct stripe_dev *dev, uint64_t bytes)
{
	struct stripe_scrub *sc = &dev->scrub;
	uint64_t want_ns = bytes * NS_PER_S / sc->rate_bytes_per_s;
	uint64_t spent_ns = td_now_ns() - sc->chunk_start_ns;

	sc->busy = false;
	sc->cursor += sc->chunk_len;
	stripe_lock_release(dev);
	/* A timer even when no wait is due: no recursion over chunks that
	 * complete without I/O. */
	sc->paused = true;
	td_loop_timer_arm(
		dev->drv->loop, &sc->timer,
		spent_ns >= want_ns ? 0 : (want_ns - spent_ns) / NS_PER_US,
		pause_over, dev);
}

static struct stripe_scrub_place *place_new(struct stripe_dev *dev)
{
	struct stripe_scrub *sc = &dev->scrub;

	sc->mismatches++;
	if (sc->nr_places == STRIPE_SCRUB_MAX_PLACES)
		return NULL;
	return &sc->places[sc->nr_places++];
}

/* Record the chunk's mismatch; NULL when no room is left for places. */
static struct stripe_scrub_place *record(struct stripe_dev *dev,
					 enum stripe_scrub_verdict v)
{
	struct stripe_scrub *sc = &dev->scrub;
	struct stripe_scrub_place *p = place_new(dev);
	uint32_t a = sc->good, b = (uint32_t)__builtin_ctz(sc->bad);
	uint64_t x;

	if (v == STRIPE_SCRUB_UNDECIDED) /* the first two that differ */
		for (a = b++; b < dev->map.replicas; b++)
			if ((sc->bad & (1u << b)) &&
			    first_diff(sc->buf[a], sc->buf[b], sc->chunk_len) <
				    sc->chunk_len)
				break;
	if (b >= dev->map.replicas)
		b = a;
	x = sc->cursor + first_diff(sc->buf[a], sc->buf[b], sc->chunk_len);
	td_vbd_err(dev->drv->vbd,
		   "stripe: scrub: column %u extent %u replicas %u and %u "
		   "differ at extent offset %" PRIu64 "%s",
		   sc->column, sc->extent, a, b, x,
		   v == STRIPE_SCRUB_UNDECIDED ? " (no majority: undecided)"
					       : "");
	if (!p)
		return NULL;
	*p = (struct stripe_scrub_place){
		.column = sc->column,
		.extent = sc->extent,
		.replicas = sc->bad,
		.good = sc->good,
		.ext_off = x,
		.disk_off = disk_offset(&dev->map, sc->column, sc->extent, x),
		.chunk_off = sc->cursor,
		.chunk_len = sc->chunk_len,
		.outcome = v == STRIPE_SCRUB_UNDECIDED
				   ? STRIPE_SCRUB_NOT_DECIDED
				   : STRIPE_SCRUB_FOUND,
	};
	return p;
}

static void scrub_cmd_prep(struct stripe_dev *dev, uint32_t r,
			   enum iscsi_cmd_op op, uint32_t src,
			   void (*done)(struct stripe_cmd *, int))
{
	struct stripe_scrub *sc = &dev->scrub;
	const struct stripe_map_replica *rep =
		stripe_map_slot(&dev->map, sc->column, sc->extent, r);
	struct stripe_server *srv = &dev->servers[rep->server];
	struct stripe_cmd *cmd = &sc->cmd[r];

	memset(&cmd->io, 0, sizeof(cmd->io));
	cmd->srv = srv;
	cmd->done = done;
	cmd->io.op = op;
	if (op == ISCSI_CMD_SYNC)
		return;
	sc->iov[r].iov_base = sc->buf[src];
	sc->iov[r].iov_len = sc->chunk_len;
	cmd->io.lba = rep->lba + sc->cursor / srv->block_size;
	cmd->io.nr_blocks = (uint32_t)(sc->chunk_len / srv->block_size);
	cmd->io.iov = &sc->iov[r];
	cmd->io.iovcnt = 1;
}

static uint32_t replica_of(struct stripe_dev *dev, struct stripe_cmd *cmd)
{
	return (uint32_t)(cmd - dev->scrub.cmd);
}

static void mark_repair(struct stripe_dev *dev, enum stripe_scrub_outcome o)
{
	struct stripe_scrub *sc = &dev->scrub;

	if (o == STRIPE_SCRUB_REPAIRED)
		sc->repaired++;
	else
		sc->repair_failed++;
	if (sc->nr_places &&
	    sc->places[sc->nr_places - 1].column == sc->column &&
	    sc->places[sc->nr_places - 1].extent == sc->extent &&
	    sc->places[sc->nr_places - 1].chunk_off == sc->cursor)
		sc->places[sc->nr_places - 1].outcome = o;
}

/* A replica the repair could not write holds wrong data: stale. */
static void repair_failed(struct stripe_dev *dev, uint32_t r, const char *what,
			  int err)
{
	struct stripe_scrub *sc = &dev->scrub;

	snprintf(sc->last_error, sizeof(sc->last_error),
		 "%s column %u extent %u replica %u failed: %s", what,
		 sc->column, sc->extent, r, strerror(-err));
	td_vbd_err(dev->drv->vbd, "stripe: scrub: %s; marking it stale",
		   sc->last_error);
	stripe_stale_set(
		dev,
		stripe_map_slot_index(&dev->map, sc->column, sc->extent, r),
		true);
	stripe_stale_commit(dev);
}

static void repair_synced(struct stripe_cmd *cmd, int err)
{
	struct stripe_dev *dev = cmd->srv->dev;
	struct stripe_scrub *sc = &dev->scrub;
	uint32_t r = replica_of(dev, cmd);

	if (dev->closing)
		return;
	if (err) {
		sc->write_err |= 1u << r;
		repair_failed(dev, r, "SYNCHRONIZE CACHE after repairing", err);
	}
	if (--sc->pending)
		return;
	mark_repair(dev, sc->write_err ? STRIPE_SCRUB_REPAIR_FAILED
				       : STRIPE_SCRUB_REPAIRED);
	if (!sc->write_err)
		td_vbd_info(dev->drv->vbd,
			    "stripe: scrub: column %u extent %u bytes "
			    "%" PRIu64 "+%" PRIu64 " repaired from replica %u",
			    sc->column, sc->extent, sc->cursor, sc->chunk_len,
			    sc->good);
	chunk_end(dev, sc->chunk_len * (uint64_t)__builtin_popcount(
					       sc->read_ok | sc->written));
}

static void repair_written(struct stripe_cmd *cmd, int err)
{
	struct stripe_dev *dev = cmd->srv->dev;
	struct stripe_scrub *sc = &dev->scrub;
	uint32_t r = replica_of(dev, cmd);

	if (dev->closing)
		return;
	if (err) {
		sc->write_err |= 1u << r;
		repair_failed(dev, r, "rewriting", err);
	} else {
		sc->written |= 1u << r;
	}
	if (--sc->pending)
		return;
	/* Then each rewritten server's cache, before "repaired". */
	for (uint32_t q = 0; q < dev->map.replicas; q++)
		if (sc->written & (1u << q)) {
			scrub_cmd_prep(dev, q, ISCSI_CMD_SYNC, q,
				       repair_synced);
			sc->pending++;
		}
	for (uint32_t q = 0; sc->pending && q < dev->map.replicas; q++)
		if (sc->written & (1u << q))
			stripe_cmd_submit(dev, &sc->cmd[q]);
	if (!sc->pending) {
		mark_repair(dev, STRIPE_SCRUB_REPAIR_FAILED);
		chunk_end(dev, sc->chunk_len * (uint64_t)__builtin_popcount(
						       sc->read_ok));
	}
}

static void repair(struct stripe_dev *dev)
{
	struct stripe_scrub *sc = &dev->scrub;

	sc->written = sc->write_err = 0;
	for (uint32_t r = 0; r < dev->map.replicas; r++)
		if (sc->bad & (1u << r)) {
			scrub_cmd_prep(dev, r, ISCSI_CMD_WRITE, sc->good,
				       repair_written);
			sc->pending++;
		}
	for (uint32_t r = 0; r < dev->map.replicas; r++)
		if (sc->bad & (1u << r))
			stripe_cmd_submit(dev, &sc->cmd[r]);
}

/* The stale mask of the chunk's extent now. */
static uint32_t stale_mask(const struct stripe_dev *dev)
{
	const struct stripe_scrub *sc = &dev->scrub;
	uint32_t m = 0;

	for (uint32_t r = 0; r < dev->map.replicas; r++)
		if (stripe_map_slot(&dev->map, sc->column, sc->extent, r)
			    ->stale)
			m |= 1u << r;
	return m;
}

/* Note an extent with a replica that could not be read (once each). */
static void note_skip(struct stripe_dev *dev, uint32_t unread)
{
	struct stripe_scrub *sc = &dev->scrub;
	struct stripe_scrub_skip *last =
		sc->nr_skips ? &sc->skips[sc->nr_skips - 1] : NULL;

	sc->chunks_skipped++;
	if (last && last->column == sc->column && last->extent == sc->extent) {
		last->replicas |= unread;
		return;
	}
	sc->skipped_extents++;
	if (sc->nr_skips < STRIPE_SCRUB_MAX_PLACES)
		sc->skips[sc->nr_skips++] = (struct stripe_scrub_skip){
			.column = sc->column,
			.extent = sc->extent,
			.replicas = unread,
		};
}

/*
 * Whether every replica read holds the same bytes.  The common case, and
 * memcmp runs at over 1 GB/s where the map's bitwise CRC32C runs at 85
 * MB/s (measured): a 1 MiB chunk of 2 replicas would hold the event loop
 * 25 ms.  The CRCs are computed only when the chunk differs, to vote.
 */
static bool all_equal(const struct stripe_dev *dev)
{
	const struct stripe_scrub *sc = &dev->scrub;
	int first = -1;

	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		if (!(sc->read_ok & (1u << r)))
			continue;
		if (first < 0)
			first = (int)r;
		else if (memcmp(sc->buf[first], sc->buf[r], sc->chunk_len))
			return false;
	}
	return true;
}

/* Every read is back: compare, record, repair. */
static void compare(struct stripe_dev *dev)
{
	struct stripe_scrub *sc = &dev->scrub;
	uint32_t crc[STRIPE_MAX_REPLICAS] = {0}, stale = stale_mask(dev);
	uint64_t bytes =
		sc->chunk_len * (uint64_t)__builtin_popcount(sc->read_ok);
	enum stripe_scrub_verdict v;

	sc->bytes_read += bytes;
	if (!all_equal(dev))
		for (uint32_t r = 0; r < dev->map.replicas; r++)
			if (sc->read_ok & (1u << r))
				crc[r] = stripe_map_crc32c(0, sc->buf[r],
							   sc->chunk_len);
	v = stripe_scrub_decide(dev->map.replicas, crc, sc->read_ok, stale,
				&sc->good, &sc->bad);
	if (sc->read_err & ~stale)
		note_skip(dev, sc->read_err & ~stale);
	if (v != STRIPE_SCRUB_TOO_FEW)
		sc->chunks_checked++;
	if (v == STRIPE_SCRUB_UNDECIDED)
		sc->undecided++;
	if (v == STRIPE_SCRUB_MAJORITY || v == STRIPE_SCRUB_UNDECIDED)
		record(dev, v);
	if (v == STRIPE_SCRUB_MAJORITY && sc->repair) {
		repair(dev);
		return;
	}
	chunk_end(dev, bytes);
}

static void chunk_read(struct stripe_cmd *cmd, int err)
{
	struct stripe_dev *dev = cmd->srv->dev;
	struct stripe_scrub *sc = &dev->scrub;
	uint32_t r = replica_of(dev, cmd);

	if (dev->closing)
		return;
	if (err) {
		td_vbd_warn(dev->drv->vbd,
			    "stripe: scrub: reading column %u extent %u "
			    "replica %u failed: %s; not compared",
			    sc->column, sc->extent, r, strerror(-err));
		snprintf(sc->last_error, sizeof(sc->last_error),
			 "reading column %u extent %u replica %u: %s",
			 sc->column, sc->extent, r, strerror(-err));
		sc->read_ok &= ~(1u << r);
		sc->read_err |= 1u << r;
	}
	if (!--sc->pending)
		compare(dev);
}

/*
 * Whether replica r's server can be read now: not degraded (a session
 * that was up and is not, or DOWN: skipped, the extent is reported as not
 * compared) and not refused; a session still logging in for the first
 * time is waited for, as every command does.
 */
static bool readable(struct stripe_dev *dev, uint32_t r)
{
	const struct stripe_scrub *sc = &dev->scrub;
	const struct stripe_map_replica *rep =
		stripe_map_slot(&dev->map, sc->column, sc->extent, r);
	struct stripe_server *srv = &dev->servers[rep->server];

	return srv->gate != STRIPE_GATE_BAD &&
	       srv->ops->state(srv->be) != ISCSI_CONN_FENCED &&
	       !stripe_server_degraded(dev, srv);
}

/* The lock holds and no write it covers is in flight: read. */
static void lock_ready(struct stripe_dev *dev)
{
	struct stripe_scrub *sc = &dev->scrub;

	sc->read_ok = sc->read_err = 0;
	for (uint32_t r = 0; r < dev->map.replicas; r++) {
		if (stripe_map_slot(&dev->map, sc->column, sc->extent, r)
			    ->stale)
			continue;
		if (!readable(dev, r)) {
			sc->read_err |= 1u << r;
			continue;
		}
		scrub_cmd_prep(dev, r, ISCSI_CMD_READ, r, chunk_read);
		sc->read_ok |= 1u << r;
	}
	sc->pending = (uint32_t)__builtin_popcount(sc->read_ok);
	if (sc->pending < 2) { /* nothing to compare: no read */
		sc->read_ok = 0;
		compare(dev);
		return;
	}
	for (uint32_t r = 0; r < dev->map.replicas; r++)
		if (sc->read_ok & (1u << r))
			stripe_cmd_submit(dev, &sc->cmd[r]);
}

static void chunk_begin(struct stripe_dev *dev)
{
	struct stripe_scrub *sc = &dev->scrub;
	const struct stripe_map *m = &dev->map;
	uint64_t left;

	if (sc->stop_requested) {
		finish(dev, STRIPE_SCRUB_STOPPED);
		return;
	}
	if (sc->cursor >= m->extent_size_bytes) {
		sc->cursor = 0;
		if (++sc->extent == m->extents_per_column) {
			sc->extent = 0;
			sc->column++;
		}
	}
	if (sc->column >= m->columns) {
		finish(dev, STRIPE_SCRUB_DONE);
		return;
	}
	left = m->extent_size_bytes - sc->cursor;
	sc->chunk_len = left < sc->chunk_bytes ? left : sc->chunk_bytes;
	sc->chunk_start_ns = td_now_ns();
	sc->busy = true;
	stripe_lock_take(dev, sc->column, sc->extent, sc->cursor,
			 sc->cursor + sc->chunk_len, lock_ready);
}

/* Refused while a resync runs, or the disk cannot be written to repair. */
static int refuse(struct stripe_dev *dev, bool repair, struct td_strbuf *msg)
{
	if (dev->scrub.state == STRIPE_SCRUB_RUNNING) {
		td_strbuf_puts(msg, "a scrub is already running; see 'stripe "
				    "status', or 'stripe verify stop'");
		return -EALREADY;
	}
	if (dev->resync.state == STRIPE_RESYNC_RUNNING) {
		td_strbuf_puts(msg, "a resync is running: the scrub waits for "
				    "its end (see 'stripe status', or 'stripe "
				    "resync stop')");
		return -EALREADY;
	}
	if (dev->lease.handed_over) {
		td_strbuf_printf(msg,
				 "the lease was handed over to %s: the "
				 "scrub runs there",
				 dev->lease.holder);
		return -EACCES;
	}
	if (repair && dev->drv->read_only) {
		td_strbuf_puts(msg, "the disk is open read-only: verify "
				    "without --repair");
		return -EROFS;
	}
	return 0;
}

static int alloc_bufs(struct stripe_dev *dev)
{
	struct stripe_scrub *sc = &dev->scrub;

	for (uint32_t r = 0; r < dev->map.replicas; r++)
		if (posix_memalign(&sc->buf[r], SCRUB_BUF_ALIGN,
				   sc->chunk_bytes)) {
			sc->buf[r] = NULL;
			return -ENOMEM;
		}
	return 0;
}

int stripe_scrub_start(struct stripe_dev *dev, uint64_t rate, bool repair,
		       struct td_strbuf *msg)
{
	struct stripe_scrub *sc = &dev->scrub;
	const struct stripe_map *m = &dev->map;
	uint64_t E = m->extent_size_bytes;
	int err;

	if ((err = refuse(dev, repair, msg)))
		return err;
	stripe_scrub_close(dev);
	memset(sc, 0, sizeof(*sc));
	sc->chunk_bytes =
		dev->opts.resync_chunk < E ? dev->opts.resync_chunk : E;
	if (alloc_bufs(dev)) {
		stripe_scrub_close(dev);
		td_strbuf_puts(msg, "out of memory");
		return -ENOMEM;
	}
	sc->repair = repair;
	sc->rate_bytes_per_s = rate ? rate : dev->opts.resync_rate;
	sc->chunks_total = (uint64_t)m->columns * m->extents_per_column *
			   ((E + sc->chunk_bytes - 1) / sc->chunk_bytes);
	sc->started_ns = td_now_ns();
	sc->state = STRIPE_SCRUB_RUNNING;
	td_strbuf_printf(msg,
			 "scrub started%s: %" PRIu64 " chunks of %" PRIu64
			 " bytes, %u replicas each, at most %" PRIu64
			 " bytes/s read\n",
			 repair ? " with repair" : "", sc->chunks_total,
			 sc->chunk_bytes, m->replicas, sc->rate_bytes_per_s);
	td_vbd_info(dev->drv->vbd,
		    "stripe: scrub started%s: %" PRIu64 " chunks, at most "
		    "%" PRIu64 " bytes/s",
		    repair ? " with repair" : "", sc->chunks_total,
		    sc->rate_bytes_per_s);
	chunk_begin(dev);
	return 0;
}

int stripe_scrub_stop(struct stripe_dev *dev, struct td_strbuf *msg)
{
	struct stripe_scrub *sc = &dev->scrub;

	if (sc->state != STRIPE_SCRUB_RUNNING) {
		td_strbuf_puts(msg, "no scrub is running");
		return -EALREADY;
	}
	sc->stop_requested = true;
	if (sc->paused) {
		td_loop_timer_cancel(&sc->timer);
		finish(dev, STRIPE_SCRUB_STOPPED);
		td_strbuf_puts(msg, "scrub stopped\n");
	} else {
		td_strbuf_puts(msg, "scrub stops after the chunk in flight\n");
	}
	return 0;
}

void stripe_scrub_close(struct stripe_dev *dev)
{
	struct stripe_scrub *sc = &dev->scrub;

	td_loop_timer_cancel(&sc->timer);
	for (uint32_t r = 0; r < STRIPE_MAX_REPLICAS; r++) {
		free(sc->buf[r]);
		sc->buf[r] = NULL;
	}
	if (sc->state == STRIPE_SCRUB_RUNNING)
		sc->state = STRIPE_SCRUB_STOPPED;
}

/* --- reports ------------------------------------------------------------------- */

static void replicas_text(uint32_t mask, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (uint32_t r = 0; r < STRIPE_MAX_REPLICAS && n < size; r++)
		if (mask & (1u << r))
			n += (size_t)snprintf(buf + n, size - n, "%s%u",
					      n ? "," : "", r);
}

/* Since the start, up to the end when it ended. */
static uint64_t elapsed_ms(const struct stripe_scrub *sc)
{
	uint64_t end =
		sc->state == STRIPE_SCRUB_RUNNING ? td_now_ns() : sc->ended_ns;

	return sc->started_ns && end > sc->started_ns
		       ? (end - sc->started_ns) / (NS_PER_S / 1000)
		       : 0;
}

/*
 * "scrub: STATE, C of T chunks checked, M mismatches, P repaired, U
 * undecided, F repair failures, S chunks not compared in X extents, B
 * bytes read in T ms, R bytes/s, repair on|off[; at column C extent J: O of E
 * bytes][; last error: ...]", then a "scrub mismatch: ..." line per place
 * kept and a "scrub not compared: ..." line per extent kept; stripe-ctl
 * vdisk verify parses them (doc/striped-disks.md "Scrub").
 */
void stripe_scrub_report_text(const struct stripe_dev *dev,
			      struct td_strbuf *sb)
{
	const struct stripe_scrub *sc = &dev->scrub;
	char reps[16];

	td_strbuf_printf(
		sb,
		"scrub: %s, %" PRIu64 " of %" PRIu64 " chunks checked, %" PRIu64
		" mismatches, %" PRIu64 " repaired, %" PRIu64
		" undecided, %" PRIu64 " repair failures, %" PRIu64
		" chunks not compared in %" PRIu64 " extents, %" PRIu64
		" bytes read in %" PRIu64 " ms, %" PRIu64 " bytes/s, repair %s",
		stripe_scrub_state_name(sc->state), sc->chunks_checked,
		sc->chunks_total, sc->mismatches, sc->repaired, sc->undecided,
		sc->repair_failed, sc->chunks_skipped, sc->skipped_extents,
		sc->bytes_read, elapsed_ms(sc), sc->rate_bytes_per_s,
		sc->repair ? "on" : "off");
	if (sc->state == STRIPE_SCRUB_RUNNING)
		td_strbuf_printf(sb,
				 "; at column %u extent %u: %" PRIu64
				 " of %" PRIu64 " bytes",
				 sc->column, sc->extent, sc->cursor,
				 dev->map.extent_size_bytes);
	if (sc->last_error[0])
		td_strbuf_printf(sb, "; last error: %s", sc->last_error);
	td_strbuf_puts(sb, "\n");
	for (uint32_t i = 0; i < sc->nr_places; i++) {
		const struct stripe_scrub_place *p = &sc->places[i];

		replicas_text(p->replicas, reps, sizeof(reps));
		td_strbuf_printf(
			sb,
			"scrub mismatch: column %u extent %u "
			"offset %" PRIu64 " disk %" PRId64 " chunk %" PRIu64
			" length %" PRIu64 " replicas %s good %d: %s\n",
			p->column, p->extent, p->ext_off,
			p->disk_off == STRIPE_SCRUB_NO_OFFSET
				? (int64_t)-1
				: (int64_t)p->disk_off,
			p->chunk_off, p->chunk_len, reps,
			p->good < dev->map.replicas ? (int)p->good : -1,
			outcome_name(p->outcome));
	}
	for (uint32_t i = 0; i < sc->nr_skips; i++) {
		replicas_text(sc->skips[i].replicas, reps, sizeof(reps));
		td_strbuf_printf(sb,
				 "scrub not compared: column %u extent %u "
				 "replicas %s\n",
				 sc->skips[i].column, sc->skips[i].extent,
				 reps);
	}
}

static void places_json(const struct stripe_dev *dev, struct td_json *j)
{
	const struct stripe_scrub *sc = &dev->scrub;
	char reps[16];

	td_json_begin_array(j, "places");
	for (uint32_t i = 0; i < sc->nr_places; i++) {
		const struct stripe_scrub_place *p = &sc->places[i];

		replicas_text(p->replicas, reps, sizeof(reps));
		td_json_begin_object(j, NULL);
		td_json_u64(j, "column", p->column);
		td_json_u64(j, "extent", p->extent);
		td_json_u64(j, "extent_offset", p->ext_off);
		td_json_i64(j, "disk_offset",
			    p->disk_off == STRIPE_SCRUB_NO_OFFSET
				    ? -1
				    : (int64_t)p->disk_off);
		td_json_u64(j, "chunk_offset", p->chunk_off);
		td_json_u64(j, "chunk_bytes", p->chunk_len);
		td_json_str(j, "replicas", reps);
		td_json_i64(j, "good",
			    p->good < dev->map.replicas ? (int64_t)p->good
							: -1);
		td_json_str(j, "outcome", outcome_name(p->outcome));
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

void stripe_scrub_report_json(const struct stripe_dev *dev, struct td_json *j)
{
	const struct stripe_scrub *sc = &dev->scrub;
	char reps[16];

	td_json_begin_object(j, "scrub");
	td_json_str(j, "state", stripe_scrub_state_name(sc->state));
	td_json_bool(j, "repair", sc->repair);
	td_json_u64(j, "chunks_total", sc->chunks_total);
	td_json_u64(j, "chunks_checked", sc->chunks_checked);
	td_json_u64(j, "chunks_not_compared", sc->chunks_skipped);
	td_json_u64(j, "extents_not_compared", sc->skipped_extents);
	td_json_u64(j, "mismatches", sc->mismatches);
	td_json_u64(j, "repaired", sc->repaired);
	td_json_u64(j, "undecided", sc->undecided);
	td_json_u64(j, "repair_failures", sc->repair_failed);
	td_json_u64(j, "bytes_read", sc->bytes_read);
	td_json_u64(j, "elapsed_ms", elapsed_ms(sc));
	td_json_u64(j, "rate_bytes_per_s", sc->rate_bytes_per_s);
	td_json_str(j, "last_error", sc->last_error);
	places_json(dev, j);
	td_json_begin_array(j, "not_compared");
	for (uint32_t i = 0; i < sc->nr_skips; i++) {
		replicas_text(sc->skips[i].replicas, reps, sizeof(reps));
		td_json_begin_object(j, NULL);
		td_json_u64(j, "column", sc->skips[i].column);
		td_json_u64(j, "extent", sc->skips[i].extent);
		td_json_str(j, "replicas", reps);
		td_json_end_object(j);
	}
	td_json_end_array(j);
	td_json_end_object(j);
}
