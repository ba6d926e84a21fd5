/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_block-aio.c - the aio driver on real files: data round trips,
 * merging of adjacent requests, flush/FUA, discard and write-zeroes (and
 * their fallbacks), short transfers, open errors, and io_submit failures
 * (io_submit is wrapped with --wrap at the library boundary).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "drivers/aio/aio-worker.h"
#include "drivers/drivers.h"
#include "tapdisk/vbd.h"

#define DISK_BYTES (1u << 20)
#define NR_IOS	   8
#define BUF_BYTES  (256u << 10)

/* --- io_submit wrapper: pass through unless a test injects a result ------ */

int __real_io_submit(io_context_t ctx, long nr, struct iocb **iocbs);
int __wrap_io_submit(io_context_t ctx, long nr, struct iocb **iocbs);

static int inject_result; /* returned once instead of submitting */
static int submit_calls;

int __wrap_io_submit(io_context_t ctx, long nr, struct iocb **iocbs)
{
	submit_calls++;
	if (inject_result) {
		int r = inject_result;

		inject_result = 0;
		return r;
	}
	return __real_io_submit(ctx, nr, iocbs);
}

/* --- fixture --------------------------------------------------------------- */

struct fixture {
	char dir[64];
	char path[96];
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_vbd_io io[NR_IOS];
	struct iovec iov[NR_IOS];
	int calls[NR_IOS];
	int err[NR_IOS];
	unsigned char *buf; /* NR_IOS * BUF_BYTES, page aligned */
};

static struct fixture *fx;

static void io_done(struct td_vbd_io *io, int err)
{
	int i = (int)(io - fx->io);

	fx->calls[i]++;
	fx->err[i] = err;
}

static void make_file(const char *path, size_t bytes, int fill)
{
	unsigned char *data = malloc(bytes ? bytes : 1);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);

	assert_true(fd >= 0);
	memset(data, fill, bytes);
	assert_int_equal(write(fd, data, bytes), (ssize_t)bytes);
	close(fd);
	free(data);
}

static int setup_in(void **state, const char *base)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	fx = &f;
	snprintf(fx->dir, sizeof(fx->dir), "%s/td-aio-XXXXXX", base);
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/disk.img", fx->dir);
	make_file(fx->path, DISK_BYTES, 0x11);
	assert_int_equal(posix_memalign((void **)&fx->buf, 4096,
					(size_t)NR_IOS * BUF_BYTES),
			 0);
	memset(fx->buf, 0xee, (size_t)NR_IOS * BUF_BYTES);
	assert_int_equal(td_loop_create(&fx->loop), 0);
	inject_result = 0;
	submit_calls = 0;
	*state = fx;
	return 0;
}

static int setup(void **state)
{
	return setup_in(state, "/tmp");
}

static int setup_shm(void **state)
{
	return setup_in(state, "/dev/shm");
}

static int teardown(void **state)
{
	if (fx->vbd)
		assert_int_equal(td_vbd_close(fx->vbd), 0);
	td_loop_destroy(fx->loop);
	unlink(fx->path);
	rmdir(fx->dir);
	free(fx->buf);
	return 0;
}

static int open_disk(bool ro)
{
	char chain[128];
	struct td_vbd_params p = {
		.name = "aio", .chain = chain, .read_only = ro};

	snprintf(chain, sizeof(chain), "aio:%s", fx->path);
	return td_vbd_open(fx->loop, td_driver_table, &p, &fx->vbd);
}

static unsigned char *bufp(int i)
{
	return fx->buf + (size_t)i * BUF_BYTES;
}

