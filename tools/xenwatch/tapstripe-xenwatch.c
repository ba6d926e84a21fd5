/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapstripe-xenwatch.c - the daemon that starts tapdisks for xl: its
 * command line and its loop (a xenstore watch on backend/qdisk, the
 * children it reaps, a scan by xenwatch.c on each event).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xenstore.h>

#include "common/log.h"
#include "tapdisk/control/control.h"
#include "tools/cli/cli.h"
#include "tools/cli/disk-conf.h"
#include "tools/cli/service-notify.h"
#include "tools/xenwatch/xenwatch-int.h"

#define PROG		 "tapstripe-xenwatch"
#define DISK_DIR_ENV	 TD_DISK_CONF_DIR_ENV
#define DEFAULT_DISK_DIR TAPSTRIPE_CONFDIR "/disks"
#define WATCH_TOKEN	 "tapstripe-xenwatch"
/* Scan at least this often: a tapdisk that went away sends no event. */
#define RESCAN_IDLE_MS 10000
#define RESCAN_BUSY_MS 1000
#define MAX_DELAY_S    3600

enum {
	KEY_LOG = CLI_KEY_LONG,
	KEY_LOG_FILE,
	KEY_LOG_LEVEL,
	KEY_RUN_DIR,
	KEY_DISK_DIR,
	KEY_TAPDISK,
	KEY_START_WITH,
	KEY_STOP_DELAY,
	KEY_RESTART_DELAY,
};

struct options {
	bool foreground;
	const char *log_target, *log_file;
	int log_level;
	const char *run_dir, *disk_dir, *tapdisk, *start_with;
	long long stop_delay_s, restart_delay_s;
};

/* clang-format off */
static const struct cli_option options_table[] = {
	{"foreground", 'f', NULL, "run in this terminal, log to stderr (or\n"
	 "--log, --log-file)", 0, 0, 0, 0},
	{"log", KEY_LOG, "TARGET", "syslog (/dev/log), syslog:SOCKET,\n"
	 "file:PATH or stderr", 0, 0, 0, 0},
	{"log-file", KEY_LOG_FILE, "PATH", "append the log there (SIGHUP opens\n"
	 "it again)", 0, 0, 0, 0},
	{"log-level", KEY_LOG_LEVEL, "LEVEL", "err, warn, info (default) or debug", 0, 0, 0, 0},
	{"run-dir", KEY_RUN_DIR, "DIR", "the tapdisks' control sockets (default\n"
	 "$" TD_CTL_RUN_DIR_ENV ", else " TD_CTL_RUN_DIR_DEFAULT ")", 0, 0, 0, 0},
	{"disk-dir", KEY_DISK_DIR, "DIR", "the disk registry, NAME.conf files\n"
	 "(default $" DISK_DIR_ENV ", else\n" DEFAULT_DISK_DIR ")", 0, 0, 0, 0},
	{"start-with", KEY_START_WITH, "HOW", "systemd (systemctl start\n"
	 "tapdisk@NAME.service), spawn (run\n"
	 "tapdisk itself), or auto (default:\n"
	 "systemd when it is the init system)", 0, 0, 0, 0},
	{"tapdisk", KEY_TAPDISK, "PATH", "the tapdisk spawned (default: tapdisk\n"
	 "from PATH)", 0, 0, 0, 0},
	{"stop-delay", KEY_STOP_DELAY, "SEC", "stop a tapdisk it started once NAME has\n"
	 "had no device this long (default\n"
	 "{default}; a rebooting guest is back\n"
	 "within it)", 0, MAX_DELAY_S, XW_DEFAULT_STOP_DELAY_MS / 1000, 0},
	{"restart-delay", KEY_RESTART_DELAY, "SEC", "first wait before starting again\n"
	 "a tapdisk that ended while devices\n"
	 "remain, doubled each time up to 60 s\n"
	 "(default {default})", 1, MAX_DELAY_S,
	 XW_DEFAULT_BACKOFF_MIN_MS / 1000, 0},
	{"help", 'h', NULL, "this text", 0, 0, 0, 0},
	{"version", 'V', NULL, "the version", 0, 0, 0, 0},
};
/* clang-format on */
#define N_OPTIONS (sizeof(options_table) / sizeof(options_table[0]))

