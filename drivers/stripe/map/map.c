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
#define COMMENT_CHAR  '#'

enum stage { ST_MAGIC = 0, ST_HEADER, ST_SERVERS, ST_EXTENTS };

struct parser {
	struct stripe_map *m;
	struct stripe_map_error *err;
	struct stripe_map_lines where;
	unsigned int line;
	enum stage stage;
	uint32_t servers_cap;
	size_t nr_slots;
	size_t next_slot;
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
	for (int k = 0; k < MAP_KEY_COUNT; k++)
		if (!p->where.key[k])
			return stripe_map_fail(p->err, p->line,
					       "key '%s' is missing before the "
					       "first server line",
					       stripe_map_key_names[k]);
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
	int ret;

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
	int ret;

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
	p->m->slots = calloc(p->nr_slots, sizeof(*p->m->slots));
	p->where.slot = calloc(p->nr_slots, sizeof(*p->where.slot));
	return p->m->slots && p->where.slot ? 0 : -ENOMEM;
}

static int extent_line(struct parser *p, const struct tokens *t)
{
	struct stripe_map *m = p->m;
	struct stripe_map_replica *slot;
	size_t i = p->next_slot;
	uint32_t want[3], got[3];
	int ret;

	if (t->n != EXTENT_TOKENS || strcmp(t->tok[4], "server") ||
	    strcmp(t->tok[6], "lba"))
		return stripe_map_fail(p->err, p->line,
				       "extent lines are 'extent C X R server "
				       "N lba LBA ok|stale'");
	if (i == p->nr_slots)
		return stripe_map_fail(p->err, p->line,
				       "extra extent line: the geometry has "
				       "%zu",
				       p->nr_slots);
	want[2] = (uint32_t)(i % m->replicas);
	want[1] = (uint32_t)(i / m->replicas % m->extents_per_column);
	want[0] = (uint32_t)(i / m->replicas / m->extents_per_column);
	for (int k = 0; k < 3; k++)
		if ((ret = number32(p, "extent coordinate", t->tok[1 + k],
				    &got[k])))
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
	if (strcmp(t->tok[8], "ok") && strcmp(t->tok[8], "stale"))
		return stripe_map_fail(p->err, p->line,
				       "replica state '%s' is not ok or stale",
				       t->tok[8]);
	slot->stale = !strcmp(t->tok[8], "stale");
	p->where.slot[i] = p->line;
	p->next_slot++;
	return 0;
}

/* --- lines ----------------------------------------------------------------- */

static int body_line(struct parser *p, struct tokens *t)
{
	bool server = !strcmp(t->tok[0], "server");
	bool extent = !strcmp(t->tok[0], "extent");
	int ret;

	if (!strcmp(t->tok[0], "checksum"))
		return stripe_map_fail(p->err, p->line,
				       "a checksum line before the end");
	if (p->stage == ST_HEADER && (server || extent)) {
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
	return stripe_map_fail(p->err, p->line, "unexpected '%s' line %s",
			       t->tok[0],
			       p->stage == ST_SERVERS ? "among the servers"
						      : "among the extents");
}

static int magic_line(struct parser *p, const struct tokens *t)
{
	uint64_t v;

	if (t->n != 2 || strcmp(t->tok[0], STRIPE_MAP_MAGIC))
		return stripe_map_fail(p->err, p->line,
				       "not a mapping file: the first line "
				       "must be '" STRIPE_MAP_MAGIC " %d'",
				       STRIPE_MAP_VERSION);
	if (parse_u64(t->tok[1], UINT32_MAX, &v) || v != STRIPE_MAP_VERSION)
		return stripe_map_fail(p->err, p->line,
				       "unsupported version '%s' (this program "
				       "reads version %d)",
				       t->tok[1], STRIPE_MAP_VERSION);
	p->stage = ST_HEADER;
	return 0;
}

static int one_line(struct parser *p, const char *text, size_t len)
{
	char buf[STRIPE_MAP_MAX_LINE + 1];
	struct tokens t;
	int ret;

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
	int ret;

	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);

		p->line++;
		if ((ret = one_line(p, text + pos,
				    (size_t)(nl - (text + pos)))))
			return ret;
		pos = (size_t)(nl - text) + 1;
	}
	p->line++; /* the checksum line */
	if (p->stage != ST_EXTENTS || p->next_slot != p->nr_slots)
		return stripe_map_fail(p->err, p->line,
				       "the file ends after %zu of %zu extent "
				       "lines",
				       p->next_slot,
				       p->stage == ST_EXTENTS ? p->nr_slots
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
	int ret;

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
	if (ret)
		stripe_map_free(m);
	return ret;
}
