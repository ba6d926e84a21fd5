/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vbd-fixture.c - see vbd-fixture.h.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/vbd-fixture.h"

struct fixture *fx;

void io_done(struct td_vbd_io *io, int err)
{
	int i = (int)(io - fx->io);

	fx->calls[i]++;
	fx->err[i] = err;
	/*
	 * A test may complete more I/Os than the table holds (io[] slots are
	 * reused: test_block-stripe writes up to 200 while a resync runs);
	 * only the first NR_IOS completions have their order recorded.
	 */
	if (fx->nr_done < NR_IOS)
		fx->order[fx->nr_done] = i;
	fx->nr_done++;
}

int open_chain(const char *chain, uint32_t max_inflight, uint32_t max_io_bytes,
	       bool ro)
{
	struct td_vbd_params p = {
		.name = "test",
		.chain = chain,
		.max_inflight = max_inflight,
		.max_io_bytes = max_io_bytes,
		.read_only = ro,
		.error = &fx->open_error,
	};

	return td_vbd_open(fx->loop, mock_table, &p, &fx->vbd);
}

int setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	fx = &f;
	mock_reset();
	assert_int_equal(td_loop_create(&fx->loop), 0);
	*state = fx;
	return 0;
}

int teardown(void **state)
{
	if (fx->vbd)
		assert_int_equal(td_vbd_close(fx->vbd), 0);
	td_loop_destroy(fx->loop);
	return 0;
}

struct td_vbd_io *mkio(int i, enum td_op op, uint64_t sector, uint32_t nr)
{
	struct td_vbd_io *io = &fx->io[i];

	memset(io, 0, sizeof(*io));
	io->op = op;
	io->sector = sector;
	io->nr_sectors = nr;
	io->cb = io_done;
	if (op == TD_OP_READ || op == TD_OP_WRITE) {
		fx->iov[i % 8].iov_base = fx->buf;
		fx->iov[i % 8].iov_len = (size_t)nr * TD_SECTOR_SIZE;
		io->iov = &fx->iov[i % 8];
		io->iovcnt = 1;
	}
	return io;
}

void run(int passes)
{
	while (passes--)
		assert_int_equal(td_loop_run_once(fx->loop, 0), 0);
}
