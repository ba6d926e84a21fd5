/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-tls.c - access control of the NBD export: NBD_OPT_STARTTLS with
 * GnuTLS (PSK and X.509 credentials, TLS optional or required) and the
 * allow-list of TCP source addresses.  Contract in nbd-tls.h.
 *
 * Never blocks: the socket is non-blocking, gnutls_handshake and the
 * record calls return GNUTLS_E_AGAIN, and gnutls_record_get_direction
 * says which fd event to wait for.  The PSK file is read once, at
 * set-up; a handshake looks keys up in memory.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <gnutls/gnutls.h>

#include "frontends/nbd/nbd-int.h"

/* PSK key exchanges are off in GnuTLS's NORMAL; they must be named. */
#define NBD_TLS_PRIORITY     "NORMAL"
#define NBD_TLS_PRIORITY_PSK "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK"
/*
 * Plaintext corked per gnutls_record_uncork: replies are gathered into
 * full 16 KiB records (a 4 KiB READ's header and data in one) while the
 * copy GnuTLS keeps stays small.
 */
#define NBD_TLS_CORK_BYTES (128u << 10)
#define NBD_PSK_USER_MAX   255 /* bytes of a username */
#define NBD_PSK_KEY_MAX	   256 /* bytes of a key (psktool: 32) */
#define NBD_PSK_MAX_KEYS   4096
#define NBD_X509_PATH_MAX  4096

struct nbd_psk_key {
	char *user;
	uint8_t *key;
	size_t key_bytes;
};

struct nbd_tls_server {
	enum td_nbd_tls_mode mode;
	gnutls_psk_server_credentials_t psk;
	gnutls_certificate_credentials_t x509;
	gnutls_priority_t priority;
	struct nbd_psk_key *keys;
	unsigned int nr_keys;
	struct td_nbd_cidr allow[TD_NBD_MAX_ALLOW];
	unsigned int nr_allow;
};

enum nbd_tls_state {
	NBD_TLS_ACK,	   /* STARTTLS's ACK still to write, in plaintext */
	NBD_TLS_HANDSHAKE, /* gnutls_handshake until it succeeds */
	NBD_TLS_ON,	   /* records */
};

struct nbd_tls {
	gnutls_session_t session;
	enum nbd_tls_state state;
	bool hs_wants_out;   /* the handshake waits for EPOLLOUT */
	bool recv_wants_out; /* a record recv waits for EPOLLOUT */
	bool flush_pending;  /* an uncork returned GNUTLS_E_AGAIN */
};

/* --- parameters ------------------------------------------------------------------ */

int td_nbd_tls_parse_mode(const char *text, enum td_nbd_tls_mode *out)
{
	if (!strcmp(text, "off"))
		*out = TD_NBD_TLS_OFF;
	else if (!strcmp(text, "on"))
		*out = TD_NBD_TLS_ON;
	else if (!strcmp(text, "require"))
		*out = TD_NBD_TLS_REQUIRE;
	else
		return -EINVAL;
	return 0;
}

/* Whether the bits of addr past prefix_bits are all zero. */
static bool cidr_host_bits_zero(const uint8_t *addr, unsigned int len,
				unsigned int prefix_bits)
{
	for (unsigned int bit = prefix_bits; bit < len * 8; bit++)
		if (addr[bit / 8] & (0x80u >> (bit % 8)))
			return false;
	return true;
}

int td_nbd_parse_cidr(const char *text, struct td_nbd_cidr *out)
{
	const char *slash = strchr(text, '/');
	char host[INET6_ADDRSTRLEN];
	size_t len = slash ? (size_t)(slash - text) : strlen(text);
	unsigned int max_bits;
	long long bits;
	char *end;

	if (!len || len >= sizeof(host))
		return -EINVAL;
	memcpy(host, text, len);
	host[len] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, host, out->addr) == 1)
		out->family = AF_INET;
	else if (inet_pton(AF_INET6, host, out->addr) == 1)
		out->family = AF_INET6;
	else
		return -EINVAL;
	max_bits = out->family == AF_INET ? 32 : 128;
	bits = max_bits;
	if (slash) {
		if (slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		errno = 0;
		bits = strtoll(slash + 1, &end, 10);
		if (errno || *end || bits > max_bits)
			return -EINVAL;
	}
	out->prefix_bits = (unsigned int)bits;
	if (!cidr_host_bits_zero(out->addr, max_bits / 8, out->prefix_bits))
		return -EINVAL;
	return 0;
}

