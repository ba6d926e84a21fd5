/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl.c - stripe-ctl's command line: commands, options, help.
 *
 * stripe-ctl talks to stripe-master (master/client.h) and writes and reads
 * mapping files (drivers/stripe/map/map.h).  The commands live in
 * stripe-ctl-server.c, stripe-ctl-vdisk.c, stripe-ctl-resync.c and
 * stripe-ctl-session.c (kernel iSCSI sessions with iscsiadm),
 * stripe-ctl-lease.c (a disk's lease), stripe-ctl-host.c (fenced hosts)
 * and stripe-ctl-fence.c (fencing).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "drivers/stripe/iscsi/iscsi-conn.h"
#include "drivers/stripe/map/stripe-layout.h"
#include "tapdisk/control/control.h"
#include "master/client/host-id.h"
#include "tapdisk/driver.h"
#include "tools/cli/cli.h"
#include "tools/stripe-ctl/stripe-ctl.h"

#define DEFAULT_TIMEOUT_S   10
#define MAX_TIMEOUT_S	    86400
#define MAX_RETRIES	    100
#define MAX_LUN		    65535
#define MAX_POSITIONAL	    3 /* GROUP COMMAND ARG */
#define DEFAULT_UNIT_BYTES  (1ull << 20)
#define DEFAULT_BLOCK_BYTES 512
#define EXTRA_ANY	    UINT_MAX /* struct command.nr_extra */

/* Options, by the commands that take them. */
enum {
	O_PORTAL = 1u << 0,
	O_TARGET = 1u << 1,
	O_LUN = 1u << 2,
	O_SIZE = 1u << 3,
	O_ADDRESS = 1u << 4,
	O_BLOCK = 1u << 5,
	O_STRIPES = 1u << 6,
	O_UNIT = 1u << 7,
	O_REPLICAS = 1u << 8,
	O_OUTPUT = 1u << 9,
	O_NAME = 1u << 10,
	O_SERVER = 1u << 11,
	O_VDISK = 1u << 12,
	O_ALLOCATED = 1u << 13,
	O_RATE = 1u << 14,
	O_RUN_DIR = 1u << 15,
	O_HOST_ID = 1u << 16,
	O_TO = 1u << 17,
	O_FENCE = 1u << 18,
	O_EPOCH = 1u << 19,
	O_INITIATOR = 1u << 20,
	O_MAP = 1u << 21,
	O_HOST = 1u << 22,
	O_RACK = 1u << 23,
	O_SITE = 1u << 24,
	O_REGION = 1u << 25,
	O_REPAIR = 1u << 26,
	O_OFFSET = 1u << 27,
	O_REASON = 1u << 28,
	O_MAP_DIR = 1u << 29,
	O_REHOME = 1u << 30,
	O_GLOBAL = 1u << 31, /* --master --json --timeout --retries */
};
/* Beyond 32 bits: not enumerators (an enum constant is an int). */
#define O_CHAP ((uint64_t)1 << 32) /* --chap-user, --chap-secret-file */
#define O_NONE ((uint64_t)1 << 33) /* server chap --none */

#define REGION_HELP                                                          \
	"    --region-size G      the unit of dirty marks (a replica that\n" \
	"                         missed writes is resynchronised by\n"      \
	"                         regions): a multiple of 4K dividing the\n" \
	"                         extent size into at most 2048 regions\n"   \
	"                         (default 1M when it does, else the\n"      \
	"                         smallest size that does)\n"

#define CHAP_HELP                                                              \
	"    --chap-user USER     the LUN's CHAP account (a tgtd account\n"    \
	"                         bound to the target): 1-255 printable\n"     \
	"                         bytes, no space or '#'\n"                    \
	"    --chap-secret-file FILE\n"                                        \
	"                         a file holding its secret (one line; a\n"    \
	"                         final newline is dropped; '-' reads\n"       \
	"                         stdin): the secret never appears on a\n"     \
	"                         command line, in any output or in the\n"     \
	"                         master's log\n\n"                            \
	"The master keeps the account and gives its secret only to callers\n"  \
	"in its --allow networks; 'vdisk create', 'vdisk map' and re-homing\n" \
	"write it into the mapping files (mode 0600) of the disks on the\n"    \
	"LUN.  'server list' never shows it.\n"

#define REHOME_OPTS (O_MAP_DIR | O_RATE | O_RUN_DIR | O_HOST_ID)
#define REHOME_HELP                                                         \
	"    --map-dir DIR        where the disks' mapping files are, as\n" \
	"                         NAME.map (default " CTL_MAP_DIR ")\n"     \
	"    MAP...               the disks' mapping files instead\n"       \
	"    --rate RATE          copy at most RATE bytes per second, at\n" \
	"                         least 64K (default: the disk's\n"         \
	"                         resync_rate, 64M)\n"                      \
	"    --run-dir DIR        as for vdisk resync\n"                    \
	"    --host-id ID         as for vdisk resync\n"

struct command {
	const char *group; /* NULL for a one-word command */
	const char *name;
	uint64_t opts;	   /* O_* it accepts */
	uint64_t required; /* O_* it needs */
	const char *arg;   /* its positional argument, or NULL */
	const char *synopsis;
	const char *help;
	int (*run)(struct ctl_opts *o);
	const char *extra;     /* the words after arg, as help names them */
	unsigned int nr_extra; /* how many; EXTRA_ANY: any number */
};

static const struct command commands[] = {
	{NULL, "info", 0, 0, NULL, "info",
	 "Print the master's extent size and its counts of servers, disks\n"
	 "and extents.\n",
	 ctl_cmd_info, NULL, 0},
	{NULL, "metrics", O_OUTPUT, 0, NULL, "metrics [-o FILE]",
	 "Print the master's view in the Prometheus text format (see\n"
	 "doc/metrics.md): every server's extents, free extents, state,\n"
	 "replicas, stale replicas and moves (label server=ID, its address\n"
	 "and labels in tapstripe_master_server_info), every disk's stale\n"
	 "replicas, under-replicated extents and moves (label disk=NAME).\n"
	 "-o FILE writes FILE.tmp.PID and renames it to FILE, for\n"
	 "node-exporter's textfile collector.\n\n"
	 "    -o, --output FILE    write FILE atomically, not stdout\n",
	 ctl_cmd_metrics, NULL, 0},
	{"server", "add",
	 O_PORTAL | O_TARGET | O_LUN | O_SIZE | O_ADDRESS | O_BLOCK | O_HOST |
		 O_RACK | O_SITE | O_CHAP,
	 O_PORTAL | O_TARGET | O_LUN | O_SIZE, NULL,
	 "server add --portal HOST[:PORT] --target IQN --lun N --size SIZE\n"
	 "           [--address HOST] [--block-size BYTES]\n"
	 "           [--host LABEL] [--rack LABEL] [--site LABEL]\n"
	 "           [--chap-user USER --chap-secret-file FILE]",
	 "Register one iSCSI LUN with the master, which cuts it into extents.\n"
	 "Running it again with the same values changes nothing; a LUN "
	 "already\n"
	 "registered with other values is refused (labels count only when\n"
	 "given: change them with 'server label').\n\n"
	 "    --portal HOST[:PORT]  the iSCSI portal (port 3260 by default)\n"
	 "    --target IQN          the iSCSI target name\n"
	 "    --lun N               the LUN, 0-65535\n"
	 "    --size SIZE           the LUN's usable size, K/M/G/T suffixes\n"
	 "    --address HOST        the storage host's address (default: the\n"
	 "                          portal's host)\n"
	 "    --block-size BYTES    the LUN's block size: 512 (default), "
	 "1024,\n"
	 "                          2048 or 4096\n"
	 "    --host LABEL          the failure domain 'host': replicas of "
	 "one\n"
	 "                          extent never share one (default: the\n"
	 "                          address, ':' and '%' as '-')\n"
	 "    --rack LABEL          the rack (read within its site; default\n"
	 "                          none)\n"
	 "    --site LABEL          the site (default none)\n\n"
	 "A label is 1-63 of [A-Za-z0-9._-].  New extents' replicas go to\n"
	 "distinct sites when enough sites have free extents, else to\n"
	 "distinct racks, else to distinct hosts; a server without a rack or\n"
	 "site label counts as distinct from no one at that "
	 "level.\n\n" CHAP_HELP,
	 ctl_cmd_server_add, NULL, 0},
	{"server", "chap", O_TARGET | O_LUN | O_CHAP | O_NONE, O_TARGET | O_LUN,
	 NULL,
	 "server chap --target IQN --lun N\n"
	 "            (--chap-user USER --chap-secret-file FILE | --none)",
	 "Set or change the CHAP account tapdisk logs in to this LUN with,\n"
	 "or clear it (--none).  Setting what is set already changes\n"
	 "nothing.  Mapping files written before keep the old account: run\n"
	 "'vdisk map' again for each disk on the LUN (and restart its\n"
	 "tapdisk) to use the new one.\n\n" CHAP_HELP,
	 ctl_cmd_server_chap, NULL, 0},
	{"server", "label", O_TARGET | O_LUN | O_HOST | O_RACK | O_SITE,
	 O_TARGET | O_LUN, NULL,
	 "server label --target IQN --lun N [--host LABEL] [--rack LABEL]\n"
	 "             [--site LABEL]",
	 "Change a LUN's failure-domain labels (see 'server add'); the ones\n"
	 "not given stay.  --rack '' or --site '' makes that label unknown; a\n"
	 "host label cannot be empty.  Labels already as given change\n"
	 "nothing.  Extents already placed stay where they are: the master\n"
	 "refuses a host label that another replica of one of the LUN's\n"
	 "extents already has.\n",
	 ctl_cmd_server_label, NULL, 0},
	{"server", "drain", O_TARGET | O_LUN, O_TARGET | O_LUN, NULL,
	 "server drain --target IQN --lun N",
	 "Place no new extents on this LUN; the disks that use it keep it.\n",
	 ctl_cmd_server_drain, NULL, 0},
	{"server", "fail", O_TARGET | O_LUN | REHOME_OPTS | O_REHOME,
	 O_TARGET | O_LUN, NULL,
	 "server fail --target IQN --lun N [[--map-dir DIR | MAP...]\n"
	 "            [--rate RATE] [--run-dir DIR] [--host-id ID] |\n"
	 "            --mark-only]",
	 "Mark a LUN failed for good (its host is gone): the master places\n"
	 "nothing on it any more and counts its replicas as lost, so that\n"
	 "'vdisk list' shows the disks' under-replicated extents.  Failing it\n"
	 "again says 'already failed' and succeeds (--json: \"changed\":\n"
	 "false, \"state\": \"failed\").  There is no way back: 'server add'\n"
	 "of the same target and LUN is refused while it is failed; once no\n"
	 "replica is left on it, 'server remove' it and add it again as a\n"
	 "new, empty LUN.\n\n"
	 "It then re-homes every replica the LUN held, as 'server\n"
	 "evacuate' does, copying from the surviving replicas (the LUN is\n"
	 "not read); run again, it finishes what an interrupted one left.\n"
	 "With --mark-only only the master is told, nothing is copied\n"
	 "(then 'extent move begin --reason fail' one slot at a time, or\n"
	 "'server fail' again without it).\n\n"
	 "    --mark-only          mark it failed at the master, move "
	 "nothing\n"
	 "    --rehome             re-home (the default; kept for "
	 "scripts)\n" REHOME_HELP,
	 ctl_cmd_server_fail, "[MAP...]", EXTRA_ANY},
	{"server", "evacuate", O_TARGET | O_LUN | REHOME_OPTS, O_TARGET | O_LUN,
	 NULL,
	 "server evacuate --target IQN --lun N [--map-dir DIR | MAP...]\n"
	 "                [--rate RATE] [--run-dir DIR] [--host-id ID]",
	 "Move every replica off a LUN while the disks stay in use: the LUN\n"
	 "is drained first (no new extents), then for each replica it holds\n"
	 "the master places a new extent on another server ('extent move\n"
	 "begin': a host none of the extent's other replicas is on, the\n"
	 "widest failure domain available), the stripe driver copies the\n"
	 "replica there, online in the tapdisk that serves the disk (new\n"
	 "writes go to both during the copy) or, when none does, offline in\n"
	 "this process with the lease rules of 'vdisk resync', and swaps it\n"
	 "into the mapping file atomically; only then does the master free\n"
	 "the old extent ('extent move commit').  One replica at a time, at\n"
	 "most RATE bytes per second.  Every step can be interrupted (Ctrl-C,\n"
	 "kill -9 of stripe-ctl, tapdisk or the master) and the command run\n"
	 "again finishes the job from the mapping files and the master's\n"
	 "moves: no extent is leaked or owned twice, no map names a freed\n"
	 "one.  A disk's mapping file is DIR/NAME.map, or one of the MAP\n"
	 "files given.  A line per replica moved goes to stderr (redrawn on\n"
	 "a tty), a summary to stdout.  When placement cannot keep an\n"
	 "extent's spread (the LUN was the last of its site or rack with\n"
	 "room) a note says so and the move goes on to a distinct host; with\n"
	 "no distinct host left the replica stays and the command fails.\n"
	 "Exit 0 only when the LUN holds no extent of any disk any more\n"
	 "(then 'server remove' works).  --json: \"server\", \"reason\",\n"
	 "\"replicas_before\", \"moved\", \"committed\", \"already\",\n"
	 "\"aborted\", \"failed\", \"left\", \"bytes_copied\", \"copy_ms\",\n"
	 "\"copy_rate_bytes_per_s\", \"elapsed_ms\" and \"moves\" (one object\n"
	 "per replica: slot, \"outcome\", new server, file, mode, "
	 "error).\n\n" REHOME_HELP,
	 ctl_cmd_server_evacuate, "[MAP...]", EXTRA_ANY},
	{"server", "remove", O_TARGET | O_LUN, O_TARGET | O_LUN, NULL,
	 "server remove --target IQN --lun N",
	 "Forget a LUN that holds no allocated extent (destroy its disks\n"
	 "first).  Removing a LUN that is not registered succeeds.\n",
	 ctl_cmd_server_remove, NULL, 0},
	{"server", "list", 0, 0, NULL, "server list",
	 "Print every registered LUN: id, address, portal, target, LUN, "
	 "size,\n"
	 "extents, free extents, whether it is draining, its host, rack and\n"
	 "site labels ('-': none), and (issue #19) its state (ok, draining or\n"
	 "failed), the replicas it holds, how many of them are stale, and\n"
	 "the moves in progress from and to it.  --json adds the keys\n"
	 "\"state\", \"replicas\", \"stale_replicas\", \"moves_from\" and\n"
	 "\"moves_to\" to each server.\n",
	 ctl_cmd_server_list, NULL, 0},
	{"vdisk", "create",
	 O_SIZE | O_STRIPES | O_UNIT | O_REPLICAS | O_OUTPUT | O_REGION,
	 O_SIZE | O_STRIPES, "NAME",
	 "vdisk create NAME --size SIZE --stripes S [--stripe-unit U]\n"
	 "             [--replicas R] [--region-size G] [-o FILE]",
	 "Allocate the extents of a striped disk of SIZE bytes and write its\n"
	 "mapping file, the one argument tapdisk needs to serve it\n"
	 "(stripe:FILE).  Each column gets J = ceil(ceil(SIZE/(U*S))*U/E)\n"
	 "extents, E being the master's extent size.  Running it again with\n"
	 "the same values returns the same extents and rewrites the file;\n"
	 "other values for an existing NAME are refused.\n\n"
	 "    --size SIZE          the disk's size, a multiple of 512,\n"
	 "                         K/M/G/T suffixes (binary)\n"
	 "    --stripes S          columns, 1-256\n"
	 "    --stripe-unit U      a power of two from 4K to 1G (default 1M);\n"
	 "                         it must divide the extent size\n"
	 "    --replicas R         copies of every extent, on distinct hosts,\n"
	 "                         1-4 (default 1): spread over distinct\n"
	 "                         sites, else racks, as far as the labels\n"
	 "                         and free extents allow (the output says\n"
	 "                         which extents could not be)\n" REGION_HELP
	 "    -o, --output FILE    the mapping file (default\n"
	 "                         " CTL_MAP_DIR "/NAME.map)\n",
	 ctl_cmd_vdisk_create, NULL, 0},
	{"vdisk", "map", O_SIZE | O_UNIT | O_OUTPUT | O_REGION, O_SIZE, "NAME",
	 "vdisk map NAME --size SIZE [--stripe-unit U] [--region-size G]\n"
	 "          [-o FILE]",
	 "Write the mapping file of a disk that exists at the master, with\n"
	 "the same writer as 'vdisk create' and the replica states the master\n"
	 "records: a host that is to serve the disk (the destination of a\n"
	 "live migration) gets its file from the master, without a shared\n"
	 "file system.  The master keeps neither the disk's size nor its\n"
	 "stripe unit: give the ones 'vdisk create' was given (checked\n"
	 "against the disk's columns and extents; the file is then the same\n"
	 "byte for byte).  Writing over a file again is fine; a file a\n"
	 "tapdisk holds locked (it serves the disk from it) is refused.  The\n"
	 "master keeps no CHAP credentials (issue #20): the file written has\n"
	 "none, so copy the file of a disk whose servers need CHAP instead.\n\n"
	 "    --size SIZE          the disk's size, as given to vdisk create\n"
	 "    --stripe-unit U      its stripe unit, as given (default "
	 "1M)\n" REGION_HELP
	 "    -o, --output FILE    the mapping file (default\n"
	 "                         " CTL_MAP_DIR "/NAME.map)\n",
	 ctl_cmd_vdisk_map, NULL, 0},
	{"vdisk", "show", O_NAME, 0, "FILE", "vdisk show FILE | --name NAME",
	 "Check a mapping file and print it: geometry, servers, extents and\n"
	 "the state of each replica (ok, or stale: it missed writes, with\n"
	 "how many of its regions did), and the move targets being filled\n"
	 "(replicas being re-homed) with the regions not yet copied.  Needs\n"
	 "no master.  --name NAME prints the master's record of the disk\n"
	 "instead: its servers, extents and the replica states the master\n"
	 "was told, and the disk's lease (holder, epoch, and whether a fence\n"
	 "is pending: a fenced takeover not yet confirmed, do not serve).\n"
	 "With --name each replica on a failed server shows as lost, each\n"
	 "extent with fewer live copies than replicas as under-replicated,\n"
	 "and each replica being moved with its new server and offset\n"
	 "(--json: \"under_replicated\", \"failed_servers\", \"moves\", and\n"
	 "per extent \"live\", \"under_replicated\", \"moving\").\n\n"
	 "    --name NAME          the disk, as the master knows it\n",
	 ctl_cmd_vdisk_show, NULL, 0},
	{"vdisk", "destroy", O_NAME, 0, "FILE",
	 "vdisk destroy FILE | --name NAME",
	 "Free a disk's extents at the master and remove its mapping file.\n"
	 "Refused while the file is open (locked) by a tapdisk.  The master\n"
	 "is the one the file names unless --master is given.  --name NAME\n"
	 "frees the extents of a disk whose file is lost.\n\n"
	 "    --name NAME          the disk to free, without a mapping file\n",
	 ctl_cmd_vdisk_destroy, NULL, 0},
	{"vdisk", "list", 0, 0, NULL, "vdisk list",
	 "Print every disk the master knows: name, columns, extents per\n"
	 "column, replicas, how many replicas are stale, how many extents\n"
	 "are under-replicated (fewer live copies than replicas: a copy is\n"
	 "live when it is not stale and its server has not failed) and how\n"
	 "many of its replicas are being moved ('extent move').  A snapshot\n"
	 "ends its line with snapshot-of=SOURCE, and (incomplete) while its\n"
	 "copy is not done.  --json keys: \"under_replicated\", \"moves\"\n"
	 "(issue #19), \"source\" (\"\" for a disk that is no snapshot),\n"
	 "\"complete\" (issue #21), with the others.\n",
	 ctl_cmd_vdisk_list, NULL, 0},
	{"vdisk", "mark", O_NAME, 0, "FILE",
	 "vdisk mark FILE|--name NAME COLUMN EXTENT REPLICA stale|ok",
	 "Record at the master that one replica of one extent is stale (it\n"
	 "missed writes its other replicas took) or ok (in step again).\n"
	 "tapdisk does this by itself when a replica fails; this is for\n"
	 "operators, to set the master's record right.  The mapping file is\n"
	 "not changed: tapdisk serves the disk by the states in the file, and\n"
	 "a note says when the file disagrees.  COLUMN, EXTENT and REPLICA\n"
	 "count from 0, as 'vdisk show' prints them.  The master is the one\n"
	 "the file names unless --master is given.  Marking a replica with\n"
	 "the state it has already changes nothing.\n\n"
	 "    --name NAME          the disk, without its mapping file\n",
	 ctl_cmd_vdisk_mark, "COLUMN EXTENT REPLICA stale|ok", 4},
	{"vdisk", "resync", O_RATE | O_RUN_DIR | O_HOST_ID, 0, "FILE",
	 "vdisk resync FILE [--rate RATE] [--run-dir DIR] [--host-id ID]",
	 "Copy every stale replica of the disk from a live replica of its\n"
	 "extent, then clear its mark in the mapping file (and tell the\n"
	 "master).  When a tapdisk serves FILE (it holds the file's lock),\n"
	 "that tapdisk does it online, while the disk stays in use: the one\n"
	 "in the run directory whose chain names FILE is sent 'driver stripe\n"
	 "resync' (as tap-ctl driver does) and followed to the end.  Else\n"
	 "stripe-ctl opens the disk itself, with the same stripe driver, for\n"
	 "the time of the copy, as this host: it takes the disk's lease, so\n"
	 "the lease is looked at first.  Held by another host: refused,\n"
	 "naming it (run the resync on that host, or once it has released\n"
	 "the lease or handed it over); nothing is written.  Free: taken for\n"
	 "the copy and released again when it ends (done, failed or\n"
	 "stopped), at the epoch it was taken at.  Held by this host: kept.\n"
	 "A refusal of the driver's (a fence pending, this host fenced, the\n"
	 "master unreachable) is printed as it says it.  A progress line goes\n"
	 "to stderr.  Succeeds when no replica is stale any more (nothing\n"
	 "stale: says so); fails when one could not be copied (its extent\n"
	 "has no live replica, its server is down).  Ctrl-C stops after the\n"
	 "chunk in flight: what is not copied yet stays stale.  --timeout\n"
	 "bounds each request to the tapdisk.\n\n"
	 "    --rate RATE          at most RATE bytes per second, at least\n"
	 "                         64K (K/M/G; default: the chain's\n"
	 "                         resync_rate, 64M)\n"
	 "    --run-dir DIR        where the tapdisks' control sockets are\n"
	 "                         (default $" TD_CTL_RUN_DIR_ENV ", else\n"
	 "                         " TD_CTL_RUN_DIR_DEFAULT ")\n"
	 "    --host-id ID         offline, act as host ID (default\n"
	 "                         $" MASTER_HOST_ID_ENV ", else\n"
	 "                         " MASTER_HOST_ID_FILE ", else the host\n"
	 "                         name)\n",
	 ctl_cmd_vdisk_resync, NULL, 0},
	{"vdisk", "verify", O_RATE | O_RUN_DIR | O_HOST_ID | O_REPAIR, 0,
	 "NAME|FILE",
	 "vdisk verify NAME|FILE [--repair] [--rate RATE] [--run-dir DIR]\n"
	 "             [--host-id ID]",
	 "Scrub: read every extent from each of its replicas that is not\n"
	 "stale, chunk by chunk (resync_chunk, 1 MiB), and compare them;\n"
	 "each chunk is locked against writes while it is read, so the disk\n"
	 "stays in use.  NAME is " CTL_MAP_DIR "/NAME.map.  Online through\n"
	 "the tapdisk that serves the disk, else offline with the driver in\n"
	 "this process, with the lease rules of 'vdisk resync'.  Prints each\n"
	 "mismatch with its place (column, extent, replicas, offset in the\n"
	 "extent and on the disk, chunk) and the extents that could not be\n"
	 "compared (a server down).  With --repair, a replica that differs\n"
	 "from a strict majority of the compared replicas (R >= 3) is\n"
	 "rewritten from it and its server's cache synchronised; with two\n"
	 "replicas that differ nothing can tell which is right: the chunk is\n"
	 "reported as undecided, never guessed.  Stale replicas are not\n"
	 "compared (resync's job).  A progress line goes to stderr.  Exit 0\n"
	 "when no mismatch remains (none, or all repaired) and every extent\n"
	 "was compared; 1 otherwise.  Ctrl-C stops after the chunk in\n"
	 "flight.\n\n"
	 "    --repair             rewrite the replicas outvoted by the\n"
	 "                         majority\n"
	 "    --rate RATE          at most RATE bytes read per second, across\n"
	 "                         replicas, at least 64K (default: the\n"
	 "                         chain's resync_rate, 64M)\n"
	 "    --run-dir DIR        as for vdisk resync\n"
	 "    --host-id ID         as for vdisk resync\n",
	 ctl_cmd_vdisk_verify, NULL, 0},
	{"vdisk", "lease show", 0, 0, "NAME", "vdisk lease show NAME",
	 "Print a disk's lease at the master: the host that holds it (the one\n"
	 "host allowed to serve it), its epoch (it grows at every change of\n"
	 "holder), the previous holder, the time of the last change, and\n"
	 "fence_pending: after a fenced takeover, until the new holder has\n"
	 "preempted the old one on every LUN (the new holder must not serve\n"
	 "before).\n",
	 ctl_cmd_lease_show, NULL, 0},
	{"vdisk", "lease acquire", O_HOST_ID, 0, "NAME",
	 "vdisk lease acquire NAME [--host-id ID]",
	 "Take a disk's lease for this host, as tapdisk does before serving\n"
	 "it.  A lease this host holds already is kept at its epoch.  Refused\n"
	 "when another host holds it: the message names that host and says\n"
	 "what to do (handover there, or takeover if it is dead); and when\n"
	 "this host was fenced (EFENCED, see 'stripe-ctl host readmit').\n\n"
	 "    --host-id ID         act as host ID (default $" MASTER_HOST_ID_ENV
	 ", else\n"
	 "                         " MASTER_HOST_ID_FILE ", else the host "
	 "name)\n",
	 ctl_cmd_lease_acquire, NULL, 0},
	{"vdisk", "lease release", O_HOST_ID | O_EPOCH, 0, "NAME",
	 "vdisk lease release NAME [--host-id ID] [--epoch N]",
	 "Give up this host's lease on a disk (stop its tapdisk first).  Only\n"
	 "the holder may, at the lease's epoch; releasing again succeeds.\n\n"
	 "    --host-id ID         act as host ID (default $" MASTER_HOST_ID_ENV
	 ", else\n"
	 "                         " MASTER_HOST_ID_FILE ", else the host "
	 "name)\n"
	 "    --epoch N            the epoch the lease must be at (default: "
	 "the one\n"
	 "                         the master shows now)\n",
	 ctl_cmd_lease_release, NULL, 0},
	{"vdisk", "lease handover", O_HOST_ID | O_EPOCH | O_TO, O_TO, "NAME",
	 "vdisk lease handover NAME --to HOST [--host-id ID] [--epoch N]",
	 "Hand this host's lease on a disk to another host (live migration:\n"
	 "after the source stopped writing).  The epoch grows by one.  Only\n"
	 "the holder may; repeating it succeeds, unchanged.\n\n"
	 "    --to HOST            the host that gets the lease\n"
	 "    --host-id ID         act as host ID (default $" MASTER_HOST_ID_ENV
	 ", else\n"
	 "                         " MASTER_HOST_ID_FILE ", else the host "
	 "name)\n"
	 "    --epoch N            the epoch the lease must be at (default: "
	 "the one\n"
	 "                         the master shows now)\n",
	 ctl_cmd_lease_handover, NULL, 0},
	{"vdisk", "lease takeover",
	 O_HOST_ID | O_EPOCH | O_FENCE | O_INITIATOR | O_MAP, 0, "NAME",
	 "vdisk lease takeover NAME [--fence [--initiator IQN] [--map FILE]]\n"
	 "             [--host-id ID] [--epoch N]",
	 "Take a disk's lease by force from the host that holds it (a dead or\n"
	 "cut-off host).  The epoch grows by one.  Refused when the lease is\n"
	 "no longer at the epoch expected (it changed meanwhile).  Without\n"
	 "--fence the old host keeps write access to the LUNs: make sure it\n"
	 "is stopped.\n\n"
	 "--fence fences the old host on the storage servers themselves, as\n"
	 "fence_scsi does (SCSI-3 persistent reservations): on every LUN the\n"
	 "disk has extents on, this host's key is registered, the old host's\n"
	 "key is preempted (PREEMPT AND ABORT; PREEMPT on servers without it,\n"
	 "tgtd: then the old host's commands the LUN already accepted are\n"
	 "not aborted, the output says so) and a Write Exclusive - "
	 "Registrants\n"
	 "Only reservation is made if the LUN has none.  From then on every\n"
	 "write of the old host to those LUNs fails at the server with\n"
	 "RESERVATION CONFLICT: the whole host is fenced from them, for every\n"
	 "disk it serves there, until 'stripe-ctl host readmit HOST' lets it\n"
	 "back.  A progress line per LUN goes to stderr.  When every LUN is\n"
	 "fenced the master is told and the disk may be served (the lease's\n"
	 "fence_pending becomes false); a LUN that cannot be fenced\n"
	 "(unreachable, refused) fails the command (exit status 1), naming\n"
	 "it, and the disk stays unserved (fence pending) until the same\n"
	 "command is run again and completes.  It is safe to run again at any\n"
	 "time, after a failure or a kill too: it resumes, and a LUN fenced\n"
	 "already is left unchanged.  --timeout bounds each LUN.\n\n"
	 "    --fence              fence the old holder on the LUNs (above)\n"
	 "    --initiator IQN      the iSCSI initiator name to fence with\n"
	 "                         (default " ISCSI_CONN_DEFAULT_INITIATOR ",\n"
	 "                         tapdisk's: the targets' ACLs admit it)\n"
	 "    --map FILE           a mapping file of the disk: CHAP "
	 "credentials\n"
	 "                         for the LUNs that need them (the master\n"
	 "                         keeps none)\n"
	 "    --host-id ID         act as host ID (default $" MASTER_HOST_ID_ENV
	 ", else\n"
	 "                         " MASTER_HOST_ID_FILE ", else the host "
	 "name)\n"
	 "    --epoch N            the epoch the lease must be at (default: "
	 "the one\n"
	 "                         the master shows now)\n",
	 ctl_cmd_lease_takeover, NULL, 0},
	{"host", "list", 0, 0, NULL, "host list",
	 "Print every fenced host: the host, the host that fenced it, the\n"
	 "disk and the epoch of that takeover, and when.  A takeover with\n"
	 "--fence of a disk from a live holder fences that holder: its key is\n"
	 "preempted on the disk's LUNs, so the storage servers refuse its\n"
	 "writes (RESERVATION CONFLICT), and the master refuses it every\n"
	 "lease (EFENCED) until it is re-admitted.\n",
	 ctl_cmd_host_list, NULL, 0},
	{"host", "readmit", 0, 0, "HOST", "host readmit HOST",
	 "Re-admit a fenced host: the master forgets its fence and it may\n"
	 "acquire leases again.  Before, make sure the host is sane:\n"
	 "every tapdisk it ran for the fenced disk (and any other disk taken\n"
	 "over from it) is stopped, and whatever it had queued is gone (a\n"
	 "reboot is the sure way); its writes were refused since the fence.\n"
	 "Re-admitting a host that is not fenced succeeds, unchanged.\n",
	 ctl_cmd_host_readmit, NULL, 0},
	{"extent", "move begin", O_TARGET | O_LUN | O_REASON, O_TARGET | O_LUN,
	 "NAME",
	 "extent move begin NAME COLUMN EXTENT REPLICA --target IQN --lun N\n"
	 "             [--reason evacuate|fail]",
	 "Begin re-homing one replica of one extent of disk NAME, now on the\n"
	 "LUN given (the old one): the master places a new extent on another\n"
	 "LUN (never a draining or failed one, on a host none of the\n"
	 "extent's other replicas is on, over the widest failure domain the\n"
	 "labels allow), locks it for the move and prints it.  Then copy the\n"
	 "replica there, switch the mapping file to it and 'extent move\n"
	 "commit'.  Asked again: the same move.  When the replica is not on\n"
	 "that LUN any more (the move was committed): says so (\"done\": "
	 "true)\n"
	 "and changes nothing.  COLUMN, EXTENT and REPLICA count from 0.\n\n"
	 "    --target IQN, --lun N  the LUN the replica is on now\n"
	 "    --reason R           evacuate (the LUN drains; default) or fail\n"
	 "                         (the LUN is gone)\n",
	 ctl_cmd_move_begin, "COLUMN EXTENT REPLICA", 3},
	{"extent", "move commit", O_TARGET | O_LUN | O_OFFSET,
	 O_TARGET | O_LUN | O_OFFSET, "NAME",
	 "extent move commit NAME COLUMN EXTENT REPLICA --target IQN --lun N\n"
	 "             --offset BYTES",
	 "Finish a move once the new extent holds the replica's data and the\n"
	 "mapping file names it: the new extent becomes the replica (ok), the\n"
	 "old one is freed (a failed LUN's is never used again), the move is\n"
	 "forgotten.  Committing again succeeds, unchanged.\n\n"
	 "    --target IQN, --lun N  the move's new LUN\n"
	 "    --offset BYTES       the new extent's offset in it, as 'extent\n"
	 "                         move begin' printed it\n",
	 ctl_cmd_move_commit, "COLUMN EXTENT REPLICA", 3},
	{"extent", "move abort", O_TARGET | O_LUN | O_OFFSET,
	 O_TARGET | O_LUN | O_OFFSET, "NAME",
	 "extent move abort NAME COLUMN EXTENT REPLICA --target IQN --lun N\n"
	 "             --offset BYTES",
	 "Give up a move before its commit: the new extent is freed, the\n"
	 "replica stays where it was.  Aborting again succeeds, unchanged; a\n"
	 "committed move cannot be aborted.\n\n"
	 "    --target IQN, --lun N  the move's new LUN\n"
	 "    --offset BYTES       the new extent's offset in it\n",
	 ctl_cmd_move_abort, "COLUMN EXTENT REPLICA", 3},
	{"extent", "move list", O_VDISK | O_TARGET | O_LUN, 0, NULL,
	 "extent move list [--vdisk NAME] [--target IQN --lun N]",
	 "Print the moves in progress (begun, neither committed nor aborted):\n"
	 "disk, column, extent, replica, reason, old server and offset, new\n"
	 "server and offset.  A rerun of an evacuation resumes these.\n\n"
	 "    --vdisk NAME         only this disk's moves\n"
	 "    --target IQN, --lun N  only moves from or to this LUN\n",
	 ctl_cmd_move_list, NULL, 0},
	{"extents", "list", O_SERVER | O_VDISK | O_ALLOCATED, 0, NULL,
	 "extents list [--server ID]... [--vdisk NAME] [--allocated]",
	 "Print extents: server, index, byte offset in the LUN, and the disk,\n"
	 "column, extent and replica that own it ('move-target', --json\n"
	 "\"move_target\": the new extent of a move of that replica, not yet\n"
	 "its replica; see 'extent move').\n\n"
	 "    --server ID          only this server (repeatable, see server "
	 "list)\n"
	 "    --vdisk NAME         only this disk's extents\n"
	 "    --allocated          only allocated extents\n",
	 ctl_cmd_extents_list, NULL, 0},
	{"session", "login", 0, 0, "FILE", "session login FILE [SERVER]...",
	 "Log kernel iSCSI sessions (open-iscsi's iscsiadm) in for the\n"
	 "servers of a mapping file (all, or the SERVER numbers of 'vdisk\n"
	 "show'), wait up to --timeout seconds for each LUN's block device,\n"
	 "check its block size and size against the file, and write the\n"
	 "device into the file (its 'device' key): tapdisk then reads and\n"
	 "writes that device (O_DIRECT, libaio) instead of logging in\n"
	 "itself.  A session already logged in is reused.  Needs iscsid\n"
	 "running and the kernel's iscsi_tcp driver; refused while a\n"
	 "tapdisk serves FILE.  CHAP credentials come from the file.\n",
	 ctl_cmd_session_login, "SERVER", EXTRA_ANY},
	{"session", "logout", 0, 0, "FILE", "session logout FILE [SERVER]...",
	 "Remove the device of the servers (all that have one, or the\n"
	 "SERVER numbers) from the mapping file, then log their kernel\n"
	 "sessions out, except one that another mapping file of the same\n"
	 "directory still names.  tapdisk goes back to its own iSCSI\n"
	 "sessions for them.  Refused while a tapdisk serves FILE.\n",
	 ctl_cmd_session_logout, "SERVER", EXTRA_ANY},
	{"session", "list", 0, 0, "FILE", "session list FILE [SERVER]...",
	 "Print each server of the mapping file: its device in the file and\n"
	 "the kernel session and block device found for its target, portal\n"
	 "and LUN.\n",
	 ctl_cmd_session_list, "SERVER", EXTRA_ANY},
	{"vdisk", "resize", O_SIZE | O_RUN_DIR, O_SIZE, "NAME|FILE",
	 "vdisk resize NAME|FILE --size SIZE [--run-dir DIR]",
	 "Grow a striped disk to SIZE bytes (issue #21).  The mapping file\n"
	 "is locked for the whole command; the master grants the extents\n"
	 "the new size needs in every column (placed as 'vdisk create'\n"
	 "places them, same columns and replicas); the file is rewritten\n"
	 "under its lock, atomically, keeping every replica state, dirty\n"
	 "region and move it has.  Disks only grow: a SIZE below the disk's\n"
	 "size is refused with nothing changed; the disk's size again says\n"
	 "so and succeeds.  Interrupted (even by kill -9) after the master\n"
	 "granted the extents, the same command run again finishes the job\n"
	 "(the master answers a repeated grow with the same extents).  NAME\n"
	 "is " CTL_MAP_DIR "/NAME.map.  The master is the one the file\n"
	 "names unless --master is given.  A disk served by a tapdisk (it\n"
	 "holds the file's lock) is not stopped: the grown map is written\n"
	 "next to the file, as FILE.grow (atomic, synced), and the tapdisk\n"
	 "is asked to take it at once (its control 'resize', as 'tap-ctl\n"
	 "resize -i PID'): it rewrites the file and serves the new size (NBD\n"
	 "clients see it when they connect again, Xen guests are told).  A\n"
	 "tapdisk that cannot now (a resync, verify, move or hand-over runs:\n"
	 "EBUSY, said) keeps its size and FILE.grow stays: 'tap-ctl resize\n"
	 "-i PID' or this command again takes it later, or the tapdisk's\n"
	 "next open.  A FILE.grow that does not apply (another disk, or\n"
	 "taken already) is removed with the reason.  A resize that gets\n"
	 "the lock takes a FILE.grow left behind first.\n"
	 "--json: \"vdisk\", \"file\", \"changed\", \"old_size_bytes\",\n"
	 "\"size_bytes\", \"old_extents_per_column\",\n"
	 "\"extents_per_column\"; served: \"served_by_pid\", \"taken\",\n"
	 "\"served_size_bytes\" (taken) or \"pending_file\", and\n"
	 "\"tapdisk_error\" when it refused or could not be asked.\n\n"
	 "    --size SIZE          the new size, a multiple of 512, not below\n"
	 "                         the disk's (K/M/G/T, binary)\n"
	 "    --run-dir DIR        where to look for the tapdisk serving the\n"
	 "                         disk (its control socket)\n",
	 ctl_cmd_vdisk_resize, NULL, 0},
	{"vdisk", "snapshot", O_OUTPUT | O_RUN_DIR | O_HOST_ID, 0, "SRC",
	 "vdisk snapshot SRC NEW [-o FILE] [--run-dir DIR] [--host-id ID]",
	 "Make NEW a point-in-time copy of the striped disk SRC (a mapping\n"
	 "file, or NAME for " CTL_MAP_DIR "/NAME.map) while SRC stays in\n"
	 "use (issue #21).  The master gives NEW extents of its own, recorded\n"
	 "as a snapshot of SRC, incomplete; NEW's map is written with a\n"
	 "marker NEW.map.incomplete next to it (the stripe driver refuses to\n"
	 "serve such a map); the tapdisk serving SRC marks the instant (every\n"
	 "acknowledged write made durable) and copies SRC onto NEW in the\n"
	 "background with copy-before-write (doc/snapshots.md); this command\n"
	 "follows the copy (a progress line on stderr once it lasts a few\n"
	 "seconds), then marks NEW complete at the master and removes the\n"
	 "marker.  SRC served by no tapdisk of this host: stripe-ctl serves\n"
	 "it itself for the copy, as this host (its lease: refused when\n"
	 "another host holds it; taken and released again when free, kept\n"
	 "when this host's), as 'vdisk resync' does offline.  Interrupted\n"
	 "anywhere (even kill -9 of stripe-ctl or of the tapdisk), NEW stays\n"
	 "incomplete and is never served as complete: run the same command\n"
	 "again to finish it (a copy still running is followed; one that\n"
	 "ended, or an offline one, copies afresh, as of a new instant), or\n"
	 "drop it ('tap-ctl snapshot -i ID cancel' if it copies, then 'vdisk\n"
	 "destroy').  NEW existing as another disk, or its file as a complete\n"
	 "one, is refused with nothing changed.  'vdisk list' shows\n"
	 "snapshot-of=SRC.\n"
	 "--json: \"vdisk\", \"file\", \"changed\", \"source\", \"mode\"\n"
	 "(online or offline), \"tapdisk\" (online), \"elapsed_ms\".\n\n"
	 "    -o FILE              NEW's mapping file (default\n"
	 "                         " CTL_MAP_DIR "/NEW.map)\n"
	 "    --run-dir DIR        where the tapdisk serving SRC has its\n"
	 "                         control socket\n"
	 "    --host-id ID         as for vdisk resync\n",
	 ctl_cmd_vdisk_snapshot, "NEW", 1},
};
#define NR_COMMANDS (sizeof(commands) / sizeof(commands[0]))

#define GLOBAL_HELP                                                            \
	"    -m, --master HOST[:PORT][,HOST[:PORT]...]\n"                      \
	"                              the master, or masters serving one\n"   \
	"                              state (a call moves to the next on\n"   \
	"                              a timeout, a refusal or a store not\n"  \
	"                              available); default $" CTL_MASTER_ENV   \
	", else\n"                                                             \
	"                              STRIPE_MASTER= in " CTL_MASTER_CONF     \
	",\n"                                                                  \
	"                              else " CTL_MASTER_DEFAULT "\n"          \
	"    --json                    JSON output for scripts (exact "        \
	"bytes)\n"                                                             \
	"    --timeout SEC             per attempt (default 10)\n"             \
	"    --retries N               attempts after a timeout or a lost\n"   \
	"                              connection (default 3), each a turn\n"  \
	"                              over every master of the list: every\n" \
	"                              call is safe to repeat\n"               \
	"    -h, --help                help\n"                                 \
	"    -V, --version             the version\n"

int ctl_fail(const char *fmt, ...)
{
	va_list ap;
	int status;

	va_start(ap, fmt);
	status = cli_vfail("stripe-ctl", fmt, ap);
	va_end(ap);
	return status;
}

static void command_name(const struct command *c, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s%s", c->group ? c->group : "",
		 c->group ? " " : "", c->name);
}

