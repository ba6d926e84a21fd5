/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-rehome-disk.c - re-homing the replicas of one disk (server
 * evacuate, server fail --rehome; the command is stripe-ctl-rehome.c).
 *
 * The disk's mapping file is the truth.  For each slot, after
 * MS_MOVE_BEGIN gave NEW:
 *   the map names NEW as the slot's replica   -> MS_MOVE_COMMIT
 *   the map has a move line for NEW            -> wait for the swap
 *   else                                       -> "move add" to the driver
 * and for a move into the server (its NEW is on it): the map names NEW
 * -> commit; a move line for it -> "move abort" to the driver, then
 * MS_MOVE_ABORT; nothing -> MS_MOVE_ABORT.  The driver is the disk's
 * tapdisk (online) or the stripe driver in this process (offline), as
 * stripe-ctl-serve.c finds it; the map is read without its lock.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json-read.h"
#include "common/log.h"
#include "common/util.h"
#include "tools/stripe-ctl/stripe-ctl-rehome.h"

#define NS_PER_MS     1000000ull
#define NS_PER_S      1000000000ull
#define MISSING_POLLS 8	 /* polls without the move before asking again */
#define MIN_STALL_S   60 /* no byte copied for that long: give up */
#define WORDS_SIZE    2048

enum names { NAMES_NONE, NAMES_REPLICA, NAMES_MOVE, NAMES_OTHER_MOVE };

struct rh_disk {
	struct ctl_serve s; /* first: run's s is the disk */
	struct rehome *rh;
	struct rh_task *tasks;
	size_t n;
	struct stripe_map m;  /* as read before the run */
	uint64_t rate_before; /* online --rate: the disk's resync_rate */
};

/* --- the map ---------------------------------------------------------------- */

static size_t slot_of(const struct stripe_map *m, const struct rh_task *t)
{
	return ((size_t)t->column * m->extents_per_column + t->extent) *
		       m->replicas +
	       t->replica;
}

static bool in_map(const struct stripe_map *m, const struct rh_task *t)
{
	return t->column < m->columns && t->extent < m->extents_per_column &&
	       t->replica < m->replicas;
}

static bool is_new(const struct stripe_map *m, uint32_t server, uint64_t lba,
		   const struct rh_task *t)
{
	const struct stripe_map_server *s = &m->servers[server];

	return !strcmp(s->target, t->new_target) && s->lun == t->new_lun &&
	       s->block_size && lba == t->new_offset / s->block_size;
}

/* What the map says of t's slot and NEW. */
static enum names map_names(const struct stripe_map *m, const struct rh_task *t)
{
	size_t slot = slot_of(m, t);
	const struct stripe_map_move *mv = &m->moves[slot];

	if (mv->active)
		return is_new(m, mv->server, mv->lba, t) ? NAMES_MOVE
							 : NAMES_OTHER_MOVE;
	if (is_new(m, m->slots[slot].server, m->slots[slot].lba, t))
		return NAMES_REPLICA;
	return NAMES_NONE;
}

static int read_map(const char *path, struct stripe_map *m, char *why,
		    size_t size)
{
	struct stripe_map_error err;
	int ret = stripe_map_read(path, m, &err);

	if (ret)
		stripe_map_error_text(&err, path, why, size);
	return ret;
}

/* The map now: NAMES_* of t, or -1 with t failed. */
static int names_now(struct rh_disk *d, struct rh_task *t)
{
	char why[STRIPE_MAP_ERROR_TEXT_MAX];
	struct stripe_map m;
	int names;

	if (read_map(d->s.path, &m, why, sizeof(why))) {
		ctl_rehome_failed(d->rh, t, "cannot read the map: %s", why);
		return -1;
	}
	names = in_map(&m, t) ? (int)map_names(&m, t) : -1;
	stripe_map_free(&m);
	if (names < 0)
		ctl_rehome_failed(d->rh, t, "%s has no such slot", d->s.path);
	return names;
}

/* The map names our server as the slot's replica (OLD). */
static bool names_old(const struct rh_disk *d, const struct rh_task *t)
{
	const struct stripe_map_server *s =
		&d->m.servers[d->m.slots[slot_of(&d->m, t)].server];

	return !strcmp(s->target, d->rh->server->target) &&
	       s->lun == d->rh->server->lun;
}

