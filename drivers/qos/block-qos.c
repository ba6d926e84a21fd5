/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * block-qos.c - the qos filter: token buckets for IOPS and bytes per
 * second, reads and writes apart, with a burst allowance.
 *
 * Chain: "qos:write_iops=200,burst_ms=100|LOWER".  Requests over budget
 * wait in arrival order (never reordered, never dropped: a flush waits
 * behind the writes queued before it) and an event-loop timer releases
 * them.  `tap-ctl driver -i ID qos set KEY=VALUE...` changes the limits
 * at run time, `qos status [json]` shows them; doc/driver-chains.md.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/queue.h>

#include "common/log.h"
#include "drivers/drivers.h"
#include "drivers/qos/qos-bucket.h"
#include "drivers/qos/qos-group.h"

struct qos_req {
	TAILQ_ENTRY(qos_req) link;
	struct td_request *req;
};

TAILQ_HEAD(qos_queue, qos_req);

struct qos_dev {
	struct qos_opts opts;
	struct qos_bucket bucket[QOS_NR_LIMITS];
	struct qos_queue queue;	 /* waiting, in arrival order */
	struct qos_group *group; /* group=: the shared budget, or NULL */
	struct td_timer timer;	 /* armed while the head waits for budget */
	uint64_t nr_queued;	 /* gauge: requests waiting now */
	/* Its counters (td_qos_ops.counters, tap-ctl stats). */
	uint64_t passed;  /* requests forwarded */
	uint64_t delayed; /* requests that had to wait */
	uint64_t max_queued;
};

static struct qos_dev *dev_of(struct td_driver *drv)
{
	return drv->data;
}

static void qos_apply(struct qos_dev *dev, uint64_t now_ns)
{
	for (int l = 0; l < QOS_NR_LIMITS; l++)
		qos_bucket_set(&dev->bucket[l], dev->opts.limit[l],
			       dev->opts.burst_ms, now_ns);
}

/* The group_* keys given (at open or by `qos set`) go to the group. */
static void qos_apply_group(struct qos_dev *dev)
{
	uint64_t limit[QOS_NR_LIMITS];
	uint32_t burst_ms;
	bool any = dev->opts.group_burst_given;

	for (int l = 0; l < QOS_NR_LIMITS; l++)
		any |= dev->opts.group_given[l];
	if (!any)
		return;
	qos_group_get(dev->group, limit, &burst_ms);
	qos_group_set(dev->group, dev->opts.group_limit, dev->opts.group_given,
		      dev->opts.group_burst_given ? dev->opts.group_burst_ms
						  : burst_ms,
		      td_now_ns());
	memset(dev->opts.group_given, 0, sizeof(dev->opts.group_given));
	dev->opts.group_burst_given = false;
}

static uint64_t qos_wait_ns(struct qos_dev *dev, const uint64_t *cost,
			    uint64_t now_ns)
{
	uint64_t wait = 0;

	for (int l = 0; l < QOS_NR_LIMITS; l++) {
		uint64_t w;

		if (!cost[l])
			continue;
		w = qos_bucket_wait_ns(&dev->bucket[l], now_ns);
		if (w > wait)
			wait = w;
	}
	return wait;
}

static void qos_lower_done(struct td_request *lower, int err, void *opaque)
{
	(void)lower;
	td_complete(opaque, err);
}

static void qos_forward(struct td_driver *drv, struct td_request *req)
{
	struct td_request *lower = td_request_get(drv);

	if (!lower) {
		/* Cannot happen: one forwarded request per request. */
		td_vbd_err(drv->vbd, "qos: lower pool empty; failing a %s",
			   td_op_name(req->op));
		td_complete(req, -EBUSY);
		return;
	}
	lower->op = req->op;
	lower->flags = req->flags;
	lower->sector = req->sector;
	lower->nr_sectors = req->nr_sectors;
	lower->iov = req->iov;
	lower->iovcnt = req->iovcnt;
	dev_of(drv)->passed++;
	td_forward(drv, lower, qos_lower_done, req);
}

static void qos_timer_fired(struct td_timer *t, void *opaque);

/* Forward from the head while the budget allows; arm the timer if not. */
static void qos_dispatch(struct td_driver *drv)
{
	struct qos_dev *dev = dev_of(drv);
	uint64_t now = td_now_ns();
	struct qos_req *qr;

	td_loop_timer_cancel(&dev->timer);
	while ((qr = TAILQ_FIRST(&dev->queue))) {
		uint64_t cost[QOS_NR_LIMITS], wait;

		qos_request_cost(qr->req->op, td_request_bytes(qr->req), cost);
		wait = qos_wait_ns(dev, cost, now);
		/* The group is charged only when the disk's own limits pass. */
		if (!wait && dev->group)
			wait = qos_group_admit(dev->group, cost, now);
		if (wait) {
			/* Round up: a timer early by a rounding would spin. */
			td_loop_timer_arm(drv->loop, &dev->timer,
					  (wait + 999) / 1000, qos_timer_fired,
					  drv);
			return;
		}
		for (int l = 0; l < QOS_NR_LIMITS; l++)
			qos_bucket_charge(&dev->bucket[l], cost[l], now);
		TAILQ_REMOVE(&dev->queue, qr, link);
		dev->nr_queued--;
		qos_forward(drv, qr->req);
	}
}

