/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_master.c - libFuzzer harness for the master's RPC decoding: whole
 * calls go through the real dispatcher (master/server/dispatch.c), the real
 * store (SQLite, in /dev/shm) and the group commit, over a fake libtirpc
 * transport; and, with bit 7 of the mode byte set, replies decoded as a
 * client does.  Every call must be answered exactly once, after its
 * commit, and the store's invariants must hold after every input.  The
 * input format, the checks and the store's budget are in tests/README.md
 * ("Inside fuzz_master").
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/hostid.h"
#include "master/server/server-int.h"
#include "master/server/store-int.h"
#include "common/log.h"

#define MAX_CALLS	  32
#define NR_NUMBERS	  256 /* procedure numbers probed at start */
#define FLAG_FOREIGN	  0x01
#define FLAG_END_ROUND	  0x02
#define MODE_CLIENT	  0x80
#define EXTENT_BYTES	  (1ull << 20)
#define PROGRESS_OPS	  16 /* instructions between progress callbacks */
#define STORE_BUDGET_OPS  (1u << 16)
#define MAX_ALLOC_EXTENTS 512u	/* the harness's --max-alloc-extents */
#define FULL_CHECK_EVERY  1024u /* changed inputs between quick_checks */

#define check(cond)                                                   \
	do {                                                          \
		if (!(cond)) {                                        \
			fprintf(stderr, "check failed: %s\n", #cond); \
			abort();                                      \
		}                                                     \
	} while (0)

/* One fake connection: the arguments it carries, what it was answered. */
struct fake_conn {
	SVCXPRT xprt; /* first: the callbacks cast back */
	const uint8_t *args;
	size_t args_len;
	unsigned int replies;
	enum accept_stat last_stat;
};

static struct master_store *store;
static struct master_server server;
static struct fake_conn conns[MAX_CALLS];
static unsigned long budget_left; /* progress callbacks left for this input */
static unsigned long budget_hits; /* inputs that ran out of it */
static unsigned int procs[NR_NUMBERS + 1];
static unsigned int nr_procs; /* found, plus one unknown at the end */
/* In /dev/shm when there is one (fsync is free there), else in /tmp. */
static char dir[] = "/dev/shm/fuzz-master.XXXXXX";
static char dir_tmp[] = "/tmp/fuzz-master.XXXXXX";
static char *dir_path;
static char db_path[sizeof(dir_tmp) + 16];

static struct sockaddr_in loopback = {.sin_family = AF_INET};
static struct sockaddr_in foreign = {.sin_family = AF_INET};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool_t fake_getargs(SVCXPRT *x, xdrproc_t proc, void *where)
{
	struct fake_conn *c = (struct fake_conn *)x;
	XDR xdrs;
	bool_t ok;

	xdrmem_create(&xdrs, (char *)c->args, (u_int)c->args_len, XDR_DECODE);
	ok = proc(&xdrs, where, 0);
	xdr_destroy(&xdrs);
	return ok;
}

static bool_t fake_freeargs(SVCXPRT *x, xdrproc_t proc, void *where)
{
	XDR xdrs = {.x_op = XDR_FREE};

	return proc(&xdrs, where, 0);
}

/* A HOSTS body (MS_HOST_LIST, MS_HOST_READMIT) names well-formed hosts. */
static bool hosts_ok(const ms_reply *rep)
{
	for (u_int i = 0; i < rep->body.ms_body_u.hosts.hosts_len; i++) {
		const ms_fenced_host *h =
			&rep->body.ms_body_u.hosts.hosts_val[i];

		if (!master_host_id_ok(h->host) || !master_host_id_ok(h->by) ||
		    !h->epoch)
			return false;
	}
	return true;
}

/* A server's failure-domain labels are well-formed (issue #19). */
static bool labels_ok(const ms_server *s)
{
	return master_host_id_ok(s->host) &&
	       (!s->rack[0] || master_host_id_ok(s->rack)) &&
	       (!s->site[0] || master_host_id_ok(s->site));
}

/* Every server a SERVER or SERVERS body names is labelled. */
static bool servers_ok(const ms_reply *rep)
{
	if (rep->body.kind == MS_BODY_SERVER)
		return labels_ok(&rep->body.ms_body_u.server);
	if (rep->body.kind == MS_BODY_MOVE) /* issue #19 */
		return labels_ok(&rep->body.ms_body_u.move.old_server) &&
		       labels_ok(&rep->body.ms_body_u.move.new_server);
	for (u_int i = 0; rep->body.kind == MS_BODY_SERVERS &&
			  i < rep->body.ms_body_u.servers.servers_len;
	     i++)
		if (!labels_ok(&rep->body.ms_body_u.servers.servers_val[i]))
			return false;
	return true;
}

/* A CHAP body (issue #20): none, or a well-formed user and secret. */
static bool chap_ok(const ms_reply *rep)
{
	const ms_chap *c = &rep->body.ms_body_u.chap;

	if (!c->user[0] && !c->secret[0])
		return true;
	return master_store_chap_ok(c->user) && master_store_chap_ok(c->secret);
}

/*
 * A reply carries a body only with MS_OK, but for a lease refusal, which
 * names the lease it found (stripe.x); a HOSTS or CHAP body only with
 * MS_OK.
 */
static bool reply_body_ok(const ms_reply *rep)
{
	if (rep->body.kind == MS_BODY_CHAP)
		return rep->status == MS_OK && chap_ok(rep);
	if (rep->body.kind == MS_BODY_HOSTS)
		return rep->status == MS_OK && hosts_ok(rep);
	if (rep->status == MS_OK || rep->body.kind == MS_BODY_NONE)
		return servers_ok(rep);
	return (rep->status == MS_EHELD || rep->status == MS_ESTALE ||
		rep->status == MS_EFENCED) &&
	       rep->body.kind == MS_BODY_LEASE;
}

/*
 * Decode an encoded ms_reply as a client would and free it; from our own
 * master (whole_msg), also check it.
 */
static bool decode_reply(char *buf, u_int len, bool whole_msg)
{
	struct rpc_msg msg = {0};
	ms_reply rep;
	XDR xdrs;
	bool_t ok;

	memset(&rep, 0, sizeof(rep));
	xdrmem_create(&xdrs, buf, len, XDR_DECODE);
	if (whole_msg) {
		msg.acpted_rply.ar_results.where = (caddr_t)&rep;
		msg.acpted_rply.ar_results.proc = (xdrproc_t)xdr_ms_reply;
		ok = xdr_replymsg(&xdrs, &msg);
	} else {
		ok = xdr_ms_reply(&xdrs, &rep);
	}
	xdr_destroy(&xdrs);
	if (ok && whole_msg)
		check(reply_body_ok(&rep));
	xdr_free((xdrproc_t)xdr_ms_reply, (char *)&rep);
	return ok;
}

static bool_t fake_reply(SVCXPRT *x, struct rpc_msg *msg)
{
	struct fake_conn *c = (struct fake_conn *)x;
	bool ms_body =
		msg->rm_reply.rp_stat == MSG_ACCEPTED &&
		msg->acpted_rply.ar_stat == SUCCESS &&
		msg->acpted_rply.ar_results.proc == (xdrproc_t)xdr_ms_reply;
	XDR xdrs;
	u_int len;
	char *buf;

	c->replies++;
	c->last_stat = msg->acpted_rply.ar_stat;
	if (ms_body) {
		const ms_reply *rep =
			(const ms_reply *)msg->acpted_rply.ar_results.where;

		check(reply_body_ok(rep));
	}
	/* Exactly the size needed: ASan sees any write beyond it. */
	len = xdr_sizeof((xdrproc_t)xdr_replymsg, msg);
	check(len > 0 && (buf = malloc(len)));
	xdrmem_create(&xdrs, buf, len, XDR_ENCODE);
	check(xdr_replymsg(&xdrs, msg));
	check(xdr_getpos(&xdrs) == len);
	xdr_destroy(&xdrs);
	if (ms_body)
		check(decode_reply(buf, len, true));
	free(buf);
	return TRUE;
}

static const struct xp_ops fake_ops = {
	.xp_getargs = fake_getargs,
	.xp_reply = fake_reply,
	.xp_freeargs = fake_freeargs,
};

static void conn_init(struct fake_conn *c, const uint8_t *args, size_t len,
		      bool is_foreign)
{
	memset(c, 0, sizeof(*c));
	c->xprt.xp_fd = -1;
	c->xprt.xp_ops = &fake_ops;
	c->xprt.xp_rtaddr.buf = is_foreign ? &foreign : &loopback;
	c->xprt.xp_rtaddr.len = c->xprt.xp_rtaddr.maxlen = sizeof(loopback);
	c->xprt.xp_verf.oa_flavor = AUTH_NONE;
	c->args = args;
	c->args_len = len;
}

static void call(struct fake_conn *c, unsigned int proc)
{
	struct svc_req rq = {
		.rq_prog = STRIPE_MASTER_PROG,
		.rq_vers = STRIPE_MASTER_V1,
		.rq_proc = proc,
		.rq_xprt = &c->xprt,
	};

	rq.rq_cred.oa_flavor = AUTH_NONE;
	master_dispatch(&rq, &c->xprt);
}

/* Is one of the store's transaction-control statements running? */
static bool in_transaction_control(void)
{
	static const enum master_store_stmt control[] = {
		ST_BEGIN,     ST_COMMIT,  ST_ROLLBACK,
		ST_SAVEPOINT, ST_RELEASE, ST_ROLLBACK_TO,
	};

	for (size_t i = 0; i < sizeof(control) / sizeof(control[0]); i++)
		if (sqlite3_stmt_busy(store->stmt[control[i]]))
			return true;
	return false;
}

/*
 * SQLite's progress handler: non-zero interrupts the statement.  Never
 * BEGIN, COMMIT, ROLLBACK or a savepoint: an interrupted BEGIN can leave
 * its transaction open, a state no real error produces.
 */
static int spend_budget(void *arg)
{
	if (in_transaction_control())
		return 0;
	if (budget_left) {
		budget_left--;
		return 0;
	}
	return 1;
}

/*
 * Count the store's work (on) or not (off).  The round's COMMIT and
 * ROLLBACK run uncounted: an interrupted ROLLBACK would leave the
 * transaction open, which only this budget can do (SQLite rolls back on
 * its own after the I/O errors it stands for).
 */
static void count_work(bool on)
{
	sqlite3_progress_handler(store->db, on ? PROGRESS_OPS : 0,
				 on ? spend_budget : NULL, NULL);
}

static void exec_sql(const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(store->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		fprintf(stderr, "fuzz_master: %s: %s\n", sql, msg);
		abort();
	}
}

#define MAX_TABLES 16

/* The tables reset_store empties: all but meta. */
static int add_table(void *arg, int n, char **val, char **col)
{
	char(*names)[64] = arg;
	int i = 0;

	while (i < MAX_TABLES && names[i][0])
		i++;
	check(i < MAX_TABLES && strlen(val[0]) < sizeof(names[i]));
	strcpy(names[i], val[0]);
	return 0;
}

/* Does table from have a foreign key into table to? */
static bool references(const char *from, const char *to)
{
	sqlite3_stmt *s;
	bool yes;

	check(!sqlite3_prepare_v2(store->db,
				  "SELECT 1 FROM pragma_foreign_key_list(?1)"
				  " WHERE \"table\" = ?2",
				  -1, &s, NULL));
	sqlite3_bind_text(s, 1, from, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, to, -1, SQLITE_STATIC);
	yes = sqlite3_step(s) == SQLITE_ROW;
	sqlite3_finalize(s);
	return yes;
}

/*
 * reset_store's SQL: in one transaction a DELETE for every table but meta
 * (E and the schema version stay), each table after those that refer to
 * it, so that the foreign keys stay on.  Turning them off and on again, as
 * this harness once did, makes SQLite expire every prepared statement: the
 * store then compiled its SQL again for each input (a fifth of the time).
 */
static char reset_sql[1024];

static void plan_reset(void)
{
	char names[MAX_TABLES][64] = {{0}};
	bool placed[MAX_TABLES] = {false};
	char *msg = NULL;
	int n = 0, left;

	if (sqlite3_exec(store->db,
			 "SELECT name FROM sqlite_master WHERE type = 'table' "
			 "AND name <> 'meta'",
			 add_table, names, &msg) != SQLITE_OK) {
		fprintf(stderr, "fuzz_master: listing tables: %s\n", msg);
		abort();
	}
	while (n < MAX_TABLES && names[n][0])
		n++;
	strcpy(reset_sql, "BEGIN IMMEDIATE;");
	for (left = n; left > 0;) {
		int before = left;

		for (int i = 0; i < n; i++) {
			bool referred = false;

			for (int j = 0; j < n && !referred && !placed[i]; j++)
				referred = j != i && !placed[j] &&
					   references(names[j], names[i]);
			if (placed[i] || referred)
				continue;
			snprintf(reset_sql + strlen(reset_sql),
				 sizeof(reset_sql) - strlen(reset_sql),
				 "DELETE FROM \"%s\";", names[i]);
			placed[i] = true;
			left--;
		}
		check(left < before); /* no cycle of foreign keys */
	}
	check(strlen(reset_sql) + sizeof("COMMIT") < sizeof(reset_sql));
	strcat(reset_sql, "COMMIT");
}

static void reset_store(void)
{
	exec_sql(reset_sql);
}

static void cleanup(void)
{
	static const char *const suffix[] = {"", "-wal", "-shm"};
	char path[sizeof(db_path) + 8];

	if (budget_hits)
		fprintf(stderr,
			"fuzz_master: %lu inputs ran out of the store's "
			"budget\n",
			budget_hits);
	if (store)
		master_store_close(store);
	store = NULL;
	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", db_path, suffix[i]);
		unlink(path);
	}
	rmdir(dir_path);
}

