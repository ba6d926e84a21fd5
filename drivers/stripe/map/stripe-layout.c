/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-layout.c - the stripe layout arithmetic of DESIGN.md.
 */
#include "config.h"

#include <errno.h>

#include "drivers/stripe/map/stripe-layout.h"

bool stripe_layout_unit_ok(uint64_t unit_bytes)
{
	return unit_bytes >= STRIPE_MIN_UNIT_BYTES &&
	       unit_bytes <= STRIPE_MAX_UNIT_BYTES &&
	       !(unit_bytes & (unit_bytes - 1));
}

static uint64_t div_round_up(uint64_t n, uint64_t d)
{
	return n / d + (n % d != 0);
}

/*
 * J = ceil(ceil(V / (U·S)) · U / E).  U·S <= 2^30 · 256 cannot overflow;
 * ceil(V / (U·S)) · U <= V + U·S - 1 could, for V near 2^64, so it is
 * checked.
 */
int stripe_layout_extents_per_column(uint64_t size_bytes, uint64_t unit_bytes,
				     uint32_t columns, uint64_t extent_bytes,
				     uint32_t *extents_per_column)
{
	uint64_t rows, column_bytes, j;

	if (!size_bytes || !stripe_layout_unit_ok(unit_bytes) || !columns ||
	    columns > STRIPE_MAX_COLUMNS || !extent_bytes ||
	    extent_bytes > STRIPE_MAX_EXTENT_BYTES || extent_bytes % unit_bytes)
		return -EINVAL;
	rows = div_round_up(size_bytes, unit_bytes * columns);
	if (rows > UINT64_MAX / unit_bytes)
		return -EOVERFLOW;
	column_bytes = rows * unit_bytes;
	j = div_round_up(column_bytes, extent_bytes);
	if (j > STRIPE_MAX_EXTENTS_PER_COLUMN)
		return -EOVERFLOW;
	*extents_per_column = (uint32_t)j;
	return 0;
}

int stripe_layout_init(struct stripe_layout *l, uint64_t size_bytes,
		       uint64_t unit_bytes, uint32_t columns,
		       uint64_t extent_bytes)
{
	uint32_t j;
	int err = stripe_layout_extents_per_column(size_bytes, unit_bytes,
						   columns, extent_bytes, &j);

	if (err)
		return err;
	l->size_bytes = size_bytes;
	l->stripe_unit_bytes = unit_bytes;
	l->extent_size_bytes = extent_bytes;
	l->columns = columns;
	l->extents_per_column = j;
	return 0;
}

void stripe_layout_locate(const struct stripe_layout *l, uint64_t v,
			  struct stripe_loc *loc)
{
	uint64_t k = v / l->stripe_unit_bytes;

	loc->column = (uint32_t)(k % l->columns);
	loc->column_offset = (k / l->columns) * l->stripe_unit_bytes +
			     v % l->stripe_unit_bytes;
	loc->extent = (uint32_t)(loc->column_offset / l->extent_size_bytes);
	loc->extent_offset = loc->column_offset % l->extent_size_bytes;
}

uint64_t stripe_layout_virtual(const struct stripe_layout *l, uint32_t column,
			       uint64_t column_offset)
{
	uint64_t row = column_offset / l->stripe_unit_bytes;

	return (row * l->columns + column) * l->stripe_unit_bytes +
	       column_offset % l->stripe_unit_bytes;
}
