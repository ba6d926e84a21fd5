/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-master.c - the master daemon's main(): options, daemon mode, pid
 * file, signals; the work is in master/ (server.c, dispatch.c, store*.c).
 *
 * In daemon mode the parent waits until the child listens (or failed) and
 * exits with its verdict, so that whoever starts the master learns at once
 * whether it runs.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "master/server/server.h"
#include "master/server/store.h"
#include "tools/cli/service-notify.h"
#include "tools/stripe-master/stripe-master.h"

#define MSG_SIZE	 512
#define MIGRATE_MSG_SIZE 1024
#define DIR_MODE	 0755
#define READY_OK	 "OK"
#define READY_BYTES	 600
#define LOG_MODE	 0640

static char abs_db[PATH_MAX], abs_pid[PATH_MAX], abs_log[PATH_MAX];

/* path made absolute (daemon mode changes to /); "" for NULL. */
static int absolute(const char *path, char *out, size_t size)
{
	char cwd[PATH_MAX];

	if (!path) {
		out[0] = '\0';
		return 0;
	}
	if (path[0] == '/')
		return (size_t)snprintf(out, size, "%s", path) < size
			       ? 0
			       : -ENAMETOOLONG;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	return (size_t)snprintf(out, size, "%s/%s", cwd, path) < size
		       ? 0
		       : -ENAMETOOLONG;
}

/* Create the database's directory when it is missing (one level). */
static int make_db_dir(const char *db, char *msg, size_t len)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(db, '/');
	int err;

	if (!slash || slash == db)
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - db), db);
	if (!mkdir(dir, DIR_MODE) || errno == EEXIST)
		return 0;
	err = errno;
	if (snprintf(msg, len, "cannot create %s for the database: %s", dir,
		     strerror(err)) >= (int)len)
		msg[len - 1] = '\0';
	return -err;
}

static int check_store(const struct master_options *o)
{
	struct master_store *st;
	char msg[MSG_SIZE] = "";
	int ret = master_store_open(o->db_path, o->extent_bytes, &st, msg,
				    sizeof(msg));

	if (!ret && o->store_url &&
	    (ret = master_store_attach_etcd(st, o->store_url, msg,
					    sizeof(msg))))
		master_store_close(st);
	if (ret) {
		fprintf(stderr, "stripe-master: %s\n", msg);
		return EXIT_FAILURE;
	}
	ret = master_store_check(st, msg, sizeof(msg));
	master_store_close(st);
	if (ret) {
		fprintf(stderr, "stripe-master: check failed: %s\n",
			ret == -EUCLEAN ? msg : strerror(-ret));
		return EXIT_FAILURE;
	}
	printf("%s: consistent\n", o->db_path);
	return EXIT_SUCCESS;
}

/* --migrate: move the store and exit. */
static int migrate_store(const struct master_options *o)
{
	char msg[MIGRATE_MSG_SIZE] = "";
	int ret = !strcmp(o->migrate, "to-etcd")
			  ? master_store_migrate_to_etcd(o->db_path,
							 o->store_url, o->force,
							 msg, sizeof(msg))
			  : master_store_migrate_to_sqlite(o->store_url,
							   o->db_path, o->force,
							   msg, sizeof(msg));

	if (ret) {
		fprintf(stderr, "stripe-master: %s\n",
			*msg ? msg : strerror(-ret));
		return EXIT_FAILURE;
	}
	printf("%s\n", msg);
	return EXIT_SUCCESS;
}

/* SIGINT and SIGTERM become readable on the returned signalfd. */
static int stop_signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static int write_pid_file(const char *path, char *msg, size_t len)
{
	FILE *f;

	if (!path || !*path)
		return 0;
	if (!(f = fopen(path, "we")) ||
	    fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f)) {
		snprintf(msg, len, "cannot write the pid file %s: %s", path,
			 strerror(errno));
		return -EIO;
	}
	return 0;
}

static void log_stats(const struct master_server *ms)
{
	struct master_stats s;

	master_server_get_stats(ms, &s);
	td_info("stopping: %llu calls in %llu rounds (largest %llu calls, "
		"longest %llu us, %llu of 2 ms or more), %llu failed rounds, "
		"%llu undecodable calls, %llu refused, %llu idle connections "
		"closed",
		(unsigned long long)s.calls, (unsigned long long)s.rounds,
		(unsigned long long)s.max_round_calls,
		(unsigned long long)s.max_round_us,
		(unsigned long long)s.slow_rounds,
		(unsigned long long)s.failed_rounds,
		(unsigned long long)s.decode_errors,
		(unsigned long long)s.denied,
		(unsigned long long)s.idle_closed);
}

