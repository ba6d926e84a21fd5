/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_shm.c - libFuzzer harness for the shm transport's negotiation: the
 * parsers of tapdisk/shm-proto.c, and the server (tapdisk/shm*.c) fed the
 * fuzzer's bytes as a frontend's side of the socket.
 *
 * Input: [0] the mode, then the bytes.
 *   mode % 5 == 0..3   the bytes as one line for shm_parse_connect,
 *                      _backend, _connected, _error;
 *   mode % 5 == 4      the bytes sent to a live server over a socketpair,
 *                      after its offer; the loop then runs.
 *
 * Checked (a failure is a crash for libFuzzer):
 *   - a line a parser accepts holds values within the protocol's bounds
 *     and survives format -> parse unchanged; a refusal says why;
 *   - the server answers with exactly one line, "connected" with four
 *     descriptors per ring it names (multi-queue-num-queues) or
 *     "error ...", or nothing (a line not finished), never
 *     anything else; it keeps serving; once the frontend goes, its
 *     connection, memory and descriptors are freed.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "drivers/drivers.h"
#include "common/log.h"
#include "frontends/shm/shm-int.h"

#define MODES	       5
#define MODE_SERVER    4
#define MAX_PASSES     64
#define MAX_DATA_BYTES (1u << 20) /* keep the fuzzer's memfds small */
#define LINE	       (SHM_LINE_MAX + 1)

#define check(cond)                                                   \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "check failed: %s\n", #cond); \
			abort();                                      \
		}                                                     \
	} while (0)

static const struct td_driver_ops *const table[] = {&td_null_ops, NULL};

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_shm_server *srv;
} F;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct td_vbd_params p = {.name = "fuzz", .chain = "null:size=64M"};
	struct td_shm_params sp = {.max_data_bytes = MAX_DATA_BYTES};

	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	check(!td_loop_create(&F.loop));
	check(!td_vbd_open(F.loop, table, &p, &F.vbd));
	check(!td_shm_server_create(F.loop, F.vbd, &sp, &F.srv));
	return 0;
}

/* --- the parsers ------------------------------------------------------------- */

static void fuzz_connect(const char *s, size_t n)
{
	struct shm_connect_msg m, back;
	char why[SHM_WHY_MAX] = "", line[SHM_LINE_MAX];
	int len;

	if (shm_parse_connect(s, n, &m, why, sizeof(why))) {
		check(why[0]);
		return;
	}
	check(m.version == SHM_PROTO_VERSION);
	check(m.ring_page_order <= SHM_MAX_RING_PAGE_ORDER && m.data_pages);
	check(!m.max_indirect_segments ||
	      (m.max_indirect_segments >= SHM_MIN_INDIRECT_SEGMENTS &&
	       m.max_indirect_segments <= SHM_MAX_INDIRECT_SEGMENTS));
	check(m.nr_queues >= 1 && m.nr_queues <= SHM_MAX_QUEUES);
	len = shm_format_connect(&m, line, sizeof(line));
	check(len > 0);
	check(!shm_parse_connect(line, (size_t)len - 1, &back, NULL, 0));
	check(!memcmp(&m, &back, sizeof(m)));
}

static void fuzz_backend(const char *s, size_t n)
{
	struct shm_backend_msg m, back;
	char line[SHM_LINE_MAX];
	int len;

	memset(&m, 0, sizeof(m));
	if (shm_parse_backend(s, n, &m, NULL, 0))
		return;
	check(m.sector_size >= SHM_MIN_SECTOR_SIZE &&
	      !(m.sector_size & (m.sector_size - 1)));
	check(m.sectors <= SHM_MAX_SECTORS);
	check(m.max_queues >= 1 && m.max_queues <= SHM_MAX_QUEUES);
	len = shm_format_backend(&m, line, sizeof(line));
	check(len > 0);
	check(!shm_parse_backend(line, (size_t)len - 1, &back, NULL, 0));
	check(!memcmp(&m, &back, sizeof(m)));
}

static void fuzz_connected(const char *s, size_t n)
{
	struct shm_connected_msg m, back;
	char line[SHM_LINE_MAX];
	int len;

	memset(&m, 0, sizeof(m));
	if (shm_parse_connected(s, n, &m, NULL, 0))
		return;
	check(m.ring_bytes == (uint64_t)SHM_PAGE_SIZE << m.ring_page_order);
	check(m.data_bytes == (uint64_t)m.data_pages * SHM_PAGE_SIZE);
	check(m.nr_queues >= 1 && m.nr_queues <= SHM_MAX_QUEUES);
	len = shm_format_connected(&m, line, sizeof(line));
	check(len > 0);
	check(!shm_parse_connected(line, (size_t)len - 1, &back, NULL, 0));
	check(!memcmp(&m, &back, sizeof(m)));
}

