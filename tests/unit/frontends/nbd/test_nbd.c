/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nbd.c - the NBD server, driven deterministically: the client end of
 * a socketpair() talks to the server while the test runs the event loop
 * with td_loop_run_once.  The vbd sits on "ram", a memory-backed driver
 * defined here that can hold requests (to keep I/O in flight) and fail
 * them with a chosen errno.
 *
 * Expected values are written out by hand: wire bytes, error tables,
 * flags.  Protocol constants come from the specification, not from the
 * code under test, wherever a literal reads as clearly.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "frontends/nbd/nbd-int.h"
#include "tapdisk/vbd.h"

/* --- "ram": a memory disk ------------------------------------------------ */

#define RAM_SIZE     (1u << 20)
#define RAM_MAX_HELD 256

static struct {
	uint32_t features;
	bool hold;
	int fail[TD_OP_COUNT]; /* complete every request of op with this */
	unsigned int count[TD_OP_COUNT];
	uint32_t last_flags[TD_OP_COUNT];
	struct td_request *held[RAM_MAX_HELD];
	unsigned int nr_held;
	/* base:allocation: these extents, repeated to the end of the range;
	 * "qemu:dirty-bitmap:b0" when bitmap is set: all dirty. */
	struct td_extent ext[4];
	unsigned int nr_ext;
	bool bitmap;
	int bs_fail; /* block_status answers this */
	uint64_t bs_sector, bs_nr_sectors;
	uint8_t data[RAM_SIZE];
} ram;

static void ram_reset(void)
{
	memset(&ram, 0, sizeof(ram));
	ram.features = TD_FEAT_FLUSH | TD_FEAT_FUA | TD_FEAT_DISCARD |
		       TD_FEAT_WRITE_ZEROES;
}

static int ram_open(struct td_driver *drv, const char *args)
{
	drv->info.size_sectors = RAM_SIZE >> TD_SECTOR_SHIFT;
	drv->info.sector_size = TD_SECTOR_SIZE;
	drv->info.features = ram.features;
	return 0;
}

static void ram_close(struct td_driver *drv)
{
}

static void ram_do(struct td_request *req)
{
	uint8_t *p = ram.data + (req->sector << TD_SECTOR_SHIFT);

	for (int i = 0; i < req->iovcnt; i++) {
		if (req->op == TD_OP_READ)
			memcpy(req->iov[i].iov_base, p, req->iov[i].iov_len);
		else
			memcpy(p, req->iov[i].iov_base, req->iov[i].iov_len);
		p += req->iov[i].iov_len;
	}
	if (req->op == TD_OP_DISCARD || req->op == TD_OP_WRITE_ZEROES)
		memset(p, 0, td_request_bytes(req));
}

static int ram_submit(struct td_driver *drv, struct td_request *req)
{
	ram.count[req->op]++;
	ram.last_flags[req->op] = req->flags;
	if (ram.fail[req->op]) {
		td_complete(req, ram.fail[req->op]);
		return 0;
	}
	if (ram.hold) {
		assert_true(ram.nr_held < RAM_MAX_HELD);
		ram.held[ram.nr_held++] = req;
		return 0;
	}
	ram_do(req);
	td_complete(req, 0);
	return 0;
}

static void ram_release(void)
{
	for (unsigned int i = 0; i < ram.nr_held; i++) {
		ram_do(ram.held[i]);
		td_complete(ram.held[i], 0);
	}
	ram.nr_held = 0;
	ram.hold = false;
}

static int ram_block_status(struct td_driver *drv, const char *ctx,
			    uint64_t sector, uint64_t nr_sectors,
			    struct td_extent *ext, unsigned int *nr)
{
	unsigned int n = 0;

	ram.bs_sector = sector;
	ram.bs_nr_sectors = nr_sectors;
	if (ram.bs_fail)
		return ram.bs_fail;
	if (ram.bitmap && !strcmp(ctx, "qemu:dirty-bitmap:b0")) {
		ext[0].nr_sectors = nr_sectors;
		ext[0].flags = TD_EXTENT_DIRTY;
		*nr = 1;
		return 0;
	}
	if (strcmp(ctx, TD_CTX_BASE_ALLOCATION) || !ram.nr_ext)
		return -ENOENT;
	for (uint64_t left = nr_sectors; left && n < *nr; n++) {
		ext[n] = ram.ext[n % ram.nr_ext];
		if (ext[n].nr_sectors > left)
			ext[n].nr_sectors = left;
		left -= ext[n].nr_sectors;
	}
	*nr = n;
	return 0;
}

static void ram_list_contexts(struct td_driver *drv,
			      void (*add)(const char *name, void *opaque),
			      void *opaque)
{
	if (ram.bitmap)
		add("qemu:dirty-bitmap:b0", opaque);
}

static const struct td_driver_ops ram_ops = {
	.name = "ram",
	.open = ram_open,
	.close = ram_close,
	.submit = ram_submit,
	.block_status = ram_block_status,
	.list_contexts = ram_list_contexts,
};

static const struct td_driver_ops *const ram_table[] = {&ram_ops, NULL};

/* --- environment: loop, vbd, server, one client -------------------------- */

struct env {
	struct td_loop *loop;
	struct td_vbd *vbd;
	struct td_nbd_server *srv;
	int cfd; /* the client's end */
	bool done;
};

/* Loop, vbd and server, no client. */
static void env_open(struct env *e, const struct td_nbd_params *params,
		     bool read_only)
{
	struct td_vbd_params vp = {
		.name = "nbdtest",
		.chain = "ram",
		.read_only = read_only,
	};

	memset(e, 0, sizeof(*e));
	e->cfd = -1;
	assert_int_equal(td_loop_create(&e->loop), 0);
	assert_int_equal(td_vbd_open(e->loop, ram_table, &vp, &e->vbd), 0);
	assert_int_equal(td_nbd_server_create(e->loop, e->vbd, params, &e->srv),
			 0);
}

/* A new client over a socketpair; returns its end (non-blocking). */
static int env_client(struct env *e)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(td_nbd_server_add_client(e->srv, sv[0], "test"), 0);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	return sv[1];
}

static void env_start(struct env *e, const struct td_nbd_params *params,
		      bool read_only)
{
	env_open(e, params, read_only);
	e->cfd = env_client(e);
}

static void pump(struct env *e, int passes)
{
	for (int i = 0; i < passes; i++)
		assert_int_equal(td_loop_run_once(e->loop, 0), 0);
}

static void env_done(void *opaque)
{
	struct env *e = opaque;

	assert_false(e->done); /* exactly once */
	e->done = true;
}

static void env_stop(struct env *e)
{
	if (e->cfd >= 0)
		close(e->cfd);
	ram_release();
	td_frontend_shutdown(td_nbd_server_frontend(e->srv), env_done, e);
	assert_false(e->done); /* never from inside the call */
	for (int i = 0; i < 1000 && !e->done; i++)
		td_loop_run_once(e->loop, 1);
	assert_true(e->done);
	td_frontend_destroy(td_nbd_server_frontend(e->srv));
	assert_int_equal(td_vbd_close(e->vbd), 0);
	td_loop_destroy(e->loop);
}

static struct nbd_conn *env_conn(struct env *e)
{
	return TAILQ_FIRST(&e->srv->conns);
}

static struct td_nbd_stats env_stats(struct env *e)
{
	struct td_nbd_stats st;

	td_nbd_server_get_stats(e->srv, &st);
	return st;
}

/* --- client side -------------------------------------------------------------- */

/* 0: got n bytes; -1: end of stream; -2: nothing more came. */
static int cl_recv(struct env *e, void *buf, size_t n)
{
	size_t got = 0;

	for (int i = 0; i < 3000 && got < n; i++) {
		ssize_t r =
			recv(e->cfd, (char *)buf + got, n - got, MSG_DONTWAIT);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return -1;
		assert_int_equal(td_loop_run_once(e->loop, 1), 0);
	}
	return got == n ? 0 : -2;
}

static void cl_send(struct env *e, const void *buf, size_t n)
{
	size_t sent = 0;

	for (int i = 0; i < 100000 && sent < n; i++) {
		ssize_t r = send(e->cfd, (const char *)buf + sent, n - sent,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r > 0)
			sent += (size_t)r;
		else
			pump(e, 1);
	}
	assert_int_equal(sent, n);
}

/* The server closes without sending anything more. */
static void cl_expect_eof(struct env *e)
{
	uint8_t b;

	assert_int_equal(cl_recv(e, &b, 1), -1);
}

static void cl_greeting(struct env *e, uint32_t client_flags)
{
	static const uint8_t want[18] = {'N', 'B', 'D', 'M', 'A',  'G',
					 'I', 'C', 'I', 'H', 'A',  'V',
					 'E', 'O', 'P', 'T', 0x00, 0x03};
	uint8_t got[18], flags[4];

	assert_int_equal(cl_recv(e, got, sizeof(got)), 0);
	assert_memory_equal(got, want, sizeof(want));
	nbd_put32(flags, client_flags);
	cl_send(e, flags, sizeof(flags));
}

static void cl_opt(struct env *e, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t hdr[16];

	nbd_put64(hdr, 0x49484156454f5054ull); /* IHAVEOPT */
	nbd_put32(hdr + 8, opt);
	nbd_put32(hdr + 12, len);
	cl_send(e, hdr, sizeof(hdr));
	if (len)
		cl_send(e, data, len);
}

struct opt_reply {
	uint32_t opt, type, len;
	uint8_t data[8192];
};

static void cl_opt_reply(struct env *e, struct opt_reply *r)
{
	uint8_t hdr[20];

	assert_int_equal(cl_recv(e, hdr, sizeof(hdr)), 0);
	assert_int_equal(nbd_get64(hdr), 0x0003e889045565a9ull);
	r->opt = nbd_get32(hdr + 8);
	r->type = nbd_get32(hdr + 12);
	r->len = nbd_get32(hdr + 16);
	assert_true(r->len <= sizeof(r->data));
	if (r->len)
		assert_int_equal(cl_recv(e, r->data, r->len), 0);
}

struct go_result {
	uint32_t final; /* NBD_REP_ACK or an error */
	uint64_t size;
	uint16_t tflags;
	uint32_t min, pref, max;
	int nr_info;
};

