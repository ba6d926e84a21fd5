/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_server.c - master/server.c and master/dispatch.c in one process:
 * the loop runs in a thread on 127.0.0.1 (a free port), the tests talk to
 * it with the client library and with raw, misbehaving sockets.  Counters
 * are read once the loop has stopped.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "master/client/client.h"
#include "master/server/server.h"
#include "master/server/store.h"
#include "common/log.h"

#define MiB	      (1024ull * 1024)
#define RECORD_LAST   0x80000000u
#define REPLY_WAIT_MS 5000
#define GROUP_CLIENTS 4
#define GROUP_ALLOCS  50

struct fixture {
	char dir[64], path[96], address[64];
	struct master_store *st;
	struct master_server *ms;
	int stop_fd;
	pthread_t thread;
	bool running;
	int run_ret;
	struct master_stats stats;
};

static void *run(void *arg)
{
	struct fixture *f = arg;

	f->run_ret = master_server_run(f->ms);
	return NULL;
}

static struct fixture *start(bool allow_loopback, unsigned int idle_s)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct master_server_config cfg = {.listen = "127.0.0.1:0",
					   .idle_timeout_s = idle_s,
					   .max_connections = 16};
	char msg[256];

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_server.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/master.db", f->dir);
	assert_int_equal(
		master_store_open(f->path, 1 * MiB, &f->st, msg, sizeof(msg)),
		0);
	if (allow_loopback)
		master_netacl_loopback(&cfg.acl);
	else
		master_netacl_init(&cfg.acl);
	f->stop_fd = eventfd(0, EFD_CLOEXEC);
	assert_int_equal(master_server_create(&cfg, f->st, f->stop_fd, &f->ms,
					      msg, sizeof(msg)),
			 0);
	snprintf(f->address, sizeof(f->address), "127.0.0.1:%u",
		 master_server_port(f->ms));
	assert_int_equal(pthread_create(&f->thread, NULL, run, f), 0);
	f->running = true;
	return f;
}

/* Stop the loop and keep its counters. */
static void stop(struct fixture *f)
{
	uint64_t one = 1;

	if (!f->running)
		return;
	assert_int_equal(write(f->stop_fd, &one, sizeof(one)), sizeof(one));
	pthread_join(f->thread, NULL);
	f->running = false;
	assert_int_equal(f->run_ret, 0);
	master_server_get_stats(f->ms, &f->stats);
}

static int setup(void **state)
{
	*state = start(true, 0);
	return 0;
}

static int setup_denied(void **state)
{
	*state = start(false, 0);
	return 0;
}

