/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_notify.c - master/notify.c: its queue driven by hand (coalescing, a
 * state that changes while being sent, overflow, back-off), then the
 * notifier thread against the real master code (master/server.c and the
 * store) running in a thread of this process on a port reserved at setup,
 * so that the master can be down first and come up later on the address
 * the notifier already has.
 *
 * The store holds 4 servers of 4 MiB in 1 MiB extents and disk d1 of
 * 2 columns x 2 extents x 2 replicas.
 *
 * Threads: clean under helgrind with the suppressions of two library
 * internals, valgrind --tool=helgrind
 * --suppressions=tests/unit/helgrind.supp tests/unit/test_notify.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/client/notify.c" /* the queue's statics */
#include "master/server/server.h"
#include "master/server/store.h"

#define MiB	      (1024ull * 1024)
#define WAIT_MS	      20000 /* generous: valgrind, a loaded machine */
#define PROMPT_NS     (2500 * NS_PER_MS)
#define COLUMNS	      2
#define PER_COLUMN    2
#define REPLICAS      2
#define NR_REPLICAS   (COLUMNS * PER_COLUMN * REPLICAS)
#define DOWN_SLEEP_US 300000

struct fixture {
	char dir[64], path[96], address[64];
	struct master_store *st;
	struct master_server *ms;
	int stop_fd;
	pthread_t thread;
	bool running;
	int run_ret;
};

/* --- the master ------------------------------------------------------------------ */

typedef int (*store_fn)(struct master_store *st, const void *args,
			ms_reply *rep);

