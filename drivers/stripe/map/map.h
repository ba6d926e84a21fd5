/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map.h - the mapping file of a striped virtual disk: reader, writer,
 * validator and exclusive opener (issue #5).
 *
 * stripe-ctl writes it from the master's allocation; the stripe driver
 * opens it (stripe_map_open) and needs nothing else to serve the disk.
 * This module depends on common/ only (never on master/ or RPC).
 * Contract: the parser rejects anything but format versions 1 and 2 exactly,
 * with the line number and the reason; the writer writes version 1 whenever
 * the map needs nothing of version 2 (the default region size, no replica
 * partially dirty, no move target), else version 2, and replaces the file atomically
 * (NAME.tmp.PID, fsync, rename, fsync of the directory) and refuses
 * (-EBUSY) to replace a file an opener holds locked.  The format, line by
 * line, is in doc/striped-disks.md ("The mapping file").
 */
#ifndef TAPSTRIPE_STRIPE_MAP_H
#define TAPSTRIPE_STRIPE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/json.h"
#include "drivers/stripe/map/stripe-layout.h"

#define STRIPE_MAP_MAGIC     "tapstripe-map"
#define STRIPE_MAP_VERSION   1 /* what a map without version 2 state gets */
#define STRIPE_MAP_VERSION_2 2 /* region-bytes, 'dirty HEX', move lines */

/*
 * Dirty regions (issue #19): each replica's extent is cut into regions of
 * region_bytes; a bitmap per slot says which ones missed writes.
 */
#define STRIPE_MAP_MAX_REGIONS	  2048 /* per extent */
#define STRIPE_MAP_REGION_ALIGN	  4096 /* region_bytes is a multiple */
#define STRIPE_MAP_DEFAULT_REGION (1ull << 20)

/*
 * Bounds (the master's stripe.x uses the same values).  The longest line is
 * a move line with 512 hex digits (2048 regions), about 600 bytes.
 */
#define STRIPE_MAP_MAX_LINE	  1024
#define STRIPE_MAP_MAX_FILE_BYTES (64u << 20)
#define STRIPE_MAP_MAX_SERVERS	  4096
#define STRIPE_MAP_MAX_SLOTS	  262144 /* S * J * R */
#define STRIPE_MAP_MAX_LUN	  65535
#define STRIPE_MAP_MIN_BLOCK	  512
#define STRIPE_MAP_MAX_BLOCK	  4096

/* String sizes, the NUL included. */
#define STRIPE_MAP_NAME_SIZE	64
#define STRIPE_MAP_ADDRESS_SIZE 64
#define STRIPE_MAP_PORTAL_SIZE	262
#define STRIPE_MAP_TARGET_SIZE	224
#define STRIPE_MAP_CHAP_SIZE	256
#define STRIPE_MAP_MASTER_SIZE	262
#define STRIPE_MAP_DEVICE_SIZE	256

struct stripe_map_server {
	char address[STRIPE_MAP_ADDRESS_SIZE];
	char portal[STRIPE_MAP_PORTAL_SIZE];
	char target[STRIPE_MAP_TARGET_SIZE];
	uint32_t lun;
	uint32_t block_size;
	char chap_user[STRIPE_MAP_CHAP_SIZE];	/* "" when none */
	char chap_secret[STRIPE_MAP_CHAP_SIZE]; /* "" when none */
	char device[STRIPE_MAP_DEVICE_SIZE];	/* "" when none */
};

struct stripe_map_replica {
	uint32_t server; /* index into stripe_map.servers */
	bool stale;	 /* == its dirty bitmap has a bit set */
	uint64_t lba;	 /* in the server's block_size units */
};

/*
 * A move target being filled for one slot (re-homing, issue #19): it gets
 * every write; its move_dirty bits are the regions not yet copied.
 */
struct stripe_map_move {
	bool active;
	uint32_t server; /* index into stripe_map.servers */
	uint64_t lba;	 /* in the server's block_size units */
};

struct stripe_map {
	char vdisk[STRIPE_MAP_NAME_SIZE];
	uint64_t size_bytes;
	uint64_t stripe_unit_bytes;
	uint64_t extent_size_bytes;
	uint32_t columns;
	uint32_t extents_per_column;
	uint32_t replicas;
	char master[STRIPE_MAP_MASTER_SIZE];
	uint32_t nr_servers;
	struct stripe_map_server *servers; /* nr_servers */
	struct stripe_map_replica *slots;  /* columns * J * replicas */
	/*
	 * The region size G (0 before stripe_map_alloc: it sets the
	 * default).  dirty: per slot stripe_map_region_words words, bit k
	 * = region k (word k / 64, bit k % 64); moves and move_dirty the
	 * same per slot for its move target.
	 */
	uint64_t region_bytes;
	uint64_t *dirty;
	struct stripe_map_move *moves;
	uint64_t *move_dirty;
};

/* Why a file or a map was rejected: line 0 when not tied to a line. */
struct stripe_map_error {
	unsigned int line;
	bool names_file; /* reason names the file (a failed system call) */
	char reason[512];
};

/* Room for stripe_map_error_text: a path, a line number, a reason. */
#define STRIPE_MAP_ERROR_TEXT_MAX (4096 + 32 + 512)

/*
 * The one line to print for a reader's error about the file path:
 * "PATH: line N: REASON", "PATH: REASON", or REASON when it names the
 * file already.  Into buf (len bytes, truncated).
 */
void stripe_map_error_text(const struct stripe_map_error *err, const char *path,
			   char *buf, size_t len);

/*
 * Allocate m->servers (nr_servers, zeroed), m->slots, the dirty bitmaps,
 * the moves and their bitmaps (all zeroed: every replica ok, no move) for
 * the geometry already in m (columns, extents_per_column, replicas,
 * extent_size_bytes).  m->region_bytes 0 becomes
 * stripe_map_default_region(E); another value must pass
 * stripe_map_region_ok.  0, -EINVAL when a count or the region size is
 * out of bounds, -ENOMEM.
 */
int stripe_map_alloc(struct stripe_map *m, uint32_t nr_servers);

/* Free what stripe_map_alloc or a reader allocated; m may be zeroed. */
void stripe_map_free(struct stripe_map *m);

/* A deep copy of src (dst is overwritten, free it).  0 or -ENOMEM/-EINVAL. */
int stripe_map_copy(struct stripe_map *dst, const struct stripe_map *src);

/*
 * The region size of a version 1 file and of a map built with
 * region_bytes 0: 1 MiB when it divides E and E / 1 MiB <= 2048, else the
 * smallest multiple of 4096 dividing E with E / G <= 2048 (E itself when
 * nothing smaller does).  0 for E = 0.
 */
uint64_t stripe_map_default_region(uint64_t extent_bytes);

/* G divides E, is a multiple of 4096 and E / G <= 2048. */
bool stripe_map_region_ok(uint64_t extent_bytes, uint64_t region_bytes);

/* Regions per extent: E / G. */
static inline uint32_t stripe_map_region_count(const struct stripe_map *m)
{
	return (uint32_t)(m->extent_size_bytes / m->region_bytes);
}

/* 64-bit words in one slot's bitmap. */
static inline size_t stripe_map_region_words(const struct stripe_map *m)
{
	return ((size_t)stripe_map_region_count(m) + 63) / 64;
}

/* Slot's dirty bitmap (regions its replica missed). */
static inline uint64_t *stripe_map_slot_dirty(const struct stripe_map *m,
					      size_t slot)
{
	return m->dirty + slot * stripe_map_region_words(m);
}

/* Slot's move target's bitmap (regions not yet copied to it). */
static inline uint64_t *stripe_map_move_dirty(const struct stripe_map *m,
					      size_t slot)
{
	return m->move_dirty + slot * stripe_map_region_words(m);
}

/*
 * The version the writer gives m: 1 when region_bytes is the default, no
 * slot is partially dirty and no move is active, else 2.
 */
int stripe_map_format_version(const struct stripe_map *m);

/* Bits first..last (inclusive) set. */
void stripe_map_bits_set_range(uint64_t *bits, uint32_t first, uint32_t last);
bool stripe_map_bits_test(const uint64_t *bits, uint32_t k);
void stripe_map_bits_clear(uint64_t *bits, uint32_t k);
/* Set bits among the first n. */
uint32_t stripe_map_bits_count(const uint64_t *bits, uint32_t n);
/* Bits 0..n-1 set; the bits above n in the last word stay clear. */
void stripe_map_bits_set_all(uint64_t *bits, uint32_t n);
bool stripe_map_bits_any(const uint64_t *bits, uint32_t n);
/* The first set bit >= from among the first n, or n. */
uint32_t stripe_map_bits_next(const uint64_t *bits, uint32_t n, uint32_t from);

/* Every region of slot dirty (.stale true) / none (.stale false). */
void stripe_map_slot_mark_all(struct stripe_map *m, size_t slot);
void stripe_map_slot_clear_all(struct stripe_map *m, size_t slot);

/*
 * Where the replica r of extent j of column c is in m->slots (the slot
 * index the stale marks use too); the caller keeps them in range.
 */
static inline size_t stripe_map_slot_index(const struct stripe_map *m,
					   uint32_t c, uint32_t j, uint32_t r)
{
	return ((size_t)c * m->extents_per_column + j) * m->replicas + r;
}

/* The replica r of extent j of column c; the caller keeps them in range. */
static inline struct stripe_map_replica *
stripe_map_slot(const struct stripe_map *m, uint32_t c, uint32_t j, uint32_t r)
{
	return &m->slots[stripe_map_slot_index(m, c, j, r)];
}

static inline size_t stripe_map_nr_slots(const struct stripe_map *m)
{
	return (size_t)m->columns * m->extents_per_column * m->replicas;
}

/* The layout of a checked map (see stripe-layout.h). */
void stripe_map_layout(const struct stripe_map *m, struct stripe_layout *l);

/*
 * Every rule of the format that is not syntax: bounds, geometry, J, the
 * region size, .stale == "its bitmap has a bit", no bit beyond the last
 * region, distinct replicas, move targets (a known server distinct by
 * address from the extent's other replicas, no bits when inactive),
 * overlaps (move targets included), unused servers.  0 or -EINVAL with err set
 * (line 0).  The reader runs it on what it parsed; the writer before it
 * writes.
 */
int stripe_map_check(const struct stripe_map *m, struct stripe_map_error *err);

/* A valid vdisk name: 1-63 of [A-Za-z0-9._-]. */
bool stripe_map_name_ok(const char *name);

/*
 * MAP.incomplete next to a map: the disk is a snapshot whose copy is not
 * finished (stripe-ctl vdisk snapshot); only the copy job opens it.
 */
#define STRIPE_INCOMPLETE_SUFFIX ".incomplete"

/* CRC-32C of buf, continuing from crc (start with 0). */
uint32_t stripe_map_crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * Parse a whole file's text.  0 with m filled in (free it with
 * stripe_map_free), or -EINVAL with err set and m left empty.
 */
