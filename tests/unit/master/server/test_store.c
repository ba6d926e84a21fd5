/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_store.c - master/store*.c on a real SQLite file in a temporary
 * directory: registration, placement as stored (hand-written tables of
 * which server and which offset each extent of a disk gets), idempotent
 * repeats, refusals, release and reuse, listings, replica states,
 * transactions, the consistency check, the one-master lock, the
 * upgrade of a database of schema 1 and of schema 3, leases and fencing.
 *
 * The pool is 4 servers of 4 MiB cut into 1 MiB extents (E = 1 MiB), so
 * every extent can be named: (server id, offset).
 */
#include "config.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/reply.h"
#include "master/server/store-int.h"

#define MiB	      (1024ull * 1024)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct fixture {
	char dir[64];
	char path[96];
	struct master_store *st;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char msg[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_store.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/master.db", f->dir);
	if (master_store_open(f->path, 1 * MiB, &f->st, msg, sizeof(msg)))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	master_store_close(f->st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	free(f);
	return system(cmd);
}

/* --- calls, each in its own transaction as the server runs them ------------ */

typedef int (*store_fn)(struct master_store *st, const void *args,
			ms_reply *rep);

static int call(struct master_store *st, store_fn fn, const void *args,
		ms_reply *rep)
{
	int ret;

	master_reply_init(rep);
	assert_int_equal(master_store_begin(st), 0);
	assert_int_equal(master_store_call_begin(st), 0);
	ret = fn(st, args, rep);
	assert_int_equal(master_store_call_end(st, !ret && !rep->status), 0);
	assert_int_equal(master_store_commit(st), 0);
	if (rep->status)
		print_message("%s: %s\n", master_status_name(rep->status),
			      rep->message);
	return ret;
}

static int do_add(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_server_add(st, a, rep);
}

static int do_alloc(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_vdisk_alloc(st, a, rep);
}

static int do_release(struct master_store *st, const void *id, ms_reply *rep)
{
	return master_store_vdisk_release(st, id, rep);
}

static int do_lookup(struct master_store *st, const void *id, ms_reply *rep)
{
	return master_store_vdisk_lookup(st, id, rep);
}

static int do_grow(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_vdisk_grow(st, a, rep);
}

static int do_drain(struct master_store *st, const void *k, ms_reply *rep)
{
	return master_store_server_drain(st, k, rep);
}

static int do_remove(struct master_store *st, const void *k, ms_reply *rep)
{
	return master_store_server_remove(st, k, rep);
}

static int do_extents(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_extent_list(st, a, rep);
}

static int do_vdisks(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_vdisk_list(st, a, rep);
}

static int do_replica(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_replica_state(st, a, rep);
}

/* Register server n (1-based) as host 10.0.0.n, 4 MiB. */
static ms_status add_server(struct master_store *st, int n, bool *changed)
{
	char address[32], target[64];
	ms_server_add_args a = {address, address, target, 1,   4 * MiB,
				512,	 NULL,	  NULL,	  NULL};
	ms_reply rep;
	ms_status status;

	snprintf(address, sizeof(address), "10.0.0.%d", n);
	snprintf(target, sizeof(target), "iqn.2024-01.t:s%d", n);
	assert_int_equal(call(st, do_add, &a, &rep), 0);
	status = rep.status;
	if (changed)
		*changed = rep.changed;
	master_reply_free(&rep);
	return status;
}

static void add_four(struct master_store *st)
{
	for (int n = 1; n <= 4; n++)
		assert_int_equal(add_server(st, n, NULL), MS_OK);
}

/* (server id, offset in MiB) of every slot, column-major, replica last. */
struct where {
	u_int server;
	unsigned int mib;
};

static void expect_extents(const ms_reply *rep, const struct where *want,
			   size_t n)
{
	const ms_vdisk *v = &rep->body.ms_body_u.vdisk;

	assert_int_equal(rep->status, MS_OK);
	assert_int_equal(rep->body.kind, MS_BODY_VDISK);
	assert_int_equal(v->extents.extents_len, n);
	for (size_t i = 0; i < n; i++) {
		print_message("slot %zu: server %u at %llu MiB\n", i,
			      v->extents.extents_val[i].server_id,
			      (unsigned long long)v->extents.extents_val[i]
					      .offset_bytes /
				      MiB);
		assert_int_equal(v->extents.extents_val[i].server_id,
				 want[i].server);
		assert_int_equal(v->extents.extents_val[i].offset_bytes,
				 want[i].mib * MiB);
	}
}

static ms_status alloc(struct master_store *st, const char *id, u_int s,
		       u_int j, u_int r, ms_reply *rep)
{
	ms_alloc_args a = {(char *)id, s, j, r, 1 * MiB};

	assert_int_equal(call(st, do_alloc, &a, rep), 0);
	return rep->status;
}

/* --- registration -------------------------------------------------------------- */

static void test_server_add_idempotent(void **state)
{
	struct fixture *f = *state;
	char address[] = "10.0.0.1", other[] = "10.0.0.9",
	     target[] = "iqn.2024-01.t:s1";
	ms_server_add_args changed_size = {
		address, address, target, 1, 8 * MiB, 512, NULL, NULL, NULL};
	ms_server_add_args moved = {other, other, target, 1,   4 * MiB,
				    512,   NULL,  NULL,	  NULL};
	bool changed;
	ms_reply rep;

	assert_int_equal(add_server(f->st, 1, &changed), MS_OK);
	assert_true(changed);
	assert_int_equal(add_server(f->st, 1, &changed), MS_OK);
	assert_false(changed);
	/* the same key with other values: refused, saying what is there */
	call(f->st, do_add, &changed_size, &rep);
	assert_int_equal(rep.status, MS_EEXIST);
	assert_non_null(strstr(rep.message, "is already server 1"));
	master_reply_free(&rep);
	call(f->st, do_add, &moved, &rep);
	assert_int_equal(rep.status, MS_EEXIST);
	master_reply_free(&rep);
}

static void test_server_add_invalid(void **state)
{
	struct fixture *f = *state;
	char ok[] = "10.0.0.1", spaced[] = "10.0 .0.1", target[] = "iqn.t:x";
	static const struct {
		u_int lun;
		u_quad_t size;
		u_int block;
	} bad[] = {
		{1, 512 * 1024, 512},  /* smaller than one extent */
		{1, 4 * MiB, 1000},    /* block size */
		{70000, 4 * MiB, 512}, /* lun */
		{1, 32ull << 40, 512}, /* 2^25 extents of 1 MiB: too many */
	};
	ms_server_add_args a = {ok,  ok,   target, 1,	4 * MiB,
				512, NULL, NULL,   NULL};
	ms_reply rep;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		a.lun = bad[i].lun;
		a.size_bytes = bad[i].size;
		a.block_size = bad[i].block;
		call(f->st, do_add, &a, &rep);
		assert_int_equal(rep.status, MS_EINVAL);
		master_reply_free(&rep);
	}
	a = (ms_server_add_args){spaced, ok,   target, 1,   4 * MiB,
				 512,	 NULL, NULL,   NULL};
	call(f->st, do_add, &a, &rep);
	assert_int_equal(rep.status, MS_EINVAL);
	master_reply_free(&rep);
}

/* --- allocation ------------------------------------------------------------------ */

/* 4 servers, 2 columns x 2 extents x 2 replicas. */
static const struct where d1_extents[] = {
	{1, 0}, {2, 0}, {1, 1}, {2, 1}, /* column 0 on servers 1 and 2 */
	{3, 0}, {4, 0}, {3, 1}, {4, 1}, /* column 1 on servers 3 and 4 */
};
static const struct where d2_extents[] = {
	{1, 2}, {2, 2}, {1, 3}, {2, 3}, {3, 2}, {4, 2}, {3, 3}, {4, 3},
};

static void test_alloc_table(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;
	const ms_vdisk *v = &rep.body.ms_body_u.vdisk;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 2, 2, &rep), MS_OK);
	assert_true(rep.changed);
	expect_extents(&rep, d1_extents, ARRAY_SIZE(d1_extents));
	assert_int_equal(v->servers.servers_len, 4);
	assert_int_equal(v->servers.servers_val[2].id, 3);
	assert_string_equal(v->servers.servers_val[2].portal, "10.0.0.3");
	assert_int_equal(v->extent_size_bytes, 1 * MiB);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d2", 2, 2, 2, &rep), MS_OK);
	expect_extents(&rep, d2_extents, ARRAY_SIZE(d2_extents));
	master_reply_free(&rep);
	/* all 16 extents are taken */
	assert_int_equal(alloc(f->st, "d3", 1, 1, 1, &rep), MS_ENOSPC);
	assert_non_null(strstr(rep.message, "0 free extents"));
	master_reply_free(&rep);
}

static void test_alloc_repeat_same_extents(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	/* a retry after a lost answer: the same extents, nothing changed */
	assert_int_equal(alloc(f->st, "d1", 2, 2, 2, &rep), MS_OK);
	assert_false(rep.changed);
	expect_extents(&rep, d1_extents, ARRAY_SIZE(d1_extents));
	master_reply_free(&rep);
	/* a lookup says the same */
	call(f->st, do_lookup, "d1", &rep);
	expect_extents(&rep, d1_extents, ARRAY_SIZE(d1_extents));
	master_reply_free(&rep);
	/* another shape under the same name is refused */
	assert_int_equal(alloc(f->st, "d1", 2, 3, 2, &rep), MS_EEXIST);
	assert_non_null(strstr(rep.message, "2 columns x 2 extents x 2"));
	assert_non_null(strstr(rep.message, "asks for 2 x 3 x 2"));
	master_reply_free(&rep);
}

static void test_alloc_invalid(void **state)
{
	struct fixture *f = *state;
	ms_alloc_args wrong_e = {"d1", 1, 1, 1, 2 * MiB};
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "bad/name", 1, 1, 1, &rep), MS_EINVAL);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d1", 0, 1, 1, &rep), MS_EINVAL);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d1", 257, 1, 1, &rep), MS_EINVAL);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d1", 1, 1, 5, &rep), MS_EINVAL);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d1", 256, 1025, 1, &rep), MS_EINVAL);
	master_reply_free(&rep);
	call(f->st, do_alloc, &wrong_e, &rep);
	assert_int_equal(rep.status, MS_EINVAL);
	assert_non_null(strstr(rep.message, "extent size is 1048576"));
	master_reply_free(&rep);
}

/* The cap on one allocation's extents (MASTER_DEFAULT_MAX_ALLOC_EXTENTS). */
static void test_alloc_cap(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;

	add_four(f->st); /* 16 extents */
	/* the default: 256 x 257 x 1 = 65,792 > 65,536, refused before
	 * placement (not MS_ENOSPC), saying what to do */
	assert_int_equal(alloc(f->st, "huge", 256, 257, 1, &rep), MS_EINVAL);
	assert_non_null(strstr(rep.message, "= 65792 extents"));
	assert_non_null(strstr(rep.message, "at most 65536 in one call"));
	assert_non_null(strstr(rep.message, "--max-alloc-extents"));
	master_reply_free(&rep);

	assert_int_equal(master_store_set_max_alloc(f->st, 0), -EINVAL);
	assert_int_equal(master_store_set_max_alloc(f->st, MS_MAX_SLOTS + 1),
			 -EINVAL);
	assert_int_equal(master_store_set_max_alloc(f->st, MS_MAX_SLOTS), 0);
	assert_int_equal(master_store_set_max_alloc(f->st, 6), 0);
	assert_int_equal(alloc(f->st, "d8", 2, 2, 2, &rep), MS_EINVAL);
	assert_non_null(strstr(rep.message, "at most 6 in one call"));
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d6", 2, 3, 1, &rep), MS_OK);
	assert_true(rep.changed);
	master_reply_free(&rep);
	/* one made under a higher cap is answered again */
	assert_int_equal(master_store_set_max_alloc(f->st, 2), 0);
	assert_int_equal(alloc(f->st, "d6", 2, 3, 1, &rep), MS_OK);
	assert_false(rep.changed);
	assert_int_equal(rep.body.ms_body_u.vdisk.extents.extents_len, 6);
	master_reply_free(&rep);
}

static void test_release_and_reuse(void **state)
{
	struct fixture *f = *state;
	static const struct where d4_extents[] = {{1, 0}, {2, 0}};
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d2", 2, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	call(f->st, do_release, "d1", &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_true(rep.changed);
	master_reply_free(&rep);
	/* released already: a retry succeeds and changes nothing */
	call(f->st, do_release, "d1", &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_false(rep.changed);
	master_reply_free(&rep);
	call(f->st, do_lookup, "d1", &rep);
	assert_int_equal(rep.status, MS_ENOENT);
	master_reply_free(&rep);
	/* the lowest released extents come back first */
	assert_int_equal(alloc(f->st, "d4", 1, 1, 2, &rep), MS_OK);
	expect_extents(&rep, d4_extents, ARRAY_SIZE(d4_extents));
	master_reply_free(&rep);
}

/* --- servers: drain, remove ------------------------------------------------------ */

static void test_drain_and_remove(void **state)
{
	struct fixture *f = *state;
	char t1[] = "iqn.2024-01.t:s1", t4[] = "iqn.2024-01.t:s4",
	     t5[] = "iqn.2024-01.t:s5", none[] = "iqn.nobody:x";
	ms_server_key k1 = {t1, 1}, k4 = {t4, 1}, k5 = {t5, 1},
		      unknown = {none, 1};
	static const struct where after_drain[] = {{1, 0}, {2, 0}, {3, 0}};
	ms_reply rep;

	add_four(f->st);
	call(f->st, do_drain, &k4, &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_true(rep.changed);
	assert_true(rep.body.ms_body_u.server.draining);
	master_reply_free(&rep);
	call(f->st, do_drain, &k4, &rep);
	assert_false(rep.changed);
	master_reply_free(&rep);
	call(f->st, do_drain, &unknown, &rep);
	assert_int_equal(rep.status, MS_ENOENT);
	master_reply_free(&rep);
	/* 3 columns on the 3 servers that are not draining */
	assert_int_equal(alloc(f->st, "d1", 3, 1, 1, &rep), MS_OK);
	expect_extents(&rep, after_drain, ARRAY_SIZE(after_drain));
	master_reply_free(&rep);
	/* server 1 holds d1's extent */
	call(f->st, do_remove, &k1, &rep);
	assert_int_equal(rep.status, MS_EBUSY);
	assert_non_null(strstr(rep.message, "disks d1"));
	master_reply_free(&rep);
	/* an unused server goes, and going again is fine */
	assert_int_equal(add_server(f->st, 5, NULL), MS_OK);
	call(f->st, do_remove, &k5, &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_true(rep.changed);
	master_reply_free(&rep);
	call(f->st, do_remove, &k5, &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_false(rep.changed);
	master_reply_free(&rep);
	/* its id is never reused */
	assert_int_equal(add_server(f->st, 5, NULL), MS_OK);
	master_reply_init(&rep);
	assert_int_equal(master_store_server_list(f->st, &rep), 0);
	assert_int_equal(rep.body.ms_body_u.servers.servers_len, 5);
	assert_int_equal(rep.body.ms_body_u.servers.servers_val[4].id, 6);
	master_reply_free(&rep);
}

/* --- listings ----------------------------------------------------------------------- */

static void test_extent_list(void **state)
{
	struct fixture *f = *state;
	ms_extent_list_args a = {.vdisk = "", .limit = 5};
	u_int ids[] = {2};
	ms_extent_entry *e;
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 1, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	/* all 16, 5 per page: (1,0) d1, (1,1) d1, (1,2), (1,3), (2,0) d1 */
	call(f->st, do_extents, &a, &rep);
	e = rep.body.ms_body_u.extents.extents.extents_val;
	assert_int_equal(rep.body.ms_body_u.extents.extents.extents_len, 5);
	assert_true(rep.body.ms_body_u.extents.more);
	assert_string_equal(e[0].vdisk, "d1");
	assert_int_equal(e[1].extent, 1);
	assert_string_equal(e[2].vdisk, "");
	assert_int_equal(e[3].offset_bytes, 3 * MiB);
	assert_int_equal(e[4].server_id, 2);
	assert_int_equal(e[4].replica, 1);
	master_reply_free(&rep);
	/* the next page starts after (2, 0) */
	a.has_cursor = true;
	a.after_server = 2;
	a.after_index = 0;
	a.limit = 100;
	call(f->st, do_extents, &a, &rep);
	assert_int_equal(rep.body.ms_body_u.extents.extents.extents_len, 11);
	assert_false(rep.body.ms_body_u.extents.more);
	assert_int_equal(
		rep.body.ms_body_u.extents.extents.extents_val[0].index, 1);
	master_reply_free(&rep);
	/* allocated ones of server 2 */
	a = (ms_extent_list_args){.server_ids = {1, ids},
				  .vdisk = "",
				  .allocated_only = true,
				  .limit = 100};
	call(f->st, do_extents, &a, &rep);
	assert_int_equal(rep.body.ms_body_u.extents.extents.extents_len, 2);
	master_reply_free(&rep);
	/* one disk's */
	a = (ms_extent_list_args){.vdisk = "d1", .limit = 100};
	call(f->st, do_extents, &a, &rep);
	assert_int_equal(rep.body.ms_body_u.extents.extents.extents_len, 4);
	master_reply_free(&rep);
	a.limit = 0;
	call(f->st, do_extents, &a, &rep);
	assert_int_equal(rep.status, MS_EINVAL);
	master_reply_free(&rep);
}

static void test_vdisk_list_and_info(void **state)
{
	struct fixture *f = *state;
	ms_vdisk_list_args a = {.after = "", .limit = 2};
	ms_reply rep;

	add_four(f->st);
	for (const char *const *id = (const char *const[]){"a", "b", "c", NULL};
	     *id; id++) {
		assert_int_equal(alloc(f->st, *id, 1, 1, 1, &rep), MS_OK);
		master_reply_free(&rep);
	}
	call(f->st, do_vdisks, &a, &rep);
	assert_int_equal(rep.body.ms_body_u.vdisks.vdisks.vdisks_len, 2);
	assert_true(rep.body.ms_body_u.vdisks.more);
	assert_string_equal(rep.body.ms_body_u.vdisks.vdisks.vdisks_val[1].id,
			    "b");
	master_reply_free(&rep);
	a.after = "b";
	call(f->st, do_vdisks, &a, &rep);
	assert_int_equal(rep.body.ms_body_u.vdisks.vdisks.vdisks_len, 1);
	assert_false(rep.body.ms_body_u.vdisks.more);
	master_reply_free(&rep);
	master_reply_init(&rep);
	assert_int_equal(master_store_info(f->st, &rep), 0);
	assert_int_equal(rep.body.ms_body_u.info.nr_servers, 4);
	assert_int_equal(rep.body.ms_body_u.info.nr_vdisks, 3);
	assert_int_equal(rep.body.ms_body_u.info.nr_extents, 16);
	assert_int_equal(rep.body.ms_body_u.info.free_extents, 13);
	assert_int_equal(rep.body.ms_body_u.info.extent_size_bytes, 1 * MiB);
	master_reply_free(&rep);
}

/* --- replica states ------------------------------------------------------------------ */

/* Set a replica's state; the reply's status, *changed. */
static ms_status mark(struct master_store *st, const char *id, u_int c, u_int x,
		      u_int r, bool stale, bool *changed)
{
	ms_replica_state_args a = {(char *)id, c, x, r, stale};
	ms_reply rep;
	ms_status status;

	assert_int_equal(call(st, do_replica, &a, &rep), 0);
	status = rep.status;
	if (changed)
		*changed = rep.changed;
	if (!status) {
		/* the body: the replica's extent, in its new state */
		assert_int_equal(rep.body.kind, MS_BODY_REPLICA);
		assert_string_equal(rep.body.ms_body_u.replica.vdisk, id);
		assert_int_equal(rep.body.ms_body_u.replica.column, c);
		assert_int_equal(rep.body.ms_body_u.replica.extent, x);
		assert_int_equal(rep.body.ms_body_u.replica.replica, r);
		assert_int_equal(rep.body.ms_body_u.replica.stale, stale);
	}
	master_reply_free(&rep);
	return status;
}

/* A disk's replicas, in slot order, that the master says are stale. */
static unsigned int stale_mask(struct master_store *st, const char *id)
{
	unsigned int mask = 0;
	ms_reply rep;

	call(st, do_lookup, id, &rep);
	assert_int_equal(rep.status, MS_OK);
	for (u_int i = 0; i < rep.body.ms_body_u.vdisk.extents.extents_len; i++)
		if (rep.body.ms_body_u.vdisk.extents.extents_val[i].stale)
			mask |= 1u << i;
	master_reply_free(&rep);
	return mask;
}

static void test_replica_state(void **state)
{
	struct fixture *f = *state;
	bool changed;
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 2, 2, &rep), MS_OK);
	for (u_int i = 0; i < 8; i++)
		assert_false(
			rep.body.ms_body_u.vdisk.extents.extents_val[i].stale);
	master_reply_free(&rep);
	/* column 1, extent 0, replica 1 is slot 5 */
	assert_int_equal(mark(f->st, "d1", 1, 0, 1, true, &changed), MS_OK);
	assert_true(changed);
	assert_int_equal(stale_mask(f->st, "d1"), 1u << 5);
	/* a retry changes nothing */
	assert_int_equal(mark(f->st, "d1", 1, 0, 1, true, &changed), MS_OK);
	assert_false(changed);
	/* ok when ok already: nothing to do either */
	assert_int_equal(mark(f->st, "d1", 0, 1, 0, false, &changed), MS_OK);
	assert_false(changed);
	assert_int_equal(mark(f->st, "d1", 0, 1, 0, true, &changed), MS_OK);
	assert_int_equal(stale_mask(f->st, "d1"), 1u << 5 | 1u << 2);
	assert_int_equal(mark(f->st, "d1", 1, 0, 1, false, &changed), MS_OK);
	assert_true(changed);
	assert_int_equal(stale_mask(f->st, "d1"), 1u << 2);
}

static void test_replica_state_refused(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *id;
		u_int c, x, r;
		ms_status want;
		const char *says;
	} bad[] = {
		{"nope", 0, 0, 0, MS_ENOENT, "no vdisk nope"},
		{"bad/id", 0, 0, 0, MS_EINVAL, "a vdisk id is"},
		{"", 0, 0, 0, MS_EINVAL, "a vdisk id is"},
		{"d1", 2, 0, 0, MS_EINVAL,
		 "column 2 extent 0 replica 0 is not"},
		{"d1", 0, 2, 0, MS_EINVAL,
		 "2 columns x 2 extents x 2 replicas"},
		{"d1", 0, 0, 2, MS_EINVAL, "count from 0"},
		{"d1", 0xffffffffu, 0xffffffffu, 0xffffffffu, MS_EINVAL,
		 "column 4294967295"},
	};
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		ms_replica_state_args a = {(char *)bad[i].id, bad[i].c,
					   bad[i].x, bad[i].r, true};

		call(f->st, do_replica, &a, &rep);
		assert_int_equal(rep.status, bad[i].want);
		assert_int_equal(rep.body.kind, MS_BODY_NONE);
		assert_non_null(strstr(rep.message, bad[i].says));
		master_reply_free(&rep);
	}
	assert_int_equal(stale_mask(f->st, "d1"), 0);
}

