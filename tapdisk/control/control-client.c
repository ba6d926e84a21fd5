/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * control-client.c - the client side of the control protocol (control.h),
 * and the paths that tapdisk and tap-ctl share.
 *
 * The client blocks, bounded by a deadline: it is for tools, never for the
 * event loop.  Replies are hostile input like any other: the status line
 * and the payload length are checked before anything is allocated.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "tapdisk/control/control.h"

#define NS_PER_MS    1000000ull
#define CLIENT_CHUNK 4096
#define RUN_DIR_MODE 0755

/* --- names and paths -------------------------------------------------------- */

const char *td_ctl_run_dir(const char *override)
{
	const char *env = getenv(TD_CTL_RUN_DIR_ENV);

	if (override && *override)
		return override;
	if (env && *env)
		return env;
	return TD_CTL_RUN_DIR_DEFAULT;
}

int td_ctl_make_run_dir(const char *dir)
{
	char buf[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, len + 1);
	/* Each parent first, then dir itself; existing ones are fine. */
	for (char *p = buf + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char saved = *p;

		*p = '\0';
		if (mkdir(buf, RUN_DIR_MODE) && errno != EEXIST)
			return -errno;
		if (!saved)
			return 0;
		*p = saved;
	}
}

int td_ctl_socket_path(char *buf, size_t len, const char *run_dir, int pid)
{
	int n = snprintf(buf, len,
			 "%s/" TD_CTL_SOCK_PREFIX "%d" TD_CTL_SOCK_SUFFIX,
			 run_dir, pid);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* --- replies ------------------------------------------------------------------- */

void td_ctl_reply_init(struct td_ctl_reply *reply)
{
	memset(reply, 0, sizeof(*reply));
	td_strbuf_init(&reply->payload);
}

void td_ctl_reply_free(struct td_ctl_reply *reply)
{
	td_strbuf_free(&reply->payload);
	td_ctl_reply_init(reply);
}

static int parse_ok(const char *p, size_t *payload_len)
{
	unsigned long long len = 0;

	if (*p < '0' || *p > '9')
		return -EPROTO;
	for (; *p >= '0' && *p <= '9'; p++) {
		len = len * 10 + (unsigned long long)(*p - '0');
		if (len > TD_CTL_REPLY_MAX)
			return -EPROTO;
	}
	if (*p)
		return -EPROTO;
	*payload_len = (size_t)len;
	return 0;
}

static int parse_err(const char *p, struct td_ctl_reply *reply)
{
	const char *sp = strchr(p, ' ');
	size_t name_len = sp ? (size_t)(sp - p) : strlen(p);
	int err;

	if (!name_len || name_len >= sizeof(reply->errname) || p[0] != 'E')
		return -EPROTO;
	memcpy(reply->errname, p, name_len);
	reply->errname[name_len] = '\0';
	err = td_errno_from_name(reply->errname);
	if (!err && sscanf(reply->errname, "E%d", &err) != 1)
		err = EIO; /* a name from a newer server: still an error */
	reply->err = err > 0 ? -err : -EIO;
	snprintf(reply->message, sizeof(reply->message), "%s",
		 sp ? sp + 1 : "");
	return 0;
}

int td_ctl_parse_status(const char *line, struct td_ctl_reply *reply,
			size_t *payload_len)
{
	*payload_len = 0;
	if (!strncmp(line, "OK ", 3)) {
		reply->err = 0;
		return parse_ok(line + 3, payload_len);
	}
	if (!strncmp(line, "ERR ", 4))
		return parse_err(line + 4, reply);
	return -EPROTO;
}

/* --- blocking I/O with a deadline ---------------------------------------------- */

static int deadline_left_ms(uint64_t deadline_ns)
{
	uint64_t now = td_now_ns();

	if (!deadline_ns)
		return -1;
	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS);
}

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd pfd = {.fd = fd, .events = events};

	for (;;) {
		int left = deadline_left_ms(deadline_ns);
		int n;

		if (!left)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const char *data, size_t len, uint64_t deadline_ns)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int err;

		if (n >= 0) {
			data += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if ((err = wait_fd(fd, POLLOUT, deadline_ns)))
			return err;
	}
	return 0;
}

