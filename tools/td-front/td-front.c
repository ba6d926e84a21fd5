/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front.c - td-front: a blkif frontend for tapdisk's shm transport, as
 * a load generator and verifier.  This is main: connect, run, report.
 * The command line is in td-front-options.c, the workloads in
 * td-front-run.c, the report in td-front-report.c, the frontend itself
 * in the library (td-front-lib.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tapdisk/control/control.h"
#include "tools/td-front/td-front.h"

#define FLUSH_WAIT_MS 1000

/* --- the run ---------------------------------------------------------------- */

/* Where the backend's counters are, or "" when nowhere. */
static void control_path(const struct front_opts *o, struct tdf_dev *dev,
			 char *buf, size_t len)
{
	const char *dir = td_ctl_run_dir(o->run_dir);
	int id = o->id ? o->id : (int)tdf_get_info(dev)->backend_pid;

	buf[0] = '\0';
	if (o->no_backend_stats)
		return;
	if (o->control)
		snprintf(buf, len, "%s", o->control);
	else if (id && td_ctl_socket_path(buf, len, dir, id))
		buf[0] = '\0';
}

static int check_region(struct front_opts *o, struct tdf_dev *dev)
{
	const struct tdf_info *i = tdf_get_info(dev);
	uint32_t ss = i->backend.sector_size;
	uint64_t end = o->size ? o->offset + o->size : i->size_bytes;

	if (o->offset >= i->size_bytes || end > i->size_bytes ||
	    end < o->offset) {
		fprintf(stderr,
			"td-front: the region is not inside the disk "
			"(%" PRIu64 " bytes)\n",
			i->size_bytes);
		return -ERANGE;
	}
	if (o->offset % ss || (end - o->offset) % ss || o->min_bs % ss ||
	    end - o->offset < o->max_bs ||
	    (o->pattern == FRONT_INTERLEAVE &&
	     end - o->offset < FRONT_INTERLEAVE_BLOCKS * FRONT_INTERLEAVE_BS)) {
		fprintf(stderr,
			"td-front: the region (%" PRIu64 " bytes from %" PRIu64
			") and block sizes must be multiples of the disk's "
			"sector size %" PRIu32 " and hold one block\n",
			end - o->offset, o->offset, ss);
		return -EINVAL;
	}
	return 0;
}

static void flush_done(struct tdf_io *io, int err)
{
	int *result = io->opaque;

	*result = err ? err : 1;
}

/* BLKIF_OP_FLUSH_DISKCACHE, waited for.  Returns 0 or -errno. */
static int flush(struct tdf_dev *dev)
{
	int result = 0;
	struct tdf_io io = {
		.op = TDF_OP_FLUSH, .cb = flush_done, .opaque = &result};
	int err = tdf_submit(dev, &io);

	while (!err && !result) {
		err = tdf_kick(dev);
		if (err >= 0)
			err = tdf_wait(dev, FLUSH_WAIT_MS);
		err = err < 0 ? err : 0;
	}
	return err ? err : result < 0 ? result : 0;
}

static void note_negotiation(const struct front_opts *o, struct tdf_dev *dev)
{
	const struct tdf_info *i = tdf_get_info(dev);
	uint32_t wanted = o->max_segments ?: TDF_DEFAULT_MAX_SEGMENTS;

	if (o->quiet)
		return;
	if (i->ring_order < o->ring_order)
		fprintf(stderr,
			"td-front: note: ring order %" PRIu32
			" (the backend's maximum), not %" PRIu32 "\n",
			i->ring_order, o->ring_order);
	if (i->max_segments < wanted)
		fprintf(stderr,
			"td-front: note: %" PRIu32 " segments per request (the "
			"backend's maximum), not %" PRIu32 "\n",
			i->max_segments, wanted);
	if (i->nr_queues < o->queues)
		fprintf(stderr,
			"td-front: note: %" PRIu32 " rings (the backend's "
			"maximum), not %" PRIu32 "\n",
			i->nr_queues, o->queues);
}

static void fetch_backend(const char *path, struct tdf_backend_stats *st,
			  bool *ok, char *why, size_t len)
{
	*ok = false;
	if (!*path) {
		snprintf(why, len, "no control socket known");
		return;
	}
	*ok = !tdf_backend_stats(path, st, why, len);
}

/* Connect, run, report.  Returns the exit status. */
static int run(struct front_opts *o, struct front_result *res)
{
	struct tdf_config cfg = {
		.path = o->shm,
		.ring_order = o->ring_order,
		.max_segments = o->max_segments,
		.data_pages = front_data_pages(o),
		.queues = o->queues,
		.poll_us = o->poll_us,
	};
	struct tdf_backend_stats before, after;
	char why[TDF_WHY_MAX];
	struct tdf_dev *dev;
	bool ok_before = false;
	int err = tdf_open(&cfg, &dev, why, sizeof(why));

	if (err) {
		fprintf(stderr, "td-front: %s\n", why);
		return EXIT_FAILURE;
	}
	note_negotiation(o, dev);
	if (o->wait_resize_s > 0) {
		uint64_t was = tdf_get_info(dev)->size_bytes;

		err = tdf_wait_resize(dev, (int)(o->wait_resize_s * 1000), why,
				      sizeof(why));
		if (err) {
			fprintf(stderr, "td-front: %s\n", why);
			tdf_close(dev);
			return EXIT_FAILURE;
		}
		fprintf(stderr,
			"td-front: the disk grew from %" PRIu64 " to %" PRIu64
			" bytes\n",
			was, tdf_get_info(dev)->size_bytes);
	}
	if ((err = check_region(o, dev))) {
		tdf_close(dev);
		return EXIT_FAILURE;
	}
	control_path(o, dev, res->ctl_path, sizeof(res->ctl_path));
	if (!o->no_backend_stats)
		fetch_backend(res->ctl_path, &before, &ok_before,
			      res->backend_why, sizeof(res->backend_why));
	err = front_run(o, dev, res);
	if (!err && o->flush && res->bytes[1]) {
		err = flush(dev);
		res->flushed = !err;
		if (err)
			fprintf(stderr, "td-front: flush: %s\n",
				strerror(-err));
	}
	if (ok_before)
		fetch_backend(res->ctl_path, &after, &res->have_backend,
			      res->backend_why, sizeof(res->backend_why));
	if (res->have_backend)
		tdf_backend_stats_diff(&after, &before, &res->backend);
	else if (!o->quiet && !o->no_backend_stats)
		fprintf(stderr, "td-front: note: no backend counters: %s\n",
			res->backend_why);
	if (o->json)
		front_report_json(o, dev, res);
	else
		front_report_text(o, dev, res);
	tdf_close(dev);
	return err || res->io_errors || res->mismatches ? EXIT_FAILURE
							: EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	static struct front_opts o;
	static struct front_result res;
	int status = front_parse_options(&o, argc, argv);

	if (status != FRONT_GO_ON)
		return status;
	signal(SIGPIPE, SIG_IGN);
	if (o.no_backend_stats)
		snprintf(res.backend_why, sizeof(res.backend_why),
			 "--no-backend-stats");
	return run(&o, &res);
}
