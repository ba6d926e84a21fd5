/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl-list.c - "tap-ctl list": one line per tapdisk whose control
 * socket is in the run directory.  A socket whose process is gone is
 * removed; one whose process lives but does not answer is reported.
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

static int list_one(const struct cmd_opts *o, int pid)
{
	struct td_ctl_reply r;
	char path[PATH_MAX];
	int err;

	tapctl_socket_path(o, pid, path, sizeof(path));
	td_ctl_reply_init(&r);
	err = td_ctl_call(path, "info", o->timeout_s * 1000, &r);
	if ((err == -ECONNREFUSED || err == -ENOENT) &&
	    td_ctl_process_gone(pid)) {
		unlink(path);
		fprintf(stderr,
			"tap-ctl: removed %s: tapdisk %d is not "
			"running\n",
			path, pid);
		err = 0;
	} else if (err || r.err) {
		tapctl_fail("tapdisk %d does not answer on %s: %s", pid, path,
			    err ? strerror(-err) : r.message);
		err = err ? err : r.err;
	} else {
		print_list_line(pid, td_strbuf_str(&r.payload));
	}
	td_ctl_reply_free(&r);
	return err;
}

int tapctl_cmd_list(struct cmd_opts *o)
{
	int *pids, status = EXIT_SUCCESS;
	size_t count;
	int err = td_ctl_scan_run_dir(o->run_dir, &pids, &count);

	if (err)
		return tapctl_fail("cannot read the run directory %s: %s",
				   o->run_dir, strerror(-err));
	for (size_t i = 0; i < count; i++)
		if (list_one(o, pids[i]))
			status = EXIT_FAILURE;
	free(pids);
	return status;
}
