/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl-blktap.c - refuse the command lines of blktap's tap-ctl.
 *
 * Xen's block-tap hotplug script (script=block-tap in an xl disk line) runs
 * a tap-ctl on PATH, and expects blktap's: the blktap kernel module or
 * tapdisk3, minors, "-p PID -m MINOR".  Both install /usr/sbin/tap-ctl.  A
 * call of that kind gets an error naming the clash and what to use instead,
 * and touches no tapdisk (doc/xen.md, "Xen's block-tap script").
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tap-ctl/tap-ctl.h"

/* Commands only blktap's tap-ctl has (Xen 4.17's block-tap calls "check";
 * later ones call allocate, spawn, open, free). */
static const char *const blktap_only[] = {
	"check", "allocate", "free",	"spawn",
	"open",	 "close",    "unpause", "major",
};

/* Commands both have, and the short options only blktap's gives them. */
static const struct {
	const char *command;
	const char *letters;
} blktap_shared[] = {
	{"list", "pmtfa"},   /* list -p PID -m MINOR -t TYPE -f FILE -a */
	{"create", "dRe2s"}, /* create -a TYPE:FILE -d DEV -R -e STACK ... */
	{"destroy", "pm"},   {"attach", "pm"}, {"detach", "pm"},
	{"pause", "pm"},     {"stats", "pm"},
};

#define NR(a) (sizeof(a) / sizeof((a)[0]))

/* A short option of letters ("-p", "-p12", "-Rd"), never a long one. */
static bool has_short_option(int argc, char **argv, const char *letters)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return false;
		if (argv[i][0] == '-' && argv[i][1] && argv[i][1] != '-' &&
		    strchr(letters, argv[i][1]))
			return true;
	}
	return false;
}

bool tapctl_blktap_call(int argc, char **argv)
{
	const char *cmd = argc > 0 ? argv[0] : "";

	for (size_t i = 0; i < NR(blktap_only); i++)
		if (!strcmp(cmd, blktap_only[i]))
			return true;
	/* A hotplug script of Xen's runs with XENBUS_PATH set: tapstripe's
	 * disks are started by tapstripe-xenwatch or tapdisk@.service. */
	if (!strcmp(cmd, "create") && getenv("XENBUS_PATH"))
		return true;
	for (size_t i = 0; i < NR(blktap_shared); i++)
		if (!strcmp(cmd, blktap_shared[i].command))
			return has_short_option(argc, argv,
						blktap_shared[i].letters);
	return false;
}

int tapctl_blktap_refuse(int argc, char **argv, FILE *err)
{
	fputs("tap-ctl: refused: 'tap-ctl", err);
	for (int i = 0; i < argc; i++)
		fprintf(err, " %s", argv[i]);
	fputs("' is a command line of blktap's tap-ctl,\n"
	      "  as Xen's block-tap hotplug script (script=block-tap) "
	      "runs it: it expects the\n"
	      "  blktap kernel module or tapdisk3, with minors "
	      "(-p PID -m MINOR).  This is\n"
	      "  tapstripe's tap-ctl, not blktap's (both are "
	      "/usr/sbin/tap-ctl); it did nothing\n"
	      "  and touched no tapdisk.  Serve the disk with tapstripe "
	      "instead: in the guest's\n"
	      "  xl config write\n"
	      "    disk = [ 'backendtype=qdisk, vdev=xvda, "
	      "target=tapstripe:NAME' ]\n"
	      "  (no script=block-tap), NAME being a disk of the "
	      "registry,\n"
	      "  " TAPSTRIPE_CONFDIR "/disks/NAME.conf;\n"
	      "  see 'tap-ctl --help' (XEN HOTPLUG SCRIPTS) and "
	      "doc/xen.md.\n",
	      err);
	return EXIT_USAGE;
}
