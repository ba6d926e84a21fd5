/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-sgio.c - persistent reservations through SG_IO (see the header).
 *
 * SPC-4 layouts used:
 *   PR IN CDB   0x5e, service action (byte 1, bits 4-0), allocation length
 *               (bytes 7-8, big endian), control (byte 9)
 *   PR OUT CDB  0x5f, service action (byte 1), scope and type (byte 2:
 *               scope 0 = logical unit in bits 7-4, type in bits 3-0),
 *               parameter list length (bytes 5-8, big endian)
 *   PR OUT parameter list (24 bytes): reservation key (0-7), service
 *               action reservation key (8-15), obsolete (16-19), flags
 *               SPEC_I_PT ALL_TG_PT APTPL (20, all 0 here), 21-23 zero
 *   READ KEYS data: PRgeneration (0-3), additional length (4-7: 8 per
 *               key), the keys (8 bytes each, big endian)
 *   READ RESERVATION data: PRgeneration (0-3), additional length (4-7:
 *               0 without a reservation, 16 with one), the holder's key
 *               (8-15), scope and type (byte 21)
 */
#include "config.h"

#include <errno.h>
#include <scsi/sg.h>
#include <string.h>
#include <sys/ioctl.h>

#include "drivers/stripe/stripe-sgio.h"

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

int stripe_sgio_cdb(enum iscsi_pr_action a, uint8_t cdb[SGIO_CDB_LEN],
		    bool *dir_out)
{
	memset(cdb, 0, SGIO_CDB_LEN);
	switch (a) {
	case ISCSI_PR_READ_KEYS:
	case ISCSI_PR_READ_RESERVATION:
		cdb[0] = SGIO_PR_IN;
		cdb[1] = a == ISCSI_PR_READ_KEYS ? SGIO_PRIN_READ_KEYS
						 : SGIO_PRIN_READ_RES;
		put_be16(cdb + 7, SGIO_PRIN_ALLOC);
		*dir_out = false;
		return 0;
	case ISCSI_PR_REGISTER:
	case ISCSI_PR_UNREGISTER:
	case ISCSI_PR_RESERVE:
		cdb[0] = SGIO_PR_OUT;
		cdb[1] = a == ISCSI_PR_RESERVE ? SGIO_PROUT_RESERVE
					       : SGIO_PROUT_REG_IGNORE;
		cdb[2] = a == ISCSI_PR_RESERVE ? ISCSI_PR_TYPE_WERO : 0;
		put_be32(cdb + 5, SGIO_PROUT_PARAM_LEN);
		*dir_out = true;
		return 0;
	default:
		return -EINVAL;
	}
}

void stripe_sgio_param(enum iscsi_pr_action a, uint64_t key,
		       uint8_t p[SGIO_PROUT_PARAM_LEN])
{
	memset(p, 0, SGIO_PROUT_PARAM_LEN);
	if (a == ISCSI_PR_RESERVE)
		put_be64(p, key); /* the reservation key: ours */
	else if (a == ISCSI_PR_REGISTER)
		put_be64(p + 8, key); /* the new key; 0 unregisters */
}

int stripe_sgio_parse_keys(const uint8_t *buf, size_t len,
			   struct iscsi_pr_cmd *pr)
{
	uint32_t add;

	if (len < 8)
		return -EPROTO;
	add = get_be32(buf + 4);
	if (add % 8)
		return -EPROTO;
	pr->generation = get_be32(buf);
	pr->nr_keys = add / 8;
	pr->nr_kept = 0;
	for (size_t off = 8; pr->nr_kept < pr->nr_keys &&
			     pr->nr_kept < ISCSI_PR_MAX_KEYS && off + 8 <= len;
	     off += 8)
		pr->keys[pr->nr_kept++] = get_be64(buf + off);
	return 0;
}

int stripe_sgio_parse_reservation(const uint8_t *buf, size_t len,
				  struct iscsi_pr_cmd *pr)
{
	uint32_t add;

