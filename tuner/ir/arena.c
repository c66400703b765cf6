/*
 * arena.c — memory for libtir: a bump arena per program (freed whole when the
 * candidate is done), the fatal-on-failure allocators, and a growable string.
 *
 * A search makes and frees thousands of programs a second, each a few arena
 * chunks.  Handed back to malloc, the chunks at the top of the heap are given
 * back to the kernel and faulted in again by the next program (with a TLB
 * shootdown on every core each time), which took more than half of the time
 * of computing features.  So each thread keeps up to CHUNK_CACHE freed chunks
 * of the standard size for its next arenas, and frees them when it exits.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ir.h"

struct tir_arena_chunk {
	tir_arena_chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char data[];
};

static void oom(size_t n)
{
	fprintf(stderr, "libtir: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (!p)
		oom(n * m);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

enum { CHUNK_SIZE = 60000, CHUNK_CACHE = 32 };

typedef struct chunk_cache {
	tir_arena_chunk *head;
	int n;
} chunk_cache;

static _Thread_local chunk_cache cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_drop(void *p)
{
	chunk_cache *cc = p;
	while (cc->head) {
		tir_arena_chunk *next = cc->head->next;
		free(cc->head);
		cc->head = next;
	}
	cc->n = 0;
}

static void cache_key_make(void)
{
	if (pthread_key_create(&cache_key, cache_drop))
		abort();
}

/* Keeps chunk c for this thread's next arena, or frees it. */
static void chunk_put(tir_arena_chunk *c)
{
	if (c->size != CHUNK_SIZE || cache.n == CHUNK_CACHE) {
		free(c);
		return;
	}
	if (cache.n == 0) {   /* the key's value makes the thread's exit free the cache */
		pthread_once(&cache_once, cache_key_make);
		pthread_setspecific(cache_key, &cache);
	}
	c->next = cache.head;
	cache.head = c;
	cache.n++;
}

static tir_arena_chunk *chunk_get(size_t size)
{
	tir_arena_chunk *c = cache.head;
	if (size == CHUNK_SIZE && c) {
		cache.head = c->next;
		cache.n--;
	} else {
		c = xmalloc(sizeof *c + size);
		c->size = size;
	}
	return c;
}

void *arena_alloc(tir_arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	tir_arena_chunk *c = a->head;
	if (!c || c->size - c->used < n) {
		c = chunk_get(n > CHUNK_SIZE ? n : CHUNK_SIZE);
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	a->used += n;
	memset(p, 0, n);
	return p;
}

char *arena_strdup(tir_arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(arena_alloc(a, n), s, n);
}

char *arena_printf(tir_arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = arena_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

void arena_free(tir_arena *a)
{
	tir_arena_chunk *c = a->head;
	while (c) {
		tir_arena_chunk *next = c->next;
		chunk_put(c);
		c = next;
	}
	a->head = NULL;
	a->used = 0;
}

static void buf_reserve(tir_buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	b->s = xrealloc(b->s, cap);
	b->cap = cap;
}

void buf_puts(tir_buf *b, const char *s)
{
	size_t n = strlen(s);
	buf_reserve(b, n);
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

void buf_put(tir_buf *b, const void *p, size_t n)
{
	if (!n)
		return;
	buf_reserve(b, n);
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void buf_printf(tir_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	buf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void buf_indent(tir_buf *b, int depth)
{
	for (int i = 0; i < depth; i++)
		buf_puts(b, "    ");
}

char *buf_take(tir_buf *b)
{
	if (!b->s)
		return xstrdup("");
	char *s = b->s;
	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

int tir_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t k = write(fd, c, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}
