/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * placement.h - which server holds each replica of each extent of a new
 * virtual disk (issue #5).  Pure: no store, no I/O, so that tests can give
 * it hand-written pools and check every choice.
 *
 * The rule, for servers listed in a fixed order (the store lists them by
 * id) and a disk of S columns, J extents per column, R replicas:
 *
 *   1. Spread.  Replica r of every extent of column c prefers server
 *      p = (c·R + r) mod N: with N >= S·R every (column, replica) pair has a
 *      server of its own, columns never share a server, and a column stays
 *      on one server per replica.  When p is full, or on the host of an
 *      earlier replica of the same extent, the replica goes to the server
 *      with the most free extents among those allowed, the first in the
 *      order p, p+1, ... on a tie.
 *   2. Balance.  If the spread pass cannot place every replica (a nearly
 *      full pool), the placement restarts and always takes the allowed
 *      server with the most free extents (same tie rule), which places
 *      everything whenever that is possible.
 *
 * Hard rule in both passes: the replicas of one extent are on servers with
 * distinct addresses (hosts).  Draining servers are left out by the
 * caller.
 */
#ifndef TAPSTRIPE_MASTER_PLACEMENT_H
#define TAPSTRIPE_MASTER_PLACEMENT_H

#include <stdint.h>

struct master_place_server {
	const char *address; /* the host: replicas need distinct ones */
	uint32_t free;	     /* free extents; lowered by what is placed */
};

/*
 * Fill slots[(c·J + j)·R + r] with an index into servers for every column
 * c < columns, extent j < extents_per_column, replica r < replicas, and
 * lower each server's free count by what it received.  Returns 0; -EINVAL
 * for zero counts; -ENOSPC when the pool cannot hold the disk (servers[]
 * is then unchanged); -ENOMEM.
 */
int master_place(struct master_place_server *servers, uint32_t nr_servers,
		 uint32_t columns, uint32_t extents_per_column,
		 uint32_t replicas, uint32_t *slots);

#endif
