/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_block-stripe.c - the stripe driver over in-memory iSCSI LUNs
 * (mock-iscsi-conn.c): routing against tables written by hand for four
 * geometries, writes fanned out to every replica, stale marks made durable
 * before a degraded write completes, no mark when every replica fails,
 * reads that avoid stale replicas and fall back, flush rounds, a DOWN
 * server, the geometry gate, degraded servers (a session lost after it
 * was up: writes and flushes go on without it), discard, resync, control
 * open errors, and the lease: the decision of open (a table), refusals,
 * lease=off and the hand-over for live migration.
 *
 * rename(2) is wrapped (--wrap, the OS boundary) so that a test can hold
 * the map rewrite in the writer thread, or make it fail.  The master
 * notifier is replaced by a recorder (master_notifier_* below), and the
 * master's lease calls by a fake (master_client_* below) that grants the
 * lease unless a test scripts another answer.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "drivers/drivers.h"
#include "drivers/stripe/iscsi/iscsi-pr.h"
#include "drivers/stripe/map/map.h"
#include "drivers/stripe/stripe-int.h"
#include "master/client/client.h"
#include "master/client/notify.h"
#include "master/reply.h"
#include "tapdisk/vbd-int.h"
#include "tests/unit/drivers/stripe/mock-iscsi-conn.h"
#include "tests/unit/drivers/stripe/mock-sgio.h"
#include "tests/unit/vbd-fixture.h"

#define KiB	 1024ull
#define MiB	 (1024 * KiB)
#define IO_BYTES (64 * KiB)
#define MAX_EXP	 3
#define RUN_MAX	 2000

/* --- rename wrapper -------------------------------------------------------------- */

int __real_rename(const char *from, const char *to);
int __wrap_rename(const char *from, const char *to);

static pthread_mutex_t rn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rn_cond = PTHREAD_COND_INITIALIZER;
static bool rn_hold;
static int rn_fail;
static int rn_calls;

int __wrap_rename(const char *from, const char *to)
{
	int err;

	pthread_mutex_lock(&rn_lock);
	rn_calls++;
	while (rn_hold)
		pthread_cond_wait(&rn_cond, &rn_lock);
	err = rn_fail;
	pthread_mutex_unlock(&rn_lock);
	if (err) {
		errno = err;
		return -1;
	}
	return __real_rename(from, to);
}

static void rename_hold(bool hold)
{
	pthread_mutex_lock(&rn_lock);
	rn_hold = hold;
	pthread_cond_broadcast(&rn_cond);
	pthread_mutex_unlock(&rn_lock);
}

static void rename_fail(int err)
{
	pthread_mutex_lock(&rn_lock);
	rn_fail = err;
	pthread_mutex_unlock(&rn_lock);
}

static int rename_calls(void)
{
	int n;

	pthread_mutex_lock(&rn_lock);
	n = rn_calls;
	pthread_mutex_unlock(&rn_lock);
	return n;
}

/* --- master notifier recorder ------------------------------------------------- */

struct note {
	uint32_t c, j, r;
	bool stale;
};
static struct note notes[64];
static unsigned int nr_notes;
static int notifier_token;

int master_notifier_start(const char *master_addr, struct master_notifier **out)
{
	*out = (struct master_notifier *)&notifier_token;
	return 0;
}

void master_notifier_replica_state(struct master_notifier *n, const char *vdisk,
				   uint32_t column, uint32_t extent,
				   uint32_t replica, bool stale)
{
	if (nr_notes < 64)
		notes[nr_notes++] =
			(struct note){column, extent, replica, stale};
}

void master_notifier_stop(struct master_notifier *n)
{
}

/* --- fake master: the lease calls of stripe-lease.c --------------------------- */

static struct {
	int acquire_ret;  /* 0: granted to the caller */
	ms_status status; /* of a refusal */
	char holder[64];  /* of a refusal; "" for the caller */
	uint64_t epoch;	  /* the lease's epoch */
	bool fence_pending;
	int handover_ret; /* 0: handed over at epoch + 1 */
	unsigned int acquires, handovers;
	char last_host[64], last_to[64];
	uint64_t last_epoch;
} fm;

static int fake_client_token;

int master_client_open(const char *address,
		       const struct master_client_opts *opts,
		       struct master_client **out)
{
	assert_string_equal(address, "127.0.0.1:7700");
	/* stripe-lease.c at open, or stripe-fence.c's worker */
	assert_true(opts->timeout_ms == STRIPE_LEASE_TIMEOUT_MS ||
		    opts->timeout_ms == STRIPE_FENCE_MASTER_TIMEOUT_MS);
	*out = (struct master_client *)&fake_client_token;
	return 0;
}

void master_client_close(struct master_client *c)
{
}

const char *master_client_error(const struct master_client *c)
{
	return fm.acquire_ret == -ENOENT ? "no vdisk t1" : "";
}

static void fake_lease(ms_reply *rep, ms_status status, const char *holder,
		       uint64_t epoch)
{
	master_reply_init(rep);
	rep->status = status;
	rep->body.kind = MS_BODY_LEASE;
	rep->body.ms_body_u.lease.vdisk = strdup("t1");
	rep->body.ms_body_u.lease.holder = strdup(holder);
	rep->body.ms_body_u.lease.previous = strdup("host-old");
	rep->body.ms_body_u.lease.epoch = epoch;
	rep->body.ms_body_u.lease.fence_pending = fm.fence_pending;
}

int master_call_lease_acquire(struct master_client *c, const char *vdisk,
			      const char *host, ms_reply *rep)
{
	fm.acquires++;
	snprintf(fm.last_host, sizeof(fm.last_host), "%s", host);
	if (fm.acquire_ret && !fm.holder[0]) { /* a transport error */
		master_reply_init(rep);
		return fm.acquire_ret;
	}
	fake_lease(rep, fm.acquire_ret ? fm.status : MS_OK,
		   fm.holder[0] ? fm.holder : host, fm.epoch);
	return fm.acquire_ret;
}

/* Runs in the hand-over's thread: reads fm only. */
int master_call_lease_handover(struct master_client *c, const char *vdisk,
			       const char *host, uint64_t epoch, const char *to,
			       ms_reply *rep)
{
	fm.handovers++;
	snprintf(fm.last_to, sizeof(fm.last_to), "%s", to);
	fm.last_epoch = epoch;
	if (fm.handover_ret) {
		master_reply_init(rep);
		return fm.handover_ret;
	}
	fake_lease(rep, MS_OK, to, epoch + 1);
	return 0;
}

/*
 * stripe-fence.c's questions, from its worker thread: the lease as
 * acquired (the caller at fm.epoch) unless show_holder says otherwise;
 * show_ret a transport error; hosts_ret the host list's answer
 * (-EPROTONOSUPPORT: a master without it), fenced_host listed.
 */
static struct {
	int show_ret;
	char show_holder[64];
	int hosts_ret;
	char fenced_host[64];
	unsigned int shows;
} fq;

int master_call_lease_show(struct master_client *c, const char *vdisk,
			   ms_reply *rep)
{
	fq.shows++;
	if (fq.show_ret) {
		master_reply_init(rep);
		return fq.show_ret;
	}
	fake_lease(rep, MS_OK,
		   fq.show_holder[0] ? fq.show_holder : fm.last_host, fm.epoch);
	return 0;
}

int master_call_host_list(struct master_client *c, ms_reply *rep)
{
	master_reply_init(rep);
	if (fq.hosts_ret)
		return fq.hosts_ret;
	rep->body.kind = MS_BODY_HOSTS;
	if (fq.fenced_host[0]) {
		ms_fenced_host *h = calloc(1, sizeof(*h));

		h->host = strdup(fq.fenced_host);
		h->by = strdup("host-b");
		h->vdisk = strdup("t1");
		h->epoch = 8;
		rep->body.ms_body_u.hosts.hosts_len = 1;
		rep->body.ms_body_u.hosts.hosts_val = h;
	}
	return 0;
}

/* --- geometries, written out by hand ------------------------------------------ */

struct slot_row {
	uint32_t c, j, r, server;
	uint64_t lba;
	bool stale;
};

struct geom {
	uint64_t size, unit, extent;
	uint32_t columns, replicas, nr_servers;
	uint32_t block[4];
	const struct slot_row *slots;
	unsigned int nr_slots;
};

/* G1: S=1, U=4K, E=16K, R=1, V=32K: J=2, one server. */
static const struct slot_row g1_slots[] = {
	{0, 0, 0, 0, 100, false},
	{0, 1, 0, 0, 300, false},
};
static const struct geom g1 = {32 * KiB, 4 * KiB, 16 * KiB, 1, 1,
			       1,	 {512},	  g1_slots, 2};

/*
 * G2: S=2, U=64K, E=128K, R=2, V=512K: 4 rows of 128K, columns of 256K,
 * J=2.  Server 1 has 4 KiB blocks (so the disk's sector size is 4 KiB).
 */
static const struct slot_row g2_slots[] = {
	{0, 0, 0, 0, 0, false},	  {0, 0, 1, 1, 0, false},
	{0, 1, 0, 1, 32, false},  {0, 1, 1, 2, 0, false},
	{1, 0, 0, 2, 256, false}, {1, 0, 1, 0, 256, false},
	{1, 1, 0, 0, 512, false}, {1, 1, 1, 1, 64, false},
};
static const struct geom g2 = {
	512 * KiB, 64 * KiB, 128 * KiB, 2, 2, 3, {512, 4096, 512}, g2_slots, 8,
};

/* G2 grown to 768K (J=3): its slots and one more extent per column. */
static const struct slot_row g2_grown_slots[] = {
	{0, 0, 0, 0, 0, false},	  {0, 0, 1, 1, 0, false},
	{0, 1, 0, 1, 32, false},  {0, 1, 1, 2, 0, false},
	{0, 2, 0, 2, 512, false}, {0, 2, 1, 0, 768, false},
	{1, 0, 0, 2, 256, false}, {1, 0, 1, 0, 256, false},
	{1, 1, 0, 0, 512, false}, {1, 1, 1, 1, 64, false},
	{1, 2, 0, 1, 96, false},  {1, 2, 1, 2, 768, false},
};
static const struct geom g2_grown = {
	768 * KiB, 64 * KiB,	     128 * KiB,	     2,	 2,
	3,	   {512, 4096, 512}, g2_grown_slots, 12,
};

/* G3: S=4, U=1M, E=2M, R=3, V=8M: J=1, 4 servers, 3 extents each. */
static const struct slot_row g3_slots[] = {
	{0, 0, 0, 0, 0, false},	   {0, 0, 1, 1, 0, false},
	{0, 0, 2, 2, 0, false},	   {1, 0, 0, 1, 4096, false},
	{1, 0, 1, 2, 4096, false}, {1, 0, 2, 3, 0, false},
	{2, 0, 0, 2, 8192, false}, {2, 0, 1, 3, 4096, false},
	{2, 0, 2, 0, 4096, false}, {3, 0, 0, 3, 8192, false},
	{3, 0, 1, 0, 8192, false}, {3, 0, 2, 1, 8192, false},
};
static const struct geom g3 = {
	8 * MiB, 1 * MiB, 2 * MiB, 4, 3, 4, {512, 512, 512, 512}, g3_slots, 12,
};

/*
 * G4: S=3, U=16K, E=32K, R=1, V=100K: ceil(100K / 48K) = 3 rows, columns
 * of 48K, J=2; the last stripe row is partial.
 */
static const struct slot_row g4_slots[] = {
	{0, 0, 0, 0, 0, false}, {0, 1, 0, 0, 64, false},
	{1, 0, 0, 1, 0, false}, {1, 1, 0, 1, 64, false},
	{2, 0, 0, 2, 0, false}, {2, 1, 0, 2, 64, false},
};
static const struct geom g4 = {
	100 * KiB, 16 * KiB, 32 * KiB, 3, 1, 3, {512, 512, 512}, g4_slots, 6,
};

/*
 * G5: S=3, U=64K, E=1M, R=2, V=4M: 64 units, ceil(4M / 192K) = 22 rows,
 * columns of 1408K, J=2; the last row holds column 0 only.  Server 2 has
 * 4 KiB blocks: 1 MiB is 2048 blocks of 512, 256 of 4096.
 */
static const struct slot_row g5_slots[] = {
	{0, 0, 0, 0, 0, false},	   {0, 0, 1, 1, 0, false},
	{0, 1, 0, 2, 0, false},	   {0, 1, 1, 3, 0, false},
	{1, 0, 0, 1, 2048, false}, {1, 0, 1, 2, 256, false},
	{1, 1, 0, 3, 2048, false}, {1, 1, 1, 0, 2048, false},
	{2, 0, 0, 2, 512, false},  {2, 0, 1, 3, 4096, false},
	{2, 1, 0, 0, 4096, false}, {2, 1, 1, 1, 4096, false},
};
static const struct geom g5 = {
	4 * MiB,  64 * KiB, 1 * MiB, 3, 2, 4, {512, 512, 4096, 512},
	g5_slots, 12,
};

/* One I/O and where each replica must see it (server, LBA, blocks). */
struct route_row {
	uint64_t off;
	uint32_t len;
	unsigned int nr_exp;
	struct {
		uint32_t server;
		uint64_t lba;
		uint32_t blocks;
	} exp[MAX_EXP];
};

static const struct route_row g1_routes[] = {
	{0, 4096, 1, {{0, 100, 8}}},
	/* k=5, column offset 20K: extent 1, 4K in */
	{20 * KiB, 4096, 1, {{0, 308, 8}}},
	/* k=3, 12K+512: extent 0, 25 blocks in */
	{12 * KiB + 512, 512, 1, {{0, 125, 1}}},
};

static const struct route_row g2_routes[] = {
	{0, 4096, 2, {{0, 0, 8}, {1, 0, 1}}},
	/* k=1: column 1, 4K into extent 0 */
	{68 * KiB, 8192, 2, {{2, 264, 16}, {0, 264, 16}}},
	/* k=4: column 0, row 2: extent 1, 12K in */
	{268 * KiB, 4096, 2, {{1, 35, 1}, {2, 24, 8}}},
	/* k=7: column 1, row 3: extent 1, 64K in */
	{448 * KiB, 64 * KiB, 2, {{0, 640, 128}, {1, 80, 16}}},
};

static const struct route_row g3_routes[] = {
	/* k=5: column 1, row 1: 1M+512 into its extent */
	{5 * MiB + 512, 512, 3, {{1, 6145, 1}, {2, 6145, 1}, {3, 2049, 1}}},
	/* k=3: column 3, row 0, 64K in */
	{3 * MiB + 64 * KiB,
	 32 * KiB,
	 3,
	 {{3, 8320, 64}, {0, 8320, 64}, {1, 8320, 64}}},
	/* k=6: column 2, row 1: 1M in */
	{6 * MiB, 4096, 3, {{2, 10240, 8}, {3, 6144, 8}, {0, 6144, 8}}},
};

static const struct route_row g4_routes[] = {
	/* k=6: column 0, row 2: extent 1 */
	{96 * KiB, 4096, 1, {{0, 64, 8}}},
	/* k=2: column 2, row 0, 8K in */
	{40 * KiB, 8192, 1, {{2, 16, 16}}},
	/* the partial last row: k=6, 3K in */
	{99 * KiB, 1024, 1, {{0, 70, 2}}},
};

static const struct route_row g5_routes[] = {
	/* k=0: column 0, the unit's last 4K: 61440 into extent 0 */
	{60 * KiB, 4096, 2, {{0, 120, 8}, {1, 120, 8}}},
	/* k=4: column 1, row 1, 8K in: 73728 into extent 0 */
	{264 * KiB, 4096, 2, {{1, 2192, 8}, {2, 274, 1}}},
	/* k=50: column 2, row 16: the first byte of extent 1 */
	{3200 * KiB, 64 * KiB, 2, {{0, 4096, 128}, {1, 4096, 128}}},
	/* k=63, the last unit (row 21, column 0): the disk's last 4K,
	 * 1437696 into the column, 389120 into extent 1 */
	{4 * MiB - 4096, 4096, 2, {{2, 95, 1}, {3, 760, 8}}},
};

/* --- fixture ------------------------------------------------------------------ */

static struct {
	char dir[64];
	char path[96];
	const struct geom *g;
	unsigned char buf[NR_IOS][IO_BYTES] __attribute__((aligned(4096)));
	struct iovec iov[NR_IOS];
	char device[4][128]; /* a server's "device" key, "" when none */
} ts;

static const struct td_driver_ops *const table[] = {&td_stripe_ops, NULL};

static int stripe_setup(void **state)
{
	setup(state);
	mock_iscsi_reset();
	mock_sgio_reset();
	rename_hold(false);
	rename_fail(0);
	nr_notes = 0;
	memset(&fm, 0, sizeof(fm));
	fm.epoch = 7;
	memset(&fq, 0, sizeof(fq));
	fq.hosts_ret = -EPROTONOSUPPORT;
	setenv("TAPSTRIPE_HOST_ID", "host-a", 1);
	snprintf(ts.dir, sizeof(ts.dir), "/tmp/test-stripe.XXXXXX");
	assert_non_null(mkdtemp(ts.dir));
	snprintf(ts.path, sizeof(ts.path), "%s/t1.map", ts.dir);
	return 0;
}

static int stripe_teardown(void **state)
{
	char tmp[128];

	rename_hold(false);
	teardown(state);
	for (unsigned int s = 0; s < 4; s++)
		if (!strncmp(ts.device[s], ts.dir, strlen(ts.dir)))
			unlink(ts.device[s]);
	memset(ts.device, 0, sizeof(ts.device));
	unlink(ts.path);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", ts.path, (long)getpid());
	unlink(tmp);
	snprintf(tmp, sizeof(tmp), "%s.al", ts.path);
	unlink(tmp);
	rmdir(ts.dir);
	return 0;
}

