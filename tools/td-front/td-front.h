/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front.h - what td-front's files share: the command line (td-front.c),
 * the workloads (td-front-run.c) and the report (td-front-report.c).
 */
#ifndef TAPSTRIPE_TOOLS_TD_FRONT_H
#define TAPSTRIPE_TOOLS_TD_FRONT_H

#include <stdbool.h>
#include <stdint.h>

#include "tapdisk/vbd.h"
#include "tools/td-front/td-front-lib.h"

#define FRONT_MAX_BS		8 /* sizes in one --bs list */
#define FRONT_MAX_BS_BYTES	(64u << 20)
#define FRONT_MAX_QD		65536
#define FRONT_INTERLEAVE_BLOCKS 28 /* the thesis' 112 KiB as 28 x 4 KiB */
#define FRONT_INTERLEAVE_BS	4096u
#define FRONT_DEFAULT_ROUNDS	100
#define FRONT_MAX_MISMATCHES	8 /* kept for the report */
#define FRONT_CTL_PATH_MAX	4096
#define FRONT_POISON_BYTE	0xa5 /* read buffers, before the read */

enum front_rw { FRONT_READ, FRONT_WRITE, FRONT_MIXED };
enum front_pattern { FRONT_SEQ, FRONT_RAND, FRONT_INTERLEAVE };
enum { FRONT_PROGRESS_AUTO = -1, FRONT_PROGRESS_OFF, FRONT_PROGRESS_ON };

struct front_opts {
	const char *shm;
	uint32_t ring_order;
	uint32_t poll_us; /* --poll-us */
	uint32_t max_segments;
	uint32_t queues; /* rings asked for (--queues), 1 by default */
	enum front_rw rw;
	unsigned int rwmix_read; /* percent of reads in FRONT_MIXED */
	enum front_pattern pattern;
	uint32_t bs[FRONT_MAX_BS];
	unsigned int nr_bs;
	uint32_t max_bs, min_bs;
	uint32_t qd;
	double time_s;	/* 0: not limited by time */
	uint64_t bytes; /* 0: not limited by bytes */
	uint64_t offset, size;
	bool verify;
	bool verify_zeroes; /* reads must find zeroes (a null: disk) */
	uint32_t passes;
	uint64_t generation;
	uint64_t seed;
	uint32_t rounds;
	bool flush;
	double wait_resize_s; /* --wait-resize; 0: do not wait */
	const char *control;
	int id;
	const char *run_dir;
	bool no_backend_stats;
	bool json, quiet;
	int progress; /* FRONT_PROGRESS_* */
};

struct front_mismatch {
	bool read_error;
	struct tdf_mismatch m;
	uint64_t generation; /* expected */
};

struct front_lat {
	uint64_t hist[TD_LAT_BUCKETS];
	uint64_t max_us, sum_us, count;
};

struct front_result {
	double elapsed_s;
	uint64_t ios[2], bytes[2]; /* [0] reads, [1] writes */
	struct front_lat lat;
	uint64_t io_errors;
	int first_error;
	uint64_t verified_bytes;
	uint64_t mismatches;
	struct front_mismatch mismatch[FRONT_MAX_MISMATCHES];
	uint64_t last_generation; /* verify: what the region holds now */
	uint32_t rounds;	  /* interleave */
	struct front_lat round;
	bool flushed;
	struct tdf_stats ring; /* the library's counters */
	uint64_t cpu_us;       /* td-front's own, user + system, in the run */
	bool have_backend;
	struct tdf_backend_stats backend; /* the run's share */
	char backend_why[TDF_WHY_MAX];	  /* when !have_backend */
	char ctl_path[FRONT_CTL_PATH_MAX];
};

/*
 * td-front-options.c: parse argv into o (defaults filled in).  Returns
 * FRONT_GO_ON, or the exit status to stop with: 0 after --help or
 * --version, 2 after a usage error (printed).
 */
#define FRONT_GO_ON (-1)
int front_parse_options(struct front_opts *o, int argc, char **argv);

/* td-front-run.c: the whole run.  Returns 0 or -errno (printed). */
int front_run(const struct front_opts *o, struct tdf_dev *dev,
	      struct front_result *res);
/* Pages of I/O buffers the run needs. */
uint32_t front_data_pages(const struct front_opts *o);
/* Add one latency sample. */
void front_lat_add(struct front_lat *l, uint64_t us);

/* td-front-report.c */
void front_report_text(const struct front_opts *o, struct tdf_dev *dev,
		       const struct front_result *res);
int front_report_json(const struct front_opts *o, struct tdf_dev *dev,
		      const struct front_result *res);
/* The progress line on stderr, at most once a second. */
void front_progress(const struct front_opts *o, const struct front_result *res,
		    uint64_t start_ns, bool last);

#endif
