/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl.c - start tapdisks and talk to them over their control sockets
 * (protocol in tapdisk/control.h).
 *
 * A tapdisk's id is its pid; its control socket is
 * RUN_DIR/tapdisk-ID.sock.  "create" and "list" have files of their own;
 * this one has the command line and the commands that talk to one running
 * tapdisk.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "tapdisk/control/control.h"
#include "tools/cli/cli.h"
#include "tools/tap-ctl/tap-ctl.h"
#include "tools/tapdisk/tapdisk-options.h"

#define DEFAULT_TIMEOUT_S 30
#define MAX_TIMEOUT_S	  86400
#define EXIT_POLL_MS	  20  /* how often destroy looks for the exit */
#define BUSY_RETRY_MS	  100 /* a tapdisk with no free control slot */

enum {
	OPT_ID = 1u << 0,
	OPT_JSON = 1u << 1,
	OPT_CREATE = 1u << 2,
	OPT_XEN = 1u << 3,
	OPT_ARGS = 1u << 4, /* takes words after its options */
	OPT_ALL = 1u << 5,  /* --all instead of -i ID */
	OPT_OUTPUT = 1u << 6,
};

struct subcommand {
	const char *name;
	unsigned int opts; /* OPT_* it accepts */
	const char *synopsis;
	const char *help;
	int (*run)(struct cmd_opts *o);
};

static const struct subcommand *find_subcommand(const char *name);
static void global_usage(FILE *out);

int tapctl_fail(const char *fmt, ...)
{
	va_list ap;
	int status;

	va_start(ap, fmt);
	status = cli_vfail("tap-ctl", fmt, ap);
	va_end(ap);
	return status;
}

