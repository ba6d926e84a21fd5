/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_placement.c - master/placement.c with hand-written pools: which
 * server gets each (column, extent, replica), what is left free, and how far
 * each extent's replicas were spread over failure domains (issue #19).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
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
	struct master_place_server pool[] = {
		{"10.0.0.1", 10, NULL, NULL, false},
		{"10.0.0.2", 10, NULL, NULL, false},
		{"10.0.0.3", 10, NULL, NULL, false},
		{"10.0.0.4", 10, NULL, NULL, false}};
	/* slot order: (c0 j0 r0) (c0 j0 r1) (c0 j1 r0) (c0 j1 r1) (c1 ...) */
	static const uint32_t want[] = {0, 1, 0, 1, 2, 3, 2, 3};
	static const uint32_t left[] = {8, 8, 8, 8};

	expect_place(pool, 4, 2, 2, 2, want, left);
}

/* 3 servers for 2 columns x 2 replicas: the fourth pair wraps around,
 * still on a host distinct from its other replica. */
static void test_three_servers_wrap(void **state)
{
	struct master_place_server pool[] = {{"a", 10, NULL, NULL, false},
					     {"b", 10, NULL, NULL, false},
					     {"c", 10, NULL, NULL, false}};
	static const uint32_t want[] = {0, 1, 2, 0};
	static const uint32_t left[] = {8, 9, 9};

	expect_place(pool, 3, 2, 1, 2, want, left);
}

/* 3 servers, 3 replicas, 2 columns: every extent on all three hosts. */
static void test_three_replicas(void **state)
{
	struct master_place_server pool[] = {{"a", 4, NULL, NULL, false},
					     {"b", 4, NULL, NULL, false},
					     {"c", 4, NULL, NULL, false}};
	static const uint32_t want[] = {0, 1, 2, 0, 1, 2};
	static const uint32_t left[] = {2, 2, 2};

	expect_place(pool, 3, 2, 1, 3, want, left);
}

/* More columns than servers, no replication: round robin. */
static void test_columns_round_robin(void **state)
{
	struct master_place_server pool[] = {{"a", 10, NULL, NULL, false},
					     {"b", 10, NULL, NULL, false},
					     {"c", 10, NULL, NULL, false},
					     {"d", 10, NULL, NULL, false}};
	static const uint32_t want[] = {0, 1, 2, 3, 0};
	static const uint32_t left[] = {8, 9, 9, 9};

	expect_place(pool, 4, 5, 1, 1, want, left);
}

/* Two LUNs of host a: replica 1 may not go to a2, so it takes the allowed
 * server with the most free extents, the first from a2 onwards on a tie. */
static void test_same_host_avoided(void **state)
{
	struct master_place_server pool[] = {{"a", 10, NULL, NULL, false},
					     {"a", 10, NULL, NULL, false},
					     {"b", 10, NULL, NULL, false},
					     {"c", 10, NULL, NULL, false}};
	static const uint32_t want[] = {0, 2};
	static const uint32_t left[] = {9, 10, 9, 10};

	expect_place(pool, 4, 1, 1, 2, want, left);
}

/* The preferred server is full: the next with the most free extents. */
static void test_preferred_full(void **state)
{
	struct master_place_server pool[] = {{"a", 0, NULL, NULL, false},
					     {"b", 3, NULL, NULL, false},
					     {"c", 5, NULL, NULL, false},
					     {"d", 5, NULL, NULL, false}};
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
	struct master_place_server pool[] = {{"a", 2, NULL, NULL, false},
					     {"b", 2, NULL, NULL, false},
					     {"c", 2, NULL, NULL, false}};
	static const uint32_t want[] = {0, 1, 2, 1, 0, 2};
	static const uint32_t left[] = {0, 0, 0};

	expect_place(pool, 3, 1, 3, 2, want, left);
}

