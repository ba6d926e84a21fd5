/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * control.h - the control socket of a tapdisk process, and its client.
 *
 * Every tapdisk process listens on one Unix stream socket,
 * <run dir>/tapdisk-<pid>.sock (mode 0600).  The run dir is the --run-dir
 * option, else $TAPSTRIPE_RUNDIR, else /run/tapstripe.  tap-ctl finds the
 * tapdisks of a host by listing that directory.
 *
 * Protocol (version 1).  Text, line-framed, one request at a time:
 *
 *   request  = WORD *( SP WORD ) LF
 *              at most TD_CTL_LINE_MAX bytes with the LF; a CR before the
 *              LF is ignored; words are separated by spaces or tabs; only
 *              printable ASCII (0x20-0x7e) and tab are allowed; at most
 *              TD_CTL_MAX_ARGS words.  Empty lines are ignored (no reply).
 *   response = "OK" SP LEN LF PAYLOAD
 *              LEN is the decimal byte count of PAYLOAD (0 to
 *              TD_CTL_REPLY_MAX), which is text or JSON ending with LF.
 *            | "ERR" SP ERRNO-NAME SP MESSAGE LF
 *              ERRNO-NAME as in <errno.h> ("EINVAL"), MESSAGE one line of
 *              printable ASCII saying what went wrong and what to do.
 *
 * Every request gets exactly one response, in order; the server reads the
 * next request only after the previous response has been written, so a
 * client may pipeline.  The server closes the connection after replying
 * "ERR E2BIG" to an over-long line or "ERR EPROTO" to a byte outside the
 * allowed set, and silently after TD_CTL_IDLE_TIMEOUT_MS without a
 * request or when TD_CTL_MAX_CLIENTS are already connected (after one
 * "ERR EBUSY" line).  Any other error keeps the connection.
 *
 * Commands:
 *   help              the list of commands
 *   info [json]       "key: value" lines: pid, name, state, chain,
 *                     size_bytes, size, sector_size, read_only, features,
 *                     max_io_bytes, boundary_bytes, frontend (repeated:
 *                     "frontend: nbd unix:/path", "frontend: shm /path"),
 *                     uptime_us
 *   stats [json]      counters of the vbd, of each frontend (NBD, shm
 *                     and Xen, their rings included: each frontend's
 *                     report op, frontend.h) and of the process (see
 *                     stats-format.h)
 *   pause             hold new I/O and wait for the I/O in flight; the
 *                     reply comes once nothing is in flight (ECANCELED if
 *                     a resume or destroy comes first; EALREADY if paused)
 *   resume            release the held I/O, in order (EALREADY if running)
 *   destroy           shut the process down gracefully: stop the
 *                     frontends, finish and flush every acknowledged
 *                     write, close the disk; the reply comes at the end
 *                     and the process exits right after it
 *   driver NAME WORD...
 *                     a command for the driver NAME of the chain (its
 *                     ->control op, driver.h), e.g. "driver stripe
 *                     resync 50M"; ENOENT when the chain has no such
 *                     driver, EOPNOTSUPP when it takes no commands
 * While the process shuts down only help, info, stats and destroy work;
 * pause, resume and driver answer ESHUTDOWN.
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
#define TD_CTL_MAX_ARGS		8
#define TD_CTL_REPLY_MAX	(1u << 20)
#define TD_CTL_MAX_CLIENTS	16
#define TD_CTL_IDLE_TIMEOUT_MS	60000
#define TD_CTL_MAX_FRONTENDS	8

#define TD_CTL_RUN_DIR_DEFAULT "/run/tapstripe"
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
	unsigned int max_clients;     /* 0: TD_CTL_MAX_CLIENTS */
	unsigned int idle_timeout_ms; /* 0: TD_CTL_IDLE_TIMEOUT_MS */
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
 * -errno.
 */
int td_ctl_request(int fd, const char *line, int timeout_ms,
		   struct td_ctl_reply *reply);

/* Connect to path, td_ctl_request, close. */
int td_ctl_call(const char *path, const char *line, int timeout_ms,
		struct td_ctl_reply *reply);

/*
 * Wait until the server closes fd's connection.  Returns 0, -ETIMEDOUT,
 * or -EPROTO if it sends anything.
 */
int td_ctl_wait_closed(int fd, int timeout_ms);

#endif