/* GO or INFO for name, asking for NBD_INFO_BLOCK_SIZE. */
static void cl_go(struct env *e, uint32_t opt, const char *name,
		  struct go_result *g)
{
	uint8_t body[64];
	size_t nlen = strlen(name);
	struct opt_reply r;

	nbd_put32(body, (uint32_t)nlen);
	memcpy(body + 4, name, nlen);
	nbd_put16(body + 4 + nlen, 1);
	nbd_put16(body + 6 + nlen, 3); /* NBD_INFO_BLOCK_SIZE */
	cl_opt(e, opt, body, (uint32_t)(8 + nlen));
	memset(g, 0, sizeof(*g));
	for (;;) {
		cl_opt_reply(e, &r);
		assert_int_equal(r.opt, opt);
		if (r.type != 3) { /* NBD_REP_INFO */
			g->final = r.type;
			return;
		}
		g->nr_info++;
		if (nbd_get16(r.data) == 0) { /* NBD_INFO_EXPORT */
			assert_int_equal(r.len, 12);
			g->size = nbd_get64(r.data + 2);
			g->tflags = nbd_get16(r.data + 10);
		} else if (nbd_get16(r.data) == 3) {
			assert_int_equal(r.len, 14);
			g->min = nbd_get32(r.data + 2);
			g->pref = nbd_get32(r.data + 6);
			g->max = nbd_get32(r.data + 10);
		}
	}
}

/* GO to transmission; returns the transmission flags. */
static uint16_t cl_go_ok(struct env *e)
{
	struct go_result g;

	cl_go(e, 7, "", &g);
	assert_int_equal(g.final, 1); /* NBD_REP_ACK */
	return g.tflags;
}

/* The whole handshake; returns the transmission flags. */
static uint16_t cl_connect(struct env *e)
{
	cl_greeting(e, 3);
	return cl_go_ok(e);
}

static void cl_req(struct env *e, uint16_t flags, uint16_t type,
		   uint64_t handle, uint64_t offset, uint32_t len)
{
	uint8_t hdr[28];

	nbd_put32(hdr, 0x25609513u);
	nbd_put16(hdr + 4, flags);
	nbd_put16(hdr + 6, type);
	nbd_put64(hdr + 8, handle);
	nbd_put64(hdr + 16, offset);
	nbd_put32(hdr + 24, len);
	cl_send(e, hdr, sizeof(hdr));
}

/* Read one simple reply; returns its error, checks the handle. */
static uint32_t cl_reply(struct env *e, uint64_t handle)
{
	uint8_t r[16];

	assert_int_equal(cl_recv(e, r, sizeof(r)), 0);
	assert_int_equal(nbd_get32(r), 0x67446698u);
	assert_int_equal(nbd_get64(r + 8), handle);
	return nbd_get32(r + 4);
}

/* Any handle: for out-of-order replies. */
static uint64_t cl_reply_any(struct env *e, uint32_t *err)
{
	uint8_t r[16];

	assert_int_equal(cl_recv(e, r, sizeof(r)), 0);
	assert_int_equal(nbd_get32(r), 0x67446698u);
	*err = nbd_get32(r + 4);
	return nbd_get64(r + 8);
}

static uint32_t cl_write(struct env *e, uint16_t flags, uint64_t handle,
			 uint64_t offset, const void *data, uint32_t len)
{
	cl_req(e, flags, 1, handle, offset, len);
	cl_send(e, data, len);
	return cl_reply(e, handle);
}

static uint32_t cl_read(struct env *e, uint64_t handle, uint64_t offset,
			void *data, uint32_t len)
{
	uint32_t err;

	cl_req(e, 0, 0, handle, offset, len);
	err = cl_reply(e, handle);
	if (!err)
		assert_int_equal(cl_recv(e, data, len), 0);
	return err;
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed + (i >> 9));
}

/* --- handshake ---------------------------------------------------------------- */

static void test_go(void **state)
{
	struct env e;
	struct go_result g;
	uint8_t buf[4096];

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	cl_go(&e, 7 /* GO */, "anything", &g);
	assert_int_equal(g.final, 1);
	assert_int_equal(g.nr_info, 2);
	assert_true(g.size == RAM_SIZE);
	assert_int_equal(g.tflags, 0x16d);
	assert_int_equal(g.min, 512);
	assert_int_equal(g.pref, 4096);
	assert_int_equal(g.max, 32u << 20);
	assert_int_equal(env_stats(&e).clients, 1);
	/* In transmission: a command is served. */
	assert_int_equal(cl_read(&e, 1, 0, buf, sizeof(buf)), 0);
	env_stop(&e);
}

static void test_info_then_go(void **state)
{
	struct td_nbd_params p = {.max_request_bytes = 1u << 20};
	struct env e;
	struct go_result g;

	env_start(&e, &p, false);
	cl_greeting(&e, 1);
	cl_go(&e, 6 /* INFO */, "", &g);
	assert_int_equal(g.final, 1);
	assert_int_equal(g.max, 1u << 20);
	assert_true(g.size == RAM_SIZE);
	/* INFO stays in the handshake: GO is still accepted. */
	cl_go(&e, 7, "", &g);
	assert_int_equal(g.final, 1);
	assert_int_equal(g.tflags, 0x16d);
	assert_int_equal(cl_write(&e, 0, 9, 0, ram.data, 512), 0);
	env_stop(&e);
}

static void export_name_case(uint32_t client_flags, size_t want_len)
{
	struct env e;
	uint8_t reply[134], want[134] = {0, 0, 0, 0, 0, 0x10, 0, 0, 1, 0x6d};
	uint8_t data[512];

	env_start(&e, NULL, false);
	cl_greeting(&e, client_flags);
	cl_opt(&e, 1 /* EXPORT_NAME */, "x", 1);
	assert_int_equal(cl_recv(&e, reply, want_len), 0);
	assert_memory_equal(reply, want, want_len);
	/* The stream is in step: the next bytes are a simple reply. */
	assert_int_equal(cl_read(&e, 77, 512, data, sizeof(data)), 0);
	env_stop(&e);
}

static void test_export_name(void **state)
{
	export_name_case(1, 134); /* with the 124 zeroes */
	export_name_case(3, 10);  /* NBD_FLAG_C_NO_ZEROES */
}

static void test_list(void **state)
{
	struct td_nbd_params p = {.export_name = "disk0"};
	struct env e;
	struct opt_reply r;
	struct go_result g;

	env_start(&e, &p, false);
	cl_greeting(&e, 3);
	cl_opt(&e, 3 /* LIST */, NULL, 0);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 2); /* NBD_REP_SERVER */
	assert_int_equal(r.len, 9);
	assert_memory_equal(r.data, "\0\0\0\5disk0", 9);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 1);
	assert_int_equal(r.len, 0);
	/* LIST with data is invalid. */
	cl_opt(&e, 3, "zz", 2);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	/* Named export: other names are unknown, the right one works. */
	cl_go(&e, 7, "disk1", &g);
	assert_int_equal(g.final, 0x80000006u); /* NBD_REP_ERR_UNKNOWN */
	assert_int_equal(g.nr_info, 0);
	cl_go(&e, 6, "", &g);
	assert_int_equal(g.final, 0x80000006u);
	cl_go(&e, 7, "disk0", &g);
	assert_int_equal(g.final, 1);
	env_stop(&e);
}

static void test_export_name_unknown(void **state)
{
	struct td_nbd_params p = {.export_name = "disk0"};
	struct env e;

	env_start(&e, &p, false);
	cl_greeting(&e, 3);
	cl_opt(&e, 1, "disk1", 5); /* no error reply exists: closed */
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).clients, 0);
	env_stop(&e);
}

static void test_abort(void **state)
{
	struct env e;
	struct opt_reply r;

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	cl_opt(&e, 2 /* ABORT */, "ignored", 7);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.opt, 2);
	assert_int_equal(r.type, 1);
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

/* ABORT and an immediate close (libnbd does this): a clean goodbye. */
static void test_abort_and_close(void **state)
{
	struct env e;

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	pump(&e, 2);
	cl_opt(&e, 2, NULL, 0);
	close(e.cfd);
	e.cfd = -1;
	pump(&e, 5);
	assert_int_equal(env_stats(&e).clients, 0);
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

static void test_unsupported_options(void **state)
{
	/* EXTENDED_HEADERS, STARTTLS, PEEK_EXPORT, 0 and two that do not
	 * exist. */
	static const uint32_t opts[] = {11, 5, 4, 0, 1234, 0xffffffffu};
	struct env e;
	struct opt_reply r;

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		cl_opt(&e, opts[i], "abc", 3);
		cl_opt_reply(&e, &r);
		assert_int_equal(r.opt, opts[i]);
		assert_int_equal(r.type, 0x80000001u); /* NBD_REP_ERR_UNSUP */
	}
	assert_int_equal(cl_go_ok(&e), 0x16d);
	env_stop(&e);
}

/* --- structured replies, metadata contexts, BLOCK_STATUS ---------------------- */

/* STRUCTURED_REPLY (8): NBD_REP_ACK. */
static void cl_structured(struct env *e)
{
	struct opt_reply r;

	cl_opt(e, 8, NULL, 0);
	cl_opt_reply(e, &r);
	assert_int_equal(r.opt, 8);
	assert_int_equal(r.type, 1);
	assert_int_equal(r.len, 0);
}

/* LIST (9) or SET (10) META_CONTEXT for the export "" with queries;
 * the names replied go to names[] (ids to ids[]); returns the final
 * reply type. */
static uint32_t cl_meta(struct env *e, uint32_t opt, uint32_t nr,
			const char *const *queries, char names[][64],
			uint32_t *ids, int *nr_names)
{
	uint8_t body[1024];
	uint32_t pos = 8;
	struct opt_reply r;

	nbd_put32(body, 0);
	nbd_put32(body + 4, nr);
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t q = (uint32_t)strlen(queries[i]);

		nbd_put32(body + pos, q);
		memcpy(body + pos + 4, queries[i], q);
		pos += 4 + q;
	}
	cl_opt(e, opt, body, pos);
	*nr_names = 0;
	for (;;) {
		cl_opt_reply(e, &r);
		assert_int_equal(r.opt, opt);
		if (r.type != 4) /* NBD_REP_META_CONTEXT */
			return r.type;
		assert_true(r.len > 4 && r.len < 4 + 64);
		ids[*nr_names] = nbd_get32(r.data);
		memcpy(names[*nr_names], r.data + 4, r.len - 4);
		names[(*nr_names)++][r.len - 4] = '\0';
	}
}

