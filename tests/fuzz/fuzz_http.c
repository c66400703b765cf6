/*
 * fuzz_http.c — the HTTP request path of tird: every input is sent as raw
 * bytes over a loopback socket to a real tird started in this process
 * (daemon/http.c on libmicrohttpd, the route table, access by token scope,
 * bodies, every handler of api.c down to jobs, workers, trust and the
 * store), with a temporary SQLite database.
 *
 * The tird is started once (LLVMFuzzerInitialize) as main.c starts one,
 * with a token file of four tokens (the seeds carry them: admin, submit,
 * worker, read), no local workers, one tuning thread, short leases and
 * waits, and no per-address connection limit (every input comes from
 * 127.0.0.1).  A thread does main.c's cron duties once a second, keeps one
 * registered worker alive for the target cpu:x86_64+avx2+fma, and checks
 * that tird still answers GET /metrics (which takes the jobs' and the
 * workers' locks) within 10 s, else aborts: a deadlock is a crash too.
 * Worker ids are random, so an input's "w-000000000000" is replaced by that
 * worker's id before it is sent (the seeds lease, heartbeat and post
 * results as it).
 *
 * Per input: connect, send, shut the write side (so that an incomplete
 * request ends at once instead of waiting for the idle timeout), read the
 * answers until tird closes or 1.5 s passed (a long poll may wait longer:
 * its connection is left to finish on its own).  Checked on every answer
 * read whole: it is HTTP; an answer of tird's own (one with a Content-Type)
 * is no 5xx but 503, and with a JSON content type it is JSON, an error
 * {"error": {"code", "message"}}.  (libmicrohttpd answers a few malformed
 * heads itself, in HTML with no Content-Type, 505 among them; http.c's top
 * comment lists them.)
 *
 * At exit tird is stopped as main.c stops it, so LeakSanitizer sees what a
 * clean shutdown leaves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cJSON.h>
#include "tird.h"
#include "fuzz.h"

#define WORKER_TARGET "cpu:x86_64+avx2+fma"
#define WORKER_PLACEHOLDER "w-000000000000"

static tird d;
static char dir[64];
static pthread_t cron_tid;
static atomic_int cron_stop;
static pthread_mutex_t wid_mu = PTHREAD_MUTEX_INITIALIZER;
static char wid[48];               /* the harness's worker, under wid_mu */

static const char tokens[] =
	"fuzz-admin-0123456789\n"
	"fuzz-submit-0123456789 read,submit submitter\n"
	"fuzz-worker-0123456789 worker fuzzworker\n"
	"fuzz-read-0123456789 read reader\n";

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "fuzz_http: %s: %s\n", what, msg);
	exit(1);
}

static void set(const char *name, const char *value)
{
	char msg[256];
	if (config_set(&d.cfg, name, value, msg, sizeof msg))
		die("config", msg);
}

/* Registers the harness's worker (again, after an input made it leave). */
static void register_worker(void)
{
	tir_target t;
	tir_error te;
	tird_error e = { 0 };
	worker_info wi;
	const tird_token *tok = NULL;
	for (int i = 0; i < d.cfg.ntokens; i++)
		if (!strcmp(d.cfg.tokens[i].name, "fuzzworker"))
			tok = &d.cfg.tokens[i];
	if (tir_target_parse(WORKER_TARGET, &t, &te))
		die("worker target", te.msg);
	if (workers_register(d.workers, &t, "fuzz", tok, "127.0.0.1", &wi, &e))
		die("registering the worker", e.msg);
	pthread_mutex_lock(&wid_mu);
	snprintf(wid, sizeof wid, "%s", wi.id);
	pthread_mutex_unlock(&wid_mu);
	FUZZ_ASSERT(strlen(wid) == strlen(WORKER_PLACEHOLDER), "worker id %s", wid);
}

static int connect_tird(double timeout_s)
{
	struct sockaddr_in sa = { 0 };
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)d.cfg.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = { (time_t)timeout_s, 0 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		close(fd);
		return -1;
	}
	return fd;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Everything tird sends on fd until it closes or timeout_s passed: *n
 * bytes, malloc'd and NUL-terminated. */
