/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json-read.h - a small JSON reader, for the tools that read what the
 * control plane writes (stripe-ctl reads "driver stripe status json").
 * Parses a whole text into a tree; not for the I/O path: it allocates.
 */
#ifndef TAPSTRIPE_JSON_READ_H
#define TAPSTRIPE_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum td_jtype {
	TD_JNULL,
	TD_JBOOL,
	TD_JNUMBER,
	TD_JSTRING,
	TD_JARRAY,
	TD_JOBJECT,
};

struct td_jval {
	enum td_jtype type;
	bool boolean;
	bool is_u64;	       /* a number that is a non-negative integer */
	uint64_t u64;	       /* when is_u64 */
	double number;	       /* every number */
	char *string;	       /* TD_JSTRING: unescaped, NUL-terminated */
	char *key;	       /* a member of an object: its name */
	struct td_jval *child; /* arrays and objects: the first element */
	struct td_jval *next;  /* the next element of the parent */
};

/* Deepest nesting accepted: deeper text is refused, not recursed into. */
#define TD_JSON_READ_MAX_DEPTH 64

/*
 * Parse text (one value, white space around it allowed).  0 with *out the
 * tree (free with td_jval_free), -EINVAL when text is not JSON (or nests
 * deeper than TD_JSON_READ_MAX_DEPTH), -ENOMEM.
 */
int td_json_parse(const char *text, struct td_jval **out);
void td_jval_free(struct td_jval *v);

/* The member key of object obj; NULL when obj is no object or lacks it. */
const struct td_jval *td_jval_get(const struct td_jval *obj, const char *key);

/*
 * Member key of obj as a number, string or bool.  0, -ENOENT when missing
 * (or null), -EINVAL when of another type (or, for u64, not a
 * non-negative integer; for i64, not an integer from -2^53 to 2^53, or
 * a u64 above INT64_MAX).
 */
int td_jval_get_u64(const struct td_jval *obj, const char *key, uint64_t *out);
int td_jval_get_i64(const struct td_jval *obj, const char *key, int64_t *out);
int td_jval_get_str(const struct td_jval *obj, const char *key,
		    const char **out);
int td_jval_get_bool(const struct td_jval *obj, const char *key, bool *out);

#endif
