/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_shm-proto.c - the shm negotiation lines (tapdisk/shm-proto.c): a
 * hand-written table of good and hostile lines with the answer each must
 * get, the values the good ones carry, and format/parse round trips.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "frontends/shm/shm-proto.h"

struct line_case {
	const char *line;
	int err;
};

#define C "connect version=1 "

static const struct line_case connect_cases[] = {
	{C "ring-page-order=0 data-pages=1", 0},
	{C "data-pages=1 ring-page-order=3", 0}, /* any order after version */
	{C "ring-page-order=8 data-pages=4294967295 max-indirect-segments=4096",
	 0},
	{C "ring-page-order=0 data-pages=1 max-indirect-segments=11", 0},
	/* multi-queue-num-queues: optional, 1..16 */
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=1", 0},
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=16", 0},
	{C "multi-queue-num-queues=4 ring-page-order=0 data-pages=1", 0},
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=0", -EINVAL},
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=17", -EINVAL},
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=4294967297",
	 -EINVAL},
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=", -EPROTO},
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=02", -EPROTO},
	{C "ring-page-order=0 data-pages=1 multi-queue-num-queues=2 "
	   "multi-queue-num-queues=2",
	 -EPROTO},
	{C "ring-page-order=0 data-pages=1 multi-queue-max-queues=2", -EPROTO},
	{C "ring-page-order=0 multi-queue-num-queues=2", -EPROTO},
	/* versions */
	{"connect version=2 ring-page-order=0 data-pages=1", -ENOTSUP},
	{"connect version=2 some-new-key=1", -ENOTSUP},
	{"connect version=0 ring-page-order=0 data-pages=1", -ENOTSUP},
	{"connect ring-page-order=0 version=1 data-pages=1", -EPROTO},
	{"connect", -EPROTO},
	/* keys */
	{C "ring-page-order=0", -EPROTO},
	{C "data-pages=1", -EPROTO},
	{C "ring-page-order=0 data-pages=1 ring-page-order=0", -EPROTO},
	{C "ring-page-order=0 data-pages=1 version=1", -EPROTO},
	{C "ring-page-order=0 data-pages=1 foo=1", -EPROTO},
	{C "Ring-page-order=0 data-pages=1", -EPROTO},
	{C "ring_page_order=0 data-pages=1", -EPROTO},
	{C "=0 ring-page-order=0 data-pages=1", -EPROTO},
	{C "ring-page-order data-pages=1", -EPROTO},
	{C "ring-page-order=0 data-pages=1=1", -EPROTO},
	/* values */
	{C "ring-page-order=9 data-pages=1", -EINVAL},
	{C "ring-page-order=0 data-pages=0", -EINVAL},
	{C "ring-page-order=0 data-pages=4294967296", -EINVAL},
	{C "ring-page-order=0 data-pages=18446744073709551615", -EINVAL},
	{C "ring-page-order=0 data-pages=18446744073709551616", -EPROTO},
	{C "ring-page-order=0 data-pages=184467440737095516150", -EPROTO},
	{C "ring-page-order=00 data-pages=1", -EPROTO},
	{C "ring-page-order=01 data-pages=1", -EPROTO},
	{C "ring-page-order=-1 data-pages=1", -EPROTO},
	{C "ring-page-order=+1 data-pages=1", -EPROTO},
	{C "ring-page-order=0x1 data-pages=1", -EPROTO},
	{C "ring-page-order= data-pages=1", -EPROTO},
	{C "ring-page-order=1.0 data-pages=1", -EPROTO},
	{C "ring-page-order=0 data-pages=1 max-indirect-segments=10", -EINVAL},
	{C "ring-page-order=0 data-pages=1 max-indirect-segments=4097",
	 -EINVAL},
	/* spacing and bytes */
	{"connect  version=1 ring-page-order=0 data-pages=1", -EPROTO},
	{C "ring-page-order=0  data-pages=1", -EPROTO},
	{C "ring-page-order=0 data-pages=1 ", -EPROTO},
	{" " C "ring-page-order=0 data-pages=1", -EPROTO},
	{C "ring-page-order=0 data-pages=1\r", -EPROTO},
	{C "ring-page-order=0\tdata-pages=1", -EPROTO},
	{C "ring-page-order=0 data-pages=1\n", -EPROTO},
	{"connect\tversion=1 ring-page-order=0 data-pages=1", -EPROTO},
	{C "ring-page-order=0 data-pages=\xc2\xb9", -EPROTO},
	/* other messages */
	{"connectx version=1 ring-page-order=0 data-pages=1", -EPROTO},
	{"connected ring-page-order=0 ring-bytes=4096 data-pages=1 "
	 "data-bytes=4096 max-indirect-segments=11",
	 -EPROTO},
	{"", -EPROTO},
	{"hello", -EPROTO},
};

