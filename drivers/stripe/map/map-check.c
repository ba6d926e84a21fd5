/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map-check.c - the semantic rules of a mapping file (see map.h),
 * the CRC-32C, and allocation of a map.
 *
 * Everything here works on a struct stripe_map, whether it came from a file
 * (then errors name the file's lines) or was built in memory by stripe-ctl
 * (then the writer refuses a map it could not read back).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/stripe/map/map-int.h"

#define SECTOR_BYTES 512u
#define CRC32C_POLY  0x82f63b78u /* Castagnoli, reflected */

const char *const stripe_map_key_names[MAP_KEY_COUNT] = {
	[MAP_KEY_VDISK] = "vdisk",
	[MAP_KEY_SIZE] = "size-bytes",
	[MAP_KEY_UNIT] = "stripe-unit-bytes",
	[MAP_KEY_COLUMNS] = "columns",
	[MAP_KEY_EXTENTS_PER_COLUMN] = "extents-per-column",
	[MAP_KEY_REPLICAS] = "replicas",
	[MAP_KEY_EXTENT_SIZE] = "extent-size-bytes",
	[MAP_KEY_MASTER] = "master",
};

int stripe_map_fail(struct stripe_map_error *err, unsigned int line,
		    const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->line = line;
		va_start(ap, fmt);
		vsnprintf(err->reason, sizeof(err->reason), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

uint32_t stripe_map_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int bit = 0; bit < 8; bit++)
			crc = (crc >> 1) ^ (CRC32C_POLY & (0u - (crc & 1)));
	}
	return ~crc;
}

bool stripe_map_token_ok(const char *s, size_t size)
{
	size_t len = strnlen(s, size);

	if (!len || len == size)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

bool stripe_map_name_ok(const char *s)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
	size_t len = strlen(s);

	return len && len < STRIPE_MAP_NAME_SIZE && s[strspn(s, ok)] == '\0';
}

int stripe_map_alloc(struct stripe_map *m, uint32_t nr_servers)
{
	uint64_t slots =
		(uint64_t)m->columns * m->extents_per_column * m->replicas;

	if (!nr_servers || nr_servers > STRIPE_MAP_MAX_SERVERS || !slots ||
	    slots > STRIPE_MAP_MAX_SLOTS)
		return -EINVAL;
	m->servers = calloc(nr_servers, sizeof(*m->servers));
	m->slots = calloc((size_t)slots, sizeof(*m->slots));
	if (!m->servers || !m->slots) {
		stripe_map_free(m);
		return -ENOMEM;
	}
	m->nr_servers = nr_servers;
	return 0;
}

void stripe_map_free(struct stripe_map *m)
{
	free(m->servers);
	free(m->slots);
	m->servers = NULL;
	m->slots = NULL;
	m->nr_servers = 0;
}

void stripe_map_layout(const struct stripe_map *m, struct stripe_layout *l)
{
	l->size_bytes = m->size_bytes;
	l->stripe_unit_bytes = m->stripe_unit_bytes;
	l->extent_size_bytes = m->extent_size_bytes;
	l->columns = m->columns;
	l->extents_per_column = m->extents_per_column;
}

static unsigned int key_line(const struct stripe_map_lines *w,
			     enum stripe_map_key k)
{
	return w ? w->key[k] : 0;
}

static unsigned int server_line(const struct stripe_map_lines *w, uint32_t i)
{
	return w && w->server ? w->server[i] : 0;
}

static unsigned int slot_line(const struct stripe_map_lines *w, size_t i)
{
	return w && w->slot ? w->slot[i] : 0;
}

