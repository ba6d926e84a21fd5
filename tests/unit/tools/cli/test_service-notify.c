/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_service-notify.c - READY=1 and STOPPING=1 (tools/cli/service-notify.c)
 * as the service manager receives them: a datagram socket of the test's own
 * named by $NOTIFY_SOCKET (a path, then an abstract name); nothing and no
 * error without it; an error when the socket is gone.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/cli/service-notify.h"

#define DGRAM_MAX 1024

struct listener {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* A datagram socket at path (abstract when path starts with '@'), and
 * $NOTIFY_SOCKET naming it. */
static void listen_at(struct listener *l, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	socklen_t len;

	snprintf(l->path, sizeof(l->path), "%s", path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
			  strlen(path));
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	else
		unlink(path);
	l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(l->fd >= 0);
	assert_int_equal(bind(l->fd, (struct sockaddr *)&sa, len), 0);
	assert_int_equal(setenv(CLI_NOTIFY_SOCKET_ENV, path, 1), 0);
}

static void close_listener(struct listener *l)
{
	close(l->fd);
	if (l->path[0] != '@')
		unlink(l->path);
	unsetenv(CLI_NOTIFY_SOCKET_ENV);
}

/* The next datagram, as text; "" when none is waiting. */
static void receive(struct listener *l, char *buf)
{
	ssize_t n = recv(l->fd, buf, DGRAM_MAX - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
}

static void test_path_socket(void **state)
{
	struct listener l;
	char path[64], buf[DGRAM_MAX];

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test-notify-%d.sock", (int)getpid());
	listen_at(&l, path);
	assert_int_equal(
		cli_notify_ready("serving %s over %d frontends", "web1", 2), 0);
	receive(&l, buf);
	assert_string_equal(buf,
			    "READY=1\nSTATUS=serving web1 over 2 frontends");
	assert_int_equal(cli_notify_stopping("stopping %s", "web1"), 0);
	receive(&l, buf);
	assert_string_equal(buf, "STOPPING=1\nSTATUS=stopping web1");
	receive(&l, buf);
	assert_string_equal(buf, ""); /* one datagram per call */
	close_listener(&l);
}

static void test_abstract_socket(void **state)
{
	struct listener l;
	char name[64], buf[DGRAM_MAX];

	(void)state;
	snprintf(name, sizeof(name), "@test-notify-%d", (int)getpid());
	listen_at(&l, name);
	assert_int_equal(cli_notify_ready("ok"), 0);
	receive(&l, buf);
	assert_string_equal(buf, "READY=1\nSTATUS=ok");
	close_listener(&l);
}

/* A STATUS= longer than systemctl's line is cut, the state is kept. */
static void test_long_status(void **state)
{
	struct listener l;
	char path[64], buf[DGRAM_MAX], big[600];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(path, sizeof(path), "/tmp/test-notify-%d.sock", (int)getpid());
	listen_at(&l, path);
	assert_int_equal(cli_notify_ready("%s", big), 0);
	receive(&l, buf);
	assert_memory_equal(buf, "READY=1\nSTATUS=xxx", 18);
	assert_int_equal(strlen(buf), strlen("READY=1\nSTATUS=") + 255);
	close_listener(&l);
}

static void test_no_socket(void **state)
{
	(void)state;
	unsetenv(CLI_NOTIFY_SOCKET_ENV);
	assert_int_equal(cli_notify_ready("nobody listens"), 0);
	assert_int_equal(cli_notify_stopping("nobody listens"), 0);
}

/* $NOTIFY_SOCKET names a socket that is gone: the caller hears of it. */
static void test_socket_gone(void **state)
{
	char path[64];

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test-notify-gone-%d.sock",
		 (int)getpid());
	unlink(path);
	setenv(CLI_NOTIFY_SOCKET_ENV, path, 1);
	assert_int_equal(cli_notify_ready("x"), -ENOENT);
	setenv(CLI_NOTIFY_SOCKET_ENV, "relative.sock", 1);
	assert_int_equal(cli_notify_stopping("x"), -EINVAL);
	unsetenv(CLI_NOTIFY_SOCKET_ENV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_socket),
		cmocka_unit_test(test_abstract_socket),
		cmocka_unit_test(test_long_status),
		cmocka_unit_test(test_no_socket),
		cmocka_unit_test(test_socket_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