static void test_replica_state_listed(void **state)
{
	struct fixture *f = *state;
	ms_extent_list_args all = {.vdisk = "", .limit = 100};
	ms_extent_list_args mine = {.vdisk = "d1", .limit = 100};
	ms_vdisk_list_args disks = {.after = "", .limit = 10};
	static const struct where d4_extents[] = {{1, 0}, {2, 0}};
	ms_extent_entry *e;
	ms_reply rep;

	add_four(f->st);
	/* d1: extent 0 on (1, 0) and (2, 0), extent 1 on (1, 1), (2, 1) */
	assert_int_equal(alloc(f->st, "d1", 1, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d2", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(mark(f->st, "d1", 0, 0, 1, true, NULL), MS_OK);
	assert_int_equal(mark(f->st, "d1", 0, 1, 0, true, NULL), MS_OK);
	/* every extent: (2, 0) and (1, 1) are stale; free ones are not */
	call(f->st, do_extents, &all, &rep);
	e = rep.body.ms_body_u.extents.extents.extents_val;
	assert_int_equal(rep.body.ms_body_u.extents.extents.extents_len, 16);
	for (u_int i = 0; i < 16; i++)
		assert_int_equal(
			e[i].stale,
			(e[i].server_id == 2 && e[i].index == 0) ||
				(e[i].server_id == 1 && e[i].index == 1));
	master_reply_free(&rep);
	/* one disk's, from the allocations alone */
	call(f->st, do_extents, &mine, &rep);
	e = rep.body.ms_body_u.extents.extents.extents_val;
	assert_int_equal(rep.body.ms_body_u.extents.extents.extents_len, 4);
	assert_false(e[0].stale); /* (1, 0) */
	assert_true(e[1].stale);  /* (1, 1): extent 1 replica 0 */
	assert_true(e[2].stale);  /* (2, 0): extent 0 replica 1 */
	assert_false(e[3].stale); /* (2, 1) */
	master_reply_free(&rep);
	/* the disk list counts them */
	call(f->st, do_vdisks, &disks, &rep);
	assert_int_equal(rep.body.ms_body_u.vdisks.vdisks.vdisks_len, 2);
	assert_int_equal(
		rep.body.ms_body_u.vdisks.vdisks.vdisks_val[0].stale_replicas,
		2);
	assert_int_equal(
		rep.body.ms_body_u.vdisks.vdisks.vdisks_val[1].stale_replicas,
		0);
	master_reply_free(&rep);
	/* released, its extents come back to the next disk as ok ones */
	call(f->st, do_release, "d1", &rep);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d4", 1, 1, 2, &rep), MS_OK);
	expect_extents(&rep, d4_extents, ARRAY_SIZE(d4_extents));
	master_reply_free(&rep);
	assert_int_equal(stale_mask(f->st, "d4"), 0);
}

/* --- grow (issue #21) ------------------------------------------------------------ */

static ms_status grow(struct master_store *st, const char *id, u_int j,
		      ms_reply *rep)
{
	ms_grow_args a = {(char *)id, j};

	assert_int_equal(call(st, do_grow, &a, rep), 0);
	return rep->status;
}

/*
 * d1 (2 columns x 1 extent x 2 replicas) grown to 2 extents per column
 * after d2 took server 1's extent 1: each (column, replica) stays on its
 * server, server 1 gives its next free extent (2), nothing twice.
 */
static const struct where d1_grown[] = {
	{1, 0}, {2, 0}, {1, 2}, {2, 1}, /* column 0 on servers 1 and 2 */
	{3, 0}, {4, 0}, {3, 1}, {4, 1}, /* column 1 on servers 3 and 4 */
};

static void test_grow(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;
	char msg[256];

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 1, 2, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d2", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(grow(f->st, "d1", 2, &rep), MS_OK);
	assert_true(rep.changed);
	assert_int_equal(rep.body.ms_body_u.vdisk.extents_per_column, 2);
	expect_extents(&rep, d1_grown, ARRAY_SIZE(d1_grown));
	master_reply_free(&rep);
	/* a retry, and a smaller size: the disk as it is, nothing changed */
	for (u_int j = 2; j >= 1; j--) {
		assert_int_equal(grow(f->st, "d1", j, &rep), MS_OK);
		assert_false(rep.changed);
		expect_extents(&rep, d1_grown, ARRAY_SIZE(d1_grown));
		master_reply_free(&rep);
	}
	call(f->st, do_lookup, "d1", &rep);
	expect_extents(&rep, d1_grown, ARRAY_SIZE(d1_grown));
	master_reply_free(&rep);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

static const struct where d1_one[] = {{1, 0}, {2, 0}, {3, 0}, {4, 0}};

static void test_grow_refused(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;
	char msg[256];

	add_four(f->st);
	assert_int_equal(grow(f->st, "nope", 2, &rep), MS_ENOENT);
	assert_non_null(strstr(rep.message, "no vdisk nope"));
	master_reply_free(&rep);
	assert_int_equal(grow(f->st, "bad id", 2, &rep), MS_EINVAL);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "d1", 2, 1, 2, &rep), MS_OK);
	master_reply_free(&rep);
	/* 16 extents in all: 2 x 5 x 2 = 20 do not fit; nothing taken */
	assert_int_equal(grow(f->st, "d1", 5, &rep), MS_ENOSPC);
	master_reply_free(&rep);
	assert_int_equal(grow(f->st, "d1", 300000, &rep), MS_EINVAL);
	assert_non_null(strstr(rep.message, "larger extents"));
	master_reply_free(&rep);
	assert_int_equal(master_store_set_max_alloc(f->st, 4), 0);
	assert_int_equal(grow(f->st, "d1", 3, &rep), MS_EINVAL);
	assert_non_null(strstr(rep.message, "smaller steps"));
	master_reply_free(&rep);
	call(f->st, do_lookup, "d1", &rep);
	expect_extents(&rep, d1_one, ARRAY_SIZE(d1_one));
	assert_int_equal(rep.body.ms_body_u.vdisk.extents_per_column, 1);
	master_reply_free(&rep);
	/* the free extents are all there: 2 x 4 x 2 - 4 fits exactly */
	assert_int_equal(master_store_set_max_alloc(f->st, 65536), 0);
	assert_int_equal(grow(f->st, "d1", 4, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

/* --- transactions, the check, the lock ------------------------------------------------ */

static void test_rollback_leaves_nothing(void **state)
{
	struct fixture *f = *state;
	ms_alloc_args a = {"gone", 1, 1, 1, 1 * MiB};
	ms_reply rep;

	add_four(f->st);
	/* an allocation whose round's commit fails is rolled back whole */
	master_reply_init(&rep);
	assert_int_equal(master_store_begin(f->st), 0);
	assert_int_equal(master_store_vdisk_alloc(f->st, &a, &rep), 0);
	master_reply_free(&rep);
	master_store_rollback(f->st);
	call(f->st, do_lookup, "gone", &rep);
	assert_int_equal(rep.status, MS_ENOENT);
	master_reply_free(&rep);
	/* a failing call inside a round undoes only itself */
	assert_int_equal(master_store_begin(f->st), 0);
	assert_int_equal(master_store_call_begin(f->st), 0);
	assert_int_equal(master_store_vdisk_alloc(f->st, &a, &rep), 0);
	assert_int_equal(master_store_call_end(f->st, true), 0);
	master_reply_free(&rep);
	a.id = "big";
	a.columns = 17;
	assert_int_equal(master_store_call_begin(f->st), 0);
	assert_int_equal(master_store_vdisk_alloc(f->st, &a, &rep), 0);
	assert_int_equal(rep.status, MS_ENOSPC);
	assert_int_equal(master_store_call_end(f->st, false), 0);
	master_reply_free(&rep);
	assert_int_equal(master_store_commit(f->st), 0);
	call(f->st, do_lookup, "gone", &rep);
	assert_int_equal(rep.status, MS_OK);
	master_reply_free(&rep);
	call(f->st, do_lookup, "big", &rep);
	assert_int_equal(rep.status, MS_ENOENT);
	master_reply_free(&rep);
}

/* Run sql on the closed store's file with a connection of our own. */
static int raw_sql(const char *path, const char *sql)
{
	sqlite3 *db;
	int rc;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

/* Four servers and one disk on them; the store passes its check. */
static void one_disk_checked(struct master_store *st)
{
	char msg[256];
	ms_reply rep;

	add_four(st);
	assert_int_equal(alloc(st, "d1", 2, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(master_store_check(st, msg, sizeof(msg)), 0);
}

static void test_check_and_constraints(void **state)
{
	struct fixture *f = *state;
	char msg[256];

	one_disk_checked(f->st);
	master_store_close(f->st);
	/* the schema refuses a second owner of an extent */
	assert_int_equal(raw_sql(f->path,
				 "PRAGMA foreign_keys = ON; BEGIN;"
				 "INSERT INTO vdisks (id, columns,"
				 " extents_per_column, replicas)"
				 " VALUES ('x', 1, 1, 1);"
				 "INSERT INTO allocations (vdisk_id, col, ext,"
				 " replica, server_id, idx) VALUES"
				 " ('x', 0, 0, 0, 1, 0); COMMIT;"),
			 SQLITE_CONSTRAINT);
	/* a counter edited by hand is found */
	assert_int_equal(raw_sql(f->path, "UPDATE servers SET free_extents ="
					  " free_extents - 1 WHERE id = 2;"),
			 SQLITE_OK);
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), -EUCLEAN);
	assert_non_null(strstr(msg, "free_extents"));
}

/*
 * The check keeps its statements between calls: a second check on the
 * same open store must see what changed since the first, and a third what
 * was put right again.
 */
static void test_check_again_sees_changes(void **state)
{
	struct fixture *f = *state;
	char msg[256];

	one_disk_checked(f->st);
	assert_int_equal(master_store_check_invariants(f->st, msg, sizeof(msg)),
			 0);
	assert_int_equal(sqlite3_exec(f->st->db,
				      "UPDATE servers SET free_extents ="
				      " free_extents - 1 WHERE id = 2",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	for (int i = 0; i < 2; i++) {
		msg[0] = '\0';
		assert_int_equal(
			master_store_check_invariants(f->st, msg, sizeof(msg)),
			-EUCLEAN);
		assert_non_null(strstr(msg, "free_extents"));
	}
	assert_int_equal(sqlite3_exec(f->st->db,
				      "UPDATE servers SET free_extents ="
				      " free_extents + 1 WHERE id = 2",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

static void test_one_master_per_database(void **state)
{
	struct fixture *f = *state;
	struct master_store *second;
	char msg[256] = "";

	assert_int_equal(
		master_store_open(f->path, 0, &second, msg, sizeof(msg)),
		-EBUSY);
	assert_non_null(strstr(msg, "in use by another stripe-master"));
	master_store_close(f->st);
	/* reopened: the stored extent size holds, another one is refused */
	assert_int_equal(
		master_store_open(f->path, 2 * MiB, &f->st, msg, sizeof(msg)),
		-EINVAL);
	assert_non_null(strstr(msg, "1048576"));
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_extent_size(f->st), 1 * MiB);
}

/* Schema 1 as stripe-master created it before replica states. */
static const char schema_v1[] =
	"CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1),"
	" schema_version INTEGER NOT NULL, extent_size_bytes INTEGER NOT NULL"
	" CHECK (extent_size_bytes > 0));"
	"CREATE TABLE servers (id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" address TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 63),"
	" portal TEXT NOT NULL CHECK (length(portal) BETWEEN 1 AND 261),"
	" target TEXT NOT NULL CHECK (length(target) BETWEEN 1 AND 223),"
	" lun INTEGER NOT NULL CHECK (lun BETWEEN 0 AND 65535),"
	" size_bytes INTEGER NOT NULL CHECK (size_bytes > 0),"
	" block_size INTEGER NOT NULL CHECK (block_size IN (512, 1024, 2048,"
	"  4096)),"
	" nr_extents INTEGER NOT NULL CHECK (nr_extents > 0),"
	" free_extents INTEGER NOT NULL"
	"  CHECK (free_extents BETWEEN 0 AND nr_extents),"
	" next_fresh INTEGER NOT NULL DEFAULT 0"
	"  CHECK (next_fresh BETWEEN 0 AND nr_extents),"
	" draining INTEGER NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),"
	" UNIQUE (target, lun));"
	"CREATE TABLE vdisks ("
	" id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 63),"
	" columns INTEGER NOT NULL CHECK (columns BETWEEN 1 AND 256),"
	" extents_per_column INTEGER NOT NULL CHECK (extents_per_column >= 1),"
	" replicas INTEGER NOT NULL CHECK (replicas BETWEEN 1 AND 4),"
	" CHECK (columns * extents_per_column * replicas <= 262144)"
	") WITHOUT ROWID;"
	"CREATE TABLE allocations ("
	" vdisk_id TEXT NOT NULL REFERENCES vdisks (id),"
	" col INTEGER NOT NULL CHECK (col >= 0),"
	" ext INTEGER NOT NULL CHECK (ext >= 0),"
	" replica INTEGER NOT NULL CHECK (replica >= 0),"
	" server_id INTEGER NOT NULL REFERENCES servers (id),"
	" idx INTEGER NOT NULL CHECK (idx >= 0),"
	" PRIMARY KEY (vdisk_id, col, ext, replica),"
	" UNIQUE (server_id, idx)"
	") WITHOUT ROWID;"
	"CREATE TABLE released ("
	" server_id INTEGER NOT NULL REFERENCES servers (id),"
	" idx INTEGER NOT NULL CHECK (idx >= 0),"
	" PRIMARY KEY (server_id, idx)"
	") WITHOUT ROWID;"
	/* one server of 4 extents; disk "old" of 1 x 2 x 1 on it */
	"INSERT INTO meta VALUES (1, 1, 1048576);"
	"INSERT INTO servers VALUES (1, '10.0.0.1', '10.0.0.1', 'iqn.t:s1', 1,"
	" 4194304, 512, 4, 2, 2, 0);"
	"INSERT INTO vdisks VALUES ('old', 1, 2, 1);"
	"INSERT INTO allocations VALUES ('old', 0, 0, 0, 1, 0),"
	" ('old', 0, 1, 0, 1, 1);";

/* 1 when sql's first row's first column is 1. */
static int raw_query_is_one(const char *path, const char *sql)
{
	sqlite3_stmt *s;
	sqlite3 *db;
	int one;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	one = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) == 1;
	sqlite3_finalize(s);
	sqlite3_close(db);
	return one;
}

/* A database of schema 1 is upgraded when opened; its data stay. */
static void test_schema_upgrade(void **state)
{
	struct fixture *f = *state;
	static const struct where old_extents[] = {{1, 0}, {1, 1}};
	char path[128], msg[256];
	struct master_store *st;
	ms_reply rep;

	snprintf(path, sizeof(path), "%s/v1.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v1), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(st, msg, sizeof(msg)), 0);
	call(st, do_lookup, "old", &rep);
	expect_extents(&rep, old_extents, ARRAY_SIZE(old_extents));
	master_reply_free(&rep);
	assert_int_equal(mark(st, "old", 0, 1, 0, true, NULL), MS_OK);
	assert_int_equal(stale_mask(st, "old"), 1u << 1);
	master_store_close(st);
	/* the new version is stored; opened again, the state is there */
	assert_true(raw_query_is_one(path, "SELECT schema_version = 8 FROM"
					   " meta"));
	assert_true(raw_query_is_one(path, "SELECT count(*) FROM"
					   " sqlite_master WHERE name ="
					   " 'allocations_stale'"));
	assert_true(raw_query_is_one(path, "SELECT count(*) FROM"
					   " sqlite_master WHERE name ="
					   " 'leases'"));
	assert_int_equal(
		master_store_open(path, 1 * MiB, &st, msg, sizeof(msg)), 0);
	assert_int_equal(stale_mask(st, "old"), 1u << 1);
	master_store_close(st);
	assert_true(raw_query_is_one(path, "SELECT count(*) FROM"
					   " sqlite_master WHERE name ="
					   " 'fenced_hosts'"));
	/* a newer schema than this master's is refused */
	assert_int_equal(raw_sql(path, "UPDATE meta SET schema_version = 9"),
			 SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)),
			 -EINVAL);
	assert_non_null(strstr(msg, "newer than this stripe-master's 8"));
	assert_true(raw_query_is_one(path, "SELECT schema_version = 9 FROM"
					   " meta"));
}

/*
 * Tables, their columns and indexes of database db (main or an attached
 * one); db is given twice.
 */
#define SCHEMA_OF(db)                                                        \
	"SELECT m.type, m.name, m.tbl_name, p.name, p.type, p.\"notnull\", " \
	"p.dflt_value, p.pk FROM " db ".sqlite_master m LEFT JOIN "          \
	"pragma_table_info(m.name, '" db "') p ON m.type = 'table'"

/* A new database and an upgraded one have the same schema. */
static void test_schema_new_equals_upgraded(void **state)
{
	struct fixture *f = *state;
	char path[128], msg[256], attach[1024];
	struct master_store *st;
	sqlite3_stmt *s;
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/v1.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v1), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	master_store_close(st);
	master_store_close(f->st);
	f->st = NULL;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	snprintf(attach, sizeof(attach), "ATTACH '%s' AS up", path);
	assert_int_equal(sqlite3_exec(db, attach, NULL, NULL, NULL), SQLITE_OK);
	for (int i = 0; i < 2; i++) {
		snprintf(attach, sizeof(attach),
			 "SELECT count(*) FROM (" SCHEMA_OF(
				 "%s") " EXCEPT " SCHEMA_OF("%s") ")",
			 i ? "up" : "main", i ? "up" : "main",
			 i ? "main" : "up", i ? "main" : "up");
		assert_int_equal(sqlite3_prepare_v2(db, attach, -1, &s, NULL),
				 SQLITE_OK);
		assert_int_equal(sqlite3_step(s), SQLITE_ROW);
		assert_int_equal(sqlite3_column_int(s, 0), 0);
		sqlite3_finalize(s);
	}
	sqlite3_close(db);
}

static void test_open_rejects(void **state)
{
	struct master_store *st;
	char msg[256];

	assert_int_equal(
		master_store_open("/tmp/x.db", 1000, &st, msg, sizeof(msg)),
		-EINVAL);
	assert_int_equal(master_store_open("/nonexistent/dir/x.db", 0, &st, msg,
					   sizeof(msg)),
			 -ENOENT);
}

static void test_vdisk_id_rule(void **state)
{
	assert_true(master_vdisk_id_ok("db-1.a_b"));
	assert_false(master_vdisk_id_ok(""));
	assert_false(master_vdisk_id_ok("a b"));
	assert_false(master_vdisk_id_ok("a/b"));
	assert_false(master_vdisk_id_ok(NULL));
	assert_true(master_vdisk_id_ok("0123456789012345678901234567890123456"
				       "78901234567890123456789012"));
	assert_false(master_vdisk_id_ok("0123456789012345678901234567890123456"
					"789012345678901234567890123"));
}

/* --- leases ---------------------------------------------------------------- */

enum lease_op {
	L_ACQUIRE,
	L_RELEASE,
	L_HANDOVER,
	L_TAKEOVER,
	L_SHOW,
	L_FENCED, /* after L_SHOW: test_lease_bad_input stops at L_SHOW */
	L_TAKEOVER_FENCE,
};

struct lease_call {
	enum lease_op op;
	ms_lease_args a;
};

static int do_lease(struct master_store *st, const void *p, ms_reply *rep)
{
	const struct lease_call *lc = p;

	switch (lc->op) {
	case L_ACQUIRE:
		return master_store_lease_acquire(st, &lc->a, rep);
	case L_RELEASE:
		return master_store_lease_release(st, &lc->a, rep);
	case L_HANDOVER:
		return master_store_lease_handover(st, &lc->a, rep);
	case L_TAKEOVER:
	case L_TAKEOVER_FENCE:
		return master_store_lease_takeover(st, &lc->a, rep);
	case L_FENCED:
		return master_store_lease_fenced(st, &lc->a, rep);
	default:
		return master_store_lease_show(st, lc->a.vdisk, rep);
	}
}

/*
 * One lease call; its status.  On MS_OK, MS_EHELD and MS_ESTALE the body
 * is the lease: *holder and *epoch get it (when given).
 */
static ms_status lease(struct master_store *st, enum lease_op op,
		       const char *vdisk, const char *host, uint64_t epoch,
		       const char *to, ms_reply *out)
{
	struct lease_call lc = {op,
				{(char *)vdisk, (char *)host, epoch,
				 (char *)(to ? to : ""),
				 op == L_TAKEOVER_FENCE}};
	ms_reply rep;
	ms_status status;

	assert_int_equal(call(st, do_lease, &lc, &rep), 0);
	status = rep.status;
	if (status == MS_OK || status == MS_EHELD || status == MS_ESTALE ||
	    status == MS_EFENCED) {
		assert_int_equal(rep.body.kind, MS_BODY_LEASE);
		assert_string_equal(rep.body.ms_body_u.lease.vdisk, vdisk);
	} else {
		assert_int_equal(rep.body.kind, MS_BODY_NONE);
		assert_true(rep.message && *rep.message);
	}
	if (out)
		*out = rep;
	else
		master_reply_free(&rep);
	return status;
}

static void expect_lease(struct master_store *st, const char *vdisk,
			 const char *holder, uint64_t epoch)
{
	ms_reply rep;

	assert_int_equal(lease(st, L_SHOW, vdisk, NULL, 0, NULL, &rep), MS_OK);
	assert_string_equal(rep.body.ms_body_u.lease.holder, holder);
	assert_int_equal(rep.body.ms_body_u.lease.epoch, epoch);
	assert_false(rep.changed);
	master_reply_free(&rep);
}

static int do_readmit(struct master_store *st, const void *host, ms_reply *rep)
{
	return master_store_host_readmit(st, host, rep);
}

static int do_host_list(struct master_store *st, const void *unused,
			ms_reply *rep)
{
	return master_store_host_list(st, rep);
}

/* Re-admit host; its status (the body: the fenced hosts left). */
static ms_status readmit(struct master_store *st, const char *host,
			 ms_reply *out)
{
	ms_reply rep;
	ms_status status;

	assert_int_equal(call(st, do_readmit, host, &rep), 0);
	status = rep.status;
	assert_int_equal(rep.body.kind,
			 status == MS_OK ? MS_BODY_HOSTS : MS_BODY_NONE);
	if (out)
		*out = rep;
	else
		master_reply_free(&rep);
	return status;
}

static void test_lease_acquire_release(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	expect_lease(f->st, "d1", "", 0); /* never leased */
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "hostA", 0, NULL, &rep),
			 MS_OK);
	assert_true(rep.changed);
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 1);
	assert_true(rep.body.ms_body_u.lease.since > 0);
	master_reply_free(&rep);
	/* the same host again (a retry, a reopen): the same epoch */
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "hostA", 0, NULL, &rep),
			 MS_OK);
	assert_false(rep.changed);
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 1);
	master_reply_free(&rep);
	/* another host is refused, told who holds it */
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "hostB", 0, NULL, &rep),
			 MS_EHELD);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "hostA");
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 1);
	assert_non_null(strstr(rep.message, "held by host hostA (epoch 1)"));
	assert_non_null(strstr(rep.message, "takeover d1 --fence"));
	master_reply_free(&rep);
	/* release: only the holder, only at its epoch */
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "hostB", 1, NULL, NULL),
			 MS_EHELD);
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "hostA", 2, NULL, &rep),
			 MS_ESTALE);
	assert_non_null(
		strstr(rep.message, "at epoch 1 (held by hostA), not 2"));
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "hostA", 1, NULL, &rep),
			 MS_OK);
	assert_true(rep.changed);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "");
	assert_string_equal(rep.body.ms_body_u.lease.previous, "hostA");
	master_reply_free(&rep);
	/* repeated: answered, unchanged; by another, or at another epoch: no */
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "hostA", 1, NULL, &rep),
			 MS_OK);
	assert_false(rep.changed);
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "hostB", 1, NULL, NULL),
			 MS_ESTALE);
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "hostA", 0, NULL, NULL),
			 MS_ESTALE);
	expect_lease(f->st, "d1", "", 1);
	/* the next holder gets the next epoch */
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "hostB", 0, NULL, NULL),
			 MS_OK);
	expect_lease(f->st, "d1", "hostB", 2);
}

