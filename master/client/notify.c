/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * notify.c - the replica-state notifier (see notify.h).
 *
 * The queue is a fixed array of entries, allocated at start: a list of the
 * used ones, oldest first; a free list; and a hash table of chains by
 * (vdisk, column, extent, replica) for coalescing.  Each used entry has a
 * generation, taken from a counter that never repeats, set when the entry
 * is filled or its state changes and cleared when it is freed.  The thread
 * copies the oldest entry and sends the copy with the lock dropped; after
 * the answer it frees the entry only if its generation is still the one
 * it sent (a newer state, or a reuse of the slot after an overflow, keeps
 * it).
 *
 * Locking: n->lock guards everything below it in struct master_notifier;
 * nothing blocking runs under it (the RPC and the log lines run with it
 * dropped).  n->client belongs to the thread alone.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "master/client/client.h"
#include "master/client/notify.h"

#define NIL	       UINT32_MAX
#define HASH_SIZE      (2u * MASTER_NOTIFY_QUEUE_MAX) /* a power of two */
#define NS_PER_MS      1000000ull
#define NS_PER_S       1000000000ull
#define MIN_ATTEMPT_MS 10
#define FNV_BASIS      2166136261u
#define FNV_PRIME      16777619u

struct entry {
	char vdisk[MS_VDISK_ID_MAX + 1];
	uint32_t column, extent, replica;
	bool stale;
	uint64_t gen;	     /* 0 when free */
	uint32_t prev, next; /* the queue; next alone on the free list */
	uint32_t hash_next;
};

/* What the thread sends: a copy of the oldest entry. */
struct job {
	uint32_t slot;
	uint64_t gen;
	struct entry e;
	unsigned int timeout_ms; /* per attempt */
	unsigned int total_ms;	 /* the call, every master tried; 0: default */
};

/* What the thread logs once the lock is dropped. */
enum {
	EV_UNREACHABLE = 1u << 0,
	EV_BACK = 1u << 1,
	EV_REFUSED = 1u << 2,
};

struct master_notifier {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* work or stop; the thread waits on it */
	pthread_cond_t idle; /* nothing pending any more */
	pthread_t thread;
	struct master_client *client; /* the thread's alone */
	/* under lock: */
	struct entry *entries; /* MASTER_NOTIFY_QUEUE_MAX */
	uint32_t *hash;	       /* HASH_SIZE chain heads */
	uint32_t head, tail, free_list, count;
	uint64_t last_gen;
	bool busy; /* the thread is sending */
	bool stopping;
	uint64_t flush_end_ns;
	uint64_t retry_at_ns; /* 0: no back-off */
	unsigned int backoff_ms;
	bool unreachable; /* said so in the log, and not back since */
	struct td_ratelimit overflow_rl;
	struct master_notifier_stats stats;
};

/* --- the queue (under lock) ---------------------------------------------------- */

static uint32_t fnv(uint32_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * FNV_PRIME;
	return h;
}

static uint32_t key_hash(const char *vdisk, uint32_t column, uint32_t extent,
			 uint32_t replica)
{
	uint32_t h = fnv(FNV_BASIS, vdisk, strlen(vdisk));

	h = fnv(h, &column, sizeof(column));
	h = fnv(h, &extent, sizeof(extent));
	h = fnv(h, &replica, sizeof(replica));
	return h & (HASH_SIZE - 1);
}

static uint32_t find(const struct master_notifier *n, uint32_t h,
		     const char *vdisk, uint32_t column, uint32_t extent,
		     uint32_t replica)
{
	for (uint32_t i = n->hash[h]; i != NIL; i = n->entries[i].hash_next) {
		const struct entry *e = &n->entries[i];

		if (e->column == column && e->extent == extent &&
		    e->replica == replica && !strcmp(e->vdisk, vdisk))
			return i;
	}
	return NIL;
}

static bool idle(const struct master_notifier *n)
{
	return !n->count && !n->busy;
}

/* Take entry i off the queue and its chain, onto the free list. */
static void queue_remove(struct master_notifier *n, uint32_t i)
{
	struct entry *e = &n->entries[i];
	uint32_t *link =
		&n->hash[key_hash(e->vdisk, e->column, e->extent, e->replica)];

	while (*link != i)
		link = &n->entries[*link].hash_next;
	*link = e->hash_next;
	if (e->prev == NIL)
		n->head = e->next;
	else
		n->entries[e->prev].next = e->next;
	if (e->next == NIL)
		n->tail = e->prev;
	else
		n->entries[e->next].prev = e->prev;
	e->gen = 0;
	e->next = n->free_list;
	n->free_list = i;
	n->count--;
	if (idle(n))
		pthread_cond_broadcast(&n->idle);
}

