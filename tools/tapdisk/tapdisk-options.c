/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapdisk-options.c - tapdisk's command line: the help text and the
 * parsing, with an error that says what to write instead.  The options
 * themselves are in tapdisk-option-table.c.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "tapdisk/vbd.h"
#include "tools/cli/cli.h"
#include "tools/cli/disk-conf.h"
#include "tools/tapdisk/tapdisk-options.h"
#include "tools/tapdisk/tapdisk.h"

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
"    tapdisk --foreground --disk NAME [OPTIONS]\n"
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
"    create, which runs it in the background, logging to syslog when\n"
"    /dev/log is there, else to RUN_DIR/tapdisk-PID.log (removed when\n"
"    it ends cleanly).\n"
"\n"
"    --disk NAME serves the disk NAME of the disk registry, as\n"
"    tapdisk@NAME.service does: the file DISK_DIR/NAME.conf holds lines\n"
"    CHAIN=the chain and OPTIONS=more options (words, quotes kept\n"
"    together), e.g.\n"
"        CHAIN=sort|stripe:/var/lib/tapstripe/web1.map\n"
"        OPTIONS=--nbd unix --max-inflight 256\n"
"\n"
"    Under systemd (tapdisk@NAME.service, Type=notify) tapdisk\n"
"    --foreground tells the service manager READY=1 once the disk is open\n"
"    and every frontend and the control socket listen, and STOPPING=1\n"
"    when its shutdown begins.\n"
"\n"
"OPTIONS\n");
	cli_print_options(out, tapdisk_options, tapdisk_nr_options, 0);
	fputs(
"\n"
"SIGNALS\n"
"    SIGINT, SIGTERM       graceful shutdown, as tap-ctl destroy; while\n"
"                          the chain opens, they end tapdisk at once\n"
"                          (exit by the signal: an open that hangs,\n"
"                          on a dead NFS server, is not waited for)\n"
"    SIGHUP                open the --log-file again (after logrotate\n"
"                          moved it); with no log file, only logged\n"
"\n"
"FILES\n"
"    RUN_DIR/tapdisk-PID.sock  the control socket (see tapdisk/control.h)\n"
"    RUN_DIR/nbd-NAME.sock     the NBD socket of --nbd unix\n"
"    RUN_DIR/shm-NAME.sock     the shm socket of --shm unix\n"
"    DISK_DIR/NAME.conf        the disk NAME's registry entry (--disk)\n"
"\n"
"ENVIRONMENT\n"
"    NOTIFY_SOCKET             where systemd hears READY=1 and STOPPING=1\n"
"                              (with --foreground; set by systemd)\n"
"    TAPSTRIPE_DISKDIR         DISK_DIR, unless --disk-dir gives it\n"
"\n"
"EXIT STATUS\n"
"    0  stopped cleanly: every acknowledged write was flushed\n"
"    1  could not start, or the final flush failed or timed out\n"
"    2  bad command line\n"
"\n"
"EXAMPLES\n"
"    tapdisk -f -a null:size=1G --nbd unix:/tmp/null.sock\n"
"    tapdisk -f -a aio:/srv/disk.img --nbd tcp::10809 --name disk1\n"
"    psktool -u alice -p /etc/tapstripe/keys.psk\n"
"    tapdisk -f -a aio:/srv/disk.img --nbd tcp::10809 \\\n"
"        --nbd-tls-psk /etc/tapstripe/keys.psk --nbd-allow 10.0.0.0/8\n"
"    nbdinfo 'nbds://alice@HOST/?tls-psk-file=/etc/tapstripe/keys.psk'\n"
"    tapdisk -f -a null:size=1G --shm /tmp/null.shm\n"
"    td-front --shm /tmp/null.shm --rw read --pattern rand --qd 32\n"
"    nbdinfo 'nbd+unix:///?socket=/tmp/null.sock'\n",
	      out);
	/* clang-format on */
}

#define usage_error(...) cli_usage_error("tapdisk", __VA_ARGS__)

/* --- options ------------------------------------------------------------------ */

/* What parse_one and tapdisk_parse_options return to let main go on. */
#define GO_ON (-1)

/* A number within the option's range from the table; -1 when not. */
static long long number_in_range(const struct cli_option *opt, const char *arg)
{
	long long v;

	return cli_parse_number(arg, opt->min, opt->max, &v) ? -1 : v;
}

