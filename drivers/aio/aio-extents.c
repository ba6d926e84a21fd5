/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio-extents.c - base:allocation of a regular file by SEEK_DATA and
 * SEEK_HOLE.  Two lseek calls per extent, answered from the file
 * system's extent tree without reading data: fine in the event loop.
 */
#include "config.h"

#include <errno.h>
#include <unistd.h>

#include "drivers/aio/aio-extents.h"

#define SECTOR_MASK ((uint64_t)TD_SECTOR_SIZE - 1)

/* Where the data at or after off starts; end when none does before it. */
static int next_data(int fd, uint64_t off, uint64_t end, uint64_t *data)
{
	off_t r = lseek(fd, (off_t)off, SEEK_DATA);

	if (r < 0) {
		if (errno != ENXIO) /* ENXIO: only a hole after off */
			return -errno;
		*data = end;
		return 0;
	}
	*data = (uint64_t)r & ~SECTOR_MASK; /* a partial sector is data */
	if (*data < off)
		*data = off;
	if (*data > end)
		*data = end;
	return 0;
}

/* Where the data starting at off ends (a hole or the end of file). */
static int next_hole(int fd, uint64_t off, uint64_t end, uint64_t *hole)
{
	off_t r = lseek(fd, (off_t)off, SEEK_HOLE);

	if (r < 0) {
		if (errno != ENXIO) /* ENXIO: off is past the end of file */
			return -errno;
		*hole = end;
		return 0;
	}
	*hole = ((uint64_t)r + SECTOR_MASK) & ~SECTOR_MASK;
	if (*hole <= off) /* punched since SEEK_DATA: say data, safely */
		*hole = off + TD_SECTOR_SIZE;
	if (*hole > end)
		*hole = end;
	return 0;
}

static void put(struct td_extent *ext, unsigned int *n, uint64_t bytes,
		uint32_t flags)
{
	if (*n && ext[*n - 1].flags == flags) {
		ext[*n - 1].nr_sectors += bytes >> TD_SECTOR_SHIFT;
		return;
	}
	ext[*n].nr_sectors = bytes >> TD_SECTOR_SHIFT;
	ext[*n].flags = flags;
	(*n)++;
}

int aio_file_extents(int fd, uint64_t sector, uint64_t nr_sectors,
		     struct td_extent *ext, unsigned int *nr)
{
	uint64_t off = sector << TD_SECTOR_SHIFT;
	uint64_t end = (sector + nr_sectors) << TD_SECTOR_SHIFT;
	unsigned int n = 0;
	int err;

	while (off < end && n < *nr) {
		uint64_t data = end, hole = end;

		if ((err = next_data(fd, off, end, &data)))
			return err;
		if (data > off) {
			put(ext, &n, data - off,
			    TD_EXTENT_HOLE | TD_EXTENT_ZERO);
			off = data;
			continue;
		}
		if ((err = next_hole(fd, off, end, &hole)))
			return err;
		put(ext, &n, hole - off, 0);
		off = hole;
	}
	*nr = n;
	return 0;
}
