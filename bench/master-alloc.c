/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * master-alloc.c - durable allocations per second against a running
 * stripe-master, from concurrent clients, with latency percentiles
 * (issue #5).
 *
 * Each client is a thread with a connection of its own; it allocates
 * disks NAME = PREFIX-CLIENT-I one after the other (each answer arrives only
 * once the master has committed it) and records the latency of each call.
 * With --acked FILE every disk the master acknowledged is appended to FILE
 * the moment its answer arrives: the crash test kills the master and then
 * checks that every name in FILE survived.  With --stamp each line also
 * has the wall-clock time of the answer (ns) and the master that gave it
 * (a list of masters fails over, issue #23): bench/master-failover.sh.
 *
 * Output, one line:  allocations N failed F seconds T per_second R
 *                    p50_us A p90_us B p99_us C max_us D
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "master/client/client.h"

#define MAX_CLIENTS 64
#define NAME_BYTES  (MS_VDISK_ID_MAX + 1)
#define NS_PER_US   1000ull
#define NS_PER_S    1000000000ull

struct bench {
	const char *master;
	const char *prefix;
	unsigned int clients;
	unsigned int count; /* per client */
	unsigned int columns, per_column, replicas;
	bool release;
	bool stamp; /* --stamp: time and master on each acked line */
	int acked_fd;
	struct master_client_opts opts;
	uint64_t extent_bytes;
};

struct worker {
	pthread_t thread;
	const struct bench *b;
	unsigned int index;
	unsigned int done, failed;
	uint64_t *lat_ns;
};

static void note_acked(const struct bench *b, struct master_client *c,
		       const char *name)
{
	char line[NAME_BYTES + MASTER_CLIENT_ERROR_SIZE];
	struct timespec ts;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (b->stamp)
		n = snprintf(line, sizeof(line), "%s %llu %s\n", name,
			     (unsigned long long)ts.tv_sec * NS_PER_S +
				     (unsigned long long)ts.tv_nsec,
			     master_client_address(c));
	else
		n = snprintf(line, sizeof(line), "%s\n", name);
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;

	/* One write(2) per line on an O_APPEND fd: lines never interleave. */
	if (b->acked_fd >= 0 && write(b->acked_fd, line, (size_t)n) != n)
		td_warn("cannot record %s: %s", name, strerror(errno));
}

static int one_alloc(struct worker *w, struct master_client *c, unsigned int i)
{
	const struct bench *b = w->b;
	char name[NAME_BYTES];
	ms_alloc_args a = {.id = name,
			   .columns = b->columns,
			   .extents_per_column = b->per_column,
			   .replicas = b->replicas,
			   .extent_size_bytes = b->extent_bytes};
	ms_reply rep;
	uint64_t t0;
	int ret;

	snprintf(name, sizeof(name), "%s-%u-%u", b->prefix, w->index, i);
	t0 = td_now_ns();
	ret = master_call_vdisk_alloc(c, &a, &rep);
	w->lat_ns[w->done] = td_now_ns() - t0;
	master_reply_free(&rep);
	if (ret) {
		fprintf(stderr, "master-alloc: %s: %s\n", name,
			master_client_error(c));
		return ret;
	}
	note_acked(b, c, name);
	if (b->release && (ret = master_call_vdisk_release(c, name, &rep)))
		fprintf(stderr, "master-alloc: release %s: %s\n", name,
			master_client_error(c));
	master_reply_free(&rep);
	return ret;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct master_client *c;

	if (master_client_open(w->b->master, &w->b->opts, &c)) {
		w->failed = w->b->count;
		return NULL;
	}
	for (unsigned int i = 0; i < w->b->count; i++) {
		if (one_alloc(w, c, i)) {
			w->failed++;
			break; /* the crash test stops at the first failure */
		}
		w->done++;
	}
	master_client_close(c);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static uint64_t percentile(const uint64_t *v, size_t n, unsigned int pct)
{
	size_t i = (n * pct + 99) / 100;

	return n ? v[i ? i - 1 : 0] : 0;
}

static void report(struct worker *w, unsigned int n, uint64_t elapsed_ns)
{
	size_t total = 0, k = 0;
	unsigned int failed = 0;
	uint64_t *all;

	for (unsigned int i = 0; i < n; i++) {
		total += w[i].done;
		failed += w[i].failed;
	}
	all = malloc((total ? total : 1) * sizeof(*all));
	for (unsigned int i = 0; all && i < n; i++)
		for (unsigned int j = 0; j < w[i].done; j++)
			all[k++] = w[i].lat_ns[j];
	if (all)
		qsort(all, total, sizeof(*all), cmp_u64);
	printf("allocations %zu failed %u seconds %.3f per_second %.0f "
	       "p50_us %llu p90_us %llu p99_us %llu max_us %llu\n",
	       total, failed, (double)elapsed_ns / NS_PER_S,
	       elapsed_ns ? (double)total * NS_PER_S / (double)elapsed_ns : 0,
	       (unsigned long long)(all ? percentile(all, total, 50) / NS_PER_US
					: 0),
	       (unsigned long long)(all ? percentile(all, total, 90) / NS_PER_US
					: 0),
	       (unsigned long long)(all ? percentile(all, total, 99) / NS_PER_US
					: 0),
	       (unsigned long long)(all && total ? all[total - 1] / NS_PER_US
						 : 0));
	free(all);
}

static void usage(FILE *out)
{
	fputs("Usage: master-alloc --master HOST[:PORT][,...] [--clients N] "
	      "[--count N]\n"
	      "           [--shape S,J,R] [--prefix NAME] [--acked FILE]\n"
	      "           [--timeout MS] [--retries N] [--release] "
	      "[--stamp]\n\n"
	      "N clients (default 4) each allocate --count disks (default "
	      "1000) of\nS columns x J extents x R replicas (default 2,1,2) "
	      "named PREFIX-C-I,\nand print the allocations per second and "
	      "the latency percentiles.\n--acked FILE appends each "
	      "acknowledged name to FILE (--stamp: with the time\nof its "
	      "answer in ns since the epoch and the master that gave it); "
	      "--release\nfrees each disk after its allocation (not timed).  "
	      "--master takes a list\nA,B,C of masters serving one state.\n",
	      out);
}

static const struct option options[] = {
	{"master", required_argument, NULL, 'm'},
	{"clients", required_argument, NULL, 'c'},
	{"count", required_argument, NULL, 'n'},
	{"shape", required_argument, NULL, 's'},
	{"prefix", required_argument, NULL, 'p'},
	{"acked", required_argument, NULL, 'a'},
	{"timeout", required_argument, NULL, 't'},
	{"retries", required_argument, NULL, 'r'},
	{"release", no_argument, NULL, 'R'},
	{"stamp", no_argument, NULL, 'S'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static int parse(struct bench *b, int argc, char **argv)
{
	int c;

	while ((c = getopt_long(argc, argv, "m:c:n:s:p:a:t:r:RSh", options,
				NULL)) != -1) {
		switch (c) {
		case 'm':
			b->master = optarg;
			break;
		case 'c':
			b->clients = (unsigned int)atoi(optarg);
			break;
		case 'n':
			b->count = (unsigned int)atoi(optarg);
			break;
		case 's':
			if (sscanf(optarg, "%u,%u,%u", &b->columns,
				   &b->per_column, &b->replicas) != 3)
				return -EINVAL;
			break;
		case 'p':
			b->prefix = optarg;
			break;
		case 'a':
			b->acked_fd =
				open(optarg,
				     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
				     0644);
			if (b->acked_fd < 0)
				return -errno;
			break;
		case 't':
			b->opts.timeout_ms = (unsigned int)atoi(optarg);
			break;
		case 'r':
			b->opts.retries = (unsigned int)atoi(optarg);
			break;
		case 'R':
			b->release = true;
			break;
		case 'S':
			b->stamp = true;
			break;
		default:
			return -EINVAL;
		}
	}
	return b->master && b->clients && b->clients <= MAX_CLIENTS &&
			       b->count && optind == argc
		       ? 0
		       : -EINVAL;
}

/* The master's extent size, so that the allocations match it. */
static int fetch_extent_size(struct bench *b)
{
	struct master_client *c;
	ms_reply rep;
	int ret = master_client_open(b->master, &b->opts, &c);

	if (ret)
		return ret;
	if (!(ret = master_call_info(c, &rep)))
		b->extent_bytes = rep.body.ms_body_u.info.extent_size_bytes;
	else
		fprintf(stderr, "master-alloc: %s\n", master_client_error(c));
	master_reply_free(&rep);
	master_client_close(c);
	return ret;
}

int main(int argc, char **argv)
{
	struct bench b = {.prefix = "bench",
			  .clients = 4,
			  .count = 1000,
			  .columns = 2,
			  .per_column = 1,
			  .replicas = 2,
			  .acked_fd = -1,
			  .opts = {MASTER_CLIENT_DEFAULT_TIMEOUT_MS,
				   MASTER_CLIENT_DEFAULT_RETRIES}};
	struct worker w[MAX_CLIENTS] = {{0}};
	uint64_t t0;

	signal(SIGPIPE, SIG_IGN);
	if (parse(&b, argc, argv)) {
		usage(stderr);
		return 2;
	}
	if (fetch_extent_size(&b))
		return 1;
	t0 = td_now_ns();
	for (unsigned int i = 0; i < b.clients; i++) {
		w[i].b = &b;
		w[i].index = i;
		w[i].lat_ns = calloc(b.count, sizeof(uint64_t));
		if (!w[i].lat_ns ||
		    pthread_create(&w[i].thread, NULL, worker_main, &w[i]))
			return 1;
	}
	for (unsigned int i = 0; i < b.clients; i++)
		pthread_join(w[i].thread, NULL);
	report(w, b.clients, td_now_ns() - t0);
	for (unsigned int i = 0; i < b.clients; i++)
		free(w[i].lat_ns);
	return 0;
}