static void submit(int i, enum td_op op, uint64_t sector, uint32_t nr,
		   uint32_t flags, void *data)
{
	struct td_vbd_io *io = &fx->io[i];

	memset(io, 0, sizeof(*io));
	io->op = op;
	io->sector = sector;
	io->nr_sectors = nr;
	io->flags = flags;
	io->cb = io_done;
	if (op == TD_OP_READ || op == TD_OP_WRITE) {
		fx->iov[i].iov_base = data ? data : bufp(i);
		fx->iov[i].iov_len = (size_t)nr * TD_SECTOR_SIZE;
		io->iov = &fx->iov[i];
		io->iovcnt = 1;
	}
	fx->calls[i] = 0;
	assert_int_equal(td_vbd_submit(fx->vbd, io), 0);
}

/* Run the loop until io i has completed (bounded). */
static void wait_io(int i)
{
	for (int n = 0; n < 2000 && !fx->calls[i]; n++)
		assert_int_equal(td_loop_run_once(fx->loop, 10), 0);
	assert_int_equal(fx->calls[i], 1);
}

static void file_read(uint64_t off, void *out, size_t len)
{
	int fd = open(fx->path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, out, len, (off_t)off), (ssize_t)len);
	close(fd);
}

static uint64_t counter(enum td_stat s)
{
	struct td_vbd_stats st;

	td_vbd_get_stats(fx->vbd, &st);
	return st.counters[s];
}

static bool all_bytes(const unsigned char *p, size_t len, int value)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != value)
			return false;
	return true;
}

/* --- tests ------------------------------------------------------------------ */

/* Each refusal with the reason the caller prints first (td_vbd_open's
 * error), naming the file; none waits on the file (a FIFO, read-only or
 * not, would block open(2) until a writer came). */
static void test_open_errors(void **state)
{
	struct td_vbd_open_error why;
	struct td_vbd_params p = {.name = "aio", .error = &why};
	char fifo[sizeof(fx->dir) + 8], fifo_chain[sizeof(fifo) + 8];
	const struct {
		const char *chain;
		bool read_only;
		int err;
		const char *reason;
	} rows[] = {
		{"aio", false, -EINVAL,
		 "aio: no path: write the chain as aio:/path/to/disk"},
		{"aio:/nonexistent/x.img", false, -ENOENT,
		 "aio: cannot open /nonexistent/x.img: No such file or "
		 "directory; check the path in aio:/nonexistent/x.img"},
		{"aio:/tmp", false, -EISDIR,
		 "aio: /tmp is a directory, not a disk image: give a regular "
		 "file or a block device"},
		{"aio:/tmp", true, -EISDIR,
		 "aio: /tmp is a directory, not a disk image"},
		{"aio:/dev/null", false, -EINVAL,
		 "aio: /dev/null is a character device, not a disk image"},
		{fifo_chain, false, -EINVAL, "is a FIFO, not a disk image"},
		{fifo_chain, true, -EINVAL, "is a FIFO, not a disk image"},
		{"aio:/tmp,merge=maybe", false, -EINVAL,
		 "aio: bad option 'merge=maybe': write merge=on|off"},
	};

	snprintf(fifo, sizeof(fifo), "%s/fifo", fx->dir);
	snprintf(fifo_chain, sizeof(fifo_chain), "aio:%s", fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		p.chain = rows[i].chain;
		p.read_only = rows[i].read_only;
		fx->vbd = NULL;
		assert_int_equal(
			td_vbd_open(fx->loop, td_driver_table, &p, &fx->vbd),
			rows[i].err);
		print_message("%s: %s\n", rows[i].chain, why.reason);
		assert_non_null(strstr(why.reason, rows[i].reason));
		assert_false(why.syntax);
	}
	unlink(fifo);
	make_file(fx->path, 0, 0); /* empty */
	assert_int_equal(open_disk(false), -EINVAL);
	fx->vbd = NULL;
}

static void test_size_rounded_down(void **state)
{
	make_file(fx->path, 4096 + 100, 0);
	assert_int_equal(open_disk(false), 0);
	assert_int_equal(td_vbd_get_info(fx->vbd)->size_sectors, 8);
	assert_int_equal(td_vbd_get_info(fx->vbd)->features,
			 TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
				 TD_FEAT_WRITE_ZEROES);
}

