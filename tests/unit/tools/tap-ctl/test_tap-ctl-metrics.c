/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tap-ctl-metrics.c - tap-ctl metrics merges the expositions of
 * several tapdisks family by family: HELP and TYPE once, every disk's
 * samples under them, families in the order they first appear.  The
 * oracles are written by hand.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tools/tap-ctl/tap-ctl-metrics.c"

/* tap-ctl.c and tap-ctl-list.c have the real ones. */
int tapctl_fail(const char *fmt, ...)
{
	(void)fmt;
	return EXIT_FAILURE;
}

int tapctl_each_tapdisk(const struct cmd_opts *o, const char *line,
			void (*fn)(void *opaque, int pid, const char *payload),
			void *opaque)
{
	(void)o;
	(void)line;
	(void)fn;
	(void)opaque;
	return EXIT_FAILURE;
}

static const char disk_a[] = "# HELP t_req_total Requests\n"
			     "# TYPE t_req_total counter\n"
			     "t_req_total{disk=\"a\",op=\"read\"} 1\n"
			     "t_req_total{disk=\"a\",op=\"write\"} 2\n"
			     "# HELP t_lat_seconds Latency\n"
			     "# TYPE t_lat_seconds histogram\n"
			     "t_lat_seconds_bucket{disk=\"a\",le=\"+Inf\"} 3\n"
			     "t_lat_seconds_count{disk=\"a\"} 3\n";

/* b has a family a lacks (a striped disk's) between the shared ones. */
static const char disk_b[] = "# HELP t_req_total Requests\n"
			     "# TYPE t_req_total counter\n"
			     "t_req_total{disk=\"b\",op=\"read\"} 5\n"
			     "# HELP t_stale Stale replicas\n"
			     "# TYPE t_stale gauge\n"
			     "t_stale{disk=\"b\"} 4\n"
			     "# HELP t_lat_seconds Latency\n"
			     "# TYPE t_lat_seconds histogram\n"
			     "t_lat_seconds_bucket{disk=\"b\",le=\"+Inf\"} 0\n"
			     "t_lat_seconds_count{disk=\"b\"} 0\n";

static const char merged[] = "# HELP t_req_total Requests\n"
			     "# TYPE t_req_total counter\n"
			     "t_req_total{disk=\"a\",op=\"read\"} 1\n"
			     "t_req_total{disk=\"a\",op=\"write\"} 2\n"
			     "t_req_total{disk=\"b\",op=\"read\"} 5\n"
			     "# HELP t_lat_seconds Latency\n"
			     "# TYPE t_lat_seconds histogram\n"
			     "t_lat_seconds_bucket{disk=\"a\",le=\"+Inf\"} 3\n"
			     "t_lat_seconds_count{disk=\"a\"} 3\n"
			     "t_lat_seconds_bucket{disk=\"b\",le=\"+Inf\"} 0\n"
			     "t_lat_seconds_count{disk=\"b\"} 0\n"
			     "# HELP t_stale Stale replicas\n"
			     "# TYPE t_stale gauge\n"
			     "t_stale{disk=\"b\"} 4\n";

/* The merged text, as tap-ctl metrics prints it (caller frees). */
static char *written(const struct tapctl_metrics *m)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(tapctl_metrics_write(m, f), 0);
	fclose(f);
	return buf;
}

static void test_merge_two_disks(void **state)
{
	struct tapctl_metrics m;
	char *out;

	(void)state;
	tapctl_metrics_init(&m);
	assert_int_equal(tapctl_metrics_merge(&m, disk_a), 0);
	assert_int_equal(tapctl_metrics_merge(&m, disk_b), 0);
	assert_int_equal(m.nr_families, 3);
	out = written(&m);
	assert_string_equal(out, merged);
	free(out);
	tapctl_metrics_free(&m);
}

static void test_one_disk_unchanged(void **state)
{
	struct tapctl_metrics m;
	char *out;

	(void)state;
	tapctl_metrics_init(&m);
	assert_int_equal(tapctl_metrics_merge(&m, disk_b), 0);
	out = written(&m);
	assert_string_equal(out, disk_b);
	free(out);
	tapctl_metrics_free(&m);
}

static void test_nothing_and_bad_input(void **state)
{
	struct tapctl_metrics m;
	char *out;

	(void)state;
	tapctl_metrics_init(&m);
	assert_int_equal(tapctl_metrics_merge(&m, ""), 0);
	out = written(&m);
	assert_string_equal(out, "");
	free(out);
	/* A sample before any family: refused, not attributed to one. */
	assert_int_equal(tapctl_metrics_merge(&m, "t_x{disk=\"a\"} 1\n"),
			 -EINVAL);
	/* A last line without its newline is kept whole. */
	assert_int_equal(tapctl_metrics_merge(&m, "# HELP t_y Y\n"
						  "# TYPE t_y gauge\n"
						  "t_y{disk=\"a\"} 7"),
			 0);
	out = written(&m);
	assert_string_equal(out, "# HELP t_y Y\n# TYPE t_y gauge\n"
				 "t_y{disk=\"a\"} 7");
	free(out);
	tapctl_metrics_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_two_disks),
		cmocka_unit_test(test_one_disk_unchanged),
		cmocka_unit_test(test_nothing_and_bad_input),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
