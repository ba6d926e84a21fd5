/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-int.h - what iscsi-conn.c (the session: attempts, reconnect, DOWN
 * and revive, the loop's fd and timers), iscsi-login.c (connect, login,
 * probe) and iscsi-cmd.c (commands: checks, issue, completion, deadlines)
 * share.  Nothing outside these three files includes it.
 *
 * Everything runs in the event-loop thread.  libiscsi calls back only from
 * inside iscsi_service() or iscsi_destroy_context(); those callbacks never
 * call a user's cmd->done and never destroy the libiscsi context: they
 * move commands between lists and set flags, and iscsi_conn_settle() acts
 * on the flags once libiscsi has returned.
 */
#ifndef TAPSTRIPE_ISCSI_INT_H
#define TAPSTRIPE_ISCSI_INT_H

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "common/log.h"
#include "drivers/stripe/iscsi/iscsi-conn.h"

TAILQ_HEAD(iscsi_cmd_list, iscsi_cmd);

/* Where a command is (cmd->state); each list below holds one kind. */
enum iscsi_cmd_state {
	ISCSI_CMD_IDLE = 0, /* not submitted, or its done has run */
	ISCSI_CMD_WAITING,  /* c->waiting: not issued on the session yet */
	ISCSI_CMD_ISSUED,   /* c->in_flight: a libiscsi task exists */
	ISCSI_CMD_DONE,	    /* c->done: result set, done not yet called */
};

/* Longest message kept for iscsi_conn_error(). */
#define ISCSI_CONN_ERROR_LEN 512 /* a 223-byte target and a hint fit */
/* libiscsi: poll again this long after iscsi_which_events() said 0. */
#define ISCSI_CONN_IDLE_POLL_MS 100
/* Back-off never grows beyond this. */
#define ISCSI_CONN_MAX_BACKOFF_MS 30000
/* Retries of NOT READY and ABORTED COMMAND. */
#define ISCSI_CMD_MAX_RETRIES 1
/*
 * UNIT ATTENTIONs one command may take and retry: a UA says the command
 * was not run and reports one event; a target queues one per event per
 * session (tgtd: a list per I_T nexus and LUN), and a burst of
 * persistent-reservation changes (2A/03, 2A/04, 2A/05) or a reset
 * (29/xx) can stack several in front of the next command.
 */
#define ISCSI_CMD_MAX_UA_RETRIES 8
/* UNIT ATTENTIONs a fresh session may report before READ CAPACITY. */
#define ISCSI_CONN_MAX_LOGIN_UAS 10
/* UNIT ATTENTION's ASC/ASCQ of persistent reservations (SPC-4 Annex D),
 * which libiscsi does not name. */
#define SCSI_SENSE_ASCQ_RESERVATIONS_PREEMPTED	0x2a03
#define SCSI_SENSE_ASCQ_RESERVATIONS_RELEASED	0x2a04
#define SCSI_SENSE_ASCQ_REGISTRATIONS_PREEMPTED 0x2a05
/* The end of the message of a fenced host's refused command. */
#define ISCSI_CONN_READMIT_HINT                                           \
	"it stays fenced until re-admitted by an explicit command, once " \
	"it no longer holds the disk (doc/stripe-driver.md, \"Fencing\")"
/* Longest iSCSI name (RFC 3720 3.2.6.1). */
#define ISCSI_NAME_MAX 223

struct iscsi_conn {
	struct td_loop *loop;

	/* Copies of the configuration (defaults applied). */
	char *portal, *target, *initiator, *chap_user, *chap_secret, *name;
	uint32_t lun;
	uint32_t queue_depth;
	uint32_t cmd_timeout_ms;
	uint32_t login_retries;
	uint32_t login_backoff_ms;
	uint32_t revive_interval_ms;

	enum iscsi_conn_state state;
	struct iscsi_context *ctx; /* NULL between attempts and when DOWN */
	struct td_fd fde;	   /* ctx's socket while registered */
	uint32_t attempts;	   /* failed attempts of this (re)connect */
	bool reviving;		   /* this attempt is DOWN's single one */
	bool ever_up;		   /* a later UP is a reconnect */
	void (*admit)(struct iscsi_conn *c, void *opaque); /* cfg.admit */
	void *admit_opaque;
	struct td_defer admit_defer; /* calls admit after a login */

	/* Flags set by libiscsi's callbacks, acted on by iscsi_conn_settle. */
	bool logged_in;	    /* login done */
	uint32_t probe_uas; /* UNIT ATTENTIONs seen by the probe */
	bool probed;	    /* READ CAPACITY and VPD done: may go UP */
	bool attempt_err;   /* this attempt failed (error text set) */
	bool session_lost;  /* a task was cancelled by libiscsi: reconnect */
	bool dropping;	    /* we are destroying ctx ourselves */

	/* What the LUN said at login. */
	uint32_t block_size;
	uint64_t nr_blocks;
	bool lbpme, lbpu, lbpws, lbprz;
	bool no_write_same;	  /* the server refused WRITE SAME once */
	bool no_preempt_abort;	  /* ... PREEMPT AND ABORT (tgtd): PREEMPT */
	uint32_t max_xfer_blocks; /* Block Limits VPD: 0 = no limit */
	uint32_t opt_xfer_blocks; /* 0 = none stated */
	void *zero_buf;		  /* ISCSI_CONN_ZERO_CHUNK_BYTES of zeroes */

