/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stages.c - stage timing of the I/O path (stages.h): the sums, switching
 * them on and off, and their report for tap-ctl stages and stats.
 *
 * The cost while off: td_vbd_submit tests vbd->stages.on once per I/O,
 * the aio driver calls td_vbd_stages_clock once per io_submit and blkif
 * calls td_vbd_stages_seen once per request and td_vbd_stages_clock once
 * per response batch; each returns 0 after one test.
 */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "tapdisk/vbd-int.h"
#include "tapdisk/vbd.h"

static const char *const stage_names[TD_STAGE_COUNT] = {
	[TD_STAGE_PARSE] = "parse",	  [TD_STAGE_ISSUE] = "issue",
	[TD_STAGE_SUBMIT] = "submit",	  [TD_STAGE_DISK] = "disk",
	[TD_STAGE_CALLBACK] = "callback", [TD_STAGE_WAIT] = "wait",
	[TD_STAGE_NOTIFY] = "notify",
};

const char *td_stage_name(enum td_stage stage)
{
	return (unsigned int)stage < TD_STAGE_COUNT ? stage_names[stage] : "?";
}

void td_stages_account(struct td_vbd_stages *st, enum td_op op,
		       uint64_t *stamps, uint64_t notify_ns)
{
	uint64_t residence;

	if ((unsigned int)op >= TD_OP_COUNT)
		return;
	for (unsigned int i = 1; i < TD_STAMP_COUNT; i++) {
		if (stamps[i] < stamps[i - 1])
			stamps[i] = stamps[i - 1];
		st->sum_ns[op][i - 1] += stamps[i] - stamps[i - 1];
	}
	st->sum_ns[op][TD_STAGE_NOTIFY] += notify_ns;
	residence = stamps[TD_STAMP_COUNT - 1] - stamps[0] + notify_ns;
	if (residence > st->max_ns[op])
		st->max_ns[op] = residence;
	st->count[op]++;
}

uint64_t td_stages_residence_ns(const struct td_vbd_stages *st, enum td_op op)
{
	uint64_t sum = 0;

	for (unsigned int s = 0; s < TD_STAGE_COUNT; s++)
		sum += st->sum_ns[op][s];
	return sum;
}

/* --- the vbd's sums ---------------------------------------------------------- */

void td_vbd_stages_set(struct td_vbd *vbd, bool on)
{
	vbd->stages.on = on;
	td_loop_set_wake_stamps(vbd->loop, on);
}

void td_vbd_stages_reset(struct td_vbd *vbd)
{
	bool on = vbd->stages.on;

	memset(&vbd->stages, 0, sizeof(vbd->stages));
	vbd->stages.on = on;
}

void td_vbd_get_stages(const struct td_vbd *vbd, struct td_vbd_stages *out)
{
	*out = vbd->stages;
}

uint64_t td_vbd_stages_clock(const struct td_vbd *vbd)
{
	return vbd->stages.on ? td_now_ns() : 0;
}

uint64_t td_vbd_stages_seen(struct td_vbd *vbd)
{
	struct td_vbd_stages *st = &vbd->stages;
	uint64_t now, woke, pass;

	if (!st->on)
		return 0;
	now = td_now_ns();
	woke = td_loop_woke_ns(vbd->loop);
	pass = td_loop_passes(vbd->loop);
	if (pass != st->ring_pass && woke && woke <= now) {
		st->ring_pass = pass;
		st->ring_wakes++;
		st->wake_to_ring_ns += now - woke;
	}
	return now;
}

void vbd_stages_start(struct td_vbd_io *io)
{
	io->fe_accounts = io->stamp_ns[TD_STAMP_SEEN] != 0;
	io->stamp_ns[TD_STAMP_START] = io->start_ns;
	if (!io->fe_accounts)
		io->stamp_ns[TD_STAMP_SEEN] = io->start_ns;
	for (unsigned int i = TD_STAMP_DRIVER; i < TD_STAMP_COUNT; i++)
		io->stamp_ns[i] = 0;
}

void vbd_stages_done(struct td_vbd *vbd, struct td_vbd_io *io, uint64_t now)
{
	io->stamp_ns[TD_STAMP_DONE] = now;
	if (!io->fe_accounts)
		td_vbd_stages_respond(vbd, io, now, NULL);
}

/* td_complete of a timed request: the completion was read now. */
void vbd_stages_reaped(struct td_vbd *vbd, struct td_vbd_io *io)
{
	struct td_vbd_stages *st = &vbd->stages;
	uint64_t now = td_now_ns(), woke = td_loop_woke_ns(vbd->loop);
	uint64_t pass = td_loop_passes(vbd->loop);

	io->stamp_ns[TD_STAMP_REAPED] = now;
	if (st->on && pass != st->reap_pass && woke && woke <= now) {
		st->reap_pass = pass;
		st->reap_wakes++;
		st->wake_to_reap_ns += now - woke;
	}
}

