/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-host.c - 'stripe-ctl host list|readmit' (issue #18): the
 * hosts a fenced takeover shut out, and their explicit re-admission.
 * See master/stripe.x (MS_HOST_LIST, MS_HOST_READMIT).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "master/hostid.h"
#include "tools/stripe-ctl/stripe-ctl.h"

static void format_time(uint64_t since, char *buf, size_t size)
{
	time_t t = (time_t)since;
	struct tm tm;

	snprintf(buf, size, "?");
	if (since && gmtime_r(&t, &tm))
		strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

static void json_hosts(struct td_json *j, const ms_reply *rep)
{
	td_json_begin_array(j, "fenced");
	for (u_int i = 0; i < rep->body.ms_body_u.hosts.hosts_len; i++) {
		const ms_fenced_host *h =
			&rep->body.ms_body_u.hosts.hosts_val[i];

		td_json_begin_object(j, NULL);
		td_json_str(j, "host", h->host);
		td_json_str(j, "by", h->by);
		td_json_str(j, "vdisk", h->vdisk);
		td_json_u64(j, "epoch", h->epoch);
		td_json_u64(j, "since", h->since);
		td_json_end_object(j);
	}
	td_json_end_array(j);
}

static void print_hosts(const ms_reply *rep)
{
	char when[32];

	if (!rep->body.ms_body_u.hosts.hosts_len) {
		printf("no fenced host\n");
		return;
	}
	printf("%-24s %-24s %-24s %8s %s\n", "HOST", "FENCED BY", "VDISK",
	       "EPOCH", "SINCE");
	for (u_int i = 0; i < rep->body.ms_body_u.hosts.hosts_len; i++) {
		const ms_fenced_host *h =
			&rep->body.ms_body_u.hosts.hosts_val[i];

		format_time(h->since, when, sizeof(when));
		printf("%-24s %-24s %-24s %8" PRIu64 " %s\n", h->host, h->by,
		       h->vdisk, (uint64_t)h->epoch, when);
	}
}

/* The fenced hosts of a reply; with --json, "changed" when readmit. */
static int print_result(const struct ctl_opts *o, const ms_reply *rep,
			const char *readmitted)
{
	struct td_strbuf sb;
	struct td_json j;

	if (o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		if (readmitted) {
			td_json_str(&j, "host", readmitted);
			td_json_bool(&j, "changed", rep->changed);
		}
		json_hosts(&j, rep);
		td_json_end_object(&j);
		return ctl_print_json(&j, &sb);
	}
	if (readmitted)
		printf("host %s: %s\n", readmitted,
		       rep->changed ? "re-admitted: it may acquire leases again"
				    : "not fenced, unchanged");
	else
		print_hosts(rep);
	return 0;
}

int ctl_cmd_host_list(struct ctl_opts *o)
{
	struct master_client *c = ctl_client(o);
	ms_reply rep;
	int status;

	if (!c)
		return EXIT_FAILURE;
	if (master_call_host_list(c, &rep))
		status = ctl_call_failed(c, "host list");
	else
		status = print_result(o, &rep, NULL);
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_host_readmit(struct ctl_opts *o)
{
	struct master_client *c;
	ms_reply rep;
	int status;

	if (!master_host_id_ok(o->arg))
		return ctl_fail("'%s' is not a host id (1-%d of "
				"[A-Za-z0-9._-]): see 'stripe-ctl host list'",
				o->arg, MS_HOST_ID_MAX);
	if (!(c = ctl_client(o)))
		return EXIT_FAILURE;
	if (master_call_host_readmit(c, o->arg, &rep))
		status = ctl_call_failed(c, "host readmit");
	else
		status = print_result(o, &rep, o->arg);
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}
