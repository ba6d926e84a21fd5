/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapdisk.c - the tapdisk daemon: serve one vbd over NBD, shm and Xen, answer
 * its control socket, and on SIGINT, SIGTERM or "destroy" shut down
 * without losing an acknowledged write.
 *
 * This is the only place besides tests that knows every driver: it hands
 * td_driver_table to the core.  The command line is in tapdisk-options.c.
 *
 * Shutdown, in order (tapdisk_stop and the callbacks after it):
 *   1. the control server refuses pause/resume; a paused vbd is resumed so
 *      that the I/O it holds can finish;
 *   2. the NBD server stops accepting and reading, and lets the commands
 *      in flight finish and be answered; at the same time the shm server
 *      stops taking requests from its rings, lets those in flight be
 *      answered and closes the rings, and the Xen server disconnects its
 *      rings and marks its devices Closed (td_frontend_shutdown);
 *   3. the vbd drains (td_vbd_pause), then one TD_OP_FLUSH goes through
 *      td_vbd_submit when the disk is writable and the chain can flush;
 *   4. the vbd closes, destroy waiters get the result, sockets go away,
 *      exit 0 ("all acknowledged writes flushed") or 1.
 * A shutdown that takes longer than SHUTDOWN_TIMEOUT_US exits 1 without
 * closing the disk, saying so.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
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
#include "tapdisk/vbd.h"
#include "tools/tapdisk/tapdisk.h"

#define ADDR_MAX	      (PATH_MAX + 16)
#define TAPDISK_MAX_FRONTENDS 3 /* one server of each kind */
#define MSG_MAX		      1024
#define SHUTDOWN_TIMEOUT_US   (60ull * 1000000)

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
	struct td_frontend *xen; /* also in frontends; for "info" */
	struct td_ctl_server *ctl;
	int sig_fd;
	struct td_fd sig_fde;

	struct td_timer shutdown_timer;
	struct td_defer stop_defer;  /* runs stop_start */
	struct td_defer close_defer; /* runs stop_close */
	int stop_err;
	char stop_msg[MSG_MAX];
	struct td_vbd_io flush_io;
	bool stopping;
	unsigned int frontends_stopping; /* frontends shutting down */
	int exit_status;
};

/* --- start-up ------------------------------------------------------------------- */

static int fail(struct tapdisk *td, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct tapdisk *td, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(td->msg, sizeof(td->msg), fmt, ap);
	va_end(ap);
	return err < 0 ? err : -EINVAL;
}

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

static const char *chain_advice(int err)
{
	switch (err) {
	case -ENOENT:
		return "check the driver name and the path in -a";
	case -EACCES:
	case -EPERM:
		return "check the file's permissions (or add --read-only)";
	case -EROFS:
		return "add --read-only";
	case -EBUSY:
	case -EAGAIN:
		return "is another tapdisk serving it? see tap-ctl list";
	case -EINVAL:
	case -E2BIG:
		return "check the syntax of -a, e.g. aio:/srv/disk.img or "
		       "null:size=1G";
	default:
		return "see the messages above";
	}
}

static int open_vbd(struct tapdisk *td)
{
	struct td_vbd_params vp = {
		.name = td->name,
		.chain = td->opt.chain,
		.read_only = td->opt.read_only,
		.max_inflight = td->opt.max_inflight,
	};
	int err = td_vbd_open(td->loop, td_driver_table, &vp, &td->vbd);

	if (err)
		return fail(td, err, "cannot open -a %s: %s; %s", td->opt.chain,
			    strerror(-err), chain_advice(err));
	return 0;
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
	int err = ops->create(td->loop, td->vbd, params, out);

	if (!err)
		td->frontends[td->nr_frontends++] = *out;
	return err;
}

static int start_nbd(struct tapdisk *td)
{
	struct td_nbd_params np = {.export_name = td->opt.export_name ?: ""};
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
			    strerror(-err));
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
			    strerror(-err));
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

	while (read(fde->fd, &si, sizeof(si)) == sizeof(si))
		tapdisk_stop(td, strsignal((int)si.ssi_signo));
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
	/* The signals were blocked at the start of main. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	td->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (td->sig_fd < 0)
		return fail(td, -errno, "signalfd: %s", strerror(errno));
	err = td_loop_add_fd(td->loop, &td->sig_fde, td->sig_fd, EPOLLIN,
			     on_signal, td);
	return err ? fail(td, err, "cannot watch signals: %s", strerror(-err))
		   : 0;
}

static int tapdisk_start(struct tapdisk *td)
{
	int err;

	if ((err = setup_names(td)))
		return err;
	if ((err = td_loop_create(&td->loop)))
		return fail(td, err, "cannot create the event loop: %s",
			    strerror(-err));
	if ((err = open_vbd(td)) || (err = start_nbd(td)) ||
	    (err = start_shm(td)) || (err = start_xen(td)) ||
	    (err = start_control(td)))
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

/*
 * Close the vbd, answer destroy, stop the loop.  A step of its own: the
 * callers run inside the vbd's completion or drain callbacks, and closing
 * the vbd there would free the requests the vbd is still walking.
 */
static void stop_close(struct td_defer *d, void *opaque)
{
	struct tapdisk *td = opaque;

	if (td_vbd_close(td->vbd) == 0)
		td->vbd = NULL;
	td_ctl_server_finish(td->ctl, td->stop_err, td->stop_msg);
	td_loop_stop(td->loop);
}