static void test_lease_handover(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "A", 0, NULL, NULL),
			 MS_OK);
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "A", 1, "B", &rep),
			 MS_OK);
	assert_true(rep.changed);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "B");
	assert_string_equal(rep.body.ms_body_u.lease.previous, "A");
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 2);
	master_reply_free(&rep);
	/* a retry answers the same, unchanged */
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "A", 1, "B", &rep),
			 MS_OK);
	assert_false(rep.changed);
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 2);
	master_reply_free(&rep);
	/* A no longer holds it: it cannot hand it on, nor release it */
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "A", 1, "C", NULL),
			 MS_EHELD);
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "A", 1, NULL, NULL),
			 MS_EHELD);
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "A", 0, NULL, NULL),
			 MS_EHELD);
	/* B at a stale epoch; to itself; to a malformed id */
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "B", 1, "C", NULL),
			 MS_ESTALE);
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "B", 2, "B", NULL),
			 MS_EINVAL);
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "B", 2, "C D", NULL),
			 MS_EINVAL);
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "B", 2, "", NULL),
			 MS_EINVAL);
	expect_lease(f->st, "d1", "B", 2);
	/* and back */
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "B", 2, "A", NULL),
			 MS_OK);
	expect_lease(f->st, "d1", "A", 3);
}

static void test_lease_takeover(void **state)
{
	struct fixture *f = *state;
	const ms_lease *l;
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 1, 2, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "A", 0, NULL, NULL),
			 MS_OK);
	/* the epoch expected must be the lease's */
	assert_int_equal(lease(f->st, L_TAKEOVER, "d1", "B", 0, NULL, &rep),
			 MS_ESTALE);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "A");
	master_reply_free(&rep);
	struct lease_call lc = {L_TAKEOVER, {"d1", "B", 1, "", true}};

	for (int i = 0; i < 2; i++) { /* the second: a retry */
		assert_int_equal(call(f->st, do_lease, &lc, &rep), 0);
		assert_int_equal(rep.status, MS_OK);
		assert_int_equal(rep.changed, i == 0);
		l = &rep.body.ms_body_u.lease;
		assert_string_equal(l->holder, "B");
		assert_string_equal(l->previous, "A");
		assert_int_equal(l->epoch, 2);
		assert_true(l->fence);
		/* 2 columns x 2 replicas on 4 servers of distinct hosts */
		assert_int_equal(l->servers.servers_len, 4);
		for (u_int s = 0; s < 4; s++) {
			assert_int_equal(l->servers.servers_val[s].id, s + 1);
			assert_non_null(strstr(l->servers.servers_val[s].target,
					       "iqn.2024-01.t:s"));
		}
		master_reply_free(&rep);
	}
	/* the old holder is out, and fenced (test_fence_* say more) */
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "A", 1, NULL, NULL),
			 MS_EHELD);
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "A", 1, "C", NULL),
			 MS_EHELD);
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "A", 0, NULL, NULL),
			 MS_EFENCED);
	assert_int_equal(readmit(f->st, "A", NULL), MS_OK);
	/* the lease stays put while B's fence is pending */
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "B", 2, NULL, NULL),
			 MS_EBUSY);
	assert_int_equal(lease(f->st, L_FENCED, "d1", "B", 2, NULL, NULL),
			 MS_OK);
	/* taking a free lease over works too; A at a stale epoch does not */
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "B", 2, NULL, NULL),
			 MS_OK);
	assert_int_equal(lease(f->st, L_TAKEOVER, "d1", "A", 1, NULL, NULL),
			 MS_ESTALE);
	assert_int_equal(lease(f->st, L_TAKEOVER, "d1", "A", 2, NULL, &rep),
			 MS_OK);
	assert_string_equal(rep.body.ms_body_u.lease.previous, "");
	assert_false(rep.body.ms_body_u.lease.fence);
	master_reply_free(&rep);
	expect_lease(f->st, "d1", "A", 3);
}

static void test_lease_bad_input(void **state)
{
	struct fixture *f = *state;
	static const char *const bad_hosts[] = {
		"",
		"a b",
		"x/y",
		"h\\n",
		"\\xff",
		"0123456789012345678901234567890123456789012345678901234567890"
		"123"};
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	for (enum lease_op op = L_ACQUIRE; op <= L_SHOW; op++) {
		assert_int_equal(lease(f->st, op, "nope", "A", 0, "B", &rep),
				 MS_ENOENT);
		assert_non_null(strstr(rep.message, "no vdisk nope"));
		master_reply_free(&rep);
		assert_int_equal(lease(f->st, op, "a/b", "A", 0, "B", NULL),
				 MS_EINVAL);
		for (size_t i = 0; op != L_SHOW && i < ARRAY_SIZE(bad_hosts);
		     i++)
			assert_int_equal(lease(f->st, op, "d1", bad_hosts[i], 0,
					       "B", NULL),
					 MS_EINVAL);
	}
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1",
			       "012345678901234567890123456789012345678901234"
			       "567890123456789012",
			       0, NULL, NULL),
			 MS_OK); /* 63 bytes: the longest */
	expect_lease(f->st, "d1",
		     "012345678901234567890123456789012345678901234567890123456"
		     "789012",
		     1);
}

