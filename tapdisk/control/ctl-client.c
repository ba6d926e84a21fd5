/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctl-client.c - finding the tapdisks of a host (ctl-client.h).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tapdisk/control/control.h"
#include "tapdisk/control/ctl-client.h"

#define MAX_PID_DIGITS 9
#define PROC_LOCKS     "/proc/locks"

bool td_ctl_process_gone(int pid)
{
	char path[64], buf[512], *paren;
	ssize_t n;
	int fd;

	if (kill(pid, 0) && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	paren = strrchr(buf, ')'); /* "pid (comm) S ..." */
	return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

int td_ctl_socket_pid(const char *name)
{
	size_t pre = strlen(TD_CTL_SOCK_PREFIX),
	       suf = strlen(TD_CTL_SOCK_SUFFIX);
	size_t len = strlen(name), digits;
	long pid;

	if (len <= pre + suf || strncmp(name, TD_CTL_SOCK_PREFIX, pre) ||
	    strcmp(name + len - suf, TD_CTL_SOCK_SUFFIX))
		return 0;
	digits = len - pre - suf;
	if (strspn(name + pre, "0123456789") != digits ||
	    digits > MAX_PID_DIGITS)
		return 0;
	pid = strtol(name + pre, NULL, 10);
	return pid > 0 ? (int)pid : 0;
}

static int compare_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int td_ctl_scan_run_dir(const char *run_dir, int **pids, size_t *count)
{
	DIR *d = opendir(run_dir);
	struct dirent *de;
	size_t cap = 0;

	*pids = NULL;
	*count = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		int pid = td_ctl_socket_pid(de->d_name);

		if (!pid)
			continue;
		if (*count == cap) {
			int *p = realloc(*pids,
					 (cap = cap * 2 + 16) * sizeof(int));
			if (!p) {
				closedir(d);
				free(*pids);
				*pids = NULL;
				*count = 0;
				return -ENOMEM;
			}
			*pids = p;
		}
		(*pids)[(*count)++] = pid;
	}
	closedir(d);
	if (*count)
		qsort(*pids, *count, sizeof(int), compare_int);
	return 0;
}

/* Whether arg (len bytes, maybe relative to pid's cwd) is real_path. */
static bool arg_is(const char *arg, size_t len, const char *real_path, int pid)
{
	char path[PATH_MAX], resolved[PATH_MAX];
	int n = arg[0] == '/'
			? snprintf(path, sizeof(path), "%.*s", (int)len, arg)
			: snprintf(path, sizeof(path), "/proc/%d/cwd/%.*s", pid,
				   (int)len, arg);

	return n > 0 && (size_t)n < sizeof(path) && realpath(path, resolved) &&
	       !strcmp(resolved, real_path);
}

/* One element of a chain, "driver:arg[,opt=v]...", len bytes. */
static bool element_names_file(const char *el, size_t len, const char *driver,
			       const char *real_path, int pid)
{
	size_t dlen = strlen(driver);

	if (len <= dlen || strncmp(el, driver, dlen) || el[dlen] != ':')
		return false;
	el += dlen + 1;
	len -= dlen + 1;
	/* The whole argument, then with each trailing ",..." cut off. */
	for (;;) {
		const char *comma;

		if (arg_is(el, len, real_path, pid))
			return true;
		comma = memrchr(el, ',', len);
		if (!comma)
			return false;
		len = (size_t)(comma - el);
	}
}

bool td_ctl_chain_names_file(const char *chain, const char *driver,
			     const char *real_path, int pid)
{
	while (*chain) {
		size_t len = strcspn(chain, "|");

		if (element_names_file(chain, len, driver, real_path, pid))
			return true;
		chain += len;
		chain += *chain == '|';
	}
	return false;
}

/* The value of the "chain: " line of an info reply, copied to buf. */
static bool info_chain(const char *info, char *buf, size_t size)
{
	for (const char *line = info; line && *line;) {
		size_t len = strcspn(line, "\n");

		if (!strncmp(line, "chain: ", 7) && len - 7 < size) {
			memcpy(buf, line + 7, len - 7);
			buf[len - 7] = '\0';
			return true;
		}
		line = line[len] ? line + len + 1 : NULL;
	}
	return false;
}

/* Whether tapdisk pid serves the file; -errno when it does not answer. */
static int serves(const char *run_dir, int pid, const char *driver,
		  const char *real_path, int timeout_ms)
{
	char path[PATH_MAX], chain[TD_CTL_LINE_MAX * 2];
	struct td_ctl_reply r;
	int err;

	if ((err = td_ctl_socket_path(path, sizeof(path), run_dir, pid)))
		return err;
	td_ctl_reply_init(&r);
	err = td_ctl_call(path, "info", timeout_ms, &r);
	if (!err && r.err)
		err = r.err;
	if (!err)
		err = info_chain(td_strbuf_str(&r.payload), chain,
				 sizeof(chain)) &&
		      td_ctl_chain_names_file(chain, driver, real_path, pid);
	td_ctl_reply_free(&r);
	return err;
}

int td_ctl_find_serving(const char *run_dir, const char *driver,
			const char *real_path, int timeout_ms, int *pid,
			unsigned int *silent)
{
	int *pids, err, found = -ENOENT;
	size_t count;

	if (silent)
		*silent = 0;
	if ((err = td_ctl_scan_run_dir(run_dir, &pids, &count)))
		return err;
	for (size_t i = 0; i < count && found; i++) {
		err = serves(run_dir, pids[i], driver, real_path, timeout_ms);
		if (err > 0) {
			*pid = pids[i];
			found = 0;
		} else if (err < 0 && silent && !td_ctl_process_gone(pids[i])) {
			(*silent)++;
		}
	}
	free(pids);
	return found;
}

int td_ctl_flock_holder(const char *real_path)
{
	unsigned int maj, min;
	unsigned long ino;
	char line[256], kind[16];
	struct stat st;
	FILE *f;
	int pid, holder = 0;

	if (stat(real_path, &st) || !(f = fopen(PROC_LOCKS, "re")))
		return 0;
	/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
	while (!holder && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%lu", kind, &pid,
			   &maj, &min, &ino) == 5 &&
		    !strcmp(kind, "FLOCK") && ino == st.st_ino &&
		    maj == major(st.st_dev) && min == minor(st.st_dev) &&
		    pid > 0)
			holder = pid;
	}
	fclose(f);
	return holder;
}
