/*
 * parallel.c — tir_parallel_for: independent steps (the candidates of a
 * search round replayed and validated, a batch's builders, the cost model's
 * feature rows) spread over the machine's cores with pthreads.  Each index is done exactly once, by
 * whichever thread takes it next; the caller works too.  What a step writes
 * goes to its own slot, so results never depend on the number of threads.
 */
#include <pthread.h>
#include <unistd.h>
#include "ir.h"

typedef struct pfor {
	void (*fn)(void *ctx, int i);
	void *ctx;
	int n, next;
	pthread_mutex_t lock;
} pfor;

static void *worker(void *arg)
{
	pfor *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->lock);
		int i = p->next++;
		pthread_mutex_unlock(&p->lock);
		if (i >= p->n)
			return NULL;
		p->fn(p->ctx, i);
	}
}

int tir_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

void tir_parallel_for(int n, int threads, void (*fn)(void *ctx, int i), void *ctx)
{
	pfor p = { fn, ctx, n, 0, PTHREAD_MUTEX_INITIALIZER };
	pthread_t tid[TIR_MAX_THREADS];
	if (threads <= 0)
		threads = tir_cores();
	if (threads > TIR_MAX_THREADS)
		threads = TIR_MAX_THREADS;
	if (threads > n)
		threads = n;
	int started = 0;
	for (int i = 1; i < threads; i++)
		if (pthread_create(&tid[started], NULL, worker, &p) == 0)
			started++;
	worker(&p);
	for (int i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_mutex_destroy(&p.lock);
}
