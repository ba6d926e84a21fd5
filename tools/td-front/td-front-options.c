/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-options.c - td-front's command line: the help text, and the
 * parsing with an error that says what to write instead.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "tapdisk/control/control.h"
#include "tools/cli/cli.h"
#include "tools/td-front/td-front.h"

#define MAX_PASSES 1000000
#define MAX_ROUNDS 100000000
#define MAX_TIME_S (365.0 * 86400)

static void usage(FILE *out)
{
	/* The text is laid out as printed. */
	/* clang-format off */
	fprintf(out,
"NAME\n"
"    td-front - drive a tapdisk vbd over the shm ring, as blkfront would\n"
"\n"
"SYNOPSIS\n"
"    td-front --shm PATH [--ring-order N] [--max-segments N] [--queues N]\n"
"             [--rw read|write|mixed] [--rwmix PCT] [--pattern seq|rand]\n"
"             [--bs SIZE[,SIZE...]] [--qd N] [--time SEC | --bytes SIZE]\n"
"             [--offset SIZE] [--size SIZE] [--verify [--passes N]]\n"
"             [--json] [OPTIONS]\n"
"    td-front --shm PATH --pattern interleave [--rounds N] [OPTIONS]\n"
"\n"
"DESCRIPTION\n"
"    td-front connects to a tapdisk serving a disk with --shm PATH,\n"
"    negotiates a blkif ring the way Linux's blkfront does over xenbus,\n"
"    and runs a workload through it: requests are queued, pushed in one\n"
"    batch with at most one notification, and each batch of responses\n"
"    refills the queue.  An I/O longer than the segments of one request\n"
"    is split as blkfront splits it: requests of at most 11 segments are\n"
"    direct, longer ones indirect, so --max-segments 11 gives direct\n"
"    requests only (1 MiB = 23 x 44 KiB + 12 KiB).\n"
"\n"
"    At the end it reports IOPS, MiB/s, latency percentiles, its own ring\n"
"    counters and the backend's (requests, segments-per-request\n"
"    histogram, backend submissions, CPU time per request), which it\n"
"    reads from the tapdisk's control socket before and after the run.\n"
"    A run longer than 3 s shows a progress line on a terminal.\n"
"\n"
"RING\n"
"    -s, --shm PATH        the tapdisk's shm socket (required)\n"
"    --ring-order N        ring pages 2^N, 0-%d (default 0: 32 slots); cut\n"
"                          to the backend's max-ring-page-order\n"
"    --max-segments N      segments (4 KiB pages) per request, %d-%d\n"
"                          (default %d, blkfront's); cut to the backend's\n"
"                          feature-max-indirect-segments\n"
"    --queues N            rings on the one connection, 1-%d (default 1);\n"
"                          cut to the backend's multi-queue-max-queues.\n"
"                          Each ring gets --qd I/Os of its own (I/O k goes\n"
"                          to ring k mod N), its own pool and eventfds\n"
"    --poll-us US          wait for responses by polling the ring for up to\n"
"                          US microseconds before sleeping on the\n"
"                          notification, leaving rsp_event unarmed\n"
"                          meanwhile so that the backend need not notify\n"
"                          (0-100000; default 0: off, blkfront's way);\n"
"                          pair with tapdisk --poll-us.  The spin adapts\n"
"                          like tapdisk's window: a response later than US\n"
"                          halves it, an earlier one doubles it (back up\n"
"                          to US), so a disk slower than US soon costs no\n"
"                          spinning (poll_window_us).  Costs a CPU while it\n"
"                          spins, and stops spinning for a while when\n"
"                          td-front gets less than 80%% of a CPU or the host\n"
"                          has more runnable threads than CPUs\n"
"                          (poll_backoffs)\n"
"\n"
"WORKLOAD\n"
"    --rw read|write|mixed what the I/Os do (default read)\n"
"    --rwmix PCT           percent of reads in a mixed load (default 50;\n"
"                          implies --rw mixed)\n"
"    --pattern seq|rand|interleave\n"
"                          sequential (default), random (offsets aligned\n"
"                          to the block size, or 4 KiB for mixed sizes),\n"
"                          or the interleave rounds below\n"
"    --bs SIZE[,SIZE...]   block size (default 4k); with several, each I/O\n"
"                          picks one at random; multiples of 512 up to %u MiB\n"
"    --qd N, --iodepth N   I/Os in flight (default 1)\n"
"    --time SEC            run this long (decimals allowed)\n"
"    --bytes SIZE          move this much; without --time or --bytes the\n"
"                          region is covered once\n"
"    --offset SIZE         the region's start (default 0)\n"
"    --size SIZE           the region's length (default: to the end)\n"
"    --seed N              random seed (default 1)\n"
"    --flush               flush the disk's cache after a run that wrote\n"
"    --wait-resize SEC     before the run, wait at most SEC seconds for the\n"
"                          backend to say the disk grew (`tap-ctl resize`:\n"
"                          \"resized sectors=N\" on the socket) and take the\n"
"                          new size; fails when it does not come\n"
"    SIZE takes K, M, G, T (binary multiples: 4k = 4096).\n"
"\n"
"VERIFY\n"
"    --verify              cut the region into chunks of the --bs sizes,\n"
"                          write every chunk with a pattern (in sequential\n"
"                          or random order, QD at a time), read it all back\n"
"                          and check it; every 512-byte sector holds a\n"
"                          magic, its byte offset, the generation and the\n"
"                          seed (layout in tools/td-front-lib.h)\n"
"    --verify-zeroes       the same, but reads must find zeroes: for a\n"
"                          null: disk, which forgets what it is written\n"
"                          (read buffers are poisoned first, so a read\n"
"                          that moves no data is caught either way)\n"
"    --passes N            repeat with generation G, G+1, ... (default 1)\n"
"    --generation G        the first generation written (default 1)\n"
"\n"
"INTERLEAVE\n"
"    --pattern interleave  each round writes a fresh 112 KiB as 28 x 4 KiB\n"
"                          writes queued in the order 0, 2, ..., 26, 1, 3,\n"
"                          ..., 27 and pushed in one batch, then waits for\n"
"                          all 28; reports the round time and the requests\n"
"                          and backend submissions per round\n"
"    --rounds N            rounds (default %d)\n"
"\n"
"BACKEND COUNTERS\n"
"    --control PATH        the tapdisk's control socket\n"
"    --id ID               ... or its id: RUN_DIR/tapdisk-ID.sock\n"
"    --run-dir DIR         default $%s, else %s\n"
"    --no-backend-stats    do not ask\n"
"    Without --control or --id, the tapdisk at the other end of the shm\n"
"    socket (its pid, from SO_PEERCRED) is asked in RUN_DIR.  The\n"
"    counters are the vbd's: other frontends' I/O counts too.\n"
"\n"
"OUTPUT\n"
"    --json                the report as JSON (exact bytes, microseconds)\n"
"    --progress, --no-progress\n"
"                          force the progress line on stderr, or not\n"
"    -q, --quiet           no notes on stderr\n"
"    -h, --help            this text\n"
"    -V, --version         the version\n"
"\n"
"EXIT STATUS\n"
"    0  the run completed without error\n"
"    1  cannot connect or negotiate, an I/O failed, a verify mismatch,\n"
"       or the backend went away\n"
"    2  bad command line\n"
"\n"
"EXAMPLES\n"
"    tapdisk -f -a null:size=1G --shm /tmp/null.shm &\n"
"    td-front --shm /tmp/null.shm --pattern rand --bs 4k --qd 32 --time 10\n"
"    td-front --shm /tmp/disk.shm --rw write --bs 1m --qd 1 --bytes 256m \\\n"
"             --max-segments 256 --ring-order 2\n"
"    td-front --shm /tmp/disk.shm --verify --pattern rand --bs 4k,44k,1m \\\n"
"             --qd 16 --size 64m --passes 2\n"
"    td-front --shm /tmp/null.shm --queues 2 --pattern rand --qd 32 --time 10\n"
"    td-front --shm /tmp/disk.shm --pattern interleave --rounds 100 --json\n",
		SHM_MAX_RING_PAGE_ORDER, TDF_DIRECT_SEGMENTS, TDF_MAX_SEGMENTS,
		TDF_DEFAULT_MAX_SEGMENTS, SHM_MAX_QUEUES, FRONT_MAX_BS_BYTES >> 20,
		FRONT_DEFAULT_ROUNDS, TD_CTL_RUN_DIR_ENV,
		TD_CTL_RUN_DIR_DEFAULT);
	/* clang-format on */
}

