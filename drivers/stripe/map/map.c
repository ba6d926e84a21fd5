/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map.c - the mapping file's parser (the format is documented in
 * map.h; the rules that are not syntax live in map-check.c, the
 * writer and the file I/O in map-io.c).
 *
 * The parser trusts nothing: every line is bounded, every number checked
 * for overflow before it is stored, every count against its bound before
 * anything is allocated from it.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/stripe/map/map-int.h"

#define MAX_TOKENS    20
#define MAX_DIGITS    20 /* UINT64_MAX has 20 */
#define EXTENT_TOKENS 9	 /* extent C X R server N lba LBA STATE */
#define DIRTY_TOKENS  10 /* ... dirty HEX */
#define COMMENT_CHAR  '#'

enum stage { ST_MAGIC = 0, ST_HEADER, ST_SERVERS, ST_EXTENTS, ST_MOVES };

struct parser {
	struct stripe_map *m;
	struct stripe_map_error *err;
	struct stripe_map_lines where;
	unsigned int line;
	enum stage stage;
	unsigned int version;
	uint32_t servers_cap;
	size_t nr_slots;
	size_t next_slot;
	size_t next_move; /* the lowest slot the next move line may name */
};

struct tokens {
	unsigned int n;
	char *tok[MAX_TOKENS];
};

/* Unsigned decimal, no sign, no leading zero, at most max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t len = strlen(s);

	if (!len || len > MAX_DIGITS || (s[0] == '0' && len > 1))
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned int d = (unsigned int)(s[i] - '0');

		if (d > 9)
			return -EINVAL;
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

static int number(struct parser *p, const char *what, const char *s,
		  uint64_t max, uint64_t *out)
{
	int ret = parse_u64(s, max, out);

	if (ret == -ERANGE)
		return stripe_map_fail(p->err, p->line,
				       "%s %s is larger than %" PRIu64, what, s,
				       max);
	if (ret)
		return stripe_map_fail(p->err, p->line,
				       "%s '%s' is not an unsigned decimal "
				       "number",
				       what, s);
	return 0;
}

static int number32(struct parser *p, const char *what, const char *s,
		    uint32_t *out)
{
	uint64_t v;
	int ret = number(p, what, s, UINT32_MAX, &v);

	if (!ret)
		*out = (uint32_t)v;
	return ret;
}

static int copy_str(struct parser *p, const char *what, const char *s,
		    char *dst, size_t size)
{
	size_t len = strlen(s);

	if (len >= size)
		return stripe_map_fail(p->err, p->line,
				       "%s is %zu bytes long, at most %zu",
				       what, len, size - 1);
	memcpy(dst, s, len + 1);
	return 0;
}

/* Split at single spaces; a leading, trailing or double space is an error. */
static int tokenize(struct parser *p, char *line, struct tokens *t)
{
	t->n = 0;
	for (char *s = line;;) {
		char *sp = strchr(s, ' ');

		if (sp == s || !*s)
			return stripe_map_fail(p->err, p->line,
					       "stray space: fields are "
					       "separated by one space");
		if (t->n == MAX_TOKENS)
			return stripe_map_fail(p->err, p->line,
					       "more than %d fields",
					       MAX_TOKENS);
		t->tok[t->n++] = s;
		if (!sp)
			return 0;
		*sp = '\0';
		s = sp + 1;
	}
}

/* --- region bitmaps -------------------------------------------------------- */

void stripe_map_bits_set_range(uint64_t *bits, uint32_t first, uint32_t last)
{
	for (uint64_t k = first; k <= last; k++)
		bits[k / 64] |= 1ull << (k % 64);
}

bool stripe_map_bits_test(const uint64_t *bits, uint32_t k)
{
	return (bits[k / 64] >> (k % 64)) & 1;
}

void stripe_map_bits_clear(uint64_t *bits, uint32_t k)
{
	bits[k / 64] &= ~(1ull << (k % 64));
}

uint32_t stripe_map_bits_count(const uint64_t *bits, uint32_t n)
{
	uint32_t count = 0;

	for (uint32_t w = 0; w < n / 64; w++)
		count += (uint32_t)__builtin_popcountll(bits[w]);
	if (n % 64)
		count += (uint32_t)__builtin_popcountll(
			bits[n / 64] & ((1ull << (n % 64)) - 1));
	return count;
}

