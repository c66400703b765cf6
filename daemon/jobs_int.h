/*
 * jobs_int.h — the job manager's own types, shared by its two halves and
 * by nothing else in daemon/ (tird.h declares the manager's interface):
 * jobs.c (the state machine, submission, queries, the tuning threads, start
 * and stop) and run.c (running one job: tir_tune, its records, its
 * progress).  A header of its own rather than tird.h, so that the rest of
 * the daemon still sees `jobs` as opaque.
 */
#ifndef TIRD_JOBS_INT_H
#define TIRD_JOBS_INT_H
#include "tird.h"

typedef struct job {
	int64_t id;
	tir_workload *w;
	char key[65];
	char *canonical;
	tir_target target;
	int trials, batch;
	store_search search;       /* cost_model "xgboost" or "random" */
	store_job_state state;
	int trials_done, errors;   /* in all for (workload, target), this run's errors */
	double best_us;
	atomic_int cancel;         /* set by a user or at shutdown; tir_tune reads it */
	long version;              /* bumped on every change, for long polls */
	char message[512];
	double created, started;
	double waiting_since;      /* queued with no live worker of its target since; 0: not */
	double queued_since;       /* queued in memory since (jobs_adopt) */
	double retry_at;           /* the store refused its start: not before this */
	int store_failures;        /* in a row, for the back-off */
	bool end_unstored;         /* it ended, the store refused the end: retried */
	store_job_state end;       /* ... that end */
	char end_msg[512];         /* ... and its message */
	job_lease *lease;          /* this replica's claim, while running (lease.c) */
	struct job *next;
} job;

struct jobs {
	tird *d;
	pthread_mutex_t mu;
	pthread_cond_t work;       /* a job was queued, or stopping */
	pthread_cond_t changed;    /* some job changed */
	job *active;               /* queued and running jobs, oldest first */
	/* set by jobs_stop under mu; atomic because job_run reads it without
	 * mu, after tir_tune returns (as it reads each job's cancel flag) */
	atomic_bool stopping;
	int nthreads;
	pthread_t *threads;
};

/* run.c: runs j (running, under its claim; js->mu not held) and returns
 * the state it ends in, with the message for the job in msg: done (a best
 * exists), failed, cancelled (a user, here or through the database), or
 * queued (tird stopping, or no worker of its target: it waits in the
 * queue).  A claim lost meanwhile ends it early, in whatever state: the
 * caller checks lease_lost first. */
store_job_state job_run(jobs *js, job *j, char *msg, size_t n);

#endif