int stripe_map_parse(const char *text, size_t len, struct stripe_map *m,
		     struct stripe_map_error *err);

/* The text of a checked map, checksum line included.  0 or -errno. */
int stripe_map_format(const struct stripe_map *m, struct td_strbuf *out,
		      struct stripe_map_error *err);

/*
 * Read and check path without locking it (for tools that only look).
 * 0, -ENOENT & co. from open/read, -EFBIG above STRIPE_MAP_MAX_FILE_BYTES,
 * -EINVAL with err set.
 */
int stripe_map_read(const char *path, struct stripe_map *m,
		    struct stripe_map_error *err);

/*
 * Open path for serving it: take an exclusive lock on it (flock, non-
 * blocking), then read and check it.  0 with *lock_fd held until
 * stripe_map_close; -EBUSY when another opener holds the lock (err says so,
 * naming the file); else as stripe_map_read.
 */
int stripe_map_open(const char *path, struct stripe_map *m, int *lock_fd,
		    struct stripe_map_error *err);

/* Release the lock taken by stripe_map_open. */
void stripe_map_close(int lock_fd);

/*
 * Write m to path atomically (see the format notes above), mode 0600.
 * 0, -EBUSY when path exists and is locked, -EINVAL when m fails
 * stripe_map_check, else -errno of the failing system call (err says
 * which).
 */