/* Destroying a disk frees its lease; made again, it goes on from there. */
static void test_lease_destroy(void **state)
{
	struct fixture *f = *state;
	char msg[256];
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "A", 0, NULL, NULL),
			 MS_OK);
	assert_int_equal(call(f->st, do_release, "d1", &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	master_reply_free(&rep);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
	assert_int_equal(lease(f->st, L_SHOW, "d1", NULL, 0, NULL, NULL),
			 MS_ENOENT);
	assert_int_equal(alloc(f->st, "d1", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	expect_lease(f->st, "d1", "", 1);
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "B", 0, NULL, NULL),
			 MS_OK);
	expect_lease(f->st, "d1", "B", 2);
	/* the check finds a lease held on a disk that is gone */
	master_store_close(f->st);
	assert_int_equal(raw_sql(f->path, "INSERT INTO leases (vdisk_id,"
					  " holder, epoch, previous, fence,"
					  " since) VALUES"
					  " ('gone', 'A', 1, '', 0, 0)"),
			 SQLITE_OK);
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), -EUCLEAN);
	assert_non_null(strstr(msg, "lease is held on a disk"));
}

/*
 * Two hosts race with every call, each acting on what it was last told.
 * Whatever the order: one holder at a time, the epoch never goes back, and
 * no epoch is ever acknowledged to two hosts.
 */
static void test_lease_race(void **state)
{
	struct fixture *f = *state;
	static const char *const hosts[] = {"A", "B"};
	char owner[4096][2] = {{0}};
	uint64_t seen[2] = {0, 0}, last = 0;
	unsigned int seed = 18;
	char msg[256];
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	for (int i = 0; i < 1000; i++) {
		int h = rand_r(&seed) % 2;
		enum lease_op op = (enum lease_op)(rand_r(&seed) % 4);
		const ms_lease *l;
		ms_status status;

		status = lease(f->st, op, "d1", hosts[h], seen[h], hosts[1 - h],
			       &rep);
		l = &rep.body.ms_body_u.lease;
		if (status == MS_OK || status == MS_EHELD ||
		    status == MS_ESTALE) {
			assert_true(l->epoch >= last);
			last = l->epoch;
			seen[h] = l->epoch;
			assert_true(l->epoch < ARRAY_SIZE(owner));
			if (status == MS_OK && *l->holder) {
				char *o = owner[l->epoch];

				assert_true(!*o || *o == *l->holder);
				*o = *l->holder;
			}
		}
		master_reply_free(&rep);
	}
	assert_true(last > 10);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

/* --- fencing ------------------------------------------------------------------- */

/* The fenced hosts, "host:by:vdisk:epoch host:..." (in host order). */
static void expect_hosts(struct master_store *st, const char *want)
{
	char got[512] = "";
	ms_reply rep;

	assert_int_equal(call(st, do_host_list, NULL, &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	assert_int_equal(rep.body.kind, MS_BODY_HOSTS);
	assert_false(rep.changed);
	for (u_int i = 0; i < rep.body.ms_body_u.hosts.hosts_len; i++) {
		const ms_fenced_host *h =
			&rep.body.ms_body_u.hosts.hosts_val[i];
		size_t n = strlen(got);

		assert_true(h->since > 0);
		snprintf(got + n, sizeof(got) - n, "%s%s:%s:%s:%llu",
			 n ? " " : "", h->host, h->by, h->vdisk,
			 (unsigned long long)h->epoch);
	}
	master_reply_free(&rep);
	assert_string_equal(got, want);
}

/* The lease of vdisk: holder, epoch and fence_pending. */
static void expect_pending(struct master_store *st, const char *vdisk,
			   const char *holder, uint64_t epoch, bool pending)
{
	ms_reply rep;

	assert_int_equal(lease(st, L_SHOW, vdisk, NULL, 0, NULL, &rep), MS_OK);
	assert_string_equal(rep.body.ms_body_u.lease.holder, holder);
	assert_int_equal(rep.body.ms_body_u.lease.epoch, epoch);
	assert_int_equal(rep.body.ms_body_u.lease.fence_pending, pending);
	master_reply_free(&rep);
}

/* Two disks on four servers; A holds d1 (epoch 1) and d2 (epoch 1). */
static void two_disks_held_by_a(struct master_store *st)
{
	ms_reply rep;

	add_four(st);
	assert_int_equal(alloc(st, "d1", 2, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(alloc(st, "d2", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(lease(st, L_ACQUIRE, "d1", "A", 0, NULL, NULL), MS_OK);
	assert_int_equal(lease(st, L_ACQUIRE, "d2", "A", 0, NULL, NULL), MS_OK);
	expect_hosts(st, "");
}

/*
 * A fenced takeover: the lease is fence_pending and the old holder
 * fenced, in one call; a retry changes nothing more.
 */
static void test_fence_takeover(void **state)
{
	struct fixture *f = *state;
	char msg[256];
	ms_reply rep;

	two_disks_held_by_a(f->st);
	for (int i = 0; i < 2; i++) { /* the second: a retry */
		assert_int_equal(lease(f->st, L_TAKEOVER_FENCE, "d1", "B", 1,
				       NULL, &rep),
				 MS_OK);
		assert_int_equal(rep.changed, i == 0);
		assert_true(rep.body.ms_body_u.lease.fence_pending);
		assert_int_equal(rep.body.ms_body_u.lease.epoch, 2);
		master_reply_free(&rep);
	}
	expect_pending(f->st, "d1", "B", 2, true);
	expect_hosts(f->st, "A:B:d1:2");
	/* B's own acquire (its tapdisk): OK, but the fence is pending */
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "B", 0, NULL, &rep),
			 MS_OK);
	assert_false(rep.changed);
	assert_true(rep.body.ms_body_u.lease.fence_pending);
	master_reply_free(&rep);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

/* No one else to fence, or fencing not asked: nothing pending, no one
 * fenced. */
static void test_fence_nobody(void **state)
{
	struct fixture *f = *state;

	two_disks_held_by_a(f->st);
	/* not asked */
	assert_int_equal(lease(f->st, L_TAKEOVER, "d1", "B", 1, NULL, NULL),
			 MS_OK);
	expect_pending(f->st, "d1", "B", 2, false);
	/* a free lease: no holder to fence */
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "B", 2, NULL, NULL),
			 MS_OK);
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d1", "C", 2, NULL, NULL),
		MS_OK);
	expect_pending(f->st, "d1", "C", 3, false);
	/* the holder itself at its epoch: a retry, unchanged */
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d2", "A", 1, NULL, NULL),
		MS_OK);
	expect_pending(f->st, "d2", "A", 1, false);
	expect_hosts(f->st, "");
}

/* What a fenced host may not do, with a message saying why and what to do. */
static void test_fence_refusals(void **state)
{
	struct fixture *f = *state;
	const char *m;
	ms_reply rep;

	two_disks_held_by_a(f->st);
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d1", "B", 1, NULL, NULL),
		MS_OK);
	/* A's acquire of any disk, even one it holds */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(lease(f->st, L_ACQUIRE, i ? "d2" : "d1", "A",
				       0, NULL, &rep),
				 MS_EFENCED);
		m = rep.message;
		assert_non_null(strstr(m, "host A may not acquire vdisk d"));
		assert_non_null(strstr(m, "fenced by host B at 20"));
		assert_non_null(strstr(m, "(takeover of vdisk d1 at epoch 2)"));
		assert_non_null(strstr(m, "make sure host A's tapdisks of disk "
					  "d1 are stopped, then re-admit it: "
					  "stripe-ctl host readmit A"));
		assert_string_equal(rep.body.ms_body_u.lease.holder,
				    i ? "A" : "B");
		master_reply_free(&rep);
	}
	/* a hand-over to A (once B's fence is done); a takeover by A */
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "B", 2, "C", NULL),
			 MS_EBUSY);
	assert_int_equal(lease(f->st, L_FENCED, "d1", "B", 2, NULL, NULL),
			 MS_OK);
	assert_int_equal(lease(f->st, L_HANDOVER, "d1", "B", 2, "A", &rep),
			 MS_EFENCED);
	assert_non_null(strstr(rep.message, "host A may not be handed vdisk"));
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_TAKEOVER, "d1", "A", 2, NULL, NULL),
			 MS_EFENCED);
	expect_pending(f->st, "d1", "B", 2, false);
	/* letting go stays allowed: A releases d2 */
	assert_int_equal(lease(f->st, L_RELEASE, "d2", "A", 1, NULL, NULL),
			 MS_OK);
	expect_pending(f->st, "d2", "", 1, false);
	/* fenced again by another host: the row says the last fence */
	assert_int_equal(lease(f->st, L_ACQUIRE, "d2", "C", 0, NULL, NULL),
			 MS_OK);
	assert_int_equal(lease(f->st, L_HANDOVER, "d2", "C", 2, "B", NULL),
			 MS_OK);
	expect_hosts(f->st, "A:B:d1:2");
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d2", "C", 3, NULL, NULL),
		MS_OK);
	expect_hosts(f->st, "A:B:d1:2 B:C:d2:4");
}

/* MS_LEASE_FENCED: only the holder, only at its epoch; then repeated. */
static void test_fence_confirmed(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;

	two_disks_held_by_a(f->st);
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d1", "B", 1, NULL, NULL),
		MS_OK);
	assert_int_equal(lease(f->st, L_FENCED, "d1", "C", 2, NULL, &rep),
			 MS_EHELD);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "B");
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_FENCED, "d1", "B", 1, NULL, &rep),
			 MS_ESTALE);
	assert_true(rep.body.ms_body_u.lease.fence_pending);
	master_reply_free(&rep);
	assert_int_equal(lease(f->st, L_FENCED, "d1", "B", 3, NULL, NULL),
			 MS_ESTALE);
	assert_int_equal(lease(f->st, L_FENCED, "d1", "B b", 2, NULL, NULL),
			 MS_EINVAL);
	assert_int_equal(lease(f->st, L_FENCED, "zz", "B", 2, NULL, NULL),
			 MS_ENOENT);
	expect_pending(f->st, "d1", "B", 2, true);
	for (int i = 0; i < 2; i++) { /* the second: a retry */
		assert_int_equal(
			lease(f->st, L_FENCED, "d1", "B", 2, NULL, &rep),
			MS_OK);
		assert_int_equal(rep.changed, i == 0);
		assert_false(rep.body.ms_body_u.lease.fence_pending);
		assert_int_equal(rep.body.ms_body_u.lease.epoch, 2);
		master_reply_free(&rep);
	}
	expect_pending(f->st, "d1", "B", 2, false);
	/* the host stays fenced: that is the re-admission's business */
	expect_hosts(f->st, "A:B:d1:2");
	/* a free lease has nothing to confirm */
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "B", 2, NULL, NULL),
			 MS_OK);
	assert_int_equal(lease(f->st, L_FENCED, "d1", "B", 2, NULL, NULL),
			 MS_ESTALE);
}

/* Re-admission: idempotent, checked, and the host may acquire again. */
static void test_fence_readmit(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;

	two_disks_held_by_a(f->st);
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d1", "B", 1, NULL, NULL),
		MS_OK);
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d2", "C", 1, NULL, NULL),
		MS_OK);
	expect_hosts(f->st, "A:C:d2:2"); /* the last fence of A */
	/* no third host takes it over before C's fence of A is done */
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d2", "B", 2, NULL, NULL),
		MS_EBUSY);
	assert_int_equal(lease(f->st, L_FENCED, "d2", "C", 2, NULL, NULL),
			 MS_OK);
	assert_int_equal(
		lease(f->st, L_TAKEOVER_FENCE, "d2", "B", 2, NULL, NULL),
		MS_OK);
	expect_hosts(f->st, "A:C:d2:2 C:B:d2:3");
	for (int i = 0; i < 2; i++) { /* the second: a retry */
		assert_int_equal(readmit(f->st, "A", &rep), MS_OK);
		assert_int_equal(rep.changed, i == 0);
		assert_int_equal(rep.body.ms_body_u.hosts.hosts_len, 1);
		assert_string_equal(rep.body.ms_body_u.hosts.hosts_val[0].host,
				    "C");
		master_reply_free(&rep);
	}
	assert_int_equal(readmit(f->st, "never-fenced", &rep), MS_OK);
	assert_false(rep.changed);
	master_reply_free(&rep);
	assert_int_equal(readmit(f->st, "a b", &rep), MS_EINVAL);
	assert_non_null(strstr(rep.message, "a host id is 1-63"));
	master_reply_free(&rep);
	assert_int_equal(readmit(f->st, "", NULL), MS_EINVAL);
	expect_hosts(f->st, "C:B:d2:3");
	/* A acquires again: d1 after B fenced A and lets it go */
	assert_int_equal(lease(f->st, L_FENCED, "d1", "B", 2, NULL, NULL),
			 MS_OK);
	assert_int_equal(lease(f->st, L_RELEASE, "d1", "B", 2, NULL, NULL),
			 MS_OK);
	assert_int_equal(lease(f->st, L_ACQUIRE, "d1", "A", 0, NULL, NULL),
			 MS_OK);
	expect_pending(f->st, "d1", "A", 3, false);
}

/* A call that fails after the fence is written leaves neither behind. */
static void test_fence_rollback(void **state)
{
	struct fixture *f = *state;
	ms_lease_args a = {"d1", "B", 1, "", true};
	ms_reply rep;

	two_disks_held_by_a(f->st);
	master_reply_init(&rep);
	assert_int_equal(master_store_begin(f->st), 0);
	assert_int_equal(master_store_call_begin(f->st), 0);
	assert_int_equal(master_store_lease_takeover(f->st, &a, &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	master_reply_free(&rep);
	assert_int_equal(master_store_call_end(f->st, false), 0);
	assert_int_equal(master_store_commit(f->st), 0);
	expect_pending(f->st, "d1", "A", 1, false);
	expect_hosts(f->st, "");
}

/* The check finds a fence pending on a free lease. */
static void test_fence_check(void **state)
{
	struct fixture *f = *state;
	char msg[256];

	two_disks_held_by_a(f->st);
	master_store_close(f->st);
	assert_int_equal(raw_sql(f->path, "UPDATE leases SET holder = '',"
					  " fence_pending = 1"
					  " WHERE vdisk_id = 'd1'"),
			 SQLITE_OK);
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), -EUCLEAN);
	assert_non_null(strstr(msg, "a free lease has a fence pending"));
}

/*
 * A database of schema 3 as stripe-master 3 left it (its dump, made with
 * the previous stripe-master: two servers, disk "old" of 2 x 1 x 1, taken
 * over by hostB from hostA with --fence, which that master only recorded).
 */
static const char schema_v3_dump[] =
	"CREATE TABLE allocations ( vdisk_id TEXT NOT NULL REFERENCES vdisks"
	" (id), col INTEGER NOT NULL CHECK (col >= 0), ext INTEGER NOT NULL"
	" CHECK (ext >= 0), replica INTEGER NOT NULL CHECK (replica >= 0),"
	" server_id INTEGER NOT NULL REFERENCES servers (id), idx INTEGER NOT"
	" NULL CHECK (idx >= 0), stale INTEGER NOT NULL DEFAULT 0 CHECK (stale"
	" IN (0, 1)), PRIMARY KEY (vdisk_id, col, ext, replica), UNIQUE"
	" (server_id, idx)) WITHOUT ROWID;"
	"INSERT INTO \"allocations\" VALUES('old',0,0,0,1,0,0);"
	"INSERT INTO \"allocations\" VALUES('old',1,0,0,2,0,0);"
	"CREATE TABLE leases ( vdisk_id TEXT PRIMARY KEY NOT NULL  CHECK"
	" (length(vdisk_id) BETWEEN 1 AND 63), holder TEXT NOT NULL CHECK"
	" (length(holder) <= 63), epoch INTEGER NOT NULL CHECK (epoch >= 0),"
	" previous TEXT NOT NULL CHECK (length(previous) <= 63), fence INTEGER"
	" NOT NULL CHECK (fence IN (0, 1)), since INTEGER NOT NULL CHECK"
	" (since >= 0), CHECK (holder = '' OR epoch >= 1)) WITHOUT ROWID;"
	"INSERT INTO \"leases\" VALUES('old','hostB',2,'hostA',1,1795689883);"
	"CREATE TABLE meta ( id INTEGER PRIMARY KEY CHECK (id = 1),"
	" schema_version INTEGER NOT NULL, extent_size_bytes INTEGER NOT NULL"
	" CHECK (extent_size_bytes > 0));"
	"INSERT INTO \"meta\" VALUES(1,3,1048576);"
	"CREATE TABLE released ( server_id INTEGER NOT NULL REFERENCES servers"
	" (id), idx INTEGER NOT NULL CHECK (idx >= 0), PRIMARY KEY (server_id,"
	" idx)) WITHOUT ROWID;"
	"CREATE TABLE servers ( id INTEGER PRIMARY KEY AUTOINCREMENT, address"
	" TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 63), portal TEXT"
	" NOT NULL CHECK (length(portal) BETWEEN 1 AND 261), target TEXT NOT"
	" NULL CHECK (length(target) BETWEEN 1 AND 223), lun INTEGER NOT NULL"
	" CHECK (lun BETWEEN 0 AND 65535), size_bytes INTEGER NOT NULL CHECK"
	" (size_bytes > 0), block_size INTEGER NOT NULL CHECK (block_size IN"
	" (512, 1024, 2048,  4096)), nr_extents INTEGER NOT NULL CHECK"
	" (nr_extents > 0), free_extents INTEGER NOT NULL  CHECK (free_extents"
	" BETWEEN 0 AND nr_extents), next_fresh INTEGER NOT NULL DEFAULT 0 "
	" CHECK (next_fresh BETWEEN 0 AND nr_extents), draining INTEGER NOT"
	" NULL DEFAULT 0 CHECK (draining IN (0, 1)), UNIQUE (target, lun));"
	"INSERT INTO \"servers\" VALUES(1,'10.0.0.1','10.0.0.1:3260',"
	"'iqn.2024-01.t:s1',1,4194304,512,4,3,1,0);"
	"INSERT INTO \"servers\" VALUES(2,'10.0.0.2','10.0.0.2:3260',"
	"'iqn.2024-01.t:s2',1,4194304,512,4,3,1,0);"
	"CREATE TABLE vdisks ( id TEXT PRIMARY KEY NOT NULL CHECK (length(id)"
	" BETWEEN 1 AND 63), columns INTEGER NOT NULL CHECK (columns BETWEEN 1"
	" AND 256), extents_per_column INTEGER NOT NULL CHECK"
	" (extents_per_column >= 1), replicas INTEGER NOT NULL CHECK (replicas"
	" BETWEEN 1 AND 4), CHECK (columns * extents_per_column * replicas <="
	" 262144)) WITHOUT ROWID;"
	"INSERT INTO \"vdisks\" VALUES('old',2,1,1);"
	"CREATE INDEX allocations_stale ON allocations (vdisk_id) WHERE"
	" stale = 1;"
	"DELETE FROM \"sqlite_sequence\";"
	"INSERT INTO \"sqlite_sequence\" VALUES('servers',2);";

