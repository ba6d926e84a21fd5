/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats-format.h - the text and JSON forms of a tapdisk's "info" and
 * "stats" replies.
 *
 * The control server fills a struct td_report from the live objects and
 * hands it here; formatting knows nothing of sockets, so tests can feed it
 * any numbers they like.
 *
 * Text "info" is one "key: value" line per fact (a key may repeat:
 * "frontend"), which tap-ctl parses; text "stats" is a table for people,
 * with bytes in binary multiples (KiB, MiB, GiB).  The JSON forms carry the
 * same facts with every number exact (bytes, microseconds).
 */
#ifndef TAPSTRIPE_STATS_FORMAT_H
#define TAPSTRIPE_STATS_FORMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/json.h"
#include "tapdisk/frontend.h"
#include "tapdisk/vbd.h"

/* A frontend serving the vbd, e.g. kind "nbd", addr "unix:/run/x.sock". */
#define TD_FRONTEND_KIND_MAX 16
#define TD_FRONTEND_ADDR_MAX 256

struct td_report_frontend {
	char kind[TD_FRONTEND_KIND_MAX];
	char addr[TD_FRONTEND_ADDR_MAX];
};

struct td_report {
	int pid;
	const char *name;
	const char *chain;
	const char *state; /* "running", "pausing", "paused", "stopping" */
	struct td_disk_info info;
	struct td_vbd_stats stats;
	/*
	 * The frontend kinds this tapdisk knows, NULL-terminated (may be
	 * NULL), in the order "stats" reports them: each kind's report op
	 * runs for the server of that kind in servers, and a kind with none
	 * is null in JSON, absent in text.
	 */
	const struct td_frontend_ops *const *kinds;
	struct td_frontend *const *servers;
	unsigned int nr_servers;
	uint64_t cpu_user_us; /* getrusage(RUSAGE_SELF) */
	uint64_t cpu_sys_us;
	uint64_t uptime_us;
	uint64_t log_dropped; /* lines the syslog sink dropped (log.h) */
	const struct td_report_frontend *frontends;
	unsigned int nr_frontends;
	/* For the drivers' own reports (td_vbd_report_drivers_*); may be NULL. */
	struct td_vbd *vbd;
};

/* Each returns 0 or -ENOMEM; the text is appended to sb. */
int td_format_info_text(const struct td_report *r, struct td_strbuf *sb);
int td_format_info_json(const struct td_report *r, struct td_strbuf *sb);
int td_format_stats_text(const struct td_report *r, struct td_strbuf *sb);
int td_format_stats_json(const struct td_report *r, struct td_strbuf *sb);
/*
 * The Prometheus text exposition (format 0.0.4) of one tapdisk: families
 * named tapstripe_*, each with HELP and TYPE, every sample labelled
 * disk="NAME"; tap-ctl metrics merges those of every tapdisk.
 */
int td_format_stats_metrics(const struct td_report *r, struct td_strbuf *sb);

/*
 * "512 B", "4.0 KiB", "1.50 GiB": binary multiples, for people.  Returns
 * buf.
 */
#define TD_HUMAN_BYTES_MAX 32
const char *td_format_bytes(uint64_t bytes, char *buf, unsigned int len);

#endif