	struct iscsi_cmd_list waiting;	 /* FIFO, reissued ones first */
	struct iscsi_cmd_list in_flight; /* issued on ctx */
	struct iscsi_cmd_list done;	 /* waiting for done_defer */
	struct iscsi_cmd_list lost;	 /* handed back by a dropped ctx */
	struct iscsi_cmd_list by_age;	 /* outstanding, deadline order */
	uint32_t nr_waiting, nr_in_flight, nr_done;

	struct td_timer retry_timer;	/* back-off and revive */
	struct td_timer login_timer;	/* the attempt's deadline */
	struct td_timer poll_timer;	/* iscsi_which_events() said 0 */
	struct td_timer deadline_timer; /* the oldest command's deadline */
	struct td_timer busy_timer;	/* end of a BUSY pause */
	struct td_defer done_defer;
	bool busy_paused;

	unsigned int dispatching; /* inside done callbacks */
	bool destroyed;		  /* destroy ran inside a done callback */

	struct iscsi_conn_stats stats;
	char error[ISCSI_CONN_ERROR_LEN];
	struct td_ratelimit rl;
};

/* Logging about one connection, rate-limited per connection. */
#define conn_err(c, ...) \
	td_log(TD_LOG_ERR, __func__, (c)->name, &(c)->rl, __VA_ARGS__)
#define conn_warn(c, ...) \
	td_log(TD_LOG_WARN, __func__, (c)->name, &(c)->rl, __VA_ARGS__)
#define conn_info(c, ...) \
	td_log(TD_LOG_INFO, __func__, (c)->name, &(c)->rl, __VA_ARGS__)
#define conn_dbg(c, ...) \
	td_log(TD_LOG_DBG, __func__, (c)->name, &(c)->rl, __VA_ARGS__)

/* iscsi-conn.c */
/* A session exists and commands may be issued on it: UP or ADMITTING. */
static inline bool iscsi_conn_has_session(const struct iscsi_conn *c)
{
	return c->state == ISCSI_CONN_UP || c->state == ISCSI_CONN_ADMITTING;
}
void iscsi_conn_set_error(struct iscsi_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * Fail the running attempt (connect, login, probe): set attempt_err, and
 * the error text unless the attempt already failed (the first reason is
 * the one worth reporting; the later ones follow from it).
 */
void iscsi_conn_fail_attempt(struct iscsi_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Act on the callbacks' flags, issue what may be issued, update the fd. */
void iscsi_conn_settle(struct iscsi_conn *c);
/* Drop a session that was UP (a command expired) and reconnect. */
void iscsi_conn_lose_session(struct iscsi_conn *c, const char *why);
/* Free c; every list is empty and nothing is registered with the loop. */
void iscsi_conn_free(struct iscsi_conn *c);

/* iscsi-login.c */
/* New context for c->ctx, TCP connect started; 0 or -errno (error set). */
int iscsi_conn_login_begin(struct iscsi_conn *c);

/* iscsi-cmd.c */
/* Issue waiting commands while UP, unpaused and below the queue depth. */
void iscsi_conn_issue_waiting(struct iscsi_conn *c);
/* Complete cmd (in no list but by_age) with err through done_defer. */
void iscsi_conn_complete(struct iscsi_conn *c, struct iscsi_cmd *cmd, int err);
/*
 * A command taken off c->in_flight because its session went away: an
 * expired one completes with -ETIMEDOUT, any other goes to c->lost, to be
 * reissued first (iscsi_conn_requeue_front).
 */
void iscsi_conn_cmd_lost(struct iscsi_conn *c, struct iscsi_cmd *cmd);
/* Complete every waiting command with err (DOWN, destroy). */
void iscsi_conn_fail_waiting(struct iscsi_conn *c, int err);
/* Move the commands libiscsi gave back (session lost) before waiting. */
void iscsi_conn_requeue_front(struct iscsi_conn *c,
			      struct iscsi_cmd_list *list);
/* Arm the deadline timer for the oldest outstanding command. */
void iscsi_conn_arm_deadline(struct iscsi_conn *c);
/* Run the done callbacks of c->done (the deferred call). */
void iscsi_conn_dispatch_done(struct td_defer *d, void *opaque);
/* iscsi-pr.c */
/* A PR_IN/PR_OUT command's libiscsi task (NULL: error text set). */
struct scsi_task *iscsi_pr_new_task(struct iscsi_conn *c, struct iscsi_cmd *cmd,
				    iscsi_command_cb cb);
/*
 * A PR command's finished task (status GOOD or RESERVATION CONFLICT
 * mapped to *err): take the data of PR IN, decide a next step.  True when
 * the command goes on (requeue it); *err may change.
 */
bool iscsi_pr_answer(struct iscsi_conn *c, struct iscsi_cmd *cmd,
		     struct scsi_task *task, int *err);
/* The checks of a PR command at issue: 0 or the errno to complete with. */
int iscsi_pr_check(const struct iscsi_cmd *cmd);

/* Where a command is issued: the step it is at (cmd->state's companion). */
enum iscsi_cmd_step {
	ISCSI_STEP_MAIN = 0,   /* the command itself */
	ISCSI_STEP_ZERO_WRITE, /* WRITE_ZEROES as WRITE(16) of zeroes */
	ISCSI_STEP_SYNC,       /* WRITE_ZEROES + FUA: the range's SYNC */
};

#endif
