/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-proto.c - pure encoding, decoding and checks of the NBD protocol.
 *
 * Every length read from the wire is checked against what encloses it
 * before it is used, and every range is checked in a form that cannot
 * overflow (offset <= size && length <= size - offset).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "frontends/nbd/nbd-proto.h"

uint16_t nbd_transmission_flags(const struct td_disk_info *info)
{
	uint16_t flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_CAN_MULTI_CONN;

	if (info->features & TD_FEAT_FLUSH)
		flags |= NBD_FLAG_SEND_FLUSH;
	if (info->read_only)
		return flags | NBD_FLAG_READ_ONLY;
	if (info->features & TD_FEAT_FUA)
		flags |= NBD_FLAG_SEND_FUA;
	if (info->features & TD_FEAT_DISCARD)
		flags |= NBD_FLAG_SEND_TRIM;
	if (info->features & TD_FEAT_WRITE_ZEROES)
		flags |= NBD_FLAG_SEND_WRITE_ZEROES;
	return flags;
}

/* --- handshake --------------------------------------------------------------- */

size_t nbd_put_greeting(uint8_t *buf)
{
	nbd_put64(buf, NBD_MAGIC);
	nbd_put64(buf + 8, NBD_IHAVEOPT);
	nbd_put16(buf + 16, NBD_SERVER_HANDSHAKE_FLAGS);
	return NBD_GREETING_BYTES;
}

void nbd_decode_opt_header(const uint8_t *p, struct nbd_opt_header *hdr)
{
	hdr->magic = nbd_get64(p);
	hdr->option = nbd_get32(p + 8);
	hdr->length = nbd_get32(p + 12);
}

size_t nbd_put_opt_reply(uint8_t *buf, uint32_t option, uint32_t type,
			 const void *data, uint32_t len)
{
	nbd_put64(buf, NBD_REP_MAGIC);
	nbd_put32(buf + 8, option);
	nbd_put32(buf + 12, type);
	nbd_put32(buf + 16, len);
	if (len)
		memcpy(buf + NBD_OPT_REPLY_HEADER_BYTES, data, len);
	return NBD_OPT_REPLY_HEADER_BYTES + (size_t)len;
}

/*
 * Layout: 32-bit name length, name, 16-bit count, count 16-bit types.
 * The types themselves are not needed: the server always sends the same
 * information (and must ignore types it does not know).
 */
uint32_t nbd_parse_info_request(const uint8_t *data, uint32_t len,
				struct nbd_info_request *req)
{
	uint32_t name_len, rest;

	if (len < 4 + 2)
		return NBD_REP_ERR_INVALID;
	name_len = nbd_get32(data);
	if (name_len > NBD_MAX_STRING_BYTES || name_len > len - 4 - 2)
		return NBD_REP_ERR_INVALID;
	rest = len - 4 - name_len; /* >= 2 by the check above */
	req->name = data + 4;
	req->name_len = name_len;
	req->nr_infos = nbd_get16(data + 4 + name_len);
	if (rest - 2 != 2u * req->nr_infos)
		return NBD_REP_ERR_INVALID;
	return 0;
}

size_t nbd_put_go_reply(uint8_t *buf, uint32_t option,
			const struct nbd_export *exp)
{
	uint8_t info[NBD_INFO_BLOCK_SIZE_BYTES];
	size_t n;

	nbd_put16(info, NBD_INFO_EXPORT);
	nbd_put64(info + 2, exp->size_bytes);
	nbd_put16(info + 10, exp->tflags);
	n = nbd_put_opt_reply(buf, option, NBD_REP_INFO, info,
			      NBD_INFO_EXPORT_BYTES);

	nbd_put16(info, NBD_INFO_BLOCK_SIZE);
	nbd_put32(info + 2, NBD_MIN_BLOCK_BYTES);
	nbd_put32(info + 6, NBD_PREFERRED_BLOCK_BYTES);
	nbd_put32(info + 10, exp->max_request_bytes);
	n += nbd_put_opt_reply(buf + n, option, NBD_REP_INFO, info,
			       NBD_INFO_BLOCK_SIZE_BYTES);

	n += nbd_put_opt_reply(buf + n, option, NBD_REP_ACK, NULL, 0);
	return n;
}

