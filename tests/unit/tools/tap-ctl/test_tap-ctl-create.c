/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tap-ctl-create.c - what tap-ctl create passes on to tapdisk: the
 * argv it builds from tapdisk's option table (tools/tapdisk/tapdisk-options.h),
 * the repeat limits, and that every tapdisk option is either passed on or
 * listed here as tap-ctl's own business.  The oracles are written by hand.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tools/tap-ctl/tap-ctl-create.c"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* tap-ctl.c has the real one (and main). */
int tapctl_fail(const char *fmt, ...)
{
	return EXIT_FAILURE;
}

static const struct cli_option *by_name(const char *name)
{
	for (size_t i = 0; i < tapdisk_nr_options; i++)
		if (!strcmp(tapdisk_options[i].name, name))
			return &tapdisk_options[i];
	fail_msg("no tapdisk option --%s", name);
	return NULL;
}

static void give(struct cmd_opts *o, const char *name, const char *value)
{
	assert_int_equal(tapctl_create_option(o, by_name(name), value), 0);
}

static void assert_argv(char **argv, const char *const *want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		assert_non_null(argv[i]);
		assert_string_equal(argv[i], want[i]);
	}
	assert_null(argv[n]);
}

/* --xen and --log-file reach tapdisk, in the order given. */
static void test_argv_passes_xen_and_log_file(void **state)
{
	static const char *const want[] = {
		"/bin/tapdisk", "-a",	       "null:size=1G", "--xen", "on",
		"--log-file",	"/tmp/td.log", "--nbd",	       "unix",	"-r",
		"--run-dir",	"/run/x",      "--ready-fd",   "3",
	};
	struct cmd_opts o = {.run_dir = "/run/x"};
	struct create_argv a;

	give(&o, "chain", "null:size=1G");
	give(&o, "xen", "on");
	give(&o, "log-file", "/tmp/td.log");
	give(&o, "nbd", "unix");
	give(&o, "read-only", NULL);
	build_argv(&o, "/bin/tapdisk", &a);
	assert_argv(a.argv, want, ARRAY_SIZE(want));
}

/* A single option given twice: the last one, in the first one's place. */
static void test_argv_last_value_wins(void **state)
{
	static const char *const want[] = {
		"tapdisk", "--name",	  "b",	   "-a",
		"null:",   "--log-level", "debug", "--run-dir",
		"/r",	   "--ready-fd",  "3",
	};
	struct cmd_opts o = {.run_dir = "/r"};
	struct create_argv a;

	give(&o, "name", "a");
	give(&o, "chain", "null:");
	give(&o, "log-level", "info");
	give(&o, "name", "b");
	give(&o, "log-level", "debug");
	build_argv(&o, "tapdisk", &a);
	assert_argv(a.argv, want, ARRAY_SIZE(want));
}

static void test_repeat_limits(void **state)
{
	static const struct {
		const char *name;
		int times; /* accepted; one more is -E2BIG */
	} rows[] = {
		{"nbd", 4},
		{"shm", 4},
		{"nbd-allow", 16},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct cmd_opts o = {0};
		const struct cli_option *opt = by_name(rows[i].name);

		for (int n = 0; n < rows[i].times; n++)
			assert_int_equal(tapctl_create_option(&o, opt, "x"), 0);
		assert_int_equal(tapctl_create_option(&o, opt, "x"), -E2BIG);
		assert_int_equal(o.nr_tapdisk_args, rows[i].times);
	}
}

/*
 * Every tapdisk option is passed on by create, or tap-ctl handles it
 * itself: a new option must be put in one list or the other.
 */
static void test_every_option_decided(void **state)
{
	static const char *const passed[] = {
		"chain",
		"disk",
		"disk-dir",
		"nbd",
		"shm",
		"max-indirect-segments",
		"xen",
		"name",
		"read-only",
		"export-name",
		"max-inflight",
		"log-level",
		"log-file",
		"log",
		"nbd-tls",
		"nbd-tls-psk",
		"nbd-tls-x509",
		"nbd-allow",
		"nbd-max-clients",
		"nbd-handshake-timeout",
		"nbd-io-timeout",
		"nbd-idle-timeout",
		"poll-us",
	};
	static const char *const own[] = {
		"run-dir",    /* tap-ctl's own --run-dir, always passed on */
		"foreground", /* create runs it in the background */
		"ready-fd",   /* create sets it */
		"help",	      "version",
	};

	assert_int_equal(tapdisk_nr_options,
			 ARRAY_SIZE(passed) + ARRAY_SIZE(own));
	for (size_t i = 0; i < ARRAY_SIZE(passed); i++)
		assert_true(by_name(passed[i])->flags & TAPDISK_OPT_CREATE);
	for (size_t i = 0; i < ARRAY_SIZE(own); i++)
		assert_false(by_name(own[i])->flags & TAPDISK_OPT_CREATE);
}

/* Every option at once, the repeatable ones to their limit, fits. */
static void test_all_options_fit(void **state)
{
	struct cmd_opts o = {.run_dir = "/r"};
	struct create_argv a;
	int words = 1 + 4 + 1; /* tapdisk, --run-dir, --ready-fd, NULL */

	for (size_t i = 0; i < tapdisk_nr_options; i++) {
		const struct cli_option *opt = &tapdisk_options[i];
		long long times =
			opt->flags & TAPDISK_OPT_REPEAT ? opt->max : 1;

		if (!(opt->flags & TAPDISK_OPT_CREATE))
			continue;
		for (long long n = 0; n < times; n++) {
			assert_int_equal(
				tapctl_create_option(&o, opt,
						     opt->arg ? "v" : NULL),
				0);
			words += opt->arg ? 2 : 1;
		}
	}
	build_argv(&o, "tapdisk", &a);
	assert_true(words <= MAX_ARGV);
	assert_null(a.argv[words - 1]);
}

/* No --log nor --log-file: syslog when its socket is there, else none. */
static void test_default_log(void **state)
{
	static const char *const with[] = {
		"tapdisk",   "-a", "null:",	 "--log", "syslog",
		"--run-dir", "/r", "--ready-fd", "3",
	};
	static const char *const without[] = {
		"tapdisk", "-a", "null:", "--run-dir", "/r", "--ready-fd", "3",
	};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[] = "/tmp/test-tap-ctl-XXXXXX";
	struct create_argv a;
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/log", dir);
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct cmd_opts o = {.run_dir = "/r"};
	give(&o, "chain", "null:");
	default_log(&o, sa.sun_path);
	build_argv(&o, "tapdisk", &a);
	assert_argv(a.argv, with, ARRAY_SIZE(with));

	struct cmd_opts no_syslog = {.run_dir = "/r"};
	give(&no_syslog, "chain", "null:");
	default_log(&no_syslog, "/nonexistent/log");
	build_argv(&no_syslog, "tapdisk", &a);
	assert_argv(a.argv, without, ARRAY_SIZE(without));

	struct cmd_opts file = {.run_dir = "/r"};
	give(&file, "chain", "null:");
	give(&file, "log-file", "/tmp/x.log");
	default_log(&file, sa.sun_path);
	build_argv(&file, "tapdisk", &a);
	assert_string_equal(a.argv[3], "--log-file");
	assert_string_equal(a.argv[5], "--run-dir");

	close(fd);
	unlink(sa.sun_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_argv_passes_xen_and_log_file),
		cmocka_unit_test(test_argv_last_value_wins),
		cmocka_unit_test(test_repeat_limits),
		cmocka_unit_test(test_every_option_decided),
		cmocka_unit_test(test_all_options_fit),
		cmocka_unit_test(test_default_log),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