/* The address bytes of sa, IPv4-mapped IPv6 as IPv4; NULL otherwise. */
static const uint8_t *sockaddr_bytes(const struct sockaddr *sa, int *family)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0,    0,
					     0, 0, 0, 0, 0xff, 0xff};
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET) {
		*family = AF_INET;
		return (const uint8_t *)&((const struct sockaddr_in *)sa)
			->sin_addr;
	}
	if (sa->sa_family != AF_INET6)
		return NULL;
	if (!memcmp(s6->sin6_addr.s6_addr, v4mapped, sizeof(v4mapped))) {
		*family = AF_INET;
		return s6->sin6_addr.s6_addr + sizeof(v4mapped);
	}
	*family = AF_INET6;
	return s6->sin6_addr.s6_addr;
}

bool td_nbd_cidr_match(const struct td_nbd_cidr *c, const struct sockaddr *sa)
{
	int family;
	const uint8_t *a = sockaddr_bytes(sa, &family);
	unsigned int full = c->prefix_bits / 8, rest = c->prefix_bits % 8;

	if (!a || family != c->family || memcmp(a, c->addr, full))
		return false;
	return !rest || !((a[full] ^ c->addr[full]) & (0xffu << (8 - rest)));
}

/* --- the PSK file ------------------------------------------------------------------ */

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * One line "username:hexkey" (newline stripped) into k.  0, -EINVAL with
 * *why set, or -ENOMEM.
 */