static void test_write_read_roundtrip(void **state)
{
	unsigned char check[65536];

	assert_int_equal(open_disk(false), 0);
	for (size_t i = 0; i < sizeof(check); i++)
		bufp(0)[i] = (unsigned char)(i * 7 + 3);
	submit(0, TD_OP_WRITE, 8, 128, 0, NULL);
	wait_io(0);
	assert_int_equal(fx->err[0], 0);
	file_read(4096, check, sizeof(check));
	assert_memory_equal(check, bufp(0), sizeof(check));

	memset(bufp(1), 0, sizeof(check));
	submit(1, TD_OP_READ, 8, 128, 0, NULL);
	wait_io(1);
	assert_int_equal(fx->err[1], 0);
	assert_memory_equal(bufp(1), bufp(0), sizeof(check));
	/* Bytes outside the write are untouched. */
	file_read(0, check, 4096);
	assert_true(all_bytes(check, 4096, 0x11));
}

static void test_merge_adjacent_out_of_order(void **state)
{
	static const uint64_t order[4] = {24, 8, 16, 0};
	unsigned char check[16384];

	assert_int_equal(open_disk(false), 0);
	for (int i = 0; i < 4; i++) {
		memset(bufp(i), 'a' + (int)(order[i] / 8), 4096);
		submit(i, TD_OP_WRITE, order[i], 8, 0, NULL);
	}
	for (int i = 0; i < 4; i++)
		wait_io(i);
	assert_int_equal(counter(TD_STAT_BACKEND_SUBMITS), 1);
	assert_int_equal(counter(TD_STAT_BACKEND_MERGES), 3);
	/* Buffers 256 KiB apart: four iovec entries in the merged I/O. */
	assert_int_equal(counter(TD_STAT_MERGED_IOV_ENTRIES), 4);
	file_read(0, check, sizeof(check));
	for (int b = 0; b < 4; b++)
		assert_true(all_bytes(check + b * 4096, 4096, 'a' + b));
}

static void test_merge_joins_memory_adjacent(void **state)
{
	assert_int_equal(open_disk(false), 0);
	/* One buffer, consecutive slices: the merged iovec has one entry. */
	for (int i = 0; i < 4; i++)
		submit(i, TD_OP_WRITE, (uint64_t)i * 8, 8, 0,
		       bufp(0) + i * 4096);
	for (int i = 0; i < 4; i++)
		wait_io(i);
	assert_int_equal(counter(TD_STAT_BACKEND_SUBMITS), 1);
	assert_int_equal(counter(TD_STAT_MERGED_IOV_ENTRIES), 1);
}

static void test_merge_off_option(void **state)
{
	char chain[160];
	struct td_vbd_params p = {.name = "aio", .chain = chain};

	snprintf(chain, sizeof(chain), "aio:%s,merge=maybe", fx->path);
	assert_int_equal(td_vbd_open(fx->loop, td_driver_table, &p, &fx->vbd),
			 -EINVAL);
	fx->vbd = NULL;
	snprintf(chain, sizeof(chain), "aio:%s,merge=off", fx->path);
	assert_int_equal(td_vbd_open(fx->loop, td_driver_table, &p, &fx->vbd),
			 0);
	for (int i = 0; i < 4; i++)
		submit(i, TD_OP_WRITE, (uint64_t)i * 8, 8, 0, NULL);
	for (int i = 0; i < 4; i++)
		wait_io(i);
	assert_int_equal(counter(TD_STAT_BACKEND_SUBMITS), 4);
	assert_int_equal(counter(TD_STAT_BACKEND_MERGES), 0);
}

