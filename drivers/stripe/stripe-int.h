/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-int.h - what the files of the stripe driver share (block-stripe.c:
 * open, close, options, reports, control; stripe-io.c: the request path;
 * stripe-stale.c: durable stale marks; stripe-resync.c: online resync).
 * Not for other modules.
 *
 * Everything here runs in the event-loop thread, except the map writer
 * thread of stripe-stale.c, which touches only struct stripe_stale's
 * shared part under its mutex.
 */
#ifndef TAPSTRIPE_STRIPE_INT_H
#define TAPSTRIPE_STRIPE_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "drivers/stripe/iscsi/iscsi-conn.h"
#include "drivers/stripe/iscsi/iscsi-pr.h"
#include "drivers/stripe/map/map.h"
#include "drivers/stripe/map/stripe-layout.h"
#include "drivers/stripe/stripe-al.h"
#include "drivers/stripe/stripe-notify.h"
#include "master/client/host-id.h"
#include "tapdisk/driver.h"

/* How often held commands look at a connection that is still CONNECTING. */
#define STRIPE_GATE_POLL_US	    5000
#define STRIPE_DEFAULT_RESYNC_RATE  (64ull << 20) /* bytes/s */
#define STRIPE_DEFAULT_RESYNC_CHUNK (1ull << 20)
#define STRIPE_MAX_RESYNC_CHUNK	    (64ull << 20)
#define STRIPE_MIN_RESYNC_RATE	    (64ull << 10)
#define STRIPE_MAX_QUEUE_DEPTH	    ISCSI_CONN_MAX_QUEUE_DEPTH
#define STRIPE_MAX_CMD_TIMEOUT_MS   3600000u
#define STRIPE_MAX_LOGIN_RETRIES    100u
/* New servers a tapdisk can take on for moves (re-homing) after open. */
#define STRIPE_SPARE_SERVERS 64u
/*
 * How long a replicated write (or a flush) waits for a degraded server to
 * come back before it goes on without it (degraded_grace_ms; see
 * stripe-io.c): longer than a healthy server's reconnect, far shorter
 * than a command timeout.
 */
#define STRIPE_DEFAULT_DEGRADED_GRACE_MS 100u
#define STRIPE_MAX_DEGRADED_GRACE_MS	 STRIPE_MAX_CMD_TIMEOUT_MS
/* What a replica's command that was not sent to a degraded server gets. */
#define STRIPE_SKIPPED_ERR (-ENOTCONN)

/*
 * Whether a server's LUN may be used: its block size and capacity are
 * checked against the map once its connection is UP, before the first
 * command is issued (a wrong block size would put data at wrong places).
 */
enum stripe_gate {
	STRIPE_GATE_UNCHECKED = 0,
	STRIPE_GATE_OK,
	STRIPE_GATE_BAD, /* every command fails with -EIO */
};

struct stripe_dev;
struct stripe_server;
struct stripe_handover;

/* --- fencing (stripe-fence.c; doc/stripe-driver.md "Fencing") ------------ */

/* How often an admission that could not reach the master asks again. */
#define STRIPE_FENCE_RETRY_MS 2000u
/* The master calls of an admission: per attempt, and extra attempts. */
#define STRIPE_FENCE_MASTER_TIMEOUT_MS 2000u
#define STRIPE_FENCE_MASTER_RETRIES    1u
/* RESERVE refused then READ RESERVATION saying none: tries at most. */
#define STRIPE_FENCE_MAX_RESERVE_TRIES 3u

enum stripe_fence_state {
	STRIPE_FENCE_OFF = 0,	 /* no lease, or a device that is not SCSI */
	STRIPE_FENCE_ADMITTING,	 /* a session logged in, not yet admitted */
	STRIPE_FENCE_REGISTERED, /* our key registered, WERO reserved */
	STRIPE_FENCE_FENCED,	 /* refused: writes fail with EACCES */
};

/* Where a server's admission is. */
enum stripe_fence_step {
	FENCE_STEP_IDLE = 0,
	FENCE_STEP_KEYS_BEFORE,	   /* READ KEYS */
	FENCE_STEP_REGISTER,	   /* REGISTER: our key was there */
	FENCE_STEP_KEYS_AFTER,	   /* READ KEYS: generation + 1, key there? */
	FENCE_STEP_ASKING,	   /* the master is asked (worker thread) */
	FENCE_STEP_REGISTER_ASKED, /* REGISTER: the master said yes */
	FENCE_STEP_READ_RES,	   /* READ RESERVATION */
	FENCE_STEP_RESERVE,	   /* RESERVE (WERO) */
	FENCE_STEP_UNREGISTER,	   /* the master said no */
};

/* What the master said of this host and the disk (the worker's answer). */
enum stripe_fence_verdict {
	FENCE_VERDICT_NONE = 0,	   /* not asked yet */
	FENCE_VERDICT_HOLDER,	   /* we hold the lease: register */
	FENCE_VERDICT_FENCED,	   /* not the holder, or fenced: refuse */
	FENCE_VERDICT_UNREACHABLE, /* ask again later */
};

/* The admission's next move: stripe_fence_decide(). */
enum stripe_fence_action {
	FENCE_DO_REGISTER,   /* our key is there: REGISTER this session */
	FENCE_DO_RESERVE,    /* registered, checked: ensure the reservation */
	FENCE_DO_ASK_MASTER, /* key absent or generation moved: ask */
	FENCE_DO_REGISTER_ASKED, /* the master says we hold it: REGISTER */
	FENCE_DO_REFUSE,	 /* the master says no: unregister, FENCED */
	FENCE_DO_WAIT,		 /* master unreachable: ask again later */
};

