/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-conn.h - one asynchronous iSCSI session to one LUN of one storage
 * server, driven by the tapdisk event loop (issue #6).
 *
 * Contract: everything runs in the event-loop thread; no call blocks (give
 * the portal as a numeric address: libiscsi resolves names with a blocking
 * getaddrinfo()) and none allocates per command (the caller embeds struct
 * iscsi_cmd).  cmd->done(cmd, err) runs exactly once per
 * iscsi_conn_submit, from the event loop, never inside iscsi_conn_submit,
 * except that
 * iscsi_conn_destroy completes what is left with -ECANCELED before it
 * returns; a done callback may submit again and may destroy the
 * connection.  err is 0 or -errno: -ETIMEDOUT past the command's deadline,
 * -EIO on a DOWN connection, -EACCES for RESERVATION CONFLICT (this host
 * was fenced from the LUN: never retried, never a reconnect), SCSI sense
 * translated as doc/stripe-driver.md tabulates.  The connection's life cycle (CONNECTING, UP, DOWN, reconnect)
 * and the command rules are in doc/stripe-driver.md.
 */
#ifndef TAPSTRIPE_ISCSI_CONN_H
#define TAPSTRIPE_ISCSI_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/uio.h>

#include "common/json.h"
#include "common/loop.h"

#define ISCSI_CONN_DEFAULT_QUEUE_DEPTH	    64
#define ISCSI_CONN_DEFAULT_CMD_TIMEOUT_MS   30000
#define ISCSI_CONN_DEFAULT_LOGIN_RETRIES    3
#define ISCSI_CONN_DEFAULT_LOGIN_BACKOFF_MS 100
#define ISCSI_CONN_DEFAULT_REVIVE_MS	    2000
#define ISCSI_CONN_DEFAULT_INITIATOR	    "iqn.2026-11.org.tapstripe:tapdisk"
#define ISCSI_CONN_MAX_QUEUE_DEPTH	    1024 /* cfg.queue_depth above: -EINVAL */
#define ISCSI_CONN_MAX_IOV		    1024 /* entries per READ/WRITE */
#define ISCSI_CONN_BUSY_PAUSE_MS	    10
#define ISCSI_CONN_ZERO_CHUNK_BYTES	    (256u << 10)
#define ISCSI_CONN_PIECE_IOV		    64	 /* iovec entries per piece */
#define ISCSI_CONN_MAX_LBA_EXTENTS	    1024 /* GET LBA STATUS descriptors */

struct iscsi_conn;

struct iscsi_conn_cfg {
	const char *portal; /* "host:port" (":3260" when no port) */
	const char *target; /* target IQN */
	uint32_t lun;
	const char *initiator;	   /* NULL: ISCSI_CONN_DEFAULT_INITIATOR */
	const char *chap_user;	   /* NULL or "": no CHAP */
	const char *chap_secret;   /* set when chap_user is */
	uint32_t queue_depth;	   /* 0: default; commands in flight at once */
	uint32_t cmd_timeout_ms;   /* 0: default */
	uint32_t login_retries;	   /* extra attempts per (re)connect; 0: none
				    (ISCSI_CONN_DEFAULT_LOGIN_RETRIES is
				    the usual choice) */
	uint32_t login_backoff_ms; /* 0: default; first pause, doubling */
	uint32_t revive_interval_ms; /* 0: default; attempts while DOWN */
	const char *name;	     /* for log messages, e.g. "srv2" */
	/*
	 * Optional admission (issue #18).  When set, every successful
	 * login (the first and each reconnect) leaves the connection
	 * ADMITTING instead of UP and calls admit(c, admit_opaque) from the
	 * loop: only commands with cmd->admission set go out meanwhile, the
	 * others are held (their deadlines keep running) until the owner
	 * calls iscsi_conn_admitted().  NULL: UP at once, as always.
	 */
	void (*admit)(struct iscsi_conn *c, void *opaque);
	void *admit_opaque;
};

enum iscsi_conn_state {
	ISCSI_CONN_CONNECTING = 0,
	ISCSI_CONN_UP,
	ISCSI_CONN_DOWN,
	ISCSI_CONN_ADMITTING, /* logged in, cfg.admit deciding: see above */
	ISCSI_CONN_FENCED,    /* admission refused: every command -EACCES */
};

enum iscsi_cmd_op {
	ISCSI_CMD_READ = 0,	/* READ(16) into iov */
	ISCSI_CMD_WRITE,	/* WRITE(16) from iov, FUA when cmd->fua */
	ISCSI_CMD_SYNC,		/* SYNCHRONIZE CACHE(16) of the whole LUN */
	ISCSI_CMD_UNMAP,	/* UNMAP of lba..+nr_blocks (-EOPNOTSUPP when
			       the LUN does not support it) */
	ISCSI_CMD_WRITE_ZEROES, /* WRITE SAME(16) of a zero block, or UNMAP
				   when the LUN reads unmapped blocks as
				   zeroes; written zero buffers otherwise */
	ISCSI_CMD_PR_IN,	/* PERSISTENT RESERVE IN, OUT: submitted only
				   by iscsi-pr.h's calls (cmd->pr set);
				   -EINVAL otherwise */
	ISCSI_CMD_PR_OUT,
	ISCSI_CMD_GET_LBA_STATUS, /* GET LBA STATUS from lba, at most
				     nr_blocks, into cmd->lba_status;
				     -EOPNOTSUPP unless the LUN reports
				     LBPME and LBPRZ (a hole reads zeroes) */
};

/* One run of GET LBA STATUS's answer: blocks lba.. in one state. */
struct iscsi_lba_extent {
	uint64_t lba;
	uint32_t nr_blocks;
	bool hole; /* deallocated or anchored: reads as zeroes (LBPRZ) */
};

/*
 * GET_LBA_STATUS's answer, owned by the caller: room entries in ext, nr
 * filled on success (>= 1), in order from cmd->lba, contiguous, clipped
 * to cmd->nr_blocks; they may cover less.
 */
struct iscsi_lba_answer {
	uint32_t room;
	uint32_t nr;
	struct iscsi_lba_extent *ext;
};

struct iscsi_cmd;
struct iscsi_pr_cmd;
typedef void (*iscsi_cmd_done_fn)(struct iscsi_cmd *cmd, int err);

/* Embedded in the caller's per-request state; filled before submitting. */
struct iscsi_cmd {
	enum iscsi_cmd_op op;
	uint64_t lba;	    /* in the LUN's blocks */
	uint32_t nr_blocks; /* READ/WRITE: iov's bytes / block size */
	/*
	 * READ/WRITE; must outlive the command and be writable: libiscsi
	 * trims an entry in place around each readv/writev and restores it
	 * before returning to the loop, so it is unchanged between passes.
	 */
	struct iovec *iov;
	int iovcnt;
	bool fua;	/* WRITE, WRITE_ZEROES: durable on completion */
	bool no_hole;	/* WRITE_ZEROES: allocate, never unmap */
	bool admission; /* issued while ADMITTING (cfg.admit's commands) */
	struct iscsi_lba_answer *lba_status; /* GET_LBA_STATUS only */
	iscsi_cmd_done_fn done;
	void *opaque;

	/* --- private to the backend running it: iscsi-conn.c and
	 * iscsi-cmd.c, or the stripe driver's device backend (stripe-bdev.c:
	 * link, start_ns, result) --------------------------------------- */
	TAILQ_ENTRY(iscsi_cmd) link;	 /* waiting, in-flight or done list */
	TAILQ_ENTRY(iscsi_cmd) age_link; /* the conn's list by deadline */
	struct iscsi_conn *conn;
	void *task; /* the libiscsi scsi_task while issued */
	uint64_t deadline_ns;
	uint64_t start_ns;
	uint32_t retries;
	uint32_t unit_attentions; /* UNIT ATTENTIONs taken and retried */
	struct iscsi_pr_cmd *pr;  /* PR_IN, PR_OUT: set by iscsi-pr.c */
	uint32_t zeroed;	  /* WRITE_ZEROES by WRITE(16): blocks done */
	uint32_t piece_done;	  /* split READ/WRITE: blocks done */
	uint32_t piece_blocks;	  /* split READ/WRITE: the piece issued */
	int piece_iovcnt;
	struct iovec piece_iov[ISCSI_CONN_PIECE_IOV];
	int state;
	int step; /* WRITE_ZEROES: how it is being carried out */
	int result;
	bool expired;  /* deadline passed while issued */
	bool reissued; /* lost with a session: counts in stats.reissued */
};

struct iscsi_conn_stats {
	enum iscsi_conn_state state;
	uint64_t reads, writes, syncs, unmaps; /* completed without error */
	uint64_t write_zeroes;
	uint64_t read_bytes, write_bytes;
	uint64_t errors;     /* commands completed with an error */
	uint64_t timeouts;   /* commands that hit their deadline */
	uint64_t reissued;   /* commands issued again after a reconnect */
	uint64_t reconnects; /* sessions re-established */
	uint64_t login_failures;
	uint64_t splits;      /* READ/WRITE done in pieces (the LUN's limit) */
	uint64_t pr_commands; /* PERSISTENT RESERVE IN/OUT done */
	uint64_t lba_status;  /* GET LBA STATUS done */
	uint64_t reservation_conflicts; /* commands refused: fenced (a
					   RESERVATION CONFLICT, or FENCED) */
	uint64_t unit_attentions;	/* taken and retried */
	uint32_t in_flight, queued, max_in_flight; /* max: since create */
	uint64_t latency_sum_us; /* over completed READ/WRITE commands */
	uint64_t latency_max_us;
};

struct iscsi_conn;

/*
 * Create a connection and start connecting.  cfg's strings are copied.
 * 0 and *out, -EINVAL for a bad portal ("host", "host:port", "[v6]:port"),
 * target (empty or over 223 bytes), queue depth or CHAP pair (a user
 * without a secret), -ENOMEM.  Never blocks: an unreachable server shows
 * up later as DOWN.
 */
int iscsi_conn_create(struct td_loop *loop, const struct iscsi_conn_cfg *cfg,
		      struct iscsi_conn **out);

/* Complete what is left with -ECANCELED, log out if UP, free. */
void iscsi_conn_destroy(struct iscsi_conn *c);

/*
 * Queue cmd; cmd->done runs later, exactly once, from the event loop.  The
 * caller fills op, lba, nr_blocks, iov/iovcnt, fua, no_hole, done, opaque
 * and leaves cmd alone until done runs.
 */
void iscsi_conn_submit(struct iscsi_conn *c, struct iscsi_cmd *cmd);

enum iscsi_conn_state iscsi_conn_state(const struct iscsi_conn *c);

/*
 * The admission's verdict (cfg.admit), from the event loop:
 *   0        ADMITTING -> UP, the held commands go out in order;
 *   -EACCES  -> FENCED (from any state): what is held or queued, and
 *            every later command, completes with -EACCES; the session is
 *            dropped and never reconnected (logged; a new connection is
 *            the only way back).
 * Returns 0, -ESTALE for 0 when the connection is not ADMITTING (the
 * session was lost meanwhile: admit runs again after the next login),
 * -EINVAL for another err or a FENCED connection.
 */
int iscsi_conn_admitted(struct iscsi_conn *c, int err);

/* What READ CAPACITY said once UP: 0 until then. */
uint32_t iscsi_conn_block_size(const struct iscsi_conn *c);
uint64_t iscsi_conn_nr_blocks(const struct iscsi_conn *c);
bool iscsi_conn_can_unmap(const struct iscsi_conn *c);
/* The Block Limits page's transfer lengths once UP, in blocks: 0 = none. */
uint32_t iscsi_conn_max_transfer_blocks(const struct iscsi_conn *c);
uint32_t iscsi_conn_opt_transfer_blocks(const struct iscsi_conn *c);

/* The last error as text ("" if none), for messages. */
const char *iscsi_conn_error(const struct iscsi_conn *c);

void iscsi_conn_get_stats(const struct iscsi_conn *c,
			  struct iscsi_conn_stats *st);

/* The stats as a JSON object named key (for tap-ctl stats). */
void iscsi_conn_report(const struct iscsi_conn *c, struct td_json *j,
		       const char *key);

const char *iscsi_conn_state_name(enum iscsi_conn_state s);

/*
 * Translate a finished SCSI status and sense to -errno as described above.
 * status is the SCSI status byte (SCSI_STATUS_* of libiscsi), sense_key
 * the sense key, ascq libiscsi's (ASC << 8 | ASCQ).  *retry is set (and
 * the errno is the one to use once retries are exhausted) for NOT READY,
 * UNIT ATTENTION and ABORTED COMMAND; BUSY and TASK SET FULL return
 * -EAGAIN with *retry set; RESERVATION CONFLICT returns -EACCES, never
 * retried.  Exposed for unit tests.
 */
int iscsi_conn_status_errno(int status, int sense_key, int ascq, bool *retry);

#endif