/* --- the master's side, before any copy --------------------------------------- */

/* A move into the server: its NEW from MS_MOVE_LIST; 0 or -1 (t failed). */
static int find_incoming(struct rehome *rh, struct rh_task *t)
{
	ms_move_list_args a = {.vdisk = t->vdisk,
			       .has_server = true,
			       .target = rh->server->target,
			       .lun = rh->server->lun,
			       .after_vdisk = "",
			       .limit = MS_MAX_PAGE};
	ms_reply rep;
	int ret = -1;

	if (master_call_move_list(rh->c, &a, &rep)) {
		ctl_rehome_failed(rh, t, "cannot list the moves: %s",
				  master_client_error(rh->c));
		master_reply_free(&rep);
		return -1;
	}
	for (u_int i = 0; i < rep.body.ms_body_u.moves.moves.moves_len; i++) {
		ms_move *m = &rep.body.ms_body_u.moves.moves.moves_val[i];

		if (m->column != t->column || m->extent != t->extent ||
		    m->replica != t->replica ||
		    m->new_server_id != rh->server->id)
			continue;
		t->have_move = true;
		t->new_id = rh->server->id;
		t->new_lun = rh->server->lun;
		snprintf(t->new_target, sizeof(t->new_target), "%s",
			 rh->server->target);
		t->new_offset = m->new_offset_bytes;
		ret = 0;
	}
	if (ret)
		t->outcome = "already"; /* committed or aborted meanwhile */
	master_reply_free(&rep);
	return ret;
}

/* A move into the server swapped in already: committed, then moved off. */
static int turn_around(struct rh_disk *d, struct rh_task *t)
{
	if (ctl_rehome_commit(d->rh, t))
		return -1;
	fprintf(stderr,
		"stripe-ctl: %s: vdisk %s column %u extent %u replica %u: a "
		"move onto the server was in the map already: committed, now "
		"moving it off\n",
		d->rh->verb, t->vdisk, t->column, t->extent, t->replica);
	t->incoming = false;
	t->have_move = false;
	return ctl_rehome_begin(d->rh, t);
}

/*
 * The map is not the disk's current one (a copy, an old file): it names
 * neither OLD nor NEW for the slot.  Nothing is done to the move: the
 * disk's real map may name NEW (a rerun with the right file resumes).
 */
static void disagrees(struct rh_disk *d, struct rh_task *t, bool done)
{
	ctl_rehome_failed(d->rh, t,
			  "%s names neither server %u nor the new replica "
			  "(server %u offset %" PRIu64 ") for this slot%s: "
			  "not the disk's current map? nothing was changed",
			  d->s.path, d->rh->server->id, t->new_id,
			  t->new_offset,
			  done ? ", which the master says was moved and "
				 "committed already"
			       : "");
}

/* Begin (or find) the move and settle what the map settles already. */
static void settle(struct rh_disk *d, struct rh_task *t)
{
	enum names names;
	int ret;

	if (!in_map(&d->m, t)) {
		ctl_rehome_failed(d->rh, t, "%s has no such slot", d->s.path);
		return;
	}
	ret = t->incoming ? find_incoming(d->rh, t)
			  : ctl_rehome_begin(d->rh, t);
	if (ret < 0 || (ret > 0 && t->incoming))
		return;
	names = map_names(&d->m, t);
	if (ret > 0) { /* moved and committed: the map must name NEW */
		if (names != NAMES_REPLICA)
			disagrees(d, t, true);
		return;
	}
	if (!t->incoming && !names_old(d, t) && names != NAMES_REPLICA &&
	    names != NAMES_MOVE) {
		disagrees(d, t, false);
		return;
	}
	if (t->incoming && names == NAMES_REPLICA) {
		if (turn_around(d, t))
			return;
		names = map_names(&d->m, t);
	}
	if (names == NAMES_REPLICA)
		t->outcome =
			ctl_rehome_commit(d->rh, t) ? "failed" : "committed";
	else if (names == NAMES_NONE && t->incoming)
		t->outcome = ctl_rehome_abort(d->rh, t) ? "failed" : "aborted";
	else
		t->need_copy = true;
}

/* --- the driver --------------------------------------------------------------- */

/*
 * The CHAP credentials for NEW without the master's (issue #20: it keeps
 * them since): its server's in the map, else OLD's.
 */
