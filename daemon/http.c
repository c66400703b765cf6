/*
 * http.c — the HTTP front of tird on libmicrohttpd.
 *
 * Every route is one row of TIRD_ROUTES (tird.h): method, pattern, handler,
 * who may call it, how large a body it takes.  This file matches a request to
 * its row, enforces the row's access and body limit, collects the body, calls
 * the handler and sends what it answered; errors are always
 *   {"error": {"code": "...", "message": "..."}}
 * with a 4xx or 5xx status.
 *
 * Input edges, checked here before any handler runs, each refused with a
 * JSON error naming the fault:
 *   - a body is valid UTF-8 with no NUL byte, no raw control character in a
 *     string and no \u0000 escape (check_body); http_body_object takes
 *     exactly one JSON document, nothing after it but white space;
 *   - one Content-Length, and not with Transfer-Encoding (400); at most
 *     MAX_QUERY_PARAMS query parameters and MAX_URL bytes of URL (414), at
 *     most MAX_HEADER_BYTES of headers (431);
 *   - %00 in a path or query is not decoded (unescape), so a NUL never cuts
 *     a route argument or parameter short;
 *   - error messages never carry invalid UTF-8: http_error writes each bad
 *     byte as the text \xHH;
 *   - a header name must be a token (no white space before the colon: "Bad
 *     Name: v"), a Transfer-Encoding other than "chunked" is refused (400:
 *     libmicrohttpd would read such a body until the connection closes), and
 *     HTTP/1.1 needs exactly one Host (400): libmicrohttpd 0.9.75 lets all
 *     three through to us with strict_for_client at its default 0; at 1 it
 *     refuses a missing Host itself, with HTML, and at -1 refuses white space
 *     before a colon, with HTML, so 0 it stays and we answer in JSON.
 *
 * What libmicrohttpd 0.9.75 (Debian 12) still answers itself, found against
 * a real tird (tests/http_edges.sh asserts each): it refuses these while it
 * reads the head or the body, before our handler is called, with a static
 * HTML body compiled into it (transmit_error_response_static): no option,
 * callback or hook of 0.9.x sees the request first or changes the answer
 * (MHD_OPTION_URI_LOG_CALLBACK runs after the request line parsed,
 * MHD_OPTION_NOTIFY_CONNECTION sees no bytes, the external logger only
 * hears of it):
 *   - a header line without a colon: 400 HTML;
 *   - a Content-Length that is not a number (400 HTML) or overflows (413
 *     HTML), both sent with their status line and headers twice (a
 *     libmicrohttpd 0.9.75 bug);
 *   - a malformed chunk of a chunked body: 400 HTML;
 *   - an HTTP version that is not HTTP/x.y (or none: "GET /"): 400 HTML; a
 *     major version other than 1: 505 HTML;
 *   - a request head over MHD_POOL_BYTES (one header or a URL of 256 KiB):
 *     431 or 414 HTML;
 *   - a request line without a space ("GARBAGE"): the connection is closed
 *     with no answer at all.
 * The pool is sized so that every limit of ours (MAX_URL, MAX_HEADER_BYTES,
 * MAX_QUERY_PARAMS) is ours to answer well before libmicrohttpd's.
 *
 * Threads: libmicrohttpd runs one thread per connection (its internal
 * polling thread accepts), so a handler may block — the long polls of
 * workers and of `tirctl tune --wait` do — without holding up other clients.
 * max_connections bounds the threads, max_connections_per_ip the share of
 * one address (a connection past it is closed at once, unanswered: that is
 * libmicrohttpd's way), and idle_timeout_s how long a connection may sit
 * silent: between requests, or mid-request (a head or body sent slowly).  A
 * long poll is not idle: while its handler waits, libmicrohttpd does not
 * time the connection, so a timeout shorter than the polls is fine.
 *
 * A large answer (GET /v1/records) is streamed: its handler sets
 * http_resp.stream and libmicrohttpd pulls the body, chunk by chunk, as the
 * client reads it (send_resp), so memory stays bounded per connection.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <microhttpd.h>
#include "tird.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

/* A route's access: who may call it when tokens are set (tird.h, TIRD_ROUTES). */
enum { OPEN, READ, SUBMIT, WORKER, ADMIN };
static const unsigned access_scope[] = { 0, TIRD_SCOPE_ALL, TIRD_SCOPE(SUBMIT),
					 TIRD_SCOPE(WORKER), 0 };
