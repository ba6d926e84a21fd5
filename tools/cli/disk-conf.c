/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * disk-conf.c - the disk registry's files (disk-conf.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/cli/disk-conf.h"

#ifndef TAPSTRIPE_CONFDIR
#define TAPSTRIPE_CONFDIR "/etc/tapstripe"
#endif

#define NAME_MAX_LEN 63
#define NAME_CHARS \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
#define BLANKS " \t\r"

static int fail(char *err, size_t errlen, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int line, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (line > 0)
		n = snprintf(err, errlen, "line %d: ", line);
	if (n < 0 || (size_t)n >= errlen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

const char *td_disk_conf_dir(const char *override)
{
	const char *env = getenv(TD_DISK_CONF_DIR_ENV);

	if (override && *override)
		return override;
	if (env && *env)
		return env;
	return TAPSTRIPE_CONFDIR "/disks";
}

int td_disk_conf_name_ok(const char *name)
{
	size_t len = strlen(name);

	return len && len <= NAME_MAX_LEN && name[0] != '.' &&
	       name[strspn(name, NAME_CHARS)] == '\0';
}

/*
 * Take one word at *p (blanks before it skipped), unquoting "..." and
 * '...' parts in place (a backslash in "..." keeps the next character);
 * the word ends NUL-terminated where it began.  Returns the word, NULL at
 * the end of s, or (char *)-1 for an unclosed quote.
 */
static char *next_word(char **p)
{
	char *s = *p + strspn(*p, BLANKS), *w = s, *out = s;
	char q = 0;

	if (!*s)
		return NULL;
	for (; *s && (q || !strchr(BLANKS, *s)); s++) {
		if (!q && (*s == '"' || *s == '\'')) {
			q = *s;
		} else if (q && *s == q) {
			q = 0;
		} else {
			if (q == '"' && *s == '\\' && s[1])
				s++;
			*out++ = *s;
		}
	}
	if (q)
		return (char *)-1;
	*p = *s ? s + 1 : s;
	*out = '\0';
	return w;
}

/* VALUE of one line, in place: one quoted string or the rest, trimmed. */
static int line_value(char *v, char **out)
{
	char *w, *end;

	v += strspn(v, BLANKS);
	end = v + strlen(v);
	while (end > v && strchr(BLANKS, end[-1]))
		*--end = '\0';
	if (*v != '"' && *v != '\'') {
		*out = v;
		return 0;
	}
	w = v;
	if ((w = next_word(&w)) == (char *)-1 || !w)
		return -EINVAL;
	*out = w;
	return 0;
}

static int split_options(struct td_disk_conf *c, char *v, int line, char *err,
			 size_t errlen)
{
	char *w;

	while ((w = next_word(&v))) {
		if (w == (char *)-1)
			return fail(err, errlen, line,
				    "OPTIONS has an unclosed quote");
		if (c->nr_words == TD_DISK_CONF_MAX_WORDS)
			return fail(err, errlen, line,
				    "OPTIONS has more than %d words",
				    TD_DISK_CONF_MAX_WORDS);
		c->words[c->nr_words++] = w;
	}
	return 0;
}

static int parse_line(struct td_disk_conf *c, char *s, int line, char *err,
		      size_t errlen)
{
	char *eq, *end, *v;

	s += strspn(s, BLANKS);
	if (!*s || *s == '#' || *s == ';')
		return 0;
	if (!(eq = strchr(s, '=')))
		return fail(err, errlen, line, "not KEY=VALUE: '%.40s'", s);
	*eq = '\0';
	for (end = eq; end > s && strchr(BLANKS, end[-1]);)
		*--end = '\0';
	if (line_value(eq + 1, &v))
		return fail(err, errlen, line, "%s has an unclosed quote", s);
	if (!strcmp(s, "CHAIN")) {
		if (c->chain)
			return fail(err, errlen, line, "a second CHAIN");
		if (!*v)
			return fail(err, errlen, line, "CHAIN is empty");
		c->chain = v;
		return 0;
	}
	if (!strcmp(s, "OPTIONS"))
		return split_options(c, v, line, err, errlen);
	return fail(err, errlen, line,
		    "unknown key '%.40s' (the keys are CHAIN and OPTIONS)", s);
}

int td_disk_conf_parse(const char *text, struct td_disk_conf *c, char *err,
		       size_t errlen)
{
	char *s, *nl;
	int line = 1, rc;

	memset(c, 0, sizeof(*c));
	if (!(c->text = strdup(text)))
		return -ENOMEM;
	for (s = c->text; s; s = nl, line++) {
		if ((nl = strchr(s, '\n')))
			*nl++ = '\0';
		if ((rc = parse_line(c, s, line, err, errlen)))
			goto out;
	}
	rc = c->chain ? 0
		      : fail(err, errlen, 0,
			     "no CHAIN=... line (the disk's driver chain, "
			     "e.g. CHAIN=aio:/srv/disk.img)");
out:
	if (rc)
		td_disk_conf_free(c);
	return rc;
}

int td_disk_conf_load(const char *dir, const char *name, struct td_disk_conf *c,
		      char *err, size_t errlen)
{
	char path[PATH_MAX], buf[TD_DISK_CONF_MAX + 1], msg[256];
	ssize_t n = 0;
	size_t len = 0;
	int fd, rc;

	memset(c, 0, sizeof(*c));
	if (!td_disk_conf_name_ok(name))
		return fail(err, errlen, 0,
			    "'%s' is no disk name: use 1 to %d letters, "
			    "digits, '.', '_' or '-', not '.' first",
			    name, NAME_MAX_LEN);
	if (snprintf(path, sizeof(path), "%s/%s.conf", dir, name) >=
	    (int)sizeof(path))
		return fail(err, errlen, 0, "%s: the path is too long", dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	while (len < sizeof(buf) &&
	       ((n = read(fd, buf + len, sizeof(buf) - len)) > 0 ||
		(n < 0 && errno == EINTR)))
		len += n > 0 ? (size_t)n : 0;
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc) {
		snprintf(err, errlen, "%s: %s", path, strerror(-rc));
		return rc;
	}
	if (len > TD_DISK_CONF_MAX)
		return fail(err, errlen, 0, "%s: larger than %d bytes", path,
			    TD_DISK_CONF_MAX);
	if (memchr(buf, '\0', len))
		return fail(err, errlen, 0, "%s: not a text file", path);
	buf[len] = '\0';
	if ((rc = td_disk_conf_parse(buf, c, msg, sizeof(msg))) == -EINVAL)
		snprintf(err, errlen, "%s: %s", path, msg);
	return rc;
}

void td_disk_conf_free(struct td_disk_conf *c)
{
	free(c->text);
	memset(c, 0, sizeof(*c));
}