static int usage_errorf(const struct subcommand *sc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int usage_errorf(const struct subcommand *sc, const char *fmt, ...)
{
	char prog[64];
	va_list ap;
	int status;

	snprintf(prog, sizeof(prog), "tap-ctl%s%s", sc ? " " : "",
		 sc ? sc->name : "");
	va_start(ap, fmt);
	status = cli_vusage_error(prog, fmt, ap);
	va_end(ap);
	return status;
}

/* --- shared helpers ----------------------------------------------------------- */

void tapctl_socket_path(const struct cmd_opts *o, int id, char *buf, size_t len)
{
	if (td_ctl_socket_path(buf, len, o->run_dir, id))
		snprintf(buf, len, "(run dir too long)");
}

/* Connect to tapdisk id; prints why not.  0 or an exit status. */
static int connect_id(const struct cmd_opts *o, int id, int *fd)
{
	char path[PATH_MAX], msg[PATH_MAX + 256];
	int err;

	tapctl_socket_path(o, id, path, sizeof(path));
	err = td_ctl_connect(path, fd);
	if (!err)
		return 0;
	if (err == -ENOENT)
		return tapctl_fail("no tapdisk with id %d in %s (no %s); see "
				   "'tap-ctl list'",
				   id, o->run_dir, path);
	if (err == -ECONNREFUSED && td_ctl_process_gone(id)) {
		unlink(path);
		return tapctl_fail(
			"tapdisk %d is not running; removed its stale "
			"socket %s",
			id, path);
	}
	cli_explain(msg, sizeof(msg), err, CLI_CTL_SOCKET,
		    "tapdisk %d: cannot connect to %s", id, path);
	return tapctl_fail("%s", msg);
}

#define NS_PER_MS 1000000ull

/* Milliseconds left until deadline_ns (0 when past). */
static int ms_left(uint64_t deadline_ns)
{
	uint64_t now = td_now_ns();

	return now >= deadline_ns ? 0 : (int)((deadline_ns - now) / NS_PER_MS);
}

/*
 * Connect to tapdisk id and send line; while the tapdisk refuses the
 * connection for want of a free slot (td_ctl_reply_refused), say so once
 * and try again until deadline_ns.  0 with *fd connected and *err the
 * request's result (r its reply), or an exit status printed.
 */
static int send_request(const struct cmd_opts *o, int id, const char *line,
			uint64_t deadline_ns, struct td_ctl_reply *r, int *fd,
			int *err)
{
	bool said = false;

	for (;;) {
		int status = connect_id(o, id, fd);

		if (status)
			return status;
		*err = td_ctl_request(*fd, line, ms_left(deadline_ns), r);
		if (*err || !td_ctl_reply_refused(r) ||
		    ms_left(deadline_ns) < BUSY_RETRY_MS)
			return 0;
		close(*fd);
		if (!said)
			fprintf(stderr,
				"tap-ctl: tapdisk %d: %s (%s); trying again "
				"for up to %d s\n",
				id, r->message, r->errname,
				ms_left(deadline_ns) / 1000);
		said = true;
		poll(NULL, 0, BUSY_RETRY_MS);
	}
}

/* Send line to tapdisk id; prints errors.  0 or an exit status. */
static int request(const struct cmd_opts *o, int id, const char *line,
		   struct td_ctl_reply *r)
{
	uint64_t deadline =
		td_now_ns() + (uint64_t)o->timeout_s * 1000 * NS_PER_MS;
	int fd, err, status = send_request(o, id, line, deadline, r, &fd, &err);

	if (status)
		return status;
	close(fd);
	if (err == -ETIMEDOUT)
		return tapctl_fail(
			"tapdisk %d did not answer '%s' within %d s; "
			"raise --timeout or look at its log",
			id, line, o->timeout_s);
	if (err)
		return tapctl_fail("tapdisk %d: '%s' failed: %s", id, line,
				   strerror(-err));
	if (r->err)
		return tapctl_fail("tapdisk %d: %s (%s)", id, r->message,
				   r->errname);
	return 0;
}

/* See tap-ctl.h. */
int tapctl_request(const struct cmd_opts *o, int id, const char *line,
		   struct td_ctl_reply *r)
{
	return request(o, id, line, r);
}

/* Simple commands: send line, print the payload. */
static int simple_command(struct cmd_opts *o, const char *line)
{
	struct td_ctl_reply r;
	int status;

	td_ctl_reply_init(&r);
	status = request(o, o->id, line, &r);
	if (!status)
		fputs(td_strbuf_str(&r.payload), stdout);
	td_ctl_reply_free(&r);
	return status;
}

static int cmd_info(struct cmd_opts *o)
{
	return simple_command(o, o->json ? "info json" : "info");
}

static int cmd_stats(struct cmd_opts *o)
{
	if (o->all)
		return tapctl_cmd_stats_all(o);
	return simple_command(o, o->json ? "stats json" : "stats");
}

static int cmd_pause(struct cmd_opts *o)
{
	return simple_command(o, "pause");
}

static int cmd_resize(struct cmd_opts *o)
{
	return simple_command(o, o->json ? "resize json" : "resize");
}

/* "poll [US] [json]": show the polling budget, or set it. */
static int cmd_poll(struct cmd_opts *o)
{
	const struct subcommand *sc = find_subcommand("poll");
	char line[TD_CTL_LINE_MAX];

	if (o->nr_args > 1)
		return usage_errorf(sc, "give at most one budget, in "
					"microseconds");
	if (o->nr_args == 1 &&
	    (!*o->args[0] ||
	     strspn(o->args[0], "0123456789") != strlen(o->args[0])))
		return usage_errorf(sc, "'%s' is not microseconds", o->args[0]);
	snprintf(line, sizeof(line), "poll%s%s%s", o->nr_args ? " " : "",
		 o->nr_args ? o->args[0] : "", o->json ? " json" : "");
	return simple_command(o, line);
}

/* "stages [on|off|reset] [json]": stage timing, switched when asked. */
static int cmd_stages(struct cmd_opts *o)
{
	const struct subcommand *sc = find_subcommand("stages");
	char line[TD_CTL_LINE_MAX];

	if (o->nr_args > 1)
		return usage_errorf(sc, "give at most one of on, off, reset");
	if (o->nr_args == 1 && strcmp(o->args[0], "on") &&
	    strcmp(o->args[0], "off") && strcmp(o->args[0], "reset"))
		return usage_errorf(sc, "'%s' is not on, off or reset",
				    o->args[0]);
	snprintf(line, sizeof(line), "stages%s%s%s", o->nr_args ? " " : "",
		 o->nr_args ? o->args[0] : "", o->json ? " json" : "");
	return simple_command(o, line);
}

static int cmd_resume(struct cmd_opts *o)
{
	return simple_command(o, "resume");
}

/* "driver NAME WORD...": one line, words checked by the protocol's rules. */
static int cmd_driver(struct cmd_opts *o)
{
	const struct subcommand *sc = find_subcommand("driver");
	char line[TD_CTL_LINE_MAX];
	size_t len;

	/* "... status --json" reads as well as "--json ... status". */
	if (o->nr_args > 2 && !strcmp(o->args[o->nr_args - 1], "--json")) {
		o->json = true;
		o->nr_args--;
	}
	if (o->nr_args < 2)
		return usage_errorf(sc, "give the driver and its command, e.g. "
					"stripe status");
	if (o->nr_args + 1 > TD_CTL_MAX_ARGS)
		return usage_errorf(sc, "at most %d words after the driver",
				    TD_CTL_MAX_ARGS - 2);
	len = (size_t)snprintf(line, sizeof(line), "driver");
	for (int i = 0; i < o->nr_args && len < sizeof(line); i++) {
		if (!*o->args[i] || strpbrk(o->args[i], " \t\r\n"))
			return usage_errorf(sc, "'%s' is not one word",
					    o->args[i]);
		len += (size_t)snprintf(line + len, sizeof(line) - len, " %s",
					o->args[i]);
	}
	if (o->json && len < sizeof(line))
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					" json");
	if (len >= sizeof(line))
		return usage_errorf(sc, "the command is longer than %d bytes",
				    TD_CTL_LINE_MAX - 1);
	return simple_command(o, line);
}

/* "nbd list" or "nbd drop ID": the NBD frontend's connections. */
static int cmd_nbd(struct cmd_opts *o)
{
	const struct subcommand *sc = find_subcommand("nbd");
	char line[TD_CTL_LINE_MAX];

	/* "list --json" reads as well as "--json list". */
	if (o->nr_args == 2 && !strcmp(o->args[1], "--json")) {
		o->json = true;
		o->nr_args = 1;
	}
	if (o->nr_args == 1 && !strcmp(o->args[0], "list")) {
		snprintf(line, sizeof(line), "frontend nbd list%s",
			 o->json ? " json" : "");
		return simple_command(o, line);
	}
	if (o->nr_args == 2 && !strcmp(o->args[0], "drop")) {
		if (!*o->args[1] ||
		    strspn(o->args[1], "0123456789") != strlen(o->args[1]) ||
		    strlen(o->args[1]) > 20)
			return usage_errorf(sc,
					    "drop wants a connection id as "
					    "'list' shows it, not '%s'",
					    o->args[1]);
		snprintf(line, sizeof(line), "frontend nbd drop %s",
			 o->args[1]);
		return simple_command(o, line);
	}
	return usage_errorf(sc, "give list or drop CONN");
}

