/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_xen-keys.c - the xenstore keys of a Xen block device: numbers,
 * device names, protocol ABIs and the frontend's ring keys, against
 * tables written by hand.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontends/xen/xen-keys.h"

#define NO_KEY NULL

/* A frontend directory: key/value pairs, NULL-terminated. */
struct fake_dir {
	const char *kv[2 * 24];
};

static char *fake_read(void *opaque, const char *key)
{
	const struct fake_dir *d = opaque;

	for (int i = 0; d->kv[i]; i += 2) {
		if (!strcmp(d->kv[i], key))
			return strdup(d->kv[i + 1]);
	}
	errno = ENOENT;
	return NULL;
}

static void test_parse_u32(void **state)
{
	static const struct {
		const char *text;
		uint32_t max;
		int err;
		uint32_t value;
	} rows[] = {
		{"0", 10, 0, 0},
		{"10", 10, 0, 10},
		{"11", 10, -EINVAL, 0},
		{"4294967295", UINT32_MAX, 0, UINT32_MAX},
		{"4294967296", UINT32_MAX, -EINVAL, 0},
		{"99999999999", UINT32_MAX, -EINVAL, 0},
		{"", 10, -EINVAL, 0},
		{"-1", 10, -EINVAL, 0},
		{"+1", 10, -EINVAL, 0},
		{" 1", 10, -EINVAL, 0},
		{"1 ", 10, -EINVAL, 0},
		{"0x1", 10, -EINVAL, 0},
		{"12a", 100, -EINVAL, 0},
	};

	assert_int_equal(xen_parse_u32(NULL, 10, &(uint32_t){0}), -EINVAL);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint32_t v = 12345;

		assert_int_equal(xen_parse_u32(rows[i].text, rows[i].max, &v),
				 rows[i].err);
		if (!rows[i].err)
			assert_int_equal(v, rows[i].value);
	}
}

