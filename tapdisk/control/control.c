/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * control.c - the control socket server of a tapdisk process (protocol in
 * control.h).
 *
 * Each connection is a small state machine driven by td_ctl_pump():
 * write the pending reply, then take the next complete line from the input
 * buffer, then wait for input.  At most one reply is pending per
 * connection, and the input buffer holds at most one line, so a client
 * costs a bounded amount of memory whatever it sends.  A request whose
 * reply comes later (pause, destroy) marks the connection busy: it is
 * neither read nor timed out until the reply is queued.
 *
 * Time limits, so that no client holds a slot it does not use: a line
 * unfinished, or a reply not taken, partial_timeout_ms after it began
 * closes the connection; one with nothing in progress is closed after
 * idle_timeout_ms, or as soon as a newcomer finds every slot taken and it
 * is the quietest (ctl_evictable).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "tapdisk/control/control-int.h"

#define CTL_LISTEN_BACKLOG    16
#define CTL_ACCEPT_BATCH      16     /* connections accepted per pass */
#define CTL_ACCEPT_BACKOFF_US 100000 /* pause accepting when out of fds */
#define CTL_SOCKET_MODE	      0600

/* --- replies ----------------------------------------------------------------- */

void td_ctl_send_ok(struct ctl_client *c, const struct td_strbuf *payload)
{
	td_strbuf_printf(&c->out, "OK %zu\n", payload->len);
	td_strbuf_append(&c->out, td_strbuf_str(payload), payload->len);
}

/* "ERR NAME message\n", the message made one printable line that fits. */
void td_ctl_send_err(struct ctl_client *c, int err, const char *msg)
{
	char name[32], line[TD_CTL_LINE_MAX];
	int n = snprintf(line, sizeof(line), "ERR %s ",
			 td_errno_name(err, name, sizeof(name)));
	size_t i;

	for (i = 0; msg[i] && (size_t)n + i + 2 < sizeof(line); i++)
		line[n + i] = (msg[i] >= 0x20 && msg[i] < 0x7f) ? msg[i] : '?';
	line[n + i] = '\n';
	td_strbuf_append(&c->out, line, (size_t)n + i + 1);
}

/* --- framing ------------------------------------------------------------------ */

/* Handle one line (LF removed, NUL-terminated); may set closing. */
static void ctl_client_line(struct ctl_client *c, char *line, size_t len)
{
	char *argv[TD_CTL_MAX_ARGS + 1], *save = NULL, *word;
	char msg[CTL_MSG_MAX];
	int argc = 0;

	if (len && line[len - 1] == '\r')
		line[--len] = '\0';
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)line[i];

		if ((ch < 0x20 && ch != '\t') || ch >= 0x7f) {
			snprintf(msg, sizeof(msg),
				 "byte 0x%02x at offset %zu is not printable "
				 "ASCII; requests are text lines",
				 ch, i);
			td_ctl_send_err(c, -EPROTO, msg);
			c->closing = true;
			return;
		}
	}
	for (word = strtok_r(line, " \t", &save); word;
	     word = strtok_r(NULL, " \t", &save)) {
		if (argc == TD_CTL_MAX_ARGS) {
			snprintf(msg, sizeof(msg),
				 "too many words in the request (at most %d)",
				 TD_CTL_MAX_ARGS);
			td_ctl_send_err(c, -E2BIG, msg);
			return;
		}
		argv[argc++] = word;
	}
	argv[argc] = NULL;
	if (argc)
		td_ctl_dispatch(c, argc, argv);
}