/* A service manager that did not hear us times the start out: say why. */
static void warn_notify(int err)
{
	if (err)
		td_warn("cannot tell systemd ($NOTIFY_SOCKET): %s",
			strerror(-err));
}

/* systemd (Type=notify, --foreground): the store is open and the socket
 * listens, so the next RPC is answered. */
static void notify_ready(const struct master_options *o,
			 struct master_store *st, struct master_server *ms)
{
	warn_notify(cli_notify_ready(
		"serving %s (extent size %llu bytes) on %s, port %u",
		o->db_path, (unsigned long long)master_store_extent_size(st),
		o->server.listen, master_server_port(ms)));
}

/* Open the store, listen; then tell ready_fd (daemon mode) or systemd
 * (NOTIFY_SOCKET, in the foreground) and serve. */
static int serve(struct master_options *o, int ready_fd)
{
	struct master_store *st = NULL;
	struct master_server *ms = NULL;
	char msg[MSG_SIZE] = "";
	int stop_fd = stop_signals(), ret;

	if (stop_fd < 0) {
		snprintf(msg, sizeof(msg), "signalfd: %s", strerror(errno));
		ret = -errno;
	} else if (!(ret = master_store_open(o->db_path, o->extent_bytes, &st,
					     msg, sizeof(msg))) &&
		   (!o->store_url ||
		    (!(ret = master_store_attach_etcd(st, o->store_url, msg,
						      sizeof(msg))) &&
		     !(ret = master_store_set_compact_every(
			       st, o->compact_every)))) &&
		   !(ret = master_store_set_max_alloc(st,
						      o->max_alloc_extents)) &&
		   !(ret = master_server_create(&o->server, st, stop_fd, &ms,
						msg, sizeof(msg))))
		ret = write_pid_file(o->pid_file, msg, sizeof(msg));
	if (ret)
		td_err("%s", msg);
	else
		td_info("serving %s (extent size %llu bytes) on %s, port %u",
			o->db_path,
			(unsigned long long)master_store_extent_size(st),
			o->server.listen, master_server_port(ms));
	if (ready_fd >= 0) {
		dprintf(ready_fd, "%s %s", ret ? "ERR" : READY_OK, msg);
		close(ready_fd);
	}
	if (!ret && o->foreground)
		notify_ready(o, st, ms);
	if (!ret && (ret = master_server_run(ms)))
		td_err("poll failed: %s", strerror(-ret));
	if (!ret && o->foreground)
		warn_notify(cli_notify_stopping("stopping: a signal came"));
	if (ms)
		log_stats(ms);
	master_server_destroy(ms);
	master_store_close(st);
	if (!ret && o->pid_file)
		unlink(o->pid_file);
	if (stop_fd >= 0)
		close(stop_fd);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* SIGHUP: the log file (stderr) opened again, for logrotate.  open, dup2
 * and close are async-signal-safe; errno is kept. */
static void reopen_log(int sig)
{
	int saved = errno;
	int fd = open(abs_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
		      LOG_MODE);

	(void)sig;
	if (fd >= 0) {
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	errno = saved;
}

/* SIGHUP reopens the log file, or is ignored (it used to end the master). */
static void hup_signal(const struct master_options *o)
{
	struct sigaction sa = {.sa_flags = SA_RESTART};

	sigemptyset(&sa.sa_mask);
	sa.sa_handler = o->log_file ? reopen_log : SIG_IGN;
	sigaction(SIGHUP, &sa, NULL);
}

/* --log syslog: the sink (log.h), made in the process that serves (its
 * thread would not survive the fork). */
static int open_syslog(const struct master_options *o, int ready_fd)
{
	int err;

	if (!o->log_syslog)
		return 0;
	err = td_log_syslog_open(o->syslog_socket, "stripe-master", 0);
	if (err && ready_fd >= 0)
		dprintf(ready_fd, "ERR cannot log to syslog (%s): %s",
			o->syslog_socket ?: SYSLOG_PATH, strerror(-err));
	else if (err)
		fprintf(stderr,
			"stripe-master: cannot log to syslog (%s): %s\n",
			o->syslog_socket ?: SYSLOG_PATH, strerror(-err));
	return err;
}

/* At exit: the lines syslog dropped, in the last line it is sent. */
static void close_syslog(void)
{
	uint64_t dropped = td_log_syslog_dropped();

	if (dropped)
		td_warn("%llu log lines were dropped (syslog too slow)",
			(unsigned long long)dropped);
	td_log_syslog_close();
}

/* The child of daemon mode: a session of its own, stdio to the log. */
static int become_daemon(const struct master_options *o, int ready_fd)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int log = o->log_file ? open(o->log_file,
				     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
				     LOG_MODE)
			      : dup(null);

	if (null < 0 || log < 0) {
		dprintf(ready_fd, "ERR cannot open the log file %s: %s",
			o->log_file, strerror(errno));
		return -EIO;
	}
	setsid();
	if (chdir("/"))
		return -errno;
	dup2(null, STDIN_FILENO);
	dup2(null, STDOUT_FILENO);
	dup2(log, STDERR_FILENO);
	close(null);
	close(log);
	return open_syslog(o, ready_fd);
}

static int run_daemon(struct master_options *o)
{
	char answer[READY_BYTES] = "";
	int pipefd[2];
	ssize_t n;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) || (pid = fork()) < 0) {
		fprintf(stderr, "stripe-master: cannot start: %s\n",
			strerror(errno));
		return EXIT_FAILURE;
	}
	if (pid == 0) {
		close(pipefd[0]);
		if (become_daemon(o, pipefd[1]))
			_exit(EXIT_FAILURE);
		int status = serve(o, pipefd[1]);

		close_syslog();
		_exit(status);
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], answer, sizeof(answer) - 1)) < 0 &&
	       errno == EINTR)
		;
	close(pipefd[0]);
	answer[n > 0 ? n : 0] = '\0';
	if (!strncmp(answer, READY_OK, strlen(READY_OK)))
		return EXIT_SUCCESS;
	fprintf(stderr, "stripe-master: %s\n",
		n > 0 ? answer + 4 : "the daemon died while starting");
	return EXIT_FAILURE;
}

