/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_blkif-xen.c - libFuzzer harness for the blkif ring as the Xen
 * transport drives it: the copying ops (reserve, copy_in, copy_out,
 * release, as grant copy uses them) and either slot layout (native, or a
 * 32-bit guest's x86_32-abi), over a null disk.
 *
 * Input (a short input is padded with zeroes):
 *   [0]       config: bit 0 x86_32-abi, bits 1-2 ring order (3 -> 2),
 *             bit 3 no indirect, bits 4-6 room of the transport in pages
 *             (0: unlimited; else 2^(n-1), so that requests wait),
 *             bit 7 one indirect buffer (else 8: see IBUFS)
 *   [1..2]    L: bytes of the data pool that follow (indirect pages)
 *   then rounds: [0] n, requests to produce; then n raw slots (108 or
 *             112 bytes) written at the next indices
 *
 * Checked (a failure is a crash for libFuzzer): every request is answered
 * once the loop is idle; map_segment is called only for the request last
 * reserved and within the bytes it reserved; every reservation is
 * released exactly once; copy_in and copy_out name only reserved tags;
 * and nothing stays reserved once the ring is gone.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/drivers.h"
#include "frontends/blkif/blkif.h"
#include "common/log.h"
#include "common/loop.h"
#include "tapdisk/vbd.h"

#define POOL_PAGES 64u
#define POOL_BYTES (8u * BLKIF_PAGE_SIZE)
#define MAX_ORDER  2u
#define RING_BYTES (BLKIF_PAGE_SIZE << MAX_ORDER)
#define MAX_SLOTS  128u
/* A pass per request at worst (one indirect buffer), 4 per slot as bound. */
#define MAX_PASSES   (4 * (int)MAX_SLOTS)
#define HEADER	     64u /* ring indices before the first slot */
#define X32_SLOT     108u
#define CFG_X32	     (1u << 0)
#define CFG_NO_IND   (1u << 3)
#define CFG_ROOM_SH  4
#define CFG_ONE_IBUF (1u << 7)
/*
 * Indirect buffers of the ring: fewer than the default 64, which only
 * moves the point where requests wait for one.  Each buffer is 96 KiB,
 * and under ASan a ring's buffers are one mapping made, poisoned and
 * unmapped for each input: at 64 they took half the harness's time.
 */
#define IBUFS	  8u
#define UNLIMITED UINT32_MAX

#define check(cond)                                                   \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "check failed: %s\n", #cond); \
			abort();                                      \
		}                                                     \
	} while (0)

static const struct td_driver_ops *const table[] = {&td_null_ops, NULL};

static struct {
	struct td_loop *loop;
	struct td_vbd *vbd;
	unsigned char *pool;
	unsigned char *sring;
	unsigned char *buf; /* the transport's own pages */
	uint32_t room, room_left;
	bool reserved[MAX_SLOTS];
	uint32_t pages[MAX_SLOTS]; /* reserved, in pages */
	uint32_t mapped[MAX_SLOTS];
	uint32_t cur;
	uint32_t nr_reserved;
} F;

static int fz_reserve(void *opaque, uint32_t tag, size_t max_bytes)
{
	uint32_t pages = (uint32_t)(max_bytes / BLKIF_PAGE_SIZE);

	check(tag < MAX_SLOTS && !F.reserved[tag]);
	check(max_bytes % BLKIF_PAGE_SIZE == 0);
	if (F.room != UNLIMITED) {
		if (pages > F.room_left) {
			/* Nothing else reserved: it never fits.  The
			 * transport must size its room for the largest. */
			check(F.nr_reserved);
			return -EAGAIN;
		}
		F.room_left -= pages;
	}
	F.reserved[tag] = true;
	F.pages[tag] = pages;
	F.mapped[tag] = 0;
	F.cur = tag;
	F.nr_reserved++;
	return 0;
}

static int fz_map(void *opaque, uint32_t gref, uint32_t offset, uint32_t len,
		  enum blkif_map_access access, void **addr)
{
	check(F.reserved[F.cur]);
	check(++F.mapped[F.cur] <= F.pages[F.cur]);
	check(len && offset % TD_SECTOR_SIZE == 0 && len % TD_SECTOR_SIZE == 0);
	check(offset + len <= BLKIF_PAGE_SIZE);
	if (gref >= POOL_PAGES)
		return -EINVAL;
	*addr = F.buf + (size_t)(gref % POOL_PAGES) * BLKIF_PAGE_SIZE + offset;
	return 0;
}

static void fz_copy(const uint32_t *tags, int *errs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		check(tags[i] < MAX_SLOTS && F.reserved[tags[i]]);
		check(errs[i] == 0);
		/* Refuse some copies, as the hypervisor may. */
		if (tags[i] % 7 == 3)
			errs[i] = -EIO;
	}
}

static void fz_copy_in(void *opaque, const uint32_t *tags, int *errs,
		       uint32_t n)
{
	fz_copy(tags, errs, n);
}

static void fz_copy_out(void *opaque, const uint32_t *tags, int *errs,
			uint32_t n)
{
	fz_copy(tags, errs, n);
}

static void fz_release(void *opaque, uint32_t tag)
{
	check(tag < MAX_SLOTS && F.reserved[tag]);
	F.reserved[tag] = false;
	F.nr_reserved--;
	if (F.room != UNLIMITED)
		F.room_left += F.pages[tag];
}

