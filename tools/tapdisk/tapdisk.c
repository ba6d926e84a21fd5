/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapdisk.c - the tapdisk daemon: serve one vbd over NBD, shm and Xen, answer
 * its control socket, and on SIGINT, SIGTERM or "destroy" shut down
 * without losing an acknowledged write.
 *
 * This is the only place besides tests that knows every driver: it hands
 * td_driver_table to the core.  The command line is in tapdisk-options.c.
 *
 * Shutdown (tapdisk_stop): the control server refuses pause/resume, then
 * td_shutdown_start (tapdisk/shutdown.h) stops the frontends, drains and
 * flushes the vbd and closes it; destroy waiters get the result, sockets
 * go away, exit 0 ("all acknowledged writes flushed") or 1.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/loop.h"
#include "drivers/drivers.h"
#include "frontends/nbd/nbd.h"
#include "frontends/shm/shm.h"
#include "frontends/xen/xen.h"
#include "tapdisk/control/control.h"
#include "tapdisk/shutdown.h"
#include "tapdisk/snapshot.h"
#include "tapdisk/vbd.h"
#include "tools/cli/cli.h"
#include "tools/cli/service-notify.h"
#include "tools/tapdisk/tapdisk.h"

#define ADDR_MAX	      (PATH_MAX + 16)
#define TAPDISK_MAX_FRONTENDS 3 /* one server of each kind */
#define MSG_MAX		      1024

struct tapdisk {
	struct options opt;
	char name[TD_VBD_NAME_MAX];
	char run_dir[PATH_MAX];
	char ctl_path[PATH_MAX];
	char nbd_addr[TAPDISK_MAX_NBD_ADDRS][ADDR_MAX];
	char shm_path[TAPDISK_MAX_SHM_PATHS][PATH_MAX];
	char msg[MSG_MAX]; /* why start-up failed */

	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_frontend *frontends[TAPDISK_MAX_FRONTENDS];
	unsigned int nr_frontends;
	const char *frontend_why; /* why the last start_frontend failed */
	struct td_frontend *xen;  /* also in frontends; for "info" */
	struct td_ctl_server *ctl;
	int sig_fd;
	struct td_fd sig_fde;

	struct td_shutdown shutdown;
	bool stopping;
	int exit_status;
};

/* --- start-up ------------------------------------------------------------------- */

/* Why start-up failed, into td->msg (reported by report_ready); err. */
#define fail(td, err, ...) \
	cli_explain((td)->msg, sizeof((td)->msg), err, CLI_PLAIN, __VA_ARGS__)

static int setup_names(struct tapdisk *td)
{
	const char *dir = td_ctl_run_dir(td->opt.run_dir);
	int err = td_ctl_make_run_dir(dir);

	if (err)
		return fail(td, err,
			    "cannot create the run directory %s: %s; "
			    "pick another with --run-dir",
			    dir, strerror(-err));
	if (!realpath(dir, td->run_dir))
		return fail(td, -errno,
			    "cannot resolve the run directory %s: "
			    "%s",
			    dir, strerror(errno));
	snprintf(td->name, sizeof(td->name), "%s", td->opt.name ?: "");
	if (!td->opt.name)
		snprintf(td->name, sizeof(td->name), "vbd-%d", (int)getpid());
	if (td_ctl_socket_path(td->ctl_path, sizeof(td->ctl_path), td->run_dir,
			       (int)getpid()))
		return fail(td, -ENAMETOOLONG,
			    "the run directory %s is too "
			    "long; use a shorter --run-dir",
			    td->run_dir);
	return 0;
}

