/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapdisk-options.c - tapdisk's command line: the help text and the
 * parsing, with an error that says what to write instead.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "frontends/blkif/blkif.h"
#include "tapdisk/control/control.h"
#include "tapdisk/vbd.h"
#include "tools/tapdisk/tapdisk.h"

#define EXIT_USAGE	   2
#define MAX_INFLIGHT_LIMIT 65536
#define NAME_CHARS \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

static void usage(FILE *out)
{
	/* The text is laid out as printed. */
	/* clang-format off */
	fprintf(out,
"NAME\n"
"    tapdisk - serve one virtual disk (a driver chain) over NBD and shm\n"
"\n"
"SYNOPSIS\n"
"    tapdisk --foreground -a CHAIN [--nbd ADDR]... [--shm PATH]... [OPTIONS]\n"
"    tap-ctl create -a CHAIN ...       (to run it in the background)\n"
"\n"
"DESCRIPTION\n"
"    tapdisk opens the driver chain CHAIN, serves it to NBD clients on\n"
"    every ADDR and to blkif frontends (td-front) on every shm PATH, and\n"
"    answers a control socket, RUN_DIR/tapdisk-PID.sock, through which\n"
"    tap-ctl lists it, reads its statistics, pauses, resumes and\n"
"    destroys it.  It runs until SIGINT or SIGTERM or a destroy\n"
"    request, then finishes the I/O in flight, flushes the disk, closes\n"
"    it and exits.\n"
"\n"
"    Without --foreground, tapdisk expects to be started by tap-ctl\n"
"    create, which runs it in the background with a log file.\n"
"\n"
"OPTIONS\n"
"    -a, --chain CHAIN     the disk: drivers top first, joined by '|',\n"
"                          e.g. aio:/srv/disk.img, null:size=1G,\n"
"                          sort|aio:/srv/disk.img\n"
"    --nbd ADDR            serve NBD on ADDR (repeatable, at most %d):\n"
"                          unix:/path/to.sock, tcp:HOST:PORT, tcp::PORT\n"
"                          (all addresses), or unix for\n"
"                          RUN_DIR/nbd-NAME.sock\n"
"    --shm PATH            serve blkif rings in shared memory on the Unix\n"
"                          socket PATH (repeatable, at most %d; unix for\n"
"                          RUN_DIR/shm-NAME.sock); the protocol is in\n"
"                          doc/shm-protocol.md\n"
"    --max-indirect-segments N\n"
"                          segments a blkif frontend may put in one request\n"
"                          (%d-%zu, default %zu; %d refuses indirect\n"
"                          requests)\n"
"    --xen MODE            serve Xen guests' blkfront: auto (default: when\n"
"                          this is a Xen domain with xenstore), on (fail\n"
"                          without it) or off; devices are attached with\n"
"                          tap-ctl attach\n"
"    --name NAME           the vbd's name in logs, stats and tap-ctl list\n"
"                          (letters, digits, '.', '_', '-'; default\n"
"                          vbd-PID)\n"
"    -r, --read-only       refuse writes\n"
"    --export-name NAME    the NBD export name clients must ask for\n"
"                          (default: any name is accepted)\n"
"    --max-inflight N      requests in flight per driver layer (1-%d,\n"
"                          default %d)\n"
"    --log-level LEVEL     err, warn, info (default) or debug\n"
"    --log-file PATH       append the log to PATH instead of stderr\n"
"    --run-dir DIR         where sockets live (default $%s, else %s)\n"
"    -f, --foreground      run in this terminal until a signal\n"
"    --ready-fd FD         (used by tap-ctl) write \"OK PID\" or\n"
"                          \"ERR MESSAGE\" to FD once started, then close it\n"
"    -h, --help            this text\n"
"    -V, --version         the version\n"
"\n"
"SIGNALS\n"
"    SIGINT, SIGTERM       graceful shutdown, as tap-ctl destroy\n"
"\n"
"FILES\n"
"    RUN_DIR/tapdisk-PID.sock  the control socket (see tapdisk/control.h)\n"
"    RUN_DIR/nbd-NAME.sock     the NBD socket of --nbd unix\n"
"    RUN_DIR/shm-NAME.sock     the shm socket of --shm unix\n"
"\n"
"EXIT STATUS\n"
"    0  stopped cleanly: every acknowledged write was flushed\n"
"    1  could not start, or the final flush failed or timed out\n"
"    2  bad command line\n"
"\n"
"EXAMPLES\n"
"    tapdisk -f -a null:size=1G --nbd unix:/tmp/null.sock\n"
"    tapdisk -f -a aio:/srv/disk.img --nbd tcp::10809 --name disk1\n"
"    tapdisk -f -a null:size=1G --shm /tmp/null.shm\n"
"    td-front --shm /tmp/null.shm --rw read --pattern rand --qd 32\n"
"    nbdinfo 'nbd+unix:///?socket=/tmp/null.sock'\n",
		TAPDISK_MAX_NBD_ADDRS, TAPDISK_MAX_SHM_PATHS,
		BLKIF_NO_INDIRECT, BLKIF_MAX_INDIRECT_SEGMENTS,
		BLKIF_MAX_INDIRECT_SEGMENTS, BLKIF_NO_INDIRECT,
		MAX_INFLIGHT_LIMIT, TD_VBD_DEFAULT_MAX_INFLIGHT,
		TD_CTL_RUN_DIR_ENV, TD_CTL_RUN_DIR_DEFAULT);
	/* clang-format on */
}