int stripe_map_write(const char *path, const struct stripe_map *m,
		     struct stripe_map_error *err);

/*
 * Replace path, held open by this process with stripe_map_open (*lock_fd),
 * with m, without ever releasing the exclusive lock: the temp file
 * NAME.tmp.PID is written, locked, fsynced and renamed over NAME, the
 * directory fsynced; then the old lock fd is closed and *lock_fd is the
 * new file's (locked before the rename made it visible, so no opener can
 * slip in).  Blocks on the disk: call it off the event loop.  0, -EINVAL
 * when m fails stripe_map_check, else -errno of the failing system call
 * (err says which); on an error before the rename the file and *lock_fd
 * are unchanged, after it (the directory sync) the lock fd was swapped.
 */
int stripe_map_rewrite(const char *path, const struct stripe_map *m,
		       int *lock_fd, struct stripe_map_error *err);

/*
 * Remove a mapping file held open with stripe_map_open (so that nobody
 * opens it meanwhile), and make the removal durable (fsync of the
 * directory).  The lock is released.  0 or -errno.
 */
int stripe_map_unlink(const char *path, int lock_fd);

/* --- growing (map-grow.c; doc/striped-disks.md "Growing a disk") --------- */

/*
 * The grown map a serving tapdisk is to take over is written next to the
 * map, as PATH.grow (STRIPE_MAP_GROW_SUFFIX), by stripe_map_write.
 */
