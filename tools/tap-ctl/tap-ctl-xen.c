/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tap-ctl-xen.c - tap-ctl attach and detach: make and unmake a Xen
 * virtual disk served by a tapdisk, the way XenServer's toolstack makes
 * its vbd3 devices.
 *
 * attach writes, in one xenstore transaction, the frontend directory
 * (owned by the guest, readable by the backend domain) and the backend
 * directory (owned by the backend domain, readable by the guest) with
 * state Initialising and tapstripe-pid naming the tapdisk; the tapdisk,
 * which watches its backend root, takes the device and moves it to
 * InitWait, which attach waits for.  detach sets online to 0, waits for
 * the backend to reach Closed (the guest has closed the disk and tapdisk
 * has finished its I/O) and removes both directories.  The node layout is
 * in tapdisk/xen-keys.h.
 *
 * Handing a device over from one tapdisk to another while the guest stays
 * connected (to restart or upgrade tapdisk): release sets tapstripe-pid to
 * 0 and waits until the tapdisk holding the device has answered every
 * request it took and says so (tapstripe-owner 0); the guest's new
 * requests wait on the ring meanwhile.  attach of a device so released
 * names the new tapdisk in tapstripe-pid and waits until it holds the
 * device (tapstripe-owner is its pid); attach of a device another live
 * tapdisk holds does both steps.  release and attach also hand over a
 * disk xl made in a driver domain (backend/qdisk, claimed by a tapdisk
 * through its params) when the guest has no vbd3 disk of that vdev;
 * detach refuses those: they are xl's to remove.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xenstore.h>

#include "frontends/xen/xen-keys.h"
#include "tapdisk/control/control.h"
#include "tools/tap-ctl/tap-ctl.h"

#define POLL_MS		  50
#define NS_PER_MS	  1000000ull
#define MAX_DOMID	  0x7fef /* DOMID_FIRST_RESERVED - 1 */
#define XEN_FRONTEND_LINE "frontend: xen "
#define TXN_RETRIES	  16
/* A device directory and one of its keys. */
#define KEY_PATH_MAX (XEN_PATH_MAX + 64)

/* One device: who serves it, whose it is, where its nodes live. */
struct xen_target {
	uint32_t backend_domid;
	uint32_t domid;
	uint32_t devid;
	bool read_only_disk;
	bool xl_made; /* a backend/qdisk device, not one of ours (vbd3) */
	char be[XEN_PATH_MAX];
	char fe[XEN_PATH_MAX];
};

/* Backend domain and disk mode from tapdisk's "info". */
static int read_tapdisk_info(struct cmd_opts *o, struct xen_target *t)
{
	struct td_ctl_reply r;
	const char *text, *line;
	int status;

	td_ctl_reply_init(&r);
	status = tapctl_request(o, o->id, "info", &r);
	text = td_strbuf_str(&r.payload);
	if (!status && !(line = strstr(text, XEN_FRONTEND_LINE)))
		status = tapctl_fail("tapdisk %d does not serve Xen frontends "
				     "(no xenstore where it runs, or started "
				     "with --xen off)",
				     o->id);
	else if (!status &&
		 sscanf(line + strlen(XEN_FRONTEND_LINE),
			"/local/domain/%" SCNu32 "/", &t->backend_domid) != 1)
		status = tapctl_fail("tapdisk %d: unexpected Xen root in "
				     "'%.80s'",
				     o->id, line);
	if (!status)
		t->read_only_disk = strstr(text, "\nread_only: yes") != NULL;
	td_ctl_reply_free(&r);
	return status;
}

/* This domain's id, as xenstored knows it (a dom0 may lack the key). */
static uint32_t self_domid(struct xs_handle *xs)
{
	unsigned int len;
	char *v = xs_read(xs, XBT_NULL, "domid", &len);
	uint32_t domid = 0;

	if (v && xen_parse_u32(v, MAX_DOMID, &domid))
		domid = 0;
	free(v);
	return domid;
}

