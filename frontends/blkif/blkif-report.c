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