/*
 * Queue a replica that is not queued yet, at the tail.  When the queue is
 * full the oldest makes room: *dropped gets a copy of it (gen 0 when
 * nothing was dropped).
 */
static void queue_push(struct master_notifier *n, uint32_t h, const char *vdisk,
		       uint32_t column, uint32_t extent, uint32_t replica,
		       bool stale, struct entry *dropped)
{
	struct entry *e;
	uint32_t i;

	dropped->gen = 0;
	if (n->free_list == NIL) {
		*dropped = n->entries[n->head];
		n->stats.dropped_overflow++;
		queue_remove(n, n->head);
	}
	i = n->free_list;
	e = &n->entries[i];
	n->free_list = e->next;
	strcpy(e->vdisk, vdisk); /* its length was checked */
	e->column = column;
	e->extent = extent;
	e->replica = replica;
	e->stale = stale;
	e->gen = ++n->last_gen;
	e->prev = n->tail;
	e->next = NIL;
	if (n->tail == NIL)
		n->head = i;
	else
		n->entries[n->tail].next = i;
	n->tail = i;
	e->hash_next = n->hash[h];
	n->hash[h] = i;
	n->count++;
}

/* The latest state of a replica: coalesced into its entry, or queued. */
static void queue_put(struct master_notifier *n, const char *vdisk,
		      uint32_t column, uint32_t extent, uint32_t replica,
		      bool stale, struct entry *dropped)
{
	uint32_t h = key_hash(vdisk, column, extent, replica);
	uint32_t i = find(n, h, vdisk, column, extent, replica);

	n->stats.queued++;
	dropped->gen = 0;
	if (i == NIL) {
		queue_push(n, h, vdisk, column, extent, replica, stale,
			   dropped);
		pthread_cond_signal(&n->wake);
		return;
	}
	n->stats.coalesced++;
	if (n->entries[i].stale != stale) {
		n->entries[i].stale = stale;
		n->entries[i].gen = ++n->last_gen;
	}
}

/* --- the caller's side ----------------------------------------------------------- */

static void log_overflow(const struct master_notifier *n, const struct entry *e,
			 uint64_t suppressed)
{
	td_warn("more than %d replica states wait for the master at %s: "
		"dropped the oldest, vdisk %s column %u extent %u replica %u "
		"%s (the mapping file has it; 'stripe-ctl vdisk mark' sets "
		"the master's record)%s",
		MASTER_NOTIFY_QUEUE_MAX, master_client_address(n->client),
		e->vdisk, e->column, e->extent, e->replica,
		e->stale ? "stale" : "ok",
		suppressed ? " (and more, not logged)" : "");
}

void master_notifier_replica_state(struct master_notifier *n, const char *vdisk,
				   uint32_t column, uint32_t extent,
				   uint32_t replica, bool stale)
{
	size_t len = vdisk ? strnlen(vdisk, MS_VDISK_ID_MAX + 1) : 0;
	struct entry dropped;
	uint64_t suppressed = 0;
	bool log_drop = false;

	if (!len || len > MS_VDISK_ID_MAX) {
		pthread_mutex_lock(&n->lock);
		n->stats.queued++;
		n->stats.dropped_invalid++;
		pthread_mutex_unlock(&n->lock);
		td_err("a replica state for a vdisk id of %zu bytes (1-%d "
		       "allowed): not sent to the master",
		       len, MS_VDISK_ID_MAX);
		return;
	}
	pthread_mutex_lock(&n->lock);
	queue_put(n, vdisk, column, extent, replica, stale, &dropped);
	if (dropped.gen &&
	    (log_drop = td_ratelimit_allow(&n->overflow_rl, td_now_ns()))) {
		suppressed = n->overflow_rl.suppressed;
		n->overflow_rl.suppressed = 0;
	}
	pthread_mutex_unlock(&n->lock);
	if (log_drop)
		log_overflow(n, &dropped, suppressed);
}

/* --- the thread ---------------------------------------------------------------- */

static struct timespec abs_time(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / NS_PER_S),
				 .tv_nsec = (long)(ns % NS_PER_S)};
}

/*
 * Wait (under lock) until the oldest entry may be sent, and copy it into
 * *job; false when the thread must end: stopping, and the queue empty or
 * the flush budget spent.
 */