static void test_no_space(void **state)
{
	struct master_place_server pool[] = {{"a", 2, NULL, NULL, false},
					     {"b", 1, NULL, NULL, false}};
	struct master_place_server one_host[] = {{"a", 50, NULL, NULL, false},
						 {"a", 50, NULL, NULL, false}};
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
	struct master_place_server pool[] = {{"a", 9, NULL, NULL, false}};
	uint32_t slots[MAX_SLOTS];

	assert_int_equal(master_place(pool, 1, 0, 1, 1, slots), -EINVAL);
	assert_int_equal(master_place(pool, 1, 1, 0, 1, slots), -EINVAL);
	assert_int_equal(master_place(pool, 1, 1, 1, 0, slots), -EINVAL);
	assert_int_equal(master_place(pool, 1, 1, 1, 5, slots), -EINVAL);
}

/* --- failure domains ------------------------------------------------------ */

/* 2 sites x 2 racks x 2 hosts, one LUN per host, server i in site i / 4,
 * rack (i / 2) % 2, host i. */
static void lab_pool(struct master_place_server *pool, uint32_t free)
{
	static const char *const hosts[] = {"h0", "h1", "h2", "h3",
					    "h4", "h5", "h6", "h7"};
	static const char *const racks[] = {"r0", "r1"};
	static const char *const sites[] = {"s0", "s1"};

	for (uint32_t i = 0; i < 8; i++)
		pool[i] = (struct master_place_server){hosts[i], free,
						       racks[(i / 2) % 2],
						       sites[i / 4], false};
}

static const char *site_of(const struct master_place_server *s)
{
	return s->site ? s->site : "";
}

/* Do the replicas of extent x (slots x*R ..) differ pairwise at level? */
static bool extent_spans(const struct master_place_server *pool,
			 const uint32_t *slots, size_t x, uint32_t replicas,
			 int level)
{
	for (uint32_t a = 0; a < replicas; a++)
		for (uint32_t b = a + 1; b < replicas; b++) {
			const struct master_place_server *p =
				&pool[slots[x * replicas + a]];
			const struct master_place_server *q =
				&pool[slots[x * replicas + b]];
			bool same_site = !strcmp(site_of(p), site_of(q));

			if (!strcmp(p->host, q->host))
				return false;
			if (level == MASTER_DOMAIN_SITE && same_site)
				return false;
			if (level == MASTER_DOMAIN_RACK && same_site &&
			    !strcmp(p->rack, q->rack))
				return false;
		}
	return true;
}

/* R = 2 over 2 sites: every extent has one replica in each site. */
static void test_domains_two_sites(void **state)
{
	struct master_place_server pool[8];
	struct master_place_spread sp[8];
	uint32_t slots[16];

	lab_pool(pool, 10);
	assert_int_equal(master_place_spread(pool, 8, 2, 4, 2, slots, sp), 0);
	for (size_t x = 0; x < 8; x++) {
		assert_true(
			extent_spans(pool, slots, x, 2, MASTER_DOMAIN_SITE));
		assert_int_equal(sp[x].reached, MASTER_DOMAIN_SITE);
		assert_int_equal(sp[x].wanted, MASTER_DOMAIN_SITE);
	}
}

/* R = 3 over 2 sites: sites cannot all differ, racks can (4 of them). */
static void test_domains_three_replicas_racks(void **state)
{
	struct master_place_server pool[8];
	struct master_place_spread sp[6];
	uint32_t slots[18];

	lab_pool(pool, 10);
	assert_int_equal(master_place_spread(pool, 8, 3, 2, 3, slots, sp), 0);
	for (size_t x = 0; x < 6; x++) {
		assert_true(
			extent_spans(pool, slots, x, 3, MASTER_DOMAIN_RACK));
		assert_int_equal(sp[x].reached, MASTER_DOMAIN_RACK);
		assert_int_equal(sp[x].wanted, MASTER_DOMAIN_RACK);
	}
}

/* Site s1 is full: the replicas share s0 but not a rack, and the report
 * says site was wanted with one site left with room. */
