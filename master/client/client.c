/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c - stripe-master's client library (see client.h).
 *
 * The connection is made here (non-blocking connect bounded by the
 * timeout, so a dead host does not hang a caller for minutes) and handed
 * to libtirpc's clnt_vc_create; libtirpc then owns and closes the socket.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "master/addr.h"
#include "master/client/client.h"

#define RETRY_PAUSE_MS	   100 /* times the attempt number */
#define RETRY_PAUSE_MAX_MS 1000
#define US_PER_MS	   1000
#define MS_PER_S	   1000
#define NS_PER_MS	   1000000L
#define NS_PER_S	   1000000000ull

#define ADDRESS_SIZE (MASTER_HOST_MAX + MASTER_PORT_MAX + 4)
#define WHY_SIZE     160 /* one master's reason in a fail-over error */

struct master_endpoint {
	char host[MASTER_HOST_MAX];
	char port[MASTER_PORT_MAX];
	char address[ADDRESS_SIZE];
	char why[WHY_SIZE]; /* why it failed in the current call, or "" */
};

/*
 * One attempt through the transport at c->ep[c->cur]: 0 with rep decoded,
 * or a transport -errno with c->error set.  attempt_call below; the unit
 * tests put a fake here (the only thing they mock).
 */
typedef int (*master_attempt_fn)(struct master_client *c, unsigned int proc,
				 xdrproc_t xargs, const void *args,
				 ms_reply *rep);

struct master_client {
	struct master_endpoint ep[MASTER_CLIENT_MAX_MASTERS];
	unsigned int nr_ep;
	unsigned int cur; /* the one that answered last; c->clnt's */
	char addresses[MASTER_CLIENT_MAX_MASTERS * ADDRESS_SIZE];
	struct master_client_opts opts;
	CLIENT *clnt;
	uint64_t deadline_ns;	   /* of the call in progress */
	unsigned int last_wait_ms; /* the last call attempt's timeout */
	master_attempt_fn attempt;
	char error[MASTER_CLIENT_ERROR_SIZE];
};

static int attempt_call(struct master_client *c, unsigned int proc,
			xdrproc_t xargs, const void *args, ms_reply *rep);

/*
 * The process's last list of several masters and the one of it that
 * answered last: a new client of the same list starts there (tapdisk's
 * lease calls open a client per call).  Guarded by memo_lock.
 */
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static char memo_list[MASTER_CLIENT_MAX_MASTERS * ADDRESS_SIZE];
static unsigned int memo_cur;

static void memo_recall(struct master_client *c)
{
	pthread_mutex_lock(&memo_lock);
	if (!strcmp(memo_list, c->addresses) && memo_cur < c->nr_ep)
		c->cur = memo_cur;
	pthread_mutex_unlock(&memo_lock);
}

static void memo_keep(const struct master_client *c)
{
	pthread_mutex_lock(&memo_lock);
	memcpy(memo_list, c->addresses, sizeof(memo_list));
	memo_cur = c->cur;
	pthread_mutex_unlock(&memo_lock);
}