static bool next_job(struct master_notifier *n, struct job *job)
{
	uint64_t now, until;

	for (;;) {
		now = td_now_ns();
		if (n->stopping && (!n->count || now >= n->flush_end_ns))
			return false;
		if (n->count && now >= n->retry_at_ns)
			break;
		until = n->count ? n->retry_at_ns : 0;
		if (n->stopping && (!until || until > n->flush_end_ns))
			until = n->flush_end_ns;
		if (until) {
			struct timespec ts = abs_time(until);

			pthread_cond_timedwait(&n->wake, &n->lock, &ts);
		} else
			pthread_cond_wait(&n->wake, &n->lock);
	}
	job->slot = n->head;
	job->gen = n->entries[n->head].gen;
	job->e = n->entries[n->head];
	job->timeout_ms = MASTER_NOTIFY_CALL_TIMEOUT_MS;
	job->total_ms = 0;
	if (n->stopping) {
		/* connect and call each get half of what is left */
		uint64_t left_ms = (n->flush_end_ns - now) / NS_PER_MS / 2;

		if (left_ms < job->timeout_ms)
			job->timeout_ms = left_ms < MIN_ATTEMPT_MS
						  ? MIN_ATTEMPT_MS
						  : (unsigned int)left_ms;
		/* every master of a list within what is left */
		job->total_ms = 2 * job->timeout_ms;
	}
	n->busy = true;
	return true;
}

/* Refused for good: the state can never be accepted. */
static bool refused(int err)
{
	return err == -ENOENT || err == -EINVAL || err == -EEXIST ||
	       err == -ENOSPC;
}

/* Account for the answer (under lock); returns the EV_* to log. */
static unsigned int finish_job(struct master_notifier *n, const struct job *job,
			       int err)
{
	bool current = n->entries[job->slot].gen == job->gen;
	unsigned int ev = 0;

	n->busy = false;
	if (err && !refused(err)) {
		n->stats.failed_attempts++;
		n->retry_at_ns = td_now_ns() + n->backoff_ms * NS_PER_MS;
		n->backoff_ms = n->backoff_ms * 2 > MASTER_NOTIFY_BACKOFF_MAX_MS
					? MASTER_NOTIFY_BACKOFF_MAX_MS
					: n->backoff_ms * 2;
		if (!n->unreachable)
			ev |= EV_UNREACHABLE;
		n->unreachable = true;
		return ev;
	}
	if (n->unreachable)
		ev |= EV_BACK;
	n->unreachable = false;
	n->retry_at_ns = 0;
	n->backoff_ms = MASTER_NOTIFY_BACKOFF_MIN_MS;
	if (err && current) {
		n->stats.dropped_refused++;
		ev |= EV_REFUSED;
	} else if (!err)
		n->stats.sent++;
	if (current)
		queue_remove(n, job->slot);
	else if (idle(n))
		pthread_cond_broadcast(&n->idle);
	return ev;
}

static int send_job(struct master_notifier *n, const struct job *job)
{
	ms_replica_state_args a = {.vdisk = (char *)job->e.vdisk,
				   .column = job->e.column,
				   .extent = job->e.extent,
				   .replica = job->e.replica,
				   .stale = job->e.stale};
	ms_reply rep;
	int ret;

	master_client_set_timeout(n->client, job->timeout_ms);
	master_client_set_total(n->client, job->total_ms);
	ret = master_call_replica_state(n->client, &a, &rep);
	master_reply_free(&rep);
	return ret;
}

static void log_events(struct master_notifier *n, const struct job *job,
		       unsigned int ev, size_t queued)
{
	const char *addr = master_client_address(n->client);
	const char *why = master_client_error(n->client);

	if (ev & EV_BACK)
		td_info("the master at %s answers again; %zu replica states "
			"to send",
			addr, queued);
	if (ev & EV_UNREACHABLE)
		td_warn("cannot tell the master at %s that vdisk %s column %u "
			"extent %u replica %u is %s: %s; retrying with "
			"back-off (the mapping file has it)",
			addr, job->e.vdisk, job->e.column, job->e.extent,
			job->e.replica, job->e.stale ? "stale" : "ok", why);
	if (ev & EV_REFUSED)
		td_err("the master at %s refused the state of vdisk %s column "
		       "%u extent %u replica %u (%s): %s; dropped (the "
		       "mapping file has it)",
		       addr, job->e.vdisk, job->e.column, job->e.extent,
		       job->e.replica, job->e.stale ? "stale" : "ok", why);
}

