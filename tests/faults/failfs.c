/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * failfs.c - a FUSE filesystem of two files that makes chosen reads and
 * writes of a disk image fail with EIO, for the fault tests (issue #10):
 * tgtd serves MOUNT/lun as a LUN and answers the failed I/O with a SCSI
 * error (MEDIUM ERROR), as a disk with bad sectors would.
 *
 *   failfs IMAGE MOUNTPOINT [-f] [-o OPTIONS]
 *
 *   MOUNT/lun   IMAGE, read and written through (direct I/O: every read
 *               and write of a client reaches failfs); fsync is IMAGE's
 *   MOUNT/fail  the rules; write one command per write(2):
 *                 read START LENGTH    reads touching [START, START+LENGTH)
 *                                      of lun fail with EIO
 *                 write START LENGTH   the same for writes (nothing is
 *                                      written)
 *                 clear                no more failures
 *               reading it gives the rules and the failure counters
 *               ("read_errors N", "write_errors N")
 *
 * At most MAX_RULES rules; a malformed command or one too many fails the
 * write(2) with EINVAL (the shell's echo says so).
 */
#define FUSE_USE_VERSION 31

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RULES	 64
#define CMD_MAX_BYTES	 128
#define STATUS_MAX_BYTES (MAX_RULES * 64 + 128)

enum { FILE_NONE, FILE_LUN, FILE_FAIL };

struct rule {
	bool write;
	uint64_t start, end; /* [start, end) */
};

static struct {
	int fd; /* the image */
	pthread_mutex_t lock;
	struct rule rules[MAX_RULES];
	unsigned nr_rules;
	uint64_t read_errors, write_errors;
} fs = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static int file_of(const char *path)
{
	if (!strcmp(path, "/lun"))
		return FILE_LUN;
	if (!strcmp(path, "/fail"))
		return FILE_FAIL;
	return FILE_NONE;
}

/* Does [off, off+len) of lun meet a rule for this direction?  Counts it. */
static bool fails(bool write, uint64_t off, size_t len)
{
	bool hit = false;

	pthread_mutex_lock(&fs.lock);
	for (unsigned i = 0; i < fs.nr_rules && !hit; i++)
		hit = fs.rules[i].write == write && off < fs.rules[i].end &&
		      off + len > fs.rules[i].start;
	if (hit && write)
		fs.write_errors++;
	else if (hit)
		fs.read_errors++;
	pthread_mutex_unlock(&fs.lock);
	return hit;
}

static int ff_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	struct stat img;

	(void)fi;
	memset(st, 0, sizeof(*st));
	switch (file_of(path)) {
	case FILE_NONE:
		if (strcmp(path, "/"))
			return -ENOENT;
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	case FILE_LUN:
		if (fstat(fs.fd, &img))
			return -errno;
		st->st_size = img.st_size;
		st->st_blocks = img.st_blocks;
		break;
	default:
		break;
	}
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = 1;
	return 0;
}

static int ff_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	(void)off, (void)fi, (void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "lun", NULL, 0, 0);
	fill(buf, "fail", NULL, 0, 0);
	return 0;
}

static int ff_open(const char *path, struct fuse_file_info *fi)
{
	if (file_of(path) == FILE_NONE)
		return -ENOENT;
	fi->direct_io = 1;
	return 0;
}

static int ff_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)fi;
	switch (file_of(path)) {
	case FILE_LUN:
		return ftruncate(fs.fd, size) ? -errno : 0;
	case FILE_FAIL:
		return 0; /* "echo ... > fail" opens with O_TRUNC */
	default:
		return -ENOENT;
	}
}

static int status_text(char *buf, size_t size)
{
	int n;

	pthread_mutex_lock(&fs.lock);
	n = snprintf(buf, size,
		     "read_errors %" PRIu64 "\nwrite_errors %" PRIu64 "\n",
		     fs.read_errors, fs.write_errors);
	for (unsigned i = 0; i < fs.nr_rules && n < (int)size; i++)
		n += snprintf(buf + n, size - n, "%s %" PRIu64 " %" PRIu64 "\n",
			      fs.rules[i].write ? "write" : "read",
			      fs.rules[i].start,
			      fs.rules[i].end - fs.rules[i].start);
	pthread_mutex_unlock(&fs.lock);
	return n < (int)size ? n : (int)size - 1;
}

static int ff_read(const char *path, char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	char text[STATUS_MAX_BYTES];
	ssize_t n;
	int tlen;

	(void)fi;
	if (file_of(path) == FILE_FAIL) {
		tlen = status_text(text, sizeof(text));
		if (off >= tlen)
			return 0;
		n = (size_t)(tlen - off) < len ? tlen - off : (ssize_t)len;
		memcpy(buf, text + off, n);
		return (int)n;
	}
	if (off < 0 || fails(false, (uint64_t)off, len))
		return -EIO;
	n = pread(fs.fd, buf, len, off);
	return n < 0 ? -errno : (int)n;
}

/* Parse one command of MOUNT/fail; 0 or -EINVAL. */
static int command(const char *cmd)
{
	char op[8];
	uint64_t start, len;
	struct rule *r;
	int ret = 0;

	pthread_mutex_lock(&fs.lock);
	if (!strcmp(cmd, "clear") || !strcmp(cmd, "clear\n")) {
		fs.nr_rules = 0;
	} else if (sscanf(cmd, "%7s %" SCNu64 " %" SCNu64, op, &start, &len) !=
			   3 ||
		   (strcmp(op, "read") && strcmp(op, "write")) || !len ||
		   start + len < start || fs.nr_rules == MAX_RULES) {
		ret = -EINVAL;
	} else {
		r = &fs.rules[fs.nr_rules++];
		r->write = !strcmp(op, "write");
		r->start = start;
		r->end = start + len;
	}
	pthread_mutex_unlock(&fs.lock);
	if (ret)
		fprintf(stderr,
			"failfs: bad command '%s' (read|write START LENGTH, "
			"clear; at most %d rules)\n",
			cmd, MAX_RULES);
	return ret;
}

static int ff_write(const char *path, const char *buf, size_t len, off_t off,
		    struct fuse_file_info *fi)
{
	char cmd[CMD_MAX_BYTES];
	ssize_t n;
	int ret;

	(void)fi;
	if (file_of(path) == FILE_FAIL) {
		if (len >= sizeof(cmd))
			return -EINVAL;
		memcpy(cmd, buf, len);
		cmd[len] = '\0';
		ret = command(cmd);
		return ret ? ret : (int)len;
	}
	if (off < 0 || fails(true, (uint64_t)off, len))
		return -EIO;
	n = pwrite(fs.fd, buf, len, off);
	return n < 0 ? -errno : (int)n;
}

static int ff_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)fi;
	if (file_of(path) != FILE_LUN)
		return 0;
	return (datasync ? fdatasync(fs.fd) : fsync(fs.fd)) ? -errno : 0;
}

static const struct fuse_operations ops = {
	.getattr = ff_getattr,
	.readdir = ff_readdir,
	.open = ff_open,
	.truncate = ff_truncate,
	.read = ff_read,
	.write = ff_write,
	.fsync = ff_fsync,
};

int main(int argc, char **argv)
{
	if (argc < 3 || argv[1][0] == '-') {
		fprintf(stderr,
			"usage: failfs IMAGE MOUNTPOINT [-f] [-o OPTIONS]\n");
		return 2;
	}
	fs.fd = open(argv[1], O_RDWR);
	if (fs.fd < 0) {
		fprintf(stderr, "failfs: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	argv[1] = argv[0];
	return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