static void test_domains_one_site_full(void **state)
{
	struct master_place_server pool[8];
	struct master_place_spread sp[4];
	uint32_t slots[8];

	lab_pool(pool, 10);
	for (uint32_t i = 4; i < 8; i++)
		pool[i].free = 0;
	assert_int_equal(master_place_spread(pool, 8, 2, 2, 2, slots, sp), 0);
	for (size_t x = 0; x < 4; x++) {
		assert_true(slots[2 * x] < 4 && slots[2 * x + 1] < 4);
		assert_true(
			extent_spans(pool, slots, x, 2, MASTER_DOMAIN_RACK));
		assert_int_equal(sp[x].reached, MASTER_DOMAIN_RACK);
		assert_int_equal(sp[x].wanted, MASTER_DOMAIN_SITE);
		assert_int_equal(sp[x].room, 1);
	}
}

/* s1 has room for exactly one extent's replica: the first extent spans
 * both sites, the others fall back to racks of s0. */
static void test_domains_site_runs_out(void **state)
{
	struct master_place_server pool[8];
	struct master_place_spread sp[3];
	uint32_t slots[6];

	lab_pool(pool, 10);
	for (uint32_t i = 4; i < 8; i++)
		pool[i].free = i == 4;
	assert_int_equal(master_place_spread(pool, 8, 1, 3, 2, slots, sp), 0);
	assert_int_equal(sp[0].reached, MASTER_DOMAIN_SITE);
	assert_true(extent_spans(pool, slots, 0, 2, MASTER_DOMAIN_SITE));
	for (size_t x = 1; x < 3; x++) {
		assert_int_equal(sp[x].reached, MASTER_DOMAIN_RACK);
		assert_int_equal(sp[x].room, 1);
		assert_true(
			extent_spans(pool, slots, x, 2, MASTER_DOMAIN_RACK));
	}
	assert_int_equal(pool[4].free, 0);
}

/*
 * Labels missing: only two servers carry a site (s0, s1), the others none.
 * Site is wanted (two distinct sites for R = 2), so extents go to the two
 * labelled servers while they have room, then to any two hosts, reported.
 * Without any rack or site label the rule is the old one: hosts only.
 */
static void test_domains_labels_missing(void **state)
{
	struct master_place_server pool[] = {{"a", 1, NULL, "s0", false},
					     {"b", 5, NULL, NULL, false},
					     {"c", 1, "", "s1", false},
					     {"d", 5, "r9", "", false}};
	struct master_place_server bare[] = {{"a", 5, NULL, NULL, false},
					     {"b", 5, "", "", false}};
	struct master_place_spread sp[2];
	uint32_t slots[4];

	assert_int_equal(master_place_spread(pool, 4, 1, 2, 2, slots, sp), 0);
	assert_int_equal(sp[0].reached, MASTER_DOMAIN_SITE);
	assert_true((slots[0] == 0 && slots[1] == 2) ||
		    (slots[0] == 2 && slots[1] == 0));
	assert_int_equal(sp[1].reached, MASTER_DOMAIN_HOST);
	assert_int_equal(sp[1].wanted, MASTER_DOMAIN_SITE);
	assert_int_equal(sp[1].room, 0);
	assert_int_equal(master_place_spread(bare, 2, 1, 2, 2, slots, sp), 0);
	assert_int_equal(sp[0].reached, MASTER_DOMAIN_HOST);
	assert_int_equal(sp[0].wanted, MASTER_DOMAIN_HOST);
}

/* Two LUNs of one host in two different sites (odd labels): the host rule
 * still holds, and R = 1 wants nothing wider than a host. */
static void test_domains_host_rule_first(void **state)
{
	struct master_place_server pool[] = {{"a", 5, NULL, "s0", false},
					     {"a", 5, NULL, "s1", false},
					     {"b", 5, NULL, "s1", false}};
	struct master_place_spread sp[2];
	uint32_t slots[4];

	assert_int_equal(master_place_spread(pool, 3, 1, 2, 2, slots, sp), 0);
	for (size_t x = 0; x < 2; x++) {
		assert_true(
			extent_spans(pool, slots, x, 2, MASTER_DOMAIN_SITE));
		assert_int_equal(pool[slots[2 * x + 1]].host[0] !=
					 pool[slots[2 * x]].host[0],
				 1);
	}
	assert_int_equal(master_place_spread(pool, 3, 2, 1, 1, slots, sp), 0);
	assert_int_equal(sp[0].wanted, MASTER_DOMAIN_HOST);
}

