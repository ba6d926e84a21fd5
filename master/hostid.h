/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hostid.h - the rule for a host id, the holder of a disk's lease (issue
 * #18): 1 to MS_HOST_ID_MAX (63) bytes of [A-Za-z0-9._-].  Shared by the
 * master (which refuses others with MS_EINVAL) and its clients.
 */
#ifndef TAPSTRIPE_MASTER_HOSTID_H
#define TAPSTRIPE_MASTER_HOSTID_H

#include <stdbool.h>

/* True for 1-MS_HOST_ID_MAX of [A-Za-z0-9._-]. */
bool master_host_id_ok(const char *id);

#endif