#define usage_error(...) cli_usage_error("td-front", __VA_ARGS__)

/* --- options ---------------------------------------------------------------- */

enum {
	OPT_RING_ORDER = 256,
	OPT_POLL_US,
	OPT_MAX_SEGMENTS,
	OPT_RW,
	OPT_RWMIX,
	OPT_PATTERN,
	OPT_BS,
	OPT_QD,
	OPT_TIME,
	OPT_BYTES,
	OPT_OFFSET,
	OPT_SIZE,
	OPT_SEED,
	OPT_FLUSH,
	OPT_WAIT_RESIZE,
	OPT_VERIFY,
	OPT_VERIFY_ZEROES,
	OPT_PASSES,
	OPT_GENERATION,
	OPT_ROUNDS,
	OPT_CONTROL,
	OPT_ID,
	OPT_RUN_DIR,
	OPT_NO_BACKEND,
	OPT_JSON,
	OPT_PROGRESS,
	OPT_NO_PROGRESS,
	OPT_QUEUES,
};

static const struct option long_options[] = {
	{"shm", required_argument, NULL, 's'},
	{"ring-order", required_argument, NULL, OPT_RING_ORDER},
	{"poll-us", required_argument, NULL, OPT_POLL_US},
	{"max-segments", required_argument, NULL, OPT_MAX_SEGMENTS},
	{"queues", required_argument, NULL, OPT_QUEUES},
	{"rw", required_argument, NULL, OPT_RW},
	{"rwmix", required_argument, NULL, OPT_RWMIX},
	{"pattern", required_argument, NULL, OPT_PATTERN},
	{"bs", required_argument, NULL, OPT_BS},
	{"qd", required_argument, NULL, OPT_QD},
	{"iodepth", required_argument, NULL, OPT_QD},
	{"time", required_argument, NULL, OPT_TIME},
	{"bytes", required_argument, NULL, OPT_BYTES},
	{"offset", required_argument, NULL, OPT_OFFSET},
	{"size", required_argument, NULL, OPT_SIZE},
	{"seed", required_argument, NULL, OPT_SEED},
	{"flush", no_argument, NULL, OPT_FLUSH},
	{"wait-resize", required_argument, NULL, OPT_WAIT_RESIZE},
	{"verify", no_argument, NULL, OPT_VERIFY},
	{"verify-zeroes", no_argument, NULL, OPT_VERIFY_ZEROES},
	{"passes", required_argument, NULL, OPT_PASSES},
	{"generation", required_argument, NULL, OPT_GENERATION},
	{"rounds", required_argument, NULL, OPT_ROUNDS},
	{"control", required_argument, NULL, OPT_CONTROL},
	{"id", required_argument, NULL, OPT_ID},
	{"run-dir", required_argument, NULL, OPT_RUN_DIR},
	{"no-backend-stats", no_argument, NULL, OPT_NO_BACKEND},
	{"json", no_argument, NULL, OPT_JSON},
	{"progress", no_argument, NULL, OPT_PROGRESS},
	{"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

#define GO_ON	 FRONT_GO_ON
#define NOT_MINE (-2) /* a parse_* step: for the next one */

/* A decimal in [min, max], or -1. */
static long long number(const char *text, long long min, long long max)
{
	long long v;

	return cli_parse_number(text, min, max, &v) ? -1 : v;
}

static int size_arg(const char *name, const char *arg, uint64_t *out)
{
	if (td_parse_size(arg, out))
		return usage_error("%s wants a size such as 4096, 4k, 1m or "
				   "2G, not '%s'",
				   name, arg);
	return GO_ON;
}

static int parse_bs(struct front_opts *o, const char *arg)
{
	char buf[256], *save = NULL, *word;
	uint64_t v;

	if (strlen(arg) >= sizeof(buf))
		return usage_error("--bs list too long");
	strcpy(buf, arg);
	o->nr_bs = 0;
	for (word = strtok_r(buf, ",", &save); word;
	     word = strtok_r(NULL, ",", &save)) {
		if (o->nr_bs == FRONT_MAX_BS)
			return usage_error("at most %d sizes in --bs",
					   FRONT_MAX_BS);
		if (td_parse_size(word, &v) || !v || v % TDF_SECTOR_SIZE ||
		    v > FRONT_MAX_BS_BYTES)
			return usage_error("--bs: '%s' is not a multiple of "
					   "512 bytes up to %u MiB",
					   word, FRONT_MAX_BS_BYTES >> 20);
		o->bs[o->nr_bs++] = (uint32_t)v;
	}
	return o->nr_bs ? GO_ON : usage_error("--bs wants a size");
}

static int parse_choice(const char *name, const char *arg,
			const char *const *names, unsigned int n, int *out)
{
	for (unsigned int i = 0; i < n; i++)
		if (!strcmp(arg, names[i])) {
			*out = (int)i;
			return GO_ON;
		}
	return usage_error("%s: unknown value '%s'", name, arg);
}

/* A number option; v is the parsed value or -1. */
static int number_arg(const char *name, const char *arg, long long min,
		      long long max, long long *v)
{
	if ((*v = number(arg, min, max)) < 0)
		return usage_error("%s wants a number from %lld to %lld, not "
				   "'%s'",
				   name, min, max, arg);
	return GO_ON;
}

static int parse_workload(struct front_opts *o, int c, const char *arg)
{
	static const char *const rws[] = {"read", "write", "mixed"};
	static const char *const pats[] = {"seq", "rand", "interleave"};
	char *end = NULL;
	long long v = 0;
	int status, choice = 0;

	switch (c) {
	case OPT_RW:
		status = parse_choice("--rw", arg, rws, 3, &choice);
		o->rw = (enum front_rw)choice;
		return status;
	case OPT_RWMIX:
		status = number_arg("--rwmix", arg, 0, 100, &v);
		o->rwmix_read = (unsigned int)v;
		o->rw = FRONT_MIXED;
		return status;
	case OPT_PATTERN:
		status = parse_choice("--pattern", arg, pats, 3, &choice);
		o->pattern = (enum front_pattern)choice;
		return status;
	case OPT_BS:
		return parse_bs(o, arg);
	case OPT_QD:
		status = number_arg("--qd", arg, 1, FRONT_MAX_QD, &v);
		o->qd = (uint32_t)v;
		return status;
	case OPT_TIME:
		o->time_s = strtod(arg, &end);
		if (*end || !(o->time_s > 0 && o->time_s <= MAX_TIME_S))
			return usage_error("--time wants seconds, not '%s'",
					   arg);
		return GO_ON;
	case OPT_WAIT_RESIZE:
		o->wait_resize_s = strtod(arg, &end);
		if (*end ||
		    !(o->wait_resize_s > 0 && o->wait_resize_s <= MAX_TIME_S))
			return usage_error("--wait-resize wants seconds, not "
					   "'%s'",
					   arg);
		return GO_ON;
	case OPT_BYTES:
		return size_arg("--bytes", arg, &o->bytes);
	case OPT_OFFSET:
		return size_arg("--offset", arg, &o->offset);
	case OPT_SIZE:
		return size_arg("--size", arg, &o->size);
	case OPT_SEED:
		status = number_arg("--seed", arg, 0, LLONG_MAX, &v);
		o->seed = (uint64_t)v;
		return status;
	default:
		return NOT_MINE;
	}
}

/* The ring, verify and interleave options. */
static int parse_ring(struct front_opts *o, int c, const char *arg)
{
	long long v = 0;
	int status = GO_ON;

	switch (c) {
	case 's':
		o->shm = arg;
		break;
	case OPT_RING_ORDER:
		status = number_arg("--ring-order", arg, 0,
				    SHM_MAX_RING_PAGE_ORDER, &v);
		o->ring_order = (uint32_t)v;
		break;
	case OPT_POLL_US:
		status = number_arg("--poll-us", arg, 0, 100000, &v);
		o->poll_us = (uint32_t)v;
		break;
	case OPT_MAX_SEGMENTS:
		status = number_arg("--max-segments", arg, TDF_DIRECT_SEGMENTS,
				    TDF_MAX_SEGMENTS, &v);
		o->max_segments = (uint32_t)v;
		break;
	case OPT_QUEUES:
		status = number_arg("--queues", arg, 1, SHM_MAX_QUEUES, &v);
		o->queues = (uint32_t)v;
		break;
	case OPT_VERIFY_ZEROES:
		o->verify_zeroes = true;
		/* fall through */
	case OPT_VERIFY:
		o->verify = true;
		break;
	case OPT_PASSES:
		status = number_arg("--passes", arg, 1, MAX_PASSES, &v);
		o->passes = (uint32_t)v;
		break;
	case OPT_GENERATION:
		status = number_arg("--generation", arg, 0, LLONG_MAX, &v);
		o->generation = (uint64_t)v;
		break;
	case OPT_ROUNDS:
		status = number_arg("--rounds", arg, 1, MAX_ROUNDS, &v);
		o->rounds = (uint32_t)v;
		break;
	default:
		return NOT_MINE;
	}
	return status;
}

/* Backend counters, output, help. */
static int parse_output(struct front_opts *o, int c, const char *arg)
{
	long long v = 0;
	int status = GO_ON;

	switch (c) {
	case OPT_FLUSH:
		o->flush = true;
		break;
	case OPT_CONTROL:
		o->control = arg;
		break;
	case OPT_ID:
		status = number_arg("--id", arg, 1, INT_MAX, &v);
		o->id = (int)v;
		break;
	case OPT_RUN_DIR:
		o->run_dir = arg;
		break;
	case OPT_NO_BACKEND:
		o->no_backend_stats = true;
		break;
	case OPT_JSON:
		o->json = true;
		break;
	case OPT_PROGRESS:
		o->progress = FRONT_PROGRESS_ON;
		break;
	case OPT_NO_PROGRESS:
		o->progress = FRONT_PROGRESS_OFF;
		break;
	case 'q':
		o->quiet = true;
		break;
	case 'h':
		usage(stdout);
		return EXIT_SUCCESS;
	case 'V':
		return cli_version("td-front");
	default:
		return usage_error("unknown option");
	}
	return status;
}

/* What the options say together. */
static int check_options(struct front_opts *o)
{
	if (!o->shm)
		return usage_error("give the tapdisk's shm socket with --shm "
				   "PATH");
	if (o->pattern == FRONT_INTERLEAVE) {
		if (o->verify)
			return usage_error("--verify and --pattern interleave "
					   "do not go together");
		if (o->queues > 1)
			return usage_error("--queues and --pattern interleave "
					   "do not go together (the rounds "
					   "use one ring)");
		o->bs[0] = FRONT_INTERLEAVE_BS;
		o->nr_bs = 1;
		o->rw = FRONT_WRITE;
		o->qd = FRONT_INTERLEAVE_BLOCKS;
	}
	if (o->offset % TDF_SECTOR_SIZE || o->size % TDF_SECTOR_SIZE)
		return usage_error("--offset and --size must be multiples of "
				   "512");
	o->min_bs = o->max_bs = o->bs[0];
	for (unsigned int i = 1; i < o->nr_bs; i++) {
		if (o->bs[i] > o->max_bs)
			o->max_bs = o->bs[i];
		if (o->bs[i] < o->min_bs)
			o->min_bs = o->bs[i];
	}
	if (o->size && o->size < o->max_bs)
		return usage_error("--size is smaller than the block size");
	return GO_ON;
}

int front_parse_options(struct front_opts *o, int argc, char **argv)
{
	int c, status;

	memset(o, 0, sizeof(*o));
	o->bs[0] = TDF_PAGE_SIZE;
	o->nr_bs = 1;
	o->qd = 1;
	o->queues = 1;
	o->rwmix_read = 50;
	o->passes = 1;
	o->generation = 1;
	o->seed = 1;
	o->rounds = FRONT_DEFAULT_ROUNDS;
	o->progress = FRONT_PROGRESS_AUTO;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "s:qhV", long_options, NULL)) !=
	       -1) {
		if (c == '?')
			return usage_error("unknown option or missing "
					   "argument: '%s'",
					   argv[optind - 1]);
		status = parse_workload(o, c, optarg);
		if (status == NOT_MINE)
			status = parse_ring(o, c, optarg);
		if (status == NOT_MINE)
			status = parse_output(o, c, optarg);
		if (status != GO_ON)
			return status;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return check_options(o);
}
