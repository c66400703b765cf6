/*
 * main.c — tird: start-up, the cron loop, local workers, shutdown.
 *
 *   tird [--config FILE] [--listen ADDR:PORT] [--db PATH]
 *        [--local-workers auto|none|cpu|cuda] [--token-file FILE] [...]
 *
 * Start-up, top to bottom: settings (defaults < config file < flags), the
 * store (migrations), this machine's CPU target, the worker registry, the
 * jobs (those a stopped or killed tird left queued or running resume), the
 * lease thread (lease.c: this replica's claims of jobs, and the jobs of other
 * replicas it may adopt), the HTTP server, the local workers.
 *
 * Signals are blocked in every thread and taken synchronously by the main
 * thread with sigtimedwait, which wakes at least once a second to run cron():
 * so there is no signal handler and no global state.  SIGTERM / SIGINT stop
 * tird gracefully: running jobs go back to queued (they resume at the next
 * start), local workers are told to leave, the database is closed.  SIGCHLD
 * keeps its default action (the measurement runners reap their own children
 * with waitpid; measure.h).
 */
#define _GNU_SOURCE                /* execvpe */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tird.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

extern char **environ;

/* ---- local workers ------------------------------------------------------------ */

#define MAX_LOCAL 4

typedef struct local_worker {
	char target[16];           /* "cpu" or "cuda": the worker resolves it */
	pid_t pid;                 /* 0: not running */
	double started;
	int restarts;
} local_worker;

typedef struct locals {
	local_worker w[MAX_LOCAL];
	int n;
	char bin[PATH_MAX];
	char url[128];
	char **envp;               /* environ plus TIRD_TOKEN */
} locals;

static void find_worker_bin(const tird *d, char *out, size_t n)
{
	if (d->cfg.worker_bin[0]) {
		snprintf(out, n, "%s", d->cfg.worker_bin);
		return;
	}
	char self[PATH_MAX - 16];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len > 0) {
		self[len] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(out, n, "%s/tird-worker", self);
			if (access(out, X_OK) == 0)
				return;
		}
	}
	snprintf(out, n, "tird-worker");      /* from PATH */
}

static void spawn(locals *l, local_worker *w)
{
	char *argv[] = { l->bin, "--server", l->url, "--target", w->target,
			 "--name", "local", NULL };
	sigset_t none;
	sigemptyset(&none);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		/* only async-signal-safe calls until exec */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (strchr(l->bin, '/'))
			execve(l->bin, argv, l->envp);
		else
			execvpe(l->bin, argv, l->envp);
		_exit(127);
	}
	if (pid < 0) {
		log_error("local worker %s: fork: %s", w->target, strerror(errno));
		return;
	}
	w->pid = pid;
	w->started = store_now();
	log_info("local worker for %s started (pid %d, %s)", w->target, (int)pid, l->bin);
}

static void locals_start(tird *d, locals *l)
{
	memset(l, 0, sizeof *l);
	const char *lw = d->cfg.local_workers;
	if (!strcmp(lw, "none") || !lw[0])
		return;
	bool auto_ = !strcmp(lw, "auto");
	bool cpu = auto_ || strstr(lw, "cpu"), cuda = strstr(lw, "cuda") != NULL;
	if (auto_) {
		tir_target t;
		tir_error err = { "" };
		cuda = tir_target_parse("cuda", &t, &err) == 0;   /* asks in a child */
		log_info("local workers: cpu%s", cuda ? ", cuda (" : " (no GPU: ");
		log_info("  %s", cuda ? t.key : err.msg);
	}
	find_worker_bin(d, l->bin, sizeof l->bin);
	const char *host = strcmp(d->cfg.host, "0.0.0.0") ? d->cfg.host : "127.0.0.1";
	snprintf(l->url, sizeof l->url, "http://%s:%d", host, d->cfg.port);
	size_t ne = 0;
	while (environ[ne])
		ne++;
	l->envp = calloc(ne + 2, sizeof *l->envp);
	if (!l->envp)
		abort();
	size_t k = 0;
	for (size_t i = 0; i < ne; i++)
		if (strncmp(environ[i], "TIRD_TOKEN=", 11) != 0)
			l->envp[k++] = environ[i];
	if (d->cfg.token) {
		size_t n = strlen(d->cfg.token) + 12;
		l->envp[k] = malloc(n);
		if (!l->envp[k])
			abort();
		snprintf(l->envp[k++], n, "TIRD_TOKEN=%s", d->cfg.token);
	}
	if (cpu)
		snprintf(l->w[l->n++].target, sizeof l->w[0].target, "cpu");
	if (cuda)
		snprintf(l->w[l->n++].target, sizeof l->w[0].target, "cuda");
	for (int i = 0; i < l->n; i++)
		spawn(l, &l->w[i]);
}

