/*
 * http.c — tirctl's side of the HTTP API: one function that sends a request
 * to tird with libcurl, parses the JSON answer, and turns tird's errors
 * ({"error": {"code", "message"}}) into a message and an exit status that
 * scripts can trust (tirctl.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "tirctl.h"

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
		return 0;
	memcpy(s + b->len, p, add);
	b->s = s;
	b->len += add;
	s[b->len] = '\0';
	return add;
}

int tirctl_call(const tirctl_globals *g, const char *method, const char *path,
		const char *body, double timeout_s, cJSON **out)
{
	static bool inited;        /* tirctl is single-threaded */
	if (!inited) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		inited = true;
	}
	*out = NULL;
	CURL *c = curl_easy_init();
	if (!c) {
		tirctl_err("cannot start libcurl");
		return TIRCTL_UNAVAILABLE;
	}
	size_t ul = strlen(g->server) + strlen(path) + 2;
	char *url = malloc(ul), auth[1100];
	if (!url)
		abort();
	snprintf(url, ul, "%s%s", g->server, path);
	/* a trailing '/' in --server would make "//v1/..." */
	size_t sl = strlen(g->server);
	if (sl && g->server[sl - 1] == '/' && path[0] == '/')
		snprintf(url, ul, "%.*s%s", (int)(sl - 1), g->server, path);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	h = curl_slist_append(h, "Expect:");
	if (g->token && *g->token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %.1000s", g->token);
		h = curl_slist_append(h, auth);
	}
	buf b = { NULL, 0 };
	char cerr[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)((timeout_s > 0 ? timeout_s : 60) * 1000));
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	CURLcode cc = curl_easy_perform(c);
	long status = 0;
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	int rc = TIRCTL_OK;
	if (cc != CURLE_OK) {
		tirctl_err("cannot reach tird at %s: %s (start it with `tird`, or give "
			   "--server / TIRD_URL)", g->server, cerr[0] ? cerr : curl_easy_strerror(cc));
		rc = TIRCTL_UNAVAILABLE;
		goto out;
	}
	cJSON *j = b.len ? cJSON_Parse(b.s) : NULL;
	if (status >= 200 && status < 300) {
		if (b.len && !j) {
			tirctl_err("%s %s: the answer is not JSON", method, url);
			rc = TIRCTL_UNAVAILABLE;
			goto out;
		}
		*out = j;
		goto out;
	}
	const cJSON *e = cJSON_GetObjectItem(j, "error");
	const cJSON *msg = cJSON_GetObjectItem(e, "message");
	const cJSON *code = cJSON_GetObjectItem(e, "code");
	tirctl_err("%s (HTTP %ld%s%s)", cJSON_IsString(msg) ? msg->valuestring
				: b.len ? b.s : "no message", status,
		   cJSON_IsString(code) ? ", " : "", cJSON_IsString(code) ? code->valuestring : "");
	if (g->json && j)
		tirctl_print_json(j);
	cJSON_Delete(j);
	rc = status == 501 ? TIRCTL_USAGE : status >= 500 ? TIRCTL_UNAVAILABLE : TIRCTL_BAD_INPUT;
out:
	free(b.s);
	free(url);
	return rc;
}

char *tirctl_escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0);
	char *r = strdup(e ? e : "");
	curl_free(e);
	return r;
}

void tirctl_print_json(const cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);
	puts(s ? s : "null");
	free(s);
}