/* Append " BPS" for each of the n words (sizes: K, M, G) to line; 0, or
 * the usage error's status (printed). */
static int append_speeds(const struct subcommand *sc, char *const *words, int n,
			 char *line, size_t size)
{
	size_t len = strlen(line);

	for (int i = 0; i < n; i++) {
		uint64_t bps;

		if (td_parse_size(words[i], &bps))
			return usage_errorf(sc,
					    "'%s' is not a speed: give bytes "
					    "per second (K, M, G suffixes; 0 "
					    "for no limit)",
					    words[i]);
		len += (size_t)snprintf(line + len, size - len, " %" PRIu64,
					bps);
		if (len >= size)
			return usage_errorf(sc, "the command is too long");
	}
	return 0;
}

/* "snapshot start TARGET | status [--json] | cancel" (doc/snapshots.md). */
static int cmd_snapshot(struct cmd_opts *o)
{
	const struct subcommand *sc = find_subcommand("snapshot");
	char line[TD_CTL_LINE_MAX];

	if (o->nr_args == 2 && !strcmp(o->args[1], "--json")) {
		o->json = true;
		o->nr_args = 1;
	}
	if (o->nr_args == 1 && !strcmp(o->args[0], "status"))
		return simple_command(o, o->json ? "snapshot status json"
						 : "snapshot status");
	if (o->nr_args == 1 && !strcmp(o->args[0], "cancel"))
		return simple_command(o, "snapshot cancel");
	if ((o->nr_args == 2 || o->nr_args == 3) &&
	    !strcmp(o->args[0], "speed")) {
		int rc;

		snprintf(line, sizeof(line), "snapshot speed");
		rc = append_speeds(sc, o->args + 1, o->nr_args - 1, line,
				   sizeof(line));
		return rc ? rc : simple_command(o, line);
	}
	if (o->nr_args >= 2 && o->nr_args <= 5 &&
	    !strcmp(o->args[0], "start")) {
		const char *mode = o->nr_args >= 3 ? o->args[2] : "cbw";
		int rc;

		if (!*o->args[1] || strpbrk(o->args[1], " \t\r\n"))
			return usage_errorf(sc, "'%s' is not one word",
					    o->args[1]);
		if (strcmp(mode, "row") && strcmp(mode, "cbw"))
			return usage_errorf(sc,
					    "'%s' is not a mode: give row "
					    "(redirect-on-write) or cbw "
					    "(copy-before-write, the default)",
					    mode);
		if (snprintf(line, sizeof(line), "snapshot start %s %s",
			     o->args[1], mode) >= (int)sizeof(line))
			return usage_errorf(sc, "the target chain is too long");
		rc = o->nr_args > 3
			     ? append_speeds(sc, o->args + 3, o->nr_args - 3,
					     line, sizeof(line))
			     : 0;
		return rc ? rc : simple_command(o, line);
	}
	return usage_errorf(sc, "give start TARGET-CHAIN, status, speed BPS "
				"[BUSY-BPS] or cancel");
}

/* --- destroy ------------------------------------------------------------------- */

static int wait_exit(int id, uint64_t deadline_ns)
{
	while (!td_ctl_process_gone(id)) {
		if (!ms_left(deadline_ns))
			return -ETIMEDOUT;
		poll(NULL, 0, EXIT_POLL_MS);
	}
	return 0;
}

/*
 * One deadline covers the reply (sent once the disk is flushed and
 * closed), the connection's end and the process's exit.
 */
static int cmd_destroy(struct cmd_opts *o)
{
	uint64_t deadline =
		td_now_ns() + (uint64_t)o->timeout_s * 1000 * NS_PER_MS;
	struct td_ctl_reply r;
	char path[PATH_MAX];
	int fd, err, status;

	td_ctl_reply_init(&r);
	status = send_request(o, o->id, "destroy", deadline, &r, &fd, &err);
	if (status) {
		td_ctl_reply_free(&r);
		return status;
	}
	if (!err)
		td_ctl_wait_closed(fd, ms_left(deadline));
	close(fd);
	if (err == -ETIMEDOUT)
		status = tapctl_fail(
			"tapdisk %d did not finish its shutdown within "
			"%d s (I/O stuck in the backend?); look at its "
			"log, wait longer with --timeout, or kill -9 %d "
			"(unflushed writes would be lost)",
			o->id, o->timeout_s, o->id);
	else if (err)
		status = tapctl_fail("tapdisk %d: destroy failed: %s", o->id,
				     strerror(-err));
	else if (r.err)
		status = tapctl_fail("tapdisk %d: %s (%s)", o->id, r.message,
				     r.errname);
	if (!err && wait_exit(o->id, deadline))
		status = tapctl_fail("tapdisk %d answered destroy but is still "
				     "running after %d s; kill it with kill %d",
				     o->id, o->timeout_s, o->id);
	else if (!err && !status)
		printf("tapdisk %d destroyed: %s", o->id,
		       td_strbuf_str(&r.payload));
	tapctl_socket_path(o, o->id, path, sizeof(path));
	if (!err && td_ctl_process_gone(o->id))
		unlink(path); /* normally gone already */
	td_ctl_reply_free(&r);
	return status;
}

/* --- command line ---------------------------------------------------------------- */