static void *notifier_main(void *arg)
{
	struct master_notifier *n = arg;
	struct job job;
	unsigned int ev;
	size_t left;
	int err;

	pthread_mutex_lock(&n->lock);
	while (next_job(n, &job)) {
		pthread_mutex_unlock(&n->lock);
		err = send_job(n, &job);
		pthread_mutex_lock(&n->lock);
		if ((ev = finish_job(n, &job, err))) {
			left = n->count;
			pthread_mutex_unlock(&n->lock);
			log_events(n, &job, ev, left);
			pthread_mutex_lock(&n->lock);
		}
	}
	left = n->count;
	pthread_mutex_unlock(&n->lock);
	if (left)
		td_warn("%zu replica states not sent to the master at %s "
			"before stopping (the mapping files have them)",
			left, master_client_address(n->client));
	return NULL;
}

/* --- life cycle ---------------------------------------------------------------- */

static void notifier_free(struct master_notifier *n)
{
	pthread_cond_destroy(&n->idle);
	pthread_cond_destroy(&n->wake);
	pthread_mutex_destroy(&n->lock);
	master_client_close(n->client);
	free(n->hash);
	free(n->entries);
	free(n);
}

/* Everything but the client and the thread. */
static struct master_notifier *notifier_alloc(void)
{
	struct master_notifier *n = calloc(1, sizeof(*n));
	pthread_condattr_t attr;

	if (!n)
		return NULL;
	n->entries = calloc(MASTER_NOTIFY_QUEUE_MAX, sizeof(*n->entries));
	n->hash = malloc(HASH_SIZE * sizeof(*n->hash));
	if (!n->entries || !n->hash || pthread_condattr_init(&attr)) {
		free(n->entries);
		free(n->hash);
		free(n);
		return NULL;
	}
	/* timed waits run on CLOCK_MONOTONIC, as td_now_ns() does */
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->wake, &attr);
	pthread_cond_init(&n->idle, &attr);
	pthread_condattr_destroy(&attr);
	for (uint32_t i = 0; i < HASH_SIZE; i++)
		n->hash[i] = NIL;
	for (uint32_t i = 0; i < MASTER_NOTIFY_QUEUE_MAX; i++)
		n->entries[i].next =
			i + 1 < MASTER_NOTIFY_QUEUE_MAX ? i + 1 : NIL;
	n->head = n->tail = NIL;
	n->free_list = 0;
	n->backoff_ms = MASTER_NOTIFY_BACKOFF_MIN_MS;
	td_ratelimit_init(&n->overflow_rl);
	return n;
}

/* The thread starts with every signal blocked (see notify.h). */
static int start_thread(struct master_notifier *n)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&n->thread, NULL, notifier_main, n);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

int master_notifier_start(const char *master_addr, struct master_notifier **out)
{
	struct master_client_opts opts = {
		.timeout_ms = MASTER_NOTIFY_CALL_TIMEOUT_MS, .retries = 0};
	struct master_notifier *n;
	int ret;

	if (!master_addr || !out)
		return -EINVAL;
	if (!(n = notifier_alloc()))
		return -ENOMEM;
	if ((ret = master_client_open(master_addr, &opts, &n->client)) ||
	    (ret = start_thread(n))) {
		notifier_free(n);
		return ret;
	}
	*out = n;
	return 0;
}

void master_notifier_stop(struct master_notifier *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->stopping = true;
	n->flush_end_ns = td_now_ns() + MASTER_NOTIFY_FLUSH_MS * NS_PER_MS;
	/* one attempt at once, and a short back-off within the budget */
	n->retry_at_ns = 0;
	n->backoff_ms = MASTER_NOTIFY_BACKOFF_MIN_MS;
	pthread_cond_signal(&n->wake);
	pthread_mutex_unlock(&n->lock);
	pthread_join(n->thread, NULL);
	notifier_free(n);
}

size_t master_notifier_pending(struct master_notifier *n)
{
	size_t count;

	pthread_mutex_lock(&n->lock);
	count = n->count;
	pthread_mutex_unlock(&n->lock);
	return count;
}

int master_notifier_wait_idle(struct master_notifier *n,
			      unsigned int timeout_ms)
{
	struct timespec ts =
		abs_time(td_now_ns() + (uint64_t)timeout_ms * NS_PER_MS);
	int ret, rc = 0;

	pthread_mutex_lock(&n->lock);
	while (!idle(n) && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&n->idle, &n->lock, &ts);
	ret = idle(n) ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&n->lock);
	return ret;
}

void master_notifier_get_stats(struct master_notifier *n,
			       struct master_notifier_stats *out)
{
	pthread_mutex_lock(&n->lock);
	*out = n->stats;
	pthread_mutex_unlock(&n->lock);
}
