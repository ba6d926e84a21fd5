/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli-options.c - the command-line helpers the programs share (cli.h):
 * numbers, usage errors, --version, option tables.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"

#define HELP_INDENT    4  /* where the option names start */
#define HELP_TEXT_COL  26 /* where their text starts */
#define HELP_NAMES_MAX 64

int cli_parse_number(const char *text, long long min, long long max,
		     long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (end == text || *end)
		return -EINVAL;
	if (errno || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int cli_vusage_error(const char *prog, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", prog);
	return CLI_EXIT_USAGE;
}

int cli_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;
	int status;

	va_start(ap, fmt);
	status = cli_vusage_error(prog, fmt, ap);
	va_end(ap);
	return status;
}

int cli_vfail(const char *prog, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	return EXIT_FAILURE;
}

int cli_version(const char *prog)
{
	printf("%s (%s) %s\n", prog, PACKAGE_NAME, PACKAGE_VERSION);
	return EXIT_SUCCESS;
}

/* --- option tables --------------------------------------------------------- */

static int is_letter_key(int key)
{
	return key > 0 && key < CLI_KEY_LONG;
}

const struct cli_option *cli_option_find(const struct cli_option *opts,
					 size_t n, int key)
{
	for (size_t i = 0; i < n; i++)
		if (opts[i].key == key)
			return &opts[i];
	return NULL;
}

int cli_getopt_table(const struct cli_option *opts, size_t n,
		     unsigned int flags, struct option *out, size_t room,
		     char *shorts, size_t shorts_len)
{
	size_t used = 0, len = strlen(shorts);

	while (used < room && out[used].name)
		used++;
	for (size_t i = 0; i < n; i++) {
		const struct cli_option *o = &opts[i];

		if ((o->flags & flags) != flags)
			continue;
		if (used + 1 >= room)
			return -ENOSPC;
		out[used++] = (struct option){
			o->name, o->arg ? required_argument : no_argument, NULL,
			o->key};
		if (!is_letter_key(o->key))
			continue;
		if (len + 3 > shorts_len)
			return -ENOSPC;
		shorts[len++] = (char)o->key;
		if (o->arg)
			shorts[len++] = ':';
		shorts[len] = '\0';
	}
	out[used] = (struct option){NULL, 0, NULL, 0};
	return 0;
}

/* The help text with {min}, {max} and {default} replaced; '\n' indented. */
static void print_help_text(FILE *out, const struct cli_option *o)
{
	static const char *const names[] = {"{min}", "{max}", "{default}"};
	const long long values[] = {o->min, o->max, o->def};

	for (const char *p = o->help; *p; p++) {
		size_t i;

		for (i = 0; i < 3; i++)
			if (!strncmp(p, names[i], strlen(names[i])))
				break;
		if (i < 3) {
			fprintf(out, "%lld", values[i]);
			p += strlen(names[i]) - 1;
		} else if (*p == '\n') {
			fprintf(out, "\n%*s", HELP_TEXT_COL, "");
		} else {
			fputc(*p, out);
		}
	}
	fputc('\n', out);
}

void cli_print_options(FILE *out, const struct cli_option *opts, size_t n,
		       unsigned int flags)
{
	for (size_t i = 0; i < n; i++) {
		const struct cli_option *o = &opts[i];
		char names[HELP_NAMES_MAX];
		int len;

		if ((o->flags & flags) != flags)
			continue;
		if (is_letter_key(o->key))
			len = snprintf(names, sizeof(names), "-%c, --%s%s%s",
				       o->key, o->name, o->arg ? " " : "",
				       o->arg ? o->arg : "");
		else
			len = snprintf(names, sizeof(names), "--%s%s%s",
				       o->name, o->arg ? " " : "",
				       o->arg ? o->arg : "");
		fprintf(out, "%*s%s", HELP_INDENT, "", names);
		if (HELP_INDENT + len + 2 > HELP_TEXT_COL)
			fprintf(out, "\n%*s", HELP_TEXT_COL, "");
		else
			fprintf(out, "%*s", HELP_TEXT_COL - HELP_INDENT - len,
				"");
		print_help_text(out, o);
	}
}
