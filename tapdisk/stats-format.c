/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats-format.c - text and JSON forms of the "info" and "stats" replies.
 */
#include "config.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "tapdisk/stats-format.h"

#define US_PER_S UINT64_C(1000000)

/* The latency percentiles every report carries, with their JSON names. */
static const struct {
	double p;
	const char *label;
	const char *key;
} percentiles[] = {
	{50.0, "p50", "p50"},
	{90.0, "p90", "p90"},
	{99.0, "p99", "p99"},
	{99.9, "p99.9", "p99_9"},
};
#define NR_PERCENTILES (sizeof(percentiles) / sizeof(percentiles[0]))

static const struct {
	uint32_t bit;
	const char *name;
} feature_names[] = {
	{TD_FEAT_FLUSH, "flush"},
	{TD_FEAT_FUA, "fua"},
	{TD_FEAT_DISCARD, "discard"},
	{TD_FEAT_WRITE_ZEROES, "write_zeroes"},
};
#define NR_FEATURES (sizeof(feature_names) / sizeof(feature_names[0]))

const char *td_format_bytes(uint64_t bytes, char *buf, unsigned int len)
{
	static const char *const units[] = {"KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB"};
	double value = (double)bytes;
	unsigned int u = 0;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return buf;
	}
	value /= 1024.0;
	while (value >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		value /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.2f %s", value, units[u]);
	return buf;
}

static uint64_t total_requests(const struct td_vbd_stats *s)
{
	uint64_t n = 0;

	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		n += s->reqs[op];
	return n;
}

static uint64_t total_latency_samples(const struct td_vbd_stats *s)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < TD_LAT_BUCKETS; i++)
		n += s->lat_hist[i];
	return n;
}

/* --- info ------------------------------------------------------------------- */

int td_format_info_text(const struct td_report *r, struct td_strbuf *sb)
{
	char human[TD_HUMAN_BYTES_MAX];
	uint64_t size = r->info.size_sectors << TD_SECTOR_SHIFT;

	td_strbuf_printf(sb, "pid: %d\nname: %s\nstate: %s\nchain: %s\n",
			 r->pid, r->name, r->state, r->chain);
	td_strbuf_printf(sb, "size_bytes: %" PRIu64 "\nsize: %s\n", size,
			 td_format_bytes(size, human, sizeof(human)));
	td_strbuf_printf(sb, "sector_size: %u\nread_only: %s\nfeatures:",
			 r->info.sector_size, r->info.read_only ? "yes" : "no");
	for (unsigned int i = 0; i < NR_FEATURES; i++)
		if (r->info.features & feature_names[i].bit)
			td_strbuf_printf(sb, " %s", feature_names[i].name);
	td_strbuf_printf(sb, "\nmax_io_bytes: %" PRIu64 "\n",
			 (uint64_t)r->info.max_io_sectors << TD_SECTOR_SHIFT);
	td_strbuf_printf(sb, "boundary_bytes: %" PRIu64 "\n",
			 r->info.boundary_sectors << TD_SECTOR_SHIFT);
	for (unsigned int i = 0; i < r->nr_frontends; i++)
		td_strbuf_printf(sb, "frontend: %s %s\n", r->frontends[i].kind,
				 r->frontends[i].addr);
	if (r->vbd)
		td_vbd_info_drivers_text(r->vbd, sb);
	td_strbuf_printf(sb, "uptime_us: %" PRIu64 "\n", r->uptime_us);
	return td_strbuf_error(sb);
}

int td_format_info_json(const struct td_report *r, struct td_strbuf *sb)
{
	struct td_json j;

	td_json_init(&j, sb);
	td_json_begin_object(&j, NULL);
	td_json_i64(&j, "pid", r->pid);
	td_json_str(&j, "name", r->name);
	td_json_str(&j, "state", r->state);
	td_json_str(&j, "chain", r->chain);
	td_json_u64(&j, "size_bytes", r->info.size_sectors << TD_SECTOR_SHIFT);
	td_json_u64(&j, "sector_size", r->info.sector_size);
	td_json_bool(&j, "read_only", r->info.read_only);
	td_json_begin_array(&j, "features");
	for (unsigned int i = 0; i < NR_FEATURES; i++)
		if (r->info.features & feature_names[i].bit)
			td_json_str(&j, NULL, feature_names[i].name);
	td_json_end_array(&j);
	td_json_u64(&j, "max_io_bytes",
		    (uint64_t)r->info.max_io_sectors << TD_SECTOR_SHIFT);
	td_json_u64(&j, "boundary_bytes",
		    r->info.boundary_sectors << TD_SECTOR_SHIFT);
	td_json_begin_array(&j, "frontends");
	for (unsigned int i = 0; i < r->nr_frontends; i++) {
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "kind", r->frontends[i].kind);
		td_json_str(&j, "addr", r->frontends[i].addr);
		td_json_end_object(&j);
	}
	td_json_end_array(&j);
	if (r->vbd)
		td_vbd_info_drivers_json(r->vbd, &j);
	td_json_u64(&j, "uptime_us", r->uptime_us);
	td_json_end_object(&j);
	return td_json_finish(&j);
}