static void usage(void)
{
	/* clang-format off */
	fputs(
"NAME\n"
"    tapstripe-xenwatch - start the tapdisks of the disks xl makes\n"
"\n"
"SYNOPSIS\n"
"    tapstripe-xenwatch [--foreground] [--start-with systemd|spawn|auto]\n"
"                       [--disk-dir DIR] [--stop-delay SEC] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"    tapstripe-xenwatch runs in dom0 or in a storage driver domain and\n"
"    watches this domain's backend/qdisk tree in xenstore.  A guest disk\n"
"    written as backendtype=qdisk, target=tapstripe:NAME in its xl\n"
"    config makes such a device; for each NAME that has a device and no\n"
"    running tapdisk of that name (asked through the control sockets, as\n"
"    tap-ctl list does), it starts one from the disk registry,\n"
"    DISK_DIR/NAME.conf (CHAIN= and OPTIONS=, which must include --xen\n"
"    auto): with systemctl start tapdisk@NAME.service under systemd,\n"
"    else by running tapdisk --foreground --disk NAME itself and starting\n"
"    it again, after a growing delay, when it ends while devices remain.\n"
"    The tapdisk takes the device by its name.  When NAME has had no\n"
"    device for the stop delay, the tapdisk it started is stopped; a\n"
"    tapdisk it found running (an operator's) is reused and never\n"
"    stopped.  A NAME with no registry entry is logged, and the error is\n"
"    written into each of its devices (hotplug-error, hotplug-status).\n"
"    It scans at start, so devices made before it ran are served too (a\n"
"    driver domain that rebooted).  A device released with tap-ctl\n"
"    release is handed to the next tapdisk of its NAME that is not the\n"
"    one that released it (a restarted or upgraded tapdisk resumes the\n"
"    ring).  Without --foreground it detaches and logs to syslog.\n"
"\n"
"    Run through a link named " XW_DM_NAME ", it stands in for the\n"
"    xenpv device model (QEMU) that xl starts in dom0 for a PV guest with\n"
"    a backendtype=qdisk disk: the guest's xl config names the link as\n"
"    device_model_override, and the program answers libxl (it writes\n"
"    device-model/DOMID/state and answers its QMP queries) and serves\n"
"    nothing itself; the tapdisk serves the disk.\n"
"\n"
"OPTIONS\n", stdout);
	/* clang-format on */
	cli_print_options(stdout, options_table, N_OPTIONS, 0);
	/* clang-format off */
	fputs(
"\n"
"ENVIRONMENT\n"
"    " DISK_DIR_ENV "   the disk registry (see --disk-dir)\n"
"    " TD_CTL_RUN_DIR_ENV "    the run directory (see --run-dir)\n"
"    " CLI_NOTIFY_SOCKET_ENV "       set by systemd (Type=notify): READY=1 once\n"
"                        the watch is set and the first scan done\n"
"\n"
"FILES\n"
"    " DEFAULT_DISK_DIR "/NAME.conf   a disk of the registry\n"
"\n"
"SIGNALS\n"
"    SIGINT, SIGTERM   exit; the tapdisks keep running\n"
"    SIGHUP            open the log file again (logrotate)\n"
"\n"
"EXIT STATUS\n"
"    0  stopped by a signal\n"
"    1  could not start (no xenstore, no watch)\n"
"    2  bad command line\n"
"\n"
"EXAMPLES\n"
"    echo 'CHAIN=aio:/dev/xvdb' >" DEFAULT_DISK_DIR "/vm1.conf\n"
"    echo 'OPTIONS=--xen auto' >>" DEFAULT_DISK_DIR "/vm1.conf\n"
"    tapstripe-xenwatch --foreground --start-with spawn\n"
"    xl create vm1.cfg   # disk=['backend=DD, backendtype=qdisk,\n"
"                        #       vdev=xvda, target=tapstripe:vm1']\n",
	      stdout);
	/* clang-format on */
}

#define usage_error(...) cli_usage_error(PROG, __VA_ARGS__)

