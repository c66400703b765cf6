/*
 * http.c — tirctl's side of the HTTP API: one function that sends a request
 * to tird (request.c), parses the JSON answer, and turns tird's errors
 * ({"error": {"code", "message"}}) into a message and an exit status that
 * scripts can trust (tirctl.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "request.h"
#include "tirctl.h"

int tirctl_call(const tirctl_globals *g, const char *method, const char *path,
		const char *body, double timeout_s, cJSON **out)
{
	static bool inited;        /* tirctl is single-threaded */
	if (!inited) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		inited = true;
	}
	*out = NULL;
	client_req rq = { g->server, g->token, method, path, body, timeout_s, NULL };
	char *text = NULL, cerr[CURL_ERROR_SIZE + 64];
	size_t len = 0;
	long status = client_request(&rq, &text, &len, cerr, sizeof cerr);
	if (!status) {
		tirctl_err("cannot reach tird at %s: %s (start it with `tird`, or give "
			   "--server / TIRD_URL)", g->server, cerr);
		return TIRCTL_UNAVAILABLE;
	}
	int rc = TIRCTL_OK;
	cJSON *j = len ? cJSON_Parse(text) : NULL;
	if (status >= 200 && status < 300) {
		if (len && !j) {
			tirctl_err("%s %s%s: the answer is not JSON", method, g->server, path);
			rc = TIRCTL_UNAVAILABLE;
		}
		*out = j;
		free(text);
		return rc;
	}
	const cJSON *e = cJSON_GetObjectItem(j, "error");
	const cJSON *msg = cJSON_GetObjectItem(e, "message");
	const cJSON *code = cJSON_GetObjectItem(e, "code");
	tirctl_err("%s (HTTP %ld%s%s)", cJSON_IsString(msg) ? msg->valuestring
				: len ? text : "no message", status,
		   cJSON_IsString(code) ? ", " : "", cJSON_IsString(code) ? code->valuestring : "");
	if (g->json && j)
		tirctl_print_json(j);
	cJSON_Delete(j);
	free(text);
	return status == 501 ? TIRCTL_USAGE : status >= 500 ? TIRCTL_UNAVAILABLE : TIRCTL_BAD_INPUT;
}

char *tirctl_escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0);
	char *r = strdup(e ? e : "");
	if (!r)
		abort();
	curl_free(e);
	return r;
}

void tirctl_print_json(const cJSON *j)
{
	char *s = cJSON_PrintUnformatted(j);
	puts(s ? s : "null");
	free(s);
}
