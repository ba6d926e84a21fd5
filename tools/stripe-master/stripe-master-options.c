/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-master-options.c - stripe-master's command line: the help text and
 * the parsing, with errors that say what to write instead.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "master/addr.h"
#include "master/server/store.h"
#include "tapdisk/driver.h"
#include "tools/cli/cli.h"
#include "tools/stripe-master/stripe-master.h"

#define MAX_IDLE_S	    86400
#define MAX_COMPACT_EVERY   100000000
#define MAX_CONNECTIONS	    65536
#define DEFAULT_LISTEN_TEXT "127.0.0.1:7700"

static void usage(FILE *out)
{
	/* The text is laid out as printed. */
	/* clang-format off */
	fprintf(out,
"NAME\n"
"    stripe-master - allocate the extents of striped virtual disks\n"
"\n"
"SYNOPSIS\n"
"    stripe-master [--foreground] [--listen HOST[:PORT]] [--db PATH]\n"
"                  [--extent-size SIZE] [--allow NETWORK]... [OPTIONS]\n"
"    stripe-master --check [--db PATH] [--store URL]\n"
"    stripe-master --migrate to-etcd|to-sqlite --db PATH --store URL\n"
"                  [--force]\n"
"\n"
"DESCRIPTION\n"
"    stripe-master keeps the pool of storage servers (iSCSI LUNs cut into\n"
"    extents of one size) and hands out extents to striped virtual disks,\n"
"    placing each column and each replica on distinct servers; the\n"
"    replicas of an extent on distinct hosts, and over distinct sites,\n"
"    else racks, as far as the servers' labels and free extents allow\n"
"    (stripe-ctl server add|label --host --rack --site).  Clients\n"
"    (stripe-ctl) talk Sun RPC over TCP to a fixed port; rpcbind is not\n"
"    used.  Every change is committed to an SQLite database (WAL,\n"
"    synchronous=FULL) before it is answered, and every call may be\n"
"    repeated safely.\n"
"\n"
"    Anyone who can reach the port may read (list servers, disks,\n"
"    extents); only clients inside an --allow network may change anything,\n"
"    or read a server's CHAP secret (which the master never logs).\n"
"    Without --foreground it detaches and logs to syslog (ident\n"
"    stripe-master; journald reads /dev/log too) when /dev/log is\n"
"    there, else to the database path + \"%s\"; --log or --log-file\n"
"    choose.  Syslog lines never make the master wait: a stalled\n"
"    reader costs dropped lines, counted in the last line at exit.\n"
"\n"
"    Under systemd (stripe-master.service, Type=notify) stripe-master\n"
"    --foreground tells the service manager READY=1 once the database is\n"
"    open and the port listens, and STOPPING=1 when a signal ends it;\n"
"    the service reads its options from /etc/default/stripe-master.\n"
"\n"
"OPTIONS\n"
"    -l, --listen HOST[:PORT]  where to listen (default %s; [::1]:PORT\n"
"                              for IPv6; 0.0.0.0 for every address)\n"
"    -d, --db PATH             the database (default %s); created,\n"
"                              with its directory, when absent\n"
"    -E, --extent-size SIZE    extent size of a new database: a multiple of\n"
"                              1M up to 1T, K/M/G/T suffixes (default 256M);\n"
"                              an existing database keeps its own\n"
"    -a, --allow NETWORK       let clients in NETWORK (ADDR[/BITS], IPv4\n"
"                              or IPv6) change the master and read CHAP\n"
"                              secrets; repeatable; the default is\n"
"                              loopback (127.0.0.0/8, ::1)\n"
"    --idle-timeout SEC        close connections idle that long (default\n"
"                              %d; 0 never)\n"
"    --max-connections N       connections served at once (default %d);\n"
"                              more wait in the listen queue\n"
"    --max-alloc-extents N     extents one new disk may take (columns x\n"
"                              extents per column x replicas; default %u,\n"
"                              at most %d); the master answers nobody\n"
"                              else while it allocates, ~4 us per extent\n"
"    -f, --foreground          run in this terminal, log to stderr (or\n"
"                              --log, --log-file)\n"
"    --pid-file PATH           write the pid there (removed at exit)\n"
"    --log-file PATH           append the log there, e.g. under\n"
"                              /var/log (as --log file:PATH)\n"
"    --log TARGET              syslog (/dev/log), syslog:SOCKET,\n"
"                              file:PATH or stderr (--foreground only)\n"
"    --log-level LEVEL         err, warn, info (default) or debug\n"
"    --check                   check the database's consistency (owners,\n"
"                              counts, labels, replicas on distinct\n"
"                              hosts; moves: each new extent owned by\n"
"                              its move alone, each old one still its\n"
"                              slot's replica, no move of a disk that\n"
"                              does not exist) and exit\n"
"    --store URL               keep the state in etcd, the --db file being\n"
"                              this master's replica of it:\n"
"                              etcd://HOST:PORT[,HOST:PORT...]/CLUSTER\n"
"                              (etcd's client URLs, the cluster's name);\n"
"                              several masters may serve one CLUSTER,\n"
"                              each with a --db of its own; the default\n"
"                              is the SQLite file alone.  With --check:\n"
"                              catch the file up with the store first\n"
"    --compact-every N         with --store: after every N log entries,\n"
"                              write a snapshot of the state into etcd and\n"
"                              delete the log entries it holds (default\n"
"                              %u; 0: never)\n"
"    --migrate to-etcd         move the SQLite store --db into etcd, as a\n"
"                              new --store CLUSTER (refused when it holds\n"
"                              state already), and exit; the file is left\n"
"                              as it was\n"
"    --migrate to-sqlite       copy the state of the --store CLUSTER into a\n"
"                              new SQLite file --db (refused when it\n"
"                              exists), and exit.  Both check the store on\n"
"                              both sides (as --check) and may be run\n"
"                              again after an interruption; no master may\n"
"                              serve --db meanwhile\n"
"    --force                   with --migrate: replace the state the target\n"
"                              holds (it is lost; stop its masters first)\n"
"    -h, --help                this text\n"
"    -V, --version             the version\n"
"\n"
"ENVIRONMENT\n"
"    NOTIFY_SOCKET             where systemd hears READY=1 and STOPPING=1\n"
"                              (with --foreground; set by systemd)\n"
"\n"
"SIGNALS\n"
"    SIGINT, SIGTERM           finish the calls in hand, commit, exit 0\n"
"    SIGHUP                    open the log file again (logrotate);\n"
"                              ignored when there is none\n"
"\n"
"EXIT STATUS\n"
"    0  stopped cleanly (or --check found the database consistent)\n"
"    1  could not start, or a fatal error (or --check found a problem)\n"
"    2  bad command line\n"
"\n"
"EXAMPLES\n"
"    stripe-master -f --db /tmp/master.db --extent-size 64M\n"
"    stripe-master --listen 0.0.0.0 --allow 10.77.0.0/16 \\\n"
"        --pid-file /run/stripe-master.pid\n"
"    stripe-ctl --master 127.0.0.1 server list\n"
"    stripe-master --db /var/lib/tapstripe/master.db \\\n"
"        --store etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/prod\n"
"    stripe-master --migrate to-etcd --db /var/lib/tapstripe/master.db \\\n"
"        --store etcd://10.0.0.1:2379/prod\n",
		LOG_SUFFIX, DEFAULT_LISTEN_TEXT, DEFAULT_DB_PATH, MASTER_DEFAULT_IDLE_S,
		MASTER_DEFAULT_MAX_CONNECTIONS, MASTER_DEFAULT_MAX_ALLOC_EXTENTS,
		MS_MAX_SLOTS, MASTER_DEFAULT_COMPACT_EVERY);
	/* clang-format on */
}

