/* Bump allocator in chained blocks plus a cleanup list; see arena.h. */
#include "core/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_SIZE (64 * 1024)

struct block {
	struct block *next;
	size_t used, cap;
	max_align_t data[];
};

struct cleanup {
	struct cleanup *next;
	ah_cleanup_fn fn;
	void *p;
};

struct ah_arena {
	struct block *head;      /* current block; the first block is the tail */
	struct cleanup *hooks;
};

static struct block *block_new(size_t cap)
{
	struct block *b = malloc(sizeof(*b) + cap);
	if (!b) {
		fputs("agenthost: out of memory\n", stderr);
		abort();
	}
	b->next = NULL;
	b->used = 0;
	b->cap = cap;
	return b;
}

ah_arena *ah_arena_new(void)
{
	ah_arena *a = calloc(1, sizeof(*a));
	if (!a)
		abort();
	a->head = block_new(BLOCK_SIZE);
	return a;
}

static void run_hooks(ah_arena *a)
{
	while (a->hooks) {
		struct cleanup *c = a->hooks;
		a->hooks = c->next;
		c->fn(c->p);
	}
}

void ah_arena_reset(ah_arena *a)
{
	run_hooks(a);
	while (a->head->next) {
		struct block *b = a->head;
		a->head = b->next;
		free(b);
	}
	a->head->used = 0;
}

void ah_arena_destroy(ah_arena *a)
{
	if (!a)
		return;
	ah_arena_reset(a);
	free(a->head);
	free(a);
}

void *ah_alloc(ah_arena *a, size_t n)
{
	size_t align = sizeof(max_align_t);
	n = (n + align - 1) & ~(align - 1);
	if (n == 0)
		n = align;
	struct block *b = a->head;
	if (b->cap - b->used < n) {
		/* Big allocations get a block of their own, inserted below the current
		 * one so the current block's free space is not wasted. */
		struct block *nb = block_new(n > BLOCK_SIZE / 4 ? n : BLOCK_SIZE);
		if (n > BLOCK_SIZE / 4) {
			nb->next = b->next;
			b->next = nb;
			nb->used = n;
			memset(nb->data, 0, n);
			return nb->data;
		}
		nb->next = b;
		a->head = b = nb;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	memset(p, 0, n);
	return p;
}

char *ah_strndup(ah_arena *a, const char *s, size_t n)
{
	char *p = ah_alloc(a, n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *ah_strdup(ah_arena *a, const char *s)
{
	return s ? ah_strndup(a, s, strlen(s)) : NULL;
}

char *ah_sprintf(ah_arena *a, const char *fmt, ...)
{
	va_list ap;
	char probe[1];
	va_start(ap, fmt);
	int n = vsnprintf(probe, sizeof(probe), fmt, ap);
	va_end(ap);
	if (n < 0)
		return ah_strdup(a, "");
	char *p = ah_alloc(a, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void ah_arena_on_cleanup(ah_arena *a, ah_cleanup_fn fn, void *p)
{
	struct cleanup *c = ah_alloc(a, sizeof(*c));
	c->fn = fn;
	c->p = p;
	c->next = a->hooks;
	a->hooks = c;
}
