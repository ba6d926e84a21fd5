/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-conn.h - one asynchronous iSCSI session to one LUN of one storage
 * server, driven by the tapdisk event loop (issue #6).
 *
 * The stripe driver keeps one iscsi_conn per server of its mapping file
 * and queues commands on it.  Everything runs in the event-loop thread:
 * libiscsi's socket is registered with the loop (iscsi_get_fd /
 * iscsi_which_events / iscsi_service), timers drive login back-off and
 * command timeouts.  No call here blocks, none allocates per command (the
 * caller embeds struct iscsi_cmd in its per-request state).
 *
 * LIFE CYCLE OF A CONNECTION
 *
 *   CONNECTING  iscsi_conn_create starts the TCP connect and login
 *               (iscsi_connect_async, iscsi_login_async), then READ
 *               CAPACITY(16) (retried over UNIT ATTENTIONs) for the
 *               block size and size, asks the Logical Block
 *               Provisioning VPD page whether UNMAP is supported, and
 *               reads the Block Limits VPD page (0xB0) for the LUN's
 *               MAXIMUM and OPTIMAL TRANSFER LENGTH (a LUN without the
 *               page has no limit).  Commands
 *               submitted meanwhile are queued.  A failed attempt is
 *               retried after a back-off (cfg.login_backoff_ms, doubling,
 *               at most cfg.login_retries extra attempts).  An attempt
 *               that has not logged in and probed the LUN after
 *               cfg.cmd_timeout_ms counts as failed (a server that accepts
 *               TCP but never answers, e.g. a stopped tgtd).  The portal's
 *               host should be a numeric address: libiscsi resolves names
 *               with a blocking getaddrinfo() at each attempt.
 *   UP          commands are issued, at most cfg.queue_depth at once; the
 *               rest wait in FIFO order.
 *   DOWN        the login failed every attempt, or a lost connection
 *               could not be re-established within its attempts: every
 *               queued and in-flight command completes with -EIO, and
 *               commands submitted while DOWN complete with -EIO at once
 *               (through a deferred call, never inside iscsi_conn_submit), so
 *               I/O to a dead server fails quickly.  A background attempt
 *               every cfg.revive_interval_ms moves it back to CONNECTING
 *               for one attempt (no retries: a failure goes straight back
 *               to DOWN, failing what was queued meanwhile with -EIO); a
 *               success makes it UP again (recovery after a revive).
 *
 *   A connection lost while UP (EOF, reset, a protocol error) is
 *   re-established with the same back-off; the commands that were in
 *   flight are issued again on the new session (SCSI READ/WRITE are
 *   idempotent), each keeping its own deadline.  The first reconnect
 *   attempt starts at once, the next ones after the back-off.  A LUN whose
 *   block size changed across a reconnect is refused (the attempt fails).
 *   libiscsi's own automatic reconnect is switched off: its back-off is in
 *   whole seconds (at least 3 s between attempts) and it has no deadline
 *   per command.
 *
 * COMMANDS
 *
 *   Each command has a deadline of cfg.cmd_timeout_ms from its submission
 *   (queueing included).  Past it the command completes with -ETIMEDOUT
 *   and the session is dropped and re-established (the only way to be sure
 *   a late answer cannot land in a buffer that was handed back).
 *
 *   SCSI status and sense are translated to -errno:
 *     GOOD, CONDITION MET -> 0; CHECK CONDITION with
 *       RECOVERED ERROR                       -> 0 (the command completed)
 *       MEDIUM ERROR, HARDWARE ERROR          -> -EIO
 *       ILLEGAL REQUEST (LBA out of range)    -> -ENXIO (the range passed
 *                                                the check against READ
 *                                                CAPACITY: the LUN shrank)
 *       ILLEGAL REQUEST (LU not supported)    -> -ENODEV (the LUN is gone)
 *       ILLEGAL REQUEST (invalid opcode, field in CDB or parameter list)
 *                                             -> -EOPNOTSUPP
 *       ILLEGAL REQUEST (anything else)       -> -EINVAL
 *       DATA PROTECT (space allocation failed)  -> -ENOSPC (thin pool full)
 *       DATA PROTECT (anything else)          -> -EROFS
 *       NOT READY, UNIT ATTENTION             -> retried once, then -EIO
 *       ABORTED COMMAND                       -> retried once, then -EIO
 *     RESERVATION CONFLICT -> -EBUSY; BUSY / TASK SET FULL -> retried after
 *     a short pause (the whole connection pauses ISCSI_CONN_BUSY_PAUSE_MS)
 *     until the deadline; anything else -> -EIO.
 *   A short transfer (a residual) of READ, WRITE or the WRITE(16) of a
 *   WRITE_ZEROES completes with -EIO; residuals on UNMAP and WRITE SAME
 *   parameter data are ignored (tgt reports the whole UNMAP list as
 *   residual after doing the unmap).
 *
 *   A READ or WRITE longer than the LUN's MAXIMUM TRANSFER LENGTH is
 *   carried out as several READ(16)/WRITE(16), one after the other, each
 *   at most that long and, when the LUN states an OPTIMAL TRANSFER LENGTH
 *   not above the maximum, a whole number of optimal lengths; each piece
 *   also takes at most ISCSI_CONN_PIECE_IOV iovec entries (a piece ends
 *   early, on a block boundary, where the caller's entries are small).
 *   The command keeps one deadline for all its pieces; a failed piece
 *   fails the command (pieces already written stay written, as with any
 *   failed WRITE).  Commands within the limit are sent whole.
 *
 *   Commands are checked when they are issued (the block size is known
 *   only then): a READ/WRITE whose iovecs do not add up to nr_blocks
 *   blocks, more than ISCSI_CONN_MAX_IOV entries, more than 4 GiB - 1
 *   bytes, nr_blocks 0, or a range beyond the LUN completes with -EINVAL
 *   without reaching the server.  UNMAP on a LUN without UNMAP support
 *   completes with -EOPNOTSUPP.  WRITE_ZEROES uses WRITE SAME(16) with the
 *   UNMAP bit when the LUN supports it and reads unmapped blocks as zeroes
 *   (unless cmd->no_hole), WRITE SAME(16) of a zero block otherwise; when
 *   the server refuses WRITE SAME, that command and every later one write
 *   zeroes with WRITE(16) in pieces of at most ISCSI_CONN_ZERO_CHUNK_BYTES,
 *   one after the other.
 *
 * Callbacks.  cmd->done(cmd, err) runs exactly once per iscsi_conn_submit, from
 * the event loop, never inside iscsi_conn_submit... except iscsi_conn_destroy,
 * which completes every remaining command with -ECANCELED before it
 * returns (the caller is closing).  A done callback may submit again and
 * may destroy the connection.
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
#define ISCSI_CONN_PIECE_IOV		    64 /* iovec entries per piece */

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
};

enum iscsi_conn_state {
	ISCSI_CONN_CONNECTING = 0,
	ISCSI_CONN_UP,
	ISCSI_CONN_DOWN,
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
};

struct iscsi_cmd;
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
	bool fua;     /* WRITE, WRITE_ZEROES: durable on completion */
	bool no_hole; /* WRITE_ZEROES: allocate, never unmap */
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
	uint32_t zeroed;       /* WRITE_ZEROES by WRITE(16): blocks done */
	uint32_t piece_done;   /* split READ/WRITE: blocks done */
	uint32_t piece_blocks; /* split READ/WRITE: the piece issued */
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
	uint64_t splits; /* READ/WRITE done in pieces (the LUN's limit) */
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
 * -EAGAIN with *retry set.  Exposed for unit tests.
 */
int iscsi_conn_status_errno(int status, int sense_key, int ascq, bool *retry);

#endif
