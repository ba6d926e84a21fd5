/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tapdisk-options.c - tapdisk's command line for the NBD export's
 * access control: --nbd-tls, --nbd-tls-psk, --nbd-tls-x509 and
 * --nbd-allow, what they give together and what they refuse (exit 2);
 * --disk NAME, the disk registry's entry expanded into the command line.
 */
#include "config.h"

#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/tapdisk/tapdisk.h"

#define GO_ON	 (-1)
#define MAX_ARGS 48

/* tapdisk -f -a null:size=1M WORDS...: the status, options in *o. */
static int parse(struct options *o, const char *words)
{
	static char buf[1024]; /* o points into it */
	char *argv[MAX_ARGS] = {"tapdisk", "-f", "-a", "null:size=1M"};
	int argc = 4;

	snprintf(buf, sizeof(buf), "%s", words);
	for (char *w = strtok(buf, " "); w; w = strtok(NULL, " "))
		argv[argc++] = w;
	argv[argc] = NULL;
	memset(o, 0, sizeof(*o));
	optind = 0; /* glibc: start again */
	return tapdisk_parse_options(o, argc, argv);
}

static void test_tls_modes(void **state)
{
	static const struct {
		const char *words;
		int status;
		enum td_nbd_tls_mode mode;
	} rows[] = {
		{"", GO_ON, TD_NBD_TLS_OFF},
		{"--nbd-tls off", GO_ON, TD_NBD_TLS_OFF},
		{"--nbd-tls-psk k.psk", GO_ON, TD_NBD_TLS_REQUIRE},
		{"--nbd-tls-x509 /d", GO_ON, TD_NBD_TLS_REQUIRE},
		{"--nbd-tls on --nbd-tls-psk k.psk", GO_ON, TD_NBD_TLS_ON},
		{"--nbd-tls-psk k.psk --nbd-tls on", GO_ON, TD_NBD_TLS_ON},
		{"--nbd-tls require --nbd-tls-x509 /d", GO_ON,
		 TD_NBD_TLS_REQUIRE},
		{"--nbd-tls require --nbd-tls-psk k --nbd-tls-x509 /d", GO_ON,
		 TD_NBD_TLS_REQUIRE},
		{"--nbd-tls on", 2, 0},
		{"--nbd-tls require", 2, 0},
		{"--nbd-tls off --nbd-tls-psk k.psk", 2, 0},
		{"--nbd-tls yes --nbd-tls-psk k.psk", 2, 0},
		{"--nbd-tls", 2, 0},
	};
	struct options o;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(parse(&o, rows[i].words), rows[i].status);
		if (rows[i].status == GO_ON)
			assert_int_equal(o.nbd_access.tls, rows[i].mode);
	}
	assert_int_equal(parse(&o, "--nbd-tls-psk k.psk --nbd-tls-x509 /d"),
			 GO_ON);
	assert_string_equal(o.nbd_access.tls_psk_file, "k.psk");
	assert_string_equal(o.nbd_access.tls_x509_dir, "/d");
}

static void test_allow(void **state)
{
	char words[1024] = "";
	struct options o;

	assert_int_equal(parse(&o, "--nbd-allow 10.0.0.0/8 --nbd-allow ::1"),
			 GO_ON);
	assert_int_equal(o.nbd_access.nr_allow, 2);
	assert_int_equal(o.nbd_access.allow[0].family, AF_INET);
	assert_int_equal(o.nbd_access.allow[0].prefix_bits, 8);
	assert_int_equal(o.nbd_access.allow[0].addr[0], 10);
	assert_int_equal(o.nbd_access.allow[1].family, AF_INET6);
	assert_int_equal(o.nbd_access.allow[1].prefix_bits, 128);
	/* Host bits set, not an address, no argument. */
	assert_int_equal(parse(&o, "--nbd-allow 10.0.0.1/8"), 2);
	assert_int_equal(parse(&o, "--nbd-allow localhost"), 2);
	assert_int_equal(parse(&o, "--nbd-allow"), 2);
	/* 16 blocks, not 17. */
	for (int i = 0; i < 16; i++)
		snprintf(words + strlen(words), sizeof(words) - strlen(words),
			 "--nbd-allow 10.%d.0.0/16 ", i);
	assert_int_equal(parse(&o, words), GO_ON);
	assert_int_equal(o.nbd_access.nr_allow, 16);
	strcat(words, "--nbd-allow 192.0.2.7");
	assert_int_equal(parse(&o, words), 2);
}

