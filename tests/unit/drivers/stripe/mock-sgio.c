/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mock-sgio.c - the fake LUN of mock-sgio.h.
 */
#include "config.h"

#include <errno.h>
#include <libaio.h>
#include <pthread.h>
#include <scsi/sg.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>

#include "drivers/stripe/stripe-sgio.h"
#include "tests/unit/drivers/stripe/mock-sgio.h"

struct mock_sgio mock_sgio;
static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;

int __real_ioctl(int fd, unsigned long req, ...);
int __wrap_ioctl(int fd, unsigned long req, ...);
int __wrap_aio_ring_user_reap(io_context_t ctx, struct io_event *ev, int max);
int __real_io_getevents(io_context_t ctx, long min_nr, long nr,
			struct io_event *ev, struct timespec *timeout);
int __wrap_io_getevents(io_context_t ctx, long min_nr, long nr,
			struct io_event *ev, struct timespec *timeout);

void mock_sgio_reset(void)
{
	mock_sgio_lock();
	memset(&mock_sgio, 0, sizeof(mock_sgio));
	mock_sgio_unlock();
}

void mock_sgio_lock(void)
{
	pthread_mutex_lock(&mock_lock);
}

void mock_sgio_unlock(void)
{
	pthread_mutex_unlock(&mock_lock);
}

