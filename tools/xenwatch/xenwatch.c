/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xenwatch.c - the decisions of tapstripe-xenwatch (xenwatch.h): one
 * struct xw_disk per NAME that a device names or that the watcher runs
 * a tapdisk for; each scan moves every entry through its states.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/log.h"
#include "tools/xenwatch/xenwatch.h"

int xw_init(struct xw *xw, const struct xw_ops *ops, void *opaque,
	    const struct xw_config *cfg)
{
	static const struct xw_config defaults = {
		.stop_delay_ms = XW_DEFAULT_STOP_DELAY_MS,
		.backoff_min_ms = XW_DEFAULT_BACKOFF_MIN_MS,
		.backoff_max_ms = XW_DEFAULT_BACKOFF_MAX_MS,
	};

	if (!ops || !ops->list_devices || !ops->list_tapdisks ||
	    !ops->registry_check || !ops->start || !ops->stop ||
	    !ops->device_error || !ops->hand_over)
		return -EINVAL;
	memset(xw, 0, sizeof(*xw));
	xw->ops = ops;
	xw->opaque = opaque;
	xw->cfg = cfg ? *cfg : defaults;
	if (!xw->cfg.backoff_min_ms)
		xw->cfg.backoff_min_ms = 1;
	if (xw->cfg.backoff_max_ms < xw->cfg.backoff_min_ms)
		xw->cfg.backoff_max_ms = xw->cfg.backoff_min_ms;
	return 0;
}

void xw_fini(struct xw *xw)
{
	free(xw->disks);
	xw->disks = NULL;
	xw->ndisks = xw->cap = 0;
}

const struct xw_disk *xw_find(const struct xw *xw, const char *name)
{
	for (size_t i = 0; i < xw->ndisks; i++)
		if (!strcmp(xw->disks[i].name, name))
			return &xw->disks[i];
	return NULL;
}

/* The entry of name, made when absent; NULL when out of memory. */
static struct xw_disk *disk_get(struct xw *xw, const char *name)
{
	struct xw_disk *d = (struct xw_disk *)xw_find(xw, name);

	if (d)
		return d;
	if (xw->ndisks == xw->cap) {
		size_t cap = xw->cap ? 2 * xw->cap : 8;
		struct xw_disk *n = realloc(xw->disks, cap * sizeof(*n));

		if (!n)
			return NULL;
		xw->disks = n;
		xw->cap = cap;
	}
	d = &xw->disks[xw->ndisks++];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	return d;
}

/* The pid of the running tapdisk named name (last list), or 0. */
static int running_pid(const struct xw *xw, const char *name)
{
	for (size_t i = 0; i < xw->ntds; i++)
		if (!strcmp(xw->tds[i].name, name))
			return xw->tds[i].pid;
	return 0;
}

/* Retry d later, each failure doubling the wait. */
static void schedule_restart(struct xw *xw, struct xw_disk *d, uint64_t now)
{
	if (!d->backoff_ms)
		d->backoff_ms = xw->cfg.backoff_min_ms;
	d->restart_at_ms = now + d->backoff_ms;
	td_info("%s: next start in %llu ms", d->name,
		(unsigned long long)d->backoff_ms);
	d->backoff_ms *= 2;
	if (d->backoff_ms > xw->cfg.backoff_max_ms)
		d->backoff_ms = xw->cfg.backoff_max_ms;
	d->state = XW_WAIT_RESTART;
	d->pid = 0;
}

/* Every device of d is told why it is not served. */
static void report_devices(struct xw *xw, const struct xw_disk *d, int ndev,
			   const char *message)
{
	for (int i = 0; i < ndev; i++) {
		const struct xw_dev *dev = &xw->devs[i];
		int err;

		if (strcmp(dev->name, d->name))
			continue;
		err = xw->ops->device_error(xw->opaque, dev->path, message);
		if (err)
			td_warn("cannot write the error into %s: %s", dev->path,
				strerror(-err));
	}
}

/* No tapdisk serves d, whose devices wait: start one from the registry. */
static void start_disk(struct xw *xw, struct xw_disk *d, int ndev, uint64_t now)
{
	char msg[512];
	int err = xw->ops->registry_check(xw->opaque, d->name);
	int pid = 0;

	if (err) {
		if (d->state != XW_MISSING) {
			snprintf(msg, sizeof(msg),
				 "tapstripe-xenwatch: no disk registry entry "
				 "for %s (%s): write CHAIN= and OPTIONS=--xen "
				 "auto into %s.conf in the registry "
				 "(tapstripe-xenwatch --disk-dir)",
				 d->name,
				 err == -ENOENT ? "no such file"
						: strerror(-err),
				 d->name);
			td_err("%s", msg);
			report_devices(xw, d, ndev, msg);
		}
		d->state = XW_MISSING;
		return;
	}
	err = xw->ops->start(xw->opaque, d->name, &pid);
	if (err) {
		td_err("%s: cannot start its tapdisk: %s", d->name,
		       strerror(-err));
		schedule_restart(xw, d, now);
		return;
	}
	if (pid)
		td_info("%s: started tapdisk %d", d->name, pid);
	else
		td_info("%s: asked systemd to start its tapdisk", d->name);
	d->state = XW_STARTED;
	d->pid = pid;
	d->started_ms = now;
	d->idle_since_ms = 0;
}