static int take_number(const struct cli_option *opt, const char *arg,
		       long long *out)
{
	int err = cli_parse_number(arg, opt->min, opt->max, out);

	if (err)
		return usage_error("--%s wants a whole number of seconds from "
				   "%lld to %lld, not '%s'",
				   opt->name, opt->min, opt->max, arg);
	return 0;
}

/* One option; 0, or an exit status (-1: exit 0 after --help/--version). */
static int take_option(struct options *o, int key, const char *arg)
{
	const struct cli_option *opt =
		cli_option_find(options_table, N_OPTIONS, key);

	switch (key) {
	case 'f':
		o->foreground = true;
		return 0;
	case KEY_LOG:
		o->log_target = arg;
		return 0;
	case KEY_LOG_FILE:
		o->log_file = arg;
		return 0;
	case KEY_LOG_LEVEL:
		o->log_level = td_log_parse_level(arg);
		return o->log_level < 0
			       ? usage_error("--log-level wants err, warn, "
					     "info or debug, not '%s'",
					     arg)
			       : 0;
	case KEY_RUN_DIR:
		o->run_dir = arg;
		return 0;
	case KEY_DISK_DIR:
		o->disk_dir = arg;
		return 0;
	case KEY_TAPDISK:
		o->tapdisk = arg;
		return 0;
	case KEY_START_WITH:
		if (strcmp(arg, "systemd") && strcmp(arg, "spawn") &&
		    strcmp(arg, "auto"))
			return usage_error("--start-with wants systemd, spawn "
					   "or auto, not '%s'",
					   arg);
		o->start_with = arg;
		return 0;
	case KEY_STOP_DELAY:
		return take_number(opt, arg, &o->stop_delay_s);
	case KEY_RESTART_DELAY:
		return take_number(opt, arg, &o->restart_delay_s);
	case 'h':
		usage();
		return -1;
	case 'V':
		cli_version(PROG);
		return -1;
	default:
		return usage_error("unknown option");
	}
}

static int parse_options(struct options *o, int argc, char **argv)
{
	/* cli_getopt_table appends: both start empty. */
	struct option longs[N_OPTIONS + 1] = {{0}};
	char shorts[64] = "";
	int c, st;

	*o = (struct options){
		.log_level = TD_LOG_INFO,
		.tapdisk = "tapdisk",
		.start_with = "auto",
		.stop_delay_s = XW_DEFAULT_STOP_DELAY_MS / 1000,
		.restart_delay_s = XW_DEFAULT_BACKOFF_MIN_MS / 1000,
	};
	if (cli_getopt_table(options_table, N_OPTIONS, 0, longs, N_OPTIONS + 1,
			     shorts, sizeof(shorts)))
		return EXIT_FAILURE;
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		if (c == '?')
			return usage_error(
				"unknown option or missing argument");
		if ((st = take_option(o, c, optarg)))
			return st;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->run_dir)
		o->run_dir =
			getenv(TD_CTL_RUN_DIR_ENV) ?: TD_CTL_RUN_DIR_DEFAULT;
	o->disk_dir = td_disk_conf_dir(o->disk_dir);
	return 0;
}

static volatile sig_atomic_t stop_signal, hup_signal;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		hup_signal = 1;
	else
		stop_signal = sig;
}

static void setup_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int open_log(const struct options *o)
{
	int err = 0;

	td_log_set_level((enum td_log_level)o->log_level);
	if (o->log_file)
		err = td_log_open_file(o->log_file);
	else if (o->log_target)
		err = td_log_set_target(o->log_target, PROG);
	else if (!o->foreground)
		err = td_log_set_target("syslog", PROG);
	if (err)
		fprintf(stderr,
			PROG ": cannot open the log %s: %s; check it exists "
			     "and is writable, or choose --log\n",
			o->log_file ?: o->log_target ?: "syslog",
			strerror(-err));
	return err;
}

/* Reap every ended child: supervised tapdisks and systemctl runs. */
static bool reap(struct xw *xw, struct xw_os *os, uint64_t now_ms)
{
	bool any = false;
	int status, pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (xw_os_helper_exited(os, pid, status))
			continue;
		any |= xw_child_exited(xw, pid, status, now_ms);
	}
	return any;
}

