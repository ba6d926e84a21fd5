/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_block-null.c - the null driver, opened through td_vbd_open() with
 * the real driver table, and driven through the event loop.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "drivers/drivers.h"
#include "common/log.h"
#include "common/loop.h"
#include "tapdisk/stats-format.h"
#include "tapdisk/vbd.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define GIB	      (1ull << 30)
#define POISON	      0xAA
/* Passes after which an I/O that has not completed never will. */
#define MAX_PASSES 16

struct fixture {
	struct td_loop *loop;
	struct td_vbd *vbd;
	/* Log capture, so that the error messages can be checked. */
	char *log_buf;
	size_t log_len;
	FILE *log;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->log = open_memstream(&f->log_buf, &f->log_len);
	if (!f->log || td_loop_create(&f->loop)) {
		if (f->log)
			fclose(f->log);
		free(f->log_buf);
		free(f);
		return -1;
	}
	td_log_set_stream(f->log);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->vbd)
		assert_int_equal(td_vbd_close(f->vbd), 0);
	td_loop_destroy(f->loop);
	td_log_set_stream(NULL);
	fclose(f->log);
	free(f->log_buf);
	free(f);
	return 0;
}

static int open_chain(struct fixture *f, const char *chain)
{
	struct td_vbd_params params = {.name = "vbd-null", .chain = chain};

	return td_vbd_open(f->loop, td_driver_table, &params, &f->vbd);
}

static const char *logged(struct fixture *f)
{
	return f->log_buf ? f->log_buf : "";
}

/* --- open arguments ---------------------------------------------------------- */

static void test_open_sizes(void **state)
{
	static const struct {
		const char *chain;
		uint64_t size_sectors;
	} rows[] = {
		/* 1 GiB by default */
		{"null", 2097152},
		{"null:", 2097152},
		/* size=, with or without a binary suffix */
		{"null:size=1G", 2097152},
		{"null:size=4096", 8},
		{"null:size=512", 1},
		{"null:size=4K", 8},
		{"null:size=2T", 4294967296ull},
		{"null:size=1MiB", 2048},
	};
	struct fixture *f = *state;

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("%s\n", rows[i].chain);
		assert_int_equal(open_chain(f, rows[i].chain), 0);
		assert_int_equal(td_vbd_get_info(f->vbd)->size_sectors,
				 rows[i].size_sectors);
		assert_string_equal(td_vbd_chain(f->vbd), rows[i].chain);
		assert_int_equal(td_vbd_close(f->vbd), 0);
		f->vbd = NULL;
	}
	assert_string_equal(logged(f), "");
}

static void test_open_bad_arguments(void **state)
{
	static const struct {
		const char *chain;
		const char *why; /* in the logged message */
	} rows[] = {
		{"null:size=100", "not a positive multiple of 512"},
		{"null:size=513", "not a positive multiple of 512"},
		{"null:size=0", "not a positive multiple of 512"},
		{"null:size=abc", "bad arguments 'size=abc'"},
		{"null:bogus", "bad arguments 'bogus'"},
		{"null:size=", "bad arguments 'size='"},
		{"null:SIZE=1G", "bad arguments 'SIZE=1G'"},
		{"null:size:1G", "bad arguments 'size:1G'"},
		{"null:size=1G,x", "bad arguments 'size=1G,x'"},
		{"null:size=-1", "bad arguments 'size=-1'"},
		{"null:size=16E", "bad arguments 'size=16E'"},
	};
	struct fixture *f = *state;

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		print_message("%s\n", rows[i].chain);
		f->vbd = NULL;
		assert_int_equal(open_chain(f, rows[i].chain), -EINVAL);
		assert_null(f->vbd);
		assert_non_null(strstr(logged(f), rows[i].why));
		/* Start each row with an empty log. */
		fclose(f->log);
		free(f->log_buf);
		f->log_buf = NULL;
		f->log = open_memstream(&f->log_buf, &f->log_len);
		assert_non_null(f->log);
		td_log_set_stream(f->log);
	}
}

static void test_info(void **state)
{
	struct fixture *f = *state;
	const struct td_disk_info *info;

	assert_int_equal(open_chain(f, "null:size=1G"), 0);
	info = td_vbd_get_info(f->vbd);
	assert_int_equal(info->size_sectors, GIB / 512);
	assert_int_equal(info->sector_size, 512);
	assert_int_equal(info->features, TD_FEAT_FLUSH | TD_FEAT_FUA |
						 TD_FEAT_DISCARD |
						 TD_FEAT_WRITE_ZEROES);
	assert_int_equal(info->boundary_sectors, 0);
	assert_false(info->read_only);
	/* null has no limit of its own: the vbd's default split applies. */
	assert_int_equal(info->max_io_sectors,
			 TD_VBD_DEFAULT_MAX_IO_BYTES / 512);
}

/* --- I/O ------------------------------------------------------------------------ */

struct io_done {
	unsigned int calls;
	int err;
};

static void io_cb(struct td_vbd_io *io, int err)
{
	struct io_done *done = io->opaque;

	done->calls++;
	done->err = err;
}

