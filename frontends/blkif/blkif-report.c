/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blkif-report.c - a ring's counters in "tap-ctl stats", as text and JSON,
 * for the frontends that serve blkif rings (shm, Xen).  The keys and the
 * wording are parsed by tools: never change them.
 */
#include "config.h"

#include <inttypes.h>

#include "frontends/blkif/blkif.h"

/* The blkif operations a ring counts (BLKIF_STAT_*). */
static const struct {
	unsigned int op;
	const char *name;
} ring_ops[] = {
	{BLKIF_OP_READ, "read"},
	{BLKIF_OP_WRITE, "write"},
	{BLKIF_OP_WRITE_BARRIER, "write_barrier"},
	{BLKIF_OP_FLUSH_DISKCACHE, "flush_diskcache"},
	{BLKIF_OP_DISCARD, "discard"},
	{BLKIF_STAT_OP_OTHER, "other"},
};
#define NR_RING_OPS (sizeof(ring_ops) / sizeof(ring_ops[0]))

void blkif_ring_report_text(const struct blkif_ring_stats *ring,
			    struct td_strbuf *sb)
{
	td_strbuf_puts(sb, "ring requests:");
	for (unsigned int i = 0; i < NR_RING_OPS; i++)
		td_strbuf_printf(sb, "%s %s %" PRIu64, i ? "," : "",
				 ring_ops[i].name, ring->reqs[ring_ops[i].op]);
	td_strbuf_printf(sb,
			 "; %" PRIu64 " indirect, %" PRIu64
			 " segments\nring answers: %" PRIu64
			 " refused as bad, %" PRIu64 " unsupported, %" PRIu64
			 " I/O errors, %" PRIu64 " notifications, %" PRIu64
			 " indirect-buffer waits, %" PRIu64 " rings given up\n",
			 ring->indirect_reqs, ring->segments, ring->bad_reqs,
			 ring->unsupported, ring->io_errors,
			 ring->notifications, ring->indirect_waits,
			 ring->protocol_errors);
}

void blkif_ring_report_json(const struct blkif_ring_stats *ring,
			    struct td_json *j)
{
	uint64_t total = 0;

	td_json_begin_object(j, "ring");
	td_json_begin_object(j, "requests");
	for (unsigned int i = 0; i < NR_RING_OPS; i++) {
		td_json_u64(j, ring_ops[i].name, ring->reqs[ring_ops[i].op]);
		total += ring->reqs[ring_ops[i].op];
	}
	td_json_end_object(j);
	td_json_u64(j, "requests_total", total);
	td_json_u64(j, "indirect_requests", ring->indirect_reqs);
	td_json_u64(j, "segments", ring->segments);
	td_json_u64(j, "bad_requests", ring->bad_reqs);
	td_json_u64(j, "unsupported", ring->unsupported);
	td_json_u64(j, "io_errors", ring->io_errors);
	td_json_u64(j, "protocol_errors", ring->protocol_errors);
	td_json_u64(j, "notifications", ring->notifications);
	td_json_u64(j, "indirect_waits", ring->indirect_waits);
	td_json_u64(j, "polled_requests", ring->polled_reqs);
	td_json_end_object(j);
}

uint64_t blkif_ring_stats_requests(const struct blkif_ring_stats *ring)
{
	uint64_t total = 0;

	for (unsigned int i = 0; i < NR_RING_OPS; i++)
		total += ring->reqs[ring_ops[i].op];
	return total;
}

