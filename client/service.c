/*
 * service.c — the tirctl commands that talk to a tird over HTTP:
 *
 *   tune FILE|- --target T [--trials N] [--batch B] [--cost-model xgboost|random]
 *        [--seed N] [--patience P] [--fusion inductor|tvm|eager] [--wait] [--timeout S]
 *   jobs [--state S] [--limit N]     status JOB     wait JOB     cancel JOB
 *   best OP [--target T] [--where KEY=VALUE ...]
 *   show KEY [--target T] [--tir|--trace|--source]
 *   workers     export [FILE] [--workload KEY] [--target T]     import FILE [--trust]
 *   records rm ID
 *
 * Each prints text for people, or with --json exactly one JSON document on
 * stdout.  Progress goes to stderr: a bar on a terminal, plain lines
 * otherwise.  Exit statuses are tirctl.h's: 0 ok, 1 bad input (tird said
 * 4xx), 2 usage, 3 the job ended failed or cancelled, 4 tird unreachable or
 * failing.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tir.h"
#include "tirctl.h"

/* ---- arguments ------------------------------------------------------------------ */

typedef struct args {
	const char *pos[2];        /* positional arguments */
	int npos;
	const char *target, *state, *workload, *mode, *cost_model, *fusion;
	long trials, batch, limit;
	long long seed;            /* with has_seed */
	bool has_seed;
	long long patience;        /* with has_patience; 0: never stop early */
	bool has_patience;
	double timeout_s;
	bool wait, tir, trace, source, trust;
	const char *where[32];
	int nwhere;
} args;

/* A decimal integer of v, 0 or more, into *x: false when v is anything else. */
static bool nonneg(const char *v, long long *x)
{
	char *end = NULL;
	errno = 0;
	*x = strtoll(v, &end, 10);
	return !errno && !*end && *x >= 0 && *v >= '0' && *v <= '9';
}

/* Parses argv[1..] against the options a command accepts (a string of names
 * separated by spaces); -1 after a message on anything else. */
static int parse(int argc, char **argv, const char *accepts, int maxpos, tirctl_globals *g,
		 args *a)
{
	memset(a, 0, sizeof *a);
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		if (s[0] != '-' || !s[1]) {
			if (a->npos == maxpos) {
				tirctl_err("%s: unexpected argument '%s'", argv[0], s);
				return -1;
			}
			a->pos[a->npos++] = s;
			continue;
		}
		char name[32];
		const char *eq = strchr(s, '=');
		size_t nl = eq ? (size_t)(eq - s) : strlen(s);
		snprintf(name, sizeof name, "%.*s", (int)nl, s);
		char probe[40];
		snprintf(probe, sizeof probe, " %s ", name + 2);
		char acc[256];
		snprintf(acc, sizeof acc, " %s json ", accepts);
		if (strncmp(name, "--", 2) || !strstr(acc, probe)) {
			tirctl_err("%s: unknown option '%s' (try tirctl --help)", argv[0], s);
			return -1;
		}
		const char *n = name + 2;
		if (!strcmp(n, "json")) { g->json = true; continue; }
		if (!strcmp(n, "wait")) { a->wait = true; continue; }
		if (!strcmp(n, "tir")) { a->tir = true; continue; }
		if (!strcmp(n, "trace")) { a->trace = true; continue; }
		if (!strcmp(n, "source")) { a->source = true; continue; }
		if (!strcmp(n, "trust")) { a->trust = true; continue; }
		const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
		if (!v || !*v) {
			tirctl_err("%s: %s needs a value", argv[0], name);
			return -1;
		}
		char *end = NULL;
		if (!strcmp(n, "target")) a->target = v;
		else if (!strcmp(n, "state")) a->state = v;
		else if (!strcmp(n, "workload")) a->workload = v;
		else if (!strcmp(n, "mode")) a->mode = v;
		else if (!strcmp(n, "fusion")) a->fusion = v;
		else if (!strcmp(n, "cost-model")) a->cost_model = v;   /* tird checks it */
		else if (!strcmp(n, "seed")) {
			if (!nonneg(v, &a->seed)) {
				tirctl_err("%s: --seed takes a non-negative integer", argv[0]);
				return -1;
			}
			a->has_seed = true;
		}
		else if (!strcmp(n, "patience")) {
			if (!nonneg(v, &a->patience)) {
				tirctl_err("%s: --patience takes a non-negative integer (rounds; "
					   "0: never stop early)", argv[0]);
				return -1;
			}
			a->has_patience = true;
		}
		else if (!strcmp(n, "where")) {
			if (a->nwhere == 32 || !strchr(v, '=')) {
				tirctl_err("%s: --where takes KEY=VALUE (at most 32)", argv[0]);
				return -1;
			}
			a->where[a->nwhere++] = v;
		} else if (!strcmp(n, "timeout")) {
			a->timeout_s = strtod(v, &end);
			if (*end || !(a->timeout_s > 0)) {
				tirctl_err("%s: --timeout takes a positive number of seconds", argv[0]);
				return -1;
			}
		} else {
			long x = strtol(v, &end, 10);
			if (*end || x <= 0) {
				tirctl_err("%s: %s takes a positive integer", argv[0], name);
				return -1;
			}
			if (!strcmp(n, "trials")) a->trials = x;
			else if (!strcmp(n, "batch")) a->batch = x;
			else a->limit = x;
		}
	}
	return 0;
}