#define COMMON_HELP                                                         \
	"    --run-dir DIR     where the tapdisks' sockets are (default\n"  \
	"                      $" TD_CTL_RUN_DIR_ENV                        \
	", else " TD_CTL_RUN_DIR_DEFAULT ")\n"                              \
	"    --timeout SEC     how long to wait for tapdisk (default 30)\n" \
	"    -h, --help        this text\n"

static const struct subcommand subcommands[] = {
	{"create", OPT_CREATE,
	 "create -a CHAIN|--disk NAME [--nbd ADDR]... [--shm PATH]... "
	 "[--name NAME] [-r] [OPTIONS]",
	 "Start a tapdisk in the background serving the disk CHAIN, and print\n"
	 "its id (its pid).  Its log goes to syslog (the ident\n"
	 "tapdisk/NAME) when /dev/log is there, else to\n"
	 "RUN_DIR/tapdisk-ID.log, which it removes when it ends cleanly;\n"
	 "or where --log TARGET or --log-file PATH says (SIGHUP to the\n"
	 "tapdisk opens a log file again, for logrotate).\n"
	 "When it cannot start, its own error is printed\n"
	 "(first the reason, e.g. the mapping file and line) and the status\n"
	 "is 1.  One not ready within --timeout seconds gets SIGTERM, and\n"
	 "SIGKILL 2 s later; tap-ctl says which ended it, or that it is\n"
	 "still there.  The options are tapdisk's, passed on (see\n"
	 "tapdisk --help):\n",
	 tapctl_cmd_create},
	{"list", OPT_JSON, "list [--json]",
	 "Print one line per running tapdisk:\n"
	 "    id=ID name=NAME state=STATE chain=CHAIN nbd=ADDR[,ADDR...]\n"
	 "STATE is running, pausing, paused or stopping; nbd=- when it has\n"
	 "no NBD address.  Sockets left by dead tapdisks are removed.\n"
	 "--json prints a JSON array with each tapdisk's 'info --json'\n"
	 "object (pid, name, state, chain, frontends...).\n",
	 tapctl_cmd_list},
	{"info", OPT_ID | OPT_JSON, "info -i ID [--json]",
	 "Print what tapdisk ID serves: name, state, chain, size, features,\n"
	 "frontends (\"key: value\" lines, or JSON).\n",
	 cmd_info},
	{"stats", OPT_ID | OPT_JSON | OPT_ALL, "stats -i ID | --all [--json]",
	 "Print tapdisk ID's counters: requests, bytes and errors per op, I/O\n"
	 "in flight, the segments-per-request histogram, merges and backend\n"
	 "submissions, latency percentiles, NBD clients, CPU time.  --json\n"
	 "gives exact numbers (bytes, microseconds) for scripts.  --all\n"
	 "prints every tapdisk's (with --json, a JSON array of them).\n",
	 cmd_stats},
	{"metrics", OPT_OUTPUT, "metrics [--output FILE]",
	 "Print the metrics of every tapdisk in the Prometheus text format\n"
	 "(tapstripe_* families, label disk=NAME; see doc/metrics.md): I/O\n"
	 "requests, bytes and errors per op, the latency histogram, the\n"
	 "drivers' counters, and for striped disks stale replicas, dirty\n"
	 "regions and resync bytes.  --output FILE writes FILE.tmp.PID and\n"
	 "renames it to FILE, for node-exporter's textfile collector (e.g.\n"
	 "FILE=/var/lib/prometheus/node-exporter/tapstripe.prom, from a\n"
	 "timer).\n",
	 tapctl_cmd_metrics},
	{"pause", OPT_ID, "pause -i ID",
	 "Hold new I/O and wait until the I/O in flight has finished; returns\n"
	 "once nothing is in flight.  Clients' requests wait until resume.\n",
	 cmd_pause},
	{"resume", OPT_ID, "resume -i ID",
	 "Release the I/O held by pause, in order.\n", cmd_resume},
	{"resize", OPT_ID | OPT_JSON, "resize -i ID [--json]",
	 "Make tapdisk ID take its disk's new, larger size while it serves:\n"
	 "grow the backing first (aio: truncate -s the file larger, or grow\n"
	 "the block device), then resize.  A shrink is refused with the\n"
	 "reason and nothing changes; so is a chain with a driver that\n"
	 "cannot change size (null).  stripe: takes the FILE.grow that\n"
	 "'stripe-ctl vdisk resize' wrote (which asks this itself); EBUSY\n"
	 "while a resync, verify, move or hand-over runs (FILE.grow stays;\n"
	 "try again later); no FILE.grow: the size stays.  NBD clients\n"
	 "see the new size when they connect again (NBD cannot tell a\n"
	 "connected client); Xen guests are told at once (sectors, then\n"
	 "state Connected again, as blkback does); shm frontends are not.\n"
	 "--json prints old_bytes, new_bytes, grown and frontends.\n",
	 cmd_resize},
	{"destroy", OPT_ID, "destroy -i ID",
	 "Stop tapdisk ID gracefully: it finishes the I/O in flight, flushes\n"
	 "the disk, closes it and exits.  Waits until the process has exited\n"
	 "(at most --timeout seconds).\n",
	 cmd_destroy},
	{"attach", OPT_ID | OPT_XEN,
	 "attach -i ID --domid DOMID --vdev xvdX [--mode r|w]",
	 "Give domain DOMID a Xen virtual disk xvdX served by tapdisk ID:\n"
	 "write the frontend and backend xenstore nodes (backend type\n"
	 "vbd3, as XenServer's), then wait until tapdisk has taken the "
	 "device.\n"
	 "The guest's blkfront connects by itself.  Needs a tapdisk serving\n"
	 "Xen (tap-ctl info shows \"frontend: xen\").\n\n"
	 "    --domid DOMID       the guest (0 for this domain itself)\n"
	 "    --vdev xvdX         the guest's disk name, xvda..xvdz, or a\n"
	 "                        numeric device id\n"
	 "    --mode r|w          read-only or read-write (default w)\n\n"
	 "When the disk exists already, held by another tapdisk or released\n"
	 "by one (tap-ctl release), attach hands it over to tapdisk ID with\n"
	 "the guest connected: the old one answers every request it took,\n"
	 "the new one resumes the ring (--mode is then the disk's own).\n",
	 tapctl_cmd_attach},
	{"driver", OPT_ID | OPT_JSON | OPT_ARGS,
	 "driver -i ID NAME WORD... [--json]",
	 "Give a command to the driver NAME of tapdisk ID's chain and print\n"
	 "its answer.  The stripe driver takes:\n"
	 "    stripe status         servers, stale replicas, resync progress\n"
	 "                          (--json: the object stats --json shows\n"
	 "                          under drivers.stripe)\n"
	 "    stripe resync [RATE]  copy every stale replica from a live one,\n"
	 "                          online, at most RATE bytes/s (K/M/G;\n"
	 "                          default: the chain's resync_rate);\n"
	 "                          returns at once: status shows progress\n"
	 "    stripe resync stop    stop after the chunk in flight\n"
	 "    stripe lease          the disk's lease: state, holder, epoch\n"
	 "    stripe handover HOST  hand the lease to HOST (live migration):\n"
	 "                          writes held, flushed, then the master;\n"
	 "                          returns at once: repeat it until it\n"
	 "                          says handed over (or why it failed)\n"
	 "The qos filter takes 'qos set KEY=VALUE...' and 'qos status'\n"
	 "(doc/driver-chains.md); the cbt filter (changed-block tracking,\n"
	 "doc/cbt.md) takes:\n"
	 "    cbt create NAME [granularity=SIZE]   a new dirty bitmap (64K)\n"
	 "    cbt list | show NAME | clear NAME | remove NAME\n"
	 "Options come before NAME.\n",
	 cmd_driver},
	{"nbd", OPT_ID | OPT_JSON | OPT_ARGS,
	 "nbd -i ID list [--json] | drop CONN",
	 "See and drop tapdisk ID's NBD connections.  list prints one line\n"
	 "per open connection: its id, the peer's address, its state\n"
	 "(handshake, idle, busy, payload: in the middle of a WRITE's data,\n"
	 "draining), its age, the time since its last request or reply, and\n"
	 "the bytes it sent and received; --json also gives the commands in\n"
	 "flight, the memory it holds and the server's limits.  drop CONN\n"
	 "closes connection CONN at once (its commands in flight finish).\n",
	 cmd_nbd},
	{"detach", OPT_ID | OPT_XEN, "detach -i ID --domid DOMID --vdev xvdX",
	 "Take the disk xvdX away from domain DOMID: set it offline, wait\n"
	 "(at most --timeout seconds) until the guest has closed it and\n"
	 "tapdisk has finished its I/O, then remove the xenstore nodes.\n",
	 tapctl_cmd_detach},
	{"release", OPT_ID | OPT_XEN, "release -i ID --domid DOMID --vdev xvdX",
	 "Hand the disk xvdX of domain DOMID over, the guest staying\n"
	 "connected: tapdisk ID answers every request it took, takes no\n"
	 "more and lets go of the ring; the guest's next requests wait on\n"
	 "it until 'tap-ctl attach' names another tapdisk (to restart or\n"
	 "upgrade tapdisk, or to move the disk to another tapdisk).  Waits\n"
	 "at most --timeout seconds.  In a driver domain this works for a\n"
	 "disk xl made (backendtype=qdisk, target=tapstripe:NAME) too.\n",
	 tapctl_cmd_release},
	{"snapshot", OPT_ID | OPT_JSON | OPT_ARGS,
	 "snapshot -i ID start TARGET-CHAIN [row|cbw [BPS [BUSY-BPS]]] | "
	 "status [--json] | speed BPS [BUSY-BPS] | cancel",
	 "Copy tapdisk ID's disk, as it is now, onto another chain while it\n"
	 "serves (e.g. start aio:/srv/copy.img; the target must exist and be\n"
	 "at least as large).  start returns once every acknowledged write\n"
	 "is durable and the instant is marked; the copy runs in the\n"
	 "background, and a write to a region not yet copied first copies\n"
	 "the old data (copy-before-write, cbw, the default).\n"
	 "row (redirect-on-write) is faster for writes: the disk's file\n"
	 "keeps the instant and is only read, writes go to the target (an\n"
	 "aio: file of the disk's exact size on the same file system, the\n"
	 "disk served by aio: under sort: at most), the rest is copied in\n"
	 "the background, and at the end the two files exchange names, so\n"
	 "the target's name holds the snapshot.  It cannot be cancelled.\n"
	 "status shows progress (state copying, done, failed, cancelled;\n"
	 "--json: state, mode, row_redirected, chunks_copied, chunks_total,\n"
	 "bytes_copied, bytes_total, cbw_chunks, job_syncs, speed,\n"
	 "busy_speed, job_file).\n"
	 "speed BPS limits the background copy to BPS bytes a second (K,\n"
	 "M, G suffixes; 0, the default, for none); BUSY-BPS limits it while\n"
	 "the disk serves its own I/O (default 16M, 0: not slowed), so a\n"
	 "busy disk keeps most of the machine and an idle one is copied at\n"
	 "full speed.  A write to a region not yet copied is never held\n"
	 "back by them.  They hold for this tapdisk's run of the job; start\n"
	 "takes them too, after the mode, so the copy is held back from its\n"
	 "first chunk (e.g. start aio:/srv/copy.img row 0 8M).\n"
	 "A job survives a tapdisk restart (its job file); cancel drops it,\n"
	 "leaving the target incomplete.  See doc/snapshots.md.\n",
	 cmd_snapshot},
	{"poll", OPT_ID | OPT_JSON | OPT_ARGS, "poll -i ID [US] [--json]",
	 "Show tapdisk ID's polling budget and what polling did, or set the\n"
	 "budget to US microseconds (0: off; as tapdisk --poll-us).  After\n"
	 "work, tapdisk polls its rings and the aio completion ring that\n"
	 "long before sleeping, so that a frontend need not notify it and it\n"
	 "need not wake; the window adapts (it shrinks when polling finds\n"
	 "nothing, grows when sleeps are short).  Shows budget_us,\n"
	 "window_us, rounds (non-blocking passes), hits (rounds that found\n"
	 "work), sleeps, poll_us (time spent polling), backoffs (times\n"
	 "polling was suspended because tapdisk got less than 80% of a CPU\n"
	 "while it polled, or more threads were runnable than CPUs),\n"
	 "backoff (suspended now), cpu_pct (the CPU share last measured\n"
	 "while polling), runnable and cpus (the host's runnable threads\n"
	 "last seen, its CPUs).\n"
	 "See doc/tapdisk.md, \"Polling instead of sleeping\".\n",
	 cmd_poll},
	{"stages", OPT_ID | OPT_JSON | OPT_ARGS,
	 "stages -i ID [--json] [on|off|reset]",
	 "Time where each I/O's time goes inside tapdisk ID (off by default;\n"
	 "while off it costs a test per I/O), switch it on or off, or reset\n"
	 "the sums; then show, by op, the I/Os timed and the mean\n"
	 "microseconds of each stage: parse (read off the ring -> vbd), issue\n"
	 "(-> driver), submit (-> io_submit returned), disk (-> completion\n"
	 "read, the wake-up included), callback (-> vbd callback), wait (->\n"
	 "response hook), notify (response pushed, frontend notified); they\n"
	 "add up to the residence.  Also the mean time from a wake-up to the\n"
	 "ring read and to the completion reaped.  --json: sums and means in\n"
	 "ns, as in stats --json.  See doc/tapdisk.md, \"Where a QD 1\n"
	 "request's time goes\".\n",
	 cmd_stages},
};
#define NR_SUBCOMMANDS (sizeof(subcommands) / sizeof(subcommands[0]))

