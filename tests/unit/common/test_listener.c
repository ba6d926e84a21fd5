/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_listener.c - listening sockets: accepting Unix and TCP clients with
 * their peer names, the per-event accept limit, the pause after EMFILE,
 * retries after ECONNABORTED, failures, and closing that removes only the
 * listener's own socket file.
 *
 * accept4 is wrapped (-Wl,--wrap=accept4) so that a test can make the
 * next calls fail with a chosen errno; otherwise it is the real one.  The
 * loop is driven by hand with td_loop_run_once().
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/listener.h"
#include "common/log.h"
#include "common/sock.h"

#define NS_PER_MS    1000000ull
#define MAX_EVENTS   64
#define TEST_BACKLOG 64

/* --- accept4, failing on demand ------------------------------------------ */

int __real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);

static int accept_fail_errno; /* fail the next accept_fail_count calls */
static int accept_fail_count;
static int accept_calls;

int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	accept_calls++;
	if (accept_fail_count > 0) {
		accept_fail_count--;
		errno = accept_fail_errno;
		return -1;
	}
	return __real_accept4(fd, addr, len, flags);
}

/* --- what the callback saw ----------------------------------------------- */

static struct {
	int fd[MAX_EVENTS]; /* fd, or -errno of a pause */
	char peer[MAX_EVENTS][TD_LISTENER_PEER_MAX]; /* "" for NULL */
	void *opaque[MAX_EVENTS];
	unsigned int n;
} seen;

static void on_accept(int fd, const char *peer, void *opaque)
{
	assert_true(seen.n < MAX_EVENTS);
	seen.fd[seen.n] = fd;
	snprintf(seen.peer[seen.n], sizeof(seen.peer[0]), "%s",
		 peer ? peer : "");
	seen.opaque[seen.n] = opaque;
	seen.n++;
}

static void seen_close(void)
{
	for (unsigned int i = 0; i < seen.n; i++)
		if (seen.fd[i] >= 0)
			close(seen.fd[i]);
	memset(&seen, 0, sizeof(seen));
}

/* --- fixture ---------------------------------------------------------------- */

static char dir[64], path[128];
static struct td_loop *loop;
static struct td_listener_list list;
static int opaque_tag;

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/td-listener-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/l.sock", dir);
	assert_int_equal(td_loop_create(&loop), 0);
	TAILQ_INIT(&list);
	memset(&seen, 0, sizeof(seen));
	accept_fail_count = accept_calls = 0;
	return 0;
}

static int teardown(void **state)
{
	td_listener_close_all(&list);
	seen_close();
	td_loop_destroy(loop);
	unlink(path);
	rmdir(dir);
	return 0;
}

/* A listener on a fresh Unix socket at path. */
static struct td_listener *listen_unix(void)
{
	int fd = td_sock_bind_unix("test", path, 0);

	assert_true(fd >= 0);
	assert_int_equal(td_listener_add(&list, loop, fd, path, TEST_BACKLOG,
					 on_accept, &opaque_tag),
			 0);
	return TAILQ_LAST(&list, td_listener_list);
}

static int unix_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memcpy(sa.sun_path, path, strlen(path));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* --- tests -------------------------------------------------------------------- */

