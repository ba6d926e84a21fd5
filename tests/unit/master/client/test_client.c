/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_client.c - master/client.c (with addr.c and reply.c, its helpers)
 * without a master: address parsing, the errors a caller sees when nobody
 * listens or nobody answers, retries, and the reply helpers.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/addr.h"
#include "master/client/client.h"
#include "master/client/host-id.h"
#include "common/log.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void test_split_hostport(void **state)
{
	static const struct {
		const char *text;
		int ret;
		const char *host, *port;
	} rows[] = {
		{"10.0.0.5", 0, "10.0.0.5", "7700"},
		{"10.0.0.5:7701", 0, "10.0.0.5", "7701"},
		{"master.example", 0, "master.example", "7700"},
		{"[::1]:9000", 0, "::1", "9000"},
		{"[::1]", 0, "::1", "7700"},
		{"::1", 0, "::1", "7700"}, /* bare IPv6, no port */
		{"fd00::5", 0, "fd00::5", "7700"},
		{"h:0", -EINVAL, NULL, NULL},
		{"h:65536", -EINVAL, NULL, NULL},
		{"h:12x", -EINVAL, NULL, NULL},
		{"h:", -EINVAL, NULL, NULL},
		{":7700", -EINVAL, NULL, NULL},
		{"[::1", -EINVAL, NULL, NULL},
		{"[::1]x", -EINVAL, NULL, NULL},
		{"", -EINVAL, NULL, NULL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		char host[MASTER_HOST_MAX], port[MASTER_PORT_MAX];

		print_message("'%s'\n", rows[i].text);
		assert_int_equal(master_split_hostport(rows[i].text, 7700, 0,
						       host, port),
				 rows[i].ret);
		if (!rows[i].ret) {
			assert_string_equal(host, rows[i].host);
			assert_string_equal(port, rows[i].port);
		}
	}
}

static void test_port_zero_for_listeners(void **state)
{
	char host[MASTER_HOST_MAX], port[MASTER_PORT_MAX];

	assert_int_equal(
		master_split_hostport("127.0.0.1:0", 7700, 1, host, port), 0);
	assert_string_equal(port, "0");
}

static void test_open_bad_address(void **state)
{
	struct master_client *c;

	assert_int_equal(master_client_open("h:99999", NULL, &c), -EINVAL);
	assert_int_equal(master_client_open(NULL, NULL, &c), -EINVAL);
	assert_int_equal(master_client_open("[::1]:7000", NULL, &c), 0);
	assert_string_equal(master_client_address(c), "[::1]:7000");
	master_client_close(c);
}

/* A port on loopback that nobody listens on. */
static unsigned int closed_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static void test_nobody_listens(void **state)
{
	struct master_client_opts o = {.timeout_ms = 500, .retries = 1};
	struct master_client *c;
	char addr[64];
	ms_reply rep;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", closed_port());
	assert_int_equal(master_client_open(addr, &o, &c), 0);
	assert_int_equal(master_call_info(c, &rep), -ECONNREFUSED);
	assert_non_null(strstr(master_client_error(c), addr));
	assert_non_null(strstr(master_client_error(c),
			       "is stripe-master running there"));
	master_reply_free(&rep);
	master_client_close(c);
}

/* A listener that accepts (in the backlog) but never answers. */
static void test_nobody_answers(void **state)
{
	struct master_client_opts o = {.timeout_ms = 200, .retries = 1};
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct master_client *c;
	char addr[64];
	ms_reply rep;
	uint64_t t0;

	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	assert_int_equal(master_client_open(addr, &o, &c), 0);
	t0 = td_now_ns();
	assert_int_equal(master_call_vdisk_lookup(c, "d1", &rep), -ETIMEDOUT);
	/* two attempts of 200 ms and a pause of 100 ms between them */
	assert_true(td_now_ns() - t0 >= 500000000ull);
	assert_non_null(
		strstr(master_client_error(c), "did not answer within 200 ms"));
	master_reply_free(&rep);
	master_client_close(c);
	close(fd);
}

static void test_status_errno(void **state)
{
	static const struct {
		ms_status status;
		int err;
		const char *name;
	} rows[] = {
		{MS_OK, 0, "ok"},
		{MS_EINVAL, -EINVAL, "EINVAL"},
		{MS_ENOENT, -ENOENT, "ENOENT"},
		{MS_EEXIST, -EEXIST, "EEXIST"},
		{MS_ENOSPC, -ENOSPC, "ENOSPC"},
		{MS_EPERM, -EPERM, "EPERM"},
		{MS_EBUSY, -EBUSY, "EBUSY"},
		{MS_EIO, -EIO, "EIO"},
		{(ms_status)99, -EPROTO, "unknown"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		assert_int_equal(master_status_errno(rows[i].status),
				 rows[i].err);
		assert_string_equal(master_status_name(rows[i].status),
				    rows[i].name);
	}
}

static void test_reply_helpers(void **state)
{
	char long_text[2 * MS_MESSAGE_MAX], *empty;
	ms_reply rep;

	master_reply_init(&rep);
	assert_int_equal(master_reply_ok(&rep, true), 0);
	assert_string_equal(rep.message, "");
	assert_true(rep.changed);
	/* a failure drops the body and bounds the message */
	rep.body.kind = MS_BODY_SERVER;
	rep.body.ms_body_u.server.address = master_strdup("a");
	memset(long_text, 'x', sizeof(long_text) - 1);
	long_text[sizeof(long_text) - 1] = '\0';
	assert_int_equal(master_reply_fail(&rep, MS_EIO, "%s", long_text), 0);
	assert_int_equal(rep.body.kind, MS_BODY_NONE);
	assert_int_equal(strlen(rep.message), MS_MESSAGE_MAX);
	assert_false(rep.changed);
	master_reply_free(&rep);
	assert_null(rep.message);
	empty = master_strdup(NULL);
	assert_string_equal(empty, "");
	free(empty);
}

static void test_host_id_rule(void **state)
{
	assert_true(master_host_id_ok("host-a.example_1"));
	assert_false(master_host_id_ok(""));
	assert_false(master_host_id_ok(NULL));
	assert_false(master_host_id_ok("a b"));
	assert_false(master_host_id_ok("a/b"));
	assert_false(master_host_id_ok("h\xc3\xa9"));
	assert_true(master_host_id_ok("012345678901234567890123456789012345678"
				      "901234567890123456789012"));
	assert_false(master_host_id_ok("01234567890123456789012345678901234567"
				       "8901234567890123456789012X"));
}

/* $TAPSTRIPE_HOST_ID, else the file's first line, else the host name. */
static void test_host_id_default(void **state)
{
	char dir[] = "/tmp/test_hostid.XXXXXX", path[64],
	     id[MASTER_HOST_ID_SIZE];
	char msg[256], name[256] = "";
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/host-id", dir);
	unsetenv(MASTER_HOST_ID_ENV);
	/* no file: the host name */
	assert_int_equal(master_host_id_default(path, id, msg, sizeof(msg)), 0);
	gethostname(name, sizeof(name));
	assert_string_equal(id, name);
	/* the file, blanks around it ignored */
	assert_non_null(f = fopen(path, "w"));
	fputs("  node-7.rack2 \n# a comment line is not read\n", f);
	fclose(f);
	assert_int_equal(master_host_id_default(path, id, msg, sizeof(msg)), 0);
	assert_string_equal(id, "node-7.rack2");
	/* the environment first */
	setenv(MASTER_HOST_ID_ENV, "from-env", 1);
	assert_int_equal(master_host_id_default(path, id, msg, sizeof(msg)), 0);
	assert_string_equal(id, "from-env");
	setenv(MASTER_HOST_ID_ENV, "bad id", 1);
	assert_int_equal(master_host_id_default(path, id, msg, sizeof(msg)),
			 -EINVAL);
	assert_non_null(strstr(msg, "$" MASTER_HOST_ID_ENV));
	unsetenv(MASTER_HOST_ID_ENV);
	/* a malformed file is refused, naming it */
	assert_non_null(f = fopen(path, "w"));
	fputs("not/valid\n", f);
	fclose(f);
	assert_int_equal(master_host_id_default(path, id, msg, sizeof(msg)),
			 -EINVAL);
	assert_non_null(strstr(msg, path));
	unlink(path);
	rmdir(dir);
}

static void test_lease_status_errno(void **state)
{
	assert_int_equal(master_status_errno(MS_EHELD), -EBUSY);
	assert_int_equal(master_status_errno(MS_ESTALE), -ESTALE);
	assert_string_equal(master_status_name(MS_EHELD), "EHELD");
	assert_string_equal(master_status_name(MS_ESTALE), "ESTALE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_hostport),
		cmocka_unit_test(test_port_zero_for_listeners),
		cmocka_unit_test(test_open_bad_address),
		cmocka_unit_test(test_nobody_listens),
		cmocka_unit_test(test_nobody_answers),
		cmocka_unit_test(test_status_errno),
		cmocka_unit_test(test_reply_helpers),
		cmocka_unit_test(test_host_id_rule),
		cmocka_unit_test(test_host_id_default),
		cmocka_unit_test(test_lease_status_errno),
	};

	signal(SIGPIPE, SIG_IGN);
	td_log_set_level(TD_LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