static void fuzz_error(const char *s, size_t n)
{
	char msg[SHM_LINE_MAX];
	int err = 0;

	if (shm_parse_error(s, n, &err, msg, sizeof(msg)))
		return;
	check(err < 0);
	check(strlen(msg) < n);
}

static void fuzz_resized(const char *s, size_t n)
{
	char line[SHM_LINE_MAX];
	uint64_t sectors = 0, back = 1;
	int len;

	if (shm_parse_resized(s, n, &sectors, NULL, 0))
		return;
	check(sectors <= SHM_MAX_SECTORS);
	len = shm_format_resized(sectors, line, sizeof(line));
	check(len > 0);
	check(!shm_parse_resized(line, (size_t)len - 1, &back, NULL, 0));
	check(back == sectors);
}

/* --- the server ------------------------------------------------------------------ */

/* Read what the server sent; close any descriptors.  Returns the bytes. */
static ssize_t drain(int fd, char *buf, size_t size, unsigned int *nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * SHM_NR_FDS * SHM_MAX_QUEUES)];
	} u;
	size_t len = 0;

	*nfds = 0;
	for (;;) {
		struct iovec iov = {buf + len, size - len};
		struct msghdr msg = {.msg_iov = &iov,
				     .msg_iovlen = 1,
				     .msg_control = u.b,
				     .msg_controllen = sizeof(u.b)};
		ssize_t n = len < size ? recvmsg(fd, &msg, MSG_DONTWAIT) : 0;

		if (n <= 0)
			return (ssize_t)len;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
		     c = CMSG_NXTHDR(&msg, c)) {
			unsigned int k =
				(unsigned int)((c->cmsg_len - CMSG_LEN(0)) /
					       sizeof(int));

			for (unsigned int i = 0; i < k; i++) {
				int d;

				memcpy(&d, CMSG_DATA(c) + i * sizeof(int),
				       sizeof(d));
				close(d);
			}
			*nfds += k;
		}
		len += (size_t)n;
	}
}

static void run(void)
{
	for (int i = 0; i < 4; i++)
		check(!td_loop_run_once(F.loop, 0));
}

static void fuzz_server(const uint8_t *data, size_t size)
{
	char buf[2 * LINE];
	unsigned int nfds;
	ssize_t n;
	int sv[2];

	check(!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	check(!td_shm_server_add_client(F.srv, sv[1], "fuzz"));
	n = drain(sv[0], buf, sizeof(buf), &nfds);
	check(n > 0 && shm_msg_kind(buf, (size_t)n) == SHM_KIND_BACKEND);
	if (size)
		(void)!send(sv[0], data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
	run();
	n = drain(sv[0], buf, sizeof(buf), &nfds);
	if (n > 0) {
		enum shm_msg_kind k = shm_msg_kind(buf, (size_t)n);
		struct shm_connected_msg c = {.nr_queues = 0};

		check(buf[n - 1] == '\n' &&
		      memchr(buf, '\n', (size_t)n) == buf + n - 1);
		check(k == SHM_KIND_CONNECTED || k == SHM_KIND_ERROR);
		if (k == SHM_KIND_CONNECTED)
			check(!shm_parse_connected(buf, (size_t)n - 1, &c, NULL,
						   0));
		check(nfds == SHM_NR_FDS * c.nr_queues);
		check(c.nr_queues <= TD_SHM_DEFAULT_MAX_QUEUES);
	}
	close(sv[0]);
	for (int i = 0; i < MAX_PASSES && F.srv->nr_conns; i++)
		run();
	check(F.srv->nr_conns == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;
	size_t n = size ? size - 1 : 0;

	if (!size)
		return 0;
	switch (data[0] % MODES) {
	case 0:
		fuzz_connect(s, n);
		break;
	case 1:
		fuzz_backend(s, n);
		break;
	case 2:
		fuzz_connected(s, n);
		break;
	case 3:
		fuzz_error(s, n);
		fuzz_resized(s, n);
		break;
	case MODE_SERVER:
		fuzz_server(data + 1, n);
		break;
	}
	return 0;
}
