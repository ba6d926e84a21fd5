/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map-io.c - formatting, reading, locking, atomically replacing and
 * removing mapping files (format in map.h and doc/striped-disks.md).
 *
 * The lock is flock(2) on the mapping file itself, exclusive and
 * non-blocking: the stripe driver holds it while the disk is open, and
 * stripe-ctl takes it before it replaces or removes a file, so that no file
 * changes under a running disk.  The lock belongs to the open file
 * description, so a second open in the same process is refused too.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "drivers/stripe/map/map-int.h"

#define FILE_MODE	 0600 /* it may hold CHAP secrets */
#define OPEN_ATTEMPTS	 3    /* a rename may race with an opener */
#define TMP_SUFFIX_BYTES 32

static int sys_fail(struct stripe_map_error *err, const char *what,
		    const char *path, int e)
{
	stripe_map_fail(err, 0, "%s %s: %s", what, path, strerror(e));
	err->names_file = true;
	return -e;
}

void stripe_map_error_text(const struct stripe_map_error *err, const char *path,
			   char *buf, size_t len)
{
	if (err->names_file)
		snprintf(buf, len, "%s", err->reason);
	else if (err->line)
		snprintf(buf, len, "%s: line %u: %s", path, err->line,
			 err->reason);
	else
		snprintf(buf, len, "%s: %s", path, err->reason);
}

/*
 * Open a mapping file for reading without waiting on it: a FIFO given as
 * the map would block open(2) until a writer came, a tty until carrier.
 */
static int open_map_file(const char *path, int *fd,
			 struct stripe_map_error *err)
{
	mode_t mode;
	int ret = td_open_file(path, O_RDONLY, 0, TD_OPEN_REGULAR, fd, &mode);

	if (ret && mode) {
		stripe_map_fail(err, 0,
				"%s is %s, not a mapping file: give the "
				"regular file stripe-ctl wrote",
				path, td_file_kind(mode));
		err->names_file = true;
		return ret;
	}
	return ret ? sys_fail(err, "cannot open", path, -ret) : 0;
}

/* Read all of fd (at most STRIPE_MAP_MAX_FILE_BYTES) into *buf. */
static int read_all(int fd, char **buf, size_t *len)
{
	struct stat st;
	size_t got = 0;
	char *b;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode)) /* open_map_file refused it already */
		return -EINVAL;
	if (st.st_size > STRIPE_MAP_MAX_FILE_BYTES)
		return -EFBIG;
	if (!(b = malloc((size_t)st.st_size + 1)))
		return -ENOMEM;
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(fd, b + got, (size_t)st.st_size - got,
				  (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(b);
			return n < 0 ? -errno : -EIO;
		}
		got += (size_t)n;
	}
	*buf = b;
	*len = got;
	return 0;
}

static int read_fd(int fd, const char *path, struct stripe_map *m,
		   struct stripe_map_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	int ret = read_all(fd, &buf, &len);

	if (ret == -EFBIG) {
		stripe_map_fail(
			err, 0,
			"%s is larger than %u bytes: not a mapping file", path,
			STRIPE_MAP_MAX_FILE_BYTES);
		err->names_file = true;
		return ret;
	}
	if (ret)
		return sys_fail(err, "cannot read", path, -ret);
	ret = stripe_map_parse(buf, len, m, err);
	free(buf);
	return ret;
}

int stripe_map_read(const char *path, struct stripe_map *m,
		    struct stripe_map_error *err)
{
	int fd, ret;

	memset(m, 0, sizeof(*m));
	memset(err, 0, sizeof(*err));
	if ((ret = open_map_file(path, &fd, err)))
		return ret;
	ret = read_fd(fd, path, m, err);
	close(fd);
	return ret;
}

/*
 * Open path and lock it; -EBUSY when someone else holds the lock.  The
 * locked file must still be the one the name points to: a writer may have
 * renamed a new file over it between our open and our lock.
 */
static int open_locked(const char *path, int *fd_out,
		       struct stripe_map_error *err)
{
	for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
		struct stat a, b;
		int fd, ret = open_map_file(path, &fd, err);

		if (ret)
			return ret;
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int e = errno;

			close(fd);
			if (e != EWOULDBLOCK)
				return sys_fail(err, "cannot lock", path, e);
			stripe_map_fail(err, 0,
					"%s is in use: another process (a "
					"tapdisk serving this disk, or "
					"stripe-ctl) holds its lock; stop it "
					"first",
					path);
			return -EBUSY;
		}
		if (!fstat(fd, &a) && !stat(path, &b) && a.st_ino == b.st_ino &&
		    a.st_dev == b.st_dev) {
			*fd_out = fd;
			return 0;
		}
		close(fd);
	}
	return sys_fail(err, "cannot lock", path, EAGAIN);
}