/* ---- printing ---------------------------------------------------------------------- */

static double num(const cJSON *o, const char *name)
{
	const cJSON *x = cJSON_GetObjectItem(o, name);
	return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *name)
{
	const cJSON *x = cJSON_GetObjectItem(o, name);
	return cJSON_IsString(x) ? x->valuestring : "";
}

/* "matmul M=128 N=128 K=128 batch=1": the op and its numeric parameters. */
static void workload_summary(const cJSON *w, char *out, size_t n)
{
	size_t k = (size_t)snprintf(out, n, "%s", str(w, "op"));
	const cJSON *nodes = w ? cJSON_GetObjectItem(w, "nodes") : NULL;
	if (cJSON_IsArray(nodes)) {
		/* a graph: its nodes' names and ops, "graph mx=amax sh=sub ..." */
		for (const cJSON *x = nodes->child; x && k + 1 < n; x = x->next)
			k += (size_t)snprintf(out + k, n - k, " %s=%s", str(x, "name"), str(x, "op"));
		if (k >= n && n > 4)
			memcpy(out + n - 4, "...", 4);
		return;
	}
	for (const cJSON *x = w ? w->child : NULL; x && k < n; x = x->next) {
		if (cJSON_IsNumber(x))
			k += (size_t)snprintf(out + k, n - k, " %s=%g", x->string, x->valuedouble);
		else if (!strcmp(x->string, "dtype") && cJSON_IsString(x) &&
			 strcmp(x->valuestring, "float32"))
			k += (size_t)snprintf(out + k, n - k, " %s", x->valuestring);
	}
}

/* One result (tune --wait, wait, best) as a line of text. */
static void print_result(const cJSON *r)
{
	char w[256];
	workload_summary(cJSON_GetObjectItem(r, "workload"), w, sizeof w);
	printf("%s on %s: %.3f us, %.2f GFLOP/s after %.0f trials\n"
	       "  workload %s\n  record   %s\n",
	       w, str(r, "target"), num(r, "latency_us"), num(r, "gflops"), num(r, "trials"),
	       str(r, "workload_key"), str(r, "record_id"));
}

static void print_job(const cJSON *j)
{
	char w[256];
	workload_summary(cJSON_GetObjectItem(j, "workload"), w, sizeof w);
	printf("job %.0f: %s%s%s  %s on %s  %.0f/%.0f trials", num(j, "job_id"), str(j, "state"),
	       cJSON_IsTrue(cJSON_GetObjectItem(j, "cached")) ? " (from the cache)" : "",
	       cJSON_IsTrue(cJSON_GetObjectItem(j, "joined")) ? " (joined)" : "", w,
	       str(j, "target"), num(j, "trials_done"), num(j, "trials"));
	double us = num(j, "best_us");
	if (us > 0)
		printf("  best %.3f us, %.2f GFLOP/s", us, num(j, "best_gflops"));
	putchar('\n');
	if (*str(j, "message"))
		printf("  %s\n", str(j, "message"));
}

/* ---- waiting for a job ---------------------------------------------------------------- */

static bool ended(const char *state)
{
	return !strcmp(state, "done") || !strcmp(state, "failed") || !strcmp(state, "cancelled");
}

static void progress(const cJSON *j, bool tty, bool *drawn, double *last_done,
		     char *last_state, size_t n)
{
	double done = num(j, "trials_done"), total = num(j, "trials"), us = num(j, "best_us");
	const char *state = str(j, "state");
	if (tty) {
		int width = 24, fill = total > 0 ? (int)(width * fmin(done / total, 1.0)) : 0;
		char bar[32];
		for (int i = 0; i < width; i++)
			bar[i] = i < fill ? '#' : '-';
		bar[width] = '\0';
		fprintf(stderr, "\r\033[Kjob %.0f %-9s [%s] %4.0f/%.0f trials", num(j, "job_id"),
			state, bar, done, total);
		if (us > 0)
			fprintf(stderr, "  best %.3f us  %.2f GFLOP/s", us, num(j, "best_gflops"));
		*drawn = true;
	} else if (done != *last_done || strcmp(state, last_state)) {
		fprintf(stderr, "job %.0f: %s, %.0f/%.0f trials", num(j, "job_id"), state, done, total);
		if (us > 0)
			fprintf(stderr, ", best %.3f us (%.2f GFLOP/s)", us, num(j, "best_gflops"));
		fputc('\n', stderr);
	}
	*last_done = done;
	snprintf(last_state, n, "%s", state);
}

/* Follows job id until it ends (or timeout_s passes); prints its result and
 * returns the exit status. */
/* Follows job id until it ends; prints its result, or with out hands the
 * result (the job's "result" with job_id, state, cached) to the caller. */
