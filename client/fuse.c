/*
 * fuse.c — `tirctl fuse FILE|- [--mode inductor|tvm|eager] [--json]`: the
 * fusion plan of a graph workload, offline (no daemon): the kernels, the
 * nodes each computes, the bytes each reads and writes, the pairs a rule
 * refused and why, and the nodes dropped.  Exit 1 for a bad document, 2
 * for a bad command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tirctl.h"
#include "tir.h"

#define MAX_INPUT ((size_t)64 << 20)

int tirctl_fuse(tirctl_globals *g, int argc, char **argv)
{
	const char *file = NULL, *mode = "inductor", *target = NULL, *trials = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json")) {
			g->json = true;
		} else if (!strcmp(a, "--target") || !strcmp(a, "--trials")) {
			const char *v = i + 1 < argc ? argv[++i] : NULL;
			if (!v || !*v) {
				tirctl_err("fuse: %s needs a value", a);
				return TIRCTL_USAGE;
			}
			*(a[3] == 'a' ? &target : &trials) = v;
		} else if (!strcmp(a, "--mode") || !strncmp(a, "--mode=", 7)) {
			mode = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
			if (!mode || !*mode) {
				tirctl_err("fuse: --mode needs a value (inductor, tvm or eager)");
				return TIRCTL_USAGE;
			}
		} else if (a[0] == '-' && a[1]) {
			tirctl_err("fuse: unknown option %s", a);
			return TIRCTL_USAGE;
		} else if (file) {
			tirctl_err("fuse: one FILE only (%s, then %s)", file, a);
			return TIRCTL_USAGE;
		} else {
			file = a;
		}
	}
	if (!file) {
		tirctl_err("fuse: a graph workload FILE (or - for stdin) is needed");
		return TIRCTL_USAGE;
	}
	tir_error err = { "" };
	tir_fuse_mode m;
	if (tir_fuse_mode_parse(mode, &m, &err)) {
		tirctl_err("fuse: %s", err.msg);
		return TIRCTL_USAGE;
	}
	if (m == TIR_FUSE_MEASURED) {
		/* decided by tuning: tirctl tune --fusion measured --wait on tird */
		if (!target) {
			tirctl_err("fuse: --mode measured tunes the kernels through tird: it needs "
				   "--target T (and tird at --server or $TIRD_URL)");
			return TIRCTL_USAGE;
		}
		char *targv[] = { "tune", (char *)file, "--target", (char *)target, "--fusion",
				  "measured", "--wait", trials ? "--trials" : NULL, (char *)trials, NULL };
		return tirctl_tune(g, trials ? 9 : 7, targv);
	}
	if (target || trials) {
		tirctl_err("fuse: --target and --trials are for --mode measured (the other modes "
			   "plan offline)");
		return TIRCTL_USAGE;
	}
	size_t len = 0;
	char *text = tir_read_file(file, MAX_INPUT, &len);
	if (!text) {
		tirctl_err("fuse: cannot read %s: %s", strcmp(file, "-") ? file : "stdin",
			   strerror(errno));
		return TIRCTL_BAD_INPUT;
	}
	tir_workload *w = tir_workload_parse(text, len, NULL, &err);
	free(text);
	if (!w) {
		tirctl_err("fuse: %s: %s", file, err.msg);
		return TIRCTL_BAD_INPUT;
	}
	tir_fusion_plan *p = tir_fusion_plan_new(w, m, &err);
	if (!p) {
		tirctl_err("fuse: %s: %s", file, err.msg);
		tir_workload_free(w);
		return TIRCTL_BAD_INPUT;
	}
	char *out = g->json ? tir_fusion_plan_json(p) : tir_fusion_plan_text(p);
	fputs(out, stdout);
	if (g->json)
		fputc('\n', stdout);
	free(out);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
	return TIRCTL_OK;
}