/* "unix" -> the default socket; a relative unix path made absolute. */
static int resolve_nbd_addr(struct tapdisk *td, const char *addr, char *out)
{
	char cwd[PATH_MAX];
	int n;

	if (!strcmp(addr, "unix"))
		n = snprintf(out, ADDR_MAX, "unix:%s/nbd-%s.sock", td->run_dir,
			     td->name);
	else if (!strncmp(addr, "unix:", 5) && addr[5] && addr[5] != '/' &&
		 getcwd(cwd, sizeof(cwd)))
		n = snprintf(out, ADDR_MAX, "unix:%s/%s", cwd, addr + 5);
	else if ((!strncmp(addr, "unix:", 5) && addr[5]) ||
		 (!strncmp(addr, "tcp:", 4) && strchr(addr + 4, ':')))
		n = snprintf(out, ADDR_MAX, "%s", addr);
	else
		return fail(td, -EINVAL,
			    "bad --nbd address '%s': use "
			    "unix:/path/to.sock, unix, "
			    "tcp:HOST:PORT or tcp::PORT",
			    addr);
	if (n < 0 || n >= ADDR_MAX)
		return fail(td, -ENAMETOOLONG, "--nbd address '%s' is too long",
			    addr);
	return 0;
}

/*
 * The first line of a refused chain is the driver's own reason (naming
 * the file, and its line); advice on the syntax of -a only when the
 * chain's text is malformed (an unknown driver, a filter at the bottom).
 */
static int open_vbd(struct tapdisk *td)
{
	struct td_vbd_open_error why;
	struct td_vbd_params vp = {
		.name = td->name,
		.chain = td->opt.chain,
		.read_only = td->opt.read_only,
		.max_inflight = td->opt.max_inflight,
		.error = &why,
	};
	int err = td_vbd_open(td->loop, td_driver_table, &vp, &td->vbd);

	if (!err)
		return 0;
	if (why.syntax)
		return cli_explain(td->msg, sizeof(td->msg), err,
				   CLI_CHAIN_SYNTAX, "%s", why.reason);
	if (why.reason[0])
		return fail(td, err, "%s", why.reason);
	return cli_explain(td->msg, sizeof(td->msg), err, CLI_CHAIN,
			   "cannot open -a %s", td->opt.chain);
}

/*
 * A snapshot job file for this disk means a copy was under way when the
 * last tapdisk stopped: copy-before-write must be on before the first
 * frontend I/O, so the job resumes here or tapdisk does not start.
 */
static int resume_snapshot(struct tapdisk *td)
{
	char path[PATH_MAX];
	struct td_strbuf why;
	int err = td_snap_job_path(td->name, path, sizeof(path));

	if (err)
		return fail(td, err, "the snapshot job path is too long");
	td_strbuf_init(&why);
	err = td_vbd_snapshot_resume(td->vbd, path, &why);
	if (err && err != -ENOENT)
		err = fail(td, err,
			   "%s; tapdisk does not serve the disk without "
			   "copy-before-write while its job file is there: "
			   "fix the target, or drop the job (remove %s)",
			   why.len ? td_strbuf_str(&why) : strerror(-err),
			   path);
	else
		err = 0;
	td_strbuf_free(&why);
	return err;
}

/* Every frontend kind, in the order "stats" reports them. */
static const struct td_frontend_ops *const frontend_table[] = {
	&td_nbd_frontend,
	&td_shm_frontend,
	&td_xen_frontend,
	NULL,
};

/* Create a server of kind ops; *out is kept for the control socket,
 * the shutdown and the cleanup. */
static int start_frontend(struct tapdisk *td, const struct td_frontend_ops *ops,
			  const void *params, struct td_frontend **out)
{
	uint64_t errs = td_log_err_count();
	int err = ops->create(td->loop, td->vbd, params, out);

	if (!err)
		td->frontends[td->nr_frontends++] = *out;
	/* The reason the frontend logged heads the report, not the errno. */
	td->frontend_why =
		td_log_err_count() != errs ? td_log_last_err() : strerror(-err);
	return err;
}

