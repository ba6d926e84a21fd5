/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * snapshot-state.c - chunk bookkeeping of a snapshot copy and its job
 * file: a text header padded to TD_SNAP_HEADER_BYTES, then one bit per
 * chunk.  A bit is only ever set, one byte written in place and synced.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tapdisk/driver.h"
#include "tapdisk/snapshot-state.h"

#define SNAP_MAGIC "tapstripe-snapshot-job 1\n"

uint64_t td_snap_nr_chunks(uint64_t size_sectors, uint32_t chunk_sectors)
{
	return size_sectors / chunk_sectors +
	       (size_sectors % chunk_sectors ? 1 : 0);
}

void td_snap_chunk_range(const struct td_snap_state *st, uint64_t sector,
			 uint64_t nr, uint64_t *first, uint64_t *last)
{
	*first = sector / st->chunk_sectors;
	*last = (sector + nr - 1) / st->chunk_sectors;
}

uint32_t td_snap_chunk_len(const struct td_snap_state *st, uint64_t i)
{
	uint64_t start = i * st->chunk_sectors;
	uint64_t left = st->size_sectors - start;

	return left < st->chunk_sectors ? (uint32_t)left : st->chunk_sectors;
}

bool td_snap_copied(const struct td_snap_state *st, uint64_t i)
{
	return st->bits[i / 8] & (1u << (i % 8));
}

uint64_t td_snap_next_uncopied(const struct td_snap_state *st, uint64_t i)
{
	while (i < st->nr_chunks) {
		if (st->bits[i / 8] == 0xff && i % 8 == 0) {
			i += 8;
			continue;
		}
		if (!td_snap_copied(st, i))
			return i;
		i++;
	}
	return st->nr_chunks;
}

static size_t bitmap_bytes(const struct td_snap_state *st)
{
	return (size_t)((st->nr_chunks + 7) / 8);
}

int td_snap_state_init(struct td_snap_state *st, const char *target,
		       uint64_t size_sectors, uint32_t chunk_sectors,
		       struct td_strbuf *why)
{
	memset(st, 0, sizeof(*st));
	st->fd = -1;
	if (!chunk_sectors || (chunk_sectors & (chunk_sectors - 1)) ||
	    !size_sectors) {
		td_strbuf_printf(why,
				 "bad geometry: %" PRIu64 " sectors in "
				 "chunks of %" PRIu32 " (a power of two)",
				 size_sectors, chunk_sectors);
		return -EINVAL;
	}
	if (!*target || strlen(target) >= TD_SNAP_CHAIN_MAX ||
	    strchr(target, '\n')) {
		td_strbuf_printf(why,
				 "the target chain must be one line of "
				 "1 to %d characters",
				 TD_SNAP_CHAIN_MAX - 1);
		return -EINVAL;
	}
	snprintf(st->target, sizeof(st->target), "%s", target);
	st->size_sectors = size_sectors;
	st->chunk_sectors = chunk_sectors;
	st->nr_chunks = td_snap_nr_chunks(size_sectors, chunk_sectors);
	st->bits = calloc(1, bitmap_bytes(st));
	return st->bits ? 0 : -ENOMEM;
}

/* The header, NUL-padded to TD_SNAP_HEADER_BYTES; 0 or -ENAMETOOLONG. */
static int format_header(const struct td_snap_state *st, char *hdr)
{
	char row[96] = "";
	int n;

	memset(hdr, 0, TD_SNAP_HEADER_BYTES);
	if (st->row)
		snprintf(row, sizeof(row),
			 "row %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
			 st->row_dev, st->row_lower_ino, st->row_upper_ino);
	n = snprintf(hdr, TD_SNAP_HEADER_BYTES,
		     SNAP_MAGIC "size_sectors %" PRIu64 "\n"
				"chunk_sectors %" PRIu32 "\ntarget %s\n%send\n",
		     st->size_sectors, st->chunk_sectors, st->target, row);
	return n > 0 && n < (int)TD_SNAP_HEADER_BYTES ? 0 : -ENAMETOOLONG;
}

static int write_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static int sync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int fd, err = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return err;
}