size_t nbd_put_export_name_reply(uint8_t *buf, const struct nbd_export *exp,
				 uint32_t client_flags)
{
	nbd_put64(buf, exp->size_bytes);
	nbd_put16(buf + 8, exp->tflags);
	if (client_flags & NBD_FLAG_C_NO_ZEROES)
		return NBD_EXPORT_NAME_REPLY_BYTES;
	memset(buf + NBD_EXPORT_NAME_REPLY_BYTES, 0, NBD_EXPORT_NAME_ZEROES);
	return NBD_EXPORT_NAME_REPLY_BYTES + NBD_EXPORT_NAME_ZEROES;
}

/* --- transmission ------------------------------------------------------------- */

void nbd_decode_request(const uint8_t *p, struct nbd_request *req)
{
	req->magic = nbd_get32(p);
	req->flags = nbd_get16(p + 4);
	req->type = nbd_get16(p + 6);
	req->handle = nbd_get64(p + 8);
	req->offset = nbd_get64(p + 16);
	req->length = nbd_get32(p + 24);
}

void nbd_put_simple_reply(uint8_t *p, uint32_t error, uint64_t handle)
{
	nbd_put32(p, NBD_SIMPLE_REPLY_MAGIC);
	nbd_put32(p + 4, error);
	nbd_put64(p + 8, handle);
}

void nbd_put_structured_reply(uint8_t *p, uint16_t flags, uint16_t type,
			      uint64_t handle, uint32_t length)
{
	nbd_put32(p, NBD_STRUCTURED_REPLY_MAGIC);
	nbd_put16(p + 4, flags);
	nbd_put16(p + 6, type);
	nbd_put64(p + 8, handle);
	nbd_put32(p + 16, length);
}

uint32_t nbd_parse_meta_request(const uint8_t *data, uint32_t len,
				struct nbd_meta_request *req)
{
	uint32_t name_len, pos;

	if (len < 4 + 4)
		return NBD_REP_ERR_INVALID;
	name_len = nbd_get32(data);
	if (name_len > NBD_MAX_STRING_BYTES || name_len > len - 4 - 4)
		return NBD_REP_ERR_INVALID;
	req->name = data + 4;
	req->name_len = name_len;
	req->nr_queries = nbd_get32(data + 4 + name_len);
	pos = 4 + name_len + 4;
	req->queries = data + pos;
	req->queries_len = len - pos;
	/* Each query takes at least its 4-byte length. */
	if (req->nr_queries > req->queries_len / 4)
		return NBD_REP_ERR_INVALID;
	if (req->nr_queries > NBD_META_MAX_QUERIES)
		return NBD_REP_ERR_TOO_BIG;
	for (uint32_t i = 0; i < req->nr_queries; i++) {
		uint32_t q_len;

		if (len - pos < 4)
			return NBD_REP_ERR_INVALID;
		q_len = nbd_get32(data + pos);
		pos += 4;
		if (q_len > len - pos)
			return NBD_REP_ERR_INVALID;
		pos += q_len;
	}
	return pos == len ? 0 : NBD_REP_ERR_INVALID;
}

void nbd_meta_query(const struct nbd_meta_request *req, uint32_t i,
		    const uint8_t **q, uint32_t *q_len)
{
	const uint8_t *p = req->queries;

	/* Checked by nbd_parse_meta_request: every length fits. */
	for (;;) {
		uint32_t n = nbd_get32(p);

		if (!i--) {
			*q = p + 4;
			*q_len = n;
			return;
		}
		p += 4 + (size_t)n;
	}
}

bool nbd_meta_match(const char *name, const uint8_t *q, uint32_t q_len,
		    bool list)
{
	size_t n = strlen(name);

	if (q_len == n && !memcmp(name, q, n))
		return true;
	return list && q_len && q_len < n && q[q_len - 1] == ':' &&
	       !memcmp(name, q, q_len);
}

