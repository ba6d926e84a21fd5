/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-proto.h - the NBD wire protocol: constants, encoding and the pure
 * checks of the fixed-newstyle handshake and the transmission phase.
 *
 * Names and values follow the protocol specification (NetworkBlockDevice
 * doc/proto.md).  Everything on the wire is big-endian.  Nothing here
 * touches a socket, the event loop or the vbd: the server (nbd.c,
 * nbd-conn.c) feeds bytes in and sends what these functions produce, and
 * the unit test checks them against hand-written tables.
 */
#ifndef TAPSTRIPE_NBD_PROTO_H
#define TAPSTRIPE_NBD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tapdisk/driver.h"

/* --- magic numbers --------------------------------------------------------- */

#define NBD_MAGIC		   0x4e42444d41474943ull /* "NBDMAGIC", INIT_PASSWD */
#define NBD_IHAVEOPT		   0x49484156454f5054ull /* "IHAVEOPT", option magic */
#define NBD_REP_MAGIC		   0x0003e889045565a9ull /* option replies */
#define NBD_REQUEST_MAGIC	   0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC	   0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

/* --- handshake flags (server, 16 bits) and client flags (32 bits) --------- */

#define NBD_FLAG_FIXED_NEWSTYLE	  (1u << 0)
#define NBD_FLAG_NO_ZEROES	  (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES	  (1u << 1)

/* --- transmission flags (16 bits) ------------------------------------------ */

#define NBD_FLAG_HAS_FLAGS	   (1u << 0)
#define NBD_FLAG_READ_ONLY	   (1u << 1)
#define NBD_FLAG_SEND_FLUSH	   (1u << 2)
#define NBD_FLAG_SEND_FUA	   (1u << 3)
#define NBD_FLAG_ROTATIONAL	   (1u << 4)
#define NBD_FLAG_SEND_TRIM	   (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF	   (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN	   (1u << 8)
#define NBD_FLAG_SEND_RESIZE	   (1u << 9)
#define NBD_FLAG_SEND_CACHE	   (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO	   (1u << 11)

/* --- options ---------------------------------------------------------------- */

#define NBD_OPT_EXPORT_NAME	  1u
#define NBD_OPT_ABORT		  2u
#define NBD_OPT_LIST		  3u
#define NBD_OPT_PEEK_EXPORT	  4u
#define NBD_OPT_STARTTLS	  5u
#define NBD_OPT_INFO		  6u
#define NBD_OPT_GO		  7u
#define NBD_OPT_STRUCTURED_REPLY  8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT  10u
#define NBD_OPT_EXTENDED_HEADERS  11u

/* --- option replies --------------------------------------------------------- */

#define NBD_REP_ACK		    1u
#define NBD_REP_SERVER		    2u
#define NBD_REP_INFO		    3u
#define NBD_REP_META_CONTEXT	    4u
#define NBD_REP_FLAG_ERROR	    (1u << 31)
#define NBD_REP_ERR_UNSUP	    (NBD_REP_FLAG_ERROR | 1u)
#define NBD_REP_ERR_POLICY	    (NBD_REP_FLAG_ERROR | 2u)
#define NBD_REP_ERR_INVALID	    (NBD_REP_FLAG_ERROR | 3u)
#define NBD_REP_ERR_PLATFORM	    (NBD_REP_FLAG_ERROR | 4u)
#define NBD_REP_ERR_TLS_REQD	    (NBD_REP_FLAG_ERROR | 5u)
#define NBD_REP_ERR_UNKNOWN	    (NBD_REP_FLAG_ERROR | 6u)
#define NBD_REP_ERR_SHUTDOWN	    (NBD_REP_FLAG_ERROR | 7u)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_FLAG_ERROR | 8u)
#define NBD_REP_ERR_TOO_BIG	    (NBD_REP_FLAG_ERROR | 9u)

/* Information types of NBD_REP_INFO (and of GO/INFO requests). */
#define NBD_INFO_EXPORT	     0u
#define NBD_INFO_NAME	     1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE  3u

/* --- commands and command flags ---------------------------------------------- */