/*
 * Schema 3 -> 4 keeps the leases; the fence the old master only recorded
 * fences nobody now (it never preempted anyone, and a running disk must
 * not stop on an upgrade).
 */
static void test_fence_schema3_upgrade(void **state)
{
	struct fixture *f = *state;
	char path[128], msg[256];
	struct master_store *st;
	ms_reply rep;

	snprintf(path, sizeof(path), "%s/v3.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v3_dump), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(st, msg, sizeof(msg)), 0);
	assert_int_equal(lease(st, L_SHOW, "old", NULL, 0, NULL, &rep), MS_OK);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "hostB");
	assert_string_equal(rep.body.ms_body_u.lease.previous, "hostA");
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 2);
	assert_true(rep.body.ms_body_u.lease.fence);
	assert_int_equal(rep.body.ms_body_u.lease.since, 1795689883);
	assert_false(rep.body.ms_body_u.lease.fence_pending);
	master_reply_free(&rep);
	expect_hosts(st, "");
	/* it works on: hostC fences hostB */
	assert_int_equal(
		lease(st, L_TAKEOVER_FENCE, "old", "hostC", 2, NULL, NULL),
		MS_OK);
	expect_hosts(st, "hostB:hostC:old:3");
	master_store_close(st);
	assert_true(raw_query_is_one(path, "SELECT schema_version = 8 FROM"
					   " meta"));
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	expect_pending(st, "old", "hostC", 3, true);
	expect_hosts(st, "hostB:hostC:old:3");
	master_store_close(st);
}

/* --- failure domains (issue #19) ------------------------------------------ */

static int do_label(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_server_label(st, a, rep);
}

/* Register server n as host hN in rack rR, site sS ("" for none). */
static ms_status add_labelled(struct master_store *st, int n, const char *rack,
			      const char *site, u_quad_t size)
{
	char address[32], target[64], host[16];
	ms_server_add_args a = {address, address,      target,
				1,	 size,	       512,
				host,	 (char *)rack, (char *)site};
	ms_reply rep;
	ms_status status;

	snprintf(address, sizeof(address), "10.0.1.%d", n);
	snprintf(target, sizeof(target), "iqn.2024-01.t:l%d", n);
	snprintf(host, sizeof(host), "h%d", n);
	assert_int_equal(call(st, do_add, &a, &rep), 0);
	status = rep.status;
	if (status == MS_OK) {
		assert_string_equal(rep.body.ms_body_u.server.host, host);
		assert_string_equal(rep.body.ms_body_u.server.rack, rack);
		assert_string_equal(rep.body.ms_body_u.server.site, site);
	}
	master_reply_free(&rep);
	return status;
}

/* Relabel server n (NULL: leave that label). */
static ms_status relabel(struct master_store *st, int n, const char *host,
			 const char *rack, const char *site, bool *changed)
{
	char target[64];
	ms_server_label_args a = {target,	1,
				  host != NULL, (char *)host,
				  rack != NULL, (char *)rack,
				  site != NULL, (char *)site};
	ms_reply rep;
	ms_status status;

	snprintf(target, sizeof(target), "iqn.2024-01.t:l%d", n);
	assert_int_equal(call(st, do_label, &a, &rep), 0);
	status = rep.status;
	if (changed)
		*changed = rep.changed;
	master_reply_free(&rep);
	return status;
}

static void test_labels_add_and_relabel(void **state)
{
	struct fixture *f = *state;
	char msg[256], long_label[MS_LABEL_MAX + 2];
	bool changed;

	assert_int_equal(add_labelled(f->st, 1, "r1", "s1", 4 * MiB), MS_OK);
	/* the same add again: nothing changes; other labels: refused */
	assert_int_equal(add_labelled(f->st, 1, "r1", "s1", 4 * MiB), MS_OK);
	assert_int_equal(add_labelled(f->st, 1, "r2", "s1", 4 * MiB),
			 MS_EEXIST);
	/* relabel: changed once, then a no-op */
	assert_int_equal(relabel(f->st, 1, NULL, "r2", NULL, &changed), MS_OK);
	assert_true(changed);
	assert_int_equal(relabel(f->st, 1, NULL, "r2", NULL, &changed), MS_OK);
	assert_false(changed);
	assert_int_equal(relabel(f->st, 1, "h1", "r2", "s1", &changed), MS_OK);
	assert_false(changed);
	/* a re-run of the first add, without labels, still matches */
	assert_int_equal(add_server(f->st, 9, NULL), MS_OK);
	assert_int_equal(relabel(f->st, 1, NULL, "", "", &changed), MS_OK);
	assert_true(changed);
	/* bad labels: the host-id rule; a host label may not be empty */
	memset(long_label, 'x', sizeof(long_label) - 1);
	long_label[sizeof(long_label) - 1] = '\0';
	assert_int_equal(relabel(f->st, 1, "", NULL, NULL, NULL), MS_EINVAL);
	assert_int_equal(relabel(f->st, 1, NULL, "r 1", NULL, NULL), MS_EINVAL);
	assert_int_equal(relabel(f->st, 1, NULL, NULL, "s/1", NULL), MS_EINVAL);
	assert_int_equal(relabel(f->st, 1, long_label, NULL, NULL, NULL),
			 MS_EINVAL);
	assert_int_equal(add_labelled(f->st, 2, "r:1", "", 4 * MiB), MS_EINVAL);
	assert_int_equal(relabel(f->st, 7, "h7", NULL, NULL, NULL), MS_ENOENT);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

/* A relabel that would put two replicas of one extent on one host is
 * refused; the check finds such a state when made by hand. */
static void test_labels_relabel_clash(void **state)
{
	struct fixture *f = *state;
	char msg[256];
	ms_reply rep;

	for (int n = 1; n <= 2; n++)
		assert_int_equal(add_labelled(f->st, n, "", "", 4 * MiB),
				 MS_OK);
	assert_int_equal(alloc(f->st, "d1", 1, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(relabel(f->st, 2, "h1", NULL, NULL, NULL), MS_EEXIST);
	assert_int_equal(relabel(f->st, 2, "h2b", NULL, NULL, NULL), MS_OK);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
	master_store_close(f->st);
	assert_int_equal(raw_sql(f->path, "UPDATE servers SET host = 'h1'"),
			 SQLITE_OK);
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), -EUCLEAN);
	assert_non_null(strstr(msg, "two replicas of one extent"));
	master_store_close(f->st);
	assert_int_equal(raw_sql(f->path, "UPDATE servers SET host = ''"
					  " WHERE id = 2"),
			 SQLITE_OK);
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), -EUCLEAN);
	assert_non_null(strstr(msg, "no host label"));
}

/*
 * Sites s1 (two hosts, roomy) and s2 (one host, room for one extent):
 * a disk of 1 x 3 x 2 gets its first extent across both sites, the other
 * two in s1 only, noted; the notes come back with every lookup, go with
 * the disk, and the check holds throughout.
 */