/*
 * Where the log goes: --log or --log-file; else stderr in the foreground,
 * syslog in the background when /dev/log is a socket, else DB_PATH.log.
 * The file's path made absolute (daemon mode changes to /).  GO_ON or an
 * exit status.
 */
static int choose_log(struct master_options *o)
{
	struct stat st;

	if (o->log_stderr && !o->foreground) {
		fprintf(stderr, "stripe-master: --log stderr wants "
				"--foreground (a daemon's stderr is "
				"/dev/null)\n");
		return EXIT_USAGE;
	}
	if (!o->log_file && !o->log_syslog && !o->log_stderr &&
	    !o->foreground) {
		if (!stat(SYSLOG_PATH, &st) && S_ISSOCK(st.st_mode))
			o->log_syslog = true;
		else if (snprintf(abs_log, sizeof(abs_log), "%s%s", abs_db,
				  LOG_SUFFIX) >= (int)sizeof(abs_log))
			return EXIT_USAGE;
		else
			o->log_file = abs_log;
	} else if (o->log_file) {
		if (absolute(o->log_file, abs_log, sizeof(abs_log)))
			return EXIT_USAGE;
		o->log_file = abs_log;
	}
	if (o->log_file)
		o->log_syslog = false; /* --log-file wins */
	return GO_ON;
}

int main(int argc, char **argv)
{
	struct master_options o;
	char msg[MSG_SIZE];
	int status = stripe_master_parse_options(&o, argc, argv);

	if (status != GO_ON)
		return status;
	td_log_set_level((enum td_log_level)o.log_level);
	if (absolute(o.db_path, abs_db, sizeof(abs_db)) ||
	    absolute(o.pid_file, abs_pid, sizeof(abs_pid))) {
		fprintf(stderr, "stripe-master: path too long\n");
		return EXIT_USAGE;
	}
	o.db_path = abs_db;
	o.pid_file = o.pid_file ? abs_pid : NULL;
	if (o.check)
		return check_store(&o);
	if (o.migrate)
		return migrate_store(&o);
	if (make_db_dir(o.db_path, msg, sizeof(msg))) {
		fprintf(stderr, "stripe-master: %s\n", msg);
		return EXIT_FAILURE;
	}
	if ((status = choose_log(&o)) != GO_ON)
		return status;
	hup_signal(&o);
	if (o.foreground && o.log_file && !freopen(o.log_file, "a", stderr)) {
		fprintf(stdout, "stripe-master: cannot open %s\n", o.log_file);
		return EXIT_FAILURE;
	}
	if (o.foreground) {
		if (open_syslog(&o, -1))
			return EXIT_FAILURE;
		status = serve(&o, -1);
		close_syslog();
		return status;
	}
	return run_daemon(&o);
}