static int start_nbd(struct tapdisk *td)
{
	struct td_nbd_params np = {
		.export_name = td->opt.export_name ?: "",
		.access = &td->opt.nbd_access,
		.max_clients = td->opt.nbd_max_clients,
		.handshake_timeout_ms = td->opt.nbd_handshake_timeout_s * 1000,
		.io_timeout_ms = td->opt.nbd_io_timeout_s * 1000,
		.idle_timeout_ms = td->opt.nbd_idle_timeout_s * 1000,
	};
	struct td_frontend *fe;
	int err;

	if (!td->opt.nr_nbd) {
		if (!td->opt.nr_shm && td->opt.xen == TAPDISK_XEN_OFF)
			td_warn("no --nbd address and no --shm path: nothing "
				"will reach this disk but the control socket");
		return 0;
	}
	err = start_frontend(td, &td_nbd_frontend, &np, &fe);
	if (err)
		return fail(td, err, "cannot start the NBD server: %s",
			    td->frontend_why);
	for (unsigned int i = 0; i < td->opt.nr_nbd; i++) {
		if ((err = resolve_nbd_addr(td, td->opt.nbd[i],
					    td->nbd_addr[i])))
			return err;
		err = td_frontend_listen(fe, td->nbd_addr[i]);
		if (err)
			return fail(td, err,
				    "cannot serve NBD on %s: %s; pick "
				    "another --nbd address or stop "
				    "whoever uses it",
				    td->nbd_addr[i], strerror(-err));
	}
	return 0;
}

/* "unix" -> the default socket; a relative path made absolute. */
static int resolve_shm_path(struct tapdisk *td, const char *path, char *out)
{
	char cwd[PATH_MAX];
	int n;

	if (!strcmp(path, "unix"))
		n = snprintf(out, PATH_MAX, "%s/shm-%s.sock", td->run_dir,
			     td->name);
	else if (path[0] != '/' && getcwd(cwd, sizeof(cwd)))
		n = snprintf(out, PATH_MAX, "%s/%s", cwd, path);
	else
		n = snprintf(out, PATH_MAX, "%s", path);
	if (!*path || n < 0 || n >= PATH_MAX)
		return fail(td, -ENAMETOOLONG,
			    "bad --shm path '%s': give a socket path or unix",
			    path);
	return 0;
}

static int start_shm(struct tapdisk *td)
{
	struct blkif_config cfg;
	struct td_shm_params sp = {.blkif = &cfg};
	struct td_frontend *fe;
	int err;

	if (!td->opt.nr_shm)
		return 0;
	blkif_config_init(&cfg);
	cfg.max_ring_order = BLKIF_MAX_RING_ORDER;
	if (td->opt.max_indirect_segments)
		cfg.max_indirect_segments = td->opt.max_indirect_segments;
	err = start_frontend(td, &td_shm_frontend, &sp, &fe);
	if (err)
		return fail(td, err, "cannot start the shm server: %s",
			    td->frontend_why);
	for (unsigned int i = 0; i < td->opt.nr_shm; i++) {
		if ((err = resolve_shm_path(td, td->opt.shm[i],
					    td->shm_path[i])))
			return err;
		err = td_frontend_listen(fe, td->shm_path[i]);
		if (err)
			return fail(td, err,
				    "cannot serve shm on %s: %s; pick another "
				    "--shm path or stop whoever uses it",
				    td->shm_path[i], strerror(-err));
	}
	return 0;
}

/* The Xen transport: devices come from tap-ctl attach, or from xl when
 * their params name this tapdisk (--name), through xenstore. */
static int start_xen(struct tapdisk *td)
{
	struct blkif_config cfg;
	struct td_xen_params xp = {.blkif = &cfg, .name = td->opt.name};
	int err;

	if (td->opt.xen == TAPDISK_XEN_OFF)
		return 0;
	blkif_config_init(&cfg);
	if (td->opt.max_indirect_segments)
		cfg.max_indirect_segments = td->opt.max_indirect_segments;
	err = start_frontend(td, &td_xen_frontend, &xp, &td->xen);
	if (err && td->opt.xen == TAPDISK_XEN_AUTO)
		return 0; /* not a Xen domain: logged */
	if (err)
		return fail(td, err,
			    "cannot serve Xen frontends: %s; is this a Xen "
			    "domain with xenstored running? (or --xen off)",
			    strerror(-err));
	return 0;
}

