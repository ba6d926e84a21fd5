/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ctl-client.h - finding the tapdisks of a host, for the tools that talk
 * to them (tap-ctl, stripe-ctl).
 *
 * The protocol's client (connect, request, reply) is tapdisk/control.h;
 * this adds what a tool needs around it: which tapdisks have a control
 * socket in the run directory, whether a process is gone, and which
 * tapdisk serves a given file.  Blocking, for tools only; nothing here
 * prints.
 */
#ifndef TAPSTRIPE_CTL_CLIENT_H
#define TAPSTRIPE_CTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

/* Exited, or a zombie its parent has not reaped yet. */
bool td_ctl_process_gone(int pid);

/* The pid in a socket file name "tapdisk-PID.sock", or 0. */
int td_ctl_socket_pid(const char *name);

/*
 * The pids of the control sockets in run_dir, sorted; *pids is malloc'd
 * (NULL when none; free it).  A missing run_dir has none.  0 or -errno.
 */
int td_ctl_scan_run_dir(const char *run_dir, int **pids, size_t *count);

/*
 * Whether chain (as "info" prints it, "sort|stripe:/x.map,opt=v") has a
 * driver named driver whose argument is the file real_path (a realpath()
 * result).  The argument's options (",key=value" at its end) are cut off
 * until a path resolves; a relative path is taken from the directory of
 * process pid (/proc/PID/cwd), the tapdisk that opened it.
 */
bool td_ctl_chain_names_file(const char *chain, const char *driver,
			     const char *real_path, int pid);

/*
 * The tapdisk in run_dir whose chain names the file real_path for driver
 * (td_ctl_chain_names_file), asking each one "info" within timeout_ms.
 * 0 and *pid, -ENOENT when none does.  Tapdisks that do not answer are
 * skipped and counted in *silent (may be NULL).
 */
int td_ctl_find_serving(const char *run_dir, const char *driver,
			const char *real_path, int timeout_ms, int *pid,
			unsigned int *silent);

/* The pid holding a flock on the file real_path (/proc/locks), or 0. */
int td_ctl_flock_holder(const char *real_path);

#endif
