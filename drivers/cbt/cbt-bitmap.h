/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cbt-bitmap.h - one persistent dirty bitmap of changed-block tracking: a
 * file NAME.cbt holding a header and one bit per granule of the disk,
 * set when the granule is written.  Free of the event loop and of the
 * driver so that tests drive it directly.
 *
 * File: a 4096-byte header (magic, version, granularity, the disk size it
 * covers, its state, the boot id of the host that last opened it, a
 * checksum), then the bits, little-endian bit order, byte i holding
 * granules 8i..8i+7.
 *
 * Crash rule (never under-report): a bit is written to the file (the
 * page cache) before the write it covers is let through, so a tapdisk
 * killed at any instant leaves every bit it needs.  The header says
 * IN_USE with the host's boot id while the bitmap is open and CLEAN once
 * it is closed.  Opening a bitmap that is IN_USE under the same boot id
 * (the tapdisk was killed, the page cache survived) keeps its bits;
 * IN_USE under another boot id (the host crashed: unflushed pages may be
 * lost, data written before the crash may be on disk) marks every granule
 * dirty: an over-report, never an under-report.
 */
#ifndef TAPSTRIPE_CBT_BITMAP_H
#define TAPSTRIPE_CBT_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapdisk/driver.h"

#define CBT_NAME_MAX		63
#define CBT_BOOT_ID_MAX		40
#define CBT_HEADER_SIZE		4096u
#define CBT_DEFAULT_GRANULARITY (64u << 10)
#define CBT_MIN_GRANULARITY	(4u << 10)
#define CBT_MAX_GRANULARITY	(64u << 20)
#define CBT_WHY_MAX		256

struct cbt_bitmap {
	char name[CBT_NAME_MAX + 1];
	char boot_id[CBT_BOOT_ID_MAX]; /* written into the header */
	char *path;
	int fd;
	uint32_t granularity; /* bytes, a power of two */
	uint64_t size_bytes;  /* the disk it covers */
	uint64_t nr_bits;     /* granules: size rounded up */
	uint8_t *bits;
	uint64_t nr_dirty; /* bits set */
	bool unsynced;	   /* bits written since the last fdatasync */
	bool recovered;	   /* opened after a host crash: all marked dirty */
	uint64_t writes;   /* pwrite calls for bits */
	uint64_t syncs;	   /* fdatasync calls */
};

/* A bitmap name: 1-63 of [A-Za-z0-9._-], not starting with '.'. */
bool cbt_name_ok(const char *name);

/* The host's boot id (/proc/sys/kernel/random/boot_id), "" if unknown. */
void cbt_read_boot_id(char *buf, size_t len);

/*
 * Make DIR/NAME.cbt for a disk of size_bytes, all clean, and open it
 * (IN_USE under boot_id).  -EEXIST when it exists; 0 or -errno with the
 * reason in why.  Blocks (file creation and fsync).
 */
int cbt_bitmap_create(const char *dir, const char *name, uint32_t granularity,
		      uint64_t size_bytes, const char *boot_id,
		      struct cbt_bitmap **out, char *why, size_t why_len);

/*
 * Open an existing bitmap file for a disk of size_bytes (a disk larger
 * than the bitmap grew: the bitmap grows, the new granules clean; smaller
 * is refused), apply the crash rule and mark it IN_USE under boot_id.
 * A damaged header or a size that does not match is refused with the
 * reason (remove the file: the next backup must be a full one).
 */
int cbt_bitmap_open(const char *path, uint64_t size_bytes, const char *boot_id,
		    struct cbt_bitmap **out, char *why, size_t why_len);

/*
 * Set the bits of [offset, offset + len) and write the bytes that
 * changed to the file (no system call when none did).  0 or -errno.
 */
int cbt_bitmap_mark(struct cbt_bitmap *b, uint64_t offset, uint64_t len);

/* fdatasync when bits were written since the last one.  0 or -errno. */
int cbt_bitmap_sync(struct cbt_bitmap *b);

/* Every bit cleared, written and synced.  0 or -errno. */
int cbt_bitmap_clear(struct cbt_bitmap *b);

/* The disk grew to size_bytes: more bits, clean.  0 or -errno. */
int cbt_bitmap_grow(struct cbt_bitmap *b, uint64_t size_bytes);

/*
 * The runs of [offset, offset + len) (inside the disk), dirty ones with
 * TD_EXTENT_DIRTY, rounded out to the granularity and cut at the range:
 * at most *nr extents (in: room >= 1, out: filled).
 */
void cbt_bitmap_extents(const struct cbt_bitmap *b, uint64_t offset,
			uint64_t len, struct td_extent *ext, unsigned int *nr);

/* Close: clean (synced, header CLEAN) unless the file is gone. */
void cbt_bitmap_close(struct cbt_bitmap *b);

/* Delete the file and free the bitmap.  0 or -errno (freed anyway). */
int cbt_bitmap_remove(struct cbt_bitmap *b);

#endif