size_t nbd_put_block_status(uint8_t *buf, uint16_t flags, uint64_t handle,
			    uint32_t ctx_id, const uint32_t *lengths,
			    const uint32_t *ext_flags, uint32_t n)
{
	uint32_t payload =
		NBD_BLOCK_STATUS_ID_BYTES + n * NBD_BLOCK_STATUS_EXTENT_BYTES;
	uint8_t *p = buf + NBD_STRUCTURED_REPLY_BYTES;

	nbd_put_structured_reply(buf, flags, NBD_REPLY_TYPE_BLOCK_STATUS,
				 handle, payload);
	nbd_put32(p, ctx_id);
	p += NBD_BLOCK_STATUS_ID_BYTES;
	for (uint32_t i = 0; i < n; i++) {
		nbd_put32(p, lengths[i]);
		nbd_put32(p + 4, ext_flags[i]);
		p += NBD_BLOCK_STATUS_EXTENT_BYTES;
	}
	return NBD_STRUCTURED_REPLY_BYTES + (size_t)payload;
}

/*
 * BLOCK_STATUS: REQ_ONE the only flag, a nonzero length, sector-aligned
 * as every command, the offset inside the export; the length is cut at
 * the export's end.
 */
static uint32_t nbd_check_block_status(const struct nbd_export *exp,
				       const struct nbd_request *req,
				       struct nbd_plan *plan)
{
	if (req->flags & ~NBD_CMD_FLAG_REQ_ONE)
		return NBD_EINVAL;
	if (!req->length || req->length % NBD_MIN_BLOCK_BYTES ||
	    req->offset % NBD_MIN_BLOCK_BYTES || req->offset >= exp->size_bytes)
		return NBD_EINVAL;
	plan->block_status = true;
	plan->bs_length = req->length;
	if (req->length > exp->size_bytes - req->offset)
		plan->bs_length = (uint32_t)(exp->size_bytes - req->offset);
	return 0;
}

/* Command flags a request of this type may carry on this export. */
static uint16_t nbd_allowed_flags(uint16_t type, uint16_t tflags)
{
	uint16_t fua = (tflags & NBD_FLAG_SEND_FUA) ? NBD_CMD_FLAG_FUA : 0;

	if (type == NBD_CMD_WRITE_ZEROES)
		return fua | NBD_CMD_FLAG_NO_HOLE;
	return fua;
}

static int nbd_cmd_op(uint16_t type, enum td_op *op)
{
	switch (type) {
	case NBD_CMD_READ:
		*op = TD_OP_READ;
		return 0;
	case NBD_CMD_WRITE:
		*op = TD_OP_WRITE;
		return 0;
	case NBD_CMD_FLUSH:
		*op = TD_OP_FLUSH;
		return 0;
	case NBD_CMD_TRIM:
		*op = TD_OP_DISCARD;
		return 0;
	case NBD_CMD_WRITE_ZEROES:
		*op = TD_OP_WRITE_ZEROES;
		return 0;
	default:
		return -EINVAL;
	}
}

/* Range and size checks of a command other than FLUSH. */
static uint32_t nbd_check_range(const struct nbd_export *exp,
				const struct nbd_request *req)
{
	bool writes = req->type != NBD_CMD_READ;

	if (!req->length || req->length % NBD_MIN_BLOCK_BYTES ||
	    req->offset % NBD_MIN_BLOCK_BYTES)
		return NBD_EINVAL;
	if ((req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE) &&
	    req->length > exp->max_request_bytes)
		return NBD_EINVAL;
	if (writes && (exp->tflags & NBD_FLAG_READ_ONLY))
		return NBD_EPERM;
	if (req->offset > exp->size_bytes ||
	    req->length > exp->size_bytes - req->offset)
		return writes ? NBD_ENOSPC : NBD_EINVAL;
	return 0;
}