static int parse_xen(struct options *o, const char *arg)
{
	if (!strcmp(arg, "auto"))
		o->xen = TAPDISK_XEN_AUTO;
	else if (!strcmp(arg, "on"))
		o->xen = TAPDISK_XEN_ON;
	else if (!strcmp(arg, "off"))
		o->xen = TAPDISK_XEN_OFF;
	else
		return usage_error("--xen wants auto, on or off, not '%s'",
				   arg);
	return GO_ON;
}

/* --nbd-tls, --nbd-tls-psk, --nbd-tls-x509, --nbd-allow */
static int parse_access(struct options *o, const struct cli_option *opt,
			const char *arg)
{
	struct td_nbd_access *a = &o->nbd_access;

	switch (opt->key) {
	case TAPDISK_KEY_NBD_TLS:
		if (td_nbd_tls_parse_mode(arg, &a->tls))
			return usage_error("--nbd-tls wants off, on or "
					   "require, not '%s'",
					   arg);
		o->nbd_tls_given = true;
		return GO_ON;
	case TAPDISK_KEY_NBD_TLS_PSK:
		a->tls_psk_file = arg;
		return GO_ON;
	case TAPDISK_KEY_NBD_TLS_X509:
		a->tls_x509_dir = arg;
		return GO_ON;
	default:
		if (a->nr_allow == opt->max)
			return usage_error("at most %lld --nbd-allow blocks",
					   opt->max);
		if (td_nbd_parse_cidr(arg, &a->allow[a->nr_allow]))
			return usage_error("--nbd-allow wants an address or "
					   "ADDRESS/BITS with no host bits "
					   "set, e.g. 10.0.0.0/8 or fd00::/8, "
					   "not '%s'",
					   arg);
		a->nr_allow++;
		return GO_ON;
	}
}

/* --nbd-max-clients and the --nbd-*-timeout options (seconds). */
static int parse_nbd_limit(struct options *o, const struct cli_option *opt,
			   const char *arg, long long v)
{
	if (v < 0)
		return usage_error("--%s wants a number from %lld to %lld, "
				   "not '%s'",
				   opt->name, opt->min, opt->max, arg);
	switch (opt->key) {
	case TAPDISK_KEY_NBD_MAX_CLIENTS:
		o->nbd_max_clients = (uint32_t)v;
		break;
	case TAPDISK_KEY_NBD_HS_TIMEOUT:
		o->nbd_handshake_timeout_s = (uint32_t)v;
		break;
	case TAPDISK_KEY_NBD_IO_TIMEOUT:
		o->nbd_io_timeout_s = (uint32_t)v;
		break;
	default:
		o->nbd_idle_timeout_s = (uint32_t)v;
		break;
	}
	return GO_ON;
}

/* The options that take a number or a word from a list. */
static int parse_value(struct options *o, const struct cli_option *opt,
		       const char *arg)
{
	long long v = number_in_range(opt, arg);

	switch (opt->key) {
	case TAPDISK_KEY_MAX_INDIRECT:
		if (v < 0)
			return usage_error("--max-indirect-segments wants a "
					   "number from %lld (no indirect "
					   "requests) to %lld, not '%s'",
					   opt->min, opt->max, arg);
		o->max_indirect_segments = (uint32_t)v;
		return GO_ON;
	case TAPDISK_KEY_MAX_INFLIGHT:
		if (v < 0)
			return usage_error("--max-inflight wants a number from "
					   "%lld to %lld, not '%s'",
					   opt->min, opt->max, arg);
		o->max_inflight = (uint32_t)v;
		return GO_ON;
	case TAPDISK_KEY_POLL_US:
		if (v < 0)
			return usage_error("--poll-us wants microseconds from "
					   "%lld (off) to %lld, not '%s'",
					   opt->min, opt->max, arg);
		o->poll_us = (uint32_t)v;
		return GO_ON;
	case TAPDISK_KEY_NBD_MAX_CLIENTS:
	case TAPDISK_KEY_NBD_HS_TIMEOUT:
	case TAPDISK_KEY_NBD_IO_TIMEOUT:
	case TAPDISK_KEY_NBD_IDLE_TIMEOUT:
		return parse_nbd_limit(o, opt, arg, v);
	case TAPDISK_KEY_READY_FD:
		if ((o->ready_fd = (int)v) < 0 ||
		    fcntl(o->ready_fd, F_GETFD) < 0)
			return usage_error("--ready-fd '%s' is not an open "
					   "file descriptor",
					   arg);
		return GO_ON;
	case TAPDISK_KEY_LOG_LEVEL:
		if ((o->log_level = td_log_parse_level(arg)) < 0)
			return usage_error("--log-level wants err, warn, info "
					   "or debug, not '%s'",
					   arg);
		return GO_ON;
	case TAPDISK_KEY_NBD_TLS:
	case TAPDISK_KEY_NBD_TLS_PSK:
	case TAPDISK_KEY_NBD_TLS_X509:
	case TAPDISK_KEY_NBD_ALLOW:
		return parse_access(o, opt, arg);
	default:
		return parse_xen(o, arg);
	}
}