/* One structured chunk header: returns its type, checks the handle. */
static uint16_t cl_chunk(struct env *e, uint64_t handle, uint16_t *flags,
			 uint32_t *len)
{
	uint8_t h[20];

	assert_int_equal(cl_recv(e, h, sizeof(h)), 0);
	assert_int_equal(nbd_get32(h), 0x668e33efu);
	assert_int_equal(nbd_get64(h + 8), handle);
	*flags = nbd_get16(h + 4);
	*len = nbd_get32(h + 16);
	return nbd_get16(h + 6);
}

/* An ERROR chunk, DONE: returns its error. */
static uint32_t cl_chunk_error(struct env *e, uint64_t handle)
{
	uint8_t b[6];
	uint16_t flags;
	uint32_t len;

	assert_int_equal(cl_chunk(e, handle, &flags, &len), 0x8001);
	assert_int_equal(flags, 1);
	assert_int_equal(len, 6);
	assert_int_equal(cl_recv(e, b, sizeof(b)), 0);
	assert_int_equal(nbd_get16(b + 4), 0); /* no message */
	return nbd_get32(b);
}

static void cl_chunk_none(struct env *e, uint64_t handle)
{
	uint16_t flags;
	uint32_t len;

	assert_int_equal(cl_chunk(e, handle, &flags, &len), 0);
	assert_int_equal(flags, 1);
	assert_int_equal(len, 0);
}

static void test_structured_replies(void **state)
{
	static uint8_t out[8192], in[8192];
	uint8_t off[8];
	uint16_t flags;
	uint32_t len;
	struct env e;

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	cl_structured(&e);
	cl_structured(&e); /* twice is harmless */
	assert_int_equal(cl_go_ok(&e), 0x16d);
	fill(out, sizeof(out), 5);
	/* WRITE: a NONE chunk. */
	cl_req(&e, 0, 1, 1, 4096, sizeof(out));
	cl_send(&e, out, sizeof(out));
	cl_chunk_none(&e, 1);
	/* READ: one OFFSET_DATA chunk, DONE. */
	cl_req(&e, 0, 0, 2, 4096, sizeof(in));
	assert_int_equal(cl_chunk(&e, 2, &flags, &len), 1);
	assert_int_equal(flags, 1);
	assert_int_equal(len, 8 + sizeof(in));
	assert_int_equal(cl_recv(&e, off, 8), 0);
	assert_int_equal(nbd_get64(off), 4096);
	assert_int_equal(cl_recv(&e, in, sizeof(in)), 0);
	assert_memory_equal(in, out, sizeof(in));
	/* Refused and failed commands: an ERROR chunk. */
	cl_req(&e, 0, 0, 3, 100, 512);
	assert_int_equal(cl_chunk_error(&e, 3), 22);
	ram.fail[TD_OP_READ] = -EIO;
	cl_req(&e, 0, 0, 4, 0, 512);
	assert_int_equal(cl_chunk_error(&e, 4), 5);
	ram.fail[TD_OP_READ] = 0;
	cl_req(&e, 0, 3 /* FLUSH */, 5, 0, 0);
	cl_chunk_none(&e, 5);
	/* BLOCK_STATUS with no context selected: EINVAL. */
	cl_req(&e, 0, 7, 6, 0, 4096);
	assert_int_equal(cl_chunk_error(&e, 6), 22);
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

/* Without STRUCTURED_REPLY: simple replies as ever, no meta contexts,
 * BLOCK_STATUS refused with a simple EINVAL. */
static void test_simple_client(void **state)
{
	static const char *const q[] = {"base:allocation"};
	char names[4][64];
	uint32_t ids[4];
	uint8_t buf[512];
	int n;
	struct env e;

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	assert_int_equal(cl_meta(&e, 10, 1, q, names, ids, &n), 0x80000003u);
	assert_int_equal(cl_meta(&e, 9, 0, NULL, names, ids, &n), 0x80000003u);
	assert_int_equal(n, 0);
	assert_int_equal(cl_go_ok(&e), 0x16d);
	assert_int_equal(cl_read(&e, 1, 0, buf, sizeof(buf)), 0);
	cl_req(&e, 0, 7, 2, 0, 4096);
	assert_int_equal(cl_reply(&e, 2), 22);
	assert_int_equal(ram.bs_nr_sectors, 0); /* never asked */
	env_stop(&e);
}

static void test_meta_contexts(void **state)
{
	static const char *const set2[] = {"qemu:dirty-bitmap:nosuch",
					   "base:allocation"};
	static const char *const list_ns[] = {"qemu:dirty-bitmap:"};
	static const char *const set_bm[] = {"qemu:dirty-bitmap:b0",
					     "base:allocation", "base:"};
	char names[4][64];
	uint32_t ids[4];
	int n;
	struct env e;

	ram.bitmap = true;
	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	cl_structured(&e);
	/* LIST, no query: every context, ids 0. */
	assert_int_equal(cl_meta(&e, 9, 0, NULL, names, ids, &n), 1);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "base:allocation");
	assert_string_equal(names[1], "qemu:dirty-bitmap:b0");
	assert_int_equal(ids[0], 0);
	/* LIST of a namespace. */
	assert_int_equal(cl_meta(&e, 9, 1, list_ns, names, ids, &n), 1);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "qemu:dirty-bitmap:b0");
	/* SET: the missing bitmap is not selected, no reply for it. */
	assert_int_equal(cl_meta(&e, 10, 2, set2, names, ids, &n), 1);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "base:allocation");
	assert_int_equal(ids[0], 1);
	/* SET again replaces; "base:" names no context for SET. */
	assert_int_equal(cl_meta(&e, 10, 3, set_bm, names, ids, &n), 1);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "base:allocation");
	assert_int_equal(ids[0], 1);
	assert_string_equal(names[1], "qemu:dirty-bitmap:b0");
	assert_int_equal(ids[1], 2);
	assert_int_equal(env_conn(&e)->nr_meta, 2);
	/* A query that matches nothing: an empty selection. */
	assert_int_equal(cl_meta(&e, 10, 1, set2, names, ids, &n), 1);
	assert_int_equal(n, 0);
	assert_int_equal(env_conn(&e)->nr_meta, 0);
	assert_int_equal(cl_go_ok(&e), 0x16d);
	env_stop(&e);
}

/* Hostile meta context requests: an error reply, the client goes on. */
static void test_meta_hostile(void **state)
{
	struct td_nbd_params p = {.export_name = "disk"};
	uint8_t body[1024];
	struct opt_reply r;
	struct go_result g;
	struct env e;

	env_start(&e, &p, false);
	cl_greeting(&e, 3);
	cl_opt(&e, 8, "x", 1); /* STRUCTURED_REPLY takes no data */
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	cl_structured(&e);
	memset(body, 0, sizeof(body));
	nbd_put32(body + 4, 2); /* two queries, none sent */
	cl_opt(&e, 10, body, 8);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	nbd_put32(body + 4, 200); /* 200 empty queries: too many */
	cl_opt(&e, 9, body, 8 + 200 * 4);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000009u);
	nbd_put32(body, 3); /* an export name that is not ours */
	memcpy(body + 4, "foo", 3);
	nbd_put32(body + 7, 0);
	cl_opt(&e, 9, body, 11);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000006u); /* NBD_REP_ERR_UNKNOWN */
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	cl_opt(&e, 10, body, 3); /* shorter than its header */
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	/* Longer than NBD_OPT_MAX_DATA_BYTES: skipped, TOO_BIG. */
	{
		static uint8_t big[9000];

		cl_opt(&e, 10, big, sizeof(big));
		cl_opt_reply(&e, &r);
		assert_int_equal(r.type, 0x80000009u);
	}
	cl_go(&e, 7, "disk", &g);
	assert_int_equal(g.final, 1);
	env_stop(&e);
}

/* One BLOCK_STATUS chunk: id, then extents as (length, flags) pairs. */
static void cl_bs_chunk(struct env *e, uint64_t handle, uint16_t want_flags,
			uint32_t want_id, const uint32_t *want, uint32_t nr)
{
	uint8_t b[4 + 256 * 8];
	uint16_t flags;
	uint32_t len;

	assert_int_equal(cl_chunk(e, handle, &flags, &len), 5);
	assert_int_equal(flags, want_flags);
	assert_int_equal(len, 4 + 8 * nr);
	assert_int_equal(cl_recv(e, b, len), 0);
	assert_int_equal(nbd_get32(b), want_id);
	for (uint32_t i = 0; i < nr; i++) {
		if (nbd_get32(b + 4 + 8 * i) != want[2 * i] ||
		    nbd_get32(b + 8 + 8 * i) != want[2 * i + 1])
			fail_msg("extent %u: %u/%u, want %u/%u", i,
				 nbd_get32(b + 4 + 8 * i),
				 nbd_get32(b + 8 + 8 * i), want[2 * i],
				 want[2 * i + 1]);
	}
}

