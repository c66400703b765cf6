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
 * Threads: libmicrohttpd runs one thread per connection (its internal
 * polling thread accepts), so a handler may block — the long polls of
 * workers and of `tirctl tune --wait` do — without holding up other clients.
 * max_connections bounds the threads.
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

enum { OPEN, READ, WRITE };
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

void http_error(http_resp *out, int status, const char *code, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
	cJSON_AddStringToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", msg);
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
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		http_error(out, 400, "bad_request", "the body must be a JSON object");
		return NULL;
	}
	return j;
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

static MHD_RESULT send_resp(struct MHD_Connection *c, req_ctx *rc, http_resp *out)
{
	if (!out->body)
		out->body = tird_strdup("");
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		strlen(out->body), out->body, MHD_RESPMEM_MUST_FREE);
	out->body = NULL;
	MHD_add_response_header(resp, "Content-Type",
				out->content_type ? out->content_type : "application/json");
	if (out->status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"tird\"");
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

/* Constant-time comparison of the Authorization header with the token. */
static bool authorized(const tird *d, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	h += 7;
	const char *t = d->cfg.token;
	size_t hl = strlen(h), tl = strlen(t);
	unsigned diff = hl != tl;
	for (size_t i = 0; i < tl; i++)
		diff |= (unsigned char)t[i] ^ (unsigned char)(i < hl ? h[i] : 0);
	return diff == 0;
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

static MHD_RESULT first_call(tird *d, struct MHD_Connection *c, req_ctx *rc,
			     const char *url, const char *method)
{
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
	if (d->cfg.token && (r->access == WRITE || (r->access == READ && d->cfg.protect_reads)) &&
	    !authorized(d, c))
		return send_error(c, rc, 401, "unauthorized",
				  "this route needs the header Authorization: Bearer TOKEN");
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
	(void)version;
	req_ctx *rc = *con_cls;
	if (!rc) {
		rc = calloc(1, sizeof *rc);
		if (!rc)
			abort();
		clock_gettime(CLOCK_MONOTONIC, &rc->t0);
		rc->route = NROUTES;
		*con_cls = rc;
		return first_call(d, c, rc, url, method);
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
	http_req req = { d, c, routes[rc->route].method, url, rc->arg,
			 rc->body ? rc->body : "", rc->len };
	if (rc->body)
		rc->body[rc->len] = '\0';
	http_resp out = { 500, NULL, NULL };
	if (atomic_load(&d->stopping) && routes[rc->route].access != OPEN &&
	    rc->route != 0) {
		http_error(&out, 503, "stopping", "tird is shutting down");
	} else {
		routes[rc->route].fn(&req, &out);
		if (!out.body)
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
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
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
