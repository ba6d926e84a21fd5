/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-report.c - what td-front prints: the report in text (for
 * people: binary multiples, KiB/MiB) or JSON (for scripts: exact bytes
 * and microseconds), and the progress line.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "tapdisk/stats-format.h"
#include "tools/td-front/td-front.h"

#define MIB		    (1024.0 * 1024.0)
#define NS_PER_S	    1e9
#define PROGRESS_AFTER_NS   3000000000ull /* "runs longer than a few s" */
#define PROGRESS_PERIOD_NS  1000000000ull
#define PROGRESS_LINE_WIDTH 78

static const struct {
	double p;
	const char *label, *key; /* text, JSON */
} pcts[] = {
	{50.0, "p50", "p50"},
	{90.0, "p90", "p90"},
	{99.0, "p99", "p99"},
	{99.9, "p99.9", "p99_9"},
};
#define NR_PCTS (sizeof(pcts) / sizeof(pcts[0]))

static const char *const rw_names[] = {"read", "write", "mixed"};
static const char *const pattern_names[] = {"seq", "rand", "interleave"};
static const char *const op_names[TDF_NR_OPS] = {"read", "write", "flush",
						 "discard", "write_zeroes"};

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static uint64_t total_ios(const struct front_result *res)
{
	return res->ios[0] + res->ios[1];
}

static uint64_t backend_requests(const struct tdf_backend_stats *b)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < TDF_NR_OPS; i++)
		n += b->requests[i];
	return n;
}

/* --- text --------------------------------------------------------------------- */

static void text_lat(const char *what, const struct front_lat *l)
{
	printf("%-10s us:", what);
	for (unsigned int i = 0; i < NR_PCTS; i++)
		printf(" %s %" PRIu64, pcts[i].label,
		       td_lat_percentile(l->hist, pcts[i].p));
	printf(" max %" PRIu64 " mean %.1f\n", l->max_us,
	       ratio(l->sum_us, l->count));
}

static void text_setup(const struct front_opts *o, struct tdf_dev *dev,
		       const struct front_result *res)
{
	const struct tdf_info *i = tdf_get_info(dev);
	char bs[TD_HUMAN_BYTES_MAX];

	printf("td-front: %s (tapdisk %d)\n", o->shm, (int)i->backend_pid);
	if (i->nr_queues > 1)
		printf("rings:     %" PRIu32 ", each as below\n", i->nr_queues);
	printf("ring:      order %" PRIu32 " (%" PRIu32 " slots), %" PRIu32
	       " segments per request (%s), pool %" PRIu32 " + %" PRIu32
	       " pages\n",
	       i->ring_order, i->ring_slots, i->max_segments,
	       i->max_segments > TDF_DIRECT_SEGMENTS ? "indirect" : "direct",
	       i->data_pages, i->indirect_pages);
	printf("workload:  %s%s %s", o->verify ? "verify " : "",
	       pattern_names[o->pattern],
	       o->pattern == FRONT_INTERLEAVE ? "write" : rw_names[o->rw]);
	for (unsigned int b = 0; b < o->nr_bs; b++)
		printf("%s%s", b ? "," : " ",
		       td_format_bytes(o->bs[b], bs, sizeof(bs)));
	printf(", QD %" PRIu32 ", %.2f s\n", o->qd, res->elapsed_s);
}

static void text_io(const struct front_result *res)
{
	char rb[TD_HUMAN_BYTES_MAX], wb[TD_HUMAN_BYTES_MAX];
	uint64_t bytes = res->bytes[0] + res->bytes[1];

	printf("I/O:       %.0f IOPS, %.2f MiB/s; read %" PRIu64
	       " I/Os (%s), write %" PRIu64 " I/Os (%s)\n",
	       res->elapsed_s > 0 ? (double)total_ios(res) / res->elapsed_s : 0,
	       res->elapsed_s > 0 ? (double)bytes / MIB / res->elapsed_s : 0,
	       res->ios[0], td_format_bytes(res->bytes[0], rb, sizeof(rb)),
	       res->ios[1], td_format_bytes(res->bytes[1], wb, sizeof(wb)));
	text_lat("latency", &res->lat);
	if (res->io_errors)
		printf("errors:    %" PRIu64
		       " I/Os failed, the first with %s\n",
		       res->io_errors, strerror(-res->first_error));
}

