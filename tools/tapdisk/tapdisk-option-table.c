/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tapdisk-option-table.c - tapdisk's options: names, arguments, ranges,
 * help, and which ones tap-ctl create passes on (tapdisk-options.h).
 * Linked into tapdisk and tap-ctl both.
 */
#include "config.h"

#include <limits.h>

#include "frontends/blkif/blkif.h"
#include "frontends/nbd/nbd.h"
#include "tapdisk/control/control.h"
#include "tapdisk/vbd.h"
#include "tools/cli/disk-conf.h"
#include "tools/tapdisk/tapdisk-options.h"
#include "tools/tapdisk/tapdisk.h"

/* Far above any useful queue, low enough to keep per-layer state small. */
#define MAX_INFLIGHT_LIMIT 65536

#define CREATE TAPDISK_OPT_CREATE
#define REPEAT TAPDISK_OPT_REPEAT

/* The help is laid out as printed. */
/* clang-format off */
const struct cli_option tapdisk_options[] = {
	{"chain", 'a', "CHAIN",
	 "the disk: drivers top first, joined by '|',\n"
	 "e.g. aio:/srv/disk.img, null:size=1G,\n"
	 "sort|aio:/srv/disk.img",
	 0, 0, 0, CREATE},
	{"disk", TAPDISK_KEY_DISK, "NAME",
	 "the disk NAME of the registry instead of -a:\n"
	 "its file DISK_DIR/NAME.conf gives CHAIN=... and\n"
	 "OPTIONS=... (more of these options; the command\n"
	 "line's come after them), and NAME is --name",
	 0, 0, 0, CREATE},
	{"disk-dir", TAPDISK_KEY_DISK_DIR, "DIR",
	 "the registry (default $" TD_DISK_CONF_DIR_ENV ", else\n"
	 TAPSTRIPE_CONFDIR "/disks)",
	 0, 0, 0, CREATE},
	{"nbd", TAPDISK_KEY_NBD, "ADDR",
	 "serve NBD on ADDR (repeatable, at most {max}):\n"
	 "unix:/path/to.sock, tcp:HOST:PORT, tcp::PORT\n"
	 "(all addresses), or unix for\n"
	 "RUN_DIR/nbd-NAME.sock",
	 0, TAPDISK_MAX_NBD_ADDRS, 0, CREATE | REPEAT},
	{"shm", TAPDISK_KEY_SHM, "PATH",
	 "serve blkif rings in shared memory on the Unix\n"
	 "socket PATH (repeatable, at most {max}; unix for\n"
	 "RUN_DIR/shm-NAME.sock); the protocol is in\n"
	 "doc/shm-protocol.md",
	 0, TAPDISK_MAX_SHM_PATHS, 0, CREATE | REPEAT},
	{"max-indirect-segments", TAPDISK_KEY_MAX_INDIRECT, "N",
	 "segments a blkif frontend may put in one request\n"
	 "({min}-{max}, default {default}; {min} refuses indirect\n"
	 "requests)",
	 BLKIF_NO_INDIRECT, BLKIF_MAX_INDIRECT_SEGMENTS,
	 BLKIF_MAX_INDIRECT_SEGMENTS, CREATE},
	{"xen", TAPDISK_KEY_XEN, "MODE",
	 "serve Xen guests' blkfront: auto (default: when\n"
	 "this is a Xen domain with xenstore), on (fail\n"
	 "without it) or off; devices are attached with\n"
	 "tap-ctl attach",
	 0, 0, 0, CREATE},
	{"name", TAPDISK_KEY_NAME, "NAME",
	 "the vbd's name in logs, stats and tap-ctl list\n"
	 "(letters, digits, '.', '_', '-'; default\n"
	 "vbd-PID)",
	 0, 0, 0, CREATE},
	{"read-only", 'r', NULL, "refuse writes", 0, 0, 0, CREATE},
	{"export-name", TAPDISK_KEY_EXPORT_NAME, "NAME",
	 "the NBD export name clients must ask for\n"
	 "(default: any name is accepted)",
	 0, 0, 0, CREATE},
	{"nbd-tls", TAPDISK_KEY_NBD_TLS, "MODE",
	 "TLS for NBD clients (NBD_OPT_STARTTLS): off, on\n"
	 "(offered, plaintext still served) or require\n"
	 "(nothing but STARTTLS before TLS); default\n"
	 "require with credentials, else off",
	 0, 0, 0, CREATE},
	{"nbd-tls-psk", TAPDISK_KEY_NBD_TLS_PSK, "FILE",
	 "TLS pre-shared keys: lines username:hexkey, as\n"
	 "written by psktool -u NAME -p FILE",
	 0, 0, 0, CREATE},
	{"nbd-tls-x509", TAPDISK_KEY_NBD_TLS_X509, "DIR",
	 "TLS certificate: DIR/server-cert.pem,\n"
	 "DIR/server-key.pem (and DIR/ca-cert.pem), as\n"
	 "qemu's tls-creds-x509",
	 0, 0, 0, CREATE},
	{"nbd-allow", TAPDISK_KEY_NBD_ALLOW, "CIDR",
	 "serve TCP clients from these addresses only\n"
	 "(repeatable, at most {max}), e.g. 10.0.0.0/8,\n"
	 "192.0.2.7, fd00::/8; others are closed at once",
	 0, TD_NBD_MAX_ALLOW, 0, CREATE | REPEAT},
	{"nbd-max-clients", TAPDISK_KEY_NBD_MAX_CLIENTS, "N",
	 "NBD clients at once past the handshake, and as\n"
	 "many more in it ({min}-{max}, default {default}); a\n"
	 "newcomer takes the slot of the one idle longest",
	 1, TD_NBD_MAX_CLIENTS, TD_NBD_DEFAULT_MAX_CLIENTS, CREATE},
	{"nbd-handshake-timeout", TAPDISK_KEY_NBD_HS_TIMEOUT, "SECONDS",
	 "close an NBD client not past the handshake after\n"
	 "SECONDS ({min}-{max}, default {default})",
	 1, TD_NBD_MAX_TIMEOUT_MS / 1000,
	 TD_NBD_DEFAULT_HANDSHAKE_TIMEOUT_MS / 1000, CREATE},
	{"nbd-io-timeout", TAPDISK_KEY_NBD_IO_TIMEOUT, "SECONDS",
	 "close an NBD client that takes longer to send a\n"
	 "request (header and WRITE data), or leaves its\n"
	 "replies untaken that long ({min}-{max}, default {default})",
	 1, TD_NBD_MAX_TIMEOUT_MS / 1000, TD_NBD_DEFAULT_IO_TIMEOUT_MS / 1000,
	 CREATE},
	{"nbd-idle-timeout", TAPDISK_KEY_NBD_IDLE_TIMEOUT, "SECONDS",
	 "close an NBD client with nothing in flight after\n"
	 "SECONDS ({min}-{max}; default {default}: never)",
	 0, TD_NBD_MAX_TIMEOUT_MS / 1000,
	 TD_NBD_DEFAULT_IDLE_TIMEOUT_MS / 1000, CREATE},
	{"max-inflight", TAPDISK_KEY_MAX_INFLIGHT, "N",
	 "requests in flight per driver layer ({min}-{max},\n"
	 "default {default})",
	 1, MAX_INFLIGHT_LIMIT, TD_VBD_DEFAULT_MAX_INFLIGHT, CREATE},
	{"poll-us", TAPDISK_KEY_POLL_US, "US",
	 "after work, poll the rings and the disk's\n"
	 "completions for US microseconds before sleeping,\n"
	 "so that a frontend need not notify and tapdisk\n"
	 "need not wake ({min}-{max};\n"
	 "default {default}: off; the window adapts to the\n"
	 "load, and polling stops for a while when tapdisk\n"
	 "gets less than 80% of a CPU or the host has more\n"
	 "runnable threads than CPUs; `tap-ctl poll -i ID\n"
	 "US` changes it)",
	 0, TD_LOOP_POLL_MAX_US, 0, CREATE},
	{"log-level", TAPDISK_KEY_LOG_LEVEL, "LEVEL",
	 "err, warn, info (default) or debug",
	 0, 0, 0, CREATE},
	{"log-file", TAPDISK_KEY_LOG_FILE, "PATH",
	 "append the log to PATH instead of stderr (as\n"
	 "--log file:PATH; SIGHUP opens PATH again)",
	 0, 0, 0, CREATE},
	{"log", TAPDISK_KEY_LOG, "TARGET",
	 "stderr (default), syslog (/dev/log; journald\n"
	 "serves it too), syslog:SOCKET or file:PATH;\n"
	 "syslog lines carry the ident tapdisk/NAME, a\n"
	 "priority and never stall I/O (dropped lines\n"
	 "are counted: tap-ctl stats, and at exit)",
	 0, 0, 0, CREATE},
	/* tap-ctl has --run-dir of its own and passes it on itself. */
	{"run-dir", TAPDISK_KEY_RUN_DIR, "DIR",
	 "where sockets live (default $" TD_CTL_RUN_DIR_ENV ", else "
	 TD_CTL_RUN_DIR_DEFAULT ")",
	 0, 0, 0, 0},
	{"foreground", 'f', NULL, "run in this terminal until a signal",
	 0, 0, 0, 0},
	{"ready-fd", TAPDISK_KEY_READY_FD, "FD",
	 "(used by tap-ctl) write \"OK PID\" or\n"
	 "\"ERR MESSAGE\" to FD once started, then close it",
	 0, INT_MAX, 0, 0},
	{"help", 'h', NULL, "this text", 0, 0, 0, 0},
	{"version", 'V', NULL, "the version", 0, 0, 0, 0},
};
/* clang-format on */

_Static_assert(sizeof(tapdisk_options) / sizeof(tapdisk_options[0]) <=
		       TAPDISK_MAX_OPTIONS,
	       "raise TAPDISK_MAX_OPTIONS");

const size_t tapdisk_nr_options =
	sizeof(tapdisk_options) / sizeof(tapdisk_options[0]);
