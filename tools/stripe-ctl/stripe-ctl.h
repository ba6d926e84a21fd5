/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl.h - what stripe-ctl's files share.
 */
#ifndef TAPSTRIPE_STRIPE_CTL_H
#define TAPSTRIPE_STRIPE_CTL_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/json.h"
#include "drivers/stripe/map/map.h"
#include "master/client/client.h"
#include "master/client/host-id.h"
#include "tools/cli/cli.h"

#define EXIT_USAGE	   CLI_EXIT_USAGE
#define CTL_MASTER_ENV	   "STRIPE_MASTER"
#define CTL_MASTER_DEFAULT "127.0.0.1:7700"
/* The packages' place for the list of masters (issue #23): a line
 * STRIPE_MASTER=A,B,C, read when neither --master nor $STRIPE_MASTER is
 * given; $STRIPE_MASTER_CONF names another file. */
#define CTL_MASTER_CONF	    TAPSTRIPE_CONFDIR "/master.conf"
#define CTL_MASTER_CONF_ENV "STRIPE_MASTER_CONF"
/* configure: $(localstatedir)/lib/tapstripe (Makefile.am) */
#define CTL_MAP_DIR	    TAPSTRIPE_STATEDIR
#define CTL_MAX_SERVER_IDS  64		/* MS_MAX_FILTER */
#define CTL_MIN_RESYNC_RATE (64u << 10) /* the stripe driver's minimum */

/* The command line of one command. */
struct ctl_opts {
	const char *master;
	bool master_given; /* --master or $STRIPE_MASTER */
	bool json;
	unsigned int timeout_s;
	unsigned int retries;
	const char *arg; /* the positional argument: NAME or FILE */
	char **extra;	 /* the command's further positional words */
	unsigned int nr_extra;
	/* server */
	const char *portal;
	const char *target;
	const char *address;
	const char *host; /* failure-domain labels: NULL when not given */
	const char *rack;
	const char *site;
	const char *chap_user;	      /* server add|chap: NULL when not given */
	const char *chap_secret_file; /* its secret's file ("-": stdin) */
	bool chap_none;		      /* server chap --none */
	long lun;		      /* -1: not given */
	uint64_t size_bytes;	      /* 0: not given */
	uint32_t block_size;
	/* vdisk */
	uint32_t stripes;
	uint64_t stripe_unit_bytes;
	uint32_t replicas;
	const char *output;
	const char *name;
	uint64_t region_bytes; /* --region-size; 0: the default */
	/* vdisk resync */
	uint64_t rate_bytes_per_s; /* 0: the driver's default */
	const char *run_dir;	   /* NULL: td_ctl_run_dir's default */
	bool repair;		   /* vdisk verify --repair */
	/* extents */
	uint32_t server_ids[CTL_MAX_SERVER_IDS];
	unsigned int nr_server_ids;
	bool allocated;
	/* vdisk lease */
	const char *host_id; /* NULL: master_host_id_default */
	const char *to;
	bool fence;
	uint64_t epoch;
	bool epoch_given;
	const char *initiator; /* takeover --fence: NULL for the default */
	const char *map;       /* takeover --fence: CHAP credentials */
	/* extent move */
	uint64_t offset_bytes; /* commit, abort: the new extent's offset */
	bool reason_fail;      /* begin --reason fail */
	/* server evacuate, server fail --rehome */
	const char *map_dir; /* NULL: CTL_MAP_DIR */
	bool rehome;	     /* server fail --rehome (the default) */
	bool mark_only;	     /* server fail --mark-only: the master alone */
};

/* Print "stripe-ctl: MESSAGE" on stderr; returns EXIT_FAILURE. */
int ctl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A bad command line found by a command ("vdisk mark"): the message and a
 * pointer to its --help on stderr; returns EXIT_USAGE.
 */
