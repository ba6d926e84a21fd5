/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd.c - the etcd client's HTTP side (libcurl easy interface, one handle
 * kept alive per client) and its fail-over across endpoints; the JSON is
 * in etcd-json.c.
 */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/etcd/etcd-int.h"

/* Longest endpoint URL (scheme, host, port). */
#define ETCD_MAX_ENDPOINT_LEN 256
/* Room for the reason of a failure over every endpoint. */
#define ETCD_ERR_LEN 2048

struct etcd_client {
	char *endpoints[ETCD_MAX_ENDPOINTS];
	size_t nr_endpoints;
	size_t current; /* the endpoint that answered last */
	unsigned int timeout_ms;
	CURL *curl;
	struct curl_slist *headers;
	struct td_strbuf body;	  /* the answer being received */
	bool too_big;		  /* it passed ETCD_MAX_RESPONSE_BYTES */
	char tried[ETCD_ERR_LEN]; /* what each endpoint tried did */
	char error[ETCD_ERR_LEN + 64];
};

static pthread_once_t etcd_curl_once = PTHREAD_ONCE_INIT;
static CURLcode etcd_curl_init_rc;

static void etcd_curl_init(void)
{
	etcd_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void etcd_set_error(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void etcd_set_error(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* Append to the client's reason (cut when full). */
static void etcd_add_error(struct etcd_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void etcd_add_error(struct etcd_client *c, const char *fmt, ...)
{
	size_t used = strlen(c->tried);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->tried + used, sizeof(c->tried) - used, fmt, ap);
	va_end(ap);
}

static int etcd_parse_endpoints(struct etcd_client *c, const char *list,
				char *errbuf, size_t errlen)
{
	const char *p = list, *end;
	size_t len;

	for (;;) {
		end = strchr(p, ',');
		len = end ? (size_t)(end - p) : strlen(p);
		while (len > 0 && p[len - 1] == '/')
			len--;
		if ((strncmp(p, "http://", 7) && strncmp(p, "https://", 8)) ||
		    len <= 8 || len > ETCD_MAX_ENDPOINT_LEN ||
		    memchr(p + 8, '/', len - 8)) {
			etcd_set_error(errbuf, errlen,
				       "etcd endpoint '%.*s' is not "
				       "http://HOST:PORT or https://HOST:PORT",
				       (int)len, p);
			return -EINVAL;
		}
		if (c->nr_endpoints == ETCD_MAX_ENDPOINTS) {
			etcd_set_error(errbuf, errlen,
				       "more than %d etcd endpoints",
				       ETCD_MAX_ENDPOINTS);
			return -EINVAL;
		}
		c->endpoints[c->nr_endpoints] = strndup(p, len);
		if (!c->endpoints[c->nr_endpoints])
			return -ENOMEM;
		c->nr_endpoints++;
		if (!end)
			return 0;
		p = end + 1;
	}
}

static size_t etcd_curl_write(char *data, size_t size, size_t nmemb,
			      void *opaque)
{
	struct etcd_client *c = opaque;

	if (c->body.len + size * nmemb > ETCD_MAX_RESPONSE_BYTES) {
		c->too_big = true;
		return 0; /* curl fails the transfer: CURLE_WRITE_ERROR */
	}
	td_strbuf_append(&c->body, data, size * nmemb);
	return td_strbuf_error(&c->body) ? 0 : size * nmemb;
}

static int etcd_curl_setup(struct etcd_client *c)
{
	CURL *h = curl_easy_init();
	struct curl_slist *expect;

	c->curl = h;
	c->headers = curl_slist_append(NULL, "Content-Type: application/json");
	/*
	 * No "Expect: 100-continue": curl sends it before a body over 1 KiB
	 * and waits for etcd's 100 Continue, one more round trip on every
	 * large txn (a round's changeset, issue #23).
	 */
	expect = c->headers ? curl_slist_append(c->headers, "Expect:") : NULL;
	if (!h || !expect)
		return -ENOMEM;
	if (curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) ||
	    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms) ||
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			     (long)c->timeout_ms) ||
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers) ||
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, etcd_curl_write) ||
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, c) ||
	    /* etcd is reached directly, whatever http_proxy says. */
	    curl_easy_setopt(h, CURLOPT_NOPROXY, "*") ||
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https"))
		return -ENOMEM;
	return 0;
}

int etcd_client_new(const char *endpoints, unsigned int timeout_ms,
		    struct etcd_client **out, char *errbuf, size_t errlen)
{
	struct etcd_client *c;
	int rc;