static void subcommand_usage(const struct subcommand *sc, FILE *out)
{
	fprintf(out, "Usage: tap-ctl %s\n\n%s", sc->synopsis, sc->help);
	if (sc->opts & OPT_CREATE) {
		cli_print_options(out, tapdisk_options, tapdisk_nr_options,
				  TAPDISK_OPT_CREATE);
		fputs("Environment: TAPDISK names the tapdisk program "
		      "(default: the one\n"
		      "next to tap-ctl, else tapdisk on PATH).\n",
		      out);
	}
	fputs("\nOptions:\n", out);
	if (sc->opts & OPT_ID)
		fputs("    -i, --id ID       the tapdisk (its pid, as tap-ctl "
		      "list "
		      "shows)\n",
		      out);
	if (sc->opts & OPT_ALL)
		fputs("    --all             every tapdisk of the run "
		      "directory\n",
		      out);
	if (sc->opts & OPT_OUTPUT)
		fputs("    --output FILE     write FILE atomically, not "
		      "stdout\n",
		      out);
	if (sc->opts & OPT_JSON)
		fputs("    --json            JSON instead of text\n", out);
	fputs(COMMON_HELP, out);
}

static void global_usage(FILE *out)
{
	fputs("NAME\n"
	      "    tap-ctl - start tapdisks and control them\n\n"
	      "SYNOPSIS\n"
	      "    tap-ctl [--run-dir DIR] COMMAND [OPTIONS]\n\n"
	      "DESCRIPTION\n"
	      "    tap-ctl starts tapdisks in the background (create) and\n"
	      "    talks to running ones through their control sockets in\n"
	      "    the run directory: it lists them, reads their statistics,\n"
	      "    pauses, resumes and destroys them, attaches Xen guests'\n"
	      "    devices and passes commands to their drivers.\n\n"
	      "COMMANDS\n",
	      out);
	for (size_t i = 0; i < NR_SUBCOMMANDS; i++)
		fprintf(out, "    %s\n", subcommands[i].synopsis);
	fputs("    help [COMMAND]\n\n"
	      "    'tap-ctl COMMAND --help' describes a command.\n\n"
	      "OPTIONS (before the command)\n"
	      "    --run-dir DIR     where the tapdisks' sockets are (default\n"
	      "                      $" TD_CTL_RUN_DIR_ENV
	      ", else " TD_CTL_RUN_DIR_DEFAULT ")\n"
	      "    -h, --help        this text\n"
	      "    -V, --version     the version\n\n"
	      "EXAMPLES\n"
	      "    id=$(tap-ctl create -a aio:/srv/disk.img --nbd unix)\n"
	      "    tap-ctl list\n"
	      "    tap-ctl stats -i $id --json\n"
	      "    tap-ctl metrics --output /var/lib/prometheus/node-exporter/"
	      "tapstripe.prom\n"
	      "    tap-ctl attach -i $id --domid 5 --vdev xvdb\n"
	      "    tap-ctl driver -i $id stripe resync 50M\n"
	      "    tap-ctl nbd -i $id list\n"
	      "    tap-ctl destroy -i $id\n\n"
	      "ENVIRONMENT\n"
	      "    " TD_CTL_RUN_DIR_ENV
	      "   the run directory (default " TD_CTL_RUN_DIR_DEFAULT ")\n"
	      "    TAPDISK            the tapdisk program for create\n\n"
	      "FILES\n"
	      "    RUN_DIR/tapdisk-ID.sock   control sockets\n"
	      "    RUN_DIR/tapdisk-ID.log    stderr of tapdisks started by "
	      "create (their log\n"
	      "                              when there is no /dev/log); "
	      "removed at a clean exit\n\n"
	      "XEN HOTPLUG SCRIPTS\n"
	      "    Xen's hotplug script block-tap (script=block-tap in an xl "
	      "disk line)\n"
	      "    calls blktap's tap-ctl, which shares this one's name and "
	      "path\n"
	      "    (/usr/sbin/tap-ctl): check, allocate, spawn, open, close, "
	      "free,\n"
	      "    list -t TYPE -f FILE, attach, detach, destroy -p PID -m "
	      "MINOR, and\n"
	      "    create from a hotplug script (XENBUS_PATH set).  tap-ctl "
	      "refuses each\n"
	      "    such call with an error naming the clash, exit status 2, "
	      "and touches\n"
	      "    no tapdisk.  tapstripe serves Xen guests without it: write "
	      "the disk as\n"
	      "    'backendtype=qdisk, vdev=xvda, target=tapstripe:NAME' and "
	      "start the\n"
	      "    tapdisk of NAME (tapstripe-xenwatch, tapdisk@NAME.service "
	      "or tap-ctl\n"
	      "    create --name NAME).  The Debian package conflicts with "
	      "blktap-utils.\n\n"
	      "EXIT STATUS\n"
	      "    0 success, 1 failure, 2 bad command line (or one of "
	      "blktap's)\n",
	      out);
}

