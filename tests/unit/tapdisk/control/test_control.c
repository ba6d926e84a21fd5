/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_control.c - the control socket: framing, parsing, dispatch, pause
 * and destroy semantics, and the client side's reply parser.
 *
 * Clients are socketpairs handed to td_ctl_server_add_client, driven by
 * running the event loop by hand; the vbd is a real one over the null
 * driver, or over "hold", a driver local to this file that keeps requests
 * until the test completes them, so a drain can be watched step by step.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
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

#include "drivers/drivers.h"
#include "frontends/nbd/nbd.h"
#include "frontends/shm/shm.h"
#include "frontends/xen/xen.h"
#include "tapdisk/control/control.h"
#include "tapdisk/stats-format.h"
#include "common/util.h"

#define PASS_TIMEOUT_MS	  5
#define MAX_PASSES	  400
#define HOLD_MAX	  64
#define HOLD_SIZE_SECTORS 2048
#define CLIENT_BUF	  (256 * 1024)

/* --- "hold": completes requests only when the test says so ------------------ */

static struct td_request *held[HOLD_MAX];
static int nr_held;

static int hold_open(struct td_driver *drv, const char *args)
{
	drv->info.size_sectors = HOLD_SIZE_SECTORS;
	drv->info.features = TD_FEAT_FLUSH;
	return 0;
}

static void hold_close(struct td_driver *drv)
{
}

static int hold_submit(struct td_driver *drv, struct td_request *req)
{
	if (nr_held == HOLD_MAX)
		return -EBUSY;
	held[nr_held++] = req;
	return 0;
}

static void hold_release_all(void)
{
	for (int i = 0; i < nr_held; i++)
		td_complete(held[i], 0);
	nr_held = 0;
}

static const struct td_driver_ops hold_ops = {
	.name = "hold",
	.open = hold_open,
	.close = hold_close,
	.submit = hold_submit,
};

static const struct td_driver_ops *const test_drivers[] = {
	&td_null_ops,
	&hold_ops,
	NULL,
};

/* --- fixture ----------------------------------------------------------------- */

struct client {
	int fd;
	char buf[CLIENT_BUF];
	size_t len;
};

struct fixture {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_ctl_server *ctl;
	int destroy_calls;
	struct client *clients[8];
	int nr_clients;
};

static void on_destroy(void *opaque)
{
	struct fixture *fx = opaque;

	fx->destroy_calls++;
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	assert_int_equal(td_loop_create(&fx->loop), 0);
	nr_held = 0;
	*state = fx;
	return 0;
}

static void run_passes(struct fixture *fx, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(td_loop_run_once(fx->loop, 0), 0);
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	struct td_vbd_stats st;

	for (int i = 0; i < fx->nr_clients; i++) {
		if (fx->clients[i]->fd >= 0)
			close(fx->clients[i]->fd);
		free(fx->clients[i]);
	}
	if (fx->ctl)
		td_ctl_server_destroy(fx->ctl);
	if (fx->vbd) {
		td_vbd_resume(fx->vbd);
		for (int i = 0; i < MAX_PASSES; i++) {
			hold_release_all();
			run_passes(fx, 1);
			td_vbd_get_stats(fx->vbd, &st);
			if (!st.inflight)
				break;
		}
		assert_int_equal(td_vbd_close(fx->vbd), 0);
	}
	run_passes(fx, 2);
	td_loop_destroy(fx->loop);
	free(fx);
	return 0;
}

/* The frontend kinds, as tapdisk's main passes them. */
static const struct td_frontend_ops *const test_frontends[] = {
	&td_nbd_frontend, &td_shm_frontend, &td_xen_frontend, NULL};

/* Open a vbd over chain and a control server listening nowhere. */
static void start(struct fixture *fx, const char *chain,
		  struct td_ctl_params *params)
{
	struct td_vbd_params vp = {.name = "ctl-test", .chain = chain};
	struct td_ctl_params defaults = {0};

	assert_int_equal(td_vbd_open(fx->loop, test_drivers, &vp, &fx->vbd), 0);
	if (!params)
		params = &defaults;
	params->vbd = fx->vbd;
	if (!params->frontend_table)
		params->frontend_table = test_frontends;
	assert_int_equal(td_ctl_server_create(fx->loop, params, &fx->ctl), 0);
}

static struct client *connect_client(struct fixture *fx)
{
	struct client *cl = calloc(1, sizeof(*cl));
	int sv[2];

	assert_non_null(cl);
	assert_int_equal(socketpair(AF_UNIX,
				    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
				    0, sv),
			 0);
	cl->fd = sv[0];
	assert_int_equal(td_ctl_server_add_client(fx->ctl, sv[1]), 0);
	fx->clients[fx->nr_clients++] = cl;
	return cl;
}

