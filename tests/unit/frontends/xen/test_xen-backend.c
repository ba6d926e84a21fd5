/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_xen-backend.c - the Xen transport's xenbus state machine against a
 * fake xenstore (a table of keys whose writes fire the watches set on
 * them) and a fake data path (connect/disconnect recorded, drains ended
 * by the test).  The frontend's moves are written by hand, as blkfront
 * makes them.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "frontends/xen/xen-int.h"
#include "tests/unit/mock-driver.h"

#define MAX_KEYS    128
#define MAX_WATCHES 16
#define MAX_EVENTS  256
#define BE	    "/local/domain/0/backend/vbd3/3/51744"
#define FE	    "/local/domain/3/device/vbd/51744"
#define ROOT	    "/local/domain/0/backend/vbd3"
/* What xl writes in a driver domain (here 0) for backendtype=qdisk. */
#define QBE "/local/domain/0/backend/qdisk/3/51744"
/* Both roots' watches. */
#define ROOT_WATCHES 2

/* --- the fake xenstore ---------------------------------------------------- */

struct kv {
	char *path, *value;
};

struct watch {
	char *path, *token;
};

static struct {
	struct kv keys[MAX_KEYS];
	struct watch watches[MAX_WATCHES];
	char *events[MAX_EVENTS][2]; /* queued (path, token) */
	unsigned int nr_events;
	int write_err;
	/* transactions: the open one's writes, held until it ends */
	bool tx_open;
	uint32_t tx_id;
	struct kv tx_writes[8];
	unsigned int nr_tx_writes;
	unsigned int tx_conflicts; /* the next tx_end calls answer EAGAIN */
	unsigned int tx_commits;
} xs;

static struct kv *xs_find(const char *path)
{
	for (int i = 0; i < MAX_KEYS; i++)
		if (xs.keys[i].path && !strcmp(xs.keys[i].path, path))
			return &xs.keys[i];
	return NULL;
}

/* path is at or below dir. */
static bool below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (!path[n] || path[n] == '/');
}

static void xs_fire(const char *path)
{
	for (int i = 0; i < MAX_WATCHES; i++) {
		if (!xs.watches[i].path || !below(path, xs.watches[i].path))
			continue;
		assert_true(xs.nr_events < MAX_EVENTS);
		xs.events[xs.nr_events][0] = strdup(path);
		xs.events[xs.nr_events][1] = strdup(xs.watches[i].token);
		xs.nr_events++;
	}
}

static void put(const char *path, const char *value)
{
	struct kv *kv = xs_find(path);

	if (!kv) {
		for (kv = xs.keys; kv->path; kv++)
			assert_true(kv < xs.keys + MAX_KEYS - 1);
		kv->path = strdup(path);
	}
	free(kv->value);
	kv->value = strdup(value);
	xs_fire(path);
}

/*
 * Remove dir and everything below it.  As xenstored does, the watches
 * on dir, above it and below it (on the removed nodes) fire.
 */
static void rm_tree(const char *dir)
{
	for (int i = 0; i < MAX_KEYS; i++) {
		if (xs.keys[i].path && below(xs.keys[i].path, dir)) {
			free(xs.keys[i].path);
			free(xs.keys[i].value);
			xs.keys[i].path = xs.keys[i].value = NULL;
		}
	}
	xs_fire(dir);
	for (int i = 0; i < MAX_WATCHES; i++) {
		struct watch *w = &xs.watches[i];

		if (w->path && strcmp(w->path, dir) && below(w->path, dir)) {
			assert_true(xs.nr_events < MAX_EVENTS);
			xs.events[xs.nr_events][0] = strdup(w->path);
			xs.events[xs.nr_events][1] = strdup(w->token);
			xs.nr_events++;
		}
	}
}

static const char *get(const char *path)
{
	struct kv *kv = xs_find(path);

	return kv ? kv->value : NULL;
}

static char *f_read(void *h, const char *path)
{
	const char *v = get(path);

	if (!v) {
		/* A directory exists while a key lies below it. */
		for (int i = 0; i < MAX_KEYS; i++)
			if (xs.keys[i].path && below(xs.keys[i].path, path))
				return strdup("");
		errno = ENOENT;
		return NULL;
	}
	return strdup(v);
}

static int f_write(void *h, const char *path, const char *value)
{
	if (xs.write_err)
		return xs.write_err;
	put(path, value);
	return 0;
}

static int f_watch(void *h, const char *path, const char *token)
{
	for (int i = 0; i < MAX_WATCHES; i++) {
		if (!xs.watches[i].path) {
			xs.watches[i].path = strdup(path);
			xs.watches[i].token = strdup(token);
			xs_fire(path); /* a watch fires once when set */
			return 0;
		}
	}
	return -ENOSPC;
}

static int f_unwatch(void *h, const char *path, const char *token)
{
	for (int i = 0; i < MAX_WATCHES; i++) {
		struct watch *w = &xs.watches[i];

		if (w->path && !strcmp(w->path, path) &&
		    !strcmp(w->token, token)) {
			free(w->path);
			free(w->token);
			w->path = w->token = NULL;
			return 0;
		}
	}
	return -ENOENT;
}

/* The distinct names right below path, in one block, as xs_directory. */
static char **f_directory(void *h, const char *path, unsigned int *n)
{
	const char *names[MAX_KEYS];
	size_t plen = strlen(path), bytes = 0;
	unsigned int nr = 0;
	char **out, *p;

	for (int i = 0; i < MAX_KEYS; i++) {
		const char *k = xs.keys[i].path, *name;
		size_t len;
		bool seen = false;

		if (!k || !below(k, path) || !k[plen])
			continue;
		name = k + plen + 1;
		len = strcspn(name, "/");
		for (unsigned int j = 0; j < nr; j++)
			seen |= !strncmp(names[j], name, len) && !names[j][len];
		if (seen)
			continue;
		names[nr++] = strndup(name, len);
		bytes += len + 1;
	}
	if (!nr) {
		errno = ENOENT;
		return NULL;
	}
	out = malloc(nr * sizeof(char *) + bytes);
	assert_non_null(out);
	p = (char *)(out + nr);
	for (unsigned int j = 0; j < nr; j++) {
		out[j] = strcpy(p, names[j]);
		p += strlen(names[j]) + 1;
		free((char *)names[j]);
	}
	*n = nr;
	return out;
}

static void rm_tree(const char *dir);