static const struct subcommand *find_subcommand(const char *name)
{
	for (size_t i = 0; i < NR_SUBCOMMANDS; i++)
		if (!strcmp(subcommands[i].name, name))
			return &subcommands[i];
	return NULL;
}

/* Keys of tap-ctl's own long options, above those of tapdisk's. */
enum {
	LOPT_RUN_DIR = TAPDISK_KEY_END,
	LOPT_TIMEOUT,
	LOPT_JSON,
	LOPT_DOMID,
	LOPT_VDEV,
	LOPT_MODE,
	LOPT_ALL,
	LOPT_OUTPUT,
};

/* tap-ctl's own options; create's come from tapdisk_options. */
static const struct option own_options[] = {
	{"id", required_argument, NULL, 'i'},
	{"json", no_argument, NULL, LOPT_JSON},
	{"run-dir", required_argument, NULL, LOPT_RUN_DIR},
	{"timeout", required_argument, NULL, LOPT_TIMEOUT},
	{"domid", required_argument, NULL, LOPT_DOMID},
	{"vdev", required_argument, NULL, LOPT_VDEV},
	{"mode", required_argument, NULL, LOPT_MODE},
	{"all", no_argument, NULL, LOPT_ALL},
	{"output", required_argument, NULL, LOPT_OUTPUT},
	{"help", no_argument, NULL, 'h'},
};
#define NR_OWN_OPTIONS (sizeof(own_options) / sizeof(own_options[0]))
#define OWN_SHORTS     "+i:h"