static void send_raw(struct client *cl, const void *data, size_t len)
{
	assert_int_equal(send(cl->fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void send_str(struct client *cl, const char *s)
{
	send_raw(cl, s, strlen(s));
}

/* Read what is there; returns false at EOF. */
static bool client_fill(struct client *cl)
{
	for (;;) {
		ssize_t n = recv(cl->fd, cl->buf + cl->len,
				 sizeof(cl->buf) - 1 - cl->len, 0);

		if (n > 0) {
			cl->len += (size_t)n;
			continue;
		}
		if (n == 0)
			return false;
		assert_true(errno == EAGAIN || errno == ECONNRESET);
		return errno == EAGAIN;
	}
}

/* Length of the first complete reply in cl->buf, or 0. */
static size_t complete_reply(struct client *cl)
{
	char *lf = memchr(cl->buf, '\n', cl->len);
	char line[TD_CTL_LINE_MAX];
	struct td_ctl_reply r;
	size_t head, payload = 0;

	if (!lf)
		return 0;
	head = (size_t)(lf - cl->buf);
	assert_true(head < sizeof(line));
	memcpy(line, cl->buf, head);
	line[head] = '\0';
	td_ctl_reply_init(&r);
	assert_int_equal(td_ctl_parse_status(line, &r, &payload), 0);
	td_ctl_reply_free(&r);
	return cl->len >= head + 1 + payload ? head + 1 + payload : 0;
}

/* Run the loop until a whole reply has arrived; returns it (free it). */
static char *get_reply(struct fixture *fx, struct client *cl)
{
	for (int i = 0; i < MAX_PASSES; i++) {
		size_t n;

		client_fill(cl);
		n = complete_reply(cl);
		if (n) {
			char *r = strndup(cl->buf, n);

			cl->len -= n;
			memmove(cl->buf, cl->buf + n, cl->len);
			return r;
		}
		assert_int_equal(td_loop_run_once(fx->loop, PASS_TIMEOUT_MS),
				 0);
	}
	fail_msg("no reply");
	return NULL;
}

static char *call(struct fixture *fx, struct client *cl, const char *line)
{
	send_str(cl, line);
	return get_reply(fx, cl);
}

static void expect_prefix(char *reply, const char *prefix)
{
	if (strncmp(reply, prefix, strlen(prefix)))
		fail_msg("reply '%s' does not start with '%s'", reply, prefix);
	free(reply);
}

static void expect_contains(char *reply, const char *needle)
{
	if (!strstr(reply, needle))
		fail_msg("reply '%s' lacks '%s'", reply, needle);
	free(reply);
}

/* Nothing arrives within a few passes. */
static void expect_silence(struct fixture *fx, struct client *cl)
{
	run_passes(fx, 5);
	assert_true(client_fill(cl));
	assert_int_equal(cl->len, 0);
}

/* The server closes the connection (after any reply already read). */
static void expect_closed(struct fixture *fx, struct client *cl)
{
	for (int i = 0; i < MAX_PASSES; i++) {
		if (!client_fill(cl))
			return;
		assert_int_equal(td_loop_run_once(fx->loop, PASS_TIMEOUT_MS),
				 0);
	}
	fail_msg("connection still open");
}

static void submit_read(struct fixture *fx, struct td_vbd_io *io,
			struct iovec *iov, void *buf, td_vbd_io_cb cb)
{
	iov->iov_base = buf;
	iov->iov_len = 8 * TD_SECTOR_SIZE;
	memset(io, 0, sizeof(*io));
	io->op = TD_OP_READ;
	io->nr_sectors = 8;
	io->iov = iov;
	io->iovcnt = 1;
	io->cb = cb;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
}

static int io_done_count;
static void io_done(struct td_vbd_io *io, int err)
{
	assert_int_equal(err, 0);
	io_done_count++;
}

/* --- framing and dispatch -------------------------------------------------- */

static void test_info_text(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;
	char *r;

	start(fx, "null:size=1M", NULL);
	assert_int_equal(
		td_ctl_server_add_frontend(fx->ctl, "nbd", "unix:/tmp/x.sock"),
		0);
	cl = connect_client(fx);
	r = call(fx, cl, "info\n");
	assert_non_null(strstr(r, "name: ctl-test\n"));
	assert_non_null(strstr(r, "chain: null:size=1M\n"));
	assert_non_null(strstr(r, "state: running\n"));
	assert_non_null(strstr(r, "size_bytes: 1048576\n"));
	assert_non_null(
		strstr(r, "features: flush fua discard write_zeroes\n"));
	expect_contains(r, "frontend: nbd unix:/tmp/x.sock\n");
	expect_contains(call(fx, cl, "info json\n"), "\"size_bytes\": 1048576");
}

static void test_stats_json(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;
	char *r;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	r = call(fx, cl, "stats json\n");
	assert_non_null(strstr(r, "\n{\n"));
	assert_non_null(strstr(r, "\"requests_total\": 0"));
	assert_non_null(strstr(r, "\"backend_submits\": 0"));
	assert_non_null(strstr(r, "\"p99_9\": 0"));
	expect_contains(r, "\"nbd\": null,\n  \"shm\": null,\n  "
			   "\"xen\": null,\n  \"cpu_us\"");
	expect_contains(call(fx, cl, "stats\n"), "segments per request");
}

/* The Prometheus text of one tapdisk: families with HELP and TYPE, each
 * sample labelled with the disk; one 4 KiB read counted. */
/* Like expect_contains, keeping reply. */
static void assert_contains(const char *reply, const char *needle)
{
	if (!strstr(reply, needle))
		fail_msg("reply '%s' lacks '%s'", reply, needle);
}

static void test_stats_metrics(void **state)
{
	struct fixture *fx = *state;
	struct td_vbd_io io;
	struct iovec iov;
	char buf[4096];
	struct client *cl;
	char *r;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	io_done_count = 0;
	submit_read(fx, &io, &iov, buf, io_done);
	run_passes(fx, 3);
	assert_int_equal(io_done_count, 1);
	r = call(fx, cl, "stats metrics\n");
	assert_int_equal(strncmp(r, "OK ", 3), 0);
	assert_contains(r, "\n# HELP tapstripe_io_requests_total I/Os "
			   "completed, by op\n"
			   "# TYPE tapstripe_io_requests_total counter\n"
			   "tapstripe_io_requests_total{disk=\"ctl-test\","
			   "op=\"read\"} 1\n"
			   "tapstripe_io_requests_total{disk=\"ctl-test\","
			   "op=\"write\"} 0\n");
	assert_contains(r, "tapstripe_io_bytes_total{disk=\"ctl-test\","
			   "op=\"read\"} 4096\n");
	assert_contains(r, "# TYPE tapstripe_io_latency_seconds histogram\n"
			   "tapstripe_io_latency_seconds_bucket{disk=\"ctl-"
			   "test\",le=\"0.000007\"} ");
	assert_contains(r, "tapstripe_io_latency_seconds_bucket{disk=\"ctl-"
			   "test\",le=\"8589.934591\"} 1\n"
			   "tapstripe_io_latency_seconds_bucket{disk=\"ctl-"
			   "test\",le=\"+Inf\"} 1\n"
			   "tapstripe_io_latency_seconds_count{disk=\"ctl-"
			   "test\"} 1\n");
	assert_contains(r, "tapstripe_driver_events_total{disk=\"ctl-test\","
			   "counter=\"backend_submits\"} ");
	assert_contains(r, "# TYPE tapstripe_uptime_seconds gauge\n");
	free(r);
	expect_contains(call(fx, cl, "stats json\n"),
			"\"latency_buckets_us\": [\n    {\n      \"max_us\": ");
}

static void test_unknown_command_keeps_connection(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	expect_prefix(call(fx, cl, "frobnicate now\n"),
		      "ERR ENOSYS unknown command 'frobnicate'");
	expect_prefix(call(fx, cl, "INFO\n"), "ERR ENOSYS");
	expect_prefix(call(fx, cl, "info\n"), "OK ");
	expect_contains(call(fx, cl, "help\n"), "destroy");
}

static void test_bad_arguments(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	expect_prefix(call(fx, cl, "stats xml\n"),
		      "ERR EINVAL unknown argument 'xml'; usage: stats "
		      "[json|metrics]");
	expect_prefix(call(fx, cl, "pause now\n"), "ERR EINVAL usage: pause");
	expect_prefix(call(fx, cl, "info json json\n"), "ERR EINVAL");
	expect_prefix(call(fx, cl, "a b c d e f g h i j k l m n o p q\n"),
		      "ERR E2BIG");
	expect_prefix(call(fx, cl, "info\n"), "OK ");
}

static void test_garbage_drops_client_only(void **state)
{
	static const char garbage[] = {'i', 0x01, (char)0xff, 'x', '\n'};
	struct fixture *fx = *state;
	struct client *bad, *good;

	start(fx, "null:size=1M", NULL);
	bad = connect_client(fx);
	good = connect_client(fx);
	send_raw(bad, garbage, sizeof(garbage));
	expect_prefix(get_reply(fx, bad),
		      "ERR EPROTO byte 0x01 at offset 1 is not printable");
	expect_closed(fx, bad);
	expect_prefix(call(fx, good, "info\n"), "OK ");
}

static void test_long_line(void **state)
{
	struct fixture *fx = *state;
	char line[TD_CTL_LINE_MAX + 100];
	struct client *cl;

	start(fx, "null:size=1M", NULL);
	/* The longest line allowed: parsed (as an unknown command). */
	cl = connect_client(fx);
	memset(line, 'a', TD_CTL_LINE_MAX - 1);
	line[TD_CTL_LINE_MAX - 1] = '\n';
	send_raw(cl, line, TD_CTL_LINE_MAX);
	expect_prefix(get_reply(fx, cl), "ERR ENOSYS");
	/* One byte more: refused and dropped, even with no newline yet. */
	memset(line, 'b', sizeof(line));
	send_raw(cl, line, sizeof(line));
	expect_prefix(get_reply(fx, cl), "ERR E2BIG request line too long");
	expect_closed(fx, cl);
}

static void test_empty_lines_crlf_and_partial(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	send_str(cl, "\n\r\n  \t \nin");
	expect_silence(fx, cl);
	send_str(cl, "fo\r\n");
	expect_prefix(get_reply(fx, cl), "OK ");
	expect_silence(fx, cl);
}

static void test_pipelined_requests_answered_in_order(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	send_str(cl, "help\nnope\ninfo\nstats json\n");
	expect_contains(get_reply(fx, cl), "control protocol");
	expect_prefix(get_reply(fx, cl), "ERR ENOSYS");
	expect_contains(get_reply(fx, cl), "name: ctl-test");
	expect_contains(get_reply(fx, cl), "\"requests_total\"");
}

static void test_half_close_and_unterminated(void **state)
{
	struct fixture *fx = *state;
	struct client *a, *b;

	start(fx, "null:size=1M", NULL);
	a = connect_client(fx);
	send_str(a, "info\n");
	shutdown(a->fd, SHUT_WR);
	expect_prefix(get_reply(fx, a), "OK ");
	expect_closed(fx, a);

	b = connect_client(fx);
	send_str(b, "info");
	shutdown(b->fd, SHUT_WR);
	expect_prefix(get_reply(fx, b),
		      "ERR EPROTO request not ended by a newline");
	expect_closed(fx, b);
}

static void test_random_input_never_harms_the_server(void **state)
{
	struct fixture *fx = *state;
	unsigned int seed = 12345;
	struct client *good;

	start(fx, "null:size=1M", NULL);
	good = connect_client(fx);
	for (int round = 0; round < 50; round++) {
		struct client *cl = connect_client(fx);
		char buf[700];
		size_t len = (size_t)(rand_r(&seed) % sizeof(buf)) + 1;

		for (size_t i = 0; i < len; i++) {
			int r = rand_r(&seed) % 8;

			buf[i] = r == 0	  ? '\n'
				 : r == 1 ? (char)(rand_r(&seed) & 0xff)
				 : r == 2 ? ' '
					  : "infostaphelpdruj"[rand_r(&seed) %
							       16];
		}
		send_raw(cl, buf, len);
		run_passes(fx, 3);
		close(cl->fd);
		cl->fd = -1;
		run_passes(fx, 2);
		fx->nr_clients--;
		free(cl);
	}
	expect_prefix(call(fx, good, "info\n"), "OK ");
}

static void test_max_clients(void **state)
{
	struct fixture *fx = *state;
	struct td_ctl_params p = {.max_clients = 2};
	struct client *a, *b;
	char buf[128];
	ssize_t n;
	int sv[2];

	start(fx, "null:size=1M", &p);
	a = connect_client(fx);
	b = connect_client(fx);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(td_ctl_server_add_client(fx->ctl, sv[1]), -EBUSY);
	n = recv(sv[0], buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "ERR EBUSY too many control connections; "
				 "try again later\n");
	assert_int_equal(recv(sv[0], buf, sizeof(buf), 0), 0);
	close(sv[0]);
	expect_prefix(call(fx, a, "info\n"), "OK ");
	expect_prefix(call(fx, b, "info\n"), "OK ");
}

static void test_idle_client_is_closed(void **state)
{
	struct fixture *fx = *state;
	struct td_ctl_params p = {.idle_timeout_ms = 20};
	struct client *cl;

	start(fx, "null:size=1M", &p);
	cl = connect_client(fx);
	expect_prefix(call(fx, cl, "info\n"), "OK ");
	expect_closed(fx, cl);
}

/* Whether the server has closed cl's connection, without reading it. */
static bool hung_up(struct client *cl)
{
	struct pollfd pfd = {.fd = cl->fd, .events = POLLRDHUP};

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP));
}

/* Run the loop for about ms milliseconds. */
static void run_for_ms(struct fixture *fx, unsigned int ms)
{
	uint64_t end = td_now_ns() + (uint64_t)ms * 1000000;

	while (td_now_ns() < end)
		assert_int_equal(td_loop_run_once(fx->loop, 1), 0);
}

/* A line left unfinished is answered ETIMEDOUT and closed after the
 * partial-line timeout, counted from its first byte; a connection with
 * nothing in progress keeps the (longer) idle timeout. */
static void test_partial_line_times_out(void **state)
{
	struct fixture *fx = *state;
	/* 400 ms: far above the 80 ms the test spends before checking that
	 * the line is still open, so that a loaded machine cannot fail it */
	struct td_ctl_params p = {.idle_timeout_ms = 60000,
				  .partial_timeout_ms = 400};
	struct client *partial, *idle;
	uint64_t t0;

	start(fx, "null:size=1M", &p);
	partial = connect_client(fx);
	idle = connect_client(fx);
	t0 = td_now_ns();
	send_str(partial, "sta");
	run_for_ms(fx, 50);
	send_str(partial, "ts"); /* more bytes do not restart the clock */
	run_for_ms(fx, 30);
	assert_false(hung_up(partial));
	expect_contains(get_reply(fx, partial),
			"ERR ETIMEDOUT request line not finished within 400 ms "
			"of its first byte\n");
	assert_true(td_now_ns() - t0 >= 400 * 1000000ull);
	expect_closed(fx, partial);
	assert_false(hung_up(idle));
	expect_prefix(call(fx, idle, "info\n"), "OK ");
	/* a line finished in time is served, and the clock starts again */
	send_str(idle, "in");
	run_for_ms(fx, 60);
	expect_prefix(call(fx, idle, "fo\n"), "OK ");
	send_str(idle, "in");
	run_for_ms(fx, 60);
	expect_prefix(call(fx, idle, "fo\n"), "OK ");
}

/* A client that sends requests and never reads the replies is closed once
 * a reply has waited partial_timeout_ms for it. */
static void test_unread_replies_time_out(void **state)
{
	struct fixture *fx = *state;
	struct td_ctl_params p = {.partial_timeout_ms = 50};
	static char lines[400 * 6 + 1];
	struct client *cl, *other;

	start(fx, "null:size=1M", &p);
	cl = connect_client(fx);
	other = connect_client(fx);
	/* 400 replies of 2 KiB or more: more than a socket buffer holds */
	for (int i = 0; i < 400; i++)
		memcpy(lines + 6 * i, "stats\n", 6);
	send_str(cl, lines);
	for (int i = 0; i < MAX_PASSES && !hung_up(cl); i++)
		assert_int_equal(td_loop_run_once(fx->loop, PASS_TIMEOUT_MS),
				 0);
	assert_true(hung_up(cl));
	expect_prefix(call(fx, other, "info\n"), "OK ");
}

/* Every slot taken: a newcomer takes the place of the connection quiet
 * longest that has no request in progress; never of one active lately. */
static void test_full_evicts_the_quietest(void **state)
{
	struct fixture *fx = *state;
	/* 1 s quiet: c and d, active since, stay safe however loaded the
	 * machine is between their last request and the refusal */
	struct td_ctl_params p = {.max_clients = 2, .evict_quiet_ms = 1000};
	struct client *a, *b, *c, *d;
	char buf[256];
	ssize_t n;
	int sv[2];

	start(fx, "null:size=1M", &p);
	a = connect_client(fx);
	b = connect_client(fx);
	send_str(b, "inf"); /* a line begun, after a connected */
	run_for_ms(fx, 1100);
	c = connect_client(fx); /* takes a's place: quiet longest */
	n = recv(a->fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "ERR EBUSY too many control connections: "
				    "this one had no request in progress"));
	expect_closed(fx, a);
	expect_prefix(call(fx, c, "info\n"), "OK ");
	/* c was active just now, b's line is 1.1 s old: b goes */
	d = connect_client(fx);
	expect_closed(fx, b);
	expect_prefix(call(fx, d, "info\n"), "OK ");
	/* c and d active within 1 s: refused */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(td_ctl_server_add_client(fx->ctl, sv[1]), -EBUSY);
	close(sv[0]);
	expect_prefix(call(fx, c, "info\n"), "OK ");
}

