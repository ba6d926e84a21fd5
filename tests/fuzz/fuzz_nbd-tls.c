/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_nbd-tls.c - libFuzzer harness for the STARTTLS negotiation of the
 * NBD server (frontends/nbd/nbd-tls.c): TLS optional or required, the
 * refusals before TLS, STARTTLS itself, the option haggling again inside
 * TLS and the commands after it.
 *
 * GnuTLS's record layer and handshake are stubbed at the library
 * boundary (run.sh links this harness with -Wl,--wrap=...): the
 * handshake succeeds, fails or says "again" as the input's first byte
 * asks, and records pass through in plaintext, corking and all, so the
 * fuzzer's bytes reach the NBD state machine after STARTTLS.  Sessions,
 * credentials and priorities are GnuTLS's own.
 *
 * Input: byte 0 picks the case (bit 0: --nbd-tls require, else on;
 * bit 1: the handshake fails; bit 2: it returns GNUTLS_E_AGAIN first,
 * waiting for EPOLLOUT when bit 3 is set); the rest is what the client
 * sends.  Bytes after the first NBD_OPT_STARTTLS are held back until
 * its reply has been read, as a real client does.  Checked as in
 * fuzz_nbd.c: the server goes quiet or closes within MAX_PASSES passes,
 * and once the client has closed, the connection is gone.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

#include "common/log.h"
#include "common/loop.h"
#include "drivers/drivers.h"
#include "frontends/nbd/nbd.h"
#include "tapdisk/vbd.h"

#define MAX_PASSES  256
#define MAX_REQUEST (128u << 10) /* as fuzz_nbd.c, for speed */
#define CORK_MAX    (1u << 20)	 /* above nbd-tls.c's 128 KiB per uncork */

#define check(cond)                                                   \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "check failed: %s\n", #cond); \
			abort();                                      \
		}                                                     \
	} while (0)

static const struct td_driver_ops *const table[] = {&td_null_ops, NULL};

static struct td_loop *loop;
static struct td_vbd *vbd;
static struct td_nbd_server *srv[2]; /* on, require */
static char psk_path[] = "/tmp/fuzz_nbd-tls.XXXXXX";

/* --- GnuTLS, stubbed -------------------------------------------------------------- */

static struct {
	uint8_t mode; /* byte 0 of the input */
	int handshakes;
	int direction;
	uint8_t cork[CORK_MAX];
	size_t corked;
} stub;

int __wrap_gnutls_handshake(gnutls_session_t s);
ssize_t __wrap_gnutls_record_recv(gnutls_session_t s, void *buf, size_t len);
ssize_t __wrap_gnutls_record_send(gnutls_session_t s, const void *buf,
				  size_t len);
void __wrap_gnutls_record_cork(gnutls_session_t s);
int __wrap_gnutls_record_uncork(gnutls_session_t s, unsigned int flags);
size_t __wrap_gnutls_record_check_pending(gnutls_session_t s);
int __wrap_gnutls_record_get_direction(gnutls_session_t s);
int __wrap_gnutls_bye(gnutls_session_t s, gnutls_close_request_t how);

int __wrap_gnutls_handshake(gnutls_session_t s)
{
	if ((stub.mode & 4) && stub.handshakes++ == 0) {
		stub.direction = (stub.mode & 8) ? 1 : 0;
		return GNUTLS_E_AGAIN;
	}
	stub.direction = 0;
	return (stub.mode & 2) ? GNUTLS_E_DECRYPTION_FAILED : 0;
}

ssize_t __wrap_gnutls_record_recv(gnutls_session_t s, void *buf, size_t len)
{
	ssize_t n = read(gnutls_transport_get_int(s), buf, len);

	stub.direction = 0;
	if (n >= 0)
		return n;
	return errno == EAGAIN ? GNUTLS_E_AGAIN : GNUTLS_E_PULL_ERROR;
}

/* Corked (as nbd-tls.c always sends): keep the bytes for the uncork. */
ssize_t __wrap_gnutls_record_send(gnutls_session_t s, const void *buf,
				  size_t len)
{
	check(stub.corked + len <= CORK_MAX);
	memcpy(stub.cork + stub.corked, buf, len);
	stub.corked += len;
	return (ssize_t)len;
}

void __wrap_gnutls_record_cork(gnutls_session_t s)
{
}