static int setup_idle(void **state)
{
	*state = start(true, 1);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	stop(f);
	master_server_destroy(f->ms);
	master_store_close(f->st);
	close(f->stop_fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	free(f);
	return system(cmd);
}

static struct master_client *client(struct fixture *f)
{
	struct master_client_opts o = {.timeout_ms = REPLY_WAIT_MS,
				       .retries = 0};
	struct master_client *c;

	assert_int_equal(master_client_open(f->address, &o, &c), 0);
	return c;
}

static void add_servers(struct master_client *c, int n)
{
	for (int i = 1; i <= n; i++) {
		char address[32], target[64];
		ms_server_add_args a = {address, address, target, 1, 256 * MiB,
					512,	 "",	  "",	  ""};
		ms_reply rep;

		snprintf(address, sizeof(address), "10.0.0.%d", i);
		snprintf(target, sizeof(target), "iqn.2024-01.t:s%d", i);
		assert_int_equal(master_call_server_add(c, &a, &rep), 0);
		master_reply_free(&rep);
	}
}

/* --- raw sockets ------------------------------------------------------------- */

static int raw_connect(struct fixture *f)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(master_server_port(f->ms)),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* A call header for proc, followed by extra bytes, as one record. */
static size_t build_call(uint32_t proc, const void *extra, size_t extra_len,
			 char *buf, size_t size)
{
	struct rpc_msg call = {.rm_xid = 0x1234, .rm_direction = CALL};
	uint32_t mark;
	XDR x;
	u_int len;

	call.rm_call.cb_rpcvers = RPC_MSG_VERSION;
	call.rm_call.cb_prog = STRIPE_MASTER_PROG;
	call.rm_call.cb_vers = STRIPE_MASTER_V1;
	call.rm_call.cb_proc = proc;
	call.rm_call.cb_cred = _null_auth;
	call.rm_call.cb_verf = _null_auth;
	xdrmem_create(&x, buf + 4, (u_int)size - 4, XDR_ENCODE);
	assert_true(xdr_callmsg(&x, &call));
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	if (extra_len)
		memcpy(buf + 4 + len, extra, extra_len);
	len += (u_int)extra_len;
	mark = htonl(RECORD_LAST | len);
	memcpy(buf, &mark, 4);
	return len + 4;
}

/* Read one reply record and return its accept status. */
static enum accept_stat read_reply(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[4096];
	struct rpc_msg reply = {0};
	uint32_t mark;
	ssize_t n;
	XDR x;

	assert_int_equal(poll(&p, 1, REPLY_WAIT_MS), 1);
	n = recv(fd, buf, sizeof(buf), MSG_WAITALL | MSG_DONTWAIT);
	assert_true(n > 4);
	memcpy(&mark, buf, 4);
	assert_int_equal(ntohl(mark) & ~RECORD_LAST, (uint32_t)n - 4);
	reply.acpted_rply.ar_results.proc = (xdrproc_t)(void (*)(void))xdr_void;
	xdrmem_create(&x, buf + 4, (u_int)n - 4, XDR_DECODE);
	assert_true(xdr_replymsg(&x, &reply));
	xdr_destroy(&x);
	assert_int_equal(reply.rm_xid, 0x1234);
	assert_int_equal(reply.rm_reply.rp_stat, MSG_ACCEPTED);
	return reply.acpted_rply.ar_stat;
}

/* --- tests ---------------------------------------------------------------------- */

static void test_round_trip(void **state)
{
	struct fixture *f = *state;
	struct master_client *c = client(f);
	ms_alloc_args a = {"d1", 2, 1, 2, 1 * MiB};
	ms_reply r1, r2;

	add_servers(c, 4);
	assert_int_equal(master_call_vdisk_alloc(c, &a, &r1), 0);
	assert_true(r1.changed);
	assert_int_equal(master_call_vdisk_alloc(c, &a, &r2), 0);
	assert_false(r2.changed);
	assert_int_equal(r2.body.ms_body_u.vdisk.extents.extents_len, 4);
	assert_memory_equal(r1.body.ms_body_u.vdisk.extents.extents_val,
			    r2.body.ms_body_u.vdisk.extents.extents_val,
			    4 * sizeof(ms_extent));
	master_reply_free(&r1);
	master_reply_free(&r2);
	a.extents_per_column = 2;
	assert_int_equal(master_call_vdisk_alloc(c, &a, &r1), -EEXIST);
	assert_non_null(strstr(master_client_error(c), "destroy it first"));
	master_reply_free(&r1);
	master_client_close(c);
	stop(f);
	assert_int_equal(f->stats.calls, 7);
	assert_int_equal(f->stats.decode_errors, 0);
}

static void test_denied_outside_allow_list(void **state)
{
	struct fixture *f = *state;
	struct master_client *c = client(f);
	char t[] = "iqn.x:y";
	ms_server_add_args a = {t, t, t, 1, 64 * MiB, 512, "", "", ""};
	ms_replica_state_args rs = {"d1", 0, 0, 0, true};
	ms_grow_args grow = {"d1", 2};
	ms_reply rep;

	assert_int_equal(master_call_server_add(c, &a, &rep), -EPERM);
	assert_non_null(strstr(master_client_error(c), "--allow"));
	master_reply_free(&rep);
	/* a replica state changes the master too */
	assert_int_equal(master_call_replica_state(c, &rs, &rep), -EPERM);
	master_reply_free(&rep);
	/* and a grow (issue #21) */
	assert_int_equal(master_call_vdisk_grow(c, &grow, &rep), -EPERM);
	master_reply_free(&rep);
	/* so do the lease calls, all but show */
	assert_int_equal(master_call_lease_acquire(c, "d1", "A", &rep), -EPERM);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_release(c, "d1", "A", 1, &rep),
			 -EPERM);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_handover(c, "d1", "A", 1, "B", &rep),
			 -EPERM);
	master_reply_free(&rep);
	assert_int_equal(
		master_call_lease_takeover(c, "d1", "A", 1, true, &rep),
		-EPERM);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_show(c, "d1", &rep), -ENOENT);
	master_reply_free(&rep);
	/* reading is for everyone */
	assert_int_equal(master_call_info(c, &rep), 0);
	assert_int_equal(rep.body.ms_body_u.info.nr_servers, 0);
	master_reply_free(&rep);
	master_client_close(c);
	stop(f);
	assert_int_equal(f->stats.denied, 7);
}