/* What one server's admission has learnt so far (decide's input). */
struct stripe_fence_view {
	bool have_before, have_after;
	uint32_t gen_before, gen_after; /* READ KEYS' PRgeneration */
	bool key_before, key_after;	/* our key among the keys */
	enum stripe_fence_verdict verdict;
};

/* The pure decision (see doc/stripe-driver.md "Fencing"). */
enum stripe_fence_action stripe_fence_decide(const struct stripe_fence_view *v);

/*
 * The master's answers turned into a verdict (pure): lease_err and lease
 * from lease show(vdisk), hosts_err and the fenced hosts from host list
 * (-EPROTONOSUPPORT: a master without MS_HOST_LIST, taken as "none
 * fenced").  why gets the reason for a refusal or an unreachable master.
 */
struct stripe_fence_answer {
	int lease_err; /* 0, or master_call_lease_show's -errno */
	const char *holder;
	uint64_t epoch;
	bool fence_pending;
	int hosts_err;	       /* 0, or master_call_host_list's -errno */
	const char *fenced_by; /* non-NULL: we are listed, fenced by it */
	uint64_t fenced_epoch;
};
enum stripe_fence_verdict
stripe_fence_verdict_of(const struct stripe_fence_answer *a, const char *host,
			uint64_t epoch, char *why, size_t why_len);

/* Per server (stripe_server.fence). */
struct stripe_fence_srv {
	enum stripe_fence_state state;
	enum stripe_fence_step step;
	struct iscsi_pr_cmd pr;
	bool busy;    /* pr is submitted */
	bool restart; /* a new login while busy: start again after it */
	struct stripe_fence_view view;
	uint64_t ask_seq; /* the request this server waits an answer for */
	uint32_t reserve_tries;
	bool logged_conflict; /* "fenced" logged for a refused write */
	bool logged_error;
	bool logged_not_scsi;		/* a device without PR: said once */
	uint64_t admissions;		/* admitted sessions */
	uint64_t reservation_conflicts; /* its commands refused (EACCES) */
};

/* Per disk: the worker thread that asks the master (off the loop). */
struct stripe_fence {
	bool on;      /* dev->lease.enabled and some server is iscsi */
	bool started; /* stripe_fence_start ran: stop must clean up */
	int efd;      /* the worker's answers */
	struct td_fd efd_event;
	struct td_timer retry_timer;
	bool retry_armed;
	bool logged_unreachable;
	uint64_t asks;	    /* master questions sent (for stats) */
	char last_why[512]; /* the last answer's reason, copied from why */

	/* shared with the worker, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started;
	bool stop;
	uint64_t asked;	   /* requests so far (loop thread increments) */
	uint64_t answered; /* the newest request the answer covers */
	enum stripe_fence_verdict verdict;
	char why[512];
	/* the worker's own */
	char *master, *vdisk, *host;
	uint64_t epoch;
};

/*
 * How a server's LUN is reached: "iscsi", a libiscsi session of tapdisk's
 * own (iscsi-conn.h, wrapped in block-stripe.c), or "device", the block
 * device of a kernel (open-iscsi) session, the map's "device" key
 * (stripe-bdev.c).  Both run struct iscsi_cmd with iscsi_conn_submit's
 * contract.  Every op is required and runs in the event-loop thread; be is
 * what the backend's create returned.
 */
struct stripe_backend_ops {
	const char *kind;
	/* Queue cmd; cmd->done runs later, exactly once, from the loop. */
	void (*submit)(void *be, struct iscsi_cmd *cmd);
	enum iscsi_conn_state (*state)(const void *be);
	/* The LUN's geometry and UNMAP support once UP: 0/false before. */
	uint32_t (*block_size)(const void *be);
	uint64_t (*nr_blocks)(const void *be);
	bool (*can_unmap)(const void *be);
	void (*get_stats)(const void *be, struct iscsi_conn_stats *st);
	/* Its stats as a JSON object named kind. */
	void (*report)(const void *be, struct td_json *j);
	/* Complete what is left with -ECANCELED and free. */
	void (*destroy)(void *be);
};

extern const struct stripe_backend_ops stripe_backend_iscsi;
extern const struct stripe_backend_ops stripe_backend_device;

struct stripe_bdev_cfg {
	const char *path;     /* the map's device */
	uint32_t block_size;  /* the map's: used for a regular file */
	uint32_t queue_depth; /* 0: ISCSI_CONN_DEFAULT_QUEUE_DEPTH */
	bool read_only;
	const char *name; /* for log messages */
	/*
	 * Fencing (stripe_fence_bdev_cfg): when set, the device is ADMITTING
	 * once open (its commands wait) and admit(be, admit_opaque) runs
	 * from the loop; the owner answers with stripe_bdev_admitted.  A
	 * RESERVATION CONFLICT (-EBADE from the kernel) fails the command
	 * with -EACCES and admits the device again, once (stripe-bdev.c).
	 */
	void (*admit)(void *be, void *opaque);
	void *admit_opaque;
	/* A command held while ADMITTING fails with -ETIMEDOUT after this
	 * long (0: ISCSI_CONN_DEFAULT_CMD_TIMEOUT_MS), as a session's. */
	uint32_t hold_timeout_ms;
};