/* A refusal written before the client could send (EPIPE) is read and
 * returned, not the EPIPE. */
static void test_client_reads_refusal(void **state)
{
	static const char refusal[] = "ERR EBUSY too many control connections; "
				      "try again later\n";
	struct td_ctl_reply r;
	int sv[2];

	td_ctl_reply_init(&r);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(write(sv[1], refusal, sizeof(refusal) - 1),
			 (ssize_t)sizeof(refusal) - 1);
	close(sv[1]);
	assert_int_equal(td_ctl_request(sv[0], "stats", 1000, &r), 0);
	assert_int_equal(r.err, -EBUSY);
	assert_string_equal(r.message, "too many control connections; try "
				       "again later");
	assert_true(td_ctl_reply_refused(&r));
	close(sv[0]);
	/* a server gone without a word: the send's error */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(td_ctl_request(sv[0], "stats", 1000, &r), -EPIPE);
	assert_false(td_ctl_reply_refused(&r));
	close(sv[0]);
	td_ctl_reply_free(&r);
}

/* --- pause and resume -------------------------------------------------------- */

static void test_pause_replies_after_drain(void **state)
{
	struct fixture *fx = *state;
	struct td_vbd_io io1, io2;
	struct iovec iov1, iov2;
	char buf1[4096], buf2[4096];
	struct client *ctl_cl, *watcher;
	char *r;

	start(fx, "hold", NULL);
	ctl_cl = connect_client(fx);
	watcher = connect_client(fx);
	io_done_count = 0;
	submit_read(fx, &io1, &iov1, buf1, io_done);
	run_passes(fx, 1);
	assert_int_equal(nr_held, 1);

	send_str(ctl_cl, "pause\n");
	expect_silence(fx, ctl_cl); /* io1 still in flight */
	r = call(fx, watcher, "stats json\n");
	assert_non_null(strstr(r, "\"state\": \"pausing\""));
	expect_contains(r, "\"inflight\": 1");

	hold_release_all();
	expect_prefix(get_reply(fx, ctl_cl), "OK ");
	assert_int_equal(io_done_count, 1); /* completed before the reply */

	/* Paused: new I/O is accepted and held, never reaching the driver. */
	submit_read(fx, &io2, &iov2, buf2, io_done);
	run_passes(fx, 5);
	assert_int_equal(nr_held, 0);
	r = call(fx, watcher, "stats json\n");
	assert_non_null(strstr(r, "\"state\": \"paused\""));
	expect_contains(r, "\"inflight\": 1");

	expect_prefix(call(fx, ctl_cl, "resume\n"), "OK 8\nresumed\n");
	run_passes(fx, 2);
	assert_int_equal(nr_held, 1);
	hold_release_all();
	run_passes(fx, 3);
	assert_int_equal(io_done_count, 2);
	r = call(fx, watcher, "stats json\n");
	assert_non_null(strstr(r, "\"state\": \"running\""));
	assert_non_null(strstr(r, "\"inflight\": 0"));
	expect_contains(r, "\"requests_total\": 2");
}