static int f_rm(void *h, const char *path)
{
	rm_tree(path);
	return 0;
}

static void f_close(void *h)
{
}

static void tx_drop(void)
{
	for (unsigned int i = 0; i < xs.nr_tx_writes; i++) {
		free(xs.tx_writes[i].path);
		free(xs.tx_writes[i].value);
	}
	xs.nr_tx_writes = 0;
	xs.tx_open = false;
}

/* One transaction at a time is all the backend needs. */
static int f_tx_start(void *h, uint32_t *tx)
{
	assert_false(xs.tx_open);
	xs.tx_open = true;
	*tx = ++xs.tx_id;
	return 0;
}

/* Held until the end: nobody sees it, no watch fires. */
static int f_tx_write(void *h, uint32_t tx, const char *path, const char *value)
{
	struct kv *kv = &xs.tx_writes[xs.nr_tx_writes];

	assert_true(xs.tx_open && tx == xs.tx_id);
	assert_true(xs.nr_tx_writes < 8);
	kv->path = strdup(path);
	kv->value = strdup(value);
	xs.nr_tx_writes++;
	return 0;
}

/* Commit: every write at once, in order (their watches fire then). */
static int f_tx_end(void *h, uint32_t tx, bool abort)
{
	assert_true(xs.tx_open && tx == xs.tx_id);
	if (!abort && xs.tx_conflicts) {
		xs.tx_conflicts--;
		tx_drop();
		return -EAGAIN;
	}
	for (unsigned int i = 0; !abort && i < xs.nr_tx_writes; i++)
		put(xs.tx_writes[i].path, xs.tx_writes[i].value);
	xs.tx_commits += !abort;
	tx_drop();
	return 0;
}

static const struct xen_store_ops fake_store = {
	.read = f_read,
	.write = f_write,
	.watch = f_watch,
	.unwatch = f_unwatch,
	.directory = f_directory,
	.rm = f_rm,
	.close = f_close,
	.tx_start = f_tx_start,
	.tx_write = f_tx_write,
	.tx_end = f_tx_end,
};

static unsigned int nr_watches(void)
{
	unsigned int n = 0;

	for (int i = 0; i < MAX_WATCHES; i++)
		n += xs.watches[i].path != NULL;
	return n;
}

/* --- the fake data path --------------------------------------------------- */

static struct {
	int connect_err;
	unsigned int connects, disconnects, quiesces;
	bool resume; /* of the last connect */
	struct xen_frontend_keys keys;
	uint32_t domid;
	bool read_only;
	void (*done)(void *);
	void *done_opaque;
	void (*fatal)(void *);
	void *fatal_opaque;
	/* Several rings: each connect hands out the next tag; the keys of
	 * ring i; the done callbacks still to run (drain runs the last). */
	unsigned int live, fail_at; /* fail_at: connect number + 1 to fail */
	struct xen_frontend_keys ring_keys[XEN_MAX_QUEUES];
	unsigned int nr_dones;
	void (*dones[XEN_MAX_QUEUES])(void *);
	void *done_opaques[XEN_MAX_QUEUES];
} io;

static char ring_tags[XEN_MAX_QUEUES];

static bool fake_ring(const struct xen_ring *ring)
{
	const char *t = (const char *)ring;

	return t >= ring_tags && t < ring_tags + XEN_MAX_QUEUES;
}

static void record_done(void (*done)(void *), void *opaque)
{
	assert_true(io.nr_dones < XEN_MAX_QUEUES);
	io.dones[io.nr_dones] = done;
	io.done_opaques[io.nr_dones++] = opaque;
	io.done = done;
	io.done_opaque = opaque;
}

static int f_connect(const struct xen_ring_params *p, struct xen_ring **out)
{
	io.connects++;
	if (io.connect_err || io.fail_at == io.connects)
		return io.connect_err ?: -ENOMEM;
	assert_true(io.live < XEN_MAX_QUEUES);
	io.ring_keys[io.live] = *p->keys;
	*out = (struct xen_ring *)&ring_tags[io.live++];
	io.keys = *p->keys;
	io.resume = p->resume;
	io.domid = p->frontend_domid;
	io.read_only = p->cfg->read_only;
	io.fatal = p->fatal;
	io.fatal_opaque = p->opaque;
	return 0;
}

static void f_disconnect(struct xen_ring *ring, void (*done)(void *),
			 void *opaque)
{
	assert_true(fake_ring(ring));
	io.disconnects++;
	record_done(done, opaque);
}

static void f_quiesce(struct xen_ring *ring, void (*done)(void *), void *opaque)
{
	assert_true(fake_ring(ring));
	io.quiesces++;
	record_done(done, opaque);
}

/*
 * A connected ring's counters, as the real one would count: 5 writes,
 * 2 events, and as many requests in flight as the ring's number + 1.
 */
static void f_add_stats(const struct xen_ring *ring,
			struct blkif_queue_report *sum)
{
	assert_true(fake_ring(ring));
	sum->ring.reqs[BLKIF_OP_WRITE] += 5;
	sum->kicks += 2;
	sum->in_flight += (uint64_t)((const char *)ring - ring_tags) + 1;
}

static const struct xen_io_ops fake_io = {
	.connect = f_connect,
	.disconnect = f_disconnect,
	.quiesce = f_quiesce,
	.add_stats = f_add_stats,
};

/* The I/O in flight has finished: the (last asked) ring is gone. */
static void drain(void)
{
	void (*done)(void *);
	void *opaque;

	assert_true(io.nr_dones > 0);
	done = io.dones[--io.nr_dones];
	opaque = io.done_opaques[io.nr_dones];
	io.done = io.nr_dones ? io.dones[io.nr_dones - 1] : NULL;
	io.done_opaque = io.nr_dones ? io.done_opaques[io.nr_dones - 1] : NULL;
	io.live--;
	done(opaque);
}

static void drain_all(void)
{
	while (io.nr_dones)
		drain();
}

/* --- fixture ----------------------------------------------------------------- */

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_xen_server srv;
	char *log_buf;
	size_t log_len;
	FILE *log;
	unsigned int stopped;
} T;

/* Deliver every queued watch event, as the store's fd would. */
static void pump(void)
{
	for (unsigned int i = 0; i < xs.nr_events; i++) {
		xen_server_watch_event(&T.srv, xs.events[i][0],
				       xs.events[i][1]);
		free(xs.events[i][0]);
		free(xs.events[i][1]);
	}
	xs.nr_events = 0;
	for (int i = 0; i < 4; i++)
		assert_int_equal(td_loop_run_once(T.loop, 0), 0);
	if (xs.nr_events)
		pump();
}