static void test_block_status(void **state)
{
	static const char *const both[] = {"base:allocation",
					   "qemu:dirty-bitmap:b0"};
	static const uint32_t three[] = {8192, 0, 4096, 3, 4096, 0};
	static const uint32_t one[] = {8192, 0};
	static const uint32_t dirty[] = {16384, 1};
	static const uint32_t tail[] = {512, 0};
	static const uint32_t dirty_tail[] = {512, 1};
	static uint32_t many[128 * 2];
	char names[4][64];
	uint32_t ids[4];
	int n;
	struct env e;

	ram.bitmap = true;
	ram.ext[0] = (struct td_extent){16, 0}; /* 8 KiB data */
	ram.ext[1] = (struct td_extent){8, 3};	/* 4 KiB hole, zero */
	ram.nr_ext = 2;
	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	cl_structured(&e);
	assert_int_equal(cl_meta(&e, 10, 2, both, names, ids, &n), 1);
	assert_int_equal(n, 2);
	assert_int_equal(cl_go_ok(&e), 0x16d);

	/* One chunk per context, in id order, the last DONE. */
	cl_req(&e, 0, 7, 1, 0, 16384);
	cl_bs_chunk(&e, 1, 0, 1, three, 3);
	cl_bs_chunk(&e, 1, 1, 2, dirty, 1);
	assert_int_equal(ram.bs_sector, 0);
	assert_int_equal(ram.bs_nr_sectors, 32);
	/* REQ_ONE: one extent each. */
	cl_req(&e, 0x8, 7, 2, 0, 16384);
	cl_bs_chunk(&e, 2, 0, 1, one, 1);
	cl_bs_chunk(&e, 2, 1, 2, dirty, 1);
	/* Past the end: cut at the last sector. */
	cl_req(&e, 0, 7, 3, RAM_SIZE - 512, 65536);
	cl_bs_chunk(&e, 3, 0, 1, tail, 1);
	cl_bs_chunk(&e, 3, 1, 2, dirty_tail, 1);
	assert_int_equal(ram.bs_nr_sectors, 1);
	/* At most 128 extents in a chunk: the client asks again. */
	for (int i = 0; i < 128; i++) {
		many[2 * i] = i % 2 ? 4096 : 8192;
		many[2 * i + 1] = i % 2 ? 3 : 0;
	}
	cl_req(&e, 0, 7, 4, 0, RAM_SIZE);
	cl_bs_chunk(&e, 4, 0, 1, many, 128);
	cl_bs_chunk(&e, 4, 1, 2, (const uint32_t[]){RAM_SIZE, 1}, 1);
	/* Refused: offset at the end, bad flags, unaligned. */
	cl_req(&e, 0, 7, 5, RAM_SIZE, 512);
	assert_int_equal(cl_chunk_error(&e, 5), 22);
	cl_req(&e, 0x1, 7, 6, 0, 512);
	assert_int_equal(cl_chunk_error(&e, 6), 22);
	cl_req(&e, 0, 7, 7, 1, 512);
	assert_int_equal(cl_chunk_error(&e, 7), 22);
	/* A driver that fails: EIO, and the connection goes on. */
	ram.bs_fail = -EIO;
	cl_req(&e, 0, 7, 8, 0, 4096);
	assert_int_equal(cl_chunk_error(&e, 8), 5);
	ram.bs_fail = 0;
	cl_req(&e, 0, 7, 9, 0, 8192);
	cl_bs_chunk(&e, 9, 0, 1, one, 1);
	cl_bs_chunk(&e, 9, 1, 2, (const uint32_t[]){8192, 1}, 1);
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

/* The smallest largest request (4 KiB) still holds a chunk of 128
 * sector-sized extents. */
static void test_block_status_small_buffer(void **state)
{
	static const char *const q[] = {"base:allocation"};
	struct td_nbd_params p = {.max_request_bytes = 4096};
	static uint32_t want[128 * 2];
	char names[4][64];
	uint32_t ids[4];
	int n;
	struct env e;

	ram.ext[0] = (struct td_extent){1, 0};
	ram.ext[1] = (struct td_extent){1, 3};
	ram.nr_ext = 2;
	env_start(&e, &p, false);
	cl_greeting(&e, 3);
	cl_structured(&e);
	assert_int_equal(cl_meta(&e, 10, 1, q, names, ids, &n), 1);
	assert_int_equal(cl_go_ok(&e), 0x16d);
	for (int i = 0; i < 128; i++) {
		want[2 * i] = 512;
		want[2 * i + 1] = i % 2 ? 3 : 0;
	}
	cl_req(&e, 0, 7, 1, 0, 1u << 20);
	cl_bs_chunk(&e, 1, 1, 1, want, 128);
	env_stop(&e);
}

/* --- hostile handshakes ------------------------------------------------------- */

static void test_bad_client_flags(void **state)
{
	struct env e;

	env_start(&e, NULL, false);
	cl_greeting(&e, 0x4); /* a flag the server did not offer */
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	assert_int_equal(env_stats(&e).clients, 0);
	env_stop(&e);
}

static void test_bad_option_magic(void **state)
{
	FILE *log = tmpfile();
	char text[4096] = "";
	struct env e;

	td_log_set_stream(log);
	td_log_set_level(TD_LOG_WARN);
	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	cl_send(&e, "IHAVEOPX\0\0\0\7\0\0\0\0", 16);
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
	td_log_set_stream(NULL);
	rewind(log);
	fread(text, 1, sizeof(text) - 1, log);
	fclose(log);
	/* Logged through the vbd's logger: its name and the reason. */
	assert_non_null(strstr(text, "[nbdtest]"));
	assert_non_null(strstr(text, "bad option magic"));
}

static void test_garbage(void **state)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct env e;
	uint8_t g[18];

	env_start(&e, NULL, false);
	assert_int_equal(cl_recv(&e, g, sizeof(g)), 0);
	cl_send(&e, http, sizeof(http) - 1);
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
}

static void test_truncated_handshake(void **state)
{
	struct env e;
	uint8_t hdr[16];

	/* Half the client flags, then end of stream. */
	env_start(&e, NULL, false);
	cl_send(&e, "\0\0", 2);
	shutdown(e.cfd, SHUT_WR);
	pump(&e, 5);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	assert_int_equal(env_stats(&e).clients, 0);
	env_stop(&e);

	/* An option announcing 100 bytes of data, and 50 of them. */
	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	nbd_put64(hdr, 0x49484156454f5054ull);
	nbd_put32(hdr + 8, 7);
	nbd_put32(hdr + 12, 100);
	cl_send(&e, hdr, sizeof(hdr));
	cl_send(&e, ram.data, 50);
	shutdown(e.cfd, SHUT_WR);
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
}

static void test_oversized_options(void **state)
{
	static uint8_t big[1u << 20];
	struct env e;
	struct opt_reply r;

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	/* Skipped in pieces, not buffered: then refused. */
	cl_opt(&e, 7 /* GO */, big, 100000);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000009u); /* NBD_REP_ERR_TOO_BIG */
	cl_opt(&e, 4242, big, sizeof(big));
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000001u);
	cl_opt(&e, 3 /* LIST */, big, 9000);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u); /* invalid: LIST takes none */
	assert_int_equal(cl_go_ok(&e), 0x16d);
	env_stop(&e);

	/* EXPORT_NAME cannot be refused with a reply: disconnected. */
	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	cl_opt(&e, 1, big, 10000);
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
}

static void test_go_malformed(void **state)
{
	static uint8_t body[4 + 4097 + 2];
	struct env e;
	struct opt_reply r;

	env_start(&e, NULL, false);
	cl_greeting(&e, 3);
	/* Name length past the data. */
	cl_opt(&e, 7,
	       "\0\0\0\x09"
	       "ab\0\0",
	       8);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	/* Two information requests announced, one sent. */
	cl_opt(&e, 7, "\0\0\0\0\0\2\0\3", 8);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	/* A name over the protocol's 4096 bytes. */
	memset(body, 'n', sizeof(body));
	nbd_put32(body, 4097);
	nbd_put16(body + 4 + 4097, 0);
	cl_opt(&e, 6, body, sizeof(body));
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	/* Too short for even a name length. */
	cl_opt(&e, 6, "\0\0", 2);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000003u);
	assert_int_equal(cl_go_ok(&e), 0x16d);
	env_stop(&e);
}

static void test_handshake_timeout(void **state)
{
	struct td_nbd_params p = {.handshake_timeout_ms = 30};
	struct env e;
	uint8_t g[18], b;
	int r = -2;

	env_start(&e, &p, false);
	assert_int_equal(cl_recv(&e, g, sizeof(g)), 0);
	for (int i = 0; i < 200 && r == -2; i++) {
		td_loop_run_once(e.loop, 5);
		r = (int)recv(e.cfd, &b, 1, MSG_DONTWAIT);
		r = r < 0 ? -2 : r;
	}
	assert_int_equal(r, 0); /* closed, nothing sent */
	assert_int_equal(env_stats(&e).timed_out, 1);
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

/* Options sent without reading the replies: reading stops, nothing lost. */
static void test_option_flood(void **state)
{
	static char name[4001];
	struct td_nbd_params p = {.export_name = name};
	struct env e;
	struct opt_reply r;
	struct nbd_conn *conn;
	const int n = 200;

	memset(name, 'a', sizeof(name) - 1);
	env_start(&e, &p, false);
	cl_greeting(&e, 3);
	for (int i = 0; i < n; i++) {
		uint8_t hdr[16];

		nbd_put64(hdr, 0x49484156454f5054ull);
		nbd_put32(hdr + 8, 3);
		nbd_put32(hdr + 12, 0);
		if (send(e.cfd, hdr, sizeof(hdr), MSG_DONTWAIT) != 16)
			break;
	}
	pump(&e, 50);
	conn = env_conn(&e);
	assert_non_null(conn);
	assert_true(conn->blocked);
	assert_false(conn->fde.events & EPOLLIN);
	for (int i = 0; i < n; i++) {
		cl_opt_reply(&e, &r);
		assert_int_equal(r.type, 2);
		assert_int_equal(r.len, 4 + 4000);
		cl_opt_reply(&e, &r);
		assert_int_equal(r.type, 1);
	}
	env_stop(&e);
}

/* --- commands ------------------------------------------------------------------- */

static void test_commands(void **state)
{
	static uint8_t out[65536], in[65536], zero[8192];
	struct env e;

	env_start(&e, NULL, false);
	assert_int_equal(cl_connect(&e), 0x16d);
	fill(out, sizeof(out), 1);
	assert_int_equal(cl_write(&e, 0, 1, 4096, out, sizeof(out)), 0);
	assert_memory_equal(ram.data + 4096, out, sizeof(out));
	assert_int_equal(ram.last_flags[TD_OP_WRITE], 0);
	assert_int_equal(cl_read(&e, 2, 4096, in, sizeof(in)), 0);
	assert_memory_equal(in, out, sizeof(in));

	/* FUA reaches the driver on WRITE and WRITE_ZEROES only. */
	assert_int_equal(cl_write(&e, 1, 3, 0, out, 512), 0);
	assert_int_equal(ram.last_flags[TD_OP_WRITE], TD_REQ_FUA);
	cl_req(&e, 1, 3 /* FLUSH */, 4, 0, 0);
	assert_int_equal(cl_reply(&e, 4), 0);
	assert_int_equal(ram.count[TD_OP_FLUSH], 1);
	assert_int_equal(ram.last_flags[TD_OP_FLUSH], 0);

	cl_req(&e, 1, 4 /* TRIM */, 5, 4096, 8192);
	assert_int_equal(cl_reply(&e, 5), 0);
	assert_int_equal(ram.count[TD_OP_DISCARD], 1);
	assert_int_equal(ram.last_flags[TD_OP_DISCARD], 0);

	cl_req(&e, 3 /* FUA|NO_HOLE */, 6, 6, 16384, 8192);
	assert_int_equal(cl_reply(&e, 6), 0);
	assert_int_equal(ram.last_flags[TD_OP_WRITE_ZEROES],
			 TD_REQ_FUA | TD_REQ_NO_HOLE);
	assert_memory_equal(ram.data + 16384, zero, sizeof(zero));
	cl_req(&e, 2 /* NO_HOLE */, 6, 7, 0, 512);
	assert_int_equal(cl_reply(&e, 7), 0);
	assert_int_equal(ram.last_flags[TD_OP_WRITE_ZEROES], TD_REQ_NO_HOLE);

	/* Largest handle, last sector. */
	assert_int_equal(cl_read(&e, UINT64_MAX, RAM_SIZE - 512, in, 512), 0);

	cl_req(&e, 0, 2 /* DISC */, 8, 0, 0);
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).commands, 9); /* DISC included */
	assert_int_equal(env_stats(&e).error_replies, 0);
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

