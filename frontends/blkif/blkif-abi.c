/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blkif-abi.c - the shared ring's slots in each protocol ABI: copy a
 * request out, converted to the native layout, and write a response.
 *
 * x86_64-abi is this machine's native layout.  x86_32-abi is what a
 * 32-bit x86 guest's blkfront lays out: the same fields, but 64-bit
 * members aligned to 4 bytes, so that a request is 108 bytes (the native
 * one 112) and the ring holds slots of 108 bytes.  Its offsets, from
 * xen/io/blkif.h compiled for i386 (Linux blkback's common.h spells the
 * same layout with pack(4) structs):
 *
 *   all:       operation 0, id 4
 *   read/write nr_segments 1, handle 2, sector_number 12, seg[11] 20
 *   discard    flag 1, handle 2, sector_number 12, nr_sectors 20
 *   indirect   indirect_op 1, nr_segments 2 (16 bits), sector_number 12,
 *              handle 20, indirect_grefs[8] 24
 *   response   id 0, operation 8, status 10; 12 bytes
 *
 * A segment descriptor (8 bytes) is the same in both, inside a slot and
 * in an indirect page.  Fields are read with memcpy from a private copy
 * of the slot: the shared slot is read exactly once.
 */
#include "config.h"

#include <string.h>

#include "frontends/blkif/blkif-int.h"

#define X32_SLOT_BYTES	   108
#define X32_OFF_ID	   4
#define X32_OFF_NR_SEGS	   1
#define X32_OFF_HANDLE	   2
#define X32_OFF_SECTOR	   12
#define X32_OFF_SEGS	   20
#define X32_OFF_D_FLAG	   1
#define X32_OFF_D_NR	   20
#define X32_OFF_I_OP	   1
#define X32_OFF_I_NR_SEGS  2
#define X32_OFF_I_HANDLE   20
#define X32_OFF_I_GREFS	   24
#define X32_OFF_RSP_OP	   8
#define X32_OFF_RSP_STATUS 10

/* The ring header (indices and padding) before the first slot: 64 bytes. */
#define RING_HEADER_BYTES offsetof(blkif_sring_t, ring)

static uint32_t round_down_pow2(uint32_t n)
{
	uint32_t p = 1;

	while (p <= n / 2)
		p *= 2;
	return n ? p : 0;
}

uint32_t blkif_abi_ring_size(enum blkif_protocol protocol, size_t bytes)
{
	size_t slot = protocol == BLKIF_PROTOCOL_X86_32
			      ? X32_SLOT_BYTES
			      : sizeof(union blkif_sring_entry);

	return round_down_pow2((uint32_t)((bytes - RING_HEADER_BYTES) / slot));
}

static const unsigned char *x32_slot(const struct blkif_ring *ring,
				     RING_IDX idx)
{
	const unsigned char *base =
		(const unsigned char *)ring->back.sring + RING_HEADER_BYTES;

	return base +
	       (size_t)(idx & (RING_SIZE(&ring->back) - 1)) * X32_SLOT_BYTES;
}

/* Fields of a private copy of an x86_32 slot, into the native request. */
static void x32_to_native(const unsigned char *s, struct blkif_request *out)
{
	struct blkif_request_discard *d = (struct blkif_request_discard *)out;
	struct blkif_request_indirect *ind =
		(struct blkif_request_indirect *)out;

	memset(out, 0, sizeof(*out));
	out->operation = s[0];
	memcpy(&out->id, s + X32_OFF_ID, sizeof(out->id));
	switch (out->operation) {
	case BLKIF_OP_DISCARD:
		d->flag = s[X32_OFF_D_FLAG];
		memcpy(&d->handle, s + X32_OFF_HANDLE, sizeof(d->handle));
		memcpy(&d->sector_number, s + X32_OFF_SECTOR,
		       sizeof(d->sector_number));
		memcpy(&d->nr_sectors, s + X32_OFF_D_NR, sizeof(d->nr_sectors));
		break;
	case BLKIF_OP_INDIRECT:
		ind->indirect_op = s[X32_OFF_I_OP];
		memcpy(&ind->nr_segments, s + X32_OFF_I_NR_SEGS,
		       sizeof(ind->nr_segments));
		memcpy(&ind->sector_number, s + X32_OFF_SECTOR,
		       sizeof(ind->sector_number));
		memcpy(&ind->handle, s + X32_OFF_I_HANDLE, sizeof(ind->handle));
		memcpy(ind->indirect_grefs, s + X32_OFF_I_GREFS,
		       sizeof(ind->indirect_grefs));
		break;
	default: /* read, write, barrier, flush; others carry only the id */
		out->nr_segments = s[X32_OFF_NR_SEGS];
		memcpy(&out->handle, s + X32_OFF_HANDLE, sizeof(out->handle));
		memcpy(&out->sector_number, s + X32_OFF_SECTOR,
		       sizeof(out->sector_number));
		memcpy(out->seg, s + X32_OFF_SEGS, sizeof(out->seg));
		break;
	}
}

void blkif_abi_copy_request(struct blkif_ring *ring, RING_IDX idx,
			    struct blkif_request *out)
{
	unsigned char copy[X32_SLOT_BYTES];

	if (ring->protocol == BLKIF_PROTOCOL_X86_32) {
		memcpy(copy, x32_slot(ring, idx), sizeof(copy));
		atomic_signal_fence(memory_order_seq_cst);
		x32_to_native(copy, out);
		return;
	}
	memcpy(out, RING_GET_REQUEST(&ring->back, idx), sizeof(*out));
	/* Forbid the compiler to read the shared slot again in place of
	 * the copy (RING_COPY_REQUEST's volatile qualifies the pointer). */
	atomic_signal_fence(memory_order_seq_cst);
}

void blkif_abi_put_response(struct blkif_ring *ring, RING_IDX idx, uint64_t id,
			    uint8_t operation, int16_t status)
{
	blkif_response_t *rsp;
	unsigned char *s;

	if (ring->protocol == BLKIF_PROTOCOL_X86_32) {
		s = (unsigned char *)x32_slot(ring, idx);
		memcpy(s, &id, sizeof(id));
		s[X32_OFF_RSP_OP] = operation;
		memcpy(s + X32_OFF_RSP_STATUS, &status, sizeof(status));
		return;
	}
	rsp = RING_GET_RESPONSE(&ring->back, idx);
	rsp->id = id;
	rsp->operation = operation;
	rsp->status = status;
}