static void test_vdev(void **state)
{
	static const struct {
		const char *vdev;
		int err;
		uint32_t devid;
	} rows[] = {
		{"xvda", 0, 51712}, /* 202 << 8 */
		{"xvdb", 0, 51728}, /* | 1 << 4 */
		{"xvdc", 0, 51744},
		{"xvdp", 0, 51952},	/* the 16th: 15 << 4 */
		{"xvdq", 0, 268439552}, /* extended: 1 << 28 | 16 << 8 */
		{"xvdz", 0, 268441856}, /* 1 << 28 | 25 << 8 */
		{"51712", 0, 51712},
		{"xvd", -EINVAL, 0},
		{"xvdA", -EINVAL, 0},
		{"xvdaa", -EINVAL, 0},
		{"sda", -EINVAL, 0},
		{"hda", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"-5", -EINVAL, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint32_t devid = 0;

		assert_int_equal(xen_vdev_to_devid(rows[i].vdev, &devid),
				 rows[i].err);
		if (!rows[i].err)
			assert_int_equal(devid, rows[i].devid);
	}
}

static void test_state(void **state)
{
	assert_int_equal(xen_parse_state("1"), XenbusStateInitialising);
	assert_int_equal(xen_parse_state("6"), XenbusStateClosed);
	assert_int_equal(xen_parse_state("8"), XenbusStateReconfigured);
	assert_int_equal(xen_parse_state("9"), -EINVAL);
	assert_int_equal(xen_parse_state("four"), -EINVAL);
	assert_int_equal(xen_parse_state(NULL), -EINVAL);
}

static void test_protocol(void **state)
{
	enum blkif_protocol p = (enum blkif_protocol) - 1;
	char why[160] = "";

	assert_int_equal(xen_parse_protocol(NULL, &p, why, sizeof(why)), 0);
	assert_int_equal(p, BLKIF_PROTOCOL_NATIVE);
	assert_int_equal(xen_parse_protocol("x86_64-abi", &p, why, sizeof(why)),
			 0);
	assert_int_equal(p, BLKIF_PROTOCOL_NATIVE);
	/* A 32-bit x86 guest's layout. */
	assert_int_equal(xen_parse_protocol("x86_32-abi", &p, why, sizeof(why)),
			 0);
	assert_int_equal(p, BLKIF_PROTOCOL_X86_32);
	/* Another architecture's: refused, and the message says so. */
	assert_int_equal(xen_parse_protocol("arm-abi", &p, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "arm-abi is not served"));
	assert_int_equal(xen_parse_protocol("vax-abi", &p, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "unknown protocol 'vax-abi'"));
	/* No room for a message: still refused. */
	assert_int_equal(xen_parse_protocol("vax-abi", &p, NULL, 0),
			 -EPROTONOSUPPORT);
}

static void test_keys_one_page(void **state)
{
	struct fake_dir d = {{"ring-ref", "8", "event-channel", "17",
			      "protocol", "x86_64-abi", NO_KEY}};
	struct xen_frontend_keys k;
	char why[160];

	assert_int_equal(
		xen_read_frontend_keys(fake_read, &d, 4, &k, why, sizeof(why)),
		0);
	assert_int_equal(k.ring_order, 0);
	assert_int_equal(k.nr_ring_refs, 1);
	assert_int_equal(k.ring_refs[0], 8);
	assert_int_equal(k.event_channel, 17);
	assert_int_equal(k.protocol, BLKIF_PROTOCOL_NATIVE);
}

/* Order 0 written as ring-ref0 (and no protocol: native). */
static void test_keys_ring_ref0(void **state)
{
	struct fake_dir d = {{"ring-page-order", "0", "ring-ref0", "9",
			      "event-channel", "3", NO_KEY}};
	struct xen_frontend_keys k;

	assert_int_equal(xen_read_frontend_keys(fake_read, &d, 4, &k, NULL, 0),
			 0);
	assert_int_equal(k.ring_refs[0], 9);
	assert_int_equal(k.protocol, BLKIF_PROTOCOL_NATIVE);
}

static void test_keys_order2(void **state)
{
	struct fake_dir d = {{"ring-page-order", "2", "ring-ref0", "100",
			      "ring-ref1", "101", "ring-ref2", "102",
			      "ring-ref3", "103", "event-channel", "5",
			      NO_KEY}};
	struct xen_frontend_keys k;

	assert_int_equal(xen_read_frontend_keys(fake_read, &d, 4, &k, NULL, 0),
			 0);
	assert_int_equal(k.ring_order, 2);
	assert_int_equal(k.nr_ring_refs, 4);
	for (uint32_t i = 0; i < 4; i++)
		assert_int_equal(k.ring_refs[i], 100 + i);
}

/* Each row: a frontend directory and the error it must give. */
static void test_keys_refused(void **state)
{
	static const struct {
		struct fake_dir d;
		uint32_t max_order;
		int err;
		const char *why;
	} rows[] = {
		/* an order above the one advertised */
		{{{"ring-page-order", "3", "ring-ref0", "1", "event-channel",
		   "5", NO_KEY}},
		 2,
		 -EINVAL,
		 "ring-page-order is '3'"},
		/* above the protocol's 4 whatever was advertised */
		{{{"ring-page-order", "5", NO_KEY}}, 8, -EINVAL, "not in 0..4"},
		{{{"ring-page-order", "1", "ring-ref0", "1", "event-channel",
		   "5", NO_KEY}},
		 4,
		 -ENOENT,
		 "ring-ref1"},
		{{{"ring-ref", "12a", "event-channel", "5", NO_KEY}},
		 4,
		 -EINVAL,
		 "ring-ref is '12a'"},
		{{{"ring-ref", "1", NO_KEY}}, 4, -ENOENT, "event-channel"},
		{{{"ring-ref", "1", "event-channel", "-1", NO_KEY}},
		 4,
		 -EINVAL,
		 "event-channel is '-1'"},
		{{{NO_KEY}}, 4, -ENOENT, "ring-ref0"},
		{{{"ring-ref", "1", "event-channel", "5", "protocol", "arm-abi",
		   NO_KEY}},
		 4,
		 -EPROTONOSUPPORT,
		 "arm-abi"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct xen_frontend_keys k;
		char why[160] = "";

		assert_int_equal(xen_read_frontend_keys(fake_read,
							(void *)&rows[i].d,
							rows[i].max_order, &k,
							why, sizeof(why)),
				 rows[i].err);
		if (!strstr(why, rows[i].why))
			fail_msg("row %zu: '%s' lacks '%s'", i, why,
				 rows[i].why);
	}
}

/* Two rings of two pages, as xen/io/blkif.h's example writes them. */
static void test_queues_two(void **state)
{
	static const struct fake_dir d = {
		{"multi-queue-num-queues", "2", "ring-page-order", "1",
		 "queue-0/ring-ref0", "10", "queue-0/ring-ref1", "11",
		 "queue-0/event-channel", "5", "queue-1/ring-ref0", "20",
		 "queue-1/ring-ref1", "21", "queue-1/event-channel", "6",
		 "protocol", "x86_64-abi", NO_KEY}};
	struct xen_frontend_queues q;

	assert_int_equal(xen_read_frontend_queues(fake_read, (void *)&d, 4, 4,
						  &q, NULL, 0),
			 0);
	assert_int_equal(q.nr_queues, 2);
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(q.q[i].ring_order, 1);
		assert_int_equal(q.q[i].nr_ring_refs, 2);
		assert_int_equal(q.q[i].ring_refs[0], 10 * (i + 1));
		assert_int_equal(q.q[i].ring_refs[1], 10 * (i + 1) + 1);
		assert_int_equal(q.q[i].event_channel, 5 + i);
		assert_int_equal(q.q[i].protocol, BLKIF_PROTOCOL_NATIVE);
	}
}

/* No multi-queue-num-queues, or 1: the top-level keys, one ring. */
static void test_queues_one(void **state)
{
	static const struct fake_dir plain = {
		{"ring-ref", "7", "event-channel", "3", NO_KEY}};
	static const struct fake_dir one = {
		{"multi-queue-num-queues", "1", "ring-ref", "7",
		 "event-channel", "3", "queue-0/ring-ref", "99", NO_KEY}};
	struct xen_frontend_queues q;

	assert_int_equal(xen_read_frontend_queues(fake_read, (void *)&plain, 4,
						  4, &q, NULL, 0),
			 0);
	assert_int_equal(q.nr_queues, 1);
	assert_int_equal(q.q[0].ring_refs[0], 7);
	assert_int_equal(xen_read_frontend_queues(fake_read, (void *)&one, 4, 4,
						  &q, NULL, 0),
			 0);
	assert_int_equal(q.nr_queues, 1);
	assert_int_equal(q.q[0].ring_refs[0], 7); /* not queue-0's */
	assert_int_equal(q.q[0].event_channel, 3);
}

/* Every multi-queue key missing or out of range. */
static void test_queues_refused(void **state)
{
	static const struct {
		struct fake_dir d;
		uint32_t max_queues;
		int err;
		const char *why;
	} rows[] = {
		{{{"multi-queue-num-queues", "0", NO_KEY}},
		 4,
		 -EINVAL,
		 "multi-queue-num-queues is '0': not in 1..4"},
		{{{"multi-queue-num-queues", "5", NO_KEY}},
		 4,
		 -EINVAL,
		 "multi-queue-num-queues is '5': not in 1..4"},
		{{{"multi-queue-num-queues", "17", NO_KEY}},
		 0, /* no limit given: the protocol's 16 */
		 -EINVAL,
		 "not in 1..16"},
		{{{"multi-queue-num-queues", "2x", NO_KEY}},
		 4,
		 -EINVAL,
		 "multi-queue-num-queues is '2x'"},
		{{{"multi-queue-num-queues", "", NO_KEY}},
		 4,
		 -EINVAL,
		 "multi-queue-num-queues is ''"},
		/* queue-1 missing entirely */
		{{{"multi-queue-num-queues", "2", "queue-0/ring-ref", "1",
		   "queue-0/event-channel", "5", NO_KEY}},
		 4,
		 -ENOENT,
		 "queue-1: cannot read ring-ref0"},
		/* the top-level keys do not stand in for queue-N's */
		{{{"multi-queue-num-queues", "2", "ring-ref", "1",
		   "event-channel", "5", NO_KEY}},
		 4,
		 -ENOENT,
		 "queue-0: cannot read ring-ref0"},
		{{{"multi-queue-num-queues", "2", "queue-0/ring-ref", "1",
		   "queue-0/event-channel", "5", "queue-1/ring-ref", "2",
		   NO_KEY}},
		 4,
		 -ENOENT,
		 "queue-1: cannot read event-channel"},
		{{{"multi-queue-num-queues", "2", "queue-0/ring-ref", "1",
		   "queue-0/event-channel", "5", "queue-1/ring-ref", "2",
		   "queue-1/event-channel", "4294967296", NO_KEY}},
		 4,
		 -EINVAL,
		 "queue-1: event-channel is '4294967296'"},
		/* one ring-page-order for all, checked against the maximum */
		{{{"multi-queue-num-queues", "2", "ring-page-order", "3",
		   "queue-0/ring-ref0", "1", NO_KEY}},
		 4,
		 -EINVAL,
		 "queue-0: ring-page-order is '3'"},
		{{{"multi-queue-num-queues", "2", "ring-page-order", "1",
		   "queue-0/ring-ref0", "1", "queue-0/ring-ref1", "2",
		   "queue-0/event-channel", "5", "queue-1/ring-ref0", "3",
		   "queue-1/event-channel", "6", NO_KEY}},
		 4,
		 -ENOENT,
		 "queue-1: cannot read ring-ref1"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct xen_frontend_queues q;
		char why[200] = "";

		assert_int_equal(xen_read_frontend_queues(fake_read,
							  (void *)&rows[i].d, 2,
							  rows[i].max_queues,
							  &q, why, sizeof(why)),
				 rows[i].err);
		if (!strstr(why, rows[i].why))
			fail_msg("row %zu: '%s' lacks '%s'", i, why,
				 rows[i].why);
	}
}

static void test_paths(void **state)
{
	char buf[XEN_PATH_MAX], tiny[16];

	assert_int_equal(xen_backend_path(buf, sizeof(buf), 0, 7, 51744), 0);
	assert_string_equal(buf, "/local/domain/0/backend/vbd3/7/51744");
	assert_int_equal(xen_frontend_path(buf, sizeof(buf), 7, 51744), 0);
	assert_string_equal(buf, "/local/domain/7/device/vbd/51744");
	assert_int_equal(xen_frontend_path(tiny, sizeof(tiny), 7, 51744),
			 -ENAMETOOLONG);
	assert_int_equal(xen_backend_path_type(buf, sizeof(buf),
					       XEN_BACKEND_TYPE_QDISK, 2, 7,
					       51744),
			 0);
	assert_string_equal(buf, "/local/domain/2/backend/qdisk/7/51744");
}

/* xl's target=tapstripe:NAME, as libxl writes it in params. */
static void test_params_name(void **state)
{
	char long_name[XEN_NAME_MAX + 16];

	assert_string_equal(xen_params_tapdisk_name("aio:tapstripe:vm1"),
			    "vm1");
	assert_string_equal(xen_params_tapdisk_name("raw:tapstripe:vm1"),
			    "vm1");
	assert_string_equal(xen_params_tapdisk_name("tapstripe:a-b_c.1"),
			    "a-b_c.1");
	assert_null(xen_params_tapdisk_name(NULL));
	assert_null(xen_params_tapdisk_name(""));
	assert_null(xen_params_tapdisk_name("raw:"));
	assert_null(xen_params_tapdisk_name("raw:tapstripe:"));
	assert_null(xen_params_tapdisk_name("qcow2:tapstripe:vm1"));
	assert_null(xen_params_tapdisk_name("raw:/srv/vm1.img"));
	assert_null(xen_params_tapdisk_name("raw:tapstripe:vm1 "));
	assert_null(xen_params_tapdisk_name("raw:tapstripe:../vm1/x"));
	assert_null(xen_params_tapdisk_name("raw:raw:tapstripe:vm1"));
	assert_null(xen_params_tapdisk_name("qdisk:tapstripe:vm1"));
	memset(long_name, 'a', sizeof(long_name));
	memcpy(long_name, "tapstripe:", 10);
	long_name[10 + XEN_NAME_MAX - 1] = '\0';
	assert_non_null(xen_params_tapdisk_name(long_name));
	long_name[10 + XEN_NAME_MAX - 1] = 'a';
	long_name[10 + XEN_NAME_MAX] = '\0';
	assert_null(xen_params_tapdisk_name(long_name));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_u32),
		cmocka_unit_test(test_vdev),
		cmocka_unit_test(test_state),
		cmocka_unit_test(test_protocol),
		cmocka_unit_test(test_keys_one_page),
		cmocka_unit_test(test_keys_ring_ref0),
		cmocka_unit_test(test_keys_order2),
		cmocka_unit_test(test_keys_refused),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_params_name),
		cmocka_unit_test(test_queues_two),
		cmocka_unit_test(test_queues_one),
		cmocka_unit_test(test_queues_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
