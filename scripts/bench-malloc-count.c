/* Counts malloc/calloc/realloc calls; preloaded by scripts/bench to check that reads allocate nothing. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdatomic.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_long count;
void *malloc(size_t n) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { atomic_fetch_add_explicit(&count, 1, memory_order_relaxed); return __libc_realloc(p, n); }
long bench_malloc_count(void) { return atomic_load(&count); }