static void qos_timer_fired(struct td_timer *t, void *opaque)
{
	(void)t;
	qos_dispatch(opaque);
}

static int qos_submit(struct td_driver *drv, struct td_request *req)
{
	struct qos_dev *dev = dev_of(drv);
	struct qos_req *qr = req->priv;
	bool was_empty = TAILQ_EMPTY(&dev->queue);

	qr->req = req;
	TAILQ_INSERT_TAIL(&dev->queue, qr, link);
	if (++dev->nr_queued > dev->max_queued)
		dev->max_queued = dev->nr_queued;
	if (was_empty)
		qos_dispatch(drv);
	/* Nothing is behind it yet: a queue left non-empty holds it. */
	if (!TAILQ_EMPTY(&dev->queue))
		dev->delayed++;
	return 0;
}

static int qos_open(struct td_driver *drv, const char *args)
{
	struct qos_dev *dev = dev_of(drv);
	char why[QOS_WHY_MAX];
	int err;

	qos_opts_init(&dev->opts);
	if ((err = qos_opts_parse(args, &dev->opts, why, sizeof(why))))
		return td_driver_fail(drv, err, "%s", why);
	TAILQ_INIT(&dev->queue);
	qos_apply(dev, td_now_ns());
	if (dev->opts.group[0]) {
		err = qos_group_open(dev->opts.group_dir, dev->opts.group,
				     &dev->group, why, sizeof(why));
		if (err)
			return td_driver_fail(drv, err, "%s", why);
		qos_apply_group(dev);
	}
	/* drv->info stays the lower driver's: qos changes no limit. */
	return 0;
}

static void qos_close(struct td_driver *drv)
{
	td_loop_timer_cancel(&dev_of(drv)->timer);
	qos_group_close(dev_of(drv)->group);
}

/* --- reports and commands ----------------------------------------------------- */

static void qos_report_json(struct td_driver *drv, struct td_json *j)
{
	struct qos_dev *dev = dev_of(drv);

	for (int l = 0; l < QOS_NR_LIMITS; l++)
		td_json_u64(j, qos_limit_name(l), dev->opts.limit[l]);
	td_json_u64(j, "burst_ms", dev->opts.burst_ms);
	if (dev->group) {
		uint64_t limit[QOS_NR_LIMITS];
		uint32_t burst_ms;

		qos_group_get(dev->group, limit, &burst_ms);
		td_json_begin_object(j, "group");
		td_json_str(j, "name", qos_group_name(dev->group));
		for (int l = 0; l < QOS_NR_LIMITS; l++)
			td_json_u64(j, qos_limit_name(l), limit[l]);
		td_json_u64(j, "burst_ms", burst_ms);
		td_json_end_object(j);
	}
	td_json_u64(j, "queued", dev->nr_queued);
	td_json_u64(j, "delayed", dev->delayed);
	td_json_u64(j, "passed", dev->passed);
}

static void qos_report_text(struct td_driver *drv, struct td_strbuf *sb)
{
	struct qos_dev *dev = dev_of(drv);

	for (int l = 0; l < QOS_NR_LIMITS; l++)
		td_strbuf_printf(sb, "%s: %llu\n", qos_limit_name(l),
				 (unsigned long long)dev->opts.limit[l]);
	td_strbuf_printf(sb, "burst_ms: %u\nqueued: %llu\ndelayed: %llu\n",
			 dev->opts.burst_ms, (unsigned long long)dev->nr_queued,
			 (unsigned long long)dev->delayed);
	if (dev->group) {
		uint64_t limit[QOS_NR_LIMITS];
		uint32_t burst_ms;

		qos_group_get(dev->group, limit, &burst_ms);
		td_strbuf_printf(sb, "group: %s\n", qos_group_name(dev->group));
		for (int l = 0; l < QOS_NR_LIMITS; l++)
			td_strbuf_printf(sb, "group_%s: %llu\n",
					 qos_limit_name(l),
					 (unsigned long long)limit[l]);
		td_strbuf_printf(sb, "group_burst_ms: %u\n", burst_ms);
	}
}

static void qos_report_metrics(struct td_driver *drv, const char *labels,
			       struct td_strbuf *sb)
{
	struct qos_dev *dev = dev_of(drv);

