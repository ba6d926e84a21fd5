/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-lease.c - 'stripe-ctl vdisk lease show|acquire|release|
 * handover|takeover' (issue #18): a disk's lease at the master, the one
 * host that may serve it.  See master/stripe.x for what each call does.
 *
 * The host acting is this host (master/client/host-id.h) unless --host-id
 * names another.  release, handover and takeover act at the epoch the
 * master shows now unless --epoch gives one: a lease that changed in
 * between is refused (MS_ESTALE), never moved blindly.
 *
 * takeover --fence fences the old holder on the storage servers too
 * (stripe-ctl-fence.c).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "master/client/host-id.h"
#include "tools/stripe-ctl/stripe-ctl.h"

void ctl_json_lease(struct td_json *j, const ms_lease *l)
{
	td_json_str(j, "holder", l->holder);
	td_json_u64(j, "epoch", l->epoch);
	td_json_str(j, "previous", l->previous);
	td_json_bool(j, "fence", l->fence);
	td_json_u64(j, "since", l->since);
	td_json_bool(j, "fence_pending", l->fence_pending);
}

void ctl_print_lease(const ms_lease *l)
{
	char when[32] = "never";
	time_t t = (time_t)l->since;
	struct tm tm;

	if (l->since && gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	printf("lease holder:        %s\nlease epoch:         %" PRIu64
	       "\nlease changed:       %s%s%s%s\n",
	       *l->holder ? l->holder : "(none: free)", (uint64_t)l->epoch,
	       when, *l->previous ? " (from " : "", l->previous,
	       *l->previous ? ")" : "");
	printf("lease fence pending: %s\n",
	       l->fence_pending ? "yes: the old holder is not fenced on every "
				  "LUN yet; do not serve"
				: "no");
}

int ctl_host_id(const struct ctl_opts *o, char *out)
{
	char msg[256];

	if (o->host_id) {
		if (master_host_id_ok(o->host_id)) {
			snprintf(out, MASTER_HOST_ID_SIZE, "%s", o->host_id);
			return 0;
		}
		return ctl_fail("--host-id '%s' is not 1-%d of [A-Za-z0-9._-]",
				o->host_id, MS_HOST_ID_MAX);
	}
	if (master_host_id_default(NULL, out, msg, sizeof(msg)))
		return ctl_fail("%s", msg);
	return 0;
}

static int print_lease_result(const struct ctl_opts *o, const ms_reply *rep,
			      const char *what)
{
	const ms_lease *l = &rep->body.ms_body_u.lease;
	struct td_strbuf sb;
	struct td_json j;

	if (o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "vdisk", l->vdisk);
		ctl_json_lease(&j, l);
		td_json_bool(&j, "changed", rep->changed);
		td_json_end_object(&j);
		return ctl_print_json(&j, &sb);
	}
	if (*l->holder)
		printf("vdisk %s: %s; held by %s, epoch %" PRIu64 "%s\n",
		       l->vdisk, rep->changed ? what : "already so, unchanged",
		       l->holder, (uint64_t)l->epoch,
		       l->fence_pending ? "; fence pending: do not serve" : "");
	else
		printf("vdisk %s: %s; free, epoch %" PRIu64 "\n", l->vdisk,
		       rep->changed ? what : "already so, unchanged",
		       (uint64_t)l->epoch);
	return 0;
}

/*
 * A lease call failed: the master's message on stderr; with --json, when
 * the master refused with the lease as it is (MS_EHELD, MS_ESTALE,
 * MS_EFENCED), that lease on stdout too, with "error" (the status) and
 * "message".
 */
int ctl_lease_failed(const struct ctl_opts *o, struct master_client *c,
		     const ms_reply *rep, const char *what)
{
	const ms_lease *l = &rep->body.ms_body_u.lease;
	struct td_strbuf sb;
	struct td_json j;

	if (o->json && rep->body.kind == MS_BODY_LEASE) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "vdisk", l->vdisk);
		ctl_json_lease(&j, l);
		td_json_str(&j, "error", master_status_name(rep->status));
		td_json_str(&j, "message", master_client_error(c));
		td_json_end_object(&j);
		ctl_print_json(&j, &sb);
	}
	return ctl_call_failed(c, what);
}

/* The lease's epoch now, unless --epoch gave one; 0 or EXIT_FAILURE. */
static int current_epoch(const struct ctl_opts *o, struct master_client *c,
			 uint64_t *epoch)
{
	ms_reply rep;
	int status = 0;

	if (o->epoch_given) {
		*epoch = o->epoch;
		return 0;
	}
	if (master_call_lease_show(c, o->arg, &rep))
		status = ctl_lease_failed(o, c, &rep, "vdisk lease show");
	else
		*epoch = rep.body.ms_body_u.lease.epoch;
	master_reply_free(&rep);
	return status;
}

/* The client and this host's id, after checking NAME. */
static struct master_client *lease_client(const struct ctl_opts *o, char *host)
{
	if (!stripe_map_name_ok(o->arg)) {
		ctl_fail("'%s' is not a vdisk name", o->arg);
		return NULL;
	}
	if (host && ctl_host_id(o, host))
		return NULL;
	return ctl_client(o);
}