static const char *const access_name[] = { "none", "read", "submit", "worker", "admin" };
enum { SMALL, LARGE };

typedef struct route {
	http_method method;
	const char *pattern;
	http_handler fn;
	int access, limit;
} route;

static const route routes[] = {
#define TIRD_ROUTE_ROW(m, pat, fn, acc, lim) { HTTP_##m, pat, fn, acc, lim },
	TIRD_ROUTES(TIRD_ROUTE_ROW)
#undef TIRD_ROUTE_ROW
};
#define NROUTES ((int)(sizeof routes / sizeof routes[0]))
_Static_assert(NROUTES < 64, "tird_metrics has room for 63 routes");

/* Limits of a request's head, answered by first_call with a JSON error. */
enum {
	MAX_URL = 8192,            /* bytes of path and query */
	MAX_QUERY_PARAMS = 64,
	MAX_HEADER_BYTES = 16384,  /* names and values of every header */
	/* libmicrohttpd's memory per connection: the request head and a record
	 * (64 bytes) per header and query parameter live in it; when it runs
	 * out, libmicrohttpd answers HTML, or (0.9.75, too many query
	 * parameters) closes the connection with no answer.  256 KiB holds
	 * any head within the limits above and ~3,900 one-letter query
	 * parameters; it is mapped at once but touched only as far as used
	 * (all of it once a kept-alive connection is reused: libmicrohttpd
	 * zeroes the pool between requests). */
	MHD_POOL_BYTES = 256 * 1024,
};

const char *http_route_name(int i)
{
	static const char *const names[] = {
#define TIRD_ROUTE_NAME(m, pat, fn, acc, lim) #m " " pat,
		TIRD_ROUTES(TIRD_ROUTE_NAME)
#undef TIRD_ROUTE_NAME
		"other"
	};
	return i >= 0 && i <= NROUTES ? names[i] : NULL;
}

/* The state of one request across libmicrohttpd's calls. */
typedef struct req_ctx {
	int route;                 /* index, or NROUTES when none matched */
	char arg[256];
	char *body;
	size_t len, cap, limit;
	bool too_large;
	struct timespec t0;
	int status;                /* what was answered, for metrics */
	const tird_token *token;   /* the bearer's, NULL: none */
} req_ctx;

static double since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* Matches url against pattern; '*' takes one non-empty segment into arg. */
static bool match(const char *pattern, const char *url, char *arg, size_t n)
{
	const char *p = pattern, *u = url;
	arg[0] = '\0';
	while (*p && *u) {
		if (*p == '*') {
			const char *e = strchr(u, '/');
			size_t len = e ? (size_t)(e - u) : strlen(u);
			if (len == 0 || len >= n)
				return false;
			memcpy(arg, u, len);
			arg[len] = '\0';
			u += len;
			p++;
			continue;
		}
		if (*p++ != *u++)
			return false;
	}
	return !*p && (!*u || (u[0] == '/' && !u[1]));   /* a trailing '/' is fine */
}

/* ---- answers ------------------------------------------------------------------- */

void http_json(http_resp *out, int status, cJSON *j)
{
	out->status = status;
	out->body = cJSON_PrintUnformatted(j);
	out->content_type = NULL;
	cJSON_Delete(j);
}

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0: no
 * overlong forms, no surrogates, nothing past U+10FFFF (RFC 3629). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
		     : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (len == 0 || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||   /* overlong, surrogate */
	    (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))     /* overlong, > U+10FFFF */
		return 0;
	return len;
}

/* msg with every byte that is not valid UTF-8 written as the text \xHH,
 * into out (n bytes, cut at a character). */
