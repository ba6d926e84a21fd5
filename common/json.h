/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json.h - a growable string buffer and a small JSON writer, for the
 * control plane's replies (info, stats).  Not for the I/O path: both
 * allocate.
 *
 * Errors are sticky: an append that cannot allocate marks the buffer, later
 * appends do nothing, and td_strbuf_error() reports -ENOMEM once at the
 * end, so formatting code need not check every call.
 */
#ifndef TAPSTRIPE_JSON_H
#define TAPSTRIPE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct td_strbuf {
	char *data; /* NUL-terminated when len > 0; NULL when empty */
	size_t len;
	size_t cap;
	bool oom;
};

void td_strbuf_init(struct td_strbuf *sb);
void td_strbuf_free(struct td_strbuf *sb);
/* Empty the buffer (keeps its memory) and clear the error. */
void td_strbuf_reset(struct td_strbuf *sb);
void td_strbuf_append(struct td_strbuf *sb, const void *data, size_t len);
void td_strbuf_puts(struct td_strbuf *sb, const char *s);
void td_strbuf_printf(struct td_strbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* 0, or -ENOMEM when an append failed since init or reset. */
int td_strbuf_error(const struct td_strbuf *sb);
/* The text, "" when empty. */
const char *td_strbuf_str(const struct td_strbuf *sb);

/* Deepest nesting of objects and arrays the writer accepts. */
#define TD_JSON_MAX_DEPTH 8

/*
 * Writes indented JSON into a strbuf.  key is the member name inside an
 * object and must be NULL inside an array or at the top level.  Nesting
 * beyond TD_JSON_MAX_DEPTH, or unbalanced ends, mark the buffer as failed
 * (td_strbuf_error returns -ENOMEM then too: the output is unusable).
 */
struct td_json {
	struct td_strbuf *sb;
	unsigned int depth;
	bool has_items[TD_JSON_MAX_DEPTH + 1];
};

void td_json_init(struct td_json *j, struct td_strbuf *sb);
void td_json_begin_object(struct td_json *j, const char *key);
void td_json_end_object(struct td_json *j);
void td_json_begin_array(struct td_json *j, const char *key);
void td_json_end_array(struct td_json *j);
void td_json_u64(struct td_json *j, const char *key, uint64_t value);
void td_json_i64(struct td_json *j, const char *key, int64_t value);
void td_json_bool(struct td_json *j, const char *key, bool value);
void td_json_null(struct td_json *j, const char *key);
/* value NULL writes null.  Escapes quotes, backslashes and control bytes. */
void td_json_str(struct td_json *j, const char *key, const char *value);
/* Ends the document with a newline; returns td_strbuf_error(). */
int td_json_finish(struct td_json *j);

#endif
