/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tap-ctl-blktap.c - tap-ctl tells blktap's command lines (those of
 * Xen's block-tap hotplug script, 4.17 and later) from its own, and its
 * refusal names the clash and what to use instead.  The command lines are
 * copied from the scripts by hand.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tools/tap-ctl/tap-ctl-blktap.c"

#define MAX_WORDS 12

/* Split line at blanks into words (modified in place). */
static int split(char *line, char **words)
{
	int n = 0;

	for (char *w = strtok(line, " "); w && n < MAX_WORDS;
	     w = strtok(NULL, " "))
		words[n++] = w;
	return n;
}

static bool is_blktap_call(const char *text)
{
	char line[256], *words[MAX_WORDS];

	snprintf(line, sizeof(line), "%s", text);
	return tapctl_blktap_call(split(line, words), words);
}

/* Xen 4.17's tools/hotplug/Linux/block-tap (check_tools, find_device,
 * remove), and the one of Xen 4.18 and later (tap_create, remove). */
static const char *const blktap_lines[] = {
	"check",
	"list -t aio -f /srv/disk.img",
	"destroy -p 1234 -m 0",
	"allocate",
	"spawn",
	"free -m 3",
	"attach -p 1234 -m 3",
	"open -p 1234 -m 3 -a aio:/srv/disk.img",
	"detach -p 1234 -m 3",
	"close -p 1234 -m 3",
	"list -p 1234",
	"list -m 3",
	"list -a",
	"pause -p 1234 -m 3",
	"unpause -p 1234 -m 3",
	"stats -p 1234 -m 3",
	"create -a vhd:/srv/disk.vhd -d /dev/xen/blktap-2/tapdev3",
	"create -a aio:/srv/disk.img -R",
	"major",
};

/* tapstripe's own, which must go on. */
static const char *const own_lines[] = {
	"list",
	"list --json",
	"create -a aio:/srv/disk.img --nbd unix",
	"create -a aio:/srv/disk.img -r --name vm1",
	"create -a null:size=1G --shm /tmp/x.shm --run-dir /tmp/r",
	"destroy -i 1234",
	"attach -i 1234 --domid 5 --vdev xvdb",
	"detach -i 1234 --domid 5 --vdev xvdb",
	"release -i 1234 --domid 5 --vdev xvdb",
	"stats -i 1234 --json",
	"stats --all",
	"pause -i 1234",
	"resume -i 1234",
	"info -i 1234",
	"metrics --output /tmp/m.prom",
	"driver -i 1234 stripe status",
	"nbd -i 1234 list",
	"help",
	"help create",
	"destroy -i 1234 -- -p",
};

static void test_blktap_lines_refused(void **state)
{
	(void)state;
	unsetenv("XENBUS_PATH");
	for (size_t i = 0; i < NR(blktap_lines); i++) {
		if (!is_blktap_call(blktap_lines[i]))
			fail_msg("not taken for blktap's: '%s'",
				 blktap_lines[i]);
	}
}

static void test_own_lines_go_on(void **state)
{
	(void)state;
	unsetenv("XENBUS_PATH");
	for (size_t i = 0; i < NR(own_lines); i++) {
		if (is_blktap_call(own_lines[i]))
			fail_msg("taken for blktap's: '%s'", own_lines[i]);
	}
}

/* Xen 4.17's add(): "tap-ctl create -a $target" inside the hotplug
 * script, whose environment has XENBUS_PATH. */
static void test_create_from_hotplug_script(void **state)
{
	(void)state;
	setenv("XENBUS_PATH", "backend/vbd/5/51712", 1);
	assert_true(is_blktap_call("create -a aio:/srv/disk.img"));
	assert_false(is_blktap_call("list"));
	assert_false(is_blktap_call("destroy -i 1234"));
	unsetenv("XENBUS_PATH");
	assert_false(is_blktap_call("create -a aio:/srv/disk.img"));
}

static void test_refusal_text(void **state)
{
	char line[] = "attach -p 1234 -m 3", *words[MAX_WORDS], *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int n = split(line, words);

	(void)state;
	assert_non_null(f);
	assert_int_equal(tapctl_blktap_refuse(n, words, f), EXIT_USAGE);
	fclose(f);
	assert_non_null(strstr(text, "'tap-ctl attach -p 1234 -m 3'"));
	assert_non_null(strstr(text, "blktap's tap-ctl"));
	assert_non_null(strstr(text, "block-tap"));
	assert_non_null(strstr(text, "tapstripe's tap-ctl, not blktap's"));
	assert_non_null(strstr(text, "touched no tapdisk"));
	assert_non_null(strstr(text, "backendtype=qdisk"));
	assert_non_null(strstr(text, "target=tapstripe:NAME"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blktap_lines_refused),
		cmocka_unit_test(test_own_lines_go_on),
		cmocka_unit_test(test_create_from_hotplug_script),
		cmocka_unit_test(test_refusal_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