static void text_ring(const struct front_result *res)
{
	const struct tdf_stats *s = &res->ring;

	printf("frontend:  %" PRIu64 " requests (%" PRIu64
	       " indirect), %.2f per I/O, %.2f segments per request; %" PRIu64
	       " pushes, %" PRIu64 " notifications sent (%.3f per request), "
	       "%" PRIu64 " received; cpu %.2f us per I/O\n",
	       s->requests, s->indirect_requests, ratio(s->requests, s->ios),
	       ratio(s->segments, s->requests), s->pushes, s->kicks,
	       ratio(s->kicks, s->requests), s->wakeups,
	       ratio(res->cpu_us, s->ios));
}

static void text_backend(const struct front_result *res)
{
	const struct tdf_backend_stats *b = &res->backend;
	uint64_t reqs = backend_requests(b);

	if (!res->have_backend) {
		printf("backend:   no counters (%s)\n", res->backend_why);
		return;
	}
	printf("backend:   %" PRIu64 " requests, %.2f per I/O; %" PRIu64
	       " backend submissions (%.2f per request); cpu %.2f us per "
	       "request\n",
	       reqs, ratio(reqs, total_ios(res)), b->backend_submits,
	       ratio(b->backend_submits, reqs), ratio(b->cpu_us, reqs));
	printf("           segments per request:");
	for (unsigned int k = 0; k < TDF_SEG_BUCKETS; k++)
		if (b->seg_hist[k])
			printf(" %" PRIu32 "-%" PRIu32 ": %" PRIu64,
			       td_seg_bucket_min(k), td_seg_bucket_max(k),
			       b->seg_hist[k]);
	printf("\n");
}

static void text_verify(const struct front_opts *o,
			const struct front_result *res)
{
	if (!res->mismatches && o->verify_zeroes) {
		printf("verify:    ok, %" PRIu64 " bytes read back as zeroes\n",
		       res->verified_bytes);
		return;
	}
	if (!res->mismatches) {
		printf("verify:    ok, %" PRIu64
		       " bytes checked, generation %" PRIu64 " on the disk\n",
		       res->verified_bytes, res->last_generation);
		return;
	}
	printf("verify:    FAILED, %" PRIu64 " mismatching reads%s\n",
	       res->mismatches, o->verify_zeroes ? " (zeroes expected)" : "");
	for (uint64_t i = 0; i < res->mismatches && i < FRONT_MAX_MISMATCHES;
	     i++) {
		const struct front_mismatch *m = &res->mismatch[i];

		printf("  sector at %" PRIu64 ": expected generation %" PRIu64
		       ", found %s offset %" PRIu64 " generation %" PRIu64
		       " seed %#" PRIx64 "\n",
		       m->m.offset, m->generation,
		       m->m.bad_magic ? "no pattern;" : "", m->m.found_offset,
		       m->m.found_generation, m->m.found_seed);
	}
}

static void text_rounds(const struct front_result *res)
{
	const struct tdf_backend_stats *b = &res->backend;

	printf("rounds:    %" PRIu32 " of %d x 4 KiB interleaved\n",
	       res->rounds, FRONT_INTERLEAVE_BLOCKS);
	text_lat("round", &res->round);
	printf("per round: %.2f ring requests",
	       ratio(res->ring.requests, res->rounds));
	if (res->have_backend)
		printf(", %.2f backend requests, %.2f backend submissions",
		       ratio(backend_requests(b), res->rounds),
		       ratio(b->backend_submits, res->rounds));
	printf("\n");
}

void front_report_text(const struct front_opts *o, struct tdf_dev *dev,
		       const struct front_result *res)
{
	text_setup(o, dev, res);
	text_io(res);
	text_ring(res);
	text_backend(res);
	if (o->pattern == FRONT_INTERLEAVE)
		text_rounds(res);
	if (o->verify)
		text_verify(o, res);
	if (res->flushed)
		printf("flush:     done\n");
}

