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
	[MAP_KEY_REGION] = "region-bytes",
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

uint64_t stripe_map_default_region(uint64_t e)
{
	if (!e)
		return 0;
	if (!(e % STRIPE_MAP_DEFAULT_REGION) &&
	    e / STRIPE_MAP_DEFAULT_REGION <= STRIPE_MAP_MAX_REGIONS)
		return STRIPE_MAP_DEFAULT_REGION;
	for (uint64_t k = STRIPE_MAP_MAX_REGIONS; k > 1; k--)
		if (!(e % k) && !((e / k) % STRIPE_MAP_REGION_ALIGN))
			return e / k;
	return e;
}

bool stripe_map_region_ok(uint64_t e, uint64_t g)
{
	return g && !(g % STRIPE_MAP_REGION_ALIGN) && !(e % g) &&
	       e / g <= STRIPE_MAP_MAX_REGIONS;
}

size_t stripe_map_bitmap_bytes(const struct stripe_map *m)
{
	return stripe_map_nr_slots(m) * stripe_map_region_words(m) *
	       sizeof(uint64_t);
}

int stripe_map_alloc_slots(struct stripe_map *m)
{
	size_t n = stripe_map_nr_slots(m);
	size_t words = n * stripe_map_region_words(m);

	m->slots = calloc(n, sizeof(*m->slots));
	m->dirty = calloc(words, sizeof(*m->dirty));
	m->moves = calloc(n, sizeof(*m->moves));
	m->move_dirty = calloc(words, sizeof(*m->move_dirty));
	return m->slots && m->dirty && m->moves && m->move_dirty ? 0 : -ENOMEM;
}

