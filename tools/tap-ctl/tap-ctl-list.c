/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl-list.c - the commands about every tapdisk whose control socket
 * is in the run directory: "tap-ctl list [--json]" and "tap-ctl stats
 * --all [--json]".  A socket whose process is gone is removed; one whose
 * process lives but does not answer is reported.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tapdisk/control/control.h"
#include "tools/tap-ctl/tap-ctl.h"

/* The start of the line after line in text, or NULL. */
static const char *next_line(const char *line)
{
	const char *lf = strchr(line, '\n');

	return lf && lf[1] ? lf + 1 : NULL;
}

/*
 * Print the rest of each line of info that starts with prefix, joined by
 * commas; returns how many there were.
 */
static int print_values(const char *info, const char *prefix)
{
	size_t len = strlen(prefix);
	int n = 0;

	for (const char *line = info; line; line = next_line(line)) {
		if (strncmp(line, prefix, len))
			continue;
		printf("%s%.*s", n++ ? "," : "", (int)strcspn(line + len, "\n"),
		       line + len);
	}
	return n;
}

/*
 * "name: NAME", "state: STATE", "chain: CHAIN", "frontend: nbd ADDR"...
 * become: id=ID name=NAME state=STATE chain=CHAIN nbd=ADDR[,ADDR]
 */
static void print_list_line(int id, const char *info)
{
	static const struct {
		const char *field, *prefix;
	} fields[] = {
		{"name", "name: "},
		{"state", "state: "},
		{"chain", "chain: "},
		{"nbd", "frontend: nbd "},
	};

	printf("id=%d", id);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		printf(" %s=", fields[i].field);
		if (!print_values(info, fields[i].prefix))
			fputs("-", stdout);
	}
	fputs("\n", stdout);
}

/*
 * Ask tapdisk pid for line; 0 with r filled, 1 when its socket was stale
 * (removed, nothing to show), or an exit status printed.
 */
static int ask_one(const struct cmd_opts *o, int pid, const char *line,
		   struct td_ctl_reply *r)
{
	char path[PATH_MAX];
	int err;

	tapctl_socket_path(o, pid, path, sizeof(path));
	err = td_ctl_call(path, line, o->timeout_s * 1000, r);
	if ((err == -ECONNREFUSED || err == -ENOENT) &&
	    td_ctl_process_gone(pid)) {
		unlink(path);
		fprintf(stderr,
			"tap-ctl: removed %s: tapdisk %d is not "
			"running\n",
			path, pid);
		return 1;
	}
	if (err || r->err)
		return tapctl_fail("tapdisk %d does not answer on %s: %s", pid,
				   path, err ? strerror(-err) : r->message);
	return 0;
}

/* See tap-ctl.h. */
int tapctl_each_tapdisk(const struct cmd_opts *o, const char *line,
			void (*fn)(void *opaque, int pid, const char *payload),
			void *opaque)
{
	int *pids, status = EXIT_SUCCESS;
	size_t count;
	int err = td_ctl_scan_run_dir(o->run_dir, &pids, &count);

	if (err)
		return tapctl_fail("cannot read the run directory %s: %s",
				   o->run_dir, strerror(-err));
	for (size_t i = 0; i < count; i++) {
		struct td_ctl_reply r;
		int st;

		td_ctl_reply_init(&r);
		st = ask_one(o, pids[i], line, &r);
		if (!st)
			fn(opaque, pids[i], td_strbuf_str(&r.payload));
		else if (st != 1)
			status = EXIT_FAILURE;
		td_ctl_reply_free(&r);
	}
	free(pids);
	return status;
}

static void print_line_cb(void *opaque, int pid, const char *payload)
{
	(void)opaque;
	print_list_line(pid, payload);
}

/* Elements of a JSON array, one per tapdisk: its own JSON object. */
static void print_json_cb(void *opaque, int pid, const char *payload)
{
	int *n = opaque;
	size_t len = strlen(payload);

	(void)pid;
	while (len && payload[len - 1] == '\n')
		len--;
	printf("%s%.*s", (*n)++ ? ",\n" : "\n", (int)len, payload);
}

/* Every tapdisk's text, a blank line between two. */
static void print_text_cb(void *opaque, int pid, const char *payload)
{
	int *n = opaque;

	(void)pid;
	printf("%s%s", (*n)++ ? "\n" : "", payload);
}

/* line to every tapdisk, printed as a JSON array of their answers. */
static int print_json_array(const struct cmd_opts *o, const char *line)
{
	int n = 0, status;

	fputs("[", stdout);
	status = tapctl_each_tapdisk(o, line, print_json_cb, &n);
	fputs(n ? "\n]\n" : "]\n", stdout);
	return status;
}

int tapctl_cmd_list(struct cmd_opts *o)
{
	if (o->json)
		return print_json_array(o, "info json");
	return tapctl_each_tapdisk(o, "info", print_line_cb, NULL);
}

/* stats --all [--json]. */
int tapctl_cmd_stats_all(struct cmd_opts *o)
{
	int n = 0;

	if (o->json)
		return print_json_array(o, "stats json");
	return tapctl_each_tapdisk(o, "stats", print_text_cb, &n);
}
