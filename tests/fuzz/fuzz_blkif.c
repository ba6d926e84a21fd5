/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_blkif.c - libFuzzer harness for the blkif request path: the
 * fuzzer's bytes are the frontend's shared ring and the indirect pages,
 * and the harness runs the consumer over a null disk until it is idle.
 *
 * Input (little-endian; a short input is padded with zeroes):
 *   [0]        config: bits 0-1 ring order (3 -> 2), bit 2 no indirect,
 *              bit 3 secure discard, bits 4-5 indirect buffers - 1
 *   [1..2]     L: bytes that follow for the data pool (at most POOL_BYTES)
 *   [3..3+L)   the start of the data pool: indirect descriptor pages
 *   then rounds, while input remains:
 *     [0]      n: requests to produce (n % (ring size + 1))
 *     [1]      mode: bit 0, then a u16 follows and req_prod is set to
 *              req_prod + that (the "more than a ring ahead" path)
 *     n * 112  the ring slots, written at req_prod_pvt onwards
 *
 * Checked after every round (a failure is a crash for libFuzzer):
 *   - a live ring answers every request it was given, with a known
 *     status, once the loop is idle;
 *   - a dead ring never writes to the shared ring again, and the fatal
 *     callback ran exactly once;
 *   - every page the module maps lies inside one pool page.
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
#define POOL_BYTES (8u * BLKIF_PAGE_SIZE) /* fuzzer-written part */
#define MAX_ORDER  2u
#define RING_BYTES (BLKIF_PAGE_SIZE << MAX_ORDER)
/*
 * Loop passes a round may take before a request left unanswered counts as
 * a hang.  With one indirect buffer (config bits 4-5 = 0) a pass can start
 * only the indirect request that got the buffer, so a full ring of them
 * takes a pass each: 64 was too few for a ring of 128 slots (a fuzzer
 * finding, corpus/blkif/one-ibuf-full-ring; 66 passes, every request
 * answered).  A real hang still fails: nothing is answered however long
 * it runs.
 */
#define MAX_PASSES     (4 * (int)(RING_BYTES / SLOT_BYTES))
#define SLOT_BYTES     sizeof(union blkif_sring_entry)
#define CFG_NO_IND     (1u << 2)
#define CFG_SECURE     (1u << 3)
#define CFG_IBUF_SHIFT 4
#define MODE_SET_PROD  (1u << 0)

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
	blkif_sring_t *sring;
	blkif_front_ring_t front;
	unsigned int fatals;
} F;