/* --- JSON ------------------------------------------------------------------------ */

static void json_lat(struct td_json *j, const char *key,
		     const struct front_lat *l)
{
	td_json_begin_object(j, key);
	td_json_u64(j, "count", l->count);
	for (unsigned int i = 0; i < NR_PCTS; i++)
		td_json_u64(j, pcts[i].key,
			    td_lat_percentile(l->hist, pcts[i].p));
	td_json_u64(j, "max", l->max_us);
	td_json_u64(j, "mean", l->count ? l->sum_us / l->count : 0);
	td_json_end_object(j);
}

static void json_setup(struct td_json *j, const struct front_opts *o,
		       struct tdf_dev *dev)
{
	const struct tdf_info *i = tdf_get_info(dev);

	td_json_str(j, "shm", o->shm);
	td_json_i64(j, "backend_pid", i->backend_pid);
	td_json_u64(j, "disk_bytes", i->size_bytes);
	td_json_u64(j, "ring_order", i->ring_order);
	td_json_u64(j, "ring_slots", i->ring_slots);
	td_json_u64(j, "max_segments", i->max_segments);
	td_json_u64(j, "queues", i->nr_queues);
	td_json_str(j, "pattern", pattern_names[o->pattern]);
	td_json_str(j, "rw",
		    o->pattern == FRONT_INTERLEAVE ? "write" : rw_names[o->rw]);
	td_json_u64(j, "rwmix_read", o->rwmix_read);
	td_json_begin_array(j, "bs");
	for (unsigned int b = 0; b < o->nr_bs; b++)
		td_json_u64(j, NULL, o->bs[b]);
	td_json_end_array(j);
	td_json_u64(j, "qd", o->qd);
	td_json_bool(j, "verify", o->verify);
}

static void json_io(struct td_json *j, const struct front_result *res)
{
	uint64_t bytes = res->bytes[0] + res->bytes[1];
	double t = res->elapsed_s > 0 ? res->elapsed_s : 1;

	td_json_u64(j, "elapsed_us", (uint64_t)(res->elapsed_s * 1e6));
	td_json_u64(j, "ios", total_ios(res));
	td_json_u64(j, "iops", (uint64_t)((double)total_ios(res) / t + 0.5));
	td_json_u64(j, "bytes_per_s", (uint64_t)((double)bytes / t + 0.5));
	td_json_u64(j, "read_ios", res->ios[0]);
	td_json_u64(j, "read_bytes", res->bytes[0]);
	td_json_u64(j, "write_ios", res->ios[1]);
	td_json_u64(j, "write_bytes", res->bytes[1]);
	td_json_u64(j, "io_errors", res->io_errors);
	json_lat(j, "latency_us", &res->lat);
	td_json_begin_object(j, "frontend");
	td_json_u64(j, "requests", res->ring.requests);
	td_json_u64(j, "indirect_requests", res->ring.indirect_requests);
	td_json_u64(j, "segments", res->ring.segments);
	td_json_u64(j, "pushes", res->ring.pushes);
	td_json_u64(j, "notifications_sent", res->ring.kicks);
	td_json_u64(j, "notifications_received", res->ring.wakeups);
	td_json_u64(j, "cpu_us", res->cpu_us);
	td_json_u64(j, "poll_hits", res->ring.poll_hits);
	td_json_u64(j, "poll_backoffs", res->ring.poll_backoffs);
	td_json_u64(j, "poll_window_us", res->ring.poll_window_us);
	td_json_end_object(j);
}