static const struct stripe_map_server *chap_of(const struct rh_disk *d,
					       const struct rh_task *t)
{
	for (uint32_t i = 0; i < d->m.nr_servers; i++)
		if (!strcmp(d->m.servers[i].target, t->new_target))
			return &d->m.servers[i];
	return &d->m.servers[d->m.slots[slot_of(&d->m, t)].server];
}

/* NEW's CHAP account from the master when it keeps one, else chap_of. */
static void new_chap(const struct rh_disk *d, const struct rh_task *t,
		     struct stripe_map_server *out)
{
	const struct stripe_map_server *c = chap_of(d, t);

	snprintf(out->target, sizeof(out->target), "%s", t->new_target);
	out->lun = t->new_lun;
	if (!ctl_chap_get(d->rh->c, out) && out->chap_user[0])
		return;
	snprintf(out->chap_user, sizeof(out->chap_user), "%s", c->chap_user);
	snprintf(out->chap_secret, sizeof(out->chap_secret), "%s",
		 c->chap_secret);
}

static void add_words(const struct rh_disk *d, const struct rh_task *t, char *w,
		      size_t size)
{
	struct stripe_map_server chap;
	const struct stripe_map_server *c = &chap;
	int n = snprintf(w, size,
			 "move add %u %u %u target=%s lun=%u portal=%s "
			 "address=%s block-size=%u lba=%" PRIu64,
			 t->column, t->extent, t->replica, t->new_target,
			 t->new_lun, t->new_portal, t->new_address,
			 t->new_block, t->new_offset / t->new_block);

	new_chap(d, t, &chap);
	if (*c->chap_user && n > 0 && (size_t)n < size)
		snprintf(w + n, size - (size_t)n,
			 " chap-user=%s chap-secret=%s", c->chap_user,
			 c->chap_secret);
	memset(chap.chap_secret, 0, sizeof(chap.chap_secret));
}

static int driver(struct rh_disk *d, const char *words, struct td_strbuf *out)
{
	return ctl_serve_command(&d->s, words, out);
}

/* Whether the driver's resync (the copy of moves too) is running, by
 * "status json"'s resync.state. */
static bool copy_running(struct rh_disk *d, struct td_strbuf *out)
{
	const char *state;
	struct td_jval *v;
	bool running;

	if (driver(d, "status json", out) ||
	    td_json_parse(td_strbuf_str(out), &v))
		return false;
	running = !td_jval_get_str(td_jval_get(v, "resync"), "state", &state) &&
		  !strcmp(state, "running");
	td_jval_free(v);
	return running;
}

/* "resync stop" and wait (at most --timeout) until the run has ended. */
static void stop_copy(struct rh_disk *d, struct td_strbuf *out)
{
	uint64_t end = td_now_ns() + d->s.o->timeout_s * NS_PER_S;

	driver(d, "resync stop", out);
	while (copy_running(d, out) && td_now_ns() < end)
		ctl_serve_wait(&d->s);
}

/*
 * "move abort C X R" to the driver (its copy stopped first when it runs:
 * the run goes on with the other moves when restarted); 0 or -1 with t
 * failed.
 */
static int driver_abort(struct rh_disk *d, struct rh_task *t,
			struct td_strbuf *out)
{
	char w[64];
	int err;

	snprintf(w, sizeof(w), "move abort %u %u %u", t->column, t->extent,
		 t->replica);
	if ((err = driver(d, w, out)) == -EBUSY) {
		stop_copy(d, out);
		err = driver(d, w, out);
	}
	if (!err)
		return 0;
	ctl_rehome_failed(d->rh, t, "the driver did not drop its move: %s",
			  td_strbuf_str(out));
	return -1;
}

/*
 * --rate, online: "resync rate RATE" sets the disk's resync_rate, which
 * the copies of moves run at (a run in progress from its next chunk);
 * the rate it had is put back at the end (d->rate_before).  Offline the
 * chain has it.
 */
static void apply_rate(struct rh_disk *d, struct td_strbuf *out)
{
	char w[48];

	if (!d->s.pid || !d->s.o->rate_bytes_per_s)
		return;
	if (!driver(d, "resync rate", out))
		sscanf(td_strbuf_str(out), "resync rate %" SCNu64,
		       &d->rate_before);
	snprintf(w, sizeof(w), "resync rate %" PRIu64,
		 d->s.o->rate_bytes_per_s);
	if (driver(d, w, out))
		fprintf(stderr,
			"stripe-ctl: %s: tapdisk %d did not take the rate: "
			"%s; copying at the disk's resync_rate\n",
			d->rh->verb, d->s.pid, td_strbuf_str(out));
}