/* Which numbers does the dispatcher know?  Empty arguments for each. */
static void find_procs(void)
{
	unsigned int unknown = NR_NUMBERS;

	for (unsigned int p = 0; p < NR_NUMBERS; p++) {
		struct fake_conn *c = &conns[0];

		conn_init(c, NULL, 0, false);
		call(c, p);
		master_round_finish(&server);
		check(c->replies == 1);
		if (c->last_stat != PROC_UNAVAIL)
			procs[nr_procs++] = p;
		else if (unknown == NR_NUMBERS)
			unknown = p;
	}
	check(nr_procs > 0 && unknown < NR_NUMBERS);
	procs[nr_procs++] = unknown;
	fprintf(stderr, "fuzz_master: %u procedures (0..%u), unknown %u\n",
		nr_procs - 1, procs[nr_procs - 2], unknown);
	reset_store();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char msg[256];

	td_log_set_level(TD_LOG_ERR);
	td_log_set_stream(fopen("/dev/null", "w"));
	loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	foreign.sin_addr.s_addr = htonl(0xc0000201); /* 192.0.2.1 */
	check((dir_path = mkdtemp(dir)) || (dir_path = mkdtemp(dir_tmp)));
	snprintf(db_path, sizeof(db_path), "%s/master.db", dir_path);
	atexit(cleanup);
	if (master_store_open(db_path, EXTENT_BYTES, &store, msg,
			      sizeof(msg))) {
		fprintf(stderr, "fuzz_master: %s\n", msg);
		abort();
	}
	check(!master_store_set_max_alloc(store, MAX_ALLOC_EXTENTS));
	server.store = store;
	master_netacl_loopback(&server.cfg.acl);
	master_current = &server;
	plan_reset();
	find_procs();
	return 0;
}