#define NBD_CMD_READ	     0u
#define NBD_CMD_WRITE	     1u
#define NBD_CMD_DISC	     2u
#define NBD_CMD_FLUSH	     3u
#define NBD_CMD_TRIM	     4u
#define NBD_CMD_CACHE	     5u
#define NBD_CMD_WRITE_ZEROES 6u
#define NBD_CMD_BLOCK_STATUS 7u
#define NBD_CMD_RESIZE	     8u

#define NBD_CMD_FLAG_FUA       (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE   (1u << 1)
#define NBD_CMD_FLAG_DF	       (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE   (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

/* --- error values of replies ------------------------------------------------- */

#define NBD_EPERM     1u
#define NBD_EIO	      5u
#define NBD_ENOMEM    12u
#define NBD_EINVAL    22u
#define NBD_ENOSPC    28u
#define NBD_EOVERFLOW 75u
#define NBD_ENOTSUP   95u
#define NBD_ESHUTDOWN 108u

/* --- sizes of messages --------------------------------------------------------- */

#define NBD_GREETING_BYTES	    18 /* NBDMAGIC, IHAVEOPT, handshake flags */
#define NBD_CLIENT_FLAGS_BYTES	    4
#define NBD_OPT_HEADER_BYTES	    16	/* IHAVEOPT, option, length */
#define NBD_OPT_REPLY_HEADER_BYTES  20	/* magic, option, type, length */
#define NBD_EXPORT_NAME_REPLY_BYTES 10	/* size, transmission flags */
#define NBD_EXPORT_NAME_ZEROES	    124 /* unless NBD_FLAG_C_NO_ZEROES */
#define NBD_REQUEST_BYTES	    28
#define NBD_SIMPLE_REPLY_BYTES	    16
#define NBD_STRUCTURED_REPLY_BYTES  20 /* magic, flags, type, handle, length */
#define NBD_INFO_EXPORT_BYTES	    12 /* type, size, transmission flags */
#define NBD_INFO_BLOCK_SIZE_BYTES   14 /* type, minimum, preferred, maximum */
#define NBD_MAX_STRING_BYTES	    4096 /* export names, messages */

/* The block sizes the server advertises (see nbd_put_go_reply). */
#define NBD_MIN_BLOCK_BYTES	  TD_SECTOR_SIZE /* the vbd's unit */
#define NBD_PREFERRED_BLOCK_BYTES 4096u

/*
 * Metadata contexts (NBD_OPT_SET_META_CONTEXT): at most NBD_META_MAX
 * selected per connection (ids 1..NBD_META_MAX, per connection), at most
 * NBD_META_LIST_MAX names in the reply to one LIST_META_CONTEXT, and at
 * most NBD_META_MAX_QUERIES queries in one request; a query longer than
 * a context name can be (TD_CTX_NAME_MAX - 1) matches nothing.
 */
#define NBD_META_MAX	     8
#define NBD_META_LIST_MAX    16
#define NBD_META_MAX_QUERIES 128
#define NBD_META_REPLY_BYTES (NBD_OPT_REPLY_HEADER_BYTES + 4 + TD_CTX_NAME_MAX)

/*
 * Option data the server buffers: the largest legitimate GO/INFO (name
 * length, a 4096-byte name, a count and a generous list of information
 * requests) fits.  Longer options are skipped, not buffered.
 */
#define NBD_OPT_MAX_DATA_BYTES 8192u

/*
 * Room one option's replies may take in the output buffer: the largest is
 * NBD_OPT_LIST's NBD_REP_SERVER (a 4096-byte name) and its NBD_REP_ACK,
 * or NBD_META_LIST_MAX NBD_REP_META_CONTEXT replies and their ACK.
 */
#define NBD_OPT_LIST_REPLY_BYTES \
	(2 * NBD_OPT_REPLY_HEADER_BYTES + 4 + NBD_MAX_STRING_BYTES + 256)
#define NBD_OPT_META_REPLY_BYTES \
	((NBD_META_LIST_MAX + 1) * NBD_META_REPLY_BYTES)