/* Take the next request from the input buffer.  False when there is none. */
static bool ctl_client_next_line(struct ctl_client *c)
{
	char *lf = memchr(c->in, '\n', c->in_len);
	char line[TD_CTL_LINE_MAX];
	size_t len;

	if (!lf) {
		if (c->in_len == sizeof(c->in)) {
			char msg[CTL_MSG_MAX];

			snprintf(msg, sizeof(msg),
				 "request line too long: the limit is %d bytes "
				 "with the newline",
				 TD_CTL_LINE_MAX);
			td_ctl_send_err(c, -E2BIG, msg);
			c->closing = true;
			return true;
		}
		if (c->eof && c->in_len) {
			td_ctl_send_err(c, -EPROTO,
					"request not ended by a newline");
			c->closing = true;
			return true;
		}
		return false;
	}
	len = (size_t)(lf - c->in);
	memcpy(line, c->in, len);
	line[len] = '\0';
	c->in_len -= len + 1;
	memmove(c->in, lf + 1, c->in_len);
	/* What follows the line began (at the latest) now. */
	c->in_since_ns = c->in_len ? td_now_ns() : 0;
	ctl_client_line(c, line, len);
	return true;
}

static void ctl_client_close(struct ctl_client *c)
{
	struct td_ctl_server *ctl = c->ctl;

	if (ctl->pause_waiter == c)
		ctl->pause_waiter = NULL; /* the vbd still pauses */
	if (ctl->snap_waiter == c)
		ctl->snap_waiter = NULL; /* the snapshot still starts */
	td_loop_del_fd(&c->fde);
	td_loop_timer_cancel(&c->idle);
	close(c->fde.fd);
	TAILQ_REMOVE(&ctl->clients, c, link);
	ctl->nr_clients--;
	td_strbuf_free(&c->out);
	free(c);
}

/* Idle, a line left unfinished, or a reply not taken, for too long. */
static void ctl_client_timeout(struct td_timer *t, void *opaque)
{
	struct ctl_client *c = opaque;
	unsigned int partial_ms = c->ctl->partial_timeout_ms;
	char msg[CTL_MSG_MAX];

	if (c->out_off < c->out.len) {
		td_info("control client %u took no reply for %u ms: closing",
			c->id, partial_ms);
		ctl_client_close(c);
		return;
	}
	if (!c->in_len) {
		td_dbg("control client %u idle for %u ms: closing", c->id,
		       c->ctl->idle_timeout_ms);
		ctl_client_close(c);
		return;
	}
	td_info("control client %u did not finish its request line within "
		"%u ms: closing",
		c->id, partial_ms);
	snprintf(msg, sizeof(msg),
		 "request line not finished within %u ms of its first byte",
		 partial_ms);
	td_ctl_send_err(c, -ETIMEDOUT, msg);
	c->closing = true;
	td_ctl_pump(c); /* may free c */
}

/* Write what the socket takes.  0 (maybe partial) or -errno. */
static int ctl_client_write(struct ctl_client *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n = send(c->fde.fd, c->out.data + c->out_off,
				 c->out.len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c->out_off += (size_t)n;
	}
	return 0;
}

/*
 * Wait for events (0: only errors and hang-ups), with the time limit that
 * goes with them: a reply to write (EPOLLOUT) or a line to finish get
 * partial_timeout_ms from when they began, nothing in progress
 * idle_timeout_ms from now, a busy connection none.
 */
static int ctl_client_watch(struct ctl_client *c, uint32_t events)
{
	struct td_ctl_server *ctl = c->ctl;
	uint64_t now = td_now_ns(), since = now, end;
	unsigned int limit_ms = 0;

	if (events == EPOLLOUT) {
		if (!c->out_since_ns)
			c->out_since_ns = now;
		since = c->out_since_ns;
		limit_ms = ctl->partial_timeout_ms;
	} else if (events == EPOLLIN && c->in_len) {
		since = c->in_since_ns ? c->in_since_ns : now;
		limit_ms = ctl->partial_timeout_ms;
	} else if (events == EPOLLIN) {
		limit_ms = ctl->idle_timeout_ms;
	}
	if (limit_ms) {
		end = since + (uint64_t)limit_ms * 1000000;
		td_loop_timer_arm(ctl->loop, &c->idle,
				  end > now ? (end - now) / 1000 : 0,
				  ctl_client_timeout, c);
	} else {
		td_loop_timer_cancel(&c->idle);
	}
	return td_loop_mod_fd(&c->fde, events);
}