static void make_map(const struct geom *g, const bool *stale)
{
	struct stripe_map m;
	struct stripe_map_error err;

	memset(&m, 0, sizeof(m));
	snprintf(m.vdisk, sizeof(m.vdisk), "t1");
	snprintf(m.master, sizeof(m.master), "127.0.0.1:7700");
	m.size_bytes = g->size;
	m.stripe_unit_bytes = g->unit;
	m.extent_size_bytes = g->extent;
	m.columns = g->columns;
	m.replicas = g->replicas;
	assert_int_equal(stripe_layout_extents_per_column(
				 g->size, g->unit, g->columns, g->extent,
				 &m.extents_per_column),
			 0);
	assert_int_equal(stripe_map_alloc(&m, g->nr_servers), 0);
	assert_int_equal(stripe_map_nr_slots(&m), g->nr_slots);
	for (uint32_t s = 0; s < g->nr_servers; s++) {
		struct stripe_map_server *ms = &m.servers[s];

		snprintf(ms->address, sizeof(ms->address), "10.0.0.%u", s + 1);
		snprintf(ms->portal, sizeof(ms->portal), "10.0.0.%u:3260",
			 s + 1);
		snprintf(ms->target, sizeof(ms->target), "iqn.2026-01.test:s%u",
			 s);
		ms->lun = 1;
		ms->block_size = g->block[s];
		mock_iscsi.setup[s].block_size = g->block[s];
		snprintf(ms->device, sizeof(ms->device), "%s", ts.device[s]);
	}
	for (unsigned int i = 0; i < g->nr_slots; i++) {
		const struct slot_row *row = &g->slots[i];
		struct stripe_map_replica *rep =
			stripe_map_slot(&m, row->c, row->j, row->r);

		rep->server = row->server;
		rep->lba = row->lba;
		if (row->stale || (stale && stale[i]))
			stripe_map_slot_mark_all(
				&m, stripe_map_slot_index(&m, row->c, row->j,
							  row->r));
	}
	assert_int_equal(stripe_map_write(ts.path, &m, &err), 0);
	stripe_map_free(&m);
	ts.g = g;
}

static int open_stripe(const char *opts)
{
	char chain[256];
	struct td_vbd_params p = {.name = "test", .chain = chain};

	snprintf(chain, sizeof(chain), "stripe:%s%s", ts.path,
		 opts ? opts : "");
	return td_vbd_open(fx->loop, table, &p, &fx->vbd);
}

static void start(const struct geom *g, const bool *stale, const char *opts)
{
	make_map(g, stale);
	assert_int_equal(open_stripe(opts), 0);
}

static struct stripe_dev *dev(void)
{
	return fx->vbd->drivers[0].data;
}

#define RUN_UNTIL(cond)                                         \
	do {                                                    \
		for (int n_ = 0; !(cond) && n_ < RUN_MAX; n_++) \
			td_loop_run_once(fx->loop, 2);          \
		assert_true(cond);                              \
	} while (0)

static struct td_vbd_io *io_prep(int i, enum td_op op, uint64_t off,
				 uint32_t len, uint32_t flags)
{
	struct td_vbd_io *io =
		mkio(i, op, off / TD_SECTOR_SIZE, len / TD_SECTOR_SIZE);

	fx->calls[i] = 0;
	fx->err[i] = 0;
	io->flags = flags;
	if (op == TD_OP_READ || op == TD_OP_WRITE) {
		ts.iov[i].iov_base = ts.buf[i];
		ts.iov[i].iov_len = len;
		io->iov = &ts.iov[i];
		io->iovcnt = 1;
	}
	return io;
}

static void submit(int i, enum td_op op, uint64_t off, uint32_t len,
		   uint32_t flags)
{
	assert_int_equal(
		td_vbd_submit(fx->vbd, io_prep(i, op, off, len, flags)), 0);
}

static int do_io(int i, enum td_op op, uint64_t off, uint32_t len)
{
	submit(i, op, off, len, 0);
	RUN_UNTIL(fx->calls[i]);
	assert_int_equal(fx->calls[i], 1);
	return fx->err[i];
}

static void fill(int i, unsigned int seed, uint32_t len)
{
	for (uint32_t b = 0; b < len; b++)
		ts.buf[i][b] = (unsigned char)(seed * 31 + b * 7 + (b >> 9));
}

/* How many regions of a replica the file calls dirty. */
static uint32_t file_dirty(uint32_t c, uint32_t j, uint32_t r)
{
	struct stripe_map m;
	struct stripe_map_error err;
	uint32_t n;

	assert_int_equal(stripe_map_read(ts.path, &m, &err), 0);
	n = stripe_map_bits_count(
		stripe_map_slot_dirty(&m, stripe_map_slot_index(&m, c, j, r)),
		stripe_map_region_count(&m));
	stripe_map_free(&m);
	return n;
}

/* The replica state the file holds now (read without its lock). */
static bool file_stale(uint32_t c, uint32_t j, uint32_t r)
{
	struct stripe_map m;
	struct stripe_map_error err;
	bool stale;

	assert_int_equal(stripe_map_read(ts.path, &m, &err), 0);
	stale = stripe_map_slot(&m, c, j, r)->stale;
	stripe_map_free(&m);
	return stale;
}

static unsigned int nr_file_stale(void)
{
	struct stripe_map m;
	struct stripe_map_error err;
	unsigned int n = 0;

	assert_int_equal(stripe_map_read(ts.path, &m, &err), 0);
	for (size_t i = 0; i < stripe_map_nr_slots(&m); i++)
		n += m.slots[i].stale;
	stripe_map_free(&m);
	return n;
}

/* --- routing ------------------------------------------------------------------ */

static void check_routes(const struct geom *g, const struct route_row *rows,
			 unsigned int nr_rows)
{
	start(g, NULL, NULL);
	for (unsigned int i = 0; i < nr_rows; i++) {
		const struct route_row *row = &rows[i];
		unsigned int from = mock_iscsi.nr_log;

		fill(0, i + 1, row->len);
		assert_int_equal(do_io(0, TD_OP_WRITE, row->off, row->len), 0);
		assert_int_equal(mock_iscsi.nr_log - from, row->nr_exp);
		for (unsigned int e = 0; e < row->nr_exp; e++) {
			const struct mock_iscsi_rec *rec =
				&mock_iscsi.log[from + e];
			uint32_t bs = g->block[row->exp[e].server];

			assert_int_equal(rec->op, ISCSI_CMD_WRITE);
			assert_int_equal(rec->conn, row->exp[e].server);
			assert_int_equal(rec->lba, row->exp[e].lba);
			assert_int_equal(rec->nr_blocks, row->exp[e].blocks);
			assert_memory_equal(
				mock_iscsi_data(row->exp[e].server) +
					row->exp[e].lba * bs,
				ts.buf[0], row->len);
		}
		/* ... and it reads back from one replica. */
		from = mock_iscsi.nr_log;
		assert_int_equal(do_io(1, TD_OP_READ, row->off, row->len), 0);
		assert_int_equal(mock_iscsi.nr_log - from, 1);
		assert_memory_equal(ts.buf[1], ts.buf[0], row->len);
	}
}

static void test_routes_g1(void **state)
{
	check_routes(&g1, g1_routes, 3);
	assert_int_equal(td_vbd_get_info(fx->vbd)->sector_size, 512);
}

static void test_routes_g2(void **state)
{
	const struct td_disk_info *info;

	check_routes(&g2, g2_routes, 4);
	info = td_vbd_get_info(fx->vbd);
	assert_int_equal(info->sector_size, 4096); /* server 1's blocks */
	assert_int_equal(info->size_sectors, 1024);
	assert_int_equal(info->boundary_sectors, 128);
}

static void test_routes_g3(void **state)
{
	check_routes(&g3, g3_routes, 3);
}

static void test_routes_g4(void **state)
{
	check_routes(&g4, g4_routes, 3);
}

static void test_routes_g5(void **state)
{
	check_routes(&g5, g5_routes, 4);
	assert_int_equal(td_vbd_get_info(fx->vbd)->sector_size, 4096);
}

/* A write across a stripe unit is split by the core: two columns. */
static void test_split_at_unit(void **state)
{
	unsigned int from, a, b;

	start(&g4, NULL, NULL);
	from = mock_iscsi.nr_log;
	fill(0, 9, 8192);
	assert_int_equal(do_io(0, TD_OP_WRITE, 12 * KiB, 8192), 0);
	assert_int_equal(mock_iscsi.nr_log - from, 2);
	/* The two halves may reach their sessions in either order. */
	a = mock_iscsi.log[from].conn == 0 ? from : from + 1;
	b = a == from ? from + 1 : from;
	assert_int_equal(mock_iscsi.log[a].conn, 0);
	assert_int_equal(mock_iscsi.log[a].lba, 24);
	assert_int_equal(mock_iscsi.log[a].nr_blocks, 8);
	assert_int_equal(mock_iscsi.log[b].conn, 1);
	assert_int_equal(mock_iscsi.log[b].lba, 0);
	assert_int_equal(mock_iscsi.log[b].nr_blocks, 8);
}

static void test_fua_to_every_replica(void **state)
{
	unsigned int from;

	start(&g3, NULL, NULL);
	from = mock_iscsi.nr_log;
	submit(0, TD_OP_WRITE, 0, 4096, TD_REQ_FUA);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	assert_int_equal(mock_iscsi.nr_log - from, 3);
	for (unsigned int e = 0; e < 3; e++)
		assert_true(mock_iscsi.log[from + e].fua);
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	for (unsigned int e = 0; e < 3; e++)
		assert_false(mock_iscsi.log[from + e].fua);
}

/* --- replication ----------------------------------------------------------------- */

static bool stale_at_completion;
static unsigned int notes_at_completion;

static void io_done_check_file(struct td_vbd_io *io, int err)
{
	stale_at_completion = file_stale(0, 0, 1);
	notes_at_completion = nr_notes;
	io_done(io, err);
}

static void test_replica_failure_marked_before_completion(void **state)
{
	struct stripe_map m;
	struct stripe_map_error merr;
	int lock_fd, calls;
	unsigned int from;

	start(&g2, NULL, NULL);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 1);
	calls = rename_calls();
	fill(0, 3, 4096);
	io_prep(0, TD_OP_WRITE, 0, 4096, 0)->cb = io_done_check_file;
	assert_int_equal(td_vbd_submit(fx->vbd, &fx->io[0]), 0);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	assert_true(stale_at_completion); /* durable before completion */
	assert_int_equal(notes_at_completion, 1);
	assert_int_equal(notes[0].c, 0);
	assert_int_equal(notes[0].j, 0);
	assert_int_equal(notes[0].r, 1);
	assert_true(notes[0].stale);
	assert_int_equal(rename_calls(), calls + 1);
	assert_int_equal(nr_file_stale(), 1);
	/* tapdisk still holds the lock of the rewritten file */
	assert_int_equal(stripe_map_open(ts.path, &m, &lock_fd, &merr), -EBUSY);
	assert_int_equal(dev()->replica_write_errors, 1);

	/* The stale replica is read no more, written no more. */
	from = mock_iscsi.nr_log;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(do_io(1, TD_OP_READ, 0, 4096), 0);
		assert_memory_equal(ts.buf[1], ts.buf[0], 4096);
	}
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_READ, from), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_READ, from), 4);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_WRITE, from), 1);
	/* Other extents on server 1 are untouched. */
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 1);
}

static void test_all_replicas_fail_mark_none(void **state)
{
	int calls;

	start(&g2, NULL, NULL);
	mock_iscsi_fail(0, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 1);
	mock_iscsi_fail(1, -EROFS, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 1);
	calls = rename_calls();
	assert_true(do_io(0, TD_OP_WRITE, 0, 4096) < 0);
	RUN_UNTIL(true);
	assert_int_equal(rename_calls(), calls);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(nr_notes, 0);
	/* both replicas are still live */
	assert_int_equal(stripe_live_replicas(dev(), 0, 0), 2);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
}

/*
 * Two writes to one extent: W1 fails on replica 0, W2 on replica 1.  W1
 * marks replica 0; W2 then has no live replica that succeeded and fails,
 * and replica 1, the last good copy, is never marked.
 */
static void test_crossed_failures_keep_a_replica(void **state)
{
	unsigned int from;

	start(&g2, NULL, NULL);
	mock_iscsi_hold(0, true);
	mock_iscsi_hold(1, true);
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	submit(1, TD_OP_WRITE, 8192, 4096, 0);
	RUN_UNTIL(mock_iscsi_nr_held(0) == 2 && mock_iscsi_nr_held(1) == 2);
	mock_iscsi_release_first(0, -EIO); /* W1 on replica 0 */
	mock_iscsi_release_first(0, 0);	   /* W2 on replica 0 */
	mock_iscsi_release_first(1, 0);	   /* W1 on replica 1 */
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	mock_iscsi_release_first(1, -EIO); /* W2 on replica 1 */
	RUN_UNTIL(fx->calls[1]);
	/* W2's region is clean on replica 0, which took it: each replica
	 * misses one region, the other one has it. */
	assert_int_equal(fx->err[1], 0);
	assert_true(file_stale(0, 0, 0));
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(file_dirty(0, 0, 0), 1);
	assert_int_equal(file_dirty(0, 0, 1), 1);
	assert_true(stripe_slot_has_source(dev(), 0));
	assert_true(stripe_slot_has_source(dev(), 1));
	/* Each write reads back from the replica that has it. */
	mock_iscsi_hold(0, false);
	mock_iscsi_hold(1, false);
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(2, TD_OP_READ, 0, 4096), 0);
	assert_int_equal(do_io(3, TD_OP_READ, 8192, 4096), 0);
	assert_int_equal(mock_iscsi.nr_log - from, 2);
	assert_int_equal(mock_iscsi.log[from].conn, 1);
	assert_int_equal(mock_iscsi.log[from + 1].conn, 0);
}

/* Writes may not be acknowledged while a mark they depend on is pending. */
static void test_writes_wait_for_durable_mark(void **state)
{
	unsigned int from;

	start(&g2, NULL, NULL);
	rename_hold(true);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 1);
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	for (int i = 0; i < 50; i++)
		td_loop_run_once(fx->loop, 1);
	assert_int_equal(fx->calls[0], 0); /* its replica mark is held */
	from = mock_iscsi.nr_log;
	submit(1, TD_OP_WRITE, 0, 4096, 0); /* the same region */
	for (int i = 0; i < 50; i++)
		td_loop_run_once(fx->loop, 1);
	assert_int_equal(mock_iscsi.nr_log - from, 1); /* replica 0 only */
	assert_int_equal(mock_iscsi.log[from].conn, 0);
	assert_int_equal(fx->calls[1], 0);
	/* a write to another extent is not held back */
	assert_int_equal(do_io(2, TD_OP_WRITE, 64 * KiB, 4096), 0);
	rename_hold(false);
	RUN_UNTIL(fx->calls[0] && fx->calls[1]);
	assert_int_equal(fx->err[0], 0);
	assert_int_equal(fx->err[1], 0);
	assert_true(file_stale(0, 0, 1));
}

/* A failed rewrite fails the writes that needed it; a later one retries. */
static void test_mark_rewrite_failure(void **state)
{
	start(&g2, NULL, NULL);
	rename_fail(ENOSPC);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 1);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), -EIO);
	assert_int_equal(dev()->stale.rewrite_errors, 1);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(nr_notes, 0);
	rename_fail(0);
	/* A write that misses the same region asks for the mark again. */
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(nr_notes, 1);
}

/* --- reads ------------------------------------------------------------------------- */

static const bool g2_stale_001[8] = {false, true};

static void test_reads_avoid_stale(void **state)
{
	unsigned int from;

	start(&g2, g2_stale_001, NULL);
	from = mock_iscsi.nr_log;
	for (int i = 0; i < 6; i++)
		assert_int_equal(do_io(0, TD_OP_READ, 0, 4096), 0);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_READ, from), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_READ, from), 6);
	/* live replicas share the reads: extent (0, 1) on servers 1, 2 */
	from = mock_iscsi.nr_log;
	for (int i = 0; i < 4; i++)
		assert_int_equal(do_io(0, TD_OP_READ, 268 * KiB, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_READ, from), 2);
	assert_int_equal(mock_iscsi_count(2, ISCSI_CMD_READ, from), 2);
}

static void test_read_fallback(void **state)
{
	unsigned int from;

	start(&g2, NULL, NULL);
	fill(0, 5, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_READ), 0);
	from = mock_iscsi.nr_log;
	for (int i = 0; i < 4; i++) {
		memset(ts.buf[1], 0, 4096);
		assert_int_equal(do_io(1, TD_OP_READ, 268 * KiB, 4096), 0);
		assert_memory_equal(ts.buf[1], ts.buf[0], 4096);
	}
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_READ, from), 2);
	assert_int_equal(mock_iscsi_count(2, ISCSI_CMD_READ, from), 4);
	assert_int_equal(dev()->read_fallbacks, 2);
	/* read errors mark nothing; with every replica failing, EIO */
	mock_iscsi_fail(2, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_READ), 0);
	assert_int_equal(do_io(1, TD_OP_READ, 268 * KiB, 4096), -EIO);
	assert_int_equal(nr_file_stale(), 0);
}

/* --- flush ---------------------------------------------------------------------- */

static void test_flush_every_server(void **state)
{
	unsigned int from;

	start(&g3, NULL, NULL);
	from = mock_iscsi.nr_log;
	mock_iscsi_hold(2, true);
	submit(0, TD_OP_FLUSH, 0, 0, 0);
	RUN_UNTIL(mock_iscsi_nr_held(2) == 1);
	for (int i = 0; i < 20; i++)
		td_loop_run_once(fx->loop, 0);
	assert_int_equal(fx->calls[0], 0); /* server 2 has not answered */
	for (unsigned int s = 0; s < 4; s++)
		assert_int_equal(mock_iscsi_count(s, ISCSI_CMD_SYNC, from), 1);
	/* flushes during a round wait for the next one, which covers them */
	submit(1, TD_OP_FLUSH, 0, 0, 0);
	submit(2, TD_OP_FLUSH, 0, 0, 0);
	mock_iscsi_hold(2, false);
	mock_iscsi_release(2, 0);
	RUN_UNTIL(fx->calls[0] && fx->calls[1] && fx->calls[2]);
	assert_int_equal(fx->err[0] | fx->err[1] | fx->err[2], 0);
	for (unsigned int s = 0; s < 4; s++)
		assert_int_equal(mock_iscsi_count(s, ISCSI_CMD_SYNC, from), 2);
}

/* Server 2 holds only stale replicas: it is not flushed. */
static const bool g2_stale_server2[8] = {false, false, false, true,
					 true,	false, false, false};