static int follow_to(tirctl_globals *g, long long id, double timeout_s, cJSON **out)
{
	bool tty = isatty(STDERR_FILENO), drawn = false, quiet = g->json && !tty;
	double last_done = -1, version = 0;
	char last_state[16] = "";
	time_t start = time(NULL);
	cJSON *j = NULL;
	int rc;
	double backoff = 0.1;      /* seconds; see below */
	for (;;) {
		char path[96];
		snprintf(path, sizeof path, "/v1/jobs/%lld?wait=10&version=%.0f", id, version);
		cJSON_Delete(j);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if ((rc = tirctl_call(g, "GET", path, NULL, 30, &j)))
			goto out;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
		double was = version;
		version = num(j, "version");
		/* a long poll answers at a change or after its wait; one that
		 * answers at once with nothing new (a tird that does not wait, a
		 * job row nothing updates) is asked again later and later, up to
		 * every 5 s, never in a busy loop */
		if (version == was && took < 1.0 && !ended(str(j, "state"))) {
			struct timespec ts = { (time_t)backoff,
					       (long)((backoff - (double)(time_t)backoff) * 1e9) };
			nanosleep(&ts, NULL);
			backoff = backoff * 2 < 5 ? backoff * 2 : 5;
		} else {
			backoff = 0.1;
		}
		if (!quiet)
			progress(j, tty, &drawn, &last_done, last_state, sizeof last_state);
		if (ended(str(j, "state")))
			break;
		if (timeout_s > 0 && difftime(time(NULL), start) > timeout_s) {
			if (drawn)
				fputc('\n', stderr);
			tirctl_err("job %lld: still %s after %.0f s (it goes on; `tirctl wait %lld`)",
				   id, str(j, "state"), timeout_s, id);
			rc = TIRCTL_FAILED;
			goto out;
		}
	}
	if (drawn)
		fputc('\n', stderr);
	const cJSON *r = cJSON_GetObjectItem(j, "result");
	if (!strcmp(str(j, "state"), "done") && cJSON_IsObject(r)) {
		cJSON *res = cJSON_Duplicate(r, 1);
		cJSON_AddNumberToObject(res, "job_id", (double)id);
		cJSON_AddStringToObject(res, "state", "done");
		cJSON_AddBoolToObject(res, "cached", cJSON_IsTrue(cJSON_GetObjectItem(j, "cached")));
		if (out)
			*out = res;
		else if (g->json)
			tirctl_print_json(res);
		else
			print_result(res);
		if (!out)
			cJSON_Delete(res);
		rc = TIRCTL_OK;
	} else {
		tirctl_err("job %lld %s: %s", id, str(j, "state"),
			   *str(j, "message") ? str(j, "message") : "no result");
		if (g->json && !out)
			tirctl_print_json(j);
		rc = TIRCTL_FAILED;
	}
out:
	cJSON_Delete(j);
	return rc;
}

static int follow(tirctl_globals *g, long long id, double timeout_s)
{
	return follow_to(g, id, timeout_s, NULL);
}

static bool job_id_arg(const args *a, const char *cmd, long long *id)
{
	char *end;
	if (a->npos != 1 || (*id = strtoll(a->pos[0], &end, 10)) <= 0 || *end) {
		tirctl_err("%s: expected a job id (a positive integer)", cmd);
		return false;
	}
	return true;
}

/* ---- commands -------------------------------------------------------------------------- */

/* The text of FILE, the command's one positional argument (- for stdin),
 * and its length (if len); NULL after telling the user what `cmd` expected
 * (also when `missing`, another required option is absent) or why the file
 * cannot be read, *rc the exit code. */
static char *file_arg(const args *a, bool missing, const char *cmd, const char *expected,
		      size_t *len, int *rc)
{
	if (a->npos != 1 || missing) {
		tirctl_err("%s: expected %s", cmd, expected);
		*rc = TIRCTL_USAGE;
		return NULL;
	}
	char *text = tir_read_file(a->pos[0], 0, len);
	if (!text) {
		tirctl_err("%s: cannot read %s: %s", cmd, a->pos[0], strerror(errno));
		*rc = TIRCTL_BAD_INPUT;
	}
	return text;
}

static char *job_body(const args *a, cJSON *w);
static int tune_plan(tirctl_globals *g, const args *a, const cJSON *wj);

int tirctl_tune(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (parse(argc, argv, "target trials batch cost-model seed patience fusion wait timeout", 1, g, &a))
		return TIRCTL_USAGE;
	size_t len;
	int rc;
	char *text = file_arg(&a, !a.target, "tune", "FILE (or - for stdin) and --target T", &len,
			      &rc);
	if (!text)
		return rc;
	const char *end = NULL;
	cJSON *w = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	long at = w || !end ? 0L : (long)(end - text);
	free(text);
	if (!cJSON_IsObject(w)) {
		tirctl_err("tune: %s is not a JSON object (at byte %ld)", a.pos[0], at);
		cJSON_Delete(w);
		return TIRCTL_BAD_INPUT;
	}
	/* a graph is planned here, Inductor's plan unless --fusion says
	 * otherwise; --fusion none tunes it as one program */
	const cJSON *op = cJSON_GetObjectItem(w, "op");
	bool graph = cJSON_IsString(op) && !strcmp(op->valuestring, "graph");
	if (graph && !a.fusion)
		a.fusion = "inductor";
	if (a.fusion && strcmp(a.fusion, "none")) {
		rc = tune_plan(g, &a, w);
		cJSON_Delete(w);
		return rc;
	}
	char *s = job_body(&a, w);
	cJSON *job = NULL;
	rc = tirctl_call(g, "POST", "/v1/jobs", s, 0, &job);
	free(s);
	if (rc)
		return rc;
	if (a.wait) {
		long long id = (long long)num(job, "job_id");
		cJSON_Delete(job);
		return follow(g, id, a.timeout_s);
	}
	if (g->json)
		tirctl_print_json(job);
	else
		print_job(job);
	cJSON_Delete(job);
	return TIRCTL_OK;
}