/* Refused before the vbd: the payload of a WRITE is read and dropped. */
static void test_refused_commands(void **state)
{
	static const struct {
		uint16_t flags, type;
		uint64_t offset;
		uint32_t length;
		uint32_t want;
	} rows[] = {
		{0, 0, 0, 0, 22},		  /* READ of 0 bytes */
		{0, 0, 100, 512, 22},		  /* unaligned offset */
		{0, 0, 0, 1000, 22},		  /* unaligned length */
		{0, 0, RAM_SIZE, 512, 22},	  /* past the end */
		{0, 0, RAM_SIZE - 512, 1024, 22}, /* across the end */
		{0, 0, 0, 65536 + 512, 22},	  /* over max_request */
		{0, 0, 0, 0xfffffe00u, 22},	  /* far over it */
		{4 /* DF */, 0, 0, 512, 22},	  /* flag not offered */
		{0, 1, RAM_SIZE, 512, 28},	  /* WRITE past the end */
		{0, 1, 0, 1000, 22},		  /* unaligned WRITE */
		{0, 1, 0, 65536 + 512, 22},	  /* WRITE over max */
		{0, 1, 0, 1u << 20, 22},	  /* 1 MiB of payload */
		{2 /* NO_HOLE */, 1, 0, 512, 22}, /* flag not for WRITE */
		{0, 1, 0, 0, 22},		  /* WRITE of 0 bytes */
		{0, 4, RAM_SIZE - 512, 4096, 28}, /* TRIM past the end */
		{0, 6, RAM_SIZE, 512, 28},	  /* WRITE_ZEROES past */
		{16 /* FAST_ZERO */, 6, 0, 512, 22},
		{0, 3, 0, 512, 22}, /* FLUSH with a length */
		{0, 5 /* CACHE */, 0, 512, 22},
		{0, 7 /* BLOCK_STATUS */, 0, 512, 22},
		{0, 99, 0, 512, 22},	 /* unknown */
		{0x8000, 0, 0, 512, 22}, /* unknown flag */
	};
	static uint8_t payload[1u << 20], in[512];
	struct td_nbd_params p = {.max_request_bytes = 65536};
	struct env e;

	env_start(&e, &p, false);
	cl_connect(&e);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint32_t err;

		cl_req(&e, rows[i].flags, rows[i].type, 100 + i, rows[i].offset,
		       rows[i].length);
		if (rows[i].type == 1)
			cl_send(&e, payload, rows[i].length);
		err = cl_reply(&e, 100 + i);
		if (err != rows[i].want)
			fail_msg("row %zu: error %u, want %u", i, err,
				 rows[i].want);
		/* Still in step: a good command works. */
		assert_int_equal(cl_read(&e, 1000 + i, 0, in, sizeof(in)), 0);
	}
	for (int op = 0; op < TD_OP_COUNT; op++)
		if (op != TD_OP_READ)
			assert_int_equal(ram.count[op], 0);
	assert_int_equal(env_stats(&e).error_replies,
			 sizeof(rows) / sizeof(rows[0]));
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

/* Errors the vbd reports, as the driver completes with them. */
static void test_vbd_errors(void **state)
{
	static const struct {
		enum td_op op;
		int err;
		uint32_t want;
	} rows[] = {
		{TD_OP_READ, -EIO, 5},
		{TD_OP_READ, -ENOMEM, 12},
		{TD_OP_READ, -EINVAL, 22},
		{TD_OP_READ, -ERANGE, 22},
		{TD_OP_READ, -ETIMEDOUT, 5},
		{TD_OP_READ, -EOPNOTSUPP, 95},
		{TD_OP_WRITE, -ENOSPC, 28},
		{TD_OP_WRITE, -ERANGE, 28},
		{TD_OP_WRITE, -EROFS, 1},
		{TD_OP_WRITE, -EIO, 5},
		{TD_OP_FLUSH, -EIO, 5},
		{TD_OP_FLUSH, -EOPNOTSUPP, 95},
		{TD_OP_DISCARD, -ERANGE, 28},
		{TD_OP_DISCARD, -EOPNOTSUPP, 95},
		{TD_OP_WRITE_ZEROES, -ERANGE, 28},
		{TD_OP_WRITE_ZEROES, -EINVAL, 22},
		{TD_OP_WRITE_ZEROES, -ENOMEM, 12},
	};
	static const uint16_t cmd_of[TD_OP_COUNT] = {
		[TD_OP_READ] = 0,	  [TD_OP_WRITE] = 1,
		[TD_OP_FLUSH] = 3,	  [TD_OP_DISCARD] = 4,
		[TD_OP_WRITE_ZEROES] = 6,
	};
	static uint8_t buf[4096];
	struct env e;

	env_start(&e, NULL, false);
	cl_connect(&e);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		enum td_op op = rows[i].op;
		uint32_t len = op == TD_OP_FLUSH ? 0 : sizeof(buf);
		uint32_t err;

		ram.fail[op] = rows[i].err;
		cl_req(&e, 0, cmd_of[op], i, 0, len);
		if (op == TD_OP_WRITE)
			cl_send(&e, buf, len);
		err = cl_reply(&e, i);
		ram.fail[op] = 0;
		if (err != rows[i].want)
			fail_msg("row %zu: error %u, want %u", i, err,
				 rows[i].want);
	}
	/* A failed READ sends no data: the next reply follows at once. */
	assert_int_equal(cl_read(&e, 999, 0, buf, 512), 0);
	env_stop(&e);
}

static void test_read_only(void **state)
{
	static uint8_t buf[4096];
	struct env e;

	env_start(&e, NULL, true);
	assert_int_equal(cl_connect(&e), 0x107); /* RO: no FUA/TRIM/WZ */
	assert_int_equal(cl_write(&e, 0, 1, 0, buf, sizeof(buf)), 1);
	cl_req(&e, 0, 4, 2, 0, 512);
	assert_int_equal(cl_reply(&e, 2), 1);
	cl_req(&e, 0, 6, 3, 0, 512);
	assert_int_equal(cl_reply(&e, 3), 1);
	cl_req(&e, 0, 3, 4, 0, 0);
	assert_int_equal(cl_reply(&e, 4), 0);
	assert_int_equal(cl_read(&e, 5, 0, buf, sizeof(buf)), 0);
	assert_int_equal(ram.count[TD_OP_WRITE], 0);
	env_stop(&e);
}

/* Features the driver lacks are not advertised, and answer ENOTSUP. */
static void test_unadvertised(void **state)
{
	static uint8_t buf[512];
	struct env e;

	ram.features = 0;
	env_start(&e, NULL, false);
	assert_int_equal(cl_connect(&e), 0x101);
	cl_req(&e, 0, 3, 1, 0, 0);
	assert_int_equal(cl_reply(&e, 1), 95);
	cl_req(&e, 0, 4, 2, 0, 512);
	assert_int_equal(cl_reply(&e, 2), 95);
	cl_req(&e, 0, 6, 3, 0, 512);
	assert_int_equal(cl_reply(&e, 3), 95);
	assert_int_equal(cl_write(&e, 1 /* FUA */, 4, 0, buf, 512), 22);
	assert_int_equal(cl_write(&e, 0, 5, 0, buf, 512), 0);
	env_stop(&e);
}

/* All connections share the vbd: a write on one is read on another. */
static void test_multi_conn(void **state)
{
	static uint8_t out[8192], in[8192];
	struct env e;
	int a;

	env_start(&e, NULL, false);
	cl_connect(&e);
	a = e.cfd;
	e.cfd = env_client(&e);
	cl_connect(&e);
	assert_int_equal(env_stats(&e).clients, 2);
	fill(out, sizeof(out), 9);
	assert_int_equal(cl_read(&e, 1, 8192, in, sizeof(in)), 0);
	{
		int b = e.cfd;

		e.cfd = a;
		assert_int_equal(cl_write(&e, 0, 2, 8192, out, sizeof(out)), 0);
		e.cfd = b;
	}
	assert_int_equal(cl_read(&e, 3, 8192, in, sizeof(in)), 0);
	assert_memory_equal(in, out, sizeof(in));
	close(a);
	env_stop(&e);
}

/* --- hostile transmission ---------------------------------------------------- */

static void test_bad_request_magic(void **state)
{
	static uint8_t junk[28] = {0x25, 0x60, 0x95, 0x14};
	struct env e;

	env_start(&e, NULL, false);
	cl_connect(&e);
	cl_send(&e, junk, sizeof(junk));
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	assert_int_equal(ram.count[TD_OP_READ], 0);
	env_stop(&e);
}

