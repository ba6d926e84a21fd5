/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * frontend.h - the frontend interface of tapdisk: one table of ops that
 * every server feeding a vbd (NBD, shm, Xen) implements, so that the core
 * (control socket, stats, shutdown) never names a frontend.  The daemon's
 * main passes the table of kinds in, as it does for drivers.
 *
 * A server embeds a struct td_frontend and hands out a pointer to it; the
 * core reaches the server only through fe->ops.  Everything runs in the
 * single event-loop thread.
 */
#ifndef TAPSTRIPE_FRONTEND_H
#define TAPSTRIPE_FRONTEND_H

#include <stdbool.h>

#include "common/json.h"
#include "common/loop.h"
#include "tapdisk/vbd.h"

struct td_frontend;

/* A shutdown is over (see ->shutdown). */
typedef void (*td_frontend_done_fn)(void *opaque);

struct td_frontend_ops {
	/*
	 * The kind, as "stats" names it: "nbd", "shm", "xen".  It is the
	 * JSON key of the frontend's object (null when not serving) and
	 * must never change: tools parse it.
	 */
	const char *name;

	/*
	 * Required.  Create a server for vbd (which must outlive it) from
	 * params, the frontend's own struct td_<name>_params (NULL: the
	 * defaults).  Set-up context: may block briefly (xenstore).  Returns
	 * 0 and *out, or -errno having logged why.
	 */
	int (*create)(struct td_loop *loop, struct td_vbd *vbd,
		      const void *params, struct td_frontend **out);

	/*
	 * Optional.  Serve on addr, in the frontend's own syntax
	 * ("unix:/path", "tcp:HOST:PORT", a socket path).  May be called
	 * more than once; set-up context (name resolution may block).
	 * Returns 0 or -errno having logged why; -ESHUTDOWN once shutting
	 * down.  NULL: td_frontend_listen answers -EOPNOTSUPP.
	 */
	int (*listen)(struct td_frontend *fe, const char *addr);

	/*
	 * Required.  Stop accepting clients and taking requests, let the
	 * requests already taken complete and be answered (bounded by the
	 * frontend's own timeout), close every connection, then call
	 * done(opaque) exactly once, from the event loop, never inside this
	 * call, and only when the vbd holds no I/O of this frontend's that
	 * could still write to its memory.  Returns 0, or -EALREADY when a
	 * shutdown was already asked for (done is then never called).
	 * done may be NULL.
	 */
	int (*shutdown)(struct td_frontend *fe, td_frontend_done_fn done,
			void *opaque);

	/*
	 * Required.  Free the server.  May be called at any time: before,
	 * during or after a shutdown.  Called before the shutdown has
	 * finished it closes every connection at once, and memory the vbd
	 * may still write is left to be freed when that I/O completes.
	 * The pending done of a shutdown is never called after this.
	 */
	void (*destroy)(struct td_frontend *fe);

	/*
	 * Optional.  The frontend's counters for "stats": report_json adds
	 * members to the JSON object the core has opened under ->name;
	 * report_text appends lines (starting with an empty line) to the
	 * text table.  Neither may fail: on memory exhaustion the buffers
	 * drop output and report it.
	 */
	void (*report_json)(struct td_frontend *fe, struct td_json *j);
	void (*report_text)(struct td_frontend *fe, struct td_strbuf *sb);

	/*
	 * Optional.  A command from the control socket ("frontend KIND
	 * WORD...", doc/control-protocol.md), argv[0] its first word.
	 * Appends the answer (text or JSON, ending with LF) to out and
	 * returns 0, or appends a one-line reason and returns -errno
	 * (-EINVAL for words it does not take, -ENOENT for an object that
	 * does not exist).  Event-loop context; must not block.  NULL:
	 * td_frontend_control answers -EOPNOTSUPP.
	 */
	int (*control)(struct td_frontend *fe, int argc, char **argv,
		       struct td_strbuf *out);

	/*
	 * Optional.  The vbd has grown (td_vbd_resize, tap-ctl resize) to
	 * the size td_vbd_get_info now gives: tell the clients what this
	 * transport can tell them and append one line saying what was done
	 * to out.  Event-loop context; must not block.  NULL: the frontend's
	 * clients are not told (td_frontend_resized says so in out).
	 */
	void (*resized)(struct td_frontend *fe, struct td_strbuf *out);

	/*
	 * Optional.  The frontend's families for "stats metrics"
	 * (doc/metrics.md): Prometheus text appended to sb, each family's
	 * "# HELP" and "# TYPE" once, every sample labelled with labels
	 * (disk="NAME") first.  Must not fail, as report_json.
	 */
	void (*report_metrics)(struct td_frontend *fe, const char *labels,
			       struct td_strbuf *sb);
};

/*
 * One server.  ops and loop are set by td_frontend_init; the rest is the
 * shutdown state that frontend.c keeps for every frontend, so that the
 * servers do not each write it again.
 */
struct td_frontend {
	const struct td_frontend_ops *ops;
	struct td_loop *loop;
	bool stopping; /* ->shutdown was called */
	bool stopped;  /* done is scheduled or has run */
	td_frontend_done_fn done;
	void *done_opaque;
	struct td_defer done_defer;
	/* For the server's own shutdown timeout or poll; cancelled when
	 * the shutdown is over and by td_frontend_fini. */
	struct td_timer stop_timer;
};

/* --- for the core ------------------------------------------------------------- */

/* fe->ops->listen, or -EOPNOTSUPP. */
int td_frontend_listen(struct td_frontend *fe, const char *addr);

/* fe->ops->shutdown (contract above). */
int td_frontend_shutdown(struct td_frontend *fe, td_frontend_done_fn done,
			 void *opaque);

/* fe->ops->destroy; NULL does nothing. */
void td_frontend_destroy(struct td_frontend *fe);

/* fe->ops->control, or -EOPNOTSUPP. */
/* The resized op, or a line saying this frontend's clients are not told. */
void td_frontend_resized(struct td_frontend *fe, struct td_strbuf *out);

int td_frontend_control(struct td_frontend *fe, int argc, char **argv,
			struct td_strbuf *out);

/* The ops' reports; nothing when the op is NULL. */
void td_frontend_report_json(struct td_frontend *fe, struct td_json *j);
void td_frontend_report_text(struct td_frontend *fe, struct td_strbuf *sb);
void td_frontend_report_metrics(struct td_frontend *fe, const char *labels,
				struct td_strbuf *sb);

/* --- for the servers: the shutdown they share ---------------------------------- */

void td_frontend_init(struct td_frontend *fe, const struct td_frontend_ops *ops,
		      struct td_loop *loop);

/*
 * Start a shutdown: note done and opaque.  Returns 0, or -EALREADY when
 * one was started already (done is then dropped).
 */
int td_frontend_stop_begin(struct td_frontend *fe, td_frontend_done_fn done,
			   void *opaque);

/*
 * The server has nothing left (idle): once per shutdown, cancel
 * stop_timer and schedule done through the event loop.  Call it whenever
 * something may have become idle; it does nothing while not stopping.
 */
void td_frontend_stop_check(struct td_frontend *fe, bool idle);

/* Cancel stop_timer and a done not yet run (from ->destroy). */
void td_frontend_fini(struct td_frontend *fe);

#endif
