/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl-metrics.c - "tap-ctl metrics [--output FILE]": the Prometheus
 * text exposition of every tapdisk of the run directory.  Each tapdisk
 * answers "stats metrics" with its own families (doc/metrics.md); the
 * format wants every sample of a family in one group under one HELP and
 * TYPE, so the answers are merged family by family.  --output writes a
 * temporary file next to FILE and renames it, as node-exporter's textfile
 * collector asks.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "tools/tap-ctl/tap-ctl.h"
#include "tools/tap-ctl/tap-ctl-metrics.h"

void tapctl_metrics_init(struct tapctl_metrics *m)
{
	memset(m, 0, sizeof(*m));
}

void tapctl_metrics_free(struct tapctl_metrics *m)
{
	for (size_t i = 0; i < m->nr_families; i++) {
		free(m->families[i].name);
		td_strbuf_free(&m->families[i].head);
		td_strbuf_free(&m->families[i].samples);
	}
	free(m->families);
	tapctl_metrics_init(m);
}

/* The family called name (len bytes), added when new; NULL: no memory. */
static struct tapctl_metric_family *family(struct tapctl_metrics *m,
					   const char *name, size_t len)
{
	struct tapctl_metric_family *f;

	for (size_t i = 0; i < m->nr_families; i++)
		if (strlen(m->families[i].name) == len &&
		    !memcmp(m->families[i].name, name, len))
			return &m->families[i];
	f = realloc(m->families, (m->nr_families + 1) * sizeof(*f));
	if (!f)
		return NULL;
	m->families = f;
	f = &m->families[m->nr_families];
	if (!(f->name = strndup(name, len)))
		return NULL;
	td_strbuf_init(&f->head);
	td_strbuf_init(&f->samples);
	m->nr_families++;
	return f;
}

/*
 * One line of a tapdisk's answer: "# HELP NAME ..." opens (or finds) the
 * family NAME, whose HELP and TYPE lines are kept once; other lines are
 * samples of the family opened last.
 */
static int merge_line(struct tapctl_metrics *m, const char *line, size_t len,
		      struct tapctl_metric_family **cur)
{
	static const char help[] = "# HELP ";

	if (len > sizeof(help) - 1 && !strncmp(line, help, sizeof(help) - 1)) {
		const char *name = line + sizeof(help) - 1;
		size_t nlen = strcspn(name, " \n");

		if (!(*cur = family(m, name, nlen)))
			return -ENOMEM;
		(*cur)->seen_head = (*cur)->head.len != 0;
	}
	if (!*cur)
		return -EINVAL; /* a sample before any family */
	if (line[0] == '#') {
		if (!(*cur)->seen_head)
			td_strbuf_append(&(*cur)->head, line, len);
	} else {
		td_strbuf_append(&(*cur)->samples, line, len);
	}
	return 0;
}

int tapctl_metrics_merge(struct tapctl_metrics *m, const char *text)
{
	struct tapctl_metric_family *cur = NULL;
	int err;

	for (const char *line = text; *line;) {
		size_t len = strcspn(line, "\n");

		if (line[len] == '\n')
			len++;
		if ((err = merge_line(m, line, len, &cur)))
			return err;
		line += len;
	}
	return 0;
}

int tapctl_metrics_write(const struct tapctl_metrics *m, FILE *out)
{
	for (size_t i = 0; i < m->nr_families; i++) {
		const struct tapctl_metric_family *f = &m->families[i];

		if (td_strbuf_error(&f->head) || td_strbuf_error(&f->samples))
			return -ENOMEM;
		fputs(td_strbuf_str(&f->head), out);
		fputs(td_strbuf_str(&f->samples), out);
	}
	return ferror(out) ? -EIO : 0;
}

struct merge_ctx {
	struct tapctl_metrics *m;
	int err;
};

static void merge_cb(void *opaque, int pid, const char *payload)
{
	struct merge_ctx *ctx = opaque;
	int err = tapctl_metrics_merge(ctx->m, payload);

	if (err) {
		tapctl_fail("tapdisk %d: cannot read its metrics: %s", pid,
			    strerror(-err));
		ctx->err = err;
	}
}

/* Write m to path through path.tmp.PID and rename: readers never see a
 * half-written file. */
static int write_atomically(const struct tapctl_metrics *m, const char *path)
{
	char tmp[PATH_MAX];
	FILE *f;
	int err;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp))
		return tapctl_fail("--output %s: name too long", path);
	if (!(f = fopen(tmp, "w")))
		return tapctl_fail("cannot create %s: %s", tmp,
				   strerror(errno));
	err = tapctl_metrics_write(m, f);
	if (fflush(f) || fsync(fileno(f)))
		err = err ? err : -errno;
	if (fclose(f))
		err = err ? err : -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err) {
		unlink(tmp);
		return tapctl_fail("cannot write %s: %s", path, strerror(-err));
	}
	return EXIT_SUCCESS;
}

int tapctl_cmd_metrics(struct cmd_opts *o)
{
	struct tapctl_metrics m;
	struct merge_ctx ctx = {&m, 0};
	int status;

	tapctl_metrics_init(&m);
	status = tapctl_each_tapdisk(o, "stats metrics", merge_cb, &ctx);
	if (ctx.err)
		status = EXIT_FAILURE;
	if (o->output) {
		if (write_atomically(&m, o->output))
			status = EXIT_FAILURE;
	} else if (tapctl_metrics_write(&m, stdout)) {
		status = tapctl_fail("cannot write the metrics");
	}
	tapctl_metrics_free(&m);
	return status;
}