	td_driver_metric(sb, labels, "tapstripe_qos_queued", "gauge",
			 "Requests waiting for budget now", dev->nr_queued);
	td_driver_metric(sb, labels, "tapstripe_qos_delayed_total", "counter",
			 "Requests that had to wait for budget", dev->delayed);
	td_driver_metric(sb, labels, "tapstripe_qos_passed_total", "counter",
			 "Requests passed on", dev->passed);
	/* The limits in force: 0 for none. */
	td_driver_metric(sb, labels, "tapstripe_qos_write_iops_limit", "gauge",
			 "write_iops in force (0: none)",
			 dev->opts.limit[QOS_WRITE_IOPS]);
	td_driver_metric(sb, labels, "tapstripe_qos_read_iops_limit", "gauge",
			 "read_iops in force (0: none)",
			 dev->opts.limit[QOS_READ_IOPS]);
	td_driver_metric(sb, labels, "tapstripe_qos_iops_limit", "gauge",
			 "iops in force (0: none)", dev->opts.limit[QOS_IOPS]);
	td_driver_metric(sb, labels, "tapstripe_qos_bps_limit", "gauge",
			 "bps in force, bytes/s (0: none)",
			 dev->opts.limit[QOS_BPS]);
}

/* "set KEY=VALUE...": all or nothing. */
static int qos_cmd_set(struct td_driver *drv, int argc, char **argv,
		       struct td_strbuf *out)
{
	struct qos_dev *dev = dev_of(drv);
	struct qos_opts o = dev->opts;
	char why[QOS_WHY_MAX];
	int err;

	if (argc < 2) {
		td_strbuf_puts(out,
			       "qos set: give KEY=VALUE... (iops, "
			       "read_iops, write_iops, bps, read_bps, "
			       "write_bps, burst_ms, group_<any of these>)");
		return -EINVAL;
	}
	for (int i = 1; i < argc; i++) {
		if (!argv[i][0] ||
		    (err = qos_opts_parse(argv[i], &o, why, sizeof(why)))) {
			td_strbuf_puts(out, argv[i][0] ? why
						       : "qos: empty argument");
			return -EINVAL;
		}
	}
	if (strcmp(o.group, dev->opts.group) ||
	    strcmp(o.group_dir, dev->opts.group_dir)) {
		td_strbuf_puts(out, "qos: a disk's group is set in its chain, "
				    "not at run time");
		return -EINVAL;
	}
	if (!dev->group &&
	    (o.group_burst_given ||
	     memchr(o.group_given, true, sizeof(o.group_given)))) {
		td_strbuf_puts(out, "qos: this disk is in no group (add "
				    "group=NAME to its chain)");
		return -EINVAL;
	}
	dev->opts = o;
	qos_apply(dev, td_now_ns());
	if (dev->group)
		qos_apply_group(dev);
	td_vbd_info(drv->vbd, "qos: limits changed");
	qos_dispatch(drv);
	qos_report_text(drv, out);
	return 0;
}

static int qos_control(struct td_driver *drv, int argc, char **argv,
		       struct td_strbuf *out)
{
	if (!strcmp(argv[0], "set"))
		return qos_cmd_set(drv, argc, argv, out);
	if (!strcmp(argv[0], "status") && argc == 1) {
		qos_report_text(drv, out);
		return 0;
	}
	if (!strcmp(argv[0], "status") && argc == 2 &&
	    !strcmp(argv[1], "json")) {
		struct td_json j;

		td_json_init(&j, out);
		td_json_begin_object(&j, NULL);
		qos_report_json(drv, &j);
		td_json_end_object(&j);
		return td_json_finish(&j);
	}
	td_strbuf_puts(out, "qos: commands are 'set KEY=VALUE...' and "
			    "'status [json]'");
	return -EINVAL;
}

static const struct td_driver_counter qos_counters[] = {
	{"qos_passed", offsetof(struct qos_dev, passed), false},
	{"qos_delayed", offsetof(struct qos_dev, delayed), false},
	{"qos_max_queued", offsetof(struct qos_dev, max_queued), true},
};

/* A filter serves its lower driver's size: *sectors, unchanged. */
static int qos_refresh_size(struct td_driver *drv, uint64_t *sectors)
{
	return 0;
}

const struct td_driver_ops td_qos_ops = {
	.name = "qos",
	.flags = TD_DRV_FILTER,
	.dev_size = sizeof(struct qos_dev),
	.req_size = sizeof(struct qos_req),
	.open = qos_open,
	.close = qos_close,
	.refresh_size = qos_refresh_size,
	.submit = qos_submit,
	.report_json = qos_report_json,
	.report_text = qos_report_text,
	.report_metrics = qos_report_metrics,
	.control = qos_control,
	.counters = qos_counters,
	.nr_counters = sizeof(qos_counters) / sizeof(qos_counters[0]),
};