	*out = NULL;
	if (timeout_ms == 0) {
		etcd_set_error(errbuf, errlen, "the etcd timeout must be > 0");
		return -EINVAL;
	}
	pthread_once(&etcd_curl_once, etcd_curl_init);
	if (etcd_curl_init_rc != CURLE_OK) {
		etcd_set_error(errbuf, errlen, "libcurl: %s",
			       curl_easy_strerror(etcd_curl_init_rc));
		return -ENOMEM;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->timeout_ms = timeout_ms;
	td_strbuf_init(&c->body);
	rc = etcd_parse_endpoints(c, endpoints, errbuf, errlen);
	if (rc == 0)
		rc = etcd_curl_setup(c);
	if (rc < 0) {
		etcd_client_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void etcd_client_free(struct etcd_client *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->nr_endpoints; i++)
		free(c->endpoints[i]);
	if (c->curl)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->headers);
	td_strbuf_free(&c->body);
	free(c);
}

const char *etcd_client_error(const struct etcd_client *c)
{
	return c->error;
}

const char *etcd_client_endpoint(const struct etcd_client *c)
{
	return c->endpoints[c->current];
}

/* What one endpoint did with a request. */
enum etcd_outcome {
	ETCD_ANSWERED,	 /* *doc is etcd's answer (success) */
	ETCD_REFUSED,	 /* etcd's error: do not try elsewhere */
	ETCD_NEXT_CONN,	 /* not reached: connection refused, no route */
	ETCD_NEXT_TIME,	 /* timed out */
	ETCD_NEXT_PROTO, /* answered, but not as etcd does */
	ETCD_NEXT_BUSY,	 /* etcd, but unavailable (no leader, no quorum) */
};

static enum etcd_outcome etcd_curl_outcome(struct etcd_client *c, CURLcode cc)
{
	const char *ep = c->endpoints[c->current];

	const char *sep = c->tried[0] ? ", " : "";

	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		etcd_add_error(c, "%s%s (no answer within %u ms)", sep, ep,
			       c->timeout_ms);
		return ETCD_NEXT_TIME;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
		etcd_add_error(c, "%s%s (%s)", sep, ep, curl_easy_strerror(cc));
		return ETCD_NEXT_CONN;
	default:
		etcd_add_error(c, "%s%s (%s: not etcd's JSON gateway)", sep, ep,
			       curl_easy_strerror(cc));
		return ETCD_NEXT_PROTO;
	}
}

/* An HTTP answer: etcd's success, etcd's error, or not etcd. */
static enum etcd_outcome etcd_http_outcome(struct etcd_client *c, long status,
					   struct td_jval **doc, int *err)
{
	const char *ep = c->endpoints[c->current], *msg;
	int code;

	if (td_json_parse(td_strbuf_str(&c->body), doc) < 0 ||
	    (*doc)->type != TD_JOBJECT) {
		etcd_add_error(c, "%s%s (HTTP %ld, not etcd's JSON gateway)",
			       c->tried[0] ? ", " : "", ep, status);
		return ETCD_NEXT_PROTO;
	}
	if (status == 200 && td_jval_get(*doc, "header"))
		return ETCD_ANSWERED;
	etcd_json_error(*doc, &code, &msg);
	if (code < 0 || !msg) {
		etcd_add_error(c, "%s%s (HTTP %ld, not etcd's JSON gateway)",
			       c->tried[0] ? ", " : "", ep, status);
		return ETCD_NEXT_PROTO;
	}
	etcd_add_error(c, "%s%s (HTTP %ld: %s)", c->tried[0] ? ", " : "", ep,
		       status, msg);
	if (code == ETCD_GRPC_UNAVAILABLE ||
	    code == ETCD_GRPC_DEADLINE_EXCEEDED)
		return ETCD_NEXT_BUSY;
	*err = code == ETCD_GRPC_INVALID_ARGUMENT ? -EINVAL : -EIO;
	return ETCD_REFUSED;
}

/* POST body to path at the current endpoint. */
static enum etcd_outcome etcd_post_one(struct etcd_client *c, const char *path,
				       const struct td_strbuf *body,
				       struct td_jval **doc, int *err)
{
	char url[ETCD_MAX_ENDPOINT_LEN + 32];
	CURLcode cc;
	long status = 0;