static void utf8_clean(const char *msg, char *out, size_t n)
{
	const unsigned char *s = (const unsigned char *)msg;
	size_t left = strlen(msg), o = 0;
	while (left) {
		size_t k = utf8_len(s, left);
		char esc[5];
		const char *from = (const char *)s;
		size_t w = k;
		if (k == 0) {
			snprintf(esc, sizeof esc, "\\x%02x", s[0]);
			from = esc;
			w = 4;
			k = 1;
		}
		if (o + w >= n)
			break;
		memcpy(out + o, from, w);
		o += w;
		s += k;
		left -= k;
	}
	out[o] = '\0';
}

void http_error(http_resp *out, int status, const char *code, const char *fmt, ...)
{
	char msg[768], clean[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	utf8_clean(msg, clean, sizeof clean);
	cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
	cJSON_AddStringToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", clean);
	free(out->body);
	http_json(out, status, j);
}

cJSON *http_body_object(http_req *r, http_resp *out)
{
	const char *end = NULL;
	if (r->len == 0) {
		http_error(out, 400, "bad_request", "the request needs a JSON body");
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLengthOpts(r->body, r->len, &end, 0);
	if (!j) {
		size_t at = end ? (size_t)(end - r->body) : 0;
		http_error(out, 400, "bad_json", "the body is not valid JSON (at byte %zu)", at);
		return NULL;
	}
	size_t at = (size_t)(end - r->body);
	while (at < r->len && r->body[at] && strchr(" \t\r\n", r->body[at]))
		at++;
	if (at < r->len) {
		cJSON_Delete(j);
		http_error(out, 400, "bad_json", "the body has %zu bytes after the JSON document "
			   "(at byte %zu): send one document", r->len - at, at);
		return NULL;
	}
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		http_error(out, 400, "bad_request", "the body must be a JSON object");
		return NULL;
	}
	return j;
}

/* Whether the n bytes of a body may be handed to a JSON parser: valid
 * UTF-8, no NUL byte, and in strings no raw control character and no
 * \u0000 (cJSON would cut the string there: "cpu\u0000:evil" would be
 * "cpu").  false with why (n bytes) naming the fault and its byte. */
static bool check_body(const char *body, size_t len, char *why, size_t n)
{
	const unsigned char *s = (const unsigned char *)body;
	bool in_string = false;
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		if (c == 0) {
			snprintf(why, n, "the body has a NUL byte at byte %zu", i);
			return false;
		}
		size_t k = utf8_len(s + i, len - i);
		if (k == 0) {
			snprintf(why, n, "the body is not valid UTF-8 (byte 0x%02x at byte %zu)", c, i);
			return false;
		}
		if (in_string && c < 0x20) {
			snprintf(why, n, "the body has a control character (0x%02x) inside a string at "
				 "byte %zu: JSON strings escape them", c, i);
			return false;
		}
		if (c == '"') {
			in_string = !in_string;
		} else if (in_string && c == '\\' && i + 1 < len) {
			if (s[i + 1] == 'u' && len - i >= 6 && !memcmp(s + i + 2, "0000", 4)) {
				snprintf(why, n, "the body has a NUL (\\u0000) inside a string at byte "
					 "%zu: strings may not hold NUL", i);
				return false;
			}
			if (s[i + 1] < 0x80)
				k = 2;     /* an escaped quote is not the string's end */
		}
		i += k;
	}
	return true;
}

const char *http_query(http_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

typedef struct each_ctx {
	const char *name;
	void (*fn)(void *, const char *);
	void *ctx;
} each_ctx;

static MHD_RESULT each_value(void *cls, enum MHD_ValueKind kind, const char *key,
			     const char *value)
{
	each_ctx *e = cls;
	(void)kind;
	if (!strcmp(key, e->name))
		e->fn(e->ctx, value ? value : "");
	return MHD_YES;
}

void http_query_each(http_req *r, const char *name,
		     void (*fn)(void *ctx, const char *value), void *ctx)
{
	each_ctx e = { name, fn, ctx };
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, each_value, &e);
}

typedef struct qs_ctx {
	char *s;
	size_t len, cap;
} qs_ctx;