static void test_pause_twice_resume_twice(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	expect_prefix(call(fx, cl, "pause\n"), "OK ");
	expect_prefix(call(fx, cl, "pause\n"),
		      "ERR EALREADY the vbd is already paused");
	expect_contains(call(fx, cl, "info\n"), "state: paused\n");
	expect_prefix(call(fx, cl, "resume\n"), "OK ");
	expect_prefix(call(fx, cl, "resume\n"),
		      "ERR EALREADY the vbd is not paused");
}

static void test_resume_cancels_pending_pause(void **state)
{
	struct fixture *fx = *state;
	struct td_vbd_io io;
	struct iovec iov;
	char buf[4096];
	struct client *a, *b;

	start(fx, "hold", NULL);
	a = connect_client(fx);
	b = connect_client(fx);
	submit_read(fx, &io, &iov, buf, io_done);
	run_passes(fx, 1);
	send_str(a, "pause\n");
	expect_silence(fx, a);
	expect_prefix(call(fx, b, "pause\n"),
		      "ERR EALREADY a pause is already in progress");
	expect_contains(call(fx, b, "resume\n"), "pause in progress was "
						 "cancelled");
	expect_prefix(get_reply(fx, a), "ERR ECANCELED pause cancelled");
	hold_release_all();
	run_passes(fx, 3);
	expect_contains(call(fx, a, "info\n"), "state: running\n");
}

