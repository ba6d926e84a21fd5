/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapdisk.h - what tapdisk's two files share: the parsed command line.
 */
#ifndef TAPSTRIPE_TOOLS_TAPDISK_H
#define TAPSTRIPE_TOOLS_TAPDISK_H

#include <stdbool.h>
#include <stdint.h>

#include "frontends/nbd/nbd-tls.h"

#define TAPDISK_MAX_NBD_ADDRS 4
#define TAPDISK_MAX_SHM_PATHS 4

/* --xen: serve Xen frontends when xenstore is there, always, never. */
enum { TAPDISK_XEN_AUTO, TAPDISK_XEN_ON, TAPDISK_XEN_OFF };

struct options {
	const char *chain;
	const char *disk;     /* --disk NAME: the registry's entry */
	const char *disk_dir; /* --disk-dir DIR */
	const char *nbd[TAPDISK_MAX_NBD_ADDRS];
	unsigned int nr_nbd;
	const char *shm[TAPDISK_MAX_SHM_PATHS];
	unsigned int nr_shm;
	uint32_t max_indirect_segments; /* 0: the blkif default */
	int xen;			/* TAPDISK_XEN_* */
	const char *name;
	const char *export_name;
	/* --nbd-tls, --nbd-tls-psk, --nbd-tls-x509, --nbd-allow */
	struct td_nbd_access nbd_access;
	bool nbd_tls_given; /* else: require with credentials, off without */
	const char *log_file;
	const char *log_target; /* --log: stderr, syslog[:SOCKET], file:PATH */
	const char *run_dir;
	uint32_t max_inflight;
	uint32_t poll_us; /* --poll-us: the event loop's polling budget */
	/* --nbd-*: 0 is the server's default (the idle timeout's: never) */
	uint32_t nbd_max_clients;
	uint32_t nbd_handshake_timeout_s;
	uint32_t nbd_io_timeout_s;
	uint32_t nbd_idle_timeout_s;
	int log_level;
	int ready_fd;
	bool read_only;
	bool foreground;
};

/*
 * Parse argv into o (defaults filled in).  Returns -1 to go on, or the
 * exit status to stop with: 0 after --help or --version, 2 after a usage
 * error (already printed).
 */
int tapdisk_parse_options(struct options *o, int argc, char **argv);

#endif