/* The server, named "xen" (claims params "[aio:]tapstripe:xen"). */
static void server_start(void)
{
	struct td_xen_params xp = {.name = "xen"};

	assert_int_equal(xen_server_init(&T.srv, T.loop, T.vbd, &xp,
					 &fake_store, NULL, &fake_io),
			 0);
	T.srv.remove_delay_us = 0;
	pump();
}

static int setup(void **state)
{
	struct td_vbd_params vp = {.name = "xen", .chain = "mock"};

	memset(&T, 0, sizeof(T));
	memset(&xs, 0, sizeof(xs));
	memset(&io, 0, sizeof(io));
	mock_reset();
	T.log = open_memstream(&T.log_buf, &T.log_len);
	td_log_set_stream(T.log);
	assert_int_equal(td_loop_create(&T.loop), 0);
	assert_int_equal(td_vbd_open(T.loop, mock_table, &vp, &T.vbd), 0);
	put("/local/domain/0/domid", "0");
	server_start();
	return 0;
}

static void stopped(void *opaque);

static int teardown(void **state)
{
	/* A ring still connected is disconnected first, as tapdisk does. */
	td_frontend_shutdown(&T.srv.fe, stopped, NULL);
	drain_all();
	pump();
	xen_server_fini(&T.srv);
	for (int i = 0; i < MAX_KEYS; i++) {
		free(xs.keys[i].path);
		free(xs.keys[i].value);
	}
	for (int i = 0; i < MAX_WATCHES; i++) {
		free(xs.watches[i].path);
		free(xs.watches[i].token);
	}
	for (unsigned int i = 0; i < xs.nr_events; i++) {
		free(xs.events[i][0]);
		free(xs.events[i][1]);
	}
	assert_int_equal(td_vbd_close(T.vbd), 0);
	td_loop_destroy(T.loop);
	td_log_set_stream(NULL);
	fclose(T.log);
	free(T.log_buf);
	return 0;
}

/* --- what the toolstack and the frontend write ------------------------------ */

/* tap-ctl attach: both directories, the backend naming pid. */
static void toolstack_attach_as(int pid, const char *mode, const char *fe)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", pid);
	put(FE "/backend", BE);
	put(FE "/backend-id", "0");
	put(FE "/state", "1");
	put(BE "/frontend", fe);
	put(BE "/frontend-id", "3");
	put(BE "/mode", mode);
	put(BE "/online", "1");
	put(BE "/" XEN_KEY_TAPDISK_PID, v);
	put(BE "/state", "1");
	pump();
}

static void toolstack_attach(int pid)
{
	toolstack_attach_as(pid, "w", FE);
}

/* blkfront: the ring's keys, then Initialised. */
static void frontend_init(const char *protocol)
{
	put(FE "/ring-ref", "77");
	put(FE "/event-channel", "12");
	put(FE "/protocol", protocol);
	put(FE "/state", "3");
	pump();
}

static void frontend_state(const char *state)
{
	put(FE "/state", state);
	pump();
}

static const char *be_state(void)
{
	return get(BE "/state");
}

/* Attached and Connected. */
static void connect_dev(void)
{
	toolstack_attach((int)getpid());
	frontend_init("x86_64-abi");
	assert_string_equal(be_state(), "4");
}

/* --- tests --------------------------------------------------------------------- */

static void test_advertise(void **state)
{
	char sectors[32];

	toolstack_attach((int)getpid());
	assert_string_equal(be_state(), "2"); /* InitWait */
	assert_string_equal(get(BE "/max-ring-page-order"), "4");
	assert_string_equal(get(BE "/feature-max-indirect-segments"), "4096");
	snprintf(sectors, sizeof(sectors), "%" PRIu64, mock.size_sectors);
	assert_string_equal(get(BE "/sectors"), sectors);
	assert_string_equal(get(BE "/sector-size"), "512");
	assert_string_equal(get(BE "/info"), "0");
	assert_non_null(get(BE "/feature-flush-cache"));
	assert_non_null(get(BE "/feature-discard"));
	assert_int_equal(T.srv.stats.devices, 1);
	assert_int_equal(io.connects, 0);
}

static void test_read_only_mode(void **state)
{
	toolstack_attach_as((int)getpid(), "r", FE);
	assert_string_equal(get(BE "/info"), "4"); /* VDISK_READONLY */
	assert_string_equal(get(BE "/feature-discard"), "0");
	/* Enforced on the ring, not only advertised. */
	frontend_init("x86_64-abi");
	assert_true(io.read_only);
}

static void test_connect(void **state)
{
	connect_dev();
	assert_int_equal(io.connects, 1);
	assert_int_equal(io.domid, 3);
	assert_int_equal(io.keys.ring_refs[0], 77);
	assert_int_equal(io.keys.event_channel, 12);
	assert_false(io.read_only);
	assert_int_equal(T.srv.stats.connects, 1);
	/* Events that change nothing connect nothing more. */
	frontend_state("4");
	assert_int_equal(io.connects, 1);
	assert_string_equal(be_state(), "4");
}

/* --- several rings (multi-queue) ------------------------------------------------ */

/* blkfront with n rings: multi-queue-num-queues and queue-N/ keys. */
static void frontend_init_queues(unsigned int n)
{
	char key[64], v[16];

	snprintf(v, sizeof(v), "%u", n);
	put(FE "/multi-queue-num-queues", v);
	for (unsigned int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), FE "/queue-%u/ring-ref", i);
		snprintf(v, sizeof(v), "%u", 100 + i);
		put(key, v);
		snprintf(key, sizeof(key), FE "/queue-%u/event-channel", i);
		snprintf(v, sizeof(v), "%u", 20 + i);
		put(key, v);
	}
	put(FE "/protocol", "x86_64-abi");
	put(FE "/state", "3");
	pump();
}