/*
 * SQLite keeps an interrupt pending while any statement is active, and the
 * store leaves its prepared statements to be reset when next used: the
 * budget's interrupt would then fail every later statement, BEGIN included
 * (which can leave the transaction open), something no real error does.
 * Resetting them between rounds ends it, as the store's own next use would.
 */
static void settle_statements(void)
{
	sqlite3_stmt *s = NULL;

	while ((s = sqlite3_next_stmt(store->db, s)))
		sqlite3_reset(s);
}

static void end_round(unsigned int first, unsigned int n)
{
	count_work(false);
	master_round_finish(&server);
	settle_statements();
	count_work(true);
	check(!server.round_open && server.nr_pending == 0);
	check(!master_store_in_transaction(store));
	for (unsigned int i = first; i < n; i++)
		check(conns[i].replies == 1);
}

static void client_side(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);

	check(copy);
	memcpy(copy, data, size);
	decode_reply(copy, (u_int)size, false);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int n = 0, round_start = 0;
	int changes;
	size_t pos = 1;
	char msg[256];

	if (!size)
		return 0;
	if (data[0] & MODE_CLIENT) {
		client_side(data + 1, size - 1);
		return 0;
	}
	changes = sqlite3_total_changes(store->db);
	budget_left = STORE_BUDGET_OPS / PROGRESS_OPS;
	count_work(true);
	while (n < MAX_CALLS && pos + 4 <= size) {
		unsigned int proc = procs[data[pos] % nr_procs];
		uint8_t flags = data[pos + 1];
		size_t len = (size_t)data[pos + 2] << 8 | data[pos + 3];

		pos += 4;
		if (len > size - pos)
			len = size - pos;
		conn_init(&conns[n], data + pos, len, flags & FLAG_FOREIGN);
		call(&conns[n], proc);
		n++;
		pos += len;
		if (flags & FLAG_END_ROUND) {
			end_round(round_start, n);
			round_start = n;
			/*
			 * Out of budget: SQLite's interrupt stays pending and
			 * would fail the next round's BEGIN, leaving its
			 * transaction open, which no real error does.
			 */
			if (!budget_left)
				break;
		}
	}
	end_round(round_start, n);
	budget_hits += !budget_left;
	count_work(false);
	if (sqlite3_total_changes(store->db) != changes) {
		static unsigned int changed;
		bool full = ++changed % FULL_CHECK_EVERY == 0;

		if ((full ? master_store_check : master_store_check_invariants)(
			    store, msg, sizeof(msg))) {
			fprintf(stderr, "fuzz_master: %s\n", msg);
			abort();
		}
		reset_store();
	}
	return 0;
}
