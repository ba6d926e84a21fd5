/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json.c - growable string buffer and indented JSON writer.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

#define STRBUF_MIN_CAP 256
#define JSON_INDENT    "  "

void td_strbuf_init(struct td_strbuf *sb)
{
	memset(sb, 0, sizeof(*sb));
}

void td_strbuf_free(struct td_strbuf *sb)
{
	free(sb->data);
	td_strbuf_init(sb);
}

void td_strbuf_reset(struct td_strbuf *sb)
{
	sb->len = 0;
	sb->oom = false;
	if (sb->data)
		sb->data[0] = '\0';
}

/* Make room for need more bytes and the NUL; false (and oom) if not. */
static bool strbuf_reserve(struct td_strbuf *sb, size_t need)
{
	size_t cap = sb->cap ? sb->cap : STRBUF_MIN_CAP;
	char *data;

	if (sb->oom)
		return false;
	if (need >= SIZE_MAX / 2 - sb->len) {
		sb->oom = true;
		return false;
	}
	if (sb->len + need + 1 <= sb->cap)
		return true;
	while (cap < sb->len + need + 1)
		cap *= 2;
	data = realloc(sb->data, cap);
	if (!data) {
		sb->oom = true;
		return false;
	}
	sb->data = data;
	sb->cap = cap;
	return true;
}

void td_strbuf_append(struct td_strbuf *sb, const void *data, size_t len)
{
	if (!strbuf_reserve(sb, len))
		return;
	memcpy(sb->data + sb->len, data, len);
	sb->len += len;
	sb->data[sb->len] = '\0';
}

void td_strbuf_puts(struct td_strbuf *sb, const char *s)
{
	td_strbuf_append(sb, s, strlen(s));
}

void td_strbuf_printf(struct td_strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		sb->oom = true;
		return;
	}
	if (!strbuf_reserve(sb, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

int td_strbuf_error(const struct td_strbuf *sb)
{
	return sb->oom ? -ENOMEM : 0;
}

const char *td_strbuf_str(const struct td_strbuf *sb)
{
	return sb->data ? sb->data : "";
}

/* --- JSON ------------------------------------------------------------------ */

void td_json_init(struct td_json *j, struct td_strbuf *sb)
{
	memset(j, 0, sizeof(*j));
	j->sb = sb;
}

static void json_indent(struct td_json *j)
{
	td_strbuf_puts(j->sb, "\n");
	for (unsigned int i = 0; i < j->depth; i++)
		td_strbuf_puts(j->sb, JSON_INDENT);
}

static void json_string(struct td_strbuf *sb, const char *s)
{
	td_strbuf_puts(sb, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			td_strbuf_printf(sb, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			td_strbuf_printf(sb, "\\u%04x", c);
		else
			td_strbuf_append(sb, &c, 1);
	}
	td_strbuf_puts(sb, "\"");
}

/* Separator, indentation and "key": before a value. */
static void json_member(struct td_json *j, const char *key)
{
	if (j->depth) {
		if (j->has_items[j->depth])
			td_strbuf_puts(j->sb, ",");
		j->has_items[j->depth] = true;
		json_indent(j);
	}
	if (key) {
		json_string(j->sb, key);
		td_strbuf_puts(j->sb, ": ");
	}
}

static void json_open(struct td_json *j, const char *key, const char *bracket)
{
	json_member(j, key);
	if (j->depth == TD_JSON_MAX_DEPTH) {
		j->sb->oom = true;
		return;
	}
	td_strbuf_puts(j->sb, bracket);
	j->depth++;
	j->has_items[j->depth] = false;
}

static void json_close(struct td_json *j, const char *bracket)
{
	bool had_items;

	if (!j->depth) {
		j->sb->oom = true;
		return;
	}
	had_items = j->has_items[j->depth];
	j->depth--;
	if (had_items)
		json_indent(j);
	td_strbuf_puts(j->sb, bracket);
}

void td_json_begin_object(struct td_json *j, const char *key)
{
	json_open(j, key, "{");
}

void td_json_end_object(struct td_json *j)
{
	json_close(j, "}");
}

void td_json_begin_array(struct td_json *j, const char *key)
{
	json_open(j, key, "[");
}

void td_json_end_array(struct td_json *j)
{
	json_close(j, "]");
}

void td_json_u64(struct td_json *j, const char *key, uint64_t value)
{
	json_member(j, key);
	td_strbuf_printf(j->sb, "%" PRIu64, value);
}

void td_json_i64(struct td_json *j, const char *key, int64_t value)
{
	json_member(j, key);
	td_strbuf_printf(j->sb, "%" PRId64, value);
}

void td_json_bool(struct td_json *j, const char *key, bool value)
{
	json_member(j, key);
	td_strbuf_puts(j->sb, value ? "true" : "false");
}

void td_json_null(struct td_json *j, const char *key)
{
	json_member(j, key);
	td_strbuf_puts(j->sb, "null");
}

void td_json_str(struct td_json *j, const char *key, const char *value)
{
	json_member(j, key);
	if (value)
		json_string(j->sb, value);
	else
		td_strbuf_puts(j->sb, "null");
}

int td_json_finish(struct td_json *j)
{
	if (j->depth)
		j->sb->oom = true;
	td_strbuf_puts(j->sb, "\n");
	return td_strbuf_error(j->sb);
}
