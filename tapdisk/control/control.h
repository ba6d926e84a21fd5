/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * control.h - the control socket of a tapdisk process, and its client.
 *
 * Every tapdisk listens on one Unix stream socket, <run dir>/tapdisk-<pid>.sock
 * (mode 0600; the run dir is --run-dir, else $TAPSTRIPE_RUNDIR, else
 * configure's RUNSTATEDIR/tapstripe, /run/tapstripe on Debian).  Protocol version 1: one text line per request, answered
 * exactly once and in order by "OK <len>\n" and a payload, or by
 * "ERR <ERRNO-NAME> <message>\n".  The grammar, the limits and every
 * command are specified in doc/control-protocol.md.
 */
#ifndef TAPSTRIPE_CONTROL_H
#define TAPSTRIPE_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/json.h"
#include "common/loop.h"
#include "tapdisk/frontend.h"
#include "tapdisk/vbd.h"

#define TD_CTL_PROTOCOL_VERSION 1
#define TD_CTL_LINE_MAX		512
#define TD_CTL_MAX_ARGS		16
#define TD_CTL_REPLY_MAX	(1u << 20)
#define TD_CTL_MAX_CLIENTS	16
#define TD_CTL_IDLE_TIMEOUT_MS	60000
/* A request line not finished, or a reply not taken, this long after it
 * began: the connection is closed (ETIMEDOUT for a line). */
#define TD_CTL_PARTIAL_TIMEOUT_MS 5000
/* When every slot is taken, a newcomer takes the one of the connection
 * without a request in progress that has been quiet longest, if it has
 * been quiet this long (see doc/control-protocol.md, "Limits"). */
#define TD_CTL_EVICT_QUIET_MS 1000
/* How a refusal for want of a slot begins ("ERR EBUSY " and this). */
#define TD_CTL_BUSY_MESSAGE "too many control connections"

#define TD_CTL_MAX_FRONTENDS 8

/* TAPSTRIPE_RUNDIR comes from configure ($(runstatedir)/tapstripe) through
 * Makefile.am's AM_CPPFLAGS. */
#ifndef TAPSTRIPE_RUNDIR
#error "TAPSTRIPE_RUNDIR is not defined: build through Makefile.am (-DTAPSTRIPE_RUNDIR=...)"
#endif
#define TD_CTL_RUN_DIR_DEFAULT TAPSTRIPE_RUNDIR
#define TD_CTL_RUN_DIR_ENV     "TAPSTRIPE_RUNDIR"
#define TD_CTL_SOCK_PREFIX     "tapdisk-"
#define TD_CTL_SOCK_SUFFIX     ".sock"

/* --- server (inside tapdisk's event loop) ---------------------------------- */

struct td_ctl_server;

struct td_ctl_params {
	/* Socket to listen on; NULL listens nowhere (clients come from
	 * td_ctl_server_add_client, as in tests). */
	const char *path;
	struct td_vbd *vbd; /* required; must outlive the server or be
			     * detached by td_ctl_server_finish */
	/*
	 * The frontend kinds the process knows, NULL-terminated, in the
	 * order "stats" reports them (a kind with no server is null in
	 * JSON); NULL: none.  Must outlive the server.
	 */
	const struct td_frontend_ops *const *frontend_table;
	/* The frontends serving the vbd (copied), at most
	 * TD_CTL_MAX_FRONTENDS; each must outlive the server or be detached
	 * by td_ctl_server_finish. */
	struct td_frontend *const *frontends;
	unsigned int nr_frontends;
	/*
	 * Called once, from the event loop (never inside a request's
	 * handling), when a client sends "destroy".  The owner starts its
	 * shutdown and ends it with td_ctl_server_finish().  NULL: destroy
	 * answers ENOTSUP.
	 */
	void (*destroy)(void *opaque);
	void *opaque;
	unsigned int max_clients;	 /* 0: TD_CTL_MAX_CLIENTS */
	unsigned int idle_timeout_ms;	 /* 0: TD_CTL_IDLE_TIMEOUT_MS */
	unsigned int partial_timeout_ms; /* 0: TD_CTL_PARTIAL_TIMEOUT_MS */
	unsigned int evict_quiet_ms;	 /* 0: TD_CTL_EVICT_QUIET_MS */
};

/*
 * Create the server and, when params->path is set, listen there (a stale
 * socket file at that path is replaced).  Returns 0 and *out, or -errno
 * having logged why.
 */
int td_ctl_server_create(struct td_loop *loop,
			 const struct td_ctl_params *params,
			 struct td_ctl_server **out);

/* Name a frontend for "info": kind "nbd", addr "unix:/run/x.sock". */
int td_ctl_server_add_frontend(struct td_ctl_server *ctl, const char *kind,
			       const char *addr);

/* Serve a connected stream socket; the server owns fd from now on. */
int td_ctl_server_add_client(struct td_ctl_server *ctl, int fd);

/*
 * The process is shutting down (a signal, or destroy): a pause waiting for
 * its drain is answered ECANCELED, and pause/resume now answer ESHUTDOWN.
 * The owner resumes the vbd itself if it wants held I/O to finish.
 * Idempotent.
 */
void td_ctl_server_begin_shutdown(struct td_ctl_server *ctl);

/*
 * The shutdown is over: answer every waiting destroy with OK and message
 * (err == 0) or with ERR err message, try once to write every pending
 * reply, and forget the vbd and the frontends (later requests get
 * ESHUTDOWN), so that they may be freed.
 */
void td_ctl_server_finish(struct td_ctl_server *ctl, int err,
			  const char *message);

/* Close every connection, stop listening and remove the socket file. */
void td_ctl_server_destroy(struct td_ctl_server *ctl);

/* --- names and paths (shared by tapdisk and tap-ctl) ------------------------ */

/* override if set, else $TAPSTRIPE_RUNDIR if set, else the default. */
const char *td_ctl_run_dir(const char *override);

/* Create dir and its missing parents (mode 0755).  0 or -errno. */
int td_ctl_make_run_dir(const char *dir);

/* <run_dir>/tapdisk-<pid>.sock.  Returns 0 or -ENAMETOOLONG. */
int td_ctl_socket_path(char *buf, size_t len, const char *run_dir, int pid);

/* --- client (blocking, with a deadline; for tools, not the event loop) ----- */

struct td_ctl_reply {
	int err;		       /* 0 for OK, else -errno from ERR */
	char errname[32];	       /* "EINVAL" when err */
	char message[TD_CTL_LINE_MAX]; /* the ERR message */
	struct td_strbuf payload;      /* the OK payload */
};

void td_ctl_reply_init(struct td_ctl_reply *reply);
void td_ctl_reply_free(struct td_ctl_reply *reply);

/*
 * Parse one status line (without its LF): "OK <len>" sets *payload_len;
 * "ERR <NAME> <message>" fills reply->err, errname and message.
 * Returns 0, or -EPROTO for anything else (including LEN above
 * TD_CTL_REPLY_MAX).
 */
int td_ctl_parse_status(const char *line, struct td_ctl_reply *reply,
			size_t *payload_len);

/* Connect to a control socket.  Returns 0 and *fd, or -errno. */
int td_ctl_connect(const char *path, int *fd);

/*
 * Send one request line (without LF) on fd and read its reply, waiting at
 * most timeout_ms in all (-1: no limit).  Returns 0 when a complete reply
 * was read (which may be an ERR: see reply->err), -ETIMEDOUT, -EPROTO for a
 * malformed reply, -ECONNRESET when the server closed first, or another
 * -errno.  A server that refused the connection (and closed it, so that
 * the request cannot be sent: EPIPE) has its refusal read and returned as
 * a reply (td_ctl_reply_refused).
 */
int td_ctl_request(int fd, const char *line, int timeout_ms,
		   struct td_ctl_reply *reply);

/* Whether reply is the server's refusal of the connection for want of a
 * slot (ERR EBUSY TD_CTL_BUSY_MESSAGE...): worth trying again. */
bool td_ctl_reply_refused(const struct td_ctl_reply *reply);

/* Connect to path, td_ctl_request, close. */
int td_ctl_call(const char *path, const char *line, int timeout_ms,
		struct td_ctl_reply *reply);

/*
 * Wait until the server closes fd's connection.  Returns 0, -ETIMEDOUT,
 * or -EPROTO if it sends anything.
 */
int td_ctl_wait_closed(int fd, int timeout_ms);

#endif