/*
 * Open the device (stripe-bdev.c).  0 and *out, or -ENOMEM, -EINVAL, or
 * io_setup's error; a device that cannot be opened is not an error here:
 * the backend is DOWN (logged) and its commands fail with -EIO.
 */
int stripe_bdev_create(struct td_loop *loop, const struct stripe_bdev_cfg *cfg,
		       void **out);

/*
 * The admission's end, as iscsi_conn_admitted: 0 (UP: what waited goes
 * out), -EACCES (FENCED: what waited and every later command fail with
 * -EACCES).  -EINVAL when FENCED already or err is another value,
 * -ESTALE when not ADMITTING.
 */
int stripe_bdev_admitted(void *be, int err);

/*
 * A persistent-reservation action on the device through SG_IO
 * (stripe-sgio.c), run by the backend's worker thread (only with
 * cfg.admit), one at a time; done(pr, err, opaque) runs later from the
 * loop, exactly once (-ECANCELED at destroy), as iscsi-pr.h says:
 * -EACCES for RESERVATION CONFLICT, -ENOTTY or -EINVAL when the device is
 * not SCSI (a regular file), -EOPNOTSUPP when the LUN has no persistent
 * reservations.  pr's private fields action, key, done and opaque are
 * used.  -EINVAL (done never runs): busy, not open, PREEMPT_ABORT, no
 * callback, a zero key for REGISTER or RESERVE.
 */
int stripe_bdev_pr(void *be, struct iscsi_pr_cmd *pr, enum iscsi_pr_action a,
		   uint64_t key, iscsi_pr_done_fn done, void *opaque);

/*
 * One iSCSI command of the driver: a request's child, a flush round's
 * SYNCHRONIZE CACHE, a resync copy.  done runs exactly once, from the
 * event loop.
 */
struct stripe_cmd {
	struct iscsi_cmd io;
	struct stripe_server *srv;
	void (*done)(struct stripe_cmd *sc, int err);
	int gate_err;		      /* on dev->failed: what done gets */
	TAILQ_ENTRY(stripe_cmd) link; /* srv->held, srv->parked, dev->failed */
};

TAILQ_HEAD(stripe_cmd_list, stripe_cmd);

struct stripe_server {
	struct stripe_dev *dev;
	uint32_t index;
	const struct stripe_backend_ops *ops;
	void *be;	      /* the backend's own state */
	uint32_t block_size;  /* from the map */
	uint64_t need_blocks; /* the end of its last extent, in blocks */
	enum stripe_gate gate;
	struct stripe_cmd_list held; /* waiting for the gate */
	uint32_t live_slots;	     /* replicas on it that are not stale */
	uint32_t in_flight;	     /* commands issued by this driver */
	struct stripe_cmd sync;	     /* this server's part of a flush round */
	int sync_err;
	bool in_round;
	/*
	 * Commands that need not wait for this server while it is degraded
	 * (stripe-io.c), parked for at most degraded_grace_ms from
	 * degraded_ns: issued if it comes back UP by then, else skipped.
	 */
	struct stripe_cmd_list parked;
	uint64_t degraded_ns; /* when first seen degraded; 0: not degraded */
	uint64_t degraded_reconnects; /* its reconnect count then */
	struct stripe_fence_srv fence;
};

/* A replica child of a request. */
struct stripe_child {
	struct stripe_cmd sc;
	struct stripe_req *sr;
	uint32_t replica;
	int err;
};

/* Per-request state (td_driver_ops.req_size). */
struct stripe_req {
	struct td_request *req;
	struct stripe_dev *dev;
	uint32_t column, extent;
	uint64_t ext_off; /* bytes into the extent */
	uint64_t bytes;
	uint32_t pending;     /* children in flight */
	uint32_t issued_mask; /* replicas written, or tried by a read */
	uint32_t target_mask; /* the resync target, written too */
	int err;	      /* first child error */
	uint64_t wait_gen;    /* stale-mark generation to wait for */
	bool in_writes;	      /* on dev->writes */
	bool lock_blocker;    /* the chunk lock waits for it */
	bool al_held;	      /* holds its regions in the activity log */
	TAILQ_ENTRY(stripe_req) link;	   /* dev->writes */
	TAILQ_ENTRY(stripe_req) wait_link; /* a wait list: gen, lock, flush */
	uint32_t move_mask; /* replicas whose move target is written too */
	/* [r]: replica r; [STRIPE_MAX_REPLICAS + r]: its move target */
	struct stripe_child child[2 * STRIPE_MAX_REPLICAS];
};

TAILQ_HEAD(stripe_req_list, stripe_req);

/*
 * Durable stale marks (stripe-stale.c).  The loop thread keeps the state
 * it serves from in dev->map (slot.stale: never read, no longer written);
 * each change also goes into want[] with the next generation number, and
 * the writer thread rewrites the mapping file with the whole want[] of the
 * newest generation (so one rewrite covers every change before it).
 */
struct stripe_stale {
	/* loop thread */
	uint64_t gen_requested; /* newest generation handed to the thread */
	uint64_t gen_durable;	/* newest generation on disk */
	uint64_t gen_failed;	/* newest generation the thread failed */
	uint64_t *mark_gen;	/* per slot: generation of its last change */
	bool dirty;		/* want[] changed since gen_requested */
	bool *notified;		/* per slot: the state the master was told */
	struct stripe_req_list waiters; /* writes waiting for a generation */
	int efd;
	struct td_fd efd_event;
	uint64_t rewrites, rewrite_errors;

	bool inited; /* stripe_stale_start ran: stop must clean up */