int stripe_map_open(const char *path, struct stripe_map *m, int *lock_fd,
		    struct stripe_map_error *err)
{
	int fd, ret;

	memset(m, 0, sizeof(*m));
	memset(err, 0, sizeof(*err));
	if ((ret = open_locked(path, &fd, err)))
		return ret;
	if ((ret = read_fd(fd, path, m, err))) {
		close(fd);
		return ret;
	}
	*lock_fd = fd;
	return 0;
}

void stripe_map_close(int lock_fd)
{
	if (lock_fd >= 0)
		close(lock_fd); /* drops the flock */
}

/* --- the text ------------------------------------------------------------------ */

static void format_server(const struct stripe_map_server *s, uint32_t i,
			  struct td_strbuf *out)
{
	td_strbuf_printf(out,
			 "server %u address %s portal %s target %s lun %u "
			 "block-size %u",
			 i, s->address, s->portal, s->target, s->lun,
			 s->block_size);
	if (s->chap_user[0])
		td_strbuf_printf(out, " chap-user %s chap-secret %s",
				 s->chap_user, s->chap_secret);
	if (s->device[0])
		td_strbuf_printf(out, " device %s", s->device);
	td_strbuf_puts(out, "\n");
}

/* STATE of a bitmap: ok, stale or dirty HEX (digit k = regions 4k..4k+3). */
static void format_state(const struct stripe_map *m, const uint64_t *bits,
			 struct td_strbuf *out)
{
	static const char digits[] = "0123456789abcdef";
	uint32_t n = stripe_map_region_count(m);
	uint32_t count = stripe_map_bits_count(bits, n);
	char hex[STRIPE_MAP_MAX_REGIONS / 4 + 1];
	uint32_t len = (n + 3) / 4;

	if (!count || count == n) {
		td_strbuf_puts(out, count ? "stale" : "ok");
		return;
	}
	for (uint32_t k = 0; k < len; k++)
		hex[k] = digits[(bits[k / 16] >> (4 * (k % 16))) & 0xf];
	hex[len] = '\0';
	td_strbuf_printf(out, "dirty %s", hex);
}

static void format_slots(const struct stripe_map *m, struct td_strbuf *out)
{
	size_t i = 0;

	for (uint32_t c = 0; c < m->columns; c++)
		for (uint32_t j = 0; j < m->extents_per_column; j++)
			for (uint32_t r = 0; r < m->replicas; r++, i++) {
				td_strbuf_printf(out,
						 "extent %u %u %u server %u "
						 "lba %" PRIu64 " ",
						 c, j, r, m->slots[i].server,
						 m->slots[i].lba);
				format_state(m, stripe_map_slot_dirty(m, i),
					     out);
				td_strbuf_puts(out, "\n");
			}
}

static void format_moves(const struct stripe_map *m, struct td_strbuf *out)
{
	size_t i = 0;

	for (uint32_t c = 0; c < m->columns; c++)
		for (uint32_t j = 0; j < m->extents_per_column; j++)
			for (uint32_t r = 0; r < m->replicas; r++, i++) {
				if (!m->moves[i].active)
					continue;
				td_strbuf_printf(out,
						 "move %u %u %u server %u "
						 "lba %" PRIu64 " ",
						 c, j, r, m->moves[i].server,
						 m->moves[i].lba);
				format_state(m, stripe_map_move_dirty(m, i),
					     out);
				td_strbuf_puts(out, "\n");
			}
}

int stripe_map_format(const struct stripe_map *m, struct td_strbuf *out,
		      struct stripe_map_error *err)
{
	int version, ret;

	memset(err, 0, sizeof(*err));
	if ((ret = stripe_map_check(m, err)))
		return ret;
	version = stripe_map_format_version(m);
	td_strbuf_printf(out, "%s %d\n" HEADER_COMMENT, STRIPE_MAP_MAGIC,
			 version);
	td_strbuf_printf(out,
			 "vdisk %s\nsize-bytes %" PRIu64
			 "\nstripe-unit-bytes %" PRIu64 "\ncolumns %u\n"
			 "extents-per-column %u\nreplicas %u\n"
			 "extent-size-bytes %" PRIu64 "\nmaster %s\n",
			 m->vdisk, m->size_bytes, m->stripe_unit_bytes,
			 m->columns, m->extents_per_column, m->replicas,
			 m->extent_size_bytes, m->master);
	if (version >= STRIPE_MAP_VERSION_2)
		td_strbuf_printf(out, "region-bytes %" PRIu64 "\n",
				 m->region_bytes);
	for (uint32_t s = 0; s < m->nr_servers; s++)
		format_server(&m->servers[s], s, out);
	format_slots(m, out);
	format_moves(m, out);
	if ((ret = td_strbuf_error(out)))
		return ret;
	td_strbuf_printf(out, CHECKSUM_PREFIX "%08x\n",
			 stripe_map_crc32c(0, out->data, out->len));
	return td_strbuf_error(out);
}