static void test_flush_skips_stale_only_server(void **state)
{
	unsigned int from;

	start(&g2, g2_stale_server2, NULL);
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_SYNC, from), 1);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_SYNC, from), 1);
	assert_int_equal(mock_iscsi_count(2, ISCSI_CMD_SYNC, from), 0);
}

/* A failed SYNCHRONIZE CACHE: its replicas are marked where a peer synced. */
static void test_flush_failure_marks_replicas(void **state)
{
	start(&g2, NULL, NULL);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_SYNC), 1);
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), 0);
	assert_true(file_stale(0, 0, 1));
	assert_true(file_stale(0, 1, 0));
	assert_true(file_stale(1, 1, 1));
	assert_int_equal(nr_file_stale(), 3);
}

static void test_flush_failure_unreplicated(void **state)
{
	start(&g4, NULL, NULL);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_SYNC), 1);
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), -EIO);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), 0);
}

/* --- fencing (stripe-fence.c; issue #18) ---------------------------------------- */

static enum stripe_fence_action decide(bool hb, uint32_t gb, bool kb, bool ha,
				       uint32_t ga, bool ka,
				       enum stripe_fence_verdict v)
{
	struct stripe_fence_view view = {
		.have_before = hb,
		.gen_before = gb,
		.key_before = kb,
		.have_after = ha,
		.gen_after = ga,
		.key_after = ka,
		.verdict = v,
	};

	return stripe_fence_decide(&view);
}

static void test_fence_decide(void **state)
{
	const enum stripe_fence_verdict N = FENCE_VERDICT_NONE;

	/* READ KEYS before: our key there -> REGISTER; absent -> master */
	assert_int_equal(decide(true, 7, true, false, 0, false, N),
			 FENCE_DO_REGISTER);
	assert_int_equal(decide(true, 7, false, false, 0, false, N),
			 FENCE_DO_ASK_MASTER);
	assert_int_equal(decide(false, 0, false, false, 0, false, N),
			 FENCE_DO_ASK_MASTER);
	/* after our REGISTER: g + 1 and the key -> reserve */
	assert_int_equal(decide(true, 7, true, true, 8, true, N),
			 FENCE_DO_RESERVE);
	/* the generation moved by more than one, or the key vanished */
	assert_int_equal(decide(true, 7, true, true, 9, true, N),
			 FENCE_DO_ASK_MASTER);
	assert_int_equal(decide(true, 7, true, true, 7, true, N),
			 FENCE_DO_ASK_MASTER);
	assert_int_equal(decide(true, 7, true, true, 8, false, N),
			 FENCE_DO_ASK_MASTER);
	assert_int_equal(decide(true, UINT32_MAX, true, true, 0, true, N),
			 FENCE_DO_RESERVE); /* the generation wraps */
	/* the master's verdict decides whatever the keys said */
	assert_int_equal(
		decide(true, 7, false, false, 0, false, FENCE_VERDICT_HOLDER),
		FENCE_DO_REGISTER_ASKED);
	assert_int_equal(
		decide(true, 7, false, false, 0, false, FENCE_VERDICT_FENCED),
		FENCE_DO_REFUSE);
	assert_int_equal(
		decide(true, 7, true, true, 9, true, FENCE_VERDICT_UNREACHABLE),
		FENCE_DO_WAIT);
}

static enum stripe_fence_verdict verdict(int lease_err, const char *holder,
					 uint64_t epoch, bool pending,
					 int hosts_err, const char *by)
{
	struct stripe_fence_answer a = {
		.lease_err = lease_err,
		.holder = holder,
		.epoch = epoch,
		.fence_pending = pending,
		.hosts_err = hosts_err,
		.fenced_by = by,
		.fenced_epoch = 4,
	};
	char why[256];
	enum stripe_fence_verdict v =
		stripe_fence_verdict_of(&a, "hostA", 3, why, sizeof(why));

	assert_true((v == FENCE_VERDICT_HOLDER) == !why[0]);
	return v;
}

static void test_fence_verdict(void **state)
{
	assert_int_equal(verdict(0, "hostA", 3, false, 0, NULL),
			 FENCE_VERDICT_HOLDER);
	/* a master without MS_HOST_LIST: no fenced hosts */
	assert_int_equal(verdict(0, "hostA", 3, false, -EPROTONOSUPPORT, NULL),
			 FENCE_VERDICT_HOLDER);
	assert_int_equal(verdict(0, "hostB", 4, false, 0, NULL),
			 FENCE_VERDICT_FENCED);
	assert_int_equal(verdict(0, "hostA", 4, false, 0, NULL),
			 FENCE_VERDICT_FENCED); /* a newer epoch */
	assert_int_equal(verdict(0, "", 3, false, 0, NULL),
			 FENCE_VERDICT_FENCED); /* released */
	assert_int_equal(verdict(0, "hostA", 3, true, 0, NULL),
			 FENCE_VERDICT_FENCED);
	assert_int_equal(verdict(0, "hostA", 3, false, 0, "hostB"),
			 FENCE_VERDICT_FENCED);
	assert_int_equal(verdict(-ENOENT, NULL, 0, false, 0, NULL),
			 FENCE_VERDICT_FENCED);
	assert_int_equal(verdict(-ECONNREFUSED, NULL, 0, false, 0, NULL),
			 FENCE_VERDICT_UNREACHABLE);
	assert_int_equal(verdict(-ETIMEDOUT, NULL, 0, false, 0, NULL),
			 FENCE_VERDICT_UNREACHABLE);
	assert_int_equal(verdict(0, "hostA", 3, false, -ECONNRESET, NULL),
			 FENCE_VERDICT_UNREACHABLE);
}

/* EACCES on one replica: the write fails, nothing is marked stale. */
static void test_fenced_write_marks_nothing(void **state)
{
	int calls;

	start(&g2, NULL, NULL);
	mock_iscsi_fail(1, -EACCES, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 1);
	calls = rename_calls();
	fill(0, 3, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), -EACCES);
	RUN_UNTIL(true);
	assert_int_equal(rename_calls(), calls);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(nr_notes, 0);
	assert_int_equal(stripe_live_replicas(dev(), 0, 0), 2);
	assert_int_equal(dev()->replica_write_errors, 0);
	assert_int_equal(dev()->writes_degraded, 0);
	assert_int_equal(dev()->reservation_conflicts, 1);
	assert_int_equal(dev()->servers[1].fence.reservation_conflicts, 1);
}

/* A FENCED connection: writes, flushes and reads fail with EACCES, are
 * never skipped as degraded, and mark nothing. */
static void test_fenced_server_fails_cleanly(void **state)
{
	start(&g2, NULL, ",degraded_grace_ms=0");
	fill(0, 4, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	mock_iscsi_set_state(1, ISCSI_CONN_FENCED);
	assert_false(stripe_server_degraded(dev(), &dev()->servers[1]));
	for (int i = 0; i < 3; i++)
		assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), -EACCES);
	assert_int_equal(do_io(0, TD_OP_WRITE_ZEROES, 0, 4096), -EACCES);
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), -EACCES);
	/* (0, 1) is on servers 1 and 2: a read of it may fail too */
	for (int i = 0; i < 4; i++) {
		int r = do_io(1, TD_OP_READ, 268 * KiB, 4096);

		assert_true(r == 0 || r == -EACCES);
	}
	RUN_UNTIL(true);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(nr_notes, 0);
	assert_int_equal(dev()->degraded_skips, 0);
	assert_int_equal(dev()->replica_write_errors, 0);
	assert_true(dev()->reservation_conflicts >= 5);
	/* the lease is on (the default): the server is seen fenced */
	assert_string_equal(
		stripe_fence_state_name(dev()->servers[1].fence.state),
		"fenced");
}

/* --- admission through the mock's persistent reservations ------------------------ */

static bool fence_is(unsigned int i, enum stripe_fence_state st)
{
	return dev()->servers[i].fence.state == st;
}

#define RUN_FOR_MS(ms)                                                \
	do {                                                          \
		uint64_t end_ = td_now_ns() + (uint64_t)(ms)*1000000; \
		while (td_now_ns() < end_)                            \
			td_loop_run_once(fx->loop, 5);                \
	} while (0)

static void wait_registered(void)
{
	for (unsigned int i = 0; i < 3; i++)
		RUN_UNTIL(fence_is(i, STRIPE_FENCE_REGISTERED));
}

/*
 * ADMITTING is held like CONNECTING, then released in order.  The open's
 * own admission ends first: under valgrind on a loaded host it was still
 * running when the test set ADMITTING, admitted the servers and let the
 * write through.
 */
static void test_admitting_held(void **state)
{
	start(&g2, NULL, NULL);
	wait_registered();
	mock_iscsi_set_state(1, ISCSI_CONN_ADMITTING);
	mock_iscsi_set_state(0, ISCSI_CONN_ADMITTING);
	fill(0, 6, 4096);
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	for (int i = 0; i < 20; i++)
		td_loop_run_once(fx->loop, 0);
	assert_int_equal(fx->calls[0], 0);
	mock_iscsi_set_state(0, ISCSI_CONN_UP);
	mock_iscsi_set_state(1, ISCSI_CONN_UP);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	assert_int_equal(nr_file_stale(), 0);
}

/* Open: every LUN gets our key and the WERO reservation, asked once. */
static void test_fence_open_registers(void **state)
{
	uint64_t key = iscsi_conn_pr_key("host-a");

	start(&g2, NULL, NULL);
	assert_true(dev()->fence.on);
	fill(0, 9, 4096);
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	wait_registered();
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	for (unsigned int i = 0; i < 3; i++) {
		assert_true(mock_iscsi_registered(i));
		assert_true(mock_iscsi_lun(i)->reserved);
		assert_int_equal(mock_iscsi_lun(i)->holder, key);
		assert_int_equal(mock_iscsi_lun(i)->type, ISCSI_PR_TYPE_WERO);
	}
	/* key absent on three fresh LUNs: asked, a batch may serve several */
	assert_true(fq.shows >= 1 && fq.shows <= 3);
}

/* A reconnect finds our key (the old session's): no master question. */
static void test_fence_reconnect_keeps_key(void **state)
{
	unsigned int shows;

	start(&g2, NULL, NULL);
	wait_registered();
	shows = fq.shows;
	fq.show_ret = -ECONNREFUSED; /* the master is not needed */
	mock_iscsi_relogin(1, false);
	assert_true(fence_is(1, STRIPE_FENCE_REGISTERED));
	RUN_UNTIL(iscsi_conn_state(mock_iscsi_conn(1)) == ISCSI_CONN_UP);
	assert_true(mock_iscsi_registered(1));
	assert_int_equal(fq.shows, shows);
	assert_int_equal(dev()->servers[1].fence.admissions, 2);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
}

/* A server that lost its PR state (tgtd restart): the master says we
 * still hold the disk, the session is admitted again; while the master
 * is unreachable the session stays held and the disk goes on. */
static void test_fence_server_restart(void **state)
{
	start(&g2, NULL, ",degraded_grace_ms=0");
	wait_registered();
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0); /* gate checked */
	memset(mock_iscsi_lun(1), 0, sizeof(struct mock_pr));
	fq.show_ret = -ECONNREFUSED;
	mock_iscsi_relogin(1, true);
	RUN_FOR_MS(100);
	assert_true(fence_is(1, STRIPE_FENCE_ADMITTING));
	assert_int_equal(iscsi_conn_state(mock_iscsi_conn(1)),
			 ISCSI_CONN_ADMITTING);
	/* degraded: a write to (0, 0) goes on with server 0 alone */
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_true(file_stale(0, 0, 1));
	fq.show_ret = 0;
	RUN_UNTIL(fence_is(1, STRIPE_FENCE_REGISTERED)); /* within 2 s */
	assert_true(mock_iscsi_registered(1));
	assert_true(mock_iscsi_lun(1)->reserved);
	assert_int_equal(iscsi_conn_state(mock_iscsi_conn(1)), ISCSI_CONN_UP);
}

/* Preempted by another host: writes fail with EACCES, nothing stale; a
 * new session is refused by the master's answer: FENCED. */
static void test_fence_preempted(void **state)
{
	uint64_t key = iscsi_conn_pr_key("host-a");
	uint64_t theirs = iscsi_conn_pr_key("host-b");

	start(&g2, NULL, NULL);
	wait_registered();
	for (unsigned int i = 0; i < 3; i++)
		mock_iscsi_preempt(i, key, theirs);
	fill(0, 10, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), -EACCES);
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), -EACCES);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(nr_notes, 0);
	assert_true(fence_is(0, STRIPE_FENCE_FENCED));
	/* the session comes back: the key is gone, the master says B */
	snprintf(fq.show_holder, sizeof(fq.show_holder), "host-b");
	mock_iscsi_relogin(1, false);
	RUN_UNTIL(iscsi_conn_state(mock_iscsi_conn(1)) == ISCSI_CONN_FENCED);
	assert_false(mock_iscsi_registered(1));
	assert_int_equal(do_io(0, TD_OP_WRITE, 320 * KiB, 4096), -EACCES);
	assert_int_equal(nr_file_stale(), 0);
	assert_true(dev()->reservation_conflicts >= 2);
}

/* The master lists this host as fenced: refused even as the holder. */
static void test_fence_listed_host(void **state)
{
	start(&g2, NULL, NULL);
	wait_registered();
	memset(mock_iscsi_lun(2), 0, sizeof(struct mock_pr));
	fq.hosts_ret = 0;
	snprintf(fq.fenced_host, sizeof(fq.fenced_host), "host-a");
	mock_iscsi_relogin(2, true);
	RUN_UNTIL(fence_is(2, STRIPE_FENCE_FENCED));
	assert_int_equal(iscsi_conn_state(mock_iscsi_conn(2)),
			 ISCSI_CONN_FENCED);
	assert_true(fence_is(0, STRIPE_FENCE_REGISTERED));
}

/* Another reservation type on the LUN: refused (another scheme). */
static void test_fence_foreign_reservation(void **state)
{
	start(&g2, NULL, NULL);
	wait_registered();
	mock_iscsi_lun(0)->type = 1; /* Write Exclusive */
	mock_iscsi_lun(0)->holder = 0x99;
	mock_iscsi_relogin(0, false);
	RUN_UNTIL(fence_is(0, STRIPE_FENCE_FENCED));
}

/* --- servers ------------------------------------------------------------------------ */

/* G4, R=1: server 1 (column 1) down fails only column 1's I/O. */
static void test_down_server_fails_its_extents(void **state)
{
	mock_iscsi.setup[1].state = ISCSI_CONN_DOWN;
	start(&g4, NULL, NULL);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_int_equal(do_io(0, TD_OP_WRITE, 16 * KiB, 4096), -EIO);
	assert_int_equal(do_io(0, TD_OP_READ, 16 * KiB, 4096), -EIO);
	assert_int_equal(do_io(0, TD_OP_WRITE, 32 * KiB, 4096), 0);
	assert_int_equal(do_io(0, TD_OP_READ, 96 * KiB, 4096), 0);
	assert_int_equal(nr_file_stale(), 0);
	/* the server comes back */
	mock_iscsi_set_state(1, ISCSI_CONN_UP);
	assert_int_equal(do_io(0, TD_OP_WRITE, 16 * KiB, 4096), 0);
	assert_int_equal(dev()->servers[1].gate, STRIPE_GATE_OK);
}

/* G2, R=2: server 1 down; replicas there are marked, writes go on. */
static void test_down_server_replicated(void **state)
{
	mock_iscsi.setup[1].state = ISCSI_CONN_DOWN;
	start(&g2, NULL, NULL);
	fill(0, 7, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(do_io(1, TD_OP_READ, 0, 4096), 0);
	assert_memory_equal(ts.buf[1], ts.buf[0], 4096);
	/* extent (0, 1): server 1 is replica 0; reads fall back to 2 */
	assert_int_equal(do_io(1, TD_OP_READ, 268 * KiB, 4096), 0);
}

static void test_gate_block_size_mismatch(void **state)
{
	make_map(&g2, NULL);
	/* the map says 4096-byte blocks, the LUN has 512 */
	mock_iscsi.setup[1].block_size = 512;
	assert_int_equal(open_stripe(NULL), 0);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_int_equal(dev()->servers[1].gate, STRIPE_GATE_BAD);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, 0), 0);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(dev()->gate_failures, 1);
}

static void test_gate_capacity_too_small(void **state)
{
	mock_iscsi.setup[0].nr_blocks = 100; /* extent 1 ends at 128 */
	start(&g4, NULL, NULL);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), -EIO);
	assert_int_equal(do_io(0, TD_OP_WRITE, 16 * KiB, 4096), 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_WRITE, 0), 0);
}

/* Commands wait while a connection is still connecting. */
static void test_gate_waits_for_connection(void **state)
{
	mock_iscsi.setup[0].state = ISCSI_CONN_CONNECTING;
	start(&g4, NULL, NULL);
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	for (int i = 0; i < 5; i++)
		td_loop_run_once(fx->loop, 1);
	assert_int_equal(fx->calls[0], 0);
	assert_int_equal(mock_iscsi.nr_log, 0);
	mock_iscsi_set_state(0, ISCSI_CONN_UP);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_WRITE, 0), 1);
}

/* --- degraded servers ------------------------------------------------------------ */

/*
 * G2: a write to server 1 times out (the connection drops the session
 * and reconnects: CONNECTING).  From then on writes do not wait for
 * server 1: its replica is marked stale, durably, before the write
 * completes, and no command reaches it; reads go elsewhere.  Back UP,
 * it is written again; its stale replicas stay stale.
 */
