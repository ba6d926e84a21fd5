/*
 * test_store.c - master/store*.c on a real SQLite file in a temporary
 * directory: registration, placement as stored (hand-written tables of
 * which server and which offset each extent of a disk gets), idempotent
 * repeats, refusals, release and reuse, listings, transactions, the
 * consistency check and the one-master lock.
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
#include "master/store.h"

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

/* Register server n (1-based) as host 10.0.0.n, 4 MiB. */
static ms_status add_server(struct master_store *st, int n, bool *changed)
{
	char address[32], target[64];
	ms_server_add_args a = {address, address, target, 1, 4 * MiB, 512};
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
	ms_server_add_args changed_size = {address, address, target,
					   1,	    8 * MiB, 512};
	ms_server_add_args moved = {other, other, target, 1, 4 * MiB, 512};
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
	ms_server_add_args a = {ok, ok, target, 1, 4 * MiB, 512};
	ms_reply rep;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		a.lun = bad[i].lun;
		a.size_bytes = bad[i].size;
		a.block_size = bad[i].block;
		call(f->st, do_add, &a, &rep);
		assert_int_equal(rep.status, MS_EINVAL);
		master_reply_free(&rep);
	}
	a = (ms_server_add_args){spaced, ok, target, 1, 4 * MiB, 512};
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

static void test_check_and_constraints(void **state)
{
	struct fixture *f = *state;
	char msg[256];
	ms_reply rep;

	add_four(f->st);
	assert_int_equal(alloc(f->st, "d1", 2, 2, 2, &rep), MS_OK);
	master_reply_free(&rep);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
	master_store_close(f->st);
	/* the schema refuses a second owner of an extent */
	assert_int_equal(raw_sql(f->path,
				 "PRAGMA foreign_keys = ON; BEGIN;"
				 "INSERT INTO vdisks VALUES ('x', 1, 1, 1);"
				 "INSERT INTO allocations VALUES"
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

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_server_add_idempotent),
		T(test_server_add_invalid),
		T(test_alloc_table),
		T(test_alloc_repeat_same_extents),
		T(test_alloc_invalid),
		T(test_release_and_reuse),
		T(test_drain_and_remove),
		T(test_extent_list),
		T(test_vdisk_list_and_info),
		T(test_rollback_leaves_nothing),
		T(test_check_and_constraints),
		T(test_one_master_per_database),
		cmocka_unit_test(test_open_rejects),
		cmocka_unit_test(test_vdisk_id_rule),
	};
#undef T

	return cmocka_run_group_tests(tests, NULL, NULL);
}