static void test_connect_table(void **state)
{
	for (size_t i = 0; i < sizeof(connect_cases) / sizeof(*connect_cases);
	     i++) {
		const struct line_case *c = &connect_cases[i];
		struct shm_connect_msg m;
		char why[SHM_WHY_MAX] = "";
		int err = shm_parse_connect(c->line, strlen(c->line), &m, why,
					    sizeof(why));

		if (err != c->err)
			fail_msg("'%s': %d (%s), expected %d", c->line, err,
				 why, c->err);
		if (err)
			assert_true(why[0] != '\0'); /* it says why */
	}
}

static void test_connect_values(void **state)
{
	const char *l = C "data-pages=4294967295 ring-page-order=8 "
			  "max-indirect-segments=256";
	struct shm_connect_msg m;

	assert_int_equal(shm_parse_connect(l, strlen(l), &m, NULL, 0), 0);
	assert_int_equal(m.version, 1);
	assert_int_equal(m.ring_page_order, 8);
	assert_int_equal(m.data_pages, 4294967295u);
	assert_int_equal(m.max_indirect_segments, 256);
	l = C "ring-page-order=0 data-pages=7";
	assert_int_equal(shm_parse_connect(l, strlen(l), &m, NULL, 0), 0);
	assert_int_equal(m.max_indirect_segments, 0); /* absent */
	assert_int_equal(m.nr_queues, 1);	      /* absent: one ring */
	l = C "ring-page-order=0 data-pages=7 multi-queue-num-queues=3";
	assert_int_equal(shm_parse_connect(l, strlen(l), &m, NULL, 0), 0);
	assert_int_equal(m.nr_queues, 3);
}

/* Bytes a C string cannot show: a NUL, and a line too long. */
static void test_connect_raw_bytes(void **state)
{
	static const char nul[] = C "ring-page-order=0\0data-pages=1";
	char longline[SHM_LINE_MAX + 8];
	struct shm_connect_msg m;
	int n;

	assert_int_equal(shm_parse_connect(nul, sizeof(nul) - 1, &m, NULL, 0),
			 -EPROTO);
	/* Good up to its length: the parser reads only len bytes. */
	assert_int_equal(shm_parse_connect(C "ring-page-order=0 data-pages=12",
					   strlen(C) + 30, &m, NULL, 0),
			 0);
	assert_int_equal(m.data_pages, 1);
	n = snprintf(longline, sizeof(longline), C "ring-page-order=0 ");
	memset(longline + n, 'x', sizeof(longline) - (size_t)n - 1);
	longline[sizeof(longline) - 1] = '\0';
	assert_int_equal(shm_parse_connect(longline, SHM_LINE_MAX, &m, NULL, 0),
			 -EPROTO);
}

#define B "tapstripe-shm version=1 "