static void test_submit_batch_option(void **state)
{
	char chain[160];
	struct td_vbd_params p = {.name = "aio", .chain = chain};
	int calls;

	snprintf(chain, sizeof(chain), "aio:%s,submit_batch=x", fx->path);
	assert_int_equal(td_vbd_open(fx->loop, td_driver_table, &p, &fx->vbd),
			 -EINVAL);
	snprintf(chain, sizeof(chain), "aio:%s,submit_batch=2000", fx->path);
	assert_int_equal(td_vbd_open(fx->loop, td_driver_table, &p, &fx->vbd),
			 -EINVAL);
	fx->vbd = NULL;
	/* Options in any order; 5 unmergeable writes, 2 per io_submit. */
	snprintf(chain, sizeof(chain), "aio:%s,submit_batch=2,merge=off",
		 fx->path);
	assert_int_equal(td_vbd_open(fx->loop, td_driver_table, &p, &fx->vbd),
			 0);
	calls = submit_calls;
	for (int i = 0; i < 5; i++)
		submit(i, TD_OP_WRITE, (uint64_t)i * 8, 8, 0, NULL);
	for (int i = 0; i < 5; i++)
		wait_io(i);
	assert_int_equal(submit_calls - calls, 3);
	assert_int_equal(counter(TD_STAT_BACKEND_SUBMITS), 5);
}

static void test_no_merge_across_gap_op_or_flags(void **state)
{
	assert_int_equal(open_disk(false), 0);
	submit(0, TD_OP_WRITE, 0, 8, 0, NULL);
	submit(1, TD_OP_WRITE, 16, 8, 0, NULL);		 /* gap at 8..15 */
	submit(2, TD_OP_READ, 8, 8, 0, NULL);		 /* a read between */
	submit(3, TD_OP_WRITE, 24, 8, TD_REQ_FUA, NULL); /* other flags */
	for (int i = 0; i < 4; i++) {
		wait_io(i);
		assert_int_equal(fx->err[i], 0);
	}
	assert_int_equal(counter(TD_STAT_BACKEND_SUBMITS), 4);
	assert_int_equal(counter(TD_STAT_BACKEND_MERGES), 0);
}

static void test_flush_and_fua(void **state)
{
	assert_int_equal(open_disk(false), 0);
	submit(0, TD_OP_WRITE, 0, 8, TD_REQ_FUA, NULL);
	submit(1, TD_OP_FLUSH, 0, 0, 0, NULL);
	wait_io(0);
	wait_io(1);
	assert_int_equal(fx->err[0], 0);
	assert_int_equal(fx->err[1], 0);
}

static void check_zeroed(enum td_op op, uint32_t flags)
{
	unsigned char check[8192];

	assert_int_equal(open_disk(false), 0);
	submit(0, op, 16, 16, flags, NULL);
	wait_io(0);
	assert_int_equal(fx->err[0], 0);
	file_read(8192, check, sizeof(check));
	assert_true(all_bytes(check, sizeof(check), 0));
	file_read(0, check, 8192); /* neighbours untouched */
	assert_true(all_bytes(check, 8192, 0x11));
	file_read(16384, check, 8192);
	assert_true(all_bytes(check, 8192, 0x11));
}

static void test_discard_reads_zeroes(void **state)
{
	check_zeroed(TD_OP_DISCARD, 0);
}

static void test_write_zeroes(void **state)
{
	check_zeroed(TD_OP_WRITE_ZEROES, 0);
}

static void test_write_zeroes_no_hole_fua(void **state)
{
	check_zeroed(TD_OP_WRITE_ZEROES, TD_REQ_NO_HOLE | TD_REQ_FUA);
}

static void test_worker_fallback_to_writing_zeroes(void **state)
{
	/* A pipe refuses fallocate: the worker writes zeroes instead. */
	struct td_request req = {.op = TD_OP_WRITE_ZEROES,
				 .sector = 0,
				 .nr_sectors = 2,
				 .flags = TD_REQ_NO_HOLE};
	unsigned char zero[1024] = {0}, got[1024];
	void *zbuf = calloc(1, AIO_ZERO_BUF_BYTES);
	int p[2];

	assert_int_equal(pipe(p), 0);
	assert_int_equal(aio_worker_run_op(p[1], false, zbuf, &req), -ESPIPE);
	close(p[0]);
	close(p[1]);
	/* A regular file: ZERO_RANGE works or falls back; zeroes either way. */
	make_file(fx->path, 4096, 0x5a);
	p[0] = open(fx->path, O_RDWR);
	assert_true(p[0] >= 0);
	assert_int_equal(aio_worker_run_op(p[0], false, zbuf, &req), 0);
	assert_int_equal(pread(p[0], got, sizeof(got), 0),
			 (ssize_t)sizeof(got));
	assert_memory_equal(got, zero, sizeof(got));
	close(p[0]);
	free(zbuf);
}

