/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mock-iscsi-conn.h - drivers/iscsi-conn.h implemented in memory for unit
 * tests of the stripe driver.
 *
 * Each connection (numbered in creation order, which is the map's server
 * order for the stripe driver) is a LUN in memory: READ and WRITE move
 * real bytes, UNMAP and WRITE_ZEROES zero them, SYNC does nothing.
 * Commands complete from a deferred call of the event loop, never inside
 * iscsi_conn_submit.  A test scripts, per connection: its state (a DOWN one
 * fails every command with -EIO, a CONNECTING one keeps them until it is
 * set UP), its geometry, errors (every command of some ops, or the next
 * N), and holding commands until it releases them.  Every command
 * submitted is logged, except GET LBA STATUS: the allocation scan's
 * commands (answered from the bytes, a zero block being deallocated) are
 * neither logged nor held, and fail only when their op is named in
 * mock_iscsi_fail's mask, so the request path's tests see their own
 * commands only.
 */
#ifndef TAPSTRIPE_MOCK_ISCSI_CONN_H
#define TAPSTRIPE_MOCK_ISCSI_CONN_H

#include "drivers/stripe/iscsi/iscsi-conn.h"

#define MOCK_ISCSI_MAX_CONNS 16
#define MOCK_ISCSI_MAX_LOG   4096
#define MOCK_ISCSI_OP(op)    (1u << (op)) /* for fail_ops */

/* What the next connection number i is created with. */
struct mock_iscsi_setup {
	enum iscsi_conn_state state; /* default UP */
	uint32_t block_size;	     /* 0: 512 */
	uint64_t nr_blocks;	     /* 0: 8 MiB worth */
	bool cannot_unmap;
};

struct mock_iscsi_rec {
	unsigned int conn;
	enum iscsi_cmd_op op;
	uint64_t lba;
	uint32_t nr_blocks;
	bool fua;
};

struct mock_iscsi {
	struct mock_iscsi_setup setup[MOCK_ISCSI_MAX_CONNS];
	struct iscsi_conn *conns[MOCK_ISCSI_MAX_CONNS];
	unsigned int nr_created;
	unsigned int nr_destroyed;
	struct mock_iscsi_rec log[MOCK_ISCSI_MAX_LOG];
	unsigned int nr_log;
};

extern struct mock_iscsi mock_iscsi;

/* Forget everything (call before opening a driver); setups say UP. */
void mock_iscsi_reset(void);

/* The connection number i; its LUN's bytes (block_size * nr_blocks). */
struct iscsi_conn *mock_iscsi_conn(unsigned int i);
unsigned char *mock_iscsi_data(unsigned int i);

/*
 * Commands of the ops in ops_mask (MOCK_ISCSI_OP bits; 0: every op)
 * fail with err: the next count of them, or all when count is 0.
 * err 0 stops failing.
 */
void mock_iscsi_fail(unsigned int i, int err, uint32_t ops_mask,
		     unsigned int count);

/* Keep commands (after logging them) until mock_iscsi_release. */
void mock_iscsi_hold(unsigned int i, bool hold);
/* Complete the held commands: performed when err is 0, else failed. */
unsigned int mock_iscsi_release(unsigned int i, int err);
unsigned int mock_iscsi_nr_held(unsigned int i);
/* Complete only the oldest held command, as mock_iscsi_release does. */
void mock_iscsi_release_first(unsigned int i, int err);

/* UP releases what CONNECTING (or ADMITTING) kept; DOWN fails it with
 * -EIO, FENCED with -EACCES (and every later command). */
void mock_iscsi_set_state(unsigned int i, enum iscsi_conn_state state);

/*
 * Persistent reservations of connection i's LUN (stripe-fence.c): the
 * registrations of other sessions (other hosts, or this host's older
 * sessions), the generation, the reservation.  A connection created
 * with cfg.admit starts ADMITTING and calls admit from the loop; PR
 * calls act on lun at once and complete from the loop; a write-like
 * command of an unregistered session of a reserved LUN fails with
 * -EACCES, as tgtd's WERO does.
 */
struct mock_pr {
	uint64_t others[8];
	unsigned int nr_others;
	uint32_t gen;
	bool reserved;
	uint8_t type;
	uint64_t holder;
	int fail_err; /* every PR command fails with it (0: none) */
	unsigned int commands;
};
struct mock_pr *mock_iscsi_lun(unsigned int i);
/* This session registered? */
bool mock_iscsi_registered(unsigned int i);
/* A new session logs in (ADMITTING, admit called); the old session's
 * registration stays unless lose_registration (a server restart). */
void mock_iscsi_relogin(unsigned int i, bool lose_registration);
/* Another host (key by) preempts victim: its registrations go, by
 * holds the WERO reservation. */
void mock_iscsi_preempt(unsigned int i, uint64_t victim, uint64_t by);

/* Log entries of connection conn with op since log index from. */
unsigned int mock_iscsi_count(unsigned int conn, enum iscsi_cmd_op op,
			      unsigned int from);

#endif