static void test_undecodable_call_freed(void **state)
{
	struct fixture *f = *state;
	/* an alloc whose id claims 1000 bytes and brings 4 */
	static const unsigned char bad_args[] = {0,   0,   3,	0xe8,
						 'a', 'b', 'c', 'd'};
	/* an extent list whose filter array claims 2^31 entries */
	static const unsigned char huge_array[] = {0x80, 0, 0, 0};
	struct master_client *c;
	char buf[512];
	size_t len;
	int fd = raw_connect(f);
	ms_reply rep;

	len = build_call(MS_VDISK_ALLOC, bad_args, sizeof(bad_args), buf,
			 sizeof(buf));
	assert_int_equal(send(fd, buf, len, 0), (ssize_t)len);
	assert_int_equal(read_reply(fd), GARBAGE_ARGS);
	len = build_call(MS_EXTENT_LIST, huge_array, sizeof(huge_array), buf,
			 sizeof(buf));
	assert_int_equal(send(fd, buf, len, 0), (ssize_t)len);
	assert_int_equal(read_reply(fd), GARBAGE_ARGS);
	len = build_call(99, NULL, 0, buf, sizeof(buf));
	assert_int_equal(send(fd, buf, len, 0), (ssize_t)len);
	assert_int_equal(read_reply(fd), PROC_UNAVAIL);
	len = build_call(MS_NULL, NULL, 0, buf, sizeof(buf));
	assert_int_equal(send(fd, buf, len, 0), (ssize_t)len);
	assert_int_equal(read_reply(fd), SUCCESS);
	close(fd);
	/* and it still serves */
	c = client(f);
	assert_int_equal(master_call_info(c, &rep), 0);
	master_reply_free(&rep);
	master_client_close(c);
	stop(f);
	assert_int_equal(f->stats.decode_errors, 2);
}

static void test_half_record_stalls_nobody(void **state)
{
	struct fixture *f = *state;
	struct master_client *c;
	char buf[512];
	size_t len = build_call(MS_INFO, NULL, 0, buf, sizeof(buf));
	int fd = raw_connect(f);
	ms_reply rep;
	uint64_t t0;

	/* half a record, and then silence */
	assert_int_equal(send(fd, buf, len / 2, 0), (ssize_t)(len / 2));
	c = client(f);
	t0 = td_now_ns();
	assert_int_equal(master_call_info(c, &rep), 0);
	assert_true(td_now_ns() - t0 < 1000000000ull);
	master_reply_free(&rep);
	/* the rest arrives: that client is answered too */
	assert_int_equal(send(fd, buf + len / 2, len - len / 2, 0),
			 (ssize_t)(len - len / 2));
	assert_int_equal(read_reply(fd), SUCCESS);
	close(fd);
	master_client_close(c);
}