/* The body of POST /v1/jobs for workload w (taken) with a's settings. */
static char *job_body(const args *a, cJSON *w)
{
	cJSON *body = cJSON_CreateObject();
	const cJSON *op = cJSON_GetObjectItem(w, "op");
	bool graph = cJSON_IsString(op) && !strcmp(op->valuestring, "graph");
	cJSON_AddItemToObject(body, "workload", w);
	cJSON_AddStringToObject(body, "target", a->target);
	if (graph)      /* a kernel, or --fusion none: one program */
		cJSON_AddStringToObject(body, "fusion", "none");
	if (a->trials)
		cJSON_AddNumberToObject(body, "trials", (double)a->trials);
	if (a->batch)
		cJSON_AddNumberToObject(body, "batch", (double)a->batch);
	if (a->cost_model || a->has_seed || a->has_patience) {
		cJSON *so = cJSON_AddObjectToObject(body, "search");
		if (a->cost_model)
			cJSON_AddStringToObject(so, "cost_model", a->cost_model);
		if (a->has_seed)
			cJSON_AddNumberToObject(so, "seed", (double)a->seed);
		if (a->has_patience)
			cJSON_AddNumberToObject(so, "patience", (double)a->patience);
	}
	char *s = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	return s;
}

#define TIRCTL_ALTERNATIVES 4   /* plans of near ties tried by --fusion measured */

/* The key of kernel k of p as a workload of its own (its graph document). */
static void kernel_key(const tir_fusion_plan *p, int k, char *key)
{
	tir_error err = { "" };
	char *doc = tir_fusion_kernel_json(p, k);
	tir_workload *w = doc ? tir_workload_parse(doc, strlen(doc), NULL, &err) : NULL;
	snprintf(key, 65, "%s", w ? tir_workload_key(w) : "");
	tir_workload_free(w);
	free(doc);
}

/* Submits every kernel of p as a job (kernels already submitted, by key in
 * keys[0..*nk), are not sent again); appends to ks one object per kernel
 * of p: {"name", "nodes", "job_id", "workload_key"}. */
static int submit_kernels(tirctl_globals *g, const args *a, const tir_fusion_plan *p, cJSON *ks)
{
	char *pj = tir_fusion_plan_json(p);
	cJSON *plan = cJSON_Parse(pj);
	free(pj);
	cJSON *kernels = cJSON_GetObjectItem(plan, "kernels");
	int rc = TIRCTL_OK;
	for (int k = 0; k < tir_fusion_plan_kernels(p) && rc == TIRCTL_OK; k++) {
		char *doc = tir_fusion_kernel_json(p, k);
		cJSON *kw = cJSON_Parse(doc);
		free(doc);
		char *body = job_body(a, kw);
		cJSON *job = NULL;
		rc = tirctl_call(g, "POST", "/v1/jobs", body, 0, &job);
		free(body);
		if (rc)
			break;
		cJSON *ko = cJSON_CreateObject();
		cJSON_AddStringToObject(ko, "name", tir_fusion_kernel_name(p, k));
		cJSON *kn = cJSON_GetArrayItem(kernels, k);
		cJSON_AddItemToObject(ko, "nodes", cJSON_Duplicate(cJSON_GetObjectItem(kn, "nodes"), 1));
		cJSON_AddNumberToObject(ko, "job_id", num(job, "job_id"));
		cJSON_AddStringToObject(ko, "workload_key", str(job, "workload_key"));
		cJSON_AddItemToArray(ks, ko);
		cJSON_Delete(job);
	}
	cJSON_Delete(plan);
	return rc;
}

/* Waits for every job of ks, adding each kernel's latency_us and record_id. */
static int wait_kernels(tirctl_globals *g, const args *a, cJSON *ks)
{
	for (int k = 0; k < cJSON_GetArraySize(ks); k++) {
		cJSON *ko = cJSON_GetArrayItem(ks, k), *res = NULL;
		int rc = follow_to(g, (long long)num(ko, "job_id"), a->timeout_s, &res);
		if (rc)
			return rc;
		cJSON_AddNumberToObject(ko, "latency_us", num(res, "latency_us"));
		cJSON_AddStringToObject(ko, "record_id", str(res, "record_id"));
		cJSON_Delete(res);
	}
	return TIRCTL_OK;
}

/* The latency of the kernel of key in ks (-1: not there). */
static double latency_of(const cJSON *ks, const char *key)
{
	for (const cJSON *ko = ks ? ks->child : NULL; ko; ko = ko->next)
		if (!strcmp(str(ko, "workload_key"), key))
			return num(ko, "latency_us");
	return -1;
}

/* tune --fusion M: the graph planned here (tuner/fusion/), each kernel
 * submitted as a workload of its own (its graph document: two graphs with
 * the same kernel share its job and records); with --wait, every kernel's
 * best and the graph's latency, their sum: {"fusion", "kernels": [{"name",
 * "nodes", "job_id", "workload_key", "latency_us", "record_id"}],
 * "latency_us"}; without, the kernels' jobs.  M measured (needs --wait):
 * the Inductor plan's kernels and the parts of each fusion (its members,
 * a kernel each) are tuned, a fusion is kept only where the fused kernel is
 * faster than its parts together, and "decisions" gives both times:
 * [{"kernel", "nodes", "fused_us", "parts_us", "kept"}]; then the plans
 * the greedy order skipped at near ties (tir_fusion_plan_alternatives) are
 * tuned too, and the fastest plan of all is the answer ("kernels"):
 * "alternatives": [{"kernels", "latency_us", "chosen"}]. */