static int usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("tapdisk: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'tapdisk --help' for more information.\n", stderr);
	return EXIT_USAGE;
}

/* --- options ------------------------------------------------------------------ */

enum {
	OPT_NBD = 256,
	OPT_NAME,
	OPT_EXPORT_NAME,
	OPT_MAX_INFLIGHT,
	OPT_LOG_LEVEL,
	OPT_LOG_FILE,
	OPT_RUN_DIR,
	OPT_READY_FD,
	OPT_SHM,
	OPT_MAX_INDIRECT,
	OPT_XEN,
};

static const struct option long_options[] = {
	{"chain", required_argument, NULL, 'a'},
	{"nbd", required_argument, NULL, OPT_NBD},
	{"shm", required_argument, NULL, OPT_SHM},
	{"max-indirect-segments", required_argument, NULL, OPT_MAX_INDIRECT},
	{"xen", required_argument, NULL, OPT_XEN},
	{"name", required_argument, NULL, OPT_NAME},
	{"read-only", no_argument, NULL, 'r'},
	{"export-name", required_argument, NULL, OPT_EXPORT_NAME},
	{"max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"log-file", required_argument, NULL, OPT_LOG_FILE},
	{"run-dir", required_argument, NULL, OPT_RUN_DIR},
	{"foreground", no_argument, NULL, 'f'},
	{"ready-fd", required_argument, NULL, OPT_READY_FD},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* What parse_one and tapdisk_parse_options return to let main go on. */
#define GO_ON (-1)

/* A decimal in [min, max]; -1 when it is not one. */
static long parse_number(const char *text, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return -1;
	return v;
}

/* One option; returns GO_ON, or an exit status to stop with. */
static int parse_one(struct options *o, int c, const char *arg)
{
	long v;

	switch (c) {
	case 'a':
		o->chain = arg;
		return GO_ON;
	case OPT_NBD:
		if (o->nr_nbd == TAPDISK_MAX_NBD_ADDRS)
			return usage_error("at most %d --nbd addresses",
					   TAPDISK_MAX_NBD_ADDRS);
		o->nbd[o->nr_nbd++] = arg;
		return GO_ON;
	case OPT_SHM:
		if (o->nr_shm == TAPDISK_MAX_SHM_PATHS)
			return usage_error("at most %d --shm paths",
					   TAPDISK_MAX_SHM_PATHS);
		o->shm[o->nr_shm++] = arg;
		return GO_ON;
	case OPT_MAX_INDIRECT:
		if ((v = parse_number(arg, BLKIF_NO_INDIRECT,
				      BLKIF_MAX_INDIRECT_SEGMENTS)) < 0)
			return usage_error("--max-indirect-segments wants a "
					   "number from %d (no indirect "
					   "requests) to %zu, not '%s'",
					   BLKIF_NO_INDIRECT,
					   BLKIF_MAX_INDIRECT_SEGMENTS, arg);
		o->max_indirect_segments = (uint32_t)v;
		return GO_ON;
	case OPT_XEN:
		if (!strcmp(arg, "auto"))
			o->xen = TAPDISK_XEN_AUTO;
		else if (!strcmp(arg, "on"))
			o->xen = TAPDISK_XEN_ON;
		else if (!strcmp(arg, "off"))
			o->xen = TAPDISK_XEN_OFF;
		else
			return usage_error("--xen wants auto, on or off, not "
					   "'%s'",
					   arg);
		return GO_ON;
	case OPT_NAME:
		o->name = arg;
		return GO_ON;
	case 'r':
		o->read_only = true;
		return GO_ON;
	case OPT_EXPORT_NAME:
		o->export_name = arg;
		return GO_ON;
	case OPT_MAX_INFLIGHT:
		if ((v = parse_number(arg, 1, MAX_INFLIGHT_LIMIT)) < 0)
			return usage_error("--max-inflight wants a number from "
					   "1 to %d, not '%s'",
					   MAX_INFLIGHT_LIMIT, arg);
		o->max_inflight = (uint32_t)v;
		return GO_ON;
	case OPT_LOG_LEVEL:
		if ((o->log_level = td_log_parse_level(arg)) < 0)
			return usage_error("--log-level wants err, warn, info "
					   "or debug, not '%s'",
					   arg);
		return GO_ON;
	case OPT_LOG_FILE:
		o->log_file = arg;
		return GO_ON;
	case OPT_RUN_DIR:
		o->run_dir = arg;
		return GO_ON;
	case 'f':
		o->foreground = true;
		return GO_ON;
	case OPT_READY_FD:
		if ((o->ready_fd = (int)parse_number(arg, 0, INT_MAX)) < 0 ||
		    fcntl(o->ready_fd, F_GETFD) < 0)
			return usage_error(
				"--ready-fd '%s' is not an open file "
				"descriptor",
				arg);
		return GO_ON;
	case 'h':
		usage(stdout);
		return EXIT_SUCCESS;
	case 'V':
		printf("tapdisk (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
		return EXIT_SUCCESS;
	default:
		return usage_error("unknown option");
	}
}

/* Returns GO_ON, or an exit status. */
int tapdisk_parse_options(struct options *o, int argc, char **argv)
{
	int c, status;

	o->log_level = TD_LOG_INFO;
	o->ready_fd = -1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "a:rfhV", long_options, NULL)) !=
	       -1) {
		if (c == '?')
			return usage_error(
				"unknown option or missing argument: "
				"'%s'",
				argv[optind - 1]);
		if ((status = parse_one(o, c, optarg)) != GO_ON)
			return status;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->chain)
		return usage_error("give the disk with -a CHAIN, e.g. "
				   "-a aio:/srv/disk.img or -a null:size=1G");
	if (o->name && (!*o->name || strlen(o->name) >= TD_VBD_NAME_MAX ||
			o->name[strspn(o->name, NAME_CHARS)]))
		return usage_error("--name '%s': use 1 to %d letters, digits, "
				   "'.', '_' or '-'",
				   o->name, TD_VBD_NAME_MAX - 1);
	if (!o->foreground && o->ready_fd < 0)
		return usage_error("to run tapdisk in the background use "
				   "'tap-ctl create -a CHAIN ...'; to run it "
				   "here add --foreground");
	return GO_ON;
}
