/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_util.c - td_parse_size (tapdisk/util.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tapdisk/driver.h"
#include "common/util.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct size_row {
	const char *text;
	int ret;
	uint64_t bytes; /* when ret == 0 */
};

static void check_rows(const struct size_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t bytes = 0xdeadbeef;

		print_message("td_parse_size(\"%s\")\n",
			      rows[i].text ? rows[i].text : "(null)");
		assert_int_equal(td_parse_size(rows[i].text, &bytes),
				 rows[i].ret);
		if (!rows[i].ret)
			assert_int_equal(bytes, rows[i].bytes);
	}
}

static void test_parse_size_valid(void **state)
{
	static const struct size_row rows[] = {
		{"0", 0, 0},
		{"512", 0, 512},
		{"4096", 0, 4096},
		{"4K", 0, 4096},
		{"4k", 0, 4096},
		{"4KiB", 0, 4096},
		{"4kib", 0, 4096},
		{"4KB", 0, 4096},
		{"1KB", 0, 1024},
		{"1Kb", 0, 1024},
		{"0K", 0, 0},
		{"1M", 0, 1048576},
		{"1m", 0, 1048576},
		{"1MiB", 0, 1048576},
		{"1G", 0, 1073741824},
		{"1GiB", 0, 1073741824},
		{"2T", 0, 2199023255552ull},
		{"1P", 0, 1125899906842624ull},
		{"1E", 0, 1152921504606846976ull},
		{"15E", 0, 17293822569102704640ull},
		{"16383P", 0, 18445618173802708992ull},
		{"007", 0, 7},
		{"18446744073709551615", 0, UINT64_MAX},
	};

	check_rows(rows, ARRAY_SIZE(rows));
}

static void test_parse_size_out_of_range(void **state)
{
	static const struct size_row rows[] = {
		{"16E", -ERANGE, 0},
		{"16384P", -ERANGE, 0},
		{"16777216T", -ERANGE, 0},
		{"18446744073709551616", -ERANGE, 0},
		{"99999999999999999999999", -ERANGE, 0},
		{"18446744073709551615K", -ERANGE, 0},
	};

	check_rows(rows, ARRAY_SIZE(rows));
}

static void test_parse_size_invalid(void **state)
{
	static const struct size_row rows[] = {
		{"", -EINVAL, 0},      {"K", -EINVAL, 0},
		{"KiB", -EINVAL, 0},   {"-1", -EINVAL, 0},
		{"+1", -EINVAL, 0},    {"1X", -EINVAL, 0},
		{"1KB ", -EINVAL, 0},  {"1Kx", -EINVAL, 0},
		{"1KiBx", -EINVAL, 0}, {"1Ki", -EINVAL, 0},
		{"1KK", -EINVAL, 0},   {"1iB", -EINVAL, 0},
		{" 1", -EINVAL, 0},    {"1 ", -EINVAL, 0},
		{"1 K", -EINVAL, 0},   {"1.5G", -EINVAL, 0},
		{"0x10", -EINVAL, 0},  {"1e3", -EINVAL, 0},
		{"abc", -EINVAL, 0},   {NULL, -EINVAL, 0},
	};

	check_rows(rows, ARRAY_SIZE(rows));
}

static void *read_mask(void *arg)
{
	pthread_sigmask(SIG_SETMASK, NULL, arg);
	return NULL;
}

/* A helper thread blocks every signal, whatever its creator's mask, and
 * the creator's mask is left as it was. */
static void test_thread_blocks_signals(void **state)
{
	sigset_t none, seen, after;
	pthread_t t;

	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	assert_int_equal(td_thread_create(&t, read_mask, &seen), 0);
	pthread_join(t, NULL);
	assert_true(sigismember(&seen, SIGTERM));
	assert_true(sigismember(&seen, SIGINT));
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	assert_false(sigismember(&after, SIGTERM));
}

/* Files a disk cannot be are refused without waiting on them. */
static void test_open_file_kinds(void **state)
{
	char dir[] = "/tmp/test_util.XXXXXX", fifo[64], reg[64];
	mode_t mode;
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(reg, sizeof(reg), "%s/reg", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	fd = open(reg, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(
		td_open_file(fifo, O_RDONLY, 0, TD_OPEN_REGULAR, &fd, &mode),
		-EINVAL);
	assert_string_equal(td_file_kind(mode), "a FIFO");
	assert_int_equal(
		td_open_file(dir, O_RDWR, 0, TD_OPEN_REGULAR, &fd, &mode),
		-EISDIR);
	assert_string_equal(td_file_kind(mode), "a directory");
	assert_int_equal(td_open_file("/dev/null", O_RDONLY, 0,
				      TD_OPEN_REGULAR | TD_OPEN_BLOCK_DEVICE,
				      &fd, &mode),
			 -EINVAL);
	assert_string_equal(td_file_kind(mode), "a character device");
	assert_int_equal(td_open_file("/nonexistent", O_RDONLY, 0,
				      TD_OPEN_REGULAR, &fd, &mode),
			 -ENOENT);
	assert_int_equal(mode, 0);
	assert_int_equal(
		td_open_file(reg, O_RDONLY, 0, TD_OPEN_REGULAR, &fd, &mode), 0);
	assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
	close(fd);
	unlink(fifo);
	unlink(reg);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_size_valid),
		cmocka_unit_test(test_parse_size_out_of_range),
		cmocka_unit_test(test_parse_size_invalid),
		cmocka_unit_test(test_thread_blocks_signals),
		cmocka_unit_test(test_open_file_kinds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