static void set_error(struct master_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_error(struct master_client *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Add "HOST[:PORT]" (len bytes of text) to the list; 0 or -EINVAL. */
static int add_endpoint(struct master_client *c, const char *text, size_t len)
{
	char one[ADDRESS_SIZE];
	struct master_endpoint *e;

	if (!len || len >= sizeof(one) || c->nr_ep == MASTER_CLIENT_MAX_MASTERS)
		return -EINVAL;
	memcpy(one, text, len);
	one[len] = '\0';
	e = &c->ep[c->nr_ep];
	if (master_split_hostport(one, MS_DEFAULT_PORT, 0, e->host, e->port))
		return -EINVAL;
	snprintf(e->address, sizeof(e->address),
		 strchr(e->host, ':') ? "[%s]:%s" : "%s:%s", e->host, e->port);
	for (unsigned int i = 0; i < c->nr_ep; i++)
		if (!strcmp(c->ep[i].address, e->address))
			return -EINVAL; /* twice: a typo, say so */
	if (c->nr_ep)
		strcat(c->addresses, ",");
	strcat(c->addresses, e->address);
	c->nr_ep++;
	return 0;
}

/* "A,B,C" into c->ep; 0 or -EINVAL.  Commas never occur in HOST[:PORT]. */
static int parse_list(struct master_client *c, const char *list)
{
	const char *p = list, *comma;

	if (!list)
		return -EINVAL;
	for (;;) {
		comma = strchr(p, ',');
		if (add_endpoint(c, p, comma ? (size_t)(comma - p) : strlen(p)))
			return -EINVAL;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

int master_client_open(const char *address,
		       const struct master_client_opts *opts,
		       struct master_client **out)
{
	struct master_client *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	if (parse_list(c, address)) {
		free(c);
		return -EINVAL;
	}
	c->attempt = attempt_call;
	if (c->nr_ep > 1)
		memo_recall(c);
	c->opts.timeout_ms = MASTER_CLIENT_DEFAULT_TIMEOUT_MS;
	c->opts.retries = MASTER_CLIENT_DEFAULT_RETRIES;
	if (opts)
		c->opts = *opts;
	if (!c->opts.timeout_ms)
		c->opts.timeout_ms = MASTER_CLIENT_DEFAULT_TIMEOUT_MS;
	*out = c;
	return 0;
}

static void drop_connection(struct master_client *c)
{
	if (c->clnt)
		clnt_destroy(c->clnt); /* closes the socket (CLSET_FD_CLOSE) */
	c->clnt = NULL;
}

void master_client_set_timeout(struct master_client *c, unsigned int timeout_ms)
{
	c->opts.timeout_ms =
		timeout_ms ? timeout_ms : MASTER_CLIENT_DEFAULT_TIMEOUT_MS;
}

void master_client_set_total(struct master_client *c, unsigned int total_ms)
{
	c->opts.total_ms = total_ms;
}

void master_client_close(struct master_client *c)
{
	if (!c)
		return;
	drop_connection(c);
	free(c);
}

const char *master_client_address(const struct master_client *c)
{
	return c->ep[c->cur].address;
}

const char *master_client_addresses(const struct master_client *c)
{
	return c->addresses;
}

unsigned int master_client_count(const struct master_client *c)
{
	return c->nr_ep;
}

const char *master_client_error(const struct master_client *c)
{
	return c->error;
}

/* The time an attempt may take: timeout_ms, cut to what the call has left
 * (at least 1 ms). */
static unsigned int attempt_ms(const struct master_client *c)
{
	uint64_t now = now_ns(), left_ms;

	if (!c->deadline_ns)
		return c->opts.timeout_ms;
	left_ms = now < c->deadline_ns ? (c->deadline_ns - now) / NS_PER_MS : 0;
	if (left_ms < 1)
		left_ms = 1;
	return left_ms < c->opts.timeout_ms ? (unsigned int)left_ms
					    : c->opts.timeout_ms;
}

/* --- connecting ------------------------------------------------------------- */

/* Connect fd to ai within the timeout; 0 or -errno. */
static int connect_one(int fd, const struct addrinfo *ai, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	socklen_t len = sizeof(int);
	int err = 0, rc;

	if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	while ((rc = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (rc == 0)
		return -ETIMEDOUT;
	if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return -errno;
	return -err;
}

/* A connected, blocking socket (libtirpc's client blocks, with timeouts). */
static int dial(struct master_client *c, int *fd_out,
		struct sockaddr_storage *sa, socklen_t *sa_len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	int ret = -EHOSTUNREACH, one = 1, rc;

	const struct master_endpoint *e = &c->ep[c->cur];

	if ((rc = getaddrinfo(e->host, e->port, &hints, &res))) {
		set_error(c, "cannot resolve %s: %s", e->host,
			  gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family,
				SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (fd < 0) {
			ret = -errno;
			continue;
		}
		ret = connect_one(fd, ai, (int)attempt_ms(c));
		if (!ret && fcntl(fd, F_SETFL, 0) == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
			memcpy(sa, ai->ai_addr, ai->ai_addrlen);
			*sa_len = ai->ai_addrlen;
			*fd_out = fd;
			break;
		}
		close(fd);
	}
	freeaddrinfo(res);
	if (ret)
		set_error(c,
			  "cannot connect to the master at %s: %s: is "
			  "stripe-master running there (see its --listen), "
			  "and is the address right (--master)?",
			  e->address, strerror(-ret));
	return ret;
}

static int connect_master(struct master_client *c)
{
	struct sockaddr_storage sa;
	struct netbuf nb;
	socklen_t len = 0;
	int fd = -1, ret = dial(c, &fd, &sa, &len);

	if (ret)
		return ret;
	nb.buf = &sa;
	nb.len = nb.maxlen = len;
	c->clnt = clnt_vc_create(fd, &nb, STRIPE_MASTER_PROG, STRIPE_MASTER_V1,
				 0, 0);
	if (!c->clnt) {
		close(fd);
		set_error(c, "cannot set up RPC to %s: %s",
			  master_client_address(c), clnt_spcreateerror(""));
		return -ECONNRESET;
	}
	clnt_control(c->clnt, CLSET_FD_CLOSE, NULL);
	return 0;
}

/* --- calls ---------------------------------------------------------------------- */

/* Translate an RPC failure; sets the error text. */
static int rpc_failure(struct master_client *c, enum clnt_stat stat)
{
	struct rpc_err e = {0};

	clnt_geterr(c->clnt, &e);
	const char *address = master_client_address(c);

	set_error(c, "call to the master at %s failed: %s%s%s", address,
		  clnt_sperrno(stat), e.re_errno ? ": " : "",
		  e.re_errno ? strerror(e.re_errno) : "");
	switch (stat) {
	case RPC_TIMEDOUT:
		set_error(c,
			  "the master at %s did not answer within %u ms (it "
			  "may be stopped or overloaded): look at it, or give "
			  "it longer with --timeout",
			  address, c->last_wait_ms);
		return -ETIMEDOUT;
	case RPC_CANTSEND:
	case RPC_CANTRECV:
		return -ECONNRESET;
	case RPC_PROGUNAVAIL:
	case RPC_PROGVERSMISMATCH:
	case RPC_PROCUNAVAIL:
		set_error(c,
			  "%s is not a stripe-master of this version (%s): "
			  "check --master",
			  address, clnt_sperrno(stat));
		return -EPROTONOSUPPORT;
	case RPC_CANTDECODEARGS:
		return -EINVAL;
	default:
		return -EPROTO;
	}
}

/* A failure after which the next master may do better. */
static bool retryable(int err)
{
	return err == -ETIMEDOUT || err == -ECONNRESET ||
	       err == -ECONNREFUSED || err == -EHOSTUNREACH ||
	       err == -ENETUNREACH || err == -EPROTONOSUPPORT;
}

/* Sleep before the next turn, never past the call's deadline. */
static void pause_before_retry(struct master_client *c, unsigned int turn)
{
	long ms = RETRY_PAUSE_MS * (long)turn;
	struct timespec ts;

	if (ms > RETRY_PAUSE_MAX_MS)
		ms = RETRY_PAUSE_MAX_MS;
	if (ms > (long)attempt_ms(c))
		ms = (long)attempt_ms(c);
	ts.tv_sec = ms / MS_PER_S;
	ts.tv_nsec = (ms % MS_PER_S) * NS_PER_MS;
	nanosleep(&ts, NULL);
}

/* One attempt: 0 with rep decoded, or a transport -errno. */
static int attempt_call(struct master_client *c, unsigned int proc,
			xdrproc_t xargs, const void *args, ms_reply *rep)
{
	struct timeval tv;
	enum clnt_stat stat;
	unsigned int ms;
	int ret;

	if (!c->clnt && (ret = connect_master(c)))
		return ret;
	ms = attempt_ms(c); /* the call's share: what the connect left */
	tv.tv_sec = ms / MS_PER_S;
	tv.tv_usec = (long)(ms % MS_PER_S) * US_PER_MS;
	c->last_wait_ms = ms;
	master_reply_init(rep);
	stat = clnt_call(c->clnt, proc, xargs, (caddr_t)args,
			 (xdrproc_t)xdr_ms_reply, (caddr_t)rep, tv);
	if (stat == RPC_SUCCESS)
		return 0;
	ret = rpc_failure(c, stat);
	master_reply_free(rep); /* whatever was decoded */
	drop_connection(c);	/* a late reply must not meet the next call */
	return ret;
}

/* The master's answer: its status as -errno, its message as the error. */
static int answer(struct master_client *c, ms_body_kind body, ms_reply *rep)
{
	if (rep->status != MS_OK && rep->body.kind != MS_BODY_NONE &&
	    rep->body.kind != body) {
		set_error(c,
			  "the master at %s answered with an unexpected "
			  "body: is it the same version as this tool?",
			  master_client_address(c));
		master_reply_free(rep);
		return -EPROTO;
	}
	if (rep->status != MS_OK) {
		set_error(c, "%s", rep->message ? rep->message : "");
		return master_status_errno(rep->status)
			       ? master_status_errno(rep->status)
			       : -EPROTO;
	}
	if (rep->body.kind != body) {
		set_error(c,
			  "the master at %s answered with an unexpected "
			  "body: is it the same version as this tool?",
			  master_client_address(c));
		master_reply_free(rep);
		return -EPROTO;
	}
	c->error[0] = '\0';
	return 0;
}

/* The bound of a whole call (see client.h), in ms. */
static uint64_t total_ms(const struct master_client *c)
{
	if (c->opts.total_ms)
		return c->opts.total_ms;
	return (uint64_t)c->opts.timeout_ms * (c->opts.retries + c->nr_ep) +
	       (uint64_t)RETRY_PAUSE_MAX_MS * c->opts.retries;
}

/* Why the current master failed, short, for the error naming them all. */
static void note_failure(struct master_client *c, int err, const ms_reply *rep)
{
	struct master_endpoint *e = &c->ep[c->cur];

	if (err == -EIO && rep->status == MS_EIO)
		snprintf(e->why, sizeof(e->why),
			 "its store is not available: %s",
			 rep->message ? rep->message : "");
	else if (err == -ETIMEDOUT)
		snprintf(e->why, sizeof(e->why), "no answer in time");
	else if (err == -EPROTONOSUPPORT)
		snprintf(e->why, sizeof(e->why), "not a stripe-master");
	else
		snprintf(e->why, sizeof(e->why), "%s", strerror(-err));
}

/* Every master failed: one error naming each and why (a single master
 * keeps its own detailed error). */
static int give_up(struct master_client *c, int err)
{
	size_t used;

	if (c->nr_ep == 1)
		return err;
	used = (size_t)snprintf(c->error, sizeof(c->error),
				"no master of %u answered", c->nr_ep);
	for (unsigned int i = 0; i < c->nr_ep && used < sizeof(c->error); i++)
		used += (size_t)snprintf(
			c->error + used, sizeof(c->error) - used, "%s %s: %s",
			i ? ";" : " (tried", c->ep[i].address,
			c->ep[i].why[0] ? c->ep[i].why : "not tried in time");
	if (used < sizeof(c->error))
		snprintf(c->error + used, sizeof(c->error) - used,
			 "): is stripe-master running at each (its --listen), "
			 "does its store answer (its log), and is the list "
			 "right (--master, $STRIPE_MASTER or the map's master "
			 "line)?");
	return err;
}

/* One attempt at the current master: 0 (answered MS_OK), the master's
 * status as -errno, or a transport -errno; failures noted. */
static int call_current(struct master_client *c, unsigned int proc,
			xdrproc_t xargs, const void *args, ms_body_kind body,
			ms_reply *rep)
{
	int ret;

	master_reply_free(rep);
	ret = c->attempt(c, proc, xargs, args, rep);
	if (!ret)
		ret = answer(c, body, rep);
	if (ret && (retryable(ret) || (ret == -EIO && rep->status == MS_EIO)))
		note_failure(c, ret, rep);
	return ret;
}

static bool fail_over(int err, const ms_reply *rep)
{
	return retryable(err) || (err == -EIO && rep->status == MS_EIO);
}

int master_client_call(struct master_client *c, unsigned int proc,
		       xdrproc_t xargs, const void *args, ms_body_kind body,
		       ms_reply *rep)
{
	unsigned int first = c->cur;
	int ret = -ETIMEDOUT;

	master_reply_init(rep);
	for (unsigned int i = 0; i < c->nr_ep; i++)
		c->ep[i].why[0] = '\0';
	c->deadline_ns = now_ns() + total_ms(c) * NS_PER_MS;
	for (unsigned int turn = 0;; turn++) {
		for (unsigned int n = 0; n < c->nr_ep; n++) {
			ret = call_current(c, proc, xargs, args, body, rep);
			if (!fail_over(ret, rep))
				goto out;
			if (now_ns() >= c->deadline_ns)
				goto fail;
			if (c->nr_ep > 1) {
				if (n + 1 < c->nr_ep)
					td_warn("%s; trying the next master",
						c->error);
				drop_connection(c);
				c->cur = (c->cur + 1) % c->nr_ep;
			}
		}
		if (turn == c->opts.retries)
			goto fail;
		td_warn("%s; retrying (%u of %u)", c->error, turn + 1,
			c->opts.retries);
		pause_before_retry(c, turn + 1);
		if (now_ns() >= c->deadline_ns)
			goto fail;
	}
fail:
	ret = give_up(c, ret);
out:
	c->deadline_ns = 0;
	if (c->cur != first && !fail_over(ret, rep))
		memo_keep(c); /* another master answered */
	return ret;
}

int master_call_info(struct master_client *c, ms_reply *rep)
{
	return master_client_call(c, MS_INFO, MASTER_XDR_VOID, NULL,
				  MS_BODY_INFO, rep);
}

int master_call_server_add(struct master_client *c, const ms_server_add_args *a,
			   ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_ADD,
				  (xdrproc_t)xdr_ms_server_add_args, a,
				  MS_BODY_SERVER, rep);
}

int master_call_server_drain(struct master_client *c, const ms_server_key *k,
			     ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_DRAIN,
				  (xdrproc_t)xdr_ms_server_key, k,
				  MS_BODY_SERVER, rep);
}

int master_call_server_label(struct master_client *c,
			     const ms_server_label_args *a, ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_LABEL,
				  (xdrproc_t)xdr_ms_server_label_args, a,
				  MS_BODY_SERVER, rep);
}

int master_call_server_remove(struct master_client *c, const ms_server_key *k,
			      ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_REMOVE,
				  (xdrproc_t)xdr_ms_server_key, k, MS_BODY_NONE,
				  rep);
}

int master_call_server_fail(struct master_client *c, const ms_server_key *k,
			    ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_FAIL,
				  (xdrproc_t)xdr_ms_server_key, k,
				  MS_BODY_SERVER, rep);
}

int master_call_server_chap_set(struct master_client *c,
				const ms_server_chap_args *a, ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_CHAP_SET,
				  (xdrproc_t)xdr_ms_server_chap_args, a,
				  MS_BODY_SERVER, rep);
}

int master_call_server_chap_get(struct master_client *c, const ms_server_key *k,
				ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_CHAP_GET,
				  (xdrproc_t)xdr_ms_server_key, k, MS_BODY_CHAP,
				  rep);
}