/* Take every pending watch event; whether there was one. */
static bool drain_watch(struct xw_os *os)
{
	bool any = false;
	char **ev;

	while ((ev = xs_check_watch(os->xs))) {
		free(ev);
		any = true;
	}
	return any;
}

static uint64_t now_ms(void)
{
	return td_now_ns() / 1000000;
}

static int serve(struct xw *xw, struct xw_os *os)
{
	uint64_t last = 0;
	struct pollfd pfd = {.fd = xs_fileno(os->xs), .events = POLLIN};
	int err;

	while (!stop_signal) {
		uint64_t t = now_ms();
		bool first = !last;
		bool due = !last || t - last >= (xw_busy(xw) ? RESCAN_BUSY_MS
							     : RESCAN_IDLE_MS);

		due |= drain_watch(os);
		due |= reap(xw, os, t);
		if (hup_signal) {
			hup_signal = 0;
			td_log_reopen();
		}
		if (due) {
			err = xw_scan(xw, t);
			if (err)
				td_warn("cannot read %s: %s", os->root,
					strerror(-err));
			last = t;
		}
		/* READY=1 after the scan of the devices made before us. */
		if (first && (err = cli_notify_ready("watching %s", os->root)))
			td_warn("cannot tell systemd we are ready: %s",
				strerror(-err));
		poll(&pfd, 1, RESCAN_BUSY_MS / 2);
	}
	cli_notify_stopping("signal %d", (int)stop_signal);
	td_info("signal %d: exiting; the tapdisks keep running",
		(int)stop_signal);
	return 0;
}

static int start(const struct options *o, struct xw_os *os)
{
	int err;

	os->run_dir = o->run_dir;
	os->disk_dir = o->disk_dir;
	os->tapdisk = o->tapdisk;
	os->systemd =
		!strcmp(o->start_with, "systemd") ||
		(!strcmp(o->start_with, "auto") && xw_os_systemd_booted());
	err = xw_os_open(os);
	if (err) {
		td_err("cannot open xenstore: %s; is xenstored running and "
		       "/dev/xen/xenbus there (modprobe xen-evtchn)?",
		       strerror(-err));
		return err;
	}
	if (!xs_watch(os->xs, os->root, WATCH_TOKEN)) {
		err = errno ? -errno : -EIO;
		td_err("cannot watch %s: %s", os->root, strerror(-err));
		return err;
	}
	td_info("watching %s; registry %s; tapdisks started with %s", os->root,
		os->disk_dir, os->systemd ? "systemd" : os->tapdisk);
	return 0;
}

int main(int argc, char **argv)
{
	static struct xw xw;
	static struct xw_os os;
	struct options o;
	struct xw_config cfg;
	const char *base = strrchr(argv[0], '/');
	int st;

	if (!strcmp(base ? base + 1 : argv[0], XW_DM_NAME))
		return xw_dm_main(argc, argv);
	st = parse_options(&o, argc, argv);

	if (st)
		return st < 0 ? EXIT_SUCCESS : st;
	/* Detach first: the syslog sink's thread would not follow a fork. */
	if (!o.foreground && daemon(0, 0)) {
		fprintf(stderr, PROG ": cannot detach: %s\n", strerror(errno));
		return EXIT_FAILURE;
	}
	if (open_log(&o))
		return EXIT_FAILURE;
	setup_signals();
	cfg = (struct xw_config){
		.stop_delay_ms = (uint64_t)o.stop_delay_s * 1000,
		.backoff_min_ms = (uint64_t)o.restart_delay_s * 1000,
		.backoff_max_ms = XW_DEFAULT_BACKOFF_MAX_MS,
	};
	if (start(&o, &os) || xw_init(&xw, &xw_os_ops, &os, &cfg)) {
		xw_os_close(&os);
		return EXIT_FAILURE;
	}
	st = serve(&xw, &os);
	xw_fini(&xw);
	xw_os_close(&os);
	return st ? EXIT_FAILURE : EXIT_SUCCESS;
}
