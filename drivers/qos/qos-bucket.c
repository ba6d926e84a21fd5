/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * qos-bucket.c - token buckets (GCRA) and the options of the qos filter.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "drivers/qos/qos-bucket.h"

#define NS_PER_SEC 1000000000ull
#define NS_PER_MS  1000000ull

static const char *const qos_names[QOS_NR_LIMITS] = {
	[QOS_IOPS] = "iops",
	[QOS_READ_IOPS] = "read_iops",
	[QOS_WRITE_IOPS] = "write_iops",
	[QOS_BPS] = "bps",
	[QOS_READ_BPS] = "read_bps",
	[QOS_WRITE_BPS] = "write_bps",
};

const char *qos_limit_name(enum qos_limit l)
{
	return l < QOS_NR_LIMITS ? qos_names[l] : "?";
}

/* cost units at rate per second, in ns; 128-bit: bytes * 1e9 overflows. */
static uint64_t qos_cost_ns(uint64_t cost, uint64_t rate)
{
	unsigned __int128 ns = (unsigned __int128)cost * NS_PER_SEC / rate;

	return ns > UINT64_MAX / 2 ? UINT64_MAX / 2 : (uint64_t)ns;
}

void qos_bucket_set(struct qos_bucket *b, uint64_t rate, uint32_t burst_ms,
		    uint64_t now_ns)
{
	b->rate = rate;
	b->burst_ns = (uint64_t)burst_ms * NS_PER_MS;
	b->tat_ns = now_ns;
}

uint64_t qos_bucket_wait_ns(const struct qos_bucket *b, uint64_t now_ns)
{
	if (!b->rate || b->tat_ns <= now_ns + b->burst_ns)
		return 0;
	return b->tat_ns - b->burst_ns - now_ns;
}

void qos_bucket_charge(struct qos_bucket *b, uint64_t cost, uint64_t now_ns)
{
	if (!b->rate || !cost)
		return;
	if (b->tat_ns < now_ns)
		b->tat_ns = now_ns;
	b->tat_ns += qos_cost_ns(cost, b->rate);
}

void qos_request_cost(enum td_op op, uint64_t bytes,
		      uint64_t cost[QOS_NR_LIMITS])
{
	memset(cost, 0, QOS_NR_LIMITS * sizeof(cost[0]));
	if (op == TD_OP_FLUSH || op >= TD_OP_COUNT)
		return;
	cost[QOS_IOPS] = 1;
	if (op == TD_OP_READ) {
		cost[QOS_READ_IOPS] = 1;
		cost[QOS_BPS] = cost[QOS_READ_BPS] = bytes;
		return;
	}
	cost[QOS_WRITE_IOPS] = 1;
	if (op == TD_OP_WRITE)
		cost[QOS_BPS] = cost[QOS_WRITE_BPS] = bytes;
}

bool qos_group_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > QOS_GROUP_NAME_MAX || name[0] == '.')
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

void qos_opts_init(struct qos_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->burst_ms = QOS_DEFAULT_BURST_MS;
	opts->group_burst_ms = QOS_DEFAULT_BURST_MS;
	snprintf(opts->group_dir, sizeof(opts->group_dir), "%s/qos",
		 TAPSTRIPE_RUNDIR);
}

/* A plain decimal count (iops, burst_ms): no suffix, no sign. */
static int qos_parse_count(const char *text, uint64_t *out)
{
	char *end;

	if (*text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(text, &end, 10);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

/* key=value of one limit (or burst_ms) into limit[], burst. */
static int qos_parse_limit(const char *key, size_t klen, const char *val,
			   uint64_t limit[QOS_NR_LIMITS],
			   bool given[QOS_NR_LIMITS], uint32_t *burst_ms,
			   bool *burst_given)
{
	uint64_t v;

	if (klen == 8 && !strncmp(key, "burst_ms", 8)) {
		if (qos_parse_count(val, &v) || !v || v > QOS_MAX_BURST_MS)
			return -EINVAL;
		*burst_ms = (uint32_t)v;
		*burst_given = true;
		return 0;
	}
	for (int l = 0; l < QOS_NR_LIMITS; l++) {
		bool bytes = l >= QOS_BPS;

		if (strlen(qos_names[l]) != klen ||
		    strncmp(key, qos_names[l], klen))
			continue;
		if (bytes ? td_parse_size(val, &v) : qos_parse_count(val, &v))
			return -EINVAL;
		limit[l] = v;
		given[l] = true;
		return 0;
	}
	return -ENOENT;
}

static int qos_parse_one(const char *opt, struct qos_opts *o, char *why,
			 size_t why_len)
{
	const char *eq = strchr(opt, '=');
	size_t klen = eq ? (size_t)(eq - opt) : 0;
	bool given[QOS_NR_LIMITS], burst_given;
	int err;

	if (!eq || !klen) {
		snprintf(why, why_len, "qos: '%s' is not KEY=VALUE", opt);
		return -EINVAL;
	}
	if (klen == 5 && !strncmp(opt, "group", 5)) {
		if (!qos_group_name_ok(eq + 1)) {
			snprintf(why, why_len,
				 "qos: group '%.64s' is not 1-%d of A-Z a-z "
				 "0-9 . _ - (not starting with '.')",
				 eq + 1, QOS_GROUP_NAME_MAX);
			return -EINVAL;
		}
		strcpy(o->group, eq + 1);
		return 0;
	}
	if (klen == 9 && !strncmp(opt, "group_dir", 9)) {
		if (eq[1] != '/' || strlen(eq + 1) >= sizeof(o->group_dir)) {
			snprintf(why, why_len,
				 "qos: group_dir '%.64s' is not an absolute "
				 "path under %zu bytes",
				 eq + 1, sizeof(o->group_dir));
			return -EINVAL;
		}
		strcpy(o->group_dir, eq + 1);
		return 0;
	}
	if (klen > 6 && !strncmp(opt, "group_", 6))
		err = qos_parse_limit(opt + 6, klen - 6, eq + 1, o->group_limit,
				      o->group_given, &o->group_burst_ms,
				      &o->group_burst_given);
	else
		err = qos_parse_limit(opt, klen, eq + 1, o->limit, given,
				      &o->burst_ms, &burst_given);
	if (err == -ENOENT) {
		snprintf(why, why_len,
			 "qos: unknown key '%.*s' (iops, read_iops, "
			 "write_iops, bps, read_bps, write_bps, burst_ms, "
			 "group, group_dir, and group_ before a limit)",
			 (int)klen, opt);
		return -EINVAL;
	}
	if (err)
		snprintf(why, why_len,
			 "qos: bad value in '%s' (a count; bps takes K/M/G; "
			 "burst_ms 1..%u; 0 means no limit)",
			 opt, QOS_MAX_BURST_MS);
	return err;
}

int qos_opts_parse(const char *args, struct qos_opts *opts, char *why,
		   size_t why_len)
{
	struct qos_opts o = *opts;
	char *copy = strdup(args), *save = NULL;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	if (copy[0] && (copy[strlen(copy) - 1] == ',' || strstr(copy, ",,") ||
			copy[0] == ',')) {
		snprintf(why, why_len, "qos: empty option in '%s'", args);
		err = -EINVAL;
	}
	for (char *t = strtok_r(copy, ",", &save); t && !err;
	     t = strtok_r(NULL, ",", &save))
		err = qos_parse_one(t, &o, why, why_len);
	free(copy);
	if (!err)
		*opts = o;
	return err;
}