static void test_labels_spread_notes(void **state)
{
	struct fixture *f = *state;
	char msg[256];
	ms_reply rep;
	const ms_vdisk *v = &rep.body.ms_body_u.vdisk;

	assert_int_equal(add_labelled(f->st, 1, "r1", "s1", 4 * MiB), MS_OK);
	assert_int_equal(add_labelled(f->st, 2, "r2", "s1", 4 * MiB), MS_OK);
	assert_int_equal(add_labelled(f->st, 3, "r1", "s2", 1 * MiB), MS_OK);
	assert_int_equal(alloc(f->st, "d1", 1, 3, 2, &rep), MS_OK);
	assert_int_equal(v->spread.spread_len, 2);
	for (u_int i = 0; i < 2; i++) {
		assert_int_equal(v->spread.spread_val[i].column, 0);
		assert_int_equal(v->spread.spread_val[i].extent, i + 1);
		assert_int_equal(v->spread.spread_val[i].reached,
				 MS_DOMAIN_RACK);
		assert_int_equal(v->spread.spread_val[i].wanted,
				 MS_DOMAIN_SITE);
		assert_int_equal(v->spread.spread_val[i].room, 1);
	}
	/* extent 0 has a replica on server 3 (s2) */
	assert_true(v->extents.extents_val[0].server_id == 3 ||
		    v->extents.extents_val[1].server_id == 3);
	master_reply_free(&rep);
	call(f->st, do_lookup, "d1", &rep);
	assert_int_equal(v->spread.spread_len, 2);
	master_reply_free(&rep);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
	/* a note outside the disk, made by hand, is found */
	assert_int_equal(sqlite3_exec(f->st->db,
				      "INSERT INTO spread_notes VALUES"
				      " ('d1', 0, 7, 0, 2, 1)",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	assert_int_equal(master_store_check_invariants(f->st, msg, sizeof(msg)),
			 -EUCLEAN);
	assert_non_null(strstr(msg, "spread note"));
	assert_int_equal(sqlite3_exec(f->st->db,
				      "DELETE FROM spread_notes WHERE ext = 7",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	call(f->st, do_release, "d1", &rep);
	assert_int_equal(rep.status, MS_OK);
	master_reply_free(&rep);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
	master_store_close(f->st);
	f->st = NULL;
	assert_false(raw_query_is_one(f->path, "SELECT count(*) > 0 FROM"
					       " spread_notes"));
}

/*
 * A database of schema 4 as the previous stripe-master left it (its dump:
 * three servers, one of them at an IPv6 address, disk "old" of 1 x 2 x 2).
 * Opened, it gets host labels from the addresses and no rack or site, and
 * works on.
 */
static const char schema_v4_dump[] =
	"CREATE TABLE allocations ( vdisk_id TEXT NOT NULL REFERENCES vdisks"
	" (id), col INTEGER NOT NULL CHECK (col >= 0), ext INTEGER NOT NULL"
	" CHECK (ext >= 0), replica INTEGER NOT NULL CHECK (replica >= 0),"
	" server_id INTEGER NOT NULL REFERENCES servers (id), idx INTEGER NOT"
	" NULL CHECK (idx >= 0), stale INTEGER NOT NULL DEFAULT 0 CHECK (stale"
	" IN (0, 1)), PRIMARY KEY (vdisk_id, col, ext, replica), UNIQUE"
	" (server_id, idx)) WITHOUT ROWID;"
	"INSERT INTO \"allocations\" VALUES('old',0,0,0,1,0,0);"
	"INSERT INTO \"allocations\" VALUES('old',0,0,1,2,0,0);"
	"INSERT INTO \"allocations\" VALUES('old',0,1,0,1,1,0);"
	"INSERT INTO \"allocations\" VALUES('old',0,1,1,2,1,0);"
	"CREATE TABLE fenced_hosts ( host TEXT PRIMARY KEY NOT NULL  CHECK"
	" (length(host) BETWEEN 1 AND 63), by_host TEXT NOT NULL CHECK"
	" (length(by_host) BETWEEN 1 AND 63), vdisk_id TEXT NOT NULL CHECK"
	" (length(vdisk_id) BETWEEN 1 AND 63), epoch INTEGER NOT NULL CHECK"
	" (epoch >= 1), since INTEGER NOT NULL CHECK (since >= 0)) WITHOUT"
	" ROWID;"
	"CREATE TABLE leases ( vdisk_id TEXT PRIMARY KEY NOT NULL  CHECK"
	" (length(vdisk_id) BETWEEN 1 AND 63), holder TEXT NOT NULL CHECK"
	" (length(holder) <= 63), epoch INTEGER NOT NULL CHECK (epoch >= 0),"
	" previous TEXT NOT NULL CHECK (length(previous) <= 63), fence INTEGER"
	" NOT NULL CHECK (fence IN (0, 1)), since INTEGER NOT NULL CHECK"
	" (since >= 0), fence_pending INTEGER NOT NULL DEFAULT 0 CHECK"
	" (fence_pending IN (0, 1)), CHECK (holder = '' OR epoch >= 1))"
	" WITHOUT ROWID;"
	"CREATE TABLE meta ( id INTEGER PRIMARY KEY CHECK (id = 1),"
	" schema_version INTEGER NOT NULL, extent_size_bytes INTEGER NOT NULL"
	" CHECK (extent_size_bytes > 0));"
	"INSERT INTO \"meta\" VALUES(1,4,1048576);"
	"CREATE TABLE released ( server_id INTEGER NOT NULL REFERENCES"
	" servers (id), idx INTEGER NOT NULL CHECK (idx >= 0), PRIMARY KEY"
	" (server_id, idx)) WITHOUT ROWID;"
	"CREATE TABLE servers ( id INTEGER PRIMARY KEY AUTOINCREMENT, address"
	" TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 63), portal TEXT"
	" NOT NULL CHECK (length(portal) BETWEEN 1 AND 261), target TEXT NOT"
	" NULL CHECK (length(target) BETWEEN 1 AND 223), lun INTEGER NOT NULL"
	" CHECK (lun BETWEEN 0 AND 65535), size_bytes INTEGER NOT NULL CHECK"
	" (size_bytes > 0), block_size INTEGER NOT NULL CHECK (block_size IN"
	" (512, 1024, 2048,  4096)), nr_extents INTEGER NOT NULL CHECK"
	" (nr_extents > 0), free_extents INTEGER NOT NULL  CHECK (free_extents"
	" BETWEEN 0 AND nr_extents), next_fresh INTEGER NOT NULL DEFAULT 0 "
	" CHECK (next_fresh BETWEEN 0 AND nr_extents), draining INTEGER NOT"
	" NULL DEFAULT 0 CHECK (draining IN (0, 1)), UNIQUE (target, lun));"
	"INSERT INTO \"servers\" VALUES(1,'10.0.0.1','10.0.0.1:3260',"
	"'iqn.t:s1',1,4194304,512,4,2,2,0);"
	"INSERT INTO \"servers\" VALUES(2,'10.0.0.2','10.0.0.2:3260',"
	"'iqn.t:s2',1,4194304,512,4,2,2,0);"
	"INSERT INTO \"servers\" VALUES(3,'fd00::3','[fd00::3]:3260',"
	"'iqn.t:s3',1,4194304,512,4,4,0,0);"
	"CREATE TABLE vdisks ( id TEXT PRIMARY KEY NOT NULL CHECK (length(id)"
	" BETWEEN 1 AND 63), columns INTEGER NOT NULL CHECK (columns BETWEEN 1"
	" AND 256), extents_per_column INTEGER NOT NULL CHECK"
	" (extents_per_column >= 1), replicas INTEGER NOT NULL CHECK (replicas"
	" BETWEEN 1 AND 4), CHECK (columns * extents_per_column * replicas <="
	" 262144)) WITHOUT ROWID;"
	"INSERT INTO \"vdisks\" VALUES('old',1,2,2);"
	"CREATE INDEX allocations_stale ON allocations (vdisk_id) WHERE"
	" stale = 1;"
	"DELETE FROM \"sqlite_sequence\";"
	"INSERT INTO \"sqlite_sequence\" VALUES('servers',3);";

static void test_labels_schema4_upgrade(void **state)
{
	struct fixture *f = *state;
	static const struct where old_extents[] = {
		{1, 0}, {2, 0}, {1, 1}, {2, 1}};
	char path[128], msg[256];
	struct master_store *st;
	ms_reply rep;
	ms_server *s;

	snprintf(path, sizeof(path), "%s/v4.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v4_dump), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(st, msg, sizeof(msg)), 0);
	call(st, do_lookup, "old", &rep);
	expect_extents(&rep, old_extents, ARRAY_SIZE(old_extents));
	assert_int_equal(rep.body.ms_body_u.vdisk.spread.spread_len, 0);
	master_reply_free(&rep);
	assert_int_equal(master_store_server_list(st, &rep), 0);
	s = rep.body.ms_body_u.servers.servers_val;
	assert_string_equal(s[0].host, "10.0.0.1");
	assert_string_equal(s[2].host, "fd00--3");
	assert_string_equal(s[2].address, "fd00::3");
	assert_string_equal(s[1].rack, "");
	assert_string_equal(s[1].site, "");
	master_reply_free(&rep);
	master_store_close(st);
	assert_true(raw_query_is_one(path, "SELECT schema_version = 8 FROM"
					   " meta"));
	assert_true(raw_query_is_one(path, "SELECT count(*) FROM"
					   " sqlite_master WHERE name ="
					   " 'spread_notes'"));
}

/*
 * The 4 -> 5 upgrade is one transaction: when its last statement fails
 * (a table of that name exists already), the database stays at schema 4
 * without the label columns, and opens again once the obstacle is gone.
 */
static void test_labels_upgrade_all_or_nothing(void **state)
{
	struct fixture *f = *state;
	char path[128], msg[256];
	struct master_store *st;

	snprintf(path, sizeof(path), "%s/v4.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v4_dump), SQLITE_OK);
	assert_int_equal(raw_sql(path, "CREATE TABLE spread_notes (x);"),
			 SQLITE_OK);
	assert_int_not_equal(master_store_open(path, 0, &st, msg, sizeof(msg)),
			     0);
	assert_true(raw_query_is_one(path, "SELECT schema_version = 4 FROM"
					   " meta"));
	assert_true(raw_query_is_one(path, "SELECT count(*) = 0 FROM"
					   " pragma_table_info('servers')"
					   " WHERE name IN ('host', 'rack',"
					   " 'site')"));
	assert_int_equal(raw_sql(path, "DROP TABLE spread_notes;"), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(st, msg, sizeof(msg)), 0);
	master_store_close(st);
}

/* --- re-homing and failed servers (issue #19) ------------------------------- */

static int do_fail(struct master_store *st, const void *k, ms_reply *rep)
{
	return master_store_server_fail(st, k, rep);
}

static int do_status(struct master_store *st, const void *unused, ms_reply *rep)
{
	return master_store_server_status(st, rep);
}

static int do_begin(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_move_begin(st, a, rep);
}

static int do_commit(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_move_commit(st, a, rep);
}

static int do_abort(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_move_abort(st, a, rep);
}

static int do_moves(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_move_list(st, a, rep);
}

/* What a move call answered. */
struct moved {
	ms_status status;
	bool changed;
	bool done;
	u_int old_server;
	u_int new_server;
	unsigned int new_mib;
};

/*
 * One move call on slot (c, x, r) of disk id naming server "target" lun 1
 * (begin: the old server; commit, abort: the new one at new_mib).
 */
static struct moved move_call(struct master_store *st, store_fn fn,
			      const char *id, u_int c, u_int x, u_int r,
			      const char *target, unsigned int new_mib,
			      ms_move_reason reason)
{
	ms_move_args a = {(char *)id,	 c,	x, r, (char *)target, 1,
			  new_mib * MiB, reason};
	struct moved m = {0};
	ms_reply rep;

	assert_int_equal(call(st, fn, &a, &rep), 0);
	m.status = rep.status;
	m.changed = rep.changed;
	if (!rep.status) {
		const ms_move_result *res = &rep.body.ms_body_u.move;

		assert_int_equal(rep.body.kind, MS_BODY_MOVE);
		assert_string_equal(res->move.vdisk, id);
		m.done = res->done;
		m.old_server = res->move.old_server_id;
		m.new_server = res->move.new_server_id;
		m.new_mib = (unsigned int)(res->move.new_offset_bytes / MiB);
		assert_int_equal(res->new_server.id, m.new_server);
	}
	master_reply_free(&rep);
	return m;
}

#define BEGIN(st, c, x, r, srv)                                        \
	move_call(st, do_begin, "d", c, x, r, "iqn.2024-01.t:" srv, 0, \
		  MS_MOVE_EVACUATE)
#define COMMIT(st, c, x, r, srv, mib) \
	move_call(st, do_commit, "d", c, x, r, "iqn.2024-01.t:" srv, mib, 0)
#define ABORT(st, c, x, r, srv, mib) \
	move_call(st, do_abort, "d", c, x, r, "iqn.2024-01.t:" srv, mib, 0)

static void expect_consistent(struct master_store *st)
{
	char msg[256] = "";

	if (master_store_check(st, msg, sizeof(msg)))
		fail_msg("check: %s", msg);
}

/* Free extents of server id (1-based, in id order). */
static u_int free_of(struct master_store *st, u_int id)
{
	ms_reply rep;
	u_int n;

	master_reply_init(&rep);
	assert_int_equal(master_store_server_list(st, &rep), 0);
	n = rep.body.ms_body_u.servers.servers_val[id - 1].free_extents;
	master_reply_free(&rep);
	return n;
}

static u_int moves_in_progress(struct master_store *st)
{
	ms_move_list_args a = {.vdisk = "", .limit = 16};
	ms_reply rep;
	u_int n;

	assert_int_equal(call(st, do_moves, &a, &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	n = rep.body.ms_body_u.moves.moves.moves_len;
	master_reply_free(&rep);
	return n;
}

/* Four servers, disk d of 1 x 2 x 2 on servers 1 and 2. */
static void four_and_d(struct master_store *st)
{
	static const struct where d[] = {{1, 0}, {2, 0}, {1, 1}, {2, 1}};
	ms_reply rep;

	add_four(st);
	assert_int_equal(alloc(st, "d", 1, 2, 2, &rep), MS_OK);
	expect_extents(&rep, d, ARRAY_SIZE(d));
	master_reply_free(&rep);
}

static void test_move_begin_commit(void **state)
{
	struct fixture *f = *state;
	static const struct where after[] = {{3, 0}, {2, 0}, {1, 1}, {2, 1}};
	struct moved m, again;
	ms_reply rep;

	four_and_d(f->st);
	m = BEGIN(f->st, 0, 0, 0, "s1");
	assert_int_equal(m.status, MS_OK);
	assert_true(m.changed);
	assert_false(m.done);
	assert_int_equal(m.old_server, 1);
	assert_int_equal(m.new_server, 3); /* not 1, not 2's host; most free */
	assert_int_equal(free_of(f->st, 3), 3);
	expect_consistent(f->st);
	/* asked again: the same move */
	again = BEGIN(f->st, 0, 0, 0, "s1");
	assert_int_equal(again.status, MS_OK);
	assert_false(again.changed);
	assert_int_equal(again.new_server, m.new_server);
	assert_int_equal(again.new_mib, m.new_mib);
	assert_int_equal(moves_in_progress(f->st), 1);
	/* the lookup and the listing show it */
	call(f->st, do_lookup, "d", &rep);
	assert_int_equal(rep.body.ms_body_u.vdisk.moves.moves_len, 1);
	assert_int_equal(rep.body.ms_body_u.vdisk.servers.servers_len, 3);
	master_reply_free(&rep);
	/* another NEW is refused; the right one commits, once */
	assert_int_equal(COMMIT(f->st, 0, 0, 0, "s4", 0).status, MS_EEXIST);
	m = COMMIT(f->st, 0, 0, 0, "s3", 0);
	assert_int_equal(m.status, MS_OK);
	assert_true(m.changed);
	assert_true(m.done);
	assert_int_equal(free_of(f->st, 1), 3); /* OLD freed */
	assert_int_equal(free_of(f->st, 3), 3);
	call(f->st, do_lookup, "d", &rep);
	expect_extents(&rep, after, ARRAY_SIZE(after));
	assert_int_equal(rep.body.ms_body_u.vdisk.moves.moves_len, 0);
	master_reply_free(&rep);
	expect_consistent(f->st);
	/* double commit: unchanged; begin after commit: done */
	m = COMMIT(f->st, 0, 0, 0, "s3", 0);
	assert_int_equal(m.status, MS_OK);
	assert_false(m.changed);
	m = BEGIN(f->st, 0, 0, 0, "s1");
	assert_int_equal(m.status, MS_OK);
	assert_true(m.done);
	assert_false(m.changed);
	assert_int_equal(m.new_server, 3);
	assert_int_equal(ABORT(f->st, 0, 0, 0, "s3", 0).status, MS_EEXIST);
	assert_int_equal(moves_in_progress(f->st), 0);
	expect_consistent(f->st);
}

static void test_move_abort(void **state)
{
	struct fixture *f = *state;
	static const struct where d[] = {{1, 0}, {2, 0}, {1, 1}, {2, 1}};
	struct moved m;
	ms_reply rep;

	four_and_d(f->st);
	m = BEGIN(f->st, 0, 1, 1, "s2");
	assert_int_equal(m.status, MS_OK);
	assert_int_equal(m.new_server, 3);
	assert_int_equal(free_of(f->st, 3), 3);
	m = ABORT(f->st, 0, 1, 1, "s3", m.new_mib);
	assert_int_equal(m.status, MS_OK);
	assert_true(m.changed);
	assert_int_equal(free_of(f->st, 3), 4); /* NEW freed */
	m = ABORT(f->st, 0, 1, 1, "s3", 0);	/* again: unchanged */
	assert_int_equal(m.status, MS_OK);
	assert_false(m.changed);
	call(f->st, do_lookup, "d", &rep);
	expect_extents(&rep, d, ARRAY_SIZE(d));
	master_reply_free(&rep);
	assert_int_equal(moves_in_progress(f->st), 0);
	expect_consistent(f->st);
	/* a slot being moved: a second begin from another server is
	 * refused; a commit with no move is ENOENT; destroying the disk frees
	 * the move's NEW */
	assert_int_equal(BEGIN(f->st, 0, 1, 1, "s2").status, MS_OK);
	assert_int_equal(BEGIN(f->st, 0, 1, 1, "s3").status, MS_EEXIST);
	assert_int_equal(COMMIT(f->st, 0, 0, 0, "s3", 0).status, MS_ENOENT);
	call(f->st, do_release, "d", &rep);
	assert_int_equal(rep.status, MS_OK);
	master_reply_free(&rep);
	for (u_int id = 1; id <= 4; id++)
		assert_int_equal(free_of(f->st, id), 4);
	expect_consistent(f->st);
}

static void test_move_placement_domains(void **state)
{
	struct fixture *f = *state;
	struct moved m;
	ms_reply rep;

	/* h1 s1, h2 s2, h3 s2, h4 s1: d's replicas on h1 and h2 */
	assert_int_equal(add_labelled(f->st, 1, "", "s1", 4 * MiB), MS_OK);
	assert_int_equal(add_labelled(f->st, 2, "", "s2", 4 * MiB), MS_OK);
	assert_int_equal(add_labelled(f->st, 3, "", "s2", 4 * MiB), MS_OK);
	assert_int_equal(add_labelled(f->st, 4, "", "s1", 4 * MiB), MS_OK);
	assert_int_equal(alloc(f->st, "d", 1, 1, 2, &rep), MS_OK);
	assert_int_equal(
		rep.body.ms_body_u.vdisk.extents.extents_val[0].server_id, 1);
	assert_int_equal(
		rep.body.ms_body_u.vdisk.extents.extents_val[1].server_id, 2);
	master_reply_free(&rep);
	/* off h1 (s1): h4, the other site than h2's, not h3 (first, but s2) */
	m = move_call(f->st, do_begin, "d", 0, 0, 0, "iqn.2024-01.t:l1", 0,
		      MS_MOVE_EVACUATE);
	assert_int_equal(m.status, MS_OK);
	assert_int_equal(m.new_server, 4);
	assert_int_equal(move_call(f->st, do_abort, "d", 0, 0, 0,
				   "iqn.2024-01.t:l4", m.new_mib, 0)
				 .status,
			 MS_OK);
	/* h4 drains: only h3 is left, same site as h2: placed at host level,
	 * and the commit records a spread note */
	assert_int_equal(relabel(f->st, 4, NULL, NULL, "s2", NULL), MS_OK);
	m = move_call(f->st, do_begin, "d", 0, 0, 0, "iqn.2024-01.t:l1", 0,
		      MS_MOVE_EVACUATE);
	assert_int_equal(m.status, MS_OK);
	assert_int_equal(m.new_server, 3);
	assert_int_equal(move_call(f->st, do_commit, "d", 0, 0, 0,
				   "iqn.2024-01.t:l3", m.new_mib, 0)
				 .status,
			 MS_OK);
	call(f->st, do_lookup, "d", &rep);
	assert_int_equal(rep.body.ms_body_u.vdisk.spread.spread_len, 1);
	master_reply_free(&rep);
	expect_consistent(f->st);
}

/* Under-replicated extents and moves of disk d (MS_VDISK_LIST). */
static void expect_under(struct master_store *st, u_int under, u_int moves)
{
	ms_vdisk_list_args a = {"", 8};
	ms_reply rep;

	assert_int_equal(call(st, do_vdisks, &a, &rep), 0);
	assert_int_equal(rep.body.ms_body_u.vdisks.vdisks.vdisks_len, 1);
	assert_int_equal(
		rep.body.ms_body_u.vdisks.vdisks.vdisks_val[0].under_replicated,
		under);
	assert_int_equal(rep.body.ms_body_u.vdisks.vdisks.vdisks_val[0].moves,
			 moves);
	master_reply_free(&rep);
}

static void test_server_fail(void **state)
{
	struct fixture *f = *state;
	char target[] = "iqn.2024-01.t:s1", nobody[] = "iqn.2024-01.t:x";
	ms_server_key k = {target, 1}, unknown = {nobody, 1};
	ms_server_stat *x;
	struct moved m;
	ms_reply rep;

	four_and_d(f->st);
	expect_under(f->st, 0, 0);
	assert_int_equal(mark(f->st, "d", 0, 1, 1, true, NULL), MS_OK);
	expect_under(f->st, 1, 0); /* a stale mark */
	call(f->st, do_fail, &unknown, &rep);
	assert_int_equal(rep.status, MS_ENOENT);
	master_reply_free(&rep);
	call(f->st, do_fail, &k, &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_true(rep.changed);
	master_reply_free(&rep);
	call(f->st, do_fail, &k, &rep); /* again: already failed */
	assert_int_equal(rep.status, MS_OK);
	assert_false(rep.changed);
	master_reply_free(&rep);
	expect_under(f->st, 2, 0); /* both extents lost server 1's copy */
	call(f->st, do_status, NULL, &rep);
	x = rep.body.ms_body_u.stats.stats_val;
	assert_int_equal(rep.body.ms_body_u.stats.stats_len, 4);
	assert_true(x[0].failed);
	assert_int_equal(x[0].replicas, 2);
	assert_int_equal(x[1].stale, 1);
	assert_false(x[1].failed);
	master_reply_free(&rep);
	/* the same server added again: refused while it holds replicas */
	assert_int_equal(add_server(f->st, 1, NULL), MS_EBUSY);
	/* re-homed from the survivors */
	for (u_int x2 = 0; x2 < 2; x2++) {
		m = move_call(f->st, do_begin, "d", 0, x2, 0, target, 0,
			      MS_MOVE_FAIL);
		assert_int_equal(m.status, MS_OK);
		assert_int_not_equal(m.new_server, 1);
		expect_under(f->st, 2 - x2, 1);
		assert_int_equal(move_call(f->st, do_commit, "d", 0, x2, 0,
					   m.new_server == 3
						   ? "iqn.2024-01.t:s3"
						   : "iqn.2024-01.t:s4",
					   m.new_mib, 0)
					 .status,
				 MS_OK);
	}
	assert_int_equal(mark(f->st, "d", 0, 1, 1, false, NULL), MS_OK);
	expect_under(f->st, 0, 0);
	expect_consistent(f->st);
	/* its freed extents are never placed again: a disk as large as the
	 * live servers' room avoids it */
	assert_int_equal(alloc(f->st, "e", 1, 4, 2, &rep), MS_OK);
	for (u_int i = 0; i < 8; i++)
		assert_int_not_equal(
			rep.body.ms_body_u.vdisk.extents.extents_val[i]
				.server_id,
			1);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "g", 1, 1, 1, &rep), MS_ENOSPC);
	master_reply_free(&rep);
	expect_consistent(f->st);
	/* empty now: removed, then it may come back as a new server */
	call(f->st, do_remove, &k, &rep);
	assert_int_equal(rep.status, MS_OK);
	master_reply_free(&rep);
	assert_int_equal(add_server(f->st, 1, NULL), MS_OK);
}

/* Both replicas of one extent moving at once: the second NEW avoids the
 * first one's host as well as the other replica's. */
static void test_move_two_of_one_extent(void **state)
{
	struct fixture *f = *state;
	static const struct where after[] = {{3, 0}, {4, 0}, {1, 1}, {2, 1}};
	struct moved a, b;
	ms_reply rep;

	four_and_d(f->st);
	a = BEGIN(f->st, 0, 0, 0, "s1");
	b = BEGIN(f->st, 0, 0, 1, "s2");
	assert_int_equal(a.new_server, 3);
	assert_int_equal(b.new_server, 4);
	expect_consistent(f->st);
	assert_int_equal(COMMIT(f->st, 0, 0, 1, "s4", b.new_mib).status, MS_OK);
	assert_int_equal(COMMIT(f->st, 0, 0, 0, "s3", a.new_mib).status, MS_OK);
	call(f->st, do_lookup, "d", &rep);
	expect_extents(&rep, after, ARRAY_SIZE(after));
	master_reply_free(&rep);
	expect_consistent(f->st);
}

static int do_takeover(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_lease_takeover(st, a, rep);
}

/* A takeover's LUNs to fence include the new extent of a move (written
 * during its copy). */
static void test_move_takeover_servers(void **state)
{
	struct fixture *f = *state;
	ms_lease_args a = {"d", "hostB", 0, "", true};
	ms_reply rep;

	four_and_d(f->st);
	assert_int_equal(BEGIN(f->st, 0, 0, 0, "s1").new_server, 3);
	call(f->st, do_takeover, &a, &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_int_equal(rep.body.ms_body_u.lease.servers.servers_len, 3);
	assert_int_equal(rep.body.ms_body_u.lease.servers.servers_val[2].id, 3);
	master_reply_free(&rep);
}

/* A relabel that would put a move's new extent on the host of another
 * replica of its extent (either way round) is refused. */
static void test_move_label_clash(void **state)
{
	struct fixture *f = *state;
	char t2[] = "iqn.2024-01.t:s2", t3[] = "iqn.2024-01.t:s3",
	     h2[] = "10.0.0.2", h3[] = "10.0.0.3";
	ms_server_label_args on_new = {t3, 1, true, h2, false, "", false, ""};
	ms_server_label_args on_old = {t2, 1, true, h3, false, "", false, ""};
	ms_reply rep;

	four_and_d(f->st);
	assert_int_equal(BEGIN(f->st, 0, 0, 0, "s1").new_server, 3);
	call(f->st, do_label, &on_new, &rep);
	assert_int_equal(rep.status, MS_EEXIST);
	master_reply_free(&rep);
	call(f->st, do_label, &on_old, &rep);
	assert_int_equal(rep.status, MS_EEXIST);
	master_reply_free(&rep);
	expect_consistent(f->st);
}

/* The check finds a move whose OLD is not its slot's replica, and one
 * whose NEW is allocated too. */
static void test_move_check(void **state)
{
	struct fixture *f = *state;
	char msg[256];

	four_and_d(f->st);
	assert_int_equal(BEGIN(f->st, 0, 0, 0, "s1").status, MS_OK);
	expect_consistent(f->st);
	master_store_close(f->st);
	assert_int_equal(raw_sql(f->path, "UPDATE moves SET old_idx = 3"),
			 SQLITE_OK);
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), -EUCLEAN);
	assert_non_null(strstr(msg, "old extent is not its slot's replica"));
	master_store_close(f->st);
	assert_int_equal(raw_sql(f->path, "UPDATE moves SET old_idx = 0;"
					  "UPDATE moves SET new_server = 2,"
					  " new_idx = 0"),
			 SQLITE_OK);
	assert_int_equal(
		master_store_open(f->path, 0, &f->st, msg, sizeof(msg)), 0);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), -EUCLEAN);
}

static const char schema_v5_dump[] =
	"CREATE TABLE allocations ( vdisk_id TEXT NOT NULL REFERENCES "
	"vdisks (id), col INTEGER NOT NULL CHECK (col >= 0), ext INTEGER "
	"NOT NULL CHECK (ext >= 0), replica INTEGER NOT NULL CHECK "
	"(replica >= 0), server_id INTEGER NOT NULL REFERENCES servers "
	"(id), idx INTEGER NOT NULL CHECK (idx >= 0), stale INTEGER NOT "
	"NULL DEFAULT 0 CHECK (stale IN (0, 1)), PRIMARY KEY (vdisk_id, "
	"col, ext, replica), UNIQUE (server_id, idx)) WITHOUT "
	"ROWID;INSERT INTO \"allocations\" VALUES('old',0,0,0,1,0,0);INSERT "
	"INTO \"allocations\" VALUES('old',0,0,1,2,0,0);INSERT INTO "
	"\"allocations\" VALUES('old',0,1,0,1,1,0);INSERT INTO "
	"\"allocations\" VALUES('old',0,1,1,2,1,1);CREATE TABLE "
	"fenced_hosts ( host TEXT PRIMARY KEY NOT NULL  CHECK "
	"(length(host) BETWEEN 1 AND 63), by_host TEXT NOT NULL CHECK "
	"(length(by_host) BETWEEN 1 AND 63), vdisk_id TEXT NOT NULL CHECK "
	"(length(vdisk_id) BETWEEN 1 AND 63), epoch INTEGER NOT NULL "
	"CHECK (epoch >= 1), since INTEGER NOT NULL CHECK (since >= 0)) "
	"WITHOUT ROWID;CREATE TABLE leases ( vdisk_id TEXT PRIMARY KEY "
	"NOT NULL  CHECK (length(vdisk_id) BETWEEN 1 AND 63), holder TEXT "
	"NOT NULL CHECK (length(holder) <= 63), epoch INTEGER NOT NULL "
	"CHECK (epoch >= 0), previous TEXT NOT NULL CHECK "
	"(length(previous) <= 63), fence INTEGER NOT NULL CHECK (fence IN "
	"(0, 1)), since INTEGER NOT NULL CHECK (since >= 0), "
	"fence_pending INTEGER NOT NULL DEFAULT 0 CHECK (fence_pending IN "
	"(0, 1)), CHECK (holder = '' OR epoch >= 1)) WITHOUT ROWID;CREATE "
	"TABLE meta ( id INTEGER PRIMARY KEY CHECK (id = 1), "
	"schema_version INTEGER NOT NULL, extent_size_bytes INTEGER NOT "
	"NULL CHECK (extent_size_bytes > 0));INSERT INTO meta "
	"VALUES(1,5,1048576);CREATE TABLE released ( server_id INTEGER "
	"NOT NULL REFERENCES servers (id), idx INTEGER NOT NULL CHECK "
	"(idx >= 0), PRIMARY KEY (server_id, idx)) WITHOUT ROWID;CREATE "
	"TABLE servers ( id INTEGER PRIMARY KEY AUTOINCREMENT, address "
	"TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 63), portal "
	"TEXT NOT NULL CHECK (length(portal) BETWEEN 1 AND 261), target "
	"TEXT NOT NULL CHECK (length(target) BETWEEN 1 AND 223), lun "
	"INTEGER NOT NULL CHECK (lun BETWEEN 0 AND 65535), size_bytes "
	"INTEGER NOT NULL CHECK (size_bytes > 0), block_size INTEGER NOT "
	"NULL CHECK (block_size IN (512, 1024, 2048,  4096)), nr_extents "
	"INTEGER NOT NULL CHECK (nr_extents > 0), free_extents INTEGER "
	"NOT NULL  CHECK (free_extents BETWEEN 0 AND nr_extents), "
	"next_fresh INTEGER NOT NULL DEFAULT 0  CHECK (next_fresh BETWEEN "
	"0 AND nr_extents), draining INTEGER NOT NULL DEFAULT 0 CHECK "
	"(draining IN (0, 1)), host TEXT NOT NULL DEFAULT '' CHECK "
	"(length(host) <= 63), rack TEXT NOT NULL DEFAULT '' CHECK "
	"(length(rack) <= 63), site TEXT NOT NULL DEFAULT '' CHECK "
	"(length(site) <= 63), UNIQUE (target, lun));INSERT INTO servers "
	"VALUES(1,'10.0.0.1','10.0.0.1:3260','iqn.t:s1',1,4194304,512,4,2,2,0,'"
	"10.0.0.1','r1','s1');INSERT "
	"INTO servers "
	"VALUES(2,'10.0.0.2','10.0.0.2:3260','iqn.t:s2',1,4194304,512,4,2,2,0,'"
	"10.0.0.2','','');INSERT "
	"INTO servers "
	"VALUES(3,'fd00::3','[fd00::3]:3260','iqn.t:s3',1,4194304,512,4,4,0,0,'"
	"fd00--3','','');CREATE "
	"TABLE vdisks ( id TEXT PRIMARY KEY NOT NULL CHECK (length(id) "
	"BETWEEN 1 AND 63), columns INTEGER NOT NULL CHECK (columns "
	"BETWEEN 1 AND 256), extents_per_column INTEGER NOT NULL CHECK "
	"(extents_per_column >= 1), replicas INTEGER NOT NULL CHECK "
	"(replicas BETWEEN 1 AND 4), CHECK (columns * extents_per_column "
	"* replicas <= 262144)) WITHOUT ROWID;INSERT INTO vdisks "
	"VALUES('old',1,2,2);CREATE TABLE spread_notes ( vdisk_id TEXT "
	"NOT NULL REFERENCES vdisks (id), col INTEGER NOT NULL CHECK (col "
	">= 0), ext INTEGER NOT NULL CHECK (ext >= 0), reached INTEGER "
	"NOT NULL CHECK (reached BETWEEN 0 AND 2), wanted INTEGER NOT "
	"NULL CHECK (wanted BETWEEN 1 AND 2), room INTEGER NOT NULL CHECK "
	"(room >= 0), CHECK (reached < wanted), PRIMARY KEY (vdisk_id, "
	"col, ext)) WITHOUT ROWID;DELETE FROM sqlite_sequence;INSERT INTO "
	"sqlite_sequence VALUES('servers',3);CREATE INDEX "
	"allocations_stale ON allocations (vdisk_id) WHERE stale = 1;";

/* A schema 5 database (made by the previous stripe-master: servers with
 * labels, disk "old" with a stale replica) opens as schema 6: no server
 * failed, no move, and moves work on it. */
static void test_moves_schema5_upgrade(void **state)
{
	struct fixture *f = *state;
	char path[128], msg[256];
	struct master_store *st;
	ms_reply rep;
	struct moved m;

	snprintf(path, sizeof(path), "%s/v5.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v5_dump), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	expect_consistent(st);
	call(st, do_status, NULL, &rep);
	assert_int_equal(rep.body.ms_body_u.stats.stats_len, 3);
	for (u_int i = 0; i < 3; i++)
		assert_false(rep.body.ms_body_u.stats.stats_val[i].failed);
	assert_int_equal(rep.body.ms_body_u.stats.stats_val[1].stale, 1);
	master_reply_free(&rep);
	assert_int_equal(moves_in_progress(st), 0);
	m = move_call(st, do_begin, "old", 0, 0, 0, "iqn.t:s1", 0,
		      MS_MOVE_EVACUATE);
	assert_int_equal(m.status, MS_OK);
	assert_int_equal(m.new_server, 3);
	expect_consistent(st);
	master_store_close(st);
	assert_true(raw_query_is_one(path, "SELECT schema_version = 8 FROM"
					   " meta"));
	assert_true(raw_query_is_one(path, "SELECT count(*) = 1 FROM moves"));
}

/* The 5 -> 6 upgrade is one transaction: a table moves already there
 * leaves schema 5 without servers.failed. */
static void test_moves_upgrade_all_or_nothing(void **state)
{
	struct fixture *f = *state;
	char path[128], msg[256];
	struct master_store *st;

	snprintf(path, sizeof(path), "%s/v5.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v5_dump), SQLITE_OK);
	assert_int_equal(raw_sql(path, "CREATE TABLE moves (x);"), SQLITE_OK);
	assert_int_not_equal(master_store_open(path, 0, &st, msg, sizeof(msg)),
			     0);
	assert_true(raw_query_is_one(path, "SELECT schema_version = 5 FROM"
					   " meta"));
	assert_true(raw_query_is_one(path, "SELECT count(*) = 0 FROM"
					   " pragma_table_info('servers')"
					   " WHERE name = 'failed'"));
	assert_int_equal(raw_sql(path, "DROP TABLE moves;"), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	expect_consistent(st);
	master_store_close(st);
}

/* --- CHAP accounts (issue #20) ------------------------------------------------- */

static int do_chap_set(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_server_chap_set(st, a, rep);
}

static int do_chap_get(struct master_store *st, const void *k, ms_reply *rep)
{
	return master_store_server_chap_get(st, k, rep);
}

static int do_list(struct master_store *st, const void *unused, ms_reply *rep)
{
	(void)unused;
	return master_store_server_list(st, rep);
}

/* Whether the XDR encoding of rep (what goes on the wire) holds text. */
static bool reply_holds(const ms_reply *rep, const char *text)
{
	static char buf[1 << 20];
	XDR x;
	bool found;

	xdrmem_create(&x, buf, sizeof(buf), XDR_ENCODE);
	assert_true(xdr_ms_reply(&x, (ms_reply *)rep));
	found = memmem(buf, xdr_getpos(&x), text, strlen(text)) != NULL;
	xdr_destroy(&x);
	return found;
}

static ms_status chap_set(struct master_store *st, const char *target,
			  const char *user, const char *secret, bool *changed)
{
	ms_server_chap_args a = {(char *)target, 1, (char *)user,
				 (char *)secret};
	ms_reply rep;
	ms_status status;

	assert_int_equal(call(st, do_chap_set, &a, &rep), 0);
	status = rep.status;
	if (!status) {
		assert_int_equal(rep.body.kind, MS_BODY_SERVER);
		assert_false(reply_holds(&rep, "s3cr3t"));
	}
	if (changed)
		*changed = rep.changed;
	master_reply_free(&rep);
	return status;
}

static void expect_chap(struct master_store *st, const char *target,
			const char *user, const char *secret)
{
	ms_server_key k = {(char *)target, 1};
	ms_reply rep;

	assert_int_equal(call(st, do_chap_get, &k, &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	assert_int_equal(rep.body.kind, MS_BODY_CHAP);
	assert_false(rep.changed);
	assert_string_equal(rep.body.ms_body_u.chap.user, user);
	assert_string_equal(rep.body.ms_body_u.chap.secret, secret);
	master_reply_free(&rep);
}

/* Set, repeat, change, clear; the secret in no reply but CHAP_GET's. */
static void test_chap_set_get(void **state)
{
	struct fixture *f = *state;
	ms_vdisk_list_args none = {"", 1};
	ms_alloc_args a = {"d", 2, 2, 1, 1 * MiB};
	ms_reply rep;
	bool changed;

	add_four(f->st);
	expect_chap(f->st, "iqn.2024-01.t:s1", "", "");
	assert_int_equal(chap_set(f->st, "iqn.2024-01.t:s1", "alice",
				  "s3cr3t-1", &changed),
			 MS_OK);
	assert_true(changed);
	assert_int_equal(chap_set(f->st, "iqn.2024-01.t:s1", "alice",
				  "s3cr3t-1", &changed),
			 MS_OK);
	assert_false(changed);
	expect_chap(f->st, "iqn.2024-01.t:s1", "alice", "s3cr3t-1");
	expect_chap(f->st, "iqn.2024-01.t:s2", "", "");
	assert_int_equal(chap_set(f->st, "iqn.2024-01.t:s1", "alice",
				  "s3cr3t-2", &changed),
			 MS_OK);
	assert_true(changed);
	expect_chap(f->st, "iqn.2024-01.t:s1", "alice", "s3cr3t-2");
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s2", "bob", "s3cr3t-3", NULL),
		MS_OK);
	/* listings, a disk, info: no secret */
	assert_int_equal(call(f->st, do_list, NULL, &rep), 0);
	assert_false(reply_holds(&rep, "s3cr3t"));
	master_reply_free(&rep);
	assert_int_equal(call(f->st, do_alloc, &a, &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	assert_false(reply_holds(&rep, "s3cr3t"));
	master_reply_free(&rep);
	assert_int_equal(call(f->st, do_lookup, "d", &rep), 0);
	assert_false(reply_holds(&rep, "s3cr3t"));
	master_reply_free(&rep);
	assert_int_equal(call(f->st, do_status, NULL, &rep), 0);
	assert_false(reply_holds(&rep, "s3cr3t"));
	master_reply_free(&rep);
	assert_int_equal(call(f->st, do_vdisks, &none, &rep), 0);
	assert_false(reply_holds(&rep, "s3cr3t"));
	master_reply_free(&rep);
	/* cleared */
	assert_int_equal(chap_set(f->st, "iqn.2024-01.t:s1", "", "", &changed),
			 MS_OK);
	assert_true(changed);
	expect_chap(f->st, "iqn.2024-01.t:s1", "", "");
	expect_chap(f->st, "iqn.2024-01.t:s2", "bob", "s3cr3t-3");
	expect_consistent(f->st);
}

static void test_chap_refused(void **state)
{
	struct fixture *f = *state;
	char long_word[MS_CHAP_MAX + 2];
	ms_server_key k = {"iqn.2024-01.t:nope", 1};
	ms_reply rep;

	add_four(f->st);
	memset(long_word, 'x', sizeof(long_word) - 1);
	long_word[sizeof(long_word) - 1] = '\0';
	assert_int_equal(chap_set(f->st, "iqn.2024-01.t:s1", "alice", "", NULL),
			 MS_EINVAL);
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s1", "", "s3cr3t", NULL),
		MS_EINVAL);
	assert_int_equal(chap_set(f->st, "iqn.2024-01.t:s1", "alice",
				  "with space", NULL),
			 MS_EINVAL);
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s1", "al#ce", "s3cr3t", NULL),
		MS_EINVAL);
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s1", "alice", "tab\there", NULL),
		MS_EINVAL);
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s1", "alice", long_word, NULL),
		MS_EINVAL);
	long_word[MS_CHAP_MAX] = '\0'; /* 255 bytes: the longest */
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s1", "alice", long_word, NULL),
		MS_OK);
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:nope", "alice", "s3cr3t", NULL),
		MS_ENOENT);
	assert_int_equal(call(f->st, do_chap_get, &k, &rep), 0);
	assert_int_equal(rep.status, MS_ENOENT);
	assert_int_equal(rep.body.kind, MS_BODY_NONE);
	master_reply_free(&rep);
	expect_chap(f->st, "iqn.2024-01.t:s2", "", "");
	expect_consistent(f->st);
}

/* The check finds half an account, or a bad one, edited in the file. */
static void test_chap_check(void **state)
{
	static const char *const bad[] = {
		"UPDATE servers SET chap_user = 'alice' WHERE id = 2",
		"UPDATE servers SET chap_secret = 'x' WHERE id = 2",
		"UPDATE servers SET chap_user = 'a b', chap_secret = 'x'"
		" WHERE id = 2",
		"UPDATE servers SET chap_user = 'a', chap_secret = 'x#'"
		" WHERE id = 2",
	};
	struct fixture *f = *state;
	char msg[512];

	add_four(f->st);
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s1", "alice", "s3cr3t", NULL),
		MS_OK);
	expect_consistent(f->st);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		master_store_close(f->st);
		assert_int_equal(raw_sql(f->path, bad[i]), SQLITE_OK);
		assert_int_equal(
			master_store_open(f->path, 0, &f->st, msg, sizeof(msg)),
			0);
		assert_int_equal(master_store_check(f->st, msg, sizeof(msg)),
				 -EUCLEAN);
		assert_non_null(strstr(msg, "CHAP account"));
		assert_null(strstr(msg, "s3cr3t"));
		master_store_close(f->st);
		assert_int_equal(raw_sql(f->path, "UPDATE servers SET"
						  " chap_user = '',"
						  " chap_secret = '' WHERE"
						  " id = 2"),
				 SQLITE_OK);
		assert_int_equal(
			master_store_open(f->path, 0, &f->st, msg, sizeof(msg)),
			0);
		expect_consistent(f->st);
	}
}

/* A removed server takes its account along; registered again: none. */
static void test_chap_remove(void **state)
{
	struct fixture *f = *state;
	ms_server_key k = {"iqn.2024-01.t:s1", 1};
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(
		chap_set(f->st, "iqn.2024-01.t:s1", "alice", "s3cr3t", NULL),
		MS_OK);
	assert_int_equal(call(f->st, do_remove, &k, &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	master_reply_free(&rep);
	assert_int_equal(add_server(f->st, 1, NULL), MS_OK);
	expect_chap(f->st, "iqn.2024-01.t:s1", "", "");
}

/*
 * A database of schema 6 as the previous stripe-master left it (its dump,
 * made by stripe-master and stripe-ctl of commit dba27bf: three servers,
 * disk "old" of 1 x 2 x 2 extents, server 3 failed).
 */
static const char schema_v6_dump[] =
	"CREATE TABLE meta ( id INTEGER PRIMARY KEY CHECK (id = 1), schema_"
	"version INTEGER NOT NULL, extent_size_bytes INTEGER NOT NULL CHECK"
	" (extent_size_bytes > 0));INSERT INTO meta VALUES(1,6,1048576);CRE"
	"ATE TABLE servers ( id INTEGER PRIMARY KEY AUTOINCREMENT, address "
	"TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 63), portal TEX"
	"T NOT NULL CHECK (length(portal) BETWEEN 1 AND 261), target TEXT N"
	"OT NULL CHECK (length(target) BETWEEN 1 AND 223), lun INTEGER NOT "
	"NULL CHECK (lun BETWEEN 0 AND 65535), size_bytes INTEGER NOT NULL "
	"CHECK (size_bytes > 0), block_size INTEGER NOT NULL CHECK (block_s"
	"ize IN (512, 1024, 2048,  4096)), nr_extents INTEGER NOT NULL CHEC"
	"K (nr_extents > 0), free_extents INTEGER NOT NULL  CHECK (free_ext"
	"ents BETWEEN 0 AND nr_extents), next_fresh INTEGER NOT NULL DEFAUL"
	"T 0  CHECK (next_fresh BETWEEN 0 AND nr_extents), draining INTEGER"
	" NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)), host TEXT NOT NULL"
	" DEFAULT '' CHECK (length(host) <= 63), rack TEXT NOT NULL DEFAULT"
	" '' CHECK (length(rack) <= 63), site TEXT NOT NULL DEFAULT '' CHEC"
	"K (length(site) <= 63), failed INTEGER NOT NULL DEFAULT 0 CHECK (f"
	"ailed IN (0, 1)), UNIQUE (target, lun));INSERT INTO servers VALUES"
	"(1,'10.0.0.1','10.0.0.1:3260','iqn.t:s1',1,4194304,512,4,2,2,0,'10"
	".0.0.1','r1','s1',0);INSERT INTO servers VALUES(2,'10.0.0.2','10.0"
	".0.2:3260','iqn.t:s2',1,4194304,512,4,2,2,0,'10.0.0.2','','',0);IN"
	"SERT INTO servers VALUES(3,'10.0.0.3','10.0.0.3:3260','iqn.t:s3',1"
	",4194304,512,4,4,0,0,'10.0.0.3','','',1);CREATE TABLE vdisks ( id "
	"TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 63), col"
	"umns INTEGER NOT NULL CHECK (columns BETWEEN 1 AND 256), extents_p"
	"er_column INTEGER NOT NULL CHECK (extents_per_column >= 1), replic"
	"as INTEGER NOT NULL CHECK (replicas BETWEEN 1 AND 4), CHECK (colum"
	"ns * extents_per_column * replicas <= 262144)) WITHOUT ROWID;INSER"
	"T INTO vdisks VALUES('old',1,2,2);CREATE TABLE allocations ( vdisk"
	"_id TEXT NOT NULL REFERENCES vdisks (id), col INTEGER NOT NULL CHE"
	"CK (col >= 0), ext INTEGER NOT NULL CHECK (ext >= 0), replica INTE"
	"GER NOT NULL CHECK (replica >= 0), server_id INTEGER NOT NULL REFE"
	"RENCES servers (id), idx INTEGER NOT NULL CHECK (idx >= 0), stale "
	"INTEGER NOT NULL DEFAULT 0 CHECK (stale IN (0, 1)), PRIMARY KEY (v"
	"disk_id, col, ext, replica), UNIQUE (server_id, idx)) WITHOUT ROWI"
	"D;INSERT INTO allocations VALUES('old',0,0,0,1,0,0);INSERT INTO al"
	"locations VALUES('old',0,0,1,2,0,0);INSERT INTO allocations VALUES"
	"('old',0,1,0,1,1,0);INSERT INTO allocations VALUES('old',0,1,1,2,1"
	",0);CREATE TABLE released ( server_id INTEGER NOT NULL REFERENCES "
	"servers (id), idx INTEGER NOT NULL CHECK (idx >= 0), PRIMARY KEY ("
	"server_id, idx)) WITHOUT ROWID;CREATE TABLE leases ( vdisk_id TEXT"
	" PRIMARY KEY NOT NULL  CHECK (length(vdisk_id) BETWEEN 1 AND 63), "
	"holder TEXT NOT NULL CHECK (length(holder) <= 63), epoch INTEGER N"
	"OT NULL CHECK (epoch >= 0), previous TEXT NOT NULL CHECK (length(p"
	"revious) <= 63), fence INTEGER NOT NULL CHECK (fence IN (0, 1)), s"
	"ince INTEGER NOT NULL CHECK (since >= 0), fence_pending INTEGER NO"
	"T NULL DEFAULT 0 CHECK (fence_pending IN (0, 1)), CHECK (holder = "
	"'' OR epoch >= 1)) WITHOUT ROWID;CREATE TABLE fenced_hosts ( host "
	"TEXT PRIMARY KEY NOT NULL  CHECK (length(host) BETWEEN 1 AND 63), "
	"by_host TEXT NOT NULL CHECK (length(by_host) BETWEEN 1 AND 63), vd"
	"isk_id TEXT NOT NULL CHECK (length(vdisk_id) BETWEEN 1 AND 63), ep"
	"och INTEGER NOT NULL CHECK (epoch >= 1), since INTEGER NOT NULL CH"
	"ECK (since >= 0)) WITHOUT ROWID;CREATE TABLE spread_notes ( vdisk_"
	"id TEXT NOT NULL REFERENCES vdisks (id), col INTEGER NOT NULL CHEC"
	"K (col >= 0), ext INTEGER NOT NULL CHECK (ext >= 0), reached INTEG"
	"ER NOT NULL CHECK (reached BETWEEN 0 AND 2), wanted INTEGER NOT NU"
	"LL CHECK (wanted BETWEEN 1 AND 2), room INTEGER NOT NULL CHECK (ro"
	"om >= 0), CHECK (reached < wanted), PRIMARY KEY (vdisk_id, col, ex"
	"t)) WITHOUT ROWID;CREATE TABLE moves ( vdisk_id TEXT NOT NULL REFE"
	"RENCES vdisks (id), col INTEGER NOT NULL CHECK (col >= 0), ext INT"
	"EGER NOT NULL CHECK (ext >= 0), replica INTEGER NOT NULL CHECK (re"
	"plica >= 0), old_server INTEGER NOT NULL REFERENCES servers (id), "
	"old_idx INTEGER NOT NULL CHECK (old_idx >= 0), new_server INTEGER "
	"NOT NULL REFERENCES servers (id), new_idx INTEGER NOT NULL CHECK ("
	"new_idx >= 0), reason INTEGER NOT NULL CHECK (reason IN (0, 1)), s"
	"ince INTEGER NOT NULL CHECK (since >= 0), reached INTEGER NOT NULL"
	" CHECK (reached BETWEEN 0 AND 2), wanted INTEGER NOT NULL CHECK (w"
	"anted BETWEEN 0 AND 2), room INTEGER NOT NULL CHECK (room >= 0), C"
	"HECK (new_server != old_server), PRIMARY KEY (vdisk_id, col, ext, "
	"replica), UNIQUE (new_server, new_idx)) WITHOUT ROWID;DELETE FROM "
	"sqlite_sequence;INSERT INTO sqlite_sequence VALUES('servers',3);CR"
	"EATE INDEX allocations_stale ON allocations (vdisk_id) WHERE stale"
	" = 1;CREATE INDEX moves_old ON moves (old_server);";

/* It opens as schema 7: no server has a CHAP account; accounts work. */
static void test_chap_schema6_upgrade(void **state)
{
	struct fixture *f = *state;
	char path[128], msg[256];
	struct master_store *st;
	ms_reply rep;

	snprintf(path, sizeof(path), "%s/v6.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v6_dump), SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	expect_consistent(st);
	expect_chap(st, "iqn.t:s1", "", "");
	expect_chap(st, "iqn.t:s3", "", "");
	assert_int_equal(chap_set(st, "iqn.t:s2", "alice", "s3cr3t", NULL),
			 MS_OK);
	expect_chap(st, "iqn.t:s2", "alice", "s3cr3t");
	assert_int_equal(call(st, do_lookup, "old", &rep), 0);
	assert_int_equal(rep.status, MS_OK);
	assert_int_equal(rep.body.ms_body_u.vdisk.extents.extents_len, 4);
	assert_int_equal(
		rep.body.ms_body_u.vdisk.failed_servers.failed_servers_len, 0);
	master_reply_free(&rep);
	assert_int_equal(call(st, do_status, NULL, &rep), 0);
	assert_true(rep.body.ms_body_u.stats.stats_val[2].failed);
	master_reply_free(&rep);
	expect_consistent(st);
	master_store_close(st);
	assert_true(raw_query_is_one(path, "SELECT schema_version = 8 FROM"
					   " meta"));
	assert_true(raw_query_is_one(path, "SELECT count(*) = 1 FROM servers"
					   " WHERE chap_user != ''"));
}

/* The 6 -> 7 upgrade is one transaction: a column chap_secret already
 * there leaves schema 6 without chap_user. */
static void test_chap_upgrade_all_or_nothing(void **state)
{
	struct fixture *f = *state;
	char path[128], msg[256];
	struct master_store *st;

	snprintf(path, sizeof(path), "%s/v6.db", f->dir);
	assert_int_equal(raw_sql(path, schema_v6_dump), SQLITE_OK);
	assert_int_equal(raw_sql(path, "ALTER TABLE servers ADD COLUMN"
				       " chap_secret TEXT;"),
			 SQLITE_OK);
	assert_int_not_equal(master_store_open(path, 0, &st, msg, sizeof(msg)),
			     0);
	assert_true(raw_query_is_one(path, "SELECT schema_version = 6 FROM"
					   " meta"));
	assert_true(raw_query_is_one(path, "SELECT count(*) = 0 FROM"
					   " pragma_table_info('servers')"
					   " WHERE name = 'chap_user'"));
	assert_int_equal(raw_sql(path, "ALTER TABLE servers DROP COLUMN"
				       " chap_secret;"),
			 SQLITE_OK);
	assert_int_equal(master_store_open(path, 0, &st, msg, sizeof(msg)), 0);
	expect_consistent(st);
	master_store_close(st);
}

/* --- snapshots (issue #21) ------------------------------------------------------- */

static int do_snapshot(struct master_store *st, const void *a, ms_reply *rep)
{
	return master_store_vdisk_snapshot(st, a, rep);
}

static int do_snapshot_done(struct master_store *st, const void *id,
			    ms_reply *rep)
{
	return master_store_vdisk_snapshot_done(st, id, rep);
}

static ms_status snapshot(struct master_store *st, const char *src,
			  const char *id, ms_reply *rep)
{
	ms_snapshot_args a = {(char *)src, (char *)id};

	assert_int_equal(call(st, do_snapshot, &a, rep), 0);
	return rep->status;
}

/* The summary of id in vdisk list. */
static void expect_listed(struct master_store *st, const char *id,
			  const char *source, bool complete)
{
	ms_vdisk_list_args a = {.after = "", .limit = 100};
	ms_vdisk_page *page;
	ms_reply rep;
	bool found = false;

	call(st, do_vdisks, &a, &rep);
	page = &rep.body.ms_body_u.vdisks;
	for (u_int i = 0; i < page->vdisks.vdisks_len; i++) {
		if (strcmp(page->vdisks.vdisks_val[i].id, id))
			continue;
		found = true;
		assert_string_equal(page->vdisks.vdisks_val[i].source, source);
		assert_int_equal(page->vdisks.vdisks_val[i].complete, complete);
	}
	assert_true(found);
	master_reply_free(&rep);
}

static void test_snapshot_create_and_done(void **state)
{
	struct fixture *f = *state;
	ms_reply rep, again;
	ms_vdisk *v;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "src", 2, 2, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(snapshot(f->st, "src", "snap", &rep), MS_OK);
	assert_true(rep.changed);
	v = &rep.body.ms_body_u.vdisk;
	assert_string_equal(v->id, "snap");
	assert_int_equal(v->columns, 2);
	assert_int_equal(v->extents_per_column, 2);
	assert_int_equal(v->replicas, 1);
	assert_int_equal(v->extents.extents_len, 4);
	expect_listed(f->st, "src", "", true);
	expect_listed(f->st, "snap", "src", false);
	/* Again: the same extents, nothing changed. */
	assert_int_equal(snapshot(f->st, "src", "snap", &again), MS_OK);
	assert_false(again.changed);
	for (u_int i = 0; i < 4; i++) {
		assert_int_equal(
			again.body.ms_body_u.vdisk.extents.extents_val[i]
				.server_id,
			v->extents.extents_val[i].server_id);
		assert_int_equal(
			again.body.ms_body_u.vdisk.extents.extents_val[i]
				.offset_bytes,
			v->extents.extents_val[i].offset_bytes);
	}
	master_reply_free(&again);
	master_reply_free(&rep);
	/* Done: complete, and again changes nothing. */
	call(f->st, do_snapshot_done, "snap", &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_true(rep.changed);
	master_reply_free(&rep);
	expect_listed(f->st, "snap", "src", true);
	call(f->st, do_snapshot_done, "snap", &rep);
	assert_int_equal(rep.status, MS_OK);
	assert_false(rep.changed);
	master_reply_free(&rep);
	{
		char msg[256];

		assert_int_equal(master_store_check(f->st, msg, sizeof(msg)),
				 0);
	}
}

static void test_snapshot_refused(void **state)
{
	struct fixture *f = *state;
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "src", 1, 2, 1, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(alloc(f->st, "other", 1, 1, 1, &rep), MS_OK);
	master_reply_free(&rep);
	/* NEW exists as a disk of its own. */
	assert_int_equal(snapshot(f->st, "src", "other", &rep), MS_EEXIST);
	assert_non_null(strstr(rep.message, "exists already as a disk of "
					    "its own"));
	master_reply_free(&rep);
	/* NEW exists as a snapshot of another disk. */
	assert_int_equal(snapshot(f->st, "other", "snap", &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(snapshot(f->st, "src", "snap", &rep), MS_EEXIST);
	assert_non_null(strstr(rep.message, "a snapshot of other"));
	master_reply_free(&rep);
	/* No source; the same name twice; a bad name. */
	assert_int_equal(snapshot(f->st, "nosuch", "x", &rep), MS_ENOENT);
	master_reply_free(&rep);
	assert_int_equal(snapshot(f->st, "src", "src", &rep), MS_EINVAL);
	master_reply_free(&rep);
	assert_int_equal(snapshot(f->st, "src", "a b", &rep), MS_EINVAL);
	master_reply_free(&rep);
	/* Done on a disk that is no snapshot, or none. */
	call(f->st, do_snapshot_done, "src", &rep);
	assert_int_equal(rep.status, MS_EINVAL);
	assert_non_null(strstr(rep.message, "is no snapshot"));
	master_reply_free(&rep);
	call(f->st, do_snapshot_done, "nosuch", &rep);
	assert_int_equal(rep.status, MS_ENOENT);
	master_reply_free(&rep);
	expect_listed(f->st, "other", "", true);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_server_add_idempotent),
		T(test_server_add_invalid),
		T(test_alloc_table),
		T(test_alloc_repeat_same_extents),
		T(test_alloc_invalid),
		T(test_alloc_cap),
		T(test_release_and_reuse),
		T(test_drain_and_remove),
		T(test_extent_list),
		T(test_vdisk_list_and_info),
		T(test_replica_state),
		T(test_replica_state_refused),
		T(test_replica_state_listed),
		T(test_rollback_leaves_nothing),
		T(test_check_and_constraints),
		T(test_check_again_sees_changes),
		T(test_one_master_per_database),
		T(test_schema_upgrade),
		T(test_schema_new_equals_upgraded),
		T(test_lease_acquire_release),
		T(test_lease_handover),
		T(test_lease_takeover),
		T(test_lease_bad_input),
		T(test_lease_destroy),
		T(test_lease_race),
		T(test_fence_takeover),
		T(test_fence_nobody),
		T(test_fence_refusals),
		T(test_fence_confirmed),
		T(test_fence_readmit),
		T(test_fence_rollback),
		T(test_fence_check),
		T(test_fence_schema3_upgrade),
		T(test_labels_add_and_relabel),
		T(test_labels_relabel_clash),
		T(test_labels_spread_notes),
		T(test_labels_schema4_upgrade),
		T(test_labels_upgrade_all_or_nothing),
		T(test_move_begin_commit),
		T(test_move_abort),
		T(test_move_placement_domains),
		T(test_server_fail),
		T(test_move_check),
		T(test_move_label_clash),
		T(test_move_takeover_servers),
		T(test_move_two_of_one_extent),
		T(test_moves_schema5_upgrade),
		T(test_moves_upgrade_all_or_nothing),
		T(test_chap_set_get),
		T(test_chap_refused),
		T(test_chap_remove),
		T(test_chap_check),
		T(test_chap_schema6_upgrade),
		T(test_chap_upgrade_all_or_nothing),
		T(test_grow),
		T(test_grow_refused),
		cmocka_unit_test(test_open_rejects),
		cmocka_unit_test(test_vdisk_id_rule),
		T(test_snapshot_create_and_done),
		T(test_snapshot_refused),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