static void test_oversized_record_dropped(void **state)
{
	struct fixture *f = *state;
	uint32_t mark = htonl(RECORD_LAST | (MASTER_MAX_RECORD_BYTES + 1));
	struct pollfd p;
	char byte;
	int fd = raw_connect(f);

	assert_int_equal(send(fd, &mark, 4, 0), 4);
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, REPLY_WAIT_MS), 1);
	assert_int_equal(recv(fd, &byte, 1, 0), 0); /* closed by the master */
	close(fd);
}

static void test_idle_connection_closed(void **state)
{
	struct fixture *f = *state;
	struct pollfd p;
	char byte;
	int fd = raw_connect(f);

	p = (struct pollfd){.fd = fd, .events = POLLIN};
	assert_int_equal(poll(&p, 1, 4000), 1);
	assert_int_equal(recv(fd, &byte, 1, 0), 0);
	close(fd);
	stop(f);
	assert_int_equal(f->stats.idle_closed, 1);
}

struct group_client {
	struct fixture *f;
	int index;
	int failures;
};

static void *group_worker(void *arg)
{
	struct group_client *g = arg;
	struct master_client *c = client(g->f);

	for (int i = 0; i < GROUP_ALLOCS; i++) {
		char id[32];
		ms_alloc_args a = {id, 1, 1, 2, 1 * MiB};
		ms_reply rep;

		snprintf(id, sizeof(id), "g%d-%d", g->index, i);
		if (master_call_vdisk_alloc(c, &a, &rep))
			g->failures++;
		master_reply_free(&rep);
	}
	master_client_close(c);
	return NULL;
}

/* Concurrent clients: all served, in no more rounds than calls. */
static void test_concurrent_clients(void **state)
{
	struct fixture *f = *state;
	struct group_client g[GROUP_CLIENTS];
	pthread_t t[GROUP_CLIENTS];
	struct master_client *c = client(f);
	char msg[256];

	add_servers(c, 4);
	master_client_close(c);
	for (int i = 0; i < GROUP_CLIENTS; i++) {
		g[i] = (struct group_client){f, i, 0};
		pthread_create(&t[i], NULL, group_worker, &g[i]);
	}
	for (int i = 0; i < GROUP_CLIENTS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(g[i].failures, 0);
	}
	stop(f);
	assert_int_equal(f->stats.calls, 4 + GROUP_CLIENTS * GROUP_ALLOCS);
	assert_true(f->stats.rounds <= f->stats.calls);
	assert_true(f->stats.max_round_calls <= GROUP_CLIENTS);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

static void test_second_server_refused(void **state)
{
	struct fixture *f = *state;
	struct master_server_config cfg = {.listen = "127.0.0.1:0",
					   .max_connections = 1};
	struct master_server *ms;
	char msg[256];

	assert_int_equal(master_server_create(&cfg, f->st, f->stop_fd, &ms, msg,
					      sizeof(msg)),
			 -EBUSY);
}

static void test_port_in_use(void **state)
{
	struct master_server_config cfg = {.listen = "127.0.0.1:0",
					   .max_connections = 1};
	struct fixture *f = *state;
	struct master_server *ms;
	char msg[256], listen_text[64];

	stop(f);
	snprintf(listen_text, sizeof(listen_text), "%s", f->address);
	master_server_destroy(f->ms);
	f->ms = NULL;
	/* bind a socket to a port, then ask the master for the same one */
	{
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_addr.s_addr =
						 htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)),
				 0);
		assert_int_equal(listen(fd, 1), 0);
		getsockname(fd, (struct sockaddr *)&sa, &len);
		snprintf(listen_text, sizeof(listen_text), "127.0.0.1:%u",
			 ntohs(sa.sin_port));
		cfg.listen = listen_text;
		assert_int_equal(master_server_create(&cfg, f->st, f->stop_fd,
						      &ms, msg, sizeof(msg)),
				 -EADDRINUSE);
		assert_non_null(strstr(msg, "another stripe-master?"));
		close(fd);
	}
	cfg.listen = "no-such-host.invalid:1";
	assert_true(master_server_create(&cfg, f->st, f->stop_fd, &ms, msg,
					 sizeof(msg)) < 0);
	cfg.listen = "1.2.3.4:99999";
	assert_int_equal(master_server_create(&cfg, f->st, f->stop_fd, &ms, msg,
					      sizeof(msg)),
			 -EINVAL);
}

