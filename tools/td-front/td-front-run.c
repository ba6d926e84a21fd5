/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * td-front-run.c - td-front's workloads over the frontend library.
 *
 * qd jobs each own a buffer (max_bs bytes of data pages) and carry one I/O
 * at a time.  A completion records the latency and, unless the run is
 * stopping, gives the job its next I/O at once; the new requests are
 * pushed together after the whole batch of responses has been taken, so
 * there is one push and at most one notification per batch, as blkfront
 * does after its interrupt handler.
 *
 *   seq, rand     I/Os of --bs (one size picked at random per I/O when
 *                 several are given), read/write/mixed, until --time or
 *                 --bytes;
 *   --verify      the region cut into chunks of the --bs sizes, written
 *                 with the pattern of generation G in sequential or
 *                 random order, then read back (into buffers poisoned
 *                 first) and checked; --passes repeats with G + 1 ...;
 *                 --verify-zeroes expects zeroes instead (null: disks);
 *   interleave    --rounds rounds, each writing a fresh 112 KiB as 28
 *                 4 KiB writes queued in the order 0, 2, ..., 26, 1, 3,
 *                 ..., 27 and pushed in one batch, then waiting for all.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tools/td-front/td-front.h"

#define WAIT_MS		1000
#define NS_PER_S	1000000000.0
#define NS_PER_US	1000
#define RAND_ALIGN	4096u /* random offsets of mixed sizes */
#define XORSHIFT_MUL	UINT64_C(0x2545f4914f6cdd1d)
#define DEFAULT_SEED	UINT64_C(0x7464667230303031)
#define INTERLEAVE_SPAN (FRONT_INTERLEAVE_BLOCKS * FRONT_INTERLEAVE_BS)
#define US_PER_S	1000000ull

struct run;

struct job {
	struct tdf_io io;
	struct run *run;
	uint32_t index; /* its buffer: pages index * buf_pages ... */
	uint64_t start_ns;
	uint64_t generation; /* --verify: what a read must find */
	bool check;	     /* --verify: check what is read */
};

struct chunk {
	uint64_t offset;
	uint32_t len;
};

struct run {
	const struct front_opts *o;
	struct tdf_dev *dev;
	struct front_result *res;
	struct job *jobs;
	uint32_t njobs, buf_pages;
	uint64_t start, end; /* the region, bytes */
	uint64_t seq_next, started_bytes, limit_bytes;
	uint64_t start_ns, deadline_ns;
	uint64_t rng;
	uint32_t outstanding; /* I/Os submitted, not completed */
	bool stopping;
	int error; /* the library failed: the run is over */
	bool (*next)(struct run *r, struct job *j);
	/* --verify */
	struct chunk *chunks;
	uint64_t nr_chunks, next_chunk;
	enum tdf_op phase;
	uint64_t generation;
};

static uint64_t rnd(struct run *r)
{
	r->rng ^= r->rng >> 12;
	r->rng ^= r->rng << 25;
	r->rng ^= r->rng >> 27;
	return r->rng * XORSHIFT_MUL;
}

void front_lat_add(struct front_lat *l, uint64_t us)
{
	l->hist[td_lat_bucket(us)]++;
	l->sum_us += us;
	l->count++;
	if (us > l->max_us)
		l->max_us = us;
}

uint32_t front_data_pages(const struct front_opts *o)
{
	if (o->pattern == FRONT_INTERLEAVE)
		return FRONT_INTERLEAVE_BLOCKS;
	return o->qd * ((o->max_bs + TDF_PAGE_SIZE - 1) / TDF_PAGE_SIZE);
}

/* --- one job's life ---------------------------------------------------------- */

static void job_done(struct tdf_io *io, int err);

/* Give j its next I/O, if the workload has one. */
static void job_start(struct run *r, struct job *j)
{
	int err;

	if (r->stopping || !r->next(r, j))
		return;
	j->io.cb = job_done;
	j->io.opaque = j;
	j->start_ns = td_now_ns();
	err = tdf_submit(r->dev, &j->io);
	if (err) {
		fprintf(stderr, "td-front: cannot submit an I/O at %llu: %s\n",
			(unsigned long long)j->io.offset, strerror(-err));
		r->error = err;
		r->stopping = true;
		return;
	}
	r->outstanding++;
}

