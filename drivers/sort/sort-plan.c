/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sort-plan.c - see sort-plan.h.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "drivers/sort/sort-plan.h"

/* --- options ---------------------------------------------------------------- */

#define SORT_OPT_TEXT_MAX 32 /* longest value accepted, e.g. "1099511627776" */

enum sort_opt_kind { SORT_OPT_COUNT, SORT_OPT_SIZE };
enum sort_opt_id {
	SORT_WINDOW_US,
	SORT_MAX_MERGE,
	SORT_MAX_REQS,
	SORT_MAX_BYTES
};

struct sort_opt {
	enum sort_opt_id id;
	const char *name;
	enum sort_opt_kind kind;
	uint64_t min;
	uint64_t max;
	const char *accepts; /* for the error message */
};

static const struct sort_opt sort_opt_table[] = {
	{SORT_WINDOW_US, "window_us", SORT_OPT_COUNT, 0, SORT_WINDOW_US_LIMIT,
	 "microseconds from 0 to 1000000 (e.g. window_us=200)"},
	{SORT_MAX_MERGE, "max_merge", SORT_OPT_SIZE, TD_SECTOR_SIZE,
	 SORT_MAX_MERGE_LIMIT,
	 "a multiple of 512 bytes from 512 to 1G (e.g. max_merge=4M)"},
	{SORT_MAX_REQS, "max_reqs", SORT_OPT_COUNT, 1, SORT_MAX_REQS_LIMIT,
	 "a count from 1 to 65536 (e.g. max_reqs=256)"},
	{SORT_MAX_BYTES, "max_bytes", SORT_OPT_SIZE, TD_SECTOR_SIZE,
	 SORT_MAX_BYTES_LIMIT,
	 "a multiple of 512 bytes from 512 to 1T (e.g. max_bytes=64M)"},
};
#define SORT_NR_OPTS (sizeof(sort_opt_table) / sizeof(sort_opt_table[0]))

static int sort_parse_count(const char *text, uint64_t *value)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*value = v;
	return 0;
}

static int sort_parse_value(const struct sort_opt *opt, const char *text,
			    uint64_t *value)
{
	int err = opt->kind == SORT_OPT_SIZE ? td_parse_size(text, value)
					     : sort_parse_count(text, value);

	if (err || *value < opt->min || *value > opt->max)
		return -EINVAL;
	if (opt->kind == SORT_OPT_SIZE && *value % TD_SECTOR_SIZE)
		return -EINVAL;
	return 0;
}

static void sort_opt_store(struct sort_opts *opts, enum sort_opt_id id,
			   uint64_t value)
{
	/* Each value was checked against its row's max, which fits. */
	switch (id) {
	case SORT_WINDOW_US:
		opts->window_us = (uint32_t)value;
		break;
	case SORT_MAX_MERGE:
		opts->max_merge_bytes = (uint32_t)value;
		break;
	case SORT_MAX_REQS:
		opts->max_reqs = (uint32_t)value;
		break;
	case SORT_MAX_BYTES:
		opts->max_plug_bytes = value;
		break;
	}
}

/* Parse one "name=value" of len bytes. */
static int sort_parse_one(const char *item, size_t len, struct sort_opts *opts,
			  char *why, size_t why_len)
{
	const char *eq = memchr(item, '=', len);
	size_t name_len = eq ? (size_t)(eq - item) : len;
	char text[SORT_OPT_TEXT_MAX];
	size_t text_len = eq ? len - name_len - 1 : 0;
	uint64_t value;

	for (unsigned int i = 0; i < SORT_NR_OPTS; i++) {
		const struct sort_opt *opt = &sort_opt_table[i];

		if (strlen(opt->name) != name_len ||
		    strncmp(opt->name, item, name_len))
			continue;
		if (!eq || !text_len || text_len >= sizeof(text)) {
			snprintf(why, why_len,
				 "sort: option %s needs a value: %s", opt->name,
				 opt->accepts);
			return -EINVAL;
		}
		memcpy(text, eq + 1, text_len);
		text[text_len] = '\0';
		if (sort_parse_value(opt, text, &value)) {
			snprintf(why, why_len,
				 "sort: bad value '%s' for %s: expected %s",
				 text, opt->name, opt->accepts);
			return -EINVAL;
		}
		sort_opt_store(opts, opt->id, value);
		return 0;
	}
	snprintf(why, why_len,
		 "sort: unknown option '%.*s' (known: window_us, max_merge, "
		 "max_reqs, max_bytes; e.g. sort:window_us=200,max_merge=4M)",
		 (int)name_len, item);
	return -EINVAL;
}