static void restore_rate(struct rh_disk *d, struct td_strbuf *out)
{
	char w[48];

	if (!d->rate_before)
		return;
	snprintf(w, sizeof(w), "resync rate %" PRIu64, d->rate_before);
	driver(d, w, out);
}

/*
 * The driver refused NEW: abort the move at the master when the map
 * does not name NEW (else leave it: never free an extent a map names).
 */
static void refused(struct rh_disk *d, struct rh_task *t, int err,
		    const char *why)
{
	int names = names_now(d, t);

	if (names == NAMES_NONE || names == NAMES_OTHER_MOVE)
		ctl_rehome_abort(d->rh, t);
	ctl_rehome_failed(d->rh, t, "the driver refused the move: %s%s", why,
			  err == -ENOSPC ? " (no room for another server in "
					   "that tapdisk: restart it, then "
					   "run the command again)"
					 : "");
}

/* "move add"; a move of the slot to another place is dropped first. */
static int start_copy(struct rh_disk *d, struct rh_task *t,
		      struct td_strbuf *out)
{
	char w[WORDS_SIZE];
	int err, names;

	add_words(d, t, w, sizeof(w));
	err = driver(d, w, out);
	if (err == -EBUSY) {
		if ((names = names_now(d, t)) < 0)
			return -1;
		if (names == NAMES_OTHER_MOVE || names == NAMES_NONE) {
			fprintf(stderr,
				"stripe-ctl: %s: vdisk %s column %u extent %u "
				"replica %u: the driver has a move to another "
				"place, which the master does not know: "
				"dropped\n",
				d->rh->verb, t->vdisk, t->column, t->extent,
				t->replica);
			if (driver_abort(d, t, out))
				return -1;
		}
		err = driver(d, w, out);
	}
	if (err) {
		refused(d, t, err, td_strbuf_str(out));
		return -1;
	}
	return 0;
}

/*
 * Make sure a copy run goes: a move the driver had already (resumed from
 * the map after a restart) starts no run by itself, and offline (or with
 * auto_resync=off) nothing else would start one.  "resync" starts one at
 * the disk's resync_rate (a running one answers EALREADY: fine).
 */
static void kick(struct rh_disk *d, struct td_strbuf *out)
{
	if (!copy_running(d, out))
		driver(d, "resync", out);
}

/* --- following the copy ----------------------------------------------------- */

struct follow {
	uint64_t start_ns, first, copied, total, last_ns;
	uint64_t
		text_hash; /* of the whole "move status": any move's progress */
	bool seen;
	unsigned int missing, polls;
	char state[16];
};

/* "move C X R: TARGET lun N lba LBA: copying|waiting, B of E bytes". */
static bool parse_move(const char *text, const struct rh_task *t,
		       struct follow *f)
{
	char head[48];
	const char *l, *st;

	snprintf(head, sizeof(head), "move %u %u %u: ", t->column, t->extent,
		 t->replica);
	for (l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, head, strlen(head)))
			continue;
		st = strstr(l, ": copying");
		st = st ? st : strstr(l, ": waiting");
		if (!st || sscanf(st, ": %15[a-z], %" SCNu64 " of %" SCNu64,
				  f->state, &f->copied, &f->total) != 3)
			return false;
		return true;
	}
	return false;
}

static void show(struct rh_disk *d, const struct rh_task *t,
		 const struct follow *f, bool end)
{
	uint64_t ns = td_now_ns() - f->start_ns;
	uint64_t got = end ? t->bytes
			   : (f->copied > f->first ? f->copied - f->first : 0);
	char done[32], total[32], rate[32];

	if (!d->rh->tty && !end)
		return;
	ctl_format_bytes(end ? d->m.extent_size_bytes : f->copied, done,
			 sizeof(done));
	ctl_format_bytes(d->m.extent_size_bytes, total, sizeof(total));
	ctl_format_bytes(ns ? (uint64_t)((double)got * NS_PER_S / (double)ns)
			    : 0,
			 rate, sizeof(rate));
	fprintf(stderr,
		"%s%s: vdisk %s column %u extent %u replica %u -> server %u "
		"(%s lun %u): %s, %s of %s, %s/s%s",
		d->rh->tty ? "\r" : "", d->rh->verb, t->vdisk, t->column,
		t->extent, t->replica, t->new_id, t->new_target, t->new_lun,
		end ? "moved" : (f->seen ? f->state : "starting"), done, total,
		rate, d->rh->tty ? "\033[K" : "\n");
	d->rh->line_open = d->rh->tty;
}