static int fz_copy_indirect(void *opaque, uint32_t gref, void *dst, size_t len)
{
	check(len && len <= BLKIF_PAGE_SIZE);
	if (gref >= POOL_PAGES)
		return -EINVAL;
	memcpy(dst, F.pool + (size_t)gref * BLKIF_PAGE_SIZE, len);
	return 0;
}

static void fz_notify(void *opaque)
{
}

/* The harness never moves req_prod more than a ring ahead. */
static void fz_fatal(void *opaque, int err)
{
	fprintf(stderr, "unexpected protocol error %d\n", err);
	abort();
}

static const struct blkif_transport_ops fz_ops = {
	.map_segment = fz_map,
	.copy_indirect = fz_copy_indirect,
	.notify = fz_notify,
	.fatal = fz_fatal,
	.reserve = fz_reserve,
	.copy_in = fz_copy_in,
	.copy_out = fz_copy_out,
	.release = fz_release,
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct td_vbd_params p = {.name = "fuzz", .chain = "null:size=1M"};

	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	F.pool = aligned_alloc(BLKIF_PAGE_SIZE, POOL_PAGES * BLKIF_PAGE_SIZE);
	F.buf = aligned_alloc(BLKIF_PAGE_SIZE, POOL_PAGES * BLKIF_PAGE_SIZE);
	F.sring = aligned_alloc(BLKIF_PAGE_SIZE, RING_BYTES);
	check(F.pool && F.buf && F.sring);
	check(!td_loop_create(&F.loop));
	check(!td_vbd_open(F.loop, table, &p, &F.vbd));
	return 0;
}

struct input {
	const uint8_t *p;
	size_t left;
};

static void take(struct input *in, void *dst, size_t n)
{
	size_t k = n < in->left ? n : in->left;

	memset(dst, 0, n);
	memcpy(dst, in->p, k);
	in->p += k;
	in->left -= k;
}

static uint8_t take8(struct input *in)
{
	uint8_t v;

	take(in, &v, 1);
	return v;
}

static blkif_sring_t *sring(void)
{
	return (blkif_sring_t *)F.sring;
}

static void run_idle(void)
{
	for (int i = 0; i < MAX_PASSES; i++) {
		if (sring()->rsp_prod == sring()->req_prod)
			return;
		check(!td_loop_run_once(F.loop, 0));
	}
}

/* n slots of the fuzzer's bytes at the next indices, then a kick. */
static void round_once(struct blkif_ring *ring, struct input *in, bool x32)
{
	uint32_t size = blkif_ring_size(ring);
	uint32_t n = take8(in) % (size + 1);
	size_t slot = x32 ? X32_SLOT : sizeof(union blkif_sring_entry);
	RING_IDX prod = sring()->req_prod;

	for (uint32_t i = 0; i < n; i++, prod++)
		take(in, F.sring + HEADER + (size_t)(prod & (size - 1)) * slot,
		     slot);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	sring()->req_prod = prod;
	blkif_ring_kick(ring);
	run_idle();
	check(sring()->rsp_prod == sring()->req_prod);
}

static void drained(struct blkif_ring *ring, void *opaque)
{
	*(bool *)opaque = true;
}

static void finish(struct blkif_ring *ring)
{
	bool done = false;

	check(!blkif_ring_stop(ring, drained, &done));
	for (int i = 0; i < MAX_PASSES && !done; i++)
		check(!td_loop_run_once(F.loop, 0));
	check(done);
	check(!blkif_ring_destroy(ring));
	check(F.nr_reserved == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size};
	struct blkif_config cfg;
	struct blkif_ring *ring;
	uint8_t flags = take8(&in);
	uint32_t order = (flags >> 1) & 3u, room = (flags >> CFG_ROOM_SH) & 7u;
	uint16_t pool_len;
	struct blkif_ring_params p = {
		.sring = F.sring,
		.ring_order = order > MAX_ORDER ? MAX_ORDER : order,
		.protocol = flags & CFG_X32 ? BLKIF_PROTOCOL_X86_32
					    : BLKIF_PROTOCOL_NATIVE,
		.ops = &fz_ops,
	};

	take(&in, &pool_len, sizeof(pool_len));
	blkif_config_init(&cfg);
	cfg.max_ring_order = MAX_ORDER;
	/* The room must hold the largest request: 4096 pages, or 11. */
	cfg.max_indirect_segments = BLKIF_NO_INDIRECT;
	if (!(flags & CFG_NO_IND) && !room)
		cfg.max_indirect_segments = BLKIF_MAX_INDIRECT_SEGMENTS;
	cfg.indirect_buffers = flags & CFG_ONE_IBUF ? 1u : IBUFS;
	F.room = room ? BLKIF_NO_INDIRECT + (1u << (room - 1)) : UNLIMITED;
	F.room_left = F.room;
	memset(F.pool, 0, POOL_BYTES);
	take(&in, F.pool, pool_len < POOL_BYTES ? pool_len : POOL_BYTES);
	memset(F.sring, 0, RING_BYTES);
	SHARED_RING_INIT(sring());
	check(!blkif_ring_create(F.vbd, &cfg, &p, &ring));
	check(blkif_ring_size(ring) <= MAX_SLOTS);
	do
		round_once(ring, &in, flags & CFG_X32);
	while (in.left);
	finish(ring);
	return 0;
}
