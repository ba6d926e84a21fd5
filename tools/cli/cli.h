/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli.h - what the command-line programs share: numbers parsed with their
 * range, usage errors, --version, option tables that give getopt_long its
 * array and --help its text, and one-line explanations of an -errno.
 */
#ifndef TAPSTRIPE_TOOLS_CLI_H
#define TAPSTRIPE_TOOLS_CLI_H

#include <getopt.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Every program's exit status for a bad command line. */
#define CLI_EXIT_USAGE 2

/* getopt values of long-only options start here, above any letter. */
#define CLI_KEY_LONG 256

/*
 * A whole decimal number in [min, max] into *out.  0, -EINVAL when text is
 * not one, -ERANGE when it is out of the range (*out untouched).
 */
int cli_parse_number(const char *text, long long min, long long max,
		     long long *out);

/*
 * "PROG: MESSAGE" and "Try 'PROG --help' for more information." on stderr;
 * returns CLI_EXIT_USAGE.  PROG may name a subcommand ("tap-ctl create").
 */
int cli_usage_error(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int cli_vusage_error(const char *prog, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* "PROG: MESSAGE" on stderr; returns EXIT_FAILURE. */
int cli_vfail(const char *prog, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* --version: "PROG (PACKAGE) VERSION" on stdout; returns EXIT_SUCCESS. */
int cli_version(const char *prog);

/* --- option tables --------------------------------------------------------- */

/*
 * One option, for getopt_long and --help both.  help is the text after the
 * names, its lines separated by '\n'; "{min}", "{max}" and "{default}" in it
 * print those members.  flags are the program's own (what a table's user
 * selects options by).
 */
struct cli_option {
	const char *name; /* the long name, without "--" */
	int key;	  /* getopt's value: a letter, or >= CLI_KEY_LONG */
	const char *arg;  /* the argument as help names it; NULL: none */
	const char *help;
	long long min, max, def;
	unsigned int flags;
};

/* The entry of opts with this getopt key, or NULL. */
const struct cli_option *cli_option_find(const struct cli_option *opts,
					 size_t n, int key);

/*
 * Append to out (room entries, the terminating zero entry included) the
 * getopt_long entries of the options that have every bit of flags, and
 * their letters ("a:r") to shorts (shorts_len bytes, NUL-terminated).
 * 0, or -ENOSPC when out or shorts is too small.
 */
int cli_getopt_table(const struct cli_option *opts, size_t n,
		     unsigned int flags, struct option *out, size_t room,
		     char *shorts, size_t shorts_len);

/*
 * Print the options that have every bit of flags, as the programs' help
 * lays them out: names from column 4, text from column 26 (or on the next
 * line when the names are longer).
 */
void cli_print_options(FILE *out, const struct cli_option *opts, size_t n,
		       unsigned int flags);

/* --- explanations --------------------------------------------------------- */

/* What a failed step was, for the advice that goes with its errno. */
enum cli_topic {
	CLI_PLAIN,	  /* the message says it all: no errno text */
	CLI_ERRNO,	  /* the errno's text, no advice */
	CLI_CHAIN,	  /* opening a driver chain (tapdisk -a) */
	CLI_CHAIN_SYNTAX, /* the chain's text is malformed: the message
			   * says how, no errno text; advice on -a */
	CLI_CTL_SOCKET,	  /* connecting to a tapdisk's control socket */
	CLI_SHM_SOCKET,	  /* connecting to a tapdisk's shm socket */
};

/* What to do about err (< 0) in topic; "" when there is nothing to say. */
const char *cli_advice(int err, enum cli_topic topic);

/*
 * The one-line message for a failed step into buf (nothing when len is 0):
 * "CONTEXT",
 * then ": " and strerror(-err) unless topic is CLI_PLAIN or
 * CLI_CHAIN_SYNTAX, then "; " and cli_advice when it has any.  Returns err, or -EINVAL when err >= 0, so
 * that "return cli_explain(...)" keeps the 0-or-negative contract.
 */
int cli_explain(char *buf, size_t len, int err, enum cli_topic topic,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