static char *read_all(int fd, double timeout_s, size_t *n)
{
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	FUZZ_ASSERT(buf, "out of memory");
	double until = now_s() + timeout_s;
	for (;;) {
		double left = until - now_s();
		struct pollfd p = { fd, POLLIN, 0 };
		if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			break;
		if (len + 1 >= cap) {
			if (cap >= (64u << 20))   /* enough to check; the rest is dropped */
				break;
			buf = realloc(buf, cap *= 2);
			FUZZ_ASSERT(buf, "out of memory");
		}
		ssize_t got = recv(fd, buf + len, cap - len - 1, 0);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	buf[len] = '\0';
	*n = len;
	return buf;
}

/* The answers in buf (one per request of the input, kept alive), each
 * checked while it is whole. */
static void check_answers(const char *buf, size_t n, const char *input, size_t input_len)
{
	const char *p = buf, *end = buf + n;
	bool head = memmem(input, input_len, "HEAD ", 5) != NULL;   /* an answer may lack its body */
	while (p < end) {
		const char *head_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		if (!head_end)
			return;            /* cut short by the deadline */
		FUZZ_ASSERT(!strncmp(p, "HTTP/1.", 7), "not an HTTP answer: %.200s", p);
		int status = atoi(p + 9);
		FUZZ_ASSERT(status >= 100 && status < 600, "status %d", status);
		long clen = -1;
		bool json = false, chunked = false, typed = false;
		for (const char *l = strstr(p, "\r\n") + 2; l < head_end; l = strstr(l, "\r\n") + 2) {
			if (!strncasecmp(l, "Content-Length:", 15))
				clen = atol(l + 15);
			else if (!strncasecmp(l, "Content-Type:", 13))
				typed = true;
			if (!strncasecmp(l, "Content-Type: application/json", 30))
				json = true;
			else if (!strncasecmp(l, "Transfer-Encoding: chunked", 26))
				chunked = true;
		}
		/* tird's own answers have a type; libmicrohttpd's (HTML) have none */
		FUZZ_ASSERT(!typed || status < 500 || status == 503,
			    "answered %d to\n%.2000s\n---\n%.2000s", status, input, p);
		const char *body = head_end + 4;
		/* the answer to a HEAD has the headers of the GET and no body
		 * (RFC 9110 9.3.2): the next answer follows its headers */
		if (head && clen > 0 && !strncmp(body, "HTTP/1.", 7)) {
			p = body;
			continue;
		}
		if (chunked || clen < 0 || body + clen > end)
			return;            /* streamed, or not all read: not checked */
		if (json && clen > 0) {
			cJSON *j = cJSON_ParseWithLength(body, (size_t)clen);
			FUZZ_ASSERT(j, "a JSON answer that is not JSON: %.*s", (int)clen, body);
			if (status >= 400) {
				cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
				FUZZ_ASSERT(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "code")) &&
					    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")),
					    "an error answer without error.code and error.message: %.*s",
					    (int)clen, body);
			}
			cJSON_Delete(j);
		}
		p = body + clen;
	}
}

/* A request of the watchdog: whether tird answered GET /metrics. */
static bool answers(void)
{
	int fd = connect_tird(10);
	if (fd < 0)
		return false;
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	bool ok = send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1);
	size_t n = 0;
	char *buf = ok ? read_all(fd, 10, &n) : NULL;
	ok = buf && !strncmp(buf, "HTTP/1.1 200", 12);
	free(buf);
	close(fd);
	return ok;
}

/* main.c's cron, once a second, and the harness's worker and watchdog. */
static void *cron_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&cron_stop)) {
		for (int i = 0; i < 10 && !atomic_load(&cron_stop); i++) {
			struct timespec ts = { 0, 100000000L };
			nanosleep(&ts, NULL);
		}
		if (atomic_load(&cron_stop))
			break;
		workers_cron(d.workers);
		jobs_cron(d.jobs);
		models_cron(&d, false);
		char id[48];
		pthread_mutex_lock(&wid_mu);
		snprintf(id, sizeof id, "%s", wid);
		pthread_mutex_unlock(&wid_mu);
		const tird_token *tok = NULL;
		for (int i = 0; i < d.cfg.ntokens; i++)
			if (!strcmp(d.cfg.tokens[i].name, "fuzzworker"))
				tok = &d.cfg.tokens[i];
		tird_error e = { 0 };
		if (workers_heartbeat(d.workers, id, tok, &e))
			register_worker();
		if (!answers()) {
			fprintf(stderr, "fuzz_http: tird has not answered GET /metrics in 10 s\n");
			abort();
		}
	}
	return NULL;
}