int master_call_server_status(struct master_client *c, ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_STATUS, MASTER_XDR_VOID, NULL,
				  MS_BODY_SERVER_STATS, rep);
}

int master_call_move_begin(struct master_client *c, const ms_move_args *a,
			   ms_reply *rep)
{
	return master_client_call(c, MS_MOVE_BEGIN, (xdrproc_t)xdr_ms_move_args,
				  a, MS_BODY_MOVE, rep);
}

int master_call_move_commit(struct master_client *c, const ms_move_args *a,
			    ms_reply *rep)
{
	return master_client_call(c, MS_MOVE_COMMIT,
				  (xdrproc_t)xdr_ms_move_args, a, MS_BODY_MOVE,
				  rep);
}

int master_call_move_abort(struct master_client *c, const ms_move_args *a,
			   ms_reply *rep)
{
	return master_client_call(c, MS_MOVE_ABORT, (xdrproc_t)xdr_ms_move_args,
				  a, MS_BODY_MOVE, rep);
}

int master_call_move_list(struct master_client *c, const ms_move_list_args *a,
			  ms_reply *rep)
{
	return master_client_call(c, MS_MOVE_LIST,
				  (xdrproc_t)xdr_ms_move_list_args, a,
				  MS_BODY_MOVES, rep);
}

