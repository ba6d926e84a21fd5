/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_nbd.c - libFuzzer harness for the NBD server: the fuzzer's bytes
 * are everything one client sends (handshake, options, commands and
 * payloads), over a socketpair, to a server exporting a null disk.  The
 * seeds (corpus/nbd) include structured replies, LIST/SET_META_CONTEXT
 * and BLOCK_STATUS (the null driver answers base:allocation).
 *
 * Each input: a fresh connection gets the bytes, the client side half-
 * closes, the loop runs while the harness reads every reply; then the
 * client closes.  Checked (a failure aborts, which libFuzzer reports):
 *   - the server closes its side or stays quiet within MAX_PASSES passes
 *     (no busy loop on a dead client);
 *   - once the client has closed, the connection is gone within
 *     MAX_PASSES passes (no leaked connection, no stuck I/O), and so is
 *     every byte it mapped (memory_bytes: connection memory is mmap'd,
 *     which the leak check does not see);
 *   - the sanitizers and libFuzzer's leak check see nothing.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "drivers/drivers.h"
#include "common/log.h"
#include "common/loop.h"
#include "frontends/nbd/nbd.h"
#include "tapdisk/vbd.h"

#define MAX_PASSES 256

/*
 * Keeps each input fast: ASan maps a buffer above 128 KiB afresh for every
 * request, and with 1 MiB the page faults made the harness ten times
 * slower once the corpus held many large reads.  Longer requests still
 * take the too-long path.
 */
#define MAX_REQUEST (128u << 10)

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
static struct td_nbd_server *srv;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct td_vbd_params vp = {.name = "fuzz", .chain = "null:size=64M"};
	struct td_nbd_params np = {.max_request_bytes = MAX_REQUEST};

	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	check(!td_loop_create(&loop));
	check(!td_vbd_open(loop, table, &vp, &vbd));
	check(!td_nbd_server_create(loop, vbd, &np, &srv));
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
			break; /* the buffer is full or the server closed */
		sent += (size_t)n;
	}
	return sent;
}

static struct td_nbd_stats stats(void)
{
	struct td_nbd_stats st;

	td_nbd_server_get_stats(srv, &st);
	return st;
}

static uint64_t clients(void)
{
	return stats().clients;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t sent = 0;
	bool open = true;
	int sv[2];
	int pass;

	check(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
	check(!td_nbd_server_add_client(srv, sv[0], "fuzz"));
	for (pass = 0; pass < MAX_PASSES && open; pass++) {
		if (sent < size) {
			sent += feed(sv[1], data + sent, size - sent);
			if (sent == size)
				shutdown(sv[1], SHUT_WR);
		}
		check(!td_loop_run_once(loop, 0));
		open = drain(sv[1]);
		if (sent == size && pass > 16 && clients() == 1 &&
		    td_loop_run_once(loop, 0) == 0 && drain(sv[1]))
			break; /* quiet: waiting for more input that won't come */
	}
	close(sv[1]);
	for (pass = 0; pass < MAX_PASSES && clients(); pass++)
		check(!td_loop_run_once(loop, 1));
	check(clients() == 0);
	for (pass = 0; pass < MAX_PASSES && stats().memory_bytes; pass++)
		check(!td_loop_run_once(loop, 0));
	check(stats().memory_bytes == 0);
	/* A "pause" from the input must not leak into the next input. */
	td_vbd_resume(vbd);
	return 0;
}