/* See control-int.h. */
void td_ctl_pump(struct ctl_client *c)
{
	for (;;) {
		if (td_strbuf_error(&c->out) || ctl_client_write(c))
			goto close;
		if (c->out_off < c->out.len) {
			if (ctl_client_watch(c, EPOLLOUT))
				goto close;
			return;
		}
		if (c->out.len)
			c->active_ns = td_now_ns(); /* a reply taken */
		td_strbuf_reset(&c->out);
		c->out_off = 0;
		c->out_since_ns = 0;
		if (c->closing)
			goto close;
		if (c->busy) {
			if (ctl_client_watch(c, 0))
				goto close;
			return;
		}
		if (ctl_client_next_line(c))
			continue;
		if (c->eof)
			goto close;
		if (ctl_client_watch(c, EPOLLIN))
			goto close;
		return;
	}
close:
	ctl_client_close(c);
}

static void ctl_client_event(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct ctl_client *c = opaque;

	if (events & EPOLLERR) {
		ctl_client_close(c);
		return;
	}
	if ((events & EPOLLIN) && c->in_len < sizeof(c->in)) {
		ssize_t n = read(fde->fd, c->in + c->in_len,
				 sizeof(c->in) - c->in_len);

		if (n > 0) {
			c->active_ns = td_now_ns();
			if (!c->in_len)
				c->in_since_ns = c->active_ns;
			c->in_len += (size_t)n;
		} else if (n == 0)
			c->eof = true;
		else if (errno != EAGAIN && errno != EINTR)
			c->closing = true;
	} else if (events & EPOLLHUP) {
		/* Gone for good while we were not reading: nobody to answer. */
		ctl_client_close(c);
		return;
	}
	td_ctl_pump(c);
}

/* --- connections ------------------------------------------------------------- */

/*
 * The connection a newcomer may take the slot of when all are taken: of
 * those with no request in progress (idle, or a line unfinished; not
 * busy, no reply pending), the one quiet longest, if for evict_quiet_ms.
 * A client that sent its request is never evicted before it is read: it
 * was active when it connected, and the reply follows at once.
 */
static struct ctl_client *ctl_evictable(struct td_ctl_server *ctl)
{
	uint64_t now = td_now_ns(),
		 quiet_ns = (uint64_t)ctl->evict_quiet_ms * 1000000;
	struct ctl_client *c, *best = NULL;

	TAILQ_FOREACH(c, &ctl->clients, link)
	{
		if (c->busy || c->wants_destroy || c->closing ||
		    c->out_off < c->out.len || ctl->pause_waiter == c ||
		    ctl->snap_waiter == c || now - c->active_ns < quiet_ns)
			continue;
		if (!best || c->active_ns < best->active_ns)
			best = c;
	}
	return best;
}

/* Close c to make room, telling it why (it may try again). */
static void ctl_evict(struct ctl_client *c)
{
	char msg[CTL_MSG_MAX];

	snprintf(msg, sizeof(msg),
		 TD_CTL_BUSY_MESSAGE
		 ": this one had no request in progress "
		 "for %llu ms and gave its place to a new one",
		 (unsigned long long)((td_now_ns() - c->active_ns) / 1000000));
	td_info("control client %u: %s", c->id, msg);
	td_ctl_send_err(c, -EBUSY, msg);
	(void)ctl_client_write(c); /* once: it may not be reading */
	ctl_client_close(c);
}