/* The value of dir/key, or NULL. */
static char *read_key(struct xs_handle *xs, const char *dir, const char *key)
{
	char path[KEY_PATH_MAX];
	unsigned int len;

	snprintf(path, sizeof(path), "%s/%s", dir, key);
	return xs_read(xs, XBT_NULL, path, &len);
}

/*
 * A disk xl made in this (driver) domain for a tapdisk that claimed it
 * (backend/qdisk, params tapstripe:NAME) when there is no vbd3 device of
 * that guest and vdev: release and attach hand it over as one of ours.
 */
static void pick_backend(struct xs_handle *xs, struct xen_target *t)
{
	char qbe[XEN_PATH_MAX];
	char *vbd3 = read_key(xs, t->be, "state"), *qdisk = NULL;

	t->xl_made = false;
	if (!vbd3 &&
	    !xen_backend_path_type(qbe, sizeof(qbe), XEN_BACKEND_TYPE_QDISK,
				   t->backend_domid, t->domid, t->devid))
		qdisk = read_key(xs, qbe, "state");
	if (qdisk) {
		strcpy(t->be, qbe);
		t->xl_made = true;
	}
	free(vbd3);
	free(qdisk);
}

/*
 * The device's paths.  attach asks tapdisk (it must serve Xen); detach
 * works with the tapdisk gone too, from this domain's id.
 */
static int resolve_target(struct cmd_opts *o, struct xs_handle *xs,
			  bool ask_tapdisk, struct xen_target *t)
{
	int status;

	if (xen_parse_u32(o->domid, MAX_DOMID, &t->domid))
		return tapctl_fail("--domid wants a domain id (0-%d), not '%s'",
				   MAX_DOMID, o->domid);
	if (xen_vdev_to_devid(o->vdev, &t->devid))
		return tapctl_fail("--vdev wants xvda..xvdz or a device "
				   "number, not '%s'",
				   o->vdev);
	if (ask_tapdisk && (status = read_tapdisk_info(o, t)))
		return status;
	if (!ask_tapdisk)
		t->backend_domid = self_domid(xs);
	if (xen_backend_path(t->be, sizeof(t->be), t->backend_domid, t->domid,
			     t->devid) ||
	    xen_frontend_path(t->fe, sizeof(t->fe), t->domid, t->devid))
		return tapctl_fail("xenstore path too long");
	pick_backend(xs, t);
	return 0;
}

static struct xs_handle *open_store(void)
{
	struct xs_handle *xs = xs_open(0);

	if (!xs)
		tapctl_fail("cannot connect to xenstore: %s; is this a Xen "
			    "domain with xenstored running?",
			    strerror(errno));
	return xs;
}

/* --- attach ----------------------------------------------------------------- */

static bool write_key(struct xs_handle *xs, xs_transaction_t txn,
		      const char *dir, const char *key, const char *value)
{
	char path[KEY_PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, key);
	return xs_write(xs, txn, path, value, strlen(value));
}

/* Owner first; the other side may read. */
static bool set_perms(struct xs_handle *xs, xs_transaction_t txn,
		      const char *dir, uint32_t owner, uint32_t reader)
{
	struct xs_permissions perms[2] = {
		{.id = owner, .perms = XS_PERM_NONE},
		{.id = reader, .perms = XS_PERM_READ},
	};

	return xs_set_permissions(xs, txn, dir, perms, 2);
}

static bool write_frontend(struct xs_handle *xs, xs_transaction_t txn,
			   const struct xen_target *t)
{
	char v[32];

	snprintf(v, sizeof(v), "%" PRIu32, t->backend_domid);
	if (!xs_mkdir(xs, txn, t->fe) ||
	    !set_perms(xs, txn, t->fe, t->domid, t->backend_domid) ||
	    !write_key(xs, txn, t->fe, "backend", t->be) ||
	    !write_key(xs, txn, t->fe, "backend-id", v))
		return false;
	snprintf(v, sizeof(v), "%" PRIu32, t->devid);
	return write_key(xs, txn, t->fe, "virtual-device", v) &&
	       write_key(xs, txn, t->fe, "device-type", "disk") &&
	       write_key(xs, txn, t->fe, "state", "1");
}