static void tapdisk_stop(struct tapdisk *td, const char *why);

static void on_signal(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct tapdisk *td = opaque;
	struct signalfd_siginfo si;

	while (read(fde->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo != SIGHUP) {
			tapdisk_stop(td, strsignal((int)si.ssi_signo));
			continue;
		}
		/* logrotate moved the file: append to a new one. */
		int err = td_log_reopen();

		if (err < 0)
			td_warn("SIGHUP: cannot open the log file again: %s",
				strerror(-err));
		else
			td_info("SIGHUP: %s", err ? "no log file to open again"
						  : "log file opened again");
	}
}

static void on_destroy(void *opaque)
{
	tapdisk_stop(opaque, "destroy requested over the control socket");
}

static int start_control(struct tapdisk *td)
{
	struct td_ctl_params cp = {
		.path = td->ctl_path,
		.vbd = td->vbd,
		.frontend_table = frontend_table,
		.frontends = td->frontends,
		.nr_frontends = td->nr_frontends,
		.destroy = on_destroy,
		.opaque = td,
	};
	sigset_t set;
	int err = td_ctl_server_create(td->loop, &cp, &td->ctl);

	if (err)
		return fail(td, err, "cannot open the control socket %s: %s",
			    td->ctl_path, strerror(-err));
	for (unsigned int i = 0; i < td->opt.nr_nbd; i++)
		td_ctl_server_add_frontend(td->ctl, "nbd", td->nbd_addr[i]);
	for (unsigned int i = 0; i < td->opt.nr_shm; i++)
		td_ctl_server_add_frontend(td->ctl, "shm", td->shm_path[i]);
	if (td->xen)
		td_ctl_server_add_frontend(
			td->ctl, "xen",
			td_xen_server_root(td_xen_server_of(td->xen)));
	/* Blocked since the chain opened (stop_signals). */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	td->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (td->sig_fd < 0)
		return fail(td, -errno, "signalfd: %s", strerror(errno));
	err = td_loop_add_fd(td->loop, &td->sig_fde, td->sig_fd, EPOLLIN,
			     on_signal, td);
	return err ? fail(td, err, "cannot watch signals: %s", strerror(-err))
		   : 0;
}

/*
 * SIGINT and SIGTERM during start-up.  Until the chain is open they keep
 * their default, fatal disposition (how = SIG_UNBLOCK): an open that blocks
 * (a FIFO on a file system that honours signals, an NFS server that is
 * gone: the kernel ends its killable waits only for a fatal signal) must
 * not leave a process that only SIGKILL ends, and nothing this process
 * made needs removing yet.  Before the first socket file is made they are
 * blocked (SIG_BLOCK) and wait for the signalfd of start_control: from
 * then on they stop tapdisk through tapdisk_stop, which removes them.
 */
static void stop_signals(int how)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (how == SIG_UNBLOCK) { /* an ignored one (a shell's '&') too */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
	}
	sigprocmask(how, &set, NULL);
}

static int tapdisk_start(struct tapdisk *td)
{
	int err;

	if ((err = setup_names(td)))
		return err;
	if ((err = td_loop_create(&td->loop)))
		return fail(td, err, "cannot create the event loop: %s",
			    strerror(-err));
	td_loop_set_poll_budget(td->loop, td->opt.poll_us);
	if ((err = open_vbd(td)) || (err = resume_snapshot(td)))
		return err;
	stop_signals(SIG_BLOCK);
	if ((err = start_nbd(td)) || (err = start_shm(td)) ||
	    (err = start_xen(td)) || (err = start_control(td)))
		return err;
	td_info("serving %s as %s; control %s", td->opt.chain, td->name,
		td->ctl_path);
	for (unsigned int i = 0; i < td->opt.nr_nbd; i++)
		td_info("NBD on %s", td->nbd_addr[i]);
	for (unsigned int i = 0; i < td->opt.nr_shm; i++)
		td_info("shm on %s", td->shm_path[i]);
	return 0;
}