int td_ctl_server_add_client(struct td_ctl_server *ctl, int fd)
{
	static const char busy[] =
		"ERR EBUSY " TD_CTL_BUSY_MESSAGE "; try again later\n";
	struct ctl_client *c;
	int err;

	if (ctl->nr_clients >= ctl->max_clients && (c = ctl_evictable(ctl)))
		ctl_evict(c);
	if (ctl->nr_clients >= ctl->max_clients) {
		td_warn("refusing a control connection: %u already open, "
			"each with a request in progress or active in the "
			"last %u ms",
			ctl->nr_clients, ctl->evict_quiet_ms);
		(void)send(fd, busy, sizeof(busy) - 1,
			   MSG_NOSIGNAL | MSG_DONTWAIT);
		close(fd);
		return -EBUSY;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->ctl = ctl;
	c->id = ++ctl->next_id;
	c->active_ns = td_now_ns();
	td_strbuf_init(&c->out);
	err = td_loop_add_fd(ctl->loop, &c->fde, fd, EPOLLIN, ctl_client_event,
			     c);
	if (err) {
		close(fd);
		free(c);
		return err;
	}
	TAILQ_INSERT_TAIL(&ctl->clients, c, link);
	ctl->nr_clients++;
	ctl_client_watch(c, EPOLLIN);
	return 0;
}

static void ctl_accept_resume(struct td_timer *t, void *opaque)
{
	struct td_ctl_server *ctl = opaque;

	td_loop_mod_fd(&ctl->listen_fde, EPOLLIN);
}

static void ctl_accept(struct td_fd *fde, uint32_t events, void *opaque)
{
	struct td_ctl_server *ctl = opaque;

	for (int i = 0; i < CTL_ACCEPT_BATCH; i++) {
		int fd = accept4(fde->fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			td_ctl_server_add_client(ctl, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		/* Out of fds or memory: the listener would stay readable. */
		td_warn("cannot accept a control connection: %s; retrying in "
			"%u ms",
			strerror(errno), CTL_ACCEPT_BACKOFF_US / 1000);
		td_loop_mod_fd(fde, 0);
		td_loop_timer_arm(ctl->loop, &ctl->accept_backoff,
				  CTL_ACCEPT_BACKOFF_US, ctl_accept_resume,
				  ctl);
		return;
	}
}

/* Replace a stale socket at path; refuse to remove anything else. */
static int ctl_remove_stale(const char *path)
{
	struct stat st;

	if (lstat(path, &st)) {
		if (errno == ENOENT)
			return 0;
		td_err("cannot check %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		td_err("%s exists and is not a socket: remove it or use "
		       "another "
		       "--run-dir",
		       path);
		return -EEXIST;
	}
	if (unlink(path) && errno != ENOENT) {
		td_err("cannot remove the stale socket %s: %s", path,
		       strerror(errno));
		return -errno;
	}
	return 0;
}

static int ctl_bind(int fd, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int err;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		td_err("control socket path %s is longer than %zu bytes: use a "
		       "shorter --run-dir",
		       path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	if ((err = ctl_remove_stale(path)))
		return err;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		td_err("cannot bind the control socket %s: %s", path,
		       strerror(errno));
		return err;
	}
	/* Whoever may connect may pause or destroy the disk: owner only. */
	if (chmod(path, CTL_SOCKET_MODE) || listen(fd, CTL_LISTEN_BACKLOG)) {
		err = -errno;
		td_err("cannot listen on %s: %s", path, strerror(errno));
		unlink(path);
		return err;
	}
	return 0;
}

static int ctl_listen(struct td_ctl_server *ctl, const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err;

	if (fd < 0) {
		err = -errno;
		td_err("cannot create the control socket: %s", strerror(errno));
		return err;
	}
	ctl->path = strdup(path);
	err = ctl->path ? ctl_bind(fd, path) : -ENOMEM;
	if (!err) {
		err = td_loop_add_fd(ctl->loop, &ctl->listen_fde, fd, EPOLLIN,
				     ctl_accept, ctl);
		if (err)
			unlink(path);
	}
	if (err) {
		free(ctl->path);
		ctl->path = NULL;
		close(fd);
		return err;
	}
	ctl->listen_fd = fd;
	return 0;
}

/* --- the server ---------------------------------------------------------------- */

int td_ctl_server_create(struct td_loop *loop,
			 const struct td_ctl_params *params,
			 struct td_ctl_server **out)
{
	struct td_ctl_server *ctl;
	int err;

	if (!params->vbd || params->nr_frontends > TD_CTL_MAX_FRONTENDS)
		return -EINVAL;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->loop = loop;
	ctl->vbd = params->vbd;
	ctl->kinds = params->frontend_table;
	for (unsigned int i = 0; i < params->nr_frontends; i++)
		ctl->servers[i] = params->frontends[i];
	ctl->nr_servers = params->nr_frontends;
	ctl->destroy_cb = params->destroy;
	ctl->opaque = params->opaque;
	ctl->max_clients = params->max_clients ?: TD_CTL_MAX_CLIENTS;
	ctl->idle_timeout_ms =
		params->idle_timeout_ms ?: TD_CTL_IDLE_TIMEOUT_MS;
	ctl->partial_timeout_ms =
		params->partial_timeout_ms ?: TD_CTL_PARTIAL_TIMEOUT_MS;
	ctl->evict_quiet_ms = params->evict_quiet_ms ?: TD_CTL_EVICT_QUIET_MS;
	ctl->listen_fd = -1;
	ctl->start_ns = td_now_ns();
	TAILQ_INIT(&ctl->clients);
	if (params->path && (err = ctl_listen(ctl, params->path))) {
		free(ctl);
		return err;
	}
	*out = ctl;
	return 0;
}

int td_ctl_server_add_frontend(struct td_ctl_server *ctl, const char *kind,
			       const char *addr)
{
	struct td_report_frontend *fe;

	if (ctl->nr_frontends == TD_CTL_MAX_FRONTENDS)
		return -E2BIG;
	if (strlen(kind) >= sizeof(fe->kind) ||
	    strlen(addr) >= sizeof(fe->addr))
		return -ENAMETOOLONG;
	fe = &ctl->frontends[ctl->nr_frontends++];
	strcpy(fe->kind, kind);
	strcpy(fe->addr, addr);
	return 0;
}

void td_ctl_server_begin_shutdown(struct td_ctl_server *ctl)
{
	if (ctl->shutting_down)
		return;
	ctl->shutting_down = true;
	td_ctl_cancel_pause(ctl, "pause cancelled: tapdisk is shutting down");
}

void td_ctl_server_finish(struct td_ctl_server *ctl, int err,
			  const char *message)
{
	struct ctl_client *c, *next;
	struct td_strbuf payload;

	td_ctl_server_begin_shutdown(ctl);
	ctl->vbd = NULL;
	ctl->nr_servers = 0;
	td_loop_defer_cancel(ctl->loop, &ctl->destroy_defer);
	td_strbuf_init(&payload);
	td_strbuf_printf(&payload, "%s\n", message);
	for (c = TAILQ_FIRST(&ctl->clients); c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (c->wants_destroy) {
			if (err)
				td_ctl_send_err(c, err, message);
			else
				td_ctl_send_ok(c, &payload);
			c->wants_destroy = false;
			c->busy = false;
			c->closing = true;
		}
		td_ctl_pump(c); /* may free c */
	}
	td_strbuf_free(&payload);
}

void td_ctl_server_destroy(struct td_ctl_server *ctl)
{
	struct ctl_client *c;

	if (!ctl)
		return;
	while ((c = TAILQ_FIRST(&ctl->clients)))
		ctl_client_close(c);
	td_loop_defer_cancel(ctl->loop, &ctl->destroy_defer);
	td_loop_timer_cancel(&ctl->accept_backoff);
	if (ctl->path) {
		td_loop_del_fd(&ctl->listen_fde);
		close(ctl->listen_fd);
		if (unlink(ctl->path) && errno != ENOENT)
			td_warn("cannot remove %s: %s", ctl->path,
				strerror(errno));
		free(ctl->path);
	}
	free(ctl);
}