int __wrap_gnutls_record_uncork(gnutls_session_t s, unsigned int flags)
{
	size_t total = stub.corked;

	while (stub.corked) {
		ssize_t n = write(gnutls_transport_get_int(s), stub.cork,
				  stub.corked);

		if (n < 0 && errno == EAGAIN) {
			stub.direction = 1;
			return GNUTLS_E_AGAIN;
		}
		if (n <= 0)
			return GNUTLS_E_PUSH_ERROR;
		memmove(stub.cork, stub.cork + n, stub.corked - (size_t)n);
		stub.corked -= (size_t)n;
	}
	return (int)total;
}

size_t __wrap_gnutls_record_check_pending(gnutls_session_t s)
{
	return 0;
}

int __wrap_gnutls_record_get_direction(gnutls_session_t s)
{
	return stub.direction;
}

int __wrap_gnutls_bye(gnutls_session_t s, gnutls_close_request_t how)
{
	return 0;
}

/* --- the harness ----------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char key[] = "alice:00112233445566778899aabbccddeeff\n";
	struct td_vbd_params vp = {.name = "fuzz", .chain = "null:size=64M"};
	struct td_nbd_access a = {.tls_psk_file = psk_path};
	struct td_nbd_params np = {.max_request_bytes = MAX_REQUEST,
				   .access = &a};
	int fd = mkstemp(psk_path);

	check(fd >= 0);
	check(write(fd, key, sizeof(key) - 1) == (ssize_t)sizeof(key) - 1);
	close(fd);
	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	check(!td_loop_create(&loop));
	check(!td_vbd_open(loop, table, &vp, &vbd));
	a.tls = TD_NBD_TLS_ON;
	check(!td_nbd_server_create(loop, vbd, &np, &srv[0]));
	a.tls = TD_NBD_TLS_REQUIRE;
	check(!td_nbd_server_create(loop, vbd, &np, &srv[1]));
	unlink(psk_path); /* read once, at create */
	return 0;
}

/* Read and drop what the server wrote; returns false once it closed. */
static bool drain(int fd)
{
	char buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	return !(n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR));
}

static size_t feed(int fd, const uint8_t *data, size_t size)
{
	size_t sent = 0;

	while (sent < size) {
		ssize_t n = write(fd, data + sent, size - sent);

		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	return sent;
}

static uint64_t clients(struct td_nbd_server *s)
{
	struct td_nbd_stats st;

	td_nbd_server_get_stats(s, &st);
	return st.clients;
}

/* Where the bytes after the first STARTTLS option begin (size: none). */
static size_t starttls_end(const uint8_t *data, size_t size)
{
	static const uint8_t opt[12] = {'I', 'H', 'A', 'V', 'E', 'O',
					'P', 'T', 0,   0,   0,	 5};

	for (size_t i = 0; i + 16 <= size; i++) {
		if (memcmp(data + i, opt, sizeof(opt)))
			continue;
		uint32_t len = (uint32_t)data[i + 12] << 24 |
			       (uint32_t)data[i + 13] << 16 |
			       (uint32_t)data[i + 14] << 8 | data[i + 15];
		return len <= size - i - 16 ? i + 16 + len : size;
	}
	return size;
}

/* Run the server on data until it goes quiet or closes. */
static bool run(struct td_nbd_server *s, int cfd, const uint8_t *data,
		size_t size, bool last)
{
	size_t sent = 0;
	bool open = true;

	for (int pass = 0; pass < MAX_PASSES && open; pass++) {
		if (sent < size) {
			sent += feed(cfd, data + sent, size - sent);
			if (sent == size && last)
				shutdown(cfd, SHUT_WR);
		}
		check(!td_loop_run_once(loop, 0));
		open = drain(cfd);
		if (sent == size && pass > 16 && clients(s) == 1 &&
		    td_loop_run_once(loop, 0) == 0 && drain(cfd))
			break;
	}
	return open;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_nbd_server *s;
	size_t split;
	int sv[2];

	if (!size)
		return 0;
	stub.handshakes = 0;
	stub.direction = 0;
	stub.corked = 0;
	stub.mode = data[0];
	s = srv[data[0] & 1];
	data++;
	size--;
	split = starttls_end(data, size);
	check(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
	check(!td_nbd_server_add_client(s, sv[0], "fuzz"));
	if (run(s, sv[1], data, split, split == size) && split < size)
		run(s, sv[1], data + split, size - split, true);
	close(sv[1]);
	for (int pass = 0; pass < MAX_PASSES && clients(s); pass++)
		check(!td_loop_run_once(loop, 1));
	check(clients(s) == 0);
	td_vbd_resume(vbd);
	return 0;
}
