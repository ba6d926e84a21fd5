/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl-metrics.h - merging the Prometheus text of several tapdisks into
 * one exposition, each family once (tap-ctl metrics; unit-tested).
 */
#ifndef TAPSTRIPE_TAP_CTL_METRICS_H
#define TAPSTRIPE_TAP_CTL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/json.h"

struct tapctl_metric_family {
	char *name;
	struct td_strbuf head;	  /* its HELP and TYPE lines */
	struct td_strbuf samples; /* every tapdisk's samples */
	bool seen_head;		  /* the answer being merged repeats head */
};

/* Families in the order they first appeared. */
struct tapctl_metrics {
	struct tapctl_metric_family *families;
	size_t nr_families;
};

void tapctl_metrics_init(struct tapctl_metrics *m);
void tapctl_metrics_free(struct tapctl_metrics *m);

/*
 * Add one tapdisk's exposition (families opened by "# HELP NAME").  0,
 * -ENOMEM, or -EINVAL for a sample before any family.
 */
int tapctl_metrics_merge(struct tapctl_metrics *m, const char *text);

/* Print the merged exposition.  0, -ENOMEM (a merge lost text) or -EIO. */
int tapctl_metrics_write(const struct tapctl_metrics *m, FILE *out);

#endif