static int psk_parse_line(char *line, struct nbd_psk_key *k, const char **why)
{
	char *colon = strchr(line, ':');
	size_t hex_len;

	if (!colon || colon == line) {
		*why = "expected username:hexkey";
		return -EINVAL;
	}
	*colon = '\0';
	hex_len = strlen(colon + 1);
	if (colon - line > NBD_PSK_USER_MAX) {
		*why = "username longer than 255 bytes";
		return -EINVAL;
	}
	if (!hex_len || hex_len % 2 || hex_len / 2 > NBD_PSK_KEY_MAX) {
		*why = "the key must be 1 to 256 bytes in hex digits";
		return -EINVAL;
	}
	k->key_bytes = hex_len / 2;
	k->user = strdup(line);
	k->key = malloc(k->key_bytes);
	if (!k->user || !k->key)
		return -ENOMEM;
	for (size_t i = 0; i < k->key_bytes; i++) {
		int hi = hex_digit(colon[1 + 2 * i]);
		int lo = hex_digit(colon[2 + 2 * i]);

		if (hi < 0 || lo < 0) {
			*why = "the key holds a character that is not hex";
			return -EINVAL;
		}
		k->key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static void psk_free_keys(struct nbd_tls_server *ts)
{
	for (unsigned int i = 0; i < ts->nr_keys; i++) {
		free(ts->keys[i].user);
		if (ts->keys[i].key)
			explicit_bzero(ts->keys[i].key, ts->keys[i].key_bytes);
		free(ts->keys[i].key);
	}
	free(ts->keys);
	ts->keys = NULL;
	ts->nr_keys = 0;
}

/* Append line (of file, number lineno) to ts->keys. */
static int psk_add_line(struct nbd_tls_server *ts, char *line, const char *file,
			unsigned int lineno)
{
	const char *why = NULL;
	struct nbd_psk_key *keys;
	int err;

	if (ts->nr_keys == NBD_PSK_MAX_KEYS) {
		td_err("nbd: %s: more than %u keys", file, NBD_PSK_MAX_KEYS);
		return -E2BIG;
	}
	keys = realloc(ts->keys, (ts->nr_keys + 1) * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	ts->keys = keys;
	memset(&keys[ts->nr_keys], 0, sizeof(*keys));
	err = psk_parse_line(line, &keys[ts->nr_keys++], &why);
	if (err == -EINVAL)
		td_err("nbd: %s: line %u: %s (psktool -u NAME -p %s writes "
		       "one)",
		       file, lineno, why, file);
	return err;
}

static int psk_load(struct nbd_tls_server *ts, const char *file)
{
	FILE *f = fopen(file, "re");
	unsigned int lineno = 0;
	size_t cap = 0;
	char *line = NULL;
	ssize_t n;
	int err = 0;

	if (!f) {
		err = -errno;
		td_err("nbd: cannot read the PSK file %s: %s", file,
		       strerror(errno));
		return err;
	}
	while (!err && (n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n && line[0] != '#')
			err = psk_add_line(ts, line, file, lineno);
	}
	if (line)
		explicit_bzero(line, cap);
	free(line);
	fclose(f);
	if (!err && !ts->nr_keys) {
		td_err("nbd: the PSK file %s holds no key (psktool -u NAME "
		       "-p %s makes one)",
		       file, file);
		err = -EINVAL;
	}
	return err;
}

/* --- credentials ------------------------------------------------------------------- */

/* gnutls's PSK lookup: the key of username, copied for gnutls. */
static int psk_lookup(gnutls_session_t session, const gnutls_datum_t *username,
		      gnutls_datum_t *key)
{
	struct nbd_conn *conn = gnutls_session_get_ptr(session);
	const struct nbd_tls_server *ts = conn->srv->tls;
	char name[NBD_PEER_MAX];

	for (unsigned int i = 0; i < ts->nr_keys; i++) {
		const struct nbd_psk_key *k = &ts->keys[i];

		if (strlen(k->user) != username->size ||
		    memcmp(k->user, username->data, username->size))
			continue;
		key->data = gnutls_malloc(k->key_bytes);
		if (!key->data)
			return -1;
		memcpy(key->data, k->key, k->key_bytes);
		key->size = (unsigned int)k->key_bytes;
		return 0;
	}
	nbd_printable(username->data, username->size, name, sizeof(name));
	td_vbd_warn(conn->vbd, "nbd %s: TLS: unknown PSK username '%s'",
		    conn->peer, name);
	return -1;
}

static int tls_fail(const char *what, const char *where, int r)
{
	td_err("nbd: %s %s: %s", what, where, gnutls_strerror(r));
	return r == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL;
}

static int psk_creds(struct nbd_tls_server *ts, const char *file)
{
	int err = psk_load(ts, file);
	int r;

	if (err)
		return err;
	r = gnutls_psk_allocate_server_credentials(&ts->psk);
	if (r < 0)
		return tls_fail("PSK credentials for", file, r);
	gnutls_psk_set_server_credentials_function2(ts->psk, psk_lookup);
	return 0;
}

/* DIR/name into buf; false when it does not fit. */
static bool x509_path(char *buf, const char *dir, const char *name)
{
	int n = snprintf(buf, NBD_X509_PATH_MAX, "%s/%s", dir, name);

	return n > 0 && n < NBD_X509_PATH_MAX;
}

static int x509_creds(struct nbd_tls_server *ts, const char *dir)
{
	char ca[NBD_X509_PATH_MAX], cert[NBD_X509_PATH_MAX];
	char key[NBD_X509_PATH_MAX];
	int r;

	if (!x509_path(ca, dir, "ca-cert.pem") ||
	    !x509_path(cert, dir, "server-cert.pem") ||
	    !x509_path(key, dir, "server-key.pem")) {
		td_err("nbd: the X.509 directory name %s is too long", dir);
		return -ENAMETOOLONG;
	}
	r = gnutls_certificate_allocate_credentials(&ts->x509);
	if (r < 0)
		return tls_fail("X.509 credentials for", dir, r);
	r = gnutls_certificate_set_x509_key_file(ts->x509, cert, key,
						 GNUTLS_X509_FMT_PEM);
	if (r < 0) {
		td_err("nbd: %s, %s: %s (the X.509 directory holds "
		       "server-cert.pem and server-key.pem; certtool makes "
		       "them)",
		       cert, key, gnutls_strerror(r));
		return -EINVAL;
	}
	/* The CA certificate is optional: with it the chain is complete. */
	if (!access(ca, R_OK)) {
		r = gnutls_certificate_set_x509_trust_file(ts->x509, ca,
							   GNUTLS_X509_FMT_PEM);
		if (r < 0)
			return tls_fail("reading", ca, r);
	}
	return 0;
}

static int tls_check_params(const struct td_nbd_access *p)
{
	bool creds = p->tls_psk_file || p->tls_x509_dir;

	if (p->tls != TD_NBD_TLS_OFF && !creds) {
		td_err("nbd: TLS needs credentials: a PSK file or an X.509 "
		       "directory");
		return -EINVAL;
	}
	if (p->tls == TD_NBD_TLS_OFF && creds) {
		td_err("nbd: TLS credentials given but TLS is off");
		return -EINVAL;
	}
	if (p->nr_allow > TD_NBD_MAX_ALLOW) {
		td_err("nbd: more than %d allowed address blocks",
		       TD_NBD_MAX_ALLOW);
		return -EINVAL;
	}
	return 0;
}

static int tls_server_load(struct nbd_tls_server *ts,
			   const struct td_nbd_access *p)
{
	const char *prio =
		p->tls_psk_file ? NBD_TLS_PRIORITY_PSK : NBD_TLS_PRIORITY;
	int err, r;

	if (p->tls_psk_file && (err = psk_creds(ts, p->tls_psk_file)))
		return err;
	if (p->tls_x509_dir && (err = x509_creds(ts, p->tls_x509_dir)))
		return err;
	r = gnutls_priority_init(&ts->priority, prio, NULL);
	if (r < 0)
		return tls_fail("TLS priority", prio, r);
	return 0;
}

int nbd_tls_server_create(const struct td_nbd_access *p,
			  struct nbd_tls_server **out)
{
	const struct td_nbd_access none = {.tls = TD_NBD_TLS_OFF};
	struct nbd_tls_server *ts;
	int err;

	p = p ? p : &none;
	if ((err = tls_check_params(p)))
		return err;
	ts = calloc(1, sizeof(*ts));
	if (!ts)
		return -ENOMEM;
	ts->mode = p->tls;
	ts->nr_allow = p->nr_allow;
	memcpy(ts->allow, p->allow, p->nr_allow * sizeof(p->allow[0]));
	if (ts->mode != TD_NBD_TLS_OFF && (err = tls_server_load(ts, p))) {
		nbd_tls_server_destroy(ts);
		return err;
	}
	*out = ts;
	return 0;
}

void nbd_tls_server_destroy(struct nbd_tls_server *ts)
{
	if (!ts)
		return;
	if (ts->priority)
		gnutls_priority_deinit(ts->priority);
	if (ts->psk)
		gnutls_psk_free_server_credentials(ts->psk);
	if (ts->x509)
		gnutls_certificate_free_credentials(ts->x509);
	psk_free_keys(ts);
	free(ts);
}

/* --- listeners and peers ------------------------------------------------------------- */

static bool sockaddr_is_loopback(const struct sockaddr *sa)
{
	int family;
	const uint8_t *a = sockaddr_bytes(sa, &family);
	static const uint8_t v6_loopback[16] = {[15] = 1};

	if (!a)
		return true; /* not IP: not reachable from the network */
	return family == AF_INET ? a[0] == 127
				 : !memcmp(a, v6_loopback, sizeof(v6_loopback));
}

void nbd_tls_listen_check(struct td_nbd_server *srv, const struct sockaddr *sa,
			  socklen_t len)
{
	const struct nbd_tls_server *ts = srv->tls;
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (ts->mode == TD_NBD_TLS_REQUIRE || sockaddr_is_loopback(sa) ||
	    getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV))
		return;
	td_vbd_warn(srv->vbd,
		    "nbd: tcp:%s%s%s:%s is reachable from the network %s: a "
		    "client %scan read and write the disk in plaintext (use "
		    "--nbd-tls require with --nbd-tls-psk or --nbd-tls-x509)",
		    sa->sa_family == AF_INET6 ? "[" : "", host,
		    sa->sa_family == AF_INET6 ? "]" : "", port,
		    ts->mode == TD_NBD_TLS_OFF ? "without TLS"
					       : "with TLS optional",
		    ts->nr_allow ? "from an allowed address " : "");
}

bool nbd_tls_peer_allowed(struct td_nbd_server *srv, int fd, const char *peer)
{
	const struct nbd_tls_server *ts = srv->tls;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!ts->nr_allow)
		return true;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
		td_vbd_warn(srv->vbd, "nbd %s: refused: getpeername: %s", peer,
			    strerror(errno));
		srv->stats.refused++;
		return false;
	}
	for (unsigned int i = 0; i < ts->nr_allow; i++)
		if (td_nbd_cidr_match(&ts->allow[i], (struct sockaddr *)&ss))
			return true;
	td_vbd_warn(srv->vbd,
		    "nbd %s: refused: not in the allowed addresses "
		    "(--nbd-allow)",
		    peer);
	srv->stats.refused++;
	return false;
}

