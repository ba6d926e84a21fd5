/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl-create.c - "tap-ctl create": start a tapdisk in the background.
 *
 * fork; in the child: new session, stdin from /dev/null, stdout and stderr
 * to RUN_DIR/tapdisk-PID.log, the write end of a pipe as fd READY_FD, exec
 * tapdisk with the options given (the table of tools/tapdisk/tapdisk-options.h)
 * and --ready-fd READY_FD.  tapdisk writes "OK PID" or "ERR MESSAGE"
 * there once it serves the disk or has failed; EOF without either means it
 * died.  The parent prints the id, or tapdisk's own error and log.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "tapdisk/control/control.h"
#include "tools/tap-ctl/tap-ctl.h"
#include "tools/tapdisk/tapdisk-options.h"

#define READY_FD    3  /* where the child finds the ready pipe */
#define FD_SAFE_MIN 10 /* above stdio and READY_FD */
#define MSG_MAX	    1024
#define LOG_MODE    0640
#define SYSLOG_PATH "/dev/log"
/* tapdisk, an option and its value per slot, --run-dir DIR, --ready-fd FD,
 * NULL */
#define MAX_ARGV      (1 + 2 * TAPCTL_MAX_TAPDISK_ARGS + 4 + 1)
#define OPT_WORD_MAX  64 /* "--max-indirect-segments" */
#define LOG_STAMP_LEN 24 /* "2026-01-31 12:00:00.000 " in log lines */
/* A tapdisk not ready in time gets SIGTERM, and SIGKILL this much later:
 * its start-up keeps SIGTERM fatal, so only a process stuck in the kernel
 * outlives it. */
#define STOP_GRACE_MS 2000
#define KILL_WAIT_MS  1000 /* after SIGKILL, before giving up */
#define REAP_POLL_MS  20
#define NS_PER_MS     1000000ull

static const char *find_tapdisk(char *buf, size_t len)
{
	const char *env = getenv("TAPDISK");
	ssize_t n;
	char *slash;

	if (env && *env)
		return env;
	n = readlink("/proc/self/exe", buf, len - 1);
	if (n > 0) {
		buf[n] = '\0';
		slash = strrchr(buf, '/');
		if (slash &&
		    (size_t)(slash - buf) + sizeof("/tapdisk") <= len) {
			strcpy(slash + 1, "tapdisk");
			if (!access(buf, X_OK))
				return buf;
		}
	}
	return "tapdisk"; /* from PATH */
}

/* See tap-ctl.h. */
int tapctl_create_option(struct cmd_opts *o, const struct cli_option *opt,
			 const char *value)
{
	struct tapctl_tapdisk_arg *slot = NULL;
	long long given = 0;

	for (int i = 0; i < o->nr_tapdisk_args; i++)
		if (o->tapdisk_args[i].opt == opt) {
			slot = &o->tapdisk_args[i];
			given++;
		}
	if (opt->flags & TAPDISK_OPT_REPEAT) {
		if (given == opt->max)
			return -E2BIG;
		slot = NULL;
	}
	if (!slot) { /* a new slot: the options keep the order given */
		if (o->nr_tapdisk_args == TAPCTL_MAX_TAPDISK_ARGS)
			return -E2BIG;
		slot = &o->tapdisk_args[o->nr_tapdisk_args++];
	}
	*slot = (struct tapctl_tapdisk_arg){opt, value};
	return 0;
}

/*
 * Without --log or --log-file the tapdisk logs to syslog when there is one
 * (syslog_path, /dev/log, is a socket): nothing is left in the run
 * directory.  Otherwise its log is RUN_DIR/tapdisk-PID.log (its stderr),
 * which it removes itself when it ends cleanly.
 */
static void default_log(struct cmd_opts *o, const char *syslog_path)
{
	const struct cli_option *log = NULL;
	struct stat st;

	for (int i = 0; i < o->nr_tapdisk_args; i++) {
		int key = o->tapdisk_args[i].opt->key;

		if (key == TAPDISK_KEY_LOG || key == TAPDISK_KEY_LOG_FILE)
			return;
	}
	for (size_t i = 0; i < tapdisk_nr_options; i++)
		if (tapdisk_options[i].key == TAPDISK_KEY_LOG)
			log = &tapdisk_options[i];
	if (log && !stat(syslog_path, &st) && S_ISSOCK(st.st_mode))
		tapctl_create_option(o, log, "syslog");
}

/* tapdisk's command line, and the option words it points into. */
struct create_argv {
	char *argv[MAX_ARGV];
	char words[TAPCTL_MAX_TAPDISK_ARGS][OPT_WORD_MAX];
};

