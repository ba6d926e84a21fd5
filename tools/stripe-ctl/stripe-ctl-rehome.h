/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-rehome.h - what the two halves of re-homing share:
 * stripe-ctl-rehome.c (the command, the master's side, the summary) and
 * stripe-ctl-rehome-disk.c (one disk: its map, its tapdisk or the driver
 * in this process, the copy).
 */
#ifndef TAPSTRIPE_STRIPE_CTL_REHOME_H
#define TAPSTRIPE_STRIPE_CTL_REHOME_H

#include "tools/stripe-ctl/stripe-ctl.h"

#define RH_ERROR_SIZE 512

/* One replica slot the server holds (or a move into it). */
struct rh_task {
	char vdisk[STRIPE_MAP_NAME_SIZE];
	u_int column, extent, replica;
	bool incoming; /* the slot's move target is on the server */
	/* the master's move: NEW */
	bool have_move;
	u_int new_id, new_lun, new_block;
	char new_target[STRIPE_MAP_TARGET_SIZE];
	char new_portal[STRIPE_MAP_PORTAL_SIZE];
	char new_address[STRIPE_MAP_ADDRESS_SIZE];
	uint64_t new_offset;
	u_int reached, wanted; /* the extent's spread with NEW */
	/* what happened */
	bool need_copy;	     /* the driver has to copy (or drop) it */
	const char *outcome; /* moved, committed, already, aborted, failed */
	char error[RH_ERROR_SIZE];
	uint64_t bytes;
	uint64_t copy_ns; /* from the disk's first "move add" to the swap */
	const char *file, *mode; /* the map used; online, offline */
};

struct rehome {
	struct ctl_opts *o;
	struct master_client *c;
	bool fail; /* server fail --rehome, else evacuate */
	const char *verb;
	ms_reply srv_rep; /* MS_SERVER_LIST: server points into it */
	const ms_server *server;
	char map_dir[PATH_MAX];
	struct rh_task *tasks;
	size_t nr_tasks, cap_tasks;
	uint64_t start_ns;
	uint64_t copy_ns; /* the disks' copy runs, end to end */
	bool tty, line_open;
	char **files; /* the maps' paths, for the report */
	size_t nr_files;
};

/* A copy of path kept until the end (rh->files), or NULL (no memory). */
const char *ctl_rehome_keep(struct rehome *rh, const char *path);

/* Re-home tasks[first, first + n) (one disk); failures are noted in them. */
void ctl_rehome_disk(struct rehome *rh, size_t first, size_t n);

/* The master's side of one task (stripe-ctl-rehome.c). */
int ctl_rehome_begin(struct rehome *rh, struct rh_task *t);
int ctl_rehome_commit(struct rehome *rh, struct rh_task *t);
int ctl_rehome_abort(struct rehome *rh, struct rh_task *t);
/* Note a failure in t (outcome failed); printed on stderr at once. */
void ctl_rehome_failed(struct rehome *rh, struct rh_task *t, const char *fmt,
		       ...) __attribute__((format(printf, 3, 4)));
/* The progress line's end (a tty's \r line closed). */
void ctl_rehome_end_line(struct rehome *rh);

#endif
