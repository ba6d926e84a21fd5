/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stripe-ctl-resync.c - how vdisk resync follows a tapdisk's runs
 * (tests/integration/stripe-replica.sh and stripe-resync-ctl.sh run it
 * against tgtd): against a scripted control socket, a replica marked
 * stale during the run gets another pass, a run with nothing to do ends
 * the passes, the passes are bounded, and offline there is one.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tools/stripe-ctl/stripe-ctl-resync.c"

volatile sig_atomic_t ctl_interrupted;

/* stripe-ctl.c, stripe-ctl-output.c, stripe-ctl-serve.c. */
int ctl_fail(const char *fmt, ...)
{
	return EXIT_FAILURE;
}

struct master_client *ctl_client(const struct ctl_opts *o)
{
	return NULL;
}

void ctl_format_bytes(uint64_t bytes, char *buf, size_t size)
{
	snprintf(buf, size, "%llu", (unsigned long long)bytes);
}

int ctl_print_json(struct td_json *j, struct td_strbuf *sb)
{
	td_strbuf_free(sb);
	return 0;
}

int ctl_serve_run(struct ctl_serve *s, bool busy)
{
	return s->run(s);
}

void ctl_serve_wait(struct ctl_serve *s)
{
}

/* --- the scripted driver ------------------------------------------------------- */

struct step {
	const char *words; /* what the command must be */
	const char *reply;
	int err;
};

static const struct step *script;
static size_t script_len, script_at;

int ctl_serve_command(struct ctl_serve *s, const char *words,
		      struct td_strbuf *out)
{
	const struct step *st;

	assert_true(script_at < script_len);
	st = &script[script_at++];
	assert_string_equal(words, st->words);
	td_strbuf_reset(out);
	td_strbuf_puts(out, st->reply);
	return st->err;
}

/* A status: the run's state, replicas done, stale replicas left. */
#define STATUS(state, done, stale)                                            \
	"{\"servers\":[{\"index\":0,\"state\":\"up\"}],"                      \
	"\"resync\":{\"state\":\"" state "\",\"replicas_done\":" #done        \
	",\"replicas_total\":8,\"replicas_failed\":0,\"bytes_copied\":" #done \
	",\"last_error\":\"\"},"                                              \
	"\"stale_replicas\":" #stale ",\"stale_marks_pending\":0}"

#define RUN(words, done, stale_after)                                  \
	{"status json", STATUS("idle", 0, 8), 0},                      \
		{words, "resync started: 8 stale replicas\n", 0},      \
		{"status json", STATUS("running", 0, 8), 0},           \
		{"status json", STATUS("done", done, stale_after), 0}, \
	{                                                              \
		"status json", STATUS("done", done, stale_after), 0    \
	}

#define LOOK(stale)                                        \
	{"status json", STATUS("done", 0, stale), 0},      \
	{                                                  \
		"status json", STATUS("done", 0, stale), 0 \
	}

static void play(const struct step *s, size_t n, int pid, struct job *job)
{
	static struct ctl_opts o;

	script = s;
	script_len = n;
	script_at = 0;
	memset(job, 0, sizeof(*job));
	memset(&o, 0, sizeof(o));
	o.timeout_s = 1;
	job->s.o = &o;
	job->s.pid = pid;
	snprintf(job->s.path, sizeof(job->s.path), "/x.map");
	assert_int_equal(run(&job->s), 0);
	assert_int_equal(script_at, script_len);
}

/* A replica marked stale during the first run: a second pass takes it. */
static void test_second_pass(void **state)
{
	static const struct step s[] = {RUN("resync", 8, 1), LOOK(1),
					RUN("resync", 1, 0), LOOK(0)};
	struct job job;

	play(s, sizeof(s) / sizeof(s[0]), 42, &job);
	assert_string_equal(job.p.state, "done");
	assert_int_equal(job.p.done, 9);
	assert_int_equal(job.p.bytes, 9);
}

/* Nothing to resync twice (no live source): the passes end. */
static void test_nothing_ends(void **state)
{
	static const struct step s[] = {
		{"status json", STATUS("idle", 0, 1), 0},
		{"resync",
		 "nothing to resync: 0 stale marks are still being "
		 "written, no other replica is stale\n",
		 0},
		LOOK(1),
		{"status json", STATUS("idle", 0, 1), 0},
		{"resync", "nothing to resync: 0 stale marks\n", 0},
		LOOK(1),
	};
	struct job job;

	play(s, sizeof(s) / sizeof(s[0]), 42, &job);
	assert_int_equal(job.p.done, 0);
}

/* Replicas that keep turning stale: RESYNC_PASSES runs, no more. */
static void test_bounded(void **state)
{
	static const struct step s[] = {RUN("resync", 8, 2), LOOK(2),
					RUN("resync", 2, 2), LOOK(2),
					RUN("resync", 2, 2)};
	struct job job;

	assert_int_equal(RESYNC_PASSES, 3);
	play(s, sizeof(s) / sizeof(s[0]), 42, &job);
	assert_int_equal(job.p.done, 12);
}

/* Offline (no tapdisk): one pass, the file says what is left. */
static void test_offline_one_pass(void **state)
{
	static const struct step s[] = {
		{"status json", STATUS("idle", 0, 8), 0},
		{"resync", "resync started: 8 stale replicas\n", 0},
		{"status json", STATUS("done", 7, 1), 0},
	};
	struct job job;

	play(s, sizeof(s) / sizeof(s[0]), 0, &job);
	assert_int_equal(job.p.done, 7);
}

/* A stopped run is not run again. */
static void test_stopped_not_again(void **state)
{
	static const struct step s[] = {
		{"status json", STATUS("idle", 0, 8), 0},
		{"resync", "resync started: 8 stale replicas\n", 0},
		{"status json", STATUS("stopped", 3, 5), 0},
	};
	struct job job;

	play(s, sizeof(s) / sizeof(s[0]), 42, &job);
	assert_string_equal(job.p.state, "stopped");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_second_pass),
		cmocka_unit_test(test_nothing_ends),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_offline_one_pass),
		cmocka_unit_test(test_stopped_not_again),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
