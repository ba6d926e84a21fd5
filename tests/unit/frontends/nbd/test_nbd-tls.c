/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nbd-tls.c - access control of the NBD export (nbd-tls.c): the
 * parsers of --nbd-tls and --nbd-allow, address matching, the PSK file,
 * the option decisions of STARTTLS and require as a table, and the whole
 * STARTTLS exchange with a GnuTLS client in this process, over a
 * socketpair, the event loop driven by td_loop_run_once.
 *
 * Includes nbd-tls.c to reach its statics (the archive's copy is then
 * not linked).  Expected values are written by hand.
 */
#include "config.h"

#include <arpa/inet.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "drivers/drivers.h"
#include "frontends/nbd/nbd-tls.c"
#include "tapdisk/vbd.h"

#define KEY_HEX	     "00112233445566778899aabbccddeeff"
#define REP_ACK	     1u
#define ERR_UNSUP    0x80000001u
#define ERR_INVALID  0x80000003u
#define ERR_TLS_REQD 0x80000005u

static char psk_path[64];

/* A temporary file holding text; its name in path (64 bytes). */
static void write_file(char *path, const char *text)
{
	int fd;

	strcpy(path, "/tmp/test_nbd-tls.XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* --- parsers --------------------------------------------------------------------- */

static void test_parse_mode(void **state)
{
	static const struct {
		const char *text;
		int err;
		enum td_nbd_tls_mode mode;
	} rows[] = {
		{"off", 0, TD_NBD_TLS_OFF},
		{"on", 0, TD_NBD_TLS_ON},
		{"require", 0, TD_NBD_TLS_REQUIRE},
		{"", -EINVAL, 0},
		{"ON", -EINVAL, 0},
		{"required", -EINVAL, 0},
		{"yes", -EINVAL, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		enum td_nbd_tls_mode m = TD_NBD_TLS_OFF;

		assert_int_equal(td_nbd_tls_parse_mode(rows[i].text, &m),
				 rows[i].err);
		if (!rows[i].err)
			assert_int_equal(m, rows[i].mode);
	}
}

static void test_parse_cidr(void **state)
{
	static const struct {
		const char *text;
		int family;
		unsigned int bits;
		uint8_t addr[16];
	} good[] = {
		{"10.0.0.0/8", AF_INET, 8, {10}},
		{"192.0.2.7", AF_INET, 32, {192, 0, 2, 7}},
		{"0.0.0.0/0", AF_INET, 0, {0}},
		{"172.16.0.0/12", AF_INET, 12, {172, 16}},
		{"::1", AF_INET6, 128, {[15] = 1}},
		{"fd00::/8", AF_INET6, 8, {0xfd}},
		{"2001:db8::/32", AF_INET6, 32, {0x20, 0x01, 0x0d, 0xb8}},
	};
	static const char *const bad[] = {
		"",
		"/8",
		"10.0.0.0/",
		"10.0.0.0/33",
		"10.0.0.1/8",
		"10.0.0.0/-1",
		"10.0.0.0/8x",
		"10.0.0.0/ 8",
		"::1/129",
		"fd00::1/8",
		"host.example",
		"10.0.0",
		"1.2.3.4/08x",
	};
	struct td_nbd_cidr c;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(td_nbd_parse_cidr(good[i].text, &c), 0);
		assert_int_equal(c.family, good[i].family);
		assert_int_equal(c.prefix_bits, good[i].bits);
		assert_memory_equal(c.addr, good[i].addr,
				    good[i].family == AF_INET ? 4 : 16);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(td_nbd_parse_cidr(bad[i], &c), -EINVAL);
}

/* sa from a numeric address, v4 or v6. */
static void make_sa(struct sockaddr_storage *ss, const char *addr)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		return;
	}
	assert_int_equal(inet_pton(AF_INET6, addr, &s6->sin6_addr), 1);
	s6->sin6_family = AF_INET6;
}

static void test_cidr_match(void **state)
{
	static const struct {
		const char *cidr, *peer;
		bool match;
	} rows[] = {
		{"10.0.0.0/8", "10.255.1.2", true},
		{"10.0.0.0/8", "11.0.0.1", false},
		{"192.168.1.0/25", "192.168.1.127", true},
		{"192.168.1.0/25", "192.168.1.128", false},
		{"192.0.2.7", "192.0.2.7", true},
		{"192.0.2.7", "192.0.2.8", false},
		{"0.0.0.0/0", "203.0.113.9", true},
		{"127.0.0.1", "::ffff:127.0.0.1", true}, /* v4-mapped */
		{"127.0.0.1", "::1", false},
		{"::1", "::1", true},
		{"::1", "127.0.0.1", false},
		{"fd00::/8", "fd12:3456::1", true},
		{"fd00::/8", "fe80::1", false},
		{"2001:db8::/33", "2001:db8:7fff::1", true},
		{"2001:db8::/33", "2001:db8:8000::1", false},
	};
	struct sockaddr_storage ss;
	struct td_nbd_cidr c;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(td_nbd_parse_cidr(rows[i].cidr, &c), 0);
		make_sa(&ss, rows[i].peer);
		assert_int_equal(td_nbd_cidr_match(&c, (struct sockaddr *)&ss),
				 rows[i].match);
	}
}

