/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aio-extents.h - base:allocation of a regular file, from the holes the
 * file system reports (lseek SEEK_DATA / SEEK_HOLE).
 */
#ifndef TAPSTRIPE_AIO_EXTENTS_H
#define TAPSTRIPE_AIO_EXTENTS_H

#include <stdint.h>

#include "tapdisk/driver.h"

/*
 * Describe the sectors [sector, sector + nr_sectors) of fd as extents of
 * data (flags 0) and holes (TD_EXTENT_HOLE | TD_EXTENT_ZERO), in order,
 * at most *nr (>= 1) of them; *nr receives how many.  A boundary that
 * is not sector-aligned counts the partial sector as data.  Past the end
 * of the file is a hole.  Returns 0 or -errno from lseek.
 */
int aio_file_extents(int fd, uint64_t sector, uint64_t nr_sectors,
		     struct td_extent *ext, unsigned int *nr);

#endif