uint32_t nbd_check_request(const struct nbd_export *exp,
			   const struct nbd_request *req, struct nbd_plan *plan)
{
	uint32_t err;

	memset(plan, 0, sizeof(*plan));
	if (req->type == NBD_CMD_BLOCK_STATUS)
		return nbd_check_block_status(exp, req, plan);
	if (nbd_cmd_op(req->type, &plan->op))
		return NBD_EINVAL;
	if (req->flags & ~nbd_allowed_flags(req->type, exp->tflags))
		return NBD_EINVAL;
	if (req->type == NBD_CMD_FLUSH)
		return req->offset || req->length ? NBD_EINVAL : 0;
	if ((err = nbd_check_range(exp, req)))
		return err;
	if ((req->flags & NBD_CMD_FLAG_FUA) &&
	    (req->type == NBD_CMD_WRITE || req->type == NBD_CMD_WRITE_ZEROES))
		plan->td_flags |= TD_REQ_FUA;
	if (req->flags & NBD_CMD_FLAG_NO_HOLE)
		plan->td_flags |= TD_REQ_NO_HOLE;
	if (req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE)
		plan->data_bytes = req->length;
	return 0;
}

uint32_t nbd_map_error(int err, uint16_t cmd)
{
	switch (err) {
	case 0:
		return 0;
	case -ERANGE:
		return cmd == NBD_CMD_WRITE || cmd == NBD_CMD_WRITE_ZEROES ||
				       cmd == NBD_CMD_TRIM
			       ? NBD_ENOSPC
			       : NBD_EINVAL;
	case -EROFS:
	case -EPERM:
		return NBD_EPERM;
	case -EOPNOTSUPP:
		return NBD_ENOTSUP;
	case -EINVAL:
		return NBD_EINVAL;
	case -ENOMEM:
		return NBD_ENOMEM;
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
		return NBD_ENOSPC;
	default:
		return NBD_EIO;
	}
}

void nbd_printable(const uint8_t *in, size_t len, char *out, size_t out_size)
{
	size_t n = len < out_size ? len : out_size - 4;

	for (size_t i = 0; i < n; i++)
		out[i] = in[i] >= 0x20 && in[i] < 0x7f ? (char)in[i] : '?';
	if (n < len) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

const char *nbd_cmd_name(uint16_t cmd)
{
	static const char *const names[] = {
		[NBD_CMD_READ] = "READ",
		[NBD_CMD_WRITE] = "WRITE",
		[NBD_CMD_DISC] = "DISC",
		[NBD_CMD_FLUSH] = "FLUSH",
		[NBD_CMD_TRIM] = "TRIM",
		[NBD_CMD_CACHE] = "CACHE",
		[NBD_CMD_WRITE_ZEROES] = "WRITE_ZEROES",
		[NBD_CMD_BLOCK_STATUS] = "BLOCK_STATUS",
		[NBD_CMD_RESIZE] = "RESIZE",
	};

	if (cmd < sizeof(names) / sizeof(names[0]) && names[cmd])
		return names[cmd];
	return "unknown";
}

const char *nbd_opt_name(uint32_t option)
{
	static const char *const names[] = {
		[NBD_OPT_EXPORT_NAME] = "OPT_EXPORT_NAME",
		[NBD_OPT_ABORT] = "OPT_ABORT",
		[NBD_OPT_LIST] = "OPT_LIST",
		[NBD_OPT_PEEK_EXPORT] = "OPT_PEEK_EXPORT",
		[NBD_OPT_STARTTLS] = "OPT_STARTTLS",
		[NBD_OPT_INFO] = "OPT_INFO",
		[NBD_OPT_GO] = "OPT_GO",
		[NBD_OPT_STRUCTURED_REPLY] = "OPT_STRUCTURED_REPLY",
		[NBD_OPT_LIST_META_CONTEXT] = "OPT_LIST_META_CONTEXT",
		[NBD_OPT_SET_META_CONTEXT] = "OPT_SET_META_CONTEXT",
		[NBD_OPT_EXTENDED_HEADERS] = "OPT_EXTENDED_HEADERS",
	};

	if (option < sizeof(names) / sizeof(names[0]) && names[option])
		return names[option];
	return "unknown";
}