static void test_command_after_disc(void **state)
{
	struct env e;

	env_start(&e, NULL, false);
	cl_connect(&e);
	cl_req(&e, 0, 2, 1, 0, 0);
	cl_req(&e, 0, 0, 2, 0, 512); /* never read, never answered */
	cl_expect_eof(&e);
	assert_int_equal(ram.count[TD_OP_READ], 0);
	assert_int_equal(env_stats(&e).clients, 0);
	env_stop(&e);
}

/* End of stream in the middle of a WRITE's payload. */
static void test_truncated_write(void **state)
{
	struct env e;

	env_start(&e, NULL, false);
	cl_connect(&e);
	cl_req(&e, 0, 1, 1, 0, 4096);
	cl_send(&e, ram.data, 100);
	shutdown(e.cfd, SHUT_WR);
	cl_expect_eof(&e);
	assert_int_equal(ram.count[TD_OP_WRITE], 0);
	assert_int_equal(env_stats(&e).protocol_errors, 1);
	env_stop(&e);
}

/* A client that half-closes still gets the replies it is owed. */
static void test_half_close(void **state)
{
	static uint8_t in[3][512];
	struct env e;

	ram.hold = true;
	env_start(&e, NULL, false);
	cl_connect(&e);
	for (int i = 0; i < 3; i++)
		cl_req(&e, 0, 0, 10 + i, 512 * i, 512);
	shutdown(e.cfd, SHUT_WR);
	pump(&e, 5);
	assert_int_equal(ram.nr_held, 3);
	ram_release();
	for (int i = 0; i < 3; i++) {
		assert_int_equal(cl_reply(&e, 10 + i), 0);
		assert_int_equal(cl_recv(&e, in[i], 512), 0);
	}
	cl_expect_eof(&e);
	assert_int_equal(env_stats(&e).protocol_errors, 0);
	env_stop(&e);
}

/*
 * The client goes away with writes and reads in the vbd: the connection
 * is closed at once but its buffers stay until the vbd is done with
 * them (valgrind and ASan check that nothing is touched after free).
 */
static void test_disconnect_inflight(void **state)
{
	static uint8_t out[8][4096];
	struct env e;

	ram.hold = true;
	env_start(&e, NULL, false);
	cl_connect(&e);
	for (int i = 0; i < 8; i++) {
		fill(out[i], sizeof(out[i]), (unsigned int)i);
		cl_req(&e, 0, 1, i, 4096 * (uint64_t)i, 4096);
		cl_send(&e, out[i], 4096);
		cl_req(&e, 0, 0, 100 + i, 0, 65536);
	}
	pump(&e, 10);
	assert_int_equal(ram.nr_held, 16);
	close(e.cfd);
	e.cfd = -1;
	pump(&e, 5);
	assert_int_equal(env_stats(&e).clients, 0);
	assert_int_equal(e.srv->nr_dead, 1);
	assert_int_equal(TAILQ_FIRST(&e.srv->dead)->vbd_inflight, 16);
	ram_release();
	pump(&e, 5);
	assert_int_equal(e.srv->nr_dead, 0);
	for (int i = 0; i < 8; i++)
		assert_memory_equal(ram.data + 4096 * i, out[i], 4096);
	env_stop(&e);
}

/* Destroyed with I/O in flight: the connection frees itself later. */
static void test_destroy_inflight(void **state)
{
	struct env e;

	ram.hold = true;
	env_start(&e, NULL, false);
	cl_connect(&e);
	cl_req(&e, 0, 0, 1, 0, 65536);
	pump(&e, 5);
	assert_int_equal(ram.nr_held, 1);
	td_frontend_destroy(td_nbd_server_frontend(e.srv));
	cl_expect_eof(&e);
	ram_release();
	pump(&e, 5);
	close(e.cfd);
	assert_int_equal(td_vbd_close(e.vbd), 0);
	td_loop_destroy(e.loop);
}

/* --- back-pressure ---------------------------------------------------------------- */

static void test_backpressure_inflight(void **state)
{
	struct td_nbd_params p = {.max_inflight = 4};
	struct env e;
	struct nbd_conn *conn;
	uint32_t seen = 0, err;

	ram.hold = true;
	env_start(&e, &p, false);
	cl_connect(&e);
	for (int i = 0; i < 10; i++)
		cl_req(&e, 0, 0, i, 0, 512);
	pump(&e, 20);
	conn = env_conn(&e);
	assert_int_equal(ram.nr_held, 4);
	assert_true(conn->blocked);
	assert_false(conn->fde.events & EPOLLIN);
	ram_release();
	for (int i = 0; i < 10; i++) {
		uint8_t data[512];
		uint64_t h = cl_reply_any(&e, &err);

		assert_int_equal(err, 0);
		assert_true(h < 10 && !(seen & (1u << h)));
		seen |= 1u << h;
		assert_int_equal(cl_recv(&e, data, sizeof(data)), 0);
	}
	assert_int_equal(seen, 0x3ff);
	assert_int_equal(ram.count[TD_OP_READ], 10);
	env_stop(&e);
}

/* Buffers: at most max_buffer_bytes per connection, then reading stops. */
static void test_buffer_budget(void **state)
{
	struct td_nbd_params p = {
		.max_request_bytes = 65536,
		.max_buffer_bytes = 131072,
	};
	static uint8_t data[65536];
	struct env e;
	struct nbd_conn *conn;
	uint32_t err;

	ram.hold = true;
	env_start(&e, &p, false);
	cl_connect(&e);
	for (int i = 0; i < 4; i++)
		cl_req(&e, 0, 0, i, 0, 65536);
	pump(&e, 20);
	conn = env_conn(&e);
	assert_int_equal(ram.nr_held, 2);
	assert_int_equal(conn->buf_bytes, 131072);
	assert_true(conn->blocked);
	ram_release();
	for (int i = 0; i < 4; i++) {
		cl_reply_any(&e, &err);
		assert_int_equal(err, 0);
		assert_int_equal(cl_recv(&e, data, sizeof(data)), 0);
		assert_true(conn->buf_bytes <= 131072);
	}
	/* Small reads reuse what is there; a new size within budget too. */
	assert_int_equal(cl_read(&e, 9, 0, data, 4096), 0);
	assert_int_equal(cl_read(&e, 10, 0, data, 65536), 0);
	assert_true(conn->buf_bytes <= 131072);
	env_stop(&e);
}

/* A client that never reads: the loop never blocks, reading stops. */
static void test_slow_reader(void **state)
{
	struct td_nbd_params p = {.max_inflight = 8};
	static uint8_t data[65536];
	struct env e;
	struct nbd_conn *conn;
	unsigned int count;
	uint32_t err;
	const int n = 64;

	env_start(&e, &p, false);
	cl_connect(&e);
	for (int i = 0; i < n; i++)
		cl_req(&e, 0, 0, i, 0, 65536);
	pump(&e, 200);
	conn = env_conn(&e);
	count = ram.count[TD_OP_READ];
	assert_true(count < (unsigned int)n);
	assert_true(conn->blocked);
	assert_true(conn->want_out);
	pump(&e, 50);
	assert_int_equal(ram.count[TD_OP_READ], count); /* no progress */
	for (int i = 0; i < n; i++) {
		assert_int_equal(cl_reply_any(&e, &err), (uint64_t)i);
		assert_int_equal(err, 0);
		assert_int_equal(cl_recv(&e, data, sizeof(data)), 0);
	}
	assert_int_equal(ram.count[TD_OP_READ], n);
	env_stop(&e);
}

/* --- listening, limits, shutdown ---------------------------------------------------- */

static char tmpdir[64];

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_nbd.XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
}

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/* Run the loop until the client's end sees EOF; returns the ms it took,
 * or -1 when nothing came within max_ms (bytes sent are dropped). */
static int wait_eof(struct env *e, int max_ms)
{
	uint64_t start = td_now_ns();
	uint8_t b[4096];

	while (td_now_ns() - start < (uint64_t)max_ms * 1000000) {
		ssize_t r = recv(e->cfd, b, sizeof(b), MSG_DONTWAIT);

		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return (int)((td_now_ns() - start) / 1000000);
		if (r < 0)
			td_loop_run_once(e->loop, 2);
	}
	return -1;
}

/*
 * One established slot: a newcomer's GO takes the slot of the idle
 * client; with the slot busy it is refused with NBD_REP_ERR_POLICY and a
 * message, may retry, and gets in once the slot is idle again.
 */
static void test_max_clients(void **state)
{
	struct td_nbd_params p = {.max_clients = 1};
	char path[128], addr[160];
	struct go_result g;
	struct opt_reply r;
	struct env e;
	int first, second;

	make_tmpdir();
	snprintf(path, sizeof(path), "%s/nbd.sock", tmpdir);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	env_start(&e, &p, false);
	assert_int_equal(td_nbd_server_listen(e.srv, addr), 0);
	cl_connect(&e);
	first = e.cfd;

	/* Through the listener: served, and the idle first one makes room. */
	e.cfd = second = unix_connect(path);
	cl_connect(&e);
	e.cfd = first;
	assert_true(wait_eof(&e, 1000) >= 0);
	close(first);
	assert_int_equal(env_stats(&e).evicted, 1);
	assert_int_equal(env_stats(&e).refused, 0);

	/* The second one busy (a READ held in the vbd): a third is told. */
	ram.hold = true;
	e.cfd = second;
	cl_req(&e, 0, 0, 1, 0, 512);
	pump(&e, 5);
	assert_int_equal(ram.nr_held, 1);
	e.cfd = env_client(&e);
	cl_greeting(&e, 3);
	cl_go(&e, 7, "", &g);
	assert_int_equal(g.final, 0x80000002u); /* NBD_REP_ERR_POLICY */
	assert_int_equal(env_stats(&e).busy_refusals, 1);
	/* INFO works meanwhile, and the client is still negotiating. */
	cl_go(&e, 6, "", &g);
	assert_int_equal(g.final, 1);
	/* The message says why; then, the READ done, a retry gets in. */
	cl_opt(&e, 7, "\0\0\0\0\0\0", 6);
	cl_opt_reply(&e, &r);
	assert_int_equal(r.type, 0x80000002u);
	r.data[r.len < sizeof(r.data) ? r.len : sizeof(r.data) - 1] = 0;
	assert_non_null(strstr((char *)r.data, "disk nbdtest: all 1 "
					       "connections are busy"));
	ram_release();
	{
		int third = e.cfd;
		uint8_t data[512];

		e.cfd = second; /* its reply written: idle now */
		assert_int_equal(cl_reply(&e, 1), 0);
		assert_int_equal(cl_recv(&e, data, sizeof(data)), 0);
		e.cfd = third;
	}
	assert_int_equal(cl_go_ok(&e), 0x16d);
	assert_int_equal(env_stats(&e).evicted, 2);
	assert_int_equal(env_stats(&e).clients, 1);
	close(second);
	env_stop(&e);
	assert_int_equal(access(path, F_OK), -1); /* unlinked */
	rmdir(tmpdir);
}

