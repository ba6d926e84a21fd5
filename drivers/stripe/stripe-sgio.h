/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-sgio.h - SCSI-3 persistent reservations on a device backend's
 * block device (a kernel open-iscsi session's LUN) through the SG_IO
 * ioctl: the same actions and answers as iscsi-pr.h, for the stripe
 * driver's fencing (doc/stripe-driver.md "Fencing in the stripe driver").
 *
 * The CDBs and parameter lists are built and the PR IN data parsed by pure
 * functions (SPC-4 6.15 and 6.16; unit-tested with hand-written bytes);
 * stripe_sgio_run issues one action with ioctl(SG_IO), which blocks: the
 * device backend calls it from its own worker thread (stripe-bdev.c),
 * never from the event loop.
 */
#ifndef TAPSTRIPE_STRIPE_SGIO_H
#define TAPSTRIPE_STRIPE_SGIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drivers/stripe/iscsi/iscsi-pr.h"

#define SGIO_PR_IN	      0x5e
#define SGIO_PR_OUT	      0x5f
#define SGIO_PRIN_READ_KEYS   0x00
#define SGIO_PRIN_READ_RES    0x01
#define SGIO_PROUT_RESERVE    0x01
#define SGIO_PROUT_REG_IGNORE 0x06 /* REGISTER AND IGNORE EXISTING KEY */
#define SGIO_CDB_LEN	      10
#define SGIO_PROUT_PARAM_LEN  24
/* PR IN allocation length: the header and ISCSI_PR_MAX_KEYS keys. */
#define SGIO_PRIN_ALLOC (8 + 8 * ISCSI_PR_MAX_KEYS)
#define SGIO_SENSE_LEN	32
#define SGIO_TIMEOUT_MS 30000u
/* UNIT ATTENTION (after a preempt, a reset, a reservation released):
 * the command is sent again, at most this many times. */
#define SGIO_UNIT_ATTENTION_RETRIES	 4
#define SGIO_STATUS_CHECK_CONDITION	 0x02
#define SGIO_STATUS_RESERVATION_CONFLICT 0x18

/*
 * The CDB of action (not PREEMPT_ABORT: -EINVAL).  0 and cdb[10]; *dir_out
 * true for PR OUT (a parameter list goes to the device), false for PR IN
 * (SGIO_PRIN_ALLOC bytes come back).
 */
int stripe_sgio_cdb(enum iscsi_pr_action a, uint8_t cdb[SGIO_CDB_LEN],
		    bool *dir_out);

/* The 24-byte PR OUT parameter list of a PR OUT action with our key. */
void stripe_sgio_param(enum iscsi_pr_action a, uint64_t key,
		       uint8_t p[SGIO_PROUT_PARAM_LEN]);

/* READ KEYS data (len bytes came back): fill pr.  0 or -EPROTO. */
int stripe_sgio_parse_keys(const uint8_t *buf, size_t len,
			   struct iscsi_pr_cmd *pr);

/* READ RESERVATION data: fill pr.  0 or -EPROTO. */
int stripe_sgio_parse_reservation(const uint8_t *buf, size_t len,
				  struct iscsi_pr_cmd *pr);

/*
 * A completed SG_IO's outcome as an errno: 0 (GOOD), -EACCES (RESERVATION
 * CONFLICT), -EAGAIN (UNIT ATTENTION: send again), -EOPNOTSUPP (ILLEGAL
 * REQUEST: the LUN has no persistent reservations), -EIO otherwise (a
 * transport error, another CHECK CONDITION).
 */
int stripe_sgio_status(uint8_t status, uint16_t host_status,
		       uint16_t driver_status, const uint8_t *sense,
		       size_t sense_len);

/*
 * Issue action on fd (blocking, up to SGIO_TIMEOUT_MS plus the UNIT
 * ATTENTION retries) and fill pr's answer fields.  0 or -errno: the
 * ioctl's own (-ENOTTY, -EINVAL: not a SCSI device) or stripe_sgio_status's.
 */
int stripe_sgio_run(int fd, enum iscsi_pr_action a, uint64_t key,
		    struct iscsi_pr_cmd *pr);

#endif