static void test_loopback(void **state)
{
	static const struct {
		const char *addr;
		bool loopback;
	} rows[] = {
		{"127.0.0.1", true},	    {"127.5.6.7", true}, {"::1", true},
		{"::ffff:127.0.0.1", true}, {"0.0.0.0", false},	 {"::", false},
		{"10.0.0.1", false},	    {"fe80::1", false},
	};
	struct sockaddr_storage ss;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		make_sa(&ss, rows[i].addr);
		assert_int_equal(sockaddr_is_loopback((struct sockaddr *)&ss),
				 rows[i].loopback);
	}
}

/* --- the PSK file and the parameters ---------------------------------------------- */

static int create_with_psk(const char *text, struct nbd_tls_server **ts)
{
	struct td_nbd_access a = {.tls = TD_NBD_TLS_REQUIRE};
	char path[64];
	int err;

	write_file(path, text);
	a.tls_psk_file = path;
	err = nbd_tls_server_create(&a, ts);
	unlink(path);
	return err;
}

static void test_psk_file(void **state)
{
	static const char *const bad[] = {
		"",	      "\n\n",	       "alice\n",
		":00ff\n",    "alice:\n",      "alice:0\n",
		"alice:0g\n", "alice:00 11\n", "alice:00ff\nbob\n",
	};
	struct nbd_tls_server *ts;
	static const uint8_t key1[2] = {0x00, 0xff};

	/* Comments, blank lines, CRLF; a second line for another user. */
	assert_int_equal(create_with_psk("# keys\n\nalice:00FF\r\nbob:" KEY_HEX
					 "\n",
					 &ts),
			 0);
	assert_int_equal(ts->nr_keys, 2);
	assert_string_equal(ts->keys[0].user, "alice");
	assert_int_equal(ts->keys[0].key_bytes, 2);
	assert_memory_equal(ts->keys[0].key, key1, 2);
	assert_string_equal(ts->keys[1].user, "bob");
	assert_int_equal(ts->keys[1].key_bytes, 16);
	assert_int_equal(ts->keys[1].key[15], 0xff);
	assert_non_null(ts->psk);
	assert_null(ts->x509);
	nbd_tls_server_destroy(ts);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(create_with_psk(bad[i], &ts), -EINVAL);
}