int master_call_server_list(struct master_client *c, ms_reply *rep)
{
	return master_client_call(c, MS_SERVER_LIST, MASTER_XDR_VOID, NULL,
				  MS_BODY_SERVERS, rep);
}

int master_call_vdisk_alloc(struct master_client *c, const ms_alloc_args *a,
			    ms_reply *rep)
{
	return master_client_call(c, MS_VDISK_ALLOC,
				  (xdrproc_t)xdr_ms_alloc_args, a,
				  MS_BODY_VDISK, rep);
}

int master_call_vdisk_grow(struct master_client *c, const ms_grow_args *a,
			   ms_reply *rep)
{
	return master_client_call(c, MS_VDISK_GROW, (xdrproc_t)xdr_ms_grow_args,
				  a, MS_BODY_VDISK, rep);
}

int master_call_vdisk_snapshot(struct master_client *c,
			       const ms_snapshot_args *a, ms_reply *rep)
{
	return master_client_call(c, MS_VDISK_SNAPSHOT,
				  (xdrproc_t)xdr_ms_snapshot_args, a,
				  MS_BODY_VDISK, rep);
}

int master_call_vdisk_snapshot_done(struct master_client *c, const char *id,
				    ms_reply *rep)
{
	return master_client_call(c, MS_VDISK_SNAPSHOT_DONE,
				  (xdrproc_t)xdr_ms_vdisk_id, &id, MS_BODY_NONE,
				  rep);
}