/*
 * Handshake slots are separate: with one of each, a newcomer closes the
 * oldest handshake, never the established client.
 */
static void test_handshake_slots(void **state)
{
	struct td_nbd_params p = {.max_clients = 1, .max_handshakes = 2};
	uint8_t g[18], data[512];
	int est, hs[3];
	struct env e;

	env_start(&e, &p, false);
	cl_connect(&e);
	est = e.cfd;
	for (int i = 0; i < 3; i++) {
		hs[i] = env_client(&e);
		pump(&e, 2);
	}
	assert_int_equal(env_stats(&e).handshaking, 2);
	assert_int_equal(env_stats(&e).evicted, 1);
	e.cfd = hs[0]; /* the oldest: greeted, then closed */
	assert_int_equal(cl_recv(&e, g, sizeof(g)), 0);
	assert_true(wait_eof(&e, 1000) >= 0);
	for (int i = 1; i < 3; i++) {
		e.cfd = hs[i];
		assert_int_equal(cl_recv(&e, g, sizeof(g)), 0);
	}
	e.cfd = est; /* served all along */
	assert_int_equal(cl_read(&e, 1, 0, data, sizeof(data)), 0);
	for (int i = 0; i < 3; i++)
		close(hs[i]);
	env_stop(&e);
}

/* An idle client is closed after idle_timeout_ms; a busy one is not. */
static void test_idle_timeout(void **state)
{
	struct td_nbd_params p = {.idle_timeout_ms = 50};
	struct env e;
	int ms;

	env_start(&e, &p, false);
	cl_connect(&e);
	ram.hold = true;
	cl_req(&e, 0, 0, 1, 0, 512);
	assert_int_equal(wait_eof(&e, 150), -1); /* held: not idle */
	ram_release();
	assert_int_equal(cl_reply(&e, 1), 0);
	ms = wait_eof(&e, 1000);
	assert_true(ms >= 0 && ms < 1000);
	assert_int_equal(env_stats(&e).timed_out, 1);
	env_stop(&e);
}

/* Bytes that stop mid-request: closed io_timeout_ms later. */
static void check_stalled(const void *bytes, size_t n)
{
	struct td_nbd_params p = {.io_timeout_ms = 40};
	struct env e;
	int ms;

	env_start(&e, &p, false);
	cl_connect(&e);
	cl_send(&e, bytes, n);
	ms = wait_eof(&e, 2000);
	assert_true(ms >= 30 && ms < 2000);
	assert_int_equal(env_stats(&e).timed_out, 1);
	assert_int_equal(env_stats(&e).clients, 0);
	env_stop(&e);
}

static void test_io_timeout_header(void **state)
{
	uint8_t hdr[28] = {0};

	nbd_put32(hdr, 0x25609513u);
	check_stalled(hdr, 10);
}

static void test_io_timeout_payload(void **state)
{
	static uint8_t req[28 + 4096];

	nbd_put32(req, 0x25609513u);
	nbd_put16(req + 6, 1); /* WRITE of 64 KiB, 4 KiB of it sent */
	nbd_put32(req + 24, 65536);
	check_stalled(req, sizeof(req));
}

/* A refused WRITE whose payload stops: the skip has the same deadline. */
static void test_io_timeout_skip(void **state)
{
	static uint8_t req[28 + 4096];

	nbd_put32(req, 0x25609513u);
	nbd_put16(req + 6, 1);
	nbd_put32(req + 20, 100); /* misaligned: EINVAL after the payload */
	nbd_put32(req + 24, 65536);
	check_stalled(req, sizeof(req));
}

/*
 * Requests that keep coming are never timed out, however long the
 * connection lives, nor is one whose I/O the vbd holds.  The deadline
 * (500 ms) is far above each request's own time (a 15 ms pause in the
 * middle of its payload) so that a loaded machine cannot fail the test,
 * and below the requests' total (50 x 15 ms), so that a deadline counted
 * over the connection instead of per request would.
 */
static void test_io_timeout_progress(void **state)
{
	struct td_nbd_params p = {.io_timeout_ms = 500, .idle_timeout_ms = 500};
	uint8_t data[4096];
	struct env e;

	env_start(&e, &p, false);
	cl_connect(&e);
	fill(data, sizeof(data), 3);
	for (int i = 0; i < 50; i++) {
		uint64_t t = td_now_ns();

		cl_req(&e, 0, 1, i, 0, sizeof(data));
		cl_send(&e, data, 2048);
		while (td_now_ns() - t < 15 * 1000000ull)
			td_loop_run_once(e.loop, 2);
		cl_send(&e, data + 2048, 2048);
		assert_int_equal(cl_reply(&e, i), 0);
	}
	ram.hold = true;
	cl_req(&e, 0, 0, 99, 0, 512);
	assert_int_equal(wait_eof(&e, 700), -1); /* held past both deadlines */
	ram_release();
	assert_int_equal(cl_reply(&e, 99), 0);
	assert_int_equal(cl_recv(&e, data, 512), 0);
	assert_int_equal(env_stats(&e).timed_out, 0);
	env_stop(&e);
}

/* Replies the client never takes: closed io_timeout_ms after the socket
 * last took a byte. */
static void test_io_timeout_reader(void **state)
{
	struct td_nbd_params p = {.io_timeout_ms = 40};
	struct env e;

	env_start(&e, &p, false);
	cl_connect(&e);
	for (int i = 0; i < 16; i++)
		cl_req(&e, 0, 0, i, 0, 1u << 20);
	for (int i = 0; i < 400 && env_stats(&e).clients; i++)
		td_loop_run_once(e.loop, 2);
	assert_int_equal(env_stats(&e).clients, 0);
	assert_int_equal(env_stats(&e).timed_out, 1);
	env_stop(&e);
}

/* The operator's view: list (text and JSON) and drop by id. */
static void test_list_drop(void **state)
{
	struct td_frontend *fe;
	struct td_strbuf out;
	char *argv[3];
	struct env e;
	int hs;

	env_start(&e, NULL, false);
	fe = td_nbd_server_frontend(e.srv);
	cl_connect(&e);
	hs = env_client(&e);
	pump(&e, 2);
	td_strbuf_init(&out);
	argv[0] = "list";
	argv[1] = "json";
	assert_int_equal(td_frontend_control(fe, 2, argv, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out),
			       "\"id\": 1,\n      "
			       "\"peer\": \"test#1\",\n "
			       "     \"state\": \"idle\""));
	assert_non_null(
		strstr(td_strbuf_str(&out), "\"state\": \"handshake\""));
	assert_non_null(strstr(td_strbuf_str(&out), "\"bytes_out\": 18,"));
	td_strbuf_reset(&out);
	assert_int_equal(td_frontend_control(fe, 1, argv, &out), 0);
	assert_non_null(strstr(td_strbuf_str(&out), "2 connections"));
	td_strbuf_reset(&out);
	argv[0] = "drop";
	argv[1] = "3";
	assert_int_equal(td_frontend_control(fe, 2, argv, &out), -ENOENT);
	argv[1] = "x1";
	assert_int_equal(td_frontend_control(fe, 2, argv, &out), -EINVAL);
	argv[0] = "frob";
	assert_int_equal(td_frontend_control(fe, 1, argv, &out), -EINVAL);
	td_strbuf_reset(&out);
	argv[0] = "drop";
	argv[1] = "1";
	assert_int_equal(td_frontend_control(fe, 2, argv, &out), 0);
	assert_string_equal(td_strbuf_str(&out), "connection 1 dropped\n");
	assert_true(wait_eof(&e, 1000) >= 0);
	assert_int_equal(env_stats(&e).clients, 1);
	td_strbuf_free(&out);
	close(hs);
	env_stop(&e);
}

/* Connection memory is mapped while in use and given back when closed. */
static void test_memory_returned(void **state)
{
	static uint8_t data[1u << 20];
	struct env e;
	uint64_t idle;

	env_start(&e, NULL, false);
	cl_connect(&e);
	idle = env_stats(&e).memory_bytes;
	assert_true(idle > sizeof(struct nbd_conn));
	assert_int_equal(cl_read(&e, 1, 0, data, sizeof(data)), 0);
	/* The 1 MiB buffer is kept in its slot for the next command. */
	assert_int_equal(env_stats(&e).memory_bytes, idle + (1u << 20));
	close(e.cfd);
	e.cfd = -1;
	for (int i = 0; i < 100 && env_stats(&e).memory_bytes; i++)
		td_loop_run_once(e.loop, 1);
	assert_int_equal(env_stats(&e).memory_bytes, 0);
	env_stop(&e);
}