	/* shared with the thread, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started;
	bool stop;
	struct stripe_map want_map; /* the state to write: slots, regions,
				       moves, servers */
	uint64_t want_gen;	    /* the generation want[] holds */
	uint64_t ok_gen;	    /* newest generation written */
	uint64_t fail_gen;	    /* newest generation that failed */
	int fail_err;
	char fail_msg[512]; /* why, from stripe_map_rewrite */

	/* the thread's own */
	struct stripe_map copy;
	int lock_fd; /* the mapping file's lock; swapped by each rewrite */
};

/* One hot region of the activity log (stripe-al.c). */
struct stripe_al_entry {
	uint64_t region;   /* extent index * regions per extent + k */
	uint64_t add_gen;  /* the generation that first named it */
	uint64_t last_use; /* for the LRU choice */
	uint32_t inflight; /* unacknowledged writes on it */
	uint32_t next;	   /* hash chain */
	bool used;
};

/*
 * The activity log (stripe-al.c).  Generations count from the record
 * written at open (rec.gen); gen_* are relative to it.
 */
struct stripe_al {
	/* loop thread */
	bool enabled; /* open, writable, al_regions > 0 */
	bool inited;
	uint32_t cap, nr, nbuckets;
	uint64_t unit;	     /* bytes of one log entry: whole regions */
	uint32_t per_extent; /* entries per extent */
	struct stripe_al_entry *e;
	uint32_t *bucket;
	uint64_t tick;
	uint64_t gen_requested, gen_durable, gen_failed;
	bool dirty;
	bool aborted;			/* a write ended without completing */
	struct stripe_req_list waiters; /* writes waiting for a record */
	struct stripe_req_list full;	/* writes waiting for an entry */
	int efd;
	struct td_fd efd_event;
	uint64_t writes, write_errors, waits, full_waits, evictions;
	uint32_t recovered; /* regions (or extents) the last open marked */
	bool *told;	    /* per slot: stale before the recovery, or NULL */
	char *path;
	int fd;
	uint64_t *out; /* the thread's copy */

	/* shared with the thread, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started, stop;
	struct stripe_al_record rec; /* the record written at open */
	uint64_t *want;
	uint32_t want_nr;
	uint64_t want_gen, ok_gen, fail_gen; /* file generations */
	int fail_err;
};

/*
 * The chunk lock (stripe-lock.c), taken by the resync or the scrub on
 * [start, end) of extent (column, extent): writes overlapping it wait on
 * waiting, writes in flight overlapping it (blockers, marked
 * lock_blocker) drain, then ready runs.
 */
struct stripe_lock {
	bool locked;
	uint32_t column, extent;
	uint64_t start, end;
	uint32_t blockers;
	struct stripe_req_list waiting; /* writes held by the lock */
	void (*ready)(struct stripe_dev *dev);
};

enum stripe_resync_state {
	STRIPE_RESYNC_IDLE = 0,
	STRIPE_RESYNC_RUNNING,
	STRIPE_RESYNC_DONE,
	STRIPE_RESYNC_FAILED,
	STRIPE_RESYNC_STOPPED,
};

enum stripe_resync_step {
	RESYNC_STEP_NONE = 0,
	RESYNC_STEP_DRAIN, /* lock taken: waiting for blockers */
	RESYNC_STEP_READ,
	RESYNC_STEP_WRITE,
	RESYNC_STEP_SYNC,  /* the end: the target's cache */
	RESYNC_STEP_PAUSE, /* throttle timer */
};

struct stripe_resync {
	enum stripe_resync_state state;
	bool auto_run; /* started on its own (auto_resync) */
	bool is_move;  /* the slot's target is its move target (re-homing) */
	uint64_t auto_after_ns; /* no run on its own before (a failed one) */
	struct td_timer auto_timer;
	enum stripe_resync_step step;
	bool stop_requested;
	uint64_t rate_bytes_per_s;
	uint64_t chunk_bytes;
	void *buf;   /* chunk_bytes, while running */
	bool *tried; /* per slot, this run */
	/* the slot being copied */
	bool have_slot;
	size_t slot;
	uint32_t column, extent, replica;
	uint64_t cursor; /* bytes [0, cursor) are copied */
	bool target_failed;
	uint32_t src_tried; /* replicas tried as the source of this chunk */
	uint64_t chunk_len;
	uint64_t chunk_start_ns;
	struct stripe_cmd cmd;
	struct iovec iov;
	struct td_timer timer;
	/* progress */
	uint64_t slots_total, slots_done, slots_failed, bytes_copied;
	uint64_t bytes_copied_all; /* every run since open */
	uint64_t started_ns, ended_ns;
	char last_error[160];
};

/* --- scrub (stripe-scrub.c; doc/striped-disks.md "Scrub") --------------- */

/* Mismatch places and extents not compared that a run keeps. */
#define STRIPE_SCRUB_MAX_PLACES 64
/* A place's disk offset when the byte lies past the disk's end. */
#define STRIPE_SCRUB_NO_OFFSET UINT64_MAX

enum stripe_scrub_state {
	STRIPE_SCRUB_IDLE = 0,
	STRIPE_SCRUB_RUNNING,
	STRIPE_SCRUB_DONE,
	STRIPE_SCRUB_STOPPED,
};

/* What the replicas of one chunk say (stripe_scrub_decide). */
enum stripe_scrub_verdict {
	STRIPE_SCRUB_SAME = 0,	/* every compared replica agrees */
	STRIPE_SCRUB_TOO_FEW,	/* fewer than two replicas to compare */
	STRIPE_SCRUB_MAJORITY,	/* good is right, bad differ from it */
	STRIPE_SCRUB_UNDECIDED, /* no strict majority: never guessed */
};

