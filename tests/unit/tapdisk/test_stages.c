/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_stages.c - stage timing (tapdisk/stages.c): the sums exact for
 * given stamps, off by default, on/off/reset, the frontend's part
 * (seen, respond, notified), the driver's (submitted) and the report.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/json.h"
#include "tests/unit/vbd-fixture.h"

static void test_account_exact(void **state)
{
	struct td_vbd_stages st = {0};
	uint64_t s[TD_STAMP_COUNT] = {1000,  1100,  1300, 1600,
				      11600, 11700, 11750};
	/* A stamp never set (0) takes the one before: its stage is 0. */
	uint64_t t[TD_STAMP_COUNT] = {2000, 2010, 2030, 0, 3030, 3040, 3050};

	td_stages_account(&st, TD_OP_WRITE, s, 500);
	assert_int_equal(st.count[TD_OP_WRITE], 1);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_PARSE], 100);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_ISSUE], 200);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_SUBMIT], 300);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_DISK], 10000);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_CALLBACK], 100);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_WAIT], 50);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_NOTIFY], 500);
	assert_int_equal(td_stages_residence_ns(&st, TD_OP_WRITE),
			 11750 - 1000 + 500);
	assert_int_equal(st.max_ns[TD_OP_WRITE], 11250);

	td_stages_account(&st, TD_OP_WRITE, t, 0);
	assert_int_equal(st.count[TD_OP_WRITE], 2);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_SUBMIT], 300);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_DISK], 11000);
	assert_int_equal(td_stages_residence_ns(&st, TD_OP_WRITE),
			 11250 + 1050);
	assert_int_equal(st.count[TD_OP_READ], 0);
	assert_int_equal(td_stages_residence_ns(&st, TD_OP_READ), 0);
	/* An op out of range is ignored. */
	td_stages_account(&st, TD_OP_COUNT, t, 0);
	assert_string_equal(td_stage_name(TD_STAGE_NOTIFY), "notify");
	assert_string_equal(td_stage_name(TD_STAGE_COUNT), "?");
}

static void get(struct td_vbd_stages *st)
{
	td_vbd_get_stages(fx->vbd, st);
}

static void test_off_by_default(void **state)
{
	struct td_vbd_stages st;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_int_equal(td_vbd_stages_clock(fx->vbd), 0);
	assert_int_equal(td_vbd_stages_seen(fx->vbd), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 8)), 0);
	assert_false(fx->io[0].timed);
	run(3);
	assert_int_equal(fx->calls[0], 1);
	get(&st);
	assert_false(st.on);
	assert_int_equal(st.count[TD_OP_READ], 0);
	assert_int_equal(td_loop_woke_ns(fx->loop), 0);
}

/* The vbd accounts an I/O whose frontend gave no SEEN stamp itself. */
static void test_on_vbd_accounts(void **state)
{
	struct td_vbd_stages st;

	mock.hold = true;
	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	td_vbd_stages_set(fx->vbd, true);
	assert_int_not_equal(td_vbd_stages_clock(fx->vbd), 0);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 8)), 0);
	assert_true(fx->io[0].timed);
	assert_false(fx->io[0].fe_accounts);
	assert_int_equal(mock.nr_held, 1);
	run(1);
	mock_complete_held(0, 0);
	run(3);
	assert_int_equal(fx->calls[0], 1);
	get(&st);
	assert_int_equal(st.count[TD_OP_WRITE], 1);
	assert_int_equal(st.count[TD_OP_READ], 0);
	assert_true(td_stages_residence_ns(&st, TD_OP_WRITE) > 0);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_PARSE], 0);
	assert_int_equal(st.sum_ns[TD_OP_WRITE][TD_STAGE_NOTIFY], 0);
	assert_int_equal(td_stages_residence_ns(&st, TD_OP_WRITE),
			 st.max_ns[TD_OP_WRITE]);
	/* Accounted once: the I/O is no longer timed. */
	assert_false(fx->io[0].timed);
	assert_int_not_equal(td_loop_woke_ns(fx->loop), 0);
	assert_int_equal(st.reap_wakes, 1);
}