int stripe_map_alloc(struct stripe_map *m, uint32_t nr_servers)
{
	uint64_t slots =
		(uint64_t)m->columns * m->extents_per_column * m->replicas;

	if (!nr_servers || nr_servers > STRIPE_MAP_MAX_SERVERS || !slots ||
	    slots > STRIPE_MAP_MAX_SLOTS)
		return -EINVAL;
	if (!m->region_bytes)
		m->region_bytes =
			stripe_map_default_region(m->extent_size_bytes);
	if (!stripe_map_region_ok(m->extent_size_bytes, m->region_bytes))
		return -EINVAL;
	m->servers = calloc(nr_servers, sizeof(*m->servers));
	if (!m->servers || stripe_map_alloc_slots(m)) {
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
	free(m->dirty);
	free(m->moves);
	free(m->move_dirty);
	m->servers = NULL;
	m->slots = NULL;
	m->dirty = NULL;
	m->moves = NULL;
	m->move_dirty = NULL;
	m->nr_servers = 0;
}

int stripe_map_copy(struct stripe_map *dst, const struct stripe_map *src)
{
	size_t n = stripe_map_nr_slots(src);
	int ret;

	*dst = *src;
	dst->servers = NULL;
	dst->slots = NULL;
	dst->dirty = NULL;
	dst->moves = NULL;
	dst->move_dirty = NULL;
	dst->nr_servers = 0;
	if (!src->servers || !src->slots || !src->dirty || !src->moves ||
	    !src->move_dirty)
		return -EINVAL;
	if ((ret = stripe_map_alloc(dst, src->nr_servers)))
		return ret;
	memcpy(dst->servers, src->servers,
	       src->nr_servers * sizeof(*dst->servers));
	memcpy(dst->slots, src->slots, n * sizeof(*dst->slots));
	memcpy(dst->moves, src->moves, n * sizeof(*dst->moves));
	memcpy(dst->dirty, src->dirty, stripe_map_bitmap_bytes(src));
	memcpy(dst->move_dirty, src->move_dirty, stripe_map_bitmap_bytes(src));
	return 0;
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

static unsigned int move_line(const struct stripe_map_lines *w, size_t i)
{
	return w && w->move ? w->move[i] : 0;
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
	if (!stripe_map_region_ok(m->extent_size_bytes, m->region_bytes))
		return stripe_map_fail(
			err, key_line(w, MAP_KEY_REGION),
			"region-bytes %llu must be a multiple of %u that "
			"divides extent-size-bytes %llu into at most %u "
			"regions",
			(unsigned long long)m->region_bytes,
			STRIPE_MAP_REGION_ALIGN,
			(unsigned long long)m->extent_size_bytes,
			STRIPE_MAP_MAX_REGIONS);
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

/* A replica or move target on server s at lba: known, no overflow. */
static int check_place(const struct stripe_map *m, uint32_t s, uint64_t lba,
		       unsigned int line, const char *what,
		       struct stripe_map_error *err)
{
	if (s >= m->nr_servers)
		return stripe_map_fail(err, line, "%s: no server %u", what, s);
	if (lba >
	    (UINT64_MAX - m->extent_size_bytes) / m->servers[s].block_size)
		return stripe_map_fail(err, line, "%s: lba %llu overflows",
				       what, (unsigned long long)lba);
	return 0;
}

/* .stale agrees with the bitmap, and no bit lies beyond the last region. */
static int check_bits(const struct stripe_map *m, size_t i, unsigned int line,
		      const char *what, struct stripe_map_error *err)
{
	uint32_t n = stripe_map_region_count(m);
	size_t words = stripe_map_region_words(m);
	const uint64_t *bits = stripe_map_slot_dirty(m, i);
	const uint64_t *move = stripe_map_move_dirty(m, i);

	if (n % 64 && ((bits[words - 1] | move[words - 1]) >> (n % 64)))
		return stripe_map_fail(err, line,
				       "%s: a dirty bit beyond region %u", what,
				       n - 1);
	if (m->slots[i].stale != stripe_map_bits_any(bits, n))
		return stripe_map_fail(err, line,
				       "%s: stale is %s but %s region is "
				       "dirty",
				       what,
				       m->slots[i].stale ? "set" : "clear",
				       m->slots[i].stale ? "no" : "a");
	if (!m->moves[i].active && stripe_map_bits_any(move, n))
		return stripe_map_fail(err, line,
				       "%s: dirty regions for a move target "
				       "that is not active",
				       what);
	return 0;
}

/* Slot i's move target: a known server, on another host than the others. */
static int check_move(const struct stripe_map *m, uint32_t c, uint32_t j,
		      uint32_t r, const struct stripe_map_lines *w, bool *used,
		      struct stripe_map_error *err)
{
	size_t first = stripe_map_slot_index(m, c, j, 0);
	const struct stripe_map_move *mv = &m->moves[first + r];
	unsigned int line = move_line(w, first + r);
	char what[64];
	int ret;

	snprintf(what, sizeof(what), "move %u %u %u", c, j, r);
	if ((ret = check_place(m, mv->server, mv->lba, line, what, err)))
		return ret;
	used[mv->server] = true;
	for (uint32_t q = 0; q < m->replicas; q++) {
		uint32_t other = m->slots[first + q].server;

		if (q != r && !strcmp(m->servers[other].address,
				      m->servers[mv->server].address))
			return stripe_map_fail(
				err, line,
				"%s: the move target is on host %s, like "
				"replica %u",
				what, m->servers[mv->server].address, q);
	}
	return 0;
}

/* One extent's replicas: known servers, no overflow, distinct hosts. */
static int check_extent(const struct stripe_map *m, uint32_t c, uint32_t j,
			const struct stripe_map_lines *w, bool *used,
			struct stripe_map_error *err)
{
	size_t first = stripe_map_slot_index(m, c, j, 0);
	int ret;

	for (uint32_t r = 0; r < m->replicas; r++) {
		const struct stripe_map_replica *p = &m->slots[first + r];
		unsigned int line = slot_line(w, first + r);
		char what[64];

		snprintf(what, sizeof(what), "extent %u %u %u", c, j, r);
		if ((ret = check_place(m, p->server, p->lba, line, what,
				       err)) ||
		    (ret = check_bits(m, first + r, line, what, err)))
			return ret;
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
	for (uint32_t r = 0; r < m->replicas; r++)
		if (m->moves[first + r].active &&
		    (ret = check_move(m, c, j, r, w, used, err)))
			return ret;
	return 0;
}

struct span {
	uint32_t server;
	uint64_t start; /* bytes */
	size_t slot;
	bool move;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->server != y->server)
		return (x->server > y->server) - (x->server < y->server);
	return (x->start > y->start) - (x->start < y->start);
}

static unsigned int span_line(const struct stripe_map_lines *w,
			      const struct span *s)
{
	return s->move ? move_line(w, s->slot) : slot_line(w, s->slot);
}

/* The extents and the active move targets, sorted by server and start. */
static struct span *spans(const struct stripe_map *m, size_t *count)
{
	size_t n = stripe_map_nr_slots(m), k = 0;
	struct span *s = malloc(2 * n * sizeof(*s));

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const struct stripe_map_move *mv = &m->moves[i];

		s[k++] = (struct span){
			m->slots[i].server,
			m->slots[i].lba *
				m->servers[m->slots[i].server].block_size,
			i, false};
		if (mv->active)
			s[k++] = (struct span){
				mv->server,
				mv->lba * m->servers[mv->server].block_size, i,
				true};
	}
	qsort(s, k, sizeof(*s), cmp_span);
	*count = k;
	return s;
}

/* Name the later line of the two, and the earlier one in the reason. */
static int overlap_fail(const struct stripe_map_lines *w, const struct span *x,
			const struct span *y, struct stripe_map_error *err)
{
	const struct span *late = span_line(w, x) > span_line(w, y) ? x : y;
	const struct span *early = late == x ? y : x;

	if (!late->move && !early->move)
		return stripe_map_fail(err, span_line(w, late),
				       "this extent overlaps the one on line "
				       "%u (server %u)",
				       span_line(w, early), late->server);
	return stripe_map_fail(err, span_line(w, late),
			       "this %s overlaps the %s on line %u (server %u)",
			       late->move ? "move target" : "extent",
			       early->move ? "move target" : "extent",
			       span_line(w, early), late->server);
}

/* No two extents (or move targets) share bytes of one LUN. */
static int check_overlaps(const struct stripe_map *m,
			  const struct stripe_map_lines *w,
			  struct stripe_map_error *err)
{
	size_t n = 0;
	struct span *s = spans(m, &n);
	int ret = 0;

	if (!s)
		return -ENOMEM;
	for (size_t i = 1; i < n && !ret; i++)
		if (s[i].server == s[i - 1].server &&
		    s[i].start - s[i - 1].start < m->extent_size_bytes)
			ret = overlap_fail(w, &s[i - 1], &s[i], err);
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
	if (!m->dirty || !m->moves || !m->move_dirty)
		return stripe_map_fail(err, 0,
				       "the map has no dirty bitmaps (build it "
				       "with stripe_map_alloc)");
	if ((ret = check_servers(m, where, err)))
		return ret;
	return check_extents(m, where, err);
}

int stripe_map_check(const struct stripe_map *m, struct stripe_map_error *err)
{
	return stripe_map_check_lines(m, NULL, err);
}
