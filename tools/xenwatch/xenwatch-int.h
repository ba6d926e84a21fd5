/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xenwatch-int.h - what tapstripe-xenwatch's main and its real ops
 * (xenwatch-os.c) share: the state of the ops and the helpers (systemctl
 * runs) whose exits the main loop reaps.
 */
#ifndef TAPSTRIPE_XENWATCH_INT_H
#define TAPSTRIPE_XENWATCH_INT_H

#include <stdbool.h>

#include "tools/xenwatch/xenwatch.h"

struct xs_handle;

/* systemctl runs in flight at once; more are not logged when they end. */
#define XW_OS_HELPERS 64

struct xw_os {
	struct xs_handle *xs;
	unsigned int domid;	/* this domain */
	char root[XW_PATH_MAX]; /* /local/domain/<domid>/backend/qdisk */
	const char *run_dir;	/* the tapdisks' control sockets */
	const char *disk_dir;	/* the disk registry: NAME.conf */
	const char *tapdisk;	/* the program spawned (not systemd) */
	bool systemd;		/* start through tapdisk@NAME.service */
	struct {
		int pid;
		char what[XW_NAME_MAX + 48];
	} helpers[XW_OS_HELPERS];
};

extern const struct xw_ops xw_os_ops;

/*
 * Run as this name (a link to tapstripe-xenwatch named by a guest's
 * device_model_override), it stands in for the xenpv device model xl
 * starts in dom0 for a PV guest with a backendtype=qdisk disk
 * (xenwatch-dm.c).  argv is QEMU's, as libxl builds it.
 */
#define XW_DM_NAME "tapstripe-xenpv-dm"
int xw_dm_main(int argc, char **argv);

/* Whether systemd is the init system (what sd_booted() checks). */
bool xw_os_systemd_booted(void);

/* Open xenstore and find this domain's backend/qdisk.  0 or -errno. */
int xw_os_open(struct xw_os *os);
void xw_os_close(struct xw_os *os);

/* A systemctl run started (pid); its end is logged when it fails. */
void xw_os_helper_add(struct xw_os *os, int pid, const char *verb,
		      const char *name);
/* Whether pid was such a run (and forget it); status as waitpid's. */
bool xw_os_helper_exited(struct xw_os *os, int pid, int status);

#endif