int sort_opts_parse(const char *args, struct sort_opts *opts, char *why,
		    size_t why_len)
{
	const char *p = args;

	opts->window_us = 0;
	opts->max_merge_bytes = SORT_DEFAULT_MAX_MERGE_BYTES;
	opts->max_reqs = 0;
	opts->max_plug_bytes = SORT_DEFAULT_MAX_PLUG_BYTES;
	if (!*p)
		return 0;
	for (;;) {
		size_t len = strcspn(p, ",");
		int err;

		if (!len) {
			snprintf(why, why_len,
				 "sort: empty option in '%s': write "
				 "name=value pairs joined by ','",
				 args);
			return -EINVAL;
		}
		if ((err = sort_parse_one(p, len, opts, why, why_len)))
			return err;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

/* --- ordering --------------------------------------------------------------- */

static int sort_cmp(const void *a, const void *b)
{
	const struct sort_req *x = *(struct sort_req *const *)a;
	const struct sort_req *y = *(struct sort_req *const *)b;
	const struct td_request *p = x->req, *q = y->req;

	if (p->op != q->op)
		return p->op < q->op ? -1 : 1;
	if (p->flags != q->flags)
		return p->flags < q->flags ? -1 : 1;
	if (p->sector != q->sector)
		return p->sector < q->sector ? -1 : 1;
	/* Equal keys (reads of one range) keep their arrival order. */
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void sort_plan_order(struct sort_req **reqs, uint32_t n)
{
	if (n > 1)
		qsort(reqs, n, sizeof(*reqs), sort_cmp);
}

/* --- groups ------------------------------------------------------------------ */

static bool iov_follows(const struct iovec *tail, const struct iovec *next)
{
	return (const char *)tail->iov_base + tail->iov_len ==
	       (const char *)next->iov_base;
}

/* Entries that appending src[0..n) to dst[0..cnt) would add. */
static int iov_added(const struct iovec *dst, int cnt, const struct iovec *src,
		     int n)
{
	const struct iovec *tail = cnt ? &dst[cnt - 1] : NULL;
	int added = 0;

	for (int i = 0; i < n; i++) {
		if (!tail || !iov_follows(tail, &src[i]))
			added++;
		tail = &src[i];
	}
	return added;
}

/* Append src to dst, joining entries adjacent in memory. */
static void iov_append(struct iovec *dst, int *cnt, const struct iovec *src,
		       int n)
{
	for (int i = 0; i < n; i++) {
		struct iovec *tail = *cnt ? &dst[*cnt - 1] : NULL;

		if (tail && iov_follows(tail, &src[i]))
			tail->iov_len += src[i].iov_len;
		else
			dst[(*cnt)++] = src[i];
	}
}

void sort_group_start(struct sort_group *g, struct sort_req *first,
		      struct iovec *slab)
{
	first->next_child = NULL;
	g->first = first;
	g->last = first;
	g->sector = first->req->sector;
	g->nr_sectors = first->req->nr_sectors;
	g->members = 1;
	g->iov = slab;
	g->iovcnt = 0;
}

/* Carry next's iovecs in the slab if they fit in cap entries. */
static bool sort_group_take_iov(struct sort_group *g,
				const struct td_request *next, int cap)
{
	const struct td_request *first = g->first->req;

	/* The slab is filled lazily: a lone request forwards its own. */
	if (g->members == 1) {
		g->iovcnt = 0;
		iov_append(g->iov, &g->iovcnt, first->iov, first->iovcnt);
	}
	if (g->iovcnt + iov_added(g->iov, g->iovcnt, next->iov, next->iovcnt) >
	    cap)
		return false;
	iov_append(g->iov, &g->iovcnt, next->iov, next->iovcnt);
	return true;
}

bool sort_group_add(struct sort_group *g, struct sort_req *next,
		    const struct sort_limits *lim)
{
	const struct td_request *first = g->first->req, *r = next->req;
	uint64_t b = lim->boundary_sectors;

	if (r->op != first->op || r->op == TD_OP_FLUSH ||
	    r->flags != first->flags)
		return false;
	if (g->sector + g->nr_sectors != r->sector)
		return false;
	/* Both terms are below 2^32: no overflow. */
	if (g->nr_sectors + r->nr_sectors > lim->max_sectors)
		return false;
	if (b && g->sector / b != (r->sector + r->nr_sectors - 1) / b)
		return false;
	if (r->iovcnt && !sort_group_take_iov(g, r, lim->iov_cap))
		return false;
	next->next_child = NULL;
	g->last->next_child = next;
	g->last = next;
	g->nr_sectors += r->nr_sectors;
	g->members++;
	return true;
}