static void record_mismatch(struct run *r, struct job *j,
			    const struct tdf_mismatch *m)
{
	struct front_result *res = r->res;

	if (res->mismatches < FRONT_MAX_MISMATCHES) {
		res->mismatch[res->mismatches].m = *m;
		res->mismatch[res->mismatches].generation = j->generation;
	}
	res->mismatches++;
}

/* --verify-zeroes: what a read of a null: disk must find. */
static int check_zeroes(const unsigned char *buf, uint64_t offset, uint32_t len,
			struct tdf_mismatch *bad)
{
	for (uint32_t i = 0; i < len; i++)
		if (buf[i]) {
			memset(bad, 0, sizeof(*bad));
			bad->offset =
				offset + i / TDF_SECTOR_SIZE * TDF_SECTOR_SIZE;
			bad->bad_magic = true;
			return -EILSEQ;
		}
	return 0;
}

static void job_account(struct run *r, struct job *j)
{
	struct front_result *res = r->res;
	const unsigned char *buf =
		tdf_queue_page(r->dev, j->io.queue, j->io.page);
	int w = j->io.op == TDF_OP_WRITE;
	struct tdf_mismatch m;
	int bad;

	res->ios[w]++;
	res->bytes[w] += j->io.len;
	if (!j->check)
		return;
	bad = r->o->verify_zeroes
		      ? check_zeroes(buf, j->io.offset, j->io.len, &m)
		      : tdf_pattern_check(buf, j->io.offset, j->io.len,
					  j->generation, r->o->seed, &m);
	if (bad)
		record_mismatch(r, j, &m);
	else
		res->verified_bytes += j->io.len;
}

static void job_done(struct tdf_io *io, int err)
{
	struct job *j = io->opaque;
	struct run *r = j->run;

	front_lat_add(&r->res->lat, (td_now_ns() - j->start_ns) / NS_PER_US);
	r->outstanding--;
	if (err) {
		if (!r->res->io_errors++)
			r->res->first_error = err;
		r->stopping = true;
	} else {
		job_account(r, j);
	}
	job_start(r, j);
}

/* Start every job, then push and reap until none is left. */
static int run_loop(struct run *r)
{
	for (uint32_t i = 0; i < r->njobs; i++)
		job_start(r, &r->jobs[i]);
	while (r->outstanding && !r->error) {
		int n = tdf_kick(r->dev);

		if (n >= 0)
			n = tdf_wait(r->dev, WAIT_MS);
		if (n < 0) {
			fprintf(stderr, "td-front: the ring failed: %s\n",
				n == -ECONNRESET ? "the backend disconnected"
						 : strerror(-n));
			r->error = n;
			break;
		}
		if (r->deadline_ns && td_now_ns() >= r->deadline_ns)
			r->stopping = true;
		front_progress(r->o, r->res, r->start_ns, false);
	}
	return r->error;
}

/* --- seq, rand ------------------------------------------------------------------ */

static uint32_t pick_len(struct run *r)
{
	const struct front_opts *o = r->o;

	return o->nr_bs == 1 ? o->bs[0] : o->bs[rnd(r) % o->nr_bs];
}

static enum tdf_op pick_op(struct run *r)
{
	switch (r->o->rw) {
	case FRONT_READ:
		return TDF_OP_READ;
	case FRONT_WRITE:
		return TDF_OP_WRITE;
	default:
		return rnd(r) % 100 < r->o->rwmix_read ? TDF_OP_READ
						       : TDF_OP_WRITE;
	}
}

static uint64_t pick_offset(struct run *r, uint32_t len)
{
	uint64_t align, slots, off;

	if (r->o->pattern == FRONT_SEQ) {
		if (r->seq_next + len > r->end)
			r->seq_next = r->start; /* wrap around */
		off = r->seq_next;
		r->seq_next += len;
		return off;
	}
	align = r->o->nr_bs == 1 ? len : RAND_ALIGN;
	if (align > len)
		align = len;
	slots = (r->end - r->start - len) / align + 1;
	return r->start + rnd(r) % slots * align;
}