/*
 * Submit io; the completion must not have run when td_vbd_submit returns,
 * and must run exactly once from the loop.
 */
static void submit_and_complete(struct fixture *f, struct td_vbd_io *io)
{
	struct io_done done = {0};

	io->cb = io_cb;
	io->opaque = &done;
	assert_int_equal(td_vbd_submit(f->vbd, io), 0);
	assert_int_equal(done.calls, 0);
	for (unsigned int i = 0; i < MAX_PASSES && !done.calls; i++)
		assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(done.calls, 1);
	assert_int_equal(done.err, 0);
	/* And never again. */
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(done.calls, 1);
}

static void assert_bytes(const unsigned char *buf, size_t from, size_t to,
			 unsigned char value)
{
	for (size_t i = from; i < to; i++)
		if (buf[i] != value)
			fail_msg("byte %zu is 0x%02x, expected 0x%02x", i,
				 buf[i], value);
}

static void test_read_gives_zeroes(void **state)
{
	struct fixture *f = *state;
	unsigned char *buf = malloc(8192);
	struct iovec iov[2];
	struct td_vbd_io io = {.op = TD_OP_READ, .sector = 7};

	assert_non_null(buf);
	memset(buf, POISON, 8192);
	/* Two pieces of one buffer, with a gap and a tail left alone. */
	iov[0].iov_base = buf;
	iov[0].iov_len = 1024;
	iov[1].iov_base = buf + 2048;
	iov[1].iov_len = 3072;
	io.iov = iov;
	io.iovcnt = 2;
	io.nr_sectors = 8;
	assert_int_equal(open_chain(f, "null:size=1M"), 0);
	submit_and_complete(f, &io);
	assert_bytes(buf, 0, 1024, 0);
	assert_bytes(buf, 1024, 2048, POISON);
	assert_bytes(buf, 2048, 5120, 0);
	assert_bytes(buf, 5120, 8192, POISON);
	free(buf);
}

static void test_write_flush_discard_write_zeroes(void **state)
{
	static const struct {
		enum td_op op;
		uint32_t flags;
		uint64_t sector;
		uint32_t nr_sectors;
	} rows[] = {
		{TD_OP_WRITE, 0, 0, 8},
		{TD_OP_WRITE, TD_REQ_FUA, 2040, 8}, /* the disk's last 4 KiB */
		{TD_OP_FLUSH, 0, 0, 0},
		{TD_OP_DISCARD, 0, 16, 2032},
		{TD_OP_WRITE_ZEROES, 0, 100, 50},
		{TD_OP_WRITE_ZEROES, TD_REQ_FUA | TD_REQ_NO_HOLE, 0, 1},
	};
	struct fixture *f = *state;
	unsigned char buf[4096];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};

	memset(buf, POISON, sizeof(buf));
	assert_int_equal(open_chain(f, "null:size=1M"), 0);
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct td_vbd_io io = {
			.op = rows[i].op,
			.flags = rows[i].flags,
			.sector = rows[i].sector,
			.nr_sectors = rows[i].nr_sectors,
		};

		print_message("%s\n", td_op_name(rows[i].op));
		if (rows[i].op == TD_OP_WRITE) {
			io.iov = &iov;
			io.iovcnt = 1;
		}
		submit_and_complete(f, &io);
	}
	/* A write leaves the caller's buffer alone. */
	assert_bytes(buf, 0, sizeof(buf), POISON);
}

/* The disk really has the size it was given. */
static void test_io_past_end(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[1024];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct io_done done = {0};
	struct td_vbd_io io = {
		.op = TD_OP_READ,
		.sector = 7, /* 2 sectors from sector 7 of an 8-sector disk */
		.nr_sectors = 2,
		.iov = &iov,
		.iovcnt = 1,
		.cb = io_cb,
		.opaque = &done,
	};

	assert_int_equal(open_chain(f, "null:size=4096"), 0);
	assert_int_equal(td_vbd_submit(f->vbd, &io), -ERANGE);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(done.calls, 0);
}

static void test_close_busy_until_completed(void **state)
{
	struct fixture *f = *state;
	struct io_done done = {0};
	struct td_vbd_io io = {
		.op = TD_OP_FLUSH,
		.cb = io_cb,
		.opaque = &done,
	};

	assert_int_equal(open_chain(f, "null"), 0);
	assert_int_equal(td_vbd_submit(f->vbd, &io), 0);
	assert_int_equal(td_vbd_close(f->vbd), -EBUSY);
	assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(done.calls, 1);
	/* teardown closes it, and checks that succeeds */
}