/* --- stats as text ------------------------------------------------------------ */

static void text_ops(const struct td_report *r, struct td_strbuf *sb)
{
	const struct td_vbd_stats *s = &r->stats;
	char human[TD_HUMAN_BYTES_MAX];
	uint64_t reqs = 0, bytes = 0, errors = 0;

	td_strbuf_printf(sb, "%-14s %14s %14s %10s\n", "op", "requests",
			 "bytes", "errors");
	for (unsigned int op = 0; op < TD_OP_COUNT; op++) {
		td_strbuf_printf(
			sb, "%-14s %14" PRIu64 " %14s %10" PRIu64 "\n",
			td_op_name(op), s->reqs[op],
			td_format_bytes(s->bytes[op], human, sizeof(human)),
			s->errors[op]);
		reqs += s->reqs[op];
		bytes += s->bytes[op];
		errors += s->errors[op];
	}
	td_strbuf_printf(sb, "%-14s %14" PRIu64 " %14s %10" PRIu64 "\n",
			 "total", reqs,
			 td_format_bytes(bytes, human, sizeof(human)), errors);
	td_strbuf_printf(sb,
			 "\nin flight %" PRIu64 ", pieces %" PRIu64
			 ", pool waits %" PRIu64 "\n",
			 s->inflight, s->pieces, s->waits);
}

static void text_segments(const struct td_report *r, struct td_strbuf *sb)
{
	const struct td_vbd_stats *s = &r->stats;
	unsigned int last = 0;

	td_strbuf_puts(sb, "\nsegments per request (read/write)\n");
	for (unsigned int b = 0; b < TD_SEG_BUCKETS; b++)
		if (s->seg_hist[b])
			last = b + 1;
	if (!last)
		td_strbuf_puts(sb, "  (no requests yet)\n");
	for (unsigned int b = 0; b < last; b++) {
		char label[32];
		uint32_t lo = td_seg_bucket_min(b), hi = td_seg_bucket_max(b);

		if (b == TD_SEG_BUCKETS - 1)
			snprintf(label, sizeof(label), "%u+", lo);
		else if (lo == hi)
			snprintf(label, sizeof(label), "%u", lo);
		else
			snprintf(label, sizeof(label), "%u-%u", lo, hi);
		td_strbuf_printf(sb, "  %10s %14" PRIu64 "\n", label,
				 s->seg_hist[b]);
	}
}

/*
 * Call fn for the vbd's counters and, among them, the drivers' own
 * (ops->counters): after backend_merges, where tap-ctl stats has always
 * shown sort's.  The text and the JSON list them alike.
 */
static void each_counter(const struct td_vbd_stats *s,
			 void (*fn)(void *out, const char *name, uint64_t v),
			 void *out)
{
	for (unsigned int i = 0; i < TD_STAT_COUNT; i++) {
		if (i == TD_STAT_MERGED_IOV_ENTRIES)
			for (unsigned int k = 0; k < s->nr_driver_counters; k++)
				fn(out, s->driver_counters[k].name,
				   s->driver_counters[k].value);
		fn(out, td_stat_name(i), s->counters[i]);
	}
}

static void text_counter(void *sb, const char *name, uint64_t v)
{
	td_strbuf_printf(sb, "  %-24s %14" PRIu64 "\n", name, v);
}

