/*
 * openapi.c — GET /v1/openapi.json: the OpenAPI 3.1 document of tird's
 * HTTP API.
 *
 * The document is the source file daemon/openapi.json, embedded at build
 * time by daemon/embed.sh (Makefile.am), so the binary answers the very
 * text the repository keeps; tests/openapi.sh checks tird's answers on
 * every route against it and its paths against TIRD_ROUTES.  A route added
 * to TIRD_ROUTES without its entry there fails that test.
 */
#include <string.h>
#include "tird.h"

static const char openapi_json[] =
#include "daemon/openapi.inc"      /* built: -I. is the build tree */
	;

void api_openapi(http_req *r, http_resp *out)
{
	(void)r;
	out->status = 200;
	out->body = tird_strdup(openapi_json);
}