static bool write_backend(struct xs_handle *xs, xs_transaction_t txn,
			  const struct xen_target *t, const struct cmd_opts *o)
{
	char v[32];

	snprintf(v, sizeof(v), "%" PRIu32, t->domid);
	if (!xs_mkdir(xs, txn, t->be) ||
	    !set_perms(xs, txn, t->be, t->backend_domid, t->domid) ||
	    !write_key(xs, txn, t->be, "frontend", t->fe) ||
	    !write_key(xs, txn, t->be, "frontend-id", v))
		return false;
	snprintf(v, sizeof(v), "%d", o->id);
	return write_key(xs, txn, t->be, "dev", o->vdev) &&
	       write_key(xs, txn, t->be, "mode", o->mode) &&
	       write_key(xs, txn, t->be, "type", "tapstripe") &&
	       write_key(xs, txn, t->be, "device-type", "disk") &&
	       write_key(xs, txn, t->be, "removable", "0") &&
	       write_key(xs, txn, t->be, "online", "1") &&
	       write_key(xs, txn, t->be, XEN_KEY_TAPDISK_PID, v) &&
	       write_key(xs, txn, t->be, "state", "1");
}

/* Both directories at once; xenstored makes a conflicting txn retry. */
static int write_nodes(struct xs_handle *xs, const struct xen_target *t,
		       const struct cmd_opts *o)
{
	for (int i = 0; i < TXN_RETRIES; i++) {
		xs_transaction_t txn = xs_transaction_start(xs);
		bool ok;

		if (txn == XBT_NULL)
			return -errno;
		ok = write_frontend(xs, txn, t) && write_backend(xs, txn, t, o);
		if (!ok) {
			int err = -errno;

			xs_transaction_end(xs, txn, true);
			return err;
		}
		if (xs_transaction_end(xs, txn, false))
			return 0;
		if (errno != EAGAIN)
			return -errno;
	}
	return -EAGAIN;
}

/* Wait until the backend's state satisfies ok(state).  0 or -ETIMEDOUT. */
static int wait_state(struct xs_handle *xs, const char *be, int timeout_s,
		      bool (*ok)(int state), int *last)
{
	uint64_t deadline =
		td_now_ns() + (uint64_t)timeout_s * 1000 * NS_PER_MS;

	for (;;) {
		char *v = read_key(xs, be, "state");

		*last = v ? xen_parse_state(v) : -ENOENT;
		free(v);
		if (ok(*last))
			return 0;
		if (td_now_ns() >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, POLL_MS);
	}
}

static bool taken(int state)
{
	return state >= XenbusStateInitWait;
}

static bool closed(int state)
{
	return state == XenbusStateClosed || state == -ENOENT;
}

static int check_free(struct xs_handle *xs, const struct xen_target *t,
		      const struct cmd_opts *o)
{
	char *be = read_key(xs, t->be, "state");
	char *fe = read_key(xs, t->fe, "state");
	int status = 0;

	if (be || fe)
		status = tapctl_fail("domain %s already has a disk %s (%s): "
				     "detach it first",
				     o->domid, o->vdev, be ? t->be : t->fe);
	free(be);
	free(fe);
	return status;
}

/* --- handing over ------------------------------------------------------------ */

/*
 * Wait until tapstripe-owner is want.  0, or an exit status: the tapdisk
 * that must write it (pid) died, or the timeout passed.
 */