/* One poll of the driver's "move status"; 0 or -1 with t failed. */
static int poll_status(struct rh_disk *d, struct rh_task *t, struct follow *f,
		       struct td_strbuf *out)
{
	uint64_t hash = 5381;

	if (driver(d, "move status", out)) {
		ctl_rehome_failed(d->rh, t,
				  "lost the driver: %s; the move stays in the "
				  "map: run the command again once the disk "
				  "is served again (or not at all)",
				  td_strbuf_str(out));
		return -1;
	}
	for (const char *c = td_strbuf_str(out); *c; c++)
		hash = hash * 33 + (unsigned char)*c;
	if (hash != f->text_hash) /* some move of the disk goes on */
		f->last_ns = td_now_ns();
	f->text_hash = hash;
	if (!parse_move(td_strbuf_str(out), t, f)) {
		f->missing++;
		return 0;
	}
	f->missing = 0;
	if (!f->seen)
		f->first = f->copied;
	f->seen = true;
	return 0;
}

/* Wait until the map names NEW as the slot's replica; 0 or -1 (failed). */
static int wait_swap(struct rh_disk *d, struct rh_task *t, uint64_t t0,
		     struct td_strbuf *out)
{
	uint64_t stall = (d->s.o->timeout_s > MIN_STALL_S ? d->s.o->timeout_s
							  : MIN_STALL_S) *
			 NS_PER_S;
	struct follow f = {.start_ns = td_now_ns(), .last_ns = td_now_ns()};
	int names;

	while ((names = names_now(d, t)) != NAMES_REPLICA) {
		if (names < 0 || poll_status(d, t, &f, out))
			return -1;
		if (ctl_interrupted) {
			ctl_rehome_failed(d->rh, t,
					  "interrupted: the move stays in the "
					  "map; run the command again to "
					  "finish it");
			return -1;
		}
		if (td_now_ns() - f.last_ns > stall) {
			ctl_rehome_failed(d->rh, t,
					  "no progress for %" PRIu64
					  " s (%s); the move stays: see "
					  "'tap-ctl driver stripe move status'",
					  (uint64_t)(stall / NS_PER_S),
					  td_strbuf_str(out));
			return -1;
		}
		if (f.missing >= MISSING_POLLS) { /* ask again: idempotent */
			f.missing = 0;
			if (start_copy(d, t, out))
				return -1;
		}
		if (++f.polls % MISSING_POLLS == 0)
			kick(d, out);
		show(d, t, &f, false);
		ctl_serve_wait(&d->s);
	}
	t->copy_ns = td_now_ns() - t0;
	t->bytes = d->m.extent_size_bytes - (f.seen ? f.first : 0);
	show(d, t, &f, true);
	return 0;
}

/* A move into the server: dropped by the driver, then at the master. */
static void drop_incoming(struct rh_disk *d, struct rh_task *t,
			  struct td_strbuf *out)
{
	if (!driver_abort(d, t, out) && names_now(d, t) == NAMES_NONE)
		t->outcome = ctl_rehome_abort(d->rh, t) ? "failed" : "aborted";
	else if (!t->outcome)
		ctl_rehome_failed(d->rh, t,
				  "the map still names the move into the "
				  "server; run the command again");
}

/*
 * Every move of the disk is given to the driver at once (one copy run
 * takes them one after the other, at --rate when given), then each swap
 * is waited for and committed in turn.
 */
