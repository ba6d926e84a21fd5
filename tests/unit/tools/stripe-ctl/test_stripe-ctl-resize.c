/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stripe-ctl-resize.c - the parts of vdisk resize that need no master
 * (tests/integration/grow-stripe.sh runs the rest against tgtd): --size
 * against the map, the master's answer checked, and the grown map built
 * from the old one and the answer.  Oracles written by hand.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tools/stripe-ctl/stripe-ctl-resize.c"

#define MiB	      (1024ull * 1024)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* stripe-ctl.c, stripe-ctl-output.c, stripe-ctl-serve.c, -chap.c. */
int ctl_fail(const char *fmt, ...)
{
	return EXIT_FAILURE;
}

int ctl_call_failed(struct master_client *c, const char *what)
{
	return EXIT_FAILURE;
}

struct master_client *ctl_client(const struct ctl_opts *o)
{
	return NULL;
}

void ctl_format_bytes(uint64_t bytes, char *buf, size_t size)
{
	snprintf(buf, size, "%llu", (unsigned long long)bytes);
}

int ctl_print_json(struct td_json *j, struct td_strbuf *sb)
{
	td_strbuf_free(sb);
	return 0;
}

int ctl_chap_get(struct master_client *c, struct stripe_map_server *s)
{
	return 0;
}

int ctl_serve_path(const char *arg, char *path)
{
	snprintf(path, PATH_MAX, "%s", arg);
	return 0;
}

/* 2 columns x 1 extent x 2 replicas of 4 MiB, 64 KiB unit, 8 MiB, on
 * two servers; replica 1 of column 0 missed writes in region 0. */
static void old_map(struct stripe_map *m)
{
	*m = (struct stripe_map){.size_bytes = 8 * MiB,
				 .stripe_unit_bytes = 64 * 1024,
				 .extent_size_bytes = 4 * MiB,
				 .columns = 2,
				 .extents_per_column = 1,
				 .replicas = 2};
	snprintf(m->vdisk, sizeof(m->vdisk), "g1");
	snprintf(m->master, sizeof(m->master), "127.0.0.1:7700");
	assert_int_equal(stripe_map_alloc(m, 2), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(m->servers[i].address, STRIPE_MAP_ADDRESS_SIZE,
			 "10.0.0.%d", i + 1);
		snprintf(m->servers[i].portal, STRIPE_MAP_PORTAL_SIZE,
			 "10.0.0.%d", i + 1);
		snprintf(m->servers[i].target, STRIPE_MAP_TARGET_SIZE,
			 "iqn.t:s%d", i + 1);
		m->servers[i].lun = 1;
		m->servers[i].block_size = 512;
	}
	/* (c, j, r) = (0,0,0) (0,0,1) (1,0,0) (1,0,1) */
	const uint64_t lba[] = {0, 0, 8192, 8192};
	for (size_t k = 0; k < 4; k++) {
		m->slots[k].server = (uint32_t)(k % 2);
		m->slots[k].lba = lba[k];
	}
	m->slots[1].stale = true;
	stripe_map_bits_set_range(stripe_map_slot_dirty(m, 1), 0, 0);
	struct stripe_map_error err;
	assert_int_equal(stripe_map_check(m, &err), 0);
}

/* The master's answer: J = 2, the new extents on servers 1 and 3. */
static char t1[] = "iqn.t:s1", t2[] = "iqn.t:s2", t3[] = "iqn.t:s3";
static char a1[] = "10.0.0.1", a2[] = "10.0.0.2", a3[] = "10.0.0.3";
static ms_server servers[] = {
	{.id = 1,
	 .address = a1,
	 .portal = a1,
	 .target = t1,
	 .lun = 1,
	 .block_size = 512},
	{.id = 2,
	 .address = a2,
	 .portal = a2,
	 .target = t2,
	 .lun = 1,
	 .block_size = 512},
	{.id = 3,
	 .address = a3,
	 .portal = a3,
	 .target = t3,
	 .lun = 1,
	 .block_size = 512},
};
static ms_extent extents[] = {
	{1, 0, false},	      {2, 0, false},	   /* c0 j0 */
	{1, 8 * MiB, false},  {3, 0, false},	   /* c0 j1: new */
	{1, 4 * MiB, false},  {2, 4 * MiB, false}, /* c1 j0 */
	{1, 12 * MiB, false}, {3, 4 * MiB, true},  /* c1 j1: new, stale */
};