/* Cron duty: reaps local workers that ended and starts them again, slower
 * each time one keeps dying. */
static void locals_cron(tird *d, locals *l)
{
	double now = store_now();
	for (int i = 0; i < l->n; i++) {
		local_worker *w = &l->w[i];
		int st;
		if (w->pid > 0 && waitpid(w->pid, &st, WNOHANG) == w->pid) {
			log_warn("local worker for %s (pid %d) ended: %s %d", w->target, (int)w->pid,
				 WIFSIGNALED(st) ? "signal" : "status",
				 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			w->pid = 0;
			if (now - w->started > 60)
				w->restarts = 0;
			w->restarts++;
			w->started = now;
		}
		double backoff = w->restarts < 6 ? (double)(1 << w->restarts) : 60;
		if (w->pid == 0 && !atomic_load(&d->stopping) && now - w->started >= backoff)
			spawn(l, w);
	}
}

static void locals_stop(locals *l)
{
	for (int i = 0; i < l->n; i++)
		if (l->w[i].pid > 0)
			kill(l->w[i].pid, SIGTERM);
	for (int tries = 0; tries < 50; tries++) {
		int left = 0;
		for (int i = 0; i < l->n; i++)
			if (l->w[i].pid > 0) {
				if (waitpid(l->w[i].pid, NULL, WNOHANG) == l->w[i].pid)
					l->w[i].pid = 0;
				else
					left++;
			}
		if (!left)
			break;
		struct timespec ts = { 0, 100000000L };
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < l->n; i++)
		if (l->w[i].pid > 0) {
			kill(l->w[i].pid, SIGKILL);
			waitpid(l->w[i].pid, NULL, 0);
		}
	if (l->envp) {
		for (char **e = l->envp; *e; e++)
			if (!strncmp(*e, "TIRD_TOKEN=", 11))
				free(*e);
		free(l->envp);
	}
}

/* ---- cron ------------------------------------------------------------------------ */

/* Everything periodic, once a second from the main thread:
 *   - workers silent past lease_s lose their leases (re-queued batches);
 *   - queued jobs no live worker serves count their wait, and fail past
 *     worker_wait_s; jobs whose start or end the store refused are tried
 *     again (jobs_cron);
 *   - cost models another replica wrote a newer version of are read
 *     again, and those that learnt enough, or long enough ago, are
 *     written (models_cron);
 *   - local workers that died are started again (with back-off). */
static void cron(tird *d, locals *l)
{
	workers_cron(d->workers);
	jobs_cron(d->jobs);
	models_cron(d, false);
	locals_cron(d, l);
}

/* ---- settings --------------------------------------------------------------------- */

static int parse_flags(tird_config *c, int argc, char **argv)
{
	char msg[512];
	const char *config = NULL;
	for (int i = 1; i < argc; i++)       /* the config file first */
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			config = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			config = argv[i] + 9;
	if (config && config_load(c, config, msg, sizeof msg)) {
		fprintf(stderr, "tird: %s\n", msg);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			config_usage();
			return 0;
		}
		if (!strcmp(a, "--version")) {
			printf("tird %s\n", PACKAGE_VERSION);
			return 0;
		}
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "tird: unexpected argument '%s' (try tird --help)\n", a);
			return 2;
		}
		char name[64];
		const char *eq = strchr(a, '='), *value;
		size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (nl >= sizeof name) {
			fprintf(stderr, "tird: unknown option '%s' (try tird --help)\n", a);
			return 2;
		}
		memcpy(name, a + 2, nl);
		name[nl] = '\0';
		for (char *p = name; *p; p++)
			if (*p == '-')
				*p = '_';
		if (eq) {
			value = eq + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			fprintf(stderr, "tird: %s needs a value\n", a);
			return 2;
		}
		if (!strcmp(name, "config"))
			continue;
		if (config_set(c, name, value, msg, sizeof msg)) {
			fprintf(stderr, "tird: %s (try tird --help)\n", msg);
			return 2;
		}
	}
	if (config_finish(c, msg, sizeof msg)) {
		fprintf(stderr, "tird: %s\n", msg);
		return 2;
	}
	return -1;                 /* go on */
}

