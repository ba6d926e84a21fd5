/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_block-cbt.c - the cbt filter over null, opened through
 * td_vbd_open() with the real driver table: its commands (a bad one
 * changes nothing), writes marking every bitmap and reads none, a bitmap
 * made while a write is in flight holding that write, block status in
 * qemu:dirty-bitmap:NAME, the contexts it lists, reopen after close.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/json.h"
#include "common/log.h"
#include "common/loop.h"
#include "drivers/drivers.h"
#include "tapdisk/vbd.h"

#define KiB 1024ull
#define MiB (1024 * KiB)

struct fx {
	struct td_loop *loop;
	struct td_vbd *vbd;
	char dir[64];
	char chain[128];
	FILE *log;
	char *log_buf;
	size_t log_len;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/cbt-unit.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->chain, sizeof(f->chain), "cbt:dir=%s|null:size=10M",
		 f->dir);
	f->log = open_memstream(&f->log_buf, &f->log_len);
	td_log_set_stream(f->log);
	assert_int_equal(td_loop_create(&f->loop), 0);
	*state = f;
	return 0;
}

static void vbd_open(struct fx *f)
{
	struct td_vbd_params p = {.name = "vbd-cbt", .chain = f->chain};

	assert_int_equal(td_vbd_open(f->loop, td_driver_table, &p, &f->vbd), 0);
}