#define STRIPE_MAP_GROW_SUFFIX ".grow"

/* path + STRIPE_MAP_GROW_SUFFIX into buf (len bytes, truncated). */
void stripe_map_grow_path(const char *path, char *buf, size_t len);

/*
 * Where an index kept per extent part moves when the extents per column
 * grow from old_per_column to new_per_column: index = (c * J + j) *
 * per_extent + i (a slot: per_extent = replicas; an activity-log region:
 * per_extent = regions per extent) becomes (c * J' + j) * per_extent + i.
 * The caller keeps index below columns * old_per_column * per_extent,
 * per_extent and old_per_column above 0.
 */
uint64_t stripe_map_grow_index(uint64_t index, uint32_t old_per_column,
			       uint32_t new_per_column, uint32_t per_extent);

/* stripe_map_grow_index of a slot of old. */
size_t stripe_map_grow_slot(const struct stripe_map *old,
			    uint32_t new_per_column, size_t slot);

/*
 * The grown map to serve: side's size and extents per column, cur's
 * slots (replica, stale marks, dirty regions, move targets: cur is the
 * map in force, which may have changed since side was written) at their
 * new indices, side's added extents (replica and marks; servers matched
 * by target and LUN, appended when cur does not name them).  Side's own
 * old slots are not looked at.  0 with out filled (free it), or -EINVAL
 * with err set (another vdisk, another geometry or region size, not
 * larger, too many servers, or the result fails stripe_map_check, e.g.
 * an added extent overlapping one of cur's), -ENOMEM.
 */
int stripe_map_grow_merge(const struct stripe_map *cur,
			  const struct stripe_map *side, struct stripe_map *out,
			  struct stripe_map_error *err);

/*
 * Remove PATH.grow (path: the map) and sync the directory: 0 (also when
 * there was none) or -errno.
 */
int stripe_map_grow_discard(const char *path);

/* What stripe_map_grow_adopt did with PATH.grow. */
enum stripe_map_grow_outcome {
	STRIPE_MAP_GROW_NONE = 0, /* there is none */
	STRIPE_MAP_GROW_ADOPTED,  /* the map was grown, PATH.grow removed */
	STRIPE_MAP_GROW_STALE,	  /* not larger than the map: removed */
	STRIPE_MAP_GROW_REFUSED,  /* cannot apply (err says why): removed */
	STRIPE_MAP_GROW_KEPT,	  /* cannot be read now (err): left as is */
};

/*
 * Take PATH.grow into the map path, held with stripe_map_open (*lock_fd)
 * and read into *m: stripe_map_grow_merge of *m and it, written with
 * stripe_map_rewrite (*lock_fd swapped), *m replaced by the grown map,
 * then PATH.grow removed (and the directory synced).  A PATH.grow that
 * is not larger (adopted already, then a crash) or that cannot apply
 * (unparsable, another disk, an overlap: err says why) is removed; a new
 * `stripe-ctl vdisk resize` writes a fresh one from the master's answer;
 * one that cannot be read now (EACCES, EIO...) is left for later (KEPT,
 * err says why): the map keeps its size.  Blocks on the disk.  0 with
 * *outcome, or -errno with err set when the map could not be rewritten
 * or PATH.grow not removed (on an error before the rename *m, path and
 * PATH.grow are unchanged; after it, path is the grown map).
 */
int stripe_map_grow_adopt(const char *path, struct stripe_map *m, int *lock_fd,
			  enum stripe_map_grow_outcome *outcome,
			  struct stripe_map_error *err);

#endif
