/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * control-int.h - what the two halves of the control server share:
 * control.c (sockets, framing, connections) and control-cmd.c (the
 * commands).  Not for use outside tapdisk/control*.c.
 */
#ifndef TAPSTRIPE_CONTROL_INT_H
#define TAPSTRIPE_CONTROL_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "tapdisk/control/control.h"
#include "tapdisk/stats-format.h"

#define CTL_MSG_MAX  256 /* an ERR message, before truncation to the line */
#define CTL_DEFERRED 1	 /* a handler's return: the reply comes later */

struct ctl_client {
	TAILQ_ENTRY(ctl_client) link;
	struct td_ctl_server *ctl;
	struct td_fd fde;
	struct td_timer idle;  /* idle, partial-line or stalled-reply timeout */
	unsigned int id;       /* for logs */
	uint64_t active_ns;    /* connected, last read or reply written */
	uint64_t in_since_ns;  /* first byte of the unfinished line; 0: none */
	uint64_t out_since_ns; /* the reply began waiting for the peer; 0 */
	char in[TD_CTL_LINE_MAX];
	size_t in_len;
	struct td_strbuf out; /* one reply; out_off bytes already written */
	size_t out_off;
	bool busy;	    /* a reply will come later (pause, destroy) */
	bool eof;	    /* the client will send nothing more */
	bool closing;	    /* close once out is written */
	bool wants_destroy; /* answered by td_ctl_server_finish */
};

TAILQ_HEAD(ctl_client_list, ctl_client);

struct td_ctl_server {
	struct td_loop *loop;
	struct td_vbd *vbd; /* NULL once finished */
	const struct td_frontend_ops *const *kinds;
	struct td_frontend *servers[TD_CTL_MAX_FRONTENDS];
	unsigned int nr_servers; /* 0 once finished */
	void (*destroy_cb)(void *opaque);
	void *opaque;
	unsigned int max_clients;
	unsigned int idle_timeout_ms;
	unsigned int partial_timeout_ms;
	unsigned int evict_quiet_ms;

	char *path; /* NULL when not listening */
	int listen_fd;
	struct td_fd listen_fde;
	struct td_timer accept_backoff;

	struct ctl_client_list clients;
	unsigned int nr_clients;
	unsigned int next_id;

	struct ctl_client *pause_waiter; /* gets the reply of "pause" */
	bool pausing;			 /* td_vbd_pause called, not drained */
	struct ctl_client *snap_waiter;	 /* gets "snapshot start"'s reply */
	bool snap_starting;		 /* the snapshot marks its instant */
	bool shutting_down;
	bool destroy_requested;
	struct td_defer destroy_defer;

	struct td_report_frontend frontends[TD_CTL_MAX_FRONTENDS];
	unsigned int nr_frontends;
	uint64_t start_ns;
};

/* Queue "OK <len>\n<payload>" on c. */
void td_ctl_send_ok(struct ctl_client *c, const struct td_strbuf *payload);

/* Queue "ERR <NAME> <msg>\n" on c, msg made one printable line. */
void td_ctl_send_err(struct ctl_client *c, int err, const char *msg);

/*
 * Advance c as far as it goes without waiting: write, then handle the
 * next buffered request.  May free c.
 */
void td_ctl_pump(struct ctl_client *c);

/*
 * Run one request (argv[0] the command): queue its reply, or mark c busy
 * when the reply comes later.
 */
void td_ctl_dispatch(struct ctl_client *c, int argc, char **argv);

/* Call off a pause still waiting for its drain; its client gets ECANCELED. */
void td_ctl_cancel_pause(struct td_ctl_server *ctl, const char *why);

#endif