static void test_params(void **state)
{
	struct td_nbd_access a = {.tls = TD_NBD_TLS_ON};
	struct nbd_tls_server *ts;

	/* TLS without credentials, credentials with TLS off. */
	assert_int_equal(nbd_tls_server_create(&a, &ts), -EINVAL);
	a.tls = TD_NBD_TLS_OFF;
	a.tls_psk_file = "/nonexistent";
	assert_int_equal(nbd_tls_server_create(&a, &ts), -EINVAL);
	a.tls = TD_NBD_TLS_REQUIRE;
	assert_int_equal(nbd_tls_server_create(&a, &ts), -ENOENT);
	/* An X.509 directory without the server's certificate. */
	a.tls_psk_file = NULL;
	a.tls_x509_dir = "/nonexistent";
	assert_int_equal(nbd_tls_server_create(&a, &ts), -EINVAL);
	/* Nothing at all: off, no allow-list. */
	assert_int_equal(nbd_tls_server_create(NULL, &ts), 0);
	assert_int_equal(ts->mode, TD_NBD_TLS_OFF);
	assert_int_equal(ts->nr_allow, 0);
	nbd_tls_server_destroy(ts);
}

/* --- the option decisions ---------------------------------------------------------- */

static void test_option_action(void **state)
{
	enum {
		OFF = TD_NBD_TLS_OFF,
		ON = TD_NBD_TLS_ON,
		REQ = TD_NBD_TLS_REQUIRE
	};
	enum { SERVE = NBD_TLS_SERVE, START = NBD_TLS_START };
	enum { REFUSE = NBD_TLS_REFUSE, CLOSE = NBD_TLS_CLOSE };
	/* mode, TLS on, option, length -> action, error */
	static const struct {
		int mode;
		bool on;
		uint32_t opt, len;
		int action;
		uint32_t err;
	} rows[] = {
		/* STARTTLS (5) */
		{OFF, false, 5, 0, REFUSE, ERR_UNSUP},
		{ON, false, 5, 0, START, 0},
		{REQ, false, 5, 0, START, 0},
		{REQ, false, 5, 3, REFUSE, ERR_INVALID},
		{ON, true, 5, 0, REFUSE, ERR_INVALID},
		{REQ, true, 5, 0, REFUSE, ERR_INVALID},
		/* GO (7), INFO (6), LIST (3), STRUCTURED_REPLY (8) */
		{OFF, false, 7, 10, SERVE, 0},
		{ON, false, 7, 10, SERVE, 0},
		{REQ, false, 7, 10, REFUSE, ERR_TLS_REQD},
		{REQ, false, 6, 10, REFUSE, ERR_TLS_REQD},
		{REQ, false, 3, 0, REFUSE, ERR_TLS_REQD},
		{REQ, false, 8, 0, REFUSE, ERR_TLS_REQD},
		{REQ, false, 1234, 0, REFUSE, ERR_TLS_REQD},
		{REQ, true, 7, 10, SERVE, 0},
		/* EXPORT_NAME (1): no error reply exists */
		{REQ, false, 1, 0, CLOSE, 0},
		{REQ, true, 1, 0, SERVE, 0},
		{ON, false, 1, 0, SERVE, 0},
		/* ABORT (2) is always served */
		{REQ, false, 2, 0, SERVE, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint32_t err = 0;
		const char *msg = NULL;
		enum nbd_tls_action a = nbd_tls_option_action(
			rows[i].mode, rows[i].on, rows[i].opt, rows[i].len,
			&err, &msg);

		assert_int_equal(a, rows[i].action);
		if (a == NBD_TLS_REFUSE) {
			assert_int_equal(err, rows[i].err);
			assert_non_null(msg);
		}
	}
}

/* --- a live server and a GnuTLS client ------------------------------------------------ */

static const struct td_driver_ops *const null_table[] = {&td_null_ops, NULL};

struct env {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_nbd_server *srv;
	int cfd;
	gnutls_session_t cs; /* the client's TLS, once started */
	gnutls_psk_client_credentials_t ccred;
};

/* The server's handshake timeout in env_start (0: the default). */
static uint32_t handshake_ms;

static void env_start(struct env *e, enum td_nbd_tls_mode mode)
{
	struct td_vbd_params vp = {.name = "tlstest", .chain = "null:size=4M"};
	struct td_nbd_access a = {.tls = mode, .tls_psk_file = psk_path};
	struct td_nbd_params np = {.access = &a,
				   .handshake_timeout_ms = handshake_ms};
	int sv[2];

	memset(e, 0, sizeof(*e));
	assert_int_equal(td_loop_create(&e->loop), 0);
	assert_int_equal(td_vbd_open(e->loop, null_table, &vp, &e->vbd), 0);
	assert_int_equal(td_nbd_server_create(e->loop, e->vbd, &np, &e->srv),
			 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(td_nbd_server_add_client(e->srv, sv[0], "test"), 0);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	e->cfd = sv[1];
}

static struct td_nbd_stats env_stats(struct env *e)
{
	struct td_nbd_stats st;

	td_nbd_server_get_stats(e->srv, &st);
	return st;
}

static void env_stop(struct env *e)
{
	if (e->cs)
		gnutls_deinit(e->cs);
	if (e->ccred)
		gnutls_psk_free_client_credentials(e->ccred);
	close(e->cfd);
	for (int i = 0; i < 100 && env_stats(e).clients; i++)
		td_loop_run_once(e->loop, 1);
	td_frontend_destroy(td_nbd_server_frontend(e->srv));
	assert_int_equal(td_vbd_close(e->vbd), 0);
	td_loop_destroy(e->loop);
}

/* 0: got n bytes; -1: end of stream or error; -2: nothing more came. */
static int cl_recv(struct env *e, void *buf, size_t n)
{
	size_t got = 0;

	for (int i = 0; i < 3000 && got < n; i++) {
		ssize_t r = e->cs ? gnutls_record_recv(e->cs, (char *)buf + got,
						       n - got)
				  : recv(e->cfd, (char *)buf + got, n - got,
					 MSG_DONTWAIT);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0 || (e->cs && r != GNUTLS_E_AGAIN) ||
		    (!e->cs && errno != EAGAIN))
			return -1;
		assert_int_equal(td_loop_run_once(e->loop, 1), 0);
	}
	return got == n ? 0 : -2;
}

static void cl_send(struct env *e, const void *buf, size_t n)
{
	size_t sent = 0;

	for (int i = 0; i < 100000 && sent < n; i++) {
		ssize_t r = e->cs ? gnutls_record_send(e->cs,
						       (const char *)buf + sent,
						       n - sent)
				  : send(e->cfd, (const char *)buf + sent,
					 n - sent, MSG_NOSIGNAL);

		if (r > 0)
			sent += (size_t)r;
		else
			assert_int_equal(td_loop_run_once(e->loop, 0), 0);
	}
	assert_int_equal(sent, n);
}

static void cl_greeting(struct env *e)
{
	uint8_t greeting[18], flags[4] = {0, 0, 0, 3};

	assert_int_equal(cl_recv(e, greeting, sizeof(greeting)), 0);
	assert_memory_equal(greeting, "NBDMAGICIHAVEOPT", 16);
	cl_send(e, flags, sizeof(flags));
}

static void cl_opt(struct env *e, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t hdr[16 + 64];

	assert_true(len <= 64);
	memcpy(hdr, "IHAVEOPT", 8);
	nbd_put32(hdr + 8, opt);
	nbd_put32(hdr + 12, len);
	if (len)
		memcpy(hdr + 16, data, len);
	cl_send(e, hdr, 16 + len);
}

/* The type of the next option reply (its body dropped). */
static uint32_t cl_reply(struct env *e, uint32_t opt)
{
	uint8_t hdr[20], body[512];
	uint32_t len;

	assert_int_equal(cl_recv(e, hdr, sizeof(hdr)), 0);
	assert_int_equal(nbd_get64(hdr), 0x0003e889045565a9ull);
	assert_int_equal(nbd_get32(hdr + 8), opt);
	len = nbd_get32(hdr + 16);
	assert_true(len <= sizeof(body));
	if (len)
		assert_int_equal(cl_recv(e, body, len), 0);
	return nbd_get32(hdr + 12);
}

/* NBD_OPT_GO for "": the final reply type. */
static uint32_t cl_go(struct env *e)
{
	static const uint8_t body[6] = {0, 0, 0, 0, 0, 0};
	uint32_t type;

	cl_opt(e, 7, body, sizeof(body));
	while ((type = cl_reply(e, 7)) == 3) /* NBD_REP_INFO */
		;
	return type;
}

static void cl_expect_eof(struct env *e)
{
	uint8_t b;

	assert_int_equal(cl_recv(e, &b, 1), -1);
}

/* The client side of the TLS handshake with key_hex for alice. */
static int cl_handshake(struct env *e, const char *key_hex)
{
	gnutls_datum_t key = {(unsigned char *)key_hex,
			      (unsigned int)strlen(key_hex)};
	int r;

	assert_int_equal(gnutls_psk_allocate_client_credentials(&e->ccred), 0);
	assert_int_equal(gnutls_psk_set_client_credentials(
				 e->ccred, "alice", &key, GNUTLS_PSK_KEY_HEX),
			 0);
	assert_int_equal(gnutls_init(&e->cs, GNUTLS_CLIENT | GNUTLS_NONBLOCK),
			 0);
	assert_int_equal(
		gnutls_priority_set_direct(e->cs, NBD_TLS_PRIORITY_PSK, NULL),
		0);
	gnutls_credentials_set(e->cs, GNUTLS_CRD_PSK, e->ccred);
	gnutls_transport_set_int(e->cs, e->cfd);
	for (int i = 0; i < 3000; i++) {
		r = gnutls_handshake(e->cs);
		if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED)
			return r;
		assert_int_equal(td_loop_run_once(e->loop, 1), 0);
	}
	return GNUTLS_E_TIMEDOUT;
}