static void test_mq_advertise_connect(void **state)
{
	struct td_xen_stats st;

	toolstack_attach((int)getpid());
	assert_string_equal(get(BE "/multi-queue-max-queues"), "8");
	frontend_init_queues(4);
	assert_string_equal(be_state(), "4");
	assert_int_equal(io.connects, 4);
	assert_int_equal(io.live, 4);
	for (unsigned int i = 0; i < 4; i++) {
		assert_int_equal(io.ring_keys[i].ring_refs[0], 100 + i);
		assert_int_equal(io.ring_keys[i].event_channel, 20 + i);
	}
	/* Every connected ring counted, once. */
	td_xen_server_get_stats(&T.srv, &st);
	assert_int_equal(st.ring.reqs[BLKIF_OP_WRITE], 4 * 5);
	assert_int_equal(T.srv.stats.connects, 1);
	/* The frontend closes: every ring goes, the device once all did. */
	frontend_state("5");
	assert_int_equal(io.disconnects, 4);
	drain();
	drain();
	drain();
	assert_string_equal(be_state(), "5");
	drain();
	frontend_state("6");
	assert_string_equal(be_state(), "2"); /* ready for it again */
	assert_int_equal(io.live, 0);
}

/* Keys changed under a connected device are not read again. */
static void test_mq_keys_change_while_connected(void **state)
{
	toolstack_attach((int)getpid());
	frontend_init_queues(2);
	assert_int_equal(io.connects, 2);
	put(FE "/multi-queue-num-queues", "16");
	put(FE "/queue-0/ring-ref", "999");
	put(FE "/queue-1/event-channel", "junk");
	frontend_state("4");
	assert_int_equal(io.connects, 2);
	assert_int_equal(io.live, 2);
	assert_string_equal(be_state(), "4");
	assert_int_equal(io.ring_keys[0].ring_refs[0], 100);
}

/* Missing, out of range: the device fails; no ring is left mapped. */
static void test_mq_refused(void **state)
{
	static const struct {
		const char *key, *value, *why;
	} rows[] = {
		{FE "/multi-queue-num-queues", "9", "not in 1..8"},
		{FE "/multi-queue-num-queues", "0", "not in 1..8"},
		{FE "/queue-1/event-channel", "x", "queue-1: event-channel"},
		{FE "/queue-1/ring-ref", NULL,
		 "queue-1: cannot read ring-ref0"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
		toolstack_attach((int)getpid());
		put(FE "/multi-queue-num-queues", "2");
		put(FE "/queue-0/ring-ref", "1");
		put(FE "/queue-0/event-channel", "2");
		put(FE "/queue-1/ring-ref", "3");
		put(FE "/queue-1/event-channel", "4");
		if (rows[i].value)
			put(rows[i].key, rows[i].value);
		else
			rm_tree(rows[i].key);
		frontend_state("3");
		assert_string_equal(be_state(), "5");
		if (!strstr(get(BE "/error"), rows[i].why))
			fail_msg("row %zu: '%s' lacks '%s'", i,
				 get(BE "/error"), rows[i].why);
		assert_int_equal(io.live, 0);
		frontend_state("6");
		assert_string_equal(be_state(), "2");
	}
	assert_int_equal(T.srv.stats.connect_errors, 4);
}

/* Ring 3 of 4 cannot be mapped: the 2 mapped before are let go. */
static void test_mq_connect_fails_midway(void **state)
{
	io.fail_at = 3;
	toolstack_attach((int)getpid());
	frontend_init_queues(4);
	assert_int_equal(io.connects, 3);
	assert_string_equal(be_state(), "5");
	assert_non_null(strstr(get(BE "/error"), "cannot map ring 2"));
	assert_int_equal(io.disconnects, 2);
	drain_all();
	assert_int_equal(io.live, 0);
}

/* One ring broke the protocol: the whole device (every ring) goes. */
static void test_mq_one_ring_fatal(void **state)
{
	toolstack_attach((int)getpid());
	frontend_init_queues(3);
	io.fatal(io.fatal_opaque);
	pump();
	assert_string_equal(be_state(), "5");
	assert_int_equal(io.disconnects, 3);
	drain_all();
	assert_int_equal(io.live, 0);
}

/* Handed over to another tapdisk: every ring quiesced. */
static void test_mq_release(void **state)
{
	char pid[16];

	toolstack_attach((int)getpid());
	frontend_init_queues(2);
	snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
	put(BE "/" XEN_KEY_TAPDISK_PID, pid);
	pump();
	assert_int_equal(io.quiesces, 2);
	drain();
	assert_string_not_equal(get(BE "/" XEN_KEY_TAPDISK_OWNER), "0");
	drain();
	assert_string_equal(get(BE "/" XEN_KEY_TAPDISK_OWNER), "0");
}

/* tap-ctl stats counts a connected ring's requests, not only closed ones'. */
static void test_stats_count_connected_rings(void **state)
{
	struct td_xen_stats st;

	td_xen_server_get_stats(&T.srv, &st);
	assert_int_equal(st.ring.reqs[BLKIF_OP_WRITE], 0);
	connect_dev();
	td_xen_server_get_stats(&T.srv, &st);
	assert_int_equal(st.ring.reqs[BLKIF_OP_WRITE], 5);
	assert_int_equal(T.srv.stats.ring.reqs[BLKIF_OP_WRITE], 0);
}

/*
 * Ring i of every device in queues[i]: connected rings with their requests
 * in flight, closed ones (the server's own counters) summed into their
 * index; the queues add up to the disk's ring counters.
 */
static void test_stats_per_queue(void **state)
{
	struct td_xen_stats st;

	td_xen_server_get_stats(&T.srv, &st);
	assert_int_equal(st.nr_queues, 0);
	toolstack_attach((int)getpid());
	frontend_init_queues(3);
	/* what rings 0 and 1 of a device closed before left behind */
	T.srv.stats.nr_queues = 2;
	T.srv.stats.queues[0].ring.reqs[BLKIF_OP_READ] = 7;
	T.srv.stats.queues[1].ring.reqs[BLKIF_OP_READ] = 3;
	T.srv.stats.queues[1].kicks = 4;
	T.srv.stats.ring.reqs[BLKIF_OP_READ] = 10;
	td_xen_server_get_stats(&T.srv, &st);
	assert_int_equal(st.nr_queues, 3);
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(st.queues[i].queue, i);
		assert_int_equal(st.queues[i].ring.reqs[BLKIF_OP_WRITE], 5);
		assert_int_equal(st.queues[i].in_flight, i + 1);
	}
	assert_int_equal(st.queues[0].ring.reqs[BLKIF_OP_READ], 7);
	assert_int_equal(st.queues[1].ring.reqs[BLKIF_OP_READ], 3);
	assert_int_equal(st.queues[2].ring.reqs[BLKIF_OP_READ], 0);
	assert_int_equal(st.queues[0].kicks, 2);
	assert_int_equal(st.queues[1].kicks, 6);
	assert_int_equal(st.ring.reqs[BLKIF_OP_WRITE], 15);
	assert_int_equal(st.ring.reqs[BLKIF_OP_READ], 10);
	/* the server's own counters are not touched by a report */
	assert_int_equal(T.srv.stats.queues[0].ring.reqs[BLKIF_OP_WRITE], 0);
	assert_int_equal(T.srv.stats.nr_queues, 2);
}

