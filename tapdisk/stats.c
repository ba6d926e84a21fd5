/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.c - names and histogram arithmetic for the vbd statistics, and the
 * drivers' own reports and control commands.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "tapdisk/vbd-int.h"
#include "tapdisk/vbd.h"

static const char *const stat_names[TD_STAT_COUNT] = {
	[TD_STAT_BACKEND_SUBMITS] = "backend_submits",
	[TD_STAT_BACKEND_MERGES] = "backend_merges",
	[TD_STAT_MERGED_IOV_ENTRIES] = "merged_iov_entries",
};

static const char *const op_names[TD_OP_COUNT] = {
	[TD_OP_READ] = "read",
	[TD_OP_WRITE] = "write",
	[TD_OP_FLUSH] = "flush",
	[TD_OP_DISCARD] = "discard",
	[TD_OP_WRITE_ZEROES] = "write_zeroes",
};

const char *td_stat_name(enum td_stat stat)
{
	return (unsigned)stat < TD_STAT_COUNT ? stat_names[stat] : "?";
}

const char *td_op_name(enum td_op op)
{
	return (unsigned)op < TD_OP_COUNT ? op_names[op] : "?";
}

/* Bucket i holds (2^(i-1), 2^i]; 0 and 1 go to bucket 0. */
unsigned int td_seg_bucket(uint32_t nr_segments)
{
	unsigned int b = 0;

	while (b < TD_SEG_BUCKETS - 1 && nr_segments > (1u << b))
		b++;
	return b;
}

uint32_t td_seg_bucket_max(unsigned int bucket)
{
	return bucket < TD_SEG_BUCKETS - 1 ? 1u << bucket : UINT32_MAX;
}

uint32_t td_seg_bucket_min(unsigned int bucket)
{
	return bucket ? td_seg_bucket_max(bucket - 1) + 1 : 1;
}

/*
 * Latency buckets: values below TD_LAT_SUB µs map one to one; above, each
 * power of two [2^e, 2^(e+1)) is cut into TD_LAT_SUB equal parts, so a
 * bucket is at most 1/TD_LAT_SUB (12.5 %) wide.
 */
unsigned int td_lat_bucket(uint64_t us)
{
	unsigned int e, b;

	if (us < TD_LAT_SUB)
		return (unsigned int)us;
	e = 63 - (unsigned int)__builtin_clzll(us); /* 2^e <= us */
	/* e >= 3 (TD_LAT_SUB = 8) */
	b = (e - 2) * TD_LAT_SUB + (unsigned int)((us >> (e - 3)) & 7);
	return b < TD_LAT_BUCKETS ? b : TD_LAT_BUCKETS - 1;
}

/* The largest value (inclusive) that lands in bucket. */
uint64_t td_lat_bucket_max_us(unsigned int bucket)
{
	unsigned int e, sub;

	if (bucket < TD_LAT_SUB)
		return bucket;
	e = bucket / TD_LAT_SUB + 2;
	sub = bucket % TD_LAT_SUB;
	return ((uint64_t)(TD_LAT_SUB + sub + 1) << (e - 3)) - 1;
}

uint64_t td_lat_percentile(const uint64_t *hist, double p)
{
	uint64_t total = 0, seen = 0, rank;

	for (unsigned int i = 0; i < TD_LAT_BUCKETS; i++)
		total += hist[i];
	if (!total)
		return 0;
	rank = (uint64_t)(p / 100.0 * (double)total + 0.999999);
	if (rank < 1)
		rank = 1;
	for (unsigned int i = 0; i < TD_LAT_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= rank)
			return td_lat_bucket_max_us(i);
	}
	return td_lat_bucket_max_us(TD_LAT_BUCKETS - 1);
}

/* --- the drivers' own counters (ops->counters) ------------------------------ */

static struct td_driver_counter_value *counter_find(struct td_vbd_stats *s,
						    const char *name)
{
	for (unsigned int i = 0; i < s->nr_driver_counters; i++)
		if (!strcmp(s->driver_counters[i].name, name))
			return &s->driver_counters[i];
	return NULL;
}

int vbd_driver_counters_init(struct td_vbd *vbd)
{
	struct td_vbd_stats *s = &vbd->stats;

	for (const struct td_driver_ops *const *t = vbd->table; *t; t++) {
		for (unsigned int k = 0; k < (*t)->nr_counters; k++) {
			const char *name = (*t)->counters[k].name;

			if (counter_find(s, name))
				continue; /* another driver counts it too */
			if (s->nr_driver_counters == TD_DRIVER_COUNTERS_MAX) {
				td_err("the drivers declare more than %u "
				       "counters",
				       TD_DRIVER_COUNTERS_MAX);
				return -EINVAL;
			}
			s->driver_counters[s->nr_driver_counters++].name = name;
		}
	}
	return 0;
}