static ms_vdisk answer(u_int per_column)
{
	ms_vdisk v = {.id = "g1",
		      .columns = 2,
		      .extents_per_column = per_column,
		      .replicas = 2,
		      .extent_size_bytes = 4 * MiB};

	v.servers.servers_len = ARRAY_SIZE(servers);
	v.servers.servers_val = servers;
	v.extents.extents_len = 2 * per_column * 2;
	v.extents.extents_val = extents;
	return v;
}

/* (server index, lba) of each grown slot, in (c, j, r) order. */
static const struct {
	uint32_t server;
	uint64_t lba;
	bool stale;
} grown[] = {
	{0, 0, false},	   {1, 0, true},     /* c0 j0: kept, stale kept */
	{0, 16384, false}, {2, 0, false},    /* c0 j1: new, s3 appended */
	{0, 8192, false},  {1, 8192, false}, /* c1 j0: kept */
	{0, 24576, false}, {2, 8192, true},  /* c1 j1: new */
};

static void test_build(void **state)
{
	struct ctl_opts o = {.size_bytes = 16 * MiB};
	struct resize rz = {.o = &o};
	ms_vdisk v = answer(2);
	struct stripe_map_error err;
	struct stripe_map *g = &rz.grown;
	bool same;

	old_map(&rz.old);
	assert_int_equal(check_size(&rz, &same), 0);
	assert_false(same);
	assert_int_equal(rz.per_column, 2);
	assert_int_equal(check_answer(&rz, &v), 0);
	assert_int_equal(build(&rz, &v), 0);
	assert_int_equal(stripe_map_check(g, &err), 0);
	assert_int_equal(g->size_bytes, 16 * MiB);
	assert_int_equal(g->extents_per_column, 2);
	assert_int_equal(g->nr_servers, 3);
	assert_string_equal(g->servers[2].target, "iqn.t:s3");
	for (size_t k = 0; k < ARRAY_SIZE(grown); k++) {
		assert_int_equal(g->slots[k].server, grown[k].server);
		assert_int_equal(g->slots[k].lba, grown[k].lba);
		assert_int_equal(g->slots[k].stale, grown[k].stale);
	}
	/* the old partial mark stays partial: region 0 only */
	assert_int_equal(stripe_map_bits_count(stripe_map_slot_dirty(g, 1),
					       stripe_map_region_count(g)),
			 1);
	assert_int_equal(stripe_map_bits_count(stripe_map_slot_dirty(g, 7),
					       stripe_map_region_count(g)),
			 stripe_map_region_count(g));
	stripe_map_free(&rz.old);
	stripe_map_free(&rz.grown);
}

static void test_sizes(void **state)
{
	struct ctl_opts o = {.size_bytes = 8 * MiB};
	struct resize rz = {.o = &o};
	ms_vdisk v = answer(2);
	bool same = false;

	old_map(&rz.old);
	assert_int_equal(check_size(&rz, &same), 0); /* the same size */
	assert_true(same);
	o.size_bytes = 4 * MiB; /* a shrink */
	assert_int_equal(check_size(&rz, &same), EXIT_FAILURE);
	o.size_bytes = 8 * MiB + 100; /* not whole sectors */
	assert_int_equal(check_size(&rz, &same), EXIT_FAILURE);
	/* one sector more needs a second extent per column */
	o.size_bytes = 8 * MiB + 512;
	assert_int_equal(check_size(&rz, &same), 0);
	assert_false(same);
	assert_int_equal(rz.per_column, 2);
	/* the master grew it further before: refused */
	o.size_bytes = 12 * MiB;
	assert_int_equal(check_size(&rz, &same), 0);
	v = answer(3);
	v.extents.extents_len = 12;
	rz.per_column = 2;
	assert_int_equal(check_answer(&rz, &v), EXIT_FAILURE);
	/* another disk's shape */
	v = answer(2);
	v.replicas = 1;
	assert_int_equal(check_answer(&rz, &v), EXIT_FAILURE);
	stripe_map_free(&rz.old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build),
		cmocka_unit_test(test_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