static const struct line_case backend_cases[] = {
	{B "sectors=131072 sector-size=512 info=0 feature-flush-cache=1 "
	   "feature-discard=1 discard-secure=0 "
	   "feature-max-indirect-segments=4096 "
	   "max-ring-page-order=8 max-data-pages=262144",
	 0},
	{B "sectors=0 sector-size=4096 info=4 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1",
	 0},
	{B "sectors=1 sector-size=768 info=0 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1",
	 -EINVAL},
	{B "sectors=1 sector-size=256 info=0 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1",
	 -EINVAL},
	{B "sectors=1 sector-size=512 info=0 feature-flush-cache=2 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1",
	 -EINVAL},
	{B "sectors=36028797018963968 sector-size=512 info=0 "
	   "feature-flush-cache=0 feature-discard=0 discard-secure=0 "
	   "max-ring-page-order=0 max-data-pages=1",
	 -EINVAL},
	{B "sectors=1 sector-size=512 info=0 feature-flush-cache=0 "
	   "feature-discard=0 max-ring-page-order=0 max-data-pages=1",
	 -EPROTO},
	{B "sectors=1 sector-size=512 info=0 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=9 "
	   "max-data-pages=1",
	 -EINVAL},
	{"tapstripe-shm version=3 sectors=1", -ENOTSUP},
	/* multi-queue-max-queues: optional, 1..16 */
	{B "sectors=1 sector-size=512 info=0 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1 multi-queue-max-queues=16",
	 0},
	{B "sectors=1 sector-size=512 info=0 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1 multi-queue-max-queues=0",
	 -EINVAL},
	{B "sectors=1 sector-size=512 info=0 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1 multi-queue-max-queues=17",
	 -EINVAL},
	{B "sectors=1 sector-size=512 info=0 feature-flush-cache=0 "
	   "feature-discard=0 discard-secure=0 max-ring-page-order=0 "
	   "max-data-pages=1 multi-queue-num-queues=2",
	 -EPROTO},
};

static void test_backend_table(void **state)
{
	for (size_t i = 0; i < sizeof(backend_cases) / sizeof(*backend_cases);
	     i++) {
		const struct line_case *c = &backend_cases[i];
		struct shm_backend_msg m;
		char why[SHM_WHY_MAX] = "";
		int err = shm_parse_backend(c->line, strlen(c->line), &m, why,
					    sizeof(why));

		if (err != c->err)
			fail_msg("'%s': %d (%s), expected %d", c->line, err,
				 why, c->err);
	}
}

static void test_backend_round_trip(void **state)
{
	struct shm_backend_msg m, back;
	char line[SHM_LINE_MAX];
	int n;

	memset(&m, 0, sizeof(m)); /* the padding too: compared whole */
	m.version = 1;
	m.sectors = 2097152;
	m.sector_size = 4096;
	m.info = SHM_INFO_READONLY;
	m.flush_cache = true;
	m.max_indirect_segments = 256;
	m.max_ring_page_order = 4;
	m.max_data_pages = 1000;
	m.max_queues = 16;
	n = shm_format_backend(&m, line, sizeof(line));
	assert_non_null(strstr(line, " multi-queue-max-queues=16\n"));

	assert_true(n > 0 && line[n - 1] == '\n' && line[n] == '\0');
	assert_int_equal(shm_msg_kind(line, (size_t)n - 1), SHM_KIND_BACKEND);
	assert_int_equal(shm_parse_backend(line, (size_t)n - 1, &back, NULL, 0),
			 0);
	assert_memory_equal(&m, &back, sizeof(m));
	/* No indirect: the key is left out, as xenbus leaves it out. */
	m.max_indirect_segments = 0;
	n = shm_format_backend(&m, line, sizeof(line));
	assert_null(strstr(line, "indirect"));
	assert_int_equal(shm_parse_backend(line, (size_t)n - 1, &back, NULL, 0),
			 0);
	assert_int_equal(back.max_indirect_segments, 0);
	/* One ring: the key is left out too, and absent means 1. */
	m.max_queues = 1;
	n = shm_format_backend(&m, line, sizeof(line));
	assert_null(strstr(line, "multi-queue"));
	assert_int_equal(shm_parse_backend(line, (size_t)n - 1, &back, NULL, 0),
			 0);
	assert_int_equal(back.max_queues, 1);
	assert_int_equal(shm_format_backend(&m, line, 40), -ENOSPC);
}

