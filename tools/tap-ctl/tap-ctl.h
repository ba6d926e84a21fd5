/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl.h - what tap-ctl's files share.
 */
#ifndef TAPSTRIPE_TAP_CTL_H
#define TAPSTRIPE_TAP_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "tapdisk/control/ctl-client.h" /* td_ctl_process_gone & co. */
#include "tools/cli/cli.h"

#define EXIT_USAGE CLI_EXIT_USAGE
/* tapdisk options create passes on: one each, the repeatable ones up to
 * their max (a unit test checks the table fits). */
#define TAPCTL_MAX_TAPDISK_ARGS 64

/* One tapdisk option given to create: an entry of tapdisk_options. */
struct tapctl_tapdisk_arg {
	const struct cli_option *opt;
	const char *value; /* NULL when the option takes none */
};

/* The command line of one subcommand. */
struct cmd_opts {
	const char *run_dir;
	int id;
	bool json;
	bool all;	    /* stats --all */
	const char *output; /* metrics --output FILE */
	int timeout_s;
	/* create: tapdisk's options to pass on, one slot per option except
	 * the repeatable ones (tap-ctl-create.c) */
	const char *chain;
	const char *disk; /* --disk NAME (create) */
	struct tapctl_tapdisk_arg tapdisk_args[TAPCTL_MAX_TAPDISK_ARGS];
	int nr_tapdisk_args;
	/* attach, detach, release */
	const char *domid;
	const char *vdev;
	const char *mode;
	/* driver: the words after the options */
	char **args;
	int nr_args;
};

/*
 * Xen's block-tap script calls blktap's tap-ctl (tap-ctl-blktap.c): true
 * when argv (argv[0] the command) is such a call; tapctl_blktap_refuse
 * prints the clash and what to use instead to err and returns EXIT_USAGE.
 */
bool tapctl_blktap_call(int argc, char **argv);
int tapctl_blktap_refuse(int argc, char **argv, FILE *err);

/* Print "tap-ctl: MESSAGE" on stderr; returns EXIT_FAILURE. */
int tapctl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The control socket of tapdisk id, in o->run_dir. */
void tapctl_socket_path(const struct cmd_opts *o, int id, char *buf,
			size_t len);

/*
 * Send line to tapdisk id and read the reply; prints why not.  0 or an
 * exit status (an ERR reply is a failure, printed).
 */
struct td_ctl_reply;
int tapctl_request(const struct cmd_opts *o, int id, const char *line,
		   struct td_ctl_reply *r);

/*
 * Take one of tapdisk's options for create (opt from tapdisk_options with
 * TAPDISK_OPT_CREATE).  0, or -E2BIG when a repeatable one is given more
 * than opt->max times.
 */
int tapctl_create_option(struct cmd_opts *o, const struct cli_option *opt,
			 const char *value);

/*
 * Send line to every tapdisk of the run directory and call fn with each
 * answer (sockets of dead tapdisks are removed and skipped); one that
 * does not answer is printed.  EXIT_SUCCESS, or EXIT_FAILURE when one
 * failed.
 */
int tapctl_each_tapdisk(const struct cmd_opts *o, const char *line,
			void (*fn)(void *opaque, int pid, const char *payload),
			void *opaque);

/* The subcommands in files of their own; each returns the exit status. */
int tapctl_cmd_create(struct cmd_opts *o);
int tapctl_cmd_list(struct cmd_opts *o);
int tapctl_cmd_stats_all(struct cmd_opts *o);
int tapctl_cmd_metrics(struct cmd_opts *o);
int tapctl_cmd_attach(struct cmd_opts *o);
int tapctl_cmd_detach(struct cmd_opts *o);
int tapctl_cmd_release(struct cmd_opts *o);

#endif
