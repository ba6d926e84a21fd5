/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mock-sgio.h - a SCSI LUN's persistent reservations behind a wrapped
 * ioctl (link with -Wl,--wrap=ioctl -Wl,--wrap=io_getevents) for unit
 * tests of the SG_IO layer (stripe-sgio.c) and of the device backend's
 * admission.  While mock_sgio.on, every SG_IO is answered by this fake
 * (any fd); other ioctls, and SG_IO while off, go to the real ioctl (a
 * regular file answers ENOTTY).  The fake checks the CDB and parameter
 * list against SPC-4, keeps the registrations (ours: mine; other hosts':
 * others[]), PRgeneration and the reservation, and can answer UNIT
 * ATTENTION, ILLEGAL REQUEST or an ioctl error.  conflict_writes makes the
 * next N pwritev completions of libaio -EBADE (the kernel's RESERVATION
 * CONFLICT).  Used from the backend's worker thread: lock it (mock_sgio_lock)
 * to read or change it while a disk is open.
 */
#ifndef TAPSTRIPE_MOCK_SGIO_H
#define TAPSTRIPE_MOCK_SGIO_H

#include <stdbool.h>
#include <stdint.h>

#define MOCK_SGIO_MAX_OTHERS 4
#define MOCK_SGIO_MAX_LOG    64

struct mock_sgio {
	bool on;
	uint32_t generation;
	uint64_t mine; /* our registration's key, 0: none */
	uint64_t others[MOCK_SGIO_MAX_OTHERS];
	uint32_t nr_others;
	bool reserved;
	uint64_t holder;
	uint8_t type;
	int unit_attentions; /* the next N commands: UNIT ATTENTION */
	bool illegal;	     /* ILLEGAL REQUEST (no PR on the LUN) */
	int ioctl_errno;     /* non-zero: the ioctl fails with it */
	int conflict_writes; /* the next N aio writes complete with -EBADE */
	/* every SG_IO answered: 0x10 | PR IN action, 0x20 | PR OUT action */
	unsigned int nr_log;
	uint8_t log[MOCK_SGIO_MAX_LOG];
};

extern struct mock_sgio mock_sgio;

void mock_sgio_reset(void);
void mock_sgio_lock(void);
void mock_sgio_unlock(void);
/* The log as a string of letters: K READ KEYS, V READ RESERVATION,
 * G REGISTER, U unregister, R RESERVE (from entry from on). */
const char *mock_sgio_trace(unsigned int from);

#endif