#define NBD_OPT_MAX_REPLY_BYTES NBD_OPT_META_REPLY_BYTES
_Static_assert(NBD_OPT_MAX_REPLY_BYTES >= NBD_OPT_LIST_REPLY_BYTES,
	       "NBD_OPT_LIST's reply fits");

/* --- byte order ------------------------------------------------------------------ */

static inline void nbd_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void nbd_put32(uint8_t *p, uint32_t v)
{
	nbd_put16(p, (uint16_t)(v >> 16));
	nbd_put16(p + 2, (uint16_t)v);
}

static inline void nbd_put64(uint8_t *p, uint64_t v)
{
	nbd_put32(p, (uint32_t)(v >> 32));
	nbd_put32(p + 4, (uint32_t)v);
}

static inline uint16_t nbd_get16(const uint8_t *p)
{
	return (uint16_t)((unsigned int)p[0] << 8 | p[1]);
}

static inline uint32_t nbd_get32(const uint8_t *p)
{
	return (uint32_t)nbd_get16(p) << 16 | nbd_get16(p + 2);
}

static inline uint64_t nbd_get64(const uint8_t *p)
{
	return (uint64_t)nbd_get32(p) << 32 | nbd_get32(p + 4);
}

/* --- what the server exports ---------------------------------------------------- */

struct nbd_export {
	uint64_t size_bytes;
	uint16_t tflags;	    /* NBD_FLAG_* transmission flags */
	uint32_t max_request_bytes; /* READ/WRITE payload limit */
};

/*
 * Transmission flags that tell the truth about a disk: what its features
 * and read-only state allow.  A read-only disk announces no write-side
 * feature (FUA, TRIM, WRITE_ZEROES).  CAN_MULTI_CONN is always set: every
 * connection shares one vbd, so a flush covers every completed write of
 * every connection.
 */
uint16_t nbd_transmission_flags(const struct td_disk_info *info);

/* --- handshake ---------------------------------------------------------------------- */

/* The server's first 18 bytes.  Returns NBD_GREETING_BYTES. */
size_t nbd_put_greeting(uint8_t *buf);

/* Handshake flags the server offers, and client flags it accepts. */
#define NBD_SERVER_HANDSHAKE_FLAGS \
	(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES)
#define NBD_CLIENT_FLAGS_KNOWN \
	(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)

struct nbd_opt_header {
	uint64_t magic;
	uint32_t option;
	uint32_t length;
};

void nbd_decode_opt_header(const uint8_t *p, struct nbd_opt_header *hdr);

/*
 * An option reply: header and len bytes of data.  buf must hold
 * NBD_OPT_REPLY_HEADER_BYTES + len.  Returns the bytes written.
 */
size_t nbd_put_opt_reply(uint8_t *buf, uint32_t option, uint32_t type,
			 const void *data, uint32_t len);

/* The body of an NBD_OPT_INFO or NBD_OPT_GO request. */
struct nbd_info_request {
	const uint8_t *name; /* points into the option data; not terminated */
	uint32_t name_len;
	uint16_t nr_infos; /* information types requested */
};

/*
 * Parse GO/INFO data.  Returns 0, or NBD_REP_ERR_INVALID when the lengths
 * do not add up or the name is longer than NBD_MAX_STRING_BYTES.
 */
uint32_t nbd_parse_info_request(const uint8_t *data, uint32_t len,
				struct nbd_info_request *req);

/*
 * The successful reply to GO/INFO: NBD_REP_INFO with NBD_INFO_EXPORT,
 * NBD_REP_INFO with NBD_INFO_BLOCK_SIZE (minimum NBD_MIN_BLOCK_BYTES,
 * preferred NBD_PREFERRED_BLOCK_BYTES, maximum exp->max_request_bytes),
 * then NBD_REP_ACK.  buf must hold NBD_GO_REPLY_BYTES.  Returns the bytes
 * written.
 */
#define NBD_GO_REPLY_BYTES                                        \
	(3 * NBD_OPT_REPLY_HEADER_BYTES + NBD_INFO_EXPORT_BYTES + \
	 NBD_INFO_BLOCK_SIZE_BYTES)
size_t nbd_put_go_reply(uint8_t *buf, uint32_t option,
			const struct nbd_export *exp);