void td_request_submitted(struct td_request *req, uint64_t now_ns)
{
	/* The last piece's submission counts. */
	if (req->timed_io)
		req->timed_io->stamp_ns[TD_STAMP_SUBMITTED] = now_ns;
}

uint64_t td_driver_stages_clock(const struct td_driver *drv)
{
	return td_vbd_stages_clock(drv->vbd);
}

void td_vbd_stages_respond(struct td_vbd *vbd, struct td_vbd_io *io,
			   uint64_t respond_ns, uint32_t *nr_by_op)
{
	if (!io->timed || (unsigned int)io->op >= TD_OP_COUNT)
		return;
	io->timed = false;
	io->stamp_ns[TD_STAMP_RESPOND] = respond_ns;
	td_stages_account(&vbd->stages, io->op, io->stamp_ns, 0);
	if (nr_by_op)
		nr_by_op[io->op]++;
}

void td_vbd_stages_notified(struct td_vbd *vbd, const uint32_t *nr_by_op,
			    uint64_t notify_ns)
{
	struct td_vbd_stages *st = &vbd->stages;

	for (unsigned int op = 0; op < TD_OP_COUNT; op++) {
		uint64_t add = (uint64_t)nr_by_op[op] * notify_ns;

		st->sum_ns[op][TD_STAGE_NOTIFY] += add;
	}
}

/* --- report ------------------------------------------------------------------ */

static uint64_t mean(uint64_t sum, uint64_t n)
{
	return n ? sum / n : 0;
}

static void json_op(const struct td_vbd_stages *st, enum td_op op,
		    struct td_json *j)
{
	uint64_t n = st->count[op], res = td_stages_residence_ns(st, op);

	td_json_begin_object(j, td_op_name(op));
	td_json_u64(j, "count", n);
	td_json_u64(j, "residence_sum_ns", res);
	td_json_u64(j, "residence_mean_ns", mean(res, n));
	td_json_u64(j, "residence_max_ns", st->max_ns[op]);
	td_json_begin_object(j, "sum_ns");
	for (unsigned int s = 0; s < TD_STAGE_COUNT; s++)
		td_json_u64(j, stage_names[s], st->sum_ns[op][s]);
	td_json_end_object(j);
	td_json_begin_object(j, "mean_ns");
	for (unsigned int s = 0; s < TD_STAGE_COUNT; s++)
		td_json_u64(j, stage_names[s], mean(st->sum_ns[op][s], n));
	td_json_end_object(j);
	td_json_end_object(j);
}

void td_vbd_report_stages_json(const struct td_vbd *vbd, struct td_json *j)
{
	const struct td_vbd_stages *st = &vbd->stages;

	td_json_begin_object(j, "stages");
	td_json_bool(j, "on", st->on);
	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		json_op(st, op, j);
	td_json_u64(j, "ring_wakes", st->ring_wakes);
	td_json_u64(j, "wake_to_ring_mean_ns",
		    mean(st->wake_to_ring_ns, st->ring_wakes));
	td_json_u64(j, "reap_wakes", st->reap_wakes);
	td_json_u64(j, "wake_to_reap_mean_ns",
		    mean(st->wake_to_reap_ns, st->reap_wakes));
	td_json_end_object(j);
}

bool td_vbd_stages_shown(const struct td_vbd *vbd)
{
	const struct td_vbd_stages *st = &vbd->stages;

	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		if (st->count[op])
			return true;
	return st->on;
}

static double mean_us(uint64_t sum, uint64_t n)
{
	return n ? (double)sum / (double)n / 1000.0 : 0.0;
}

void td_vbd_report_stages_text(const struct td_vbd *vbd, struct td_strbuf *sb)
{
	const struct td_vbd_stages *st = &vbd->stages;

	td_strbuf_printf(sb, "\nstages (%s; mean us per I/O):\n",
			 st->on ? "on" : "off");
	td_strbuf_printf(sb, "  %-12s %10s %9s", "op", "count", "residence");
	for (unsigned int s = 0; s < TD_STAGE_COUNT; s++)
		td_strbuf_printf(sb, " %8s", stage_names[s]);
	td_strbuf_puts(sb, "\n");
	for (unsigned int op = 0; op < TD_OP_COUNT; op++) {
		uint64_t n = st->count[op];

		if (!n)
			continue;
		td_strbuf_printf(sb, "  %-12s %10" PRIu64 " %9.1f",
				 td_op_name(op), n,
				 mean_us(td_stages_residence_ns(st, op), n));
		for (unsigned int s = 0; s < TD_STAGE_COUNT; s++)
			td_strbuf_printf(sb, " %8.1f",
					 mean_us(st->sum_ns[op][s], n));
		td_strbuf_puts(sb, "\n");
	}
	td_strbuf_printf(
		sb,
		"  wake -> ring read %.1f us (%" PRIu64
		" passes), wake -> completion reaped %.1f us (%" PRIu64
		" passes)\n",
		mean_us(st->wake_to_ring_ns, st->ring_wakes), st->ring_wakes,
		mean_us(st->wake_to_reap_ns, st->reap_wakes), st->reap_wakes);
}