/* --- shutdown ----------------------------------------------------------------- */

/* The vbd is closed (or left open after a timeout): answer destroy. */
static void stopped(struct td_shutdown *sd, void *opaque)
{
	struct tapdisk *td = opaque;

	if (sd->err)
		td_err("%s", sd->msg);
	else
		td_info("exiting: %s", sd->msg);
	if (sd->vbd_closed)
		td->vbd = NULL;
	td->exit_status = sd->err ? EXIT_FAILURE : EXIT_SUCCESS;
	td_ctl_server_finish(td->ctl, sd->err, sd->msg);
	td_loop_stop(td->loop);
}

/* A service manager that did not hear us times the start (or stop) out:
 * say why in the log. */
static void warn_notify(int err)
{
	if (err)
		td_warn("cannot tell systemd ($NOTIFY_SOCKET): %s",
			strerror(-err));
}

static void tapdisk_stop(struct tapdisk *td, const char *why)
{
	struct td_shutdown_params sp = {
		.vbd = td->vbd,
		.frontends = td->frontends,
		.nr_frontends = td->nr_frontends,
		.done = stopped,
		.opaque = td,
	};
	int err;

	if (td->stopping) {
		td_info("%s: already stopping", why);
		return;
	}
	td->stopping = true;
	td_info("stopping (%s): finishing the I/O in flight", why);
	if (td->opt.foreground)
		warn_notify(
			cli_notify_stopping("stopping %s: %s", td->name, why));
	td_ctl_server_begin_shutdown(td->ctl);
	err = td_shutdown_start(&td->shutdown, td->loop, &sp);
	if (err) {
		td_err("cannot shut down: %s", strerror(-err));
		td->exit_status = EXIT_FAILURE;
		td_ctl_server_finish(td->ctl, err, "cannot shut down");
		td_loop_stop(td->loop);
	}
}

/* --- main ----------------------------------------------------------------------- */

static void report_ready(struct tapdisk *td, int err)
{
	char line[MSG_MAX + 16];
	int n;

	if (err)
		fprintf(stderr, "tapdisk: %s\n", td->msg);
	/* systemd (Type=notify): the disk is open and every frontend and
	 * the control socket listen.  tap-ctl's children keep quiet. */
	if (!err && td->opt.foreground)
		warn_notify(cli_notify_ready("serving %s (%s)", td->name,
					     td->opt.chain));
	if (td->opt.ready_fd < 0)
		return;
	n = err ? snprintf(line, sizeof(line), "ERR %s\n", td->msg)
		: snprintf(line, sizeof(line), "OK %d\n", (int)getpid());
	if (write(td->opt.ready_fd, line, (size_t)n) != n)
		td_warn("cannot report to tap-ctl: %s", strerror(errno));
	close(td->opt.ready_fd);
	td->opt.ready_fd = -1;
}

/* Remove what this process created, in the reverse order. */
static void tapdisk_cleanup(struct tapdisk *td)
{
	struct stat st;

	td_ctl_server_destroy(td->ctl);
	/* A connection or ring still busy after a timeout is left. */
	for (unsigned int i = 0; i < td->nr_frontends; i++)
		td_frontend_destroy(td->frontends[i]);
	for (unsigned int i = 0; i < td->opt.nr_nbd; i++) {
		const char *path = td->nbd_addr[i] + 5;

		if (!strncmp(td->nbd_addr[i], "unix:", 5) &&
		    !lstat(path, &st) && S_ISSOCK(st.st_mode))
			unlink(path);
	}
	if (td->vbd && td_vbd_close(td->vbd))
		td_warn("the vbd still has I/O in flight; not closed");
	if (td->sig_fd >= 0) {
		td_loop_del_fd(&td->sig_fde);
		close(td->sig_fd);
	}
	td_loop_destroy(td->loop);
}