/* tapdisk OPTIONS... --run-dir DIR --ready-fd READY_FD; a letter when the
 * option has one (-a, -r), as the user would write them. */
static void build_argv(const struct cmd_opts *o, const char *tapdisk,
		       struct create_argv *a)
{
	static char ready_fd[] = {'0' + READY_FD, '\0'};
	int n = 0;

	a->argv[n++] = (char *)tapdisk;
	for (int i = 0; i < o->nr_tapdisk_args; i++) {
		const struct tapctl_tapdisk_arg *t = &o->tapdisk_args[i];

		if (t->opt->key < CLI_KEY_LONG)
			snprintf(a->words[i], OPT_WORD_MAX, "-%c", t->opt->key);
		else
			snprintf(a->words[i], OPT_WORD_MAX, "--%s",
				 t->opt->name);
		a->argv[n++] = a->words[i];
		if (t->value)
			a->argv[n++] = (char *)t->value;
	}
	a->argv[n++] = "--run-dir";
	a->argv[n++] = (char *)o->run_dir;
	a->argv[n++] = "--ready-fd";
	a->argv[n++] = ready_fd;
	a->argv[n] = NULL;
}

/* In the child: tell the parent through the pipe, then die. */
static void child_fail(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
static void child_fail(int fd, const char *fmt, ...)
{
	char msg[MSG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n > 0 && n < (int)sizeof(msg) - 1) {
		msg[n++] = '\n';
		(void)!write(fd, "ERR ", 4);
		(void)!write(fd, msg, (size_t)n);
	}
	_exit(127);
}

static void child_exec(const struct cmd_opts *o, char **argv, int ready)
{
	char log[PATH_MAX];
	sigset_t none;
	int logfd, nullfd;

	/* Out of the way of stdio and READY_FD before the dup2s. */
	ready = fcntl(ready, F_DUPFD_CLOEXEC, FD_SAFE_MIN);
	if (ready < 0)
		_exit(127);
	setsid();
	snprintf(log, sizeof(log), "%s/tapdisk-%d.log", o->run_dir,
		 (int)getpid());
	logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, LOG_MODE);
	nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (logfd < 0 || nullfd < 0)
		child_fail(ready, "cannot open the log file %s: %s", log,
			   strerror(errno));
	if (dup2(nullfd, STDIN_FILENO) < 0 || dup2(logfd, STDOUT_FILENO) < 0 ||
	    dup2(logfd, STDERR_FILENO) < 0 || dup2(ready, READY_FD) < 0)
		child_fail(ready, "dup2: %s", strerror(errno));
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (strchr(argv[0], '/'))
		execv(argv[0], argv);
	else
		execvp(argv[0], argv);
	child_fail(READY_FD,
		   "cannot run %s: %s; set TAPDISK to the tapdisk "
		   "program",
		   argv[0], strerror(errno));
}

/* Read tapdisk's report: "OK PID" or "ERR MESSAGE"; "" if it said nothing. */
static int read_ready(int fd, char *buf, size_t len, int timeout_s)
{
	uint64_t deadline = td_now_ns() + (uint64_t)timeout_s * 1000000000ull;
	size_t used = 0;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t now = td_now_ns();
		ssize_t n;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)((deadline - now) / 1000000 + 1)) < 0 &&
		    errno != EINTR)
			return -errno;
		if (!pfd.revents)
			continue;
		n = read(fd, buf + used, len - 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (used += (size_t)n) == len - 1)
			break;
	}
	buf[used] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Whether the log line text ("err FUNC: MESSAGE\n") says what report
 * (the headline printed) begins with. */
static bool says_report(const char *text, const char *report)
{
	const char *msg = strstr(text, ": ");
	size_t len;

	if (!report || !msg)
		return false;
	msg += 2;
	len = strcspn(msg, "\n");
	return len && !strncmp(report, msg, len);
}

/*
 * Show what the failed tapdisk logged, without timestamps and, when its
 * report was printed (report), without its last words ("tapdisk: ...";
 * a usage error of an option passed on is shown) nor the line the report
 * repeats, then remove the log.
 */
static void dump_log(const char *run_dir, int pid, const char *report)
{
	char path[PATH_MAX], line[MSG_MAX];
	bool header = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tapdisk-%d.log", run_dir, pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		const char *text = line;

		if (report && !strncmp(line, "tapdisk: ", 9))
			continue;
		if (strlen(line) > LOG_STAMP_LEN && line[4] == '-' &&
		    line[LOG_STAMP_LEN - 1] == ' ')
			text += LOG_STAMP_LEN;
		if (says_report(text, report))
			continue;
		if (!header)
			fputs("tap-ctl: tapdisk said:\n", stderr);
		header = true;
		fprintf(stderr, "  %s", text);
	}
	fclose(f);
	unlink(path);
}

