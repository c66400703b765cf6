/*
 * request.h — one HTTP request to tird with libcurl, shared by the two
 * programs that talk to it over HTTP: tirctl (client/http.c) and
 * tird-worker (daemon/worker.c).  What each makes of the answer (exit
 * statuses, re-registering) is theirs; the request itself is written once.
 */
#ifndef TIRD_CLIENT_REQUEST_H
#define TIRD_CLIENT_REQUEST_H

#include <stddef.h>

typedef struct client_req {
	const char *server;        /* http://host:port, a trailing '/' is fine */
	const char *token;         /* NULL or "": no Authorization header */
	const char *method;        /* "GET", "POST", "DELETE" */
	const char *path;          /* with its query string */
	const char *body;          /* NULL: none (a POST sends an empty one) */
	double timeout_s;          /* the whole transfer; connecting takes at most 5 s */
	/* optional: polled during the transfer; non-zero aborts it (a worker's
	 * long poll on SIGTERM) */
	int (*stop)(void);
} client_req;

/* Sends r and returns the HTTP status, with the answer in *body (malloc'd,
 * NUL-terminated, NULL when empty; may be NULL to drop it) and its length in
 * *len (may be NULL).  0 when tird could not be reached or the transfer was
 * stopped, with the reason in err (n bytes). */
long client_request(const client_req *r, char **body, size_t *len, char *err, size_t n);

#endif
