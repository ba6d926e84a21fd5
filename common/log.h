/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.h - the one logging header of tapstripe.
 *
 * Every message goes through td_log(): it adds the level, the calling
 * function and, when given, the name of the vbd it concerns.  Messages tied
 * to a vbd are rate-limited per vbd (a token bucket in struct td_ratelimit),
 * so that a misbehaving guest or client cannot flood the log: once the
 * bucket is empty further messages are counted, and the count of suppressed
 * messages is printed with the next message that gets through.
 *
 * Library code never prints to stdout and never exits; it logs here and
 * returns -errno.
 */
#ifndef TAPSTRIPE_LOG_H
#define TAPSTRIPE_LOG_H

#include <stdint.h>
#include <stdio.h>

enum td_log_level {
	TD_LOG_ERR = 0,
	TD_LOG_WARN = 1,
	TD_LOG_INFO = 2,
	TD_LOG_DBG = 3,
};

/* Token bucket: burst messages at once, then rate_per_s per second. */
struct td_ratelimit {
	uint32_t burst;
	uint32_t rate_per_s;
	double tokens;
	uint64_t last_ns;
	uint64_t suppressed;
};

#define TD_RATELIMIT_BURST	20
#define TD_RATELIMIT_RATE_PER_S 5

/* Initialise a limiter with the default burst and rate. */
void td_ratelimit_init(struct td_ratelimit *rl);

/*
 * Returns 1 when a message may be printed now, 0 when it must be dropped
 * (and counts it).  now_ns is CLOCK_MONOTONIC time; tests pass their own.
 */
int td_ratelimit_allow(struct td_ratelimit *rl, uint64_t now_ns);

/* A line's most bytes (longer ones are cut). */
#define TD_LOG_LINE_MAX 1024

/* Messages above this level are dropped (default TD_LOG_INFO). */
void td_log_set_level(enum td_log_level level);
enum td_log_level td_log_get_level(void);

/* Where messages go (default stderr).  NULL restores stderr. */
void td_log_set_stream(FILE *stream);

/*
 * Append the log to the file at path from now on (td_log_reopen() opens
 * the same path again: SIGHUP after logrotate moved it).  0 or -errno;
 * on failure the previous destination stays.  td_log_reopen() returns 1
 * when no file is in use (stderr, syslog): nothing to do.
 */
int td_log_open_file(const char *path);
int td_log_reopen(void);

/*
 * The syslog sink (log-sink.c).  Lines go to a datagram socket (socket_path,
 * NULL for /dev/log) in the syslog format, "<PRI>Mmm dd hh:mm:ss
 * IDENT[PID]: FUNC [VBD]: TEXT", PRI = LOG_DAEMON and the severity of the
 * level (err 3, warning 4, info 6, debug 7).  td_log() never waits for it:
 * a line goes into a bounded queue (queue_lines) that a thread of the sink
 * drains with non-blocking sends; when the queue is full, or the reader
 * does not read for TD_LOG_SINK_STALL_MS, lines are dropped and counted.
 * ident is e.g. "tapdisk/NAME" (as postfix/smtpd): journalctl -t takes it.
 * 0 or -errno (no such socket: nothing changed, the caller chooses).
 */
#define TD_LOG_SINK_QUEUE    1024
#define TD_LOG_SINK_STALL_MS 1000
int td_log_syslog_open(const char *socket_path, const char *ident,
		       unsigned queue_lines);
/* Send what is queued (waiting at most TD_LOG_SINK_STALL_MS), stop the
 * thread, close; later lines go to the stream again.  Returns how many
 * lines were dropped in all. */
uint64_t td_log_syslog_close(void);
/* Lines the sink dropped so far (0 when it is not open). */
uint64_t td_log_syslog_dropped(void);
/* Used by td_log(): 1 when the sink took (or dropped) the line. */
int td_log_sink_put(enum td_log_level level, const char *line);

/*
 * Parse a --log TARGET: "stderr", "syslog" (/dev/log), "syslog:SOCKET" or
 * "file:PATH", and switch to it (ident for syslog).  0, -EINVAL for a
 * malformed target, or the -errno of opening it.
 */
int td_log_set_target(const char *target, const char *ident);

/* Parse "err", "warn", "info" or "debug"; returns the level or -EINVAL. */
int td_log_parse_level(const char *name);

/*
 * The last error this thread logged (its text without the prefix, cut at
 * TD_LOG_LAST_ERR_MAX - 1 bytes; "" before the first) and how many it
 * has logged, rate-limited ones included.  A caller that reports a
 * failure in one line (tapdisk's start-up) compares the count before and
 * after a call and, when it grew, gives the callee's own reason instead
 * of a bare errno.
 */
#define TD_LOG_LAST_ERR_MAX 512
uint64_t td_log_err_count(void);
const char *td_log_last_err(void);

/*
 * The printer behind the macros.  name is the vbd name or NULL; rl the
 * vbd's limiter or NULL for unlimited.
 */
void td_log(enum td_log_level level, const char *func, const char *name,
	    struct td_ratelimit *rl, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Process-wide messages: not tied to one vbd, not rate-limited. */
#define td_err(...)  td_log(TD_LOG_ERR, __func__, NULL, NULL, __VA_ARGS__)
#define td_warn(...) td_log(TD_LOG_WARN, __func__, NULL, NULL, __VA_ARGS__)
#define td_info(...) td_log(TD_LOG_INFO, __func__, NULL, NULL, __VA_ARGS__)
#define td_dbg(...)  td_log(TD_LOG_DBG, __func__, NULL, NULL, __VA_ARGS__)

/*
 * Messages about one vbd, rate-limited by that vbd's limiter.  vbd is a
 * struct td_vbd * (see vbd.h, which provides td_vbd_name/td_vbd_ratelimit).
 */
#define td_vbd_err(vbd, ...)                                                  \
	td_log(TD_LOG_ERR, __func__, td_vbd_name(vbd), td_vbd_ratelimit(vbd), \
	       __VA_ARGS__)
#define td_vbd_warn(vbd, ...)                                                  \
	td_log(TD_LOG_WARN, __func__, td_vbd_name(vbd), td_vbd_ratelimit(vbd), \
	       __VA_ARGS__)
#define td_vbd_info(vbd, ...)                                                  \
	td_log(TD_LOG_INFO, __func__, td_vbd_name(vbd), td_vbd_ratelimit(vbd), \
	       __VA_ARGS__)
#define td_vbd_dbg(vbd, ...)                                                  \
	td_log(TD_LOG_DBG, __func__, td_vbd_name(vbd), td_vbd_ratelimit(vbd), \
	       __VA_ARGS__)

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t td_now_ns(void);

#endif
