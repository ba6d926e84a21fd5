/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vbd-fixture.h - a loop, a vbd over the mock driver and a table of I/Os,
 * shared by the vbd unit tests.
 */
#ifndef TAPSTRIPE_VBD_FIXTURE_H
#define TAPSTRIPE_VBD_FIXTURE_H

#include "tapdisk/vbd.h"
#include "tests/unit/mock-driver.h"

#define NR_IOS 16

struct fixture {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_vbd_io io[NR_IOS];
	int calls[NR_IOS];
	int err[NR_IOS];
	int order[NR_IOS]; /* completion order: index of io */
	int nr_done;
	char buf[64 * 1024] __attribute__((aligned(4096)));
	struct iovec iov[8];
	struct td_vbd_open_error open_error; /* open_chain's */
};

extern struct fixture *fx;

/* Completion callback recording calls, errors and order. */
void io_done(struct td_vbd_io *io, int err);
int open_chain(const char *chain, uint32_t max_inflight, uint32_t max_io_bytes,
	       bool ro);
int setup(void **state);
int teardown(void **state);
/* Prepare io[i] as op over [sector, sector + nr) with one buffer. */
struct td_vbd_io *mkio(int i, enum td_op op, uint64_t sector, uint32_t nr);
/* Run that many passes of the loop, without waiting. */
void run(int passes);

#endif