static void test_pause_client_gone_before_drain(void **state)
{
	struct fixture *fx = *state;
	struct td_vbd_io io;
	struct iovec iov;
	char buf[4096];
	struct client *a, *b;

	start(fx, "hold", NULL);
	a = connect_client(fx);
	b = connect_client(fx);
	submit_read(fx, &io, &iov, buf, io_done);
	run_passes(fx, 1);
	send_str(a, "pause\n");
	run_passes(fx, 2);
	close(a->fd);
	a->fd = -1;
	run_passes(fx, 2);
	hold_release_all();
	run_passes(fx, 3);
	expect_contains(call(fx, b, "info\n"), "state: paused\n");
	expect_prefix(call(fx, b, "resume\n"), "OK ");
}

/* --- destroy ------------------------------------------------------------------ */

static void test_destroy_replies_at_finish(void **state)
{
	struct fixture *fx = *state;
	struct td_ctl_params p = {.destroy = on_destroy, .opaque = fx};
	struct client *a, *b, *c, *late;

	start(fx, "null:size=1M", &p);
	a = connect_client(fx);
	b = connect_client(fx);
	c = connect_client(fx);
	send_str(a, "destroy\n");
	expect_silence(fx, a);
	assert_int_equal(fx->destroy_calls, 1);
	send_str(b, "destroy\n");
	expect_silence(fx, b);
	assert_int_equal(fx->destroy_calls, 1); /* asked once */
	expect_prefix(call(fx, c, "pause\n"), "ERR ESHUTDOWN");
	expect_contains(call(fx, c, "info\n"), "state: stopping\n");

	td_ctl_server_finish(fx->ctl, 0, "flushed");
	expect_prefix(get_reply(fx, a), "OK 8\nflushed\n");
	expect_closed(fx, a);
	expect_prefix(get_reply(fx, b), "OK 8\nflushed\n");
	expect_closed(fx, b);
	expect_prefix(call(fx, c, "info\n"), "ERR ESHUTDOWN");
	late = connect_client(fx);
	expect_prefix(call(fx, late, "stats\n"), "ERR ESHUTDOWN");
}

static void test_destroy_error_and_unsupported(void **state)
{
	struct fixture *fx = *state;
	struct td_ctl_params p = {.destroy = on_destroy, .opaque = fx};
	struct client *a;

	start(fx, "null:size=1M", &p);
	a = connect_client(fx);
	send_str(a, "destroy\n");
	expect_silence(fx, a);
	td_ctl_server_finish(fx->ctl, -EIO, "final flush failed");
	expect_prefix(get_reply(fx, a), "ERR EIO final flush failed\n");
}

static void test_destroy_unsupported(void **state)
{
	struct fixture *fx = *state;
	struct client *a;

	start(fx, "null:size=1M", NULL);
	a = connect_client(fx);
	expect_prefix(call(fx, a, "destroy\n"), "ERR EOPNOTSUPP");
}