static void test_other_tapdisk(void **state)
{
	toolstack_attach((int)getpid() + 1);
	assert_string_equal(be_state(), "1"); /* untouched */
	assert_int_equal(T.srv.stats.devices, 0);
}

/* A backend whose frontend key points at another directory is not ours. */
static void test_frontend_elsewhere(void **state)
{
	toolstack_attach_as((int)getpid(), "w",
			    "/local/domain/4/device/vbd/51744");
	assert_int_equal(T.srv.stats.devices, 0);
	assert_string_equal(be_state(), "1");
}

static void test_x86_32(void **state)
{
	toolstack_attach((int)getpid());
	frontend_init("x86_32-abi");
	assert_string_equal(be_state(), "4");
	assert_int_equal(io.keys.protocol, BLKIF_PROTOCOL_X86_32);
}

static void test_refuse_other_abi(void **state)
{
	toolstack_attach((int)getpid());
	frontend_init("arm-abi");
	assert_int_equal(io.connects, 0);
	assert_string_equal(be_state(), "5"); /* Closing */
	assert_non_null(strstr(get(BE "/error"), "arm-abi"));
	assert_int_equal(T.srv.stats.connect_errors, 1);
	/* The frontend gives up; a new try starts from InitWait. */
	frontend_state("6");
	assert_string_equal(be_state(), "2");
	frontend_state("1");
	assert_string_equal(be_state(), "2");
	frontend_init("x86_64-abi");
	assert_string_equal(be_state(), "4");
}

static void test_connect_error(void **state)
{
	io.connect_err = -EINVAL;
	toolstack_attach((int)getpid());
	frontend_init("x86_64-abi");
	assert_int_equal(io.connects, 1);
	assert_string_equal(be_state(), "5");
	assert_non_null(strstr(get(BE "/error"), "event channel 12"));
}

static void test_frontend_closes(void **state)
{
	connect_dev();
	frontend_state("5");
	assert_int_equal(io.disconnects, 1);
	assert_string_equal(be_state(), "5");
	frontend_state("6");
	/* Closed only once the I/O in flight has drained. */
	assert_string_equal(be_state(), "5");
	drain();
	pump();
	/* Closed, then InitWait at once: ready for a frontend to return. */
	assert_string_equal(be_state(), "2");
	assert_int_equal(io.disconnects, 1);
	/* It comes back. */
	frontend_state("1");
	assert_string_equal(be_state(), "2");
	frontend_init("x86_64-abi");
	assert_string_equal(be_state(), "4");
	assert_int_equal(io.connects, 2);
}

/* tap-ctl detach: online=0, wait for Closed, remove the directories. */
static void test_detach(void **state)
{
	connect_dev();
	put(BE "/online", "0");
	pump();
	assert_string_equal(be_state(), "5"); /* asks the frontend to close */
	assert_int_equal(io.disconnects, 0);
	frontend_state("5");
	frontend_state("6");
	drain();
	pump();
	assert_string_equal(be_state(), "6");
	rm_tree(FE);
	rm_tree(BE);
	pump();
	assert_int_equal(nr_watches(), ROOT_WATCHES);
	assert_true(LIST_EMPTY(&T.srv.devs));
}

/* Detached before the frontend ever connected: Closed at once. */
static void test_detach_unconnected(void **state)
{
	toolstack_attach((int)getpid());
	put(BE "/online", "0");
	pump();
	assert_string_equal(be_state(), "6");
}

/* The directory vanishes under a connected ring: disconnect, forget. */
static void test_removed_while_connected(void **state)
{
	connect_dev();
	rm_tree(BE);
	pump();
	assert_int_equal(io.disconnects, 1);
	assert_int_equal(nr_watches(), ROOT_WATCHES);
	drain();
	assert_true(LIST_EMPTY(&T.srv.devs));
}

static void test_ring_fatal(void **state)
{
	connect_dev();
	io.fatal(io.fatal_opaque);
	assert_int_equal(io.disconnects, 1);
	assert_string_equal(be_state(), "5");
	assert_non_null(strstr(get(BE "/error"), "ring protocol"));
	drain();
	pump();
	/* Stays Closing until the frontend closes, then waits for it. */
	assert_string_equal(be_state(), "5");
	frontend_state("6");
	assert_string_equal(be_state(), "2");
}

static void stopped(void *opaque)
{
	T.stopped++;
}

/* tap-ctl release: tapstripe-pid 0.  The ring is quiesced, not closed. */
static void test_release(void **state)
{
	connect_dev();
	assert_string_equal(get(BE "/" XEN_KEY_TAPDISK_OWNER),
			    get(BE "/" XEN_KEY_TAPDISK_PID));
	put(BE "/" XEN_KEY_TAPDISK_PID, "0");
	pump();
	assert_int_equal(io.quiesces, 1);
	assert_int_equal(io.disconnects, 0);
	/* Not handed over before every request taken is answered. */
	assert_string_not_equal(get(BE "/" XEN_KEY_TAPDISK_OWNER), "0");
	drain();
	pump();
	assert_string_equal(get(BE "/" XEN_KEY_TAPDISK_OWNER), "0");
	/* The guest sees nothing: still Connected, no error. */
	assert_string_equal(be_state(), "4");
	assert_null(get(BE "/error"));
	assert_true(LIST_EMPTY(&T.srv.devs));
	assert_int_equal(nr_watches(), ROOT_WATCHES);
	/* Frontend moves after the hand-over are not ours to follow. */
	frontend_state("5");
	assert_string_equal(be_state(), "4");
}

/* A released device named ours again: resumed, no InitWait. */
static void test_take_over(void **state)
{
	char pid[16];

	connect_dev();
	put(BE "/" XEN_KEY_TAPDISK_PID, "0");
	pump();
	drain();
	pump();
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	put(BE "/" XEN_KEY_TAPDISK_PID, pid);
	pump();
	assert_int_equal(io.connects, 2);
	assert_true(io.resume);
	assert_string_equal(be_state(), "4");
	assert_string_equal(get(BE "/" XEN_KEY_TAPDISK_OWNER), pid);
	/* Served as any connected device: the frontend closes, we close. */
	frontend_state("5");
	assert_int_equal(io.disconnects, 1);
	drain();
	frontend_state("6");
	assert_string_equal(be_state(), "2"); /* ready for it to return */
}