/*
 * The decision rule, a pure function.  crc[r] for the nr replicas of a
 * chunk; a replica is compared when it was read (read_ok) and is not
 * stale (stale replicas are the resync's job).  MAJORITY: more than half
 * of the compared replicas share one CRC: *good is the lowest of them,
 * *bad the compared replicas that differ.  UNDECIDED: *bad is every
 * compared replica, *good is nr.
 */
enum stripe_scrub_verdict stripe_scrub_decide(uint32_t nr, const uint32_t *crc,
					      uint32_t read_ok, uint32_t stale,
					      uint32_t *good, uint32_t *bad);

enum stripe_scrub_outcome {
	STRIPE_SCRUB_FOUND = 0, /* reported only (no --repair) */
	STRIPE_SCRUB_REPAIRED,	/* rewritten and synchronised */
	STRIPE_SCRUB_REPAIR_FAILED,
	STRIPE_SCRUB_NOT_DECIDED,
};

/* One mismatching chunk. */
struct stripe_scrub_place {
	uint32_t column, extent;
	uint32_t replicas; /* mask: those that differ (undecided: all) */
	uint32_t good;	   /* the replica taken as right; nr: none */
	uint64_t ext_off;  /* the first differing byte, in the extent */
	uint64_t disk_off; /* the same byte on the disk, or NO_OFFSET */
	uint64_t chunk_off, chunk_len;
	enum stripe_scrub_outcome outcome;
};

/* An extent some of whose chunks could not be compared. */
struct stripe_scrub_skip {
	uint32_t column, extent;
	uint32_t replicas; /* mask: the replicas that could not be read */
};

struct stripe_scrub {
	enum stripe_scrub_state state;
	bool stop_requested;
	bool repair;
	bool busy; /* a chunk's reads, writes or syncs are in flight */
	bool paused;
	uint64_t rate_bytes_per_s;
	uint64_t chunk_bytes;
	void *buf[STRIPE_MAX_REPLICAS]; /* chunk_bytes each, while running */
	struct stripe_cmd cmd[STRIPE_MAX_REPLICAS];
	struct iovec iov[STRIPE_MAX_REPLICAS];
	uint32_t pending, written, write_err;
	uint32_t read_ok;  /* replicas of the chunk read */
	uint32_t read_err; /* live replicas that could not be read */
	/* where it is */
	uint32_t column, extent;
	uint64_t cursor, chunk_len, chunk_start_ns;
	uint32_t good, bad;
	struct td_timer timer;
	/* progress */
	uint64_t chunks_total, chunks_checked, chunks_skipped;
	uint64_t mismatches, repaired, undecided, repair_failed;
	uint64_t bytes_read, started_ns, ended_ns;
	uint32_t nr_places, nr_skips;
	uint64_t skipped_extents;
	struct stripe_scrub_place places[STRIPE_SCRUB_MAX_PLACES];
	struct stripe_scrub_skip skips[STRIPE_SCRUB_MAX_PLACES];
	char last_error[160];
};

struct stripe_opts {
	uint32_t queue_depth;
	uint32_t cmd_timeout_ms;
	uint32_t login_retries;
	bool login_retries_set;
	uint64_t resync_rate;
	uint64_t resync_chunk;
	uint32_t degraded_grace_ms;
	char *initiator;
	bool lease_off; /* lease=off: no lease taken (a map no other host has) */
	/* snapshot_target=on: opened as the target of a snapshot copy, so an
	 * incomplete snapshot's map (MAP.incomplete next to it) may open */
	bool snapshot_target;
	uint32_t al_regions;  /* activity log entries; 0 = no log */
	uint64_t al_unit;     /* bytes per log entry; 0 = the default */
	bool auto_resync_off; /* auto_resync=off */
};

/*
 * The disk's lease at the master (issue #18; stripe-lease.c takes it at
 * open, stripe-fence.c registers key on every LUN and checks with the
 * master before writing where it was not registered).  Filled at open,
 * read-only afterwards but for handed_over.
 */
struct stripe_lease {
	bool enabled;			   /* lease=on (the default) */
	char host_id[MASTER_HOST_ID_SIZE]; /* this host's id */
	uint64_t key;			   /* iscsi_conn_pr_key(host_id) */
	uint64_t epoch;			   /* the lease's epoch, held at open */
	bool handed_over; /* given to another host: no more I/O */
	/* The holder now: host_id, or the host it was handed over to. */
	char holder[MASTER_HOST_ID_SIZE];
	struct stripe_handover *ho; /* NULL until the first hand-over */
};

/* --- allocation (stripe-alloc.c; doc/stripe-driver.md "Allocation") ------ */

/* The finest region base:allocation tells apart (smaller with U). */
#define STRIPE_ALLOC_CHUNK_BYTES (64ull << 10)
/* GET LBA STATUS descriptors asked per command (16 bytes each). */
#define STRIPE_ALLOC_EXTENTS 128u
/*
 * Bytes of an extent one command covers at most (the rest: the next
 * command): bounds the chunks one answer marks (16384 of 64 KiB), so an
 * answer costs the loop microseconds, not the milliseconds of a 1 TiB
 * extent's 16 M chunks.
 */
#define STRIPE_ALLOC_MAX_BYTES (1ull << 30)