static void test_shutdown_cancels_pause(void **state)
{
	struct fixture *fx = *state;
	struct td_vbd_io io;
	struct iovec iov;
	char buf[4096];
	struct client *a;

	start(fx, "hold", NULL);
	a = connect_client(fx);
	io_done_count = 0;
	submit_read(fx, &io, &iov, buf, io_done);
	run_passes(fx, 1);
	send_str(a, "pause\n");
	expect_silence(fx, a);
	td_ctl_server_begin_shutdown(fx->ctl);
	expect_prefix(get_reply(fx, a), "ERR ECANCELED");
	expect_prefix(call(fx, a, "resume\n"), "ERR ESHUTDOWN");
	expect_contains(call(fx, a, "info\n"), "state: stopping\n");
	/* The owner resumes the vbd so that the held I/O can finish. */
	assert_int_equal(td_vbd_resume(fx->vbd), 0);
	hold_release_all();
	run_passes(fx, 3);
	assert_int_equal(io_done_count, 1);
}

/* --- the listening socket, with a real client in a thread -------------------- */

struct thread_call {
	const char *path;
	const char *line;
	struct td_ctl_reply reply;
	int err;
	int done;
};

static void *client_thread(void *opaque)
{
	struct thread_call *tc = opaque;

	tc->err = td_ctl_call(tc->path, tc->line, 5000, &tc->reply);
	__atomic_store_n(&tc->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void threaded_call(struct fixture *fx, struct thread_call *tc)
{
	pthread_t th;

	tc->done = 0;
	assert_int_equal(pthread_create(&th, NULL, client_thread, tc), 0);
	while (!__atomic_load_n(&tc->done, __ATOMIC_ACQUIRE))
		assert_int_equal(td_loop_run_once(fx->loop, PASS_TIMEOUT_MS),
				 0);
	pthread_join(th, NULL);
}

static void make_stale_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sa.sun_path, path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

static void test_listen_and_call(void **state)
{
	struct fixture *fx = *state;
	char dir[] = "/tmp/test_control.XXXXXX", path[256];
	struct td_ctl_params p = {.path = path};
	struct thread_call tc = {.path = path, .line = "info"};
	struct stat st;

	td_ctl_reply_init(&tc.reply);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(td_ctl_socket_path(path, sizeof(path), dir, 42), 0);
	make_stale_socket(path); /* a dead tapdisk's: replaced */
	start(fx, "null:size=1M", &p);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	threaded_call(fx, &tc);
	assert_int_equal(tc.err, 0);
	assert_int_equal(tc.reply.err, 0);
	assert_non_null(strstr(td_strbuf_str(&tc.reply.payload),
			       "chain: null:size=1M\n"));
	tc.line = "bogus";
	threaded_call(fx, &tc);
	assert_int_equal(tc.err, 0);
	assert_int_equal(tc.reply.err, -ENOSYS);
	assert_string_equal(tc.reply.errname, "ENOSYS");
	td_ctl_reply_free(&tc.reply);

	td_ctl_server_destroy(fx->ctl);
	fx->ctl = NULL;
	assert_int_equal(stat(path, &st), -1); /* removed */
	assert_int_equal(rmdir(dir), 0);
}

static void test_listen_errors(void **state)
{
	struct fixture *fx = *state;
	char dir[] = "/tmp/test_control.XXXXXX", path[300];
	struct td_ctl_params p = {.path = path};
	struct td_vbd_params vp = {.name = "x", .chain = "null:size=1M"};
	struct td_ctl_server *ctl;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(td_vbd_open(fx->loop, test_drivers, &vp, &fx->vbd), 0);
	p.vbd = fx->vbd;
	snprintf(path, sizeof(path), "%s/%0200d.sock", dir, 7);
	assert_int_equal(td_ctl_server_create(fx->loop, &p, &ctl),
			 -ENAMETOOLONG);
	snprintf(path, sizeof(path), "%s/file.sock", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(td_ctl_server_create(fx->loop, &p, &ctl), -EEXIST);
	unlink(path);
	snprintf(path, sizeof(path), "%s/missing/x.sock", dir);
	assert_int_equal(td_ctl_server_create(fx->loop, &p, &ctl), -ENOENT);
	assert_int_equal(rmdir(dir), 0);
}

/* --- pure helpers ------------------------------------------------------------- */

static void test_parse_status(void **state)
{
	static const struct {
		const char *line;
		int ret;
		size_t len;
		int err;
		const char *message;
	} cases[] = {
		{"OK 0", 0, 0, 0, ""},
		{"OK 12", 0, 12, 0, ""},
		{"OK 1048576", 0, 1048576, 0, ""},
		{"OK 1048577", -EPROTO, 0, 0, ""},
		{"OK 99999999999999999999999", -EPROTO, 0, 0, ""},
		{"OK", -EPROTO, 0, 0, ""},
		{"OK ", -EPROTO, 0, 0, ""},
		{"OK -1", -EPROTO, 0, 0, ""},
		{"OK 1x", -EPROTO, 0, 0, ""},
		{"OK 1 ", -EPROTO, 0, 0, ""},
		{"ERR EINVAL bad thing", 0, 0, -EINVAL, "bad thing"},
		{"ERR ESHUTDOWN", 0, 0, -ESHUTDOWN, ""},
		{"ERR E42 what", 0, 0, -42, "what"},
		{"ERR EFROMTHEFUTURE x", 0, 0, -EIO, "x"},
		{"ERR", -EPROTO, 0, 0, ""},
		{"ERR  x", -EPROTO, 0, 0, ""},
		{"ERR oops x", -EPROTO, 0, 0, ""},
		{"ERR EAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA x", -EPROTO, 0, 0,
		 ""},
		{"ok 1", -EPROTO, 0, 0, ""},
		{"", -EPROTO, 0, 0, ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct td_ctl_reply r;
		size_t len = 77;

		td_ctl_reply_init(&r);
		assert_int_equal(td_ctl_parse_status(cases[i].line, &r, &len),
				 cases[i].ret);
		if (!cases[i].ret) {
			assert_int_equal(len, cases[i].len);
			assert_int_equal(r.err, cases[i].err);
			assert_string_equal(r.message, cases[i].message);
		}
		td_ctl_reply_free(&r);
	}
}

static void test_errno_names_and_paths(void **state)
{
	char buf[32], path[64];

	assert_string_equal(td_errno_name(-EINVAL, buf, sizeof(buf)), "EINVAL");
	assert_string_equal(td_errno_name(ENOTSUP, buf, sizeof(buf)),
			    "EOPNOTSUPP");
	assert_string_equal(td_errno_name(-4000, buf, sizeof(buf)), "E4000");
	assert_int_equal(td_errno_from_name("ECANCELED"), ECANCELED);
	assert_int_equal(td_errno_from_name("EBOGUS"), 0);

	unsetenv(TD_CTL_RUN_DIR_ENV);
	assert_string_equal(td_ctl_run_dir(NULL), TAPSTRIPE_RUNDIR);
	assert_string_equal(TAPSTRIPE_RUNDIR + strlen(TAPSTRIPE_RUNDIR) -
				    strlen("/tapstripe"),
			    "/tapstripe");
	setenv(TD_CTL_RUN_DIR_ENV, "/tmp/rd", 1);
	assert_string_equal(td_ctl_run_dir(NULL), "/tmp/rd");
	assert_string_equal(td_ctl_run_dir("/opt/x"), "/opt/x");
	unsetenv(TD_CTL_RUN_DIR_ENV);
	assert_int_equal(td_ctl_socket_path(path, sizeof(path), "/r", 17), 0);
	assert_string_equal(path, "/r/tapdisk-17.sock");
	assert_int_equal(td_ctl_socket_path(path, 10, "/r", 17), -ENAMETOOLONG);
}

static void test_make_run_dir(void **state)
{
	char dir[] = "/tmp/test_control.XXXXXX", path[128], file[160];
	struct stat st;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	assert_int_equal(td_ctl_make_run_dir(path), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(td_ctl_make_run_dir(path), 0); /* exists: fine */
	snprintf(file, sizeof(file), "%s/a/file", dir);
	f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/a/file/x", dir);
	assert_int_equal(td_ctl_make_run_dir(path), -ENOTDIR);
	unlink(file);
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/a", dir);
	rmdir(path);
	assert_int_equal(rmdir(dir), 0);
}

static void test_frontend_limits(void **state)
{
	struct fixture *fx = *state;
	char long_addr[TD_FRONTEND_ADDR_MAX + 1];

	start(fx, "null:size=1M", NULL);
	memset(long_addr, 'x', sizeof(long_addr) - 1);
	long_addr[sizeof(long_addr) - 1] = '\0';
	assert_int_equal(td_ctl_server_add_frontend(fx->ctl, "nbd", long_addr),
			 -ENAMETOOLONG);
	for (int i = 0; i < TD_CTL_MAX_FRONTENDS; i++)
		assert_int_equal(td_ctl_server_add_frontend(fx->ctl, "nbd",
							    "tcp::10809"),
				 0);
	assert_int_equal(td_ctl_server_add_frontend(fx->ctl, "nbd", "x"),
			 -E2BIG);
}

static void test_json_writer(void **state)
{
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_str(&j, "s", "a\"b\\c\n\x01");
	td_json_begin_array(&j, "empty");
	td_json_end_array(&j);
	td_json_u64(&j, "big", UINT64_MAX);
	td_json_i64(&j, "neg", -5);
	td_json_bool(&j, "t", true);
	td_json_str(&j, "n", NULL);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), 0);
	assert_string_equal(
		td_strbuf_str(&sb),
		"{\n  \"s\": \"a\\\"b\\\\c\\u000a\\u0001\",\n"
		"  \"empty\": [],\n"
		"  \"big\": 18446744073709551615,\n"
		"  \"neg\": -5,\n  \"t\": true,\n  \"n\": null\n}\n");

	td_strbuf_reset(&sb);
	td_json_init(&j, &sb);
	for (int i = 0; i <= TD_JSON_MAX_DEPTH; i++)
		td_json_begin_array(&j, NULL);
	assert_int_equal(td_json_finish(&j), -ENOMEM); /* too deep */

	td_strbuf_reset(&sb);
	td_json_init(&j, &sb);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), -ENOMEM); /* unbalanced */
	td_strbuf_free(&sb);
}

static void test_format_bytes_and_stats_text(void **state)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{1048576, "1.00 MiB"},
		{3ull << 30, "3.00 GiB"},
		{5ull << 40, "5.00 TiB"},
	};
	struct td_report r = {
		.pid = 7, .name = "v", .chain = "null:", .state = "running"};
	char buf[TD_HUMAN_BYTES_MAX];
	struct td_strbuf sb;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(
			td_format_bytes(cases[i].bytes, buf, sizeof(buf)),
			cases[i].text);

	r.stats.reqs[TD_OP_READ] = 4;
	r.stats.bytes[TD_OP_READ] = 1048576;
	r.stats.seg_hist[2] = 3;		  /* 3-4 segments */
	r.stats.seg_hist[TD_SEG_BUCKETS - 1] = 1; /* the open-ended one */
	r.stats.lat_hist[td_lat_bucket(100)] = 4;
	r.stats.counters[TD_STAT_BACKEND_SUBMITS] = 9;
	td_strbuf_init(&sb);
	assert_int_equal(td_format_stats_text(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "1.00 MiB"));
	snprintf(buf, sizeof(buf), "  %10s %14d\n", "3-4", 3);
	assert_non_null(strstr(sb.data, buf));
	snprintf(buf, sizeof(buf), "  %10s %14d\n", "2049+", 1);
	assert_non_null(strstr(sb.data, buf));
	assert_non_null(strstr(sb.data, "backend_submits"));
	assert_non_null(strstr(sb.data, "p50 103 "));
	td_strbuf_free(&sb);
}

