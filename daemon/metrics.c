/*
 * metrics.c — tird's counters and GET /metrics in the Prometheus text format.
 * Every name starts with tird_.  Counters are atomics bumped where the event
 * happens; gauges (jobs by state, queue depth, workers) are read when the
 * page is rendered.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tird.h"

const double tird_lat_bounds[TIRD_LAT_BUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
	0.01, 0.025, 0.1, 0.5, 2.5, 10,
};

void metrics_observe_http(tird_metrics *m, int route, int status, double seconds)
{
	if (route < 0 || route > 63)
		route = 63;
	int cls = status / 100;
	if (cls < 1 || cls > 5)
		cls = 5;
	atomic_fetch_add(&m->http_requests[route][cls], 1);
	int b = 0;
	while (b < TIRD_LAT_BUCKETS && seconds > tird_lat_bounds[b])
		b++;
	atomic_fetch_add(&m->http_lat_bucket[route][b], 1);
	atomic_fetch_add(&m->http_lat_sum_us[route], (unsigned long)(seconds * 1e6));
}

typedef struct buf {
	char *s;
	size_t len, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		b->cap = b->cap * 2 + (size_t)(n > 0 ? n : 0);
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			abort();
	}
}

char *metrics_render(tird *d)
{
	tird_metrics *m = &d->metrics;
	buf b = { malloc(8192), 0, 8192 };
	if (!b.s)
		abort();
	b.s[0] = '\0';

	int counts[STORE_JOB_NSTATES] = { 0 };
	jobs_counts(d->jobs, counts);
	put(&b, "# HELP tird_jobs Jobs in memory by state (queued, running).\n"
		"# TYPE tird_jobs gauge\n");
	for (int s = STORE_JOB_QUEUED; s <= STORE_JOB_RUNNING; s++)
		put(&b, "tird_jobs{state=\"%s\"} %d\n", store_job_state_name(s), counts[s]);
	put(&b, "# HELP tird_jobs_ended_total Jobs that ended since start, by state.\n"
		"# TYPE tird_jobs_ended_total counter\n");
	for (int s = STORE_JOB_DONE; s < STORE_JOB_NSTATES; s++)
		put(&b, "tird_jobs_ended_total{state=\"%s\"} %lu\n", store_job_state_name(s),
		    atomic_load(&m->jobs_ended[s]));
	put(&b, "# HELP tird_jobs_submitted_total Job submissions, new, joined or cached.\n"
		"# TYPE tird_jobs_submitted_total counter\n"
		"tird_jobs_submitted_total{outcome=\"new\"} %lu\n"
		"tird_jobs_submitted_total{outcome=\"joined\"} %lu\n"
		"tird_jobs_submitted_total{outcome=\"cached\"} %lu\n",
	    atomic_load(&m->jobs_submitted), atomic_load(&m->jobs_joined),
	    atomic_load(&m->jobs_cached));
	put(&b, "# HELP tird_trials_measured_total Measured candidates stored.\n"
		"# TYPE tird_trials_measured_total counter\n"
		"tird_trials_measured_total %lu\n", atomic_load(&m->trials));
	put(&b, "# HELP tird_compile_cache_hits_total Candidates workers did not compile again: "
		"the same source was built already (their compile cache).\n"
		"# TYPE tird_compile_cache_hits_total counter\n"
		"tird_compile_cache_hits_total %lu\n", atomic_load(&m->compile_cache_hits));
	put(&b, "# HELP tird_measure_errors_total Candidates that did not end ok, by kind.\n"
		"# TYPE tird_measure_errors_total counter\n");
	for (int s = 1; s < TIR_MEASURE_NSTATUSES && s < 8; s++)
		put(&b, "tird_measure_errors_total{kind=\"%s\"} %lu\n",
		    tir_measure_status_name((tir_measure_status)s),
		    atomic_load(&m->measure_errors[s]));
	put(&b, "# HELP tird_queue_depth Measurement batches waiting for a worker.\n"
		"# TYPE tird_queue_depth gauge\n"
		"tird_queue_depth %d\n", workers_queue_depth(d->workers));
	put(&b, "# HELP tird_batches_requeued_total Batches re-queued after a lost lease.\n"
		"# TYPE tird_batches_requeued_total counter\n"
		"tird_batches_requeued_total %lu\n", atomic_load(&m->batches_requeued));
	put(&b, "# HELP tird_workers Live measurement workers.\n"
		"# TYPE tird_workers gauge\n"
		"tird_workers %d\n", workers_live(d->workers));
	put(&b, "# HELP tird_best_cache_hits_total GET /v1/best answered from memory.\n"
		"# TYPE tird_best_cache_hits_total counter\n"
		"tird_best_cache_hits_total %lu\n", atomic_load(&m->best_cache_hits));
	put(&b, "# HELP tird_model_saves_total Cost-model blobs written to the database.\n"
		"# TYPE tird_model_saves_total counter\n"
		"tird_model_saves_total{kind=\"cpu\"} %lu\n"
		"tird_model_saves_total{kind=\"cuda\"} %lu\n",
		atomic_load(&m->model_saves[0]), atomic_load(&m->model_saves[1]));

	put(&b, "# HELP tird_http_requests_total HTTP requests by route and status class.\n"
		"# TYPE tird_http_requests_total counter\n");
	for (int r = 0; http_route_name(r); r++)
		for (int c = 1; c <= 5; c++) {
			unsigned long v = atomic_load(&m->http_requests[r][c]);
			if (v)
				put(&b, "tird_http_requests_total{route=\"%s\",code=\"%dxx\"} %lu\n",
				    http_route_name(r), c, v);
		}
	put(&b, "# HELP tird_http_request_duration_seconds HTTP request latency by route.\n"
		"# TYPE tird_http_request_duration_seconds histogram\n");
	for (int r = 0; http_route_name(r); r++) {
		unsigned long cum = 0, total = 0;
		for (int k = 0; k <= TIRD_LAT_BUCKETS; k++)
			total += atomic_load(&m->http_lat_bucket[r][k]);
		if (!total)
			continue;
		const char *name = http_route_name(r);
		for (int k = 0; k < TIRD_LAT_BUCKETS; k++) {
			cum += atomic_load(&m->http_lat_bucket[r][k]);
			put(&b, "tird_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %lu\n",
			    name, tird_lat_bounds[k], cum);
		}
		put(&b, "tird_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %lu\n"
			"tird_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
			"tird_http_request_duration_seconds_count{route=\"%s\"} %lu\n",
		    name, total, name, atomic_load(&m->http_lat_sum_us[r]) * 1e-6, name, total);
	}
	put(&b, "# HELP tird_uptime_seconds Seconds since tird started.\n"
		"# TYPE tird_uptime_seconds gauge\n"
		"tird_uptime_seconds %.0f\n", store_now() - d->started);
	return b.s;
}
