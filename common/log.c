/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.c - levels, per-vbd rate limiting and the printer.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

static enum td_log_level log_level = TD_LOG_INFO;
static FILE *log_stream;
/* The file td_log_open_file() opened, for td_log_reopen(); "" if none. */
static char log_path[4096];
static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
/* This thread's last error message, and how many it logged (log.h). */
static __thread char last_err[TD_LOG_LAST_ERR_MAX];
static __thread uint64_t nr_errs;

static const char *const level_names[] = {
	[TD_LOG_ERR] = "err",
	[TD_LOG_WARN] = "warn",
	[TD_LOG_INFO] = "info",
	[TD_LOG_DBG] = "debug",
};

uint64_t td_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void td_ratelimit_init(struct td_ratelimit *rl)
{
	rl->burst = TD_RATELIMIT_BURST;
	rl->rate_per_s = TD_RATELIMIT_RATE_PER_S;
	rl->tokens = rl->burst;
	rl->last_ns = 0;
	rl->suppressed = 0;
}

int td_ratelimit_allow(struct td_ratelimit *rl, uint64_t now_ns)
{
	if (now_ns > rl->last_ns) {
		double add =
			(double)(now_ns - rl->last_ns) * rl->rate_per_s / 1e9;

		rl->tokens += add;
		if (rl->tokens > rl->burst)
			rl->tokens = rl->burst;
	}
	rl->last_ns = now_ns;
	if (rl->tokens >= 1.0) {
		rl->tokens -= 1.0;
		return 1;
	}
	rl->suppressed++;
	return 0;
}

void td_log_set_level(enum td_log_level level)
{
	log_level = level;
}

enum td_log_level td_log_get_level(void)
{
	return log_level;
}

void td_log_set_stream(FILE *stream)
{
	FILE *owned = NULL;

	pthread_mutex_lock(&stream_lock);
	if (log_path[0] && log_stream != stream)
		owned = log_stream;
	log_path[0] = '\0';
	log_stream = stream;
	pthread_mutex_unlock(&stream_lock);
	if (owned)
		fclose(owned);
}

int td_log_open_file(const char *path)
{
	FILE *f = fopen(path, "ae");
	bool owned;
	FILE *old;

	if (!f)
		return -errno;
	setvbuf(f, NULL, _IOLBF, 0);
	pthread_mutex_lock(&stream_lock);
	old = log_stream;
	owned = log_path[0] != '\0';
	log_stream = f;
	if (path != log_path)
		snprintf(log_path, sizeof(log_path), "%s", path);
	pthread_mutex_unlock(&stream_lock);
	if (old && old != stderr && owned)
		fclose(old);
	return 0;
}

int td_log_reopen(void)
{
	if (!log_path[0])
		return 1;
	return td_log_open_file(log_path);
}

int td_log_parse_level(const char *name)
{
	if (!name)
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]);
	     i++)
		if (!strcmp(name, level_names[i]))
			return (int)i;
	return -EINVAL;
}

/* Append to line[TD_LOG_LINE_MAX] at *len, cut at the end. */
static void put(char *line, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void put(char *line, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= TD_LOG_LINE_MAX - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line + *len, TD_LOG_LINE_MAX - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n < TD_LOG_LINE_MAX - *len
				? (size_t)n
				: TD_LOG_LINE_MAX - 1 - *len;
}

/* "FUNC [NAME]: TEXT (N similar messages suppressed)", no timestamp. */
static void format_line(char *line, const char *func, const char *name,
			uint64_t dropped, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));
static void format_line(char *line, const char *func, const char *name,
			uint64_t dropped, const char *fmt, va_list ap)
{
	size_t len = 0;
	int n;

	put(line, &len, "%s%s%s%s: ", func, name ? " [" : "", name ?: "",
	    name ? "]" : "");
	if (len < TD_LOG_LINE_MAX - 1) {
		n = vsnprintf(line + len, TD_LOG_LINE_MAX - len, fmt, ap);
		if (n > 0)
			len += (size_t)n < TD_LOG_LINE_MAX - len
				       ? (size_t)n
				       : TD_LOG_LINE_MAX - 1 - len;
	}
	if (dropped)
		put(line, &len, " (%llu similar messages suppressed)",
		    (unsigned long long)dropped);
}

void td_log(enum td_log_level level, const char *func, const char *name,
	    struct td_ratelimit *rl, const char *fmt, ...)
{
	char line[TD_LOG_LINE_MAX];
	uint64_t dropped = 0;
	char stamp[32];
	FILE *out;
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (level == TD_LOG_ERR) {
		va_start(ap, fmt);
		vsnprintf(last_err, sizeof(last_err), fmt, ap);
		va_end(ap);
		nr_errs++;
	}
	if (level > log_level)
		return;
	if (rl) {
		if (!td_ratelimit_allow(rl, td_now_ns()))
			return;
		dropped = rl->suppressed;
		rl->suppressed = 0;
	}

	va_start(ap, fmt);
	format_line(line, func, name, dropped, fmt, ap);
	va_end(ap);
	if (td_log_sink_put(level, line))
		return;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);

	pthread_mutex_lock(&stream_lock);
	out = log_stream ? log_stream : stderr;
	flockfile(out);
	fprintf(out, "%s.%03ld %s %s\n", stamp, ts.tv_nsec / 1000000,
		level_names[level], line);
	funlockfile(out);
	fflush(out);
	pthread_mutex_unlock(&stream_lock);
}

uint64_t td_log_err_count(void)
{
	return nr_errs;
}

const char *td_log_last_err(void)
{
	return last_err;
}
