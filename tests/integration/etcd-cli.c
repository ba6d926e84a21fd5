/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd-cli.c - drives master/etcd/etcd.h from the shell, for
 * tests/integration/etcd-client.sh and bench/etcd-txn.sh.  Not installed.
 * Keys and values are text, or bytes in hex after "x:" ("x:00ff").
 * Answers are JSON on stdout; errors go to stderr as
 * "etcd-cli: ENAME: reason", exit status 1.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/json.h"
#include "common/util.h"
#include "master/etcd/etcd.h"

#define CLI_MAX_BYTES 4096

struct cli_bytes {
	uint8_t data[CLI_MAX_BYTES];
	size_t len;
};

static const char cli_usage[] =
	"Usage: etcd-cli --endpoints URL[,URL...] [--timeout MS] COMMAND\n"
	"  get KEY                  the value, mod_revision, store revision\n"
	"  put KEY VALUE            an unconditional put (a txn)\n"
	"  cas KEY OLD NEW PREFIX LIMIT\n"
	"                           if KEY's value is OLD put NEW, else range\n"
	"                           PREFIX (at most LIMIT pairs, 0 = all)\n"
	"  create KEY VALUE         put only if KEY is absent, else get it\n"
	"  cas-rev KEY REV VALUE    put only if KEY's mod_revision is REV\n"
	"  range PREFIX LIMIT       the pairs under PREFIX (a txn)\n"
	"  delete PREFIX            delete every key under PREFIX\n"
	"  puts N                   one txn of N puts (many/0 ...; N <= 1024)\n"
	"  bench KEY COUNT LATFILE  COUNT compare-and-swap increments of KEY,\n"
	"                           each call's latency (us) a line of "
	"LATFILE\n"
	"KEY, VALUE: text, or hex bytes after x: (x:00ff).\n";