static void store_call(struct master_store *st, store_fn fn, const void *args)
{
	ms_reply rep;

	master_reply_init(&rep);
	assert_int_equal(master_store_begin(st), 0);
	assert_int_equal(master_store_call_begin(st), 0);
	assert_int_equal(fn(st, args, &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	assert_int_equal(master_store_call_end(st, true), 0);
	assert_int_equal(master_store_commit(st), 0);
	master_reply_free(&rep);
}

static int do_add(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_server_add(st, a, rep);
}

static int do_alloc(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_vdisk_alloc(st, a, rep);
}

static void populate(struct master_store *st)
{
	ms_alloc_args alloc = {"d1", COLUMNS, PER_COLUMN, REPLICAS, 1 * MiB};

	for (int i = 1; i <= 4; i++) {
		char address[32], target[64];
		ms_server_add_args a = {address, address, target, 1, 4 * MiB,
					512,	 "",	  "",	  ""};

		snprintf(address, sizeof(address), "10.0.0.%d", i);
		snprintf(target, sizeof(target), "iqn.2024-01.t:s%d", i);
		store_call(st, do_add, &a);
	}
	store_call(st, do_alloc, &alloc);
}

/* A port nobody listens on (yet): bound once, then let go. */
static unsigned int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char msg[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_notify.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/master.db", f->dir);
	assert_int_equal(
		master_store_open(f->path, 1 * MiB, &f->st, msg, sizeof(msg)),
		0);
	populate(f->st);
	snprintf(f->address, sizeof(f->address), "127.0.0.1:%u", free_port());
	f->stop_fd = eventfd(0, EFD_CLOEXEC);
	*state = f;
	return 0;
}

static void *run(void *arg)
{
	struct fixture *f = arg;

	f->run_ret = master_server_run(f->ms);
	return NULL;
}

static void master_up(struct fixture *f)
{
	struct master_server_config cfg = {.listen = f->address,
					   .max_connections = 16};
	char msg[256];

	master_netacl_loopback(&cfg.acl);
	assert_int_equal(master_server_create(&cfg, f->st, f->stop_fd, &f->ms,
					      msg, sizeof(msg)),
			 0);
	assert_int_equal(pthread_create(&f->thread, NULL, run, f), 0);
	f->running = true;
}

static void master_down(struct fixture *f)
{
	uint64_t one = 1;

	if (!f->running)
		return;
	assert_int_equal(write(f->stop_fd, &one, sizeof(one)), sizeof(one));
	pthread_join(f->thread, NULL);
	assert_int_equal(f->run_ret, 0);
	master_server_destroy(f->ms);
	f->running = false;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	master_down(f);
	master_store_close(f->st);
	close(f->stop_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	free(f);
	return system(cmd);
}

/* The master's idea of d1's replicas, in slot order, as a bit mask. */
static unsigned int stale_mask(struct fixture *f)
{
	struct master_client_opts o = {.timeout_ms = WAIT_MS, .retries = 0};
	struct master_client *c;
	unsigned int mask = 0;
	ms_reply rep;

	assert_int_equal(master_client_open(f->address, &o, &c), 0);
	assert_int_equal(master_call_vdisk_lookup(c, "d1", &rep), 0);
	assert_int_equal(rep.body.ms_body_u.vdisk.extents.extents_len,
			 NR_REPLICAS);
	for (u_int i = 0; i < NR_REPLICAS; i++)
		if (rep.body.ms_body_u.vdisk.extents.extents_val[i].stale)
			mask |= 1u << i;
	master_reply_free(&rep);
	master_client_close(c);
	return mask;
}

/* The bit of (column, extent, replica) in stale_mask: replica fastest. */
static unsigned int bit(unsigned int c, unsigned int x, unsigned int r)
{
	return 1u << ((c * PER_COLUMN + x) * REPLICAS + r);
}

static struct master_notifier_stats stats_of(struct master_notifier *n)
{
	struct master_notifier_stats s;

	master_notifier_get_stats(n, &s);
	return s;
}

/* --- the queue by hand (no thread, no client) -------------------------------------- */

static void put(struct master_notifier *n, const char *vdisk, uint32_t c,
		uint32_t x, uint32_t r, bool stale, struct entry *dropped)
{
	struct entry ignored;

	queue_put(n, vdisk, c, x, r, stale, dropped ? dropped : &ignored);
}

static void take(struct master_notifier *n, struct job *job)
{
	assert_true(next_job(n, job)); /* does not wait: work is queued */
}

static void test_queue_coalesces(void **state)
{
	struct master_notifier *n = notifier_alloc();
	struct job job;

	(void)state;
	put(n, "d1", 0, 0, 0, true, NULL);
	put(n, "d1", 0, 0, 0, false, NULL);
	put(n, "d1", 0, 0, 0, true, NULL);
	put(n, "d1", 1, 0, 1, true, NULL);
	put(n, "d2", 0, 0, 0, true, NULL); /* another disk: its own entry */
	assert_int_equal(n->count, 3);
	assert_int_equal(n->stats.queued, 5);
	assert_int_equal(n->stats.coalesced, 2);
	/* the oldest first, with its latest state */
	take(n, &job);
	assert_string_equal(job.e.vdisk, "d1");
	assert_int_equal(job.e.column, 0);
	assert_true(job.e.stale);
	assert_int_equal(finish_job(n, &job, 0), 0);
	take(n, &job);
	assert_int_equal(job.e.column, 1);
	assert_int_equal(job.e.replica, 1);
	assert_int_equal(finish_job(n, &job, 0), 0);
	take(n, &job);
	assert_string_equal(job.e.vdisk, "d2");
	assert_int_equal(finish_job(n, &job, 0), 0);
	assert_int_equal(n->count, 0);
	assert_int_equal(n->stats.sent, 3);
	assert_true(idle(n));
	notifier_free(n);
}

static void test_queue_changed_while_sent(void **state)
{
	struct master_notifier *n = notifier_alloc();
	struct job job;

	(void)state;
	put(n, "d1", 0, 1, 0, true, NULL);
	take(n, &job);
	assert_true(n->busy);
	/* the same state again changes nothing: acknowledged, it goes */
	put(n, "d1", 0, 1, 0, true, NULL);
	assert_int_equal(finish_job(n, &job, 0), 0);
	assert_int_equal(n->count, 0);
	/* a new state while the old one is on the wire: sent after it */
	put(n, "d1", 0, 1, 0, true, NULL);
	take(n, &job);
	put(n, "d1", 0, 1, 0, false, NULL);
	assert_int_equal(finish_job(n, &job, 0), 0);
	assert_int_equal(n->count, 1);
	take(n, &job);
	assert_false(job.e.stale);
	assert_int_equal(finish_job(n, &job, 0), 0);
	assert_int_equal(n->count, 0);
	assert_int_equal(n->stats.sent, 3);
	notifier_free(n);
}

static void test_queue_overflow_drops_oldest(void **state)
{
	struct master_notifier *n = notifier_alloc();
	struct entry dropped;
	struct job job;
	uint32_t h;

	(void)state;
	for (uint32_t x = 0; x < MASTER_NOTIFY_QUEUE_MAX; x++)
		put(n, "d1", 0, x, 0, true, &dropped);
	assert_int_equal(dropped.gen, 0);
	assert_int_equal(n->count, MASTER_NOTIFY_QUEUE_MAX);
	/* the oldest is on the wire when one more comes: it is dropped */
	take(n, &job);
	assert_int_equal(job.e.extent, 0);
	put(n, "d1", 0, MASTER_NOTIFY_QUEUE_MAX, 0, true, &dropped);
	assert_int_not_equal(dropped.gen, 0);
	assert_int_equal(dropped.extent, 0);
	assert_int_equal(n->stats.dropped_overflow, 1);
	assert_int_equal(n->count, MASTER_NOTIFY_QUEUE_MAX);
	h = key_hash("d1", 0, 0, 0);
	assert_int_equal(find(n, h, "d1", 0, 0, 0), NIL);
	/* its slot now holds the newest: the late answer leaves it queued */
	h = key_hash("d1", 0, MASTER_NOTIFY_QUEUE_MAX, 0);
	assert_int_equal(find(n, h, "d1", 0, MASTER_NOTIFY_QUEUE_MAX, 0),
			 job.slot);
	assert_int_equal(finish_job(n, &job, 0), 0);
	assert_int_equal(n->count, MASTER_NOTIFY_QUEUE_MAX);
	/* and the queue is oldest first: extent 1 is next */
	take(n, &job);
	assert_int_equal(job.e.extent, 1);
	assert_int_equal(finish_job(n, &job, 0), 0);
	notifier_free(n);
}

static void test_queue_backoff_and_refusal(void **state)
{
	static const unsigned int backoff_ms[] = {100,	200,  400,  800,
						  1600, 3200, 5000, 5000};
	struct master_notifier *n = notifier_alloc();
	struct job job;

	(void)state;
	put(n, "d1", 0, 0, 0, true, NULL);
	for (size_t i = 0; i < sizeof(backoff_ms) / sizeof(backoff_ms[0]);
	     i++) {
		uint64_t before = td_now_ns();

		assert_int_equal(n->backoff_ms, backoff_ms[i]);
		n->retry_at_ns = 0; /* instead of waiting */
		take(n, &job);
		/* logged once, when the master becomes unreachable */
		assert_int_equal(finish_job(n, &job, -ECONNREFUSED),
				 i ? 0 : EV_UNREACHABLE);
		assert_true(n->retry_at_ns >=
			    before + backoff_ms[i] * NS_PER_MS);
		assert_int_equal(n->count, 1);
	}
	assert_int_equal(n->stats.failed_attempts, 8);
	/* the store failing or the allow-list refusing: retried too */
	n->retry_at_ns = 0;
	take(n, &job);
	assert_int_equal(finish_job(n, &job, -EIO), 0);
	n->retry_at_ns = 0;
	take(n, &job);
	assert_int_equal(finish_job(n, &job, -EPERM), 0);
	assert_int_equal(n->count, 1);
	/* an answer for good: dropped, and the master is back */
	n->retry_at_ns = 0;
	take(n, &job);
	assert_int_equal(finish_job(n, &job, -ENOENT), EV_BACK | EV_REFUSED);
	assert_int_equal(n->count, 0);
	assert_int_equal(n->stats.dropped_refused, 1);
	assert_int_equal(n->backoff_ms, MASTER_NOTIFY_BACKOFF_MIN_MS);
	assert_int_equal(n->retry_at_ns, 0);
	notifier_free(n);
}

/* --- the thread against the master ------------------------------------------------- */

static struct master_notifier *start(struct fixture *f)
{
	struct master_notifier *n;

	assert_int_equal(master_notifier_start(f->address, &n), 0);
	return n;
}

static void test_master_down_then_up(void **state)
{
	struct fixture *f = *state;
	struct master_notifier *n = start(f);

	master_notifier_replica_state(n, "d1", 0, 1, 1, true);
	usleep(DOWN_SLEEP_US);
	assert_int_equal(master_notifier_pending(n), 1);
	assert_true(stats_of(n).failed_attempts >= 1);
	assert_int_equal(master_notifier_wait_idle(n, 10), -ETIMEDOUT);
	master_up(f);
	assert_int_equal(master_notifier_wait_idle(n, WAIT_MS), 0);
	assert_int_equal(stats_of(n).sent, 1);
	assert_int_equal(stale_mask(f), bit(0, 1, 1));
	/* and back to ok */
	master_notifier_replica_state(n, "d1", 0, 1, 1, false);
	assert_int_equal(master_notifier_wait_idle(n, WAIT_MS), 0);
	assert_int_equal(stale_mask(f), 0);
	master_notifier_stop(n);
}

static void test_coalesced_while_down(void **state)
{
	struct fixture *f = *state;
	struct master_notifier *n = start(f);
	struct master_notifier_stats s;

	master_notifier_replica_state(n, "d1", 0, 0, 0, true);
	master_notifier_replica_state(n, "d1", 0, 0, 0, false);
	master_notifier_replica_state(n, "d1", 1, 1, 1, true);
	master_notifier_replica_state(n, "d1", 0, 0, 0, true);
	master_notifier_replica_state(n, "d1", 1, 1, 1, false);
	master_notifier_replica_state(n, "d1", 1, 0, 1, true);
	assert_int_equal(master_notifier_pending(n), 3);
	master_up(f);
	assert_int_equal(master_notifier_wait_idle(n, WAIT_MS), 0);
	s = stats_of(n);
	assert_int_equal(s.queued, 6);
	assert_int_equal(s.coalesced, 3);
	assert_int_equal(s.sent, 3); /* one call per replica */
	assert_int_equal(stale_mask(f), bit(0, 0, 0) | bit(1, 0, 1));
	master_notifier_stop(n);
}

static void test_refused_states_dropped(void **state)
{
	struct fixture *f = *state;
	struct master_notifier *n;
	struct master_notifier_stats s;
	char long_id[MS_VDISK_ID_MAX + 2];

	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	master_up(f);
	n = start(f);
	master_notifier_replica_state(n, "nope", 0, 0, 0, true);
	master_notifier_replica_state(n, "d1", COLUMNS, 0, 0, true);
	master_notifier_replica_state(n, "d1", 0, 0, REPLICAS, true);
	master_notifier_replica_state(n, "bad/id", 0, 0, 0, true);
	master_notifier_replica_state(n, long_id, 0, 0, 0, true);
	master_notifier_replica_state(n, NULL, 0, 0, 0, true);
	master_notifier_replica_state(n, "d1", 1, 1, 0, true);
	assert_int_equal(master_notifier_wait_idle(n, WAIT_MS), 0);
	s = stats_of(n);
	assert_int_equal(s.dropped_refused, 4);
	assert_int_equal(s.dropped_invalid, 2);
	assert_int_equal(s.sent, 1);
	assert_int_equal(s.failed_attempts, 0);
	assert_int_equal(stale_mask(f), bit(1, 1, 0));
	master_notifier_stop(n);
}

static void test_stop_flushes(void **state)
{
	struct fixture *f = *state;
	struct master_notifier *n;

	master_up(f);
	n = start(f);
	master_notifier_replica_state(n, "d1", 0, 0, 1, true);
	master_notifier_replica_state(n, "d1", 1, 0, 0, true);
	master_notifier_replica_state(n, "d1", 1, 1, 1, true);
	master_notifier_stop(n);
	assert_int_equal(stale_mask(f),
			 bit(0, 0, 1) | bit(1, 0, 0) | bit(1, 1, 1));
}

static void test_stop_prompt_when_master_down(void **state)
{
	struct fixture *f = *state;
	struct master_notifier *n = start(f);
	uint64_t t0;

	for (uint32_t x = 0; x < 100; x++)
		master_notifier_replica_state(n, "d1", 0, x, 0, true);
	usleep(DOWN_SLEEP_US);
	t0 = td_now_ns();
	master_notifier_stop(n);
	assert_true(td_now_ns() - t0 < PROMPT_NS);
}

/* A master that accepts connections (the kernel does) and never answers. */
static void test_stop_prompt_when_master_hangs(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct master_notifier *n;
	uint64_t t0;

	(void)f;
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa,
				     &(socklen_t){sizeof(sa)}),
			 0);
	snprintf(f->address, sizeof(f->address), "127.0.0.1:%u",
		 ntohs(sa.sin_port));
	n = start(f);
	master_notifier_replica_state(n, "d1", 0, 0, 0, true);
	usleep(DOWN_SLEEP_US); /* the call waits for its answer now */
	assert_int_equal(master_notifier_pending(n), 1);
	t0 = td_now_ns();
	master_notifier_stop(n);
	assert_true(td_now_ns() - t0 < PROMPT_NS);
	close(fd);
}

static void test_start_refuses(void **state)
{
	struct master_notifier *n;

	(void)state;
	assert_int_equal(master_notifier_start("127.0.0.1:99999", &n), -EINVAL);
	assert_int_equal(master_notifier_start(NULL, &n), -EINVAL);
	master_notifier_stop(NULL);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queue_coalesces),
		cmocka_unit_test(test_queue_changed_while_sent),
		cmocka_unit_test(test_queue_overflow_drops_oldest),
		cmocka_unit_test(test_queue_backoff_and_refusal),
		T(test_master_down_then_up),
		T(test_coalesced_while_down),
		T(test_refused_states_dropped),
		T(test_stop_flushes),
		T(test_stop_prompt_when_master_down),
		T(test_stop_prompt_when_master_hangs),
		cmocka_unit_test(test_start_refuses),
	};
#undef T

	signal(SIGPIPE, SIG_IGN);
	td_log_set_level(TD_LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