/* A frontend kind that reports, and one that serves nothing here. */
static void mockfe_json(struct td_frontend *fe, struct td_json *j)
{
	td_json_u64(j, "clients_total", 3);
}

static void mockfe_text(struct td_frontend *fe, struct td_strbuf *sb)
{
	td_strbuf_puts(sb, "\nmockfe: 3 accepted\n");
}

/* "list" answers a line, anything else is refused with a reason. */
static int mockfe_control(struct td_frontend *fe, int argc, char **argv,
			  struct td_strbuf *out)
{
	if (argc == 1 && !strcmp(argv[0], "list")) {
		td_strbuf_puts(out, "1 connection\n");
		return 0;
	}
	td_strbuf_printf(out, "mockfe takes list, not %s", argv[0]);
	return -EINVAL;
}

static const struct td_frontend_ops mockfe_ops = {
	.name = "mockfe",
	.report_json = mockfe_json,
	.report_text = mockfe_text,
	.control = mockfe_control,
};
static const struct td_frontend_ops idlefe_ops = {.name = "idlefe"};

/* Each kind in the table's order: its report, or null when none serves. */
static void test_stats_frontends(void **state)
{
	static const struct td_frontend_ops *const kinds[] = {
		&mockfe_ops, &idlefe_ops, NULL};
	struct td_frontend fe = {.ops = &mockfe_ops};
	struct td_frontend *servers[] = {&fe};
	struct td_report r = {.pid = 7,
			      .name = "v",
			      .chain = "null:",
			      .state = "running",
			      .kinds = kinds,
			      .servers = servers,
			      .nr_servers = 1};
	struct td_strbuf sb;

	(void)state;
	td_strbuf_init(&sb);
	assert_int_equal(td_format_stats_text(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "\nmockfe: 3 accepted\n\ncpu: "));
	assert_null(strstr(sb.data, "idlefe"));
	td_strbuf_reset(&sb);
	assert_int_equal(td_format_stats_json(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "\"mockfe\": {\n    "
					"\"clients_total\": 3\n  },\n  "
					"\"idlefe\": null,\n  \"cpu_us\""));
	td_strbuf_reset(&sb);
	r.nr_servers = 0;
	assert_int_equal(td_format_stats_json(&r, &sb), 0);
	assert_non_null(strstr(sb.data, "\"mockfe\": null"));
	td_strbuf_free(&sb);
}