static MHD_RESULT qs_append(void *cls, enum MHD_ValueKind kind, const char *key,
			    const char *value)
{
	qs_ctx *q = cls;
	(void)kind;
	size_t need = strlen(key) + (value ? strlen(value) : 0) + 3;
	if (q->len + need >= q->cap) {
		q->cap = (q->len + need) * 2;
		q->s = realloc(q->s, q->cap);
		if (!q->s)
			abort();
	}
	q->len += (size_t)sprintf(q->s + q->len, "%s=%s&", key, value ? value : "");
	return MHD_YES;
}

char *http_query_string(http_req *r)
{
	qs_ctx q = { malloc(64), 0, 64 };
	if (!q.s)
		abort();
	q.s[0] = '\0';
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, qs_append, &q);
	return q.s;
}

/* A streamed body as libmicrohttpd pulls it. */
typedef struct stream_ctx {
	http_stream_fn fn;
	void *ctx;
	void (*free_fn)(void *ctx);
} stream_ctx;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	stream_ctx *st = cls;
	long n = st->fn(st->ctx, pos, buf, max);
	return n == HTTP_STREAM_END ? MHD_CONTENT_READER_END_OF_STREAM
	       : n <= 0 ? MHD_CONTENT_READER_END_WITH_ERROR : (ssize_t)n;
}

static void stream_done(void *cls)
{
	stream_ctx *st = cls;
	if (st->free_fn)
		st->free_fn(st->ctx);
	free(st);
}

/* The size of one chunk libmicrohttpd asks a streamed body for. */
enum { STREAM_BLOCK = 64 * 1024 };

static MHD_RESULT send_resp(struct MHD_Connection *c, req_ctx *rc, http_resp *out)
{
	struct MHD_Response *resp;
	if (out->stream) {
		free(out->body);
		out->body = NULL;
		stream_ctx *st = tird_xcalloc(1, sizeof *st);
		*st = (stream_ctx){ out->stream, out->stream_ctx, out->stream_free };
		out->stream = NULL;
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
							 stream_read, st, stream_done);
	} else {
		if (!out->body)
			out->body = tird_strdup("");
		resp = MHD_create_response_from_buffer(strlen(out->body), out->body,
						       MHD_RESPMEM_MUST_FREE);
		out->body = NULL;
	}
	MHD_add_response_header(resp, "Content-Type",
				out->content_type ? out->content_type : "application/json");
	if (out->status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"tird\"");
	if (out->status == 429)    /* the queue is full: jobs take seconds to minutes */
		MHD_add_response_header(resp, "Retry-After", "30");
	rc->status = out->status;
	MHD_RESULT ret = MHD_queue_response(c, (unsigned)out->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static MHD_RESULT send_error(struct MHD_Connection *c, req_ctx *rc, int status,
			     const char *code, const char *msg)
{
	http_resp out = { 0 };
	http_error(&out, status, code, "%s", msg);
	return send_resp(c, rc, &out);
}

/* The token of the Authorization header, or NULL: every token is compared,
 * each in constant time, so the time says nothing of which came close. */
static const tird_token *bearer(const tird *d, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	h += 7;
	size_t hl = strlen(h);
	const tird_token *found = NULL;
	for (int k = 0; k < d->cfg.ntokens; k++) {
		const char *t = d->cfg.tokens[k].secret;
		size_t tl = strlen(t);
		unsigned diff = hl != tl;
		for (size_t i = 0; i < tl; i++)
			diff |= (unsigned char)t[i] ^ (unsigned char)(i < hl ? h[i] : 0);
		if (diff == 0)
			found = &d->cfg.tokens[k];
	}
	return found;
}

/* The client's address ("127.0.0.1"), or "?" */
static void peer_of(struct MHD_Connection *c, char *buf, size_t n)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	snprintf(buf, n, "?");
	if (!ci || !ci->client_addr)
		return;
	const struct sockaddr *sa = ci->client_addr;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
			  (socklen_t)n);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf,
			  (socklen_t)n);
}

/* ---- the access handler ------------------------------------------------------------ */