void stripe_map_bits_set_all(uint64_t *bits, uint32_t n)
{
	for (uint32_t w = 0; w < n / 64; w++)
		bits[w] = UINT64_MAX;
	if (n % 64)
		bits[n / 64] = (1ull << (n % 64)) - 1;
}

bool stripe_map_bits_any(const uint64_t *bits, uint32_t n)
{
	return stripe_map_bits_next(bits, n, 0) < n;
}

uint32_t stripe_map_bits_next(const uint64_t *bits, uint32_t n, uint32_t from)
{
	while (from < n) {
		uint64_t w = bits[from / 64] >> (from % 64);

		if (w) {
			from += (uint32_t)__builtin_ctzll(w);
			return from < n ? from : n;
		}
		from = (from / 64 + 1) * 64;
	}
	return n;
}

void stripe_map_slot_mark_all(struct stripe_map *m, size_t slot)
{
	uint64_t *bits = stripe_map_slot_dirty(m, slot);

	memset(bits, 0, stripe_map_region_words(m) * sizeof(*bits));
	stripe_map_bits_set_all(bits, stripe_map_region_count(m));
	m->slots[slot].stale = true;
}

void stripe_map_slot_clear_all(struct stripe_map *m, size_t slot)
{
	memset(stripe_map_slot_dirty(m, slot), 0,
	       stripe_map_region_words(m) * sizeof(uint64_t));
	m->slots[slot].stale = false;
}

/* Some but not all of the first n bits set. */
static bool bits_partial(const uint64_t *bits, uint32_t n)
{
	uint32_t count = stripe_map_bits_count(bits, n);

	return count && count < n;
}

int stripe_map_format_version(const struct stripe_map *m)
{
	uint32_t n = stripe_map_region_count(m);
	size_t slots = stripe_map_nr_slots(m);

	if (m->region_bytes != stripe_map_default_region(m->extent_size_bytes))
		return STRIPE_MAP_VERSION_2;
	for (size_t i = 0; i < slots; i++)
		if (m->moves[i].active ||
		    bits_partial(stripe_map_slot_dirty(m, i), n))
			return STRIPE_MAP_VERSION_2;
	return STRIPE_MAP_VERSION;
}

/* --- header ---------------------------------------------------------------- */

static int find_key(const char *name)
{
	for (int k = 0; k < MAP_KEY_COUNT; k++)
		if (!strcmp(name, stripe_map_key_names[k]))
			return k;
	return -1;
}

static int header_value(struct parser *p, int key, const char *v)
{
	struct stripe_map *m = p->m;
	const char *name = stripe_map_key_names[key];

	switch (key) {
	case MAP_KEY_VDISK:
		return copy_str(p, name, v, m->vdisk, sizeof(m->vdisk));
	case MAP_KEY_MASTER:
		return copy_str(p, name, v, m->master, sizeof(m->master));
	case MAP_KEY_SIZE:
		return number(p, name, v, UINT64_MAX, &m->size_bytes);
	case MAP_KEY_UNIT:
		return number(p, name, v, UINT64_MAX, &m->stripe_unit_bytes);
	case MAP_KEY_EXTENT_SIZE:
		return number(p, name, v, UINT64_MAX, &m->extent_size_bytes);
	case MAP_KEY_REGION:
		return number(p, name, v, UINT64_MAX, &m->region_bytes);
	case MAP_KEY_COLUMNS:
		return number32(p, name, v, &m->columns);
	case MAP_KEY_EXTENTS_PER_COLUMN:
		return number32(p, name, v, &m->extents_per_column);
	default:
		return number32(p, name, v, &m->replicas);
	}
}

static int header_line(struct parser *p, const struct tokens *t)
{
	int key = find_key(t->tok[0]);

	if (key < 0)
		return stripe_map_fail(p->err, p->line, "unknown key '%s'",
				       t->tok[0]);
	if (key >= MAP_KEY_V1_COUNT && p->version < STRIPE_MAP_VERSION_2)
		return stripe_map_fail(p->err, p->line,
				       "key '%s' is version 2: this file is "
				       "version 1",
				       t->tok[0]);
	if (p->where.key[key])
		return stripe_map_fail(p->err, p->line,
				       "duplicate key '%s' (first on line %u)",
				       t->tok[0], p->where.key[key]);
	if (t->n != 2)
		return stripe_map_fail(p->err, p->line, "'%s' takes one value",
				       t->tok[0]);
	p->where.key[key] = p->line;
	return header_value(p, key, t->tok[1]);
}