/* MS_VDISK_GROW over RPC: the old extents kept, a retry the same, a
 * disk that does not exist refused (issue #21). */
static void test_grow_round_trip(void **state)
{
	struct fixture *f = *state;
	struct master_client *c = client(f);
	ms_alloc_args a = {"d1", 2, 1, 2, 1 * MiB};
	ms_grow_args g = {"d1", 3};
	ms_reply r0, r1, r2;

	add_servers(c, 4);
	assert_int_equal(master_call_vdisk_alloc(c, &a, &r0), 0);
	assert_int_equal(master_call_vdisk_grow(c, &g, &r1), 0);
	assert_true(r1.changed);
	assert_int_equal(r1.body.ms_body_u.vdisk.extents_per_column, 3);
	assert_int_equal(r1.body.ms_body_u.vdisk.extents.extents_len, 12);
	/* column 0's first extent (slots 0, 1) and column 1's (6, 7) */
	assert_memory_equal(r1.body.ms_body_u.vdisk.extents.extents_val,
			    r0.body.ms_body_u.vdisk.extents.extents_val,
			    2 * sizeof(ms_extent));
	assert_memory_equal(&r1.body.ms_body_u.vdisk.extents.extents_val[6],
			    &r0.body.ms_body_u.vdisk.extents.extents_val[2],
			    2 * sizeof(ms_extent));
	assert_int_equal(master_call_vdisk_grow(c, &g, &r2), 0);
	assert_false(r2.changed);
	assert_memory_equal(r1.body.ms_body_u.vdisk.extents.extents_val,
			    r2.body.ms_body_u.vdisk.extents.extents_val,
			    12 * sizeof(ms_extent));
	master_reply_free(&r0);
	master_reply_free(&r1);
	master_reply_free(&r2);
	g.id = "nope";
	assert_int_equal(master_call_vdisk_grow(c, &g, &r1), -ENOENT);
	assert_non_null(strstr(master_client_error(c), "no vdisk nope"));
	master_reply_free(&r1);
	master_client_close(c);
	stop(f);
}

/* --- leases ------------------------------------------------------------------- */

/* Every lease call over RPC; the refusals carry the lease as it is. */
static void test_lease_round_trip(void **state)
{
	struct fixture *f = *state;
	struct master_client *c = client(f);
	ms_alloc_args a = {"d1", 2, 1, 1, 1 * MiB};
	const ms_lease *l;
	ms_reply rep;

	add_servers(c, 2);
	assert_int_equal(master_call_vdisk_alloc(c, &a, &rep), 0);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_acquire(c, "d1", "A", &rep), 0);
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 1);
	master_reply_free(&rep);
	/* another host: -EBUSY, the holder in the body and the message */
	assert_int_equal(master_call_lease_acquire(c, "d1", "B", &rep), -EBUSY);
	assert_int_equal(rep.status, MS_EHELD);
	assert_int_equal(rep.body.kind, MS_BODY_LEASE);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "A");
	assert_non_null(strstr(master_client_error(c), "held by host A"));
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_release(c, "d1", "A", 7, &rep),
			 -ESTALE);
	assert_int_equal(rep.body.ms_body_u.lease.epoch, 1);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_handover(c, "d1", "A", 1, "B", &rep),
			 0);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "B");
	master_reply_free(&rep);
	assert_int_equal(
		master_call_lease_takeover(c, "d1", "A", 2, true, &rep), 0);
	l = &rep.body.ms_body_u.lease;
	assert_string_equal(l->holder, "A");
	assert_string_equal(l->previous, "B");
	assert_int_equal(l->epoch, 3);
	assert_int_equal(l->servers.servers_len, 2);
	assert_non_null(l->servers.servers_val[0].portal);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_show(c, "nope", &rep), -ENOENT);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_acquire(c, "d1", "a b", &rep),
			 -EINVAL);
	master_reply_free(&rep);
	assert_int_equal(master_call_lease_show(c, "d1", &rep), 0);
	assert_string_equal(rep.body.ms_body_u.lease.holder, "A");
	master_reply_free(&rep);
	master_client_close(c);
	stop(f);
	assert_int_equal(f->stats.decode_errors, 0);
}