/*
 * What is known of the disk's allocation, per chunk of chunk_bytes of
 * virtual space: hole = a fresh replica said deallocated and reads as
 * zeroes, written = written (or discarded, zeroed) since open.  A chunk
 * is a hole when hole and not written; everything else is allocated.
 */
struct stripe_alloc {
	bool chunks_inited;
	uint64_t chunk_bytes;
	uint64_t nr_chunks; /* at open: a grown disk's new part is allocated */
	uint64_t *hole, *written;
	/* the scan: extent index k = j * S + c, bytes [0, cursor) asked */
	uint32_t extent, scan_extents;
	uint64_t cursor;
	bool busy, done, logged_error;
	struct stripe_cmd cmd;
	struct iscsi_lba_answer answer;
	struct iscsi_lba_extent ext[STRIPE_ALLOC_EXTENTS];
	uint64_t extents_scanned, extents_unknown;
};

struct stripe_dev {
	struct td_driver *drv;
	char *path; /* the mapping file */
	struct stripe_opts opts;
	struct stripe_map map; /* slots[].stale is what I/O obeys */
	struct stripe_layout layout;
	uint32_t nr_servers;
	struct stripe_server *servers;
	bool closing;

	struct stripe_cmd_list failed; /* gate BAD: completed by fail_defer */
	struct td_defer fail_defer;
	struct td_timer gate_timer;
	uint32_t rr; /* round robin among equal read candidates */

	struct stripe_req_list writes; /* modifying requests in flight */

	/* flushes: one SYNCHRONIZE CACHE round at a time */
	struct stripe_req_list flush_cur, flush_next;
	uint32_t round_pending;
	bool round_active;

	struct stripe_stale stale;
	struct stripe_lock lock;
	struct stripe_resync resync;
	struct stripe_al al;
	struct stripe_scrub scrub;
	struct stripe_notify *notify;
	struct stripe_lease lease;
	struct stripe_fence fence;

	/* counters for tap-ctl stats */
	uint64_t read_fallbacks;
	uint64_t replica_write_errors;
	uint64_t writes_degraded; /* acknowledged without every replica */
	uint64_t degraded_skips;  /* replica commands a degraded server was
				     not sent */
	uint64_t flush_rounds;
	uint64_t gate_failures;
	uint64_t reservation_conflicts; /* requests failed with EACCES */
	uint64_t moves_added, moves_done;
	uint32_t servers_cap; /* dev->servers' room: new servers of moves */
	struct stripe_alloc alloc;
};

/* --- block-stripe.c ------------------------------------------------------ */
/* How many replicas of extent (c, j) are live (not stale). */
uint32_t stripe_live_replicas(const struct stripe_dev *dev, uint32_t c,
			      uint32_t j);
/*
 * Whether slot's replica still has a clean region (it is then written
 * there, flushed, and read where clean): not every region is dirty.
 */
static inline bool stripe_slot_usable(const struct stripe_map *m, size_t slot)
{
	uint32_t n = stripe_map_region_count(m);

	return !m->slots[slot].stale ||
	       stripe_map_bits_count(stripe_map_slot_dirty(m, slot), n) < n;
}
/*
 * Whether every region of slot's dirty ones has a clean copy on another
 * replica of its extent (a resync can copy it all).
 */
bool stripe_slot_has_source(const struct stripe_dev *dev, size_t slot);

/* --- stripe-alloc.c ---------------------------------------------------- */
/* Start the allocation scan (open, after the servers): 0 or -ENOMEM. */
int stripe_alloc_start(struct stripe_dev *dev);
/* Free its state (close, after the servers were destroyed). */
void stripe_alloc_close(struct stripe_dev *dev);
/* A write, discard or zeroing of the range was submitted. */
void stripe_alloc_write(struct stripe_dev *dev, uint64_t sector,
			uint64_t nr_sectors);
/* td_driver_ops.block_status: base:allocation from what the scan learnt. */
int stripe_alloc_block_status(struct td_driver *drv, const char *ctx,
			      uint64_t sector, uint64_t nr_sectors,
			      struct td_extent *ext, unsigned int *nr);
void stripe_alloc_report_json(const struct stripe_dev *dev, struct td_json *j);

/* --- stripe-io.c ------------------------------------------------------- */
int stripe_io_submit(struct td_driver *drv, struct td_request *req);
/* Issue sc on its server, through the server's gate. */
void stripe_cmd_submit(struct stripe_dev *dev, struct stripe_cmd *sc);
/* Whether the regions sr touches are clean on replica r. */
bool stripe_req_clean_on(const struct stripe_dev *dev,
			 const struct stripe_req *sr, uint32_t r);
/* Route a write again (it waited for the resync lock). */
void stripe_io_restart(struct stripe_dev *dev, struct stripe_req *sr);
void stripe_io_close(struct stripe_dev *dev);
const char *stripe_gate_name(enum stripe_gate g);
/*
 * Whether srv is degraded now: its session was up once (or it is DOWN)
 * and is not up now; notes when it was first seen so (srv->degraded_ns).
 */
bool stripe_server_degraded(struct stripe_dev *dev, struct stripe_server *srv);

/* --- stripe-stale.c ---------------------------------------------------- */
int stripe_stale_start(struct stripe_dev *dev, int lock_fd);
/* Stop the thread and release the mapping file's lock. */
void stripe_stale_stop(struct stripe_dev *dev);
/* Change a slot's state in memory and in want[] (not yet handed over). */
void stripe_stale_set(struct stripe_dev *dev, size_t slot, bool stale);
/*
 * Mark the regions of [off, off + len) of slot dirty (the slot turns
 * stale when it was not); the generation a write that missed them must
 * wait for before it is acknowledged (0: durable already).
 */