/* The first server line ends the header: it must be complete and sane. */
static int end_header(struct parser *p)
{
	int keys = p->version >= STRIPE_MAP_VERSION_2 ? MAP_KEY_COUNT
						      : MAP_KEY_V1_COUNT;

	for (int k = 0; k < keys; k++)
		if (!p->where.key[k])
			return stripe_map_fail(p->err, p->line,
					       "key '%s' is missing before the "
					       "first server line",
					       stripe_map_key_names[k]);
	if (p->version < STRIPE_MAP_VERSION_2)
		p->m->region_bytes =
			stripe_map_default_region(p->m->extent_size_bytes);
	return stripe_map_check_geometry(p->m, &p->where, p->err);
}

/* --- servers --------------------------------------------------------------- */

static int grow_servers(struct parser *p)
{
	uint32_t cap = p->servers_cap ? p->servers_cap * 2 : 8;
	struct stripe_map_server *s;
	unsigned int *lines;

	if (cap > STRIPE_MAP_MAX_SERVERS)
		cap = STRIPE_MAP_MAX_SERVERS;
	s = realloc(p->m->servers, cap * sizeof(*s));
	if (!s)
		return -ENOMEM;
	p->m->servers = s;
	lines = realloc(p->where.server, cap * sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	p->where.server = lines;
	p->servers_cap = cap;
	return 0;
}

enum server_key {
	SK_ADDRESS,
	SK_PORTAL,
	SK_TARGET,
	SK_LUN,
	SK_BLOCK,
	SK_CHAP_USER,
	SK_CHAP_SECRET,
	SK_DEVICE,
	SK_COUNT
};
static const char *const server_keys[SK_COUNT] = {
	"address",    "portal",	   "target",	  "lun",
	"block-size", "chap-user", "chap-secret", "device",
};
#define SK_REQUIRED                                                   \
	((1u << SK_ADDRESS) | (1u << SK_PORTAL) | (1u << SK_TARGET) | \
	 (1u << SK_LUN) | (1u << SK_BLOCK))

static int server_value(struct parser *p, struct stripe_map_server *s, int k,
			const char *v)
{
	const char *name = server_keys[k];

	switch (k) {
	case SK_ADDRESS:
		return copy_str(p, name, v, s->address, sizeof(s->address));
	case SK_PORTAL:
		return copy_str(p, name, v, s->portal, sizeof(s->portal));
	case SK_TARGET:
		return copy_str(p, name, v, s->target, sizeof(s->target));
	case SK_LUN:
		return number32(p, name, v, &s->lun);
	case SK_BLOCK:
		return number32(p, name, v, &s->block_size);
	case SK_CHAP_USER:
		return copy_str(p, name, v, s->chap_user, sizeof(s->chap_user));
	case SK_DEVICE:
		return copy_str(p, name, v, s->device, sizeof(s->device));
	default:
		return copy_str(p, name, v, s->chap_secret,
				sizeof(s->chap_secret));
	}
}

static int server_pairs(struct parser *p, const struct tokens *t,
			struct stripe_map_server *s)
{
	unsigned int seen = 0;
	int ret = 0;

	if (t->n % 2)
		return stripe_map_fail(p->err, p->line,
				       "server lines are 'server N' and KEY "
				       "VALUE pairs");
	for (unsigned int i = 2; i < t->n; i += 2) {
		int k = 0;

		while (k < SK_COUNT && strcmp(t->tok[i], server_keys[k]))
			k++;
		if (k == SK_COUNT)
			return stripe_map_fail(p->err, p->line,
					       "unknown server key '%s'",
					       t->tok[i]);
		if (seen & (1u << k))
			return stripe_map_fail(p->err, p->line,
					       "duplicate server key '%s'",
					       t->tok[i]);
		seen |= 1u << k;
		if ((ret = server_value(p, s, k, t->tok[i + 1])))
			return ret;
	}
	for (int k = 0; k < SK_COUNT; k++)
		if ((SK_REQUIRED & (1u << k)) && !(seen & (1u << k)))
			return stripe_map_fail(p->err, p->line,
					       "server key '%s' is missing",
					       server_keys[k]);
	return 0;
}

static int server_line(struct parser *p, const struct tokens *t)
{
	struct stripe_map *m = p->m;
	uint32_t n;
	int ret = 0;

	if (t->n < 2 || (ret = number32(p, "server number", t->tok[1], &n)))
		return t->n < 2 ? stripe_map_fail(p->err, p->line,
						  "server line without a "
						  "number")
				: ret;
	if (n != m->nr_servers)
		return stripe_map_fail(
			p->err, p->line,
			"server %u where server %u was expected "
			"(servers are numbered from 0, in order)",
			n, m->nr_servers);
	if (n == STRIPE_MAP_MAX_SERVERS)
		return stripe_map_fail(p->err, p->line, "more than %u servers",
				       STRIPE_MAP_MAX_SERVERS);
	if (n == p->servers_cap && (ret = grow_servers(p)))
		return ret;
	memset(&m->servers[n], 0, sizeof(m->servers[n]));
	if ((ret = server_pairs(p, t, &m->servers[n])))
		return ret;
	p->where.server[n] = p->line;
	m->nr_servers++;
	return 0;
}

/* --- extents --------------------------------------------------------------- */

static int begin_extents(struct parser *p)
{
	p->nr_slots = stripe_map_nr_slots(p->m);
	p->where.slot = calloc(p->nr_slots, sizeof(*p->where.slot));
	p->where.move = calloc(p->nr_slots, sizeof(*p->where.move));
	if (!p->where.slot || !p->where.move)
		return -ENOMEM;
	return stripe_map_alloc_slots(p->m);
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* 'dirty HEX': digit k holds regions 4k..4k+3 (bit b = region 4k+b). */
static int parse_dirty(struct parser *p, const char *hex, uint64_t *bits)
{
	uint32_t n = stripe_map_region_count(p->m), count;
	size_t want = ((size_t)n + 3) / 4, len = strlen(hex);

	if (len != want)
		return stripe_map_fail(p->err, p->line,
				       "dirty bitmap of %zu hex digits: %u "
				       "regions take %zu",
				       len, n, want);
	for (size_t k = 0; k < len; k++) {
		int d = hex_digit(hex[k]);

		if (d < 0)
			return stripe_map_fail(p->err, p->line,
					       "dirty bitmap: '%c' is not a "
					       "lowercase hex digit",
					       hex[k]);
		if (4 * k + 4 > n && (d >> (n - 4 * k)))
			return stripe_map_fail(p->err, p->line,
					       "dirty bitmap: the last digit "
					       "sets bits beyond region %u",
					       n - 1);
		bits[k / 16] |= (uint64_t)d << (4 * (k % 16));
	}
	count = stripe_map_bits_count(bits, n);
	if (!count || count == n)
		return stripe_map_fail(p->err, p->line,
				       "dirty bitmap with %s region set: write "
				       "'%s' instead",
				       count ? "every" : "no",
				       count ? "stale" : "ok");
	return 0;
}

/* STATE (the tokens from first on): ok, stale or dirty HEX, into bits. */
static int parse_state(struct parser *p, const struct tokens *t,
		       unsigned int first, uint64_t *bits)
{
	const char *s = t->tok[first];
	bool v2 = p->version >= STRIPE_MAP_VERSION_2;

	if (t->n == first + 1 && !strcmp(s, "ok"))
		return 0;
	if (t->n == first + 1 && !strcmp(s, "stale")) {
		stripe_map_bits_set_all(bits, stripe_map_region_count(p->m));
		return 0;
	}
	if (!strcmp(s, "dirty") && !v2)
		return stripe_map_fail(p->err, p->line,
				       "state 'dirty' is version 2: this file "
				       "is version 1");
	if (!strcmp(s, "dirty") && t->n == first + 2)
		return parse_dirty(p, t->tok[first + 1], bits);
	if (!strcmp(s, "dirty"))
		return stripe_map_fail(p->err, p->line,
				       "state 'dirty' takes one value: the "
				       "dirty regions in hex");
	return stripe_map_fail(p->err, p->line,
			       v2 ? "replica state '%s' is not ok, stale or "
				    "dirty HEX"
				  : "replica state '%s' is not ok or stale",
			       s);
}

/* C X R from tokens 1-3. */
static int coordinates(struct parser *p, const struct tokens *t,
		       const char *what, uint32_t got[3])
{
	int ret = 0;

	for (int k = 0; k < 3; k++)
		if ((ret = number32(p, what, t->tok[1 + k], &got[k])))
			return ret;
	return 0;
}

/* The shape of extent and move lines: KIND C X R server N lba LBA STATE. */
static int placed_syntax(struct parser *p, const struct tokens *t,
			 const char *kind)
{
	bool v2 = p->version >= STRIPE_MAP_VERSION_2;

	if ((t->n == EXTENT_TOKENS ||
	     (t->n == DIRTY_TOKENS && !strcmp(t->tok[8], "dirty"))) &&
	    !strcmp(t->tok[4], "server") && !strcmp(t->tok[6], "lba"))
		return 0;
	return stripe_map_fail(
		p->err, p->line, "%s lines are '%s C X R server N lba LBA %s'",
		kind, kind, v2 ? "ok|stale|dirty HEX" : "ok|stale");
}

static int extent_line(struct parser *p, const struct tokens *t)
{
	struct stripe_map *m = p->m;
	struct stripe_map_replica *slot;
	size_t i = p->next_slot;
	uint32_t want[3], got[3];
	int ret = 0;

	if ((ret = placed_syntax(p, t, "extent")))
		return ret;
	if (i == p->nr_slots)
		return stripe_map_fail(p->err, p->line,
				       "extra extent line: the geometry has "
				       "%zu",
				       p->nr_slots);
	want[2] = (uint32_t)(i % m->replicas);
	want[1] = (uint32_t)(i / m->replicas % m->extents_per_column);
	want[0] = (uint32_t)(i / m->replicas / m->extents_per_column);
	if ((ret = coordinates(p, t, "extent coordinate", got)))
		return ret;
	if (memcmp(want, got, sizeof(want)))
		return stripe_map_fail(p->err, p->line,
				       "extent %u %u %u where %u %u %u was "
				       "expected: one is missing, duplicated "
				       "or out of order",
				       got[0], got[1], got[2], want[0], want[1],
				       want[2]);
	slot = &m->slots[i];
	if ((ret = number32(p, "server", t->tok[5], &slot->server)) ||
	    (ret = number(p, "lba", t->tok[7], UINT64_MAX, &slot->lba)))
		return ret;
	if ((ret = parse_state(p, t, 8, stripe_map_slot_dirty(m, i))))
		return ret;
	slot->stale = strcmp(t->tok[8], "ok") != 0;
	p->where.slot[i] = p->line;
	p->next_slot++;
	return 0;
}

/* The slot a move line names: it exists, in order, once. */
static int move_slot(struct parser *p, const uint32_t got[3], size_t *slot)
{
	const struct stripe_map *m = p->m;
	size_t i;

	if (got[0] >= m->columns || got[1] >= m->extents_per_column ||
	    got[2] >= m->replicas)
		return stripe_map_fail(p->err, p->line,
				       "move %u %u %u: no such extent replica "
				       "(%u columns x %u extents x %u "
				       "replicas)",
				       got[0], got[1], got[2], m->columns,
				       m->extents_per_column, m->replicas);
	i = stripe_map_slot_index(m, got[0], got[1], got[2]);
	if (p->where.move[i])
		return stripe_map_fail(p->err, p->line,
				       "duplicate move %u %u %u (first on line "
				       "%u)",
				       got[0], got[1], got[2],
				       p->where.move[i]);
	if (i < p->next_move)
		return stripe_map_fail(p->err, p->line,
				       "move %u %u %u out of order: move lines "
				       "follow the extent lines' order",
				       got[0], got[1], got[2]);
	*slot = i;
	return 0;
}

static int move_line(struct parser *p, const struct tokens *t)
{
	struct stripe_map *m = p->m;
	struct stripe_map_move *mv;
	uint32_t got[3];
	size_t i = 0;
	int ret = 0;

	if ((ret = placed_syntax(p, t, "move")) ||
	    (ret = coordinates(p, t, "move coordinate", got)) ||
	    (ret = move_slot(p, got, &i)))
		return ret;
	mv = &m->moves[i];
	if ((ret = number32(p, "server", t->tok[5], &mv->server)) ||
	    (ret = number(p, "lba", t->tok[7], UINT64_MAX, &mv->lba)) ||
	    (ret = parse_state(p, t, 8, stripe_map_move_dirty(m, i))))
		return ret;
	mv->active = true;
	p->where.move[i] = p->line;
	p->next_move = i + 1;
	return 0;
}

/* A move line: version 2, after the last extent line. */
static int begin_moves(struct parser *p)
{
	if (p->version < STRIPE_MAP_VERSION_2)
		return stripe_map_fail(p->err, p->line,
				       "move lines are version 2: this file is "
				       "version 1");
	if (p->stage == ST_MOVES)
		return 0;
	if (p->stage != ST_EXTENTS || p->next_slot != p->nr_slots)
		return stripe_map_fail(p->err, p->line,
				       "a move line before the last extent "
				       "line: moves follow every extent");
	p->stage = ST_MOVES;
	return 0;
}

/* --- lines ----------------------------------------------------------------- */

static int body_line(struct parser *p, struct tokens *t)
{
	bool server = !strcmp(t->tok[0], "server");
	bool extent = !strcmp(t->tok[0], "extent");
	bool move = !strcmp(t->tok[0], "move");
	int ret = 0;

	if (!strcmp(t->tok[0], "checksum"))
		return stripe_map_fail(p->err, p->line,
				       "a checksum line before the end");
	if (p->stage == ST_HEADER && (server || extent || move)) {
		if ((ret = end_header(p)))
			return ret;
		p->stage = ST_SERVERS;
	}
	if (p->stage == ST_HEADER)
		return header_line(p, t);
	if (p->stage == ST_SERVERS && extent) {
		if (!p->m->nr_servers)
			return stripe_map_fail(p->err, p->line,
					       "no server line before the "
					       "extents");
		if ((ret = begin_extents(p)))
			return ret;
		p->stage = ST_EXTENTS;
	}
	if (p->stage == ST_SERVERS && server)
		return server_line(p, t);
	if (p->stage == ST_EXTENTS && extent)
		return extent_line(p, t);
	if (move)
		return (ret = begin_moves(p)) ? ret : move_line(p, t);
	return stripe_map_fail(p->err, p->line, "unexpected '%s' line %s",
			       t->tok[0],
			       p->stage == ST_SERVERS ? "among the servers"
			       : p->stage == ST_MOVES ? "among the moves"
						      : "among the extents");
}

static int magic_line(struct parser *p, const struct tokens *t)
{
	uint64_t v;

	if (t->n != 2 || strcmp(t->tok[0], STRIPE_MAP_MAGIC))
		return stripe_map_fail(p->err, p->line,
				       "not a mapping file: the first line "
				       "must be '" STRIPE_MAP_MAGIC
				       " %d' or '" STRIPE_MAP_MAGIC " %d'",
				       STRIPE_MAP_VERSION,
				       STRIPE_MAP_VERSION_2);
	if (parse_u64(t->tok[1], UINT32_MAX, &v) ||
	    (v != STRIPE_MAP_VERSION && v != STRIPE_MAP_VERSION_2))
		return stripe_map_fail(p->err, p->line,
				       "unsupported version '%s' (this program "
				       "reads versions %d and %d)",
				       t->tok[1], STRIPE_MAP_VERSION,
				       STRIPE_MAP_VERSION_2);
	p->version = (unsigned int)v;
	p->stage = ST_HEADER;
	return 0;
}

static int one_line(struct parser *p, const char *text, size_t len)
{
	char buf[STRIPE_MAP_MAX_LINE + 1];
	struct tokens t;
	int ret = 0;

	if (len > STRIPE_MAP_MAX_LINE)
		return stripe_map_fail(p->err, p->line,
				       "line longer than %d bytes",
				       STRIPE_MAP_MAX_LINE);
	for (size_t i = 0; i < len; i++)
		if (text[i] < ' ' || text[i] > '~')
			return stripe_map_fail(p->err, p->line,
					       "byte 0x%02x is not printable "
					       "ASCII",
					       (unsigned char)text[i]);
	if (!len)
		return stripe_map_fail(p->err, p->line, "empty line");
	if (p->stage != ST_MAGIC && text[0] == COMMENT_CHAR)
		return 0;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if ((ret = tokenize(p, buf, &t)))
		return ret;
	return p->stage == ST_MAGIC ? magic_line(p, &t) : body_line(p, &t);
}

/*
 * The last line must be the checksum of everything before it.  Checked
 * first, so that a corrupted file is reported as corrupted rather than by
 * whatever rule the corruption happens to break.
 */
static int check_sum(const char *text, size_t len, size_t *body_len,
		     struct stripe_map_error *err)
{
	unsigned int lines = 0;
	size_t start = len - 1;
	char hex[CHECKSUM_HEX + 1];
	uint32_t want, got;

	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	while (start && text[start - 1] != '\n')
		start--;
	if (len - start != strlen(CHECKSUM_PREFIX) + CHECKSUM_HEX + 1 ||
	    memcmp(text + start, CHECKSUM_PREFIX, strlen(CHECKSUM_PREFIX)))
		return stripe_map_fail(err, lines,
				       "the last line is not 'checksum crc32c "
				       "XXXXXXXX': %s",
				       memmem(text, start, "\n" CHECKSUM_PREFIX,
					      strlen(CHECKSUM_PREFIX) + 1)
					       ? "something follows the "
						 "checksum line"
					       : "the file is truncated");
	memcpy(hex, text + len - 1 - CHECKSUM_HEX, CHECKSUM_HEX);
	hex[CHECKSUM_HEX] = '\0';
	if (strspn(hex, "0123456789abcdef") != CHECKSUM_HEX)
		return stripe_map_fail(err, lines,
				       "the checksum is not 8 lowercase hex "
				       "digits");
	want = (uint32_t)strtoul(hex, NULL, 16);
	got = stripe_map_crc32c(0, text, start);
	if (want != got)
		return stripe_map_fail(err, lines,
				       "checksum mismatch (the file says %08x, "
				       "its contents give %08x): it is "
				       "corrupted or was edited",
				       want, got);
	*body_len = start;
	return 0;
}

static int parse_body(struct parser *p, const char *text, size_t len)
{
	size_t pos = 0;
	int ret = 0;

	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);

		p->line++;
		if ((ret = one_line(p, text + pos,
				    (size_t)(nl - (text + pos)))))
			return ret;
		pos = (size_t)(nl - text) + 1;
	}
	p->line++; /* the checksum line */
	if (p->stage < ST_EXTENTS || p->next_slot != p->nr_slots)
		return stripe_map_fail(p->err, p->line,
				       "the file ends after %zu of %zu extent "
				       "lines",
				       p->next_slot,
				       p->stage >= ST_EXTENTS ? p->nr_slots
							      : (size_t)0);
	return stripe_map_check_lines(p->m, &p->where, p->err);
}

