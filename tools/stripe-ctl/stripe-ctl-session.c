/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe-ctl-session.c - "stripe-ctl session login|logout|list FILE
 * [SERVER]...": kernel iSCSI sessions (open-iscsi) for the servers of a
 * mapping file, so that tapdisk reads and writes their block devices
 * (the map's "device" key, drivers/stripe/map/map.h) instead of logging in with
 * libiscsi itself.
 *
 * login   for each server (all, or the SERVER numbers given) that has no
 *         kernel session yet: iscsiadm -m node -o new (and the CHAP
 *         settings from the map), iscsiadm -m node --login; then wait
 *         (--timeout) for the session's block device of the server's LUN,
 *         check its logical block size and its size against the map, and
 *         write its path into the map (under the file's lock, atomically).
 *         The path is the udev link /dev/disk/by-path/ip-HOST:PORT-iscsi-
 *         TARGET-lun-L when it exists and leads to that device, else the
 *         device node itself (say so: it may change at the next login).
 * logout  remove the device key of the servers (all that have one, or the
 *         SERVER numbers given) from the map, then log their sessions out
 *         (iscsiadm -m node --logout), except a session that another
 *         mapping file of the same directory still names.
 * list    every server: its device key and the kernel session found for
 *         its target, portal and LUN (sysfs), if any.
 *
 * The sessions are found in sysfs: /sys/class/iscsi_session/sessionN
 * (targetname), /sys/class/iscsi_connection/connectionN:0
 * (persistent_address, persistent_port) and the SCSI device H:C:T:LUN
 * under the session with its block/ directory.  A map that a tapdisk
 * serves (locked) is refused: stop serving it first.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/stripe-ctl/stripe-ctl.h"

#define ISCSIADM_ENV	      "STRIPE_CTL_ISCSIADM"
#define ISCSIADM_DEFAULT      "iscsiadm"
#define ISCSI_DEFAULT_PORT    "3260"
#define TCP_TRANSPORT	      "/sys/class/iscsi_transport/tcp"
#define SESSION_GLOB	      "/sys/class/iscsi_session/session*"
#define BY_PATH_DIR	      "/dev/disk/by-path"
#define OUTPUT_BYTES	      4096
#define POLL_NS		      100000000L /* 100 ms */
#define ISCSI_ERR_SESS_EXISTS 15	 /* iscsiadm: already logged in */
#define ISCSI_ERR_NO_OBJS     21	 /* iscsiadm: no session to log out */
#define PORT_SIZE	      16
#define FULL_PORTAL_SIZE      (STRIPE_MAP_PORTAL_SIZE + PORT_SIZE)

/* The kernel session found for one server. */
struct session {
	int id;			/* N of sessionN, -1: none */
	char node[PATH_MAX];	/* /dev/sdX, "" when no block device yet */
	char by_path[PATH_MAX]; /* the udev link's name, whether it exists */
};

/* --- running iscsiadm ---------------------------------------------------------- */

/*
 * Run iscsiadm with args; its stdout and stderr go to out.  Returns its
 * exit status, 127 when it could not be run, or -errno.
 */
static int iscsiadm(const char *const *args, char *out, size_t size)
{
	const char *prog = getenv(ISCSIADM_ENV);
	const char *argv[24];
	size_t n = 0, len = 0;
	int pfd[2], status;
	pid_t pid;

	prog = prog && *prog ? prog : ISCSIADM_DEFAULT;
	argv[n++] = prog;
	for (; *args && n < 23; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	if (pipe(pfd) < 0)
		return -errno;
	if ((pid = fork()) < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (!pid) {
		dup2(pfd[1], STDOUT_FILENO);
		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execvp(prog, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		char chunk[512];
		ssize_t r = read(pfd[0], chunk, sizeof(chunk));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r && len + 1 < size; i++)
			out[len++] = chunk[i];
	}
	out[len] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Why iscsiadm failed, in words an operator can act on. */
static int iscsiadm_failed(const char *what, const struct stripe_map_server *ms,
			   int status, const char *out)
{
	const char *hint = "";

	if (status == 127)
		return ctl_fail("cannot run iscsiadm (install open-iscsi, or "
				"set $" ISCSIADM_ENV ")");
	if (strstr(out, "not loaded") || strstr(out, "driver not found"))
		hint = "\n  the kernel's iSCSI TCP driver is not loaded: run "
		       "'modprobe iscsi_tcp' (a kernel without it cannot "
		       "use kernel sessions; keep tapdisk's own iSCSI)";
	else if (strstr(out, "iSCSI daemon") || strstr(out, "iscsid"))
		hint = "\n  iscsid is not running, or refused the request (its "
		       "log says why): start it (systemctl start iscsid, or "
		       "iscsid)";
	else if (strstr(out, "authoriz") || strstr(out, "authentica"))
		hint = "\n  the target refused the login: check the CHAP "
		       "credentials of the map and the target's ACL";
	return ctl_fail("iscsiadm %s of %s %s failed (exit %d): %s%s", what,
			ms->portal, ms->target, status, out, hint);
}

/* --- portals and sysfs ------------------------------------------------------- */

/* "host:port" of a map portal ("host", "host:port", "[v6]:port"). */
static void portal_parts(const char *portal, char *host, size_t hsize,
			 char *port, size_t psize)
{
	const char *colon = strrchr(portal, ':');
	const char *close = strchr(portal, ']');

	if (colon && (!close || colon > close)) {
		snprintf(host, hsize, "%.*s", (int)(colon - portal), portal);
		snprintf(port, psize, "%s", colon + 1);
	} else {
		snprintf(host, hsize, "%s", portal);
		snprintf(port, psize, ISCSI_DEFAULT_PORT);
	}
}

/* out has FULL_PORTAL_SIZE bytes. */
static void portal_full(const char *portal, char *out, size_t size)
{
	char host[STRIPE_MAP_PORTAL_SIZE], port[PORT_SIZE];

	portal_parts(portal, host, sizeof(host), port, sizeof(port));
	snprintf(out, size, "%s:%s", host, port);
}

/* The first line of a sysfs file, without its newline. */
static int read_attr(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	char *nl;

	if (!f)
		return -errno;
	if (!fgets(buf, (int)size, f))
		buf[0] = '\0';
	fclose(f);
	if ((nl = strchr(buf, '\n')))
		*nl = '\0';
	return 0;
}

/* Does session id talk to this server's portal? */
static bool session_portal_is(int id, const struct stripe_map_server *ms)
{
	char host[STRIPE_MAP_PORTAL_SIZE], port[PORT_SIZE], path[128], v[128];

	portal_parts(ms->portal, host, sizeof(host), port, sizeof(port));
	if (host[0] == '[') { /* sysfs writes v6 addresses bare */
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	snprintf(path, sizeof(path),
		 "/sys/class/iscsi_connection/connection%d:0/"
		 "persistent_address",
		 id);
	if (read_attr(path, v, sizeof(v)) || strcmp(v, host))
		return false;
	snprintf(path, sizeof(path),
		 "/sys/class/iscsi_connection/connection%d:0/persistent_port",
		 id);
	return !read_attr(path, v, sizeof(v)) && !strcmp(v, port);
}

/* The block device of LUN lun under session id: /dev/NAME, or "". */
static void session_lun_node(int id, uint32_t lun, char *node, size_t size)
{
	char pattern[160];
	glob_t g;

	node[0] = '\0';
	snprintf(pattern, sizeof(pattern),
		 "/sys/class/iscsi_session/session%d/device/target*/"
		 "*:*:*:%u/block/*",
		 id, lun);
	if (!glob(pattern, 0, NULL, &g) && g.gl_pathc)
		snprintf(node, size, "/dev/%s",
			 strrchr(g.gl_pathv[0], '/') + 1);
	globfree(&g);
}

/* Find the kernel session of a server and its LUN's block device. */
static void find_session(const struct stripe_map_server *ms, struct session *s)
{
	char full[FULL_PORTAL_SIZE], path[PATH_MAX], v[256];
	glob_t g;

	s->id = -1;
	s->node[0] = '\0';
	portal_full(ms->portal, full, sizeof(full));
	snprintf(s->by_path, sizeof(s->by_path),
		 BY_PATH_DIR "/ip-%s-iscsi-%s-lun-%u", full, ms->target,
		 ms->lun);
	if (glob(SESSION_GLOB, 0, NULL, &g) || !g.gl_pathc) {
		globfree(&g);
		return;
	}
	for (size_t i = 0; i < g.gl_pathc && s->id < 0; i++) {
		int id = atoi(strrchr(g.gl_pathv[i], '/') + 8);

		snprintf(path, sizeof(path), "%s/targetname", g.gl_pathv[i]);
		if (read_attr(path, v, sizeof(v)) || strcmp(v, ms->target) ||
		    !session_portal_is(id, ms))
			continue;
		s->id = id;
		session_lun_node(id, ms->lun, s->node, sizeof(s->node));
	}
	globfree(&g);
}

/* The name to put in the map: the by-path link if it leads to the node. */
static const char *device_name(const struct session *s, bool *stable)
{
	char a[PATH_MAX], b[PATH_MAX];

	*stable = realpath(s->by_path, a) && realpath(s->node, b) &&
		  !strcmp(a, b);
	return *stable ? s->by_path : s->node;
}

/* --- checks -------------------------------------------------------------------- */

/* Bytes of server i's LUN that the map's extents use. */
static uint64_t need_bytes(const struct stripe_map *m, uint32_t i)
{
	uint64_t need = 0;

	for (size_t k = 0; k < stripe_map_nr_slots(m); k++) {
		uint64_t end;

		if (m->slots[k].server != i)
			continue;
		end = m->slots[k].lba * m->servers[i].block_size +
		      m->extent_size_bytes;
		if (end > need)
			need = end;
	}
	return need;
}

static int check_device(const struct stripe_map *m, uint32_t i,
			const char *node)
{
	const struct stripe_map_server *ms = &m->servers[i];
	uint64_t bytes = 0, need = need_bytes(m, i);
	int fd = open(node, O_RDONLY | O_CLOEXEC), bs = 0, err = 0;

	if (fd < 0)
		return ctl_fail("server %u: cannot open %s: %s", i, node,
				strerror(errno));
	if (ioctl(fd, BLKSSZGET, &bs) < 0 ||
	    ioctl(fd, BLKGETSIZE64, &bytes) < 0)
		err = ctl_fail("server %u: %s is not a block device: %s", i,
			       node, strerror(errno));
	else if ((uint32_t)bs != ms->block_size)
		err = ctl_fail("server %u: %s has %d-byte blocks, the map says "
			       "%u: is it the right LUN?",
			       i, node, bs, ms->block_size);
	else if (bytes < need)
		err = ctl_fail(
			"server %u: %s has %llu bytes, the map's extents "
			"need %llu: is it the right LUN?",
			i, node, (unsigned long long)bytes,
			(unsigned long long)need);
	close(fd);
	return err;
}

/* --- login --------------------------------------------------------------------- */

static int node_login(const struct stripe_map_server *ms)
{
	char out[OUTPUT_BYTES], portal[FULL_PORTAL_SIZE];
	const char *set_chap[][2] = {
		{"node.session.auth.authmethod", "CHAP"},
		{"node.session.auth.username", ms->chap_user},
		{"node.session.auth.password", ms->chap_secret},
	};
	int st;

	portal_full(ms->portal, portal, sizeof(portal));
	st = iscsiadm((const char *[]){"-m", "node", "-o", "new", "-T",
				       ms->target, "-p", portal, NULL},
		      out, sizeof(out));
	if (st)
		return iscsiadm_failed("-o new", ms, st, out);
	for (size_t k = 0; ms->chap_user[0] && k < 3; k++) {
		st = iscsiadm((const char *[]){"-m", "node", "-o", "update",
					       "-T", ms->target, "-p", portal,
					       "-n", set_chap[k][0], "-v",
					       set_chap[k][1], NULL},
			      out, sizeof(out));
		if (st)
			return iscsiadm_failed("-o update", ms, st, out);
	}
	st = iscsiadm((const char *[]){"-m", "node", "-T", ms->target, "-p",
				       portal, "--login", NULL},
		      out, sizeof(out));
	if (st && st != ISCSI_ERR_SESS_EXISTS)
		return iscsiadm_failed("--login", ms, st, out);
	return 0;
}

/* Wait until the session's device of the LUN appears. */
static int wait_device(const struct stripe_map_server *ms, uint32_t i,
		       unsigned int timeout_s, struct session *s)
{
	struct timespec pause = {0, POLL_NS};
	long polls = (long)timeout_s * (1000000000L / POLL_NS);
	struct stat st;

	for (long n = 0;; n++) {
		find_session(ms, s);
		if (s->id >= 0 && s->node[0] && !stat(s->node, &st))
			return 0;
		if (n >= polls)
			break;
		nanosleep(&pause, NULL);
	}
	if (s->id < 0)
		return ctl_fail("server %u: iscsiadm logged in, but no session "
				"to %s %s shows in sysfs",
				i, ms->portal, ms->target);
	return ctl_fail("server %u: session %d to %s is up, but no block "
			"device for lun %u appeared within %u s: does the "
			"target export lun %u? (iscsiadm -m session -r %d "
			"-P 3)",
			i, s->id, ms->target, ms->lun, timeout_s, ms->lun,
			s->id);
}

static int login_one(struct stripe_map *m, uint32_t i, unsigned int timeout_s)
{
	struct stripe_map_server *ms = &m->servers[i];
	struct session s;
	const char *name;
	bool stable;
	int st;

	find_session(ms, &s);
	if (s.id < 0 && (st = node_login(ms)))
		return st;
	if ((st = wait_device(ms, i, timeout_s, &s)) ||
	    (st = check_device(m, i, s.node)))
		return st;
	name = device_name(&s, &stable);
	if (strlen(name) >= sizeof(ms->device))
		return ctl_fail("server %u: the device path %s is longer than "
				"%zu bytes",
				i, name, sizeof(ms->device) - 1);
	if (!stable)
		fprintf(stderr,
			"stripe-ctl: server %u: no udev link %s; the map "
			"names %s, which may change at the next login\n",
			i, s.by_path, s.node);
	snprintf(ms->device, sizeof(ms->device), "%s", name);
	return 0;
}

/* --- the commands ---------------------------------------------------------------- */

/* The servers the command is about: all, or the SERVER words. */
static int pick_servers(const struct ctl_opts *o, const char *command,
			const struct stripe_map *m, bool *picked)
{
	for (uint32_t i = 0; i < m->nr_servers; i++)
		picked[i] = o->nr_extra == 0;
	for (unsigned int k = 0; k < o->nr_extra; k++) {
		char *end;
		unsigned long n = strtoul(o->extra[k], &end, 10);

		if (end == o->extra[k] || *end || o->extra[k][0] == '-' ||
		    n >= m->nr_servers)
			return ctl_usage_fail(command,
					      "bad SERVER '%s': a server "
					      "number of the map, 0-%u "
					      "(see 'stripe-ctl session list')",
					      o->extra[k], m->nr_servers - 1);
		picked[n] = true;
	}
	return 0;
}

/* Why the map at path could not be read (ret < 0); an exit status. */
static int map_fail(const char *path, int ret,
		    const struct stripe_map_error *err)
{
	char text[STRIPE_MAP_ERROR_TEXT_MAX];

	stripe_map_error_text(err, path, text, sizeof(text));
	if (ret == -EINVAL || err->names_file)
		return ctl_fail("%s", text);
	return ctl_fail("%s: %s", path, strerror(-ret));
}

/* Open FILE under its lock (refused while a tapdisk serves it). */
static int open_locked(const char *path, struct stripe_map *m, int *lock_fd)
{
	struct stripe_map_error err;
	int ret = stripe_map_open(path, m, lock_fd, &err);

	if (ret == -EBUSY)
		return ctl_fail(
			"%s is open (locked) by a tapdisk: stop serving "
			"it first (the disk would lose its servers "
			"under it)",
			path);
	if (ret)
		return map_fail(path, ret, &err);
	return 0;
}

static int save(const char *path, struct stripe_map *m, int *lock_fd)
{
	struct stripe_map_error err;

	if (stripe_map_rewrite(path, m, lock_fd, &err))
		return ctl_fail("cannot rewrite %s: %s", path, err.reason);
	return 0;
}

static int finish(const struct ctl_opts *o, struct stripe_map *m,
		  const char *path, int lock_fd, bool changed, int status)
{
	stripe_map_close(lock_fd);
	if (!status && o->json)
		status = ctl_print_result(m->vdisk, path, changed);
	stripe_map_free(m);
	return status;
}

int ctl_cmd_session_login(struct ctl_opts *o)
{
	bool picked[STRIPE_MAP_MAX_SERVERS], changed = false;
	struct stripe_map m;
	int lock_fd = -1, status;

	if ((status = open_locked(o->arg, &m, &lock_fd)))
		return status;
	status = pick_servers(o, "session login", &m, picked);
	if (!status && access(TCP_TRANSPORT, F_OK))
		status = ctl_fail("the kernel's iSCSI driver tcp is not loaded "
				  "(no " TCP_TRANSPORT "): run 'modprobe "
				  "iscsi_tcp'; a kernel without the module "
				  "cannot use kernel sessions: leave the "
				  "servers on tapdisk's own iSCSI (no device "
				  "key)");
	for (uint32_t i = 0; !status && i < m.nr_servers; i++) {
		char before[STRIPE_MAP_DEVICE_SIZE];

		if (!picked[i])
			continue;
		snprintf(before, sizeof(before), "%s", m.servers[i].device);
		if (!(status = login_one(&m, i, o->timeout_s))) {
			changed |= strcmp(before, m.servers[i].device) != 0;
			if (!o->json)
				printf("server %u: %s %s lun %u -> %s\n", i,
				       m.servers[i].portal, m.servers[i].target,
				       m.servers[i].lun, m.servers[i].device);
		}
	}
	/* The servers logged in before a failure keep their device. */
	if (changed) {
		int saved = save(o->arg, &m, &lock_fd);

		status = status ? status : saved;
	}
	return finish(o, &m, o->arg, lock_fd, changed, status);
}

/* Another map of path's directory whose server names device, or NULL. */
static char *device_user(const char *path, const char *device, uint32_t *srv)
{
	char dir[PATH_MAX], pattern[PATH_MAX + 8], me[PATH_MAX], *user = NULL;
	glob_t g;

	snprintf(dir, sizeof(dir), "%s", path);
	snprintf(pattern, sizeof(pattern), "%s/*.map", dirname(dir));
	if (!realpath(path, me) || glob(pattern, 0, NULL, &g))
		return NULL;
	for (size_t k = 0; k < g.gl_pathc && !user; k++) {
		struct stripe_map_error err;
		struct stripe_map other;
		char it[PATH_MAX];

		if (!realpath(g.gl_pathv[k], it) || !strcmp(it, me) ||
		    stripe_map_read(g.gl_pathv[k], &other, &err))
			continue;
		for (uint32_t i = 0; i < other.nr_servers && !user; i++)
			if (!strcmp(other.servers[i].device, device)) {
				user = strdup(g.gl_pathv[k]);
				*srv = i;
			}
		stripe_map_free(&other);
	}
	globfree(&g);
	return user;
}

static int logout_one(const char *path, const struct stripe_map_server *ms,
		      uint32_t i, const char *device)
{
	char out[OUTPUT_BYTES], portal[FULL_PORTAL_SIZE];
	uint32_t other_srv = 0;
	char *user = device[0] ? device_user(path, device, &other_srv) : NULL;
	int st;

	if (user) {
		fprintf(stderr,
			"stripe-ctl: server %u: %s (server %u) still uses %s: "
			"its session stays logged in\n",
			i, user, other_srv, device);
		free(user);
		return 0;
	}
	portal_full(ms->portal, portal, sizeof(portal));
	st = iscsiadm((const char *[]){"-m", "node", "-T", ms->target, "-p",
				       portal, "--logout", NULL},
		      out, sizeof(out));
	if (st && st != ISCSI_ERR_NO_OBJS)
		return iscsiadm_failed("--logout", ms, st, out);
	return 0;
}

int ctl_cmd_session_logout(struct ctl_opts *o)
{
	bool picked[STRIPE_MAP_MAX_SERVERS], changed = false;
	static char devices[STRIPE_MAP_MAX_SERVERS][STRIPE_MAP_DEVICE_SIZE];
	struct stripe_map m;
	int lock_fd = -1, status;

	if ((status = open_locked(o->arg, &m, &lock_fd)))
		return status;
	status = pick_servers(o, "session logout", &m, picked);
	for (uint32_t i = 0; !status && i < m.nr_servers; i++) {
		/* No SERVER given: only the servers on a device. */
		if (!o->nr_extra && !m.servers[i].device[0])
			picked[i] = false;
		memcpy(devices[i], m.servers[i].device, sizeof(devices[i]));
		changed |= picked[i] && m.servers[i].device[0];
		if (picked[i])
			m.servers[i].device[0] = '\0';
	}
	/* The map first: it must never name a device without a session. */
	if (!status && changed)
		status = save(o->arg, &m, &lock_fd);
	for (uint32_t i = 0; !status && i < m.nr_servers; i++) {
		if (!picked[i])
			continue;
		status = logout_one(o->arg, &m.servers[i], i, devices[i]);
		if (!status && !o->json)
			printf("server %u: %s %s lun %u: logged out\n", i,
			       m.servers[i].portal, m.servers[i].target,
			       m.servers[i].lun);
	}
	return finish(o, &m, o->arg, lock_fd, changed, status);
}

static void list_json(const struct stripe_map *m, const struct session *s,
		      const bool *picked)
{
	struct td_strbuf sb;
	struct td_json j;

	td_strbuf_init(&sb);
	td_json_init(&j, &sb);
	td_json_begin_object(&j, NULL);
	td_json_bool(&j, "tcp_driver_loaded", !access(TCP_TRANSPORT, F_OK));
	td_json_begin_array(&j, "servers");
	for (uint32_t i = 0; i < m->nr_servers; i++) {
		if (!picked[i])
			continue;
		td_json_begin_object(&j, NULL);
		td_json_u64(&j, "server", i);
		td_json_str(&j, "portal", m->servers[i].portal);
		td_json_str(&j, "target", m->servers[i].target);
		td_json_u64(&j, "lun", m->servers[i].lun);
		td_json_str(&j, "device", m->servers[i].device);
		td_json_bool(&j, "session", s[i].id >= 0);
		if (s[i].id >= 0)
			td_json_u64(&j, "session_id", (uint64_t)s[i].id);
		td_json_str(&j, "node", s[i].node);
		td_json_end_object(&j);
	}
	td_json_end_array(&j);
	td_json_end_object(&j);
	ctl_print_json(&j, &sb);
}

int ctl_cmd_session_list(struct ctl_opts *o)
{
	static struct session s[STRIPE_MAP_MAX_SERVERS];
	bool picked[STRIPE_MAP_MAX_SERVERS];
	struct stripe_map_error err;
	struct stripe_map m;
	int status;

	if ((status = stripe_map_read(o->arg, &m, &err)))
		return map_fail(o->arg, status, &err);
	if ((status = pick_servers(o, "session list", &m, picked))) {
		stripe_map_free(&m);
		return status;
	}
	for (uint32_t i = 0; i < m.nr_servers; i++)
		if (picked[i])
			find_session(&m.servers[i], &s[i]);
	if (o->json) {
		list_json(&m, s, picked);
	} else {
		printf("%-6s %-22s %-36s %-4s %-8s %s\n", "SERVER", "PORTAL",
		       "TARGET", "LUN", "SESSION", "DEVICE (map) / NODE");
		for (uint32_t i = 0; i < m.nr_servers; i++) {
			char sess[16] = "-";

			if (!picked[i])
				continue;
			if (s[i].id >= 0)
				snprintf(sess, sizeof(sess), "%d", s[i].id);
			printf("%-6u %-22s %-36s %-4u %-8s %s / %s\n", i,
			       m.servers[i].portal, m.servers[i].target,
			       m.servers[i].lun, sess,
			       m.servers[i].device[0] ? m.servers[i].device
						      : "-",
			       s[i].node[0] ? s[i].node : "-");
		}
		if (access(TCP_TRANSPORT, F_OK))
			printf("(the kernel's iSCSI driver tcp is not loaded: "
			       "no kernel session is possible)\n");
	}
	stripe_map_free(&m);
	return EXIT_SUCCESS;
}