static int wait_owner(struct xs_handle *xs, const struct xen_target *t,
		      const struct cmd_opts *o, const char *want, int pid)
{
	uint64_t deadline =
		td_now_ns() + (uint64_t)o->timeout_s * 1000 * NS_PER_MS;

	for (;;) {
		char *v = read_key(xs, t->be, XEN_KEY_TAPDISK_OWNER);
		bool done = v && !strcmp(v, want);

		free(v);
		if (done)
			return 0;
		if (td_ctl_process_gone(pid))
			return tapctl_fail(
				"tapdisk %d exited before it %s %s", pid,
				strcmp(want, "0") ? "took" : "handed over",
				t->be);
		if (td_now_ns() >= deadline)
			return tapctl_fail(
				"tapdisk %d did not %s %s within "
				"%d s: see its log",
				pid, strcmp(want, "0") ? "take" : "hand over",
				t->be, o->timeout_s);
		poll(NULL, 0, POLL_MS);
	}
}

/* Ask tapdisk old to hand the device over; wait until it has. */
static int release_from(struct xs_handle *xs, const struct xen_target *t,
			const struct cmd_opts *o, int old)
{
	char v[32];
	int status;

	if (td_ctl_process_gone(old))
		return tapctl_fail("%s is held by tapdisk %d, which is not "
				   "running: the requests it took cannot be "
				   "resumed; detach the disk and attach it "
				   "again",
				   t->be, old);
	if (!write_key(xs, XBT_NULL, t->be, XEN_KEY_TAPDISK_PID, "0"))
		return tapctl_fail("cannot write %s/%s: %s", t->be,
				   XEN_KEY_TAPDISK_PID, strerror(errno));
	status = wait_owner(xs, t, o, "0", old);
	if (status) {
		/* Give it back: a half-done hand-over helps nobody. */
		snprintf(v, sizeof(v), "%d", old);
		write_key(xs, XBT_NULL, t->be, XEN_KEY_TAPDISK_PID, v);
	}
	return status;
}

/* The device exists: served by tapdisk pid_text, or handed over (0). */
static int take_over(struct xs_handle *xs, const struct xen_target *t,
		     struct cmd_opts *o, const char *pid_text)
{
	uint32_t old;
	char v[32];
	int status;

	if (xen_parse_u32(pid_text, INT32_MAX, &old))
		return tapctl_fail("%s/%s is '%.32s', not a tapdisk id", t->be,
				   XEN_KEY_TAPDISK_PID, pid_text);
	if ((int)old == o->id)
		return tapctl_fail("tapdisk %d serves %s already", o->id,
				   t->be);
	if (old && (status = release_from(xs, t, o, (int)old)))
		return status;
	snprintf(v, sizeof(v), "%d", o->id);
	if (!write_key(xs, XBT_NULL, t->be, XEN_KEY_TAPDISK_PID, v))
		return tapctl_fail("cannot write %s/%s: %s", t->be,
				   XEN_KEY_TAPDISK_PID, strerror(errno));
	if ((status = wait_owner(xs, t, o, v, o->id)))
		return status;
	printf("%s\n", t->be);
	return 0;
}

int tapctl_cmd_release(struct cmd_opts *o)
{
	struct xen_target t;
	struct xs_handle *xs;
	char *pid;
	uint32_t v;
	int status;

	if (!(xs = open_store()))
		return EXIT_FAILURE;
	status = resolve_target(o, xs, false, &t);
	pid = status ? NULL : read_key(xs, t.be, XEN_KEY_TAPDISK_PID);
	if (!status && !pid)
		status = tapctl_fail("domain %s has no disk %s served by a "
				     "tapdisk (no %s)",
				     o->domid, o->vdev, t.be);
	else if (!status &&
		 (xen_parse_u32(pid, INT32_MAX, &v) || (int)v != o->id))
		status = tapctl_fail("%s is served by tapdisk %s, not %d", t.be,
				     pid, o->id);
	if (!status)
		status = release_from(xs, &t, o, o->id);
	free(pid);
	xs_close(xs);
	return status;
}