static void test_connect_round_trip(void **state)
{
	struct shm_connect_msg m = {1, 5, 123456, 4096, 1}, back;
	char line[SHM_LINE_MAX];
	int n = shm_format_connect(&m, line, sizeof(line));

	assert_string_equal(line, "connect version=1 ring-page-order=5 "
				  "data-pages=123456 "
				  "max-indirect-segments=4096\n");
	assert_int_equal(shm_parse_connect(line, (size_t)n - 1, &back, NULL, 0),
			 0);
	assert_memory_equal(&m, &back, sizeof(m));
	m.nr_queues = 4;
	n = shm_format_connect(&m, line, sizeof(line));
	assert_string_equal(line, "connect version=1 ring-page-order=5 "
				  "data-pages=123456 "
				  "max-indirect-segments=4096 "
				  "multi-queue-num-queues=4\n");
	assert_int_equal(shm_parse_connect(line, (size_t)n - 1, &back, NULL, 0),
			 0);
	assert_memory_equal(&m, &back, sizeof(m));
}

static void test_connected(void **state)
{
	struct shm_connected_msg m, back;
	char line[SHM_LINE_MAX];
	int n;
	static const struct line_case bad[] = {
		/* sizes that do not match the page counts */
		{"connected ring-page-order=3 ring-bytes=4096 data-pages=100 "
		 "data-bytes=409600 max-indirect-segments=11",
		 -EINVAL},
		{"connected ring-page-order=3 ring-bytes=32768 data-pages=100 "
		 "data-bytes=409601 max-indirect-segments=11",
		 -EINVAL},
		{"connected ring-page-order=3 ring-bytes=32768 data-pages=100 "
		 "data-bytes=409600",
		 -EPROTO},
		{"connected version=1 ring-page-order=3 ring-bytes=32768 "
		 "data-pages=100 data-bytes=409600 max-indirect-segments=11",
		 -EPROTO},
		/* one ring is said by leaving the key out */
		{"connected ring-page-order=3 ring-bytes=32768 data-pages=100 "
		 "data-bytes=409600 max-indirect-segments=11 "
		 "multi-queue-num-queues=1",
		 -EINVAL},
		{"connected ring-page-order=3 ring-bytes=32768 data-pages=100 "
		 "data-bytes=409600 max-indirect-segments=11 "
		 "multi-queue-num-queues=17",
		 -EINVAL},
	};

	memset(&m, 0, sizeof(m)); /* the padding too: compared whole */
	m.ring_page_order = 3;
	m.ring_bytes = 32768;
	m.data_pages = 100;
	m.data_bytes = 409600;
	m.max_indirect_segments = 11;
	m.nr_queues = 1;
	n = shm_format_connected(&m, line, sizeof(line));
	assert_null(strstr(line, "multi-queue"));
	assert_int_equal(
		shm_parse_connected(line, (size_t)n - 1, &back, NULL, 0), 0);
	assert_memory_equal(&m, &back, sizeof(m));
	m.nr_queues = 16;
	n = shm_format_connected(&m, line, sizeof(line));
	assert_non_null(strstr(line, " multi-queue-num-queues=16\n"));
	assert_int_equal(
		shm_parse_connected(line, (size_t)n - 1, &back, NULL, 0), 0);
	assert_memory_equal(&m, &back, sizeof(m));
	assert_int_equal(shm_msg_kind(line, (size_t)n), SHM_KIND_CONNECTED);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_int_equal(shm_parse_connected(bad[i].line,
						     strlen(bad[i].line), &back,
						     NULL, 0),
				 bad[i].err);
}