static void test_degraded_write_skips_server(void **state)
{
	unsigned int from;

	start(&g2, NULL, ",degraded_grace_ms=0");
	mock_iscsi_hold(1, true);
	fill(0, 21, 4096);
	submit(0, TD_OP_WRITE, 0, 4096, 0); /* (0, 0): servers 0, 1 */
	RUN_UNTIL(mock_iscsi_nr_held(1) == 1);
	mock_iscsi_hold(1, false);
	mock_iscsi_set_state(1, ISCSI_CONN_CONNECTING);
	mock_iscsi_release(1, -ETIMEDOUT);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(dev()->degraded_skips, 0); /* that one was sent */

	from = mock_iscsi.nr_log;
	fill(1, 22, 4096);
	/* (1, 1): servers 0 and 1, the replica on 1 is replica 1 */
	io_prep(1, TD_OP_WRITE, 320 * KiB, 4096, 0);
	assert_int_equal(td_vbd_submit(fx->vbd, &fx->io[1]), 0);
	RUN_UNTIL(fx->calls[1]);
	assert_int_equal(fx->err[1], 0);
	assert_true(file_stale(1, 1, 1));
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_WRITE, from), 1);
	assert_int_equal(dev()->degraded_skips, 1);
	assert_true(stripe_server_degraded(dev(), &dev()->servers[1]));
	/* (0, 1): servers 1 and 2, both live: reads go to server 2 */
	for (int i = 0; i < 4; i++)
		assert_int_equal(do_io(2, TD_OP_READ, 268 * KiB, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_READ, from), 0);
	assert_int_equal(mock_iscsi_count(2, ISCSI_CMD_READ, from), 4);

	/* back UP: written again; (0, 0) and (1, 1) stay stale */
	mock_iscsi_set_state(1, ISCSI_CONN_UP);
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(2, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_int_equal(do_io(2, TD_OP_WRITE, 0, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 1);
	assert_false(stripe_server_degraded(dev(), &dev()->servers[1]));
	assert_int_equal(nr_file_stale(), 2);
	assert_int_equal(dev()->degraded_skips, 1);
}

/* The mark a skip makes is on disk before the write completes. */
static void test_degraded_skip_mark_durable_first(void **state)
{
	start(&g2, NULL, ",degraded_grace_ms=0");
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	mock_iscsi_set_state(1, ISCSI_CONN_CONNECTING);
	rename_hold(true);
	io_prep(0, TD_OP_WRITE, 0, 4096, 0)->cb = io_done_check_file;
	assert_int_equal(td_vbd_submit(fx->vbd, &fx->io[0]), 0);
	for (int i = 0; i < 50; i++)
		td_loop_run_once(fx->loop, 1);
	assert_int_equal(fx->calls[0], 0); /* waits for the rewrite */
	rename_hold(false);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	assert_true(stale_at_completion);
	assert_int_equal(notes_at_completion, 1);
	/* a failed rewrite fails the write: the file still says "ok" */
	rename_fail(EIO);
	assert_int_equal(do_io(0, TD_OP_WRITE, 320 * KiB, 4096), -EIO);
	rename_fail(0);
}

/*
 * The grace: a session back within it (a blip) is written as
 * usual and nothing is marked; past it, the write goes on without it.
 */
static void test_degraded_grace(void **state)
{
	const uint64_t grace_ns = 300 * 1000000ull;
	unsigned int from;
	uint64_t t0, since;

	start(&g2, NULL, ",degraded_grace_ms=300");
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);

	mock_iscsi_set_state(1, ISCSI_CONN_CONNECTING);
	from = mock_iscsi.nr_log;
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	submit(1, TD_OP_FLUSH, 0, 0, 0);
	for (int i = 0; i < 5; i++)
		td_loop_run_once(fx->loop, 1);
	assert_int_equal(fx->calls[0] + fx->calls[1], 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 0);
	mock_iscsi_set_state(1, ISCSI_CONN_UP);
	RUN_UNTIL(fx->calls[0] && fx->calls[1]);
	assert_int_equal(fx->err[0] | fx->err[1], 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 1);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_SYNC, from), 1);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(dev()->degraded_skips, 0);

	mock_iscsi_set_state(1, ISCSI_CONN_CONNECTING);
	from = mock_iscsi.nr_log;
	t0 = td_now_ns();
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_true(td_now_ns() - t0 >= grace_ns);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE, from), 0);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(dev()->degraded_skips, 1);
	/*
	 * The grace runs from when it was first seen degraded: no new wait.
	 * Checked by the outage's start staying put (a wall-clock bound would
	 * fail on a loaded machine, where the mark's fsync alone can take
	 * longer than the grace).
	 */
	since = dev()->servers[1].degraded_ns;
	assert_int_not_equal(since, 0);
	assert_int_equal(do_io(0, TD_OP_WRITE, 320 * KiB, 4096), 0);
	assert_int_equal(dev()->servers[1].degraded_ns, since);
	assert_int_equal(dev()->degraded_skips, 2);
	assert_true(file_stale(1, 1, 1));
}

/*
 * No other copy: a write whose only live replica is on a degraded server
 * waits for it as before (here: until the connection is DOWN, EIO).
 */
static void test_degraded_last_copy_waits(void **state)
{
	unsigned int from;

	start(&g2, g2_stale_001, ",degraded_grace_ms=0");
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0); /* server 0 */
	mock_iscsi_set_state(0, ISCSI_CONN_CONNECTING);
	from = mock_iscsi.nr_log;
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	for (int i = 0; i < 20; i++)
		td_loop_run_once(fx->loop, 1);
	assert_int_equal(fx->calls[0], 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_WRITE, from), 1);
	mock_iscsi_set_state(0, ISCSI_CONN_DOWN);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], -EIO);
	assert_int_equal(nr_file_stale(), 1);
	assert_int_equal(dev()->degraded_skips, 0);
}

/* G4, R = 1: a degraded server's extents wait, and work once it is back. */
static void test_degraded_unreplicated_waits(void **state)
{
	start(&g4, NULL, ",degraded_grace_ms=0");
	assert_int_equal(do_io(0, TD_OP_WRITE, 16 * KiB, 4096), 0);
	mock_iscsi_set_state(1, ISCSI_CONN_CONNECTING);
	submit(0, TD_OP_WRITE, 16 * KiB, 4096, 0);
	submit(1, TD_OP_FLUSH, 0, 0, 0);
	for (int i = 0; i < 20; i++)
		td_loop_run_once(fx->loop, 1);
	assert_int_equal(fx->calls[0] + fx->calls[1], 0);
	mock_iscsi_set_state(1, ISCSI_CONN_UP);
	RUN_UNTIL(fx->calls[0] && fx->calls[1]);
	assert_int_equal(fx->err[0] | fx->err[1], 0);
	assert_int_equal(dev()->degraded_skips, 0);
}

/*
 * A flush does not wait for a degraded server either: its live replicas
 * are marked stale where a peer synced, as after a failed SYNCHRONIZE
 * CACHE, and later rounds leave it out.
 */
static void test_degraded_flush(void **state)
{
	struct td_strbuf out;
	unsigned int from;

	start(&g2, NULL, ",degraded_grace_ms=0");
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	mock_iscsi_set_state(1, ISCSI_CONN_CONNECTING);
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_SYNC, from), 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_SYNC, from), 1);
	assert_int_equal(mock_iscsi_count(2, ISCSI_CMD_SYNC, from), 1);
	assert_true(file_stale(0, 0, 1));
	assert_true(file_stale(0, 1, 0));
	assert_true(file_stale(1, 1, 1));
	assert_int_equal(nr_file_stale(), 3);
	assert_int_equal(dev()->servers[1].live_slots, 0);
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), 0);
	assert_int_equal(dev()->degraded_skips, 1);
	td_strbuf_init(&out);
	td_stripe_ops.report_text(&fx->vbd->drivers[0], &out);
	assert_non_null(strstr(td_strbuf_str(&out), "connecting (degraded)"));
	assert_non_null(strstr(td_strbuf_str(&out), "degraded skips 1"));
	td_strbuf_free(&out);
}

/* --- discard, write zeroes ------------------------------------------------------ */

static void test_discard_and_write_zeroes(void **state)
{
	unsigned int from;

	mock_iscsi.setup[2].cannot_unmap = true;
	start(&g2, NULL, NULL);
	assert_int_equal(td_vbd_get_info(fx->vbd)->features &
				 (TD_FEAT_DISCARD | TD_FEAT_WRITE_ZEROES),
			 TD_FEAT_DISCARD | TD_FEAT_WRITE_ZEROES);
	/* extent (0, 0): servers 0 and 1 can unmap */
	fill(0, 1, 8192);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 8192), 0);
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(0, TD_OP_DISCARD, 0, 8192), 0);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_UNMAP, from), 1);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_UNMAP, from), 1);
	/* extent (0, 1): server 2 cannot, so nothing is sent */
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(0, TD_OP_DISCARD, 268 * KiB, 4096), 0);
	assert_int_equal(mock_iscsi.nr_log, from);
	/* write zeroes goes to both and zeroes both */
	assert_int_equal(do_io(0, TD_OP_WRITE_ZEROES, 268 * KiB, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_WRITE_ZEROES, from), 1);
	assert_int_equal(mock_iscsi_count(2, ISCSI_CMD_WRITE_ZEROES, from), 1);
	assert_int_equal(do_io(1, TD_OP_READ, 268 * KiB, 4096), 0);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(ts.buf[1][i], 0);
	assert_int_equal(nr_file_stale(), 0);
}

/* --- resync ---------------------------------------------------------------------- */

static int control(const char *w0, const char *w1, struct td_strbuf *out)
{
	char a[32], b[32];
	char *argv[2] = {a, b};

	snprintf(a, sizeof(a), "%s", w0);
	snprintf(b, sizeof(b), "%s", w1 ? w1 : "");
	td_strbuf_reset(out);
	return td_vbd_driver_control(fx->vbd, "stripe", w1 ? 2 : 1, argv, out);
}

static int control2(const char *w0, const char *w1, const char *w2,
		    struct td_strbuf *out)
{
	char a[32], b[32], c[32];
	char *argv[3] = {a, b, c};

	snprintf(a, sizeof(a), "%s", w0);
	snprintf(b, sizeof(b), "%s", w1);
	snprintf(c, sizeof(c), "%s", w2);
	td_strbuf_reset(out);
	return td_vbd_driver_control(fx->vbd, "stripe", 3, argv, out);
}

/* Extent (0, 0) of G2: virtual [0, 64K) and [128K, 192K). */
static void test_resync_copies_and_clears(void **state)
{
	struct td_strbuf out;
	unsigned int from;
	int step = 0;

	td_strbuf_init(&out);
	start(&g2, g2_stale_001, ",resync_chunk=16K,resync_rate=1G");
	fill(0, 11, IO_BYTES);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, IO_BYTES), 0);
	fill(0, 12, IO_BYTES);
	assert_int_equal(do_io(0, TD_OP_WRITE, 128 * KiB, IO_BYTES), 0);
	memset(mock_iscsi_data(1), 0xee, 128 * KiB); /* the stale copy */
	assert_int_equal(control("resync", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "resync started"));
	assert_int_equal(control("resync", NULL, &out), -EALREADY);
	/* writes land all over the extent while it is copied */
	while (dev()->resync.state == STRIPE_RESYNC_RUNNING && step < 200) {
		uint64_t off = (step * 20 * KiB) % (64 * KiB) +
			       (step % 2 ? 128 * KiB : 0);

		fill(2, 100 + step, 4096);
		assert_int_equal(do_io(2, TD_OP_WRITE, off, 4096), 0);
		td_loop_run_once(fx->loop, 0);
		step++;
	}
	RUN_UNTIL(dev()->resync.state != STRIPE_RESYNC_RUNNING);
	assert_int_equal(dev()->resync.state, STRIPE_RESYNC_DONE);
	assert_true(step > 2);
	RUN_UNTIL(!file_stale(0, 0, 1) && nr_notes == 1);
	assert_memory_equal(mock_iscsi_data(0), mock_iscsi_data(1), 128 * KiB);
	assert_int_equal(dev()->resync.slots_done, 1);
	assert_int_equal(dev()->resync.bytes_copied, 128 * KiB);
	assert_int_equal(nr_notes, 1);
	assert_false(notes[0].stale);
	/* the target synced its cache before the mark was cleared */
	assert_true(mock_iscsi_count(1, ISCSI_CMD_SYNC, 0) >= 1);
	/* now it is read again */
	from = mock_iscsi.nr_log;
	for (int i = 0; i < 4; i++)
		assert_int_equal(do_io(1, TD_OP_READ, 0, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_READ, from), 2);
	assert_non_null(strstr(td_strbuf_str(&out), "resync"));
	assert_int_equal(control("status", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "resync: done"));
	td_strbuf_free(&out);
}

static void test_resync_target_failure(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	start(&g2, g2_stale_001, ",resync_chunk=16K");
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 0);
	assert_int_equal(control("resync", "rate=100M", &out), 0);
	RUN_UNTIL(dev()->resync.state != STRIPE_RESYNC_RUNNING);
	assert_int_equal(dev()->resync.state, STRIPE_RESYNC_FAILED);
	assert_int_equal(dev()->resync.slots_failed, 1);
	assert_true(file_stale(0, 0, 1));
	assert_true(dev()->map.slots[1].stale);
	assert_int_equal(control("status", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "last error"));
	td_strbuf_free(&out);
}

static void test_resync_stop(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	/* 64K/s: a 16K chunk, then a pause of about 250 ms */
	start(&g2, g2_stale_001, ",resync_chunk=16K,resync_rate=64K");
	assert_int_equal(control("resync", NULL, &out), 0);
	RUN_UNTIL(dev()->resync.step == RESYNC_STEP_PAUSE);
	assert_int_equal(control("resync", "stop", &out), 0);
	assert_int_equal(dev()->resync.state, STRIPE_RESYNC_STOPPED);
	assert_int_equal(dev()->resync.bytes_copied, 16 * KiB);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(control("resync", "stop", &out), -EALREADY);
	td_strbuf_free(&out);
}

/* --- dirty regions, the activity log, resync on its own ----------------------- */

/* A write replica 1 missed: one region marked, one region copied back. */
static void test_region_resync_copies_only_missed(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	start(&g2, NULL, ",auto_resync=off,resync_rate=1G");
	assert_int_equal(dev()->map.region_bytes, 4096);
	fill(0, 21, 4096);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 1);
	assert_int_equal(do_io(0, TD_OP_WRITE, 8192, 4096), 0);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(file_dirty(0, 0, 1), 1);
	/* its other regions are still written and read */
	fill(1, 22, 4096);
	assert_int_equal(do_io(1, TD_OP_WRITE, 16384, 4096), 0);
	assert_memory_equal(mock_iscsi_data(1) + 16384, ts.buf[1], 4096);
	assert_memory_not_equal(mock_iscsi_data(1) + 8192, ts.buf[0], 4096);
	assert_int_equal(control("resync", NULL, &out), 0);
	RUN_UNTIL(dev()->resync.state != STRIPE_RESYNC_RUNNING);
	assert_int_equal(dev()->resync.state, STRIPE_RESYNC_DONE);
	assert_int_equal(dev()->resync.bytes_copied, 4096);
	RUN_UNTIL(!file_stale(0, 0, 1));
	assert_memory_equal(mock_iscsi_data(0), mock_iscsi_data(1), 128 * KiB);
	td_strbuf_free(&out);
}

/* A server comes back: its missed regions are copied without a command. */
static void test_auto_resync_when_server_back(void **state)
{
	start(&g2, NULL, ",resync_rate=1G,degraded_grace_ms=0");
	assert_int_equal(do_io(1, TD_OP_WRITE, 0, 4096), 0); /* gates checked */
	mock_iscsi_set_state(1, ISCSI_CONN_CONNECTING);
	RUN_UNTIL(stripe_server_degraded(dev(), &dev()->servers[1]));
	fill(0, 31, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 4096, 4096), 0);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(file_dirty(0, 0, 1), 1);
	/* nothing while the server is away */
	for (int i = 0; i < 700; i++)
		td_loop_run_once(fx->loop, 2);
	assert_int_equal(dev()->resync.state, STRIPE_RESYNC_IDLE);
	mock_iscsi_set_state(1, ISCSI_CONN_UP);
	RUN_UNTIL(dev()->resync.state == STRIPE_RESYNC_DONE);
	assert_true(dev()->resync.auto_run);
	assert_int_equal(dev()->resync.bytes_copied, 4096);
	RUN_UNTIL(!file_stale(0, 0, 1));
	assert_memory_equal(mock_iscsi_data(0), mock_iscsi_data(1), 128 * KiB);
}

static void test_auto_resync_off(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	start(&g2, g2_stale_001, ",auto_resync=off");
	for (int i = 0; i < 700; i++)
		td_loop_run_once(fx->loop, 2);
	assert_int_equal(dev()->resync.state, STRIPE_RESYNC_IDLE);
	assert_int_equal(control2("resync", "auto", "on", &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "auto resync on"));
	RUN_UNTIL(dev()->resync.state == STRIPE_RESYNC_DONE);
	assert_int_equal(control2("resync", "auto", "maybe", &out), -EINVAL);
	td_strbuf_free(&out);
}

/* "resync rate [RATE]": the disk's resync_rate at run time. */
static void test_resync_rate_control(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	start(&g2, g2_stale_001, ",auto_resync=off");
	assert_int_equal(control("resync", "rate", &out), 0);
	assert_string_equal(td_strbuf_str(&out), "resync rate 67108864\n");
	assert_int_equal(control2("resync", "rate", "1M", &out), 0);
	assert_string_equal(td_strbuf_str(&out), "resync rate 1048576\n");
	assert_int_equal(dev()->opts.resync_rate, 1 << 20);
	assert_int_equal(control2("resync", "rate", "1K", &out), -EINVAL);
	assert_int_equal(control2("resync", "rate", "fast", &out), -EINVAL);
	assert_int_equal(dev()->opts.resync_rate, 1 << 20);
	/* a run started now takes it */
	assert_int_equal(control("resync", NULL, &out), 0);
	assert_int_equal(dev()->resync.rate_bytes_per_s, 1 << 20);
	assert_int_equal(control2("resync", "rate", "2M", &out), 0);
	assert_int_equal(dev()->resync.rate_bytes_per_s, 2 << 20);
	RUN_UNTIL(dev()->resync.state == STRIPE_RESYNC_DONE);
	td_strbuf_free(&out);
}

static void write_al(bool clean, const uint64_t *ids, uint32_t nr, uint64_t gen)
{
	char path[160];
	struct stripe_al_record rec = {
		.gen = gen,
		.clean = clean,
		.nr = nr,
		.region_bytes = 4096,
		.regions_per_extent = 32,
		.extents = 4,
	};
	int fd;

	snprintf(path, sizeof(path), "%s.al", ts.path);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(
		stripe_al_file_write(fd, STRIPE_AL_DEFAULT_CAP, &rec, ids), 0);
	close(fd);
}