uint64_t stripe_stale_mark_range(struct stripe_dev *dev, size_t slot,
				 uint64_t off, uint64_t len);
/*
 * The master was told told[] (per slot: stale) before this open; tell it
 * what differs now (the activity log's recovery marked slots).
 */
void stripe_stale_told(struct stripe_dev *dev, bool *told);
/*
 * A slot's replica or move changed in dev->map (not only its marks): hand
 * its whole state over for the next rewrite (stripe_stale_commit).
 */
void stripe_stale_slot_changed(struct stripe_dev *dev, size_t slot);
/* dev->map has a new server (appended): the rewrites carry it.  0/-ENOMEM. */
int stripe_stale_server_added(struct stripe_dev *dev);
/* Hand want[] to the thread if it changed; the generation to wait for. */
uint64_t stripe_stale_commit(struct stripe_dev *dev);
/*
 * The generation a write that skips stale slot must wait for before it is
 * acknowledged (0: the mark is durable), asking for a new rewrite when
 * the last one that covered it failed.
 */
uint64_t stripe_stale_gen_for(struct stripe_dev *dev, size_t slot);
/*
 * Complete sr with sr->err once generation gen is durable (-EIO if its
 * rewrite fails); at once when it is already.
 */
void stripe_stale_wait(struct stripe_dev *dev, struct stripe_req *sr,
		       uint64_t gen);
bool stripe_stale_durable(const struct stripe_dev *dev, size_t slot);
uint32_t stripe_stale_pending(const struct stripe_dev *dev);
/*
 * Growing while serving (stripe-grow.c): write g, the grown map of
 * dev->map (dev->map still the old one), through the writer's lock fd
 * and take the per-slot state (mark_gen, notified, want_map and the
 * thread's copy) to g's indices.  -EBUSY when the writer thread is
 * rewriting now; else as stripe_map_rewrite (err says why).  On an error
 * nothing changed; on success the caller must swap g in (nothing may
 * fail after this).  Blocks on the disk for one rewrite.
 */
int stripe_stale_grow(struct stripe_dev *dev, const struct stripe_map *g,
		      struct stripe_map_error *err);

/* --- stripe-al.c ------------------------------------------------------- */
/*
 * At open, after the map is read and before the stale writer starts: read
 * the log, mark what an unclean one names (rewriting the map through
 * *lock_fd), start a new log.  0, or -errno said with td_driver_fail.
 */
int stripe_al_open(struct stripe_dev *dev, int *lock_fd);
/* At close, after the backends: a clean record when no write is held. */
void stripe_al_close(struct stripe_dev *dev);
/*
 * Before a write is routed: take its regions.  false: go on now; true: it
 * waits (a record, or a free entry) and stripe_io_restart runs it later.
 */
bool stripe_al_enter(struct stripe_dev *dev, struct stripe_req *sr);
void stripe_al_leave(struct stripe_dev *dev, struct stripe_req *sr);
/*
 * The map's extents per column grew from old_j to new_j (the map is
 * swapped after): the log's region ids, its hash, the ids handed to its
 * thread and its record's extent count move to the grown places.
 */
void stripe_al_regrow(struct stripe_dev *dev, uint32_t old_j, uint32_t new_j);
/* Complete a request of the driver (its log regions let go first). */
void stripe_req_complete(struct stripe_dev *dev, struct stripe_req *sr,
			 int err);

/* --- stripe-move.c ----------------------------------------------------- */
/* "move add|abort|status" control words (argv[0] is "move"). */
int stripe_move_control(struct stripe_dev *dev, int argc, char **argv,
			struct td_strbuf *out);
/* The copy of slot's move target is complete and synced: swap it in. */
void stripe_move_swap(struct stripe_dev *dev, size_t slot);
void stripe_move_report_json(struct stripe_dev *dev, struct td_json *j);
void stripe_move_report_text(struct stripe_dev *dev, struct td_strbuf *sb);
/*
 * block-stripe.c: the index of the server ms names (by target and LUN),
 * added to the disk (a new connection, the map's server list) when it is
 * new.  0, -EINVAL when its block size differs from the known one's,
 * -ENOSPC when the spare room is used up, -errno.
 */
int stripe_server_add(struct stripe_dev *dev,
		      const struct stripe_map_server *ms, uint32_t *idx);

/* --- stripe-grow.c ----------------------------------------------------- */
/*
 * The driver op refresh_size (tap-ctl resize): take PATH.grow while
 * serving (doc/stripe-driver.md "Growing while serving").
 */
int stripe_grow_refresh(struct td_driver *drv, uint64_t *sectors);

/* --- stripe-fence.c ---------------------------------------------------- */
/*
 * At open, before the backends exist: when dev->lease.enabled, start the
 * worker and fill *cfg's admission hook for each iscsi server (call once
 * per server from conn_create).  0 or -errno.
 */
int stripe_fence_start(struct stripe_dev *dev);
void stripe_fence_conn_cfg(struct stripe_dev *dev, uint32_t server,
			   struct iscsi_conn_cfg *cfg);
/* The same for a device server (from its backend's creation). */
void stripe_fence_bdev_cfg(struct stripe_dev *dev, uint32_t server,
			   struct stripe_bdev_cfg *cfg);
