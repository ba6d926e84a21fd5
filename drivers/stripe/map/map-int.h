/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map-int.h - what map.c (syntax), map-io.c (I/O) and map-check.c
 * (semantics) share.  Not for other modules.
 */
#ifndef TAPSTRIPE_STRIPE_MAP_INT_H
#define TAPSTRIPE_STRIPE_MAP_INT_H

#include <stdarg.h>

#include "drivers/stripe/map/map.h"

#define CHECKSUM_PREFIX "checksum crc32c "
#define CHECKSUM_HEX	8
#define HEADER_COMMENT                                           \
	"# tapstripe mapping file (see drivers/mapfile.h); the " \
	"last line checksums the rest\n"

/* The header keys, in the order the writer writes them. */
enum stripe_map_key {
	MAP_KEY_VDISK = 0,
	MAP_KEY_SIZE,
	MAP_KEY_UNIT,
	MAP_KEY_COLUMNS,
	MAP_KEY_EXTENTS_PER_COLUMN,
	MAP_KEY_REPLICAS,
	MAP_KEY_EXTENT_SIZE,
	MAP_KEY_MASTER,
	MAP_KEY_REGION, /* version 2 only (and mandatory there) */
	MAP_KEY_COUNT
};
#define MAP_KEY_V1_COUNT MAP_KEY_REGION /* the keys of version 1 */

extern const char *const stripe_map_key_names[MAP_KEY_COUNT];

/*
 * Where the parser found each part, so that a semantic error names the line
 * to fix.  NULL (for a map built in memory) gives line 0 everywhere.
 */
struct stripe_map_lines {
	unsigned int key[MAP_KEY_COUNT];
	unsigned int *server; /* nr_servers */
	unsigned int *slot;   /* stripe_map_nr_slots */
	unsigned int *move;   /* stripe_map_nr_slots; 0 = no move line */
};

/*
 * Allocate m->slots, dirty, moves and move_dirty (zeroed) for m's
 * geometry and region_bytes (both checked by the caller).  0 or -ENOMEM.
 */
int stripe_map_alloc_slots(struct stripe_map *m);

/* Whole words of a slot bitmap between slots: for memcpy and compares. */
size_t stripe_map_bitmap_bytes(const struct stripe_map *m);

/* The header rules alone (sizes, counts, J), before slots exist. */
int stripe_map_check_geometry(const struct stripe_map *m,
			      const struct stripe_map_lines *where,
			      struct stripe_map_error *err);

/* stripe_map_check, naming lines from where (may be NULL). */
int stripe_map_check_lines(const struct stripe_map *m,
			   const struct stripe_map_lines *where,
			   struct stripe_map_error *err);

/* Set err (line, printf-style reason); returns -EINVAL. */
int stripe_map_fail(struct stripe_map_error *err, unsigned int line,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* True for a non-empty string of printable ASCII without spaces. */
bool stripe_map_token_ok(const char *s, size_t size);

/* fsync the directory that holds path, making a rename or unlink durable. */
int stripe_map_sync_dir(const char *path);

#endif