#define RACE_CALLS 200

struct racer {
	struct fixture *f;
	const char *host, *other;
	uint64_t owner_epochs[RACE_CALLS]; /* epochs acknowledged as held */
	unsigned int nr_owned;
};

static void *lease_racer(void *arg)
{
	struct racer *r = arg;
	struct master_client *c = client(r->f);
	uint64_t epoch = 0;

	for (int i = 0; i < RACE_CALLS; i++) {
		ms_reply rep;
		int ret;

		switch (i % 4) {
		case 0:
			ret = master_call_lease_acquire(c, "d1", r->host, &rep);
			break;
		case 1:
			ret = master_call_lease_takeover(c, "d1", r->host,
							 epoch, false, &rep);
			break;
		case 2:
			ret = master_call_lease_handover(c, "d1", r->host,
							 epoch, r->other, &rep);
			break;
		default:
			ret = master_call_lease_release(c, "d1", r->host, epoch,
							&rep);
		}
		if (rep.body.kind == MS_BODY_LEASE) {
			const ms_lease *l = &rep.body.ms_body_u.lease;

			epoch = l->epoch;
			if (!ret && !strcmp(l->holder, r->host))
				r->owner_epochs[r->nr_owned++] = l->epoch;
		}
		master_reply_free(&rep);
	}
	master_client_close(c);
	return NULL;
}

/* Two hosts race: no epoch is ever acknowledged as held by both. */
static void test_lease_two_hosts_race(void **state)
{
	struct fixture *f = *state;
	struct master_client *c = client(f);
	ms_alloc_args a = {"d1", 1, 1, 1, 1 * MiB};
	struct racer r[2] = {{f, "A", "B", {0}, 0}, {f, "B", "A", {0}, 0}};
	pthread_t t[2];
	char msg[256];
	ms_reply rep;

	add_servers(c, 1);
	assert_int_equal(master_call_vdisk_alloc(c, &a, &rep), 0);
	master_reply_free(&rep);
	master_client_close(c);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, lease_racer, &r[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_true(r[0].nr_owned > 0 && r[1].nr_owned > 0);
	for (unsigned int i = 0; i < r[0].nr_owned; i++)
		for (unsigned int j = 0; j < r[1].nr_owned; j++)
			assert_true(r[0].owner_epochs[i] !=
				    r[1].owner_epochs[j]);
	stop(f);
	assert_int_equal(master_store_check(f->st, msg, sizeof(msg)), 0);
}

int main(void)
{
#define T(name, s) cmocka_unit_test_setup_teardown(name, s, teardown)
	const struct CMUnitTest tests[] = {
		T(test_round_trip, setup),
		T(test_denied_outside_allow_list, setup_denied),
		T(test_undecodable_call_freed, setup),
		T(test_half_record_stalls_nobody, setup),
		T(test_oversized_record_dropped, setup),
		T(test_idle_connection_closed, setup_idle),
		T(test_concurrent_clients, setup),
		T(test_second_server_refused, setup),
		T(test_port_in_use, setup),
		T(test_lease_round_trip, setup),
		T(test_grow_round_trip, setup),
		T(test_lease_two_hosts_race, setup),
	};
#undef T

	signal(SIGPIPE, SIG_IGN);
	td_log_set_level(TD_LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