int main(int argc, char **argv)
{
	tird d;
	memset(&d, 0, sizeof d);
	config_defaults(&d.cfg);
	int rc = parse_flags(&d.cfg, argc, argv);
	if (rc >= 0) {
		config_free(&d.cfg);
		return rc;
	}
	d.started = store_now();
	lease_replica_id(d.replica, sizeof d.replica, d.started);

	/* every thread inherits this mask; the main thread takes the signals */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	char msg[512];
	store_error serr;
	tir_error terr = { "" };
	locals l = { 0 };
	const char *failed = NULL;
	rc = 1;
	d.listen_fd = -1;
	if (http_bind(&d, msg, sizeof msg)) {
		failed = "http";
		goto out;
	}
	if (!(d.db = store_open(d.cfg.db, &serr))) {
		failed = "store";
		snprintf(msg, sizeof msg, "%s", serr.msg);
		goto out;
	}
	if (tir_target_parse("cpu", &d.cpu, &terr) ||
	    store_target_put(d.db, d.cpu.key, "cpu", &serr)) {
		failed = "cpu target";
		snprintf(msg, sizeof msg, "%s", terr.msg[0] ? terr.msg : serr.msg);
		goto out;
	}
	d.workers = workers_new(&d);
	d.leases = leases_new(&d);
	api_init(&d);
	if (models_load(&d, msg, sizeof msg)) {
		failed = "cost model seed";
		goto out;
	}
	if (!(d.jobs = jobs_start(&d, msg, sizeof msg))) {
		failed = "jobs";
		goto out;
	}
	if (leases_start(d.leases, msg, sizeof msg)) {
		failed = "leases";
		goto out;
	}
	if (http_start(&d, msg, sizeof msg)) {
		failed = "http";
		goto out;
	}
	log_info("tird %s listening on http://%s:%d (db %s, schema %d, cpu %s, replica %s%s)",
		 PACKAGE_VERSION, d.cfg.host, d.cfg.port, store_location(d.db), store_schema_version(d.db),
		 d.cpu.key, d.replica, d.cfg.ntokens ? ", writes need a token of their scope" : "");
	if (d.cfg.ntokens && !d.cfg.token && strcmp(d.cfg.local_workers, "none"))
		log_warn("no token of the token file has the worker scope: the local workers "
			 "cannot register");
	locals_start(&d, &l);

	for (;;) {
		struct timespec second = { 1, 0 };
		int sig = sigtimedwait(&sigs, NULL, &second);
		if (sig == SIGTERM || sig == SIGINT) {
			log_info("%s: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			break;
		}
		if (sig == SIGHUP)
			log_info("SIGHUP: nothing to reload (restart tird to change settings)");
		cron(&d, &l);
	}
	rc = 0;
out:
	if (failed)
		log_error("%s: %s", failed, msg);
	atomic_store(&d.stopping, 1);
	if (d.workers)
		workers_wake(d.workers);
	locals_stop(&l);
	jobs_stop(d.jobs);         /* running jobs go back to queued */
	leases_stop(d.leases);     /* after the jobs left running: their claims ended */
	http_stop(&d);
	if (d.db && d.models) {
		models_cron(&d, true);     /* what the models learnt since their last write */
		models_release(&d);
	}
	leases_free(d.leases);
	jobs_free(d.jobs);
	workers_free(d.workers);
	api_free(&d);
	models_free(&d);
	store_close(d.db);
	if (!failed)
		log_info("stopped");
	config_free(&d.cfg);
	return rc;
}