/* One option; returns GO_ON, or an exit status to stop with. */
static int parse_one(struct options *o, const struct cli_option *opt,
		     const char *arg)
{
	switch (opt->key) {
	case 'a':
		o->chain = arg;
		return GO_ON;
	case TAPDISK_KEY_NBD:
		if (o->nr_nbd == opt->max)
			return usage_error("at most %lld --nbd addresses",
					   opt->max);
		o->nbd[o->nr_nbd++] = arg;
		return GO_ON;
	case TAPDISK_KEY_SHM:
		if (o->nr_shm == opt->max)
			return usage_error("at most %lld --shm paths",
					   opt->max);
		o->shm[o->nr_shm++] = arg;
		return GO_ON;
	case TAPDISK_KEY_NAME:
		o->name = arg;
		return GO_ON;
	case TAPDISK_KEY_DISK:
		o->disk = arg;
		return GO_ON;
	case TAPDISK_KEY_DISK_DIR:
		o->disk_dir = arg;
		return GO_ON;
	case 'r':
		o->read_only = true;
		return GO_ON;
	case TAPDISK_KEY_EXPORT_NAME:
		o->export_name = arg;
		return GO_ON;
	case TAPDISK_KEY_LOG_FILE:
		o->log_file = arg;
		return GO_ON;
	case TAPDISK_KEY_LOG:
		if (strcmp(arg, "stderr") && strcmp(arg, "syslog") &&
		    strncmp(arg, "syslog:", 7) && strncmp(arg, "file:", 5))
			return usage_error("--log wants stderr, syslog, "
					   "syslog:SOCKET or file:PATH, not "
					   "'%s'",
					   arg);
		o->log_target = arg;
		return GO_ON;
	case TAPDISK_KEY_RUN_DIR:
		o->run_dir = arg;
		return GO_ON;
	case 'f':
		o->foreground = true;
		return GO_ON;
	case 'h':
		usage(stdout);
		return EXIT_SUCCESS;
	case 'V':
		return cli_version("tapdisk");
	default:
		return parse_value(o, opt, arg);
	}
}

/* TLS mode and credentials go together; GO_ON or a usage error. */
static int check_tls(struct options *o)
{
	struct td_nbd_access *a = &o->nbd_access;
	bool creds = a->tls_psk_file || a->tls_x509_dir;

	if (!o->nbd_tls_given)
		a->tls = creds ? TD_NBD_TLS_REQUIRE : TD_NBD_TLS_OFF;
	if (a->tls != TD_NBD_TLS_OFF && !creds)
		return usage_error("--nbd-tls %s needs credentials: "
				   "--nbd-tls-psk FILE or --nbd-tls-x509 DIR",
				   a->tls == TD_NBD_TLS_ON ? "on" : "require");
	if (a->tls == TD_NBD_TLS_OFF && creds)
		return usage_error("--nbd-tls off with TLS credentials: drop "
				   "--nbd-tls-psk/--nbd-tls-x509 or say "
				   "--nbd-tls on or require");
	return GO_ON;
}

/* What the options say together; GO_ON or a usage error. */
static int check_options(struct options *o)
{
	if (!o->chain)
		return usage_error("give the disk with -a CHAIN, e.g. "
				   "-a aio:/srv/disk.img or -a null:size=1G");
	if (o->name && (!*o->name || strlen(o->name) >= TD_VBD_NAME_MAX ||
			o->name[strspn(o->name, NAME_CHARS)]))
		return usage_error("--name '%s': use 1 to %d letters, digits, "
				   "'.', '_' or '-'",
				   o->name, TD_VBD_NAME_MAX - 1);
	if (check_tls(o) != GO_ON)
		return CLI_EXIT_USAGE;
	if (!o->foreground && o->ready_fd < 0)
		return usage_error("to run tapdisk in the background use "
				   "'tap-ctl create -a CHAIN ...'; to run it "
				   "here add --foreground");
	return GO_ON;
}