static void test_stats(void **state)
{
	struct fixture *f = *state;
	/* 4 MiB + 4 KiB: split in two by the vbd's 4 MiB default. */
	size_t big = TD_VBD_DEFAULT_MAX_IO_BYTES + 4096;
	unsigned char *buf = malloc(big);
	struct iovec iov = {.iov_base = buf, .iov_len = 4096};
	struct iovec big_iov = {.iov_base = buf, .iov_len = big};
	struct td_vbd_io ios[] = {
		{.op = TD_OP_READ, .nr_sectors = 8, .iov = &iov, .iovcnt = 1},
		{.op = TD_OP_READ,
		 .sector = 8,
		 .nr_sectors = 8,
		 .iov = &iov,
		 .iovcnt = 1},
		{.op = TD_OP_WRITE,
		 .sector = 64,
		 .nr_sectors = (uint32_t)(big / 512),
		 .iov = &big_iov,
		 .iovcnt = 1},
		{.op = TD_OP_FLUSH},
		{.op = TD_OP_DISCARD, .sector = 1024, .nr_sectors = 16},
		{.op = TD_OP_WRITE_ZEROES, .sector = 2048, .nr_sectors = 4},
	};
	struct td_vbd_stats st;
	uint64_t lat_total = 0;

	assert_non_null(buf);
	assert_int_equal(open_chain(f, "null"), 0);
	td_vbd_get_stats(f->vbd, &st);
	assert_int_equal(st.counters[TD_STAT_BACKEND_SUBMITS], 0);
	assert_int_equal(st.reqs[TD_OP_READ], 0);

	for (size_t i = 0; i < ARRAY_SIZE(ios); i++)
		submit_and_complete(f, &ios[i]);

	td_vbd_get_stats(f->vbd, &st);
	assert_int_equal(st.reqs[TD_OP_READ], 2);
	assert_int_equal(st.reqs[TD_OP_WRITE], 1);
	assert_int_equal(st.reqs[TD_OP_FLUSH], 1);
	assert_int_equal(st.reqs[TD_OP_DISCARD], 1);
	assert_int_equal(st.reqs[TD_OP_WRITE_ZEROES], 1);
	assert_int_equal(st.bytes[TD_OP_READ], 8192);
	assert_int_equal(st.bytes[TD_OP_WRITE], 4198400);
	assert_int_equal(st.bytes[TD_OP_FLUSH], 0);
	assert_int_equal(st.bytes[TD_OP_DISCARD], 8192);
	assert_int_equal(st.bytes[TD_OP_WRITE_ZEROES], 2048);
	for (int op = 0; op < TD_OP_COUNT; op++)
		assert_int_equal(st.errors[op], 0);
	/* One backend submit per piece: the big write made two. */
	assert_int_equal(st.pieces, 7);
	assert_int_equal(st.counters[TD_STAT_BACKEND_SUBMITS], 7);
	assert_int_equal(st.counters[TD_STAT_BACKEND_MERGES], 0);
	assert_int_equal(st.inflight, 0);
	/* The three data I/Os had one iovec each. */
	assert_int_equal(st.seg_hist[0], 3);
	/* Every I/O got a latency sample. */
	for (unsigned int b = 0; b < TD_LAT_BUCKETS; b++)
		lat_total += st.lat_hist[b];
	assert_int_equal(lat_total, 6);
	free(buf);
}

/*
 * tap-ctl stats names the same driver counters, in the same order, for
 * every chain of the real driver table: the vbd's and, at 0 here, sort's,
 * qos's and cbt's (td-front and td-bench read them by name).
 */
static void test_stats_counter_keys(void **state)
{
	static const char *const keys[] = {
		"backend_submits", "backend_merges", "sort_in",
		"sort_out",	   "sort_merges",    "sort_max_merge_bytes",
		"qos_passed",	   "qos_delayed",    "qos_max_queued",
		"cbt_marks",	   "cbt_failures",   "merged_iov_entries",
	};
	struct fixture *f = *state;
	struct td_report r = {.name = "vbd-null",
			      .chain = "null:size=1M",
			      .state = "running"};
	struct td_strbuf text, json;
	const char *at_text, *at_json;
	char line[64];

	assert_int_equal(open_chain(f, "null:size=1M"), 0);
	td_vbd_get_stats(f->vbd, &r.stats);
	assert_int_equal(r.stats.nr_driver_counters, 9);
	td_strbuf_init(&text);
	td_strbuf_init(&json);
	assert_int_equal(td_format_stats_text(&r, &text), 0);
	assert_int_equal(td_format_stats_json(&r, &json), 0);
	at_text = strstr(text.data, "\ndriver counters\n");
	at_json = strstr(json.data, "\"counters\": {");
	assert_non_null(at_text);
	assert_non_null(at_json);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		print_message("%s\n", keys[i]);
		/* text: the next line of the section */
		at_text = strchr(at_text + 1, '\n');
		snprintf(line, sizeof(line), "\n  %-24s %14d\n", keys[i], 0);
		assert_memory_equal(at_text, line, strlen(line));
		/* JSON: the next key of the object */
		snprintf(line, sizeof(line), "\"%s\": 0", keys[i]);
		at_json = strstr(at_json, line);
		assert_non_null(at_json);
	}
	assert_non_null(strstr(at_text, "\n  (0 pieces became 0 backend "
					"submissions; 0 merged in the backend, "
					"0 by sort)\n"));
	td_strbuf_free(&text);
	td_strbuf_free(&json);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_open_sizes),
		T(test_open_bad_arguments),
		T(test_info),
		T(test_read_gives_zeroes),
		T(test_write_flush_discard_write_zeroes),
		T(test_io_past_end),
		T(test_close_busy_until_completed),
		T(test_stats),
		T(test_stats_counter_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