/* --- attach ------------------------------------------------------------------ */

static int attach(struct xs_handle *xs, const struct xen_target *t,
		  struct cmd_opts *o)
{
	char *pid = read_key(xs, t->be, XEN_KEY_TAPDISK_PID);
	int state, err, status;

	if (pid) {
		status = take_over(xs, t, o, pid);
		free(pid);
		return status;
	}
	if ((status = check_free(xs, t, o)))
		return status;
	err = write_nodes(xs, t, o);
	if (err)
		return tapctl_fail("cannot write the xenstore nodes of %s: %s",
				   t->be, strerror(-err));
	if (wait_state(xs, t->be, o->timeout_s, taken, &state)) {
		xs_rm(xs, XBT_NULL, t->fe);
		xs_rm(xs, XBT_NULL, t->be);
		return tapctl_fail("tapdisk %d did not take %s within %d s "
				   "(state %d); nodes removed: see its log",
				   o->id, t->be, o->timeout_s, state);
	}
	printf("%s\n", t->be);
	return 0;
}

int tapctl_cmd_attach(struct cmd_opts *o)
{
	struct xen_target t;
	struct xs_handle *xs;
	int status;

	if (!o->mode)
		o->mode = "w";
	if (strcmp(o->mode, "r") && strcmp(o->mode, "w"))
		return tapctl_fail("--mode wants r or w, not '%s'", o->mode);
	if (!(xs = open_store()))
		return EXIT_FAILURE;
	status = resolve_target(o, xs, true, &t);
	if (!status && t.read_only_disk && !strcmp(o->mode, "w"))
		status = tapctl_fail("tapdisk %d serves a read-only disk: "
				     "attach it with --mode r",
				     o->id);
	if (!status)
		status = attach(xs, &t, o);
	xs_close(xs);
	return status;
}

/* --- detach ----------------------------------------------------------------- */

static int detach(struct xs_handle *xs, const struct xen_target *t,
		  const struct cmd_opts *o)
{
	char *pid = read_key(xs, t->be, XEN_KEY_TAPDISK_PID);
	uint32_t v;
	int state, status = 0;

	if (!pid)
		return tapctl_fail("domain %s has no disk %s served by a "
				   "tapdisk (no %s)",
				   o->domid, o->vdev, t->be);
	if (t->xl_made)
		status = tapctl_fail("%s was made by xl: detach it with xl "
				     "block-detach in dom0",
				     t->be);
	else if (xen_parse_u32(pid, INT32_MAX, &v) || (int)v != o->id)
		status = tapctl_fail("%s is served by tapdisk %s, not %d",
				     t->be, pid, o->id);
	free(pid);
	if (status)
		return status;
	if (!write_key(xs, XBT_NULL, t->be, "online", "0"))
		return tapctl_fail("cannot write %s/online: %s", t->be,
				   strerror(errno));
	/* Nobody would close it: the guest sees its directory go. */
	if (td_ctl_process_gone(o->id))
		fprintf(stderr,
			"tap-ctl: tapdisk %d is not running: removing %s "
			"without waiting\n",
			o->id, t->be);
	else if (wait_state(xs, t->be, o->timeout_s, closed, &state))
		status = tapctl_fail("%s did not close within %d s (state "
				     "%d; is the disk in use in the guest?); "
				     "removing its nodes anyway",
				     t->be, o->timeout_s, state);
	xs_rm(xs, XBT_NULL, t->fe);
	xs_rm(xs, XBT_NULL, t->be);
	return status;
}

int tapctl_cmd_detach(struct cmd_opts *o)
{
	struct xen_target t;
	struct xs_handle *xs;
	int status;

	if (!(xs = open_store()))
		return EXIT_FAILURE;
	status = resolve_target(o, xs, false, &t);
	if (!status)
		status = detach(xs, &t, o);
	xs_close(xs);
	return status;
}
