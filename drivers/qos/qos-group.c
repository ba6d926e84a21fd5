/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qos-group.c - a qos budget shared through a mapped file (qos-group.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drivers/qos/qos-group.h"

#define QOS_GROUP_MAGIC	  0x71736770u /* "qsgp" */
#define QOS_GROUP_VERSION 1u
#define NS_PER_MS	  1000000ull

/* The mapped file.  Fields are read and written with __atomic builtins. */
struct qos_group_shm {
	uint32_t magic;
	uint32_t version;
	uint32_t burst_ms;
	uint32_t pad;
	uint64_t limit[QOS_NR_LIMITS];
	uint64_t tat_ns[QOS_NR_LIMITS];
};

struct qos_group {
	struct qos_group_shm *shm;
	char name[QOS_GROUP_NAME_MAX + 1];
};

static uint32_t ld32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static uint64_t ld64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void st64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/*
 * A new file is sized and filled in before it is given its name, so that
 * a member never maps a half-made group; two creators racing: one link
 * wins and the other maps the winner's file.
 */
static int group_create(const char *dir, const char *path)
{
	struct qos_group_shm init = {
		.magic = QOS_GROUP_MAGIC,
		.version = QOS_GROUP_VERSION,
		.burst_ms = QOS_DEFAULT_BURST_MS,
	};
	char tmp[PATH_MAX];
	int fd, err = 0;

	if (snprintf(tmp, sizeof(tmp), "%s/.new.XXXXXX", dir) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if ((fd = mkstemp(tmp)) < 0)
		return -errno;
	if (pwrite(fd, &init, sizeof(init), 0) != (ssize_t)sizeof(init))
		err = -EIO;
	else if (link(tmp, path) && errno != EEXIST)
		err = -errno;
	unlink(tmp);
	close(fd);
	return err;
}

static int group_map(const char *path, struct qos_group_shm **out)
{
	struct stat st;
	void *p;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_size != (off_t)sizeof(struct qos_group_shm)) {
		close(fd);
		return -EINVAL;
	}
	p = mmap(NULL, sizeof(**out), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	if ((*out)->magic != QOS_GROUP_MAGIC ||
	    (*out)->version != QOS_GROUP_VERSION) {
		munmap(p, sizeof(**out));
		return -EINVAL;
	}
	return 0;
}

int qos_group_open(const char *dir, const char *name, struct qos_group **out,
		   char *why, size_t why_len)
{
	char path[PATH_MAX];
	struct qos_group *g;
	int err;

	if (!qos_group_name_ok(name)) {
		snprintf(why, why_len,
			 "qos: group '%.64s' is not 1-63 of A-Z a-z 0-9 . _ - "
			 "(not starting with '.')",
			 name);
		return -EINVAL;
	}
	if (snprintf(path, sizeof(path), "%s/%s.qos", dir, name) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		err = -errno;
		snprintf(why, why_len, "qos: cannot make %s: %s", dir,
			 strerror(-err));
		return err;
	}
	if (!(g = calloc(1, sizeof(*g))))
		return -ENOMEM;
	strcpy(g->name, name);
	err = group_map(path, &g->shm);
	if (err == -ENOENT && !(err = group_create(dir, path)))
		err = group_map(path, &g->shm);
	if (err) {
		snprintf(why, why_len,
			 err == -EINVAL
				 ? "qos: %s is not a qos group file of this "
				   "version: remove it (no tapdisk may use it)"
				 : "qos: group file %s: %s",
			 path, strerror(-err));
		free(g);
		return err;
	}
	*out = g;
	return 0;
}

void qos_group_close(struct qos_group *g)
{
	if (!g)
		return;
	munmap(g->shm, sizeof(*g->shm));
	free(g);
}

const char *qos_group_name(const struct qos_group *g)
{
	return g->name;
}

void qos_group_set(struct qos_group *g, const uint64_t limit[QOS_NR_LIMITS],
		   const bool given[QOS_NR_LIMITS], uint32_t burst_ms,
		   uint64_t now_ns)
{
	__atomic_store_n(&g->shm->burst_ms, burst_ms, __ATOMIC_RELEASE);
	for (int l = 0; l < QOS_NR_LIMITS; l++) {
		if (given[l])
			st64(&g->shm->limit[l], limit[l]);
		st64(&g->shm->tat_ns[l], now_ns);
	}
}

void qos_group_get(const struct qos_group *g, uint64_t limit[QOS_NR_LIMITS],
		   uint32_t *burst_ms)
{
	for (int l = 0; l < QOS_NR_LIMITS; l++)
		limit[l] = ld64(&g->shm->limit[l]);
	*burst_ms = ld32(&g->shm->burst_ms);
}

/* A bucket read from the shared file, as qos-bucket.c computes with it. */
static void group_bucket(const struct qos_group *g, int l, struct qos_bucket *b)
{
	b->rate = ld64(&g->shm->limit[l]);
	b->burst_ns = (uint64_t)ld32(&g->shm->burst_ms) * NS_PER_MS;
	b->tat_ns = ld64(&g->shm->tat_ns[l]);
}

/* Move tat[l] on by cost, whatever other members did meanwhile. */
static void group_charge(struct qos_group *g, int l, uint64_t cost,
			 uint64_t now_ns)
{
	uint64_t old = ld64(&g->shm->tat_ns[l]), next;
	struct qos_bucket b;

	do {
		group_bucket(g, l, &b);
		b.tat_ns = old;
		qos_bucket_charge(&b, cost, now_ns);
		next = b.tat_ns;
	} while (!__atomic_compare_exchange_n(&g->shm->tat_ns[l], &old, next,
					      false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
}

uint64_t qos_group_admit(struct qos_group *g,
			 const uint64_t cost[QOS_NR_LIMITS], uint64_t now_ns)
{
	uint64_t wait = 0;

	for (int l = 0; l < QOS_NR_LIMITS; l++) {
		struct qos_bucket b;
		uint64_t w;

		if (!cost[l])
			continue;
		group_bucket(g, l, &b);
		w = qos_bucket_wait_ns(&b, now_ns);
		if (w > wait)
			wait = w;
	}
	if (wait)
		return wait;
	for (int l = 0; l < QOS_NR_LIMITS; l++)
		if (cost[l])
			group_charge(g, l, cost[l], now_ns);
	return 0;
}
