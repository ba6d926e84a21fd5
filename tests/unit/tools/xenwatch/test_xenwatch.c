/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_xenwatch.c - tapstripe-xenwatch's decisions (tools/xenwatch/
 * xenwatch.c) against a fake world: a table of backend devices, a table
 * of running tapdisks, a registry, and a log of what the watcher asked
 * (start, stop, device errors, hand-overs).  Time is passed by hand.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/log.h"
#include "tools/xenwatch/xenwatch.h"

#define MAX_FAKE 8

static struct fake {
	struct xw_dev devs[MAX_FAKE];
	int ndevs;
	int list_err;
	struct xw_tapdisk tds[MAX_FAKE];
	int ntds;
	const char *registry[MAX_FAKE]; /* names that have an entry */
	int start_err;			/* what start returns */
	const char *start_fail_name;	/* only this name fails (NULL: all) */
	bool systemd;			/* start gives pid 0 */
	int next_pid;
	char calls[2048]; /* "start A=101;stop A=101;error PATH;..." */
} f;

static void call(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void call(const char *fmt, ...)
{
	size_t len = strlen(f.calls);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(f.calls + len, sizeof(f.calls) - len, fmt, ap);
	va_end(ap);
	strncat(f.calls, ";", sizeof(f.calls) - strlen(f.calls) - 1);
}

static int fake_list_devices(void *opaque, struct xw_dev *devs, size_t room)
{
	if (f.list_err)
		return f.list_err;
	assert_true((size_t)f.ndevs <= room);
	memcpy(devs, f.devs, (size_t)f.ndevs * sizeof(*devs));
	return f.ndevs;
}

static int fake_list_tapdisks(void *opaque, struct xw_tapdisk *tds, size_t room)
{
	memcpy(tds, f.tds, (size_t)f.ntds * sizeof(*tds));
	return f.ntds;
}

static int fake_registry_check(void *opaque, const char *name)
{
	for (int i = 0; i < MAX_FAKE && f.registry[i]; i++)
		if (!strcmp(f.registry[i], name))
			return 0;
	return -ENOENT;
}

static int fake_start(void *opaque, const char *name, int *pid)
{
	if (f.start_err &&
	    (!f.start_fail_name || !strcmp(f.start_fail_name, name))) {
		call("start-failed %s", name);
		return f.start_err;
	}
	*pid = f.systemd ? 0 : f.next_pid++;
	call("start %s=%d", name, *pid);
	return 0;
}

static int fake_stop(void *opaque, const char *name, int pid)
{
	call("stop %s=%d", name, pid);
	return 0;
}

static int fake_device_error(void *opaque, const char *path,
			     const char *message)
{
	assert_non_null(strstr(message, "no disk registry entry"));
	call("error %s", path);
	return 0;
}

static int fake_hand_over(void *opaque, const char *path, int pid)
{
	call("hand %s=%d", path, pid);
	return 0;
}

static const struct xw_ops fake_ops = {
	.list_devices = fake_list_devices,
	.list_tapdisks = fake_list_tapdisks,
	.registry_check = fake_registry_check,
	.start = fake_start,
	.stop = fake_stop,
	.device_error = fake_device_error,
	.hand_over = fake_hand_over,
};

static const struct xw_config cfg = {
	.stop_delay_ms = 10000,
	.backoff_min_ms = 1000,
	.backoff_max_ms = 8000,
};

static struct xw xw;

static void add_dev(const char *path, const char *name, bool released)
{
	struct xw_dev *d = &f.devs[f.ndevs++];

	snprintf(d->path, sizeof(d->path), "%s", path);
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->released = released;
}

static void del_dev(const char *path)
{
	for (int i = 0; i < f.ndevs; i++)
		if (!strcmp(f.devs[i].path, path)) {
			f.devs[i] = f.devs[--f.ndevs];
			return;
		}
	fail_msg("no device %s", path);
}

static void add_tapdisk(int pid, const char *name)
{
	f.tds[f.ntds].pid = pid;
	snprintf(f.tds[f.ntds].name, sizeof(f.tds[0].name), "%s", name);
	f.ntds++;
}

static void del_tapdisk(int pid)
{
	for (int i = 0; i < f.ntds; i++)
		if (f.tds[i].pid == pid) {
			f.tds[i] = f.tds[--f.ntds];
			return;
		}
	fail_msg("no tapdisk %d", pid);
}

/* Scan at now and check the calls made (then forget them). */
static void scan_expect(uint64_t now, const char *calls)
{
	f.calls[0] = '\0';
	assert_int_equal(xw_scan(&xw, now), 0);
	assert_string_equal(f.calls, calls);
}

static enum xw_state state_of(const char *name)
{
	const struct xw_disk *d = xw_find(&xw, name);

	assert_non_null(d);
	return d->state;
}

static int setup(void **state)
{
	memset(&f, 0, sizeof(f));
	f.next_pid = 101;
	f.registry[0] = "a";
	f.registry[1] = "b";
	td_log_set_level(TD_LOG_ERR);
	return xw_init(&xw, &fake_ops, NULL, &cfg);
}

static int teardown(void **state)
{
	xw_fini(&xw);
	return 0;
}

static void test_init_wants_every_op(void **state)
{
	struct xw_ops ops = fake_ops;
	struct xw other;

	ops.hand_over = NULL;
	assert_int_equal(xw_init(&other, &ops, NULL, NULL), -EINVAL);
	assert_int_equal(xw_init(&other, &fake_ops, NULL, NULL), 0);
	assert_int_equal(other.cfg.stop_delay_ms, XW_DEFAULT_STOP_DELAY_MS);
	xw_fini(&other);
}

/* A device appears: its tapdisk is started once, not again per scan. */
static void test_device_appears(void **state)
{
	scan_expect(0, "");
	add_dev("/be/5/51712", "a", false);
	scan_expect(100, "start a=101;");
	assert_int_equal(state_of("a"), XW_STARTED);
	add_tapdisk(101, "a");
	scan_expect(200, "");
	/* A second device of the same disk: nothing new to start. */
	add_dev("/be/6/51712", "a", false);
	scan_expect(300, "");
	assert_int_equal(xw_find(&xw, "a")->ndev, 2);
}

/* The last device goes: stopped after the stop delay, not before. */
static void test_last_device_goes(void **state)
{
	add_dev("/be/5/51712", "a", false);
	add_dev("/be/6/51712", "a", false);
	scan_expect(0, "start a=101;");
	add_tapdisk(101, "a");
	del_dev("/be/5/51712");
	scan_expect(1000, "");
	del_dev("/be/6/51712");
	scan_expect(2000, "");
	assert_true(xw_busy(&xw));
	scan_expect(11999, "");
	/* A guest that reboots within the delay keeps its tapdisk. */
	add_dev("/be/7/51712", "a", false);
	scan_expect(12000, "");
	del_dev("/be/7/51712");
	scan_expect(13000, "");
	scan_expect(22999, "");
	scan_expect(23000, "stop a=101;");
	assert_null(xw_find(&xw, "a"));
	assert_false(xw_busy(&xw));
	/* Its exit, reaped later, is no restart. */
	del_tapdisk(101);
	assert_false(xw_child_exited(&xw, 101, 0, 23100));
	scan_expect(24000, "");
}

/* The tapdisk dies while devices remain: started again with backoff. */
static void test_tapdisk_dies(void **state)
{
	add_dev("/be/5/51712", "a", false);
	scan_expect(0, "start a=101;");
	assert_true(xw_child_exited(&xw, 101, 9 /* SIGKILL */, 500));
	assert_int_equal(state_of("a"), XW_WAIT_RESTART);
	assert_true(xw_busy(&xw));
	scan_expect(1499, "");
	scan_expect(1500, "start a=102;");
	assert_true(xw_child_exited(&xw, 102, 1 << 8, 1600));
	scan_expect(3599, "");
	scan_expect(3600, "start a=103;");
	assert_true(xw_child_exited(&xw, 103, 1 << 8, 3700));
	scan_expect(7700, "start a=104;");
	assert_true(xw_child_exited(&xw, 104, 1 << 8, 7800));
	/* Capped at backoff_max_ms. */
	scan_expect(15800, "start a=105;");
	assert_true(xw_child_exited(&xw, 105, 1 << 8, 15900));
	scan_expect(23899, "");
	scan_expect(23900, "start a=106;");
	/* One that ran longer than the cap starts at the first step. */
	assert_true(xw_child_exited(&xw, 106, 0, 40000));
	scan_expect(41000, "start a=107;");
}

/* It dies after its devices went: nothing is started again. */
static void test_tapdisk_dies_without_devices(void **state)
{
	add_dev("/be/5/51712", "a", false);
	scan_expect(0, "start a=101;");
	del_dev("/be/5/51712");
	scan_expect(100, "");
	assert_true(xw_child_exited(&xw, 101, 0, 200));
	scan_expect(60000, "");
	assert_null(xw_find(&xw, "a"));
}

/* No registry entry: said once on each device, no start, no crash; the
 * entry written later is used. */
static void test_registry_missing(void **state)
{
	add_dev("/be/5/51712", "nope", false);
	add_dev("/be/5/51728", "nope", false);
	add_dev("/be/6/51712", "a", false);
	scan_expect(0, "error /be/5/51712;error /be/5/51728;start a=101;");
	assert_int_equal(state_of("nope"), XW_MISSING);
	scan_expect(1000, "");
	f.registry[2] = "nope";
	scan_expect(2000, "start nope=102;");
	/* Its device gone while missing: forgotten, nothing to stop. */
	f.registry[2] = NULL;
	add_dev("/be/7/51712", "other", false);
	scan_expect(3000, "error /be/7/51712;");
	del_dev("/be/7/51712");
	scan_expect(4000, "");
	assert_null(xw_find(&xw, "other"));
}

/* An operator's tapdisk serves NAME: reused, never stopped; when it goes
 * while devices remain, the watcher starts its own. */
static void test_reuse(void **state)
{
	add_tapdisk(77, "a");
	add_dev("/be/5/51712", "a", false);
	scan_expect(0, "");
	assert_int_equal(state_of("a"), XW_REUSED);
	assert_false(xw_child_exited(&xw, 77, 0, 10));
	del_dev("/be/5/51712");
	scan_expect(1000, "");
	scan_expect(60000, "");
	assert_null(xw_find(&xw, "a"));
	add_dev("/be/5/51712", "a", false);
	scan_expect(61000, "");
	del_tapdisk(77);
	scan_expect(62000, "start a=101;");
}

/* A restart of ours pending, and an operator starts one meanwhile. */
static void test_operator_starts_during_backoff(void **state)
{
	add_dev("/be/5/51712", "a", false);
	scan_expect(0, "start a=101;");
	assert_true(xw_child_exited(&xw, 101, 0, 100));
	add_tapdisk(88, "a");
	scan_expect(5000, "");
	assert_int_equal(state_of("a"), XW_REUSED);
}

/* One disk that cannot start blocks none of the others. */
static void test_one_failing_disk(void **state)
{
	f.start_err = -EAGAIN;
	f.start_fail_name = "a";
	add_dev("/be/5/51712", "a", false);
	add_dev("/be/6/51712", "b", false);
	scan_expect(0, "start-failed a;start b=101;");
	assert_int_equal(state_of("a"), XW_WAIT_RESTART);
	assert_int_equal(state_of("b"), XW_STARTED);
	f.start_err = 0;
	scan_expect(999, "");
	scan_expect(1000, "start a=102;");
}

/* Released devices go to the next tapdisk of NAME, never back to the one
 * that released them. */
static void test_hand_over(void **state)
{
	add_dev("/be/5/51712", "a", false);
	scan_expect(0, "start a=101;");
	add_tapdisk(101, "a");
	scan_expect(100, "");
	/* tap-ctl release: tapstripe-pid 0; tapdisk 101 still runs. */
	f.devs[0].released = true;
	scan_expect(200, "");
	scan_expect(1200, "");
	/* tap-ctl destroy: 101 exits; the watcher starts 102. */
	del_tapdisk(101);
	assert_true(xw_child_exited(&xw, 101, 0, 1300));
	scan_expect(2300, "start a=102;");
	scan_expect(2400, "");
	add_tapdisk(102, "a");
	scan_expect(2500, "hand /be/5/51712=102;");
	f.devs[0].released = false;
	scan_expect(2600, "");
	assert_false(xw_busy(&xw));
}

/* A device released when no tapdisk of NAME runs goes to the next one. */
static void test_hand_over_nothing_running(void **state)
{
	add_tapdisk(50, "b");
	add_dev("/be/5/51712", "a", true);
	scan_expect(0, "start a=101;");
	add_tapdisk(101, "a");
	scan_expect(100, "hand /be/5/51712=101;");
}

/* Under systemd: no pid to supervise; stop names the disk. */
static void test_systemd(void **state)
{
	f.systemd = true;
	add_dev("/be/5/51712", "a", false);
	scan_expect(0, "start a=0;");
	assert_false(xw_child_exited(&xw, 0, 0, 10));
	del_dev("/be/5/51712");
	scan_expect(100, "");
	scan_expect(10100, "stop a=0;");
}

/* xenstore cannot be read: nothing changes. */
static void test_list_error(void **state)
{
	add_dev("/be/5/51712", "a", false);
	scan_expect(0, "start a=101;");
	f.list_err = -EACCES;
	assert_int_equal(xw_scan(&xw, 60000), -EACCES);
	assert_int_equal(state_of("a"), XW_STARTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_wants_every_op),
		cmocka_unit_test_setup_teardown(test_device_appears, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_last_device_goes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tapdisk_dies, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_tapdisk_dies_without_devices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_missing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_operator_starts_during_backoff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_failing_disk, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hand_over, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hand_over_nothing_running,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_systemd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_error, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
