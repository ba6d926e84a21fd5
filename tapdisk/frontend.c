/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frontend.c - the calls through the frontend ops (frontend.h) and the
 * shutdown bookkeeping every server shares: one done, called once,
 * deferred through the event loop.
 */
#include "config.h"

#include <errno.h>

#include "common/json.h"
#include "tapdisk/frontend.h"

int td_frontend_listen(struct td_frontend *fe, const char *addr)
{
	if (!fe->ops->listen)
		return -EOPNOTSUPP;
	return fe->ops->listen(fe, addr);
}

int td_frontend_control(struct td_frontend *fe, int argc, char **argv,
			struct td_strbuf *out)
{
	if (!fe->ops->control)
		return -EOPNOTSUPP;
	return fe->ops->control(fe, argc, argv, out);
}

void td_frontend_resized(struct td_frontend *fe, struct td_strbuf *out)
{
	if (fe->ops->resized)
		fe->ops->resized(fe, out);
	else
		td_strbuf_printf(out, "%s: clients not told of the new size\n",
				 fe->ops->name);
}

int td_frontend_shutdown(struct td_frontend *fe, td_frontend_done_fn done,
			 void *opaque)
{
	return fe->ops->shutdown(fe, done, opaque);
}

void td_frontend_destroy(struct td_frontend *fe)
{
	if (fe)
		fe->ops->destroy(fe);
}

void td_frontend_report_json(struct td_frontend *fe, struct td_json *j)
{
	if (fe->ops->report_json)
		fe->ops->report_json(fe, j);
}

void td_frontend_report_text(struct td_frontend *fe, struct td_strbuf *sb)
{
	if (fe->ops->report_text)
		fe->ops->report_text(fe, sb);
}

void td_frontend_report_metrics(struct td_frontend *fe, const char *labels,
				struct td_strbuf *sb)
{
	if (fe->ops->report_metrics)
		fe->ops->report_metrics(fe, labels, sb);
}

void td_frontend_init(struct td_frontend *fe, const struct td_frontend_ops *ops,
		      struct td_loop *loop)
{
	*fe = (struct td_frontend){.ops = ops, .loop = loop};
}

int td_frontend_stop_begin(struct td_frontend *fe, td_frontend_done_fn done,
			   void *opaque)
{
	if (fe->stopping)
		return -EALREADY;
	fe->stopping = true;
	fe->done = done;
	fe->done_opaque = opaque;
	return 0;
}

static void frontend_run_done(struct td_defer *d, void *opaque)
{
	struct td_frontend *fe = opaque;

	if (fe->done)
		fe->done(fe->done_opaque);
}

void td_frontend_stop_check(struct td_frontend *fe, bool idle)
{
	if (!fe->stopping || fe->stopped || !idle)
		return;
	fe->stopped = true;
	td_loop_timer_cancel(&fe->stop_timer);
	/* Never from inside the caller's stack: it may be ->shutdown. */
	td_loop_defer(fe->loop, &fe->done_defer, frontend_run_done, fe);
}

void td_frontend_fini(struct td_frontend *fe)
{
	td_loop_timer_cancel(&fe->stop_timer);
	td_loop_defer_cancel(fe->loop, &fe->done_defer);
}