static void text_counters(const struct td_report *r, struct td_strbuf *sb)
{
	const struct td_vbd_stats *s = &r->stats;

	td_strbuf_puts(sb, "\ndriver counters\n");
	each_counter(s, text_counter, sb);
	/* sort_merges: the sort driver's counter (0 without it). */
	td_strbuf_printf(sb,
			 "  (%" PRIu64 " pieces became %" PRIu64
			 " backend submissions; %" PRIu64
			 " merged in the backend, %" PRIu64 " by sort)\n",
			 s->pieces, s->counters[TD_STAT_BACKEND_SUBMITS],
			 s->counters[TD_STAT_BACKEND_MERGES],
			 td_vbd_driver_counter(s, "sort_merges"));
}

static void text_latency(const struct td_report *r, struct td_strbuf *sb)
{
	td_strbuf_printf(sb, "\nlatency (us, all ops, %" PRIu64 " I/Os):",
			 total_latency_samples(&r->stats));
	for (unsigned int i = 0; i < NR_PERCENTILES; i++)
		td_strbuf_printf(
			sb, " %s %" PRIu64, percentiles[i].label,
			td_lat_percentile(r->stats.lat_hist, percentiles[i].p));
	td_strbuf_puts(sb, "\n");
}

/* The server of kind ops, or NULL when none serves. */
static struct td_frontend *report_server(const struct td_report *r,
					 const struct td_frontend_ops *ops)
{
	for (unsigned int i = 0; i < r->nr_servers; i++)
		if (r->servers[i]->ops == ops)
			return r->servers[i];
	return NULL;
}

static void text_frontends(const struct td_report *r, struct td_strbuf *sb)
{
	struct td_frontend *fe;

	for (unsigned int k = 0; r->kinds && r->kinds[k]; k++)
		if ((fe = report_server(r, r->kinds[k])))
			td_frontend_report_text(fe, sb);
}

static void text_process(const struct td_report *r, struct td_strbuf *sb)
{
	uint64_t reqs = total_requests(&r->stats);
	uint64_t cpu = r->cpu_user_us + r->cpu_sys_us;

	text_frontends(r, sb);
	td_strbuf_printf(sb,
			 "\ncpu: user %" PRIu64 " us, sys %" PRIu64
			 " us, uptime %" PRIu64 ".%03" PRIu64 " s",
			 r->cpu_user_us, r->cpu_sys_us, r->uptime_us / US_PER_S,
			 r->uptime_us % US_PER_S / 1000);
	if (reqs)
		td_strbuf_printf(sb, ", %.2f us of cpu per request",
				 (double)cpu / (double)reqs);
	td_strbuf_puts(sb, "\n");
	if (r->log_dropped)
		td_strbuf_printf(sb, "log: %" PRIu64 " lines dropped\n",
				 r->log_dropped);
}

int td_format_stats_text(const struct td_report *r, struct td_strbuf *sb)
{
	td_strbuf_printf(sb, "tapdisk %d, vbd %s (%s), chain %s\n\n", r->pid,
			 r->name, r->state, r->chain);
	text_ops(r, sb);
	text_segments(r, sb);
	text_counters(r, sb);
	text_latency(r, sb);
	if (r->vbd && td_vbd_stages_shown(r->vbd))
		td_vbd_report_stages_text(r->vbd, sb);
	if (r->vbd)
		td_vbd_report_drivers_text(r->vbd, sb);
	text_process(r, sb);
	return td_strbuf_error(sb);
}

/* --- stats as JSON ---------------------------------------------------------- */

static void json_ops(const struct td_report *r, struct td_json *j)
{
	const struct td_vbd_stats *s = &r->stats;

	td_json_begin_object(j, "ops");
	for (unsigned int op = 0; op < TD_OP_COUNT; op++) {
		td_json_begin_object(j, td_op_name(op));
		td_json_u64(j, "requests", s->reqs[op]);
		td_json_u64(j, "bytes", s->bytes[op]);
		td_json_u64(j, "errors", s->errors[op]);
		td_json_end_object(j);
	}
	td_json_end_object(j);
	td_json_u64(j, "requests_total", total_requests(s));
	td_json_u64(j, "inflight", s->inflight);
	td_json_u64(j, "pieces", s->pieces);
	td_json_u64(j, "waits", s->waits);
}

static void json_counter(void *j, const char *name, uint64_t v)
{
	td_json_u64(j, name, v);
}

