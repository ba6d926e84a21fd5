/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_xen-keys.c - libFuzzer harness for the keys a Xen frontend writes
 * to xenstore, as the backend reads them when it connects
 * (xen_read_frontend_queues: multi-queue-num-queues, ring-page-order,
 * ring-ref*, event-channel, protocol, the same under queue-N/).
 *
 * Input: [0] the backend's limits: bits 0-2 max-ring-page-order (0..7,
 * the parser cuts it to 4), bits 3-7 multi-queue-max-queues (0: the
 * protocol's 16); then the frontend's directory as "key=value" lines (a
 * line without '=' is ignored; the first line of a key wins).
 *
 * Checked (a failure is a crash for libFuzzer): an accepted directory
 * gives 1..max rings, each of an order within both limits with that many
 * ring refs, all of one order and protocol; a refusal is one of the
 * documented errors and says why.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontends/xen/xen-keys.h"

#define check(cond)                                                   \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "check failed: %s\n", #cond); \
			abort();                                      \
		}                                                     \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct dir {
	const char *text;
	size_t len;
};

/* The value of key's first line, malloc'd; NULL with ENOENT. */
static char *dir_read(void *opaque, const char *key)
{
	const struct dir *d = opaque;
	size_t klen = strlen(key), pos = 0;

	while (pos < d->len) {
		const char *line = d->text + pos;
		const char *nl = memchr(line, '\n', d->len - pos);
		size_t n = nl ? (size_t)(nl - line) : d->len - pos;

		if (n > klen && !memcmp(line, key, klen) && line[klen] == '=')
			return strndup(line + klen + 1, n - klen - 1);
		pos += n + 1;
	}
	errno = ENOENT;
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xen_frontend_queues q;
	struct dir d = {(const char *)data + 1, size ? size - 1 : 0};
	uint32_t max_order, max_queues, order_cap;
	char why[200] = "";
	int err;

	if (!size)
		return 0;
	max_order = data[0] & 7;
	max_queues = data[0] >> 3;
	order_cap = max_order < BLKIF_XEN_MAX_RING_ORDER
			    ? max_order
			    : BLKIF_XEN_MAX_RING_ORDER;
	err = xen_read_frontend_queues(dir_read, &d, max_order, max_queues, &q,
				       why, sizeof(why));
	if (err) {
		check(err == -ENOENT || err == -EINVAL || err == -EIO ||
		      err == -EPROTONOSUPPORT);
		check(why[0]);
		return 0;
	}
	check(q.nr_queues >= 1 && q.nr_queues <= XEN_MAX_QUEUES);
	check(!max_queues || q.nr_queues <= max_queues);
	for (uint32_t i = 0; i < q.nr_queues; i++) {
		check(q.q[i].ring_order <= order_cap);
		check(q.q[i].nr_ring_refs == 1u << q.q[i].ring_order);
		check(q.q[i].ring_order == q.q[0].ring_order);
		check(q.q[i].protocol == q.q[0].protocol);
	}
	return 0;
}