/* The options create passes on to tapdisk; NULL for tap-ctl's own. */
static const struct cli_option *create_option(int c)
{
	const struct cli_option *opt =
		cli_option_find(tapdisk_options, tapdisk_nr_options, c);

	return opt && (opt->flags & TAPDISK_OPT_CREATE) ? opt : NULL;
}

/* Which OPT_* group an option belongs to (0: every command's). */
static unsigned int option_group(int c)
{
	if (create_option(c))
		return OPT_CREATE;
	switch (c) {
	case 'i':
		return OPT_ID;
	case LOPT_JSON:
		return OPT_JSON;
	case LOPT_ALL:
		return OPT_ALL;
	case LOPT_OUTPUT:
		return OPT_OUTPUT;
	case LOPT_DOMID:
	case LOPT_VDEV:
	case LOPT_MODE:
		return OPT_XEN;
	default:
		return 0;
	}
}

/* -1 to go on, or an exit status. */
static int take_create_option(const struct subcommand *sc, struct cmd_opts *o,
			      const struct cli_option *opt, const char *arg)
{
	if (opt->key == 'a')
		o->chain = arg;
	if (opt->key == TAPDISK_KEY_DISK)
		o->disk = arg;
	if (tapctl_create_option(o, opt, arg))
		return usage_errorf(sc, "at most %lld --%s options", opt->max,
				    opt->name);
	return -1;
}

