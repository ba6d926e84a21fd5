/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl.h - what tap-ctl's files share.
 */
#ifndef TAPSTRIPE_TAP_CTL_H
#define TAPSTRIPE_TAP_CTL_H

#include <stdbool.h>
#include <stddef.h>

#include "tapdisk/control/ctl-client.h" /* tdctl_process_gone & co. */

#define EXIT_USAGE	     2
#define TAPCTL_MAX_NBD_ADDRS 4
#define TAPCTL_MAX_SHM_PATHS 4

/* The command line of one subcommand. */
struct cmd_opts {
	const char *run_dir;
	int id;
	bool json;
	int timeout_s;
	/* create */
	const char *chain;
	const char *nbd[TAPCTL_MAX_NBD_ADDRS];
	int nr_nbd;
	const char *shm[TAPCTL_MAX_SHM_PATHS];
	int nr_shm;
	const char *max_indirect_segments;
	const char *name;
	const char *export_name;
	const char *max_inflight;
	const char *log_level;
	bool read_only;
	/* attach, detach, release */
	const char *domid;
	const char *vdev;
	const char *mode;
	/* driver: the words after the options */
	char **args;
	int nr_args;
};

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

/* The subcommands in files of their own; each returns the exit status. */
int tapctl_cmd_create(struct cmd_opts *o);
int tapctl_cmd_list(struct cmd_opts *o);
int tapctl_cmd_attach(struct cmd_opts *o);
int tapctl_cmd_detach(struct cmd_opts *o);
int tapctl_cmd_release(struct cmd_opts *o);

#endif
