/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-al-file.c - the activity log's side file (NAME.map.al): two
 * records, written in turn, each a whole set of hot regions.
 *
 * A record (little endian), at offset (gen % 2) * rec_bytes:
 *   magic "TSALOG01"      8 bytes
 *   gen                   u64, > 0, one more than the record before
 *   state                 u32: 0 open (regions may be written), 1 clean
 *   nr                    u32, the regions that follow
 *   region_bytes          u64, the map's region size when written
 *   regions_per_extent    u32
 *   extents               u32, columns * extents per column
 *   region ids            nr * u64: extent index * regions_per_extent + k
 *   crc32c                u32 of every byte before it
 * A torn write spoils at most the record being written; the other one is
 * older and covers every region a write could be in flight on, since no
 * write goes to a region before the record naming it is on disk.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drivers/stripe/map/map.h"
#include "drivers/stripe/stripe-al.h"

#define AL_MAGIC     "TSALOG01"
#define AL_HDR_BYTES 40u
#define AL_ALIGN     4096u

size_t stripe_al_record_bytes(uint32_t cap)
{
	size_t n = AL_HDR_BYTES + (size_t)cap * 8 + 4;

	return (n + AL_ALIGN - 1) / AL_ALIGN * AL_ALIGN;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

size_t stripe_al_record_format(const struct stripe_al_record *rec,
			       const uint64_t *regions, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t used = AL_HDR_BYTES + (size_t)rec->nr * 8;

	if (used + 4 > len)
		return 0;
	memset(buf, 0, len);
	memcpy(p, AL_MAGIC, 8);
	put64(p + 8, rec->gen);
	put32(p + 16, rec->clean ? 1 : 0);
	put32(p + 20, rec->nr);
	put64(p + 24, rec->region_bytes);
	put32(p + 32, rec->regions_per_extent);
	put32(p + 36, rec->extents);
	for (uint32_t i = 0; i < rec->nr; i++)
		put64(p + AL_HDR_BYTES + (size_t)i * 8, regions[i]);
	put32(p + used, stripe_map_crc32c(0, p, used));
	return used + 4;
}

int stripe_al_record_parse(const void *buf, size_t len,
			   struct stripe_al_record *rec, uint64_t **regions)
{
	const uint8_t *p = buf;
	size_t used;
	uint64_t *ids;

	*regions = NULL;
	if (len < AL_HDR_BYTES + 4 || memcmp(p, AL_MAGIC, 8))
		return -EINVAL;
	rec->gen = get64(p + 8);
	rec->clean = get32(p + 16) == 1;
	rec->nr = get32(p + 20);
	rec->region_bytes = get64(p + 24);
	rec->regions_per_extent = get32(p + 32);
	rec->extents = get32(p + 36);
	if (!rec->gen || get32(p + 16) > 1 || rec->nr > STRIPE_AL_MAX_CAP ||
	    !rec->region_bytes || !rec->regions_per_extent || !rec->extents)
		return -EINVAL;
	used = AL_HDR_BYTES + (size_t)rec->nr * 8;
	if (used + 4 > len || get32(p + used) != stripe_map_crc32c(0, p, used))
		return -EINVAL;
	if (!(ids = calloc(rec->nr ? rec->nr : 1, sizeof(*ids))))
		return -ENOMEM;
	for (uint32_t i = 0; i < rec->nr; i++) {
		ids[i] = get64(p + AL_HDR_BYTES + (size_t)i * 8);
		if (ids[i] / rec->regions_per_extent >= rec->extents) {
			free(ids);
			return -EINVAL;
		}
	}
	*regions = ids;
	return 0;
}

/* One record slot of fd into buf (rec_bytes): 0, -ENODATA when short. */
static int read_slot(int fd, uint32_t slot, void *buf, size_t rec_bytes)
{
	ssize_t n = pread(fd, buf, rec_bytes, (off_t)(slot * rec_bytes));

	if (n < 0)
		return -errno;
	return (size_t)n == rec_bytes ? 0 : -ENODATA;
}

/* The record of slot, when valid and newer than *best. */
static int take_slot(int fd, uint32_t slot, void *buf, size_t rec_bytes,
		     struct stripe_al_record *best, uint64_t **regions)
{
	struct stripe_al_record rec;
	uint64_t *ids;
	int ret = read_slot(fd, slot, buf, rec_bytes);

	if (ret == -ENODATA)
		return 0;
	if (ret)
		return ret;
	ret = stripe_al_record_parse(buf, rec_bytes, &rec, &ids);
	if (ret == -ENOMEM)
		return ret;
	if (ret || (best->gen && rec.gen <= best->gen)) {
		free(ids);
		return 0;
	}
	free(*regions);
	*regions = ids;
	*best = rec;
	return 0;
}

int stripe_al_file_read(int fd, uint32_t cap, struct stripe_al_record *rec,
			uint64_t **regions)
{
	size_t rec_bytes = stripe_al_record_bytes(cap);
	struct stat st;
	void *buf;
	int ret = 0;

	memset(rec, 0, sizeof(*rec));
	*regions = NULL;
	if (fstat(fd, &st))
		return -errno;
	if (st.st_size == 0)
		return -ENOENT; /* a new file: nothing was ever written */
	/* A file written with another capacity has other record sizes. */
	if ((size_t)st.st_size != 2 * rec_bytes &&
	    (size_t)st.st_size % AL_ALIGN == 0 && st.st_size >= 2 * AL_ALIGN)
		rec_bytes = (size_t)st.st_size / 2;
	if (!(buf = malloc(rec_bytes)))
		return -ENOMEM;
	for (uint32_t slot = 0; slot < 2 && !ret; slot++)
		ret = take_slot(fd, slot, buf, rec_bytes, rec, regions);
	free(buf);
	if (!ret && !rec->gen)
		ret = -EBADMSG; /* neither record is valid */
	if (ret) {
		free(*regions);
		*regions = NULL;
	}
	return ret;
}

int stripe_al_file_write(int fd, uint32_t cap,
			 const struct stripe_al_record *rec,
			 const uint64_t *regions)
{
	size_t rec_bytes = stripe_al_record_bytes(cap);
	void *buf = malloc(rec_bytes);
	ssize_t n;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (!stripe_al_record_format(rec, regions, buf, rec_bytes)) {
		free(buf);
		return -E2BIG;
	}
	n = pwrite(fd, buf, rec_bytes, (off_t)((rec->gen % 2) * rec_bytes));
	if (n < 0)
		ret = -errno;
	else if ((size_t)n != rec_bytes)
		ret = -EIO;
	else if (fdatasync(fd))
		ret = -errno;
	free(buf);
	return ret;
}