static void test_errors(void **state)
{
	char line[SHM_LINE_MAX + 64], msg[64], text[1000];
	int err = 0, n;

	n = shm_format_error(-EINVAL, "bad \x01 thing", line, sizeof(line));
	assert_string_equal(line, "error EINVAL bad ? thing\n");
	assert_int_equal(
		shm_parse_error(line, (size_t)n - 1, &err, msg, sizeof(msg)),
		0);
	assert_int_equal(err, -EINVAL);
	assert_string_equal(msg, "bad ? thing");
	n = shm_format_error(-E2BIG, "", line, sizeof(line));
	assert_string_equal(line, "error E2BIG\n");
	assert_int_equal(
		shm_parse_error(line, (size_t)n - 1, &err, msg, sizeof(msg)),
		0);
	assert_int_equal(err, -E2BIG);
	assert_string_equal(msg, "");
	/* A long text is cut so that the line fits, LF included. */
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	n = shm_format_error(-EPROTO, text, line, sizeof(line));
	assert_int_equal(n, SHM_LINE_MAX - 1);
	assert_int_equal(line[n - 1], '\n');
	/* A name this side does not know is still an error. */
	assert_int_equal(
		shm_parse_error("error ENEWTHING x", 17, &err, NULL, 0), 0);
	assert_int_equal(err, -EIO);
	assert_int_equal(shm_parse_error("error", 5, &err, NULL, 0), -EPROTO);
	assert_int_equal(shm_parse_error("error einval", 12, &err, NULL, 0),
			 -EPROTO);
	assert_int_equal(shm_parse_error("error E", 7, &err, NULL, 0), -EPROTO);
	assert_int_equal(shm_parse_error("error EINVAL\x7f", 13, &err, NULL, 0),
			 -EPROTO);
}

static void test_kinds(void **state)
{
	assert_int_equal(shm_msg_kind("connect x", 9), SHM_KIND_CONNECT);
	assert_int_equal(shm_msg_kind("connect", 7), SHM_KIND_CONNECT);
	assert_int_equal(shm_msg_kind("connected x", 11), SHM_KIND_CONNECTED);
	assert_int_equal(shm_msg_kind("connectedx", 10), SHM_KIND_UNKNOWN);
	assert_int_equal(shm_msg_kind("error E", 7), SHM_KIND_ERROR);
	assert_int_equal(shm_msg_kind("tapstripe-shm", 13), SHM_KIND_BACKEND);
	assert_int_equal(shm_msg_kind("", 0), SHM_KIND_UNKNOWN);
	assert_int_equal(shm_msg_kind("resized sectors=1", 17),
			 SHM_KIND_RESIZED);
}

/* "resized sectors=N": round trip, bounds, and hostile lines. */
static void test_resized(void **state)
{
	static const char *const bad[] = {
		"resized",
		"resized sectors=",
		"resized sectors=01",
		"resized sectors=1 sectors=2",
		"resized sectors=1 extra=2",
		"resized  sectors=1",
		"resized sectors=36028797018963968", /* 2^55: beyond the max */
		"resize sectors=1",
	};
	char line[SHM_LINE_MAX], why[SHM_WHY_MAX];
	uint64_t sectors = 0;
	int n;

	(void)state;
	n = shm_format_resized(98304, line, sizeof(line));
	assert_string_equal(line, "resized sectors=98304\n");
	assert_int_equal(shm_parse_resized(line, (size_t)n - 1, &sectors, why,
					   sizeof(why)),
			 0);
	assert_int_equal(sectors, 98304);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		sectors = 7;
		assert_true(shm_parse_resized(bad[i], strlen(bad[i]), &sectors,
					      why, sizeof(why)) < 0);
		assert_int_equal(sectors, 7);
		assert_true(why[0] != '\0');
	}
	assert_int_equal(shm_format_resized(1, line, 8), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_table),
		cmocka_unit_test(test_connect_values),
		cmocka_unit_test(test_connect_raw_bytes),
		cmocka_unit_test(test_backend_table),
		cmocka_unit_test(test_backend_round_trip),
		cmocka_unit_test(test_connect_round_trip),
		cmocka_unit_test(test_connected),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_resized),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
