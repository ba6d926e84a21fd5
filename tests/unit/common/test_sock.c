/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sock.c - binding Unix sockets: stale files replaced, live servers
 * and non-sockets refused, bad paths refused, the mode applied.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/sock.h"

static char dir[64], path[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/td-sock-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	rmdir(dir);
	return 0;
}

static void test_bind_and_mode(void **state)
{
	struct stat st;
	int fd = td_sock_bind_unix("test", path, 0600);

	assert_true(fd >= 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	close(fd);
}

static void test_stale_replaced(void **state)
{
	int fd = td_sock_bind_unix("test", path, 0);

	assert_true(fd >= 0);
	close(fd); /* never listened: the file is stale */
	fd = td_sock_bind_unix("test", path, 0);
	assert_true(fd >= 0);
	close(fd);
}

static void test_live_refused(void **state)
{
	int fd = td_sock_bind_unix("test", path, 0);

	assert_true(fd >= 0);
	assert_int_equal(listen(fd, 1), 0);
	assert_int_equal(td_sock_bind_unix("test", path, 0), -EADDRINUSE);
	close(fd);
}

static void test_not_a_socket_refused(void **state)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fclose(f);
	assert_int_equal(td_sock_bind_unix("test", path, 0), -EEXIST);
}

static void test_bad_paths(void **state)
{
	char long_path[200];

	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	assert_int_equal(td_sock_bind_unix("test", "", 0), -ENAMETOOLONG);
	assert_int_equal(td_sock_bind_unix("test", long_path, 0),
			 -ENAMETOOLONG);
	assert_int_equal(td_sock_bind_unix("test", "/nonexistent/dir/s", 0),
			 -ENOENT);
}

static void test_unlink_own_only(void **state)
{
	struct stat st;
	int fd = td_sock_bind_unix("test", path, 0);

	assert_true(fd >= 0);
	assert_int_equal(stat(path, &st), 0);
	/* Another inode at the path (a newer server's) is left alone. */
	td_sock_unlink_own(path, st.st_dev, st.st_ino + 1);
	assert_int_equal(access(path, F_OK), 0);
	td_sock_unlink_own(NULL, st.st_dev, st.st_ino);
	td_sock_unlink_own(path, st.st_dev, st.st_ino);
	assert_int_equal(access(path, F_OK), -1);
	close(fd);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_bind_and_mode), T(test_stale_replaced),
		T(test_live_refused),  T(test_not_a_socket_refused),
		T(test_bad_paths),     T(test_unlink_own_only),

	};

	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
