/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * host-id.h - this host's id, the holder of the leases it takes (issue
 * #18).  Shared by tapdisk (which takes a disk's lease at open) and
 * stripe-ctl, so that both name the host the same way.
 *
 * The id is, first found: $TAPSTRIPE_HOST_ID; the first line of
 * /etc/tapstripe/host-id (blanks around it ignored); the host name
 * (gethostname).  It must follow master_host_id_ok: 1-63 of
 * [A-Za-z0-9._-].  It must be stable (a host that comes back under another
 * id is another host: its disks are held by its old id) and unique among
 * the hosts of one master.
 */
#ifndef TAPSTRIPE_MASTER_CLIENT_HOST_ID_H
#define TAPSTRIPE_MASTER_CLIENT_HOST_ID_H

#include <stddef.h>

#include "master/hostid.h"
#include "master/stripe.h"

#define MASTER_HOST_ID_ENV  "TAPSTRIPE_HOST_ID"
#define MASTER_HOST_ID_FILE "/etc/tapstripe/host-id"
#define MASTER_HOST_ID_SIZE (MS_HOST_ID_MAX + 1)

/*
 * This host's id into out (MASTER_HOST_ID_SIZE bytes), looked up as said
 * above, file standing for /etc/tapstripe/host-id (NULL: that one).  0;
 * -EINVAL when the id found is malformed, -errno when the file exists but
 * cannot be read, each with msg naming the source and what to do.  Reads
 * a small file: call it at open, not in an event loop's hot path.
 */
int master_host_id_default(const char *file, char *out, char *msg,
			   size_t msg_len);

#endif
