/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm-proto.h - the negotiation messages of the shm transport: parsing
 * and formatting, nothing else (no sockets, no memory), so that the
 * backend (tapdisk/shm*.c), the frontend library (tools/td-front-lib.c),
 * the unit tests and the fuzzer share one implementation.
 *
 * doc/shm-protocol.md is the specification; in short, every message is
 * one line of printable ASCII ended by LF, at most SHM_LINE_MAX bytes:
 *
 *   backend  -> frontend   tapstripe-shm version=1 sectors=N ...
 *   frontend -> backend    connect version=1 ring-page-order=O ...
 *   backend  -> frontend   connected ring-page-order=O ...  + 4 fds
 *                       or error ENAME free text
 *   backend  -> frontend   resized sectors=N   (later, when the disk grew)
 *
 * A message is a name and "key=value" words, separated by single spaces,
 * no space before or after.  Keys are [a-z0-9-]+, values decimal digits
 * without sign or leading zero, each key at most once, unknown keys
 * refused (the version decides which keys exist).
 *
 * Parsers take the line without its LF (len bytes, not NUL-terminated),
 * treat it as hostile, and return 0, -EPROTO for a malformed line (bad
 * byte, bad word, unknown, repeated or missing key), -ENOTSUP for another
 * protocol version (the first key, checked before the others) or -EINVAL
 * for a value outside the protocol's bounds; *why then says what (for
 * logs and the error reply).  They check only what the protocol fixes: whether the
 * peer accepts the values is the caller's decision.
 */
#ifndef TAPSTRIPE_SHM_PROTO_H
#define TAPSTRIPE_SHM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_PROTO_VERSION 1
#define SHM_LINE_MAX	  512 /* bytes of one message, its LF included */
#define SHM_WHY_MAX	  160 /* room for a parser's explanation */

#define SHM_MSG_BACKEND	  "tapstripe-shm"
#define SHM_MSG_CONNECT	  "connect"
#define SHM_MSG_CONNECTED "connected"
#define SHM_MSG_ERROR	  "error"
#define SHM_MSG_RESIZED	  "resized"

/* Bounds the protocol itself puts on values. */
#define SHM_PAGE_SIZE		  4096u
#define SHM_MAX_RING_PAGE_ORDER	  8
#define SHM_MIN_INDIRECT_SEGMENTS 11   /* 11: no indirect requests */
#define SHM_MAX_INDIRECT_SEGMENTS 4096 /* 8 pages of 512 descriptors */
#define SHM_MIN_SECTOR_SIZE	  512u
#define SHM_MAX_SECTOR_SIZE	  (1u << 16)
#define SHM_MAX_SECTORS		  (UINT64_MAX >> 9) /* bytes fit 64 bits */
/* Rings on one connection: SHM_NR_FDS each in one SCM_RIGHTS message,
 * well under the kernel's SCM_MAX_FD (253). */
#define SHM_MAX_QUEUES 16

/* The descriptors sent with "connected", in this order, once per ring
 * (ring q's are fds[q * SHM_NR_FDS + SHM_FD_*]). */
enum shm_fd {
	SHM_FD_RING = 0, /* memfd: the blkif shared ring */
	SHM_FD_DATA,	 /* memfd: the data pool, gref = page index */
	SHM_FD_KICK,	 /* eventfd: frontend -> backend */
	SHM_FD_NOTIFY,	 /* eventfd: backend -> frontend */
	SHM_NR_FDS
};

/* VDISK_READONLY of xen/io/blkif.h, in "info". */
#define SHM_INFO_READONLY (1u << 2)

/* What the backend offers, sent as soon as the frontend connects. */
struct shm_backend_msg {
	uint32_t version;
	uint64_t sectors;     /* disk size in 512-byte units */
	uint32_t sector_size; /* logical block size: alignment of I/O */
	uint32_t info;	      /* SHM_INFO_* bits */
	bool flush_cache;     /* feature-flush-cache */
	bool discard;	      /* feature-discard */
	bool discard_secure;  /* discard-secure */
	/* feature-max-indirect-segments; 0: key absent (no indirect) */
	uint32_t max_indirect_segments;
	uint32_t max_ring_page_order;
	uint32_t max_data_pages; /* largest data pool the backend maps */
	/* multi-queue-max-queues: rings one connection may open; 1 when the
	 * key is absent (it is absent when 1). */
	uint32_t max_queues;
};

/* What the frontend asks for. */
struct shm_connect_msg {
	uint32_t version;
	uint32_t ring_page_order;
	uint32_t data_pages;
	/* Most segments it will put in one request; 0: key absent (the
	 * backend's offer). */
	uint32_t max_indirect_segments;
	/* multi-queue-num-queues: rings wanted, each with ring_page_order,
	 * data_pages and max_indirect_segments; 1 when the key is absent. */
	uint32_t nr_queues;
};

/* What the backend set up; the descriptors travel with it. */
struct shm_connected_msg {
	uint32_t ring_page_order;
	uint64_t ring_bytes; /* SHM_PAGE_SIZE << ring_page_order */
	uint32_t data_pages;
	uint64_t data_bytes; /* data_pages * SHM_PAGE_SIZE */
	/* Accepted for this ring; 11: indirect requests refused. */
	uint32_t max_indirect_segments;
	/* Rings set up, each with the values above and its own
	 * descriptors; 1 when the key is absent (it is absent when 1). */
	uint32_t nr_queues;
};

enum shm_msg_kind {
	SHM_KIND_UNKNOWN = 0,
	SHM_KIND_BACKEND,
	SHM_KIND_CONNECT,
	SHM_KIND_CONNECTED,
	SHM_KIND_ERROR,
	SHM_KIND_RESIZED,
};

/* Which message a line is, from its first word. */
enum shm_msg_kind shm_msg_kind(const char *line, size_t len);

int shm_parse_backend(const char *line, size_t len, struct shm_backend_msg *out,
		      char *why, size_t why_len);
int shm_parse_connect(const char *line, size_t len, struct shm_connect_msg *out,
		      char *why, size_t why_len);
int shm_parse_connected(const char *line, size_t len,
			struct shm_connected_msg *out, char *why,
			size_t why_len);
/*
 * "resized sectors=N": the disk grew online to N sectors (sent any time
 * after "connected", one line per grow).
 */
int shm_parse_resized(const char *line, size_t len, uint64_t *sectors,
		      char *why, size_t why_len);
int shm_format_resized(uint64_t sectors, char *buf, size_t len);

/*
 * "error ENAME text": *err is -errno of ENAME (-EIO for a name this side
 * does not know), text copied (NUL-terminated, truncated) into msg.
 */
int shm_parse_error(const char *line, size_t len, int *err, char *msg,
		    size_t msg_len);

/*
 * Each writes the message with its LF and a NUL into buf and returns its
 * length (LF included, NUL not), or -ENOSPC.  The caller passes values
 * within the protocol's bounds.
 */
int shm_format_backend(const struct shm_backend_msg *m, char *buf, size_t len);
int shm_format_connect(const struct shm_connect_msg *m, char *buf, size_t len);
int shm_format_connected(const struct shm_connected_msg *m, char *buf,
			 size_t len);
/* text is made printable and cut to fit SHM_LINE_MAX. */
int shm_format_error(int err, const char *text, char *buf, size_t len);

#endif