#define usage_error(...) cli_usage_error("stripe-master", __VA_ARGS__)

/* --log TARGET: syslog[:SOCKET], file:PATH, stderr. */
static int take_log(struct master_options *o, const char *arg)
{
	if (!strcmp(arg, "syslog") || (!strncmp(arg, "syslog:", 7) && arg[7])) {
		o->log_syslog = true;
		o->syslog_socket = arg[6] ? arg + 7 : NULL;
	} else if (!strncmp(arg, "file:", 5) && arg[5]) {
		o->log_file = arg + 5;
	} else if (!strcmp(arg, "stderr")) {
		o->log_stderr = true;
	} else {
		return usage_error("--log wants syslog, syslog:SOCKET, "
				   "file:PATH or stderr, not '%s'",
				   arg);
	}
	return GO_ON;
}

enum {
	OPT_IDLE = 256,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_ALLOC,
	OPT_PID_FILE,
	OPT_LOG_FILE,
	OPT_LOG,
	OPT_LOG_LEVEL,
	OPT_CHECK,
	OPT_STORE,
	OPT_COMPACT_EVERY,
	OPT_MIGRATE,
	OPT_FORCE,
};

static const struct option long_options[] = {
	{"listen", required_argument, NULL, 'l'},
	{"db", required_argument, NULL, 'd'},
	{"extent-size", required_argument, NULL, 'E'},
	{"allow", required_argument, NULL, 'a'},
	{"idle-timeout", required_argument, NULL, OPT_IDLE},
	{"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
	{"max-alloc-extents", required_argument, NULL, OPT_MAX_ALLOC},
	{"foreground", no_argument, NULL, 'f'},
	{"pid-file", required_argument, NULL, OPT_PID_FILE},
	{"log-file", required_argument, NULL, OPT_LOG_FILE},
	{"log", required_argument, NULL, OPT_LOG},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"check", no_argument, NULL, OPT_CHECK},
	{"store", required_argument, NULL, OPT_STORE},
	{"compact-every", required_argument, NULL, OPT_COMPACT_EVERY},
	{"migrate", required_argument, NULL, OPT_MIGRATE},
	{"force", no_argument, NULL, OPT_FORCE},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* A decimal in [min, max]; -1 when it is not one. */
static long parse_number(const char *text, long min, long max)
{
	long long v;

	return cli_parse_number(text, min, max, &v) ? -1 : (long)v;
}

static int take_extent_size(struct master_options *o, const char *arg)
{
	if (td_parse_size(arg, &o->extent_bytes) || !o->extent_bytes ||
	    o->extent_bytes % MASTER_MIN_EXTENT_BYTES ||
	    o->extent_bytes > MASTER_MAX_EXTENT_BYTES)
		return usage_error("--extent-size wants a multiple of 1M up to "
				   "1T, like 256M, not '%s'",
				   arg);
	return GO_ON;
}

static int take_allow(struct master_options *o, bool *allow_given,
		      const char *arg)
{
	int err;

	if (!*allow_given)
		master_netacl_init(&o->server.acl);
	*allow_given = true;
	err = master_netacl_add(&o->server.acl, arg);
	if (err == -ENOSPC)
		return usage_error("at most %d --allow networks",
				   MASTER_NETACL_MAX);
	if (err)
		return usage_error("--allow wants ADDR or ADDR/BITS with no "
				   "host bits set (10.0.0.0/8, ::1), not '%s'",
				   arg);
	return GO_ON;
}

static int take_number(const char *opt, const char *arg, long max,
		       unsigned int *out)
{
	long v = parse_number(arg, 0, max);

	if (v < 0)
		return usage_error("%s wants a number from 0 to %ld, not '%s'",
				   opt, max, arg);
	*out = (unsigned int)v;
	return GO_ON;
}

static int parse_one(struct master_options *o, bool *allow_given, int c,
		     const char *arg)
{
	long v;

	switch (c) {
	case 'l':
		o->server.listen = arg;
		return GO_ON;
	case 'd':
		o->db_path = arg;
		return GO_ON;
	case 'E':
		return take_extent_size(o, arg);
	case 'a':
		return take_allow(o, allow_given, arg);
	case OPT_IDLE:
		return take_number("--idle-timeout", arg, MAX_IDLE_S,
				   &o->server.idle_timeout_s);
	case OPT_MAX_CONNECTIONS:
		return take_number("--max-connections", arg, MAX_CONNECTIONS,
				   &o->server.max_connections);
	case OPT_MAX_ALLOC:
		if ((v = parse_number(arg, 1, MS_MAX_SLOTS)) < 0)
			return usage_error("--max-alloc-extents wants a number "
					   "from 1 to %d, not '%s'",
					   MS_MAX_SLOTS, arg);
		o->max_alloc_extents = (unsigned int)v;
		return GO_ON;
	case 'f':
		o->foreground = true;
		return GO_ON;
	case OPT_PID_FILE:
		o->pid_file = arg;
		return GO_ON;
	case OPT_LOG_FILE:
		o->log_file = arg;
		return GO_ON;
	case OPT_LOG:
		return take_log(o, arg);
	case OPT_LOG_LEVEL:
		if ((o->log_level = td_log_parse_level(arg)) < 0)
			return usage_error("--log-level wants err, warn, info "
					   "or debug, not '%s'",
					   arg);
		return GO_ON;
	case OPT_CHECK:
		o->check = true;
		return GO_ON;
	case OPT_STORE:
		if (strncmp(arg, "etcd://", strlen("etcd://")))
			return usage_error("--store wants etcd://HOST:PORT[,"
					   "HOST:PORT...]/CLUSTER, not '%s'",
					   arg);
		o->store_url = arg;
		return GO_ON;
	case OPT_COMPACT_EVERY:
		o->compact_given = true;
		return take_number("--compact-every", arg, MAX_COMPACT_EVERY,
				   &o->compact_every);
	case OPT_MIGRATE:
		if (strcmp(arg, "to-etcd") && strcmp(arg, "to-sqlite"))
			return usage_error("--migrate wants to-etcd or "
					   "to-sqlite, not '%s'",
					   arg);
		o->migrate = arg;
		return GO_ON;
	case OPT_FORCE:
		o->force = true;
		return GO_ON;
	case 'h':
		usage(stdout);
		return EXIT_SUCCESS;
	case 'V':
		return cli_version("stripe-master");
	default:
		return usage_error("unknown option");
	}
}

int stripe_master_parse_options(struct master_options *o, int argc, char **argv)
{
	char host[MASTER_HOST_MAX], port[MASTER_PORT_MAX];
	bool allow_given = false;
	int c, status;

	memset(o, 0, sizeof(*o));
	o->db_path = DEFAULT_DB_PATH;
	o->log_level = TD_LOG_INFO;
	o->server.listen = MASTER_DEFAULT_LISTEN;
	o->server.idle_timeout_s = MASTER_DEFAULT_IDLE_S;
	o->server.max_connections = MASTER_DEFAULT_MAX_CONNECTIONS;
	o->max_alloc_extents = MASTER_DEFAULT_MAX_ALLOC_EXTENTS;
	o->compact_every = MASTER_DEFAULT_COMPACT_EVERY;
	master_netacl_loopback(&o->server.acl);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "l:d:E:a:fhV", long_options,
				NULL)) != -1) {
		if (c == '?')
			return usage_error("unknown option or missing "
					   "argument: '%s'",
					   argv[optind - 1]);
		if ((status = parse_one(o, &allow_given, c, optarg)) != GO_ON)
			return status;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (master_split_hostport(o->server.listen, MS_DEFAULT_PORT, 1, host,
				  port))
		return usage_error("--listen wants HOST[:PORT] (like "
				   "127.0.0.1:7700 or [::1]:7700), not '%s'",
				   o->server.listen);
	if (!o->server.max_connections)
		return usage_error("--max-connections must be at least 1");
	if (!*o->db_path)
		return usage_error("--db wants a path");
	if (o->migrate && !o->store_url)
		return usage_error("--migrate wants --store etcd://HOST:PORT/"
				   "CLUSTER (and --db)");
	if (o->force && !o->migrate)
		return usage_error("--force goes with --migrate only");
	if (o->compact_given && !o->store_url)
		return usage_error("--compact-every goes with --store only");
	return GO_ON;
}