int master_call_vdisk_lookup(struct master_client *c, const char *id,
			     ms_reply *rep)
{
	return master_client_call(c, MS_VDISK_LOOKUP,
				  (xdrproc_t)xdr_ms_vdisk_id, &id,
				  MS_BODY_VDISK, rep);
}

int master_call_vdisk_release(struct master_client *c, const char *id,
			      ms_reply *rep)
{
	return master_client_call(c, MS_VDISK_RELEASE,
				  (xdrproc_t)xdr_ms_vdisk_id, &id, MS_BODY_NONE,
				  rep);
}

int master_call_vdisk_list(struct master_client *c, const ms_vdisk_list_args *a,
			   ms_reply *rep)
{
	return master_client_call(c, MS_VDISK_LIST,
				  (xdrproc_t)xdr_ms_vdisk_list_args, a,
				  MS_BODY_VDISKS, rep);
}

int master_call_extent_list(struct master_client *c,
			    const ms_extent_list_args *a, ms_reply *rep)
{
	return master_client_call(c, MS_EXTENT_LIST,
				  (xdrproc_t)xdr_ms_extent_list_args, a,
				  MS_BODY_EXTENTS, rep);
}

int master_call_replica_state(struct master_client *c,
			      const ms_replica_state_args *a, ms_reply *rep)
{
	return master_client_call(c, MS_REPLICA_STATE,
				  (xdrproc_t)xdr_ms_replica_state_args, a,
				  MS_BODY_REPLICA, rep);
}