static bool next_perf(struct run *r, struct job *j)
{
	uint32_t len;

	if (r->limit_bytes && r->started_bytes >= r->limit_bytes)
		return false;
	len = pick_len(r);
	j->io.op = pick_op(r);
	j->io.len = len;
	j->io.page = j->index * r->buf_pages;
	j->io.offset = pick_offset(r, len);
	r->started_bytes += len;
	return true;
}

/* --- verify ----------------------------------------------------------------------- */

/* The region in chunks of the --bs sizes, in the order they are written. */
static int plan_chunks(struct run *r)
{
	uint64_t rng = r->rng, n = 0, cap = 0;
	struct chunk *c = NULL;

	for (uint64_t off = r->start; off < r->end; n++) {
		uint32_t len = pick_len(r);

		if (len > r->end - off)
			len = (uint32_t)(r->end - off);
		if (n == cap) {
			struct chunk *p =
				realloc(c, (cap = cap * 2 + 1024) * sizeof(*c));
			if (!p) {
				free(c);
				return -ENOMEM;
			}
			c = p;
		}
		c[n] = (struct chunk){off, len};
		off += len;
	}
	if (r->o->pattern == FRONT_RAND)
		for (uint64_t i = n; i > 1; i--) {
			uint64_t k = rnd(r) % i;
			struct chunk t = c[i - 1];

			c[i - 1] = c[k];
			c[k] = t;
		}
	r->rng = rng; /* the perf workloads' sequence is not disturbed */
	r->chunks = c;
	r->nr_chunks = n;
	return 0;
}

static bool next_verify(struct run *r, struct job *j)
{
	const struct chunk *c;

	if (r->next_chunk == r->nr_chunks)
		return false;
	c = &r->chunks[r->next_chunk++];
	j->io.op = r->phase;
	j->io.offset = c->offset;
	j->io.len = c->len;
	j->io.page = j->index * r->buf_pages;
	j->generation = r->generation;
	j->check = r->phase == TDF_OP_READ;
	if (r->phase == TDF_OP_WRITE)
		tdf_pattern_fill(
			tdf_queue_page(r->dev, j->io.queue, j->io.page),
			c->offset, c->len, r->generation, r->o->seed);
	else /* so that a read that moves no data is caught */
		memset(tdf_queue_page(r->dev, j->io.queue, j->io.page),
		       FRONT_POISON_BYTE, c->len);
	return true;
}

static int run_verify(struct run *r)
{
	int err = plan_chunks(r);

	r->next = next_verify;
	for (uint32_t p = 0; p < r->o->passes && !err; p++) {
		r->generation = r->o->generation + p;
		r->phase = TDF_OP_WRITE;
		r->next_chunk = 0;
		if ((err = run_loop(r)) || r->stopping)
			break;
		r->res->last_generation = r->generation;
		r->phase = TDF_OP_READ;
		r->next_chunk = 0;
		if ((err = run_loop(r)) || r->stopping)
			break;
	}
	free(r->chunks);
	return err;
}

/* --- interleave ------------------------------------------------------------------- */

static bool next_none(struct run *r, struct job *j)
{
	return false;
}

/* One round: 28 writes queued even blocks first, one push, wait. */
static int run_round(struct run *r, uint64_t base, uint64_t generation)
{
	uint64_t t0 = td_now_ns();
	int err;

	for (uint32_t i = 0; i < FRONT_INTERLEAVE_BLOCKS; i++) {
		uint32_t k =
			i < FRONT_INTERLEAVE_BLOCKS / 2
				? 2 * i
				: 2 * (i - FRONT_INTERLEAVE_BLOCKS / 2) + 1;
		struct job *j = &r->jobs[k];

		j->io = (struct tdf_io){
			.op = TDF_OP_WRITE,
			.offset = base + (uint64_t)k * FRONT_INTERLEAVE_BS,
			.len = FRONT_INTERLEAVE_BS,
			.page = k,
			.cb = job_done,
			.opaque = j,
		};
		tdf_pattern_fill(tdf_page(r->dev, k), j->io.offset,
				 FRONT_INTERLEAVE_BS, generation, r->o->seed);
		j->start_ns = t0;
		if ((err = tdf_submit(r->dev, &j->io)))
			return err;
		r->outstanding++;
	}
	err = run_loop(r); /* pushes the 28 at once, then waits */
	front_lat_add(&r->res->round, (td_now_ns() - t0) / NS_PER_US);
	return err;
}

