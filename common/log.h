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

/* Messages above this level are dropped (default TD_LOG_INFO). */
void td_log_set_level(enum td_log_level level);
enum td_log_level td_log_get_level(void);

/* Where messages go (default stderr).  NULL restores stderr. */
void td_log_set_stream(FILE *stream);

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
