/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log-sink.c - the syslog sink of log.h: a bounded queue of formatted
 * lines and a thread that sends them to a datagram socket (/dev/log, which
 * journald also serves) without ever making td_log() wait.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define SYSLOG_FACILITY_DAEMON (3 << 3)
#define SINK_LINE_MAX	       (TD_LOG_LINE_MAX + 128)

struct sink {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	struct sockaddr_un addr;
	int fd;
	bool stopping;
	uint64_t close_deadline; /* set with stopping, read atomically */
	char ident[128];
	char (*lines)[SINK_LINE_MAX];
	unsigned cap, head, count;
	uint64_t dropped;
};

static struct sink *sink;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;

static const int severity[] = {
	[TD_LOG_ERR] = 3,
	[TD_LOG_WARN] = 4,
	[TD_LOG_INFO] = 6,
	[TD_LOG_DBG] = 7,
};

static int sink_connect(struct sink *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return -errno;
	if (connect(s->fd, (struct sockaddr *)&s->addr, sizeof(s->addr)))
		return -errno;
	return 0;
}

/* Send one line; false when it must be dropped (stalled or gone). */
static bool sink_send(struct sink *s, const char *line)
{
	uint64_t deadline = td_now_ns() + TD_LOG_SINK_STALL_MS * 1000000ull;
	size_t len = strlen(line);

	for (;;) {
		struct pollfd pfd = {.fd = s->fd, .events = POLLOUT};

		if (send(s->fd, line, len, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			return true;
		if (errno == ECONNREFUSED || errno == ENOTCONN ||
		    errno == EBADF) {
			/* syslogd restarted: connect again, once. */
			return !sink_connect(s) &&
			       send(s->fd, line, len,
				    MSG_DONTWAIT | MSG_NOSIGNAL) >= 0;
		}
		if (errno != EAGAIN && errno != EINTR)
			return false;
		uint64_t end =
			__atomic_load_n(&s->close_deadline, __ATOMIC_RELAXED);
		if (td_now_ns() >= (end && end < deadline ? end : deadline))
			return false;
		poll(&pfd, 1, 50);
	}
}

static void *sink_main(void *opaque)
{
	struct sink *s = opaque;
	char line[SINK_LINE_MAX];

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->count && !s->stopping)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->count)
			break;
		memcpy(line, s->lines[s->head], sizeof(line));
		s->head = (s->head + 1) % s->cap;
		s->count--;
		pthread_mutex_unlock(&s->lock);
		bool sent = sink_send(s, line);
		pthread_mutex_lock(&s->lock);
		if (!sent)
			s->dropped++;
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static struct sink *sink_new(const char *socket_path, const char *ident,
			     unsigned queue_lines)
{
	struct sink *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cap = queue_lines ? queue_lines : TD_LOG_SINK_QUEUE;
	s->lines = calloc(s->cap, sizeof(*s->lines));
	if (!s->lines) {
		free(s);
		return NULL;
	}
	s->fd = -1;
	s->addr.sun_family = AF_UNIX;
	snprintf(s->addr.sun_path, sizeof(s->addr.sun_path), "%s",
		 socket_path ? socket_path : "/dev/log");
	snprintf(s->ident, sizeof(s->ident), "%s", ident ? ident : "tapstripe");
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	return s;
}

static void sink_free(struct sink *s)
{
	if (s->fd >= 0)
		close(s->fd);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->lines);
	free(s);
}

/* The thread takes no signal: the process's signalfd must get them all. */
static int sink_start(struct sink *s)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->thread, NULL, sink_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

int td_log_syslog_open(const char *socket_path, const char *ident,
		       unsigned queue_lines)
{
	struct sink *s;
	int err;

	if (socket_path && strlen(socket_path) >= sizeof(s->addr.sun_path))
		return -ENAMETOOLONG;
	s = sink_new(socket_path, ident, queue_lines);
	if (!s)
		return -ENOMEM;
	if ((err = sink_connect(s)) || (err = sink_start(s))) {
		sink_free(s);
		return err;
	}
	td_log_syslog_close();
	pthread_mutex_lock(&sink_lock);
	sink = s;
	pthread_mutex_unlock(&sink_lock);
	return 0;
}

uint64_t td_log_syslog_close(void)
{
	struct sink *s;
	uint64_t dropped;

	pthread_mutex_lock(&sink_lock);
	s = sink;
	sink = NULL;
	pthread_mutex_unlock(&sink_lock);
	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	__atomic_store_n(&s->close_deadline,
			 td_now_ns() + TD_LOG_SINK_STALL_MS * 1000000ull,
			 __ATOMIC_RELAXED);
	s->stopping = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	dropped = s->dropped;
	sink_free(s);
	return dropped;
}

uint64_t td_log_syslog_dropped(void)
{
	uint64_t n = 0;

	pthread_mutex_lock(&sink_lock);
	if (sink) {
		pthread_mutex_lock(&sink->lock);
		n = sink->dropped;
		pthread_mutex_unlock(&sink->lock);
	}
	pthread_mutex_unlock(&sink_lock);
	return n;
}

/* "<PRI>Mmm dd hh:mm:ss IDENT[PID]: LINE" into the next free slot. */
static void sink_format(struct sink *s, char *out, enum td_log_level level,
			const char *line)
{
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%b %e %H:%M:%S", &tm);
	snprintf(out, SINK_LINE_MAX, "<%d>%s %s[%d]: %s",
		 SYSLOG_FACILITY_DAEMON | severity[level], stamp, s->ident,
		 (int)getpid(), line);
}

int td_log_sink_put(enum td_log_level level, const char *line)
{
	struct sink *s;

	pthread_mutex_lock(&sink_lock);
	if (!(s = sink)) {
		pthread_mutex_unlock(&sink_lock);
		return 0;
	}
	pthread_mutex_lock(&s->lock);
	if (s->count == s->cap || s->stopping) {
		s->dropped++;
	} else {
		sink_format(s, s->lines[(s->head + s->count) % s->cap], level,
			    line);
		s->count++;
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_unlock(&sink_lock);
	return 1;
}

int td_log_set_target(const char *target, const char *ident)
{
	if (!target)
		return -EINVAL;
	if (!strcmp(target, "stderr")) {
		td_log_syslog_close();
		td_log_set_stream(NULL);
		return 0;
	}
	if (!strcmp(target, "syslog"))
		return td_log_syslog_open(NULL, ident, 0);
	if (!strncmp(target, "syslog:", 7) && target[7])
		return td_log_syslog_open(target + 7, ident, 0);
	if (!strncmp(target, "file:", 5) && target[5]) {
		td_log_syslog_close();
		return td_log_open_file(target + 5);
	}
	return -EINVAL;
}
