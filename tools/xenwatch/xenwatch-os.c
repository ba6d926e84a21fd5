/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xenwatch-os.c - the real struct xw_ops of tapstripe-xenwatch: xenstore
 * (libxenstore), the tapdisks' control sockets (as tap-ctl list asks
 * them), the disk registry's files, and starting a tapdisk either through
 * systemd (tapdisk@NAME.service) or as a child process of the watcher.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xenstore.h>

#include "common/json.h"
#include "common/log.h"
#include "frontends/xen/xen-keys.h"
#include "tapdisk/control/control.h"
#include "tapdisk/control/ctl-client.h"
#include "tools/cli/disk-conf.h"
#include "tools/xenwatch/xenwatch-int.h"

/* One tapdisk's "info" answer takes at most this long. */
#define XW_CTL_TIMEOUT_MS 1000

bool xw_os_systemd_booted(void)
{
	struct stat st;

	/* What sd_booted() checks. */
	return !lstat("/run/systemd/system", &st) && S_ISDIR(st.st_mode);
}

int xw_os_open(struct xw_os *os)
{
	char *domid;
	unsigned int len;
	int n;

	os->xs = xs_open(0);
	if (!os->xs)
		return errno ? -errno : -EIO;
	/* "domid" relative to this domain's home; dom0 may lack it. */
	domid = xs_read(os->xs, XBT_NULL, "domid", &len);
	os->domid = domid ? (unsigned int)strtoul(domid, NULL, 10) : 0;
	free(domid);
	n = snprintf(os->root, sizeof(os->root), "/local/domain/%u/backend/%s",
		     os->domid, XEN_BACKEND_TYPE_QDISK);
	if (n < 0 || (size_t)n >= sizeof(os->root))
		return -ENAMETOOLONG;
	return 0;
}

void xw_os_close(struct xw_os *os)
{
	if (os->xs)
		xs_close(os->xs);
	os->xs = NULL;
}

/* The value of dir/key, or NULL (free it). */
static char *read_key(struct xw_os *os, const char *dir, const char *key)
{
	char path[XW_PATH_MAX];
	unsigned int len;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, key) >=
	    sizeof(path))
		return NULL;
	return xs_read(os->xs, XBT_NULL, path, &len);
}

/* dev from the backend directory path, when its params names a tapdisk. */
static bool read_device(struct xw_os *os, const char *path, struct xw_dev *dev)
{
	char *params = read_key(os, path, "params");
	const char *name = xen_params_tapdisk_name(params);
	char *pid;

	if (!name) {
		free(params);
		return false;
	}
	snprintf(dev->name, sizeof(dev->name), "%s", name);
	snprintf(dev->path, sizeof(dev->path), "%s", path);
	free(params);
	pid = read_key(os, path, XEN_KEY_TAPDISK_PID);
	dev->released = pid && !strcmp(pid, "0");
	free(pid);
	return true;
}

/* The devices of one frontend domain (root/DOMID/DEVID). */
static int list_domain(struct xw_os *os, const char *dom, struct xw_dev *devs,
		       size_t room, size_t n)
{
	char path[XW_PATH_MAX];
	unsigned int count;
	char **ids;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", os->root, dom) >=
	    sizeof(path))
		return (int)n;
	ids = xs_directory(os->xs, XBT_NULL, path, &count);
	for (unsigned int i = 0; ids && i < count; i++) {
		char dev_path[XW_PATH_MAX];

		if (n == room) {
			td_warn("more than %zu devices: %s/%s and later ones "
				"not looked at",
				room, path, ids[i]);
			break;
		}
		if ((size_t)snprintf(dev_path, sizeof(dev_path), "%s/%s", path,
				     ids[i]) >= sizeof(dev_path))
			continue;
		if (read_device(os, dev_path, &devs[n]))
			n++;
	}
	free(ids);
	return (int)n;
}

static int os_list_devices(void *opaque, struct xw_dev *devs, size_t room)
{
	struct xw_os *os = opaque;
	unsigned int count;
	char **doms = xs_directory(os->xs, XBT_NULL, os->root, &count);
	int n = 0;

	if (!doms)
		return errno == ENOENT ? 0 : (errno ? -errno : -EIO);
	for (unsigned int i = 0; i < count && (size_t)n < room; i++)
		n = list_domain(os, doms[i], devs, room, (size_t)n);
	free(doms);
	return n;
}

/* The "name: NAME" line of a tapdisk's info into name ("" when none). */
static void info_name(const char *info, char *name, size_t len)
{
	const char *p = strstr(info, "name: ");

	name[0] = '\0';
	if (p && (p == info || p[-1] == '\n'))
		snprintf(name, len, "%.*s", (int)strcspn(p + 6, "\n"), p + 6);
}