/* Connected, but its tapdisk died without handing it over: closed. */
static void test_take_over_not_handed_over(void **state)
{
	char pid[16];

	connect_dev();
	put(BE "/" XEN_KEY_TAPDISK_PID, "0");
	pump();
	drain();
	pump();
	put(BE "/" XEN_KEY_TAPDISK_OWNER, "4242"); /* as if it never quiesced */
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	put(BE "/" XEN_KEY_TAPDISK_PID, pid);
	pump();
	assert_int_equal(io.connects, 1);
	assert_string_equal(be_state(), "5");
	assert_non_null(strstr(get(BE "/error"), "did not hand it over"));
}

/* Released before the frontend connected: nothing to quiesce. */
static void test_release_unconnected(void **state)
{
	toolstack_attach((int)getpid());
	put(BE "/" XEN_KEY_TAPDISK_PID, "0");
	pump();
	assert_int_equal(io.quiesces, 0);
	assert_string_equal(get(BE "/" XEN_KEY_TAPDISK_OWNER), "0");
	assert_true(LIST_EMPTY(&T.srv.devs));
}

static void test_shutdown(void **state)
{
	connect_dev();
	assert_int_equal(td_frontend_shutdown(&T.srv.fe, stopped, NULL), 0);
	assert_int_equal(td_frontend_shutdown(&T.srv.fe, stopped, NULL),
			 -EALREADY);
	assert_int_equal(io.disconnects, 1);
	pump();
	assert_int_equal(T.stopped, 0); /* still draining */
	drain();
	pump();
	assert_int_equal(T.stopped, 1);
	assert_string_equal(be_state(), "6");
	/* A device attached now is not taken. */
	rm_tree(BE);
	toolstack_attach((int)getpid());
	assert_string_equal(be_state(), "1");
}

static void test_shutdown_idle(void **state)
{
	assert_int_equal(td_frontend_shutdown(&T.srv.fe, stopped, NULL), 0);
	pump();
	assert_int_equal(T.stopped, 1);
}

/* The Xen section of tap-ctl stats, text and JSON, rings included. */
static void test_report(void **state)
{
	struct td_strbuf sb;
	struct td_json j;

	T.srv.stats.devices = 2;
	T.srv.stats.connects = 3;
	T.srv.stats.copy_in_segs = 4096;
	T.srv.stats.copy_out_segs = 11;
	T.srv.stats.ring.reqs[BLKIF_OP_WRITE] = 16;
	T.srv.stats.ring.indirect_reqs = 5;
	T.srv.stats.ring.protocol_errors = 1;
	td_strbuf_init(&sb);
	td_frontend_report_text(&T.srv.fe, &sb);
	assert_non_null(strstr(sb.data, "\nxen: 2 devices taken, 3 rings "
					"connected"));
	assert_non_null(strstr(sb.data, "4096 segments in, 11 out"));
	assert_non_null(strstr(sb.data, "write 16"));
	assert_non_null(strstr(sb.data, "5 indirect"));
	assert_non_null(strstr(sb.data, "1 rings given up"));
	td_strbuf_reset(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_frontend_report_json(&T.srv.fe, &j);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), 0);
	assert_non_null(strstr(sb.data, "\"copy_in_segments\": 4096"));
	assert_non_null(strstr(sb.data, "\"requests_total\": 16"));
	assert_non_null(strstr(sb.data, "\"protocol_errors\": 1"));
	assert_non_null(strstr(sb.data, "\"queues\": []"));
	td_strbuf_free(&sb);
}

/* Two rings: a line, a JSON object and metric samples each. */
static void test_report_queues(void **state)
{
	struct td_strbuf sb;
	struct td_json j;

	T.srv.stats.nr_queues = 2;
	T.srv.stats.queues[0].ring.reqs[BLKIF_OP_READ] = 9;
	T.srv.stats.queues[0].ring.segments = 90;
	T.srv.stats.queues[1].ring.reqs[BLKIF_OP_WRITE] = 4;
	T.srv.stats.queues[1].kicks = 3;
	T.srv.stats.ring.reqs[BLKIF_OP_READ] = 9;
	T.srv.stats.ring.reqs[BLKIF_OP_WRITE] = 4;
	td_strbuf_init(&sb);
	td_frontend_report_text(&T.srv.fe, &sb);
	assert_non_null(strstr(sb.data, "ring 0: 9 requests (9 reads, 0 "
					"writes), 90 segments, 0 in flight"));
	assert_non_null(strstr(sb.data, "ring 1: 4 requests (0 reads, 4 "
					"writes), 0 segments, 0 in flight, 0 "
					"polled, 3 kicks"));
	td_strbuf_reset(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_frontend_report_json(&T.srv.fe, &j);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), 0);
	assert_non_null(strstr(sb.data, "\"queue\": 1,"));
	assert_non_null(strstr(sb.data, "\"requests_total\": 13"));
	assert_non_null(strstr(sb.data, "\"requests_total\": 9"));
	assert_non_null(strstr(sb.data, "\"requests_total\": 4"));
	td_strbuf_reset(&sb);
	td_frontend_report_metrics(&T.srv.fe, "disk=\"d\"", &sb);
	assert_non_null(strstr(sb.data, "tapstripe_ring_requests_total{disk="
					"\"d\",frontend=\"xen\",ring=\"0\"} "
					"9\n"));
	assert_non_null(strstr(sb.data, "tapstripe_ring_kicks_total{disk="
					"\"d\",frontend=\"xen\",ring=\"1\"} "
					"3\n"));
	td_strbuf_free(&sb);
}

/* --- devices xl made in a driver domain (backendtype=qdisk) ----------------------- */

/*
 * libxl's nodes for 'backend=<this domain>, backendtype=qdisk,
 * vdev=xvdb, target=<target>' of guest 3, in one transaction: no
 * tapstripe-pid.
 */