/* The syslog ident: "tapdisk/NAME" (NAME as setup_names makes it). */
static void log_ident(const struct options *o, char *ident, size_t len)
{
	if (o->name)
		snprintf(ident, len, "tapdisk/%s", o->name);
	else
		snprintf(ident, len, "tapdisk/vbd-%d", (int)getpid());
}

static int open_log(const struct options *o)
{
	char ident[TD_VBD_NAME_MAX + 16];
	const char *what = o->log_target;
	int err = 0;

	td_log_set_level((enum td_log_level)o->log_level);
	log_ident(o, ident, sizeof(ident));
	if (o->log_file)
		err = td_log_open_file(o->log_file);
	else if (what)
		err = td_log_set_target(what, ident);
	if (err)
		fprintf(stderr,
			"tapdisk: cannot open the log %s: %s; check it "
			"exists and is writable\n",
			o->log_file ?: what, strerror(-err));
	return err;
}

/*
 * After a clean stop: remove RUN_DIR/tapdisk-PID.log when it is this
 * process's stderr (tap-ctl create made it so), so that nothing is left in
 * the run directory.  A crash or a failure keeps it for the operator, and
 * so does a sanitizer build: its leak report is written after main returns
 * and the tests look for it there.
 */
static void remove_own_log(const struct tapdisk *td)
{
	char path[PATH_MAX];
	struct stat st, err_st;

#if defined(__SANITIZE_ADDRESS__)
	if (td)
		return;
#endif
	if (!td->run_dir[0] ||
	    snprintf(path, sizeof(path), "%s/tapdisk-%d.log", td->run_dir,
		     (int)getpid()) >= (int)sizeof(path))
		return;
	if (!stat(path, &st) && !fstat(STDERR_FILENO, &err_st) &&
	    st.st_dev == err_st.st_dev && st.st_ino == err_st.st_ino)
		unlink(path);
}

/* At exit: what the syslog sink could not send, on stderr and the log. */
static void close_log(void)
{
	uint64_t dropped = td_log_syslog_dropped();

	if (dropped)
		td_warn("%llu log lines were dropped (syslog too slow)",
			(unsigned long long)dropped);
	dropped = td_log_syslog_close();
	if (dropped)
		fprintf(stderr, "tapdisk: %llu log lines dropped\n",
			(unsigned long long)dropped);
}

int main(int argc, char **argv)
{
	struct tapdisk td = {.sig_fd = -1};
	int status, err;
	sigset_t hup;

	if ((status = tapdisk_parse_options(&td.opt, argc, argv)) >= 0)
		return status;
	/* SIGHUP (reopen the log) waits for the signalfd of start_control. */
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	sigprocmask(SIG_BLOCK, &hup, NULL);
	if (open_log(&td.opt))
		return EXIT_FAILURE;
	stop_signals(SIG_UNBLOCK);
	signal(SIGPIPE, SIG_IGN);

	err = tapdisk_start(&td);
	report_ready(&td, err);
	if (!err) {
		if (!td.opt.foreground && chdir("/"))
			td_warn("chdir /: %s", strerror(errno));
		err = td_loop_run(td.loop);
		if (err) {
			td_err("event loop failed: %s", strerror(-err));
			td.exit_status = EXIT_FAILURE;
		}
	}
	if (td.loop)
		tapdisk_cleanup(&td);
	close_log();
	if (!err && td.exit_status == EXIT_SUCCESS)
		remove_own_log(&td);
	return err ? EXIT_FAILURE : td.exit_status;
}
