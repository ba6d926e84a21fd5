/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xenwatch-dm.c - tapstripe-xenwatch run as tapstripe-xenpv-dm: the
 * "device model" that xl 4.17 insists on starting in dom0 for a PV guest
 * with a backendtype=qdisk disk (libxl__need_xenpv_qemu), named by the
 * guest's device_model_override.  It serves no device: the guest's
 * tapstripe disks are tapdisk's (started by tapstripe-xenwatch).  It
 * does what libxl waits for from QEMU, and nothing else: it writes
 * device-model/<domid>/state "running", answers the few QMP commands
 * libxl sends (qmp_capabilities, query-status, query-chardev, query-vnc)
 * on the libxl-cmd socket, and exits when libxl kills it (SIGHUP) at the
 * domain's end.  A guest that needs a real device model (a framebuffer,
 * a second console, a QEMU disk) must not name it.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <xenstore.h>

#include "common/log.h"
#include "tools/xenwatch/xenwatch-int.h"

#define DM_MAX_CLIENTS 4
#define DM_BUF_BYTES   4096
/* What QEMU version the greeting names (Debian 12's). */
#define DM_GREETING                                                        \
	"{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, " \
	"\"major\": 7}, \"package\": \"tapstripe-xenpv-dm\"}, "            \
	"\"capabilities\": []}}\r\n"

struct dm_client {
	int fd;
	size_t len;
	char buf[DM_BUF_BYTES];
};

static volatile sig_atomic_t dm_stop;

static void dm_on_signal(int sig)
{
	dm_stop = sig;
}

/* The value after "name" in argv (QEMU's "-xen-domid 5"), or NULL. */
static const char *dm_arg(int argc, char **argv, const char *name)
{
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], name))
			return argv[i + 1];
	return NULL;
}

/* The -chardev value with id=libxl-cmd, or NULL. */
static const char *dm_qmp_chardev(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "-chardev") &&
		    strstr(argv[i + 1], "id=libxl-cmd,"))
			return argv[i + 1];
	return NULL;
}

/* key=VALUE of a chardev spec into out (up to the next ','), or -ENOENT. */
static int dm_spec_value(const char *spec, const char *key, char *out,
			 size_t len)
{
	const char *p = strstr(spec, key);
	size_t n;

	if (!p || (p != spec && p[-1] != ','))
		return -ENOENT;
	p += strlen(key);
	n = strcspn(p, ",");
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* The listening QMP socket: fd=N inherited from libxl, or path=P. */
static int dm_listen(const char *spec)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char v[sizeof(sa.sun_path)];
	int fd;

	if (!dm_spec_value(spec, "fd=", v, sizeof(v)))
		return atoi(v);
	if (dm_spec_value(spec, "path=", v, sizeof(v)))
		return -EINVAL;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", v);
	unlink(v);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* The string value of "key" in the JSON object text obj into out. */
static void dm_json_string(const char *obj, const char *key, char *out,
			   size_t len)
{
	const char *p = strstr(obj, key);

	out[0] = '\0';
	if (!p || !(p = strchr(p + strlen(key), ':')))
		return;
	p += strspn(p + 1, " \t\r\n") + 1;
	if (*p == '"')
		snprintf(out, len, "%.*s", (int)strcspn(p + 1, "\""), p + 1);
	else
		snprintf(out, len, "%.*s", (int)strcspn(p, ",} \t\r\n"), p);
}

/* The answer to one command (libxl's ids are numbers). */
static void dm_answer(int fd, const char *obj)
{
	char cmd[64], id[32], reply[256];
	const char *ret = "{}";

	dm_json_string(obj, "\"execute\"", cmd, sizeof(cmd));
	dm_json_string(obj, "\"id\"", id, sizeof(id));
	if (!strcmp(cmd, "query-status"))
		ret = "{\"status\": \"prelaunch\", \"singlestep\": false, "
		      "\"running\": false}";
	else if (!strcmp(cmd, "query-chardev"))
		ret = "[]";
	else if (!strcmp(cmd, "query-vnc"))
		ret = "{\"enabled\": false}";
	else if (!strcmp(cmd, "quit"))
		dm_stop = SIGTERM;
	td_info("QMP %s (id %s)", cmd, id[0] ? id : "-");
	snprintf(reply, sizeof(reply), "{\"return\": %s%s%s}\r\n", ret,
		 id[0] ? ", \"id\": " : "", id);
	if (write(fd, reply, strlen(reply)) < 0)
		td_warn("QMP reply: %s", strerror(errno));
}

/* Answer every whole object in c's buffer; keep the rest. */
static void dm_take(struct dm_client *c)
{
	size_t start = 0, depth = 0;
	bool in_str = false;

	for (size_t i = 0; i < c->len; i++) {
		char ch = c->buf[i];

		if (in_str) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_str = false;
		} else if (ch == '"') {
			in_str = true;
		} else if (ch == '{' && !depth++) {
			start = i;
		} else if (ch == '}' && depth && !--depth) {
			c->buf[i] = '\0';
			dm_answer(c->fd, c->buf + start);
			memmove(c->buf, c->buf + i + 1, c->len - i - 1);
			c->len -= i + 1;
			i = (size_t)-1;
		}
	}
	if (c->len == sizeof(c->buf))
		c->len = 0; /* an object too long for us: dropped */
}

