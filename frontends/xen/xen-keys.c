/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-keys.c - parse and validate the xenstore keys of a Xen block device
 * (see xen-keys.h).  Pure functions: no xenstore, no allocation kept.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/xen/xen-keys.h"

#define XVD_MAJOR	    202
#define XVD_MINORS_PER_DISK 16
#define XVD_EXT_FLAG	    (1u << 28)
#define XVD_LETTERS	    26
/* Longest "ring-refNN". */
#define RING_REF_KEY_MAX 24

static int __attribute__((format(printf, 4, 5)))
say(int err, char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return err;
}

int xen_parse_u32(const char *text, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	const char *p = text;

	if (!text || !*text || strlen(text) > 10)
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int xen_parse_protocol(const char *text, enum blkif_protocol *out, char *why,
		       size_t why_len)
{
	if (!text || !strcmp(text, XEN_IO_PROTO_ABI_NATIVE)) {
		*out = BLKIF_PROTOCOL_NATIVE;
		return 0;
	}
	if (!strcmp(text, XEN_IO_PROTO_ABI_X86_32)) {
		*out = BLKIF_PROTOCOL_X86_32;
		return 0;
	}
	if (!strcmp(text, XEN_IO_PROTO_ABI_X86_64) ||
	    !strcmp(text, XEN_IO_PROTO_ABI_ARM))
		return say(-EPROTONOSUPPORT, why, why_len,
			   "protocol %s is not served by this backend (%s): "
			   "a guest of another architecture",
			   text, XEN_IO_PROTO_ABI_NATIVE);
	return say(-EPROTONOSUPPORT, why, why_len,
		   "unknown protocol '%.32s': expected %s", text,
		   XEN_IO_PROTO_ABI_NATIVE);
}

int xen_parse_state(const char *text)
{
	uint32_t v;

	if (xen_parse_u32(text, XenbusStateReconfigured, &v))
		return -EINVAL;
	return (int)v;
}

/* Read key as a number in 0..max; a missing key is -ENOENT. */
static int read_u32(xen_key_reader read, void *opaque, const char *key,
		    uint32_t max, uint32_t *out, char *why, size_t why_len)
{
	char *text = read(opaque, key);
	int err;

	if (!text)
		return say(errno == ENOENT ? -ENOENT : -EIO, why, why_len,
			   "cannot read %s: %s", key, strerror(errno));
	err = xen_parse_u32(text, max, out);
	if (err)
		say(err, why, why_len,
		    "%s is '%.32s': not a number in 0..%" PRIu32, key, text,
		    max);
	free(text);
	return err;
}

static int read_ring_order(xen_key_reader read, void *opaque, uint32_t max,
			   uint32_t *order, char *why, size_t why_len)
{
	char *text = read(opaque, "ring-page-order");
	int err;

	if (!text) {
		*order = 0; /* an old frontend: one page, key "ring-ref" */
		return errno == ENOENT ? 0
				       : say(-EIO, why, why_len,
					     "cannot read ring-page-order");
	}
	err = xen_parse_u32(text, max, order);
	if (err)
		say(err, why, why_len,
		    "ring-page-order is '%.32s': not in 0..%" PRIu32
		    " (max-ring-page-order)",
		    text, max);
	free(text);
	return err;
}

static int read_ring_refs(xen_key_reader read, void *opaque,
			  struct xen_frontend_keys *k, char *why,
			  size_t why_len)
{
	char key[RING_REF_KEY_MAX];
	int err;

	k->nr_ring_refs = 1u << k->ring_order;
	if (!k->ring_order) {
		err = read_u32(read, opaque, "ring-ref", UINT32_MAX,
			       &k->ring_refs[0], why, why_len);
		/* Some frontends write ring-ref0 even for one page. */
		if (err != -ENOENT)
			return err;
	}
	for (uint32_t i = 0; i < k->nr_ring_refs; i++) {
		snprintf(key, sizeof(key), "ring-ref%" PRIu32, i);
		err = read_u32(read, opaque, key, UINT32_MAX, &k->ring_refs[i],
			       why, why_len);
		if (err)
			return err;
	}
	return 0;
}

int xen_read_frontend_keys(xen_key_reader read, void *opaque,
			   uint32_t max_ring_order,
			   struct xen_frontend_keys *out, char *why,
			   size_t why_len)
{
	char *proto;
	int err;

	memset(out, 0, sizeof(*out));
	if (max_ring_order > BLKIF_XEN_MAX_RING_ORDER)
		max_ring_order = BLKIF_XEN_MAX_RING_ORDER;
	err = read_ring_order(read, opaque, max_ring_order, &out->ring_order,
			      why, why_len);
	if (!err)
		err = read_ring_refs(read, opaque, out, why, why_len);
	if (!err)
		err = read_u32(read, opaque, "event-channel", UINT32_MAX,
			       &out->event_channel, why, why_len);
	if (err)
		return err;
	proto = read(opaque, "protocol");
	if (!proto && errno != ENOENT)
		return say(-EIO, why, why_len, "cannot read protocol");
	err = xen_parse_protocol(proto, &out->protocol, why, why_len);
	free(proto);
	return err;
}

/* A reader of queue-Q/KEY that falls back on nothing: keys are per ring. */
struct queue_reader {
	xen_key_reader read;
	void *opaque;
	uint32_t queue;
};

#define QUEUE_KEY_MAX 48 /* "queue-NN/ring-refNN" */

static char *read_queue_key(void *opaque, const char *key)
{
	const struct queue_reader *qr = opaque;
	char path[QUEUE_KEY_MAX];

	/* ring-page-order and protocol stay at the top, shared by all. */
	if (!strcmp(key, "ring-page-order") || !strcmp(key, "protocol"))
		return qr->read(qr->opaque, key);
	snprintf(path, sizeof(path), "queue-%" PRIu32 "/%s", qr->queue, key);
	return qr->read(qr->opaque, path);
}

static int read_nr_queues(xen_key_reader read, void *opaque, uint32_t max,
			  uint32_t *n, char *why, size_t why_len)
{
	char *text = read(opaque, "multi-queue-num-queues");
	int err;

	if (!text) {
		*n = 1; /* one ring, or a frontend without the feature */
		return errno == ENOENT
			       ? 0
			       : say(-EIO, why, why_len,
				     "cannot read multi-queue-num-queues");
	}
	err = xen_parse_u32(text, max, n);
	if (!err && !*n)
		err = -EINVAL;
	if (err)
		say(err, why, why_len,
		    "multi-queue-num-queues is '%.32s': not in 1..%" PRIu32
		    " (multi-queue-max-queues)",
		    text, max);
	free(text);
	return err;
}

int xen_read_frontend_queues(xen_key_reader read, void *opaque,
			     uint32_t max_ring_order, uint32_t max_queues,
			     struct xen_frontend_queues *out, char *why,
			     size_t why_len)
{
	char detail[160] = "";
	int err;

	memset(out, 0, sizeof(*out));
	if (!max_queues || max_queues > XEN_MAX_QUEUES)
		max_queues = XEN_MAX_QUEUES;
	err = read_nr_queues(read, opaque, max_queues, &out->nr_queues, why,
			     why_len);
	if (err)
		return err;
	if (out->nr_queues == 1)
		return xen_read_frontend_keys(read, opaque, max_ring_order,
					      &out->q[0], why, why_len);
	for (uint32_t i = 0; i < out->nr_queues; i++) {
		struct queue_reader qr = {read, opaque, i};

		err = xen_read_frontend_keys(read_queue_key, &qr,
					     max_ring_order, &out->q[i], detail,
					     sizeof(detail));
		if (err)
			return say(err, why, why_len, "queue-%" PRIu32 ": %s",
				   i, detail);
	}
	return 0;
}

int xen_vdev_to_devid(const char *vdev, uint32_t *devid)
{
	uint32_t index;

	if (!vdev)
		return -EINVAL;
	if (vdev[0] >= '0' && vdev[0] <= '9')
		return xen_parse_u32(vdev, INT32_MAX, devid);
	if (strncmp(vdev, "xvd", 3) || vdev[3] < 'a' ||
	    vdev[3] >= 'a' + XVD_LETTERS || vdev[4])
		return -EINVAL;
	index = (uint32_t)(vdev[3] - 'a');
	if (index < XVD_MINORS_PER_DISK)
		*devid = (XVD_MAJOR << 8) | (index << 4);
	else
		*devid = XVD_EXT_FLAG | (index << 8);
	return 0;
}

static int path_ok(int n, size_t len)
{
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int xen_backend_path_type(char *buf, size_t len, const char *type,
			  uint32_t backend_domid, uint32_t frontend_domid,
			  uint32_t devid)
{
	return path_ok(snprintf(buf, len,
				"/local/domain/%" PRIu32 "/backend/%s/%" PRIu32
				"/%" PRIu32,
				backend_domid, type, frontend_domid, devid),
		       len);
}

int xen_backend_path(char *buf, size_t len, uint32_t backend_domid,
		     uint32_t frontend_domid, uint32_t devid)
{
	return xen_backend_path_type(buf, len, XEN_BACKEND_TYPE, backend_domid,
				     frontend_domid, devid);
}

const char *xen_params_tapdisk_name(const char *params)
{
	static const char name_chars[] = "abcdefghijklmnopqrstuvwxyz"
					 "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
					 "0123456789-_.";
	const char *name;
	size_t n;

	if (!params)
		return NULL;
	/* libxl writes a raw qdisk as "aio:<target>" (QEMU's old name). */
	if (!strncmp(params, "aio:", 4) || !strncmp(params, "raw:", 4))
		params += 4;
	if (strncmp(params, XEN_PARAMS_PREFIX, strlen(XEN_PARAMS_PREFIX)))
		return NULL;
	name = params + strlen(XEN_PARAMS_PREFIX);
	n = strspn(name, name_chars);
	if (!n || name[n] || n >= XEN_NAME_MAX)
		return NULL;
	return name;
}

int xen_frontend_path(char *buf, size_t len, uint32_t frontend_domid,
		      uint32_t devid)
{
	return path_ok(snprintf(buf, len,
				"/local/domain/%" PRIu32 "/device/vbd/%" PRIu32,
				frontend_domid, devid),
		       len);
}