	*doc = NULL;
	snprintf(url, sizeof(url), "%s%s", c->endpoints[c->current], path);
	td_strbuf_reset(&c->body);
	c->too_big = false;
	if (curl_easy_setopt(c->curl, CURLOPT_URL, url) ||
	    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS,
			     td_strbuf_str(body)) ||
	    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)body->len)) {
		*err = -ENOMEM;
		return ETCD_REFUSED;
	}
	cc = curl_easy_perform(c->curl);
	if (cc == CURLE_WRITE_ERROR &&
	    (c->too_big || td_strbuf_error(&c->body))) {
		etcd_add_error(c, "%s%s (an answer over %u bytes)",
			       c->tried[0] ? ", " : "",
			       c->endpoints[c->current],
			       ETCD_MAX_RESPONSE_BYTES);
		*err = c->too_big ? -EFBIG : -ENOMEM;
		return ETCD_REFUSED;
	}
	if (cc != CURLE_OK)
		return etcd_curl_outcome(c, cc);
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	return etcd_http_outcome(c, status, doc, err);
}

/* The errno for "no endpoint served": the most telling outcome seen. */
static int etcd_outcome_errno(unsigned int seen)
{
	if (seen & (1u << ETCD_NEXT_PROTO))
		return -EPROTO;
	if (seen & (1u << ETCD_NEXT_BUSY))
		return -EHOSTUNREACH;
	if (seen & (1u << ETCD_NEXT_TIME))
		return -ETIMEDOUT;
	return -ECONNREFUSED;
}

/*
 * POST body to path, trying every endpoint once from the current one.
 * 0 and *doc (etcd's answer; free with td_jval_free), or -errno with the
 * reason in c->error.
 */
static int etcd_post(struct etcd_client *c, const char *path,
		     const struct td_strbuf *body, struct td_jval **doc)
{
	enum etcd_outcome o;
	unsigned int seen = 0;
	size_t tried;
	int err = 0;

	c->error[0] = c->tried[0] = '\0';
	for (tried = 0; tried < c->nr_endpoints; tried++) {
		o = etcd_post_one(c, path, body, doc, &err);
		if (o == ETCD_ANSWERED) {
			c->error[0] = '\0';
			return 0;
		}
		td_jval_free(*doc);
		*doc = NULL;
		if (o == ETCD_REFUSED) {
			snprintf(c->error, sizeof(c->error), "%s", c->tried);
			return err;
		}
		seen |= 1u << o;
		c->current = (c->current + 1) % c->nr_endpoints;
	}
	err = etcd_outcome_errno(seen);
	snprintf(c->error, sizeof(c->error), "no etcd endpoint answered: %s",
		 c->tried);
	return err;
}

int etcd_get(struct etcd_client *c, const void *key, size_t key_len,
	     struct etcd_kv *kv, bool *found, int64_t *revision)
{
	struct td_strbuf body;
	struct etcd_range range;
	struct td_jval *doc = NULL;
	int64_t rev;
	int rc;

	*found = false;
	memset(kv, 0, sizeof(*kv));
	td_strbuf_init(&body);
	rc = etcd_json_range_request(&body, key, key_len);
	if (rc == 0)
		rc = etcd_post(c, "/v3/kv/range", &body, &doc);
	td_strbuf_free(&body);
	if (rc < 0)
		return rc;
	rc = etcd_json_range_response(doc, &range, &rev);
	td_jval_free(doc);
	if (rc < 0) {
		snprintf(c->error, sizeof(c->error),
			 "%s: etcd's range answer is not understood",
			 c->endpoints[c->current]);
		return rc;
	}
	if (revision)
		*revision = rev;
	if (range.nr_kvs > 0) {
		*kv = range.kvs[0]; /* ownership moves to the caller */
		memset(&range.kvs[0], 0, sizeof(range.kvs[0]));
		*found = true;
	}
	etcd_range_free(&range);
	return 0;
}

int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmps, size_t nr_cmps,
	     const struct etcd_op *success, size_t nr_success,
	     const struct etcd_op *failure, size_t nr_failure,
	     struct etcd_txn_result *res)
{
	struct td_strbuf body;
	struct td_jval *doc = NULL;
	int rc;

	memset(res, 0, sizeof(*res));
	td_strbuf_init(&body);
	rc = etcd_json_txn_request(&body, cmps, nr_cmps, success, nr_success,
				   failure, nr_failure);
	if (rc == -EINVAL)
		snprintf(c->error, sizeof(c->error),
			 "a compare or op of unknown kind");
	if (rc == 0)
		rc = etcd_post(c, "/v3/kv/txn", &body, &doc);
	td_strbuf_free(&body);
	if (rc < 0)
		return rc;
	rc = etcd_json_txn_response(doc, res);
	td_jval_free(doc);
	if (rc < 0)
		snprintf(c->error, sizeof(c->error),
			 "%s: etcd's txn answer is not understood",
			 c->endpoints[c->current]);
	return rc;
}