/* --- options ------------------------------------------------------------------------- */

enum nbd_tls_action nbd_tls_option_action(enum td_nbd_tls_mode mode,
					  bool tls_on, uint32_t option,
					  uint32_t len, uint32_t *err,
					  const char **msg)
{
	if (option == NBD_OPT_STARTTLS) {
		*err = NBD_REP_ERR_INVALID;
		if (mode == TD_NBD_TLS_OFF) {
			*err = NBD_REP_ERR_UNSUP;
			*msg = "TLS is not configured on this server";
		} else if (len) {
			*msg = "NBD_OPT_STARTTLS takes no data";
		} else if (tls_on) {
			*msg = "TLS is already on";
		} else {
			return NBD_TLS_START;
		}
		return NBD_TLS_REFUSE;
	}
	if (mode != TD_NBD_TLS_REQUIRE || tls_on || option == NBD_OPT_ABORT)
		return NBD_TLS_SERVE;
	if (option == NBD_OPT_EXPORT_NAME)
		return NBD_TLS_CLOSE;
	*err = NBD_REP_ERR_TLS_REQD;
	*msg = "this server requires TLS: use NBD_OPT_STARTTLS first";
	return NBD_TLS_REFUSE;
}

bool nbd_tls_active(const struct nbd_conn *conn)
{
	return conn->tls && conn->tls->state == NBD_TLS_ON;
}