/*
 * The reply to NBD_OPT_EXPORT_NAME: size, flags and, unless the client
 * set NBD_FLAG_C_NO_ZEROES, 124 zeroes.  buf must hold
 * NBD_EXPORT_NAME_REPLY_BYTES + NBD_EXPORT_NAME_ZEROES.
 */
size_t nbd_put_export_name_reply(uint8_t *buf, const struct nbd_export *exp,
				 uint32_t client_flags);

/* --- transmission ------------------------------------------------------------------ */

struct nbd_request {
	uint32_t magic;
	uint16_t flags; /* NBD_CMD_FLAG_* */
	uint16_t type;	/* NBD_CMD_* */
	uint64_t handle;
	uint64_t offset;
	uint32_t length;
};

void nbd_decode_request(const uint8_t *p, struct nbd_request *req);

/* Write a simple reply header.  p must hold NBD_SIMPLE_REPLY_BYTES. */
void nbd_put_simple_reply(uint8_t *p, uint32_t error, uint64_t handle);

/*
 * Structured replies (NBD_OPT_STRUCTURED_REPLY): chunk flags and types.
 */
#define NBD_REPLY_FLAG_DONE	    (1u << 0)
#define NBD_REPLY_TYPE_NONE	    0u
#define NBD_REPLY_TYPE_OFFSET_DATA  1u
#define NBD_REPLY_TYPE_OFFSET_HOLE  2u
#define NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define NBD_REPLY_TYPE_ERROR	    ((1u << 15) | 1u)
#define NBD_REPLY_TYPE_ERROR_OFFSET ((1u << 15) | 2u)

/*
 * Write a structured reply chunk header.  p must hold
 * NBD_STRUCTURED_REPLY_BYTES; length is the chunk's payload length.
 */
void nbd_put_structured_reply(uint8_t *p, uint16_t flags, uint16_t type,
			      uint64_t handle, uint32_t length);

/* base:allocation flags on the wire (NBD_STATE_*) */
#define NBD_STATE_HOLE (1u << 0)
#define NBD_STATE_ZERO (1u << 1)

/* Bytes of one BLOCK_STATUS chunk's payload: context id, then extents. */
#define NBD_BLOCK_STATUS_ID_BYTES     4
#define NBD_BLOCK_STATUS_EXTENT_BYTES 8 /* length, flags */
/* Most extents in one chunk: the rest of the range is asked for again. */
#define NBD_BLOCK_STATUS_MAX_EXTENTS 128

/* Reply headers a slot holds: a READ's OFFSET_DATA chunk header and
 * offset, or an ERROR chunk with its error and an empty message. */
#define NBD_REPLY_HEAD_MAX_BYTES (NBD_STRUCTURED_REPLY_BYTES + 8)

/*
 * The body of NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT:
 * 32-bit export name length, name, 32-bit number of queries, each a
 * 32-bit length and a string.
 */
struct nbd_meta_request {
	const uint8_t *name; /* points into the option data; not terminated */
	uint32_t name_len;
	uint32_t nr_queries;
	const uint8_t *queries; /* the first query's length */
	uint32_t queries_len;
};

/*
 * Parse and check the whole request: 0, or NBD_REP_ERR_INVALID when the
 * lengths do not add up (a query running past the data, bytes left over,
 * a name longer than NBD_MAX_STRING_BYTES), NBD_REP_ERR_TOO_BIG for more
 * than NBD_META_MAX_QUERIES queries.
 */
uint32_t nbd_parse_meta_request(const uint8_t *data, uint32_t len,
				struct nbd_meta_request *req);

/*
 * Query i (< nr_queries) of a request nbd_parse_meta_request accepted:
 * *q points into the data, not terminated.
 */
void nbd_meta_query(const struct nbd_meta_request *req, uint32_t i,
		    const uint8_t **q, uint32_t *q_len);

/*
 * Does context name answer query q?  For SET_META_CONTEXT only the exact
 * name; for LIST_META_CONTEXT also every name in a namespace given as a
 * prefix ending in ':' ("base:", "qemu:dirty-bitmap:").
 */