/* Regions hot at a crash are marked on every replica but the first. */
static void test_al_recovery_marks_hot_regions(void **state)
{
	/* extent (0, 0) region 3; extent (1, 1) regions 0 and 1 */
	static const uint64_t ids[] = {3, 3 * 32 + 0, 3 * 32 + 1};

	make_map(&g2, NULL);
	write_al(false, ids, 3, 5);
	assert_int_equal(open_stripe(",auto_resync=off"), 0);
	assert_int_equal(dev()->al.recovered, 3);
	assert_false(file_stale(0, 0, 0));
	assert_int_equal(file_dirty(0, 0, 1), 1);
	assert_false(file_stale(1, 1, 0));
	assert_int_equal(file_dirty(1, 1, 1), 2);
	RUN_UNTIL(nr_notes == 2); /* the master hears of both */
	assert_true(notes[0].stale && notes[1].stale);
	/* a clean log marks nothing */
	td_vbd_close(fx->vbd);
	fx->vbd = NULL;
	make_map(&g2, NULL);
	write_al(true, ids, 3, 9);
	assert_int_equal(open_stripe(NULL), 0);
	assert_int_equal(dev()->al.recovered, 0);
	assert_int_equal(nr_file_stale(), 0);
}

/* A torn newest record: the older one is used; neither: every extent. */
static void test_al_torn_record(void **state)
{
	static const uint64_t ids[] = {2};
	char path[160];
	int fd;

	make_map(&g2, NULL);
	write_al(false, ids, 1, 6);
	write_al(false, NULL, 0, 7);
	snprintf(path, sizeof(path), "%s.al", ts.path);
	fd = open(path, O_RDWR);
	/* gen 7 is in slot 1: spoil its checksum */
	assert_int_equal(
		pwrite(fd, "X", 1,
		       (off_t)stripe_al_record_bytes(STRIPE_AL_DEFAULT_CAP) +
			       40),
		1);
	close(fd);
	assert_int_equal(open_stripe(",auto_resync=off"), 0);
	assert_int_equal(dev()->al.recovered, 1);
	assert_int_equal(file_dirty(0, 0, 1), 1);
	td_vbd_close(fx->vbd);
	fx->vbd = NULL;
	make_map(&g2, NULL);
	fd = open(path, O_RDWR | O_TRUNC);
	assert_int_equal(write(fd, "garbage", 7), 7);
	close(fd);
	assert_int_equal(open_stripe(",auto_resync=off"), 0);
	assert_int_equal(dev()->al.recovered, 4); /* every extent */
	assert_int_equal(nr_file_stale(), 4);	  /* replica 1 of each */
	assert_false(file_stale(0, 0, 0));
}

/*
 * A grown map left as MAP.grow is taken at open, and an unclean log of
 * the old geometry (J=2) marks its hot regions where the grown map (J=3)
 * has them: old extent index 3 = (1, 1) is new index 4, not (1, 0).
 */
static void test_open_takes_grown_map(void **state)
{
	static const uint64_t ids[] = {3, 3 * 32 + 0, 3 * 32 + 1};
	char side[160];

	snprintf(side, sizeof(side), "%s.grow", ts.path);
	make_map(&g2_grown, NULL);
	assert_int_equal(rename(ts.path, side), 0);
	make_map(&g2, NULL);
	write_al(false, ids, 3, 5);
	assert_int_equal(open_stripe(",auto_resync=off"), 0);
	assert_int_equal(access(side, F_OK), -1);
	assert_int_equal(dev()->map.extents_per_column, 3);
	assert_int_equal(dev()->map.size_bytes, 768 * KiB);
	assert_int_equal(dev()->layout.extents_per_column, 3);
	assert_int_equal(dev()->al.recovered, 3);
	assert_int_equal(file_dirty(0, 0, 1), 1);
	assert_int_equal(file_dirty(1, 1, 1), 2);
	assert_int_equal(file_dirty(1, 0, 1), 0);
	assert_int_equal(nr_file_stale(), 2);
}

/* --- growing while serving (refresh_size, tap-ctl resize) -------------------- */

/* G2 served with stale, then G2 grown (J=3) written as PATH.grow. */
static void grow_side(const bool *stale, const char *opts, char *side,
		      size_t len)
{
	char path[sizeof(ts.path)];

	start(&g2, stale, opts);
	snprintf(side, len, "%s.grow", ts.path);
	memcpy(path, ts.path, sizeof(path));
	snprintf(ts.path, sizeof(ts.path), "%s", side);
	make_map(&g2_grown, NULL);
	memcpy(ts.path, path, sizeof(path));
	ts.g = &g2;
}

static uint32_t file_extents_per_column(void)
{
	struct stripe_map m;
	struct stripe_map_error err;
	uint32_t j;

	assert_int_equal(stripe_map_read(ts.path, &m, &err), 0);
	j = m.extents_per_column;
	stripe_map_free(&m);
	return j;
}

static int resize(uint64_t *old_s, uint64_t *new_s)
{
	struct td_strbuf why;
	int ret;

	td_strbuf_init(&why);
	ret = td_vbd_resize(fx->vbd, old_s, new_s, &why);
	td_strbuf_free(&why);
	return ret;
}

/* Replica (1, 1, 0) of G2 stale: slot 6, in G2 grown slot 8. */
static const bool g2_stale_110[8] = {[6] = true};

/*
 * A served disk takes PATH.grow: the new size, the stale mark and the
 * master's view at their grown index, a write held in flight across the
 * switch completes and lets its log regions go, and I/O beyond the old
 * end reaches the added extents.
 */
static void test_resize_grows_served_disk(void **state)
{
	const struct stripe_map *m;
	uint64_t old_s = 0, new_s = 0;
	uint32_t live = 0;
	char side[160];

	grow_side(g2_stale_110, ",auto_resync=off", side, sizeof(side));
	/* k=7 (448K): extent (1, 1), only replica 1 (server 1) is live */
	mock_iscsi_hold(1, true);
	fill(0, 3, 4096);
	submit(0, TD_OP_WRITE, 448 * KiB, 4096, 0);
	RUN_UNTIL(mock_iscsi_nr_held(1) == 1);

	assert_int_equal(resize(&old_s, &new_s), 0);
	assert_int_equal(old_s, 512 * KiB / TD_SECTOR_SIZE);
	assert_int_equal(new_s, 768 * KiB / TD_SECTOR_SIZE);
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors, new_s);
	assert_int_equal(access(side, F_OK), -1);
	m = &dev()->map;
	assert_int_equal(m->extents_per_column, 3);
	assert_int_equal(dev()->layout.extents_per_column, 3);
	assert_true(m->slots[8].stale);
	assert_false(m->slots[6].stale);
	assert_true(dev()->stale.notified[8]);
	assert_false(dev()->stale.notified[6]);
	assert_true(file_stale(1, 1, 0));
	assert_int_equal(nr_file_stale(), 1);
	assert_int_equal(file_extents_per_column(), 3);
	for (uint32_t s = 0; s < dev()->nr_servers; s++)
		live += dev()->servers[s].live_slots;
	assert_int_equal(live, 11);

	/* the write in flight completes, its log regions let go */
	mock_iscsi_release(1, 0);
	mock_iscsi_hold(1, false);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	assert_memory_equal(mock_iscsi_data(1) + 80 * 4096, ts.buf[0], 4096);
	for (uint32_t i = 0; i < dev()->al.cap; i++)
		assert_int_equal(dev()->al.e[i].inflight, 0);

	/* 640K, k=10: extent (0, 2), 64K in: server 2 LBA 512, 0 LBA 768 */
	fill(1, 9, 4096);
	assert_int_equal(do_io(1, TD_OP_WRITE, 640 * KiB, 4096), 0);
	assert_memory_equal(mock_iscsi_data(2) + 512 * 512 + 64 * KiB,
			    ts.buf[1], 4096);
	assert_memory_equal(mock_iscsi_data(0) + 768 * 512 + 64 * KiB,
			    ts.buf[1], 4096);
	memset(ts.buf[2], 0, 4096);
	assert_int_equal(do_io(2, TD_OP_READ, 640 * KiB, 4096), 0);
	assert_memory_equal(ts.buf[2], ts.buf[1], 4096);

	/* no PATH.grow any more: the size stays */
	assert_int_equal(resize(&old_s, &new_s), 0);
	assert_int_equal(old_s, new_s);
	assert_int_equal(new_s, 768 * KiB / TD_SECTOR_SIZE);
}

/*
 * The grown map cannot be written (rename fails): the disk keeps its map,
 * size, per-slot state and PATH.grow; a later resize takes it.
 */
static void test_resize_rewrite_fails(void **state)
{
	uint64_t old_s = 0, new_s = 0;
	char side[160];

	grow_side(g2_stale_110, ",auto_resync=off", side, sizeof(side));
	rename_fail(EIO);
	assert_int_equal(resize(&old_s, &new_s), -EIO);
	rename_fail(0);
	assert_int_equal(access(side, F_OK), 0);
	assert_int_equal(dev()->map.extents_per_column, 2);
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors,
			 512 * KiB / TD_SECTOR_SIZE);
	assert_true(dev()->map.slots[6].stale);
	assert_true(dev()->stale.notified[6]);
	assert_int_equal(dev()->stale.want_map.extents_per_column, 2);
	assert_int_equal(file_extents_per_column(), 2);
	fill(0, 5, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 448 * KiB, 4096), 0);
	assert_int_equal(resize(&old_s, &new_s), 0);
	assert_int_equal(new_s, 768 * KiB / TD_SECTOR_SIZE);
	assert_int_equal(file_extents_per_column(), 3);
	assert_true(file_stale(1, 1, 0));
	assert_int_equal(access(side, F_OK), -1);
}

/* A resync under way refuses the resize: nothing changes, PATH.grow stays. */
static void test_resize_refused_during_resync(void **state)
{
	uint64_t old_s = 0, new_s = 0;
	struct td_strbuf out;
	char side[160];

	td_strbuf_init(&out);
	grow_side(g2_stale_001, ",resync_chunk=16K,resync_rate=64K", side,
		  sizeof(side));
	assert_int_equal(control("resync", NULL, &out), 0);
	RUN_UNTIL(dev()->resync.step == RESYNC_STEP_PAUSE);
	assert_int_equal(resize(&old_s, &new_s), -EBUSY);
	assert_int_equal(access(side, F_OK), 0);
	assert_int_equal(dev()->map.extents_per_column, 2);
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors,
			 512 * KiB / TD_SECTOR_SIZE);
	assert_true(file_stale(0, 0, 1));
	assert_int_equal(file_extents_per_column(), 2);
	assert_int_equal(control("resync", "stop", &out), 0);
	/* stopped: the next resize takes it */
	assert_int_equal(resize(&old_s, &new_s), 0);
	assert_int_equal(new_s, 768 * KiB / TD_SECTOR_SIZE);
	assert_int_equal(access(side, F_OK), -1);
	td_strbuf_free(&out);
}

/* Writes go through a log of 16 regions: old ones are evicted. */
static void test_al_small_log(void **state)
{
	start(&g2, NULL, ",al_regions=16,al_unit=4K");
	for (int i = 0; i < 24; i++)
		assert_int_equal(
			do_io(0, TD_OP_WRITE, (uint64_t)i * 4096, 4096), 0);
	assert_true(dev()->al.evictions >= 8);
	assert_true(dev()->al.writes >= 24);
	assert_int_equal(dev()->al.nr, 16);
	/* a clean close: nothing hot at the next open */
	td_vbd_close(fx->vbd);
	fx->vbd = NULL;
	assert_int_equal(open_stripe(NULL), 0);
	assert_int_equal(dev()->al.recovered, 0);
	assert_int_equal(nr_file_stale(), 0);
	td_vbd_close(fx->vbd);
	fx->vbd = NULL;
	assert_int_equal(open_stripe(",al_regions=8"), -EINVAL);
	fx->vbd = NULL;
	assert_int_equal(open_stripe(",al_unit=6K"), -EINVAL);
	fx->vbd = NULL;
	assert_int_equal(open_stripe(",al_unit=256K"), -EINVAL); /* > E */
	fx->vbd = NULL;
	assert_int_equal(open_stripe(NULL), 0);
	assert_int_equal(dev()->al.unit, 128 * KiB); /* 4M, at most E */
}

/* --- scrub ------------------------------------------------------------------------ */

/* The decision rule, by hand: CRCs, read, stale -> verdict, good, bad. */
static void test_scrub_decide(void **state)
{
	static const struct {
		uint32_t nr, crc[4], read_ok, stale;
		enum stripe_scrub_verdict v;
		uint32_t good, bad;
	} rows[] = {
		{2, {7, 7}, 0x3, 0, STRIPE_SCRUB_SAME, 0, 0},
		{2, {7, 8}, 0x3, 0, STRIPE_SCRUB_UNDECIDED, 2, 0x3},
		/* one stale: nothing to compare, never a verdict */
		{2, {7, 8}, 0x3, 0x2, STRIPE_SCRUB_TOO_FEW, 2, 0},
		{2, {7, 8}, 0x1, 0, STRIPE_SCRUB_TOO_FEW, 2, 0},
		{3, {7, 7, 7}, 0x7, 0, STRIPE_SCRUB_SAME, 0, 0},
		{3, {9, 7, 7}, 0x7, 0, STRIPE_SCRUB_MAJORITY, 1, 0x1},
		{3, {7, 9, 7}, 0x7, 0, STRIPE_SCRUB_MAJORITY, 0, 0x2},
		{3, {7, 8, 9}, 0x7, 0, STRIPE_SCRUB_UNDECIDED, 3, 0x7},
		/* the third unread or stale: two left that differ */
		{3, {7, 8, 7}, 0x3, 0, STRIPE_SCRUB_UNDECIDED, 3, 0x3},
		{3, {7, 8, 7}, 0x7, 0x4, STRIPE_SCRUB_UNDECIDED, 3, 0x3},
		/* a stale replica's CRC does not vote */
		{3, {7, 8, 8}, 0x7, 0x1, STRIPE_SCRUB_SAME, 1, 0},
		{4, {7, 7, 8, 9}, 0xf, 0, STRIPE_SCRUB_UNDECIDED, 4, 0xf},
		{4, {7, 8, 8, 8}, 0xf, 0, STRIPE_SCRUB_MAJORITY, 1, 0x1},
		{4, {7, 7, 8, 8}, 0xf, 0, STRIPE_SCRUB_UNDECIDED, 4, 0xf},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint32_t good = 99, bad = 99;
		enum stripe_scrub_verdict v = stripe_scrub_decide(
			rows[i].nr, rows[i].crc, rows[i].read_ok, rows[i].stale,
			&good, &bad);

		assert_int_equal(v, rows[i].v);
		assert_int_equal(bad, rows[i].bad);
		if (v != STRIPE_SCRUB_SAME)
			assert_int_equal(good, rows[i].good);
	}
}

/* "stripe verify WORDS..." (up to 3 words). */
static int verify_cmd(const char *w1, const char *w2, struct td_strbuf *out)
{
	char a[32] = "verify", b[32], c[32];
	char *argv[3] = {a, b, c};

	snprintf(b, sizeof(b), "%s", w1 ? w1 : "");
	snprintf(c, sizeof(c), "%s", w2 ? w2 : "");
	td_strbuf_reset(out);
	return td_vbd_driver_control(fx->vbd, "stripe", 1 + !!w1 + !!w2, argv,
				     out);
}

/*
 * G3 (R=3): a byte flipped on column 1 extent 0 replica 0 (server 1 from
 * LBA 4096, 512-byte blocks) at extent offset 5000, virtual 1M + 5000:
 * the majority (replicas 1 and 2) wins and the repair rewrites it.
 */
static void test_scrub_repairs_from_majority(void **state)
{
	struct td_strbuf out;
	unsigned char *lun1;
	unsigned int from;

	td_strbuf_init(&out);
	start(&g3, NULL, ",resync_chunk=512K");
	lun1 = mock_iscsi_data(1) + 4096 * 512;
	lun1[5000] ^= 0x40;
	assert_int_equal(verify_cmd("--repair", "1G", &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "scrub started"));
	assert_int_equal(verify_cmd("--repair", NULL, &out), -EALREADY);
	RUN_UNTIL(dev()->scrub.state != STRIPE_SCRUB_RUNNING);
	assert_int_equal(dev()->scrub.state, STRIPE_SCRUB_DONE);
	assert_int_equal(dev()->scrub.chunks_total, 16);
	assert_int_equal(dev()->scrub.chunks_checked, 16);
	assert_int_equal(dev()->scrub.bytes_read, 3 * 8 * MiB);
	assert_int_equal(dev()->scrub.mismatches, 1);
	assert_int_equal(dev()->scrub.repaired, 1);
	assert_int_equal(dev()->scrub.nr_places, 1);
	assert_int_equal(dev()->scrub.places[0].column, 1);
	assert_int_equal(dev()->scrub.places[0].extent, 0);
	assert_int_equal(dev()->scrub.places[0].replicas, 0x1);
	assert_int_equal(dev()->scrub.places[0].good, 1);
	assert_int_equal(dev()->scrub.places[0].ext_off, 5000);
	assert_int_equal(dev()->scrub.places[0].disk_off, 1 * MiB + 5000);
	assert_int_equal(dev()->scrub.places[0].chunk_off, 0);
	assert_int_equal(dev()->scrub.places[0].chunk_len, 512 * KiB);
	assert_int_equal(lun1[5000], 0);
	/* the repaired server synced its cache */
	assert_true(mock_iscsi_count(1, ISCSI_CMD_SYNC, 0) >= 1);
	assert_int_equal(verify_cmd("status", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out),
			       "scrub mismatch: column 1 extent 0 offset 5000 "
			       "disk 1053576 chunk 0 length 524288 replicas "
			       "0 good 1: repaired"));
	/* a second run is clean and writes nothing */
	from = mock_iscsi.nr_log;
	assert_int_equal(verify_cmd(NULL, NULL, &out), 0);
	RUN_UNTIL(dev()->scrub.state != STRIPE_SCRUB_RUNNING);
	assert_int_equal(dev()->scrub.mismatches, 0);
	for (unsigned int i = 0; i < 4; i++)
		assert_int_equal(mock_iscsi_count(i, ISCSI_CMD_WRITE, from), 0);
	td_strbuf_free(&out);
}

