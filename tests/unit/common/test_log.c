/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_log.c - levels, the per-vbd token bucket and the printer (log.c).
 *
 * The limiter is driven with explicit timestamps.  td_log() reads the
 * clock itself, so the printer tests rewind the limiter's last_ns instead
 * of waiting.
 */
#include "config.h"

#include <errno.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/log.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define NS_PER_S      1000000000ull
#define NS_PER_MS     1000000ull
/* An arbitrary CLOCK_MONOTONIC reading to start from. */
#define T0_NS (1000 * NS_PER_S)

/* --- the token bucket -------------------------------------------------------- */

static void test_ratelimit_init(void **state)
{
	struct td_ratelimit rl;

	memset(&rl, 0xff, sizeof(rl));
	td_ratelimit_init(&rl);
	assert_int_equal(rl.burst, 20);
	assert_int_equal(rl.rate_per_s, 5);
	assert_int_equal(rl.suppressed, 0);
}

/* Allow n messages at now_ns, then check the next one is dropped. */
static void expect_allowed_then_dropped(struct td_ratelimit *rl,
					uint64_t now_ns, unsigned int n)
{
	uint64_t suppressed = rl->suppressed;

	for (unsigned int i = 0; i < n; i++) {
		print_message("message %u of %u\n", i + 1, n);
		assert_int_equal(td_ratelimit_allow(rl, now_ns), 1);
	}
	assert_int_equal(td_ratelimit_allow(rl, now_ns), 0);
	assert_int_equal(rl->suppressed, suppressed + 1);
}

static void test_ratelimit_burst_then_drop(void **state)
{
	struct td_ratelimit rl;

	td_ratelimit_init(&rl);
	expect_allowed_then_dropped(&rl, T0_NS, 20);
	/* Every further drop is counted; allowed messages are not. */
	for (unsigned int i = 0; i < 9; i++)
		assert_int_equal(td_ratelimit_allow(&rl, T0_NS), 0);
	assert_int_equal(rl.suppressed, 10);
}

static void test_ratelimit_refill_5_per_s(void **state)
{
	struct td_ratelimit rl;
	uint64_t t = T0_NS;

	td_ratelimit_init(&rl);
	expect_allowed_then_dropped(&rl, t, 20);

	/* 100 ms: half a token, not enough. */
	t += 100 * NS_PER_MS;
	assert_int_equal(td_ratelimit_allow(&rl, t), 0);
	/* 200 ms in all: one token. */
	t += 100 * NS_PER_MS;
	expect_allowed_then_dropped(&rl, t, 1);
	/* One second: five tokens. */
	t += NS_PER_S;
	expect_allowed_then_dropped(&rl, t, 5);
	/* Two seconds: ten tokens. */
	t += 2 * NS_PER_S;
	expect_allowed_then_dropped(&rl, t, 10);
	assert_int_equal(rl.suppressed, 5);
}

static void test_ratelimit_never_above_burst(void **state)
{
	struct td_ratelimit rl;
	uint64_t t = T0_NS;

	td_ratelimit_init(&rl);
	expect_allowed_then_dropped(&rl, t, 20);
	/* An hour idle refills 18000 tokens' worth: capped at the burst. */
	t += 3600 * NS_PER_S;
	expect_allowed_then_dropped(&rl, t, 20);
	/* Idle from the start: still only the burst. */
	td_ratelimit_init(&rl);
	assert_int_equal(td_ratelimit_allow(&rl, T0_NS), 1);
	expect_allowed_then_dropped(&rl, T0_NS + 3600 * NS_PER_S, 20);
}

/* A steady 5 messages a second all get through, 6 a second do not. */
static void test_ratelimit_steady_rate(void **state)
{
	struct td_ratelimit rl;
	uint64_t t = T0_NS;
	unsigned int allowed = 0;

	td_ratelimit_init(&rl);
	expect_allowed_then_dropped(&rl, t, 20);
	rl.suppressed = 0;
	for (unsigned int i = 0; i < 50; i++) {
		t += 200 * NS_PER_MS;
		assert_int_equal(td_ratelimit_allow(&rl, t), 1);
	}
	/* 60 messages over 10 s at 6/s: 50 tokens refill. */
	for (unsigned int i = 0; i < 60; i++) {
		t += NS_PER_S / 6;
		allowed += (unsigned int)td_ratelimit_allow(&rl, t);
	}
	assert_in_range(allowed, 49, 50);
	assert_int_equal(rl.suppressed, 60 - allowed);
}

/* A clock that starts at 0 (a test's, or a fresh VM's) still refills. */
static void test_ratelimit_from_time_zero(void **state)
{
	struct td_ratelimit rl;

	td_ratelimit_init(&rl);
	expect_allowed_then_dropped(&rl, 0, 20);
	expect_allowed_then_dropped(&rl, NS_PER_S, 5);
}