static void test_short_read_is_eio(void **state)
{
	assert_int_equal(open_disk(false), 0);
	/* The file shrinks under the open disk. */
	assert_int_equal(truncate(fx->path, DISK_BYTES / 2), 0);
	submit(0, TD_OP_READ, (DISK_BYTES / 2) / 512 - 8, 16, 0, NULL);
	wait_io(0);
	assert_int_equal(fx->err[0], -EIO);
	submit(1, TD_OP_READ, 0, 8, 0, NULL); /* the rest still works */
	wait_io(1);
	assert_int_equal(fx->err[1], 0);
}

static void test_read_only(void **state)
{
	assert_int_equal(open_disk(true), 0);
	assert_true(td_vbd_get_info(fx->vbd)->read_only);
	fx->io[0] = (struct td_vbd_io){
		.op = TD_OP_WRITE, .sector = 0, .nr_sectors = 1, .cb = io_done};
	fx->iov[0] = (struct iovec){bufp(0), 512};
	fx->io[0].iov = &fx->iov[0];
	fx->io[0].iovcnt = 1;
	assert_int_equal(td_vbd_submit(fx->vbd, &fx->io[0]), -EROFS);
	submit(1, TD_OP_READ, 0, 8, 0, NULL);
	wait_io(1);
	assert_int_equal(fx->err[1], 0);
	assert_true(all_bytes(bufp(1), 4096, 0x11));
}

static void test_io_submit_eagain_retries(void **state)
{
	assert_int_equal(open_disk(false), 0);
	inject_result = -EAGAIN;
	memset(bufp(0), 0x77, 4096);
	submit(0, TD_OP_WRITE, 0, 8, 0, NULL);
	wait_io(0);
	assert_int_equal(fx->err[0], 0);
	assert_true(submit_calls >= 2); /* refused once, then accepted */
	assert_int_equal(counter(TD_STAT_BACKEND_SUBMITS), 1);
}

static void test_io_submit_error_fails_first_only(void **state)
{
	assert_int_equal(open_disk(false), 0);
	inject_result = -EBADF;
	submit(0, TD_OP_READ, 0, 8, 0, NULL);
	submit(1, TD_OP_WRITE, 64, 8, 0, NULL);
	wait_io(0);
	wait_io(1);
	/* Sorted: reads before writes, so the read was the refused iocb. */
	assert_int_equal(fx->err[0], -EBADF);
	assert_int_equal(fx->err[1], 0);
}

static void test_large_io_split(void **state)
{
	/* 8 MiB disk, one 6 MiB write: split at the 4 MiB default. */
	unsigned char *big = NULL;
	struct td_vbd_stats st;

	make_file(fx->path, 8u << 20, 0);
	assert_int_equal(posix_memalign((void **)&big, 4096, 6u << 20), 0);
	memset(big, 0x42, 6u << 20);
	assert_int_equal(open_disk(false), 0);
	submit(0, TD_OP_WRITE, 0, (6u << 20) / 512, 0, big);
	wait_io(0);
	assert_int_equal(fx->err[0], 0);
	td_vbd_get_stats(fx->vbd, &st);
	assert_int_equal(st.pieces, 2);
	free(big);
}

/*
 * base:allocation of a sparse file: data at [64 KiB, 192 KiB) and the last
 * 64 KiB, holes elsewhere (64 KiB-aligned: no file system block is
 * larger).  Skipped where the file system reports no holes.
 */