static int tune_plan(tirctl_globals *g, const args *a, const cJSON *wj)
{
	tir_error err = { "" };
	tir_fuse_mode mode;
	if (tir_fuse_mode_parse(a->fusion, &mode, &err)) {
		tirctl_err("tune: --fusion: %s (or none: the graph as one program)", err.msg);
		return TIRCTL_USAGE;
	}
	bool measured = mode == TIR_FUSE_MEASURED;
	if (measured && !a->wait) {
		tirctl_err("tune: --fusion measured decides by measured times: it needs --wait");
		return TIRCTL_USAGE;
	}
	char *text = cJSON_PrintUnformatted(wj);
	tir_workload *w = tir_workload_parse(text, strlen(text), NULL, &err);
	free(text);
	if (!w) {
		tirctl_err("tune: %s: %s", a->pos[0], err.msg);
		return TIRCTL_BAD_INPUT;
	}
	tir_fusion_plan *p = tir_fusion_plan_new(w, measured ? TIR_FUSE_INDUCTOR : mode, &err);
	tir_fusion_plan *parts = NULL, *final = NULL;
	unsigned char *split = NULL;
	cJSON *out = cJSON_CreateObject(), *ks = cJSON_CreateArray(), *pks = cJSON_CreateArray();
	cJSON *dec = cJSON_CreateArray(), *alts = NULL;
	int rc = TIRCTL_OK;
	if (!p) {
		tirctl_err("tune: %s: %s", a->pos[0], err.msg);
		rc = TIRCTL_BAD_INPUT;
		goto out;
	}
	int n = tir_fusion_plan_kernels(p);
	if (measured) {
		split = calloc((size_t)n + 1, 1);
		for (int k = 0; k < n; k++)
			split[k] = tir_fusion_kernel_members(p, k) > 1;
		if (!(parts = tir_fusion_plan_split(p, split, TIR_FUSE_INDUCTOR, &err))) {
			tirctl_err("tune: %s: %s", a->pos[0], err.msg);
			rc = TIRCTL_BAD_INPUT;
			goto out;
		}
	}
	if ((rc = submit_kernels(g, a, p, ks)) || (parts && (rc = submit_kernels(g, a, parts, pks))))
		goto out;
	if (a->wait && ((rc = wait_kernels(g, a, ks)) || (rc = wait_kernels(g, a, pks))))
		goto out;
	if (measured) {
		for (int k = 0; k < n; k++) {
			if (!split[k])
				continue;
			char key[65];
			kernel_key(p, k, key);
			double fused = latency_of(ks, key), sum = 0;
			for (int j = 0; j < tir_fusion_plan_kernels(parts); j++)
				if (tir_fusion_kernel_within(parts, j, p, k)) {
					kernel_key(parts, j, key);
					sum += latency_of(pks, key);
				}
			split[k] = !(fused <= sum);
			cJSON *d = cJSON_CreateObject();
			cJSON_AddStringToObject(d, "kernel", tir_fusion_kernel_name(p, k));
			cJSON *ko = cJSON_GetArrayItem(ks, k);
			cJSON_AddItemToObject(d, "nodes", cJSON_Duplicate(cJSON_GetObjectItem(ko, "nodes"), 1));
			cJSON_AddNumberToObject(d, "fused_us", fused);
			cJSON_AddNumberToObject(d, "parts_us", sum);
			cJSON_AddBoolToObject(d, "kept", !split[k]);
			cJSON_AddItemToArray(dec, d);
		}
		if (!(final = tir_fusion_plan_split(p, split, TIR_FUSE_MEASURED, &err))) {
			tirctl_err("tune: %s: %s", a->pos[0], err.msg);
			rc = TIRCTL_BAD_INPUT;
			goto out;
		}
		/* the measured plan's kernels, each one tuned above */
		cJSON *fk = cJSON_CreateArray();
		for (int k = 0; k < tir_fusion_plan_kernels(final); k++) {
			char key[65];
			kernel_key(final, k, key);
			const cJSON *from = NULL;
			for (const cJSON *x = ks->child; x && !from; x = x->next)
				if (!strcmp(str(x, "workload_key"), key))
					from = x;
			for (const cJSON *x = pks->child; x && !from; x = x->next)
				if (!strcmp(str(x, "workload_key"), key))
					from = x;
			if (from)
				cJSON_AddItemToArray(fk, cJSON_Duplicate(from, 1));
		}
		cJSON_Delete(ks);
		ks = fk;
		/* the plans the greedy order skipped at a near tie, each tuned
		 * kernel by kernel: the fastest of them all is the answer */
		tir_fusion_plan *alt[TIRCTL_ALTERNATIVES];
		int na = tir_fusion_plan_alternatives(w, alt, TIRCTL_ALTERNATIVES, &err), chosen = -1;
		if (na < 0) {
			tirctl_err("tune: %s: %s", a->pos[0], err.msg);
			rc = TIRCTL_BAD_INPUT;
			goto out;
		}
		double best = 0;
		for (const cJSON *x = ks->child; x; x = x->next)
			best += num(x, "latency_us");
		alts = cJSON_CreateArray();
		for (int i = 0; i < na; i++) {
			cJSON *aks = cJSON_CreateArray();
			if (rc == TIRCTL_OK)
				rc = submit_kernels(g, a, alt[i], aks);
			if (rc == TIRCTL_OK)
				rc = wait_kernels(g, a, aks);
			double t = 0;
			for (const cJSON *x = aks->child; x; x = x->next)
				t += num(x, "latency_us");
			cJSON *ao = cJSON_CreateObject();
			cJSON_AddItemToObject(ao, "kernels", aks);
			cJSON_AddNumberToObject(ao, "latency_us", t);
			cJSON_AddItemToArray(alts, ao);
			if (rc == TIRCTL_OK && t < best) {
				best = t;
				chosen = i;
			}
			tir_fusion_plan_free(alt[i]);
		}
		if (rc)
			goto out;
		for (int i = 0; i < na; i++)
			cJSON_AddBoolToObject(cJSON_GetArrayItem(alts, i), "chosen", i == chosen);
		if (chosen >= 0) {
			cJSON_Delete(ks);
			ks = cJSON_Duplicate(cJSON_GetObjectItem(cJSON_GetArrayItem(alts, chosen),
								 "kernels"), 1);
		}
	}
	cJSON_AddStringToObject(out, "fusion", tir_fuse_mode_name(mode));
	cJSON_AddStringToObject(out, "mode", tir_fuse_mode_name(mode));   /* as a plan's */
	cJSON_AddItemToObject(out, "kernels", ks);
	ks = NULL;
	if (measured) {
		cJSON_AddItemToObject(out, "decisions", dec);
		dec = NULL;
		cJSON_AddItemToObject(out, "alternatives", alts);
		alts = NULL;
	}
	const cJSON *kl = cJSON_GetObjectItem(out, "kernels");
	double total = 0;
	for (const cJSON *x = kl->child; x; x = x->next)
		total += num(x, "latency_us");
	if (a->wait)
		cJSON_AddNumberToObject(out, "latency_us", total);
	if (g->json) {
		tirctl_print_json(out);
	} else {
		printf("%s plan of %s: %d kernel%s on %s\n", tir_fuse_mode_name(mode), a->pos[0],
		       cJSON_GetArraySize(kl), cJSON_GetArraySize(kl) == 1 ? "" : "s", a->target);
		for (const cJSON *x = kl->child; x; x = x->next) {
			printf("  %-40s job %.0f", str(x, "name"), num(x, "job_id"));
			if (a->wait)
				printf("  %.3f us", num(x, "latency_us"));
			printf("\n");
		}
		for (const cJSON *d = measured ? cJSON_GetObjectItem(out, "decisions")->child : NULL; d;
		     d = d->next)
			printf("  %s %s: fused %.3f us, parts %.3f us\n",
			       cJSON_IsTrue(cJSON_GetObjectItem(d, "kept")) ? "kept  " : "undone",
			       str(d, "kernel"), num(d, "fused_us"), num(d, "parts_us"));
		int ai = 0;
		for (const cJSON *x = measured ? cJSON_GetObjectItem(out, "alternatives")->child : NULL;
		     x; x = x->next, ai++) {
			printf("  alternative %d (a near tie the greedy order decided, the other way):", ai);
			for (const cJSON *k = cJSON_GetObjectItem(x, "kernels")->child; k; k = k->next)
				printf(" %s", str(k, "name"));
			printf(": %.3f us%s\n", num(x, "latency_us"),
			       cJSON_IsTrue(cJSON_GetObjectItem(x, "chosen")) ? ", chosen" : "");
		}
		if (a->wait)
			printf("graph: %.3f us\n", total);
	}
out:
	cJSON_Delete(out);
	cJSON_Delete(ks);
	cJSON_Delete(pks);
	cJSON_Delete(dec);
	cJSON_Delete(alts);
	free(split);
	tir_fusion_plan_free(final);
	tir_fusion_plan_free(parts);
	tir_fusion_plan_free(p);
	tir_workload_free(w);
	return rc;
}

