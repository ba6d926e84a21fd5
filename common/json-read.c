/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json-read.c - a small recursive-descent JSON reader (RFC 8259): the
 * depth is bounded, every error is -EINVAL, and \u escapes outside ASCII
 * are kept as UTF-8.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-read.h"

struct jparser {
	const char *p;
	unsigned int depth;
};

static int parse_value(struct jparser *jp, struct td_jval *v);

static void skip_ws(struct jparser *jp)
{
	while (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' ||
	       *jp->p == '\r')
		jp->p++;
}

static int hex4(const char *s, unsigned int *out)
{
	*out = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned int)(c - 'A' + 10);
		else
			return -EINVAL;
		*out = *out << 4 | d;
	}
	return 0;
}

/* Code point cp as UTF-8 at out; returns the bytes written (1 to 3). */
static size_t put_utf8(char *out, unsigned int cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	out[0] = (char)(0xe0 | cp >> 12);
	out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[2] = (char)(0x80 | (cp & 0x3f));
	return 3;
}

/* One escape after the backslash at *s; appends to out[*len]. */
static int unescape(const char **s, char *out, size_t *len)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *hit = **s ? strchr(from, **s) : NULL;
	unsigned int cp;

	if (hit) {
		out[(*len)++] = to[hit - from];
		(*s)++;
		return 0;
	}
	if (**s != 'u' || hex4(*s + 1, &cp))
		return -EINVAL;
	*s += 5;
	/* Surrogates (characters beyond the BMP) become '?': the control
	 * plane writes none. */
	*len += put_utf8(out + *len, cp >= 0xd800 && cp < 0xe000 ? '?' : cp);
	return 0;
}

/* A string at jp->p (its opening quote); *out malloc'd. */
static int parse_string(struct jparser *jp, char **out)
{
	const char *s = jp->p + 1, *end = s;
	size_t len = 0;
	char *buf;

	while (*end && *end != '"')
		end += *end == '\\' && end[1] ? 2 : 1;
	if (*end != '"')
		return -EINVAL;
	/* An escape never grows: \uXXXX (6 bytes) is at most 3 of UTF-8. */
	if (!(buf = malloc((size_t)(end - s) + 1)))
		return -ENOMEM;
	while (s < end) {
		if ((unsigned char)*s < 0x20)
			goto bad;
		if (*s != '\\') {
			buf[len++] = *s++;
			continue;
		}
		s++;
		if (unescape(&s, buf, &len))
			goto bad;
	}
	buf[len] = '\0';
	*out = buf;
	jp->p = end + 1;
	return 0;
bad:
	free(buf);
	return -EINVAL;
}

/* A number: strtod for its value, and an exact u64 when it is one. */
static int parse_number(struct jparser *jp, struct td_jval *v)
{
	const char *s = jp->p, *digits;
	char *end;

	if (*s == '-')
		s++;
	digits = s;
	if (*s < '0' || *s > '9' || (*s == '0' && s[1] >= '0' && s[1] <= '9'))
		return -EINVAL;
	v->type = TD_JNUMBER;
	v->number = strtod(jp->p, &end);
	/* strtod takes more than JSON does (hex, inf, nan): refuse those. */
	if (end == jp->p || !isfinite(v->number) ||
	    strspn(jp->p, "-+.eE0123456789") < (size_t)(end - jp->p))
		return -EINVAL;
	if (jp->p[0] != '-' &&
	    (size_t)(end - digits) == strspn(digits, "0123456789")) {
		errno = 0;
		v->u64 = strtoull(digits, NULL, 10);
		v->is_u64 = errno == 0;
	}
	jp->p = end;
	return 0;
}

static int parse_literal(struct jparser *jp, struct td_jval *v)
{
	static const struct {
		const char *word;
		enum td_jtype type;
		bool value;
	} words[] = {{"null", TD_JNULL, false},
		     {"true", TD_JBOOL, true},
		     {"false", TD_JBOOL, false}};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t len = strlen(words[i].word);

		if (!strncmp(jp->p, words[i].word, len)) {
			v->type = words[i].type;
			v->boolean = words[i].value;
			jp->p += len;
			return 0;
		}
	}
	return -EINVAL;
}