static void xl_qdisk_nodes(const char *params)
{
	put(FE "/backend", QBE);
	put(FE "/backend-id", "0");
	put(FE "/virtual-device", "51744");
	put(FE "/device-type", "disk");
	put(FE "/state", "1");
	put(QBE "/frontend", FE);
	put(QBE "/frontend-id", "3");
	put(QBE "/params", params);
	put(QBE "/mode", "w");
	put(QBE "/type", "qdisk");
	put(QBE "/dev", "xvdb");
	put(QBE "/device-type", "disk");
	put(QBE "/removable", "0");
	put(QBE "/bootable", "1");
	put(QBE "/discard-enable", "1");
	put(QBE "/online", "1");
	put(QBE "/state", "1");
}

static const char *qbe_state(void)
{
	return get(QBE "/state");
}

static void qdisk_connect(void)
{
	xl_qdisk_nodes("aio:tapstripe:xen");
	pump();
	assert_string_equal(qbe_state(), "2");
	frontend_init("x86_64-abi");
	assert_string_equal(qbe_state(), "4");
}

/* params naming us: claimed, named ours, served as any device. */
static void test_qdisk_claim(void **state)
{
	char pid[16];

	qdisk_connect();
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	assert_string_equal(get(QBE "/" XEN_KEY_TAPDISK_PID), pid);
	assert_string_equal(get(QBE "/" XEN_KEY_TAPDISK_OWNER), pid);
	assert_string_equal(get(QBE "/max-ring-page-order"), "4");
	assert_non_null(get(QBE "/sectors"));
	assert_int_equal(io.connects, 1);
	assert_int_equal(io.domid, 3);
	assert_int_equal(io.keys.ring_refs[0], 77);
	assert_int_equal(T.srv.stats.devices, 1);
	/* The vbd3 tree is untouched. */
	assert_null(get(BE "/state"));
}

/* Another name, another format, a plain path, nothing: not ours. */
static void test_qdisk_not_ours(void **state)
{
	static const char *const params[] = {
		"aio:tapstripe:other", "qcow2:tapstripe:xen",
		"raw:/srv/disk.img",   "tapstripe:xen2",
		"aio:tapstripe:",      "aio:tapstripe:xen/..",
	};

	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
		rm_tree(QBE);
		xl_qdisk_nodes(params[i]);
		pump();
		assert_string_equal(qbe_state(), "1");
		assert_null(get(QBE "/" XEN_KEY_TAPDISK_PID));
	}
	/* Named by tapstripe-pid another tapdisk: not claimed either. */
	rm_tree(QBE);
	xl_qdisk_nodes("aio:tapstripe:xen");
	put(QBE "/" XEN_KEY_TAPDISK_PID, "1");
	pump();
	assert_string_equal(qbe_state(), "1");
	assert_int_equal(T.srv.stats.devices, 0);
}

/* The plain form (a vbd3 node made by hand, or params without format). */
static void test_claim_plain_params(void **state)
{
	put(FE "/state", "1");
	put(BE "/frontend", FE);
	put(BE "/frontend-id", "3");
	put(BE "/params", "tapstripe:xen");
	put(BE "/online", "1");
	put(BE "/state", "1");
	pump();
	assert_string_equal(be_state(), "2");
}

/* Made before the tapdisk started: found when it starts. */
static void test_qdisk_there_before(void **state)
{
	td_frontend_shutdown(&T.srv.fe, stopped, NULL);
	pump();
	xen_server_fini(&T.srv);
	for (int i = 0; i < MAX_WATCHES; i++) {
		free(xs.watches[i].path);
		free(xs.watches[i].token);
		xs.watches[i].path = xs.watches[i].token = NULL;
	}
	memset(&T.srv, 0, sizeof(T.srv));
	xl_qdisk_nodes("aio:tapstripe:xen");
	pump(); /* nobody watches */
	assert_string_equal(qbe_state(), "1");
	server_start();
	assert_string_equal(qbe_state(), "2");
	frontend_init("x86_64-abi");
	assert_string_equal(qbe_state(), "4");
}

/*
 * The guest is destroyed: libxl writes our state Closed (online stays
 * 1: its "qemu bodge" for a dead qdisk frontend) and waits for the
 * driver domain to remove the directory.
 */
static void test_qdisk_guest_destroyed(void **state)
{
	qdisk_connect();
	put(QBE "/state", "6");
	pump();
	assert_int_equal(io.disconnects, 1);
	assert_non_null(get(QBE "/state")); /* not before it drained */
	drain();
	pump();
	assert_null(get(QBE "/state"));
	assert_null(get(QBE "/frontend"));
	assert_true(LIST_EMPTY(&T.srv.devs));
	assert_int_equal(nr_watches(), ROOT_WATCHES);
	/* The frontend's directory is the toolstack's to remove. */
	assert_non_null(get(FE "/backend"));
}

/* xl block-detach: online 0 and Closing; the frontend closes; removed. */
static void test_qdisk_block_detach(void **state)
{
	qdisk_connect();
	put(QBE "/online", "0");
	put(QBE "/state", "5");
	pump();
	assert_int_equal(io.disconnects, 0);
	frontend_state("5");
	frontend_state("6");
	assert_int_equal(io.disconnects, 1);
	assert_non_null(qbe_state());
	drain();
	pump();
	assert_null(qbe_state());
	assert_true(LIST_EMPTY(&T.srv.devs));
}

/* Never connected, then destroyed: removed at once. */
static void test_qdisk_destroyed_unconnected(void **state)
{
	xl_qdisk_nodes("aio:tapstripe:xen");
	pump();
	assert_string_equal(qbe_state(), "2");
	put(QBE "/state", "6");
	pump();
	assert_int_equal(io.disconnects, 0);
	assert_null(qbe_state());
	assert_true(LIST_EMPTY(&T.srv.devs));
}

/*
 * The guest's kernel closed its blkfront at power-off (we wait in
 * InitWait for it to return), then its domain is removed without libxl
 * writing our state (it read Closed in passing): removed all the same.
 */
static void test_qdisk_frontend_gone(void **state)
{
	qdisk_connect();
	frontend_state("5");
	frontend_state("6");
	drain();
	pump();
	assert_string_equal(qbe_state(), "2");
	rm_tree("/local/domain/3");
	pump();
	assert_null(qbe_state());
	assert_true(LIST_EMPTY(&T.srv.devs));
}

/*
 * A tapdisk restart under a guest of the driver domain: the claimed
 * device is released (tapstripe-pid 0) and not claimed again by its name,
 * attach names the new tapdisk (here the same process), which resumes
 * the ring and, the device being xl's, removes it when the guest is
 * destroyed.
 */