static http_method method_of(const char *m)
{
	if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
		return HTTP_GET;
	if (!strcmp(m, "POST") || !strcmp(m, "PUT"))
		return HTTP_POST;
	if (!strcmp(m, "DELETE"))
		return HTTP_DELETE;
	return HTTP_NMETHODS;
}

/* The size of a request's head, for its limits, and what its headers say
 * of its framing. */
typedef struct head_size {
	size_t n, bytes, content_length, host;
	bool transfer_encoding;
	const char *bad_coding;    /* a Transfer-Encoding other than chunked */
	const char *bad_name;      /* the first header name that is not a token */
} head_size;

/* Whether name is an RFC 9110 token (field names are): no white space, no
 * separator, no control byte.  libmicrohttpd 0.9.75 takes "Bad Name: v" as
 * a header named "Bad Name" (its check of white space before the colon is
 * on only when strict_for_client is -1, the opposite of its documentation),
 * which RFC 9112 section 5.1 says a server must refuse with a 400. */
static bool is_token(const char *name)
{
	if (!*name)
		return false;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p <= ' ' || *p >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", *p))
			return false;
	return true;
}

static MHD_RESULT count_value(void *cls, enum MHD_ValueKind kind, const char *key,
			      const char *value)
{
	head_size *h = cls;
	h->n++;
	h->bytes += strlen(key) + (value ? strlen(value) : 0) + 2;   /* '=' or ": ", '&' */
	if (kind == MHD_HEADER_KIND) {
		h->content_length += !strcasecmp(key, "Content-Length");
		h->host += !strcasecmp(key, "Host");
		if (!strcasecmp(key, "Transfer-Encoding")) {
			h->transfer_encoding = true;
			if ((!value || strcasecmp(value, "chunked")) && !h->bad_coding)
				h->bad_coding = value ? value : "";
		}
		if (!h->bad_name && !is_token(key))
			h->bad_name = key;
	}
	return MHD_YES;
}

/* A JSON error when the request's head is over a limit, ambiguous about
 * its body's length (two Content-Lengths, or one with Transfer-Encoding: a
 * proxy in front may read the body differently; a transfer coding other
 * than chunked, whose length libmicrohttpd would take as "until the
 * connection closes"), or malformed in a way libmicrohttpd lets through (a
 * header name that is not a token; HTTP/1.1 without exactly one Host), else
 * MHD_YES. */
static MHD_RESULT check_head(struct MHD_Connection *c, req_ctx *rc, const char *url,
			     const char *version, bool *answered)
{
	head_size q = { 0 }, h = { 0 };
	char msg[200];
	*answered = true;
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, count_value, &q);
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_value, &h);
	if (q.n > MAX_QUERY_PARAMS) {
		snprintf(msg, sizeof msg, "the URL has %zu query parameters, at most %d",
			 q.n, MAX_QUERY_PARAMS);
		return send_error(c, rc, 414, "uri_too_long", msg);
	}
	if (strlen(url) + q.bytes > MAX_URL) {
		snprintf(msg, sizeof msg, "the URL is %zu bytes long, at most %d",
			 strlen(url) + q.bytes, MAX_URL);
		return send_error(c, rc, 414, "uri_too_long", msg);
	}
	if (h.bytes > MAX_HEADER_BYTES) {
		snprintf(msg, sizeof msg, "the request's headers are %zu bytes, at most %d",
			 h.bytes, MAX_HEADER_BYTES);
		return send_error(c, rc, 431, "headers_too_large", msg);
	}
	if (h.content_length > 1) {
		snprintf(msg, sizeof msg, "the request has %zu Content-Length headers: send one",
			 h.content_length);
		return send_error(c, rc, 400, "bad_request", msg);
	}
	if (h.content_length && h.transfer_encoding)
		return send_error(c, rc, 400, "bad_request", "the request has both Content-Length "
				  "and Transfer-Encoding: send one");
	if (h.bad_coding) {
		snprintf(msg, sizeof msg, "Transfer-Encoding \"%.60s\" is not supported: send "
			 "\"chunked\" or a Content-Length", h.bad_coding);
		return send_error(c, rc, 400, "bad_request", msg);
	}
	if (h.bad_name) {
		snprintf(msg, sizeof msg, "the header name \"%.60s\" is not a token (no white "
			 "space or separator before the colon)", h.bad_name);
		return send_error(c, rc, 400, "bad_request", msg);
	}
	/* HTTP/1.1 to 1.9 (libmicrohttpd takes 1.2 to 1.9 as 1.1) */
	if (h.host != 1 && version && !strncmp(version, "HTTP/1.", 7) && version[7] >= '1') {
		snprintf(msg, sizeof msg, "an %.8s request needs one Host header, this one "
			 "has %zu", version, h.host);
		return send_error(c, rc, 400, "bad_request", msg);
	}
	*answered = false;
	return MHD_YES;
}

