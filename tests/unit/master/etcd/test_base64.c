/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_base64.c - the etcd client's base64: RFC 4648's test vectors, every
 * byte value, and texts no encoder writes refused.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/etcd/base64.h"

/* RFC 4648 section 10, then bytes that use '+', '/' and zero bytes. */
static const struct {
	const char *data;
	size_t len;
	const char *text;
} vectors[] = {
	{"", 0, ""},
	{"f", 1, "Zg=="},
	{"fo", 2, "Zm8="},
	{"foo", 3, "Zm9v"},
	{"foob", 4, "Zm9vYg=="},
	{"fooba", 5, "Zm9vYmE="},
	{"foobar", 6, "Zm9vYmFy"},
	{"\x00\xff\xfe", 3, "AP/+"},
	{"\xfb\xff", 2, "+/8="},
	{"\x00", 1, "AA=="},
	{"\x00\x00\x00\x00", 4, "AAAAAA=="},
	{"/tapstripe/head", 15, "L3RhcHN0cmlwZS9oZWFk"},
};

static void test_vectors(void **state)
{
	char text[64];
	uint8_t data[64];
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		etcd_base64_encode(vectors[i].data, vectors[i].len, text);
		assert_string_equal(text, vectors[i].text);
		assert_int_equal(strlen(text), ETCD_BASE64_LEN(vectors[i].len));
		assert_int_equal(etcd_base64_decode(vectors[i].text,
						    strlen(vectors[i].text),
						    data, &len),
				 0);
		assert_int_equal(len, vectors[i].len);
		assert_memory_equal(data, vectors[i].data, len);
	}
}

static void test_every_byte(void **state)
{
	uint8_t data[256], back[256];
	char text[ETCD_BASE64_LEN(256) + 1];
	size_t i, n, len;

	(void)state;
	for (i = 0; i < 256; i++)
		data[i] = (uint8_t)(255 - i);
	/* Every length 0..256 exercises both paddings and none. */
	for (n = 0; n <= 256; n++) {
		etcd_base64_encode(data, n, text);
		assert_int_equal(
			etcd_base64_decode(text, strlen(text), back, &len), 0);
		assert_int_equal(len, n);
		assert_memory_equal(back, data, n);
	}
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
		"Zg=",	    /* length not a multiple of 4 */
		"Z",	    /* idem */
		"Z===",	    /* three pads */
		"Zg=a",	    /* pad before a character */
		"Zh==",	    /* bits left over: not canonical */
		"Zm9=",	    /* idem, one pad */
		"Zg==Zg==", /* padding in the middle */
		"Zm9\n",    /* outside the alphabet */
		"Zm-_",	    /* URL-safe alphabet: not etcd's */
		"====",
	};
	uint8_t out[16];
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
			etcd_base64_decode(bad[i], strlen(bad[i]), out, &len),
			-EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_every_byte),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