static void test_block_status(void **state)
{
	static const struct td_extent want[] = {
		{128, TD_EXTENT_HOLE | TD_EXTENT_ZERO},
		{256, 0},
		{(DISK_BYTES >> 9) - 128 - 256 - 128,
		 TD_EXTENT_HOLE | TD_EXTENT_ZERO},
		{128, 0},
	};
	static uint8_t buf[128 << 10];
	struct td_extent ext[8];
	unsigned int nr = 8;
	int fd = open(fx->path, O_RDWR | O_TRUNC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, DISK_BYTES), 0);
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(pwrite(fd, buf, 128 << 10, 64 << 10), 128 << 10);
	assert_int_equal(pwrite(fd, buf, 64 << 10, DISK_BYTES - (64 << 10)),
			 64 << 10);
	assert_int_equal(fsync(fd), 0);
	if (lseek(fd, 0, SEEK_DATA) != 64 << 10) {
		close(fd);
		skip(); /* no holes reported here */
	}
	close(fd);
	assert_int_equal(open_disk(false), 0);
	assert_int_equal(td_vbd_block_status(fx->vbd, TD_CTX_BASE_ALLOCATION, 0,
					     DISK_BYTES >> 9, ext, &nr),
			 0);
	assert_int_equal(nr, 4);
	for (unsigned int i = 0; i < nr; i++) {
		assert_int_equal(ext[i].nr_sectors, want[i].nr_sectors);
		assert_int_equal(ext[i].flags, want[i].flags);
	}
	/* From inside the data, at most 2 extents. */
	nr = 2;
	assert_int_equal(td_vbd_block_status(fx->vbd, TD_CTX_BASE_ALLOCATION,
					     200, (DISK_BYTES >> 9) - 200, ext,
					     &nr),
			 0);
	assert_int_equal(nr, 2);
	assert_int_equal(ext[0].nr_sectors, 384 - 200);
	assert_int_equal(ext[0].flags, 0);
	assert_int_equal(ext[1].flags, TD_EXTENT_HOLE | TD_EXTENT_ZERO);
	/* Inside one hole, cut at the range's end. */
	nr = 8;
	assert_int_equal(td_vbd_block_status(fx->vbd, TD_CTX_BASE_ALLOCATION,
					     1000, 8, ext, &nr),
			 0);
	assert_int_equal(nr, 1);
	assert_int_equal(ext[0].nr_sectors, 8);
	assert_int_equal(ext[0].flags, TD_EXTENT_HOLE | TD_EXTENT_ZERO);
	/* A context aio does not have. */
	assert_int_equal(td_vbd_block_status(fx->vbd, "qemu:dirty-bitmap:x", 0,
					     8, ext, &nr),
			 -ENOENT);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_open_errors),
		T(test_size_rounded_down),
		T(test_write_read_roundtrip),
		T(test_merge_adjacent_out_of_order),
		T(test_merge_joins_memory_adjacent),
		T(test_merge_off_option),
		T(test_submit_batch_option),
		T(test_no_merge_across_gap_op_or_flags),
		T(test_flush_and_fua),
		T(test_discard_reads_zeroes),
		T(test_write_zeroes),
		T(test_write_zeroes_no_hole_fua),
		cmocka_unit_test_setup_teardown(test_write_zeroes, setup_shm,
						teardown),
		cmocka_unit_test_setup_teardown(test_discard_reads_zeroes,
						setup_shm, teardown),
		T(test_worker_fallback_to_writing_zeroes),
		T(test_short_read_is_eio),
		T(test_read_only),
		T(test_io_submit_eagain_retries),
		T(test_io_submit_error_fails_first_only),
		T(test_large_io_split),
		T(test_block_status),
		cmocka_unit_test_setup_teardown(test_block_status, setup_shm,
						teardown),
	};

	td_log_set_level(TD_LOG_ERR + (getenv("TD_TEST_VERBOSE") ? 3 : 0));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