const char *mock_sgio_trace(unsigned int from)
{
	static char s[MOCK_SGIO_MAX_LOG + 1];
	unsigned int n = 0;

	mock_sgio_lock();
	for (unsigned int i = from; i < mock_sgio.nr_log; i++) {
		switch (mock_sgio.log[i]) {
		case 0x10 | SGIO_PRIN_READ_KEYS:
			s[n++] = 'K';
			break;
		case 0x10 | SGIO_PRIN_READ_RES:
			s[n++] = 'V';
			break;
		case 0x20 | SGIO_PROUT_RESERVE:
			s[n++] = 'R';
			break;
		case 0x20 | SGIO_PROUT_REG_IGNORE:
			s[n++] = 'G';
			break;
		case 0x30 | SGIO_PROUT_REG_IGNORE: /* key 0 */
			s[n++] = 'U';
			break;
		default:
			s[n++] = '?';
		}
	}
	s[n] = '\0';
	mock_sgio_unlock();
	return s;
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void check_condition(struct sg_io_hdr *h, uint8_t key)
{
	uint8_t *s = h->sbp;

	h->status = SGIO_STATUS_CHECK_CONDITION;
	h->masked_status = SGIO_STATUS_CHECK_CONDITION >> 1;
	h->driver_status = 0x08; /* DRIVER_SENSE */
	memset(s, 0, h->mx_sb_len);
	s[0] = 0x70;
	s[2] = key;
	s[7] = 10;
	s[12] = key == 0x06 ? 0x2a : 0x20; /* 2A/05, or invalid opcode */
	s[13] = key == 0x06 ? 0x05 : 0x00;
	h->sb_len_wr = 18;
}

static void pr_in(struct sg_io_hdr *h, const uint8_t *cdb)
{
	uint8_t *d = h->dxferp;
	uint32_t n = 0;

	put32(d, mock_sgio.generation);
	if (cdb[1] == SGIO_PRIN_READ_KEYS) {
		for (uint32_t i = 0; i < mock_sgio.nr_others; i++)
			put64(d + 8 + 8 * n++, mock_sgio.others[i]);
		if (mock_sgio.mine)
			put64(d + 8 + 8 * n++, mock_sgio.mine);
		put32(d + 4, 8 * n);
		h->resid = (int)(h->dxfer_len - 8 - 8 * n);
		return;
	}
	put32(d + 4, mock_sgio.reserved ? 16 : 0);
	if (mock_sgio.reserved) {
		put64(d + 8, mock_sgio.holder);
		d[21] = mock_sgio.type;
	}
	h->resid = (int)(h->dxfer_len - (mock_sgio.reserved ? 24 : 8));
}

/* 0 (GOOD) or SGIO_STATUS_RESERVATION_CONFLICT. */
static uint8_t pr_out(const uint8_t *cdb, const uint8_t *p)
{
	uint64_t key = be64(p), sa_key = be64(p + 8);

	if (cdb[1] == SGIO_PROUT_REG_IGNORE) {
		if (!sa_key && mock_sgio.reserved &&
		    mock_sgio.holder == mock_sgio.mine)
			mock_sgio.reserved = false;
		mock_sgio.mine = sa_key;
		mock_sgio.generation++;
		return 0;
	}
	/* RESERVE */
	if (!mock_sgio.mine || key != mock_sgio.mine)
		return SGIO_STATUS_RESERVATION_CONFLICT;
	if (mock_sgio.reserved)
		return mock_sgio.holder == key &&
				       mock_sgio.type == (cdb[2] & 15)
			       ? 0
			       : SGIO_STATUS_RESERVATION_CONFLICT;
	mock_sgio.reserved = true;
	mock_sgio.holder = key;
	mock_sgio.type = cdb[2] & 15;
	return 0;
}

static void log_cmd(const uint8_t *cdb, const struct sg_io_hdr *h)
{
	uint8_t e = cdb[0] == SGIO_PR_IN ? 0x10 | cdb[1] : 0x20 | cdb[1];

	if (cdb[0] == SGIO_PR_OUT && cdb[1] == SGIO_PROUT_REG_IGNORE &&
	    !be64((const uint8_t *)h->dxferp + 8))
		e = 0x30 | cdb[1];
	if (mock_sgio.nr_log < MOCK_SGIO_MAX_LOG)
		mock_sgio.log[mock_sgio.nr_log++] = e;
}

/* The fake LUN; -1 with errno, or 0 with the status in h. */
static int fake_sg_io(struct sg_io_hdr *h)
{
	const uint8_t *cdb = h->cmdp;
	bool in = cdb[0] == SGIO_PR_IN;

	if (mock_sgio.ioctl_errno) {
		errno = mock_sgio.ioctl_errno;
		return -1;
	}
	/* What stripe-sgio.c must send (SPC-4 6.15, 6.16). */
	if (h->interface_id != 'S' || h->cmd_len != SGIO_CDB_LEN ||
	    (!in && cdb[0] != SGIO_PR_OUT) ||
	    h->dxfer_direction != (in ? SG_DXFER_FROM_DEV : SG_DXFER_TO_DEV) ||
	    h->dxfer_len != (in ? SGIO_PRIN_ALLOC : SGIO_PROUT_PARAM_LEN)) {
		errno = EFAULT;
		return -1;
	}
	h->status = h->masked_status = 0;
	h->host_status = h->driver_status = 0;
	h->sb_len_wr = 0;
	h->resid = 0;
	log_cmd(cdb, h);
	if (mock_sgio.unit_attentions > 0) {
		mock_sgio.unit_attentions--;
		check_condition(h, 0x06);
	} else if (mock_sgio.illegal) {
		check_condition(h, 0x05);
	} else if (in) {
		pr_in(h, cdb);
	} else {
		h->status = pr_out(cdb, h->dxferp);
	}
	return 0;
}

int __wrap_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	int r;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	mock_sgio_lock();
	if (req != SG_IO || !mock_sgio.on) {
		mock_sgio_unlock();
		return __real_ioctl(fd, req, arg);
	}
	r = fake_sg_io(arg);
	mock_sgio_unlock();
	return r;
}

/*
 * The user ring read as of another layout, so that every completion goes
 * through io_getevents below (linked with --wrap=aio_ring_user_reap in
 * test_block-stripe only).
 */
int __wrap_aio_ring_user_reap(io_context_t ctx, struct io_event *ev, int max)
{
	(void)ctx;
	(void)ev;
	(void)max;
	return -EOPNOTSUPP;
}

int __wrap_io_getevents(io_context_t ctx, long min_nr, long nr,
			struct io_event *ev, struct timespec *timeout)
{
	int n = __real_io_getevents(ctx, min_nr, nr, ev, timeout);

	mock_sgio_lock();
	for (int i = 0; i < n; i++) {
		if (ev[i].obj->aio_lio_opcode != IO_CMD_PWRITEV ||
		    mock_sgio.conflict_writes <= 0)
			continue;
		mock_sgio.conflict_writes--;
		ev[i].res = (unsigned long)(long)-EBADE;
	}
	mock_sgio_unlock();
	return n;
}
