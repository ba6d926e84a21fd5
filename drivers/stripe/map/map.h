/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map.h - the mapping file of a striped virtual disk: reader, writer,
 * validator and exclusive opener (issue #5).
 *
 * stripe-ctl writes it from the master's allocation; the stripe driver
 * opens it (stripe_map_open) and needs nothing else to serve the disk.  This
 * module depends on tapdisk/ only (never on master/ or RPC).
 *
 * FORMAT, VERSION 1
 *
 * A text file of lines ending in "\n", ASCII, at most STRIPE_MAP_MAX_LINE
 * bytes each.  Fields are separated by single spaces; values never contain
 * spaces.  Lines starting with "#" are comments (covered by the checksum).
 * No other blank or extra line is allowed.  Numbers are unsigned decimals
 * without sign or leading zeros.  In order:
 *
 *   tapstripe-map 1                    the magic and version: the first line
 *
 *   then each of these header lines exactly once, in any order:
 *   vdisk NAME                         the master's id: 1-63 of [A-Za-z0-9._-]
 *   size-bytes V                       the disk size: > 0, a multiple of 512
 *   stripe-unit-bytes U                a power of two, 4 KiB .. 1 GiB
 *   columns S                          1 .. 256
 *   extents-per-column J               must equal ceil(ceil(V/(U*S))*U/E)
 *   replicas R                         1 .. 4
 *   extent-size-bytes E                a multiple of U, at most 1 TiB
 *   master HOST:PORT                   the master that allocated the extents
 *
 *   then the servers, numbered 0, 1, 2 ... in order:
 *   server N address A portal P target T lun L block-size B
 *          [chap-user USER chap-secret SECRET] [device PATH]
 *       (one line; the keys after "server N" in any order, each once)
 *       A  the storage host (replicas of one extent need distinct hosts)
 *       P  the iSCSI portal, host:port
 *       T  the iSCSI target name; (T, L) is unique among the servers
 *       L  the LUN, 0 .. 65535
 *       B  the LUN's logical block size: 512, 1024, 2048 or 4096
 *       USER, SECRET  CHAP credentials for this server, both or neither,
 *           printable ASCII without spaces (the file is written mode 0600)
 *       PATH  optional: the same LUN as a local block device of a kernel
 *           (open-iscsi) session, e.g. /dev/disk/by-path/ip-A:3260-iscsi-
 *           T-lun-L; an absolute path, printable ASCII without spaces, at
 *           most STRIPE_MAP_DEVICE_SIZE - 1 bytes.  The stripe driver then
 *           reads and writes the device (O_DIRECT, libaio) instead of
 *           logging in itself; the other keys still name the LUN (its
 *           identity for the master and `stripe-ctl session`).  Written
 *           by `stripe-ctl session login`, removed by `... logout`.
 *           Files without it are unchanged, so the version stays 1; a
 *           reader older than the key rejects it as an unknown key.
 *   every server must be used by at least one extent.
 *
 *   then exactly S*J*R extent lines, column-major, replica fastest:
 *   extent C X R server N lba LBA STATE
 *       C column, X extent index in the column, R replica index;
 *       N the server line's number; LBA the extent's first block on the LUN,
 *       in units of that server's block size; STATE "ok" or "stale" (a
 *       replica that missed writes and must be resynchronised before it is
 *       read).  The R replicas of one extent are on servers with distinct
 *       addresses, and no two extents overlap on one server (LBA*B .. +E).
 *
 *   checksum crc32c XXXXXXXX           last line: CRC-32C (Castagnoli,
 *       reflected, init and final XOR 0xffffffff; "123456789" -> e3069283)
 *       of every byte before this line, as 8 lowercase hex digits.
 *
 * Anything else is rejected with the line number and the reason: a wrong
 * magic or version, unknown, duplicate or missing keys, values out of range
 * or overflowing, lines out of order, missing or extra extents, a server
 * used twice by one extent's replicas, overlapping extents, an unused
 * server, a checksum mismatch, a truncated file (no final checksum line or
 * no final newline), bytes after the checksum line.
 *
 * The writer replaces the file atomically: it writes NAME.tmp.PID, fsyncs
 * it, renames it over NAME and fsyncs the directory.  If NAME exists and is
 * locked by an opener, the writer refuses (-EBUSY) instead of replacing it
 * underneath the opener.
 */
#ifndef TAPSTRIPE_STRIPE_MAP_H
#define TAPSTRIPE_STRIPE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/json.h"
#include "drivers/stripe/map/stripe-layout.h"

#define STRIPE_MAP_MAGIC   "tapstripe-map"
#define STRIPE_MAP_VERSION 1

/* Bounds (the master's stripe.x uses the same values). */
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
	bool stale;
	uint64_t lba; /* in the server's block_size units */
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
};

/* Why a file or a map was rejected: line 0 when not tied to a line. */
struct stripe_map_error {
	unsigned int line;
	char reason[512];
};

/*
 * Allocate m->servers (nr_servers, zeroed) and m->slots for the geometry
 * already in m (columns, extents_per_column, replicas).  0, -EINVAL when a
 * count is out of bounds, -ENOMEM.
 */
int stripe_map_alloc(struct stripe_map *m, uint32_t nr_servers);

/* Free what stripe_map_alloc or a reader allocated; m may be zeroed. */
void stripe_map_free(struct stripe_map *m);

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
 * Every rule of the format that is not syntax: bounds, geometry, J,
 * distinct replicas, overlaps, unused servers.  0 or -EINVAL with err set
 * (line 0).  The reader runs it on what it parsed; the writer before it
 * writes.
 */
int stripe_map_check(const struct stripe_map *m, struct stripe_map_error *err);

/* A valid vdisk name: 1-63 of [A-Za-z0-9._-]. */
bool stripe_map_name_ok(const char *name);

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

#endif