static int take_option(const struct subcommand *sc, struct cmd_opts *o, int c,
		       const char *arg)
{
	const struct cli_option *opt = create_option(c);
	long long v;

	if (opt)
		return take_create_option(sc, o, opt, arg);
	switch (c) {
	case 'i':
		if (cli_parse_number(arg, 1, INT_MAX, &v))
			return usage_errorf(sc,
					    "-i wants a tapdisk id (a pid, "
					    "see tap-ctl list), not '%s'",
					    arg);
		o->id = (int)v;
		return -1;
	case LOPT_JSON:
		o->json = true;
		return -1;
	case LOPT_ALL:
		o->all = true;
		return -1;
	case LOPT_OUTPUT:
		o->output = arg;
		return -1;
	case LOPT_RUN_DIR:
		o->run_dir = arg;
		return -1;
	case LOPT_DOMID:
		o->domid = arg;
		return -1;
	case LOPT_VDEV:
		o->vdev = arg;
		return -1;
	case LOPT_MODE:
		o->mode = arg;
		return -1;
	case LOPT_TIMEOUT:
		if (cli_parse_number(arg, 1, MAX_TIMEOUT_S, &v))
			return usage_errorf(sc,
					    "--timeout wants seconds from 1 "
					    "to %d, not '%s'",
					    MAX_TIMEOUT_S, arg);
		o->timeout_s = (int)v;
		return -1;
	case 'h':
		subcommand_usage(sc, stdout);
		return EXIT_SUCCESS;
	default:
		return usage_errorf(sc, "unknown option");
	}
}

/* -1 to go on, or an exit status. */
static int parse_subcommand(const struct subcommand *sc, struct cmd_opts *o,
			    int argc, char **argv)
{
	struct option long_options[NR_OWN_OPTIONS + TAPDISK_MAX_OPTIONS + 1];
	char shorts[sizeof(OWN_SHORTS) + 2 * TAPDISK_MAX_OPTIONS] = OWN_SHORTS;
	int c, status;

	memcpy(long_options, own_options, sizeof(own_options));
	long_options[NR_OWN_OPTIONS] = (struct option){NULL, 0, NULL, 0};
	if (cli_getopt_table(tapdisk_options, tapdisk_nr_options,
			     TAPDISK_OPT_CREATE, long_options,
			     sizeof(long_options) / sizeof(long_options[0]),
			     shorts, sizeof(shorts)))
		return usage_errorf(sc, "too many options");
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, long_options, NULL)) !=
	       -1) {
		unsigned int group = option_group(c);

		if (c == '?' || (group && !(sc->opts & group)))
			return usage_errorf(sc,
					    "unknown option or missing "
					    "argument: '%s'",
					    argv[optind - 1]);
		if ((status = take_option(sc, o, c, optarg)) >= 0)
			return status;
	}
	if (optind < argc && (sc->opts & OPT_ARGS)) {
		o->args = argv + optind;
		o->nr_args = argc - optind;
		/* Options end at the first word: a --json after the words
		 * (as every synopsis shows it) is still the option. */
		if ((sc->opts & OPT_JSON) &&
		    !strcmp(o->args[o->nr_args - 1], "--json")) {
			o->json = true;
			o->nr_args--;
		}
	} else if (optind < argc) {
		return usage_errorf(sc, "unexpected argument '%s'",
				    argv[optind]);
	}
	if (o->all && o->id)
		return usage_errorf(sc, "give -i ID or --all, not both");
	if ((sc->opts & OPT_ID) && !o->id && !o->all)
		return usage_errorf(sc,
				    "which tapdisk? give -i ID (see "
				    "tap-ctl list)%s",
				    sc->opts & OPT_ALL ? ", or --all" : "");
	if ((sc->opts & OPT_XEN) && (!o->domid || !o->vdev))
		return usage_errorf(sc, "give the guest and its disk: --domid "
					"DOMID --vdev xvdX");
	if ((sc->opts & OPT_CREATE) && !o->chain && !o->disk)
		return usage_errorf(sc, "give the disk with -a CHAIN, e.g. "
					"-a aio:/srv/disk.img, or --disk NAME "
					"of the disk registry");
	return -1;
}

static int cmd_help(int argc, char **argv)
{
	const struct subcommand *sc;

	if (argc < 2) {
		global_usage(stdout);
		return EXIT_SUCCESS;
	}
	if (!(sc = find_subcommand(argv[1])))
		return usage_errorf(NULL, "no command '%s'", argv[1]);
	subcommand_usage(sc, stdout);
	return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	struct cmd_opts o = {.timeout_s = DEFAULT_TIMEOUT_S};
	const struct subcommand *sc;
	int i = 1, status;

	signal(SIGPIPE, SIG_IGN);
	/* Options before the command: --run-dir DIR, --help, --version. */
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return cmd_help(1, argv);
		if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version"))
			return cli_version("tap-ctl");
		if (!strcmp(argv[i], "--run-dir") && i + 1 < argc)
			o.run_dir = argv[++i];
		else if (!strncmp(argv[i], "--run-dir=", 10))
			o.run_dir = argv[i] + 10;
		else
			return usage_errorf(NULL, "unknown option '%s'",
					    argv[i]);
	}
	if (i == argc)
		return usage_errorf(NULL, "give a command: create, list, info, "
					  "stats, metrics, pause, resume, "
					  "destroy, driver, attach, detach or "
					  "release");
	if (tapctl_blktap_call(argc - i, argv + i))
		return tapctl_blktap_refuse(argc - i, argv + i, stderr);
	if (!strcmp(argv[i], "help"))
		return cmd_help(argc - i, argv + i);
	if (!(sc = find_subcommand(argv[i])))
		return usage_errorf(NULL, "unknown command '%s'", argv[i]);
	if ((status = parse_subcommand(sc, &o, argc - i, argv + i)) >= 0)
		return status;
	o.run_dir = td_ctl_run_dir(o.run_dir);
	return sc->run(&o);
}