/* Read some bytes into buf; returns the count, 0 at EOF, or -errno. */
static ssize_t recv_some(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
	for (;;) {
		ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
		int err;

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if ((err = wait_fd(fd, POLLIN, deadline_ns)))
			return err;
	}
}

/* Read the status line, byte by byte so nothing of the payload is lost. */
static int read_status(int fd, char *line, size_t size, uint64_t deadline_ns)
{
	size_t len = 0;

	for (;;) {
		ssize_t n = recv_some(fd, line + len, 1, deadline_ns);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		if (line[len] == '\n') {
			line[len] = '\0';
			return 0;
		}
		if (++len == size)
			return -EPROTO;
	}
}

static int read_payload(int fd, struct td_strbuf *sb, size_t len,
			uint64_t deadline_ns)
{
	char chunk[CLIENT_CHUNK];

	while (len) {
		ssize_t n = recv_some(fd, chunk,
				      len < sizeof(chunk) ? len : sizeof(chunk),
				      deadline_ns);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return -ECONNRESET;
		td_strbuf_append(sb, chunk, (size_t)n);
		len -= (size_t)n;
	}
	return td_strbuf_error(sb);
}

/*
 * The server closed before the request was written (send_err, EPIPE or
 * ECONNRESET): a server that refuses a connection writes why first, and
 * that line is still there to read.  0 with the ERR reply, or send_err.
 */
static int read_refusal(int fd, int send_err, uint64_t deadline_ns,
			struct td_ctl_reply *reply)
{
	char status[TD_CTL_LINE_MAX];
	size_t payload_len;

	if (read_status(fd, status, sizeof(status), deadline_ns) ||
	    td_ctl_parse_status(status, reply, &payload_len) || !reply->err) {
		td_ctl_reply_free(reply);
		return send_err;
	}
	return 0;
}

bool td_ctl_reply_refused(const struct td_ctl_reply *reply)
{
	return reply->err == -EBUSY &&
	       !strncmp(reply->message, TD_CTL_BUSY_MESSAGE,
			strlen(TD_CTL_BUSY_MESSAGE));
}

int td_ctl_request(int fd, const char *line, int timeout_ms,
		   struct td_ctl_reply *reply)
{
	uint64_t deadline =
		timeout_ms < 0 ? 0
			       : td_now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
	char status[TD_CTL_LINE_MAX];
	size_t len = strlen(line), payload_len;
	int err;

	if (len + 1 > TD_CTL_LINE_MAX || memchr(line, '\n', len))
		return -EINVAL;
	td_ctl_reply_free(reply);
	if (!(err = send_all(fd, line, len, deadline)))
		err = send_all(fd, "\n", 1, deadline);
	if (err == -EPIPE || err == -ECONNRESET)
		return read_refusal(fd, err, deadline, reply);
	if (err)
		return err;
	if ((err = read_status(fd, status, sizeof(status), deadline)))
		return err;
	if ((err = td_ctl_parse_status(status, reply, &payload_len)))
		return err;
	return read_payload(fd, &reply->payload, payload_len, deadline);
}

int td_ctl_connect(const char *path, int *fd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int s, err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		close(s);
		return err;
	}
	*fd = s;
	return 0;
}

int td_ctl_call(const char *path, const char *line, int timeout_ms,
		struct td_ctl_reply *reply)
{
	int fd, err = td_ctl_connect(path, &fd);

	if (err)
		return err;
	err = td_ctl_request(fd, line, timeout_ms, reply);
	close(fd);
	return err;
}

int td_ctl_wait_closed(int fd, int timeout_ms)
{
	uint64_t deadline =
		timeout_ms < 0 ? 0
			       : td_now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
	char byte;
	ssize_t n = recv_some(fd, &byte, 1, deadline);

	if (n == 0 || n == -ECONNRESET)
		return 0;
	return n < 0 ? (int)n : -EPROTO;
}
