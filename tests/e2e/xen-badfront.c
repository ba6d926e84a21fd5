/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xen-badfront.c - a hostile blkif frontend for the e2e test, run in dom0:
 * a real Xen ring (a page shared with libxengnttab's gntshr, an unbound
 * event channel from libxenevtchn, the keys in xenstore) that tapdisk
 * serves, then abuses.
 *
 *   xen-badfront FRONTEND_DIR BACKEND_DIR
 *
 * The case writes both directories (as tap-ctl attach does, but without
 * "virtual-device", so that dom0's own blkfront fails its probe and
 * leaves the device to us).  This program then:
 *   1. connects: state Initialising, waits for the backend's InitWait,
 *      writes ring-ref, event-channel, protocol, state Initialised, waits
 *      for Connected;
 *   2. sends a good read (1 page), a request of 200 segments and a read
 *      past the end of the disk: the first must succeed, the two others be
 *      answered BLKIF_RSP_ERROR with the ring still served;
 *   3. corrupts the ring: req_prod a thousand requests ahead.  The backend
 *      must give the ring up: its state goes to Closing with an "error"
 *      node;
 *   4. closes (state Closed).
 * Prints one line per step; exit status 0 when tapdisk behaved as above.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* First: it sets the interface version the Xen headers below use. */
#include "frontends/blkif/xen-ring.h"

#include <xen/io/xenbus.h>
#include <xenevtchn.h>
#include <xengnttab.h>
#include <xenstore.h>

#define WAIT_MS	   20000
#define POLL_MS	   20
#define PATH_MAX_  256
#define BAD_SEGS   200
#define CORRUPTION 1000u

struct badfront {
	struct xs_handle *xs;
	const char *fe, *be;
	xengntshr_handle *xgs;
	xenevtchn_handle *xce;
	evtchn_port_t port;
	blkif_sring_t *sring;
	blkif_front_ring_t ring;
	void *data;
	uint32_t ring_ref, data_ref;
};

static int fail(const char *what)
{
	printf("badfront: FAIL %s\n", what);
	return 1;
}

static char *rd(struct badfront *b, const char *dir, const char *key)
{
	char path[PATH_MAX_];
	unsigned int len;

	snprintf(path, sizeof(path), "%s/%s", dir, key);
	return xs_read(b->xs, XBT_NULL, path, &len);
}

