/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * placement.h - which server holds each replica of each extent of a new
 * virtual disk (issues #5 and #19).  Pure: no store, no I/O, so that tests
 * can give it hand-written pools and check every choice.
 *
 * Failure domains.  Every server has a host label and may have a rack and
 * a site label (NULL or "" when unknown).  Two servers are in distinct
 * sites when both have site labels and these differ; in distinct racks
 * when both have rack labels and their (site, rack) pairs differ (a rack
 * label is read within its site); on distinct hosts when their host
 * labels differ.  A server without a label of some level is distinct from
 * no one at that level.
 *
 * The rule, for servers listed in a fixed order (the store lists them by
 * id) and a disk of S columns, J extents per column, R replicas:
 *
 *   0. Widest domain.  The level wanted is site when the servers carry at
 *      least R distinct site labels, else rack when they carry R distinct
 *      racks, else host (always host when R = 1).  Each extent is placed
 *      at the widest level from wanted down that this extent's replicas
 *      can reach with the extents still free: its replicas are in
 *      pairwise distinct domains of that level (and on distinct hosts).
 *      The level reached is reported per extent, with how many domains of
 *      the level wanted still had free extents then.
 *   1. Spread.  Within a level, replica r of every extent of column c
 *      prefers server p = (c·R + r) mod N: with N >= S·R every (column,
 *      replica) pair has a server of its own, columns never share a
 *      server, and a column stays on one server per replica.  When p is
 *      full, or not in a domain of its own, the replica goes to the allowed
 *      server with the most free extents, the first in the order p, p+1,
 *      ... on a tie.
 *   2. Balance.  If the spread pass cannot place every replica (a nearly
 *      full pool), the placement restarts and always takes the allowed
 *      server with the most free extents (same tie rule and levels),
 *      which places everything whenever that is possible.
 *
 * Hard rule in both passes and at every level: the replicas of one extent
 * are on servers with distinct host labels.  Sites and racks are spread
 * as far as the pool allows, never required.  The caller passes draining
 * servers with no free extent: their labels count for the level wanted
 * (a disk made while a site drains is reported as not spread over
 * sites), they receive nothing.
 */
#ifndef TAPSTRIPE_MASTER_PLACEMENT_H
#define TAPSTRIPE_MASTER_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

/* Failure-domain levels, narrowest first (ms_domain's values). */
enum master_domain {
	MASTER_DOMAIN_HOST = 0,
	MASTER_DOMAIN_RACK = 1,
	MASTER_DOMAIN_SITE = 2,
};

struct master_place_server {
	const char *host; /* the host label: replicas need distinct ones */
	uint32_t free;	  /* free extents; lowered by what is placed */
	const char *rack; /* NULL or "": unknown */
	const char *site; /* NULL or "": unknown */
	bool gone;	  /* failed: no rack or site, takes nothing */
};

/* How far one extent's replicas were spread. */
struct master_place_spread {
	uint8_t reached; /* enum master_domain: their widest distinct level */
	uint8_t wanted;	 /* the widest level the labels offer */
	uint32_t room;	 /* domains of level wanted with free extents then */
};

/*
 * Fill slots[(c·J + j)·R + r] with an index into servers for every column
 * c < columns, extent j < extents_per_column, replica r < replicas, and
 * lower each server's free count by what it received.  spread (NULL: not
 * wanted) gets one entry per extent, spread[c·J + j].  Returns 0; -EINVAL
 * for zero counts; -ENOSPC when the pool cannot hold the disk (servers[]
 * is then unchanged); -ENOMEM.
 */
int master_place_spread(struct master_place_server *servers,
			uint32_t nr_servers, uint32_t columns,
			uint32_t extents_per_column, uint32_t replicas,
			uint32_t *slots, struct master_place_spread *spread);

/* master_place_spread without the per-extent report. */
int master_place(struct master_place_server *servers, uint32_t nr_servers,
		 uint32_t columns, uint32_t extents_per_column,
		 uint32_t replicas, uint32_t *slots);

/*
 * Re-homing (issue #19): a server for one new replica of an extent whose
 * other replicas are on servers fixed[0 .. nr_fixed-1] (indices into
 * servers), never server exclude (the replica's old one; UINT32_MAX:
 * none).  The level wanted is chosen as in rule 0 for replicas copies;
 * the new replica goes to the widest level from wanted down at which it
 * is in a domain of its own (and always on a host of its own), on the
 * allowed server with the most free extents (the lowest index on a tie).
 * Gone servers among fixed constrain the host only.  *sp (NULL: not wanted)
 * tells the extent's spread after the move.  0 with *chosen set and that
 * server's free count lowered; -ENOSPC when no server may take it;
 * -EINVAL (nr_fixed above MASTER_PLACE_MAX_FIXED, an index out of range);
 * -ENOMEM.
 */
/* The most servers fixed may name: the other R-1 replicas of an extent
 * of at most 4, and the new extents of their own moves. */
#define MASTER_PLACE_MAX_FIXED 6

int master_place_one(struct master_place_server *servers, uint32_t nr_servers,
		     const uint32_t *fixed, uint32_t nr_fixed,
		     uint32_t replicas, uint32_t exclude, uint32_t *chosen,
		     struct master_place_spread *sp);

#endif
