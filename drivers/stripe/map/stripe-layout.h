/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-layout.h - where a virtual byte lives on a striped disk (DESIGN.md,
 * "Stripe layout (exact)").
 *
 * A virtual disk has size V, stripe unit U (a power of two, at least
 * STRIPE_MIN_UNIT_BYTES), S columns and extents of E bytes (a multiple of
 * U).  For a virtual byte offset v:
 *
 *     k   = v / U                 stripe unit number
 *     c   = k % S                 column
 *     off = (k / S) * U + v % U   offset inside column c
 *     j   = off / E               extent index inside column c
 *     x   = off % E               offset inside that extent
 *
 * Column c is the concatenation of its J extents, J = ceil(ceil(V / (U·S)) ·
 * U / E).  Pure arithmetic: no I/O, no allocation, shared by stripe-ctl
 * (which asks the master for S·J extents) and the stripe driver.
 */
#ifndef TAPSTRIPE_STRIPE_LAYOUT_H
#define TAPSTRIPE_STRIPE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#define STRIPE_MIN_UNIT_BYTES	(4ull << 10) /* 4 KiB: one page */
#define STRIPE_MAX_UNIT_BYTES	(1ull << 30) /* 1 GiB */
#define STRIPE_MAX_EXTENT_BYTES (1ull << 40) /* 1 TiB */
#define STRIPE_MAX_COLUMNS	256
#define STRIPE_MAX_REPLICAS	4
/* Most extents one column may have (bounds J, so S·J·R fits 32 bits). */
#define STRIPE_MAX_EXTENTS_PER_COLUMN (1u << 20)

struct stripe_layout {
	uint64_t size_bytes;	     /* V */
	uint64_t stripe_unit_bytes;  /* U */
	uint64_t extent_size_bytes;  /* E */
	uint32_t columns;	     /* S */
	uint32_t extents_per_column; /* J */
};

/* Where one virtual byte lives. */
struct stripe_loc {
	uint32_t column;	/* c */
	uint32_t extent;	/* j */
	uint64_t column_offset; /* off */
	uint64_t extent_offset; /* x */
};

/* True when unit is a power of two in [STRIPE_MIN_UNIT_BYTES, MAX]. */
bool stripe_layout_unit_ok(uint64_t unit_bytes);

/*
 * J for a disk of size_bytes: 0, or -EINVAL when size is 0, unit not
 * acceptable (stripe_layout_unit_ok), columns not in 1..STRIPE_MAX_COLUMNS,
 * extent not a multiple of unit or above STRIPE_MAX_EXTENT_BYTES;
 * -EOVERFLOW when J exceeds STRIPE_MAX_EXTENTS_PER_COLUMN.
 */
int stripe_layout_extents_per_column(uint64_t size_bytes, uint64_t unit_bytes,
				     uint32_t columns, uint64_t extent_bytes,
				     uint32_t *extents_per_column);

/*
 * Fill in l (J included) after checking the parameters as above; 0 or
 * -errno.
 */
int stripe_layout_init(struct stripe_layout *l, uint64_t size_bytes,
		       uint64_t unit_bytes, uint32_t columns,
		       uint64_t extent_bytes);

/*
 * Where virtual offset v lives.  The caller guarantees v < l->size_bytes
 * and l came from stripe_layout_init (or passed stripe_map_check): the
 * arithmetic cannot overflow then.
 */
void stripe_layout_locate(const struct stripe_layout *l, uint64_t v,
			  struct stripe_loc *loc);

/*
 * The inverse: the virtual offset of byte column_offset of column c,
 * ((off / U) * S + c) * U + off % U (it may lie past the disk's end: the
 * last stripe of a column is padded).  c < S; l as above.
 */
uint64_t stripe_layout_virtual(const struct stripe_layout *l, uint32_t column,
			       uint64_t column_offset);

#endif