/* The header's names and sizes. */
static int check_sizes(const struct stripe_map *m,
		       const struct stripe_map_lines *w,
		       struct stripe_map_error *err)
{
	if (!stripe_map_name_ok(m->vdisk))
		return stripe_map_fail(err, key_line(w, MAP_KEY_VDISK),
				       "vdisk '%s' is not 1-63 of "
				       "[A-Za-z0-9._-]",
				       m->vdisk);
	if (!stripe_map_token_ok(m->master, sizeof(m->master)))
		return stripe_map_fail(err, key_line(w, MAP_KEY_MASTER),
				       "master must be HOST:PORT, printable, "
				       "without spaces");
	if (!m->size_bytes || m->size_bytes % SECTOR_BYTES)
		return stripe_map_fail(err, key_line(w, MAP_KEY_SIZE),
				       "size-bytes %llu is not a positive "
				       "multiple of %u",
				       (unsigned long long)m->size_bytes,
				       SECTOR_BYTES);
	if (!stripe_layout_unit_ok(m->stripe_unit_bytes))
		return stripe_map_fail(err, key_line(w, MAP_KEY_UNIT),
				       "stripe-unit-bytes %llu is not a power "
				       "of two from %llu to %llu",
				       (unsigned long long)m->stripe_unit_bytes,
				       STRIPE_MIN_UNIT_BYTES,
				       STRIPE_MAX_UNIT_BYTES);
	if (!m->extent_size_bytes ||
	    m->extent_size_bytes > STRIPE_MAX_EXTENT_BYTES ||
	    m->extent_size_bytes % m->stripe_unit_bytes)
		return stripe_map_fail(err, key_line(w, MAP_KEY_EXTENT_SIZE),
				       "extent-size-bytes %llu is not a "
				       "multiple of the stripe unit (%llu) "
				       "up to %llu",
				       (unsigned long long)m->extent_size_bytes,
				       (unsigned long long)m->stripe_unit_bytes,
				       STRIPE_MAX_EXTENT_BYTES);
	return 0;
}

/* The header: names, sizes, counts and J (DESIGN.md's formula). */
int stripe_map_check_geometry(const struct stripe_map *m,
			      const struct stripe_map_lines *w,
			      struct stripe_map_error *err)
{
	uint64_t slots;
	uint32_t j;
	int ret;

	if ((ret = check_sizes(m, w, err)))
		return ret;
	if (!m->columns || m->columns > STRIPE_MAX_COLUMNS)
		return stripe_map_fail(err, key_line(w, MAP_KEY_COLUMNS),
				       "columns %u is not in 1..%u", m->columns,
				       STRIPE_MAX_COLUMNS);
	if (!m->replicas || m->replicas > STRIPE_MAX_REPLICAS)
		return stripe_map_fail(err, key_line(w, MAP_KEY_REPLICAS),
				       "replicas %u is not in 1..%u",
				       m->replicas, STRIPE_MAX_REPLICAS);
	if (stripe_layout_extents_per_column(m->size_bytes,
					     m->stripe_unit_bytes, m->columns,
					     m->extent_size_bytes, &j))
		return stripe_map_fail(err, key_line(w, MAP_KEY_SIZE),
				       "size-bytes %llu needs more than %u "
				       "extents per column",
				       (unsigned long long)m->size_bytes,
				       STRIPE_MAX_EXTENTS_PER_COLUMN);
	if (j != m->extents_per_column)
		return stripe_map_fail(
			err, key_line(w, MAP_KEY_EXTENTS_PER_COLUMN),
			"extents-per-column is %u, but size-bytes, "
			"stripe-unit-bytes, columns and extent-size-bytes "
			"give %u",
			m->extents_per_column, j);
	slots = (uint64_t)m->columns * j * m->replicas;
	if (slots > STRIPE_MAP_MAX_SLOTS)
		return stripe_map_fail(
			err, key_line(w, MAP_KEY_EXTENTS_PER_COLUMN),
			"%llu extent replicas, more than %u",
			(unsigned long long)slots, STRIPE_MAP_MAX_SLOTS);
	return 0;
}

static bool block_size_ok(uint32_t b)
{
	return b >= STRIPE_MAP_MIN_BLOCK && b <= STRIPE_MAP_MAX_BLOCK &&
	       !(b & (b - 1));
}