int tirctl_wait(tirctl_globals *g, int argc, char **argv)
{
	args a;
	long long id;
	if (parse(argc, argv, "timeout", 1, g, &a) || !job_id_arg(&a, "wait", &id))
		return TIRCTL_USAGE;
	return follow(g, id, a.timeout_s);
}

int tirctl_status(tirctl_globals *g, int argc, char **argv)
{
	args a;
	long long id;
	if (parse(argc, argv, "", 1, g, &a) || !job_id_arg(&a, "status", &id))
		return TIRCTL_USAGE;
	char path[64];
	snprintf(path, sizeof path, "/v1/jobs/%lld", id);
	cJSON *j;
	int rc = tirctl_call(g, "GET", path, NULL, 0, &j);
	if (rc)
		return rc;
	if (g->json) {
		tirctl_print_json(j);
	} else {
		print_job(j);
		const cJSON *r = cJSON_GetObjectItem(j, "result");
		if (cJSON_IsObject(r))
			print_result(r);
	}
	cJSON_Delete(j);
	return TIRCTL_OK;
}

int tirctl_cancel(tirctl_globals *g, int argc, char **argv)
{
	args a;
	long long id;
	if (parse(argc, argv, "", 1, g, &a) || !job_id_arg(&a, "cancel", &id))
		return TIRCTL_USAGE;
	char path[64];
	snprintf(path, sizeof path, "/v1/jobs/%lld", id);
	cJSON *j;
	int rc = tirctl_call(g, "DELETE", path, NULL, 0, &j);
	if (rc)
		return rc;
	if (g->json)
		tirctl_print_json(j);
	else if (cJSON_IsTrue(cJSON_GetObjectItem(j, "cancel_requested")))
		printf("job %lld: cancel requested; it stops after the batch in flight\n", id);
	else
		print_job(j);
	cJSON_Delete(j);
	return TIRCTL_OK;
}