int ctl_usage_fail(const char *command, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The STRIPE_MASTER= of CTL_MASTER_CONF (or $CTL_MASTER_CONF_ENV's file),
 * or NULL when it has none. */
const char *ctl_master_conf(void);

/* A client for o->master, or NULL with the error printed. */
struct master_client *ctl_client(const struct ctl_opts *o);

/* Print the client's last error; returns EXIT_FAILURE. */
int ctl_call_failed(struct master_client *c, const char *what);

/* "256.0 MiB": binary units, one decimal. */
void ctl_format_bytes(uint64_t bytes, char *buf, size_t size);

/* Print a finished JSON document (or fail on out-of-memory). */
int ctl_print_json(struct td_json *j, struct td_strbuf *sb);

/* {"vdisk": ..., "file": ..., "changed": ...}; NULL keys are left out. */
int ctl_print_result(const char *vdisk, const char *file, bool changed);

/* Output of servers, disks and extents (stripe-ctl-output.c). */
void ctl_json_server(struct td_json *j, const char *key, const ms_server *s);
void ctl_print_server_header(void);
void ctl_print_server(const ms_server *s);
/* With the state and load MS_SERVER_STATUS gave (x NULL: none). */
const char *ctl_server_state(const ms_server *s, const ms_server_stat *x);
void ctl_json_server_stat(struct td_json *j, const char *key,
			  const ms_server *s, const ms_server_stat *x);
void ctl_print_server_stat_header(void);
void ctl_print_server_stat(const ms_server *s, const ms_server_stat *x);
void ctl_print_server_state(const ms_server *s, const char *state);
int ctl_show_map(const struct stripe_map *m, const char *path, bool json);
/* lease NULL: the master gave none (an older master). */
/* Failure domains (stripe-ctl-spread.c): "host", "rack", "site". */
const char *ctl_domain_name(u_int level);
/* The widest ms_domain at which extent x's replicas are distinct now. */
u_int ctl_extent_domain(const ms_vdisk *v, u_int x);
/* How far the disk's extents are spread, and the master's notes. */
void ctl_print_spread(const ms_vdisk *v);
void ctl_json_spread(struct td_json *j, const ms_vdisk *v);

int ctl_show_vdisk(const ms_vdisk *v, const ms_lease *lease, const char *master,
		   bool json);

/* A lease's holder, epoch, previous, fence, since (stripe-ctl-lease.c). */
void ctl_json_lease(struct td_json *j, const ms_lease *l);
void ctl_print_lease(const ms_lease *l);
/*
 * A lease call failed: the master's message on stderr (and with --json
 * the lease it sent back, if any, on stdout); returns EXIT_FAILURE.
 */
int ctl_lease_failed(const struct ctl_opts *o, struct master_client *c,
		     const ms_reply *rep, const char *what);
/*
 * takeover --fence (stripe-ctl-fence.c): take the lease (or resume a
 * pending fence), fence the old holder on every LUN of the disk, tell the
 * master.  m: --map's file for CHAP credentials, or NULL.  Exit status.
 */
int ctl_lease_takeover_fence(const struct ctl_opts *o, struct master_client *c,
			     const char *host, const struct stripe_map *m);

/* The commands; each returns the exit status. */
int ctl_cmd_info(struct ctl_opts *o);
int ctl_cmd_server_add(struct ctl_opts *o);
int ctl_cmd_server_drain(struct ctl_opts *o);
int ctl_cmd_server_remove(struct ctl_opts *o);
int ctl_cmd_server_label(struct ctl_opts *o);
int ctl_cmd_server_chap(struct ctl_opts *o);

/*
 * CHAP accounts (stripe-ctl-chap.c).  ctl_chap_args: --chap-user and
 * --chap-secret-file checked, the secret read into secret ("" when none
 * given); 0 or an exit status printed.  ctl_chap_set: MS_SERVER_CHAP_SET
 * of --target/--lun to them (none when --chap-user is not given).
 * ctl_map_chap: every server of m gets its account from the master
 * (MS_SERVER_CHAP_GET); 0 or an exit status printed, what naming the
 * command.
 */
int ctl_chap_args(const struct ctl_opts *o, char secret[STRIPE_MAP_CHAP_SIZE]);
int ctl_chap_set(struct master_client *c, const struct ctl_opts *o,
		 const char *secret, ms_reply *rep);
int ctl_map_chap(struct master_client *c, struct stripe_map *m,
		 const char *what);
/* s's account (by its target and lun) from the master; 0 or -errno
 * (master_client_error says why). */
int ctl_chap_get(struct master_client *c, struct stripe_map_server *s);
int ctl_cmd_server_list(struct ctl_opts *o);
int ctl_cmd_metrics(struct ctl_opts *o); /* stripe-ctl-metrics.c */
int ctl_cmd_extents_list(struct ctl_opts *o);
int ctl_cmd_vdisk_create(struct ctl_opts *o);
int ctl_cmd_vdisk_map(struct ctl_opts *o);
int ctl_cmd_vdisk_show(struct ctl_opts *o);
int ctl_cmd_vdisk_destroy(struct ctl_opts *o);
int ctl_cmd_vdisk_list(struct ctl_opts *o);
int ctl_cmd_vdisk_mark(struct ctl_opts *o);
int ctl_cmd_vdisk_resync(struct ctl_opts *o); /* stripe-ctl-resync.c */
int ctl_cmd_vdisk_verify(struct ctl_opts *o); /* stripe-ctl-verify.c */
int ctl_cmd_vdisk_resize(struct ctl_opts *o); /* stripe-ctl-resize.c */

/*
 * A run of the stripe driver's over a disk, online through the tapdisk
 * that serves it or offline in this process (stripe-ctl-serve.c).  The
 * caller fills o, what, doing, run and path (and vdisk, master from the
 * map); ctl_serve_run calls run(s) once the disk is reached, with
 * ctl_serve_command to talk to the driver.
 */
struct td_loop;
struct td_vbd;
enum ctl_lease_before { LEASE_UNKNOWN = 0, LEASE_FREE, LEASE_MINE };

struct ctl_serve {
	const struct ctl_opts *o;
	const char *what;		 /* "resync": in messages */
	const char *doing;		 /* "resynchronising" */
	uint64_t rate_bytes_per_s;	 /* offline: resync_rate (0: default) */
	int (*run)(struct ctl_serve *s); /* 0 or an exit status printed */
	const char *name;    /* offline: the vbd's (NULL: default) */
	char path[PATH_MAX]; /* FILE's realpath */
	char vdisk[STRIPE_MAP_NAME_SIZE];
	char master[STRIPE_MAP_MASTER_SIZE];
	/* online: the tapdisk's pid and control socket */
	int pid;
	char sock[PATH_MAX];
	/* offline: the disk served here */
	struct td_loop *loop;
	struct td_vbd *vbd;
	/* offline: the lease */
	char host[MASTER_HOST_ID_SIZE]; /* this host's id */
	enum ctl_lease_before lease;
	bool taken;	     /* the open took a free lease at epoch */
	uint64_t epoch;	     /* taken at, or held at (LEASE_MINE) */
	const char *outcome; /* --json "lease": released, kept, NULL */
};

/* SIGINT or SIGTERM came (after ctl_serve_catch_signals). */
extern volatile sig_atomic_t ctl_interrupted;
void ctl_serve_catch_signals(void);
/* busy: the file's lock is held.  0 or an exit status printed. */
int ctl_serve_run(struct ctl_serve *s, bool busy);
/*
 * "driver stripe WORDS" to the tapdisk, or to the vbd served here: 0 with
 * the reply in out, or -errno with the reason in out.
 */
int ctl_serve_command(struct ctl_serve *s, const char *words,
		      struct td_strbuf *out);
/* Let a quarter second pass: a sleep online, the loop's passes offline. */
void ctl_serve_wait(struct ctl_serve *s);
/*
 * FILE, or NAME for CTL_MAP_DIR/NAME.map when no file ARG exists, as a
 * realpath into path (PATH_MAX); 0 or EXIT_FAILURE printed.
 */
int ctl_serve_path(const char *arg, char *path);
/*
 * The map of the master's VDISK body v, with o's size, stripe unit and
 * region size and the master's address: 0, or -EPROTO when the answer
 * does not fit (stripe-ctl-vdisk.c).
 */
int ctl_map_from_reply(const ms_vdisk *v, const struct ctl_opts *o,
		       const char *master, struct stripe_map *m);
int ctl_cmd_vdisk_snapshot(struct ctl_opts *o);
/* Leases (stripe-ctl-lease.c). */
/*
 * This host's id (--host-id, else master_host_id_default) into out
 * (MASTER_HOST_ID_SIZE bytes); 0, or EXIT_FAILURE with the reason printed.
 */
int ctl_host_id(const struct ctl_opts *o, char *out);
int ctl_cmd_lease_show(struct ctl_opts *o);
int ctl_cmd_lease_acquire(struct ctl_opts *o);
int ctl_cmd_lease_release(struct ctl_opts *o);
int ctl_cmd_lease_handover(struct ctl_opts *o);
int ctl_cmd_lease_takeover(struct ctl_opts *o);
/* Lost servers and re-homing (stripe-ctl-move.c). */
int ctl_cmd_server_fail(struct ctl_opts *o);
/* Re-homing every replica of a server (stripe-ctl-rehome.c). */
int ctl_cmd_server_evacuate(struct ctl_opts *o);
int ctl_cmd_server_fail_rehome(struct ctl_opts *o);
int ctl_cmd_move_begin(struct ctl_opts *o);
int ctl_cmd_move_commit(struct ctl_opts *o);
int ctl_cmd_move_abort(struct ctl_opts *o);
int ctl_cmd_move_list(struct ctl_opts *o);
/* "evacuate" or "fail". */
const char *ctl_move_reason_name(u_int reason);
/*
 * A disk's copies as the master knows them: a replica is live when it is
 * not stale and its server has not failed; an extent is under-replicated
 * with fewer live replicas than the disk's; slot = (c·J + x)·R + r, x
 * (an extent of the disk) = c·J + j.
 */
bool ctl_replica_live(const ms_vdisk *v, u_int slot);
bool ctl_replica_lost(const ms_vdisk *v, u_int slot);
u_int ctl_extent_live(const ms_vdisk *v, u_int x);
u_int ctl_vdisk_under(const ms_vdisk *v);
const ms_move *ctl_slot_move(const ms_vdisk *v, u_int slot);
void ctl_json_copies(struct td_json *j, const ms_vdisk *v);
void ctl_json_slot_copies(struct td_json *j, const ms_vdisk *v, u_int slot);
void ctl_print_copies(const ms_vdisk *v);
/* Server i of v with its state (ok, draining, failed). */
void ctl_print_vdisk_server(const ms_vdisk *v, u_int i);
/* The rest of one slot's line: lost, under-replicated, moving; "\n". */
void ctl_print_slot_copies(const ms_vdisk *v, u_int slot);
/* Fenced hosts (stripe-ctl-host.c). */
int ctl_cmd_host_list(struct ctl_opts *o);
int ctl_cmd_host_readmit(struct ctl_opts *o);
/* Kernel iSCSI sessions (stripe-ctl-session.c). */
int ctl_cmd_session_login(struct ctl_opts *o);
int ctl_cmd_session_logout(struct ctl_opts *o);
int ctl_cmd_session_list(struct ctl_opts *o);

#endif