static void vbd_close(struct fx *f)
{
	assert_int_equal(td_vbd_close(f->vbd), 0);
	f->vbd = NULL;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	if (f->vbd)
		vbd_close(f);
	td_loop_destroy(f->loop);
	td_log_set_stream(NULL);
	fclose(f->log);
	free(f->log_buf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Run "cbt WORDS..." (space separated); the reply in out. */
static int ctl(struct fx *f, const char *words, struct td_strbuf *out)
{
	char buf[256], *argv[8], *save = NULL;
	int argc = 0;

	snprintf(buf, sizeof(buf), "%s", words);
	for (char *w = strtok_r(buf, " ", &save); w && argc < 8;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	td_strbuf_reset(out);
	return td_vbd_driver_control(f->vbd, "cbt", argc, argv, out);
}

static void io_done(struct td_vbd_io *io, int err)
{
	*(int *)io->opaque = err;
}

static void do_io(struct fx *f, enum td_op op, uint64_t off, uint64_t len)
{
	static char buf[1 * MiB];
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	int res = 1;
	struct td_vbd_io io = {.op = op,
			       .sector = off >> 9,
			       .nr_sectors = (uint32_t)(len >> 9),
			       .cb = io_done,
			       .opaque = &res};

	if (op == TD_OP_WRITE || op == TD_OP_READ) {
		io.iov = &iov;
		io.iovcnt = 1;
	}
	assert_int_equal(td_vbd_submit(f->vbd, &io), 0);
	for (int i = 0; i < 16 && res == 1; i++)
		assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(res, 0);
}

/* Submit a write and leave it in flight (the loop not run). */
static void start_write(struct fx *f, struct td_vbd_io *io, int *res,
			uint64_t off, uint64_t len)
{
	static char buf[64 * KiB];
	static struct iovec iov;

	iov.iov_base = buf;
	iov.iov_len = len;
	*res = 1;
	memset(io, 0, sizeof(*io));
	io->op = TD_OP_WRITE;
	io->sector = off >> 9;
	io->nr_sectors = (uint32_t)(len >> 9);
	io->iov = &iov;
	io->iovcnt = 1;
	io->cb = io_done;
	io->opaque = res;
	assert_int_equal(td_vbd_submit(f->vbd, io), 0);
}

static void test_commands(void **state)
{
	struct fx *f = *state;
	struct td_strbuf out;
	static const char *const bad[] = {
		"create",
		"create a/b",
		"create .x",
		"create x granularity=3K",
		"create x granularity=2K",
		"create x granularity=128M",
		"create b1",
		"remove nope",
		"clear",
		"show nope",
		"show b1 yaml",
		"list x",
		"frobnicate",
	};
	char *before, path[128];

	td_strbuf_init(&out);
	vbd_open(f);
	assert_int_equal(ctl(f, "create b1", &out), 0);
	assert_non_null(strstr(out.data, "granularity 65536"));
	assert_int_equal(ctl(f, "list json", &out), 0);
	before = strdup(out.data);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_true(ctl(f, bad[i], &out) < 0);
		assert_true(out.len > 0); /* a reason */
	}
	assert_int_equal(ctl(f, "list json", &out), 0);
	assert_string_equal(out.data, before);
	free(before);
	assert_int_equal(ctl(f, "create b2 granularity=4K", &out), 0);
	assert_int_equal(ctl(f, "list", &out), 0);
	assert_non_null(strstr(out.data, "b2: granularity 4096"));
	snprintf(path, sizeof(path), "%s/b2.cbt", f->dir);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(ctl(f, "remove b2", &out), 0);
	assert_int_equal(ctl(f, "list", &out), 0);
	assert_null(strstr(out.data, "b2"));
	assert_int_equal(access(path, F_OK), -1);
	td_strbuf_free(&out);
}

static void test_marks_and_block_status(void **state)
{
	struct fx *f = *state;
	struct td_extent ext[8];
	unsigned int nr = 8;
	struct td_strbuf out;

	td_strbuf_init(&out);
	vbd_open(f);
	assert_int_equal(ctl(f, "create b1", &out), 0);
	do_io(f, TD_OP_WRITE, 100 * KiB, 4 * KiB); /* granule 1 */
	do_io(f, TD_OP_READ, 5 * MiB, 64 * KiB);   /* no mark */
	assert_int_equal(ctl(f, "create b2", &out), 0);
	do_io(f, TD_OP_WRITE, 1 * MiB, 128 * KiB); /* granules 16, 17 */
	assert_int_equal(ctl(f, "show b1", &out), 0);
	assert_string_equal(out.data, "65536 65536\n1048576 131072\n");
	assert_int_equal(ctl(f, "show b2", &out), 0);
	assert_string_equal(out.data, "1048576 131072\n");
	/* Block status of b1 from sector 0: clean, dirty, clean, dirty. */
	assert_int_equal(td_vbd_block_status(f->vbd, "qemu:dirty-bitmap:b1", 0,
					     20480, ext, &nr),
			 0);
	assert_int_equal(nr, 5);
	assert_int_equal(ext[0].nr_sectors, 128);
	assert_int_equal(ext[0].flags, 0);
	assert_int_equal(ext[1].nr_sectors, 128);
	assert_int_equal(ext[1].flags, TD_EXTENT_DIRTY);
	assert_int_equal(ext[2].nr_sectors, 2048 - 256);
	assert_int_equal(ext[3].nr_sectors, 256);
	assert_int_equal(ext[3].flags, TD_EXTENT_DIRTY);
	assert_int_equal(ext[4].nr_sectors, 20480 - 2304);
	assert_int_equal(ext[4].flags, 0);
	/* From inside a granule; room for one. */
	nr = 1;
	assert_int_equal(td_vbd_block_status(f->vbd, "qemu:dirty-bitmap:b1",
					     130, 1000, ext, &nr),
			 0);
	assert_int_equal(nr, 1);
	assert_int_equal(ext[0].nr_sectors, 126);
	assert_int_equal(ext[0].flags, TD_EXTENT_DIRTY);
	nr = 8;
	assert_int_equal(td_vbd_block_status(f->vbd, "qemu:dirty-bitmap:nope",
					     0, 8, ext, &nr),
			 -ENOENT);
	/* Clean close, reopen: the same bits. */
	vbd_close(f);
	vbd_open(f);
	assert_int_equal(ctl(f, "show b1", &out), 0);
	assert_string_equal(out.data, "65536 65536\n1048576 131072\n");
	assert_int_equal(ctl(f, "clear b1", &out), 0);
	assert_int_equal(ctl(f, "show b1", &out), 0);
	assert_string_equal(out.data, "");
	td_strbuf_free(&out);
}

/*
 * A write in flight when a bitmap is made (or cleared) is in it: its data
 * may land after a backup read its region by the previous bitmap.
 */
static void test_inflight_write_in_new_bitmap(void **state)
{
	struct fx *f = *state;
	struct td_vbd_io io1, io2;
	struct td_strbuf out;
	int res1, res2;

	td_strbuf_init(&out);
	vbd_open(f);
	assert_int_equal(ctl(f, "create b1", &out), 0);
	start_write(f, &io1, &res1, 2 * MiB, 4 * KiB);
	assert_int_equal(ctl(f, "create b2", &out), 0);
	assert_int_equal(ctl(f, "show b2", &out), 0);
	assert_string_equal(out.data, "2097152 65536\n");
	for (int i = 0; i < 16 && res1 == 1; i++)
		assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(res1, 0);
	/* Completed writes are not in a bitmap made after them. */
	assert_int_equal(ctl(f, "create b3", &out), 0);
	assert_int_equal(ctl(f, "show b3", &out), 0);
	assert_string_equal(out.data, "");
	/* clear, too. */
	start_write(f, &io2, &res2, 3 * MiB, 4 * KiB);
	assert_int_equal(ctl(f, "clear b1", &out), 0);
	assert_int_equal(ctl(f, "show b1", &out), 0);
	assert_string_equal(out.data, "3145728 65536\n");
	for (int i = 0; i < 16 && res2 == 1; i++)
		assert_int_equal(td_loop_run_once(f->loop, 0), 0);
	assert_int_equal(res2, 0);
	td_strbuf_free(&out);
}

static void add_ctx(const char *name, void *opaque)
{
	struct td_strbuf *sb = opaque;

	td_strbuf_printf(sb, "%s;", name);
}

static void test_contexts(void **state)
{
	struct fx *f = *state;
	struct td_strbuf out;

	td_strbuf_init(&out);
	vbd_open(f);
	assert_int_equal(ctl(f, "create b1", &out), 0);
	assert_int_equal(ctl(f, "create b2", &out), 0);
	td_strbuf_reset(&out);
	td_vbd_list_contexts(f->vbd, add_ctx, &out);
	assert_non_null(strstr(out.data, "base:allocation;"));
	assert_non_null(strstr(out.data, "qemu:dirty-bitmap:b1;"));
	assert_non_null(strstr(out.data, "qemu:dirty-bitmap:b2;"));
	td_strbuf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(test_marks_and_block_status,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_inflight_write_in_new_bitmap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_contexts, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