static void stop_finish(struct tapdisk *td, int err, const char *message)
{
	td_loop_timer_cancel(&td->shutdown_timer);
	if (err)
		td_err("%s", message);
	else
		td_info("exiting: %s", message);
	td->stop_err = err;
	snprintf(td->stop_msg, sizeof(td->stop_msg), "%s", message);
	td->exit_status = err ? EXIT_FAILURE : EXIT_SUCCESS;
	td_loop_defer(td->loop, &td->close_defer, stop_close, td);
}

static void flush_done(struct td_vbd_io *io, int err)
{
	struct tapdisk *td = io->opaque;
	char msg[MSG_MAX];

	if (err)
		snprintf(msg, sizeof(msg),
			 "the final flush failed: %s; acknowledged writes may "
			 "not be on stable storage",
			 strerror(-err));
	stop_finish(td, err, err ? msg : "all acknowledged writes flushed");
}

static void vbd_drained(struct td_vbd *vbd, void *opaque)
{
	struct tapdisk *td = opaque;
	const struct td_disk_info *info = td_vbd_get_info(vbd);
	int err;

	/* No frontend submits any more: let the flush through. */
	td_vbd_resume(vbd);
	if (info->read_only) {
		stop_finish(td, 0, "read-only disk: nothing to flush");
		return;
	}
	if (!(info->features & TD_FEAT_FLUSH)) {
		stop_finish(td, 0,
			    "the chain cannot flush: every write was "
			    "complete when acknowledged");
		return;
	}
	memset(&td->flush_io, 0, sizeof(td->flush_io));
	td->flush_io.op = TD_OP_FLUSH;
	td->flush_io.cb = flush_done;
	td->flush_io.opaque = td;
	err = td_vbd_submit(vbd, &td->flush_io);
	if (err)
		flush_done(&td->flush_io, err);
}

static void stop_drain(struct tapdisk *td)
{
	int err = td_vbd_pause(td->vbd, vbd_drained, td);

	if (err) {
		td_err("cannot drain the vbd: %s", strerror(-err));
		stop_finish(td, err, "cannot drain the vbd before closing it");
	}
}

/* One frontend has stopped; the drain starts after the last. */
static void frontend_stopped(void *opaque)
{
	struct tapdisk *td = opaque;

	if (--td->frontends_stopping == 0)
		stop_drain(td);
}

static void stop_timeout(struct td_timer *t, void *opaque)
{
	struct tapdisk *td = opaque;
	struct td_vbd_stats st;
	char msg[MSG_MAX];

	td_vbd_get_stats(td->vbd, &st);
	snprintf(msg, sizeof(msg),
		 "shutdown timed out after %llu s with %llu I/Os in flight: "
		 "exiting without closing the disk; acknowledged writes may "
		 "not be on stable storage",
		 SHUTDOWN_TIMEOUT_US / 1000000,
		 (unsigned long long)st.inflight);
	stop_finish(td, -ETIMEDOUT, msg);
}

static void stop_start(struct td_defer *d, void *opaque)
{
	struct tapdisk *td = opaque;

	/* Held at one until all have started: their callbacks are
	 * deferred, but the count must not reach zero in between. */
	td->frontends_stopping = 1;
	for (unsigned int i = 0; i < td->nr_frontends; i++)
		if (!td_frontend_shutdown(td->frontends[i], frontend_stopped,
					  td))
			td->frontends_stopping++;
	frontend_stopped(td);
}

static void tapdisk_stop(struct tapdisk *td, const char *why)
{
	if (td->stopping) {
		td_info("%s: already stopping", why);
		return;
	}
	td->stopping = true;
	td_info("stopping (%s): finishing the I/O in flight", why);
	td_ctl_server_begin_shutdown(td->ctl);
	td_vbd_resume(td->vbd); /* held I/O must finish too */
	td_loop_timer_arm(td->loop, &td->shutdown_timer, SHUTDOWN_TIMEOUT_US,
			  stop_timeout, td);
	td_loop_defer(td->loop, &td->stop_defer, stop_start, td);
}

/* --- main ----------------------------------------------------------------------- */

static void report_ready(struct tapdisk *td, int err)
{
	char line[MSG_MAX + 16];
	int n;

	if (err)
		fprintf(stderr, "tapdisk: %s\n", td->msg);
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

static int open_log(const struct options *o)
{
	FILE *f;

	td_log_set_level((enum td_log_level)o->log_level);
	if (!o->log_file)
		return 0;
	f = fopen(o->log_file, "ae");
	if (!f) {
		fprintf(stderr,
			"tapdisk: cannot open the log file %s: %s; "
			"check the directory exists and is writable\n",
			o->log_file, strerror(errno));
		return -errno;
	}
	setvbuf(f, NULL, _IOLBF, 0);
	td_log_set_stream(f);
	return 0;
}

int main(int argc, char **argv)
{
	struct tapdisk td = {.sig_fd = -1};
	sigset_t set;
	int status, err;

	if ((status = tapdisk_parse_options(&td.opt, argc, argv)) >= 0)
		return status;
	if (open_log(&td.opt))
		return EXIT_FAILURE;
	/* Block before anything starts, so no signal is lost or fatal. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
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
	return err ? EXIT_FAILURE : td.exit_status;
}
