/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cbt-bitmap.c - a persistent dirty bitmap file (cbt-bitmap.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drivers/cbt/cbt-bitmap.h"

#define CBT_MAGIC	 "tapstripe-cbt\n"
#define CBT_VERSION	 1u
#define CBT_STATE_CLEAN	 1u
#define CBT_STATE_IN_USE 2u

/* The header as stored (this host's byte order: x86 and arm64 alike). */
struct cbt_header {
	char magic[16];
	uint32_t version;
	uint32_t granularity;
	uint64_t size_bytes;
	uint32_t state;
	char boot_id[CBT_BOOT_ID_MAX];
	char name[CBT_NAME_MAX + 1];
	uint64_t checksum; /* FNV-1a 64 of the header, this field 0 */
};

_Static_assert(sizeof(struct cbt_header) <= CBT_HEADER_SIZE,
	       "the header must fit its block");

bool cbt_name_ok(const char *name)
{
	size_t n = strlen(name);

	return n && n <= CBT_NAME_MAX && name[0] != '.' &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

void cbt_read_boot_id(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	buf[0] = '\0';
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static uint64_t fnv1a(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *s++) * 0x100000001b3ull;
	return h;
}

static uint64_t nr_bits_for(uint64_t size, uint32_t gran)
{
	return (size + gran - 1) / gran;
}

static size_t nr_bytes(const struct cbt_bitmap *b)
{
	return (size_t)((b->nr_bits + 7) / 8);
}

static bool bit(const struct cbt_bitmap *b, uint64_t i)
{
	return b->bits[i / 8] & (1u << (i % 8));
}

static int put_header(struct cbt_bitmap *b, uint32_t state)
{
	struct cbt_header h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, CBT_MAGIC, sizeof(CBT_MAGIC) - 1);
	h.version = CBT_VERSION;
	h.granularity = b->granularity;
	h.size_bytes = b->size_bytes;
	h.state = state;
	snprintf(h.boot_id, sizeof(h.boot_id), "%s", b->boot_id);
	snprintf(h.name, sizeof(h.name), "%s", b->name);
	h.checksum = fnv1a(&h, sizeof(h));
	if (pwrite(b->fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return errno ? -errno : -EIO;
	return fdatasync(b->fd) ? -errno : 0;
}

static int put_bytes(struct cbt_bitmap *b, size_t first, size_t n)
{
	ssize_t w = pwrite(b->fd, b->bits + first, n,
			   (off_t)(CBT_HEADER_SIZE + first));

	b->writes++;
	if (w != (ssize_t)n)
		return w < 0 ? -errno : -EIO;
	b->unsynced = true;
	return 0;
}

static struct cbt_bitmap *bitmap_new(const char *path, const char *name,
				     uint32_t gran, uint64_t size)
{
	struct cbt_bitmap *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->fd = -1;
	b->granularity = gran;
	b->size_bytes = size;
	b->nr_bits = nr_bits_for(size, gran);
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->path = strdup(path);
	b->bits = calloc(1, nr_bytes(b) ? nr_bytes(b) : 1);
	if (!b->path || !b->bits) {
		free(b->path);
		free(b->bits);
		free(b);
		return NULL;
	}
	return b;
}

static void bitmap_free(struct cbt_bitmap *b)
{
	if (b->fd >= 0)
		close(b->fd);
	free(b->path);
	free(b->bits);
	free(b);
}

/* The directory's entries made durable (a new file, a removed one). */
static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

int cbt_bitmap_create(const char *dir, const char *name, uint32_t granularity,
		      uint64_t size_bytes, const char *boot_id,
		      struct cbt_bitmap **out, char *why, size_t why_len)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	struct cbt_bitmap *b;
	int err;

	if (!cbt_name_ok(name) || granularity < CBT_MIN_GRANULARITY ||
	    granularity > CBT_MAX_GRANULARITY ||
	    (granularity & (granularity - 1)) || !size_bytes) {
		snprintf(why, why_len,
			 "cbt: bad bitmap '%.64s' (a name of 1-%d of A-Z a-z "
			 "0-9 . _ -, a granularity a power of two from 4K "
			 "to 64M)",
			 name, CBT_NAME_MAX);
		return -EINVAL;
	}
	if (snprintf(path, sizeof(path), "%s/%s.cbt", dir, name) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	if (!(b = bitmap_new(path, name, granularity, size_bytes)))
		return -ENOMEM;
	snprintf(b->boot_id, sizeof(b->boot_id), "%s", boot_id);
	/*
	 * Made whole as NAME.cbt.tmp, then linked into place (link refuses
	 * an existing name): a kill never leaves a half-made NAME.cbt.
	 */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
	b->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	err = b->fd < 0 ? -errno : 0;
	if (!err && ftruncate(b->fd, CBT_HEADER_SIZE + (off_t)nr_bytes(b)))
		err = -errno;
	if (!err)
		err = put_header(b, CBT_STATE_IN_USE);
	if (!err && link(tmp, path))
		err = -errno;
	if (b->fd >= 0)
		unlink(tmp);
	if (!err)
		err = sync_dir(dir);
	if (err) {
		snprintf(why, why_len, "cbt: cannot make %s: %s", path,
			 strerror(-err));
		bitmap_free(b);
		return err;
	}
	*out = b;
	return 0;
}

/* The header of an open file, checked. */
static int get_header(int fd, struct cbt_header *h, const char *path, char *why,
		      size_t why_len)
{
	uint64_t sum;

	if (pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h))
		goto bad;
	sum = h->checksum;
	h->checksum = 0;
	if (memcmp(h->magic, CBT_MAGIC, sizeof(CBT_MAGIC) - 1) ||
	    h->version != CBT_VERSION || fnv1a(h, sizeof(*h)) != sum ||
	    h->granularity < CBT_MIN_GRANULARITY ||
	    h->granularity > CBT_MAX_GRANULARITY ||
	    (h->granularity & (h->granularity - 1)) || !h->size_bytes ||
	    (h->state != CBT_STATE_CLEAN && h->state != CBT_STATE_IN_USE) ||
	    !memchr(h->name, '\0', sizeof(h->name)) ||
	    !memchr(h->boot_id, '\0', sizeof(h->boot_id)) ||
	    !cbt_name_ok(h->name))
		goto bad;
	return 0;
bad:
	snprintf(why, why_len,
		 "cbt: %s is not a dirty bitmap of this version or is "
		 "damaged: remove it (the next backup must then be a full "
		 "one)",
		 path);
	return -EINVAL;
}

/* The bits from the file; the whole map dirty after a host crash. */
static int load_bits(struct cbt_bitmap *b, const struct cbt_header *h,
		     const char *boot_id)
{
	size_t n =
		(size_t)((nr_bits_for(h->size_bytes, h->granularity) + 7) / 8);
	ssize_t r = pread(b->fd, b->bits, n, CBT_HEADER_SIZE);

	if (r != (ssize_t)n)
		return r < 0 ? -errno : -EIO;
	if (h->state == CBT_STATE_IN_USE && strcmp(h->boot_id, boot_id)) {
		memset(b->bits, 0xff, n);
		b->recovered = true;
	}
	/* Bits past the last granule stay 0. */
	if (h->size_bytes && nr_bits_for(h->size_bytes, h->granularity) % 8)
		b->bits[n - 1] &=
			(uint8_t)((1u << (nr_bits_for(h->size_bytes,
						      h->granularity) %
					  8)) -
				  1);
	for (uint64_t i = 0; i < b->nr_bits; i++)
		b->nr_dirty += bit(b, i);
	return b->recovered ? put_bytes(b, 0, n) : 0;
}

int cbt_bitmap_open(const char *path, uint64_t size_bytes, const char *boot_id,
		    struct cbt_bitmap **out, char *why, size_t why_len)
{
	struct cbt_header h;
	struct cbt_bitmap *b;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW), err;

	if (fd < 0) {
		err = -errno;
		snprintf(why, why_len, "cbt: cannot open %s: %s", path,
			 strerror(-err));
		return err;
	}
	if ((err = get_header(fd, &h, path, why, why_len))) {
		close(fd);
		return err;
	}
	if (size_bytes < h.size_bytes) {
		snprintf(why, why_len,
			 "cbt: %s covers %llu bytes, more than the disk's "
			 "%llu: remove it (the next backup must be a full one)",
			 path, (unsigned long long)h.size_bytes,
			 (unsigned long long)size_bytes);
		close(fd);
		return -EINVAL;
	}
	if (!(b = bitmap_new(path, h.name, h.granularity, h.size_bytes))) {
		close(fd);
		return -ENOMEM;
	}
	b->fd = fd;
	snprintf(b->boot_id, sizeof(b->boot_id), "%s", boot_id);
	err = load_bits(b, &h, boot_id);
	if (!err)
		err = put_header(b, CBT_STATE_IN_USE);
	if (!err && size_bytes > h.size_bytes)
		err = cbt_bitmap_grow(b, size_bytes);
	if (err) {
		snprintf(why, why_len, "cbt: %s: %s", path, strerror(-err));
		bitmap_free(b);
		return err;
	}
	*out = b;
	return 0;
}

int cbt_bitmap_mark(struct cbt_bitmap *b, uint64_t offset, uint64_t len)
{
	uint64_t first, last;
	size_t lo = SIZE_MAX, hi = 0;

	if (!len || offset >= b->size_bytes)
		return 0;
	if (len > b->size_bytes - offset)
		len = b->size_bytes - offset;
	first = offset / b->granularity;
	last = (offset + len - 1) / b->granularity;
	for (uint64_t i = first; i <= last; i++) {
		if (bit(b, i))
			continue;
		b->bits[i / 8] |= (uint8_t)(1u << (i % 8));
		b->nr_dirty++;
		if (i / 8 < lo)
			lo = (size_t)(i / 8);
		hi = (size_t)(i / 8);
	}
	return lo == SIZE_MAX ? 0 : put_bytes(b, lo, hi - lo + 1);
}

int cbt_bitmap_sync(struct cbt_bitmap *b)
{
	if (!b->unsynced)
		return 0;
	b->syncs++;
	if (fdatasync(b->fd))
		return -errno;
	b->unsynced = false;
	return 0;
}

int cbt_bitmap_clear(struct cbt_bitmap *b)
{
	int err;

	memset(b->bits, 0, nr_bytes(b));
	b->nr_dirty = 0;
	b->recovered = false;
	if ((err = put_bytes(b, 0, nr_bytes(b))))
		return err;
	return cbt_bitmap_sync(b);
}

int cbt_bitmap_grow(struct cbt_bitmap *b, uint64_t size_bytes)
{
	uint64_t bits = nr_bits_for(size_bytes, b->granularity);
	size_t old = nr_bytes(b), n = (size_t)((bits + 7) / 8);
	uint8_t *nb;

	if (size_bytes <= b->size_bytes)
		return 0;
	if (n > old) {
		if (!(nb = realloc(b->bits, n)))
			return -ENOMEM;
		memset(nb + old, 0, n - old);
		b->bits = nb;
		if (ftruncate(b->fd, CBT_HEADER_SIZE + (off_t)n))
			return -errno;
	}
	b->size_bytes = size_bytes;
	b->nr_bits = bits;
	return put_header(b, CBT_STATE_IN_USE);
}

void cbt_bitmap_extents(const struct cbt_bitmap *b, uint64_t offset,
			uint64_t len, struct td_extent *ext, unsigned int *nr)
{
	uint64_t end = offset + len, at = offset;
	unsigned int n = 0;

	while (at < end && n < *nr) {
		uint64_t g = at / b->granularity;
		bool d = g < b->nr_bits && bit(b, g);
		uint64_t stop;

		while (g < b->nr_bits && bit(b, g) == d &&
		       g * b->granularity < end)
			g++;
		stop = g * b->granularity;
		if (stop > end || g >= b->nr_bits)
			stop = end;
		ext[n].nr_sectors = (stop - at) >> TD_SECTOR_SHIFT;
		ext[n].flags = d ? TD_EXTENT_DIRTY : 0;
		n++;
		at = stop;
	}
	*nr = n;
}

void cbt_bitmap_close(struct cbt_bitmap *b)
{
	if (!b)
		return;
	if (!cbt_bitmap_sync(b))
		put_header(b, CBT_STATE_CLEAN);
	bitmap_free(b);
}

int cbt_bitmap_remove(struct cbt_bitmap *b)
{
	int err = unlink(b->path) ? -errno : 0;

	bitmap_free(b);
	return err;
}