static int os_list_tapdisks(void *opaque, struct xw_tapdisk *tds, size_t room)
{
	struct xw_os *os = opaque;
	int *pids, err;
	size_t count, n = 0;

	err = td_ctl_scan_run_dir(os->run_dir, &pids, &count);
	if (err)
		return err;
	for (size_t i = 0; i < count && n < room; i++) {
		char path[PATH_MAX];
		struct td_ctl_reply r;

		if (td_ctl_socket_path(path, sizeof(path), os->run_dir,
				       pids[i]))
			continue;
		td_ctl_reply_init(&r);
		err = td_ctl_call(path, "info", XW_CTL_TIMEOUT_MS, &r);
		if (!err && !r.err) {
			tds[n].pid = pids[i];
			info_name(td_strbuf_str(&r.payload), tds[n].name,
				  sizeof(tds[n].name));
			n++;
		} else if (!td_ctl_process_gone(pids[i])) {
			td_dbg("tapdisk %d does not answer on %s", pids[i],
			       path);
		}
		td_ctl_reply_free(&r);
	}
	free(pids);
	return (int)n;
}

/* The entry must parse: tapdisk --disk would refuse it otherwise. */
static int os_registry_check(void *opaque, const char *name)
{
	struct xw_os *os = opaque;
	struct td_disk_conf c;
	char why[256];
	int err = td_disk_conf_load(os->disk_dir, name, &c, why, sizeof(why));

	if (!err)
		td_disk_conf_free(&c);
	else if (err != -ENOENT)
		td_err("%s: the registry entry in %s is not usable: %s", name,
		       os->disk_dir, why);
	return err;
}

/* Run argv as a child of its own session, stdin from /dev/null. */
static int spawn(char *const argv[], int *pid)
{
	pid_t p = fork();

	if (p < 0)
		return -errno;
	if (p == 0) {
		int fd = open("/dev/null", O_RDONLY);

		if (fd >= 0)
			dup2(fd, STDIN_FILENO);
		setsid();
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[0], argv);
		fprintf(stderr, "tapstripe-xenwatch: cannot run %s: %s\n",
			argv[0], strerror(errno));
		_exit(127);
	}
	*pid = (int)p;
	return 0;
}

/* systemctl VERB --no-block tapdisk@NAME.service, not waited for. */
static int systemctl(struct xw_os *os, const char *verb, const char *name)
{
	char unit[XW_NAME_MAX + 32];
	char *argv[] = {"systemctl", (char *)verb, "--no-block", unit, NULL};
	int pid = 0, err;

	snprintf(unit, sizeof(unit), "tapdisk@%s.service", name);
	err = spawn(argv, &pid);
	if (!err)
		xw_os_helper_add(os, pid, verb, name);
	return err;
}

static int os_start(void *opaque, const char *name, int *pid)
{
	struct xw_os *os = opaque;
	char *argv[] = {(char *)os->tapdisk,
			"--foreground",
			"--disk",
			(char *)name,
			"--disk-dir",
			(char *)os->disk_dir,
			NULL};

	*pid = 0;
	if (os->systemd)
		return systemctl(os, "start", name);
	return spawn(argv, pid);
}

static int os_stop(void *opaque, const char *name, int pid)
{
	struct xw_os *os = opaque;

	if (os->systemd)
		return systemctl(os, "stop", name);
	if (pid > 0 && kill(pid, SIGTERM))
		return -errno;
	return 0;
}

static int write_key(struct xw_os *os, const char *dir, const char *key,
		     const char *value)
{
	char path[XW_PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, key) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	if (!xs_write(os->xs, XBT_NULL, path, value, strlen(value)))
		return errno ? -errno : -EIO;
	return 0;
}

/* As blkback's hotplug script does: hotplug-error, hotplug-status. */
static int os_device_error(void *opaque, const char *path, const char *message)
{
	struct xw_os *os = opaque;
	int err = write_key(os, path, "hotplug-error", message);

	return err ? err : write_key(os, path, "hotplug-status", "error");
}

static int os_hand_over(void *opaque, const char *path, int pid)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", pid);
	return write_key(opaque, path, XEN_KEY_TAPDISK_PID, v);
}

const struct xw_ops xw_os_ops = {
	.list_devices = os_list_devices,
	.list_tapdisks = os_list_tapdisks,
	.registry_check = os_registry_check,
	.start = os_start,
	.stop = os_stop,
	.device_error = os_device_error,
	.hand_over = os_hand_over,
};

void xw_os_helper_add(struct xw_os *os, int pid, const char *verb,
		      const char *name)
{
	for (size_t i = 0; i < XW_OS_HELPERS; i++) {
		if (os->helpers[i].pid)
			continue;
		os->helpers[i].pid = pid;
		snprintf(os->helpers[i].what, sizeof(os->helpers[i].what),
			 "systemctl %s tapdisk@%s.service", verb, name);
		return;
	}
}

bool xw_os_helper_exited(struct xw_os *os, int pid, int status)
{
	for (size_t i = 0; i < XW_OS_HELPERS; i++) {
		if (os->helpers[i].pid != pid)
			continue;
		os->helpers[i].pid = 0;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			td_err("%s failed (status %d): see systemctl status "
			       "and journalctl -u of that unit",
			       os->helpers[i].what,
			       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return true;
	}
	return false;
}
