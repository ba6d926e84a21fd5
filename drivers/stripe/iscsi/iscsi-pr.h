/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * iscsi-pr.h - SCSI-3 persistent reservations on the LUN of an iscsi_conn
 * (issue #18: fencing a host on the storage servers themselves).
 *
 * Each call queues one PERSISTENT RESERVE IN/OUT command on the
 * connection, with the same FIFO, queue depth, deadline, reconnect and
 * reissue rules as READ/WRITE.  Contract: returns 0 and pr->done(pr, err,
 * opaque) runs later, exactly once, from the event loop; or returns
 * -EINVAL (a zero key, no callback) and done never runs.  err is 0 or
 * -errno as iscsi-conn.h says, with -EACCES for RESERVATION CONFLICT.
 * What a reissue after a lost session does to each action, and how the
 * stripe driver uses them, is in doc/stripe-driver.md.
 */
#ifndef TAPSTRIPE_ISCSI_PR_H
#define TAPSTRIPE_ISCSI_PR_H

#include <stdbool.h>
#include <stdint.h>

#include "drivers/stripe/iscsi/iscsi-conn.h"

/* Keys kept by READ KEYS (pr->nr_keys may say more are registered). */
#define ISCSI_PR_MAX_KEYS 32
/* The reservation type we hold: Write Exclusive - Registrants Only. */
#define ISCSI_PR_TYPE_WERO 5

enum iscsi_pr_action {
	ISCSI_PR_REGISTER = 0,	   /* REGISTER AND IGNORE EXISTING KEY */
	ISCSI_PR_UNREGISTER,	   /* the same with service key 0 */
	ISCSI_PR_RESERVE,	   /* RESERVE, type WERO */
	ISCSI_PR_PREEMPT_ABORT,	   /* PREEMPT AND ABORT of pr->victim */
	ISCSI_PR_READ_KEYS,	   /* PR IN READ KEYS */
	ISCSI_PR_READ_RESERVATION, /* PR IN READ RESERVATION */
};

struct iscsi_pr_cmd;
typedef void (*iscsi_pr_done_fn)(struct iscsi_pr_cmd *pr, int err,
				 void *opaque);

/*
 * Embedded in the caller's state (no allocation); left alone from the
 * call until done runs.  The answer fields are valid in done when err is 0.
 */
struct iscsi_pr_cmd {
	/* --- set before the call (the only field the call keeps) ---------- */
	bool admission; /* an admission command (iscsi_conn_cfg.admit) */

	/* --- the answer ------------------------------------------------- */
	uint32_t generation; /* PRgeneration (READ KEYS / READ RESERVATION) */
	uint32_t nr_keys;    /* READ KEYS: registrations on the LUN */
	uint32_t nr_kept;    /* of them in keys[]: min(nr_keys, MAX_KEYS) */
	uint64_t keys[ISCSI_PR_MAX_KEYS];
	bool reserved;	     /* READ RESERVATION: a reservation exists */
	uint64_t holder_key; /* its key (any registrant's for types 7, 8) */
	uint8_t type;	     /* its type (ISCSI_PR_TYPE_WERO, ...) */
	bool already_done;   /* PREEMPT_ABORT: the victim was not registered
				any more (a reissue, or someone preempted it
				first); see doc/stripe-driver.md */
	bool plain_preempt;  /* PREEMPT_ABORT: the LUN refused PREEMPT AND
				ABORT (tgtd does), PREEMPT was used: the
				victim's commands already in the LUN's task
				set were not aborted */

	/* --- private to iscsi-pr.c -------------------------------------- */
	struct iscsi_cmd cmd;
	enum iscsi_pr_action action;
	uint64_t key, victim;
	bool verifying; /* PREEMPT_ABORT: READ KEYS after a conflict */
	iscsi_pr_done_fn done;
	void *opaque;
};

/*
 * The reservation key of a host: FNV-1a 64 of the host id's bytes (offset
 * basis 0xcbf29ce484222325, prime 0x100000001b3), or 1 when that is 0 (a
 * zero key means "none" in SCSI).  Stable across releases and machines:
 * every host computes every other host's key from its id alone.  0 for
 * NULL or "".
 */
uint64_t iscsi_conn_pr_key(const char *host_id);

/* Register key on the LUN for this session; repeating it is harmless. */
int iscsi_conn_pr_register(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			   uint64_t key, iscsi_pr_done_fn done, void *opaque);

/* Remove this session's registration (of any key); harmless if none. */
int iscsi_conn_pr_unregister(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			     iscsi_pr_done_fn done, void *opaque);

/*
 * Take a Write Exclusive - Registrants Only reservation with key (which
 * this session must have registered).  -EACCES when another session holds
 * a reservation (read it with READ RESERVATION: if it is WERO, every
 * registrant may write anyway).
 */
int iscsi_conn_pr_reserve(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			  uint64_t key, iscsi_pr_done_fn done, void *opaque);

/*
 * PREEMPT AND ABORT: remove every registration of victim, abort its
 * commands in the LUN's task set, and take over its reservation (type
 * WERO) if it held it.  A LUN that refuses PREEMPT AND ABORT (tgtd 1.0.x
 * has it commented out) gets PREEMPT instead, from then on for this
 * connection (pr->plain_preempt).  key is ours (registered).  A RESERVATION CONFLICT
 * is checked with READ KEYS: victim gone and key registered means done (0,
 * pr->already_done); otherwise -EACCES (we are not registered).
 */
int iscsi_conn_pr_preempt_abort(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
				uint64_t key, uint64_t victim,
				iscsi_pr_done_fn done, void *opaque);

/* PR IN: fill pr->generation, nr_keys, nr_kept, keys. */
int iscsi_conn_pr_read_keys(struct iscsi_conn *c, struct iscsi_pr_cmd *pr,
			    iscsi_pr_done_fn done, void *opaque);

/* PR IN: fill pr->generation, reserved, holder_key, type. */
int iscsi_conn_pr_read_reservation(struct iscsi_conn *c,
				   struct iscsi_pr_cmd *pr,
				   iscsi_pr_done_fn done, void *opaque);

/* True when key is among pr->keys after READ KEYS. */
bool iscsi_pr_has_key(const struct iscsi_pr_cmd *pr, uint64_t key);

const char *iscsi_pr_action_name(enum iscsi_pr_action a);

#endif
