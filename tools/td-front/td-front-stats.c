/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-stats.c - the backend's counters, as tapdisk's control socket
 * gives them ("stats json", tapdisk/stats-format.c), read with the
 * existing client (tapdisk/control-client.c) and a small JSON path reader.
 *
 * The reader walks the text once per lookup and never builds a tree: the
 * reply is at most TD_CTL_REPLY_MAX bytes and a frontend asks for a few
 * dozen numbers, before and after a run.  It is strict about what it
 * reads (nesting bounded, numbers non-negative integers that fit 64
 * bits) and skips the rest without interpreting it.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tapdisk/control/control.h"
#include "tools/cli/cli.h"
#include "tools/td-front/td-front-lib.h"

#define JSON_MAX_DEPTH	   32
#define JSON_MAX_DIGITS	   20
#define JSON_PATH_MAX	   128
#define STATS_TIMEOUT_MS   5000
#define STATS_REQUEST	   "stats json"
#define SEG_BUCKET_KEY_FMT "segments_per_request.%u.count"

struct json {
	const char *p;
	int depth;
};

static void skip_ws(struct json *j)
{
	while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
		j->p++;
}

/* A string at j->p; its raw bytes (escapes left as they are) in *s, *len. */
static int take_string(struct json *j, const char **s, size_t *len)
{
	const char *start;

	if (*j->p != '"')
		return -EPROTO;
	start = ++j->p;
	while (*j->p && *j->p != '"') {
		if (*j->p == '\\' && j->p[1])
			j->p++;
		j->p++;
	}
	if (*j->p != '"')
		return -EPROTO;
	*s = start;
	*len = (size_t)(j->p++ - start);
	return 0;
}

static int skip_value(struct json *j);

/* The members of an object or elements of an array, skipped. */
static int skip_items(struct json *j, char close, bool keys)
{
	const char *s;
	size_t len;
	int err;

	j->p++;
	skip_ws(j);
	if (*j->p == close) {
		j->p++;
		return 0;
	}
	for (;;) {
		skip_ws(j);
		if (keys) {
			if ((err = take_string(j, &s, &len)))
				return err;
			skip_ws(j);
			if (*j->p++ != ':')
				return -EPROTO;
		}
		if ((err = skip_value(j)))
			return err;
		skip_ws(j);
		if (*j->p == close) {
			j->p++;
			return 0;
		}
		if (*j->p++ != ',')
			return -EPROTO;
	}
}

static int skip_value(struct json *j)
{
	const char *s;
	size_t len;
	int err;

	skip_ws(j);
	if (++j->depth > JSON_MAX_DEPTH)
		return -EPROTO;
	if (*j->p == '{')
		err = skip_items(j, '}', true);
	else if (*j->p == '[')
		err = skip_items(j, ']', false);
	else if (*j->p == '"')
		err = take_string(j, &s, &len);
	else if (strchr("-0123456789tfn", *j->p) && *j->p) {
		while (*j->p && strchr("+-.eE0123456789truefalsn", *j->p))
			j->p++;
		err = 0;
	} else
		err = -EPROTO;
	j->depth--;
	return err;
}

static int take_u64(struct json *j, uint64_t *out)
{
	uint64_t v = 0;
	int n = 0;

	skip_ws(j);
	for (; *j->p >= '0' && *j->p <= '9'; j->p++, n++) {
		unsigned int d = (unsigned int)(*j->p - '0');

		if (n == JSON_MAX_DIGITS || v > (UINT64_MAX - d) / 10)
			return -EPROTO;
		v = v * 10 + d;
	}
	if (!n || *j->p == '.' || *j->p == 'e' || *j->p == 'E')
		return -EPROTO;
	*out = v;
	return 0;
}

static int find(struct json *j, const char *path, uint64_t *out);

/* In an object: the member named by path's first component. */
static int find_member(struct json *j, const char *path, size_t clen,
		       uint64_t *out)
{
	const char *s;
	size_t len;
	int err;

	j->p++;
	for (skip_ws(j); *j->p != '}'; skip_ws(j)) {
		if ((err = take_string(j, &s, &len)))
			return err;
		skip_ws(j);
		if (*j->p++ != ':')
			return -EPROTO;
		if (len == clen && !memcmp(s, path, clen))
			return find(j, path[clen] ? path + clen + 1 : "", out);
		if ((err = skip_value(j)))
			return err;
		skip_ws(j);
		if (*j->p == ',')
			j->p++;
		else if (*j->p != '}')
			return -EPROTO;
	}
	return -ENOENT;
}