static int wr(struct badfront *b, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int wr(struct badfront *b, const char *key, const char *fmt, ...)
{
	char path[PATH_MAX_], value[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", b->fe, key);
	return xs_write(b->xs, XBT_NULL, path, value, strlen(value)) ? 0 : -1;
}

static int state_of(struct badfront *b, const char *dir)
{
	char *v = rd(b, dir, "state");
	int s = v ? atoi(v) : -1;

	free(v);
	return s;
}

/* Wait until the backend's state is want; 0 or -1. */
static int wait_backend(struct badfront *b, int want)
{
	for (int t = 0; t < WAIT_MS; t += POLL_MS) {
		if (state_of(b, b->be) == want)
			return 0;
		poll(NULL, 0, POLL_MS);
	}
	return -1;
}

static int setup(struct badfront *b)
{
	b->xgs = xengntshr_open(NULL, 0);
	b->xce = xenevtchn_open(NULL, 0);
	if (!b->xgs || !b->xce)
		return -1;
	/* Granted to domain 0: tapdisk runs here too. */
	b->sring = xengntshr_share_pages(b->xgs, 0, 1, &b->ring_ref, 1);
	b->data = xengntshr_share_pages(b->xgs, 0, 1, &b->data_ref, 1);
	if (!b->sring || !b->data)
		return -1;
	SHARED_RING_INIT(b->sring);
	FRONT_RING_INIT(&b->ring, b->sring, BLKIF_PAGE_SIZE);
	int port = xenevtchn_bind_unbound_port(b->xce, 0);
	if (port < 0)
		return -1;
	b->port = (evtchn_port_t)port;
	return 0;
}

/* Steps of blkfront's talk_to_blkback. */
static int connect_ring(struct badfront *b)
{
	/*
	 * dom0's blkfront probes the new directory and fails (no
	 * virtual-device), leaving the frontend Closing.  Close it and start
	 * over from Closed, as a frontend that reconnects does.
	 */
	for (int t = 0; t < 3000; t += POLL_MS) {
		int s = state_of(b, b->fe);

		if (s == XenbusStateClosing || s == XenbusStateClosed)
			break;
		poll(NULL, 0, POLL_MS);
	}
	/* The backend goes Closed, then InitWait for a frontend to come. */
	if (wr(b, "state", "%d", XenbusStateClosed) ||
	    wait_backend(b, XenbusStateInitWait))
		return -1;
	if (wr(b, "state", "%d", XenbusStateInitialising))
		return -1;
	if (wait_backend(b, XenbusStateInitWait))
		return -1;
	if (wr(b, "ring-ref", "%" PRIu32, b->ring_ref) ||
	    wr(b, "event-channel", "%u", b->port) ||
	    wr(b, "protocol", "%s", XEN_IO_PROTO_ABI_NATIVE) ||
	    wr(b, "state", "%d", XenbusStateInitialised))
		return -1;
	return wait_backend(b, XenbusStateConnected);
}

/* Queue a read of one page at sector; nr_segments as given (a lie when
 * above 11: only one descriptor is filled). */
static void queue_read(struct badfront *b, uint64_t id, uint64_t sector,
		       uint8_t nr_segments)
{
	blkif_request_t *req =
		RING_GET_REQUEST(&b->ring, b->ring.req_prod_pvt++);

	memset(req, 0, sizeof(*req));
	req->operation = BLKIF_OP_READ;
	req->nr_segments = nr_segments;
	req->id = id;
	req->sector_number = sector;
	req->seg[0].gref = b->data_ref;
	req->seg[0].first_sect = 0;
	req->seg[0].last_sect = 7;
}

static void push(struct badfront *b)
{
	int notify;

	RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&b->ring, notify);
	(void)notify; /* a first notification is always due */
	xenevtchn_notify(b->xce, b->port);
}

/* Collect n responses into status[id]; 0 or -1 on timeout. */
static int collect(struct badfront *b, int n, int16_t *status, int max_id)
{
	for (int t = 0; t < WAIT_MS && n > 0; t += POLL_MS) {
		RING_IDX prod = *(volatile RING_IDX *)&b->sring->rsp_prod;

		xen_rmb();
		while (b->ring.rsp_cons != prod && n > 0) {
			blkif_response_t *rsp =
				RING_GET_RESPONSE(&b->ring, b->ring.rsp_cons++);
			if (rsp->id < (uint64_t)max_id)
				status[rsp->id] = rsp->status;
			n--;
		}
		if (n > 0)
			poll(NULL, 0, POLL_MS);
	}
	return n ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct badfront b = {0};
	int16_t status[3] = {99, 99, 99};
	char *sectors, *err;
	uint64_t nr_sectors;

	if (argc != 3) {
		fprintf(stderr, "usage: xen-badfront FRONTEND_DIR "
				"BACKEND_DIR\n");
		return 2;
	}
	b.fe = argv[1];
	b.be = argv[2];
	if (!(b.xs = xs_open(0)))
		return fail("xs_open");
	if (setup(&b))
		return fail("cannot share pages or bind an event channel");
	if (connect_ring(&b))
		return fail("the backend did not connect");
	printf("badfront: connected, ring-ref %" PRIu32 ", port %u\n",
	       b.ring_ref, b.port);
	sectors = rd(&b, b.be, "sectors");
	nr_sectors = sectors ? strtoull(sectors, NULL, 10) : 0;
	free(sectors);

	queue_read(&b, 0, 0, 1);
	queue_read(&b, 1, 0, BAD_SEGS);
	queue_read(&b, 2, nr_sectors, 1);
	push(&b);
	if (collect(&b, 3, status, 3))
		return fail("no answer to the three requests");
	printf("badfront: good read %d, %d segments %d, past the end %d\n",
	       status[0], BAD_SEGS, status[1], status[2]);
	if (status[0] != BLKIF_RSP_OKAY || status[1] != BLKIF_RSP_ERROR ||
	    status[2] != BLKIF_RSP_ERROR)
		return fail("wrong answers");

	/* A producer index a thousand requests ahead of the responses. */
	b.sring->req_prod = b.ring.req_prod_pvt + CORRUPTION;
	xen_wmb();
	xenevtchn_notify(b.xce, b.port);
	if (wait_backend(&b, XenbusStateClosing))
		return fail("the backend did not give the ring up");
	err = rd(&b, b.be, "error");
	printf("badfront: ring given up, backend error: %s\n",
	       err ? err : "(none)");
	if (!err)
		return fail("no error node");
	free(err);
	wr(&b, "state", "%d", XenbusStateClosed);
	wait_backend(&b, XenbusStateClosed);
	printf("badfront: closed\n");
	return 0;
}