/* A repair that cannot be written: counted, and the replica marked stale. */
static void test_scrub_repair_fails(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	start(&g3, NULL, ",resync_chunk=512K");
	mock_iscsi_data(1)[4096 * 512 + 5000] ^= 0x40;
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_WRITE), 0);
	assert_int_equal(verify_cmd("--repair", NULL, &out), 0);
	RUN_UNTIL(dev()->scrub.state != STRIPE_SCRUB_RUNNING);
	assert_int_equal(dev()->scrub.mismatches, 1);
	assert_int_equal(dev()->scrub.repaired, 0);
	assert_int_equal(dev()->scrub.repair_failed, 1);
	assert_int_equal(dev()->scrub.places[0].outcome,
			 STRIPE_SCRUB_REPAIR_FAILED);
	assert_true(
		dev()->map.slots[stripe_map_slot_index(&dev()->map, 1, 0, 0)]
			.stale);
	RUN_UNTIL(file_stale(1, 0, 0));
	assert_int_equal(verify_cmd("status", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "repair-failed"));
	assert_non_null(strstr(td_strbuf_str(&out), "last error: rewriting"));
	td_strbuf_free(&out);
}

/*
 * G2 (R=2): extent (0, 0) is virtual [0, 64K) and [128K, 192K); a byte
 * flipped on replica 0 (server 0 from LBA 0) at extent offset 70000 is
 * virtual 128K + 4464.  Two live replicas that differ: undecided, nothing
 * written.  With replica 1 stale: not compared at all.
 */
static void test_scrub_r2_undecided(void **state)
{
	struct td_strbuf out;
	unsigned int from;

	td_strbuf_init(&out);
	start(&g2, NULL, ",resync_chunk=32K");
	mock_iscsi_data(0)[70000] = 0x5a;
	from = mock_iscsi.nr_log;
	assert_int_equal(verify_cmd("--repair", NULL, &out), 0);
	RUN_UNTIL(dev()->scrub.state != STRIPE_SCRUB_RUNNING);
	assert_int_equal(dev()->scrub.mismatches, 1);
	assert_int_equal(dev()->scrub.undecided, 1);
	assert_int_equal(dev()->scrub.repaired, 0);
	assert_int_equal(dev()->scrub.places[0].replicas, 0x3);
	assert_int_equal(dev()->scrub.places[0].good, 2);
	assert_int_equal(dev()->scrub.places[0].ext_off, 70000);
	assert_int_equal(dev()->scrub.places[0].disk_off, 128 * KiB + 4464);
	assert_int_equal(dev()->scrub.places[0].outcome,
			 STRIPE_SCRUB_NOT_DECIDED);
	for (unsigned int i = 0; i < 3; i++)
		assert_int_equal(mock_iscsi_count(i, ISCSI_CMD_WRITE, from), 0);
	assert_int_equal(mock_iscsi_data(0)[70000], 0x5a);
	stripe_teardown(state);
	stripe_setup(state);
	start(&g2, g2_stale_001, ",resync_chunk=32K");
	mock_iscsi_data(0)[70000] = 0x5a;
	assert_int_equal(verify_cmd(NULL, NULL, &out), 0);
	RUN_UNTIL(dev()->scrub.state != STRIPE_SCRUB_RUNNING);
	assert_int_equal(dev()->scrub.mismatches, 0);
	/* 4 extents of 4 chunks, one extent has a single live replica */
	assert_int_equal(dev()->scrub.chunks_checked, 12);
	assert_int_equal(dev()->scrub.chunks_skipped, 0);
	td_strbuf_free(&out);
}

/* A server down: its extents are not compared, and reported so. */
static void test_scrub_server_down(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	start(&g2, NULL, ",resync_chunk=64K");
	mock_iscsi_set_state(2, ISCSI_CONN_DOWN);
	assert_int_equal(verify_cmd(NULL, NULL, &out), 0);
	RUN_UNTIL(dev()->scrub.state != STRIPE_SCRUB_RUNNING);
	/* server 2 holds (0, 1) replica 1 and (1, 0) replica 0 */
	assert_int_equal(dev()->scrub.chunks_skipped, 4);
	assert_int_equal(dev()->scrub.skipped_extents, 2);
	assert_int_equal(dev()->scrub.chunks_checked, 4);
	assert_int_equal(dev()->scrub.nr_skips, 2);
	assert_int_equal(dev()->scrub.skips[0].column, 0);
	assert_int_equal(dev()->scrub.skips[0].extent, 1);
	assert_int_equal(dev()->scrub.skips[0].replicas, 0x2);
	assert_int_equal(dev()->scrub.skips[1].column, 1);
	assert_int_equal(dev()->scrub.skips[1].extent, 0);
	assert_int_equal(dev()->scrub.skips[1].replicas, 0x1);
	assert_int_equal(verify_cmd("status", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out),
			       "scrub not compared: column 1 extent 0 "
			       "replicas 0\n"));
	td_strbuf_free(&out);
}

/* A scrub and a resync never run at once; stop; bad words. */
static void test_scrub_control(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	/* 64K/s: extent (0, 0) has one live replica (no read), then a 16K
	 * chunk of (0, 1) from 2 replicas and a pause of about 500 ms */
	start(&g2, g2_stale_001, ",resync_chunk=16K,resync_rate=64K");
	assert_int_equal(verify_cmd("fast", "slow", &out), -EINVAL);
	assert_int_equal(verify_cmd("1K", NULL, &out), -EINVAL);
	assert_int_equal(verify_cmd("stop", NULL, &out), -EALREADY);
	assert_int_equal(verify_cmd(NULL, NULL, &out), 0);
	RUN_UNTIL(dev()->scrub.bytes_read && dev()->scrub.paused);
	assert_int_equal(dev()->scrub.bytes_read, 32 * KiB);
	assert_int_equal(control("handover", "host-b", &out), -EBUSY);
	assert_non_null(strstr(td_strbuf_str(&out), "a scrub is running"));
	assert_int_equal(control("resync", NULL, &out), -EALREADY);
	assert_non_null(strstr(td_strbuf_str(&out), "a scrub (verify) is "
						    "running"));
	assert_int_equal(verify_cmd("stop", NULL, &out), 0);
	assert_int_equal(dev()->scrub.state, STRIPE_SCRUB_STOPPED);
	assert_int_equal(control("resync", NULL, &out), 0);
	assert_int_equal(verify_cmd(NULL, NULL, &out), -EALREADY);
	assert_non_null(strstr(td_strbuf_str(&out), "a resync is running"));
	td_strbuf_free(&out);
}

/* --- moves (re-homing) ----------------------------------------------------------- */

/* "stripe move ..." split at spaces (at most 16 words). */
static int move_cmd(const char *line, struct td_strbuf *out)
{
	char buf[512], *argv[16], *save = NULL;
	int argc = 0;

	snprintf(buf, sizeof(buf), "move %s", line);
	for (char *w = strtok_r(buf, " ", &save); w && argc < 16;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	td_strbuf_reset(out);
	return td_vbd_driver_control(fx->vbd, "stripe", argc, argv, out);
}

/* The file's slot (c, j, r): its server's target and its lba. */
static void file_place(uint32_t c, uint32_t j, uint32_t r, char *target,
		       size_t len, uint64_t *lba, bool *move)
{
	struct stripe_map m;
	struct stripe_map_error err;
	size_t slot;

	assert_int_equal(stripe_map_read(ts.path, &m, &err), 0);
	slot = stripe_map_slot_index(&m, c, j, r);
	snprintf(target, len, "%s", m.servers[m.slots[slot].server].target);
	*lba = m.slots[slot].lba;
	*move = m.moves[slot].active;
	stripe_map_free(&m);
}

#define MOVE_S2                                                  \
	"target=iqn.2026-01.test:s2 lun=1 portal=10.0.0.3:3260 " \
	"address=10.0.0.3 block-size=512"

/* Replica 1 of (0, 0) moves from server 1 to server 2 while written. */
static void test_move_to_known_server(void **state)
{
	struct td_strbuf out;
	char target[STRIPE_MAP_TARGET_SIZE];
	uint64_t lba;
	bool move;
	int step = 0;

	td_strbuf_init(&out);
	start(&g2, NULL, ",auto_resync=off,resync_chunk=16K,resync_rate=1G");
	fill(0, 41, IO_BYTES);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, IO_BYTES), 0);
	assert_int_equal(move_cmd("add 0 0 1 " MOVE_S2 " lba=512", &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "added"));
	assert_int_equal(move_cmd("add 0 0 1 " MOVE_S2 " lba=512", &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "already"));
	assert_int_equal(move_cmd("add 0 0 1 " MOVE_S2 " lba=768", &out),
			 -EBUSY);
	while (dev()->moves_done == 0 && step < 100) {
		fill(2, 200 + step, 4096);
		assert_int_equal(do_io(2, TD_OP_WRITE,
				       (step * 12 * KiB) % (64 * KiB) +
					       (step % 2 ? 128 * KiB : 0),
				       4096),
				 0);
		step++;
	}
	RUN_UNTIL(dev()->moves_done == 1);
	assert_true(step > 1);
	RUN_UNTIL(stripe_stale_pending(dev()) == 0);
	file_place(0, 0, 1, target, sizeof(target), &lba, &move);
	assert_string_equal(target, "iqn.2026-01.test:s2");
	assert_int_equal(lba, 512);
	assert_false(move);
	/* the new place holds the extent: server 0's copy at lba 0 */
	assert_memory_equal(mock_iscsi_data(2) + 512 * 512, mock_iscsi_data(0),
			    128 * KiB);
	/* writes go to the new place, no more to the old one */
	fill(3, 77, 4096);
	assert_int_equal(do_io(3, TD_OP_WRITE, 4096, 4096), 0);
	assert_memory_equal(mock_iscsi_data(2) + 512 * 512 + 4096, ts.buf[3],
			    4096);
	assert_memory_not_equal(mock_iscsi_data(1) + 4096, ts.buf[3], 4096);
	assert_int_equal(move_cmd("add 0 0 1 " MOVE_S2 " lba=512", &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "done"));
	td_strbuf_free(&out);
}

/* To a server the disk did not use: added, then in the map. */
static void test_move_to_new_server(void **state)
{
	struct td_strbuf out;
	char target[STRIPE_MAP_TARGET_SIZE];
	uint64_t lba;
	bool move;

	td_strbuf_init(&out);
	start(&g2, NULL, ",auto_resync=off,resync_rate=1G");
	mock_iscsi.setup[3].block_size = 512;
	fill(0, 43, IO_BYTES);
	assert_int_equal(do_io(0, TD_OP_WRITE, 128 * KiB, IO_BYTES), 0);
	assert_int_equal(move_cmd("add 0 0 0 target=iqn.2026-01.test:s3 lun=1 "
				  "portal=10.0.0.4:3260 address=10.0.0.4 "
				  "block-size=512 lba=0",
				  &out),
			 0);
	RUN_UNTIL(dev()->moves_done == 1 && stripe_stale_pending(dev()) == 0);
	file_place(0, 0, 0, target, sizeof(target), &lba, &move);
	assert_string_equal(target, "iqn.2026-01.test:s3");
	assert_memory_equal(mock_iscsi_data(3), mock_iscsi_data(1), 128 * KiB);
	/* the file opens again, and reads come from the new place */
	td_vbd_close(fx->vbd);
	fx->vbd = NULL;
	assert_int_equal(open_stripe(NULL), 0);
	assert_int_equal(dev()->map.nr_servers, 4);
	td_strbuf_free(&out);
}

static void test_move_abort_and_refusals(void **state)
{
	struct td_strbuf out;
	char target[STRIPE_MAP_TARGET_SIZE];
	uint64_t lba;
	bool move;

	td_strbuf_init(&out);
	/* a slow copy: 16K at 64K/s */
	start(&g2, NULL, ",auto_resync=off,resync_chunk=16K,resync_rate=64K");
	assert_int_equal(move_cmd("add 0 0 1", &out), -EINVAL);
	assert_int_equal(move_cmd("add 9 0 1 " MOVE_S2 " lba=512", &out),
			 -EINVAL);
	assert_int_equal(move_cmd("add 0 0 1 target=iqn.2026-01.test:s2 lun=1 "
				  "portal=10.0.0.3:3260 address=10.0.0.3 "
				  "block-size=4096 lba=512",
				  &out),
			 -EINVAL); /* not s2's block size */
	assert_int_equal(
		move_cmd("add 0 0 1 " MOVE_S2 " lba=512 bogus=1", &out),
		-EINVAL);
	assert_int_equal(move_cmd("add 0 0 1 " MOVE_S2 " lba=512", &out), 0);
	RUN_UNTIL(stripe_stale_pending(dev()) == 0);
	file_place(0, 0, 1, target, sizeof(target), &lba, &move);
	assert_true(move); /* the move line is in the file */
	assert_int_equal(move_cmd("status", &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "move 0 0 1: "
						    "iqn.2026-01.test:s2"));
	assert_int_equal(move_cmd("abort 0 0 1", &out), -EBUSY); /* copying */
	assert_int_equal(control("resync", "stop", &out), 0);
	RUN_UNTIL(dev()->resync.state != STRIPE_RESYNC_RUNNING);
	assert_int_equal(move_cmd("abort 0 0 1", &out), 0);
	RUN_UNTIL(stripe_stale_pending(dev()) == 0);
	file_place(0, 0, 1, target, sizeof(target), &lba, &move);
	assert_false(move);
	assert_string_equal(target, "iqn.2026-01.test:s1");
	assert_int_equal(move_cmd("abort 0 0 1", &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "no move"));
	td_strbuf_free(&out);
}

/* --- control, reports, open errors ------------------------------------------- */

static void test_control_and_reports(void **state)
{
	struct td_strbuf out, sb;
	struct td_json j;
	char *argv[1] = {(char *)"status"};

	td_strbuf_init(&out);
	td_strbuf_init(&sb);
	start(&g2, NULL, NULL);
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_int_equal(td_vbd_driver_control(fx->vbd, "sort", 1, argv, &out),
			 -ENOENT);
	assert_int_equal(control("bogus", NULL, &out), -EINVAL);
	assert_int_equal(control("resync", "fast", &out), -EINVAL);
	assert_int_equal(control("resync", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "nothing to resync"));
	assert_int_equal(control("status", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "server 2"));
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_vbd_report_drivers_json(fx->vbd, &j);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), 0);
	assert_non_null(strstr(td_strbuf_str(&sb), "\"stale_replicas\": 0"));
	assert_non_null(strstr(td_strbuf_str(&sb), "\"geometry\": \"ok\""));
	td_strbuf_reset(&sb);
	td_vbd_report_drivers_text(fx->vbd, &sb);
	assert_non_null(strstr(td_strbuf_str(&sb), "driver stripe"));
	td_strbuf_free(&out);
	td_strbuf_free(&sb);
}

static void test_open_errors(void **state)
{
	struct td_vbd *second;
	char chain[256];
	struct td_vbd_params p = {.name = "two", .chain = chain};

	assert_int_equal(open_stripe(NULL), -ENOENT); /* no file yet */
	make_map(&g4, NULL);
	assert_int_equal(open_stripe(",queue_depth=0"), -EINVAL);
	assert_int_equal(open_stripe(",resync_chunk=1000"), -EINVAL);
	assert_int_equal(open_stripe(",colour=blue"), -EINVAL);
	assert_int_equal(open_stripe(",degraded_grace_ms=-1"), -EINVAL);
	assert_int_equal(open_stripe(",degraded_grace_ms=3600001"), -EINVAL);
	assert_int_equal(mock_iscsi.nr_created, mock_iscsi.nr_destroyed);
	assert_int_equal(open_stripe(",queue_depth=8,cmd_timeout_ms=500"), 0);
	assert_int_equal(dev()->opts.degraded_grace_ms,
			 STRIPE_DEFAULT_DEGRADED_GRACE_MS);
	/* one opener at a time */
	snprintf(chain, sizeof(chain), "stripe:%s", ts.path);
	assert_int_equal(td_vbd_open(fx->loop, table, &p, &second), -EBUSY);
	p.chain = "stripe:";
	assert_int_equal(td_vbd_open(fx->loop, table, &p, &second), -EINVAL);
}

/* --- servers on a local device (a kernel iSCSI session's) ----------------------- */

/*
 * Server 2 of G2 (512-byte blocks, extents at LBA 0 and 256: 256 KiB
 * needed) is a file of size bytes behind the device backend (libaio,
 * O_DIRECT); servers 0 and 1 stay on the in-memory iSCSI mock.
 */