static void test_qdisk_take_over(void **state)
{
	char pid[16];

	qdisk_connect();
	put(QBE "/" XEN_KEY_TAPDISK_PID, "0");
	pump();
	assert_int_equal(io.quiesces, 1);
	drain();
	pump();
	assert_string_equal(get(QBE "/" XEN_KEY_TAPDISK_OWNER), "0");
	assert_string_equal(get(QBE "/" XEN_KEY_TAPDISK_PID), "0");
	assert_true(LIST_EMPTY(&T.srv.devs));
	assert_string_equal(qbe_state(), "4");
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	put(QBE "/" XEN_KEY_TAPDISK_PID, pid);
	pump();
	assert_int_equal(io.connects, 2);
	assert_true(io.resume);
	assert_string_equal(get(QBE "/" XEN_KEY_TAPDISK_OWNER), pid);
	put(QBE "/state", "6");
	pump();
	assert_int_equal(io.disconnects, 1);
	drain();
	pump();
	assert_null(qbe_state());
	assert_true(LIST_EMPTY(&T.srv.devs));
}

/* tap-ctl's devices are tap-ctl's to remove, even closed by force. */
static void test_vbd3_closed_kept(void **state)
{
	connect_dev();
	put(BE "/state", "6");
	pump();
	assert_int_equal(io.disconnects, 1);
	drain();
	pump();
	assert_string_equal(be_state(), "6");
	assert_false(LIST_EMPTY(&T.srv.devs));
}

/* --- resize (issue #21) -------------------------------------------------------- */

/* The vbd grows to sectors (tap-ctl resize); the frontends' answer line. */
static void grow_to(uint64_t sectors, char *line, size_t len)
{
	struct td_strbuf out, why;
	uint64_t old_sectors, new_sectors;

	td_strbuf_init(&out);
	td_strbuf_init(&why);
	mock.size_sectors = sectors;
	assert_int_equal(td_vbd_resize(T.vbd, &old_sectors, &new_sectors, &why),
			 0);
	assert_int_equal(new_sectors, sectors);
	td_frontend_resized(&T.srv.fe, &out);
	snprintf(line, len, "%.*s", (int)out.len, out.data);
	td_strbuf_free(&out);
	td_strbuf_free(&why);
}

/* The index of the first queued event for path, or -1. */
static int event_at(const char *path)
{
	for (unsigned int i = 0; i < xs.nr_events; i++)
		if (!strcmp(xs.events[i][0], path))
			return (int)i;
	return -1;
}

/*
 * Connected: "sectors" and the state written again in one transaction
 * (xen_vbd_resize), sectors first, so blkfront sees Connected and reads
 * the new size; a conflict is retried.
 */
static void test_resize_connected(void **state)
{
	char line[256];

	connect_dev();
	assert_int_equal(xs.nr_events, 0);
	xs.tx_conflicts = 2;
	grow_to(4096, line, sizeof(line));
	assert_int_equal(xs.tx_commits, 1);
	assert_int_equal(xs.tx_id, 3); /* two conflicts, then the commit */
	assert_string_equal(get(BE "/sectors"), "4096");
	assert_string_equal(be_state(), "4");
	assert_true(event_at(BE "/sectors") >= 0);
	assert_true(event_at(BE "/state") > event_at(BE "/sectors"));
	assert_non_null(strstr(line, "4096 sectors written; 1 connected"));
	pump();
	assert_string_equal(be_state(), "4"); /* still connected */
	assert_int_equal(io.disconnects, 0);
	assert_int_equal(io.connects, 1);
}

/* Not connected yet: "sectors" only, read when it connects; no state. */
static void test_resize_not_connected(void **state)
{
	char line[256];

	toolstack_attach((int)getpid());
	assert_string_equal(be_state(), "2");
	pump();
	grow_to(8192, line, sizeof(line));
	assert_int_equal(xs.tx_id, 0);
	assert_string_equal(get(BE "/sectors"), "8192");
	assert_int_equal(event_at(BE "/state"), -1);
	assert_non_null(strstr(line, "0 connected frontends told; 1 will"));
	frontend_init("x86_64-abi");
	assert_string_equal(be_state(), "4");
	assert_string_equal(get(BE "/sectors"), "8192");
}

/* A store that keeps failing: nothing half-written, the line says so. */
static void test_resize_store_fails(void **state)
{
	char line[256];

	connect_dev();
	pump();
	xs.tx_conflicts = 1000;
	grow_to(4096, line, sizeof(line));
	assert_int_equal(xs.tx_commits, 0);
	assert_string_not_equal(get(BE "/sectors"), "4096");
	assert_non_null(strstr(line, "0 connected frontends told"));
	assert_non_null(strstr(line, "some writes failed"));
	xs.tx_conflicts = 0;
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(test_advertise),
		TEST(test_read_only_mode),
		TEST(test_connect),
		TEST(test_stats_count_connected_rings),
		TEST(test_other_tapdisk),
		TEST(test_frontend_elsewhere),
		TEST(test_x86_32),
		TEST(test_refuse_other_abi),
		TEST(test_connect_error),
		TEST(test_frontend_closes),
		TEST(test_detach),
		TEST(test_detach_unconnected),
		TEST(test_removed_while_connected),
		TEST(test_ring_fatal),
		TEST(test_shutdown),
		TEST(test_shutdown_idle),
		TEST(test_report),
		TEST(test_release),
		TEST(test_take_over),
		TEST(test_take_over_not_handed_over),
		TEST(test_release_unconnected),
		TEST(test_qdisk_claim),
		TEST(test_qdisk_not_ours),
		TEST(test_claim_plain_params),
		TEST(test_qdisk_there_before),
		TEST(test_qdisk_guest_destroyed),
		TEST(test_qdisk_block_detach),
		TEST(test_qdisk_destroyed_unconnected),
		TEST(test_qdisk_frontend_gone),
		TEST(test_qdisk_take_over),
		TEST(test_vbd3_closed_kept),
		TEST(test_resize_connected),
		TEST(test_resize_not_connected),
		TEST(test_resize_store_fails),
		TEST(test_mq_advertise_connect),
		TEST(test_mq_keys_change_while_connected),
		TEST(test_mq_refused),
		TEST(test_mq_connect_fails_midway),
		TEST(test_mq_one_ring_fatal),
		TEST(test_mq_release),
		TEST(test_stats_per_queue),
		TEST(test_report_queues),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