static void json_backend(struct td_json *j, const struct front_result *res)
{
	const struct tdf_backend_stats *b = &res->backend;

	if (!res->have_backend) {
		td_json_null(j, "backend");
		return;
	}
	td_json_begin_object(j, "backend");
	td_json_begin_object(j, "requests");
	for (unsigned int i = 0; i < TDF_NR_OPS; i++)
		td_json_u64(j, op_names[i], b->requests[i]);
	td_json_end_object(j);
	td_json_u64(j, "requests_total", backend_requests(b));
	td_json_u64(j, "pieces", b->pieces);
	td_json_u64(j, "backend_submits", b->backend_submits);
	td_json_u64(j, "backend_merges", b->backend_merges);
	td_json_u64(j, "sort_merges", b->sort_merges);
	td_json_begin_array(j, "segments_per_request");
	for (unsigned int k = 0; k < TDF_SEG_BUCKETS; k++) {
		td_json_begin_object(j, NULL);
		td_json_u64(j, "min", td_seg_bucket_min(k));
		td_json_u64(j, "max", td_seg_bucket_max(k));
		td_json_u64(j, "count", b->seg_hist[k]);
		td_json_end_object(j);
	}
	td_json_end_array(j);
	td_json_u64(j, "cpu_us", b->cpu_us);
	td_json_u64(j, "ring_requests", b->ring_requests);
	td_json_u64(j, "ring_segments", b->ring_segments);
	td_json_u64(j, "ring_notifications", b->ring_notifications);
	td_json_u64(j, "kicks", b->kicks);
	td_json_u64(j, "ring_polled_requests", b->ring_polled);
	td_json_end_object(j);
}

static void json_extra(struct td_json *j, const struct front_opts *o,
		       const struct front_result *res)
{
	if (o->pattern == FRONT_INTERLEAVE) {
		td_json_begin_object(j, "interleave");
		td_json_u64(j, "rounds", res->rounds);
		json_lat(j, "round_us", &res->round);
		td_json_end_object(j);
	}
	if (o->verify) {
		td_json_begin_object(j, "verify");
		td_json_u64(j, "verified_bytes", res->verified_bytes);
		td_json_u64(j, "mismatches", res->mismatches);
		td_json_u64(j, "generation", res->last_generation);
		td_json_u64(j, "seed", o->seed);
		td_json_end_object(j);
	}
	td_json_bool(j, "flushed", res->flushed);
}

int front_report_json(const struct front_opts *o, struct tdf_dev *dev,
		      const struct front_result *res)
{
	struct td_strbuf sb;
	struct td_json j;
	int err;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	json_setup(&j, o, dev);
	json_io(&j, res);
	json_backend(&j, res);
	json_extra(&j, o, res);
	td_json_end_object(&j);
	err = td_json_finish(&j);
	if (!err)
		fputs(td_strbuf_str(&sb), stdout);
	td_strbuf_free(&sb);
	return err;
}

/* --- progress ---------------------------------------------------------------------- */

void front_progress(const struct front_opts *o, const struct front_result *res,
		    uint64_t start_ns, bool last)
{
	static uint64_t shown_ns, shown_ios, shown_bytes;
	static bool shown;
	uint64_t now = td_now_ns(), ios = total_ios(res);
	uint64_t bytes = res->bytes[0] + res->bytes[1];
	double dt;

	if (o->progress == FRONT_PROGRESS_OFF ||
	    (o->progress == FRONT_PROGRESS_AUTO && !isatty(STDERR_FILENO)))
		return;
	if (last) {
		if (shown)
			fprintf(stderr, "\n");
		shown = false;
		return;
	}
	if (now - start_ns < PROGRESS_AFTER_NS ||
	    now - shown_ns < PROGRESS_PERIOD_NS)
		return;
	if (!shown_ns)
		shown_ns = start_ns;
	dt = (double)(now - shown_ns) / NS_PER_S;
	fprintf(stderr, "\r%-*s", PROGRESS_LINE_WIDTH, "");
	fprintf(stderr,
		"\r%7.1f s  %10.0f IOPS  %9.1f MiB/s  %" PRIu64 " I/Os%s",
		(double)(now - start_ns) / NS_PER_S,
		(double)(ios - shown_ios) / dt,
		(double)(bytes - shown_bytes) / MIB / dt, ios,
		res->io_errors ? "  (errors)" : "");
	shown = true;
	shown_ns = now;
	shown_ios = ios;
	shown_bytes = bytes;
}