int ctl_cmd_lease_show(struct ctl_opts *o)
{
	struct master_client *c = lease_client(o, NULL);
	ms_reply rep;
	int status;

	if (!c)
		return EXIT_FAILURE;
	if (master_call_lease_show(c, o->arg, &rep))
		status = ctl_lease_failed(o, c, &rep, "vdisk lease show");
	else if (o->json)
		status = print_lease_result(o, &rep, "");
	else {
		printf("vdisk:               %s\n", o->arg);
		ctl_print_lease(&rep.body.ms_body_u.lease);
		status = 0;
	}
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_lease_acquire(struct ctl_opts *o)
{
	char host[MASTER_HOST_ID_SIZE];
	struct master_client *c = lease_client(o, host);
	ms_reply rep;
	int status;

	if (!c)
		return EXIT_FAILURE;
	if (master_call_lease_acquire(c, o->arg, host, &rep))
		status = ctl_lease_failed(o, c, &rep, "vdisk lease acquire");
	else
		status = print_lease_result(o, &rep, "acquired");
	master_reply_free(&rep);
	master_client_close(c);
	return status;
}

int ctl_cmd_lease_release(struct ctl_opts *o)
{
	char host[MASTER_HOST_ID_SIZE];
	struct master_client *c = lease_client(o, host);
	uint64_t epoch = 0;
	ms_reply rep;
	int status;

	if (!c)
		return EXIT_FAILURE;
	if (!(status = current_epoch(o, c, &epoch))) {
		if (master_call_lease_release(c, o->arg, host, epoch, &rep))
			status = ctl_lease_failed(o, c, &rep,
						  "vdisk lease release");
		else
			status = print_lease_result(o, &rep, "released");
		master_reply_free(&rep);
	}
	master_client_close(c);
	return status;
}

int ctl_cmd_lease_handover(struct ctl_opts *o)
{
	char host[MASTER_HOST_ID_SIZE];
	struct master_client *c;
	uint64_t epoch = 0;
	ms_reply rep;
	int status;

	if (!master_host_id_ok(o->to))
		return ctl_fail("--to '%s' is not 1-%d of [A-Za-z0-9._-]",
				o->to, MS_HOST_ID_MAX);
	if (!(c = lease_client(o, host)))
		return EXIT_FAILURE;
	if (!(status = current_epoch(o, c, &epoch))) {
		if (master_call_lease_handover(c, o->arg, host, epoch, o->to,
					       &rep))
			status = ctl_lease_failed(o, c, &rep,
						  "vdisk lease handover");
		else
			status = print_lease_result(o, &rep, "handed over");
		master_reply_free(&rep);
	}
	master_client_close(c);
	return status;
}

/* takeover without --fence: the JSON keys a fenced one has, empty. */
static void json_no_fence(struct td_json *j)
{
	td_json_bool(j, "fence_asked", false);
	td_json_bool(j, "fencing_performed", false);
	td_json_begin_array(j, "fence_luns");
	td_json_end_array(j);
}

static int print_takeover(const struct ctl_opts *o, const ms_reply *rep)
{
	const ms_lease *l = &rep->body.ms_body_u.lease;
	struct td_strbuf sb;
	struct td_json j;

	if (o->json) {
		td_strbuf_init(&sb);
		td_json_init(&j, &sb);
		td_json_begin_object(&j, NULL);
		td_json_str(&j, "vdisk", l->vdisk);
		ctl_json_lease(&j, l);
		td_json_bool(&j, "changed", rep->changed);
		json_no_fence(&j);
		td_json_end_object(&j);
		return ctl_print_json(&j, &sb);
	}
	printf("vdisk %s: %s; held by %s, epoch %" PRIu64 " (taken from %s)\n",
	       l->vdisk, rep->changed ? "taken over" : "already so, unchanged",
	       l->holder, (uint64_t)l->epoch,
	       *l->previous ? l->previous : "nobody");
	if (*l->previous && rep->changed)
		printf("host %s was NOT fenced (no --fence): make sure it is "
		       "stopped\n",
		       l->previous);
	return 0;
}

/* --map FILE for --fence's CHAP credentials; 0 or EXIT_FAILURE. */
static int read_creds(const struct ctl_opts *o, struct stripe_map *m)
{
	struct stripe_map_error err;
	char text[STRIPE_MAP_ERROR_TEXT_MAX];

	if (!o->map)
		return 0;
	if (stripe_map_read(o->map, m, &err)) {
		stripe_map_error_text(&err, o->map, text, sizeof(text));
		return ctl_fail("--map: %s", text);
	}
	if (strcmp(m->vdisk, o->arg))
		fprintf(stderr,
			"stripe-ctl: note: %s maps vdisk %s, not %s: only its "
			"CHAP credentials are used\n",
			o->map, m->vdisk, o->arg);
	return 0;
}

static int takeover_fence(struct ctl_opts *o, struct master_client *c,
			  const char *host)
{
	struct stripe_map m;
	int status;

	memset(&m, 0, sizeof(m));
	if (!(status = read_creds(o, &m)))
		status = ctl_lease_takeover_fence(o, c, host,
						  o->map ? &m : NULL);
	stripe_map_free(&m);
	return status;
}

int ctl_cmd_lease_takeover(struct ctl_opts *o)
{
	char host[MASTER_HOST_ID_SIZE];
	struct master_client *c;
	uint64_t epoch = 0;
	ms_reply rep;
	int status;

	if (!o->fence && (o->initiator || o->map))
		return ctl_usage_fail("vdisk lease takeover",
				      "--%s goes with --fence",
				      o->initiator ? "initiator" : "map");
	if (!(c = lease_client(o, host)))
		return EXIT_FAILURE;
	if (o->fence)
		status = takeover_fence(o, c, host);
	else if (!(status = current_epoch(o, c, &epoch))) {
		if (master_call_lease_takeover(c, o->arg, host, epoch, false,
					       &rep))
			status = ctl_lease_failed(o, c, &rep,
						  "vdisk lease takeover");
		else
			status = print_takeover(o, &rep);
		master_reply_free(&rep);
	}
	master_client_close(c);
	return status;
}