/* --- one replica of a move (issue #19) --------------------------------------- */

/* Not the old server, not the other replica's host: the most free. */
static void test_place_one_hosts(void **state)
{
	struct master_place_server pool[] = {{"a", 4, NULL, NULL, false},
					     {"b", 4, NULL, NULL, false},
					     {"c", 3, NULL, NULL, false},
					     {"d", 4, NULL, NULL, false}};
	const uint32_t fixed[] = {1};
	struct master_place_spread sp;
	uint32_t chosen = 99;

	assert_int_equal(
		master_place_one(pool, 4, fixed, 1, 2, 0, &chosen, &sp), 0);
	assert_int_equal(chosen, 3); /* a excluded, b fixed, c fewer free */
	assert_int_equal(pool[3].free, 3);
	assert_int_equal(pool[0].free, 4);
	assert_int_equal(sp.reached, MASTER_DOMAIN_HOST);
	assert_int_equal(sp.wanted, MASTER_DOMAIN_HOST);
}

/* Sites: the one whose site differs from the other replica's wins over
 * one with more free extents. */
static void test_place_one_sites(void **state)
{
	struct master_place_server pool[] = {{"a", 4, "r1", "s1", false},
					     {"b", 4, "r1", "s2", false},
					     {"c", 9, "r2", "s2", false},
					     {"d", 1, "r2", "s1", false}};
	const uint32_t fixed[] = {1};
	struct master_place_spread sp;
	uint32_t chosen = 99;

	assert_int_equal(
		master_place_one(pool, 4, fixed, 1, 2, 0, &chosen, &sp), 0);
	assert_int_equal(chosen, 3);
	assert_int_equal(sp.reached, MASTER_DOMAIN_SITE);
	assert_int_equal(sp.wanted, MASTER_DOMAIN_SITE);
	/* d full: c, in the other replica's site, and the spread says so */
	pool[3].free = 0;
	assert_int_equal(
		master_place_one(pool, 4, fixed, 1, 2, 0, &chosen, &sp), 0);
	assert_int_equal(chosen, 2);
	assert_int_equal(sp.reached, MASTER_DOMAIN_RACK);
	assert_int_equal(sp.wanted, MASTER_DOMAIN_SITE);
}

/* A gone server's replica keeps its host; nothing left: ENOSPC. */
static void test_place_one_gone(void **state)
{
	struct master_place_server pool[] = {{"hx", 0, "r1", "s1", true},
					     {"b", 4, NULL, NULL, false},
					     {"hx", 9, NULL, NULL, false},
					     {"d", 2, NULL, NULL, false}};
	const uint32_t fixed[] = {0, 1};
	static const uint32_t too_many[] = {1, 1, 1, 1, 1, 1, 1};
	static const uint32_t outside[] = {4};
	uint32_t chosen = 99;

	assert_int_equal(
		master_place_one(pool, 4, fixed, 2, 3, 0, &chosen, NULL), 0);
	assert_int_equal(chosen, 3);
	pool[3].free = 0;
	assert_int_equal(
		master_place_one(pool, 4, fixed, 2, 3, 0, &chosen, NULL),
		-ENOSPC);
	assert_int_equal(pool[2].free, 9);
	assert_int_equal(
		master_place_one(pool, 4, too_many, 7, 3, 0, &chosen, NULL),
		-EINVAL);
	assert_int_equal(
		master_place_one(pool, 4, outside, 1, 3, 0, &chosen, NULL),
		-EINVAL);
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
		cmocka_unit_test(test_domains_two_sites),
		cmocka_unit_test(test_domains_three_replicas_racks),
		cmocka_unit_test(test_domains_one_site_full),
		cmocka_unit_test(test_domains_site_runs_out),
		cmocka_unit_test(test_domains_labels_missing),
		cmocka_unit_test(test_domains_host_rule_first),
		cmocka_unit_test(test_place_one_hosts),
		cmocka_unit_test(test_place_one_sites),
		cmocka_unit_test(test_place_one_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