/* d has devices: see that a tapdisk serves them. */
static void serve_disk(struct xw *xw, struct xw_disk *d, int ndev, uint64_t now)
{
	int pid = running_pid(xw, d->name);

	switch (d->state) {
	case XW_STARTED:
		d->idle_since_ms = 0;
		return;
	case XW_WAIT_RESTART:
		if (now < d->restart_at_ms)
			return;
		break;
	case XW_REUSED:
		if (pid)
			return;
		td_warn("%s: the tapdisk we did not start is gone", d->name);
		break;
	case XW_IDLE:
	case XW_MISSING:
		break;
	}
	if (pid) {
		td_info("%s: tapdisk %d serves it already: reused, and left "
			"alone",
			d->name, pid);
		d->state = XW_REUSED;
		d->pid = 0;
		return;
	}
	start_disk(xw, d, ndev, now);
}

/* d has no device left: stop ours once the stop delay has passed. */
static void idle_disk(struct xw *xw, struct xw_disk *d, uint64_t now)
{
	int err;

	if (d->state != XW_STARTED) {
		d->state = XW_IDLE;
		return;
	}
	if (!d->idle_since_ms) {
		d->idle_since_ms = now;
		return;
	}
	if (now - d->idle_since_ms < xw->cfg.stop_delay_ms)
		return;
	err = xw->ops->stop(xw->opaque, d->name, d->pid);
	if (err)
		td_err("%s: cannot stop its tapdisk: %s", d->name,
		       strerror(-err));
	else
		td_info("%s: no device left: stopped its tapdisk", d->name);
	d->state = XW_IDLE;
	d->pid = 0;
	d->backoff_ms = 0;
}

/*
 * Released devices of d (tap-ctl release) go to NAME's tapdisk once it is
 * not the one that released them: the watcher restarted it, or an
 * operator started a new one.
 */
static void hand_over_released(struct xw *xw, struct xw_disk *d, int ndev)
{
	int pid = running_pid(xw, d->name);

	if (!d->nreleased) {
		d->released_seen = false;
		return;
	}
	if (!d->released_seen) {
		d->released_seen = true;
		d->released_from = pid;
		return;
	}
	if (!pid || pid == d->released_from)
		return;
	for (int i = 0; i < ndev; i++) {
		const struct xw_dev *dev = &xw->devs[i];
		int err;

		if (!dev->released || strcmp(dev->name, d->name))
			continue;
		err = xw->ops->hand_over(xw->opaque, dev->path, pid);
		if (err)
			td_err("%s: cannot hand %s to tapdisk %d: %s", d->name,
			       dev->path, pid, strerror(-err));
		else
			td_info("%s: handed the released %s to tapdisk %d",
				d->name, dev->path, pid);
	}
}

/* Forget the idle entries: nothing runs for them, nothing waits. */
static void drop_idle(struct xw *xw)
{
	size_t j = 0;

	for (size_t i = 0; i < xw->ndisks; i++)
		if (xw->disks[i].state != XW_IDLE || xw->disks[i].ndev)
			xw->disks[j++] = xw->disks[i];
	xw->ndisks = j;
}

/* The running tapdisks into xw->tds (none when they cannot be read). */
static void list_tapdisks(struct xw *xw)
{
	int n = xw->ops->list_tapdisks(xw->opaque, xw->tds, XW_MAX_TAPDISKS);

	if (n < 0) {
		td_warn("cannot list the running tapdisks: %s", strerror(-n));
		n = 0;
	}
	xw->ntds = (size_t)n;
}

int xw_scan(struct xw *xw, uint64_t now_ms)
{
	int ndev = xw->ops->list_devices(xw->opaque, xw->devs, XW_MAX_DEVICES);

	if (ndev < 0)
		return ndev;
	list_tapdisks(xw);
	td_dbg("%d device(s) name a tapdisk; %zu tapdisk(s) run", ndev,
	       xw->ntds);
	for (size_t i = 0; i < xw->ndisks; i++)
		xw->disks[i].ndev = xw->disks[i].nreleased = 0;
	for (int i = 0; i < ndev; i++) {
		struct xw_disk *d = disk_get(xw, xw->devs[i].name);

		if (!d) {
			td_err("out of memory: %s not served",
			       xw->devs[i].path);
			continue;
		}
		d->ndev++;
		d->nreleased += xw->devs[i].released;
	}
	for (size_t i = 0; i < xw->ndisks; i++) {
		struct xw_disk *d = &xw->disks[i];

		if (d->ndev)
			serve_disk(xw, d, ndev, now_ms);
		else
			idle_disk(xw, d, now_ms);
		hand_over_released(xw, d, ndev);
	}
	drop_idle(xw);
	return 0;
}

/* "exited with status N" or "killed by signal N" into buf. */
static void describe_status(char *buf, size_t len, int status)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, len, "exited with status %d",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

bool xw_child_exited(struct xw *xw, int pid, int status, uint64_t now_ms)
{
	char how[64];

	for (size_t i = 0; i < xw->ndisks; i++) {
		struct xw_disk *d = &xw->disks[i];

		if (d->state != XW_STARTED || d->pid != pid || !pid)
			continue;
		describe_status(how, sizeof(how), status);
		if (!d->ndev) {
			td_info("%s: tapdisk %d %s; no device left", d->name,
				pid, how);
			d->state = XW_IDLE;
			d->pid = 0;
			return true;
		}
		td_warn("%s: tapdisk %d %s while %u device(s) remain", d->name,
			pid, how, d->ndev);
		/* One that ran long enough starts again at the first step. */
		if (now_ms - d->started_ms > xw->cfg.backoff_max_ms)
			d->backoff_ms = 0;
		schedule_restart(xw, d, now_ms);
		return true;
	}
	return false;
}

bool xw_busy(const struct xw *xw)
{
	for (size_t i = 0; i < xw->ndisks; i++) {
		const struct xw_disk *d = &xw->disks[i];

		if (d->state == XW_WAIT_RESTART || d->nreleased ||
		    (d->state == XW_STARTED && !d->ndev))
			return true;
	}
	return false;
}