static void describe_exit(int pid, char *buf, size_t len)
{
	int wstatus;

	if (waitpid(pid, &wstatus, 0) != pid)
		snprintf(buf, len, "it vanished");
	else if (WIFEXITED(wstatus))
		snprintf(buf, len, "it exited with status %d",
			 WEXITSTATUS(wstatus));
	else
		snprintf(buf, len, "it was killed by signal %d (%s)",
			 WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
}

/* Reap the child pid within ms.  True when it is gone. */
static bool reap_within(int pid, int ms)
{
	uint64_t deadline = td_now_ns() + (uint64_t)ms * NS_PER_MS;
	int wstatus;

	for (;;) {
		pid_t r = waitpid(pid, &wstatus, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD))
			return true;
		if (td_now_ns() >= deadline)
			return false;
		poll(NULL, 0, REAP_POLL_MS);
	}
}

/* The state letter of /proc/PID/stat ('D': waiting in the kernel). */
static char proc_state(int pid)
{
	char path[64], buf[512], *paren;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "re")))
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] ? paren[2] : '?';
}

/*
 * A tapdisk that is not ready in time: SIGTERM (fatal at every point of
 * its start-up), then SIGKILL after STOP_GRACE_MS.  Says in how what was
 * done; false when the process is still there after both.
 */
static bool stop_unready(int pid, char *how, size_t len)
{
	kill(pid, SIGTERM);
	if (reap_within(pid, STOP_GRACE_MS)) {
		snprintf(how, len, "stopped it with SIGTERM");
		return true;
	}
	kill(pid, SIGKILL);
	if (reap_within(pid, KILL_WAIT_MS)) {
		snprintf(how, len,
			 "it outlived SIGTERM by %d ms: killed it with SIGKILL",
			 STOP_GRACE_MS);
		return true;
	}
	snprintf(how, len,
		 "it is still running after SIGTERM and SIGKILL (state %c: "
		 "stuck in the kernel, on a hung mount?)",
		 proc_state(pid));
	return false;
}

static int create_wait(const struct cmd_opts *o, int pid, int ready)
{
	char report[MSG_MAX], how[160];
	int err = read_ready(ready, report, sizeof(report), o->timeout_s);
	bool reported;

	if (err == -ETIMEDOUT) {
		if (!stop_unready(pid, how, sizeof(how)))
			return tapctl_fail("tapdisk %d did not report ready "
					   "within %d s; %s; see %s/"
					   "tapdisk-%d.log",
					   pid, o->timeout_s, how, o->run_dir,
					   pid);
		tapctl_fail("tapdisk %d did not report ready within %d s; %s",
			    pid, o->timeout_s, how);
		dump_log(o->run_dir, pid, NULL);
		return EXIT_FAILURE;
	}
	if (!err && !strncmp(report, "OK ", 3) && atoi(report + 3) == pid) {
		printf("%d\n", pid);
		return EXIT_SUCCESS;
	}
	describe_exit(pid, how, sizeof(how));
	reported = !err && !strncmp(report, "ERR ", 4);
	if (reported)
		tapctl_fail("cannot create the tapdisk: %s", report + 4);
	else
		tapctl_fail("tapdisk %d failed before it was ready: %s", pid,
			    how);
	dump_log(o->run_dir, pid, reported ? report + 4 : NULL);
	return EXIT_FAILURE;
}

int tapctl_cmd_create(struct cmd_opts *o)
{
	char tapdisk_buf[PATH_MAX], run_dir[PATH_MAX];
	struct create_argv a;
	int pipefd[2], err, status;
	pid_t pid;

	if ((err = td_ctl_make_run_dir(o->run_dir)))
		return tapctl_fail(
			"cannot create the run directory %s: %s; pick "
			"another with --run-dir",
			o->run_dir, strerror(-err));
	if (!realpath(o->run_dir, run_dir))
		return tapctl_fail("%s: %s", o->run_dir, strerror(errno));
	o->run_dir = run_dir;
	default_log(o, SYSLOG_PATH);
	build_argv(o, find_tapdisk(tapdisk_buf, sizeof(tapdisk_buf)), &a);
	if (pipe2(pipefd, O_CLOEXEC))
		return tapctl_fail("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		err = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return tapctl_fail("fork: %s", strerror(err));
	}
	if (pid == 0)
		child_exec(o, a.argv, pipefd[1]);
	close(pipefd[1]);
	status = create_wait(o, pid, pipefd[0]);
	close(pipefd[0]);
	return status;
}