bool nbd_meta_match(const char *name, const uint8_t *q, uint32_t q_len,
		    bool list);

/*
 * One NBD_REPLY_TYPE_BLOCK_STATUS chunk: header, context id, n extents
 * (lengths in bytes, flags as they are on the wire).  buf must hold
 * NBD_STRUCTURED_REPLY_BYTES + NBD_BLOCK_STATUS_ID_BYTES +
 * n * NBD_BLOCK_STATUS_EXTENT_BYTES.  Returns the bytes written.
 */
size_t nbd_put_block_status(uint8_t *buf, uint16_t flags, uint64_t handle,
			    uint32_t ctx_id, const uint32_t *lengths,
			    const uint32_t *ext_flags, uint32_t n);

/* What the server does with a request that passed nbd_check_request. */
struct nbd_plan {
	enum td_op op;	     /* not for BLOCK_STATUS */
	uint32_t td_flags;   /* TD_REQ_* */
	uint32_t data_bytes; /* buffer needed: READ and WRITE */
	bool block_status;   /* NBD_CMD_BLOCK_STATUS: ... */
	uint32_t bs_length;  /* ... of this many bytes (clamped to the end) */
};

/*
 * Validate a request (any type but NBD_CMD_DISC) against the export.
 * Returns 0 and fills *plan, or the NBD error to reply with:
 *   - NBD_EINVAL: unknown command, a flag that is unknown, not advertised
 *     or not valid for the command, length 0, a length or offset that is
 *     not a multiple of NBD_MIN_BLOCK_BYTES, a READ or WRITE longer than
 *     max_request_bytes, FLUSH with a nonzero offset or length, a READ
 *     past the end of the export;
 *   - NBD_ENOSPC: WRITE, WRITE_ZEROES or TRIM past the end of the export;
 *   - NBD_EPERM: WRITE, WRITE_ZEROES or TRIM on a read-only export.
 * BLOCK_STATUS takes the flag NBD_CMD_FLAG_REQ_ONE; its offset must lie
 * inside the export (else NBD_EINVAL) and a length that runs past the end
 * is cut there (plan->bs_length).  Whether the connection may send it
 * (structured replies, contexts selected) is the caller's to check.
 * A command the export does not advertise (FLUSH, TRIM, WRITE_ZEROES) is
 * passed on: the vbd answers -EOPNOTSUPP (NBD_ENOTSUP).  FUA is accepted
 * on every command when advertised, and ignored where it writes nothing
 * durable: READ, FLUSH (which is durable anyway) and TRIM (whose range
 * reads back as anything until it is written again, so whether the
 * discard itself survives a crash cannot be observed).
 */
uint32_t nbd_check_request(const struct nbd_export *exp,
			   const struct nbd_request *req,
			   struct nbd_plan *plan);

/* True for the one command whose request carries a payload. */
static inline bool nbd_request_has_payload(const struct nbd_request *req)
{
	return req->type == NBD_CMD_WRITE;
}

/*
 * Translate a vbd error (-errno) for command cmd into an NBD error:
 * -ERANGE is NBD_EINVAL for reads and NBD_ENOSPC for WRITE, WRITE_ZEROES
 * and TRIM; -EROFS and -EPERM NBD_EPERM; -EOPNOTSUPP NBD_ENOTSUP;
 * -EINVAL NBD_EINVAL; -ENOMEM NBD_ENOMEM; -ENOSPC, -EDQUOT and -EFBIG
 * NBD_ENOSPC (as the specification asks); anything else NBD_EIO.
 * 0 gives 0.
 */
uint32_t nbd_map_error(int err, uint16_t cmd);

/*
 * Copy client-chosen bytes (an export name) for a log line: at most
 * out_size - 1 characters, anything not printable ASCII as '?', and "..."
 * when cut short.  out_size must be at least 4.
 */
void nbd_printable(const uint8_t *in, size_t len, char *out, size_t out_size);

/* Names for logs ("READ", "OPT_GO", ...); "unknown" when not known. */
const char *nbd_cmd_name(uint16_t cmd);
const char *nbd_opt_name(uint32_t option);

#endif