static int check_server(const struct stripe_map_server *s, uint32_t i,
			unsigned int line, struct stripe_map_error *err)
{
	bool user = s->chap_user[0], secret = s->chap_secret[0];

	if (!stripe_map_token_ok(s->address, sizeof(s->address)))
		return stripe_map_fail(err, line, "server %u: bad address", i);
	if (!stripe_map_token_ok(s->portal, sizeof(s->portal)))
		return stripe_map_fail(err, line, "server %u: bad portal", i);
	if (!stripe_map_token_ok(s->target, sizeof(s->target)))
		return stripe_map_fail(err, line, "server %u: bad target", i);
	if (s->lun > STRIPE_MAP_MAX_LUN)
		return stripe_map_fail(err, line, "server %u: lun %u above %u",
				       i, s->lun, STRIPE_MAP_MAX_LUN);
	if (!block_size_ok(s->block_size))
		return stripe_map_fail(err, line,
				       "server %u: block-size %u is not 512, "
				       "1024, 2048 or 4096",
				       i, s->block_size);
	if (user != secret)
		return stripe_map_fail(err, line,
				       "server %u: give both chap-user and "
				       "chap-secret, or neither",
				       i);
	if ((user &&
	     !stripe_map_token_ok(s->chap_user, sizeof(s->chap_user))) ||
	    (secret &&
	     !stripe_map_token_ok(s->chap_secret, sizeof(s->chap_secret))))
		return stripe_map_fail(err, line,
				       "server %u: CHAP credentials must be "
				       "printable, without spaces",
				       i);
	if (s->device[0] &&
	    (s->device[0] != '/' ||
	     !stripe_map_token_ok(s->device, sizeof(s->device))))
		return stripe_map_fail(err, line,
				       "server %u: device must be an absolute "
				       "path without spaces (e.g. "
				       "/dev/disk/by-path/...)",
				       i);
	return 0;
}

/* qsort_r order of server indices by (target, lun); ctx is the map. */
static int cmp_server_key(const void *a, const void *b, void *ctx)
{
	const struct stripe_map *m = ctx;
	const struct stripe_map_server *x = &m->servers[*(const uint32_t *)a];
	const struct stripe_map_server *y = &m->servers[*(const uint32_t *)b];
	int c = strcmp(x->target, y->target);

	if (c)
		return c;
	return (x->lun > y->lun) - (x->lun < y->lun);
}

/* qsort_r order of server indices by device ("" first); ctx is the map. */
static int cmp_server_device(const void *a, const void *b, void *ctx)
{
	const struct stripe_map *m = ctx;

	return strcmp(m->servers[*(const uint32_t *)a].device,
		      m->servers[*(const uint32_t *)b].device);
}

/* Two servers naming one device would put replicas on one disk. */
static int check_devices(const struct stripe_map *m, uint32_t *order,
			 const struct stripe_map_lines *w,
			 struct stripe_map_error *err)
{
	qsort_r(order, m->nr_servers, sizeof(*order), cmp_server_device,
		(void *)m);
	for (uint32_t i = 1; i < m->nr_servers; i++) {
		uint32_t a = order[i - 1] < order[i] ? order[i - 1] : order[i];
		uint32_t b = order[i - 1] ^ order[i] ^ a;

		if (m->servers[a].device[0] &&
		    !cmp_server_device(&order[i - 1], &order[i], (void *)m))
			return stripe_map_fail(err, server_line(w, b),
					       "server %u has the device of "
					       "server %u",
					       b, a);
	}
	return 0;
}

/* Each server on its own, then (target, lun) and device unique. */
static int check_servers(const struct stripe_map *m,
			 const struct stripe_map_lines *w,
			 struct stripe_map_error *err)
{
	uint32_t *order;
	int ret = 0;

	if (!m->nr_servers || m->nr_servers > STRIPE_MAP_MAX_SERVERS)
		return stripe_map_fail(err, 0, "%u servers: want 1..%u",
				       m->nr_servers, STRIPE_MAP_MAX_SERVERS);
	for (uint32_t i = 0; i < m->nr_servers; i++)
		if ((ret = check_server(&m->servers[i], i, server_line(w, i),
					err)))
			return ret;
	if (!(order = malloc(m->nr_servers * sizeof(*order))))
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nr_servers; i++)
		order[i] = i;
	qsort_r(order, m->nr_servers, sizeof(*order), cmp_server_key,
		(void *)m);
	for (uint32_t i = 1; i < m->nr_servers && !ret; i++)
		if (!cmp_server_key(&order[i - 1], &order[i], (void *)m)) {
			uint32_t a = order[i - 1] < order[i] ? order[i - 1]
							     : order[i];
			uint32_t b = order[i - 1] ^ order[i] ^ a;

			ret = stripe_map_fail(err, server_line(w, b),
					      "server %u has the target and "
					      "lun of server %u",
					      b, a);
		}
	if (!ret)
		ret = check_devices(m, order, w, err);
	free(order);
	return ret;
}

