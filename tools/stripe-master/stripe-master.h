/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-master.h - what stripe-master's files share.
 */
#ifndef TAPSTRIPE_STRIPE_MASTER_H
#define TAPSTRIPE_STRIPE_MASTER_H

#include <stdbool.h>
#include <stdint.h>

#include "master/server/server.h"
#include "tools/cli/cli.h"

#define EXIT_USAGE	CLI_EXIT_USAGE
#define DEFAULT_DB_PATH TAPSTRIPE_STATEDIR "/master.db" /* configure */
#define LOG_SUFFIX	".log" /* daemon log without /dev/log: DB_PATH.log */
#define SYSLOG_PATH	"/dev/log"
#define GO_ON		(-1)

struct master_options {
	const char *db_path;
	uint64_t extent_bytes; /* 0: the database's, or the default */
	struct master_server_config server;
	unsigned int max_alloc_extents; /* master_store_set_max_alloc */
	bool foreground;
	bool check;		    /* check the store and exit */
	const char *store_url;	    /* --store etcd://...; NULL: SQLite alone */
	unsigned int compact_every; /* --compact-every: log entries */
	const char *migrate;	    /* --migrate to-etcd|to-sqlite */
	bool force;		    /* --migrate --force */
	bool compact_given;	    /* --compact-every given */
	const char *pid_file;
	const char *log_file;
	bool log_syslog;	   /* --log syslog[:SOCKET] */
	const char *syslog_socket; /* NULL: /dev/log */
	bool log_stderr;	   /* --log stderr */
	int log_level;
};

/* Parse argv into o; GO_ON, or an exit status (help printed, bad usage). */
int stripe_master_parse_options(struct master_options *o, int argc,
				char **argv);

#endif
