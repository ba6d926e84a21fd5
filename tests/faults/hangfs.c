/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hangfs.c - a FUSE filesystem whose one file never opens: an open of
 * MOUNT/disk waits until the opener is interrupted (as an NFS mount whose
 * server is gone waits, killable), then fails with EINTR.  For the test
 * that a tapdisk stuck opening its disk still ends on SIGTERM
 * (tests/faults/tapdisk-start.sh).
 *
 *   hangfs MOUNTPOINT [-f] [-o OPTIONS]
 *
 * The kernel tells the filesystem of a signal to the opener only when the
 * signal ended the opener's interruptible wait: a fatal one, or one it
 * handles; a blocked one does not, and the open waits for ever.
 * MOUNT/opens counts the opens that began ("opens N\n").
 */
#define FUSE_USE_VERSION 31

#include "config.h"

#include <errno.h>
#include <fuse.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define DISK_BYTES   (1 << 20)
#define POLL_NS	     10000000 /* how often a hung open looks for a signal */
#define STATUS_BYTES 32

static atomic_uint opens;

static int hang_getattr(const char *path, struct stat *st,
			struct fuse_file_info *fi)
{
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else if (!strcmp(path, "/disk")) {
		st->st_mode = S_IFREG | 0644;
		st->st_size = DISK_BYTES;
		st->st_nlink = 1;
	} else if (!strcmp(path, "/opens")) {
		st->st_mode = S_IFREG | 0444;
		st->st_size = STATUS_BYTES;
		st->st_nlink = 1;
	} else {
		return -ENOENT;
	}
	return 0;
}

static int hang_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
			off_t off, struct fuse_file_info *fi,
			enum fuse_readdir_flags flags)
{
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "disk", NULL, 0, 0);
	fill(buf, "opens", NULL, 0, 0);
	return 0;
}

/*
 * disk: wait until interrupted (libfuse marks the request when the
 * kernel's INTERRUPT for it comes; no signal to this thread is needed),
 * then fail; opens: open at once.
 */
static int hang_open(const char *path, struct fuse_file_info *fi)
{
	struct timespec tick = {.tv_nsec = POLL_NS};

	if (!strcmp(path, "/opens")) {
		fi->direct_io = 1;
		return 0;
	}
	if (strcmp(path, "/disk"))
		return -ENOENT;
	atomic_fetch_add(&opens, 1);
	while (!fuse_interrupted())
		nanosleep(&tick, NULL);
	return -EINTR;
}

static int hang_read(const char *path, char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	char text[STATUS_BYTES];
	int n = snprintf(text, sizeof(text), "opens %u\n", atomic_load(&opens));

	if (off >= n)
		return 0;
	if ((size_t)(n - off) < size)
		size = (size_t)(n - off);
	memcpy(buf, text + off, size);
	return (int)size;
}

static void *hang_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->direct_io = 1;
	return NULL;
}

static const struct fuse_operations ops = {
	.getattr = hang_getattr,
	.readdir = hang_readdir,
	.open = hang_open,
	.read = hang_read,
	.init = hang_init,
};

int main(int argc, char **argv)
{
	return fuse_main(argc, argv, &ops, NULL);
}