/* --- level names ----------------------------------------------------------------- */

static void test_parse_level_table(void **state)
{
	static const struct {
		const char *name;
		int level;
	} rows[] = {
		{"err", TD_LOG_ERR},   {"warn", TD_LOG_WARN},
		{"info", TD_LOG_INFO}, {"debug", TD_LOG_DBG},
		{"", -EINVAL},	       {"ERR", -EINVAL},
		{"Info", -EINVAL},     {"error", -EINVAL},
		{"warning", -EINVAL},  {"dbg", -EINVAL},
		{"inf", -EINVAL},      {"info ", -EINVAL},
		{" info", -EINVAL},    {"3", -EINVAL},
		{"trace", -EINVAL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("td_log_parse_level(\"%s\")\n", rows[i].name);
		assert_int_equal(td_log_parse_level(rows[i].name),
				 rows[i].level);
	}
}

/* --- the printer -------------------------------------------------------------------- */

struct capture {
	char *buf;
	size_t len;
	FILE *stream;
};

static enum td_log_level initial_level;

static int group_setup(void **state)
{
	initial_level = td_log_get_level();
	return 0;
}

static int setup(void **state)
{
	struct capture *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	c->stream = open_memstream(&c->buf, &c->len);
	if (!c->stream) {
		free(c);
		return -1;
	}
	td_log_set_stream(c->stream);
	td_log_set_level(TD_LOG_INFO);
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct capture *c = *state;

	td_log_set_stream(NULL);
	td_log_set_level(TD_LOG_INFO);
	fclose(c->stream);
	free(c->buf);
	free(c);
	return 0;
}

/* What was logged so far (td_log flushes after every message). */
static const char *captured(struct capture *c)
{
	return c->buf ? c->buf : "";
}

static unsigned int count_lines(const char *s)
{
	unsigned int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void assert_matches(const char *text, const char *pattern)
{
	regex_t re;
	int err = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);

	assert_int_equal(err, 0);
	err = regexec(&re, text, 0, NULL, 0);
	regfree(&re);
	if (err)
		fail_msg("\"%s\" does not match /%s/", text, pattern);
}

#define STAMP_RE \
	"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} "

static void test_default_level_is_info(void **state)
{
	assert_int_equal(initial_level, TD_LOG_INFO);
}

static void test_log_line_with_vbd(void **state)
{
	struct capture *c = *state;

	td_log(TD_LOG_WARN, "some_func", "vbd-7", NULL, "answer %d", 42);
	assert_matches(captured(c),
		       STAMP_RE "warn some_func \\[vbd-7\\]: answer 42\n$");
}

static void test_log_line_without_vbd(void **state)
{
	struct capture *c = *state;

	td_log(TD_LOG_ERR, "other_func", NULL, NULL, "%s failed", "open");
	assert_matches(captured(c), STAMP_RE "err other_func: open failed\n$");
	assert_null(strchr(captured(c), '['));
}

/* The macros add the caller's function name. */
static void test_log_macros_add_func(void **state)
{
	struct capture *c = *state;

	td_info("hello %s", "world");
	assert_matches(captured(c), STAMP_RE
		       "info test_log_macros_add_func: hello world\n$");
}

/*
 * The last error is kept for a one-line report, even when the level or
 * the limiter drops it from the log; other levels do not touch it.
 */
static void test_log_last_err(void **state)
{
	struct td_ratelimit rl;
	uint64_t n = td_log_err_count();

	td_err("first: %d", 1);
	assert_int_equal(td_log_err_count(), n + 1);
	assert_string_equal(td_log_last_err(), "first: 1");
	td_warn("a warning");
	td_info("some info");
	assert_int_equal(td_log_err_count(), n + 1);
	assert_string_equal(td_log_last_err(), "first: 1");
	/* dropped by the limiter: still the last error */
	td_ratelimit_init(&rl);
	rl.tokens = 0;
	td_log(TD_LOG_ERR, "f", "vbd", &rl, "limited %s", "error");
	assert_int_equal(td_log_err_count(), n + 2);
	assert_string_equal(td_log_last_err(), "limited error");
	/* cut to the buffer, never overrun */
	char big[TD_LOG_LAST_ERR_MAX * 2];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	td_err("%s", big);
	assert_int_equal(strlen(td_log_last_err()), TD_LOG_LAST_ERR_MAX - 1);
}

static void test_log_level_filter(void **state)
{
	struct capture *c = *state;

	/* At info (the default), debug is dropped. */
	td_log(TD_LOG_DBG, "f", NULL, NULL, "dropped debug");
	assert_string_equal(captured(c), "");
	td_log(TD_LOG_INFO, "f", NULL, NULL, "kept info");
	assert_int_equal(count_lines(captured(c)), 1);
	assert_non_null(strstr(captured(c), "info f: kept info\n"));

	td_log_set_level(TD_LOG_DBG);
	assert_int_equal(td_log_get_level(), TD_LOG_DBG);
	td_dbg("kept debug");
	assert_int_equal(count_lines(captured(c)), 2);
	assert_non_null(strstr(captured(c), "debug test_log_level_filter: "
					    "kept debug\n"));

	td_log_set_level(TD_LOG_ERR);
	td_warn("dropped warn");
	td_info("dropped info");
	td_err("kept err");
	assert_int_equal(count_lines(captured(c)), 3);
	assert_null(strstr(captured(c), "dropped"));
	assert_non_null(strstr(captured(c), "kept err\n"));
}

static void test_log_rate_limited_suppressed_count(void **state)
{
	struct capture *c = *state;
	struct td_ratelimit rl;

	td_ratelimit_init(&rl);
	for (unsigned int i = 0; i < 20; i++)
		td_log(TD_LOG_ERR, "f", "vbd-1", &rl, "flood %u", i);
	assert_int_equal(count_lines(captured(c)), 20);
	for (unsigned int i = 0; i < 5; i++)
		td_log(TD_LOG_ERR, "f", "vbd-1", &rl, "dropped %u", i);
	assert_int_equal(count_lines(captured(c)), 20);
	assert_null(strstr(captured(c), "dropped"));
	assert_int_equal(rl.suppressed, 5);

	/* A second later there are tokens again. */
	rl.last_ns -= NS_PER_S;
	td_log(TD_LOG_ERR, "f", "vbd-1", &rl, "back");
	assert_int_equal(count_lines(captured(c)), 21);
	assert_non_null(strstr(captured(c),
			       "err f [vbd-1]: back "
			       "(5 similar messages suppressed)\n"));
	assert_int_equal(rl.suppressed, 0);

	/* The count is printed once. */
	td_log(TD_LOG_ERR, "f", "vbd-1", &rl, "again");
	assert_int_equal(count_lines(captured(c)), 22);
	assert_non_null(strstr(captured(c), "err f [vbd-1]: again\n"));
}

/* A message below the level neither spends a token nor counts as dropped. */
static void test_log_filtered_spends_no_token(void **state)
{
	struct capture *c = *state;
	struct td_ratelimit rl;

	td_ratelimit_init(&rl);
	for (unsigned int i = 0; i < 30; i++)
		td_log(TD_LOG_DBG, "f", "vbd-1", &rl, "debug %u", i);
	assert_string_equal(captured(c), "");
	assert_int_equal(rl.suppressed, 0);
	for (unsigned int i = 0; i < 20; i++)
		td_log(TD_LOG_WARN, "f", "vbd-1", &rl, "warn %u", i);
	assert_int_equal(count_lines(captured(c)), 20);
}

/* Without a limiter, nothing is ever dropped. */
static void test_log_unlimited_without_limiter(void **state)
{
	struct capture *c = *state;

	for (unsigned int i = 0; i < 100; i++)
		td_log(TD_LOG_ERR, "f", "vbd-1", NULL, "line %u", i);
	assert_int_equal(count_lines(captured(c)), 100);
	assert_null(strstr(captured(c), "suppressed"));
}

/* td_log_set_stream(NULL) sends messages back to stderr. */
static void test_log_null_stream_is_stderr(void **state)
{
	struct capture *c = *state;
	FILE *file = tmpfile();
	char buf[256] = "";
	int saved = dup(STDERR_FILENO);
	size_t n;

	assert_non_null(file);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_int_equal(dup2(fileno(file), STDERR_FILENO), STDERR_FILENO);
	td_log_set_stream(NULL);
	td_log(TD_LOG_ERR, "f", NULL, NULL, "to stderr");
	fflush(stderr);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);

	rewind(file);
	n = fread(buf, 1, sizeof(buf) - 1, file);
	buf[n] = '\0';
	fclose(file);
	assert_matches(buf, STAMP_RE "err f: to stderr\n$");
	assert_string_equal(captured(c), "");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ratelimit_init),
		cmocka_unit_test(test_ratelimit_burst_then_drop),
		cmocka_unit_test(test_ratelimit_refill_5_per_s),
		cmocka_unit_test(test_ratelimit_never_above_burst),
		cmocka_unit_test(test_ratelimit_steady_rate),
		cmocka_unit_test(test_ratelimit_from_time_zero),
		cmocka_unit_test(test_parse_level_table),
		cmocka_unit_test(test_default_level_is_info),
		T(test_log_line_with_vbd),
		T(test_log_line_without_vbd),
		T(test_log_macros_add_func),
		T(test_log_level_filter),
		T(test_log_last_err),
		T(test_log_rate_limited_suppressed_count),
		T(test_log_filtered_spends_no_token),
		T(test_log_unlimited_without_limiter),
		T(test_log_null_stream_is_stderr),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
