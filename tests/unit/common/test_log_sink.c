/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_log_sink.c - the syslog sink (log-sink.c) against a fake /dev/log
 * (a datagram socket in a temporary directory), and the reopen of a log
 * file (log.c) after a rotation.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/log.h"

#define NS_PER_MS 1000000ull

struct fixture {
	char dir[64];
	char path[96];
	int fd; /* the fake syslogd's socket */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = 2};

	snprintf(f->dir, sizeof(f->dir), "/tmp/test-log-sink-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/log", f->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	f->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(f->fd >= 0);
	assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[160];

	td_log_syslog_close();
	td_log_set_stream(NULL);
	td_log_set_level(TD_LOG_INFO);
	close(f->fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* One datagram as a string; "" after the timeout. */
static void recv_line(int fd, char *buf, size_t len)
{
	ssize_t n = recv(fd, buf, len - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
}

static void test_priorities_and_name(void **state)
{
	struct fixture *f = *state;
	static const char *const want[] = {"<27>", "<28>", "<30>", "<31>"};
	char line[2048], tail[256];

	td_log_set_level(TD_LOG_DBG);
	assert_int_equal(td_log_syslog_open(f->path, "tapdisk/disk1", 0), 0);
	for (int lvl = TD_LOG_ERR; lvl <= TD_LOG_DBG; lvl++)
		td_log((enum td_log_level)lvl, "fn", "disk1", NULL, "line %d",
		       lvl);
	for (int lvl = TD_LOG_ERR; lvl <= TD_LOG_DBG; lvl++) {
		recv_line(f->fd, line, sizeof(line));
		assert_memory_equal(line, want[lvl], 4);
		snprintf(tail, sizeof(tail),
			 " tapdisk/disk1[%d]: fn [disk1]: line %d",
			 (int)getpid(), lvl);
		assert_non_null(strstr(line, tail));
	}
	assert_int_equal(td_log_syslog_close(), 0);
}

/* A reader that stops reading: the writer never waits, drops are counted,
 * and every line is either received or counted as dropped. */
static void test_stalled_reader(void **state)
{
	struct fixture *f = *state;
	enum { LINES = 5000 };
	uint64_t start, took, dropped;
	char line[2048];
	unsigned got = 0;

	assert_int_equal(td_log_syslog_open(f->path, "tapdisk/slow", 16), 0);
	start = td_now_ns();
	for (int i = 0; i < LINES; i++)
		td_log(TD_LOG_INFO, "fn", "slow", NULL, "line %d", i);
	took = td_now_ns() - start;
	assert_true(took < 500 * NS_PER_MS);
	assert_true(td_log_syslog_dropped() > 0);
	start = td_now_ns();
	dropped = td_log_syslog_close();
	assert_true(td_now_ns() - start < 3000 * NS_PER_MS);
	for (;;) {
		struct timeval tv = {.tv_usec = 100000};

		setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		recv_line(f->fd, line, sizeof(line));
		if (!line[0])
			break;
		got++;
	}
	assert_true(dropped > 0);
	assert_int_equal(got + dropped, LINES);
}

static void test_no_socket(void **state)
{
	struct fixture *f = *state;
	char path[160];

	snprintf(path, sizeof(path), "%s/none", f->dir);
	assert_int_equal(td_log_syslog_open(path, "x", 0), -ENOENT);
	assert_int_equal(td_log_sink_put(TD_LOG_ERR, "not taken"), 0);
}

static void test_targets(void **state)
{
	struct fixture *f = *state;
	char target[160];

	assert_int_equal(td_log_set_target("bogus", "x"), -EINVAL);
	assert_int_equal(td_log_set_target("file:", "x"), -EINVAL);
	assert_int_equal(td_log_set_target("syslog:", "x"), -EINVAL);
	snprintf(target, sizeof(target), "syslog:%s", f->path);
	assert_int_equal(td_log_set_target(target, "x"), 0);
	assert_int_equal(td_log_sink_put(TD_LOG_INFO, "taken"), 1);
	assert_int_equal(td_log_set_target("stderr", "x"), 0);
	assert_int_equal(td_log_sink_put(TD_LOG_INFO, "not taken"), 0);
}

static int count_in(const char *path, const char *word)
{
	char line[2048];
	int n = 0;
	FILE *fp = fopen(path, "r");

	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp))
		n += strstr(line, word) != NULL;
	fclose(fp);
	return n;
}

/* logrotate renames the file, then SIGHUP: td_log_reopen(). */
static void test_reopen_after_rotation(void **state)
{
	struct fixture *f = *state;
	char log[160], old[170];

	snprintf(log, sizeof(log), "%s/a.log", f->dir);
	snprintf(old, sizeof(old), "%s.1", log);
	assert_int_equal(td_log_open_file(log), 0);
	td_info("one");
	assert_int_equal(rename(log, old), 0);
	td_info("two");
	assert_int_equal(td_log_reopen(), 0);
	td_info("three");
	assert_int_equal(count_in(old, ": one"), 1);
	assert_int_equal(count_in(old, ": two"), 1);
	assert_int_equal(count_in(old, ": three"), 0);
	assert_int_equal(count_in(log, ": three"), 1);
	assert_int_equal(count_in(log, ": two"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_priorities_and_name, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stalled_reader, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_socket, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_targets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen_after_rotation,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
