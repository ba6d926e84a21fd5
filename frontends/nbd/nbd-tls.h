/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbd-tls.h - who may use an NBD export: TLS (NBD_OPT_STARTTLS with
 * GnuTLS, PSK or X.509 credentials, optional or required) and an allow-list
 * of TCP source addresses.  The first part is public (the parameters and
 * their parsers, for the tools); the second is the server's own, for
 * nbd.c, nbd-conn.c and nbd-handshake.c.  doc/tapdisk.md describes the
 * behaviour a client sees.
 */
#ifndef TAPSTRIPE_NBD_TLS_H
#define TAPSTRIPE_NBD_TLS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* --- public: parameters ------------------------------------------------------ */

enum td_nbd_tls_mode {
	TD_NBD_TLS_OFF,	    /* STARTTLS refused (NBD_REP_ERR_UNSUP) */
	TD_NBD_TLS_ON,	    /* offered: a client may use it or not */
	TD_NBD_TLS_REQUIRE, /* nothing but STARTTLS (and ABORT) before it */
};

#define TD_NBD_MAX_ALLOW 16 /* --nbd-allow entries */

/* An address block: family AF_INET or AF_INET6, network order bytes. */
struct td_nbd_cidr {
	int family;
	uint8_t addr[16];
	unsigned int prefix_bits;
};

struct td_nbd_access {
	enum td_nbd_tls_mode tls;
	/* Lines "username:hexkey", as psktool -u NAME -p FILE writes them. */
	const char *tls_psk_file;
	/* A directory with server-cert.pem and server-key.pem (and
	 * ca-cert.pem, sent as the chain), as qemu's tls-creds-x509. */
	const char *tls_x509_dir;
	/* TCP clients must come from one of these (none: from anywhere);
	 * Unix-socket clients are not concerned. */
	struct td_nbd_cidr allow[TD_NBD_MAX_ALLOW];
	unsigned int nr_allow;
};

/* "off", "on" or "require".  0 or -EINVAL. */
int td_nbd_tls_parse_mode(const char *text, enum td_nbd_tls_mode *out);

/*
 * "ADDR" or "ADDR/BITS", IPv4 or IPv6 ("10.0.0.0/8", "::1",
 * "fd00::/8").  Host bits beyond the prefix must be zero.  0 or -EINVAL.
 */
int td_nbd_parse_cidr(const char *text, struct td_nbd_cidr *out);

/* Whether sa (AF_INET, AF_INET6; an IPv4-mapped IPv6 address counts as
 * IPv4) lies in c. */
bool td_nbd_cidr_match(const struct td_nbd_cidr *c, const struct sockaddr *sa);

/* --- the server's own ---------------------------------------------------------- */

struct td_nbd_server;
struct nbd_conn;
struct nbd_tls_server;
struct nbd_tls;

/*
 * Check the parameters and load the credentials (reads files: set-up
 * time only).  0 and *out, or -errno having logged why (-EINVAL for
 * parameters that do not go together).
 */
int nbd_tls_server_create(const struct td_nbd_access *p,
			  struct nbd_tls_server **out);
void nbd_tls_server_destroy(struct nbd_tls_server *ts);

/* A TCP listener is up on sa: warn, naming the disk, when it is not
 * loopback and plaintext clients are let in. */
void nbd_tls_listen_check(struct td_nbd_server *srv, const struct sockaddr *sa,
			  socklen_t len);

/* May the TCP client on fd, named peer, in?  Logs the refusal. */
bool nbd_tls_peer_allowed(struct td_nbd_server *srv, int fd, const char *peer);

/* What the handshake does with an option, given the TLS state. */
enum nbd_tls_action {
	NBD_TLS_SERVE,	/* answer it as without TLS */
	NBD_TLS_START,	/* STARTTLS accepted: ACK, then the TLS handshake */
	NBD_TLS_REFUSE, /* reply with the error *err, message *msg */
	NBD_TLS_CLOSE,	/* EXPORT_NAME under require: it has no error reply */
};

/* The decision alone, without side effects (the unit test's table). */
enum nbd_tls_action nbd_tls_option_action(enum td_nbd_tls_mode mode,
					  bool tls_on, uint32_t option,
					  uint32_t len, uint32_t *err,
					  const char **msg);
/* The same for conn's server and state. */
enum nbd_tls_action nbd_tls_conn_action(const struct nbd_conn *conn,
					uint32_t *err, const char **msg);

/*
 * STARTTLS was accepted and its ACK queued: make the session; the
 * handshake begins once the ACK is written (nbd_tls_output_drained).
 * conn->rstate becomes NBD_RS_TLS.  0 or -errno (the caller closes).
 */
int nbd_tls_start(struct nbd_conn *conn);
/* Every queued byte is written: after the ACK, start the handshake. */
void nbd_tls_output_drained(struct nbd_conn *conn);
/* In NBD_RS_TLS, handshaking: the events it waits for (0: none). */
uint32_t nbd_tls_handshake_events(const struct nbd_conn *conn);
/* An fd event while handshaking: step the handshake; true when it took
 * the event (false: the ACK is still being written, go on as usual). */
bool nbd_tls_handshake_event(struct nbd_conn *conn);

/* Records flow through TLS (the handshake is done). */
bool nbd_tls_active(const struct nbd_conn *conn);
/* Decrypt into buf: bytes, 0 at the end of the stream, -EAGAIN, -errno. */
ssize_t nbd_tls_recv(struct nbd_conn *conn, void *buf, size_t len);
/* Encrypt iov: the bytes taken (gnutls holds what it could not send
 * yet: nbd_tls_pending_out), -EAGAIN or -errno. */
ssize_t nbd_tls_send(struct nbd_conn *conn, const struct iovec *iov, int cnt);
/* Decrypted bytes wait inside gnutls (no fd event will announce them). */
bool nbd_tls_pending_in(const struct nbd_conn *conn);
/* Encrypted bytes wait inside gnutls for the socket. */
bool nbd_tls_pending_out(const struct nbd_conn *conn);
/* The last recv stopped because gnutls must write first (EPOLLOUT). */
bool nbd_tls_recv_wants_out(const struct nbd_conn *conn);
/* Before the socket closes: a close_notify if it can go at once. */
void nbd_tls_close(struct nbd_conn *conn);
void nbd_tls_free(struct nbd_conn *conn);

#endif
