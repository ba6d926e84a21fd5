/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_placement.c - master/placement.c with hand-written pools: which
 * server gets each (column, extent, replica), and what is left free.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/server/placement.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_SLOTS     64

/* Place and compare slots (server index per slot) and the free counts. */
static void expect_place(struct master_place_server *pool, uint32_t n,
			 uint32_t columns, uint32_t per_col, uint32_t replicas,
			 const uint32_t *want, const uint32_t *free_after)
{
	uint32_t slots[MAX_SLOTS];
	size_t nr = (size_t)columns * per_col * replicas;

	assert_true(nr <= MAX_SLOTS);
	assert_int_equal(
		master_place(pool, n, columns, per_col, replicas, slots), 0);
	for (size_t i = 0; i < nr; i++) {
		print_message("slot %zu: server %u (want %u)\n", i, slots[i],
			      want[i]);
		assert_int_equal(slots[i], want[i]);
	}
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(pool[i].free, free_after[i]);
}

/* 4 servers, 2 columns x 2 extents x 2 replicas: one (column, replica)
 * pair per server, each column on one server per replica. */
static void test_four_servers_s2_r2(void **state)
{
	struct master_place_server pool[] = {{"10.0.0.1", 10},
					     {"10.0.0.2", 10},
					     {"10.0.0.3", 10},
					     {"10.0.0.4", 10}};
	/* slot order: (c0 j0 r0) (c0 j0 r1) (c0 j1 r0) (c0 j1 r1) (c1 ...) */
	static const uint32_t want[] = {0, 1, 0, 1, 2, 3, 2, 3};
	static const uint32_t left[] = {8, 8, 8, 8};

	expect_place(pool, 4, 2, 2, 2, want, left);
}

/* 3 servers for 2 columns x 2 replicas: the fourth pair wraps around,
 * still on a host distinct from its other replica. */
static void test_three_servers_wrap(void **state)
{
	struct master_place_server pool[] = {{"a", 10}, {"b", 10}, {"c", 10}};
	static const uint32_t want[] = {0, 1, 2, 0};
	static const uint32_t left[] = {8, 9, 9};

	expect_place(pool, 3, 2, 1, 2, want, left);
}

/* 3 servers, 3 replicas, 2 columns: every extent on all three hosts. */
static void test_three_replicas(void **state)
{
	struct master_place_server pool[] = {{"a", 4}, {"b", 4}, {"c", 4}};
	static const uint32_t want[] = {0, 1, 2, 0, 1, 2};
	static const uint32_t left[] = {2, 2, 2};

	expect_place(pool, 3, 2, 1, 3, want, left);
}

/* More columns than servers, no replication: round robin. */
static void test_columns_round_robin(void **state)
{
	struct master_place_server pool[] = {
		{"a", 10}, {"b", 10}, {"c", 10}, {"d", 10}};
	static const uint32_t want[] = {0, 1, 2, 3, 0};
	static const uint32_t left[] = {8, 9, 9, 9};

	expect_place(pool, 4, 5, 1, 1, want, left);
}

/* Two LUNs of host a: replica 1 may not go to a2, so it takes the allowed
 * server with the most free extents, the first from a2 onwards on a tie. */
static void test_same_host_avoided(void **state)
{
	struct master_place_server pool[] = {
		{"a", 10}, {"a", 10}, {"b", 10}, {"c", 10}};
	static const uint32_t want[] = {0, 2};
	static const uint32_t left[] = {9, 10, 9, 10};

	expect_place(pool, 4, 1, 1, 2, want, left);
}

/* The preferred server is full: the next with the most free extents. */
static void test_preferred_full(void **state)
{
	struct master_place_server pool[] = {
		{"a", 0}, {"b", 3}, {"c", 5}, {"d", 5}};
	static const uint32_t want[] = {2};
	static const uint32_t left[] = {0, 3, 4, 5};

	expect_place(pool, 4, 1, 1, 1, want, left);
}

/*
 * A nearly full pool that the spread pass cannot fill (it would put the
 * first two extents on a and b and leave the third nowhere): the balance
 * pass always takes the most free servers and succeeds.
 */
static void test_balance_pass(void **state)
{
	struct master_place_server pool[] = {{"a", 2}, {"b", 2}, {"c", 2}};
	static const uint32_t want[] = {0, 1, 2, 1, 0, 2};
	static const uint32_t left[] = {0, 0, 0};

	expect_place(pool, 3, 1, 3, 2, want, left);
}

static void test_no_space(void **state)
{
	struct master_place_server pool[] = {{"a", 2}, {"b", 1}};
	struct master_place_server one_host[] = {{"a", 50}, {"a", 50}};
	uint32_t slots[MAX_SLOTS];

	/* 4 extents needed, 3 free */
	assert_int_equal(master_place(pool, 2, 2, 1, 2, slots), -ENOSPC);
	assert_int_equal(pool[0].free, 2);
	assert_int_equal(pool[1].free, 1);
	/* plenty free, but only one host for two replicas */
	assert_int_equal(master_place(one_host, 2, 1, 1, 2, slots), -ENOSPC);
	assert_int_equal(one_host[0].free, 50);
	/* no server at all */
	assert_int_equal(master_place(pool, 0, 1, 1, 1, slots), -ENOSPC);
}

static void test_invalid(void **state)
{
	struct master_place_server pool[] = {{"a", 9}};
	uint32_t slots[MAX_SLOTS];

	assert_int_equal(master_place(pool, 1, 0, 1, 1, slots), -EINVAL);
	assert_int_equal(master_place(pool, 1, 1, 0, 1, slots), -EINVAL);
	assert_int_equal(master_place(pool, 1, 1, 1, 0, slots), -EINVAL);
	assert_int_equal(master_place(pool, 1, 1, 1, 5, slots), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_four_servers_s2_r2),
		cmocka_unit_test(test_three_servers_wrap),
		cmocka_unit_test(test_three_replicas),
		cmocka_unit_test(test_columns_round_robin),
		cmocka_unit_test(test_same_host_avoided),
		cmocka_unit_test(test_preferred_full),
		cmocka_unit_test(test_balance_pass),
		cmocka_unit_test(test_no_space),
		cmocka_unit_test(test_invalid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