static int fz_map(void *opaque, uint32_t gref, uint32_t offset, uint32_t len,
		  enum blkif_map_access access, void **addr)
{
	check(len && offset % TD_SECTOR_SIZE == 0 && len % TD_SECTOR_SIZE == 0);
	check(offset + len <= BLKIF_PAGE_SIZE);
	if (gref >= POOL_PAGES)
		return -EINVAL;
	*addr = F.pool + (size_t)gref * BLKIF_PAGE_SIZE + offset;
	return 0;
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

static void fz_fatal(void *opaque, int err)
{
	check(err == -EPROTO);
	F.fatals++;
}

static const struct blkif_transport_ops fz_ops = {
	.map_segment = fz_map,
	.copy_indirect = fz_copy_indirect,
	.notify = fz_notify,
	.fatal = fz_fatal,
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct td_vbd_params p = {.name = "fuzz", .chain = "null:size=1M"};

	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	F.pool = aligned_alloc(BLKIF_PAGE_SIZE, POOL_PAGES * BLKIF_PAGE_SIZE);
	F.sring = aligned_alloc(BLKIF_PAGE_SIZE, RING_BYTES);
	check(F.pool && F.sring);
	check(!td_loop_create(&F.loop));
	check(!td_vbd_open(F.loop, table, &p, &F.vbd));
	return 0;
}

/* Consume up to n bytes of input; NULL-safe zero padding. */
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

static uint16_t take16(struct input *in)
{
	uint8_t b[2];

	take(in, b, 2);
	return (uint16_t)(b[0] | b[1] << 8);
}

/* Run passes until every request has its answer or the ring is dead. */
static void run_idle(struct blkif_ring *ring)
{
	for (int i = 0; i < MAX_PASSES; i++) {
		if (blkif_ring_dead(ring) ||
		    F.sring->rsp_prod == F.sring->req_prod)
			return;
		check(!td_loop_run_once(F.loop, 0));
	}
}

static void drained(struct blkif_ring *ring, void *opaque)
{
	*(bool *)opaque = true;
}

/* Stop the ring, wait for what is in flight, free it. */
static void finish(struct blkif_ring *ring)
{
	bool done = false;

	check(!blkif_ring_stop(ring, drained, &done));
	for (int i = 0; i < MAX_PASSES && !done; i++)
		check(!td_loop_run_once(F.loop, 0));
	check(done);
	check(!blkif_ring_destroy(ring));
}

static void round_once(struct blkif_ring *ring, struct input *in)
{
	uint32_t size = blkif_ring_size(ring);
	uint32_t n = take8(in) % (size + 1);
	uint8_t mode = take8(in);
	RING_IDX rsp_before = F.sring->rsp_prod;
	bool was_dead = blkif_ring_dead(ring);

	/* The frontend takes every response first, as blkfront would. */
	F.front.rsp_cons = F.sring->rsp_prod;
	for (uint32_t i = 0; i < n; i++)
		take(in, RING_GET_REQUEST(&F.front, F.front.req_prod_pvt++),
		     SLOT_BYTES);
	RING_PUSH_REQUESTS(&F.front);
	if (mode & MODE_SET_PROD)
		F.sring->req_prod += take16(in);
	blkif_ring_kick(ring);
	run_idle(ring);
	if (blkif_ring_dead(ring)) {
		check(F.fatals == 1);
		if (was_dead)
			check(F.sring->rsp_prod == rsp_before);
		return;
	}
	check(F.fatals == 0);
	check(F.sring->rsp_prod == F.sring->req_prod);
	for (RING_IDX i = F.front.rsp_cons; i != F.sring->rsp_prod; i++) {
		int16_t st = RING_GET_RESPONSE(&F.front, i)->status;

		check(st == BLKIF_RSP_OKAY || st == BLKIF_RSP_ERROR ||
		      st == BLKIF_RSP_EOPNOTSUPP);
	}
}

static void setup_config(struct blkif_config *cfg, uint8_t flags)
{
	blkif_config_init(cfg);
	cfg->max_ring_order = MAX_ORDER;
	if (flags & CFG_NO_IND)
		cfg->max_indirect_segments = BLKIF_NO_INDIRECT;
	cfg->feature_secure_discard = flags & CFG_SECURE;
	cfg->indirect_buffers = 1u + ((flags >> CFG_IBUF_SHIFT) & 3u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size};
	struct blkif_config cfg;
	struct blkif_ring *ring;
	uint8_t flags = take8(&in);
	uint32_t order = flags & 3u;
	uint16_t pool_len = take16(&in);
	struct blkif_ring_params p = {
		.sring = F.sring,
		.ring_order = order > MAX_ORDER ? MAX_ORDER : order,
		.ops = &fz_ops,
	};

	setup_config(&cfg, flags);
	memset(F.pool, 0, POOL_BYTES);
	take(&in, F.pool, pool_len < POOL_BYTES ? pool_len : POOL_BYTES);
	memset(F.sring, 0, RING_BYTES);
	SHARED_RING_INIT(F.sring);
	FRONT_RING_INIT(&F.front, F.sring,
			(size_t)BLKIF_PAGE_SIZE << p.ring_order);
	F.fatals = 0;
	check(!blkif_ring_create(F.vbd, &cfg, &p, &ring));
	do
		round_once(ring, &in);
	while (in.left);
	finish(ring);
	return 0;
}