/* The message, and where help is; name "" for stripe-ctl itself. */
static int vusage_error(const char *name, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static int vusage_error(const char *name, const char *fmt, va_list ap)
{
	char prog[80];

	snprintf(prog, sizeof(prog), "stripe-ctl%s%s", name[0] ? " " : "",
		 name);
	return cli_vusage_error(prog, fmt, ap);
}

static int usage_error(const struct command *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int usage_error(const struct command *c, const char *fmt, ...)
{
	char name[64] = "";
	va_list ap;
	int status;

	if (c)
		command_name(c, name, sizeof(name));
	va_start(ap, fmt);
	status = vusage_error(name, fmt, ap);
	va_end(ap);
	return status;
}

int ctl_usage_fail(const char *command, const char *fmt, ...)
{
	va_list ap;
	int status;

	va_start(ap, fmt);
	status = vusage_error(command, fmt, ap);
	va_end(ap);
	return status;
}

static void command_usage(const struct command *c, FILE *out)
{
	fprintf(out, "Usage: stripe-ctl [GLOBAL OPTIONS] %s\n\n%s\n",
		c->synopsis, c->help);
	fputs("Global options:\n" GLOBAL_HELP, out);
}

static void global_usage(FILE *out)
{
	fputs("NAME\n"
	      "    stripe-ctl - manage striped virtual disks and the master's "
	      "servers\n\n"
	      "SYNOPSIS\n"
	      "    stripe-ctl [GLOBAL OPTIONS] COMMAND [OPTIONS]\n\n"
	      "DESCRIPTION\n"
	      "    stripe-ctl asks stripe-master (Sun RPC over TCP) to\n"
	      "    register storage servers and to allocate, show and destroy\n"
	      "    striped virtual disks, whose mapping files tapdisk serves\n"
	      "    (tap-ctl create -a stripe:FILE); it also marks and resyncs\n"
	      "    replicas, moves a disk's lease between hosts and logs in\n"
	      "    to the servers' iSCSI targets.\n\n"
	      "COMMANDS\n",
	      out);
	for (size_t i = 0; i < NR_COMMANDS; i++)
		fprintf(out, "    %s\n", commands[i].synopsis);
	fputs("\n    'stripe-ctl COMMAND --help' describes a command.\n\n"
	      "GLOBAL OPTIONS (before or after the command)\n" GLOBAL_HELP "\n"
	      "SIZES\n"
	      "    Binary multiples: 4K = 4096, 1M, 1G, 1T; a trailing B or iB "
	      "is\n"
	      "    accepted (1GiB).\n\n"
	      "EXAMPLES\n"
	      "    stripe-ctl server add --portal 10.77.1.2 --target \\\n"
	      "        iqn.2024-01.org.tapstripe:srv1 --lun 1 --size 100G\n"
	      "    stripe-ctl vdisk create db1 --size 10G --stripes 4 "
	      "--replicas 2\n"
	      "    tap-ctl create -a stripe:" CTL_MAP_DIR
	      "/db1.map --nbd unix\n"
	      "    stripe-ctl vdisk mark " CTL_MAP_DIR "/db1.map 0 3 1 stale\n"
	      "    stripe-ctl vdisk resync " CTL_MAP_DIR "/db1.map --rate 50M\n"
	      "    stripe-ctl vdisk verify db1 --repair\n"
	      "    stripe-ctl session login " CTL_MAP_DIR "/db1.map\n"
	      "    stripe-ctl vdisk lease show db1\n"
	      "    stripe-ctl vdisk lease handover db1 --to host-b\n"
	      "    stripe-ctl vdisk lease takeover db1 --fence\n"
	      "    stripe-ctl vdisk map db1 --size 10G -o /tmp/db1.map\n"
	      "    stripe-ctl vdisk resize db1 --size 20G\n"
	      "    stripe-ctl host list\n"
	      "    stripe-ctl host readmit host-a\n"
	      "    stripe-ctl vdisk destroy " CTL_MAP_DIR "/db1.map\n\n"
	      "ENVIRONMENT\n"
	      "    " CTL_MASTER_ENV "   the master, as --master\n"
	      "    " CTL_MASTER_CONF_ENV
	      " the file read instead of " CTL_MASTER_CONF "\n"
	      "    " MASTER_HOST_ID_ENV " this host's id, as --host-id\n"
	      "    " TD_CTL_RUN_DIR_ENV
	      " the tapdisks' run directory, as --run-dir\n\n"
	      "EXIT STATUS\n"
	      "    0 success, 1 failure (the message says what to do), 2 bad "
	      "command line\n",
	      out);
}

/* --- options ---------------------------------------------------------------- */

enum {
	L_JSON = 256,
	L_TIMEOUT,
	L_RETRIES,
	L_PORTAL,
	L_TARGET,
	L_LUN,
	L_ADDRESS,
	L_BLOCK,
	L_NAME,
	L_SERVER,
	L_VDISK,
	L_ALLOCATED,
	L_RATE,
	L_RUN_DIR,
	L_HOST_ID,
	L_TO,
	L_FENCE,
	L_EPOCH,
	L_INITIATOR,
	L_MAP,
	L_HOST,
	L_RACK,
	L_SITE,
	L_REGION,
	L_REPAIR,
	L_OFFSET,
	L_REASON,
	L_MAP_DIR,
	L_REHOME,
	L_MARK_ONLY,
	L_CHAP_USER,
	L_CHAP_SECRET_FILE,
	L_NONE,
};

static const struct option long_options[] = {
	{"master", required_argument, NULL, 'm'},
	{"json", no_argument, NULL, L_JSON},
	{"timeout", required_argument, NULL, L_TIMEOUT},
	{"retries", required_argument, NULL, L_RETRIES},
	{"portal", required_argument, NULL, L_PORTAL},
	{"target", required_argument, NULL, L_TARGET},
	{"lun", required_argument, NULL, L_LUN},
	{"size", required_argument, NULL, 's'},
	{"address", required_argument, NULL, L_ADDRESS},
	{"block-size", required_argument, NULL, L_BLOCK},
	{"stripes", required_argument, NULL, 'S'},
	{"stripe-unit", required_argument, NULL, 'u'},
	{"replicas", required_argument, NULL, 'r'},
	{"output", required_argument, NULL, 'o'},
	{"name", required_argument, NULL, L_NAME},
	{"server", required_argument, NULL, L_SERVER},
	{"vdisk", required_argument, NULL, L_VDISK},
	{"allocated", no_argument, NULL, L_ALLOCATED},
	{"rate", required_argument, NULL, L_RATE},
	{"run-dir", required_argument, NULL, L_RUN_DIR},
	{"host-id", required_argument, NULL, L_HOST_ID},
	{"to", required_argument, NULL, L_TO},
	{"fence", no_argument, NULL, L_FENCE},
	{"epoch", required_argument, NULL, L_EPOCH},
	{"initiator", required_argument, NULL, L_INITIATOR},
	{"map", required_argument, NULL, L_MAP},
	{"host", required_argument, NULL, L_HOST},
	{"rack", required_argument, NULL, L_RACK},
	{"site", required_argument, NULL, L_SITE},
	{"region-size", required_argument, NULL, L_REGION},
	{"repair", no_argument, NULL, L_REPAIR},
	{"offset", required_argument, NULL, L_OFFSET},
	{"reason", required_argument, NULL, L_REASON},
	{"map-dir", required_argument, NULL, L_MAP_DIR},
	{"rehome", no_argument, NULL, L_REHOME},
	{"mark-only", no_argument, NULL, L_MARK_ONLY},
	{"chap-user", required_argument, NULL, L_CHAP_USER},
	{"chap-secret-file", required_argument, NULL, L_CHAP_SECRET_FILE},
	{"none", no_argument, NULL, L_NONE},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* What one option letter sets: its O_* bit. */
static uint64_t option_bit(int c)
{
	switch (c) {
	case L_PORTAL:
		return O_PORTAL;
	case L_TARGET:
		return O_TARGET;
	case L_LUN:
		return O_LUN;
	case 's':
		return O_SIZE;
	case L_ADDRESS:
		return O_ADDRESS;
	case L_BLOCK:
		return O_BLOCK;
	case 'S':
		return O_STRIPES;
	case 'u':
		return O_UNIT;
	case 'r':
		return O_REPLICAS;
	case 'o':
		return O_OUTPUT;
	case L_NAME:
		return O_NAME;
	case L_SERVER:
		return O_SERVER;
	case L_VDISK:
		return O_VDISK;
	case L_ALLOCATED:
		return O_ALLOCATED;
	case L_RATE:
		return O_RATE;
	case L_RUN_DIR:
		return O_RUN_DIR;
	case L_HOST_ID:
		return O_HOST_ID;
	case L_TO:
		return O_TO;
	case L_FENCE:
		return O_FENCE;
	case L_EPOCH:
		return O_EPOCH;
	case L_INITIATOR:
		return O_INITIATOR;
	case L_MAP:
		return O_MAP;
	case L_HOST:
		return O_HOST;
	case L_RACK:
		return O_RACK;
	case L_SITE:
		return O_SITE;
	case L_REGION:
		return O_REGION;
	case L_REPAIR:
		return O_REPAIR;
	case L_OFFSET:
		return O_OFFSET;
	case L_REASON:
		return O_REASON;
	case L_MAP_DIR:
		return O_MAP_DIR;
	case L_REHOME:
	case L_MARK_ONLY:
		return O_REHOME; /* one bit for both: server fail's mode */
	case L_CHAP_USER:
	case L_CHAP_SECRET_FILE:
		return O_CHAP;
	case L_NONE:
		return O_NONE;
	default:
		return O_GLOBAL;
	}
}

/* A decimal in [min, max], or -1. */
static long parse_number(const char *text, long min, long max)
{
	long long v;

	return cli_parse_number(text, min, max, &v) ? -1 : (long)v;
}

/* A bounded number option; 0 or a usage error printed (returns 2). */
static int number_option(const char *name, const char *arg, long min, long max,
			 long *out)
{
	if ((*out = parse_number(arg, min, max)) >= 0)
		return 0;
	return usage_error(NULL, "%s wants a number from %ld to %ld, not '%s'",
			   name, min, max, arg);
}

static int size_option(const char *name, const char *arg, uint64_t *out)
{
	if (!td_parse_size(arg, out) && *out)
		return 0;
	return usage_error(NULL,
			   "%s wants a size like 512, 64K, 10G or 2T, not '%s'",
			   name, arg);
}

static int take_block_size(struct ctl_opts *o, const char *arg)
{
	long v = parse_number(arg, 512, 4096);

	if (v != 512 && v != 1024 && v != 2048 && v != 4096)
		return usage_error(NULL,
				   "--block-size wants 512, 1024, 2048 "
				   "or 4096, not '%s'",
				   arg);
	o->block_size = (uint32_t)v;
	return 0;
}

static int take_unit(struct ctl_opts *o, const char *arg)
{
	if (td_parse_size(arg, &o->stripe_unit_bytes) ||
	    !stripe_layout_unit_ok(o->stripe_unit_bytes))
		return usage_error(NULL,
				   "--stripe-unit wants a power of two "
				   "from 4K to 1G, like 64K or 1M, not "
				   "'%s'",
				   arg);
	return 0;
}

/* The extent size is not known yet: the rest of the rule is checked later. */
static int take_region(struct ctl_opts *o, const char *arg)
{
	if (td_parse_size(arg, &o->region_bytes) || !o->region_bytes ||
	    o->region_bytes % STRIPE_MAP_REGION_ALIGN)
		return usage_error(NULL,
				   "--region-size wants a multiple of 4K, "
				   "like 1M, not '%s'",
				   arg);
	return 0;
}

static int take_rate(struct ctl_opts *o, const char *arg)
{
	if (td_parse_size(arg, &o->rate_bytes_per_s) ||
	    o->rate_bytes_per_s < CTL_MIN_RESYNC_RATE)
		return usage_error(NULL,
				   "--rate wants bytes per second, at least "
				   "64K, like 50M, not '%s'",
				   arg);
	return 0;
}

static int take_server(struct ctl_opts *o, const char *arg)
{
	long v;

	if (o->nr_server_ids == CTL_MAX_SERVER_IDS)
		return usage_error(NULL, "at most %d --server options",
				   CTL_MAX_SERVER_IDS);
	if (number_option("--server", arg, 1, (long)UINT32_MAX, &v))
		return EXIT_USAGE;
	o->server_ids[o->nr_server_ids++] = (uint32_t)v;
	return 0;
}

static int take_epoch(struct ctl_opts *o, const char *arg)
{
	char *end;

	errno = 0;
	o->epoch = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || *arg == '-')
		return usage_error(NULL, "--epoch wants a number, not '%s'",
				   arg);
	o->epoch_given = true;
	return 0;
}

/* Numbers of options that need more than a pointer; 0 or exit status. */
static int take_number_option(struct ctl_opts *o, int c, const char *arg)
{
	long v = 0;
	int st = 0;

	switch (c) {
	case L_TIMEOUT:
		st = number_option("--timeout", arg, 1, MAX_TIMEOUT_S, &v);
		o->timeout_s = (unsigned int)v;
		return st;
	case L_RETRIES:
		st = number_option("--retries", arg, 0, MAX_RETRIES, &v);
		o->retries = (unsigned int)v;
		return st;
	case L_LUN:
		st = number_option("--lun", arg, 0, MAX_LUN, &o->lun);
		return st;
	case 'S':
		st = number_option("--stripes", arg, 1, STRIPE_MAX_COLUMNS, &v);
		o->stripes = (uint32_t)v;
		return st;
	case 'r':
		st = number_option("--replicas", arg, 1, STRIPE_MAX_REPLICAS,
				   &v);
		o->replicas = (uint32_t)v;
		return st;
	case 's':
		return size_option("--size", arg, &o->size_bytes);
	case L_RATE:
		return take_rate(o, arg);
	case 'u':
		return take_unit(o, arg);
	case L_BLOCK:
		return take_block_size(o, arg);
	case L_EPOCH:
		return take_epoch(o, arg);
	case L_REGION:
		return take_region(o, arg);
	case L_OFFSET: /* 0: the first extent */
		o->offset_bytes = 0;
		return strcmp(arg, "0")
			       ? size_option("--offset", arg, &o->offset_bytes)
			       : 0;
	default:
		return take_server(o, arg);
	}
}

/* One option; 0, or an exit status. */
static int take_option(struct ctl_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'm':
		o->master = arg;
		o->master_given = true;
		return 0;
	case L_JSON:
		o->json = true;
		return 0;
	case L_PORTAL:
		o->portal = arg;
		return 0;
	case L_TARGET:
		o->target = arg;
		return 0;
	case L_ADDRESS:
		o->address = arg;
		return 0;
	case 'o':
		o->output = arg;
		return 0;
	case L_NAME:
	case L_VDISK:
		o->name = arg;
		return 0;
	case L_ALLOCATED:
		o->allocated = true;
		return 0;
	case L_RUN_DIR:
		o->run_dir = arg;
		return 0;
	case L_HOST_ID:
		o->host_id = arg;
		return 0;
	case L_TO:
		o->to = arg;
		return 0;
	case L_FENCE:
		o->fence = true;
		return 0;
	case L_INITIATOR:
		o->initiator = arg;
		return 0;
	case L_MAP:
		o->map = arg;
		return 0;
	case L_HOST:
		o->host = arg;
		return 0;
	case L_RACK:
		o->rack = arg;
		return 0;
	case L_SITE:
		o->site = arg;
		return 0;
	case L_REPAIR:
		o->repair = true;
		return 0;
	case L_MAP_DIR:
		o->map_dir = arg;
		return 0;
	case L_REHOME:
		o->rehome = true;
		return 0;
	case L_MARK_ONLY:
		o->mark_only = true;
		return 0;
	case L_CHAP_USER:
		o->chap_user = arg;
		return 0;
	case L_CHAP_SECRET_FILE:
		o->chap_secret_file = arg;
		return 0;
	case L_NONE:
		o->chap_none = true;
		return 0;
	case L_REASON:
		if (strcmp(arg, "evacuate") && strcmp(arg, "fail"))
			return usage_error(NULL,
					   "--reason is evacuate or fail, not "
					   "'%s'",
					   arg);
		o->reason_fail = !strcmp(arg, "fail");
		return 0;
	default:
		return take_number_option(o, c, arg);
	}
}

/* --- commands ---------------------------------------------------------------- */

/* How many of words name spell "A" or "A B" (0: they do not). */
static int words_match(const char *name, char **words, int n)
{
	const char *space = strchr(name, ' ');
	size_t len = space ? (size_t)(space - name) : strlen(name);

	if (n < 1 || strlen(words[0]) != len || strncmp(words[0], name, len))
		return 0;
	if (!space)
		return 1;
	return n >= 2 && !strcmp(words[1], space + 1) ? 2 : 0;
}

static const struct command *find_command(char **words, int n, int *used)
{
	for (size_t i = 0; i < NR_COMMANDS; i++) {
		const struct command *c = &commands[i];
		int k;

		if (!c->group && (k = words_match(c->name, words, n))) {
			*used = k;
			return c;
		}
		if (c->group && n >= 2 && !strcmp(words[0], c->group) &&
		    (k = words_match(c->name, words + 1, n - 1))) {
			*used = 1 + k;
			return c;
		}
	}
	return NULL;
}

static const char *option_name(uint64_t bit)
{
	for (const struct option *lo = long_options; lo->name; lo++)
		if (option_bit(lo->val) == bit)
			return lo->name;
	return "?";
}

/* FILE (or NAME) comes first unless --name gave it. */
static int leading_args(const struct command *c, uint64_t seen)
{
	return c->arg && !(seen & O_NAME) ? 1 : 0;
}

/*
 * The options seen must be the command's; the required ones present; the
 * positional words as many as the command takes.
 */
static int check_options(const struct command *c, uint64_t seen, int nr_args,
			 char **args)
{
	uint64_t extra = seen & ~(c->opts | O_GLOBAL);
	uint64_t missing = c->required & ~seen;
	int lead = leading_args(c, seen);
	/* EXTRA_ANY: whatever follows the leading argument */
	int any = nr_args > lead ? nr_args - lead : 0;
	int want = lead + (c->nr_extra == EXTRA_ANY ? any : (int)c->nr_extra);

	for (uint64_t bit = 1; extra; bit <<= 1)
		if (extra & bit)
			return usage_error(c,
					   "--%s is not an option of this "
					   "command",
					   option_name(bit));
	for (uint64_t bit = 1; missing; bit <<= 1)
		if (missing & bit)
			return usage_error(c, "give --%s", option_name(bit));
	if ((seen & O_NAME) && nr_args > (int)c->nr_extra)
		return usage_error(c, "give FILE or --name NAME, not both");
	if (nr_args > want)
		return usage_error(c, "unexpected argument '%s'", args[want]);
	if (nr_args < lead)
		return usage_error(c, "give the %s", c->arg);
	if (nr_args < want)
		return usage_error(c, "give %s", c->extra);
	return 0;
}

static void defaults(struct ctl_opts *o)
{
	const char *env = getenv(CTL_MASTER_ENV);

	memset(o, 0, sizeof(*o));
	o->master_given = env && *env;
	/* the file is this host's default: a map's own master line wins */
	if (!o->master_given)
		env = ctl_master_conf();
	o->master = env && *env ? env : CTL_MASTER_DEFAULT;
	o->timeout_s = DEFAULT_TIMEOUT_S;
	o->retries = MASTER_CLIENT_DEFAULT_RETRIES;
	o->lun = -1;
	o->block_size = DEFAULT_BLOCK_BYTES;
	o->stripe_unit_bytes = DEFAULT_UNIT_BYTES;
	o->replicas = 1;
}

int main(int argc, char **argv)
{
	const struct command *cmd;
	uint64_t seen = 0;
	bool help = false;
	struct ctl_opts o;
	int c, status, used = 0;

	signal(SIGPIPE, SIG_IGN);
	defaults(&o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "m:s:S:u:r:o:hV", long_options,
				NULL)) != -1) {
		if (c == '?')
			return usage_error(NULL,
					   "unknown option or missing "
					   "argument: '%s'",
					   argv[optind - 1]);
		if (c == 'h') {
			help = true;
			continue;
		}
		if (c == 'V')
			return cli_version("stripe-ctl");
		seen |= option_bit(c);
		if ((status = take_option(&o, c, optarg)))
			return status;
	}
	if (optind == argc) {
		if (help) {
			global_usage(stdout);
			return EXIT_SUCCESS;
		}
		return usage_error(NULL, "give a command: info, server, vdisk, "
					 "host, extents, extent or session");
	}
	if (!(cmd = find_command(argv + optind, argc - optind, &used)))
		return usage_error(NULL, "unknown command '%s%s%s'",
				   argv[optind], optind + 1 < argc ? " " : "",
				   optind + 1 < argc ? argv[optind + 1] : "");
	if (help) {
		command_usage(cmd, stdout);
		return EXIT_SUCCESS;
	}
	optind += used;
	if ((status = check_options(cmd, seen, argc - optind, argv + optind)))
		return status;
	if (leading_args(cmd, seen))
		o.arg = argv[optind++];
	o.extra = argv + optind;
	o.nr_extra = (unsigned int)(argc - optind);
	return cmd->run(&o);
}