static void test_require_then_starttls(void **state)
{
	uint8_t req[28], rep[16];
	static uint8_t data[1 << 20], zero[1 << 20];
	struct env e;

	env_start(&e, TD_NBD_TLS_REQUIRE);
	cl_greeting(&e);
	/* Before TLS: everything but STARTTLS is refused. */
	assert_int_equal(cl_go(&e), ERR_TLS_REQD);
	cl_opt(&e, 3, NULL, 0); /* LIST */
	assert_int_equal(cl_reply(&e, 3), ERR_TLS_REQD);
	cl_opt(&e, 5, "x", 1); /* STARTTLS with data */
	assert_int_equal(cl_reply(&e, 5), ERR_INVALID);
	cl_opt(&e, 5, NULL, 0);
	assert_int_equal(cl_reply(&e, 5), REP_ACK);
	assert_int_equal(cl_handshake(&e, KEY_HEX), 0);
	/* Inside TLS the haggling starts again. */
	cl_opt(&e, 5, NULL, 0);
	assert_int_equal(cl_reply(&e, 5), ERR_INVALID); /* already on */
	assert_true(nbd_tls_active(TAILQ_FIRST(&e.srv->conns)));
	assert_int_equal(cl_go(&e), REP_ACK);
	/* A 1 MiB WRITE and READ: payload and reply in many records, more
	 * than the socketpair holds. */
	memset(data, 0xa5, sizeof(data));
	memcpy(req, "\x25\x60\x95\x13\x00\x00\x00\x01", 8); /* WRITE */
	nbd_put64(req + 8, 42);
	nbd_put64(req + 16, 0);
	nbd_put32(req + 24, sizeof(data));
	cl_send(&e, req, sizeof(req));
	cl_send(&e, data, sizeof(data));
	assert_int_equal(cl_recv(&e, rep, sizeof(rep)), 0);
	assert_int_equal(nbd_get32(rep + 4), 0);
	assert_int_equal(nbd_get64(rep + 8), 42);
	nbd_put32(req + 4, 0); /* READ */
	nbd_put64(req + 8, 43);
	cl_send(&e, req, sizeof(req));
	assert_int_equal(cl_recv(&e, rep, sizeof(rep)), 0);
	assert_int_equal(nbd_get32(rep + 4), 0);
	assert_int_equal(nbd_get64(rep + 8), 43);
	assert_int_equal(cl_recv(&e, data, sizeof(data)), 0);
	assert_memory_equal(data, zero, sizeof(data)); /* the null disk */
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

static void test_wrong_key(void **state)
{
	struct env e;

	env_start(&e, TD_NBD_TLS_REQUIRE);
	cl_greeting(&e);
	cl_opt(&e, 5, NULL, 0);
	assert_int_equal(cl_reply(&e, 5), REP_ACK);
	assert_true(cl_handshake(&e, "ffeeddccbbaa99887766554433221100") < 0);
	for (int i = 0; i < 10; i++)
		td_loop_run_once(e.loop, 1);
	assert_int_equal(env_stats(&e).clients, 0);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
}

static void test_export_name_closes(void **state)
{
	struct env e;

	env_start(&e, TD_NBD_TLS_REQUIRE);
	cl_greeting(&e);
	cl_opt(&e, 1, NULL, 0); /* EXPORT_NAME "" */
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
}

static void test_data_after_starttls(void **state)
{
	uint8_t two[32];
	struct env e;

	env_start(&e, TD_NBD_TLS_REQUIRE);
	cl_greeting(&e);
	/* STARTTLS and, without waiting for its reply, a LIST. */
	memcpy(two, "IHAVEOPT\0\0\0\x05\0\0\0\0IHAVEOPT\0\0\0\x03\0\0\0\0", 32);
	cl_send(&e, two, sizeof(two));
	/* Closed at once: those bytes cannot be the TLS handshake's. */
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
}

static void test_optional(void **state)
{
	struct env e;

	/* --nbd-tls on: a client that never asks for TLS is served. */
	env_start(&e, TD_NBD_TLS_ON);
	cl_greeting(&e);
	assert_int_equal(cl_go(&e), REP_ACK);
	env_stop(&e);
	/* ... and one that does. */
	env_start(&e, TD_NBD_TLS_ON);
	cl_greeting(&e);
	cl_opt(&e, 5, NULL, 0);
	assert_int_equal(cl_reply(&e, 5), REP_ACK);
	assert_int_equal(cl_handshake(&e, KEY_HEX), 0);
	assert_int_equal(cl_go(&e), REP_ACK);
	env_stop(&e);
}

static void test_handshake_timeout(void **state)
{
	struct env e;

	/* STARTTLS answered, then silence: the handshake timer ends it. */
	handshake_ms = 500; /* far above the few round trips before */
	env_start(&e, TD_NBD_TLS_REQUIRE);
	handshake_ms = 0;
	cl_greeting(&e);
	cl_opt(&e, 5, NULL, 0);
	assert_int_equal(cl_reply(&e, 5), REP_ACK);
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).clients, 0);
	env_stop(&e);
}

static int setup_all(void **state)
{
	write_file(psk_path, "alice:" KEY_HEX "\n");
	td_log_set_level(TD_LOG_ERR);
	return 0;
}

static int teardown_all(void **state)
{
	unlink(psk_path);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_mode),
		cmocka_unit_test(test_parse_cidr),
		cmocka_unit_test(test_cidr_match),
		cmocka_unit_test(test_loopback),
		cmocka_unit_test(test_psk_file),
		cmocka_unit_test(test_params),
		cmocka_unit_test(test_option_action),
		cmocka_unit_test(test_require_then_starttls),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_export_name_closes),
		cmocka_unit_test(test_data_after_starttls),
		cmocka_unit_test(test_optional),
		cmocka_unit_test(test_handshake_timeout),
	};

	return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