void blkif_ring_stats_add(struct blkif_ring_stats *sum,
			  const struct blkif_ring_stats *s)
{
	uint64_t *d = (uint64_t *)sum;
	const uint64_t *v = (const uint64_t *)s;

	_Static_assert(sizeof(*s) % sizeof(uint64_t) == 0,
		       "blkif_ring_stats holds only uint64_t counters");
	for (size_t i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		d[i] += v[i];
}

void blkif_queue_report_add(struct blkif_queue_report *sum,
			    const struct blkif_queue_report *q)
{
	sum->in_flight += q->in_flight;
	sum->kicks += q->kicks;
	blkif_ring_stats_add(&sum->ring, &q->ring);
}

void blkif_queue_report_text(const struct blkif_queue_report *q, uint32_t n,
			     struct td_strbuf *sb)
{
	for (uint32_t i = 0; i < n; i++)
		td_strbuf_printf(
			sb,
			"ring %" PRIu32 ": %" PRIu64 " requests (%" PRIu64
			" reads, %" PRIu64 " writes), %" PRIu64
			" segments, %" PRIu64 " in flight, %" PRIu64
			" polled, %" PRIu64 " kicks, %" PRIu64
			" notifications, %" PRIu64 " I/O errors\n",
			q[i].queue, blkif_ring_stats_requests(&q[i].ring),
			q[i].ring.reqs[BLKIF_OP_READ],
			q[i].ring.reqs[BLKIF_OP_WRITE], q[i].ring.segments,
			q[i].in_flight, q[i].ring.polled_reqs, q[i].kicks,
			q[i].ring.notifications, q[i].ring.io_errors);
}

void blkif_queue_report_json(const struct blkif_queue_report *q, uint32_t n,
			     struct td_json *j)
{
	td_json_begin_array(j, "queues");
	for (uint32_t i = 0; i < n; i++) {
		const struct blkif_ring_stats *r = &q[i].ring;

		td_json_begin_object(j, NULL);
		td_json_u64(j, "queue", q[i].queue);
		td_json_u64(j, "requests_total", blkif_ring_stats_requests(r));
		td_json_u64(j, "read", r->reqs[BLKIF_OP_READ]);
		td_json_u64(j, "write", r->reqs[BLKIF_OP_WRITE]);
		td_json_u64(j, "segments", r->segments);
		td_json_u64(j, "in_flight", q[i].in_flight);
		td_json_u64(j, "polled_requests", r->polled_reqs);
		td_json_u64(j, "kicks", q[i].kicks);
		td_json_u64(j, "notifications", r->notifications);
		td_json_u64(j, "io_errors", r->io_errors);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

/* The families of blkif_queue_report_metrics, in this order. */
enum { QM_REQUESTS, QM_SEGMENTS, QM_INFLIGHT, QM_POLLED, QM_KICKS, QM_NOTIFY };
static const struct {
	const char *name, *type, *help;
} queue_metrics[] = {
	[QM_REQUESTS] = {"tapstripe_ring_requests_total", "counter",
			 "Requests taken off the ring, by ring"},
	[QM_SEGMENTS] = {"tapstripe_ring_segments_total", "counter",
			 "Segments of those requests"},
	[QM_INFLIGHT] = {"tapstripe_ring_inflight", "gauge",
			 "Requests taken and not answered yet"},
	[QM_POLLED] = {"tapstripe_ring_polled_requests_total", "counter",
		       "Requests the poller took (tapdisk --poll-us)"},
	[QM_KICKS] = {"tapstripe_ring_kicks_total", "counter",
		      "Notifications the frontend sent on the ring"},
	[QM_NOTIFY] = {"tapstripe_ring_notifications_total", "counter",
		       "Notifications sent to the frontend"},
};

static uint64_t queue_metric(const struct blkif_queue_report *q, unsigned int m)
{
	switch (m) {
	case QM_REQUESTS:
		return blkif_ring_stats_requests(&q->ring);
	case QM_SEGMENTS:
		return q->ring.segments;
	case QM_INFLIGHT:
		return q->in_flight;
	case QM_POLLED:
		return q->ring.polled_reqs;
	case QM_KICKS:
		return q->kicks;
	default:
		return q->ring.notifications;
	}
}

void blkif_queue_report_metrics(const struct blkif_queue_report *q, uint32_t n,
				const char *labels, const char *frontend,
				struct td_strbuf *sb)
{
	if (!n)
		return;
	for (unsigned int m = 0;
	     m < sizeof(queue_metrics) / sizeof(queue_metrics[0]); m++) {
		const char *name = queue_metrics[m].name;

		td_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name,
				 queue_metrics[m].help, name,
				 queue_metrics[m].type);
		for (uint32_t i = 0; i < n; i++)
			td_strbuf_printf(sb,
					 "%s{%s,frontend=\"%s\",ring=\"%" PRIu32
					 "\"} %" PRIu64 "\n",
					 name, labels, frontend, q[i].queue,
					 queue_metric(&q[i], m));
	}
}
