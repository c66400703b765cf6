/*
 * request.c — one HTTP request to tird with libcurl (request.h).
 * curl_global_init is the caller's, once, before any thread.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "request.h"

typedef struct buf {
	char *s;
	size_t len;
} buf;

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
	buf *b = ctx;
	size_t add = size * n;
	char *s = realloc(b->s, b->len + add + 1);
	if (!s)
		return 0;              /* curl fails the transfer */
	memcpy(s + b->len, p, add);
	b->s = s;
	b->len += add;
	s[b->len] = '\0';
	return add;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a; (void)b; (void)c; (void)d;
	int (*stop)(void) = *(int (**)(void))ctx;
	return stop() ? 1 : 0;
}

long client_request(const client_req *r, char **body, size_t *len, char *err, size_t n)
{
	if (body)
		*body = NULL;
	if (len)
		*len = 0;
	CURL *c = curl_easy_init();
	if (!c) {
		snprintf(err, n, "cannot start libcurl");
		return 0;
	}
	/* a trailing '/' in the server would make "//v1/..." */
	size_t sl = strlen(r->server);
	if (sl && r->server[sl - 1] == '/' && r->path[0] == '/')
		sl--;
	size_t ul = sl + strlen(r->path) + 1;
	char *url = malloc(ul);
	if (!url)
		abort();
	snprintf(url, ul, "%.*s%s", (int)sl, r->server, r->path);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	h = curl_slist_append(h, "Expect:");
	char *auth = NULL;
	if (r->token && *r->token) {
		size_t al = strlen(r->token) + 32;
		if (!(auth = malloc(al)))
			abort();
		snprintf(auth, al, "Authorization: Bearer %s", r->token);
		h = curl_slist_append(h, auth);
	}
	buf b = { NULL, 0 };
	char cerr[CURL_ERROR_SIZE] = "";
	int (*stop)(void) = r->stop;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)((r->timeout_s > 0 ? r->timeout_s : 60) * 1000));
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	if (stop) {
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, &stop);
	}
	if (r->body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(r->body));
	} else if (!strcmp(r->method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	CURLcode cc = curl_easy_perform(c);
	long status = 0;
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else
		snprintf(err, n, "%s", cerr[0] ? cerr : curl_easy_strerror(cc));
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	free(auth);
	free(url);
	if (len)
		*len = b.len;
	if (body && status)
		*body = b.s;
	else
		free(b.s);
	return status;
}
