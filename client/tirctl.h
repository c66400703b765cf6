/*
 * tirctl.h — tirctl's commands and what they share.  Internal to client/.
 *
 * tirctl.c parses the global options and dispatches to one function per
 * command (the table TIRCTL_COMMANDS); each command lives in its own file
 * (lower.c, ...).  A command returns the process's exit status.
 */
#ifndef TIRCTL_H
#define TIRCTL_H

#include <stdbool.h>
#include <cJSON.h>

/* Exit statuses, documented in `tirctl --help`. */
enum {
	TIRCTL_OK = 0,
	TIRCTL_BAD_INPUT = 1,      /* a workload, trace, target or file at fault */
	TIRCTL_USAGE = 2,          /* bad command line, or not in this build */
	TIRCTL_FAILED = 3,         /* the work ran and did not succeed */
	TIRCTL_UNAVAILABLE = 4,    /* the service could not be reached, or failed (5xx) */
};

/* The global options (before the command). */
typedef struct tirctl_globals {
	const char *server;        /* --server, $TIRD_URL */
	const char *token;         /* --token, $TIRD_TOKEN */
	bool json;                 /* --json: one JSON document on stdout */
} tirctl_globals;

/* Prints "tirctl: " and the message to stderr. */
void tirctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- http.c: talking to tird ------------------------------------------------ */

/* One request to the service (path with its query string; body may be NULL).
 * Returns TIRCTL_OK with the answer parsed into *out (NULL for an empty
 * answer; the caller cJSON_Delete()s it), or the exit status for the
 * failure after printing tird's error message: TIRCTL_BAD_INPUT for a 4xx,
 * TIRCTL_USAGE for 501 (not in this build of tird), TIRCTL_UNAVAILABLE when
 * tird cannot be reached or answers 5xx.  timeout_s 0: 60 s. */
int tirctl_call(const tirctl_globals *g, const char *method, const char *path,
		const char *body, double timeout_s, cJSON **out);
/* s escaped for a URL query (malloc'd). */
char *tirctl_escape(const char *s);
/* Prints one JSON document on stdout. */
void tirctl_print_json(const cJSON *j);

/* ---- service.c: the commands that talk to tird ---------------------------------
 * Each takes argv[0] = its name and returns the exit status. */
#define TIRCTL_SERVICE_COMMANDS(X) \
	X(tune) X(jobs) X(status) X(wait) X(cancel) X(best) X(show) \
	X(workers) X(export) X(import) X(records)
#define TIRCTL_SERVICE_DECL(name) int tirctl_##name(tirctl_globals *g, int argc, char **argv);
TIRCTL_SERVICE_COMMANDS(TIRCTL_SERVICE_DECL)
#undef TIRCTL_SERVICE_DECL

/* fuse.c: `tirctl fuse FILE|- [--mode M] [--json]`, offline; argv[0] is "fuse". */
int tirctl_fuse(tirctl_globals *g, int argc, char **argv);

/* pack.c: `tirctl pack --target T [--op OP ...] --out DIR`; argv[0] is "pack". */
int tirctl_pack(tirctl_globals *g, int argc, char **argv);

/* lower.c: `tirctl lower FILE|- --target T [...]`; argv[0] is "lower". */
int tirctl_lower(tirctl_globals *g, int argc, char **argv);
void tirctl_lower_usage(void);

#endif