static int cli_hex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int cli_bytes_parse(const char *arg, struct cli_bytes *b)
{
	size_t i, n;
	int hi, lo;

	if (strncmp(arg, "x:", 2)) {
		b->len = strlen(arg);
		if (b->len > CLI_MAX_BYTES)
			return -EINVAL;
		memcpy(b->data, arg, b->len);
		return 0;
	}
	arg += 2;
	n = strlen(arg);
	if (n % 2 || n / 2 > CLI_MAX_BYTES)
		return -EINVAL;
	for (i = 0; i < n / 2; i++) {
		hi = cli_hex(arg[2 * i]);
		lo = cli_hex(arg[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		b->data[i] = (uint8_t)(hi << 4 | lo);
	}
	b->len = n / 2;
	return 0;
}

static void cli_json_hex(struct td_json *j, const char *key,
			 const uint8_t *data, size_t len)
{
	char *text = malloc(2 * len + 1);
	size_t i;

	if (!text)
		exit(1);
	for (i = 0; i < len; i++)
		snprintf(text + 2 * i, 3, "%02x", data[i]);
	text[2 * len] = '\0';
	td_json_str(j, key, text);
	free(text);
}

static void cli_json_kv(struct td_json *j, const struct etcd_kv *kv)
{
	td_json_begin_object(j, NULL);
	cli_json_hex(j, "key_hex", kv->key, kv->key_len);
	cli_json_hex(j, "value_hex", kv->value, kv->value_len);
	td_json_i64(j, "mod_revision", kv->mod_revision);
	td_json_i64(j, "create_revision", kv->create_revision);
	td_json_i64(j, "version", kv->version);
	td_json_end_object(j);
}

static void cli_print(struct td_json *j, struct td_strbuf *sb)
{
	if (td_json_finish(j) < 0)
		exit(1);
	fputs(td_strbuf_str(sb), stdout);
	td_strbuf_free(sb);
}

static int cli_fail(struct etcd_client *c, int rc)
{
	char name[32];

	fprintf(stderr, "etcd-cli: %s: %s\n",
		td_errno_name(rc, name, sizeof(name)), etcd_client_error(c));
	return 1;
}

static int cli_get(struct etcd_client *c, const struct cli_bytes *key)
{
	struct td_strbuf sb;
	struct td_json j;
	struct etcd_kv kv;
	int64_t rev;
	bool found;
	int rc = etcd_get(c, key->data, key->len, &kv, &found, &rev);

	if (rc < 0)
		return cli_fail(c, rc);
	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_bool(&j, "found", found);
	td_json_i64(&j, "revision", rev);
	if (found) {
		cli_json_hex(&j, "value_hex", kv.value, kv.value_len);
		td_json_i64(&j, "mod_revision", kv.mod_revision);
	}
	td_json_end_object(&j);
	cli_print(&j, &sb);
	etcd_kv_clear(&kv);
	return 0;
}

static void cli_print_txn(const struct etcd_txn_result *res)
{
	struct td_strbuf sb;
	struct td_json j;
	size_t i, k;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_bool(&j, "succeeded", res->succeeded);
	td_json_i64(&j, "revision", res->revision);
	td_json_begin_array(&j, "ranges");
	for (i = 0; i < res->nr_ranges; i++) {
		td_json_begin_object(&j, NULL);
		td_json_i64(&j, "count", res->ranges[i].count);
		td_json_bool(&j, "more", res->ranges[i].more);
		td_json_begin_array(&j, "kvs");
		for (k = 0; k < res->ranges[i].nr_kvs; k++)
			cli_json_kv(&j, &res->ranges[i].kvs[k]);
		td_json_end_array(&j);
		td_json_end_object(&j);
	}
	td_json_end_array(&j);
	td_json_end_object(&j);
	cli_print(&j, &sb);
}

static int cli_txn(struct etcd_client *c, const struct etcd_cmp *cmp,
		   size_t nr_cmps, const struct etcd_op *ok, size_t nr_ok,
		   const struct etcd_op *ko, size_t nr_ko)
{
	struct etcd_txn_result res;
	int rc = etcd_txn(c, cmp, nr_cmps, ok, nr_ok, ko, nr_ko, &res);

	if (rc < 0)
		return cli_fail(c, rc);
	cli_print_txn(&res);
	etcd_txn_result_clear(&res);
	return 0;
}

/* An op over every key under prefix (end has room for prefix's bytes). */
static struct etcd_op cli_prefix_op(enum etcd_op_kind kind,
				    const struct cli_bytes *prefix,
				    struct cli_bytes *end, int64_t limit)
{
	static const uint8_t to_the_end = 0;
	struct etcd_op op = {.kind = kind,
			     .key = prefix->data,
			     .key_len = prefix->len,
			     .limit = limit};

	etcd_prefix_end(prefix->data, prefix->len, end->data, &end->len);
	op.range_end = end->len ? (const void *)end->data : &to_the_end;
	op.range_end_len = end->len ? end->len : 1;
	return op;
}

static int64_t cli_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * One increment of key's decimal value by compare-and-swap, as the
 * master's round will append to its log: on a lost race the failure
 * branch returns the current value and the call tries again.
 */
static int cli_bench_one(struct etcd_client *c, const struct cli_bytes *key,
			 uint64_t *cur, unsigned int *conflicts)
{
	char old[24], new[24];
	struct etcd_txn_result res;
	int rc;

	for (;;) {
		snprintf(old, sizeof(old), "%" PRIu64, *cur);
		snprintf(new, sizeof(new), "%" PRIu64, *cur + 1);
		const struct etcd_cmp cmp = {.kind = *cur ? ETCD_CMP_VALUE
							  : ETCD_CMP_ABSENT,
					     .key = key->data,
					     .key_len = key->len,
					     .value = old,
					     .value_len = strlen(old)};
		const struct etcd_op put = {.kind = ETCD_OP_PUT,
					    .key = key->data,
					    .key_len = key->len,
					    .value = new,
					    .value_len = strlen(new)};
		const struct etcd_op get = {.kind = ETCD_OP_RANGE,
					    .key = key->data,
					    .key_len = key->len};

		rc = etcd_txn(c, &cmp, 1, &put, 1, &get, 1, &res);
		if (rc < 0)
			return rc;
		if (res.succeeded) {
			(*cur)++;
			etcd_txn_result_clear(&res);
			return 0;
		}
		(*conflicts)++;
		*cur = 0;
		if (res.nr_ranges == 1 && res.ranges[0].nr_kvs == 1) {
			char text[24] = "";
			size_t n = res.ranges[0].kvs[0].value_len;

			memcpy(text, res.ranges[0].kvs[0].value,
			       n < sizeof(text) - 1 ? n : sizeof(text) - 1);
			*cur = strtoull(text, NULL, 10);
		}
		etcd_txn_result_clear(&res);
	}
}

static int cli_bench(struct etcd_client *c, const struct cli_bytes *key,
		     unsigned long count, const char *latfile)
{
	FILE *f = fopen(latfile, "w");
	unsigned int conflicts = 0;
	uint64_t cur = 0;
	int64_t t0, start = cli_now_us();
	unsigned long i;
	int rc;

	if (!f) {
		perror(latfile);
		return 1;
	}
	for (i = 0; i < count; i++) {
		t0 = cli_now_us();
		rc = cli_bench_one(c, key, &cur, &conflicts);
		if (rc < 0) {
			fclose(f);
			return cli_fail(c, rc);
		}
		fprintf(f, "%" PRId64 "\n", cli_now_us() - t0);
	}
	fclose(f);
	printf("{\"calls\": %lu, \"conflicts\": %u, \"seconds\": %.3f}\n",
	       count, conflicts, (cli_now_us() - start) / 1e6);
	return 0;
}

/* argc - first must be n; the first nr_bytes of them are bytes into b. */
/* One txn of n puts (keys many/0, many/1, ...): past etcd's limit. */
static int cli_puts(struct etcd_client *c, unsigned long n)
{
	static char keys[1024][16];
	static struct etcd_op ops[1024];
	unsigned long k;

	if (n > 1024)
		n = 1024;
	for (k = 0; k < n; k++) {
		snprintf(keys[k], sizeof(keys[k]), "many/%lu", k);
		ops[k] = (struct etcd_op){.kind = ETCD_OP_PUT,
					  .key = keys[k],
					  .key_len = strlen(keys[k]),
					  .value = "v",
					  .value_len = 1};
	}
	return cli_txn(c, NULL, 0, ops, n, NULL, 0);
}

static int cli_args(int argc, char **argv, int first, int n, int nr_bytes,
		    struct cli_bytes *b)
{
	int i;

	if (argc - first != n)
		return -EINVAL;
	for (i = 0; i < nr_bytes; i++) {
		if (cli_bytes_parse(argv[first + i], &b[i]) < 0) {
			fprintf(stderr, "etcd-cli: bad bytes '%s'\n",
				argv[first + i]);
			return -EINVAL;
		}
	}
	return 0;
}

static int cli_run(struct etcd_client *c, const char *cmd, int argc,
		   char **argv, int i)
{
	static struct cli_bytes a[5], end;

	if (!strcmp(cmd, "get") && !cli_args(argc, argv, i, 1, 1, a))
		return cli_get(c, &a[0]);
	if (!strcmp(cmd, "put") && !cli_args(argc, argv, i, 2, 2, a)) {
		struct etcd_op op = {ETCD_OP_PUT, a[0].data, a[0].len,
				     a[1].data,	  a[1].len,  NULL,
				     0,		  0};
		return cli_txn(c, NULL, 0, &op, 1, NULL, 0);
	}
	if (!strcmp(cmd, "cas") && !cli_args(argc, argv, i, 5, 4, a)) {
		struct etcd_cmp cmp = {ETCD_CMP_VALUE, a[0].data, a[0].len,
				       a[1].data,      a[1].len,  0};
		struct etcd_op ok = {ETCD_OP_PUT, a[0].data, a[0].len,
				     a[2].data,	  a[2].len,  NULL,
				     0,		  0};
		struct etcd_op ko = cli_prefix_op(ETCD_OP_RANGE, &a[3], &end,
						  atoll(argv[i + 4]));
		return cli_txn(c, &cmp, 1, &ok, 1, &ko, 1);
	}
	if (!strcmp(cmd, "create") && !cli_args(argc, argv, i, 2, 2, a)) {
		struct etcd_cmp cmp = {
			ETCD_CMP_ABSENT, a[0].data, a[0].len, NULL, 0, 0};
		struct etcd_op ok = {ETCD_OP_PUT, a[0].data, a[0].len,
				     a[1].data,	  a[1].len,  NULL,
				     0,		  0};
		struct etcd_op ko = {
			ETCD_OP_RANGE, a[0].data, a[0].len, NULL, 0,
			NULL,	       0,	  0};
		return cli_txn(c, &cmp, 1, &ok, 1, &ko, 1);
	}
	if (!strcmp(cmd, "cas-rev") && !cli_args(argc, argv, i, 3, 3, a)) {
		struct etcd_cmp cmp = {
			ETCD_CMP_MOD_REVISION, a[0].data, a[0].len, NULL, 0,
			atoll(argv[i + 1])};
		struct etcd_op ok = {ETCD_OP_PUT, a[0].data, a[0].len,
				     a[2].data,	  a[2].len,  NULL,
				     0,		  0};
		return cli_txn(c, &cmp, 1, &ok, 1, NULL, 0);
	}
	if (!strcmp(cmd, "range") && !cli_args(argc, argv, i, 2, 1, a)) {
		struct etcd_op op = cli_prefix_op(ETCD_OP_RANGE, &a[0], &end,
						  atoll(argv[i + 1]));
		return cli_txn(c, NULL, 0, &op, 1, NULL, 0);
	}
	if (!strcmp(cmd, "delete") && !cli_args(argc, argv, i, 1, 1, a)) {
		struct etcd_op op =
			cli_prefix_op(ETCD_OP_DELETE, &a[0], &end, 0);
		return cli_txn(c, NULL, 0, &op, 1, NULL, 0);
	}
	if (!strcmp(cmd, "puts") && !cli_args(argc, argv, i, 1, 0, a))
		return cli_puts(c, strtoul(argv[i], NULL, 10));
	if (!strcmp(cmd, "bench") && !cli_args(argc, argv, i, 3, 1, a))
		return cli_bench(c, &a[0], strtoul(argv[i + 1], NULL, 10),
				 argv[i + 2]);
	fputs(cli_usage, stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"endpoints", required_argument, NULL, 'e'},
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *endpoints = NULL;
	unsigned int timeout_ms = 2000;
	struct etcd_client *c;
	char err[256] = "";
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "e:t:h", options, NULL)) != -1) {
		if (opt == 'e') {
			endpoints = optarg;
		} else if (opt == 't') {
			timeout_ms = (unsigned int)strtoul(optarg, NULL, 10);
		} else {
			fputs(cli_usage, opt == 'h' ? stdout : stderr);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!endpoints || optind >= argc) {
		fputs(cli_usage, stderr);
		return 2;
	}
	rc = etcd_client_new(endpoints, timeout_ms, &c, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "etcd-cli: %s\n", err[0] ? err : strerror(-rc));
		return 2;
	}
	rc = cli_run(c, argv[optind], argc, argv, optind + 1);
	etcd_client_free(c);
	return rc;
}