/* --- leases ------------------------------------------------------------------- */

static int lease_call(struct master_client *c, unsigned int proc,
		      const ms_lease_args *a, ms_reply *rep)
{
	return master_client_call(c, proc, (xdrproc_t)xdr_ms_lease_args, a,
				  MS_BODY_LEASE, rep);
}

int master_call_lease_acquire(struct master_client *c, const char *vdisk,
			      const char *host, ms_reply *rep)
{
	ms_lease_args a = {(char *)vdisk, (char *)host, 0, (char *)"", false};

	return lease_call(c, MS_LEASE_ACQUIRE, &a, rep);
}

int master_call_lease_release(struct master_client *c, const char *vdisk,
			      const char *host, uint64_t epoch, ms_reply *rep)
{
	ms_lease_args a = {(char *)vdisk, (char *)host, epoch, (char *)"",
			   false};

	return lease_call(c, MS_LEASE_RELEASE, &a, rep);
}

int master_call_lease_handover(struct master_client *c, const char *vdisk,
			       const char *host, uint64_t epoch, const char *to,
			       ms_reply *rep)
{
	ms_lease_args a = {(char *)vdisk, (char *)host, epoch, (char *)to,
			   false};

	return lease_call(c, MS_LEASE_HANDOVER, &a, rep);
}

int master_call_lease_takeover(struct master_client *c, const char *vdisk,
			       const char *host, uint64_t expected_epoch,
			       bool fence, ms_reply *rep)
{
	ms_lease_args a = {(char *)vdisk, (char *)host, expected_epoch,
			   (char *)"", fence};

	return lease_call(c, MS_LEASE_TAKEOVER, &a, rep);
}

int master_call_lease_show(struct master_client *c, const char *vdisk,
			   ms_reply *rep)
{
	return master_client_call(c, MS_LEASE_SHOW, (xdrproc_t)xdr_ms_vdisk_id,
				  &vdisk, MS_BODY_LEASE, rep);
}

int master_call_lease_fenced(struct master_client *c, const char *vdisk,
			     const char *host, uint64_t epoch, ms_reply *rep)
{
	ms_lease_args a = {(char *)vdisk, (char *)host, epoch, (char *)"",
			   false};

	return lease_call(c, MS_LEASE_FENCED, &a, rep);
}

/* --- hosts -------------------------------------------------------------------- */

int master_call_host_list(struct master_client *c, ms_reply *rep)
{
	return master_client_call(c, MS_HOST_LIST, MASTER_XDR_VOID, NULL,
				  MS_BODY_HOSTS, rep);
}

int master_call_host_readmit(struct master_client *c, const char *host,
			     ms_reply *rep)
{
	return master_client_call(c, MS_HOST_READMIT, (xdrproc_t)xdr_ms_host_id,
				  &host, MS_BODY_HOSTS, rep);
}