static void test_accept_unix(void **state)
{
	int cfd;

	listen_unix();
	cfd = unix_connect();
	assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_int_equal(seen.n, 1);
	assert_true(seen.fd[0] >= 0);
	assert_string_equal(seen.peer[0], ""); /* NULL: a Unix client */
	assert_ptr_equal(seen.opaque[0], &opaque_tag);
	/* The connection is non-blocking and close-on-exec. */
	assert_true(fcntl(seen.fd[0], F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(seen.fd[0], F_GETFD) & FD_CLOEXEC);
	/* And it is the client's. */
	assert_int_equal(send(cfd, "x", 1, 0), 1);
	{
		char c = 0;

		assert_int_equal(recv(seen.fd[0], &c, 1, 0), 1);
		assert_int_equal(c, 'x');
	}
	/* Nothing more to accept: no call, no spin. */
	assert_int_equal(td_loop_run_once(loop, 0), 0);
	assert_int_equal(seen.n, 1);
	close(cfd);
}

static void test_accept_tcp_peer(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	char want[TD_LISTENER_PEER_MAX];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), cfd;

	assert_true(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(td_listener_add(&list, loop, fd, NULL, TEST_BACKLOG,
					 on_accept, NULL),
			 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(cfd, (struct sockaddr *)&sin, len), 0);
	len = sizeof(sin);
	assert_int_equal(getsockname(cfd, (struct sockaddr *)&sin, &len), 0);
	snprintf(want, sizeof(want), "127.0.0.1:%u", ntohs(sin.sin_port));
	assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_int_equal(seen.n, 1);
	assert_true(seen.fd[0] >= 0);
	assert_string_equal(seen.peer[0], want);
	close(cfd);
}

/* 20 waiting clients: 16 in the first pass, the other 4 in the next. */
static void test_accepts_per_event(void **state)
{
	int cfd[20];

	listen_unix();
	for (int i = 0; i < 20; i++)
		cfd[i] = unix_connect();
	assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_int_equal(seen.n, 16);
	assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_int_equal(seen.n, 20);
	for (int i = 0; i < 20; i++) {
		assert_true(seen.fd[i] >= 0);
		close(cfd[i]);
	}
}

/* A client gone before accept, or a signal: try again at once. */
static void test_retry_aborted(void **state)
{
	int cfd;

	listen_unix();
	cfd = unix_connect();
	accept_fail_errno = ECONNABORTED;
	accept_fail_count = 1;
	assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_int_equal(seen.n, 1);
	assert_true(seen.fd[0] >= 0);
	accept_fail_errno = EINTR;
	accept_fail_count = 1;
	close(cfd);
	cfd = unix_connect();
	assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_int_equal(seen.n, 2);
	assert_true(seen.fd[1] >= 0);
	close(cfd);
}

/* Out of descriptors: reported once, paused, then the client is taken. */
static void test_backoff_emfile(void **state)
{
	struct td_listener *l = listen_unix();
	uint64_t start = td_now_ns();
	int cfd = unix_connect();

	accept_fail_errno = EMFILE;
	accept_fail_count = 1;
	assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.fd[0], -EMFILE);
	assert_string_equal(seen.peer[0], "");
	assert_int_equal(accept_calls, 1); /* no more calls in that pass */
	assert_int_equal(l->fde.events, 0);
	assert_true(td_timer_armed(&l->backoff));
	/* While paused the waiting client is not accepted. */
	assert_int_equal(td_loop_run_once(loop, 0), 0);
	assert_int_equal(seen.n, 1);
	assert_int_equal(accept_calls, 1);
	/* The back-off timer watches the socket again... */
	while (td_timer_armed(&l->backoff))
		assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_true(td_now_ns() - start >= TD_LISTENER_BACKOFF_MS * NS_PER_MS);
	assert_int_equal(l->fde.events, EPOLLIN);
	/* ...and the client is accepted. */
	while (seen.n < 2)
		assert_int_equal(td_loop_run_once(loop, 1000), 0);
	assert_true(seen.fd[1] >= 0);
	close(cfd);
}

/* Closing removes the socket file it bound... */
static void test_close_removes_own_file(void **state)
{
	listen_unix();
	assert_int_equal(access(path, F_OK), 0);
	td_listener_close_all(&list);
	assert_true(TAILQ_EMPTY(&list));
	assert_int_equal(access(path, F_OK), -1);
}

/* ...but not one a newer server has put at the same path since. */
static void test_close_keeps_other_file(void **state)
{
	struct stat before, after;
	int newer;

	listen_unix();
	unlink(path);
	newer = td_sock_bind_unix("test", path, 0);
	assert_true(newer >= 0);
	assert_int_equal(stat(path, &before), 0);
	td_listener_close_all(&list);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	close(newer);
}

/* Two listeners in one list: both closed, both files removed. */
static void test_close_all(void **state)
{
	char path2[160];
	int fd;

	listen_unix();
	snprintf(path2, sizeof(path2), "%s/m.sock", dir);
	fd = td_sock_bind_unix("test", path2, 0);
	assert_true(fd >= 0);
	assert_int_equal(td_listener_add(&list, loop, fd, path2, TEST_BACKLOG,
					 on_accept, NULL),
			 0);
	td_listener_close_all(&list);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(access(path2, F_OK), -1);
	/* Its fd is closed (the loop, destroyed in teardown, is empty). */
	assert_int_equal(fcntl(fd, F_GETFD), -1);
}

/* listen() refused (a datagram socket): fd closed, file removed. */
static void test_listen_fails(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	memcpy(sa.sun_path, path, strlen(path));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(td_listener_add(&list, loop, fd, path, TEST_BACKLOG,
					 on_accept, NULL),
			 -EOPNOTSUPP);
	assert_true(TAILQ_EMPTY(&list));
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(access(path, F_OK), -1);
}

/* The socket file is not there (removed under us): -ENOENT, fd closed. */
static void test_missing_file(void **state)
{
	int fd = td_sock_bind_unix("test", path, 0);

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(td_listener_add(&list, loop, fd, path, TEST_BACKLOG,
					 on_accept, NULL),
			 -ENOENT);
	assert_true(TAILQ_EMPTY(&list));
	assert_int_equal(fcntl(fd, F_GETFD), -1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_accept_unix),
		T(test_accept_tcp_peer),
		T(test_accepts_per_event),
		T(test_retry_aborted),
		T(test_backoff_emfile),
		T(test_close_removes_own_file),
		T(test_close_keeps_other_file),
		T(test_close_all),
		T(test_listen_fails),
		T(test_missing_file),
	};

	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
