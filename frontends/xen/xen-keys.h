/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-keys.h - the xenstore keys of a Xen virtual block device: where its
 * nodes live, and the parsing and validation of what a frontend writes.
 *
 * A device's nodes, as XenServer's vbd3 devices are made (the toolstack,
 * tap-ctl attach, writes both directories in one transaction; tapdisk runs
 * the backend's side of the xenbus state machine):
 *
 *   XEN_BACKEND_ROOT/<frontend domid>/<devid>/   owned by the backend domain
 *     frontend, frontend-id, online, state, dev, mode, type, device-type,
 *     tapstripe-pid (the tapdisk that serves it), and what tapdisk
 *     advertises: max-ring-page-order, feature-max-indirect-segments,
 *     feature-flush-cache, feature-discard, sectors, sector-size, info,
 *     tapstripe-owner (the tapdisk holding it now; 0: handed over)
 *   /local/domain/<frontend domid>/device/vbd/<devid>/   owned by the guest
 *     backend, backend-id, state, virtual-device, device-type, and what
 *     blkfront writes: ring-ref or ring-ref0..N-1, ring-page-order,
 *     event-channel, protocol
 *
 * Everything a frontend writes is hostile: parsed strictly (decimal, no
 * sign, no trailing bytes, within bounds) before any of it is used.
 * No function here touches xenstore: callers pass a reader.
 */
#ifndef TAPSTRIPE_XEN_KEYS_H
#define TAPSTRIPE_XEN_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "frontends/blkif/blkif.h"

#include <xen/io/xenbus.h>

#define XEN_BACKEND_TYPE "vbd3"
/*
 * The other backend type tapdisk serves: the nodes xl makes for a disk
 * with backendtype=qdisk in a driver domain (backend=DOMAIN), under
 * /local/domain/<backend>/backend/qdisk/<domid>/<devid>, whose "params"
 * is "aio:<target>" for format=raw.  xl writes no tapstripe-pid there: tapdisk
 * takes such a device when params names it (xen_params_tapdisk_name).
 */
#define XEN_BACKEND_TYPE_QDISK "qdisk"
/* A target naming the tapdisk started with --name NAME: "tapstripe:NAME". */
#define XEN_PARAMS_PREFIX "tapstripe:"
/* xenstore paths are short; this bounds every one we build. */
#define XEN_PATH_MAX 256
/*
 * Key naming the tapdisk (pid) that should serve a backend directory,
 * written by the toolstack (tap-ctl): "0" asks the tapdisk holding the
 * device to hand it over (tap-ctl release).
 */
#define XEN_KEY_TAPDISK_PID "tapstripe-pid"
/*
 * Key naming the tapdisk (pid) that holds the device now, written by
 * tapdisk: its pid once it took the device, "0" once it handed it over
 * with the frontend still connected (every request it took answered, the
 * rest left on the ring for the next tapdisk, which resumes the ring).
 */
#define XEN_KEY_TAPDISK_OWNER "tapstripe-owner"

/* A ring of order N is 2^N pages, N <= BLKIF_XEN_MAX_RING_ORDER. */
#define XEN_MAX_RING_PAGES (1u << BLKIF_XEN_MAX_RING_ORDER)

/* What the frontend wrote, validated. */
struct xen_frontend_keys {
	uint32_t ring_order;
	uint32_t nr_ring_refs; /* 1 << ring_order */
	uint32_t ring_refs[XEN_MAX_RING_PAGES];
	uint32_t event_channel;
	enum blkif_protocol protocol;
};

/*
 * Reads key (a name relative to the frontend directory); returns a
 * malloc'd string, or NULL with errno set (ENOENT: no such key).
 */
typedef char *(*xen_key_reader)(void *opaque, const char *key);

/*
 * Read and validate the frontend's ring keys.  max_ring_order is what the
 * backend advertised.  Returns 0 and *out, or -errno with a sentence in
 * why (for the log and the backend's "error" node): -ENOENT a key is
 * missing, -EINVAL a value is malformed or out of range,
 * -EPROTONOSUPPORT the protocol ABI is not one this backend serves.
 */
int xen_read_frontend_keys(xen_key_reader read, void *opaque,
			   uint32_t max_ring_order,
			   struct xen_frontend_keys *out, char *why,
			   size_t why_len);

/*
 * Several rings (xen/io/blkif.h "Multiple hardware queues/rings"): the
 * backend advertises multi-queue-max-queues, a frontend that wants N > 1
 * rings writes multi-queue-num-queues = N, one ring-page-order for all,
 * and each ring's ring-ref/ring-refI and event-channel under queue-Q/
 * (Q = 0..N-1) instead of at the top.  A frontend asking for one ring (or
 * not knowing the feature) writes the top-level keys as before.
 */
#define XEN_MAX_QUEUES 16
/* What tapdisk advertises (Linux's blkback: one per dom0 CPU). */
#define XEN_DEFAULT_MAX_QUEUES 8

struct xen_frontend_queues {
	uint32_t nr_queues; /* 1..max_queues */
	struct xen_frontend_keys q[XEN_MAX_QUEUES];
};

/*
 * Read and validate every ring's keys: multi-queue-num-queues (absent: 1;
 * 0 or above max_queues: -EINVAL), then for one ring the top-level keys
 * (xen_read_frontend_keys), for N rings those under queue-0 .. queue-N-1
 * with the top-level ring-page-order and protocol.  Errors as
 * xen_read_frontend_keys, why naming the queue.
 */
int xen_read_frontend_queues(xen_key_reader read, void *opaque,
			     uint32_t max_ring_order, uint32_t max_queues,
			     struct xen_frontend_queues *out, char *why,
			     size_t why_len);

/* A decimal number in 0..max, nothing else.  0 or -EINVAL. */
int xen_parse_u32(const char *text, uint32_t max, uint32_t *out);

/*
 * The "protocol" key: NULL (absent) or this machine's ABI is
 * BLKIF_PROTOCOL_NATIVE, x86_32-abi on an x86_64 host
 * BLKIF_PROTOCOL_X86_32.  Returns 0, or -EPROTONOSUPPORT with why filled
 * in for another architecture's ABI or an unknown name.
 */
int xen_parse_protocol(const char *text, enum blkif_protocol *out, char *why,
		       size_t why_len);

/* A "state" node: 0..8 (XenbusState); absent or malformed is -EINVAL. */
int xen_parse_state(const char *text);

/*
 * A virtual device name as Linux names Xen disks: xvda..xvdz (devid
 * 202 << 8 | index << 4 for the first 16, the extended form
 * 1 << 28 | index << 8 after), or a decimal devid.  0 or -EINVAL.
 */
int xen_vdev_to_devid(const char *vdev, uint32_t *devid);

/*
 * The tapdisk name a backend's "params" names: params is
 * "tapstripe:NAME", or "aio:tapstripe:NAME" as libxl 4.17 writes a
 * format=raw qdisk ("<format>:<target>", raw named "aio"; "raw:" is
 * taken too, another format is not ours), NAME 1 to
 * XEN_NAME_MAX - 1 letters, digits, '-', '_' or '.'.  Returns a pointer
 * into params, or NULL when params names no tapdisk.
 */
#define XEN_NAME_MAX 64
const char *xen_params_tapdisk_name(const char *params);

/* The two directories of a device.  0 or -ENAMETOOLONG. */
int xen_backend_path(char *buf, size_t len, uint32_t backend_domid,
		     uint32_t frontend_domid, uint32_t devid);
/* The backend directory of another backend type (vbd3, qdisk). */
int xen_backend_path_type(char *buf, size_t len, const char *type,
			  uint32_t backend_domid, uint32_t frontend_domid,
			  uint32_t devid);
int xen_frontend_path(char *buf, size_t len, uint32_t frontend_domid,
		      uint32_t devid);

#endif
