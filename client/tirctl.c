/*
 * tirctl.c — the command-line client of tird: global options, the table of
 * commands, dispatch.
 *
 * Every command is one row of TIRCTL_COMMANDS.  Most talk to a tird over HTTP
 * (service.c, through http.c); `lower` works offline: it links libtir
 * (lower.c).  A row without a function says so (exit 2) instead of
 * pretending.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tirctl.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* X(name, function or NULL (needs the service), arguments, what it does) */
#define TIRCTL_COMMANDS(X) \
	X(tune,    tirctl_tune, "FILE|- --target T [--trials N] [--batch B] " \
	  "[--cost-model xgboost|random] [--seed N] [--patience P] [--fusion inductor|tvm|eager|measured|none] [--wait] [--timeout S]", \
	  "submit a tuning job; with --wait show progress and the best result;\n" \
	  "           --cost-model ranks candidates by the target's shared XGBoost model\n" \
	  "           (default) or at random, --seed makes the search repeatable,\n" \
	  "           --patience ends it after P rounds in a row found nothing faster\n" \
	  "           (0: never; default: the service's default_patience);\n" \
	  "           a graph is planned (--fusion, inductor by default; none: one\n" \
	  "           program) and each kernel tuned as a job of its own\n" \
	  "           (with --wait: each kernel's best and the graph's total; measured:\n" \
	  "           each fusion kept only where it measures faster than its parts)") \
	X(jobs,    tirctl_jobs, "[--state S] [--limit N]", "list jobs") \
	X(status,  tirctl_status, "JOB", "show one job") \
	X(wait,    tirctl_wait, "JOB [--timeout S]", "wait for a job to end") \
	X(cancel,  tirctl_cancel, "JOB", "cancel a job") \
	X(best,    tirctl_best, "OP [--target T] [--where KEY=VALUE ...]", \
	  "the best schedule of every stored workload of an operator") \
	X(show,    tirctl_show, "KEY [--target T] [--tir|--trace|--source]", \
	  "a workload's best program, trace or kernel source") \
	X(lower,   tirctl_lower, "FILE|- --target T [--trace TRACE.json] [--run] " \
	  "[--seed S] [--timeout S] [--sample N]", "offline: print the program and generated code") \
	X(pack,    tirctl_pack, "--target T [--op OP ...] --out DIR", \
	  "a kernel library (sources, header, Makefile) of the stored bests") \
	X(workers, tirctl_workers, "", "list measurement workers") \
	X(export,  tirctl_export, "[FILE] [--workload KEY] [--target T]", \
	  "export records (idempotent to import)") \
	X(import,  tirctl_import, "FILE [--trust]", \
	  "import records (admin); untrusted until measured here unless --trust") \
	X(records, tirctl_records, "rm ID", \
	  "remove a record (admin); its best is recomputed") \
	X(fuse,    tirctl_fuse, "FILE|- [--mode inductor|tvm|eager|measured --target T [--trials N]]", \
	  "offline: the fusion plan of a graph workload (kernels, bytes, refusals)")

typedef struct command {
	const char *name;
	int (*run)(tirctl_globals *g, int argc, char **argv);
	const char *args, *what;
} command;

static const command commands[] = {
#define TIRCTL_ROW(name, fn, args, what) { #name, fn, args, what },
	TIRCTL_COMMANDS(TIRCTL_ROW)
#undef TIRCTL_ROW
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

void tirctl_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tirctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tirctl [--server URL] [--token T] [--json] COMMAND [ARGS...]\n"
		"       tirctl help | --help | --version\n"
		"\n"
		"global options:\n"
		"  --server URL   the tird service (default $TIRD_URL, else "
		"http://127.0.0.1:8642)\n"
		"  --token T      bearer token for the service (default $TIRD_TOKEN)\n"
		"  --json         print one JSON document instead of text\n"
		"\n"
		"commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-8s %s\n  %8s %s%s\n", commands[i].name, commands[i].args,
			"", commands[i].what,
			commands[i].run ? "" : " (needs the tird service)");
	fprintf(f,
		"\n"
		"exit status:\n"
		"  0  success\n"
		"  1  bad input: a workload, trace, target or file at fault (the message "
		"names it)\n"
		"  2  usage: a bad command line, or a command this build does not have\n"
		"  3  the work ran and did not succeed (lower --run: the candidate failed "
		"to build or run, or gave a wrong result; tune --wait / wait: the job "
		"failed or was cancelled)\n"
		"  4  tird could not be reached, or failed (HTTP 5xx)\n");
}

/* "--opt VALUE" or "--opt=VALUE"; advances *i past what it used. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
	size_t n = strlen(name);
	if (strncmp(argv[*i], name, n) != 0)
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		tirctl_err("%s needs a value", name);
		exit(TIRCTL_USAGE);
	}
	return argv[++*i];
}

int main(int argc, char **argv)
{
	tirctl_globals g = { getenv("TIRD_URL"), getenv("TIRD_TOKEN"), false };
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
		const char *v;
		if (!strcmp(argv[i], "--json")) {
			g.json = true;
		} else if ((v = opt_value(argc, argv, &i, "--server"))) {
			g.server = v;
		} else if ((v = opt_value(argc, argv, &i, "--token"))) {
			g.token = v;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return TIRCTL_OK;
		} else if (!strcmp(argv[i], "--version")) {
			printf("tirctl (tird) %s\n", PACKAGE_VERSION);
			return TIRCTL_OK;
		} else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else {
			tirctl_err("unknown option '%s' (try tirctl --help)", argv[i]);
			return TIRCTL_USAGE;
		}
	}
	if (!g.server || !*g.server)
		g.server = "http://127.0.0.1:8642";
	if (i >= argc) {
		usage(stderr);
		return TIRCTL_USAGE;
	}
	const char *name = argv[i];
	if (!strcmp(name, "help")) {
		if (i + 1 < argc && !strcmp(argv[i + 1], "lower"))
			tirctl_lower_usage();
		else
			usage(stdout);
		return TIRCTL_OK;
	}
	for (size_t k = 0; k < NCOMMANDS; k++) {
		if (strcmp(commands[k].name, name) != 0)
			continue;
		if (!commands[k].run) {
			tirctl_err("command '%s' needs the tird service (not available in "
				   "this build)", name);
			return TIRCTL_USAGE;
		}
		return commands[k].run(&g, argc - i, argv + i);
	}
	tirctl_err("unknown command '%s' (try tirctl --help)", name);
	return TIRCTL_USAGE;
}
