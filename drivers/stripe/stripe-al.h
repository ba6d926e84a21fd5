/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-al.h - the stripe driver's activity log: the regions writes may
 * be in flight on, kept durable in a side file next to the mapping file
 * (NAME.al), so that after a crash the replicas of those regions are
 * resynchronised instead of left differing with no mark (issue #19).
 *
 * Contract: no write reaches any replica of a region before a record
 * naming the region is on disk; a region leaves the log only when no
 * write that touched it is still unacknowledged.  At open, an unclean
 * log's regions are marked dirty on every replica but one (the resync
 * source), durably, before the disk is served.  The file format is in
 * stripe-al-file.c; the in-memory set and the writer thread in stripe-al.c.
 */
#ifndef TAPSTRIPE_STRIPE_AL_H
#define TAPSTRIPE_STRIPE_AL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One entry covers STRIPE_AL_UNIT bytes (whole regions; at most E). */
#define STRIPE_AL_UNIT	      (4ull << 20)
#define STRIPE_AL_DEFAULT_CAP 1024u
#define STRIPE_AL_MIN_CAP     16u
#define STRIPE_AL_MAX_CAP     65536u

/* One record of the file, without its region ids. */
struct stripe_al_record {
	uint64_t gen;
	bool clean; /* written at a clean close: no region is hot */
	uint32_t nr;
	uint64_t region_bytes;
	uint32_t regions_per_extent;
	uint32_t extents;
};

/* Bytes of one record slot for a log of cap regions (4 KiB aligned). */
size_t stripe_al_record_bytes(uint32_t cap);

/* Format rec and its nr region ids into buf; bytes used, 0 if len is short. */
size_t stripe_al_record_format(const struct stripe_al_record *rec,
			       const uint64_t *regions, void *buf, size_t len);

/*
 * Parse one record: 0 with *regions malloc'ed (free it), -EINVAL when it
 * is not a valid record (magic, bounds, checksum), -ENOMEM.
 */
int stripe_al_record_parse(const void *buf, size_t len,
			   struct stripe_al_record *rec, uint64_t **regions);

/*
 * The newest valid record of the file: 0, -ENOENT for an empty file,
 * -EBADMSG when neither record is valid, -errno.
 */
int stripe_al_file_read(int fd, uint32_t cap, struct stripe_al_record *rec,
			uint64_t **regions);

/* Write rec into its slot (gen % 2) and fdatasync: 0 or -errno. */
int stripe_al_file_write(int fd, uint32_t cap,
			 const struct stripe_al_record *rec,
			 const uint64_t *regions);

#endif