/* One extent's replicas: known servers, no overflow, distinct hosts. */
static int check_extent(const struct stripe_map *m, uint32_t c, uint32_t j,
			const struct stripe_map_lines *w, bool *used,
			struct stripe_map_error *err)
{
	size_t first = stripe_map_slot_index(m, c, j, 0);

	for (uint32_t r = 0; r < m->replicas; r++) {
		const struct stripe_map_replica *p = &m->slots[first + r];
		unsigned int line = slot_line(w, first + r);
		uint32_t bs;

		if (p->server >= m->nr_servers)
			return stripe_map_fail(err, line,
					       "extent %u %u %u: no server %u",
					       c, j, r, p->server);
		bs = m->servers[p->server].block_size;
		if (p->lba > (UINT64_MAX - m->extent_size_bytes) / bs)
			return stripe_map_fail(err, line,
					       "extent %u %u %u: lba %llu "
					       "overflows",
					       c, j, r,
					       (unsigned long long)p->lba);
		used[p->server] = true;
		for (uint32_t q = 0; q < r; q++) {
			uint32_t other = m->slots[first + q].server;

			if (!strcmp(m->servers[other].address,
				    m->servers[p->server].address))
				return stripe_map_fail(
					err, line,
					"extent %u %u: replicas %u and %u "
					"are both on host %s",
					c, j, q, r,
					m->servers[p->server].address);
		}
	}
	return 0;
}

struct span {
	uint32_t server;
	uint64_t start; /* bytes */
	size_t slot;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->server != y->server)
		return (x->server > y->server) - (x->server < y->server);
	return (x->start > y->start) - (x->start < y->start);
}

/* No two extents share bytes of one LUN. */
static int check_overlaps(const struct stripe_map *m,
			  const struct stripe_map_lines *w,
			  struct stripe_map_error *err)
{
	size_t n = stripe_map_nr_slots(m);
	struct span *s = malloc(n * sizeof(*s));
	int ret = 0;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		s[i].server = m->slots[i].server;
		s[i].start = m->slots[i].lba *
			     m->servers[m->slots[i].server].block_size;
		s[i].slot = i;
	}
	qsort(s, n, sizeof(*s), cmp_span);
	for (size_t i = 1; i < n && !ret; i++)
		if (s[i].server == s[i - 1].server &&
		    s[i].start - s[i - 1].start < m->extent_size_bytes) {
			size_t a = s[i - 1].slot < s[i].slot ? s[i - 1].slot
							     : s[i].slot;
			size_t b = s[i - 1].slot ^ s[i].slot ^ a;

			ret = stripe_map_fail(err, slot_line(w, b),
					      "this extent overlaps the one "
					      "on line %u (server %u)",
					      slot_line(w, a), s[i].server);
		}
	free(s);
	return ret;
}

static int check_extents(const struct stripe_map *m,
			 const struct stripe_map_lines *w,
			 struct stripe_map_error *err)
{
	bool *used = calloc(m->nr_servers, sizeof(*used));
	int ret = 0;

	if (!used)
		return -ENOMEM;
	for (uint32_t c = 0; c < m->columns && !ret; c++)
		for (uint32_t j = 0; j < m->extents_per_column && !ret; j++)
			ret = check_extent(m, c, j, w, used, err);
	for (uint32_t i = 0; i < m->nr_servers && !ret; i++)
		if (!used[i])
			ret = stripe_map_fail(err, server_line(w, i),
					      "server %u is not used by any "
					      "extent",
					      i);
	free(used);
	return ret ? ret : check_overlaps(m, w, err);
}

int stripe_map_check_lines(const struct stripe_map *m,
			   const struct stripe_map_lines *where,
			   struct stripe_map_error *err)
{
	int ret;

	if ((ret = stripe_map_check_geometry(m, where, err)))
		return ret;
	if (!m->slots || !m->servers)
		return stripe_map_fail(err, 0, "the map has no extents");
	if ((ret = check_servers(m, where, err)))
		return ret;
	return check_extents(m, where, err);
}

int stripe_map_check(const struct stripe_map *m, struct stripe_map_error *err)
{
	return stripe_map_check_lines(m, NULL, err);
}