int tirctl_jobs(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (parse(argc, argv, "state limit", 0, g, &a))
		return TIRCTL_USAGE;
	char path[128];
	snprintf(path, sizeof path, "/v1/jobs?limit=%ld%s%s", a.limit ? a.limit : 50,
		 a.state ? "&state=" : "", a.state ? a.state : "");
	cJSON *j;
	int rc = tirctl_call(g, "GET", path, NULL, 0, &j);
	if (rc)
		return rc;
	if (g->json) {
		tirctl_print_json(j);
	} else {
		printf("%6s  %-9s %-14s %-28s %13s %12s\n", "JOB", "STATE", "WORKLOAD", "TARGET",
		       "TRIALS", "BEST_US");
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "jobs")) {
			char tr[32];
			snprintf(tr, sizeof tr, "%.0f/%.0f", num(x, "trials_done"), num(x, "trials"));
			double us = num(x, "best_us");
			printf("%6.0f  %-9s %-14.12s %-28s %13s ", num(x, "job_id"), str(x, "state"),
			       str(x, "workload_key"), str(x, "target"), tr);
			if (us > 0)
				printf("%12.3f\n", us);
			else
				printf("%12s\n", "-");
		}
	}
	cJSON_Delete(j);
	return TIRCTL_OK;
}

int tirctl_best(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (parse(argc, argv, "target where", 1, g, &a))
		return TIRCTL_USAGE;
	if (a.npos != 1) {
		tirctl_err("best: expected OP (matmul, conv2d, ...)");
		return TIRCTL_USAGE;
	}
	size_t cap = 256, n = 0;
	char *path = malloc(cap);
	if (!path)
		abort();
	char *op = tirctl_escape(a.pos[0]);
	n = (size_t)snprintf(path, cap, "/v1/best?op=%s", op);
	free(op);
	const char *extra[34];
	const char *names[34];
	int ne = 0;
	if (a.target) {
		names[ne] = "target";
		extra[ne++] = a.target;
	}
	for (int i = 0; i < a.nwhere; i++) {
		names[ne] = "where";
		extra[ne++] = a.where[i];
	}
	for (int i = 0; i < ne; i++) {
		char *e = tirctl_escape(extra[i]);
		size_t need = n + strlen(e) + 16;
		if (need > cap) {
			path = realloc(path, cap = need * 2);
			if (!path)
				abort();
		}
		n += (size_t)snprintf(path + n, cap - n, "&%s=%s", names[i], e);
		free(e);
	}
	cJSON *j;
	int rc = tirctl_call(g, "GET", path, NULL, 0, &j);
	free(path);
	if (rc)
		return rc;
	cJSON *arr = cJSON_DetachItemFromObject(j, "best");
	cJSON_Delete(j);
	if (!cJSON_IsArray(arr)) {
		cJSON_Delete(arr);
		arr = cJSON_CreateArray();
	}
	if (g->json) {
		tirctl_print_json(arr);
	} else if (!cJSON_GetArraySize(arr)) {
		printf("no stored best for %s%s%s\n", a.pos[0], a.target ? " on " : "",
		       a.target ? a.target : "");
	} else {
		printf("%-40s %-24s %12s %10s %7s  %s\n", "WORKLOAD", "TARGET", "LATENCY_US",
		       "GFLOP/S", "TRIALS", "KEY");
		const cJSON *x;
		cJSON_ArrayForEach(x, arr) {
			char w[256];
			workload_summary(cJSON_GetObjectItem(x, "workload"), w, sizeof w);
			printf("%-40s %-24s %12.3f %10.2f %7.0f  %.12s\n", w, str(x, "target"),
			       num(x, "latency_us"), num(x, "gflops"), num(x, "trials"),
			       str(x, "workload_key"));
		}
	}
	cJSON_Delete(arr);
	return TIRCTL_OK;
}

int tirctl_show(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (parse(argc, argv, "target tir trace source", 1, g, &a))
		return TIRCTL_USAGE;
	if (a.npos != 1) {
		tirctl_err("show: expected a workload KEY (from tune, best or jobs)");
		return TIRCTL_USAGE;
	}
	if (!a.tir && !a.trace && !a.source)
		a.tir = true;
	char *key = tirctl_escape(a.pos[0]), *t = tirctl_escape(a.target ? a.target : "");
	char path[512];
	snprintf(path, sizeof path, "/v1/workloads/%s?include=%s%s%s%s", key,
		 a.tir ? "tir," : "", a.source ? "source" : "", a.target ? "&target=" : "", t);
	free(key);
	free(t);
	cJSON *j;
	int rc = tirctl_call(g, "GET", path, NULL, 0, &j);
	if (rc)
		return rc;
	const cJSON *best = cJSON_GetObjectItem(j, "best");
	if (g->json) {
		tirctl_print_json(j);
	} else if (!cJSON_GetArraySize(best)) {
		tirctl_err("show: workload %s has no best record%s%s yet", a.pos[0],
			   a.target ? " on " : "", a.target ? a.target : "");
		rc = TIRCTL_FAILED;
	} else {
		const cJSON *b;
		cJSON_ArrayForEach(b, best) {
			/* the summary on stderr, so that stdout is the trace, program
			 * or source alone: `tirctl show KEY --trace > t.json` replays */
			fprintf(stderr, "# %s on %s: %.3f us, %.2f GFLOP/s, record %s\n",
				str(j, "workload_key"), str(b, "target"), num(b, "latency_us"),
				num(b, "gflops"), str(b, "record_id"));
			if (*str(b, "error"))
				fprintf(stderr, "# error: %s\n", str(b, "error"));
			if (a.trace) {
				char *tr = cJSON_Print(cJSON_GetObjectItem(b, "trace"));
				printf("%s\n", tr ? tr : "null");
				free(tr);
			}
			if (a.tir)
				fputs(str(b, "tir"), stdout);
			if (a.source)
				fputs(str(b, "source"), stdout);
		}
	}
	cJSON_Delete(j);
	return rc;
}