static void device_file(off_t size)
{
	int fd;

	snprintf(ts.device[2], sizeof(ts.device[2]), "%s/dev2", ts.dir);
	fd = open(ts.device[2], O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
}

static void device_read(uint64_t off, void *buf, size_t len)
{
	int fd = open(ts.device[2], O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

static void device_stats(struct iscsi_conn_stats *st)
{
	const struct stripe_server *srv = &dev()->servers[2];

	srv->ops->get_stats(srv->be, st);
}

static void test_device_replica(void **state)
{
	static unsigned char got[IO_BYTES], zero[IO_BYTES];
	struct iscsi_conn_stats st;
	struct td_strbuf sb;
	unsigned int from;

	device_file(256 * KiB);
	start(&g2, NULL, NULL);
	assert_ptr_equal(dev()->servers[2].ops, &stripe_backend_device);
	assert_ptr_equal(dev()->servers[0].ops, &stripe_backend_iscsi);
	assert_int_equal(mock_iscsi.nr_created, 2); /* no session for it */

	/* k=4: server 1 LBA 35 (4K blocks), server 2 LBA 24 */
	fill(0, 5, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_memory_equal(mock_iscsi_data(1) + 35 * 4096, ts.buf[0], 4096);
	device_read(24 * 512, got, 4096);
	assert_memory_equal(got, ts.buf[0], 4096);
	/* k=1 with FUA: server 2 LBA 264, server 0 LBA 264 */
	fill(1, 6, 8192);
	submit(1, TD_OP_WRITE, 68 * KiB, 8192, TD_REQ_FUA);
	RUN_UNTIL(fx->calls[1]);
	assert_int_equal(fx->err[1], 0);
	device_read(264 * 512, got, 8192);
	assert_memory_equal(got, ts.buf[1], 8192);
	assert_memory_equal(mock_iscsi_data(0) + 264 * 512, ts.buf[1], 8192);

	/* Server 1 fails reads: they come from the device. */
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_READ), 0);
	for (int i = 0; i < 4; i++) {
		memset(ts.buf[2], 0xee, 4096);
		assert_int_equal(do_io(2, TD_OP_READ, 268 * KiB, 4096), 0);
		assert_memory_equal(ts.buf[2], ts.buf[0], 4096);
	}
	device_stats(&st);
	assert_true(st.reads >= 4);
	assert_int_equal(st.writes, 2);
	assert_int_equal(st.write_bytes, 12 * KiB);
	assert_int_equal(st.errors, 0);

	/* A flush reaches the device (fdsync), zeroes are written. */
	assert_int_equal(do_io(0, TD_OP_FLUSH, 0, 0), 0);
	assert_int_equal(do_io(0, TD_OP_WRITE_ZEROES, 268 * KiB, 4096), 0);
	device_read(24 * 512, got, 4096);
	assert_memory_equal(got, zero, 4096);
	/* A discard would leave the device's copy: it is not sent at all. */
	from = mock_iscsi.nr_log;
	assert_int_equal(do_io(0, TD_OP_DISCARD, 268 * KiB, 4096), 0);
	assert_int_equal(mock_iscsi_count(1, ISCSI_CMD_UNMAP, from), 0);
	device_stats(&st);
	assert_int_equal(st.syncs, 1);
	assert_int_equal(st.write_zeroes, 1);
	assert_int_equal(nr_file_stale(), 0);

	td_strbuf_init(&sb);
	td_stripe_ops.report_text(&fx->vbd->drivers[0], &sb);
	assert_non_null(strstr(td_strbuf_str(&sb), "(device "));
	assert_non_null(strstr(td_strbuf_str(&sb), ts.device[2]));
	td_strbuf_free(&sb);
}

/* The session is not logged in: the device is DOWN, its replicas stale. */
static void test_device_missing(void **state)
{
	snprintf(ts.device[2], sizeof(ts.device[2]),
		 "/dev/disk/by-path/ip-10.0.0.3:3260-iscsi-none-lun-1");
	start(&g2, NULL, NULL);
	assert_int_equal(dev()->servers[2].ops->state(dev()->servers[2].be),
			 ISCSI_CONN_DOWN);
	fill(0, 7, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_true(file_stale(0, 1, 1));
	assert_false(file_stale(0, 1, 0));
	assert_int_equal(do_io(1, TD_OP_READ, 268 * KiB, 4096), 0);
	assert_memory_equal(ts.buf[1], ts.buf[0], 4096);
}

/* The state of server 2's device backend. */
static enum iscsi_conn_state device_state(void)
{
	return dev()->servers[2].ops->state(dev()->servers[2].be);
}

/* Run the loop for about ms milliseconds, or until the device is UP. */
static void device_wait_up(unsigned int ms)
{
	uint64_t end = td_now_ns() + (uint64_t)ms * 1000000;

	while (device_state() != ISCSI_CONN_UP && td_now_ns() < end)
		td_loop_run_once(fx->loop, 50);
}

/*
 * The device appears after the disk was opened (the session logged in
 * late): it is opened again after 1 s, then 2 s, ...; once UP, writes
 * reach it again and mark nothing.
 */
static void test_device_appears(void **state)
{
	static unsigned char got[8192];
	struct iscsi_conn_stats st;

	snprintf(ts.device[2], sizeof(ts.device[2]), "%s/dev2", ts.dir);
	start(&g2, NULL, NULL);
	assert_int_equal(device_state(), ISCSI_CONN_DOWN);
	device_stats(&st);
	assert_int_equal(st.login_failures, 1);
	device_wait_up(1300); /* the retry after 1 s fails too */
	assert_int_equal(device_state(), ISCSI_CONN_DOWN);
	device_stats(&st);
	assert_int_equal(st.login_failures, 2);

	device_file(256 * KiB);
	device_wait_up(3000); /* the next retry, 2 s after the last */
	assert_int_equal(device_state(), ISCSI_CONN_UP);
	device_stats(&st);
	assert_int_equal(st.login_failures, 2);
	/* k=1: server 2 LBA 264, server 0 LBA 264 */
	fill(1, 9, 8192);
	assert_int_equal(do_io(1, TD_OP_WRITE, 68 * KiB, 8192), 0);
	device_read(264 * 512, got, 8192);
	assert_memory_equal(got, ts.buf[1], 8192);
	assert_int_equal(nr_file_stale(), 0);
	assert_int_equal(dev()->servers[2].gate, STRIPE_GATE_OK);
}

/* Open file descriptors of this process. */
static int nr_open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/*
 * A path that does not open with O_DIRECT (/dev/null: EINVAL): DOWN,
 * tried again, and no try leaves a descriptor open.
 */
static void test_device_retry_leaks_nothing(void **state)
{
	struct iscsi_conn_stats st;
	int fds;

	snprintf(ts.device[2], sizeof(ts.device[2]), "/dev/null");
	start(&g2, NULL, NULL);
	assert_int_equal(device_state(), ISCSI_CONN_DOWN);
	fds = nr_open_fds();
	device_wait_up(1300); /* the retry after 1 s: the same */
	assert_int_equal(device_state(), ISCSI_CONN_DOWN);
	device_stats(&st);
	assert_int_equal(st.login_failures, 2);
	assert_int_equal(nr_open_fds(), fds);
}

/* A device smaller than its extents: the gate refuses it. */
static void test_device_too_small(void **state)
{
	device_file(64 * KiB);
	start(&g2, NULL, NULL);
	fill(0, 8, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_int_equal(dev()->servers[2].gate, STRIPE_GATE_BAD);
	assert_int_equal(dev()->gate_failures, 1);
	assert_true(file_stale(0, 1, 1));
}

/* --- device servers fenced through SG_IO (mock-sgio.c) ------------------------------ */

/*
 * Server 2 is a device (a file behind libaio) whose SG_IO is answered by
 * the fake LUN of mock-sgio.c (the ioctl is wrapped): its admission runs
 * the same decisions as the iscsi servers', through the backend's worker.
 */
static void device_fenced_start(void)
{
	device_file(256 * KiB);
	mock_sgio.on = true;
	start(&g2, NULL, NULL);
	assert_true(dev()->fence.on);
}

/* A fresh LUN: key absent, the master says we hold the disk: REGISTER,
 * READ RESERVATION, RESERVE; the write held meanwhile goes out after. */
static void test_device_fence_fresh(void **state)
{
	static unsigned char got[4096];
	uint64_t key = iscsi_conn_pr_key("host-a");

	device_fenced_start();
	assert_int_equal(device_state(), ISCSI_CONN_ADMITTING);
	assert_true(fence_is(2, STRIPE_FENCE_ADMITTING));
	fill(0, 5, 4096);
	submit(0, TD_OP_WRITE, 268 * KiB, 4096, 0); /* servers 1 and 2 */
	wait_registered();
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
	device_read(24 * 512, got, 4096);
	assert_memory_equal(got, ts.buf[0], 4096);
	assert_string_equal(mock_sgio_trace(0), "KGVR");
	mock_sgio_lock();
	assert_int_equal(mock_sgio.mine, key);
	assert_true(mock_sgio.reserved);
	assert_int_equal(mock_sgio.holder, key);
	assert_int_equal(mock_sgio.type, ISCSI_PR_TYPE_WERO);
	mock_sgio_unlock();
	assert_int_equal(device_state(), ISCSI_CONN_UP);
	assert_int_equal(dev()->servers[2].fence.admissions, 1);
}

/* Our key is there (a restarted tapdisk), another host holds the WERO
 * reservation: REGISTER, READ KEYS (generation + 1), admitted without
 * asking the master; the reservation stays theirs. */
static void test_device_fence_rejoin(void **state)
{
	uint64_t key = iscsi_conn_pr_key("host-a");
	uint64_t theirs = iscsi_conn_pr_key("host-b");

	mock_sgio.mine = key;
	mock_sgio.others[mock_sgio.nr_others++] = theirs;
	mock_sgio.reserved = true;
	mock_sgio.holder = theirs;
	mock_sgio.type = ISCSI_PR_TYPE_WERO;
	mock_sgio.generation = 41;
	device_fenced_start();
	wait_registered();
	assert_string_equal(mock_sgio_trace(0), "KGKV");
	mock_sgio_lock();
	assert_int_equal(mock_sgio.generation, 42);
	assert_int_equal(mock_sgio.holder, theirs);
	mock_sgio_unlock();
	fill(0, 6, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
}

/* Preempted while away: our key gone, the master says host-b holds the
 * disk: UNREGISTER, FENCED; writes fail with EACCES, nothing stale, the
 * device untouched. */
static void test_device_fence_preempted(void **state)
{
	static unsigned char got[4096], zero[4096];

	mock_sgio.others[mock_sgio.nr_others++] = iscsi_conn_pr_key("host-b");
	snprintf(fq.show_holder, sizeof(fq.show_holder), "host-b");
	device_fenced_start();
	RUN_UNTIL(fence_is(2, STRIPE_FENCE_FENCED));
	assert_string_equal(mock_sgio_trace(0), "KU");
	RUN_UNTIL(device_state() == ISCSI_CONN_FENCED);
	fill(0, 7, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), -EACCES);
	assert_int_equal(nr_file_stale(), 0);
	device_read(24 * 512, got, 4096);
	assert_memory_equal(got, zero, 4096);
	mock_sgio_lock();
	assert_int_equal(mock_sgio.mine, 0);
	mock_sgio_unlock();
}

/* Admitted, then the registration is lost (a kernel session reinstated):
 * a write completes with EBADE: the request fails with EACCES, nothing
 * stale, and the device is admitted again through the decision (key
 * absent: the master is asked); the next write goes through. */
static void test_device_fence_conflict_readmits(void **state)
{
	struct iscsi_conn_stats st;
	unsigned int from, shows;

	device_fenced_start();
	wait_registered();
	fill(0, 8, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	mock_sgio_lock();
	mock_sgio.mine = 0;
	mock_sgio.reserved = false;
	mock_sgio.conflict_writes = 1;
	from = mock_sgio.nr_log;
	mock_sgio_unlock();
	shows = fq.shows;
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), -EACCES);
	assert_int_equal(nr_file_stale(), 0);
	RUN_UNTIL(device_state() == ISCSI_CONN_UP);
	assert_string_equal(mock_sgio_trace(from), "KGVR");
	assert_true(fq.shows > shows);
	assert_true(fence_is(2, STRIPE_FENCE_REGISTERED));
	assert_int_equal(dev()->servers[2].fence.admissions, 2);
	device_stats(&st);
	assert_int_equal(st.reservation_conflicts, 1);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_int_equal(nr_file_stale(), 0);
}

/* A conflict with our key still listed: re-registered without asking
 * the master; a second conflict with nothing done well since: FENCED,
 * every later write refused. */
static void test_device_fence_conflict_twice(void **state)
{
	unsigned int from, shows;

	device_fenced_start();
	wait_registered();
	fill(0, 9, 4096);
	mock_sgio_lock();
	mock_sgio.conflict_writes = 1;
	from = mock_sgio.nr_log;
	mock_sgio_unlock();
	shows = fq.shows;
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), -EACCES);
	RUN_UNTIL(device_state() == ISCSI_CONN_UP);
	assert_string_equal(mock_sgio_trace(from), "KGKV");
	assert_int_equal(fq.shows, shows);
	mock_sgio_lock();
	mock_sgio.conflict_writes = 1;
	mock_sgio_unlock();
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), -EACCES);
	assert_int_equal(device_state(), ISCSI_CONN_FENCED);
	assert_true(fence_is(2, STRIPE_FENCE_FENCED));
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), -EACCES);
	assert_int_equal(nr_file_stale(), 0);
}

/* Admitted again with the master away: the device stays ADMITTING; a
 * command that must reach it (a read whose other replica fails) is held,
 * then fails with ETIMEDOUT after cmd_timeout_ms, not never; the master
 * back, the device is admitted. */
static void test_device_fence_held_deadline(void **state)
{
	struct iscsi_conn_stats st;

	device_file(256 * KiB);
	mock_sgio.on = true;
	start(&g2, NULL, ",cmd_timeout_ms=300");
	wait_registered();
	fill(0, 11, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	mock_sgio_lock();
	mock_sgio.mine = 0;
	mock_sgio.reserved = false;
	mock_sgio.conflict_writes = 1;
	mock_sgio_unlock();
	fq.show_ret = -ECONNREFUSED;
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), -EACCES);
	RUN_FOR_MS(50);
	assert_int_equal(device_state(), ISCSI_CONN_ADMITTING);
	mock_iscsi_fail(1, -EIO, MOCK_ISCSI_OP(ISCSI_CMD_READ), 0);
	submit(1, TD_OP_READ, 268 * KiB, 4096, 0);
	RUN_FOR_MS(100);
	assert_int_equal(fx->calls[1], 0); /* held by the device */
	RUN_UNTIL(fx->calls[1]);
	assert_int_not_equal(fx->err[1], 0);
	device_stats(&st);
	assert_int_equal(st.timeouts, 1);
	fq.show_ret = 0;
	RUN_UNTIL(device_state() == ISCSI_CONN_UP); /* asked again in 2 s */
	assert_true(fence_is(2, STRIPE_FENCE_REGISTERED));
}

/* A SCSI LUN without persistent reservations (ILLEGAL REQUEST): held and
 * tried again, as a session's LUN; admitted once it answers. */
static void test_device_fence_no_pr(void **state)
{
	mock_sgio.illegal = true;
	device_fenced_start();
	RUN_FOR_MS(100);
	assert_int_equal(device_state(), ISCSI_CONN_ADMITTING);
	assert_true(fence_is(2, STRIPE_FENCE_ADMITTING));
	mock_sgio_lock();
	mock_sgio.illegal = false;
	mock_sgio_unlock();
	RUN_UNTIL(device_state() == ISCSI_CONN_UP); /* 2 s later */
	assert_true(fence_is(2, STRIPE_FENCE_REGISTERED));
}