enum nbd_tls_action nbd_tls_conn_action(const struct nbd_conn *conn,
					uint32_t *err, const char **msg)
{
	return nbd_tls_option_action(conn->srv->tls->mode, nbd_tls_active(conn),
				     conn->opt.option, conn->opt.length, err,
				     msg);
}

/* --- the handshake ------------------------------------------------------------------- */

static int tls_session_setup(struct nbd_conn *conn, gnutls_session_t s)
{
	const struct nbd_tls_server *ts = conn->srv->tls;
	int r = gnutls_priority_set(s, ts->priority);

	if (r >= 0 && ts->psk)
		r = gnutls_credentials_set(s, GNUTLS_CRD_PSK, ts->psk);
	if (r >= 0 && ts->x509)
		r = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, ts->x509);
	if (r < 0)
		return r;
	gnutls_session_set_ptr(s, conn);
	gnutls_transport_set_int(s, conn->fd);
	/* The connection's handshake timer bounds it, not gnutls. */
	gnutls_handshake_set_timeout(s, 0);
	return 0;
}

int nbd_tls_start(struct nbd_conn *conn)
{
	struct nbd_tls *t;
	int r;

	/* The client must wait for the ACK: bytes already here are not
	 * the TLS handshake's. */
	if (nbd_in_avail(conn))
		return -EPROTO;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	r = gnutls_init(&t->session,
			GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
	if (r < 0) {
		free(t);
		return -ENOMEM;
	}
	conn->tls = t; /* freed with the connection, whatever happens */
	r = tls_session_setup(conn, t->session);
	if (r < 0) {
		td_vbd_err(conn->vbd, "nbd %s: TLS session: %s", conn->peer,
			   gnutls_strerror(r));
		return -EIO;
	}
	t->state = NBD_TLS_ACK;
	conn->rstate = NBD_RS_TLS;
	return 0;
}

static void tls_log_on(struct nbd_conn *conn)
{
	gnutls_session_t s = conn->tls->session;
	const char *user = gnutls_psk_server_get_username(s);
	char *desc = gnutls_session_get_desc(s);

	td_vbd_info(conn->vbd, "nbd %s: TLS on (%s%s%s)", conn->peer,
		    desc ? desc : "?", user ? ", PSK user " : "",
		    user ? user : "");
	gnutls_free(desc);
}

static void tls_handshake(struct nbd_conn *conn)
{
	struct nbd_tls *t = conn->tls;
	int r = gnutls_handshake(t->session);

	if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
		t->hs_wants_out = gnutls_record_get_direction(t->session) == 1;
		return;
	}
	if (r < 0) {
		nbd_conn_fail(conn, "TLS handshake: %s", gnutls_strerror(r));
		return;
	}
	t->state = NBD_TLS_ON;
	conn->rstate = NBD_RS_OPT_HEADER; /* the options begin again */
	tls_log_on(conn);
}

