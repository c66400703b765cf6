/*
 * log.c — leveled log lines on stderr:
 *   2026-11-30T12:00:00.123Z tird[1234] info: job 3: queued -> running
 * One write(2) per line, so lines of different threads never interleave.
 * The level is set once at start-up, before any thread exists.
 *
 * Also the two small things every part of the daemon uses: error values
 * (tird_error, TIRD_ERRORS in tird.h) and allocation that never fails.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "tird.h"

static log_level threshold = LOG_INFO;   /* written before threads start */
static const char *const level_names[] = { "debug", "info", "warn", "error" };

void log_set_level(log_level l)
{
	threshold = l;
}

int log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, level_names[i]))
			return i;
	return -1;
}

void log_msg(log_level l, const char *fmt, ...)
{
	if (l < threshold)
		return;
	char line[1024];
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
	n += snprintf(line + n, sizeof line - (size_t)n, ".%03dZ tird[%d] %s: ",
		      (int)(tv.tv_usec / 1000), (int)getpid(), level_names[l]);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = m < 0 ? n : n + m;
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

/* ---- errors ------------------------------------------------------------------------ */

static const char *const errcode_names[TIRD_E_COUNT] = {
	[TIRD_E_NONE] = "",
#define TIRD_E_NAME(id, name) [TIRD_E_##id] = name,
	TIRD_ERRORS(TIRD_E_NAME)
#undef TIRD_E_NAME
};

const char *tird_errcode_name(tird_errcode code)
{
	return (unsigned)code < TIRD_E_COUNT ? errcode_names[code] : "";
}

int tird_store_fail(tird_error *e, const store_error *err, const char *what, ...)
{
	char op[256];
	va_list ap;
	va_start(ap, what);
	vsnprintf(op, sizeof op, what, ap);
	va_end(ap);
	log_error("store: %s: %s", op, err ? err->msg : "(no message)");
	return tird_fail(e, TIRD_E_STORE, "the database failed %s (tird's log has the details)",
			 op);
}

int tird_fail(tird_error *e, tird_errcode code, const char *fmt, ...)
{
	if (e) {
		e->code = code;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---- allocation ------------------------------------------------------------------- */

void *tird_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		abort();
	return p;
}

void *tird_xrealloc(void *p, size_t size)
{
	void *q = realloc(p, size ? size : 1);
	if (!q)
		abort();
	return q;
}

char *tird_strdup(const char *s)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		abort();
	return d;
}