int tirctl_workers(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (parse(argc, argv, "", 0, g, &a))
		return TIRCTL_USAGE;
	cJSON *j;
	int rc = tirctl_call(g, "GET", "/v1/workers", NULL, 0, &j);
	if (rc)
		return rc;
	if (g->json) {
		tirctl_print_json(j);
	} else {
		printf("%-16s %-5s %-28s %-8s %s\n", "WORKER", "STATE", "TARGET", "BATCH", "NAME");
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "workers")) {
			char b[24] = "-";
			if (num(x, "batch_id") > 0)
				snprintf(b, sizeof b, "%.0f", num(x, "batch_id"));
			printf("%-16s %-5s %-28s %-8s %s\n", str(x, "worker_id"), str(x, "state"),
			       str(x, "target"), b, str(x, "name"));
		}
	}
	cJSON_Delete(j);
	return TIRCTL_OK;
}

int tirctl_export(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (parse(argc, argv, "workload target", 1, g, &a))
		return TIRCTL_USAGE;
	char *wk = tirctl_escape(a.workload ? a.workload : "");
	char *t = tirctl_escape(a.target ? a.target : "");
	char path[512];
	snprintf(path, sizeof path, "/v1/records?workload=%s&target=%s", wk, t);
	free(wk);
	free(t);
	cJSON *j;
	int rc = tirctl_call(g, "GET", path, NULL, 600, &j);
	if (rc)
		return rc;
	const char *file = a.npos ? a.pos[0] : "-";
	FILE *f = strcmp(file, "-") ? fopen(file, "w") : stdout;
	if (!f) {
		tirctl_err("export: cannot write %s: %s", file, strerror(errno));
		cJSON_Delete(j);
		return TIRCTL_BAD_INPUT;
	}
	char *s = cJSON_PrintUnformatted(j);
	fputs(s, f);
	fputc('\n', f);
	free(s);
	int bad = f != stdout ? fclose(f) : fflush(f);
	int nrec = cJSON_GetArraySize(cJSON_GetObjectItem(j, "records"));
	int nwl = cJSON_GetArraySize(cJSON_GetObjectItem(j, "workloads"));
	cJSON_Delete(j);
	if (bad) {
		tirctl_err("export: writing %s: %s", file, strerror(errno));
		return TIRCTL_BAD_INPUT;
	}
	if (strcmp(file, "-"))
		fprintf(stderr, "exported %d records of %d workloads to %s\n", nrec, nwl, file);
	return TIRCTL_OK;
}

int tirctl_import(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (parse(argc, argv, "trust", 1, g, &a))
		return TIRCTL_USAGE;
	int rc;
	char *text = file_arg(&a, false, "import", "FILE (from tirctl export), or - for stdin",
			      NULL, &rc);
	if (!text)
		return rc;
	cJSON *j;
	rc = tirctl_call(g, "POST", a.trust ? "/v1/records?trust=1" : "/v1/records", text, 600,
			 &j);
	free(text);
	if (rc)
		return rc;
	if (g->json)
		tirctl_print_json(j);
	else
		printf("imported %.0f records (%.0f already stored)%s\n", num(j, "imported"),
		       num(j, "skipped"), a.trust ? ", trusted" : ", untrusted until measured here");
	cJSON_Delete(j);
	return TIRCTL_OK;
}

/* tirctl records rm ID...: DELETE /v1/records/{id} for each, the best of its
 * (workload, target) recomputed by tird. */
int tirctl_records(tirctl_globals *g, int argc, char **argv)
{
	args a;
	if (argc < 3 || strcmp(argv[1], "rm")) {
		tirctl_err("records: usage: tirctl records rm ID");
		return TIRCTL_USAGE;
	}
	if (parse(argc - 1, argv + 1, "", 1, g, &a))
		return TIRCTL_USAGE;
	if (a.npos != 1) {
		tirctl_err("records rm: expected one record ID (64 hex digits, from tirctl export)");
		return TIRCTL_USAGE;
	}
	char *id = tirctl_escape(a.pos[0]);
	char path[600];
	snprintf(path, sizeof path, "/v1/records/%s", id);
	free(id);
	cJSON *j;
	int rc = tirctl_call(g, "DELETE", path, NULL, 60, &j);
	if (rc)
		return rc;
	if (g->json)
		tirctl_print_json(j);
	else
		printf("removed %s%s\n", a.pos[0],
		       cJSON_IsTrue(cJSON_GetObjectItem(j, "best_changed")) ? "; its best recomputed"
									 : "");
	cJSON_Delete(j);
	return TIRCTL_OK;
}
