/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * util.h - small helpers shared by the daemon and the tools: sizes with
 * binary suffixes, errno names.  A leaf: includes nothing of the project.
 */
#ifndef TAPSTRIPE_UTIL_H
#define TAPSTRIPE_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The struct of type type whose member member is at ptr. */
#define td_container_of(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))

/*
 * Parse a size with an optional binary suffix K, M, G, T, P, E (or KiB ...).
 * 0, -EINVAL for text that is not a size, -ERANGE past 64 bits.
 */
int td_parse_size(const char *text, uint64_t *bytes);

/* "EINVAL" for -EINVAL or EINVAL; "E<n>" for one it does not know. */
const char *td_errno_name(int err, char *buf, size_t len);
/* The errno (positive) of a name td_errno_name gives, or 0. */
int td_errno_from_name(const char *name);

#endif
