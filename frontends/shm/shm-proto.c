/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm-proto.c - parse and format the shm transport's negotiation lines
 * (shm-proto.h; doc/shm-protocol.md is the specification).
 *
 * One table-driven parser serves every message: the table lists each
 * key's bounds and whether it must be there.  It reads the line once,
 * left to right, and rejects at the first fault, so no value is used
 * before it has been checked.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "frontends/shm/shm-proto.h"

#define SHM_MAX_KEYS	   12
#define SHM_MAX_DIGITS	   20 /* UINT64_MAX has 20 */
#define SHM_ERRNAME_MAX	   32
#define SHM_VERSION_KEY	   "version"
#define SHM_MAX_RING_BYTES ((uint64_t)SHM_PAGE_SIZE << SHM_MAX_RING_PAGE_ORDER)

struct shm_key {
	const char *name;
	uint64_t min, max;
	bool required;
};

/* What parse_keys found: values[i] for keys[i] when present[i]. */
struct shm_values {
	uint64_t v[SHM_MAX_KEYS];
	bool present[SHM_MAX_KEYS];
};

static int __attribute__((format(printf, 4, 5)))
explain(int err, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}

static bool printable(char c)
{
	return c >= 0x20 && c <= 0x7e;
}

static bool key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* Decimal without sign or leading zero; false when not one or > 2^64-1. */
static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (!len || len > SHM_MAX_DIGITS || (len > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned int d = (unsigned int)(s[i] - '0');

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* The message name is the line's first word. */
static bool has_name(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);

	return len >= n && !memcmp(line, name, n) &&
	       (len == n || line[n] == ' ');
}

enum shm_msg_kind shm_msg_kind(const char *line, size_t len)
{
	if (has_name(line, len, SHM_MSG_BACKEND))
		return SHM_KIND_BACKEND;
	if (has_name(line, len, SHM_MSG_CONNECTED))
		return SHM_KIND_CONNECTED;
	if (has_name(line, len, SHM_MSG_CONNECT))
		return SHM_KIND_CONNECT;
	if (has_name(line, len, SHM_MSG_ERROR))
		return SHM_KIND_ERROR;
	if (has_name(line, len, SHM_MSG_RESIZED))
		return SHM_KIND_RESIZED;
	return SHM_KIND_UNKNOWN;
}

static int check_bytes(const char *line, size_t len, char *why, size_t wl)
{
	if (len >= SHM_LINE_MAX)
		return explain(-EPROTO, why, wl,
			       "line of %zu bytes, more than %u", len + 1,
			       SHM_LINE_MAX);
	for (size_t i = 0; i < len; i++)
		if (!printable(line[i]))
			return explain(-EPROTO, why, wl,
				       "byte 0x%02x at offset %zu is not "
				       "printable ASCII",
				       (unsigned char)line[i], i);
	return 0;
}

/* One "key=value" word: find the key, check and store the value. */
static int parse_word(const char *w, size_t len, const struct shm_key *keys,
		      unsigned int nkeys, struct shm_values *out, char *why,
		      size_t wl)
{
	const char *eq = memchr(w, '=', len);
	size_t klen = eq ? (size_t)(eq - w) : 0;
	uint64_t v;
	unsigned int k;

	if (!eq || !klen)
		return explain(-EPROTO, why, wl, "'%.*s' is not key=value",
			       (int)len, w);
	for (size_t i = 0; i < klen; i++)
		if (!key_char(w[i]))
			return explain(-EPROTO, why, wl, "bad key '%.*s'",
				       (int)klen, w);
	for (k = 0; k < nkeys; k++)
		if (strlen(keys[k].name) == klen &&
		    !memcmp(keys[k].name, w, klen))
			break;
	if (k == nkeys)
		return explain(-EPROTO, why, wl, "unknown key '%.*s'",
			       (int)klen, w);
	if (out->present[k])
		return explain(-EPROTO, why, wl, "key '%s' given twice",
			       keys[k].name);
	if (!parse_u64(eq + 1, len - klen - 1, &v))
		return explain(-EPROTO, why, wl,
			       "%s: '%.*s' is not a decimal number",
			       keys[k].name, (int)(len - klen - 1), eq + 1);
	if (v < keys[k].min || v > keys[k].max)
		return explain(-EINVAL, why, wl,
			       "%s=%" PRIu64 " is not in %" PRIu64 "..%" PRIu64,
			       keys[k].name, v, keys[k].min, keys[k].max);
	out->present[k] = true;
	out->v[k] = v;
	return 0;
}

/*
 * The words after the message name.  With keys[0] "version", the first
 * word must be it, and another version stops the parse at once: a newer
 * peer's keys would otherwise be reported as unknown.
 */
static int parse_keys(const char *line, size_t len, const char *name,
		      const struct shm_key *keys, unsigned int nkeys,
		      struct shm_values *out, char *why, size_t wl)
{
	bool versioned = !strcmp(keys[0].name, SHM_VERSION_KEY);
	size_t pos = strlen(name);
	int err = check_bytes(line, len, why, wl);

	memset(out, 0, sizeof(*out));
	if (err)
		return err;
	if (!has_name(line, len, name))
		return explain(-EPROTO, why, wl, "not a '%s' message", name);
	while (pos < len) {
		const char *w = line + pos + 1; /* line[pos] is a space */
		const char *sp = memchr(w, ' ', len - pos - 1);
		size_t wlen = sp ? (size_t)(sp - w) : len - pos - 1;

		if (!wlen)
			return explain(-EPROTO, why, wl,
				       "empty word at offset %zu", pos + 1);
		if (versioned && !out->present[0] &&
		    (wlen <= strlen(SHM_VERSION_KEY) ||
		     memcmp(w, SHM_VERSION_KEY "=",
			    strlen(SHM_VERSION_KEY) + 1)))
			return explain(-EPROTO, why, wl,
				       "the first key must be version");
		err = parse_word(w, wlen, keys, nkeys, out, why, wl);
		if (versioned && err == -EINVAL && !out->present[0])
			return explain(-ENOTSUP, why, wl,
				       "protocol %.*s; this side speaks "
				       "version %d",
				       (int)wlen, w, SHM_PROTO_VERSION);
		if (err)
			return err;
		pos += 1 + wlen;
	}
	for (unsigned int k = 0; k < nkeys; k++)
		if (keys[k].required && !out->present[k])
			return explain(-EPROTO, why, wl, "key '%s' missing",
				       keys[k].name);
	return 0;
}

#define NKEYS(t) ((unsigned int)(sizeof(t) / sizeof((t)[0])))

/* --- the backend's offer ---------------------------------------------------- */

enum {
	BK_VERSION,
	BK_SECTORS,
	BK_SECTOR_SIZE,
	BK_INFO,
	BK_FLUSH,
	BK_DISCARD,
	BK_SECURE,
	BK_INDIRECT,
	BK_ORDER,
	BK_DATA_PAGES,
	BK_QUEUES,
};

static const struct shm_key backend_keys[] = {
	[BK_VERSION] = {SHM_VERSION_KEY, SHM_PROTO_VERSION, SHM_PROTO_VERSION,
			true},
	[BK_SECTORS] = {"sectors", 0, SHM_MAX_SECTORS, true},
	[BK_SECTOR_SIZE] = {"sector-size", SHM_MIN_SECTOR_SIZE,
			    SHM_MAX_SECTOR_SIZE, true},
	[BK_INFO] = {"info", 0, UINT32_MAX, true},
	[BK_FLUSH] = {"feature-flush-cache", 0, 1, true},
	[BK_DISCARD] = {"feature-discard", 0, 1, true},
	[BK_SECURE] = {"discard-secure", 0, 1, true},
	[BK_INDIRECT] = {"feature-max-indirect-segments",
			 SHM_MIN_INDIRECT_SEGMENTS, SHM_MAX_INDIRECT_SEGMENTS,
			 false},
	[BK_ORDER] = {"max-ring-page-order", 0, SHM_MAX_RING_PAGE_ORDER, true},
	[BK_DATA_PAGES] = {"max-data-pages", 1, UINT32_MAX, true},
	[BK_QUEUES] = {"multi-queue-max-queues", 1, SHM_MAX_QUEUES, false},
};

int shm_parse_backend(const char *line, size_t len, struct shm_backend_msg *out,
		      char *why, size_t why_len)
{
	struct shm_values v;
	int err = parse_keys(line, len, SHM_MSG_BACKEND, backend_keys,
			     NKEYS(backend_keys), &v, why, why_len);

	if (err)
		return err;
	if (v.v[BK_SECTOR_SIZE] & (v.v[BK_SECTOR_SIZE] - 1))
		return explain(-EINVAL, why, why_len,
			       "sector-size %" PRIu64 " is not a power of two",
			       v.v[BK_SECTOR_SIZE]);
	memset(out, 0, sizeof(*out));
	out->version = (uint32_t)v.v[BK_VERSION];
	out->sectors = v.v[BK_SECTORS];
	out->sector_size = (uint32_t)v.v[BK_SECTOR_SIZE];
	out->info = (uint32_t)v.v[BK_INFO];
	out->flush_cache = v.v[BK_FLUSH];
	out->discard = v.v[BK_DISCARD];
	out->discard_secure = v.v[BK_SECURE];
	out->max_indirect_segments = (uint32_t)v.v[BK_INDIRECT];
	out->max_ring_page_order = (uint32_t)v.v[BK_ORDER];
	out->max_data_pages = (uint32_t)v.v[BK_DATA_PAGES];
	out->max_queues = v.present[BK_QUEUES] ? (uint32_t)v.v[BK_QUEUES] : 1;
	return 0;
}

/* " key=value" for a key sent only when value is above absent_value. */
static void optional_key(char *buf, size_t len, const char *key, uint32_t value,
			 uint32_t absent_value)
{
	buf[0] = '\0';
	if (value > absent_value)
		snprintf(buf, len, " %s=%" PRIu32, key, value);
}

int shm_format_backend(const struct shm_backend_msg *m, char *buf, size_t len)
{
	char indirect[64], queues[48];
	int n;

	optional_key(indirect, sizeof(indirect),
		     "feature-max-indirect-segments", m->max_indirect_segments,
		     0);
	optional_key(queues, sizeof(queues), "multi-queue-max-queues",
		     m->max_queues, 1);
	n = snprintf(buf, len,
		     SHM_MSG_BACKEND
		     " version=%" PRIu32 " sectors=%" PRIu64
		     " sector-size=%" PRIu32 " info=%" PRIu32
		     " feature-flush-cache=%d feature-discard=%d"
		     " discard-secure=%d%s max-ring-page-order=%" PRIu32
		     " max-data-pages=%" PRIu32 "%s\n",
		     m->version, m->sectors, m->sector_size, m->info,
		     m->flush_cache, m->discard, m->discard_secure, indirect,
		     m->max_ring_page_order, m->max_data_pages, queues);
	return n < 0 || (size_t)n >= len || n > (int)SHM_LINE_MAX ? -ENOSPC : n;
}

/* --- the frontend's request -------------------------------------------------- */

enum { CN_VERSION, CN_ORDER, CN_DATA_PAGES, CN_INDIRECT, CN_QUEUES };

static const struct shm_key connect_keys[] = {
	[CN_VERSION] = {SHM_VERSION_KEY, SHM_PROTO_VERSION, SHM_PROTO_VERSION,
			true},
	[CN_ORDER] = {"ring-page-order", 0, SHM_MAX_RING_PAGE_ORDER, true},
	[CN_DATA_PAGES] = {"data-pages", 1, UINT32_MAX, true},
	[CN_INDIRECT] = {"max-indirect-segments", SHM_MIN_INDIRECT_SEGMENTS,
			 SHM_MAX_INDIRECT_SEGMENTS, false},
	[CN_QUEUES] = {"multi-queue-num-queues", 1, SHM_MAX_QUEUES, false},
};

int shm_parse_connect(const char *line, size_t len, struct shm_connect_msg *out,
		      char *why, size_t why_len)
{
	struct shm_values v;
	int err = parse_keys(line, len, SHM_MSG_CONNECT, connect_keys,
			     NKEYS(connect_keys), &v, why, why_len);

	if (err)
		return err;
	memset(out, 0, sizeof(*out));
	out->version = (uint32_t)v.v[CN_VERSION];
	out->ring_page_order = (uint32_t)v.v[CN_ORDER];
	out->data_pages = (uint32_t)v.v[CN_DATA_PAGES];
	out->max_indirect_segments = (uint32_t)v.v[CN_INDIRECT];
	out->nr_queues = v.present[CN_QUEUES] ? (uint32_t)v.v[CN_QUEUES] : 1;
	return 0;
}

int shm_format_connect(const struct shm_connect_msg *m, char *buf, size_t len)
{
	char indirect[48], queues[48];
	int n;

	optional_key(indirect, sizeof(indirect), "max-indirect-segments",
		     m->max_indirect_segments, 0);
	optional_key(queues, sizeof(queues), "multi-queue-num-queues",
		     m->nr_queues, 1);
	n = snprintf(buf, len,
		     SHM_MSG_CONNECT " version=%" PRIu32
				     " ring-page-order=%" PRIu32
				     " data-pages=%" PRIu32 "%s%s\n",
		     m->version, m->ring_page_order, m->data_pages, indirect,
		     queues);
	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

/* --- the backend's answer ---------------------------------------------------- */

enum {
	CD_ORDER,
	CD_RING_BYTES,
	CD_DATA_PAGES,
	CD_DATA_BYTES,
	CD_INDIRECT,
	CD_QUEUES
};

static const struct shm_key connected_keys[] = {
	[CD_ORDER] = {"ring-page-order", 0, SHM_MAX_RING_PAGE_ORDER, true},
	[CD_RING_BYTES] = {"ring-bytes", SHM_PAGE_SIZE, SHM_MAX_RING_BYTES,
			   true},
	[CD_DATA_PAGES] = {"data-pages", 1, UINT32_MAX, true},
	[CD_DATA_BYTES] = {"data-bytes", SHM_PAGE_SIZE,
			   (uint64_t)UINT32_MAX *SHM_PAGE_SIZE, true},
	[CD_INDIRECT] = {"max-indirect-segments", SHM_MIN_INDIRECT_SEGMENTS,
			 SHM_MAX_INDIRECT_SEGMENTS, true},
	[CD_QUEUES] = {"multi-queue-num-queues", 2, SHM_MAX_QUEUES, false},
};

int shm_parse_connected(const char *line, size_t len,
			struct shm_connected_msg *out, char *why,
			size_t why_len)
{
	struct shm_values v;
	int err = parse_keys(line, len, SHM_MSG_CONNECTED, connected_keys,
			     NKEYS(connected_keys), &v, why, why_len);

	if (err)
		return err;
	if (v.v[CD_RING_BYTES] != (uint64_t)SHM_PAGE_SIZE << v.v[CD_ORDER] ||
	    v.v[CD_DATA_BYTES] != v.v[CD_DATA_PAGES] * SHM_PAGE_SIZE)
		return explain(-EINVAL, why, why_len,
			       "sizes do not match the page counts");
	memset(out, 0, sizeof(*out));
	out->ring_page_order = (uint32_t)v.v[CD_ORDER];
	out->ring_bytes = v.v[CD_RING_BYTES];
	out->data_pages = (uint32_t)v.v[CD_DATA_PAGES];
	out->data_bytes = v.v[CD_DATA_BYTES];
	out->max_indirect_segments = (uint32_t)v.v[CD_INDIRECT];
	out->nr_queues = v.present[CD_QUEUES] ? (uint32_t)v.v[CD_QUEUES] : 1;
	return 0;
}

int shm_format_connected(const struct shm_connected_msg *m, char *buf,
			 size_t len)
{
	char queues[48];
	int n;

	optional_key(queues, sizeof(queues), "multi-queue-num-queues",
		     m->nr_queues, 1);
	n = snprintf(buf, len,
		     SHM_MSG_CONNECTED
		     " ring-page-order=%" PRIu32 " ring-bytes=%" PRIu64
		     " data-pages=%" PRIu32 " data-bytes=%" PRIu64
		     " max-indirect-segments=%" PRIu32 "%s\n",
		     m->ring_page_order, m->ring_bytes, m->data_pages,
		     m->data_bytes, m->max_indirect_segments, queues);

	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

/* --- resized ----------------------------------------------------------------- */

static const struct shm_key resized_keys[] = {
	{"sectors", 0, SHM_MAX_SECTORS, true},
};

int shm_parse_resized(const char *line, size_t len, uint64_t *sectors,
		      char *why, size_t why_len)
{
	struct shm_values v;
	int err = parse_keys(line, len, SHM_MSG_RESIZED, resized_keys,
			     NKEYS(resized_keys), &v, why, why_len);

	if (!err)
		*sectors = v.v[0];
	return err;
}

int shm_format_resized(uint64_t sectors, char *buf, size_t len)
{
	int n = snprintf(buf, len, SHM_MSG_RESIZED " sectors=%" PRIu64 "\n",
			 sectors);

	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

/* --- errors ------------------------------------------------------------------ */

int shm_parse_error(const char *line, size_t len, int *err, char *msg,
		    size_t msg_len)
{
	char name[SHM_ERRNAME_MAX];
	size_t pos = strlen(SHM_MSG_ERROR) + 1, n = 0;
	int e = check_bytes(line, len, NULL, 0);

	if (e || !has_name(line, len, SHM_MSG_ERROR) || pos >= len)
		return -EPROTO;
	while (pos + n < len && line[pos + n] != ' ' && n + 1 < sizeof(name))
		n++;
	if (n < 2 || line[pos] != 'E' ||
	    (pos + n < len && line[pos + n] != ' '))
		return -EPROTO;
	memcpy(name, line + pos, n);
	name[n] = '\0';
	e = td_errno_from_name(name);
	*err = e ? -e : -EIO;
	pos += n + (pos + n < len);
	if (msg && msg_len)
		snprintf(msg, msg_len, "%.*s", (int)(len - pos), line + pos);
	return 0;
}

int shm_format_error(int err, const char *text, char *buf, size_t len)
{
	char name[SHM_ERRNAME_MAX];
	size_t room = len < SHM_LINE_MAX ? len : SHM_LINE_MAX;
	int n = snprintf(buf, room, SHM_MSG_ERROR " %s%s",
			 td_errno_name(err, name, sizeof(name)),
			 *text ? " " : "");
	size_t i;

	if (n < 0 || (size_t)n + 2 > room)
		return -ENOSPC;
	for (i = 0; text[i] && (size_t)n + i + 2 < room; i++)
		buf[n + i] = printable(text[i]) ? text[i] : '?';
	buf[n + i] = '\n';
	buf[n + i + 1] = '\0';
	return n + (int)i + 1;
}
