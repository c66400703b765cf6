/*
 * lease.c — replicas: this tird's id, its claims of jobs (job leases) and
 * the lease thread that keeps them.
 *
 * Several tird replicas may share one database (PostgreSQL; store_shared).
 * A job is run by one replica at a time, the one whose claim the store
 * holds (store_job_claim: owner = this replica's id, lease_until).  The
 * lease thread renews every claim this replica holds each
 * job_lease_renew_s, to now + job_lease_s; a claim the store no longer
 * holds for us (another replica took the job over after our lease passed:
 * we were stopped or stalled) is marked lost, and its job told to stop
 * (its cancel flag): the tuning thread then drops the job without writing
 * its state, and store_batch stores no more of its records (lease_held).
 * A renewal also reads the job's cancel request, which a user may have
 * made on any replica (store_job_request_cancel): the job is told to stop.
 *
 * The same thread, on the same tick, takes into memory the claimable jobs
 * this replica could run (jobs_adopt: queued by another replica, or running
 * under a lease that passed, its owner dead), and keeps the writer leases
 * of the cost models this replica writes (models_renew).  On SQLite, one
 * replica, the same code runs: a claim and a renewal are one UPDATE each.
 *
 * Fencing is by time as well as by the store: lease_held trusts the lease
 * without asking the store only while more than one renewal period of it is
 * left by this replica's clock; past that it renews at once, so a replica
 * woken from a stop longer than its lease learns it lost the job before it
 * stores anything.  Replicas on several hosts need clocks in step to well
 * under job_lease_renew_s.
 *
 * Ownership: the lease list is the thread's and guarded by ls->mu; a lease
 * is made by lease_claim and freed by lease_drop (its job's thread) or at
 * leases_stop.  Lock order: the jobs' mutex, then ls->mu, then the store's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tird.h"

struct job_lease {
	int64_t id;                /* the job */
	double until;              /* as last written to the store */
	bool lost;                 /* the store holds it for another replica */
	bool cancel_requested;     /* a user asked the job to stop */
	atomic_int *cancel;        /* the job's cancel flag, set on either */
	struct job_lease *next;
};

struct leases {
	tird *d;
	pthread_mutex_t mu;
	pthread_cond_t wake;       /* stopping */
	bool stopping;
	job_lease *list;
	pthread_t thread;
	bool started;
};

void lease_replica_id(char *out, size_t n, double started)
{
	char host[64];
	if (gethostname(host, sizeof host))
		snprintf(host, sizeof host, "unknown");
	host[sizeof host - 1] = '\0';
	snprintf(out, n, "%s:%ld:%.0f", host, (long)getpid(), started);
}

/* Renews l (ls->mu held): 1 held, 0 lost (marked, its job told to stop),
 * -1 the store failed (l unchanged; the time left decides). */
static int do_renew(leases *ls, job_lease *l, double now)
{
	tird *d = ls->d;
	store_error err;
	bool cancel = false;
	double until = now + (double)d->cfg.job_lease_s;
	int rc = store_job_renew(d->db, l->id, d->replica, until, &cancel, &err);
	if (rc < 0) {
		log_warn("job %lld: lease not renewed: %s", (long long)l->id, err.msg);
		return -1;
	}
	if (rc == 0) {
		if (!l->lost)
			log_warn("job %lld: lease lost: another replica took the job over (this "
				 "one was stalled past its lease); it stops here without writing "
				 "its state", (long long)l->id);
		l->lost = true;
		atomic_store(l->cancel, 1);
		return 0;
	}
	l->until = until;
	if (cancel && !l->cancel_requested) {
		log_info("job %lld: cancel requested (through the database)", (long long)l->id);
		l->cancel_requested = true;
		atomic_store(l->cancel, 1);
	}
	return 1;
}

int lease_claim(leases *ls, int64_t id, atomic_int *cancel, job_lease **out,
		store_job *was, store_error *err)
{
	tird *d = ls->d;
	double now = store_now(), until = now + (double)d->cfg.job_lease_s;
	*out = NULL;
	int rc = store_job_claim(d->db, id, d->replica, now, until, was, err);
	if (rc != 1)
		return rc;
	job_lease *l = tird_xcalloc(1, sizeof *l);
	l->id = id;
	l->until = until;
	l->cancel = cancel;
	pthread_mutex_lock(&ls->mu);
	l->next = ls->list;
	ls->list = l;
	pthread_mutex_unlock(&ls->mu);
	*out = l;
	return 1;
}

bool lease_held(leases *ls, job_lease *l)
{
	if (!l)
		return true;       /* no claim (a job not run under a lease) */
	pthread_mutex_lock(&ls->mu);
	double now = store_now();
	if (!l->lost && now + (double)ls->d->cfg.job_lease_renew_s >= l->until &&
	    do_renew(ls, l, now) < 0 && now >= l->until)
		l->lost = true;    /* the store cannot say, and the lease has passed */
	bool held = !l->lost;
	pthread_mutex_unlock(&ls->mu);
	return held;
}

bool lease_lost(leases *ls, const job_lease *l)
{
	if (!l)
		return false;
	pthread_mutex_lock(&ls->mu);
	bool lost = l->lost;
	pthread_mutex_unlock(&ls->mu);
	return lost;
}

void lease_drop(leases *ls, job_lease *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&ls->mu);
	for (job_lease **p = &ls->list; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			break;
		}
	pthread_mutex_unlock(&ls->mu);
	free(l);
}

/* The lease thread: every job_lease_renew_s, (1) renews this replica's
 * claims, marking those lost; (2) adopts the claimable jobs it could run
 * (jobs_adopt); (3) renews its cost models' writer leases (models_renew). */
static void *lease_thread(void *arg)
{
	leases *ls = arg;
	tird *d = ls->d;
	pthread_mutex_lock(&ls->mu);
	while (!ls->stopping) {
		double now = store_now();
		for (job_lease *l = ls->list; l; l = l->next)
			if (!l->lost)
				do_renew(ls, l, now);
		pthread_mutex_unlock(&ls->mu);
		jobs_adopt(d->jobs);
		models_renew(d);
		pthread_mutex_lock(&ls->mu);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += (time_t)d->cfg.job_lease_renew_s;
		while (!ls->stopping)
			if (pthread_cond_timedwait(&ls->wake, &ls->mu, &until) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&ls->mu);
	return NULL;
}

leases *leases_new(tird *d)
{
	leases *ls = tird_xcalloc(1, sizeof *ls);
	ls->d = d;
	pthread_mutex_init(&ls->mu, NULL);
	pthread_cond_init(&ls->wake, NULL);
	return ls;
}

int leases_start(leases *ls, char *msg, size_t n)
{
	if (pthread_create(&ls->thread, NULL, lease_thread, ls)) {
		snprintf(msg, n, "cannot start the lease thread");
		return -1;
	}
	ls->started = true;
	return 0;
}

void leases_stop(leases *ls)
{
	if (!ls || !ls->started)
		return;
	pthread_mutex_lock(&ls->mu);
	ls->stopping = true;
	pthread_cond_broadcast(&ls->wake);
	pthread_mutex_unlock(&ls->mu);
	pthread_join(ls->thread, NULL);
	ls->started = false;
}

void leases_free(leases *ls)
{
	if (!ls)
		return;
	leases_stop(ls);
	while (ls->list) {         /* claims of jobs whose end the store refused */
		job_lease *l = ls->list;
		ls->list = l->next;
		free(l);
	}
	pthread_cond_destroy(&ls->wake);
	pthread_mutex_destroy(&ls->mu);
	free(ls);
}