/* Elements of an array or members of an object, up to close. */
static int parse_elements(struct jparser *jp, struct td_jval *v, char close)
{
	struct td_jval **tail = &v->child;
	int err;

	jp->p++;
	skip_ws(jp);
	if (*jp->p == close) {
		jp->p++;
		return 0;
	}
	for (;;) {
		struct td_jval *e = calloc(1, sizeof(*e));

		if (!e)
			return -ENOMEM;
		*tail = e;
		tail = &e->next;
		skip_ws(jp);
		if (close == '}') {
			if (*jp->p != '"')
				return -EINVAL;
			if ((err = parse_string(jp, &e->key)))
				return err;
			skip_ws(jp);
			if (*jp->p++ != ':')
				return -EINVAL;
		}
		if ((err = parse_value(jp, e)))
			return err;
		skip_ws(jp);
		if (*jp->p == close) {
			jp->p++;
			return 0;
		}
		if (*jp->p++ != ',')
			return -EINVAL;
	}
}

static int parse_value(struct jparser *jp, struct td_jval *v)
{
	int err;

	skip_ws(jp);
	switch (*jp->p) {
	case '{':
	case '[':
		if (++jp->depth > TD_JSON_READ_MAX_DEPTH)
			return -EINVAL;
		v->type = *jp->p == '{' ? TD_JOBJECT : TD_JARRAY;
		err = parse_elements(jp, v, *jp->p == '{' ? '}' : ']');
		jp->depth--;
		return err;
	case '"':
		v->type = TD_JSTRING;
		return parse_string(jp, &v->string);
	case 'n':
	case 't':
	case 'f':
		return parse_literal(jp, v);
	default:
		return parse_number(jp, v);
	}
}

void td_jval_free(struct td_jval *v)
{
	while (v) {
		struct td_jval *next = v->next;

		td_jval_free(v->child);
		free(v->string);
		free(v->key);
		free(v);
		v = next;
	}
}

int td_json_parse(const char *text, struct td_jval **out)
{
	struct jparser jp = {text, 0};
	struct td_jval *v = calloc(1, sizeof(*v));
	int err;

	if (!v)
		return -ENOMEM;
	err = parse_value(&jp, v);
	skip_ws(&jp);
	if (!err && *jp.p)
		err = -EINVAL; /* text after the value */
	if (err) {
		td_jval_free(v);
		return err;
	}
	*out = v;
	return 0;
}

const struct td_jval *td_jval_get(const struct td_jval *obj, const char *key)
{
	if (!obj || obj->type != TD_JOBJECT)
		return NULL;
	for (const struct td_jval *m = obj->child; m; m = m->next)
		if (!strcmp(m->key, key))
			return m;
	return NULL;
}

/* Member key of obj of type t: 0, -ENOENT or -EINVAL. */
static int get_typed(const struct td_jval *obj, const char *key,
		     enum td_jtype t, const struct td_jval **out)
{
	const struct td_jval *m = td_jval_get(obj, key);

	if (!m || m->type == TD_JNULL)
		return -ENOENT;
	if (m->type != t)
		return -EINVAL;
	*out = m;
	return 0;
}

int td_jval_get_u64(const struct td_jval *obj, const char *key, uint64_t *out)
{
	const struct td_jval *m;
	int err = get_typed(obj, key, TD_JNUMBER, &m);

	if (err)
		return err;
	if (!m->is_u64)
		return -EINVAL;
	*out = m->u64;
	return 0;
}

int td_jval_get_i64(const struct td_jval *obj, const char *key, int64_t *out)
{
	/* doubles hold every integer up to 2^53 exactly */
	const double exact = 9007199254740992.0;
	const struct td_jval *m;
	int err = get_typed(obj, key, TD_JNUMBER, &m);

	if (err)
		return err;
	if (m->is_u64 && m->u64 <= INT64_MAX) {
		*out = (int64_t)m->u64;
		return 0;
	}
	if (m->is_u64 || m->number > exact || m->number < -exact ||
	    (double)(int64_t)m->number != m->number)
		return -EINVAL;
	*out = (int64_t)m->number;
	return 0;
}

int td_jval_get_str(const struct td_jval *obj, const char *key,
		    const char **out)
{
	const struct td_jval *m;
	int err = get_typed(obj, key, TD_JSTRING, &m);

	if (!err)
		*out = m->string;
	return err;
}

int td_jval_get_bool(const struct td_jval *obj, const char *key, bool *out)
{
	const struct td_jval *m;
	int err = get_typed(obj, key, TD_JBOOL, &m);

	if (!err)
		*out = m->boolean;
	return err;
}