static void test_listen_addresses(void **state)
{
	static const struct {
		const char *addr;
		int err;
	} bad[] = {
		{"", -EINVAL},
		{"nbd.sock", -EINVAL},
		{"udp:1.2.3.4:5", -EINVAL},
		{"tcp:", -EINVAL},
		{"tcp:127.0.0.1", -EINVAL},
		{"tcp:127.0.0.1:", -EINVAL},
		{"tcp:127.0.0.1:port", -EINVAL},
		{"unix:", -ENAMETOOLONG},
		{"unix:/tmp/0123456789012345678901234567890123456789012345678"
		 "9012345678901234567890123456789012345678901234567890123456",
		 -ENAMETOOLONG}, /* 109 bytes: sun_path holds 107 */
	};
	char path[128], addr[160];
	struct env e;
	int fd;

	make_tmpdir();
	env_open(&e, NULL, false);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (td_nbd_server_listen(e.srv, bad[i].addr) != bad[i].err)
			fail_msg("'%s': got %d, want %d", bad[i].addr,
				 td_nbd_server_listen(e.srv, bad[i].addr),
				 bad[i].err);

	/* A file that is not a socket is left alone. */
	snprintf(path, sizeof(path), "%s/file", tmpdir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	close(fd);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	assert_int_equal(td_nbd_server_listen(e.srv, addr), -EEXIST);
	unlink(path);

	/* A stale socket is replaced; a live one is not. */
	snprintf(path, sizeof(path), "%s/sock", tmpdir);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	{
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		assert_true(strlen(path) < sizeof(sa.sun_path));
		memcpy(sa.sun_path, path, strlen(path));
		assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)),
				 0);
		close(fd); /* never listened: stale */
	}
	assert_int_equal(td_nbd_server_listen(e.srv, addr), 0);
	assert_int_equal(td_nbd_server_listen(e.srv, addr), -EADDRINUSE);

	/* TCP on loopback, port chosen by the kernel; a real client. */
	assert_int_equal(td_nbd_server_listen(e.srv, "tcp:127.0.0.1:0"), 0);
	{
		struct td_listener *l =
			TAILQ_LAST(&e.srv->listeners, td_listener_list);
		struct sockaddr_in sin;
		socklen_t len = sizeof(sin);
		int one = 0;

		assert_int_equal(
			getsockname(l->fd, (struct sockaddr *)&sin, &len), 0);
		e.cfd = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(e.cfd, (struct sockaddr *)&sin, len),
				 0);
		fcntl(e.cfd, F_SETFL, O_NONBLOCK);
		cl_connect(&e);
		/* The accepted socket has TCP_NODELAY. */
		len = sizeof(one);
		getsockopt(env_conn(&e)->fd, IPPROTO_TCP, TCP_NODELAY, &one,
			   &len);
		assert_int_equal(one, 1);
		assert_non_null(strstr(env_conn(&e)->peer, "127.0.0.1:"));
	}
	/* All addresses of both families, if the machine has IPv6. */
	assert_int_equal(td_nbd_server_listen(e.srv, "tcp::0"), 0);
	env_stop(&e);
	assert_int_equal(access(path, F_OK), -1);
	rmdir(tmpdir);
}

static void test_shutdown(void **state)
{
	struct env e;
	int hs;
	uint8_t g[18], data[512];

	ram.hold = true;
	env_start(&e, NULL, false);
	cl_connect(&e);
	cl_req(&e, 0, 0, 1, 0, 512);
	pump(&e, 5);
	assert_int_equal(ram.nr_held, 1);
	hs = env_client(&e); /* a second client, still in the handshake */
	pump(&e, 2);
	assert_int_equal(recv(hs, g, sizeof(g), 0), 18);

	td_frontend_shutdown(td_nbd_server_frontend(e.srv), env_done, &e);
	assert_false(e.done);
	pump(&e, 5);
	assert_int_equal(recv(hs, g, 1, MSG_DONTWAIT), 0); /* closed */
	close(hs);
	assert_false(e.done); /* the READ is still in the vbd */
	/* New clients are refused while shutting down. */
	{
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		assert_int_equal(td_nbd_server_add_client(e.srv, sv[0], NULL),
				 -ESHUTDOWN);
		close(sv[1]);
	}
	/* Commands sent now are not read. */
	cl_req(&e, 0, 0, 2, 0, 512);
	ram_release();
	assert_int_equal(cl_reply(&e, 1), 0);
	assert_int_equal(cl_recv(&e, data, sizeof(data)), 0);
	cl_expect_eof(&e);
	pump(&e, 3);
	assert_true(e.done);
	assert_int_equal(ram.count[TD_OP_READ], 1);
	td_frontend_destroy(td_nbd_server_frontend(e.srv));
	close(e.cfd);
	assert_int_equal(td_vbd_close(e.vbd), 0);
	td_loop_destroy(e.loop);
}

/* Shutdown with a client that never reads: closed after the timeout. */
static void test_shutdown_stuck_client(void **state)
{
	struct env e;
	uint64_t start;

	env_start(&e, NULL, false);
	cl_connect(&e);
	for (int i = 0; i < 64; i++)
		cl_req(&e, 0, 0, i, 0, 1u << 20);
	pump(&e, 50);
	assert_true(env_conn(&e)->want_out);
	start = td_now_ns();
	td_frontend_shutdown(td_nbd_server_frontend(e.srv), env_done, &e);
	while (!e.done &&
	       td_now_ns() - start < 3ull * NBD_SHUTDOWN_TIMEOUT_MS * 1000000)
		td_loop_run_once(e.loop, 50);
	assert_true(e.done);
	assert_true(td_now_ns() - start >=
		    (NBD_SHUTDOWN_TIMEOUT_MS - 100) * 1000000ull);
	assert_int_equal(env_stats(&e).clients, 0);
	td_frontend_destroy(td_nbd_server_frontend(e.srv));
	close(e.cfd);
	assert_int_equal(td_vbd_close(e.vbd), 0);
	td_loop_destroy(e.loop);
}

/* Out of file descriptors: the listener pauses instead of spinning. */
static void test_accept_emfile(void **state)
{
	char path[128], addr[160];
	struct td_listener *l;
	struct rlimit old, low;
	struct env e;
	uint8_t g[18];
	int fill[256], nr_fill = 0, top, fd;
	const char *preload = getenv("LD_PRELOAD");

	/* valgrind only emulates RLIMIT_NOFILE: the kernel accepts, then
	 * valgrind drops the new descriptor. */
	if (preload && strstr(preload, "vgpreload"))
		skip();
	make_tmpdir();
	snprintf(path, sizeof(path), "%s/nbd.sock", tmpdir);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	env_open(&e, NULL, false);
	assert_int_equal(td_nbd_server_listen(e.srv, addr), 0);
	l = TAILQ_FIRST(&e.srv->listeners);
	e.cfd = unix_connect(path);
	/* Take every free descriptor below the highest in use: then a limit
	 * just above it leaves accept() none. */
	top = l->fd > e.cfd ? l->fd : e.cfd;
	while ((fd = dup(0)) < top && nr_fill < 256)
		fill[nr_fill++] = fd;
	close(fd);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)top + 1;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	pump(&e, 3);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	while (nr_fill)
		close(fill[--nr_fill]);
	assert_int_equal(l->fde.events, 0);
	assert_true(td_timer_armed(&l->backoff));
	assert_int_equal(env_stats(&e).clients_total, 0);
	/* After the back-off the pending client is accepted. */
	assert_int_equal(cl_recv(&e, g, sizeof(g)), 0);
	assert_int_equal(l->fde.events, EPOLLIN);
	cl_send(&e, "\0\0\0\3", 4);
	assert_int_equal(cl_go_ok(&e), 0x16d);
	env_stop(&e);
	rmdir(tmpdir);
}

static void test_create_params(void **state)
{
	static const struct td_nbd_params bad[] = {
		{.max_request_bytes = 1000},
		{.max_request_bytes = 2048},
		{.max_request_bytes = (1u << 30) + 512},
		{.max_inflight = TD_NBD_MAX_INFLIGHT + 1},
	};
	static char long_name[4098];
	struct td_nbd_params p = {.export_name = long_name};
	struct td_nbd_server *srv;
	struct env e;

	env_open(&e, NULL, false);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
			td_nbd_server_create(e.loop, e.vbd, &bad[i], &srv),
			-EINVAL);
	memset(long_name, 'x', 4097);
	assert_int_equal(td_nbd_server_create(e.loop, e.vbd, &p, &srv),
			 -EINVAL);
	memset(long_name + 4096, 0, 2);
	assert_int_equal(td_nbd_server_create(e.loop, e.vbd, &p, &srv), 0);
	td_frontend_destroy(td_nbd_server_frontend(srv));
	/* A small max_request raises the buffer budget to fit one. */
	p.export_name = NULL;
	p.max_request_bytes = 1u << 20;
	p.max_buffer_bytes = 4096;
	assert_int_equal(td_nbd_server_create(e.loop, e.vbd, &p, &srv), 0);
	assert_int_equal(srv->max_buffer_bytes, 1u << 20);
	td_frontend_destroy(td_nbd_server_frontend(srv));
	env_stop(&e);
}

static int reset(void **state)
{
	ram_reset();
	td_log_set_level(TD_LOG_ERR);
	return 0;
}

#define T(f) cmocka_unit_test_setup(f, reset)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_go),
		T(test_info_then_go),
		T(test_export_name),
		T(test_list),
		T(test_export_name_unknown),
		T(test_abort),
		T(test_abort_and_close),
		T(test_unsupported_options),
		T(test_structured_replies),
		T(test_simple_client),
		T(test_meta_contexts),
		T(test_meta_hostile),
		T(test_block_status),
		T(test_block_status_small_buffer),
		T(test_bad_client_flags),
		T(test_bad_option_magic),
		T(test_garbage),
		T(test_truncated_handshake),
		T(test_oversized_options),
		T(test_go_malformed),
		T(test_handshake_timeout),
		T(test_option_flood),
		T(test_commands),
		T(test_refused_commands),
		T(test_vbd_errors),
		T(test_read_only),
		T(test_unadvertised),
		T(test_multi_conn),
		T(test_bad_request_magic),
		T(test_command_after_disc),
		T(test_truncated_write),
		T(test_half_close),
		T(test_disconnect_inflight),
		T(test_destroy_inflight),
		T(test_backpressure_inflight),
		T(test_buffer_budget),
		T(test_slow_reader),
		T(test_max_clients),
		T(test_handshake_slots),
		T(test_idle_timeout),
		T(test_io_timeout_header),
		T(test_io_timeout_payload),
		T(test_io_timeout_skip),
		T(test_io_timeout_progress),
		T(test_io_timeout_reader),
		T(test_list_drop),
		T(test_memory_returned),
		T(test_listen_addresses),
		T(test_shutdown),
		T(test_shutdown_stuck_client),
		T(test_accept_emfile),
		T(test_create_params),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