/* Add one instance's counters to the snapshot out. */
static void counters_add(const struct td_driver *drv, struct td_vbd_stats *out)
{
	for (unsigned int k = 0; drv->data && k < drv->ops->nr_counters; k++) {
		const struct td_driver_counter *dc = &drv->ops->counters[k];
		struct td_driver_counter_value *v = counter_find(out, dc->name);
		uint64_t value;

		memcpy(&value, (const char *)drv->data + dc->offset,
		       sizeof(value));
		if (!dc->max)
			v->value += value;
		else if (value > v->value)
			v->value = value;
	}
}

void vbd_driver_counters(const struct td_vbd *vbd, struct td_vbd_stats *out)
{
	for (unsigned int i = 0; i < out->nr_driver_counters; i++)
		out->driver_counters[i].value = 0;
	for (unsigned int i = 0; i < vbd->nr_layers; i++)
		counters_add(&vbd->drivers[i], out);
}

uint64_t td_vbd_driver_counter(const struct td_vbd_stats *s, const char *name)
{
	for (unsigned int i = 0; i < s->nr_driver_counters; i++)
		if (!strcmp(s->driver_counters[i].name, name))
			return s->driver_counters[i].value;
	return 0;
}

/* --- the drivers' reports and commands -------------------------------------- */

void td_vbd_report_drivers_json(struct td_vbd *vbd, struct td_json *j)
{
	td_json_begin_object(j, "drivers");
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (!drv->ops->report_json)
			continue;
		td_json_begin_object(j, drv->ops->name);
		drv->ops->report_json(drv, j);
		td_json_end_object(j);
	}
	td_json_end_object(j);
}

void td_vbd_report_drivers_text(struct td_vbd *vbd, struct td_strbuf *sb)
{
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (!drv->ops->report_text)
			continue;
		td_strbuf_printf(sb, "\ndriver %s\n", drv->ops->name);
		drv->ops->report_text(drv, sb);
	}
}

void td_vbd_report_drivers_metrics(struct td_vbd *vbd, const char *labels,
				   struct td_strbuf *sb)
{
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (drv->ops->report_metrics)
			drv->ops->report_metrics(drv, labels, sb);
	}
}

void td_vbd_info_drivers_json(struct td_vbd *vbd, struct td_json *j)
{
	td_json_begin_object(j, "drivers");
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (!drv->ops->info_json)
			continue;
		td_json_begin_object(j, drv->ops->name);
		drv->ops->info_json(drv, j);
		td_json_end_object(j);
	}
	td_json_end_object(j);
}

void td_vbd_info_drivers_text(struct td_vbd *vbd, struct td_strbuf *sb)
{
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (drv->ops->info_text)
			drv->ops->info_text(drv, sb);
	}
}

int td_vbd_driver_control(struct td_vbd *vbd, const char *name, int argc,
			  char **argv, struct td_strbuf *out)
{
	for (unsigned int i = 0; i < vbd->nr_layers; i++) {
		struct td_driver *drv = &vbd->drivers[i];

		if (strcmp(drv->ops->name, name))
			continue;
		if (!drv->ops->control) {
			td_strbuf_printf(out, "driver %s takes no commands",
					 name);
			return -EOPNOTSUPP;
		}
		return drv->ops->control(drv, argc, argv, out);
	}
	td_strbuf_printf(out, "no driver '%.64s' in the chain %.200s", name,
			 vbd->chain);
	return -ENOENT;
}

void td_driver_metric(struct td_strbuf *sb, const char *labels,
		      const char *name, const char *type, const char *help,
		      uint64_t value)
{
	td_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %" PRIu64 "\n",
			 name, help, name, type, name, labels, value);
}

int td_vbd_check_grow(const char *who, uint64_t old_sectors,
		      uint64_t new_sectors, struct td_strbuf *why)
{
	if (new_sectors >= old_sectors)
		return 0;
	td_strbuf_printf(why,
			 "%s: the size went down from %" PRIu64 " to %" PRIu64
			 " sectors; a disk in use is never shrunk",
			 who, old_sectors, new_sectors);
	return -EINVAL;
}

int td_vbd_resize(struct td_vbd *vbd, uint64_t *old_sectors,
		  uint64_t *new_sectors, struct td_strbuf *why)
{
	uint64_t sizes[VBD_MAX_LAYERS];
	uint64_t s = 0;
	int err;

	for (unsigned int i = vbd->nr_layers; i-- > 0;) {
		struct td_driver *drv = &vbd->drivers[i];

		if (!drv->ops->refresh_size) {
			td_strbuf_printf(why,
					 "the %s driver cannot change "
					 "size",
					 drv->ops->name);
			return -EOPNOTSUPP;
		}
		err = drv->ops->refresh_size(drv, &s);
		if (err) {
			td_strbuf_printf(why, "%s: reading the size: %s",
					 drv->ops->name, strerror(-err));
			return err;
		}
		err = td_vbd_check_grow(drv->ops->name, drv->info.size_sectors,
					s, why);
		if (err)
			return err;
		sizes[i] = s;
	}
	for (unsigned int i = 0; i < vbd->nr_layers; i++)
		vbd->drivers[i].info.size_sectors = sizes[i];
	*old_sectors = vbd->info.size_sectors;
	*new_sectors = sizes[0];
	vbd->info.size_sectors = sizes[0];
	return 0;
}