static int run_interleave(struct run *r)
{
	uint64_t span = (r->end - r->start) / INTERLEAVE_SPAN * INTERLEAVE_SPAN;
	int err = 0;

	r->next = next_none;
	r->njobs = 0; /* run_loop starts nothing: the rounds submit */
	for (uint32_t i = 0; i < r->o->rounds && !err && !r->stopping; i++) {
		err = run_round(r,
				r->start + (uint64_t)i * INTERLEAVE_SPAN % span,
				r->o->generation + i);
		r->res->rounds++;
	}
	return err;
}

/* --- the run ---------------------------------------------------------------------- */

static int setup(struct run *r, const struct front_opts *o, struct tdf_dev *dev,
		 struct front_result *res)
{
	const struct tdf_info *info = tdf_get_info(dev);
	/* --qd I/Os per ring; interleave rounds use ring 0 only. */
	uint32_t nq = o->pattern == FRONT_INTERLEAVE ? 1 : info->nr_queues;
	uint32_t n = o->pattern == FRONT_INTERLEAVE ? FRONT_INTERLEAVE_BLOCKS
						    : o->qd * nq;

	memset(r, 0, sizeof(*r));
	r->o = o;
	r->dev = dev;
	r->res = res;
	r->rng = o->seed ?: DEFAULT_SEED;
	r->start = r->seq_next = o->offset;
	r->end = o->size ? o->offset + o->size : info->size_bytes;
	r->buf_pages = (o->max_bs + TDF_PAGE_SIZE - 1) / TDF_PAGE_SIZE;
	r->jobs = calloc(n, sizeof(*r->jobs));
	if (!r->jobs)
		return -ENOMEM;
	r->njobs = n;
	/* Job i: ring i mod nq, buffer i / nq in that ring's pool. */
	for (uint32_t i = 0; i < n; i++) {
		r->jobs[i].run = r;
		r->jobs[i].index = i / nq;
		r->jobs[i].io.queue = i % nq;
	}
	/* Writes of the perf workloads carry a pattern, not zeroes. */
	for (uint32_t q = 0; q < nq; q++)
		for (uint32_t p = 0; p < front_data_pages(o); p++)
			tdf_pattern_fill(tdf_queue_page(dev, q, p),
					 (uint64_t)p * TDF_PAGE_SIZE,
					 TDF_PAGE_SIZE, 0, r->rng);
	return 0;
}

static uint64_t cpu_now_us(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * US_PER_S +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int front_run(const struct front_opts *o, struct tdf_dev *dev,
	      struct front_result *res)
{
	uint64_t cpu0 = cpu_now_us();
	struct run r;
	int err = setup(&r, o, dev, res);

	if (err)
		return err;
	r.start_ns = td_now_ns();
	if (o->time_s > 0)
		r.deadline_ns = r.start_ns + (uint64_t)(o->time_s * NS_PER_S);
	r.limit_bytes = o->bytes;
	if (!o->time_s && !o->bytes)
		r.limit_bytes = r.end - r.start; /* the region once */
	if (o->verify)
		err = run_verify(&r);
	else if (o->pattern == FRONT_INTERLEAVE)
		err = run_interleave(&r);
	else {
		r.next = next_perf;
		err = run_loop(&r);
	}
	res->elapsed_s = (double)(td_now_ns() - r.start_ns) / NS_PER_S;
	res->cpu_us = cpu_now_us() - cpu0;
	front_progress(o, res, r.start_ns, true);
	tdf_get_stats(dev, &res->ring);
	free(r.jobs);
	return err;
}