static MHD_RESULT first_call(tird *d, struct MHD_Connection *c, req_ctx *rc,
			     const char *url, const char *method, const char *version)
{
	bool answered;
	MHD_RESULT head = check_head(c, rc, url, version, &answered);
	if (answered)
		return head;
	http_method m = method_of(method);
	bool path_known = false;
	for (int i = 0; i < NROUTES; i++) {
		char arg[sizeof rc->arg];
		if (!match(routes[i].pattern, url, arg, sizeof arg))
			continue;
		path_known = true;
		if (routes[i].method == m) {
			rc->route = i;
			memcpy(rc->arg, arg, sizeof arg);
			break;
		}
	}
	if (rc->route == NROUTES) {
		char msg[320];
		snprintf(msg, sizeof msg, path_known ? "%s is not allowed on %.200s"
						     : "no route %s %.200s", method, url);
		return send_error(c, rc, path_known ? 405 : 404,
				  path_known ? "method_not_allowed" : "not_found", msg);
	}
	const route *r = &routes[rc->route];
	rc->token = d->cfg.ntokens ? bearer(d, c) : NULL;
	bool needs = d->cfg.ntokens && r->access != OPEN &&
		     (r->access != READ || d->cfg.protect_reads);
	if (needs && !rc->token)
		return send_error(c, rc, 401, "unauthorized",
				  "this route needs the header Authorization: Bearer TOKEN");
	if (needs && !(rc->token->scopes & (access_scope[r->access] | TIRD_SCOPE(ADMIN)))) {
		char msg[320], sc[64];
		snprintf(msg, sizeof msg, "token %s (scopes %s) may not %s %.100s: it needs the %s "
			 "scope", rc->token->name, tird_scopes_name(rc->token->scopes, sc, sizeof sc),
			 method, routes[rc->route].pattern, access_name[r->access]);
		return send_error(c, rc, 403, "forbidden", msg);
	}
	rc->limit = (size_t)(r->limit == LARGE ? d->cfg.max_import_body : d->cfg.max_body);
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	if (cl && strtoull(cl, NULL, 10) > rc->limit) {
		char msg[160];
		snprintf(msg, sizeof msg, "the body (%s bytes) is larger than this route's "
			 "limit of %zu bytes", cl, rc->limit);
		return send_error(c, rc, 413, "too_large", msg);
	}
	return MHD_YES;
}

