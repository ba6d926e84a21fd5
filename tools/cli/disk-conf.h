/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * disk-conf.h - the disk registry: one file per disk,
 * TAPSTRIPE_CONFDIR/disks/NAME.conf, that says how to serve the disk NAME:
 *
 *   # /etc/tapstripe/disks/web1.conf
 *   CHAIN=sort|stripe:/var/lib/tapstripe/web1.map
 *   OPTIONS=--nbd unix --max-inflight 256
 *
 * Lines KEY=VALUE (a systemd EnvironmentFile reads them too); '#' or ';'
 * begins a comment line; a VALUE may be quoted with "..." or '...'.
 * CHAIN is the driver chain (required); OPTIONS are more tapdisk options,
 * words split at blanks, quotes kept together.  `tapdisk --disk NAME`,
 * `tap-ctl create --disk NAME`, tapdisk@NAME.service and
 * tapstripe-xenwatch all read it here.
 */
#ifndef TAPSTRIPE_TOOLS_CLI_DISK_CONF_H
#define TAPSTRIPE_TOOLS_CLI_DISK_CONF_H

#include <stddef.h>

/* Overrides the registry's directory (tests, a second registry). */
#define TD_DISK_CONF_DIR_ENV "TAPSTRIPE_DISKDIR"

/* The largest registry file read. */
#define TD_DISK_CONF_MAX 8192

/* Words in OPTIONS, at most. */
#define TD_DISK_CONF_MAX_WORDS 64

struct td_disk_conf {
	char *chain;
	char *words[TD_DISK_CONF_MAX_WORDS + 1]; /* OPTIONS, NULL-ended */
	int nr_words;
	char *text; /* what chain and words point into */
};

/* override if set, else $TAPSTRIPE_DISKDIR if set, else
 * TAPSTRIPE_CONFDIR "/disks". */
const char *td_disk_conf_dir(const char *override);

/*
 * Parse a registry file's text into c (c->text takes a copy).  0, or
 * -EINVAL with the reason ("line 3: ...") in err[errlen]; -ENOMEM.
 */
int td_disk_conf_parse(const char *text, struct td_disk_conf *c, char *err,
		       size_t errlen);

/*
 * Read dir/name.conf into c.  0; -EINVAL for a bad name or file (why in
 * err), -ENOENT when there is no such file, another -errno from open/read
 * (err says which file).
 */
int td_disk_conf_load(const char *dir, const char *name, struct td_disk_conf *c,
		      char *err, size_t errlen);

void td_disk_conf_free(struct td_disk_conf *c);

/* Whether name may name a disk: 1-63 of [A-Za-z0-9._-], not '.' first. */
int td_disk_conf_name_ok(const char *name);

#endif
