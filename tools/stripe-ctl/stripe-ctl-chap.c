/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-chap.c - CHAP accounts of servers (issue #20): reading a
 * secret file, 'server chap', and the credentials of a mapping file's
 * servers from the master.  No output of stripe-ctl carries a secret.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/stripe-ctl/stripe-ctl.h"

_Static_assert(MS_CHAP_MAX + 1 == STRIPE_MAP_CHAP_SIZE, "CHAP sizes differ");

static bool chap_word_ok(const char *s)
{
	size_t len = strlen(s);

	if (!len || len > MS_CHAP_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '#')
			return false;
	return true;
}

/* The file's first line, its newline dropped; 0 or an exit status. */
static int read_secret(const char *path, char secret[STRIPE_MAP_CHAP_SIZE])
{
	bool in = !strcmp(path, "-");
	FILE *f = in ? stdin : fopen(path, "r");
	char buf[STRIPE_MAP_CHAP_SIZE + 2];
	size_t len;
	int extra;

	if (!f)
		return ctl_fail("--chap-secret-file %s: %s", path,
				strerror(errno));
	memset(buf, 0, sizeof(buf));
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	extra = fgetc(f);
	if (!in)
		fclose(f);
	len = strcspn(buf, "\r\n");
	if (buf[len] == '\r' && buf[len + 1] == '\n')
		buf[len + 1] = '\0';
	if ((buf[len] && buf[len + 1]) || (buf[len] == '\n' && extra != EOF))
		len = 0; /* more than one line */
	buf[len] = '\0';
	if (!chap_word_ok(buf)) {
		memset(buf, 0, sizeof(buf));
		return ctl_fail("--chap-secret-file %s must hold one line of "
				"1-%d printable ASCII bytes without spaces or "
				"'#'",
				path, MS_CHAP_MAX);
	}
	memcpy(secret, buf, len + 1);
	memset(buf, 0, sizeof(buf));
	return 0;
}

int ctl_chap_args(const struct ctl_opts *o, char secret[STRIPE_MAP_CHAP_SIZE])
{
	secret[0] = '\0';
	if (!o->chap_user != !o->chap_secret_file)
		return ctl_fail("give --chap-user and --chap-secret-file "
				"together");
	if (!o->chap_user)
		return 0;
	if (!chap_word_ok(o->chap_user))
		return ctl_fail("--chap-user '%s' is not 1-%d printable ASCII "
				"bytes without spaces or '#'",
				o->chap_user, MS_CHAP_MAX);
	return read_secret(o->chap_secret_file, secret);
}

int ctl_chap_set(struct master_client *c, const struct ctl_opts *o,
		 const char *secret, ms_reply *rep)
{
	ms_server_chap_args a = {
		.target = (char *)o->target,
		.lun = (u_int)o->lun,
		.user = (char *)(o->chap_user ? o->chap_user : ""),
		.secret = (char *)(o->chap_user ? secret : ""),
	};

	return master_call_server_chap_set(c, &a, rep);
}

static int print_chap_result(const struct ctl_opts *o, const ms_reply *rep)
{
	const ms_server *s = &rep->body.ms_body_u.server;
	struct td_strbuf sb;
	struct td_json j;

	if (!o->json) {
		printf("server %u (%s lun %u): CHAP %s%s%s\n", s->id, s->target,
		       s->lun, o->chap_user ? "user " : "none",
		       o->chap_user ? o->chap_user : "",
		       rep->changed ? "" : " already; nothing changed");
		return 0;
	}
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_bool(&j, "changed", rep->changed);
	ctl_json_server(&j, "server", s);
	td_json_str(&j, "chap_user", o->chap_user ? o->chap_user : "");
	td_json_end_object(&j);
	return ctl_print_json(&j, &sb);
}

int ctl_cmd_server_chap(struct ctl_opts *o)
{
	char secret[STRIPE_MAP_CHAP_SIZE];
	struct master_client *c;
	ms_reply rep;
	int status;

	if (o->chap_none == !!o->chap_user)
		return ctl_usage_fail("server chap",
				      "give --chap-user USER "
				      "--chap-secret-file FILE, or --none");
	if (ctl_chap_args(o, secret))
		return EXIT_FAILURE;
	if (!(c = ctl_client(o)))
		status = EXIT_FAILURE;
	else if (ctl_chap_set(c, o, secret, &rep))
		status = ctl_call_failed(c, "server chap");
	else
		status = print_chap_result(o, &rep);
	memset(secret, 0, sizeof(secret));
	if (c) {
		master_reply_free(&rep);
		master_client_close(c);
	}
	return status;
}

int ctl_chap_get(struct master_client *c, struct stripe_map_server *s)
{
	ms_server_key k = {.target = s->target, .lun = s->lun};
	ms_reply rep;
	int err = master_call_server_chap_get(c, &k, &rep);

	if (!err) {
		snprintf(s->chap_user, sizeof(s->chap_user), "%s",
			 rep.body.ms_body_u.chap.user);
		snprintf(s->chap_secret, sizeof(s->chap_secret), "%s",
			 rep.body.ms_body_u.chap.secret);
	}
	master_reply_free(&rep);
	return err;
}

int ctl_map_chap(struct master_client *c, struct stripe_map *m,
		 const char *what)
{
	for (uint32_t i = 0; i < m->nr_servers; i++) {
		struct stripe_map_server *s = &m->servers[i];
		int err = ctl_chap_get(c, s);

		if (err == -EPERM)
			return ctl_fail("%s: the master gives the LUNs' CHAP "
					"accounts, which go into the mapping "
					"file, only to callers in its --allow "
					"networks: run this where it allows "
					"(%s)",
					what, master_client_error(c));
		if (err)
			return ctl_fail("%s: the CHAP account of %s lun %u: "
					"%s",
					what, s->target, s->lun,
					master_client_error(c));
	}
	return 0;
}
