/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_qos-group.c - a qos budget shared through a mapped file: two
 * members of one group draw from one bucket (in one process and across
 * a fork), limits set by one are seen by the other, a file that is not a
 * group is refused with a reason, and names are checked.  The clock is
 * passed in.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "drivers/qos/qos-group.h"

#define MS  1000000ull
#define SEC 1000000000ull

static char dir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/test_qos-group.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static const bool all_iops[QOS_NR_LIMITS] = {[QOS_IOPS] = true};

static struct qos_group *open_ok(const char *name)
{
	struct qos_group *g = NULL;
	char why[QOS_WHY_MAX] = "";

	assert_int_equal(qos_group_open(dir, name, &g, why, sizeof(why)), 0);
	assert_non_null(g);
	return g;
}

/* 100 IOPS, 100 ms burst shared by two members: 11 pass in all, not 22. */
static void test_two_members_one_budget(void **state)
{
	uint64_t limit[QOS_NR_LIMITS] = {[QOS_IOPS] = 100};
	uint64_t cost[QOS_NR_LIMITS] = {[QOS_IOPS] = 1};
	struct qos_group *a = open_ok("g1"), *b = open_ok("g1");
	uint64_t t = 50 * SEC, got[QOS_NR_LIMITS];
	uint32_t burst;
	int passed = 0;

	(void)state;
	/* A new group limits nothing. */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(qos_group_admit(a, cost, t), 0);
	qos_group_set(a, limit, all_iops, 100, t);
	qos_group_get(b, got, &burst);
	assert_int_equal(got[QOS_IOPS], 100);
	assert_int_equal(burst, 100);
	for (int i = 0; i < 20; i++)
		passed += !qos_group_admit(i % 2 ? a : b, cost, t);
	assert_int_equal(passed, 11);
	assert_int_equal(qos_group_admit(a, cost, t), 10 * MS);
	assert_int_equal(qos_group_admit(b, cost, t + 10 * MS), 0);
	qos_group_close(a);
	qos_group_close(b);
}

/* A limit not given stays; a request charged to no limit always passes. */
static void test_set_keeps_others(void **state)
{
	uint64_t limit[QOS_NR_LIMITS] = {[QOS_IOPS] = 5, [QOS_BPS] = 4096};
	bool given[QOS_NR_LIMITS] = {[QOS_IOPS] = true, [QOS_BPS] = true};
	uint64_t got[QOS_NR_LIMITS], none[QOS_NR_LIMITS] = {0};
	struct qos_group *g = open_ok("g2");
	uint32_t burst;

	(void)state;
	qos_group_set(g, limit, given, 1000, SEC);
	limit[QOS_IOPS] = 9;
	limit[QOS_BPS] = 1;
	given[QOS_BPS] = false;
	qos_group_set(g, limit, given, 1000, SEC);
	qos_group_get(g, got, &burst);
	assert_int_equal(got[QOS_IOPS], 9);
	assert_int_equal(got[QOS_BPS], 4096);
	for (int i = 0; i < 100; i++)
		assert_int_equal(qos_group_admit(g, none, SEC), 0);
	qos_group_close(g);
}

/* A child process is a member too: its charges use the parent's budget. */
static void test_across_processes(void **state)
{
	uint64_t limit[QOS_NR_LIMITS] = {[QOS_IOPS] = 10};
	uint64_t cost[QOS_NR_LIMITS] = {[QOS_IOPS] = 1};
	struct qos_group *g = open_ok("g3");
	uint64_t t = 7 * SEC;
	int status, passed = 0;
	pid_t pid;

	(void)state;
	qos_group_set(g, limit, all_iops, 1000, t);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct qos_group *c = NULL;
		char why[QOS_WHY_MAX];
		int n = 0;

		qos_group_close(g); /* the parent's mapping, not ours */
		if (qos_group_open(dir, "g3", &c, why, sizeof(why)))
			_exit(100);
		for (int i = 0; i < 8; i++)
			n += !qos_group_admit(c, cost, t);
		qos_group_close(c);
		_exit(n);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 8);
	/* Burst 1 s of 10 IOPS: 11 at one instant, 8 taken by the child. */
	for (int i = 0; i < 8; i++)
		passed += !qos_group_admit(g, cost, t);
	assert_int_equal(passed, 3);
	qos_group_close(g);
}

static void test_bad_files_and_names(void **state)
{
	static const char *const names[] = {"", ".x", "a/b", "a b", "../up"};
	struct qos_group *g = NULL;
	char why[QOS_WHY_MAX], path[128];
	int fd;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		why[0] = '\0';
		assert_int_equal(
			qos_group_open(dir, names[i], &g, why, sizeof(why)),
			-EINVAL);
		assert_true(why[0] != '\0');
	}
	snprintf(path, sizeof(path), "%s/junk.qos", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a group", 11), 11);
	close(fd);
	why[0] = '\0';
	assert_int_equal(qos_group_open(dir, "junk", &g, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "remove it"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_members_one_budget),
		cmocka_unit_test(test_set_keeps_others),
		cmocka_unit_test(test_across_processes),
		cmocka_unit_test(test_bad_files_and_names),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