int stripe_map_sync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, ret = 0;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Write text to tmp, durably. */
static int write_tmp(const char *tmp, const struct td_strbuf *text,
		     struct stripe_map_error *err)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, FILE_MODE);
	int ret;

	if (fd < 0)
		return sys_fail(err, "cannot create", tmp, errno);
	ret = write_all(fd, text->data, text->len);
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	return ret ? sys_fail(err, "cannot write", tmp, -ret) : 0;
}

/* Format, write the temp file, rename it over path, sync the directory. */
static int replace_file(const char *path, const struct stripe_map *m,
			struct stripe_map_error *err)
{
	char tmp[PATH_MAX];
	struct td_strbuf text;
	int ret;

	if (strlen(path) + TMP_SUFFIX_BYTES >= sizeof(tmp))
		return sys_fail(err, "cannot write", path, ENAMETOOLONG);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	td_strbuf_init(&text);
	ret = stripe_map_format(m, &text, err);
	if (!ret && !(ret = write_tmp(tmp, &text, err)) && rename(tmp, path))
		ret = sys_fail(err, "cannot rename over", path, errno);
	td_strbuf_free(&text);
	if (ret) {
		unlink(tmp);
		return ret;
	}
	if ((ret = stripe_map_sync_dir(path)))
		return sys_fail(err, "cannot sync the directory of", path,
				-ret);
	return 0;
}

int stripe_map_write(const char *path, const struct stripe_map *m,
		     struct stripe_map_error *err)
{
	int old = -1, ret;

	memset(err, 0, sizeof(*err));
	if ((ret = stripe_map_check(m, err)))
		return ret;
	/* An existing file is replaced only under its lock. */
	ret = open_locked(path, &old, err);
	if (ret && ret != -ENOENT)
		return ret;
	memset(err, 0, sizeof(*err));
	ret = replace_file(path, m, err);
	if (old >= 0)
		close(old);
	return ret;
}

/* Write text to the new file fd durably, under its lock. */
static int write_locked_tmp(int fd, const char *tmp,
			    const struct td_strbuf *text,
			    struct stripe_map_error *err)
{
	int ret;

	/* Nobody else knows this file yet: the lock cannot be contended. */
	if (flock(fd, LOCK_EX | LOCK_NB))
		return sys_fail(err, "cannot lock", tmp, errno);
	ret = write_all(fd, text->data, text->len);
	if (!ret && fsync(fd))
		ret = -errno;
	return ret ? sys_fail(err, "cannot write", tmp, -ret) : 0;
}

int stripe_map_rewrite(const char *path, const struct stripe_map *m,
		       int *lock_fd, struct stripe_map_error *err)
{
	char tmp[PATH_MAX];
	struct td_strbuf text;
	int fd = -1, ret;

	memset(err, 0, sizeof(*err));
	if (strlen(path) + TMP_SUFFIX_BYTES >= sizeof(tmp))
		return sys_fail(err, "cannot write", path, ENAMETOOLONG);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	td_strbuf_init(&text);
	ret = stripe_map_format(m, &text, err);
	if (!ret) {
		unlink(tmp); /* left by a crashed process with our pid */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			  FILE_MODE);
		if (fd < 0)
			ret = sys_fail(err, "cannot create", tmp, errno);
	}
	if (!ret)
		ret = write_locked_tmp(fd, tmp, &text, err);
	if (!ret && rename(tmp, path))
		ret = sys_fail(err, "cannot rename over", path, errno);
	td_strbuf_free(&text);
	if (ret) {
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		return ret;
	}
	/* The new inode is locked and in place: drop the old one's lock. */
	stripe_map_close(*lock_fd);
	*lock_fd = fd;
	if ((ret = stripe_map_sync_dir(path)))
		return sys_fail(err, "cannot sync the directory of", path,
				-ret);
	return 0;
}

int stripe_map_unlink(const char *path, int lock_fd)
{
	int ret = 0;

	if (unlink(path))
		ret = -errno;
	else
		ret = stripe_map_sync_dir(path);
	stripe_map_close(lock_fd);
	return ret;
}