/* The frontend's part: seen, then respond and notified, by op. */
static void test_frontend_accounts(void **state)
{
	struct td_vbd_stages st;
	uint32_t nr[TD_OP_COUNT] = {0};
	uint64_t seen, t0, sum;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	td_vbd_stages_set(fx->vbd, true);
	run(1); /* a pass, so that the wake-up is stamped */
	seen = td_vbd_stages_seen(fx->vbd);
	assert_int_not_equal(seen, 0);
	mkio(0, TD_OP_READ, 0, 8);
	fx->io[0].stamp_ns[TD_STAMP_SEEN] = seen;
	assert_int_equal(td_vbd_submit(fx->vbd, &fx->io[0]), 0);
	assert_true(fx->io[0].fe_accounts);
	run(3);
	assert_int_equal(fx->calls[0], 1);
	get(&st);
	assert_int_equal(st.count[TD_OP_READ], 0); /* the frontend's to do */
	assert_int_equal(st.ring_wakes, 1);

	t0 = td_vbd_stages_clock(fx->vbd);
	td_vbd_stages_respond(fx->vbd, &fx->io[0], t0, nr);
	td_vbd_stages_respond(fx->vbd, &fx->io[0], t0, nr); /* once only */
	assert_int_equal(nr[TD_OP_READ], 1);
	td_vbd_stages_notified(fx->vbd, nr, 777);
	get(&st);
	assert_int_equal(st.count[TD_OP_READ], 1);
	assert_int_equal(st.sum_ns[TD_OP_READ][TD_STAGE_NOTIFY], 777);
	sum = td_stages_residence_ns(&st, TD_OP_READ);
	assert_int_equal(sum, t0 - seen + 777);
}

static void test_reset_and_off(void **state)
{
	struct td_vbd_stages st;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	td_vbd_stages_set(fx->vbd, true);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_READ, 0, 8)), 0);
	run(3);
	get(&st);
	assert_int_equal(st.count[TD_OP_READ], 1);
	td_vbd_stages_reset(fx->vbd);
	get(&st);
	assert_true(st.on); /* reset keeps it on */
	assert_int_equal(st.count[TD_OP_READ], 0);
	assert_int_equal(td_stages_residence_ns(&st, TD_OP_READ), 0);
	assert_int_equal(st.reap_wakes, 0);

	td_vbd_stages_set(fx->vbd, false);
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(1, TD_OP_READ, 0, 8)), 0);
	run(3);
	get(&st);
	assert_false(st.on);
	assert_int_equal(st.count[TD_OP_READ], 0);
	assert_int_equal(fx->calls[1], 1);
}

/* A driver's submitted stamp lands in the I/O; the stage is counted. */
static void test_driver_submitted(void **state)
{
	struct td_vbd_io io;
	struct td_request req;

	memset(&io, 0, sizeof(io));
	memset(&req, 0, sizeof(req));
	td_request_submitted(&req, 123); /* not timed: nothing */
	req.timed_io = &io;
	td_request_submitted(&req, 456);
	assert_int_equal(io.stamp_ns[TD_STAMP_SUBMITTED], 456);
}

static void test_report(void **state)
{
	struct td_strbuf sb;
	struct td_json j;
	const char *w;

	assert_int_equal(open_chain("mock", 0, 0, false), 0);
	assert_false(td_vbd_stages_shown(fx->vbd));
	td_vbd_stages_set(fx->vbd, true);
	assert_true(td_vbd_stages_shown(fx->vbd));
	assert_int_equal(td_vbd_submit(fx->vbd, mkio(0, TD_OP_WRITE, 0, 8)), 0);
	run(3);
	td_vbd_stages_set(fx->vbd, false);
	assert_true(td_vbd_stages_shown(fx->vbd)); /* something was timed */

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_vbd_report_stages_json(fx->vbd, &j);
	td_json_end_object(&j);
	assert_int_equal(td_json_finish(&j), 0);
	assert_non_null(strstr(sb.data, "\"on\": false"));
	w = strstr(sb.data, "\"write\": {");
	assert_non_null(w);
	assert_ptr_equal(strstr(w, "\"count\": "), strstr(w, "\"count\": 1,"));
	assert_non_null(strstr(sb.data, "\"residence_sum_ns\""));
	assert_non_null(strstr(sb.data, "\"notify\""));
	assert_non_null(strstr(sb.data, "\"wake_to_reap_mean_ns\""));
	td_strbuf_free(&sb);

	td_strbuf_init(&sb);
	td_vbd_report_stages_text(fx->vbd, &sb);
	assert_non_null(strstr(sb.data, "stages (off"));
	assert_non_null(strstr(sb.data, "\n  write "));
	assert_null(strstr(sb.data, "\n  read "));
	td_strbuf_free(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_account_exact),
		cmocka_unit_test_setup_teardown(test_off_by_default, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_on_vbd_accounts, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_frontend_accounts, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reset_and_off, setup,
						teardown),
		cmocka_unit_test(test_driver_submitted),
		cmocka_unit_test_setup_teardown(test_report, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