/* tapdisk -f WORDS... (no -a): the status, options in *o. */
static int parse_bare(struct options *o, const char *words)
{
	static char buf[1024];
	char *argv[MAX_ARGS] = {"tapdisk", "-f"};
	int argc = 2;

	snprintf(buf, sizeof(buf), "%s", words);
	for (char *w = strtok(buf, " "); w; w = strtok(NULL, " "))
		argv[argc++] = w;
	argv[argc] = NULL;
	optind = 0;
	return tapdisk_parse_options(o, argc, argv);
}

static void put_entry(const char *dir, const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.conf", dir, name);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

/* --disk NAME: the chain, the name and OPTIONS from the entry, the
 * command line's options after them; what an entry may not say. */
static void test_disk_registry(void **state)
{
	char dir[] = "/tmp/test-registry-XXXXXX", words[512];
	struct options o;

	assert_non_null(mkdtemp(dir));
	put_entry(dir, "web1",
		  "# a disk\nCHAIN=sort|null:size=1G\n"
		  "OPTIONS=--nbd unix --max-inflight 64 --export-name 'a b'\n");
	snprintf(words, sizeof(words), "--disk web1 --disk-dir %s", dir);
	assert_int_equal(parse_bare(&o, words), GO_ON);
	assert_string_equal(o.chain, "sort|null:size=1G");
	assert_string_equal(o.name, "web1");
	assert_int_equal(o.nr_nbd, 1);
	assert_string_equal(o.nbd[0], "unix");
	assert_int_equal(o.max_inflight, 64);
	assert_string_equal(o.export_name, "a b");
	assert_true(o.foreground);
	/* The command line wins over OPTIONS. */
	snprintf(words, sizeof(words),
		 "--disk web1 --disk-dir %s --max-inflight 8", dir);
	assert_int_equal(parse_bare(&o, words), GO_ON);
	assert_int_equal(o.max_inflight, 8);
	/* The environment names the directory too. */
	setenv("TAPSTRIPE_DISKDIR", dir, 1);
	assert_int_equal(parse_bare(&o, "--disk web1"), GO_ON);
	unsetenv("TAPSTRIPE_DISKDIR");
	/* -a or --name beside --disk; no entry; a bad name. */
	snprintf(words, sizeof(words),
		 "--disk web1 --disk-dir %s -a null:size=1", dir);
	assert_int_equal(parse_bare(&o, words), 2);
	snprintf(words, sizeof(words), "--disk web1 --disk-dir %s --name x",
		 dir);
	assert_int_equal(parse_bare(&o, words), 2);
	snprintf(words, sizeof(words), "--disk web2 --disk-dir %s", dir);
	assert_int_equal(parse_bare(&o, words), 2);
	snprintf(words, sizeof(words), "--disk ../web1 --disk-dir %s", dir);
	assert_int_equal(parse_bare(&o, words), 2);
	/* OPTIONS may not name the chain, the disk or how tapdisk runs. */
	static const char *const refused[] = {
		"-a null:size=1", "--chain=x",	  "--name n", "--disk x",
		"--ready-fd 3",	  "--foreground", "-f",	      "--disk-dir /",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		char text[128];

		snprintf(text, sizeof(text), "CHAIN=null:size=1G\nOPTIONS=%s\n",
			 refused[i]);
		put_entry(dir, "bad", text);
		snprintf(words, sizeof(words), "--disk bad --disk-dir %s", dir);
		print_message("OPTIONS=%s\n", refused[i]);
		assert_int_equal(parse_bare(&o, words), 2);
	}
	/* An option the entry gives badly is tapdisk's usage error. */
	put_entry(dir, "bad", "CHAIN=null:size=1G\nOPTIONS=--xen maybe\n");
	assert_int_equal(parse_bare(&o, words), 2);
	snprintf(words, sizeof(words), "rm -rf %s", dir);
	assert_int_equal(system(words), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tls_modes),
		cmocka_unit_test(test_allow),
		cmocka_unit_test(test_disk_registry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