static int run(struct ctl_serve *s)
{
	struct rh_disk *d = (struct rh_disk *)s;
	uint64_t t0 = td_now_ns();
	struct td_strbuf out;
	bool copying = false;

	td_strbuf_init(&out);
	apply_rate(d, &out);
	for (size_t i = 0; i < d->n && !ctl_interrupted; i++) {
		struct rh_task *t = &d->tasks[i];

		if (!t->need_copy)
			continue;
		t->mode = d->s.pid ? "online" : "offline";
		if (t->incoming)
			drop_incoming(d, t, &out);
		else if (!start_copy(d, t, &out))
			copying = true;
	}
	if (copying)
		kick(d, &out);
	for (size_t i = 0; i < d->n && !ctl_interrupted; i++) {
		struct rh_task *t = &d->tasks[i];

		if (t->need_copy && !t->incoming && !t->outcome &&
		    !wait_swap(d, t, t0, &out) && !ctl_rehome_commit(d->rh, t))
			t->outcome = "moved";
	}
	if (copying)
		d->rh->copy_ns += td_now_ns() - t0;
	restore_rate(d, &out);
	td_strbuf_free(&out);
	return 0;
}

/* --- one disk ------------------------------------------------------------------- */

/* The disk's file: one of the files given, else MAP_DIR/NAME.map. */
static int find_map(struct rh_disk *d, char *why, size_t size)
{
	const struct ctl_opts *o = d->rh->o;
	char path[PATH_MAX + STRIPE_MAP_NAME_SIZE + 8];

	for (unsigned int i = 0; i < o->nr_extra; i++) {
		struct stripe_map m;

		if (read_map(o->extra[i], &m, why, size))
			continue;
		if (!strcmp(m.vdisk, d->tasks[0].vdisk) &&
		    realpath(o->extra[i], d->s.path)) {
			d->m = m;
			return 0;
		}
		stripe_map_free(&m);
	}
	if (o->nr_extra) {
		snprintf(why, size,
			 "none of the mapping files given is this disk's: "
			 "give its file too");
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/%s.map", d->rh->map_dir,
		 d->tasks[0].vdisk);
	if (access(path, F_OK) || !realpath(path, d->s.path)) {
		snprintf(why, size,
			 "its mapping file %s is missing (give the file, or "
			 "--map-dir)",
			 path);
		return -ENOENT;
	}
	return read_map(d->s.path, &d->m, why, size);
}

static bool map_locked(const char *path)
{
	struct stripe_map_error err;
	struct stripe_map m;
	int lock_fd, ret = stripe_map_open(path, &m, &lock_fd, &err);

	if (!ret) {
		stripe_map_close(lock_fd);
		stripe_map_free(&m);
	}
	return ret == -EBUSY;
}

void ctl_rehome_disk(struct rehome *rh, size_t first, size_t n)
{
	struct rh_disk d = {.s = {.o = rh->o,
				  .what = rh->verb,
				  .doing = "re-homing its replicas",
				  .run = run},
			    .rh = rh,
			    .tasks = rh->tasks + first,
			    .n = n};
	char why[STRIPE_MAP_ERROR_TEXT_MAX];
	const char *file;
	bool copy = false;

	if (find_map(&d, why, sizeof(why))) {
		ctl_rehome_end_line(rh);
		fprintf(stderr,
			"stripe-ctl: %s: vdisk %s: %s; its %zu replicas stay "
			"on the server\n",
			rh->verb, d.tasks[0].vdisk, why, n);
		for (size_t i = 0; i < n; i++) {
			snprintf(d.tasks[i].error, sizeof(d.tasks[i].error),
				 "%.400s", why);
			d.tasks[i].outcome = "failed";
		}
		return;
	}
	if (!(file = ctl_rehome_keep(rh, d.s.path))) {
		stripe_map_free(&d.m);
		return;
	}
	snprintf(d.s.vdisk, sizeof(d.s.vdisk), "%s", d.m.vdisk);
	snprintf(d.s.master, sizeof(d.s.master), "%s", d.m.master);
	d.s.rate_bytes_per_s = rh->o->rate_bytes_per_s;
	for (size_t i = 0; i < n && !ctl_interrupted; i++) {
		d.tasks[i].file = file;
		settle(&d, &d.tasks[i]);
		copy |= d.tasks[i].need_copy;
	}
	if (copy && !ctl_interrupted)
		ctl_serve_run(&d.s, map_locked(d.s.path));
	for (size_t i = 0; i < n; i++)
		if (d.tasks[i].need_copy && !d.tasks[i].outcome)
			ctl_rehome_failed(rh, &d.tasks[i],
					  "not copied: the disk could not be "
					  "served (see above)");
	stripe_map_free(&d.m);
}