static void dm_client_io(struct dm_client *c)
{
	ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);

	if (n <= 0) {
		close(c->fd);
		c->fd = -1;
		return;
	}
	c->len += (size_t)n;
	dm_take(c);
}

static void dm_accept(int lfd, struct dm_client *cl)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (int i = 0; i < DM_MAX_CLIENTS; i++) {
		if (cl[i].fd >= 0)
			continue;
		cl[i].fd = fd;
		cl[i].len = 0;
		if (write(fd, DM_GREETING, strlen(DM_GREETING)) < 0)
			td_warn("QMP greeting: %s", strerror(errno));
		return;
	}
	close(fd);
}

static void dm_serve(int lfd)
{
	struct dm_client cl[DM_MAX_CLIENTS];

	for (int i = 0; i < DM_MAX_CLIENTS; i++)
		cl[i].fd = -1;
	while (!dm_stop) {
		struct pollfd p[DM_MAX_CLIENTS + 1] = {
			{.fd = lfd, .events = POLLIN}};

		for (int i = 0; i < DM_MAX_CLIENTS; i++)
			p[i + 1] = (struct pollfd){.fd = cl[i].fd,
						   .events = POLLIN};
		if (poll(p, DM_MAX_CLIENTS + 1, 1000) <= 0)
			continue;
		if (p[0].revents)
			dm_accept(lfd, cl);
		for (int i = 0; i < DM_MAX_CLIENTS; i++)
			if (cl[i].fd >= 0 && p[i + 1].revents)
				dm_client_io(&cl[i]);
	}
	for (int i = 0; i < DM_MAX_CLIENTS; i++)
		if (cl[i].fd >= 0)
			close(cl[i].fd);
}

/* device-model/<domid>/state "running": what libxl waits for. */
static int dm_say_running(const char *domid)
{
	struct xs_handle *xs = xs_open(0);
	char path[XW_PATH_MAX];
	bool ok;

	if (!xs)
		return -errno;
	snprintf(path, sizeof(path), "/local/domain/0/device-model/%s/state",
		 domid);
	ok = xs_write(xs, XBT_NULL, path, "running", strlen("running"));
	xs_close(xs);
	return ok ? 0 : -EIO;
}

int xw_dm_main(int argc, char **argv)
{
	const char *domid = dm_arg(argc, argv, "-xen-domid");
	const char *spec = dm_qmp_chardev(argc, argv);
	struct sigaction sa = {.sa_handler = dm_on_signal};
	int lfd, err;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (!domid) {
		fprintf(stderr, XW_DM_NAME ": no -xen-domid: name me as a "
					   "guest's device_model_override, for "
					   "xl to start\n");
		return EXIT_FAILURE;
	}
	lfd = spec ? dm_listen(spec) : -ENOENT;
	if (lfd < 0)
		td_warn("domain %s: no QMP socket (%s): libxl's QMP "
			"queries will fail",
			domid, strerror(-lfd));
	err = dm_say_running(domid);
	if (err) {
		td_err("domain %s: cannot write device-model state: %s", domid,
		       strerror(-err));
		return EXIT_FAILURE;
	}
	td_info("domain %s: standing in for its xenpv device model; its "
		"tapstripe disks are tapdisk's",
		domid);
	if (lfd >= 0)
		dm_serve(lfd);
	else
		while (!dm_stop)
			pause();
	td_info("domain %s: signal %d: exiting", domid, (int)dm_stop);
	return EXIT_SUCCESS;
}