/* At close, after the backends are destroyed. */
void stripe_fence_stop(struct stripe_dev *dev);
/* A command of srv failed with EACCES: count, log once, note FENCED. */
void stripe_fence_conflict(struct stripe_dev *dev, struct stripe_server *srv);
const char *stripe_fence_state_name(enum stripe_fence_state s);
/* --- stripe-lease.c ---------------------------------------------------- */
/* How open asks the master for the lease: bounded, tapdisk's start waits. */
#define STRIPE_LEASE_TIMEOUT_MS 5000u /* per attempt */
#define STRIPE_LEASE_RETRIES	1u

/* What open asks about and whom (for stripe_lease_verdict's messages). */
struct stripe_lease_ctx {
	const char *vdisk;
	const char *host;   /* this host's id */
	const char *master; /* the master's address */
	const char *error;  /* master_client_error() of the call */
};

/*
 * The decision of open, a pure function: ret and rep are what
 * master_call_lease_acquire answered.  0 with *epoch: this host holds the
 * lease and may serve.  Else -errno with msg (one line: the holder and
 * what to do): -EBUSY held by another host, -EPERM this host was fenced,
 * -EAGAIN a fenced takeover not yet finished, -EHOSTUNREACH the master
 * cannot be reached, or the master's own error.
 */
int stripe_lease_verdict(int ret, const ms_reply *rep,
			 const struct stripe_lease_ctx *ctx, uint64_t *epoch,
			 char *msg, size_t len);
/*
 * At open, after the map is read, before the connections: take the lease
 * (lease on) or warn (lease=off).  0, or -errno having said why with
 * td_driver_fail.  Blocks for at most about (1 + the masters in the map's
 * list) * STRIPE_LEASE_TIMEOUT_MS, plus a pause (master/client/client.h).
 */
int stripe_lease_open(struct stripe_dev *dev);
/* Stop a hand-over under way (its thread is joined) and free it. */
void stripe_lease_close(struct stripe_dev *dev);
/* The driver's submit: the lease's gate in front of stripe_io_submit. */
int stripe_lease_submit(struct td_driver *drv, struct td_request *req);
/* "lease" and "handover HOST" control commands. */
int stripe_lease_control(struct stripe_dev *dev, int argc, char **argv,
			 struct td_strbuf *out);
void stripe_lease_report_json(struct stripe_dev *dev, struct td_json *j);
void stripe_lease_report_text(struct stripe_dev *dev, struct td_strbuf *sb);
const char *stripe_lease_state(const struct stripe_dev *dev);
/* A hand-over holds the writes now, or the disk was handed over. */
bool stripe_lease_handover_busy(const struct stripe_dev *dev);

/* --- stripe-lock.c ---------------------------------------------------- */
/*
 * Lock [start, end) of extent (column, extent): ready(dev) runs once no
 * write in flight overlaps it, at once (from this call) when none does.
 * One holder at a time; stripe_lock_release routes the waiting writes
 * again.
 */
void stripe_lock_take(struct stripe_dev *dev, uint32_t column, uint32_t extent,
		      uint64_t start, uint64_t end,
		      void (*ready)(struct stripe_dev *dev));
void stripe_lock_release(struct stripe_dev *dev);
/*
 * For the write path.  true: sr overlaps the locked range and was queued
 * (stripe_io_restart runs it at the release).
 */
bool stripe_lock_route_write(struct stripe_dev *dev, struct stripe_req *sr);
/* A write the lock waited for (lock_blocker) has completed. */
void stripe_lock_blocker_done(struct stripe_dev *dev);

/* --- stripe-resync.c --------------------------------------------------- */
/* 0 (started), -EALREADY, -ENOMEM; msg says what happened. */
int stripe_resync_start(struct stripe_dev *dev, uint64_t rate,
			struct td_strbuf *msg);
int stripe_resync_stop(struct stripe_dev *dev, struct td_strbuf *msg);
/* Start a run (not on its own) now if none is running: a move was added. */
void stripe_resync_kick(struct stripe_dev *dev);
/* At open: look every second for a server back with regions to copy. */
void stripe_resync_auto_start(struct stripe_dev *dev);
void stripe_resync_close(struct stripe_dev *dev);
/* For the write path: sets sr->target_mask when the resync target must
 * be written too. */
void stripe_resync_route_write(struct stripe_dev *dev, struct stripe_req *sr);
/* A write to slot's move target failed: a copy of it under way is not exact. */
void stripe_resync_move_failed(struct stripe_dev *dev, size_t slot, int err);
/* A write to the resync target failed: the copy is no longer exact. */
void stripe_resync_target_failed(struct stripe_dev *dev, int err);
const char *stripe_resync_state_name(enum stripe_resync_state s);

/* --- stripe-scrub.c ---------------------------------------------------- */
/* 0 (started), -EALREADY (a scrub or a resync runs), -EROFS, -ENOMEM;
 * msg says what happened.  rate 0: resync_rate. */
int stripe_scrub_start(struct stripe_dev *dev, uint64_t rate, bool repair,
		       struct td_strbuf *msg);
int stripe_scrub_stop(struct stripe_dev *dev, struct td_strbuf *msg);
void stripe_scrub_close(struct stripe_dev *dev);
const char *stripe_scrub_state_name(enum stripe_scrub_state s);
/* "scrub: ..." and a line per place (doc/striped-disks.md "Scrub"). */
void stripe_scrub_report_text(const struct stripe_dev *dev,
			      struct td_strbuf *sb);
void stripe_scrub_report_json(const struct stripe_dev *dev, struct td_json *j);

#endif