static MHD_RESULT on_request(void *cls, struct MHD_Connection *c, const char *url,
			     const char *method, const char *version,
			     const char *upload_data, size_t *upload_data_size,
			     void **con_cls)
{
	tird *d = cls;
	req_ctx *rc = *con_cls;
	if (!rc) {
		rc = calloc(1, sizeof *rc);
		if (!rc)
			abort();
		clock_gettime(CLOCK_MONOTONIC, &rc->t0);
		rc->route = NROUTES;
		*con_cls = rc;
		return first_call(d, c, rc, url, method, version);
	}
	if (rc->status)            /* answered already (an early error) */
		return (*upload_data_size = 0, MHD_YES);
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (rc->too_large || rc->len + n > rc->limit) {
			rc->too_large = true;
			return MHD_YES;
		}
		if (rc->len + n + 1 > rc->cap) {
			rc->cap = (rc->len + n + 1) * 2;
			if (rc->cap > rc->limit + 1)
				rc->cap = rc->limit + 1;
			rc->body = realloc(rc->body, rc->cap);
			if (!rc->body)
				abort();
		}
		memcpy(rc->body + rc->len, upload_data, n);
		rc->len += n;
		return MHD_YES;
	}
	if (rc->too_large) {
		char msg[128];
		snprintf(msg, sizeof msg, "the body is larger than this route's limit of %zu bytes",
			 rc->limit);
		return send_error(c, rc, 413, "too_large", msg);
	}
	char why[160];
	if (rc->len && !check_body(rc->body, rc->len, why, sizeof why))
		return send_error(c, rc, 400, "bad_json", why);
	http_req req = { d, c, routes[rc->route].method, url, rc->arg,
			 rc->body ? rc->body : "", rc->len, rc->token, "" };
	peer_of(c, req.peer, sizeof req.peer);
	if (rc->body)
		rc->body[rc->len] = '\0';
	http_resp out = { 500, NULL, NULL, NULL, NULL, NULL };
	if (atomic_load(&d->stopping) && routes[rc->route].access != OPEN &&
	    rc->route != 0) {
		http_error(&out, 503, "stopping", "tird is shutting down");
	} else {
		routes[rc->route].fn(&req, &out);
		if (!out.body && !out.stream)
			http_error(&out, 500, "internal", "the handler gave no answer");
	}
	return send_resp(c, rc, &out);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	tird *d = cls;
	req_ctx *rc = *con_cls;
	(void)c;
	(void)toe;
	if (!rc)
		return;
	metrics_observe_http(&d->metrics, rc->route, rc->status ? rc->status : 499,
			     since(&rc->t0));
	free(rc->body);
	free(rc);
	*con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	log_warn("http: %s", msg);
}

static int hex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* libmicrohttpd's decoding of %XX in a path, query key or value, in place,
 * but for %00: a NUL would cut the text short ("/v1/jobs/1%00x" would ask
 * for job 1), so it stays the three characters "%00".  Returns the length. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *w = s;
	(void)cls;
	(void)c;
	for (const char *r = s; *r;) {
		int hi, lo;
		if (r[0] == '%' && (hi = hex(r[1])) >= 0 && (lo = hex(r[2])) >= 0 && (hi | lo)) {
			*w++ = (char)(hi << 4 | lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

int http_bind(tird *d, char *msg, size_t n)
{
	struct sockaddr_in sa = { 0 };
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)d->cfg.port);
	if (inet_pton(AF_INET, d->cfg.host, &sa.sin_addr) != 1) {
		snprintf(msg, n, "listen: \"%s\" is not an IPv4 address", d->cfg.host);
		return -1;
	}
	/* SO_REUSEADDR, for restarts; no SO_REUSEPORT: a second tird on a port
	 * in use must fail, not share the port */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 128)) {
		snprintf(msg, n, "cannot listen on %s:%d (%s)", d->cfg.host, d->cfg.port,
			 errno == EADDRINUSE ? "in use" : errno == EADDRNOTAVAIL
			 ? "not an address of this machine" : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	socklen_t len = sizeof sa;
	if (d->cfg.port == 0 && getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		d->cfg.port = ntohs(sa.sin_port);
	d->listen_fd = fd;
	return 0;
}

int http_start(tird *d, char *msg, size_t n)
{
	struct MHD_Daemon *m = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
		MHD_USE_POLL | MHD_USE_ERROR_LOG,
		0, NULL, NULL, on_request, d,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,     /* first, or MHD warns */
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)d->listen_fd,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, d,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)d->cfg.max_connections,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)d->cfg.max_connections_per_ip,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)d->cfg.idle_timeout_s,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MHD_POOL_BYTES,
		MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
		MHD_OPTION_END);
	if (!m) {
		snprintf(msg, n, "cannot serve on %s:%d", d->cfg.host, d->cfg.port);
		return -1;
	}
	d->http = m;
	d->listen_fd = -1;         /* MHD's now: closed by MHD_stop_daemon */
	return 0;
}

void http_stop(tird *d)
{
	if (d->http)
		MHD_stop_daemon(d->http);
	d->http = NULL;
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	d->listen_fd = -1;
}