/* A regular file (the real ioctl: ENOTTY): not fenced, served. */
static void test_device_not_scsi(void **state)
{
	device_file(256 * KiB);
	start(&g2, NULL, NULL);
	RUN_UNTIL(device_state() == ISCSI_CONN_UP);
	assert_true(fence_is(2, STRIPE_FENCE_OFF));
	assert_true(dev()->servers[2].fence.logged_not_scsi);
	fill(0, 10, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_int_equal(nr_file_stale(), 0);
}

/* The same under lease=off: no admission at all, UP at once. */
static void test_device_lease_off(void **state)
{
	device_file(256 * KiB);
	mock_sgio.on = true;
	start(&g2, NULL, ",lease=off");
	assert_int_equal(device_state(), ISCSI_CONN_UP);
	assert_false(dev()->fence.on);
	assert_int_equal(do_io(0, TD_OP_WRITE, 268 * KiB, 4096), 0);
	assert_string_equal(mock_sgio_trace(0), "");
}

/* --- the lease ----------------------------------------------------------------------- */

/* The decision of open: (call's result, reply) -> serve, or a refusal. */
struct verdict_row {
	int ret;
	ms_status status;
	const char *holder; /* NULL: no body */
	uint64_t epoch;
	bool fence_pending;
	int want;
	const char *says[3];
};

static const struct verdict_row verdicts[] = {
	{0, MS_OK, "host-a", 3, false, 0, {NULL}},
	{-EBUSY,
	 MS_EHELD,
	 "host-b",
	 4,
	 false,
	 -EBUSY,
	 {"held by host host-b (lease epoch 4)", "stripe handover host-a",
	  "takeover t1 --fence"}},
	{-EPERM,
	 MS_EFENCED,
	 "host-b",
	 5,
	 false,
	 -EPERM,
	 {"was fenced", "stripe-ctl host readmit host-a", NULL}},
	{0,
	 MS_OK,
	 "host-a",
	 6,
	 true,
	 -EAGAIN,
	 {"not fenced yet", "takeover t1 --fence", "host-old"}},
	{-ECONNREFUSED,
	 MS_OK,
	 NULL,
	 0,
	 false,
	 -EHOSTUNREACH,
	 {"cannot reach the master at 127.0.0.1:7700",
	  "disks already running are not affected",
	  "start the master or check the network"}},
	{-ETIMEDOUT, MS_OK, NULL, 0, false, -EHOSTUNREACH, {"cannot reach"}},
	{-ENOENT,
	 MS_ENOENT,
	 NULL,
	 0,
	 false,
	 -ENOENT,
	 {"refused the lease of vdisk t1: no vdisk t1"}},
	/* an OK that names another holder is never served */
	{0, MS_OK, "host-b", 2, false, -EBUSY, {"held by host host-b"}},
	/* an OK without the lease */
	{0, MS_OK, NULL, 0, false, -EBUSY, {"held by host ?"}},
	/* EPERM that is not a fence: the master's own message */
	{-EPERM, MS_EPERM, NULL, 0, false, -EPERM, {"refused the lease"}},
};

static void test_lease_verdict(void **state)
{
	struct stripe_lease_ctx ctx = {"t1", "host-a", "127.0.0.1:7700",
				       "no vdisk t1"};

	for (size_t i = 0; i < sizeof(verdicts) / sizeof(verdicts[0]); i++) {
		const struct verdict_row *v = &verdicts[i];
		uint64_t epoch = 99;
		char msg[512] = "";
		ms_reply rep;

		fm.fence_pending = v->fence_pending;
		if (v->holder)
			fake_lease(&rep, v->status, v->holder, v->epoch);
		else
			master_reply_init(&rep);
		assert_int_equal(stripe_lease_verdict(v->ret, &rep, &ctx,
						      &epoch, msg, sizeof(msg)),
				 v->want);
		if (!v->want)
			assert_int_equal(epoch, v->epoch);
		for (int k = 0; k < 3 && v->says[k]; k++)
			if (!strstr(msg, v->says[k]))
				fail_msg("row %zu: '%s' lacks '%s'", i, msg,
					 v->says[k]);
		master_reply_free(&rep);
	}
}

/* A map naming several masters: the client's error names each (#23). */
static void test_lease_verdict_list(void **state)
{
	struct stripe_lease_ctx ctx = {"t1", "host-a", "a:7700,b:7700",
				       "no master of 2 answered (tried a:7700: "
				       "Connection refused; b:7700: no answer "
				       "within 5000 ms)"};
	uint64_t epoch = 99;
	char msg[1024] = "";
	ms_reply rep;

	master_reply_init(&rep);
	assert_int_equal(stripe_lease_verdict(-ETIMEDOUT, &rep, &ctx, &epoch,
					      msg, sizeof(msg)),
			 -EHOSTUNREACH);
	assert_non_null(strstr(msg, "cannot reach the master at "
				    "a:7700,b:7700 to take the lease of vdisk "
				    "t1 (no master of 2 answered (tried "
				    "a:7700: Connection refused; b:7700: no "
				    "answer within 5000 ms))"));
}

static int open_refused(const char *opts, char *reason)
{
	char chain[256];
	struct td_vbd_open_error err = {0};
	struct td_vbd_params p = {
		.name = "test", .chain = chain, .error = &err};
	int ret;

	snprintf(chain, sizeof(chain), "stripe:%s%s", ts.path,
		 opts ? opts : "");
	ret = td_vbd_open(fx->loop, table, &p, &fx->vbd);
	snprintf(reason, TD_VBD_REASON_MAX, "%s", err.reason);
	return ret;
}

/* Every refusal fails the open before any connection, naming why. */
static void test_lease_refusals(void **state)
{
	char reason[TD_VBD_REASON_MAX];

	make_map(&g2, NULL);
	fm.acquire_ret = -EBUSY;
	fm.status = MS_EHELD;
	snprintf(fm.holder, sizeof(fm.holder), "host-b");
	assert_int_equal(open_refused(NULL, reason), -EBUSY);
	assert_non_null(strstr(reason, "held by host host-b"));
	assert_string_equal(fm.last_host, "host-a");
	assert_int_equal(mock_iscsi.nr_created, 0);
	fm.acquire_ret = -EPERM;
	fm.status = MS_EFENCED;
	assert_int_equal(open_refused(NULL, reason), -EPERM);
	assert_non_null(strstr(reason, "stripe-ctl host readmit host-a"));
	fm.acquire_ret = -ECONNREFUSED;
	fm.holder[0] = '\0';
	assert_int_equal(open_refused(NULL, reason), -EHOSTUNREACH);
	assert_non_null(strstr(reason, "master at 127.0.0.1:7700"));
	fm.acquire_ret = 0;
	fm.fence_pending = true;
	assert_int_equal(open_refused(NULL, reason), -EAGAIN);
	assert_non_null(strstr(reason, "takeover t1 --fence"));
	setenv("TAPSTRIPE_HOST_ID", "bad host", 1);
	assert_int_equal(open_refused(NULL, reason), -EINVAL);
	assert_non_null(strstr(reason, "TAPSTRIPE_HOST_ID"));
	assert_int_equal(open_refused(",lease=maybe", reason), -EINVAL);
	assert_int_equal(mock_iscsi.nr_created, 0);
	assert_int_equal(fm.acquires, 4);
}

static void test_lease_held_and_off(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	start(&g2, NULL, NULL);
	assert_int_equal(fm.acquires, 1);
	assert_true(dev()->lease.enabled);
	assert_int_equal(dev()->lease.epoch, 7);
	assert_int_equal(dev()->lease.key, iscsi_conn_pr_key("host-a"));
	assert_int_equal(control("lease", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out),
			       "lease: held, holder host-a, epoch 7"));
	/* tap-ctl info's part */
	td_strbuf_reset(&out);
	td_vbd_info_drivers_text(fx->vbd, &out);
	assert_non_null(strstr(td_strbuf_str(&out), "holder host-a, epoch 7"));
	td_vbd_close(fx->vbd);
	fx->vbd = NULL;
	assert_int_equal(open_stripe(",lease=off"), 0);
	assert_int_equal(fm.acquires, 1); /* not asked */
	assert_false(dev()->lease.enabled);
	assert_string_equal(stripe_lease_state(dev()), "off");
	assert_int_equal(do_io(0, TD_OP_WRITE, 0, 4096), 0);
	assert_int_equal(control("handover", "host-b", &out), -EINVAL);
	td_strbuf_free(&out);
}

/* Start a hand-over while a write is in flight on server 0 (held). */
static void handover_under_write(struct td_strbuf *out)
{
	start(&g2, NULL, NULL);
	mock_iscsi_hold(0, true);
	submit(0, TD_OP_WRITE, 0, 4096, 0);
	RUN_UNTIL(mock_iscsi_nr_held(0) == 1);
	assert_int_equal(control("handover", "host-b", out), 0);
	assert_non_null(strstr(td_strbuf_str(out), "draining"));
	submit(1, TD_OP_WRITE, 64 * KiB, 4096, 0); /* held by the lease */
	/* reads go on: column 0 extent 1, servers 1 and 2 */
	assert_int_equal(do_io(2, TD_OP_READ, 256 * KiB, 4096), 0);
	for (int n = 0; n < 20; n++)
		td_loop_run_once(fx->loop, 2);
	assert_int_equal(fx->calls[1], 0);
	assert_int_equal(fm.handovers, 0); /* the write is still in flight */
	mock_iscsi_hold(0, false);
	mock_iscsi_release(0, 0);
	RUN_UNTIL(fx->calls[0]);
	assert_int_equal(fx->err[0], 0);
}

static void test_handover(void **state)
{
	struct td_strbuf out;
	unsigned int log0 = 0;

	td_strbuf_init(&out);
	handover_under_write(&out);
	log0 = mock_iscsi.nr_log;
	RUN_UNTIL(dev()->lease.handed_over);
	assert_int_equal(fm.handovers, 1);
	assert_string_equal(fm.last_to, "host-b");
	assert_int_equal(fm.last_epoch, 7);
	/* a SYNCHRONIZE CACHE on every server before the call */
	for (unsigned int i = 0; i < 3; i++)
		assert_true(mock_iscsi_count(i, ISCSI_CMD_SYNC, 0) >= 1);
	RUN_UNTIL(fx->calls[1]);
	assert_int_equal(fx->err[1], -EACCES);
	assert_int_equal(mock_iscsi_count(0, ISCSI_CMD_WRITE, log0) +
				 mock_iscsi_count(1, ISCSI_CMD_WRITE, log0) +
				 mock_iscsi_count(2, ISCSI_CMD_WRITE, log0),
			 0);
	assert_int_equal(do_io(3, TD_OP_READ, 0, 4096), -EACCES);
	assert_int_equal(do_io(3, TD_OP_WRITE, 0, 4096), -EACCES);
	assert_int_equal(control("handover", "host-b", &out), 0);
	assert_non_null(
		strstr(td_strbuf_str(&out), "held by host-b at epoch 8"));
	assert_int_equal(control("lease", NULL, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "handed-over, holder "
						    "host-b, epoch 8"));
	assert_int_equal(control("handover", "host-c", &out), -EBUSY);
	td_strbuf_free(&out);
}

static void test_handover_refused(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	fm.handover_ret = -ECONNREFUSED;
	handover_under_write(&out);
	RUN_UNTIL(fx->calls[1]); /* the held write goes on */
	assert_int_equal(fx->err[1], 0);
	assert_int_equal(fm.handovers, 1);
	assert_false(dev()->lease.handed_over);
	assert_int_equal(control("handover", "host-b", &out), -EIO);
	assert_non_null(strstr(td_strbuf_str(&out), "failed"));
	assert_int_equal(do_io(3, TD_OP_WRITE, 0, 4096), 0);
	/* bad input */
	assert_int_equal(control("handover", "host a", &out), -EINVAL);
	assert_int_equal(control("handover", "host-a", &out), -EINVAL);
	assert_int_equal(control("lease", "x", &out), -EINVAL);
	/* the master answers again: a second try succeeds */
	fm.handover_ret = 0;
	assert_int_equal(control("handover", "host-b", &out), 0);
	RUN_UNTIL(dev()->lease.handed_over);
	assert_int_equal(do_io(3, TD_OP_WRITE, 0, 4096), -EACCES);
	td_strbuf_free(&out);
}

static bool lease_says(const char *what)
{
	struct td_strbuf sb;
	bool found;

	td_strbuf_init(&sb);
	stripe_lease_report_text(dev(), &sb);
	found = strstr(td_strbuf_str(&sb), what) != NULL;
	td_strbuf_free(&sb);
	return found;
}

/* A call that may have run on the master keeps the writes held. */
static void test_handover_uncertain(void **state)
{
	struct td_strbuf out;

	td_strbuf_init(&out);
	fm.handover_ret = -ETIMEDOUT;
	handover_under_write(&out);
	RUN_UNTIL(fm.handovers == 1 && lease_says("hand-over to host-b: "
						  "unknown"));
	for (int n = 0; n < 20; n++)
		td_loop_run_once(fx->loop, 2);
	assert_int_equal(fx->calls[1], 0);
	fm.handover_ret = 0;
	assert_int_equal(control("handover", "host-b", &out), 0);
	RUN_UNTIL(fx->calls[1]);
	assert_int_equal(fx->err[1], -EACCES);
	assert_true(dev()->lease.handed_over);
	td_strbuf_free(&out);
}

/* --- base:allocation (stripe-alloc.c) ------------------------------------ */

/* One extent of an expected block status answer (512-byte sectors). */
struct bs_row {
	uint64_t nr_sectors;
	uint32_t flags;
};

#define HOLE_Z (TD_EXTENT_HOLE | TD_EXTENT_ZERO)

static void expect_status(uint64_t off, uint64_t len, const struct bs_row *exp,
			  unsigned int nr_exp)
{
	struct td_extent ext[16];
	unsigned int nr = 16;

	assert_int_equal(td_vbd_block_status(fx->vbd, TD_CTX_BASE_ALLOCATION,
					     off >> 9, len >> 9, ext, &nr),
			 0);
	assert_int_equal(nr, nr_exp);
	for (unsigned int i = 0; i < nr; i++) {
		assert_int_equal(ext[i].nr_sectors, exp[i].nr_sectors);
		assert_int_equal(ext[i].flags, exp[i].flags);
	}
}

/*
 * G2 (S=2, U=64K, E=128K, R=2): data at column 1's offset 64K (extent 0,
 * row 1), on both replicas: server 2 LBA 256 + 128 and server 0 LBA 256
 * + 128 (512-byte blocks).  Row 1 of column 1 is virtual 192K..256K.
 */
static void seed_col1_row1(bool replica0, bool replica1)
{
	if (replica0)
		mock_iscsi_data(2)[(256 + 128) * 512 + 100] = 0x77;
	if (replica1)
		mock_iscsi_data(0)[(256 + 128) * 512 + 100] = 0x77;
}

static void test_alloc_map_g2(void **state)
{
	static const struct bs_row before[] = {
		{384, HOLE_Z}, {128, 0}, {512, HOLE_Z}};
	/* A write of 4K at 448K (row 3, column 1) makes chunk 7 data. */
	static const struct bs_row after[] = {
		{384, HOLE_Z}, {128, 0}, {384, HOLE_Z}, {128, 0}};
	/* From 200K for 100K: the rest of the data chunk, then 44K hole. */
	static const struct bs_row part[] = {{112, 0}, {88, HOLE_Z}};

	(void)state;
	start(&g2, NULL, NULL);
	seed_col1_row1(true, true);
	RUN_UNTIL(dev()->alloc.done);
	assert_int_equal(dev()->alloc.extents_scanned, 4);
	assert_int_equal(dev()->alloc.extents_unknown, 0);
	assert_int_equal(dev()->alloc.chunk_bytes, 64 * KiB);
	expect_status(0, 512 * KiB, before, 3);
	expect_status(200 * KiB, 100 * KiB, part, 2);
	fill(0, 3, 4096);
	assert_int_equal(do_io(0, TD_OP_WRITE, 448 * KiB, 4096), 0);
	expect_status(0, 512 * KiB, after, 4);
}

/* Room for one extent: the first only; another context: not answered. */
static void test_alloc_room_and_context(void **state)
{
	static const struct bs_row first[] = {{384, HOLE_Z}};
	struct td_extent ext[1];
	unsigned int nr = 1;

	(void)state;
	start(&g2, NULL, NULL);
	seed_col1_row1(true, true);
	RUN_UNTIL(dev()->alloc.done);
	expect_status(0, 192 * KiB, first, 1);
	assert_int_equal(td_vbd_block_status(fx->vbd, TD_CTX_BASE_ALLOCATION, 0,
					     1024, ext, &nr),
			 0);
	assert_int_equal(nr, 1);
	assert_int_equal(ext[0].nr_sectors, 384);
	nr = 1;
	assert_int_equal(td_vbd_block_status(fx->vbd, "qemu:dirty-bitmap:x", 0,
					     1024, ext, &nr),
			 -ENOENT);
}

/*
 * Replica 0 of extent (1, 0) (server 2) is stale and holds nothing; the
 * fresh replica 1 (server 0) holds the data: the scan asks the fresh one.
 * The other way round, a stale replica's data is not reported.
 */
static void test_alloc_fresh_replica_only(void **state)
{
	static const bool stale_10_0[8] = {[4] = true};
	static const struct bs_row data[] = {
		{384, HOLE_Z}, {128, 0}, {512, HOLE_Z}};
	static const struct bs_row none[] = {{1024, HOLE_Z}};

	(void)state;
	start(&g2, stale_10_0, ",auto_resync=off");
	seed_col1_row1(false, true);
	RUN_UNTIL(dev()->alloc.done);
	expect_status(0, 512 * KiB, data, 3);
	stripe_teardown(state);
	stripe_setup(state);
	start(&g2, stale_10_0, ",auto_resync=off");
	seed_col1_row1(true, false);
	RUN_UNTIL(dev()->alloc.done);
	expect_status(0, 512 * KiB, none, 1);
}

/*
 * Server 2 does not answer GET LBA STATUS (a LUN without LBPRZ): extent
 * (1, 0), whose first fresh replica is there, counts as allocated: rows
 * 0 and 1 of column 1 = 64K..128K and 192K..256K.
 */
static void test_alloc_unknown_is_data(void **state)
{
	static const struct bs_row exp[] = {{128, HOLE_Z},
					    {128, 0},
					    {128, HOLE_Z},
					    {128, 0},
					    {512, HOLE_Z}};

	(void)state;
	start(&g2, NULL, NULL);
	mock_iscsi_fail(2, -EOPNOTSUPP, MOCK_ISCSI_OP(ISCSI_CMD_GET_LBA_STATUS),
			0);
	RUN_UNTIL(dev()->alloc.done);
	assert_int_equal(dev()->alloc.extents_unknown, 1);
	expect_status(0, 512 * KiB, exp, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, stripe_setup, stripe_teardown)
		T(test_routes_g1),
		T(test_routes_g2),
		T(test_routes_g3),
		T(test_routes_g4),
		T(test_routes_g5),
		T(test_split_at_unit),
		T(test_fua_to_every_replica),
		T(test_replica_failure_marked_before_completion),
		T(test_all_replicas_fail_mark_none),
		T(test_crossed_failures_keep_a_replica),
		T(test_writes_wait_for_durable_mark),
		T(test_mark_rewrite_failure),
		T(test_reads_avoid_stale),
		T(test_read_fallback),
		T(test_flush_every_server),
		T(test_flush_skips_stale_only_server),
		T(test_flush_failure_marks_replicas),
		T(test_flush_failure_unreplicated),
		T(test_fence_decide),
		T(test_fence_verdict),
		T(test_fenced_write_marks_nothing),
		T(test_fenced_server_fails_cleanly),
		T(test_admitting_held),
		T(test_fence_open_registers),
		T(test_fence_reconnect_keeps_key),
		T(test_fence_server_restart),
		T(test_fence_preempted),
		T(test_fence_listed_host),
		T(test_fence_foreign_reservation),
		T(test_down_server_fails_its_extents),
		T(test_down_server_replicated),
		T(test_gate_block_size_mismatch),
		T(test_gate_capacity_too_small),
		T(test_gate_waits_for_connection),
		T(test_degraded_write_skips_server),
		T(test_degraded_skip_mark_durable_first),
		T(test_degraded_grace),
		T(test_degraded_last_copy_waits),
		T(test_degraded_unreplicated_waits),
		T(test_degraded_flush),
		T(test_discard_and_write_zeroes),
		T(test_resync_copies_and_clears),
		T(test_resync_target_failure),
		T(test_resync_stop),
		T(test_region_resync_copies_only_missed),
		T(test_auto_resync_when_server_back),
		T(test_auto_resync_off),
		T(test_resync_rate_control),
		T(test_al_recovery_marks_hot_regions),
		T(test_open_takes_grown_map),
		T(test_resize_grows_served_disk),
		T(test_resize_refused_during_resync),
		T(test_resize_rewrite_fails),
		T(test_al_torn_record),
		T(test_al_small_log),
		T(test_move_to_known_server),
		T(test_move_to_new_server),
		T(test_move_abort_and_refusals),
		T(test_scrub_decide),
		T(test_scrub_repairs_from_majority),
		T(test_scrub_repair_fails),
		T(test_scrub_r2_undecided),
		T(test_scrub_server_down),
		T(test_scrub_control),
		T(test_control_and_reports),
		T(test_open_errors),
		T(test_device_replica),
		T(test_device_missing),
		T(test_device_appears),
		T(test_device_retry_leaks_nothing),
		T(test_device_too_small),
		T(test_device_fence_fresh),
		T(test_device_fence_rejoin),
		T(test_device_fence_preempted),
		T(test_device_fence_conflict_readmits),
		T(test_device_fence_conflict_twice),
		T(test_device_fence_held_deadline),
		T(test_device_fence_no_pr),
		T(test_device_not_scsi),
		T(test_device_lease_off),
		T(test_lease_verdict),
		T(test_lease_refusals),
		T(test_lease_held_and_off),
		T(test_handover),
		T(test_handover_refused),
		T(test_handover_uncertain),
		T(test_alloc_map_g2),
		T(test_alloc_room_and_context),
		T(test_alloc_fresh_replica_only),
		T(test_alloc_unknown_is_data),
		T(test_lease_verdict_list),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