/* "poll [US] [json]": the loop's polling budget, switched at run time. */
static void test_poll_command(void **state)
{
	struct fixture *fx = *state;
	struct client *cl;

	start(fx, "null:size=1M", NULL);
	cl = connect_client(fx);
	expect_contains(call(fx, cl, "poll\n"), "budget_us: 0\n");
	expect_contains(call(fx, cl, "poll 150\n"), "budget_us: 150\n");
	assert_int_equal(td_loop_poll_budget(fx->loop), 150);
	expect_contains(call(fx, cl, "poll json\n"), "\"budget_us\"");
	expect_contains(call(fx, cl, "poll json\n"), "\"poll_us\"");
	expect_prefix(call(fx, cl, "poll 100001\n"),
		      "ERR EINVAL poll: '100001'");
	expect_prefix(call(fx, cl, "poll -5\n"), "ERR EINVAL");
	expect_prefix(call(fx, cl, "poll 1x\n"), "ERR EINVAL");
	expect_prefix(call(fx, cl, "poll 1 2\n"), "ERR EINVAL");
	assert_int_equal(td_loop_poll_budget(fx->loop), 150);
	expect_contains(call(fx, cl, "poll 0 json\n"), "\"budget_us\"");
	assert_int_equal(td_loop_poll_budget(fx->loop), 0);
}

/* "frontend KIND WORD...": the frontend's control op, or why not. */
static void test_frontend_command(void **state)
{
	static const struct td_frontend_ops *const kinds[] = {
		&mockfe_ops, &idlefe_ops, NULL};
	struct fixture *fx = *state;
	struct td_frontend mock = {.ops = &mockfe_ops};
	struct td_frontend idle = {.ops = &idlefe_ops};
	struct td_frontend *servers[] = {&mock, &idle};
	struct td_ctl_params p = {.frontend_table = kinds,
				  .frontends = servers,
				  .nr_frontends = 2};
	struct client *cl;

	start(fx, "null:size=1M", &p);
	cl = connect_client(fx);
	expect_prefix(call(fx, cl, "frontend mockfe list\n"),
		      "OK 13\n1 connection\n");
	expect_prefix(call(fx, cl, "frontend mockfe frob\n"),
		      "ERR EINVAL mockfe takes list, not frob\n");
	expect_prefix(call(fx, cl, "frontend idlefe list\n"),
		      "ERR EOPNOTSUPP the idlefe frontend takes no commands");
	expect_prefix(call(fx, cl, "frontend nbd list\n"),
		      "ERR ENOENT this tapdisk has no nbd frontend");
	expect_prefix(call(fx, cl, "frontend mockfe\n"),
		      "ERR EINVAL usage: frontend KIND WORD...");
	expect_contains(call(fx, cl, "help\n"), "frontend KIND WORD...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_info_text),
		T(test_stats_json),
		T(test_stats_metrics),
		T(test_unknown_command_keeps_connection),
		T(test_bad_arguments),
		T(test_garbage_drops_client_only),
		T(test_long_line),
		T(test_empty_lines_crlf_and_partial),
		T(test_pipelined_requests_answered_in_order),
		T(test_half_close_and_unterminated),
		T(test_random_input_never_harms_the_server),
		T(test_max_clients),
		T(test_idle_client_is_closed),
		T(test_partial_line_times_out),
		T(test_unread_replies_time_out),
		T(test_full_evicts_the_quietest),
		T(test_pause_replies_after_drain),
		T(test_pause_twice_resume_twice),
		T(test_resume_cancels_pending_pause),
		T(test_pause_client_gone_before_drain),
		T(test_destroy_replies_at_finish),
		T(test_destroy_error_and_unsupported),
		T(test_destroy_unsupported),
		T(test_shutdown_cancels_pause),
		T(test_listen_and_call),
		T(test_listen_errors),
		T(test_frontend_limits),
		T(test_stats_frontends),
		T(test_frontend_command),
		T(test_poll_command),
		cmocka_unit_test(test_parse_status),
		cmocka_unit_test(test_client_reads_refusal),
		cmocka_unit_test(test_errno_names_and_paths),
		cmocka_unit_test(test_make_run_dir),
		cmocka_unit_test(test_json_writer),
		cmocka_unit_test(test_format_bytes_and_stats_text),
#undef T
	};

	td_log_set_level(TD_LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