/* Parse argv into o (zeroed first); GO_ON or an exit status. */
static int parse_argv(struct options *o, int argc, char **argv)
{
	struct option long_options[TAPDISK_MAX_OPTIONS + 1] = {{0}};
	char shorts[2 * TAPDISK_MAX_OPTIONS + 1] = "";
	int c, status;

	if (cli_getopt_table(tapdisk_options, tapdisk_nr_options, 0,
			     long_options, TAPDISK_MAX_OPTIONS + 1, shorts,
			     sizeof(shorts)))
		return usage_error("too many options in the table");
	memset(o, 0, sizeof(*o));
	o->log_level = TD_LOG_INFO;
	o->ready_fd = -1;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, long_options, NULL)) !=
	       -1) {
		const struct cli_option *opt =
			cli_option_find(tapdisk_options, tapdisk_nr_options, c);

		if (c == '?' || !opt)
			return usage_error(
				"unknown option or missing argument: "
				"'%s'",
				argv[optind - 1]);
		if ((status = parse_one(o, opt, optarg)) != GO_ON)
			return status;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return GO_ON;
}

/* The options a registry entry's OPTIONS may not give: what the entry
 * already says, or what only the caller decides. */
static const char *const registry_refused[] = {
	"-a",	      "--chain", "--name",	 "--disk",
	"--disk-dir", "-f",	 "--foreground", "--ready-fd",
	"-h",	      "--help",	 "-V",		 "--version",
};

/* GO_ON, or a usage error naming the word of OPTIONS refused. */
static int check_registry_words(const struct td_disk_conf *c, const char *name)
{
	for (int i = 0; i < c->nr_words; i++) {
		const char *w = c->words[i];
		size_t len = strcspn(w, "=");

		for (size_t k = 0;
		     k < sizeof(registry_refused) / sizeof(registry_refused[0]);
		     k++)
			if (strlen(registry_refused[k]) == len &&
			    !strncmp(w, registry_refused[k], len))
				return usage_error(
					"disk %s: OPTIONS may not give %s "
					"(the entry names the chain and the "
					"disk; the caller says how tapdisk "
					"runs)",
					name, registry_refused[k]);
	}
	return GO_ON;
}

/*
 * --disk NAME: argv again with the entry's chain, name and OPTIONS first
 * (the command line's options after them, so they win).  The entry and
 * the new argv live as long as tapdisk (o points into them), or until the
 * next call (the unit tests parse many command lines) frees them.
 */
static int expand_disk(struct options *o, int argc, char **argv)
{
	const char *name = o->disk, *dir = td_disk_conf_dir(o->disk_dir);
	static struct td_disk_conf conf;
	static char **nargv;
	char err[512];
	int n = 0, rc, status;

	if (o->chain || o->name)
		return usage_error("--disk %s names the chain and the disk: "
				   "drop %s",
				   name, o->chain ? "-a" : "--name");
	td_disk_conf_free(&conf);
	free(nargv);
	nargv = NULL;
	if ((rc = td_disk_conf_load(dir, name, &conf, err, sizeof(err))))
		return cli_usage_error(
			"tapdisk", "%s%s", err,
			rc == -ENOENT ? " (no such disk in the registry: write "
					"the file, see tapdisk --help)"
				      : "");
	if ((status = check_registry_words(&conf, name)) != GO_ON)
		return status;
	if (!(nargv = calloc((size_t)(argc + conf.nr_words + 6),
			     sizeof(*nargv))))
		return usage_error("out of memory");
	nargv[n++] = argv[0];
	nargv[n++] = "--chain";
	nargv[n++] = conf.chain;
	nargv[n++] = "--name";
	nargv[n++] = (char *)name;
	for (int i = 0; i < conf.nr_words; i++)
		nargv[n++] = conf.words[i];
	for (int i = 1; i < argc; i++)
		nargv[n++] = argv[i];
	if ((status = parse_argv(o, n, nargv)) != GO_ON)
		return status;
	return check_options(o);
}

/* Returns GO_ON, or an exit status. */
int tapdisk_parse_options(struct options *o, int argc, char **argv)
{
	int status = parse_argv(o, argc, argv);

	if (status != GO_ON)
		return status;
	if (o->disk)
		return expand_disk(o, argc, argv);
	return check_options(o);
}
