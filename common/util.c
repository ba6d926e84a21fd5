/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * util.c - small helpers shared by the daemon and the tools.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/*
 * "4096", "4K", "4KiB", "1G", "2T" (binary multiples; a trailing "B" or
 * "iB" is accepted).  Returns 0, or -EINVAL for text that is not a size,
 * -ERANGE when it does not fit 64 bits.
 */
int td_parse_size(const char *text, uint64_t *bytes)
{
	static const char units[] = "KMGTPE";
	unsigned long long value;
	const char *u;
	char *end;
	unsigned int shift = 0;

	if (!text || !isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno)
		return -ERANGE;
	if (*end) {
		u = strchr(units, toupper((unsigned char)*end));
		if (!u)
			return -EINVAL;
		shift = 10 * (unsigned int)(u - units + 1);
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "ib") ||
		    !strcmp(end, "B") || !strcmp(end, "b"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (shift && value > (UINT64_MAX >> shift))
		return -ERANGE;
	*bytes = (uint64_t)value << shift;
	return 0;
}