/* The line (from 1) that holds byte off of text. */
static unsigned int line_at(const char *text, size_t off)
{
	unsigned int line = 1;

	for (size_t i = 0; i < off; i++)
		line += text[i] == '\n';
	return line;
}

int stripe_map_parse(const char *text, size_t len, struct stripe_map *m,
		     struct stripe_map_error *err)
{
	struct parser p = {.m = m, .err = err};
	const char *nul;
	size_t body_len = 0;
	int ret = 0;

	memset(m, 0, sizeof(*m));
	memset(err, 0, sizeof(*err));
	if (!len)
		return stripe_map_fail(err, 1, "the file is empty");
	if ((nul = memchr(text, '\0', len)))
		return stripe_map_fail(err, line_at(text, (size_t)(nul - text)),
				       "the file holds a NUL byte (at byte "
				       "%zu): it is not a mapping file",
				       (size_t)(nul - text));
	if (text[len - 1] != '\n')
		return stripe_map_fail(err, line_at(text, len - 1),
				       "the file does not end with a newline: "
				       "it is truncated");
	ret = check_sum(text, len, &body_len, err);
	if (!ret)
		ret = parse_body(&p, text, body_len);
	free(p.where.server);
	free(p.where.slot);
	free(p.where.move);
	if (ret)
		stripe_map_free(m);
	return ret;
}