	if (len < 8)
		return -EPROTO;
	pr->generation = get_be32(buf);
	add = get_be32(buf + 4);
	pr->reserved = false;
	pr->holder_key = 0;
	pr->type = 0;
	if (!add)
		return 0;
	if (add < 16 || len < 24)
		return -EPROTO;
	pr->reserved = true;
	pr->holder_key = get_be64(buf + 8);
	pr->type = buf[21] & 0x0f;
	return 0;
}

/* The sense key of fixed (0x70, 0x71) or descriptor (0x72, 0x73) sense. */
static int sense_key(const uint8_t *s, size_t len)
{
	uint8_t code = len ? s[0] & 0x7f : 0;

	if ((code == 0x70 || code == 0x71) && len >= 3)
		return s[2] & 0x0f;
	if ((code == 0x72 || code == 0x73) && len >= 2)
		return s[1] & 0x0f;
	return -1;
}

int stripe_sgio_status(uint8_t status, uint16_t host_status,
		       uint16_t driver_status, const uint8_t *sense,
		       size_t sense_len)
{
	if (status == SGIO_STATUS_RESERVATION_CONFLICT)
		return -EACCES;
	if (status == SGIO_STATUS_CHECK_CONDITION) {
		switch (sense_key(sense, sense_len)) {
		case 0x06: /* UNIT ATTENTION */
			return -EAGAIN;
		case 0x05: /* ILLEGAL REQUEST */
			return -EOPNOTSUPP;
		default:
			return -EIO;
		}
	}
	/* driver_status: DRIVER_SENSE (0x08) alone is no error */
	if (status || host_status || (driver_status & 0x07))
		return -EIO;
	return 0;
}

static int sgio_once(int fd, enum iscsi_pr_action a, uint64_t key,
		     uint8_t *data, size_t *got)
{
	uint8_t cdb[SGIO_CDB_LEN], sense[SGIO_SENSE_LEN] = {0};
	struct sg_io_hdr h;
	bool out;
	int r = stripe_sgio_cdb(a, cdb, &out);

	if (r)
		return r;
	memset(&h, 0, sizeof(h));
	h.interface_id = 'S';
	h.cmd_len = SGIO_CDB_LEN;
	h.cmdp = cdb;
	h.mx_sb_len = sizeof(sense);
	h.sbp = sense;
	h.timeout = SGIO_TIMEOUT_MS;
	h.dxfer_direction = out ? SG_DXFER_TO_DEV : SG_DXFER_FROM_DEV;
	h.dxfer_len = out ? SGIO_PROUT_PARAM_LEN : SGIO_PRIN_ALLOC;
	h.dxferp = data;
	if (out)
		stripe_sgio_param(a, key, data);
	else
		memset(data, 0, SGIO_PRIN_ALLOC);
	if (ioctl(fd, SG_IO, &h) < 0)
		return -errno;
	*got = h.resid > 0 && (size_t)h.resid < h.dxfer_len
		       ? h.dxfer_len - (size_t)h.resid
		       : h.dxfer_len;
	return stripe_sgio_status(h.status, h.host_status, h.driver_status,
				  sense, h.sb_len_wr);
}

int stripe_sgio_run(int fd, enum iscsi_pr_action a, uint64_t key,
		    struct iscsi_pr_cmd *pr)
{
	uint8_t data[SGIO_PRIN_ALLOC];
	size_t got = 0;
	int r = -EAGAIN;

	for (int i = 0; r == -EAGAIN && i <= SGIO_UNIT_ATTENTION_RETRIES; i++)
		r = sgio_once(fd, a, key, data, &got);
	if (r == -EAGAIN)
		r = -EIO;
	if (r)
		return r;
	pr->action = a;
	if (a == ISCSI_PR_READ_KEYS)
		return stripe_sgio_parse_keys(data, got, pr);
	if (a == ISCSI_PR_READ_RESERVATION)
		return stripe_sgio_parse_reservation(data, got, pr);
	return 0;
}