/* In an array: the element whose index is path's first component. */
static int find_element(struct json *j, const char *path, size_t clen,
			uint64_t *out)
{
	unsigned long idx = 0;
	int err;

	if (!clen || clen > 6 || strspn(path, "0123456789") < clen)
		return -ENOENT;
	for (size_t i = 0; i < clen; i++)
		idx = idx * 10 + (unsigned long)(path[i] - '0');
	j->p++;
	for (unsigned long i = 0;; i++) {
		skip_ws(j);
		if (*j->p == ']')
			return -ENOENT;
		if (i == idx)
			return find(j, path[clen] ? path + clen + 1 : "", out);
		if ((err = skip_value(j)))
			return err;
		skip_ws(j);
		if (*j->p == ',')
			j->p++;
		else if (*j->p != ']')
			return -EPROTO;
	}
}

static int find(struct json *j, const char *path, uint64_t *out)
{
	size_t clen = strcspn(path, ".");
	int err;

	skip_ws(j);
	if (!*path)
		return take_u64(j, out);
	if (++j->depth > JSON_MAX_DEPTH)
		return -EPROTO;
	if (*j->p == '{')
		err = find_member(j, path, clen, out);
	else if (*j->p == '[')
		err = find_element(j, path, clen, out);
	else
		err = -ENOENT; /* a scalar (or null) has no members */
	j->depth--;
	return err;
}

int tdf_json_u64(const char *json, const char *path, uint64_t *out)
{
	struct json j = {.p = json};

	return find(&j, path, out);
}

/* --- the backend's counters ------------------------------------------------------ */

static const char *const op_keys[TDF_NR_OPS] = {
	"read", "write", "flush", "discard", "write_zeroes",
};

static int __attribute__((format(printf, 4, 5)))
get(const char *json, uint64_t *out, bool required, const char *fmt, ...)
{
	char path[JSON_PATH_MAX];
	va_list ap;
	int err;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	err = tdf_json_u64(json, path, out);
	if (err == -ENOENT && !required) {
		*out = 0;
		return 0;
	}
	return err;
}

static int parse_stats(const char *js, struct tdf_backend_stats *o)
{
	uint64_t user = 0, sys = 0;
	const struct {
		const char *path;
		uint64_t *value;
		bool required; /* the shm keys are absent without --shm */
	} keys[] = {
		{"pieces", &o->pieces, true},
		{"counters.backend_submits", &o->backend_submits, true},
		{"counters.backend_merges", &o->backend_merges, true},
		{"counters.sort_merges", &o->sort_merges, true},
		{"cpu_us.user", &user, true},
		{"cpu_us.sys", &sys, true},
		{"shm.ring.requests_total", &o->ring_requests, false},
		{"shm.ring.indirect_requests", &o->ring_indirect, false},
		{"shm.ring.segments", &o->ring_segments, false},
		{"shm.ring.notifications", &o->ring_notifications, false},
		{"shm.kicks", &o->kicks, false},
		{"shm.ring.polled_requests", &o->ring_polled, false},
	};
	int err = 0;

	memset(o, 0, sizeof(*o));
	for (unsigned int i = 0; i < TDF_NR_OPS && !err; i++)
		if (!(err = get(js, &o->requests[i], true, "ops.%s.requests",
				op_keys[i])))
			err = get(js, &o->bytes[i], true, "ops.%s.bytes",
				  op_keys[i]);
	for (unsigned int b = 0; b < TDF_SEG_BUCKETS && !err; b++)
		err = get(js, &o->seg_hist[b], true, SEG_BUCKET_KEY_FMT, b);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !err; i++)
		err = get(js, keys[i].value, keys[i].required, "%s",
			  keys[i].path);
	o->cpu_us = user + sys;
	return err;
}

int tdf_backend_stats(const char *ctl_path, struct tdf_backend_stats *out,
		      char *why, size_t why_len)
{
	struct td_ctl_reply r;
	int err;

	td_ctl_reply_init(&r);
	err = td_ctl_call(ctl_path, STATS_REQUEST, STATS_TIMEOUT_MS, &r);
	if (!err && r.err) {
		snprintf(why, why_len, "%s: %s (%s)", ctl_path, r.message,
			 r.errname);
		err = r.err;
	} else if (err) {
		cli_explain(why, why_len, err, CLI_CTL_SOCKET, "%s", ctl_path);
	} else if ((err = parse_stats(td_strbuf_str(&r.payload), out))) {
		snprintf(why, why_len, "%s: stats not understood (%s)",
			 ctl_path, strerror(-err));
	}
	td_ctl_reply_free(&r);
	return err;
}

void tdf_backend_stats_diff(const struct tdf_backend_stats *after,
			    const struct tdf_backend_stats *before,
			    struct tdf_backend_stats *out)
{
	const uint64_t *a = (const uint64_t *)after;
	const uint64_t *b = (const uint64_t *)before;
	uint64_t *o = (uint64_t *)out;

	/* Every member is a uint64_t counter. */
	_Static_assert(sizeof(*out) % sizeof(uint64_t) == 0,
		       "tdf_backend_stats holds counters only");
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		o[i] = a[i] - b[i];
}
