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

/* Exit statuses, documented in `tirctl --help`. */
enum {
	TIRCTL_OK = 0,
	TIRCTL_BAD_INPUT = 1,      /* a workload, trace, target or file at fault */
	TIRCTL_USAGE = 2,          /* bad command line, or not in this build */
	TIRCTL_FAILED = 3,         /* the work ran and did not succeed */
};

/* The global options (before the command). */
typedef struct tirctl_globals {
	const char *server;        /* --server, $TIRD_URL */
	const char *token;         /* --token, $TIRD_TOKEN */
	bool json;                 /* --json: one JSON document on stdout */
} tirctl_globals;

/* Prints "tirctl: " and the message to stderr. */
void tirctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* lower.c: `tirctl lower FILE|- --target T [...]`; argv[0] is "lower". */
int tirctl_lower(tirctl_globals *g, int argc, char **argv);
void tirctl_lower_usage(void);

#endif