void nbd_tls_output_drained(struct nbd_conn *conn)
{
	if (!conn->tls || conn->tls->state != NBD_TLS_ACK || conn->dead)
		return;
	conn->tls->state = NBD_TLS_HANDSHAKE;
	tls_handshake(conn); /* the ClientHello may be here already */
}

uint32_t nbd_tls_handshake_events(const struct nbd_conn *conn)
{
	if (!conn->tls || conn->tls->state != NBD_TLS_HANDSHAKE)
		return 0;
	return conn->tls->hs_wants_out ? EPOLLOUT : EPOLLIN;
}

bool nbd_tls_handshake_event(struct nbd_conn *conn)
{
	if (!conn->tls || conn->tls->state != NBD_TLS_HANDSHAKE)
		return false;
	tls_handshake(conn);
	return true;
}

/* --- records ---------------------------------------------------------------------------- */

static ssize_t tls_error(struct nbd_conn *conn, const char *what, ssize_t r)
{
	td_vbd_info(conn->vbd, "nbd %s: TLS %s: %s", conn->peer, what,
		    gnutls_strerror((int)r));
	return -EPROTO;
}

ssize_t nbd_tls_recv(struct nbd_conn *conn, void *buf, size_t len)
{
	struct nbd_tls *t = conn->tls;
	ssize_t n = gnutls_record_recv(t->session, buf, len);

	t->recv_wants_out = false;
	if (n >= 0)
		return n;
	if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
		t->recv_wants_out =
			gnutls_record_get_direction(t->session) == 1;
		return -EAGAIN;
	}
	/* A close without close_notify: the end of the stream all the same
	 * (the NBD layer knows whether it came between requests). */
	if (n == GNUTLS_E_PREMATURE_TERMINATION)
		return 0;
	return tls_error(conn, "read", n);
}

/* Send what is corked.  0, -EAGAIN (flush_pending) or -errno. */
static int tls_uncork(struct nbd_conn *conn)
{
	struct nbd_tls *t = conn->tls;
	int r = gnutls_record_uncork(t->session, 0);

	t->flush_pending = r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED;
	if (t->flush_pending)
		return -EAGAIN;
	return r < 0 ? (int)tls_error(conn, "write", r) : 0;
}

ssize_t nbd_tls_send(struct nbd_conn *conn, const struct iovec *iov, int cnt)
{
	gnutls_session_t s = conn->tls->session;
	ssize_t taken = 0;
	size_t off = 0;
	int i = 0, err;

	if (conn->tls->flush_pending && (err = tls_uncork(conn)))
		return err;
	while (i < cnt) {
		size_t batch = 0;

		gnutls_record_cork(s);
		while (i < cnt && batch < NBD_TLS_CORK_BYTES) {
			size_t len = iov[i].iov_len - off;
			ssize_t r;

			if (len > NBD_TLS_CORK_BYTES - batch)
				len = NBD_TLS_CORK_BYTES - batch;
			/* Corked: copies into gnutls, sends nothing. */
			r = gnutls_record_send(
				s, (uint8_t *)iov[i].iov_base + off, len);
			if (r < 0)
				return tls_error(conn, "write", r);
			batch += len;
			off += len;
			if (off == iov[i].iov_len) {
				i++;
				off = 0;
			}
		}
		taken += (ssize_t)batch; /* gnutls has it now */
		err = tls_uncork(conn);
		if (err == -EAGAIN)
			return taken;
		if (err)
			return err;
	}
	return taken;
}

bool nbd_tls_pending_in(const struct nbd_conn *conn)
{
	return nbd_tls_active(conn) &&
	       gnutls_record_check_pending(conn->tls->session) > 0;
}

bool nbd_tls_pending_out(const struct nbd_conn *conn)
{
	return conn->tls && conn->tls->flush_pending;
}

bool nbd_tls_recv_wants_out(const struct nbd_conn *conn)
{
	return nbd_tls_active(conn) && conn->tls->recv_wants_out;
}

void nbd_tls_close(struct nbd_conn *conn)
{
	/* Best effort, never waiting: the client may be gone. */
	if (nbd_tls_active(conn) && !conn->tls->flush_pending)
		gnutls_bye(conn->tls->session, GNUTLS_SHUT_WR);
}

void nbd_tls_free(struct nbd_conn *conn)
{
	if (!conn->tls)
		return;
	gnutls_deinit(conn->tls->session);
	free(conn->tls);
	conn->tls = NULL;
}