/* main.c's shutdown. */
static void stop_tird(void)
{
	atomic_store(&cron_stop, 1);
	pthread_join(cron_tid, NULL);
	atomic_store(&d.stopping, 1);
	workers_wake(d.workers);
	jobs_stop(d.jobs);
	leases_stop(d.leases);
	http_stop(&d);
	models_cron(&d, true);
	models_release(&d);
	leases_free(d.leases);
	jobs_free(d.jobs);
	workers_free(d.workers);
	api_free(&d);
	models_free(&d);
	store_close(d.db);
	config_free(&d.cfg);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_http: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char path[128], msg[512];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/fuzz-http.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp", strerror(errno));
	snprintf(path, sizeof path, "%s/token", dir);
	FILE *f = fopen(path, "w");
	if (!f || fputs(tokens, f) < 0 || fclose(f))
		die(path, strerror(errno));
	memset(&d, 0, sizeof d);
	config_defaults(&d.cfg);
	set("token_file", path);
	snprintf(path, sizeof path, "%s/tird.db", dir);
	set("db", path);
	set("listen", "127.0.0.1:0");
	set("local_workers", "none");
	set("log_level", getenv("FUZZ_HTTP_LOG") ? getenv("FUZZ_HTTP_LOG") : "error");
	set("tuning_threads", "1");
	set("lease_s", "2");
	set("worker_wait_s", "5");
	set("max_queued_jobs", "64");
	set("max_connections_per_ip", "0");
	set("idle_timeout_s", "5");
	set("max_import_body", "1048576");
	set("model_seed", "none");
	if (config_finish(&d.cfg, msg, sizeof msg))
		die("config", msg);
	signal(SIGPIPE, SIG_IGN);
	d.started = store_now();
	lease_replica_id(d.replica, sizeof d.replica, d.started);
	d.listen_fd = -1;
	store_error serr;
	tir_error terr = { "" };
	if (http_bind(&d, msg, sizeof msg))
		die("http", msg);
	if (!(d.db = store_open(d.cfg.db, &serr)))
		die("store", serr.msg);
	if (tir_target_parse("cpu", &d.cpu, &terr) ||
	    store_target_put(d.db, d.cpu.key, "cpu", &serr))
		die("cpu target", terr.msg[0] ? terr.msg : serr.msg);
	d.workers = workers_new(&d);
	d.leases = leases_new(&d);
	api_init(&d);
	if (models_load(&d, msg, sizeof msg))
		die("cost models", msg);
	if (!(d.jobs = jobs_start(&d, msg, sizeof msg)))
		die("jobs", msg);
	if (leases_start(d.leases, msg, sizeof msg))
		die("leases", msg);
	if (http_start(&d, msg, sizeof msg))
		die("http", msg);
	register_worker();
	if (pthread_create(&cron_tid, NULL, cron_main, NULL))
		die("cron thread", strerror(errno));
	atexit(stop_tird);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = fuzz_text(data, size);
	size_t pl = strlen(WORKER_PLACEHOLDER);
	pthread_mutex_lock(&wid_mu);
	for (char *p = in; (p = memmem(p, size - (size_t)(p - in), WORKER_PLACEHOLDER, pl)); p += pl)
		memcpy(p, wid, pl);
	pthread_mutex_unlock(&wid_mu);
	int fd = connect_tird(5);
	FUZZ_ASSERT(fd >= 0, "cannot connect to tird: %s", strerror(errno));
	size_t sent = 0;
	while (sent < size) {
		ssize_t k = send(fd, in + sent, size - sent, MSG_NOSIGNAL);
		if (k <= 0)
			break;     /* tird closed early (an answered error): fine */
		sent += (size_t)k;
	}
	shutdown(fd, SHUT_WR);
	size_t n;
	double t0 = now_s();
	char *out = read_all(fd, 1.5, &n);
	close(fd);
	if (now_s() - t0 > 0.1)
		FUZZ_NOTE("%.2f s for %zu bytes of answer to %.80s", now_s() - t0, n, in);
	check_answers(out, n, in, size);
	free(out);
	free(in);
	return 0;
}