static void json_histograms(const struct td_report *r, struct td_json *j)
{
	const struct td_vbd_stats *s = &r->stats;

	td_json_begin_array(j, "segments_per_request");
	for (unsigned int b = 0; b < TD_SEG_BUCKETS; b++) {
		td_json_begin_object(j, NULL);
		td_json_u64(j, "min", td_seg_bucket_min(b));
		td_json_u64(j, "max", td_seg_bucket_max(b));
		td_json_u64(j, "count", s->seg_hist[b]);
		td_json_end_object(j);
	}
	td_json_end_array(j);
	td_json_begin_object(j, "counters");
	each_counter(s, json_counter, j);
	td_json_end_object(j);
	td_json_begin_object(j, "latency_us");
	td_json_u64(j, "count", total_latency_samples(s));
	for (unsigned int i = 0; i < NR_PERCENTILES; i++)
		td_json_u64(j, percentiles[i].key,
			    td_lat_percentile(s->lat_hist, percentiles[i].p));
	td_json_end_object(j);
	/* The non-empty buckets: count of I/Os of at most max_us (and more
	 * than the previous bucket's). */
	td_json_begin_array(j, "latency_buckets_us");
	for (unsigned int b = 0; b < TD_LAT_BUCKETS; b++) {
		if (!s->lat_hist[b])
			continue;
		td_json_begin_object(j, NULL);
		td_json_u64(j, "max_us", td_lat_bucket_max_us(b));
		td_json_u64(j, "count", s->lat_hist[b]);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

/* Every kind's object, in the table's order; null when none serves. */
static void json_frontends(const struct td_report *r, struct td_json *j)
{
	struct td_frontend *fe;

	for (unsigned int k = 0; r->kinds && r->kinds[k]; k++) {
		const char *name = r->kinds[k]->name;

		if (!(fe = report_server(r, r->kinds[k]))) {
			td_json_null(j, name);
			continue;
		}
		td_json_begin_object(j, name);
		td_frontend_report_json(fe, j);
		td_json_end_object(j);
	}
}

static void json_process(const struct td_report *r, struct td_json *j)
{
	json_frontends(r, j);
	td_json_begin_object(j, "cpu_us");
	td_json_u64(j, "user", r->cpu_user_us);
	td_json_u64(j, "sys", r->cpu_sys_us);
	td_json_end_object(j);
	td_json_u64(j, "uptime_us", r->uptime_us);
	td_json_u64(j, "log_lines_dropped", r->log_dropped);
}

int td_format_stats_json(const struct td_report *r, struct td_strbuf *sb)
{
	struct td_json j;

	td_json_init(&j, sb);
	td_json_begin_object(&j, NULL);
	td_json_i64(&j, "pid", r->pid);
	td_json_str(&j, "name", r->name);
	td_json_str(&j, "state", r->state);
	td_json_str(&j, "chain", r->chain);
	json_ops(r, &j);
	json_histograms(r, &j);
	if (r->vbd) {
		td_vbd_report_stages_json(r->vbd, &j);
		td_vbd_report_drivers_json(r->vbd, &j);
	}
	json_process(r, &j);
	td_json_end_object(&j);
	return td_json_finish(&j);
}

/* --- stats as Prometheus text ------------------------------------------------ */

/* Label values are quoted: escape backslash, quote and newline. */
static void metric_label(struct td_strbuf *sb, const char *value)
{
	for (const char *c = value; *c; c++) {
		if (*c == '\\' || *c == '"')
			td_strbuf_printf(sb, "\\%c", *c);
		else if (*c == '\n')
			td_strbuf_puts(sb, "\\n");
		else
			td_strbuf_append(sb, c, 1);
	}
}

static void metric_family(struct td_strbuf *sb, const char *name,
			  const char *type, const char *help)
{
	td_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
			 type);
}

/* NAME{disk="D"[,EXTRA]} VALUE */
static void metric_sample(struct td_strbuf *sb, const char *name,
			  const char *disk, const char *extra, uint64_t v)
{
	td_strbuf_printf(sb, "%s{disk=\"", name);
	metric_label(sb, disk);
	td_strbuf_printf(sb, "\"%s%s} %" PRIu64 "\n", extra ? "," : "",
			 extra ? extra : "", v);
}

static void metrics_ops(const struct td_report *r, struct td_strbuf *sb)
{
	static const struct {
		const char *name, *help;
		size_t offset;
	} per_op[] = {
		{"tapstripe_io_requests_total", "I/Os completed, by op",
		 offsetof(struct td_vbd_stats, reqs)},
		{"tapstripe_io_bytes_total", "Bytes the completed I/Os covered",
		 offsetof(struct td_vbd_stats, bytes)},
		{"tapstripe_io_errors_total", "I/Os completed with an error",
		 offsetof(struct td_vbd_stats, errors)},
	};
	char op[64];

	for (size_t f = 0; f < sizeof(per_op) / sizeof(per_op[0]); f++) {
		const uint64_t *v = (const uint64_t *)((const char *)&r->stats +
						       per_op[f].offset);

		metric_family(sb, per_op[f].name, "counter", per_op[f].help);
		for (unsigned int o = 0; o < TD_OP_COUNT; o++) {
			snprintf(op, sizeof(op), "op=\"%s\"", td_op_name(o));
			metric_sample(sb, per_op[f].name, r->name, op, v[o]);
		}
	}
	metric_family(sb, "tapstripe_io_inflight", "gauge",
		      "I/Os accepted and not completed");
	metric_sample(sb, "tapstripe_io_inflight", r->name, NULL,
		      r->stats.inflight);
}

/*
 * Cumulative buckets at each power of two of microseconds (the last
 * sub-bucket of each group of TD_LAT_SUB), le in seconds.  No _sum: the
 * histogram keeps no total of latencies.
 */
static void metrics_latency(const struct td_report *r, struct td_strbuf *sb)
{
	uint64_t cum = 0, max_us;
	char le[64];

	metric_family(sb, "tapstripe_io_latency_seconds", "histogram",
		      "I/O latency, all ops (buckets of the tapdisk's "
		      "histogram)");
	for (unsigned int b = 0; b < TD_LAT_BUCKETS; b++) {
		cum += r->stats.lat_hist[b];
		if (b % TD_LAT_SUB != TD_LAT_SUB - 1 || b == TD_LAT_BUCKETS - 1)
			continue;
		max_us = td_lat_bucket_max_us(b);
		snprintf(le, sizeof(le), "le=\"%" PRIu64 ".%06" PRIu64 "\"",
			 max_us / US_PER_S, max_us % US_PER_S);
		metric_sample(sb, "tapstripe_io_latency_seconds_bucket",
			      r->name, le, cum);
	}
	metric_sample(sb, "tapstripe_io_latency_seconds_bucket", r->name,
		      "le=\"+Inf\"", cum);
	metric_sample(sb, "tapstripe_io_latency_seconds_count", r->name, NULL,
		      cum);
}

struct metric_ctx {
	struct td_strbuf *sb;
	const char *disk;
};

static void metric_counter_cb(void *out, const char *name, uint64_t v)
{
	struct metric_ctx *ctx = out;
	char label[128];

	snprintf(label, sizeof(label), "counter=\"%s\"", name);
	metric_sample(ctx->sb, "tapstripe_driver_events_total", ctx->disk,
		      label, v);
}

/* The drivers' families (report_metrics ops), then the frontends'. */
static void metrics_extensions(const struct td_report *r, struct td_strbuf *sb)
{
	struct td_strbuf labels;
	const char *l;

	td_strbuf_init(&labels);
	td_strbuf_puts(&labels, "disk=\"");
	metric_label(&labels, r->name);
	td_strbuf_puts(&labels, "\"");
	if (td_strbuf_error(&labels)) {
		td_strbuf_free(&labels);
		return;
	}
	l = td_strbuf_str(&labels);
	if (r->vbd)
		td_vbd_report_drivers_metrics(r->vbd, l, sb);
	for (unsigned int i = 0; i < r->nr_servers; i++)
		td_frontend_report_metrics(r->servers[i], l, sb);
	td_strbuf_free(&labels);
}

int td_format_stats_metrics(const struct td_report *r, struct td_strbuf *sb)
{
	struct metric_ctx ctx = {sb, r->name};

	metrics_ops(r, sb);
	metrics_latency(r, sb);
	metric_family(sb, "tapstripe_driver_events_total", "counter",
		      "The drivers' counters (tap-ctl stats, driver "
		      "counters)");
	each_counter(&r->stats, metric_counter_cb, &ctx);
	metric_family(sb, "tapstripe_uptime_seconds", "gauge",
		      "Seconds since the tapdisk started");
	metric_sample(sb, "tapstripe_uptime_seconds", r->name, NULL,
		      r->uptime_us / US_PER_S);
	metrics_extensions(r, sb);
	return td_strbuf_error(sb);
}
