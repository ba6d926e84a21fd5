/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xenwatch.h - tapstripe-xenwatch's decisions: which tapdisk to start,
 * reuse, restart or stop for the backend/qdisk devices xl makes with
 * target=tapstripe:NAME.  Everything outside (xenstore, control sockets,
 * the disk registry, processes, systemd) is behind struct xw_ops, so that
 * the unit tests drive the logic with fakes.  Nothing here blocks or
 * prints: it logs through common/log.h.
 */
#ifndef TAPSTRIPE_XENWATCH_H
#define TAPSTRIPE_XENWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontends/xen/xen-keys.h"

#define XW_NAME_MAX XEN_NAME_MAX
#define XW_PATH_MAX XEN_PATH_MAX
/* Devices and tapdisks one scan looks at; more are logged and skipped. */
#define XW_MAX_DEVICES	256
#define XW_MAX_TAPDISKS 256

/* One backend device whose params names a tapdisk. */
struct xw_dev {
	char path[XW_PATH_MAX]; /* its backend directory */
	char name[XW_NAME_MAX]; /* NAME of [aio:]tapstripe:NAME */
	bool released;		/* tapstripe-pid is "0": handed over
				 * (tap-ctl release), no tapdisk holds it */
};

/* One running tapdisk, as its control socket answers "info". */
struct xw_tapdisk {
	int pid;
	char name[XW_NAME_MAX]; /* "" when it has none */
};

/*
 * The world outside.  Every op is required, runs in the watcher's only
 * thread, must not block for long (bounded timeouts) and returns 0 or
 * -errno unless said otherwise.
 */
struct xw_ops {
	/* The devices under this domain's backend/qdisk that name a
	 * tapdisk, at most room of them; returns their count or -errno. */
	int (*list_devices)(void *opaque, struct xw_dev *devs, size_t room);
	/* The running tapdisks, at most room; returns the count or -errno. */
	int (*list_tapdisks)(void *opaque, struct xw_tapdisk *tds, size_t room);
	/* Whether the disk registry has NAME: 0, -ENOENT, or -errno. */
	int (*registry_check)(void *opaque, const char *name);
	/*
	 * Start the tapdisk of NAME from the registry without waiting for
	 * it.  *pid: the process to supervise (its exit comes back through
	 * xw_child_exited), or 0 when someone else supervises it (systemd).
	 */
	int (*start)(void *opaque, const char *name, int *pid);
	/* Stop what start started (pid as start gave it). */
	int (*stop)(void *opaque, const char *name, int pid);
	/* Tell xl's side that device path cannot be served: message. */
	int (*device_error)(void *opaque, const char *path,
			    const char *message);
	/* Hand the released device path to tapdisk pid (tapstripe-pid). */
	int (*hand_over)(void *opaque, const char *path, int pid);
};

enum xw_state {
	XW_IDLE,    /* nothing running on our account */
	XW_REUSED,  /* a tapdisk we did not start serves NAME: left alone */
	XW_STARTED, /* we started it (pid, or a systemd unit) */
	XW_WAIT_RESTART, /* ours died or would not start: retry at
			  * restart_at_ms */
	XW_MISSING,	 /* no registry entry: said so, waiting for one */
};

struct xw_disk {
	char name[XW_NAME_MAX];
	enum xw_state state;
	int pid;		/* supervised process (XW_STARTED); 0: none */
	unsigned int ndev;	/* devices naming it in the last scan */
	unsigned int nreleased; /* of which released */
	uint64_t started_ms, restart_at_ms, backoff_ms;
	uint64_t idle_since_ms; /* XW_STARTED with no device since; 0 */
	/* NAME's tapdisk when a released device was first seen: the one
	 * that handed it over, never given it back (0: none ran). */
	int released_from;
	bool released_seen;
};

struct xw_config {
	uint64_t stop_delay_ms;	 /* no device this long: stop ours */
	uint64_t backoff_min_ms; /* first restart delay, doubled each time */
	uint64_t backoff_max_ms;
};

#define XW_DEFAULT_STOP_DELAY_MS  10000
#define XW_DEFAULT_BACKOFF_MIN_MS 1000
#define XW_DEFAULT_BACKOFF_MAX_MS 60000

struct xw {
	const struct xw_ops *ops;
	void *opaque;
	struct xw_config cfg;
	struct xw_disk *disks;
	size_t ndisks, cap;
	struct xw_dev devs[XW_MAX_DEVICES];
	struct xw_tapdisk tds[XW_MAX_TAPDISKS];
	size_t ntds;
};

/* cfg NULL: the defaults.  0 or -errno. */
int xw_init(struct xw *xw, const struct xw_ops *ops, void *opaque,
	    const struct xw_config *cfg);
void xw_fini(struct xw *xw);

/*
 * Look at every device and tapdisk and act: start, reuse, restart, hand
 * over, stop.  now_ms is CLOCK_MONOTONIC time.  0, or the -errno of
 * listing the devices (nothing changed then).
 */
int xw_scan(struct xw *xw, uint64_t now_ms);

/* A process the watcher spawned ended (status as waitpid gives it).
 * Returns whether it was a supervised tapdisk. */
bool xw_child_exited(struct xw *xw, int pid, int status, uint64_t now_ms);

/* Whether something waits on time (a restart, a stop, a hand-over): the
 * caller scans again within a second then. */
bool xw_busy(const struct xw *xw);

/* The entry of NAME, or NULL (for the tests and the log). */
const struct xw_disk *xw_find(const struct xw *xw, const char *name);

#endif