/* Write the whole file at tmp; 0 or -errno. */
static int write_file(const struct td_snap_state *st, const char *tmp)
{
	char hdr[TD_SNAP_HEADER_BYTES];
	int fd, err = format_header(st, hdr);

	if (err)
		return err;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = write_all(fd, hdr, sizeof(hdr), 0);
	/* A new job: every bit clear, the bitmap a hole (no write of 32 MiB
	 * of zeros per TiB of disk while the vbd is paused). */
	if (!err && ftruncate(fd, (off_t)(sizeof(hdr) + bitmap_bytes(st))))
		err = -errno;
	if (!err && st->nr_copied)
		err = write_all(fd, st->bits, bitmap_bytes(st), sizeof(hdr));
	if (!err && fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

int td_snap_state_create(struct td_snap_state *st, const char *path,
			 struct td_strbuf *why)
{
	char tmp[PATH_MAX];
	int err;

	if (!access(path, F_OK)) {
		td_strbuf_printf(why,
				 "a snapshot job file %s exists: resume "
				 "or drop that job first",
				 path);
		return -EEXIST;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	err = write_file(st, tmp);
	if (!err && rename(tmp, path))
		err = -errno;
	if (!err)
		err = sync_dir_of(path);
	if (!err && (st->fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		err = -errno;
	if (!err && !(st->path = strdup(path)))
		err = -ENOMEM;
	if (err) {
		unlink(tmp);
		td_strbuf_printf(why, "cannot write the job file %s: %s", path,
				 strerror(-err));
	}
	return err;
}

/* Parse the header text into st; 0 or -EINVAL with why. */
static int parse_header(struct td_snap_state *st, char *hdr,
			struct td_strbuf *why)
{
	char *target, *end, *row;
	uint64_t dev = 0, lower = 0, upper = 0;
	int used = 0, err;

	hdr[TD_SNAP_HEADER_BYTES - 1] = '\0';
	if (strncmp(hdr, SNAP_MAGIC, strlen(SNAP_MAGIC)) ||
	    sscanf(hdr + strlen(SNAP_MAGIC),
		   "size_sectors %" SCNu64 "\nchunk_sectors %" SCNu32 "\n%n",
		   &st->size_sectors, &st->chunk_sectors, &used) != 2 ||
	    !used) {
		td_strbuf_puts(why, "not a snapshot job file (bad header)");
		return -EINVAL;
	}
	target = hdr + strlen(SNAP_MAGIC) + used;
	end = strstr(target, "\nend\n");
	if (strncmp(target, "target ", 7) || !end) {
		td_strbuf_puts(why, "not a snapshot job file (no target)");
		return -EINVAL;
	}
	*end = '\0';
	/* A redirect-on-write job (older tapdisks refuse it: the line
	 * makes their target two lines). */
	if ((row = strstr(target, "\nrow "))) {
		*row = '\0';
		if (sscanf(row + 5, "%" SCNu64 " %" SCNu64 " %" SCNu64 "%n",
			   &dev, &lower, &upper, &used) != 3 ||
		    row[5 + used] || !lower || !upper || lower == upper) {
			td_strbuf_puts(why, "not a snapshot job file (bad row "
					    "line)");
			return -EINVAL;
		}
	}
	err = td_snap_state_init(st, target + 7, st->size_sectors,
				 st->chunk_sectors, why);
	st->row = row != NULL;
	st->row_dev = dev;
	st->row_lower_ino = lower;
	st->row_upper_ino = upper;
	return err;
}

/* Read the bitmap; bits past the last chunk must be clear. */
static int read_bits(struct td_snap_state *st, int fd, struct td_strbuf *why)
{
	size_t len = bitmap_bytes(st);
	ssize_t n = pread(fd, st->bits, len, TD_SNAP_HEADER_BYTES);

	if (n < 0)
		return -errno;
	if ((size_t)n != len) {
		td_strbuf_printf(why, "cut short: %zd of %zu bitmap bytes", n,
				 len);
		return -EINVAL;
	}
	if (st->nr_chunks % 8 && (st->bits[len - 1] >> (st->nr_chunks % 8))) {
		td_strbuf_puts(why, "bits set beyond the last chunk");
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++)
		st->nr_copied += (uint64_t)__builtin_popcount(st->bits[i]);
	return 0;
}

static int load_fd(struct td_snap_state *st, int fd, struct td_strbuf *why)
{
	char hdr[TD_SNAP_HEADER_BYTES];
	struct td_strbuf inner;
	ssize_t n = pread(fd, hdr, sizeof(hdr), 0);
	int err;

	if (n < 0)
		return -errno;
	td_strbuf_init(&inner);
	err = n == (ssize_t)sizeof(hdr) ? parse_header(st, hdr, &inner)
					: -EINVAL;
	if (err == -EINVAL && !inner.len)
		td_strbuf_puts(&inner, "not a snapshot job file (too short)");
	if (!err)
		err = read_bits(st, fd, &inner);
	if (inner.len)
		td_strbuf_append(why, inner.data, inner.len);
	td_strbuf_free(&inner);
	return err;
}

int td_snap_state_load(struct td_snap_state *st, const char *path,
		       struct td_strbuf *why)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct td_strbuf inner;
	int err;

	memset(st, 0, sizeof(*st));
	st->fd = -1;
	if (fd < 0)
		return -errno;
	td_strbuf_init(&inner);
	err = load_fd(st, fd, &inner);
	if (!err && !(st->path = strdup(path)))
		err = -ENOMEM;
	if (err) {
		td_strbuf_printf(why, "snapshot job file %s: %s", path,
				 inner.len ? td_strbuf_str(&inner)
					   : strerror(-err));
		free(st->bits);
		st->bits = NULL;
		close(fd);
	} else {
		st->fd = fd;
	}
	td_strbuf_free(&inner);
	return err;
}

int td_snap_state_mark(struct td_snap_state *st, uint64_t i)
{
	int err = 0;

	if (td_snap_copied(st, i))
		return 0;
	st->bits[i / 8] |= (uint8_t)(1u << (i % 8));
	st->nr_copied++;
	if (st->fd < 0)
		return 0;
	err = write_all(st->fd, &st->bits[i / 8], 1,
			(off_t)(TD_SNAP_HEADER_BYTES + i / 8));
	return err ? err : td_snap_state_sync(st);
}

int td_snap_state_set_run(struct td_snap_state *st, uint64_t first, uint64_t nr)
{
	uint64_t lo = first / 8, hi = (first + nr - 1) / 8;

	for (uint64_t i = first; i < first + nr; i++) {
		if (td_snap_copied(st, i))
			continue;
		st->bits[i / 8] |= (uint8_t)(1u << (i % 8));
		st->nr_copied++;
	}
	if (st->fd < 0)
		return 0;
	return write_all(st->fd, &st->bits[lo], (size_t)(hi - lo + 1),
			 (off_t)(TD_SNAP_HEADER_BYTES + lo));
}

int td_snap_state_sync(struct td_snap_state *st)
{
	if (st->fd < 0)
		return 0;
	st->nr_syncs++;
	return fdatasync(st->fd) ? -errno : 0;
}

int td_snap_state_mark_run(struct td_snap_state *st, uint64_t first,
			   uint64_t nr)
{
	int err = td_snap_state_set_run(st, first, nr);

	return err ? err : td_snap_state_sync(st);
}

static int speed_path(const char *job_path, char *out, size_t len)
{
	return snprintf(out, len, "%s.speed", job_path) < (int)len
		       ? 0
		       : -ENAMETOOLONG;
}

int td_snap_speed_save(const char *job_path, uint64_t speed,
		       uint64_t busy_speed)
{
	char path[PATH_MAX], tmp[PATH_MAX + 4], line[64];
	int fd, n, err = speed_path(job_path, path, sizeof(path));

	if (err)
		return err;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	n = snprintf(line, sizeof(line),
		     "speed %" PRIu64 " busy_speed %" PRIu64 "\n", speed,
		     busy_speed);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	err = write_all(fd, line, (size_t)n, 0);
	close(fd);
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

int td_snap_speed_load(const char *job_path, uint64_t *speed,
		       uint64_t *busy_speed)
{
	char path[PATH_MAX], line[64];
	int fd, used = 0, err = speed_path(job_path, path, sizeof(path));
	ssize_t n;

	if (err)
		return err;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = pread(fd, line, sizeof(line) - 1, 0);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	line[n] = '\0';
	if (sscanf(line, "speed %" SCNu64 " busy_speed %" SCNu64 "\n%n", speed,
		   busy_speed, &used) != 2 ||
	    !used || line[used])
		return -EINVAL;
	return 0;
}

int td_snap_state_remove(struct td_snap_state *st)
{
	char speed[PATH_MAX];
	int err = 0;

	/* The limits first: a crash in between leaves a job file without
	 * them (the defaults), never limits without a job. */
	if (st->path && !speed_path(st->path, speed, sizeof(speed)) &&
	    unlink(speed) && errno != ENOENT)
		err = -errno;
	if (!err && st->path && unlink(st->path))
		err = -errno;
	if (!err && st->path)
		err = sync_dir_of(st->path);
	td_snap_state_fini(st);
	return err;
}

void td_snap_state_fini(struct td_snap_state *st)
{
	if (st->fd >= 0)
		close(st->fd);
	st->fd = -1;
	free(st->path);
	st->path = NULL;
	free(st->bits);
	st->bits = NULL;
}
