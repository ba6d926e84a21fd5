/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapdisk-options.h - tapdisk's options, one table for tapdisk's parser
 * and help and for tap-ctl create, which takes the same options and passes
 * them on, so the two cannot drift.
 */
#ifndef TAPSTRIPE_TOOLS_TAPDISK_OPTIONS_H
#define TAPSTRIPE_TOOLS_TAPDISK_OPTIONS_H

#include <stddef.h>

#include "tools/cli/cli.h"

/* getopt keys of the long-only options. */
enum {
	TAPDISK_KEY_NBD = CLI_KEY_LONG,
	TAPDISK_KEY_SHM,
	TAPDISK_KEY_MAX_INDIRECT,
	TAPDISK_KEY_XEN,
	TAPDISK_KEY_NAME,
	TAPDISK_KEY_EXPORT_NAME,
	TAPDISK_KEY_NBD_TLS,
	TAPDISK_KEY_NBD_TLS_PSK,
	TAPDISK_KEY_NBD_TLS_X509,
	TAPDISK_KEY_NBD_ALLOW,
	TAPDISK_KEY_MAX_INFLIGHT,
	TAPDISK_KEY_LOG_LEVEL,
	TAPDISK_KEY_LOG_FILE,
	TAPDISK_KEY_LOG,
	TAPDISK_KEY_RUN_DIR,
	TAPDISK_KEY_READY_FD,
	TAPDISK_KEY_NBD_MAX_CLIENTS,
	TAPDISK_KEY_NBD_HS_TIMEOUT,
	TAPDISK_KEY_NBD_IO_TIMEOUT,
	TAPDISK_KEY_NBD_IDLE_TIMEOUT,
	TAPDISK_KEY_DISK,
	TAPDISK_KEY_DISK_DIR,
	TAPDISK_KEY_POLL_US,
	TAPDISK_KEY_END, /* one past the last: where other tables go on */
};

/* struct cli_option.flags in tapdisk_options. */
enum {
	/* tap-ctl create takes it and passes it on */
	TAPDISK_OPT_CREATE = 1u << 0,
	/* may be given up to max times; else the last one counts */
	TAPDISK_OPT_REPEAT = 1u << 1,
};

/* Room for the table's entries (a static assertion checks it). */
#define TAPDISK_MAX_OPTIONS 32

/* Every option of tapdisk, in the order --help lists them. */
extern const struct cli_option tapdisk_options[];
extern const size_t tapdisk_nr_options;

#endif
